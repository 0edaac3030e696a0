/*
** inductor/decomp.c: inductor's decomposition rules. Before lowering, each
** call of an op whose lowering class is DECOMP (the lowering table,
** inductor/lowering.def, names its rule) is replaced by the core ops its rule calls
** (pointwise ops and sum/mean/amax reductions), recorded on meta tensors by
** the graph's decomposition pass (graph_rewrite.c), so the scheduler can fuse
** them instead of calling the eager op. Composite ops (KN_OPF_COMPOSITE:
** cross_entropy, linear, ...) decompose through their own kernels first.
**
** A rule: a check (is this call one the rule handles exactly?) and the
** rule itself, which has the shape of a kernel (call in, outputs pushed) and
** uses kiln's public ops. A rule never reads a size: sizes stay symbolic
** because reductions count their own elements (mean) at run time.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "logging/log.h"
#include "trace/events.h"
#include "graph/graph.h"
#include "inductor/inductor.h"
#include "kiln/kiln.h"
#include "ops/loss.h"
#include "ops/opdef.h"
#include "ops/symsize.h"

typedef struct drow {
  bool (*ok)(const kn__gnode *n);
  kn_status (*rule)(const kn__call *c, kn__outs *out);
} drow;

static const kn__vmeta *arg_meta(const kn__gnode *n, int a) {
  if (a >= n->nargs || n->args[a].kind != KN__GA_TENSOR || !n->args[a].u.t.node) return NULL;
  return &n->args[a].u.t.node->meta[n->args[a].u.t.idx];
}

static bool is_float(const kn__vmeta *m) {
  return m && m->kind == KN__V_TENSOR && (m->dtype == KN_FLOAT32 || m->dtype == KN_FLOAT64);
}

/* No reduced dim of x (dims in mask) is a constant 0 (amax of nothing). */
static bool nonempty(const kn__vmeta *x, const bool *mask) {
  for (int d = 0; d < x->ndim; d++)
    if (mask[d] && kn__sym_is_const(x->sizes[d]) && x->sizes[d].c == 0) return false;
  return true;
}

static kn_status push_all(kn__outs *out, kn_tensor *const *t, int n) {
  for (int k = 0; k < n; k++) {
    if (!t[k]) return kn_last_status();
    if (!kn__outs_push(out, kn_retain(t[k]))) return kn__oom();
  }
  return KN_OK;
}

/* ---- softmax / log_softmax ---------------------------------------------------- */
static bool softmax_ok(const kn__gnode *n) {
  const kn__vmeta *x = arg_meta(n, 0);
  if (!is_float(x) || x->ndim == 0 || n->args[2].u.b) return false;
  int64_t d = n->args[1].u.i.c < 0 ? n->args[1].u.i.c + x->ndim : n->args[1].u.i.c;
  bool mask[KN_MAX_DIMS] = {false};
  if (!kn__sym_is_const(n->args[1].u.i) || d < 0 || d >= x->ndim) return false;
  mask[d] = true;
  return nonempty(x, mask);
}

/* max, exp(x - max), their sum, and exp * (1 / sum) (or (x - max) - log(sum)):
** like the eager kernel, one reciprocal per row and a multiply per element. */
static kn_status softmax_rule(const kn__call *c, kn__outs *out, bool log_) {
  kn_tensor *x = c->args[0].u.t, *r;
  int64_t dim = c->args[1].u.i;
  kn_scope_begin();
  kn_tensor *sh = kn_sub(x, kn_amax(x, &dim, 1, true));
  kn_tensor *e = kn_exp(sh);
  kn_tensor *s = kn_sum_dims(e, &dim, 1, true);
  r = log_ ? kn_sub(sh, kn_log(s)) : kn_mul(e, kn_reciprocal(s));
  kn_status st = push_all(out, &r, 1);
  kn_scope_end();
  return st;
}
static kn_status softmax(const kn__call *c, kn__outs *out) { return softmax_rule(c, out, false); }
static kn_status log_softmax(const kn__call *c, kn__outs *out) { return softmax_rule(c, out, true); }

