/*
** ops/nn_conv.c: 2-D convolution, forward and backward.
**
** float32 runs on oneDNN convolution primitives (ops/nn_conv_dnnl.c);
** bfloat16 and float16 on oneDNN's 16-bit kernels where this CPU has them,
** else widened to float32 for its kernels and rounded once. Other dtypes
** (and empty channel counts) use im2col + GEMM. Forward, per image and
** group: unfold the input patch of every output
** position into the columns of a [C/g * kh * kw, OH * OW] matrix, then one
** GEMM with the group's weights viewed as [O/g, C/g * kh * kw]. Backward
** (the op convolution_backward): grad_weight accumulates gout @ col^T,
** grad_input folds W^T @ gout back over the input (col2im), grad_bias sums
** gout over batch and positions. Meta checks and messages follow PyTorch.
*/
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/symsize.h"
#include "ops/nn_dnnl.h"

typedef kn__convg convg;

static int64_t arg2(const kn__arg *a, int i, int64_t dflt) {
  if (a->kind != KN__A_INTS || a->u.ints.n == 0) return dflt;
  return a->u.ints.v[a->u.ints.n == 1 ? 0 : i];
}

static void tensor_type(kn_dtype dt, char *buf, size_t n) {
  snprintf(buf, n, "torch.%sTensor", kn__nn_scalar_type_name(dt));
}

static kn_status check_params(const kn__call *c, int ai) {
  static const char *what[3] = {"stride", "padding", "dilation"};
  for (int k = 0; k < 3; k++) {
    const kn__arg *a = &c->args[ai + k];
    if (a->kind == KN__A_INTS && a->u.ints.n != 1 && a->u.ints.n != 2)
      return kn__error(KN_EINVAL, "expected %s to be a single integer value or a list of 2 "
                       "values to match the convolution dimensions, but got %d values",
                       what[k], a->u.ints.n);
    for (int i = 0; i < 2; i++) {
      int64_t v = arg2(a, i, k == 1 ? 0 : 1);
      if (k == 0 && v <= 0) return kn__error(KN_EINVAL, "non-positive stride is not supported");
      if (k == 1 && v < 0) return kn__error(KN_EINVAL, "negative padding is not supported");
      if (k == 2 && v <= 0) return kn__error(KN_EINVAL, "non-positive dilation is not supported");
    }
  }
  return KN_OK;
}

