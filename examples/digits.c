/*
** examples/digits.c: train an MLP and a small CNN on scikit-learn's digits
** (1797 8x8 images; scripts/fetch-digits.sh writes them as CSV) with the
** layers, optimizers, loaders and checkpoints of kiln.
**
**   scripts/fetch-digits.sh build/digits.csv
**   build/examples/digits build/digits.csv [trace_dir]
**
** Each model trains twice from the same initial weights on the same
** shuffled batches: eagerly, and with the forward pass + loss compiled
** (kn_compile) and the Adam step compiled (kn_optim_step_compiled). The
** two runs must give the same losses over the first epoch (within 1e-3
** relative: compiled reductions add in another order than eager kernels,
** and the rounding differences compound as training goes on, so later
** steps drift apart further); the program prints the first epoch's and the
** whole run's largest difference, steps/s for each (for the compiled run,
** over the steps that did not compile; those are counted and timed apart
** through a backend that counts graphs and hands them on to inductor),
** the test accuracy (the CNN's goal is
** >= 95%), then saves the CNN to a safetensors checkpoint, reloads it into
** a fresh model and checks the reloaded accuracy. Exit status 0 when all
** of that holds. Uses only the public API (#include <kiln/kiln.h>).
** Usage: digits [DATA.csv [TRACE_DIR [CHECKPOINT.safetensors]]]
*/
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NTEST 297
#define BATCH 64
#define SEED 1234

typedef struct split {
  kn_dataset *train, *test;
} split;

/* Pixels / 16 as float32 [N, 64], labels as int64 [N]; a seeded shuffle
** then the last NTEST samples for testing. */
static kn_status load_digits(const char *path, split *s) {
  kn_scope_begin();
  kn_tensor *t = kn_load_csv(path, KN_FLOAT32);
  kn_status st = t ? KN_OK : kn_last_status();
  if (st == KN_OK) {
    int64_t n = kn_size(t, 0);
    kn_tensor *x = kn_div_scalar(kn_narrow(t, 1, 0, 64), kn_float(16));
    kn_tensor *y = kn_to(kn_select(t, 1, 64), KN_INT64);
    kn_dataset *all = kn_dataset_new(2, (kn_tensor *[]){x, y});
    kn_loader *once = all ? kn_loader_new(all, n, true, false, SEED) : NULL;
    kn_tensor *b[2];
    if (once && kn_loader_next(once, b)) {
      kn_dataset *shuffled = kn_dataset_new(2, b);
      s->train = kn_dataset_slice(shuffled, 0, n - NTEST);
      s->test = kn_dataset_slice(shuffled, n - NTEST, NTEST);
      kn_dataset_free(shuffled);
    }
    st = s->train && s->test ? KN_OK : kn_last_status();
    kn_loader_free(once);
    kn_dataset_free(all);
  }
  kn_scope_end();
  return st;
}

static kn_module *make_mlp(kn_generator *g) {
  return kn_nn_sequential(3, (kn_module *[]){kn_nn_linear(64, 128, true, g), kn_nn_relu(),
                                             kn_nn_linear(128, 10, true, g)});
}

/* Input [B, 64] -> [B, 1, 8, 8] is done by the caller (kn_view). */
static kn_module *make_cnn(kn_generator *g) {
  kn_conv2d_options same = {.padding_same = true};
  return kn_nn_sequential(
      8, (kn_module *[]){kn_nn_conv2d(1, 16, 3, 3, &same, g), kn_nn_relu(),
                         kn_nn_maxpool2d(2, 0, 0), kn_nn_conv2d(16, 32, 3, 3, &same, g),
                         kn_nn_relu(), kn_nn_maxpool2d(2, 0, 0), kn_nn_flatten(1, -1),
                         kn_nn_linear(32 * 2 * 2, 10, true, g)});
}

static bool is_cnn(kn_module *m) { return kn_module_get(m, "0.weight") &&
                                          kn_ndim(kn_module_get(m, "0.weight")) == 4; }

static kn_tensor *logits(kn_module *m, kn_tensor *x) {
  if (is_cnn(m)) x = kn_reshape(x, 4, (int64_t[]){-1, 1, 8, 8});
  return kn_nn_forward(m, x);
}

/* The compiled function: loss = cross_entropy(model(x), y), written as
** nll_loss(log_softmax(.)) (the same value): AOT autograd traces the two ops'
** derivatives, so the default backend compiles forward and backward. */
static kn_value loss_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *out = logits(args[0].u.m, args[1].u.t);
  return kn_vtensor(kn_nll_loss(kn_log_softmax(out, 1), args[2].u.t, NULL, KN_REDUCTION_MEAN, -100));
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct run {
  double *losses; /* one per step (owned) */
  int nsteps;
  double seconds, accuracy;
  int ncompiling;           /* steps that compiled a graph (first call, recompiles) */
  double compiling_seconds; /* their time: tracing, AOT autograd, code generation */
} run;

