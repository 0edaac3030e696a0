/*
** tests/test_inductor_mlp.c: what the compiled training step of an MLP
** runs. A sum over leading dims that no pointwise node reads (a bias
** gradient) is the eager op's vectorised column sum, not a generated
** reduction walking strided columns; SGD's `param - grad * lr` with a
** float64 zero-dim lr is one generated kernel (torch's category rule: the
** dimensioned float32 tensors' type wins). Both are compared with the eager
** ops bit for bit (the same kernels and formulas), and the generated code
** with literal counts of kernels and extern calls. The backend partitions
** with min-cut, whose ties go to the value downstream of a GEMM: the
** backward's saved inputs are compared with literals and the gradients
** with eager's (float64 rtol 1e-12, atol 1e-12; float32 rtol 1e-5, atol
** 1e-6: the loss's mean sums in another order).
*/
#include "inductor_util.h"
#include "kiln/autograd.h"
#include "kiln/log.h"
#include "kiln/optim.h"
#include "kiln/profiler.h"
#include "support/log_capture.h"
#include "support/files.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(5);
}
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

/* Kernels, extern calls and extern calls of `op` in the generated code. */
static void expect_code(int kernels, int exts, const char *op, int op_exts) {
  char *src = kn_test_inductor_sources(cache);
  char pat[80];
  snprintf(pat, sizeof pat, "extern kiln.ops.%s ", op);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), kernels, "kernels in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->ext("), exts, "extern calls in\n%s", src);
  cr_expect_eq(kn_test_count_of(src, pat), op_exts, "extern calls of %s in\n%s", op, src);
  free(src);
}

/* got and want have the same dtype, sizes and bytes. */
static void expect_same_bits(kn_tensor *got, kn_tensor *want, const char *what) {
  cr_assert(got && want, "%s: %s", what, kn_last_error());
  cr_assert_eq(kn_tensor_dtype(got), kn_tensor_dtype(want), "%s: dtype", what);
  cr_assert_eq(kn_numel(got), kn_numel(want), "%s: numel", what);
  kn_tensor *g = kn_contiguous(got), *w = kn_contiguous(want);
  size_t bytes = (size_t)kn_numel(g) * (kn_tensor_dtype(g) == KN_FLOAT64 ? 8 : 4);
  cr_expect(memcmp(kn_data(g), kn_data(w), bytes) == 0, "%s: compiled and eager bits differ", what);
}

static kn_compiled *compile_n(void (*fn)(void), int nargs) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = kn_compile_tensor_fn(fn, nargs, "mlp", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

/* ---- column sums -------------------------------------------------------------------- */

static const int64_t dim0[] = {0};

/* relu's backward, then its bias gradient. */
static kn_tensor *bias_grad(kn_tensor *g, kn_tensor *h) {
  return kn_sum_dims(kn_threshold_backward(g, h, kn_float(0)), dim0, 1, false);
}

Test(inductor_mlp, bias_gradient_is_the_eager_column_sum, .init = setup, .fini = teardown) {
  kn_compiled *f = compile_n((void (*)(void))bias_grad, 2);
  kn_scope_begin();
  for (int k = 0; k < 2; k++) {
    kn_dtype dt = k ? KN_FLOAT64 : KN_FLOAT32;
    kn_tensor *g = kn_randn(KN_SHAPE(67, 40), NULL, dt), *h = kn_randn(KN_SHAPE(67, 40), NULL, dt);
    expect_same_bits(kn_call_t(f, g, h), bias_grad(g, h), k ? "float64" : "float32");
  }
  kn_scope_end();
  kn_compiled_free(f);
  /* per dtype: threshold_backward one flat loop, the sum the eager op */
  expect_code(2, 2, "sum", 2);
}

/* Narrow rows (< 16) and a mean read by a pointwise node (batch norm's
** centring) stay generated reductions. */
static kn_tensor *narrow_sum(kn_tensor *x) { return kn_sum_dims(kn_exp(x), dim0, 1, false); }
static kn_tensor *centred(kn_tensor *x) { return kn_sub(x, kn_mean_dims(x, dim0, 1, true)); }

Test(inductor_mlp, other_column_reductions_stay_generated, .init = setup, .fini = teardown) {
  kn_compiled *f = compile_n((void (*)(void))narrow_sum, 1);
  kn_compiled *c = compile_n((void (*)(void))centred, 1);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(33, 10), NULL, KN_FLOAT64);
  cr_expect(ind_close(kn_call_t(f, x), narrow_sum(x), 1e-12, 1e-12, "narrow"));
  kn_tensor *y = kn_randn(KN_SHAPE(33, 40), NULL, KN_FLOAT64);
  cr_expect(ind_close(kn_call_t(c, y), centred(y), 1e-12, 1e-12, "centred"));
  kn_scope_end();
  kn_compiled_free(f);
  kn_compiled_free(c);
  expect_code(2, 0, "sum", 0);
}

