/*
** test_sdpa_half.c: scaled_dot_product_attention on bfloat16 and float16
** (ops/nn_attention.c computes them in float32 and rounds once), against
** two independent expectations: the float32 kernel on the same (widened)
** values, whose output and gradients rounded to the 16-bit type must be the
** 16-bit results bit for bit, and the unfused formula in float64, within
** the type's rounding. Then autocast (torch 2's CPU policy runs attention in
** lower precision) eagerly and compiled through inductor.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inductor_util.h"
#include "kiln/kiln.h"
#include "ops/opdef.h"
#include "support/files.h"

/* got and want hold the same bits (same dtype and sizes). */
static bool same_bits(kn_tensor *got, kn_tensor *want, const char *what) {
  if (!got || !want) {
    cr_log_error("%s: missing result (%s)", what, kn_last_error());
    return false;
  }
  if (kn_tensor_dtype(got) != kn_tensor_dtype(want) || kn_numel(got) != kn_numel(want)) {
    cr_log_error("%s: dtype %s against %s, %lld against %lld elements", what,
                 kn_dtype_name(kn_tensor_dtype(got)), kn_dtype_name(kn_tensor_dtype(want)),
                 (long long)kn_numel(got), (long long)kn_numel(want));
    return false;
  }
  kn_tensor *a = kn_contiguous(got), *b = kn_contiguous(want);
  kn_tensor *a64 = kn_to(a, KN_FLOAT64), *b64 = kn_to(b, KN_FLOAT64);
  size_t es = kn_dtype_size(kn_tensor_dtype(a));
  const unsigned char *pa = kn_data(a), *pb = kn_data(b);
  for (int64_t i = 0; i < kn_numel(a); i++)
    if (memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es)) {
      cr_log_error("%s: element %lld differs: %.9g against %.9g", what, (long long)i,
                   ((const double *)kn_data(a64))[i], ((const double *)kn_data(b64))[i]);
      return false;
    }
  return true;
}

typedef struct hcase {
  const char *name;
  int64_t B, H, L, S, E, Ev;
  int mask; /* 0 none, 1 bool [B, 1, 1, S] padding, 2 additive [L, S] with grad */
  bool causal;
  double p; /* dropout */
} hcase;

static const hcase cases[] = {
    {"plain", 2, 3, 5, 7, 4, 6, 0, false, 0},
    {"causal", 2, 2, 9, 9, 8, 8, 0, true, 0},
    {"bool_padding", 2, 2, 6, 7, 4, 4, 1, false, 0},
    {"additive_mask_grad", 2, 2, 5, 7, 4, 3, 2, false, 0},
    {"blocks_not_pow2_causal", 1, 2, 131, 200, 16, 8, 0, true, 0},
    {"dropout", 2, 2, 8, 70, 4, 4, 0, false, 0.25},
};

typedef struct hset {
  kn_tensor *q, *k, *v, *m, *go; /* leaves of one dtype; m NULL or a mask */
} hset;

/* float32 draws rounded to dt (so that the widened copy holds the same values). */
static kn_tensor *draw(kn_generator *g, int64_t a, int64_t b, int64_t c, int64_t d, kn_dtype dt) {
  return kn_to(kn_randn(KN_SHAPE(a, b, c, d), g, KN_FLOAT32), dt);
}

static kn_tensor *leaf(kn_tensor *t, kn_dtype dt, bool grad) {
  kn_tensor *r = kn_contiguous(kn_to(t, dt));
  if (grad) kn_set_requires_grad(r, true);
  return r;
}

static kn_tensor *padding(const hcase *c) {
  kn_tensor *pos = kn_unsqueeze(kn_arange(kn_int(0), kn_int(c->S), kn_int(1)), 0);
  kn_tensor *lim = kn_unsqueeze(kn_sub_scalar(kn_mul_scalar(kn_arange(kn_int(0), kn_int(c->B),
                                                                      kn_int(1)), kn_int(-1)),
                                              kn_int(1 - c->S)), 1);
  return kn_reshape(kn_lt(pos, lim), 4, (int64_t[]){c->B, 1, 1, c->S}); /* batch b: S - b keys */
}

/* The case's tensors in dt, from the same draws for every dt. */
static hset make_set(const hcase *c, kn_dtype half, kn_dtype dt) {
  kn_generator *g = kn_generator_new(11);
  hset s = {leaf(draw(g, c->B, c->H, c->L, c->E, half), dt, true),
            leaf(draw(g, c->B, c->H, c->S, c->E, half), dt, true),
            leaf(draw(g, c->B, c->H, c->S, c->Ev, half), dt, true), NULL,
            leaf(draw(g, c->B, c->H, c->L, c->Ev, half), dt, false)};
  if (c->mask == 1) s.m = padding(c);
  if (c->mask == 2)
    s.m = leaf(kn_to(kn_randn(KN_SHAPE(c->L, c->S), g, KN_FLOAT32), half), dt, true);
  kn_generator_free(g);
  return s;
}

