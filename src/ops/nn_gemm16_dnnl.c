/*
** ops/nn_gemm16_dnnl.c: bfloat16/float16 matrix products on oneDNN's matmul
** primitive, float32 accumulation, the result in float32 or rounded once to
** the operands' dtype by oneDNN (a plain product: no float32 buffer and no
** conversion pass after it).
**
** oneDNN runs bfloat16 on AVX512-BF16 (vdpbf16ps) and AMX tiles where the
** CPU has them, and emulates it on plain AVX-512; without AVX-512 it has
** only its reference implementation, which is slower than converting the
** operands to float32 and calling sgemm. So a primitive whose
** implementation is the reference one ("ref:...") is not used (unless a
** test forces it): the caller falls back to the conversion path, and the
** refusal is cached with the primitive's key so it is decided once per
** shape. A bfloat16 primitive without AMX is refused too: vdpbf16ps issues
** on one port, so its peak is the float32 FMA's on two, and on a Xeon with
** AVX512-BF16 and no AMX (oneDNN 2.7's brg:avx512_core_bf16) the
** conversion path ran 1.3-1.75x faster than oneDNN's bfloat16 kernel
** (docs/KERNELS.md, "bfloat16 GEMMs"); with AMX, oneDNN's tiles are the
** fast path.
**
** Primitives are cached per (dtype, sizes, operand strides, result dtype
** and row stride) in a
** process-wide list under a mutex (at most CACHE_CAP; past it a primitive is
** created, run and destroyed per call). Cached primitives live until exit.
** They are created with the "user" scratchpad mode so several threads may
** run one at once, each with its own scratchpad (as ops/nn_conv_dnnl.c).
*/
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/nn.h"
#include "ops/nn_dnnl.h"
#include "profiler/profiler.h"

typedef struct mm_key {
  int mode; /* kn__gemm16_mode when built: a forced primitive is not an automatic one */
  int bias; /* a bias row [1, N] of dtype dt added before the rounding */
  kn_dtype dt, cdt; /* operands, result (float32 or dt) */
  int64_t M, N, K, as0, as1, bs0, bs1, ldc;
} mm_key;

typedef struct mm_entry {
  mm_key key;
  dnnl_primitive_t prim;     /* NULL when refused (reference implementation only) */
  dnnl_memory_desc_t md[4];  /* src, weights, dst, bias */
  dnnl_memory_desc_t scratch;
  char impl[64];
  struct mm_entry *next;
} mm_entry;

#define CACHE_CAP 128

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static mm_entry *cache_head;
static int cache_len;
static atomic_int mode; /* kn__gemm16_mode */

void kn__gemm16_set_mode(kn__gemm16_mode m) { atomic_store(&mode, (int)m); }

static dnnl_data_type_t dnnl_dt(kn_dtype dt) { return dt == KN_BFLOAT16 ? dnnl_bf16 : dnnl_f16; }

static dnnl_status_t make_pd(const mm_key *k, dnnl_engine_t eng, mm_entry *e,
                             dnnl_primitive_desc_t *pd) {
  dnnl_dims_t a = {k->M, k->K}, b = {k->K, k->N}, c = {k->M, k->N};
  dnnl_dims_t as = {k->as0, k->as1}, bs = {k->bs0, k->bs1}, cs = {k->ldc, 1};
  dnnl_dims_t r = {1, k->N}, rs = {k->N, 1};
  dnnl_data_type_t cdt = k->cdt == KN_FLOAT32 ? dnnl_f32 : dnnl_dt(k->cdt);
  dnnl_status_t s = dnnl_memory_desc_init_by_strides(&e->md[0], 2, a, dnnl_dt(k->dt), as);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&e->md[1], 2, b, dnnl_dt(k->dt), bs);
  if (s == dnnl_success) s = dnnl_memory_desc_init_by_strides(&e->md[2], 2, c, cdt, cs);
  if (s == dnnl_success && k->bias)
    s = dnnl_memory_desc_init_by_strides(&e->md[3], 2, r, dnnl_dt(k->dt), rs);
  dnnl_matmul_desc_t d;
  if (s == dnnl_success)
    s = dnnl_matmul_desc_init(&d, &e->md[0], &e->md[1], k->bias ? &e->md[3] : NULL, &e->md[2]);
  dnnl_primitive_attr_t attr;
  if (s == dnnl_success) s = dnnl_primitive_attr_create(&attr);
  if (s != dnnl_success) return s;
  s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
  if (s == dnnl_success) s = dnnl_primitive_desc_create(pd, &d, attr, eng, NULL);
  dnnl_primitive_attr_destroy(attr);
  return s;
}

/* Build e's primitive; a reference-only implementation leaves e->prim NULL
** (unless forced). oneDNN's "unimplemented" (float16 on older CPUs) too, and
** any failure to describe a 16-bit result or a bias: the caller then takes
** the float32 result path, which is the one that reports errors. */
static kn_status build(mm_entry *e) {
  dnnl_engine_t eng;
  kn_status st = kn__dnnl_engine(&eng);
  if (st != KN_OK) return st;
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = make_pd(&e->key, eng, e, &pd);
  if (s == dnnl_unimplemented || (s != dnnl_success && (e->key.bias || e->key.cdt != KN_FLOAT32))) {
    snprintf(e->impl, sizeof e->impl, "unimplemented");
    return KN_OK;
  }
  if (s != dnnl_success) return kn__dnnl_status(s, "matmul descriptor");
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
    impl = "unknown";
  snprintf(e->impl, sizeof e->impl, "%s", impl);
  const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (sm) e->scratch = *sm;
  else memset(&e->scratch, 0, sizeof e->scratch);
  bool slow = !strncmp(impl, "ref", 3) || (e->key.dt == KN_BFLOAT16 && !strstr(impl, "amx"));
  bool refuse = slow && e->key.mode != KN__GEMM16_ONEDNN;
  if (!refuse) s = dnnl_primitive_create(&e->prim, pd);
  dnnl_primitive_desc_destroy(pd);
  return kn__dnnl_status(s, "matmul primitive creation");
}

