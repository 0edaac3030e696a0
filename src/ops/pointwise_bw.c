/*
** ops/pointwise_bw.c: derivative rules of the pointwise family, written with
** public ops only (so they run eagerly now and under tracing later, and are
** themselves differentiable for higher-order gradients).
**
** Rules that PyTorch writes with the result use the saved output (under
** create_graph the engine hands it out with the node as its grad_fn, so
** such rules stay differentiable). Gradients of broadcast operands are
** summed back to the operand's shape (sum_to_size over its symbolic sizes,
** ops/symsize.h) and cast to its dtype.
** In-place rules read input 0 as the value self had before the op (the
** engine saves that pre-image).
*/
#include <math.h>

#include "core/error.h"
#include "kiln/ops_factory.h"
#include "kiln/ops_pointwise.h"
#include "kiln/ops_reduce.h"
#include "ops/pointwise.h"
#include "ops/symsize.h"

#define NEED(k) ((k) < ctx->ninputs && ctx->needs_input_grad[k])
#define IN(k) kn__call_input(ctx->call, (k))
#define OK_OR_FAIL(x) ((x) ? KN_OK : (kn_last_status() != KN_OK ? kn_last_status() : KN_EINVAL))

/* ---- helpers ------------------------------------------------------------------- */

/* g reduced to like's shape (summing broadcast dims) and cast to its dtype. */
static kn_tensor *to_input(kn_tensor *g, const kn_tensor *like) {
  if (!g) return NULL;
  if (!kn__same_sizes(g, like)) g = kn__sum_to_like(g, like);
  if (!g) return NULL;
  return g->dtype == like->dtype ? g : kn_to(g, like->dtype);
}

static kn_status set_grad(kn__bwctx *ctx, int k, kn_tensor *g) {
  if (!NEED(k)) return KN_OK;
  ctx->grad_inputs[k] = to_input(g, IN(k));
  return OK_OR_FAIL(ctx->grad_inputs[k]);
}

static kn_tensor *zeros_like(const kn_tensor *t) { return kn__zeros_like_sym(t); }

static kn_tensor *zero_scalar(const kn_tensor *t) { return kn_zeros(0, NULL, t->dtype); }


static kn_scalar arg_scalar(const kn__bwctx *ctx, int argi) { return ctx->call->args[argi].u.s; }

static bool arg_is_tensor(const kn__bwctx *ctx, int argi) {
  return ctx->call->args[argi].kind == KN__A_TENSOR;
}

/* ---- arithmetic ---------------------------------------------------------------------- */

kn_status kn__bw_add(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0];
  kn_status st = set_grad(ctx, 0, g);
  if (st != KN_OK || !arg_is_tensor(ctx, 1) || !NEED(1)) return st;
  kn_scalar al = arg_scalar(ctx, 2);
  bool one = (al.kind == KN_SCALAR_INT && al.v.i == 1) || (al.kind == KN_SCALAR_FLOAT && al.v.f == 1);
  return set_grad(ctx, 1, one ? g : kn_mul_scalar(g, al));
}

kn_status kn__bw_sub(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0];
  kn_status st = set_grad(ctx, 0, g);
  if (st != KN_OK || !arg_is_tensor(ctx, 1) || !NEED(1)) return st;
  kn_scalar al = arg_scalar(ctx, 2);
  kn_scalar neg = al.kind == KN_SCALAR_FLOAT ? kn_float(-al.v.f) : kn_int(-kn__pw_scalar_int(al));
  return set_grad(ctx, 1, kn_mul_scalar(g, neg));
}

kn_status kn__bw_mul(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0];
  if (!arg_is_tensor(ctx, 1)) return set_grad(ctx, 0, kn_mul_scalar(g, arg_scalar(ctx, 1)));
  kn_status st = KN_OK;
  if (NEED(0)) st = set_grad(ctx, 0, kn_mul(g, IN(1)));
  if (st == KN_OK && NEED(1)) st = set_grad(ctx, 1, kn_mul(g, IN(0)));
  return st;
}

