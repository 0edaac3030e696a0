/*
** ops/shape_slice.c: views that pick part of a tensor: slice (Python-style
** clamping, negative indices, positive steps), narrow (composite over
** slice), select, diagonal, as_strided, and the multi-output views unbind,
** split, split_with_sizes and chunk (composite over split). Geometry helpers
** here are shared with the *_scatter ops (ops/shape_scatter.c).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "kiln/ops_shape.h"
#include "ops/shape.h"
#include "ops/symsize.h"

/* ---- geometry transforms ------------------------------------------------------------ */

kn_status kn__geom_slice(kn__geom *g, int64_t dim, const kn__arg *start, const kn__arg *end,
                         int64_t step) {
  if (g->nd == 0) return kn__error(KN_EINVAL, "slice() cannot be applied to a 0-dim tensor.");
  int d;
  kn_status st = kn__wrap_dim(dim, g->nd, &d);
  if (st != KN_OK) return st;
  if (step <= 0) return kn__error(KN_EINVAL, "slice step must be positive");
  kn_sym s, e;
  kn__slice_bounds(g->sz[d], kn__arg_symint(start), kn__arg_symint(end), &s, &e);
  g->off = kn__sym_add(g->off, kn__sym_mul(s, g->st[d]));
  g->sz[d] = kn__slice_len(s, e, step);
  g->st[d] = kn__sym_mul(g->st[d], kn__sym_const(step));
  return KN_OK;
}

static void drop_dim(kn__geom *g, int d, kn_sym idx);

kn_status kn__geom_select(kn__geom *g, int64_t dim, int64_t index) {
  if (g->nd == 0) return kn__error(KN_EINVAL, "select() cannot be applied to a 0-dim tensor.");
  int d;
  kn_status st = kn__wrap_dim(dim, g->nd, &d);
  if (st != KN_OK) return st;
  kn_sym size = g->sz[d], idx = kn__sym_const(index);
  if (kn__sym_guard(idx, KN__SYM_LT, kn__sym_sub(kn__sym_const(0), size)) ||
      kn__sym_guard(idx, KN__SYM_GE, size)) {
    char buf[256];
    kn__format_symsizes(g->nd, g->sz, buf, sizeof buf);
    return kn__error(KN_ERANGE, "select(): index %lld out of range for tensor of size %s at "
                     "dimension %lld", (long long)index, buf, (long long)dim);
  }
  if (index < 0) idx = kn__sym_add(size, idx);
  drop_dim(g, d, idx);
  return KN_OK;
}

/* Fix dim d of g at a (checked) index and remove it. */
static void drop_dim(kn__geom *g, int d, kn_sym idx) {
  g->off = kn__sym_add(g->off, kn__sym_mul(idx, g->st[d]));
  for (int k = d; k + 1 < g->nd; k++) {
    g->sz[k] = g->sz[k + 1];
    g->st[k] = g->st[k + 1];
  }
  g->nd--;
}

kn_status kn__geom_diagonal(kn__geom *g, int64_t offset, int64_t dim1, int64_t dim2) {
  int a, b;
  kn_status st = kn__wrap_dim(dim1, g->nd, &a);
  if (st == KN_OK) st = kn__wrap_dim(dim2, g->nd, &b);
  if (st != KN_OK) return st;
  if (a == b)
    return kn__error(KN_EINVAL, "diagonal dimensions cannot be identical %lld, %lld",
                     (long long)dim1, (long long)dim2);
  kn_sym n1 = g->sz[a], n2 = g->sz[b], off = kn__sym_const(offset);
  kn_sym len = offset >= 0 ? kn__sym_min(n1, kn__sym_sub(n2, off))
                           : kn__sym_min(kn__sym_add(n1, off), n2);
  if (kn__sym_guard(len, KN__SYM_LE, kn__sym_const(0))) len = kn__sym_const(0);
  else
    g->off = kn__sym_add(g->off, offset >= 0 ? kn__sym_mul(kn__sym_const(offset), g->st[b])
                                             : kn__sym_mul(kn__sym_const(-offset), g->st[a]));
  kn_sym dst = kn__sym_add(g->st[a], g->st[b]);
  int n = 0;
  for (int k = 0; k < g->nd; k++) {
    if (k == a || k == b) continue;
    g->sz[n] = g->sz[k];
    g->st[n] = g->st[k];
    n++;
  }
  g->sz[n] = len;
  g->st[n] = dst;
  g->nd = n + 1;
  return KN_OK;
}