/* Validate a convolution call (args: input, weight, bias, stride, padding,
** dilation, transposed, output_padding, groups) and fill g. */
static kn_status conv_geometry(const kn__call *c, convg *g) {
  const kn_tensor *x = c->args[0].u.t, *w = c->args[1].u.t;
  const kn_tensor *b = c->args[2].kind == KN__A_TENSOR ? c->args[2].u.t : NULL;
  char xs[128], ws[128], bs[128];
  kn__format_sizes(x->ndim, x->sizes, xs, sizeof xs);
  kn__format_sizes(w->ndim, w->sizes, ws, sizeof ws);
  if (c->args[6].u.b)
    return kn__error(KN_EUNSUPPORTED, "convolution: transposed convolution is not supported");
  if (x->ndim != 3 && x->ndim != 4)
    return kn__error(KN_ESHAPE, "Expected 3D (unbatched) or 4D (batched) input to conv2d, but "
                     "got input of size: %s", xs);
  if (w->ndim != 4)
    return kn__error(KN_ESHAPE, "Expected 4-dimensional weight for conv2d, but got "
                     "%d-dimensional weight of size %s", w->ndim, ws);
  kn_status st = check_params(c, 3);
  if (st != KN_OK) return st;
  int64_t G = c->args[8].u.i;
  if (G <= 0) return kn__error(KN_EINVAL, "non-positive groups is not supported");
  int off = x->ndim == 4 ? 1 : 0;
  *g = (convg){.N = off ? x->sizes[0] : 1, .C = x->sizes[off], .H = x->sizes[off + 1],
               .W = x->sizes[off + 2], .O = w->sizes[0], .kh = w->sizes[2], .kw = w->sizes[3],
               .G = G, .sh = arg2(&c->args[3], 0, 1), .sw = arg2(&c->args[3], 1, 1),
               .ph = arg2(&c->args[4], 0, 0), .pw = arg2(&c->args[4], 1, 0),
               .dh = arg2(&c->args[5], 0, 1), .dw = arg2(&c->args[5], 1, 1)};
  if (g->O % G != 0)
    return kn__error(KN_ESHAPE, "Given groups=%lld, expected weight to be divisible by %lld at "
                     "dimension 0, but got weight of size [%s] instead",
                     (long long)G, (long long)G, ws);
  if (w->sizes[1] * G != g->C) {
    char xs4[128];
    if (off) snprintf(xs4, sizeof xs4, "%s", xs);
    else kn__format_sizes(4, (int64_t[]){1, g->C, g->H, g->W}, xs4, sizeof xs4);
    return kn__error(KN_ESHAPE, "Given groups=%lld, weight of size %s, expected input%s to have "
                     "%lld channels, but got %lld channels instead", (long long)G, ws, xs4,
                     (long long)(w->sizes[1] * G), (long long)g->C);
  }
  if (b && (b->ndim != 1 || b->sizes[0] != g->O)) {
    kn__format_sizes(b->ndim, b->sizes, bs, sizeof bs);
    return kn__error(KN_ESHAPE, "Given weight of size %s, expected bias to be 1-dimensional "
                     "with %lld elements, but got bias of size %s instead", ws,
                     (long long)g->O, bs);
  }
  /* overflow-checked: huge parameters saturate and fail the meta function */
  int64_t eh = kn__ck_add(g->H, kn__ck_mul(2, g->ph)), ew = kn__ck_add(g->W, kn__ck_mul(2, g->pw));
  int64_t kh = kn__ck_add(kn__ck_mul(g->dh, g->kh - 1), 1);
  int64_t kw = kn__ck_add(kn__ck_mul(g->dw, g->kw - 1), 1);
  if (eh < kh || ew < kw)
    return kn__error(KN_ESHAPE, "Calculated padded input size per channel: (%lld x %lld). "
                     "Kernel size: (%lld x %lld). Kernel size can't be greater than actual "
                     "input size", (long long)eh, (long long)ew, (long long)kh, (long long)kw);
  char t1[48], t2[48];
  if (x->dtype != w->dtype) {
    tensor_type(x->dtype, t1, sizeof t1);
    tensor_type(w->dtype, t2, sizeof t2);
    return kn__error(KN_EDTYPE, "Input type (%s) and weight type (%s) should be the same or "
                     "input should be a MKLDNN tensor and weight is a dense tensor", t1, t2);
  }
  if (b && b->dtype != x->dtype) {
    tensor_type(x->dtype, t1, sizeof t1);
    tensor_type(b->dtype, t2, sizeof t2);
    return kn__error(KN_EDTYPE, "Input type (%s) and bias type (%s) should be the same", t1, t2);
  }
  g->OH = (eh - kh) / g->sh + 1;
  g->OW = (ew - kw) / g->sw + 1;
  return KN_OK;
}

kn_status kn__meta_convolution(const kn__call *c, kn__metas *out) {
  convg g;
  kn_status st = conv_geometry(c, &g);
  if (st != KN_OK) return st;
  const kn_tensor *x = c->args[0].u.t;
  kn__outmeta *m = kn__metas_push(out, x->dtype);
  if (!m) return kn__oom();
  m->ndim = x->ndim;
  kn_sym xs[4], ws[4];
  kn__tensor_symsizes(x, xs);
  kn__tensor_symsizes(c->args[1].u.t, ws);
  int off = x->ndim - 3;
  if (off) m->sizes[0] = xs[0];
  m->sizes[off] = ws[0];
  m->sizes[off + 1] = kn__nn_window_out(xs[off + 1], g.kh, g.sh, g.ph, g.dh, false);
  m->sizes[off + 2] = kn__nn_window_out(xs[off + 2], g.kw, g.sw, g.pw, g.dw, false);
  return KN_OK;
}

