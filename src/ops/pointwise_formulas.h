/*
** ops/pointwise_formulas.h: the one table of pointwise formulas.
**
** Two X-macro lists, expanded by every consumer:
**
** KN__PW_FORMULAS(X): one row per element formula,
**   X(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D)
**     CODE  the formula's name: KN__PW_<CODE> (ops/pointwise.h) is generated
**     NIN   operands (1 or 2)
**     OUT   element type written: T (the compute type) or bool
**     CL    compute classes with a formula: KN__PWC_F (float32/float64), _I
**           (int64), _B (bool); a class missing here has no formula (softplus
**           has none: its eager kernel is written out in pointwise_kern.c)
**     F I B the element expression for float, int64 and bool compute types
**           (0 where CL has no such class, or where VM computes it)
**     VM    the vector-math function (ops/vmath.h: kn__vmop for NIN 1,
**           kn__vmop2 for NIN 2) that computes the float formula, or -1
**     MEM   1 when the formula is cheap enough to be limited by memory
**     D     the derivative of a unary formula times g (public ops), or
**           KN__PW_NO_DERIV
**   Expressions are written in a small vocabulary that every expansion
**   provides: operands a and b of type T; P1 the formula parameter (add/sub
**   alpha, threshold_backward's threshold) converted to T and PI its int64
**   value; the helpers of KN__PW_HELPERS (kn_wadd kn_wmul kn_wneg kn_ipow,
**   kn_max kn_min kn_floordiv over float and double) and <tgmath.h>'s
**   fabs trunc nearbyint floor ceil. The eager kernels (pointwise_kern.c)
**   expand them as code; inductor (inductor/formula.c) stringifies them into
**   the generated C; derivatives (pointwise_bw.c) see g, x, out and ctx.
**   clamp's formulas read q (kn__pwparams) and are eager-only.
**
** KN__PW_OPS(X): one row per op of ops_pointwise.def that uses the shared
** meta function and kernel (kn__meta_pw_binary/unary, kn__k_pw_binary/unary),
**   X(OP_ID, CODE, KIND, NOPNDS)
**     KIND    result dtype kind: SAME, FLOAT (integers -> default float),
**             BOOL
**     NOPNDS  leading operand args (tensors or scalars)
** pointwise_meta.c checks at build time that the number of such ops equals
** the number of rows (and -Werror=override-init rejects a duplicate row);
** tests/test_pointwise_formulas.c checks that every such op has its row.
*/
#ifndef KN_OPS_POINTWISE_FORMULAS_H
#define KN_OPS_POINTWISE_FORMULAS_H

/* Compute classes of CL. */
#define KN__PWC_F 1
#define KN__PWC_I 2
#define KN__PWC_B 4
#define KN__PWC_FI (KN__PWC_F | KN__PWC_I)
#define KN__PWC_FIB (KN__PWC_F | KN__PWC_I | KN__PWC_B)

/* D of formulas without a derivative rule of their own. */
#define KN__PW_NO_DERIV kn__pw_no_deriv(ctx)

