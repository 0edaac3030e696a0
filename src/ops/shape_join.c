/*
** ops/shape_join.c: joining tensors: cat (PyTorch's rules, including legacy
** empty 1-D tensors being skipped, and dtype promotion across the inputs)
** and stack. Kernels copy each input into a view of the output.
*/
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "kiln/ops_shape.h"
#include "ops/cuda_ops.h"
#include "ops/iter.h"
#include "ops/shape.h"
#include "ops/symsize.h"

/* A legacy empty tensor (1-D, size 0) is skipped by cat's shape checks. */
static bool skip(const kn_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

static kn_dtype list_dtype(kn_tensor *const *v, int n) {
  kn_dtype dt = v[0]->dtype;
  for (int i = 1; i < n; i++) dt = kn_promote_types(dt, v[i]->dtype);
  return dt;
}

/* Index of the first tensor that is not skipped, or -1. */
static int first_kept(kn_tensor *const *v, int n) {
  for (int i = 0; i < n; i++)
    if (!skip(v[i])) return i;
  return -1;
}

kn_status kn__meta_cat(const kn__call *c, kn__metas *out) {
  kn_tensor *const *v = c->args[0].u.ts.v;
  int n = c->args[0].u.ts.n;
  if (n == 0) return kn__error(KN_EINVAL, "torch.cat(): expected a non-empty list of Tensors");
  for (int i = 0; i < n; i++)
    if (v[i]->ndim == 0)
      return kn__error(KN_ESHAPE, "zero-dimensional tensor (at position %d) cannot be "
                       "concatenated", i);
  kn_dtype dt = list_dtype(v, n);
  int ref = first_kept(v, n);
  if (ref < 0) return kn__push_fresh(out, dt, 1, (kn_sym[]){kn__sym_const(0)});
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, v[ref]->ndim, &d);
  if (st != KN_OK) return st;
  kn_sym sz[KN_MAX_DIMS], o[KN_MAX_DIMS];
  kn__tensor_symsizes(v[ref], sz);
  kn_sym total = kn__sym_const(0);
  for (int i = 0; i < n; i++) {
    if (skip(v[i])) continue;
    if (v[i]->ndim != v[ref]->ndim)
      return kn__error(KN_ESHAPE, "Tensors must have same number of dimensions: got %d and %d",
                       v[ref]->ndim, v[i]->ndim);
    kn__tensor_symsizes(v[i], o);
    for (int k = 0; k < v[ref]->ndim; k++) {
      if (k == d || kn__sym_guard_eq(o[k], sz[k])) continue;
      char a[64], b[64];
      kn__sym_format(sz[k], a, sizeof a);
      kn__sym_format(o[k], b, sizeof b);
      return kn__error(KN_ESHAPE, "Sizes of tensors must match except in dimension %d. "
                       "Expected size %s but got size %s for tensor number %d in the list.",
                       d, a, b, i);
    }
    total = kn__sym_add(total, o[d]);
  }
  sz[d] = total;
  return kn__push_fresh(out, dt, v[ref]->ndim, sz);
}

/* Copy src into the part of o that starts at `start` along dim d (on the
** GPU too: cat and stack are among the ops layer's own CUDA kernels). */
static kn_status copy_part(kn_tensor *o, int d, int64_t start, const kn_tensor *src,
                           bool select) {
  int64_t sz[KN_MAX_DIMS], st[KN_MAX_DIMS];
  int nd = 0;
  for (int k = 0; k < o->ndim; k++) {
    if (k == d && select) continue;
    sz[nd] = k == d ? src->sizes[d] : o->sizes[k];
    st[nd++] = o->strides[k];
  }
  kn_tensor *v = kn__make_view(o, nd, sz, st, o->offset + start * o->strides[d]);
  if (!v) return kn_last_status();
  kn_status s = kn__tensor_on_cuda(o) ? kn__cuda_copy_into(v, src) : kn__copy_into(v, src);
  kn_release(v);
  return s;
}

kn_status kn__k_cat(const kn__call *c, kn__outs *out) {
  kn_tensor *const *v = c->args[0].u.ts.v;
  int n = c->args[0].u.ts.n, ref = first_kept(v, n), d;
  kn_tensor *o = out->t[0];
  if (ref < 0) return KN_OK;
  kn_status st = kn__wrap_dim(c->args[1].u.i, o->ndim, &d);
  int64_t start = 0;
  for (int i = 0; i < n && st == KN_OK; i++) {
    if (skip(v[i])) continue;
    st = copy_part(o, d, start, v[i], false);
    start += v[i]->sizes[d];
  }
  return st;
}

