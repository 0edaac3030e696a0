/*
** ops/pointwise_api.c: the public wrappers of the pointwise family. Each one
** packs its arguments in table order (see ops/ops_pointwise.def) and goes
** through the dispatcher; in-place wrappers drop the extra reference to self
** the dispatcher returns.
*/
#include "core/error.h"
#include "kiln/ops_pointwise.h"
#include "ops/pointwise.h"

#define T1(id, a) kn__invoke(KN_OP_##id, 1, (kn__arg[]){KN_A_T(a)})
#define T2(id, a, b) kn__invoke(KN_OP_##id, 2, (kn__arg[]){KN_A_T(a), KN_A_T(b)})
#define TS(id, a, s) kn__invoke(KN_OP_##id, 2, (kn__arg[]){KN_A_T(a), KN_A_S(s)})

/* Dispatch an in-place op and drop the returned reference to self. */
static kn_status inplace(kn__opid id, int nargs, const kn__arg *args) {
  kn__call c = {.op = &kn__ops[id], .nargs = nargs};
  for (int i = 0; i < nargs; i++) {
    char h[KN__HINT_CAP];
    if (args[i].kind == KN__A_TENSOR && !args[i].u.t)
      return kn__error(KN_EINVAL, "%s: argument %d is a NULL tensor%s", c.op->name, i,
                       kn__error_hint(h, sizeof h));
    c.args[i] = args[i];
  }
  kn__outs out;
  kn__outs_init(&out);
  kn_status st = kn__dispatch(&c, &out);
  kn__outs_fini(&out);
  return st;
}

#define I1(id, a) inplace(KN_OP_##id, 1, (kn__arg[]){KN_A_T(a)})
#define I2(id, a, b) inplace(KN_OP_##id, 2, (kn__arg[]){KN_A_T(a), KN_A_T(b)})
#define IS(id, a, s) inplace(KN_OP_##id, 2, (kn__arg[]){KN_A_T(a), KN_A_S(s)})

static kn__arg opt_scalar(const kn_scalar *s) { return s ? KN_A_S(*s) : KN_A_NONE; }

/* ---- arithmetic ----------------------------------------------------------------- */
kn_tensor *kn_add(kn_tensor *a, kn_tensor *b) { return kn_add_scaled(a, b, kn_int(1)); }
kn_tensor *kn_add_scaled(kn_tensor *a, kn_tensor *b, kn_scalar alpha) {
  return kn__invoke(KN_OP_ADD, 3, (kn__arg[]){KN_A_T(a), KN_A_T(b), KN_A_S(alpha)});
}
kn_tensor *kn_add_scalar(kn_tensor *a, kn_scalar b) {
  return kn__invoke(KN_OP_ADD_SCALAR, 3, (kn__arg[]){KN_A_T(a), KN_A_S(b), KN_A_S(kn_int(1))});
}
kn_tensor *kn_sub(kn_tensor *a, kn_tensor *b) { return kn_sub_scaled(a, b, kn_int(1)); }
kn_tensor *kn_sub_scaled(kn_tensor *a, kn_tensor *b, kn_scalar alpha) {
  return kn__invoke(KN_OP_SUB, 3, (kn__arg[]){KN_A_T(a), KN_A_T(b), KN_A_S(alpha)});
}
kn_tensor *kn_sub_scalar(kn_tensor *a, kn_scalar b) {
  return kn__invoke(KN_OP_SUB_SCALAR, 3, (kn__arg[]){KN_A_T(a), KN_A_S(b), KN_A_S(kn_int(1))});
}
kn_tensor *kn_mul(kn_tensor *a, kn_tensor *b) { return T2(MUL, a, b); }
kn_tensor *kn_mul_scalar(kn_tensor *a, kn_scalar b) { return TS(MUL_SCALAR, a, b); }
kn_tensor *kn_div(kn_tensor *a, kn_tensor *b) { return T2(DIV, a, b); }
kn_tensor *kn_div_scalar(kn_tensor *a, kn_scalar b) { return TS(DIV_SCALAR, a, b); }

static kn_status check_mode(kn_rounding_mode mode) {
  if (mode < KN_ROUND_NONE || mode > KN_ROUND_FLOOR)
    return kn__error(KN_EINVAL, "div expected rounding_mode to be one of None, 'trunc', or "
                                "'floor' but found %d", (int)mode);
  return KN_OK;
}