/* The fused forward op on s: output, logsumexp, dropout state in r[0..3). */
static void fused_fwd(const hcase *c, hset *s, kn_tensor **r) {
  kn_generator *g = kn_generator_new(99); /* the same dropout draws each time */
  kn__arg args[8] = {KN_A_T(s->q), KN_A_T(s->k), KN_A_T(s->v), KN_A_D(c->p), KN_A_B(c->causal),
                     s->m ? KN_A_T(s->m) : KN_A_NONE, KN_A_NONE, KN_A_GEN(g)};
  cr_assert_eq(kn__invoke_multi(KN_OP_SDPA_FUSED, 8, args, r, 3), 3, "%s: %s", c->name,
               kn_last_error());
  kn_generator_free(g);
}

/* The fused backward op: gradients of q, k, v and the mask in r[0..4). */
static void fused_bwd(const hcase *c, hset *s, kn_tensor *out, kn_tensor *const *f,
                      kn_tensor **r) {
  kn__arg args[12] = {KN_A_T(s->go), KN_A_T(s->q), KN_A_T(s->k), KN_A_T(s->v), KN_A_T(out),
                      KN_A_T(f[1]), KN_A_T(f[2]), KN_A_D(c->p), KN_A_B(c->causal),
                      s->m ? KN_A_T(s->m) : KN_A_NONE, KN_A_NONE, KN_A_B(c->mask == 2)};
  cr_assert_eq(kn__invoke_multi(KN_OP_SDPA_FUSED_BACKWARD, 12, args, r, 4), 4, "%s: %s", c->name,
               kn_last_error());
}

/* Gradients of sum(sdpa(q, k, v, m) * go) by autograd: q, k, v, mask in r[0..). */
static void autograd_of(const hcase *c, hset *s, kn_tensor **r) {
  kn_generator *g = kn_generator_new(99);
  kn_tensor *y = kn_scaled_dot_product_attention(s->q, s->k, s->v, s->m, c->p, c->causal, NULL, g);
  cr_assert_not_null(y, "%s: %s", c->name, kn_last_error());
  kn_tensor *loss = kn_sum(kn_mul(y, s->go)), *ins[4] = {s->q, s->k, s->v, s->m};
  cr_assert_eq(kn_autograd_grad(&loss, 1, ins, c->mask == 2 ? 4 : 3, NULL, false, false, false, r),
               KN_OK, "%s", kn_last_error());
  kn_generator_free(g);
}

static void expect_bits(kn_tensor *got, kn_tensor *want, kn_dtype dt, const hcase *c,
                        const char *name) {
  char what[96];
  snprintf(what, sizeof what, "%s %s: %s", kn_dtype_name(dt), c->name, name);
  cr_expect_eq(kn_tensor_dtype(got), dt, "%s: %s", what, kn_dtype_name(kn_tensor_dtype(got)));
  cr_expect(same_bits(got, kn_tensor_dtype(want) == dt ? want : kn_to(want, dt), what), "%s",
            what);
}

/* Forward: the output is the float32 kernel's rounded once; the logsumexp
** (float32) and dropout state are the float32 kernel's. Backward, given the
** same saved tensors (the rounded output, widened): the float32 kernel's
** gradients rounded once. Autograd on 16-bit leaves gives exactly those. */
static void rounded_once(kn_dtype half) {
  static const char *names[4] = {"grad query", "grad key", "grad value", "grad mask"};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kn_scope_begin();
    const hcase *c = &cases[i];
    hset h = make_set(c, half, half), w = make_set(c, half, KN_FLOAT32);
    kn_tensor *fh[3], *fw[3], *bh[4], *bw[4], *ag[4];
    fused_fwd(c, &h, fh);
    fused_fwd(c, &w, fw);
    expect_bits(fh[0], fw[0], half, c, "output");
    expect_bits(fh[1], fw[1], KN_FLOAT32, c, "logsumexp");
    expect_bits(fh[2], fw[2], KN_INT64, c, "dropout state");
    fused_bwd(c, &h, fh[0], fh, bh);
    fused_bwd(c, &w, kn_to(fh[0], KN_FLOAT32), fh, bw);
    autograd_of(c, &h, ag);
    for (int j = 0; j < (c->mask == 2 ? 4 : 3); j++) {
      expect_bits(bh[j], bw[j], half, c, names[j]);
      kn_tensor *want = j < 3 ? bh[j] : kn_sum_to_size(bh[3], 2, (int64_t[]){c->L, c->S});
      expect_bits(ag[j], want, half, c, names[j]);
    }
    kn_scope_end();
  }
}

