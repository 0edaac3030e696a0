/*
** ops/index_rows.c: index_select and gather over contiguous tensors, split
** over kiln's threads (the general kernels of ops/index.c walk any strides
** one element at a time, on one thread).
**
** All view the tensors as [outer, size along dim, inner]. index_select
** copies rows of `inner` elements (whole rows with memcpy, single elements
** by their size); gather moves one element per index entry; scatter and
** scatter_add split the output's columns (outer, inner position), which no
** two threads share, and walk each column's index entries in the general
** kernel's order (duplicates: the last write wins, sums add in the same
** order), so results are the general kernel's bit for bit. Indices are
** checked before anything is written, in the order the general kernels
** check them, so the first bad index gives the same error.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/index.h"
#include "ops/threads.h"

/* Sizes of t before dim d, along it, and after it. */
static void split3(const kn_tensor *t, int d, int64_t *outer, int64_t *mid, int64_t *inner) {
  *outer = *inner = 1;
  for (int k = 0; k < d; k++) *outer *= t->sizes[k];
  for (int k = d + 1; k < t->ndim; k++) *inner *= t->sizes[k];
  *mid = t->sizes[d];
}

static char *bytes(const kn_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)kn_dtype_size(t->dtype);
}

/* Move one element of es bytes. */
static inline void move1(char *dst, const char *src, size_t es) {
  switch (es) {
  case 8: memcpy(dst, src, 8); break;
  case 4: memcpy(dst, src, 4); break;
  case 2: memcpy(dst, src, 2); break;
  default: memcpy(dst, src, es); break;
  }
}

/* t's [outer, size, inner] split at d, and every one of the outer * n *
** inner index values checked against size (the general kernel's check and
** error, in its order). */
static kn_status along_index(const kn_tensor *t, int d, const int64_t *iv, int64_t n,
                             int64_t *outer, int64_t *size, int64_t *inner) {
  split3(t, d, outer, size, inner);
  int64_t total = *outer * n * *inner;
  for (int64_t k = 0; k < total; k++)
    if (iv[k] < 0 || iv[k] >= *size) return kn__out_of_bounds(iv[k], d, *size);
  return KN_OK;
}

/* ---- index_select ---------------------------------------------------------------- */

bool kn__index_select_fast_ok(const kn_tensor *self, const kn_tensor *o) {
  return self->ndim > 0 && kn_is_contiguous(self) && kn_is_contiguous(o) &&
         self->dtype == o->dtype;
}

/* The index as int64 values checked against size (the first bad one named). */
static kn_status select_indices(const kn_tensor *index, int64_t size, int64_t *iv) {
  int64_t n = kn_numel(index);
  for (int64_t k = 0; k < n; k++) {
    iv[k] = kn__index_value(index, k);
    if (iv[k] < 0 || iv[k] >= size)
      return kn__error(KN_ERANGE, "INDICES element is out of DATA bounds, id=%lld axis_dim=%lld",
                       (long long)iv[k], (long long)size);
  }
  return KN_OK;
}

kn_status kn__index_select_fast(const kn_tensor *self, int d, const kn_tensor *index,
                                kn_tensor *o) {
  int64_t outer, size, inner, n = kn_numel(index);
  split3(self, d, &outer, &size, &inner);
  int64_t *iv = malloc((size_t)(n ? n : 1) * sizeof *iv);
  if (!iv) return kn__oom();
  kn_status st = select_indices(index, size, iv);
  if (st != KN_OK) {
    free(iv);
    return st;
  }
  size_t es = kn_dtype_size(self->dtype), row = (size_t)inner * es;
  const char *s = bytes(self);
  char *dst = bytes(o);
  int64_t rows = outer * n;
  int team = kn__par_team(rows * inner, rows, KN__GRAIN_MEM);
  KN__PAR_FOR(team, for (int64_t r = 0; r < rows; r++) {
    int64_t oi = r / n, k = r - oi * n;
    const char *from = s + (size_t)(oi * size + iv[k]) * row;
    if (inner == 1) move1(dst + (size_t)r * es, from, es);
    else memcpy(dst + (size_t)r * row, from, row);
  });
  free(iv);
  return KN_OK;
}

/* ---- gather ---------------------------------------------------------------------- */

