/*
** ops/loss_nll.c: nll_loss_forward / nll_loss_backward (real ops, as in
** torch; grad_fn NllLossBackward0) for inputs [C] (target 0-dim) and [N, C]
** (target [N], int64), and nll_loss2d_forward (NllLoss2DBackward0) for
** inputs [N, C, d1, ...] with targets [N, d1, ...], with optional per-class weight, ignore_index and
** reduction; cross_entropy is composite (log_softmax + nll_loss, and the
** label-smoothing term when asked). A target outside [0, C) that is not
** ignore_index fails with torch's "Target 5 is out of bounds.".
** _nll_loss_target is that check alone (with the class indices), for
** inductor's decomposition of nll_loss into pointwise ops and sums.
*/
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "ops/iter.h"
#include "ops/loss.h"

/* Geometry of an nll call: input [C] (no batch), [N, C] or [N, C, S...]
** with target [], [N] or [N, S...]; S is the product of the spatial dims. */
typedef struct nllgeom {
  int64_t n, ncls, s;
} nllgeom;

static void geom_of(const kn_tensor *x, nllgeom *g) {
  g->n = x->ndim >= 2 ? x->sizes[0] : 1;
  g->ncls = x->ndim >= 2 ? x->sizes[1] : x->sizes[0];
  g->s = 1;
  for (int d = 2; d < x->ndim; d++) g->s *= x->sizes[d];
}

static kn_status check_spatial(const kn_tensor *x, const kn_tensor *t) {
  kn_sym xs[KN_MAX_DIMS], ts[KN_MAX_DIMS];
  kn__tensor_symsizes(x, xs);
  kn__tensor_symsizes(t, ts);
  bool ok = t->ndim == x->ndim - 1;
  for (int d = 1; ok && d < t->ndim; d++) ok = kn__sym_guard_eq(ts[d], xs[d + 1]);
  if (ok) return KN_OK;
  int64_t want[KN_MAX_DIMS];
  want[0] = x->sizes[0];
  for (int d = 2; d < x->ndim; d++) want[d - 1] = x->sizes[d];
  char a[128], b[128];
  kn__format_sizes(x->ndim - 1, want, a, sizeof a);
  kn__loss_shape_str(t, b, sizeof b);
  return kn__error(KN_ESHAPE, "Expected target size %s, got %s", a, b);
}

/* Shared checks of (self, target, weight), with torch's messages. */
static kn_status nll_check(const kn_tensor *x, const kn_tensor *t, const kn_tensor *w) {
  char a[128], b[128];
  if (x->ndim < 1)
    return kn__error(KN_ESHAPE, "Expected 1 or more dimensions (got %d)", x->ndim);
  if (t->dtype != KN_INT64)
    return kn__error(KN_EDTYPE, "expected scalar type Long but found %s",
                     kn__torch_dtype_name(t->dtype));
  if (!kn_dtype_is_floating(x->dtype))
    return kn__error(KN_EDTYPE, "\"nll_loss_out_frame\" not implemented for '%s'",
                     kn__torch_dtype_name(x->dtype));
  kn_sym xs[KN_MAX_DIMS], ts[KN_MAX_DIMS];
  kn__tensor_symsizes(x, xs);
  kn__tensor_symsizes(t, ts);
  if (x->ndim >= 2 && t->ndim >= 1 && !kn__sym_guard_eq(xs[0], ts[0]))
    return kn__error(KN_ESHAPE, "Expected input batch_size (%lld) to match target batch_size (%lld).",
                     (long long)x->sizes[0], (long long)t->sizes[0]);
  if (x->ndim > 2) {
    kn_status st = check_spatial(x, t);
    if (st != KN_OK) return st;
  } else if (t->ndim > 1) {
    return kn__error(KN_ESHAPE, "0D or 1D target tensor expected, multi-target not supported");
  } else if (!(x->ndim == 1 && t->ndim == 0) && !(x->ndim == 2 && t->ndim == 1)) {
    kn__loss_shape_str(x, a, sizeof a);
    kn__loss_shape_str(t, b, sizeof b);
    return kn__error(KN_ESHAPE, "size mismatch (got input: %s, target: %s)", a, b);
  }
  nllgeom g;
  geom_of(x, &g);
  if (w && (kn_numel(w) != g.ncls)) {
    kn__loss_shape_str(w, a, sizeof a);
    return kn__error(KN_ESHAPE, "weight tensor should be defined either for all %lld classes or no "
                     "classes but got weight tensor of shape: %s", (long long)g.ncls, a);
  }
  if (w && w->dtype != x->dtype)
    return kn__error(KN_EDTYPE, "expected scalar type %s but found %s",
                     kn__torch_dtype_name(x->dtype), kn__torch_dtype_name(w->dtype));
  return KN_OK;
}

/* nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction,
** ignore_index) -> (output, total_weight) */
kn_status kn__meta_nll_loss(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t, *w = c->args[2].u.t;
  kn_status st = kn__loss_check_reduction(c->args[3].u.i);
  if (st == KN_OK) st = nll_check(x, t, w);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, x->dtype);
  if (!m) return kn__oom();
  if (c->args[3].u.i == KN_REDUCTION_NONE) {
    m->ndim = t->ndim;
    kn__tensor_symsizes(t, m->sizes);
  }
  if (!kn__metas_push(out, x->dtype)) return kn__oom();
  return KN_OK;
}

/* Contiguous views of the operands (new references; NULL on OOM). */
typedef struct nllops {
  kn_tensor *x, *t, *w;
} nllops;

static kn_status nll_ops(const kn_tensor *x, const kn_tensor *t, const kn_tensor *w, nllops *o) {
  o->x = kn__reduce_input_as((kn_tensor *)x, x->dtype);
  o->t = kn__contiguous_copy(t, KN_INT64);
  o->w = w ? kn__contiguous_copy(w, x->dtype) : NULL;
  if (o->x && !kn_is_contiguous(o->x)) {
    kn_tensor *cx = kn__contiguous_copy(o->x, x->dtype);
    kn_release(o->x);
    o->x = cx;
  }
  if (o->x && o->t && (o->w || !w)) return KN_OK;
  kn_release(o->x);
  kn_release(o->t);
  kn_release(o->w);
  return kn__oom();
}

static void nll_ops_free(nllops *o) {
  kn_release(o->x);
  kn_release(o->t);
  kn_release(o->w);
}

/* The class of target element i after the bounds check; -1 when ignored. */
static kn_status class_of(const int64_t *t, int64_t i, int64_t ncls, int64_t ignore, int64_t *cls) {
  int64_t v = t[i];
  if (v == ignore) {
    *cls = -1;
    return KN_OK;
  }
  if (v < 0 || v >= ncls) return kn__error(KN_ERANGE, "Target %lld is out of bounds.", (long long)v);
  *cls = v;
  return KN_OK;
}

static double weight_of(const kn_tensor *w, int64_t cls) {
  return w ? kn__load_double((const char *)kn_data(w) + cls * (int64_t)kn_dtype_size(w->dtype),
                             w->dtype)
           : 1.0;
}

static double x_at(const kn_tensor *x, const nllgeom *g, int64_t n, int64_t cls, int64_t s) {
  int64_t off = (n * g->ncls + cls) * g->s + s;
  return kn__load_double((const char *)kn_data(x) + off * (int64_t)kn_dtype_size(x->dtype),
                         x->dtype);
}

