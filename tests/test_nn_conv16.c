/*
** test_nn_conv16.c: bfloat16 and float16 convolution, forward and backward
** (ops/nn_conv.c: oneDNN's 16-bit kernels where this CPU has them, else its
** float32 ones on widened values), against the float64 convolution of the same (exactly widened)
** values: each result within one rounding of its 16-bit type plus float32
** accumulation. The float64 path is itself checked against a direct
** convolution in test_nn_conv.c. The implementation oneDNN chose is logged.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "inductor_util.h"
#include "kiln/kiln.h"
#include "ops/nn_dnnl.h"
#include "support/leakcheck.h"

TestSuite(nn_conv16, .init = kn_test_leakcheck_begin, .fini = kn_test_leakcheck_end);

typedef struct ccase {
  const char *name;
  int64_t N, C, H, W, O, kh, kw, s, p, d, g;
  bool bias;
} ccase;

static const ccase cases[] = {
    {"3x3_pad1", 2, 3, 8, 8, 8, 3, 3, 1, 1, 1, 1, true},
    {"stride2_dilation2", 2, 4, 11, 9, 6, 3, 3, 2, 2, 2, 1, true},
    {"groups2_no_bias", 1, 4, 7, 7, 6, 3, 2, 1, 1, 1, 2, false},
    {"channels16_12x12", 2, 16, 12, 12, 32, 3, 3, 1, 1, 1, 1, true},
    {"1x1", 4, 32, 5, 5, 16, 1, 1, 1, 0, 1, 1, true},
};

static int64_t osize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* Values drawn in float32 and rounded to dt, then as leaves of dtype `as`. */
static kn_tensor *draw(kn_generator *g, int n, const int64_t *sizes, kn_dtype dt, kn_dtype as) {
  kn_tensor *t = kn_contiguous(kn_to(kn_to(kn_randn(n, sizes, g, KN_FLOAT32), dt), as));
  kn_set_requires_grad(t, true);
  return t;
}

typedef struct cset {
  kn_tensor *x, *w, *b, *go;
} cset;

static cset make_set(const ccase *c, kn_dtype dt, kn_dtype as) {
  kn_generator *g = kn_generator_new(17);
  int64_t OH = osize(c->H, c->kh, c->s, c->p, c->d), OW = osize(c->W, c->kw, c->s, c->p, c->d);
  cset s = {draw(g, KN_SHAPE(c->N, c->C, c->H, c->W), dt, as),
            draw(g, KN_SHAPE(c->O, c->C / c->g, c->kh, c->kw), dt, as), NULL,
            draw(g, KN_SHAPE(c->N, c->O, OH, OW), dt, as)};
  if (c->bias) s.b = draw(g, KN_SHAPE(c->O), dt, as);
  kn_generator_free(g);
  return s;
}

/* Output and gradients (x, w, b) of sum(conv(x, w, b) * go) in r[0..4). */
static int conv_grads(const ccase *c, cset *s, kn_tensor **r) {
  int64_t st[2] = {c->s, c->s}, pd[2] = {c->p, c->p}, dl[2] = {c->d, c->d};
  r[0] = kn_conv2d(s->x, s->w, s->b, st, pd, dl, c->g);
  cr_assert_not_null(r[0], "%s: %s", c->name, kn_last_error());
  kn_tensor *loss = kn_sum(kn_mul(kn_to(r[0], KN_FLOAT64), kn_to(s->go, KN_FLOAT64)));
  kn_tensor *ins[3] = {s->x, s->w, s->b};
  int n = c->bias ? 3 : 2;
  cr_assert_eq(kn_autograd_grad(&loss, 1, ins, n, NULL, false, false, false, r + 1), KN_OK, "%s",
               kn_last_error());
  return n + 1;
}

/* Largest |t| (for the accumulation term of the tolerance). */
static double amax(kn_tensor *t) {
  double m = 0;
  cr_assert_eq(kn_item_double(kn_amax(kn_abs(kn_to(t, KN_FLOAT64)), NULL, 0, false), &m), KN_OK);
  return m;
}