/* ---- logsumexp ------------------------------------------------------------------- */
/* Constant dims of a float tensor, none of constant size 0 (then the
** table's row lowers it: its shift pass needs no element). */
static bool logsumexp_ok(const kn__gnode *n) {
  const kn__vmeta *x = arg_meta(n, 0);
  if (!is_float(x) || x->ndim == 0 || n->nargs < 3 || n->args[1].kind != KN__GA_INTS) return false;
  bool mask[KN_MAX_DIMS] = {false};
  int nd = n->args[1].u.ints.n;
  for (int j = 0; j < nd; j++) {
    kn_sym v = n->args[1].u.ints.v[j];
    int64_t d = v.c < 0 ? v.c + x->ndim : v.c;
    if (!kn__sym_is_const(v) || d < 0 || d >= x->ndim || mask[d]) return false;
    mask[d] = true;
  }
  for (int d = 0; d < x->ndim && nd == 0; d++) mask[d] = true;
  return nonempty(x, mask);
}

/* shift(x) = amax(x) where finite, else 0 (the eager row's SHIFT). */
static kn_tensor *lse_shift(kn_tensor *x, const int64_t *dims, int nd, bool keep) {
  kn_tensor *m = kn_amax(x, dims, nd, keep);
  return kn_where(kn_eq_scalar(kn_abs(m), kn_float(INFINITY)), kn_zeros(0, NULL, x->dtype), m);
}

/* m + log(sum(exp(x - m))): softmax's group, whose exp runs as vector math
** per block. Without keepdim the shift is taken twice (kept for the
** subtraction, reduced for the sum): no view between the group's members. */
static kn_status logsumexp(const kn__call *c, kn__outs *out) {
  kn_tensor *x = c->args[0].u.t;
  const int64_t *dims = c->args[1].u.ints.v;
  int nd = c->args[1].u.ints.n;
  bool keep = c->args[2].u.b;
  kn_scope_begin();
  kn_tensor *m = lse_shift(x, dims, nd, true);
  kn_tensor *s = kn_sum_dims(kn_exp(kn_sub(x, m)), dims, nd, keep);
  kn_tensor *r = kn_add(kn_log(s), keep ? m : lse_shift(x, dims, nd, false));
  kn_status st = push_all(out, &r, 1);
  kn_scope_end();
  return st;
}

/* ---- layer norm -------------------------------------------------------------- */
static bool layer_norm_ok(const kn__gnode *n) {
  const kn__vmeta *x = arg_meta(n, 0);
  for (int a = 2; a <= 3; a++) {
    const kn__vmeta *w = arg_meta(n, a);
    if (w && w->dtype != (x ? x->dtype : w->dtype)) return false;
  }
  return is_float(x) && n->args[1].kind == KN__GA_INTS && n->args[1].u.ints.n >= 1 &&
         n->args[1].u.ints.n <= x->ndim;
}

/* mean, centred x, biased variance, rstd = rsqrt(var + eps), then the
** affine part: (out, mean, rstd) with mean and rstd in keepdim form. */
static kn_status layer_norm(const kn__call *c, kn__outs *out) {
  kn_tensor *x = c->args[0].u.t, *w = c->args[2].u.t, *b = c->args[3].u.t;
  int nn = c->args[1].u.ints.n;
  int64_t dims[KN_MAX_DIMS];
  for (int k = 0; k < nn; k++) dims[k] = x->ndim - nn + k;
  kn_scope_begin();
  kn_tensor *mean = kn_mean_dims(x, dims, nn, true);
  kn_tensor *d = kn_sub(x, mean);
  kn_tensor *var = kn_mean_dims(kn_mul(d, d), dims, nn, true);
  kn_tensor *rstd = kn_rsqrt(kn_add_scalar(var, kn_float(c->args[4].u.d)));
  kn_tensor *y = kn_mul(d, rstd);
  if (w) y = kn_mul(y, w);
  if (b) y = kn_add(y, b);
  kn_tensor *r[3] = {y, mean, rstd};
  kn_status st = push_all(out, r, 3);
  kn_scope_end();
  return st;
}

