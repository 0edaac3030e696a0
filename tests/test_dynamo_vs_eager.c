/*
** test_dynamo_vs_eager.c: compiled functions on the three built-in backends
** ("eager", "aot_eager", "inductor") against the same C code run eagerly:
** the values, the grad_fn of each output, the gradients after a backward,
** and the grad mode the call leaves behind, on the first call (traced) and
** on cache hits. Cases: the grad mode turned off inside and not restored
** (the seed test_aot_autograd.py's test_aot_grad_mode_mutation), turned on
** inside a call made with it off, and a captured constant tensor returned
** (also after serving as a backward's grad_outputs, and a captured one that
** requires grad: a global parameter, whose gradient must reach its .grad).
*/
/* Keep the frames of functions that end in a tail call to a kiln op (exact
** source lines, docs/DYNAMO.md). */
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

static void setup(void) {
  kn_test_dynamo_setup();
  kn_set_grad_enabled(true);
}

static void teardown(void) {
  kn_set_grad_enabled(true);
  kn_test_dynamo_teardown();
}

TestSuite(vs_eager, .init = setup, .fini = teardown);

static const char *const backends[] = {"eager", "aot_eager", "inductor"};
#define NBACKENDS 3
#define NCALLS 3 /* the first call traces, the others hit the cache */

static void expect_close(kn_tensor *got, kn_tensor *want, const char *what, const char *bk) {
  cr_assert(got && want, "%s (%s): missing tensor: %s", what, bk, kn_last_error());
  cr_assert_eq(kn_ndim(got), kn_ndim(want), "%s (%s): rank", what, bk);
  cr_assert_eq(kn_numel(got), kn_numel(want), "%s (%s): numel", what, bk);
  kn_tensor *g = kn_to(kn_detach(got), KN_FLOAT64), *w = kn_to(kn_detach(want), KN_FLOAT64);
  double d = INFINITY;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_sub(g, w)), NULL, 0, false), &d), KN_OK, "%s",
               kn_last_error());
  cr_expect_leq(d, 1e-6, "%s (%s): values differ by %g", what, bk, d);
}

/* The grad_fn a compiled output has where eager's has `eager_name`: none
** where eager has none; the eager backend runs the ops themselves (the same
** node); AOT backends put one CompiledFunctionBackward on their outputs. */
static void expect_grad_fn(kn_tensor *got, const char *eager_name, const char *bk,
                           const char *what) {
  const char *g = kn_grad_fn_name(got);
  if (!eager_name) {
    cr_expect_null(g, "%s (%s): eager has no grad_fn, compiled has %s", what, bk, g);
    return;
  }
  const char *want = strcmp(bk, "eager") ? "CompiledFunctionBackward" : eager_name;
  cr_expect(g && !strcmp(g, want), "%s (%s): grad_fn %s, expected %s (eager: %s)", what, bk,
            g ? g : "(none)", want, eager_name);
}

/* x = ones(3) * 3 from a leaf that requires grad (the seed's input). */
static kn_tensor *seed_input(kn_tensor **leaf) {
  *leaf = kn_ones(KN_SHAPE(3), KN_FLOAT32);
  kn_set_requires_grad(*leaf, true);
  return kn_mul_scalar(*leaf, kn_float(3));
}

static kn_compiled *compile_on(kn_fn fn, const char *name, kn_compile_counter *cc, const char *bk) {
  *cc = (kn_compile_counter){.inner = bk};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = cc};
  return kn_compile_fn(fn, NULL, 1, name, __FILE__, __LINE__, &o);
}

/* ---- the grad mode turned off inside and not restored ------------------------------- */

/* def f(x): y = x * x; torch.set_grad_enabled(False); return y.clone(), y */
static void grad_off_body(kn_tensor *x, kn_tensor **c, kn_tensor **y) {
  *y = kn_mul(x, x);
  kn_set_grad_enabled(false);
  *c = kn_clone(*y);
}

static kn_value grad_off_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *c, *y;
  grad_off_body(args[0].u.t, &c, &y);
  kn_value items[2] = {kn_vtensor(c), kn_vtensor(y)};
  return kn_tuple(2, items);
}