/* The compiled runs' backend: counts the graphs it compiles, so that the
** steps which compiled can be timed apart from the others, and hands each
** graph on to inductor, the default backend. This is how backends compose
** (kn_backend_compile, as PyTorch backends call compile_fx). */
static int graphs_compiled;

static kn_status counting_inductor(kn_graph_module *gm, kn_tensor *const *example_inputs,
                                   int ninputs, void *ud, kn_compiled_graph *out) {
  (void)ud;
  graphs_compiled++;
  return kn_backend_compile("inductor", gm, example_inputs, ninputs, out);
}

/* Fraction of test samples classified correctly (eval mode, no grad). */
static double accuracy(kn_module *m, kn_dataset *test) {
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  kn_nn_train(m, false);
  kn_tensor *pred = kn_argmax_dim(logits(m, kn_dataset_tensor(test, 0)), 1, false);
  kn_tensor *hits = kn_sum(kn_to(kn_eq(pred, kn_dataset_tensor(test, 1)), KN_FLOAT64));
  double h = NAN;
  if (hits) kn_item_double(hits, &h);
  kn_nn_train(m, true);
  kn_no_grad_end(prev);
  kn_scope_end();
  return h / (double)kn_dataset_len(test);
}

/* One training step; the loss value goes to *loss. */
static kn_status step(kn_module *m, kn_optimizer *opt, kn_compiled *f, kn_tensor **b,
                      double *loss) {
  kn_scope_begin();
  kn_tensor *l = NULL;
  kn_value out = kn_vnone();
  if (f) {
    kn_value args[3] = {kn_vmodule(m), kn_vtensor(b[0]), kn_vtensor(b[1])};
    if (kn_call(f, args, 3, &out) == KN_OK) l = out.u.t;
  } else {
    l = loss_fn((kn_value[]){kn_vmodule(m), kn_vtensor(b[0]), kn_vtensor(b[1])}, 3, NULL).u.t;
  }
  kn_status st = l ? kn_item_double(l, loss) : kn_last_status();
  if (st == KN_OK) st = kn_backward(l, NULL);
  if (st == KN_OK)
    st = f ? kn_optim_step_compiled(opt, &(kn_compile_options){.backend = "counting_inductor"})
           : kn_optim_step(opt);
  kn_optim_zero_grad(opt);
  kn_value_release(out);
  kn_scope_end();
  return st;
}

static kn_status train(kn_module *m, const split *s, int epochs, bool compiled, run *r) {
  kn_tensor **ps = NULL;
  int np = kn_nn_parameters(m, &ps);
  kn_optimizer *opt = np > 0 ? kn_adam(ps, np, &(kn_optim_options){.lr = 3e-3}) : NULL;
  free(ps);
  kn_loader *ld = kn_loader_new(s->train, BATCH, true, false, SEED);
  kn_compiled *f = compiled ? kn_compile_fn(loss_fn, NULL, 3, "loss_fn", __FILE__, __LINE__,
                                            &(kn_compile_options){
                                                .backend = "counting_inductor",
                                                .arg_names = (const char *const[]){
                                                    "model", "x", "y", NULL}})
                            : NULL;
  kn_status st = opt && ld && (f || !compiled) ? KN_OK : kn_last_status();
  r->nsteps = 0;
  r->losses = malloc(sizeof *r->losses * (size_t)(epochs * kn_loader_num_batches(ld) + 1));
  r->seconds = r->compiling_seconds = 0;
  r->ncompiling = 0;
  for (int e = 0; e < epochs && st == KN_OK; e++) {
    kn_tensor *b[2];
    kn_loader_reset(ld);
    kn_scope_begin();
    while (st == KN_OK && kn_loader_next(ld, b)) {
      int graphs = graphs_compiled;
      double t0 = now_s();
      st = step(m, opt, f, b, &r->losses[r->nsteps++]);
      double dt = now_s() - t0;
      if (graphs_compiled != graphs) { /* this step compiled: not a training-speed sample */
        r->ncompiling++;
        r->compiling_seconds += dt;
      } else {
        r->seconds += dt;
      }
    }
    kn_scope_end();
  }
  r->accuracy = accuracy(m, s->test);
  kn_compiled_free(f);
  kn_loader_free(ld);
  kn_optim_free(opt);
  return st;
}

