/*
** ops/nn_conv_dnnl.c: float32, bfloat16 and float16 convolution through
** oneDNN primitives (16-bit ones accumulate in float32 inside oneDNN and
** round each result once; the caller asks kn__dnnl_conv_fast first and
** falls back where oneDNN has only its reference loops).
**
** Creating a primitive (descriptor, implementation search, JIT code) costs
** far more than running a small convolution, so primitives are cached per
** (direction, bias, dtype, geometry) in a small process-wide list guarded by a
** mutex; the least recently used entry leaves the list when it is full and
** is destroyed once no thread is running it. Primitives run outside the lock
** and may run in several threads at once: they are created with the "user"
** scratchpad mode and every call passes its own scratchpad buffer (oneDNN's
** default library-owned scratchpad would tie a primitive to the thread that
** created it). Cached primitives live until evicted or until exit
** (reachable from the list).
**
** Callers hold PyTorch's layouts (NCHW activations, OIHW / GOIHW weights).
** The primitive is created with "any" layouts so that oneDNN can pick its
** fastest kernel, which usually works on channel-blocked layouts (nChw16c
** on AVX-512): then each argument whose layout differs is reordered into a
** scratch buffer before the call (inputs) or back after it (outputs), with
** reorder primitives cached alongside. On bench_conv's ResNet-stage
** convolution the blocked kernel plus reorders is faster than the
** plain-layout (im2col + GEMM) kernel oneDNN picks for NCHW: RATIO
** conv2d_onednn_blocked_vs_plain, 1.56 in `make bench` of 2026-11-27 (AMD
** EPYC, 2 cores, AVX2, loaded machine).
*/
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/nn_dnnl.h"
#include "ops/threads.h"

typedef enum conv_dir { FWD, BWD_DATA, BWD_WEIGHTS } conv_dir;

typedef struct conv_key {
  kn__convg g;
  conv_dir dir;
  bool bias;
  kn_dtype dt; /* float32, bfloat16 or float16: every tensor of the call */
} conv_key;

/* One argument of a cached primitive: its layout for the caller (plain) and
** for the primitive, and the reorder between them (NULL when they agree). */
typedef struct conv_slot {
  int kind; /* DNNL_ARG_* */
  bool out; /* written by the primitive */
  dnnl_memory_desc_t user, prim;
  dnnl_primitive_t reorder;
  dnnl_memory_desc_t reorder_scratch;
} conv_slot;

/* One cached primitive with its arguments (in the order the entry points
** pass their pointers). */
typedef struct conv_entry {
  conv_key key;
  dnnl_primitive_t prim;
  dnnl_memory_desc_t scratch; /* the primitive's scratchpad */
  int nslots;
  conv_slot slot[4];
  char impl[160]; /* the implementation's name, or why oneDNN refused */
  int users;    /* threads running prim right now */
  bool evicted; /* out of the list: destroyed by its last user */
  kn_status refused; /* KN_OK, or the error oneDNN's refusal gave (not built again) */
  struct conv_entry *next;
} conv_entry;

#define CACHE_CAP 64

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static conv_entry *cache_head;
static int cache_len;

/* ---- descriptors ------------------------------------------------------------- */

typedef enum role { R_SRC, R_WEI, R_BIAS, R_DST } role;

/* Descriptors of the four tensors, indexed by role. */
typedef struct conv_mds {
  dnnl_memory_desc_t md[4];
} conv_mds;

static dnnl_data_type_t dnnl_type(kn_dtype dt) {
  return dt == KN_BFLOAT16 ? dnnl_bf16 : dt == KN_FLOAT16 ? dnnl_f16 : dnnl_f32;
}

