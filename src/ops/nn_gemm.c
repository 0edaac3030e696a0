/*
** ops/nn_gemm.c: the matrix-multiply kernel of the nn family.
**
** float32 runs on oneDNN's or OpenBLAS's sgemm, chosen per call shape
** (ops/gemm_select.h), float64 on OpenBLAS (cblas_dgemm: oneDNN has no
** float64 GEMM), both on kiln's OpenMP team.
** A strided operand is handed to the library as is when one of its strides
** is 1 and the other a valid leading dimension (row-major "no transpose" or
** "transpose"); anything else is first copied into a contiguous buffer.
** bfloat16 and float16 run on oneDNN's matmul where the CPU has a fast
** kernel for them (AVX512-BF16, AMX; ops/nn_gemm16_dnnl.c), else through
** float32 buffers (vectorised conversions, sgemm); either way float32
** accumulation and one rounding of each result (torch 1.13 refuses float16
** on the CPU, later releases accept it, and float16 autocast needs it);
** integer dtypes use a
** straightforward loop with int64 accumulation.
*/
#include <limits.h>
#include <omp.h>
#include <string.h>

#include "core/error.h"
#include "ops/cvt16.h"
#include "ops/gemm_select.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/nn_dnnl.h"
#include "ops/threads.h"
#include "profiler/profiler.h"

const char *kn__nn_scalar_type_name(kn_dtype dt) {
  switch (dt) {
  case KN_BOOL: return "Bool";
  case KN_UINT8: return "Byte";
  case KN_INT8: return "Char";
  case KN_INT16: return "Short";
  case KN_INT32: return "Int";
  case KN_INT64: return "Long";
  case KN_FLOAT16: return "Half";
  case KN_BFLOAT16: return "BFloat16";
  case KN_FLOAT32: return "Float";
  case KN_FLOAT64: return "Double";
  default: return "Unknown";
  }
}

/* Can BLAS read a rows x cols operand with strides (s0, s1) directly? Sets
** *trans (the operand is stored column-major) and *ld. */
static bool blas_layout(int64_t rows, int64_t cols, int64_t s0, int64_t s1, bool *trans,
                        int64_t *ld) {
  int64_t rc = cols > 1 ? cols : 1, rr = rows > 1 ? rows : 1;
  if (s1 == 1 || cols <= 1) {
    int64_t l = rows <= 1 ? rc : s0;
    if (l >= rc && l <= INT_MAX) {
      *trans = false;
      *ld = l;
      return true;
    }
  }
  if (s0 == 1 || rows <= 1) {
    int64_t l = cols <= 1 ? rr : s1;
    if (l >= rr && l <= INT_MAX) {
      *trans = true;
      *ld = l;
      return true;
    }
  }
  return false;
}

/* ---- 16-bit conversions around a GEMM ---------------------------------------- */

/* The team of the 16-bit conversions around a GEMM: M rows of N elements,
** a load and a store an element (ops/threads.h). */
static int cvt_team(int64_t M, int64_t N) { return kn__par_team(M * N, M, KN__GRAIN_MEM); }

/* One row of kn__gemm16_store, in blocks of a stack buffer for C's old
** values. */
static void store16_row(kn_dtype dt, int64_t N, float *acc, char *row, double alpha,
                        double beta) {
  enum { BLK = 256 };
  float old[BLK];
  for (int64_t j0 = 0; (alpha != 1 || beta != 0) && j0 < N; j0 += BLK) {
    int64_t n = N - j0 < BLK ? N - j0 : BLK;
    float *a = acc + j0;
    if (beta != 0) kn__cvt16_run(old, KN_FLOAT32, row + j0 * 2, dt, n);
    if (beta != 0)
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++)
        a[j] = (float)(alpha * a[j] + beta * (double)old[j]);
    else
      _Pragma("omp simd") for (int64_t j = 0; j < n; j++) a[j] = (float)(alpha * a[j] + 0.0);
  }
  kn__cvt16_run(row, dt, acc, KN_FLOAT32, N);
}

void kn__gemm16_store(kn_dtype dt, int64_t M, int64_t N, float *acc, void *C, int64_t ldc,
                      double alpha, double beta) {
  KN__PAR_FOR(cvt_team(M, N), for (int64_t i = 0; i < M; i++) {
    store16_row(dt, N, acc + i * N, (char *)C + i * ldc * 2, alpha, beta);
  });
}

