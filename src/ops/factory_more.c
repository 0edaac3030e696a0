/*
** ops/factory_more.c: random factories (rand, randn, randint), ranges
** (arange, linspace) and eye. Random kernels draw element i from Philox
** block (offset + i), so results do not depend on the thread count.
*/
#include <math.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "ops/opdef.h"
#include "tensor/random.h"
#include "ops/threads.h"


/* ---- random ------------------------------------------------------------------ */

/* randint's arguments follow its schema: (low, high, size, generator,
** dtype). */
kn_status kn__meta_randint(const kn__call *c, kn__metas *out) {
  int64_t lo = c->args[0].u.i, hi = c->args[1].u.i;
  if (lo >= hi)
    return kn__error(KN_EINVAL,
                     "random_ expects 'from' to be less than 'to', but got from=%lld >= to=%lld",
                     (long long)lo, (long long)hi);
  kn__call sized = *c; /* the size list where the shared factory meta reads it */
  sized.args[0] = c->args[2];
  return kn__meta_factory(&sized, out);
}

static kn_status check_float_dtype(const char *op, kn_dtype dt) {
  if (!kn_dtype_is_floating(dt))
    return kn__error(KN_EDTYPE, "%s: expected a floating point dtype, got %s", op,
                     kn_dtype_name(dt));
  return KN_OK;
}

/* Fill t: element i is sample(philox block (offset + i)). */
typedef void (*sample_fn)(const uint32_t w[4], char *dst, kn_dtype dt, const void *ud);

static kn_status fill_random(kn_tensor *t, kn_generator *gen, sample_fn sample, const void *ud) {
  int64_t n = kn__numel(t->ndim, t->sizes);
  kn_generator *g = kn__generator_or_default(gen);
  uint64_t seed = g->seed, first = kn__generator_reserve(g, (uint64_t)n);
  char *p = kn_data(t);
  int64_t es = (int64_t)kn_dtype_size(t->dtype);
  kn_dtype dt = t->dtype;
  KN__PAR_FOR(kn__par_team(n, n, KN__GRAIN), for (int64_t i = 0; i < n; i++) {
    uint32_t w[4];
    kn__philox(seed, first + (uint64_t)i, w);
    sample(w, p + i * es, dt, ud);
  });
  return KN_OK;
}

static void sample_uniform(const uint32_t w[4], char *dst, kn_dtype dt, const void *ud) {
  (void)ud;
  if (dt == KN_FLOAT64) *(double *)dst = kn__u01_double(w[0], w[1]);
  else if (dt == KN_FLOAT32) *(float *)dst = kn__u01_float(w[0]);
  else kn__store_double(dst, dt, kn__u01_float(w[0]));
}

