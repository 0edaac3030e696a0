/*
** test_autograd_slices.c: gradients of select, narrow and slice, which the
** engine adds into one buffer per input instead of a zero tensor per use
** (autograd/grad_accum.c). Expectations come from the forward views alone:
** the same views of a tensor holding each element's flat index say where
** each gradient element lands (an independent scatter), and from finite
** differences (gradcheck). A storage byte counter shows that 64 selects of
** one tensor no longer make 64 full-size buffers.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/gradcheck.h"
#include "support/leakcheck.h"
#include "tensor/tensor.h"

TestSuite(slices, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

/* The views taken of x (or of the flat-index tensor): several dims, a
** repeated select of one index, a negative index, a strided slice, a select
** of a narrow, a narrow of a select. */
#define NVIEWS 8
static kn_tensor *view_k(kn_tensor *x, int k) {
  switch (k) {
  case 0: return kn_select(x, 0, 1);
  case 1: return kn_select(x, 0, 1); /* the same index again */
  case 2: return kn_select(x, 2, -1);
  case 3: return kn_narrow(x, 1, 1, 3);
  case 4: return kn_slice(x, 2, 0, 6, 2);
  case 5: return kn_select(kn_narrow(x, 0, 1, 2), 1, 4);
  case 6: return kn_narrow(kn_select(x, 1, 0), 1, 2, 3);
  default: return kn_slice(x, 0, -2, KN_SLICE_END, 1);
  }
}

static double *doubles_of(kn_tensor *t) {
  kn_tensor *c = kn_contiguous(kn_to(t, KN_FLOAT64));
  cr_assert_not_null(c, "%s", kn_last_error());
  return kn_data(c);
}

/* loss = sum_k sum(view_k(x) * w_k) + sum(x * x) + 0.5 * sum(x):
** d loss / dx = scatter of every w_k + 2x + 0.5, built from the views of
** the flat-index tensor. */
static void check_views(kn_dtype dt, double tol) {
  const int64_t sz[3] = {4, 5, 6};
  const int64_t n = 4 * 5 * 6;
  kn_generator *gen = kn_generator_new(7);
  kn_tensor *x = kn_randn(3, sz, gen, dt);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *idx = kn_reshape(kn_arange_dtype(kn_int(0), kn_int(n), kn_int(1), KN_FLOAT64), 3, sz);
  double *want = calloc((size_t)n, sizeof *want);
  const double *xv = doubles_of(x);
  for (int64_t i = 0; i < n; i++) want[i] = 2 * xv[i] + 0.5;
  kn_tensor *loss = kn_add(kn_sum(kn_mul(x, x)), kn_mul_scalar(kn_sum(x), kn_float(0.5)));
  for (int k = 0; k < NVIEWS; k++) {
    kn_tensor *v = view_k(x, k);
    kn_tensor *w = kn_randn(kn_ndim(v), kn_sizes(v), gen, dt);
    loss = kn_add(loss, kn_sum(kn_mul(v, w)));
    const double *pos = doubles_of(view_k(idx, k)), *wv = doubles_of(w);
    for (int64_t j = 0; j < kn_numel(w); j++) want[(int64_t)pos[j]] += wv[j];
  }
  cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(kn_grad(x)), dt);
  const double *got = doubles_of(kn_grad(x));
  for (int64_t i = 0; i < n; i++)
    cr_assert(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])),
              "element %lld: got %.17g, want %.17g", (long long)i, got[i], want[i]);
  free(want);
  kn_generator_free(gen);
}

Test(slices, views_on_several_dims_match_the_scatter_float64) { check_views(KN_FLOAT64, 1e-14); }
Test(slices, views_on_several_dims_match_the_scatter_float32) { check_views(KN_FLOAT32, 1e-6); }

/* Finite differences, first and second order (create_graph takes the
** derivative rule's path), through selects mixed with another use. */
static kn_tensor *f_sel(kn_tensor *const *in, int n, void *ud) {
  (void)n, (void)ud;
  kn_tensor *x = in[0];
  kn_tensor *a = kn_mul(kn_select(x, 1, 2), kn_select(x, 1, 2));
  kn_tensor *b = kn_tanh(kn_narrow(x, 0, 1, 2));
  return kn_add(kn_sum(kn_mul(a, kn_select(x, 1, 0))), kn_add(kn_sum(b), kn_sum(kn_exp(x))));
}

