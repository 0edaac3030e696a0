/*
** bench_rows.c: row-shaped eager work against plain C loops doing the same
** memory traffic, measured in the same run. Prints
**   BENCH select_backward_ms, BENCH select_backward_rule_path_ms,
**   RATIO select_backward_vs_fused_loop (goal >= 0.8): the backward of 64
**     selects of one [64, 32, 1024] float32 tensor (an LSTM's per-step input)
**     through kn_autograd_grad, against a C loop that zero-fills one buffer
**     and adds each step's gradient into its slice; the rule path is what the
**     engine used to do per select (a zero tensor, select_scatter, a sum);
**   BENCH_INFO norm_rows_kernel <ISA of layer_norm's row kernels>,
**   RATIO layer_norm_eager_vs_copy_floor_{1T,allT} (goal >= 0.5),
**   RATIO layer_norm_backward_eager_vs_copy_floor_{1T,allT} (goal >= 0.4):
**     layer_norm over 4096 rows of 1024 floats with weight and bias, forward
**     and backward (input, weight and bias gradients), against a C loop
**     moving the rows the op must read and write (forward: x -> y; backward:
**     x and the output gradient -> the input gradient). Ratio = floor time /
**     kiln time. 1T: one OpenMP thread (thread CPU time); allT: every thread
**     (wall time).
**   RATIO <op>_{inductor,eager}_vs_copy_floor_{1T,allT} and
**   RATIO <op>_backward_{inductor,eager}_vs_copy_floor_{1T,allT} (goal >= 0.8
**     for inductor): softmax, log_softmax, layer_norm (weight and bias),
**     rms_norm (x * rsqrt(mean(x^2) + eps) * weight: compiled, composed of
**     primitive ops; eager, the fused op kn_rms_norm) and cross_entropy (mean over int64 targets) over the same 4096
**     rows of 1024 floats, compiled with the inductor backend and eager; the
**     backward is the gradient of the input alone (for a given output
**     gradient; cross_entropy's is the loss's), timed without the forward.
**     Each floor moves the rows the op must read and write: forward x -> y
**     (cross_entropy: x read, one float per row written), backward y (or x)
**     and the output gradient -> the input gradient (cross_entropy: x -> its
**     gradient). Ratio = floor time / kiln time, floor and op timed
**     in alternating turns in the same run.
**   RATIO exp_rows_vs_copy_floor_1T (no goal): the forward floor's time over
**     that of the vector-math table's float32 exp (what eager and generated
**     code call) over the same number of elements, rows of 1024 kept in L1:
**     an op computing one exp per element cannot run faster than this
**     exp alone, so where the ratio is below 0.8 no softmax, log_softmax
**     (backward too) or cross_entropy can reach the goal on that machine;
**   RATIO exp_rows_vs_read_floor_1T (no goal): the same against the
**     read-only floor of cross_entropy's forward.
** Each number is the median of several turns, a turn the fastest of TURN
** runs in a row, the op's and its floor's turns alternating. Arguments, if any, are
** names of row-kernel ops (softmax, ...) and/or 1T or allT: only those
** row-kernel lines are printed (for measuring one kernel while changing it).
*/
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

#include "bench_util.h"
#include "ops/norm_rows.h"
#include "ops/vmath.h"
#include "kiln/compile.h"

#define REPS 9
/* Runs of one kind in a row (the op, or its floor), the fastest timed: each
** then works on buffers its own earlier runs left in the caches, as in a
** loop of calls. Runs alternating one by one timed the floor's copy in
** 2.0-2.5 ms after a softmax (whose output had evicted the copy's) and 1.4
** ms after a copy, while the compute-bound softmax moved 10%: the ratio
** read 0.95 where it was 0.6 (2026-11-28, AVX-512 Xeon VM). */
#define TURN 3
#define T 64
#define B 32
#define H 1024

static volatile float sink;

static void die(const char *what) {
  fprintf(stderr, "bench_rows: %s: %s\n", what, kn_last_error());
  exit(1);
}

