/*
** tests/cuda/gpu_eager.c: eager ops on CUDA tensors (kn_to_device, the
** dispatcher's device layer) against the same ops on the CPU: matrix
** products through cuBLAS (mm, bmm, matmul, addmm, linear and linear's
** backward), strided copies and dtype conversions and fills through the
** NVRTC kernels, printing, and the mixed-device error. See gpu_check.h.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "kiln/kiln.h"

static kn_tensor *dev(kn_tensor *t) {
  kn_tensor *d = NULL;
  return kn_to_device(t, KN_CUDA, &d) == KN_OK ? d : NULL;
}

/* The worst |got - want| / (atol + rtol |want|) of a CUDA result against
** the CPU's (INFINITY when got is NULL or the shapes differ). */
static double worst(kn_tensor *got, kn_tensor *want, double atol, double rtol) {
  kn_tensor *h = NULL;
  if (!got || !want || kn_to_device(got, KN_CPU, &h) != KN_OK || kn_numel(h) != kn_numel(want) ||
      kn_ndim(h) != kn_ndim(want))
    return INFINITY;
  kn_tensor *g = kn_contiguous(kn_to(h, KN_FLOAT64)), *w = kn_contiguous(kn_to(want, KN_FLOAT64));
  const double *a = kn_data(g), *b = kn_data(w);
  double e = 0;
  for (int64_t i = 0; i < kn_numel(g); i++) {
    bool same = a[i] == b[i] || (isnan(a[i]) && isnan(b[i]));
    double r = same ? 0 : atol + rtol == 0 ? INFINITY : fabs(a[i] - b[i]) / (atol + rtol * fabs(b[i]));
    if (!(r <= e)) e = r;
  }
  return e;
}

static void expect_close(const char *name, kn_tensor *got, kn_tensor *want, double atol,
                         double rtol) {
  double e = worst(got, want, atol, rtol);
  CHECK(name, e <= 1, "%s worst error %.3g of the tolerance", got ? "" : kn_last_error(), e);
}

static kn_tensor *randn(int nd, const int64_t *sz, kn_dtype dt) {
  return kn_to(kn_randn(nd, sz, NULL, KN_FLOAT32), dt);
}

static void check_products(void) {
  kn_tensor *a = randn(2, (int64_t[]){64, 48}, KN_FLOAT32);
  kn_tensor *b = randn(2, (int64_t[]){48, 40}, KN_FLOAT32);
  kn_tensor *da = dev(a), *db = dev(b);
  expect_close("eager_mm_f32", kn_mm(da, db), kn_mm(a, b), 1e-4, 1e-5);
  kn_tensor *at = kn_contiguous(kn_t(a));
  expect_close("eager_mm_transposed", kn_mm(kn_t(dev(at)), db), kn_mm(a, b), 1e-4, 1e-5);
  /* a step-2 slice in both dims: copied contiguous by the NVRTC kernel first */
  kn_tensor *s = kn_slice(kn_slice(a, 0, 0, 64, 2), 1, 0, 48, 2);
  kn_tensor *ds = kn_slice(kn_slice(da, 0, 0, 64, 2), 1, 0, 48, 2);
  kn_tensor *b2 = randn(2, (int64_t[]){24, 8}, KN_FLOAT32);
  expect_close("eager_mm_strided_operand", kn_mm(ds, dev(b2)), kn_mm(s, b2), 1e-4, 1e-5);
  kn_tensor *x = randn(3, (int64_t[]){5, 17, 33}, KN_FLOAT64);
  kn_tensor *y = randn(3, (int64_t[]){5, 33, 9}, KN_FLOAT64);
  expect_close("eager_bmm_f64", kn_bmm(dev(x), dev(y)), kn_bmm(x, y), 1e-10, 1e-10);
  kn_tensor *w = randn(2, (int64_t[]){33, 12}, KN_FLOAT64);
  expect_close("eager_matmul_3d_2d", kn_matmul(dev(x), dev(w)), kn_matmul(x, w), 1e-10, 1e-10);
  kn_tensor *bias = randn(1, (int64_t[]){40}, KN_FLOAT32);
  expect_close("eager_addmm_alpha_beta",
               kn_addmm(dev(bias), da, db, kn_float(0.5), kn_float(2.0)),
               kn_addmm(bias, a, b, kn_float(0.5), kn_float(2.0)), 1e-4, 1e-5);
}

static void check_linear(kn_dtype dt, const char *name, double atol, double rtol) {
  kn_tensor *x = randn(3, (int64_t[]){4, 7, 32}, dt);
  kn_tensor *w = randn(2, (int64_t[]){24, 32}, dt);
  kn_tensor *b = randn(1, (int64_t[]){24}, dt);
  expect_close(name, kn_linear(dev(x), dev(w), dev(b)), kn_linear(x, w, b), atol, rtol);
}