/* Plain layouts (any = false) or "let the primitive choose" (any = true);
** the bias is always plain. Every tensor of dtype dt (16-bit convolutions
** accumulate in float32 inside oneDNN and round each result once). */
static void mds_of(const kn__convg *g, kn_dtype dt, bool any, conv_mds *m) {
  dnnl_dims_t src = {g->N, g->C, g->H, g->W}, dst = {g->N, g->O, g->OH, g->OW};
  dnnl_dims_t w4 = {g->O, g->C, g->kh, g->kw};
  dnnl_dims_t w5 = {g->G, g->O / g->G, g->C / g->G, g->kh, g->kw}, b = {g->O};
  dnnl_format_tag_t act = any ? dnnl_format_tag_any : dnnl_nchw;
  dnnl_data_type_t t = dnnl_type(dt);
  dnnl_memory_desc_init_by_tag(&m->md[R_SRC], 4, src, t, act);
  dnnl_memory_desc_init_by_tag(&m->md[R_DST], 4, dst, t, act);
  if (g->G == 1)
    dnnl_memory_desc_init_by_tag(&m->md[R_WEI], 4, w4, t, any ? dnnl_format_tag_any : dnnl_oihw);
  else
    dnnl_memory_desc_init_by_tag(&m->md[R_WEI], 5, w5, t, any ? dnnl_format_tag_any : dnnl_goihw);
  dnnl_memory_desc_init_by_tag(&m->md[R_BIAS], 1, b, t, dnnl_a);
}

/* Strides, oneDNN dilations (PyTorch's minus one) and paddings of g. The
** right padding equals the left one: oneDNN then derives the same output
** size as PyTorch's floor formula. */
typedef struct conv_params {
  dnnl_dims_t strides, dil, pad;
} conv_params;

static conv_params params_of(const kn__convg *g) {
  return (conv_params){{g->sh, g->sw}, {g->dh - 1, g->dw - 1}, {g->ph, g->pw}};
}

static dnnl_status_t fwd_desc(const conv_key *k, const conv_mds *m, bool bias,
                              dnnl_convolution_desc_t *cd) {
  conv_params p = params_of(&k->g);
  return dnnl_dilated_convolution_forward_desc_init(
      cd, dnnl_forward_training, dnnl_convolution_direct, &m->md[R_SRC], &m->md[R_WEI],
      bias ? &m->md[R_BIAS] : NULL, &m->md[R_DST], p.strides, p.dil, p.pad, p.pad);
}

static dnnl_status_t bwd_desc(const conv_key *k, const conv_mds *m,
                              dnnl_convolution_desc_t *cd) {
  conv_params p = params_of(&k->g);
  if (k->dir == BWD_DATA)
    return dnnl_dilated_convolution_backward_data_desc_init(
        cd, dnnl_convolution_direct, &m->md[R_SRC], &m->md[R_WEI], &m->md[R_DST], p.strides,
        p.dil, p.pad, p.pad);
  return dnnl_dilated_convolution_backward_weights_desc_init(
      cd, dnnl_convolution_direct, &m->md[R_SRC], &m->md[R_WEI],
      k->bias ? &m->md[R_BIAS] : NULL, &m->md[R_DST], p.strides, p.dil, p.pad, p.pad);
}

/* Attributes asking for a caller-provided scratchpad (destroyed by the
** caller). */
static dnnl_status_t user_scratch(dnnl_primitive_attr_t *attr) {
  dnnl_status_t s = dnnl_primitive_attr_create(attr);
  if (s != dnnl_success) return s;
  s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
  if (s != dnnl_success) dnnl_primitive_attr_destroy(*attr);
  return s;
}

/* The primitive descriptor for k (a backward one needs the forward one as a
** hint). The caller destroys *pd. */
static dnnl_status_t make_pd(const conv_key *k, dnnl_engine_t eng, dnnl_primitive_attr_t attr,
                             dnnl_primitive_desc_t *pd) {
  conv_mds m;
  mds_of(&k->g, k->dt, true, &m);
  dnnl_convolution_desc_t fd, bd;
  dnnl_status_t s = fwd_desc(k, &m, k->dir == FWD && k->bias, &fd);
  if (s != dnnl_success) return s;
  if (k->dir == FWD) return dnnl_primitive_desc_create(pd, &fd, attr, eng, NULL);
  dnnl_primitive_desc_t hint;
  s = dnnl_primitive_desc_create(&hint, &fd, NULL, eng, NULL);
  if (s != dnnl_success) return s;
  s = bwd_desc(k, &m, &bd);
  if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &bd, attr, eng, hint);
  dnnl_primitive_desc_destroy(hint);
  return s;
}

