/*
** test_autograd_support.c: the shared test support: the torch fixture
** reader (tests/fixtures/selftest.json, written by tools/ref/gen_selftest.py)
** and the tensor comparison rules.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

static int64_t live0;
static void init(void) { live0 = kn_live_tensors(); }
static void fini(void) { cr_assert_eq(kn_live_tensors(), live0, "leaked tensors"); }

TestSuite(fixture, .init = init, .fini = fini);

Test(fixture, reads_cases_inputs_params) {
  kn_fixture *f = kn_fixture_load_named("selftest.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  cr_assert_eq(kn_fixture_ncases(f), 4);
  const json_t *c = kn_fixture_find(f, "square_sum");
  cr_assert_not_null(c);
  cr_assert_str_eq(kn_fixture_op(c), "mul");
  cr_assert_eq(kn_fixture_ninputs(c), 1);
  cr_assert_null(kn_fixture_grad_output(c, 0), "gradients of sum(): no grad_output");
  kn_scope_begin();
  kn_tensor *x = kn_fixture_tensor(kn_fixture_input(c, 0));
  cr_assert_not_null(x, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(x), KN_FLOAT64);
  cr_assert_eq(kn_ndim(x), 2);
  cr_assert_eq(kn_size(x, 1), 3);
  cr_assert(kn_requires_grad(x));
  cr_assert_eq(kn_get(x, (int64_t[]){0, 1}), -2.0);
  cr_assert_eq(kn_get(x, (int64_t[]){1, 2}), -1.5);
  kn_scope_end();

  const json_t *s = kn_fixture_find(f, "specials");
  cr_assert_eq(kn_fixture_param_double(s, "alpha", 0), 2.5);
  cr_assert_eq(kn_fixture_param_bool(s, "keepdim", false), true);
  cr_assert_eq(kn_fixture_param_int(s, "missing", 7), 7);
  int64_t dims[4];
  cr_assert_eq(kn_fixture_param_ints(s, "dims", dims, 4), 2);
  cr_assert_eq(dims[1], 1);
  cr_assert_eq(kn_fixture_param_ints(s, "alpha", dims, 4), -1);
  kn_fixture_free(f);
}

Test(fixture, special_values_and_nan_equality) {
  kn_fixture *f = kn_fixture_load_named("selftest.json");
  const json_t *c = kn_fixture_find(f, "specials");
  kn_tensor *x = kn_fixture_tensor(kn_fixture_input(c, 0));
  cr_assert_eq(kn_tensor_dtype(x), KN_FLOAT32);
  cr_assert(isnan(kn_get(x, (int64_t[]){0})));
  cr_assert_eq(kn_get(x, (int64_t[]){1}), INFINITY);
  cr_assert_eq(kn_get(x, (int64_t[]){2}), -INFINITY);
  char why[256];
  cr_assert(kn_fixture_close(x, kn_fixture_output(c, 0), 0, 0, why, sizeof why), "%s", why);
  /* a changed infinity is a mismatch at its index */
  ((float *)kn_data(x))[2] = INFINITY;
  cr_assert_not(kn_fixture_close(x, kn_fixture_output(c, 0), 1, 1, why, sizeof why));
  cr_assert(strstr(why, "flat index 2") != NULL, "%s", why);
  ((float *)kn_data(x))[2] = -INFINITY;
  ((float *)kn_data(x))[0] = 1.0f; /* a number where NaN is expected */
  cr_assert_not(kn_fixture_close(x, kn_fixture_output(c, 0), 1, 1, why, sizeof why));
  cr_assert(strstr(why, "flat index 0") != NULL, "%s", why);
  kn_release(x);
  kn_fixture_free(f);
}

Test(fixture, exact_integers_and_bools) {
  kn_fixture *f = kn_fixture_load_named("selftest.json");
  const json_t *c = kn_fixture_find(f, "ints");
  kn_tensor *a = kn_fixture_tensor(kn_fixture_input(c, 0));
  kn_tensor *b = kn_fixture_tensor(kn_fixture_input(c, 1));
  kn_tensor *o = kn_fixture_tensor(kn_fixture_output(c, 0));
  cr_assert_eq(kn_tensor_dtype(a), KN_INT64);
  cr_assert_eq(((int64_t *)kn_data(a))[3], -4);
  cr_assert_eq(kn_tensor_dtype(b), KN_BOOL);
  cr_assert_eq(((uint8_t *)kn_data(b))[0], 1);
  cr_assert_eq(((int64_t *)kn_data(o))[0], (INT64_C(1) << 40) + 1);
  char why[256];
  cr_assert_not(kn_fixture_close(a, kn_fixture_output(c, 0), 0, 0, why, sizeof why));
  cr_assert(strstr(why, "sizes differ: got [2, 2], expected [1]") != NULL, "%s", why);
  cr_assert_not(kn_fixture_close(b, kn_fixture_input(c, 0), 0, 0, why, sizeof why));
  cr_assert(strstr(why, "dtype differs: got bool, expected int64") != NULL, "%s", why);
  kn_release(a);
  kn_release(b);
  kn_release(o);
  kn_fixture_free(f);
}

Test(fixture, tolerance_rule_and_tensor_compare) {
  cr_assert(kn_values_close(1.0 + 1e-6, 1.0, 1e-5, 0));
  cr_assert_not(kn_values_close(1.0 + 1e-4, 1.0, 1e-5, 0));
  cr_assert(kn_values_close(1e-9, 0.0, 0, 1e-8));
  cr_assert(kn_values_close(NAN, NAN, 0, 0));
  cr_assert_not(kn_values_close(INFINITY, 1e308, 1, 1));
  kn_scope_begin();
  kn_tensor *a = kn_fixture_from_doubles(KN_FLOAT32, KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *b = kn_fixture_from_doubles(KN_FLOAT64, KN_SHAPE(2, 2), (double[]){1, 2, 3, 4.5});
  char why[256];
  cr_assert(kn_tensors_close(a, a, 0, 0, true, why, sizeof why), "%s", why);
  cr_assert_not(kn_tensors_close(a, b, 0, 0, false, why, sizeof why));
  cr_assert(strstr(why, "flat index 3: got 4, expected 4.5") != NULL, "%s", why);
  cr_assert_not(kn_tensors_close(a, b, 1, 1, true, why, sizeof why));
  cr_assert(strstr(why, "dtype differs") != NULL, "%s", why);
  kn_scope_end();
}

Test(fixture, malformed_input_is_an_error) {
  cr_assert_null(kn_fixture_load("/nonexistent/file.json"));
  cr_assert_eq(kn_last_status(), KN_EPARSE);
  json_t *bad = json_pack("{s:s, s:[i], s:[i,i]}", "dtype", "float32", "sizes", 3, "values",
                          1, 2);
  cr_assert_null(kn_fixture_tensor(bad));
  cr_assert(strstr(kn_last_error(), "expected 3 values, found 2") != NULL, "%s",
            kn_last_error());
  json_t *bad2 = json_pack("{s:s, s:[i], s:[s]}", "dtype", "float32", "sizes", 1, "values",
                           "one");
  cr_assert_null(kn_fixture_tensor(bad2));
  cr_assert(strstr(kn_last_error(), "value 0 is not a number") != NULL, "%s", kn_last_error());
  json_t *bad3 = json_pack("{s:s, s:[], s:[i]}", "dtype", "complex", "sizes", "values", 1);
  cr_assert_null(kn_fixture_tensor(bad3));
  cr_assert(strstr(kn_last_error(), "unknown dtype complex") != NULL, "%s", kn_last_error());
  json_decref(bad);
  json_decref(bad2);
  json_decref(bad3);
}
