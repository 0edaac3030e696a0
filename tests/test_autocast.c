/*
** test_autocast.c: autocast (kiln/autocast.h) against torch 1.13's CPU
** autocast (tests/fixtures/autocast.json from tools/ref/gen_autocast.py):
** which dtype each op ran in for float32, bfloat16 and mixed inputs, the
** policy names, and the values torch computed under autocast; against
** kiln's own float32 results within the bfloat16 tolerance; the region
** stack (nesting, errors, per thread); gradients through the casts.
**
** Tolerances: a bfloat16 result holds 8 significant bits, so one rounding
** is a relative error up to 2^-8; inputs rounded to bfloat16 and a float32
** accumulation over K terms give a few roundings more: results are compared
** with rtol 2^-6 and atol 2^-6 (scaled by the largest magnitude of the
** reference, since a sum of rounded terms can cancel).
*/
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

static int64_t live0;
static void setup(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_autocast_enabled(), false);
  cr_assert_eq(kn_live_tensors(), live0);
}
TestSuite(autocast, .init = setup, .fini = teardown);

#define TOL (1.0 / 64)

static kn_tensor *target(const json_t *c) {
  int64_t v[8];
  int n = kn_fixture_param_ints(c, "target", v, 8);
  kn_tensor *t = kn_empty(1, (int64_t[]){n}, KN_INT64);
  for (int i = 0; i < n; i++) ((int64_t *)kn_data(t))[i] = v[i];
  return t;
}

/* Run fixture case c on inputs in[0..n) with kiln's public ops. */
static kn_tensor *run(const json_t *c, kn_tensor **in) {
  const char *name = kn_fixture_name(c);
  if (!strcmp(name, "mm")) return kn_mm(in[0], in[1]);
  if (!strcmp(name, "bmm")) return kn_bmm(in[0], in[1]);
  if (!strcmp(name, "addmm")) return kn_addmm(in[0], in[1], in[2], kn_int(1), kn_int(1));
  if (!strcmp(name, "linear")) return kn_linear(in[0], in[1], in[2]);
  if (!strcmp(name, "matmul")) return kn_matmul(in[0], in[1]);
  if (!strcmp(name, "conv2d")) return kn_conv2d(in[0], in[1], in[2], NULL, NULL, NULL, 1);
  if (!strcmp(name, "dot")) return kn_dot(in[0], in[1]);
  if (!strcmp(name, "mv")) return kn_mv(in[0], in[1]);
  if (!strcmp(name, "prod")) return kn_prod(in[0]);
  if (!strcmp(name, "prod_dim")) return kn_prod_dim(in[0], 1, false);
  if (!strcmp(name, "mse_loss")) return kn_mse_loss(in[0], in[1], KN_REDUCTION_MEAN);
  if (!strcmp(name, "l1_loss")) return kn_l1_loss(in[0], in[1], KN_REDUCTION_MEAN);
  if (!strcmp(name, "binary_cross_entropy"))
    return kn_binary_cross_entropy(in[0], in[1], NULL, KN_REDUCTION_MEAN);
  if (!strcmp(name, "nll_loss"))
    return kn_nll_loss(in[0], target(c), NULL, KN_REDUCTION_MEAN, -100);
  if (!strcmp(name, "cross_entropy"))
    return kn_cross_entropy(in[0], target(c), NULL, KN_REDUCTION_MEAN, -100, 0.0);
  if (!strcmp(name, "cat")) return kn_cat(in, 2, 0);
  if (!strcmp(name, "stack")) return kn_stack(in, 2, 0);
  if (!strcmp(name, "add")) return kn_add(in[0], in[1]);
  if (!strcmp(name, "exp")) return kn_exp(in[0]);
  if (!strcmp(name, "softmax")) return kn_softmax(in[0], 1);
  if (!strcmp(name, "logsumexp")) return kn_logsumexp(in[0], (int64_t[]){1}, 1, false);
  if (!strcmp(name, "vector_norm")) return kn_linalg_vector_norm(in[0], 2, (int64_t[]){1}, 1, false);
  if (!strcmp(name, "log_softmax")) return kn_log_softmax(in[0], 1);
  if (!strcmp(name, "sum")) return kn_sum(in[0]);
  if (!strcmp(name, "mean")) return kn_mean(in[0]);
  if (!strcmp(name, "layer_norm"))
    return kn_layer_norm(in[0], 1, (int64_t[]){5}, NULL, NULL, 1e-5);
  if (!strcmp(name, "relu")) return kn_relu(in[0]);
  if (!strcmp(name, "where")) return kn_where(kn_gt_scalar(in[0], kn_int(0)), in[0], in[1]);
  cr_assert_fail("unknown case %s", name);
  return NULL;
}

