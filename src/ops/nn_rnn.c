/*
** ops/nn_rnn.c: the pointwise part of an LSTM cell as one fused op and its
** backward as another (PyTorch's _thnn_fused_lstm_cell and
** _thnn_fused_lstm_cell_backward_impl).
**
** The gates come from two matrix products computed outside (the input
** projection of every time step at once, and h @ W_hh^T per step); the
** fused op adds them (and the optional biases), applies sigmoid / tanh to the
** stacked gates [input | forget | cell | output] and computes
**   c' = f * c + i * g,   h' = o * tanh(c')
** in one pass per batch row. It saves the activated gates ("workspace"
** [B, 4H]) for the backward op, which turns the gradients of h' and c' into
** the gradient of the pre-activation gates, of c and of the bias in one pass
** per row (tanh(c') is recomputed, as PyTorch does).
**
** Rows run in parallel when a call has enough elements. float32 and
** float64; the transcendental functions are vmath's vectorised ones.
*/
#include <string.h>

#include "core/error.h"
#include "kiln/ops_nn.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/vmath.h"

#define RNN_PAR_MIN 32768 /* elements of gates per call before rows go parallel */

static const kn_tensor *targ(const kn__call *c, int i) {
  return c->args[i].kind == KN__A_TENSOR ? c->args[i].u.t : NULL;
}

static bool float_dt(kn_dtype dt) { return dt == KN_FLOAT32 || dt == KN_FLOAT64; }

static kn_status want_2d(const char *op, const char *what, const kn_tensor *t, int64_t rows,
                         int64_t cols, kn_dtype dt) {
  if (t->ndim != 2 || t->sizes[0] != rows || t->sizes[1] != cols)
    return kn__error(KN_ESHAPE, "%s: expected %s of shape [%lld, %lld], found %dD %s", op, what,
                     (long long)rows, (long long)cols, t->ndim,
                     t->ndim == 2 ? "with other sizes" : "tensor");
  if (t->dtype != dt)
    return kn__error(KN_EDTYPE, "%s: expected %s of dtype %s, found %s", op, what,
                     kn_dtype_name(dt), kn_dtype_name(t->dtype));
  return KN_OK;
}

static kn_status want_bias(const char *op, const kn_tensor *b, int64_t n, kn_dtype dt) {
  if (!b) return KN_OK;
  if (b->ndim != 1 || b->sizes[0] != n)
    return kn__error(KN_ESHAPE, "%s: expected a bias of shape [%lld], found %dD tensor of %lld "
                                "elements", op, (long long)n, b->ndim, (long long)kn_numel(b));
  if (b->dtype != dt)
    return kn__error(KN_EDTYPE, "%s: expected a bias of dtype %s, found %s", op,
                     kn_dtype_name(dt), kn_dtype_name(b->dtype));
  return KN_OK;
}

/* ---- forward: args input_gates, hidden_gates, cx, input_bias?, hidden_bias? ------------- */

static kn_status cell_check(const kn__call *c, int64_t *B, int64_t *H) {
  static const char op[] = "_thnn_fused_lstm_cell";
  const kn_tensor *ig = c->args[0].u.t, *cx = c->args[2].u.t;
  if (ig->ndim != 2 || ig->sizes[1] % 4 != 0)
    return kn__error(KN_ESHAPE, "%s: expected input_gates of shape [batch, 4 * hidden], found "
                                "%dD tensor%s", op, ig->ndim,
                     ig->ndim == 2 ? " whose last size is not a multiple of 4" : "");
  if (!float_dt(ig->dtype))
    return kn__error(KN_EDTYPE, "%s: expected float32 or float64 gates, found %s", op,
                     kn_dtype_name(ig->dtype));
  *B = ig->sizes[0], *H = ig->sizes[1] / 4;
  kn_status s = want_2d(op, "hidden_gates", c->args[1].u.t, *B, 4 * *H, ig->dtype);
  if (s == KN_OK) s = want_2d(op, "cx", cx, *B, *H, ig->dtype);
  for (int i = 3; i < 5 && s == KN_OK; i++) s = want_bias(op, targ(c, i), 4 * *H, ig->dtype);
  return s;
}

kn_status kn__meta_fused_lstm_cell(const kn__call *c, kn__metas *out) {
  int64_t B, H;
  kn_status s = cell_check(c, &B, &H);
  if (s != KN_OK) return s;
  const kn_tensor *ig = c->args[0].u.t, *cx = c->args[2].u.t;
  if (!kn__metas_push_like(out, cx, cx->dtype) || !kn__metas_push_like(out, cx, cx->dtype) ||
      !kn__metas_push_like(out, ig, ig->dtype))
    return kn__oom();
  return KN_OK;
}

