/*
** ops/pointwise_meta.c: the facts table of the pointwise family, its type
** rules (PyTorch's result_type, true division to float, bool results for
** comparisons, the in-place cast check) and the shared meta functions and
** kernels of binary and unary pointwise ops. Every dtype and shape error of
** these ops is raised here, with PyTorch's message text.
*/
#include <stdio.h>

#include "core/error.h"
#include "ops/iter.h"
#include "ops/pointwise.h"

/* ---- the facts table --------------------------------------------------------- */

#define B2(code, kind) {code, kind, 2, false}
#define B2I(code, kind) {code, kind, 2, true}
#define U1(code, kind) {code, kind, 1, false}
#define U1I(code, kind) {code, kind, 1, true}

static const kn__pwinfo infos[KN__OP_COUNT] = {
  [KN_OP_ADD] = B2(KN__PW_ADD, KN__PWK_SAME),
  [KN_OP_ADD_SCALAR] = B2(KN__PW_ADD, KN__PWK_SAME),
  [KN_OP_ADD_] = B2I(KN__PW_ADD, KN__PWK_SAME),
  [KN_OP_ADD_SCALAR_] = B2I(KN__PW_ADD, KN__PWK_SAME),
  [KN_OP_SUB] = B2(KN__PW_SUB, KN__PWK_SAME),
  [KN_OP_SUB_SCALAR] = B2(KN__PW_SUB, KN__PWK_SAME),
  [KN_OP_SUB_] = B2I(KN__PW_SUB, KN__PWK_SAME),
  [KN_OP_SUB_SCALAR_] = B2I(KN__PW_SUB, KN__PWK_SAME),
  [KN_OP_MUL] = B2(KN__PW_MUL, KN__PWK_SAME),
  [KN_OP_MUL_SCALAR] = B2(KN__PW_MUL, KN__PWK_SAME),
  [KN_OP_MUL_] = B2I(KN__PW_MUL, KN__PWK_SAME),
  [KN_OP_MUL_SCALAR_] = B2I(KN__PW_MUL, KN__PWK_SAME),
  [KN_OP_DIV] = B2(KN__PW_DIV, KN__PWK_FLOAT),
  [KN_OP_DIV_SCALAR] = B2(KN__PW_DIV, KN__PWK_FLOAT),
  [KN_OP_DIV_MODE] = B2(KN__PW_DIV_TRUNC, KN__PWK_SAME),
  [KN_OP_DIV_SCALAR_MODE] = B2(KN__PW_DIV_TRUNC, KN__PWK_SAME),
  [KN_OP_DIV_] = B2I(KN__PW_DIV, KN__PWK_FLOAT),
  [KN_OP_DIV_SCALAR_] = B2I(KN__PW_DIV, KN__PWK_FLOAT),
  [KN_OP_DIV_MODE_] = B2I(KN__PW_DIV_TRUNC, KN__PWK_SAME),
  [KN_OP_MAXIMUM] = B2(KN__PW_MAXIMUM, KN__PWK_SAME),
  [KN_OP_MINIMUM] = B2(KN__PW_MINIMUM, KN__PWK_SAME),
  [KN_OP_POW] = B2(KN__PW_POW, KN__PWK_SAME),
  [KN_OP_POW_SCALAR] = B2(KN__PW_POW, KN__PWK_SAME),
  [KN_OP_POW_SELF_SCALAR] = B2(KN__PW_POW, KN__PWK_SAME),
  [KN_OP_POW_SCALAR_] = B2I(KN__PW_POW, KN__PWK_SAME),
  [KN_OP_EQ] = B2(KN__PW_EQ, KN__PWK_BOOL),
  [KN_OP_EQ_SCALAR] = B2(KN__PW_EQ, KN__PWK_BOOL),
  [KN_OP_NE] = B2(KN__PW_NE, KN__PWK_BOOL),
  [KN_OP_NE_SCALAR] = B2(KN__PW_NE, KN__PWK_BOOL),
  [KN_OP_LT] = B2(KN__PW_LT, KN__PWK_BOOL),
  [KN_OP_LT_SCALAR] = B2(KN__PW_LT, KN__PWK_BOOL),
  [KN_OP_LE] = B2(KN__PW_LE, KN__PWK_BOOL),
  [KN_OP_LE_SCALAR] = B2(KN__PW_LE, KN__PWK_BOOL),
  [KN_OP_GT] = B2(KN__PW_GT, KN__PWK_BOOL),
  [KN_OP_GT_SCALAR] = B2(KN__PW_GT, KN__PWK_BOOL),
  [KN_OP_GE] = B2(KN__PW_GE, KN__PWK_BOOL),
  [KN_OP_GE_SCALAR] = B2(KN__PW_GE, KN__PWK_BOOL),
  [KN_OP_LOGICAL_AND] = B2(KN__PW_LAND, KN__PWK_BOOL),
  [KN_OP_LOGICAL_OR] = B2(KN__PW_LOR, KN__PWK_BOOL),
  [KN_OP_LOGICAL_NOT] = U1(KN__PW_LNOT, KN__PWK_BOOL),
  [KN_OP_NEG] = U1(KN__PW_NEG, KN__PWK_SAME),
  [KN_OP_NEG_] = U1I(KN__PW_NEG, KN__PWK_SAME),
  [KN_OP_ABS] = U1(KN__PW_ABS, KN__PWK_SAME),
  [KN_OP_ABS_] = U1I(KN__PW_ABS, KN__PWK_SAME),
  [KN_OP_SGN] = U1(KN__PW_SGN, KN__PWK_SAME),
  [KN_OP_RECIPROCAL] = U1(KN__PW_RECIPROCAL, KN__PWK_FLOAT),
  [KN_OP_RECIPROCAL_] = U1I(KN__PW_RECIPROCAL, KN__PWK_FLOAT),
  [KN_OP_EXP] = U1(KN__PW_EXP, KN__PWK_FLOAT),
  [KN_OP_EXP_] = U1I(KN__PW_EXP, KN__PWK_FLOAT),
  [KN_OP_EXP2] = U1(KN__PW_EXP2, KN__PWK_FLOAT),
  [KN_OP_LOG] = U1(KN__PW_LOG, KN__PWK_FLOAT),
  [KN_OP_LOG_] = U1I(KN__PW_LOG, KN__PWK_FLOAT),
  [KN_OP_LOG2] = U1(KN__PW_LOG2, KN__PWK_FLOAT),
  [KN_OP_LOG1P] = U1(KN__PW_LOG1P, KN__PWK_FLOAT),
  [KN_OP_EXPM1] = U1(KN__PW_EXPM1, KN__PWK_FLOAT),
  [KN_OP_SQRT] = U1(KN__PW_SQRT, KN__PWK_FLOAT),
  [KN_OP_SQRT_] = U1I(KN__PW_SQRT, KN__PWK_FLOAT),
  [KN_OP_RSQRT] = U1(KN__PW_RSQRT, KN__PWK_FLOAT),
  [KN_OP_SIN] = U1(KN__PW_SIN, KN__PWK_FLOAT),
  [KN_OP_COS] = U1(KN__PW_COS, KN__PWK_FLOAT),
  [KN_OP_TAN] = U1(KN__PW_TAN, KN__PWK_FLOAT),
  [KN_OP_TANH] = U1(KN__PW_TANH, KN__PWK_FLOAT),
  [KN_OP_TANH_] = U1I(KN__PW_TANH, KN__PWK_FLOAT),
  [KN_OP_SIGMOID] = U1(KN__PW_SIGMOID, KN__PWK_FLOAT),
  [KN_OP_SIGMOID_] = U1I(KN__PW_SIGMOID, KN__PWK_FLOAT),
  [KN_OP_RELU] = U1(KN__PW_RELU, KN__PWK_SAME),
  [KN_OP_RELU_] = U1I(KN__PW_RELU, KN__PWK_SAME),
  [KN_OP_GELU] = U1(KN__PW_GELU, KN__PWK_FLOAT),
  [KN_OP_SILU] = U1(KN__PW_SILU, KN__PWK_FLOAT),
  [KN_OP_ERF] = U1(KN__PW_ERF, KN__PWK_FLOAT),
  [KN_OP_LOG10] = U1(KN__PW_LOG10, KN__PWK_FLOAT),
  [KN_OP_SINH] = U1(KN__PW_SINH, KN__PWK_FLOAT),
  [KN_OP_COSH] = U1(KN__PW_COSH, KN__PWK_FLOAT),
  [KN_OP_ASIN] = U1(KN__PW_ASIN, KN__PWK_FLOAT),
  [KN_OP_ACOS] = U1(KN__PW_ACOS, KN__PWK_FLOAT),
  [KN_OP_ATAN] = U1(KN__PW_ATAN, KN__PWK_FLOAT),
  [KN_OP_ERFC] = U1(KN__PW_ERFC, KN__PWK_FLOAT),
  [KN_OP_SOFTPLUS] = U1(KN__PW_SOFTPLUS, KN__PWK_FLOAT),
  [KN_OP_ROUND] = U1(KN__PW_ROUND, KN__PWK_SAME),
  [KN_OP_ROUND_] = U1I(KN__PW_ROUND, KN__PWK_SAME),
  [KN_OP_TRUNC] = U1(KN__PW_TRUNC, KN__PWK_SAME),
  [KN_OP_TRUNC_] = U1I(KN__PW_TRUNC, KN__PWK_SAME),
  [KN_OP_FLOOR] = U1(KN__PW_FLOOR, KN__PWK_SAME),
  [KN_OP_FLOOR_] = U1I(KN__PW_FLOOR, KN__PWK_SAME),
  [KN_OP_CEIL] = U1(KN__PW_CEIL, KN__PWK_SAME),
  [KN_OP_CEIL_] = U1I(KN__PW_CEIL, KN__PWK_SAME),
  [KN_OP_CLAMP] = {KN__PW_CLAMP, KN__PWK_SAME, 3, false},
  [KN_OP_CLAMP_] = {KN__PW_CLAMP, KN__PWK_SAME, 3, true},
  [KN_OP_THRESHOLD_BACKWARD] = B2(KN__PW_THRESHOLD_BW, KN__PWK_SAME),
  [KN_OP_SIGMOID_BACKWARD] = B2(KN__PW_SIGMOID_BW, KN__PWK_SAME),
  [KN_OP_TANH_BACKWARD] = B2(KN__PW_TANH_BW, KN__PWK_SAME),
  [KN_OP_GELU_BACKWARD] = B2(KN__PW_GELU_BW, KN__PWK_SAME),
};

