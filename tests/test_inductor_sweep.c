/*
** tests/test_inductor_sweep.c: the op sweep. Every pointwise op inductor
** lowers (and a few it leaves to extern calls) is compiled alone and in
** small chains (reductions with pointwise prologues, and the ops inductor
** decomposes into reduction groups: softmax, log_softmax, layer norm,
** mse_loss), on random inputs laid out contiguous, transposed,
** broadcast, zero-size, size 1 and with odd sizes, in float32 and float64,
** and on int64 and bool inputs, and compared with eager kiln on the same
** inputs. Dynamic sizes: three sizes of one function share the program
** compiled at the second (automatic dynamic) call.
**
** Tolerances (|compiled - eager| <= atol + rtol * |eager|; NaNs and
** infinities must match exactly): float32 rtol 1e-5, atol 1e-6; float64 rtol
** 1e-12, atol 1e-12; int64 and bool exact. The generated code expands the
** eager kernels' formulas and calls their vector math, so the results are
** equal (test_inductor_vmath.c checks the bits); the tolerance is a bound,
** not the expectation.
**
** To keep the suite quick, every case is one graph with all ops as outputs,
** compiled at -O0 (KILN_CFLAGS), which changes no result (no fast-math,
** no FP contraction; test_inductor.c runs the default -O3).
**
** Differential check (scalar_target_*): every case also compiled for the
** plain scalar C target (KILN_INDUCTOR_TARGET=c_scalar), compared with
** eager and bit for bit with the default "c" target; float64 in every
** build, float32 and int64/bool with KILN_TEST_SWEEP_ALL=1.
*/
#include "inductor_util.h"

#define MAXOUT 128

typedef struct sweep { kn_tensor *out[MAXOUT]; const char *name[MAXOUT]; int n; } sweep;

static void put(sweep *s, const char *name, kn_tensor *t) {
  s->name[s->n] = name;
  s->out[s->n++] = t;
}

static void unary_ops(sweep *s, kn_tensor *x) {
  put(s, "neg", kn_neg(x));
  put(s, "abs", kn_abs(x));
  put(s, "sgn", kn_sgn(x));
  put(s, "reciprocal", kn_reciprocal(x));
  put(s, "exp", kn_exp(x));
  put(s, "exp2", kn_exp2(x));
  put(s, "log", kn_log(x));
  put(s, "log2", kn_log2(x));
  put(s, "log1p", kn_log1p(x));
  put(s, "expm1", kn_expm1(x));
  put(s, "sqrt", kn_sqrt(x));
  put(s, "rsqrt", kn_rsqrt(x));
  put(s, "sin", kn_sin(x));
  put(s, "cos", kn_cos(x));
  put(s, "tan", kn_tan(x));
  put(s, "tanh", kn_tanh(x));
  put(s, "sigmoid", kn_sigmoid(x));
  put(s, "relu", kn_relu(x));
  put(s, "gelu", kn_gelu(x, KN_GELU_NONE));
  put(s, "gelu_tanh", kn_gelu(x, KN_GELU_TANH));
  put(s, "silu", kn_silu(x));
  put(s, "erf", kn_erf(x));
  put(s, "round", kn_round(kn_mul_scalar(x, kn_float(3.0))));
  put(s, "trunc", kn_trunc(kn_mul_scalar(x, kn_float(3.0))));
  put(s, "floor", kn_floor(kn_mul_scalar(x, kn_float(3.0))));
  put(s, "ceil", kn_ceil(kn_mul_scalar(x, kn_float(3.0))));
  put(s, "clone", kn_clone(x));
  put(s, "to_other_float", kn_to_copy(x, kn_tensor_dtype(x) == KN_FLOAT32 ? KN_FLOAT64 : KN_FLOAT32));
  put(s, "to_int64", kn_to_copy(kn_mul_scalar(x, kn_float(4.0)), KN_INT64));
  put(s, "to_bool", kn_to_copy(kn_gt_scalar(x, kn_float(0.0)), KN_BOOL));
}

