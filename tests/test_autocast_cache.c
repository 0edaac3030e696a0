/*
** test_autocast_cache.c: autocast's cast cache (kiln/autocast.h), torch's
** semantics: a float32 leaf that requires grad is cast to the region's dtype
** once per region (counted as aten::_to_copy events by the profiler, and as
** cache entries), inputs that do not require grad are cast at every use, the
** cache is cleared when the outermost region closes, and (kiln's addition)
** a weight changed in place or a cast made under another grad mode is cast
** again. Values with the cache equal those without it bit for bit (the
** same casts and kernels run); the gradient of a weight used twice is the
** sum of both uses rounded once to bfloat16 (summed on the one cast, as in
** torch); each thread has its own cache.
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/autocast.h"
#include "support/fixture.h"

static int64_t live0;
static void setup(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void teardown(void) {
  kn_scope_end();
  kn_autocast_set_cache_enabled(true);
  cr_assert_eq(kn_autocast_enabled(), false);
  cr_assert_eq(kn__autocast_cache_len(), 0);
  cr_assert_eq(kn_live_tensors(), live0);
}
TestSuite(autocast_cache, .init = setup, .fini = teardown);

/* A float32 leaf that requires grad (a parameter). */
static kn_tensor *param(int64_t r, int64_t c) {
  kn_tensor *p = c ? kn_randn(2, (int64_t[]){r, c}, NULL, KN_FLOAT32)
                   : kn_randn(1, (int64_t[]){r}, NULL, KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(p, true), KN_OK);
  return p;
}

/* How many _to_copy calls the profiler saw. */
static int casts_seen(void) {
  int n = 0;
  kn_profiler_event e;
  for (int i = 0; kn_profiler_get_event(i, &e); i++) n += !strcmp(e.name, "aten::_to_copy");
  return n;
}

static void assert_same(kn_tensor *a, kn_tensor *b, const char *what) {
  char why[256];
  cr_assert(a && b, "%s: %s", what, kn_last_error());
  cr_assert_eq(kn_tensor_dtype(a), kn_tensor_dtype(b), "%s", what);
  cr_assert(kn_tensors_close(a, b, 0, 0, true, why, sizeof why), "%s: %s", what, why);
}

