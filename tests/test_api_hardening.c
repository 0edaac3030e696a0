/*
** test_api_hardening.c: bad arguments to the public API are errors with a
** message, never crashes, memory errors or silent wrong answers. Each test
** is a reproducer of a crash or misbehaviour (under ASan/UBSan it was a
** sanitizer report; in the plain build a crash or a wrong result).
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/leakcheck.h"

TestSuite(hardening, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

#define H32 (INT64_C(1) << 32)

/* The last error has status st and a message containing every needle. */
static void expect_error(kn_status st, const char *const *needles, int n) {
  cr_assert_eq(kn_last_status(), st, "status %s, message: %s", kn_status_name(kn_last_status()),
               kn_last_error());
  for (int i = 0; i < n; i++)
    cr_assert(strstr(kn_last_error(), needles[i]) != NULL, "expected '%s' in: %s", needles[i],
              kn_last_error());
}
#define EXPECT_ERROR(st, ...)                                                  \
  expect_error((st), (const char *const[]){__VA_ARGS__},                       \
               (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)))

static kn_tensor *ones11(void) { return kn_ones(KN_SHAPE(1, 1), KN_FLOAT32); }

/* ---- numel overflow ---------------------------------------------------------- */

Test(hardening, sum_of_an_expand_whose_numel_overflows_is_an_error) {
  /* 2^32 x 2^32 elements wrapped to 0 and the sum "was" 0 */
  kn_tensor *e = kn_expand(ones11(), KN_SHAPE(H32, H32));
  cr_assert_null(e);
  EXPECT_ERROR(KN_ERANGE, "expand", "numel: integer multiplication overflow",
               "[4294967296, 4294967296]");
  cr_assert_null(kn_sum(e));
}

Test(hardening, factories_with_overflowing_sizes_fail) {
  int64_t big = INT64_C(1) << 62;
  cr_assert_null(kn_zeros(KN_SHAPE(H32, H32), KN_FLOAT32));
  EXPECT_ERROR(KN_ERANGE, "numel", "[4294967296, 4294967296]");
  cr_assert_null(kn_empty(KN_SHAPE(big), KN_FLOAT64)); /* elements fit, bytes do not */
  EXPECT_ERROR(KN_ERANGE, "[4611686018427387904]");
  cr_assert_null(kn_empty_meta(KN_SHAPE(INT64_MAX, 2), KN_FLOAT32));
  EXPECT_ERROR(KN_ERANGE, "numel");
  cr_assert_null(kn_eye(H32, H32, KN_FLOAT32));
  cr_assert_null(kn_linspace(0, 1, INT64_MAX, KN_FLOAT32));
}

Test(hardening, views_with_overflowing_geometry_fail) {
  kn_tensor *x = ones11();
  int64_t big = INT64_C(1) << 62;
  cr_assert_null(kn_view(x, KN_SHAPE(big, big)));
  cr_assert_null(kn_reshape(x, KN_SHAPE(big, big)));
  cr_assert_null(kn_as_strided(x, KN_SHAPE(2, 2), (int64_t[]){big, big}, 0));
  EXPECT_ERROR(KN_ERANGE);
  cr_assert_null(kn_as_strided(x, KN_SHAPE(3), (int64_t[]){INT64_MAX}, INT64_MAX - 2));
  cr_assert_null(kn_narrow(x, 0, INT64_MAX, INT64_MAX));
  /* extreme but valid slice bounds clamp, as in Python */
  cr_assert_eq(kn_size(kn_slice(x, 0, INT64_MIN, INT64_MAX, INT64_MAX / 8), 0), 1, "%s",
               kn_last_error());
  /* a step whose stride in bytes does not fit is refused */
  cr_assert_null(kn_slice(x, 0, INT64_MIN, INT64_MAX, INT64_MAX));
  EXPECT_ERROR(KN_ERANGE, "slice: stride 9223372036854775807 of dimension 0 does not fit");
  cr_assert_eq(kn_size(kn_slice(x, 1, INT64_MIN, INT64_MIN, 1), 1), 0, "%s", kn_last_error());
}

