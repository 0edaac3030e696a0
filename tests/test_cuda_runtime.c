/*
** test_cuda_runtime.c: the CUDA runtime (src/cuda/) without a GPU, on the
** fake driver of tests/support/fakecuda.c (host memory behind the driver
** API; it runs no kernels): initialisation, the caching allocator's reuse,
** statistics and out-of-memory retry, copies, capture states, and the error
** texts of a missing driver, library or device. The fake's own counters
** (fakecuda_counters) are the independent record of what reached the
** driver. Each test runs in a process of its own, so each initialises the
** runtime afresh with its own environment.
*/
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda.h"
#include "kiln/kiln.h"

TestSuite(cuda_runtime);

static void use_fake(void) { setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1); }

typedef int (*counters_fn)(size_t *, long *, long *);

/* What the fake driver holds: live bytes, cuMemAlloc and cuMemFree calls. */
static void fake_counters(size_t *live, long *allocs, long *frees) {
  void *lib = dlopen(KN_FAKECUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  cr_assert(lib, "the fake driver is loaded");
  counters_fn f = (counters_fn)(uintptr_t)dlsym(lib, "fakecuda_counters");
  cr_assert(f);
  f(live, allocs, frees);
  dlclose(lib);
}

Test(cuda_runtime, init_reads_the_device) {
  use_fake();
  cr_assert_eq(kn__cuda_init(), KN_OK, "%s", kn_last_error());
  cr_assert(kn__cuda_available());
  cr_expect_eq(kn__cuda_arch(), 90);
  cr_expect_eq(kn__cuda_sm_count(), 132);
  cr_expect_str_eq(kn__cuda_device_name(), "kiln fake CUDA device");
}

Test(cuda_runtime, missing_driver_names_the_path) {
  setenv("KILN_CUDA_DRIVER", "/nonexistent/dir/libcuda.so.1", 1);
  cr_assert_eq(kn__cuda_init(), KN_EUNSUPPORTED);
  const char *m = kn_last_error();
  cr_expect(strncmp(m, "no CUDA driver/GPU found: ", 26) == 0, "%s", m);
  cr_expect(strstr(m, "KILN_CUDA_DRIVER=/nonexistent/dir/libcuda.so.1"), "%s", m);
  cr_expect_not(kn__cuda_available());
  cr_expect_eq(kn__cuda_arch(), 0);
  /* every later call fails the same way */
  void *p = (void *)1;
  cr_expect_eq(kn__cuda_alloc(16, &p), KN_EUNSUPPORTED);
  cr_expect_null(p);
  cr_expect(strstr(kn_last_error(), "no CUDA driver/GPU found: "), "%s", kn_last_error());
}

Test(cuda_runtime, library_without_the_driver_api_is_refused) {
  setenv("KILN_CUDA_DRIVER", "libm.so.6", 1);
  cr_assert_eq(kn__cuda_init(), KN_EUNSUPPORTED);
  cr_expect(strstr(kn_last_error(),
                   "no CUDA driver/GPU found: unusable CUDA driver libm.so.6: the library has no "
                   "cuGetErrorName"),
            "%s", kn_last_error());
}

Test(cuda_runtime, no_device) {
  use_fake();
  setenv("KILN_FAKECUDA_DEVICES", "0", 1);
  cr_assert_eq(kn__cuda_init(), KN_EUNSUPPORTED);
  cr_expect_str_eq(kn_last_error(), "no CUDA driver/GPU found: cuInit failed: CUDA_ERROR_NO_DEVICE "
                                    "(no CUDA-capable device is detected)");
}

Test(cuda_runtime, device_index_out_of_range) {
  use_fake();
  setenv("KILN_FAKECUDA_DEVICES", "2", 1);
  setenv("KILN_CUDA_DEVICE", "2", 1);
  cr_assert_eq(kn__cuda_init(), KN_EINVAL);
  cr_expect_str_eq(kn_last_error(), "KILN_CUDA_DEVICE=2: expected a device index from 0 to 1 (2 devices)");
}

Test(cuda_runtime, device_index_not_a_number) {
  use_fake();
  setenv("KILN_CUDA_DEVICE", "gpu1", 1);
  cr_assert_eq(kn__cuda_init(), KN_EINVAL);
  cr_expect(strstr(kn_last_error(), "KILN_CUDA_DEVICE=gpu1: expected a device index from 0 to 0"),
            "%s", kn_last_error());
}

Test(cuda_runtime, second_device) {
  use_fake();
  setenv("KILN_FAKECUDA_DEVICES", "2", 1);
  setenv("KILN_CUDA_DEVICE", "1", 1);
  cr_assert_eq(kn__cuda_init(), KN_OK, "%s", kn_last_error());
}

Test(cuda_runtime, allocator_reuses_a_freed_block) {
  use_fake();
  void *p = NULL, *q = NULL, *r = NULL;
  cr_assert_eq(kn__cuda_alloc(1000, &p), KN_OK, "%s", kn_last_error());
  kn__cuda_free(p);
  /* 600 and 1000 bytes both round to 1024: the same block again */
  cr_assert_eq(kn__cuda_alloc(600, &q), KN_OK);
  cr_expect_eq(q, p);
  size_t live;
  long allocs, frees;
  fake_counters(&live, &allocs, &frees);
  cr_expect_eq(allocs, 1, "one cuMemAlloc for two allocations, got %ld", allocs);
  cr_expect_eq(live, 1024);
  /* a different size class is a new block */
  cr_assert_eq(kn__cuda_alloc(1025, &r), KN_OK);
  cr_expect_neq(r, q);
  kn__cuda_memstats st;
  kn__cuda_memstats_get(&st);
  cr_expect_eq(st.n_malloc, 2);
  cr_expect_eq(st.n_alloc, 3);
  cr_expect_eq(st.allocated, 1024 + 1536);
  cr_expect_eq(st.reserved, 1024 + 1536);
  cr_expect_eq(st.peak_allocated, 1024 + 1536);
  kn__cuda_free(q);
  kn__cuda_free(r);
  kn__cuda_memstats_get(&st);
  cr_expect_eq(st.allocated, 0);
  cr_expect_eq(st.reserved, 1024 + 1536);
  cr_expect_eq(st.peak_allocated, 1024 + 1536);
  cr_assert_eq(kn__cuda_empty_cache(), KN_OK);
  kn__cuda_memstats_get(&st);
  cr_expect_eq(st.reserved, 0);
  fake_counters(&live, &allocs, &frees);
  cr_expect_eq(live, 0);
  cr_expect_eq(frees, 2);
}

Test(cuda_runtime, large_blocks_round_to_2mib_and_small_requests_leave_them) {
  use_fake();
  void *big = NULL, *small = NULL, *mid = NULL;
  cr_assert_eq(kn__cuda_alloc((3 << 20) + 1, &big), KN_OK);
  kn__cuda_memstats st;
  kn__cuda_memstats_get(&st);
  cr_expect_eq(st.allocated, 4 << 20);
  kn__cuda_free(big);
  /* 1 MiB + 1 rounds to 2 MiB: the cached 4 MiB block is too big for it */
  cr_assert_eq(kn__cuda_alloc((1 << 20) + 1, &small), KN_OK);
  cr_expect_neq(small, big);
  /* 3.5 MiB rounds to 4 MiB: it takes the cached block */
  cr_assert_eq(kn__cuda_alloc((7 << 19), &mid), KN_OK);
  cr_expect_eq(mid, big);
  kn__cuda_memstats_get(&st);
  cr_expect_eq(st.n_malloc, 2);
  kn__cuda_free(small);
  kn__cuda_free(mid);
}

Test(cuda_runtime, zero_bytes_give_distinct_pointers) {
  use_fake();
  void *a = NULL, *b = NULL;
  cr_assert_eq(kn__cuda_alloc(0, &a), KN_OK);
  cr_assert_eq(kn__cuda_alloc(0, &b), KN_OK);
  cr_expect(a && b && a != b);
  kn__cuda_free(a);
  kn__cuda_free(b);
  kn__cuda_free(NULL);
}

Test(cuda_runtime, out_of_memory_retries_after_emptying_the_cache) {
  use_fake();
  setenv("KILN_FAKECUDA_MEM_LIMIT", "1048576", 1);
  void *a = NULL, *b = NULL, *c = NULL;
  cr_assert_eq(kn__cuda_alloc(600 << 10, &a), KN_OK);
  kn__cuda_free(a); /* cached: the driver still holds 600 KiB */
  /* 700 KiB does not fit beside the cached block: the cache is emptied and
  ** the allocation tried again */
  cr_assert_eq(kn__cuda_alloc(700 << 10, &b), KN_OK, "%s", kn_last_error());
  size_t live;
  long allocs, frees;
  fake_counters(&live, &allocs, &frees);
  cr_expect_eq(frees, 1);
  cr_expect_eq(allocs, 2);
  cr_expect_eq(live, 700 << 10);
  /* with b live nothing can be freed: a clear out-of-memory error */
  cr_assert_eq(kn__cuda_alloc(700 << 10, &c), KN_ENOMEM);
  cr_expect_null(c);
  cr_expect_str_eq(kn_last_error(),
                   "CUDA out of memory: tried to allocate 716800 bytes (0.68 MiB, 716800 rounded) "
                   "on cuda:0 (kiln fake CUDA device) with 716800 bytes allocated and 716800 "
                   "reserved by kiln; the driver reports 331776 of 1048576 bytes free");
  kn__cuda_free(b);
  /* after the failure the allocator still works */
  cr_assert_eq(kn__cuda_alloc(700 << 10, &c), KN_OK);
  cr_expect_eq(c, b);
  kn__cuda_free(c);
}

Test(cuda_runtime, copies_round_trip) {
  use_fake();
  enum { N = 5000 };
  unsigned char host[N], back[N];
  for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 7 + 3);
  void *d1 = NULL, *d2 = NULL;
  cr_assert_eq(kn__cuda_alloc(N, &d1), KN_OK);
  cr_assert_eq(kn__cuda_alloc(N, &d2), KN_OK);
  cr_assert_eq(kn__cuda_memcpy(d1, KN_CUDA, host, KN_CPU, N), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn__cuda_memcpy(d2, KN_CUDA, d1, KN_CUDA, N), KN_OK);
  cr_assert_eq(kn__cuda_memset0(d1, N), KN_OK);
  cr_assert_eq(kn__cuda_memcpy(back, KN_CPU, d2, KN_CUDA, N), KN_OK);
  cr_expect(memcmp(back, host, N) == 0);
  cr_assert_eq(kn__cuda_memset0((char *)d2 + 10, 20), KN_OK);
  cr_assert_eq(kn__cuda_memcpy(back, KN_CPU, d2, KN_CUDA, N), KN_OK);
  for (int i = 0; i < N; i++)
    cr_assert_eq(back[i], i >= 10 && i < 30 ? 0 : host[i], "byte %d", i);
  cr_assert_eq(kn__cuda_memcpy(back, KN_CPU, d1, KN_CUDA, N), KN_OK);
  for (int i = 0; i < N; i++) cr_assert_eq(back[i], 0, "byte %d", i);
  cr_expect_eq(kn__cuda_memcpy(back, KN_META, d1, KN_CUDA, N), KN_EINVAL);
  cr_assert_eq(kn__cuda_synchronize(), KN_OK);
  kn__cuda_free(d1);
  kn__cuda_free(d2);
}

