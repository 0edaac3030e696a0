/*
** ops/pointwise_kern.c: the element loops of every pointwise op and the
** driver that runs them (kn__pw_run).
**
** One row function per compute type (float32, float64, int64, bool)
** switches on the formula once per row; the cases are expanded from the
** formula table (ops/pointwise_formulas.h), each formula into a contiguous
** loop that gcc vectorises (`omp simd`, no fast-math), loops for
** a broadcast scalar operand, and a general strided loop. Transcendental
** float formulas (exp, log, tanh, erf, gelu, pow, ...) instead call the
** vector-math table of the CPU's widest ISA (ops/vmath.h), on the row itself
** when it is contiguous and on blocks gathered into a stack buffer when not.
** Integer arithmetic wraps (done in unsigned) like PyTorch's; float16/bfloat16
** compute in float.
*/
#include <stdatomic.h>
#include <string.h>
#include <tgmath.h>

#include "core/error.h"
#include "ops/iter.h"
#include "ops/pointwise.h"
#include "ops/pointwise_cvt16.h"
#include "ops/pointwise_formulas.h"
#include "ops/vmath.h"
#include "profiler/profiler.h"

typedef struct rowctx {
  kn__pwcode code;
  const kn__pwparams *prm;
  atomic_int *zero_div; /* set when an integer division meets a zero */
} rowctx;

/* ---- loop shapes ---------------------------------------------------------- */