/* ---- batch norm ---------------------------------------------------------------- */
/* Eval mode with running stats, or training without them (training with
** running stats writes them in place: the eager op keeps those). */
static bool batch_norm_ok(const kn__gnode *n) {
  const kn__vmeta *x = arg_meta(n, 0);
  if (!is_float(x) || x->ndim < 2 || !kn__sym_is_const(x->sizes[1])) return false;
  for (int a = 1; a <= 4; a++) {
    const kn__vmeta *m = arg_meta(n, a);
    if (m && (m->dtype != x->dtype || m->ndim != 1)) return false;
  }
  bool train = n->args[5].u.b, stats = arg_meta(n, 3) && arg_meta(n, 4);
  bool mask[KN_MAX_DIMS] = {false};
  for (int d = 0; d < x->ndim; d++) mask[d] = d != 1;
  return train ? !arg_meta(n, 3) && !arg_meta(n, 4) && nonempty(x, mask) : stats;
}

/* A per-channel [C] tensor as [C, 1, ...] (broadcasts over x's dim 1). */
static kn_tensor *chan(kn_tensor *t, int ndim) {
  for (int d = 2; t && d < ndim; d++) t = kn_unsqueeze(t, t->ndim);
  return t;
}

/* Squeeze a keepdim per-channel statistic to [C]. */
static kn_tensor *squeeze_chan(kn_tensor *t) {
  for (int d = t ? t->ndim - 1 : -1; t && d >= 0; d--)
    if (d != 1) t = kn_squeeze_dim(t, d);
  return t;
}

static kn_status batch_norm(const kn__call *c, kn__outs *out) {
  kn_tensor *x = c->args[0].u.t, *w = c->args[1].u.t, *b = c->args[2].u.t;
  kn_tensor *rm = c->args[3].u.t, *rv = c->args[4].u.t;
  double eps = c->args[7].u.d;
  int nd = x->ndim;
  kn_scope_begin();
  kn_tensor *mean, *invstd, *sm, *si;
  if (c->args[5].u.b) {
    int64_t dims[KN_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < nd; d++)
      if (d != 1) dims[k++] = d;
    mean = kn_mean_dims(x, dims, k, true);
    kn_tensor *dx = kn_sub(x, mean);
    invstd = kn_rsqrt(kn_add_scalar(kn_mean_dims(kn_mul(dx, dx), dims, k, true), kn_float(eps)));
    sm = squeeze_chan(mean);
    si = squeeze_chan(invstd);
  } else {
    mean = chan(rm, nd);
    invstd = chan(kn_rsqrt(kn_add_scalar(rv, kn_float(eps))), nd);
    int64_t zero = 0;
    sm = kn_empty(1, &zero, x->dtype);
    si = kn_empty(1, &zero, x->dtype);
  }
  kn_tensor *y = kn_mul(kn_sub(x, mean), invstd);
  if (w) y = kn_mul(y, chan(w, nd));
  if (b) y = kn_add(y, chan(b, nd));
  kn_tensor *r[3] = {y, sm, si};
  kn_status st = push_all(out, r, 3);
  kn_scope_end();
  return st;
}

/* ---- mse loss ---------------------------------------------------------------------- */
static bool mse_ok(const kn__gnode *n) {
  const kn__vmeta *a = arg_meta(n, 0), *t = arg_meta(n, 1);
  return is_float(a) && is_float(t) && a->dtype == t->dtype &&
         kn__sym_is_const(n->args[2].u.i) && n->args[2].u.i.c >= 0 && n->args[2].u.i.c <= 2;
}

static kn_status mse_loss(const kn__call *c, kn__outs *out) {
  kn_scope_begin();
  kn_tensor *d = kn_sub(c->args[0].u.t, c->args[1].u.t);
  kn_tensor *sq = kn_mul(d, d);
  int64_t red = c->args[2].u.i;
  kn_tensor *r = red == KN_REDUCTION_MEAN ? kn_mean(sq) : red == KN_REDUCTION_SUM ? kn_sum(sq) : sq;
  kn_status st = push_all(out, &r, 1);
  kn_scope_end();
  return st;
}