/* ---- NULL arrays and outputs ---------------------------------------------------- */

Test(hardening, null_index_and_output_pointers_are_errors) {
  kn_tensor *x = ones11();
  cr_assert(isnan(kn_get(x, NULL)));
  EXPECT_ERROR(KN_EINVAL, "kn_get", "NULL");
  cr_assert_eq(kn_item_double(x, NULL), KN_EINVAL);
  EXPECT_ERROR(KN_EINVAL, "kn_item_double", "NULL");
  cr_assert_eq(kn_item_int(x, NULL), KN_EINVAL);
  cr_assert_eq(kn_unbind(x, 0, NULL, 4), -1);
  EXPECT_ERROR(KN_EINVAL, "unbind", "NULL");
  cr_assert_null(kn_sizes(NULL));
  EXPECT_ERROR(KN_EINVAL, "kn_sizes", "NULL");
  cr_assert_null(kn_strides(NULL));
  cr_assert_eq(kn_storage_offset(NULL), -1);
  cr_assert_eq(kn_tensor_dtype(NULL), KN_DTYPE_COUNT);
  cr_assert(!kn_is_contiguous(NULL));
  cr_assert(!kn_same_storage(x, NULL));
  cr_assert_eq(kn_tensor_version(NULL), 0);
}

Test(hardening, as_strided_with_a_negative_rank_is_an_error) {
  /* memcpy with a negative size */
  cr_assert_null(kn_as_strided(ones11(), -1, NULL, NULL, 0));
  EXPECT_ERROR(KN_EINVAL, "as_strided", "expected a list length >= 0, got -1");
  cr_assert_null(kn_as_strided(ones11(), 2, NULL, NULL, 0));
  EXPECT_ERROR(KN_EINVAL, "as_strided", "is NULL");
}

/* ---- negative counts -------------------------------------------------------------- */

Test(hardening, negative_list_lengths_are_errors) {
  kn_tensor *x = ones11();
  kn_tensor *two[] = {x, x};
  cr_assert_null(kn_cat(two, -1, 0)); /* was accepted: an empty cat of ... */
  EXPECT_ERROR(KN_EINVAL, "cat", "got -1");
  cr_assert_null(kn_stack(two, -1, 0));
  EXPECT_ERROR(KN_EINVAL, "stack", "got -1");
  kn_tensor *idx = kn_zeros(KN_SHAPE(1), KN_INT64);
  cr_assert_null(kn_index(x, &idx, -1));
  EXPECT_ERROR(KN_EINVAL, "index", "got -1");
  cr_assert_null(kn_sum_dims(x, (int64_t[]){0}, -3, false)); /* summed everything */
  EXPECT_ERROR(KN_EINVAL, "sum", "got -3");
  cr_assert_null(kn_sum_dims(x, NULL, 2, false));
  EXPECT_ERROR(KN_EINVAL, "sum", "NULL");
  cr_assert_null(kn_mean_dims(x, NULL, 1, false));
  cr_assert_null(kn_expand(x, -2, NULL));
  cr_assert_null(kn_permute(x, 2, NULL));
  cr_assert_eq(kn_split_sizes(x, -1, NULL, 0, two, 2), -1);
  cr_assert_eq(kn_unbind(x, 0, two, -1), -1);
  /* an empty dims list still reduces every dim (PyTorch's dim=[]) */
  kn_tensor *s = kn_sum_dims(kn_ones(KN_SHAPE(2, 3), KN_FLOAT32), NULL, 0, false);
  cr_assert_not_null(s, "%s", kn_last_error());
  cr_assert_eq(kn_get(s, NULL), 6.0);
}

/* ---- writing into overlapping memory ------------------------------------------------- */

