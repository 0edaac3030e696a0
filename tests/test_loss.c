/*
** test_loss.c: the losses against torch 1.13 references
** (tests/fixtures/loss.json, from tools/ref/gen_loss.py), plus literal
** values, meta inputs and torch's error messages.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"
#include "support/reduce_test_util.h"

#ifndef KN_LOSS_GRADS
#define KN_LOSS_GRADS 1
#endif

static int64_t live0;
static void setup(void) { live0 = kn_live_tensors(); kn_scope_begin(); }
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0);
}
TestSuite(loss, .init = setup, .fini = teardown);

static kn_tensor *run(const json_t *c, kn_tensor *const *in) {
  const char *op = kn_fixture_op(c);
  kn_reduction r = (kn_reduction)kn_fixture_param_int(c, "reduction", 1);
  kn_tensor *w = kn_fixture_param_bool(c, "weight", false) ? in[2] : NULL;
  int64_t ign = kn_fixture_param_int(c, "ignore_index", -100);
  double ls = kn_fixture_param_double(c, "label_smoothing", 0);
  if (!strcmp(op, "mse_loss")) return kn_mse_loss(in[0], in[1], r);
  if (!strcmp(op, "l1_loss")) return kn_l1_loss(in[0], in[1], r);
  if (!strcmp(op, "binary_cross_entropy")) return kn_binary_cross_entropy(in[0], in[1], w, r);
  if (!strcmp(op, "nll_loss")) return kn_nll_loss(in[0], in[1], w, r, ign);
  if (!strcmp(op, "cross_entropy")) return kn_cross_entropy(in[0], in[1], w, r, ign, ls);
  cr_assert_fail("unknown op %s", op);
  return NULL;
}

Test(loss, outputs_and_gradients_match_torch) {
  kn_fixture *f = kn_fixture_load_named("loss.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  int ngrad = 0;
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    const json_t *c = kn_fixture_case(f, i);
    const char *name = kn_fixture_name(c);
    if (!KN_LOSS_GRADS && (strstr(name, "l1_") || strstr(name, "_ls_"))) continue;
    kn_scope_begin();
    kn_tensor *in[3] = {NULL, NULL, NULL};
    int n = kn_fixture_ninputs(c);
    for (int k = 0; k < n; k++) in[k] = kn_fixture_tensor(kn_fixture_input(c, k));
    bool prev = kn_set_grad_enabled(KN_LOSS_GRADS);
    kn_tensor *y = run(c, in);
    kn_set_grad_enabled(prev);
    cr_assert_not_null(y, "%s: %s", name, kn_last_error());
    char why[256];
    double tol = kn_tensor_dtype(in[0]) == KN_FLOAT32 ? 1e-5 : 1e-10;
    cr_assert(kn_fixture_close(y, kn_fixture_output(c, 0), tol, tol, why, sizeof why), "%s: %s",
              name, why);
    for (int k = 0; k < n && KN_LOSS_GRADS; k++) {
      const json_t *g = kn_fixture_grad(c, k);
      if (!g) continue;
      kn_tensor *ones = kn_ones(kn_ndim(y), kn_sizes(y), kn_tensor_dtype(y));
      kn_tensor *gx = NULL;
      cr_assert_eq(kn_autograd_grad(&y, 1, &in[k], 1, &ones, true, false, false, &gx), KN_OK,
                   "%s: %s", name, kn_last_error());
      cr_assert(kn_fixture_close(gx, g, 1e-9, 1e-9, why, sizeof why), "%s grad %d: %s", name, k,
                why);
      ngrad++;
    }
    kn_scope_end();
  }
  cr_assert(ngrad == 58 || !KN_LOSS_GRADS, "only %d gradients checked", ngrad);
  kn_fixture_free(f);
}

Test(loss, literal_values) {
  kn_tensor *x = rt_from(KN_FLOAT32, KN_SHAPE(2, 2), (double[]){1, 2, 3, 4});
  kn_tensor *t = rt_from(KN_FLOAT32, KN_SHAPE(2, 2), (double[]){0, 2, 5, 3});
  rt_expect(kn_mse_loss(x, t, KN_REDUCTION_MEAN), (double[]){1.5}, 1e-7);
  rt_expect(kn_mse_loss(x, t, KN_REDUCTION_SUM), (double[]){6}, 0);
  rt_expect(kn_mse_loss(x, t, KN_REDUCTION_NONE), (double[]){1, 0, 4, 1}, 0);
  kn_tensor *lp = rt_from(KN_FLOAT64, KN_SHAPE(2, 3), (double[]){-1, -2, -3, -4, -5, -6});
  kn_tensor *tg = rt_from(KN_INT64, KN_SHAPE(2), (double[]){2, 0});
  rt_expect(kn_nll_loss(lp, tg, NULL, KN_REDUCTION_MEAN, -100), (double[]){3.5}, 1e-15);
  rt_expect(kn_nll_loss(lp, tg, NULL, KN_REDUCTION_NONE, -100), (double[]){3, 4}, 0);
  kn_tensor *w = rt_from(KN_FLOAT64, KN_SHAPE(3), (double[]){1, 1, 3});
  /* (3*3 + 1*4) / (3 + 1) */
  rt_expect(kn_nll_loss(lp, tg, w, KN_REDUCTION_MEAN, -100), (double[]){13.0 / 4}, 1e-15);
  rt_expect(kn_nll_loss(lp, tg, w, KN_REDUCTION_SUM, 0), (double[]){9}, 0);
  kn_tensor *p = rt_from(KN_FLOAT64, KN_SHAPE(2), (double[]){0.5, 0});
  kn_tensor *q = rt_from(KN_FLOAT64, KN_SHAPE(2), (double[]){1, 1});
  /* -log(0.5) and the clamp: -max(log 0, -100) = 100 */
  rt_expect(kn_binary_cross_entropy(p, q, NULL, KN_REDUCTION_NONE), (double[]){log(2.0), 100},
            1e-15);
  kn_tensor *e = kn_zeros(KN_SHAPE(0), KN_FLOAT32);
  double v;
  cr_assert_eq(kn_item_double(kn_mse_loss(e, e, KN_REDUCTION_MEAN), &v), KN_OK);
  cr_assert(isnan(v));
  cr_assert_eq(kn_item_double(kn_mse_loss(e, e, KN_REDUCTION_SUM), &v), KN_OK);
  cr_assert_eq(v, 0);
}

