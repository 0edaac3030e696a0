/*
** test_sym.c: symbolic sizes: canonical forms, printing in sympy's style,
** static decisions from value ranges, guards recorded from hints, and
** evaluation. Expected strings are what sympy prints for the same
** expressions.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "dynamic/sym.h"
#include "ops/opdef.h"

static kn__shape_env *env;
static kn_sym s0, s1;

static void setup(void) {
  env = kn__shape_env_new();
  kn__shape_env_set_current(env);
  cr_assert_eq(kn__shape_env_create_symbol(env, 5, 2, &s0), KN_OK);
  cr_assert_eq(kn__shape_env_create_symbol(env, 7, 2, &s1), KN_OK);
}

static void teardown(void) { kn__shape_env_free(env); }

static const char *fmt(kn_sym v) {
  static char buf[256];
  kn__sym_format(v, buf, sizeof buf);
  return buf;
}

TestSuite(sym, .init = setup, .fini = teardown);

Test(sym, printing_and_hints) {
  cr_assert_str_eq(fmt(s0), "s0");
  kn_sym p = kn__sym_mul(s0, s1);
  cr_assert_str_eq(fmt(p), "s0*s1");
  cr_assert_eq(kn__sym_hint(p), 35);
  cr_assert_str_eq(fmt(kn__sym_add(s0, kn__sym_const(1))), "s0 + 1");
  cr_assert_str_eq(fmt(kn__sym_mul(kn__sym_const(2), s0)), "2*s0");
  cr_assert_str_eq(fmt(kn__sym_sub(kn__sym_const(0), s0)), "-s0");
  cr_assert_str_eq(fmt(kn__sym_sub(s0, kn__sym_const(1))), "s0 - 1");
  cr_assert_str_eq(fmt(kn__sym_floordiv(s0, kn__sym_const(2))), "(s0//2)");
  cr_assert_eq(kn__sym_hint(kn__sym_floordiv(s0, kn__sym_const(2))), 2);
  cr_assert_str_eq(fmt(kn__sym_mod(s0, kn__sym_const(3))), "Mod(s0, 3)");
  cr_assert_str_eq(fmt(kn__sym_mul(s0, s0)), "s0**2");
}

Test(sym, canonical_forms_make_equal_expressions_identical) {
  kn_sym a = kn__sym_mul(s0, s1), b = kn__sym_mul(s1, s0);
  cr_assert_eq(a.e, b.e);
  kn_sym c = kn__sym_add(kn__sym_add(s0, s1), s0);       /* s0 + s1 + s0 */
  kn_sym d = kn__sym_add(kn__sym_mul(kn__sym_const(2), s0), s1);
  cr_assert_eq(c.e, d.e);
  kn_sym z = kn__sym_sub(c, d);
  cr_assert(kn__sym_is_const(z));
  cr_assert_eq(z.c, 0);
  /* exact division simplifies, inexact stays opaque */
  kn_sym e = kn__sym_floordiv(kn__sym_mul(kn__sym_const(4), s0), kn__sym_const(2));
  cr_assert_str_eq(fmt(e), "2*s0");
  cr_assert(kn__sym_is_const(kn__sym_mod(kn__sym_mul(kn__sym_const(4), s0), kn__sym_const(2))));
  /* (s0 + 1) * (s0 - 1) == s0**2 - 1 */
  kn_sym f = kn__sym_mul(kn__sym_add(s0, kn__sym_const(1)), kn__sym_sub(s0, kn__sym_const(1)));
  cr_assert_str_eq(fmt(f), "s0**2 - 1");
}

Test(sym, ranges_decide_without_guards) {
  /* s0 >= 2: s0 == 1 is false, s0 != 0 is true, s0*s1 > s0 is true */
  cr_assert_eq(kn__sym_query(s0, KN__SYM_EQ, kn__sym_const(1)), KN__SYM_FALSE);
  cr_assert_eq(kn__sym_query(s0, KN__SYM_NE, kn__sym_const(0)), KN__SYM_TRUE);
  cr_assert_eq(kn__sym_query(s0, KN__SYM_GE, kn__sym_const(2)), KN__SYM_TRUE);
  cr_assert_eq(kn__sym_query(kn__sym_mod(s0, kn__sym_const(3)), KN__SYM_LT, kn__sym_const(3)),
               KN__SYM_TRUE);
  cr_assert_eq(kn__sym_query(s0, KN__SYM_EQ, s1), KN__SYM_NEEDS_GUARD);
  cr_assert_eq(kn__shape_env_nguards(env), 0);
  /* max of comparable values simplifies */
  kn_sym m = kn__sym_max(s0, kn__sym_const(1));
  cr_assert_eq(m.e, s0.e);
  kn_sym n = kn__sym_max(s0, s1);
  cr_assert_str_eq(fmt(n), "Max(s0, s1)");
  cr_assert_eq(kn__sym_hint(n), 7);
  cr_assert_eq(kn__sym_max(s1, s0).e, n.e);
}