/* The fused loop: one zero-filled buffer, each step's gradient added into
** its [B, H] slice. */
static void fused_select_backward(float *buf, float *const *g) {
  memset(buf, 0, (size_t)T * B * H * sizeof *buf);
  for (int t = 0; t < T; t++) {
    float *restrict o = buf + (size_t)t * B * H;
    const float *restrict x = g[t];
    for (int64_t i = 0; i < B * H; i++) o[i] += x[i];
  }
}

/* What the select derivative rule does for each use, summed as the engine
** summed gradients before it accumulated selects into one buffer. */
static kn_tensor *rule_path(kn_tensor *x, kn_tensor *const *g) {
  kn_tensor *acc = NULL;
  for (int t = 0; t < T; t++) {
    kn_tensor *z = kn_zeros(3, kn_sizes(x), KN_FLOAT32);
    kn_tensor *s = kn_select_scatter(z, g[t], 0, t);
    acc = acc ? kn_add(acc, s) : s;
  }
  return acc;
}

static void bench_select_backward(void) {
  kn_tensor *x = kn_zeros(KN_SHAPE(T, B, H), KN_FLOAT32);
  if (!x || kn_set_requires_grad(x, true) != KN_OK) die("select setup");
  kn_tensor *g[T], *outs[T];
  float *gp[T];
  for (int t = 0; t < T; t++) {
    g[t] = kn_full(KN_SHAPE(B, H), kn_float(t * 0.5), KN_FLOAT32);
    gp[t] = kn_data(g[t]);
  }
  float *buf = malloc((size_t)T * B * H * sizeof *buf);
  double tk[REPS], tf[REPS], tr[REPS];
  for (int r = 0; r < REPS; r++) {
    kn_scope_begin();
    for (int t = 0; t < T; t++) outs[t] = kn_select(x, 0, t);
    kn_tensor *gx;
    double t0 = kn_bench_cpu_s();
    if (kn_autograd_grad(outs, T, &x, 1, g, false, false, false, &gx) != KN_OK) die("grad");
    tk[r] = kn_bench_cpu_s() - t0;
    sink = ((float *)kn_data(gx))[r];
    t0 = kn_bench_cpu_s();
    kn_tensor *rp = rule_path(x, g);
    tr[r] = kn_bench_cpu_s() - t0;
    sink = ((float *)kn_data(rp))[r];
    kn_scope_end();
    t0 = kn_bench_cpu_s();
    fused_select_backward(buf, gp);
    tf[r] = kn_bench_cpu_s() - t0;
    sink = buf[r];
  }
  double k = kn_bench_median(tk, REPS), f = kn_bench_median(tf, REPS);
  printf("BENCH select_backward_ms %.3f ms (64 selects of [64, 32, 1024] float32)\n", k * 1e3);
  printf("BENCH select_backward_rule_path_ms %.3f ms\n", kn_bench_median(tr, REPS) * 1e3);
  printf("BENCH select_backward_fused_loop_ms %.3f ms\n", f * 1e3);
  printf("RATIO select_backward_vs_fused_loop %.3f (goal >= 0.8)\n", f / k);
  free(buf);
  kn_release(x);
  for (int t = 0; t < T; t++) kn_release(g[t]);
}

#define LM 4096
#define LD 1024

static void floor_fwd(float *restrict y, const float *restrict x) {
#pragma omp parallel for schedule(static) if (omp_get_max_threads() > 1)
  for (int64_t r = 0; r < LM; r++)
    for (int64_t i = 0; i < LD; i++) y[r * LD + i] = x[r * LD + i];
}

static void floor_bwd(float *restrict gi, const float *restrict x, const float *restrict go) {
#pragma omp parallel for schedule(static) if (omp_get_max_threads() > 1)
  for (int64_t r = 0; r < LM; r++)
    for (int64_t i = 0; i < LD; i++) gi[r * LD + i] = x[r * LD + i] + go[r * LD + i];
}

static double now(bool one) { return one ? kn_bench_cpu_s() : kn_bench_wall_s(); }

