/*
** tensor/pool.c: per-thread caches of freed tensor structs, storage structs
** and small data buffers, so the common path of an eager op (one output of
** a few elements) allocates nothing from malloc and takes no lock.
**
** Each thread keeps short free lists (KN__POOL_DEPTH entries per kind; the
** lists and the take and put paths are in pool.h, inline); an
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

#define POISON KN__POISON
#define UNPOISON KN__UNPOISON

typedef kn__pool_entry entry;
typedef kn__thread_pool thread_pool;

_Thread_local kn__thread_pool kn__tp;
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
  flush(&kn__tp);
  pthread_mutex_lock(&threads_lock);
  thread_pool **pp = &threads;
  while (*pp && *pp != &kn__tp) pp = &(*pp)->next;
  if (*pp) *pp = kn__tp.next;
  for (int k = 0; k < KN__LIVE_NKINDS; k++) {
    exited_live[k] += atomic_load_explicit(&kn__tp.live[k], memory_order_relaxed);
    atomic_store_explicit(&kn__tp.live[k], 0, memory_order_relaxed);
  }
  kn__tp.registered = false; /* a later use in this thread registers again */
  pthread_mutex_unlock(&threads_lock);
}

static void make_key(void) { (void)pthread_key_create(&exit_key, on_thread_exit); }

void kn__pool_register(void) {
  pthread_once(&exit_once, make_key);
  /* any non-NULL value makes the destructor run when the thread exits */
  (void)pthread_setspecific(exit_key, &kn__tp);
  pthread_mutex_lock(&threads_lock);
  kn__tp.next = threads;
  threads = &kn__tp;
  kn__tp.registered = true;
  pthread_mutex_unlock(&threads_lock);
}

void kn__pool_overflow(void *p) { free(p); }

int64_t kn__live_count(kn__live_kind kind) {
  pthread_mutex_lock(&threads_lock);
  int64_t n = exited_live[kind];
  for (thread_pool *p = threads; p; p = p->next)
    n += atomic_load_explicit(&p->live[kind], memory_order_relaxed);
  pthread_mutex_unlock(&threads_lock);
  return n;
}

void kn__pool_flush(void) { flush(&kn__tp); }

/* The exiting thread's lists are not leaks: give them back so leak
** checkers see only real ones. */
__attribute__((destructor)) static void flush_at_exit(void) { flush(&kn__tp); }
