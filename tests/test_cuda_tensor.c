/*
** test_cuda_tensor.c: tensors on the KN_CUDA device without a GPU, on the
** fake driver (tests/support/fakecuda.c, host memory behind the driver API;
** it runs no kernels): kn_to_device both ways, storage freed back to the
** caching allocator, host reads (kn_get, kn_item_*, printing), kn_data's
** refusal, the dispatcher's device layer (PyTorch's mixed-device error, the
** device backend handler, the clear error of an op with no CUDA kernel: no
** CPU kernel ever sees device memory), and the errors without a driver.
** Values are compared with the host data they were copied from.
*/
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda.h"
#include "kiln/kiln.h"
#include "ops/cuda_ops.h"
#include "tensor/tensor.h"

static void use_fake(void) {
  setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1);
  /* deterministic: no cuBLAS or NVRTC, whatever this machine has */
  setenv("KILN_CUDA_CUBLAS", "/nonexistent/libcublas.so.13", 1);
  setenv("KILN_CUDA_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
}

TestSuite(cuda_tensor, .init = use_fake);

static kn_tensor *on_cuda(kn_tensor *t) {
  kn_tensor *d = NULL;
  cr_assert_eq(kn_to_device(t, KN_CUDA, &d), KN_OK, "%s", kn_last_error());
  return d;
}

static kn_tensor *on_host(kn_tensor *t) {
  kn_tensor *h = NULL;
  cr_assert_eq(kn_to_device(t, KN_CPU, &h), KN_OK, "%s", kn_last_error());
  return h;
}

Test(cuda_tensor, round_trip_keeps_values_and_dtype) {
  kn_scope_begin();
  double v[6] = {1.5, -2, 3.25, 4, -0.5, 1e300};
  kn_tensor *a = kn_from_doubles(v, 2, (int64_t[]){2, 3});
  kn_tensor *d = on_cuda(a);
  cr_expect_eq(kn_tensor_device(d), KN_CUDA);
  cr_expect_eq(kn_tensor_dtype(d), KN_FLOAT64);
  cr_expect_eq(kn_size(d, 0), 2);
  cr_expect_eq(kn_size(d, 1), 3);
  cr_expect_not(kn_same_storage(a, d));
  kn_tensor *h = on_host(d);
  cr_expect_eq(kn_tensor_device(h), KN_CPU);
  cr_expect(memcmp(kn_data(h), v, sizeof v) == 0);
  kn_scope_end();
}

Test(cuda_tensor, non_contiguous_sources_arrive_contiguous) {
  kn_scope_begin();
  float v[6] = {0, 1, 2, 3, 4, 5};
  kn_tensor *a = kn_from_floats(v, 2, (int64_t[]){2, 3});
  kn_tensor *d = on_cuda(kn_t(a)); /* 3 x 2: 0 3 / 1 4 / 2 5 */
  cr_expect(kn_is_contiguous(d));
  const float want[6] = {0, 3, 1, 4, 2, 5};
  cr_expect(memcmp(kn_data(on_host(d)), want, sizeof want) == 0);
  /* a transposed view of a device tensor comes back as the view reads */
  kn_tensor *h = on_host(kn_t(d));
  cr_expect(kn_is_contiguous(h));
  cr_expect(memcmp(kn_data(h), v, sizeof v) == 0);
  /* a slice with an offset */
  kn_tensor *row = on_host(kn_select(d, 0, 2));
  cr_expect_eq(((float *)kn_data(row))[0], 2);
  cr_expect_eq(((float *)kn_data(row))[1], 5);
  kn_scope_end();
}

Test(cuda_tensor, same_device_is_a_new_reference) {
  kn_scope_begin();
  kn_tensor *d = on_cuda(kn_ones(1, (int64_t[]){4}, KN_FLOAT32));
  kn_tensor *e = on_cuda(d);
  cr_expect_eq(e, d);
  kn_tensor *c = kn_ones(1, (int64_t[]){4}, KN_FLOAT32);
  cr_expect_eq(on_host(c), c);
  kn_scope_end();
}