static const char *const COMBOS[] = {"float32", "bfloat16", "mixed"};

/* The fixture's inputs of case c as the combo asks: float32, all bfloat16,
** or the first float32 and the others bfloat16. */
static int inputs(const json_t *c, int combo, kn_tensor **in) {
  int n = kn_fixture_ninputs(c);
  for (int k = 0; k < n; k++) {
    in[k] = kn_fixture_tensor(kn_fixture_input(c, k));
    cr_assert_not_null(in[k], "%s", kn_last_error());
    if (combo == 1 || (combo == 2 && k > 0)) in[k] = kn_to(in[k], KN_BFLOAT16);
  }
  return n;
}

Test(autocast, ops_run_in_the_dtypes_torch_1_13_runs_them_in) {
  kn_fixture *f = kn_fixture_load_named("autocast.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  int checked = 0;
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    const json_t *c = kn_fixture_case(f, i);
    const json_t *dts = kn_fixture_param(c, "dtypes");
    const char *pol = json_string_value(kn_fixture_param(c, "policy"));
    cr_assert_str_eq(kn_autocast_policy(kn_fixture_op(c)), pol, "%s", kn_fixture_name(c));
    for (int combo = 0; combo < 3; combo++) {
      const char *want = json_string_value(json_object_get(dts, COMBOS[combo]));
      if (!strcmp(want, "error")) continue; /* torch refuses mixed dot/mv */
      kn_scope_begin();
      kn_tensor *in[4];
      inputs(c, combo, in);
      cr_assert_eq(kn_autocast_begin(KN_BFLOAT16), KN_OK);
      kn_tensor *y = run(c, in);
      kn_autocast_end();
      cr_assert_not_null(y, "%s %s: %s", kn_fixture_name(c), COMBOS[combo], kn_last_error());
      cr_assert_str_eq(kn_dtype_name(kn_tensor_dtype(y)), want, "%s with %s inputs",
                       kn_fixture_name(c), COMBOS[combo]);
      checked++;
      kn_scope_end();
    }
  }
  cr_assert_geq(checked, 70);
  kn_fixture_free(f);
}

/* max |x| of a tensor (as float64) */
static double amax(kn_tensor *t) {
  double v;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_to(t, KN_FLOAT64)), NULL, 0, false), &v), KN_OK);
  return v;
}

Test(autocast, values_match_torch_and_float32_within_bf16_tolerance) {
  kn_fixture *f = kn_fixture_load_named("autocast.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    const json_t *c = kn_fixture_case(f, i);
    kn_scope_begin();
    kn_tensor *in[4];
    inputs(c, 0, in);
    kn_tensor *ref = run(c, in); /* kiln in float32 */
    kn_autocast_begin(KN_BFLOAT16);
    kn_tensor *y = run(c, in);
    kn_autocast_end();
    cr_assert(y && ref, "%s: %s", kn_fixture_name(c), kn_last_error());
    double atol = TOL * (amax(ref) > 1 ? amax(ref) : 1);
    char why[256];
    cr_assert(kn_fixture_close(y, kn_fixture_output(c, 0), TOL, atol, why, sizeof why),
              "%s vs torch: %s", kn_fixture_name(c), why);
    kn_tensor *y32 = kn_to(y, KN_FLOAT32);
    cr_assert(kn_tensors_close(y32, ref, TOL, atol, true, why, sizeof why), "%s vs float32: %s",
              kn_fixture_name(c), why);
    kn_scope_end();
  }
  kn_fixture_free(f);
}

