/*
** test_autocast_compile.c: autocast under kn_compile. The captured graph
** holds the casts as explicit _to_copy nodes (autocast sits above the
** tracing mode), the compiled results and gradients equal eager autocast's,
** and the autocast dtype is part of the global-state guard: a function
** compiled under autocast recompiles when called without it (and the other
** way round), naming the change.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/dynamo_util.h"
#include "support/fixture.h"

TestSuite(autocast_compile, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static char reason[8][256];
static int nreason;
static void on_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  if (nreason < 8) snprintf(reason[nreason++], sizeof reason[0], "%s", g->reason);
}

/* A backend that keeps the code of every graph it gets and hands the graph
** on to the backend named by ud. */
static char *codes[4];
static int ncodes;
static kn_status keep_code(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                           kn_compiled_graph *out) {
  if (ncodes < 4) codes[ncodes++] = kn_graph_module_code(gm);
  return kn_backend_compile((const char *)ud, gm, ex, n, out);
}

static void free_codes(void) {
  for (int i = 0; i < ncodes; i++) free(codes[i]);
  ncodes = 0;
}

/* loss = cross_entropy(linear(x, w, b), y): a lower-precision op feeding a
** float32 one. */
static kn_value step(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_tensor *h = kn_linear(args[0].u.t, args[1].u.t, args[2].u.t);
  return kn_vtensor(kn_cross_entropy(h, args[3].u.t, NULL, KN_REDUCTION_MEAN, -100, 0.0));
}

typedef struct inputs {
  kn_tensor *x, *w, *b, *y;
} inputs;

static inputs make_inputs(void) {
  inputs in;
  in.x = kn_randn(2, (int64_t[]){6, 8}, NULL, KN_FLOAT32);
  in.w = kn_randn(2, (int64_t[]){5, 8}, NULL, KN_FLOAT32);
  in.b = kn_randn(1, (int64_t[]){5}, NULL, KN_FLOAT32);
  in.y = kn_empty(1, (int64_t[]){6}, KN_INT64);
  for (int i = 0; i < 6; i++) ((int64_t *)kn_data(in.y))[i] = (i * 3) % 5;
  kn_set_requires_grad(in.w, true);
  kn_set_requires_grad(in.b, true);
  return in;
}

static kn_tensor *call(kn_compiled *f, inputs *in) {
  kn_tensor *r = kn_call_tensors(f, (kn_tensor *[]){in->x, in->w, in->b, in->y}, 4);
  cr_assert_not_null(r, "%s", kn_last_error());
  return r;
}

static kn_compiled *compile_step(const char *backend) {
  kn_compile_options o = {.guard_fail_fn = on_fail, .backend_fn = keep_code,
                          .backend_ud = (void *)backend,
                          .arg_names = (const char *[]){"x", "w", "b", "y", NULL}};
  return kn_compile_fn(step, NULL, 4, "step", __FILE__, __LINE__, &o);
}

Test(autocast_compile, captured_graph_records_the_casts) {
  kn_scope_begin();
  inputs in = make_inputs();
  kn_compiled *f = compile_step("eager");
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *got = call(f, &in);
  kn_value a[4] = {kn_vtensor(in.x), kn_vtensor(in.w), kn_vtensor(in.b), kn_vtensor(in.y)};
  kn_tensor *want = step(a, 4, NULL).u.t;
  kn_autocast_end();
  cr_assert_eq(ncodes, 1);
  /* x, w and b cast to bfloat16 before linear; its output cast back up
  ** before the loss */
  cr_assert_eq(kn_test_count_sub(codes[0], "_to_copy"), 4, "%s", codes[0]);
  cr_assert_eq(kn_test_count_sub(codes[0], "dtype = kiln.bfloat16"), 3, "%s", codes[0]);
  cr_assert_eq(kn_test_count_sub(codes[0], "dtype = kiln.float32"), 1, "%s", codes[0]);
  cr_assert_eq(kn_tensor_dtype(got), KN_FLOAT32);
  char why[256];
  cr_assert(kn_tensors_close(got, want, 0, 0, true, why, sizeof why), "%s", why);
  free_codes();
  kn_compiled_free(f);
  kn_scope_end();
}

