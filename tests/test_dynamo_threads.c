/*
** test_dynamo_threads.c: compiled functions called from several threads.
** Results are compared with eager values computed on the main thread;
** compile counts, the cache limit and its warning stay exact; the MRU list
** stays whole; kn_reset may overlap other threads' calls; traces written by
** several threads read back without defects. Also run under ThreadSanitizer
** (make test-tsan).
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dynamo/dynamo.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"
#include "support/trace_util.h"
#include "trace/reader.h"

TestSuite(threads, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown,
          .timeout = 120);

#define NTHREADS 4
#define NSHAPES 8

static kn_tensor *affine(kn_tensor *a) {
  kn_tensor *r = kn_add_scalar(kn_mul_scalar(a, kn_int(3)), kn_int(1));
  return r;
}

/* A graph break whose answer selects one of two branches. */
static kn_tensor *branchy(kn_tensor *a) {
  kn_tensor *r;
  if (kn_is_true(kn_gt_scalar(kn_sum(a), kn_int(0)))) r = kn_mul_scalar(a, kn_int(2));
  else r = kn_add_scalar(a, kn_int(-5));
  return r;
}

/* ---- inputs and their eager results ------------------------------------------------- */
typedef struct sample {
  kn_tensor *x;       /* owned */
  int64_t n;          /* elements */
  double *expect;     /* eager result, element by element */
} sample;

