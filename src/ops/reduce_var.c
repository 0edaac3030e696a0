/*
** ops/reduce_var.c: var and std over dims with a correction (Bessel's is
** correction 1, the default) and keepdim. Floating inputs only. Two passes
** in double per output (mean, then squared deviations), which stays accurate
** where a one-pass formula cancels: the CENTERED rows of the reduction table
** (ops/reduce_table.h), whose prep, combine and finalize these kernels call. The divisor is max(0, N - correction):
** like torch, var of a single element with correction 1 is nan (0/0).
*/
#include <math.h>

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/reduce_table.h"
#include "ops/threads.h"

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

/* Pass 0 sums the elements (the SUM row); pass 1 combines their prepared
** squared deviations (the VAR row: var and std share it). */
#define MOMENT_LOOP(LOAD)                                                         \
  if (m->pass == 0)                                                               \
    for (int64_t k = 0; k < n; k++) a = kn__red_comb_SUM(a, LOAD);                \
  else                                                                            \
    for (int64_t k = 0; k < n; k++) a = kn__red_comb_VAR(a, kn__red_prep_VAR(LOAD, m->mean));

static void row_moments(void *state, const char *p, int64_t n, int64_t s, int64_t start) {
  (void)start;
  moments *m = state;
  double a = kn__red_rows[KN__RED_SUM].init;
  if (m->dt == KN_FLOAT32 && s == 4) {
    const float *x = (const float *)p;
    MOMENT_LOOP(x[k])
  } else if (m->dt == KN_FLOAT64 && s == 8) {
    const double *x = (const double *)p;
    MOMENT_LOOP(x[k])
  } else {
    MOMENT_LOOP(kn__load_double(p + k * s, m->dt))
  }
  m->acc = kn__red_comb_SUM(m->acc, a);
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
  char *dst = kn_data(o);
  size_t oes = kn_dtype_size(o->dtype);
  KN__PAR_FOR(kn__par_team(p.nout * p.nred, p.nout, KN__GRAIN),
  for (int64_t i = 0; i < p.nout; i++) {
    const char *base = kn__redplan_at(&p, i);
    moments m = {t->dtype, 0, kn__red_rows[KN__RED_SUM].init, 0};
    kn__redplan_rows(&p, base, row_moments, &m);
    m.mean = kn__red_fin_MEAN(m.acc, (double)p.nred, 0, 0);
    m.acc = kn__red_rows[KN__RED_VAR].init;
    m.pass = 1;
    kn__redplan_rows(&p, base, row_moments, &m);
    double n = (double)p.nred, v = sqrt_it ? kn__red_fin_STD(m.acc, n, (double)corr, m.mean)
                                            : kn__red_fin_VAR(m.acc, n, (double)corr, m.mean);
    kn__store_double(dst + (size_t)i * oes, o->dtype, v);
  });
  return KN_OK;
}

kn_status kn__k_var(const kn__call *c, kn__outs *out) { return var_kernel(c, out, false); }
kn_status kn__k_std(const kn__call *c, kn__outs *out) { return var_kernel(c, out, true); }
