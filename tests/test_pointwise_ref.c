/*
** test_pointwise_ref.c: the pointwise family against torch 1.13 references
** (tests/fixtures/pointwise.json, written by tools/ref/gen_pointwise.py):
** output dtypes, shapes and values for every dtype combination recorded, and
** the gradients of sum(output) for float64 inputs.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

/* A JSON number as a kiln scalar: integers stay integers (PyTorch's scalar
** promotion depends on it). */
static kn_scalar scalar_of(const json_t *v) {
  if (json_is_integer(v)) return kn_int(json_integer_value(v));
  if (json_is_boolean(v)) return kn_bool(json_is_true(v));
  return kn_float(json_number_value(v));
}

static kn_scalar param_scalar(const json_t *c, const char *key) {
  return scalar_of(kn_fixture_param(c, key));
}

typedef kn_tensor *(*unary)(kn_tensor *);
typedef kn_tensor *(*binary)(kn_tensor *, kn_tensor *);
typedef kn_tensor *(*with_scalar)(kn_tensor *, kn_scalar);

static const struct { const char *name; unary f; } unaries[] = {
  {"neg", kn_neg}, {"abs", kn_abs}, {"sgn", kn_sgn}, {"exp", kn_exp}, {"exp2", kn_exp2},
  {"expm1", kn_expm1}, {"sin", kn_sin}, {"cos", kn_cos}, {"tan", kn_tan}, {"tanh", kn_tanh},
  {"sigmoid", kn_sigmoid}, {"relu", kn_relu}, {"silu", kn_silu}, {"erf", kn_erf},
  {"round", kn_round}, {"trunc", kn_trunc}, {"floor", kn_floor}, {"ceil", kn_ceil},
  {"log", kn_log}, {"log2", kn_log2}, {"log1p", kn_log1p}, {"sqrt", kn_sqrt},
  {"rsqrt", kn_rsqrt}, {"reciprocal", kn_reciprocal}, {"logical_not", kn_logical_not},
};
static const struct { const char *name; binary f; } binaries[] = {
  {"add", kn_add}, {"sub", kn_sub}, {"mul", kn_mul}, {"div", kn_div},
  {"maximum", kn_maximum}, {"minimum", kn_minimum}, {"pow", kn_pow}, {"eq", kn_eq},
  {"ne", kn_ne}, {"lt", kn_lt}, {"le", kn_le}, {"gt", kn_gt}, {"ge", kn_ge},
  {"logical_and", kn_logical_and}, {"logical_or", kn_logical_or},
};
static const struct { const char *name; with_scalar f; } scalars[] = {
  {"add_scalar", kn_add_scalar}, {"sub_scalar", kn_sub_scalar}, {"mul_scalar", kn_mul_scalar},
  {"div_scalar", kn_div_scalar}, {"pow_scalar", kn_pow_scalar}, {"eq_scalar", kn_eq_scalar},
  {"ne_scalar", kn_ne_scalar}, {"lt_scalar", kn_lt_scalar}, {"le_scalar", kn_le_scalar},
  {"gt_scalar", kn_gt_scalar}, {"ge_scalar", kn_ge_scalar},
};

#define FIND(table, op) \
  for (size_t i_ = 0; i_ < sizeof table / sizeof *table; i_++) if (!strcmp(table[i_].name, op))

