/*
** ops/reduce_util.c: dims parsing, output shapes and the reduction plan
** shared by every reduction kernel (see ops/reduce.h).
*/
#include <string.h>

#include "core/error.h"
#include "ops/iter.h"
#include "ops/reduce.h"

kn_status kn__reduce_mask(const char *op, const kn_tensor *t, const kn__arg *dims, bool *mask) {
  (void)op;
  memset(mask, 0, KN_MAX_DIMS * sizeof *mask);
  if (dims->kind == KN__A_INT) { /* one dim (prod.dim_int) */
    kn__arg one = KN_A_INTS(&dims->u.i, 1);
    return kn__reduce_mask(op, t, &one, mask);
  }
  if (dims->kind != KN__A_INTS || dims->u.ints.n == 0) {
    for (int d = 0; d < t->ndim; d++) mask[d] = true;
    return KN_OK;
  }
  for (int i = 0; i < dims->u.ints.n; i++) {
    int w;
    kn_status st = kn__wrap_dim(dims->u.ints.v[i], t->ndim, &w);
    if (st != KN_OK) return st;
    if (t->ndim == 0) continue; /* dim 0 / -1 of a scalar reduces nothing */
    if (mask[w])
      return kn__error(KN_EINVAL, "dim %d appears multiple times in the list of dims", w);
    mask[w] = true;
  }
  return KN_OK;
}

void kn__reduce_shape(const kn_tensor *t, const bool *mask, bool keepdim, kn__outmeta *m) {
  kn_sym in[KN_MAX_DIMS];
  kn__tensor_symsizes(t, in);
  m->ndim = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (!mask[d]) m->sizes[m->ndim++] = in[d];
    else if (keepdim) m->sizes[m->ndim++] = kn__sym_const(1);
  }
}

int64_t kn__reduce_count(const kn_tensor *t, const bool *mask) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    if (mask[d]) n *= t->sizes[d];
  return n;
}

void kn__redplan_init(kn__redplan *p, const kn_tensor *t, const bool *mask) {
  int64_t es = (int64_t)kn_dtype_size(t->dtype);
  memset(p, 0, sizeof *p);
  p->base = kn_data(t);
  p->nout = p->nred = 1;
  for (int d = 0; d < t->ndim; d++) {
    int64_t sz = t->sizes[d], st = t->strides[d] * es;
    if (mask[d]) {
      p->nred *= sz;
      if (sz == 1) continue;
      if (p->nr > 0 && p->rst[p->nr - 1] == st * sz) { /* coalesce with the previous */
        p->rsz[p->nr - 1] *= sz;
        p->rst[p->nr - 1] = st;
        continue;
      }
      p->rsz[p->nr] = sz;
      p->rst[p->nr++] = st;
    } else {
      p->nout *= sz;
      p->ksz[p->nk] = sz;
      p->kst[p->nk++] = st;
    }
  }
}

const char *kn__redplan_at(const kn__redplan *p, int64_t o) {
  const char *b = p->base;
  for (int d = p->nk - 1; d >= 0; d--) {
    int64_t i = o % p->ksz[d];
    o /= p->ksz[d];
    b += i * p->kst[d];
  }
  return b;
}

void kn__redplan_rows(const kn__redplan *p, const char *base, kn__row_fn fn, void *state) {
  if (p->nred == 0) return;
  if (p->nr == 0) { /* a single element */
    fn(state, base, 1, 0, 0);
    return;
  }
  int in = p->nr - 1;
  int64_t n = p->rsz[in], rows = p->nred / n;
  int64_t idx[KN_MAX_DIMS] = {0};
  const char *q = base;
  for (int64_t r = 0; r < rows; r++) {
    fn(state, q, n, p->rst[in], r * n);
    for (int d = in - 1; d >= 0; d--) { /* advance the outer index */
      q += p->rst[d];
      if (++idx[d] < p->rsz[d]) break;
      q -= p->rst[d] * p->rsz[d];
      idx[d] = 0;
    }
  }
}

const char *kn__torch_dtype_name(kn_dtype dt) {
  static const char *const names[KN_DTYPE_COUNT] = {
      [KN_BOOL] = "Bool",   [KN_UINT8] = "Byte",    [KN_INT8] = "Char",
      [KN_INT16] = "Short", [KN_INT32] = "Int",     [KN_INT64] = "Long",
      [KN_FLOAT16] = "Half", [KN_BFLOAT16] = "BFloat16", [KN_FLOAT32] = "Float",
      [KN_FLOAT64] = "Double"};
  return (unsigned)dt < KN_DTYPE_COUNT ? names[dt] : "?";
}

kn_dtype kn__arg_dtype(const kn__call *c, int i, kn_dtype fallback) {
  return (i < c->nargs && c->args[i].kind == KN__A_DTYPE) ? c->args[i].u.dt : fallback;
}

kn_tensor *kn__reduce_input_as(kn_tensor *t, kn_dtype dt) {
  if (t->dtype == dt) return kn_retain(t);
  return kn__contiguous_copy(t, dt);
}

void kn__lines_init(kn__lines *l, int nt, const kn_tensor *const *ts, int dim) {
  bool mask[KN_MAX_DIMS] = {false};
  if (ts[0]->ndim > 0) mask[dim] = true;
  l->nt = nt;
  for (int k = 0; k < nt; k++) {
    kn__redplan_init(&l->p[k], ts[k], mask);
    l->st[k] = ts[k]->ndim > 0 ? ts[k]->strides[dim] * (int64_t)kn_dtype_size(ts[k]->dtype) : 0;
  }
  l->nlines = l->p[0].nout;
  l->len = l->p[0].nred;
}

void kn__line_load(const char *p, int64_t stride, kn_dtype dt, int64_t n, double *dst) {
  if (dt == KN_FLOAT32 && stride == 4) {
    const float *x = (const float *)p;
    for (int64_t k = 0; k < n; k++) dst[k] = x[k];
  } else if (dt == KN_FLOAT64 && stride == 8) {
    memcpy(dst, p, (size_t)n * sizeof *dst);
  } else {
    for (int64_t k = 0; k < n; k++) dst[k] = kn__load_double(p + k * stride, dt);
  }
}

void kn__line_store(char *p, int64_t stride, kn_dtype dt, int64_t n, const double *src) {
  if (dt == KN_FLOAT32 && stride == 4) {
    float *y = (float *)p;
    for (int64_t k = 0; k < n; k++) y[k] = (float)src[k];
  } else if (dt == KN_FLOAT64 && stride == 8) {
    memcpy(p, src, (size_t)n * sizeof *src);
  } else {
    for (int64_t k = 0; k < n; k++) kn__store_double(p + k * stride, dt, src[k]);
  }
}
