/*
** ops/index_put.c: masked_fill (scalar and 0-dim tensor values, out of place
** and in place), advanced indexing with index tensors over the leading dims
** (index.Tensor, index_put, index_put_; integer indices, negative ones
** wrapped, and bool masks), and slice/select assignment (setitem) as in-place
** ops whose derivative rule plays PyTorch's CopySlices.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "kiln/ops_pointwise.h"
#include "kiln/ops_reduce.h"
#include "kiln/ops_shape.h"
#include "ops/index.h"
#include "ops/iter.h"
#include "ops/shape.h"
#include "ops/symsize.h"

static bool is_mask_dtype(kn_dtype dt) { return dt == KN_BOOL || dt == KN_UINT8; }

static kn_status push_alias(kn__metas *out, const kn_tensor *self) {
  kn_sym sz[KN_MAX_DIMS];
  kn__tensor_symsizes(self, sz);
  kn_status st = kn__push_fresh(out, self->dtype, self->ndim, sz);
  if (st == KN_OK) out->m[out->n - 1].alias_of = 0;
  return st;
}

/* In-place ops keep self's shape: the broadcast shape must equal it. */
static kn_status check_inplace_shape(const kn_tensor *self, int nd, const kn_sym *sz) {
  bool same = nd == self->ndim;
  for (int d = 0; same && d < nd; d++) same = kn__sym_hint(sz[d]) == self->sizes[d];
  if (same) return KN_OK;
  char a[256], b[256];
  kn__format_sizes(self->ndim, self->sizes, a, sizeof a);
  kn__format_symsizes(nd, sz, b, sizeof b);
  return kn__error(KN_ESHAPE, "output with shape %s doesn't match the broadcast shape %s", a, b);
}

/* ---- masked_fill ----------------------------------------------------------------------
** args: self, mask, value (scalar or 0-dim tensor). */

kn_status kn__meta_masked_fill(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *mask = c->args[1].u.t;
  if (!is_mask_dtype(mask->dtype))
    return kn__error(KN_EDTYPE, "masked_fill_ only supports boolean masks, but got mask with "
                     "dtype %s", kn_dtype_name(mask->dtype));
  if (c->args[2].kind == KN__A_TENSOR && c->args[2].u.t->ndim != 0)
    return kn__error(KN_ESHAPE, "masked_fill_ only supports a 0-dimensional value tensor, but "
                     "got tensor with %d dimension(s).", c->args[2].u.t->ndim);
  kn_sym a[KN_MAX_DIMS], b[KN_MAX_DIMS], r[KN_MAX_DIMS];
  int nr;
  kn__tensor_symsizes(self, a);
  kn__tensor_symsizes(mask, b);
  kn_status st = kn__broadcast_shapes(self->ndim, a, mask->ndim, b, &nr, r);
  if (st != KN_OK) return st;
  if (c->op->flags & KN_OPF_INPLACE) {
    st = check_inplace_shape(self, nr, r);
    return st != KN_OK ? st : push_alias(out, self);
  }
  return kn__push_fresh(out, self->dtype, nr, r);
}

kn_status kn__k_masked_fill(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t, *mask = c->args[1].u.t, *o = out->t[0];
  kn_status st = o == self ? KN_OK : kn__copy_into(o, self);
  if (st != KN_OK) return st;
  unsigned char val[8];
  if (c->args[2].kind == KN__A_TENSOR) {
    const kn_tensor *v = c->args[2].u.t;
    if (!kn_data(v)) return kn__error(KN_EINVAL, "masked_fill: value tensor has no data");
    if (kn_dtype_is_floating(o->dtype) || kn_dtype_is_floating(v->dtype))
      kn__store_double(val, o->dtype, kn__load_double(kn_data(v), v->dtype));
    else
      kn__store_int(val, o->dtype, kn__load_int(kn_data(v), v->dtype));
  } else {
    kn_scalar s = c->args[2].u.s;
    if (s.kind == KN_SCALAR_FLOAT) kn__store_double(val, o->dtype, s.v.f);
    else kn__store_int(val, o->dtype, s.kind == KN_SCALAR_INT ? s.v.i : s.v.b);
  }
  size_t es = kn_dtype_size(o->dtype);
  kn__iter it;
  kn__iter_init(&it, o->ndim, o->sizes);
  kn__iter_add(&it, o);
  kn__iter_add_broadcast(&it, mask);
  kn__iter_start(&it);
  char *p[KN__ITER_MAX];
  int64_t n;
  while (kn__iter_next(&it, p, &n))
    for (int64_t i = 0; i < n; i++)
      if (p[1][i * it.inner_stride[1]]) memcpy(p[0] + i * it.inner_stride[0], val, es);
  return KN_OK;
}

