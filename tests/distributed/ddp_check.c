/*
** tests/distributed/ddp_check.c: the DDP mode of dist_check (see there).
** Every rank trains the same MLP two ways: DDP over its share of the global
** batch, and alone over the whole batch (the one-process reference). Losses
** (averaged over ranks) and final parameters must agree; bucket layout,
** no_sync accumulation, unused parameters and rank 0's checkpoint are
** checked on the way.
*/
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "kiln/distributed.h"

static int fails, me;
static bool as_view; /* train with gradient_as_bucket_view */

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fails++;                                                   \
      printf("rank %d: FAIL %s:%d: ", me, __FILE__, __LINE__);   \
      printf(__VA_ARGS__);                                       \
      printf(" [%s]\n", kn_last_error());                        \
    }                                                            \
  } while (0)

#define B 16   /* global batch */
#define STEPS 6

static kn_module *mlp(uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_module *m = kn_nn_sequential(5, (kn_module *[]){
      kn_nn_linear(8, 16, true, g), kn_nn_relu(), kn_nn_linear(16, 16, true, g), kn_nn_relu(),
      kn_nn_linear(16, 4, true, g)});
  kn_generator_free(g);
  return m;
}

static kn_tensor *loss_of(kn_module *m, kn_ddp *ddp, kn_tensor *x, kn_tensor *y, double scale) {
  kn_tensor *out = ddp ? kn_ddp_forward(ddp, x) : kn_nn_forward(m, x);
  kn_tensor *l = kn_cross_entropy(out, y, NULL, KN_REDUCTION_MEAN, -100, 0.0);
  return scale == 1.0 ? l : kn_mul_scalar(l, kn_float(scale));
}

/* gradient_as_bucket_view: the .grads of a bucket lie one after the other
** in its buffer, in bucket order (no copies of their own). */
static void check_grads_in_buckets(kn_ddp *ddp) {
  for (int b = 0; b < kn_ddp_num_buckets(ddp); b++) {
    int n = 0;
    kn_tensor *const *ps = kn_ddp_bucket_params(ddp, b, &n);
    for (int j = 1; j < n; j++) {
      kn_tensor *g0 = kn_grad(ps[j - 1]), *g1 = kn_grad(ps[j]);
      CHECK(g0 && g1 && (char *)kn_data(g1) == (char *)kn_data(g0) + kn_numel(g0) * 4,
            "bucket %d: .grad %d is not right after .grad %d in the bucket's buffer", b, j, j - 1);
    }
  }
}

/* ddp_compile: the DDP model's loss compiled (inductor, behind a compile
** counter that counts the graphs the backend gets: the pieces of the
** DDP split). */
static kn_compiled *compiled_loss;
static kn_compile_counter counter = {.inner = "inductor"};

static kn_value loss_fn(const kn_value *a, int n, void *ud) {
  (void)n, (void)ud;
  return kn_vtensor(loss_of(a[0].u.m, NULL, a[1].u.t, a[2].u.t, a[3].u.d));
}

/* The DDP model's loss: owned by the caller (kn_release). */
static kn_tensor *ddp_loss(kn_ddp *ddp, kn_tensor *x, kn_tensor *y, double scale) {
  if (!compiled_loss) return kn_retain(loss_of(NULL, ddp, x, y, scale));
  kn_value out, args[4] = {kn_vmodule(kn_ddp_module(ddp)), kn_vtensor(x), kn_vtensor(y),
                           kn_vdouble(scale)};
  if (kn_call(compiled_loss, args, 4, &out) != KN_OK) return NULL;
  kn_tensor *l = kn_retain(out.u.t);
  kn_value_release(out);
  return l;
}

static double item(kn_tensor *t) {
  double v = NAN;
  kn_item_double(t, &v);
  return v;
}