Test(vs_eager, grad_mode_turned_off_and_not_restored) {
  kn_scope_begin();
  kn_tensor *g = kn_from_floats((float[]){-1, 2, 0}, KN_SHAPE(3));
  kn_tensor *leaf_e, *ce, *ye;
  kn_tensor *xe = seed_input(&leaf_e);
  grad_off_body(xe, &ce, &ye);
  bool mode_e = kn_is_grad_enabled();
  kn_set_grad_enabled(true);
  cr_assert(!mode_e, "eagerly the function leaves grad mode off");
  cr_assert_null(kn_grad_fn_name(ce));
  cr_assert_str_eq(kn_grad_fn_name(ye), "MulBackward0");
  cr_assert_eq(kn_backward(ye, g), KN_OK, "%s", kn_last_error());
  for (int b = 0; b < NBACKENDS; b++) {
    kn_compile_counter cc;
    kn_compiled *f = compile_on(grad_off_fn, "grad_off_fn", &cc, backends[b]);
    cr_assert(f, "%s", kn_last_error());
    for (int call = 0; call < NCALLS; call++) {
      kn_set_grad_enabled(true);
      kn_tensor *leaf;
      kn_value a = kn_vtensor(seed_input(&leaf)), out;
      cr_assert_eq(kn_call(f, &a, 1, &out), KN_OK, "%s: %s", backends[b], kn_last_error());
      bool mode = kn_is_grad_enabled();
      kn_set_grad_enabled(true);
      cr_expect_eq(mode, mode_e, "%s call %d: grad mode after the call is %d, eagerly %d",
                   backends[b], call, mode, mode_e);
      cr_assert_eq(out.kind, KN_VTUPLE);
      expect_close(out.u.items[0].u.t, ce, "clone", backends[b]);
      expect_close(out.u.items[1].u.t, ye, "y", backends[b]);
      expect_grad_fn(out.u.items[0].u.t, kn_grad_fn_name(ce), backends[b], "clone");
      expect_grad_fn(out.u.items[1].u.t, kn_grad_fn_name(ye), backends[b], "y");
      cr_assert_eq(kn_backward(out.u.items[1].u.t, g), KN_OK, "%s: %s", backends[b],
                   kn_last_error());
      expect_close(kn_grad(leaf), kn_grad(leaf_e), "gradient", backends[b]);
      kn_value_release(out);
    }
    cr_expect_eq(cc.frame_count, 1, "%s: %d compiles", backends[b], cc.frame_count);
    kn_compiled_free(f);
  }
  kn_scope_end();
}

/* The same across a graph break: the mode changes in the first segment,
** the second runs (and the caller continues) in the mode the C code left. */
static void grad_off_break_body(kn_tensor *x, kn_tensor **c, kn_tensor **y) {
  *y = kn_mul(x, x);
  kn_set_grad_enabled(false);
  double s = kn_item(kn_sum(*y));
  *c = kn_mul_scalar(*y, kn_float(s > 0 ? 2 : 3));
}

static kn_value grad_off_break_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *c, *y;
  grad_off_break_body(args[0].u.t, &c, &y);
  kn_value items[2] = {kn_vtensor(c), kn_vtensor(y)};
  return kn_tuple(2, items);
}