/* Rows of a 16-bit matrix to float32 or back (dst and src rows dld and sld
** elements apart), in parallel when large. */
static void cvt_rows(int64_t M, int64_t N, void *dst, kn_dtype ddt, int64_t dld,
                     const void *src, kn_dtype sdt, int64_t sld) {
  size_t des = kn_dtype_size(ddt), ses = kn_dtype_size(sdt);
  KN__PAR_FOR(cvt_team(M, N), for (int64_t i = 0; i < M; i++) {
    kn__cvt16_run((char *)dst + (size_t)(i * dld) * des, ddt,
                  (const char *)src + (size_t)(i * sld) * ses, sdt, N);
  });
}

/* A contiguous (row-major) copy of a strided operand, converted to float or
** double (out_dt). Owned buffer from the caching allocator, or NULL. */
static void *pack(kn_dtype dt, kn_dtype out_dt, int64_t rows, int64_t cols, kn__mat m,
                  size_t *nbytes) {
  size_t es = kn_dtype_size(out_dt);
  *nbytes = (size_t)(rows * cols) * es + 64;
  char *buf = kn__cached_alloc(*nbytes);
  if (!buf) return NULL;
  size_t is = kn_dtype_size(dt);
  if (out_dt == KN_FLOAT32 && (m.s1 == 1 || cols == 1) &&
      (dt == KN_BFLOAT16 || dt == KN_FLOAT16)) { /* rows: the vector conversions */
    cvt_rows(rows, cols, buf, out_dt, cols, m.p, dt, rows > 1 ? m.s0 : cols);
    return buf;
  }
  if (dt == out_dt) { /* row by row, fixed-size moves (a memcpy call an element took ~3 ns) */
    for (int64_t i = 0; i < rows; i++)
      kn__strided_copy(buf + (size_t)(i * cols) * es, (int64_t)es,
                       (const char *)m.p + i * m.s0 * (int64_t)es, m.s1 * (int64_t)es, es, cols);
    return buf;
  }
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      const char *src = (const char *)m.p + (i * m.s0 + j * m.s1) * (int64_t)is;
      kn__store_double(buf + (size_t)(i * cols + j) * es, out_dt, kn__load_double(src, dt));
    }
  return buf;
}

/* One float/double operand ready for BLAS: either the original or a packed
** copy (freed with release_operand). */
typedef struct operand {
  const void *p;
  bool trans;
  int ld;
  void *owned;
  size_t nbytes;
} operand;

/* The float32 copy of a 16-bit operand stored column by column (unit row
** stride, columns s1 apart), stored the same way: each column converted
** with the vector conversions; the operand is handed to sgemm transposed. */
static kn_status pack_cols(kn_dtype dt, int64_t rows, int64_t cols, kn__mat m, operand *o) {
  o->nbytes = (size_t)(rows * cols) * sizeof(float) + 64;
  o->owned = kn__cached_alloc(o->nbytes);
  if (!o->owned) return kn__oom();
  cvt_rows(cols, rows, o->owned, KN_FLOAT32, rows, m.p, dt, m.s1);
  o->p = o->owned;
  o->trans = true;
  o->ld = (int)rows;
  return KN_OK;
}

static kn_status prepare_operand(kn_dtype dt, kn_dtype blas_dt, int64_t rows, int64_t cols,
                                 kn__mat m, operand *o) {
  int64_t ld;
  bool trans;
  o->owned = NULL;
  if (dt != blas_dt && m.s0 == 1 && m.s1 != 1 && rows > 1 && cols > 1 &&
      blas_layout(rows, cols, m.s0, m.s1, &trans, &ld)) {
    /* a 16-bit operand stored column by column: its float32 copy keeps that
    ** layout (contiguous conversions of each column; sgemm transposes) */
    return pack_cols(dt, rows, cols, m, o);
  }
  if (dt == blas_dt && blas_layout(rows, cols, m.s0, m.s1, &trans, &ld)) {
    o->p = m.p;
    o->trans = trans;
    o->ld = (int)ld;
    return KN_OK;
  }
  o->owned = pack(dt, blas_dt, rows, cols, m, &o->nbytes);
  if (!o->owned) return kn__oom();
  o->p = o->owned;
  o->trans = false;
  o->ld = (int)(cols > 1 ? cols : 1);
  return KN_OK;
}

