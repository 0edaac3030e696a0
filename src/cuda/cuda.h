/*
** cuda/cuda.h: kiln's CUDA runtime (internal; the public face is
** kiln/cuda.h). See docs/CUDA.md.
**
** Nothing of CUDA is needed to build or test kiln: the driver API
** (libcuda.so.1), NVRTC (libnvrtc.so.13, .12, .so) and cuBLAS
** (libcublas.so.13, .12, .so) are opened with dlopen at first use; their
** paths can be given with KILN_CUDA_DRIVER, KILN_CUDA_NVRTC and
** KILN_CUDA_CUBLAS. kiln declares the few types and functions it calls
** itself (no CUDA header is included anywhere).
**
** One device (KILN_CUDA_DEVICE, default 0) and its primary context; all
** work goes to kiln's one stream in issue order, so a kernel never needs an
** event to see what an earlier one wrote; copies to the host synchronise.
** Device pointers travel as void * (the driver's CUdeviceptr, a 64-bit
** integer, cast); they are never dereferenced on the host.
**
** Every function here is thread-safe: initialisation happens once
** (pthread_once), the allocator and module tables are under a mutex, and
** each calling thread makes the primary context current before it calls the
** driver.
*/
#ifndef KN_CUDA_CUDA_H
#define KN_CUDA_CUDA_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "kiln/core.h"
#include "kiln/tensor.h"

/* ---- initialisation ---------------------------------------------------------- */
/* Load the driver, cuInit, pick the device, retain its primary context and
** create kiln's stream (once per process; later calls return the first
** result). Without a driver or a GPU: KN_EUNSUPPORTED with "no CUDA
** driver/GPU found: " followed by what failed (dlopen's message naming the
** library tried, or the driver's error name and text). */
kn_status kn__cuda_init(void);
/* kn__cuda_init() == KN_OK, without setting kn_last_error when it is not. */
bool kn__cuda_available(void);
/* The device's compute capability as major*10+minor (90 for an H100), its
** name (static after init), its multiprocessor count. 0/""/0 before a
** successful init. */
int kn__cuda_arch(void);
const char *kn__cuda_device_name(void);
int kn__cuda_sm_count(void);
/* The device's index (KILN_CUDA_DEVICE; the N of "cuda:N"), 0 before init. */
int kn__cuda_device_index(void);

/* ---- memory: the caching allocator ------------------------------------------- */
/* A device buffer of at least nbytes (rounded up to 512 bytes; blocks are
** reused from the cache before cuMemAlloc is called; on cuMemAlloc's
** out-of-memory the cache is emptied and the allocation tried once more).
** nbytes 0 gives a valid unique pointer. KN_ENOMEM naming the size asked
** for and the bytes allocated and reserved; KN_EUNSUPPORTED without CUDA. */
kn_status kn__cuda_alloc(size_t nbytes, void **dptr);
/* Return a buffer of kn__cuda_alloc to the cache (NULL is ignored). Work
** already issued on kiln's stream that uses it completes first (one stream:
** issue order suffices). */
void kn__cuda_free(void *dptr);
/* Release the cached, unused blocks to the driver. */
kn_status kn__cuda_empty_cache(void);
typedef struct kn__cuda_memstats {
  size_t allocated;      /* bytes in live buffers */
  size_t reserved;       /* bytes obtained from cuMemAlloc (live + cached) */
  size_t peak_allocated;
  int64_t n_malloc;      /* cuMemAlloc calls made */
  int64_t n_alloc;       /* kn__cuda_alloc calls */
} kn__cuda_memstats;
void kn__cuda_memstats_get(kn__cuda_memstats *out);

/* Copy n bytes; each side is host (KN_CPU) or device (KN_CUDA) memory.
** Device-to-device copies are queued on kiln's stream; copies involving the
** host complete before the call returns. */
kn_status kn__cuda_memcpy(void *dst, kn_device dd, const void *src, kn_device sd, size_t n);
/* Set n bytes of device memory to 0 (queued). */
kn_status kn__cuda_memset0(void *dptr, size_t n);
/* Wait for everything issued on kiln's stream. */
kn_status kn__cuda_synchronize(void);

/* ---- the GPU-time profile (prof.c): KILN_CUDA_PROFILE=1 --------------------------- */
/* Whether KILN_CUDA_PROFILE asks for it (read once). */
bool kn__cuda_prof_on(void);
/* Name the kernel function fn in reports (a copy of text is kept). */
void kn__cuda_prof_name(const void *fn, const char *text);
/* Around one piece of queued work: begin returns a handle (-1: not timed,
** the profile is off or a capture is running), end names it by fn's name or
** by text. */
int kn__cuda_prof_begin(void);
void kn__cuda_prof_end(int k, const void *fn, const char *text);
/* Synchronise, print the kernels by total GPU time (the first top) to out
** (NULL: print nothing), and start over. KN_OK without doing anything when
** the profile is off. */
kn_status kn__cuda_prof_report(FILE *out, int top);

