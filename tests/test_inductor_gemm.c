/*
** tests/test_inductor_gemm.c: GEMM and convolution extern steps with fused
** epilogues (the scheduler's epilogue pass, sched_epi.c; gemm.c runs them).
**
** Each function is compiled with "inductor" and compared with the same
** function run eagerly: bit for bit where the compiled code computes the
** same math in the same order (one block of rows: the same GEMM call, then
** the same formulas; relu, casts, adds), otherwise within a stated
** tolerance (transcendentals: the generated code's vector math against
** the eager kernels', 1e-6 relative in float32, 1e-12 in float64; several
** blocks of rows: oneDNN may sum in another order, 1e-5). The generated
** program is checked too: how many epilogue kernels (`(epilogue of`,
** `rt->ext_epi(`), how many kernel functions in all, and whether the GEMM's
** output is computed in the epilogue's output buffer (never materialised:
** `is computed in it`). The c_scalar target runs the same functions as a
** differential check. A graph of 300 linear + relu pairs is planned with
** every pair fused, the pass visiting each node a bounded number of times.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph_util.h"
#include "inductor/inductor.h"
#include "inductor_util.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"

TestSuite(inductor_gemm, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown,
          .timeout = 300);

static kn_tensor *rnd(kn_dtype dt, uint64_t seed, int ndim, const int64_t *sizes) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(ndim, sizes, g, dt);
  kn_generator_free(g);
  return t;
}

/* ---- the functions: x [M, K], w [N, K], b [N], r [M, N] ----------------------------- */
typedef kn_tensor *(*fn4)(kn_tensor *, kn_tensor *, kn_tensor *, kn_tensor *);

static kn_tensor *lin(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_linear(x, w, b); }
static kn_tensor *lin_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)r;
  return kn_relu(lin(x, w, b));
}
#define ACT(name, expr)                                                                \
  static kn_tensor *name(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {    \
    (void)r;                                                                           \
    kn_tensor *y = lin(x, w, b);                                                       \
    return expr;                                                                       \
  }
ACT(lin_gelu, kn_gelu(y, KN_GELU_NONE))
ACT(lin_gelu_tanh, kn_gelu(y, KN_GELU_TANH))
ACT(lin_sigmoid, kn_sigmoid(y))
ACT(lin_silu, kn_silu(y))
ACT(lin_tanh, kn_tanh(y))
ACT(lin_exp, kn_exp(y))
ACT(lin_swish, kn_mul(y, kn_sigmoid(y)))
ACT(lin_erf, kn_erf(y))
/* mm without a bias, then the bias add and relu in the epilogue */
static kn_tensor *mm_bias_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)r;
  return kn_relu(kn_add(kn_mm(x, kn_t(w)), b));
}
/* a chain reading a second tensor: gelu(x @ w^T) * r */
static kn_tensor *gelu_mul(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)b;
  return kn_mul(kn_gelu(kn_mm(x, kn_t(w)), KN_GELU_NONE), r);
}
/* a residual add: relu(linear(x)) + r */
static kn_tensor *residual(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  return kn_add(lin_relu(x, w, b, r), r);
}
/* a cast: relu(linear(x)) as bfloat16 */
static kn_tensor *cast_bf16(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  return kn_to(lin_relu(x, w, b, r), KN_BFLOAT16);
}
/* addmm with alpha and beta and a full [M, N] self */
static kn_tensor *addmm_full(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)b;
  return kn_relu(kn_addmm(r, x, kn_t(w), kn_float(0.5), kn_float(2.0)));
}
/* addmm whose self is one column of r, [M, 1]: broadcast along the rows of
** the output (the bias copied into each row element by element, stride 0) */
static kn_tensor *addmm_column(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)b;
  return kn_relu(kn_addmm(kn_narrow(r, 1, 1, 1), x, kn_t(w), kn_float(0.5), kn_float(2.0)));
}
/* several users of one GEMM's output: y = x @ w^T feeds relu's epilogue
** and, later, the epilogue of a second GEMM (a residual add of y) */
static kn_tensor *two_users(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)b;
  (void)r;
  kn_tensor *y = kn_mm(x, kn_t(w));
  return kn_add(kn_mm(kn_relu(y), w), y);
}
/* two kernels reading one GEMM's output (each read by a GEMM of its own,
** so not one horizontal loop) */
static kn_tensor *two_heads(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)r;
  kn_tensor *y = lin(x, w, b);
  return kn_add(kn_mm(kn_relu(y), w), kn_mm(kn_sigmoid(y), w));
}
/* a transposed input: (x^T)^T @ w^T with x given as [K, M] */
static kn_tensor *xt_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor *r) {
  (void)r;
  return kn_relu(kn_add(kn_mm(kn_t(x), kn_t(w)), b));
}

