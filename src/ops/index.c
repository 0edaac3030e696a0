/*
** ops/index.c: indexing along one dimension: index_select, index_add,
** gather, scatter (src and value overloads) and scatter_add, with PyTorch's
** checks and messages. Kernels walk the index with a multi-index counter and
** move elements by byte copies (same dtype) or accumulate in double/int64.
*/
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "kiln/ops_shape.h"
#include "ops/index.h"
#include "ops/iter.h"
#include "ops/shape.h"
#include "ops/symsize.h"

/* ---- element helpers (shared with ops/index_put.c) -------------------------------- */

void kn__elem_accumulate(char *dst, const char *src, kn_dtype dt) {
  if (kn_dtype_is_floating(dt))
    kn__store_double(dst, dt, kn__load_double(dst, dt) + kn__load_double(src, dt));
  else if (dt == KN_BOOL)
    *dst = (char)(*dst || *src);
  else
    kn__store_int(dst, dt, kn__load_int(dst, dt) + kn__load_int(src, dt));
}

int64_t kn__index_value(const kn_tensor *idx, int64_t flat) {
  /* idx is contiguous or not: walk its sizes */
  int64_t off = idx->offset;
  for (int d = idx->ndim - 1; d >= 0; d--) {
    off += (flat % idx->sizes[d]) * idx->strides[d];
    flat /= idx->sizes[d];
  }
  return kn__load_int((char *)idx->storage->data + off * (int64_t)kn_dtype_size(idx->dtype),
                      idx->dtype);
}

kn_status kn__out_of_bounds(int64_t i, int dim, int64_t size) {
  return kn__error(KN_ERANGE, "index %lld is out of bounds for dimension %d with size %lld",
                   (long long)i, dim, (long long)size);
}

static bool is_index_dtype(kn_dtype dt) { return dt == KN_INT64 || dt == KN_INT32; }

/* ---- index_select / index_add ---------------------------------------------------------- */

static kn_status check_vector_index(const char *op, const kn_tensor *index) {
  if (index->ndim > 1)
    return kn__error(KN_ESHAPE, "%s(): Index is supposed to be a vector", op);
  if (!is_index_dtype(index->dtype))
    return kn__error(KN_EDTYPE, "%s(): Expected dtype int32 or int64 for index", op);
  return KN_OK;
}

/* index_select(self, dim, index) */
kn_status kn__meta_index_select(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t;
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st == KN_OK) st = check_vector_index("index_select", index);
  if (st != KN_OK) return st;
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(self, sz);
  if (self->ndim > 0) {
    kn_sym isz[KN_MAX_DIMS];
    kn__tensor_symsizes(index, isz);
    sz[d] = kn__sym_numel(index->ndim, isz);
  }
  return kn__push_fresh(out, self->dtype, self->ndim, sz);
}

/* View of t with dim d fixed at i (a row); t may be 0-dim (then t itself). */
static kn_tensor *row(kn_tensor *t, int d, int64_t i) {
  if (t->ndim == 0) return kn__make_view(t, 0, NULL, NULL, t->offset);
  int64_t sz[KN_MAX_DIMS], st[KN_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < t->ndim; k++)
    if (k != d) {
      sz[n] = t->sizes[k];
      st[n++] = t->strides[k];
    }
  return kn__make_view(t, n, sz, st, t->offset + i * t->strides[d]);
}

static kn_status check_select_index(const kn_tensor *index, int64_t size, int64_t *out,
                                    int64_t k) {
  int64_t i = kn__index_value(index, k);
  if (i < 0 || i >= size)
    return kn__error(KN_ERANGE, "INDICES element is out of DATA bounds, id=%lld axis_dim=%lld",
                     (long long)i, (long long)size);
  *out = i;
  return KN_OK;
}

kn_status kn__k_index_select(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t, *o = out->t[0];
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st == KN_OK && kn__index_select_fast_ok(self, o))
    return kn__index_select_fast(self, d, index, o);
  int64_t size = self->ndim ? self->sizes[d] : 1;
  for (int64_t k = 0; st == KN_OK && k < kn_numel(index); k++) {
    int64_t i = 0;
    st = check_select_index(index, size, &i, k);
    if (st != KN_OK) break;
    kn_tensor *src = row(self, d, i), *dst = row(o, d, k);
    st = src && dst ? kn__copy_into(dst, src) : kn__oom();
    kn_release(src);
    kn_release(dst);
  }
  return st;
}