kn_status kn__bw_masked_fill(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *g = ctx->grad_outputs[0], *self = kn__call_input(c, 0), *mask = c->args[1].u.t;
  if (ctx->needs_input_grad[0]) {
    kn_tensor *r = kn_masked_fill(g, mask, kn_int(0));
    if (r) r = kn__sum_to_like(r, self);
    if (!r) return kn_last_status();
    ctx->grad_inputs[0] = r;
  }
  if (c->args[2].kind == KN__A_TENSOR && ctx->needs_input_grad[2]) {
    kn_tensor *keep = mask->dtype == KN_BOOL ? mask : kn_to(mask, KN_BOOL);
    kn_tensor *r = keep ? kn_masked_fill(g, kn_logical_not(keep), kn_int(0)) : NULL;
    if (r) r = kn_sum(r);
    if (!r) return kn_last_status();
    ctx->grad_inputs[2] = r;
  }
  return KN_OK;
}

/* ---- advanced indexing ------------------------------------------------------------------
** An index list covers self's leading dims: an integer tensor covers one, a
** bool mask of m dims covers m (its nonzero coordinates). All indices
** broadcast to one shape B; the result of indexing has shape B + the sizes
** of the dims not covered. */

typedef struct adv {
  int ncov;                      /* dims of self covered */
  int bnd;                       /* broadcast index shape B */
  int64_t bsz[KN_MAX_DIMS];
  kn_sym bsym[KN_MAX_DIMS];      /* B over symbolic sizes (the index tensors') */
  int nidx;
  kn_tensor *idx[KN_MAX_DIMS];   /* owned int64 tensors of shape B (NULL on meta) */
} adv;

static void adv_fini(adv *a) {
  for (int i = 0; i < a->nidx; i++) kn_release(a->idx[i]);
  a->nidx = 0;
}

/* The m int64 coordinate tensors ([count]) of mask's nonzero entries. */
static kn_status mask_coords(const kn_tensor *mask, kn_tensor **coords) {
  int m = mask->ndim;
  int64_t n = kn_numel(mask), count = 0, idx[KN_MAX_DIMS] = {0};
  for (int64_t k = 0; k < n; k++) count += kn__index_value(mask, k) != 0;
  for (int j = 0; j < m; j++) {
    coords[j] = kn__empty(1, (int64_t[]){count}, KN_INT64, KN_CPU);
    if (!coords[j]) {
      for (int i = 0; i < j; i++) kn_release(coords[i]);
      return kn_last_status();
    }
  }
  for (int64_t k = 0, w = 0; k < n; k++) {
    if (kn__index_value(mask, k) != 0) {
      for (int j = 0; j < m; j++) ((int64_t *)kn_data(coords[j]))[w] = idx[j];
      w++;
    }
    for (int j = m - 1; j >= 0 && ++idx[j] == mask->sizes[j]; j--) idx[j] = 0;
  }
  return KN_OK;
}

