/*
** ops/nn_norm.c: native_batch_norm and native_layer_norm with their backward
** ops and derivative rules; the public kn_batch_norm / kn_layer_norm.
**
** batch_norm normalises each channel (dim 1) over the batch and spatial
** dims; in training it uses batch statistics and updates the running stats
** in place (momentum, unbiased variance), in eval it uses the running stats.
** layer_norm normalises over the trailing normalized_shape dims. Statistics
** are accumulated in double; outputs keep the input's dtype.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/norm_rows.h"
#include "ops/symsize.h"
#include "ops/threads.h"

static const kn_tensor *opt(const kn__call *c, int i) {
  return c->args[i].kind == KN__A_TENSOR ? c->args[i].u.t : NULL;
}

/* Element access through a contiguous copy: callers pass contiguous data. */
static double vget(const kn_tensor *t, int64_t i, double dflt) {
  return t ? kn_get(t, &i) : dflt;
}

static kn_status float_only(const char *op, kn_dtype dt) {
  if (!kn_dtype_is_floating(dt) || dt == KN_FLOAT16)
    return kn__error(KN_EDTYPE, "\"%s\" not implemented for '%s'", op,
                     kn__nn_scalar_type_name(dt));
  return KN_OK;
}

/* ---- batch norm ---------------------------------------------------------------------- */
/* args: input, weight?, bias?, running_mean?, running_var?, training, momentum, eps */

typedef struct bng {
  int64_t N, C, S; /* input viewed as [N, C, S] */
} bng;

static kn_status bn_check(const kn__call *c, bng *g) {
  const kn_tensor *x = c->args[0].u.t;
  if (x->ndim < 2) {
    char xs[128];
    kn__format_sizes(x->ndim, x->sizes, xs, sizeof xs);
    return kn__error(KN_ESHAPE, "batch_norm: expected at least 2-D input (got input of size %s)",
                     xs);
  }
  g->N = x->sizes[0], g->C = x->sizes[1], g->S = 1;
  for (int d = 2; d < x->ndim; d++) g->S *= x->sizes[d];
  static const char *names[4] = {"weight", "bias", "running_mean", "running_var"};
  for (int i = 1; i <= 4; i++) {
    const kn_tensor *t = opt(c, i);
    if (t && (t->ndim != 1 || t->sizes[0] != g->C))
      return kn__error(KN_ESHAPE, "%s should contain %lld elements not %lld", names[i - 1],
                       (long long)g->C, (long long)kn_numel(t));
  }
  bool training = c->args[5].u.b;
  if (!training && (!opt(c, 3) || !opt(c, 4)))
    return kn__error(KN_EINVAL, "running_mean and running_var must be defined in evaluation mode");
  if (training && g->N * g->S <= 1) {
    char xs[128];
    kn__format_sizes(x->ndim, x->sizes, xs, sizeof xs);
    return kn__error(KN_EINVAL, "Expected more than 1 value per channel when training, got "
                     "input size %s", xs);
  }
  return KN_OK;
}

kn_status kn__meta_batch_norm(const kn__call *c, kn__metas *out) {
  bng g;
  kn_status s = bn_check(c, &g);
  if (s != KN_OK) return s;
  const kn_tensor *x = c->args[0].u.t;
  kn_sym xs[KN_MAX_DIMS];
  kn__tensor_symsizes(x, xs);
  kn_sym cs = c->args[5].u.b ? xs[1] : kn__sym_const(0);
  if (!kn__metas_push_sizes(out, x->dtype, x->ndim, xs) ||
      !kn__metas_push_sizes(out, x->dtype, 1, &cs) || !kn__metas_push_sizes(out, x->dtype, 1, &cs))
    return kn__oom();
  return KN_OK;
}

/* ---- batch norm spans ------------------------------------------------------------
** x viewed as [N, C, S]: channel ch's elements are N contiguous spans of S.
** Statistics and the affine map are computed in double (as before: float32
** outputs round once); the float32 and float64 spans vectorise, the other
** dtypes load and store element by element. Channels (statistics) and
** spans (elementwise passes) split over kiln's threads; each result is
** computed by one thread, so it does not depend on the thread count. */