Test(vs_eager, grad_mode_turned_off_before_a_graph_break) {
  kn_scope_begin();
  kn_tensor *g = kn_from_floats((float[]){3, 1, -2}, KN_SHAPE(3));
  kn_tensor *leaf_e, *ce, *ye;
  grad_off_break_body(seed_input(&leaf_e), &ce, &ye);
  bool mode_e = kn_is_grad_enabled();
  kn_set_grad_enabled(true);
  cr_assert(!mode_e);
  cr_assert_null(kn_grad_fn_name(ce));
  cr_assert_eq(kn_backward(ye, g), KN_OK, "%s", kn_last_error());
  for (int b = 0; b < NBACKENDS; b++) {
    kn_compile_counter cc;
    kn_compiled *f = compile_on(grad_off_break_fn, "grad_off_break_fn", &cc, backends[b]);
    cr_assert(f, "%s", kn_last_error());
    for (int call = 0; call < NCALLS; call++) {
      kn_set_grad_enabled(true);
      kn_tensor *leaf;
      kn_value a = kn_vtensor(seed_input(&leaf)), out;
      cr_assert_eq(kn_call(f, &a, 1, &out), KN_OK, "%s: %s", backends[b], kn_last_error());
      bool mode = kn_is_grad_enabled();
      kn_set_grad_enabled(true);
      cr_expect_eq(mode, mode_e, "%s call %d: grad mode after the call is %d, eagerly %d",
                   backends[b], call, mode, mode_e);
      expect_close(out.u.items[0].u.t, ce, "c", backends[b]);
      expect_close(out.u.items[1].u.t, ye, "y", backends[b]);
      expect_grad_fn(out.u.items[0].u.t, kn_grad_fn_name(ce), backends[b], "c");
      expect_grad_fn(out.u.items[1].u.t, kn_grad_fn_name(ye), backends[b], "y");
      cr_assert_eq(kn_backward(out.u.items[1].u.t, g), KN_OK, "%s: %s", backends[b],
                   kn_last_error());
      expect_close(kn_grad(leaf), kn_grad(leaf_e), "gradient", backends[b]);
      kn_value_release(out);
    }
    cr_expect_eq(cc.frame_count, 2, "%s: %d compiles (two segments)", backends[b], cc.frame_count);
    kn_compiled_free(f);
  }
  kn_scope_end();
}

/* ---- the grad mode turned on inside a call made with it off ---------------------------- */

static kn_tensor *grad_on_body(kn_tensor *x) {
  kn_set_grad_enabled(true);
  kn_tensor *y = kn_mul(kn_sin(x), x);
  return y;
}

static kn_value grad_on_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(grad_on_body(args[0].u.t));
}

Test(vs_eager, grad_mode_turned_on_inside_a_no_grad_call) {
  kn_scope_begin();
  kn_tensor *g = kn_from_floats((float[]){0.5f, -2, 3}, KN_SHAPE(3));
  kn_tensor *leaf_e;
  kn_tensor *xe = seed_input(&leaf_e);
  kn_set_grad_enabled(false);
  kn_tensor *ye = grad_on_body(xe);
  bool mode_e = kn_is_grad_enabled();
  cr_assert(mode_e, "eagerly the function leaves grad mode on");
  cr_assert_str_eq(kn_grad_fn_name(ye), "MulBackward0");
  cr_assert_eq(kn_backward(ye, g), KN_OK, "%s", kn_last_error());
  for (int b = 0; b < NBACKENDS; b++) {
    kn_compile_counter cc;
    kn_compiled *f = compile_on(grad_on_fn, "grad_on_fn", &cc, backends[b]);
    cr_assert(f, "%s", kn_last_error());
    for (int call = 0; call < NCALLS; call++) {
      kn_set_grad_enabled(true);
      kn_tensor *leaf;
      kn_value a = kn_vtensor(seed_input(&leaf)), out;
      kn_set_grad_enabled(false);
      cr_assert_eq(kn_call(f, &a, 1, &out), KN_OK, "%s: %s", backends[b], kn_last_error());
      bool mode = kn_is_grad_enabled();
      kn_set_grad_enabled(true);
      cr_expect_eq(mode, mode_e, "%s call %d: grad mode after the call is %d, eagerly %d",
                   backends[b], call, mode, mode_e);
      expect_close(out.u.t, ye, "y", backends[b]);
      expect_grad_fn(out.u.t, kn_grad_fn_name(ye), backends[b], "y");
      cr_assert_eq(kn_backward(out.u.t, g), KN_OK, "%s: %s", backends[b], kn_last_error());
      expect_close(kn_grad(leaf), kn_grad(leaf_e), "gradient", backends[b]);
      kn_value_release(out);
    }
    cr_expect_eq(cc.frame_count, 1, "%s: %d compiles", backends[b], cc.frame_count);
    kn_compiled_free(f);
  }
  kn_scope_end();
}

/* ---- views and in-place updates in a mode of their own --------------------------------- */

/* Called with grad on: a view of the input made without grad (no history,
** as eagerly: the runtime regenerates it in that mode), then y = x * x. */
static void view_no_grad_body(kn_tensor *x, kn_tensor **v, kn_tensor **y) {
  kn_set_grad_enabled(false);
  *v = kn_select(x, 0, 1);
  kn_set_grad_enabled(true);
  *y = kn_mul(x, x);
}