/* Arguments per direction: oneDNN kind, written or read, role. The entry
** points pass their pointers in this order; the last one (bias) is optional. */
typedef struct slot_spec {
  int kind;
  bool out;
  role r;
} slot_spec;

static const slot_spec specs[3][4] = {
    [FWD] = {{DNNL_ARG_SRC, false, R_SRC}, {DNNL_ARG_WEIGHTS, false, R_WEI},
             {DNNL_ARG_DST, true, R_DST}, {DNNL_ARG_BIAS, false, R_BIAS}},
    [BWD_DATA] = {{DNNL_ARG_DIFF_DST, false, R_DST}, {DNNL_ARG_WEIGHTS, false, R_WEI},
                  {DNNL_ARG_DIFF_SRC, true, R_SRC}},
    [BWD_WEIGHTS] = {{DNNL_ARG_SRC, false, R_SRC}, {DNNL_ARG_DIFF_DST, false, R_DST},
                     {DNNL_ARG_DIFF_WEIGHTS, true, R_WEI}, {DNNL_ARG_DIFF_BIAS, true, R_BIAS}},
};

/* The scratchpad descriptor of pd (zero bytes when it needs none). */
static dnnl_memory_desc_t scratch_md(const_dnnl_primitive_desc_t pd) {
  const dnnl_memory_desc_t *m = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  dnnl_memory_desc_t none;
  memset(&none, 0, sizeof none);
  return m ? *m : none;
}

/* Fill slot i of e from the primitive descriptor: layouts and reorder. */
static dnnl_status_t fill_slot(conv_entry *e, int i, const conv_mds *plain,
                               const_dnnl_primitive_desc_t pd, dnnl_engine_t eng,
                               dnnl_primitive_attr_t attr) {
  const slot_spec *sp = &specs[e->key.dir][i];
  conv_slot *sl = &e->slot[i];
  sl->kind = sp->kind;
  sl->out = sp->out;
  sl->user = plain->md[sp->r];
  const dnnl_memory_desc_t *pm = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, sp->kind);
  sl->prim = pm ? *pm : sl->user;
  if (dnnl_memory_desc_equal(&sl->user, &sl->prim)) return dnnl_success;
  const dnnl_memory_desc_t *from = sp->out ? &sl->prim : &sl->user;
  const dnnl_memory_desc_t *to = sp->out ? &sl->user : &sl->prim;
  dnnl_primitive_desc_t rpd;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, attr);
  if (s != dnnl_success) return s;
  sl->reorder_scratch = scratch_md(rpd);
  s = dnnl_primitive_create(&sl->reorder, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return s;
}

static void entry_free(conv_entry *e) {
  for (int i = 0; i < e->nslots; i++)
    if (e->slot[i].reorder) dnnl_primitive_destroy(e->slot[i].reorder);
  if (e->prim) dnnl_primitive_destroy(e->prim);
  free(e);
}