#define UN_LOOP(T, TO, EXPR)                                                    \
  do {                                                                         \
    if (s[0] == (int64_t)sizeof(TO) && s[1] == (int64_t)sizeof(T)) {           \
      TO *y = (TO *)p[0];                                                      \
      const T *xs = (const T *)p[1];                                           \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                    \
        T a = xs[i];                                                           \
        (void)a;                                                               \
        y[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    } else {                                                                   \
      for (int64_t i = 0; i < n; i++) {                                        \
        T a = *(const T *)(p[1] + i * s[1]);                                   \
        (void)a;                                                               \
        *(TO *)(p[0] + i * s[0]) = (TO)(EXPR);                                 \
      }                                                                        \
    }                                                                          \
  } while (0)

#define BIN_LOOP(T, TO, EXPR)                                                   \
  do {                                                                         \
    const int64_t es = (int64_t)sizeof(T), eo = (int64_t)sizeof(TO);           \
    TO *y = (TO *)p[0];                                                        \
    const T *as = (const T *)p[1], *bs = (const T *)p[2];                      \
    if (s[0] == eo && s[1] == es && s[2] == es) {                              \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                    \
        T a = as[i], b = bs[i];                                                \
        (void)a, (void)b; /* a formula of a missing class is 0 */              \
        y[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    } else if (s[0] == eo && s[1] == es && s[2] == 0) {                        \
      const T b = bs[0];                                                       \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                    \
        T a = as[i];                                                           \
        (void)a, (void)b; /* a formula of a missing class is 0 */              \
        y[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    } else if (s[0] == eo && s[1] == 0 && s[2] == es) {                        \
      const T a = as[0];                                                       \
      _Pragma("omp simd") for (int64_t i = 0; i < n; i++) {                    \
        T b = bs[i];                                                           \
        (void)a, (void)b; /* a formula of a missing class is 0 */              \
        y[i] = (TO)(EXPR);                                                     \
      }                                                                        \
    } else {                                                                   \
      for (int64_t i = 0; i < n; i++) {                                        \
        T a = *(const T *)(p[1] + i * s[1]), b = *(const T *)(p[2] + i * s[2]); \
        (void)a, (void)b;                                                      \
        *(TO *)(p[0] + i * s[0]) = (TO)(EXPR);                                 \
      }                                                                        \
    }                                                                          \
  } while (0)

/* ---- scalar helpers --------------------------------------------------------- */

/* The formulas' vocabulary (ops/pointwise_formulas.h). */
KN__PW_HELPERS
#define kn_max(a, b) _Generic((a), float: kn_max_f32, default: kn_max_f64)(a, b)
#define kn_min(a, b) _Generic((a), float: kn_min_f32, default: kn_min_f64)(a, b)
#define kn_floordiv(a, b) _Generic((a), float: kn_floordiv_f32, default: kn_floordiv_f64)(a, b)

/* clamp (eager-only formulas; NaN stays). */
#define DEF_CLAMP(T, SFX)                                                       \
  static inline T clamp_##SFX(T x, const kn__pwparams *q) {                    \
    if (x != x) return x;                                                      \
    if (q->has_lo && x < (T)q->lo) x = (T)q->lo;                               \
    if (q->has_hi && x > (T)q->hi) x = (T)q->hi;                               \
    return x;                                                                  \
  }
DEF_CLAMP(float, f32)
DEF_CLAMP(double, f64)
#define kn_clamp(a, q) _Generic((a), float: clamp_f32, default: clamp_f64)(a, q)

/* Integer division; a zero divisor gives 0 and is reported by the driver. */
static inline int64_t idiv(int64_t a, int64_t b, bool floor_mode) {
  if (b == 0) return 0;
  if (b == -1) return kn_wneg(a);
  int64_t q = a / b;
  if (floor_mode && a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}

static inline int64_t kn_clamp_i64(int64_t x, const kn__pwparams *q) {
  if (q->has_lo && (double)x < q->lo) x = (int64_t)q->lo;
  if (q->has_hi && (double)x > q->hi) x = (int64_t)q->hi;
  return x;
}

/* ---- vector-math rows --------------------------------------------------------------- */

/* The vector-math function of a float formula (-1: none), by arity. */
static int vm_unary(kn__pwcode code) {
  const kn__pwform *f = kn__pw_form(code);
  return f->nin == 1 ? f->vm : -1;
}

static int vm_binary(kn__pwcode code) {
  const kn__pwform *f = kn__pw_form(code);
  return f->nin == 2 ? f->vm : -1;
}

/* Strided rows run through the vector functions in blocks of this many
** elements, gathered into (and scattered from) stack buffers. */
#define VBLOCK 256

/* softplus of a contiguous float32 row through the table's fused function;
** false: not applicable (other types, strided rows). */
static bool softplus_fused_f32(const kn__vmath *vm, char **p, const int64_t *s, int64_t n,
                               float beta, float thr) {
  if (s[0] != (int64_t)sizeof(float) || s[1] != (int64_t)sizeof(float)) return false;
  vm->softplus_f32((float *)p[0], (const float *)p[1], n, beta, thr);
  return true;
}

static bool softplus_fused_f64(const kn__vmath *vm, char **p, const int64_t *s, int64_t n,
                               double beta, double thr) {
  (void)vm, (void)p, (void)s, (void)n, (void)beta, (void)thr;
  return false;
}

#define DEF_VEC_ROWS(T, SFX)                                                    \
  /* Block [i0, i0 + m) of a strided operand: the row itself when it is       \
  ** contiguous, else gathered into buf (a broadcast scalar is replicated). */ \
  static const T *gather_##SFX(const char *p, int64_t s, int64_t i0, int64_t m, T *buf) { \
    if (s == (int64_t)sizeof(T)) return (const T *)p + i0;                     \
    for (int64_t k = 0; k < m; k++) buf[k] = *(const T *)(p + (i0 + k) * s);  \
    return buf;                                                                \
  }                                                                            \
  static void scatter_##SFX(char *p, int64_t s, int64_t i0, int64_t m, const T *buf) { \
    for (int64_t k = 0; k < m; k++) *(T *)(p + (i0 + k) * s) = buf[k];         \
  }                                                                            \
  /* softplus: beta x, exp, log1p through the table, in blocks (a          \
  ** contiguous float32 row in one fused pass: the same operations) */     \
  static void softplus_##SFX(char **p, const int64_t *s, int64_t n, const kn__pwparams *q) { \
    const kn__vmath *vm = kn__vmath_get();                                     \
    const T beta = (T)q->alpha, thr = (T)q->lo;                                \
    if (softplus_fused_##SFX(vm, p, s, n, beta, thr)) return;                  \
    T bx[VBLOCK], bt[VBLOCK], by[VBLOCK];                                      \
    for (int64_t i0 = 0; i0 < n; i0 += VBLOCK) {                               \
      int64_t m = n - i0 < VBLOCK ? n - i0 : VBLOCK;                           \
      const T *x = gather_##SFX(p[1], s[1], i0, m, bx);                        \
      for (int64_t k = 0; k < m; k++) bt[k] = x[k] * beta;                     \
      vm->SFX[KN__VM_EXP](by, bt, m);                                          \
      vm->SFX[KN__VM_LOG1P](by, by, m);                                        \
      for (int64_t k = 0; k < m; k++) by[k] = bt[k] > thr ? x[k] : by[k] / beta; \
      scatter_##SFX(p[0], s[0], i0, m, by);                                    \
    }                                                                          \
  }                                                                            \
  static bool vec_un_##SFX(kn__pwcode code, char **p, const int64_t *s, int64_t n) { \
    int op = vm_unary(code);                                                   \
    if (op < 0) return false;                                                  \
    kn__vm_##SFX fn = kn__vmath_get()->SFX[op];                                \
    const int64_t es = (int64_t)sizeof(T);                                     \
    if (s[0] == es && s[1] == es) {                                            \
      fn((T *)p[0], (const T *)p[1], n);                                       \
      return true;                                                             \
    }                                                                          \
    T bx[VBLOCK], by[VBLOCK];                                                  \
    for (int64_t i0 = 0; i0 < n; i0 += VBLOCK) {                               \
      int64_t m = n - i0 < VBLOCK ? n - i0 : VBLOCK;                           \
      T *y = s[0] == es ? (T *)p[0] + i0 : by;                                 \
      fn(y, gather_##SFX(p[1], s[1], i0, m, bx), m);                           \
      if (y == by) scatter_##SFX(p[0], s[0], i0, m, by);                       \
    }                                                                          \
    return true;                                                               \
  }                                                                            \
  static bool vec_bin_##SFX(kn__pwcode code, char **p, const int64_t *s, int64_t n) { \
    int op = vm_binary(code);                                                  \
    if (op < 0) return false;                                                  \
    kn__vm2_##SFX fn = kn__vmath_get()->SFX##b[op];                            \
    const int64_t es = (int64_t)sizeof(T);                                     \
    if (n == 1) { /* one element: every operand is a one-element row */      \
      fn((T *)p[0], (const T *)p[1], (const T *)p[2], 1);                      \
      return true;                                                             \
    }                                                                          \
    T ba[VBLOCK], bb[VBLOCK], by[VBLOCK];                                      \
    for (int64_t i0 = 0; i0 < n; i0 += VBLOCK) {                               \
      int64_t m = n - i0 < VBLOCK ? n - i0 : VBLOCK;                           \
      T *y = s[0] == es ? (T *)p[0] + i0 : by;                                 \
      fn(y, gather_##SFX(p[1], s[1], i0, m, ba), gather_##SFX(p[2], s[2], i0, m, bb), m); \
      if (y == by) scatter_##SFX(p[0], s[0], i0, m, by);                       \
    }                                                                          \
    return true;                                                               \
  }

DEF_VEC_ROWS(float, f32)
DEF_VEC_ROWS(double, f64)

/* ---- float rows ------------------------------------------------------------------ */

/* The loop of a formula by its arity. */
#define LOOP_1 UN_LOOP
#define LOOP_2 BIN_LOOP

/* One case per formula of the table: its loop, when the formula has a
** float expression (vector-math formulas ran before the switch). */
#define FLOAT_CASE(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D)                     \
  case KN__PW_##CODE:                                                          \
    if ((CL & KN__PWC_F) && VM < 0) LOOP_##NIN(T, OUT, F);                     \
    break;

#define DEF_FLOAT_ROWS(TY, SFX)                                                 \
  /* The cases that do not run the formula's loop: x ** 2, vector math,     \
  ** softplus. true when handled. */                                         \
  static bool special_##SFX(const rowctx *c, char **p, const int64_t *s, int64_t n) { \
    typedef TY T;                                                              \
    if (kn__pw_form(c->code)->nin == 1) {                                      \
      if (c->code == KN__PW_SOFTPLUS) softplus_##SFX(p, s, n, c->prm);         \
      return c->code == KN__PW_SOFTPLUS || vec_un_##SFX(c->code, p, s, n);     \
    }                                                                          \
    if (c->code == KN__PW_POW && s[2] == 0 && *(const T *)p[2] == 2) {         \
      for (int64_t i = 0; i < n; i++) { /* x ** 2 exactly, like torch */       \
        T a = *(const T *)(p[1] + i * s[1]);                                   \
        *(T *)(p[0] + i * s[0]) = a * a;                                       \
      }                                                                        \
      return true;                                                             \
    }                                                                          \
    return vec_bin_##SFX(c->code, p, s, n);                                    \
  }                                                                            \
  static void rows_##SFX(char **p, const int64_t *s, int64_t n, const void *vctx) { \
    typedef TY T;                                                              \
    const rowctx *c = vctx;                                                    \
    if (special_##SFX(c, p, s, n)) return;                                     \
    const T P1 = (T)(c->code == KN__PW_THRESHOLD_BW ? c->prm->lo : c->prm->alpha); \
    const int64_t PI = c->prm->ialpha;                                         \
    const kn__pwparams *q = c->prm;                                            \
    (void)P1, (void)PI, (void)q;                                               \
    switch (c->code) {                                                         \
      KN__PW_FORMULAS(FLOAT_CASE)                                              \
    default: break;                                                            \
    }                                                                          \
  }

