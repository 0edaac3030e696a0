/*
** test_index.c: index_select, index_add, gather, scatter, scatter_add,
** masked_fill(_), index / index_put(_) and slice/select assignment: literal
** values (from torch 1.13), error messages, in-place semantics (version
** bumps, writes visible through views), meta inputs, zero-size inputs,
** float64 gradient checks and grad_fn names.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/gradcheck.h"

static int64_t live0;
static void start(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void finish(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(index, .init = start, .fini = finish);

#define SZ(...) (const int64_t[]){__VA_ARGS__}
#define IDX(nd, sizes, ...) kn_from_ints((const int64_t[]){__VA_ARGS__}, nd, sizes)

/* arange(12.).view(3, 4) in float32. */
static kn_tensor *x34(void) {
  kn_tensor *t = kn_empty(KN_SHAPE(3, 4), KN_FLOAT32);
  for (int i = 0; i < 12; i++) ((float *)kn_data(t))[i] = (float)i;
  return t;
}

static void expect_values(int line, const kn_tensor *t, const double *want, int64_t n) {
  cr_assert_not_null(t, "line %d: %s", line, kn_last_error());
  cr_assert_eq(kn_numel(t), n, "line %d: numel %lld, expected %lld", line,
               (long long)kn_numel(t), (long long)n);
  int nd = kn_ndim(t);
  int64_t idx[8] = {0};
  for (int64_t i = 0; i < n; i++) {
    cr_assert_eq(kn_get(t, idx), want[i], "line %d: element %lld: %g != %g", line,
                 (long long)i, kn_get(t, idx), want[i]);
    for (int d = nd - 1; d >= 0 && ++idx[d] == kn_sizes(t)[d]; d--) idx[d] = 0;
  }
}
#define V(t, ...) expect_values(__LINE__, t, (const double[]){__VA_ARGS__}, \
                                (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)))

static void expect_err(int line, bool failed, kn_status st, const char *msg) {
  cr_assert(failed, "line %d: expected an error", line);
  cr_assert_eq(kn_last_status(), st, "line %d: status %d (%s)", line, kn_last_status(),
               kn_last_error());
  cr_assert_str_eq(kn_last_error(), msg, "line %d", line);
}
#define ERR(t, st, msg) expect_err(__LINE__, (t) == NULL, st, msg)
#define ERRS(s, st, msg) expect_err(__LINE__, (s) != KN_OK, st, msg)

static kn_tensor *mask(int nd, const int64_t *sizes, const bool *v) {
  return kn_from_array(v, nd, sizes, KN_BOOL);
}

Test(index, index_select_and_index_add) {
  kn_tensor *x = x34();
  V(kn_index_select(x, 1, IDX(1, SZ(3), 3, 0, 3)), 3, 0, 3, 7, 4, 7, 11, 8, 11);
  V(kn_index_select(x, -2, IDX(1, SZ(2), 2, 2)), 8, 9, 10, 11, 8, 9, 10, 11);
  kn_tensor *e = kn_index_select(x, 0, kn_zeros(KN_SHAPE(0), KN_INT64));
  cr_assert_eq(kn_size(e, 0), 0);
  cr_assert_eq(kn_size(e, 1), 4);
  ERR(kn_index_select(x, 1, IDX(1, SZ(1), 4)), KN_ERANGE,
      "INDICES element is out of DATA bounds, id=4 axis_dim=4");
  ERR(kn_index_select(x, 1, IDX(1, SZ(1), -1)), KN_ERANGE,
      "INDICES element is out of DATA bounds, id=-1 axis_dim=4");
  ERR(kn_index_select(x, 1, IDX(2, SZ(1, 1), 0)), KN_ESHAPE,
      "index_select(): Index is supposed to be a vector");
  ERR(kn_index_select(x, 1, kn_zeros(KN_SHAPE(1), KN_FLOAT32)), KN_EDTYPE,
      "index_select(): Expected dtype int32 or int64 for index");
  /* index_add accumulates repeated indices */
  kn_tensor *src = kn_ones(KN_SHAPE(3, 3), KN_FLOAT32);
  V(kn_index_add(x, 1, IDX(1, SZ(3), 0, 0, -1), src), 2, 1, 2, 4, 6, 5, 6, 8, 10, 9, 10, 12);
  /* int32 index and a non-contiguous (transposed) input */
  kn_tensor *i32 = kn_from_array((const int32_t[]){1, 0}, KN_SHAPE(2), KN_INT32);
  V(kn_index_select(kn_t(x), 1, i32), 4, 0, 5, 1, 6, 2, 7, 3);
}