Test(sdpa_half, bfloat16_is_the_float32_kernel_rounded_once) { rounded_once(KN_BFLOAT16); }
Test(sdpa_half, float16_is_the_float32_kernel_rounded_once) { rounded_once(KN_FLOAT16); }

/* softmax(q k^T / sqrt(E) + mask) v in float64 ops (no dropout). */
static kn_tensor *formula64(const hcase *c, hset *s) {
  kn_tensor *q = kn_to(s->q, KN_FLOAT64), *k = kn_to(s->k, KN_FLOAT64);
  kn_tensor *sc = kn_mul_scalar(kn_matmul(q, kn_transpose(k, -2, -1)),
                                kn_float(1.0 / sqrt((double)c->E)));
  if (c->mask == 1) sc = kn_masked_fill(sc, kn_logical_not(s->m), kn_float(-INFINITY));
  if (c->mask == 2) sc = kn_add(sc, kn_to(s->m, KN_FLOAT64));
  if (c->causal) {
    kn_tensor *j = kn_unsqueeze(kn_arange(kn_int(0), kn_int(c->S), kn_int(1)), 0);
    kn_tensor *i = kn_unsqueeze(kn_arange(kn_int(0), kn_int(c->L), kn_int(1)), 1);
    sc = kn_masked_fill(sc, kn_gt(j, i), kn_float(-INFINITY));
  }
  return kn_matmul(kn_softmax(sc, -1), kn_to(s->v, KN_FLOAT64));
}

/* Each output element within one rounding of the 16-bit type (2^-8
** relative for bfloat16, 2^-11 for float16) of the float64 formula, plus
** float32's accumulation (1e-5 of the output's scale). */
Test(sdpa_half, outputs_are_within_one_rounding_of_float64) {
  const kn_dtype dts[2] = {KN_BFLOAT16, KN_FLOAT16};
  const double eps[2] = {1.0 / 256, 1.0 / 2048};
  for (int d = 0; d < 2; d++)
    for (size_t i = 0; i + 1 < sizeof cases / sizeof *cases; i++) { /* not dropout */
      kn_scope_begin();
      hset h = make_set(&cases[i], dts[d], dts[d]);
      kn_tensor *y = kn_scaled_dot_product_attention(h.q, h.k, h.v, h.m, 0, cases[i].causal, NULL,
                                                     NULL);
      char what[96];
      snprintf(what, sizeof what, "%s %s", kn_dtype_name(dts[d]), cases[i].name);
      cr_expect(ind_close(kn_to(y, KN_FLOAT64), formula64(&cases[i], &h), eps[d], 1e-5, what),
                "%s", what);
      kn_scope_end();
    }
}

Test(sdpa_half, a_mask_of_another_float_type_is_refused) {
  kn_scope_begin();
  kn_tensor *q = kn_zeros(KN_SHAPE(1, 2, 3, 4), KN_BFLOAT16);
  kn_tensor *r = kn_scaled_dot_product_attention(q, q, q, kn_zeros(KN_SHAPE(3, 3), KN_FLOAT32), 0,
                                                 false, NULL, NULL);
  cr_expect_null(r);
  cr_expect(strstr(kn_last_error(), "attn_mask dtype to be bool or to match query dtype "
                                    "(torch.bfloat16), but got attn_mask.dtype: torch.float32"),
            "%s", kn_last_error());
  r = kn_scaled_dot_product_attention(kn_zeros(KN_SHAPE(1, 2, 3, 4), KN_INT64), q, q, NULL, 0,
                                      false, NULL, NULL);
  cr_expect_null(r);
  cr_expect(strstr(kn_last_error(), "expected query of dtype float32, float64, bfloat16 or "
                                    "float16, found int64"), "%s", kn_last_error());
  kn_scope_end();
}

/* ---- autocast --------------------------------------------------------------------------- */

typedef struct acase {
  kn_tensor *q, *k, *v, *m, *w; /* float32 leaves (q, k, v require grad), an additive mask */
} acase;

static acase make_acase(void) {
  kn_generator *g = kn_generator_new(5);
  acase a = {kn_randn(KN_SHAPE(2, 2, 33, 16), g, KN_FLOAT32),
             kn_randn(KN_SHAPE(2, 2, 40, 16), g, KN_FLOAT32),
             kn_randn(KN_SHAPE(2, 2, 40, 8), g, KN_FLOAT32),
             kn_randn(KN_SHAPE(33, 40), g, KN_FLOAT32),
             kn_randn(KN_SHAPE(2, 2, 33, 8), g, KN_FLOAT32)};
  kn_set_requires_grad(a.q, true), kn_set_requires_grad(a.k, true), kn_set_requires_grad(a.v, true);
  kn_generator_free(g);
  return a;
}

