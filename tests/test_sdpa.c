/*
** test_sdpa.c: the fused scaled_dot_product_attention op (ops/nn_attention.c)
** against independent expectations: the unfused formula softmax(q k^T *
** scale + mask) @ v computed with kiln's other ops (forward and gradients),
** central finite differences (float64), torch fixtures
** (tests/fixtures/sdpa.json, tools/ref/gen_sdpa.py), the documented Philox
** dropout mask rebuilt here, and a compiled MultiheadAttention (inductor)
** against eager, whose generated code must call the fused kernels.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "kiln/kiln.h"
#include "support/files.h"
#include "support/fixture.h"
#include "support/gradcheck.h"
#include "tensor/random.h"

static kn_tensor *rnd(kn_generator *g, kn_dtype dt, int n, const int64_t *sizes, bool grad) {
  kn_tensor *t = kn_randn(n, sizes, g, dt);
  if (grad) kn_set_requires_grad(t, true);
  return t;
}

/* [L, S] bool, true where key j > query i (the causal mask's masked part). */
static kn_tensor *above_diag(int64_t l, int64_t s) {
  kn_tensor *j = kn_unsqueeze(kn_arange(kn_int(0), kn_int(s), kn_int(1)), 0);
  kn_tensor *i = kn_unsqueeze(kn_arange(kn_int(0), kn_int(l), kn_int(1)), 1);
  return kn_gt(j, i);
}

/* The unfused formula with kiln ops; keep: the dropout's 0/1 mask or NULL. */
static kn_tensor *reference(kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask,
                            bool causal, double scale, kn_tensor *keep, double p) {
  int nd = kn_ndim(q);
  kn_tensor *s = kn_mul_scalar(kn_matmul(q, kn_transpose(k, -2, -1)), kn_float(scale));
  if (mask && kn_tensor_dtype(mask) == KN_BOOL)
    s = kn_masked_fill(s, kn_logical_not(mask), kn_float(-INFINITY));
  else if (mask)
    s = kn_add(s, mask);
  if (causal)
    s = kn_masked_fill(s, above_diag(kn_size(q, nd - 2), kn_size(k, nd - 2)), kn_float(-INFINITY));
  kn_tensor *a = kn_softmax(s, -1);
  if (keep) a = kn_mul_scalar(kn_mul(a, keep), kn_float(1.0 / (1.0 - p)));
  return kn_matmul(a, v);
}

/* sum(out * g) differentiated for ins[0..n); grads into out[]. */
static void grads_of(kn_tensor *y, kn_tensor *g, kn_tensor **ins, int n, kn_tensor **out) {
  kn_tensor *loss = kn_sum(kn_mul(y, g));
  cr_assert_eq(kn_autograd_grad(&loss, 1, ins, n, NULL, true, false, false, out), KN_OK, "%s",
               kn_last_error());
}

static void expect_close(kn_tensor *got, kn_tensor *want, double tol, const char *what) {
  char why[256];
  cr_assert_not_null(got, "%s: %s", what, kn_last_error());
  cr_expect(kn_tensors_close(got, want, tol, tol, true, why, sizeof why), "%s: %s", what, why);
}

typedef struct shape_case {
  const char *name;
  int nd;
  int64_t lead[2], L, S, E, Ev;
  int mask; /* 0 none, 1 bool padding [.., 1, S] per batch, 2 float [L, S] with grad */
  bool causal;
} shape_case;

static const shape_case cases[] = {
    {"plain", 4, {2, 3}, 5, 7, 4, 6, 0, false},
    {"causal_square", 4, {2, 2}, 9, 9, 8, 8, 0, true},
    {"causal_l_lt_s", 4, {1, 2}, 4, 11, 3, 5, 0, true},
    {"causal_l_gt_s", 4, {1, 2}, 11, 4, 3, 5, 0, true},
    {"bool_padding", 4, {2, 2}, 6, 7, 4, 4, 1, false},
    {"float_mask_grad", 4, {2, 2}, 5, 7, 4, 3, 2, false},
    {"padding_and_float_causal", 4, {2, 1}, 7, 7, 4, 3, 2, true},
    {"blocks_not_pow2", 4, {1, 1}, 130, 200, 5, 3, 1, false},
    {"blocks_causal", 4, {1, 2}, 131, 131, 4, 4, 0, true},
    {"seq1", 4, {2, 2}, 1, 1, 4, 4, 0, false},
    {"seq1_causal_keys", 4, {1, 1}, 1, 5, 4, 4, 0, true},
    {"heads1_3d", 3, {3, 0}, 6, 5, 4, 2, 0, false},
};

