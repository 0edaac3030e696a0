/*
** ops/shape_nonzero.c: nonzero(self) -> the int64 [n, ndim] coordinates of
** self's nonzero elements in row-major order (as torch.nonzero). n depends on
** the data, so the meta function reads it (real inputs) and fails for meta
** or fake inputs; the op is flagged KN_OPF_DATA_DEP, and the capture
** frontend turns a call on a traced tensor into a graph break.
*/
#include <stdint.h>

#include "core/error.h"
#include "kiln/ops_shape.h"
#include "ops/opdef.h"

/* Walk self's elements in row-major order; fn gets each element's multi-index
** when it is nonzero. Returns the count. */
typedef void (*visit_fn)(void *ud, const int64_t *idx, int ndim);

static int64_t walk_nonzero(const kn_tensor *t, visit_fn fn, void *ud) {
  int64_t n = 1, count = 0, idx[KN_MAX_DIMS] = {0};
  for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
  size_t es = kn_dtype_size(t->dtype);
  const char *base = (const char *)t->storage->data;
  for (int64_t k = 0; k < n; k++) {
    int64_t off = t->offset;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    if (kn__load_double(base + off * (int64_t)es, t->dtype) != 0) { /* NaN counts */
      if (fn) fn(ud, idx, t->ndim);
      count++;
    }
    for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->sizes[d]; d--) idx[d] = 0;
  }
  return count;
}

kn_status kn__meta_nonzero(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t;
  if (self->device == KN_META || self->is_fake || !self->storage->data)
    return kn__error(KN_EUNSUPPORTED,
                     "nonzero: the output shape depends on the input's data, which a %s "
                     "tensor does not have (dynamic shape operator: kiln.ops.nonzero)",
                     self->is_fake ? "fake" : "meta");
  kn__outmeta *m = kn__metas_push(out, KN_INT64);
  if (!m) return kn__oom();
  m->ndim = 2;
  m->sizes[0] = kn__sym_const(walk_nonzero(self, NULL, NULL));
  m->sizes[1] = kn__sym_const(self->ndim);
  return KN_OK;
}

typedef struct writer {
  int64_t *dst;
} writer;

static void write_row(void *ud, const int64_t *idx, int ndim) {
  writer *w = ud;
  for (int d = 0; d < ndim; d++) *w->dst++ = idx[d];
}

kn_status kn__k_nonzero(const kn__call *c, kn__outs *out) {
  const kn_tensor *self = c->args[0].u.t;
  kn_tensor *r = out->t[0];
  writer w = {(int64_t *)r->storage->data + r->offset};
  int64_t n = walk_nonzero(self, write_row, &w);
  if (n != r->sizes[0])
    return kn__error(KN_EINTERNAL, "nonzero: the input changed while it was read");
  return KN_OK;
}

kn_tensor *kn_nonzero(kn_tensor *t) {
  return kn__invoke(KN_OP_NONZERO, 1, (kn__arg[]){KN_A_T(t)});
}
