/*
** ops/reduce_table.h: the reductions as one table (internal), shared by the
** eager kernels (ops/reduce*.c) and inductor's code generator
** (inductor/reduce_lower.c).
**
** A row (ops/reduce_table.def) describes a reduction by its accumulator's
** start, how an element replaces or combines into it (with the NaN rule of
** ordered reductions), how the output follows from it, the accumulator's
** type and its shape (one value, value + first index, or moments). The same
** expression text is compiled here as inline functions for the eager
** kernels and stringified into kn__red_rows for the code generator, so the
** two cannot drift apart. kn__red_for_op maps an op id onto its row and the
** positions of its arguments.
*/
#ifndef KN_OPS_REDUCE_TABLE_H
#define KN_OPS_REDUCE_TABLE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum kn__red_kind {
  KN__RED_NONE = -1, /* no row (the PRE of a one-pass row) */
#define KN_RED(K, ...) KN__RED_##K,
#include "ops/reduce_table.def"
#undef KN_RED
  KN__RED_COUNT
} kn__red_kind;

typedef enum kn__red_acc {
  KN__RACC_WIDE,  /* double (floating inputs), int64 with wrap-around (integers) */
  KN__RACC_INPUT  /* the input's own type */
} kn__red_acc;

typedef enum kn__red_shape {
  KN__RSHAPE_FOLD,    /* one accumulator */
  KN__RSHAPE_INDEX,   /* the extreme and its first index */
  KN__RSHAPE_CENTERED /* the PRE row's pass (the center), then prepared elements */
} kn__red_shape;

typedef enum kn__red_nan {
  KN__RNAN_ARITH, /* NaN flows through the arithmetic (sum, prod, moments) */
  KN__RNAN_WINS   /* a NaN anywhere is the result; an index points at the first */
} kn__red_nan;

typedef struct kn__red_row {
  kn__red_kind kind;
  const char *kname;   /* "SUM": names the generated functions */
  const char *name;    /* the op's name ("amax") */
  double init;         /* the floating accumulator's start */
  int64_t iinit;       /* the integer accumulator's start */
  /* C expression text (see reduce_table.def) */
  const char *init_text, *better, *prep, *combine, *finalize;
  kn__red_acc acc;
  kn__red_shape shape;
  kn__red_nan nan;
  bool ordered;        /* has a `better` (max, min, argmax, argmin) */
  bool columns;        /* eager has a vector path over contiguous columns */
  bool prepped;        /* has a prep other than (x) */
  kn__red_kind pre;    /* CENTERED rows: the row of the first pass; else NONE */
} kn__red_row;

/* The rows, indexed by kind. */
extern const kn__red_row kn__red_rows[KN__RED_COUNT];

/* Where an op's arguments are (-1: the op has none of that kind). */
typedef struct kn__red_use {
  const kn__red_row *row;
  int dims;      /* dims: int[] (or one int: one_dim); NONE / [] = every dim */
  bool one_dim;  /* dims is one int? (prod.dim_int, argmax) */
  int keepdim;   /* bool */
  int dtype;     /* ScalarType? */
  int corr;      /* int? correction (default 1) */
  int ord;       /* Scalar ord: the norm's order picks the row (kn__red_norm_row) */
} kn__red_use;

/* The row of op id, or NULL when the op is not a reduction of the table.
** Static. Every op flagged KN_OPF_REDUCTION has one. */
const kn__red_use *kn__red_for_op(int op);
/* The row of the vector norm of order ord (0, 1, 2, inf, -inf, or NORMP,
** which takes ord as its c). Static. */
const kn__red_row *kn__red_norm_row(double ord);

/* The helpers of the rows' text, as one macro: the eager kernels expand it as
** code, the code generator writes its text into a generated file that uses
** a row naming one (KN__RED_HELPERS_TEXT). kn__red_powp(a, p) is a^p for
** a >= 0: by repeated squaring for a whole p in 1..16 (the p-norm's usual
** orders; a float's square is exact in double, so |x|^3 of a float32 x is
** rounded once; libm's pow per element made norm(x, 3) cost 20x norm(x, 2)),
** else pow(a, p). */
#define KN__RED_HELPERS                                                                     \
  static inline double kn__red_powp(double a, double p) {                                 \
    if (!(p >= 1 && p <= 16) || (double)(int)p != p) return pow(a, p);                    \
    double r = 1, b = a;                                                                  \
    for (int e = (int)p;; b *= b) {                                                       \
      if (e & 1) r *= b;                                                                  \
      if (!(e >>= 1)) return r;                                                           \
    }                                                                                     \
  }
#define KN__RED_STR_(...) #__VA_ARGS__
#define KN__RED_STR(...) KN__RED_STR_(__VA_ARGS__)
/* KN__RED_HELPERS as one line of C source. */
#define KN__RED_HELPERS_TEXT KN__RED_STR(KN__RED_HELPERS)
KN__RED_HELPERS

/* ---- the rows as inline functions (eager kernels) ----------------------------
** kn__red_better_K(acc, x), kn__red_prep_K(x, c), kn__red_comb_K(acc, x),
** kn__red_fin_K(acc, n, corr, c) over doubles; kn__red_ibetter_K and
** kn__red_icomb_K over int64_t (integer inputs). */
#define KN_RED(K, name, init, iinit, better, ibetter, prep, comb, icomb, fin, A, S, NAN_, col, \
               PRE)                                                                         \
  static inline bool kn__red_better_##K(double acc, double x) {                           \
    (void)acc, (void)x;                                                                   \
    return better;                                                                        \
  }                                                                                       \
  static inline bool kn__red_ibetter_##K(int64_t acc, int64_t x) {                        \
    (void)acc, (void)x;                                                                   \
    return ibetter;                                                                       \
  }                                                                                       \
  static inline double kn__red_prep_##K(double x, double c) {                             \
    (void)c;                                                                              \
    return prep;                                                                          \
  }                                                                                       \
  static inline double kn__red_comb_##K(double acc, double x) { return comb; }            \
  static inline int64_t kn__red_icomb_##K(int64_t acc, int64_t x) { return icomb; }       \
  static inline double kn__red_fin_##K(double acc, double n, double corr, double c) {     \
    (void)n, (void)corr, (void)c;                                                         \
    return fin;                                                                           \
  }
#include "ops/reduce_table.def"
#undef KN_RED

/* The output value of kind k from a floating accumulator (a switch over the
** rows' finalize functions, for kernels shared by several rows). */
double kn__red_finalize(kn__red_kind k, double acc, double n, double corr, double c);

#endif
