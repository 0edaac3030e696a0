/*
** ops/nn_conv_dnnl.c: float32 convolution through oneDNN primitives.
**
** Creating a primitive (descriptor, implementation search, JIT code) costs
** far more than running a small convolution, so primitives are cached per
** (direction, bias, geometry) in a small process-wide list guarded by a
** mutex; the least recently used entry leaves the list when it is full and
** is destroyed once no thread is running it. Primitives run outside the lock
** (oneDNN primitives may execute concurrently). Cached primitives live until
** evicted or until exit (reachable from the list).
** Data stays in PyTorch's layouts (NCHW activations, OIHW / GOIHW weights),
** so no reorders are needed around the call.
*/
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/nn_dnnl.h"

typedef enum conv_dir { FWD, BWD_DATA, BWD_WEIGHTS } conv_dir;

typedef struct conv_key {
  kn__convg g;
  conv_dir dir;
  bool bias;
} conv_key;

/* One cached primitive with the memory descriptors of its arguments. */
typedef struct conv_entry {
  conv_key key;
  dnnl_primitive_t prim;
  dnnl_memory_desc_t src, wei, bias, dst;
  char impl[64];
  int users;    /* threads running prim right now */
  bool evicted; /* out of the list: destroyed by its last user */
  struct conv_entry *next;
} conv_entry;

#define CACHE_CAP 64

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static conv_entry *cache_head;
static int cache_len;

/* ---- descriptors ------------------------------------------------------------- */

static void md_act(dnnl_memory_desc_t *md, int64_t n, int64_t c, int64_t h, int64_t w) {
  dnnl_dims_t d = {n, c, h, w};
  dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_nchw);
}

static void md_weights(dnnl_memory_desc_t *md, const kn__convg *g) {
  if (g->G == 1) {
    dnnl_dims_t d = {g->O, g->C, g->kh, g->kw};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_oihw);
  } else {
    dnnl_dims_t d = {g->G, g->O / g->G, g->C / g->G, g->kh, g->kw};
    dnnl_memory_desc_init_by_tag(md, 5, d, dnnl_f32, dnnl_goihw);
  }
}

static void fill_mds(conv_entry *e) {
  const kn__convg *g = &e->key.g;
  md_act(&e->src, g->N, g->C, g->H, g->W);
  md_act(&e->dst, g->N, g->O, g->OH, g->OW);
  md_weights(&e->wei, g);
  dnnl_dims_t bd = {g->O};
  dnnl_memory_desc_init_by_tag(&e->bias, 1, bd, dnnl_f32, dnnl_a);
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

static dnnl_status_t fwd_desc(const conv_entry *e, bool bias, dnnl_convolution_desc_t *cd) {
  conv_params p = params_of(&e->key.g);
  return dnnl_dilated_convolution_forward_desc_init(
      cd, dnnl_forward_training, dnnl_convolution_direct, &e->src, &e->wei,
      bias ? &e->bias : NULL, &e->dst, p.strides, p.dil, p.pad, p.pad);
}

static dnnl_status_t bwd_desc(const conv_entry *e, dnnl_convolution_desc_t *cd) {
  conv_params p = params_of(&e->key.g);
  if (e->key.dir == BWD_DATA)
    return dnnl_dilated_convolution_backward_data_desc_init(
        cd, dnnl_convolution_direct, &e->src, &e->wei, &e->dst, p.strides, p.dil, p.pad, p.pad);
  return dnnl_dilated_convolution_backward_weights_desc_init(
      cd, dnnl_convolution_direct, &e->src, &e->wei, e->key.bias ? &e->bias : NULL, &e->dst,
      p.strides, p.dil, p.pad, p.pad);
}

/* The primitive descriptor of e (a backward one needs the forward one as a
** hint). The caller destroys *pd. */
static dnnl_status_t make_pd(const conv_entry *e, dnnl_engine_t eng, dnnl_primitive_desc_t *pd) {
  dnnl_convolution_desc_t fd, bd;
  dnnl_status_t s = fwd_desc(e, e->key.dir == FWD && e->key.bias, &fd);
  if (s != dnnl_success) return s;
  if (e->key.dir == FWD) return dnnl_primitive_desc_create(pd, &fd, NULL, eng, NULL);
  dnnl_primitive_desc_t hint;
  s = dnnl_primitive_desc_create(&hint, &fd, NULL, eng, NULL);
  if (s != dnnl_success) return s;
  s = bwd_desc(e, &bd);
  if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &bd, NULL, eng, hint);
  dnnl_primitive_desc_destroy(hint);
  return s;
}