static kn_status adv_build(const kn_tensor *self, kn_tensor *const *list, int n, adv *a) {
  memset(a, 0, sizeof *a);
  kn_tensor *raw[KN_MAX_DIMS]; /* index tensors, one per covered dim (owned if mask) */
  bool owned[KN_MAX_DIMS] = {false};
  kn_status st = KN_OK;
  int nraw = 0;
  for (int i = 0; i < n && st == KN_OK; i++) {
    const kn_tensor *t = list[i];
    int m = is_mask_dtype(t->dtype) ? (t->ndim ? t->ndim : 1) : 1;
    if (nraw + m > self->ndim) {
      st = kn__error(KN_ERANGE, "too many indices for tensor of dimension %d", self->ndim);
      break;
    }
    if (!is_mask_dtype(t->dtype)) {
      if (kn_dtype_is_floating(t->dtype)) {
        st = kn__error(KN_EDTYPE, "tensors used as indices must be long, byte or bool tensors");
        break;
      }
      raw[nraw++] = (kn_tensor *)t;
      continue;
    }
    for (int j = 0; j < t->ndim; j++)
      if (t->sizes[j] != self->sizes[nraw + j]) {
        char ms[256], ss[256];
        kn__format_sizes(t->ndim, t->sizes, ms, sizeof ms);
        kn__format_sizes(self->ndim, self->sizes, ss, sizeof ss);
        st = kn__error(KN_ESHAPE, "The shape of the mask %s at index %d does not match the "
                       "shape of the indexed tensor %s at index %d", ms, j, ss, nraw + j);
        break;
      }
    if (st != KN_OK) break;
    if (!kn_data(t) && kn_numel(t) > 0) {
      st = kn__error(KN_EUNSUPPORTED, "indexing with a bool mask needs its data (the number of "
                     "selected elements is data-dependent), but the mask is a meta tensor");
      break;
    }
    st = mask_coords(t, raw + nraw);
    for (int j = 0; j < m && st == KN_OK; j++) owned[nraw + j] = true;
    if (st == KN_OK) nraw += m;
  }
  /* broadcast */
  kn_sym b[KN_MAX_DIMS], r[KN_MAX_DIMS];
  int bn = 0;
  for (int i = 0; i < nraw && st == KN_OK; i++) {
    kn_sym s[KN_MAX_DIMS];
    kn__tensor_symsizes(raw[i], s);
    int rn;
    if (i == 0) {
      bn = raw[i]->ndim;
      memcpy(b, s, (size_t)bn * sizeof *b);
    } else if (kn__broadcast_shapes(bn, b, raw[i]->ndim, s, &rn, r) != KN_OK) {
      char x[256], y[256];
      kn__format_symsizes(bn, b, x, sizeof x);
      kn__format_sizes(raw[i]->ndim, raw[i]->sizes, y, sizeof y);
      st = kn__error(KN_ESHAPE, "shape mismatch: indexing tensors could not be broadcast "
                     "together with shapes %s, %s", x, y);
    } else {
      bn = rn;
      memcpy(b, r, (size_t)bn * sizeof *b);
    }
  }
  if (st == KN_OK && bn + self->ndim - nraw > KN_MAX_DIMS)
    st = kn__error(KN_EINVAL, "index: result would have more than %d dims", KN_MAX_DIMS);
  if (st == KN_OK) {
    a->ncov = nraw;
    a->bnd = bn;
    for (int d = 0; d < bn; d++) a->bsz[d] = kn__sym_hint(b[d]);
    memcpy(a->bsym, b, (size_t)bn * sizeof *b);
    bool meta = false;
    for (int i = 0; i < nraw; i++) meta = meta || !kn_data(raw[i]);
    for (int i = 0; i < nraw && st == KN_OK && !meta; i++) {
      a->idx[i] = kn__empty(bn, a->bsz, KN_INT64, KN_CPU);
      if (!a->idx[i]) st = kn_last_status();
      else {
        a->nidx = i + 1;
        st = kn__copy_into(a->idx[i], raw[i]);
      }
    }
  }
  for (int i = 0; i < nraw; i++)
    if (owned[i]) kn_release(raw[i]);
  if (st != KN_OK) adv_fini(a);
  return st;
}

/* Result shape of indexing: B + uncovered dims. */
static int adv_shape(const adv *a, const kn_tensor *self, int64_t *sz) {
  int n = 0;
  for (int d = 0; d < a->bnd; d++) sz[n++] = a->bsz[d];
  for (int d = a->ncov; d < self->ndim; d++) sz[n++] = self->sizes[d];
  return n;
}