/* ---- nll_loss ------------------------------------------------------------------------ */
/* x float, weight (arg w) absent or of x's dtype, reduction and ignore_index
** constants. The target is int64 (the op's meta checked it). */
static bool nll_args_ok(const kn__gnode *n, int xa, int wa, int ra) {
  const kn__vmeta *x = arg_meta(n, xa), *w = arg_meta(n, wa);
  kn_sym red = n->args[ra].u.i, ign = n->args[ra + 1].u.i;
  return is_float(x) && x->ndim >= 1 && (!w || w->dtype == x->dtype) && kn__sym_is_const(red) &&
         red.c >= KN_REDUCTION_NONE && red.c <= KN_REDUCTION_SUM && kn__sym_is_const(ign);
}
static bool nll_ok(const kn__gnode *n) { return nll_args_ok(n, 0, 2, 3); }
static bool nll_bwd_ok(const kn__gnode *n) {
  const kn__vmeta *g = arg_meta(n, 0), *x = arg_meta(n, 1), *tw = arg_meta(n, 6);
  return nll_args_ok(n, 1, 3, 4) && g && g->dtype == x->dtype && tw && tw->dtype == x->dtype;
}

/* The class-dim view of weight: [C] as [C, 1, ...] when x has spatial dims. */
static kn_tensor *class_weight(kn_tensor *w, int ndim) {
  if (!w || ndim <= 2) return w;
  int64_t shape[KN_MAX_DIMS];
  shape[0] = -1;
  for (int d = 1; d < ndim - 1; d++) shape[d] = 1;
  return kn_view(w, ndim - 1, shape);
}

/* A 0-dim zero of x's dtype, one per use (the scheduler computes a
** constant of one reader inside that reader's kernel). */
static kn_tensor *zero_of(const kn_tensor *x) { return kn_zeros(0, NULL, x->dtype); }

/* hit = (class index == checked target): true at each row's target class,
** nowhere in a row whose target is ignore_index. The check is the extern
** op _nll_loss_target (a bad target fails as nll_loss does); *tg: the
** checked target ([N, 1, ...], ignored rows -1). */
static kn_tensor *nll_hit(kn_tensor *x, kn_tensor *t, int64_t ignore, kn_tensor **tg) {
  kn_tensor *tc[2] = {NULL, NULL};
  if (kn__nll_loss_target(t, x, ignore, tc) != 2) return NULL;
  *tg = tc[0];
  return kn_eq(tc[1], tc[0]);
}

/* Per element: -x * w where hit, else 0, summed over the class dim: the
** row's loss. The row's weight: where(hit, w, 0) summed likewise, or
** without a weight (target != ignore_index) per row, read by the second
** reduction: the batch's sums (mean: their quotient, as the eager kernel).
** Row values keep the class dim (the batch's sums share one kernel), but
** reduction none's loss has the target's shape. */
static kn_status nll_loss(const kn__call *c, kn__outs *out) {
  kn_tensor *x = c->args[0].u.t, *w = c->args[2].u.t, *tg = NULL;
  int64_t red = c->args[3].u.i, cd = x->ndim >= 2 ? 1 : 0;
  kn_scope_begin();
  kn_tensor *hit = nll_hit(x, c->args[1].u.t, c->args[4].u.i, &tg), *wc = class_weight(w, x->ndim);
  kn_tensor *nx = kn_neg(x);
  kn_tensor *pick = kn_where(hit, wc ? kn_mul(nx, wc) : nx, zero_of(x));
  kn_tensor *loss = kn_sum_dims(pick, &cd, 1, red != KN_REDUCTION_NONE);
  kn_tensor *tw = wc ? kn_sum_dims(kn_where(hit, wc, zero_of(x)), &cd, 1, true)
                     : kn_to(kn_ne_scalar(tg, kn_int(-1)), x->dtype);
  tw = kn_sum(tw);
  if (red != KN_REDUCTION_NONE) loss = kn_sum(loss);
  if (red == KN_REDUCTION_MEAN) loss = kn_div(loss, tw);
  kn_tensor *r[2] = {loss, tw};
  kn_status st = push_all(out, r, 2);
  kn_scope_end();
  return st;
}

