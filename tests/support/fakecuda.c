/*
** tests/support/fakecuda.c: a stand-in for the CUDA driver (libcuda.so.1)
** for the tests of the CUDA runtime on machines without a GPU. Built as a
** shared library (libkn_fakecuda.so) that the tests name in
** KILN_CUDA_DRIVER.
**
** It implements the part of the driver API kiln calls on host memory: a
** device pointer is a host address, but of pages kept inaccessible
** (PROT_NONE) except while the fake itself copies or sets bytes, so host
** code that dereferences device memory (a CPU kernel handed a CUDA
** tensor's pointer) crashes at once instead of seeming to work. cuMemAlloc
** maps such pages (limited to KILN_FAKECUDA_MEM_LIMIT bytes in all, to test
** running out of memory), copies and memset copy bytes, streams, events and
** contexts are handles that do nothing. Modules, kernels and CUDA graphs are
** fakecuda_exec.c's: the images of the fake NVRTC (fakenvrtc.c) are built
** for the host and their kernels run there; any other image is refused. A
** device-to-device copy or memset while a capture is in progress is
** recorded in the graph, as the real driver does; a copy to or from the
** host fails as the real driver's capture of host work would
** (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), so no test can mistake a
** performed copy for a recorded one.
**
** KILN_FAKECUDA_DEVICES: the number of devices (default 1; 0: cuInit fails
** with CUDA_ERROR_NO_DEVICE as the real driver does). fakecuda_counters()
** reports the calls the tests count.
*/
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support/fakecuda.h"

/* The entry points are found with dlsym: no header declares them. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#define API __attribute__((visibility("default")))

typedef unsigned long long dptr;

enum {
  SUCCESS = FAKE_SUCCESS,
  INVALID_VALUE = FAKE_INVALID_VALUE,
  OUT_OF_MEMORY = FAKE_OUT_OF_MEMORY,
  NOT_INITIALIZED = FAKE_NOT_INITIALIZED,
  NO_DEVICE = FAKE_NO_DEVICE,
  INVALID_DEVICE = FAKE_INVALID_DEVICE,
  INVALID_IMAGE = FAKE_INVALID_IMAGE,
  INVALID_HANDLE = FAKE_INVALID_HANDLE,
  NOT_FOUND = FAKE_NOT_FOUND,
  NOT_SUPPORTED = FAKE_NOT_SUPPORTED,
  CAPTURE_UNSUPPORTED = FAKE_CAPTURE_UNSUPPORTED,
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int inited;                /* under mu */
static size_t used;               /* bytes live, under mu */
static long n_alloc, n_free;      /* under mu */
static char handle_dummy[8];      /* contexts, streams, events point here */
/* Live allocations (device pointer, bytes), under mu: a kernel's run opens them all. */
static struct live { char *p; size_t n; } *lives;
static size_t nlive, caplive;

static void live_add(char *p, size_t n) {
  if (nlive == caplive) {
    size_t cap = caplive ? caplive * 2 : 64;
    struct live *nl = realloc(lives, cap * sizeof *nl);
    if (!nl) abort(); /* a test double: no recovery from the host running out */
    lives = nl;
    caplive = cap;
  }
  lives[nlive++] = (struct live){p, n};
}

static void live_del(char *p) {
  for (size_t i = 0; i < nlive; i++)
    if (lives[i].p == p) {
      lives[i] = lives[--nlive];
      return;
    }
}

/* An allocation: one readable page holding its sizes, then its pages
** (PROT_NONE); the device pointer is the first of those. */
static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* Make the pages holding [p, p+n) accessible (rw) or not (mu held). */
static void open_range(const void *p, size_t n, int rw) {
  if (n == 0) return;
  size_t pg = page_size();
  uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg - 1), hi = (uintptr_t)p + n;
  mprotect((void *)lo, hi - lo, rw ? PROT_READ | PROT_WRITE : PROT_NONE);
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && v[0] ? strtol(v, NULL, 10) : dflt;
}

API int fakecuda_counters(size_t *live_bytes, long *allocs, long *frees) {
  pthread_mutex_lock(&mu);
  *live_bytes = used;
  *allocs = n_alloc;
  *frees = n_free;
  pthread_mutex_unlock(&mu);
  return 0;
}

