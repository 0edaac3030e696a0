/*
** ops/reduce_api.c: public wrappers of the reduction family
** (kiln/ops_reduce.h) and sum_to_size, which is composite over sum.
*/
#include <stdio.h>

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/symsize.h"

/* An empty list reduces every dim; a negative count or a NULL list of
** ndims > 0 entries is refused by the dispatcher. */
static kn__arg dims_arg(const int64_t *dims, int ndims) { return KN_A_INTS(dims, ndims); }

kn_tensor *kn_sum(kn_tensor *t) {
  return kn__invoke(KN_OP_SUM, 2, (kn__arg[]){KN_A_T(t), KN_A_NONE});
}

kn_tensor *kn_sum_dims(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim) {
  return kn__invoke(KN_OP_SUM_DIM, 4,
                    (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims), KN_A_B(keepdim), KN_A_NONE});
}

kn_tensor *kn_sum_dtype(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim,
                        kn_dtype dtype) {
  return kn__invoke(KN_OP_SUM_DIM, 4, (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims),
                                                   KN_A_B(keepdim), KN_A_DT(dtype)});
}

kn_tensor *kn_mean(kn_tensor *t) {
  return kn__invoke(KN_OP_MEAN, 2, (kn__arg[]){KN_A_T(t), KN_A_NONE});
}

kn_tensor *kn_mean_dims(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim) {
  return kn__invoke(KN_OP_MEAN_DIM, 4,
                    (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims), KN_A_B(keepdim), KN_A_NONE});
}

kn_tensor *kn_mean_dtype(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim,
                         kn_dtype dtype) {
  return kn__invoke(KN_OP_MEAN_DIM, 4, (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims),
                                                    KN_A_B(keepdim), KN_A_DT(dtype)});
}

kn_tensor *kn_prod(kn_tensor *t) {
  return kn__invoke(KN_OP_PROD, 2, (kn__arg[]){KN_A_T(t), KN_A_NONE});
}

kn_tensor *kn_prod_dim(kn_tensor *t, int64_t dim, bool keepdim) {
  return kn__invoke(KN_OP_PROD_DIM, 4,
                    (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_B(keepdim), KN_A_NONE});
}

/* ---- sum_to_size ------------------------------------------------------------ */

static kn_status not_expandable(const kn_tensor *t, int ndim, const kn_sym *sizes) {
  char a[256], b[256];
  int64_t h[KN_MAX_DIMS];
  for (int d = 0; d < ndim && d < KN_MAX_DIMS; d++) h[d] = kn__sym_hint(sizes[d]);
  kn__format_sizes(ndim, h, a, sizeof a);
  kn__format_sizes(t->ndim, t->sizes, b, sizeof b);
  return kn__error(KN_ESHAPE, "size {%s} is not expandable to size {%s}.", a, b);
}

/* The dims of t to sum for sum_to_size(sizes): size-1 targets (ones, kept)
** and leading dims (dropped). Compares over symbols (guards when needed). */
static kn_status sum_to_dims(const kn_tensor *t, int ndim, const kn_sym *sizes, int64_t *ones,
                             int *n1) {
  int lead = t->ndim - ndim;
  kn_sym have[KN_MAX_DIMS];
  kn__tensor_symsizes(t, have);
  *n1 = 0;
  for (int d = 0; d < ndim; d++) {
    if (kn__sym_guard_eq(have[lead + d], sizes[d])) continue;
    if (!kn__sym_guard_eq_int(sizes[d], 1)) return not_expandable(t, ndim, sizes);
    ones[(*n1)++] = lead + d;
  }
  return KN_OK;
}

kn_tensor *kn__sum_to_symsize(kn_tensor *t, int ndim, const kn_sym *sizes) {
  if (!t) {
    char h[KN__HINT_CAP];
    kn__error(KN_EINVAL, "sum_to_size: input is a NULL tensor%s", kn__error_hint(h, sizeof h));
    return NULL;
  }
  if (ndim < 0 || ndim > t->ndim) {
    if (ndim >= 0 && ndim <= KN_MAX_DIMS) not_expandable(t, ndim, sizes);
    else kn__error(KN_EINVAL, "sum_to_size: expected at most %d dims, got %d", KN_MAX_DIMS, ndim);
    return NULL;
  }
  int lead = t->ndim - ndim, n1 = 0;
  int64_t ones[KN_MAX_DIMS], leading[KN_MAX_DIMS];
  if (sum_to_dims(t, ndim, sizes, ones, &n1) != KN_OK) return NULL;
  for (int d = 0; d < lead; d++) leading[d] = d;
  if (n1 == 0 && lead == 0) return kn__autorelease(kn_retain(t));
  kn_scope_begin(); /* owns the intermediate sum */
  kn_tensor *r = t;
  if (n1 > 0) r = kn_sum_dims(t, ones, n1, true);
  if (r && lead > 0) r = kn_sum_dims(r, leading, lead, false);
  return kn_scope_end_keep(r == t ? NULL : r);
}

kn_tensor *kn_sum_to_size(kn_tensor *t, int ndim, const int64_t *sizes) {
  if (t && ndim > 0 && ndim <= KN_MAX_DIMS && !sizes) {
    kn__error(KN_EINVAL, "sum_to_size: expected %d sizes, got NULL", ndim);
    return NULL;
  }
  kn_sym s[KN_MAX_DIMS];
  for (int d = 0; sizes && d < ndim && d < KN_MAX_DIMS; d++) s[d] = kn__sym_const(sizes[d]);
  return kn__sum_to_symsize(t, ndim, s);
}

/* ---- amax/amin, argmax/argmin, var/std, cumsum, softmax ------------------- */

