/*
** ops/nn_pool.c: max_pool2d (with indices) and avg_pool2d, their backward
** ops and derivative rules. Input [N, C, H, W] or [C, H, W], any strides;
** every (image, channel) plane is pooled independently (OpenMP across
** planes for large inputs). Output sizes, ceil_mode and the checks follow
** PyTorch 1.13's pooling_output_shape and pool2d_shape_check.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/symsize.h"
#include "ops/threads.h"

typedef struct poolg {
  int64_t P, H, W, OH, OW; /* P = N * C planes */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
  bool cip;       /* avg: count_include_pad */
  int64_t divov;  /* avg: divisor_override, 0 for none */
} poolg;

static int64_t pick(const kn__arg *a, int i, int64_t dflt) {
  if (a->kind != KN__A_INTS || a->u.ints.n == 0) return dflt;
  return a->u.ints.v[a->u.ints.n == 1 ? 0 : i];
}

/* in + 2 pad - d (k - 1) - 1 (+ s - 1 with ceil), overflow-checked: huge
** parameters saturate and flag the overflow, which fails the op's meta. */
static int64_t window_num(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil) {
  int64_t span = kn__ck_add(kn__ck_mul(d, kn__ck_sub(k, 1)), 1);
  int64_t num = kn__ck_sub(kn__ck_add(in, kn__ck_mul(2, pad)), span);
  return ceil ? kn__ck_add(num, s - 1) : num;
}

static int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil) {
  int64_t num = window_num(in, k, pad, s, d, ceil);
  int64_t o = kn__ck_add(kn__floordiv64(num, s), 1); /* s > 0 (checked by the caller) */
  if (ceil && kn__ck_mul(o - 1, s) >= kn__ck_add(in, pad)) o--;
  return o;
}

kn_sym kn__nn_window_out(kn_sym in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  kn_sym num = kn__sym_add(in, kn__sym_const(window_num(0, k, p, s, d, ceil)));
  kn_sym o = kn__sym_add(kn__sym_floordiv(num, kn__sym_const(s)), kn__sym_const(1));
  if (ceil) {
    kn_sym start = kn__sym_mul(kn__sym_sub(o, kn__sym_const(1)), kn__sym_const(s));
    if (kn__sym_guard(start, KN__SYM_GE, kn__sym_add(in, kn__sym_const(p))))
      o = kn__sym_sub(o, kn__sym_const(1));
  }
  return o;
}

static kn_status list_len(const kn__arg *a, const char *op, const char *what, bool may_omit) {
  int n = a->kind == KN__A_INTS ? a->u.ints.n : 0;
  if ((n == 0 && !may_omit) || n > 2)
    return kn__error(KN_EINVAL, "%s: %s must either be %sa single int, or a tuple of two ints",
                     op, what, may_omit ? "omitted, " : "");
  return KN_OK;
}

