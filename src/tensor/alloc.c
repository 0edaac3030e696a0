/*
** tensor/alloc.c: storages and the caching allocator.
**
** Freed tensor buffers are kept in per-size free lists (sizes rounded up to
** 64 bytes) and handed out again to the next request of the same rounded
** size, so a loop that allocates and frees same-shaped tensors never returns
** pages to the OS and never page-faults them back in. Debian's torch 1.13
** loses ~46x on `a * ones(1000,1000) + ones(1000,1000)` to exactly those
** faults. The cache holds at most KN__CACHE_LIMIT bytes; beyond that, frees
** go to the OS. Process-wide, mutex-protected.
**
** Fresh buffers of 4 MB and more are advised to use transparent huge pages
** (MADV_HUGEPAGE; the kernel's default "madvise" mode gives them only on
** request): a pointwise op streaming through two 16 MB buffers otherwise
** walks 8192 4-KB pages, and the TLB misses cost it about a quarter of its
** time. numpy advises its large arrays the same way.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "core/hashmap.h"
#include "tensor/pool.h"
#include "cuda/cuda.h"
#include "tensor/tensor.h"

#define KN__CACHE_LIMIT ((size_t)2 << 30)
#define KN__ALIGN 64

typedef struct free_block { struct free_block *next; } free_block;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static kn__hashmap cache;         /* rounded size -> free_block list */
static bool cache_ready;
static size_t cached_bytes;

static size_t round_size(size_t n) {
  return n == 0 ? KN__ALIGN : (n + KN__ALIGN - 1) & ~(size_t)(KN__ALIGN - 1);
}

#define KN__HUGE_MIN ((size_t)4 << 20)

/* Advise huge pages for the whole pages inside [p, p + sz); only their
** 2 MB-aligned runs can get them. A hint: failure changes nothing. */
static void advise_huge(void *p, size_t sz) {
#ifdef MADV_HUGEPAGE
  long pg = sysconf(_SC_PAGESIZE);
  if (pg <= 0) return;
  uintptr_t mask = (uintptr_t)pg - 1, a = ((uintptr_t)p + mask) & ~mask;
  uintptr_t end = ((uintptr_t)p + sz) & ~mask;
  if (end > a) (void)madvise((void *)a, end - a, MADV_HUGEPAGE);
#else
  (void)p;
  (void)sz;
#endif
}

static kn__pool_kind buf_kind(size_t sz) {
  return (kn__pool_kind)(KN__POOL_BUF + (int)(sz / KN__ALIGN) - 1);
}

void *kn__cached_alloc(size_t nbytes) {
  size_t sz = round_size(nbytes);
  if (sz < nbytes) return NULL;
  if (sz <= KN__POOL_BUF_MAX) {
    void *p = kn__pool_take(buf_kind(sz), sz);
    if (p) return p;
  }
  pthread_mutex_lock(&cache_lock);
  if (cache_ready) {
    free_block *b = kn__hm_get_u64(&cache, sz, NULL);
    if (b) {
      if (b->next) kn__hm_put_u64(&cache, sz, b->next);
      else kn__hm_del_u64(&cache, sz);
      cached_bytes -= sz;
      pthread_mutex_unlock(&cache_lock);
      return b;
    }
  }
  pthread_mutex_unlock(&cache_lock);
  void *p = aligned_alloc(KN__ALIGN, sz);
  if (p && sz >= KN__HUGE_MIN) advise_huge(p, sz);
  return p;
}

void kn__cached_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t sz = round_size(nbytes);
  if (sz <= KN__POOL_BUF_MAX) {
    kn__pool_put(buf_kind(sz), p, sz);
    return;
  }
  pthread_mutex_lock(&cache_lock);
  if (!cache_ready) {
    kn__hm_init(&cache, false);
    cache_ready = true;
  }
  if (cached_bytes + sz <= KN__CACHE_LIMIT) {
    free_block *b = p;
    b->next = kn__hm_get_u64(&cache, sz, NULL);
    if (kn__hm_put_u64(&cache, sz, b)) {
      cached_bytes += sz;
      p = NULL;
    }
  }
  pthread_mutex_unlock(&cache_lock);
  free(p);
}

void kn__allocator_empty_cache(void) {
  kn__pool_flush();
  pthread_mutex_lock(&cache_lock);
  if (cache_ready) {
    size_t it = 0;
    const kn__hm_slot *s;
    while (kn__hm_next(&cache, &it, &s)) {
      free_block *b = s->val;
      while (b) {
        free_block *n = b->next;
        free(b);
        b = n;
      }
    }
    kn__hm_fini(&cache);
    cache_ready = false;
  }
  cached_bytes = 0;
  pthread_mutex_unlock(&cache_lock);
}

/* The cache is not a leak: give it back when the process exits so leak
** checkers see only real leaks. */
__attribute__((destructor)) static void release_cache_at_exit(void) {
  kn__allocator_empty_cache();
}

kn__storage *kn__storage_new(size_t nbytes, kn_device dev) {
  kn__storage *s = kn__pool_take(KN__POOL_STORAGE, sizeof *s);
  if (s) memset(s, 0, sizeof *s);
  else if (!(s = calloc(1, sizeof *s))) return NULL;
  atomic_init(&s->refcount, 1);
  atomic_init(&s->version, 0);
  s->nbytes = nbytes;
  s->device = dev;
  if (dev == KN_CPU) {
    s->data = kn__cached_alloc(nbytes);
    if (!s->data) {
      kn__pool_put(KN__POOL_STORAGE, s, sizeof *s);
      return NULL;
    }
    s->from_allocator = true;
    kn__live_add(KN__LIVE_ALLOC_BYTES, (int64_t)nbytes);
  } else if (dev == KN_CUDA && kn__cuda_alloc(nbytes, &s->data) != KN_OK) {
    kn__pool_put(KN__POOL_STORAGE, s, sizeof *s);
    return NULL;
  }
  kn__live_add(KN__LIVE_STORAGES, 1);
  return s;
}

void kn__storage_retain(kn__storage *s) { atomic_fetch_add(&s->refcount, 1); }

void kn__storage_release(kn__storage *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  if (s->from_allocator) kn__cached_free(s->data, s->nbytes);
  else if (s->device == KN_CUDA) kn__cuda_free(s->data);
  kn__pool_put_live(KN__POOL_STORAGE, s, sizeof *s, KN__LIVE_STORAGES);
}

int64_t kn_live_storages(void) { return kn__live_count(KN__LIVE_STORAGES); }

int64_t kn__storage_bytes_made(void) { return kn__live_count(KN__LIVE_ALLOC_BYTES); }
