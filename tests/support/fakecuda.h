/*
** tests/support/fakecuda.h: what the two halves of the fake CUDA driver
** (fakecuda.c: memory, copies, streams; fakecuda_exec.c: modules, kernels,
** graphs) share. Internal to libkn_fakecuda.so.
*/
#ifndef KN_TESTS_FAKECUDA_H
#define KN_TESTS_FAKECUDA_H

#include <stdbool.h>
#include <stddef.h>

enum {
  FAKE_SUCCESS = 0,
  FAKE_INVALID_VALUE = 1,
  FAKE_OUT_OF_MEMORY = 2,
  FAKE_NOT_INITIALIZED = 3,
  FAKE_NO_DEVICE = 100,
  FAKE_INVALID_DEVICE = 101,
  FAKE_INVALID_IMAGE = 200,
  FAKE_INVALID_HANDLE = 400,
  FAKE_NOT_FOUND = 500,
  FAKE_NOT_SUPPORTED = 801,
  FAKE_CAPTURE_UNSUPPORTED = 900,
};

/* The first bytes of an image of the fake NVRTC (tests/support/fakenvrtc.c):
** the CUDA source itself follows, which cuModuleLoadData builds for the
** host with g++ and tests/cuda/shim.h. */
#define FAKE_PTX_MAGIC "// kiln fake NVRTC image\n"

/* Around a kernel's run on the host: take the fake's lock and make every
** live allocation's pages accessible; then close them and unlock. */
void fake_run_begin(void);
void fake_run_end(void);
/* Whether a capture is in progress; capture a copy or memset (src NULL: set
** n bytes to byte) as a graph node. Return a driver result. */
bool fake_capturing(void);
int fake_capture_copy(void *dst, const void *src, int byte, size_t n);
/* Host work that stands for a kernel (the fake cuBLAS): run(args) now with
** device memory open, or, while capturing, a graph node that does so on
** each replay (n bytes of args copied, at most 2048). A driver result. */
int fake_host_work(void (*run)(const void *args), const void *args, size_t n);
/* A copy or memset done now, as host_work of fakecuda.c (not captured). */
int fake_copy_now(void *dst, const void *src, int byte, size_t n);

#endif