/* args from index 1: kernel, stride, padding, [dilation], ceil_mode. */
static kn_status pool_geometry(const kn__call *c, const kn_tensor *x, const char *op,
                               bool dilation, poolg *g) {
  const kn__arg *a = &c->args[1];
  kn_status st;
  if ((st = list_len(&a[0], op, "kernel_size", false)) != KN_OK ||
      (st = list_len(&a[1], op, "stride", true)) != KN_OK ||
      (st = list_len(&a[2], op, "padding", false)) != KN_OK ||
      (dilation && (st = list_len(&a[3], op, "dilation", false)) != KN_OK))
    return st;
  bool valid = x->ndim == 3 || x->ndim == 4;
  for (int d = 1; valid && d < x->ndim; d++) valid = x->sizes[d] != 0;
  if (!valid)
    return kn__error(KN_ESHAPE, "non-empty 3D or 4D (batch mode) tensor expected for input");
  int off = x->ndim - 3;
  *g = (poolg){.H = x->sizes[off + 1], .W = x->sizes[off + 2], .kh = pick(&a[0], 0, 1),
               .kw = pick(&a[0], 1, 1), .ph = pick(&a[2], 0, 0), .pw = pick(&a[2], 1, 0),
               .dh = dilation ? pick(&a[3], 0, 1) : 1, .dw = dilation ? pick(&a[3], 1, 1) : 1,
               .ceil = a[dilation ? 4 : 3].u.b};
  if (!dilation) {
    g->cip = a[4].u.b;
    g->divov = a[5].kind == KN__A_INT ? a[5].u.i : 0;
  }
  g->sh = pick(&a[1], 0, g->kh);
  g->sw = pick(&a[1], 1, g->kw);
  g->P = (off ? x->sizes[0] : 1) * x->sizes[off];
  if (g->kh <= 0 || g->kw <= 0)
    return kn__error(KN_EINVAL, "kernel size should be greater than zero, but got kH: %lld kW: "
                     "%lld", (long long)g->kh, (long long)g->kw);
  if (g->sh <= 0 || g->sw <= 0) return kn__error(KN_EINVAL, "stride should not be zero");
  if (g->dh <= 0 || g->dw <= 0)
    return kn__error(KN_EINVAL, "dilation should be greater than zero, but got dilationH: %lld "
                     "dilationW: %lld", (long long)g->dh, (long long)g->dw);
  if (g->ph < 0 || g->pw < 0) return kn__error(KN_EINVAL, "pad must be non-negative");
  if (g->ph > g->kh / 2 || g->pw > g->kw / 2) {
    bool h = g->ph > g->kh / 2;
    return kn__error(KN_EINVAL, "pad should be at most half of kernel size, but got pad=%lld "
                     "and kernel_size=%lld", (long long)(h ? g->ph : g->pw),
                     (long long)(h ? g->kh : g->kw));
  }
  g->OH = out_size(g->H, g->kh, g->ph, g->sh, g->dh, g->ceil);
  g->OW = out_size(g->W, g->kw, g->pw, g->sw, g->dw, g->ceil);
  if (g->OH < 1 || g->OW < 1)
    return kn__error(KN_ESHAPE, "Given input size: (%lldx%lldx%lld). Calculated output size: "
                     "(%lldx%lldx%lld). Output size is too small", (long long)x->sizes[off],
                     (long long)g->H, (long long)g->W, (long long)x->sizes[off],
                     (long long)g->OH, (long long)g->OW);
  return KN_OK;
}

/* Output of x's leading dims and the (symbolic) pooled H and W. */
static kn_status push_like(kn__metas *out, const kn_tensor *x, kn_dtype dt, const poolg *g) {
  kn__outmeta *m = kn__metas_push_like(out, x, dt);
  if (!m) return kn__oom();
  m->sizes[x->ndim - 2] =
      kn__nn_window_out(m->sizes[x->ndim - 2], g->kh, g->sh, g->ph, g->dh, g->ceil);
  m->sizes[x->ndim - 1] =
      kn__nn_window_out(m->sizes[x->ndim - 1], g->kw, g->sw, g->pw, g->dw, g->ceil);
  return KN_OK;
}

static kn_status dtype_check(const char *op, kn_dtype dt, bool ints_ok) {
  if (dt == KN_FLOAT16 || dt == KN_BOOL || (!ints_ok && kn_dtype_is_integral(dt, false)))
    return kn__error(KN_EDTYPE, "\"%s\" not implemented for '%s'", op,
                     kn__nn_scalar_type_name(dt));
  return KN_OK;
}

/* Element (p, h, w) of a 3-D/4-D tensor viewed as [P, H, W]: planes are
** (n, c) pairs. Returns a byte offset. */
static int64_t plane_off(const kn_tensor *x, int64_t p) {
  int64_t es = (int64_t)kn_dtype_size(x->dtype);
  if (x->ndim == 3) return p * x->strides[0] * es;
  int64_t C = x->sizes[1];
  return ((p / C) * x->strides[0] + (p % C) * x->strides[1]) * es;
}


/* ---- max_pool2d_with_indices ---------------------------------------------------- */
/* args: self, kernel_size, stride, padding, dilation, ceil_mode */

kn_status kn__meta_max_pool2d(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[0].u.t;
  poolg g;
  kn_status s = pool_geometry(c, x, "max_pool2d", true, &g);
  if (s != KN_OK) return s;
  if ((s = push_like(out, x, x->dtype, &g)) != KN_OK) return s;
  return push_like(out, x, KN_INT64, &g);
}

