/*
** tests/cuda/shim.h: the CUDA built-ins that kiln's generated device code
** uses, for g++ (no GPU, no CUDA toolkit): included before a generated .cu
** with KN_CUDA_SHIM defined, it lets `g++ -std=c++17 -fsyntax-only` check
** the device half of every golden file, and lets a test run pointwise
** kernels on the CPU: sequential loops over blocks and threads setting
** blockIdx/threadIdx (kn_shim_run). Warp shuffles and barriers are
** placeholders here (identity, no-op): reduction kernels need real threads
** and are only compiled, never run, through this shim.
*/
#ifndef KN_TESTS_CUDA_SHIM_H
#define KN_TESTS_CUDA_SHIM_H

#define KN_CUDA_SHIM 1
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cmath>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict

struct kn_shim_dim3 {
  unsigned x, y, z;
};
static kn_shim_dim3 threadIdx, blockIdx, blockDim, gridDim;

static inline void __syncthreads(void) {}
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int) { return v; }
static inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline float __int_as_float(int i) {
  float f;
  memcpy(&f, &i, 4);
  return f;
}

/* Run kernel fn over grid x block threads, one after another (pointwise
** kernels only: they neither synchronise nor share memory). */
template <typename F> static inline void kn_shim_run(unsigned grid, unsigned block, F fn) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; b++)
    for (unsigned t = 0; t < block; t++) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      fn();
    }
}

#endif
