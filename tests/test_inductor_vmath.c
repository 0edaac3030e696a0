/*
** tests/test_inductor_vmath.c: compiled transcendental functions agree with
** eager ones bit for bit. Generated code computes exp, log, tanh, erf, gelu,
** pow, ... with the vector-math table the eager kernels use (each ISA's:
** kiln's own float32 kernels, SLEEF, or libm for the scalar table), so for
** every transcendental op, in float32 and float64, alone and fused into a
** chain, compiled at the default -O3 (vectorised loops call the vector
** versions, remainders the scalar ones), the results must be equal to the
** eager op's on the same inputs: the same bits, or NaN at the same places.
** The inputs cover the ranges the kernels treat specially (0, -0, +-inf,
** NaN, denormals, |x| > 8192 for sin/cos/tan, |x| > 88 for sinh/cosh, exp's
** overflow and underflow) and a random spread; 1003 elements, so vector
** loops have remainders. One compiled program serves every ISA: the table is
** bound at each call, so the test runs it under each table this CPU has.
*/
#include "inductor_util.h"
#include "ops/vmath.h"
#include "support/files.h"

#define N 1003
#define MAXOUT 64

typedef struct outs { kn_tensor *t[MAXOUT]; const char *name[MAXOUT]; int n; } outs;

static void put(outs *o, const char *name, kn_tensor *t) {
  o->name[o->n] = name;
  o->t[o->n++] = t;
}

/* Every transcendental op (and the composites built on them), alone. */
static void unary(outs *o, kn_tensor *x) {
  put(o, "exp", kn_exp(x));
  put(o, "exp2", kn_exp2(x));
  put(o, "expm1", kn_expm1(x));
  put(o, "log", kn_log(x));
  put(o, "log2", kn_log2(x));
  put(o, "log10", kn_log10(x));
  put(o, "log1p", kn_log1p(x));
  put(o, "sqrt", kn_sqrt(x));
  put(o, "rsqrt", kn_rsqrt(x));
  put(o, "sin", kn_sin(x));
  put(o, "cos", kn_cos(x));
  put(o, "tan", kn_tan(x));
  put(o, "tanh", kn_tanh(x));
  put(o, "sinh", kn_sinh(x));
  put(o, "cosh", kn_cosh(x));
  put(o, "asin", kn_asin(x));
  put(o, "acos", kn_acos(x));
  put(o, "atan", kn_atan(x));
  put(o, "erf", kn_erf(x));
  put(o, "erfc", kn_erfc(x));
  put(o, "sigmoid", kn_sigmoid(x));
  put(o, "silu", kn_silu(x));
  put(o, "gelu", kn_gelu(x, KN_GELU_NONE));
  put(o, "gelu_tanh", kn_gelu(x, KN_GELU_TANH));
}

static void binary(outs *o, kn_tensor *x, kn_tensor *y) {
  put(o, "pow", kn_pow(kn_abs(x), y));
  put(o, "pow_neg_base", kn_pow(x, kn_floor(y)));
  put(o, "pow_scalar", kn_pow_scalar(x, kn_float(0.5)));
  put(o, "pow_square", kn_pow_scalar(x, kn_float(2.0)));
  put(o, "gelu_backward", kn_gelu_backward(y, x, KN_GELU_NONE));
  put(o, "gelu_tanh_backward", kn_gelu_backward(y, x, KN_GELU_TANH));
}

/* Fused: each function inside a loop with its neighbours. */
static void chains(outs *o, kn_tensor *x, kn_tensor *y) {
  kn_tensor *h = kn_mul_scalar(x, kn_float(0.5));
  put(o, "chain_log_exp", kn_add_scalar(kn_log1p(kn_exp(h)), kn_float(1.0)));
  put(o, "chain_tanh_sin", kn_mul(kn_tanh(kn_sin(h)), y));
  put(o, "chain_erf_sqrt", kn_erf(kn_sqrt(kn_abs(kn_sub(h, y)))));
  put(o, "chain_sigmoid_cos", kn_sigmoid(kn_add(kn_cos(x), kn_expm1(kn_neg(kn_abs(y))))));
  /* a row loop: x read transposed (59 rows of 17, blocks of each row) */
  kn_tensor *xt = kn_t(kn_reshape(x, KN_SHAPE(17, 59)));
  put(o, "chain_rows_tanh_exp", kn_mul(kn_tanh(xt), kn_exp(kn_mul_scalar(xt, kn_float(0.25)))));
}