/* Where the taps of max pooling's windows fall inside the plane, computed
** once per call (shared by every plane): output row oh's window covers the
** kernel rows i in [r[oh], r[OH + oh]); kernel column j lands inside the
** plane for the output columns ow in [c[j], c[kw + j]). */
typedef struct spans {
  int64_t *r, *c;
} spans;

/* The taps i in [*lo, *hi) of a window starting at s0 (k taps, step d)
** that land in [0, n). */
static void span(int64_t s0, int64_t k, int64_t d, int64_t n, int64_t *lo, int64_t *hi) {
  int64_t a = s0 < 0 ? (-s0 + d - 1) / d : 0, b = k;
  if (s0 + (k - 1) * d >= n) b = s0 >= n ? 0 : (n - 1 - s0) / d + 1;
  *lo = a < k ? a : k, *hi = b > *lo ? b : *lo;
}

/* KN_OK, or the out-of-memory error. s->r (owned) is released with free. */
static kn_status spans_make(const poolg *g, spans *s) {
  s->r = malloc((size_t)(2 * g->OH + 2 * g->kw) * sizeof(int64_t));
  if (!s->r) return kn__oom();
  s->c = s->r + 2 * g->OH;
  for (int64_t oh = 0; oh < g->OH; oh++)
    span(oh * g->sh - g->ph, g->kh, g->dh, g->H, &s->r[oh], &s->r[g->OH + oh]);
  for (int64_t j = 0; j < g->kw; j++) {
    /* ow * sw + off inside [0, W): ow from ceil(-off / sw) to (W - 1 - off) / sw */
    int64_t off = j * g->dw - g->pw, lo = off < 0 ? (-off + g->sw - 1) / g->sw : 0;
    int64_t hi = g->W - 1 - off < 0 ? 0 : (g->W - 1 - off) / g->sw + 1;
    s->c[j] = lo < g->OW ? lo : g->OW;
    s->c[g->kw + j] = hi < s->c[j] ? s->c[j] : hi < g->OW ? hi : g->OW;
  }
  return KN_OK;
}

/* One float64 plane's max pooling, element strides sh, sw: the window's
** first maximum in row-major order (a later tap replaces the best only
** when strictly greater, or when it is NaN and the best is not: the first
** NaN wins) and its index h * W + w; -inf and -1 for a window wholly in the
** padding. An output row is built tap by tap, each tap swept across the
** columns whose window it falls in (from the spans: no bounds tests), so
** every window still sees its taps in row-major order; the choice is a
** mask, not a branch (on random data half of them mispredict). */
static void max_plane_f64(const double *x, int64_t sh, int64_t sw, const poolg *g,
                          const spans *sp, double *o, int64_t *ip) {
  const int64_t W = g->W, OH = g->OH, OW = g->OW, s = g->sw, kw = g->kw;
  for (int64_t oh = 0; oh < OH; oh++) {
    const int64_t h0 = oh * g->sh - g->ph;
    double *ob = o + oh * OW;
    int64_t *ib = ip + oh * OW;
    for (int64_t q = 0; q < OW; q++) ob[q] = -INFINITY, ib[q] = -1;
    for (int64_t i = sp->r[oh]; i < sp->r[OH + oh]; i++) {
      const int64_t h = h0 + i * g->dh;
      const double *row = x + h * sh;
      for (int64_t j = 0; j < kw; j++) {
        const int64_t off = j * g->dw - g->pw;
        for (int64_t q = sp->c[j]; q < sp->c[kw + j]; q++) {
          int64_t w = q * s + off, k = ib[q];
          double v = row[w * sw], b = ob[q];
          uint64_t m = (uint64_t)0 - (uint64_t)((k < 0) | (v > b) | ((v != v) & (b == b)));
          uint64_t vu, bu;
          memcpy(&vu, &v, sizeof v), memcpy(&bu, &b, sizeof b);
          bu = (vu & m) | (bu & ~m);
          memcpy(&ob[q], &bu, sizeof bu);
          ib[q] = (int64_t)(((uint64_t)(h * W + w) & m) | ((uint64_t)k & ~m));
        }
      }
    }
  }
}

