/*
** ops/cuda_ops.c: the dispatcher's device layer for CUDA tensors (which
** device a call runs on, the device backend handler) and the ops the ops
** layer runs on the GPU itself: copy_, clone, _to_copy, fill_, zero_, mm,
** bmm, addmm, _reshape_copy, cat, stack and _nll_loss_target (matmul,
** linear, contiguous and to.dtype are composites of these and of views).
** Also kn_to_device (kiln/cuda.h).
*/
#include <stdatomic.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda.h"
#include "kiln/cuda.h"
#include "ops/cuda_ops.h"
#include "ops/iter.h"
#include "ops/pointwise.h"
#include "tensor/tensor.h"

/* The handler of ops on KN_CUDA the ops layer has no kernel for
** (kn__dispatch_set_device_backend; a process-wide setting). */
static _Atomic(kn__device_backend_fn) cuda_backend;

kn_status kn__dispatch_set_device_backend(kn_device dev, kn__device_backend_fn fn) {
  if (dev != KN_CUDA)
    return kn__error(KN_EINVAL, "kn__dispatch_set_device_backend: only the cuda device takes a "
                                "backend, got device %d", (int)dev);
  atomic_store(&cuda_backend, fn);
  return KN_OK;
}

static void device_name(kn_device d, char *buf, size_t n) {
  if (d == KN_CUDA) snprintf(buf, n, "cuda:%d", kn__cuda_device_index());
  else snprintf(buf, n, "%s", d == KN_META ? "meta" : "cpu");
}

static kn_status mixed_devices(kn_device a, kn_device b) {
  char x[32], y[32];
  device_name(a, x, sizeof x);
  device_name(b, y, sizeof y);
  return kn__error(KN_EINVAL, "Expected all tensors to be on the same device, but found at least "
                              "two devices, %s and %s!", x, y);
}

/* A 0-dim tensor on the host: PyTorch lets one take part in an op on CUDA
** tensors as a scalar (it does not count as a device). */
static bool cpu_scalar(const kn_tensor *t) { return !kn__tensor_on_cuda(t) && t->ndim == 0; }

kn_status kn__call_device(const kn__call *c, kn_device *dev) {
  int n = kn__call_ninputs(c);
  *dev = KN_CPU;
  for (int k = 0; k < n && *dev == KN_CPU; k++)
    if (kn__tensor_on_cuda(kn__call_input(c, k))) *dev = KN_CUDA;
  if (*dev == KN_CPU || c->op->id == KN_OP_COPY_) return KN_OK;
  bool seen = false;
  kn_device first = KN_CPU;
  for (int k = 0; k < n; k++) {
    const kn_tensor *t = kn__call_input(c, k);
    if (!t || cpu_scalar(t)) continue;
    kn_device d = kn__tensor_on_cuda(t) ? KN_CUDA : KN_CPU;
    if (!seen) first = d, seen = true;
    else if (d != first) return mixed_devices(first, d);
  }
  return KN_OK;
}

static _Thread_local kn_device meta_values_device = KN_META;

kn_device kn__meta_values_device_set(kn_device dev) {
  kn_device prev = meta_values_device;
  meta_values_device = dev;
  return prev;
}

kn_device kn__value_device(const kn_tensor *t) {
  kn_device d = kn_tensor_device(t);
  return d == KN_META && t && !t->is_fake && meta_values_device != KN_META ? meta_values_device : d;
}

/* ---- the ops layer's own CUDA kernels ---- */

static kn_status cuda_copy_(const kn__call *c, kn__outs *out) {
  (void)out;
  kn_tensor *self = c->args[0].u.t;
  const kn_tensor *src = c->args[1].u.t;
  if (self == src) return KN_OK;
  if (!kn_same_storage(self, src)) return kn__cuda_copy_into(self, src);
  /* may overlap: through a temporary */
  kn_tensor *tmp = kn__cuda_contiguous(src, src->dtype);
  kn_status st = tmp ? kn__cuda_copy_into(self, tmp) : kn_last_status();
  kn_release(tmp);
  return st;
}

static kn_status cuda_fill_(const kn__call *c, kn__outs *out) {
  (void)out;
  kn_tensor *self = c->args[0].u.t;
  kn_scalar v = c->nargs > 1 ? c->args[1].u.s : kn_int(0);
  unsigned char val[8] = {0};
  if (v.kind == KN_SCALAR_FLOAT) kn__store_double(val, self->dtype, v.v.f);
  else kn__store_int(val, self->dtype, kn__pw_scalar_int(v));
  return kn__cuda_fill(self, val);
}

static kn_status no_kernel(const kn__call *c) {
  return kn__error(KN_EUNSUPPORTED,
                   "aten.%s%s%s: no CUDA kernel for this op (cuda:%d): kiln runs copies, fills "
                   "and matrix products on the GPU itself and every other op through the CUDA "
                   "code generator, which is not registered in this build (or move the "
                   "tensors to the host with kn_to_device)",
                   c->op->name, c->op->overload[0] ? "." : "", c->op->overload,
                   kn__cuda_device_index());
}

