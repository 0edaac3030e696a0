/*
** ops/nn_mm_grad.c: derivative rules of mm, bmm, addmm, dot and mv.
** Written with public ops only (so they run under tracing too, and are
** themselves differentiable: second order works through them):
**   mm:    dA = g @ B^T,            dB = A^T @ g
**   bmm:   the same per batch with transpose(1, 2)
**   addmm: dself = sum_to_size(beta * g), dA = alpha * g @ B^T, dB = alpha * A^T @ g
**   dot:   da = g * b, db = g * a (as b[:, None] @ g[None]);
**   mv:    dA = g[:, None] @ v[None, :], dv = A^T @ g
** Layouts: a matrix gradient comes out in its operand's layout, as in
** PyTorch. For a column-major operand (strides (1, rows), such as the W^T
** that linear multiplies by) the product is computed transposed, e.g.
** dB = (g^T @ A)^T, so that the gradient is column-major as well and the
** transpose's backward hands the parameter a contiguous gradient. Sizes and
** strides are read as symbolic ints (ops/symsize.h).
*/
#include "core/error.h"
#include "kiln/ops.h"
#include "ops/nn.h"
#include "ops/symsize.h"

static kn_tensor *tr(kn_tensor *x) { return kn_transpose(x, -2, -1); }

static bool is_one(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f == 1.0 : s.kind == KN_SCALAR_INT ? s.v.i == 1 : s.v.b;
}

/* x * s, skipping the multiplication when s is 1 (NULL passes through). */
static kn_tensor *scaled(kn_tensor *x, kn_scalar s) {
  return !x || is_one(s) ? x : kn_mul_scalar(x, s);
}

/* Stored column-major: strides (1, rows) (PyTorch's test for the layout it
** preserves in mm's backward). */
static bool col_major(const kn_tensor *t) {
  if (t->ndim != 2) return false;
  kn_sym sz[2], st[2], one = kn__sym_const(1);
  kn__tensor_symsizes(t, sz);
  kn__tensor_symstrides(t, st);
  return kn__sym_guard_eq(st[0], one) && kn__sym_guard_eq(st[1], sz[0]) &&
         kn__sym_guard_lt(one, sz[0]) && kn__sym_guard_lt(one, sz[1]);
}

/* d mat1 = g @ mat2^T, in mat1's layout. */
static kn_tensor *grad_mat1(kn_tensor *g, kn_tensor *mat1, kn_tensor *mat2) {
  return col_major(mat1) ? tr(kn_mm(mat2, tr(g))) : kn_mm(g, tr(mat2));
}

/* d mat2 = mat1^T @ g, in mat2's layout. */
static kn_tensor *grad_mat2(kn_tensor *g, kn_tensor *mat1, kn_tensor *mat2) {
  return col_major(mat2) ? tr(kn_mm(tr(g), mat1)) : kn_mm(tr(mat1), g);
}

static kn_status done(kn__bwctx *ctx) {
  for (int k = 0; k < ctx->ninputs; k++)
    if (ctx->needs_input_grad[k] && !ctx->grad_inputs[k])
      return kn_last_status() != KN_OK ? kn_last_status() : KN_EINTERNAL;
  return KN_OK;
}

kn_status kn__bw_mm(kn__bwctx *ctx) {
  kn_tensor *a = kn__call_input(ctx->call, 0), *b = kn__call_input(ctx->call, 1);
  kn_tensor *g = ctx->grad_outputs[0];
  if (ctx->needs_input_grad[0]) ctx->grad_inputs[0] = grad_mat1(g, a, b);
  if (ctx->needs_input_grad[1]) ctx->grad_inputs[1] = grad_mat2(g, a, b);
  return done(ctx);
}

kn_status kn__bw_bmm(kn__bwctx *ctx) {
  kn_tensor *a = kn__call_input(ctx->call, 0), *b = kn__call_input(ctx->call, 1);
  kn_tensor *g = ctx->grad_outputs[0];
  if (ctx->needs_input_grad[0]) ctx->grad_inputs[0] = kn_bmm(g, tr(b));
  if (ctx->needs_input_grad[1]) ctx->grad_inputs[1] = kn_bmm(tr(a), g);
  return done(ctx);
}

kn_status kn__bw_addmm(kn__bwctx *ctx) {
  kn_tensor *s = kn__call_input(ctx->call, 0);
  kn_tensor *a = kn__call_input(ctx->call, 1), *b = kn__call_input(ctx->call, 2);
  kn_scalar beta = ctx->call->args[3].u.s, alpha = ctx->call->args[4].u.s;
  kn_tensor *g = ctx->grad_outputs[0];
  if (ctx->needs_input_grad[0])
    ctx->grad_inputs[0] = kn__sum_to_like(scaled(g, beta), s);
  if (ctx->needs_input_grad[1]) ctx->grad_inputs[1] = scaled(grad_mat1(g, a, b), alpha);
  if (ctx->needs_input_grad[2]) ctx->grad_inputs[2] = scaled(grad_mat2(g, a, b), alpha);
  return done(ctx);
}

kn_status kn__bw_dot(kn__bwctx *ctx) {
  kn_tensor *a = kn__call_input(ctx->call, 0), *b = kn__call_input(ctx->call, 1);
  kn_tensor *g = ctx->grad_outputs[0];
  /* g is 0-d: g * b written as the matrix-vector product b[:, None] @ g[None] */
  kn_tensor *g1 = kn_unsqueeze(g, 0);
  if (ctx->needs_input_grad[0]) ctx->grad_inputs[0] = kn_mv(kn_unsqueeze(b, 1), g1);
  if (ctx->needs_input_grad[1]) ctx->grad_inputs[1] = kn_mv(kn_unsqueeze(a, 1), g1);
  return done(ctx);
}

kn_status kn__bw_mv(kn__bwctx *ctx) {
  kn_tensor *a = kn__call_input(ctx->call, 0), *v = kn__call_input(ctx->call, 1);
  kn_tensor *g = ctx->grad_outputs[0];
  if (ctx->needs_input_grad[0]) ctx->grad_inputs[0] = kn_mm(kn_unsqueeze(g, 1), kn_unsqueeze(v, 0));
  if (ctx->needs_input_grad[1]) ctx->grad_inputs[1] = kn_mv(tr(a), g);
  return done(ctx);
}