static void binary_ops(sweep *s, kn_tensor *x, kn_tensor *y) {
  put(s, "add", kn_add(x, y));
  put(s, "add_alpha", kn_add_scaled(x, y, kn_float(2.5)));
  put(s, "sub", kn_sub(x, y));
  put(s, "sub_alpha", kn_sub_scaled(x, y, kn_int(3)));
  put(s, "mul", kn_mul(x, y));
  put(s, "div", kn_div(x, y));
  put(s, "div_trunc", kn_div_mode(x, y, KN_ROUND_TRUNC));
  put(s, "div_floor", kn_div_mode(x, y, KN_ROUND_FLOOR));
  put(s, "maximum", kn_maximum(x, y));
  put(s, "minimum", kn_minimum(x, y));
  put(s, "pow", kn_pow(kn_abs(x), y));
  put(s, "eq", kn_eq(x, kn_floor(y)));
  put(s, "ne", kn_ne(x, y));
  put(s, "lt", kn_lt(x, y));
  put(s, "le", kn_le(x, y));
  put(s, "gt", kn_gt(x, y));
  put(s, "ge", kn_ge(x, y));
  put(s, "add_scalar", kn_add_scalar(x, kn_float(0.25)));
  put(s, "sub_scalar", kn_sub_scalar(x, kn_int(2)));
  put(s, "mul_scalar", kn_mul_scalar(x, kn_float(-1.5)));
  put(s, "div_scalar", kn_div_scalar(x, kn_float(3.0)));
  put(s, "pow_scalar", kn_pow_scalar(x, kn_float(2.0)));
  put(s, "lt_scalar", kn_lt_scalar(x, kn_float(0.1)));
  put(s, "threshold_backward", kn_threshold_backward(y, x, kn_float(0.0)));
  put(s, "sigmoid_backward", kn_sigmoid_backward(y, x));
  put(s, "tanh_backward", kn_tanh_backward(y, x));
  put(s, "gelu_backward", kn_gelu_backward(y, x, KN_GELU_NONE));
  put(s, "gelu_tanh_backward", kn_gelu_backward(y, x, KN_GELU_TANH));
  put(s, "where", kn_where(kn_gt(x, y), x, y));
  put(s, "logical_and", kn_logical_and(kn_gt_scalar(x, kn_float(0.0)), kn_lt_scalar(y, kn_float(0.5))));
  put(s, "logical_or", kn_logical_or(kn_gt_scalar(x, kn_float(0.0)), kn_lt_scalar(y, kn_float(0.5))));
  put(s, "logical_not", kn_logical_not(kn_gt_scalar(x, kn_float(0.0))));
}

/* Chains: fused into one loop each; one reads a reduction (broadcast). */
static void chains(sweep *s, kn_tensor *x, kn_tensor *y) {
  put(s, "chain_relu_sigmoid", kn_relu(kn_sigmoid(kn_add_scalar(kn_mul(x, y), kn_float(1.0)))));
  put(s, "chain_tanh_exp", kn_div_scalar(kn_sub(kn_tanh(kn_exp(kn_neg(x))), y), kn_float(2.0)));
  put(s, "chain_where", kn_where(kn_gt(x, y), kn_silu(x), kn_gelu(y, KN_GELU_NONE)));
  kn_tensor *rs = kn_sum_dims(x, (const int64_t[]){-1}, 1, true);
  put(s, "chain_after_reduction", kn_relu(kn_add(kn_mul_scalar(x, kn_float(2.0)), rs)));
  put(s, "chain_of_8", kn_add_scalar(kn_mul_scalar(kn_sigmoid(kn_sub_scalar(kn_mul(kn_add(
        kn_abs(kn_neg(x)), y), y), kn_float(0.5))), kn_float(3.0)), kn_float(1.0)));
}

/* Reductions over the last dims, alone and with a pointwise prologue. */
static void reductions(sweep *s, kn_tensor *x, kn_tensor *y) {
  const int64_t last[1] = {-1}, last2[2] = {-2, -1};
  put(s, "sum_last", kn_sum_dims(x, last, 1, false));
  put(s, "sum_all", kn_sum(x));
  put(s, "mean_last2_keepdim", kn_mean_dims(x, last2, 2, true));
  put(s, "mean_all", kn_mean(x));
  put(s, "amax_last", kn_amax(x, last, 1, false));
  put(s, "sum_prologue", kn_sum_dims(kn_mul(kn_exp(kn_neg(kn_abs(x))), y), last, 1, true));
  put(s, "amax_prologue", kn_amax(kn_sub(x, y), last, 1, true));
  put(s, "mean_then_pointwise", kn_relu(kn_mean_dims(kn_mul(x, y), last, 1, false)));
}