/* _reshape_copy: the input's elements in order into the contiguous output,
** written through a view of the output with the input's sizes. */
static kn_status reshape_copy(const kn__call *c, kn__outs *out) {
  const kn_tensor *x = c->args[0].u.t;
  int64_t st[KN_MAX_DIMS];
  kn__contiguous_strides(x->ndim, x->sizes, st);
  kn_tensor *v = kn__make_view(out->t[0], x->ndim, x->sizes, st, out->t[0]->offset);
  kn_status s = v ? kn__cuda_copy_into(v, x) : kn_last_status();
  kn_release(v);
  return s;
}

/* clone and _to_copy: a copy converting to the output's dtype. */
static kn_status clone_k(const kn__call *c, kn__outs *out) {
  return kn__cuda_copy_into(out->t[0], c->args[0].u.t);
}

/* cat and stack: their kernels copy into parts of the output (shape_join.c,
** on the device through kn__cuda_copy_into). */
static kn_status parts_k(const kn__call *c, kn__outs *out) { return c->op->kernel(c, out); }

typedef kn_status (*own_fn)(const kn__call *c, kn__outs *out);

/* The ops layer's own CUDA kernel of op id, or NULL (the device backend's). */
static own_fn own_kernel(int id) {
  switch ((kn__opid)id) {
  case KN_OP_COPY_: return cuda_copy_;
  case KN_OP_CLONE:
  case KN_OP_TO_COPY: return clone_k;
  case KN_OP_FILL_:
  case KN_OP_ZERO_: return cuda_fill_;
  case KN_OP_MM: return kn__cuda_k_mm;
  case KN_OP_BMM: return kn__cuda_k_bmm;
  case KN_OP_ADDMM: return kn__cuda_k_addmm;
  case KN_OP_NLL_LOSS_TARGET: return kn__cuda_k_nll_target;
  case KN_OP_DROPOUT: return kn__cuda_k_dropout;
  case KN_OP_DROPOUT_BACKWARD: return kn__cuda_k_dropout_backward;
  case KN_OP_RESHAPE_COPY: return reshape_copy;
  case KN_OP_CAT:
  case KN_OP_STACK: return parts_k;
  default: return NULL;
  }
}

bool kn__cuda_own_kernel(int opid) { return own_kernel(opid) != NULL; }

static kn_status run_on_device(const kn__call *c, kn__outs *out);

/* The call with each 0-dim host tensor argument replaced by a copy on the
** device (one element: an upload that waits for the stream). */
kn_status kn__cuda_kernel(const kn__call *c, kn__outs *out) {
  bool any = false;
  for (int a = 0; a < c->nargs && c->op->id != KN_OP_COPY_; a++)
    any |= c->args[a].kind == KN__A_TENSOR && c->args[a].u.t && cpu_scalar(c->args[a].u.t);
  if (!any) return run_on_device(c, out);
  kn__call lifted = *c;
  kn_status st = KN_OK;
  for (int a = 0; a < c->nargs && st == KN_OK; a++) {
    const kn_tensor *t = c->args[a].kind == KN__A_TENSOR ? c->args[a].u.t : NULL;
    if (!t || !cpu_scalar(t)) continue;
    kn_tensor *d = kn__empty(0, NULL, t->dtype, KN_CUDA);
    st = d ? kn__cuda_copy_into(d, t) : kn_last_status();
    lifted.args[a].u.t = d;
  }
  if (st == KN_OK) st = run_on_device(&lifted, out);
  for (int a = 0; a < c->nargs; a++)
    if (lifted.args[a].kind == KN__A_TENSOR && lifted.args[a].u.t != c->args[a].u.t)
      kn_release(lifted.args[a].u.t);
  return st;
}

static kn_status run_on_device(const kn__call *c, kn__outs *out) {
  own_fn own = own_kernel(c->op->id);
  if (own) return own(c, out);
  kn__device_backend_fn fn = atomic_load(&cuda_backend);
  return fn ? fn(c, out) : no_kernel(c);
}

/* ---- kn_to_device ---- */

static kn_status to_device_check(const kn_tensor *t, kn_device dev) {
  if (!t) return kn__error(KN_EINVAL, "kn_to_device: expected a tensor, got NULL");
  if (dev != KN_CPU && dev != KN_CUDA)
    return kn__error(KN_EINVAL, "kn_to_device: expected the device KN_CPU or KN_CUDA, got %d",
                     (int)dev);
  if (t->device == KN_META || t->is_fake || !t->storage->data)
    return kn__error(KN_EINVAL, "kn_to_device: the tensor holds no data (a %s tensor)",
                     t->is_fake ? "fake" : "meta");
  return dev == KN_CUDA ? kn__cuda_init() : KN_OK;
}

kn_status kn_to_device(kn_tensor *t, kn_device dev, kn_tensor **out) {
  if (!out) return kn__error(KN_EINVAL, "kn_to_device: the output pointer is NULL");
  *out = NULL;
  kn_status st = to_device_check(t, dev);
  if (st != KN_OK) return st;
  kn_device from = kn__tensor_on_cuda(t) ? KN_CUDA : KN_CPU;
  kn_tensor *r = NULL;
  if (from == dev) {
    r = kn_retain(t);
  } else {
    r = kn__empty(t->ndim, t->sizes, t->dtype, dev);
    if (!r) return kn_last_status();
    if ((st = kn__cuda_copy_into(r, t)) != KN_OK) {
      kn_release(r);
      return st;
    }
  }
  if (!(*out = kn__autorelease(r))) return kn_last_status();
  return KN_OK;
}
