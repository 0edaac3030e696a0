/*
** kiln/cuda.h: tensors on an NVIDIA GPU (the KN_CUDA device). See
** docs/CUDA.md.
**
** kiln needs nothing of CUDA to build: the driver (libcuda.so.1), NVRTC and
** cuBLAS are loaded when first used (their paths can be given with
** KILN_CUDA_DRIVER, KILN_CUDA_NVRTC and KILN_CUDA_CUBLAS). One device is
** used, KILN_CUDA_DEVICE (default 0), named cuda:<index>. Without a driver
** or a GPU, every function here that needs one fails with KN_EUNSUPPORTED
** and "no CUDA driver/GPU found: <what failed>".
**
** Device memory comes from a caching allocator: freed blocks are kept for
** reuse (kn_cuda_memory_stats, kn_cuda_empty_cache). Work on the device is
** queued in order on one stream; copies to the host wait for it.
*/
#ifndef KILN_CUDA_H
#define KILN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/core.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a CUDA driver and a device can be used (initialises CUDA on the
** first call; never sets kn_last_error). */
KN_API bool kn_cuda_is_available(void);
/* The device's name ("NVIDIA H100 80GB HBM3"; static), or NULL with
** kn_last_error without CUDA. */
KN_API const char *kn_cuda_device_name(void);

/* A copy of t on device dev (KN_CPU or KN_CUDA) in *out (a new reference,
** owned by the caller; also recorded in the open autorelease scope). A
** non-contiguous source is copied as a contiguous tensor; when t is already
** on dev, *out is a new reference to t itself. The copy records no
** autograd history (it is a leaf). KN_EINVAL for a meta or fake tensor. */
KN_API kn_status kn_to_device(kn_tensor *t, kn_device dev, kn_tensor **out);
/* The device address of t's first element (t on KN_CUDA), for passing to
** CUDA code; borrowed, valid while t lives. NULL with kn_last_error for a
** tensor not on the GPU. (kn_data of a CUDA tensor is NULL with an error.) */
KN_API void *kn_cuda_data_ptr(const kn_tensor *t);
/* Wait until every queued operation on the device has finished. */
KN_API kn_status kn_cuda_synchronize(void);

typedef struct kn_cuda_memstats {
  size_t allocated;      /* bytes in live tensors' storages */
  size_t reserved;       /* bytes held from the driver (live + cached) */
  size_t peak_allocated; /* the most bytes allocated at once */
  int64_t n_driver_allocs; /* cuMemAlloc calls made */
  int64_t n_allocs;        /* allocations served (from the cache or the driver) */
} kn_cuda_memstats;
/* The caching allocator's counters (all zero before CUDA is used). */
KN_API void kn_cuda_memory_stats(kn_cuda_memstats *out);
/* Give the cached, unused device memory back to the driver. */
KN_API kn_status kn_cuda_empty_cache(void);

#ifdef __cplusplus
}
#endif

#endif
