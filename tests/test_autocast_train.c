/*
** test_autocast_train.c: small models train under bfloat16 autocast to the
** accuracy they reach in float32 (the "digits CNN and char transformer"
** check, in about a second): a CNN on 256 of scikit-learn's digits
** (tests/fixtures/digits_256.csv: 192 to train, 64 held out; 85% in both
** precisions), and on synthetic data a CNN that finds the bright quadrant
** of an 8x8 image and a one-layer character transformer that predicts the
** next character of cyclic sequences (90%). Same seeds, same steps;
** held-out accuracies differ by at most 5 points.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "kiln/kiln.h"

static int64_t live0;
static void setup(void) { live0 = kn_live_tensors(); }
static void teardown(void) { cr_assert_eq(kn_live_tensors(), live0); }
TestSuite(autocast_train, .init = setup, .fini = teardown);

typedef struct data {
  kn_tensor *x, *y; /* inputs, int64 labels (per sample or per token) */
} data;

/* Images [n, 1, 8, 8]: noise plus a bright 4x4 quadrant; label its index. */
static data quadrants(int n, kn_generator *g) {
  data d = {kn_mul_scalar(kn_rand(4, (int64_t[]){n, 1, 8, 8}, g, KN_FLOAT32), kn_float(0.5)),
            kn_empty(1, (int64_t[]){n}, KN_INT64)};
  float *px = kn_data(d.x);
  int64_t *py = kn_data(d.y);
  kn_tensor *r = kn_rand(1, (int64_t[]){n}, g, KN_FLOAT32);
  for (int i = 0; i < n; i++) {
    int q = (int)(((const float *)kn_data(r))[i] * 4) % 4;
    py[i] = q;
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++) px[i * 64 + ((q / 2) * 4 + a) * 8 + (q % 2) * 4 + b] += 1.0f;
  }
  return d;
}

/* Token sequences [n, 16] over 8 symbols counting up from a random start;
** the target of each token is the next symbol. */
static data cyclic(int n, kn_generator *g) {
  data d = {kn_empty(2, (int64_t[]){n, 16}, KN_INT64), kn_empty(1, (int64_t[]){n * 16}, KN_INT64)};
  int64_t *px = kn_data(d.x), *py = kn_data(d.y);
  kn_tensor *r = kn_rand(1, (int64_t[]){n}, g, KN_FLOAT32);
  for (int i = 0; i < n; i++) {
    int s = (int)(((const float *)kn_data(r))[i] * 8) % 8;
    for (int t = 0; t < 16; t++) {
      px[i * 16 + t] = (s + t) % 8;
      py[i * 16 + t] = (s + t + 1) % 8;
    }
  }
  return d;
}

/* Logits [N, C] for a model's output (token models: [N, L, V] flattened). */
static kn_tensor *logits(kn_module *m, kn_tensor *x) {
  kn_tensor *o = kn_nn_forward(m, x);
  if (o && kn_ndim(o) == 3) o = kn_reshape(o, 2, (int64_t[]){-1, kn_size(o, 2)});
  return o;
}

/* Train with Adam for `steps` full-batch steps (under autocast when dt is
** bfloat16) and return the held-out accuracy. */
static double train(kn_module *m, data tr, data te, int steps, kn_dtype dt) {
  kn_tensor **ps;
  int n = kn_nn_parameters(m, &ps);
  kn_optimizer *opt = kn_adam(ps, n, &(kn_optim_options){.lr = 1e-2});
  free(ps);
  for (int s = 0; s < steps; s++) {
    kn_scope_begin();
    if (dt != KN_FLOAT32) kn_autocast_begin(dt);
    kn_tensor *loss = kn_cross_entropy(logits(m, tr.x), tr.y, NULL, KN_REDUCTION_MEAN, -100, 0);
    if (dt != KN_FLOAT32) kn_autocast_end();
    cr_assert_not_null(loss, "%s", kn_last_error());
    cr_assert_eq(kn_tensor_dtype(loss), KN_FLOAT32);
    cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_optim_step(opt), KN_OK, "%s", kn_last_error());
    kn_optim_zero_grad(opt);
    kn_scope_end();
  }
  kn_optim_free(opt);
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  if (dt != KN_FLOAT32) kn_autocast_begin(dt);
  kn_tensor *pred = kn_argmax_dim(logits(m, te.x), 1, false);
  if (dt != KN_FLOAT32) kn_autocast_end();
  kn_no_grad_end(prev);
  double acc = 0;
  cr_assert_eq(kn_item_double(kn_mean(kn_to(kn_eq(pred, te.y), KN_FLOAT64)), &acc), KN_OK);
  kn_scope_end();
  return acc;
}

