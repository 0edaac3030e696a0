/*
** ops/loss_nll.c: nll_loss_forward / nll_loss_backward (real ops, as in
** torch; grad_fn NllLossBackward0) for inputs [C] (target 0-dim) and [N, C]
** (target [N], int64), with optional per-class weight, ignore_index and
** reduction; cross_entropy is composite (log_softmax + nll_loss, and the
** label-smoothing term when asked). A target outside [0, C) that is not
** ignore_index fails with torch's "Target 5 is out of bounds.".
*/
#include <math.h>

#include "core/error.h"
#include "ops/loss.h"

/* Shared checks of (self, target, weight); *n and *ncls get N and C. */
static kn_status nll_check(const kn_tensor *x, const kn_tensor *t, const kn_tensor *w) {
  char a[128], b[128];
  if (x->ndim < 1 || x->ndim > 2) return kn__error(KN_ESHAPE, "input tensor should be 1D or 2D");
  if (t->ndim > 1)
    return kn__error(KN_ESHAPE, "0D or 1D target tensor expected, multi-target not supported");
  if (t->dtype != KN_INT64)
    return kn__error(KN_EDTYPE, "expected scalar type Long but found %s",
                     kn__torch_dtype_name(t->dtype));
  if (!kn_dtype_is_floating(x->dtype))
    return kn__error(KN_EDTYPE, "\"nll_loss_out_frame\" not implemented for '%s'",
                     kn__torch_dtype_name(x->dtype));
  bool no_batch = x->ndim == 1 && t->ndim == 0;
  if (x->ndim == 2 && t->ndim == 1 && x->sizes[0] != t->sizes[0])
    return kn__error(KN_ESHAPE, "Expected input batch_size (%lld) to match target batch_size (%lld).",
                     (long long)x->sizes[0], (long long)t->sizes[0]);
  if (!no_batch && !(x->ndim == 2 && t->ndim == 1)) {
    kn__loss_shape_str(x, a, sizeof a);
    kn__loss_shape_str(t, b, sizeof b);
    return kn__error(KN_ESHAPE, "size mismatch (got input: %s, target: %s)", a, b);
  }
  int64_t ncls = x->sizes[x->ndim - 1];
  if (w && (kn_numel(w) != ncls)) {
    kn__loss_shape_str(w, a, sizeof a);
    return kn__error(KN_ESHAPE, "weight tensor should be defined either for all %lld classes or no "
                     "classes but got weight tensor of shape: %s", (long long)ncls, a);
  }
  if (w && w->dtype != x->dtype)
    return kn__error(KN_EDTYPE, "expected scalar type %s but found %s",
                     kn__torch_dtype_name(x->dtype), kn__torch_dtype_name(w->dtype));
  return KN_OK;
}

/* nll_loss_forward(self, target, weight?, reduction, ignore_index) ->
** (output, total_weight) */
kn_status kn__meta_nll_loss(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t, *w = c->args[2].u.t;
  kn_status st = kn__loss_check_reduction(c->args[3].u.i);
  if (st == KN_OK) st = nll_check(x, t, w);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, x->dtype);
  if (!m) return kn__oom();
  if (c->args[3].u.i == KN_REDUCTION_NONE && x->ndim == 2) {
    m->ndim = 1;
    kn__tensor_symsizes(t, m->sizes);
  }
  if (!kn__metas_push(out, x->dtype)) return kn__oom();
  return KN_OK;
}

/* Element (n, cls) of a [C] or [N, C] tensor, by strides. */
static const char *at2(const kn_tensor *x, int64_t n, int64_t cls) {
  size_t es = kn_dtype_size(x->dtype);
  int64_t off = x->ndim == 2 ? n * x->strides[0] + cls * x->strides[1] : cls * x->strides[0];
  return (const char *)kn_data(x) + off * (int64_t)es;
}

/* The class of sample n, after the bounds check; -1 when ignored. */
static kn_status target_of(const kn_tensor *t, int64_t n, int64_t ncls, int64_t ignore,
                           int64_t *cls) {
  int64_t v = *(const int64_t *)((const char *)kn_data(t) +
                                 (t->ndim ? n * t->strides[0] : 0) * 8);
  if (v == ignore) {
    *cls = -1;
    return KN_OK;
  }
  if (v < 0 || v >= ncls) return kn__error(KN_ERANGE, "Target %lld is out of bounds.", (long long)v);
  *cls = v;
  return KN_OK;
}

static double weight_of(const kn_tensor *w, int64_t cls) {
  if (!w) return 1.0;
  return kn__load_double((const char *)kn_data(w) + cls * w->strides[0] * (int64_t)kn_dtype_size(w->dtype),
                         w->dtype);
}

