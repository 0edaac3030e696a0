/*
** ops/autocast.c: autocast, the dispatcher's outermost layer (kiln/autocast.h).
**
** The policy is a table indexed by op id, built from ops/ops_autocast.def.
** When a region is open on the thread and the call's op has an entry, the
** call's floating tensor arguments are cast (_to_copy calls through the
** whole dispatcher, so tracing modes record them and autograd differentiates
** them) and the op runs on the casts with autocast excluded, so the calls
** its decomposition makes are not cast again. The state (the region stack
** and the exclusion depth) is thread-local, like grad mode.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/autocast.h"
#include "ops/autocast.h"

enum { NONE = KN__AC_NONE, LOWER = KN__AC_LOWER, FP32 = KN__AC_FP32, PROMOTE = KN__AC_PROMOTE };

static const unsigned char policy[KN__OP_COUNT] = {
#define KN_AUTOCAST(ID, POLICY) [KN_OP_##ID] = POLICY,
#include "ops/ops_autocast.def"
#undef KN_AUTOCAST
};

#define MAX_REGIONS 64

_Thread_local kn__autocast_tls kn__autocast_state;
static _Thread_local kn_dtype regions[MAX_REGIONS];

kn__acpolicy kn__autocast_policy_of(int op_id) {
  return op_id >= 0 && op_id < KN__OP_COUNT ? (kn__acpolicy)policy[op_id] : KN__AC_NONE;
}

static void refresh(void) {
  kn__autocast_tls *s = &kn__autocast_state;
  s->dtype = s->depth ? regions[s->depth - 1] : KN_FLOAT32;
  s->on = s->dtype != KN_FLOAT32;
}

kn_status kn_autocast_begin(kn_dtype dtype) {
  if (dtype != KN_BFLOAT16 && dtype != KN_FLOAT16 && dtype != KN_FLOAT32)
    return kn__error(KN_EDTYPE, "kn_autocast_begin: expected dtype bfloat16, float16 or float32 "
                     "(off), got %s", (unsigned)dtype < KN_DTYPE_COUNT ? kn_dtype_name(dtype)
                                                                       : "an invalid dtype");
  if (kn__autocast_state.depth == MAX_REGIONS)
    return kn__error(KN_ESTATE, "kn_autocast_begin: %d autocast regions are already open on "
                     "this thread (the most that nest)", MAX_REGIONS);
  regions[kn__autocast_state.depth++] = dtype;
  refresh();
  return KN_OK;
}

kn_status kn_autocast_end(void) {
  if (kn__autocast_state.depth == 0)
    return kn__error(KN_ESTATE, "kn_autocast_end: no autocast region is open on this thread "
                     "(expected a matching kn_autocast_begin)");
  kn__autocast_state.depth--;
  refresh();
  if (kn__autocast_state.depth == 0) kn_autocast_clear_cache(); /* torch: at nesting 0 */
  return KN_OK;
}

bool kn_autocast_enabled(void) { return kn__autocast_state.on; }

kn_dtype kn_autocast_dtype(void) {
  return kn__autocast_state.on ? kn__autocast_state.dtype : KN_FLOAT32;
}

const char *kn_autocast_policy(const char *op_name) {
  static const char *const names[] = {"none", "lower", "fp32", "promote"};
  const kn__opdef *op = op_name ? kn__op_lookup(op_name) : NULL;
  return op ? names[kn__autocast_policy_of(op->id)] : NULL;
}

void kn__autocast_exclude_push(void) { kn__autocast_state.excluded++; }

void kn__autocast_exclude_pop(void) {
  KN_ASSERT(kn__autocast_state.excluded > 0);
  kn__autocast_state.excluded--;
}

/* ---- the layer ------------------------------------------------------------ */

/* torch's is_eligible: a floating tensor that is not float64. */
static bool eligible(const kn_tensor *t) {
  return t && kn_dtype_is_floating(t->dtype) && t->dtype != KN_FLOAT64;
}