Test(autocast, regions_nest_and_float32_turns_autocast_off) {
  cr_assert_eq(kn_autocast_dtype(), KN_FLOAT32);
  kn_tensor *a = kn_randn(2, (int64_t[]){3, 4}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(2, (int64_t[]){4, 2}, NULL, KN_FLOAT32);
  cr_assert_eq(kn_autocast_begin(KN_BFLOAT16), KN_OK);
  cr_assert_eq(kn_tensor_dtype(kn_mm(a, b)), KN_BFLOAT16);
  cr_assert_eq(kn_autocast_begin(KN_FLOAT32), KN_OK);
  cr_assert_not(kn_autocast_enabled());
  cr_assert_eq(kn_tensor_dtype(kn_mm(a, b)), KN_FLOAT32);
  cr_assert_eq(kn_autocast_begin(KN_FLOAT16), KN_OK);
  cr_assert_eq(kn_tensor_dtype(kn_mm(a, b)), KN_FLOAT16);
  cr_assert_eq(kn_autocast_end(), KN_OK);
  cr_assert_eq(kn_autocast_end(), KN_OK);
  cr_assert_eq(kn_autocast_dtype(), KN_BFLOAT16);
  cr_assert_eq(kn_tensor_dtype(kn_mm(a, b)), KN_BFLOAT16);
  /* float64 inputs are not cast (torch's is_eligible) */
  kn_tensor *a64 = kn_to(a, KN_FLOAT64), *b64 = kn_to(b, KN_FLOAT64);
  cr_assert_eq(kn_tensor_dtype(kn_mm(a64, b64)), KN_FLOAT64);
  cr_assert_eq(kn_autocast_end(), KN_OK);
  cr_assert_eq(kn_tensor_dtype(kn_mm(a, b)), KN_FLOAT32);
}

Test(autocast, bad_regions_are_errors) {
  cr_assert_eq(kn_autocast_end(), KN_ESTATE);
  cr_assert(strstr(kn_last_error(), "no autocast region is open"), "%s", kn_last_error());
  cr_assert_eq(kn_autocast_begin(KN_INT64), KN_EDTYPE);
  cr_assert(strstr(kn_last_error(), "expected dtype bfloat16, float16 or float32 (off), got int64"),
            "%s", kn_last_error());
  cr_assert_eq(kn_autocast_begin((kn_dtype)99), KN_EDTYPE);
  int n = 0;
  while (kn_autocast_begin(KN_BFLOAT16) == KN_OK) n++;
  cr_assert_eq(n, 64);
  cr_assert(strstr(kn_last_error(), "64 autocast regions are already open"), "%s",
            kn_last_error());
  while (n--) kn_autocast_end();
  cr_assert_null(kn_autocast_policy("no_such_op"));
  cr_assert_str_eq(kn_autocast_policy("add.Tensor"), "none");
}

static void *other_thread(void *arg) {
  *(bool *)arg = kn_autocast_enabled();
  return NULL;
}

Test(autocast, state_is_per_thread) {
  kn_autocast_begin(KN_BFLOAT16);
  bool seen = true;
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, other_thread, &seen), 0);
  pthread_join(th, NULL);
  kn_autocast_end();
  cr_assert_not(seen);
}

/* Gradients flow through the casts back to float32 leaves, and equal the
** float32 gradients within the bfloat16 tolerance. */
Test(autocast, gradients_reach_float32_leaves) {
  kn_tensor *x = kn_randn(2, (int64_t[]){8, 16}, NULL, KN_FLOAT32);
  kn_tensor *w = kn_randn(2, (int64_t[]){4, 16}, NULL, KN_FLOAT32);
  kn_tensor *bias = kn_randn(1, (int64_t[]){4}, NULL, KN_FLOAT32);
  kn_tensor *y = kn_empty(1, (int64_t[]){8}, KN_INT64);
  for (int i = 0; i < 8; i++) ((int64_t *)kn_data(y))[i] = i % 4;
  kn_tensor *g[2][2];
  for (int pass = 0; pass < 2; pass++) {
    kn_tensor *wl = kn_detach(w), *bl = kn_detach(bias);
    kn_set_requires_grad(wl, true);
    kn_set_requires_grad(bl, true);
    if (pass) kn_autocast_begin(KN_BFLOAT16);
    kn_tensor *h = kn_linear(x, wl, bl);
    kn_tensor *loss = kn_cross_entropy(h, y, NULL, KN_REDUCTION_MEAN, -100, 0.0);
    if (pass) {
      cr_assert_eq(kn_tensor_dtype(h), KN_BFLOAT16);
      cr_assert_eq(kn_tensor_dtype(loss), KN_FLOAT32);
      kn_autocast_end();
    }
    cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
    g[pass][0] = kn_grad(wl);
    g[pass][1] = kn_grad(bl);
    cr_assert_eq(kn_tensor_dtype(g[pass][0]), KN_FLOAT32);
    cr_assert_eq(kn_tensor_dtype(g[pass][1]), KN_FLOAT32);
    g[pass][0] = kn_clone(g[pass][0]);
    g[pass][1] = kn_clone(g[pass][1]);
  }
  char why[256];
  for (int k = 0; k < 2; k++)
    cr_assert(kn_tensors_close(g[1][k], g[0][k], 4 * TOL, TOL * amax(g[0][k]), true, why, sizeof why),
              "grad %d: %s", k, why);
}
