/*
** tests/test_inductor_aot.c: backend "inductor" is AOT autograd with the
** code generator compiling the forward, backward and inference graphs.
** Expectations come from eager runs of the same functions on the same
** inputs (a second implementation), from the seed test_structured_trace's
** event order for a training graph, and from the number of shared objects
** the cache holds (one per compiled graph).
**
** The backward sweep: each op compiled alone, f(x[, y]) = op(x[, y]), its
** output and the input gradients for a random output gradient compared with
** eager, float64 (|d| <= 1e-12 + 1e-12 |eager|) and float32 (1e-5 + 1e-5
** |eager|: generated code may fuse a chain eager rounds step by step),
** contiguous and transposed x.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

/* -O0: generated code compiles faster, with the same results (no
** -ffast-math, contraction off either way). */
static void setup(void) {
  kn_test_dynamo_setup();
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
}

TestSuite(inductor_aot, .init = setup, .fini = kn_test_dynamo_teardown, .timeout = 300);

static kn_compile_options ind(void) { return (kn_compile_options){.backend = "inductor"}; }

static kn_tensor *leaf(int64_t n, int64_t m, kn_dtype dt, bool rg, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(n, m), g, dt);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

static double max_diff(kn_tensor *a, kn_tensor *b) {
  cr_assert(a && b, "missing tensor (%s)", kn_last_error());
  double v = INFINITY;
  kn_tensor *d = kn_amax(kn_abs(kn_sub(kn_to(a, KN_FLOAT64), kn_to(b, KN_FLOAT64))), NULL, 0, false);
  cr_assert_eq(kn_item_double(d, &v), KN_OK, "%s", kn_last_error());
  return v;
}

/* ---- a training function -------------------------------------------------------------- */

static kn_tensor *train_fn(kn_tensor *x, kn_tensor *w) {
  return kn_sum(kn_add(kn_tanh(kn_mul(x, w)), kn_sigmoid(x)));
}

/* outputs and gradients equal eager's; one node; two shared objects
** (forward and backward) in the cache. */
Test(inductor_aot, training_graph_compiles_forward_and_backward) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  kn_compile_options o = ind();
  kn_compiled *f = KN_COMPILE(train_fn, &o);
  kn_tensor *x = leaf(37, 19, KN_FLOAT64, true, 1), *w = leaf(37, 19, KN_FLOAT64, true, 2);
  kn_tensor *xe = leaf(37, 19, KN_FLOAT64, true, 1), *we = leaf(37, 19, KN_FLOAT64, true, 2);
  kn_tensor *y = kn_call_t(f, x, w), *ye = train_fn(xe, we);
  cr_assert(y, "%s", kn_last_error());
  cr_expect_str_eq(kn_grad_fn_name(y), "CompiledFunctionBackward");
  cr_assert_eq(kn_backward(y, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(ye, NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(y, ye), 1e-12 * 37 * 19);
  cr_expect_leq(max_diff(kn_grad(x), kn_grad(xe)), 1e-12);
  cr_expect_leq(max_diff(kn_grad(w), kn_grad(we)), 1e-12);
  cr_expect_eq(ind_count(dir, ".so"), 2, "forward and backward compiled");
  kn_compiled_free(f);
  kn_scope_end();
  ind_rm(dir);
}

/* No input requires grad: one inference graph, one shared object, no node. */
Test(inductor_aot, inference_graph_is_compiled) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  kn_compile_options o = ind();
  kn_compiled *f = KN_COMPILE(train_fn, &o);
  kn_tensor *x = leaf(5, 7, KN_FLOAT32, false, 1), *w = leaf(5, 7, KN_FLOAT32, false, 2);
  kn_tensor *y = kn_call_t(f, x, w);
  cr_assert(y, "%s", kn_last_error());
  cr_expect_null(kn_grad_fn_name(y));
  cr_expect_leq(max_diff(y, train_fn(x, w)), 1e-5);
  cr_expect_eq(ind_count(dir, ".so"), 1);
  kn_compiled_free(f);
  kn_scope_end();
  ind_rm(dir);
}

/* ---- trace events ------------------------------------------------------------------------ */

static int count_of(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p++) n++;
  return n;
}