/* The dtype the call's eligible inputs are cast to. */
static kn_dtype target_dtype(const kn__call *c, kn__acpolicy p) {
  if (p == KN__AC_FP32) return KN_FLOAT32;
  kn_dtype to = kn__autocast_state.dtype;
  for (int k = 0, n = kn__call_ninputs(c); p == KN__AC_PROMOTE && k < n; k++) {
    const kn_tensor *t = kn__call_input(c, k);
    if (eligible(t)) to = kn_promote_types(to, t->dtype);
  }
  return to;
}

/* The casts an autocast call made: owned tensors and tensor-list copies. */
typedef struct casts {
  kn_tensor *owned[KN__MAX_ARGS];
  kn_tensor **lists[KN__MAX_ARGS];
  int nlist[KN__MAX_ARGS];
} casts;

static void casts_fini(casts *cs) {
  for (int i = 0; i < KN__MAX_ARGS; i++) {
    kn_release(cs->owned[i]);
    for (int j = 0; cs->lists[i] && j < cs->nlist[i]; j++) kn_release(cs->lists[i][j]);
    free(cs->lists[i]);
  }
}

/* t as dtype `to`: a new reference to t itself when no cast is needed, else
** the result of a _to_copy call through the dispatcher, or the cast of an
** earlier call from the cache (ops/autocast_cache.c). NULL on error. */
static kn_tensor *cast(kn_tensor *t, kn_dtype to) {
  if (!eligible(t) || t->dtype == to) return kn_retain(t);
  bool cacheable = kn__autocast_cacheable(t, to);
  kn_tensor *hit = cacheable ? kn__autocast_cache_get(t, to) : NULL;
  if (hit) return hit;
  kn__call cc = {.op = &kn__ops[KN_OP_TO_COPY], .nargs = 2,
                 .args = {KN_A_T(t), KN_A_DT(to)}};
  kn__outs o;
  kn__outs_init(&o);
  if (kn__dispatch(&cc, &o) != KN_OK) return NULL;
  kn_tensor *r = o.t[0];
  o.t[0] = NULL;
  kn__outs_fini(&o);
  if (cacheable && kn__autocast_cache_put(t, to, r) != KN_OK) {
    kn_release(r);
    return NULL;
  }
  return r;
}

static kn_status cast_list(kn__arg *a, int i, kn_dtype to, casts *cs) {
  int n = a->u.ts.n;
  cs->lists[i] = calloc((size_t)(n ? n : 1), sizeof *cs->lists[i]);
  if (!cs->lists[i]) return kn__oom();
  cs->nlist[i] = n;
  for (int j = 0; j < n; j++)
    if (!(cs->lists[i][j] = cast(a->u.ts.v[j], to))) return kn_last_status();
  a->u.ts.v = cs->lists[i];
  return KN_OK;
}

/* Replace the eligible tensor arguments of c by their casts to `to`. */
static kn_status cast_args(kn__call *c, kn_dtype to, casts *cs) {
  for (int i = 0; i < c->nargs; i++) {
    kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR && a->u.t) {
      if (!(cs->owned[i] = cast(a->u.t, to))) return kn_last_status();
      a->u.t = cs->owned[i];
    } else if (a->kind == KN__A_TENSORS) {
      kn_status st = cast_list(a, i, to, cs);
      if (st != KN_OK) return st;
    }
  }
  return KN_OK;
}

kn_status kn__autocast_call(kn__call *c, kn__outs *out) {
  kn__acpolicy p = kn__autocast_policy_of(c->op->id);
  if (p == KN__AC_NONE) return kn__dispatch_modes(c, out);
  kn__call cc = *c;
  casts cs;
  memset(&cs, 0, sizeof cs);
  kn__autocast_exclude_push(); /* the casts themselves are plain calls */
  kn_status st = cast_args(&cc, target_dtype(c, p), &cs);
  if (st == KN_OK) st = kn__dispatch_modes(&cc, out);
  kn__autocast_exclude_pop();
  casts_fini(&cs);
  return st;
}