/* float32 planes of under 2^31 elements: max_plane_f64's rule and order,
** four output columns at a time in vectors (GCC's vector extensions: SSE
** on x86-64, NEON on arm64), so the four windows' compare chains overlap;
** a lane whose window the tap misses keeps its value. */
typedef float kn_v4f __attribute__((vector_size(16)));
typedef int32_t kn_v4i __attribute__((vector_size(16)));

/* Taps of column offset off for the output columns q0..q0+3 (those outside
** [lo, hi) read a column inside it and are masked off). The lanes are built
** in registers: scalar stores read back as a vector would stall store
** forwarding. */
static void max_row_f32x4(const float *row, int64_t sw, int64_t hW, int64_t q0, int64_t lo,
                          int64_t hi, int64_t s, int64_t off, kn_v4f *b, kn_v4i *k) {
  int64_t q[4];
  if (lo <= q0 && q0 + 4 <= hi)
    for (int l = 0; l < 4; l++) q[l] = q0 + l;
  else
    for (int l = 0; l < 4; l++) q[l] = q0 + l < lo ? lo : q0 + l >= hi ? hi - 1 : q0 + l;
  kn_v4f v = {row[(q[0] * s + off) * sw], row[(q[1] * s + off) * sw],
              row[(q[2] * s + off) * sw], row[(q[3] * s + off) * sw]};
  kn_v4i idx = {(int32_t)(hW + q[0] * s + off), (int32_t)(hW + q[1] * s + off),
                (int32_t)(hW + q[2] * s + off), (int32_t)(hW + q[3] * s + off)};
  kn_v4i ql = {0, 1, 2, 3};
  ql += (int32_t)q0;
  kn_v4i in = (ql >= (int32_t)lo) & (ql < (int32_t)hi);
  kn_v4i m = in & ((*k < 0) | (v > *b) | ((v != v) & (*b == *b)));
  *b = (kn_v4f)(((kn_v4i)v & m) | ((kn_v4i)*b & ~m));
  *k = (idx & m) | (*k & ~m);
}

/* The taps of four adjacent 2x2 stride-2 windows of rows r0 and r1 (eight
** contiguous elements of each; r0's first at index base) into b and k, in
** row-major order under max_row_f32x4's rule; with `half`, of two windows
** (four elements a row; lanes 2 and 3 repeat them). */
static void max_2x2_f32x4(const float *r0, const float *r1, int32_t base, int32_t W, bool half,
                          kn_v4f *b, kn_v4i *k) {
  kn_v4f a0, a1, c0, c1;
  memcpy(&a0, r0, sizeof a0), memcpy(&c0, r1, sizeof c0);
  if (half) a1 = a0, c1 = c0;
  else memcpy(&a1, r0 + 4, sizeof a1), memcpy(&c1, r1 + 4, sizeof c1);
  const kn_v4i ev = {0, 2, 4, 6}, od = {1, 3, 5, 7}; /* ev: also the lanes' columns */
  kn_v4f t[4] = {__builtin_shuffle(a0, a1, ev), __builtin_shuffle(a0, a1, od),
                 __builtin_shuffle(c0, c1, ev), __builtin_shuffle(c0, c1, od)};
  const int32_t off[4] = {0, 1, W, W + 1};
  *b = t[0], *k = ev + base;
  for (int n = 1; n < 4; n++) {
    kn_v4f v = t[n];
    kn_v4i m = (v > *b) | ((v != v) & (*b == *b));
    *b = (kn_v4f)(((kn_v4i)v & m) | ((kn_v4i)*b & ~m));
    *k = ((ev + (base + off[n])) & m) | (*k & ~m);
  }
}

