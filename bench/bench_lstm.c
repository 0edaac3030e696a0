/*
** bench_lstm.c: one training step of an LSTM (1 layer, input 64, hidden 256,
** batch 32, 64 time steps, batch_first; MSE loss against a fixed target, SGD)
** with the step's function compiled by kiln's inductor backend (forward and
** loss compiled, the compiled backward run by kn_backward, eager SGD),
** against Debian's torch 1.13 eager running the same model, at 1 and at 2
** threads on both sides. torch runs with OPENBLAS_CORETYPE set to this CPU's
** core (Debian's OpenBLAS otherwise falls back to its SSE3 kernels), printed
** as BENCH_INFO, in Python processes beside the bench that time a turn of
** STEPS steps on request: kiln and torch take REPS turns each in
** alternation (a pause before each), the medians compared, so both see the
** same moments of the machine; torch runs with libgomp's default wait policy
** and with OMP_WAIT_POLICY=passive (kn_bench_torch), and the faster counts.
** Prints
**   BENCH lstm_compile_cold_ms  the first step with an empty code cache:
**                               capture, AOT autograd, code generation and
**                               the C compiler, forward and backward (goal
**                               <= 2000), with the kernel and extern-call
**                               counts of the compiled graphs;
**   BENCH lstm_step_eager_ms    kiln eager, 1 thread (for reference);
**   BENCH lstm_step_ms / lstm_step_torch_ms per thread count;
**   RATIO lstm_step_vs_torch    torch time / kiln time (goal >= 1.2), once
**                               per thread count.
** Medians of process CPU time at 1 thread (on a shared machine wall time
** mostly measures the other processes), wall time at 2. Without
** /usr/bin/python3 and torch the torch lines are skipped.
*/
#include <kiln/kiln.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_util.h"

#define REPS 7
#define STEPS 3
#define B 32
#define T 64
#define IN 64
#define H 256

static kn_value loss_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *y = kn_nn_forward(args[0].u.m, args[1].u.t);
  return kn_vtensor(kn_mse_loss(y, args[2].u.t, KN_REDUCTION_MEAN));
}

typedef struct setup {
  kn_generator *g;
  kn_module *m;
  kn_optimizer *opt;
  kn_compiled *f;
  kn_tensor *x, *y;
} setup;

static void setup_init(setup *s, bool compiled) {
  s->g = kn_generator_new(0);
  s->m = kn_nn_lstm(IN, H, 1, true, true, s->g);
  kn_tensor **ps = NULL;
  int n = kn_nn_parameters(s->m, &ps);
  s->opt = kn_sgd(ps, n, &(kn_optim_options){.lr = 1e-2});
  free(ps);
  s->f = compiled ? kn_compile_fn(loss_fn, NULL, 3, "lstm_loss", __FILE__, __LINE__, NULL) : NULL;
  s->x = kn_randn(KN_SHAPE(B, T, IN), s->g, KN_FLOAT32);
  s->y = kn_randn(KN_SHAPE(B, T, H), s->g, KN_FLOAT32);
  if (!s->m || !s->opt || (compiled && !s->f) || !s->x || !s->y) {
    fprintf(stderr, "bench_lstm: %s\n", kn_last_error());
    exit(1);
  }
}

static void setup_fini(setup *s) {
  kn_release(s->x), kn_release(s->y);
  kn_compiled_free(s->f);
  kn_optim_free(s->opt);
  kn_module_free(s->m);
  kn_generator_free(s->g);
}

static void step(setup *s) {
  kn_scope_begin();
  kn_value args[3] = {kn_vmodule(s->m), kn_vtensor(s->x), kn_vtensor(s->y)}, out = kn_vnone();
  kn_status st = KN_OK;
  if (s->f) st = kn_call(s->f, args, 3, &out);
  else out = loss_fn(args, 3, NULL);
  if (st == KN_OK && !out.u.t) st = kn_last_status();
  if (st == KN_OK) st = kn_backward(out.u.t, NULL);
  if (st == KN_OK) st = kn_optim_step(s->opt);
  kn_optim_zero_grad(s->opt);
  if (s->f) kn_value_release(out); /* eager: the scope owns it */
  kn_scope_end();
  if (st != KN_OK) {
    fprintf(stderr, "bench_lstm: %s\n", kn_last_error());
    exit(1);
  }
}

/* ---- cold compile: the inductor's plan lines, summed over the graphs ---------------- */
typedef struct counts { int graphs, kernels, fused, externs; } counts;

static void count_sink(const kn_log_record *r, void *ud) {
  counts *c = ud;
  int k, f, e;
  const char *m = strstr(r->message, "inductor: ");
  if (m && sscanf(m, "inductor: %d kernels, %d nodes fused into them, %d extern calls", &k, &f,
                  &e) == 3)
    c->graphs++, c->kernels += k, c->fused += f, c->externs += e;
}

/* CPU seconds of this process and its waited-for children (the C compiler). */
static double cpu_s(void) {
  struct rusage a, b;
  getrusage(RUSAGE_SELF, &a);
  getrusage(RUSAGE_CHILDREN, &b);
  return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
         (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec +
                  b.ru_stime.tv_usec) * 1e-6;
}

