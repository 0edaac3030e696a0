/*
** test_dispatch.c: the op table, the dispatcher's layers and modes, factory
** ops, autorelease scopes and reference counts.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/opdef.h"

Test(optable, lookup_by_qualified_name) {
  const kn__opdef *op = kn__op_lookup("full");
  cr_assert_not_null(op);
  cr_assert_eq(op->id, KN_OP_FULL);
  cr_assert_str_eq(kn__op_lookup("empty.memory_format")->name, "empty");
  cr_assert_null(kn__op_lookup("no_such_op"));
  for (int i = 0; i < KN__OP_COUNT; i++) {
    cr_assert_eq(kn__ops[i].id, i, "row %d has id %d", i, kn__ops[i].id);
    cr_assert_not_null(kn__ops[i].meta);
    cr_assert_not_null(kn__ops[i].kernel);
    cr_assert(strncmp(kn__ops[i].schema, kn__ops[i].name, strlen(kn__ops[i].name)) == 0,
              "schema of %s starts with its name", kn__ops[i].name);
    if (kn__ops[i].flags & KN_OPF_COMPOSITE)
      cr_assert(kn__ops[i].meta == kn__meta_composite, "%s: composite rows use kn__meta_composite",
                kn__ops[i].name);
    if (kn__ops[i].flags & KN_OPF_VIEW)
      cr_assert(kn__ops[i].kernel == kn__kernel_view, "%s: view rows use kn__kernel_view",
                kn__ops[i].name);
    bool differentiable = !(kn__ops[i].flags & KN_OPF_NONDIFF) && !(kn__ops[i].flags & KN_OPF_COMPOSITE);
    /* Backward ops whose own derivative (double backward) is not written yet:
    ** differentiating through them fails with "... is not differentiable". */
    static const char *no_double_backward[] = {"convolution_backward", "max_pool2d_with_indices_backward",
                                               "native_batch_norm_backward", "native_layer_norm_backward",
                                               "_fused_rms_norm_backward",
                                               "_scaled_dot_product_fused_attention_backward",
                                               "embedding_dense_backward",
                                               "_thnn_fused_lstm_cell_backward_impl",
                                               "_lstm_layer_backward"};
    for (size_t k = 0; k < sizeof no_double_backward / sizeof *no_double_backward; k++)
      if (!strcmp(kn__ops[i].name, no_double_backward[k])) differentiable = false;
    if (differentiable)
      cr_assert(kn__ops[i].backward != kn__bw_none && kn__ops[i].grad_fn_name[0],
                "%s.%s is differentiable but has no derivative rule or grad_fn name",
                kn__ops[i].name, kn__ops[i].overload);
  }
}

Test(factory, full_infers_dtype_and_fills) {
  kn_tensor *a = kn_full(KN_SHAPE(2, 3), kn_float(2.5), KN_FLOAT64);
  cr_assert_eq(kn_tensor_dtype(a), KN_FLOAT64);
  cr_assert_eq(kn_numel(a), 6);
  for (int i = 0; i < 6; i++) cr_assert_eq(((double *)kn_data(a))[i], 2.5);
  kn_tensor *h = kn_ones(KN_SHAPE(4), KN_FLOAT16);
  cr_assert_eq(((uint16_t *)kn_data(h))[3], 0x3c00); /* 1.0 in IEEE half */
  kn_tensor *b = kn_ones(KN_SHAPE(4), KN_BFLOAT16);
  cr_assert_eq(((uint16_t *)kn_data(b))[0], 0x3f80);
  kn_tensor *z = kn_zeros(KN_SHAPE(0, 5), KN_INT32);
  cr_assert_eq(kn_numel(z), 0);
  cr_assert_eq(kn_size(z, 1), 5);
  kn_release(a);
  kn_release(h);
  kn_release(b);
  kn_release(z);
  cr_assert_eq(kn_live_tensors(), 0);
}

Test(factory, negative_size_is_an_error_not_a_crash) {
  kn_tensor *a = kn_zeros(KN_SHAPE(2, -1), KN_FLOAT32);
  cr_assert_null(a);
  cr_assert_eq(kn_last_status(), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "negative dimension -1") != NULL, "%s", kn_last_error());
}

Test(factory, meta_tensors_have_no_data) {
  kn_tensor *m = kn_empty_meta(KN_SHAPE(1000, 1000), KN_FLOAT32);
  cr_assert_eq(kn_tensor_device(m), KN_META);
  cr_assert_null(kn_data(m));
  cr_assert_eq(kn_numel(m), 1000000);
  kn_release(m);
}

