/*
** ops/loss.c: mse_loss and binary_cross_entropy (real ops with their own
** grad_fn, as in torch) and l1_loss (composite: abs(self - target) reduced,
** as torch 1.13 decomposes it). Reductions none/mean/sum follow torch's
** at::Reduction (0, 1, 2); the mean of nothing is nan. Sums run in double.
*/
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "ops/iter.h"
#include "ops/loss.h"
#include "ops/symsize.h"
#include "ops/threads.h"

kn_status kn__loss_check_reduction(int64_t r) {
  if (r < KN_REDUCTION_NONE || r > KN_REDUCTION_SUM)
    return kn__error(KN_EINVAL, "%lld is not a valid value for reduction (expected 0 = none, "
                     "1 = mean or 2 = sum)", (long long)r);
  return KN_OK;
}

kn_status kn__loss_push(kn__outs *out, kn_tensor *r) {
  if (!r) return kn_last_status() != KN_OK ? kn_last_status() : KN_EINTERNAL;
  if (!kn__outs_push(out, kn_retain(r))) return kn__oom();
  return KN_OK;
}

void kn__loss_shape_str(const kn_tensor *t, char *buf, size_t n) {
  kn__format_sizes(t->ndim, t->sizes, buf, n);
}

/* ---- mse_loss(self, target, reduction) ---------------------------------------- */

kn_status kn__meta_mse_loss(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t;
  kn_status st = kn__loss_check_reduction(c->args[2].u.i);
  if (st != KN_OK) return st;
  kn_sym xs[KN_MAX_DIMS], ts[KN_MAX_DIMS], bs[KN_MAX_DIMS];
  kn__tensor_symsizes(x, xs);
  kn__tensor_symsizes(t, ts);
  int nb;
  st = kn__broadcast_shapes(x->ndim, xs, t->ndim, ts, &nb, bs);
  if (st != KN_OK) return st;
  kn_dtype dt = kn__result_type(c, 2);
  if (!kn_dtype_is_floating(dt))
    return kn__error(KN_EDTYPE, "\"mse_cpu\" not implemented for '%s'", kn__torch_dtype_name(dt));
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  if (c->args[2].u.i == KN_REDUCTION_NONE) {
    m->ndim = nb;
    for (int d = 0; d < nb; d++) m->sizes[d] = bs[d];
  }
  return KN_OK;
}

/* The dense path: float32 or float64 self and target of one shape and
** dtype, contiguous, the result of that dtype. Each difference and square
** is the general path's (in double, rounded once when stored); a reduction
** adds blocks of MSE_BLOCK squares on the threads, eight running sums a
** block, and the blocks' sums in order (kn__par_sum_blocks): the same
** result on any number of threads. The general path walks the elements one by one through
** per-dtype loads, 13 ns an element (7 ms for an LSTM's [32, 64, 256]). */
#define MSE_BLOCK 16384

static bool mse_dense(const kn_tensor *x, const kn_tensor *t, const kn_tensor *o) {
  return (x->dtype == KN_FLOAT32 || x->dtype == KN_FLOAT64) && t->dtype == x->dtype &&
         o->dtype == x->dtype && kn__same_sizes(x, t) && kn_is_contiguous(x) &&
         kn_is_contiguous(t) && kn_is_contiguous(o);
}

static inline double sqdiff(const void *x, const void *t, int64_t i, bool f32) {
  double d = f32 ? (double)((const float *)x)[i] - (double)((const float *)t)[i]
                 : ((const double *)x)[i] - ((const double *)t)[i];
  return d * d;
}

typedef struct sq_ref { const void *x, *t; bool f32; } sq_ref;

static double sqdiff_block(const void *ctx, int64_t lo, int64_t hi) {
  const sq_ref *r = ctx;
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8)
    for (int k = 0; k < 8; k++) s[k] += sqdiff(r->x, r->t, i + k, r->f32);
  for (; i < hi; i++) s[0] += sqdiff(r->x, r->t, i, r->f32);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void mse_dense_run(const kn_tensor *x, const kn_tensor *t, kn_tensor *o, int64_t red) {
  sq_ref r = {kn_data(x), kn_data(t), x->dtype == KN_FLOAT32};
  int64_t n = kn_numel(x);
  if (red == KN_REDUCTION_NONE) {
    void *po = kn_data(o);
    KN__PAR_FOR(kn__par_team(n, n, KN__GRAIN_MEM), for (int64_t i = 0; i < n; i++) {
      double v = sqdiff(r.x, r.t, i, r.f32);
      if (r.f32) ((float *)po)[i] = (float)v;
      else ((double *)po)[i] = v;
    });
    return;
  }
  double acc = kn__par_sum_blocks(n, MSE_BLOCK, KN__GRAIN, sqdiff_block, &r);
  kn__store_double(kn_data(o), o->dtype, red == KN_REDUCTION_MEAN ? acc / (double)n : acc);
}