static void all_ops(outs *o, kn_tensor *x, kn_tensor *y) {
  unary(o, x);
  binary(o, x, y);
  chains(o, x, y);
}

static kn_value fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  outs o = {.n = 0};
  all_ops(&o, args[0].u.t, args[1].u.t);
  kn_value items[MAXOUT];
  for (int i = 0; i < o.n; i++) items[i] = kn_vtensor(o.t[i]);
  return kn_tuple(o.n, items);
}

/* x: special values first, then a spread over [-12, 12] and wider. */
static void fill_x(double *v) {
  static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-40, -1e-40, 1e-310,
                                   1.0, -1.0, 0.5, -0.5, 88.5, -88.5, 89.9, -103.5, 104.5,
                                   700.0, -745.5, 709.9, 9000.0, -9000.0, 8191.5, 1e5, 0.99,
                                   -0.99, 1e-7, 3.0, 4.5, -4.5, 0.625, 0.875, 10.5, 1e300};
  int ns = (int)(sizeof special / sizeof special[0]);
  unsigned s = 12345u;
  for (int i = 0; i < N; i++) {
    s = s * 1103515245u + 12345u;
    double u = (double)(s >> 8) / (double)(1u << 24); /* [0, 1) */
    v[i] = i < ns ? special[i] : i % 7 == 0 ? (u - 0.5) * 200.0 : (u - 0.5) * 24.0;
  }
}

static void fill_y(double *v) {
  unsigned s = 777u;
  for (int i = 0; i < N; i++) {
    s = s * 1103515245u + 12345u;
    v[i] = ((double)(s >> 8) / (double)(1u << 24) - 0.5) * 6.0;
  }
}

static kn_tensor *input(kn_dtype dt, void (*fill)(double *)) {
  double v[N];
  fill(v);
  return kn_to(kn_from_doubles(v, KN_SHAPE(N)), dt);
}

/* Same bits (NaN: NaN). */
static bool same_bits(kn_tensor *got, kn_tensor *want, const char *what) {
  if (!got || !want || kn_numel(got) != kn_numel(want) ||
      kn_tensor_dtype(got) != kn_tensor_dtype(want)) {
    cr_log_error("%s: missing result or other shape/dtype (%s)", what, kn_last_error());
    return false;
  }
  kn_tensor *g = kn_contiguous(kn_to(got, KN_FLOAT64)), *w = kn_contiguous(kn_to(want, KN_FLOAT64));
  const double *a = kn_data(g), *b = kn_data(w);
  for (int64_t i = 0; i < kn_numel(g); i++) {
    if (isnan(a[i]) && isnan(b[i])) continue;
    if (memcmp(&a[i], &b[i], sizeof a[i]) != 0) {
      cr_log_error("%s: element %lld: compiled %a, eager %a", what, (long long)i, a[i], b[i]);
      return false;
    }
  }
  return true;
}