Test(slices, gradcheck_and_gradgradcheck) {
  kn_generator *gen = kn_generator_new(3);
  kn_tensor *x = kn_randn(KN_SHAPE(3, 4), gen, KN_FLOAT64);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  char why[512] = "";
  cr_assert(kn_gradcheck(f_sel, &x, 1, NULL, why, sizeof why), "%s", why);
  cr_assert(kn_gradgradcheck(f_sel, &x, 1, NULL, why, sizeof why), "%s", why);
  kn_generator_free(gen);
}

/* A gradient the caller handed in, or one the caller still holds, is never
** written in place; repeated grad calls on a retained graph agree. */
Test(slices, caller_gradients_stay_untouched) {
  kn_tensor *x = kn_ones(KN_SHAPE(3, 2), KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *y = kn_mul_scalar(x, kn_float(2)); /* non-leaf: its buffer is the engine's */
  kn_tensor *outs[3] = {y, kn_select(y, 0, 1), kn_select(y, 0, 1)};
  kn_tensor *g0 = kn_full(KN_SHAPE(3, 2), kn_float(1), KN_FLOAT32);
  kn_tensor *g1 = kn_full(KN_SHAPE(2), kn_float(10), KN_FLOAT32);
  kn_tensor *gos[3] = {g0, g1, g1};
  kn_tensor *gx[2];
  for (int rep = 0; rep < 2; rep++) {
    cr_assert_eq(kn_autograd_grad(outs, 3, &x, 1, gos, true, false, false, &gx[rep]), KN_OK,
                 "%s", kn_last_error());
  }
  const float *g0v = kn_data(g0), *g1v = kn_data(g1);
  for (int i = 0; i < 6; i++) cr_assert_eq(g0v[i], 1.0f);
  for (int i = 0; i < 2; i++) cr_assert_eq(g1v[i], 10.0f);
  for (int rep = 0; rep < 2; rep++) {
    const float *v = kn_data(kn_contiguous(gx[rep]));
    for (int i = 0; i < 6; i++) /* 2 * (1 + 20 on row 1) */
      cr_assert_eq(v[i], i / 2 == 1 ? 42.0f : 2.0f, "rep %d element %d: %g", rep, i, v[i]);
  }
}

/* An LSTM-like loop: 64 selects of one [64, 8, 128] tensor. The rule path
** made a full-size zero tensor per select and a full-size sum per step (128
** full sizes); the engine now makes one buffer. */
Test(slices, one_buffer_for_many_selects) {
  const int T = 64;
  const int64_t sz[3] = {T, 8, 128};
  const int64_t full = T * 8 * 128 * (int64_t)sizeof(float);
  kn_tensor *x = kn_zeros(3, sz, KN_FLOAT32);
  cr_assert_eq(kn_set_requires_grad(x, true), KN_OK);
  kn_tensor *h = kn_mul_scalar(x, kn_float(1)); /* a non-leaf, as the projected input */
  kn_tensor *outs[64], *gos[64];
  for (int t = 0; t < T; t++) {
    outs[t] = kn_select(h, 0, t);
    gos[t] = kn_full(KN_SHAPE(8, 128), kn_float((double)t), KN_FLOAT32);
  }
  int64_t before = kn__storage_bytes_made();
  kn_tensor *gx;
  cr_assert_eq(kn_autograd_grad(outs, T, &h, 1, gos, false, false, false, &gx), KN_OK, "%s",
               kn_last_error());
  int64_t made = kn__storage_bytes_made() - before;
  cr_assert(made <= full + 4096, "backward made %lld bytes of storage; one buffer is %lld",
            (long long)made, (long long)full);
  const float *v = kn_data(kn_contiguous(gx));
  for (int64_t i = 0; i < kn_numel(gx); i++)
    cr_assert_eq(v[i], (float)(i / (8 * 128)), "element %lld: %g", (long long)i, v[i]);
}