/* ---- im2col / col2im ----------------------------------------------------------- */

/* One image-group's input: element (c, h, w) at p[c*sc + h*sh + w*sw]. */
typedef struct plane {
  char *p;
  int64_t sc, sh, sw;
} plane;

#define IM2COL_BODY(LOAD, STORE)                                                       \
  for (int64_t ci = 0; ci < Cg; ci++)                                                  \
    for (int64_t ki = 0; ki < g->kh; ki++)                                             \
      for (int64_t kj = 0; kj < g->kw; kj++) {                                         \
        int64_t row = (ci * g->kh + ki) * g->kw + kj;                                  \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                       \
          int64_t ih = oh * g->sh - g->ph + ki * g->dh;                                \
          int64_t base = row * ohw + oh * g->OW;                                       \
          for (int64_t ow = 0; ow < g->OW; ow++) {                                     \
            int64_t iw = ow * g->sw - g->pw + kj * g->dw;                              \
            bool in = ih >= 0 && ih < g->H && iw >= 0 && iw < g->W;                    \
            int64_t xi = ci * x.sc + ih * x.sh + iw * x.sw;                            \
            STORE(base + ow, in, LOAD(xi));                                            \
          }                                                                            \
        }                                                                              \
      }

/* col[row, pos] = x patch values (0 outside the padded input). */
static void im2col(kn_dtype dt, const convg *g, int64_t Cg, plane x, char *col) {
  int64_t ohw = g->OH * g->OW;
  if (dt == KN_FLOAT32) {
    const float *xp = (const float *)(void *)x.p;
    float *cp = (float *)(void *)col;
#define LD(i) (in ? xp[i] : 0.0f)
#define ST(i, in, v) cp[i] = (v)
    IM2COL_BODY(LD, ST)
#undef LD
#undef ST
  } else if (dt == KN_FLOAT64) {
    const double *xp = (const double *)(void *)x.p;
    double *cp = (double *)(void *)col;
#define LD(i) (in ? xp[i] : 0.0)
#define ST(i, in, v) cp[i] = (v)
    IM2COL_BODY(LD, ST)
#undef LD
#undef ST
  } else {
    int64_t es = (int64_t)kn_dtype_size(dt);
#define LD(i) (in ? kn__load_double(x.p + (i) * es, dt) : 0.0)
#define ST(i, in, v) kn__store_double(col + (i) * es, dt, (v))
    IM2COL_BODY(LD, ST)
#undef LD
#undef ST
  }
}

/* x[c, h, w] += col[row, pos] for positions inside the input (x contiguous). */
static void col2im(kn_dtype dt, const convg *g, int64_t Cg, plane x, const char *col) {
  int64_t ohw = g->OH * g->OW;
  if (dt == KN_FLOAT32) {
    float *xp = (float *)(void *)x.p;
    const float *cp = (const float *)(const void *)col;
#define LD(i) (i)
#define ST(i, in, xi) if (in) xp[xi] += cp[i]
    IM2COL_BODY(LD, ST)
#undef LD
#undef ST
  } else if (dt == KN_FLOAT64) {
    double *xp = (double *)(void *)x.p;
    const double *cp = (const double *)(const void *)col;
#define LD(i) (i)
#define ST(i, in, xi) if (in) xp[xi] += cp[i]
    IM2COL_BODY(LD, ST)
#undef LD
#undef ST
  } else {
    int64_t es = (int64_t)kn_dtype_size(dt);
#define LD(i) (i)
#define ST(i, in, xi)                                                              \
  if (in)                                                                          \
    kn__store_double(x.p + (xi) * es, dt,                                          \
                     kn__load_double(x.p + (xi) * es, dt) + kn__load_double(col + (i) * es, dt))
    IM2COL_BODY(LD, ST)
#undef LD
#undef ST
  }
}