/* Element offset in self of the block for flat index position k, with bounds
** checks and negative indices wrapped. */
static kn_status adv_offset(const adv *a, const kn_tensor *self, int64_t k, int64_t *off) {
  int64_t o = self->offset;
  for (int j = 0; j < a->ncov; j++) {
    int64_t i = ((const int64_t *)kn_data(a->idx[j]))[k], size = self->sizes[j];
    if (i < -size || i >= size) return kn__out_of_bounds(i, j, size);
    o += (i < 0 ? i + size : i) * self->strides[j];
  }
  *off = o;
  return KN_OK;
}

/* Copy or accumulate a block of nd dims (sizes) between raw strided memory. */
static void move_block(char *dst, const int64_t *dst_st, const char *src, const int64_t *src_st,
                       int nd, const int64_t *sizes, kn_dtype dt, bool acc) {
  size_t es = kn_dtype_size(dt);
  kn__iter it;
  kn__iter_init(&it, nd, sizes);
  kn__iter_add_raw(&it, dst, dst_st, es);
  kn__iter_add_raw(&it, (void *)src, src_st, es);
  kn__iter_start(&it);
  char *p[KN__ITER_MAX];
  int64_t n;
  while (kn__iter_next(&it, p, &n))
    for (int64_t i = 0; i < n; i++) {
      char *d = p[0] + i * it.inner_stride[0];
      const char *s = p[1] + i * it.inner_stride[1];
      if (acc) kn__elem_accumulate(d, s, dt);
      else memcpy(d, s, es);
    }
}

/* ---- index.Tensor(self, indices) ------------------------------------------------------- */

kn_status kn__meta_index(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t;
  adv a;
  kn_status st = adv_build(self, c->args[1].u.ts.v, c->args[1].u.ts.n, &a);
  if (st != KN_OK) return st;
  kn_sym s[KN_MAX_DIMS], ss[KN_MAX_DIMS]; /* B + uncovered dims, symbolic */
  kn__tensor_symsizes(self, ss);
  int n = 0;
  for (int d = 0; d < a.bnd; d++) s[n++] = a.bsym[d];
  for (int d = a.ncov; d < self->ndim; d++) s[n++] = ss[d];
  adv_fini(&a);
  return kn__push_fresh(out, self->dtype, n, s);
}

kn_status kn__k_index(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t, *o = out->t[0];
  adv a;
  kn_status st = adv_build(self, c->args[1].u.ts.v, c->args[1].u.ts.n, &a);
  if (st != KN_OK) return st;
  int rnd = self->ndim - a.ncov;
  const int64_t *rsz = self->sizes + a.ncov, *rst = self->strides + a.ncov;
  int64_t nb = kn__numel(a.bnd, a.bsz), block = kn__numel(rnd, rsz);
  size_t es = kn_dtype_size(self->dtype);
  int64_t ost[KN_MAX_DIMS];
  kn__contiguous_strides(rnd, rsz, ost);
  for (int64_t k = 0; k < nb && st == KN_OK; k++) {
    int64_t off = 0;
    st = adv_offset(&a, self, k, &off);
    if (st == KN_OK)
      move_block((char *)kn_data(o) + k * block * (int64_t)es, ost,
                 (char *)self->storage->data + off * (int64_t)es, rst, rnd, rsz, self->dtype,
                 false);
  }
  adv_fini(&a);
  return st;
}

kn_status kn__bw_index(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *self = kn__call_input(c, 0), *g = ctx->grad_outputs[0];
  kn_tensor *z = kn__zeros_shaped(self, g->dtype);
  kn_tensor *r = kn_index_put(z, c->args[1].u.ts.v, c->args[1].u.ts.n, g, true);
  ctx->grad_inputs[0] = r;
  return r ? KN_OK : kn_last_status();
}

/* ---- index_put(self, indices, values, accumulate) ----------------------------------------- */