static kn_status nll_forward(const nllops *o, const nllgeom *g, int64_t red, int64_t ignore,
                             kn_tensor *out, kn_tensor *tw_out) {
  const int64_t *t = kn_data(o->t);
  char *dst = kn_data(out);
  size_t oes = kn_dtype_size(out->dtype);
  double acc = 0, tw = 0;
  for (int64_t n = 0; n < g->n; n++)
    for (int64_t s = 0; s < g->s; s++) {
      int64_t i = n * g->s + s, cls = -1;
      kn_status st = class_of(t, i, g->ncls, ignore, &cls);
      if (st != KN_OK) return st;
      double l = 0;
      if (cls >= 0) {
        double wv = weight_of(o->w, cls);
        l = -wv * x_at(o->x, g, n, cls, s);
        tw += wv;
        acc += l;
      }
      if (red == KN_REDUCTION_NONE) kn__store_double(dst + (size_t)i * oes, out->dtype, l);
    }
  if (red == KN_REDUCTION_MEAN) kn__store_double(dst, out->dtype, acc / tw);
  else if (red == KN_REDUCTION_SUM) kn__store_double(dst, out->dtype, acc);
  kn__store_double(kn_data(tw_out), tw_out->dtype, tw);
  return KN_OK;
}

kn_status kn__k_nll_loss(const kn__call *c, kn__outs *out) {
  nllops o;
  kn_status st = nll_ops(c->args[0].u.t, c->args[1].u.t, c->args[2].u.t, &o);
  if (st != KN_OK) return st;
  nllgeom g;
  geom_of(o.x, &g);
  st = nll_forward(&o, &g, c->args[3].u.i, c->args[4].u.i, out->t[0], out->t[1]);
  nll_ops_free(&o);
  return st;
}

/* nll_loss_backward(grad_output, self, target, weight?, reduction,
** ignore_index, total_weight) -> grad_input shaped like self */
kn_status kn__meta_nll_loss_bwd(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[1].u.t, *t = c->args[2].u.t, *w = c->args[3].u.t;
  const kn_tensor *g = c->args[0].u.t;
  kn_status st = kn__loss_check_reduction(c->args[4].u.i);
  if (st == KN_OK) st = nll_check(x, t, w);
  if (st != KN_OK) return st;
  int64_t want = c->args[4].u.i == KN_REDUCTION_NONE ? kn_numel(t) : 1;
  if (kn_numel(g) != want || (c->args[4].u.i != KN_REDUCTION_NONE && g->ndim > 1)) {
    char a[128];
    kn__loss_shape_str(g, a, sizeof a);
    return kn__error(KN_ESHAPE, "nll_loss_backward: expected a grad_output of %lld element%s, "
                     "got shape %s", (long long)want, want == 1 ? "" : "s", a);
  }
  kn__outmeta *m = kn__metas_push_like(out, x, x->dtype);
  if (!m) return kn__oom();
  return KN_OK;
}

kn_status kn__k_nll_loss_bwd(const kn__call *c, kn__outs *out) {
  const kn_tensor *twt = c->args[6].u.t;
  int64_t red = c->args[4].u.i, ignore = c->args[5].u.i;
  kn_tensor *o = out->t[0];
  nllops ops;
  kn_status st = nll_ops(c->args[1].u.t, c->args[2].u.t, c->args[3].u.t, &ops);
  if (st != KN_OK) return st;
  kn_tensor *g = kn__contiguous_copy(c->args[0].u.t, o->dtype);
  if (!g) {
    nll_ops_free(&ops);
    return kn__oom();
  }
  nllgeom geo;
  geom_of(o, &geo);
  size_t es = kn_dtype_size(o->dtype);
  memset(kn_data(o), 0, (size_t)kn_numel(o) * es); /* all-zero bits are 0.0 in every float */
  const int64_t *t = kn_data(ops.t);
  double tw = kn__load_double(kn_data(twt), twt->dtype);
  for (int64_t i = 0; st == KN_OK && i < geo.n * geo.s; i++) {
    int64_t cls = -1, n = i / geo.s, s = i % geo.s;
    st = class_of(t, i, geo.ncls, ignore, &cls);
    if (st != KN_OK || cls < 0) continue;
    double gv = kn__load_double((const char *)kn_data(g) + (red == KN_REDUCTION_NONE ? i : 0) *
                                                                (int64_t)es, o->dtype);
    double v = -weight_of(ops.w, cls) * gv;
    if (red == KN_REDUCTION_MEAN) v /= tw;
    int64_t off = (n * geo.ncls + cls) * geo.s + s; /* o is contiguous */
    kn__store_double((char *)kn_data(o) + (size_t)off * es, o->dtype, v);
  }
  kn_release(g);
  nll_ops_free(&ops);
  return st;
}

