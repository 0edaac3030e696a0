/*
** ops/vmath.h: vectorised math over arrays (exp, log, tanh, erf, gelu, ...)
** for the pointwise kernels and the softmax-like reductions.
**
** One table of array functions per instruction set: a scalar table (libm,
** one element at a time; what the kernels did before), and on x86-64 tables
** built on SLEEF for SSE4.1, AVX2+FMA and AVX-512F, each compiled in its own
** translation unit with that ISA's flags (vmath_sse4.c, vmath_avx2.c,
** vmath_avx512.c). The widest table the CPU supports is chosen once, at
** first use (CPUID via __builtin_cpu_supports), so one binary runs on any
** x86-64 CPU. SLEEF's 1.0-ULP (u10) functions are used, like ATen's, except
** for the float32 functions SLEEF computes in double-float arithmetic that
** float32 does not need (exp, exp2, expm1, the logs, sinh, cosh, tanh, erf,
** and sin, cos, tan, asin, acos, atan on FMA ISAs): those are kiln's own
** (vmath_f32.h, vmath_isa.h, and on AVX-512 vmath_f32_avx512.h with
** vscalefps, vgetmantps tables and refined vrcp14ps/vrsqrt14ps estimates; at
** most 1.76 ULP measured over float32), and on AVX-512 so are the float64
** exp, expm1, sinh, cosh and tanh (vmath_f64.h: a 2^(j/16) table in
** registers and vscalefpd). No fast-math.
** Functions work on contiguous arrays of any length
** (the tail is computed in a zero-padded vector); y may equal x. The vector
** tables write outputs of 8 MB and more (not equal to x) with streaming
** stores (vmath_isa.h, KN_VM_NT_MIN); results are the same bits.
*/
#ifndef KN_OPS_VMATH_H
#define KN_OPS_VMATH_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/core.h"

/* Unary array functions. */
typedef enum kn__vmop {
  KN__VM_EXP, KN__VM_EXP2, KN__VM_EXPM1, KN__VM_LOG, KN__VM_LOG2, KN__VM_LOG1P,
  KN__VM_SQRT, KN__VM_RSQRT, KN__VM_SIN, KN__VM_COS, KN__VM_TAN, KN__VM_TANH,
  KN__VM_ERF, KN__VM_SIGMOID, KN__VM_SILU, KN__VM_GELU, KN__VM_GELU_TANH,
  KN__VM_LOG10, KN__VM_SINH, KN__VM_COSH, KN__VM_ASIN, KN__VM_ACOS, KN__VM_ATAN, KN__VM_ERFC,
  KN__VM_NUNARY
} kn__vmop;

/* Binary array functions y[i] = f(a[i], b[i]). */
typedef enum kn__vmop2 {
  KN__VM_POW,          /* pow(a, b) */
  KN__VM_GELU_BW,      /* gelu'(b) * a (erf form) */
  KN__VM_GELU_TANH_BW, /* gelu'(b) * a (tanh form) */
  KN__VM_NBINARY
} kn__vmop2;

typedef void (*kn__vm_f32)(float *y, const float *x, int64_t n);
typedef void (*kn__vm_f64)(double *y, const double *x, int64_t n);
typedef void (*kn__vm2_f32)(float *y, const float *a, const float *b, int64_t n);
typedef void (*kn__vm2_f64)(double *y, const double *a, const double *b, int64_t n);

/* softmax (log_: log_softmax) of one contiguous float32 line x into y (not
** overlapping x), as the generated row kernel computes it, bit for bit
** (ops/vmath_softmax.h): the maximum (NaN when the line holds one) is
** subtracted in float, the exps are summed through this table's
** expsum_max_f32 and lanes, y = e * (1 / sum) or (x - max) - log(sum) in
** float. A line of -inf (or with +inf) gives NaN, as torch's. */
typedef void (*kn__vm_softmax_f32)(float *y, const float *x, int64_t n, bool log_);
/* The backward of one contiguous float32 line (gi not overlapping g or y):
** softmax gi = y * (g - sum(g * y)), log_softmax gi = g - exp(y) * sum(g),
** the sums over vector lanes in double from the float inputs, the gradient
** in float from the sum s split into sh = (float)s and sl = (float)(s -
** sh): y * ((g - sh) - sl), (g - e * sh) - e * sl with e = exp(y) taken in
** float (as the forward's exps). softmax's is within 2.5 ULP of the formula
** on the float inputs. */
typedef void (*kn__vm_softmax_bwd_f32)(float *gi, const float *g, const float *y, int64_t n,
                                       bool log_);