/* ---- checking ---------------------------------------------------------------------- */
static int count(const char *t, const char *s) {
  int n = 0;
  for (const char *p = t ? strstr(t, s) : NULL; p; p = strstr(p + 1, s)) n++;
  return n;
}

typedef struct want {
  int epilogues; /* epilogue kernels (and rt->ext_epi calls) in the program */
  int kernels;   /* kernel functions in all */
  int in_place;  /* GEMM outputs computed in their epilogue's output buffer */
} want;

typedef struct sizes { int64_t M, K, N; } sizes;

static void inputs(kn_dtype dt, sizes s, bool xt, kn_tensor **in) {
  in[0] = xt ? rnd(dt, 1, 2, (int64_t[]){s.K, s.M}) : rnd(dt, 1, 2, (int64_t[]){s.M, s.K});
  in[1] = rnd(dt, 2, 2, (int64_t[]){s.N, s.K});
  in[2] = rnd(dt, 3, 1, (int64_t[]){s.N});
  in[3] = rnd(dt, 4, 2, (int64_t[]){s.M, s.N});
}

/* f compiled for target (NULL: the default) on inputs of dtype dt equals
** f run eagerly within tol (0: bit for bit); the program has what w says.
** Returns the compiled result (autoreleased in the caller's scope). */
static kn_tensor *check_on(fn4 f, const char *name, const char *target, kn_dtype dt, sizes s,
                           bool xt, double tol, want w) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  if (target) setenv("KILN_INDUCTOR_TARGET", target, 1);
  char *tdir = kn_test_trace_start();
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *c = kn_compile_tensor_fn((void (*)(void))f, 4, name, __FILE__, __LINE__, &o);
  kn_tensor *in[4];
  inputs(dt, s, xt, in);
  kn_tensor *y = kn_call_t(c, in[0], in[1], in[2], in[3]);
  unsetenv("KILN_INDUCTOR_TARGET");
  cr_assert(y, "%s: %s", name, kn_last_error());
  cr_expect(ind_close(y, f(in[0], in[1], in[2], in[3]), tol, tol, name), "%s", name);
  char *t = kn_test_trace_text();
  cr_assert(t);
  cr_expect_eq(count(t, "(epilogue of "), w.epilogues, "%s: epilogue kernels", name);
  cr_expect_eq(count(t, "rt->ext_epi(ctx"), w.epilogues, "%s: extern calls with an epilogue", name);
  cr_expect_eq(count(t, "static void kernel"), w.kernels, "%s: kernel functions", name);
  cr_expect_eq(count(t, "is computed in it"), w.in_place, "%s: GEMMs computed in place", name);
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  kn_compiled_free(c);
  ind_rm(dir);
  return y;
}

static void check(fn4 f, const char *name, kn_dtype dt, sizes s, double tol, want w) {
  kn_scope_begin();
  check_on(f, name, NULL, dt, s, false, tol, w);
  kn_scope_end();
}

static const sizes small = {33, 17, 9};
static const want one = {1, 1, 1};

Test(inductor_gemm, linear_relu_float64_bit_exact) { check(lin_relu, "lin_relu", KN_FLOAT64, small, 0, one); }
Test(inductor_gemm, linear_relu_float32_bit_exact) { check(lin_relu, "lin_relu", KN_FLOAT32, small, 0, one); }
/* 2000 float32 columns: blocks of 131 rows (1 MiB), three for 300 rows */
Test(inductor_gemm, linear_relu_float32_several_row_blocks) {
  check(lin_relu, "lin_relu", KN_FLOAT32, (sizes){300, 70, 2000}, 1e-5, one);
}