/* A 2-D operand as rows of unit stride: the tensor itself, or a contiguous
** copy (*keep, owned) when its columns are strided. */
static const char *rows_of(const kn_tensor *t, kn_tensor **keep, int64_t *ld) {
  *keep = NULL;
  if (t->ndim == 2 && (t->strides[1] == 1 || t->sizes[1] <= 1)) {
    *ld = t->strides[0];
    return kn_data(t);
  }
  *keep = kn__contiguous_copy(t, t->dtype);
  *ld = t->ndim == 2 ? t->sizes[1] : kn_numel(t);
  return *keep ? kn_data(*keep) : NULL;
}

typedef struct cellio {
  const char *ig, *hg, *cx, *ib, *hb; /* inputs (biases may be NULL) */
  int64_t lig, lhg, lcx;              /* row strides, elements */
  char *hy, *cy, *ws;                 /* contiguous outputs */
  int64_t B, H;
} cellio;

#define CELL_FWD(T, SUF)                                                                     \
  static void cell_fwd_##SUF(const cellio *io, const kn__vm_##SUF sig, const kn__vm_##SUF th) { \
    int64_t H = io->H;                                                                       \
    _Pragma("omp parallel for schedule(static) if (io->B * 4 * H >= RNN_PAR_MIN && io->B > 1)") \
    for (int64_t b = 0; b < io->B; b++) {                                                    \
      const T *restrict ig = (const T *)(const void *)io->ig + b * io->lig;                  \
      const T *restrict hg = (const T *)(const void *)io->hg + b * io->lhg;                  \
      const T *restrict cx = (const T *)(const void *)io->cx + b * io->lcx;                  \
      const T *ib = (const T *)(const void *)io->ib, *hb = (const T *)(const void *)io->hb;  \
      T *restrict w = (T *)(void *)io->ws + b * 4 * H;                                       \
      T *restrict c = (T *)(void *)io->cy + b * H, *restrict h = (T *)(void *)io->hy + b * H; \
      for (int64_t j = 0; j < 4 * H; j++) w[j] = ig[j] + hg[j];                              \
      if (ib)                                                                                \
        for (int64_t j = 0; j < 4 * H; j++) w[j] += ib[j];                                   \
      if (hb)                                                                                \
        for (int64_t j = 0; j < 4 * H; j++) w[j] += hb[j];                                   \
      sig(w, w, 2 * H);                                                                      \
      th(w + 2 * H, w + 2 * H, H);                                                           \
      sig(w + 3 * H, w + 3 * H, H);                                                          \
      for (int64_t j = 0; j < H; j++) c[j] = w[H + j] * cx[j] + w[j] * w[2 * H + j];         \
      th(h, c, H);                                                                           \
      for (int64_t j = 0; j < H; j++) h[j] *= w[3 * H + j];                                  \
    }                                                                                        \
  }
CELL_FWD(float, f32)
CELL_FWD(double, f64)

kn_status kn__k_fused_lstm_cell(const kn__call *c, kn__outs *out) {
  int64_t B, H, lb;
  cell_check(c, &B, &H);
  kn_tensor *keep[5] = {NULL};
  cellio io = {.B = B, .H = H, .hy = kn_data(out->t[0]), .cy = kn_data(out->t[1]),
               .ws = kn_data(out->t[2])};
  io.ig = rows_of(c->args[0].u.t, &keep[0], &io.lig);
  io.hg = rows_of(c->args[1].u.t, &keep[1], &io.lhg);
  io.cx = rows_of(c->args[2].u.t, &keep[2], &io.lcx);
  io.ib = targ(c, 3) ? rows_of(targ(c, 3), &keep[3], &lb) : NULL;
  io.hb = targ(c, 4) ? rows_of(targ(c, 4), &keep[4], &lb) : NULL;
  kn_status s = io.ig && io.hg && io.cx && (io.ib || !targ(c, 3)) && (io.hb || !targ(c, 4))
                    ? KN_OK : kn_last_status();
  const kn__vmath *vm = kn__vmath_get();
  if (s == KN_OK && B > 0 && H > 0) {
    if (c->args[0].u.t->dtype == KN_FLOAT32)
      cell_fwd_f32(&io, vm->f32[KN__VM_SIGMOID], vm->f32[KN__VM_TANH]);
    else
      cell_fwd_f64(&io, vm->f64[KN__VM_SIGMOID], vm->f64[KN__VM_TANH]);
  }
  for (int i = 0; i < 5; i++) kn_release(keep[i]);
  return s;
}

