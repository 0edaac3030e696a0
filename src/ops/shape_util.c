/*
** ops/shape_util.c: geometry helpers of the shape family: reading a tensor's
** symbolic geometry, pushing view and fresh outputs, size inference for
** view/reshape (-1), PyTorch's computeStride rule, and slice clamping.
*/
#include <stdio.h>

#include "core/error.h"
#include "ops/shape.h"

void kn__geom_of(const kn_tensor *t, kn__geom *g) {
  g->nd = t->ndim;
  for (int d = 0; d < t->ndim; d++) {
    g->sz[d] = t->sym ? t->sym->sizes[d] : kn__sym_const(t->sizes[d]);
    g->st[d] = t->sym ? t->sym->strides[d] : kn__sym_const(t->strides[d]);
  }
  g->off = t->sym ? t->sym->offset : kn__sym_const(t->offset);
}

kn_status kn__push_view(kn__metas *out, const kn__call *c, int argi, const kn__geom *g) {
  kn__outmeta *m = kn__metas_push(out, c->args[argi].u.t->dtype);
  if (!m) return kn__oom();
  m->view_of = argi;
  m->ndim = g->nd;
  for (int d = 0; d < g->nd; d++) {
    m->sizes[d] = g->sz[d];
    m->strides[d] = g->st[d];
  }
  m->offset = g->off;
  return KN_OK;
}

kn_status kn__push_fresh(kn__metas *out, kn_dtype dt, int nd, const kn_sym *sz) {
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  m->ndim = nd;
  for (int d = 0; d < nd; d++) m->sizes[d] = sz[d];
  return KN_OK;
}

int kn__format_symsizes(int nd, const kn_sym *s, char *buf, size_t n) {
  int len = snprintf(buf, n, "[");
  for (int d = 0; d < nd; d++) {
    char one[64];
    kn__sym_format(s[d], one, sizeof one);
    size_t used = (size_t)len < n ? (size_t)len : n;
    len += snprintf(buf + used, n - used, d ? ", %s" : "%s", one);
  }
  size_t used = (size_t)len < n ? (size_t)len : n;
  return len + snprintf(buf + used, n - used, "]");
}

kn_status kn__shape_wrap(int64_t dim, int ndim, int *out) {
  return kn__wrap_dim(dim, ndim, out);
}

/* Clamp v to [lo, hi] (guards on symbolic values). */
static kn_sym clamp(kn_sym v, kn_sym lo, kn_sym hi) {
  if (kn__sym_guard(v, KN__SYM_LT, lo)) return lo;
  if (kn__sym_guard(v, KN__SYM_GT, hi)) return hi;
  return v;
}

void kn__slice_bounds(kn_sym size, kn_sym start, kn_sym end, kn_sym *s, kn_sym *e) {
  kn_sym zero = kn__sym_const(0);
  /* an end past any size (KN_SLICE_END) is the size itself */
  kn_sym st = kn__sym_guard(start, KN__SYM_LT, zero) ? kn__sym_add(size, start) : start;
  kn_sym en = kn__sym_is_const(end) && end.c >= INT64_MAX / 2 ? size
              : kn__sym_guard(end, KN__SYM_LT, zero) ? kn__sym_add(size, end) : end;
  *s = clamp(st, zero, size);
  *e = clamp(en, *s, size);
}

kn_sym kn__slice_len(kn_sym start, kn_sym end, int64_t step) {
  kn_sym span = kn__sym_sub(end, start);
  if (step == 1) return span;
  if (kn__sym_is_const(span)) /* ceil(span / step) without span + step - 1 overflowing */
    return kn__sym_const(span.c / step + (span.c % step != 0));
  return kn__sym_floordiv(kn__sym_add(span, kn__sym_const(step - 1)), kn__sym_const(step));
}

kn_sym kn__sym_numel(int nd, const kn_sym *sz) {
  kn_sym n = kn__sym_const(1);
  for (int d = 0; d < nd; d++) n = kn__sym_mul(n, sz[d]);
  return n;
}