Test(cuda_runtime, driver_errors_name_the_call_and_the_error) {
  use_fake();
  kn__cuda_module *m = (kn__cuda_module *)1;
  char image[16] = "not an image";
  cr_assert_eq(kn__cuda_module_load(image, sizeof image, &m), KN_EINTERNAL);
  cr_expect_null(m);
  cr_expect_str_eq(kn_last_error(),
                   "CUDA driver call cuModuleLoadData failed: CUDA_ERROR_NOT_SUPPORTED (operation "
                   "not supported (the fake CUDA driver runs only the fake NVRTC's kernels))");
  unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  cr_assert_eq(kn__cuda_launch((void *)1, grid, block, 0, NULL), KN_EINTERNAL);
  cr_expect(strstr(kn_last_error(), "cuLaunchKernel failed: CUDA_ERROR_NOT_SUPPORTED"), "%s",
            kn_last_error());
}

/* A capture refuses host work; memory may be allocated during it, and the
** blocks freed meanwhile belong to the graph's private pool: nothing else
** is handed them until the graph is freed (a replay may write them). */
Test(cuda_runtime, capture_refuses_host_work_and_pools_freed_memory) {
  use_fake();
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  cr_assert_eq(kn__cuda_alloc(4096, &a), KN_OK);
  cr_assert_eq(kn__cuda_alloc(4096, &b), KN_OK);
  kn__cuda_free(b);
  cr_expect_not(kn__cuda_capturing());
  cr_assert_eq(kn__cuda_capture_begin(), KN_OK, "%s", kn_last_error());
  cr_expect(kn__cuda_capturing());
  cr_expect_eq(kn__cuda_capture_begin(), KN_ESTATE);
  char host[64] = {0};
  cr_expect_eq(kn__cuda_memcpy(a, KN_CUDA, host, KN_CPU, sizeof host), KN_ESTATE);
  cr_expect(strstr(kn_last_error(), "a copy from the host during CUDA graph capture"), "%s",
            kn_last_error());
  cr_expect_eq(kn__cuda_synchronize(), KN_ESTATE);
  /* a cached block of the size serves; a new size comes from the driver */
  cr_expect_eq(kn__cuda_alloc(4000, &b), KN_OK);
  cr_assert_eq(kn__cuda_alloc(1 << 20, &c), KN_OK, "%s", kn_last_error());
  kn__cuda_free(c); /* to the capture's pool */
  cr_assert_eq(kn__cuda_alloc(1 << 20, &d), KN_OK);
  cr_expect_eq(d, c, "the pool serves the capture itself");
  kn__cuda_free(d);
  cr_expect_eq(kn__cuda_empty_cache(), KN_ESTATE);
  kn__cuda_graph *g = NULL;
  cr_assert_eq(kn__cuda_capture_end(&g), KN_OK, "%s", kn_last_error());
  cr_expect_not(kn__cuda_capturing());
  cr_assert(g);
  cr_expect_eq(kn__cuda_graph_launch(g), KN_OK, "an empty graph replays: %s", kn_last_error());
  cr_assert_eq(kn__cuda_alloc(1 << 20, &d), KN_OK);
  cr_expect_neq(d, c, "the graph's block is not handed out while the graph lives");
  kn__cuda_free(d);
  kn__cuda_graph_free(g);
  void *e = NULL, *f = NULL;
  cr_assert_eq(kn__cuda_alloc(1 << 20, &e), KN_OK);
  cr_assert_eq(kn__cuda_alloc(1 << 20, &f), KN_OK);
  cr_expect(e == c || f == c, "freeing the graph returns its pool to the cache");
  kn__cuda_free(e);
  kn__cuda_free(f);
  cr_expect_eq(kn__cuda_capture_end(&g), KN_ESTATE);
  cr_expect_null(g);
  cr_expect_eq(kn__cuda_memcpy(a, KN_CUDA, host, KN_CPU, sizeof host), KN_OK);
  kn__cuda_free(a);
  kn__cuda_free(b);
}

