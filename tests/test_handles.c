/*
** test_handles.c: the checked handle mode (KILN_DEBUG, src/tensor/handles.h).
** A released tensor used again, used after its scope ended, or released
** twice is an error value whose message names the handle, where it was
** created and where it was released; the error is logged once; the tensors
** live at exit are reported grouped by where they were created. Each test
** switches the mode itself, so the file runs the same in every build.
** Without the mode, releasing twice is still an error rather than a crash.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "tensor/handles.h"

static void checked(bool on) {
  cr_assert_eq(kn__handles_set_checked(on), KN_OK, "%s", kn_last_error());
}

/* The site text of a line of this file inside function fn. */
static const char *at(char *buf, size_t n, int line, const char *fn) {
  snprintf(buf, n, "%s:%d in %s", __FILE__, line, fn);
  return buf;
}

Test(handles, use_after_release_is_an_error_naming_both_places) {
  checked(true);
  char made[600], gone[600], want[2000];
  int l_made = __LINE__ + 1;
  kn_tensor *x = kn_full(KN_SHAPE(1), kn_float(2), KN_FLOAT32);
  int l_gone = __LINE__ + 1;
  kn_release(x);
  /* before the fix: the slot was reused and x + x read another tensor */
  kn_tensor *y = kn_add(x, x);
  cr_assert_null(y);
  cr_assert_eq(kn_last_status(), KN_EINVAL);
  snprintf(want, sizeof want,
           "add: argument 0 is a released tensor: handle %p (tensor #1, float32 [1]) was created "
           "at %s and released at %s; a tensor cannot be used after its last reference is "
           "released",
           (void *)x, at(made, sizeof made, l_made, __func__), at(gone, sizeof gone, l_gone, __func__));
  cr_assert_str_eq(kn_last_error(), want);
  cr_assert_eq(kn_live_tensors(), 0);
}

Test(handles, accessors_and_in_place_ops_refuse_a_released_tensor) {
  checked(true);
  kn_tensor *x = kn_ones(KN_SHAPE(2, 3), KN_FLOAT64);
  kn_release(x);
  const char *prefix = "kn_ndim: the tensor is a released tensor: handle ";
  cr_assert_eq(kn_ndim(x), -1);
  cr_assert_eq(strncmp(kn_last_error(), prefix, strlen(prefix)), 0, "%s", kn_last_error());
  cr_assert(strstr(kn_last_error(), "(tensor #1, float64 [2, 3])"), "%s", kn_last_error());
  cr_assert_null(kn_data(x));
  cr_assert_eq(kn_numel(x), -1);
  cr_assert_null(kn_sizes(x));
  double v = 0;
  cr_assert_eq(kn_item_double(x, &v), KN_EINVAL);
  cr_assert_eq(kn_mul_scalar_(x, kn_float(2)), KN_EINVAL);
  prefix = "mul_: argument 0 is a released tensor: handle ";
  cr_assert_eq(strncmp(kn_last_error(), prefix, strlen(prefix)), 0, "%s", kn_last_error());
  cr_assert_null(kn_retain(x));
  cr_assert_eq(kn_backward(x, NULL), KN_EINVAL);
  prefix = "kn_backward: the tensor is a released tensor: handle ";
  cr_assert_eq(strncmp(kn_last_error(), prefix, strlen(prefix)), 0, "%s", kn_last_error());
  cr_assert_eq(kn_live_tensors(), 0);
}

Test(handles, a_tensor_used_after_its_scope_ended_names_the_scope_end) {
  checked(true);
  char made[600], gone[600], want[2000];
  kn_scope_begin();
  int l_made = __LINE__ + 1;
  kn_tensor *x = kn_zeros(KN_SHAPE(1), KN_FLOAT32);
  int l_gone = __LINE__ + 1;
  kn_scope_end();
  /* before the fix: printed tensor(0.) from whatever took the slot */
  cr_assert_null(kn_tensor_to_string(x));
  snprintf(want, sizeof want,
           "kn_tensor_to_string: the tensor is a released tensor: handle %p (tensor #1, float32 "
           "[1]) was created at %s and released at %s; a tensor cannot be used after its last "
           "reference is released",
           (void *)x, at(made, sizeof made, l_made, __func__), at(gone, sizeof gone, l_gone, __func__));
  cr_assert_str_eq(kn_last_error(), want);
  cr_assert_eq(kn_print_tensor(x, NULL), KN_EINVAL);
  cr_assert_eq(strncmp(kn_last_error(), "kn_print_tensor: the tensor is a released tensor: ", 50),
               0, "%s", kn_last_error());
}