/* eager layer_norm over 4096 rows of 1024 (weight and bias), its backward
** (input, weight and bias gradients) and their floors: the runs of
** bench_layer_norm, for kn_bench_turns. */
typedef struct ln_args {
  kn_tensor *x, *w, *b, *go, *y;
  float *fy;
  bool one;
} ln_args;

static double ln_fwd_run(void *ud, int rep) {
  ln_args *a = ud;
  const int64_t ns[1] = {LD};
  kn_scope_begin();
  double t0 = now(a->one);
  kn_tensor *y = kn_layer_norm(a->x, 1, ns, a->w, a->b, 1e-5);
  double t = now(a->one) - t0;
  if (!y) die("layer_norm");
  sink = ((float *)kn_data(y))[rep];
  kn_scope_end();
  return t;
}

static double ln_bwd_run(void *ud, int rep) {
  ln_args *a = ud;
  kn_tensor *ins[3] = {a->x, a->w, a->b}, *g[3];
  kn_scope_begin();
  double t0 = now(a->one);
  if (kn_autograd_grad(&a->y, 1, ins, 3, &a->go, true, false, false, g) != KN_OK)
    die("ln backward");
  double t = now(a->one) - t0;
  sink = ((float *)kn_data(g[0]))[rep];
  kn_scope_end();
  return t;
}

static double ln_floor_fwd_run(void *ud, int rep) {
  ln_args *a = ud;
  double t0 = now(a->one);
  floor_fwd(a->fy, kn_data(a->x));
  double t = now(a->one) - t0;
  sink = a->fy[rep];
  return t;
}

static double ln_floor_bwd_run(void *ud, int rep) {
  ln_args *a = ud;
  double t0 = now(a->one);
  floor_bwd(a->fy, kn_data(a->x), kn_data(a->go));
  double t = now(a->one) - t0;
  sink = a->fy[rep];
  return t;
}

static void bench_layer_norm(bool one) {
  int prev = omp_get_max_threads();
  if (one) omp_set_num_threads(1);
  kn_generator *gen = kn_generator_new(1);
  ln_args a = {.x = kn_randn(KN_SHAPE(LM, LD), gen, KN_FLOAT32),
               .w = kn_randn(KN_SHAPE(LD), gen, KN_FLOAT32),
               .b = kn_randn(KN_SHAPE(LD), gen, KN_FLOAT32),
               .go = kn_randn(KN_SHAPE(LM, LD), gen, KN_FLOAT32),
               .fy = malloc((size_t)LM * LD * sizeof(float)),
               .one = one};
  if (!a.x || !a.w || !a.b || !a.go || !a.fy) die("layer_norm setup");
  double f, bw, cf, cb;
  kn_bench_turns(REPS, TURN, ln_fwd_run, &a, ln_floor_fwd_run, &a, &f, &cf);
  kn_tensor *ins[3] = {a.x, a.w, a.b};
  for (int i = 0; i < 3; i++) kn_set_requires_grad(ins[i], true);
  const int64_t ns[1] = {LD};
  kn_scope_begin();
  a.y = kn_layer_norm(a.x, 1, ns, a.w, a.b, 1e-5);
  kn_bench_turns(REPS, TURN, ln_bwd_run, &a, ln_floor_bwd_run, &a, &bw, &cb);
  kn_scope_end();
  const char *tag = one ? "1T" : "allT";
  printf("BENCH layer_norm_eager_ms_%s %.3f ms (%d threads; copy floor %.3f ms)\n", tag, f * 1e3,
         omp_get_max_threads(), cf * 1e3);
  printf("BENCH layer_norm_backward_eager_ms_%s %.3f ms (copy floor %.3f ms)\n", tag, bw * 1e3,
         cb * 1e3);
  printf("RATIO layer_norm_eager_vs_copy_floor_%s %.3f (goal >= 0.5)\n", tag, cf / f);
  printf("RATIO layer_norm_backward_eager_vs_copy_floor_%s %.3f (goal >= 0.4)\n", tag, cb / bw);
  free(a.fy);
  kn_release(a.x), kn_release(a.w), kn_release(a.b), kn_release(a.go);
  kn_generator_free(gen);
  omp_set_num_threads(prev);
}