Test(sym, guards_use_hints_and_are_recorded_then_checked) {
  cr_assert_not(kn__sym_guard_eq(s0, s1)); /* hints 5 and 7 */
  cr_assert(kn__sym_guard(s0, KN__SYM_LT, s1));
  cr_assert(kn__sym_guard_eq_int(s0, 5));
  cr_assert_eq(kn__shape_env_nguards(env), 3);
  cr_assert_str_eq(kn__shape_env_guard_str(env, 0), "Ne(s0, s1)");
  cr_assert_str_eq(kn__shape_env_guard_str(env, 1), "s0 < s1");
  cr_assert_str_eq(kn__shape_env_guard_str(env, 2), "Eq(s0, 5)");
  /* s0 < s1 implies Ne(s0, s1), which is then dead: kept, not checked */
  cr_assert(kn__shape_env_guard_dead(env, 0));
  cr_assert_eq(kn__shape_env_nlive(env), 2);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){5, 7}), -1);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){5, 5}), 1);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){6, 9}), 2);
}

static kn_sym c(int64_t v) { return kn__sym_const(v); }

/* Issue 26: the same shape guard three times, beside its mirror image, and
** bounds an equality already implies, are one guard. */
Test(sym, repeats_mirrors_and_implied_guards_are_one_guard) {
  kn_sym e = kn__sym_mul(c(64), s0); /* hint 320 */
  cr_assert(kn__sym_guard_eq(e, c(320)));
  cr_assert(kn__sym_guard_eq(e, c(320)));
  cr_assert(kn__sym_guard_eq(c(320), e));                  /* mirror image */
  cr_assert(kn__sym_guard(c(256), KN__SYM_LT, e));         /* implied bound */
  cr_assert(kn__sym_guard(e, KN__SYM_GE, c(100)));
  cr_assert(kn__sym_guard(e, KN__SYM_NE, c(64)));
  cr_assert(kn__sym_guard_eq(kn__sym_mul(c(2), s0), c(10))); /* the same, scaled */
  cr_assert_eq(kn__shape_env_nguards(env), 1);
  cr_assert_str_eq(kn__shape_env_guard_str(env, 0), "Eq(64*s0, 320)");
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){5, 2}), -1);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){6, 2}), 0);
}

Test(sym, a_tighter_bound_replaces_a_looser_one) {
  cr_assert(kn__sym_guard(s1, KN__SYM_LT, c(20)));          /* s1 <= 19 */
  cr_assert(kn__sym_guard(c(10), KN__SYM_GT, s1));          /* s1 <= 9: tighter */
  cr_assert(kn__sym_guard(kn__sym_mul(c(2), s1), KN__SYM_LT, c(40))); /* implied */
  cr_assert(kn__sym_guard(s1, KN__SYM_GT, c(3)));           /* another side */
  cr_assert_eq(kn__shape_env_nguards(env), 3);
  cr_assert(kn__shape_env_guard_dead(env, 0));
  cr_assert_str_eq(kn__shape_env_guard_str(env, 1), "10 > s1");
  cr_assert_str_eq(kn__shape_env_guard_str(env, 2), "s1 > 3");
  cr_assert_eq(kn__shape_env_nlive(env), 2);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){5, 9}), -1);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){5, 12}), 1);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){5, 3}), 2);
  /* an equality implies both bounds: they die */
  cr_assert(kn__sym_guard_eq(s1, c(7)));
  cr_assert_eq(kn__shape_env_nlive(env), 1);
  cr_assert_eq(kn__shape_env_check_guards(env, (int64_t[]){5, 8}), 3);
}

