/*
** cuda/alloc.c: the caching allocator of device memory.
**
** Sizes are rounded up (to 512 bytes up to 1 MiB, to 2 MiB above), and a
** freed buffer goes to a cache of free blocks sorted by size instead of back
** to the driver. An allocation takes the smallest cached block that fits
** (of exactly its rounded size up to 1 MiB; above, at most a quarter larger,
** so a small request never pins a huge block) before it calls
** cuMemAlloc. When cuMemAlloc runs out of memory, the cache is released and
** the call tried once more. One stream: a block freed after work was queued
** that reads it can be handed out at once, since any later use is queued
** after that work.
*/
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hashmap.h"
#include "cuda/cuda_int.h"
#include "logging/log.h"

typedef struct block {
  kn__cudptr ptr;
  size_t size;
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static kn__hashmap live;      /* ptr -> size (u64 keys), under mu */
static bool live_init;
static block *cached;         /* free blocks sorted by size, under mu */
static size_t ncached, capcached;
static kn__cuda_memstats st;  /* under mu */
static bool capturing;        /* under mu */
/* The capture's private pool (under mu): every block freed while a capture
** is in progress lands here instead of in the cache, so no work outside the
** graph is ever handed memory a replay of the graph writes; captured
** allocations reuse these blocks first (in graph order, which replays keep).
** kn__cuda_pool_detach hands them to the graph; kn__cuda_pool_release puts
** them in the cache when the graph is destroyed. */
static block *pool;
static size_t npool, cappool;

#define SMALL_LIMIT ((size_t)1 << 20)
#define LARGE_ROUND ((size_t)2 << 20)

static size_t round_size(size_t n) {
  if (n <= SMALL_LIMIT) return n < 512 ? 512 : (n + 511) & ~(size_t)511;
  if (n > SIZE_MAX - LARGE_ROUND) return 0;
  return (n + LARGE_ROUND - 1) & ~(LARGE_ROUND - 1);
}

/* The index of the first cached block of size >= size. */
static size_t lower_bound(size_t size) {
  size_t lo = 0, hi = ncached;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cached[mid].size < size) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static bool take_cached(size_t size, block *out) {
  size_t i = lower_bound(size);
  if (i == ncached) return false;
  size_t slack = size <= SMALL_LIMIT ? 0 : size / 4;
  if (cached[i].size - size > slack) return false;
  *out = cached[i];
  memmove(cached + i, cached + i + 1, (ncached - i - 1) * sizeof *cached);
  ncached--;
  return true;
}

static bool put_cached(block b) {
  if (ncached == capcached) {
    size_t cap = capcached ? capcached * 2 : 64;
    block *nb = realloc(cached, cap * sizeof *nb);
    if (!nb) return false;
    cached = nb;
    capcached = cap;
  }
  size_t i = lower_bound(b.size);
  memmove(cached + i + 1, cached + i, (ncached - i) * sizeof *cached);
  cached[i] = b;
  ncached++;
  return true;
}

/* Release every cached block to the driver (mu held). Work queued on the
** stream may still read them: synchronise first. */
static kn_status release_cache(void) {
  kn__cuda_rt *r = kn__cuda_rt_get();
  if (ncached == 0) return KN_OK;
  kn_status s = kn__cu_check(r->cu.StreamSynchronize(r->stream), "cuStreamSynchronize");
  for (size_t i = 0; i < ncached && s == KN_OK; i++) {
    s = kn__cu_check(r->cu.MemFree(cached[i].ptr), "cuMemFree_v2");
    if (s == KN_OK) st.reserved -= cached[i].size;
  }
  ncached = 0;
  return s;
}

static kn_status oom(size_t nbytes, size_t size) {
  kn__cuda_rt *r = kn__cuda_rt_get();
  size_t fre = 0, total = 0;
  r->cu.MemGetInfo(&fre, &total);
  return kn__error(KN_ENOMEM,
                   "CUDA out of memory: tried to allocate %zu bytes (%.2f MiB, %zu rounded) on "
                   "cuda:%d (%s) with %zu bytes allocated and %zu reserved by kiln; the driver "
                   "reports %zu of %zu bytes free",
                   nbytes, (double)nbytes / 1048576.0, size, r->ordinal, r->name, st.allocated,
                   st.reserved, fre, total);
}

/* cuMemAlloc, once more after emptying the cache when it runs out (mu held). */
static kn_status driver_alloc(size_t nbytes, size_t size, kn__cudptr *p) {
  kn__cuda_rt *r = kn__cuda_rt_get();
  int e = r->cu.MemAlloc(p, size);
  if (e == KN__CU_ERROR_OUT_OF_MEMORY && !capturing) { /* no cuMemFree inside a capture */
    kn_status s = release_cache();
    if (s != KN_OK) return s;
    e = r->cu.MemAlloc(p, size);
  }
  if (e == KN__CU_ERROR_OUT_OF_MEMORY) return oom(nbytes, size);
  kn_status s = kn__cu_check(e, "cuMemAlloc_v2");
  if (s != KN_OK) return s;
  st.reserved += size;
  st.n_malloc++;
  KN_LOG(KN_LOG_CUDA, KN_DEBUG, "cuMemAlloc %zu bytes (reserved now %zu, allocated %zu)", size,
         st.reserved, st.allocated + size);
  return KN_OK;
}

/* A block of exactly size from the capture's pool (mu held). */
static bool take_pooled(size_t size, block *out) {
  for (size_t i = 0; i < npool; i++)
    if (pool[i].size == size) {
      *out = pool[i];
      pool[i] = pool[--npool];
      return true;
    }
  return false;
}

static bool put_pooled(block b) {
  if (npool == cappool) {
    size_t cap = cappool ? cappool * 2 : 16;
    block *nb = realloc(pool, cap * sizeof *nb);
    if (!nb) return false;
    pool = nb;
    cappool = cap;
  }
  pool[npool++] = b;
  return true;
}

static kn_status alloc_locked(size_t nbytes, void **dptr) {
  size_t size = round_size(nbytes);
  if (size == 0) return kn__error(KN_ENOMEM, "CUDA allocation of %zu bytes: too large", nbytes);
  if (!live_init) {
    kn__hm_init(&live, false);
    live_init = true;
  }
  block b = {0, size};
  if (!(capturing && take_pooled(size, &b)) && !take_cached(size, &b)) {
    kn_status s = driver_alloc(nbytes, size, &b.ptr);
    if (s != KN_OK) return s;
  }
  if (!kn__hm_put_u64(&live, b.ptr, (void *)(uintptr_t)b.size)) {
    if (!put_cached(b)) kn__cuda_rt_get()->cu.MemFree(b.ptr);
    return kn__oom();
  }
  st.allocated += b.size;
  if (st.allocated > st.peak_allocated) st.peak_allocated = st.allocated;
  st.n_alloc++;
  *dptr = (void *)(uintptr_t)b.ptr;
  return KN_OK;
}

kn_status kn__cuda_alloc(size_t nbytes, void **dptr) {
  *dptr = NULL;
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  pthread_mutex_lock(&mu);
  s = alloc_locked(nbytes, dptr);
  pthread_mutex_unlock(&mu);
  return s;
}

void kn__cuda_free(void *dptr) {
  if (!dptr) return;
  kn__cudptr p = (kn__cudptr)(uintptr_t)dptr;
  pthread_mutex_lock(&mu);
  bool found = false;
  size_t size = live_init ? (size_t)(uintptr_t)kn__hm_get_u64(&live, p, &found) : 0;
  KN_ASSERT(found && "kn__cuda_free of a pointer the allocator did not hand out");
  if (found) {
    kn__hm_del_u64(&live, p);
    st.allocated -= size;
    block b = {p, size};
    bool kept = capturing ? put_pooled(b) : put_cached(b);
    if (!kept && kn__cuda_enter() == KN_OK && !capturing &&
        kn__cu_check(kn__cuda_rt_get()->cu.MemFree(p), "cuMemFree_v2") == KN_OK)
      st.reserved -= size;
  }
  pthread_mutex_unlock(&mu);
}

kn_status kn__cuda_empty_cache(void) {
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  pthread_mutex_lock(&mu);
  if (capturing) s = kn__error(KN_ESTATE, "kn_cuda_empty_cache during CUDA graph capture");
  else s = release_cache();
  pthread_mutex_unlock(&mu);
  return s;
}

void kn__cuda_memstats_get(kn__cuda_memstats *out) {
  pthread_mutex_lock(&mu);
  *out = st;
  pthread_mutex_unlock(&mu);
}

void kn__cuda_set_capturing(bool on) {
  pthread_mutex_lock(&mu);
  capturing = on;
  pthread_mutex_unlock(&mu);
}

struct kn__cuda_pool {
  block *b;
  size_t n;
};

kn__cuda_pool *kn__cuda_pool_detach(void) {
  kn__cuda_pool *p = calloc(1, sizeof *p);
  pthread_mutex_lock(&mu);
  if (p) { /* without memory for the record, the blocks stay pooled for the next graph */
    p->b = pool;
    p->n = npool;
    pool = NULL;
    npool = cappool = 0;
  }
  pthread_mutex_unlock(&mu);
  return p;
}

void kn__cuda_pool_release(kn__cuda_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < p->n; i++)
    if (!put_cached(p->b[i]) && kn__cuda_enter() == KN_OK &&
        kn__cuda_rt_get()->cu.MemFree(p->b[i].ptr) == KN__CU_SUCCESS)
      st.reserved -= p->b[i].size;
  pthread_mutex_unlock(&mu);
  free(p->b);
  free(p);
}