static void against_float64(kn_dtype dt, double eps) {
  static const char *names[4] = {"output", "grad input", "grad weight", "grad bias"};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const ccase *c = &cases[i];
    kn_scope_begin();
    kn__convg g = {.N = c->N, .C = c->C, .H = c->H, .W = c->W, .O = c->O, .kh = c->kh,
                   .kw = c->kw, .OH = osize(c->H, c->kh, c->s, c->p, c->d),
                   .OW = osize(c->W, c->kw, c->s, c->p, c->d), .G = c->g, .sh = c->s, .sw = c->s,
                   .ph = c->p, .pw = c->p, .dh = c->d, .dw = c->d};
    char impl[64] = "none";
    bool fast = kn__dnnl_conv_fast(&g, dt, c->bias, KN__CONV_FWD);
    if (fast) kn__dnnl_conv_impl(&g, dt, impl, sizeof impl);
    cr_log_info("%s %s: %s", kn_dtype_name(dt), c->name,
                fast ? impl : "no oneDNN kernel: widened to float32 once, rounded once");
    cset h = make_set(c, dt, dt), d = make_set(c, dt, KN_FLOAT64);
    kn_tensor *rh[4], *rd[4];
    int n = conv_grads(c, &h, rh);
    conv_grads(c, &d, rd);
    for (int j = 0; j < n; j++) {
      char what[96];
      snprintf(what, sizeof what, "%s %s: %s", kn_dtype_name(dt), c->name, names[j]);
      cr_expect_eq(kn_tensor_dtype(rh[j]), dt, "%s", what);
      cr_expect(ind_close(kn_to(rh[j], KN_FLOAT64), rd[j], eps, 1e-5 * amax(rd[j]), what), "%s",
                what);
    }
    kn_scope_end();
  }
}

Test(nn_conv16, bfloat16_within_one_rounding_of_float64) {
  against_float64(KN_BFLOAT16, 1.0 / 256);
}
Test(nn_conv16, float16_within_one_rounding_of_float64) { against_float64(KN_FLOAT16, 1.0 / 2048); }

/* A bfloat16 convolution through autocast: float32 leaves, bfloat16 output,
** float32 gradients (conv is on torch's lower-precision list). */
Test(nn_conv16, autocast_runs_convolution_in_bfloat16) {
  kn_scope_begin();
  const ccase *c = &cases[3];
  cset f = make_set(c, KN_BFLOAT16, KN_FLOAT32);
  cr_assert_eq(kn_autocast_begin(KN_BFLOAT16), KN_OK);
  kn_tensor *y = kn_conv2d(f.x, f.w, f.b, NULL, (int64_t[]){1, 1}, NULL, 1);
  cr_assert_eq(kn_autocast_end(), KN_OK);
  cr_assert_not_null(y, "%s", kn_last_error());
  cr_expect_eq(kn_tensor_dtype(y), KN_BFLOAT16);
  kn_tensor *loss = kn_sum(kn_mul(kn_to(y, KN_FLOAT32), f.go)), *ins[3] = {f.x, f.w, f.b}, *gr[3];
  cr_assert_eq(kn_autograd_grad(&loss, 1, ins, 3, NULL, false, false, false, gr), KN_OK, "%s",
               kn_last_error());
  for (int i = 0; i < 3; i++) cr_expect_eq(kn_tensor_dtype(gr[i]), KN_FLOAT32);
  cset d = make_set(c, KN_BFLOAT16, KN_FLOAT64);
  kn_tensor *rd[4];
  conv_grads(c, &d, rd);
  cr_expect(ind_close(kn_to(y, KN_FLOAT64), rd[0], 1.0 / 256, 1e-5 * amax(rd[0]), "output"));
  /* go holds bfloat16 values, so its cast is exact: one rounding, in the
  ** bfloat16 convolution's backward */
  for (int i = 0; i < 3; i++)
    cr_expect(ind_close(kn_to(gr[i], KN_FLOAT64), rd[i + 1], 1.0 / 256, 1e-5 * amax(rd[i + 1]),
                        "gradient"));
  kn_scope_end();
}