/* ---- zero-dim operands of another dtype ------------------------------------------- */

static kn_tensor *sgd(kn_tensor *p, kn_tensor *g, kn_tensor *lr) { return kn_sub(p, kn_mul(g, lr)); }

Test(inductor_mlp, sgd_update_with_float64_lr_is_one_kernel, .init = setup, .fini = teardown) {
  kn_compiled *f = compile_n((void (*)(void))sgd, 3);
  kn_scope_begin();
  kn_tensor *p = kn_randn(KN_SHAPE(31, 45), NULL, KN_FLOAT32);
  kn_tensor *g = kn_randn(KN_SHAPE(31, 45), NULL, KN_FLOAT32);
  kn_tensor *lr = kn_scalar_tensor(kn_float(0.0123456789), KN_FLOAT64);
  kn_tensor *got = kn_call_t(f, p, g, lr);
  cr_expect_eq(kn_tensor_dtype(got), KN_FLOAT32);
  expect_same_bits(got, sgd(p, g, lr), "sgd");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(1, 0, "mul", 0);
}

/* An int64 zero-dim operand of a float tensor: float32 too; an int tensor
** times a float64 zero-dim tensor is float64 by the category rule, left to
** the eager op. */
static kn_tensor *scale_int(kn_tensor *x, kn_tensor *k) { return kn_mul(x, k); }

Test(inductor_mlp, zero_dim_category_rules, .init = setup, .fini = teardown) {
  kn_compiled *f = compile_n((void (*)(void))scale_int, 2);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(7, 9), NULL, KN_FLOAT32);
  kn_tensor *k = kn_scalar_tensor(kn_int(3), KN_INT64);
  expect_same_bits(kn_call_t(f, x, k), scale_int(x, k), "float32 * int64 0-d");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(1, 0, "mul", 0);
}

Test(inductor_mlp, int_tensor_times_float_zero_dim_stays_eager, .init = setup, .fini = teardown) {
  kn_compiled *f = compile_n((void (*)(void))scale_int, 2);
  kn_scope_begin();
  kn_tensor *x = kn_to(kn_mul_scalar(kn_randn(KN_SHAPE(7, 9), NULL, KN_FLOAT32), kn_float(10)),
                       KN_INT64);
  kn_tensor *k = kn_scalar_tensor(kn_float(0.25), KN_FLOAT64);
  kn_tensor *got = kn_call_t(f, x, k);
  cr_expect_eq(kn_tensor_dtype(got), KN_FLOAT64);
  expect_same_bits(got, scale_int(x, k), "int64 * float64 0-d");
  kn_scope_end();
  kn_compiled_free(f);
  expect_code(0, 1, "mul", 1);
}

/* ---- the partitioner ----------------------------------------------------------------- */

