/*
** test_cuda_train.c: what training on the GPU needs, without a GPU: the
** fake driver runs the generated kernels on the host and answers for cuBLAS
** too (tests/support/fakecuda*.c, fakecublas.c). kn_module_to_device,
** nll_loss's device-side target check (reported at the next
** synchronisation, then cleared), in-place ops, cat and stack on the device,
** optimizer state on the parameters' device, and the KILN_CUDA_PROFILE
** report. Every value is compared
** with the same op on the CPU. (tests/cuda/gpu_train.c trains whole models
** this way: ctest gpu_train_fake.)
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda.h"
#include "inductor_util.h"
#include "cuda_fake_util.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"

TestSuite(cuda_train, .init = cuda_fake_setup, .fini = cuda_fake_teardown, .timeout = 300);

static void expect_close(kn_tensor *got_dev, kn_tensor *want, const char *what) {
  cr_assert_not_null(got_dev, "%s: %s", what, kn_last_error());
  cr_expect_eq(kn_tensor_device(got_dev), KN_CUDA, "%s", what);
  cr_expect(ind_close(dev(got_dev, KN_CPU), want, 1e-6, 1e-6, what), "%s", what);
}

static kn_status count_cuda(void *ud, const char *path, kn_tensor *t) {
  (void)path;
  int *n = ud;
  if (kn_tensor_device(t) == KN_CUDA && kn_is_leaf(t)) n[0]++;
  if (kn_requires_grad(t)) n[1]++;
  n[2]++;
  return KN_OK;
}

Test(cuda_train, module_to_device_moves_every_tensor) {
  kn_generator *g = kn_generator_new(1);
  kn_module *m = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(3, 4, true, g),
                                                      kn_nn_batchnorm1d(4, 1e-5, 0.1, true, true)});
  kn_tensor *w0 = kn_retain(kn_module_get(m, "0.weight"));
  cr_assert_eq(kn_module_to_device(m, KN_CUDA), KN_OK, "%s", kn_last_error());
  int params[3] = {0}, bufs[3] = {0};
  kn_nn_named_tensors(m, true, count_cuda, params);
  kn_nn_named_tensors(m, false, count_cuda, bufs);
  cr_expect_eq(params[0], params[2], "every parameter on the device, a leaf");
  cr_expect_eq(params[1], params[2], "every parameter still requires grad");
  cr_expect_eq(bufs[0], bufs[2], "every buffer on the device");
  cr_expect_eq(bufs[1], 0, "buffers require no grad");
  kn_scope_begin();
  kn_tensor *w = kn_module_get(m, "0.weight");
  cr_expect(ind_close(dev(w, KN_CPU), w0, 0, 0, "the values travel"));
  cr_expect_eq(kn_tensor_device(w0), KN_CPU, "the caller's old reference keeps the old data");
  /* already there: nothing changes */
  cr_assert_eq(kn_module_to_device(m, KN_CUDA), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_module_get(m, "0.weight"), w);
  cr_expect_eq(kn_module_to_device(m, KN_META), KN_EINVAL);
  cr_expect(strstr(kn_last_error(), "expected the device KN_CPU or KN_CUDA"), "%s",
            kn_last_error());
  cr_expect_eq(kn_module_to_device(NULL, KN_CUDA), KN_EINVAL);
  /* and back */
  cr_assert_eq(kn_module_to_device(m, KN_CPU), KN_OK, "%s", kn_last_error());
  cr_expect(ind_close(kn_module_get(m, "0.weight"), w0, 0, 0, "the way back"));
  kn_scope_end();
  kn_release(w0);
  kn_module_free(m);
  kn_generator_free(g);
}

/* cross_entropy over [4, 10] logits with targets t (CPU int64). */
static kn_tensor *ce(kn_tensor *x, const int64_t *t) {
  kn_tensor *y = kn_from_ints(t, 1, (int64_t[]){4});
  if (kn_tensor_device(x) == KN_CUDA) y = dev(y, KN_CUDA);
  return kn_cross_entropy(x, y, NULL, KN_REDUCTION_MEAN, -100, 0.0);
}

