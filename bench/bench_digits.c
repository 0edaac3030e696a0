/*
** bench_digits.c: one training step of the digits CNN (examples/digits.c:
** conv16-conv32-linear, Adam, cross-entropy, batch 64 of 8x8 images), kiln
** compiled (forward + loss compiled, eager backward, compiled Adam step)
** against torch 1.13 eager running the same model and batch in a python3
** child process of this same run. Prints
**   BENCH digits_cnn_step_ms (kiln compiled), BENCH digits_cnn_step_torch_ms,
**   RATIO digits_cnn_step_vs_torch (torch time / kiln time; goal >= 1.5):
**     both sides with their default thread counts (the machine's cores),
**     wall-clock medians;
**   BENCH cnn_step_ms_{1T,2T}, BENCH cnn_step_torch_ms_{1T,2T} and
**   RATIO cnn_step_vs_torch (1 thread) / cnn_step_vs_torch_2T (goal >= 1.2):
**     the same step with kn_set_num_threads / torch.set_num_threads at 1 and
**     2; process CPU time at 1 thread (on a shared machine wall time mostly
**     measures the other processes), wall time at 2.
** torch runs with OPENBLAS_CORETYPE set to the best core this CPU allows
** (kn_bench_openblas_core, printed), so it gets its best GEMM, in Python
** processes beside the bench that time a turn of STEPS steps on request:
** kiln and torch take REPS turns each in alternation (a pause before each),
** the medians compared, so both see the same moments of the machine. torch
** runs twice, with libgomp's default wait policy and with
** OMP_WAIT_POLICY=passive (kn_bench_torch), and the faster counts.
** Without /usr/bin/python3 and torch the torch lines are skipped.
*/
#include <kiln/kiln.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"
#include <unistd.h>

#define REPS 7
#define STEPS 20

static kn_value loss_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *out = kn_nn_forward(args[0].u.m, args[1].u.t);
  return kn_vtensor(kn_cross_entropy(out, args[2].u.t, NULL, KN_REDUCTION_MEAN, -100, 0.0));
}

static kn_module *make_cnn(kn_generator *g) {
  kn_conv2d_options same = {.padding_same = true};
  return kn_nn_sequential(
      8, (kn_module *[]){kn_nn_conv2d(1, 16, 3, 3, &same, g), kn_nn_relu(),
                         kn_nn_maxpool2d(2, 0, 0), kn_nn_conv2d(16, 32, 3, 3, &same, g),
                         kn_nn_relu(), kn_nn_maxpool2d(2, 0, 0), kn_nn_flatten(1, -1),
                         kn_nn_linear(32 * 2 * 2, 10, true, g)});
}

static kn_status step(kn_compiled *f, kn_module *m, kn_optimizer *opt, kn_tensor *x,
                      kn_tensor *y) {
  kn_scope_begin();
  kn_value args[3] = {kn_vmodule(m), kn_vtensor(x), kn_vtensor(y)}, out;
  kn_status st = kn_call(f, args, 3, &out);
  if (st == KN_OK) st = kn_backward(out.u.t, NULL);
  if (st == KN_OK) st = kn_optim_step_compiled(opt, NULL);
  kn_optim_zero_grad(opt);
  if (out.kind == KN_VTENSOR) kn_value_release(out);
  kn_scope_end();
  return st;
}

/* The kiln side: the CNN, its Adam state, the compiled loss and a batch. */
typedef struct kiln_side {
  kn_generator *g;
  kn_module *m;
  kn_optimizer *opt;
  kn_compiled *f;
  kn_tensor *x, *y;
} kiln_side;

static void kiln_new(kiln_side *k) {
  k->g = kn_generator_new(0);
  k->m = make_cnn(k->g);
  kn_tensor **ps = NULL;
  int n = kn_nn_parameters(k->m, &ps);
  k->opt = kn_adam(ps, n, &(kn_optim_options){.lr = 3e-3});
  free(ps);
  k->f = kn_compile_fn(loss_fn, NULL, 3, "loss_fn", __FILE__, __LINE__, NULL);
  k->x = kn_rand(KN_SHAPE(64, 1, 8, 8), k->g, KN_FLOAT32);
  k->y = kn_randint(0, 10, KN_SHAPE(64), k->g, KN_INT64);
}

static void kiln_free(kiln_side *k) {
  kn_release(k->x), kn_release(k->y);
  kn_compiled_free(k->f);
  kn_optim_free(k->opt);
  kn_module_free(k->m);
  kn_generator_free(k->g);
}