Test(cuda_runtime, timer_stop_before_start) {
  use_fake();
  double ms = -1;
  cr_expect_eq(kn__cuda_timer_stop(&ms), KN_ESTATE);
  cr_expect_eq(ms, 0);
}

Test(cuda_runtime, missing_nvrtc_and_cublas_name_their_paths) {
  use_fake();
  setenv("KILN_CUDA_NVRTC", "/nonexistent/libnvrtc.so.13", 1);
  setenv("KILN_CUDA_CUBLAS", "/nonexistent/libcublas.so.13", 1);
  void *image = NULL;
  size_t n = 1;
  cr_assert_eq(kn__cuda_compile("extern \"C\" __global__ void k() {}", "k.cu", NULL, &image, &n,
                                NULL, NULL),
               KN_EUNSUPPORTED);
  cr_expect(strstr(kn_last_error(), "cannot load NVRTC: KILN_CUDA_NVRTC=/nonexistent/libnvrtc.so.13: "),
            "%s", kn_last_error());
  cr_expect_null(image);
  cr_expect_eq(n, 0);
  void *a = NULL;
  cr_assert_eq(kn__cuda_alloc(64, &a), KN_OK);
  cr_assert_eq(kn__cuda_gemm(KN_FLOAT32, false, false, 2, 2, 2, 1, a, 2, 0, a, 2, 0, 0, a, 2, 0, 1),
               KN_EUNSUPPORTED);
  cr_expect(strstr(kn_last_error(), "cannot load cuBLAS: KILN_CUDA_CUBLAS=/nonexistent/libcublas.so.13"),
            "%s", kn_last_error());
  kn__cuda_free(a);
}