/* Two uses of one weight (tied weights): y = linear(linear(x, w, b), w, b)
** and the sum of y as the loss. Returns the number of casts. */
static int tied_step(kn_tensor *x, kn_tensor *w, kn_tensor *b, kn_tensor **y) {
  kn_profiler_start();
  kn_autocast_begin(KN_BFLOAT16);
  *y = kn_linear(kn_linear(x, w, b), w, b);
  int entries = kn__autocast_cache_len();
  kn_autocast_end();
  kn_profiler_stop();
  cr_assert_eq(kn__autocast_cache_len(), 0, "the outermost region's end clears the cache");
  cr_assert(*y, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(*y), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(entries, kn_autocast_cache_enabled() ? 2 : 0);
  return casts_seen();
}

Test(autocast_cache, a_weight_is_cast_once_per_region) {
  kn_tensor *x = kn_randn(2, (int64_t[]){5, 8}, NULL, KN_FLOAT32);
  kn_tensor *w = param(8, 8), *b = param(8, 0);
  kn_tensor *y[2], *gw[2], *gb[2];
  for (int pass = 0; pass < 2; pass++) {
    kn_autocast_set_cache_enabled(pass == 0);
    int n = tied_step(x, w, b, &y[pass]);
    /* x once; w and b once each when cached, at both uses when not */
    cr_assert_eq(n, pass == 0 ? 3 : 5, "pass %d: %d casts", pass, n);
    gw[pass] = kn_clone(kn_grad(w)), gb[pass] = kn_clone(kn_grad(b));
    kn_set_grad(w, NULL), kn_set_grad(b, NULL);
  }
  assert_same(y[0], y[1], "output");
  /* as torch's: the one cast's gradient sums both uses in bfloat16, where
  ** two casts add their float32 gradients at the leaf: the same sum, rounded
  ** to bfloat16 once more */
  assert_same(gw[0], kn_to(kn_to(gw[1], KN_BFLOAT16), KN_FLOAT32), "weight gradient");
  assert_same(gb[0], kn_to(kn_to(gb[1], KN_BFLOAT16), KN_FLOAT32), "bias gradient");
  cr_assert_eq(kn_tensor_dtype(gw[0]), KN_FLOAT32);
}

Test(autocast_cache, only_leaves_that_require_grad_are_cached) {
  kn_tensor *w = param(4, 4);
  kn_tensor *frozen = kn_randn(2, (int64_t[]){4, 4}, NULL, KN_FLOAT32); /* no grad */
  kn_tensor *nonleaf = kn_mul_scalar(w, kn_float(2.0));
  kn_tensor *x = kn_randn(2, (int64_t[]){3, 4}, NULL, KN_FLOAT32);
  kn_autocast_begin(KN_BFLOAT16);
  cr_assert(kn_mm(x, frozen) && kn_mm(x, nonleaf));
  cr_assert_eq(kn__autocast_cache_len(), 0);
  cr_assert(kn_mm(x, w));
  cr_assert_eq(kn__autocast_cache_len(), 1);
  kn_autocast_begin(KN_FLOAT16); /* another dtype: its own entry */
  cr_assert(kn_mm(x, w));
  cr_assert_eq(kn__autocast_cache_len(), 2);
  kn_autocast_end();
  cr_assert_eq(kn__autocast_cache_len(), 2, "an inner region's end keeps the cache");
  kn_autocast_end();
}

/* In-place changes of the weight inside the region (an optimizer step)
** make the next use cast again: the result is that of the new weight. */
Test(autocast_cache, a_weight_changed_in_place_is_cast_again) {
  kn_tensor *w = param(6, 6);
  kn_tensor *x = kn_randn(2, (int64_t[]){2, 6}, NULL, KN_FLOAT32);
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *before = kn_mm(x, w);
  bool prev = kn_no_grad_begin();
  cr_assert_eq(kn_mul_scalar_(w, kn_float(-3.0)), KN_OK);
  kn_no_grad_end(prev);
  kn_profiler_start();
  kn_tensor *after = kn_mm(x, w);
  kn_profiler_stop();
  cr_assert_eq(casts_seen(), 2, "x and the changed w");
  cr_assert_eq(kn__autocast_cache_len(), 1, "the stale entry is replaced");
  kn_autocast_end();
  kn_autocast_set_cache_enabled(false);
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *want = kn_mm(x, w);
  kn_autocast_end();
  assert_same(after, want, "result after the change");
  char why[64];
  cr_assert_not(kn_tensors_close(after, before, 0, 0, true, why, sizeof why),
                "the old weight's cast was used");
}

/* A cast made under no_grad has no history: reused with grad on, the
** weight would get no gradient, so it is cast again. */
static kn_tensor *grad_after_no_grad_use(kn_tensor *x, kn_tensor *w) {
  kn_autocast_begin(KN_BFLOAT16);
  bool prev = kn_no_grad_begin();
  cr_assert(kn_mm(x, w));
  kn_no_grad_end(prev);
  kn_tensor *y = kn_mm(x, w);
  kn_autocast_end();
  cr_assert(kn_requires_grad(y));
  cr_assert_eq(kn_backward(kn_sum(y), NULL), KN_OK, "%s", kn_last_error());
  cr_assert(kn_grad(w), "no gradient reached w");
  kn_tensor *g = kn_clone(kn_grad(w));
  kn_set_grad(w, NULL);
  return g;
}

Test(autocast_cache, a_cast_under_no_grad_is_not_reused_with_grad_on) {
  kn_tensor *w = param(4, 4);
  kn_tensor *x = kn_randn(2, (int64_t[]){3, 4}, NULL, KN_FLOAT32);
  kn_tensor *cached = grad_after_no_grad_use(x, w);
  kn_autocast_set_cache_enabled(false);
  assert_same(cached, grad_after_no_grad_use(x, w), "gradient");
}

/* Two backward passes through one cached cast (gradient accumulation inside
** a region) add up: twice the gradient of one pass. */
Test(autocast_cache, a_cached_cast_serves_two_backward_passes) {
  kn_tensor *w = param(5, 3);
  kn_tensor *x = kn_randn(2, (int64_t[]){4, 5}, NULL, KN_FLOAT32);
  kn_autocast_begin(KN_BFLOAT16);
  cr_assert_eq(kn_backward(kn_sum(kn_mm(x, w)), NULL), KN_OK, "%s", kn_last_error());
  kn_tensor *once = kn_clone(kn_grad(w));
  cr_assert_eq(kn_backward(kn_sum(kn_mm(x, w)), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__autocast_cache_len(), 1);
  kn_autocast_end();
  assert_same(kn_grad(w), kn_mul_scalar(once, kn_float(2.0)), "accumulated gradient");
}

Test(autocast_cache, clear_and_disable) {
  kn_tensor *w = param(4, 4);
  kn_tensor *x = kn_randn(2, (int64_t[]){3, 4}, NULL, KN_FLOAT32);
  kn_autocast_begin(KN_BFLOAT16);
  cr_assert(kn_mm(x, w));
  cr_assert_eq(kn__autocast_cache_len(), 1);
  kn_autocast_clear_cache();
  cr_assert_eq(kn__autocast_cache_len(), 0);
  cr_assert(kn_autocast_set_cache_enabled(false));
  cr_assert(kn_mm(x, w));
  cr_assert_eq(kn__autocast_cache_len(), 0);
  cr_assert_not(kn_autocast_set_cache_enabled(true));
  kn_autocast_end();
}

/* Threads casting one shared weight, each in its own region, each with its
** own cache: one entry per thread, results equal the main thread's. */
typedef struct job {
  kn_tensor *x, *w, *want;
  int entries;
  bool same;
} job;

static void *worker(void *arg) {
  job *j = arg;
  kn_scope_begin();
  bool prev = kn_no_grad_begin(); /* the threads share w: no graph on it */
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *y = NULL;
  for (int r = 0; r < 20; r++) y = kn_mm(j->x, j->w);
  j->entries = kn__autocast_cache_len();
  kn_autocast_end();
  char why[64];
  j->same = y && kn_tensors_close(y, j->want, 0, 0, true, why, sizeof why) &&
            kn__autocast_cache_len() == 0;
  kn_no_grad_end(prev);
  kn_scope_end();
  return NULL;
}

Test(autocast_cache, each_thread_has_its_own_cache) {
  kn_tensor *w = param(16, 16);
  kn_tensor *x = kn_randn(2, (int64_t[]){8, 16}, NULL, KN_FLOAT32);
  bool prev = kn_no_grad_begin();
  kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *want = kn_mm(x, w);
  enum { T = 4 };
  job jobs[T];
  pthread_t th[T];
  for (int t = 0; t < T; t++) {
    jobs[t] = (job){x, w, want, -1, false};
    cr_assert_eq(pthread_create(&th[t], NULL, worker, &jobs[t]), 0);
  }
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  cr_assert_eq(kn__autocast_cache_len(), 1, "the main thread's entry stays");
  kn_autocast_end();
  kn_no_grad_end(prev);
  for (int t = 0; t < T; t++) {
    cr_assert_eq(jobs[t].entries, 1, "thread %d: %d entries", t, jobs[t].entries);
    cr_assert(jobs[t].same, "thread %d: a different result", t);
  }
}
