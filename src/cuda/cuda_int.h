/*
** cuda/cuda_int.h: private to src/cuda/. kiln's own declarations of the
** CUDA driver, NVRTC and cuBLAS functions it calls (no CUDA header is
** included anywhere), the tables of function pointers dlsym fills, and the
** runtime's shared state.
**
** Each library's functions are listed once in an X-macro: field, symbol,
** required (a library lacking a required symbol is refused when it is
** loaded), return type, parameter list. Handles are opaque pointers; a
** device pointer is the driver's CUdeviceptr (unsigned long long).
*/
#ifndef KN_CUDA_CUDA_INT_H
#define KN_CUDA_CUDA_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "cuda/cuda.h"

typedef unsigned long long kn__cudptr; /* CUdeviceptr */

/* Driver API result codes and enumerators kiln uses (values of cuda.h). */
enum {
  KN__CU_SUCCESS = 0,
  KN__CU_ERROR_OUT_OF_MEMORY = 2,
  KN__CU_ERROR_NOT_FOUND = 500,
  KN__CU_ATTR_SM_COUNT = 16,        /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
  KN__CU_ATTR_CC_MAJOR = 75,        /* ..._COMPUTE_CAPABILITY_MAJOR */
  KN__CU_ATTR_CC_MINOR = 76,        /* ..._COMPUTE_CAPABILITY_MINOR */
  KN__CU_FUNC_ATTR_MAX_DYN_SHMEM = 8, /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
  KN__CU_STREAM_NON_BLOCKING = 1,
  KN__CU_CAPTURE_MODE_GLOBAL = 0,
  KN__CU_CAPTURE_MODE_RELAXED = 2, /* cuMemAlloc may run while capturing */
};

#define KN__CU_FUNCS(X)                                                                  \
  X(GetErrorName, "cuGetErrorName", 1, int, (int, const char **))                        \
  X(GetErrorString, "cuGetErrorString", 1, int, (int, const char **))                    \
  X(Init, "cuInit", 1, int, (unsigned))                                                  \
  X(DriverGetVersion, "cuDriverGetVersion", 1, int, (int *))                             \
  X(DeviceGetCount, "cuDeviceGetCount", 1, int, (int *))                                 \
  X(DeviceGet, "cuDeviceGet", 1, int, (int *, int))                                      \
  X(DeviceGetName, "cuDeviceGetName", 1, int, (char *, int, int))                        \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", 1, int, (int *, int, int))               \
  X(DeviceTotalMem, "cuDeviceTotalMem_v2", 1, int, (size_t *, int))                      \
  X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1, int, (void **, int))                \
  X(CtxSetCurrent, "cuCtxSetCurrent", 1, int, (void *))                                  \
  X(StreamCreate, "cuStreamCreate", 1, int, (void **, unsigned))                         \
  X(StreamSynchronize, "cuStreamSynchronize", 1, int, (void *))                          \
  X(MemAlloc, "cuMemAlloc_v2", 1, int, (kn__cudptr *, size_t))                           \
  X(MemFree, "cuMemFree_v2", 1, int, (kn__cudptr))                                       \
  X(MemGetInfo, "cuMemGetInfo_v2", 1, int, (size_t *, size_t *))                         \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 1, int,                                     \
    (kn__cudptr, const void *, size_t, void *))                                          \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 1, int, (void *, kn__cudptr, size_t, void *)) \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", 1, int,                                     \
    (kn__cudptr, kn__cudptr, size_t, void *))                                            \
  X(MemsetD8Async, "cuMemsetD8Async", 1, int, (kn__cudptr, unsigned char, size_t, void *)) \
  X(ModuleLoadData, "cuModuleLoadData", 1, int, (void **, const void *))                 \
  X(ModuleGetFunction, "cuModuleGetFunction", 1, int, (void **, void *, const char *))   \
  X(ModuleUnload, "cuModuleUnload", 1, int, (void *))                                    \
  X(FuncSetAttribute, "cuFuncSetAttribute", 0, int, (void *, int, int))                  \
  X(LaunchKernel, "cuLaunchKernel", 1, int,                                              \
    (void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,       \
     void *, void **, void **))                                                          \
  X(EventCreate, "cuEventCreate", 1, int, (void **, unsigned))                           \
  X(EventRecord, "cuEventRecord", 1, int, (void *, void *))                              \
  X(EventSynchronize, "cuEventSynchronize", 1, int, (void *))                            \
  X(EventDestroy, "cuEventDestroy_v2", 0, int, (void *))                                 \
  X(EventElapsedTime2, "cuEventElapsedTime_v2", 0, int, (float *, void *, void *))       \
  X(EventElapsedTime, "cuEventElapsedTime", 0, int, (float *, void *, void *))           \
  X(StreamBeginCapture, "cuStreamBeginCapture_v2", 1, int, (void *, int))                \
  X(StreamEndCapture, "cuStreamEndCapture", 1, int, (void *, void **))                   \
  X(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 0, int,                    \
    (void **, void *, unsigned long long))                                               \
  X(GraphInstantiate2, "cuGraphInstantiate_v2", 0, int,                                  \
    (void **, void *, void **, char *, size_t))                                          \
  X(GraphLaunch, "cuGraphLaunch", 1, int, (void *, void *))                              \
  X(GraphExecDestroy, "cuGraphExecDestroy", 1, int, (void *))                            \
  X(GraphDestroy, "cuGraphDestroy", 1, int, (void *))