static void max_plane_f32x4(const float *x, int64_t sh, int64_t sw, const poolg *g,
                            const spans *sp, float *o, int64_t *ip) {
  const int64_t OH = g->OH, OW = g->OW, kw = g->kw;
  const bool pair = g->kh == 2 && kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 &&
                    g->pw == 0 && g->dh == 1 && g->dw == 1 && sw == 1 &&
                    (g->H + 1) * g->W + 8 <= INT32_MAX; /* the junk lanes' indices too */
  for (int64_t oh = 0; oh < OH; oh++) {
    const int64_t h0 = oh * g->sh - g->ph;
    int64_t q0 = 0;
    if (pair && 2 * oh + 1 < g->H) /* 2x2 windows, stride 2, no padding: whole groups */
      for (kn_v4f b; q0 + 2 <= OW && 2 * q0 + 4 <= g->W;) {
        bool two = !(q0 + 4 <= OW && 2 * q0 + 8 <= g->W);
        kn_v4i k;
        const float *r = x + 2 * oh * sh + 2 * q0;
        max_2x2_f32x4(r, r + sh, (int32_t)(2 * oh * g->W + 2 * q0), (int32_t)g->W, two, &b, &k);
        for (int l = 0; l < (two ? 2 : 4); l++)
          o[oh * OW + q0 + l] = b[l], ip[oh * OW + q0 + l] = k[l];
        q0 += two ? 2 : 4;
      }
    for (; q0 < OW; q0 += 4) {
      kn_v4f b = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
      kn_v4i k = {-1, -1, -1, -1};
      for (int64_t i = sp->r[oh]; i < sp->r[OH + oh]; i++) {
        const int64_t h = h0 + i * g->dh;
        for (int64_t j = 0; j < kw; j++) {
          int64_t lo = sp->c[j] > q0 ? sp->c[j] : q0, hi = sp->c[kw + j];
          if (lo < hi && lo < q0 + 4)
            max_row_f32x4(x + h * sh, sw, h * g->W, q0, lo, hi, g->sw, j * g->dw - g->pw, &b, &k);
        }
      }
      for (int l = 0; l < 4 && q0 + l < OW; l++)
        o[oh * OW + q0 + l] = b[l], ip[oh * OW + q0 + l] = k[l];
    }
  }
}

/* Other dtypes (bfloat16; the integer ones fail the dtype check) and
** float32 planes of 2^31 elements or more, through double. */
static void max_plane_any(const kn_tensor *x, const poolg *g, int64_t p, char *op, int64_t *ip) {
  kn_dtype dt = x->dtype;
  int64_t es = (int64_t)kn_dtype_size(dt), sH = x->strides[x->ndim - 2] * es;
  int64_t sW = x->strides[x->ndim - 1] * es;
  const char *base = (const char *)kn_data(x) + plane_off(x, p);
  for (int64_t oh = 0; oh < g->OH; oh++)
    for (int64_t ow = 0; ow < g->OW; ow++) {
      double best = -INFINITY;
      int64_t bi = -1;
      for (int64_t i = 0; i < g->kh; i++) {
        int64_t h = oh * g->sh - g->ph + i * g->dh;
        if (h < 0 || h >= g->H) continue;
        for (int64_t j = 0; j < g->kw; j++) {
          int64_t w = ow * g->sw - g->pw + j * g->dw;
          if (w < 0 || w >= g->W) continue;
          double v = kn__nn_ld(base + h * sH + w * sW, dt);
          if (bi < 0 || v > best || (isnan(v) && !isnan(best))) best = v, bi = h * g->W + w;
        }
      }
      int64_t o = oh * g->OW + ow;
      kn__nn_st(op + o * es, dt, best);
      ip[o] = bi;
    }
}

static void max_plane(const kn_tensor *x, const poolg *g, const spans *sp, int64_t p, char *op,
                      int64_t *ip) {
  int64_t sh = x->strides[x->ndim - 2], sw = x->strides[x->ndim - 1];
  const char *base = (const char *)kn_data(x) + plane_off(x, p);
  if (x->dtype == KN_FLOAT32 && g->H * g->W <= INT32_MAX)
    max_plane_f32x4((const float *)(const void *)base, sh, sw, g, sp, (float *)(void *)op, ip);
  else if (x->dtype == KN_FLOAT64)
    max_plane_f64((const double *)(const void *)base, sh, sw, g, sp, (double *)(void *)op, ip);
  else
    max_plane_any(x, g, p, op, ip);
}