/* The parameter names of the "def forward(" line of the first aot_graphs
** record whose message holds title, comma-separated (owned). */
static char *graph_params(const kn_test_records *r, const char *title) {
  for (size_t i = 0; i < r->n; i++) {
    const char *m = r->v[i].message;
    if (!m || !strstr(m, title)) continue;
    const char *d = strstr(m, "def forward(self, ");
    cr_assert(d, "%s", m);
    const char *end = strstr(d, "):");
    char *out = calloc(1, 1024);
    for (const char *p = d + 18; p && p < end;) {
      const char *c = strstr(p, ": \"");
      if (!c || c > end) break;
      if (*out) strcat(out, ",");
      strncat(out, p, (size_t)(c - p));
      p = strchr(c + 3, '"'); /* the type's closing quote */
      p = p && p < end && !strncmp(p + 1, ", ", 2) ? p + 3 : NULL;
    }
    return out;
  }
  cr_assert_fail("no aot_graphs record holds %s", title);
  return NULL;
}

static kn_tensor *leaf(int64_t n, int64_t m, kn_dtype dt) {
  kn_tensor *t = kn_randn(KN_SHAPE(n, m), NULL, dt);
  kn_set_requires_grad(t, true);
  return t;
}

/* Compiled and eager gradients of fn's inputs agree. */
static void expect_grads(kn_compiled *f, kn_tensor *(*fn)(kn_tensor **), kn_tensor **in, int n,
                         double rtol, double atol) {
  kn_tensor *got[8], *want[8];
  cr_assert_eq(kn_backward(kn_call_tensors(f, in, n), NULL), KN_OK, "%s", kn_last_error());
  for (int i = 0; i < n; i++) got[i] = kn_retain(kn_grad(in[i])), kn_set_grad(in[i], NULL);
  cr_assert_eq(kn_backward(fn(in), NULL), KN_OK, "%s", kn_last_error());
  for (int i = 0; i < n; i++) want[i] = kn_grad(in[i]);
  for (int i = 0; i < n; i++) {
    if (!kn_requires_grad(in[i])) continue;
    cr_expect(ind_close(got[i], want[i], rtol, atol, "gradient"), "input %d", i);
    kn_release(got[i]);
  }
}

/* After a GEMM, a chain of cheap ops: min-cut saves the GEMM's inputs and
** result and recomputes the chain in the backward; the default partition
** saves what every rule reads. */
static kn_tensor *gemm_chain(kn_tensor *x, kn_tensor *w) {
  return kn_sum(kn_exp(kn_cos(kn_sin(kn_mm(x, w)))));
}

static kn_tensor *gemm_chain_v(kn_tensor **a) { return gemm_chain(a[0], a[1]); }

Test(inductor_mlp, the_backend_partitions_with_min_cut, .init = setup, .fini = teardown) {
  kn_test_records r = {0};
  kn_set_logs_str("aot_graphs");
  kn_test_capture_begin(&r);
  kn_compiled *f = compile_n((void (*)(void))gemm_chain, 2);
  kn_scope_begin();
  kn_tensor *in[2] = {leaf(6, 5, KN_FLOAT64), leaf(5, 7, KN_FLOAT64)};
  expect_grads(f, gemm_chain_v, in, 2, 1e-12, 1e-12);
  kn_scope_end();
  kn_test_capture_end(&r);
  kn_set_logs_str("");
  char *bw = graph_params(&r, "Backward graph");
  cr_expect_str_eq(bw, "primals_1,primals_2,mm,tangents_1");
  free(bw);
  kn_test_records_free(&r);
  kn_compiled_free(f);
}

/* The bench's MLP (784-512-10 there; small here): relu's result is saved,
** not the GEMM's, so the forward is a fused GEMM + relu call. */
static kn_tensor *mlp_loss(kn_tensor *x, kn_tensor *w1, kn_tensor *b1, kn_tensor *w2, kn_tensor *b2,
                           kn_tensor *target) {
  kn_tensor *h = kn_relu(kn_linear(x, w1, b1));
  return kn_mse_loss(kn_linear(h, w2, b2), target, KN_REDUCTION_MEAN);
}