Test(hardening, in_place_op_into_an_expanded_tensor_is_refused) {
  /* the add accumulated 9 times into the one shared element */
  kn_tensor *x = ones11();
  kn_tensor *e = kn_expand(x, KN_SHAPE(3, 3));
  cr_assert_eq(kn_add_(e, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32)), KN_EUNSUPPORTED);
  EXPECT_ERROR(KN_EUNSUPPORTED,
               "unsupported operation: more than one element of the written-to tensor refers to "
               "a single memory location. Please clone the tensor (kn_clone) before performing "
               "the operation.");
  cr_assert_eq(kn_get(x, (int64_t[]){0, 0}), 1.0);
  cr_assert_eq(kn_fill_(e, kn_int(2)), KN_EUNSUPPORTED);
  cr_assert_eq(kn_mul_scalar_(e, kn_int(2)), KN_EUNSUPPORTED);
  cr_assert_eq(kn_get(x, (int64_t[]){0, 0}), 1.0);
  /* the clone the message asks for works */
  kn_tensor *c = kn_clone(e);
  cr_assert_eq(kn_add_(c, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32)), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_get(c, (int64_t[]){2, 2}), 2.0);
  /* a size-1 dim with stride 0 does not overlap */
  kn_tensor *one = kn_expand(kn_ones(KN_SHAPE(1), KN_FLOAT32), KN_SHAPE(1));
  cr_assert_eq(kn_add_scalar_(one, kn_int(1)), KN_OK, "%s", kn_last_error());
}

/* ---- compiled functions ----------------------------------------------------------------- */

static kn_value first_tensor(const kn_value *args, int nargs, void *ud) {
  (void)ud;
  (void)nargs;
  kn_value v = args[0];
  while (v.kind == KN_VLIST && v.n > 0) v = v.u.items[0];
  return v.kind == KN_VTENSOR ? kn_vtensor(kn_mul_scalar(v.u.t, kn_int(2))) : kn_vnone();
}

Test(hardening, a_list_nested_five_deep_is_an_error_not_a_double_free) {
  kn_reset();
  kn_tensor *x = ones11();
  kn_value l0 = kn_vtensor(x);
  kn_value l1 = kn_vlist(1, &l0), l2 = kn_vlist(1, &l1), l3 = kn_vlist(1, &l2);
  kn_value l4 = kn_vlist(1, &l3), l5 = kn_vlist(1, &l4);
  kn_compiled *f = kn_compile_fn(first_tensor, NULL, 1, "first_tensor", __FILE__, __LINE__, NULL);
  cr_assert_not_null(f);
  kn_value out;
  cr_assert_eq(kn_call(f, &l5, 1, &out), KN_EUNSUPPORTED);
  EXPECT_ERROR(KN_EUNSUPPORTED, "nested deeper than 4");
  cr_assert_eq(out.kind, KN_VNONE);
  /* the caller's lists are intact and a shallower list still works */
  cr_assert_eq(l5.u.items, &l4);
  cr_assert_eq(kn_call(f, &l4, 1, &out), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_get(out.u.t, (int64_t[]){0, 0}), 2.0);
  kn_value_release(out);
  kn_compiled_free(f);
  kn_reset();
}

Test(hardening, lists_with_negative_counts_or_null_items_are_errors) {
  kn_reset();
  kn_compiled *f = kn_compile_fn(first_tensor, NULL, 1, "first_tensor", __FILE__, __LINE__, NULL);
  kn_value out;
  kn_value bad = kn_vlist(-1, NULL);
  cr_assert_eq(kn_call(f, &bad, 1, &out), KN_EINVAL);
  EXPECT_ERROR(KN_EINVAL, "L['a']", "n >= 0", "n = -1");
  bad = kn_vlist(2, NULL);
  cr_assert_eq(kn_call(f, &bad, 1, &out), KN_EINVAL);
  EXPECT_ERROR(KN_EINVAL, "items NULL");
  cr_assert_eq(kn_call(f, NULL, 1, &out), KN_EINVAL);
  cr_assert_eq(kn_call(f, &bad, -1, &out), KN_EINVAL);
  cr_assert_null(kn_export(f, NULL, 1));
  cr_assert_neq(kn_last_status(), KN_OK);
  kn_compiled_free(f);
  kn_reset();
}