kn_status kn__k_max_pool2d(const kn__call *c, kn__outs *out) {
  const kn_tensor *x = c->args[0].u.t;
  kn_status s = dtype_check("max_pool2d", x->dtype, false);
  if (s != KN_OK) return s;
  poolg g;
  pool_geometry(c, x, "max_pool2d", true, &g);
  int64_t es = (int64_t)kn_dtype_size(x->dtype), ohw = g.OH * g.OW;
  char *o = kn_data(out->t[0]);
  int64_t *idx = kn_data(out->t[1]);
  spans sp;
  if ((s = spans_make(&g, &sp)) != KN_OK) return s;
  KN__PAR_FOR(kn__par_team(g.P * ohw * g.kh * g.kw, g.P, KN__GRAIN), for (int64_t p = 0; p < g.P; p++) {
    max_plane(x, &g, &sp, p, o + p * ohw * es, idx + p * ohw);
  });
  free(sp.r);
  return KN_OK;
}

/* args: grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices */
kn_status kn__meta_max_pool2d_backward(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[1].u.t;
  kn__outmeta *m = kn__metas_push_like(out, x, x->dtype);
  if (!m) return kn__oom();
  return KN_OK;
}

/* One plane of max_pool2d's backward: each output's gradient added at the
** input element its index names (none for -1), in output order. */
static void scatter_plane(char *gp, const char *op, const int64_t *ip, int64_t ohw, kn_dtype dt) {
  if (dt == KN_FLOAT32) {
    float *g = (float *)(void *)gp;
    const float *go = (const float *)(const void *)op;
    for (int64_t o = 0; o < ohw; o++)
      if (ip[o] >= 0) g[ip[o]] += go[o];
    return;
  }
  int64_t es = (int64_t)kn_dtype_size(dt);
  for (int64_t o = 0; o < ohw; o++) {
    int64_t k = ip[o];
    if (k < 0) continue;
    char *dst = gp + k * es;
    kn__nn_st(dst, dt, kn__nn_ld(dst, dt) + kn__nn_ld(op + o * es, dt));
  }
}

kn_status kn__k_max_pool2d_backward(const kn__call *c, kn__outs *out) {
  kn_tensor *gout = kn__contiguous_copy(c->args[0].u.t, c->args[1].u.t->dtype);
  kn_tensor *idx = kn__contiguous_copy(c->args[7].u.t, KN_INT64);
  kn_tensor *gi = out->t[0];
  kn_status s = gout && idx ? KN_OK : kn_last_status();
  if (s == KN_OK) {
    kn_dtype dt = gi->dtype;
    int64_t es = (int64_t)kn_dtype_size(dt), hw = gi->sizes[gi->ndim - 2] * gi->sizes[gi->ndim - 1];
    int64_t ohw = gout->sizes[gout->ndim - 2] * gout->sizes[gout->ndim - 1];
    int64_t P = hw ? kn_numel(gi) / hw : 0;
    memset(kn_data(gi), 0, (size_t)(kn_numel(gi) * es));
    const int64_t *ip = kn_data(idx);
    char *gp = kn_data(gi);
    const char *op = kn_data(gout);
    KN__PAR_FOR(kn__par_team(P * ohw, P, KN__GRAIN), for (int64_t p = 0; p < P; p++) {
      scatter_plane(gp + p * hw * es, op + p * ohw * es, ip + p * ohw, ohw, dt);
    });
  }
  kn_release(gout);
  kn_release(idx);
  return s;
}

kn_status kn__bw_max_pool2d(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn__arg args[8] = {KN_A_T(ctx->grad_outputs[0]), c->args[0], c->args[1], c->args[2],
                     c->args[3], c->args[4], c->args[5], KN_A_T(ctx->outputs[1])};
  ctx->grad_inputs[0] = kn__invoke(KN_OP_MAX_POOL2D_BACKWARD, 8, args);
  return ctx->grad_inputs[0] ? KN_OK : kn_last_status();
}

/* ---- avg_pool2d -------------------------------------------------------------------- */
/* args: self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override */

kn_status kn__meta_avg_pool2d(const kn__call *c, kn__metas *out) {
  const kn_tensor *x = c->args[0].u.t;
  poolg g;
  kn_status s = pool_geometry(c, x, "avg_pool2d", false, &g);
  if (s != KN_OK) return s;
  if (c->args[6].kind == KN__A_INT && c->args[6].u.i == 0)
    return kn__error(KN_EINVAL, "divisor must be not zero");
  return push_like(out, x, x->dtype, &g);
}