Test(cuda_runtime, gemm_checks_its_arguments_first) {
  use_fake();
  cr_expect_eq(kn__cuda_gemm(KN_INT32, false, false, 2, 2, 2, 1, NULL, 2, 0, NULL, 2, 0, 0, NULL, 2,
                             0, 1),
               KN_EDTYPE);
  cr_expect_str_eq(kn_last_error(), "kn__cuda_gemm: expected float32, float64, float16 or "
                                    "bfloat16, got int32");
  cr_expect_eq(kn__cuda_gemm(KN_FLOAT32, false, false, (int64_t)1 << 32, 2, 2, 1, NULL, 2, 0, NULL,
                             2, 0, 0, NULL, 2, 0, 1),
               KN_ERANGE);
}

/* NVRTC compiles without a GPU: where this machine has it, the fake device's
** sm_90 gets a cubin (an ELF image) and a bad source the compiler's log. */
Test(cuda_runtime, nvrtc_compiles_for_the_device_arch) {
  use_fake();
  const char *src = "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n";
  void *image = NULL;
  size_t n = 0;
  bool ptx = true;
  kn_status s = kn__cuda_compile(src, "twice.cu", "-lineinfo", &image, &n, &ptx, NULL);
  if (s == KN_EUNSUPPORTED && strstr(kn_last_error(), "cannot load NVRTC"))
    cr_skip_test("no NVRTC on this machine: %s", kn_last_error());
  cr_assert_eq(s, KN_OK, "%s", kn_last_error());
  cr_expect_not(ptx);
  cr_assert_gt(n, 4);
  cr_expect(memcmp(image, "\177ELF", 4) == 0, "a cubin is an ELF image");
  free(image);
  kn__sb log;
  kn__sb_init(&log);
  const char *bad = "extern \"C\" __global__ void bad(float *x) {\n  x[0] = undeclared_thing;\n}\n";
  cr_assert_eq(kn__cuda_compile(bad, "bad.cu", NULL, &image, &n, &ptx, &log), KN_EINVAL);
  const char *m = kn_last_error();
  cr_expect(strncmp(m, "NVRTC could not compile bad.cu for sm_90: NVRTC_ERROR_COMPILATION\n", 66) == 0,
            "%s", m);
  cr_expect(strstr(m, "bad.cu(2): error: identifier \"undeclared_thing\" is undefined"), "%s", m);
  cr_expect(strstr(kn__sb_cstr(&log), "undeclared_thing"), "%s", kn__sb_cstr(&log));
  cr_expect_null(image);
  kn__sb_fini(&log);
}