/* mse_loss's dense path (one shape and dtype, contiguous; blocks of 16384
** squares added on the threads) against the general path (the same
** values read through strided views, elements one by one in order) and
** a sum in long double here: the squares bit for bit, the reductions
** within 1e-13 (float64) and half an ulp (float32) of the long double sum;
** the same bits at 1 and 2 threads. 100003 elements: 7 blocks, a tail. */
Test(loss, mse_dense_path_matches_the_general_one) {
  kn_generator *g = kn_generator_new(11);
  kn_dtype dts[2] = {KN_FLOAT32, KN_FLOAT64};
  for (int k = 0; k < 2; k++) {
    /* every second element: strided views (the general path), and copies */
    kn_tensor *xg = kn_slice(kn_randn(KN_SHAPE(200006), g, dts[k]), 0, 0, 200006, 2);
    kn_tensor *tg = kn_slice(kn_randn(KN_SHAPE(200006), g, dts[k]), 0, 0, 200006, 2);
    kn_tensor *x = kn_contiguous(xg), *t = kn_contiguous(tg);
    cr_assert(!kn_is_contiguous(xg) && kn_is_contiguous(x));
    long double want = 0;
    kn_tensor *x64 = kn_to(x, KN_FLOAT64), *t64 = kn_to(t, KN_FLOAT64);
    const double *a = kn_data(x64), *b = kn_data(t64);
    for (int64_t i = 0; i < 100003; i++)
      want += ((long double)a[i] - b[i]) * ((long double)a[i] - b[i]);
    const char *nm = kn_dtype_name(dts[k]);
    kn_tensor *none_d = kn_mse_loss(x, t, KN_REDUCTION_NONE);
    kn_tensor *none_g = kn_contiguous(kn_mse_loss(xg, tg, KN_REDUCTION_NONE));
    cr_assert(none_d && none_g, "%s", kn_last_error());
    cr_expect(!memcmp(kn_data(none_d), kn_data(none_g), 100003 * kn_dtype_size(dts[k])),
              "%s: squares differ", nm);
    double r[2][2];
    for (int nt = 1; nt <= 2; nt++) {
      cr_assert_eq(kn_set_num_threads(nt), KN_OK);
      cr_assert_eq(kn_item_double(kn_mse_loss(x, t, KN_REDUCTION_SUM), &r[nt - 1][0]), KN_OK);
      cr_assert_eq(kn_item_double(kn_mse_loss(x, t, KN_REDUCTION_MEAN), &r[nt - 1][1]), KN_OK);
    }
    double gs, gm;
    cr_assert_eq(kn_item_double(kn_mse_loss(xg, tg, KN_REDUCTION_SUM), &gs), KN_OK);
    cr_assert_eq(kn_item_double(kn_mse_loss(xg, tg, KN_REDUCTION_MEAN), &gm), KN_OK);
    cr_expect(r[0][0] == r[1][0] && r[0][1] == r[1][1], "%s: 1 and 2 threads differ", nm);
    double tol = k ? 1e-13 * (double)want : ldexp((double)want, -24), w = (double)want;
    cr_expect(fabs(r[0][0] - w) <= tol, "%s sum %.17g vs %.17g", nm, r[0][0], w);
    cr_expect(fabs(gs - w) <= tol, "%s general sum %.17g vs %.17g", nm, gs, w);
    cr_expect(fabs(r[0][1] - w / 100003) <= tol / 100003, "%s mean %.17g", nm, r[0][1]);
    cr_expect(fabs(gm - r[0][1]) <= tol / 100003, "%s: general mean %.17g, dense %.17g", nm, gm,
              r[0][1]);
  }
  kn_set_num_threads(1);
  kn_generator_free(g);
}