/* The seed's training-graph order: the pre-grad graphs, the AOT cache miss
** and the AOT graphs, then for each compiled
** graph fx_graph_runnable, before_post_grad_graph, inductor_post_grad_graph,
** inductor_output_code and the cache artifact; kiln compiles the backward
** right after the forward (PyTorch on first backward), before the guards. */
Test(inductor_aot, training_events_in_seed_order) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  char *tdir = kn_test_trace_start();
  kn_compile_options o = ind();
  kn_compiled *f = KN_COMPILE(train_fn, &o);
  cr_assert(kn_call_t(f, leaf(4, 3, KN_FLOAT32, true, 1), leaf(4, 3, KN_FLOAT32, true, 2)), "%s",
            kn_last_error());
  kn_compiled_free(f);
  uint64_t defects = 99;
  char *t = kn_test_dyn_trace(false, &defects);
  cr_expect_eq(defects, 0);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  const char *inductor[] = {"\"fx_graph_runnable\"", "\"before_post_grad_graph\"",
                            "\"inductor_post_grad_graph\"", "{\"inductor_output_code\"",
                            "\"fx_graph_cache_miss\""};
  const char *ev[18] = {"{\"dynamo_output_graph\"", "\"before_pre_grad_graph\"",
                        "\"after_pre_grad_graph\"", "\"aotautograd_cache_miss\"",
                        "{\"aot_joint_graph\"", "{\"aot_forward_graph\"", "{\"aot_backward_graph\""};
  int n = 7;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 5; i++) ev[n++] = inductor[i];
  ev[n++] = "{\"dynamo_cpp_guards_str\"";
  const char *at = t;
  for (int i = 0; i < n; i++) {
    const char *p = strstr(at, ev[i]);
    cr_expect(p, "event %d %s not after the previous one in:\n%s", i, ev[i], t);
    if (p) at = p + 1;
  }
  cr_expect_eq(count_of(t, "{\"inductor_output_code\""), 2, "%s", t);
  free(t);
  kn_scope_end();
  ind_rm(dir);
}

/* ---- graphs with in-place ops go through AOT (functionalization) -------------------- */

/* An intermediate written in place, and an input (y) written in place. */
static kn_tensor *mutates(kn_tensor *x, kn_tensor *y) {
  if (kn_mul_scalar_(y, kn_float(2.0)) != KN_OK) return NULL;
  kn_tensor *t = kn_mul(x, y);
  if (kn_add_(t, y) != KN_OK) return NULL;
  return kn_mul(t, x);
}

Test(inductor_aot, in_place_graph_is_functionalized_and_compiled) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  kn_log_setting s[] = {KN_LOG_LEVEL("inductor", KN_INFO)};
  cr_assert_eq(kn_set_logs(s, 1), KN_OK);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_compile_options o = ind();
  kn_compiled *f = KN_COMPILE(mutates, &o);
  for (int call = 0; call < 2; call++) {
    kn_tensor *x = leaf(6, 5, KN_FLOAT64, true, 1), *y = leaf(6, 5, KN_FLOAT64, false, 2);
    kn_tensor *xe = leaf(6, 5, KN_FLOAT64, true, 1), *ye = leaf(6, 5, KN_FLOAT64, false, 2);
    kn_tensor *z = kn_call_t(f, x, y), *ze = mutates(xe, ye);
    cr_assert(z, "%s", kn_last_error());
    cr_expect_leq(max_diff(z, ze), 0.0);
    cr_expect_leq(max_diff(y, ye), 0.0, "the input written in place, once, as eagerly");
    cr_expect_str_eq(kn_grad_fn_name(z), "CompiledFunctionBackward");
    cr_assert_eq(kn_backward(kn_sum(z), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(kn_sum(ze), NULL), KN_OK, "%s", kn_last_error());
    cr_expect_leq(max_diff(kn_grad(x), kn_grad(xe)), 1e-12);
  }
  kn_test_capture_end(&r);
  cr_expect_null(kn_test_get_record(&r, "AOT autograd skipped"));
  cr_expect_null(kn_test_get_record(&r, "compiling the captured graph"));
  kn_test_records_free(&r);
  kn_compiled_free(f);
  kn_scope_end();
  ind_rm(dir);
}

/* ---- an MLP trained through inductor -------------------------------------------------- */

static kn_tensor *mlp_loss(kn_tensor *x, kn_tensor *w1, kn_tensor *b1, kn_tensor *w2, kn_tensor *b2,
                           kn_tensor *target) {
  kn_tensor *h = kn_relu(kn_linear(x, w1, b1));
  return kn_mse_loss(kn_linear(h, w2, b2), target, KN_REDUCTION_MEAN);
}

static kn_tensor *param(int ndim, const int64_t *sizes, uint64_t seed, kn_dtype dt) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_mul_scalar(kn_randn(ndim, sizes, g, dt), kn_float(0.3));
  kn_generator_free(g);
  kn_set_requires_grad(t, true);
  return t;
}

