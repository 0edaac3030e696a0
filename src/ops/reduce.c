/*
** ops/reduce.c: sum, mean and prod: meta functions and kernels.
**
** Each kernel combines, starts and finishes as its row of the reduction
** table says (ops/reduce_table.h): the code generator lowers the same rows.
** Floating inputs accumulate in double (float16/bfloat16/float32 values are
** exact in double, and a double accumulator keeps float32 sums of 1e6
** elements within torch's tolerances); integer and bool inputs accumulate in
** int64 with wrap-around, as torch does. Output dtypes follow torch: integer
** and bool sums/products give int64 unless a dtype is given; mean needs a
** floating input or dtype. Large reductions run with OpenMP.
*/
#include <math.h>

#include "core/error.h"
#include "ops/cvt16.h"
#include "ops/reduce.h"
#include "ops/threads.h"
#include "ops/reduce_table.h"

typedef enum { R_SUM = KN__RED_SUM, R_MEAN = KN__RED_MEAN, R_PROD = KN__RED_PROD } rkind;

/* Argument layout: all-dims rows (self, dtype?); dim rows (self, dims,
** keepdim, dtype?). */
static bool is_dim_row(const kn__call *c) {
  return c->nargs >= 3 && c->args[2].kind == KN__A_BOOL;
}

static kn_status red_meta(const kn__call *c, kn__metas *out, rkind k) {
  const kn_tensor *t = c->args[0].u.t;
  bool dimrow = is_dim_row(c);
  kn__arg all = KN_A_NONE;
  const kn__arg *dims = dimrow ? &c->args[1] : &all;
  bool keepdim = dimrow && c->args[2].u.b;
  int dti = dimrow ? 3 : 1;
  bool has_dt = dti < c->nargs && c->args[dti].kind == KN__A_DTYPE;
  kn_dtype dt = kn__arg_dtype(c, dti, t->dtype);
  if ((unsigned)dt >= KN_DTYPE_COUNT)
    return kn__error(KN_EDTYPE, "%s(): invalid dtype %d", c->op->name, (int)dt);
  if (k == R_MEAN && !kn_dtype_is_floating(dt))
    return kn__error(KN_EDTYPE,
                     "mean(): could not infer output dtype. %s dtype must be either a floating "
                     "point or complex dtype. Got: %s",
                     has_dt ? "Optional" : "Input", kn__torch_dtype_name(dt));
  if (!has_dt && kn_dtype_is_integral(dt, true)) dt = KN_INT64;
  bool mask[KN_MAX_DIMS];
  kn_status st = kn__reduce_mask(c->op->name, t, dims, mask);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  kn__reduce_shape(t, mask, keepdim, m);
  return KN_OK;
}

kn_status kn__meta_sum(const kn__call *c, kn__metas *out) { return red_meta(c, out, R_SUM); }
kn_status kn__meta_mean(const kn__call *c, kn__metas *out) { return red_meta(c, out, R_MEAN); }
kn_status kn__meta_prod(const kn__call *c, kn__metas *out) { return red_meta(c, out, R_PROD); }

/* ---- rows ------------------------------------------------------------------- */

typedef struct acc {
  kn_dtype dt;   /* input dtype */
  double d;      /* floating accumulator */
  int64_t u;     /* integer accumulator (wraps, as the table's icombine) */
} acc;

static double sum_f32(const float *x, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 = kn__red_comb_SUM(s0, x[i]);
    s1 = kn__red_comb_SUM(s1, x[i + 1]);
    s2 = kn__red_comb_SUM(s2, x[i + 2]);
    s3 = kn__red_comb_SUM(s3, x[i + 3]);
  }
  for (; i < n; i++) s0 = kn__red_comb_SUM(s0, x[i]);
  return kn__red_comb_SUM(kn__red_comb_SUM(s0, s1), kn__red_comb_SUM(s2, s3));
}