kn_status kn__infer_size(const kn__arg *a, kn_sym numel, kn_sym *out) {
  const int64_t *req = a->u.ints.v;
  int n = a->u.ints.n;
  if (n < 0 || n > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "expected at most %d dimensions, got %d", KN_MAX_DIMS, n);
  int infer = -1;
  kn_sym prod = kn__sym_const(1);
  for (int d = 0; d < n; d++) {
    if (req[d] == -1) {
      if (infer >= 0) return kn__error(KN_ESHAPE, "only one dimension can be inferred");
      infer = d;
    } else if (req[d] < 0) {
      return kn__error(KN_ESHAPE, "invalid shape dimension %lld", (long long)req[d]);
    } else {
      prod = kn__sym_mul(prod, kn__arg_symint_at(a, d));
    }
    out[d] = kn__arg_symint_at(a, d);
  }
  bool ok;
  if (infer >= 0 && kn__sym_guard_eq_int(prod, 0) && kn__sym_guard_eq_int(numel, 0)) {
    char shape[256];
    kn__format_sizes(n, req, shape, sizeof shape);
    return kn__error(KN_ESHAPE, "cannot reshape tensor of 0 elements into shape %s because the "
                     "unspecified dimension size -1 can be any value and is ambiguous", shape);
  }
  if (infer >= 0) {
    /* numel must be a multiple of the known product (which must be > 0) */
    ok = !kn__sym_guard_eq_int(prod, 0) &&
         kn__sym_guard_eq_int(kn__sym_mod(numel, prod), 0);
    if (ok) out[infer] = kn__sym_floordiv(numel, prod);
  } else {
    ok = kn__sym_guard_eq(numel, prod);
  }
  if (!ok) {
    char shape[256], num[64];
    kn__format_sizes(n, req, shape, sizeof shape);
    kn__sym_format(numel, num, sizeof num);
    return kn__error(KN_ESHAPE, "shape '%s' is invalid for input of size %s", shape, num);
  }
  return KN_OK;
}

bool kn__compute_stride(int ond, const kn_sym *osz, const kn_sym *ost, int nnd,
                        const kn_sym *nsz, kn_sym *nst) {
  if (ond == 0) {
    for (int d = 0; d < nnd; d++) nst[d] = kn__sym_const(1);
    return true;
  }
  kn_sym numel = kn__sym_numel(ond, osz);
  if (kn__sym_guard_eq_int(numel, 0)) {
    bool same = ond == nnd;
    for (int d = 0; same && d < ond; d++) same = kn__sym_guard_eq(osz[d], nsz[d]);
    if (same) {
      for (int d = 0; d < nnd; d++) nst[d] = ost[d];
      return true;
    }
    kn_sym acc = kn__sym_const(1);
    for (int d = nnd - 1; d >= 0; d--) {
      nst[d] = acc;
      acc = kn__sym_mul(acc, kn__sym_max(nsz[d], kn__sym_const(1)));
    }
    return true;
  }
  int vd = nnd - 1;
  kn_sym base = ost[ond - 1];
  kn_sym tnumel = kn__sym_const(1), vnumel = kn__sym_const(1);
  for (int td = ond - 1; td >= 0; td--) {
    tnumel = kn__sym_mul(tnumel, osz[td]);
    bool chunk_end = td == 0 ||
                     (!kn__sym_guard_eq_int(osz[td - 1], 1) &&
                      !kn__sym_guard_eq(ost[td - 1], kn__sym_mul(tnumel, base)));
    if (!chunk_end) continue;
    while (vd >= 0 && (kn__sym_guard_lt(vnumel, tnumel) || kn__sym_guard_eq_int(nsz[vd], 1))) {
      nst[vd] = kn__sym_mul(vnumel, base);
      vnumel = kn__sym_mul(vnumel, nsz[vd]);
      vd--;
    }
    if (!kn__sym_guard_eq(vnumel, tnumel)) return false;
    if (td > 0) {
      base = ost[td - 1];
      tnumel = kn__sym_const(1);
      vnumel = kn__sym_const(1);
    }
  }
  return vd == -1;
}

kn_status kn__composite_push(kn__outs *out, kn_tensor *r) {
  if (!r) return kn_last_status() != KN_OK ? kn_last_status() : KN_EINTERNAL;
  if (!kn__outs_push(out, kn_retain(r))) return kn__oom();
  return KN_OK;
}