/* softplus of a contiguous float32 array (y may equal x), torch's formula:
** with t = x * beta in float, y = x where t > threshold, else
** log1p(exp(t)) / beta, exp and log1p the table's own; one pass instead of
** three over a block. */
typedef void (*kn__vm_softplus_f32)(float *y, const float *x, int64_t n, float beta,
                                    float threshold);

/* The double lanes of kn__vm_expsum_f32's sum (the generated row kernels'). */
#define KN__VM_SUM_LANES 16
/* exp(x - c) of a contiguous float32 block and its sum, in one pass (a row
** kernel's sum(exp(x - max)): softmax, log_softmax, logsumexp): element i
** computes t = x[i] - c in float, stores d[i] = t (d NULL: not stored),
** computes the table's exp of t, bit for bit its f32[KN__VM_EXP] of the
** array of those t (e NULL: not stored, else e[i]), and adds it to the
** double lanes acc[0..KN__VM_SUM_LANES): the block is taken in groups of
** 256 (16 x KN__VM_SUM_LANES) elements from its start, then of 64: in a
** group of 64 at g lane l's float sum is
** F(g, l) = (e[g + l] + e[g + 16 + l]) + (e[g + 32 + l] + e[g + 48 + l]),
** in a group of 256 at g it is (F(g, l) + F(g + 64, l)) + (F(g + 128, l) +
** F(g + 192, l)), the exps added in float in that order and the sum
** converted once and added to acc[l] (each float addition rounds by at most
** half an ULP of its sum and exps are never negative, so a group's float
** sum is within 2 x 2^-24 (64) or 4 x 2^-24 (256) of the exact sum of its
** exps, relatively); the elements after the last whole group are added one
** by one, converted, to acc[i % KN__VM_SUM_LANES], in increasing i. A block
** after another continues the lanes as one block would when the first's
** length is a multiple of 16 x KN__VM_SUM_LANES. e or d may equal x; they
** overlap nothing else. ahead (NULL: none): the addresses fetched while the block
** computes, n elements from there, a line per 16 (a row kernel's same block
** two rows on); only a hint, never read as data. */
typedef void (*kn__vm_expsum_f32)(float *e, float *d, const float *x, float c, int64_t n,
                                  double *acc, const float *ahead);

/* The largest element of a contiguous float32 row (NaNs skipped; -inf when
** it has none; which of two equal zeros is unspecified), and *nan set to 1
** when the row holds a NaN (left as it is otherwise): a row kernel's
** maximum pass (softmax's, log_softmax's, amax) in running maxima of
** several vectors instead of its lanes' one chain of dependent steps. */
typedef float (*kn__vm_rowmax_f32)(const float *x, int64_t n, int *nan);

typedef struct kn__vmath {
  const char *name; /* "scalar", "sse4", "avx2", "avx512" */
  kn__vm_f32 f32[KN__VM_NUNARY];
  kn__vm_f64 f64[KN__VM_NUNARY];
  kn__vm2_f32 f32b[KN__VM_NBINARY];
  kn__vm2_f64 f64b[KN__VM_NBINARY];
  kn__vm_softmax_f32 softmax_f32;
  kn__vm_softmax_bwd_f32 softmax_bwd_f32;
  kn__vm_softplus_f32 softplus_f32;
  /* generated code declares the members up to here (inductor/formula.c):
  ** the layout above is theirs */
  kn__vm_expsum_f32 expsum_f32;
  kn__vm_rowmax_f32 rowmax_f32;
  /* expsum_f32 for a shift c at least every x of the block (the row's
  ** maximum: softmax, log_softmax, cross_entropy), where every x - c is <= 0
  ** or NaN: the same results, the exp's check for its upper range skipped.
  ** Other inputs give unspecified exps (never a crash). */
  kn__vm_expsum_f32 expsum_max_f32;
} kn__vmath;

