/*
** ops/shape_view.c: views that reinterpret a tensor's sizes and strides
** without moving data: view, _reshape_alias, reshape (composite: a view when
** PyTorch's computeStride finds strides, else _reshape_copy), permute,
** transpose, t, expand, unsqueeze, squeeze, flatten. Each view's meta
** computes its geometry over kn_sym; the dispatcher makes the view.
*/
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops_reduce.h"
#include "kiln/ops_shape.h"
#include "ops/iter.h"
#include "ops/shape.h"
#include "ops/symsize.h"

static const kn_tensor *self_of(const kn__call *c) { return c->args[0].u.t; }

/* ---- view, _reshape_alias, _reshape_copy, reshape ------------------------------ */

static kn_status view_geometry(const kn__call *c, kn__geom *g, bool *ok) {
  kn__geom in;
  kn__geom_of(self_of(c), &in);
  const kn__arg *sz = &c->args[1];
  kn_status st = kn__infer_size(sz, kn__sym_numel(in.nd, in.sz), g->sz);
  if (st != KN_OK) return st;
  g->nd = sz->u.ints.n;
  g->off = in.off;
  *ok = kn__compute_stride(in.nd, in.sz, in.st, g->nd, g->sz, g->st);
  return KN_OK;
}

kn_status kn__meta_view(const kn__call *c, kn__metas *out) {
  kn__geom g;
  bool ok = false;
  kn_status st = view_geometry(c, &g, &ok);
  if (st != KN_OK) return st;
  if (!ok)
    return kn__error(KN_ESHAPE,
                     "view size is not compatible with input tensor's size and stride (at "
                     "least one dimension spans across two contiguous subspaces). Use "
                     ".reshape(...) instead.");
  return kn__push_view(out, c, 0, &g);
}

kn_status kn__meta_reshape_alias(const kn__call *c, kn__metas *out) {
  const kn__arg *sz = &c->args[1], *sd = &c->args[2];
  if (sz->u.ints.n != sd->u.ints.n || sz->u.ints.n > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "_reshape_alias: got %d sizes but %d strides", sz->u.ints.n,
                     sd->u.ints.n);
  kn__geom g;
  g.nd = sz->u.ints.n;
  for (int d = 0; d < g.nd; d++) {
    g.sz[d] = kn__sym_const(sz->u.ints.v[d]);
    g.st[d] = kn__sym_const(sd->u.ints.v[d]);
  }
  g.off = self_of(c)->sym ? self_of(c)->sym->offset : kn__sym_const(self_of(c)->offset);
  return kn__push_view(out, c, 0, &g);
}

kn_status kn__meta_reshape_copy(const kn__call *c, kn__metas *out) {
  kn__geom in, g;
  kn__geom_of(self_of(c), &in);
  const kn__arg *sz = &c->args[1];
  kn_status st = kn__infer_size(sz, kn__sym_numel(in.nd, in.sz), g.sz);
  if (st != KN_OK) return st;
  return kn__push_fresh(out, self_of(c)->dtype, sz->u.ints.n, g.sz);
}

kn_status kn__k_reshape_copy(const kn__call *c, kn__outs *out) {
  const kn_tensor *self = self_of(c);
  kn_tensor *o = out->t[0];
  int64_t st[KN_MAX_DIMS];
  kn__contiguous_strides(self->ndim, self->sizes, st);
  kn_tensor *as_in = kn__make_view(o, self->ndim, self->sizes, st, o->offset);
  if (!as_in) return kn_last_status();
  kn_status s = kn__copy_into(as_in, self);
  kn_release(as_in);
  return s;
}

static bool geom_is_const(const kn__geom *g) {
  for (int d = 0; d < g->nd; d++)
    if (!kn__sym_is_const(g->sz[d]) || !kn__sym_is_const(g->st[d])) return false;
  return true;
}