/* Called with grad off: the input updated in place with grad on (its
** history goes through the update, as eagerly: the write-back records it),
** y = a view of it made without grad. */
static void update_with_grad_body(kn_tensor *x, kn_tensor **v, kn_tensor **y) {
  kn_set_grad_enabled(true);
  kn_mul_(x, kn_full(KN_SHAPE(3), kn_float(2), KN_FLOAT32));
  kn_set_grad_enabled(false);
  *v = kn_select(x, 0, 2);
  *y = x;
}

typedef void (*pair_body)(kn_tensor *, kn_tensor **, kn_tensor **);
static pair_body cur_pair;

static kn_value pair_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *v, *y;
  cur_pair(args[0].u.t, &v, &y);
  kn_value items[2] = {kn_vtensor(v), kn_vtensor(y)};
  return kn_tuple(2, items);
}

/* Compare (v, y) of body called in grad mode `caller` with eager: the
** values, whether each has history, y's gradient, the mode left. */
static void check_pair(pair_body body, bool caller) {
  kn_scope_begin();
  cur_pair = body;
  kn_tensor *g = kn_from_floats((float[]){2, -1, 0.5f}, KN_SHAPE(3));
  kn_tensor *leaf_e, *ve, *ye;
  kn_tensor *xe = seed_input(&leaf_e);
  kn_set_grad_enabled(caller);
  body(xe, &ve, &ye);
  bool mode_e = kn_is_grad_enabled();
  kn_set_grad_enabled(true);
  cr_assert_null(kn_grad_fn_name(ve), "eagerly the view made without grad has no history");
  cr_assert(kn_grad_fn_name(ye));
  cr_assert_eq(kn_backward(ye, g), KN_OK, "%s", kn_last_error());
  for (int b = 0; b < NBACKENDS; b++) {
    kn_compile_counter cc;
    kn_compiled *f = compile_on(pair_fn, "pair_fn", &cc, backends[b]);
    cr_assert(f, "%s", kn_last_error());
    for (int call = 0; call < NCALLS; call++) {
      kn_set_grad_enabled(true);
      kn_tensor *leaf;
      kn_value a = kn_vtensor(seed_input(&leaf)), out;
      kn_set_grad_enabled(caller);
      cr_assert_eq(kn_call(f, &a, 1, &out), KN_OK, "%s: %s", backends[b], kn_last_error());
      bool mode = kn_is_grad_enabled();
      kn_set_grad_enabled(true);
      cr_expect_eq(mode, mode_e, "%s call %d: grad mode %d, eagerly %d", backends[b], call, mode,
                   mode_e);
      expect_close(out.u.items[0].u.t, ve, "v", backends[b]);
      expect_close(out.u.items[1].u.t, ye, "y", backends[b]);
      cr_expect_null(kn_grad_fn_name(out.u.items[0].u.t), "%s: v has %s", backends[b],
                     kn_grad_fn_name(out.u.items[0].u.t));
      cr_expect(kn_grad_fn_name(out.u.items[1].u.t), "%s: y has no history", backends[b]);
      cr_assert_eq(kn_backward(out.u.items[1].u.t, g), KN_OK, "%s: %s", backends[b],
                   kn_last_error());
      expect_close(kn_grad(leaf), kn_grad(leaf_e), "gradient", backends[b]);
      kn_value_release(out);
    }
    cr_expect_eq(cc.frame_count, 1, "%s: %d compiles", backends[b], cc.frame_count);
    kn_compiled_free(f);
  }
  kn_scope_end();
}

Test(vs_eager, view_made_without_grad_in_a_grad_call) { check_pair(view_no_grad_body, true); }

Test(vs_eager, input_updated_with_grad_in_a_no_grad_call) {
  check_pair(update_with_grad_body, false);
}

/* ---- a captured constant returned ------------------------------------------------------- */

static kn_tensor *konst; /* created outside the compiled function */

static void const_out_body(kn_tensor *x, kn_tensor **y) { *y = kn_mul(x, kn_exp(x)); }

static kn_value const_out_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *y;
  const_out_body(args[0].u.t, &y);
  kn_value items[2] = {kn_vtensor(y), kn_vtensor(konst)};
  return kn_tuple(2, items);
}