Test(autocast_compile, autocast_state_is_guarded) {
  kn_scope_begin();
  inputs in = make_inputs();
  kn_compiled *f = compile_step("eager");
  nreason = 0;
  kn_autocast_begin(KN_BFLOAT16);
  call(f, &in);
  kn_autocast_end();
  kn_tensor *plain = call(f, &in);
  cr_assert_eq(nreason, 1);
  cr_assert_str_eq(reason[0], "global state changed: autocast bfloat16 -> off");
  cr_assert_eq(ncodes, 2);
  cr_assert_eq(kn_test_count_sub(codes[1], "_to_copy"), 0, "%s", codes[1]);
  char why[256];
  kn_value a[4] = {kn_vtensor(in.x), kn_vtensor(in.w), kn_vtensor(in.b), kn_vtensor(in.y)};
  cr_assert(kn_tensors_close(plain, step(a, 4, NULL).u.t, 0, 0, true, why, sizeof why), "%s",
            why);
  /* float16 is a third entry; both earlier ones name their state */
  nreason = 0;
  kn_autocast_begin(KN_FLOAT16);
  call(f, &in);
  kn_autocast_end();
  cr_assert_eq(nreason, 2);
  cr_assert_str_eq(reason[0], "global state changed: autocast off -> float16");
  cr_assert_str_eq(reason[1], "global state changed: autocast bfloat16 -> float16");
  cr_assert_eq(ncodes, 3);
  /* the first entry is hit again without recompiling */
  kn_autocast_begin(KN_BFLOAT16);
  call(f, &in);
  kn_autocast_end();
  cr_assert_eq(ncodes, 3);
  free_codes();
  kn_compiled_free(f);
  kn_scope_end();
}

/* Gradients of the compiled step (AOT autograd, then the interpreter or the
** generated C code) reach the float32 leaves and equal eager autocast's. */
static void gradients_match(const char *backend, double tol) {
  kn_scope_begin();
  inputs in = make_inputs();
  kn_value a[4] = {kn_vtensor(in.x), kn_vtensor(in.w), kn_vtensor(in.b), kn_vtensor(in.y)};
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *want = step(a, 4, NULL).u.t;
  kn_autocast_end();
  cr_assert_eq(kn_backward(want, NULL), KN_OK, "%s", kn_last_error());
  kn_tensor *gw = kn_clone(kn_grad(in.w)), *gb = kn_clone(kn_grad(in.b));
  kn_set_grad(in.w, NULL);
  kn_set_grad(in.b, NULL);
  kn_compiled *f = compile_step(backend);
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *got = call(f, &in);
  kn_autocast_end();
  cr_assert_eq(kn_backward(got, NULL), KN_OK, "%s", kn_last_error());
  char why[256];
  cr_assert(kn_tensors_close(got, want, tol, tol, true, why, sizeof why), "%s loss: %s", backend,
            why);
  cr_assert_eq(kn_tensor_dtype(kn_grad(in.w)), KN_FLOAT32);
  cr_assert(kn_tensors_close(kn_grad(in.w), gw, tol, tol, true, why, sizeof why), "%s dw: %s",
            backend, why);
  cr_assert(kn_tensors_close(kn_grad(in.b), gb, tol, tol, true, why, sizeof why), "%s db: %s",
            backend, why);
  free_codes();
  kn_compiled_free(f);
  kn_scope_end();
}

Test(autocast_compile, aot_eager_gradients_equal_eager_autocast) { gradients_match("aot_eager", 0); }

/* The generated code may fuse the float32 part differently: a few float32
** roundings apart. */
Test(autocast_compile, inductor_gradients_equal_eager_autocast) {
  gradients_match("inductor", 1e-5);
}

static kn_value opens_a_region(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_autocast_begin(KN_BFLOAT16);
  return kn_vtensor(kn_mm(args[0].u.t, args[0].u.t));
}

static kn_value pairs_its_region(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *r = kn_mm(args[0].u.t, args[0].u.t);
  kn_autocast_end();
  return kn_vtensor(kn_to(r, KN_FLOAT32));
}

/* A region opened and closed inside the function is captured (its casts are
** in the graph); one left open is refused, since later calls would not
** replay it. */
Test(autocast_compile, regions_inside_a_compiled_function_must_pair_up) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){4, 4}, NULL, KN_FLOAT32);
  kn_compile_options o = {.backend = "eager"};
  kn_compiled *ok = kn_compile_fn(pairs_its_region, NULL, 1, "pairs", __FILE__, __LINE__, &o);
  kn_value a = kn_vtensor(x), out;
  for (int k = 0; k < 2; k++) { /* compile, then replay the cached graph */
    cr_assert_eq(kn_call(ok, &a, 1, &out), KN_OK, "%s", kn_last_error());
    kn_tensor *want = kn_to(kn_mm(kn_to(x, KN_BFLOAT16), kn_to(x, KN_BFLOAT16)), KN_FLOAT32);
    char why[256];
    cr_assert(kn_tensors_close(out.u.t, want, 0, 0, true, why, sizeof why), "%s", why);
    kn_value_release(out);
    cr_assert_not(kn_autocast_enabled());
  }
  kn_compiled *bad = kn_compile_fn(opens_a_region, NULL, 1, "opens", __FILE__, __LINE__, &o);
  cr_assert_eq(kn_call(bad, &a, 1, &out), KN_EUNSUPPORTED);
  cr_assert(strstr(kn_last_error(), "opens: kn_autocast_begin/kn_autocast_end calls inside a "
                                    "compiled function must pair up (open autocast regions went "
                                    "from 0 to 1)"), "%s", kn_last_error());
  while (kn_autocast_enabled()) kn_autocast_end();
  kn_compiled_free(ok);
  kn_compiled_free(bad);
  kn_scope_end();
}