/* flat input index of tensor argument i, or -1 when it is omitted */
static int flat(const kn__call *c, int i) {
  return targ(c, i) ? kn__bw_input_index(c, i, 0) : -1;
}

static kn__arg opt_arg(kn_tensor *t) { return t ? KN_A_T(t) : KN_A_NONE; }

kn_status kn__bw_fused_lstm_cell(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *ghy = ctx->grad_outputs[0], *gcy = ctx->grad_outputs[1];
  if (!ghy && !gcy) return KN_OK; /* only the workspace was used: no gradient */
  bool has_bias = targ(c, 3) || targ(c, 4);
  kn__arg args[6] = {opt_arg(ghy), opt_arg(gcy), c->args[2], KN_A_T(ctx->outputs[1]),
                     KN_A_T(ctx->outputs[2]), KN_A_B(has_bias)};
  kn_tensor *r[3];
  if (kn__invoke_multi(KN_OP_FUSED_LSTM_CELL_BACKWARD, 6, args, r, 3) != 3)
    return kn_last_status();
  kn_tensor *per_arg[5] = {r[0], r[0], r[1], r[2], r[2]};
  for (int i = 0; i < 5; i++) {
    int k = flat(c, i);
    if (k >= 0 && ctx->needs_input_grad[k]) ctx->grad_inputs[k] = per_arg[i];
  }
  return KN_OK;
}

/* ---- backward: args grad_hy?, grad_cy?, cx, cy, workspace, has_bias ----------------------- */

static kn_status bw_check(const kn__call *c, int64_t *B, int64_t *H) {
  static const char op[] = "_thnn_fused_lstm_cell_backward_impl";
  const kn_tensor *ws = c->args[4].u.t;
  if (ws->ndim != 2 || ws->sizes[1] % 4 != 0 || !float_dt(ws->dtype))
    return kn__error(KN_ESHAPE, "%s: expected a float32 or float64 workspace of shape [batch, "
                                "4 * hidden], found %dD %s tensor", op, ws->ndim,
                     kn_dtype_name(ws->dtype));
  *B = ws->sizes[0], *H = ws->sizes[1] / 4;
  static const char *const names[4] = {"grad_hy", "grad_cy", "cx", "cy"};
  kn_status s = KN_OK;
  for (int i = 0; i < 4 && s == KN_OK; i++)
    if (targ(c, i)) s = want_2d(op, names[i], targ(c, i), *B, *H, ws->dtype);
  if (s == KN_OK && (!targ(c, 2) || !targ(c, 3)))
    s = kn__error(KN_EINVAL, "%s: expected cx and cy tensors, found None", op);
  return s;
}

kn_status kn__meta_fused_lstm_cell_backward(const kn__call *c, kn__metas *out) {
  int64_t B, H;
  kn_status s = bw_check(c, &B, &H);
  if (s != KN_OK) return s;
  const kn_tensor *ws = c->args[4].u.t, *cx = c->args[2].u.t;
  kn__outmeta *gb = NULL;
  if (!kn__metas_push_like(out, ws, ws->dtype) || !kn__metas_push_like(out, cx, cx->dtype) ||
      !(gb = kn__metas_push(out, ws->dtype)))
    return kn__oom();
  kn_sym ss[2];
  kn__tensor_symsizes(ws, ss);
  gb->ndim = 1;
  gb->sizes[0] = c->args[5].u.b ? ss[1] : kn__sym_const(0);
  return KN_OK;
}

typedef struct bwio {
  const char *ghy, *gcy, *cx, *cy, *ws; /* ghy / gcy may be NULL */
  int64_t lhy, lcy, lcx, lc, lws;
  char *gg, *gcx;                       /* contiguous outputs */
  int64_t B, H;
} bwio;