static kn_status build_entry(conv_entry *e) {
  dnnl_engine_t eng;
  kn_status st = kn__dnnl_engine(&eng);
  if (st != KN_OK) return st;
  dnnl_primitive_attr_t attr;
  dnnl_status_t s = user_scratch(&attr);
  if (s != dnnl_success) return kn__dnnl_status(s, "primitive attributes");
  dnnl_primitive_desc_t pd;
  s = make_pd(&e->key, eng, attr, &pd);
  if (s != dnnl_success) {
    dnnl_primitive_attr_destroy(attr);
    return kn__dnnl_status(s, "convolution descriptor");
  }
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
    impl = "unknown";
  snprintf(e->impl, sizeof e->impl, "%s", impl);
  conv_mds plain;
  mds_of(&e->key.g, e->key.dt, false, &plain);
  e->nslots = e->key.dir == BWD_DATA ? 3 : e->key.bias ? 4 : 3;
  e->scratch = scratch_md(pd);
  for (int i = 0; i < e->nslots && s == dnnl_success; i++)
    s = fill_slot(e, i, &plain, pd, eng, attr);
  if (s == dnnl_success) s = dnnl_primitive_create(&e->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
  return kn__dnnl_status(s, "convolution primitive creation");
}

/* ---- cache -------------------------------------------------------------------- */

static bool key_eq(const conv_key *a, const conv_key *b) {
  return a->dir == b->dir && a->bias == b->bias && a->dt == b->dt &&
         !memcmp(&a->g, &b->g, sizeof a->g);
}

/* Move the hit to the front; drop the last entry when the list is full. */
static conv_entry *cache_find(const conv_key *k) {
  conv_entry **pp = &cache_head;
  for (; *pp; pp = &(*pp)->next)
    if (key_eq(&(*pp)->key, k)) {
      conv_entry *e = *pp;
      *pp = e->next;
      e->next = cache_head;
      cache_head = e;
      return e;
    }
  return NULL;
}

static void cache_insert(conv_entry *e) {
  if (cache_len >= CACHE_CAP) {
    conv_entry **pp = &cache_head;
    while ((*pp)->next) pp = &(*pp)->next;
    conv_entry *last = *pp;
    *pp = NULL;
    cache_len--;
    last->evicted = true;
    if (last->users == 0) entry_free(last);
  }
  e->next = cache_head;
  cache_head = e;
  cache_len++;
}

/* A refused entry: its error, remembered (a float16 convolution on a
** oneDNN without float16 kernels is refused on every call alike). */
static void refuse(conv_entry *e, kn_status st) {
  for (int i = 0; i < e->nslots; i++)
    if (e->slot[i].reorder) dnnl_primitive_destroy(e->slot[i].reorder);
  if (e->prim) dnnl_primitive_destroy(e->prim);
  e->prim = NULL;
  e->nslots = 0;
  e->refused = st;
  snprintf(e->impl, sizeof e->impl, "%s", kn_last_error());
}

/* The cached entry for k (built on a miss; one oneDNN refused is cached
** too, and its error returned). Called with cache_mu held. */
static kn_status lookup(const conv_key *k, conv_entry **out) {
  conv_entry *e = cache_find(k);
  if (!e) {
    e = calloc(1, sizeof *e);
    if (!e) return kn__oom();
    e->key = *k;
    kn_status st = build_entry(e);
    if (st == KN_ENOMEM) {
      entry_free(e);
      return st;
    }
    if (st != KN_OK) refuse(e, st);
    cache_insert(e);
  }
  *out = e;
  return e->refused != KN_OK ? kn__error(e->refused, "%s", e->impl) : KN_OK;
}

/* ---- execution ------------------------------------------------------------------ */

/* Per-call memory objects of one slot: the caller's buffer, and the
** primitive-layout scratch buffer when the slot reorders. */
typedef struct slot_mem {
  dnnl_memory_t user, prim;
  void *buf;
  size_t nbytes;
} slot_mem;

static dnnl_status_t slot_open(const conv_slot *sl, dnnl_engine_t eng, const void *p,
                               slot_mem *m) {
  dnnl_status_t s = dnnl_memory_create(&m->user, &sl->user, eng, (void *)(uintptr_t)p);
  if (s != dnnl_success || !sl->reorder) {
    m->prim = m->user;
    return s;
  }
  m->nbytes = dnnl_memory_desc_get_size(&sl->prim);
  m->buf = kn__cached_alloc(m->nbytes);
  if (!m->buf) return dnnl_out_of_memory;
  return dnnl_memory_create(&m->prim, &sl->prim, eng, m->buf);
}

static void slot_close(slot_mem *m) {
  if (m->prim && m->prim != m->user) dnnl_memory_destroy(m->prim);
  if (m->user) dnnl_memory_destroy(m->user);
  if (m->buf) kn__cached_free(m->buf, m->nbytes);
}

/* One call's stream and scratchpad buffer (large enough for every primitive
** of the entry; they run one after the other). */
typedef struct exec_ctx {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  void *scratch;
  size_t nscratch;
} exec_ctx;

/* Run prim on n arguments plus its scratchpad (smd, over the call's buffer). */
static dnnl_status_t exec_prim(const exec_ctx *x, dnnl_primitive_t prim, int n,
                               const dnnl_exec_arg_t *args, const dnnl_memory_desc_t *smd) {
  dnnl_exec_arg_t a[5];
  memcpy(a, args, (size_t)n * sizeof *a);
  dnnl_memory_t sm = NULL;
  dnnl_status_t s = dnnl_success;
  if (dnnl_memory_desc_get_size(smd) > 0) {
    s = dnnl_memory_create(&sm, smd, x->eng, x->scratch);
    a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sm};
  }
  if (s == dnnl_success) s = dnnl_primitive_execute(prim, x->stream, n, a);
  if (s == dnnl_success) s = dnnl_stream_wait(x->stream);
  if (sm) dnnl_memory_destroy(sm);
  return s;
}