/* ---- row kernels, compiled and eager, against their copy floors --------------- */

static kn_tensor *rk_w, *rk_b, *rk_target;

static kn_tensor *rk_softmax(kn_tensor *x) { return kn_softmax(x, 1); }
static kn_tensor *rk_log_softmax(kn_tensor *x) { return kn_log_softmax(x, 1); }
static kn_tensor *rk_layer_norm(kn_tensor *x) {
  const int64_t d = LD;
  return kn_layer_norm(x, 1, &d, rk_w, rk_b, 1e-5);
}
static kn_tensor *rk_rms_norm(kn_tensor *x) {
  const int64_t d = 1;
  kn_tensor *ms = kn_mean_dims(kn_mul(x, x), &d, 1, true);
  return kn_mul(kn_mul(x, kn_rsqrt(kn_add_scalar(ms, kn_float(1e-6)))), rk_w);
}
static kn_tensor *rk_rms_norm_op(kn_tensor *x) {
  const int64_t d = LD;
  const double eps = 1e-6;
  return kn_rms_norm(x, 1, &d, rk_w, &eps);
}
static kn_tensor *rk_cross_entropy(kn_tensor *x) {
  return kn_cross_entropy(x, rk_target, NULL, KN_REDUCTION_MEAN, -100, 0.0);
}

typedef struct rk_op {
  const char *name;
  kn_tensor *(*fn)(kn_tensor *);
  kn_tensor *(*eager)(kn_tensor *); /* what eager runs, when not fn */
  bool scalar; /* one loss value: the forward writes no rows, the backward's seed is 1 */
} rk_op;

static const rk_op rk_ops[] = {
    {"softmax", rk_softmax, NULL, false},
    {"log_softmax", rk_log_softmax, NULL, false},
    {"layer_norm", rk_layer_norm, NULL, false},
    {"rms_norm", rk_rms_norm, rk_rms_norm_op, false},
    {"cross_entropy", rk_cross_entropy, NULL, true},
};

/* The forward floor of a loss: every row read, one float per row written. */
static void floor_read(float *restrict y, const float *restrict x) {
#pragma omp parallel for schedule(static) if (omp_get_max_threads() > 1)
  for (int64_t r = 0; r < LM; r++) {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < LD; i++) s += x[r * LD + i];
    y[r] = s;
  }
}

/* One forward (bwd false) or backward of op on x, compiled (f) or eager; the
** time of the timed part with the clock of `one`. */
static double rk_once(const rk_op *op, kn_compiled *f, kn_tensor *x, kn_tensor *go, bool bwd,
                      bool one) {
  kn_scope_begin();
  double t0 = now(one);
  kn_tensor *y = f ? kn_call_t(f, x) : op->eager ? op->eager(x) : op->fn(x), *gx = NULL;
  if (!y) die(op->name);
  if (bwd) {
    t0 = now(one);
    if (kn_autograd_grad(&y, 1, &x, 1, op->scalar ? NULL : &go, false, false, false, &gx) != KN_OK)
      die(op->name);
  }
  double t = now(one) - t0;
  sink = ((float *)kn_data(bwd ? gx : y))[1];
  kn_scope_end();
  return t;
}

/* One run of the op's floor: its time with the clock of `one`. */
static double rk_floor_once(const rk_op *op, kn_tensor *x, kn_tensor *go, bool bwd, bool one,
                            float *buf) {
  double t0 = now(one);
  if (bwd) {
    if (op->scalar) floor_fwd(buf, kn_data(x));
    else floor_bwd(buf, kn_data(x), kn_data(go));
  } else if (op->scalar) {
    floor_read(buf, kn_data(x));
  } else {
    floor_fwd(buf, kn_data(x));
  }
  double t = now(one) - t0;
  sink = buf[1];
  return t;
}