kn_status kn__bw_div(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0];
  if (!arg_is_tensor(ctx, 1)) return set_grad(ctx, 0, kn_div_scalar(g, arg_scalar(ctx, 1)));
  kn_tensor *a = IN(0), *b = IN(1);
  kn_status st = KN_OK;
  if (NEED(0)) st = set_grad(ctx, 0, kn_div(g, b));
  if (st == KN_OK && NEED(1)) /* -g * a / b^2 */
    st = set_grad(ctx, 1, kn_neg(kn_div(kn_div(kn_mul(g, a), b), b)));
  return st;
}

/* Rounded results are piecewise constant: zero gradients (PyTorch's too). */
kn_status kn__bw_zero(kn__bwctx *ctx) {
  kn_status st = KN_OK;
  for (int k = 0; st == KN_OK && k < ctx->ninputs; k++)
    if (NEED(k)) st = set_grad(ctx, k, zeros_like(IN(k)));
  return st;
}

/* maximum/minimum: the gradient goes to the winner, split evenly on ties. */
kn_status kn__bw_maxmin(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0], *a = IN(0), *b = IN(1);
  bool is_max = ctx->call->op->id == KN_OP_MAXIMUM;
  kn_tensor *half = kn_mul_scalar(g, kn_float(0.5)), *z = zero_scalar(g);
  kn_tensor *eq = kn_eq(a, b);
  kn_status st = KN_OK;
  if (NEED(0))
    st = set_grad(ctx, 0, kn_where(eq, half, kn_where(is_max ? kn_gt(a, b) : kn_lt(a, b), g, z)));
  if (st == KN_OK && NEED(1))
    st = set_grad(ctx, 1, kn_where(eq, half, kn_where(is_max ? kn_lt(a, b) : kn_gt(a, b), g, z)));
  return st;
}

/* pow: d/dx x^e = e x^(e-1) (0 where e == 0); d/de b^e = b^e log b (0 where
** b == 0 and e >= 0). */
kn_status kn__bw_pow(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0];
  kn_status st = KN_OK;
  int id = ctx->call->op->id;
  if (id == KN_OP_POW_SCALAR || id == KN_OP_POW_SCALAR_) {
    kn_scalar e = arg_scalar(ctx, 1);
    double ed = kn__pw_scalar_double(e);
    if (ed == 0) return set_grad(ctx, 0, zeros_like(IN(0)));
    kn_scalar em1 = e.kind == KN_SCALAR_FLOAT ? kn_float(ed - 1) : kn_int(e.v.i - 1);
    return set_grad(ctx, 0, kn_mul(g, kn_mul_scalar(kn_pow_scalar(IN(0), em1), e)));
  }
  if (id == KN_OP_POW_SELF_SCALAR) {
    kn_scalar base = arg_scalar(ctx, 0);
    double bd = kn__pw_scalar_double(base);
    kn_tensor *e = IN(0);
    kn_tensor *r = ctx->outputs[0];
    kn_tensor *gr = kn_mul_scalar(kn_mul(g, r), kn_float(log(bd)));
    if (bd == 0) gr = kn_where(kn_ge_scalar(e, kn_int(0)), zero_scalar(g), gr);
    return set_grad(ctx, 0, gr);
  }
  kn_tensor *x = IN(0), *e = IN(1), *z = zero_scalar(g);
  if (NEED(0)) {
    kn_tensor *d = kn_mul(e, kn_pow(x, kn_sub_scalar(e, kn_int(1))));
    st = set_grad(ctx, 0, kn_where(kn_eq_scalar(e, kn_int(0)), z, kn_mul(g, d)));
  }
  if (st == KN_OK && NEED(1)) {
    kn_tensor *r = ctx->outputs[0];
    kn_tensor *mask = kn_logical_and(kn_eq_scalar(x, kn_int(0)), kn_ge_scalar(e, kn_int(0)));
    st = set_grad(ctx, 1, kn_where(mask, z, kn_mul(g, kn_mul(r, kn_log(x)))));
  }
  return st;
}

/* ---- unary ------------------------------------------------------------------------- */

static kn_tensor *gelu2_exact(kn_tensor *x) { /* gelu''(x) = phi(x) (2 - x^2) */
  kn_tensor *x2 = kn_mul(x, x);
  kn_tensor *phi = kn_mul_scalar(kn_exp(kn_mul_scalar(x2, kn_float(-0.5))),
                                 kn_float(0.3989422804014327));
  return kn_mul(phi, kn_sub(kn_full(0, NULL, kn_float(2), x->dtype), x2));
}