static size_t scratch_size(const conv_entry *e) {
  size_t n = dnnl_memory_desc_get_size(&e->scratch);
  for (int i = 0; i < e->nslots; i++) {
    size_t r = e->slot[i].reorder ? dnnl_memory_desc_get_size(&e->slot[i].reorder_scratch) : 0;
    if (r > n) n = r;
  }
  return n;
}

/* Reorder the slots of one direction (inputs before, outputs after). */
static dnnl_status_t reorders(const exec_ctx *x, const conv_entry *e, const slot_mem *m,
                              bool outs) {
  dnnl_status_t s = dnnl_success;
  for (int i = 0; i < e->nslots && s == dnnl_success; i++) {
    const conv_slot *sl = &e->slot[i];
    if (!sl->reorder || sl->out != outs) continue;
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, outs ? m[i].prim : m[i].user},
                            {DNNL_ARG_TO, outs ? m[i].user : m[i].prim}};
    s = exec_prim(x, sl->reorder, 2, a, &sl->reorder_scratch);
  }
  return s;
}

static kn_status execute(const conv_entry *e, const void *const *ptrs) {
  exec_ctx x = {NULL, NULL, NULL, scratch_size(e)};
  kn_status st = kn__dnnl_engine(&x.eng);
  if (st != KN_OK) return st;
  slot_mem m[4] = {0};
  dnnl_exec_arg_t args[4];
  dnnl_status_t s = dnnl_success;
  for (int i = 0; i < e->nslots && s == dnnl_success; i++) {
    s = slot_open(&e->slot[i], x.eng, ptrs[i], &m[i]);
    args[i] = (dnnl_exec_arg_t){e->slot[i].kind, m[i].prim};
  }
  if (s == dnnl_success && x.nscratch && !(x.scratch = kn__cached_alloc(x.nscratch)))
    s = dnnl_out_of_memory;
  if (s == dnnl_success) s = dnnl_stream_create(&x.stream, x.eng, dnnl_stream_default_flags);
  if (s == dnnl_success) s = reorders(&x, e, m, false);
  if (s == dnnl_success) s = exec_prim(&x, e->prim, e->nslots, args, &e->scratch);
  if (s == dnnl_success) s = reorders(&x, e, m, true);
  if (x.stream) dnnl_stream_destroy(x.stream);
  if (x.scratch) kn__cached_free(x.scratch, x.nscratch);
  for (int i = 0; i < e->nslots; i++) slot_close(&m[i]);
  return kn__dnnl_status(s, "convolution");
}

