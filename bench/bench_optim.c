/*
** bench_optim.c: the optimizer step, eager against compiled (kn_optim.h).
** Adam over 100 float32 parameters of mixed sizes (16 to 16384 elements,
** about 0.4 M in all); the compiled step is one captured graph (501 inputs:
** lr, and per parameter its step, param, exp_avg, exp_avg_sq and gradient)
** run by the inductor backend, which writes parameters and state in place.
** Prints
**   BENCH adam_step_eager_us, BENCH adam_step_compiled_us,
**   RATIO adam_step_compiled_vs_eager (eager time / compiled time; goal >= 3).
** Each number is the median over repetitions of thread CPU time.
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kiln/kiln.h"
#include "kiln/optim.h"

#include "bench_util.h"

#define NPARAMS 100
#define REPS 9
#define STEPS 10

static kn_optimizer *setup(kn_tensor **ps, kn_generator *g) {
  static const int64_t sizes[] = {16, 256, 1024, 4096, 16384, 64, 10, 512};
  for (int i = 0; i < NPARAMS; i++) {
    ps[i] = kn_randn(KN_SHAPE(sizes[i % 8]), g, KN_FLOAT32);
    kn_set_requires_grad(ps[i], true);
    kn_set_grad(ps[i], kn_randn(KN_SHAPE(sizes[i % 8]), g, KN_FLOAT32));
  }
  return kn_adam(ps, NPARAMS, &(kn_optim_options){.lr = 1e-3});
}

/* Median time of STEPS steps, in microseconds per step. */
static double time_steps(kn_optimizer *opt, bool compiled) {
  double t[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = kn_bench_cpu_s();
    for (int s = 0; s < STEPS; s++) {
      kn_status st = compiled ? kn_optim_step_compiled(opt, NULL) : kn_optim_step(opt);
      if (st != KN_OK) {
        fprintf(stderr, "bench_optim: step failed: %s\n", kn_last_error());
        exit(1);
      }
    }
    t[r] = (kn_bench_cpu_s() - t0) / STEPS * 1e6;
  }
  qsort(t, REPS, sizeof *t, kn_bench_cmp_double);
  return t[REPS / 2];
}

int main(void) {
  kn_scope_begin();
  kn_generator *g = kn_generator_new(0);
  kn_tensor *ps[NPARAMS];
  kn_optimizer *opt = setup(ps, g);
  if (!opt) {
    fprintf(stderr, "bench_optim: %s\n", kn_last_error());
    return 1;
  }
  kn_optim_step_compiled(opt, NULL); /* state creation + compile, not timed */
  kn_optim_step_compiled(opt, NULL);
  double eager = time_steps(opt, false), compiled = time_steps(opt, true);
  printf("BENCH adam_step_eager_us %.1f us\n", eager);
  printf("BENCH adam_step_compiled_us %.1f us\n", compiled);
  printf("RATIO adam_step_compiled_vs_eager %.3f (goal >= 3)\n",
         eager / compiled);
  kn_optim_free(opt);
  kn_generator_free(g);
  kn_scope_end();
  return 0;
}
