/*
** ops/nn_dnnl.h: oneDNN-backed float32 kernels of the nn family (internal).
**
** The float32 GEMM is in ops/gemm_select.h (oneDNN or OpenBLAS per call); the
** convolution entry points run cached oneDNN convolution primitives on
** contiguous float32 NCHW data with OIHW (or, grouped, GOIHW) weights.
** ops/nn_onednn.c and ops/nn_conv_dnnl.c implement them.
*/
#ifndef KN_OPS_NN_DNNL_H
#define KN_OPS_NN_DNNL_H

#include <oneapi/dnnl/dnnl_types.h>

#include "ops/nn.h"
#include "ops/opdef.h"

/* Convolution geometry (the input as 4-D; unbatched input has N = 1). */
typedef struct kn__convg {
  int64_t N, C, H, W, O, kh, kw, OH, OW, G;
  int64_t sh, sw, ph, pw, dh, dw;
} kn__convg;

/* KN_OK, or an error naming `what` and oneDNN's status. */
kn_status kn__dnnl_status(dnnl_status_t s, const char *what);

/* The process-wide oneDNN CPU engine (created on first call; not owned by the
** caller, lives until exit). */
kn_status kn__dnnl_engine(dnnl_engine_t *out);

/* oneDNN's name of the instruction set its JIT kernels use ("avx512_core"). */
const char *kn__dnnl_isa_name(void);

/* bfloat16/float16 products (ops/nn_gemm16_dnnl.c): C[M, N] = A @ B for A
** [M, K] and B [K, N] of dtype dt with any strides, float32 accumulation,
** plus bias (N elements of dt added to every row in float32; NULL: none); C
** of dtype cdt (KN_FLOAT32, or dt: rounded once, to nearest even) with rows
** ldc elements apart. *used is false (and nothing written) when oneDNN has
** only its reference implementation for this case on this CPU (or for
** float16 none): the caller converts to float32 instead. */
kn_status kn__dnnl_gemm16(kn_dtype dt, int64_t M, int64_t N, int64_t K, kn__mat A, kn__mat B,
                          const void *bias, void *C, kn_dtype cdt, int64_t ldc, bool *used);
/* The implementation oneDNN picks for a contiguous [M, K] @ [K, N] product of
** dt with a result in dt ("brg:avx512_core_amx", "ref:any (not used)"),
** copied into buf. */
kn_status kn__dnnl_gemm16_impl(kn_dtype dt, int64_t M, int64_t N, int64_t K, char *buf,
                               size_t n);
/* Which path bfloat16/float16 GEMMs take, process-wide (tests and benches):
** AUTO oneDNN when it has a fast kernel, else conversion to float32; ONEDNN
** always oneDNN (its reference implementation included); CONVERT never. */
typedef enum kn__gemm16_mode { KN__GEMM16_AUTO, KN__GEMM16_ONEDNN, KN__GEMM16_CONVERT } kn__gemm16_mode;
void kn__gemm16_set_mode(kn__gemm16_mode m);

/* Convolutions through oneDNN's primitives (ops/nn_conv_dnnl.c), every
** tensor contiguous in PyTorch's layout and of dtype dt (float32, bfloat16
** or float16; 16-bit ones accumulate in float32 and round each result
** once). y = conv(x, w) + b (b may be NULL). */
kn_status kn__dnnl_conv_fwd(const kn__convg *g, kn_dtype dt, const void *x, const void *w,
                            const void *b, void *y);
/* gx = d conv / d x for output gradient gy (gx is overwritten). */
kn_status kn__dnnl_conv_bwd_data(const kn__convg *g, kn_dtype dt, const void *gy, const void *w,
                                 void *gx);
/* gw (and gb when non-NULL) for input x and output gradient gy (overwritten). */
kn_status kn__dnnl_conv_bwd_weights(const kn__convg *g, kn_dtype dt, const void *x,
                                    const void *gy, void *gw, void *gb);

/* The directions of kn__dnnl_conv_fast, as bits. */
#define KN__CONV_FWD 1u
#define KN__CONV_BWD_DATA 2u
#define KN__CONV_BWD_WEIGHTS 4u
/* Does oneDNN have a JIT kernel (not its reference loops) for each direction
** in dirs of g in dt on this CPU? Builds (and caches) the primitives; a case
** oneDNN refuses gives false, and the thread's last error is left as it was. */
bool kn__dnnl_conv_fast(const kn__convg *g, kn_dtype dt, bool bias, unsigned dirs);

/* The implementation oneDNN picked for the forward convolution of g in dt
** (for example "gemm:jit" or "jit:avx512_core"), copied into buf (n bytes). */
kn_status kn__dnnl_conv_impl(const kn__convg *g, kn_dtype dt, char *buf, size_t n);

#endif
