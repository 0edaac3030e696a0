/*
** test_pointwise_cvt16.c: element formulas on bfloat16/float16 operands
** read and write them block by block (ops/pointwise_cvt16.c). The expected
** result is the second way of computing the same thing: the inputs widened
** to float32 tensors explicitly (exact), the float32 op, and the float32
** result rounded once to the 16-bit dtype: equal bit for bit. Shapes with
** rows longer than a block and tails, broadcast rows and scalars, transposed
** (strided) 16-bit views, mixed 16-bit/float32 operands, in-place updates
** and tensors large enough to run on several threads.
*/
#include <criterion/criterion.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

static int64_t live0;
static void setup(void) { live0 = kn_live_tensors(); kn_scope_begin(); }
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(pw16, .init = setup, .fini = teardown);

static kn_tensor *rnd(kn_dtype dt, int64_t r, int64_t c) {
  return kn_to(kn_randn(2, (int64_t[]){r, c}, NULL, KN_FLOAT32), dt);
}

static kn_tensor *f32(kn_tensor *t) { return kn_to(t, KN_FLOAT32); }

static void same(kn_tensor *got, kn_tensor *want, const char *what, kn_dtype dt) {
  char why[256];
  cr_assert(got && want, "%s: %s", what, kn_last_error());
  cr_assert_eq(kn_tensor_dtype(got), kn_tensor_dtype(want), "%s", what);
  cr_assert(kn_tensors_close(got, want, 0, 0, true, why, sizeof why), "%s %s: %s", what,
            kn_dtype_name(dt), why);
}

/* Unary and binary formulas, 16-bit in and out, against float32 then one
** rounding. */
static void check_ops(kn_dtype dt, int64_t R, int64_t C) {
  kn_tensor *a = rnd(dt, R, C), *b = rnd(dt, R, C), *row = rnd(dt, 1, C);
  kn_tensor *a32 = f32(a), *b32 = f32(b), *row32 = f32(row);
  same(kn_add(a, b), kn_to(kn_add(a32, b32), dt), "add", dt);
  same(kn_sub_scaled(a, b, kn_float(0.5)), kn_to(kn_sub_scaled(a32, b32, kn_float(0.5)), dt),
       "sub alpha", dt);
  same(kn_mul(a, row), kn_to(kn_mul(a32, row32), dt), "mul broadcast row", dt);
  same(kn_div_scalar(a, kn_float(3)), kn_to(kn_div_scalar(a32, kn_float(3)), dt), "div scalar",
       dt);
  same(kn_relu(a), kn_to(kn_relu(a32), dt), "relu", dt);
  same(kn_exp(a), kn_to(kn_exp(a32), dt), "exp (vector math)", dt);
  same(kn_sigmoid(a), kn_to(kn_sigmoid(a32), dt), "sigmoid", dt);
  same(kn_pow_scalar(a, kn_float(2)), kn_to(kn_pow_scalar(a32, kn_float(2)), dt), "pow 2", dt);
  same(kn_threshold_backward(a, b, kn_float(0)),
       kn_to(kn_threshold_backward(a32, b32, kn_float(0)), dt), "threshold_backward", dt);
  /* a transposed 16-bit view: strided loads */
  kn_tensor *sq = rnd(dt, C, C), *sq32 = f32(sq);
  same(kn_add(kn_t(sq), sq), kn_to(kn_add(kn_t(sq32), sq32), dt), "add transposed", dt);
  same(kn_tanh(kn_t(sq)), kn_to(kn_tanh(kn_t(sq32)), dt), "tanh transposed", dt);
}

Test(pw16, formulas_match_float32_rounded_once) {
  for (int i = 0; i < 2; i++) {
    kn_dtype dt = i ? KN_FLOAT16 : KN_BFLOAT16;
    check_ops(dt, 3, 517);   /* two blocks of 256 and a tail, one thread */
    check_ops(dt, 700, 300); /* rows on several threads */
  }
}

/* Mixed 16-bit and float32 operands promote to float32 (the residual add of
** a bfloat16 layer output to a float32 input): the 16-bit side is widened
** exactly, the float32 result is not rounded. */
Test(pw16, mixed_operands_give_float32) {
  for (int i = 0; i < 2; i++) {
    kn_dtype dt = i ? KN_FLOAT16 : KN_BFLOAT16;
    kn_tensor *a = rnd(dt, 64, 300), *x = rnd(KN_FLOAT32, 64, 300), *row = rnd(dt, 1, 300);
    same(kn_add(x, a), kn_add(x, f32(a)), "add f32 + 16-bit", dt);
    same(kn_mul(a, x), kn_mul(f32(a), x), "mul 16-bit * f32", dt);
    same(kn_sub(x, row), kn_sub(x, f32(row)), "sub broadcast 16-bit row", dt);
    kn_tensor *c = rnd(dt, 300, 64);
    same(kn_mul(kn_t(c), x), kn_mul(kn_t(f32(c)), x), "strided 16-bit view", dt);
  }
}

/* In place on a 16-bit tensor (an optimizer update of 16-bit weights), with
** a float32 and a 16-bit operand, and a float32 tensor updated by a 16-bit
** one: the same values as the out-of-place float32 computation. */
Test(pw16, in_place_updates) {
  for (int i = 0; i < 2; i++) {
    kn_dtype dt = i ? KN_FLOAT16 : KN_BFLOAT16;
    kn_tensor *w = rnd(dt, 40, 600), *g = rnd(KN_FLOAT32, 40, 600), *h = rnd(dt, 40, 600);
    kn_tensor *sum = kn_to(kn_add(f32(w), g), dt); /* each in-place op rounds */
    kn_tensor *want = kn_to(kn_mul(f32(sum), f32(h)), dt);
    cr_assert_eq(kn_add_(w, g), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_mul_(w, h), KN_OK, "%s", kn_last_error());
    same(w, want, "add_ then mul_", dt);
    /* in place through a transposed 16-bit view: strided rounding stores */
    kn_tensor *m = rnd(dt, 300, 300), *m0 = kn_clone(m), *d = rnd(dt, 300, 300);
    cr_assert_eq(kn_add_(kn_t(m), d), KN_OK, "%s", kn_last_error());
    same(m, kn_to(kn_add(f32(m0), kn_t(f32(d))), dt), "add_ into a transposed view", dt);
    kn_tensor *x = rnd(KN_FLOAT32, 40, 600), *x0 = kn_clone(x);
    cr_assert_eq(kn_add_(x, h), KN_OK, "%s", kn_last_error());
    same(x, kn_add(x0, f32(h)), "float32 add_ of 16-bit", dt);
  }
}
