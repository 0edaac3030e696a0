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

/* Per-channel mean and biased variance of contiguous x viewed as [N, C, S]. */
static void channel_stats(const char *xp, kn_dtype dt, const bng *g, int64_t ch, double *mean,
                          double *var) {
  int64_t es = (int64_t)kn_dtype_size(dt);
  double s = 0, ss = 0, n = (double)(g->N * g->S);
  for (int64_t b = 0; b < g->N; b++) {
    const char *p = xp + ((b * g->C + ch) * g->S) * es;
    for (int64_t i = 0; i < g->S; i++) s += kn__nn_ld(p + i * es, dt);
  }
  double m = s / n;
  for (int64_t b = 0; b < g->N; b++) {
    const char *p = xp + ((b * g->C + ch) * g->S) * es;
    for (int64_t i = 0; i < g->S; i++) {
      double d = kn__nn_ld(p + i * es, dt) - m;
      ss += d * d;
    }
  }
  *mean = m;
  *var = ss / n;
}

static void set1(kn_tensor *t, int64_t i, double v) {
  kn__store_double((char *)kn_data(t) + (i * t->strides[0]) *
                   (int64_t)kn_dtype_size(t->dtype), t->dtype, v);
}

kn_status kn__k_batch_norm(const kn__call *c, kn__outs *out) {
  const kn_tensor *x0 = c->args[0].u.t;
  kn_status s = float_only("batch_norm", x0->dtype);
  if (s != KN_OK) return s;
  bng g;
  bn_check(c, &g);
  const kn_tensor *w = opt(c, 1), *b = opt(c, 2);
  kn_tensor *rm = (kn_tensor *)opt(c, 3), *rv = (kn_tensor *)opt(c, 4);
  bool training = c->args[5].u.b;
  double mom = c->args[6].u.d, eps = c->args[7].u.d;
  kn_tensor *x = kn__contiguous_copy(x0, x0->dtype);
  if (!x) return kn_last_status();
  kn_dtype dt = x->dtype;
  int64_t es = (int64_t)kn_dtype_size(dt), n = g.N * g.S;
  char *op = kn_data(out->t[0]);
  const char *xp = kn_data(x);
  for (int64_t ch = 0; ch < g.C; ch++) {
    double mean, var, invstd;
    if (training) {
      channel_stats(xp, dt, &g, ch, &mean, &var);
      invstd = 1.0 / sqrt(var + eps);
      set1(out->t[1], ch, mean);
      set1(out->t[2], ch, invstd);
      if (rm) set1(rm, ch, (1 - mom) * vget(rm, ch, 0) + mom * mean);
      if (rv) set1(rv, ch, (1 - mom) * vget(rv, ch, 0) + mom * var * (double)n / (double)(n - 1));
    } else {
      mean = vget(rm, ch, 0);
      invstd = 1.0 / sqrt(vget(rv, ch, 1) + eps);
    }
    double scale = invstd * vget(w, ch, 1), shift = vget(b, ch, 0) - mean * scale;
    for (int64_t bi = 0; bi < g.N; bi++) {
      int64_t o = ((bi * g.C + ch) * g.S) * es;
      for (int64_t i = 0; i < g.S; i++) kn__nn_st(op + o + i * es, dt, kn__nn_ld(xp + o + i * es, dt) * scale + shift);
    }
  }
  if (training && rm) kn__bump_version(rm);
  if (training && rv) kn__bump_version(rv);
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

kn_status kn__k_batch_norm_backward(const kn__call *c, kn__outs *out) {
  const kn_tensor *x0 = c->args[1].u.t, *w = opt(c, 2), *rm = opt(c, 3), *rv = opt(c, 4);
  const kn_tensor *sm = opt(c, 5), *si = opt(c, 6);
  bool train = c->args[7].u.b;
  double eps = c->args[8].u.d;
  kn_dtype dt = x0->dtype;
  kn_tensor *x = kn__contiguous_copy(x0, dt), *go = kn__contiguous_copy(c->args[0].u.t, dt);
  if (!x || !go) {
    kn_release(x);
    kn_release(go);
    return kn_last_status();
  }
  bng g = {x->sizes[0], x->sizes[1], 1};
  for (int d = 2; d < x->ndim; d++) g.S *= x->sizes[d];
  int64_t es = (int64_t)kn_dtype_size(dt);
  double M = (double)(g.N * g.S);
  const char *xp = kn_data(x), *gp = kn_data(go);
  char *gi = mask_at(c, 9, 0) ? kn_data(out->t[0]) : NULL;
  for (int64_t ch = 0; ch < g.C; ch++) {
    double mean = train ? vget(sm, ch, 0) : vget(rm, ch, 0);
    double invstd = train ? vget(si, ch, 1) : 1.0 / sqrt(vget(rv, ch, 1) + eps);
    double sg = 0, sgx = 0;
    for (int64_t b = 0; b < g.N; b++) {
      int64_t o = ((b * g.C + ch) * g.S) * es;
      for (int64_t i = 0; i < g.S; i++) {
        double gv = kn__nn_ld(gp + o + i * es, dt);
        sg += gv;
        sgx += gv * (kn__nn_ld(xp + o + i * es, dt) - mean) * invstd;
      }
    }
    if (mask_at(c, 9, 1)) set1(out->t[1], ch, sgx);
    if (mask_at(c, 9, 2)) set1(out->t[2], ch, sg);
    if (!gi) continue;
    double wv = vget(w, ch, 1);
    for (int64_t b = 0; b < g.N; b++) {
      int64_t o = ((b * g.C + ch) * g.S) * es;
      for (int64_t i = 0; i < g.S; i++) {
        double gv = kn__nn_ld(gp + o + i * es, dt), r;
        if (train) {
          double xh = (kn__nn_ld(xp + o + i * es, dt) - mean) * invstd;
          r = wv * invstd / M * (M * gv - sg - xh * sgx);
        } else {
          r = gv * wv * invstd;
        }
        kn__nn_st(gi + o + i * es, dt, r);
      }
    }
  }
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