kn_status kn__bw_index_select(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *self = kn__call_input(c, 0);
  kn_tensor *z = kn__zeros_shaped(self, ctx->grad_outputs[0]->dtype);
  kn_tensor *g = kn_index_add(z, c->args[1].u.i, c->args[2].u.t, ctx->grad_outputs[0]);
  ctx->grad_inputs[0] = g;
  return g ? KN_OK : kn_last_status();
}

/* index_add(self, dim, index, source): self with source rows added at index. */
kn_status kn__meta_index_add(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t, *src = c->args[3].u.t;
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st == KN_OK) st = check_vector_index("index_add", index);
  if (st != KN_OK) return st;
  bool ok = src->ndim == self->ndim || (self->ndim <= 1 && src->ndim <= 1);
  for (int k = 0; ok && k < self->ndim && src->ndim == self->ndim; k++)
    ok = k == d ? src->sizes[k] == kn_numel(index) : src->sizes[k] == self->sizes[k];
  if (ok && self->ndim == 0) ok = kn_numel(src) == kn_numel(index);
  if (!ok) {
    char a[256], b[256];
    kn__format_sizes(self->ndim, self->sizes, a, sizeof a);
    kn__format_sizes(src->ndim, src->sizes, b, sizeof b);
    return kn__error(KN_ESHAPE, "index_add_(): source %s does not match self %s with %lld "
                     "indices along dimension %d", b, a, (long long)kn_numel(index), d);
  }
  if (src->dtype != self->dtype)
    return kn__error(KN_EDTYPE, "index_add_(): self (%s) and source (%s) must have the same "
                     "scalar type", kn_dtype_name(self->dtype), kn_dtype_name(src->dtype));
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(self, sz);
  return kn__push_fresh(out, self->dtype, self->ndim, sz);
}

/* dst[...] += src[...] over equal shapes. */
static void add_into(kn_tensor *dst, const kn_tensor *src) {
  kn__iter it;
  kn__iter_init(&it, dst->ndim, dst->sizes);
  kn__iter_add(&it, dst);
  kn__iter_add(&it, src);
  kn__iter_start(&it);
  char *p[KN__ITER_MAX];
  int64_t n;
  while (kn__iter_next(&it, p, &n))
    for (int64_t i = 0; i < n; i++)
      kn__elem_accumulate(p[0] + i * it.inner_stride[0], p[1] + i * it.inner_stride[1],
                          dst->dtype);
}

kn_status kn__k_index_add(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t, *src = c->args[3].u.t;
  kn_tensor *o = out->t[0];
  kn_status st = kn__copy_into(o, self);
  int d = 0;
  if (st == KN_OK) st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  int64_t size = self->ndim ? self->sizes[d] : 1;
  for (int64_t k = 0; st == KN_OK && k < kn_numel(index); k++) {
    int64_t i = kn__index_value(index, k);
    if (i < -size || i >= size) {
      st = kn__error(KN_ERANGE, "index_add_(): index %lld out of range for self of size %lld "
                     "at dimension %d", (long long)i, (long long)size, d);
      break;
    }
    if (i < 0) i += size;
    kn_tensor *dst = row(o, d, i), *s = src->ndim ? row(src, d, k) : row(src, 0, 0);
    if (dst && s) add_into(dst, s);
    else st = kn__oom();
    kn_release(dst);
    kn_release(s);
  }
  return st;
}

kn_status kn__bw_index_add(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *g = ctx->grad_outputs[0];
  if (ctx->needs_input_grad[0]) ctx->grad_inputs[0] = g;
  if (ctx->needs_input_grad[2]) {
    kn_tensor *src = kn__call_input(c, 2);
    kn_tensor *r = kn_index_select(g, c->args[1].u.i, c->args[2].u.t);
    if (r && src->ndim != r->ndim) r = kn__reshape_like(r, src);
    if (!r) return kn_last_status();
    ctx->grad_inputs[2] = r;
  }
  return KN_OK;
}

/* ---- gather / scatter ------------------------------------------------------------------- */