static kn_tensor *mlp_loss_v(kn_tensor **a) { return mlp_loss(a[0], a[1], a[2], a[3], a[4], a[5]); }

Test(inductor_mlp, mlp_saves_relu_and_fuses_it_into_the_gemm, .init = setup, .fini = teardown) {
  kn_test_records r = {0};
  kn_set_logs_str("aot_graphs,schedule");
  kn_test_capture_begin(&r);
  kn_compiled *f = compile_n((void (*)(void))mlp_loss, 6);
  kn_scope_begin();
  kn_tensor *in[6] = {kn_randn(KN_SHAPE(16, 24), NULL, KN_FLOAT32), leaf(32, 24, KN_FLOAT32),
                      kn_randn(KN_SHAPE(32), NULL, KN_FLOAT32), leaf(5, 32, KN_FLOAT32),
                      kn_randn(KN_SHAPE(5), NULL, KN_FLOAT32), kn_randn(KN_SHAPE(16, 5), NULL, KN_FLOAT32)};
  kn_set_requires_grad(in[2], true);
  kn_set_requires_grad(in[4], true);
  expect_grads(f, mlp_loss_v, in, 6, 1e-5, 1e-6);
  kn_scope_end();
  kn_test_capture_end(&r);
  kn_set_logs_str("");
  char *bw = graph_params(&r, "Backward graph");
  cr_expect_str_eq(bw, "primals_1,primals_4,relu,sub,tangents_1");
  free(bw);
  const kn_test_record *post = kn_test_get_record(&r, "+ epilogue kernel relu ");
  cr_expect(post && strstr(post->message, "extern addmm (kiln.ops.addmm) + epilogue kernel relu [16, 32]"),
            "the forward's GEMM + relu is one call");
  kn_test_records_free(&r);
  kn_compiled_free(f);
}

/* ---- a saved input written in place --------------------------------------------------- */

/* z = x * y, then y += 1: x's gradient is y's value before the write. A
** partition may save primal y by reference; the runtime then saves a copy. */
static kn_tensor *mul_then_bump(kn_tensor *x, kn_tensor *y) {
  kn_tensor *z = kn_mul(x, y);
  return kn_add_scalar_(y, kn_float(1)) == KN_OK ? z : NULL;
}

static void saved_input_written_after(const char *backend) {
  kn_compile_options o = {.backend = backend};
  kn_compiled *f = KN_COMPILE(mul_then_bump, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_scope_begin();
  for (int call = 0; call < 2; call++) {
    kn_tensor *x = leaf(4, 6, KN_FLOAT64), *y = kn_randn(KN_SHAPE(4, 6), NULL, KN_FLOAT64);
    kn_tensor *y0 = kn_clone(y);
    kn_tensor *z = kn_call_t(f, x, y);
    cr_assert(z, "%s: %s", backend, kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(z), NULL), KN_OK, "%s", kn_last_error());
    expect_same_bits(kn_grad(x), y0, backend);
    expect_same_bits(y, kn_add_scalar(y0, kn_float(1)), backend);
  }
  kn_scope_end();
  kn_compiled_free(f);
}

Test(inductor_mlp, saved_input_written_in_place_keeps_its_old_value, .init = setup,
     .fini = teardown) {
  saved_input_written_after("aot_eager");
  saved_input_written_after("inductor");
}

/* ---- write-backs computed in place -------------------------------------------------------- */

/* Profiled events named name while fn(ud) runs. */
static int events_named(const char *name, void (*fn)(void *), void *ud) {
  kn_profiler_clear();
  cr_assert_eq(kn_profiler_start(), KN_OK);
  fn(ud);
  kn_profiler_stop();
  int n = 0;
  kn_profiler_event e;
  for (int i = 0; i < kn_profiler_num_events(); i++)
    if (kn_profiler_get_event(i, &e) && !strcmp(e.name, name)) n++;

  kn_profiler_clear();
  return n;
}