static kn_tensor *make_mask(const shape_case *c, kn_generator *g, kn_dtype dt) {
  if (c->mask == 2) {
    kn_tensor *m = kn_randn(KN_SHAPE(c->L, c->S), g, dt);
    kn_set_requires_grad(m, true);
    return m;
  }
  if (c->mask != 1) return NULL;
  /* batch b keeps its first S - 1 - b keys (at least one) */
  int64_t ms[4] = {c->lead[0], 1, 1, c->S};
  kn_tensor *pos = kn_arange(kn_int(0), kn_int(c->S), kn_int(1));
  kn_tensor *lim = kn_sub_scalar(kn_mul_scalar(kn_arange(kn_int(0), kn_int(c->lead[0]),
                                                         kn_int(1)), kn_int(-1)),
                                 kn_int(1 - c->S));
  kn_tensor *keep = kn_lt(kn_unsqueeze(pos, 0), kn_unsqueeze(lim, 1)); /* [B, S] */
  return kn_reshape(keep, 4, ms);
}

static void run_case(const shape_case *c, kn_dtype dt, double tol) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(7);
  int nl = c->nd - 2;
  int64_t qs[4], ks[4], vs[4];
  for (int d = 0; d < nl; d++) qs[d] = ks[d] = vs[d] = c->lead[d];
  qs[nl] = c->L, qs[nl + 1] = c->E, ks[nl] = c->S, ks[nl + 1] = c->E;
  vs[nl] = c->S, vs[nl + 1] = c->Ev;
  kn_tensor *q = rnd(g, dt, c->nd, qs, true), *k = rnd(g, dt, c->nd, ks, true);
  kn_tensor *v = rnd(g, dt, c->nd, vs, true), *m = make_mask(c, g, dt);
  bool causal = c->causal && c->mask != 2;
  kn_tensor *mask = c->causal && c->mask == 2 /* both: fold the causal part into the mask */
                        ? kn_masked_fill(m, above_diag(c->L, c->S), kn_float(-INFINITY))
                        : m;
  kn_tensor *y = kn_scaled_dot_product_attention(q, k, v, mask, 0.0, causal, NULL, NULL);
  kn_tensor *want = reference(q, k, v, mask, causal, 1.0 / sqrt((double)c->E), NULL, 0);
  expect_close(y, want, tol, c->name);
  int64_t os[4];
  memcpy(os, qs, sizeof os);
  os[nl + 1] = c->Ev;
  kn_tensor *go = kn_randn(c->nd, os, g, dt);
  kn_tensor *ins[4] = {q, k, v, m}, *got[4], *exp_[4];
  int n = c->mask == 2 ? 4 : 3;
  grads_of(y, go, ins, n, got);
  grads_of(want, go, ins, n, exp_);
  const char *names[4] = {"grad query", "grad key", "grad value", "grad mask"};
  for (int i = 0; i < n; i++) {
    char what[96];
    snprintf(what, sizeof what, "%s: %s", c->name, names[i]);
    expect_close(got[i], exp_[i], tol, what);
  }
  kn_generator_free(g);
  kn_scope_end();
}

Test(sdpa, matches_the_unfused_formula_float64) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], KN_FLOAT64, 1e-10);
}

Test(sdpa, matches_the_unfused_formula_float32) {
  int prev = kn_get_num_threads();
  for (int nt = 1; nt <= 2; nt++) {
    cr_assert_eq(kn_set_num_threads(nt), KN_OK);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], KN_FLOAT32, 2e-4);
  }
  kn_set_num_threads(prev);
}

