/*
** test_pointwise_grad.c: finite-difference gradient checks in float64 for
** every differentiable pointwise op (first order, and second order where the
** rule is itself differentiable), broadcasting operands, in-place variants
** (whose rules read self's value from before the op), and the grad_fn names
** torch 1.13 shows.
*/
#include "support/gradcheck.h"
#include "test_pointwise_util.h"

TestSuite(pw_grad, .init = pw_setup, .fini = pw_teardown);

/* A float64 leaf requiring grad with distinct values in [lo, hi), none of
** them an integer or a half-integer (kinks of abs/relu/floor/round). */
static kn_tensor *leaf(double lo, double hi, int nd, const int64_t *sizes) {
  kn_tensor *t = kn_empty(nd, sizes, KN_FLOAT64);
  double *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) {
    double f = fmod(0.1234 + 0.618034 * (double)i, 1.0);
    p[i] = lo + (hi - lo) * f;
    if (fabs(p[i] * 2 - round(p[i] * 2)) < 0.02) p[i] += 0.037;
  }
  kn_set_requires_grad(t, true);
  return t;
}
#define LEAF(lo, hi, shape) leaf(lo, hi, KN_SHAPE shape)

typedef kn_tensor *(*unary)(kn_tensor *x);
typedef kn_tensor *(*binary)(kn_tensor *x, kn_tensor *y);

static kn_tensor *call1(kn_tensor *const *in, int n, void *ud) {
  (void)n;
  return ((unary)ud)(in[0]);
}
static kn_tensor *call2(kn_tensor *const *in, int n, void *ud) {
  (void)n;
  return ((binary)ud)(in[0], in[1]);
}

static void check(const char *what, kn_gc_fn fn, void *ud, kn_tensor *const *in, int n,
                  bool second) {
  char why[600];
  cr_assert(kn_gradcheck(fn, in, n, ud, why, sizeof why), "%s: %s", what, why);
  if (second)
    cr_assert(kn_gradgradcheck(fn, in, n, ud, why, sizeof why), "%s (2nd order): %s", what, why);
}
static void check1(const char *what, unary f, kn_tensor *x, bool second) {
  check(what, call1, (void *)f, (kn_tensor *[]){x}, 1, second);
}
static void check2(const char *what, binary f, kn_tensor *x, kn_tensor *y, bool second) {
  check(what, call2, (void *)f, (kn_tensor *[]){x, y}, 2, second);
}

/* ---- unary ops ------------------------------------------------------------------ */
static kn_tensor *f_gelu(kn_tensor *x) { return kn_gelu(x, KN_GELU_NONE); }
static kn_tensor *f_gelu_tanh(kn_tensor *x) { return kn_gelu(x, KN_GELU_TANH); }
static kn_tensor *f_softplus(kn_tensor *x) { return kn_softplus(x, kn_int(1), kn_int(20)); }
/* beta 2, threshold 1: the linear part starts at x = 0.5 */
static kn_tensor *f_softplus_b2(kn_tensor *x) { return kn_softplus(x, kn_float(2), kn_int(1)); }
static kn_tensor *f_clamp(kn_tensor *x) {
  kn_scalar lo = kn_float(-0.6), hi = kn_float(0.7);
  return kn_clamp(x, &lo, &hi);
}
static kn_tensor *f_clamp_min(kn_tensor *x) {
  kn_scalar lo = kn_int(0);
  return kn_clamp(x, &lo, NULL);
}
static kn_tensor *f_pow_s(kn_tensor *x) { return kn_pow_scalar(x, kn_float(2.5)); }
static kn_tensor *f_pow_i(kn_tensor *x) { return kn_pow_scalar(x, kn_int(3)); }
static kn_tensor *f_pow_0(kn_tensor *x) { return kn_pow_scalar(x, kn_int(0)); }
static kn_tensor *f_spow(kn_tensor *x) { return kn_scalar_pow(kn_float(1.7), x); }
static kn_tensor *f_add_s(kn_tensor *x) { return kn_add_scalar(x, kn_float(2)); }
static kn_tensor *f_sub_s(kn_tensor *x) { return kn_sub_scalar(x, kn_int(2)); }
static kn_tensor *f_mul_s(kn_tensor *x) { return kn_mul_scalar(x, kn_float(-3)); }
static kn_tensor *f_div_s(kn_tensor *x) { return kn_div_scalar(x, kn_float(0.25)); }
static kn_tensor *f_div_floor(kn_tensor *x) { return kn_div_scalar_mode(x, kn_int(2), KN_ROUND_FLOOR); }
static kn_tensor *f_contig(kn_tensor *x) {
  kn_tensor *t = kn_permute(x, KN_SHAPE(1, 0));
  return kn_contiguous(t);
}
static kn_tensor *f_to(kn_tensor *x) { return kn_to(kn_to(x, KN_FLOAT32), KN_FLOAT64); }