/* Box-Muller; 1 - u keeps the log argument in (0, 1]. */
static void sample_normal(const uint32_t w[4], char *dst, kn_dtype dt, const void *ud) {
  (void)ud;
  double u1 = 1.0 - kn__u01_double(w[0], w[1]), u2 = kn__u01_double(w[2], w[3]);
  kn__store_double(dst, dt, sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

typedef struct int_range { int64_t lo; uint64_t span; } int_range;

/* Modulo of 64 random bits: bias below 2^-32 for spans below 2^32. */
static void sample_int(const uint32_t w[4], char *dst, kn_dtype dt, const void *ud) {
  const int_range *r = ud;
  uint64_t x = (((uint64_t)w[0] << 32) | w[1]) % r->span;
  kn__store_int(dst, dt, (int64_t)((uint64_t)r->lo + x)); /* < high: fits, wraps no sign */
}

kn_status kn__k_rand(const kn__call *c, kn__outs *out) {
  kn_status st = check_float_dtype("rand", out->t[0]->dtype);
  return st != KN_OK ? st : fill_random(out->t[0], c->args[1].u.gen, sample_uniform, NULL);
}

kn_status kn__k_randn(const kn__call *c, kn__outs *out) {
  kn_status st = check_float_dtype("randn", out->t[0]->dtype);
  return st != KN_OK ? st : fill_random(out->t[0], c->args[1].u.gen, sample_normal, NULL);
}

kn_status kn__k_randint(const kn__call *c, kn__outs *out) {
  int_range r = {c->args[0].u.i, (uint64_t)c->args[1].u.i - (uint64_t)c->args[0].u.i};
  return fill_random(out->t[0], c->args[3].u.gen, sample_int, &r);
}

/* ---- ranges ------------------------------------------------------------------- */

static double scalar_d(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

static kn_dtype range_dtype(const kn__call *c, int nscalars, int dtarg) {
  if (c->args[dtarg].kind == KN__A_DTYPE) return c->args[dtarg].u.dt;
  for (int i = 0; i < nscalars; i++)
    if (c->args[i].u.s.kind == KN_SCALAR_FLOAT) return kn_default_dtype();
  return KN_INT64;
}

kn_status kn__meta_arange(const kn__call *c, kn__metas *out) {
  double start = scalar_d(c->args[0].u.s), end = scalar_d(c->args[1].u.s);
  double step = scalar_d(c->args[2].u.s);
  if (!isfinite(start) || !isfinite(end))
    return kn__error(KN_EINVAL, "unsupported range: %g -> %g", start, end);
  if (step == 0) return kn__error(KN_EINVAL, "step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return kn__error(KN_EINVAL, "upper bound and larger bound inconsistent with step sign");
  kn_dtype dt = range_dtype(c, 3, 3);
  double len = ceil((end - start) / step);
  if (!(len < 0x1p63))
    return kn__error(KN_ERANGE, "arange: the number of elements (%g) does not fit in int64 "
                     "(start %g, end %g, step %g)", len, start, end, step);
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  m->ndim = 1;
  m->sizes[0] = kn__sym_const((int64_t)len);
  return KN_OK;
}

kn_status kn__k_arange(const kn__call *c, kn__outs *out) {
  kn_tensor *t = out->t[0];
  double start = scalar_d(c->args[0].u.s), step = scalar_d(c->args[2].u.s);
  char *p = kn_data(t);
  size_t es = kn_dtype_size(t->dtype);
  bool ints = c->args[0].u.s.kind != KN_SCALAR_FLOAT && c->args[2].u.s.kind != KN_SCALAR_FLOAT;
  for (int64_t i = 0; i < t->sizes[0]; i++) {
    /* start + i * step lies in [start, end): computed modulo 2^64, it is exact */
    if (ints)
      kn__store_int(p + i * (int64_t)es, t->dtype,
                    (int64_t)((uint64_t)c->args[0].u.s.v.i +
                              (uint64_t)i * (uint64_t)c->args[2].u.s.v.i));
    else kn__store_double(p + i * (int64_t)es, t->dtype, start + (double)i * step);
  }
  return KN_OK;
}

kn_status kn__meta_linspace(const kn__call *c, kn__metas *out) {
  int64_t steps = c->args[2].u.i;
  if (steps < 0) return kn__error(KN_EINVAL, "number of steps must be non-negative");
  kn_dtype dt = c->args[3].kind == KN__A_DTYPE ? c->args[3].u.dt : kn_default_dtype();
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  m->ndim = 1;
  m->sizes[0] = kn__sym_const(steps);
  return KN_OK;
}

/* Like torch: the first half counts up from start, the second half down from
** end, so both endpoints are exact. */
kn_status kn__k_linspace(const kn__call *c, kn__outs *out) {
  kn_tensor *t = out->t[0];
  double start = scalar_d(c->args[0].u.s), end = scalar_d(c->args[1].u.s);
  int64_t steps = c->args[2].u.i, half = steps / 2;
  double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0.0;
  char *p = kn_data(t);
  size_t es = kn_dtype_size(t->dtype);
  if (t->dtype == KN_FLOAT32) { /* compute in float, as torch does */
    float fs = (float)start, fe = (float)end;
    float fstep = steps > 1 ? (fe - fs) / (float)(steps - 1) : 0.0f;
    for (int64_t i = 0; i < steps; i++)
      ((float *)p)[i] = i < half ? fs + fstep * (float)i : fe - fstep * (float)(steps - i - 1);
    return KN_OK;
  }
  for (int64_t i = 0; i < steps; i++) {
    double v = i < half ? start + step * (double)i : end - step * (double)(steps - i - 1);
    kn__store_double(p + i * (int64_t)es, t->dtype, v);
  }
  return KN_OK;
}

kn_status kn__meta_eye(const kn__call *c, kn__metas *out) {
  int64_t n = c->args[0].u.i, mm = c->args[1].u.i;
  if (n < 0) return kn__error(KN_EINVAL, "n must be greater or equal to 0, got %lld", (long long)n);
  if (mm < 0) return kn__error(KN_EINVAL, "m must be greater or equal to 0, got %lld", (long long)mm);
  kn_dtype dt = c->args[2].kind == KN__A_DTYPE ? c->args[2].u.dt : kn_default_dtype();
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  m->ndim = 2;
  m->sizes[0] = kn__sym_const(n);
  m->sizes[1] = kn__sym_const(mm);
  return KN_OK;
}

kn_status kn__k_eye(const kn__call *c, kn__outs *out) {
  (void)c;
  kn_tensor *t = out->t[0];
  char *p = kn_data(t);
  size_t es = kn_dtype_size(t->dtype);
  int64_t n = t->sizes[0], m = t->sizes[1];
  for (int64_t i = 0; i < n * m; i++) kn__store_int(p + i * (int64_t)es, t->dtype, 0);
  for (int64_t i = 0; i < n && i < m; i++) kn__store_int(p + (i * m + i) * (int64_t)es, t->dtype, 1);
  return KN_OK;
}

/* ---- public API --------------------------------------------------------------------- */

kn_tensor *kn_rand(int ndim, const int64_t *sizes, kn_generator *gen, kn_dtype dtype) {
  return kn__invoke(KN_OP_RAND, 3, (kn__arg[]){KN_A_INTS(sizes, ndim), KN_A_GEN(gen), KN_A_DT(dtype)});
}

kn_tensor *kn_randn(int ndim, const int64_t *sizes, kn_generator *gen, kn_dtype dtype) {
  return kn__invoke(KN_OP_RANDN, 3, (kn__arg[]){KN_A_INTS(sizes, ndim), KN_A_GEN(gen), KN_A_DT(dtype)});
}

kn_tensor *kn_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes,
                      kn_generator *gen, kn_dtype dtype) {
  return kn__invoke(KN_OP_RANDINT, 5,
                    (kn__arg[]){KN_A_I(low), KN_A_I(high), KN_A_INTS(sizes, ndim), KN_A_GEN(gen),
                                KN_A_DT(dtype)});
}

kn_tensor *kn_arange(kn_scalar start, kn_scalar end, kn_scalar step) {
  return kn__invoke(KN_OP_ARANGE, 4, (kn__arg[]){KN_A_S(start), KN_A_S(end), KN_A_S(step), KN_A_NONE});
}

kn_tensor *kn_arange_dtype(kn_scalar start, kn_scalar end, kn_scalar step, kn_dtype dtype) {
  return kn__invoke(KN_OP_ARANGE, 4, (kn__arg[]){KN_A_S(start), KN_A_S(end), KN_A_S(step), KN_A_DT(dtype)});
}

kn_tensor *kn_linspace(double start, double end, int64_t steps, kn_dtype dtype) {
  return kn__invoke(KN_OP_LINSPACE, 4,
                    (kn__arg[]){KN_A_S(kn_float(start)), KN_A_S(kn_float(end)), KN_A_I(steps),
                                KN_A_DT(dtype)});
}

kn_tensor *kn_eye(int64_t n, int64_t m, kn_dtype dtype) {
  return kn__invoke(KN_OP_EYE, 3, (kn__arg[]){KN_A_I(n), KN_A_I(m), KN_A_DT(dtype)});
}