#define KN__NVRTC_FUNCS(X)                                                               \
  X(GetErrorString, "nvrtcGetErrorString", 1, const char *, (int))                       \
  X(Version, "nvrtcVersion", 1, int, (int *, int *))                                     \
  X(CreateProgram, "nvrtcCreateProgram", 1, int,                                         \
    (void **, const char *, const char *, int, const char *const *, const char *const *)) \
  X(CompileProgram, "nvrtcCompileProgram", 1, int, (void *, int, const char *const *))   \
  X(GetProgramLogSize, "nvrtcGetProgramLogSize", 1, int, (void *, size_t *))             \
  X(GetProgramLog, "nvrtcGetProgramLog", 1, int, (void *, char *))                       \
  X(GetPTXSize, "nvrtcGetPTXSize", 1, int, (void *, size_t *))                           \
  X(GetPTX, "nvrtcGetPTX", 1, int, (void *, char *))                                     \
  X(GetCUBINSize, "nvrtcGetCUBINSize", 0, int, (void *, size_t *))                       \
  X(GetCUBIN, "nvrtcGetCUBIN", 0, int, (void *, char *))                                 \
  X(GetNumSupportedArchs, "nvrtcGetNumSupportedArchs", 0, int, (int *))                  \
  X(GetSupportedArchs, "nvrtcGetSupportedArchs", 0, int, (int *))                        \
  X(DestroyProgram, "nvrtcDestroyProgram", 1, int, (void **))

/* cuBLAS: cublasOperation_t N=0 T=1; cudaDataType R_32F=0 R_64F=1 R_16F=2
** R_16BF=14; cublasComputeType_t COMPUTE_32F=68; CUBLAS_GEMM_DEFAULT=-1. */
#define KN__CUBLAS_FUNCS(X)                                                              \
  X(Create, "cublasCreate_v2", 1, int, (void **))                                        \
  X(Destroy, "cublasDestroy_v2", 1, int, (void *))                                       \
  X(SetStream, "cublasSetStream_v2", 1, int, (void *, void *))                           \
  X(SetWorkspace, "cublasSetWorkspace_v2", 0, int, (void *, void *, size_t))             \
  X(GetVersion, "cublasGetVersion_v2", 0, int, (void *, int *))                          \
  X(GetStatusName, "cublasGetStatusName", 0, const char *, (int))                        \
  X(Sgemm, "cublasSgemm_v2", 1, int,                                                     \
    (void *, int, int, int, int, int, const float *, const float *, int, const float *,  \
     int, const float *, float *, int))                                                  \
  X(Dgemm, "cublasDgemm_v2", 1, int,                                                     \
    (void *, int, int, int, int, int, const double *, const double *, int,               \
     const double *, int, const double *, double *, int))                                \
  X(GemmEx, "cublasGemmEx", 1, int,                                                      \
    (void *, int, int, int, int, int, const void *, const void *, int, int,              \
     const void *, int, int, const void *, void *, int, int, int, int))                  \
  X(SgemmSB, "cublasSgemmStridedBatched", 1, int,                                        \
    (void *, int, int, int, int, int, const float *, const float *, int, long long,      \
     const float *, int, long long, const float *, float *, int, long long, int))         \
  X(DgemmSB, "cublasDgemmStridedBatched", 1, int,                                        \
    (void *, int, int, int, int, int, const double *, const double *, int, long long,    \
     const double *, int, long long, const double *, double *, int, long long, int))     \
  X(GemmSBEx, "cublasGemmStridedBatchedEx", 1, int,                                      \
    (void *, int, int, int, int, int, const void *, const void *, int, int, long long,   \
     const void *, int, int, long long, const void *, void *, int, int, long long, int,  \
     int, int))