/* The arguments of rk_once and rk_floor_once, for kn_bench_turns. */
typedef struct rk_args {
  const rk_op *op;
  kn_compiled *f;
  kn_tensor *x, *go;
  bool bwd, one;
  float *buf;
} rk_args;

static double rk_run(void *ud, int rep) {
  (void)rep;
  const rk_args *a = ud;
  return rk_once(a->op, a->f, a->x, a->go, a->bwd, a->one);
}

static double rk_floor_run(void *ud, int rep) {
  (void)rep;
  const rk_args *a = ud;
  return rk_floor_once(a->op, a->x, a->go, a->bwd, a->one, a->buf);
}

/* Median time of the op's forward or backward, and of its floor: REPS
** turns of each in alternation, a turn TURN runs in a row of which the
** fastest counts (see TURN). */
static void rk_time(const rk_op *op, kn_compiled *f, kn_tensor *x, kn_tensor *go, bool bwd,
                    bool one, float *buf, double *t_op, double *t_floor) {
  rk_args a = {op, f, x, go, bwd, one, buf};
  rk_once(op, f, x, go, bwd, one); /* warm-up: compiles */
  kn_bench_turns(REPS, TURN, rk_run, &a, rk_floor_run, &a, t_op, t_floor);
}

static kn_compiled *rk_compile(const rk_op *op) {
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))op->fn, 1, op->name, __FILE__, __LINE__, &o);
  if (!f) die("compile");
  return f;
}

static void rk_report(const rk_op *op, const char *who, bool bwd, const char *tag, double t,
                      double fl) {
  const char *b = bwd ? "_backward" : "";
  printf("BENCH %s%s_%s_us_%s %.0f (copy floor %.0f us)\n", op->name, b, who, tag, t * 1e6,
         fl * 1e6);
  printf("RATIO %s%s_%s_vs_copy_floor_%s %.3f%s\n", op->name, b, who, tag, fl / t,
         strcmp(who, "inductor") ? "" : " (goal >= 0.8)");
}

/* The exp alone over LM rows of LD floats held in L1, against the copy. */
static void bench_exp_bound(void) {
  const kn__vmath *vm = kn__vmath_get();
  /* row and e in one buffer, e 6 KB after row (2 KB modulo a page): two
  ** malloc(4 KB) blocks sit 4 KB + 16 bytes apart, so each vector's
  ** load matched the previous vector's store modulo 4 KB (4K aliasing) and
  ** waited for it: that timed the store-to-load stall (0.42 ns per element
  ** on AMD Zen 3 for an exp of 0.28 ns), not the exp. */
  float *buf = malloc((2 * LD + 512) * sizeof *buf), *row = buf, *e = buf + LD + 512;
  float *x = malloc((size_t)LM * LD * sizeof *x), *y = malloc((size_t)LM * LD * sizeof *y);
  if (!buf || !x || !y) die("exp bound setup");
  for (int64_t i = 0; i < LD; i++) row[i] = -(float)(i % 97) / 10.0f;
  for (int64_t i = 0; i < LM * LD; i++) x[i] = (float)(i % 13);
  double te[REPS], tc[REPS], tr[REPS];
  for (int r = 0; r < REPS; r++) {
    te[r] = tc[r] = tr[r] = 1e30;
    for (int k = 0; k < 3 * TURN; k++) {
      double t0 = kn_bench_cpu_s();
      if (k < TURN)
        for (int64_t i = 0; i < LM; i++) vm->f32[KN__VM_EXP](e, row, LD);
      else if (k < 2 * TURN) floor_fwd(y, x);
      else floor_read(y, x);
      double t = kn_bench_cpu_s() - t0, *to = k < TURN ? te : k < 2 * TURN ? tc : tr;
      to[r] = t < to[r] ? t : to[r];
      sink = e[r] + y[r];
    }
  }
  double t = kn_bench_median(te, REPS), c = kn_bench_median(tc, REPS);
  double rd = kn_bench_median(tr, REPS);
  printf("BENCH exp_rows_us_1T %.0f (%s table, %.3f ns per element; copy floor %.0f us, read "
         "floor %.0f us)\n", t * 1e6, vm->name, t * 1e9 / (LM * LD), c * 1e6, rd * 1e6);
  printf("RATIO exp_rows_vs_copy_floor_1T %.3f\n", c / t);
  printf("RATIO exp_rows_vs_read_floor_1T %.3f (cross_entropy's forward floor: below 0.8 no "
         "cross_entropy can reach its goal here)\n", rd / t);
  free(buf), free(x), free(y);
}

