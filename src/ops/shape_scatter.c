/*
** ops/shape_scatter.c: out-of-place "write into a view" ops, the backward
** helpers of the picking views: slice_scatter, select_scatter,
** diagonal_scatter (a copy of self with src written into the view), and
** _as_strided_backward (the gradient of as_strided, accumulating where the
** strided view overlaps itself).
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "kiln/ops_shape.h"
#include "ops/iter.h"
#include "ops/shape.h"
#include "ops/symsize.h"

/* The view of geometry g (of self's shape) that op c writes src into. */
static kn_status scatter_geom(const kn__call *c, kn__geom *g) {
  switch (c->op->id) {
  case KN_OP_SLICE_SCATTER:
    return kn__geom_slice(g, c->args[2].u.i, &c->args[3], &c->args[4], c->args[5].u.i);
  case KN_OP_SELECT_SCATTER:
    return kn__geom_select(g, c->args[2].u.i, c->args[3].u.i);
  default:
    return kn__geom_diagonal(g, c->args[2].u.i, c->args[3].u.i, c->args[4].u.i);
  }
}

kn_status kn__meta_view_scatter(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *src = c->args[1].u.t;
  kn__geom g;
  kn__geom_of(self, &g);
  kn_status st = scatter_geom(c, &g);
  if (st != KN_OK) return st;
  kn_sym ssz[KN_MAX_DIMS];
  kn__tensor_symsizes(src, ssz);
  bool same = src->ndim == g.nd;
  for (int d = 0; same && d < g.nd; d++) same = kn__sym_guard_eq(ssz[d], g.sz[d]);
  if (!same) {
    char a[256], b[256];
    kn__format_symsizes(src->ndim, ssz, a, sizeof a);
    kn__format_symsizes(g.nd, g.sz, b, sizeof b);
    return kn__error(KN_ESHAPE, "expected src to have a size equal to the slice of self. src "
                     "size = %s, slice size = %s", a, b);
  }
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(self, sz);
  return kn__push_fresh(out, self->dtype, self->ndim, sz);
}

kn_status kn__k_view_scatter(const kn__call *c, kn__outs *out) {
  kn_tensor *o = out->t[0];
  kn_status st = kn__copy_into(o, c->args[0].u.t);
  if (st != KN_OK) return st;
  kn__geom g;
  kn__geom_of(o, &g);
  st = scatter_geom(c, &g);
  if (st != KN_OK) return st;
  int64_t sz[KN_MAX_DIMS], sd[KN_MAX_DIMS];
  for (int d = 0; d < g.nd; d++) {
    sz[d] = kn__sym_hint(g.sz[d]);
    sd[d] = kn__sym_hint(g.st[d]);
  }
  st = kn__check_geometry(c->op->name, g.nd, sz, sd, kn__sym_hint(g.off), o->dtype);
  if (st != KN_OK) return st;
  kn_tensor *v = kn__make_view(o, g.nd, sz, sd, kn__sym_hint(g.off));
  if (!v) return kn_last_status();
  st = kn__copy_into(v, c->args[1].u.t);
  kn_release(v);
  return st;
}

/* d/dself: grad with the view zeroed; d/dsrc: the view of grad. */
kn_status kn__bw_view_scatter(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *g = ctx->grad_outputs[0], *src = kn__call_input(c, 1);
  const kn__arg *a = c->args;
  if (ctx->needs_input_grad[0]) {
    kn_tensor *z = kn__zeros_shaped(src, g->dtype);
    kn_tensor *r = c->op->id == KN_OP_SLICE_SCATTER
                       ? kn__slice_scatter_sym(g, z, a[2].u.i, kn__arg_symint(&a[3]),
                                               kn__arg_symint(&a[4]), a[5].u.i)
                   : c->op->id == KN_OP_SELECT_SCATTER
                       ? kn__select_scatter_sym(g, z, a[2].u.i, kn__arg_symint(&a[3]))
                       : kn_diagonal_scatter(g, z, a[2].u.i, a[3].u.i, a[4].u.i);
    if (!r) return kn_last_status();
    ctx->grad_inputs[0] = r;
  }
  if (ctx->needs_input_grad[1]) {
    kn_tensor *r = c->op->id == KN_OP_SLICE_SCATTER
                       ? kn__slice_sym(g, a[2].u.i, kn__arg_symint(&a[3]), kn__arg_symint(&a[4]),
                                       a[5].u.i)
                   : c->op->id == KN_OP_SELECT_SCATTER
                       ? kn__select_sym(g, a[2].u.i, kn__arg_symint(&a[3]))
                       : kn_diagonal(g, a[2].u.i, a[3].u.i, a[4].u.i);
    if (!r) return kn_last_status();
    ctx->grad_inputs[1] = r;
  }
  return KN_OK;
}

/* ---- _as_strided_backward --------------------------------------------------------------
** args: grad, input size, input stride, input offset, size, stride, offset.
** Out = gather at the input's positions of (grad scattered, with accumulation,
** at the as_strided view's positions) in a zeroed storage-shaped buffer. */

typedef struct sgeom {
  int nd;
  const int64_t *sz, *st;
  int64_t off;
} sgeom;

static sgeom sgeom_at(const kn__call *c, int i) {
  return (sgeom){c->args[i].u.ints.n, c->args[i].u.ints.v, c->args[i + 1].u.ints.v,
                 c->args[i + 2].u.i};
}