/* The output and the gradients of float32 attention, at 1 and at 2 threads:
** a head's rows are computed the same way whichever thread takes them (row
** blocks forward, heads backward), so the results are the same bit for bit.
** Key and query counts off the vector width and the blocks (tails). */
static void attention_at(int nt, kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *go,
                         kn_tensor **out) {
  cr_assert_eq(kn_set_num_threads(nt), KN_OK);
  out[0] = kn_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, NULL, NULL);
  kn_tensor *ins[3] = {q, k, v};
  grads_of(out[0], go, ins, 3, out + 1);
}

Test(sdpa, float32_results_do_not_depend_on_the_threads) {
  kn_scope_begin();
  int prev = kn_get_num_threads();
  kn_generator *g = kn_generator_new(5);
  kn_tensor *q = rnd(g, KN_FLOAT32, KN_SHAPE(2, 3, 131, 20), true);
  kn_tensor *k = rnd(g, KN_FLOAT32, KN_SHAPE(2, 3, 133, 20), true);
  kn_tensor *v = rnd(g, KN_FLOAT32, KN_SHAPE(2, 3, 133, 14), true);
  kn_tensor *go = kn_randn(KN_SHAPE(2, 3, 131, 14), g, KN_FLOAT32), *one[4], *two[4];
  attention_at(1, q, k, v, go, one);
  attention_at(2, q, k, v, go, two);
  const char *names[4] = {"output", "grad query", "grad key", "grad value"};
  for (int i = 0; i < 4; i++) {
    char why[256];
    cr_expect(kn_tensors_close(two[i], one[i], 0, 0, true, why, sizeof why),
              "%s at 2 threads against 1: %s", names[i], why);
  }
  kn_set_num_threads(prev);
  kn_generator_free(g);
  kn_scope_end();
}

/* q, k, v as MultiheadAttention makes them: heads split out of a packed
** [B, L, 3 * E] projection (strided, non-contiguous views). */
Test(sdpa, strided_head_views) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(3);
  int64_t B = 2, L = 70, H = 4, D = 8;
  kn_tensor *p = kn_randn(KN_SHAPE(B, L, 3 * H * D), g, KN_FLOAT32);
  kn_tensor *qkv[3];
  cr_assert_eq(kn_chunk(p, 3, -1, qkv, 3), 3);
  for (int i = 0; i < 3; i++) qkv[i] = kn_transpose(kn_unflatten(qkv[i], 2, KN_SHAPE(H, D)), 1, 2);
  cr_assert(!kn_is_contiguous(qkv[0]));
  double sc = 0.5;
  kn_tensor *y = kn_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], NULL, 0.0, true, &sc, NULL);
  kn_tensor *d[3];
  for (int i = 0; i < 3; i++) d[i] = kn_to(kn_contiguous(qkv[i]), KN_FLOAT64);
  expect_close(kn_to(y, KN_FLOAT64), reference(d[0], d[1], d[2], NULL, true, sc, NULL, 0), 1e-5,
               "strided heads");
  kn_generator_free(g);
  kn_scope_end();
}

/* ---- finite differences ----------------------------------------------------------------- */

typedef struct gc_cfg {
  bool causal;
  double p;
  uint64_t seed;
} gc_cfg;

static kn_tensor *gc_fn(kn_tensor *const *in, int n, void *ud) {
  const gc_cfg *c = ud;
  kn_generator *g = c->p > 0 ? kn_generator_new(c->seed) : NULL; /* same mask every call */
  kn_tensor *y = kn_scaled_dot_product_attention(in[0], in[1], in[2], n > 3 ? in[3] : NULL, c->p,
                                                 c->causal, NULL, g);
  kn_generator_free(g);
  return y;
}

static void gradcheck_case(gc_cfg cfg, bool fmask) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(11);
  kn_tensor *in[4] = {rnd(g, KN_FLOAT64, KN_SHAPE(1, 2, 3, 3), true),
                      rnd(g, KN_FLOAT64, KN_SHAPE(1, 2, 4, 3), true),
                      rnd(g, KN_FLOAT64, KN_SHAPE(1, 2, 4, 2), true),
                      fmask ? rnd(g, KN_FLOAT64, KN_SHAPE(3, 4), true) : NULL};
  char why[512];
  cr_expect(kn_gradcheck(gc_fn, in, fmask ? 4 : 3, &cfg, why, sizeof why), "%s", why);
  kn_generator_free(g);
  kn_scope_end();
}