#define ACT_TEST(f)                                                                   \
  Test(inductor_gemm, f##_float32) { check(f, #f, KN_FLOAT32, (sizes){40, 30, 20}, 1e-6, one); } \
  Test(inductor_gemm, f##_float64) { check(f, #f, KN_FLOAT64, (sizes){40, 30, 20}, 1e-12, one); }
ACT_TEST(lin_gelu)
ACT_TEST(lin_gelu_tanh)
ACT_TEST(lin_sigmoid)
ACT_TEST(lin_silu)
ACT_TEST(lin_tanh)
ACT_TEST(lin_exp)
ACT_TEST(lin_swish)
ACT_TEST(lin_erf)

Test(inductor_gemm, bias_add_and_relu_after_mm) { check(mm_bias_relu, "mm_bias_relu", KN_FLOAT32, small, 0, one); }
Test(inductor_gemm, chain_gelu_times_other_tensor) {
  check(gelu_mul, "gelu_mul", KN_FLOAT64, small, 1e-12, one);
}
Test(inductor_gemm, residual_add) { check(residual, "residual", KN_FLOAT32, small, 0, one); }
/* a cast changes the dtype: the output has its own buffer, the GEMM's too */
Test(inductor_gemm, cast_to_bfloat16) {
  check(cast_bf16, "cast_bf16", KN_FLOAT32, small, 0, (want){1, 1, 0});
}
Test(inductor_gemm, addmm_full_self_alpha_beta) {
  check(addmm_full, "addmm_full", KN_FLOAT64, small, 1e-12, one);
}
Test(inductor_gemm, addmm_column_self) {
  check(addmm_column, "addmm_column", KN_FLOAT32, small, 1e-6, one);
  check(addmm_column, "addmm_column", KN_FLOAT64, small, 1e-12, one);
}
/* y feeds relu's epilogue and the second GEMM's residual add: it is
** written whole (not in place); the second epilogue writes over its GEMM */
Test(inductor_gemm, gemm_output_with_several_users) {
  check(two_users, "two_users", KN_FLOAT32, (sizes){24, 16, 16}, 0, (want){2, 2, 1});
}
/* relu(y) and sigmoid(y): the first in graph order is y's epilogue, the
** other a kernel of its own reading y from memory (and written over it);
** the last add is the last GEMM's epilogue, computed in place */
Test(inductor_gemm, gemm_output_read_by_two_kernels) {
  check(two_heads, "two_heads", KN_FLOAT32, (sizes){24, 16, 16}, 1e-6, (want){2, 3, 1});
}

Test(inductor_gemm, transposed_input_and_weight) {
  kn_scope_begin();
  check_on(xt_relu, "xt_relu", NULL, KN_FLOAT32, small, true, 0, one);
  kn_scope_end();
}

/* The scalar target as a differential check: the same epilogues, the same bits. */
Test(inductor_gemm, scalar_target_same_results) {
  fn4 fs[] = {lin_relu, residual, gelu_mul, two_users};
  const char *names[] = {"lin_relu", "residual", "gelu_mul", "two_users"};
  want ws[] = {one, one, one, {2, 2, 1}};
  for (int k = 0; k < 4; k++) {
    kn_scope_begin();
    kn_tensor *a = check_on(fs[k], names[k], NULL, KN_FLOAT64, (sizes){16, 16, 16}, false, 1e-12, ws[k]);
    kn_tensor *b = check_on(fs[k], names[k], "c_scalar", KN_FLOAT64, (sizes){16, 16, 16}, false,
                            1e-12, ws[k]);
    cr_expect(ind_close(a, b, k == 2 ? 1e-13 : 0, k == 2 ? 1e-13 : 0, names[k]), "%s: c vs c_scalar",
              names[k]);
    kn_scope_end();
  }
}

/* Symbolic columns: the epilogue's row length is a symbol of the size
** table too, read before the rows are shared out (an epilogue reading only
** the GEMM's output, whose length symbol was not declared, failed to
** compile). */
Test(inductor_gemm, symbolic_columns) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *c = kn_compile_tensor_fn((void (*)(void))lin_relu, 4, "lin_relu", __FILE__, __LINE__, &o);
  const int64_t rows[3] = {5, 37, 300}, cols[3] = {40, 9, 72};
  for (int k = 0; k < 3; k++) {
    kn_scope_begin();
    kn_tensor *in[4];
    inputs(KN_FLOAT32, (sizes){rows[k], 24, cols[k]}, false, in);
    kn_tensor *y = kn_call_t(c, in[0], in[1], in[2], in[3]);
    cr_assert(y, "%s", kn_last_error());
    cr_expect(ind_close(y, lin_relu(in[0], in[1], in[2], in[3]), 1e-5, 1e-5, "lin_relu"));
    kn_scope_end();
  }
  kn_compiled_free(c);
  ind_rm(dir);
}

/* Symbolic sizes: the rows of the epilogue come from the size table. */
Test(inductor_gemm, symbolic_rows) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *c = kn_compile_tensor_fn((void (*)(void))residual, 4, "residual", __FILE__, __LINE__, &o);
  const int64_t rows[3] = {5, 37, 300};
  for (int k = 0; k < 3; k++) {
    kn_scope_begin();
    char *tdir = k == 0 ? kn_test_trace_start() : NULL;
    kn_tensor *in[4];
    inputs(KN_FLOAT32, (sizes){rows[k], 24, 40}, false, in);
    kn_tensor *y = kn_call_t(c, in[0], in[1], in[2], in[3]);
    cr_assert(y, "%s", kn_last_error());
    cr_expect(ind_close(y, residual(in[0], in[1], in[2], in[3]), 1e-5, 1e-5, "residual"));
    if (tdir) {
      char *t = kn_test_trace_text();
      cr_expect_eq(count(t, "rt->ext_epi(ctx"), 1, "one GEMM with its epilogue:\n%s", t);
      cr_expect(count(t, "const int64_t S0 = s[0];") >= 1, "the epilogue reads the rows from s");
      free(t);
      kn_trace_disable();
      kn_test_rmdir(tdir);
    }
    kn_scope_end();
  }
  kn_compiled_free(c);
  ind_rm(dir);
}

