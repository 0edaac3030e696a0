/*
** test_dynamo_forms.c: the tensor forms KN_COMPILE accepts, up to 8
** parameters and with const kn_tensor * parameters, called with the right
** arguments (each argument weighted by its position, so a wrong order or a
** lost argument changes the result). Rejected forms are compile-time errors:
** tests/compile_forms/check.sh.
*/
#include <criterion/criterion.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/dynamo_util.h"

TestSuite(forms, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

#define T kn_tensor *
#define C const kn_tensor *

static kn_tensor *w(const kn_tensor *t, double k) {
  return kn_mul_scalar((kn_tensor *)t, kn_float(k));
}

static kn_tensor *five(T a, T b, T c, T d, T e) {
  return kn_add(kn_add(kn_add(w(a, 1), w(b, 2)), kn_add(w(c, 3), w(d, 4))), w(e, 5));
}

static kn_tensor *eight(T a, T b, T c, T d, T e, T f, T g, T h) {
  kn_tensor *s = kn_add(five(a, b, c, d, e), w(f, 6));
  return kn_add(kn_add(s, w(g, 7)), w(h, 8));
}

static kn_tensor *const_two(C a, C b) { return kn_add(w(a, 1), w(b, 2)); }

static kn_tensor *const_eight(C a, C b, C c, C d, C e, C f, C g, C h) {
  return eight((T)a, (T)b, (T)c, (T)d, (T)e, (T)f, (T)g, (T)h);
}

static kn_tensor *v(double x) { return kn_full(KN_SHAPE(2), kn_float(x), KN_FLOAT32); }

static double first(kn_tensor *t) {
  cr_assert(t, "%s", kn_last_error());
  return kn_get(t, (int64_t[]){0});
}

Test(forms, five_and_eight_tensor_arguments) {
  kn_compiled *f5 = KN_COMPILE(five, NULL), *f8 = KN_COMPILE(eight, NULL);
  cr_assert(f5 && f8, "%s", kn_last_error());
  kn_scope_begin();
  for (int call = 0; call < 2; call++) { /* traced, then cached */
    /* sum of k * 10^(k-1): every argument lands in its own digit */
    cr_expect_float_eq(first(kn_call_t(f5, v(1), v(10), v(100), v(1000), v(10000))), 54321, 1e-3);
    cr_expect_float_eq(first(kn_call_t(f8, v(1), v(10), v(100), v(1000), v(10000), v(1e5), v(1e6),
                                       v(1e7))), 87654321, 8);
  }
  kn_scope_end();
  kn_compiled_free(f5);
  kn_compiled_free(f8);
}

Test(forms, const_tensor_parameters) {
  kn_compiled *f2 = KN_COMPILE(const_two, NULL), *f8 = KN_COMPILE(const_eight, NULL);
  cr_assert(f2 && f8, "%s", kn_last_error());
  kn_scope_begin();
  for (int call = 0; call < 2; call++) {
    cr_expect_float_eq(first(kn_call_t(f2, v(1), v(10))), 21, 1e-4);
    cr_expect_float_eq(first(kn_call_t(f8, v(1), v(10), v(100), v(1000), v(10000), v(1e5), v(1e6),
                                       v(1e7))), 87654321, 8);
  }
  kn_scope_end();
  kn_compiled_free(f2);
  kn_compiled_free(f8);
}

Test(forms, wrong_argument_count_is_an_error) {
  kn_compiled *f5 = KN_COMPILE(five, NULL);
  kn_scope_begin();
  cr_expect_null(kn_call_t(f5, v(1), v(2)));
  cr_expect_str_eq(kn_last_error(), "five: expected 5 arguments, got 2");
  cr_expect_null(kn_compile_tensor_fn((void (*)(void))five, 9, "five", __FILE__, __LINE__, NULL));
  cr_expect_str_eq(kn_last_error(), "kn_compile_tensor_fn: expected 1 to 8 tensor arguments, got 9");
  kn_scope_end();
  kn_compiled_free(f5);
}