API int cuGetErrorName(int r, const char **s) {
  switch (r) {
  case SUCCESS: *s = "CUDA_SUCCESS"; return 0;
  case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
  case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
  case NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
  case NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
  case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
  case INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return 0;
  case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return 0;
  case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
  case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return 0;
  case CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return 0;
  default: *s = NULL; return INVALID_VALUE;
  }
}

API int cuGetErrorString(int r, const char **s) {
  switch (r) {
  case SUCCESS: *s = "no error"; return 0;
  case INVALID_VALUE: *s = "invalid argument"; return 0;
  case OUT_OF_MEMORY: *s = "out of memory"; return 0;
  case NOT_INITIALIZED: *s = "initialization error"; return 0;
  case NO_DEVICE: *s = "no CUDA-capable device is detected"; return 0;
  case INVALID_DEVICE: *s = "invalid device ordinal"; return 0;
  case INVALID_IMAGE: *s = "device kernel image is invalid"; return 0;
  case INVALID_HANDLE: *s = "invalid resource handle"; return 0;
  case NOT_FOUND: *s = "named symbol not found"; return 0;
  case NOT_SUPPORTED:
    *s = "operation not supported (the fake CUDA driver runs only the fake NVRTC's kernels)";
    return 0;
  case CAPTURE_UNSUPPORTED: *s = "operation not permitted when stream is capturing"; return 0;
  default: *s = NULL; return INVALID_VALUE;
  }
}

API int cuInit(unsigned flags) {
  if (flags != 0) return INVALID_VALUE;
  if (env_long("KILN_FAKECUDA_DEVICES", 1) <= 0) return NO_DEVICE;
  pthread_mutex_lock(&mu);
  inited = 1;
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

static int ready(void) {
  pthread_mutex_lock(&mu);
  int r = inited ? SUCCESS : NOT_INITIALIZED;
  pthread_mutex_unlock(&mu);
  return r;
}

API int cuDriverGetVersion(int *v) {
  *v = 13000;
  return SUCCESS;
}

API int cuDeviceGetCount(int *n) {
  *n = (int)env_long("KILN_FAKECUDA_DEVICES", 1);
  return ready();
}

API int cuDeviceGet(int *dev, int ordinal) {
  if (ready()) return NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= env_long("KILN_FAKECUDA_DEVICES", 1)) return INVALID_DEVICE;
  *dev = ordinal;
  return SUCCESS;
}

API int cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  if (len <= 0) return INVALID_VALUE;
  strncpy(name, "kiln fake CUDA device", (size_t)len - 1);
  name[len - 1] = '\0';
  return ready();
}

API int cuDeviceGetAttribute(int *v, int attr, int dev) {
  (void)dev;
  switch (attr) {
  case 16: *v = 132; break; /* multiprocessors */
  case 75: *v = 9; break;   /* compute capability major */
  case 76: *v = 0; break;   /* minor */
  default: return INVALID_VALUE;
  }
  return ready();
}

static size_t limit(void) {
  long l = env_long("KILN_FAKECUDA_MEM_LIMIT", 0);
  return l > 0 ? (size_t)l : (size_t)1 << 34;
}

API int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  (void)dev;
  *bytes = limit();
  return ready();
}

API int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = handle_dummy;
  return ready();
}

API int cuCtxSetCurrent(void *ctx) { return ctx == handle_dummy ? SUCCESS : INVALID_HANDLE; }

API int cuStreamCreate(void **s, unsigned flags) {
  (void)flags;
  *s = handle_dummy;
  return ready();
}

API int cuStreamSynchronize(void *s) {
  (void)s;
  return fake_capturing() ? CAPTURE_UNSUPPORTED : SUCCESS;
}

