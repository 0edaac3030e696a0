/*
** ops/autocast.h: the autocast layer of the dispatcher (internal; the
** public side is kiln/autocast.h, the policy table ops/ops_autocast.def).
*/
#ifndef KN_OPS_AUTOCAST_H
#define KN_OPS_AUTOCAST_H

#include "ops/opdef.h"

typedef enum kn__acpolicy {
  KN__AC_NONE = 0, /* the op's own type rules */
  KN__AC_LOWER,    /* floating inputs to the region's dtype */
  KN__AC_FP32,     /* floating inputs to float32 */
  KN__AC_PROMOTE,  /* floating inputs to the widest of them and the region's dtype */
} kn__acpolicy;

/* The calling thread's autocast state. depth: open regions; dtype: the
** innermost region's dtype (KN_FLOAT32 when off); on: dtype is a lower
** precision; excluded: > 0 while autocast must not apply (inside an op
** autocast handles, a backward rule). */
typedef struct kn__autocast_tls {
  int depth;
  kn_dtype dtype;
  bool on;
  int excluded;
} kn__autocast_tls;

extern _Thread_local kn__autocast_tls kn__autocast_state;

/* Does autocast handle calls made now? (the dispatcher's test: inline) */
static inline bool kn__autocast_active(void) {
  return kn__autocast_state.on && kn__autocast_state.excluded == 0;
}
/* The op's policy entry (KN__AC_NONE for ops without a row). */
kn__acpolicy kn__autocast_policy_of(int op_id);
/* Run call c under the policy: casts its inputs, then continues it below
** autocast (kn__dispatch_modes) with autocast excluded. */
kn_status kn__autocast_call(kn__call *c, kn__outs *out);
/* Exclude autocast on this thread (nests): backward rules, compiled code. */
void kn__autocast_exclude_push(void);
void kn__autocast_exclude_pop(void);

/* The cast cache (ops/autocast_cache.c), per thread. cacheable: would a
** cast of t to `to` now be cached (a float32 leaf that requires grad, cast
** to the region's lower dtype, the cache on, no dispatcher mode)? get: a new
** reference to the cached cast when it is still valid (same version of t,
** same grad mode), else NULL. put: remember cast as t's (retains both;
** replaces a stale entry). len: entries held (tests). */
bool kn__autocast_cacheable(const kn_tensor *t, kn_dtype to);
kn_tensor *kn__autocast_cache_get(kn_tensor *t, kn_dtype to);
kn_status kn__autocast_cache_put(kn_tensor *t, kn_dtype to, kn_tensor *cast);
int kn__autocast_cache_len(void);

#endif