Test(handles, releasing_twice_is_an_error_not_a_crash) {
  checked(true);
  char made[600], gone[600], want[2000];
  int l_made = __LINE__ + 1;
  kn_tensor *x = kn_ones(KN_SHAPE(4), KN_INT64);
  int l_gone = __LINE__ + 1;
  kn_release(x);
  kn_clear_error();
  kn_release(x);
  cr_assert_eq(kn_last_status(), KN_EINVAL);
  snprintf(want, sizeof want,
           "kn_release: tensor released twice: handle %p (tensor #1, int64 [4]) was created at %s "
           "and already released at %s; each reference is released once",
           (void *)x, at(made, sizeof made, l_made, __func__), at(gone, sizeof gone, l_gone, __func__));
  cr_assert_str_eq(kn_last_error(), want);
  kn_tensor *y = kn_ones(KN_SHAPE(4), KN_INT64); /* the counts stay right */
  cr_assert_eq(kn_live_tensors(), 1);
  kn_release(y);
  cr_assert_eq(kn_live_tensors(), 0);
}

Test(handles, releasing_twice_without_checks_is_still_an_error) {
#if defined(__SANITIZE_ADDRESS__)
  /* the pool poisons a released struct: AddressSanitizer reports the
  ** second release itself (use-after-poison), as it should */
  cr_skip_test("under AddressSanitizer, which reports the second release itself");
#endif
  checked(false);
  kn_tensor *a = kn_ones(KN_SHAPE(4), KN_INT64), *x = kn_ones(KN_SHAPE(4), KN_INT64);
  kn_release(a); /* the pool of free structs is not empty: x's link points at a */
  kn_release(x);
  kn_clear_error();
  kn_release(x); /* before the fix: a corrupted pool list, a crash at exit */
  char want[600];
  snprintf(want, sizeof want,
           "kn_release: tensor released twice: handle %p has no reference left; each reference "
           "is released once (run with KILN_DEBUG=1 to learn where it was created and released)",
           (void *)x);
  cr_assert_str_eq(kn_last_error(), want);
  cr_assert_eq(kn_live_tensors(), 0);
}

typedef struct logged {
  int n;
  char first[1000];
} logged;

static void sink(const kn_log_record *r, void *ud) {
  logged *l = ud;
  if (r->level == KN_ERROR && l->n++ == 0) snprintf(l->first, sizeof l->first, "%s", r->message);
}

Test(handles, each_dead_handle_is_logged_once) {
  checked(true);
  logged l = {0, ""};
  cr_assert_eq(kn_log_add_sink(sink, &l, KN_LOG_SINK_EXCLUSIVE), KN_OK);
  kn_tensor *x = kn_ones(KN_SHAPE(1), KN_FLOAT32), *z = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  kn_release(x);
  kn_release(z);
  cr_assert_null(kn_neg(x));
  char first[1000];
  snprintf(first, sizeof first, "%s", kn_last_error());
  cr_assert_null(kn_neg(x));
  cr_assert_null(kn_exp(x));
  cr_assert_eq(l.n, 1);
  cr_assert_str_eq(l.first, first);
  cr_assert_null(kn_neg(z)); /* another handle: logged too */
  cr_assert_eq(l.n, 2);
  kn_log_remove_sink(sink, &l);
}

/* tests/handles/nodebug_release.c, built with -g0 */
kn_tensor *handles_nodebug_make_and_release(void);

Test(handles, code_without_debug_info_is_named_by_function) {
  checked(true);
  kn_tensor *x = handles_nodebug_make_and_release();
  cr_assert_null(kn_neg(x));
  char want[1000];
  snprintf(want, sizeof want,
           "neg: argument 0 is a released tensor: handle %p (tensor #1, float32 [3]) was created "
           "at handles_nodebug_make_and_release (no debug info) and released at "
           "handles_nodebug_make_and_release (no debug info); a tensor cannot be used after its "
           "last reference is released", (void *)x);
  cr_assert_str_eq(kn_last_error(), want);
}

Test(handles, an_unknown_handle_is_refused_without_reading_it) {
  checked(true);
  static char not_a_tensor[512]; /* never a tensor: kiln must not read it */
  kn_tensor *bogus = (kn_tensor *)not_a_tensor;
  cr_assert_null(kn_relu(bogus));
  char want[600];
  snprintf(want, sizeof want,
           "relu: argument 0 is not a live tensor: kiln has no record of handle %p (released "
           "more than 65536 releases ago, so KILN_DEBUG no longer remembers it, or not a tensor "
           "handle at all)", (void *)bogus);
  cr_assert_str_eq(kn_last_error(), want);
}

Test(handles, a_tensor_far_down_the_quarantine_is_still_named) {
  checked(true);
  kn_tensor *x = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  kn_release(x);
  for (int i = 0; i < 1000; i++) kn_release(kn_ones(KN_SHAPE(1), KN_FLOAT32));
  cr_assert_null(kn_neg(x));
  cr_assert(strstr(kn_last_error(), "is a released tensor: handle "), "%s", kn_last_error());
  cr_assert(strstr(kn_last_error(), "(tensor #1, float32 [1])"), "%s", kn_last_error());
}