Test(sdpa, gradients_match_finite_differences) {
  gradcheck_case((gc_cfg){false, 0, 0}, false);
  gradcheck_case((gc_cfg){true, 0, 0}, false);
  gradcheck_case((gc_cfg){false, 0, 0}, true);
  gradcheck_case((gc_cfg){false, 0.3, 99}, false); /* the backward regenerates the same mask */
}

/* ---- dropout ------------------------------------------------------------------------------- */

/* The documented mask: element n of the [heads, L, S] weights is kept when
** Philox(seed, first + n / 4) lane n % 4, as a float in [0, 1), is < 1 - p. */
static kn_tensor *philox_keep(uint64_t seed, uint64_t first, int64_t bh, int64_t l, int64_t s,
                              double p, kn_dtype dt) {
  int64_t n = bh * l * s;
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t e = 0; e < n; e++) {
    uint32_t r[4];
    kn__philox(seed, first + (uint64_t)(e / 4), r);
    v[e] = kn__u01_float(r[e % 4]) < (float)(1.0 - p) ? 1.0 : 0.0;
  }
  kn_tensor *t = kn_fixture_from_doubles(dt, KN_SHAPE(bh, l, s), v);
  free(v);
  return t;
}

Test(sdpa, dropout_uses_the_documented_philox_mask) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(5);
  kn_tensor *q = rnd(g, KN_FLOAT64, KN_SHAPE(3, 9, 4), true);
  kn_tensor *k = rnd(g, KN_FLOAT64, KN_SHAPE(3, 10, 4), true);
  kn_tensor *v = rnd(g, KN_FLOAT64, KN_SHAPE(3, 10, 5), true);
  kn_tensor *go = kn_randn(KN_SHAPE(3, 9, 5), g, KN_FLOAT64);
  double p = 0.4;
  kn_generator *dg = kn_generator_new(1234);
  kn_tensor *y = kn_scaled_dot_product_attention(q, k, v, NULL, p, false, NULL, dg);
  kn_tensor *keep = philox_keep(1234, 0, 3, 9, 10, p, KN_FLOAT64);
  double kept = 0;
  cr_assert_eq(kn_item_double(kn_mean(keep), &kept), KN_OK);
  cr_expect(kept > 0.45 && kept < 0.75, "kept fraction %g for p = %g", kept, p);
  kn_tensor *want = reference(q, k, v, NULL, false, 0.5, keep, p);
  expect_close(y, want, 1e-10, "dropout output");
  kn_tensor *ins[3] = {q, k, v}, *got[3], *exp_[3];
  grads_of(y, go, ins, 3, got);
  grads_of(want, go, ins, 3, exp_);
  for (int i = 0; i < 3; i++) expect_close(got[i], exp_[i], 1e-10, "dropout gradient");
  /* the next call draws the next mask; a generator with the same seed repeats the first */
  kn_tensor *y2 = kn_scaled_dot_product_attention(q, k, v, NULL, p, false, NULL, dg);
  char why[256];
  cr_expect(!kn_tensors_close(y2, y, 0, 0, true, why, sizeof why), "second draw repeated the mask");
  kn_generator *dg2 = kn_generator_new(1234);
  expect_close(kn_scaled_dot_product_attention(q, k, v, NULL, p, false, NULL, dg2), y, 0,
               "same seed, same output");
  kn_generator_free(dg2), kn_generator_free(dg), kn_generator_free(g);
  kn_scope_end();
}

/* ---- masks at the edges ------------------------------------------------------------------- */

Test(sdpa, a_row_without_keys_is_nan_as_softmax_gives) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(2);
  kn_tensor *q = kn_randn(KN_SHAPE(2, 3, 4), g, KN_FLOAT64), *k = kn_randn(KN_SHAPE(2, 5, 4), g, KN_FLOAT64);
  kn_tensor *v = kn_randn(KN_SHAPE(2, 5, 4), g, KN_FLOAT64);
  kn_tensor *m = kn_ones(KN_SHAPE(3, 5), KN_BOOL);
  kn_fill_(kn_select(m, 0, 1), kn_bool(false)); /* query 1 attends to nothing */
  kn_tensor *y = kn_scaled_dot_product_attention(q, k, v, m, 0.0, false, NULL, NULL);
  expect_close(y, reference(q, k, v, m, false, 0.5, NULL, 0), 1e-12, "masked row");
  cr_expect(isnan(kn_get(y, (int64_t[]){0, 1, 2})));
  cr_expect(!isnan(kn_get(y, (int64_t[]){0, 0, 2})));
  kn_generator_free(g);
  kn_scope_end();
}