static void cold_compile(void) {
  char dir[] = "/tmp/kn_bench_lstm_XXXXXX";
  if (!mkdtemp(dir)) return;
  setenv("KILN_CACHE_DIR", dir, 1);
  counts c = {0};
  kn_log_add_sink(count_sink, &c, KN_LOG_SINK_EXCLUSIVE);
  kn_set_logs_str("+inductor");
  setup s;
  setup_init(&s, true);
  double t0 = kn_bench_wall_s(), c0 = cpu_s();
  step(&s);
  double ms = (kn_bench_wall_s() - t0) * 1e3, cpu = (cpu_s() - c0) * 1e3;
  kn_set_logs_str("");
  kn_log_remove_sink(count_sink, &c);
  double t1 = kn_bench_wall_s(), c1 = cpu_s();
  step(&s);
  double warm = (kn_bench_wall_s() - t1) * 1e3, warm_cpu = (cpu_s() - c1) * 1e3;
  printf("BENCH lstm_compile_cold_ms %.1f ms (first step with an empty cache, less one warm "
         "step of %.1f ms; CPU time of kiln and the C compiler %.1f ms; %d graphs, %d kernels, "
         "%d extern calls; goal <= 2000)\n",
         ms - warm, warm, cpu - warm_cpu, c.graphs, c.kernels, c.externs);
  setup_fini(&s);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_lstm: could not remove %s\n", dir);
  unsetenv("KILN_CACHE_DIR");
}

/* ms per step over a turn of STEPS steps at `threads` threads. */
static double kiln_turn(setup *s, int threads) {
  double t0 = kn_bench_turn_clock(threads);
  for (int k = 0; k < STEPS; k++) step(s);
  return (kn_bench_turn_clock(threads) - t0) / STEPS * 1e3;
}

/* The torch side: the same model in Python processes beside the bench
** (kn_bench_torch, KN_BENCH_TORCH_LOOP). */
static const char *const torch_body =
    KN_BENCH_TORCH_HEAD
    "m = nn.LSTM(64, 256, batch_first=True)\n"
    "opt = torch.optim.SGD(m.parameters(), lr=1e-2)\n"
    "x = torch.randn(32, 64, 64); y = torch.randn(32, 64, 256)\n"
    "def step():\n"
    "    loss = nn.functional.mse_loss(m(x)[0], y); loss.backward(); opt.step()\n"
    "    opt.zero_grad(set_to_none=True)\n"
    KN_BENCH_TORCH_LOOP;

/* Kiln (compiled, or eager) and, tp non-NULL, torch at `threads` threads:
** two warm-up steps each, then REPS turns of each in alternation; medians
** into ms[0] (kiln) and ms[1] (torch's faster wait policy, -1 when absent;
** *passive which). The GEMM shapes kiln chose are printed. */
static void time_turns(bool compiled, kn_bench_torch *tp, int threads, double ms[2],
                       bool *passive) {
  kn_set_num_threads(threads);
  setup s;
  setup_init(&s, compiled);
  for (int w = 0; w < 2; w++) step(&s); /* compile (cached), warm */
  double t[3][REPS], v[2];
  if (tp) kn_bench_torch_turn(tp, threads, v);
  kn__gemm_record(true);
  for (int r = 0; r < REPS; r++) {
    kn_bench_settle();
    t[0][r] = kiln_turn(&s, threads);
    kn_bench_settle();
    if (tp) kn_bench_torch_turn(tp, threads, v);
    t[1][r] = tp ? v[0] : -1, t[2][r] = tp ? v[1] : -1;
  }
  char tag[32];
  snprintf(tag, sizeof tag, "%s_%dT", compiled ? "compiled" : "eager", threads);
  kn_bench_gemm_choices(tag);
  kn__gemm_record(false);
  setup_fini(&s);
  ms[0] = kn_bench_median(t[0], REPS);
  ms[1] = tp ? kn_bench_torch_best(tp, t[1], t[2], REPS, passive) : -1;
}

int main(void) {
  double load[3] = {0};
  FILE *la = fopen("/proc/loadavg", "r");
  if (la && fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) == 3)
    printf("BENCH_INFO load average %.2f %.2f %.2f (other processes on this machine)\n", load[0],
           load[1], load[2]);
  if (la) fclose(la);
  cold_compile();
  double ms[2];
  bool passive = false;
  time_turns(false, NULL, 1, ms, &passive);
  printf("BENCH lstm_step_eager_ms %.2f ms (kiln eager, 1 thread)\n", ms[0]);
  const char *core = kn_bench_openblas_core();
  printf("BENCH_INFO OPENBLAS_CORETYPE %s (for torch)\n", core ? core : "(unset: unknown core)");
  char script[2048];
  snprintf(script, sizeof script, "S = %d\n%s", STEPS, torch_body);
  kn_bench_torch tp = {0};
  bool torch = kn_bench_torch_start(&tp, script, core, "rep 1");
  for (int threads = 1; threads <= 2; threads++) {
    time_turns(true, torch ? &tp : NULL, threads, ms, &passive);
    const char *pl = threads > 1 ? "s" : "";
    printf("BENCH lstm_step_ms %.2f ms (kiln compiled, %d thread%s)\n", ms[0], threads, pl);
    if (ms[1] <= 0) {
      printf("BENCH_INFO lstm_step_torch skipped (no /usr/bin/python3 with torch, or it "
             "stopped)\n");
      continue;
    }
    printf("BENCH lstm_step_torch_ms %.2f ms (torch 1.13 eager, %d thread%s, %s, the faster)\n",
           ms[1], threads, pl, kn_bench_torch_policy(passive));
    printf("RATIO lstm_step_vs_torch %.3f (%d thread%s: torch / kiln; goal >= 1.2)\n",
           ms[1] / ms[0], threads, pl);
  }
  kn_bench_torch_stop(&tp);
  return 0;
}