/* ---- device-side checks (devcheck.c) ---------------------------------------------- */
/* A kernel that validates its input writes the first failure into a 16-byte
** slot of device memory: uint64 code (atomicCAS from 0), then the value it
** found. */
enum { KN__CUDA_CHECK_TARGET = 1 /* nll_loss: "Target V is out of bounds." */ };
/* The slot's device address, for a checking kernel about to be queued (the
** slot is read at the next synchronisation). KN_ENOMEM. */
kn_status kn__cuda_check_slot(void **dptr);
/* Mark the slot to be read at the next synchronisation (a replayed CUDA
** graph that holds a checking kernel). */
void kn__cuda_check_arm(void);
/* Counts the arms: a capture that changed it recorded a checking kernel. */
uint64_t kn__cuda_check_epoch(void);
/* After the stream was synchronised: when a checking kernel was queued since
** the last read, read the slot; a failure is returned as an error naming it
** (KN_ERANGE for a target out of bounds) and the slot cleared. */
kn_status kn__cuda_check_read(void);

/* ---- code: NVRTC, modules, launches -------------------------------------------- */
/* Compile CUDA C source src (name: the file name shown in messages) with
** NVRTC for this device's architecture (sm_<arch>; cubin when NVRTC can
** make one, otherwise PTX, the flag *is_ptx saying which) with
** "-default-device -std=c++17" and the options opts (may be NULL).
** *image is malloc'd, owned by the caller. On a compile error KN_EINVAL
** with NVRTC's log (its first lines) in the message, and the whole log
** appended to log when log is not NULL. */
kn_status kn__cuda_compile(const char *src, const char *name, const char *opts, void **image,
                           size_t *nimage, bool *is_ptx, kn__sb *log);
/* NVRTC's version (nvrtcVersion), loading NVRTC if needed: KN_EUNSUPPORTED
** (and 0.0) when it cannot be loaded. For the code cache's keys: a kernel
** compiled by another NVRTC is another kernel. */
kn_status kn__cuda_nvrtc_version(int *major, int *minor);
typedef struct kn__cuda_module kn__cuda_module;
/* Load a cubin or PTX image (copied by the driver: the caller may free it).
** *out is owned by the caller (kn__cuda_module_unload). */
kn_status kn__cuda_module_load(const void *image, size_t nimage, kn__cuda_module **out);
/* The kernel named name (extern "C") of m; *fn borrowed, valid while m is
** loaded. KN_EINVAL naming the kernel when m has none of that name. */
kn_status kn__cuda_module_fn(kn__cuda_module *m, const char *name, void **fn);
void kn__cuda_module_unload(kn__cuda_module *m);
/* Queue kernel fn on kiln's stream: grid and block sizes (x, y, z), dynamic
** shared memory bytes, and args: an array of pointers to each parameter's
** value, as cuLaunchKernel takes them. */
kn_status kn__cuda_launch(void *fn, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                          void **args);

/* ---- cuBLAS ----------------------------------------------------------------- */
/* C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] for b < batch, ROW-MAJOR
** matrices (kiln's layout; the call swaps operands for cuBLAS's column-major
** convention): C is m x n with leading dimension ldc, A is m x k (k x m when
** ta) with lda, B is k x n (n x k when tb) with ldb; element strides between
** batches sa, sb, sc (0: the same matrix for every b). dtype float32,
** float64, float16 or bfloat16 (16-bit types accumulate in float32). Device
** pointers. KN_EDTYPE for other dtypes; cuBLAS's status name otherwise. */
kn_status kn__cuda_gemm(kn_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        double alpha, const void *a, int64_t lda, int64_t sa, const void *b,
                        int64_t ldb, int64_t sb, double beta, void *c, int64_t ldc, int64_t sc,
                        int64_t batch);

/* ---- CUDA graphs ---------------------------------------------------------------- */
typedef struct kn__cuda_graph kn__cuda_graph;
/* Begin capturing kiln's stream (relaxed capture mode: launches, device
** copies and memsets are recorded, not run; the allocator may still call
** cuMemAlloc); kn__cuda_capture_end stops it and instantiates what was
** recorded into *out (owned by the caller, kn__cuda_graph_free). Blocks
** freed during the capture go to the graph's private pool, not to the
** cache: replays may write them, so nothing else is handed them until the
** graph is freed. Host copies and synchronisation fail during a capture. */
kn_status kn__cuda_capture_begin(void);
kn_status kn__cuda_capture_end(kn__cuda_graph **out);
bool kn__cuda_capturing(void);
/* Replay g on kiln's stream (queued). */
kn_status kn__cuda_graph_launch(kn__cuda_graph *g);
void kn__cuda_graph_free(kn__cuda_graph *g);

/* ---- timing -------------------------------------------------------------------------- */
/* Milliseconds of device time between two points of kiln's stream:
** kn__cuda_timer_start records an event, kn__cuda_timer_stop records a
** second, synchronises on it and gives the elapsed time. For benchmarks. */
kn_status kn__cuda_timer_start(void);
kn_status kn__cuda_timer_stop(double *ms);

/* Eager ops with a CUDA tensor argument never reach kiln's CPU kernels: the
** dispatcher's backend layer (ops/opdef.h, kn__dispatch_set_device_backend)
** hands them to the handler the inductor CUDA path registers, or fails
** naming the op and the device. Mixed devices fail first, with PyTorch's
** message ("Expected all tensors to be on the same device, but found at
** least two devices, cuda:0 and cpu!"). */

#endif