/* clang-format off */
#define KN__PW_FORMULAS(X)                                                                         \
  /* binary */                                                                                     \
  X(ADD, 2, T, KN__PWC_FI, a + P1 * b, kn_wadd(a, kn_wmul(PI, b)), 0, -1, 1, KN__PW_NO_DERIV)       \
  X(SUB, 2, T, KN__PWC_FI, a - P1 * b, kn_wadd(a, kn_wneg(kn_wmul(PI, b))), 0, -1, 1, KN__PW_NO_DERIV) \
  X(MUL, 2, T, KN__PWC_FI, a * b, kn_wmul(a, b), 0, -1, 1, KN__PW_NO_DERIV)                        \
  X(DIV, 2, T, KN__PWC_F, a / b, 0, 0, -1, 0, KN__PW_NO_DERIV)                                     \
  /* integer division: eager-only loops that report a zero divisor */                              \
  X(DIV_TRUNC, 2, T, KN__PWC_F, trunc(a / b), 0, 0, -1, 0, KN__PW_NO_DERIV)                        \
  X(DIV_FLOOR, 2, T, KN__PWC_F, kn_floordiv(a, b), 0, 0, -1, 0, KN__PW_NO_DERIV)                   \
  X(MAXIMUM, 2, T, KN__PWC_FI, kn_max(a, b), (a > b ? a : b), 0, -1, 1, KN__PW_NO_DERIV)           \
  X(MINIMUM, 2, T, KN__PWC_FI, kn_min(a, b), (a < b ? a : b), 0, -1, 1, KN__PW_NO_DERIV)           \
  X(POW, 2, T, KN__PWC_FI, 0, kn_ipow(a, b), 0, KN__VM_POW, 0, KN__PW_NO_DERIV)                    \
  X(EQ, 2, bool, KN__PWC_FIB, a == b, a == b, a == b, -1, 1, KN__PW_NO_DERIV)                      \
  X(NE, 2, bool, KN__PWC_FIB, a != b, a != b, a != b, -1, 1, KN__PW_NO_DERIV)                      \
  X(LT, 2, bool, KN__PWC_FI, a < b, a < b, 0, -1, 1, KN__PW_NO_DERIV)                              \
  X(LE, 2, bool, KN__PWC_FI, a <= b, a <= b, 0, -1, 1, KN__PW_NO_DERIV)                            \
  X(GT, 2, bool, KN__PWC_FI, a > b, a > b, 0, -1, 1, KN__PW_NO_DERIV)                              \
  X(GE, 2, bool, KN__PWC_FI, a >= b, a >= b, 0, -1, 1, KN__PW_NO_DERIV)                            \
  X(LAND, 2, bool, KN__PWC_B, 0, 0, a && b, -1, 1, KN__PW_NO_DERIV)                                \
  X(LOR, 2, bool, KN__PWC_B, 0, 0, a || b, -1, 1, KN__PW_NO_DERIV)                                 \
  X(THRESHOLD_BW, 2, T, KN__PWC_FI, (b <= P1 ? (T)0 : a), (b <= PI ? (T)0 : a), 0, -1, 1, KN__PW_NO_DERIV) \
  X(SIGMOID_BW, 2, T, KN__PWC_F, a * ((T)1 - b) * b, 0, 0, -1, 1, KN__PW_NO_DERIV)                 \
  X(TANH_BW, 2, T, KN__PWC_F, a * ((T)1 - b * b), 0, 0, -1, 1, KN__PW_NO_DERIV)                    \
  X(GELU_BW, 2, T, KN__PWC_F, 0, 0, 0, KN__VM_GELU_BW, 0, KN__PW_NO_DERIV)                         \
  X(GELU_TANH_BW, 2, T, KN__PWC_F, 0, 0, 0, KN__VM_GELU_TANH_BW, 0, KN__PW_NO_DERIV)               \
  /* unary */                                                                                      \
  X(NEG, 1, T, KN__PWC_FI, -a, kn_wneg(a), 0, -1, 1, kn_neg(g))                                    \
  X(ABS, 1, T, KN__PWC_FI, fabs(a), (a < 0 ? kn_wneg(a) : a), 0, -1, 1, kn_mul(g, kn_sgn(x)))      \
  X(SGN, 1, T, KN__PWC_FI, ((a > 0) - (a < 0)), ((a > 0) - (a < 0)), 0, -1, 1, KN__PW_NO_DERIV)    \
  X(RECIPROCAL, 1, T, KN__PWC_F, (T)1 / a, 0, 0, -1, 0, kn_neg(kn_mul(g, kn_mul(out, out))))       \
  X(EXP, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_EXP, 0, kn_mul(g, out))                                  \
  X(EXP2, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_EXP2, 0, kn_mul_scalar(kn_mul(g, out), kn_float(M_LN2))) \
  X(LOG, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_LOG, 0, kn_div(g, x))                                    \
  X(LOG2, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_LOG2, 0, kn_div(g, kn_mul_scalar(x, kn_float(M_LN2))))  \
  X(LOG1P, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_LOG1P, 0, kn_div(g, kn_add_scalar(x, kn_int(1))))      \
  X(EXPM1, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_EXPM1, 0, kn_mul(g, kn_add_scalar(out, kn_int(1))))    \
  X(SQRT, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_SQRT, 0, kn_div(g, kn_mul_scalar(out, kn_int(2))))      \
  X(RSQRT, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_RSQRT, 0,                                              \
    kn_mul(g, kn_mul_scalar(kn_mul(out, kn_mul(out, out)), kn_float(-0.5))))                       \
  X(SIN, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_SIN, 0, kn_mul(g, kn_cos(x)))                            \
  X(COS, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_COS, 0, kn_neg(kn_mul(g, kn_sin(x))))                    \
  X(TAN, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_TAN, 0, kn_mul(g, kn_add_scalar(kn_mul(out, out), kn_int(1)))) \
  X(TANH, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_TANH, 0, kn_tanh_backward(g, out))                      \
  X(SIGMOID, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_SIGMOID, 0, kn_sigmoid_backward(g, out))             \
  X(RELU, 1, T, KN__PWC_FI, ((a > 0 || a != a) ? a : (T)0), (a > 0 ? a : 0), 0, -1, 1,              \
    kn_threshold_backward(g, out, kn_int(0)))                                                      \
  X(GELU, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_GELU, 0, kn__pw_d_gelu(ctx, g, x))                      \
  X(GELU_TANH, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_GELU_TANH, 0, kn__pw_d_gelu(ctx, g, x))            \
  X(SILU, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_SILU, 0, kn__pw_d_silu(g, x))                           \
  X(ERF, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_ERF, 0, kn__pw_d_erf(g, x, 1.1283791670955126))          \
  X(LOG10, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_LOG10, 0, kn_div(g, kn_mul_scalar(x, kn_float(M_LN10)))) \
  X(SINH, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_SINH, 0, kn_mul(g, kn_cosh(x)))                         \
  X(COSH, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_COSH, 0, kn_mul(g, kn_sinh(x)))                         \
  X(ASIN, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_ASIN, 0, kn_mul(g, kn__pw_rsqrt_1mx2(x)))               \
  X(ACOS, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_ACOS, 0, kn_neg(kn_mul(g, kn__pw_rsqrt_1mx2(x))))       \
  X(ATAN, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_ATAN, 0, kn_div(g, kn_add_scalar(kn_mul(x, x), kn_int(1)))) \
  X(ERFC, 1, T, KN__PWC_F, 0, 0, 0, KN__VM_ERFC, 0, kn__pw_d_erf(g, x, -1.1283791670955126))       \
  /* softplus: eager-only blocks (beta x, exp and log1p through vector math) */                   \
  X(SOFTPLUS, 1, T, 0, 0, 0, 0, -1, 0, kn__pw_d_softplus(ctx, g, x))                       \
  X(ROUND, 1, T, KN__PWC_FI, nearbyint(a), a, 0, -1, 0, KN__PW_NO_DERIV)                           \
  X(TRUNC, 1, T, KN__PWC_FI, trunc(a), a, 0, -1, 0, KN__PW_NO_DERIV)                               \
  X(FLOOR, 1, T, KN__PWC_FI, floor(a), a, 0, -1, 0, KN__PW_NO_DERIV)                               \
  X(CEIL, 1, T, KN__PWC_FI, ceil(a), a, 0, -1, 0, KN__PW_NO_DERIV)                                 \
  X(LNOT, 1, bool, KN__PWC_B, 0, 0, !a, -1, 1, KN__PW_NO_DERIV)                                    \
  X(CLAMP, 1, T, KN__PWC_FI, kn_clamp(a, q), kn_clamp_i64(a, q), 0, -1, 1, kn__pw_d_clamp(ctx, g, x))

