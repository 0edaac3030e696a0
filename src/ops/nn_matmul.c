/*
** ops/nn_matmul.c: the composites matmul and linear (CompositeImplicit in
** PyTorch: autograd comes from the ops they call). matmul follows PyTorch
** 1.13's dispatch: 1-D.1-D -> dot, 2-D.1-D -> mv, 1-D.2-D -> mm on an
** unsqueezed row, 2-D.2-D -> mm, N-D.(1|2)-D -> fold the batch into the rows
** of one mm, otherwise broadcast the batch dims, flatten them and run bmm.
** linear(x, W, b) = x @ W^T + b, through addmm when there is a bias.
*/
#include "core/error.h"
#include "kiln/ops.h"
#include "ops/nn.h"
#include "ops/symsize.h"

/* Push r (a public op's result, or NULL) as the composite's output. */
static kn_status push_result(kn__outs *out, kn_tensor *r) {
  if (!r) return kn_last_status() != KN_OK ? kn_last_status() : KN_EINTERNAL;
  if (!kn__outs_push(out, kn_retain(r))) return kn__oom();
  return KN_OK;
}

/* The product of sizes s[0..n). */
static kn_sym sym_prod(int n, const kn_sym *s) {
  kn_sym p = kn__sym_const(1);
  for (int d = 0; d < n; d++) p = kn__sym_mul(p, s[d]);
  return p;
}

/* N-D @ 1-D or 2-D: one mm over the folded batch. Sizes stay symbolic
** (kn_sym): under tracing with dynamic shapes the folded row count is the
** product of the batch symbols, so no size is read as a plain int and no
** guard is needed (a [B, S, K] input keeps B and S). */
static kn_tensor *matmul_fold(kn_tensor *a, kn_tensor *b) {
  int d1 = kn_ndim(a), d2 = kn_ndim(b);
  kn_sym sa[KN_MAX_DIMS], sb[KN_MAX_DIMS], osz[KN_MAX_DIMS];
  kn__tensor_symsizes(a, sa);
  kn__tensor_symsizes(b, sb);
  int on = 0;
  for (int d = 0; d < d1 - 1; d++) osz[on++] = sa[d];
  if (d2 == 2) osz[on++] = sb[1];
  kn_tensor *t2 = d2 == 1 ? kn_unsqueeze(b, -1) : b;
  kn_tensor *folded = kn__reshape_sym(a, 2, (kn_sym[]){sym_prod(d1 - 1, sa), sa[d1 - 1]});
  kn_tensor *r = t2 && folded ? kn_mm(folded, t2) : NULL;
  return r ? kn__view_sym(r, on, osz) : NULL;
}

/* Broadcast batch dims and run one bmm (symbolic sizes, as matmul_fold). */
static kn_tensor *matmul_batched(kn_tensor *a, kn_tensor *b) {
  int d1 = kn_ndim(a), d2 = kn_ndim(b);
  kn_sym sa[KN_MAX_DIMS], sb[KN_MAX_DIMS], bs[KN_MAX_DIMS];
  kn__tensor_symsizes(a, sa);
  kn__tensor_symsizes(b, sb);
  kn_sym one = kn__sym_const(1);
  kn_sym n = d1 > 1 ? sa[d1 - 2] : one, m1 = sa[d1 - 1];
  kn_sym m2 = d2 > 1 ? sb[d2 - 2] : sb[0], p = d2 > 1 ? sb[d2 - 1] : one;
  int nb1 = d1 > 2 ? d1 - 2 : 0, nb2 = d2 > 2 ? d2 - 2 : 0;
  int nbo;
  if (kn__broadcast_shapes(nb1, sa, nb2, sb, &nbo, bs) != KN_OK) return NULL;
  if (nbo + 2 > KN_MAX_DIMS) {
    kn__error(KN_ESHAPE, "matmul: at most %d dimensions are supported", KN_MAX_DIMS);
    return NULL;
  }
  kn_sym e1[KN_MAX_DIMS], e2[KN_MAX_DIMS], osz[KN_MAX_DIMS];
  for (int d = 0; d < nbo; d++) e1[d] = e2[d] = osz[d] = bs[d];
  kn_sym prod = sym_prod(nbo, bs);
  int on = nbo;
  e1[nbo] = n, e1[nbo + 1] = m1;
  e2[nbo] = m2, e2[nbo + 1] = p;
  kn_tensor *a3 = kn__reshape_sym(kn__expand_sym(a, nbo + 2, e1), 3, (kn_sym[]){prod, n, m1});
  kn_tensor *b3 =
      a3 ? kn__reshape_sym(kn__expand_sym(b, nbo + 2, e2), 3, (kn_sym[]){prod, m2, p}) : NULL;
  if (d1 > 1) osz[on++] = n;
  if (d2 > 1) osz[on++] = p;
  kn_tensor *r = b3 ? kn_bmm(a3, b3) : NULL;
  return r ? kn__view_sym(r, on, osz) : NULL;
}

