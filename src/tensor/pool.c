/*
** tensor/pool.c: per-thread caches of freed tensor structs, storage structs
** and small data buffers, so the common path of an eager op (one output of
** a few elements) allocates nothing from malloc and takes no lock.
**
** Each thread keeps short free lists (KN__POOL_DEPTH entries per kind); an
** object freed on one thread may be reused by another, as they are plain
** malloc memory. A list that is full sends frees to free(); a thread's
** lists are handed back to free() when the thread exits (a pthread key's
** destructor) and, for the thread that runs them, at process exit and by
** kn__pool_flush (kn_reset, kn__allocator_empty_cache). Leak checkers still
** see leaked tensors: cached entries stay reachable from thread-local
** storage. Under AddressSanitizer cached entries are poisoned, so a use
** after release is still reported.
**
** The live-object counts (kn_live_tensors, kn_live_storages) are kept here
** too, per thread, without locked instructions: each thread adds to its own
** counters; a reader sums every registered thread's counters and what
** exited threads left behind, under a mutex.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/error.h"
#include "tensor/pool.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define KN__POOL_DEPTH 64

typedef struct entry { struct entry *next; } entry;

typedef struct list {
  entry *head;
  int n;
} list;

typedef struct thread_pool {
  list l[KN__POOL_NKINDS];
  _Atomic int64_t live[KN__LIVE_NKINDS]; /* written by the owner only */
  struct thread_pool *next;              /* in `threads`, when registered */
  bool registered; /* in `threads`, and the exit destructor is armed */
} thread_pool;

static _Thread_local thread_pool tp;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static thread_pool *threads;                   /* registered threads */
static int64_t exited_live[KN__LIVE_NKINDS];   /* left by exited threads */

static void flush(thread_pool *p) {
  for (int k = 0; k < KN__POOL_NKINDS; k++) {
    entry *e = p->l[k].head;
    while (e) {
      UNPOISON(e, sizeof *e);
      entry *next = e->next;
      free(e);
      e = next;
    }
    p->l[k].head = NULL;
    p->l[k].n = 0;
  }
}

static void on_thread_exit(void *arg) {
  (void)arg;
  flush(&tp);
  pthread_mutex_lock(&threads_lock);
  thread_pool **pp = &threads;
  while (*pp && *pp != &tp) pp = &(*pp)->next;
  if (*pp) *pp = tp.next;
  for (int k = 0; k < KN__LIVE_NKINDS; k++) {
    exited_live[k] += atomic_load_explicit(&tp.live[k], memory_order_relaxed);
    atomic_store_explicit(&tp.live[k], 0, memory_order_relaxed);
  }
  tp.registered = false; /* a later use in this thread registers again */
  pthread_mutex_unlock(&threads_lock);
}

static void make_key(void) { (void)pthread_key_create(&exit_key, on_thread_exit); }

static void register_thread(void) {
  pthread_once(&exit_once, make_key);
  /* any non-NULL value makes the destructor run when the thread exits */
  (void)pthread_setspecific(exit_key, &tp);
  pthread_mutex_lock(&threads_lock);
  tp.next = threads;
  threads = &tp;
  tp.registered = true;
  pthread_mutex_unlock(&threads_lock);
}

void kn__live_add(kn__live_kind kind, int64_t delta) {
  if (!tp.registered) register_thread();
  int64_t v = atomic_load_explicit(&tp.live[kind], memory_order_relaxed);
  atomic_store_explicit(&tp.live[kind], v + delta, memory_order_relaxed);
}

int64_t kn__live_count(kn__live_kind kind) {
  pthread_mutex_lock(&threads_lock);
  int64_t n = exited_live[kind];
  for (thread_pool *p = threads; p; p = p->next)
    n += atomic_load_explicit(&p->live[kind], memory_order_relaxed);
  pthread_mutex_unlock(&threads_lock);
  return n;
}

void *kn__pool_take(kn__pool_kind kind, size_t size) {
  list *l = &tp.l[kind];
  entry *e = l->head;
  if (!e) return NULL;
  UNPOISON(e, size);
  l->head = e->next;
  l->n--;
  return e;
}

void kn__pool_put(kn__pool_kind kind, void *p, size_t size) {
  if (!p) return;
  KN_ASSERT(size >= sizeof(entry));
  list *l = &tp.l[kind];
  if (l->n >= KN__POOL_DEPTH) {
    free(p);
    return;
  }
  if (!tp.registered) register_thread();
  entry *e = p;
  e->next = l->head;
  l->head = e;
  l->n++;
  POISON((char *)p + sizeof *e, size - sizeof *e);
}

static void live_add_local(thread_pool *p, kn__live_kind kind, int64_t delta) {
  int64_t v = atomic_load_explicit(&p->live[kind], memory_order_relaxed);
  atomic_store_explicit(&p->live[kind], v + delta, memory_order_relaxed);
}

void *kn__pool_take_live(kn__pool_kind kind, size_t size, kn__live_kind live) {
  thread_pool *p = &tp;
  entry *e = p->l[kind].head;
  if (!e) return NULL;
  /* registered: entries are only put on a registered thread's lists */
  UNPOISON(e, size);
  p->l[kind].head = e->next;
  p->l[kind].n--;
  live_add_local(p, live, 1);
  return e;
}

void kn__pool_put_live(kn__pool_kind kind, void *ptr, size_t size, kn__live_kind live) {
  thread_pool *p = &tp;
  if (!p->registered) register_thread();
  live_add_local(p, live, -1);
  kn__pool_put(kind, ptr, size);
}

void kn__pool_flush(void) { flush(&tp); }

/* The exiting thread's lists are not leaks: give them back so leak
** checkers see only real ones. */
__attribute__((destructor)) static void flush_at_exit(void) { flush(&tp); }