Test(scope, releases_everything_but_kept) {
  int64_t before = kn_live_tensors();
  kn_scope_begin();
  kn_tensor *keep = NULL;
  for (int i = 0; i < 10; i++) keep = kn_ones(KN_SHAPE(8), KN_FLOAT32);
  cr_assert_eq(kn_live_tensors(), before + 10);
  keep = kn_scope_end_keep(keep);
  cr_assert_eq(kn_live_tensors(), before + 1);
  cr_assert_eq(((float *)kn_data(keep))[7], 1.0f);
  kn_release(keep);
  cr_assert_eq(kn_live_tensors(), before);
  cr_assert_eq(kn_live_storages(), 0);
}

Test(scope, nested_scopes_hand_kept_tensor_outward) {
  kn_scope_begin();
  kn_scope_begin();
  kn_tensor *t = kn_zeros(KN_SHAPE(3), KN_INT64);
  kn_scope_end_keep(t);
  cr_assert_eq(kn_live_tensors(), 1); /* now owned by the outer scope */
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), 0);
}

/* A mode that counts the calls it sees and forwards them below. */
static int seen;
static kn_status counting(kn__mode *self, kn__call *c, kn__outs *out) {
  seen++;
  return kn__dispatch_below(self, c, out);
}

Test(modes, a_pushed_mode_sees_every_call_then_forwards) {
  kn__mode m = {"count", counting, NULL};
  seen = 0;
  cr_assert_eq(kn__mode_push(&m), KN_OK);
  kn_tensor *a = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  kn__mode_pop(&m);
  kn_tensor *b = kn_ones(KN_SHAPE(2), KN_FLOAT32);
  cr_assert_eq(seen, 1);
  cr_assert_eq(((float *)kn_data(a))[1], 1.0f);
  kn_release(a);
  kn_release(b);
}

Test(dtype, promotion_lattice_matches_torch) {
  /* Values from torch.promote_types. */
  cr_assert_eq(kn_promote_types(KN_UINT8, KN_INT8), KN_INT16);
  cr_assert_eq(kn_promote_types(KN_UINT8, KN_INT32), KN_INT32);
  cr_assert_eq(kn_promote_types(KN_BOOL, KN_UINT8), KN_UINT8);
  cr_assert_eq(kn_promote_types(KN_INT64, KN_FLOAT16), KN_FLOAT16);
  cr_assert_eq(kn_promote_types(KN_FLOAT16, KN_BFLOAT16), KN_FLOAT32);
  cr_assert_eq(kn_promote_types(KN_BFLOAT16, KN_FLOAT64), KN_FLOAT64);
  cr_assert_eq(kn_promote_types(KN_INT16, KN_INT32), KN_INT32);
}

#include "ops/iter.h"

Test(iter, copy_of_a_transposed_view_and_dtype_conversion) {
  kn_tensor *a = kn_empty(KN_SHAPE(3, 4), KN_FLOAT32);
  float *pa = kn_data(a);
  for (int i = 0; i < 12; i++) pa[i] = (float)i;
  /* transpose: sizes [4, 3], strides [1, 4] */
  kn_tensor *t = kn__make_view(a, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4}, 0);
  kn_tensor *c = kn__contiguous_copy(t, KN_INT64);
  int64_t *pc = kn_data(c);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) cr_assert_eq(pc[i * 3 + j], j * 4 + i);
  /* broadcast a row into a matrix */
  kn_tensor *row = kn__make_view(a, 1, (int64_t[]){4}, (int64_t[]){1}, 4);
  kn_tensor *m = kn_zeros(KN_SHAPE(2, 4), KN_FLOAT64);
  cr_assert_eq(kn__copy_into(m, row), KN_OK);
  cr_assert_eq(((double *)kn_data(m))[7], 7.0);
  cr_assert_eq(((double *)kn_data(m))[0], 4.0);
  kn_release(a); kn_release(t); kn_release(c); kn_release(row); kn_release(m);
  cr_assert_eq(kn_live_tensors(), 0);
}

Test(composite, meta_of_a_composite_runs_its_decomposition_on_metadata) {
  /* reshape is composite: its meta comes from running it on meta aliases */
  kn_tensor *a = kn_ones(KN_SHAPE(2, 6), KN_FLOAT64);
  int64_t shape[] = {3, -1};
  kn__call c = {kn__op_lookup("reshape"), 2, {KN_A_T(a), KN_A_INTS(shape, 2)}};
  cr_assert_not_null(c.op);
  kn__metas m;
  kn__metas_init(&m);
  cr_assert_eq(kn__meta_composite(&c, &m), KN_OK, "%s", kn_last_error());
  cr_assert_eq(m.n, 1);
  cr_assert_eq(m.m[0].dtype, KN_FLOAT64);
  cr_assert_eq(m.m[0].ndim, 2);
  cr_assert_eq(kn__sym_hint(m.m[0].sizes[0]), 3);
  cr_assert_eq(kn__sym_hint(m.m[0].sizes[1]), 4);
  kn__metas_fini(&m);
  kn_release(a);
  cr_assert_eq(kn_live_tensors(), 0);
  cr_assert_eq(kn_live_storages(), 0);
}