#define KN__PW_OPS(X)                                                                              \
  X(ADD, ADD, SAME, 2) X(ADD_SCALAR, ADD, SAME, 2) X(ADD_, ADD, SAME, 2)                           \
  X(ADD_SCALAR_, ADD, SAME, 2) X(SUB, SUB, SAME, 2) X(SUB_SCALAR, SUB, SAME, 2)                    \
  X(SUB_, SUB, SAME, 2) X(SUB_SCALAR_, SUB, SAME, 2) X(MUL, MUL, SAME, 2)                          \
  X(MUL_SCALAR, MUL, SAME, 2) X(MUL_, MUL, SAME, 2) X(MUL_SCALAR_, MUL, SAME, 2)                   \
  X(DIV, DIV, FLOAT, 2) X(DIV_SCALAR, DIV, FLOAT, 2) X(DIV_MODE, DIV_TRUNC, SAME, 2)               \
  X(DIV_SCALAR_MODE, DIV_TRUNC, SAME, 2) X(DIV_, DIV, FLOAT, 2) X(DIV_SCALAR_, DIV, FLOAT, 2)      \
  X(DIV_MODE_, DIV_TRUNC, SAME, 2) X(MAXIMUM, MAXIMUM, SAME, 2) X(MINIMUM, MINIMUM, SAME, 2)        \
  X(POW, POW, SAME, 2) X(POW_SCALAR, POW, SAME, 2) X(POW_SELF_SCALAR, POW, SAME, 2)                \
  X(POW_SCALAR_, POW, SAME, 2)                                                                     \
  X(EQ, EQ, BOOL, 2) X(EQ_SCALAR, EQ, BOOL, 2) X(NE, NE, BOOL, 2) X(NE_SCALAR, NE, BOOL, 2)        \
  X(LT, LT, BOOL, 2) X(LT_SCALAR, LT, BOOL, 2) X(LE, LE, BOOL, 2) X(LE_SCALAR, LE, BOOL, 2)        \
  X(GT, GT, BOOL, 2) X(GT_SCALAR, GT, BOOL, 2) X(GE, GE, BOOL, 2) X(GE_SCALAR, GE, BOOL, 2)        \
  X(LOGICAL_AND, LAND, BOOL, 2) X(LOGICAL_OR, LOR, BOOL, 2) X(LOGICAL_NOT, LNOT, BOOL, 1)          \
  X(NEG, NEG, SAME, 1) X(NEG_, NEG, SAME, 1) X(ABS, ABS, SAME, 1) X(ABS_, ABS, SAME, 1)            \
  X(SGN, SGN, SAME, 1) X(RECIPROCAL, RECIPROCAL, FLOAT, 1) X(RECIPROCAL_, RECIPROCAL, FLOAT, 1)    \
  X(EXP, EXP, FLOAT, 1) X(EXP_, EXP, FLOAT, 1) X(EXP2, EXP2, FLOAT, 1) X(LOG, LOG, FLOAT, 1)       \
  X(LOG_, LOG, FLOAT, 1) X(LOG2, LOG2, FLOAT, 1) X(LOG1P, LOG1P, FLOAT, 1)                         \
  X(EXPM1, EXPM1, FLOAT, 1) X(SQRT, SQRT, FLOAT, 1) X(SQRT_, SQRT, FLOAT, 1)                       \
  X(RSQRT, RSQRT, FLOAT, 1) X(SIN, SIN, FLOAT, 1) X(COS, COS, FLOAT, 1) X(TAN, TAN, FLOAT, 1)      \
  X(TANH, TANH, FLOAT, 1) X(TANH_, TANH, FLOAT, 1) X(SIGMOID, SIGMOID, FLOAT, 1)                   \
  X(SIGMOID_, SIGMOID, FLOAT, 1) X(RELU, RELU, SAME, 1) X(RELU_, RELU, SAME, 1)                    \
  X(GELU, GELU, FLOAT, 1) X(SILU, SILU, FLOAT, 1) X(ERF, ERF, FLOAT, 1)                            \
  X(LOG10, LOG10, FLOAT, 1) X(SINH, SINH, FLOAT, 1) X(COSH, COSH, FLOAT, 1)                        \
  X(ASIN, ASIN, FLOAT, 1) X(ACOS, ACOS, FLOAT, 1) X(ATAN, ATAN, FLOAT, 1)                          \
  X(ERFC, ERFC, FLOAT, 1) X(SOFTPLUS, SOFTPLUS, FLOAT, 1)                                          \
  X(ROUND, ROUND, SAME, 1) X(ROUND_, ROUND, SAME, 1) X(TRUNC, TRUNC, SAME, 1)                      \
  X(TRUNC_, TRUNC, SAME, 1) X(FLOOR, FLOOR, SAME, 1) X(FLOOR_, FLOOR, SAME, 1)                     \
  X(CEIL, CEIL, SAME, 1) X(CEIL_, CEIL, SAME, 1) X(CLAMP, CLAMP, SAME, 3) X(CLAMP_, CLAMP, SAME, 3) \
  X(THRESHOLD_BACKWARD, THRESHOLD_BW, SAME, 2) X(SIGMOID_BACKWARD, SIGMOID_BW, SAME, 2)            \
  X(TANH_BACKWARD, TANH_BW, SAME, 2) X(GELU_BACKWARD, GELU_BW, SAME, 2)