/* ---- forward ----------------------------------------------------------------------- */

static plane image_group(const kn_tensor *x, int64_t n, int64_t c0) {
  int off = x->ndim == 4 ? 1 : 0;
  int64_t es = (int64_t)kn_dtype_size(x->dtype);
  int64_t e = (off ? n * x->strides[0] : 0) + c0 * x->strides[off];
  return (plane){(char *)kn_data(x) + e * es, x->strides[off], x->strides[off + 1],
                 x->strides[off + 2]};
}

/* A scratch buffer from the caching allocator. */
typedef struct scratch {
  void *p;
  size_t n;
} scratch;

static kn_status scratch_get(scratch *s, size_t n) {
  s->n = n ? n : 1;
  s->p = kn__cached_alloc(s->n);
  return s->p ? KN_OK : kn__oom();
}

static void scratch_put(scratch *s) {
  if (s->p) kn__cached_free(s->p, s->n);
  s->p = NULL;
}

static void add_bias(kn_tensor *o, const kn_tensor *b, const convg *g) {
  int64_t ohw = g->OH * g->OW, es = (int64_t)kn_dtype_size(o->dtype);
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t oc = 0; oc < g->O; oc++) {
      double bv = kn_get(b, &oc);
      char *p = (char *)kn_data(o) + ((n * g->O + oc) * ohw) * es;
      if (o->dtype == KN_FLOAT32) {
        float *f = (float *)(void *)p;
        for (int64_t i = 0; i < ohw; i++) f[i] += (float)bv;
      } else if (o->dtype == KN_FLOAT64) {
        double *f = (double *)(void *)p;
        for (int64_t i = 0; i < ohw; i++) f[i] += bv;
      } else {
        for (int64_t i = 0; i < ohw; i++)
          kn__store_double(p + i * es, o->dtype, kn__load_double(p + i * es, o->dtype) + bv);
      }
    }
}

/* ---- float32, bfloat16 and float16 on oneDNN ------------------------------------- */

/* float32 always; bfloat16 and float16 where oneDNN has JIT kernels for every
** direction in dirs (KN__CONV_*) on this CPU (AVX512-BF16, AMX; not on
** AVX2): elsewhere they take the widened path below. */
static bool use_dnnl(kn_dtype dt, const convg *g, bool bias, unsigned dirs) {
  if (!(g->N > 0 && g->C > 0 && g->O > 0)) return false;
  if (dt == KN_FLOAT32) return true;
  return kn__is16(dt) && kn__dnnl_conv_fast(g, dt, bias, dirs);
}

/* t itself (a new reference) when contiguous, else a contiguous copy. */
static kn_tensor *dense(const kn_tensor *t) {
  if (kn_is_contiguous(t)) return kn_retain((kn_tensor *)(uintptr_t)t);
  return kn__contiguous_copy(t, t->dtype);
}

static const void *fdata(const kn_tensor *t) { return t ? kn_data(t) : NULL; }

static kn_status conv_fwd_dnnl(const convg *g, const kn_tensor *x0, const kn_tensor *w0,
                              const kn_tensor *b0, kn_tensor *o) {
  kn_tensor *x = dense(x0), *w = dense(w0), *b = b0 ? dense(b0) : NULL;
  kn_status st = !x || !w || (b0 && !b) ? kn_last_status()
                 : kn__dnnl_conv_fwd(g, o->dtype, fdata(x), fdata(w), fdata(b), kn_data(o));
  kn_release(x);
  kn_release(w);
  kn_release(b);
  return st;
}

/* ---- bfloat16 and float16 without oneDNN kernels: through float32 ---------------- */

