/*
** test_cuda_dynamo.c: compiled functions with CUDA inputs, on the fake
** driver (tests/support/fakecuda.c): the fake of a CUDA input and the fake
** outputs made from it report the CUDA device, the traced graph runs on
** the device (a clone of a dense tensor is a device memcpy, which the fake
** performs), the trace describes the input as device(type='cuda',
** index=0), the guard code carries PyTorch's CUDA dispatch key set, and
** calling with a CPU tensor fails the guard with TENSOR_MATCH's reason.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynamo/dynamo.h"
#include "dynamo/tracer.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "support/dynamo_util.h"
#include "support/fixture.h"
#include "support/log_capture.h"
#include "support/trace_util.h"
#include "tensor/tensor.h"

static void setup(void) {
  setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1);
  kn_test_dynamo_setup();
}

TestSuite(cuda_dynamo, .init = setup, .fini = kn_test_dynamo_teardown);

static kn_device seen_device;
static bool seen_fake;

static kn_tensor *copy_fn(kn_tensor *a) {
  seen_device = kn_tensor_device(a);
  seen_fake = a->is_fake;
  kn_tensor *r = kn_clone(a);
  return r;
}

static kn_tensor *to_cuda(kn_tensor *t) {
  kn_tensor *d = NULL;
  cr_assert_eq(kn_to_device(t, KN_CUDA, &d), KN_OK, "%s", kn_last_error());
  return d;
}

Test(cuda_dynamo, a_compiled_clone_runs_on_the_device) {
  kn_compile_options o = {.backend = "eager"};
  kn_compiled *f = KN_COMPILE(copy_fn, &o);
  kn_scope_begin();
  float v[6] = {1, 2, 3, 4, 5, 6};
  kn_tensor *x = to_cuda(kn_from_floats(v, 2, (int64_t[]){2, 3}));
  kn_tensor *y = kn_call_t(f, x);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect(seen_fake, "the function was traced with a fake");
  cr_expect_eq(seen_device, KN_CUDA, "the fake reports the input's device");
  cr_expect_eq(kn_tensor_device(y), KN_CUDA);
  cr_expect_not(kn_same_storage(x, y));
  kn_tensor *h = NULL;
  cr_assert_eq(kn_to_device(y, KN_CPU, &h), KN_OK);
  cr_expect(memcmp(kn_data(h), v, sizeof v) == 0);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(cuda_dynamo, the_guard_code_names_the_cuda_key_set) {
  kn_scope_begin();
  kn_tensor *x = to_cuda(kn_ones(1, (int64_t[]){3}, KN_FLOAT32));
  char code[512];
  kn__tensor_guard_code("L['a']", x, 0, 0, code, sizeof code);
  cr_expect_str_eq(code, "check_tensor(L['a'], Tensor, DispatchKeySet(CUDA, BackendSelect, "
                         "ADInplaceOrView, AutogradCUDA), torch.float32, device=0, "
                         "requires_grad=False, size=[3], stride=[1])");
  kn_scope_end();
}

Test(cuda_dynamo, a_cpu_tensor_fails_the_cuda_guard) {
  kn_compile_options o = {.backend = "eager", .cache_size_limit = 1};
  kn_compiled *f = KN_COMPILE(copy_fn, &o);
  kn_scope_begin();
  kn_tensor *c = kn_ones(2, (int64_t[]){2, 3}, KN_FLOAT32);
  cr_assert_not_null(kn_call_t(f, to_cuda(c)), "%s", kn_last_error());
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_tensor *y = kn_call_t(f, c);
  kn_test_capture_end(&r);
  cr_expect_not_null(y, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_device(y), KN_CPU);
  bool found = false;
  for (size_t i = 0; i < r.n; i++)
    found = found || strstr(r.v[i].message,
                            "tensor 'L['a']' dispatch key set mismatch. expected "
                            "DispatchKeySet(CUDA, BackendSelect, ADInplaceOrView, AutogradCUDA), "
                            "actual DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, "
                            "AutogradCPU)");
  cr_expect(found, "the cache-limit warning names the device's key sets");
  kn_test_records_free(&r);
  kn_scope_end();
  kn_compiled_free(f);
}

Test(cuda_dynamo, the_trace_describes_a_cuda_input) {
  char *dir = kn_test_trace_start();
  kn_compile_options o = {.backend = "eager"};
  kn_compiled *f = KN_COMPILE(copy_fn, &o);
  kn_scope_begin();
  cr_assert_not_null(kn_call_t(f, to_cuda(kn_ones(1, (int64_t[]){4}, KN_FLOAT32))), "%s",
                     kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  char *text = kn_test_trace_text();
  cr_expect(strstr(text, "\"device\": \"device(type='cuda', index=0)\""), "%s", text);
  free(text);
  kn_trace_disable();
  kn_test_rmdir(dir);
}

/* The default backend (inductor) compiles a graph with a CUDA input for the
** cuda target. The fake driver runs no kernels, so the call fails, naming
** what is missing: NVRTC where it is not installed, else the driver's
** refusal to load the kernels; nothing runs on the host in their place. */
Test(cuda_dynamo, inductor_compiles_a_cuda_graph_for_the_cuda_target) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(copy_fn, &o);
  kn_scope_begin();
  float v[3] = {7, 8, 9};
  kn_tensor *y = kn_call_t(f, to_cuda(kn_from_floats(v, 1, (int64_t[]){3})));
  cr_expect_null(y);
  const char *e = kn_last_error();
  cr_expect(strstr(e, "BackendCompilerFailed: backend='inductor'"), "%s", e);
  cr_expect(strstr(e, "NVRTC") || strstr(e, "cuModuleLoadData failed: CUDA_ERROR_NOT_SUPPORTED"),
            "%s", e);
  kn_scope_end();
  kn_compiled_free(f);
}