Test(cuda_train, a_target_out_of_bounds_fails_at_the_next_synchronisation) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){4, 10}, NULL, KN_FLOAT32), *xd = dev(x, KN_CUDA);
  const int64_t good[4] = {0, 9, -100, 3}, bad[4] = {0, 12, -100, 3};
  expect_close(ce(xd, good), ce(x, good), "cross_entropy with an ignored row");
  cr_expect_eq(kn_cuda_synchronize(), KN_OK, "%s", kn_last_error());
  /* queued: the call itself cannot know; the next synchronisation says */
  kn_tensor *l = ce(xd, bad);
  cr_assert_not_null(l, "%s", kn_last_error());
  cr_expect_eq(kn_cuda_synchronize(), KN_ERANGE);
  cr_expect(strstr(kn_last_error(), "Target 12 is out of bounds."), "%s", kn_last_error());
  cr_expect(strstr(kn_last_error(), "device-side check"), "%s", kn_last_error());
  cr_expect_eq(kn_cuda_synchronize(), KN_OK, "reported once: %s", kn_last_error());
  /* a copy to the host is a synchronisation too */
  l = ce(xd, (const int64_t[]){-1, 0, 0, 0});
  double v = 0;
  cr_expect_eq(kn_item_double(l, &v), KN_ERANGE);
  cr_expect(strstr(kn_last_error(), "Target -1 is out of bounds."), "%s", kn_last_error());
  /* the CPU says so at once, with the same words */
  cr_expect_null(ce(x, bad));
  cr_expect(strstr(kn_last_error(), "Target 12 is out of bounds."), "%s", kn_last_error());
  kn_scope_end();
}

Test(cuda_train, inplace_ops_on_the_device) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){3, 5}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(1, (int64_t[]){5}, NULL, KN_FLOAT32);
  kn_tensor *ad = dev(a, KN_CUDA), *bd = dev(b, KN_CUDA);
  cr_assert_eq(kn_add_(ad, bd), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_mul_scalar_(ad, kn_float(3)), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_add_(a, b), KN_OK);
  cr_assert_eq(kn_mul_scalar_(a, kn_float(3)), KN_OK);
  expect_close(ad, a, "add_ then mul_ (broadcast)");
  /* a view written in place writes its base */
  kn_tensor *row = kn_select(ad, 0, 1);
  cr_assert_eq(kn_sub_(row, kn_select(bd, 0, 0)), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_sub_(kn_select(a, 0, 1), kn_select(b, 0, 0)), KN_OK);
  expect_close(ad, a, "sub_ through a view");
  /* the result is cast to self's dtype, as copy_ casts */
  kn_tensor *i = kn_from_ints((const int64_t[]){1, 2, 3}, 1, (int64_t[]){3});
  kn_tensor *id = dev(i, KN_CUDA);
  cr_assert_eq(kn_mul_scalar_(id, kn_int(4)), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_mul_scalar_(i, kn_int(4)), KN_OK);
  expect_close(id, i, "int64 mul_");
  kn_scope_end();
}

Test(cuda_train, cat_and_stack_on_the_device) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){2, 3}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(2, (int64_t[]){4, 3}, NULL, KN_FLOAT32);
  kn_tensor *ad = dev(a, KN_CUDA), *bd = dev(b, KN_CUDA);
  expect_close(kn_cat((kn_tensor *[]){ad, bd}, 2, 0), kn_cat((kn_tensor *[]){a, b}, 2, 0), "cat");
  kn_tensor *at = kn_t(ad), *bt = kn_t(bd); /* strided inputs, along dim 1 */
  expect_close(kn_cat((kn_tensor *[]){at, bt}, 2, 1),
               kn_cat((kn_tensor *[]){kn_t(a), kn_t(b)}, 2, 1), "cat of transposes");
  expect_close(kn_stack((kn_tensor *[]){ad, ad}, 2, 1), kn_stack((kn_tensor *[]){a, a}, 2, 1),
               "stack");
  kn_scope_end();
}