kn_status kn__meta_index_put(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *values = c->args[2].u.t;
  if (values->dtype != self->dtype)
    return kn__error(KN_EDTYPE, "Index put requires the source and destination dtypes match, "
                     "got %s for the destination and %s for the source.",
                     kn__legacy_type_name(self->dtype), kn__legacy_type_name(values->dtype));
  adv a;
  kn_status st = adv_build(self, c->args[1].u.ts.v, c->args[1].u.ts.n, &a);
  if (st != KN_OK) return st;
  int64_t sz[KN_MAX_DIMS];
  int n = adv_shape(&a, self, sz);
  adv_fini(&a);
  bool ok = values->ndim <= n;
  for (int d = 0; ok && d < values->ndim; d++) {
    int64_t v = values->sizes[values->ndim - 1 - d], r = sz[n - 1 - d];
    ok = v == 1 || v == r;
  }
  if (!ok) {
    char x[256], y[256];
    kn__format_sizes(values->ndim, values->sizes, x, sizeof x);
    kn__format_sizes(n, sz, y, sizeof y);
    return kn__error(KN_ESHAPE, "shape mismatch: value tensor of shape %s cannot be broadcast to "
                     "indexing result of shape %s", x, y);
  }
  if (c->op->flags & KN_OPF_INPLACE) return push_alias(out, self);
  kn_sym s[KN_MAX_DIMS];
  kn__tensor_symsizes(self, s);
  return kn__push_fresh(out, self->dtype, self->ndim, s);
}

kn_status kn__k_index_put(const kn__call *c, kn__outs *out) {
  kn_tensor *self = c->args[0].u.t, *values = c->args[2].u.t, *o = out->t[0];
  bool acc = c->args[3].u.b;
  kn_status st = o == self ? KN_OK : kn__copy_into(o, self);
  if (st != KN_OK) return st;
  adv a;
  st = adv_build(self, c->args[1].u.ts.v, c->args[1].u.ts.n, &a);
  if (st != KN_OK) return st;
  int64_t sz[KN_MAX_DIMS], vst[KN_MAX_DIMS];
  int n = adv_shape(&a, self, sz), lead = n - values->ndim;
  for (int d = 0; d < n; d++) /* values' strides broadcast to the result shape */
    vst[d] = d < lead || values->sizes[d - lead] == 1 ? 0 : values->strides[d - lead];
  int rnd = self->ndim - a.ncov;
  const int64_t *rsz = self->sizes + a.ncov;
  int64_t nb = kn__numel(a.bnd, a.bsz);
  size_t es = kn_dtype_size(self->dtype);
  for (int64_t k = 0; k < nb && st == KN_OK; k++) {
    int64_t off = 0, voff = values->offset, rem = k;
    st = adv_offset(&a, o, k, &off);
    for (int d = a.bnd - 1; d >= 0; d--) {
      voff += (rem % a.bsz[d]) * vst[d];
      rem /= a.bsz[d];
    }
    if (st == KN_OK)
      move_block((char *)o->storage->data + off * (int64_t)es, o->strides + a.ncov,
                 (char *)values->storage->data + voff * (int64_t)es, vst + a.bnd, rnd, rsz,
                 self->dtype, acc);
  }
  adv_fini(&a);
  return st;
}

kn_status kn__bw_index_put(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *g = ctx->grad_outputs[0];
  kn_tensor *const *idx = c->args[1].u.ts.v;
  int n = c->args[1].u.ts.n;
  if (ctx->needs_input_grad[0]) {
    kn_tensor *r = g;
    if (!c->args[3].u.b) {
      kn_tensor *z = kn_zeros(0, NULL, g->dtype);
      r = z ? kn_index_put(g, idx, n, z, false) : NULL;
    }
    if (!r) return kn_last_status();
    ctx->grad_inputs[0] = r;
  }
  int vk = kn__bw_input_index(c, 2, 0);
  if (ctx->needs_input_grad[vk]) {
    kn_tensor *values = kn__call_input(c, vk);
    kn_tensor *r = kn_index(g, idx, n);
    if (r) r = kn__sum_to_like(r, values);
    if (!r) return kn_last_status();
    ctx->grad_inputs[vk] = r;
  }
  return KN_OK;
}

/* ---- setitem: self[slice] = value, self[index] = value (in place) ---------------------------
** args: self, dim, start, end, step, value  |  self, dim, index, value */

static bool is_select_setitem(const kn__call *c) { return c->op->id == KN_OP_SETITEM_SELECT; }

static kn_status setitem_geom(const kn__call *c, const kn_tensor *t, kn__geom *g) {
  kn__geom_of(t, g);
  if (is_select_setitem(c)) return kn__geom_select(g, c->args[1].u.i, c->args[2].u.i);
  return kn__geom_slice(g, c->args[1].u.i, &c->args[2], &c->args[3], c->args[4].u.i);
}