kn_tensor *kn_amax(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim) {
  return kn__invoke(KN_OP_AMAX, 3, (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims), KN_A_B(keepdim)});
}

kn_tensor *kn_amin(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim) {
  return kn__invoke(KN_OP_AMIN, 3, (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims), KN_A_B(keepdim)});
}

kn_tensor *kn_argmax(kn_tensor *t) {
  return kn__invoke(KN_OP_ARGMAX, 3, (kn__arg[]){KN_A_T(t), KN_A_NONE, KN_A_B(false)});
}

kn_tensor *kn_argmax_dim(kn_tensor *t, int64_t dim, bool keepdim) {
  return kn__invoke(KN_OP_ARGMAX, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_B(keepdim)});
}

kn_tensor *kn_argmin(kn_tensor *t) {
  return kn__invoke(KN_OP_ARGMIN, 3, (kn__arg[]){KN_A_T(t), KN_A_NONE, KN_A_B(false)});
}

kn_tensor *kn_argmin_dim(kn_tensor *t, int64_t dim, bool keepdim) {
  return kn__invoke(KN_OP_ARGMIN, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_B(keepdim)});
}

kn_tensor *kn_var(kn_tensor *t, const int64_t *dims, int ndims, int64_t correction,
                  bool keepdim) {
  return kn__invoke(KN_OP_VAR, 4, (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims),
                                               KN_A_I(correction), KN_A_B(keepdim)});
}

kn_tensor *kn_std(kn_tensor *t, const int64_t *dims, int ndims, int64_t correction,
                  bool keepdim) {
  return kn__invoke(KN_OP_STD, 4, (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims),
                                               KN_A_I(correction), KN_A_B(keepdim)});
}

/* ---- any/all, logsumexp, vector norms ------------------------------------------- */

kn_tensor *kn_any(kn_tensor *t) { return kn__invoke(KN_OP_ANY, 1, (kn__arg[]){KN_A_T(t)}); }

kn_tensor *kn_any_dim(kn_tensor *t, int64_t dim, bool keepdim) {
  return kn__invoke(KN_OP_ANY_DIM, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_B(keepdim)});
}

kn_tensor *kn_all(kn_tensor *t) { return kn__invoke(KN_OP_ALL, 1, (kn__arg[]){KN_A_T(t)}); }

kn_tensor *kn_all_dim(kn_tensor *t, int64_t dim, bool keepdim) {
  return kn__invoke(KN_OP_ALL_DIM, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_B(keepdim)});
}

kn_tensor *kn_logsumexp(kn_tensor *t, const int64_t *dims, int ndims, bool keepdim) {
  return kn__invoke(KN_OP_LOGSUMEXP, 3,
                    (kn__arg[]){KN_A_T(t), dims_arg(dims, ndims), KN_A_B(keepdim)});
}

kn_tensor *kn_linalg_vector_norm(kn_tensor *t, double ord, const int64_t *dims, int ndims,
                                 bool keepdim) {
  return kn__invoke(KN_OP_VECTOR_NORM, 5, (kn__arg[]){KN_A_T(t), KN_A_S(kn_float(ord)),
                                                       dims_arg(dims, ndims), KN_A_B(keepdim),
                                                       KN_A_NONE});
}

kn_tensor *kn_linalg_vector_norm_dtype(kn_tensor *t, double ord, const int64_t *dims,
                                       int ndims, bool keepdim, kn_dtype dtype) {
  return kn__invoke(KN_OP_VECTOR_NORM, 5, (kn__arg[]){KN_A_T(t), KN_A_S(kn_float(ord)),
                                                       dims_arg(dims, ndims), KN_A_B(keepdim),
                                                       KN_A_DT(dtype)});
}

kn_tensor *kn_norm(kn_tensor *t, double p, const int64_t *dims, int ndims, bool keepdim) {
  return kn_linalg_vector_norm(t, p, dims, ndims, keepdim);
}

kn_tensor *kn_cumsum(kn_tensor *t, int64_t dim) {
  return kn__invoke(KN_OP_CUMSUM, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_NONE});
}

kn_tensor *kn_cumsum_dtype(kn_tensor *t, int64_t dim, kn_dtype dtype) {
  return kn__invoke(KN_OP_CUMSUM, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_DT(dtype)});
}

kn_tensor *kn_softmax(kn_tensor *t, int64_t dim) {
  return kn__invoke(KN_OP_SOFTMAX, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_B(false)});
}

kn_tensor *kn_log_softmax(kn_tensor *t, int64_t dim) {
  return kn__invoke(KN_OP_LOG_SOFTMAX, 3, (kn__arg[]){KN_A_T(t), KN_A_I(dim), KN_A_B(false)});
}

kn_tensor *kn_softmax_backward_data(kn_tensor *grad_output, kn_tensor *output, int64_t dim) {
  kn_dtype dt = output ? kn_tensor_dtype(output) : KN_FLOAT32;
  return kn__invoke(KN_OP_SOFTMAX_BWD, 4, (kn__arg[]){KN_A_T(grad_output), KN_A_T(output),
                                                       KN_A_I(dim), KN_A_DT(dt)});
}

kn_tensor *kn_log_softmax_backward_data(kn_tensor *grad_output, kn_tensor *output,
                                        int64_t dim) {
  kn_dtype dt = output ? kn_tensor_dtype(output) : KN_FLOAT32;
  return kn__invoke(KN_OP_LOG_SOFTMAX_BWD, 4, (kn__arg[]){KN_A_T(grad_output), KN_A_T(output),
                                                           KN_A_I(dim), KN_A_DT(dt)});
}