static double sgd_step(kn_compiled *f, kn_tensor *x, kn_tensor *target, kn_tensor **p,
                       kn_tensor **grads) {
  kn_tensor *loss = f ? kn_call_t(f, x, p[0], p[1], p[2], p[3], target)
                      : mlp_loss(x, p[0], p[1], p[2], p[3], target);
  cr_assert(loss, "%s", kn_last_error());
  cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
  double v = NAN;
  kn_item_double(loss, &v);
  for (int i = 0; i < 4; i++) {
    grads[i] = kn_grad(p[i]);
    cr_assert(grads[i], "no gradient for parameter %d", i);
    kn_tensor *np = kn_detach(kn_sub(kn_detach(p[i]), kn_mul_scalar(grads[i], kn_float(0.1))));
    kn_set_requires_grad(np, true);
    p[i] = np;
  }
  return v;
}

static void mlp_steps(kn_dtype dt, double tol) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();

  kn_compile_counter cc = {.inner = "inductor"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(mlp_loss, &o);
  kn_generator *g = kn_generator_new(7);
  kn_tensor *x = kn_randn(KN_SHAPE(32, 12), g, dt);
  kn_tensor *target = kn_randn(KN_SHAPE(32, 5), g, dt);
  kn_generator_free(g);
  kn_tensor *pc[4] = {param(KN_SHAPE(16, 12), 1, dt), param(KN_SHAPE(16), 2, dt),
                      param(KN_SHAPE(5, 16), 3, dt), param(KN_SHAPE(5), 4, dt)};
  kn_tensor *pe[4];
  for (int i = 0; i < 4; i++) {
    pe[i] = kn_detach(pc[i]);
    kn_set_requires_grad(pe[i], true);
  }
  double first = 0, last = 0;
  for (int step = 0; step < 5; step++) {
    kn_tensor *gc[4], *ge[4];
    double lc = sgd_step(f, x, target, pc, gc), le = sgd_step(NULL, x, target, pe, ge);
    cr_expect(fabs(lc - le) <= tol * (1 + fabs(le)), "step %d: loss %.17g, eager %.17g", step, lc, le);
    for (int i = 0; i < 4; i++)
      cr_expect_leq(max_diff(gc[i], ge[i]), tol, "step %d, parameter %d", step, i);
    if (step == 0) first = le;
    last = le;
  }
  cr_expect_lt(last, first, "the loss decreases (%g -> %g)", first, last);
  cr_expect_eq(cc.frame_count, 1, "one compile for five steps, got %d", cc.frame_count);
  cr_expect_eq(ind_count(dir, ".so"), 2, "forward and backward compiled: %d", ind_count(dir, ".so"));
  kn_compiled_free(f);
  kn_scope_end();
  ind_rm(dir);
}

Test(inductor_aot, mlp_five_sgd_steps_equal_eager_float64) { mlp_steps(KN_FLOAT64, 1e-12); }
Test(inductor_aot, mlp_five_sgd_steps_equal_eager_float32) { mlp_steps(KN_FLOAT32, 1e-5); }

/* ---- the backward sweep -------------------------------------------------------------------- */

typedef kn_tensor *(*fn2)(kn_tensor *, kn_tensor *);
typedef struct opcase { const char *name; fn2 f; bool pos; } opcase;

static const int64_t d1[1] = {1};
static kn_tensor *o_sin(kn_tensor *x, kn_tensor *y) { (void)y; return kn_sin(x); }
static kn_tensor *o_exp(kn_tensor *x, kn_tensor *y) { (void)y; return kn_exp(x); }
static kn_tensor *o_tanh(kn_tensor *x, kn_tensor *y) { (void)y; return kn_tanh(x); }
static kn_tensor *o_sigmoid(kn_tensor *x, kn_tensor *y) { (void)y; return kn_sigmoid(x); }
static kn_tensor *o_relu(kn_tensor *x, kn_tensor *y) { (void)y; return kn_relu(x); }
static kn_tensor *o_gelu(kn_tensor *x, kn_tensor *y) { (void)y; return kn_gelu(x, KN_GELU_NONE); }
static kn_tensor *o_log(kn_tensor *x, kn_tensor *y) { (void)y; return kn_log(x); }
static kn_tensor *o_sqrt(kn_tensor *x, kn_tensor *y) { (void)y; return kn_sqrt(x); }
static kn_tensor *o_abs(kn_tensor *x, kn_tensor *y) { (void)y; return kn_abs(x); }
static kn_tensor *o_add(kn_tensor *x, kn_tensor *y) { return kn_add(x, y); }
static kn_tensor *o_sub(kn_tensor *x, kn_tensor *y) { return kn_sub(x, y); }
static kn_tensor *o_mul(kn_tensor *x, kn_tensor *y) { return kn_mul(x, y); }
static kn_tensor *o_div(kn_tensor *x, kn_tensor *y) { return kn_div(x, kn_add_scalar(kn_abs(y), kn_float(1))); }
static kn_tensor *o_maximum(kn_tensor *x, kn_tensor *y) { return kn_maximum(x, y); }
static kn_tensor *o_sum(kn_tensor *x, kn_tensor *y) { (void)y; return kn_sum(x); }
static kn_tensor *o_mean1(kn_tensor *x, kn_tensor *y) { (void)y; return kn_mean_dims(x, d1, 1, true); }
static kn_tensor *o_amax1(kn_tensor *x, kn_tensor *y) { (void)y; return kn_amax(x, d1, 1, false); }
static kn_tensor *o_softmax(kn_tensor *x, kn_tensor *y) { (void)y; return kn_softmax(x, 1); }
static kn_tensor *o_logsm(kn_tensor *x, kn_tensor *y) { (void)y; return kn_log_softmax(x, 1); }
static kn_tensor *o_mm(kn_tensor *x, kn_tensor *y) { return kn_mm(x, kn_transpose(y, 0, 1)); }
static kn_tensor *o_addmm_relu(kn_tensor *x, kn_tensor *y) {
  return kn_relu(kn_linear(x, y, kn_sum_dims(y, d1, 1, false)));
}
static kn_tensor *o_chain(kn_tensor *x, kn_tensor *y) {
  return kn_mul(kn_exp(kn_neg(kn_mul(x, x))), kn_add(y, kn_sin(x)));
}