static const kn_tensor *setitem_value(const kn__call *c) {
  return c->args[is_select_setitem(c) ? 3 : 5].u.t;
}

kn_status kn__meta_setitem(const kn__call *c, kn__metas *out) {
  const kn_tensor *self = c->args[0].u.t, *v = setitem_value(c);
  kn__geom g;
  kn_status st = setitem_geom(c, self, &g);
  if (st != KN_OK) return st;
  /* value must broadcast to the view's shape (expand's rule and message) */
  for (int i = 0; i < v->ndim; i++) {
    int gd = g.nd - v->ndim + i;
    int64_t have = v->sizes[i], want = gd >= 0 ? kn__sym_hint(g.sz[gd]) : 1;
    if (gd >= 0 && have == want) continue;
    if (have == 1 && gd >= 0) continue;
    char a[256], b[256];
    kn__format_symsizes(g.nd, g.sz, a, sizeof a);
    kn__format_sizes(v->ndim, v->sizes, b, sizeof b);
    if (gd < 0)
      return kn__error(KN_ESHAPE, "expand(torch.%sTensor{%s}, size=%s): the number of sizes "
                       "provided (%d) must be greater or equal to the number of dimensions in "
                       "the tensor (%d)", kn__legacy_type_name(v->dtype), b, a, g.nd, v->ndim);
    return kn__error(KN_ESHAPE, "The expanded size of the tensor (%lld) must match the "
                     "existing size (%lld) at non-singleton dimension %d.  Target sizes: %s.  "
                     "Tensor sizes: %s", (long long)want, (long long)have, gd, a, b);
  }
  return push_alias(out, self);
}

kn_status kn__k_setitem(const kn__call *c, kn__outs *out) {
  kn_tensor *o = out->t[0];
  kn__geom g;
  kn_status st = setitem_geom(c, o, &g);
  if (st != KN_OK) return st;
  int64_t sz[KN_MAX_DIMS], sd[KN_MAX_DIMS];
  for (int d = 0; d < g.nd; d++) {
    sz[d] = kn__sym_hint(g.sz[d]);
    sd[d] = kn__sym_hint(g.st[d]);
  }
  st = kn__check_geometry("setitem", g.nd, sz, sd, kn__sym_hint(g.off), o->dtype);
  if (st != KN_OK) return st;
  kn_tensor *v = kn__make_view(o, g.nd, sz, sd, kn__sym_hint(g.off));
  if (!v) return kn_last_status();
  const kn_tensor *src = setitem_value(c);
  /* the value may alias self: copy it out first */
  kn_tensor *tmp = src->storage == o->storage ? kn__contiguous_copy(src, src->dtype) : NULL;
  st = src->storage == o->storage && !tmp ? kn_last_status()
                                          : kn__copy_into(v, tmp ? tmp : src);
  kn_release(tmp);
  kn_release(v);
  return st;
}

/* CopySlices: the grad of self is grad with the written view zeroed; the
** grad of value is that view of grad, summed to value's shape. */
kn_status kn__bw_setitem(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *g = ctx->grad_outputs[0];
  const kn__arg *a = c->args;
  bool sel = is_select_setitem(c);
  kn_sym s = kn__arg_symint(&a[2]), e = sel ? s : kn__arg_symint(&a[3]);
  kn_tensor *part = sel ? kn__select_sym(g, a[1].u.i, s) : kn__slice_sym(g, a[1].u.i, s, e, a[4].u.i);
  if (!part) return kn_last_status();
  if (ctx->needs_input_grad[0]) {
    kn_tensor *z = kn__zeros_shaped(part, g->dtype);
    kn_tensor *r = !z ? NULL
                   : sel ? kn__select_scatter_sym(g, z, a[1].u.i, s)
                         : kn__slice_scatter_sym(g, z, a[1].u.i, s, e, a[4].u.i);
    if (!r) return kn_last_status();
    ctx->grad_inputs[0] = r;
  }
  if (ctx->needs_input_grad[1]) {
    const kn_tensor *v = setitem_value(c);
    kn_tensor *r = kn__sum_to_like(part, v);
    if (!r) return kn_last_status();
    ctx->grad_inputs[1] = r;
  }
  return KN_OK;
}

