/*
** test_dynamo_errors.c: errors that say what is wrong. kn_trace_enable on
** an unusable path fails with the path and the reason (KILN_TRACE warns
** once on stderr); the "(did an earlier call fail? ...)" hint quotes only a
** fresh error, first line only, or nothing; kn_module_get names the missing
** path and the nearest existing ones; NULL and negative arguments name
** themselves; kn_last_status() is reset by a successful op call; the
** cache-limit warning points at kiln's docs and does not ask for logs that
** are already on; a call that fills or reads tensor memory inside a compiled
** function is named as the user called it (kn_from_floats, not the kn_data
** it uses).
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kiln/compile.h"
#include "kiln/data.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"
#include "trace/trace.h"

TestSuite(errors, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

/* ---- trace paths ------------------------------------------------------------------------ */
Test(errors, trace_enable_on_a_file_fails_with_path_and_reason) {
  char *dir = kn_test_tmpdir();
  char file[4200], sub[4300], want[4400];
  snprintf(file, sizeof file, "%s/plain", dir);
  FILE *f = fopen(file, "w");
  cr_assert(f);
  fclose(f);
  cr_expect_eq(kn_trace_enable(file), KN_EIO);
  snprintf(want, sizeof want, "kn_trace_enable: cannot use '%s' as the trace directory: Not a directory",
           file);
  cr_expect_str_eq(kn_last_error(), want);
  cr_expect_not(kn_trace_is_enabled());
  snprintf(sub, sizeof sub, "%s/deeper/still", file);
  cr_expect_eq(kn_trace_enable(sub), KN_EIO);
  snprintf(want, sizeof want, "kn_trace_enable: cannot create the trace directory '%s/deeper': Not a directory",
           file);
  cr_expect_str_eq(kn_last_error(), want);
  cr_expect_not(kn_trace_is_enabled());
  /* a usable directory is created at once, the file when the first record comes */
  snprintf(sub, sizeof sub, "%s/new/dir", dir);
  cr_expect_eq(kn_trace_enable(sub), KN_OK, "%s", kn_last_error());
  struct stat s;
  cr_expect(stat(sub, &s) == 0 && S_ISDIR(s.st_mode));
  cr_expect_null(kn_trace_file_path());
  kn_trace_disable();
  kn_test_rmdir(dir);
}

static void env_trace(void *ud) {
  setenv("KILN_TRACE", ud, 1);
  (void)kn__trace_init_from_env();
  unsetenv("KILN_TRACE");
}

Test(errors, kiln_trace_env_warns_once_with_path_and_reason) {
  char *dir = kn_test_tmpdir();
  char file[4200], want[4400];
  snprintf(file, sizeof file, "%s/plain", dir);
  FILE *f = fopen(file, "w");
  cr_assert(f);
  fclose(f);
  char *err = kn_test_capture_stderr(env_trace, file);
  snprintf(want, sizeof want,
           "kiln: KILN_TRACE: kn_trace_enable: cannot use '%s' as the trace directory: Not a "
           "directory; no trace is written\n", file);
  cr_expect_str_eq(err, want);
  free(err);
  kn_test_rmdir(dir);
}

/* ---- the NULL-argument hint ---------------------------------------------------------------- */
static kn_tensor *x3(void) { return kn_ones(KN_SHAPE(3), KN_FLOAT32); }

Test(errors, hint_quotes_the_fresh_error_only) {
  kn_scope_begin();
  kn_tensor *bad = kn_reshape(x3(), KN_SHAPE(2, 2));
  cr_assert_null(bad);
  char first[512];
  snprintf(first, sizeof first, "%s", kn_last_error());
  cr_assert_null(kn_add(bad, x3()));
  char want[1024];
  snprintf(want, sizeof want, "add: argument 0 is a NULL tensor (did an earlier call fail? %s)",
           first);
  cr_expect_str_eq(kn_last_error(), want);
  /* the last error is not one that returned a NULL tensor: nothing is quoted */
  kn_tensor *leaf = x3();
  cr_assert_eq(kn_backward(leaf, NULL), KN_EAUTOGRAD);
  cr_assert_null(kn_add(NULL, x3()));
  cr_expect_str_eq(kn_last_error(), "add: argument 0 is a NULL tensor");
  kn_clear_error();
  cr_assert_null(kn_mul(x3(), NULL));
  cr_expect_str_eq(kn_last_error(), "mul: argument 1 is a NULL tensor");
  kn_scope_end();
}