static const opcase cases[] = {
  {"sin", o_sin, false}, {"exp", o_exp, false}, {"tanh", o_tanh, false},
  {"sigmoid", o_sigmoid, false}, {"relu", o_relu, false}, {"gelu", o_gelu, false},
  {"log", o_log, true}, {"sqrt", o_sqrt, true}, {"abs", o_abs, false}, {"add", o_add, false},
  {"sub", o_sub, false}, {"mul", o_mul, false}, {"div", o_div, false},
  {"maximum", o_maximum, false}, {"sum", o_sum, false}, {"mean1", o_mean1, false},
  {"amax1", o_amax1, false}, {"softmax", o_softmax, false}, {"log_softmax", o_logsm, false},
  {"mm", o_mm, false}, {"linear_relu", o_addmm_relu, false}, {"chain", o_chain, false},
};

/* x [6, 7] (transposed: a [7, 6] tensor's transpose), y [6, 7]. */
static kn_tensor *input(kn_dtype dt, bool transposed, bool pos, uint64_t seed) {
  kn_tensor *t = transposed ? kn_transpose(leaf(7, 6, dt, false, seed), 0, 1)
                            : leaf(6, 7, dt, false, seed);
  if (pos) t = kn_add_scalar(kn_abs(t), kn_float(0.5));
  t = kn_detach(t);
  kn_set_requires_grad(t, true);
  return t;
}

static void one_case(const opcase *c, kn_dtype dt, bool transposed, double tol) {
  kn_scope_begin();
  kn_compile_options o = ind();
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))c->f, 2, c->name, __FILE__, __LINE__, &o);
  cr_assert(f, "%s", kn_last_error());
  kn_tensor *x = input(dt, transposed, c->pos, 1), *y = input(dt, false, false, 2);
  kn_tensor *xe = input(dt, transposed, c->pos, 1), *ye = input(dt, false, false, 2);
  kn_tensor *out = kn_call_t(f, x, y), *oute = c->f(xe, ye);
  cr_assert(out && oute, "%s: %s", c->name, kn_last_error());
  kn_generator *g = kn_generator_new(3);
  kn_tensor *go = kn_randn(kn_ndim(oute), kn_sizes(oute), g, dt);
  kn_generator_free(g);
  cr_assert_eq(kn_backward(out, go), KN_OK, "%s: %s", c->name, kn_last_error());
  cr_assert_eq(kn_backward(oute, go), KN_OK, "%s: %s", c->name, kn_last_error());
  cr_expect(ind_close(out, oute, tol, tol, c->name), "%s output", c->name);
  cr_expect(ind_close(kn_grad(x), kn_grad(xe), tol, tol, c->name), "%s grad x", c->name);
  if (kn_grad(ye)) cr_expect(ind_close(kn_grad(y), kn_grad(ye), tol, tol, c->name), "%s grad y", c->name);
  else cr_expect_null(kn_grad(y), "%s: y gets no gradient", c->name);
  kn_compiled_free(f);
  kn_scope_end();
}

static void sweep(kn_dtype dt, bool transposed, double tol) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) one_case(&cases[i], dt, transposed, tol);
  ind_rm(dir);
}

Test(inductor_aot, backward_sweep_float64_contiguous) { sweep(KN_FLOAT64, false, 1e-12); }
Test(inductor_aot, backward_sweep_float64_transposed) { sweep(KN_FLOAT64, true, 1e-12); }
Test(inductor_aot, backward_sweep_float32_contiguous) { sweep(KN_FLOAT32, false, 1e-5); }
