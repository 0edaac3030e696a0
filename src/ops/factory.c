/*
** ops/factory.c: factory ops (no tensor inputs): empty, full.
** Arguments: size (ints), [fill value (scalar)], dtype (or none).
*/
#include <string.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "ops/opdef.h"

static kn_dtype factory_dtype(const kn__call *c) {
  const kn__arg *last = &c->args[c->nargs - 1];
  if (last->kind == KN__A_DTYPE) return last->u.dt;
  if (c->nargs >= 2 && c->args[1].kind == KN__A_SCALAR) { /* full infers it */
    kn_scalar_kind k = c->args[1].u.s.kind;
    return k == KN_SCALAR_FLOAT ? kn_default_dtype() : k == KN_SCALAR_INT ? KN_INT64 : KN_BOOL;
  }
  return kn_default_dtype();
}

kn_status kn__meta_factory(const kn__call *c, kn__metas *out) {
  const kn__arg *sz = &c->args[0];
  if (sz->kind != KN__A_INTS)
    return kn__error(KN_EINVAL, "%s: expected a size list", c->op->name);
  if (sz->u.ints.n > KN_MAX_DIMS || sz->u.ints.n < 0)
    return kn__error(KN_EINVAL, "%s: expected 0 to %d dims, got %d", c->op->name, KN_MAX_DIMS,
                     sz->u.ints.n);
  if (sz->u.ints.n > 0 && !sz->u.ints.v)
    return kn__error(KN_EINVAL, "%s: the size list is NULL (%d dims)", c->op->name,
                     sz->u.ints.n);
  kn_dtype dt = factory_dtype(c);
  if ((unsigned)dt >= KN_DTYPE_COUNT)
    return kn__error(KN_EDTYPE, "%s: invalid dtype %d", c->op->name, (int)dt);
  for (int d = 0; d < sz->u.ints.n; d++)
    if (sz->u.ints.v[d] < 0)
      return kn__error(KN_EINVAL, "Trying to create tensor with negative dimension %lld: %s",
                       (long long)sz->u.ints.v[d], "sizes must be non-negative");
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  m->ndim = sz->u.ints.n;
  for (int d = 0; d < m->ndim; d++) m->sizes[d] = kn__arg_symint_at(sz, d);
  return KN_OK;
}

kn_status kn__k_empty(const kn__call *c, kn__outs *out) {
  (void)c;
  (void)out;
  return KN_OK;
}

/* Fill a contiguous tensor with one value, converted once to its dtype. */
static void fill_contiguous(kn_tensor *t, kn_scalar v) {
  size_t es = kn_dtype_size(t->dtype);
  int64_t n = kn_numel(t);
  unsigned char one[8];
  if (v.kind == KN_SCALAR_FLOAT) kn__store_double(one, t->dtype, v.v.f);
  else kn__store_int(one, t->dtype, v.kind == KN_SCALAR_INT ? v.v.i : v.v.b);
  unsigned char *p = kn_data(t);
  bool zero = true;
  for (size_t i = 0; i < es; i++) zero = zero && one[i] == 0;
  if (zero) {
    memset(p, 0, (size_t)n * es);
    return;
  }
  switch (es) {
  case 1: memset(p, one[0], (size_t)n); break;
  case 2: { uint16_t x; memcpy(&x, one, 2); for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i] = x; } break;
  case 4: { uint32_t x; memcpy(&x, one, 4); for (int64_t i = 0; i < n; i++) ((uint32_t *)p)[i] = x; } break;
  default: { uint64_t x; memcpy(&x, one, 8); for (int64_t i = 0; i < n; i++) ((uint64_t *)p)[i] = x; } break;
  }
}

kn_status kn__k_full(const kn__call *c, kn__outs *out) {
  fill_contiguous(out->t[0], c->args[1].u.s);
  return KN_OK;
}

/* ---- public API ------------------------------------------------------------------- */

kn_tensor *kn_empty(int ndim, const int64_t *sizes, kn_dtype dtype) {
  return kn__invoke(KN_OP_EMPTY, 2, (kn__arg[]){KN_A_INTS(sizes, ndim), KN_A_DT(dtype)});
}

kn_tensor *kn_full(int ndim, const int64_t *sizes, kn_scalar value, kn_dtype dtype) {
  return kn__invoke(KN_OP_FULL, 3,
                    (kn__arg[]){KN_A_INTS(sizes, ndim), KN_A_S(value), KN_A_DT(dtype)});
}

/* A fill by another name: errors name the function the user called. */
static kn_tensor *filled(const char *api, int ndim, const int64_t *sizes, int64_t v,
                         kn_dtype dtype) {
  kn_tensor *t = kn_full(ndim, sizes, kn_int(v), dtype);
  if (!t) kn__error_context("%s", api);
  return t;
}

kn_tensor *kn_zeros(int ndim, const int64_t *sizes, kn_dtype dtype) {
  return filled("kn_zeros", ndim, sizes, 0, dtype);
}

kn_tensor *kn_ones(int ndim, const int64_t *sizes, kn_dtype dtype) {
  return filled("kn_ones", ndim, sizes, 1, dtype);
}

kn_tensor *kn_empty_meta(int ndim, const int64_t *sizes, kn_dtype dtype) {
  if (ndim < 0 || ndim > KN_MAX_DIMS || (ndim > 0 && !sizes)) {
    kn__error(KN_EINVAL, "empty_meta: expected a size list of 0 to %d dims, got %d dims at %s",
              KN_MAX_DIMS, ndim, sizes ? "an array" : "NULL");
    return NULL;
  }
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0) {
      kn__error(KN_EINVAL, "Trying to create tensor with negative dimension %lld",
                (long long)sizes[d]);
      return NULL;
    }
  return kn__autorelease(kn__empty(ndim, sizes, dtype, KN_META));
}

/* kn_from_array for the public call `api` (named if the tensor has no data). */
static kn_tensor *from_array(const void *data, int ndim, const int64_t *sizes, kn_dtype dtype,
                             const char *api) {
  if (!data) {
    kn__error(KN_EINVAL, "%s: data is NULL", api);
    return NULL;
  }
  kn_tensor *t = kn_empty(ndim, sizes, dtype);
  if (!t) return NULL;
  const char *prev = kn__data_api_begin(api);
  void *p = kn_numel(t) > 0 ? kn_data(t) : NULL;
  kn__data_api_end(prev);
  if (!p && kn_numel(t) > 0) return NULL; /* under a tracing mode: no data (error set);
                                             t stays owned by the scope if one is open */
  if (p) memcpy(p, data, (size_t)kn_numel(t) * kn_dtype_size(dtype));
  return t;
}

kn_tensor *kn_from_array(const void *data, int ndim, const int64_t *sizes, kn_dtype dtype) {
  return from_array(data, ndim, sizes, dtype, "kn_from_array");
}
kn_tensor *kn_from_floats(const float *data, int ndim, const int64_t *sizes) {
  return from_array(data, ndim, sizes, KN_FLOAT32, "kn_from_floats");
}
kn_tensor *kn_from_doubles(const double *data, int ndim, const int64_t *sizes) {
  return from_array(data, ndim, sizes, KN_FLOAT64, "kn_from_doubles");
}
kn_tensor *kn_from_ints(const int64_t *data, int ndim, const int64_t *sizes) {
  return from_array(data, ndim, sizes, KN_INT64, "kn_from_ints");
}
kn_tensor *kn_scalar_tensor(kn_scalar value, kn_dtype dtype) {
  return kn_full(0, NULL, value, dtype);
}