kn_status kn__k_nll_loss(const kn__call *c, kn__outs *out) {
  const kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t, *w = c->args[2].u.t;
  int64_t red = c->args[3].u.i, ignore = c->args[4].u.i;
  kn_tensor *o = out->t[0];
  int64_t nb = x->ndim == 2 ? x->sizes[0] : 1, ncls = x->sizes[x->ndim - 1];
  size_t oes = kn_dtype_size(o->dtype);
  double acc = 0, tw = 0;
  for (int64_t n = 0; n < nb; n++) {
    int64_t cls;
    kn_status st = target_of(t, n, ncls, ignore, &cls);
    if (st != KN_OK) return st;
    double l = 0;
    if (cls >= 0) {
      double wv = weight_of(w, cls);
      l = -wv * kn__load_double(at2(x, n, cls), x->dtype);
      tw += wv;
      acc += l;
    }
    if (red == KN_REDUCTION_NONE) kn__store_double((char *)kn_data(o) + (size_t)n * oes, o->dtype, l);
  }
  if (red == KN_REDUCTION_MEAN) kn__store_double(kn_data(o), o->dtype, acc / tw);
  else if (red == KN_REDUCTION_SUM) kn__store_double(kn_data(o), o->dtype, acc);
  kn__store_double(kn_data(out->t[1]), o->dtype, tw);
  return KN_OK;
}

/* nll_loss_backward(grad_output, self, target, weight?, reduction,
** ignore_index, total_weight) -> grad_input shaped like self */
kn_status kn__meta_nll_loss_bwd(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[1].u.t, *t = c->args[2].u.t, *w = c->args[3].u.t;
  const kn_tensor *g = c->args[0].u.t;
  kn_status st = kn__loss_check_reduction(c->args[4].u.i);
  if (st == KN_OK) st = nll_check(x, t, w);
  if (st != KN_OK) return st;
  int64_t want = c->args[4].u.i == KN_REDUCTION_NONE && x->ndim == 2 ? x->sizes[0] : 1;
  if (kn_numel(g) != want || g->ndim > 1) {
    char a[128];
    kn__loss_shape_str(g, a, sizeof a);
    return kn__error(KN_ESHAPE, "nll_loss_backward: expected a grad_output of %lld element%s, "
                     "got shape %s", (long long)want, want == 1 ? "" : "s", a);
  }
  kn__outmeta *m = kn__metas_push(out, x->dtype);
  if (!m) return kn__oom();
  m->ndim = x->ndim;
  kn__tensor_symsizes(x, m->sizes);
  return KN_OK;
}

kn_status kn__k_nll_loss_bwd(const kn__call *c, kn__outs *out) {
  const kn_tensor *g = c->args[0].u.t, *x = c->args[1].u.t, *t = c->args[2].u.t;
  const kn_tensor *w = c->args[3].u.t, *twt = c->args[6].u.t;
  int64_t red = c->args[4].u.i, ignore = c->args[5].u.i;
  kn_tensor *o = out->t[0];
  int64_t nb = x->ndim == 2 ? x->sizes[0] : 1, ncls = x->sizes[x->ndim - 1];
  size_t es = kn_dtype_size(o->dtype);
  for (int64_t i = 0; i < kn_numel(o); i++) kn__store_double((char *)kn_data(o) + (size_t)i * es, o->dtype, 0);
  double tw = kn__load_double(kn_data(twt), twt->dtype);
  for (int64_t n = 0; n < nb; n++) {
    int64_t cls;
    kn_status st = target_of(t, n, ncls, ignore, &cls);
    if (st != KN_OK) return st;
    if (cls < 0) continue;
    double gv = kn__load_double((const char *)kn_data(g) +
                                (red == KN_REDUCTION_NONE && g->ndim ? n * g->strides[0] : 0) *
                                    (int64_t)kn_dtype_size(g->dtype), g->dtype);
    double v = -weight_of(w, cls) * gv;
    if (red == KN_REDUCTION_MEAN) v /= tw;
    int64_t off = x->ndim == 2 ? n * ncls + cls : cls; /* o is contiguous */
    kn__store_double((char *)kn_data(o) + (size_t)off * es, o->dtype, v);
  }
  return KN_OK;
}

/* ---- cross_entropy (composite) ------------------------------------------------- */

/* cross_entropy_loss(self, target, weight?, reduction, ignore_index,
** label_smoothing) */
kn_status kn__k_cross_entropy(const kn__call *c, kn__outs *out) {
  kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t, *w = c->args[2].u.t;
  int64_t red = c->args[3].u.i, ignore = c->args[4].u.i;
  double ls = c->args[5].u.d;
  if (ls < 0 || ls > 1)
    return kn__error(KN_EINVAL, "label_smoothing must be between 0.0 and 1.0. Got: %g", ls);
  kn_scope_begin();
  kn_tensor *lp = kn_log_softmax(x, x->ndim == 1 ? 0 : 1);
  kn_tensor *r = kn_nll_loss(lp, t, w, (kn_reduction)red, ignore);
  if (r && ls > 0) r = kn__cross_entropy_smooth(r, lp, t, w, (kn_reduction)red, ignore, ls);
  kn_status st = kn__loss_push(out, r);
  kn_scope_end();
  return st;
}