/* The 16-bit tensors t[0..n) (NULL stays NULL) widened to float32
** (kn__widen16), kept in w[0..n); false on error. */
static bool widen_all(const kn_tensor *const *t, int n, kn_tensor **w) {
  bool ok = true;
  for (int i = 0; i < n; i++) {
    w[i] = NULL;
    if (t[i] && !kn__widen16(t[i], &w[i])) ok = false;
  }
  return ok;
}

/* Float32 stand-ins of the 16-bit outputs t[0..n) (NULL stays NULL) into
** w[0..n) (kn__stand_in16); false on error. */
static bool stand_ins(kn_tensor *const *t, int n, kn_tensor **w) {
  bool ok = true;
  for (int i = 0; i < n; i++) {
    w[i] = NULL;
    if (t[i] && !kn__stand_in16(t[i], &w[i])) ok = false;
  }
  return ok;
}

/* A 16-bit convolution where oneDNN has no kernel for the type: its inputs
** widened to float32 once, oneDNN's float32 convolution, the output rounded
** once (as the 16-bit kernels do; faster and tighter than im2col with a
** 16-bit GEMM, which rounds the product and then the bias sum). */
static kn_status conv_fwd_widened(const convg *g, const kn_tensor *x, const kn_tensor *w,
                                  const kn_tensor *b, kn_tensor *o) {
  const kn_tensor *in[3] = {x, w, b};
  kn_tensor *wide[3], *o32 = NULL;
  kn_status st = widen_all(in, 3, wide) && stand_ins(&o, 1, &o32) ? KN_OK : kn_last_status();
  if (st == KN_OK) st = conv_fwd_dnnl(g, wide[0], wide[1], wide[2], o32);
  for (int i = 0; i < 3; i++) kn_release(wide[i]);
  return kn__narrow16(st, o, o32);
}

kn_status kn__k_convolution(const kn__call *c, kn__outs *out) {
  convg g;
  kn_status st = conv_geometry(c, &g);
  if (st != KN_OK) return st;
  const kn_tensor *x = c->args[0].u.t;
  const kn_tensor *b = c->args[2].kind == KN__A_TENSOR ? c->args[2].u.t : NULL;
  kn_dtype dt = x->dtype;
  if ((st = kn__nn_gemm_check("slow_conv2d_cpu", dt)) != KN_OK) return st;
  kn_tensor *o = out->t[0];
  if (kn_numel(o) == 0) return KN_OK;
  if (use_dnnl(dt, &g, b != NULL, KN__CONV_FWD)) return conv_fwd_dnnl(&g, x, c->args[1].u.t, b, o);
  if (kn__is16(dt) && use_dnnl(KN_FLOAT32, &g, false, 0))
    return conv_fwd_widened(&g, x, c->args[1].u.t, b, o);
  kn_tensor *w = kn__contiguous_copy(c->args[1].u.t, dt);
  if (!w) return kn_last_status();
  int64_t Cg = g.C / g.G, Og = g.O / g.G, kk = Cg * g.kh * g.kw, ohw = g.OH * g.OW;
  int64_t es = (int64_t)kn_dtype_size(dt);
  scratch col;
  st = scratch_get(&col, (size_t)(kk * ohw * es));
  for (int64_t n = 0; n < g.N && st == KN_OK; n++)
    for (int64_t gi = 0; gi < g.G && st == KN_OK; gi++) {
      im2col(dt, &g, Cg, image_group(x, n, gi * Cg), col.p);
      kn__mat wm = {(char *)kn_data(w) + gi * Og * kk * es, kk, 1};
      kn__mat cm = {col.p, ohw, 1};
      char *op = (char *)kn_data(o) + ((n * g.O + gi * Og) * ohw) * es;
      st = kn__nn_gemm("slow_conv2d_cpu", dt, Og, ohw, kk, wm, cm, op, ohw, 1, 0);
    }
  scratch_put(&col);
  kn_release(w);
  if (st == KN_OK && b) add_bias(o, b, &g);
  return st;
}

