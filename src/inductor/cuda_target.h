/*
** inductor/cuda_target.h: the CUDA target's pieces (internal to
** src/inductor): the kernels' printer (cuda_kernels.c) and what the host
** program needs of each kernel (target_cuda.c). See docs/INDUCTOR.md,
** "The CUDA target".
*/
#ifndef KN_INDUCTOR_CUDA_TARGET_H
#define KN_INDUCTOR_CUDA_TARGET_H

#include "inductor/target.h"

/* Threads per block of every launch (a multiple of 32, at most 1024). */
#define KN__CU_BLOCK 256
/* Most blocks of one launch (kernels loop over the rest: grid-stride). */
#define KN__CU_MAX_GRID 1048576

/* What the host program needs of a kernel: the symbols it takes as
** parameters (used[i] != 0: S<i>, in index order) and the C expression
** (over S<i>) of the count its grid covers: elements (pointwise) or rows
** (reductions), and how many of those a thread takes per step of its loop
** (4 for the float4 path of a flat pointwise kernel: a thread per 4
** elements; else 1). Owned: kn__cu_info_free. */
typedef struct cu_info {
  unsigned char *used;
  int nused;
  char *grid;
  int per_thread;
} cu_info;
void kn__cu_info_free(cu_info *info);

/* The device function of kernel item it of plan p, appended to ker; info
** (may be NULL) receives what its launch needs. KN_ENOMEM; KN_EINTERNAL
** when the kernel reads a buffer the item does not list. */
kn_status kn__cu_kernel(kn__ind_plan *p, const kn__kir_item *it, kn__sb *ker, cu_info *info);

/* The target's compile and load (cuda_compile.c; target.h's contracts). */
struct kn__ind_tool;
kn_status kn__cu_compile(const struct kn__ind_tool *tool, const char *dir, const char *src,
                         const char *so, const char *shown);
kn_status kn__cu_load(int fd, bool noexec, const char *shown, kn__ind_call_fn *out);
/* The device's identity for the cache keys (" cuda sm_90 <name> nvrtc 13.0",
** "... no NVRTC", or " no CUDA device"), into buf[n]. */
void kn__cu_ident(char *buf, size_t n);

#endif
