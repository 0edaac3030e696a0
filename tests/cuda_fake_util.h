/*
** tests/cuda_fake_util.h: what the test_cuda_* suites that run generated
** kernels share: the fake CUDA driver (tests/support/fakecuda*.c: kernels
** run on the host; it answers for cuBLAS too) and the fake NVRTC, a private
** code cache per test, and moving a tensor between devices (asserting).
** Include after <criterion/criterion.h> and inductor_util.h.
*/
#ifndef KN_TESTS_CUDA_FAKE_UTIL_H
#define KN_TESTS_CUDA_FAKE_UTIL_H

#include <stdlib.h>

#include "kiln/compile.h"
#include "kiln/cuda.h"

static char cuda_fake_cache[64];

/* The fakes for this process and a fresh KILN_CACHE_DIR; the compile
** counter's reference keeps dynamo/backends.c in a static link (its
** constructor registers the CUDA eager handler). */
static inline void cuda_fake_setup(void) {
  kn_compile_counter cc = {0};
  kn_compile_counter_clear(&cc);
  setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1);
  setenv("KILN_CUDA_CUBLAS", KN_FAKECUDA_PATH, 1);
  setenv("KILN_CUDA_NVRTC", KN_FAKENVRTC_PATH, 1);
  ind_cache_dir(cuda_fake_cache, sizeof cuda_fake_cache);
}

static inline void cuda_fake_teardown(void) { ind_rm(cuda_fake_cache); }

/* t on device d (a tensor of the current scope). */
static inline kn_tensor *dev(kn_tensor *t, kn_device d) {
  kn_tensor *o = NULL;
  cr_assert_eq(kn_to_device(t, d, &o), KN_OK, "%s", kn_last_error());
  return o;
}

#endif