static kn_tensor *conv_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  return kn_relu(kn_conv2d(x, w, b, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1}, 1));
}
static kn_tensor *bmm_gelu(kn_tensor *a, kn_tensor *b, kn_tensor *r) {
  return kn_add(kn_gelu(kn_bmm(a, b), KN_GELU_TANH), r);
}

/* f (3 inputs) compiled equals eager within tol; one epilogue, no other kernel. */
static void check3(kn_tensor *(*f)(kn_tensor *, kn_tensor *, kn_tensor *), const char *name,
                   kn_tensor *a, kn_tensor *b, kn_tensor *r, double tol) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  char *tdir = kn_test_trace_start();
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *c = kn_compile_tensor_fn((void (*)(void))f, 3, name, __FILE__, __LINE__, &o);
  kn_tensor *y = kn_call_t(c, a, b, r);
  cr_assert(y, "%s", kn_last_error());
  cr_expect(ind_close(y, f(a, b, r), tol, tol, name));
  char *t = kn_test_trace_text();
  cr_expect_eq(count(t, "rt->ext_epi(ctx"), 1, "%s", name);
  cr_expect_eq(count(t, "static void kernel"), 1, "%s", name);
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  kn_compiled_free(c);
  ind_rm(dir);
}

Test(inductor_gemm, conv_relu_float32) {
  kn_scope_begin();
  check3(conv_relu, "conv_relu", rnd(KN_FLOAT32, 1, 4, (int64_t[]){2, 3, 9, 7}),
         rnd(KN_FLOAT32, 2, 4, (int64_t[]){5, 3, 3, 3}), rnd(KN_FLOAT32, 3, 1, (int64_t[]){5}), 0);
  kn_scope_end();
}

Test(inductor_gemm, bmm_gelu_residual_float64) {
  kn_scope_begin();
  check3(bmm_gelu, "bmm_gelu", rnd(KN_FLOAT64, 1, 3, (int64_t[]){3, 7, 5}),
         rnd(KN_FLOAT64, 2, 3, (int64_t[]){3, 5, 6}), rnd(KN_FLOAT64, 3, 3, (int64_t[]){3, 7, 6}),
         1e-12);
  kn_scope_end();
}

