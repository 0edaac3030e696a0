/*
** examples/ddp_digits.c: data-parallel training of an MLP on scikit-learn's
** digits with kiln's DistributedDataParallel (docs/DISTRIBUTED.md).
**
**   scripts/fetch-digits.sh build/digits.csv
**   mpirun -np 2 build/examples/ddp_digits build/digits.csv build/ddp_digits.safetensors
**   (as root: mpirun --allow-run-as-root; on fewer cores than ranks: --oversubscribe)
**
** Every rank draws the same shuffled global batches of 64 and trains on its
** share (64 / world rows); DDP averages the gradients, so the run equals one
** process training on the whole batch. The program checks that: during the
** first epoch each rank also trains a second copy of the model alone on the
** whole batch, and the losses must agree within 1e-5 (relative). Then it
** trains on, prints the test accuracy (goal >= 90%), rank 0 saves the
** checkpoint and every rank reloads it into a fresh model. Without mpirun
** it runs as one rank. Exit status 0 when all of that holds.
** Usage: ddp_digits DATA.csv [CHECKPOINT.safetensors]
*/
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define NTEST 297
#define BATCH 64
#define EPOCHS 8
#define SEED 1234

static int rank, world;

static kn_status load_digits(const char *path, kn_dataset **train, kn_dataset **test) {
  kn_scope_begin();
  kn_tensor *t = kn_load_csv(path, KN_FLOAT32);
  kn_status st = t ? KN_OK : kn_last_status();
  if (st == KN_OK) {
    int64_t n = kn_size(t, 0);
    kn_tensor *x = kn_div_scalar(kn_narrow(t, 1, 0, 64), kn_float(16));
    kn_tensor *y = kn_to(kn_select(t, 1, 64), KN_INT64);
    kn_dataset *all = kn_dataset_new(2, (kn_tensor *[]){x, y});
    kn_loader *once = all ? kn_loader_new(all, n, true, false, SEED) : NULL; /* a shuffle */
    kn_tensor *b[2];
    if (once && kn_loader_next(once, b)) {
      kn_dataset *shuffled = kn_dataset_new(2, b);
      *train = kn_dataset_slice(shuffled, 0, n - NTEST);
      *test = kn_dataset_slice(shuffled, n - NTEST, NTEST);
      kn_dataset_free(shuffled);
    }
    st = *train && *test ? KN_OK : kn_last_status();
    kn_loader_free(once);
    kn_dataset_free(all);
  }
  kn_scope_end();
  return st;
}

static kn_module *make_mlp(void) {
  kn_generator *g = kn_generator_new(SEED + (uint64_t)rank); /* DDP makes rank 0's win */
  kn_module *m = kn_nn_sequential(3, (kn_module *[]){kn_nn_linear(64, 128, true, g), kn_nn_relu(),
                                                     kn_nn_linear(128, 10, true, g)});
  kn_generator_free(g);
  return m;
}

static double accuracy(kn_module *m, kn_dataset *test) {
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  kn_tensor *pred = kn_argmax_dim(kn_nn_forward(m, kn_dataset_tensor(test, 0)), 1, false);
  kn_tensor *hits = kn_sum(kn_to(kn_eq(pred, kn_dataset_tensor(test, 1)), KN_FLOAT64));
  double h = NAN;
  if (hits) kn_item_double(hits, &h);
  kn_no_grad_end(prev);
  kn_scope_end();
  return h / (double)kn_dataset_len(test);
}

static double loss_value(kn_tensor *l) {
  double v = NAN;
  if (l) kn_item_double(l, &v);
  return v;
}

/* One step of m (DDP-wrapped when ddp) on rows [lo, lo + n) of batch b;
** returns the loss averaged over the ranks (NAN on error). */
static double step(kn_module *m, kn_ddp *ddp, kn_optimizer *opt, kn_tensor **b, int64_t lo,
                   int64_t n) {
  kn_tensor *x = kn_narrow(b[0], 0, lo, n), *y = kn_narrow(b[1], 0, lo, n);
  kn_tensor *out = ddp ? kn_ddp_forward(ddp, x) : kn_nn_forward(m, x);
  kn_tensor *l = kn_cross_entropy(out, y, NULL, KN_REDUCTION_MEAN, -100, 0.0);
  if (!l || kn_backward(l, NULL) != KN_OK) return NAN;
  /* (DDP averaged the gradients at the end of kn_backward) */
  if (kn_optim_step(opt) != KN_OK) return NAN;
  kn_optim_zero_grad(opt);
  kn_tensor *avg = kn_full(0, NULL, kn_float(loss_value(l)), KN_FLOAT64);
  if (ddp && kn_dist_all_reduce(avg, KN_REDUCE_AVG) != KN_OK) return NAN;
  return loss_value(avg);
}

