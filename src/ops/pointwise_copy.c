/*
** ops/pointwise_copy.c: where, copies and casts (copy_, clone, _to_copy and
** the composites contiguous and to.dtype), fills (fill_, zero_).
** Kernels move bytes with kn__iter; dtype conversion goes through
** kn__copy_into (float16/bfloat16 round on store).
*/
#include <string.h>

#include "core/error.h"
#include "ops/iter.h"
#include "ops/pointwise.h"

/* ---- where --------------------------------------------------------------------- */

kn_status kn__meta_where(const kn__call *c, kn__metas *out) {
  const kn_tensor *cond = c->args[0].u.t;
  if (cond->dtype != KN_BOOL)
    return kn__error(KN_EDTYPE, "where expected condition to be a boolean tensor, but got a "
                                "tensor with dtype %s", kn__pw_torch_name(cond->dtype));
  int nd = 0;
  kn_sym shape[KN_MAX_DIMS], ts[KN_MAX_DIMS];
  for (int i = 0; i < 3; i++) {
    const kn_tensor *t = c->args[i].u.t;
    kn__tensor_symsizes(t, ts);
    kn_status st = kn__broadcast_shapes(nd, shape, t->ndim, ts, &nd, shape);
    if (st != KN_OK) return st;
  }
  kn__call sub = {.op = c->op, .nargs = 2, .args = {c->args[1], c->args[2]}};
  kn__outmeta *m = kn__metas_push(out, kn__result_type(&sub, 2));
  if (!m) return kn__oom();
  m->ndim = nd;
  for (int d = 0; d < nd; d++) m->sizes[d] = shape[d];
  return KN_OK;
}

#define SELECT_ROW(T)                                                           \
  for (int64_t i = 0; i < n; i++) {                                            \
    bool k = *(const bool *)(p[1] + i * s[1]);                                 \
    *(T *)(p[0] + i * s[0]) = *(const T *)(k ? p[2] + i * s[2] : p[3] + i * s[3]); \
  }

static void select_fn(char **p, const int64_t *s, int64_t n, const void *ctx) {
  switch (*(const size_t *)ctx) {
  case 1: SELECT_ROW(uint8_t) break;
  case 2: SELECT_ROW(uint16_t) break;
  case 4: SELECT_ROW(uint32_t) break;
  default: SELECT_ROW(uint64_t) break;
  }
}

kn_status kn__k_where(const kn__call *c, kn__outs *out) {
  kn_tensor *o = out->t[0], *conv[2] = {NULL, NULL};
  kn__iter it;
  kn__iter_init(&it, o->ndim, o->sizes);
  kn__iter_add(&it, o);
  kn__iter_add_broadcast(&it, c->args[0].u.t);
  for (int k = 0; k < 2; k++) {
    const kn_tensor *t = c->args[1 + k].u.t;
    if (t->dtype != o->dtype) {
      t = conv[k] = kn__contiguous_copy(t, o->dtype);
      if (!t) {
        kn_release(conv[0]);
        return kn_last_status();
      }
    }
    kn__iter_add_broadcast(&it, t);
  }
  size_t es = kn_dtype_size(o->dtype);
  if (kn_numel(o) > 0) kn__iter_run(&it, select_fn, &es, KN__PAR_GRAIN_MEM);
  kn_release(conv[0]);
  kn_release(conv[1]);
  return KN_OK;
}

/* ---- copy_, clone, _to_copy ----------------------------------------------------------- */

kn_status kn__meta_copy_(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *src = c->args[1].u.t;
  kn_sym a[KN_MAX_DIMS], b[KN_MAX_DIMS], r[KN_MAX_DIMS];
  int nd;
  kn__tensor_symsizes(self, a);
  kn__tensor_symsizes(src, b);
  kn_status st = kn__broadcast_shapes(self->ndim, a, src->ndim, b, &nd, r);
  if (st == KN_OK) st = kn__pw_check_inplace(self, self->dtype, nd, r);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, self->dtype);
  if (!m) return kn__oom();
  m->ndim = self->ndim;
  for (int d = 0; d < self->ndim; d++) m->sizes[d] = a[d];
  m->alias_of = 0;
  return KN_OK;
}