Test(loss, dtype_promotion_and_meta) {
  kn_tensor *x = rt_from(KN_FLOAT32, KN_SHAPE(2), (double[]){1, 2});
  kn_tensor *t = rt_from(KN_FLOAT64, KN_SHAPE(2), (double[]){0, 0});
  kn_tensor *r = kn_mse_loss(x, t, KN_REDUCTION_MEAN);
  cr_assert_eq(kn_tensor_dtype(r), KN_FLOAT64);
  rt_expect(r, (double[]){2.5}, 0);
  kn_tensor *ti = rt_from(KN_INT64, KN_SHAPE(2), (double[]){0, 0});
  cr_assert_eq(kn_tensor_dtype(kn_mse_loss(x, ti, KN_REDUCTION_SUM)), KN_FLOAT32);
  kn_tensor *m = kn_empty_meta(KN_SHAPE(8, 10), KN_FLOAT32);
  kn_tensor *mt = kn_empty_meta(KN_SHAPE(8), KN_INT64);
  kn_tensor *l = kn_nll_loss(m, mt, NULL, KN_REDUCTION_NONE, -100);
  cr_assert_eq(kn_tensor_device(l), KN_META);
  cr_assert_eq(kn_ndim(l), 1);
  cr_assert_eq(kn_size(l, 0), 8);
  kn_tensor *ce = kn_cross_entropy(m, mt, NULL, KN_REDUCTION_MEAN, -100, 0);
  cr_assert_not_null(ce, "%s", kn_last_error());
  cr_assert_eq(kn_ndim(ce), 0);
  cr_assert_eq(kn_tensor_device(ce), KN_META);
  kn_tensor *ms = kn_mse_loss(m, kn_empty_meta(KN_SHAPE(10), KN_FLOAT32), KN_REDUCTION_NONE);
  cr_assert_eq(kn_size(ms, 0), 8);
  cr_assert_eq(kn_size(ms, 1), 10);
}