kn_tensor *kn_div_mode(kn_tensor *a, kn_tensor *b, kn_rounding_mode mode) {
  if (check_mode(mode) != KN_OK) return NULL;
  if (mode == KN_ROUND_NONE) return kn_div(a, b);
  return kn__invoke(KN_OP_DIV_MODE, 3, (kn__arg[]){KN_A_T(a), KN_A_T(b), KN_A_I(mode)});
}
kn_tensor *kn_div_scalar_mode(kn_tensor *a, kn_scalar b, kn_rounding_mode mode) {
  if (check_mode(mode) != KN_OK) return NULL;
  if (mode == KN_ROUND_NONE) return kn_div_scalar(a, b);
  return kn__invoke(KN_OP_DIV_SCALAR_MODE, 3, (kn__arg[]){KN_A_T(a), KN_A_S(b), KN_A_I(mode)});
}
kn_tensor *kn_maximum(kn_tensor *a, kn_tensor *b) { return T2(MAXIMUM, a, b); }
kn_tensor *kn_minimum(kn_tensor *a, kn_tensor *b) { return T2(MINIMUM, a, b); }
kn_tensor *kn_pow(kn_tensor *a, kn_tensor *b) { return T2(POW, a, b); }
kn_tensor *kn_pow_scalar(kn_tensor *a, kn_scalar e) { return TS(POW_SCALAR, a, e); }
kn_tensor *kn_scalar_pow(kn_scalar base, kn_tensor *e) {
  return kn__invoke(KN_OP_POW_SELF_SCALAR, 2, (kn__arg[]){KN_A_S(base), KN_A_T(e)});
}

/* ---- comparisons and logical ops ------------------------------------------------- */
kn_tensor *kn_eq(kn_tensor *a, kn_tensor *b) { return T2(EQ, a, b); }
kn_tensor *kn_ne(kn_tensor *a, kn_tensor *b) { return T2(NE, a, b); }
kn_tensor *kn_lt(kn_tensor *a, kn_tensor *b) { return T2(LT, a, b); }
kn_tensor *kn_le(kn_tensor *a, kn_tensor *b) { return T2(LE, a, b); }
kn_tensor *kn_gt(kn_tensor *a, kn_tensor *b) { return T2(GT, a, b); }
kn_tensor *kn_ge(kn_tensor *a, kn_tensor *b) { return T2(GE, a, b); }
kn_tensor *kn_eq_scalar(kn_tensor *a, kn_scalar b) { return TS(EQ_SCALAR, a, b); }
kn_tensor *kn_ne_scalar(kn_tensor *a, kn_scalar b) { return TS(NE_SCALAR, a, b); }
kn_tensor *kn_lt_scalar(kn_tensor *a, kn_scalar b) { return TS(LT_SCALAR, a, b); }
kn_tensor *kn_le_scalar(kn_tensor *a, kn_scalar b) { return TS(LE_SCALAR, a, b); }
kn_tensor *kn_gt_scalar(kn_tensor *a, kn_scalar b) { return TS(GT_SCALAR, a, b); }
kn_tensor *kn_ge_scalar(kn_tensor *a, kn_scalar b) { return TS(GE_SCALAR, a, b); }
kn_tensor *kn_logical_and(kn_tensor *a, kn_tensor *b) { return T2(LOGICAL_AND, a, b); }
kn_tensor *kn_logical_or(kn_tensor *a, kn_tensor *b) { return T2(LOGICAL_OR, a, b); }
kn_tensor *kn_logical_not(kn_tensor *a) { return T1(LOGICAL_NOT, a); }

/* ---- unary ------------------------------------------------------------------------ */
kn_tensor *kn_neg(kn_tensor *a) { return T1(NEG, a); }
kn_tensor *kn_abs(kn_tensor *a) { return T1(ABS, a); }
kn_tensor *kn_sgn(kn_tensor *a) { return T1(SGN, a); }
kn_tensor *kn_reciprocal(kn_tensor *a) { return T1(RECIPROCAL, a); }
kn_tensor *kn_exp(kn_tensor *a) { return T1(EXP, a); }
kn_tensor *kn_exp2(kn_tensor *a) { return T1(EXP2, a); }
kn_tensor *kn_log(kn_tensor *a) { return T1(LOG, a); }
kn_tensor *kn_log2(kn_tensor *a) { return T1(LOG2, a); }
kn_tensor *kn_log1p(kn_tensor *a) { return T1(LOG1P, a); }
kn_tensor *kn_expm1(kn_tensor *a) { return T1(EXPM1, a); }
kn_tensor *kn_sqrt(kn_tensor *a) { return T1(SQRT, a); }
kn_tensor *kn_rsqrt(kn_tensor *a) { return T1(RSQRT, a); }
kn_tensor *kn_sin(kn_tensor *a) { return T1(SIN, a); }
kn_tensor *kn_cos(kn_tensor *a) { return T1(COS, a); }
kn_tensor *kn_tan(kn_tensor *a) { return T1(TAN, a); }
kn_tensor *kn_tanh(kn_tensor *a) { return T1(TANH, a); }
kn_tensor *kn_sigmoid(kn_tensor *a) { return T1(SIGMOID, a); }
kn_tensor *kn_relu(kn_tensor *a) { return T1(RELU, a); }
static bool bad_approx(kn_gelu_approx approx) {
  if (approx == KN_GELU_NONE || approx == KN_GELU_TANH) return false;
  kn__error(KN_EINVAL, "gelu: expected approximate KN_GELU_NONE or KN_GELU_TANH, got %d",
            (int)approx);
  return true;
}