DEF_FLOAT_ROWS(float, f32)
DEF_FLOAT_ROWS(double, f64)

/* ---- integer and bool rows ------------------------------------------------------- */

/* Integer division: a zero divisor gives 0 and is reported. */
static void idiv_row(char **p, const int64_t *s, int64_t n, const rowctx *c) {
  bool fl = c->code == KN__PW_DIV_FLOOR, zero = false;
  for (int64_t i = 0; i < n; i++) {
    int64_t a = *(const int64_t *)(p[1] + i * s[1]), b = *(const int64_t *)(p[2] + i * s[2]);
    zero = zero || b == 0;
    *(int64_t *)(p[0] + i * s[0]) = idiv(a, b, fl);
  }
  if (zero) atomic_store(c->zero_div, 1);
}

#define INT_CASE(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D)                       \
  case KN__PW_##CODE:                                                          \
    if (CL & KN__PWC_I) LOOP_##NIN(int64_t, OUT, I);                           \
    break;

static void int_rows(char **p, const int64_t *s, int64_t n, const void *vctx) {
  typedef int64_t T;
  const rowctx *c = vctx;
  if (c->code == KN__PW_DIV_TRUNC || c->code == KN__PW_DIV_FLOOR) {
    idiv_row(p, s, n, c);
    return;
  }
  const int64_t PI = c->prm->ialpha;
  const double P1 = c->prm->alpha;
  const kn__pwparams *q = c->prm;
  (void)PI, (void)P1, (void)q;
  switch (c->code) {
    KN__PW_FORMULAS(INT_CASE)
  default: break;
  }
}