/* gather's and scatter's shape rules; src may be NULL (value overload). */
static kn_status check_gather_scatter(const char *op, const kn_tensor *self, int d,
                                      const kn_tensor *index, const kn_tensor *src) {
  bool gather = !strcmp(op, "gather");
  if (index->dtype != KN_INT64)
    return kn__error(KN_EDTYPE, "%s(): Expected dtype int64 for index", op);
  int snd = self->ndim ? self->ndim : 1, ind = index->ndim ? index->ndim : 1;
  if (kn_numel(index) != 0 && ind != snd)
    return kn__error(KN_ESHAPE, "Index tensor must have the same number of dimensions as %s "
                     "tensor", src ? "src" : "input");
  if (kn_numel(index) == 0) return KN_OK;
  char a[256], b[256], s[256];
  kn__format_sizes(index->ndim, index->sizes, a, sizeof a);
  kn__format_sizes(self->ndim, self->sizes, b, sizeof b);
  for (int k = 0; k < index->ndim; k++) {
    if (k != d && index->sizes[k] > self->sizes[k]) {
      if (gather)
        return kn__error(KN_ESHAPE, "Size does not match at dimension %d expected index %s to "
                         "be smaller than self %s apart from dimension %d", k, a, b, d);
      if (!src)
        return kn__error(KN_ESHAPE, "Expected index %s to be smaller than self %s apart from "
                         "dimension %d", a, b, d);
      kn__format_sizes(src->ndim, src->sizes, s, sizeof s);
      return kn__error(KN_ESHAPE, "Expected index %s to be smaller than self %s apart from "
                       "dimension %d and to be smaller size than src %s", a, b, d, s);
    }
    if (src && src->ndim == index->ndim && index->sizes[k] > src->sizes[k]) {
      kn__format_sizes(src->ndim, src->sizes, s, sizeof s);
      return kn__error(KN_ESHAPE, "Expected index %s to be smaller than self %s apart from "
                       "dimension %d and to be smaller size than src %s", a, b, d, s);
    }
  }
  return KN_OK;
}

/* gather(self, dim, index) */
kn_status kn__meta_gather(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t;
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st == KN_OK) st = check_gather_scatter("gather", self, d, index, NULL);
  if (st != KN_OK) return st;
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(index, sz);
  return kn__push_fresh(out, self->dtype, index->ndim, sz);
}

/* Walk the index: for each position, the element offsets (in elements) of
** the index position in `a` (same multi-index) and of the indexed element in
** `b` (multi-index with dim d replaced by the index value). */
typedef kn_status (*visit_fn)(void *ud, int64_t a_off, int64_t b_off);

static kn_status walk(const kn_tensor *index, int d, const kn_tensor *a, const kn_tensor *b,
                      visit_fn f, void *ud) {
  int nd = index->ndim;
  int64_t n = kn_numel(index), idx[KN_MAX_DIMS] = {0};
  int64_t size = b->ndim ? b->sizes[d] : 1;
  const char *ip = index->storage->data;
  for (int64_t k = 0; k < n; k++) {
    int64_t ioff = index->offset, aoff = a->offset, boff = b->offset;
    for (int j = 0; j < nd; j++) {
      ioff += idx[j] * index->strides[j];
      aoff += idx[j] * a->strides[j];
      if (j != d) boff += idx[j] * b->strides[j];
    }
    int64_t i = kn__load_int(ip + ioff * 8, KN_INT64);
    if (i < 0 || i >= size) return kn__out_of_bounds(i, d, size);
    if (b->ndim) boff += i * b->strides[d];
    kn_status st = f(ud, aoff, boff);
    if (st != KN_OK) return st;
    for (int j = nd - 1; j >= 0 && ++idx[j] == index->sizes[j]; j--) idx[j] = 0;
  }
  return KN_OK;
}

typedef struct move {
  char *dst, *src;
  size_t es;
  kn_dtype dt;
  bool src_is_a, acc;   /* gather: dst = out (a), src = self (b) */
  const char *value;    /* scatter.value: the converted scalar */
} move;

static kn_status do_move(void *ud, int64_t a_off, int64_t b_off) {
  move *m = ud;
  int64_t d_off = m->src_is_a ? b_off : a_off, s_off = m->src_is_a ? a_off : b_off;
  char *dst = m->dst + d_off * (int64_t)m->es;
  const char *src = m->value ? m->value : m->src + s_off * (int64_t)m->es;
  if (m->acc) kn__elem_accumulate(dst, src, m->dt);
  else memcpy(dst, src, m->es);
  return KN_OK;
}

kn_status kn__k_gather(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t, *o = out->t[0];
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st != KN_OK) return st;
  if (kn__gather_fast_ok(self, d, index, o)) return kn__gather_fast(self, d, index, o);
  move m = {o->storage->data, self->storage->data, kn_dtype_size(self->dtype), self->dtype,
            false, false, NULL};
  return walk(index, d, o, self, do_move, &m);
}