/* ---- backward: convolution_backward -------------------------------------------- */
/* args: grad_output, input, weight, bias_sizes, stride, padding, dilation,
** transposed, output_padding, groups, output_mask (3 ints). */

/* The forward call's argument list rebuilt from a backward call. */
static void forward_call(const kn__call *bc, kn__call *fc) {
  fc->op = &kn__ops[KN_OP_CONVOLUTION];
  fc->nargs = 9;
  fc->args[0] = bc->args[1];
  fc->args[1] = bc->args[2];
  fc->args[2] = KN_A_NONE;
  for (int i = 3; i < 9; i++) fc->args[i] = bc->args[i + 1];
}

static bool mask_bit(const kn__call *c, int i) {
  const kn__arg *m = &c->args[10];
  return m->kind == KN__A_INTS && i < m->u.ints.n && m->u.ints.v[i] != 0;
}

kn_status kn__meta_convolution_backward(const kn__call *c, kn__metas *out) {
  kn__call fc;
  forward_call(c, &fc);
  convg g;
  kn_status st = conv_geometry(&fc, &g);
  if (st != KN_OK) return st;
  const kn_tensor *gout = c->args[0].u.t;
  const kn_tensor *src[2] = {c->args[1].u.t, c->args[2].u.t};
  for (int i = 0; i < 3; i++) {
    kn__outmeta *m = kn__metas_push(out, src[1]->dtype);
    if (!m) return kn__oom();
    if (!mask_bit(c, i)) {
      m->ndim = 1;
      m->sizes[0] = kn__sym_const(0);
      continue;
    }
    kn_sym ss[KN_MAX_DIMS]; /* the input's or weight's symbolic sizes; bias: [O] */
    kn__tensor_symsizes(src[i < 2 ? i : 1], ss);
    m->ndim = i < 2 ? src[i]->ndim : 1;
    for (int d = 0; d < m->ndim; d++) m->sizes[d] = ss[d];
  }
  int64_t want[4] = {g.N, g.O, g.OH, g.OW};
  int off = src[0]->ndim == 4 ? 0 : 1;
  bool ok = gout->ndim == src[0]->ndim && gout->dtype == src[0]->dtype;
  for (int d = 0; ok && d < gout->ndim; d++) ok = gout->sizes[d] == want[d + off];
  if (!ok) {
    char gs[128];
    kn__format_sizes(gout->ndim, gout->sizes, gs, sizeof gs);
    return kn__error(KN_ESHAPE, "convolution_backward: grad_output of size %s does not match "
                     "the convolution's output", gs);
  }
  return KN_OK;
}

static void zero(kn_tensor *t) { memset(kn_data(t), 0, (size_t)kn_numel(t) * kn_dtype_size(t->dtype)); }

static void bias_grad(kn_tensor *gb, const kn_tensor *gout, const convg *g) {
  int64_t ohw = g->OH * g->OW;
  for (int64_t oc = 0; oc < g->O; oc++) {
    double s = 0;
    for (int64_t n = 0; n < g->N; n++) {
      const char *p = (const char *)kn_data(gout) +
                      (n * g->O + oc) * ohw * (int64_t)kn_dtype_size(gout->dtype);
      if (gout->dtype == KN_FLOAT64)
        for (int64_t i = 0; i < ohw; i++) s += ((const double *)(const void *)p)[i];
      else
        for (int64_t i = 0; i < ohw; i++) s += kn__load_double(p + i * (int64_t)kn_dtype_size(gout->dtype), gout->dtype);
    }
    kn__store_double((char *)kn_data(gb) + oc * (int64_t)kn_dtype_size(gb->dtype), gb->dtype, s);
  }
}

