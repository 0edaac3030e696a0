/*
** ops/symsize.c: sizes as symbolic ints for derivative rules (see
** ops/symsize.h): shape-carrying expand/reshape/zeros/sum_to_size and
** division by a symbolic count.
*/
#include "core/error.h"
#include "kiln/ops_pointwise.h"
#include "ops/symsize.h"

void kn__tensor_symstrides(const kn_tensor *t, kn_sym *strides) {
  for (int d = 0; d < t->ndim; d++)
    strides[d] = t->sym ? t->sym->strides[d] : kn__sym_const(t->strides[d]);
}

kn__arg kn__arg_known(const kn__arg *a, kn_sym *store) {
  kn__arg r = *a;
  if (a->kind == KN__A_INT) store[0] = kn__arg_symint(a);
  else if (a->kind == KN__A_INTS && a->u.ints.n <= KN_MAX_DIMS)
    for (int j = 0; j < a->u.ints.n; j++) store[j] = kn__arg_symint_at(a, j);
  else return r;
  r.sym = store;
  return r;
}

kn_sym kn__numel_sym(const kn_tensor *t) {
  kn_sym s[KN_MAX_DIMS], n = kn__sym_const(1);
  kn__tensor_symsizes(t, s);
  for (int d = 0; d < t->ndim; d++) n = kn__sym_mul(n, s[d]);
  return n;
}

kn_sym kn__count_sym(const kn_tensor *t, const bool *mask) {
  kn_sym s[KN_MAX_DIMS], n = kn__sym_const(1);
  kn__tensor_symsizes(t, s);
  for (int d = 0; d < t->ndim; d++)
    if (mask[d]) n = kn__sym_mul(n, s[d]);
  return n;
}

bool kn__same_sizes(const kn_tensor *a, const kn_tensor *b) {
  if (a->ndim != b->ndim) return false;
  kn_sym sa[KN_MAX_DIMS], sb[KN_MAX_DIMS];
  kn__tensor_symsizes(a, sa);
  kn__tensor_symsizes(b, sb);
  for (int d = 0; d < a->ndim; d++)
    if (!kn__sym_guard_eq(sa[d], sb[d])) return false;
  return true;
}

/* The hints of n symbolic ints (the values kernels read). */
static void hints_of(int n, const kn_sym *s, int64_t *out) {
  for (int d = 0; d < n; d++) out[d] = kn__sym_hint(s[d]);
}

static bool bad_rank(const kn_tensor *t, int n, const char *what) {
  if (t && n >= 0 && n <= KN_MAX_DIMS) return false;
  if (t) kn__error(KN_EINVAL, "%s: expected 0 to %d sizes, got %d", what, KN_MAX_DIMS, n);
  return true;
}

kn_tensor *kn__expand_sym(kn_tensor *t, int n, const kn_sym *sizes) {
  if (bad_rank(t, n, "expand")) return NULL;
  int64_t h[KN_MAX_DIMS];
  hints_of(n, sizes, h);
  return kn__invoke(KN_OP_EXPAND, 2,
                    (kn__arg[]){KN_A_T(t), KN_A_SYMINTS(h, sizes, n)});
}

kn_tensor *kn__expand_like(kn_tensor *t, const kn_tensor *like) {
  kn_sym s[KN_MAX_DIMS];
  kn__tensor_symsizes(like, s);
  return kn__expand_sym(t, like->ndim, s);
}

kn_tensor *kn__reshape_sym(kn_tensor *t, int n, const kn_sym *sizes) {
  if (bad_rank(t, n, "reshape")) return NULL;
  int64_t h[KN_MAX_DIMS];
  hints_of(n, sizes, h);
  return kn__invoke(KN_OP_RESHAPE, 2, (kn__arg[]){KN_A_T(t), KN_A_SYMINTS(h, sizes, n)});
}

kn_tensor *kn__view_sym(kn_tensor *t, int n, const kn_sym *sizes) {
  if (bad_rank(t, n, "view")) return NULL;
  int64_t h[KN_MAX_DIMS];
  hints_of(n, sizes, h);
  return kn__invoke(KN_OP_VIEW, 2, (kn__arg[]){KN_A_T(t), KN_A_SYMINTS(h, sizes, n)});
}

kn_tensor *kn__reshape_like(kn_tensor *t, const kn_tensor *like) {
  kn_sym s[KN_MAX_DIMS];
  kn__tensor_symsizes(like, s);
  return kn__reshape_sym(t, like->ndim, s);
}

kn_tensor *kn__full_sym(int n, const kn_sym *sizes, kn_scalar value, kn_dtype dt) {
  if (n < 0 || n > KN_MAX_DIMS) {
    kn__error(KN_EINVAL, "full: expected 0 to %d sizes, got %d", KN_MAX_DIMS, n);
    return NULL;
  }
  int64_t h[KN_MAX_DIMS];
  hints_of(n, sizes, h);
  return kn__invoke(KN_OP_FULL, 3, (kn__arg[]){KN_A_SYMINTS(h, sizes, n), KN_A_S(value),
                                                KN_A_DT(dt)});
}

kn_tensor *kn__zeros_shaped(const kn_tensor *like, kn_dtype dt) {
  kn_sym s[KN_MAX_DIMS];
  kn__tensor_symsizes(like, s);
  return kn__full_sym(like->ndim, s, kn_int(0), dt);
}

kn_tensor *kn__zeros_like_sym(const kn_tensor *like) { return kn__zeros_shaped(like, like->dtype); }

kn_tensor *kn__sum_to_like(kn_tensor *t, const kn_tensor *like) {
  kn_sym s[KN_MAX_DIMS];
  kn__tensor_symsizes(like, s);
  return kn__sum_to_symsize(t, like->ndim, s);
}

kn_tensor *kn__div_symint(kn_tensor *t, kn_sym n) {
  return kn__invoke(KN_OP_DIV_SCALAR, 2, (kn__arg[]){KN_A_T(t), KN_A_SYMSCALAR(&n)});
}

kn_tensor *kn__slice_sym(kn_tensor *t, int64_t dim, kn_sym start, kn_sym end, int64_t step) {
  return kn__invoke(KN_OP_SLICE, 5, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_SYMINT(&start),
                                                 KN_A_SYMINT(&end), KN_A_I(step)});
}

kn_tensor *kn__slice_scatter_sym(kn_tensor *self, kn_tensor *src, int64_t dim, kn_sym start,
                                 kn_sym end, int64_t step) {
  return kn__invoke(KN_OP_SLICE_SCATTER, 6,
                    (kn__arg[]){KN_A_T(self), KN_A_T(src), KN_A_I(dim), KN_A_SYMINT(&start),
                                KN_A_SYMINT(&end), KN_A_I(step)});
}

kn_tensor *kn__select_scatter_sym(kn_tensor *self, kn_tensor *src, int64_t dim, kn_sym index) {
  return kn__invoke(KN_OP_SELECT_SCATTER, 4,
                    (kn__arg[]){KN_A_T(self), KN_A_T(src), KN_A_I(dim), KN_A_SYMINT(&index)});
}

kn_tensor *kn__select_sym(kn_tensor *t, int64_t dim, kn_sym index) {
  return kn__invoke(KN_OP_SELECT, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_SYMINT(&index)});
}