static kn_tensor *gelu2_tanh(kn_tensor *x) {
  /* u = b(x + k x^3), t = tanh u: gelu'' = (1 - t^2)(u' + x (u'' - 2 t u'^2) / 2) */
  const double b = 0.7978845608028654, k = 0.044715;
  kn_tensor *x2 = kn_mul(x, x);
  kn_tensor *u = kn_mul_scalar(kn_add(x, kn_mul_scalar(kn_mul(x2, x), kn_float(k))), kn_float(b));
  kn_tensor *t = kn_tanh(u);
  kn_tensor *du = kn_mul_scalar(kn_add_scalar(kn_mul_scalar(x2, kn_float(3 * k)), kn_int(1)),
                                kn_float(b));
  kn_tensor *ddu = kn_mul_scalar(x, kn_float(6 * b * k));
  kn_tensor *sech2 = kn_add_scalar(kn_neg(kn_mul(t, t)), kn_int(1));
  kn_tensor *inner = kn_sub(ddu, kn_mul_scalar(kn_mul(t, kn_mul(du, du)), kn_int(2)));
  return kn_mul(sech2, kn_add(du, kn_mul_scalar(kn_mul(x, inner), kn_float(0.5))));
}

/* Derivatives the formula table (column D) names. */
static kn_tensor *kn__pw_no_deriv(const kn__bwctx *ctx) {
  kn__error(KN_EUNSUPPORTED, "%s: no derivative formula", ctx->call->op->name);
  return NULL;
}

static kn_tensor *kn__pw_d_gelu(const kn__bwctx *ctx, kn_tensor *g, kn_tensor *x) {
  return kn_gelu_backward(g, x, ctx->call->args[1].u.i == 1 ? KN_GELU_TANH : KN_GELU_NONE);
}

static kn_tensor *kn__pw_d_silu(kn_tensor *g, kn_tensor *x) { /* s (1 + x (1 - s)) */
  kn_tensor *s = kn_sigmoid(x);
  kn_tensor *one_minus = kn_add_scalar(kn_neg(s), kn_int(1));
  return kn_mul(g, kn_mul(s, kn_add_scalar(kn_mul(x, one_minus), kn_int(1))));
}

/* erf: 2/sqrt(pi) exp(-x^2); erfc: the negative (c). */
static kn_tensor *kn__pw_d_erf(kn_tensor *g, kn_tensor *x, double c) {
  return kn_mul(g, kn_mul_scalar(kn_exp(kn_neg(kn_mul(x, x))), kn_float(c)));
}

static kn_tensor *kn__pw_rsqrt_1mx2(kn_tensor *x) { /* 1 / sqrt(1 - x^2) */
  return kn_rsqrt(kn_add_scalar(kn_neg(kn_mul(x, x)), kn_int(1)));
}

/* softplus: sigmoid(beta x), 1 where beta x > threshold */
static kn_tensor *kn__pw_d_softplus(const kn__bwctx *ctx, kn_tensor *g, kn_tensor *x) {
  kn_tensor *bx = kn_mul_scalar(x, ctx->call->args[1].u.s);
  return kn_where(kn_gt_scalar(bx, ctx->call->args[2].u.s), g, kn_mul(g, kn_sigmoid(bx)));
}

static kn_tensor *kn__pw_d_clamp(const kn__bwctx *ctx, kn_tensor *g, kn_tensor *x) {
  kn_tensor *mask = NULL;
  const kn__call *c = ctx->call;
  if (c->args[1].kind == KN__A_SCALAR) mask = kn_ge_scalar(x, c->args[1].u.s);
  if (c->args[2].kind == KN__A_SCALAR) {
    kn_tensor *m2 = kn_le_scalar(x, c->args[2].u.s);
    mask = mask ? kn_logical_and(mask, m2) : m2;
  }
  return kn_where(mask, g, zero_scalar(g));
}

/* Unary rules: d out / d x times g, column D of the formula table. */
#define DERIV_CASE(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D) \
  case KN__PW_##CODE: return (D);