kn_status kn__k_mse_loss(const kn__call *c, kn__outs *out) {
  const kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t;
  kn_tensor *o = out->t[0];
  int64_t red = c->args[2].u.i;
  if (mse_dense(x, t, o)) {
    mse_dense_run(x, t, o, red);
    return KN_OK;
  }
  int nb = x->ndim > t->ndim ? x->ndim : t->ndim;
  int64_t bs[KN_MAX_DIMS];
  for (int d = 0; d < nb; d++) {
    int dx = d - (nb - x->ndim), dt = d - (nb - t->ndim);
    int64_t a = dx >= 0 ? x->sizes[dx] : 1, b = dt >= 0 ? t->sizes[dt] : 1;
    bs[d] = a == 1 ? b : a;
  }
  kn__iter it;
  kn__iter_init(&it, nb, bs);
  kn__iter_add_broadcast(&it, x);
  kn__iter_add_broadcast(&it, t);
  if (red == KN_REDUCTION_NONE) kn__iter_add(&it, o);
  kn__iter_start(&it);
  char *p[KN__ITER_MAX];
  int64_t n;
  double acc = 0;
  while (kn__iter_next(&it, p, &n))
    for (int64_t k = 0; k < n; k++) {
      double d = kn__load_double(p[0] + k * it.inner_stride[0], x->dtype) -
                 kn__load_double(p[1] + k * it.inner_stride[1], t->dtype);
      if (red == KN_REDUCTION_NONE) kn__store_double(p[2] + k * it.inner_stride[2], o->dtype, d * d);
      else acc += d * d;
    }
  if (red != KN_REDUCTION_NONE) {
    int64_t cnt = kn__numel(nb, bs);
    kn__store_double(kn_data(o), o->dtype, red == KN_REDUCTION_MEAN ? acc / (double)cnt : acc);
  }
  return KN_OK;
}

/* ---- binary_cross_entropy(self, target, weight?, reduction) -------------------- */

static void torch_size(const kn_tensor *t, char *buf, size_t n) {
  char s[200];
  kn__loss_shape_str(t, s, sizeof s);
  snprintf(buf, n, "torch.Size(%s)", s);
}

kn_status kn__meta_bce(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t, *w = c->args[2].u.t;
  kn_status st = kn__loss_check_reduction(c->args[3].u.i);
  if (st != KN_OK) return st;
  kn_sym xsz[KN_MAX_DIMS], tsz[KN_MAX_DIMS];
  kn__tensor_symsizes(x, xsz);
  kn__tensor_symsizes(t, tsz);
  bool same = x->ndim == t->ndim;
  for (int d = 0; same && d < x->ndim; d++) same = kn__sym_guard_eq(xsz[d], tsz[d]);
  if (!same) {
    char a[256], b[256];
    torch_size(t, a, sizeof a);
    torch_size(x, b, sizeof b);
    return kn__error(KN_ESHAPE, "Using a target size (%s) that is different to the input size "
                     "(%s) is deprecated. Please ensure they have the same size.", a, b);
  }
  if (!kn_dtype_is_floating(x->dtype))
    return kn__error(KN_EDTYPE, "\"binary_cross_entropy\" not implemented for '%s'",
                     kn__torch_dtype_name(x->dtype));
  for (int k = 1; k <= 2; k++) {
    const kn_tensor *o = k == 1 ? t : w;
    if (o && o->dtype != x->dtype)
      return kn__error(KN_EDTYPE, "Found dtype %s but expected %s",
                       kn__torch_dtype_name(o->dtype), kn__torch_dtype_name(x->dtype));
  }
  if (w) {
    kn_sym xs[KN_MAX_DIMS], ws[KN_MAX_DIMS], bs[KN_MAX_DIMS];
    kn__tensor_symsizes(x, xs);
    kn__tensor_symsizes(w, ws);
    int nb;
    st = kn__broadcast_shapes(x->ndim, xs, w->ndim, ws, &nb, bs); /* torch: (target, weight) */
    if (st != KN_OK) return st;
    if (nb != x->ndim)
      return kn__error(KN_ESHAPE, "binary_cross_entropy: weight of %d dims cannot broadcast to an "
                       "input of %d dims", w->ndim, x->ndim);
    for (int d = 0; d < nb; d++)
      if (!kn__sym_guard_eq(bs[d], xs[d]))
        return kn__error(KN_ESHAPE, "binary_cross_entropy: weight does not broadcast to the "
                         "input's shape at dim %d", d);
  }
  kn__outmeta *m = kn__metas_push(out, x->dtype);
  if (!m) return kn__oom();
  if (c->args[3].u.i == KN_REDUCTION_NONE) {
    m->ndim = x->ndim;
    kn__tensor_symsizes(x, m->sizes);
  }
  return KN_OK;
}

kn_status kn__k_bce(const kn__call *c, kn__outs *out) {
  const kn_tensor *x = c->args[0].u.t, *t = c->args[1].u.t, *w = c->args[2].u.t;
  kn_tensor *o = out->t[0];
  int64_t red = c->args[3].u.i;
  kn_dtype dt = x->dtype;
  kn__iter it;
  kn__iter_init(&it, x->ndim, x->sizes);
  kn__iter_add(&it, x);
  kn__iter_add(&it, t);
  if (w) kn__iter_add_broadcast(&it, w);
  int ko = w ? 3 : 2;
  if (red == KN_REDUCTION_NONE) kn__iter_add(&it, o);
  kn__iter_start(&it);
  char *p[KN__ITER_MAX];
  int64_t n;
  double acc = 0;
  while (kn__iter_next(&it, p, &n))
    for (int64_t k = 0; k < n; k++) {
      double xv = kn__load_double(p[0] + k * it.inner_stride[0], dt);
      double tv = kn__load_double(p[1] + k * it.inner_stride[1], dt);
      double wv = w ? kn__load_double(p[2] + k * it.inner_stride[2], dt) : 1.0;
      if (!(xv >= 0 && xv <= 1))
        return kn__error(KN_EINVAL, "all elements of input should be between 0 and 1");
      double l = -wv * (tv * fmax(log(xv), -100.0) + (1 - tv) * fmax(log1p(-xv), -100.0));
      if (red == KN_REDUCTION_NONE) kn__store_double(p[ko] + k * it.inner_stride[ko], dt, l);
      else acc += l;
    }
  if (red != KN_REDUCTION_NONE)
    kn__store_double(kn_data(o), dt, red == KN_REDUCTION_MEAN ? acc / (double)kn_numel(x) : acc);
  return KN_OK;
}