Test(pw_grad, unary_first_and_second_order) {
  kn_tensor *x = LEAF(-1.5, 1.5, (2, 3));
  kn_tensor *pos = LEAF(0.3, 2.5, (2, 3));
  kn_tensor *unit = LEAF(-0.8, 0.8, (2, 3));
  struct { const char *name; unary f; kn_tensor *x; bool second; } cases[] = {
    {"neg", kn_neg, x, true},         {"abs", kn_abs, x, true},
    {"reciprocal", kn_reciprocal, pos, true}, {"exp", kn_exp, x, true},
    {"exp2", kn_exp2, x, true},       {"log", kn_log, pos, true},
    {"log2", kn_log2, pos, true},     {"log1p", kn_log1p, pos, true},
    {"expm1", kn_expm1, x, true},     {"sqrt", kn_sqrt, pos, true},
    {"rsqrt", kn_rsqrt, pos, true},   {"sin", kn_sin, x, true},
    {"cos", kn_cos, x, true},         {"tan", kn_tan, x, true},
    {"tanh", kn_tanh, x, true},       {"sigmoid", kn_sigmoid, x, true},
    {"relu", kn_relu, x, true},       {"gelu", f_gelu, x, true},
    {"gelu_tanh", f_gelu_tanh, x, true}, {"silu", kn_silu, x, true},
    {"erf", kn_erf, x, true},         {"clamp", f_clamp, x, true},
    {"clamp_min", f_clamp_min, x, true}, {"round", kn_round, x, false},
    {"trunc", kn_trunc, x, false},    {"floor", kn_floor, x, false},
    {"ceil", kn_ceil, x, false},      {"sgn", kn_sgn, x, false},
    {"pow_scalar", f_pow_s, pos, true}, {"pow_int", f_pow_i, x, true},
    {"pow_0", f_pow_0, x, false},     {"scalar_pow", f_spow, x, true},
    {"add_scalar", f_add_s, x, true}, {"sub_scalar", f_sub_s, x, true},
    {"mul_scalar", f_mul_s, x, true}, {"div_scalar", f_div_s, x, true},
    {"div_floor", f_div_floor, x, false}, {"clone", kn_clone, x, true},
    {"contiguous", f_contig, x, true},
    {"log10", kn_log10, pos, true},   {"sinh", kn_sinh, x, true},
    {"cosh", kn_cosh, x, true},       {"asin", kn_asin, unit, true},
    {"acos", kn_acos, unit, true},    {"atan", kn_atan, x, true},
    {"erfc", kn_erfc, x, true},       {"softplus", f_softplus, x, true},
    {"softplus_beta", f_softplus_b2, x, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check1(cases[i].name, cases[i].f, cases[i].x, cases[i].second);
  /* a float32 round trip: gradient is the identity within float32 precision */
  char why[600];
  kn_gradcheck_opts loose = {1e-3, 1e-4, 1e-3};
  cr_assert(kn_gradcheck_ex(call1, (kn_tensor *[]){x}, 1, (void *)f_to, &loose, why, sizeof why),
            "to: %s", why);
}

/* ---- binary ops, with broadcasting -------------------------------------------------- */
static kn_tensor *f_add_alpha(kn_tensor *x, kn_tensor *y) { return kn_add_scaled(x, y, kn_float(-1.5)); }
static kn_tensor *f_sub_alpha(kn_tensor *x, kn_tensor *y) { return kn_sub_scaled(x, y, kn_int(3)); }
static kn_tensor *f_where(kn_tensor *x, kn_tensor *y) {
  return kn_where(kn_gt_scalar(x, kn_float(0.2)), x, y);
}
static kn_tensor *f_pow_abs(kn_tensor *x, kn_tensor *y) { return kn_pow(kn_abs(x), y); }
static kn_tensor *f_div_trunc(kn_tensor *x, kn_tensor *y) { return kn_div_mode(x, y, KN_ROUND_TRUNC); }

Test(pw_grad, binary_with_broadcasting) {
  kn_tensor *a = LEAF(-1.5, 1.5, (2, 3));
  kn_tensor *row = LEAF(0.4, 1.9, (3));
  kn_tensor *col = LEAF(-2, 2, (2, 1));
  kn_tensor *b = LEAF(0.4, 1.9, (2, 3));
  struct { const char *name; binary f; kn_tensor *x, *y; bool second; } cases[] = {
    {"add", kn_add, a, row, true},         {"add_alpha", f_add_alpha, col, a, true},
    {"sub", kn_sub, a, col, true},         {"sub_alpha", f_sub_alpha, row, a, true},
    {"mul", kn_mul, a, row, true},         {"mul_col", kn_mul, col, row, true},
    {"div", kn_div, a, row, true},         {"maximum", kn_maximum, a, col, true},
    {"minimum", kn_minimum, row, a, true}, {"pow", f_pow_abs, a, row, true},
    {"where", f_where, a, row, true},      {"div_trunc", f_div_trunc, a, row, false},
    {"add2", f_add_alpha, a, b, true},      {"sub2", f_sub_alpha, a, b, true},
    {"mul2", kn_mul, a, b, true},           {"div2", kn_div, a, b, true},
    {"maximum2", kn_maximum, a, b, true},   {"minimum2", kn_minimum, a, b, true},
    {"pow2", f_pow_abs, a, b, true},        {"where2", f_where, a, b, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check2(cases[i].name, cases[i].f, cases[i].x, cases[i].y, cases[i].second);
}

/* ---- backward helper ops (double backward of relu/sigmoid/tanh/gelu) ---------------- */
static kn_tensor *f_thr_bw(kn_tensor *g, kn_tensor *x) { return kn_threshold_backward(g, x, kn_float(0.1)); }
static kn_tensor *f_gelu_bw(kn_tensor *g, kn_tensor *x) { return kn_gelu_backward(g, x, KN_GELU_NONE); }
static kn_tensor *f_gelu_bw_t(kn_tensor *g, kn_tensor *x) { return kn_gelu_backward(g, x, KN_GELU_TANH); }

Test(pw_grad, backward_helper_ops) {
  kn_tensor *g = LEAF(-1, 1, (2, 3));
  kn_tensor *x = LEAF(-1.5, 1.5, (2, 3));
  kn_tensor *y = LEAF(0.1, 0.9, (2, 3));
  check2("threshold_backward", f_thr_bw, g, x, false);
  check2("sigmoid_backward", kn_sigmoid_backward, g, y, true);
  check2("tanh_backward", kn_tanh_backward, g, y, true);
  check2("gelu_backward", f_gelu_bw, g, x, false);
  check2("gelu_backward_tanh", f_gelu_bw_t, g, x, false);
}

/* ---- in-place variants: y = x.clone(); y.op_(...) ------------------------------------- */
static kn_tensor *ip(kn_tensor *x, kn_status st_of(kn_tensor *)) {
  kn_tensor *y = kn_clone(x);
  return st_of(y) == KN_OK ? y : NULL;
}
static kn_status s_exp(kn_tensor *y) { return kn_exp_(y); }
static kn_status s_relu(kn_tensor *y) { return kn_relu_(y); }
static kn_status s_tanh(kn_tensor *y) { return kn_tanh_(y); }
static kn_status s_sigmoid(kn_tensor *y) { return kn_sigmoid_(y); }
static kn_status s_neg(kn_tensor *y) { return kn_neg_(y); }
static kn_status s_trunc(kn_tensor *y) { return kn_trunc_(y); }
static kn_status s_pow(kn_tensor *y) { return kn_pow_scalar_(y, kn_int(3)); }
static kn_status s_clamp(kn_tensor *y) {
  kn_scalar lo = kn_float(-0.5), hi = kn_float(0.5);
  return kn_clamp_(y, &lo, &hi);
}
static kn_status s_mul_s(kn_tensor *y) { return kn_mul_scalar_(y, kn_float(2)); }
static kn_status s_fill(kn_tensor *y) { return kn_fill_(y, kn_float(3)); }
static kn_status s_abs(kn_tensor *y) { return kn_abs_(y); }
static kn_status s_recip(kn_tensor *y) { return kn_reciprocal_(y); }
static kn_status s_log(kn_tensor *y) { return kn_log_(y); }
static kn_status s_sqrt(kn_tensor *y) { return kn_sqrt_(y); }
static kn_status s_floor(kn_tensor *y) { return kn_floor_(y); }
static kn_tensor *i_abs(kn_tensor *x) { return ip(x, s_abs); }
static kn_tensor *i_recip(kn_tensor *x) { return ip(x, s_recip); }
static kn_tensor *i_log(kn_tensor *x) { return ip(x, s_log); }
static kn_tensor *i_sqrt(kn_tensor *x) { return ip(x, s_sqrt); }
static kn_tensor *i_floor(kn_tensor *x) { return ip(x, s_floor); }
static kn_tensor *i_exp(kn_tensor *x) { return ip(x, s_exp); }
static kn_tensor *i_relu(kn_tensor *x) { return ip(x, s_relu); }
static kn_tensor *i_tanh(kn_tensor *x) { return ip(x, s_tanh); }
static kn_tensor *i_sigmoid(kn_tensor *x) { return ip(x, s_sigmoid); }
static kn_tensor *i_neg(kn_tensor *x) { return ip(x, s_neg); }
static kn_tensor *i_trunc(kn_tensor *x) { return ip(x, s_trunc); }
static kn_tensor *i_pow(kn_tensor *x) { return ip(x, s_pow); }
static kn_tensor *i_clamp(kn_tensor *x) { return ip(x, s_clamp); }
static kn_tensor *i_mul_s(kn_tensor *x) { return ip(x, s_mul_s); }
static kn_tensor *i_fill(kn_tensor *x) { return kn_mul(x, ip(x, s_fill)); }

static kn_tensor *i_mul(kn_tensor *x, kn_tensor *w) {
  kn_tensor *y = kn_clone(x);
  return kn_mul_(y, w) == KN_OK ? y : NULL;
}
static kn_tensor *i_div(kn_tensor *x, kn_tensor *w) {
  kn_tensor *y = kn_clone(x);
  return kn_div_(y, w) == KN_OK ? y : NULL;
}
static kn_tensor *i_add(kn_tensor *x, kn_tensor *w) {
  kn_tensor *y = kn_clone(x);
  return kn_add_scaled_(y, w, kn_float(0.5)) == KN_OK ? y : NULL;
}
static kn_tensor *i_sub(kn_tensor *x, kn_tensor *w) {
  kn_tensor *y = kn_mul(x, x);
  return kn_sub_(y, w) == KN_OK ? y : NULL;
}
static kn_tensor *i_copy(kn_tensor *x, kn_tensor *w) {
  kn_tensor *y = kn_mul(x, x);
  return kn_copy_(y, w) == KN_OK ? kn_add(y, x) : NULL;
}

Test(pw_grad, inplace_variants) {
  kn_tensor *x = LEAF(-1.5, 1.5, (2, 3));
  kn_tensor *w = LEAF(0.5, 2, (3));
  kn_tensor *pos = LEAF(0.3, 2.5, (2, 3));
  check1("exp_", i_exp, x, true);
  check1("abs_", i_abs, x, false);
  check1("reciprocal_", i_recip, pos, true);
  check1("log_", i_log, pos, false);
  check1("sqrt_", i_sqrt, pos, true);
  check1("floor_", i_floor, x, false);
  check1("relu_", i_relu, x, false);
  check1("tanh_", i_tanh, x, true);
  check1("sigmoid_", i_sigmoid, x, true);
  check1("neg_", i_neg, x, true);
  check1("trunc_", i_trunc, x, false);
  /* the engine's pre-image of self has no history: no second order through
  ** rules that read it (pow_, mul_, div_) */
  check1("pow_", i_pow, x, false);
  check1("clamp_", i_clamp, x, false);
  check1("mul_scalar_", i_mul_s, x, true);
  check1("fill_", i_fill, x, false);
  check2("mul_", i_mul, x, w, false);
  check2("div_", i_div, x, w, false);
  check2("add_", i_add, x, w, true);
  check2("sub_", i_sub, x, w, true);
  check2("copy_", i_copy, x, w, false);
}

/* ---- grad_fn names (as torch 1.13 prints them) ------------------------------------------ */
static void expect_fn(const kn_tensor *t, const char *name) {
  cr_assert_not_null(t, "%s", kn_last_error());
  const char *got = kn_grad_fn_name(t);
  cr_assert_str_eq(got ? got : "(none)", name);
}

Test(pw_grad, grad_fn_names) {
  kn_tensor *x = LEAF(0.2, 1, (3));
  kn_tensor *i = TV(KN_INT64, (3), 1, 2, 3);
  kn_scalar one = kn_int(1);
  expect_fn(kn_add(x, x), "AddBackward0");
  expect_fn(kn_add_scalar(x, one), "AddBackward0");
  expect_fn(kn_sub(x, x), "SubBackward0");
  expect_fn(kn_mul(x, i), "MulBackward0");
  expect_fn(kn_div_scalar(x, one), "DivBackward0");
  expect_fn(kn_div_mode(x, x, KN_ROUND_FLOOR), "DivBackward2");
  expect_fn(kn_pow(x, x), "PowBackward1");
  expect_fn(kn_pow_scalar(x, kn_int(2)), "PowBackward0");
  expect_fn(kn_scalar_pow(kn_int(2), x), "PowBackward1");
  expect_fn(kn_maximum(x, x), "MaximumBackward0");
  expect_fn(kn_relu(x), "ReluBackward0");
  expect_fn(kn_gelu(x, KN_GELU_TANH), "GeluBackward0");
  expect_fn(kn_log1p(x), "Log1PBackward0");
  expect_fn(kn_clamp(x, &one, NULL), "ClampBackward1");
  expect_fn(kn_where(kn_gt_scalar(x, one), x, x), "WhereBackward0");
  expect_fn(kn_clone(x), "CloneBackward0");
  expect_fn(kn_to(x, KN_FLOAT32), "ToCopyBackward0");
  expect_fn(kn_gt(x, x), "(none)");
  cr_assert(!kn_requires_grad(kn_eq(x, x)));
  cr_assert_eq(kn_contiguous(x), x);
  kn_tensor *y = kn_clone(x);
  cr_assert_eq(kn_exp_(y), KN_OK);
  expect_fn(y, "ExpBackward0");
  cr_assert_eq(kn_fill_(y, one), KN_OK);
  expect_fn(y, "FillBackward2");
  cr_assert_eq(kn_zero_(y), KN_OK);
  expect_fn(y, "ZeroBackward0");
  cr_assert_eq(kn_copy_(y, x), KN_OK);
  expect_fn(y, "CopyBackwards");
  /* an in-place op on a leaf that requires grad is refused */
  cr_assert_eq(kn_add_(x, x), KN_EAUTOGRAD);
  cr_assert(strstr(kn_last_error(), "a leaf Variable that requires grad is being used in an "
                                    "in-place operation.") != NULL, "%s", kn_last_error());
}

Test(pw_grad, backward_values_through_broadcast_and_dtype) {
  /* d/da sum(a * b) = b broadcast; d/db = sum over broadcast rows of a;
  ** float32 b with float64 a: b's gradient comes back as float32. */
  kn_tensor *a = LEAF(-1, 1, (2, 3));
  kn_tensor *b = TV(KN_FLOAT32, (3), 1, 2, 3);
  cr_assert_eq(kn_set_requires_grad(b, true), KN_OK);
  kn_tensor *out = kn_mul(a, b);
  cr_assert_eq(kn_backward(out, kn_ones(KN_SHAPE(2, 3), KN_FLOAT64)), KN_OK, "%s", kn_last_error());
  EXPECT(kn_grad(a), KN_FLOAT64, (2, 3), 1, 2, 3, 1, 2, 3);
  kn_tensor *ga = kn_grad(b);
  const double *pa = kn_data(a);
  EXPECT(ga, KN_FLOAT32, (3), pa[0] + pa[3], pa[1] + pa[4], pa[2] + pa[5]);
}
