/*
** tests/distributed/digits_check.c: the ddp_digits mode of dist_check (see
** there). The digits MLP (64-128-10) and CNN (examples/digits.c's) train on
** the first 256 rows of scikit-learn's digits (tests/fixtures/digits_256.csv,
** committed: `gzip -dc .../sklearn/datasets/data/digits.csv.gz | head -n
** 256`), global batch 64, SGD with momentum, 4 steps: DDP over 2 ranks (32
** rows each) against one process over the whole batch, run on every rank.
** The losses (averaged over the ranks) agree within 1e-5 relative per step
** and the final parameters within 1e-5.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "kiln/distributed.h"

static int fails, me;

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fails++;                                                   \
      printf("rank %d: FAIL %s:%d: ", me, __FILE__, __LINE__);   \
      printf(__VA_ARGS__);                                       \
      printf(" [%s]\n", kn_last_error());                        \
    }                                                            \
  } while (0)

#define ROWS 256
#define BATCH 64

static kn_module *make_model(bool cnn, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_conv2d_options same = {.padding_same = true};
  kn_module *m =
      cnn ? kn_nn_sequential(8, (kn_module *[]){
                kn_nn_conv2d(1, 16, 3, 3, &same, g), kn_nn_relu(), kn_nn_maxpool2d(2, 0, 0),
                kn_nn_conv2d(16, 32, 3, 3, &same, g), kn_nn_relu(), kn_nn_maxpool2d(2, 0, 0),
                kn_nn_flatten(1, -1), kn_nn_linear(32 * 2 * 2, 10, true, g)})
          : kn_nn_sequential(3, (kn_module *[]){kn_nn_linear(64, 128, true, g), kn_nn_relu(),
                                                kn_nn_linear(128, 10, true, g)});
  kn_generator_free(g);
  return m;
}

static double item(kn_tensor *t) {
  double v = NAN;
  kn_item_double(t, &v);
  return v;
}

static kn_tensor *loss(kn_module *m, kn_ddp *ddp, bool cnn, kn_tensor *x, kn_tensor *y) {
  if (cnn) x = kn_reshape(x, 4, (int64_t[]){-1, 1, 8, 8});
  kn_tensor *out = ddp ? kn_ddp_forward(ddp, x) : kn_nn_forward(m, x);
  return kn_cross_entropy(out, y, NULL, KN_REDUCTION_MEAN, -100, 0.0);
}

static kn_optimizer *sgd(kn_module *m) {
  kn_tensor **ps;
  int n = kn_nn_parameters(m, &ps);
  kn_optimizer *o = kn_sgd(ps, n, &(kn_optim_options){.lr = 0.1, .momentum = 0.9});
  free(ps);
  return o;
}

static double max_rel_diff(kn_module *a, kn_module *b) {
  kn_tensor **pa, **pb;
  int n = kn_nn_parameters(a, &pa);
  kn_nn_parameters(b, &pb);
  double worst = 0;
  for (int i = 0; i < n; i++) {
    const float *x = kn_data(pa[i]), *y = kn_data(pb[i]);
    for (int64_t k = 0; k < kn_numel(pa[i]); k++)
      worst = fmax(worst, fabs((double)x[k] - y[k]) / (1e-3 + fabs((double)y[k])));
  }
  free(pa);
  free(pb);
  return worst;
}

static void train(bool cnn, kn_tensor *x, kn_tensor *y, int rank, int world) {
  const char *name = cnn ? "CNN" : "MLP";
  kn_module *ref = make_model(cnn, 5), *net = make_model(cnn, 5 + (uint64_t)rank);
  kn_ddp *ddp = kn_ddp_wrap(net, NULL);
  CHECK(ddp != NULL, "%s: kn_ddp_wrap", name);
  if (!ddp) return;
  kn_optimizer *oref = sgd(ref), *onet = sgd(net);
  int64_t share = BATCH / world;
  for (int step = 0; step < ROWS / BATCH; step++) {
    kn_scope_begin();
    kn_tensor *xb = kn_narrow(x, 0, step * BATCH, BATCH), *yb = kn_narrow(y, 0, step * BATCH, BATCH);
    kn_tensor *lr = loss(ref, NULL, cnn, xb, yb);
    CHECK(kn_backward(lr, NULL) == KN_OK, "%s: reference backward", name);
    kn_optim_step(oref);
    kn_optim_zero_grad(oref);
    kn_tensor *l = loss(net, ddp, cnn, kn_narrow(xb, 0, rank * share, share),
                        kn_narrow(yb, 0, rank * share, share));
    CHECK(kn_backward(l, NULL) == KN_OK, "%s: DDP backward", name); /* averages the gradients */
    kn_optim_step(onet);
    kn_optim_zero_grad(onet);
    kn_tensor *lt = kn_full(0, NULL, kn_float(item(l)), KN_FLOAT64);
    CHECK(kn_dist_all_reduce(lt, KN_REDUCE_AVG) == KN_OK, "loss all_reduce");
    double gl = item(lt), rl = item(lr);
    CHECK(fabs(gl - rl) <= 1e-5 * fabs(rl), "%s step %d: DDP loss %.9g, one process %.9g", name,
          step, gl, rl);
    if (rank == 0) printf("rank 0: %s step %d loss ddp %.7f one process %.7f\n", name, step, gl, rl);
    kn_scope_end();
  }
  double d = max_rel_diff(net, ref);
  CHECK(d <= 1e-5, "%s: final parameters differ from one process's by %.3g (relative)", name, d);
  kn_optim_free(oref);
  kn_optim_free(onet);
  kn_ddp_free(ddp);
  kn_module_free(net);
  kn_module_free(ref);
}

int ddp_digits_mode(int rank, int world, const char *csv);
int ddp_digits_mode(int rank, int world, const char *csv) {
  me = rank;
  kn_scope_begin();
  kn_tensor *rows = kn_load_csv(csv, KN_FLOAT32);
  CHECK(rows && kn_size(rows, 0) == ROWS && kn_size(rows, 1) == 65, "load %s", csv);
  if (rows && kn_size(rows, 0) == ROWS) {
    kn_tensor *x = kn_div_scalar(kn_narrow(rows, 1, 0, 64), kn_float(16.0)); /* pixels 0..16 */
    kn_tensor *y = kn_to(kn_select(rows, 1, 64), KN_INT64);
    train(false, x, y, rank, world);
    train(true, x, y, rank, world);
  }
  kn_scope_end();
  return fails;
}