/* Train `make`'s model eagerly and compiled from the same weights. */
static int compare_runs(const char *name, kn_module *(*make)(kn_generator *), const split *s,
                        int epochs, double goal, kn_module **keep) {
  kn_generator *g1 = kn_generator_new(7), *g2 = kn_generator_new(7);
  kn_module *a = make(g1), *b = make(g2);
  run ra = {0}, rb = {0};
  int rc = 1;
  if (!a || !b || train(a, s, epochs, false, &ra) != KN_OK ||
      train(b, s, epochs, true, &rb) != KN_OK) {
    fprintf(stderr, "%s: %s\n", name, kn_last_error());
    goto done;
  }
  double worst = 0, drift = 0;
  int per_epoch = ra.nsteps / epochs;
  for (int i = 0; i < ra.nsteps; i++) {
    double d = fabs(ra.losses[i] - rb.losses[i]) / fmax(fabs(ra.losses[i]), 1e-6);
    if (i < per_epoch) worst = fmax(worst, d);
    drift = fmax(drift, d);
  }
  printf("%s: %lld parameters, %d epochs, %d steps of batch %d (last batch of each epoch %lld)\n",
         name, (long long)kn_nn_num_parameters(a), epochs, ra.nsteps, BATCH,
         (long long)(kn_dataset_len(s->train) % BATCH));
  printf("  loss: first %.4f, last %.4f (eager) / %.4f (compiled); max relative difference "
         "%.2e in the first epoch, %.2e in all\n",
         ra.losses[0], ra.losses[ra.nsteps - 1], rb.losses[rb.nsteps - 1], worst, drift);
  printf("  steps/s: eager %.1f, compiled %.1f (not counting the %d steps that compiled, "
         "%.2f s)\n", ra.nsteps / ra.seconds, (rb.nsteps - rb.ncompiling) / rb.seconds,
         rb.ncompiling, rb.compiling_seconds);
  printf("  test accuracy: eager %.2f%%, compiled %.2f%% (goal >= %.0f%%)\n",
         100 * ra.accuracy, 100 * rb.accuracy, 100 * goal);
  rc = worst < 1e-3 && ra.accuracy >= goal && rb.accuracy >= goal ? 0 : 1;
  if (keep) *keep = b, b = NULL;
done:
  free(ra.losses), free(rb.losses);
  kn_module_free(a), kn_module_free(b);
  kn_generator_free(g1), kn_generator_free(g2);
  return rc;
}

static int checkpoint_round_trip(kn_module *cnn, const split *s, const char *path) {
  kn_generator *g = kn_generator_new(99);
  kn_module *fresh = make_cnn(g);
  double before = accuracy(cnn, s->test), fresh_acc = accuracy(fresh, s->test);
  int rc = 1;
  if (kn_save(cnn, path) == KN_OK && kn_load(fresh, path) == KN_OK) {
    double after = accuracy(fresh, s->test);
    printf("checkpoint %s: accuracy %.2f%% saved, %.2f%% before loading, %.2f%% reloaded\n",
           path, 100 * before, 100 * fresh_acc, 100 * after);
    rc = after == before ? 0 : 1;
  } else {
    fprintf(stderr, "checkpoint: %s\n", kn_last_error());
  }
  kn_module_free(fresh);
  kn_generator_free(g);
  return rc;
}

int main(int argc, char **argv) {
  const char *csv = argc > 1 ? argv[1] : "digits.csv";
  if (argc > 2 && kn_trace_enable(argv[2]) != KN_OK) {
    fprintf(stderr, "error: %s\n", kn_last_error());
    return 1;
  }
  split s = {NULL, NULL};
  if (kn_register_backend("counting_inductor", counting_inductor, NULL) != KN_OK ||
      load_digits(csv, &s) != KN_OK) {
    fprintf(stderr, "error: %s\n(write the data with scripts/fetch-digits.sh %s)\n",
            kn_last_error(), csv);
    return 1;
  }
  printf("kiln %s: digits, %lld training and %lld test images\n", kn_version(),
         (long long)kn_dataset_len(s.train), (long long)kn_dataset_len(s.test));
  kn_module *cnn = NULL;
  int rc = compare_runs("MLP 64-128-10", make_mlp, &s, 15, 0.93, NULL);
  rc |= compare_runs("CNN conv16-conv32-linear", make_cnn, &s, 15, 0.95, &cnn);
  if (cnn) {
    kn_nn_print(cnn, stdout);
    rc |= checkpoint_round_trip(cnn, &s, argc > 3 ? argv[3] : "digits_cnn.safetensors");
  }
  kn_module_free(cnn);
  kn_dataset_free(s.train), kn_dataset_free(s.test);
  printf("%s\n", rc ? "FAILED" : "ok");
  return rc;
}