static void release_operand(operand *o) {
  if (o->owned) kn__cached_free(o->owned, o->nbytes);
  o->owned = NULL;
}

static void scale_c(kn_dtype dt, int64_t M, int64_t N, void *C, int64_t ldc, double beta) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      char *p = (char *)C + (i * ldc + j) * (int64_t)kn_dtype_size(dt);
      kn__store_double(p, dt, beta == 0 ? 0.0 : beta * kn__load_double(p, dt));
    }
}

/* bfloat16/float16 on oneDNN's matmul (ops/nn_gemm16_dnnl.c): a plain
** product (alpha 1, beta 0) straight into C, oneDNN rounding the float32
** sums once (to nearest even, as kn__gemm16_store); otherwise, or when
** oneDNN declines that, into a float32 buffer, then C = alpha * AB + beta *
** C rounded once. *used false: oneDNN declined (the caller converts to
** float32). */
static kn_status gemm16(kn_dtype dt, int64_t M, int64_t N, int64_t K, kn__mat A, kn__mat B,
                        void *C, int64_t ldc, double alpha, double beta, bool *used) {
  if (alpha == 1 && beta == 0) {
    kn_status st = kn__dnnl_gemm16(dt, M, N, K, A, B, NULL, C, dt, ldc, used);
    if (st != KN_OK || *used) return st;
  }
  size_t nbytes = (size_t)(M * N) * sizeof(float) + 64;
  float *c = kn__cached_alloc(nbytes);
  if (!c) return kn__oom();
  kn_status st = kn__dnnl_gemm16(dt, M, N, K, A, B, NULL, c, KN_FLOAT32, N, used);
  if (st == KN_OK && *used) {
    int64_t tp = kn__prof_sub_begin();
    kn__gemm16_store(dt, M, N, c, C, ldc, alpha, beta);
    kn__prof_sub_end("gemm16::convert_result", tp);
  }
  kn__cached_free(c, nbytes);
  return st;
}

/* The float32 choice for a product of M rows that is part of one of full_M
** rows: the whole product's library, this part's team. */
static kn__gemm_plan part_plan(bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                               int64_t full_M) {
  kn__gemm_plan p = kn__gemm_plan_for(ta, tb, M, N, K);
  if (full_M != M) p.lib = kn__gemm_plan_for(ta, tb, full_M, N, K).lib;
  return p;
}

static kn_status blas_gemm(kn_dtype dt, int64_t M, int64_t N, int64_t K, kn__mat A, kn__mat B,
                           void *C, int64_t ldc, double alpha, double beta, int64_t full_M) {
  if (dt == KN_BFLOAT16 || dt == KN_FLOAT16) {
    bool used = false;
    kn_status st16 = gemm16(dt, M, N, K, A, B, C, ldc, alpha, beta, &used);
    if (st16 != KN_OK || used) return st16;
  }
  kn_dtype bdt = dt == KN_FLOAT64 ? KN_FLOAT64 : KN_FLOAT32;
  operand a, b;
  int64_t tp = kn__prof_sub_begin();
  kn_status st = prepare_operand(dt, bdt, M, K, A, &a);
  if (st != KN_OK) return st;
  st = prepare_operand(dt, bdt, K, N, B, &b);
  if (st != KN_OK) {
    release_operand(&a);
    return st;
  }
  if (dt != bdt) kn__prof_sub_end("gemm16::convert_operands", tp);
  /* bfloat16/float16 output: compute into a float buffer, then round. */
  void *c = C;
  int ldcc = (int)ldc;
  size_t cbytes = 0;
  if (dt != bdt) {
    cbytes = (size_t)(M * N) * sizeof(float) + 64;
    c = kn__cached_alloc(cbytes);
    if (!c) st = kn__oom();
    else {
      ldcc = (int)(N > 1 ? N : 1);
      if (beta != 0) /* sgemm reads C only when beta != 0 */
        cvt_rows(M, N, c, KN_FLOAT32, N, C, dt, ldc);
    }
  }
  if (st == KN_OK) {
    tp = kn__prof_sub_begin();
    const char *what = "openblas::dgemm";
    if (bdt == KN_FLOAT32) {
      kn__gemm_plan p = part_plan(a.trans, b.trans, M, N, K, full_M);
      what = p.lib == KN__GEMM_LIB_ONEDNN ? "onednn::sgemm" : "openblas::sgemm";
      st = kn__nn_sgemm_plan(&p, a.trans, b.trans, M, N, K, (float)alpha, a.p, a.ld, b.p, b.ld,
                             (float)beta, c, ldcc);
    } else {
      kn__nn_dgemm(a.trans, b.trans, M, N, K, alpha, a.p, a.ld, b.p, b.ld, beta, c, ldcc);
    }
    kn__prof_sub_end(what, tp);
    tp = c != C && st == KN_OK ? kn__prof_sub_begin() : -1;
    if (c != C && st == KN_OK) cvt_rows(M, N, C, dt, ldc, c, KN_FLOAT32, N);
    kn__prof_sub_end("gemm16::convert_result", tp);
  }
  if (c != C && c) kn__cached_free(c, cbytes);
  release_operand(&a);
  release_operand(&b);
  return st;
}