kn_status kn__bw_cat(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *const *v = c->args[0].u.ts.v;
  int n = c->args[0].u.ts.n, ref = first_kept(v, n), d = 0;
  kn_tensor *g = ctx->grad_outputs[0];
  if (ref >= 0 && kn__wrap_dim(c->args[1].u.i, g->ndim, &d) != KN_OK) return kn_last_status();
  kn_sym start = kn__sym_const(0);
  for (int i = 0; i < n; i++) {
    kn_tensor *r = NULL;
    if (skip(v[i]) || ref < 0) {
      if (ctx->needs_input_grad[i]) r = kn_zeros(1, (int64_t[]){0}, v[i]->dtype);
    } else { /* the slice [start, start + size) along d, over symbolic sizes */
      kn_sym sz[KN_MAX_DIMS];
      kn__tensor_symsizes(v[i], sz);
      kn_sym end = kn__sym_add(start, sz[d]);
      if (ctx->needs_input_grad[i]) r = kn__slice_sym(g, d, start, end, 1);
      start = end;
    }
    if (ctx->needs_input_grad[i] && !r) return kn_last_status();
    ctx->grad_inputs[i] = r;
  }
  return KN_OK;
}

/* ---- stack ------------------------------------------------------------------------------ */

kn_status kn__meta_stack(const kn__call *c, kn__metas *out) {
  kn_tensor *const *v = c->args[0].u.ts.v;
  int n = c->args[0].u.ts.n;
  if (n == 0) return kn__error(KN_EINVAL, "stack expects a non-empty TensorList");
  int nd = v[0]->ndim, d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, nd + 1, &d);
  if (st != KN_OK) return st;
  if (nd + 1 > KN_MAX_DIMS) return kn__error(KN_EINVAL, "stack: at most %d dims", KN_MAX_DIMS);
  kn_sym sz[KN_MAX_DIMS], o[KN_MAX_DIMS];
  kn__tensor_symsizes(v[0], sz);
  for (int i = 1; i < n; i++) {
    bool same = v[i]->ndim == nd;
    kn__tensor_symsizes(v[i], o);
    for (int k = 0; same && k < nd; k++) same = kn__sym_guard_eq(o[k], sz[k]);
    if (!same) {
      char a[256], b[256];
      kn__format_symsizes(nd, sz, a, sizeof a);
      kn__format_symsizes(v[i]->ndim, o, b, sizeof b);
      return kn__error(KN_ESHAPE, "stack expects each tensor to be equal size, but got %s at "
                       "entry 0 and %s at entry %d", a, b, i);
    }
  }
  kn_sym res[KN_MAX_DIMS];
  for (int k = 0, s = 0; k <= nd; k++) res[k] = k == d ? kn__sym_const(n) : sz[s++];
  return kn__push_fresh(out, list_dtype(v, n), nd + 1, res);
}

kn_status kn__k_stack(const kn__call *c, kn__outs *out) {
  kn_tensor *const *v = c->args[0].u.ts.v;
  int n = c->args[0].u.ts.n, d;
  kn_tensor *o = out->t[0];
  kn_status st = kn__wrap_dim(c->args[1].u.i, o->ndim, &d);
  for (int i = 0; i < n && st == KN_OK; i++) st = copy_part(o, d, i, v[i], true);
  return st;
}

kn_status kn__bw_stack(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  int n = c->args[0].u.ts.n;
  for (int i = 0; i < n; i++) {
    if (!ctx->needs_input_grad[i]) continue;
    kn_tensor *r = kn__select_sym(ctx->grad_outputs[0], c->args[1].u.i, kn__sym_const(i));
    if (!r) return kn_last_status();
    ctx->grad_inputs[i] = r;
  }
  return KN_OK;
}

/* ---- public API ------------------------------------------------------------------------------ */

kn_tensor *kn_cat(kn_tensor *const *tensors, int n, int64_t dim) {
  return kn__invoke(KN_OP_CAT, 2, (kn__arg[]){KN_A_TS(tensors, n), KN_A_I(dim)});
}

kn_tensor *kn_stack(kn_tensor *const *tensors, int n, int64_t dim) {
  return kn__invoke(KN_OP_STACK, 2, (kn__arg[]){KN_A_TS(tensors, n), KN_A_I(dim)});
}
