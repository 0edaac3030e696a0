/*
** ops/reduce_softmax.c: _softmax and _log_softmax along a dim (numerically
** stable: the row maximum is subtracted before exp) and their backward ops
** _softmax_backward_data / _log_softmax_backward_data, which have kernels of
** their own like torch's. Lines are computed in double.
*/
#include <math.h>

#include "core/error.h"
#include "ops/reduce.h"

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
  kn__outmeta *m = kn__metas_push(out, t->dtype);
  if (!m) return kn__oom();
  m->ndim = t->ndim;
  kn__tensor_symsizes(t, m->sizes);
  return KN_OK;
}

static void softmax_line(const char *x, int64_t xs, char *y, int64_t ys, int64_t n,
                         kn_dtype dt, bool log_) {
  double mx = -INFINITY, sum = 0;
  for (int64_t k = 0; k < n; k++) {
    double v = kn__load_double(x + k * xs, dt);
    if (v > mx || isnan(v)) mx = v;
  }
  if (isinf(mx) && mx < 0) mx = 0; /* all -inf: keep exp(-inf - 0) = 0 */
  for (int64_t k = 0; k < n; k++) sum += exp(kn__load_double(x + k * xs, dt) - mx);
  double lse = log(sum);
  for (int64_t k = 0; k < n; k++) {
    double v = kn__load_double(x + k * xs, dt) - mx;
    kn__store_double(y + k * ys, dt, log_ ? v - lse : exp(v) / sum);
  }
}

static kn_status softmax_kernel(const kn__call *c, kn__outs *out, bool log_) {
  const kn_tensor *t = c->args[0].u.t;
  kn_tensor *o = out->t[0];
  int dim = 0;
  kn__wrap_dim(c->args[1].u.i, t->ndim, &dim);
  const kn_tensor *ts[2] = {t, o};
  kn__lines l;
  kn__lines_init(&l, 2, ts, dim);
#pragma omp parallel for if (l.nlines * l.len >= KN__RED_PAR_MIN && l.nlines > 1) schedule(static)
  for (int64_t i = 0; i < l.nlines; i++)
    softmax_line(kn__lines_at(&l, 0, i), l.st[0], (char *)kn__lines_at(&l, 1, i), l.st[1],
                 l.len, t->dtype, log_);
  return KN_OK;
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
  int dim;
  kn_status st = kn__wrap_dim(c->args[2].u.i, g->ndim, &dim);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, g->dtype);
  if (!m) return kn__oom();
  m->ndim = g->ndim;
  for (int d = 0; d < g->ndim; d++) m->sizes[d] = gs[d];
  return KN_OK;
}

static void softmax_bwd_line(const kn__lines *l, int64_t i, kn_dtype dt, bool log_) {
  const char *g = kn__lines_at(l, 0, i), *y = kn__lines_at(l, 1, i);
  char *r = (char *)kn__lines_at(l, 2, i);
  double s = 0;
  for (int64_t k = 0; k < l->len; k++) {
    double gv = kn__load_double(g + k * l->st[0], dt);
    s += log_ ? gv : gv * kn__load_double(y + k * l->st[1], dt);
  }
  for (int64_t k = 0; k < l->len; k++) {
    double gv = kn__load_double(g + k * l->st[0], dt), yv = kn__load_double(y + k * l->st[1], dt);
    kn__store_double(r + k * l->st[2], dt, log_ ? gv - exp(yv) * s : yv * (gv - s));
  }
}

static kn_status softmax_bwd_kernel(const kn__call *c, kn__outs *out, bool log_) {
  const kn_tensor *ts[3] = {c->args[0].u.t, c->args[1].u.t, out->t[0]};
  int dim = 0;
  kn__wrap_dim(c->args[2].u.i, ts[0]->ndim, &dim);
  kn__lines l;
  kn__lines_init(&l, 3, ts, dim);
#pragma omp parallel for if (l.nlines * l.len >= KN__RED_PAR_MIN && l.nlines > 1) schedule(static)
  for (int64_t i = 0; i < l.nlines; i++) softmax_bwd_line(&l, i, ts[0]->dtype, log_);
  return KN_OK;
}

kn_status kn__k_softmax_bwd(const kn__call *c, kn__outs *out) {
  return softmax_bwd_kernel(c, out, false);
}
kn_status kn__k_log_softmax_bwd(const kn__call *c, kn__outs *out) {
  return softmax_bwd_kernel(c, out, true);
}
