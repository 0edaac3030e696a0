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
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops_nn.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "ops/threads.h"
#include "ops/vmath.h"

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
  char *hy, *cy, *ws;                 /* outputs */
  int64_t lhy, lcy, lws;              /* their row strides, elements */
  int64_t B, H;
} cellio;

#define CELL_FWD(T, SUF)                                                                     \
  static void cell_fwd_##SUF(const cellio *io, const kn__vm_##SUF sig, const kn__vm_##SUF th) { \
    int64_t H = io->H;                                                                       \
    int team = kn__par_team(io->B * 4 * H, io->B, KN__GRAIN);                                \
    KN__PAR_FOR(team, for (int64_t b = 0; b < io->B; b++) {                                  \
      const T *restrict ig = (const T *)(const void *)io->ig + b * io->lig;                  \
      const T *restrict hg = (const T *)(const void *)io->hg + b * io->lhg;                  \
      const T *restrict cx = (const T *)(const void *)io->cx + b * io->lcx;                  \
      const T *ib = (const T *)(const void *)io->ib, *hb = (const T *)(const void *)io->hb;  \
      T *restrict w = (T *)(void *)io->ws + b * io->lws;                                     \
      T *restrict c = (T *)(void *)io->cy + b * io->lcy;                                     \
      T *restrict h = (T *)(void *)io->hy + b * io->lhy;                                     \
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
    });                                                                                      \
  }
CELL_FWD(float, f32)
CELL_FWD(double, f64)

kn_status kn__k_fused_lstm_cell(const kn__call *c, kn__outs *out) {
  int64_t B, H, lb;
  cell_check(c, &B, &H);
  kn_tensor *keep[5] = {NULL};
  cellio io = {.B = B, .H = H, .hy = kn_data(out->t[0]), .cy = kn_data(out->t[1]),
               .ws = kn_data(out->t[2]), .lhy = H, .lcy = H, .lws = 4 * H};
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
  char *gg, *gcx;                       /* outputs */
  int64_t lgg, lgcx;                    /* their row strides, elements */
  int64_t B, H;
} bwio;

#define CELL_BWD(T, SUF)                                                                     \
  static void cell_bwd_##SUF(const bwio *io, const kn__vm_##SUF th) {                        \
    int64_t H = io->H;                                                                       \
    int team = kn__par_team(io->B * 4 * H, io->B, KN__GRAIN);                                \
    KN__PAR_FOR(team, for (int64_t b = 0; b < io->B; b++) {                                  \
      const T *ghy = io->ghy ? (const T *)(const void *)io->ghy + b * io->lhy : NULL;        \
      const T *gcy = io->gcy ? (const T *)(const void *)io->gcy + b * io->lcy : NULL;        \
      const T *restrict cx = (const T *)(const void *)io->cx + b * io->lcx;                  \
      const T *restrict w = (const T *)(const void *)io->ws + b * io->lws;                   \
      T *gg = (T *)(void *)io->gg + b * io->lgg, *gcx = (T *)(void *)io->gcx + b * io->lgcx; \
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
    });                                                                                      \
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
  bwio io = {.B = B, .H = H, .gg = kn_data(out->t[0]), .gcx = kn_data(out->t[1]),
             .lgg = 4 * H, .lgcx = H};
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

/* ---- a whole layer: args input_gates [B, T, 4H], h0 [B, H], c0 [B, H], weight_hh [4H, H] ---
** Outputs y [B, T, H], h_n [B, H], c_n [B, H], the activated gates of every
** step [T, B, 4H] and the cell states [T, B, H] (for the backward). The
** recurrence runs inside the kernel: per step one GEMM h @ W_hh^T and the
** fused cell pass above, so a graph holds one node per layer whatever the
** sequence length. */