/* 1000 steps that never release: 3000 tensors, three creation sites. */
static int l_mul, l_add, l_relu, l_ones;
static void leaky_loop(kn_tensor **keep) {
  l_ones = __LINE__ + 1;
  kn_tensor *x = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  keep[0] = x;
  for (int i = 0; i < 1000; i++) {
    l_mul = __LINE__ + 1;
    kn_tensor *m = kn_mul(x, x);
    l_add = __LINE__ + 1;
    kn_tensor *s = kn_add(m, x);
    l_relu = __LINE__ + 1;
    kn_tensor *r = kn_relu(s);
    keep[1 + 3 * i] = m, keep[2 + 3 * i] = s, keep[3 + 3 * i] = r;
  }
}

static char *expected_report(int max_sites) {
  char sites[4][600];
  at(sites[0], sizeof sites[0], l_mul, "leaky_loop");
  at(sites[1], sizeof sites[1], l_add, "leaky_loop");
  at(sites[2], sizeof sites[2], l_relu, "leaky_loop");
  at(sites[3], sizeof sites[3], l_ones, "leaky_loop");
  char *want = malloc(4000);
  int n = snprintf(want, 4000,
                   "3001 tensors are still live, by where they were created (KILN_DEBUG):");
  /* equal counts: by site text */
  for (int i = 0; i < 3 && i < max_sites; i++) n += snprintf(want + n, 4000 - n, "\n    1000  %s", sites[i]);
  if (max_sites >= 4) n += snprintf(want + n, 4000 - n, "\n       1  %s", sites[3]);
  else n += snprintf(want + n, 4000 - n, "\n    1001  from 2 other places");
  snprintf(want + n, 4000 - n, "\nRelease each reference (kn_release) or create temporaries "
           "inside a scope (kn_scope_begin / kn_scope_end).");
  return want;
}

Test(handles, live_tensors_are_reported_grouped_by_creation_site) {
  checked(true);
  kn_tensor **keep = malloc(3001 * sizeof *keep);
  leaky_loop(keep);
  cr_assert_eq(kn_live_tensors(), 3001);
  char *got = kn__handles_live_report(10), *want = expected_report(10);
  cr_assert_str_eq(got, want);
  free(got), free(want);
  got = kn__handles_live_report(2), want = expected_report(2);
  cr_assert_str_eq(got, want);
  free(got), free(want);
  for (int i = 0; i < 3001; i++) kn_release(keep[i]);
  cr_assert_null(kn__handles_live_report(10));
  free(keep);
}

Test(handles, the_report_is_printed_at_exit) {
  checked(true);
  kn_tensor **keep = malloc(3001 * sizeof *keep);
  leaky_loop(keep); /* once here too, for the line numbers */
  for (int i = 0; i < 3001; i++) kn_release(keep[i]);
  char path[] = "/tmp/kn-handles-exit-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 2);
    leaky_loop(keep);
    exit(0); /* the library's destructor reports the 3001 tensors */
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  FILE *f = fdopen(fd, "r");
  rewind(f);
  char text[8000] = "";
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  unlink(path);
  /* the log prefixes every line; each line of the report is there */
  char *want = expected_report(10);
  for (char *line = strtok(want, "\n"); line; line = strtok(NULL, "\n"))
    cr_assert(strstr(text, line), "missing \"%s\" in:\n%s", line, text);
  free(want);
  free(keep);
  cr_assert(strstr(text, "] 3001 tensors are still live"), "%s", text);
}

Test(handles, switching_modes_needs_no_live_tensor) {
  checked(true);
  kn_tensor *x = kn_ones(KN_SHAPE(1), KN_FLOAT32);
  cr_assert_eq(kn__handles_set_checked(false), KN_ESTATE);
  cr_assert_str_eq(kn_last_error(),
                   "checked handles can be switched only while no tensor is live (1 are)");
  kn_release(x);
  checked(false);
}

Test(handles, kiln_debug_values) {
  cr_assert_eq(kn__handles_mode_from_env(NULL, false), 0);
  cr_assert_eq(kn__handles_mode_from_env(NULL, true), 1);
  cr_assert_eq(kn__handles_mode_from_env("1", false), 1);
  cr_assert_eq(kn__handles_mode_from_env("On", false), 1);
  cr_assert_eq(kn__handles_mode_from_env("0", true), 0);
  cr_assert_eq(kn__handles_mode_from_env("false", true), 0);
  cr_assert_eq(kn__handles_mode_from_env("2", true), -1);
  cr_assert_eq(kn__handles_mode_from_env("", true), -1);
}
