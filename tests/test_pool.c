/*
** test_pool.c: the per-thread pools of tensor/storage structs and small
** buffers (tensor/pool.h) and the live-object counts kept beside them:
** released structs are reused on the same thread and come back cleared;
** tensors made on one thread and released on another, and threads that
** exit while holding cached objects, leave kn_live_tensors /
** kn_live_storages exact; concurrent small ops give correct values. Run
** without checked handles (tensor/handles.h), which bypass the pools.
*/
#include <criterion/criterion.h>
#include <pthread.h>

#include "kiln/kiln.h"
#include "tensor/handles.h"
#include "tensor/pool.h"
#include "tensor/tensor.h"

/* The pools serve tensor structs only without checked handles (in checked
** mode, KILN_DEBUG and Debug builds, a released struct is a tombstone). */
static void unchecked(void) { cr_assert_eq(kn__handles_set_checked(false), KN_OK); }

TestSuite(pool, .init = unchecked);

Test(pool, released_structs_are_reused_and_cleared) {
  kn_tensor *t = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(t, true), KN_OK);
  kn__storage *st = t->storage;
  kn_release(t);
  /* the next struct taken on this thread is the one just released */
  void *again = kn__pool_take(KN__POOL_TENSOR, sizeof(struct kn_tensor));
  cr_assert_eq(again, (void *)t);
  kn__pool_put(KN__POOL_TENSOR, again, sizeof(struct kn_tensor));
  kn_tensor *u = kn_zeros(KN_SHAPE(2), KN_FLOAT32);
  cr_assert_eq(u, t, "a new tensor reuses the pooled struct");
  cr_assert_eq(u->storage, st, "and the pooled storage struct");
  cr_assert(!kn_requires_grad(u) && !kn_grad(u) && kn_is_leaf(u), "fields are cleared");
  cr_assert_eq(((float *)kn_data(u))[1], 0.0f);
  kn_release(u);
}

static void *release_all(void *arg) {
  kn_tensor **ts = arg;
  for (int i = 0; i < 100; i++) kn_release(ts[i]);
  return NULL;
}

static void *make_all(void *arg) {
  kn_tensor **ts = arg;
  for (int i = 0; i < 100; i++) ts[i] = kn_full(KN_SHAPE(3), kn_float(i), KN_FLOAT32);
  return NULL; /* the thread exits with structs in its pool */
}

Test(pool, live_counts_across_threads) {
  int64_t t0 = kn_live_tensors(), s0 = kn_live_storages();
  kn_tensor *ts[100];
  for (int i = 0; i < 100; i++) ts[i] = kn_full(KN_SHAPE(3), kn_float(i), KN_FLOAT32);
  cr_assert_eq(kn_live_tensors(), t0 + 100);
  pthread_t th;
  pthread_create(&th, NULL, release_all, ts);
  pthread_join(th, NULL);
  cr_assert_eq(kn_live_tensors(), t0, "released on another thread");
  cr_assert_eq(kn_live_storages(), s0);
  pthread_create(&th, NULL, make_all, ts);
  pthread_join(th, NULL);
  cr_assert_eq(kn_live_tensors(), t0 + 100, "made on a thread that has exited");
  cr_assert_eq(kn_live_storages(), s0 + 100);
  for (int i = 0; i < 100; i++) cr_assert_eq(((float *)kn_data(ts[i]))[2], (float)i);
  release_all(ts);
  cr_assert_eq(kn_live_tensors(), t0);
  cr_assert_eq(kn_live_storages(), s0);
}

typedef struct work {
  kn_tensor *a, *b;
  int bad;
} work;

static void *add_loop(void *arg) {
  work *w = arg;
  for (int i = 0; i < 20000; i++) {
    kn_tensor *c = kn_add(w->a, w->b);
    if (!c || ((float *)kn_data(c))[0] != 3.0f) w->bad++;
    kn_release(c);
  }
  return NULL;
}

Test(pool, concurrent_small_ops) {
  int64_t t0 = kn_live_tensors();
  kn_tensor *a = kn_ones(KN_SHAPE(1), KN_FLOAT32), *b = kn_full(KN_SHAPE(1), kn_float(2), KN_FLOAT32);
  work w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (work){a, b, 0};
    pthread_create(&th[i], NULL, add_loop, &w[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    cr_assert_eq(w[i].bad, 0, "thread %d saw wrong results", i);
  }
  kn_release(a);
  kn_release(b);
  cr_assert_eq(kn_live_tensors(), t0);
}