static kn_status layer_check(const kn__call *c, int64_t *B, int64_t *T, int64_t *H) {
  static const char op[] = "_lstm_layer";
  const kn_tensor *ig = c->args[0].u.t, *w = c->args[3].u.t;
  if (ig->ndim != 3 || ig->sizes[2] % 4 != 0 || ig->sizes[1] < 1)
    return kn__error(KN_ESHAPE, "%s: expected input_gates of shape [batch, steps >= 1, 4 * "
                                "hidden], found %dD tensor", op, ig->ndim);
  if (!float_dt(ig->dtype))
    return kn__error(KN_EDTYPE, "%s: expected float32 or float64 gates, found %s", op,
                     kn_dtype_name(ig->dtype));
  *B = ig->sizes[0], *T = ig->sizes[1], *H = ig->sizes[2] / 4;
  kn_status s = want_2d(op, "h0", c->args[1].u.t, *B, *H, ig->dtype);
  if (s == KN_OK) s = want_2d(op, "c0", c->args[2].u.t, *B, *H, ig->dtype);
  if (s == KN_OK) s = want_2d(op, "weight_hh", w, 4 * *H, *H, ig->dtype);
  return s;
}

kn_status kn__meta_lstm_layer(const kn__call *c, kn__metas *out) {
  int64_t B, T, H;
  kn_status s = layer_check(c, &B, &T, &H);
  if (s != KN_OK) return s;
  kn_dtype dt = c->args[0].u.t->dtype;
  kn_sym g[3], h[2];
  kn__tensor_symsizes(c->args[0].u.t, g);
  kn__tensor_symsizes(c->args[1].u.t, h);
  kn_sym y[3] = {g[0], g[1], h[1]}, ws[3] = {g[1], g[0], g[2]}, cs[3] = {g[1], g[0], h[1]};
  if (!kn__metas_push_sizes(out, dt, 3, y) || !kn__metas_push_sizes(out, dt, 2, h) ||
      !kn__metas_push_sizes(out, dt, 2, h) || !kn__metas_push_sizes(out, dt, 3, ws) ||
      !kn__metas_push_sizes(out, dt, 3, cs))
    return kn__oom();
  return KN_OK;
}

/* A contiguous view of t's data (t itself, or a copy in *keep, owned). */
static const char *dense(const kn_tensor *t, kn_tensor **keep) {
  *keep = NULL;
  if (kn_is_contiguous(t)) return kn_data(t);
  *keep = kn__contiguous_copy(t, t->dtype);
  return *keep ? kn_data(*keep) : NULL;
}

typedef struct layerio {
  kn_dtype dt;
  int64_t B, T, H, es;
  const char *ig, *h0, *c0, *w; /* dense inputs */
} layerio;

/* h_prev [B, H] (row stride lh) @ W^T into hg [B, 4H]. */
static kn_status hidden_gemm(const layerio *L, const char *hp, int64_t lh, char *hg) {
  kn__mat a = {hp, lh, 1}, b = {L->w, 1, L->H};
  return kn__nn_gemm("_lstm_layer", L->dt, L->B, 4 * L->H, L->H, a, b, hg, 4 * L->H, 1.0, 0.0);
}

static void run_cell(const layerio *L, const cellio *io) {
  const kn__vmath *vm = kn__vmath_get();
  if (L->dt == KN_FLOAT32) cell_fwd_f32(io, vm->f32[KN__VM_SIGMOID], vm->f32[KN__VM_TANH]);
  else cell_fwd_f64(io, vm->f64[KN__VM_SIGMOID], vm->f64[KN__VM_TANH]);
}

static kn_status layer_forward(const layerio *L, kn__outs *out, char *hg) {
  int64_t B = L->B, T = L->T, H = L->H, es = L->es;
  char *y = kn_data(out->t[0]), *ws = kn_data(out->t[3]), *cs = kn_data(out->t[4]);
  kn_status s = KN_OK;
  for (int64_t t = 0; t < T && s == KN_OK; t++) {
    const char *hp = t ? y + (t - 1) * H * es : L->h0;
    s = hidden_gemm(L, hp, t ? T * H : H, hg);
    cellio io = {.ig = L->ig + t * 4 * H * es, .lig = T * 4 * H, .hg = hg, .lhg = 4 * H,
                 .cx = t ? cs + (t - 1) * B * H * es : L->c0, .lcx = H,
                 .hy = y + t * H * es, .lhy = T * H, .cy = cs + t * B * H * es, .lcy = H,
                 .ws = ws + t * B * 4 * H * es, .lws = 4 * H, .B = B, .H = H};
    if (s == KN_OK) run_cell(L, &io);
  }
  if (s == KN_OK) {
    for (int64_t b = 0; b < B; b++)
      memcpy((char *)kn_data(out->t[1]) + b * H * es, y + (b * T + T - 1) * H * es,
             (size_t)(H * es));
    memcpy(kn_data(out->t[2]), cs + (T - 1) * B * H * es, (size_t)(B * H * es));
  }
  return s;
}