Test(errors, hint_does_not_grow_along_a_chain) {
  kn_scope_begin();
  kn_tensor *t = kn_reshape(x3(), KN_SHAPE(2, 2));
  char first[512];
  snprintf(first, sizeof first, "%s", kn_last_error());
  for (int i = 0; i < 20; i++) t = kn_neg(t);
  char want[1024];
  snprintf(want, sizeof want, "neg: argument 0 is a NULL tensor (did an earlier call fail? %s)",
           first);
  cr_expect_str_eq(kn_last_error(), want);
  kn_scope_end();
}

/* ---- kn_module_get ------------------------------------------------------------------------- */
Test(errors, module_get_names_missing_path_and_nearest) {
  kn_scope_begin();
  kn_module *m = kn_module_new(), *fc1 = kn_module_new(), *fc2 = kn_module_new();
  kn_module_add_param(fc1, "weight", kn_ones(KN_SHAPE(2, 2), KN_FLOAT32));
  kn_module_add_param(fc2, "weight", kn_ones(KN_SHAPE(2, 2), KN_FLOAT32));
  kn_module_add_param(fc2, "bias", kn_ones(KN_SHAPE(2), KN_FLOAT32));
  kn_module_add_child(m, "fc1", fc1);
  kn_module_add_child(m, "fc2", fc2);
  cr_expect_null(kn_module_get(m, "fc2.weights"));
  cr_expect_str_eq(kn_last_error(), "kn_module_get: no tensor 'fc2.weights' in the module "
                                    "(nearest: 'fc2.weight', 'fc1.weight', 'fc2.bias')");
  cr_expect_null(kn_linear(x3(), kn_module_get(m, "fc3.weight"), NULL));
  cr_expect(strstr(kn_last_error(), "(did an earlier call fail? kn_module_get: no tensor "
                                    "'fc3.weight' in the module (nearest: 'fc1.weight', 'fc2.weight', "),
            "%s", kn_last_error());
  kn_module_free(m);
  kn_scope_end();
}

/* ---- arguments that name themselves ------------------------------------------------------ */
Test(errors, null_and_negative_arguments) {
  cr_expect(isnan(kn_get(NULL, (int64_t[]){0})));
  cr_expect_str_eq(kn_last_error(), "kn_get: expected a tensor, got NULL");
  cr_expect_eq(kn_print_tensor(NULL, NULL), KN_EINVAL);
  cr_expect_str_eq(kn_last_error(), "kn_print_tensor: expected a tensor, got NULL");
  cr_expect_null(kn_zeros(-1, NULL, KN_FLOAT32));
  cr_expect_str_eq(kn_last_error(), "kn_zeros: full: argument 0: expected a list length >= 0, got -1");
  cr_expect_null(kn_ones(2, NULL, KN_FLOAT32));
  cr_expect_str_eq(kn_last_error(), "kn_ones: full: argument 0: int list of length 2 is NULL");
}

/* ---- when kn_last_status() resets -------------------------------------------------------- */
/* Documented in kiln/core.h: like errno, the last error stays until the
** next failure or kn_clear_error(); successful calls do not reset it. */
Test(errors, last_status_is_sticky_until_cleared) {
  kn_scope_begin();
  cr_assert_null(kn_reshape(x3(), KN_SHAPE(2, 2)));
  cr_expect_eq(kn_last_status(), KN_ESHAPE);
  cr_expect(kn_neg(x3()));
  cr_expect_eq(kn_last_status(), KN_ESHAPE);
  kn_clear_error();
  cr_expect_eq(kn_last_status(), KN_OK);
  cr_expect_str_eq(kn_last_error(), "");
  kn_scope_end();
}

/* ---- the cache-limit warning ----------------------------------------------------------------- */
static kn_tensor *double_it(kn_tensor *x) { return kn_mul_scalar(x, kn_float(2)); }

