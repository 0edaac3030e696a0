/*
** ops/nn_rms_norm.c: _fused_rms_norm and _fused_rms_norm_backward (torch
** 2.8's fused op, and what torch.nn.functional.rms_norm computes) with the
** derivative rule, and the public kn_rms_norm.
**
** y = x * rstd * weight over the trailing normalized_shape dims, with
** rstd = 1 / sqrt(mean(x^2) + eps); eps absent: the machine epsilon of the
** computing type (float32's for float32, bfloat16 and float16, float64's for
** float64), as torch. float32 and float64 run the vectorised row kernels of
** ops/norm_rows.h (one pass for the sum of squares and one for the output,
** the row in L1; backward one pass for sum(go * w * x) and one for the input
** and weight gradients); bfloat16 and float16 are computed in float32 and
** rounded once. y has the input's dtype; rstd (shape: the leading dims, the
** normalized dims as 1) the computing type's, as torch's.
*/
#include <float.h>
#include <math.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/norm_rows.h"
#include "ops/symsize.h"

static const kn_tensor *opt(const kn__call *c, int i) {
  return c->args[i].kind == KN__A_TENSOR ? c->args[i].u.t : NULL;
}

/* The type the rows are computed in: float32 for the 16-bit floats. */
static kn_dtype compute_dtype(kn_dtype dt) { return dt == KN_FLOAT64 ? KN_FLOAT64 : KN_FLOAT32; }

static kn_status check_dtypes(const kn_tensor *x, const kn_tensor *w) {
  if (!kn_dtype_is_floating(x->dtype))
    return kn__error(KN_EDTYPE, "rms_norm: expected a floating input, got %s",
                     kn_dtype_name(x->dtype));
  if (w && !kn_dtype_is_floating(w->dtype))
    return kn__error(KN_EDTYPE, "rms_norm: expected a floating weight, got %s",
                     kn_dtype_name(w->dtype));
  return KN_OK;
}

/* args: input, normalized_shape, weight?, eps? */
kn_status kn__meta_rms_norm(const kn__call *c, kn__metas *out) {
  int64_t M, D;
  kn_status s = kn__nn_norm_check(c, &M, &D);
  if (s == KN_OK) s = check_dtypes(c->args[0].u.t, opt(c, 2));
  return s == KN_OK ? kn__nn_norm_metas(c, out, compute_dtype(c->args[0].u.t->dtype), 1) : s;
}

/* Where a result of dtype dt computed in ct goes: out itself, or a new
** contiguous temporary of ct (owned, in *tmp) that finish() copies into out. */
static void *dest(kn_tensor *out, kn_dtype ct, kn_tensor **tmp) {
  *tmp = NULL;
  if (out->dtype == ct) return kn_data(out);
  *tmp = kn__empty(out->ndim, out->sizes, ct, KN_CPU);
  return *tmp ? kn_data(*tmp) : NULL;
}

static kn_status finish(kn_tensor *out, kn_tensor *tmp, kn_status s) {
  if (s == KN_OK && tmp) s = kn__copy_into(out, tmp);
  kn_release(tmp);
  return s;
}

kn_status kn__k_rms_norm(const kn__call *c, kn__outs *out) {
  const kn_tensor *x0 = c->args[0].u.t;
  kn_dtype ct = compute_dtype(x0->dtype);
  int64_t M, D;
  kn__nn_norm_check(c, &M, &D);
  double eps = c->args[3].kind == KN__A_DOUBLE ? c->args[3].u.d
               : ct == KN_FLOAT64             ? DBL_EPSILON
                                              : (double)FLT_EPSILON;
  kn_tensor *tx, *tw, *ty;
  const void *x = kn__nn_dense(x0, ct, &tx), *w = kn__nn_row_param(opt(c, 2), ct, D, 1, &tw);
  void *y = dest(out->t[0], ct, &ty);
  kn_status s = x && w && y ? KN_OK : kn_last_status();
  if (s == KN_OK) kn__rms_norm_rows(ct, x, y, M, D, eps, w, kn_data(out->t[1]));
  kn_release(tx);
  kn_release(tw);
  return finish(out->t[0], ty, s);
}

static bool mask_at(const kn__call *c, int argi, int i) {
  const kn__arg *m = &c->args[argi];
  return m->kind == KN__A_INTS && i < m->u.ints.n && m->u.ints.v[i];
}