kn_status kn__k_lstm_layer(const kn__call *c, kn__outs *out) {
  layerio L;
  layer_check(c, &L.B, &L.T, &L.H);
  L.dt = c->args[0].u.t->dtype;
  L.es = (int64_t)kn_dtype_size(L.dt);
  kn_tensor *keep[4] = {NULL};
  const char **src[4] = {&L.ig, &L.h0, &L.c0, &L.w};
  kn_status s = KN_OK;
  for (int i = 0; i < 4 && s == KN_OK; i++)
    if (!(*src[i] = dense(c->args[i].u.t, &keep[i]))) s = kn_last_status();
  char *hg = s == KN_OK ? malloc((size_t)(L.B * 4 * L.H * L.es) + 1) : NULL;
  if (s == KN_OK && !hg) s = kn__oom();
  if (s == KN_OK && L.B > 0 && L.H > 0) s = layer_forward(&L, out, hg);
  free(hg);
  for (int i = 0; i < 4; i++) kn_release(keep[i]);
  return s;
}

kn_status kn__bw_lstm_layer(kn__bwctx *ctx) {
  const kn__call *c = ctx->call;
  kn_tensor *const *go = ctx->grad_outputs;
  if (!go[0] && !go[1] && !go[2]) return KN_OK; /* only the saved states were used */
  kn__arg args[9] = {opt_arg(go[0]), opt_arg(go[1]), opt_arg(go[2]), c->args[1], c->args[2],
                     c->args[3], KN_A_T(ctx->outputs[0]), KN_A_T(ctx->outputs[3]),
                     KN_A_T(ctx->outputs[4])};
  kn_tensor *r[4];
  if (kn__invoke_multi(KN_OP_LSTM_LAYER_BACKWARD, 9, args, r, 4) != 4) return kn_last_status();
  for (int i = 0; i < 4; i++)
    if (ctx->needs_input_grad[i]) ctx->grad_inputs[i] = r[i];
  return KN_OK;
}

/* ---- its backward: args grad_y?, grad_hn?, grad_cn?, h0, c0, weight_hh, y, workspace,
** cell states; outputs the gradients of input_gates, h0, c0 and weight_hh. */

static kn_status layer_bw_check(const kn__call *c, int64_t *B, int64_t *T, int64_t *H) {
  static const char op[] = "_lstm_layer_backward";
  const kn_tensor *y = c->args[6].u.t;
  if (y->ndim != 3 || !float_dt(y->dtype))
    return kn__error(KN_ESHAPE, "%s: expected a float32 or float64 output y of shape [batch, "
                                "steps, hidden], found %dD %s tensor", op, y->ndim,
                     kn_dtype_name(y->dtype));
  *B = y->sizes[0], *T = y->sizes[1], *H = y->sizes[2];
  kn_dtype dt = y->dtype;
  static const char *const names[6] = {"grad_hn", "grad_cn", "h0", "c0", "weight_hh", ""};
  kn_status s = KN_OK;
  const kn_tensor *gy = targ(c, 0), *ws = c->args[7].u.t, *cs = c->args[8].u.t;
  if (gy && (gy->ndim != 3 || gy->sizes[0] != *B || gy->sizes[1] != *T || gy->sizes[2] != *H ||
             gy->dtype != dt))
    s = kn__error(KN_ESHAPE, "%s: expected grad_y shaped and typed like y", op);
  for (int i = 1; i < 6 && s == KN_OK; i++)
    if (targ(c, i)) s = want_2d(op, names[i - 1], targ(c, i), i == 5 ? 4 * *H : *B, *H, dt);
  if (s == KN_OK && (ws->ndim != 3 || ws->sizes[0] != *T || ws->sizes[1] != *B ||
                     ws->sizes[2] != 4 * *H || cs->ndim != 3 || cs->sizes[0] != *T ||
                     cs->sizes[1] != *B || cs->sizes[2] != *H))
    s = kn__error(KN_ESHAPE, "%s: expected workspace [%lld, %lld, %lld] and cell states [%lld, "
                             "%lld, %lld]", op, (long long)*T, (long long)*B,
                  (long long)(4 * *H), (long long)*T, (long long)*B, (long long)*H);
  return s;
}

