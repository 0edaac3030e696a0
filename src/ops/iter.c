/*
** ops/iter.c: the strided iterator (sequential and OpenMP row runners) and
** the generic copy.
*/
#include <omp.h>
#include <string.h>

#include "core/error.h"
#include "ops/cvt16.h"
#include "ops/cuda_ops.h"
#include "ops/iter.h"
#include "ops/threads.h"

void kn__iter_init(kn__iter *it, int ndim, const int64_t *sizes) {
  memset(it, 0, sizeof *it);
  it->ndim = ndim;
  memcpy(it->sizes, sizes, (size_t)ndim * sizeof *sizes);
}

void kn__iter_add_raw(kn__iter *it, void *base, const int64_t *elem_strides, size_t elsize) {
  int k = it->nops++;
  it->base[k] = base;
  for (int d = 0; d < it->ndim; d++) it->strides[k][d] = elem_strides[d] * (int64_t)elsize;
}

void kn__iter_add(kn__iter *it, const kn_tensor *t) {
  kn__iter_add_raw(it, kn_data(t), t->strides, kn_dtype_size(t->dtype));
}

void kn__iter_add_broadcast(kn__iter *it, const kn_tensor *t) {
  int64_t st[KN_MAX_DIMS];
  int lead = it->ndim - t->ndim;
  for (int d = 0; d < it->ndim; d++) {
    int td = d - lead;
    st[d] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td];
  }
  kn__iter_add_raw(it, kn_data(t), st, kn_dtype_size(t->dtype));
}

/* Merge dim d into d+1 when every operand steps through d as one run of d+1. */
static void coalesce(kn__iter *it) {
  int nd = 0;
  int64_t sizes[KN_MAX_DIMS], strides[KN__ITER_MAX][KN_MAX_DIMS];
  for (int d = 0; d < it->ndim; d++) {
    if (it->sizes[d] == 1) continue; /* size-1 dims never move */
    if (nd > 0) {
      bool ok = true;
      for (int k = 0; k < it->nops && ok; k++)
        ok = strides[k][nd - 1] == it->strides[k][d] * it->sizes[d];
      if (ok) {
        sizes[nd - 1] *= it->sizes[d];
        for (int k = 0; k < it->nops; k++) strides[k][nd - 1] = it->strides[k][d];
        continue;
      }
    }
    sizes[nd] = it->sizes[d];
    for (int k = 0; k < it->nops; k++) strides[k][nd] = it->strides[k][d];
    nd++;
  }
  it->ndim = nd;
  memcpy(it->sizes, sizes, (size_t)nd * sizeof *sizes);
  for (int k = 0; k < it->nops; k++)
    memcpy(it->strides[k], strides[k], (size_t)nd * sizeof(int64_t));
}

void kn__iter_start(kn__iter *it) {
  bool empty = false;
  for (int d = 0; d < it->ndim; d++) empty = empty || it->sizes[d] == 0;
  coalesce(it);
  if (it->ndim == 0) { /* a single element */
    it->inner_n = 1;
    for (int k = 0; k < it->nops; k++) it->inner_stride[k] = 0;
    it->remaining = empty ? 0 : 1;
  } else {
    int in = it->ndim - 1;
    it->inner_n = it->sizes[in];
    for (int k = 0; k < it->nops; k++) it->inner_stride[k] = it->strides[k][in];
    it->remaining = 1;
    for (int d = 0; d < in; d++) it->remaining *= it->sizes[d];
    if (empty) it->remaining = 0;
  }
  memset(it->idx, 0, sizeof it->idx);
  for (int k = 0; k < it->nops; k++) it->ptr[k] = it->base[k];
}

bool kn__iter_next(kn__iter *it, char **p, int64_t *n) {
  if (it->remaining <= 0) return false;
  for (int k = 0; k < it->nops; k++) p[k] = it->ptr[k];
  *n = it->inner_n;
  if (--it->remaining > 0) { /* advance the outer index */
    for (int d = it->ndim - 2; d >= 0; d--) {
      for (int k = 0; k < it->nops; k++) it->ptr[k] += it->strides[k][d];
      if (++it->idx[d] < it->sizes[d]) break;
      for (int k = 0; k < it->nops; k++) it->ptr[k] -= it->strides[k][d] * it->sizes[d];
      it->idx[d] = 0;
    }
  }
  return true;
}

int64_t kn__iter_numel(const kn__iter *it) { return kn__numel(it->ndim, it->sizes); }

void kn__strided_copy(char *d, int64_t ds, const char *s, int64_t ss, size_t es, int64_t n) {
#define KN_MOVE(T)                                                             \
  for (int64_t i = 0; i < n; i++) {                                            \
    T v;                                                                       \
    memcpy(&v, s + i * ss, sizeof v);                                          \
    memcpy(d + i * ds, &v, sizeof v);                                          \
  }
  switch (es) {
  case 1: KN_MOVE(uint8_t) break;
  case 2: KN_MOVE(uint16_t) break;
  case 4: KN_MOVE(uint32_t) break;
  case 8: KN_MOVE(uint64_t) break;
  default:
    for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, s + i * ss, es);
  }
#undef KN_MOVE
}