static kn_tensor *double_rows(kn_tensor *a) {
  return kn_mul_scalar(kn_sum_dims(a, (int64_t[]){1}, 1, false), kn_int(2));
}

Test(hardening, an_exported_module_with_dynamic_sizes_outlives_its_trace) {
  /* the module's symbols lived in the trace's shape env, freed with it */
  kn_reset();
  kn_compile_options o = {.dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f = KN_COMPILE(double_rows, &o);
  kn_value arg = kn_vtensor(kn_ones(KN_SHAPE(3, 4), KN_FLOAT32));
  kn_graph_module *gm = kn_export(f, &arg, 1);
  cr_assert_not_null(gm, "%s", kn_last_error());
  kn_compiled_free(f);
  kn_reset();
  char *code = kn_graph_module_code(gm);
  cr_assert_not_null(code);
  cr_assert(strstr(code, "s0") != NULL, "%s", code);
  free(code);
  kn_tensor *in = kn_ones(KN_SHAPE(5, 2), KN_FLOAT32), *outt = NULL;
  cr_assert_eq(kn_graph_module_call(gm, &in, 1, &outt, 1), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_size(outt, 0), 5);
  cr_assert_eq(kn_get(outt, (int64_t[]){4}), 4.0);
  kn_graph_module_free(gm);
}

Test(hardening, export_after_a_size_became_dynamic_keeps_its_symbols) {
  /* automatic dynamic: the second size marks dim 0 dynamic for later traces */
  kn_reset();
  kn_compiled *f = KN_COMPILE(double_rows, NULL);
  kn_tensor *a = kn_ones(KN_SHAPE(3, 4), KN_FLOAT32), *b = kn_ones(KN_SHAPE(6, 4), KN_FLOAT32);
  cr_assert_not_null(kn_call_t(f, a), "%s", kn_last_error());
  cr_assert_not_null(kn_call_t(f, b), "%s", kn_last_error());
  kn_value arg = kn_vtensor(kn_ones(KN_SHAPE(7, 4), KN_FLOAT32));
  kn_graph_module *gm = kn_export(f, &arg, 1);
  cr_assert_not_null(gm, "%s", kn_last_error());
  kn_compiled_free(f);
  kn_reset();
  char *code = kn_graph_module_code(gm);
  cr_assert(code && strstr(code, "s0"), "%s", code ? code : "NULL");
  free(code);
  kn_graph_module_free(gm);
}

static kn_value add_named(const kn_value *args, int nargs, void *ud) {
  (void)ud;
  (void)nargs;
  return kn_vtensor(kn_add(args[0].u.t, args[1].u.t));
}

static char failure[512];
static void on_fail(const kn_guard_failure *g, void *ud) {
  (void)ud;
  snprintf(failure, sizeof failure, "%s", g->reason);
}

Test(hardening, arg_names_are_read_up_to_the_given_count) {
  /* an unterminated array was read past its end */
  kn_reset();
  const char *names[2] = {"lhs", "rhs"};
  kn_compile_options o = {.arg_names = names, .narg_names = 2, .dynamic = KN_DYNAMIC_FALSE,
                          .guard_fail_fn = on_fail};
  kn_compiled *f = kn_compile_fn(add_named, NULL, -1, "add_named", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_value args[2] = {kn_vtensor(ones11()), kn_vtensor(ones11())};
  kn_value out;
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  kn_value_release(out);
  args[1] = kn_vtensor(kn_ones(KN_SHAPE(1, 2), KN_FLOAT32));
  failure[0] = '\0';
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  kn_value_release(out);
  cr_assert(strstr(failure, "L['rhs']") != NULL, "%s", failure);
  kn_compiled_free(f);
  o.narg_names = -1;
  cr_assert_null(kn_compile_fn(add_named, NULL, 2, "add_named", __FILE__, __LINE__, &o));
  EXPECT_ERROR(KN_EINVAL, "narg_names");
  kn_reset();
}

/* ---- size arithmetic at the int64 limits (signed overflow under UBSan) ------------- */

Test(hardening, splits_ranges_and_slices_at_the_int64_limits) {
  kn_tensor *x = kn_ones(KN_SHAPE(2, 3), KN_FLOAT32), *outs[4];
  cr_assert_eq(kn_split(x, INT64_MAX, 1, outs, 4), 1, "%s", kn_last_error());
  cr_assert_eq(kn_size(outs[0], 1), 3);
  cr_assert_eq(kn_chunk(x, INT64_MAX, 1, outs, 4), 3, "%s", kn_last_error());
  cr_assert_eq(kn_size(outs[2], 1), 1);
  /* randint's span high - low is 2^64 - 1 */
  kn_tensor *r = kn_randint(INT64_MIN, INT64_MAX, KN_SHAPE(4), NULL, KN_INT64);
  cr_assert_not_null(r, "%s", kn_last_error());
  kn_tensor *lo = kn_randint(INT64_MIN, INT64_MIN + 1, KN_SHAPE(2), NULL, KN_INT64);
  kn_tensor *hi = kn_randint(INT64_MAX - 1, INT64_MAX, KN_SHAPE(2), NULL, KN_INT64);
  int64_t v;
  cr_assert_eq(kn_item_int(kn_select(lo, 0, 1), &v), KN_OK);
  cr_assert_eq(v, INT64_MIN);
  cr_assert_eq(kn_item_int(kn_select(hi, 0, 1), &v), KN_OK);
  cr_assert_eq(v, INT64_MAX - 1);
  /* arange from INT64_MIN by INT64_MAX: [INT64_MIN, -1] */
  kn_tensor *a = kn_arange(kn_int(INT64_MIN), kn_int(INT64_MAX), kn_int(INT64_MAX));
  cr_assert_not_null(a, "%s", kn_last_error());
  cr_assert_eq(kn_numel(a), 2);
  cr_assert_eq(kn_item_int(kn_select(a, 0, 1), &v), KN_OK);
  cr_assert_eq(v, -1);
  cr_assert_null(kn_arange(kn_float(0), kn_float(1e30), kn_float(1)));
  EXPECT_ERROR(KN_ERANGE, "arange: the number of elements (1e+30) does not fit in int64");
  /* a slice of 3 by INT64_MAX / 8 has one element: (3 + step - 1) overflowed */
  cr_assert_eq(kn_setitem_slice_scalar(x, 1, INT64_MIN, INT64_MAX, INT64_MAX / 8, kn_int(5)),
               KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_get(x, (int64_t[]){1, 0}), 5.0);
  cr_assert_eq(kn_get(x, (int64_t[]){1, 1}), 1.0);
  /* window parameters whose arithmetic overflows */
  kn_tensor *img = kn_ones(KN_SHAPE(1, 1, 4, 4), KN_FLOAT32);
  cr_assert_null(kn_max_pool2d(img, (int64_t[]){2, 2}, NULL, NULL,
                               (int64_t[]){INT64_MAX, INT64_MAX}, true));
  EXPECT_ERROR(KN_ERANGE, "max_pool2d_with_indices: integer overflow computing the output sizes");
  cr_assert_null(kn_conv2d(img, img, NULL, NULL, (int64_t[]){INT64_MAX, INT64_MAX}, NULL, 1));
  EXPECT_ERROR(KN_ERANGE, "integer overflow");
}