/* One image-group: accumulate grad_weight, fold grad_input. */
static kn_status backward_group(const convg *g, kn_dtype dt, const kn_tensor *x,
                                const kn_tensor *w, const kn_tensor *gout, kn_tensor *gi,
                                kn_tensor *gw, int64_t n, int64_t grp, void *col) {
  int64_t Cg = g->C / g->G, Og = g->O / g->G, kk = Cg * g->kh * g->kw, ohw = g->OH * g->OW;
  int64_t es = (int64_t)kn_dtype_size(dt);
  kn__mat go = {(const char *)kn_data(gout) + ((n * g->O + grp * Og) * ohw) * es, ohw, 1};
  kn_status st = KN_OK;
  if (gw) {
    im2col(dt, g, Cg, image_group(x, n, grp * Cg), col);
    kn__mat colT = {col, 1, ohw};
    char *gwp = (char *)kn_data(gw) + grp * Og * kk * es;
    st = kn__nn_gemm("slow_conv2d_cpu", dt, Og, kk, ohw, go, colT, gwp, kk, 1, 1);
  }
  if (st == KN_OK && gi) {
    kn__mat wT = {(const char *)kn_data(w) + grp * Og * kk * es, 1, kk};
    st = kn__nn_gemm("slow_conv2d_cpu", dt, kk, ohw, Og, wT, go, col, ohw, 1, 0);
    if (st == KN_OK) col2im(dt, g, Cg, image_group(gi, n, grp * Cg), col);
  }
  return st;
}

/* The backward on oneDNN from the tensors gout0, x0, w0 (of one dtype). */
static kn_status conv_bwd_dnnl(const convg *g, const kn_tensor *gout0, const kn_tensor *x0,
                               const kn_tensor *w0, kn_tensor *gi, kn_tensor *gw, kn_tensor *gb) {
  kn_tensor *gout = dense(gout0);
  kn_tensor *x = gw ? dense(x0) : NULL, *w = gi ? dense(w0) : NULL;
  kn_status st = !gout || (gw && !x) || (gi && !w) ? kn_last_status() : KN_OK;
  kn_dtype dt = x0->dtype;
  if (st == KN_OK && gi) st = kn__dnnl_conv_bwd_data(g, dt, fdata(gout), fdata(w), kn_data(gi));
  if (st == KN_OK && gw)
    st = kn__dnnl_conv_bwd_weights(g, dt, fdata(x), fdata(gout), kn_data(gw),
                                   gb ? kn_data(gb) : NULL);
  if (st == KN_OK && gb && !gw) bias_grad(gb, gout, g);
  kn_release(gout);
  kn_release(x);
  kn_release(w);
  return st;
}

/* The 16-bit backward through float32 (see conv_fwd_widened): each
** gradient rounded once. */
static kn_status conv_bwd_widened(const convg *g, const kn__call *c, kn_tensor *gi, kn_tensor *gw,
                                  kn_tensor *gb) {
  const kn_tensor *in[3] = {c->args[0].u.t, c->args[1].u.t, c->args[2].u.t};
  kn_tensor *wide[3], *outs[3] = {gi, gw, gb}, *o32[3];
  bool ok = widen_all(in, 3, wide) & stand_ins(outs, 3, o32); /* both run: all set */
  kn_status st = ok ? conv_bwd_dnnl(g, wide[0], wide[1], wide[2], o32[0], o32[1], o32[2])
                    : kn_last_status();
  for (int i = 0; i < 3; i++) kn_release(wide[i]), st = kn__narrow16(st, outs[i], o32[i]);
  return st;
}