/* ---- torch fixtures -------------------------------------------------------------------------- */

Test(sdpa, torch_fixtures) {
  kn_fixture *f = kn_fixture_load_named("sdpa.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    kn_scope_begin();
    const json_t *c = kn_fixture_case(f, i);
    int n = kn_fixture_ninputs(c);
    kn_tensor *in[4] = {NULL, NULL, NULL, NULL};
    for (int j = 0; j < n; j++) in[j] = kn_fixture_tensor(kn_fixture_input(c, j));
    const json_t *sc = kn_fixture_param(c, "scale");
    double scale = sc ? json_number_value(sc) : 0;
    kn_tensor *y = kn_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0,
                                                   kn_fixture_param_bool(c, "is_causal", false),
                                                   sc ? &scale : NULL, NULL);
    char why[256];
    cr_assert_not_null(y, "%s: %s", kn_fixture_name(c), kn_last_error());
    cr_expect(kn_fixture_close(y, kn_fixture_output(c, 0), 1e-10, 1e-10, why, sizeof why), "%s: %s",
              kn_fixture_name(c), why);
    kn_tensor *go = kn_fixture_tensor(kn_fixture_grad_output(c, 0)), *diff[4], *gr[4];
    int nd = 0;
    for (int j = 0; j < n; j++)
      if (kn_fixture_grad(c, j)) diff[nd++] = in[j];
    grads_of(y, go, diff, nd, gr);
    for (int j = 0, d = 0; j < n; j++)
      if (kn_fixture_grad(c, j))
        cr_expect(kn_fixture_close(gr[d++], kn_fixture_grad(c, j), 1e-9, 1e-10, why, sizeof why),
                  "%s: grad of input %d: %s", kn_fixture_name(c), j, why);
    kn_scope_end();
  }
  kn_fixture_free(f);
}

/* ---- errors -------------------------------------------------------------------------------- */

static void expect_err(kn_tensor *r, kn_status st, const char *needle) {
  cr_expect_null(r);
  cr_expect_eq(kn_last_status(), st, "status %d: %s", kn_last_status(), kn_last_error());
  cr_expect(strstr(kn_last_error(), needle) != NULL, "'%s' not in: %s", needle, kn_last_error());
}

Test(sdpa, bad_arguments_name_what_was_expected) {
  kn_scope_begin();
  kn_tensor *q = kn_zeros(KN_SHAPE(2, 3, 4), KN_FLOAT32), *k = kn_zeros(KN_SHAPE(2, 5, 4), KN_FLOAT32);
  kn_tensor *v = kn_zeros(KN_SHAPE(2, 5, 6), KN_FLOAT32);
  expect_err(kn_scaled_dot_product_attention(q, k, v, kn_ones(KN_SHAPE(3, 5), KN_BOOL), 0, true,
                                             NULL, NULL),
             KN_EINVAL, "Explicit attn_mask should not be set when is_causal=True");
  expect_err(kn_scaled_dot_product_attention(q, kn_zeros(KN_SHAPE(2, 5, 4), KN_FLOAT64), v, NULL,
                                             0, false, NULL, NULL),
             KN_EDTYPE, "key.dtype: torch.float64");
  expect_err(kn_scaled_dot_product_attention(q, kn_zeros(KN_SHAPE(2, 5, 3), KN_FLOAT32), v, NULL,
                                             0, false, NULL, NULL),
             KN_ESHAPE, "same embedding size, found 4 and 3");
  expect_err(kn_scaled_dot_product_attention(q, k, kn_zeros(KN_SHAPE(2, 6, 6), KN_FLOAT32), NULL,
                                             0, false, NULL, NULL),
             KN_ESHAPE, "same sequence length, found 5 and 6");
  expect_err(kn_scaled_dot_product_attention(q, k, v, kn_ones(KN_SHAPE(4, 5), KN_BOOL), 0, false,
                                             NULL, NULL),
             KN_ESHAPE, "not broadcastable to the attention weights [..., 3, 5]");
  expect_err(kn_scaled_dot_product_attention(q, k, v, kn_ones(KN_SHAPE(3, 5), KN_INT64), 0, false,
                                             NULL, NULL),
             KN_EDTYPE, "attn_mask dtype to be bool or to match query dtype (torch.float32), but got "
                        "attn_mask.dtype: torch.int64");
  expect_err(kn_scaled_dot_product_attention(q, k, v, NULL, 1.0, false, NULL, NULL), KN_EINVAL,
             "dropout probability has to be in [0, 1), but got 1");
  expect_err(kn_scaled_dot_product_attention(q, NULL, v, NULL, 0, false, NULL, NULL), KN_EINVAL,
             "found NULL for key");
  kn_scope_end();
}

