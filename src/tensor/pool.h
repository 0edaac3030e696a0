/*
** tensor/pool.h: per-thread caches of freed fixed-size objects (tensor and
** storage structs, small data buffers); see tensor/pool.c.
*/
#ifndef KN_TENSOR_POOL_H
#define KN_TENSOR_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef enum kn__pool_kind {
  KN__POOL_TENSOR,
  KN__POOL_STORAGE,
  KN__POOL_BUF,  /* data buffers of 64 * (1 + k) bytes: KN__POOL_BUF + k */
  KN__POOL_NKINDS = KN__POOL_BUF + 8
} kn__pool_kind;

/* Largest data buffer the pools keep, in bytes. */
#define KN__POOL_BUF_MAX 512

/* Live-object counters: per-thread, so counting needs no locked
** instruction; kn__live_count sums every thread's (under a mutex). */
/* KN__LIVE_ALLOC_BYTES only grows: the bytes of every CPU storage made. */
typedef enum kn__live_kind {
  KN__LIVE_TENSORS,
  KN__LIVE_STORAGES,
  KN__LIVE_ALLOC_BYTES,
  KN__LIVE_NKINDS
} kn__live_kind;

/* ---- the calling thread's lists (inline: the per-op path takes and puts
** three objects) ---- */
#define KN__POOL_DEPTH 64

typedef struct kn__pool_entry { struct kn__pool_entry *next; } kn__pool_entry;

typedef struct kn__pool_list {
  kn__pool_entry *head;
  int n;
} kn__pool_list;

typedef struct kn__thread_pool {
  kn__pool_list l[KN__POOL_NKINDS];
  _Atomic int64_t live[KN__LIVE_NKINDS]; /* written by the owner only */
  struct kn__thread_pool *next;          /* in pool.c's list, when registered */
  bool registered; /* in that list, and the exit destructor is armed */
} kn__thread_pool;

extern _Thread_local kn__thread_pool kn__tp;

/* Register the calling thread (its counters are summed, its lists freed at
** exit). */
void kn__pool_register(void);
/* free() p: the list of its kind is full. */
void kn__pool_overflow(void *p);

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define KN__POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define KN__UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define KN__POISON(p, n) ((void)(p), (void)(n))
#define KN__UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static inline void kn__live_add_to(kn__thread_pool *p, kn__live_kind kind, int64_t delta) {
  int64_t v = atomic_load_explicit(&p->live[kind], memory_order_relaxed);
  atomic_store_explicit(&p->live[kind], v + delta, memory_order_relaxed);
}

static inline void kn__live_add(kn__live_kind kind, int64_t delta) {
  kn__thread_pool *p = &kn__tp;
  if (!p->registered) kn__pool_register();
  kn__live_add_to(p, kind, delta);
}

int64_t kn__live_count(kn__live_kind kind);

/* A cached object of this kind (size bytes, as given to kn__pool_put), or
** NULL when this thread has none. The caller owns it; contents undefined. */
static inline void *kn__pool_take(kn__pool_kind kind, size_t size) {
  kn__pool_list *l = &kn__tp.l[kind];
  kn__pool_entry *e = l->head;
  if (!e) return NULL;
  KN__UNPOISON(e, size);
  (void)size;
  l->head = e->next;
  l->n--;
  return e;
}

/* Give p (owned, malloc-family memory of size bytes) to this thread's
** cache, or to free() when the cache is full. */
static inline void kn__pool_put(kn__pool_kind kind, void *p, size_t size) {
  if (!p) return;
  kn__thread_pool *tp = &kn__tp;
  kn__pool_list *l = &tp->l[kind];
  if (l->n >= KN__POOL_DEPTH) {
    kn__pool_overflow(p);
    return;
  }
  if (!tp->registered) kn__pool_register();
  kn__pool_entry *e = p;
  e->next = l->head;
  l->head = e;
  l->n++;
  KN__POISON((char *)p + sizeof *e, size - sizeof *e);
  (void)size;
}

/* kn__pool_take and kn__pool_put that also count one object of kind live
** (a non-NULL result as created; p as freed). */
static inline void *kn__pool_take_live(kn__pool_kind kind, size_t size, kn__live_kind live) {
  void *e = kn__pool_take(kind, size);
  /* registered: entries are only put on a registered thread's lists */
  if (e) kn__live_add_to(&kn__tp, live, 1);
  return e;
}

static inline void kn__pool_put_live(kn__pool_kind kind, void *p, size_t size,
                                     kn__live_kind live) {
  kn__live_add(live, -1);
  kn__pool_put(kind, p, size);
}

/* Free every object cached by the calling thread. */
void kn__pool_flush(void);

#endif