static kn_tensor *matmul_impl(kn_tensor *a, kn_tensor *b) {
  int d1 = kn_ndim(a), d2 = kn_ndim(b);
  if (d1 == 0 || d2 == 0) {
    kn__error(KN_ESHAPE,
              "both arguments to matmul need to be at least 1D, but they are %dD and %dD", d1,
              d2);
    return NULL;
  }
  if (d1 == 1 && d2 == 1) return kn_dot(a, b);
  if (d1 == 2 && d2 == 1) return kn_mv(a, b);
  if (d1 == 1 && d2 == 2) {
    kn_tensor *r = kn_mm(kn_unsqueeze(a, 0), b);
    return r ? kn_squeeze_dim(r, 0) : NULL;
  }
  if (d1 == 2 && d2 == 2) return kn_mm(a, b);
  if (d1 >= 3 && d2 <= 2) return matmul_fold(a, b);
  return matmul_batched(a, b);
}

kn_status kn__k_matmul(const kn__call *c, kn__outs *out) {
  kn_scope_begin();
  kn_status st = push_result(out, matmul_impl(c->args[0].u.t, c->args[1].u.t));
  kn_scope_end();
  return st;
}

/* With a bias: rows of x (any rank >= 1) through one addmm, over symbolic
** sizes (see matmul_fold). */
static kn_tensor *linear_impl(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  kn_tensor *wt = kn_t(w);
  if (!b) return kn_matmul(x, wt);
  if (kn_ndim(x) == 2) return kn_addmm(b, x, wt, kn_int(1), kn_int(1));
  if (kn_ndim(x) == 0) return kn_matmul(x, wt); /* matmul's error */
  kn_sym sx[KN_MAX_DIMS], sw[KN_MAX_DIMS], osz[KN_MAX_DIMS];
  kn__tensor_symsizes(x, sx);
  kn__tensor_symsizes(w, sw);
  int on = kn_ndim(x);
  for (int d = 0; d < on - 1; d++) osz[d] = sx[d];
  osz[on - 1] = kn_ndim(w) == 2 ? sw[0] : kn__sym_const(1);
  kn_tensor *x2 = kn__reshape_sym(x, 2, (kn_sym[]){sym_prod(on - 1, sx), sx[on - 1]});
  kn_tensor *r = kn_addmm(b, x2, kn_ndim(w) == 1 ? kn_unsqueeze(wt, 1) : wt, kn_int(1), kn_int(1));
  if (kn_ndim(w) == 1) on--; /* a 1-D weight drops the feature dim */
  return r ? kn__view_sym(r, on, osz) : NULL;
}

kn_status kn__k_linear(const kn__call *c, kn__outs *out) {
  kn_tensor *b = c->args[2].kind == KN__A_TENSOR ? c->args[2].u.t : NULL;
  kn_scope_begin();
  kn_status st = push_result(out, linear_impl(c->args[0].u.t, c->args[1].u.t, b));
  kn_scope_end();
  return st;
}

/* ---- public API --------------------------------------------------------------- */

kn_tensor *kn_matmul(kn_tensor *self, kn_tensor *other) {
  return kn__invoke(KN_OP_MATMUL, 2, (kn__arg[]){KN_A_T(self), KN_A_T(other)});
}

kn_tensor *kn_linear(kn_tensor *input, kn_tensor *weight, kn_tensor *bias) {
  return kn__invoke(KN_OP_LINEAR, 3,
                    (kn__arg[]){KN_A_T(input), KN_A_T(weight), bias ? KN_A_T(bias) : KN_A_NONE});
}