static kn_optimizer *adam(kn_module *m) {
  kn_tensor **ps;
  int n = kn_nn_parameters(m, &ps);
  kn_optimizer *o = kn_adam(ps, n, &(kn_optim_options){.lr = 1e-2});
  free(ps);
  return o;
}

/* Train EPOCHS epochs; in the first, the reference trains alongside on the
** whole batch. Returns the largest relative loss difference (NAN on error). */
static double train(kn_module *net, kn_ddp *ddp, kn_module *ref, kn_dataset *train_set) {
  kn_optimizer *o = adam(net), *oref = adam(ref);
  kn_loader *ld = kn_loader_new(train_set, BATCH, true, true, SEED); /* same batches everywhere */
  double worst = 0, last = NAN;
  int64_t share = BATCH / world;
  for (int e = 0; e < EPOCHS && !isnan(worst); e++) {
    for (;;) {
      kn_scope_begin(); /* the batch and every tensor of the step */
      kn_tensor *b[2];
      bool more = kn_loader_next(ld, b);
      if (more) {
        last = step(net, ddp, o, b, rank * share, share);
        if (e == 0) {
          double r = step(ref, NULL, oref, b, 0, BATCH);
          worst = isnan(last) || isnan(r) ? NAN : fmax(worst, fabs(last - r) / fabs(r));
        }
      }
      kn_scope_end();
      if (!more || isnan(last)) break;
    }
    if (rank == 0) printf("epoch %d: loss %.4f\n", e, last);
    kn_loader_reset(ld);
  }
  kn_loader_free(ld);
  kn_optim_free(o);
  kn_optim_free(oref);
  return isnan(last) ? NAN : worst;
}

static int run(const char *data, const char *ckpt) {
  kn_dataset *train_set = NULL, *test_set = NULL;
  if (load_digits(data, &train_set, &test_set) != KN_OK) return 1;
  kn_module *net = make_mlp();
  rank = 0; /* the reference starts from rank 0's weights, as DDP does */
  int me = kn_dist_rank();
  kn_module *ref = make_mlp();
  rank = me;
  kn_ddp *ddp = kn_ddp_wrap(net, NULL);
  int rc = 1;
  if (ddp) {
    double worst = train(net, ddp, ref, train_set);
    double acc = accuracy(net, test_set);
    if (rank == 0)
      printf("%d ranks x %d rows: first epoch's losses vs one process over %d rows: largest "
             "relative difference %.2g (goal <= 1e-5); test accuracy %.2f%% (goal >= 90%%)\n",
             world, BATCH / world, BATCH, worst, 100 * acc);
    rc = worst <= 1e-5 && acc >= 0.9 ? 0 : 1;
    if (ckpt && rank == 0 && kn_save(net, ckpt) != KN_OK) rc = 1;
    if (ckpt && kn_dist_barrier() == KN_OK) {
      kn_module *fresh = make_mlp();
      double again = kn_load(fresh, ckpt) == KN_OK ? accuracy(fresh, test_set) : NAN;
      if (rank == 0) printf("checkpoint %s written by rank 0: reloaded accuracy %.2f%%\n", ckpt,
                            100 * again);
      if (again != acc) rc = 1;
      kn_module_free(fresh);
    }
  }
  kn_ddp_free(ddp);
  kn_module_free(net);
  kn_module_free(ref);
  kn_dataset_free(train_set);
  kn_dataset_free(test_set);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA.csv [CHECKPOINT.safetensors]\n", argv[0]);
    return 2;
  }
  if (kn_dist_init() != KN_OK) {
    fprintf(stderr, "error: %s\n", kn_last_error());
    return 1;
  }
  rank = kn_dist_rank();
  world = kn_dist_world_size();
  if (BATCH % world) {
    fprintf(stderr, "error: expected a world size dividing %d, found %d\n", BATCH, world);
    return 2;
  }
  int rc = run(argv[1], argc > 2 ? argv[2] : NULL);
  if (rc) fprintf(stderr, "rank %d: failed (last error: %s)\n", rank, kn_last_error());
  kn_dist_finalize();
  return rc;
}
