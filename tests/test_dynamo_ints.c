/*
** test_dynamo_ints.c: int arguments under automatic dynamic. An int whose
** value (or type) changed between compiles gets a symbol on the recompile
** (create_symbol with the range [-int_oo, int_oo], as the seed's
** test_recompiles shows for L['y']); dynamic=true gives one from the first
** compile, dynamic=false never. C code reads the int's value, so kiln
** specialises the symbol at once and keeps the value guard (`L['n'] == 2`):
** results stay right for every value.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "support/log_capture.h"
#include "support/dynamo_util.h"

TestSuite(ints, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

/* fn(x, n) = x + n */
static kn_value add_n(const kn_value *args, int nargs, void *ud) {
  (void)nargs;
  (void)ud;
  return kn_vtensor(kn_add_scalar(args[0].u.t, kn_int(args[1].u.i)));
}

static kn_compile_counter cc;
static char reasons[8][256];
static int nreasons;
static void on_fail(const kn_guard_failure *f, void *ud) {
  (void)ud;
  if (nreasons < 8) snprintf(reasons[nreasons++], sizeof reasons[0], "%s", f->reason);
}

static kn_compiled *compile_add_n(kn_dynamic dyn) {
  static const char *names[] = {"x", "n", NULL};
  kn_compile_counter_clear(&cc);
  nreasons = 0;
  kn_compile_options o = {.arg_names = names, .dynamic = dyn, .guard_fail_fn = on_fail,
                          .backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  return kn_compile_fn(add_n, NULL, 2, "add_n", __FILE__, __LINE__, &o);
}

/* Calls f(full(sizes, 1), n) and checks every element is 1 + n. */
static void call_check(kn_compiled *f, int64_t rows, int64_t n) {
  kn_value out;
  kn_value args[2] = {kn_vtensor(kn_ones(KN_SHAPE(rows, 4), KN_FLOAT32)), kn_vint(n)};
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_size(out.u.t, 0), rows);
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){rows - 1, 3}), 1.0 + (double)n);
  kn_value_release(out);
}

static int count_msg(const kn_test_records *r, const char *s) {
  int k = 0;
  for (size_t i = 0; i < r->n; i++) k += strstr(r->v[i].message, s) != NULL;
  return k;
}

static void auto_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = compile_add_n(KN_DYNAMIC_AUTO);
  kn_scope_begin();
  call_check(f, 3, 1);
  cr_expect_eq(count_msg(r, "create_symbol"), 0, "the first compile specialises ints");
  call_check(f, 3, 2);
  cr_expect_eq(count_msg(r, "automatic dynamic int L['n'] val 2 != 1"), 1);
  cr_expect_eq(count_msg(r, "create_symbol s0 = 2 for L['n'] [-int_oo, int_oo]"), 1);
  call_check(f, 3, 2); /* cached */
  call_check(f, 3, 7); /* the symbol is specialised: a recompile, right result */
  cr_expect_eq(count_msg(r, "create_symbol s0 = 7 for L['n'] [-int_oo, int_oo]"), 1);
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 3);
  /* guard_fail_fn runs once per failing entry, newest first */
  cr_assert_eq(nreasons, 3);
  cr_expect(strstr(reasons[0], "L['n'] == 1"), "%s", reasons[0]);
  cr_expect(strstr(reasons[1], "L['n'] == 2"), "%s", reasons[1]);
  cr_expect(strstr(reasons[2], "L['n'] == 1"), "%s", reasons[2]);
  kn_compiled_free(f);
}

Test(ints, automatic_dynamic_int) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamic", KN_INFO), KN_LOG_LEVEL("dynamo", KN_INFO)};
  kn_test_logging_twice(s, 2, auto_body, NULL);
}

/* dynamic=true: sizes s0, s1 and the int s2 from the first compile; other
** sizes with the same int hit the entry (the int symbol is bound to its
** guarded value in the shape guards). */
static void true_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = compile_add_n(KN_DYNAMIC_TRUE);
  kn_scope_begin();
  call_check(f, 3, 5);
  cr_expect_eq(count_msg(r, "create_symbol s0 = 3 for L['x'].size()[0] [2, int_oo]"), 1);
  cr_expect_eq(count_msg(r, "create_symbol s1 = 4 for L['x'].size()[1] [2, int_oo]"), 1);
  cr_expect_eq(count_msg(r, "create_symbol s2 = 5 for L['n'] [-int_oo, int_oo]"), 1);
  call_check(f, 6, 5);
  call_check(f, 9, 5);
  cr_expect_eq(cc.frame_count, 1, "sizes are dynamic");
  call_check(f, 6, 8);
  cr_expect_eq(cc.frame_count, 2);
  kn_scope_end();
  cr_assert_eq(nreasons, 1);
  cr_expect(strstr(reasons[0], "L['n'] == 5"), "%s", reasons[0]);
  kn_compiled_free(f);
}

Test(ints, dynamic_true_int) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamic", KN_INFO)};
  kn_test_logging_twice(s, 1, true_body, NULL);
}

static void false_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compiled *f = compile_add_n(KN_DYNAMIC_FALSE);
  kn_scope_begin();
  for (int64_t n = 1; n <= 3; n++) call_check(f, 3, n);
  kn_scope_end();
  cr_expect_eq(count_msg(r, "create_symbol"), 0);
  cr_expect_eq(count_msg(r, "automatic dynamic"), 0);
  cr_expect_eq(cc.frame_count, 3);
  kn_compiled_free(f);
}

Test(ints, dynamic_false_int) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamic", KN_INFO), KN_LOG_LEVEL("dynamo", KN_INFO)};
  kn_test_logging_twice(s, 2, false_body, NULL);
}

/* fn(x, y) = x + y for a tensor or an int y (the seed's fn, the other way
** round: an int first, then a tensor: its dims become dynamic) */
static kn_value add_any(const kn_value *args, int nargs, void *ud) {
  (void)nargs;
  (void)ud;
  kn_tensor *x = args[0].u.t;
  if (args[1].kind == KN_VTENSOR) return kn_vtensor(kn_add(x, args[1].u.t));
  return kn_vtensor(kn_add_scalar(x, kn_int(args[1].u.i)));
}

static void int_then_tensor_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  static const char *names[] = {"x", "y", NULL};
  kn_compile_options o = {.arg_names = names};
  kn_compiled *f = kn_compile_fn(add_any, NULL, 2, "fn", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(3, 4), KN_FLOAT32);
  kn_value out;
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vint(2)}, 2, &out), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){2, 3}), 3.0);
  kn_value_release(out);
  kn_tensor *y = kn_full(KN_SHAPE(3, 4), kn_float(5), KN_FLOAT32);
  cr_assert_eq(kn_call(f, (kn_value[]){kn_vtensor(x), kn_vtensor(y)}, 2, &out), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){2, 3}), 6.0);
  kn_value_release(out);
  kn_scope_end();
  cr_expect_eq(count_msg(r, "automatic dynamic L['y'] dim 2 != int"), 1);
  cr_expect_eq(count_msg(r, "create_symbol s0 = 3 for L['y'].size()[0] [2, int_oo]"), 1);
  cr_expect_eq(count_msg(r, "create_symbol s1 = 4 for L['y'].size()[1] [2, int_oo]"), 1);
  kn_compiled_free(f);
}

Test(ints, int_then_tensor) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamic", KN_INFO), KN_LOG_LEVEL("dynamo", KN_INFO)};
  kn_test_logging_twice(s, 2, int_then_tensor_body, NULL);
}