kn_status kn__k_convolution_backward(const kn__call *c, kn__outs *out) {
  kn__call fc;
  forward_call(c, &fc);
  convg g;
  kn_status st = conv_geometry(&fc, &g);
  if (st != KN_OK) return st;
  const kn_tensor *x = c->args[1].u.t;
  kn_dtype dt = x->dtype;
  if ((st = kn__nn_gemm_check("slow_conv2d_cpu", dt)) != KN_OK) return st;
  kn_tensor *gi = mask_bit(c, 0) ? out->t[0] : NULL, *gw = mask_bit(c, 1) ? out->t[1] : NULL;
  kn_tensor *gb = mask_bit(c, 2) ? out->t[2] : NULL;
  unsigned dirs = (gi ? KN__CONV_BWD_DATA : 0) | (gw ? KN__CONV_BWD_WEIGHTS : 0);
  if (use_dnnl(dt, &g, gb && gw, dirs))
    return conv_bwd_dnnl(&g, c->args[0].u.t, x, c->args[2].u.t, gi, gw, gb);
  if (kn__is16(dt) && use_dnnl(KN_FLOAT32, &g, false, 0)) return conv_bwd_widened(&g, c, gi, gw, gb);
  if (gi) zero(gi);
  if (gw) zero(gw);
  kn_tensor *gout = kn__contiguous_copy(c->args[0].u.t, dt);
  kn_tensor *w = kn__contiguous_copy(c->args[2].u.t, dt);
  scratch col = {NULL, 0};
  int64_t kk = g.C / g.G * g.kh * g.kw, ohw = g.OH * g.OW;
  if (!gout || !w) st = kn_last_status();
  else st = scratch_get(&col, (size_t)(kk * ohw) * kn_dtype_size(dt));
  for (int64_t n = 0; n < g.N && st == KN_OK && (gi || gw); n++)
    for (int64_t grp = 0; grp < g.G && st == KN_OK; grp++)
      st = backward_group(&g, dt, x, w, gout, gi, gw, n, grp, col.p);
  if (st == KN_OK && gb) bias_grad(gb, gout, &g);
  scratch_put(&col);
  kn_release(gout);
  kn_release(w);
  return st;
}

/* The derivative rule of convolution: one convolution_backward call. */
kn_status kn__bw_convolution(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  bool has_bias = c->args[2].kind == KN__A_TENSOR && c->args[2].u.t;
  int64_t mask[3] = {ctx->needs_input_grad[0], ctx->needs_input_grad[1],
                     has_bias && ctx->needs_input_grad[2]};
  kn_sym ws[KN_MAX_DIMS], pad[KN_MAX_DIMS], opad[KN_MAX_DIMS];
  kn__tensor_symsizes(c->args[1].u.t, ws);
  int64_t bsz = kn__sym_hint(ws[0]);
  kn__arg args[11] = {KN_A_T(ctx->grad_outputs[0]), c->args[0], c->args[1],
                      has_bias ? KN_A_SYMINTS(&bsz, ws, 1) : KN_A_INTS(NULL, 0), c->args[3],
                      kn__arg_known(&c->args[4], pad), c->args[5], c->args[6],
                      kn__arg_known(&c->args[7], opad), c->args[8],
                      KN_A_INTS(mask, 3)};
  kn_tensor *r[3];
  if (kn__invoke_multi(KN_OP_CONVOLUTION_BACKWARD, 11, args, r, 3) != 3) return kn_last_status();
  for (int i = 0; i < 3; i++)
    if (mask[i]) ctx->grad_inputs[i] = r[i];
  return KN_OK;
}

/* ---- public API ---------------------------------------------------------------------- */

kn_tensor *kn_conv2d(kn_tensor *input, kn_tensor *weight, kn_tensor *bias,
                     const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                     int64_t groups) {
  static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
  kn__arg args[9] = {KN_A_T(input), KN_A_T(weight), bias ? KN_A_T(bias) : KN_A_NONE,
                     KN_A_INTS(stride ? stride : ones, 2), KN_A_INTS(padding ? padding : zeros, 2),
                     KN_A_INTS(dilation ? dilation : ones, 2), KN_A_B(false),
                     KN_A_INTS(zeros, 2), KN_A_I(groups)};
  return kn__invoke(KN_OP_CONVOLUTION, 9, args);
}