static double sum_f64(const double *x, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 = kn__red_comb_SUM(s0, x[i]);
    s1 = kn__red_comb_SUM(s1, x[i + 1]);
    s2 = kn__red_comb_SUM(s2, x[i + 2]);
    s3 = kn__red_comb_SUM(s3, x[i + 3]);
  }
  for (; i < n; i++) s0 = kn__red_comb_SUM(s0, x[i]);
  return kn__red_comb_SUM(kn__red_comb_SUM(s0, s1), kn__red_comb_SUM(s2, s3));
}

static bool is16(kn_dtype dt) { return dt == KN_BFLOAT16 || dt == KN_FLOAT16; }

/* Sum of n contiguous bfloat16/float16 values: blocks converted to float32
** with the vector conversions (exact), then summed as float32 rows are. */
static double sum_16(const char *x, kn_dtype dt, int64_t n) {
  enum { BLK = 256 };
  float buf[BLK];
  double s = 0;
  for (int64_t i = 0; i < n; i += BLK) {
    int64_t m = n - i < BLK ? n - i : BLK;
    kn__cvt16_run(buf, KN_FLOAT32, x + i * 2, dt, m);
    s = kn__red_comb_SUM(s, sum_f32(buf, m));
  }
  return s;
}

static void row_sum(void *state, const char *p, int64_t n, int64_t s, int64_t start) {
  (void)start;
  acc *a = state;
  if (a->dt == KN_FLOAT32 && s == 4) {
    a->d = kn__red_comb_SUM(a->d, sum_f32((const float *)p, n));
  } else if (is16(a->dt) && s == 2) {
    a->d = kn__red_comb_SUM(a->d, sum_16(p, a->dt, n));
  } else if (a->dt == KN_FLOAT64 && s == 8) {
    a->d = kn__red_comb_SUM(a->d, sum_f64((const double *)p, n));
  } else if (kn_dtype_is_floating(a->dt)) {
    double t = kn__red_rows[KN__RED_SUM].init;
    for (int64_t i = 0; i < n; i++) t = kn__red_comb_SUM(t, kn__load_double(p + i * s, a->dt));
    a->d = kn__red_comb_SUM(a->d, t);
  } else {
    for (int64_t i = 0; i < n; i++) a->u = kn__red_icomb_SUM(a->u, kn__load_int(p + i * s, a->dt));
  }
}

static void row_prod(void *state, const char *p, int64_t n, int64_t s, int64_t start) {
  (void)start;
  acc *a = state;
  if (kn_dtype_is_floating(a->dt)) {
    for (int64_t i = 0; i < n; i++) a->d = kn__red_comb_PROD(a->d, kn__load_double(p + i * s, a->dt));
  } else {
    for (int64_t i = 0; i < n; i++) a->u = kn__red_icomb_PROD(a->u, kn__load_int(p + i * s, a->dt));
  }
}

static void store_acc(const acc *a, rkind k, int64_t nred, char *dst, kn_dtype odt) {
  if (kn_dtype_is_floating(a->dt)) {
    kn__store_double(dst, odt, kn__red_finalize((kn__red_kind)k, a->d, (double)nred, 0, 0));
  } else {
    kn__store_int(dst, odt, a->u);
  }
}

/* Whole-tensor sum of one contiguous floating row (16-bit: converted to
** float32 in blocks): blocks of 16384 elements summed on the threads, their
** sums added in order (kn__par_sum_blocks: the same result on any number
** of threads). */
typedef struct row_ref { const char *p; kn_dtype dt; } row_ref;

static double block_sum(const void *ctx, int64_t lo, int64_t hi) {
  const row_ref *r = ctx;
  if (is16(r->dt)) return sum_16(r->p + lo * 2, r->dt, hi - lo);
  return r->dt == KN_FLOAT32 ? sum_f32((const float *)r->p + lo, hi - lo)
                             : sum_f64((const double *)r->p + lo, hi - lo);
}

static double par_sum_row(const char *p, int64_t n, kn_dtype dt) {
  row_ref r = {p, dt};
  return kn__par_sum_blocks(n, 16384, KN__GRAIN, block_sum, &r);
}