/* grad_input: -w * grad where hit (divided by total_weight for a mean),
** else 0, as where(hit, -(0 + grad) * w / total_weight, 0). The zero of
** x's sizes makes every node one of x's elements (members of one kernel),
** and the value where selects is computed unconditionally: a select whose
** operand is a load of one element (grad) keeps gcc from vectorising the
** loop. The where keeps 0 where the value is nan (0 / 0 when every target
** is ignored), as the eager kernel writes nothing there. */
static kn_status nll_loss_bwd(const kn__call *c, kn__outs *out) {
  kn_tensor *g = c->args[0].u.t, *x = c->args[1].u.t, *w = c->args[3].u.t, *tg = NULL;
  int64_t red = c->args[4].u.i;
  kn_scope_begin();
  kn_tensor *hit = nll_hit(x, c->args[2].u.t, c->args[5].u.i, &tg), *wc = class_weight(w, x->ndim);
  if (red == KN_REDUCTION_NONE && x->ndim >= 2) g = kn_unsqueeze(g, 1);
  kn_tensor *v = kn_neg(kn_add(kn__zeros_shaped(x, x->dtype), g));
  if (wc) v = kn_mul(v, wc);
  if (red == KN_REDUCTION_MEAN) v = kn_div(v, c->args[6].u.t);
  v = kn_where(hit, v, zero_of(x));
  kn_status st = push_all(out, &v, 1);
  kn_scope_end();
  return st;
}

/* ---- log_softmax backward ------------------------------------------------------------- */
static bool log_softmax_bwd_form(const kn__gnode *n) {
  const kn__vmeta *g = arg_meta(n, 0), *y = arg_meta(n, 1);
  return is_float(g) && y && y->dtype == g->dtype && g->ndim >= 1 &&
         kn__sym_is_const(n->args[2].u.i) && n->args[3].kind == KN__GA_DTYPE &&
         n->args[3].u.dt == g->dtype;
}

/* Decomposed, unless on the CPU the gradient is an input of the graph
** (nothing produces it here to fuse with: log_softmax ended the compiled
** forward, the loss was computed outside) and the rows run along the last
** dim in float32: then the eager row kernel, one pass at the copy floor's
** speed (docs/KERNELS.md), beats the generated passes. Where the gradient
** comes from nll_loss's backward (cross_entropy) the decomposition fuses
** the two and never writes the dense gradient. */
static bool log_softmax_bwd_ok(const kn__gnode *n) {
  if (!log_softmax_bwd_form(n)) return false;
  const kn__vmeta *g = arg_meta(n, 0);
  const kn__gnode *src = n->args[0].u.t.node;
  int64_t dim = n->args[2].u.i.c < 0 ? n->args[2].u.i.c + g->ndim : n->args[2].u.i.c;
  return !(g->device == KN_CPU && g->dtype == KN_FLOAT32 && dim == g->ndim - 1 &&
           src->op == KN__GN_PLACEHOLDER);
}

/* grad - exp(output) * sum(grad) over the dim, as the eager kernel. */
static kn_status log_softmax_bwd(const kn__call *c, kn__outs *out) {
  kn_tensor *g = c->args[0].u.t;
  int64_t dim = c->args[2].u.i;
  kn_scope_begin();
  kn_tensor *r = kn_sub(g, kn_mul(kn_exp(c->args[1].u.t), kn_sum_dims(g, &dim, 1, true)));
  kn_status st = push_all(out, &r, 1);
  kn_scope_end();
  return st;
}

/* softmax's backward on the GPU (the CPU keeps its eager row kernel):
** y * (grad - sum(grad * y)) over the dim. */
static bool softmax_bwd_ok(const kn__gnode *n) {
  const kn__vmeta *g = arg_meta(n, 0);
  return log_softmax_bwd_form(n) && g->device == KN_CUDA;
}

static kn_status softmax_bwd(const kn__call *c, kn__outs *out) {
  kn_tensor *g = c->args[0].u.t, *y = c->args[1].u.t;
  int64_t dim = c->args[2].u.i;
  kn_scope_begin();
  kn_tensor *r = kn_mul(y, kn_sub(g, kn_sum_dims(kn_mul(g, y), &dim, 1, true)));
  kn_status st = push_all(out, &r, 1);
  kn_scope_end();
  return st;
}