API int cuMemAlloc_v2(dptr *p, size_t n) {
  if (n == 0) return INVALID_VALUE;
  size_t pg = page_size(), total = pg + (n + pg - 1) / pg * pg;
  pthread_mutex_lock(&mu);
  int r = n > limit() - used ? OUT_OF_MEMORY : SUCCESS;
  char *base = r == SUCCESS ? mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
                                   MAP_NORESERVE, -1, 0)
                            : MAP_FAILED;
  if (base == MAP_FAILED || mprotect(base, pg, PROT_READ | PROT_WRITE) != 0) r = OUT_OF_MEMORY;
  if (r == SUCCESS) {
    size_t sizes[2] = {n, total};
    memcpy(base, sizes, sizeof sizes);
    used += n;
    n_alloc++;
    *p = (dptr)(uintptr_t)(base + pg);
    live_add(base + pg, n);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

API int cuMemFree_v2(dptr p) {
  if (!p) return INVALID_VALUE;
  char *base = (char *)(uintptr_t)p - page_size();
  size_t sizes[2];
  memcpy(sizes, base, sizeof sizes);
  pthread_mutex_lock(&mu);
  used -= sizes[0];
  n_free++;
  live_del(base + page_size());
  pthread_mutex_unlock(&mu);
  munmap(base, sizes[1]);
  return SUCCESS;
}

API int cuMemGetInfo_v2(size_t *fre, size_t *total) {
  pthread_mutex_lock(&mu);
  *total = limit();
  *fre = *total - used;
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

void fake_run_begin(void) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nlive; i++) open_range(lives[i].p, lives[i].n, 1);
}

void fake_run_end(void) {
  for (size_t i = 0; i < nlive; i++) open_range(lives[i].p, lives[i].n, 0);
  pthread_mutex_unlock(&mu);
}

/* A copy or memset (dev_dst/dev_src: that side is device memory, opened
** for the operation only); while capturing, device-only work is recorded
** and host work refused (see the top). The lock is held throughout, so no
** other thread sees the pages open. */
static int host_work(void *dst, bool dev_dst, const void *src, bool dev_src, int byte, size_t n) {
  if (!dst || (!src && byte < 0)) return INVALID_VALUE;
  if (fake_capturing())
    return dev_dst && (dev_src || !src) ? fake_capture_copy(dst, src, byte, n)
                                        : CAPTURE_UNSUPPORTED;
  pthread_mutex_lock(&mu);
  int r = SUCCESS;
  if (n > 0) {
    if (dev_dst) open_range(dst, n, 1);
    if (dev_src && src) open_range(src, n, 1);
    if (src) memmove(dst, src, n);
    else memset(dst, byte, n);
    if (dev_dst) open_range(dst, n, 0);
    if (dev_src && src) open_range(src, n, 0);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

int fake_copy_now(void *dst, const void *src, int byte, size_t n) {
  pthread_mutex_lock(&mu);
  if (n > 0) {
    open_range(dst, n, 1);
    if (src) open_range(src, n, 1);
    if (src) memmove(dst, src, n);
    else memset(dst, byte, n);
    open_range(dst, n, 0);
    if (src) open_range(src, n, 0);
  }
  pthread_mutex_unlock(&mu);
  return SUCCESS;
}

API int cuMemcpyHtoDAsync_v2(dptr d, const void *h, size_t n, void *s) {
  (void)s;
  return host_work((void *)(uintptr_t)d, true, h, false, -1, n);
}

API int cuMemcpyDtoHAsync_v2(void *h, dptr d, size_t n, void *s) {
  (void)s;
  return host_work(h, false, (const void *)(uintptr_t)d, true, -1, n);
}

API int cuMemcpyDtoDAsync_v2(dptr d, dptr src, size_t n, void *s) {
  (void)s;
  return host_work((void *)(uintptr_t)d, true, (const void *)(uintptr_t)src, true, -1, n);
}

API int cuMemsetD8Async(dptr d, unsigned char v, size_t n, void *s) {
  (void)s;
  return host_work((void *)(uintptr_t)d, true, NULL, false, v, n);
}

API int cuEventCreate(void **e, unsigned flags) {
  (void)flags;
  *e = handle_dummy;
  return SUCCESS;
}

API int cuEventRecord(void *e, void *s) {
  (void)e, (void)s;
  return SUCCESS;
}

API int cuEventSynchronize(void *e) {
  (void)e;
  return SUCCESS;
}

API int cuEventElapsedTime_v2(float *ms, void *a, void *b) {
  (void)a, (void)b;
  *ms = 0.0f; /* nothing ran */
  return SUCCESS;
}

