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
** (kn_bench_openblas_core, printed), so it gets its best GEMM. Without
** /usr/bin/python3 and torch the torch lines are skipped.
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


/* Process CPU time at 1 thread, else wall time. */
static double clock_s(int threads) {
  return threads == 1 ? kn_bench_clock(CLOCK_PROCESS_CPUTIME_ID) : kn_bench_wall_s();
}

/* Median ms per kiln step at `threads` threads (0: kiln's default). */
static double kiln_ms(int threads) {
  kn_generator *g = kn_generator_new(0);
  kn_module *m = make_cnn(g);
  kn_tensor **ps = NULL;
  int n = kn_nn_parameters(m, &ps);
  kn_optimizer *opt = kn_adam(ps, n, &(kn_optim_options){.lr = 3e-3});
  free(ps);
  kn_compiled *f = kn_compile_fn(loss_fn, NULL, 3, "loss_fn", __FILE__, __LINE__, NULL);
  kn_tensor *x = kn_rand(KN_SHAPE(64, 1, 8, 8), g, KN_FLOAT32);
  kn_tensor *y = kn_randint(0, 10, KN_SHAPE(64), g, KN_INT64);
  double t[REPS];
  for (int w = 0; w < 3; w++) step(f, m, opt, x, y); /* compile, create state */
  for (int r = 0; r < REPS; r++) {
    double t0 = clock_s(threads);
    for (int s = 0; s < STEPS; s++)
      if (step(f, m, opt, x, y) != KN_OK) {
        fprintf(stderr, "bench_digits: %s\n", kn_last_error());
        exit(1);
      }
    t[r] = (clock_s(threads) - t0) / STEPS * 1e3;
  }
  kn_release(x), kn_release(y);
  kn_compiled_free(f);
  kn_optim_free(opt);
  kn_module_free(m);
  kn_generator_free(g);
  qsort(t, REPS, sizeof *t, kn_bench_cmp_double);
  return t[REPS / 2];
}

static const char *const torch_script =
    "import time, torch, torch.nn as nn\n"
    "torch.manual_seed(0)\n"
    "m = nn.Sequential(nn.Conv2d(1, 16, 3, padding='same'), nn.ReLU(), nn.MaxPool2d(2),\n"
    "    nn.Conv2d(16, 32, 3, padding='same'), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),\n"
    "    nn.Linear(128, 10))\n"
    "opt = torch.optim.Adam(m.parameters(), lr=3e-3)\n"
    "x = torch.rand(64, 1, 8, 8); y = torch.randint(0, 10, (64,))\n"
    "def step():\n"
    "    loss = nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step()\n"
    "    opt.zero_grad(set_to_none=True)\n"
    "default = torch.get_num_threads()\n"
    "for nt in (default, 1, 2):\n"
    "    torch.set_num_threads(nt)\n"
    "    clock = time.process_time if nt == 1 else time.perf_counter\n"
    "    for _ in range(3): step()\n"
    "    ts = []\n"
    "    for _ in range(7):\n"
    "        t0 = clock()\n"
    "        for _ in range(20): step()\n"
    "        ts.append((clock() - t0) / 20 * 1e3)\n"
    "    print(sorted(ts)[3])\n";

/* Median ms per torch step at its default thread count, 1 and 2 threads;
** false when torch is missing. */
static bool torch_ms(const char *core, double ms[3]) {
  char env[128];
  snprintf(env, sizeof env, "%s%s", core ? "OPENBLAS_CORETYPE=" : "", core ? core : "");
  return kn_bench_python(torch_script, env, ms, 3) == 3;
}

int main(void) {
  double k[3] = {kiln_ms(0), 0, 0};
  for (int t = 1; t <= 2; t++) {
    kn_set_num_threads(t);
    k[t] = kiln_ms(t);
  }
  printf("BENCH digits_cnn_step_ms %.3f ms\n", k[0]);
  for (int t = 1; t <= 2; t++) printf("BENCH cnn_step_ms_%dT %.3f ms\n", t, k[t]);
  const char *core = kn_bench_openblas_core();
  printf("BENCH_INFO torch OPENBLAS_CORETYPE=%s\n", core ? core : "(unset: OpenBLAS's choice)");
  double t[3];
  if (!torch_ms(core, t)) {
    printf("BENCH_INFO digits_cnn_step_torch skipped (no /usr/bin/python3 with torch)\n");
    return 0;
  }
  printf("BENCH digits_cnn_step_torch_ms %.3f ms\n", t[0]);
  for (int n = 1; n <= 2; n++) printf("BENCH cnn_step_torch_ms_%dT %.3f ms\n", n, t[n]);
  printf("RATIO digits_cnn_step_vs_torch %.3f (default threads; goal >= 1.5)\n", t[0] / k[0]);
  printf("RATIO cnn_step_vs_torch %.3f (1 thread; goal >= 1.2)\n", t[1] / k[1]);
  printf("RATIO cnn_step_vs_torch_2T %.3f (goal >= 1.2)\n", t[2] / k[2]);
  return 0;
}