Test(cuda_tensor, storage_returns_to_the_caching_allocator) {
  kn__cuda_memstats a, b, c;
  kn__cuda_memstats_get(&a);
  kn_tensor *t = kn_zeros(1, (int64_t[]){1000}, KN_FLOAT32), *d = NULL;
  cr_assert_eq(kn_to_device(t, KN_CUDA, &d), KN_OK, "%s", kn_last_error());
  kn__cuda_memstats_get(&b);
  cr_expect_eq(b.allocated - a.allocated, 4096);
  kn_release(d);
  kn__cuda_memstats_get(&c);
  cr_expect_eq(c.allocated, a.allocated);
  cr_expect_eq(c.reserved, b.reserved, "cached, not freed");
  cr_assert_eq(kn_to_device(t, KN_CUDA, &d), KN_OK);
  kn_cuda_memstats s;
  kn_cuda_memory_stats(&s);
  cr_expect_eq(s.n_driver_allocs, b.n_malloc, "the cached block served the second tensor");
  cr_expect_eq(s.allocated, b.allocated);
  kn_release(d);
  kn_release(t);
  cr_expect_eq(kn_cuda_empty_cache(), KN_OK);
  kn_cuda_memory_stats(&s);
  cr_expect_eq(s.reserved, 0);
}

Test(cuda_tensor, host_reads_copy_from_the_device) {
  kn_scope_begin();
  int64_t v[4] = {7, -3, 1LL << 60, 9};
  kn_tensor *d = on_cuda(kn_from_ints(v, 2, (int64_t[]){2, 2}));
  cr_expect_eq(kn_get(d, (int64_t[]){1, 0}), (double)(1LL << 60));
  int64_t x = 0;
  cr_assert_eq(kn_item_int(kn_select(kn_select(d, 0, 1), 0, 0), &x), KN_OK, "%s", kn_last_error());
  cr_expect_eq(x, 1LL << 60);
  double f = 0;
  cr_assert_eq(kn_item_double(kn_select(kn_select(d, 0, 0), 0, 1), &f), KN_OK);
  cr_expect_eq(f, -3);
  kn_scope_end();
}

Test(cuda_tensor, printing_names_the_device) {
  kn_scope_begin();
  float v[3] = {1, 2.5f, -3};
  kn_tensor *d = on_cuda(kn_from_floats(v, 1, (int64_t[]){3}));
  char *s = kn_tensor_to_string(d);
  cr_expect_str_eq(s, "tensor([ 1.0000,  2.5000, -3.0000], device='cuda:0')");
  free(s);
  s = kn_tensor_to_string(on_cuda(kn_from_doubles((double[]){1, 2}, 1, (int64_t[]){2})));
  cr_expect_str_eq(s, "tensor([1., 2.], device='cuda:0', dtype=float64)");
  free(s);
  s = kn_tensor_to_string(on_cuda(kn_zeros(2, (int64_t[]){0, 3}, KN_FLOAT32)));
  cr_expect_str_eq(s, "tensor([], device='cuda:0', size=(0, 3))");
  free(s);
  kn_scope_end();
}

Test(cuda_tensor, kn_data_refuses_device_memory) {
  kn_scope_begin();
  kn_tensor *d = on_cuda(kn_ones(1, (int64_t[]){2}, KN_FLOAT32));
  cr_expect_null(kn_data(d));
  cr_expect_str_eq(kn_last_error(),
                   "kn_data: the tensor is on cuda:0 (device memory, not readable from the host): "
                   "copy it to the host first with kn_to_device(t, KN_CPU, &out), or take its "
                   "device address with kn_cuda_data_ptr");
  cr_expect_not_null(kn_cuda_data_ptr(d));
  cr_expect_null(kn_cuda_data_ptr(kn_ones(1, (int64_t[]){2}, KN_FLOAT32)));
  cr_expect(strstr(kn_last_error(), "expected a tensor on cuda, got one on cpu"), "%s",
            kn_last_error());
  kn_tensor *out = (kn_tensor *)1;
  cr_expect_eq(kn_to_device(kn_empty_meta(1, (int64_t[]){2}, KN_FLOAT32), KN_CUDA, &out), KN_EINVAL);
  cr_expect_null(out);
  cr_expect_eq(kn_to_device(d, KN_META, &out), KN_EINVAL);
  kn_scope_end();
}

Test(cuda_tensor, mixed_devices_fail_as_in_pytorch) {
  kn_scope_begin();
  kn_tensor *c = kn_ones(2, (int64_t[]){2, 2}, KN_FLOAT32);
  kn_tensor *d = on_cuda(c);
  cr_expect_null(kn_add(d, c));
  cr_expect_str_eq(kn_last_error(), "Expected all tensors to be on the same device, but found at "
                                    "least two devices, cuda:0 and cpu!");
  cr_expect_null(kn_mm(c, d));
  cr_expect_str_eq(kn_last_error(), "Expected all tensors to be on the same device, but found at "
                                    "least two devices, cpu and cuda:0!");
  kn_scope_end();
}