#define CELL_BWD(T, SUF)                                                                     \
  static void cell_bwd_##SUF(const bwio *io, const kn__vm_##SUF th) {                        \
    int64_t H = io->H;                                                                       \
    _Pragma("omp parallel for schedule(static) if (io->B * 4 * H >= RNN_PAR_MIN && io->B > 1)") \
    for (int64_t b = 0; b < io->B; b++) {                                                    \
      const T *ghy = io->ghy ? (const T *)(const void *)io->ghy + b * io->lhy : NULL;        \
      const T *gcy = io->gcy ? (const T *)(const void *)io->gcy + b * io->lcy : NULL;        \
      const T *restrict cx = (const T *)(const void *)io->cx + b * io->lcx;                  \
      const T *restrict w = (const T *)(const void *)io->ws + b * io->lws;                   \
      T *restrict gg = (T *)(void *)io->gg + b * 4 * H, *restrict gcx = (T *)(void *)io->gcx + b * H; \
      T *tc = gg + 3 * H; /* tanh(cy), overwritten by the output gate's gradient */          \
      th(tc, (const T *)(const void *)io->cy + b * io->lc, H);                               \
      for (int64_t j = 0; j < H; j++) {                                                      \
        T i = w[j], f = w[H + j], g = w[2 * H + j], o = w[3 * H + j], t = tc[j];             \
        T dh = ghy ? ghy[j] : (T)0;                                                          \
        T dc = (gcy ? gcy[j] : (T)0) + dh * o * ((T)1 - t * t);                              \
        gg[j] = dc * g * i * ((T)1 - i);                                                     \
        gg[H + j] = dc * cx[j] * f * ((T)1 - f);                                             \
        gg[2 * H + j] = dc * i * ((T)1 - g * g);                                             \
        gg[3 * H + j] = dh * t * o * ((T)1 - o);                                             \
        gcx[j] = dc * f;                                                                     \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
  static void bias_sum_##SUF(const char *gg, char *gb, int64_t B, int64_t n) {               \
    T *restrict s = (T *)(void *)gb;                                                         \
    memset(s, 0, (size_t)n * sizeof(T));                                                    \
    for (int64_t b = 0; b < B; b++) {                                                        \
      const T *restrict r = (const T *)(const void *)gg + b * n;                             \
      for (int64_t j = 0; j < n; j++) s[j] += r[j];                                          \
    }                                                                                        \
  }
CELL_BWD(float, f32)
CELL_BWD(double, f64)

kn_status kn__k_fused_lstm_cell_backward(const kn__call *c, kn__outs *out) {
  int64_t B, H;
  bw_check(c, &B, &H);
  kn_tensor *keep[5] = {NULL};
  bwio io = {.B = B, .H = H, .gg = kn_data(out->t[0]), .gcx = kn_data(out->t[1])};
  const char **src[5] = {&io.ghy, &io.gcy, &io.cx, &io.cy, &io.ws};
  int64_t *ld[5] = {&io.lhy, &io.lcy, &io.lcx, &io.lc, &io.lws};
  kn_status s = KN_OK;
  for (int i = 0; i < 5 && s == KN_OK; i++) {
    *src[i] = targ(c, i) ? rows_of(targ(c, i), &keep[i], ld[i]) : NULL;
    if (targ(c, i) && !*src[i]) s = kn_last_status();
  }
  bool f32 = c->args[4].u.t->dtype == KN_FLOAT32;
  const kn__vmath *vm = kn__vmath_get();
  if (s == KN_OK && B > 0 && H > 0) {
    if (f32) cell_bwd_f32(&io, vm->f32[KN__VM_TANH]);
    else cell_bwd_f64(&io, vm->f64[KN__VM_TANH]);
  }
  if (s == KN_OK && c->args[5].u.b) {
    if (f32) bias_sum_f32(io.gg, kn_data(out->t[2]), B, 4 * H);
    else bias_sum_f64(io.gg, kn_data(out->t[2]), B, 4 * H);
  }
  for (int i = 0; i < 5; i++) kn_release(keep[i]);
  return s;
}

/* ---- public API --------------------------------------------------------------------------- */

kn_tensor *kn_fused_lstm_cell(kn_tensor *input_gates, kn_tensor *hidden_gates, kn_tensor *cx,
                              kn_tensor *input_bias, kn_tensor *hidden_bias, kn_tensor **cy,
                              kn_tensor **workspace) {
  if (cy) *cy = NULL;
  if (workspace) *workspace = NULL;
  if (!input_gates || !hidden_gates || !cx) {
    kn__error(KN_EINVAL, "kn_fused_lstm_cell: expected input_gates, hidden_gates and cx, "
                         "found NULL");
    return NULL;
  }
  kn__arg args[5] = {KN_A_T(input_gates), KN_A_T(hidden_gates), KN_A_T(cx),
                     opt_arg(input_bias), opt_arg(hidden_bias)};
  kn_tensor *r[3];
  if (kn__invoke_multi(KN_OP_FUSED_LSTM_CELL, 5, args, r, 3) != 3) return NULL;
  if (cy) *cy = r[1];
  if (workspace) *workspace = r[2];
  return r[0];
}