#define BOOL_CASE(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D)                      \
  case KN__PW_##CODE:                                                          \
    if (CL & KN__PWC_B) LOOP_##NIN(bool, bool, B);                             \
    break;

static void bool_rows(char **p, const int64_t *s, int64_t n, const void *vctx) {
  const rowctx *c = vctx;
  switch (c->code) {
    KN__PW_FORMULAS(BOOL_CASE)
  default: break;
  }
}

/* ---- driver -------------------------------------------------------------------- */

kn_dtype kn__pw_compute_type(kn_dtype promoted) {
  switch (promoted) {
  case KN_FLOAT64: return KN_FLOAT64;
  case KN_FLOAT32:
  case KN_FLOAT16:
  case KN_BFLOAT16: return KN_FLOAT32;
  default: return KN_INT64;
  }
}

static bool writes_bool(kn__pwcode code) { return kn__pw_form(code)->bool_out; }

/* Formulas cheap enough to be limited by memory bandwidth. */
static bool memory_bound(kn__pwcode code) { return kn__pw_form(code)->memory_bound; }

static kn__iter_row_fn row_fn(kn_dtype cc, int nin) {
  (void)nin; /* one row function per compute type serves both arities */
  switch (cc) {
  case KN_FLOAT32: return rows_f32;
  case KN_FLOAT64: return rows_f64;
  case KN_BOOL: return bool_rows;
  default: return int_rows;
  }
}

/* Does in share memory with out without being exactly out's elements (an
** in-place op reading another view of self)? It is then read from a copy. */
static bool overlaps_differently(const kn_tensor *out, const kn_tensor *in) {
  if (out->storage != in->storage || out == in) return false;
  if (in->offset != out->offset || in->ndim != out->ndim) return true;
  for (int d = 0; d < in->ndim; d++)
    if (in->sizes[d] != out->sizes[d] || (in->sizes[d] > 1 && in->strides[d] != out->strides[d]))
      return true;
  return false;
}