Test(cuda_tensor, ops_without_a_cuda_kernel_fail_clearly) {
  kn_scope_begin();
  cr_assert_eq(kn__dispatch_set_device_backend(KN_CUDA, NULL), KN_OK);
  kn_tensor *d = on_cuda(kn_ones(2, (int64_t[]){2, 3}, KN_FLOAT32));
  cr_expect_null(kn_exp(d));
  cr_expect(strncmp(kn_last_error(), "aten.exp: no CUDA kernel for this op (cuda:0)", 45) == 0, "%s",
            kn_last_error());
  cr_expect_null(kn_add(d, d));
  cr_expect(strstr(kn_last_error(), "aten.add.Tensor: no CUDA kernel"), "%s", kn_last_error());
  cr_expect_null(kn_sum(d));
  cr_expect(strstr(kn_last_error(), "aten.sum: no CUDA kernel"), "%s", kn_last_error());
  cr_expect_null(kn_relu(d));
  /* views need no kernel */
  kn_tensor *v = kn_t(d);
  cr_assert_not_null(v);
  cr_expect_eq(kn_tensor_device(v), KN_CUDA);
  kn_scope_end();
}

/* A device backend of the test: neg through the host (copy, negate, copy
** back), and a record of what it was handed. */
static char seen_op[64];
static kn_device seen_out_device;
static int64_t seen_out_numel;

static kn_status test_backend(const kn__call *c, kn__outs *out) {
  snprintf(seen_op, sizeof seen_op, "%s", c->op->name);
  seen_out_device = kn_tensor_device(out->t[0]);
  seen_out_numel = kn_numel(out->t[0]);
  if (c->op->id != KN_OP_NEG) return kn__error(KN_EUNSUPPORTED, "test backend: not %s", c->op->name);
  kn_tensor *h = kn__tensor_host_copy(c->args[0].u.t);
  kn_tensor *r = kn__empty(h->ndim, h->sizes, h->dtype, KN_CPU);
  const float *x = kn_data(kn_contiguous(h));
  for (int64_t i = 0; i < kn_numel(r); i++) ((float *)kn_data(r))[i] = -x[i];
  kn_status st = kn__cuda_copy_into(out->t[0], r);
  kn_release(r);
  kn_release(h);
  return st;
}

Test(cuda_tensor, the_device_backend_runs_what_the_ops_layer_cannot) {
  kn_scope_begin();
  cr_assert_eq(kn__dispatch_set_device_backend(KN_CUDA, test_backend), KN_OK);
  float v[4] = {1, -2, 3, -4};
  kn_tensor *d = on_cuda(kn_from_floats(v, 1, (int64_t[]){4}));
  kn_tensor *n = kn_neg(d);
  cr_assert_not_null(n, "%s", kn_last_error());
  cr_expect_str_eq(seen_op, "neg");
  cr_expect_eq(seen_out_device, KN_CUDA);
  cr_expect_eq(seen_out_numel, 4);
  const float want[4] = {-1, 2, -3, 4};
  cr_expect(memcmp(kn_data(on_host(n)), want, sizeof want) == 0);
  /* its refusal is the error */
  cr_expect_null(kn_exp(d));
  cr_expect_str_eq(kn_last_error(), "test backend: not exp");
  /* the ops layer's own kernels never reach it */
  seen_op[0] = '\0';
  cr_assert_not_null(kn_clone(d));
  cr_expect_str_eq(seen_op, "");
  cr_expect_eq(kn__dispatch_set_device_backend(KN_CPU, test_backend), KN_EINVAL);
  cr_assert_eq(kn__dispatch_set_device_backend(KN_CUDA, NULL), KN_OK);
  kn_scope_end();
}

