/*
** ops/reduce_softmax.c: _softmax and _log_softmax along a dim (numerically
** stable: the line maximum is subtracted before exp) and their backward ops
** _softmax_backward_data / _log_softmax_backward_data, which have kernels of
** their own like torch's. Each line is loaded into a per-thread double
** buffer (fast for contiguous float32/float64), computed, and stored back;
** the exps run through the vector-math table (ops/vmath.h). Contiguous
** float32 lines skip the buffers: the table's fused softmax row and its
** backward (one pass for the sum, one for the gradient, the line in L1).
*/
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/vmath.h"
#include "ops/threads.h"

/* _softmax(self, dim, half_to_float) and _log_softmax: same shape/dtype. */
kn_status kn__meta_softmax(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  if (!kn_dtype_is_floating(t->dtype))
    return kn__error(KN_EDTYPE, "\"%s_lastdim_kernel_impl\" not implemented for '%s'",
                     c->op->id == KN_OP_SOFTMAX ? "softmax" : "log_softmax",
                     kn__torch_dtype_name(t->dtype));
  int dim;
  kn_status st = kn__wrap_dim(c->args[1].u.i, t->ndim, &dim);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push_like(out, t, t->dtype);
  if (!m) return kn__oom();
  return KN_OK;
}

/* Line maximum and sum with 8 independent accumulators: one running value
** is a chain of dependent instructions that caps a line at one element per
** add/max latency. The maximum is the same in any order (NaN is skipped as
** before); the sum differs from a left-to-right one by rounding only. */
#define NACC 8

static double line_max(const double *x, int64_t n) {
  double m[NACC];
  for (int j = 0; j < NACC; j++) m[j] = -INFINITY;
  int64_t k = 0;
  for (; k + NACC <= n; k += NACC)
    for (int j = 0; j < NACC; j++) m[j] = x[k + j] > m[j] ? x[k + j] : m[j];
  for (; k < n; k++) m[0] = x[k] > m[0] ? x[k] : m[0];
  double mx = m[0];
  for (int j = 1; j < NACC; j++) mx = m[j] > mx ? m[j] : mx;
  return mx;
}

static double line_sum(const double *x, int64_t n) {
  double s[NACC] = {0};
  int64_t k = 0;
  for (; k + NACC <= n; k += NACC)
    for (int j = 0; j < NACC; j++) s[j] += x[k + j];
  for (; k < n; k++) s[0] += x[k];
  double sum = 0;
  for (int j = 0; j < NACC; j++) sum += s[j];
  return sum;
}

/* Same over floats, summed in double. */
static double line_sum_f(const float *x, int64_t n) {
  double s[NACC] = {0};
  int64_t k = 0;
  for (; k + NACC <= n; k += NACC)
    for (int j = 0; j < NACC; j++) s[j] += (double)x[k + j];
  for (; k < n; k++) s[0] += (double)x[k];
  double sum = 0;
  for (int j = 0; j < NACC; j++) sum += s[j];
  return sum;
}

/* In place on a line of n doubles; e is n doubles of scratch. The exps go
** through the vector-math table (ops/vmath.h); f32 lines take them in float
** (as torch computes float32 softmax), in e viewed as floats. */
static void softmax_line(double *restrict x, int64_t n, bool log_, bool f32,
                         double *restrict e) {
  const kn__vmath *vm = kn__vmath_get();
  float *restrict ef = (float *)e;
  /* NaN is skipped here but reaches the sum, so its whole line becomes NaN */
  double mx = line_max(x, n), sum;
  if (isinf(mx) && mx < 0) mx = 0; /* all -inf: keep exp(-inf - 0) = 0 */
  if (f32) {
    for (int64_t k = 0; k < n; k++) ef[k] = (float)(x[k] - mx);
    vm->f32[KN__VM_EXP](ef, ef, n);
    sum = line_sum_f(ef, n);
  } else {
    for (int64_t k = 0; k < n; k++) e[k] = x[k] - mx;
    vm->f64[KN__VM_EXP](e, e, n);
    sum = line_sum(e, n);
  }
  if (log_) {
    double ls = log(sum);
    for (int64_t k = 0; k < n; k++) x[k] = (x[k] - mx) - ls;
  } else if (f32) {
    double inv = 1.0 / sum;
    for (int64_t k = 0; k < n; k++) x[k] = (double)ef[k] * inv;
  } else {
    double inv = 1.0 / sum;
    for (int64_t k = 0; k < n; k++) x[k] = e[k] * inv;
  }
}

/* g (buf) and y (buf + n) in, result in buf; e is n doubles of scratch. */
static void softmax_bwd_line(double *buf, int64_t n, bool log_, double *e) {
  double *g = buf, *y = buf + n, s = 0;
  if (log_) {
    s = line_sum(g, n);
    kn__vmath_get()->f64[KN__VM_EXP](e, y, n);
    for (int64_t k = 0; k < n; k++) g[k] -= e[k] * s;
  } else {
    for (int64_t k = 0; k < n; k++) s += g[k] * y[k];
    for (int64_t k = 0; k < n; k++) g[k] = y[k] * (g[k] - s);
  }
}