kn_status kn__k_copy_(const kn__call *c, kn__outs *out) {
  (void)out;
  kn_tensor *self = c->args[0].u.t;
  const kn_tensor *src = c->args[1].u.t;
  if (self == src) return KN_OK;
  if (kn_same_storage(self, src)) { /* may overlap: go through a temporary */
    kn_tensor *tmp = kn__contiguous_copy(src, src->dtype);
    if (!tmp) return kn_last_status();
    kn_status st = kn__copy_into(self, tmp);
    kn_release(tmp);
    return st;
  }
  return kn__copy_into(self, src);
}

/* clone(self) and _to_copy(self, dtype): a fresh contiguous copy. */
kn_status kn__meta_clone(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t;
  kn_dtype dt = c->nargs > 1 && c->args[1].kind == KN__A_DTYPE ? c->args[1].u.dt : self->dtype;
  if ((unsigned)dt >= KN_DTYPE_COUNT)
    return kn__error(KN_EDTYPE, "%s: invalid dtype %d", c->op->name, (int)dt);
  kn__outmeta *m = kn__metas_push_like(out, self, dt);
  if (!m) return kn__oom();
  return KN_OK;
}

kn_status kn__k_clone(const kn__call *c, kn__outs *out) {
  return kn__copy_into(out->t[0], c->args[0].u.t);
}

/* Run op `id` below the public API: the outputs are appended to out as
** owned references (composite kernels). */
static kn_status subcall(kn__opid id, int nargs, const kn__arg *args, kn__outs *out) {
  kn__call sub = {.op = &kn__ops[id], .nargs = nargs};
  memcpy(sub.args, args, (size_t)nargs * sizeof *args);
  kn__outs r;
  kn__outs_init(&r);
  kn_status st = kn__dispatch(&sub, &r);
  for (int i = 0; st == KN_OK && i < r.n; i++) {
    kn_tensor *t = r.t[i];
    r.t[i] = NULL;
    if (!kn__outs_push(out, t)) st = kn__oom();
  }
  kn__outs_fini(&r);
  return st;
}

kn_status kn__k_contiguous(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t;
  if (kn_is_contiguous(self))
    return kn__outs_push(out, kn_retain(self)) ? KN_OK : kn__oom();
  return subcall(KN_OP_CLONE, 1, (kn__arg[]){KN_A_T(self)}, out);
}

kn_status kn__k_to_dtype(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t;
  if (self->dtype == c->args[1].u.dt)
    return kn__outs_push(out, kn_retain(self)) ? KN_OK : kn__oom();
  return subcall(KN_OP_TO_COPY, 2, (kn__arg[]){KN_A_T(self), c->args[1]}, out);
}

/* ---- fill_, zero_ --------------------------------------------------------------------------- */

kn_status kn__meta_fill_(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t;
  kn__outmeta *m = kn__metas_push_like(out, self, self->dtype);
  if (!m) return kn__oom();
  m->alias_of = 0;
  return KN_OK;
}

#define FILL_ROW(T)                                                             \
  {                                                                            \
    T v;                                                                       \
    memcpy(&v, ctx, sizeof v);                                                 \
    for (int64_t i = 0; i < n; i++) *(T *)(p[0] + i * s[0]) = v;               \
  }

static void fill_fn(char **p, const int64_t *s, int64_t n, const void *ctx) {
  const unsigned char *b = ctx;
  switch (b[8]) {
  case 1: FILL_ROW(uint8_t) break;
  case 2: FILL_ROW(uint16_t) break;
  case 4: FILL_ROW(uint32_t) break;
  default: FILL_ROW(uint64_t) break;
  }
}

kn_status kn__k_fill_(const kn__call *c, kn__outs *out) {
  (void)out;
  kn_tensor *self = c->args[0].u.t;
  kn_scalar v = c->nargs > 1 ? c->args[1].u.s : kn_int(0);
  unsigned char val[9] = {0}; /* the value in self's dtype, then its size */
  if (v.kind == KN_SCALAR_FLOAT) kn__store_double(val, self->dtype, v.v.f);
  else kn__store_int(val, self->dtype, kn__pw_scalar_int(v));
  val[8] = (unsigned char)kn_dtype_size(self->dtype);
  if (kn_numel(self) == 0) return KN_OK;
  kn__iter it;
  kn__iter_init(&it, self->ndim, self->sizes);
  kn__iter_add(&it, self);
  kn__iter_run(&it, fill_fn, val, KN__PAR_GRAIN_MEM);
  return KN_OK;
}