typedef union scalar_buf { float f; double d; int64_t i; bool b; } scalar_buf;

static void scalar_to(scalar_buf *b, kn_scalar s, kn_dtype cc) {
  switch (cc) {
  case KN_FLOAT32: b->f = (float)kn__pw_scalar_double(s); break;
  case KN_FLOAT64: b->d = kn__pw_scalar_double(s); break;
  case KN_BOOL: b->b = kn__pw_scalar_double(s) != 0; break;
  default: b->i = kn__pw_scalar_int(s); break;
  }
}

/* Is t laid out like out (contiguous, same shape) or a single element?
** n_out: out's element count. */
static bool flat_operand(const kn_tensor *t, const kn_tensor *out, int64_t n_out, bool *single) {
  bool same_shape = t->ndim == out->ndim;
  for (int d = 0; same_shape && d < t->ndim; d++) same_shape = t->sizes[d] == out->sizes[d];
  *single = same_shape ? n_out == 1 : kn__numel(t->ndim, t->sizes) == 1;
  return *single || (same_shape && kn__contiguous(t));
}

/* kn_data with the element size known: the address of t's first element,
** or NULL (with kn_data's error) when t holds no data. */
static char *data_at(const kn_tensor *t, size_t es) {
  char *d = t->storage->data;
  return d ? d + t->offset * (int64_t)es : kn_data(t);
}

/* Small ops whose operands are all contiguous and of out's shape (or single
** elements / scalars) run as one row, without the iterator's setup: that
** is most of the cost of a one-element op. n: dst's element count.
** false: not applicable. */
static bool run_flat(kn_tensor *dst, int64_t n, int nin, const kn_tensor *const *ts,
                     void *const *scal, kn_dtype cc, kn__iter_row_fn fn, const void *ctx,
                     int64_t grain) {
  if (n >= 2 * grain || !kn__contiguous(dst)) return false;
  size_t es_out = kn__dtype_size(dst->dtype), es_in = kn__dtype_size(cc);
  char *p[3] = {data_at(dst, es_out)};
  int64_t s[3] = {(int64_t)es_out};
  for (int k = 0; k < nin; k++) {
    bool single = true;
    if (ts[k] && !flat_operand(ts[k], dst, n, &single)) return false;
    p[k + 1] = ts[k] ? data_at(ts[k], es_in) : scal[k];
    s[k + 1] = single ? 0 : (int64_t)es_in;
  }
  fn(p, s, n, ctx);
  return true;
}

/* Can a float32 formula read and write out's and in's 16-bit operands
** block by block (ops/pointwise_cvt16.c) instead of through float32 copies?
** Fills the block context's dtypes. */
static bool fuse16(const kn_tensor *out, int nin, const kn__pwopnd *in, kn_dtype cc,
                   kn_dtype ot, kn__pw16ctx *f) {
  bool any = kn__pw16_is16(out->dtype);
  if (cc != KN_FLOAT32 || ot != KN_FLOAT32 || (!any && out->dtype != KN_FLOAT32)) return false;
  f->nops = nin + 1;
  f->dt[0] = out->dtype;
  for (int k = 0; k < nin; k++) {
    const kn_tensor *t = in[k].t;
    f->dt[k + 1] = t ? t->dtype : KN_FLOAT32;
    if (t && ((!kn__pw16_is16(t->dtype) && t->dtype != KN_FLOAT32) ||
              overlaps_differently(out, t)))
      return false;
    any = any || (t && kn__pw16_is16(t->dtype));
  }
  return any;
}