/* Keys are compared with memcmp: made here, padding zeroed. */
static mm_key make_key(kn_dtype dt, kn_dtype cdt, int64_t M, int64_t N, int64_t K, kn__mat A,
                       kn__mat B, int64_t ldc, bool bias) {
  mm_key k;
  memset(&k, 0, sizeof k);
  k.mode = atomic_load(&mode);
  k.bias = bias;
  k.dt = dt, k.cdt = cdt;
  k.M = M, k.N = N, k.K = K;
  k.as0 = A.s0, k.as1 = A.s1, k.bs0 = B.s0, k.bs1 = B.s1, k.ldc = ldc;
  return k;
}

static bool key_eq(const mm_key *a, const mm_key *b) { return !memcmp(a, b, sizeof *a); }

/* The entry for k, built on a miss (cache_mu held). *owned: not cached, the
** caller destroys it. */
static kn_status lookup(const mm_key *k, mm_entry **out, bool *owned) {
  for (mm_entry *e = cache_head; e; e = e->next)
    if (key_eq(&e->key, k)) {
      *out = e;
      *owned = false;
      return KN_OK;
    }
  mm_entry *e = calloc(1, sizeof *e);
  if (!e) return kn__oom();
  e->key = *k;
  int64_t tp = kn__prof_sub_begin();
  kn_status st = build(e);
  kn__prof_sub_end("onednn::matmul_primitive_create", tp);
  if (st != KN_OK) {
    free(e);
    return st;
  }
  *owned = cache_len >= CACHE_CAP;
  if (!*owned) {
    e->next = cache_head;
    cache_head = e;
    cache_len++;
  }
  *out = e;
  return KN_OK;
}

static kn_status run(const mm_entry *e, const void *A, const void *B, const void *bias, void *C) {
  dnnl_engine_t eng;
  kn_status st = kn__dnnl_engine(&eng);
  if (st != KN_OK) return st;
  dnnl_stream_t stream = NULL;
  dnnl_memory_t m[5] = {NULL, NULL, NULL, NULL, NULL};
  size_t sbytes = dnnl_memory_desc_get_size(&e->scratch);
  void *scratch = sbytes ? kn__cached_alloc(sbytes) : NULL;
  if (sbytes && !scratch) return kn__oom();
  const void *ptr[3] = {A, B, C};
  int64_t tp = kn__prof_sub_begin();
  dnnl_status_t s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags);
  for (int i = 0; i < 3 && s == dnnl_success; i++)
    s = dnnl_memory_create(&m[i], &e->md[i], eng, (void *)(uintptr_t)ptr[i]);
  if (s == dnnl_success) s = dnnl_memory_create(&m[3], &e->scratch, eng, scratch);
  if (s == dnnl_success && bias)
    s = dnnl_memory_create(&m[4], &e->md[3], eng, (void *)(uintptr_t)bias);
  kn__prof_sub_end("onednn::matmul_setup", tp);
  if (s == dnnl_success) {
    tp = kn__prof_sub_begin();
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]},
                               {DNNL_ARG_DST, m[2]}, {DNNL_ARG_SCRATCHPAD, m[3]},
                               {DNNL_ARG_BIAS, m[4]}};
    s = dnnl_primitive_execute(e->prim, stream, bias ? 5 : 4, args);
    if (s == dnnl_success) s = dnnl_stream_wait(stream);
    kn__prof_sub_end("onednn::matmul_execute", tp);
  }
  for (int i = 0; i < 5; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  if (stream) dnnl_stream_destroy(stream);
  if (scratch) kn__cached_free(scratch, sbytes);
  return kn__dnnl_status(s, "matmul");
}

kn_status kn__dnnl_gemm16(kn_dtype dt, int64_t M, int64_t N, int64_t K, kn__mat A, kn__mat B,
                          const void *bias, void *C, kn_dtype cdt, int64_t ldc, bool *used) {
  *used = false;
  if (atomic_load(&mode) == KN__GEMM16_CONVERT || (dt != KN_BFLOAT16 && dt != KN_FLOAT16))
    return KN_OK;
  mm_key k = make_key(dt, cdt, M, N, K, A, B, ldc, bias != NULL);
  mm_entry *e;
  bool owned;
  pthread_mutex_lock(&cache_mu);
  kn_status st = lookup(&k, &e, &owned);
  pthread_mutex_unlock(&cache_mu);
  if (st != KN_OK || !e->prim) {
    if (st == KN_OK && owned) free(e);
    return st;
  }
  st = run(e, A.p, B.p, bias, C);
  *used = st == KN_OK;
  if (owned) {
    dnnl_primitive_destroy(e->prim);
    free(e);
  }
  return st;
}

kn_status kn__dnnl_gemm16_impl(kn_dtype dt, int64_t M, int64_t N, int64_t K, char *buf,
                               size_t n) {
  mm_key k = make_key(dt, dt, M, N, K, (kn__mat){NULL, K, 1}, (kn__mat){NULL, N, 1}, N, false);
  mm_entry *e;
  bool owned;
  pthread_mutex_lock(&cache_mu);
  kn_status st = lookup(&k, &e, &owned);
  if (st == KN_OK) snprintf(buf, n, "%s%s", e->impl, e->prim ? "" : " (not used)");
  pthread_mutex_unlock(&cache_mu);
  if (st == KN_OK && owned) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    free(e);
  }
  return st;
}