/* The window of output (oh, ow) clamped to the input, and its divisor. */
typedef struct window {
  int64_t h0, h1, w0, w1;
  double div;
} window;

static window avg_window(const poolg *g, int64_t oh, int64_t ow) {
  window r;
  int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
  int64_t h1 = h0 + g->kh < g->H + g->ph ? h0 + g->kh : g->H + g->ph;
  int64_t w1 = w0 + g->kw < g->W + g->pw ? w0 + g->kw : g->W + g->pw;
  int64_t pool = (h1 - h0) * (w1 - w0);
  r.h0 = h0 < 0 ? 0 : h0, r.w0 = w0 < 0 ? 0 : w0;
  r.h1 = h1 > g->H ? g->H : h1, r.w1 = w1 > g->W ? g->W : w1;
  if (g->divov) r.div = (double)g->divov;
  else if (g->cip) r.div = (double)pool;
  else r.div = (double)((r.h1 - r.h0) * (r.w1 - r.w0));
  return r;
}

static void avg_plane(const kn_tensor *x, const poolg *g, int64_t p, char *op) {
  kn_dtype dt = x->dtype;
  int64_t es = (int64_t)kn_dtype_size(dt), sH = x->strides[x->ndim - 2] * es;
  int64_t sW = x->strides[x->ndim - 1] * es;
  const char *base = (const char *)kn_data(x) + plane_off(x, p);
  bool integral = kn_dtype_is_integral(dt, false);
  for (int64_t oh = 0; oh < g->OH; oh++)
    for (int64_t ow = 0; ow < g->OW; ow++) {
      window w = avg_window(g, oh, ow);
      double s = 0;
      for (int64_t h = w.h0; h < w.h1; h++)
        for (int64_t v = w.w0; v < w.w1; v++) s += kn__nn_ld(base + h * sH + v * sW, dt);
      double r = s / w.div;
      if (integral) r = trunc(r); /* torch divides integer sums with truncation */
      kn__nn_st(op + (oh * g->OW + ow) * es, dt, r);
    }
}

kn_status kn__k_avg_pool2d(const kn__call *c, kn__outs *out) {
  const kn_tensor *x = c->args[0].u.t;
  kn_status s = dtype_check("avg_pool2d", x->dtype, true);
  if (s != KN_OK) return s;
  poolg g;
  pool_geometry(c, x, "avg_pool2d", false, &g);
  int64_t es = (int64_t)kn_dtype_size(x->dtype), ohw = g.OH * g.OW;
  char *o = kn_data(out->t[0]);
  KN__PAR_FOR(kn__par_team(g.P * ohw * g.kh * g.kw, g.P, KN__GRAIN), for (int64_t p = 0; p < g.P; p++) {
    avg_plane(x, &g, p, o + p * ohw * es);
  });
  return KN_OK;
}

/* args: grad_output, self, kernel_size, stride, padding, ceil_mode,
** count_include_pad, divisor_override */
kn_status kn__meta_avg_pool2d_backward(const kn__call *c, kn__metas *out) {
  return kn__meta_max_pool2d_backward(c, out);
}

kn_status kn__k_avg_pool2d_backward(const kn__call *c, kn__outs *out) {
  const kn_tensor *x = c->args[1].u.t;
  kn__call fc = *c; /* the forward's arguments start at self */
  fc.nargs = 7;
  for (int i = 0; i < 7; i++) fc.args[i] = c->args[i + 1];
  poolg g;
  kn_status s = pool_geometry(&fc, x, "avg_pool2d", false, &g);
  if (s != KN_OK) return s;
  kn_tensor *gi = out->t[0];
  kn_tensor *gout = kn__contiguous_copy(c->args[0].u.t, gi->dtype);
  if (!gout) return kn_last_status();
  kn_dtype dt = gi->dtype;
  int64_t es = (int64_t)kn_dtype_size(dt), ohw = g.OH * g.OW, hw = g.H * g.W;
  memset(kn_data(gi), 0, (size_t)(kn_numel(gi) * es));
  char *gp = kn_data(gi);
  const char *op = kn_data(gout);
  KN__PAR_FOR(kn__par_team(g.P * ohw * g.kh * g.kw, g.P, KN__GRAIN), for (int64_t p = 0; p < g.P; p++) {
    for (int64_t oh = 0; oh < g.OH; oh++)
      for (int64_t ow = 0; ow < g.OW; ow++) {
        window w = avg_window(&g, oh, ow);
        double v = kn__nn_ld(op + (p * ohw + oh * g.OW + ow) * es, dt) / w.div;
        for (int64_t h = w.h0; h < w.h1; h++)
          for (int64_t k = w.w0; k < w.w1; k++) {
            char *dst = gp + (p * hw + h * g.W + k) * es;
            kn__nn_st(dst, dt, kn__nn_ld(dst, dt) + v);
          }
      }
  });
  kn_release(gout);
  return KN_OK;
}