/* ---- public API ------------------------------------------------------------------------------- */

kn_tensor *kn_masked_fill(kn_tensor *t, kn_tensor *mask, kn_scalar value) {
  return kn__invoke(KN_OP_MASKED_FILL, 3, (kn__arg[]){KN_A_T(t), KN_A_T(mask), KN_A_S(value)});
}

kn_tensor *kn_masked_fill_tensor(kn_tensor *t, kn_tensor *mask, kn_tensor *value) {
  return kn__invoke(KN_OP_MASKED_FILL_T, 3, (kn__arg[]){KN_A_T(t), KN_A_T(mask), KN_A_T(value)});
}

/* Dispatch an in-place op and drop the returned reference to self. */
static kn_status inplace(kn__opid id, int n, const kn__arg *args) {
  kn__call c = {.op = &kn__ops[id], .nargs = n};
  for (int i = 0; i < n; i++) {
    char h[KN__HINT_CAP];
    if (args[i].kind == KN__A_TENSOR && !args[i].u.t)
      return kn__error(KN_EINVAL, "%s: argument %d is a NULL tensor%s", c.op->name, i,
                       kn__error_hint(h, sizeof h));
    c.args[i] = args[i];
  }
  kn__outs out;
  kn__outs_init(&out);
  kn_status st = kn__dispatch(&c, &out);
  kn__outs_fini(&out);
  return st;
}

kn_status kn_masked_fill_(kn_tensor *t, kn_tensor *mask, kn_scalar value) {
  return inplace(KN_OP_MASKED_FILL_, 3, (kn__arg[]){KN_A_T(t), KN_A_T(mask), KN_A_S(value)});
}

kn_status kn_masked_fill_tensor_(kn_tensor *t, kn_tensor *mask, kn_tensor *value) {
  return inplace(KN_OP_MASKED_FILL_T_, 3, (kn__arg[]){KN_A_T(t), KN_A_T(mask), KN_A_T(value)});
}

kn_tensor *kn_index(kn_tensor *t, kn_tensor *const *indices, int n) {
  return kn__invoke(KN_OP_INDEX, 2, (kn__arg[]){KN_A_T(t), KN_A_TS(indices, n)});
}

kn_tensor *kn_index_put(kn_tensor *t, kn_tensor *const *indices, int n, kn_tensor *values,
                        bool accumulate) {
  return kn__invoke(KN_OP_INDEX_PUT, 4, (kn__arg[]){KN_A_T(t), KN_A_TS(indices, n),
                                                    KN_A_T(values), KN_A_B(accumulate)});
}

kn_status kn_index_put_(kn_tensor *t, kn_tensor *const *indices, int n, kn_tensor *values,
                        bool accumulate) {
  return inplace(KN_OP_INDEX_PUT_, 4, (kn__arg[]){KN_A_T(t), KN_A_TS(indices, n),
                                                  KN_A_T(values), KN_A_B(accumulate)});
}

kn_status kn_setitem_slice(kn_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step,
                           kn_tensor *value) {
  return inplace(KN_OP_SETITEM_SLICE, 6,
                 (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_I(start), KN_A_I(end), KN_A_I(step),
                             KN_A_T(value)});
}

kn_status kn_setitem_select(kn_tensor *t, int64_t dim, int64_t index, kn_tensor *value) {
  return inplace(KN_OP_SETITEM_SELECT, 4,
                 (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_I(index), KN_A_T(value)});
}

kn_status kn_setitem_slice_scalar(kn_tensor *t, int64_t dim, int64_t start, int64_t end,
                                  int64_t step, kn_scalar value) {
  if (!t) return kn__error(KN_EINVAL, "setitem: tensor is NULL");
  kn_scope_begin(); /* the temporary value tensor dies here */
  kn_tensor *v = kn_scalar_tensor(value, t->dtype);
  kn_status st = v ? kn_setitem_slice(t, dim, start, end, step, v) : kn_last_status();
  kn_scope_end();
  return st;
}