kn_tensor *kn_gelu(kn_tensor *a, kn_gelu_approx approx) {
  if (bad_approx(approx)) return NULL;
  return kn__invoke(KN_OP_GELU, 2, (kn__arg[]){KN_A_T(a), KN_A_I(approx == KN_GELU_TANH)});
}
kn_tensor *kn_silu(kn_tensor *a) { return T1(SILU, a); }
kn_tensor *kn_erf(kn_tensor *a) { return T1(ERF, a); }
kn_tensor *kn_log10(kn_tensor *a) { return T1(LOG10, a); }
kn_tensor *kn_sinh(kn_tensor *a) { return T1(SINH, a); }
kn_tensor *kn_cosh(kn_tensor *a) { return T1(COSH, a); }
kn_tensor *kn_asin(kn_tensor *a) { return T1(ASIN, a); }
kn_tensor *kn_acos(kn_tensor *a) { return T1(ACOS, a); }
kn_tensor *kn_atan(kn_tensor *a) { return T1(ATAN, a); }
kn_tensor *kn_erfc(kn_tensor *a) { return T1(ERFC, a); }
kn_tensor *kn_softplus(kn_tensor *a, kn_scalar beta, kn_scalar threshold) {
  return kn__invoke(KN_OP_SOFTPLUS, 3, (kn__arg[]){KN_A_T(a), KN_A_S(beta), KN_A_S(threshold)});
}
kn_tensor *kn_round(kn_tensor *a) { return T1(ROUND, a); }
kn_tensor *kn_trunc(kn_tensor *a) { return T1(TRUNC, a); }
kn_tensor *kn_floor(kn_tensor *a) { return T1(FLOOR, a); }
kn_tensor *kn_ceil(kn_tensor *a) { return T1(CEIL, a); }
kn_tensor *kn_clamp(kn_tensor *a, const kn_scalar *min, const kn_scalar *max) {
  return kn__invoke(KN_OP_CLAMP, 3, (kn__arg[]){KN_A_T(a), opt_scalar(min), opt_scalar(max)});
}

/* ---- where, casts, copies ----------------------------------------------------------- */
kn_tensor *kn_where(kn_tensor *cond, kn_tensor *a, kn_tensor *b) {
  return kn__invoke(KN_OP_WHERE, 3, (kn__arg[]){KN_A_T(cond), KN_A_T(a), KN_A_T(b)});
}
kn_tensor *kn_clone(kn_tensor *a) { return T1(CLONE, a); }
kn_tensor *kn_contiguous(kn_tensor *a) { return T1(CONTIGUOUS, a); }
kn_tensor *kn_to(kn_tensor *a, kn_dtype dt) {
  return kn__invoke(KN_OP_TO_DTYPE, 2, (kn__arg[]){KN_A_T(a), KN_A_DT(dt)});
}
kn_tensor *kn_to_copy(kn_tensor *a, kn_dtype dt) {
  return kn__invoke(KN_OP_TO_COPY, 2, (kn__arg[]){KN_A_T(a), KN_A_DT(dt)});
}

/* ---- backward helpers ------------------------------------------------------------------ */
kn_tensor *kn_threshold_backward(kn_tensor *grad, kn_tensor *self, kn_scalar threshold) {
  return kn__invoke(KN_OP_THRESHOLD_BACKWARD, 3,
                    (kn__arg[]){KN_A_T(grad), KN_A_T(self), KN_A_S(threshold)});
}
kn_tensor *kn_sigmoid_backward(kn_tensor *grad, kn_tensor *out) { return T2(SIGMOID_BACKWARD, grad, out); }
kn_tensor *kn_tanh_backward(kn_tensor *grad, kn_tensor *out) { return T2(TANH_BACKWARD, grad, out); }
kn_tensor *kn_gelu_backward(kn_tensor *grad, kn_tensor *self, kn_gelu_approx approx) {
  if (bad_approx(approx)) return NULL;
  return kn__invoke(KN_OP_GELU_BACKWARD, 3,
                    (kn__arg[]){KN_A_T(grad), KN_A_T(self), KN_A_I(approx == KN_GELU_TANH)});
}