const kn__pwinfo *kn__pw_info(int opid) { return &infos[opid]; }

/* ---- small helpers ------------------------------------------------------------ */

const char *kn__pw_torch_name(kn_dtype dt) {
  static const char *names[KN_DTYPE_COUNT] = {
    [KN_BOOL] = "Bool", [KN_UINT8] = "Byte", [KN_INT8] = "Char", [KN_INT16] = "Short",
    [KN_INT32] = "Int", [KN_INT64] = "Long", [KN_FLOAT16] = "Half",
    [KN_BFLOAT16] = "BFloat16", [KN_FLOAT32] = "Float", [KN_FLOAT64] = "Double"};
  return (unsigned)dt < KN_DTYPE_COUNT ? names[dt] : "?";
}

bool kn__pw_can_cast(kn_dtype from, kn_dtype to) {
  if (kn_dtype_is_floating(from) && !kn_dtype_is_floating(to)) return false;
  if (from != KN_BOOL && to == KN_BOOL) return false;
  return true;
}

double kn__pw_scalar_double(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

int64_t kn__pw_scalar_int(kn_scalar s) {
  if (s.kind == KN_SCALAR_INT) return s.v.i;
  if (s.kind == KN_SCALAR_BOOL) return s.v.b;
  double v = s.v.f;
  return (v > -9.2e18 && v < 9.2e18) ? (int64_t)v : 0;
}

static void format_shape(char *buf, size_t n, int nd, const kn_sym *s) {
  size_t k = 0;
  k += (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < nd && k < n; d++) {
    char x[64];
    kn__sym_format(s[d], x, sizeof x);
    k += (size_t)snprintf(buf + k, n - k, d ? ", %s" : "%s", x);
  }
  if (k < n) snprintf(buf + k, n - k, "]");
}

kn_status kn__pw_check_inplace(const kn_tensor *self, kn_dtype result, int nd,
                               const kn_sym *shape) {
  if (!kn__pw_can_cast(result, self->dtype))
    return kn__error(KN_EDTYPE, "result type %s can't be cast to the desired output type %s",
                     kn__pw_torch_name(result), kn__pw_torch_name(self->dtype));
  kn_sym ss[KN_MAX_DIMS];
  kn__tensor_symsizes(self, ss);
  bool same = nd == self->ndim;
  for (int d = 0; same && d < nd; d++) same = kn__sym_guard_eq(ss[d], shape[d]);
  if (!same) {
    char a[256], b[256];
    format_shape(a, sizeof a, self->ndim, ss);
    format_shape(b, sizeof b, nd, shape);
    return kn__error(KN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s", a, b);
  }
  return KN_OK;
}

/* Is shape (nd dims) t's own constant shape? */
static bool same_const_shape(const kn_tensor *t, int nd, const kn_sym *shape) {
  if (t->sym || t->ndim != nd) return false;
  for (int d = 0; d < nd; d++)
    if (!kn__sym_is_const(shape[d]) || shape[d].c != t->sizes[d]) return false;
  return true;
}

/* Broadcast shape of the tensor operands among args [0, n). The common
** cases (the first operand; an operand of the same constant shape) skip
** the general rule. */
static kn_status operand_shape(const kn__call *c, int n, int *nd, kn_sym *shape) {
  *nd = 0;
  bool first = true;
  for (int i = 0; i < n && i < c->nargs; i++) {
    const kn_tensor *t = c->args[i].kind == KN__A_TENSOR ? c->args[i].u.t : NULL;
    if (!t) continue;
    if (first) {
      first = false;
      *nd = t->ndim;
      kn__tensor_symsizes(t, shape);
      continue;
    }
    if (same_const_shape(t, *nd, shape)) continue;
    kn_sym ts[KN_MAX_DIMS];
    kn__tensor_symsizes(t, ts);
    kn_status st = kn__broadcast_shapes(*nd, shape, t->ndim, ts, nd, shape);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

static bool is_tensor(const kn__call *c, int i) {
  return i < c->nargs && c->args[i].kind == KN__A_TENSOR && c->args[i].u.t;
}

static kn_dtype arg_dtype(const kn__call *c, int i) {
  if (is_tensor(c, i)) return c->args[i].u.t->dtype;
  kn_scalar_kind k = c->args[i].u.s.kind;
  return k == KN_SCALAR_FLOAT ? kn_default_dtype() : k == KN_SCALAR_INT ? KN_INT64 : KN_BOOL;
}

/* Op-specific dtype errors (PyTorch's texts). */
static kn_status check_op_dtypes(const kn__call *c, const kn__pwinfo *pi, kn_dtype promoted) {
  kn_dtype a = arg_dtype(c, 0);
  switch (pi->code) {
  case KN__PW_SUB: {
    kn_dtype b = arg_dtype(c, 1);
    if (a == KN_BOOL && b == KN_BOOL)
      return kn__error(KN_EDTYPE, "Subtraction, the `-` operator, with two bool tensors is not "
                                  "supported. Use the `^` or `logical_xor()` operator instead.");
    if (a == KN_BOOL || b == KN_BOOL)
      return kn__error(KN_EDTYPE, "Subtraction, the `-` operator, with a bool tensor is not "
                                  "supported. If you are trying to invert a mask, use the `~` or "
                                  "`logical_not()` operator instead.");
  } break;
  case KN__PW_NEG:
    if (a == KN_BOOL)
      return kn__error(KN_EDTYPE, "Negation, the `-` operator, on a bool tensor is not supported. "
                                  "If you are trying to invert a mask, use the `~` or "
                                  "`logical_not()` operator instead.");
    break;
  case KN__PW_ABS:
    if (a == KN_BOOL) return kn__error(KN_EDTYPE, "\"abs_cpu\" not implemented for 'Bool'");
    break;
  case KN__PW_RELU:
    if (a == KN_BOOL) return kn__error(KN_EDTYPE, "Boolean inputs not supported for relu");
    break;
  case KN__PW_SOFTPLUS:
    if (!kn_dtype_is_floating(a))
      return kn__error(KN_EDTYPE, "\"softplus_cpu\" not implemented for '%s'",
                       kn__pw_torch_name(a));
    break;
  case KN__PW_CLAMP:
    if (c->args[1].kind != KN__A_SCALAR && c->args[2].kind != KN__A_SCALAR)
      return kn__error(KN_EINVAL, "torch.clamp: At least one of 'min' or 'max' must not be None");
    break;
  case KN__PW_POW:
    if (!kn_dtype_is_floating(promoted) && c->args[1].kind == KN__A_SCALAR &&
        kn__pw_scalar_int(c->args[1].u.s) < 0)
      return kn__error(KN_EINVAL, "Integers to negative integer powers are not allowed.");
    break;
  default: break;
  }
  if ((pi->code == KN__PW_ADD || pi->code == KN__PW_SUB) && c->nargs > 2 &&
      c->args[2].kind == KN__A_SCALAR) {
    kn_scalar al = c->args[2].u.s;
    if (kn_dtype_is_integral(promoted, true) && al.kind == KN_SCALAR_FLOAT)
      return kn__error(KN_EDTYPE, "For integral input tensors, argument alpha must not be a "
                                  "floating point number.");
    if (promoted != KN_BOOL && al.kind == KN_SCALAR_BOOL)
      return kn__error(KN_EDTYPE, "Boolean alpha only supported for Boolean results.");
  }
  return KN_OK;
}

/* The dtype an op computes in (before mapping to a compute type) and the
** dtype of its result (for in-place ops: what must be castable to self). */
static kn_status pw_types(const kn__call *c, const kn__pwinfo *pi, kn_dtype *promoted,
                          kn_dtype *result) {
  kn_dtype rt = kn__result_type(c, pi->nopnds);
  if (pi->kind == KN__PWK_FLOAT && !kn_dtype_is_floating(rt)) rt = kn_default_dtype();
  kn_status st = check_op_dtypes(c, pi, rt);
  if (st != KN_OK) return st;
  *result = pi->kind == KN__PWK_BOOL ? KN_BOOL : rt;
  *promoted = (pi->code == KN__PW_LAND || pi->code == KN__PW_LOR || pi->code == KN__PW_LNOT)
                  ? KN_BOOL : rt;
  return KN_OK;
}

static kn_status pw_meta(const kn__call *c, kn__metas *out) {
  const kn__pwinfo *pi = kn__pw_info(c->op->id);
  int nd;
  kn_sym shape[KN_MAX_DIMS];
  kn_status st = operand_shape(c, pi->nopnds, &nd, shape);
  kn_dtype promoted, result;
  if (st == KN_OK) st = pw_types(c, pi, &promoted, &result);
  if (st == KN_OK && pi->inplace) st = kn__pw_check_inplace(c->args[0].u.t, result, nd, shape);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, pi->inplace ? c->args[0].u.t->dtype : result);
  if (!m) return kn__oom();
  m->ndim = nd;
  for (int d = 0; d < nd; d++) m->sizes[d] = shape[d];
  if (pi->inplace) m->alias_of = 0;
  return KN_OK;
}

kn_status kn__meta_pw_binary(const kn__call *c, kn__metas *out) { return pw_meta(c, out); }
kn_status kn__meta_pw_unary(const kn__call *c, kn__metas *out) { return pw_meta(c, out); }

/* ---- shared kernels ---------------------------------------------------------------- */

/* Fills *o field by field: building the struct whole and copying it costs
** store-forwarding stalls that show up in a one-element op's time. */
static void operand(const kn__call *c, int i, kn__pwopnd *o) {
  bool tensor = c->args[i].kind == KN__A_TENSOR;
  o->t = tensor ? c->args[i].u.t : NULL;
  if (tensor) o->s = kn_int(0);
  else o->s = c->args[i].u.s;
}

/* The formula actually run: rounding modes and gelu's approximation are
** arguments of one row. */
static kn__pwcode actual_code(const kn__call *c, const kn__pwinfo *pi) {
  if (pi->code == KN__PW_DIV_TRUNC)
    return c->nargs > 2 && c->args[2].kind == KN__A_INT && c->args[2].u.i == 2
               ? KN__PW_DIV_FLOOR : KN__PW_DIV_TRUNC;
  bool tanh_approx = c->nargs > 1 && c->args[c->nargs - 1].kind == KN__A_INT &&
                     c->args[c->nargs - 1].u.i == 1;
  if (pi->code == KN__PW_GELU && tanh_approx) return KN__PW_GELU_TANH;
  if (pi->code == KN__PW_GELU_BW && tanh_approx) return KN__PW_GELU_TANH_BW;
  return pi->code;
}

static void fill_params(const kn__call *c, const kn__pwinfo *pi, kn__pwparams *p) {
  *p = (kn__pwparams){.alpha = 1, .ialpha = 1};
  if ((pi->code == KN__PW_ADD || pi->code == KN__PW_SUB) && c->nargs > 2 &&
      c->args[2].kind == KN__A_SCALAR) {
    p->alpha = kn__pw_scalar_double(c->args[2].u.s);
    p->ialpha = kn__pw_scalar_int(c->args[2].u.s);
  }
  if (pi->code == KN__PW_THRESHOLD_BW) p->lo = kn__pw_scalar_double(c->args[2].u.s);
  if (pi->code == KN__PW_SOFTPLUS) {
    p->alpha = kn__pw_scalar_double(c->args[1].u.s);
    p->lo = kn__pw_scalar_double(c->args[2].u.s);
  }
  if (pi->code == KN__PW_CLAMP) {
    p->has_lo = c->args[1].kind == KN__A_SCALAR;
    p->has_hi = c->nargs > 2 && c->args[2].kind == KN__A_SCALAR;
    if (p->has_lo) p->lo = kn__pw_scalar_double(c->args[1].u.s);
    if (p->has_hi) p->hi = kn__pw_scalar_double(c->args[2].u.s);
  }
}

static kn_status pw_kernel(const kn__call *c, kn__outs *out) {
  const kn__pwinfo *pi = kn__pw_info(c->op->id);
  kn_dtype promoted, result;
  if (!pi->inplace && pi->kind != KN__PWK_BOOL) {
    /* the meta function's result dtype, already checked: the output's */
    promoted = result = out->t[0]->dtype;
  } else {
    kn_status st = pw_types(c, pi, &promoted, &result);
    if (st != KN_OK) return st;
  }
  kn__pwparams prm;
  fill_params(c, pi, &prm);
  kn__pwopnd in[2];
  int nin = pi->code == KN__PW_CLAMP ? 1 : pi->nopnds;
  for (int k = 0; k < nin; k++) operand(c, k, &in[k]);
  kn_dtype cc = promoted == KN_BOOL && result == KN_BOOL && pi->kind == KN__PWK_BOOL &&
                        (pi->code == KN__PW_LAND || pi->code == KN__PW_LOR ||
                         pi->code == KN__PW_LNOT)
                    ? KN_BOOL : kn__pw_compute_type(promoted);
  return kn__pw_run(out->t[0], nin, in, cc, actual_code(c, pi), &prm);
}

kn_status kn__k_pw_binary(const kn__call *c, kn__outs *out) { return pw_kernel(c, out); }
kn_status kn__k_pw_unary(const kn__call *c, kn__outs *out) { return pw_kernel(c, out); }