/* ---- _nll_loss_target: the checking part of inductor's nll_loss -------------- */

/* _nll_loss_target(target, size, ignore_index) -> (target, classes): for an
** input of sizes `size` ([C], [N, C] or [N, C, d1, ...]; C at its class
** dim), the target with a 1 at the class dim, holding each class, or -1
** where the target is ignore_index; and the class indices 0 .. C-1, shaped
** [C] (inputs of 1 or 2 dims) or [C, 1, ...] (broadcasting against the
** input's trailing dims). The outputs have the input's symbolic sizes. */
kn_status kn__meta_nll_loss_target(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  int n = c->args[1].u.ints.n, cd = n >= 2 ? 1 : 0;
  if (t->dtype != KN_INT64)
    return kn__error(KN_EDTYPE, "expected scalar type Long but found %s",
                     kn__torch_dtype_name(t->dtype));
  kn_sym ts[KN_MAX_DIMS], xs[KN_MAX_DIMS];
  kn__tensor_symsizes(t, ts);
  bool ok = n >= 1 && t->ndim == n - 1;
  for (int d = 0; ok && d < n; d++) {
    xs[d] = kn__arg_symint_at(&c->args[1], d);
    ok = d == cd || kn__sym_guard_eq(ts[d < cd ? d : d - 1], xs[d]);
  }
  if (!ok) {
    char a[128];
    kn__loss_shape_str(t, a, sizeof a);
    return kn__error(KN_ESHAPE, "_nll_loss_target: target %s does not fit an input of %d dims",
                     a, n);
  }
  kn__outmeta *m = kn__metas_push(out, KN_INT64);
  if (!m) return kn__oom();
  m->ndim = n;
  for (int d = 0; d < n; d++) m->sizes[d] = d == cd ? kn__sym_const(1) : xs[d];
  kn__outmeta *k = kn__metas_push(out, KN_INT64);
  if (!k) return kn__oom();
  k->ndim = n >= 2 ? n - 1 : 1;
  for (int d = 0; d < k->ndim; d++) k->sizes[d] = d == 0 ? xs[cd] : kn__sym_const(1);
  return KN_OK;
}

kn_status kn__k_nll_loss_target(const kn__call *c, kn__outs *out) {
  int n = c->args[1].u.ints.n;
  int64_t ncls = c->args[1].u.ints.v[n >= 2 ? 1 : 0], ignore = c->args[2].u.i;
  kn_tensor *t = kn__contiguous_copy(c->args[0].u.t, KN_INT64);
  if (!t) return kn__oom();
  const int64_t *src = kn_data(t);
  int64_t *dst = kn_data(out->t[0]), *cls = kn_data(out->t[1]);
  kn_status st = KN_OK;
  for (int64_t i = 0; st == KN_OK && i < kn_numel(t); i++)
    st = class_of(src, i, ncls, ignore, &dst[i]);
  for (int64_t k = 0; k < ncls; k++) cls[k] = k;
  kn_release(t);
  return st;
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
  kn_tensor *nll[2] = {NULL, NULL};
  kn_tensor *r = NULL;
  if (lp && kn__nll_loss_forward(lp, t, w, (kn_reduction)red, ignore, nll) == 2)
    r = ls > 0 ? kn__cross_entropy_smooth(nll[0], nll[1], lp, t, w, (kn_reduction)red, ignore, ls)
               : nll[0];
  kn_status st = kn__loss_push(out, r);
  kn_scope_end();
  return st;
}
