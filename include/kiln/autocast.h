/*
** kiln/autocast.h: mixed precision (torch.autocast("cpu", dtype=...) in C).
**
**   kn_autocast_begin(KN_BFLOAT16);        // with torch.autocast("cpu", torch.bfloat16):
**   kn_tensor *h = kn_linear(x, w, b);     //   bfloat16 (x, w, b cast on the way in)
**   kn_tensor *loss = kn_cross_entropy(h, y, NULL, KN_REDUCTION_MEAN, -100, 0.0);
**                                          //   float32 (h cast back up)
**   kn_autocast_end();
**   kn_backward(loss, NULL);               // float32 gradients on float32 leaves
**
** While a region is open on the calling thread, every op call goes through
** the autocast policy before anything else (before tracing modes, so a
** captured graph holds the casts as explicit _to_copy nodes). The policy is
** torch 1.13's CPU autocast policy, one entry per op (src/ops/ops_autocast.def):
**   lower    mm, bmm, addmm, matmul, linear, convolution: floating inputs
**            (not float64) are cast to the region's dtype; also
**            scaled_dot_product_attention (torch 2's CPU list; torch 1.13
**            has no such op): it takes bfloat16/float16, computes in float32
**            and returns the region's dtype;
**   fp32     prod, mse_loss, l1_loss, binary_cross_entropy, nll_loss,
**            cross_entropy: floating inputs (not float64) are cast to float32;
**   promote  cat, stack: floating inputs are cast to the widest of them and
**            the region's dtype;
**   none     every other op runs on its inputs' types (softmax, layer_norm,
**            sum, ... of a bfloat16 tensor stay bfloat16, as in torch 1.13 on
**            the CPU; their kernels accumulate in float32).
** Calls an op makes while autocast handles it (a composite's decomposition)
** see no autocast, and backward never runs under autocast: gradients come
** back in each forward op's dtype and the casts' backward (ToCopyBackward0)
** turns them into the leaves' float32.
**
** The state is per thread and nests: kn_autocast_begin(KN_FLOAT32) opens a
** region with autocast off (torch.autocast(enabled=False)). Compiled
** functions guard on it (___check_global_state(), as torch's global-state
** guard): calling a function compiled under autocast without it recompiles.
**
** Cast cache (torch's): the casts of float32 leaves that require grad (the
** parameters) are cached per thread while regions are open, so a weight
** used by several ops (tied weights, a layer called in a loop) is cast once;
** the cache is cleared when the outermost region on the thread closes.
** Unlike torch's, an entry is also dropped when its weight changes in place
** (its version counter moved: an optimizer step inside the region) and when
** the grad mode differs from the one it was cast under; tracing bypasses it
** (a captured graph records every cast). Entries hold references to the
** weight and its cast until they are cleared: close every region a thread
** opens before it exits.
**
** float16 uses the same policy (torch 1.13 runs CPU autocast in bfloat16
** only; later releases apply these lists to float16 too).
*/
#ifndef KILN_AUTOCAST_H
#define KILN_AUTOCAST_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open an autocast region on the calling thread: dtype KN_BFLOAT16 or
** KN_FLOAT16 (autocast on), or KN_FLOAT32 (off inside the region). KN_EDTYPE
** for another dtype, KN_ESTATE when 64 regions are already open. */
KN_API kn_status kn_autocast_begin(kn_dtype dtype);
/* Close the innermost region. KN_ESTATE when none is open. */
KN_API kn_status kn_autocast_end(void);
/* Is autocast on for ops called now on this thread? */
KN_API bool kn_autocast_enabled(void);
/* The innermost region's dtype: KN_BFLOAT16 or KN_FLOAT16 when on,
** KN_FLOAT32 when off. */
KN_API kn_dtype kn_autocast_dtype(void);
/* The cast cache on this thread (torch.autocast(cache_enabled=...)): on by
** default. Returns the previous setting. Turning it off does not clear it. */
KN_API bool kn_autocast_set_cache_enabled(bool enabled);
KN_API bool kn_autocast_cache_enabled(void);
/* Drop this thread's cached casts now (torch.clear_autocast_cache()); they
** are dropped anyway when the outermost region closes. */
KN_API void kn_autocast_clear_cache(void);
/* The policy entry of an op, by its qualified name ("mm", "add.Tensor"):
** "lower", "fp32", "promote" or "none"; NULL for an unknown op. Static. */
KN_API const char *kn_autocast_policy(const char *op_name);

#ifdef __cplusplus
}
#endif

#endif