Test(index, gather_scatter) {
  kn_tensor *x = x34();
  V(kn_gather(x, 1, IDX(2, SZ(3, 2), 0, 0, 1, 3, 2, 1)), 0, 0, 5, 7, 10, 9);
  V(kn_gather(kn_t(x), 0, IDX(2, SZ(1, 3), 3, 0, 1)), 3, 4, 9);
  kn_tensor *z = kn_zeros(KN_SHAPE(3, 4), KN_FLOAT32);
  kn_tensor *src = kn_empty(KN_SHAPE(3, 2), KN_FLOAT32);
  for (int i = 0; i < 6; i++) ((float *)kn_data(src))[i] = (float)(i + 1);
  V(kn_scatter(z, 1, IDX(2, SZ(3, 2), 0, 1, 3, 3, 2, 0), src), 1, 2, 0, 0, 0, 0, 0, 4, 6, 0, 5, 0);
  V(kn_scatter_add(z, 1, IDX(2, SZ(3, 2), 0, 0, 3, 3, 2, 0), src), 3, 0, 0, 0, 0, 0, 0, 7, 6, 0,
    5, 0);
  V(kn_scatter_value(z, 0, IDX(2, SZ(1, 4), 2, 0, 1, 2), kn_float(5)), 0, 5, 0, 0, 0, 0, 5, 0, 5,
    0, 0, 5);
  cr_assert_eq(kn_get(z, SZ(0, 0)), 0.0); /* out of place */
  ERR(kn_gather(x, 1, IDX(2, SZ(1, 1), 4)), KN_ERANGE,
      "index 4 is out of bounds for dimension 1 with size 4");
  ERR(kn_gather(x, 1, IDX(2, SZ(1, 1), -1)), KN_ERANGE,
      "index -1 is out of bounds for dimension 1 with size 4");
  ERR(kn_gather(x, 1, IDX(1, SZ(1), 0)), KN_ESHAPE,
      "Index tensor must have the same number of dimensions as input tensor");
  ERR(kn_gather(x, 1, IDX(2, SZ(4, 1), 0, 0, 0, 0)), KN_ESHAPE,
      "Size does not match at dimension 0 expected index [4, 1] to be smaller than self [3, 4] "
      "apart from dimension 1");
  ERR(kn_gather(x, 1, kn_from_array((const int32_t[]){0}, KN_SHAPE(1, 1), KN_INT32)), KN_EDTYPE,
      "gather(): Expected dtype int64 for index");
  ERR(kn_scatter(z, 1, IDX(2, SZ(1, 5), 0, 1, 2, 3, 0), kn_ones(KN_SHAPE(1, 4), KN_FLOAT32)),
      KN_ESHAPE, "Expected index [1, 5] to be smaller than self [3, 4] apart from dimension 1 "
                 "and to be smaller size than src [1, 4]");
  ERR(kn_scatter_value(z, 1, kn_zeros(KN_SHAPE(4, 3), KN_INT64), kn_float(1)), KN_ESHAPE,
      "Expected index [4, 3] to be smaller than self [3, 4] apart from dimension 1");
  ERR(kn_scatter_add(z, 1, IDX(2, SZ(1, 1), 0), kn_ones(KN_SHAPE(1, 1), KN_FLOAT64)), KN_EDTYPE,
      "scatter_add(): Expected self.dtype to be equal to src.dtype");
  /* empty index: nothing happens */
  V(kn_scatter_value(kn_zeros(KN_SHAPE(2), KN_INT64), 0, kn_zeros(KN_SHAPE(0), KN_INT64),
                     kn_int(3)), 0, 0);
}

