/*
** bench_reductions.c: every reduction of the op table (each row of the
** reduction table, ops/reduce_table.h), compiled with inductor against the
** eager op. Prints, per op,
**   RATIO reductions_compiled_vs_eager_<op> (goal >= 1.0): the eager op's
**     median thread CPU time over the compiled graph's, reducing the rows of
**     a 1024 x 1024 float32 tensor (the last dim, 1 thread);
**   BENCH reductions_<op>_compiled_us / _eager_us: the two times.
** prod reads values near 1 (no overflow or denormals in either); all reads
** values that are never 0 (|x| + 1: the whole row is read). The norms are
** linalg_vector_norm's rows: orders 2, 1, inf, -inf, 0 and 3. The
** cache lives in a temporary KILN_CACHE_DIR removed at the end.
*/
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kiln/kiln.h"

#include "bench_util.h"

#define REPS 21
#define INNER 10

static const int64_t last[1] = {-1};
static volatile double sink;

static void die(const char *what) {
  fprintf(stderr, "bench_reductions: %s: %s\n", what, kn_last_error());
  exit(1);
}

static kn_tensor *r_sum(kn_tensor *x) { return kn_sum_dims(x, last, 1, false); }
static kn_tensor *r_mean(kn_tensor *x) { return kn_mean_dims(x, last, 1, false); }
static kn_tensor *r_prod(kn_tensor *x) { return kn_prod_dim(x, -1, false); }
static kn_tensor *r_amax(kn_tensor *x) { return kn_amax(x, last, 1, false); }
static kn_tensor *r_amin(kn_tensor *x) { return kn_amin(x, last, 1, false); }
static kn_tensor *r_argmax(kn_tensor *x) { return kn_argmax_dim(x, -1, false); }
static kn_tensor *r_argmin(kn_tensor *x) { return kn_argmin_dim(x, -1, false); }
static kn_tensor *r_var(kn_tensor *x) { return kn_var(x, last, 1, 1, false); }
static kn_tensor *r_std(kn_tensor *x) { return kn_std(x, last, 1, 1, false); }
static kn_tensor *r_any(kn_tensor *x) { return kn_any_dim(x, -1, false); }
static kn_tensor *r_all(kn_tensor *x) { return kn_all_dim(x, -1, false); }
static kn_tensor *r_logsumexp(kn_tensor *x) { return kn_logsumexp(x, last, 1, false); }
static kn_tensor *r_norm2(kn_tensor *x) { return kn_linalg_vector_norm(x, 2, last, 1, false); }
static kn_tensor *r_norm1(kn_tensor *x) { return kn_linalg_vector_norm(x, 1, last, 1, false); }
static kn_tensor *r_norminf(kn_tensor *x) {
  return kn_linalg_vector_norm(x, INFINITY, last, 1, false);
}
static kn_tensor *r_normninf(kn_tensor *x) {
  return kn_linalg_vector_norm(x, -INFINITY, last, 1, false);
}
static kn_tensor *r_norm0(kn_tensor *x) { return kn_linalg_vector_norm(x, 0, last, 1, false); }
static kn_tensor *r_normp(kn_tensor *x) { return kn_linalg_vector_norm(x, 3, last, 1, false); }

typedef struct red_case {
  const char *name;
  kn_tensor *(*fn)(kn_tensor *);
} red_case;

static const red_case cases[] = {
    {"sum", r_sum},       {"mean", r_mean},     {"prod", r_prod},
    {"amax", r_amax},     {"amin", r_amin},     {"argmax", r_argmax},
    {"argmin", r_argmin}, {"var", r_var},       {"std", r_std},
    {"any", r_any},       {"all", r_all},       {"logsumexp", r_logsumexp},
    {"norm2", r_norm2},   {"norm1", r_norm1},   {"norm_inf", r_norminf},
    {"norm_ninf", r_normninf}, {"norm0", r_norm0}, {"norm_p3", r_normp},
};

/* Median thread CPU time of one call of f (compiled) or fn (eager) on x. */
static double time_it(kn_compiled *f, kn_tensor *(*fn)(kn_tensor *), kn_tensor *x) {
  double t[REPS];
  for (int r = -1; r < REPS; r++) { /* r == -1: warm-up (and the compile) */
    double t0 = kn_bench_cpu_s();
    for (int i = 0; i < INNER; i++) {
      kn_scope_begin();
      kn_tensor *y = f ? kn_call_t(f, x) : fn(x);
      if (!y) die(f ? "compiled call" : "eager call");
      sink += (double)kn_numel(y);
      kn_scope_end();
    }
    if (r >= 0) t[r] = (kn_bench_cpu_s() - t0) / INNER;
  }
  return kn_bench_median(t, REPS);
}

static void bench_case(const red_case *c, kn_tensor *x) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f =
      kn_compile_tensor_fn((void (*)(void))c->fn, 1, c->name, __FILE__, __LINE__, &o);
  if (!f) die("compile");
  double tc = time_it(f, NULL, x), te = time_it(NULL, c->fn, x);
  printf("BENCH reductions_%s_compiled_us %.1f\nBENCH reductions_%s_eager_us %.1f\n", c->name,
         tc * 1e6, c->name, te * 1e6);
  printf("RATIO reductions_compiled_vs_eager_%s %.2f (goal >= 1.0)\n", c->name, te / tc);
  fflush(stdout);
  kn_compiled_free(f);
}

int main(void) {
  char dir[] = "/tmp/kiln-bench-reductions-XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp");
  setenv("KILN_CACHE_DIR", dir, 1);
  void (*set_threads)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
  if (set_threads) set_threads(1);
  kn_manual_seed(3);
  kn_tensor *x = kn_randn(KN_SHAPE(1024, 1024), NULL, KN_FLOAT32);
  kn_tensor *near1 = kn_add_scalar(kn_mul_scalar(x, kn_float(1e-3)), kn_float(1));
  kn_tensor *nonzero = kn_add_scalar(kn_abs(x), kn_float(1));
  if (!x || !near1 || !nonzero) die("inputs");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    bench_case(&cases[i], cases[i].fn == r_prod  ? near1
                          : cases[i].fn == r_all ? nonzero
                                                 : x);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : 1;
}