/* Training a two-layer MLP: the forward's first GEMM carries relu as its
** epilogue (the second relu joins the loss's sum: one reduction kernel),
** the backward's grad-input GEMM carries threshold_backward; gradients
** equal eager's. */
static kn_tensor *mlp2(kn_tensor *x, kn_tensor *w1, kn_tensor *w2) {
  return kn_sum(kn_relu(kn_mm(kn_relu(kn_mm(x, w1)), w2)));
}

Test(inductor_gemm, training_forward_and_backward_epilogues) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *c = kn_compile_tensor_fn((void (*)(void))mlp2, 3, "mlp2", __FILE__, __LINE__, &o);
  kn_tensor *p[3], *e[3];
  const int64_t sz[3][2] = {{17, 11}, {11, 13}, {13, 7}};
  for (int i = 0; i < 3; i++) {
    p[i] = rnd(KN_FLOAT64, (uint64_t)i + 1, 2, sz[i]);
    e[i] = kn_detach(p[i]);
    kn_set_requires_grad(p[i], true);
    kn_set_requires_grad(e[i], true);
  }
  char *tdir = kn_test_trace_start();
  kn_tensor *l = kn_call_t(c, p[0], p[1], p[2]), *le = mlp2(e[0], e[1], e[2]);
  cr_assert(l, "%s", kn_last_error());
  cr_assert_eq(kn_backward(l, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(le, NULL), KN_OK);
  char *t = kn_test_trace_text();
  cr_expect_eq(count(t, "rt->ext_epi(ctx"), 2, "a forward and a backward epilogue");
  cr_expect_eq(count(t, "threshold_backward_1 (epilogue of mm"), 1, "the backward's epilogue");
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  cr_expect(ind_close(l, le, 1e-12, 1e-12, "loss"));
  for (int i = 0; i < 3; i++) cr_expect(ind_close(kn_grad(p[i]), kn_grad(e[i]), 1e-12, 1e-12, "grad"));
  kn_compiled_free(c);
  kn_scope_end();
  ind_rm(dir);
}

/* ---- the pass is linear -------------------------------------------------------------- */
/* A graph of n layers h = relu(mm(h, w)) over one [8, 8] weight. */
static kn__graph *layers(int n) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = tmeta(KN_FLOAT32, 2, (int64_t[]){8, 8});
  kn__gnode *h = kn__graph_placeholder(g, "x", &m), *w = kn__graph_placeholder(g, "w", &m);
  for (int i = 0; i < n; i++) {
    kn__garg mm[2] = {KN_GA_T(h), KN_GA_T(w)};
    h = kn__graph_call(g, &kn__ops[KN_OP_MM], 2, mm, 1, &m);
    kn__garg r[1] = {KN_GA_T(h)};
    h = kn__graph_call(g, &kn__ops[KN_OP_RELU], 1, r, 1, &m);
  }
  kn__graph_output(g, 1, (kn__gref[]){{h, 0}});
  return g;
}

Test(inductor_gemm, three_hundred_layers_fuse_in_linear_work) {
  long work[2];
  int nodes[2];
  const int n[2] = {100, 300};
  for (int k = 0; k < 2; k++) {
    kn__graph *g = layers(n[k]);
    cr_assert(g);
    kn__ind_plan p;
    cr_assert_eq(kn__ind_plan_build(g, true, &p), KN_OK, "%s", kn_last_error());
    cr_expect_eq(p.nepilogues, n[k], "every relu is its mm's epilogue");
    cr_expect_eq(p.nkernels, 0, "no kernel of its own");
    work[k] = p.epi_work;
    nodes[k] = p.nnodes;
    kn__ind_plan_free(&p);
    kn__graph_free(g);
  }
  /* one visit per pointwise node: three times the layers, three times the work */
  cr_expect_eq(work[0], n[0], "visited %ld nodes for %d layers", work[0], n[0]);
  cr_expect_eq(work[1], n[1], "visited %ld nodes for %d layers", work[1], n[1]);
  cr_expect(work[1] <= nodes[1], "work %ld, nodes %d", work[1], nodes[1]);
}
