/*
** tensor/pool.h: per-thread caches of freed fixed-size objects (tensor and
** storage structs, small data buffers); see tensor/pool.c.
*/
#ifndef KN_TENSOR_POOL_H
#define KN_TENSOR_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kn__pool_kind {
  KN__POOL_TENSOR,
  KN__POOL_STORAGE,
  KN__POOL_BUF,  /* data buffers of 64 * (1 + k) bytes: KN__POOL_BUF + k */
  KN__POOL_NKINDS = KN__POOL_BUF + 8
} kn__pool_kind;

/* Largest data buffer the pools keep, in bytes. */
#define KN__POOL_BUF_MAX 512

/* A cached object of this kind (size bytes, as given to kn__pool_put), or
** NULL when this thread has none. The caller owns it; contents undefined. */
void *kn__pool_take(kn__pool_kind kind, size_t size);
/* Give p (owned, malloc-family memory of size bytes) to this thread's
** cache, or to free() when the cache is full. */
void kn__pool_put(kn__pool_kind kind, void *p, size_t size);
/* Live-object counters: per-thread, so counting needs no locked
** instruction; kn__live_count sums every thread's (under a mutex). */
/* KN__LIVE_ALLOC_BYTES only grows: the bytes of every CPU storage made. */
typedef enum kn__live_kind {
  KN__LIVE_TENSORS,
  KN__LIVE_STORAGES,
  KN__LIVE_ALLOC_BYTES,
  KN__LIVE_NKINDS
} kn__live_kind;
void kn__live_add(kn__live_kind kind, int64_t delta);
int64_t kn__live_count(kn__live_kind kind);
/* kn__pool_take and kn__pool_put that also count one object of kind live
** (a non-NULL result as created; p as freed) with one thread-local
** lookup: the per-op path makes two of each. */
void *kn__pool_take_live(kn__pool_kind kind, size_t size, kn__live_kind live);
void kn__pool_put_live(kn__pool_kind kind, void *p, size_t size, kn__live_kind live);

/* Free every object cached by the calling thread. */
void kn__pool_flush(void);

#endif