/* The rows of a table whose functions are named a_<op>_<L> (L = f or d):
** the scalar table and every ISA's table spell their rows with these. */
#define KN__VM_ROW1(L)                                                          \
  {[KN__VM_EXP] = a_exp_##L, [KN__VM_EXP2] = a_exp2_##L, [KN__VM_EXPM1] = a_expm1_##L, \
   [KN__VM_LOG] = a_log_##L, [KN__VM_LOG2] = a_log2_##L, [KN__VM_LOG1P] = a_log1p_##L, \
   [KN__VM_SQRT] = a_sqrt_##L, [KN__VM_RSQRT] = a_rsqrt_##L, [KN__VM_SIN] = a_sin_##L, \
   [KN__VM_COS] = a_cos_##L, [KN__VM_TAN] = a_tan_##L, [KN__VM_TANH] = a_tanh_##L,     \
   [KN__VM_ERF] = a_erf_##L, [KN__VM_SIGMOID] = a_sigmoid_##L,                        \
   [KN__VM_SILU] = a_silu_##L, [KN__VM_GELU] = a_gelu_##L,                            \
   [KN__VM_GELU_TANH] = a_gelu_tanh_##L, [KN__VM_LOG10] = a_log10_##L,                \
   [KN__VM_SINH] = a_sinh_##L, [KN__VM_COSH] = a_cosh_##L, [KN__VM_ASIN] = a_asin_##L, \
   [KN__VM_ACOS] = a_acos_##L, [KN__VM_ATAN] = a_atan_##L, [KN__VM_ERFC] = a_erfc_##L}
#define KN__VM_ROW2(L)                                                          \
  {[KN__VM_POW] = a_pow_##L, [KN__VM_GELU_BW] = a_gelu_bw_##L,                 \
   [KN__VM_GELU_TANH_BW] = a_gelu_tanh_bw_##L}

/* Instruction sets, narrowest first. */
typedef enum kn__isa { KN__ISA_SCALAR, KN__ISA_SSE4, KN__ISA_AVX2, KN__ISA_AVX512, KN__ISA_COUNT } kn__isa;

/* The table in use: the widest supported ISA unless one was forced.
** Static; thread-safe. */
const kn__vmath *kn__vmath_get(void);
/* The table of one ISA (static), or NULL when this build or CPU lacks it. */
const kn__vmath *kn__vmath_table(kn__isa isa);
/* The widest ISA this CPU and build support. */
kn__isa kn__vmath_best(void);
/* Process-wide setting for tests and benchmarks: use isa's table from now on
** (KN__ISA_COUNT: back to automatic selection). KN_EINVAL when unsupported. */
kn_status kn__vmath_force(kn__isa isa);
/* "scalar", "sse4", "avx2", "avx512". Static. */
const char *kn__isa_name(kn__isa isa);
/* For a unary function that every table computes correctly rounded (IEEE
** sqrt: the ISAs' square-root instructions, libm's sqrt), the C expression
** of operand a that gives the same bits ("sqrt(a)", type-generic), which a
** compiler inlines as that instruction; NULL for every other function.
** Static. */
const char *kn__vm_exact_c(kn__vmop op);

/* The per-ISA tables (x86-64 builds only). */
extern const kn__vmath kn__vmath_scalar;
extern const kn__vmath kn__vmath_sse4;
extern const kn__vmath kn__vmath_avx2;
extern const kn__vmath kn__vmath_avx512;

/* The element formulas shared by the scalar table and the vector tails
** (gelu's and sigmoid's constants). */
#define KN__VM_BETA 0.7978845608028654    /* sqrt(2 / pi) */
#define KN__VM_KAPPA 0.044715
#define KN__VM_INVSQRT2PI 0.3989422804014327
#define KN__VM_SQRT1_2 0.7071067811865476

#endif