static double *values_of(kn_tensor *t) {
  int64_t n = kn_numel(t), cols = kn_size(t, 1);
  double *v = malloc(sizeof *v * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = kn_get(t, (int64_t[]){i / cols, i % cols});
  return v;
}

/* Input k: shape (k + 1, 3), values (i - 4) * sign / 2; the eager result of fn. */
static sample make_sample(kn_tensor *(*fn)(kn_tensor *), int k, double sign) {
  sample s;
  kn_scope_begin();
  kn_tensor *x = kn_arange(kn_int(0), kn_int(3 * (k + 1)), kn_int(1));
  x = kn_mul_scalar(kn_add_scalar(kn_reshape(x, KN_SHAPE(k + 1, 3)), kn_int(-4)),
                    kn_float(sign / 2));
  s.x = kn_retain(kn_contiguous(x));
  s.n = kn_numel(s.x);
  s.expect = values_of(fn(s.x));
  kn_scope_end();
  return s;
}

static void free_samples(sample *s, int n) {
  for (int i = 0; i < n; i++) {
    kn_release(s[i].x);
    free(s[i].expect);
  }
}

static bool matches(kn_tensor *y, const sample *s) {
  if (!y || kn_numel(y) != s->n) return false;
  double *v = values_of(y);
  bool ok = memcmp(v, s->expect, sizeof *v * (size_t)s->n) == 0;
  free(v);
  return ok;
}

/* ---- worker threads -------------------------------------------------------------------- */
typedef struct job {
  kn_compiled *f;
  const sample *samples;
  int nsamples;
  int iters;           /* calls per thread, or 0: until `stop` */
  atomic_bool *stop;
  unsigned seed;
  atomic_int *wrong;   /* calls whose result differed from the eager one */
  atomic_int *calls;
} job;

static void *worker(void *ud) {
  job *j = ud;
  unsigned seed = j->seed;
  for (int i = 0; j->iters ? i < j->iters : !atomic_load(j->stop); i++) {
    const sample *s = &j->samples[rand_r(&seed) % (unsigned)j->nsamples];
    kn_scope_begin();
    if (!matches(kn_call_t(j->f, s->x), s)) atomic_fetch_add(j->wrong, 1);
    kn_scope_end();
    atomic_fetch_add(j->calls, 1);
  }
  return NULL;
}

/* Run NTHREADS workers on f; returns the number of wrong results. */
static int run_threads(kn_compiled *f, const sample *s, int n, int iters, atomic_bool *stop,
                       atomic_int *calls) {
  pthread_t th[NTHREADS];
  job jobs[NTHREADS];
  atomic_int wrong = 0;
  for (int t = 0; t < NTHREADS; t++) {
    jobs[t] = (job){f, s, n, iters, stop, 1234u + (unsigned)t * 7919u, &wrong, calls};
    cr_assert_eq(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
  }
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  return atomic_load(&wrong);
}

static int list_length(const kn_compiled *f) {
  int n = 0;
  for (const kn__entry *e = f->entries; e && n <= 1000; e = e->next) n++;
  return n;
}

/* ---- tests ---------------------------------------------------------------------------- */

/* The reported hang: 4 threads, varying shapes, one entry per shape. */
Test(threads, varying_shapes_one_compile_per_shape) {
  sample s[6];
  for (int k = 0; k < 6; k++) s[k] = make_sample(affine, k, 1);
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(affine, &o);
  cr_assert_eq(kn_set_logs_str("recompiles"), KN_OK);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  atomic_int calls = 0;
  cr_expect_eq(run_threads(f, s, 6, 300, NULL, &calls), 0);
  kn_test_capture_end(&r);
  cr_expect_eq(atomic_load(&calls), NTHREADS * 300);
  cr_expect_eq(cc.frame_count, 6, "one compile per shape, got %d", cc.frame_count);
  /* one whole recompile record per compile after the first */
  cr_expect_eq(kn_test_count_artifact(&r, "recompiles"), 5);
  for (size_t i = 0; i < r.n; i++) {
    const char *m = r.v[i].message;
    cr_expect(!strncmp(m, "Recompiling function affine in ", 31), "%s", m);
    cr_expect(strstr(m, "triggered by the following guard failure(s):\n"), "%s", m);
    cr_expect_eq(kn_test_count_sub(m, "Recompiling"), 1, "%s", m);
  }
  kn_test_records_free(&r);
  cr_expect_eq(f->nentries, 6);
  cr_expect_eq(f->ncompiles, 6);
  cr_expect_eq(list_length(f), 6, "the MRU list is whole");
  kn_compiled_free(f);
  free_samples(s, 6);
}

/* cache_size_limit under concurrency: exactly `limit` compiles, exactly one
** warning, and every call past the limit still returns the eager value. */
Test(threads, cache_limit_exact) {
  sample s[NSHAPES];
  for (int k = 0; k < NSHAPES; k++) s[k] = make_sample(affine, k, 1);
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .dynamic = KN_DYNAMIC_FALSE, .cache_size_limit = 3};
  kn_compiled *f = KN_COMPILE(affine, &o);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  atomic_int calls = 0;
  int wrong = run_threads(f, s, NSHAPES, 200, NULL, &calls);
  kn_test_capture_end(&r);
  cr_expect_eq(wrong, 0);
  cr_expect_eq(cc.frame_count, 3, "compiles: %d", cc.frame_count);
  cr_expect_eq(f->nentries, 3);
  cr_expect_eq(list_length(f), 3);
  size_t warnings = 0;
  for (size_t i = 0; i < r.n; i++)
    if (r.v[i].level >= KN_WARNING) {
      warnings++;
      cr_expect(strstr(r.v[i].message, "hit config.cache_size_limit (3)"), "%s", r.v[i].message);
    }
  cr_expect_eq(warnings, 1);
  kn_test_records_free(&r);
  kn_compiled_free(f);
  free_samples(s, NSHAPES);
}

/* Branches traced into an entry while other threads replay it. The compile
** count equals the one-thread run of the same inputs. */
Test(threads, branch_recompiles_racing) {
  sample s[4];
  for (int k = 0; k < 4; k++) s[k] = make_sample(branchy, 2, k % 2 ? -1 : 1);
  /* the same shape, positive and negative sums: one entry, two branches */
  kn_compile_counter one = {0}, many = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &one};
  kn_compiled *f1 = KN_COMPILE(branchy, &o);
  kn_scope_begin();
  for (int k = 0; k < 4; k++) cr_expect(matches(kn_call_t(f1, s[k].x), &s[k]));
  kn_scope_end();
  for (int round = 0; round < 20; round++) {
    kn_compile_counter_clear(&many);
    o.backend_ud = &many;
    kn_compiled *f = KN_COMPILE(branchy, &o);
    atomic_int calls = 0;
    cr_expect_eq(run_threads(f, s, 4, 40, NULL, &calls), 0);
    cr_expect_eq(many.frame_count, one.frame_count, "round %d: %d compiles, one thread: %d",
                 round, many.frame_count, one.frame_count);
    cr_expect_eq(f->ncompiles, f1->ncompiles);
    cr_expect_eq(f->nentries, 1);
    kn_compiled_free(f);
  }
  kn_compiled_free(f1);
  free_samples(s, 4);
}