#define KN__FN_FIELD(field, sym, req, ret, args) ret(*field) args;
typedef struct kn__cu_api { KN__CU_FUNCS(KN__FN_FIELD) } kn__cu_api;
typedef struct kn__nvrtc_api { KN__NVRTC_FUNCS(KN__FN_FIELD) } kn__nvrtc_api;
typedef struct kn__cublas_api { KN__CUBLAS_FUNCS(KN__FN_FIELD) } kn__cublas_api;
#undef KN__FN_FIELD

/* The runtime's state after a successful kn__cuda_init (written once, then
** only read; the allocator and the library tables have their own locks). */
typedef struct kn__cuda_rt {
  kn__cu_api cu;
  void *ctx;     /* the device's primary context */
  void *stream;  /* kiln's stream */
  int device;    /* CUdevice */
  int ordinal;   /* KILN_CUDA_DEVICE */
  int arch;      /* major*10 + minor */
  int sms;
  int driver_version;
  size_t total_mem;
  char name[256];
  char driver_path[512];
} kn__cuda_rt;

/* The runtime state (never NULL; its fields are valid after kn__cuda_enter
** succeeded). */
kn__cuda_rt *kn__cuda_rt_get(void);
/* Initialise once, then make the primary context current on this thread;
** every entry point of the runtime begins with it. */
kn_status kn__cuda_enter(void);
/* KN_OK when r is CUDA_SUCCESS, else an error naming the call and the
** driver's error name and text ("cuMemAlloc_v2: CUDA_ERROR_INVALID_VALUE
** (invalid argument)"); out-of-memory codes give KN_ENOMEM. */
kn_status kn__cu_check(int r, const char *call);
/* The driver's error name and text of r, written into buf. */
const char *kn__cu_errstr(int r, char *buf, size_t n);

/* dlopen one of a library's candidates: the path in the environment
** variable env when set (only that), else each of sonames (NULL-ended) in
** turn. On failure what was tried and why goes into why (size nwhy) and
** NULL is returned. The path that loaded goes into path. */
void *kn__cuda_dlopen(const char *env, const char *const *sonames, char *path, size_t npath,
                      char *why, size_t nwhy);
/* Fill a table of nfn function pointers from lib (names and required flags
** in parallel arrays); the first missing required symbol is named in why. */
bool kn__cuda_dlsyms(void *lib, void **table, const char *const *names, const bool *req,
                     size_t nfn, char *why, size_t nwhy);

/* NVRTC and cuBLAS, loaded at first use (KN_EUNSUPPORTED naming what was
** tried when missing). *api is valid for the rest of the process. */
kn_status kn__nvrtc_get(const kn__nvrtc_api **api);
kn_status kn__cublas_get(const kn__cublas_api **api, void **handle);
/* The library paths loaded so far ("" when not loaded). */
const char *kn__cuda_nvrtc_path(void);
const char *kn__cuda_cublas_path(void);

/* A capture in progress: the allocator keeps the blocks freed meanwhile in
** the capture's private pool (alloc.c). */
void kn__cuda_set_capturing(bool on);
/* The capture's pool, handed to the graph at the end of the capture (owned:
** kn__cuda_pool_release, which returns its blocks to the cache once the
** graph is destroyed). NULL without memory (the blocks stay pooled). */
typedef struct kn__cuda_pool kn__cuda_pool;
kn__cuda_pool *kn__cuda_pool_detach(void);
void kn__cuda_pool_release(kn__cuda_pool *p);

#endif