static double span_sum(const char *p, kn_dtype dt, int64_t n) {
  double s = 0;
  if (dt == KN_FLOAT32) {
    const float *f = (const float *)(const void *)p;
    _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) s += f[i];
  } else if (dt == KN_FLOAT64) {
    const double *f = (const double *)(const void *)p;
    _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) s += f[i];
  } else {
    int64_t es = (int64_t)kn_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) s += kn__nn_ld(p + i * es, dt);
  }
  return s;
}

/* sum of (x - m)^2 over a span */
static double span_sqdev(const char *p, kn_dtype dt, int64_t n, double m) {
  double s = 0;
  if (dt == KN_FLOAT32) {
    const float *f = (const float *)(const void *)p;
    _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) {
      double d = f[i] - m;
      s += d * d;
    }
  } else if (dt == KN_FLOAT64) {
    const double *f = (const double *)(const void *)p;
    _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) {
      double d = f[i] - m;
      s += d * d;
    }
  } else {
    int64_t es = (int64_t)kn_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
      double d = kn__nn_ld(p + i * es, dt) - m;
      s += d * d;
    }
  }
  return s;
}

/* o = x * a + b over a span */
static void span_affine(char *o, const char *x, kn_dtype dt, int64_t n, double a, double b) {
  if (dt == KN_FLOAT32) {
    float *d = (float *)(void *)o;
    const float *f = (const float *)(const void *)x;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = (float)(f[i] * a + b);
  } else if (dt == KN_FLOAT64) {
    double *d = (double *)(void *)o;
    const double *f = (const double *)(const void *)x;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = f[i] * a + b;
  } else {
    int64_t es = (int64_t)kn_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) kn__nn_st(o + i * es, dt, kn__nn_ld(x + i * es, dt) * a + b);
  }
}

/* Per-channel mean and biased variance (two passes, in double). */
static void channel_stats(const char *xp, kn_dtype dt, const bng *g, double *mean, double *var) {
  int64_t es = (int64_t)kn_dtype_size(dt), span = g->S * es;
  double n = (double)(g->N * g->S);
  int team = kn__par_team(g->N * g->C * g->S, g->C, KN__GRAIN);
  KN__PAR_FOR(team, for (int64_t ch = 0; ch < g->C; ch++) {
    double s = 0, ss = 0;
    for (int64_t b = 0; b < g->N; b++) s += span_sum(xp + (b * g->C + ch) * span, dt, g->S);
    double m = s / n;
    for (int64_t b = 0; b < g->N; b++)
      ss += span_sqdev(xp + (b * g->C + ch) * span, dt, g->S, m);
    mean[ch] = m;
    var[ch] = ss / n;
  });
}

static void set1(kn_tensor *t, int64_t i, double v) {
  kn__store_double((char *)kn_data(t) + (i * t->strides[0]) *
                   (int64_t)kn_dtype_size(t->dtype), t->dtype, v);
}

/* The per-channel affine map (scale, shift) of the forward; in training also
** the saved statistics and the running-stat update. */
static void bn_affine(const kn__call *c, kn__outs *out, const bng *g, const double *mean,
                      const double *var, double *scale, double *shift) {
  const kn_tensor *w = opt(c, 1), *b = opt(c, 2);
  kn_tensor *rm = (kn_tensor *)opt(c, 3), *rv = (kn_tensor *)opt(c, 4);
  bool training = c->args[5].u.b;
  double mom = c->args[6].u.d, eps = c->args[7].u.d, n = (double)(g->N * g->S);
  for (int64_t ch = 0; ch < g->C; ch++) {
    double m, invstd;
    if (training) {
      m = mean[ch];
      invstd = 1.0 / sqrt(var[ch] + eps);
      set1(out->t[1], ch, m);
      set1(out->t[2], ch, invstd);
      if (rm) set1(rm, ch, (1 - mom) * vget(rm, ch, 0) + mom * m);
      if (rv) set1(rv, ch, (1 - mom) * vget(rv, ch, 0) + mom * var[ch] * n / (n - 1));
    } else {
      m = vget(rm, ch, 0);
      invstd = 1.0 / sqrt(vget(rv, ch, 1) + eps);
    }
    scale[ch] = invstd * vget(w, ch, 1);
    shift[ch] = vget(b, ch, 0) - m * scale[ch];
  }
  if (training && rm) kn__bump_version(rm);
  if (training && rv) kn__bump_version(rv);
}