static int64_t sgeom_end(sgeom g) { /* one past the last reachable element, or off */
  int64_t e = g.off + 1;
  for (int d = 0; d < g.nd; d++) {
    if (g.sz[d] == 0) return g.off;
    e += (g.sz[d] - 1) * g.st[d];
  }
  return e;
}

kn_status kn__meta_as_strided_grad(const kn__call *c, kn__metas *out) {
  const kn_tensor *grad = c->args[0].u.t;
  sgeom in = sgeom_at(c, 1), vw = sgeom_at(c, 4);
  if (in.nd != c->args[2].u.ints.n || vw.nd != c->args[5].u.ints.n || vw.nd != grad->ndim)
    return kn__error(KN_EINVAL, "_as_strided_backward: inconsistent geometry");
  for (int d = 0; d < vw.nd; d++)
    if (vw.sz[d] != grad->sizes[d] || vw.st[d] < 0)
      return kn__error(KN_ESHAPE, "_as_strided_backward: grad does not match the view's size");
  for (int d = 0; d < in.nd; d++)
    if (in.st[d] < 0 || in.sz[d] < 0)
      return kn__error(KN_EINVAL, "_as_strided_backward: negative input geometry");
  if (in.off < 0 || vw.off < 0) return kn__error(KN_EINVAL, "_as_strided_backward: bad offset");
  kn_sym sz[KN_MAX_DIMS]; /* the input's sizes, symbolic when passed so */
  for (int d = 0; d < in.nd; d++) sz[d] = kn__arg_symint_at(&c->args[1], d);
  return kn__push_fresh(out, grad->dtype, in.nd, sz);
}

kn_status kn__k_as_strided_grad(const kn__call *c, kn__outs *out) {
  kn_tensor *grad = c->args[0].u.t, *o = out->t[0];
  sgeom in = sgeom_at(c, 1), vw = sgeom_at(c, 4);
  int64_t base = in.off < vw.off ? in.off : vw.off;
  int64_t e1 = sgeom_end(in), e2 = sgeom_end(vw), len = (e1 > e2 ? e1 : e2) - base;
  kn_tensor *buf = kn__empty(1, (int64_t[]){len}, KN_FLOAT64, KN_CPU);
  if (!buf) return kn_last_status();
  double *b = kn_data(buf);
  memset(b, 0, (size_t)len * sizeof *b);
  /* scatter-add grad at the view's positions (in float64) */
  kn_tensor *g64 = kn__contiguous_copy(grad, KN_FLOAT64);
  if (!g64) {
    kn_release(buf);
    return kn_last_status();
  }
  const double *gp = kn_data(g64);
  int64_t n = kn__numel(vw.nd, vw.sz), idx[KN_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t p = vw.off - base;
    for (int d = 0; d < vw.nd; d++) p += idx[d] * vw.st[d];
    b[p] += gp[i];
    for (int d = vw.nd - 1; d >= 0 && ++idx[d] == vw.sz[d]; d--) idx[d] = 0;
  }
  kn_release(g64);
  kn_tensor *src = kn__make_view(buf, in.nd, in.sz, in.st, in.off - base);
  kn_status st = src ? kn__copy_into(o, src) : kn_last_status();
  kn_release(src);
  kn_release(buf);
  return st;
}

/* The op is linear in grad; its adjoint is itself with the two geometries
** swapped. */
kn_status kn__bw_as_strided_grad(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_sym store[6][KN_MAX_DIMS];
  kn__arg geom[6];
  for (int i = 0; i < 6; i++) /* the two geometries swapped */
    geom[i] = kn__arg_known(&c->args[1 + (i + 3) % 6], store[i]);
  kn_tensor *g = kn__as_strided_grad(ctx->grad_outputs[0], geom);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

/* ---- public API ---------------------------------------------------------------------------- */

kn_tensor *kn_slice_scatter(kn_tensor *self, kn_tensor *src, int64_t dim, int64_t start,
                            int64_t end, int64_t step) {
  return kn__invoke(KN_OP_SLICE_SCATTER, 6,
                    (kn__arg[]){KN_A_T(self), KN_A_T(src), KN_A_I(dim), KN_A_I(start),
                                KN_A_I(end), KN_A_I(step)});
}

kn_tensor *kn_select_scatter(kn_tensor *self, kn_tensor *src, int64_t dim, int64_t index) {
  return kn__invoke(KN_OP_SELECT_SCATTER, 4,
                    (kn__arg[]){KN_A_T(self), KN_A_T(src), KN_A_I(dim), KN_A_I(index)});
}

kn_tensor *kn_diagonal_scatter(kn_tensor *self, kn_tensor *src, int64_t offset, int64_t dim1,
                               int64_t dim2) {
  return kn__invoke(KN_OP_DIAGONAL_SCATTER, 5,
                    (kn__arg[]){KN_A_T(self), KN_A_T(src), KN_A_I(offset), KN_A_I(dim1),
                                KN_A_I(dim2)});
}

kn_tensor *kn__as_strided_grad(kn_tensor *grad, const kn__arg *geom) {
  kn__arg a[7] = {KN_A_T(grad)};
  memcpy(a + 1, geom, 6 * sizeof *geom);
  return kn__invoke(KN_OP_AS_STRIDED_GRAD, 7, a);
}
