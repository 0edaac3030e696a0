/*
** ops/norm_rows_avx2.c: layer_norm's and rms_norm's row kernels (norm_rows_body.h) compiled
** with -mavx2 -mfma (see CMakeLists.txt); x86-64 builds only.
*/
#include <math.h>

#include "ops/norm_rows.h"

#if defined(__x86_64__) && defined(__AVX2__)
#define NR_T float
#define NR_NAME(n) n##_f32_avx2
#include "ops/norm_rows_body.h"
#undef NR_T
#undef NR_NAME
#define NR_T double
#define NR_NAME(n) n##_f64_avx2
#include "ops/norm_rows_body.h"

const kn__norm_rows kn__norm_rows_avx2 = {
    "avx2",           fwd_f32_avx2,     fwd_f64_avx2,     bwd_f32_avx2,    bwd_f64_avx2,
    rms_fwd_f32_avx2, rms_fwd_f64_avx2, rms_bwd_f32_avx2, rms_bwd_f64_avx2};
#else
const kn__norm_rows kn__norm_rows_avx2 = {NULL};
#endif
