/*
** optim/clip.c: gradient clipping by total norm (clip_grad_norm_) and the
** closed forms of the learning-rate schedules (StepLR, CosineAnnealingLR,
** LinearLR).
*/
#include <math.h>

#include "core/error.h"
#include "kiln/kiln.h"
#include "kiln/optim.h"

/* sum |g|^p (p finite) or max |g| (p infinite) of one gradient, in double. */
static kn_status grad_norm_part(kn_tensor *g, double p, double *out) {
  kn_scope_begin();
  kn_tensor *a = kn_abs(kn_to(g, KN_FLOAT64));
  kn_tensor *r = isinf(p) ? kn_amax(a, NULL, 0, false) : kn_sum(kn_pow_scalar(a, kn_float(p)));
  kn_status st = r ? kn_item_double(r, out) : kn_last_status();
  kn_scope_end();
  return st;
}

static kn_status total_norm_of(kn_tensor *const *params, int n, double p, double *total) {
  double acc = 0;
  for (int i = 0; i < n; i++) {
    kn_tensor *g = params[i] ? kn_grad(params[i]) : NULL;
    double part = 0;
    kn_status st = g ? grad_norm_part(g, p, &part) : KN_OK;
    if (st != KN_OK) return st;
    acc = isinf(p) ? fmax(acc, part) : acc + part;
  }
  *total = isinf(p) ? acc : pow(acc, 1.0 / p);
  return KN_OK;
}

kn_status kn_clip_grad_norm(kn_tensor *const *params, int n, double max_norm, double norm_type,
                            double *total_norm) {
  if ((!params && n) || n < 0 || !(norm_type > 0) || !(max_norm >= 0))
    return kn__error(KN_EINVAL, "kn_clip_grad_norm: expected n >= 0 parameters, max_norm >= 0 "
                                "and norm_type > 0, found n=%d, max_norm=%g, norm_type=%g",
                     n, max_norm, norm_type);
  double total = 0;
  kn_status st = total_norm_of(params, n, norm_type, &total);
  if (st != KN_OK) return st;
  if (total_norm) *total_norm = total;
  double coef = fmin(max_norm / (total + 1e-6), 1.0);
  bool prev = kn_no_grad_begin();
  for (int i = 0; i < n && st == KN_OK; i++) {
    kn_tensor *g = kn_grad(params[i]);
    if (g) st = kn_mul_scalar_(g, kn_float(coef));
  }
  kn_no_grad_end(prev);
  return st;
}

double kn_lr_at(const kn_lr_schedule *s, double base, int64_t e) {
  if (!s || e < 0) return NAN;
  switch (s->kind) {
  case KN_LR_STEP:
    return s->step_size < 1 ? NAN : base * pow(s->gamma, (double)(e / s->step_size));
  case KN_LR_COSINE:
    if (s->t_max < 1) return NAN;
    return s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * (double)e / (double)s->t_max)) / 2;
  case KN_LR_LINEAR: {
    if (s->total_iters < 1) return NAN;
    double t = (double)(e < s->total_iters ? e : s->total_iters) / (double)s->total_iters;
    return base * (s->start_factor + (s->end_factor - s->start_factor) * t);
  }
  }
  return NAN;
}
