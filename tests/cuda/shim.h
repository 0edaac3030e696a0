/*
** tests/cuda/shim.h: the CUDA built-ins that kiln's generated device code
** uses, for g++ (no GPU, no CUDA toolkit): included before a generated .cu
** with KN_CUDA_SHIM defined, it lets `g++ -std=c++17 -fsyntax-only` check
** the device half of every golden file, and lets a test run kernels on the
** CPU (kn_shim_run): blocks one after another, the threads of a block as
** real threads, __syncthreads a barrier of the block, __shfl_down_sync an
** exchange through per-lane slots between two barriers of the warp, shared
** memory static (one block runs at a time). Slow, exact: for tests.
*/
#ifndef KN_TESTS_CUDA_SHIM_H
#define KN_TESTS_CUDA_SHIM_H

#define KN_CUDA_SHIM 1
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict

/* CUDA's float4, as the 16-byte accesses of flat kernels use it. */
struct alignas(16) float4 {
  float x, y, z, w;
};

struct kn_shim_dim3 {
  unsigned x, y, z;
};
static thread_local kn_shim_dim3 threadIdx;
static kn_shim_dim3 blockIdx, blockDim, gridDim;

/* A reusable barrier of n threads. */
struct kn_shim_barrier {
  std::mutex m;
  std::condition_variable cv;
  unsigned n = 0, count = 0, gen = 0;
  void wait() {
    std::unique_lock<std::mutex> l(m);
    unsigned g = gen;
    if (++count == n) {
      count = 0;
      gen++;
      cv.notify_all();
    } else {
      cv.wait(l, [&] { return gen != g; });
    }
  }
};
static kn_shim_barrier kn_shim_block_bar, kn_shim_warp_bar[32];
static unsigned char kn_shim_lanes[1024][16];

static inline void __syncthreads(void) { kn_shim_block_bar.wait(); }
/* Every lane of the warp calls it (converged code): each publishes its
** value, then reads lane + d's (its own past the warp's end). */
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int d) {
  static_assert(sizeof(T) <= 16, "shuffled values are at most 16 bytes");
  const unsigned t = threadIdx.x, w = t >> 5;
  memcpy(kn_shim_lanes[t], &v, sizeof v);
  kn_shim_warp_bar[w].wait();
  T r = v;
  if ((t & 31u) + (unsigned)d < 32 && t + (unsigned)d < blockDim.x)
    memcpy(&r, kn_shim_lanes[t + (unsigned)d], sizeof r);
  kn_shim_warp_bar[w].wait();
  return r;
}
/* atomicAdd on counters and __threadfence (split reductions' last block). */
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* atomicCAS on 64-bit words (device-side checks): the old value. */
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp,
                                           unsigned long long val) {
  __atomic_compare_exchange_n(p, &cmp, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
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

/* Run kernel fn over grid blocks of block threads (a multiple of 32, at
** most 1024): one block after another, its threads as real threads (so
** barriers, shuffles and shared memory behave as on a GPU). */
template <typename F> static inline void kn_shim_run(unsigned grid, unsigned block, F fn) {
  gridDim = {grid, 1, 1};
  blockDim = {block, 1, 1};
  kn_shim_block_bar.n = block;
  for (unsigned w = 0; w < 32; w++) kn_shim_warp_bar[w].n = 32;
  for (unsigned b = 0; b < grid; b++) {
    blockIdx = {b, 0, 0};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; t++)
      ts.emplace_back([t, &fn] {
        threadIdx = {t, 0, 0};
        fn();
      });
    for (auto &th : ts) th.join();
  }
}

#endif
