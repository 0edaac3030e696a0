/*
** optim/grad_scaler.c: gradient scaling for float16 training
** (kiln/optim.h; torch.cuda.amp.GradScaler's algorithm and defaults).
**
** The scale and growth tracker follow torch's _amp_update_scale_: the scale
** is float32 arithmetic (scale * growth, scale * backoff in float32); the
** unscale multiplies by float32(1 / float64(scale)), as torch's
** scale.double().reciprocal().float(). Per optimizer the scaler remembers,
** until the next update, whether it was unscaled or stepped and whether its
** gradients held inf or NaN.
*/
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "kiln/autograd.h"
#include "kiln/ops.h"
#include "kiln/optim.h"
#include "optim/optim_int.h"

typedef enum opt_stage { READY, UNSCALED, STEPPED } opt_stage;

typedef struct opt_rec {
  const kn_optimizer *opt;
  opt_stage stage;
  bool found_inf;
} opt_rec;

struct kn_grad_scaler {
  float scale;
  float growth, backoff;
  int64_t interval, tracker;
  int n, cap;
  opt_rec *recs;
};

static double or_default(double v, double d) { return v == 0 ? d : v; }

kn_grad_scaler *kn_grad_scaler_new(const kn_grad_scaler_options *o) {
  kn_grad_scaler_options d = o ? *o : (kn_grad_scaler_options){0};
  double init = or_default(d.init_scale, 65536.0), g = or_default(d.growth_factor, 2.0);
  double b = or_default(d.backoff_factor, 0.5);
  int64_t iv = d.growth_interval ? d.growth_interval : 2000;
  const char *bad = !(init > 0 && isfinite(init)) ? "init_scale must be a positive number"
                    : !(g > 1 && isfinite(g))      ? "The growth factor must be > 1.0."
                    : !(b > 0 && b < 1)            ? "The backoff factor must be < 1.0."
                    : iv <= 0                      ? "growth_interval must be > 0"
                                                   : NULL;
  if (bad) {
    kn__error(KN_EINVAL, "kn_grad_scaler_new: %s (got init_scale %g, growth_factor %g, "
              "backoff_factor %g, growth_interval %lld)", bad, init, g, b, (long long)iv);
    return NULL;
  }
  kn_grad_scaler *s = calloc(1, sizeof *s);
  if (!s) {
    kn__oom();
    return NULL;
  }
  *s = (kn_grad_scaler){(float)init, (float)g, (float)b, iv, 0, 0, 0, NULL};
  return s;
}

void kn_grad_scaler_free(kn_grad_scaler *s) {
  if (!s) return;
  free(s->recs);
  free(s);
}

double kn_grad_scaler_get_scale(const kn_grad_scaler *s) { return s ? s->scale : NAN; }

kn_tensor *kn_grad_scaler_scale(kn_grad_scaler *s, kn_tensor *loss) {
  if (!s) {
    kn__error(KN_EINVAL, "kn_grad_scaler_scale: expected a scaler, found NULL");
    return NULL;
  }
  return kn_mul(loss, kn_scalar_tensor(kn_float(s->scale), KN_FLOAT32));
}

/* opt's record (added READY on first sight), or NULL on OOM. */
static opt_rec *rec_of(kn_grad_scaler *s, const kn_optimizer *opt) {
  for (int i = 0; i < s->n; i++)
    if (s->recs[i].opt == opt) return &s->recs[i];
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 4;
    opt_rec *r = realloc(s->recs, (size_t)nc * sizeof *r);
    if (!r) return NULL;
    s->recs = r;
    s->cap = nc;
  }
  s->recs[s->n] = (opt_rec){opt, READY, false};
  return &s->recs[s->n++];
}

/* Does t hold inf or NaN? */
static bool non_finite(kn_tensor *t) {
  kn_tensor *c = kn_to(kn_contiguous(t), KN_FLOAT64);
  const double *p = c ? kn_data(c) : NULL;
  int64_t n = c ? kn_numel(c) : 0;
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(p[i])) return true;
  return false;
}

static kn_status unscale(kn_grad_scaler *s, kn_optimizer *opt, opt_rec *r) {
  float inv = (float)(1.0 / (double)s->scale);
  kn_status st = KN_OK;
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  for (int i = 0; i < kn_optim_num_params(opt) && st == KN_OK; i++) {
    kn_tensor *g = kn_grad(kn__optim_param(opt, i));
    if (!g) continue;
    r->found_inf |= non_finite(g);
    st = kn_mul_scalar_(g, kn_float(inv));
  }
  kn_no_grad_end(prev);
  kn_scope_end();
  if (st == KN_OK) r->stage = UNSCALED;
  return st;
}

kn_status kn_grad_scaler_unscale(kn_grad_scaler *s, kn_optimizer *opt) {
  if (!s || !opt)
    return kn__error(KN_EINVAL, "kn_grad_scaler_unscale: expected a scaler and an optimizer, "
                     "found %s", !s ? "a NULL scaler" : "a NULL optimizer");
  opt_rec *r = rec_of(s, opt);
  if (!r) return kn__oom();
  if (r->stage == UNSCALED)
    return kn__error(KN_ESTATE, "unscale_() has already been called on this optimizer since "
                     "the last update().");
  if (r->stage == STEPPED)
    return kn__error(KN_ESTATE, "unscale_() is being called after step().");
  return unscale(s, opt, r);
}

kn_status kn_grad_scaler_step(kn_grad_scaler *s, kn_optimizer *opt, bool *stepped) {
  if (stepped) *stepped = false;
  if (!s || !opt)
    return kn__error(KN_EINVAL, "kn_grad_scaler_step: expected a scaler and an optimizer, "
                     "found %s", !s ? "a NULL scaler" : "a NULL optimizer");
  opt_rec *r = rec_of(s, opt);
  if (!r) return kn__oom();
  if (r->stage == STEPPED)
    return kn__error(KN_ESTATE, "step() has already been called since the last update().");
  kn_status st = r->stage == READY ? unscale(s, opt, r) : KN_OK;
  if (st == KN_OK && !r->found_inf) {
    st = kn_optim_step(opt);
    if (stepped) *stepped = st == KN_OK;
  }
  if (st == KN_OK) r->stage = STEPPED;
  return st;
}

kn_status kn_grad_scaler_update(kn_grad_scaler *s) {
  if (!s) return kn__error(KN_EINVAL, "kn_grad_scaler_update: expected a scaler, found NULL");
  if (s->n == 0)
    return kn__error(KN_ESTATE, "No inf checks were recorded prior to update().");
  bool found = false;
  for (int i = 0; i < s->n; i++) found |= s->recs[i].found_inf;
  if (found) {
    s->scale *= s->backoff;
    s->tracker = 0;
  } else if (++s->tracker == s->interval) {
    float grown = s->scale * s->growth;
    if (isfinite(grown)) s->scale = grown;
    s->tracker = 0;
  }
  s->n = 0;
  return KN_OK;
}