static void limit_body(const kn_test_records *r, void *ud) {
  (void)ud;
  kn_reset();
  kn_compile_options o = {.cache_size_limit = 1, .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(double_it, &o);
  kn_scope_begin();
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(2), KN_FLOAT32)));
  cr_assert(kn_call_t(f, kn_ones(KN_SHAPE(3), KN_FLOAT32)));
  kn_scope_end();
  kn_compiled_free(f);
  const kn_test_record *w = kn_test_get_record(r, "hit config.cache_size_limit");
  cr_assert(w);
  cr_expect_null(strstr(w->message, "pytorch.org"), "%s", w->message);
  cr_expect(strstr(w->message, "see docs/DYNAMO.md, \"Cache, recompiles and the limit\""), "%s",
            w->message);
  cr_expect_null(strstr(w->message, "use KILN_LOGS"), "%s", w->message);
  cr_expect(strstr(w->message, "The recompilation reasons are logged above (recompiles)."), "%s",
            w->message);
}

Test(errors, cache_limit_warning_with_recompiles_on) {
  kn_log_setting s[] = {KN_LOG_FLAG("recompiles", 1)};
  kn_test_logging_twice(s, 1, limit_body, NULL);
}

/* ---- data calls inside a compiled function ------------------------------------------ */
static kn_tensor *from_floats_fn(kn_tensor *x) {
  const float v[3] = {1, 2, 3};
  return kn_add(x, kn_from_floats(v, KN_SHAPE(3)));
}
static kn_tensor *from_ints_fn(kn_tensor *x) {
  const int64_t v[3] = {1, 2, 3};
  return kn_add(x, kn_from_ints(v, KN_SHAPE(3)));
}
static kn_tensor *load_csv_fn(kn_tensor *x) {
  kn_tensor *rows = kn_load_csv(KN_FIXTURE_DIR "/digits_head.csv", KN_FLOAT32);
  return rows ? kn_add(x, kn_sum(rows)) : NULL;
}
static kn_tensor *loader_fn(kn_tensor *x) {
  kn_tensor *t = kn_arange_dtype(kn_int(0), kn_int(6), kn_int(1), KN_FLOAT32);
  kn_dataset *ds = kn_dataset_new(1, &t);
  kn_loader *ld = kn_loader_new(ds, 2, false, false, 1);
  kn_tensor *b = NULL;
  bool ok = kn_loader_next(ld, &b);
  kn_loader_free(ld);
  kn_dataset_free(ds);
  return ok ? kn_add(x, kn_sum(b)) : NULL;
}

/* The compiled call fails with the call the user made and its line. */
static void expect_named(kn_tensor *(*fn)(kn_tensor *), const char *name, const char *api) {
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))fn, 1, name, __FILE__, __LINE__, NULL);
  kn_scope_begin();
  cr_expect_null(kn_call_t(f, kn_ones(KN_SHAPE(3), KN_FLOAT32)), "%s inside must fail", api);
  const char *e = kn_last_error();
  char want[300];
  snprintf(want, sizeof want, "Cannot access data pointer of Tensor (a traced stand-in): %s at %s:",
           api, __FILE__);
  cr_expect(strstr(e, want), "%s", e);
  snprintf(want, sizeof want, "inside compiled function '%s' tensors are traced stand-ins without "
           "data, so none can be filled from C memory or a file; create the tensor before the "
           "compiled call and use it inside (a constant of the graph) or pass it as an argument",
           name);
  cr_expect(strstr(e, want), "%s", e);
  cr_expect_null(strstr(e, "kn_data"), "the user did not call kn_data: %s", e);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(errors, data_calls_inside_are_named_as_called) {
  expect_named(from_floats_fn, "from_floats_fn", "kn_from_floats");
  expect_named(from_ints_fn, "from_ints_fn", "kn_from_ints");
  expect_named(load_csv_fn, "load_csv_fn", "kn_load_csv");
  expect_named(loader_fn, "loader_fn", "kn_loader_next");
}

/* Outside a compiled function they work, and a meta tensor's missing data is
** named the same way. */
Test(errors, data_calls_outside_work) {
  kn_scope_begin();
  const float v[3] = {1, 2, 3};
  kn_tensor *t = kn_from_floats(v, KN_SHAPE(3));
  cr_assert(t, "%s", kn_last_error());
  cr_expect_eq(kn_get(t, (int64_t[]){2}), 3.0);
  cr_expect_null(kn_from_floats(NULL, KN_SHAPE(3)));
  cr_expect_str_eq(kn_last_error(), "kn_from_floats: data is NULL");
  kn_scope_end();
}
