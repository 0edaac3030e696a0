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

/* Push r (a public op's result, or NULL) as the composite's output. */
static kn_status push_result(kn__outs *out, kn_tensor *r) {
  if (!r) return kn_last_status() != KN_OK ? kn_last_status() : KN_EINTERNAL;
  if (!kn__outs_push(out, kn_retain(r))) return kn__oom();
  return KN_OK;
}

/* N-D @ 1-D or 2-D: one mm over the folded batch. */
static kn_tensor *matmul_fold(kn_tensor *a, kn_tensor *b) {
  int d1 = kn_ndim(a), d2 = kn_ndim(b);
  int64_t osz[KN_MAX_DIMS];
  int on = 0;
  for (int d = 0; d < d1 - 1; d++) osz[on++] = kn_size(a, d);
  if (d2 == 2) osz[on++] = kn_size(b, 1);
  kn_tensor *t2 = d2 == 1 ? kn_unsqueeze(b, -1) : b;
  kn_tensor *folded = kn_reshape(a, KN_SHAPE(-1, kn_size(a, -1)));
  kn_tensor *r = t2 && folded ? kn_mm(folded, t2) : NULL;
  return r ? kn_view(r, on, osz) : NULL;
}

/* Broadcast batch dims and run one bmm. */
static kn_tensor *matmul_batched(kn_tensor *a, kn_tensor *b) {
  int d1 = kn_ndim(a), d2 = kn_ndim(b);
  int64_t n = d1 > 1 ? kn_size(a, -2) : 1, m1 = kn_size(a, -1);
  int64_t m2 = d2 > 1 ? kn_size(b, -2) : kn_size(b, 0), p = d2 > 1 ? kn_size(b, -1) : 1;
  int nb1 = d1 > 2 ? d1 - 2 : 0, nb2 = d2 > 2 ? d2 - 2 : 0;
  kn_sym s1[KN_MAX_DIMS], s2[KN_MAX_DIMS], bs[KN_MAX_DIMS];
  for (int d = 0; d < nb1; d++) s1[d] = kn__sym_const(kn_size(a, d));
  for (int d = 0; d < nb2; d++) s2[d] = kn__sym_const(kn_size(b, d));
  int nbo;
  if (kn__broadcast_shapes(nb1, s1, nb2, s2, &nbo, bs) != KN_OK) return NULL;
  if (nbo + 2 > KN_MAX_DIMS) {
    kn__error(KN_ESHAPE, "matmul: at most %d dimensions are supported", KN_MAX_DIMS);
    return NULL;
  }
  int64_t e1[KN_MAX_DIMS], e2[KN_MAX_DIMS], osz[KN_MAX_DIMS], prod = 1;
  for (int d = 0; d < nbo; d++) {
    e1[d] = e2[d] = osz[d] = kn__sym_hint(bs[d]);
    prod *= osz[d];
  }
  int on = nbo;
  e1[nbo] = n, e1[nbo + 1] = m1;
  e2[nbo] = m2, e2[nbo + 1] = p;
  kn_tensor *a3 = kn_reshape(kn_expand(a, nbo + 2, e1), KN_SHAPE(prod, n, m1));
  kn_tensor *b3 = a3 ? kn_reshape(kn_expand(b, nbo + 2, e2), KN_SHAPE(prod, m2, p)) : NULL;
  if (d1 > 1) osz[on++] = n;
  if (d2 > 1) osz[on++] = p;
  kn_tensor *r = b3 ? kn_bmm(a3, b3) : NULL;
  return r ? kn_view(r, on, osz) : NULL;
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

/* With a bias: rows of x (any rank >= 1) through one addmm. */
static kn_tensor *linear_impl(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  kn_tensor *wt = kn_t(w);
  if (!b) return kn_matmul(x, wt);
  if (kn_ndim(x) == 2) return kn_addmm(b, x, wt, kn_int(1), kn_int(1));
  if (kn_ndim(x) == 0) return kn_matmul(x, wt); /* matmul's error */
  int64_t osz[KN_MAX_DIMS];
  int on = kn_ndim(x);
  for (int d = 0; d < on - 1; d++) osz[d] = kn_size(x, d);
  osz[on - 1] = kn_ndim(w) == 2 ? kn_size(w, 0) : 1;
  kn_tensor *x2 = kn_reshape(x, KN_SHAPE(-1, kn_size(x, -1)));
  kn_tensor *r = kn_addmm(b, x2, kn_ndim(w) == 1 ? kn_unsqueeze(wt, 1) : wt, kn_int(1), kn_int(1));
  if (kn_ndim(w) == 1) on--; /* a 1-D weight drops the feature dim */
  return r ? kn_view(r, on, osz) : NULL;
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