kn_status kn__bw_gather(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *self = kn__call_input(c, 0), *g = ctx->grad_outputs[0];
  kn_tensor *z = kn__zeros_shaped(self, g->dtype);
  kn_tensor *r = kn_scatter_add(z, c->args[1].u.i, c->args[2].u.t, g);
  ctx->grad_inputs[0] = r;
  return r ? KN_OK : kn_last_status();
}

/* scatter.src / scatter.value / scatter_add: (self, dim, index, src | value) */
kn_status kn__meta_scatter(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t;
  const kn_tensor *src = c->args[3].kind == KN__A_TENSOR ? c->args[3].u.t : NULL;
  const char *name = c->op->id == KN_OP_SCATTER_ADD ? "scatter_add" : "scatter";
  int d;
  kn_status st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st == KN_OK && src && src->dtype != self->dtype)
    return kn__error(KN_EDTYPE, "%s(): Expected self.dtype to be equal to src.dtype", name);
  if (st == KN_OK) st = check_gather_scatter(name, self, d, index, src);
  if (st != KN_OK) return st;
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(self, sz);
  return kn__push_fresh(out, self->dtype, self->ndim, sz);
}

kn_status kn__k_scatter(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t, *index = c->args[2].u.t, *o = out->t[0];
  kn_status st = kn__copy_into(o, self);
  int d = 0;
  if (st == KN_OK) st = kn__wrap_dim(c->args[1].u.i, self->ndim, &d);
  if (st != KN_OK) return st;
  unsigned char val[8];
  move m = {o->storage->data, NULL, kn_dtype_size(o->dtype), o->dtype, true,
            c->op->id == KN_OP_SCATTER_ADD, NULL};
  if (c->args[3].kind == KN__A_TENSOR) {
    kn_tensor *src = c->args[3].u.t;
    if (kn__scatter_fast_ok(o, d, index, src)) return kn__scatter_fast(o, d, index, src, NULL, m.acc);
    m.src = src->storage->data;
    return walk(index, d, src, o, do_move, &m);
  }
  kn_scalar s = c->args[3].u.s;
  if (s.kind == KN_SCALAR_FLOAT) kn__store_double(val, o->dtype, s.v.f);
  else kn__store_int(val, o->dtype, s.kind == KN_SCALAR_INT ? s.v.i : s.v.b);
  if (kn__scatter_fast_ok(o, d, index, NULL))
    return kn__scatter_fast(o, d, index, NULL, (const char *)val, m.acc);
  m.value = (const char *)val;
  return walk(index, d, index, o, do_move, &m);
}

kn_status kn__bw_scatter(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *g = ctx->grad_outputs[0];
  int64_t dim = c->args[1].u.i;
  kn_tensor *index = c->args[2].u.t;
  bool add = c->op->id == KN_OP_SCATTER_ADD;
  if (ctx->needs_input_grad[0]) {
    kn_tensor *r = add ? g : kn_scatter_value(g, dim, index, kn_int(0));
    if (!r) return kn_last_status();
    ctx->grad_inputs[0] = r;
  }
  if (c->args[3].kind == KN__A_TENSOR && ctx->needs_input_grad[2]) {
    kn_tensor *r = kn_gather(g, dim, index);
    if (!r) return kn_last_status();
    ctx->grad_inputs[2] = r;
  }
  return KN_OK;
}

/* ---- public API ------------------------------------------------------------------------------ */

kn_tensor *kn_index_select(kn_tensor *t, int64_t dim, kn_tensor *index) {
  return kn__invoke(KN_OP_INDEX_SELECT, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_T(index)});
}

kn_tensor *kn_index_add(kn_tensor *t, int64_t dim, kn_tensor *index, kn_tensor *source) {
  return kn__invoke(KN_OP_INDEX_ADD, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_T(index), KN_A_T(source)});
}

kn_tensor *kn_gather(kn_tensor *t, int64_t dim, kn_tensor *index) {
  return kn__invoke(KN_OP_GATHER, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_T(index)});
}

kn_tensor *kn_scatter(kn_tensor *t, int64_t dim, kn_tensor *index, kn_tensor *src) {
  return kn__invoke(KN_OP_SCATTER_SRC, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_T(index), KN_A_T(src)});
}

kn_tensor *kn_scatter_value(kn_tensor *t, int64_t dim, kn_tensor *index, kn_scalar value) {
  return kn__invoke(KN_OP_SCATTER_VALUE, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_T(index), KN_A_S(value)});
}

kn_tensor *kn_scatter_add(kn_tensor *t, int64_t dim, kn_tensor *index, kn_tensor *src) {
  return kn__invoke(KN_OP_SCATTER_ADD, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_T(index), KN_A_T(src)});
}