/* ---- several threads ---- */

typedef struct worker {
  int id;
  int failures;
} worker;

static void *alloc_worker(void *arg) {
  worker *w = arg;
  static const size_t sizes[] = {100, 1000, 4096, 70000, (1 << 20) + 5};
  for (int it = 0; it < 200; it++) {
    size_t n = sizes[(it + w->id) % 5];
    void *d = NULL;
    unsigned char pattern[256], back[256];
    memset(pattern, (w->id * 31 + it) & 0xff, sizeof pattern);
    if (kn__cuda_alloc(n, &d) != KN_OK ||
        kn__cuda_memcpy(d, KN_CUDA, pattern, KN_CPU, sizeof pattern < n ? sizeof pattern : n) ||
        kn__cuda_memcpy(back, KN_CPU, d, KN_CUDA, sizeof pattern < n ? sizeof pattern : n) ||
        memcmp(back, pattern, sizeof pattern < n ? sizeof pattern : n) != 0)
      w->failures++;
    kn__cuda_free(d);
  }
  return NULL;
}

Test(cuda_runtime, threads_allocate_and_free) {
  use_fake();
  enum { T = 6 };
  pthread_t th[T];
  worker w[T];
  for (int i = 0; i < T; i++) {
    w[i] = (worker){i, 0};
    cr_assert_eq(pthread_create(&th[i], NULL, alloc_worker, &w[i]), 0);
  }
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) cr_expect_eq(w[i].failures, 0, "thread %d", i);
  kn__cuda_memstats st;
  kn__cuda_memstats_get(&st);
  cr_expect_eq(st.allocated, 0);
  cr_expect_eq(st.n_alloc, T * 200);
  size_t live;
  long allocs, frees;
  fake_counters(&live, &allocs, &frees);
  cr_expect_eq(live, st.reserved);
  cr_expect_eq(allocs, st.n_malloc);
  /* at most one block per thread and size class was ever needed */
  cr_expect_leq(allocs, T * 5);
  cr_assert_eq(kn__cuda_empty_cache(), KN_OK);
  fake_counters(&live, &allocs, &frees);
  cr_expect_eq(live, 0);
  cr_expect_eq(frees, allocs);
}