/* Run f under every ISA table this CPU supports; compare each output. */
static void agree(kn_dtype dt) {
  kn_compile_options opt = {.backend = "inductor", .fullgraph = true};
  kn_compiled *f = kn_compile_fn(fn, NULL, 2, "vmath_ops", __FILE__, __LINE__, &opt);
  cr_assert(f);
  kn_scope_begin();
  kn_tensor *x = input(dt, fill_x), *y = input(dt, fill_y);
  int isas = 0;
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    if (!kn__vmath_table((kn__isa)isa)) continue;
    cr_assert_eq(kn__vmath_force((kn__isa)isa), KN_OK);
    isas++;
    kn_value out, args[2] = {kn_vtensor(x), kn_vtensor(y)};
    cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
    outs ref = {.n = 0};
    all_ops(&ref, x, y);
    cr_assert_eq(out.kind, KN_VTUPLE);
    cr_assert_eq(out.n, ref.n);
    for (int i = 0; i < ref.n; i++) {
      char what[160];
      snprintf(what, sizeof what, "%s %s [%s]", kn_dtype_name(dt), ref.name[i],
               kn__isa_name((kn__isa)isa));
      cr_expect(same_bits(out.u.items[i].u.t, ref.t[i], what), "%s", what);
    }
    kn_value_release(out);
  }
  cr_assert(isas >= 1);
  cr_assert_eq(kn__vmath_force(KN__ISA_COUNT), KN_OK);
  kn_scope_end();
  kn_compiled_free(f);
}

static char cache[64];
static void setup(void) { ind_cache_dir(cache, sizeof cache); }
static void teardown(void) { ind_rm(cache); }

TestSuite(inductor_vmath, .init = setup, .fini = teardown, .timeout = 300);

Test(inductor_vmath, float32_bitwise_equal_to_eager) { agree(KN_FLOAT32); }

Test(inductor_vmath, float64_bitwise_equal_to_eager) { agree(KN_FLOAT64); }

/* The generated source of the compiled fn (the cache's one .c file). */
static char *generated_source(void) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "cat %s/inductor/*.c", cache);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t cap = 1 << 20, n = 0;
  char *s = malloc(cap);
  cr_assert_not_null(s);
  for (size_t r; (r = fread(s + n, 1, cap - 1 - n, p)) > 0;) n += r;
  s[n] = 0;
  pclose(p);
  return s;
}

/* The functions are computed inline (no extern call of the eager op), a
** block at a time: the kernels call the table's array functions on blocks
** (KN_VMT()->f32[<op>](vmoN, <operand block>, bn)): an operand read from an
** input, or computed for the block by an earlier call, in place. */
Test(inductor_vmath, generated_code_calls_the_vector_math_functions) {
  kn_compile_options opt = {.backend = "inductor", .fullgraph = true};
  kn_compiled *f = kn_compile_fn(fn, NULL, 2, "vmath_ops", __FILE__, __LINE__, &opt);
  kn_scope_begin();
  kn_value out, args[2] = {kn_vtensor(input(KN_FLOAT32, fill_x)),
                           kn_vtensor(input(KN_FLOAT32, fill_y))};
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  kn_value_release(out);
  kn_scope_end();
  kn_compiled_free(f);
  char *src = generated_source();
  const struct { const char *table; int op; } calls[] = {
      {"f32", KN__VM_EXP}, {"f32", KN__VM_LOG1P}, {"f32", KN__VM_ERFC}, {"f32", KN__VM_SINH},
      {"f32b", KN__VM_POW}, {"f32b", KN__VM_GELU_TANH_BW}};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    char call[64];
    snprintf(call, sizeof call, "KN_VMT()->%s[%d](vmo", calls[i].table, calls[i].op);
    cr_expect(strstr(src, call), "generated code lacks %s", call);
  }
  /* log1p(exp(h)): log1p reads exp's block; exp(x) alone reads the input */
  cr_expect(kn_test_count_of(src, "](vmo") >= 30, "%s", src);
  cr_expect(strstr(src, "KN_VMT()->f32[0](vmo") && strstr(src, ", in0 + b, bn);"), "%s", src);
  cr_expect(strstr(src, "for (int64_t jb = 0; jb < len; jb += KN_VB)"), "%s", src);
  /* no per-element call is left in a flat or row loop */
  cr_expect(!strstr(src, "(float)(kn_vm_") && !strstr(src, "(double)(kn_vm_"), "%s", src);
  free(src);
}