/* Run over the lines of ts (the last one is the output): load inputs
** (nin of them) into a per-thread buffer, compute, store. */
static kn_status run_lines(const kn_tensor *const *ts, int nin, int dim, bool log_, bool bwd) {
  kn__lines l;
  kn__lines_init(&l, nin + 1, ts, dim);
  kn_dtype dt = ts[0]->dtype;
  bool oom = false, flat = dt == KN_FLOAT32;
  for (int k = 0; k <= nin; k++) /* contiguous lines, the output apart from the inputs */
    flat &= l.st[k] == 4 && (k == nin || !kn_same_storage(ts[k], ts[nin]));
  KN__PAR_REGION(kn__par_team(l.nlines * l.len, l.nlines, KN__GRAIN),
  {
    /* nin input lines, then one line of scratch */
    double *buf = flat ? NULL : malloc((size_t)(l.len > 0 ? l.len : 1) * (size_t)(nin + 1) * sizeof *buf);
    if (!buf && !flat) {
      _Pragma("omp atomic write")
      oom = true;
    }
    _Pragma("omp for schedule(static)")
    for (int64_t i = 0; i < l.nlines; i++) {
      if (flat) { /* contiguous float32 lines: in place of the buffers */
        float *y = (float *)kn__lines_at(&l, nin, i);
        const float *a = (const float *)kn__lines_at(&l, 0, i);
        if (bwd)
          kn__vmath_get()->softmax_bwd_f32(y, a, (const float *)kn__lines_at(&l, 1, i), l.len,
                                           log_);
        else
          kn__vmath_get()->softmax_f32(y, a, l.len, log_);
        continue;
      }
      if (!buf) continue;
      for (int k = 0; k < nin; k++)
        kn__line_load(kn__lines_at(&l, k, i), l.st[k], dt, l.len, buf + k * l.len);
      double *scratch = buf + nin * l.len;
      if (bwd) softmax_bwd_line(buf, l.len, log_, scratch);
      else softmax_line(buf, l.len, log_, dt == KN_FLOAT32, scratch);
      kn__line_store((char *)kn__lines_at(&l, nin, i), l.st[nin], dt, l.len, buf);
    }
    free(buf);
  });
  return oom ? kn__oom() : KN_OK;
}

static kn_status softmax_kernel(const kn__call *c, kn__outs *out, bool log_) {
  const kn_tensor *ts[2] = {c->args[0].u.t, out->t[0]};
  int dim = 0;
  kn__wrap_dim(c->args[1].u.i, ts[0]->ndim, &dim);
  return run_lines(ts, 1, dim, log_, false);
}

kn_status kn__k_softmax(const kn__call *c, kn__outs *out) { return softmax_kernel(c, out, false); }
kn_status kn__k_log_softmax(const kn__call *c, kn__outs *out) {
  return softmax_kernel(c, out, true);
}

/* _softmax_backward_data(grad_output, output, dim, input_dtype) */
kn_status kn__meta_softmax_bwd(const kn__call *c, kn__metas *out) {
  const kn_tensor *g = c->args[0].u.t, *y = c->args[1].u.t;
  kn_sym gs[KN_MAX_DIMS], ys[KN_MAX_DIMS];
  kn__tensor_symsizes(g, gs);
  kn__tensor_symsizes(y, ys);
  bool same = g->ndim == y->ndim && g->dtype == y->dtype;
  for (int d = 0; same && d < g->ndim; d++) same = kn__sym_guard_eq(gs[d], ys[d]);
  if (!same) {
    char a[128], b[128];
    kn__format_sizes(g->ndim, g->sizes, a, sizeof a);
    kn__format_sizes(y->ndim, y->sizes, b, sizeof b);
    return kn__error(KN_ESHAPE, "%s: grad_output %s %s and output %s %s must have the same shape "
                     "and dtype", c->op->name, a, kn_dtype_name(g->dtype), b,
                     kn_dtype_name(y->dtype));
  }
  if (!kn_dtype_is_floating(g->dtype))
    return kn__error(KN_EDTYPE, "%s: expected floating tensors, got %s", c->op->name,
                     kn_dtype_name(g->dtype));
  int dim;
  kn_status st = kn__wrap_dim(c->args[2].u.i, g->ndim, &dim);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, g->dtype);
  if (!m) return kn__oom();
  m->ndim = g->ndim;
  for (int d = 0; d < g->ndim; d++) m->sizes[d] = gs[d];
  return KN_OK;
}

static kn_status softmax_bwd_kernel(const kn__call *c, kn__outs *out, bool log_) {
  const kn_tensor *ts[3] = {c->args[0].u.t, c->args[1].u.t, out->t[0]};
  int dim = 0;
  kn__wrap_dim(c->args[2].u.i, ts[0]->ndim, &dim);
  return run_lines(ts, 2, dim, log_, true);
}

kn_status kn__k_softmax_bwd(const kn__call *c, kn__outs *out) {
  return softmax_bwd_kernel(c, out, false);
}
kn_status kn__k_log_softmax_bwd(const kn__call *c, kn__outs *out) {
  return softmax_bwd_kernel(c, out, true);
}