/* ---- _reshape_copy on the GPU -------------------------------------------------------- */
/* A contiguous copy (clone: a generated strided kernel that fuses with what
** produces its input) viewed with the new sizes, instead of the eager op's
** separate copy kernel (the attention's head layouts: 18 copies per
** transformer step). Constant sizes only; the CPU keeps the eager op. */
static bool reshape_copy_ok(const kn__gnode *n) {
  const kn__vmeta *x = arg_meta(n, 0);
  if (!x || x->device != KN_CUDA || n->args[1].kind != KN__GA_INTS) return false;
  for (int k = 0; k < n->args[1].u.ints.n; k++)
    if (!kn__sym_is_const(n->args[1].u.ints.v[k])) return false;
  for (int d = 0; d < x->ndim; d++)
    if (!kn__sym_is_const(x->sizes[d])) return false;
  return true;
}

static kn_status reshape_copy(const kn__call *c, kn__outs *out) {
  kn_scope_begin();
  kn_tensor *r = kn_view(kn_contiguous(c->args[0].u.t), c->args[1].u.ints.n, c->args[1].u.ints.v);
  kn_status st = push_all(out, &r, 1);
  kn_scope_end();
  return st;
}

/* ---- layer norm backward ---------------------------------------------------------- */
/* On the GPU (the CPU keeps its vectorised row kernel): float input, mean
** and rstd of its dtype, the affine parameters too. */
static bool layer_norm_bwd_ok(const kn__gnode *n) {
  const kn__vmeta *g = arg_meta(n, 0), *x = arg_meta(n, 1);
  if (!is_float(x) || x->device != KN_CUDA || !g || g->dtype != x->dtype) return false;
  for (int a = 3; a <= 6; a++) {
    const kn__vmeta *m = arg_meta(n, a);
    if (a <= 4 ? !m || m->dtype != x->dtype : m && m->dtype != x->dtype) return false;
  }
  return n->args[2].kind == KN__GA_INTS && n->args[2].u.ints.n >= 1 &&
         n->args[2].u.ints.n <= x->ndim && n->args[7].kind == KN__GA_INTS;
}

static bool mask_on(const kn__call *c, int i) {
  const kn__arg *m = &c->args[7];
  return m->kind == KN__A_INTS && i < m->u.ints.n && m->u.ints.v[i];
}

/* PyTorch's decomposition with means instead of sums over the normalized
** dims (no size is read): x^ = (x - mean) * rstd, g^ = grad * weight,
** grad_input = rstd * (g^ - mean(g^) - x^ * mean(g^ * x^)); grad_weight and
** grad_bias sum grad * x^ and grad over the other dims. An output not asked
** for is empty, as the eager op's. */
static kn_status layer_norm_bwd(const kn__call *c, kn__outs *out) {
  kn_tensor *g = c->args[0].u.t, *x = c->args[1].u.t, *w = c->args[5].u.t;
  int nn = c->args[2].u.ints.n, no = x->ndim - nn;
  int64_t inner[KN_MAX_DIMS], outer[KN_MAX_DIMS];
  for (int k = 0; k < nn; k++) inner[k] = no + k;
  for (int k = 0; k < no; k++) outer[k] = k;
  kn_scope_begin();
  kn_tensor *rstd = c->args[4].u.t, *xh = kn_mul(kn_sub(x, c->args[3].u.t), rstd);
  kn_tensor *r[3];
  for (int i = 0; i < 3; i++) r[i] = kn_zeros(1, (int64_t[]){0}, x->dtype);
  if (mask_on(c, 0)) {
    kn_tensor *gx = w ? kn_mul(g, w) : g;
    kn_tensor *m1 = kn_mean_dims(gx, inner, nn, true);
    kn_tensor *m2 = kn_mean_dims(kn_mul(gx, xh), inner, nn, true);
    r[0] = kn_mul(rstd, kn_sub(kn_sub(gx, m1), kn_mul(xh, m2)));
  }
  if (mask_on(c, 1)) r[1] = no ? kn_sum_dims(kn_mul(g, xh), outer, no, false) : kn_mul(g, xh);
  if (mask_on(c, 2)) r[2] = no ? kn_sum_dims(g, outer, no, false) : kn_mul_scalar(g, kn_float(1));
  kn_status st = push_all(out, r, 3);
  kn_scope_end();
  return st;
}

