/*
** cuda/devcheck.c: device-side checks, PyTorch's device-side asserts as
** error values. A kernel that validates its input (the targets of
** nll_loss) records its first failure in a 16-byte slot of device memory: a
** code (KN__CUDA_CHECK_*, cuda/cuda.h) and the value it found. Reading the slot needs
** the stream synchronised, so it is read where kiln synchronises anyway
** (kn__cuda_synchronize and every copy to the host), and only when a
** checking kernel was queued since the last read: programs without such
** kernels pay nothing. A failure becomes the error of that call, naming the
** check and the value, and the slot is cleared.
*/
#include <stdatomic.h>
#include <stdint.h>

#include "core/error.h"
#include "cuda/cuda_int.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *slot;               /* device memory, 2 x uint64 (under mu; kept for the process) */
static atomic_bool pending;      /* a checking kernel was queued since the last read */
static atomic_uint_fast64_t arms; /* how many times the slot was handed out or re-armed */

kn_status kn__cuda_check_slot(void **dptr) {
  *dptr = NULL;
  kn_status s = KN_OK;
  pthread_mutex_lock(&mu);
  if (!slot) {
    s = kn__cuda_alloc(16, &slot);
    if (s == KN_OK && (s = kn__cuda_memset0(slot, 16)) != KN_OK) {
      kn__cuda_free(slot);
      slot = NULL;
    }
  }
  *dptr = slot;
  pthread_mutex_unlock(&mu);
  if (s == KN_OK) kn__cuda_check_arm();
  return s;
}

void kn__cuda_check_arm(void) {
  atomic_store(&pending, true);
  atomic_fetch_add(&arms, 1);
}

uint64_t kn__cuda_check_epoch(void) { return atomic_load(&arms); }

static kn_status report(uint64_t code, uint64_t value) {
  if (code == KN__CUDA_CHECK_TARGET)
    return kn__error(KN_ERANGE, "Target %lld is out of bounds. (a device-side check: a kernel "
                     "queued on cuda:%d before this synchronisation found it)",
                     (long long)value, kn__cuda_device_index());
  return kn__error(KN_EINTERNAL, "device-side check %llu failed with value %lld on cuda:%d",
                   (unsigned long long)code, (long long)value, kn__cuda_device_index());
}

kn_status kn__cuda_check_read(void) {
  if (!atomic_exchange(&pending, false)) return KN_OK;
  kn__cuda_rt *r = kn__cuda_rt_get();
  uint64_t v[2] = {0, 0};
  pthread_mutex_lock(&mu);
  void *p = slot;
  pthread_mutex_unlock(&mu);
  if (!p) return KN_OK;
  kn__cudptr d = (kn__cudptr)(uintptr_t)p;
  kn_status s = kn__cu_check(r->cu.MemcpyDtoHAsync(v, d, sizeof v, r->stream), "cuMemcpyDtoHAsync_v2");
  if (s == KN_OK) s = kn__cu_check(r->cu.StreamSynchronize(r->stream), "cuStreamSynchronize");
  if (s != KN_OK || v[0] == 0) return s;
  s = kn__cu_check(r->cu.MemsetD8Async(d, 0, sizeof v, r->stream), "cuMemsetD8Async");
  if (s == KN_OK) s = kn__cu_check(r->cu.StreamSynchronize(r->stream), "cuStreamSynchronize");
  return s == KN_OK ? report(v[0], v[1]) : s;
}