kn_status kn__k_batch_norm(const kn__call *c, kn__outs *out) {
  const kn_tensor *x0 = c->args[0].u.t;
  kn_status s = float_only("batch_norm", x0->dtype);
  if (s != KN_OK) return s;
  bng g;
  bn_check(c, &g);
  kn_dtype dt = x0->dtype;
  kn_tensor *x = NULL; /* a contiguous copy, only when x0 is not */
  const char *xp = kn__nn_dense(x0, dt, &x);
  double *st = malloc((size_t)(g.C ? g.C : 1) * 4 * sizeof *st);
  if (!xp || !st) {
    kn_release(x);
    free(st);
    return xp ? kn__oom() : kn_last_status();
  }
  double *mean = st, *var = st + g.C, *scale = st + 2 * g.C, *shift = st + 3 * g.C;
  if (c->args[5].u.b) channel_stats(xp, dt, &g, mean, var);
  bn_affine(c, out, &g, mean, var, scale, shift);
  int64_t span = g.S * (int64_t)kn_dtype_size(dt), spans = g.N * g.C;
  char *op = kn_data(out->t[0]);
  int team = kn__par_team(spans * g.S, spans, KN__GRAIN_MEM);
  KN__PAR_FOR(team, for (int64_t u = 0; u < spans; u++) {
    int64_t ch = u % g.C;
    span_affine(op + u * span, xp + u * span, dt, g.S, scale[ch], shift[ch]);
  });
  free(st);
  kn_release(x);
  return KN_OK;
}

/* args: grad_out, input, weight?, running_mean?, running_var?, save_mean?,
** save_invstd?, train, eps, output_mask (3 ints) */
static bool mask_at(const kn__call *c, int argi, int i) {
  const kn__arg *m = &c->args[argi];
  return m->kind == KN__A_INTS && i < m->u.ints.n && m->u.ints.v[i];
}

kn_status kn__meta_batch_norm_backward(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[1].u.t;
  kn_sym xs[KN_MAX_DIMS], zero = kn__sym_const(0);
  kn__tensor_symsizes(x, xs);
  kn_sym C = x->ndim >= 2 ? xs[1] : zero;
  bool in = mask_at(c, 9, 0);
  if (!kn__metas_push_sizes(out, x->dtype, in ? x->ndim : 1, in ? xs : &zero) ||
      !kn__metas_push_sizes(out, x->dtype, 1, mask_at(c, 9, 1) ? &C : &zero) ||
      !kn__metas_push_sizes(out, x->dtype, 1, mask_at(c, 9, 2) ? &C : &zero))
    return kn__oom();
  return KN_OK;
}

/* Over a span: *sg += sum g, *sgd += sum g * (x - mean). */
static void span_grad_sums(const char *gp, const char *xp, kn_dtype dt, int64_t n, double mean,
                           double *sg, double *sgd) {
  double a = 0, b = 0;
  if (dt == KN_FLOAT32) {
    const float *g = (const float *)(const void *)gp, *x = (const float *)(const void *)xp;
    _Pragma("omp simd reduction(+ : a, b)") for (int64_t i = 0; i < n; i++) {
      a += g[i];
      b += (double)g[i] * (x[i] - mean);
    }
  } else if (dt == KN_FLOAT64) {
    const double *g = (const double *)(const void *)gp, *x = (const double *)(const void *)xp;
    _Pragma("omp simd reduction(+ : a, b)") for (int64_t i = 0; i < n; i++) {
      a += g[i];
      b += g[i] * (x[i] - mean);
    }
  } else {
    int64_t es = (int64_t)kn_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
      double gv = kn__nn_ld(gp + i * es, dt);
      a += gv;
      b += gv * (kn__nn_ld(xp + i * es, dt) - mean);
    }
  }
  *sg += a;
  *sgd += b;
}