/* Ops inductor decomposes into reduction groups (test_inductor_sched.c has
** their kernel counts): softmax over the last and the first dim, log_softmax,
** layer norm over the last dim, mse_loss (broadcasting). */
static void decomposed(sweep *s, kn_tensor *x, kn_tensor *y) {
  int64_t d = kn_size(x, -1);
  put(s, "softmax_last", kn_softmax(x, -1));
  put(s, "softmax_first", kn_softmax(kn_mul(x, y), 0));
  put(s, "log_softmax_last", kn_log_softmax(kn_sub(x, y), -1));
  put(s, "layer_norm_last", kn_layer_norm(x, 1, &d, NULL, NULL, 1e-5));
  put(s, "mse_loss", kn_mse_loss(x, y, KN_REDUCTION_MEAN));
}

static void float_sweep(sweep *s, kn_tensor *x, kn_tensor *y) {
  unary_ops(s, x);
  binary_ops(s, x, y);
  chains(s, x, y);
  reductions(s, x, y);
  decomposed(s, x, y);
}

static kn_value float_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  sweep s = {.n = 0};
  float_sweep(&s, args[0].u.t, args[1].u.t);
  kn_value items[MAXOUT];
  for (int i = 0; i < s.n; i++) items[i] = kn_vtensor(s.out[i]);
  return kn_tuple(s.n, items);
}

static void int_sweep(sweep *s, kn_tensor *x, kn_tensor *y) {
  put(s, "add", kn_add(x, y));
  put(s, "add_alpha", kn_add_scaled(x, y, kn_int(3)));
  put(s, "sub", kn_sub(x, y));
  put(s, "mul", kn_mul(x, y));
  put(s, "neg", kn_neg(x));
  put(s, "abs", kn_abs(x));
  put(s, "sgn", kn_sgn(x));
  put(s, "relu", kn_relu(x));
  put(s, "maximum", kn_maximum(x, y));
  put(s, "minimum", kn_minimum(x, y));
  put(s, "eq", kn_eq(x, y));
  put(s, "lt", kn_lt(x, y));
  put(s, "ge_scalar", kn_ge_scalar(x, kn_int(0)));
  put(s, "mul_float_scalar", kn_mul_scalar(x, kn_float(0.5)));
  put(s, "where", kn_where(kn_gt(x, y), x, y));
  put(s, "to_float", kn_to_copy(x, KN_FLOAT32));
  put(s, "div", kn_div(x, y)); /* true division of integers: extern */
  put(s, "bool_and", kn_logical_and(kn_gt(x, y), kn_ne_scalar(y, kn_int(0))));
  put(s, "bool_eq", kn_eq(kn_gt(x, y), kn_lt_scalar(y, kn_int(1))));
  put(s, "chain", kn_relu(kn_sub(kn_mul(x, x), kn_add_scalar(y, kn_int(7)))));
}

static kn_value int_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  sweep s = {.n = 0};
  int_sweep(&s, args[0].u.t, args[1].u.t);
  kn_value items[MAXOUT];
  for (int i = 0; i < s.n; i++) items[i] = kn_vtensor(s.out[i]);
  return kn_tuple(s.n, items);
}

typedef void (*sweep_fn)(sweep *, kn_tensor *, kn_tensor *);

/* Compile fn once per call site of check(); compare every output. */
static void check(kn_compiled *f, sweep_fn ref, kn_tensor *x, kn_tensor *y, double rtol,
                  double atol, const char *what) {
  kn_value out;
  kn_value args[2] = {kn_vtensor(x), kn_vtensor(y)};
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s: %s", what, kn_last_error());
  sweep s = {.n = 0};
  ref(&s, x, y);
  cr_assert_eq(out.kind, KN_VTUPLE);
  cr_assert_eq(out.n, s.n);
  for (int i = 0; i < s.n; i++) {
    char label[128];
    snprintf(label, sizeof label, "%s: %s", what, s.name[i]);
    cr_expect(ind_close(out.u.items[i].u.t, s.out[i], rtol, atol, label), "%s", label);
  }
  kn_value_release(out);
}

static kn_compiled *compile_sweep(kn_fn fn, kn_dynamic dyn) {
  kn_compile_options o = {.backend = "inductor", .dynamic = dyn};
  return kn_compile_fn(fn, NULL, 2, "sweep", __FILE__, __LINE__, &o);
}