static int64_t load_i(const void *base, int64_t idx, kn_dtype dt) {
  return kn__load_int((const char *)base + idx * (int64_t)kn_dtype_size(dt), dt);
}

static void int_gemm(kn_dtype dt, int64_t M, int64_t N, int64_t K, kn__mat A, kn__mat B,
                     void *C, int64_t ldc, int64_t alpha, int64_t beta) {
  size_t es = kn_dtype_size(dt);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      uint64_t acc = 0; /* wraps like the fixed-width C types */
      for (int64_t k = 0; k < K; k++)
        acc += (uint64_t)load_i(A.p, i * A.s0 + k * A.s1, dt) *
               (uint64_t)load_i(B.p, k * B.s0 + j * B.s1, dt);
      char *p = (char *)C + (size_t)(i * ldc + j) * es;
      uint64_t old = beta == 0 ? 0 : (uint64_t)kn__load_int(p, dt);
      kn__store_int(p, dt, (int64_t)((uint64_t)alpha * acc + (uint64_t)beta * old));
    }
}

bool kn__nn_gemm16_bias(kn_dtype dt, int64_t M, int64_t N, int64_t K, kn__mat A, kn__mat B,
                        const void *bias, void *C, int64_t ldc, kn_status *st) {
  bool used = false;
  *st = KN_OK;
  if ((dt != KN_BFLOAT16 && dt != KN_FLOAT16) || M == 0 || N == 0 || K == 0 || M > INT_MAX ||
      N > INT_MAX || K > INT_MAX || ldc > INT_MAX)
    return false;
  *st = kn__dnnl_gemm16(dt, M, N, K, A, B, bias, C, dt, ldc, &used);
  return *st != KN_OK || used;
}

kn_status kn__nn_gemm_check(const char *opname, kn_dtype dt) {
  if (dt == KN_BOOL)
    return kn__error(KN_EDTYPE, "\"%s\" not implemented for '%s'", opname,
                     kn__nn_scalar_type_name(dt));
  return KN_OK;
}

kn_status kn__nn_gemm_rows(const char *opname, kn_dtype dt, int64_t M, int64_t N, int64_t K,
                           kn__mat A, kn__mat B, void *C, int64_t ldc, double alpha, double beta,
                           int64_t full_M) {
  kn_status st = kn__nn_gemm_check(opname, dt);
  if (st != KN_OK) return st;
  if (M == 0 || N == 0) return KN_OK;
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX || ldc > INT_MAX)
    return kn__error(KN_EUNSUPPORTED, "%s: matrix dimensions above %d are not supported", opname,
                     INT_MAX);
  if (kn_dtype_is_integral(dt, false)) {
    int_gemm(dt, M, N, K, A, B, C, ldc, (int64_t)alpha, (int64_t)beta);
    return KN_OK;
  }
  if (K == 0 || alpha == 0) {
    scale_c(dt, M, N, C, ldc, beta);
    return KN_OK;
  }
  return blas_gemm(dt, M, N, K, A, B, C, ldc, alpha, beta, full_M < M ? M : full_M);
}

kn_status kn__nn_gemm(const char *opname, kn_dtype dt, int64_t M, int64_t N, int64_t K,
                      kn__mat A, kn__mat B, void *C, int64_t ldc, double alpha, double beta) {
  return kn__nn_gemm_rows(opname, dt, M, N, K, A, B, C, ldc, alpha, beta, M);
}