Test(cuda_tensor, copies_and_fills_on_the_device) {
  kn_scope_begin();
  float v[4] = {1, 2, 3, 4};
  kn_tensor *c = kn_from_floats(v, 2, (int64_t[]){2, 2});
  kn_tensor *d = on_cuda(c);
  /* clone and contiguous of a dense tensor: a device-to-device copy */
  kn_tensor *e = kn_clone(d);
  cr_assert_not_null(e, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_device(e), KN_CUDA);
  cr_expect_not(kn_same_storage(d, e));
  cr_expect(memcmp(kn_data(on_host(e)), v, sizeof v) == 0);
  cr_expect(kn_same_storage(kn_contiguous(d), d));
  /* copy_ between devices, both ways */
  float w[4] = {9, 8, 7, 6};
  cr_assert_eq(kn_copy_(d, kn_from_floats(w, 2, (int64_t[]){2, 2})), KN_OK, "%s", kn_last_error());
  cr_expect(memcmp(kn_data(on_host(d)), w, sizeof w) == 0);
  cr_assert_eq(kn_copy_(c, d), KN_OK, "%s", kn_last_error());
  cr_expect(memcmp(kn_data(c), w, sizeof w) == 0);
  /* host to device with a conversion and a broadcast: staged on the host */
  cr_assert_eq(kn_copy_(d, kn_from_doubles((double[]){5, 6}, 1, (int64_t[]){2})), KN_OK, "%s",
               kn_last_error());
  const float bc[4] = {5, 6, 5, 6};
  cr_expect(memcmp(kn_data(on_host(d)), bc, sizeof bc) == 0);
  /* zero_ of a dense tensor: a memset */
  cr_assert_eq(kn_zero_(d), KN_OK, "%s", kn_last_error());
  const float z[4] = {0};
  cr_expect(memcmp(kn_data(on_host(d)), z, sizeof z) == 0);
  /* a strided copy needs a compiled kernel: without NVRTC, a clear error */
  cr_expect_null(kn_contiguous(kn_t(d)));
  cr_expect(strstr(kn_last_error(), "cannot load NVRTC"), "%s", kn_last_error());
  cr_expect_eq(kn_fill_(d, kn_float(2)), KN_EUNSUPPORTED);
  kn_scope_end();
}

Test(cuda_tensor, matrix_products_need_cublas_and_floats) {
  kn_scope_begin();
  kn_tensor *d = on_cuda(kn_ones(2, (int64_t[]){2, 2}, KN_FLOAT32));
  cr_expect_null(kn_mm(d, d));
  cr_expect(strstr(kn_last_error(), "cannot load cuBLAS: KILN_CUDA_CUBLAS=/nonexistent/"), "%s",
            kn_last_error());
  kn_tensor *i = on_cuda(kn_ones(2, (int64_t[]){2, 2}, KN_INT64));
  cr_expect_null(kn_mm(i, i));
  cr_expect_str_eq(kn_last_error(), "aten.mm: no CUDA kernel for int64 (cuBLAS multiplies float32, "
                                    "float64, float16 and bfloat16 matrices) (cuda:0)");
  /* linear and matmul are made of these: the same errors, nothing run on the CPU */
  cr_expect_null(kn_linear(d, d, NULL));
  cr_expect(strstr(kn_last_error(), "cannot load cuBLAS"), "%s", kn_last_error());
  cr_expect_null(kn_matmul(d, kn_ones(2, (int64_t[]){2, 2}, KN_FLOAT32)));
  cr_expect(strstr(kn_last_error(), "Expected all tensors to be on the same device"), "%s",
            kn_last_error());
  kn_scope_end();
}

Test(cuda_tensor, without_a_driver) {
  setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  kn_scope_begin();
  cr_expect_not(kn_cuda_is_available());
  cr_expect_null(kn_cuda_device_name());
  kn_tensor *out = (kn_tensor *)1;
  cr_expect_eq(kn_to_device(kn_ones(1, (int64_t[]){2}, KN_FLOAT32), KN_CUDA, &out), KN_EUNSUPPORTED);
  cr_expect_null(out);
  const char *want = "no CUDA driver/GPU found: cannot load the CUDA driver: "
                     "KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1: ";
  cr_expect(strncmp(kn_last_error(), want, strlen(want)) == 0, "%s", kn_last_error());
  cr_expect_eq(kn_cuda_synchronize(), KN_EUNSUPPORTED);
  kn_scope_end();
}

Test(cuda_tensor, with_the_fake_driver) {
  cr_expect(kn_cuda_is_available());
  cr_expect_str_eq(kn_cuda_device_name(), "kiln fake CUDA device");
  cr_expect_eq(kn_cuda_synchronize(), KN_OK);
}

/* The fake keeps device memory inaccessible to the host, so every test here
** would crash if a CPU kernel were handed a CUDA tensor's pointer.
** (AddressSanitizer reports the fault as its own error instead of letting
** the signal through: checked in the plain build only.) */
#if defined(__SANITIZE_ADDRESS__)
Test(cuda_tensor, host_code_cannot_read_fake_device_memory) {
  cr_skip_test("AddressSanitizer turns the expected SIGSEGV into its own report");
}
#else
Test(cuda_tensor, host_code_cannot_read_fake_device_memory, .signal = SIGSEGV) {
  kn_tensor *d = on_cuda(kn_ones(1, (int64_t[]){4}, KN_FLOAT32));
  volatile const float *p = kn_cuda_data_ptr(d);
  cr_log_info("read %g", (double)p[0]);
}
#endif