/* args: grad_out, input, normalized_shape, rstd, weight?, output_mask[2] */
kn_status kn__meta_rms_norm_backward(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[1].u.t, *w = opt(c, 4);
  int nn = c->args[2].u.ints.n;
  kn_sym xs[KN_MAX_DIMS], ns[KN_MAX_DIMS], zero = kn__sym_const(0);
  kn__tensor_symsizes(x, xs);
  for (int j = 0; j < nn && j < KN_MAX_DIMS; j++) ns[j] = kn__arg_symint_at(&c->args[2], j);
  bool gi = mask_at(c, 5, 0), gw = mask_at(c, 5, 1) && w;
  if (!kn__metas_push_sizes(out, x->dtype, gi ? x->ndim : 1, gi ? xs : &zero) ||
      !kn__metas_push_sizes(out, w ? w->dtype : x->dtype, gw ? nn : 1, gw ? ns : &zero))
    return kn__oom();
  return KN_OK;
}

kn_status kn__k_rms_norm_backward(const kn__call *c, kn__outs *out) {
  const kn_tensor *x0 = c->args[1].u.t, *w0 = opt(c, 4);
  kn_dtype ct = compute_dtype(x0->dtype);
  int nn = c->args[2].u.ints.n;
  int64_t D = 1;
  for (int i = 0; i < nn; i++) D *= c->args[2].u.ints.v[i];
  int64_t M = D ? kn_numel(x0) / D : 0;
  bool want_gi = mask_at(c, 5, 0), want_gw = mask_at(c, 5, 1) && w0;
  kn_tensor *t[4], *tgi = NULL, *tgw = NULL;
  const void *x = kn__nn_dense(x0, ct, &t[0]), *go = kn__nn_dense(c->args[0].u.t, ct, &t[1]);
  const void *rstd = kn__nn_dense(c->args[3].u.t, ct, &t[2]);
  const void *w = kn__nn_row_param(w0, ct, D, 1, &t[3]);
  void *gi = want_gi ? dest(out->t[0], ct, &tgi) : NULL;
  void *gw = want_gw ? dest(out->t[1], ct, &tgw) : NULL;
  kn_status s = x && go && rstd && w && (gi || !want_gi) && (gw || !want_gw) ? KN_OK
                                                                           : kn_last_status();
  if (s == KN_OK) s = kn__rms_norm_rows_backward(ct, x, go, M, D, rstd, w, gi, gw);
  for (int i = 0; i < 4; i++) kn_release(t[i]);
  s = finish(out->t[0], tgi, s);
  return finish(out->t[1], tgw, s);
}

static int flat(const kn__call *c, int argi) {
  return c->args[argi].kind == KN__A_TENSOR ? kn__bw_input_index(c, argi, 0) : -1;
}

kn_status kn__bw_rms_norm(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  int fi[2] = {flat(c, 0), flat(c, 2)};
  int64_t mask[2];
  for (int i = 0; i < 2; i++) mask[i] = fi[i] >= 0 && ctx->needs_input_grad[fi[i]];
  kn_sym ns[KN_MAX_DIMS];
  kn__arg args[6] = {KN_A_T(ctx->grad_outputs[0]), c->args[0], kn__arg_known(&c->args[1], ns),
                     KN_A_T(ctx->outputs[1]), c->args[2], KN_A_INTS(mask, 2)};
  kn_tensor *r[2];
  if (kn__invoke_multi(KN_OP_RMS_NORM_BACKWARD, 6, args, r, 2) != 2) return kn_last_status();
  for (int i = 0; i < 2; i++)
    if (mask[i]) ctx->grad_inputs[fi[i]] = r[i];
  return KN_OK;
}

kn_tensor *kn_rms_norm(kn_tensor *input, int ndim, const int64_t *normalized_shape,
                       kn_tensor *weight, const double *eps) {
  kn__arg args[4] = {KN_A_T(input), KN_A_INTS(normalized_shape, ndim),
                     weight ? KN_A_T(weight) : KN_A_NONE, eps ? KN_A_D(*eps) : KN_A_NONE};
  kn_tensor *r[2];
  return kn__invoke_multi(KN_OP_RMS_NORM, 4, args, r, 2) == 2 ? r[0] : NULL;
}