/* The bucket layout for a cap of 1048 bytes, in reverse parameter order
** (float32), PyTorch's rule (a bucket closes once it holds at least the
** cap): [4.bias 16 B, 4.weight 256 B, 2.bias 64 B, 2.weight 1024 B] (1360
** B), then [0.bias 64 B, 0.weight 512 B], left open at the end. */
static void check_buckets(kn_ddp *ddp, kn_module *m) {
  CHECK(kn_ddp_num_buckets(ddp) == 2, "expected 2 buckets, found %d", kn_ddp_num_buckets(ddp));
  const char *want[2][4] = {{"4.bias", "4.weight", "2.bias", "2.weight"}, {"0.bias", "0.weight"}};
  int wn[2] = {4, 2};
  for (int b = 0; b < 2 && kn_ddp_num_buckets(ddp) == 2; b++) {
    int n = 0;
    kn_tensor *const *ps = kn_ddp_bucket_params(ddp, b, &n);
    CHECK(n == wn[b], "bucket %d holds %d parameters, expected %d", b, n, wn[b]);
    for (int j = 0; j < n && j < wn[b]; j++)
      CHECK(ps[j] == kn_module_get(m, want[b][j]), "bucket %d slot %d is not %s", b, j, want[b][j]);
  }
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

static bool same_bits(kn_module *a, kn_module *b) {
  kn_tensor **pa, **pb;
  int n = kn_nn_parameters(a, &pa);
  bool same = n == kn_nn_parameters(b, &pb);
  for (int i = 0; same && i < n; i++)
    same = !memcmp(kn_data(pa[i]), kn_data(pb[i]), (size_t)kn_numel(pa[i]) * sizeof(float));
  free(pa);
  free(pb);
  return same;
}

/* One training step. Step 3 accumulates two half shards, the first under
** no_sync, each loss scaled by 1/2 (the reference's mean is the same). */
static void ddp_step(kn_ddp *ddp, kn_optimizer *opt, kn_tensor *x, kn_tensor *y, int step,
                     int rank, int world, double *global_loss) {
  int64_t n = B / world;
  kn_tensor *xs = kn_narrow(x, 0, rank * n, n), *ys = kn_narrow(y, 0, rank * n, n);
  double local = 0;
  if (step == 3) {
    bool prev = kn_ddp_set_sync(ddp, false);
    kn_tensor *l1 = ddp_loss(ddp, kn_narrow(xs, 0, 0, n / 2), kn_narrow(ys, 0, 0, n / 2), 0.5);
    CHECK(kn_backward(l1, NULL) == KN_OK, "no_sync backward");
    CHECK(kn_ddp_finish_backward(ddp) == KN_OK, "finish under no_sync does nothing");
    kn_ddp_set_sync(ddp, prev);
    kn_tensor *l2 = ddp_loss(ddp, kn_narrow(xs, 0, n / 2, n / 2), kn_narrow(ys, 0, n / 2, n / 2),
                             0.5);
    CHECK(kn_backward(l2, NULL) == KN_OK, "backward after no_sync");
    local = item(l1) + item(l2);
    kn_release(l1);
    kn_release(l2);
  } else {
    kn_tensor *l = ddp_loss(ddp, xs, ys, 1.0);
    CHECK(l && kn_backward(l, NULL) == KN_OK, "backward");
    /* compiled: the first graph reached the backend as the split's 2 pieces */
    if (compiled_loss && step == 0)
      CHECK(counter.frame_count == 2, "the DDP split gave %d pieces, expected 2",
            counter.frame_count);
    local = item(l);
    kn_release(l);
  }
  /* the backward's end averaged the gradients: on odd steps no
  ** kn_ddp_finish_backward at all (it does nothing on even ones) */
  if (step % 2 == 0) CHECK(kn_ddp_finish_backward(ddp) == KN_OK, "finish_backward step %d", step);
  if (as_view) check_grads_in_buckets(ddp);
  CHECK(kn_ddp_buckets_launched_in_backward(ddp) == kn_ddp_num_buckets(ddp),
        "step %d: %d of %d buckets launched during backward", step,
        kn_ddp_buckets_launched_in_backward(ddp), kn_ddp_num_buckets(ddp));
  CHECK(kn_optim_step(opt) == KN_OK, "step");
  kn_optim_zero_grad(opt);
  kn_tensor *lt = kn_full(0, NULL, kn_float(local), KN_FLOAT64);
  CHECK(kn_dist_all_reduce(lt, KN_REDUCE_AVG) == KN_OK, "loss all_reduce");
  *global_loss = item(lt);
}

static void train(int rank, int world, const char *dir, bool compiled) {
  kn_module *ref = mlp(100), *net = mlp(100 + (uint64_t)rank); /* ranks start apart */
  kn_ddp_options o = kn_ddp_default_options();
  o.bucket_cap_mb = 1048.0 / (1024.0 * 1024.0);
  o.gradient_as_bucket_view = as_view;
  kn_ddp *ddp = kn_ddp_wrap(net, &o);
  CHECK(ddp != NULL, "kn_ddp_wrap");
  if (!ddp) return;
  CHECK(same_bits(net, ref), "after wrap every rank holds rank 0's parameters");
  check_buckets(ddp, net);
  if (compiled)
    compiled_loss = kn_compile_fn(loss_fn, NULL, 4, "loss_fn", __FILE__, __LINE__,
                                  &(kn_compile_options){.backend_fn = kn_compile_counter_backend,
                                                        .backend_ud = &counter});
  kn_optim_options so = {.lr = 0.1, .momentum = 0.9};
  kn_tensor **pr, **pn;
  int npr = kn_nn_parameters(ref, &pr), npn = kn_nn_parameters(net, &pn);
  kn_optimizer *oref = kn_sgd(pr, npr, &so), *onet = kn_sgd(pn, npn, &so);
  free(pr);
  free(pn);
  kn_generator *g = kn_generator_new(7);
  for (int step = 0; step < STEPS; step++) {
    kn_scope_begin();
    kn_tensor *x = kn_randn(2, (int64_t[]){B, 8}, g, KN_FLOAT32);
    int64_t labels[B];
    for (int i = 0; i < B; i++) labels[i] = (i * 7 + step) % 4;
    kn_tensor *y = kn_from_array(labels, 1, (int64_t[]){B}, KN_INT64);
    kn_tensor *lr = loss_of(ref, NULL, x, y, 1.0);
    CHECK(kn_backward(lr, NULL) == KN_OK, "reference backward");
    CHECK(kn_optim_step(oref) == KN_OK, "reference step");
    kn_optim_zero_grad(oref);
    double gl = 0, rl = item(lr);
    ddp_step(ddp, onet, x, y, step, rank, world, &gl);
    CHECK(fabs(gl - rl) <= 1e-5 * fabs(rl), "step %d: DDP loss %.9g, one process %.9g", step, gl, rl);
    if (rank == 0) printf("rank 0: step %d loss ddp %.7f one process %.7f\n", step, gl, rl);
    kn_scope_end();
  }
  double d = max_rel_diff(net, ref);
  CHECK(d <= 1e-5, "final parameters differ from one process's by %.3g (relative)", d);
  char path[512];
  snprintf(path, sizeof path, "%s/ddp_rank0.safetensors", dir);
  if (rank == 0) CHECK(kn_save(net, path) == KN_OK, "rank 0 saves %s", path);
  CHECK(kn_dist_barrier() == KN_OK, "barrier after the save");
  kn_compiled_free(compiled_loss);
  compiled_loss = NULL;
  kn_module *fresh = mlp(12345);
  CHECK(kn_load(fresh, path) == KN_OK, "load %s", path);
  CHECK(same_bits(fresh, net), "rank 0's checkpoint holds this rank's parameters");
  kn_module_free(fresh);
  kn_generator_free(g);
  kn_optim_free(oref);
  kn_optim_free(onet);
  kn_ddp_free(ddp);
  kn_module_free(net);
  kn_module_free(ref);
}

/* Unused parameters: layer "1" of a two-layer Sequential. Used by no rank
** and without find_unused_parameters, the backward's end names it (on
** every rank: no collective is left half-issued). With it and used by the
** last rank only, every rank ends with the same averaged gradient (the last
** rank's own, from a backward before wrapping, divided by the world size). */
static void unused(int rank, int world) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(3);
  kn_module *m = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(4, 4, true, g),
                                                     kn_nn_linear(4, 4, true, g)});
  kn_tensor *x = kn_randn(2, (int64_t[]){2, 4}, g, KN_FLOAT32);
  for (int find = 0; find < 2; find++) {
    bool uses_1 = find && rank == world - 1; /* round 0: no rank uses it */
    float mine[16] = {0};
    kn_tensor *h = kn_nn_forward(kn_module_child(m, "0"), x);
    if (uses_1) h = kn_nn_forward(kn_module_child(m, "1"), h);
    CHECK(kn_backward(kn_sum(h), NULL) == KN_OK, "backward without DDP");
    kn_tensor *own = kn_grad(kn_module_get(m, "1.weight"));
    if (own) memcpy(mine, kn_data(own), sizeof mine);
    kn_nn_zero_grad(m);
    kn_ddp_options o = kn_ddp_default_options();
    o.find_unused_parameters = find;
    kn_ddp *ddp = kn_ddp_wrap(m, &o);
    CHECK(ddp, "wrap");
    if (!ddp) break;
    h = kn_nn_forward(kn_module_child(m, "0"), x);
    if (uses_1) h = kn_nn_forward(kn_module_child(m, "1"), h);
    kn_status st = kn_backward(kn_sum(h), NULL);
    if (!find)
      CHECK(st == KN_ESTATE && strstr(kn_last_error(), "found 2 without: '1.weight', '1.bias'"),
            "the backward's end names the unused parameters");
    if (find) {
      CHECK(st == KN_OK, "backward with find_unused_parameters");
      kn_tensor *avg = kn_grad(kn_module_get(m, "1.weight"));
      CHECK(avg != NULL, "a locally unused parameter gets the averaged gradient");
      kn_tensor *last = kn_from_floats(mine, 2, (int64_t[]){4, 4});
      CHECK(kn_dist_broadcast(last, world - 1) == KN_OK, "broadcast");
      for (int k = 0; avg && k < 16; k++)
        CHECK(((float *)kn_data(avg))[k] == ((float *)kn_data(last))[k] / (float)world,
              "1.weight grad element %d", k);
    }
    kn_nn_zero_grad(m);
    kn_ddp_free(ddp);
  }
  kn_module_free(m);
  kn_generator_free(g);
  kn_scope_end();
}

int ddp_mode(int rank, int world, const char *dir);
int ddp_mode(int rank, int world, const char *dir) {
  me = rank;
  train(rank, world, dir, false);
  as_view = true; /* the same training, the gradients left in the buckets */
  train(rank, world, dir, false);
  as_view = false;
  unused(rank, world);
  return fails;
}

/* The same training with the DDP model's loss compiled (inductor): the
** captured graph splits at the 2 buckets (DDPOptimizer), and losses and
** final parameters still equal one process's over the global batch. Each
** rank compiles into its own cache folder under dir. */
int ddp_compile_mode(int rank, int world, const char *dir);
int ddp_compile_mode(int rank, int world, const char *dir) {
  me = rank;
  char cache[512];
  snprintf(cache, sizeof cache, "%s/cache_rank_%d", dir, rank);
  setenv("KILN_CACHE_DIR", cache, 1);
  setenv("KILN_CFLAGS", "-O0 -ffp-contract=off", 1);
  train(rank, world, dir, true);
  return fails;
}
