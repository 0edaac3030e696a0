/*
** test_threads.c: kn_set_num_threads / KILN_NUM_THREADS govern the team
** size of kiln's parallel loops on every thread that calls into kiln.
*/
#include <criterion/criterion.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/threads.h"
#include "support/log_capture.h"

Test(threads, rejects_counts_out_of_range) {
  int before = kn_get_num_threads();
  int bad[] = {0, -1, KN_MAX_THREADS + 1};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cr_assert_eq(kn_set_num_threads(bad[i]), KN_EINVAL);
    char found[32];
    snprintf(found, sizeof found, "found %d", bad[i]);
    cr_assert(strstr(kn_last_error(), "expected a number of threads from 1 to 4096"),
              "%s", kn_last_error());
    cr_assert(strstr(kn_last_error(), found), "%s", kn_last_error());
  }
  cr_assert_eq(kn_get_num_threads(), before, "a refused value changed the setting");
}

Test(threads, parses_the_environment_value) {
  struct { const char *v; int n; } ok[] = {{"1", 1}, {"16", 16}, {" 3 ", 3}, {"4096", 4096}};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    int n = 0;
    char why[160] = "";
    cr_assert(kn__threads_parse(ok[i].v, &n, why, sizeof why), "'%s': %s", ok[i].v, why);
    cr_assert_eq(n, ok[i].n, "'%s'", ok[i].v);
  }
  const char *bad[] = {"", "0", "-2", "4097", "four", "4x", "2.5", "+3", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int n = -7;
    char why[160] = "";
    cr_assert(!kn__threads_parse(bad[i], &n, why, sizeof why), "'%s' accepted", bad[i]);
    cr_assert_eq(n, -7);
    char found[64];
    snprintf(found, sizeof found, "found '%s'", bad[i]);
    cr_assert(strstr(why, "expected a whole number of threads from 1 to 4096"), "%s", why);
    cr_assert(strstr(why, found), "%s", why);
  }
}

static void *team_on_new_thread(void *out) {
  *(int *)out = kn__threads_team_size();
  return NULL;
}

static int team_elsewhere(void) {
  pthread_t th;
  int size = -1;
  cr_assert_eq(pthread_create(&th, NULL, team_on_new_thread, &size), 0);
  pthread_join(th, NULL);
  return size;
}

/* OMP_NUM_THREADS=2 in the test environment; the setting overrides it on
** this thread, on a thread started later and on one that already ran. */
Test(threads, setting_reaches_every_thread) {
  cr_assert_eq(kn_set_num_threads(1), KN_OK);
  cr_assert_eq(kn_get_num_threads(), 1);
  cr_assert_eq(kn__threads_team_size(), 1);
  cr_assert_eq(team_elsewhere(), 1);
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  cr_assert_eq(kn__threads_team_size(), 2);
  cr_assert_eq(team_elsewhere(), 2);
}

static void *set_one(void *arg) {
  (void)arg;
  kn_set_num_threads(1);
  return NULL;
}

/* A value set on another thread applies at this thread's next entry into
** kiln: here, an eager op through the dispatcher (OpenMP's own count for this
** thread, which oneDNN and the kernels read, changes with it). */
Test(threads, a_value_set_elsewhere_applies_at_the_next_op) {
  cr_assert_eq(kn_set_num_threads(2), KN_OK);
  cr_assert_eq(omp_get_max_threads(), 2);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, set_one, NULL), 0);
  pthread_join(th, NULL);
  cr_assert_eq(omp_get_max_threads(), 2, "applied before any kiln call on this thread");
  kn_tensor *a = kn_ones(KN_SHAPE(3), KN_FLOAT32);
  kn_tensor *b = kn_add(a, a);
  cr_assert(b, "%s", kn_last_error());
  cr_assert_eq(omp_get_max_threads(), 1);
  cr_assert_eq(kn_get_num_threads(), 1);
  kn_release(a);
  kn_release(b);
}

Test(threads, environment_sets_the_first_value) {
  setenv("KILN_NUM_THREADS", "1", 1);
  cr_assert_eq(kn_get_num_threads(), 1);
  cr_assert_eq(kn__threads_team_size(), 1);
  cr_assert_eq(team_elsewhere(), 1);
}

Test(threads, a_malformed_environment_value_warns_once_and_is_ignored) {
  setenv("KILN_NUM_THREADS", "all", 1);
  kn_test_log_clean();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  int n = kn_get_num_threads(), team = kn__threads_team_size();
  (void)team_elsewhere();
  kn_test_capture_end(&r);
  cr_assert_eq(n, 2, "OpenMP's default (OMP_NUM_THREADS=2 in the test environment)");
  cr_assert_eq(team, 2);
  const kn_test_record *w = kn_test_get_record(&r, "KILN_NUM_THREADS");
  cr_assert(w, "expected exactly one warning naming KILN_NUM_THREADS, got %zu records", r.n);
  cr_assert(strstr(w->message, "found 'all'"), "%s", w->message);
  cr_assert_eq(w->level, KN_WARNING);
  kn_test_records_free(&r);
}
