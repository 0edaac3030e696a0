/*
** ops/autocast_cache.c: autocast's cast cache (torch's autocast weight-cast
** cache, kiln/autocast.h).
**
** A linear model's weight is cast to the region's dtype once per region, not
** once per use: casts of float32 leaves that require grad (parameters) are
** kept, per thread, until the outermost region on the thread closes. Each
** entry holds a reference to the source tensor (so its address cannot be
** reused while the entry lives) and to its cast, the source's version
** counter at the time of the cast and the grad mode it was made in. A hit
** needs all of them to match: an in-place change of the weight (an
** optimizer step inside the region) or a cast made under no_grad (which has
** no autograd history) makes the next use cast again and replaces the entry.
** Tracing (any dispatcher mode on the thread) bypasses the cache, as torch
** disables it while tracing: a captured graph records every cast.
*/
#include <stdlib.h>

#include "core/error.h"
#include "kiln/autocast.h"
#include "ops/autocast.h"

typedef struct entry {
  kn_tensor *src, *cast; /* owned references */
  kn_dtype to;
  uint64_t version;
  bool grad;
} entry;

static _Thread_local struct {
  entry *e;
  int n, cap;
  bool disabled; /* kn_autocast_set_cache_enabled(false) */
} cache;

bool kn_autocast_set_cache_enabled(bool enabled) {
  bool was = !cache.disabled;
  cache.disabled = !enabled;
  return was;
}

bool kn_autocast_cache_enabled(void) { return !cache.disabled; }

void kn_autocast_clear_cache(void) {
  for (int i = 0; i < cache.n; i++) {
    kn_release(cache.e[i].src);
    kn_release(cache.e[i].cast);
  }
  free(cache.e);
  cache.e = NULL;
  cache.n = cache.cap = 0;
}

int kn__autocast_cache_len(void) { return cache.n; }

bool kn__autocast_cacheable(const kn_tensor *t, kn_dtype to) {
  return !cache.disabled && t->dtype == KN_FLOAT32 && to == kn__autocast_state.dtype &&
         to != KN_FLOAT32 && !t->is_fake && kn_requires_grad(t) && kn_is_leaf(t) &&
         kn__mode_depth() == 0;
}

static entry *find(const kn_tensor *t, kn_dtype to) {
  for (int i = 0; i < cache.n; i++)
    if (cache.e[i].src == t && cache.e[i].to == to) return &cache.e[i];
  return NULL;
}

kn_tensor *kn__autocast_cache_get(kn_tensor *t, kn_dtype to) {
  const entry *e = find(t, to);
  bool fresh = e && e->version == kn_tensor_version(t) && e->grad == kn__grad_enabled();
  return fresh ? kn_retain(e->cast) : NULL;
}

kn_status kn__autocast_cache_put(kn_tensor *t, kn_dtype to, kn_tensor *cast) {
  entry *e = find(t, to);
  if (!e) {
    if (cache.n == cache.cap) {
      int nc = cache.cap ? cache.cap * 2 : 16;
      entry *ne = realloc(cache.e, (size_t)nc * sizeof *ne);
      if (!ne) return kn__oom();
      cache.e = ne;
      cache.cap = nc;
    }
    e = &cache.e[cache.n++];
    e->src = kn_retain(t);
    e->to = to;
  } else {
    kn_release(e->cast);
  }
  e->cast = kn_retain(cast);
  e->version = kn_tensor_version(t);
  e->grad = kn__grad_enabled();
  return KN_OK;
}