static void compiled_step(void *opt) {
  kn_compile_options o = {.backend = "inductor"};
  cr_assert_eq(kn_optim_step_compiled(opt, &o), KN_OK, "%s", kn_last_error());
}

/* Two SGD optimizers over equal parameters and gradients, one stepped
** eagerly, one compiled: the same bits after each step, and the compiled
** update writes the parameters in place (no copy_ of a write-back). */
Test(inductor_mlp, sgd_compiled_step_updates_parameters_in_place, .init = setup, .fini = teardown) {
  kn_scope_begin();
  kn_tensor *pe[2] = {kn_retain(kn_randn(KN_SHAPE(24, 40), NULL, KN_FLOAT32)),
                      kn_retain(kn_randn(KN_SHAPE(40), NULL, KN_FLOAT32))};
  kn_tensor *pc[2] = {kn_retain(kn_clone(pe[0])), kn_retain(kn_clone(pe[1]))};
  kn_scope_end(); /* the four references are ours */
  for (int i = 0; i < 2; i++) kn_set_requires_grad(pe[i], true), kn_set_requires_grad(pc[i], true);
  kn_optim_options oo = {.lr = 0.05};
  kn_optimizer *e = kn_sgd(pe, 2, &oo), *c = kn_sgd(pc, 2, &oo);
  cr_assert(e && c, "%s", kn_last_error());
  for (int step = 0; step < 4; step++) {
    kn_scope_begin();
    for (int i = 0; i < 2; i++) {
      kn_tensor *g = kn_randn(i ? 1 : 2, i ? (int64_t[]){40} : (int64_t[]){24, 40}, NULL, KN_FLOAT32);
      kn_set_grad(pe[i], g);
      kn_set_grad(pc[i], kn_clone(g));
    }
    void *data = kn_data(pc[0]);
    cr_assert_eq(kn_optim_step(e), KN_OK, "%s", kn_last_error());
    int copies = events_named("aten::copy_", compiled_step, c);
    if (step > 0) cr_expect_eq(copies, 0, "step %d: %d write-back copies", step, copies);
    cr_expect_eq(kn_data(pc[0]), data);
    expect_same_bits(pc[0], pe[0], "weight");
    expect_same_bits(pc[1], pe[1], "bias");
    kn_scope_end();
  }
  kn_optim_free(e);
  kn_optim_free(c);
  for (int i = 0; i < 2; i++) kn_release(pe[i]), kn_release(pc[i]);
}

/* p's old value is read by a reduction outside the update's kernel: the
** new value cannot be computed in p (the sum would read it), so it is
** written back by a copy. */
static kn_tensor *sum_then_update(kn_tensor *p, kn_tensor *g) {
  kn_tensor *s = kn_sum(p);
  return kn_sub_(p, g) == KN_OK ? s : NULL;
}

typedef struct call_ctx { kn_compiled *f; kn_tensor *p, *g, *out; } call_ctx;
static void call_it(void *ud) {
  call_ctx *c = ud;
  c->out = kn_call_t(c->f, c->p, c->g);
}

Test(inductor_mlp, update_read_elsewhere_is_copied_back, .init = setup, .fini = teardown) {
  kn_compiled *f = compile_n((void (*)(void))sum_then_update, 2);
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  for (int call = 0; call < 2; call++) {
    kn_tensor *p = kn_randn(KN_SHAPE(9, 20), NULL, KN_FLOAT32), *g = kn_randn(KN_SHAPE(9, 20), NULL, KN_FLOAT32);
    kn_tensor *pe = kn_clone(p);
    kn_tensor *want = sum_then_update(pe, g);
    call_ctx c = {f, p, g, NULL};
    cr_expect_eq(events_named("aten::copy_", call_it, &c), 1);
    expect_same_bits(c.out, want, "sum of the old value");
    expect_same_bits(p, pe, "updated input");
  }
  kn_no_grad_end(prev);
  kn_scope_end();
  kn_compiled_free(f);
}

