/*
** tests/tsan/criterion/criterion.h: the part of Criterion's API the threaded
** tests use, for the ThreadSanitizer build only (KN_TSAN). Criterion's
** sandbox cannot start under ThreadSanitizer ("Could not initialize
** inheritable arena", Snaipe/Criterion#274), so that build compiles the
** same test sources against this header and runner.c: every test runs in a
** forked child (suite .init, test .init, body, .fini), a failed cr_assert
** ends the test, a failed cr_expect marks it failed and goes on, .timeout
** (default 600 s) kills it.
*/
#ifndef KN_TSAN_CRITERION_H
#define KN_TSAN_CRITERION_H

#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kn_shim_extra {
  int unused_; /* lets the designated initializers follow a leading 0 */
  void (*init)(void);
  void (*fini)(void);
  int timeout;
} kn_shim_extra;

void kn_shim_add_suite(const char *suite, kn_shim_extra x);
void kn_shim_add_test(const char *suite, const char *name, void (*fn)(void), kn_shim_extra x);
/* Report a failed check; a fatal one ends the test. */
void kn_shim_fail(bool fatal, const char *file, int line, const char *expr, const char *fmt, ...);

#define TestSuite(suite, ...)                                                  \
  __attribute__((constructor)) static void kn_shim_suite_##suite(void) {      \
    kn_shim_add_suite(#suite, (kn_shim_extra){0, __VA_ARGS__});                \
  }

#define Test(suite, name, ...)                                                 \
  static void kn_shim_body_##suite##_##name(void);                             \
  __attribute__((constructor)) static void kn_shim_test_##suite##_##name(void) { \
    kn_shim_add_test(#suite, #name, kn_shim_body_##suite##_##name,             \
                     (kn_shim_extra){0, __VA_ARGS__});                         \
  }                                                                            \
  static void kn_shim_body_##suite##_##name(void)

#define KN_SHIM_CHECK(fatal, cond, expr, ...)                                  \
  do {                                                                         \
    if (!(cond)) kn_shim_fail((fatal), __FILE__, __LINE__, (expr), "" __VA_ARGS__); \
  } while (0)

/* Criterion's assertion families: cr_assert_* stops the test, cr_expect_*
** records the failure and goes on. */
#define KN_SHIM_CMP(fatal, a, op, b, ...) KN_SHIM_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define KN_SHIM_STR(fatal, a, op, b, ...)                                      \
  KN_SHIM_CHECK(fatal, strcmp((a), (b)) op 0, #a " " #op " " #b, __VA_ARGS__)
#define cr_assert(c, ...) KN_SHIM_CHECK(true, (c), #c, __VA_ARGS__)
#define cr_expect(c, ...) KN_SHIM_CHECK(false, (c), #c, __VA_ARGS__)
#define cr_assert_not(c, ...) KN_SHIM_CHECK(true, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) KN_SHIM_CHECK(false, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) KN_SHIM_CMP(true, a, ==, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) KN_SHIM_CMP(false, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) KN_SHIM_CMP(true, a, !=, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) KN_SHIM_CMP(false, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) KN_SHIM_CMP(true, a, <, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) KN_SHIM_CMP(false, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) KN_SHIM_CMP(true, a, <=, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) KN_SHIM_CMP(false, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) KN_SHIM_CMP(true, a, >, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) KN_SHIM_CMP(false, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) KN_SHIM_CMP(true, a, >=, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) KN_SHIM_CMP(false, a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...) KN_SHIM_CHECK(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) KN_SHIM_CHECK(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) KN_SHIM_CHECK(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) KN_SHIM_CHECK(false, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) KN_SHIM_STR(true, a, ==, b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) KN_SHIM_STR(false, a, ==, b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) KN_SHIM_STR(true, a, !=, b, __VA_ARGS__)
#define cr_expect_str_neq(a, b, ...) KN_SHIM_STR(false, a, !=, b, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...)                                     \
  KN_SHIM_CHECK(true, fabs((double)(a) - (double)(b)) <= (eps), #a " ~= " #b, __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...)                                     \
  KN_SHIM_CHECK(false, fabs((double)(a) - (double)(b)) <= (eps), #a " ~= " #b, __VA_ARGS__)
#define cr_assert_fail(...) KN_SHIM_CHECK(true, 0, "fail", __VA_ARGS__)
/* A line of the test's log (stderr here). */
#define cr_log_error(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))
/* A skipped test passes here (the runner counts passes and failures). */
#define cr_skip_test(...)                                                      \
  do {                                                                         \
    fprintf(stderr, "[SKIP] " __VA_ARGS__);                                    \
    fprintf(stderr, "\n");                                                     \
    exit(0);                                                                   \
  } while (0)

#endif