/* Sizes are positive: a common factor of every term does not change the
** sign, so 64*s1 < 64*s0*s1 (a flattening view's row count) holds
** statically for s0 >= 2. */
Test(sym, common_positive_factors_decide_comparisons) {
  kn_sym a = kn__sym_mul(c(64), s1), b = kn__sym_mul(a, s0);
  cr_assert_eq(kn__sym_query(a, KN__SYM_LT, b), KN__SYM_TRUE);
  cr_assert_eq(kn__sym_query(b, KN__SYM_EQ, a), KN__SYM_FALSE);
  cr_assert_eq(kn__sym_query(kn__sym_mul(s0, s1), KN__SYM_GE, kn__sym_mul(c(2), s1)), KN__SYM_TRUE);
  cr_assert_eq(kn__sym_query(kn__sym_mul(s0, s1), KN__SYM_LT, kn__sym_mul(c(3), s1)),
               KN__SYM_NEEDS_GUARD);
  cr_assert_eq(kn__shape_env_nguards(env), 0);
}

static int hooked[8], nhooked;
static void on_guard(void *ud, const kn__shape_env *e, int index) {
  cr_assert_eq(e, env);
  cr_assert_eq(ud, &nhooked);
  if (nhooked < 8) hooked[nhooked++] = index;
}

Test(sym, the_hook_sees_each_recorded_guard_once) {
  kn__shape_env_set_guard_hook(env, on_guard, &nhooked);
  nhooked = 0;
  cr_assert(kn__sym_guard_eq(s0, c(5)));
  cr_assert(kn__sym_guard_eq(c(5), s0)); /* dropped: no call */
  cr_assert(kn__sym_guard(s1, KN__SYM_GT, s0));
  cr_assert_eq(nhooked, 2);
  cr_assert_eq(hooked[0], 0);
  cr_assert_eq(hooked[1], 1);
  kn__shape_env_set_guard_hook(env, NULL, NULL);
}

Test(sym, evaluation_matches_integer_semantics) {
  kn_sym e = kn__sym_add(kn__sym_mul(s0, s1), kn__sym_floordiv(kn__sym_sub(kn__sym_const(0), s0),
                                                              kn__sym_const(2)));
  /* s0*s1 + (-s0 // 2) with Python's floor division */
  cr_assert_eq(kn__sym_eval(e, (int64_t[]){3, 4}), 12 + (-2));
  cr_assert_eq(kn__sym_hint(e), 35 + (-3));
  cr_assert_eq(kn__sym_eval(kn__sym_mod(kn__sym_sub(kn__sym_const(0), s0), kn__sym_const(3)),
                            (int64_t[]){4, 0}), 2);
}

Test(sym, broadcasting_symbolic_shapes) {
  kn_sym a[2] = {s0, s1}, b[1] = {s1}, out[2];
  int n;
  cr_assert_eq(kn__broadcast_shapes(2, a, 1, b, &n, out), KN_OK);
  cr_assert_eq(n, 2);
  cr_assert_eq(out[0].e, s0.e);
  cr_assert_eq(out[1].e, s1.e);
  /* s0 vs s1: neither can be 1 (ranges), so they must be equal: hints say no */
  kn_sym c[1] = {s0};
  cr_assert_eq(kn__broadcast_shapes(1, c, 1, b, &n, out), KN_ESHAPE);
  cr_assert(strstr(kn_last_error(), "The size of tensor a (s0) must match the size of tensor b (s1)"),
            "%s", kn_last_error());
}

Test(constants, fast_paths_need_no_env) {
  kn__shape_env_set_current(NULL);
  kn_sym a = kn__sym_const(7), b = kn__sym_const(-2);
  cr_assert_eq(kn__sym_floordiv(a, b).c, -4);
  cr_assert_eq(kn__sym_mod(a, b).c, -1);
  cr_assert_eq(kn__sym_max(a, b).c, 7);
  cr_assert(kn__sym_guard_eq_int(a, 7));
  kn_sym x[2] = {kn__sym_const(1000), kn__sym_const(1000)}, y[2] = {kn__sym_const(10), kn__sym_const(10)}, o[2];
  int n;
  cr_assert_eq(kn__broadcast_shapes(2, x, 2, y, &n, o), KN_ESHAPE);
  cr_assert_str_eq(kn_last_error(),
                   "The size of tensor a (1000) must match the size of tensor b (10) at "
                   "non-singleton dimension 1 (shapes [1000, 1000] and [10, 10])");
}