Test(index, masked_fill) {
  kn_tensor *x = x34();
  kn_tensor *m = mask(KN_SHAPE(4), (const bool[]){1, 0, 1, 0});
  V(kn_masked_fill(x, m, kn_int(-1)), -1, 1, -1, 3, -1, 5, -1, 7, -1, 9, -1, 11);
  kn_tensor *col = mask(KN_SHAPE(2, 1), (const bool[]){1, 0});
  kn_tensor *b = kn_masked_fill(kn_zeros(KN_SHAPE(4), KN_FLOAT32), col, kn_float(2));
  cr_assert_eq(kn_ndim(b), 2); /* broadcast out of place */
  V(b, 2, 2, 2, 2, 0, 0, 0, 0);
  kn_tensor *v = kn_full(0, NULL, kn_float(7.5), KN_FLOAT64);
  kn_tensor *i = kn_masked_fill_tensor(kn_zeros(KN_SHAPE(4), KN_INT32), m, v);
  cr_assert_eq(kn_tensor_dtype(i), KN_INT32);
  V(i, 7, 0, 7, 0);
  /* in place, through a view: visible in the base, version bumped */
  kn_tensor *base = x34();
  kn_tensor *row = kn_select(base, 0, 1);
  uint64_t ver = kn_tensor_version(base);
  cr_assert_eq(kn_masked_fill_(row, m, kn_float(0.5)), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_get(base, SZ(1, 2)), 0.5);
  cr_assert_eq(kn_get(base, SZ(1, 1)), 5.0);
  cr_assert(kn_tensor_version(base) > ver);
  cr_assert_eq(kn_masked_fill_tensor_(row, m, kn_full(0, NULL, kn_int(9), KN_INT64)), KN_OK);
  cr_assert_eq(kn_get(base, SZ(1, 0)), 9.0);
  ERRS(kn_masked_fill_(kn_zeros(KN_SHAPE(3), KN_FLOAT32),
                       mask(KN_SHAPE(2, 3), (const bool[]){1, 1, 1, 1, 1, 1}), kn_float(1)),
       KN_ESHAPE, "output with shape [3] doesn't match the broadcast shape [2, 3]");
  ERR(kn_masked_fill_tensor(x, m, kn_ones(KN_SHAPE(2), KN_FLOAT32)), KN_ESHAPE,
      "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 "
      "dimension(s).");
  ERR(kn_masked_fill(x, mask(KN_SHAPE(2), (const bool[]){1, 0}), kn_float(1)), KN_ESHAPE,
      kn_last_error()); /* broadcast error (message from the shared broadcaster) */
  cr_assert(strstr(kn_last_error(), "The size of tensor a (4) must match the size of tensor b "
                                    "(2) at non-singleton dimension 1") != NULL);
  ERR(kn_masked_fill(x, kn_zeros(KN_SHAPE(4), KN_FLOAT32), kn_float(1)), KN_EDTYPE,
      "masked_fill_ only supports boolean masks, but got mask with dtype float32");
}