kn_status kn__meta_lstm_layer_backward(const kn__call *c, kn__metas *out) {
  int64_t B, T, H;
  kn_status s = layer_bw_check(c, &B, &T, &H);
  if (s != KN_OK) return s;
  kn_dtype dt = c->args[6].u.t->dtype;
  kn_sym y[3], w[2];
  kn__tensor_symsizes(c->args[6].u.t, y);
  kn__tensor_symsizes(c->args[5].u.t, w);
  kn_sym gi[3] = {y[0], y[1], w[0]}, h[2] = {y[0], y[2]};
  if (!kn__metas_push_sizes(out, dt, 3, gi) || !kn__metas_push_sizes(out, dt, 2, h) ||
      !kn__metas_push_sizes(out, dt, 2, h) || !kn__metas_push_sizes(out, dt, 2, w))
    return kn__oom();
  return KN_OK;
}

typedef struct layerbw {
  kn_dtype dt;
  int64_t B, T, H, es;
  const char *gy, *gh, *gc, *h0, *c0, *w, *y, *ws, *cs; /* dense; gy, gh, gc may be NULL */
} layerbw;

/* dh += grad_y[:, t] (all rows). */
static void add_step_grad(const layerbw *L, char *dh, int64_t t) {
  int64_t n = L->H, T = L->T;
  for (int64_t b = 0; b < L->B; b++) {
    if (L->dt == KN_FLOAT32) {
      float *restrict d = (float *)(void *)dh + b * n;
      const float *restrict g = (const float *)(const void *)L->gy + (b * T + t) * n;
      for (int64_t j = 0; j < n; j++) d[j] += g[j];
    } else {
      double *restrict d = (double *)(void *)dh + b * n;
      const double *restrict g = (const double *)(const void *)L->gy + (b * T + t) * n;
      for (int64_t j = 0; j < n; j++) d[j] += g[j];
    }
  }
}

/* One step backwards: dh, dc [B, H] hold the gradients of h_t and c_t; on
** return gig[:, t] holds the gates' gradient, dc the gradient of c_{t-1}
** and dh that of h_{t-1}. */
static kn_status step_back(const layerbw *L, int64_t t, char *gig, char *dh, char *dc) {
  int64_t B = L->B, T = L->T, H = L->H, es = L->es;
  if (L->gy) add_step_grad(L, dh, t);
  bwio io = {.ghy = dh, .lhy = H, .gcy = dc, .lcy = H,
             .cx = t ? L->cs + (t - 1) * B * H * es : L->c0, .lcx = H,
             .cy = L->cs + t * B * H * es, .lc = H, .ws = L->ws + t * B * 4 * H * es,
             .lws = 4 * H, .gg = gig + t * 4 * H * es, .lgg = T * 4 * H, .gcx = dc, .lgcx = H,
             .B = B, .H = H};
  const kn__vmath *vm = kn__vmath_get();
  if (L->dt == KN_FLOAT32) cell_bwd_f32(&io, vm->f32[KN__VM_TANH]);
  else cell_bwd_f64(&io, vm->f64[KN__VM_TANH]);
  kn__mat a = {io.gg, T * 4 * H, 1}, w = {L->w, H, 1};
  return kn__nn_gemm("_lstm_layer_backward", L->dt, B, H, 4 * H, a, w, dh, H, 1.0, 0.0);
}