static kn_tensor *unary_grad(kn__bwctx *ctx, kn_tensor *g) {
  kn_tensor *x = IN(0), *out = ctx->outputs[0];
  (void)x, (void)out;
  switch (kn__pw_info(ctx->call->op->id)->code) {
    KN__PW_FORMULAS(DERIV_CASE)
  default: return kn__pw_no_deriv(ctx);
  }
}

kn_status kn__bw_unary(kn__bwctx *ctx) {
  if (!NEED(0)) return KN_OK;
  return set_grad(ctx, 0, unary_grad(ctx, ctx->grad_outputs[0]));
}

/* ---- backward helper ops (their own rules: double backward) ------------------------- */

kn_status kn__bw_threshold_backward(kn__bwctx *ctx) {
  kn_tensor *gg = ctx->grad_outputs[0];
  kn_status st = KN_OK;
  if (NEED(0)) st = set_grad(ctx, 0, kn_threshold_backward(gg, IN(1), arg_scalar(ctx, 2)));
  if (st == KN_OK && NEED(1)) st = set_grad(ctx, 1, zeros_like(IN(1)));
  return st;
}

kn_status kn__bw_sigmoid_backward(kn__bwctx *ctx) {
  kn_tensor *gg = ctx->grad_outputs[0], *g = IN(0), *y = IN(1);
  kn_status st = KN_OK;
  if (NEED(0)) st = set_grad(ctx, 0, kn_sigmoid_backward(gg, y));
  if (st == KN_OK && NEED(1)) { /* gg * g * (1 - 2y) */
    kn_tensor *d = kn_add_scalar(kn_mul_scalar(y, kn_int(-2)), kn_int(1));
    st = set_grad(ctx, 1, kn_mul(kn_mul(gg, g), d));
  }
  return st;
}

kn_status kn__bw_tanh_backward(kn__bwctx *ctx) {
  kn_tensor *gg = ctx->grad_outputs[0], *g = IN(0), *y = IN(1);
  kn_status st = KN_OK;
  if (NEED(0)) st = set_grad(ctx, 0, kn_tanh_backward(gg, y));
  if (st == KN_OK && NEED(1)) /* -2 gg g y */
    st = set_grad(ctx, 1, kn_mul_scalar(kn_mul(kn_mul(gg, g), y), kn_int(-2)));
  return st;
}

kn_status kn__bw_gelu_backward(kn__bwctx *ctx) {
  kn_tensor *gg = ctx->grad_outputs[0], *g = IN(0), *x = IN(1);
  bool th = ctx->call->args[2].u.i == 1;
  kn_status st = KN_OK;
  if (NEED(0)) st = set_grad(ctx, 0, kn_gelu_backward(gg, x, th ? KN_GELU_TANH : KN_GELU_NONE));
  if (st == KN_OK && NEED(1))
    st = set_grad(ctx, 1, kn_mul(kn_mul(gg, g), th ? gelu2_tanh(x) : gelu2_exact(x)));
  return st;
}

/* ---- where, copies, fills ----------------------------------------------------------------- */

kn_status kn__bw_where(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0], *cond = IN(0), *z = zero_scalar(g);
  kn_status st = KN_OK;
  if (NEED(1)) st = set_grad(ctx, 1, kn_where(cond, g, z));
  if (st == KN_OK && NEED(2)) st = set_grad(ctx, 2, kn_where(cond, z, g));
  return st;
}

kn_status kn__bw_copy_(kn__bwctx *ctx) {
  kn_tensor *g = ctx->grad_outputs[0];
  kn_status st = KN_OK;
  if (NEED(0)) st = set_grad(ctx, 0, zeros_like(g));
  if (st == KN_OK && NEED(1)) st = set_grad(ctx, 1, g);
  return st;
}

kn_status kn__bw_clone(kn__bwctx *ctx) { return set_grad(ctx, 0, ctx->grad_outputs[0]); }
kn_status kn__bw_to_copy(kn__bwctx *ctx) { return set_grad(ctx, 0, ctx->grad_outputs[0]); }
kn_status kn__bw_fill_(kn__bwctx *ctx) { return set_grad(ctx, 0, zeros_like(ctx->grad_outputs[0])); }