/* The multiply-adds of a convolution (every direction does as many). */
static int64_t conv_macs(const kn__convg *g) {
  return g->N * g->O * g->OH * g->OW * (g->G ? g->C / g->G : g->C) * g->kh * g->kw;
}

/* Is e oneDNN's reference implementation (plain C loops, for a case its
** JIT kernels do not cover on this CPU)? */
static bool entry_is_ref(const conv_entry *e) { return !strncmp(e->impl, "ref", 3); }

/* Find (or build) the primitive for k and run it on the pointers (in the
** order of specs[k->dir]) under the team of the convolution's size
** (kn__par_limit, KN__GRAIN_CONV): a small one runs on the calling thread,
** without waking oneDNN's team. */
static kn_status run(const conv_key *k, const void *const *ptrs) {
  int prev = kn__par_limit(conv_macs(&k->g), KN__GRAIN_CONV);
  pthread_mutex_lock(&cache_mu);
  conv_entry *e;
  kn_status st = lookup(k, &e);
  if (st == KN_OK) e->users++;
  pthread_mutex_unlock(&cache_mu);
  if (st == KN_OK) {
    st = execute(e, ptrs);
    pthread_mutex_lock(&cache_mu);
    if (--e->users == 0 && e->evicted) entry_free(e);
    pthread_mutex_unlock(&cache_mu);
  }
  kn__par_restore(prev);
  return st;
}

kn_status kn__dnnl_conv_fwd(const kn__convg *g, kn_dtype dt, const void *x, const void *w,
                            const void *b, void *y) {
  conv_key k = {*g, FWD, b != NULL, dt};
  const void *ptrs[4] = {x, w, y, b};
  return run(&k, ptrs);
}

kn_status kn__dnnl_conv_bwd_data(const kn__convg *g, kn_dtype dt, const void *gy, const void *w,
                                 void *gx) {
  conv_key k = {*g, BWD_DATA, false, dt};
  const void *ptrs[3] = {gy, w, gx};
  return run(&k, ptrs);
}

kn_status kn__dnnl_conv_bwd_weights(const kn__convg *g, kn_dtype dt, const void *x,
                                    const void *gy, void *gw, void *gb) {
  conv_key k = {*g, BWD_WEIGHTS, gb != NULL, dt};
  const void *ptrs[4] = {x, gy, gw, gb};
  return run(&k, ptrs);
}

/* The cached entry of k's implementation name into buf, and whether it is
** oneDNN's reference one (*ref may be NULL). */
static kn_status impl_of(const conv_key *k, char *buf, size_t n, bool *ref) {
  pthread_mutex_lock(&cache_mu);
  conv_entry *e;
  kn_status st = lookup(k, &e);
  if (st == KN_OK && buf) snprintf(buf, n, "%s", e->impl);
  if (st == KN_OK && ref) *ref = entry_is_ref(e);
  pthread_mutex_unlock(&cache_mu);
  return st;
}

kn_status kn__dnnl_conv_impl(const kn__convg *g, kn_dtype dt, char *buf, size_t n) {
  conv_key k = {*g, FWD, false, dt};
  return impl_of(&k, buf, n, NULL);
}

bool kn__dnnl_conv_fast(const kn__convg *g, kn_dtype dt, bool bias, unsigned dirs) {
  kn__error_state saved;
  kn__error_save(&saved);
  bool fast = true;
  for (int d = FWD; d <= BWD_WEIGHTS && fast; d++) {
    if (!(dirs & (1u << d))) continue;
    conv_key k = {*g, (conv_dir)d, bias && d != BWD_DATA, dt};
    bool ref = true;
    fast = impl_of(&k, NULL, 0, &ref) == KN_OK && !ref;
  }
  kn__error_restore(&saved); /* a case oneDNN refuses is not an error: the caller falls back */
  return fast;
}