/* The rules by role (the lowering table, inductor/lowering.def, says which
** op has which). */
static const drow rules[KN__IND_R_COUNT] = {
    [KN__IND_R_DEC_SOFTMAX] = {softmax_ok, softmax},
    [KN__IND_R_DEC_LOG_SOFTMAX] = {softmax_ok, log_softmax},
    [KN__IND_R_DEC_LAYER_NORM] = {layer_norm_ok, layer_norm},
    [KN__IND_R_DEC_BATCH_NORM] = {batch_norm_ok, batch_norm},
    [KN__IND_R_DEC_MSE_LOSS] = {mse_ok, mse_loss},
    [KN__IND_R_DEC_NLL_LOSS] = {nll_ok, nll_loss},
    [KN__IND_R_DEC_NLL_LOSS_BWD] = {nll_bwd_ok, nll_loss_bwd},
    [KN__IND_R_DEC_LOG_SOFTMAX_BWD] = {log_softmax_bwd_ok, log_softmax_bwd},
    [KN__IND_R_DEC_LOGSUMEXP] = {logsumexp_ok, logsumexp},
    [KN__IND_R_DEC_LAYER_NORM_BWD] = {layer_norm_bwd_ok, layer_norm_bwd},
    [KN__IND_R_DEC_SOFTMAX_BWD] = {softmax_bwd_ok, softmax_bwd},
    [KN__IND_R_DEC_RESHAPE_COPY] = {reshape_copy_ok, reshape_copy},
};

/* The rule for n, or NULL: inductor lowers n as it is. Composite ops go
** through their kernels (in any grad mode: compiled kernels record no
** autograd). */
static kn__decomp_fn rule_for(const kn__gnode *n) {
  const kn__ind_lowering *l = kn__ind_lowering_of(n->opdef);
  if (!n->opdef || l->cls != KN__IND_L_DECOMP) return NULL;
  if (l->role == KN__IND_R_DEC_KERNEL) return n->opdef->kernel;
  const drow *r = &rules[l->role];
  return r->ok && r->ok(n) ? r->rule : NULL;
}

bool kn__ind_has_decomp(int op) {
  if (op < 0 || op >= KN__OP_COUNT) return false;
  const kn__ind_lowering *l = kn__ind_lowering_of(&kn__ops[op]);
  return l->cls == KN__IND_L_DECOMP && l->role != KN__IND_R_DEC_KERNEL && rules[l->role].rule;
}

/* The artifact `name` holding g's code, when tracing (and the
** post_grad_graphs log of the decomposed graph). */
static void emit_graph(const kn__graph *g, const char *name, bool log_it) {
  bool art = log_it && KN_ARTIFACT_ENABLED(KN_ART_POST_GRAD_GRAPHS);
  if (!art && !kn__trace_enabled()) return;
  char *code = kn__graph_code(g, NULL);
  if (!code) return;
  (void)kn__trace_artifact(name, "string", code, SIZE_MAX, NULL);
  char *txt = art ? kn__graph_format_traced("===== AFTER POST GRAD =====\n", "<eval_with_key>", code)
                  : NULL;
  if (txt) KN_LOG_ARTIFACT(KN_ART_POST_GRAD_GRAPHS, "%s", txt);
  free(txt);
  free(code);
}

int kn__ind_joint_graph_passes(kn__graph *g) {
  emit_graph(g, "before_joint_graph", false);
  int n = kn__graph_remove_noops(g);
  if (n < 0) return -1;
  if (n > 0) KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: %d no-op calls removed (x + 0, x * 1, ...)", n);
  emit_graph(g, "after_joint_graph", false);
  return n;
}

kn_status kn__ind_post_grad(const kn__graph *g, kn__graph **out) {
  *out = NULL;
  emit_graph(g, "before_post_grad_graph", false);
  kn__graph *c = kn__graph_copy(g);
  if (!c) return kn_last_status();
  kn__shape_env *prev = kn__shape_env_set_current(kn__graph_shape_env(c));
  int n = kn__graph_decompose_with(c, rule_for);
  kn__shape_env_set_current(prev);
  if (n < 0) {
    kn__graph_free(c);
    return kn_last_status();
  }
  if (n > 0 && kn__graph_eliminate_dead_code(c) < 0) {
    kn__graph_free(c);
    return kn_last_status();
  }
  emit_graph(c, "inductor_post_grad_graph", true);
  *out = c;
  return KN_OK;
}