/* AOT autograd's runtime runs the forward graph on the inputs' device. */
Test(cuda_dynamo, aot_eager_keeps_the_device) {
  kn_compile_options o = {.backend = "aot_eager"};
  kn_compiled *f = KN_COMPILE(copy_fn, &o);
  kn_scope_begin();
  float v[3] = {1, 2, 3};
  kn_tensor *y = kn_call_t(f, to_cuda(kn_from_floats(v, 1, (int64_t[]){3})));
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_device(y), KN_CUDA);
  kn_tensor *h = NULL;
  cr_assert_eq(kn_to_device(y, KN_CPU, &h), KN_OK);
  cr_expect(memcmp(kn_data(h), v, sizeof v) == 0);
  kn_scope_end();
  kn_compiled_free(f);
}

static kn_tensor *fma_fn(kn_tensor *a, kn_tensor *b, kn_tensor *c) { return kn_add(a, kn_mul(b, c)); }

/* Seed test_nvfuser_guards (004): a + b * c on CUDA tensors, cache limit 2:
** a second call and a contiguous view of other memory reuse the frame; a
** permuted b (other strides) compiles a second one. The results equal
** eager CPU. */
Test(cuda_dynamo, seed_nvfuser_guards) {
  setenv("KILN_CUDA_NVRTC", KN_FAKENVRTC_PATH, 1); /* eager ops' kernels run on the host */
  kn_compile_counter cc = {0};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .cache_size_limit = 2};
  kn_compiled *f = KN_COMPILE(fma_fn, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  kn_scope_begin();
  int64_t s345[3] = {3, 4, 5}, s354[3] = {3, 5, 4};
  kn_tensor *a = kn_rand(3, s345, NULL, KN_FLOAT32), *b = kn_rand(3, s345, NULL, KN_FLOAT32);
  kn_tensor *c = kn_rand(3, s345, NULL, KN_FLOAT32), *bt = kn_rand(3, s354, NULL, KN_FLOAT32);
  kn_tensor *ad = to_cuda(a), *bd = to_cuda(b), *cd = to_cuda(c), *btd = to_cuda(bt);
  kn_tensor *bv = kn_view(btd, 3, s345), *bp = kn_permute(btd, 3, (int64_t[]){0, 2, 1});
  struct { kn_tensor *b, *bcpu; int frames; } calls[] = {
      {bd, b, 1}, {bd, b, 1}, {bv, kn_view(bt, 3, s345), 1},
      {bp, kn_permute(bt, 3, (int64_t[]){0, 2, 1}), 2}};
  for (int k = 0; k < 4; k++) {
    kn_tensor *y = kn_call_t(f, ad, calls[k].b, cd);
    cr_assert_not_null(y, "call %d: %s", k, kn_last_error());
    cr_expect_eq(kn_tensor_device(y), KN_CUDA);
    cr_expect_eq(cc.frame_count, calls[k].frames, "call %d: %d frames", k, cc.frame_count);
    kn_tensor *h = NULL, *want = fma_fn(a, calls[k].bcpu, c);
    cr_assert_eq(kn_to_device(y, KN_CPU, &h), KN_OK, "%s", kn_last_error());
    char why[200];
    cr_expect(kn_tensors_close(h, want, 1e-6, 1e-6, true, why, sizeof why), "call %d: %s", k, why);
  }
  kn_scope_end();
  kn_compiled_free(f);
}
