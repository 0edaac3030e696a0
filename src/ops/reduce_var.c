/*
** ops/reduce_var.c: var and std over dims with a correction (Bessel's is
** correction 1, the default) and keepdim. Floating inputs only. Two passes
** in double per output (mean, then squared deviations), which stays accurate
** where a one-pass formula cancels. The divisor is max(0, N - correction):
** like torch, var of a single element with correction 1 is nan (0/0).
*/
#include <math.h>

#include "core/error.h"
#include "ops/reduce.h"

/* var/std(self, dims?, correction?, keepdim) */
kn_status kn__meta_var(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  if (!kn_dtype_is_floating(t->dtype))
    return kn__error(KN_EDTYPE, "std and var only support floating point and complex dtypes");
  bool mask[KN_MAX_DIMS];
  kn_status st = kn__reduce_mask(c->op->name, t, &c->args[1], mask);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, t->dtype);
  if (!m) return kn__oom();
  kn__reduce_shape(t, mask, c->args[3].u.b, m);
  return KN_OK;
}

typedef struct moments {
  kn_dtype dt;
  double mean, acc;
  int pass;
} moments;

static void row_moments(void *state, const char *p, int64_t n, int64_t s, int64_t start) {
  (void)start;
  moments *m = state;
  double a = 0;
  if (m->dt == KN_FLOAT32 && s == 4) {
    const float *x = (const float *)p;
    if (m->pass == 0) for (int64_t k = 0; k < n; k++) a += x[k];
    else for (int64_t k = 0; k < n; k++) a += (x[k] - m->mean) * (x[k] - m->mean);
  } else if (m->dt == KN_FLOAT64 && s == 8) {
    const double *x = (const double *)p;
    if (m->pass == 0) for (int64_t k = 0; k < n; k++) a += x[k];
    else for (int64_t k = 0; k < n; k++) a += (x[k] - m->mean) * (x[k] - m->mean);
  } else {
    for (int64_t k = 0; k < n; k++) {
      double v = kn__load_double(p + k * s, m->dt);
      a += m->pass == 0 ? v : (v - m->mean) * (v - m->mean);
    }
  }
  m->acc += a;
}

static kn_status var_kernel(const kn__call *c, kn__outs *out, bool sqrt_it) {
  const kn_tensor *t = c->args[0].u.t;
  kn_tensor *o = out->t[0];
  bool mask[KN_MAX_DIMS];
  kn_status st = kn__reduce_mask(c->op->name, t, &c->args[1], mask);
  if (st != KN_OK) return st;
  int64_t corr = c->args[2].kind == KN__A_INT ? c->args[2].u.i : 1;
  kn__redplan p;
  kn__redplan_init(&p, t, mask);
  double div = (double)p.nred - (double)corr;
  if (div < 0) div = 0;
  char *dst = kn_data(o);
  size_t oes = kn_dtype_size(o->dtype);
#pragma omp parallel for if (p.nout * p.nred >= KN__RED_PAR_MIN && p.nout > 1) schedule(static)
  for (int64_t i = 0; i < p.nout; i++) {
    const char *base = kn__redplan_at(&p, i);
    moments m = {t->dtype, 0, 0, 0};
    kn__redplan_rows(&p, base, row_moments, &m);
    m.mean = m.acc / (double)p.nred;
    m.acc = 0;
    m.pass = 1;
    kn__redplan_rows(&p, base, row_moments, &m);
    double v = p.nred == 0 ? NAN : m.acc / div;
    kn__store_double(dst + (size_t)i * oes, o->dtype, sqrt_it ? sqrt(v) : v);
  }
  return KN_OK;
}

kn_status kn__k_var(const kn__call *c, kn__outs *out) { return var_kernel(c, out, false); }
kn_status kn__k_std(const kn__call *c, kn__outs *out) { return var_kernel(c, out, true); }
