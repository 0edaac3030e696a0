/*
** ops/cuda_ops.h: eager ops on CUDA tensors in the ops layer: the
** dispatcher's device layer (the process-wide device backend handler, the
** mixed-device check) and the CUDA kernels that need no code generator:
** strided copies with dtype conversion, fills, and matrix products through
** cuBLAS. See docs/CUDA.md.
*/
#ifndef KN_OPS_CUDA_OPS_H
#define KN_OPS_CUDA_OPS_H

#include "ops/opdef.h"

/* A device backend: runs call c whose tensors are on the device. The
** dispatcher has run the op's meta function and made the outputs (out->t,
** on the device; an in-place op's output is its argument), so the handler
** only queues the computation. It returns KN_OK, or an error whose message
** says why it cannot run the op (KN_EUNSUPPORTED for an op it has no kernel
** for). It never sees a view op (views need no kernel) or a composite op
** (those run as the ops they are made of). */
typedef kn_status (*kn__device_backend_fn)(const kn__call *c, kn__outs *out);

/* Set the handler of the ops on device dev that the ops layer has no kernel
** for (a documented process-wide setting: the CUDA code generator registers
** its single-op-graph path for KN_CUDA once, at startup; NULL removes it).
** Only KN_CUDA has handlers; KN_EINVAL for another device. */
kn_status kn__dispatch_set_device_backend(kn_device dev, kn__device_backend_fn fn);

/* The device call c runs on: KN_CUDA when a tensor argument is on the GPU,
** else KN_CPU. Tensors on two devices are PyTorch's error "Expected all
** tensors to be on the same device, but found at least two devices, cuda:0
** and cpu!" (copy_ alone moves data between devices), except a 0-dim host
** tensor, which joins an op on the GPU as a scalar (as in PyTorch). */
kn_status kn__call_device(const kn__call *c, kn_device *dev);
/* The device that the meta tensors of the recording running on this
** thread stand for (a graph recorder's: AOT's joint trace, a
** decomposition pass): ops that compute differently on the GPU (attention's
** math form) ask kn__value_device. Set by the recorder around its
** recording; returns the previous setting (KN_META: none, the default). */
kn_device kn__meta_values_device_set(kn_device dev);
/* The device t's values live on: kn_tensor_device(t), except that a meta
** tensor (not a fake) of a recording of CUDA values reports KN_CUDA. */
kn_device kn__value_device(const kn_tensor *t);
/* Run call c on the GPU (outputs made; 0-dim host tensor arguments copied
** to the device first): the ops layer's CUDA kernels first
** (copy_, clone, _to_copy, fill_, zero_, mm, bmm, addmm, _reshape_copy,
** cat, stack, _nll_loss_target, native_dropout and its backward), then the
** registered handler, else "aten.<op>: no CUDA kernel ... (cuda:0)". */
kn_status kn__cuda_kernel(const kn__call *c, kn__outs *out);

/* ---- kernels (ops/cuda_kern.c) ---- */
/* dst = src (converted to dst's dtype, src broadcast to dst's sizes); either
** side on the host or the device, any strides. Queued when both are on the
** device. */
kn_status kn__cuda_copy_into(kn_tensor *dst, const kn_tensor *src);
/* Every element of CUDA tensor dst set to *value (an element of dst's
** dtype, as the host stores it). */
kn_status kn__cuda_fill(kn_tensor *dst, const void *value);
/* A contiguous copy of CUDA tensor t with dtype dt (owned, on the device). */
kn_tensor *kn__cuda_contiguous(const kn_tensor *t, kn_dtype dt);
/* _nll_loss_target on the device (outputs made; a bad target is a
** device-side check, reported at the next synchronisation). */
kn_status kn__cuda_k_nll_target(const kn__call *c, kn__outs *out);
/* native_dropout and native_dropout_backward on the device (outputs made):
** the mask from the generator's Philox blocks, as on the CPU. */
kn_status kn__cuda_k_dropout(const kn__call *c, kn__outs *out);
kn_status kn__cuda_k_dropout_backward(const kn__call *c, kn__outs *out);
/* Whether the ops layer runs op id on the GPU itself (kn__cuda_kernel's own
** kernels: a compiled graph may call them as extern steps). */
bool kn__cuda_own_kernel(int opid);

/* ---- matrix products (ops/cuda_gemm.c) ---- */
kn_status kn__cuda_k_mm(const kn__call *c, kn__outs *out);
kn_status kn__cuda_k_bmm(const kn__call *c, kn__outs *out);
kn_status kn__cuda_k_addmm(const kn__call *c, kn__outs *out);

#endif