/* Sum/mean over outer dims when the innermost kept dim is contiguous
** (e.g. a bias gradient: sum over the batch of [N, H]): every reduced
** element contributes a contiguous vector that is added into a double
** accumulator for a chunk of the inner dim, in memory order, instead of
** walking each output's strided column. bfloat16/float16 vectors are
** converted to float32 first (exact; the sums are the same as the
** per-element path's, in the same order). */
#define OUTER_CHUNK 512

typedef struct vacc {
  kn_dtype dt;
  double *acc;
  int64_t len;
} vacc;

/* sums[j] += row k's x[j] for the n rows of p (s bytes apart), four rows a
** pass: each column still adds its elements one by one in row order (the
** same double sums as a row at a time), with sums loaded and stored once a
** pass, in vectors (omp simd: without it the loop stays scalar at -O2). */
#define KN__VADD_BODY(T)                                                                    \
  int64_t k = 0;                                                                           \
  for (; k + 4 <= n; k += 4) {                                                             \
    const T *x0 = (const T *)(p + k * s), *x1 = (const T *)(p + (k + 1) * s);              \
    const T *x2 = (const T *)(p + (k + 2) * s), *x3 = (const T *)(p + (k + 3) * s);        \
    _Pragma("omp simd") for (int64_t j = 0; j < len; j++)                                  \
      sums[j] = (((sums[j] + (double)x0[j]) + (double)x1[j]) + (double)x2[j]) + (double)x3[j]; \
  }                                                                                        \
  for (; k < n; k++) {                                                                     \
    const T *x = (const T *)(p + k * s);                                                   \
    _Pragma("omp simd") for (int64_t j = 0; j < len; j++) sums[j] = sums[j] + (double)x[j]; \
  }

static void vadd_f32(double *restrict sums, const char *p, int64_t n, int64_t s, int64_t len) {
  KN__VADD_BODY(float)
}

static void vadd_f64(double *restrict sums, const char *p, int64_t n, int64_t s, int64_t len) {
  KN__VADD_BODY(double)
}

static void row_vadd(void *state, const char *p, int64_t n, int64_t s, int64_t start) {
  (void)start;
  vacc *v = state;
  float buf[OUTER_CHUNK];
  if (v->dt == KN_FLOAT32) vadd_f32(v->acc, p, n, s, v->len);
  else if (v->dt == KN_FLOAT64) vadd_f64(v->acc, p, n, s, v->len);
  else /* 16-bit: each row converted exactly, then added as float32 */
    for (int64_t k = 0; k < n; k++) {
      kn__cvt16_run(buf, KN_FLOAT32, p + k * s, v->dt, v->len);
      vadd_f32(v->acc, (const char *)buf, 1, 0, v->len);
    }
}

static bool outer_sum_applies(const kn__redplan *p, kn_dtype dt) {
  return (dt == KN_FLOAT32 || dt == KN_FLOAT64 || is16(dt)) && p->nk >= 1 && p->nr >= 1 &&
         p->kst[p->nk - 1] == (int64_t)kn_dtype_size(dt) && p->ksz[p->nk - 1] >= 16;
}

/* Columns a task of outer_sum takes: OUTER_CHUNK, or fewer (a multiple of
** 16, at least 64) when the kept rows times the chunks of OUTER_CHUNK are
** fewer than the team the work calls for (a bias gradient, [N, 256] summed
** over N, is one row of one chunk: one thread). Every column still sums its
** elements in memory order, whatever the chunk. */
static int64_t outer_chunk(const kn__redplan *p, int64_t inner, int64_t nrows) {
  int64_t team = kn__par_team(p->nout * p->nred, nrows * ((inner + 63) / 64), KN__GRAIN);
  int64_t tasks = nrows * ((inner + OUTER_CHUNK - 1) / OUTER_CHUNK);
  if (team <= tasks) return OUTER_CHUNK;
  int64_t per = (team + nrows - 1) / nrows; /* chunks a kept row needs */
  int64_t c = ((inner + per - 1) / per + 15) / 16 * 16;
  return c < 64 ? 64 : c;
}