/* exp(x / 2) over rows of 17 x 59 and its row sums: one reduction group. */
static kn_tensor *exp_rows(kn_tensor *x, double scale) {
  return kn_exp(kn_mul_scalar(kn_reshape(x, KN_SHAPE(17, 59)), kn_float(scale)));
}
static kn_tensor *row_sums(kn_tensor *e) { return kn_sum_dims(e, (const int64_t[]){-1}, 1, false); }
static kn_tensor *all_sums(kn_tensor *e) { return kn_sum_dims(e, (const int64_t[]){0, 1}, 2, false); }
static kn_value exp_sum_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *e = exp_rows(args[0].u.t, 0.5);
  kn_tensor *e2 = exp_rows(args[0].u.t, 0.25); /* a group reducing both dims */
  kn_value items[5] = {kn_vtensor(e), kn_vtensor(row_sums(e)),
                       kn_vtensor(row_sums(exp_rows(args[0].u.t, -0.5))), kn_vtensor(e2),
                       kn_vtensor(all_sums(e2))};
  return kn_tuple(5, items);
}

/* A vector-math member of a reduction group is computed for a block of up
** to 256 elements of the row by one call of the table's array function (the
** sum's block loop; written straight into the output that keeps it, or into
** a block on the stack when nothing outside reads it, as exp(-x / 2)), the
** remainder (59 = 48 + 11) by the scalar version: the exp values are
** eager's, bit for bit, under every table; the sums agree within float
** tolerance (another summation order). */
static void exp_in_group(kn_dtype dt) {
  kn_compile_options opt = {.backend = "inductor", .fullgraph = true};
  kn_compiled *f = kn_compile_fn(exp_sum_fn, NULL, 1, "exp_sum", __FILE__, __LINE__, &opt);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_scope_begin();
  kn_value args[1] = {kn_vtensor(input(dt, fill_y))};
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    if (!kn__vmath_table((kn__isa)isa)) continue;
    cr_assert_eq(kn__vmath_force((kn__isa)isa), KN_OK);
    kn_value out;
    kn_tensor *e = exp_rows(args[0].u.t, 0.5), *sum = row_sums(e);
    kn_tensor *sum_neg = row_sums(exp_rows(args[0].u.t, -0.5));
    kn_tensor *e2 = exp_rows(args[0].u.t, 0.25), *sum2 = all_sums(e2);
    cr_assert_eq(kn_call(f, args, 1, &out), KN_OK, "%s", kn_last_error());
    cr_assert_eq(out.kind, KN_VTUPLE);
    char what[96];
    snprintf(what, sizeof what, "%s exp in a group [%s]", kn_dtype_name(dt),
             kn__isa_name((kn__isa)isa));
    cr_expect(same_bits(out.u.items[0].u.t, e, what), "%s", what);
    cr_expect(ind_close(out.u.items[1].u.t, sum, 1e-5, 1e-6, "row sums of exp"));
    cr_expect(ind_close(out.u.items[2].u.t, sum_neg, 1e-5, 1e-6, "row sums of exp(-x / 2)"));
    cr_expect(same_bits(out.u.items[3].u.t, e2, what), "%s (x / 4, both dims)", what);
    cr_expect(ind_close(out.u.items[4].u.t, sum2, 1e-5, 1e-6, "sum of exp(x / 4)"));
    kn_value_release(out);
  }
  cr_assert_eq(kn__vmath_force(KN__ISA_COUNT), KN_OK);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(inductor_vmath, vector_math_in_reduction_groups_runs_on_blocks) {
  exp_in_group(KN_FLOAT32);
  exp_in_group(KN_FLOAT64);
  char cmd[400];
  snprintf(cmd, sizeof cmd,
           "test \"$(cat %s/inductor/*.c | grep -c '^static void kernel')\" = 4 && "
           "grep -q 'KN_VMT()->f32\\[[0-9]*\\](' %s/inductor/*.c && "
           "grep -q 'KN_VMT()->f64\\[[0-9]*\\](' %s/inductor/*.c", cache, cache, cache);
  cr_expect_eq(system(cmd), 0, "exp and sums: want two group kernels per dtype, exp on blocks");
}