static kn_module *cnn(kn_generator *g) {
  kn_conv2d_options pad1 = {.padding = {1, 1}};
  return kn_nn_sequential(5, (kn_module *[]){kn_nn_conv2d(1, 4, 3, 3, &pad1, g), kn_nn_relu(),
                                             kn_nn_maxpool2d(2, 0, 0), kn_nn_flatten(1, -1),
                                             kn_nn_linear(64, 4, true, g)});
}

static kn_module *char_transformer(kn_generator *g) {
  return kn_nn_sequential(3, (kn_module *[]){
                                 kn_nn_embedding(8, 32, -1, g),
                                 kn_nn_transformer_encoder_layer(32, 4, 64, 0.0, true, g),
                                 kn_nn_linear(32, 8, true, g)});
}

/* Training and held-out data drawn (or loaded) for one run. */
typedef struct split {
  data tr, te;
} split;

/* Trains make()'s model in float32 and under bfloat16 autocast from the same
** seed and data; both reach min_acc held out and differ by at most 5 points. */
static void same_accuracy(kn_module *(*make)(kn_generator *), split (*load)(kn_generator *),
                          uint64_t seed, int steps, double min_acc, const char *what) {
  double acc[2];
  kn_dtype dts[2] = {KN_FLOAT32, KN_BFLOAT16};
  for (int k = 0; k < 2; k++) {
    kn_generator *g = kn_generator_new(seed);
    kn_module *m = make(g);
    cr_assert_not_null(m, "%s", kn_last_error());
    kn_scope_begin();
    split d = load(g);
    acc[k] = train(m, d.tr, d.te, steps, dts[k]);
    kn_scope_end();
    kn_module_free(m);
    kn_generator_free(g);
  }
  cr_log_info("%s: accuracy float32 %.3f, bfloat16 autocast %.3f", what, acc[0], acc[1]);
  cr_assert_geq(acc[0], min_acc, "%s float32 accuracy %.3f", what, acc[0]);
  cr_assert_geq(acc[1], min_acc, "%s bfloat16 accuracy %.3f", what, acc[1]);
  cr_assert_leq(fabs(acc[0] - acc[1]), 0.05, "%s: %.3f vs %.3f", what, acc[0], acc[1]);
}

static split quadrant_split(kn_generator *g) {
  data tr = quadrants(128, g);
  return (split){tr, quadrants(128, g)};
}

static split cyclic_split(kn_generator *g) {
  data tr = cyclic(128, g);
  return (split){tr, cyclic(128, g)};
}

Test(autocast_train, cnn_reaches_float32_accuracy) {
  same_accuracy(cnn, quadrant_split, 11, 30, 0.9, "cnn");
}

/* The first 256 of scikit-learn's digits (tests/fixtures/digits_256.csv: 64
** pixels 0..16, then the label): images [n, 1, 8, 8] scaled to [0, 1] from
** row `first`. */
static data digits(int64_t first, int64_t n) {
  kn_tensor *all = kn_load_csv(KN_FIXTURE_DIR "/digits_256.csv", KN_FLOAT32);
  kn_tensor *rows = all ? kn_narrow(all, 0, first, n) : NULL;
  cr_assert_not_null(rows, "%s", kn_last_error());
  kn_tensor *px = kn_div_scalar(kn_narrow(rows, 1, 0, 64), kn_float(16));
  return (data){kn_reshape(px, 4, (int64_t[]){n, 1, 8, 8}),
                kn_to(kn_select(rows, 1, 64), KN_INT64)};
}

/* 192 digits to train on, the other 64 held out. */
static split digits_split(kn_generator *g) {
  (void)g;
  return (split){digits(0, 192), digits(192, 64)};
}

/* The digits CNN of examples/digits.c, smaller: conv 1->8 3x3, relu, pool,
** linear 128->10. */
static kn_module *digits_cnn(kn_generator *g) {
  kn_conv2d_options pad1 = {.padding = {1, 1}};
  return kn_nn_sequential(5, (kn_module *[]){kn_nn_conv2d(1, 8, 3, 3, &pad1, g), kn_nn_relu(),
                                             kn_nn_maxpool2d(2, 0, 0), kn_nn_flatten(1, -1),
                                             kn_nn_linear(128, 10, true, g)});
}

Test(autocast_train, digits_cnn_reaches_float32_accuracy) {
  same_accuracy(digits_cnn, digits_split, 3, 60, 0.85, "digits cnn");
}

Test(autocast_train, char_transformer_reaches_float32_accuracy) {
  same_accuracy(char_transformer, cyclic_split, 11, 25, 0.9, "char transformer");
}