/* Under a bfloat16 region: attention of float32 leaves, its output in float32. */
static kn_tensor *autocast_attention(acase *a) {
  cr_assert_eq(kn_autocast_begin(KN_BFLOAT16), KN_OK);
  kn_tensor *y = kn_scaled_dot_product_attention(a->q, a->k, a->v, a->m, 0, false, NULL, NULL);
  cr_assert_eq(kn_autocast_end(), KN_OK);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_dtype(y), KN_BFLOAT16, "attention under bfloat16 autocast gave %s",
               kn_dtype_name(kn_tensor_dtype(y)));
  return y;
}

static void grads3(kn_tensor *loss, acase *a, kn_tensor **r) {
  kn_tensor *ins[3] = {a->q, a->k, a->v};
  cr_assert_eq(kn_autograd_grad(&loss, 1, ins, 3, NULL, false, false, false, r), KN_OK, "%s",
               kn_last_error());
}

/* The region casts q, k, v and the mask to bfloat16 (torch 2's CPU policy
** lists scaled_dot_product_attention as lower precision): the same bits as
** casting them by hand, and float32 gradients on the float32 leaves equal
** to those of the hand-cast chain. */
Test(sdpa_half, autocast_runs_attention_in_the_regions_dtype) {
  cr_expect_str_eq(kn_autocast_policy("scaled_dot_product_attention"), "lower");
  cr_expect_str_eq(kn_autocast_policy("_scaled_dot_product_fused_attention"), "lower");
  kn_scope_begin();
  acase a = make_acase();
  kn_tensor *y = autocast_attention(&a);
  kn_tensor *want = kn_scaled_dot_product_attention(kn_to(a.q, KN_BFLOAT16), kn_to(a.k, KN_BFLOAT16),
                                                    kn_to(a.v, KN_BFLOAT16),
                                                    kn_to(a.m, KN_BFLOAT16), 0, false, NULL, NULL);
  cr_expect(same_bits(y, want, "autocast output"));
  kn_tensor *gy[3], *gw[3];
  grads3(kn_sum(kn_mul(kn_to(y, KN_FLOAT32), a.w)), &a, gy);
  grads3(kn_sum(kn_mul(kn_to(want, KN_FLOAT32), a.w)), &a, gw);
  for (int i = 0; i < 3; i++) {
    cr_expect_eq(kn_tensor_dtype(gy[i]), KN_FLOAT32);
    cr_expect(same_bits(gy[i], gw[i], "autocast gradient"));
  }
  kn_scope_end();
}

static kn_value autocast_step(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  acase a = {args[0].u.t, args[1].u.t, args[2].u.t, args[3].u.t, args[4].u.t};
  return kn_vtensor(kn_sum(kn_mul(kn_to(autocast_attention(&a), KN_FLOAT32), a.w)));
}

/* Compiled (dynamo + AOT + inductor), the autocast step gives eager's loss
** and gradients, and its graph calls the fused kernels on bfloat16. */
Test(sdpa_half, compiled_autocast_attention_matches_eager) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_scope_begin();
  acase a = make_acase();
  kn_value args[5] = {kn_vtensor(a.q), kn_vtensor(a.k), kn_vtensor(a.v), kn_vtensor(a.m),
                      kn_vtensor(a.w)}, out;
  kn_tensor *ref = autocast_step(args, 5, NULL).u.t, *eg[3], *cg[3];
  grads3(ref, &a, eg);
  kn_compile_options o = {.backend = "inductor", .fullgraph = true};
  kn_compiled *f = kn_compile_fn(autocast_step, NULL, 5, "autocast_step", __FILE__, __LINE__, &o);
  cr_assert_eq(kn_call(f, args, 5, &out), KN_OK, "%s", kn_last_error());
  grads3(out.u.t, &a, cg);
  cr_expect(ind_close(out.u.t, ref, 1e-5, 1e-5, "loss"));
  for (int i = 0; i < 3; i++) cr_expect(ind_close(cg[i], eg[i], 1e-5, 1e-6, "gradient"));
  char *src = kn_test_inductor_sources(dir);
  cr_expect_eq(kn_test_count_of(src, "extern kiln.ops._scaled_dot_product_fused_attention "), 1,
               "%s", src);
  cr_expect_eq(kn_test_count_of(src, "extern kiln.ops._scaled_dot_product_fused_attention_backward "),
               1, "%s", src);
  free(src);
  kn_value_release(out);
  kn_compiled_free(f);
  kn_scope_end();
  ind_rm(dir);
}