Test(loss, errors_match_torch) {
  kn_tensor *lp = rt_arange(KN_FLOAT32, KN_SHAPE(2, 3));
  kn_tensor *bad = rt_from(KN_INT64, KN_SHAPE(2), (double[]){0, 5});
  cr_assert_null(kn_nll_loss(lp, bad, NULL, KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "Target 5 is out of bounds.");
  cr_assert_eq(kn_last_status(), KN_ERANGE);
  kn_tensor *neg = rt_from(KN_INT64, KN_SHAPE(2), (double[]){0, -5});
  cr_assert_null(kn_cross_entropy(lp, neg, NULL, KN_REDUCTION_SUM, -100, 0));
  cr_assert_str_eq(kn_last_error(), "Target -5 is out of bounds.");
  kn_tensor *t3 = rt_from(KN_INT64, KN_SHAPE(3), (double[]){0, 1, 2});
  cr_assert_null(kn_nll_loss(lp, t3, NULL, KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "Expected input batch_size (2) to match target batch_size (3).");
  kn_tensor *tf = rt_from(KN_FLOAT32, KN_SHAPE(2), (double[]){0, 1});
  cr_assert_null(kn_nll_loss(lp, tf, NULL, KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "expected scalar type Long but found Float");
  kn_tensor *ok = rt_from(KN_INT64, KN_SHAPE(2), (double[]){0, 1});
  kn_tensor *w4 = kn_ones(KN_SHAPE(4), KN_FLOAT32);
  cr_assert_null(kn_nll_loss(lp, ok, w4, KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "weight tensor should be defined either for all 3 classes or "
                                    "no classes but got weight tensor of shape: [4]");
  kn_tensor *w3d = kn_ones(KN_SHAPE(3), KN_FLOAT64);
  cr_assert_null(kn_nll_loss(lp, ok, w3d, KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "expected scalar type Float but found Double");
  kn_tensor *v3 = rt_arange(KN_FLOAT32, KN_SHAPE(3));
  cr_assert_null(kn_nll_loss(v3, rt_from(KN_INT64, KN_SHAPE(1), (double[]){1}), NULL,
                             KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "size mismatch (got input: [3], target: [1])");
  kn_tensor *sp = kn_zeros(KN_SHAPE(2, 3, 4), KN_FLOAT32);
  cr_assert_null(kn_nll_loss(sp, kn_zeros(KN_SHAPE(2, 5), KN_INT64), NULL, KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "Expected target size [2, 4], got [2, 5]");
  cr_assert_null(kn_nll_loss(kn_zeros(0, NULL, KN_FLOAT32), ok, NULL, KN_REDUCTION_MEAN, -100));
  cr_assert_str_eq(kn_last_error(), "Expected 1 or more dimensions (got 0)");
  cr_assert_null(kn_nll_loss(lp, ok, NULL, (kn_reduction)7, -100));
  cr_assert(strstr(kn_last_error(), "7 is not a valid value for reduction") != NULL);
  /* mse: the seed's shape error names both shapes */
  kn_tensor *a = kn_zeros(KN_SHAPE(1000, 1000), KN_FLOAT32);
  kn_tensor *b = kn_zeros(KN_SHAPE(10, 10), KN_FLOAT32);
  cr_assert_null(kn_mse_loss(a, b, KN_REDUCTION_MEAN));
  cr_assert_eq(kn_last_status(), KN_ESHAPE);
  cr_assert(strstr(kn_last_error(), "The size of tensor a (1000) must match the size of tensor b "
                                    "(10) at non-singleton dimension 1") != NULL, "%s",
            kn_last_error());
  cr_assert(strstr(kn_last_error(), "[1000, 1000]") && strstr(kn_last_error(), "[10, 10]"));
  /* binary_cross_entropy */
  kn_tensor *p = rt_from(KN_FLOAT32, KN_SHAPE(2, 3), (double[]){0.1, 0.2, 0.3, 0.4, 1.5, 0.6});
  kn_tensor *q = kn_ones(KN_SHAPE(2, 3), KN_FLOAT32);
  cr_assert_null(kn_binary_cross_entropy(p, q, NULL, KN_REDUCTION_MEAN));
  cr_assert_str_eq(kn_last_error(), "all elements of input should be between 0 and 1");
  cr_assert_null(kn_binary_cross_entropy(p, kn_ones(KN_SHAPE(3, 3), KN_FLOAT32), NULL,
                                         KN_REDUCTION_MEAN));
  cr_assert_str_eq(kn_last_error(), "Using a target size (torch.Size([3, 3])) that is different "
                   "to the input size (torch.Size([2, 3])) is deprecated. Please ensure they have "
                   "the same size.");
  cr_assert_null(kn_binary_cross_entropy(p, kn_ones(KN_SHAPE(2, 3), KN_FLOAT64), NULL,
                                         KN_REDUCTION_MEAN));
  cr_assert_str_eq(kn_last_error(), "Found dtype Double but expected Float");
  cr_assert_null(kn_binary_cross_entropy(p, q, kn_ones(KN_SHAPE(4), KN_FLOAT32), KN_REDUCTION_MEAN));
  cr_assert(strstr(kn_last_error(), "The size of tensor a (3) must match the size of tensor b (4) "
                                    "at non-singleton dimension 1") != NULL, "%s", kn_last_error());
  cr_assert_null(kn_cross_entropy(lp, ok, NULL, KN_REDUCTION_MEAN, -100, 1.5));
  cr_assert(strstr(kn_last_error(), "label_smoothing must be between 0.0 and 1.0") != NULL);
}

Test(loss, ignored_targets_and_empty_batches) {
  kn_tensor *lp = rt_arange(KN_FLOAT32, KN_SHAPE(2, 3));
  kn_tensor *ign = rt_from(KN_INT64, KN_SHAPE(2), (double[]){-100, -100});
  double v;
  cr_assert_eq(kn_item_double(kn_nll_loss(lp, ign, NULL, KN_REDUCTION_MEAN, -100), &v), KN_OK);
  cr_assert(isnan(v)); /* 0 / 0 total weight, as torch */
  rt_expect(kn_nll_loss(lp, ign, NULL, KN_REDUCTION_NONE, -100), (double[]){0, 0}, 0);
  /* an ignore_index out of [0, C) but equal to the target is not an error */
  kn_tensor *t7 = rt_from(KN_INT64, KN_SHAPE(2), (double[]){7, 1});
  rt_expect(kn_nll_loss(lp, t7, NULL, KN_REDUCTION_SUM, 7), (double[]){-4}, 0);
  kn_tensor *e = kn_zeros(KN_SHAPE(0, 3), KN_FLOAT32);
  kn_tensor *et = kn_zeros(KN_SHAPE(0), KN_INT64);
  kn_tensor *r = kn_nll_loss(e, et, NULL, KN_REDUCTION_NONE, -100);
  cr_assert_eq(kn_numel(r), 0);
  cr_assert_eq(kn_item_double(kn_nll_loss(e, et, NULL, KN_REDUCTION_SUM, -100), &v), KN_OK);
  cr_assert_eq(v, 0);
}

Test(loss, results_without_an_open_scope_are_owned_and_nothing_leaks) {
  kn_scope_end(); /* no scope: every result is the caller's reference */
  int64_t before = kn_live_tensors();
  kn_tensor *x = kn_zeros(KN_SHAPE(2, 3), KN_FLOAT32);
  kn_tensor *t = kn_zeros(KN_SHAPE(2), KN_INT64);
  kn_tensor *l = kn_nll_loss(x, t, NULL, KN_REDUCTION_SUM, -100);
  kn_tensor *ce = kn_cross_entropy(x, t, NULL, KN_REDUCTION_MEAN, -100, 0.1);
  kn_tensor *l1 = kn_l1_loss(x, x, KN_REDUCTION_SUM);
  double v;
  cr_assert_eq(kn_item_double(l, &v), KN_OK);
  cr_assert_eq(v, 0);
  cr_assert_eq(kn_item_double(ce, &v), KN_OK);
  cr_assert_float_eq(v, log(3.0), 1e-6); /* uniform logits: log C whatever the smoothing */
  cr_assert_eq(kn_item_double(l1, &v), KN_OK);
  cr_assert_eq(v, 0);
  kn_tensor *t9 = kn_full(KN_SHAPE(2), kn_int(9), KN_INT64);
  cr_assert_null(kn_nll_loss(x, t9, NULL, KN_REDUCTION_SUM, -100));
  cr_assert_null(kn_cross_entropy(x, t9, NULL, KN_REDUCTION_SUM, -100, 0.3));
  cr_assert_str_eq(kn_last_error(), "Target 9 is out of bounds.");
  kn_release(t9);
  kn_release(l);
  kn_release(ce);
  kn_release(l1);
  kn_release(x);
  kn_release(t);
  cr_assert_eq(kn_live_tensors(), before);
  kn_scope_begin();
}