kn_status kn__bw_avg_pool2d(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn__arg args[8] = {KN_A_T(ctx->grad_outputs[0]), c->args[0], c->args[1], c->args[2],
                     c->args[3], c->args[4], c->args[5], c->args[6]};
  ctx->grad_inputs[0] = kn__invoke(KN_OP_AVG_POOL2D_BACKWARD, 8, args);
  return ctx->grad_inputs[0] ? KN_OK : kn_last_status();
}

/* avg_pool2d_backward is linear in grad_output: its derivative there is
** avg_pool2d with the same parameters (none for self). */
kn_status kn__bw_avg_pool2d_backward(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  if (ctx->needs_input_grad[0]) {
    kn__arg args[7] = {KN_A_T(ctx->grad_outputs[0]), c->args[2], c->args[3], c->args[4],
                       c->args[5], c->args[6], c->args[7]};
    ctx->grad_inputs[0] = kn__invoke(KN_OP_AVG_POOL2D, 7, args);
    if (!ctx->grad_inputs[0]) return kn_last_status();
  }
  if (ctx->needs_input_grad[1])
    ctx->grad_inputs[1] = kn__zeros_like_sym(c->args[1].u.t);
  return KN_OK;
}

/* ---- public API ---------------------------------------------------------------------- */

static kn__arg ints2(const int64_t *v, int64_t dflt_storage[2], int64_t dflt) {
  if (v) return KN_A_INTS(v, 2);
  dflt_storage[0] = dflt_storage[1] = dflt;
  return KN_A_INTS(dflt_storage, 2);
}

kn_tensor *kn_max_pool2d_with_indices(kn_tensor *input, const int64_t *kernel_size,
                                      const int64_t *stride, const int64_t *padding,
                                      const int64_t *dilation, bool ceil_mode,
                                      kn_tensor **indices) {
  int64_t pz[2], dl[2];
  kn__arg args[6] = {KN_A_T(input), KN_A_INTS(kernel_size, kernel_size ? 2 : 0),
                     stride ? KN_A_INTS(stride, 2) : KN_A_INTS(NULL, 0), ints2(padding, pz, 0),
                     ints2(dilation, dl, 1), KN_A_B(ceil_mode)};
  kn_tensor *r[2];
  if (kn__invoke_multi(KN_OP_MAX_POOL2D, 6, args, r, 2) != 2) return NULL;
  if (indices) *indices = r[1];
  return r[0];
}

kn_tensor *kn_max_pool2d(kn_tensor *input, const int64_t *kernel_size, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation, bool ceil_mode) {
  return kn_max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode,
                                    NULL);
}

kn_tensor *kn_avg_pool2d(kn_tensor *input, const int64_t *kernel_size, const int64_t *stride,
                         const int64_t *padding, bool ceil_mode, bool count_include_pad,
                         int64_t divisor_override) {
  int64_t pz[2];
  kn__arg args[7] = {KN_A_T(input), KN_A_INTS(kernel_size, kernel_size ? 2 : 0),
                     stride ? KN_A_INTS(stride, 2) : KN_A_INTS(NULL, 0), ints2(padding, pz, 0),
                     KN_A_B(ceil_mode), KN_A_B(count_include_pad),
                     divisor_override ? KN_A_I(divisor_override) : KN_A_NONE};
  return kn__invoke(KN_OP_AVG_POOL2D, 7, args);
}