/* The common case of a small op, checked first and with the least work:
** the output of the formula's result type, every tensor operand of the
** compute type and not overlapping the output otherwise than as itself,
** the whole run flat (run_flat). It is what the general path below does
** for such a call, without its conversion and 16-bit checks. true: done,
** *st set. */
static bool run_direct(kn_tensor *out, int64_t n, int nin, const kn__pwopnd *in, kn_dtype cc,
                       kn__pwcode code, const kn__pwparams *prm, kn_status *st) {
  if (out->dtype != (writes_bool(code) ? KN_BOOL : cc)) return false;
  const kn_tensor *ts[2] = {NULL, NULL};
  void *scal[2] = {NULL, NULL};
  scalar_buf bufs[2];
  for (int k = 0; k < nin; k++) {
    if (!in[k].t) {
      scalar_to(&bufs[k], in[k].s, cc);
      scal[k] = &bufs[k];
    } else if (in[k].t->dtype != cc || overlaps_differently(out, in[k].t)) {
      return false;
    }
    ts[k] = in[k].t;
  }
  atomic_int zero_div = 0;
  rowctx ctx = {code, prm, &zero_div};
  int64_t grain = memory_bound(code) ? KN__PAR_GRAIN_MEM : KN__PAR_GRAIN;
  if (!run_flat(out, n, nin, ts, scal, cc, row_fn(cc, nin), &ctx, grain)) return false;
  *st = atomic_load(&zero_div) ? kn__error(KN_EINVAL, "ZeroDivisionError") : KN_OK;
  return true;
}

kn_status kn__pw_run(kn_tensor *out, int nin, const kn__pwopnd *in, kn_dtype cc,
                     kn__pwcode code, const kn__pwparams *prm) {
  KN_ASSERT(nin >= 1 && nin <= 2);
  int64_t n = out->sym ? kn_numel(out) : kn__numel(out->ndim, out->sizes);
  if (n == 0) return KN_OK;
  kn_status direct;
  if (run_direct(out, n, nin, in, cc, code, prm, &direct)) return direct;
  kn_dtype ot = writes_bool(code) ? KN_BOOL : cc;
  kn_tensor *conv[2] = {NULL, NULL}, *tmp = NULL;
  const kn_tensor *ts[2] = {NULL, NULL};
  void *scal[2] = {NULL, NULL};
  scalar_buf bufs[2];
  static const int64_t zeros[KN_MAX_DIMS];
  kn_status st = KN_OK;
  kn_tensor *dst = out;
  kn__pw16ctx f16;
  bool fused = fuse16(out, nin, in, cc, ot, &f16);
  if (out->dtype != ot && !fused) {
    dst = tmp = kn__empty(out->ndim, out->sizes, ot, KN_CPU);
    if (!tmp) return kn_last_status();
  }
  for (int k = 0; k < nin; k++) {
    if (in[k].t) {
      ts[k] = in[k].t;
      if (!fused && (ts[k]->dtype != cc || overlaps_differently(out, ts[k]))) {
        int64_t tp = kn__prof_sub_begin();
        ts[k] = conv[k] = kn__contiguous_copy(ts[k], cc);
        kn__prof_sub_end("pointwise::convert_input", tp);
        if (!ts[k]) {
          st = kn_last_status();
          goto done;
        }
      }
    } else {
      scalar_to(&bufs[k], in[k].s, cc);
      scal[k] = &bufs[k];
    }
  }
  atomic_int zero_div = 0;
  rowctx ctx = {code, prm, &zero_div};
  int64_t grain = memory_bound(code) ? KN__PAR_GRAIN_MEM : KN__PAR_GRAIN;
  kn__iter_row_fn fn = row_fn(cc, nin);
  const void *fctx = &ctx;
  if (fused) f16.fn = fn, f16.ctx = &ctx, fn = kn__pw16_rows, fctx = &f16;
  if (fused || !run_flat(dst, n, nin, ts, scal, cc, fn, fctx, grain)) {
    kn__iter it;
    kn__iter_init(&it, out->ndim, out->sizes);
    kn__iter_add(&it, dst);
    for (int k = 0; k < nin; k++) {
      if (ts[k]) kn__iter_add_broadcast(&it, ts[k]);
      else kn__iter_add_raw(&it, scal[k], zeros, kn_dtype_size(cc));
    }
    kn__iter_run(&it, fn, fctx, grain);
  }
  if (atomic_load(&zero_div)) {
    st = kn__error(KN_EINVAL, "ZeroDivisionError");
    goto done;
  }
  if (tmp) {
    int64_t tp = kn__prof_sub_begin();
    st = kn__copy_into(out, tmp);
    kn__prof_sub_end("pointwise::convert_output", tp);
  }
done:
  kn_release(tmp);
  kn_release(conv[0]);
  kn_release(conv[1]);
  return st;
}