/* ---- in-place ---------------------------------------------------------------------------- */
kn_status kn_add_(kn_tensor *self, kn_tensor *other) { return kn_add_scaled_(self, other, kn_int(1)); }
kn_status kn_add_scaled_(kn_tensor *self, kn_tensor *other, kn_scalar alpha) {
  return inplace(KN_OP_ADD_, 3, (kn__arg[]){KN_A_T(self), KN_A_T(other), KN_A_S(alpha)});
}
kn_status kn_add_scalar_(kn_tensor *self, kn_scalar other) {
  return inplace(KN_OP_ADD_SCALAR_, 3, (kn__arg[]){KN_A_T(self), KN_A_S(other), KN_A_S(kn_int(1))});
}
kn_status kn_sub_(kn_tensor *self, kn_tensor *other) { return kn_sub_scaled_(self, other, kn_int(1)); }
kn_status kn_sub_scaled_(kn_tensor *self, kn_tensor *other, kn_scalar alpha) {
  return inplace(KN_OP_SUB_, 3, (kn__arg[]){KN_A_T(self), KN_A_T(other), KN_A_S(alpha)});
}
kn_status kn_sub_scalar_(kn_tensor *self, kn_scalar other) {
  return inplace(KN_OP_SUB_SCALAR_, 3, (kn__arg[]){KN_A_T(self), KN_A_S(other), KN_A_S(kn_int(1))});
}
kn_status kn_mul_(kn_tensor *self, kn_tensor *other) { return I2(MUL_, self, other); }
kn_status kn_mul_scalar_(kn_tensor *self, kn_scalar other) { return IS(MUL_SCALAR_, self, other); }
kn_status kn_div_(kn_tensor *self, kn_tensor *other) { return I2(DIV_, self, other); }
kn_status kn_div_scalar_(kn_tensor *self, kn_scalar other) { return IS(DIV_SCALAR_, self, other); }
kn_status kn_div_mode_(kn_tensor *self, kn_tensor *other, kn_rounding_mode mode) {
  kn_status st = check_mode(mode);
  if (st != KN_OK) return st;
  if (mode == KN_ROUND_NONE) return kn_div_(self, other);
  return inplace(KN_OP_DIV_MODE_, 3, (kn__arg[]){KN_A_T(self), KN_A_T(other), KN_A_I(mode)});
}
kn_status kn_pow_scalar_(kn_tensor *self, kn_scalar e) { return IS(POW_SCALAR_, self, e); }
kn_status kn_neg_(kn_tensor *self) { return I1(NEG_, self); }
kn_status kn_exp_(kn_tensor *self) { return I1(EXP_, self); }
kn_status kn_tanh_(kn_tensor *self) { return I1(TANH_, self); }
kn_status kn_sigmoid_(kn_tensor *self) { return I1(SIGMOID_, self); }
kn_status kn_relu_(kn_tensor *self) { return I1(RELU_, self); }
kn_status kn_trunc_(kn_tensor *self) { return I1(TRUNC_, self); }
kn_status kn_abs_(kn_tensor *self) { return I1(ABS_, self); }
kn_status kn_reciprocal_(kn_tensor *self) { return I1(RECIPROCAL_, self); }
kn_status kn_log_(kn_tensor *self) { return I1(LOG_, self); }
kn_status kn_sqrt_(kn_tensor *self) { return I1(SQRT_, self); }
kn_status kn_round_(kn_tensor *self) { return I1(ROUND_, self); }
kn_status kn_floor_(kn_tensor *self) { return I1(FLOOR_, self); }
kn_status kn_ceil_(kn_tensor *self) { return I1(CEIL_, self); }
kn_status kn_clamp_(kn_tensor *self, const kn_scalar *min, const kn_scalar *max) {
  return inplace(KN_OP_CLAMP_, 3, (kn__arg[]){KN_A_T(self), opt_scalar(min), opt_scalar(max)});
}
kn_status kn_copy_(kn_tensor *self, kn_tensor *src) {
  return inplace(KN_OP_COPY_, 3, (kn__arg[]){KN_A_T(self), KN_A_T(src), KN_A_B(false)});
}
kn_status kn_fill_(kn_tensor *self, kn_scalar v) { return IS(FILL_, self, v); }
kn_status kn_zero_(kn_tensor *self) { return I1(ZERO_, self); }