/* The input gradient over a span: gi = k * g + c0 + c1 * (x - mean), the
** training formula w * invstd / M * (M g - sum g - xhat * sum g xhat)
** rearranged per channel (evaluation: c0 = c1 = 0). */
static void span_grad_in(char *gi, const char *gp, const char *xp, kn_dtype dt, int64_t n,
                         const double *k) {
  double kg = k[0], c0 = k[1], c1 = k[2], mean = k[3];
  if (dt == KN_FLOAT32) {
    float *o = (float *)(void *)gi;
    const float *g = (const float *)(const void *)gp, *x = (const float *)(const void *)xp;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++)
      o[i] = (float)(kg * g[i] + c0 + c1 * (x[i] - mean));
  } else if (dt == KN_FLOAT64) {
    double *o = (double *)(void *)gi;
    const double *g = (const double *)(const void *)gp, *x = (const double *)(const void *)xp;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++)
      o[i] = kg * g[i] + c0 + c1 * (x[i] - mean);
  } else {
    int64_t es = (int64_t)kn_dtype_size(dt);
    for (int64_t i = 0; i < n; i++)
      kn__nn_st(gi + i * es, dt, kg * kn__nn_ld(gp + i * es, dt) + c0 +
                c1 * (kn__nn_ld(xp + i * es, dt) - mean));
  }
}

kn_status kn__k_batch_norm_backward(const kn__call *c, kn__outs *out) {
  const kn_tensor *x0 = c->args[1].u.t, *w = opt(c, 2), *rm = opt(c, 3), *rv = opt(c, 4);
  const kn_tensor *sm = opt(c, 5), *si = opt(c, 6);
  bool train = c->args[7].u.b;
  double eps = c->args[8].u.d;
  kn_dtype dt = x0->dtype;
  kn_tensor *x = NULL, *go = NULL; /* contiguous copies, only of inputs that are not */
  const char *xp = kn__nn_dense(x0, dt, &x), *gp = kn__nn_dense(c->args[0].u.t, dt, &go);
  bng g = {x0->sizes[0], x0->sizes[1], 1};
  for (int d = 2; d < x0->ndim; d++) g.S *= x0->sizes[d];
  double *st = malloc((size_t)(g.C ? g.C : 1) * 8 * sizeof *st);
  if (!xp || !gp || !st) {
    kn_release(x);
    kn_release(go);
    free(st);
    return st ? kn_last_status() : kn__oom();
  }
  /* per channel: mean, invstd, sum g, sum g (x - mean), then the input
  ** gradient's coefficients (span_grad_in's k: kg, c0, c1, mean) */
  double *mean = st, *inv = st + g.C, *sg = st + 2 * g.C, *sgd = st + 3 * g.C, *k = st + 4 * g.C;
  for (int64_t ch = 0; ch < g.C; ch++) {
    mean[ch] = train ? vget(sm, ch, 0) : vget(rm, ch, 0);
    inv[ch] = train ? vget(si, ch, 1) : 1.0 / sqrt(vget(rv, ch, 1) + eps);
  }
  int64_t es = (int64_t)kn_dtype_size(dt), span = g.S * es, spans = g.N * g.C;
  int team = kn__par_team(spans * g.S, g.C, KN__GRAIN);
  KN__PAR_FOR(team, for (int64_t ch = 0; ch < g.C; ch++) {
    sg[ch] = sgd[ch] = 0;
    for (int64_t b = 0; b < g.N; b++) {
      int64_t o = (b * g.C + ch) * span;
      span_grad_sums(gp + o, xp + o, dt, g.S, mean[ch], &sg[ch], &sgd[ch]);
    }
  });
  double M = (double)(g.N * g.S);
  for (int64_t ch = 0; ch < g.C; ch++) {
    double sgx = sgd[ch] * inv[ch], wv = vget(w, ch, 1), *kc = k + 4 * ch;
    if (mask_at(c, 9, 1)) set1(out->t[1], ch, sgx);
    if (mask_at(c, 9, 2)) set1(out->t[2], ch, sg[ch]);
    double a = wv * inv[ch] / M;
    kc[0] = train ? a * M : wv * inv[ch];
    kc[1] = train ? -a * sg[ch] : 0;
    kc[2] = train ? -a * sgx * inv[ch] : 0;
    kc[3] = mean[ch];
  }
  char *gi = mask_at(c, 9, 0) ? kn_data(out->t[0]) : NULL;
  int team2 = gi ? kn__par_team(spans * g.S, spans, KN__GRAIN_MEM) : 1;
  if (gi)
    KN__PAR_FOR(team2, for (int64_t u = 0; u < spans; u++) {
      span_grad_in(gi + u * span, gp + u * span, xp + u * span, dt, g.S, k + 4 * (u % g.C));
    });
  free(st);
  kn_release(x);
  kn_release(go);
  return KN_OK;
}