kn_status kn__k_reshape(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t;
  const kn__arg *req = &c->args[1];
  kn__geom g;
  bool ok = false;
  kn_status st = view_geometry(c, &g, &ok);
  if (st != KN_OK) return st;
  int64_t sizes[KN_MAX_DIMS], strides[KN_MAX_DIMS];
  for (int d = 0; d < g.nd; d++) {
    sizes[d] = kn__sym_hint(g.sz[d]);
    strides[d] = kn__sym_hint(g.st[d]);
  }
  kn_scope_begin();
  kn_tensor *r;
  if (ok && geom_is_const(&g))
    r = kn__invoke(KN_OP_RESHAPE_ALIAS, 3,
                   (kn__arg[]){KN_A_T(self), KN_A_INTS(sizes, g.nd), KN_A_INTS(strides, g.nd)});
  else if (ok) /* symbolic geometry: view keeps it symbolic */
    r = kn__invoke(KN_OP_VIEW, 2, (kn__arg[]){KN_A_T(self), *req});
  else
    r = kn__invoke(KN_OP_RESHAPE_COPY, 2, (kn__arg[]){KN_A_T(self), *req});
  st = kn__composite_push(out, r);
  kn_scope_end();
  return st;
}

/* Gradient of every op that only changes sizes: reshape back. */
kn_status kn__bw_reshape_back(kn__bwctx *ctx) {
  const kn_tensor *self = kn__call_input(ctx->call, 0);
  if (!ctx->needs_input_grad[0]) return KN_OK;
  kn_tensor *g = kn__reshape_like(ctx->grad_outputs[0], self);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

/* ---- permute, transpose, t ------------------------------------------------------- */

kn_status kn__meta_permute(const kn__call *c, kn__metas *out) {
  kn__geom in, g;
  kn__geom_of(self_of(c), &in);
  const kn__arg *dims = &c->args[1];
  if (dims->u.ints.n != in.nd)
    return kn__error(KN_ESHAPE,
                     "permute(sparse_coo): number of dimensions in the tensor input does not "
                     "match the length of the desired ordering of dimensions i.e. input.dim() = "
                     "%d is not equal to len(dims) = %d", in.nd, dims->u.ints.n);
  bool seen[KN_MAX_DIMS] = {false};
  g.nd = in.nd;
  g.off = in.off;
  for (int d = 0; d < in.nd; d++) {
    int w;
    kn_status st = kn__wrap_dim(dims->u.ints.v[d], in.nd, &w);
    if (st != KN_OK) return st;
    if (seen[w]) return kn__error(KN_EINVAL, "permute(): duplicate dims are not allowed.");
    seen[w] = true;
    g.sz[d] = in.sz[w];
    g.st[d] = in.st[w];
  }
  return kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_permute(kn__bwctx *ctx) {
  const kn__arg *dims = &ctx->call->args[1];
  int n = dims->u.ints.n;
  int64_t inv[KN_MAX_DIMS];
  for (int d = 0; d < n; d++) {
    int64_t w = dims->u.ints.v[d];
    inv[w < 0 ? w + n : w] = d;
  }
  kn_tensor *g = kn_permute(ctx->grad_outputs[0], n, inv);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

static kn_status transpose_geom(const kn_tensor *t, int64_t d0, int64_t d1, kn__geom *g) {
  kn__geom_of(t, g);
  int a, b;
  kn_status st = kn__wrap_dim(d0, g->nd, &a);
  if (st == KN_OK) st = kn__wrap_dim(d1, g->nd, &b);
  if (st != KN_OK || g->nd == 0) return st;
  kn_sym s = g->sz[a], r = g->st[a];
  g->sz[a] = g->sz[b];
  g->st[a] = g->st[b];
  g->sz[b] = s;
  g->st[b] = r;
  return KN_OK;
}

kn_status kn__meta_transpose(const kn__call *c, kn__metas *out) {
  kn__geom g;
  kn_status st = transpose_geom(self_of(c), c->args[1].u.i, c->args[2].u.i, &g);
  return st != KN_OK ? st : kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_transpose(kn__bwctx *ctx) {
  kn_tensor *g = kn_transpose(ctx->grad_outputs[0], ctx->call->args[1].u.i,
                              ctx->call->args[2].u.i);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

kn_status kn__meta_t(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = self_of(c);
  if (self->ndim > 2)
    return kn__error(KN_ESHAPE, "t() expects a tensor with <= 2 dimensions, but self is %dD",
                     self->ndim);
  kn__geom g;
  kn_status st = transpose_geom(self, 0, self->ndim < 2 ? 0 : 1, &g);
  return st != KN_OK ? st : kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_t(kn__bwctx *ctx) {
  kn_tensor *g = kn_t(ctx->grad_outputs[0]);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

/* ---- expand -------------------------------------------------------------------------- */

const char *kn__legacy_type_name(kn_dtype dt) {
  static const char *names[KN_DTYPE_COUNT] = {
      [KN_BOOL] = "Bool",   [KN_UINT8] = "Byte",    [KN_INT8] = "Char",
      [KN_INT16] = "Short", [KN_INT32] = "Int",     [KN_INT64] = "Long",
      [KN_FLOAT16] = "Half", [KN_BFLOAT16] = "BFloat16", [KN_FLOAT32] = "Float",
      [KN_FLOAT64] = "Double"};
  return names[dt];
}

kn_status kn__meta_expand(const kn__call *c, kn__metas *out) {
  kn__geom in, g;
  kn__geom_of(self_of(c), &in);
  const int64_t *req = c->args[1].u.ints.v;
  int n = c->args[1].u.ints.n;
  char want[256], have[256];
  kn__format_sizes(n, req, want, sizeof want);
  kn__format_symsizes(in.nd, in.sz, have, sizeof have);
  if (n < in.nd)
    return kn__error(KN_ESHAPE,
                     "expand(torch.%sTensor{%s}, size=%s): the number of sizes provided (%d) "
                     "must be greater or equal to the number of dimensions in the tensor (%d)",
                     kn__legacy_type_name(self_of(c)->dtype), have, want, n, in.nd);
  if (n > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "expand: at most %d dimensions, got %d", KN_MAX_DIMS, n);
  g.nd = n;
  g.off = in.off;
  for (int i = n - 1; i >= 0; i--) {
    int dim = in.nd - n + i;
    kn_sym size = dim >= 0 ? in.sz[dim] : kn__sym_const(1);
    kn_sym stride = dim >= 0 ? in.st[dim]
                    : i == n - 1 ? kn__sym_const(0)
                                 : kn__sym_mul(g.sz[i + 1], g.st[i + 1]);
    kn_sym target = kn__arg_symint_at(&c->args[1], i);
    if (req[i] == -1) {
      if (dim < 0)
        return kn__error(KN_ESHAPE, "The expanded size of the tensor (-1) isn't allowed in a "
                                    "leading, non-existing dimension %d", i);
      target = size;
    } else if (req[i] < -1) {
      return kn__error(KN_ESHAPE, "expand: invalid size %lld at dimension %d",
                       (long long)req[i], i);
    }
    if (!kn__sym_guard_eq(size, target)) {
      if (!kn__sym_guard_eq_int(size, 1)) {
        char sz[64];
        kn__sym_format(size, sz, sizeof sz);
        return kn__error(KN_ESHAPE,
                         "The expanded size of the tensor (%lld) must match the existing size "
                         "(%s) at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                         "sizes: %s", (long long)req[i], sz, i, want, have);
      }
      size = target;
      stride = kn__sym_const(0);
    }
    g.sz[i] = size;
    g.st[i] = stride;
  }
  return kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_expand(kn__bwctx *ctx) {
  const kn_tensor *self = kn__call_input(ctx->call, 0);
  kn_tensor *g = kn__sum_to_like(ctx->grad_outputs[0], self);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

/* ---- unsqueeze, squeeze ---------------------------------------------------------------- */

kn_status kn__meta_unsqueeze(const kn__call *c, kn__metas *out) {
  kn__geom in, g;
  kn__geom_of(self_of(c), &in);
  int w;
  kn_status st = kn__wrap_dim(c->args[1].u.i, in.nd + 1, &w);
  if (st != KN_OK) return st;
  if (in.nd + 1 > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "unsqueeze: at most %d dimensions", KN_MAX_DIMS);
  g.nd = in.nd + 1;
  g.off = in.off;
  for (int d = 0, s = 0; d < g.nd; d++) {
    if (d == w) {
      g.sz[d] = kn__sym_const(1);
      g.st[d] = w >= in.nd ? kn__sym_const(1) : kn__sym_mul(in.sz[w], in.st[w]);
    } else {
      g.sz[d] = in.sz[s];
      g.st[d] = in.st[s];
      s++;
    }
  }
  return kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_unsqueeze(kn__bwctx *ctx) {
  kn_tensor *g = kn_squeeze_dim(ctx->grad_outputs[0], ctx->call->args[1].u.i);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

kn_status kn__meta_squeeze(const kn__call *c, kn__metas *out) {
  kn__geom in, g;
  kn__geom_of(self_of(c), &in);
  int only = -1;
  if (c->nargs > 1) {
    kn_status st = kn__wrap_dim(c->args[1].u.i, in.nd, &only);
    if (st != KN_OK) return st;
  }
  g.nd = 0;
  g.off = in.off;
  for (int d = 0; d < in.nd; d++) {
    bool drop = (only < 0 || only == d) && kn__sym_guard_eq_int(in.sz[d], 1);
    if (drop) continue;
    g.sz[g.nd] = in.sz[d];
    g.st[g.nd] = in.st[d];
    g.nd++;
  }
  return kn__push_view(out, c, 0, &g);
}

/* ---- flatten (composite over reshape) ----------------------------------------------------- */

kn_status kn__k_flatten(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t;
  int s, e;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &s);
  if (st == KN_OK) st = kn__wrap_dim(c->args[2].u.i, self->ndim, &e);
  if (st != KN_OK) return st;
  if (s > e)
    return kn__error(KN_EINVAL, "flatten() has invalid args: start_dim cannot come after end_dim");
  /* the merged size is the product of the (symbolic) sizes: no guard */
  kn_sym sym[KN_MAX_DIMS], merged[KN_MAX_DIMS];
  kn__tensor_symsizes(self, sym);
  kn_scope_begin();
  kn_tensor *r;
  if (self->ndim == 0) {
    r = kn_reshape(self, 1, (int64_t[]){1});
  } else if (s == e && !self->sym) {
    r = kn__invoke(KN_OP_RESHAPE_ALIAS, 3,
                   (kn__arg[]){KN_A_T(self), KN_A_INTS(self->sizes, self->ndim),
                               KN_A_INTS(self->strides, self->ndim)});
  } else {
    int n = 0;
    for (int d = 0; d < s; d++) merged[n++] = sym[d];
    kn_sym prod = kn__sym_const(1);
    for (int d = s; d <= e; d++) prod = kn__sym_mul(prod, sym[d]);
    merged[n++] = prod;
    for (int d = e + 1; d < self->ndim; d++) merged[n++] = sym[d];
    r = kn__reshape_sym(self, n, merged);
  }
  st = kn__composite_push(out, r);
  kn_scope_end();
  return st;
}

/* ---- unflatten (composite over view) -------------------------------------------------------- */

/* The sizes that replace dim d (of symbolic size `total`): the requested
** ones, a -1 inferred. Errors name the sizes as PyTorch does. */
static kn_status unflatten_sizes(const kn__arg *req, int d, kn_sym total, kn_sym *out) {
  int n = req->u.ints.n, infer = -1;
  kn_sym prod = kn__sym_const(1);
  for (int k = 0; k < n; k++) {
    out[k] = kn__arg_symint_at(req, k);
    if (req->u.ints.v[k] == -1 && !req->sym && infer < 0) infer = k;
    else if (req->u.ints.v[k] == -1 && !req->sym)
      return kn__error(KN_ESHAPE, "only one dimension can be inferred");
    else if (req->u.ints.v[k] < 0)
      return kn__error(KN_ESHAPE, "invalid shape dimension %lld", (long long)req->u.ints.v[k]);
    else prod = kn__sym_mul(prod, out[k]);
  }
  bool ok;
  if (infer >= 0) {
    ok = !kn__sym_guard_eq_int(prod, 0) && kn__sym_guard_eq_int(kn__sym_mod(total, prod), 0);
    if (ok) out[infer] = kn__sym_floordiv(total, prod);
  } else {
    ok = kn__sym_guard_eq(total, prod);
  }
  if (ok) return KN_OK;
  char want[256], have[64];
  kn__format_sizes(n, req->u.ints.v, want, sizeof want);
  kn__sym_format(total, have, sizeof have);
  return kn__error(KN_ESHAPE, "unflatten: Provided sizes %s don't multiply up to the size of dim "
                   "%d (%s) in the input tensor", want, d, have);
}

kn_status kn__k_unflatten(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t;
  const kn__arg *req = &c->args[2];
  int d, n = req->u.ints.n;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st != KN_OK) return st;
  if (n == 0) return kn__error(KN_EINVAL, "unflatten: sizes must be non-empty");
  if (self->ndim - 1 + n > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "unflatten: at most %d dimensions, got %d", KN_MAX_DIMS,
                     self->ndim - 1 + n);
  kn_sym sym[KN_MAX_DIMS], shape[KN_MAX_DIMS];
  kn__tensor_symsizes(self, sym);
  int k = 0;
  for (int i = 0; i < d; i++) shape[k++] = sym[i];
  st = unflatten_sizes(req, d, sym[d], &shape[k]);
  if (st != KN_OK) return st;
  k += n;
  for (int i = d + 1; i < self->ndim; i++) shape[k++] = sym[i];
  kn_scope_begin();
  st = kn__composite_push(out, kn__view_sym(self, k, shape));
  kn_scope_end();
  return st;
}

/* ---- public API ------------------------------------------------------------------------------ */

kn_tensor *kn_view(kn_tensor *t, int n, const int64_t *size) {
  return kn__invoke(KN_OP_VIEW, 2, (kn__arg[]){KN_A_T(t), KN_A_INTS(size, n)});
}

kn_tensor *kn_reshape(kn_tensor *t, int n, const int64_t *size) {
  return kn__invoke(KN_OP_RESHAPE, 2, (kn__arg[]){KN_A_T(t), KN_A_INTS(size, n)});
}

kn_tensor *kn_permute(kn_tensor *t, int n, const int64_t *dims) {
  return kn__invoke(KN_OP_PERMUTE, 2, (kn__arg[]){KN_A_T(t), KN_A_INTS(dims, n)});
}

kn_tensor *kn_transpose(kn_tensor *t, int64_t dim0, int64_t dim1) {
  return kn__invoke(KN_OP_TRANSPOSE, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim0), KN_A_I(dim1)});
}

kn_tensor *kn_t(kn_tensor *t) { return kn__invoke(KN_OP_T, 1, (kn__arg[]){KN_A_T(t)}); }

kn_tensor *kn_expand(kn_tensor *t, int n, const int64_t *size) {
  return kn__invoke(KN_OP_EXPAND, 2, (kn__arg[]){KN_A_T(t), KN_A_INTS(size, n)});
}

kn_tensor *kn_unsqueeze(kn_tensor *t, int64_t dim) {
  return kn__invoke(KN_OP_UNSQUEEZE, 2, (kn__arg[]){KN_A_T(t), KN_A_I(dim)});
}

kn_tensor *kn_squeeze(kn_tensor *t) {
  return kn__invoke(KN_OP_SQUEEZE, 1, (kn__arg[]){KN_A_T(t)});
}

kn_tensor *kn_squeeze_dim(kn_tensor *t, int64_t dim) {
  return kn__invoke(KN_OP_SQUEEZE_DIM, 2, (kn__arg[]){KN_A_T(t), KN_A_I(dim)});
}

kn_tensor *kn_flatten(kn_tensor *t, int64_t start_dim, int64_t end_dim) {
  return kn__invoke(KN_OP_FLATTEN, 3, (kn__arg[]){KN_A_T(t), KN_A_I(start_dim), KN_A_I(end_dim)});
}

kn_tensor *kn_unflatten(kn_tensor *t, int64_t dim, int n, const int64_t *sizes) {
  return kn__invoke(KN_OP_UNFLATTEN, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_INTS(sizes, n)});
}
