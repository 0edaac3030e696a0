/*
** test_backend_compile.c: kn_backend_compile, by which a custom backend
** hands its graph on to a registered one (as PyTorch backends call
** compile_fx). A composed backend counts the graphs and call nodes it sees,
** then delegates to inductor: its results and gradients equal eager ones (a
** second implementation), inductor did compile (one shared object per
** graph in a private cache), and a cached call does not reach the backend
** again. Also: the options of KN_COMPILE written as a compound literal,
** and the errors of kn_backend_compile.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "inductor_util.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

static void setup(void) {
  kn_test_dynamo_setup();
  setenv("KILN_CFLAGS", "-O0 -fopenmp -ffp-contract=off", 1);
}

TestSuite(backend_compile, .init = setup, .fini = kn_test_dynamo_teardown, .timeout = 300);

/* The composed backend: counts, then hands the graph to `inner`. */
typedef struct counting {
  const char *inner;
  int graphs, ops, ninputs;
} counting;

static kn_status count_then_delegate(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                     kn_compiled_graph *out) {
  counting *c = ud;
  c->graphs++;
  c->ninputs = n;
  char *code = kn_graph_module_code(gm);
  for (const char *p = code; p && (p = strstr(p, "kiln.ops.")); p++) c->ops++;
  free(code);
  return kn_backend_compile(c->inner, gm, ex, n, out);
}

static kn_tensor *loss_fn(kn_tensor *x, kn_tensor *w) {
  return kn_sum(kn_mul(kn_sin(kn_mul(x, w)), x));
}

static kn_tensor *leaf(uint64_t seed, bool rg) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(4, 3), g, KN_FLOAT64);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

static double max_diff(kn_tensor *a, kn_tensor *b) {
  cr_assert(a && b, "missing tensor (%s)", kn_last_error());
  double v = INFINITY;
  kn_tensor *d = kn_amax(kn_abs(kn_sub(a, b)), NULL, 0, false);
  cr_assert_eq(kn_item_double(d, &v), KN_OK, "%s", kn_last_error());
  return v;
}

Test(backend_compile, a_custom_backend_delegates_to_inductor) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  counting c = {.inner = "inductor"};
  kn_compiled *f = KN_COMPILE(loss_fn, &(kn_compile_options){.backend_fn = count_then_delegate,
                                                             .backend_ud = &c});
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_scope_begin();
  kn_tensor *x = leaf(1, true), *w = leaf(2, true);
  kn_tensor *xe = kn_detach(x), *we = kn_detach(w);
  kn_set_requires_grad(xe, true), kn_set_requires_grad(we, true);
  kn_tensor *got = kn_call_t(f, x, w), *want = loss_fn(xe, we);
  cr_assert_not_null(got, "%s", kn_last_error());
  cr_expect_leq(max_diff(got, want), 1e-12);
  cr_assert_eq(kn_backward(got, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(want, NULL), KN_OK, "%s", kn_last_error());
  cr_expect_leq(max_diff(kn_grad(x), kn_grad(xe)), 1e-12);
  cr_expect_leq(max_diff(kn_grad(w), kn_grad(we)), 1e-12);
  /* a second call with the same shapes is a cache hit: no new graph */
  cr_expect_leq(max_diff(kn_call_t(f, x, w), want), 1e-12);
  kn_scope_end();
  cr_expect_eq(c.graphs, 1);
  cr_expect_eq(c.ninputs, 2);
  cr_expect_eq(c.ops, 4, "mul, sin, mul, sum");
  cr_expect_eq(ind_count(dir, ".so"), 2, "inductor compiled the forward and backward graphs");
  kn_compiled_free(f);
  ind_rm(dir);
}

Test(backend_compile, composes_with_any_registered_backend) {
  counting inner = {.inner = "eager"};
  cr_assert_eq(kn_register_backend("counting_eager", count_then_delegate, &inner), KN_OK);
  counting outer = {.inner = "counting_eager"};
  kn_compiled *f = KN_COMPILE(loss_fn, &(kn_compile_options){.backend_fn = count_then_delegate,
                                                             .backend_ud = &outer,
                                                             .fullgraph = true});
  kn_scope_begin();
  kn_tensor *x = leaf(3, false), *w = leaf(4, false);
  cr_expect_leq(max_diff(kn_call_t(f, x, w), loss_fn(x, w)), 1e-12);
  kn_scope_end();
  cr_expect_eq(outer.graphs, 1);
  cr_expect_eq(inner.graphs, 1);
  kn_compiled_free(f);
}

static kn_tensor *twice(kn_tensor *a) { return kn_mul_scalar(a, kn_int(2)); }

Test(backend_compile, options_as_a_compound_literal) {
  kn_compile_counter cc = {0};
  kn_compiled *f = KN_COMPILE(twice, &(kn_compile_options){.backend_fn = kn_compile_counter_backend,
                                                           .backend_ud = &cc,
                                                           .dynamic = KN_DYNAMIC_FALSE});
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_scope_begin();
  cr_expect_eq(kn_get(kn_call_t(f, kn_ones(KN_SHAPE(2), KN_FLOAT32)), (int64_t[]){1}), 2.0);
  cr_expect_eq(kn_get(kn_call_t(f, kn_ones(KN_SHAPE(3), KN_FLOAT32)), (int64_t[]){2}), 2.0);
  kn_scope_end();
  /* the options were read: the counter backend ran, and dynamic=false
  ** compiled the second shape as a graph of its own */
  cr_expect_eq(cc.frame_count, 2);
  cr_expect_eq(cc.op_count, 2);
  kn_compiled_free(f);
}

static kn_status failing(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                         kn_compiled_graph *out) {
  (void)gm, (void)ex, (void)n, (void)ud, (void)out;
  return kn__error(KN_EUNSUPPORTED, "this backend supports nothing");
}

static kn_status to_unknown(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                            kn_compiled_graph *out) {
  (void)ud;
  return kn_backend_compile("no_such_backend", gm, ex, n, out);
}

Test(backend_compile, errors_name_the_backend) {
  cr_assert_eq(kn_register_backend("failing", failing, NULL), KN_OK);
  kn_compiled_graph out = {0};
  cr_expect_eq(kn_backend_compile(NULL, NULL, NULL, 0, &out), KN_EINVAL);
  cr_expect_str_eq(kn_last_error(),
                   "kn_backend_compile: expected a backend name, a graph module, ninputs >= 0 "
                   "example inputs and an output; found name NULL, module NULL, 0 inputs at NULL "
                   "and output set");
  kn_compiled *f = KN_COMPILE(twice, &(kn_compile_options){.backend_fn = to_unknown});
  kn_scope_begin();
  cr_expect_null(kn_call_t(f, kn_ones(KN_SHAPE(2), KN_FLOAT32)));
  cr_expect(strstr(kn_last_error(), "kn_backend_compile: unknown backend 'no_such_backend' "
                                    "(registered: \"eager\", \"inductor\", \"aot_eager\", "
                                    "\"failing\")"), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  f = KN_COMPILE(twice, &(kn_compile_options){.backend_fn = count_then_delegate,
                                               .backend_ud = &(counting){.inner = "failing"}});
  kn_scope_begin();
  cr_expect_null(kn_call_t(f, kn_ones(KN_SHAPE(2), KN_FLOAT32)));
  cr_expect(strstr(kn_last_error(), "kn_backend_compile: backend 'failing' failed: this backend "
                                    "supports nothing"), "%s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
}