static int flat(const kn__call *c, int argi) {
  return c->args[argi].kind == KN__A_TENSOR ? kn__bw_input_index(c, argi, 0) : -1;
}

kn_status kn__bw_batch_norm(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  int fi[3] = {flat(c, 0), flat(c, 1), flat(c, 2)};
  int64_t mask[3];
  for (int i = 0; i < 3; i++) mask[i] = fi[i] >= 0 && ctx->needs_input_grad[fi[i]];
  bool train = c->args[5].u.b;
  kn__arg args[10] = {KN_A_T(ctx->grad_outputs[0]), c->args[0], c->args[1], c->args[3],
                      c->args[4], train ? KN_A_T(ctx->outputs[1]) : KN_A_NONE,
                      train ? KN_A_T(ctx->outputs[2]) : KN_A_NONE, c->args[5], c->args[7],
                      KN_A_INTS(mask, 3)};
  kn_tensor *r[3];
  if (kn__invoke_multi(KN_OP_BATCH_NORM_BACKWARD, 10, args, r, 3) != 3) return kn_last_status();
  for (int i = 0; i < 3; i++)
    if (mask[i]) ctx->grad_inputs[fi[i]] = r[i];
  return KN_OK;
}

/* ---- layer norm ------------------------------------------------------------------------ */
/* args: input, normalized_shape, weight?, bias?, eps */