static void outer_sum(const kn__redplan *p, kn_dtype dt, rkind k, char *dst, kn_dtype odt) {
  int64_t inner = p->ksz[p->nk - 1], nrows = p->nout / inner;
  int64_t chunk = outer_chunk(p, inner, nrows);
  int64_t nch = (inner + chunk - 1) / chunk, tasks = nrows * nch;
  size_t oes = kn_dtype_size(odt);
  KN__PAR_FOR(kn__par_team(p->nout * p->nred, tasks, KN__GRAIN),
  for (int64_t t = 0; t < tasks; t++) {
    int64_t r = t / nch, c0 = (t % nch) * chunk;
    int64_t len = inner - c0 < chunk ? inner - c0 : chunk;
    double sums[OUTER_CHUNK];
    for (int64_t j = 0; j < len; j++) sums[j] = kn__red_rows[k].init;
    vacc v = {dt, sums, len};
    int64_t o = r * inner + c0;
    kn__redplan_rows(p, kn__redplan_at(p, o), row_vadd, &v);
    for (int64_t j = 0; j < len; j++)
      kn__store_double(dst + (size_t)(o + j) * oes, odt,
                       kn__red_finalize((kn__red_kind)k, sums[j], (double)p->nred, 0, 0));
  });
}

static kn_status red_kernel(const kn__call *c, kn__outs *out, rkind k) {
  kn_tensor *o = out->t[0];
  bool dimrow = is_dim_row(c);
  kn__arg all = KN_A_NONE;
  bool mask[KN_MAX_DIMS];
  kn_status st = kn__reduce_mask(c->op->name, c->args[0].u.t, dimrow ? &c->args[1] : &all, mask);
  if (st != KN_OK) return st;
  /* an explicit dtype converts the input first; ints otherwise read as-is */
  kn_dtype idt = kn_dtype_is_floating(o->dtype) ? o->dtype : c->args[0].u.t->dtype;
  if (kn__arg_dtype(c, dimrow ? 3 : 1, KN_DTYPE_COUNT) != KN_DTYPE_COUNT) idt = o->dtype;
  kn_tensor *t = kn__reduce_input_as(c->args[0].u.t, idt);
  if (!t) return kn__oom();
  kn__redplan p;
  kn__redplan_init(&p, t, mask);
  char *dst = kn_data(o);
  size_t oes = kn_dtype_size(o->dtype);
  kn__row_fn fn = k == R_PROD ? row_prod : row_sum;
  acc init = {t->dtype, kn__red_rows[k].init, kn__red_rows[k].iinit};
  bool big = p.nout * p.nred >= KN__RED_PAR_MIN;
  if (p.nout == 1 && k != R_PROD && p.nr == 1 && big &&
      p.rst[0] == (int64_t)kn_dtype_size(t->dtype) &&
      (t->dtype == KN_FLOAT32 || t->dtype == KN_FLOAT64 || is16(t->dtype))) {
    acc a = init;
    a.d = par_sum_row(p.base, p.nred, t->dtype);
    store_acc(&a, k, p.nred, dst, o->dtype);
  } else if (k != R_PROD && outer_sum_applies(&p, t->dtype)) {
    outer_sum(&p, t->dtype, k, dst, o->dtype);
  } else {
    KN__PAR_FOR(kn__par_team(p.nout * p.nred, p.nout, KN__GRAIN),
    for (int64_t i = 0; i < p.nout; i++) {
      acc a = init;
      kn__redplan_rows(&p, kn__redplan_at(&p, i), fn, &a);
      store_acc(&a, k, p.nred, dst + (size_t)i * oes, o->dtype);
    });
  }
  kn_release(t);
  return KN_OK;
}

kn_status kn__k_sum(const kn__call *c, kn__outs *out) { return red_kernel(c, out, R_SUM); }
kn_status kn__k_mean(const kn__call *c, kn__outs *out) { return red_kernel(c, out, R_MEAN); }
kn_status kn__k_prod(const kn__call *c, kn__outs *out) { return red_kernel(c, out, R_PROD); }