Test(index, advanced_index_and_index_put) {
  kn_tensor *x = x34();
  kn_tensor *i1[] = {IDX(1, SZ(2), 2, -3)};
  V(kn_index(x, i1, 1), 8, 9, 10, 11, 0, 1, 2, 3);
  kn_tensor *i2[] = {IDX(1, SZ(2), 0, 2), IDX(1, SZ(2), -1, 1)};
  V(kn_index(x, i2, 2), 3, 9);
  kn_tensor *i3[] = {IDX(2, SZ(2, 1), 0, 2), IDX(1, SZ(2), 1, 3)};
  kn_tensor *r3 = kn_index(x, i3, 2);
  cr_assert_eq(kn_ndim(r3), 2);
  V(r3, 1, 3, 9, 11);
  bool gt6[12];
  for (int k = 0; k < 12; k++) gt6[k] = k > 6;
  kn_tensor *im[] = {mask(KN_SHAPE(3, 4), gt6)};
  V(kn_index(x, im, 1), 7, 8, 9, 10, 11);
  kn_tensor *rowmask[] = {mask(KN_SHAPE(3), (const bool[]){1, 0, 1})};
  V(kn_index(x, rowmask, 1), 0, 1, 2, 3, 8, 9, 10, 11);
  /* index_put with accumulate and repeated indices */
  kn_tensor *acc[] = {IDX(1, SZ(3), 0, 0, 2)};
  kn_tensor *vals = kn_from_floats((const float[]){1, 2, 3, 4}, KN_SHAPE(4));
  V(kn_index_put(x, acc, 1, vals, true), 2, 5, 8, 11, 4, 5, 6, 7, 9, 11, 13, 15);
  V(kn_index_put(x, i2, 2, kn_full(0, NULL, kn_float(-5), KN_FLOAT32), false), 0, 1, 2, -5, 4,
    5, 6, 7, 8, -5, 10, 11);
  bool gt9[12];
  for (int k = 0; k < 12; k++) gt9[k] = k > 9;
  kn_tensor *m9[] = {mask(KN_SHAPE(3, 4), gt9)};
  V(kn_index_put(x, m9, 1, kn_zeros(0, NULL, KN_FLOAT32), false), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
    0, 0);
  cr_assert_eq(kn_get(x, SZ(2, 3)), 11.0); /* out of place */
  /* in place through a transposed view */
  kn_tensor *base = x34();
  kn_tensor *tv = kn_t(base);
  uint64_t ver = kn_tensor_version(base);
  kn_tensor *i0[] = {IDX(1, SZ(1), 3)};
  cr_assert_eq(kn_index_put_(tv, i0, 1, kn_full(KN_SHAPE(3), kn_float(-1), KN_FLOAT32), false),
               KN_OK, "%s", kn_last_error());
  V(base, 0, 1, 2, -1, 4, 5, 6, -1, 8, 9, 10, -1);
  cr_assert(kn_tensor_version(base) > ver);
  /* errors */
  kn_tensor *three[] = {IDX(1, SZ(1), 0), IDX(1, SZ(1), 0), IDX(1, SZ(1), 0)};
  ERR(kn_index(x, three, 3), KN_ERANGE, "too many indices for tensor of dimension 2");
  kn_tensor *bad[] = {IDX(1, SZ(2), 0, 1), IDX(1, SZ(3), 0, 1, 2)};
  ERR(kn_index(x, bad, 2), KN_ESHAPE,
      "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
  kn_tensor *fl[] = {kn_zeros(KN_SHAPE(1), KN_FLOAT32)};
  ERR(kn_index(x, fl, 1), KN_EDTYPE, "tensors used as indices must be long, byte or bool tensors");
  kn_tensor *oob[] = {IDX(1, SZ(1), 5)};
  ERR(kn_index_put(x, oob, 1, kn_zeros(0, NULL, KN_FLOAT32), false), KN_ERANGE,
      "index 5 is out of bounds for dimension 0 with size 3");
  kn_tensor *one[] = {IDX(1, SZ(1), 0)};
  ERR(kn_index_put(x, one, 1, kn_ones(KN_SHAPE(5), KN_FLOAT32), false), KN_ESHAPE,
      "shape mismatch: value tensor of shape [5] cannot be broadcast to indexing result of "
      "shape [1, 4]");
  ERR(kn_index_put(x, one, 1, kn_ones(KN_SHAPE(4), KN_FLOAT64), false), KN_EDTYPE,
      "Index put requires the source and destination dtypes match, got Float for the "
      "destination and Double for the source.");
  kn_tensor *wm[] = {mask(KN_SHAPE(3), (const bool[]){1, 1, 1})};
  ERR(kn_index(kn_t(x), wm, 1), KN_ESHAPE,
      "The shape of the mask [3] at index 0 does not match the shape of the indexed tensor "
      "[4, 3] at index 0");
}

Test(index, setitem_slice_and_select) {
  kn_tensor *y = x34();
  kn_tensor *view = kn_slice(y, 0, 1, KN_SLICE_END, 1);
  uint64_t ver = kn_tensor_version(y);
  kn_tensor *col = kn_from_floats((const float[]){7, 8, 9}, KN_SHAPE(3, 1));
  cr_assert_eq(kn_setitem_slice(y, 1, 1, KN_SLICE_END, 2, col), KN_OK, "%s", kn_last_error());
  V(y, 0, 7, 2, 7, 4, 8, 6, 8, 8, 9, 10, 9);
  cr_assert(kn_tensor_version(y) > ver);
  cr_assert_eq(kn_tensor_version(view), kn_tensor_version(y));
  cr_assert_eq(kn_get(view, SZ(0, 1)), 8.0); /* visible through an existing view */
  /* select assignment with dtype conversion and broadcasting */
  cr_assert_eq(kn_setitem_select(y, 0, -1, kn_full(0, NULL, kn_int(-2), KN_INT64)), KN_OK);
  V(kn_select(y, 0, 2), -2, -2, -2, -2);
  /* assignment from an overlapping view of itself */
  kn_tensor *z = x34();
  cr_assert_eq(kn_setitem_slice(z, 1, 1, KN_SLICE_END, 1, kn_slice(z, 1, 0, 3, 1)), KN_OK);
  V(z, 0, 0, 1, 2, 4, 4, 5, 6, 8, 8, 9, 10);
  ERRS(kn_setitem_slice(y, 1, 0, 2, 1, kn_ones(KN_SHAPE(3), KN_FLOAT32)), KN_ESHAPE,
       "The expanded size of the tensor (2) must match the existing size (3) at non-singleton "
       "dimension 1.  Target sizes: [3, 2].  Tensor sizes: [3]");
  ERRS(kn_setitem_slice(y, 1, 0, 2, 0, col), KN_EINVAL, "slice step must be positive");
  cr_assert_eq(kn_setitem_slice_scalar(y, 0, -1, KN_SLICE_END, 1, kn_float(0.25)), KN_OK);
  V(kn_select(y, 0, 2), 0.25, 0.25, 0.25, 0.25);
  ERRS(kn_setitem_select(y, 0, 3, col), KN_ERANGE,
       "select(): index 3 out of range for tensor of size [3, 4] at dimension 0");
}

Test(index, meta_inputs) {
  kn_tensor *m = kn_empty_meta(KN_SHAPE(3, 4), KN_FLOAT32);
  kn_tensor *im = kn_empty_meta(KN_SHAPE(5), KN_INT64);
  kn_tensor *r = kn_index_select(m, 1, im);
  cr_assert_eq(kn_tensor_device(r), KN_META);
  cr_assert_eq(kn_size(r, 1), 5);
  kn_tensor *gi = kn_empty_meta(KN_SHAPE(2, 2), KN_INT64);
  cr_assert_eq(kn_size(kn_gather(m, 0, gi), 0), 2);
  cr_assert_eq(kn_tensor_device(kn_scatter_add(m, 0, gi, m)), KN_META);
  kn_tensor *l[] = {im};
  kn_tensor *ix = kn_index(m, l, 1);
  cr_assert_eq(kn_ndim(ix), 2);
  cr_assert_eq(kn_size(ix, 0), 5);
  kn_tensor *bm[] = {kn_empty_meta(KN_SHAPE(3), KN_BOOL)};
  ERR(kn_index(m, bm, 1), KN_EUNSUPPORTED,
      "indexing with a bool mask needs its data (the number of selected elements is "
      "data-dependent), but the mask is a meta tensor");
  cr_assert_eq(kn_masked_fill_(m, kn_empty_meta(KN_SHAPE(4), KN_BOOL), kn_float(1)), KN_OK);
}

/* ---- gradients ------------------------------------------------------------------------- */

static kn_tensor *leaf(int n, const int64_t *sizes) {
  kn_tensor *t = kn_empty(n, sizes, KN_FLOAT64);
  double *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = 0.25 + (double)((i * 37) % 300) / 100.0 - 1;
  kn_set_requires_grad(t, true);
  return t;
}

static kn_tensor *fn(kn_tensor *const *in, int n, void *ud) {
  (void)n;
  kn_tensor *idx1 = IDX(1, SZ(3), 2, 0, 2);
  kn_tensor *idx2 = IDX(2, SZ(3, 2), 0, 0, 3, 1, 2, 3);
  kn_tensor *uniq = IDX(2, SZ(3, 2), 0, 1, 3, 1, 2, 3); /* scatter: no duplicates per row */
  bool mv[12] = {1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1};
  kn_tensor *m = mask(KN_SHAPE(3, 4), mv);
  switch ((int)(intptr_t)ud) {
  case 0: return kn_index_select(in[0], 1, idx1);
  case 1: return kn_gather(in[0], 1, idx2);
  case 2: return kn_scatter(in[0], 1, uniq, in[1]);
  case 3: return kn_scatter_add(in[0], 1, idx2, in[1]);
  case 4: return kn_scatter_value(in[0], 1, idx2, kn_float(2));
  case 5: return kn_masked_fill(in[0], m, kn_float(3));
  case 6: return kn_masked_fill_tensor(in[0], m, in[1]);
  case 7: {
    kn_tensor *l[] = {idx1};
    return kn_index(in[0], l, 1);
  }
  case 8: {
    kn_tensor *l[] = {IDX(1, SZ(3), 0, 2, 0)};
    return kn_index_put(in[0], l, 1, in[1], true);
  }
  case 9: {
    kn_tensor *l[] = {IDX(1, SZ(2), 0, 2)};
    return kn_index_put(in[0], l, 1, in[1], false);
  }
  case 10: return kn_index_add(in[0], 1, idx1, in[1]);
  case 11: { /* CopySlices: setitem on a clone */
    kn_tensor *c = kn_clone(in[0]);
    return kn_setitem_slice(c, 1, 1, KN_SLICE_END, 2, in[1]) == KN_OK ? c : NULL;
  }
  case 12: {
    kn_tensor *c = kn_clone(in[0]);
    return kn_setitem_select(c, 0, -1, in[1]) == KN_OK ? c : NULL;
  }
  default: {
    kn_tensor *c = kn_clone(in[0]);
    return kn_masked_fill_tensor_(c, m, in[1]) == KN_OK ? c : NULL;
  }
  }
}

Test(index, gradchecks_and_grad_fn_names) {
  static const struct {
    const char *grad_fn;
    int src_nd;
    int64_t src_sizes[2];
  } cases[] = {
      {"IndexSelectBackward0", -1, {0}},     {"GatherBackward0", -1, {0}},
      {"ScatterBackward0", 2, {3, 2}},       {"ScatterAddBackward0", 2, {3, 2}},
      {"ScatterBackward1", -1, {0}},         {"MaskedFillBackward0", -1, {0}},
      {"MaskedFillBackward1", 0, {0}},       {"IndexBackward0", -1, {0}},
      {"IndexPutBackward0", 1, {4}},         {"IndexPutBackward0", 2, {2, 1}},
      {"IndexAddBackward0", 2, {3, 3}},      {"CopySlices", 2, {3, 1}},
      {"CopySlices", 1, {4}},                {"MaskedFillBackward1", 0, {0}},
  };
  for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
    kn_scope_begin();
    kn_tensor *in[2] = {leaf(KN_SHAPE(3, 4)), NULL};
    int n = 1;
    if (cases[k].src_nd >= 0) in[n++] = leaf(cases[k].src_nd, cases[k].src_sizes);
    kn_tensor *out = fn(in, n, (void *)(intptr_t)k);
    cr_assert_not_null(out, "case %d: %s", k, kn_last_error());
    cr_assert_str_eq(kn_grad_fn_name(out), cases[k].grad_fn, "case %d", k);
    char why[512];
    cr_assert(kn_gradcheck(fn, in, n, (void *)(intptr_t)k, why, sizeof why), "case %d (%s): %s",
              k, cases[k].grad_fn, why);
    cr_assert(kn_gradgradcheck(fn, in, n, (void *)(intptr_t)k, why, sizeof why),
              "case %d (%s) second order: %s", k, cases[k].grad_fn, why);
    kn_scope_end();
  }
}

