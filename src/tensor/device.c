/*
** tensor/device.c: tensors whose storage is on the CUDA device. Their data
** never reaches the host through kn_data (which refuses them); reading
** elements (kn_get, kn_item_*, printing) copies from the device. The public
** CUDA queries of kiln/cuda.h that need no op live here too.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda.h"
#include "kiln/cuda.h"
#include "tensor/tensor.h"

bool kn__tensor_on_cuda(const kn_tensor *t) { return t && t->storage->device == KN_CUDA; }

kn_status kn__cuda_refuse_data(const kn_tensor *t, const char *api) {
  (void)t;
  return kn__error(KN_EINVAL,
                   "%s: the tensor is on cuda:%d (device memory, not readable from the host): "
                   "copy it to the host first with kn_to_device(t, KN_CPU, &out), or take its "
                   "device address with kn_cuda_data_ptr",
                   api, kn__cuda_device_index());
}

/* The elements a view reaches from its offset (0 when empty). */
static int64_t extent(const kn_tensor *t) {
  int64_t r = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) return 0;
    r += (t->sizes[d] - 1) * t->strides[d];
  }
  return r;
}

kn_tensor *kn__tensor_host_copy(const kn_tensor *t) {
  int64_t n = extent(t);
  size_t es = kn_dtype_size(t->dtype);
  kn__storage *st = kn__storage_new((size_t)n * es, KN_CPU);
  if (!st) {
    kn__oom();
    return NULL;
  }
  const char *src = (const char *)t->storage->data + t->offset * (int64_t)es;
  if (kn__cuda_memcpy(st->data, KN_CPU, src, KN_CUDA, (size_t)n * es) != KN_OK) {
    kn__storage_release(st);
    return NULL;
  }
  kn_tensor *h = kn__tensor_wrap(st, t->dtype, t->ndim, t->sizes, t->strides, 0);
  kn__storage_release(st); /* the wrap retained it */
  if (!h) kn__oom();
  return h;
}

kn_status kn__cuda_read_element(const kn_tensor *t, int64_t off, void *out) {
  size_t es = kn_dtype_size(t->dtype);
  return kn__cuda_memcpy(out, KN_CPU, (const char *)t->storage->data + off * (int64_t)es,
                         KN_CUDA, es);
}

void *kn_cuda_data_ptr(const kn_tensor *t) {
  if (!t) {
    kn__error(KN_EINVAL, "kn_cuda_data_ptr: expected a tensor, got NULL");
    return NULL;
  }
  if (!kn__tensor_on_cuda(t)) {
    kn__error(KN_EINVAL, "kn_cuda_data_ptr: expected a tensor on cuda, got one on %s (use "
                         "kn_data for host tensors)",
              t->device == KN_META ? "meta" : t->is_fake ? "a fake device" : "cpu");
    return NULL;
  }
  return (char *)t->storage->data + t->offset * (int64_t)kn_dtype_size(t->dtype);
}

bool kn_cuda_is_available(void) { return kn__cuda_available(); }

const char *kn_cuda_device_name(void) {
  return kn__cuda_init() == KN_OK ? kn__cuda_device_name() : NULL;
}

kn_status kn_cuda_synchronize(void) { return kn__cuda_synchronize(); }

void kn_cuda_memory_stats(kn_cuda_memstats *out) {
  kn__cuda_memstats s;
  kn__cuda_memstats_get(&s);
  *out = (kn_cuda_memstats){s.allocated, s.reserved, s.peak_allocated, s.n_malloc, s.n_alloc};
}

kn_status kn_cuda_empty_cache(void) { return kn__cuda_empty_cache(); }