static void copy_row(char *d, int64_t ds, kn_dtype dt, const char *s, int64_t ss, kn_dtype st,
                     int64_t n) {
  size_t es = kn_dtype_size(dt);
  if (dt == st && ds == (int64_t)es && ss == (int64_t)es) {
    memcpy(d, s, (size_t)n * es);
  } else if (dt == st) {
    kn__strided_copy(d, ds, s, ss, es, n);
  } else if (ds == (int64_t)es && ss == (int64_t)kn_dtype_size(st) &&
             kn__cvt16_run(d, dt, s, st, n)) {
    /* float32 <-> bfloat16/float16, contiguous: vectorised */
  } else if (kn_dtype_is_floating(dt) || kn_dtype_is_floating(st)) {
    for (int64_t i = 0; i < n; i++) kn__store_double(d + i * ds, dt, kn__load_double(s + i * ss, st));
  } else {
    for (int64_t i = 0; i < n; i++) kn__store_int(d + i * ds, dt, kn__load_int(s + i * ss, st));
  }
}

typedef struct copy_ctx { kn_dtype dt, st; } copy_ctx;

static void copy_fn(char **p, const int64_t *s, int64_t n, const void *ctx) {
  const copy_ctx *c = ctx;
  copy_row(p[0], s[0], c->dt, p[1], s[1], c->st, n);
}

kn_status kn__copy_into(kn_tensor *dst, const kn_tensor *src) {
  if (kn__tensor_on_cuda(dst) || kn__tensor_on_cuda(src)) return kn__cuda_copy_into(dst, src);
  if (!kn_data(dst) || !kn_data(src)) {
    if (kn_numel(dst) == 0) return KN_OK;
    return kn__error(KN_EINVAL, "copy: tensors without data (meta or fake)");
  }
  kn__iter it;
  kn__iter_init(&it, dst->ndim, dst->sizes);
  kn__iter_add(&it, dst);
  kn__iter_add_broadcast(&it, src);
  copy_ctx c = {dst->dtype, src->dtype};
  kn__iter_run(&it, copy_fn, &c,
               dst->dtype == src->dtype ? KN__PAR_GRAIN_MEM : KN__PAR_GRAIN_CVT);
  return KN_OK;
}

kn_tensor *kn__contiguous_copy(const kn_tensor *t, kn_dtype dt) {
  kn_tensor *r = kn__empty(t->ndim, t->sizes, dt, t->device);
  if (!r) return NULL;
  if ((t->device == KN_CPU || t->device == KN_CUDA) && kn__copy_into(r, t) != KN_OK) {
    kn_release(r);
    return NULL;
  }
  return r;
}

bool kn__is16(kn_dtype dt) { return dt == KN_BFLOAT16 || dt == KN_FLOAT16; }

const kn_tensor *kn__widen16(const kn_tensor *t, kn_tensor **keep) {
  *keep = NULL;
  if (!kn__is16(t->dtype)) return t;
  return *keep = kn__contiguous_copy(t, KN_FLOAT32);
}

kn_tensor *kn__stand_in16(kn_tensor *t, kn_tensor **keep) {
  *keep = NULL;
  if (!kn__is16(t->dtype)) return t;
  return *keep = kn__empty(t->ndim, t->sizes, KN_FLOAT32, t->device);
}

kn_status kn__narrow16(kn_status st, kn_tensor *t, kn_tensor *keep) {
  if (st == KN_OK && keep) st = kn__copy_into(t, keep);
  kn_release(keep);
  return st;
}

void kn__iter_row_ptrs(const kn__iter *it, int64_t r, char **p) {
  for (int k = 0; k < it->nops; k++) p[k] = it->base[k];
  for (int d = it->ndim - 2; d >= 0 && r > 0; d--) {
    int64_t i = r % it->sizes[d];
    r /= it->sizes[d];
    for (int k = 0; k < it->nops; k++) p[k] += i * it->strides[k][d];
  }
}

/* Split one long row into chunks of whole cache lines (kn__par_parts of
** them) that the threads take as they finish the one before. */
static void run_chunks(kn__iter *it, kn__iter_row_fn fn, const void *ctx, int nt,
                       int64_t grain) {
  int64_t n = it->inner_n;
  int np = kn__par_parts(nt, n, (n + 63) / 64, grain);
  int64_t chunk = ((n + np - 1) / np + 63) & ~(int64_t)63;
  int64_t nchunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1) num_threads(kn__par_threads(nt))
  for (int64_t c = 0; c < nchunks; c++) {
    char *p[KN__ITER_MAX];
    int64_t lo = c * chunk, len = n - lo < chunk ? n - lo : chunk;
    for (int k = 0; k < it->nops; k++) p[k] = it->base[k] + lo * it->inner_stride[k];
    fn(p, it->inner_stride, len, ctx);
  }
}

static void run_rows(kn__iter *it, kn__iter_row_fn fn, const void *ctx, int nt) {
#pragma omp parallel for schedule(static) num_threads(kn__par_threads(nt))
  for (int64_t r = 0; r < it->remaining; r++) {
    char *p[KN__ITER_MAX];
    kn__iter_row_ptrs(it, r, p);
    fn(p, it->inner_stride, it->inner_n, ctx);
  }
}

void kn__iter_run(kn__iter *it, kn__iter_row_fn fn, const void *ctx, int64_t grain) {
  kn__iter_start(it);
  int64_t rows = it->remaining;
  int nt = rows > 0 ? kn__par_team(rows * it->inner_n, rows == 1 ? it->inner_n / 64 : rows, grain)
                    : 1;
  if (nt > 1 && rows == 1) {
    run_chunks(it, fn, ctx, nt, grain);
  } else if (nt > 1) {
    run_rows(it, fn, ctx, nt);
  } else {
    char *p[KN__ITER_MAX];
    int64_t n;
    while (kn__iter_next(it, p, &n)) fn(p, it->inner_stride, n, ctx);
  }
}