/* The constant as a backward's grad_outputs inside (the gradient reaches
** the leaf's .grad, read after the call), then returned. */
static void const_grad_body(kn_tensor *x, kn_tensor **y) {
  *y = kn_mul(x, x);
  kn_backward(*y, konst);
}

static kn_value const_grad_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *y;
  const_grad_body(args[0].u.t, &y);
  kn_value items[2] = {kn_vtensor(y), kn_vtensor(konst)};
  return kn_tuple(2, items);
}

/* A global parameter: read and returned (its gradient accumulates in its
** .grad; returned, it is the leaf itself, without a grad_fn). */
static void param_body(kn_tensor *x, kn_tensor **y) { *y = kn_sum(kn_mul(kn_sin(x), konst)); }

static kn_value param_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *y;
  param_body(args[0].u.t, &y);
  kn_value items[2] = {kn_vtensor(y), kn_vtensor(konst)};
  return kn_tuple(2, items);
}

/* The constant (requiring grad when `param`) is created outside; fn
** returns (body's y, the constant). */
static void check_const_case(kn_fn fn, const char *name, void (*body)(kn_tensor *, kn_tensor **),
                             bool backward_inside, bool param) {
  kn_scope_begin();
  bool scalar = fn == param_fn;
  kn_tensor *g = scalar ? NULL : kn_from_floats((float[]){1, -1, 2}, KN_SHAPE(3));
  konst = kn_from_floats((float[]){0.25f, 4, -3}, KN_SHAPE(3));
  if (param) kn_set_requires_grad(konst, true);
  kn_tensor *leaf_e, *ye;
  body(seed_input(&leaf_e), &ye);
  const char *ye_fn = kn_grad_fn_name(ye);
  if (!backward_inside) cr_assert_eq(kn_backward(ye, g), KN_OK, "%s", kn_last_error());
  kn_tensor *kgrad_e = param && kn_grad(konst) ? kn_clone(kn_grad(konst)) : NULL; /* kept: reset below */
  cr_assert(!param || kgrad_e, "eagerly the parameter gets a gradient");
  for (int b = 0; b < NBACKENDS; b++) {
    kn_compile_counter cc;
    kn_compiled *f = compile_on(fn, name, &cc, backends[b]);
    cr_assert(f, "%s", kn_last_error());
    for (int call = 0; call < NCALLS; call++) {
      kn_tensor *leaf;
      kn_value a = kn_vtensor(seed_input(&leaf)), out;
      kn_set_grad(konst, NULL);
      cr_assert_eq(kn_call(f, &a, 1, &out), KN_OK, "%s: %s", backends[b], kn_last_error());
      cr_expect(kn_is_grad_enabled(), "%s: grad mode is on after the call, as eagerly", backends[b]);
      cr_assert_eq(out.kind, KN_VTUPLE);
      expect_close(out.u.items[0].u.t, ye, "y", backends[b]);
      /* eagerly the caller gets the constant itself */
      cr_expect_eq(out.u.items[1].u.t, konst, "%s: the constant itself is returned", backends[b]);
      expect_close(out.u.items[1].u.t, konst, "constant", backends[b]);
      expect_grad_fn(out.u.items[0].u.t, ye_fn, backends[b], "y");
      expect_grad_fn(out.u.items[1].u.t, kn_grad_fn_name(konst), backends[b], "constant");
      if (!backward_inside)
        cr_assert_eq(kn_backward(out.u.items[0].u.t, g), KN_OK, "%s: %s", backends[b],
                     kn_last_error());
      expect_close(kn_grad(leaf), kn_grad(leaf_e), "gradient", backends[b]);
      if (param) expect_close(kn_grad(konst), kgrad_e, "the parameter's gradient", backends[b]);
      kn_value_release(out);
    }
    kn_compiled_free(f);
  }
  kn_scope_end();
}

Test(vs_eager, captured_constant_returned) {
  check_const_case(const_out_fn, "const_out_fn", const_out_body, false, false);
}

Test(vs_eager, captured_constant_as_grad_outputs_then_returned) {
  check_const_case(const_grad_fn, "const_grad_fn", const_grad_body, true, false);
}

Test(vs_eager, captured_parameter_used_and_returned) {
  check_const_case(param_fn, "param_fn", param_body, false, true);
}