Test(index, dtypes_and_zero_size) {
  /* float16 accumulation is computed in float and rounded on store */
  kn_tensor *h = kn_zeros(KN_SHAPE(2), KN_FLOAT16);
  kn_tensor *hs = kn_full(KN_SHAPE(3), kn_float(0.5), KN_FLOAT16);
  V(kn_scatter_add(h, 0, IDX(1, SZ(3), 1, 1, 0), hs), 0.5, 1.0);
  /* int64 index_put with accumulate, bool masked_fill, bfloat16 gather */
  kn_tensor *i = kn_zeros(KN_SHAPE(3), KN_INT64);
  kn_tensor *l[] = {IDX(1, SZ(4), 0, 2, 2, -1)};
  V(kn_index_put(i, l, 1, kn_full(KN_SHAPE(4), kn_int(3), KN_INT64), true), 3, 0, 9);
  kn_tensor *b = kn_zeros(KN_SHAPE(3), KN_BOOL);
  V(kn_masked_fill(b, mask(KN_SHAPE(3), (const bool[]){0, 1, 0}), kn_bool(true)), 0, 1, 0);
  kn_tensor *bf = kn_from_floats((const float[]){1.5f, -2, 4}, KN_SHAPE(3));
  kn_tensor *bfc = kn_to(bf, KN_BFLOAT16);
  kn_tensor *gb = kn_gather(bfc, 0, IDX(1, SZ(2), 2, 0));
  cr_assert_eq(kn_tensor_dtype(gb), KN_BFLOAT16);
  V(gb, 4, 1.5);
  /* zero-size inputs */
  kn_tensor *z = kn_zeros(KN_SHAPE(0, 3), KN_FLOAT32);
  cr_assert_eq(kn_numel(kn_gather(z, 0, kn_zeros(KN_SHAPE(0, 3), KN_INT64))), 0);
  cr_assert_eq(kn_numel(kn_masked_fill(z, mask(KN_SHAPE(3), (const bool[]){1, 1, 1}),
                                       kn_float(1))), 0);
  kn_tensor *none[] = {kn_zeros(KN_SHAPE(0), KN_INT64)};
  kn_tensor *x = x34();
  kn_tensor *ix = kn_index(x, none, 1);
  cr_assert_eq(kn_size(ix, 0), 0);
  cr_assert_eq(kn_size(ix, 1), 4);
  V(kn_index_put(x, none, 1, kn_zeros(KN_SHAPE(4), KN_FLOAT32), false), 0, 1, 2, 3, 4, 5, 6, 7,
    8, 9, 10, 11);
  cr_assert_eq(kn_setitem_slice(x, 0, 5, 9, 1, kn_ones(KN_SHAPE(4), KN_FLOAT32)), KN_OK);
  cr_assert_eq(kn_get(x, SZ(2, 3)), 11.0); /* empty slice: nothing written */
}

Test(index, inplace_on_a_leaf_that_requires_grad_is_refused) {
  kn_tensor *x = kn_zeros(KN_SHAPE(3), KN_FLOAT64);
  kn_set_requires_grad(x, true);
  cr_assert_neq(kn_setitem_slice(x, 0, 0, 1, 1, kn_ones(KN_SHAPE(1), KN_FLOAT64)), KN_OK);
  cr_assert_eq(kn_last_status(), KN_EAUTOGRAD);
  cr_assert_eq(kn_masked_fill_(x, mask(KN_SHAPE(3), (const bool[]){1, 0, 0}), kn_float(1)),
               KN_EAUTOGRAD);
  cr_assert_eq(kn_get(x, SZ(0)), 0.0);
}