/* clang-format on */

/* The helpers of the formulas' vocabulary, as one macro: the eager kernels
** expand it as code, inductor writes its text into every generated file
** (KN__PW_HELPERS_TEXT). Written without <math.h>/<tgmath.h> macros so that
** its text is the same wherever it is expanded. */
#define KN__PW_FLOAT_HELPERS(T, S, L)                                                              \
  static inline T kn_max_##S(T a, T b) { return a != a ? a : b != b ? b : a > b ? a : b; }         \
  static inline T kn_min_##S(T a, T b) { return a != a ? a : b != b ? b : a < b ? a : b; }         \
  static inline T kn_floordiv_##S(T a, T b) {                                                      \
    if (b == 0) return a / b;                                                                      \
    T mod = fmod##L(a, b), div = (a - mod) / b;                                                    \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;                                                \
    if (div == 0) return copysign##L((T)0, a / b);                                                 \
    T fl = floor##L(div);                                                                          \
    if (div - fl > (T)0.5) fl += 1;                                                                \
    return fl;                                                                                     \
  }
#define KN__PW_HELPERS                                                                             \
  static inline int64_t kn_wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); } \
  static inline int64_t kn_wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); } \
  static inline int64_t kn_wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }                 \
  static inline int64_t kn_ipow(int64_t a, int64_t b) {                                            \
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;                               \
    uint64_t r = 1, x = (uint64_t)a;                                                               \
    while (b) {                                                                                    \
      if (b & 1) r *= x;                                                                           \
      x *= x;                                                                                      \
      b >>= 1;                                                                                     \
    }                                                                                              \
    return (int64_t)r;                                                                             \
  }                                                                                                \
  KN__PW_FLOAT_HELPERS(float, f32, f) KN__PW_FLOAT_HELPERS(double, f64, )

/* The type-generic names of the float helpers (text for generated code; the
** eager kernels define the same macros from it, see pointwise_kern.c). */
#define KN__PW_GENERIC_TEXT                                                                        \
  "#define kn_max(a, b) _Generic((a), float: kn_max_f32, default: kn_max_f64)(a, b)\n"             \
  "#define kn_min(a, b) _Generic((a), float: kn_min_f32, default: kn_min_f64)(a, b)\n"             \
  "#define kn_floordiv(a, b) _Generic((a), float: kn_floordiv_f32, default: kn_floordiv_f64)(a, b)\n"

#define KN__PW_STR_(...) #__VA_ARGS__
#define KN__PW_STR(...) KN__PW_STR_(__VA_ARGS__)
/* KN__PW_HELPERS as one line of C source. */
#define KN__PW_HELPERS_TEXT KN__PW_STR(KN__PW_HELPERS)

#endif