static void setup(void) {
  static char dir[64];
  ind_cache_dir(dir, sizeof dir);
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
  kn_manual_seed(7);
}

static double rtol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-5 : 1e-12; }
static double atol_of(kn_dtype dt) { return dt == KN_FLOAT32 ? 1e-6 : 1e-12; }

/* The layout cases of one dtype: each calls each(x, y, what, ud). */
typedef void (*case_fn)(kn_tensor *x, kn_tensor *y, const char *what, void *ud);

static void layout_cases(kn_dtype dt, case_fn each, void *ud) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(7, 13), NULL, dt), *y = kn_randn(KN_SHAPE(7, 13), NULL, dt);
  each(x, y, "contiguous 7x13", ud);
  kn_tensor *xt = kn_t(kn_randn(KN_SHAPE(13, 7), NULL, dt));
  each(xt, y, "transposed x", ud);
  kn_tensor *xb = kn_randn(KN_SHAPE(5, 1, 7), NULL, dt), *yb = kn_randn(KN_SHAPE(4, 7), NULL, dt);
  each(xb, yb, "broadcast 5x1x7 with 4x7", ud);
  each(kn_randn(KN_SHAPE(0, 5), NULL, dt), kn_randn(KN_SHAPE(0, 5), NULL, dt), "zero-size 0x5", ud);
  each(kn_randn(KN_SHAPE(1, 1), NULL, dt), kn_randn(KN_SHAPE(1, 1), NULL, dt), "size 1", ud);
  each(kn_randn(KN_SHAPE(3, 5, 7), NULL, dt), kn_randn(KN_SHAPE(5, 7), NULL, dt),
       "odd 3x5x7 with 5x7", ud);
  kn_tensor *big = kn_randn(KN_SHAPE(300, 301), NULL, dt);
  kn_tensor *slice = kn_slice(big, 1, 1, 301, 2); /* a strided view: no copy */
  each(slice, kn_randn(KN_SHAPE(300, 150), NULL, dt), "strided slice", ud);
  kn_scope_end();
}

static void check_case(kn_tensor *x, kn_tensor *y, const char *what, void *ud) {
  kn_compiled *f = ud;
  kn_dtype dt = kn_tensor_dtype(x);
  check(f, float_sweep, x, y, rtol_of(dt), atol_of(dt), what);
}

static void layouts(kn_dtype dt) {
  kn_compiled *f = compile_sweep(float_fn, KN_DYNAMIC_FALSE);
  layout_cases(dt, check_case, f);
  kn_compiled_free(f);
}

Test(inductor_sweep, float32_layouts, .init = setup) { layouts(KN_FLOAT32); }
Test(inductor_sweep, float64_layouts, .init = setup) { layouts(KN_FLOAT64); }

Test(inductor_sweep, int64_and_bool, .init = setup) {
  kn_compiled *f = compile_sweep(int_fn, KN_DYNAMIC_FALSE);
  kn_scope_begin();
  kn_tensor *x = kn_randint(-50, 50, KN_SHAPE(6, 9), NULL, KN_INT64);
  kn_tensor *y = kn_randint(-50, 50, KN_SHAPE(6, 9), NULL, KN_INT64);
  check(f, int_sweep, x, y, 0, 0, "int64");
  check(f, int_sweep, kn_t(kn_randint(-9, 9, KN_SHAPE(9, 6), NULL, KN_INT64)), y, 0, 0,
        "int64 transposed");
  kn_scope_end();
  kn_compiled_free(f);
}

/* Sizes 9, 11 and 14 rows: the second call compiles a dynamic program, the
** third reuses it (two shared objects in the cache, not three). */
Test(inductor_sweep, dynamic_sizes_share_one_program, .init = setup) {
  kn_compiled *f = compile_sweep(float_fn, KN_DYNAMIC_AUTO);
  kn_scope_begin();
  int64_t rows[3] = {9, 11, 14};
  for (int i = 0; i < 3; i++) {
    int64_t sz[2] = {rows[i], 13};
    char what[64];
    snprintf(what, sizeof what, "dynamic %lldx13", (long long)rows[i]);
    check(f, float_sweep, kn_randn(2, sz, NULL, KN_FLOAT32), kn_randn(2, sz, NULL, KN_FLOAT32),
          1e-5, 1e-6, what);
  }
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(ind_count(getenv("KILN_CACHE_DIR"), ".so"), 2);
}