static kn_status build_entry(conv_entry *e) {
  dnnl_engine_t eng;
  kn_status st = kn__dnnl_engine(&eng);
  if (st != KN_OK) return st;
  fill_mds(e);
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = make_pd(e, eng, &pd);
  if (s != dnnl_success) return kn__dnnl_status(s, "convolution descriptor");
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
    impl = "unknown";
  snprintf(e->impl, sizeof e->impl, "%s", impl);
  s = dnnl_primitive_create(&e->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  return kn__dnnl_status(s, "convolution primitive creation");
}

/* ---- cache -------------------------------------------------------------------- */

static bool key_eq(const conv_key *a, const conv_key *b) {
  return a->dir == b->dir && a->bias == b->bias && !memcmp(&a->g, &b->g, sizeof a->g);
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

static void entry_free(conv_entry *e) {
  dnnl_primitive_destroy(e->prim);
  free(e);
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

/* The cached entry for k (built on a miss). Called with cache_mu held. */
static kn_status lookup(const conv_key *k, conv_entry **out) {
  conv_entry *e = cache_find(k);
  if (!e) {
    e = calloc(1, sizeof *e);
    if (!e) return kn__oom();
    e->key = *k;
    kn_status st = build_entry(e);
    if (st != KN_OK) {
      free(e);
      return st;
    }
    cache_insert(e);
  }
  *out = e;
  return KN_OK;
}

/* ---- execution ------------------------------------------------------------------ */

typedef struct conv_arg {
  int kind;
  const dnnl_memory_desc_t *md;
  const float *p;
} conv_arg;

static kn_status execute(dnnl_primitive_t prim, int n, const conv_arg *a) {
  dnnl_engine_t eng;
  kn_status st = kn__dnnl_engine(&eng);
  if (st != KN_OK) return st;
  dnnl_exec_arg_t args[4];
  dnnl_memory_t mem[4] = {0};
  dnnl_status_t s = dnnl_success;
  int made = 0;
  for (; made < n && s == dnnl_success; made++) {
    s = dnnl_memory_create(&mem[made], a[made].md, eng, (void *)(uintptr_t)a[made].p);
    args[made] = (dnnl_exec_arg_t){a[made].kind, mem[made]};
  }
  dnnl_stream_t stream = NULL;
  if (s == dnnl_success) s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
  if (s == dnnl_success) s = dnnl_primitive_execute(prim, stream, n, args);
  if (s == dnnl_success) s = dnnl_stream_wait(stream);
  if (stream) dnnl_stream_destroy(stream);
  for (int i = 0; i < made; i++)
    if (mem[i]) dnnl_memory_destroy(mem[i]);
  return kn__dnnl_status(s, "convolution");
}

/* Find (or build) the primitive for k and run it on n arguments: argument i
** is oneDNN's kinds[i] at ptrs[i], described by the entry's descriptor for
** roles[i]. */
typedef enum role { R_SRC, R_WEI, R_BIAS, R_DST } role;

static kn_status run(const conv_key *k, int n, const int *kinds, const role *roles,
                     const float *const *ptrs) {
  pthread_mutex_lock(&cache_mu);
  conv_entry *e;
  kn_status st = lookup(k, &e);
  if (st == KN_OK) e->users++;
  pthread_mutex_unlock(&cache_mu);
  if (st != KN_OK) return st;
  conv_arg a[4];
  const dnnl_memory_desc_t *mds[4] = {&e->src, &e->wei, &e->bias, &e->dst};
  for (int i = 0; i < n; i++) a[i] = (conv_arg){kinds[i], mds[roles[i]], ptrs[i]};
  st = execute(e->prim, n, a);
  pthread_mutex_lock(&cache_mu);
  if (--e->users == 0 && e->evicted) entry_free(e);
  pthread_mutex_unlock(&cache_mu);
  return st;
}

kn_status kn__dnnl_conv_fwd(const kn__convg *g, const float *x, const float *w, const float *b,
                            float *y) {
  conv_key k = {*g, FWD, b != NULL};
  int kinds[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
  role roles[4] = {R_SRC, R_WEI, R_DST, R_BIAS};
  const float *ptrs[4] = {x, w, y, b};
  return run(&k, b ? 4 : 3, kinds, roles, ptrs);
}

kn_status kn__dnnl_conv_bwd_data(const kn__convg *g, const float *gy, const float *w,
                                 float *gx) {
  conv_key k = {*g, BWD_DATA, false};
  int kinds[3] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
  role roles[3] = {R_DST, R_WEI, R_SRC};
  const float *ptrs[3] = {gy, w, gx};
  return run(&k, 3, kinds, roles, ptrs);
}

kn_status kn__dnnl_conv_bwd_weights(const kn__convg *g, const float *x, const float *gy,
                                    float *gw, float *gb) {
  conv_key k = {*g, BWD_WEIGHTS, gb != NULL};
  int kinds[4] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS};
  role roles[4] = {R_SRC, R_DST, R_WEI, R_BIAS};
  const float *ptrs[4] = {x, gy, gw, gb};
  return run(&k, gb ? 4 : 3, kinds, roles, ptrs);
}

kn_status kn__dnnl_conv_impl(const kn__convg *g, char *buf, size_t n) {
  conv_key k = {*g, FWD, false};
  pthread_mutex_lock(&cache_mu);
  conv_entry *e;
  kn_status st = lookup(&k, &e);
  if (st == KN_OK) snprintf(buf, n, "%s", e->impl);
  pthread_mutex_unlock(&cache_mu);
  return st;
}