/* kn_reset from the main thread while workers call (and create and free)
** their own compiled functions. */
typedef struct own_job {
  const sample *samples;
  int nsamples;
  atomic_bool *stop;
  atomic_int *wrong, *calls;
} own_job;

static void *own_worker(void *ud) {
  own_job *j = ud;
  kn_compile_options o = {.dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(affine, &o);
  for (int i = 0; !atomic_load(j->stop); i++) {
    const sample *s = &j->samples[i % j->nsamples];
    kn_scope_begin();
    if (!matches(kn_call_t(f, s->x), s)) atomic_fetch_add(j->wrong, 1);
    kn_scope_end();
    atomic_fetch_add(j->calls, 1);
    if (i % 25 == 24) {
      kn_compiled_free(f);
      f = KN_COMPILE(affine, &o);
    }
  }
  kn_compiled_free(f);
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

Test(threads, reset_while_other_threads_call) {
  sample s[3];
  for (int k = 0; k < 3; k++) s[k] = make_sample(affine, k, 1);
  atomic_bool stop = false;
  atomic_int wrong = 0, calls = 0;
  own_job j = {s, 3, &stop, &wrong, &calls};
  pthread_t th[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) cr_assert_eq(pthread_create(&th[t], NULL, own_worker, &j), 0);
  for (int i = 0; i < 200; i++) {
    kn_reset();
    sleep_ms(5);
  }
  atomic_store(&stop, true);
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  cr_expect_eq(atomic_load(&wrong), 0);
  cr_expect_gt(atomic_load(&calls), 0);
  free_samples(s, 3);
}

/* kn_reset while the workers share one function: busy moments defer the
** forgetting to the next call; every result stays right and the cache
** stays consistent. */
Test(threads, reset_while_threads_share_a_function) {
  sample s[3];
  for (int k = 0; k < 3; k++) s[k] = make_sample(affine, k, 1);
  kn_compile_options o = {.dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(affine, &o);
  atomic_bool stop = false;
  atomic_int wrong = 0, calls = 0;
  pthread_t th[NTHREADS];
  job jobs[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) {
    jobs[t] = (job){f, s, 3, 0, &stop, 7u * (unsigned)t + 1u, &wrong, &calls};
    cr_assert_eq(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
  }
  for (int i = 0; i < 100; i++) {
    kn_reset();
    sleep_ms(5);
  }
  atomic_store(&stop, true);
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  cr_expect_eq(atomic_load(&wrong), 0);
  cr_expect_gt(atomic_load(&calls), 0);
  cr_expect_leq(f->nentries, 3);
  cr_expect_eq(f->ncompiles, f->nentries);
  cr_expect_eq(list_length(f), f->nentries);
  kn_compiled_free(f);
  free_samples(s, 3);
}

/* A compiled function left stale by kn_reset (it was busy) starts over: the
** next call compiles again. */
Test(threads, reset_forgets_entries) {
  sample s = make_sample(affine, 1, 1);
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc};
  kn_compiled *f = KN_COMPILE(affine, &o);
  kn_scope_begin();
  cr_expect(matches(kn_call_t(f, s.x), &s));
  cr_expect(matches(kn_call_t(f, s.x), &s));
  cr_expect_eq(cc.frame_count, 1);
  kn_reset();
  cr_expect(matches(kn_call_t(f, s.x), &s));
  cr_expect_eq(cc.frame_count, 2);
  cr_expect_eq(f->nentries, 1);
  kn_scope_end();
  kn_compiled_free(f);
  free_samples(&s, 1);
}

/* Traces written by several threads: the strict reader finds no defect,
** and each trace has its own describer id. */
static void count_defect(void *ud, const kn__trace_defect *d) {
  (void)d;
  (*(int *)ud)++;
}

static void *own_shapes(void *ud) {
  const sample *s = ud;
  kn_compile_options o = {.dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(affine, &o);
  for (int i = 0; i < 3 * NSHAPES; i++) {
    kn_scope_begin();
    (void)kn_call_t(f, s[i % NSHAPES].x);
    kn_scope_end();
  }
  kn_compiled_free(f);
  return NULL;
}

Test(threads, traces_from_threads_are_well_formed) {
  sample s[NSHAPES];
  for (int k = 0; k < NSHAPES; k++) s[k] = make_sample(affine, k, 1);
  char *dir = kn_test_trace_start();
  pthread_t th[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) cr_assert_eq(pthread_create(&th[t], NULL, own_shapes, s), 0);
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  char *path = kn_trace_file_path();
  cr_assert(path);
  int defects = 0, starts = 0, nids = 0;
  int64_t ids[NTHREADS * NSHAPES + 1];
  kn__trace_reader_opts ro = {.strict = true, .on_defect = count_defect, .ud = &defects};
  kn__trace_reader *rd = kn__trace_reader_open(path, &ro);
  cr_assert(rd, "%s", kn_last_error());
  const kn__trace_record *rec;
  kn_status st;
  while ((st = kn__trace_reader_next(rd, &rec)) == KN_OK && rec) {
    if (!strcmp(rec->event, "dynamo_start")) starts++;
    if (strcmp(rec->event, "describe_tensor")) continue;
    json_t *v = json_object_get(json_object_get(rec->metadata, "describe_tensor"), "describer_id");
    int64_t id = json_integer_value(v);
    bool seen = false;
    for (int i = 0; i < nids; i++) seen |= ids[i] == id;
    if (!seen && nids < NTHREADS * NSHAPES + 1) ids[nids++] = id;
  }
  cr_expect_eq(st, KN_OK, "%s", kn_last_error());
  kn__trace_reader_close(rd);
  cr_expect_eq(defects, 0);
  cr_expect_eq(starts, NTHREADS * NSHAPES, "one frame per thread and shape, got %d", starts);
  cr_expect_eq(nids, starts, "distinct describer ids: %d for %d traces", nids, starts);
  kn_trace_disable();
  free(path);
  kn_test_rmdir(dir);
  free_samples(s, NSHAPES);
}

/* A few seconds of everything at once: two shared functions (one past its
** cache limit, one with branches), random inputs, and resets. */
static void *stress_branchy(void *ud) {
  job *j = ud;
  return worker(j);
}

Test(threads, stress) {
  sample a[NSHAPES], b[4];
  for (int k = 0; k < NSHAPES; k++) a[k] = make_sample(affine, k, 1);
  for (int k = 0; k < 4; k++) b[k] = make_sample(branchy, k, k % 2 ? -1 : 1);
  kn_compile_counter cc = {0};
  kn_compile_options oa = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                           .dynamic = KN_DYNAMIC_FALSE, .cache_size_limit = 4};
  kn_compiled *fa = KN_COMPILE(affine, &oa);
  kn_compiled *fb = KN_COMPILE(branchy, NULL);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  atomic_bool stop = false;
  atomic_int wrong = 0, calls = 0;
  pthread_t th[NTHREADS];
  job jobs[NTHREADS];
  for (int t = 0; t < NTHREADS; t++) {
    bool on_a = t % 2 == 0;
    jobs[t] = (job){on_a ? fa : fb, on_a ? a : b, on_a ? NSHAPES : 4, 0, &stop,
                    99u + (unsigned)t, &wrong, &calls};
    cr_assert_eq(pthread_create(&th[t], NULL, stress_branchy, &jobs[t]), 0);
  }
  time_t t0 = time(NULL);
  while (time(NULL) - t0 < 3) sleep_ms(10);
  atomic_store(&stop, true);
  for (int t = 0; t < NTHREADS; t++) pthread_join(th[t], NULL);
  kn_test_capture_end(&r);
  cr_expect_eq(atomic_load(&wrong), 0, "%d of %d calls wrong", atomic_load(&wrong),
               atomic_load(&calls));
  cr_expect_gt(atomic_load(&calls), NTHREADS);
  cr_expect_eq(cc.frame_count, 4);
  cr_expect_eq(fa->nentries, 4);
  cr_expect_eq(list_length(fa), 4);
  cr_expect_eq(kn_test_count_name(&r, "convert_frame"), 1, "one cache-limit warning");
  kn_test_records_free(&r);
  kn_compiled_free(fa);
  kn_compiled_free(fb);
  free_samples(a, NSHAPES);
  free_samples(b, 4);
}