/* linear without bias, backward on both devices from the same gradient. */
static void check_linear_backward(void) {
  kn_tensor *x = randn(2, (int64_t[]){16, 32}, KN_FLOAT32);
  kn_tensor *w = randn(2, (int64_t[]){8, 32}, KN_FLOAT32);
  kn_tensor *g = randn(2, (int64_t[]){16, 8}, KN_FLOAT32);
  kn_tensor *dx = dev(x), *dw = dev(w);
  kn_set_requires_grad(x, true);
  kn_set_requires_grad(w, true);
  kn_set_requires_grad(dx, true);
  kn_set_requires_grad(dw, true);
  kn_status sc = kn_backward(kn_linear(x, w, NULL), g);
  kn_status sd = kn_backward(kn_linear(dx, dw, NULL), dev(g));
  CHECK("eager_linear_backward_runs", sc == KN_OK && sd == KN_OK, "%s", kn_last_error());
  expect_close("eager_linear_backward_weight", kn_grad(dw), kn_grad(w), 1e-4, 1e-5);
  expect_close("eager_linear_backward_input", kn_grad(dx), kn_grad(x), 1e-4, 1e-5);
}

static void check_copies(void) {
  kn_tensor *a = randn(2, (int64_t[]){37, 53}, KN_FLOAT32);
  kn_tensor *da = dev(a);
  expect_close("copy_transpose_contiguous", kn_contiguous(kn_t(da)), kn_contiguous(kn_t(a)), 0, 0.0);
  kn_dtype to[] = {KN_BFLOAT16, KN_FLOAT16, KN_FLOAT64, KN_INT32, KN_BOOL};
  const char *names[] = {"copy_f32_to_bf16", "copy_f32_to_f16", "copy_f32_to_f64",
                         "copy_f32_to_int32", "copy_f32_to_bool"};
  kn_tensor *big = kn_mul(a, kn_scalar_tensor(kn_float(100), KN_FLOAT32));
  kn_tensor *dbig = dev(big);
  for (int i = 0; i < 5; i++) expect_close(names[i], kn_to(dbig, to[i]), kn_to(big, to[i]), 0, 0);
  kn_tensor *h = kn_to(big, KN_FLOAT16);
  expect_close("copy_f16_to_f32_strided", kn_to(kn_t(dev(h)), KN_FLOAT32),
               kn_to(kn_t(h), KN_FLOAT32), 0, 0);
  int64_t iv[6] = {1, -2, 3000000000LL, 4, (1LL << 53) + 1, -7};
  kn_tensor *ints = kn_from_ints(iv, 1, (int64_t[]){6});
  expect_close("copy_int64_to_f32", kn_to(dev(ints), KN_FLOAT32), kn_to(ints, KN_FLOAT32), 0, 0);
  /* broadcast copy_ on the device: a row into every row of a transposed view */
  kn_tensor *row = randn(1, (int64_t[]){37}, KN_FLOAT32);
  kn_tensor *dst = kn_zeros(2, (int64_t[]){53, 37}, KN_FLOAT32);
  kn_tensor *ddst = dev(kn_zeros(2, (int64_t[]){37, 53}, KN_FLOAT32));
  kn_status s = kn_copy_(kn_t(ddst), dev(row));
  kn_copy_(dst, row);
  CHECK("copy_broadcast_device", s == KN_OK, "%s", kn_last_error());
  expect_close("copy_broadcast_values", kn_t(ddst), dst, 0, 0);
}

static void check_fills(void) {
  kn_tensor *a = kn_zeros(2, (int64_t[]){30, 41}, KN_FLOAT32);
  kn_tensor *da = dev(a);
  kn_status s = kn_fill_(kn_slice(kn_t(da), 0, 1, 41, 3), kn_float(2.5));
  kn_fill_(kn_slice(kn_t(a), 0, 1, 41, 3), kn_float(2.5));
  CHECK("fill_strided", s == KN_OK, "%s", kn_last_error());
  expect_close("fill_strided_values", da, a, 0, 0);
  kn_tensor *i = dev(kn_zeros(1, (int64_t[]){1000}, KN_INT64));
  s = kn_fill_(i, kn_int((1LL << 62) + 3));
  int64_t v = 0;
  if (s == KN_OK) s = kn_item_int(kn_select(i, 0, 999), &v);
  CHECK("fill_int64_exact", s == KN_OK && v == (1LL << 62) + 3, "%s got %lld", kn_last_error(),
        (long long)v);
  s = kn_zero_(kn_select(da, 1, 3));
  kn_zero_(kn_select(a, 1, 3));
  CHECK("zero_column", s == KN_OK && worst(da, a, 0, 0) <= 1, "%s", kn_last_error());
}

static void check_misc(void) {
  kn_tensor *d = dev(kn_from_floats((float[]){1, 2.5f}, 1, (int64_t[]){2}));
  char *s = d ? kn_tensor_to_string(d) : NULL;
  CHECK("print_cuda_tensor", s && !strcmp(s, "tensor([1.0000, 2.5000], device='cuda:0')"), "%s",
        s ? s : kn_last_error());
  free(s);
  kn_tensor *c = kn_ones(2, (int64_t[]){2, 2}, KN_FLOAT32);
  kn_tensor *r = kn_mm(dev(c), c);
  CHECK("mixed_device_error",
        !r && strstr(kn_last_error(), "Expected all tensors to be on the same device, but found at "
                                      "least two devices, cuda:0 and cpu!"),
        "%s", kn_last_error());
}

void kn__gpu_check_eager(void) {
  kn_manual_seed(11);
  kn_scope_begin();
  check_products();
  check_linear(KN_FLOAT32, "eager_linear_f32", 1e-4, 1e-5);
  check_linear(KN_BFLOAT16, "eager_linear_bf16", 1.5e-1, 2e-2);
  check_linear_backward();
  check_copies();
  check_fills();
  check_misc();
  kn_scope_end();
}