static int rk_argc;
static char **rk_argv;

/* Whether the arguments select name (an op, or 1T/allT); no arguments or
** none of that kind select everything. */
static bool rk_selected(const char *name, bool thread_tag) {
  bool any = false;
  for (int i = 1; i < rk_argc; i++) {
    bool tag = !strcmp(rk_argv[i], "1T") || !strcmp(rk_argv[i], "allT");
    if (tag != thread_tag) continue;
    any = true;
    if (!strcmp(rk_argv[i], name)) return true;
  }
  return !any;
}

static void bench_row_kernels(bool one) {
  if (!rk_selected(one ? "1T" : "allT", true)) return;
  int prev = omp_get_max_threads();
  if (one) omp_set_num_threads(1);
  kn_generator *gen = kn_generator_new(2);
  kn_tensor *x = kn_randn(KN_SHAPE(LM, LD), gen, KN_FLOAT32);
  kn_tensor *xg = kn_randn(KN_SHAPE(LM, LD), gen, KN_FLOAT32);
  kn_tensor *go = kn_randn(KN_SHAPE(LM, LD), gen, KN_FLOAT32);
  rk_w = kn_randn(KN_SHAPE(LD), gen, KN_FLOAT32);
  rk_b = kn_randn(KN_SHAPE(LD), gen, KN_FLOAT32);
  rk_target = kn_randint(0, LD, 1, (const int64_t[]){LM}, gen, KN_INT64);
  float *buf = malloc((size_t)LM * LD * sizeof *buf);
  if (!x || !xg || !go || !rk_w || !rk_b || !rk_target || !buf ||
      kn_set_requires_grad(xg, true) != KN_OK)
    die("row kernels setup");
  const char *tag = one ? "1T" : "allT";
  for (size_t i = 0; i < sizeof rk_ops / sizeof rk_ops[0]; i++) {
    const rk_op *op = &rk_ops[i];
    if (!rk_selected(op->name, false)) continue;
    kn_compiled *f = rk_compile(op), *fg = rk_compile(op);
    double t, fl;
    for (int bwd = 0; bwd < 2; bwd++) {
      rk_time(op, bwd ? fg : f, bwd ? xg : x, go, bwd, one, buf, &t, &fl);
      rk_report(op, "inductor", bwd, tag, t, fl);
      rk_time(op, NULL, bwd ? xg : x, go, bwd, one, buf, &t, &fl);
      rk_report(op, "eager", bwd, tag, t, fl);
    }
    kn_compiled_free(f);
    kn_compiled_free(fg);
  }
  free(buf);
  kn_release(x), kn_release(xg), kn_release(go);
  kn_release(rk_w), kn_release(rk_b), kn_release(rk_target);
  kn_generator_free(gen);
  omp_set_num_threads(prev);
}

int main(int argc, char **argv) {
  rk_argc = argc, rk_argv = argv;
  if (argc > 1) {
    bench_row_kernels(true);
    bench_row_kernels(false);
    return 0;
  }
  bench_select_backward();
  printf("BENCH_INFO norm_rows_kernel %s\n", kn__norm_rows_get()->name);
  bench_layer_norm(true);
  bench_layer_norm(false);
  bench_row_kernels(true);
  bench_row_kernels(false);
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  bench_exp_bound();
  omp_set_num_threads(prev);
  printf("BENCH_INFO timer 1T thread_cputime, allT wall, median_of %d\n", REPS);
  return 0;
}