/* Run the case's op on its inputs. NULL (with a message) if unknown. */
static kn_tensor *run(const json_t *c, kn_tensor **in) {
  const char *op = kn_fixture_op(c);
  FIND(unaries, op) return unaries[i_].f(in[0]);
  FIND(scalars, op) return scalars[i_].f(in[0], param_scalar(c, "s"));
  if (kn_fixture_param(c, "alpha")) {
    kn_scalar al = param_scalar(c, "alpha");
    if (!strcmp(op, "add")) return kn_add_scaled(in[0], in[1], al);
    if (!strcmp(op, "sub")) return kn_sub_scaled(in[0], in[1], al);
  }
  FIND(binaries, op) return binaries[i_].f(in[0], in[1]);
  if (!strcmp(op, "div_mode")) {
    const json_t *m = kn_fixture_param(c, "mode");
    bool fl = m && !strcmp(json_string_value(m), "floor");
    return kn_div_mode(in[0], in[1], fl ? KN_ROUND_FLOOR : KN_ROUND_TRUNC);
  }
  if (!strcmp(op, "gelu")) {
    const json_t *a = kn_fixture_param(c, "approximate");
    bool th = a && !strcmp(json_string_value(a), "tanh");
    return kn_gelu(in[0], th ? KN_GELU_TANH : KN_GELU_NONE);
  }
  if (!strcmp(op, "scalar_pow")) return kn_scalar_pow(param_scalar(c, "s"), in[0]);
  if (!strcmp(op, "where")) return kn_where(in[0], in[1], in[2]);
  if (!strcmp(op, "clamp")) {
    kn_scalar lo, hi;
    bool has_lo = kn_fixture_param(c, "min") != NULL, has_hi = kn_fixture_param(c, "max") != NULL;
    if (has_lo) lo = param_scalar(c, "min");
    if (has_hi) hi = param_scalar(c, "max");
    return kn_clamp(in[0], has_lo ? &lo : NULL, has_hi ? &hi : NULL);
  }
  if (!strcmp(op, "to")) {
    kn_dtype dt;
    cr_assert(kn_fixture_dtype(json_string_value(kn_fixture_param(c, "dtype")), &dt));
    return kn_to(in[0], dt);
  }
  cr_assert_fail("%s: unknown op %s", kn_fixture_name(c), op);
  return NULL;
}

/* Tolerance by output dtype: half types carry 11 / 8 bits; float32 allows
** a few ulp between libm and torch's vectorised functions. */
static double rtol_for(kn_dtype dt) {
  switch (dt) {
  case KN_FLOAT16: return 2e-3;
  case KN_BFLOAT16: return 1.6e-2;
  case KN_FLOAT32: return 2e-6;
  default: return 1e-12;
  }
}

static void check_case(const json_t *c) {
  const char *name = kn_fixture_name(c);
  int n = kn_fixture_ninputs(c);
  kn_tensor *in[4] = {NULL};
  for (int i = 0; i < n && i < 4; i++) {
    in[i] = kn_fixture_tensor(kn_fixture_input(c, i));
    cr_assert_not_null(in[i], "%s: input %d: %s", name, i, kn_last_error());
  }
  kn_tensor *out = run(c, in);
  cr_assert_not_null(out, "%s: %s", name, kn_last_error());
  char why[512];
  const json_t *want = kn_fixture_output(c, 0);
  double rtol = rtol_for(kn_tensor_dtype(out));
  cr_assert(kn_fixture_close(out, want, rtol, rtol * 1e-1, why, sizeof why), "%s: %s", name, why);
  bool any_grad = false;
  for (int i = 0; i < n; i++) any_grad = any_grad || kn_fixture_grad(c, i);
  if (!any_grad) return;
  kn_tensor *ones = kn_ones(kn_ndim(out), kn_sizes(out), kn_tensor_dtype(out));
  cr_assert_eq(kn_backward(out, ones), KN_OK, "%s: backward: %s", name, kn_last_error());
  for (int i = 0; i < n; i++) {
    const json_t *g = kn_fixture_grad(c, i);
    if (!g) continue;
    cr_assert_not_null(kn_grad(in[i]), "%s: no gradient for input %d", name, i);
    cr_assert(kn_fixture_close(kn_grad(in[i]), g, 1e-10, 1e-12, why, sizeof why),
              "%s: grad %d: %s", name, i, why);
  }
}

Test(pointwise_ref, every_case_matches_torch) {
  kn_fixture *f = kn_fixture_load_named("pointwise.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  int64_t live0 = kn_live_tensors();
  int n = kn_fixture_ncases(f);
  cr_assert_gt(n, 250);
  for (int i = 0; i < n; i++) {
    kn_scope_begin();
    check_case(kn_fixture_case(f, i));
    kn_scope_end();
  }
  cr_assert_eq(kn_live_tensors(), live0);
  kn_fixture_free(f);
}