/* ---- slice, select, diagonal, as_strided ----------------------------------------------- */

static const kn_tensor *self_of(const kn__call *c) { return c->args[0].u.t; }

/* The size of dim d of self as a number: symbolic sizes are specialised to
** their hint (with a guard), as the number of outputs depends on it. */
static int64_t concrete_size(const kn__call *c, int d) {
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(self_of(c), sz);
  int64_t v = kn__sym_hint(sz[d]);
  (void)kn__sym_guard_eq_int(sz[d], v);
  return v;
}

kn_status kn__meta_slice(const kn__call *c, kn__metas *out) {
  kn__geom g;
  kn__geom_of(self_of(c), &g);
  kn_status st = kn__geom_slice(&g, c->args[1].u.i, &c->args[2], &c->args[3], c->args[4].u.i);
  return st != KN_OK ? st : kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_slice(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *self = kn__call_input(c, 0);
  kn_tensor *z = kn__zeros_like_sym(self);
  kn_tensor *g = kn__slice_scatter_sym(z, ctx->grad_outputs[0], c->args[1].u.i,
                                       kn__arg_symint(&c->args[2]), kn__arg_symint(&c->args[3]),
                                       c->args[4].u.i);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

kn_status kn__meta_select(const kn__call *c, kn__metas *out) {
  kn__geom g;
  kn__geom_of(self_of(c), &g);
  kn_status st = kn__geom_select(&g, c->args[1].u.i, c->args[2].u.i);
  return st != KN_OK ? st : kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_select(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *self = kn__call_input(c, 0);
  kn_tensor *z = kn__zeros_like_sym(self);
  kn_tensor *g = kn__select_scatter_sym(z, ctx->grad_outputs[0], c->args[1].u.i,
                                        kn__arg_symint(&c->args[2]));
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

kn_status kn__meta_diagonal(const kn__call *c, kn__metas *out) {
  kn__geom g;
  kn__geom_of(self_of(c), &g);
  kn_status st = kn__geom_diagonal(&g, c->args[1].u.i, c->args[2].u.i, c->args[3].u.i);
  return st != KN_OK ? st : kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_diagonal(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *self = kn__call_input(c, 0);
  kn_tensor *z = kn__zeros_like_sym(self);
  kn_tensor *g = kn_diagonal_scatter(z, ctx->grad_outputs[0], c->args[1].u.i, c->args[2].u.i,
                                     c->args[3].u.i);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

/* as_strided(self, size, stride, storage_offset or none) */
kn_status kn__meta_as_strided(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = self_of(c);
  const kn__arg *sz = &c->args[1], *sd = &c->args[2];
  int n = sz->u.ints.n;
  if (n != sd->u.ints.n)
    return kn__error(KN_EINVAL, "mismatch in length of strides and shape");
  if (n > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "as_strided: at most %d dimensions, got %d", KN_MAX_DIMS, n);
  char sbuf[256], dbuf[256];
  kn__format_sizes(n, sz->u.ints.v, sbuf, sizeof sbuf);
  kn__format_sizes(n, sd->u.ints.v, dbuf, sizeof dbuf);
  int64_t off = c->args[3].kind == KN__A_INT ? c->args[3].u.i : self->offset;
  if (off < 0)
    return kn__error(KN_EINVAL, "Tensor: invalid storage offset %lld", (long long)off);
  int64_t extent = 1;
  for (int d = 0; d < n; d++) {
    if (sd->u.ints.v[d] < 0)
      return kn__error(KN_EINVAL, "as_strided: Negative strides are not supported at the "
                       "moment, got strides: %s", dbuf);
    if (sz->u.ints.v[d] < 0)
      return kn__error(KN_EINVAL, "Trying to create tensor with negative dimension %lld: %s",
                       (long long)sz->u.ints.v[d], sbuf);
    if (sz->u.ints.v[d] == 0) extent = 0;
  }
  kn_status st = kn__check_geometry("as_strided", n, sz->u.ints.v, sd->u.ints.v, off, self->dtype);
  if (st != KN_OK) return st; /* from here on the arithmetic below cannot overflow */
  for (int d = 0; d < n && extent > 0; d++) extent += (sz->u.ints.v[d] - 1) * sd->u.ints.v[d];
  size_t es = kn_dtype_size(self->dtype);
  int64_t need = extent > 0 ? (off + extent) * (int64_t)es : 0;
  if (need > (int64_t)self->storage->nbytes)
    return kn__error(KN_ERANGE, "setStorage: sizes %s, strides %s, storage offset %lld, and "
                     "itemsize %zu requiring a storage size of %lld are out of bounds for "
                     "storage of size %zu", sbuf, dbuf, (long long)off, es, (long long)need,
                     self->storage->nbytes);
  kn__geom g;
  g.nd = n;
  for (int d = 0; d < n; d++) {
    g.sz[d] = kn__sym_const(sz->u.ints.v[d]);
    g.st[d] = kn__sym_const(sd->u.ints.v[d]);
  }
  g.off = kn__sym_const(off);
  return kn__push_view(out, c, 0, &g);
}

kn_status kn__bw_as_strided(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *self = kn__call_input(c, 0);
  /* the input's geometry as symbolic ints (its sizes under dynamic shapes),
  ** the view's as the forward call passed it (no offset: the input's) */
  kn_sym in[3][KN_MAX_DIMS], vw[3][KN_MAX_DIMS];
  kn__tensor_symsizes(self, in[0]);
  kn__tensor_symstrides(self, in[1]);
  in[2][0] = self->sym ? self->sym->offset : kn__sym_const(self->offset);
  kn__arg geom[6] = {KN_A_SYMINTS(self->sizes, in[0], self->ndim),
                     KN_A_SYMINTS(self->strides, in[1], self->ndim), KN_A_SYMINT(&in[2][0]),
                     kn__arg_known(&c->args[1], vw[0]), kn__arg_known(&c->args[2], vw[1]),
                     c->args[3].kind == KN__A_INT ? kn__arg_known(&c->args[3], vw[2])
                                                  : KN_A_SYMINT(&in[2][0])};
  kn_tensor *g = kn__as_strided_grad(ctx->grad_outputs[0], geom);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

/* ---- narrow (composite) -------------------------------------------------------------------- */

kn_status kn__k_narrow(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t;
  if (self->ndim == 0)
    return kn__error(KN_EINVAL, "narrow() cannot be applied to a 0-dim tensor.");
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st != KN_OK) return st;
  int64_t size = self->sizes[d], start = c->args[2].u.i, len = c->args[3].u.i, at = start;
  if (start != size) { /* narrowing to nothing at the end is allowed */
    int64_t lo = size > 0 ? -size : -1, hi = size > 0 ? size - 1 : 0;
    if (start < lo || start > hi)
      return kn__error(KN_ERANGE, "Dimension out of range (expected to be in range of [%lld, "
                       "%lld], but got %lld)", (long long)lo, (long long)hi, (long long)start);
    if (start < 0) at += size;
  }
  if (len < 0 || at > size - len)
    return kn__error(KN_ERANGE, "start (%lld) + length (%lld) exceeds dimension size (%lld).",
                     (long long)at, (long long)len, (long long)size);
  /* a negative start stays relative to the end (slice resolves it over the
  ** symbolic size), so the slice holds no size read as a plain int */
  int64_t end = start < 0 && start + len == 0 ? KN_SLICE_END : start + len;
  kn_scope_begin();
  st = kn__composite_push(out, kn_slice(self, d, start, end, 1));
  kn_scope_end();
  return st;
}

/* ---- unbind, split, split_with_sizes, chunk ----------------------------------------------------- */

kn_status kn__meta_unbind(const kn__call *c, kn__metas *out) {
  kn__geom in;
  kn__geom_of(self_of(c), &in);
  if (in.nd == 0)
    return kn__error(KN_EINVAL, "Dimension specified as %lld but tensor has no dimensions",
                     (long long)c->args[1].u.i);
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, in.nd, &d);
  int64_t n = st == KN_OK ? concrete_size(c, d) : 0;
  for (int64_t i = 0; st == KN_OK && i < n; i++) {
    kn__geom g = in;
    drop_dim(&g, d, kn__sym_const(i));
    st = kn__push_view(out, c, 0, &g);
  }
  return st;
}

/* Grads of missing outputs are zeros of that output's shape. Results are in
** the rule's scope. */
static kn_tensor *grad_or_zeros(kn__bwctx *ctx, int i) {
  if (ctx->grad_outputs[i]) return ctx->grad_outputs[i];
  return kn__zeros_like_sym(ctx->outputs[i]);
}

/* The grads of all outputs (zeros for missing ones) joined along dim: stacked
** (unbind) or concatenated (split). */
static kn_status bw_join(kn__bwctx *ctx, bool stack, int64_t dim) {
  int n = ctx->nout;
  kn_tensor *gs[64] = {NULL}, **v = n <= 64 ? gs : calloc((size_t)n, sizeof *v);
  if (!v) return kn__oom();
  kn_status st = KN_OK;
  for (int i = 0; i < n && st == KN_OK; i++) {
    v[i] = grad_or_zeros(ctx, i);
    if (!v[i]) st = kn_last_status();
  }
  kn_tensor *g = st != KN_OK ? NULL : stack ? kn_stack(v, n, dim) : kn_cat(v, n, dim);
  if (v != gs) free(v);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

kn_status kn__bw_unbind(kn__bwctx *ctx) { return bw_join(ctx, true, ctx->call->args[1].u.i); }

/* Push the view of self's dim d over [start, start + len). */
static kn_status push_piece(const kn__call *c, kn__metas *out, int d, int64_t start, int64_t len) {
  kn__geom g;
  kn__geom_of(self_of(c), &g);
  g.off = kn__sym_add(g.off, kn__sym_mul(kn__sym_const(start), g.st[d]));
  g.sz[d] = kn__sym_const(len);
  return kn__push_view(out, c, 0, &g);
}

static kn_status split_dim(const kn__call *c, int64_t dim, int *d) {
  if (self_of(c)->ndim == 0)
    return kn__error(KN_EINVAL, "%s expects at least a 1-dimensional tensor",
                     c->op->id == KN_OP_CHUNK ? "chunk" : "split");
  return kn__wrap_dim(dim, self_of(c)->ndim, d);
}

kn_status kn__meta_split(const kn__call *c, kn__metas *out) {
  int d;
  kn_status st = split_dim(c, c->args[2].u.i, &d);
  if (st != KN_OK) return st;
  int64_t size = concrete_size(c, d), ss = c->args[1].u.i;
  if (ss < 0)
    return kn__error(KN_EINVAL, "split expects split_size be non-negative, but got "
                     "split_size=%lld", (long long)ss);
  if (ss == 0 && size != 0)
    return kn__error(KN_EINVAL, "split_size can only be 0 if dimension size is 0, but got "
                     "dimension size of %lld", (long long)size);
  int64_t n = ss == 0 ? 1 : size / ss + (size % ss != 0); /* ceil, without overflow */
  if (n < 1) n = 1;
  for (int64_t i = 0, start = 0; i < n && st == KN_OK; i++, start += ss)
    st = push_piece(c, out, d, start, size - start < ss ? size - start : ss);
  return st;
}

kn_status kn__meta_split_with_sizes(const kn__call *c, kn__metas *out) {
  int d;
  kn_status st = split_dim(c, c->args[2].u.i, &d);
  if (st != KN_OK) return st;
  const kn__arg *ss = &c->args[1];
  int64_t size = concrete_size(c, d), sum = 0;
  char buf[512];
  kn__format_sizes(ss->u.ints.n, ss->u.ints.v, buf, sizeof buf);
  for (int i = 0; i < ss->u.ints.n; i++) {
    if (ss->u.ints.v[i] < 0)
      return kn__error(KN_EINVAL, "split_with_sizes expects split_sizes have only "
                       "non-negative entries, but got split_sizes=%s", buf);
    sum += ss->u.ints.v[i];
  }
  if (sum != size)
    return kn__error(KN_ESHAPE, "split_with_sizes expects split_sizes to sum exactly to %lld "
                     "(input tensor's size at dimension %lld), but got split_sizes=%s",
                     (long long)size, (long long)c->args[2].u.i, buf);
  int64_t start = 0;
  for (int i = 0; i < ss->u.ints.n && st == KN_OK; start += ss->u.ints.v[i++])
    st = push_piece(c, out, d, start, ss->u.ints.v[i]);
  return st;
}

/* SplitBackward0 / SplitWithSizesBackward0: cat the grads along dim. */
kn_status kn__bw_split(kn__bwctx *ctx) { return bw_join(ctx, false, ctx->call->args[2].u.i); }

kn_status kn__k_chunk(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t;
  int64_t chunks = c->args[1].u.i;
  if (chunks <= 0)
    return kn__error(KN_EINVAL, "chunk expects `chunks` to be greater than 0, got: %lld",
                     (long long)chunks);
  int d;
  kn_status st = split_dim(c, c->args[2].u.i, &d);
  if (st != KN_OK) return st;
  int64_t size = self->sizes[d], ss = size / chunks + (size % chunks != 0); /* ceil */
  kn__call sub = {.op = NULL, .nargs = 3};
  int64_t *zeros = NULL;
  if (ss == 0 && size == 0) {
    if (chunks > 4096) return kn__error(KN_EINVAL, "chunk: too many chunks (%lld)", (long long)chunks);
    zeros = calloc((size_t)chunks, sizeof *zeros);
    if (!zeros) return kn__oom();
    sub.op = &kn__ops[KN_OP_SPLIT_WITH_SIZES];
    sub.args[1] = KN_A_INTS(zeros, (int)chunks);
  } else {
    sub.op = &kn__ops[KN_OP_SPLIT];
    sub.args[1] = KN_A_I(ss);
  }
  sub.args[0] = KN_A_T(self);
  sub.args[2] = KN_A_I(d);
  st = kn__dispatch(&sub, out);
  free(zeros);
  return st;
}

/* ---- public API ------------------------------------------------------------------------------- */

kn_tensor *kn_slice(kn_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return kn__invoke(KN_OP_SLICE, 5,
                    (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_I(start), KN_A_I(end), KN_A_I(step)});
}

kn_tensor *kn_narrow(kn_tensor *t, int64_t dim, int64_t start, int64_t length) {
  return kn__invoke(KN_OP_NARROW, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_I(start), KN_A_I(length)});
}

kn_tensor *kn_select(kn_tensor *t, int64_t dim, int64_t index) {
  return kn__invoke(KN_OP_SELECT, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_I(index)});
}

kn_tensor *kn_diagonal(kn_tensor *t, int64_t offset, int64_t dim1, int64_t dim2) {
  return kn__invoke(KN_OP_DIAGONAL, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_I(offset), KN_A_I(dim1), KN_A_I(dim2)});
}

kn_tensor *kn_as_strided(kn_tensor *t, int n, const int64_t *size, const int64_t *stride,
                         int64_t storage_offset) {
  return kn__invoke(KN_OP_AS_STRIDED, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_INTS(size, n), KN_A_INTS(stride, n),
                                storage_offset < 0 ? KN_A_NONE : KN_A_I(storage_offset)});
}

int kn_unbind(kn_tensor *t, int64_t dim, kn_tensor **outs, int cap) {
  return kn__invoke_multi(KN_OP_UNBIND, 2, (kn__arg[]){KN_A_T(t), KN_A_I(dim)}, outs, cap);
}

int kn_split(kn_tensor *t, int64_t split_size, int64_t dim, kn_tensor **outs, int cap) {
  return kn__invoke_multi(KN_OP_SPLIT, 3, (kn__arg[]){KN_A_T(t), KN_A_I(split_size), KN_A_I(dim)},
                          outs, cap);
}

int kn_split_sizes(kn_tensor *t, int n, const int64_t *sizes, int64_t dim, kn_tensor **outs,
                   int cap) {
  return kn__invoke_multi(KN_OP_SPLIT_WITH_SIZES, 3,
                          (kn__arg[]){KN_A_T(t), KN_A_INTS(sizes, n), KN_A_I(dim)}, outs, cap);
}

int kn_chunk(kn_tensor *t, int64_t chunks, int64_t dim, kn_tensor **outs, int cap) {
  return kn__invoke_multi(KN_OP_CHUNK, 3, (kn__arg[]){KN_A_T(t), KN_A_I(chunks), KN_A_I(dim)},
                          outs, cap);
}