kn_status kn__nn_norm_check(const kn__call *c, int64_t *M, int64_t *D) {
  const kn_tensor *x = c->args[0].u.t;
  const int64_t *ns = c->args[1].u.ints.v;
  int nn = c->args[1].u.ints.n;
  char nss[128], xs[128];
  kn__format_sizes(nn, ns, nss, sizeof nss);
  kn__format_sizes(x->ndim, x->sizes, xs, sizeof xs);
  if (nn < 1) return kn__error(KN_EINVAL, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = %s", nss);
  bool ok = x->ndim >= nn;
  for (int i = 0; ok && i < nn; i++) ok = x->sizes[x->ndim - nn + i] == ns[i];
  if (!ok) {
    char star[160];
    snprintf(star, sizeof star, "[*, %s", nss + 1);
    return kn__error(KN_ESHAPE, "Given normalized_shape=%s, expected input with shape %s, but "
                     "got input of size%s", nss, star, xs);
  }
  static const char *names[2] = {"weight", "bias"};
  for (int k = 0; k < 2; k++) {
    const kn_tensor *t = opt(c, 2 + k);
    if (!t) continue;
    bool same = t->ndim == nn;
    for (int i = 0; same && i < nn; i++) same = t->sizes[i] == ns[i];
    if (!same) {
      char ts[128];
      kn__format_sizes(t->ndim, t->sizes, ts, sizeof ts);
      return kn__error(KN_ESHAPE, "Expected %s to be of same shape as normalized_shape, but got "
                       "%s of shape %s and normalized_shape = %s", names[k], names[k], ts, nss);
    }
  }
  *D = 1;
  for (int i = 0; i < nn; i++) *D *= ns[i];
  *M = 1;
  for (int i = 0; i < x->ndim - nn; i++) *M *= x->sizes[i];
  return KN_OK;
}

kn_status kn__nn_norm_metas(const kn__call *c, kn__metas *out, kn_dtype stat_dt, int nstats) {
  const kn_tensor *x = c->args[0].u.t;
  kn_sym xs[KN_MAX_DIMS], ssz[KN_MAX_DIMS];
  kn__tensor_symsizes(x, xs);
  int nn = c->args[1].u.ints.n;
  for (int d = 0; d < x->ndim; d++) ssz[d] = d < x->ndim - nn ? xs[d] : kn__sym_const(1);
  if (!kn__metas_push_sizes(out, x->dtype, x->ndim, xs)) return kn__oom();
  for (int k = 0; k < nstats; k++)
    if (!kn__metas_push_sizes(out, stat_dt, x->ndim, ssz)) return kn__oom();
  return KN_OK;
}

kn_status kn__meta_layer_norm(const kn__call *c, kn__metas *out) {
  int64_t M, D;
  kn_status s = kn__nn_norm_check(c, &M, &D);
  return s == KN_OK ? kn__nn_norm_metas(c, out, c->args[0].u.t->dtype, 2) : s;
}

/* weight or bias as a contiguous float64 tensor (NULL when absent or on
** error; *st says which). Owned. */
static kn_tensor *as_f64(const kn_tensor *t, kn_status *stp) {
  if (!t) return NULL;
  kn_tensor *r = kn__contiguous_copy(t, KN_FLOAT64);
  if (!r) *stp = kn_last_status();
  return r;
}

static const double *dp(const kn_tensor *t) { return t ? (const double *)kn_data(t) : NULL; }

static void ln_rows(const char *xp, char *op, kn_dtype dt, int64_t M, int64_t D, double eps,
                    const double *w, const double *b, kn_tensor *mean, kn_tensor *rstd) {
  int64_t es = (int64_t)kn_dtype_size(dt);
  char *mp = kn_data(mean), *rp = kn_data(rstd);
  KN__PAR_FOR(kn__par_team(M * D, M, KN__GRAIN),
  for (int64_t r = 0; r < M; r++) {
    const char *x = xp + r * D * es;
    double s = 0, ss = 0;
    for (int64_t i = 0; i < D; i++) s += kn__nn_ld(x + i * es, dt);
    double m = s / (double)D;
    for (int64_t i = 0; i < D; i++) {
      double d = kn__nn_ld(x + i * es, dt) - m;
      ss += d * d;
    }
    double rs = 1.0 / sqrt(ss / (double)D + eps);
    for (int64_t i = 0; i < D; i++) {
      double v = (kn__nn_ld(x + i * es, dt) - m) * rs;
      if (w) v *= w[i];
      if (b) v += b[i];
      kn__nn_st(op + (r * D + i) * es, dt, v);
    }
    kn__nn_st(mp + r * es, dt, m);
    kn__nn_st(rp + r * es, dt, rs);
  });
}

const void *kn__nn_dense(const kn_tensor *t, kn_dtype dt, kn_tensor **tmp) {
  *tmp = NULL;
  if (t->dtype == dt && kn_is_contiguous(t)) return kn_data(t);
  *tmp = kn__contiguous_copy(t, dt);
  return *tmp ? kn_data(*tmp) : NULL;
}

const void *kn__nn_row_param(const kn_tensor *w, kn_dtype dt, int64_t D, double fill,
                             kn_tensor **tmp) {
  if (w) return kn__nn_dense(w, dt, tmp);
  *tmp = kn__empty(1, &D, dt, KN_CPU);
  if (!*tmp) return NULL;
  char *p = kn_data(*tmp);
  int64_t es = (int64_t)kn_dtype_size(dt);
  for (int64_t i = 0; i < D; i++) kn__nn_st(p + i * es, dt, fill);
  return kn_data(*tmp);
}

static bool row_dtype(kn_dtype dt) { return dt == KN_FLOAT32 || dt == KN_FLOAT64; }

/* float32 and float64: the vectorised row kernels (ops/norm_rows.c). */
static kn_status ln_fast(const kn__call *c, kn__outs *out, int64_t M, int64_t D) {
  const kn_tensor *x0 = c->args[0].u.t;
  kn_dtype dt = x0->dtype;
  kn_tensor *tx, *tw, *tb;
  const void *x = kn__nn_dense(x0, dt, &tx);
  const void *w = kn__nn_row_param(opt(c, 2), dt, D, 1, &tw);
  const void *b = kn__nn_row_param(opt(c, 3), dt, D, 0, &tb);
  kn_status s = x && w && b ? KN_OK : kn_last_status();
  if (s == KN_OK)
    kn__layer_norm_rows(dt, x, kn_data(out->t[0]), M, D, c->args[4].u.d, w, b,
                        kn_data(out->t[1]), kn_data(out->t[2]));
  kn_release(tx);
  kn_release(tw);
  kn_release(tb);
  return s;
}

kn_status kn__k_layer_norm(const kn__call *c, kn__outs *out) {
  const kn_tensor *x0 = c->args[0].u.t;
  kn_status s = float_only("LayerNormKernelImpl", x0->dtype);
  if (s != KN_OK) return s;
  int64_t M, D;
  kn__nn_norm_check(c, &M, &D);
  if (row_dtype(x0->dtype) && M > 0 && D > 0) return ln_fast(c, out, M, D);
  kn_tensor *x = kn__contiguous_copy(x0, x0->dtype);
  if (!x) return kn_last_status();
  kn_tensor *w = as_f64(opt(c, 2), &s), *b = as_f64(opt(c, 3), &s);
  if (s == KN_OK)
    ln_rows(kn_data(x), kn_data(out->t[0]), x->dtype, M, D, c->args[4].u.d, dp(w), dp(b),
            out->t[1], out->t[2]);
  kn_release(x);
  kn_release(w);
  kn_release(b);
  return s;
}

/* args: grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask */
kn_status kn__meta_layer_norm_backward(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[1].u.t;
  int nn = c->args[2].u.ints.n;
  kn_sym xs[KN_MAX_DIMS], ns[KN_MAX_DIMS], zero = kn__sym_const(0);
  kn__tensor_symsizes(x, xs);
  for (int j = 0; j < nn && j < KN_MAX_DIMS; j++) ns[j] = kn__arg_symint_at(&c->args[2], j);
  for (int i = 0; i < 3; i++) {
    bool on = mask_at(c, 7, i);
    const kn__outmeta *m =
        i == 0 ? kn__metas_push_sizes(out, x->dtype, on ? x->ndim : 1, on ? xs : &zero)
               : kn__metas_push_sizes(out, x->dtype, on ? nn : 1, on ? ns : &zero);
    if (!m) return kn__oom();
  }
  return KN_OK;
}

/* float32 and float64: the vectorised row kernels (ops/norm_rows.c). */
static kn_status ln_bw_fast(const kn__call *c, kn__outs *out, int64_t M, int64_t D) {
  const kn_tensor *x0 = c->args[1].u.t;
  kn_dtype dt = x0->dtype;
  kn_tensor *t[5];
  const void *x = kn__nn_dense(x0, dt, &t[0]), *go = kn__nn_dense(c->args[0].u.t, dt, &t[1]);
  const void *mean = kn__nn_dense(c->args[3].u.t, dt, &t[2]);
  const void *rstd = kn__nn_dense(c->args[4].u.t, dt, &t[3]);
  const void *w = kn__nn_row_param(opt(c, 5), dt, D, 1, &t[4]);
  kn_status s = x && go && mean && rstd && w ? KN_OK : kn_last_status();
  if (s == KN_OK)
    s = kn__layer_norm_rows_backward(dt, x, go, M, D, mean, rstd, w,
                                     mask_at(c, 7, 0) ? kn_data(out->t[0]) : NULL,
                                     mask_at(c, 7, 1) ? kn_data(out->t[1]) : NULL,
                                     mask_at(c, 7, 2) ? kn_data(out->t[2]) : NULL);
  for (int i = 0; i < 5; i++) kn_release(t[i]);
  return s;
}

kn_status kn__k_layer_norm_backward(const kn__call *c, kn__outs *out) {
  kn_status s = KN_OK;
  const kn_tensor *x0 = c->args[1].u.t;
  kn_dtype dt = x0->dtype;
  int nn = c->args[2].u.ints.n;
  int64_t D = 1, M;
  for (int i = 0; i < nn; i++) D *= c->args[2].u.ints.v[i];
  M = D ? kn_numel(x0) / D : 0;
  if (row_dtype(dt) && M > 0 && D > 0 && c->args[3].u.t->dtype == dt &&
      c->args[4].u.t->dtype == dt)
    return ln_bw_fast(c, out, M, D);
  kn_tensor *x = kn__contiguous_copy(x0, KN_FLOAT64);
  kn_tensor *go = kn__contiguous_copy(c->args[0].u.t, KN_FLOAT64);
  kn_tensor *mean = kn__contiguous_copy(c->args[3].u.t, KN_FLOAT64);
  kn_tensor *rstd = kn__contiguous_copy(c->args[4].u.t, KN_FLOAT64);
  kn_tensor *w = as_f64(opt(c, 5), &s);
  if (!x || !go || !mean || !rstd) s = kn_last_status();
  double *gw = NULL, *gb = NULL;
  size_t nb = (size_t)(D ? D : 1) * sizeof(double);
  if (s == KN_OK && (gw = kn__cached_alloc(nb)) && (gb = kn__cached_alloc(nb))) {
    memset(gw, 0, nb);
    memset(gb, 0, nb);
    const double *xp = dp(x), *gp = dp(go), *mp = dp(mean), *rp = dp(rstd), *wp = dp(w);
    char *gi = mask_at(c, 7, 0) ? kn_data(out->t[0]) : NULL;
    int64_t es = (int64_t)kn_dtype_size(dt);
    for (int64_t r = 0; r < M; r++) {
      const double *xr = xp + r * D, *gr = gp + r * D;
      double sg = 0, sgx = 0;
      for (int64_t i = 0; i < D; i++) {
        double xh = (xr[i] - mp[r]) * rp[r], g = gr[i] * (wp ? wp[i] : 1);
        sg += g;
        sgx += g * xh;
        gw[i] += gr[i] * xh;
        gb[i] += gr[i];
      }
      for (int64_t i = 0; gi && i < D; i++) {
        double xh = (xr[i] - mp[r]) * rp[r], g = gr[i] * (wp ? wp[i] : 1);
        kn__nn_st(gi + (r * D + i) * es, dt, rp[r] / (double)D * ((double)D * g - sg - xh * sgx));
      }
    }
    for (int64_t i = 0; i < D; i++) {
      if (mask_at(c, 7, 1)) kn__nn_st((char *)kn_data(out->t[1]) + i * es, dt, gw[i]);
      if (mask_at(c, 7, 2)) kn__nn_st((char *)kn_data(out->t[2]) + i * es, dt, gb[i]);
    }
  } else if (s == KN_OK) {
    s = kn__oom();
  }
  if (gw) kn__cached_free(gw, nb);
  if (gb) kn__cached_free(gb, nb);
  kn_release(x);
  kn_release(go);
  kn_release(mean);
  kn_release(rstd);
  kn_release(w);
  return s;
}

kn_status kn__bw_layer_norm(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  int fi[3] = {flat(c, 0), flat(c, 2), flat(c, 3)};
  int64_t mask[3];
  for (int i = 0; i < 3; i++) mask[i] = fi[i] >= 0 && ctx->needs_input_grad[fi[i]];
  kn_sym ns[KN_MAX_DIMS];
  kn__arg args[8] = {KN_A_T(ctx->grad_outputs[0]), c->args[0], kn__arg_known(&c->args[1], ns),
                     KN_A_T(ctx->outputs[1]), KN_A_T(ctx->outputs[2]), c->args[2], c->args[3],
                     KN_A_INTS(mask, 3)};
  kn_tensor *r[3];
  if (kn__invoke_multi(KN_OP_LAYER_NORM_BACKWARD, 8, args, r, 3) != 3) return kn_last_status();
  for (int i = 0; i < 3; i++)
    if (mask[i]) ctx->grad_inputs[fi[i]] = r[i];
  return KN_OK;
}

/* ---- public API ------------------------------------------------------------------------- */

static kn__arg opt_arg(kn_tensor *t) { return t ? KN_A_T(t) : KN_A_NONE; }

kn_tensor *kn_batch_norm(kn_tensor *input, kn_tensor *running_mean, kn_tensor *running_var,
                         kn_tensor *weight, kn_tensor *bias, bool training, double momentum,
                         double eps) {
  kn__arg args[8] = {KN_A_T(input), opt_arg(weight), opt_arg(bias), opt_arg(running_mean),
                     opt_arg(running_var), KN_A_B(training), KN_A_D(momentum), KN_A_D(eps)};
  kn_tensor *r[3];
  return kn__invoke_multi(KN_OP_BATCH_NORM, 8, args, r, 3) == 3 ? r[0] : NULL;
}

kn_tensor *kn_layer_norm(kn_tensor *input, int ndim, const int64_t *normalized_shape,
                         kn_tensor *weight, kn_tensor *bias, double eps) {
  kn__arg args[5] = {KN_A_T(input), KN_A_INTS(normalized_shape, ndim), opt_arg(weight),
                     opt_arg(bias), KN_A_D(eps)};
  kn_tensor *r[3];
  return kn__invoke_multi(KN_OP_LAYER_NORM, 5, args, r, 3) == 3 ? r[0] : NULL;
}