/* ms per step over a turn of STEPS steps at `threads` threads (0: default). */
static double kiln_turn(kiln_side *k, int threads) {
  double t0 = kn_bench_turn_clock(threads);
  for (int s = 0; s < STEPS; s++)
    if (step(k->f, k->m, k->opt, k->x, k->y) != KN_OK) {
      fprintf(stderr, "bench_digits: %s\n", kn_last_error());
      exit(1);
    }
  return (kn_bench_turn_clock(threads) - t0) / STEPS * 1e3;
}

/* The torch side: the same model in Python processes beside the bench
** (kn_bench_torch, KN_BENCH_TORCH_LOOP). */
static const char *const torch_body =
    KN_BENCH_TORCH_HEAD
    "m = nn.Sequential(nn.Conv2d(1, 16, 3, padding='same'), nn.ReLU(), nn.MaxPool2d(2),\n"
    "    nn.Conv2d(16, 32, 3, padding='same'), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),\n"
    "    nn.Linear(128, 10))\n"
    "opt = torch.optim.Adam(m.parameters(), lr=3e-3)\n"
    "x = torch.rand(64, 1, 8, 8); y = torch.randint(0, 10, (64,))\n"
    "def step():\n"
    "    loss = nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step()\n"
    "    opt.zero_grad(set_to_none=True)\n"
    KN_BENCH_TORCH_LOOP;

/* Kiln and (tp non-NULL) torch at `threads` threads: three warm-up steps
** each, then REPS turns of each in alternation; medians into ms[0] (kiln)
** and ms[1] (torch's faster wait policy, -1 when absent; *passive which). */
static void time_turns(kiln_side *k, kn_bench_torch *tp, int threads, double ms[2],
                       bool *passive) {
  double t[3][REPS], v[2];
  for (int w = 0; w < 3; w++) step(k->f, k->m, k->opt, k->x, k->y); /* compile, state */
  if (tp) kn_bench_torch_turn(tp, threads, v);
  for (int r = 0; r < REPS; r++) {
    kn_bench_settle();
    t[0][r] = kiln_turn(k, threads);
    kn_bench_settle();
    if (tp) kn_bench_torch_turn(tp, threads, v);
    t[1][r] = tp ? v[0] : -1, t[2][r] = tp ? v[1] : -1;
  }
  ms[0] = kn_bench_median(t[0], REPS);
  ms[1] = tp ? kn_bench_torch_best(tp, t[1], t[2], REPS, passive) : -1;
}

int main(void) {
  const char *core = kn_bench_openblas_core();
  printf("BENCH_INFO torch OPENBLAS_CORETYPE=%s\n", core ? core : "(unset: OpenBLAS's choice)");
  char script[2048];
  snprintf(script, sizeof script, "S = %d\n%s", STEPS, torch_body);
  kn_bench_torch tp = {0};
  bool torch = kn_bench_torch_start(&tp, script, core, "rep 1"), passive[3] = {0};
  kiln_side k;
  kiln_new(&k);
  double ms[3][2];
  for (int t = 0; t <= 2; t++) {
    if (t) kn_set_num_threads(t);
    time_turns(&k, torch ? &tp : NULL, t, ms[t], &passive[t]);
  }
  kiln_free(&k);
  kn_bench_torch_stop(&tp);
  printf("BENCH digits_cnn_step_ms %.3f ms\n", ms[0][0]);
  for (int t = 1; t <= 2; t++) printf("BENCH cnn_step_ms_%dT %.3f ms\n", t, ms[t][0]);
  if (!torch || ms[0][1] < 0 || ms[1][1] < 0 || ms[2][1] < 0) {
    printf("BENCH_INFO digits_cnn_step_torch skipped (no /usr/bin/python3 with torch, or it "
           "stopped)\n");
    return 0;
  }
  printf("BENCH digits_cnn_step_torch_ms %.3f ms (%s, the faster)\n", ms[0][1],
         kn_bench_torch_policy(passive[0]));
  for (int n = 1; n <= 2; n++)
    printf("BENCH cnn_step_torch_ms_%dT %.3f ms (%s, the faster)\n", n, ms[n][1],
           kn_bench_torch_policy(passive[n]));
  printf("RATIO digits_cnn_step_vs_torch %.3f (default threads; goal >= 1.5)\n",
         ms[0][1] / ms[0][0]);
  printf("RATIO cnn_step_vs_torch %.3f (1 thread; goal >= 1.2)\n", ms[1][1] / ms[1][0]);
  printf("RATIO cnn_step_vs_torch_2T %.3f (goal >= 1.2)\n", ms[2][1] / ms[2][0]);
  return 0;
}