/* ---- compiled MultiheadAttention ---------------------------------------------------------- */

static kn_value mha_step(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_attention_mask mk = {.key_padding_mask = args[2].u.t, .is_causal = true};
  kn_tensor *y = kn_nn_multihead_attention_forward(args[0].u.m, args[1].u.t, NULL, NULL, &mk, NULL);
  return kn_vtensor(kn_sum(kn_mul(y, args[3].u.t)));
}

/* forward + backward of a causal, padded MultiheadAttention: compiled by
** dynamo + AOT + inductor it matches eager (output and every parameter's
** gradient), and its generated code calls the fused forward and backward
** kernels as externs, never a softmax over [L, S] scores. */
Test(sdpa, compiled_multihead_attention_calls_the_fused_kernels) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  kn_generator *g = kn_generator_new(21);
  kn_module *m = kn_nn_multihead_attention(16, 4, 0.0, true, g);
  kn_tensor *x = kn_randn(KN_SHAPE(3, 10, 16), g, KN_FLOAT32);
  kn_tensor *pad = kn_gt_scalar(kn_arange(kn_int(0), kn_int(10), kn_int(1)), kn_int(7));
  pad = kn_contiguous(kn_expand(kn_unsqueeze(pad, 0), KN_SHAPE(3, 10)));
  kn_tensor *w = kn_randn(KN_SHAPE(3, 10, 16), g, KN_FLOAT32);
  kn_tensor **ps = NULL;
  int np = kn_nn_parameters(m, &ps);
  kn_tensor *eg[8], *cg[8];
  cr_assert_leq(np, 8);
  kn_value args[4] = {kn_vmodule(m), kn_vtensor(x), kn_vtensor(pad), kn_vtensor(w)}, out;
  kn_tensor *ref = mha_step(args, 4, NULL).u.t;
  cr_assert_eq(kn_autograd_grad(&ref, 1, ps, np, NULL, false, false, false, eg), KN_OK, "%s",
               kn_last_error());
  kn_compile_options o = {.backend = "inductor", .fullgraph = true};
  kn_compiled *f = kn_compile_fn(mha_step, NULL, 4, "mha_step", __FILE__, __LINE__, &o);
  cr_assert_eq(kn_call(f, args, 4, &out), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_autograd_grad(&out.u.t, 1, ps, np, NULL, false, false, false, cg), KN_OK, "%s",
               kn_last_error());
  cr_expect(ind_close(out.u.t, ref, 1e-4, 1e-4, "output"));
  for (int i = 0; i < np; i++) cr_expect(ind_close(cg[i], eg[i], 1e-4, 1e-4, "parameter gradient"));
  char *src = kn_test_inductor_sources(dir);
  cr_expect_eq(kn_test_count_of(src, "extern kiln.ops._scaled_dot_product_fused_attention "), 1, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "extern kiln.ops._scaled_dot_product_fused_attention_backward "), 1,
               "%s", src);
  cr_expect_eq(kn_test_count_of(src, "_softmax"), 0, "a softmax in\n%s", src);
  free(src);
  free(ps);
  kn_value_release(out);
  kn_compiled_free(f);
  kn_module_free(m);
  kn_generator_free(g);
  kn_scope_end();
  ind_rm(dir);
}