bool kn__gather_fast_ok(const kn_tensor *self, int d, const kn_tensor *index,
                        const kn_tensor *o) {
  if (self->ndim == 0 || index->ndim != self->ndim || !kn_is_contiguous(self) ||
      !kn_is_contiguous(index) || !kn_is_contiguous(o) || self->dtype != o->dtype)
    return false;
  for (int k = 0; k < self->ndim; k++)
    if (k != d && index->sizes[k] != self->sizes[k]) return false;
  return true;
}

kn_status kn__gather_fast(const kn_tensor *self, int d, const kn_tensor *index, kn_tensor *o) {
  int64_t outer, size, inner, n = index->sizes[d];
  const int64_t *iv = (const int64_t *)bytes(index);
  kn_status st = along_index(self, d, iv, n, &outer, &size, &inner);
  if (st != KN_OK) return st;
  int64_t total = outer * n * inner;
  size_t es = kn_dtype_size(self->dtype);
  const char *s = bytes(self);
  char *dst = bytes(o);
  int64_t rows = outer * n;
  int team = kn__par_team(total, rows, KN__GRAIN_MEM);
  KN__PAR_FOR(team, for (int64_t r = 0; r < rows; r++) {
    int64_t oi = r / n;
    const char *base = s + (size_t)(oi * size * inner) * es;
    for (int64_t i = 0; i < inner; i++) {
      int64_t k = r * inner + i;
      move1(dst + (size_t)k * es, base + (size_t)(iv[k] * inner + i) * es, es);
    }
  });
  return KN_OK;
}

/* ---- scatter / scatter_add ------------------------------------------------------- */

#define KN__SCATTER_BLOCK 512 /* columns of inner a task takes */

bool kn__scatter_fast_ok(const kn_tensor *o, int d, const kn_tensor *index,
                         const kn_tensor *src) {
  if (o->ndim == 0 || index->ndim != o->ndim || !kn_is_contiguous(o) ||
      !kn_is_contiguous(index) || (src && (!kn_is_contiguous(src) || src->dtype != o->dtype)))
    return false;
  for (int k = 0; k < o->ndim; k++) {
    if (k != d && index->sizes[k] != o->sizes[k]) return false;
    if (src && src->sizes[k] != index->sizes[k]) return false;
  }
  return true;
}

/* *dst = src, or *dst += src as kn__elem_accumulate (float32: the sum in
** double, rounded once; exactly the general kernel's arithmetic). */
static inline void put1(char *dst, const char *src, kn_dtype dt, size_t es, bool acc) {
  if (!acc) move1(dst, src, es);
  else if (dt == KN_FLOAT32) {
    float *f = (float *)(void *)dst;
    *f = (float)((double)*f + (double)*(const float *)(const void *)src);
  } else if (dt == KN_FLOAT64) {
    *(double *)(void *)dst += *(const double *)(const void *)src;
  } else {
    kn__elem_accumulate(dst, src, dt);
  }
}

kn_status kn__scatter_fast(kn_tensor *o, int d, const kn_tensor *index, const kn_tensor *src,
                           const char *value, bool acc) {
  int64_t outer, size, inner, n = index->sizes[d];
  const int64_t *iv = (const int64_t *)bytes(index);
  kn_status st = along_index(o, d, iv, n, &outer, &size, &inner);
  if (st != KN_OK) return st;
  int64_t total = outer * n * inner;
  kn_dtype dt = o->dtype;
  size_t es = kn_dtype_size(dt);
  const char *s = src ? bytes(src) : NULL;
  char *dst = bytes(o);
  int64_t nblk = (inner + KN__SCATTER_BLOCK - 1) / KN__SCATTER_BLOCK, tasks = outer * nblk;
  int team = kn__par_team(total, tasks, KN__GRAIN_MEM);
  KN__PAR_FOR(team, for (int64_t t = 0; t < tasks; t++) {
    int64_t oi = t / nblk, i0 = (t - oi * nblk) * KN__SCATTER_BLOCK;
    int64_t i1 = i0 + KN__SCATTER_BLOCK < inner ? i0 + KN__SCATTER_BLOCK : inner;
    char *base = dst + (size_t)(oi * size * inner) * es;
    for (int64_t j = 0; j < n; j++)
      for (int64_t i = i0; i < i1; i++) {
        int64_t k = (oi * n + j) * inner + i;
        put1(base + (size_t)(iv[k] * inner + i) * es, s ? s + (size_t)k * es : value, dt, es, acc);
      }
  });
  return KN_OK;
}