Test(cuda_train, optimizer_state_lives_on_the_parameters_device) {
  kn_scope_begin();
  kn_tensor *p = dev(kn_randn(1, (int64_t[]){6}, NULL, KN_FLOAT32), KN_CUDA);
  cr_assert_eq(kn_set_requires_grad(p, true), KN_OK);
  kn_optimizer *opt = kn_adam(&p, 1, &(kn_optim_options){.lr = 0.1});
  cr_assert_not_null(opt, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_device(kn_module_get(kn_optim_state(opt), "lr")), KN_CUDA);
  kn_tensor *h = dev(p, KN_CPU);
  kn_tensor *hp = kn_detach(kn_clone(h));
  cr_assert_eq(kn_set_requires_grad(hp, true), KN_OK);
  kn_optimizer *ho = kn_adam(&hp, 1, &(kn_optim_options){.lr = 0.1});
  for (int s = 0; s < 2; s++) {
    cr_assert_eq(kn_backward(kn_sum(kn_mul(p, p)), NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_optim_step(opt), KN_OK, "%s", kn_last_error());
    kn_optim_zero_grad(opt);
    cr_assert_eq(kn_backward(kn_sum(kn_mul(hp, hp)), NULL), KN_OK);
    cr_assert_eq(kn_optim_step(ho), KN_OK);
    kn_optim_zero_grad(ho);
  }
  cr_expect_eq(kn_tensor_device(kn_module_get(kn_optim_state(opt), "0.step")), KN_CUDA);
  cr_expect_eq(kn_tensor_device(kn_module_get(kn_optim_state(opt), "0.exp_avg")), KN_CUDA);
  expect_close(kn_detach(p), kn_detach(hp), "two Adam steps");
  kn_optim_free(opt);
  kn_optim_free(ho);
  kn_scope_end();
}

/* KILN_CUDA_PROFILE=1: each kernel by what it computes, each GEMM by its
** shape, with as many calls as were queued; an in-place op is one kernel. */
Test(cuda_train, the_profile_names_kernels_and_products) {
  setenv("KILN_CUDA_PROFILE", "1", 1); /* read once per process: this test's own */
  kn_scope_begin();
  kn_tensor *a = dev(kn_randn(2, (int64_t[]){4, 6}, NULL, KN_FLOAT32), KN_CUDA);
  kn_tensor *w = dev(kn_randn(2, (int64_t[]){3, 6}, NULL, KN_FLOAT32), KN_CUDA);
  for (int i = 0; i < 3; i++) cr_assert_not_null(kn_relu(kn_mm(a, kn_t(w))), "%s", kn_last_error());
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  cr_assert_eq(kn__cuda_prof_report(f, 30), KN_OK, "%s", kn_last_error());
  fclose(f);
  cr_expect(strstr(buf, "KILN_CUDA_PROFILE: 6 timed launches"), "%s", buf);
  cr_expect(strstr(buf, "      3 ") && strstr(buf, "cuBLAS float32 GEMM 4x3x6 B^T"), "%s", buf);
  /* one program serves every size of the pattern: its symbols are named */
  cr_expect(strstr(buf, "pointwise [s0, s1]: relu"), "%s", buf);
  free(buf);
  /* reported work is forgotten */
  f = open_memstream(&buf, &n);
  cr_assert_eq(kn__cuda_prof_report(f, 30), KN_OK);
  fclose(f);
  cr_expect(strstr(buf, "0 timed launches"), "%s", buf);
  free(buf);
  /* an in-place op on a contiguous tensor computes into it: one kernel, no copy */
  kn_tensor *b = dev(kn_randn(2, (int64_t[]){4, 6}, NULL, KN_FLOAT32), KN_CUDA);
  cr_assert_eq(kn_add_(a, b), KN_OK, "%s", kn_last_error());
  f = open_memstream(&buf, &n);
  cr_assert_eq(kn__cuda_prof_report(f, 30), KN_OK);
  fclose(f);
  cr_expect(strstr(buf, "1 timed launches") && strstr(buf, "pointwise [s0, s1]: add"), "%s", buf);
  free(buf);
  kn_scope_end();
}

/* Long rows (a loss's sum over every element) split into chunks of a block
** each, the last block folding them: sum and mean of one and of four rows,
** against the CPU, twice (the count resets for the next launch), and the
** same bits twice. */
Test(cuda_train, long_reductions_split_across_blocks) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){64, 1024}, NULL, KN_FLOAT32), *xd = dev(x, KN_CUDA);
  for (int rep = 0; rep < 2; rep++) {
    expect_close(kn_sum(xd), kn_sum(x), "sum of 65536");
    expect_close(kn_mean(xd), kn_mean(x), "mean of 65536");
  }
  kn_tensor *y = kn_randn(3, (int64_t[]){4, 128, 512}, NULL, KN_FLOAT32), *yd = dev(y, KN_CUDA);
  int64_t d12[2] = {1, 2};
  expect_close(kn_sum_dims(yd, d12, 2, false), kn_sum_dims(y, d12, 2, false), "4 rows of 65536");
  kn_tensor *a = dev(kn_sum(xd), KN_CPU), *b = dev(kn_sum(xd), KN_CPU);
  cr_expect(memcmp(kn_data(a), kn_data(b), sizeof(float)) == 0, "the same bits on every run");
  kn_scope_end();
}

/* A 0-dim host tensor joins an op on CUDA tensors as a scalar (PyTorch's
** rule); any other host tensor is the mixed-device error. */
Test(cuda_train, host_scalars_join_device_ops) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){3, 4}, NULL, KN_FLOAT32), *xd = dev(x, KN_CUDA);
  kn_tensor *two = kn_scalar_tensor(kn_float(2.5), KN_FLOAT32);
  expect_close(kn_mul(xd, two), kn_mul(x, two), "a host scalar times a CUDA tensor");
  expect_close(kn_sub(two, xd), kn_sub(two, x), "on either side");
  kn_tensor *i = kn_scalar_tensor(kn_int(3), KN_INT64);
  expect_close(kn_add(xd, i), kn_add(x, i), "an int64 scalar: float32 result, as on the CPU");
  cr_assert_eq(kn_add_(xd, two), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_add_(x, two), KN_OK);
  expect_close(xd, x, "in place");
  cr_expect_null(kn_mul(xd, kn_ones(1, (int64_t[]){4}, KN_FLOAT32)));
  cr_expect(strstr(kn_last_error(), "Expected all tensors to be on the same device"), "%s",
            kn_last_error());
  kn_scope_end();
}