/* ---- optimizer steps raise no error internally ------------------------------------------ */

/* A successful step leaves no error behind: looking up state an optimizer
** does not have (SGD has no "step") raised one, with the nearest paths
** formatted, for every parameter on every step. */
static void steps_leave_no_error(kn_optimizer *(*make)(kn_tensor *const *, int, const kn_optim_options *),
                                 double momentum, bool compiled) {
  kn_scope_begin();
  kn_tensor *p[2] = {kn_retain(kn_randn(KN_SHAPE(6, 5), NULL, KN_FLOAT32)),
                     kn_retain(kn_randn(KN_SHAPE(5), NULL, KN_FLOAT32))};
  kn_scope_end();
  for (int i = 0; i < 2; i++) kn_set_requires_grad(p[i], true);
  kn_optim_options oo = {.lr = 0.01, .momentum = momentum};
  kn_optimizer *opt = make(p, 2, &oo);
  cr_assert(opt, "%s", kn_last_error());
  kn_compile_options o = {.backend = "inductor"};
  for (int step = 0; step < 3; step++) {
    kn_scope_begin();
    for (int i = 0; i < 2; i++) kn_set_grad(p[i], kn_detach(kn_mul_scalar(p[i], kn_float(0.5))));
    kn_clear_error();
    kn_status st = compiled ? kn_optim_step_compiled(opt, &o) : kn_optim_step(opt);
    cr_expect_eq(st, KN_OK);
    cr_expect_eq(kn_last_status(), KN_OK, "step %d (momentum %g, %s): %s", step, momentum,
                 compiled ? "compiled" : "eager", kn_last_error());
    kn_scope_end();
  }
  kn_optim_free(opt);
  kn_release(p[0]), kn_release(p[1]);
}

Test(inductor_mlp, optimizer_steps_leave_no_error, .init = setup, .fini = teardown) {
  for (int c = 0; c < 2; c++) {
    steps_leave_no_error(kn_sgd, 0, c);
    steps_leave_no_error(kn_sgd, 0.9, c);
    steps_leave_no_error(kn_adam, 0, c);
  }
}

/* ---- the profile names the fused GEMM call ----------------------------------------------- */

static kn_tensor *dense_relu(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_relu(kn_linear(x, w, b)); }

typedef struct dense_ctx { kn_compiled *f; kn_tensor *x, *w, *b, *out; } dense_ctx;
static void call_dense(void *ud) {
  dense_ctx *c = ud;
  c->out = kn_call_t(c->f, c->x, c->w, c->b);
}

/* The GEMM with its relu epilogue is a profiler event of its own (the op
** it runs, aten::addmm), not time hidden in the compiled region. */
Test(inductor_mlp, fused_gemm_call_is_profiled, .init = setup, .fini = teardown) {
  kn_compiled *f = compile_n((void (*)(void))dense_relu, 3);
  kn_scope_begin();
  dense_ctx c = {f, kn_randn(KN_SHAPE(8, 12), NULL, KN_FLOAT32), kn_randn(KN_SHAPE(6, 12), NULL, KN_FLOAT32),
                 kn_randn(KN_SHAPE(6), NULL, KN_FLOAT32), NULL};
  call_dense(&c); /* compiles (tracing runs the ops eagerly) */
  int nev = events_named("aten::addmm", call_dense, &c);
  cr_expect_eq(nev, 1, "aten::addmm events: %d", nev);
  expect_same_bits(c.out, dense_relu(c.x, c.w, c.b), "relu(linear)");
  kn_scope_end();
  kn_compiled_free(f);
}