/* grad W_hh = sum over (b, t) of dgates[b, t]^T h_{t-1}[b]: one GEMM over
** the stacked previous hidden states. */
static kn_status weight_grad(const layerbw *L, const char *gig, char *gw) {
  int64_t B = L->B, T = L->T, H = L->H, es = L->es;
  char *hp = malloc((size_t)(B * T * H * es) + 1);
  if (!hp) return kn__oom();
  for (int64_t b = 0; b < B; b++) {
    memcpy(hp + b * T * H * es, L->h0 + b * H * es, (size_t)(H * es));
    memcpy(hp + (b * T + 1) * H * es, L->y + b * T * H * es, (size_t)((T - 1) * H * es));
  }
  kn__mat a = {gig, 1, 4 * H}, h = {hp, H, 1};
  kn_status s = kn__nn_gemm("_lstm_layer_backward", L->dt, 4 * H, H, B * T, a, h, gw, H, 1.0,
                            0.0);
  free(hp);
  return s;
}

static kn_status layer_backward(const layerbw *L, kn__outs *out) {
  int64_t BH = L->B * L->H * L->es;
  char *dh = kn_data(out->t[1]), *dc = kn_data(out->t[2]), *gig = kn_data(out->t[0]);
  if (L->gh) memcpy(dh, L->gh, (size_t)BH);
  else memset(dh, 0, (size_t)BH);
  if (L->gc) memcpy(dc, L->gc, (size_t)BH);
  else memset(dc, 0, (size_t)BH);
  kn_status s = KN_OK;
  for (int64_t t = L->T - 1; t >= 0 && s == KN_OK; t--) s = step_back(L, t, gig, dh, dc);
  return s == KN_OK ? weight_grad(L, gig, kn_data(out->t[3])) : s;
}

kn_status kn__k_lstm_layer_backward(const kn__call *c, kn__outs *out) {
  layerbw L;
  layer_bw_check(c, &L.B, &L.T, &L.H);
  L.dt = c->args[6].u.t->dtype;
  L.es = (int64_t)kn_dtype_size(L.dt);
  kn_tensor *keep[9] = {NULL};
  const char **src[9] = {&L.gy, &L.gh, &L.gc, &L.h0, &L.c0, &L.w, &L.y, &L.ws, &L.cs};
  kn_status s = KN_OK;
  for (int i = 0; i < 9 && s == KN_OK; i++) {
    *src[i] = targ(c, i) ? dense(targ(c, i), &keep[i]) : NULL;
    if (targ(c, i) && !*src[i]) s = kn_last_status();
  }
  if (s == KN_OK && L.B > 0 && L.H > 0 && L.T > 0) s = layer_backward(&L, out);
  else if (s == KN_OK)
    for (int i = 0; i < 4; i++) memset(kn_data(out->t[i]), 0, (size_t)(kn_numel(out->t[i]) * L.es));
  for (int i = 0; i < 9; i++) kn_release(keep[i]);
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

kn_tensor *kn_lstm_layer(kn_tensor *input_gates, kn_tensor *h0, kn_tensor *c0,
                         kn_tensor *weight_hh, kn_tensor **h_n, kn_tensor **c_n) {
  if (h_n) *h_n = NULL;
  if (c_n) *c_n = NULL;
  if (!input_gates || !h0 || !c0 || !weight_hh) {
    kn__error(KN_EINVAL, "kn_lstm_layer: expected input_gates, h0, c0 and weight_hh, found "
                         "NULL");
    return NULL;
  }
  kn__arg args[4] = {KN_A_T(input_gates), KN_A_T(h0), KN_A_T(c0), KN_A_T(weight_hh)};
  kn_tensor *r[5];
  if (kn__invoke_multi(KN_OP_LSTM_LAYER, 4, args, r, 5) != 5) return NULL;
  if (h_n) *h_n = r[1];
  if (c_n) *c_n = r[2];
  return r[0];
}