/* ---- the scalar target as the reference ----------------------------------------
** Each case compiled twice: with the "c" target (OpenMP, vector ABI) and
** with "c_scalar" (plain scalar C, its own compiler flags: no -fopenmp),
** selected by KILN_INDUCTOR_TARGET at each call (a static compile per
** shape). The scalar results are compared with eager under the sweep's
** tolerances and with the "c" results bit for bit: both run the same
** formulas, the same vector-math functions lane by lane and the same
** reduction order, without FP contraction. float64 layouts run in every
** build; float32 and the int64/bool sweep with KILN_TEST_SWEEP_ALL=1. */
static kn_value call_on(kn_compiled *f, const char *target, kn_tensor *x, kn_tensor *y) {
  bool scalar = !strcmp(target, "c_scalar");
  setenv("KILN_INDUCTOR_TARGET", target, 1);
  if (scalar) setenv("KILN_CFLAGS", "-O0 -ffp-contract=off", 1);
  kn_value out, args[2] = {kn_vtensor(x), kn_vtensor(y)};
  kn_status st = kn_call(f, args, 2, &out);
  unsetenv("KILN_INDUCTOR_TARGET");
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
  cr_assert_eq(st, KN_OK, "%s target: %s", target, kn_last_error());
  cr_assert_eq(out.kind, KN_VTUPLE);
  return out;
}

typedef struct diff { kn_compiled *c, *scalar; sweep_fn ref; } diff;

static void differential_case(kn_tensor *x, kn_tensor *y, const char *what, void *ud) {
  diff *d = ud;
  kn_dtype dt = kn_tensor_dtype(x);
  bool exact = dt != KN_FLOAT32 && dt != KN_FLOAT64;
  kn_value oc = call_on(d->c, "c", x, y), os = call_on(d->scalar, "c_scalar", x, y);
  sweep s = {.n = 0};
  d->ref(&s, x, y);
  cr_assert_eq(os.n, s.n);
  cr_assert_eq(oc.n, s.n);
  for (int i = 0; i < s.n; i++) {
    char label[160];
    snprintf(label, sizeof label, "%s: %s: c_scalar vs eager", what, s.name[i]);
    cr_expect(ind_close(os.u.items[i].u.t, s.out[i], exact ? 0 : rtol_of(dt), exact ? 0 : atol_of(dt),
                        label), "%s", label);
    snprintf(label, sizeof label, "%s: %s: c_scalar vs c", what, s.name[i]);
    cr_expect(ind_close(os.u.items[i].u.t, oc.u.items[i].u.t, 0, 0, label), "%s", label);
  }
  kn_value_release(oc);
  kn_value_release(os);
}

static bool sweep_all(void) {
  const char *v = getenv("KILN_TEST_SWEEP_ALL");
  return v && *v && *v != '0';
}

static void differential(kn_fn fn, sweep_fn ref, kn_dtype dt) {
  diff d = {compile_sweep(fn, KN_DYNAMIC_FALSE), compile_sweep(fn, KN_DYNAMIC_FALSE), ref};
  if (ref == float_sweep) {
    layout_cases(dt, differential_case, &d);
  } else {
    kn_scope_begin();
    kn_tensor *x = kn_randint(-50, 50, KN_SHAPE(6, 9), NULL, KN_INT64);
    kn_tensor *y = kn_randint(-50, 50, KN_SHAPE(6, 9), NULL, KN_INT64);
    differential_case(x, y, "int64", &d);
    differential_case(kn_t(kn_randint(-9, 9, KN_SHAPE(9, 6), NULL, KN_INT64)), y,
                      "int64 transposed", &d);
    kn_scope_end();
  }
  kn_compiled_free(d.c);
  kn_compiled_free(d.scalar);
}

Test(inductor_sweep, scalar_target_float64_layouts, .init = setup) {
  differential(float_fn, float_sweep, KN_FLOAT64);
}
Test(inductor_sweep, scalar_target_float32_layouts, .init = setup) {
  if (!sweep_all()) cr_skip_test("KILN_TEST_SWEEP_ALL is not set");
  differential(float_fn, float_sweep, KN_FLOAT32);
}
Test(inductor_sweep, scalar_target_int64_and_bool, .init = setup) {
  if (!sweep_all()) cr_skip_test("KILN_TEST_SWEEP_ALL is not set");
  differential(int_fn, int_sweep, KN_INT64);
}
