/*
** bench_autocast.c: mixed precision against float32 on the same machine,
** same run (interleaved rounds, the fastest of each kept: on a shared
** machine the minimum is the least disturbed).
**
**   RATIO mm_bf16_vs_f32: float32 kn_mm time / bfloat16 kn_mm time, the
**     geometric mean over square 512 and 1024 and an MLP shape (goal >= 1.8
**     on a CPU with AVX512-BF16 or AMX, where oneDNN runs bfloat16 natively;
**     without them bfloat16 goes through float32 conversions and is slower).
**   RATIO transformer_layer_step_bf16_vs_f32: one training step of a
**     TransformerEncoderLayer (d_model 256, 4 heads, feed-forward 1024,
**     batch 8 x 64 tokens, dropout 0; MSE loss, backward, SGD) in float32
**     over the same step under bfloat16 autocast (goal >= 1.6 on such a CPU).
**   RATIO conv2d_step_bf16_vs_f32: a ResNet-stage convolution forward and
**     backward in float32 over the same under bfloat16 autocast (no goal).
** BENCH transformer_layer_step_split: the step's time under kiln's
**   profiler (3 rounds of 3 steps each way, the least kept) split into the
**   GEMMs (every part of kn__nn_gemm: oneDNN's bfloat16 matmul, or the
**   float32 conversions and sgemm where the CPU has no bfloat16 kernel) and
**   the rest, the f32/bf16 ratio of each, and how many of the bfloat16
**   step's GEMM calls ran on oneDNN's bfloat16 matmul and how many through
**   float32: the rest's ratio bounds what a faster GEMM can give.
** BENCH_INFO lines name oneDNN's ISA, the implementation oneDNN offers for a
** bfloat16 matmul (and whether kiln uses it) and the conversion table.
**
** KILN_BENCH_PROFILE=1 adds where the time goes (kiln's profiler): for the
** float32 and the autocast transformer step (after its BENCH line), and for
** kn_mm (after the RATIO lines): the first call of a new shape under
** autocast (oneDNN's primitive creation), then 1024^3 under autocast on
** float32 inputs, on bfloat16 inputs and in float32, a table of the ops and kernel
** parts ("onednn::matmul_execute", "gemm16::convert_result", ...) by self
** time with call counts, and PROFILE_SUM lines: the milliseconds per
** call/step of the casts (aten::_to_copy), oneDNN's bfloat16 matmul
** (execute, setup, primitive creation), sgemm and the 16-bit conversions,
** and PROFILE_SPLIT lines: per step, the total, the GEMMs (all their
** parts), the casts and conversions, and the rest (what a faster GEMM
** cannot remove: it bounds the step's ratio).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "kiln/kiln.h"
#include "ops/cvt16.h"
#include "ops/nn_dnnl.h"

#define ROUNDS 7

static void die(const char *what) {
  fprintf(stderr, "bench_autocast: %s: %s\n", what, kn_last_error());
  exit(1);
}

/* Wall time of one kn_mm (fresh output). */
static double time_mm(kn_tensor *a, kn_tensor *b) {
  kn_scope_begin();
  double t0 = kn_bench_wall_s();
  if (!kn_mm(a, b)) die("mm");
  double t = kn_bench_wall_s() - t0;
  kn_scope_end();
  return t;
}

static double mm_ratio(void) {
  static const int shapes[][3] = {{512, 512, 512}, {1024, 1024, 1024}, {256, 784, 512}};
  double logsum = 0;
  for (int s = 0; s < 3; s++) {
    int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
    kn_scope_begin();
    kn_tensor *a = kn_randn(2, (int64_t[]){M, K}, NULL, KN_FLOAT32);
    kn_tensor *b = kn_randn(2, (int64_t[]){K, N}, NULL, KN_FLOAT32);
    kn_tensor *ah = kn_to(a, KN_BFLOAT16), *bh = kn_to(b, KN_BFLOAT16);
    double best32 = INFINITY, best16 = INFINITY;
    for (int r = 0; r < ROUNDS + 1; r++) {
      double t32 = time_mm(a, b), t16 = time_mm(ah, bh);
      if (r == 0) continue; /* warm-up: primitive creation, caches */
      best32 = t32 < best32 ? t32 : best32;
      best16 = t16 < best16 ? t16 : best16;
    }
    double gf = 2.0 * M * K * N * 1e-9;
    printf("BENCH mm_%dx%dx%d f32 %.1f bf16 %.1f GFLOP/s\n", M, K, N, gf / best32, gf / best16);
    logsum += log(best32 / best16);
    kn_scope_end();
  }
  return exp(logsum / 3);
}

/* Forward and backward of conv2d(x, w, b) (3x3, padding 1), under
** bfloat16 autocast when bf16: float32 leaves either way. */
static double time_conv(kn_tensor *x, kn_tensor *w, kn_tensor *b, bool bf16) {
  kn_scope_begin();
  double t0 = kn_bench_wall_s();
  if (bf16) kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *y = kn_conv2d(x, w, b, NULL, (int64_t[]){1, 1}, NULL, 1);
  if (bf16) kn_autocast_end();
  kn_tensor *ins[3] = {x, w, b}, *g[3];
  if (!y || kn_autograd_grad((kn_tensor *[]){kn_sum(kn_to(y, KN_FLOAT32))}, 1, ins, 3, NULL,
                             false, false, false, g) != KN_OK)
    die("conv2d");
  double t = kn_bench_wall_s() - t0;
  kn_scope_end();
  return t;
}

/* RATIO conv2d_step_bf16_vs_f32: a ResNet-stage convolution (batch 8, 64 ->
** 64 channels, 28 x 28, 3 x 3) forward and backward, float32 over bfloat16
** autocast (no goal: the issue sets none; printed with oneDNN's kernel). */
static double conv_ratio(void) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(8, 64, 28, 28), NULL, KN_FLOAT32);
  kn_tensor *w = kn_mul_scalar(kn_randn(KN_SHAPE(64, 64, 3, 3), NULL, KN_FLOAT32), kn_float(0.05));
  kn_tensor *b = kn_zeros(KN_SHAPE(64), KN_FLOAT32);
  kn_set_requires_grad(x, true), kn_set_requires_grad(w, true), kn_set_requires_grad(b, true);
  kn__convg g = {.N = 8, .C = 64, .H = 28, .W = 28, .O = 64, .kh = 3, .kw = 3, .OH = 28,
                 .OW = 28, .G = 1, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1};
  char impl[160] = "none (bfloat16 widened to float32)";
  if (kn__dnnl_conv_fast(&g, KN_BFLOAT16, true, KN__CONV_FWD))
    kn__dnnl_conv_impl(&g, KN_BFLOAT16, impl, sizeof impl);
  printf("BENCH_INFO conv2d_bf16_impl %s\n", impl);
  double best32 = INFINITY, best16 = INFINITY;
  for (int r = 0; r < ROUNDS + 1; r++) {
    double t32 = time_conv(x, w, b, false), t16 = time_conv(x, w, b, true);
    if (r == 0) continue;
    best32 = t32 < best32 ? t32 : best32;
    best16 = t16 < best16 ? t16 : best16;
  }
  printf("BENCH conv2d_step_8x64x28x28_3x3 f32 %.3f ms bf16 %.3f ms\n", best32 * 1e3,
         best16 * 1e3);
  kn_scope_end();
  return best32 / best16;
}

/* One training step of the layer; bf16: under bfloat16 autocast. The
** phases are profiler ranges (nothing is recorded when it is off). */
static double layer_step(kn_module *layer, kn_optimizer *opt, kn_tensor *x, kn_tensor *y,
                         bool bf16) {
  double t0 = kn_bench_wall_s();
  kn_scope_begin();
  kn_profiler_range_push("step.forward");
  if (bf16) kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *out = kn_nn_transformer_encoder_layer_forward(layer, x, NULL);
  kn_tensor *loss = out ? kn_mse_loss(out, y, KN_REDUCTION_MEAN) : NULL;
  if (bf16) kn_autocast_end();
  kn_profiler_range_pop();
  kn_profiler_range_push("step.backward");
  if (!loss || kn_backward(loss, NULL) != KN_OK) die("backward");
  kn_profiler_range_pop();
  kn_profiler_range_push("step.optimizer");
  if (kn_optim_step(opt) != KN_OK) die("step");
  kn_optim_zero_grad(opt);
  kn_profiler_range_pop();
  kn_scope_end();
  return kn_bench_wall_s() - t0;
}

/* ---- KILN_BENCH_PROFILE ---------------------------------------------------- */

#define PROFILE_ROWS 22

static bool profiling(void) {
  const char *v = getenv("KILN_BENCH_PROFILE");
  return v && *v && strcmp(v, "0") != 0;
}

/* Total duration (ms) and count of the recorded events named `name`. */
static double event_ms(const char *name, int *count) {
  double ms = 0;
  *count = 0;
  kn_profiler_event e;
  for (int i = 0; kn_profiler_get_event(i, &e); i++)
    if (!strcmp(e.name, name)) ms += (double)e.dur_ns * 1e-6, ++*count;
  return ms;
}

/* Summed durations (ms) of the events named in names[0..n). */
static double events_ms(const char *const *names, int n) {
  double ms = 0;
  for (int k = 0; k < n; k++) {
    int c;
    ms += event_ms(names[k], &c);
  }
  return ms;
}

/* A step's time split (ms per step): GEMMs (every kernel part of
** kn__nn_gemm), casts and conversions, and the rest. */
typedef struct split {
  double total, gemm, casts;
  int native, converted; /* GEMM calls on oneDNN's 16-bit matmul / through float32 */
} split;

static split split_of(int per);

/* PROFILE_SPLIT: the time of the GEMMs (every kernel part of kn__nn_gemm)
** against the rest, per step: what no faster GEMM can remove. */
static void print_split(const char *title, int per, const char *unit) {
  split sp = split_of(per);
  printf("PROFILE_SPLIT %s ms/%s: total %.3f gemm %.3f casts %.3f rest %.3f\n", title, unit,
         sp.total, sp.gemm, sp.casts, sp.total - sp.gemm - sp.casts);
}

static split split_of(int per) {
  static const char *const steps[] = {"step.forward", "step.backward", "step.optimizer"};
  static const char *const gemm[] = {
      "onednn::sgemm", "onednn::matmul_execute", "onednn::matmul_setup",
      "onednn::matmul_primitive_create", "gemm16::convert_result", "gemm16::convert_operands",
      "openblas::sgemm"};
  static const char *const casts[] = {"aten::_to_copy", "pointwise::convert_input",
                                      "pointwise::convert_output"};
  double total = events_ms(steps, 3), g = events_ms(gemm, 7), c = events_ms(casts, 3);
  if (total == 0) total = events_ms((const char *const[]){"aten::mm"}, 1);
  split sp = {total / per, g / per, c / per, 0, 0};
  (void)event_ms("onednn::matmul_execute", &sp.native);
  (void)event_ms("gemm16::convert_operands", &sp.converted);
  return sp;
}

/* The profiler's table of what ran since kn_profiler_start, and one
** PROFILE_SUM line of the parts that matter for bfloat16, per `per` units
** (calls or steps). */
static void profile_print(const char *title, int per, const char *unit) {
  if (kn_profiler_is_running()) kn_profiler_stop();
  printf("PROFILE %s: %d %s, top %d by self time\n", title, per, unit, PROFILE_ROWS);
  char *t = kn_profiler_table("self_cpu_time_total", PROFILE_ROWS);
  if (!t) die("profiler table");
  fputs(t, stdout);
  free(t);
  static const char *const parts[][2] = {
      {"aten::_to_copy", "cast"},
      {"onednn::matmul_execute", "bf16_matmul_execute"},
      {"onednn::matmul_setup", "bf16_matmul_setup"},
      {"onednn::matmul_primitive_create", "bf16_matmul_create"},
      {"gemm16::convert_result", "gemm_out_convert"},
      {"gemm16::convert_operands", "gemm_in_convert"},
      {"onednn::sgemm", "sgemm"},
      {"pointwise::convert_input", "pointwise_in_convert"},
      {"pointwise::convert_output", "pointwise_out_convert"},
  };
  printf("PROFILE_SUM %s ms/%s:", title, unit);
  for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
    int n;
    double ms = event_ms(parts[k][0], &n);
    printf(" %s %.3f (%dx)", parts[k][1], ms / per, n);
  }
  printf("\n");
  print_split(title, per, unit);
}

/* kn_mm of a and b: `calls` calls under the profiler (autocast: in a
** bfloat16 region). */
static void profile_mm_calls(const char *title, kn_tensor *a, kn_tensor *b, bool autocast,
                             int calls) {
  kn_profiler_start();
  for (int r = 0; r < calls; r++) {
    kn_scope_begin();
    if (autocast) kn_autocast_begin(KN_BFLOAT16);
    if (!kn_mm(a, b)) die("mm");
    if (autocast) kn_autocast_end();
    kn_scope_end();
  }
  profile_print(title, calls, "call");
}

/* The first call of a shape no other part of the bench uses (it creates
** oneDNN's primitive), then the next calls of the 1024^3 product (whose
** primitive the RATIO runs made). */
static void profile_mm(void) {
  enum { S = 1024, CALLS = 5 };
  kn_scope_begin();
  kn_tensor *a0 = kn_randn(2, (int64_t[]){1000, 1000}, NULL, KN_FLOAT32);
  profile_mm_calls("mm_1000 bf16 autocast first_call", a0, a0, true, 1);
  kn_tensor *a = kn_randn(2, (int64_t[]){S, S}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(2, (int64_t[]){S, S}, NULL, KN_FLOAT32);
  kn_tensor *ah = kn_to(a, KN_BFLOAT16), *bh = kn_to(b, KN_BFLOAT16);
  if (!ah || !bh) die("inputs");
  profile_mm_calls("mm_1024 bf16 autocast", a, b, true, CALLS);
  profile_mm_calls("mm_1024 bf16 inputs", ah, bh, false, CALLS);
  (void)kn_mm(a, b); /* sgemm's first-call setup */
  profile_mm_calls("mm_1024 f32", a, b, false, CALLS);
  kn_scope_end();
}

/* Steps of the layer in float32 and under autocast, each under the profiler
** (the caller has warmed both), alternating, the least total kept of each:
** the BENCH line of the split (what a faster GEMM can and cannot remove;
** the 16-bit GEMM calls that ran on oneDNN's bfloat16 matmul and those
** that went through float32 conversions). profile: the tables and
** PROFILE_SUM lines of the last round too. */
static void split_layer(kn_module *layer, kn_optimizer *opt, kn_tensor *x, kn_tensor *y,
                        bool profile) {
  enum { STEPS = 3, SPLIT_ROUNDS = 3 };
  split best[2] = {{INFINITY, 0, 0, 0, 0}, {INFINITY, 0, 0, 0, 0}};
  for (int r = 0; r < SPLIT_ROUNDS; r++)
    for (int bf16 = 0; bf16 < 2; bf16++) {
      kn_profiler_start();
      for (int k = 0; k < STEPS; k++) layer_step(layer, opt, x, y, bf16);
      kn_profiler_stop();
      split sp = split_of(STEPS);
      if (sp.total < best[bf16].total) best[bf16] = sp;
      if (profile && r == SPLIT_ROUNDS - 1)
        profile_print(bf16 ? "transformer_layer_step bf16" : "transformer_layer_step f32",
                      STEPS, "step");
    }
  double rest32 = best[0].total - best[0].gemm, rest16 = best[1].total - best[1].gemm;
  printf("BENCH transformer_layer_step_split ms (profiled): f32 gemm %.2f rest %.2f; bf16 gemm "
         "%.2f rest %.2f (casts and conversions %.2f); f32/bf16 gemm %.3f rest %.3f; bf16 "
         "gemm calls per step %d on onednn_bf16_matmul %d via float32\n",
         best[0].gemm, rest32, best[1].gemm, rest16, best[1].casts,
         best[0].gemm / best[1].gemm, rest32 / rest16, best[1].native / STEPS,
         best[1].converted / STEPS);
}

static double layer_ratio(bool profile) {
  kn_generator *g = kn_generator_new(7);
  kn_module *layer = kn_nn_transformer_encoder_layer(256, 4, 1024, 0.0, true, g);
  if (!layer) die("layer");
  kn_tensor **ps;
  int n = kn_nn_parameters(layer, &ps);
  kn_optimizer *opt = kn_sgd(ps, n, &(kn_optim_options){.lr = 1e-4});
  free(ps);
  kn_scope_begin();
  kn_tensor *x = kn_randn(3, (int64_t[]){8, 64, 256}, g, KN_FLOAT32);
  kn_tensor *y = kn_randn(3, (int64_t[]){8, 64, 256}, g, KN_FLOAT32);
  double best32 = INFINITY, best16 = INFINITY;
  for (int r = 0; r < ROUNDS + 1; r++) {
    double t32 = layer_step(layer, opt, x, y, false), t16 = layer_step(layer, opt, x, y, true);
    if (r == 0) continue;
    best32 = t32 < best32 ? t32 : best32;
    best16 = t16 < best16 ? t16 : best16;
  }
  printf("BENCH transformer_layer_step f32 %.2f ms bf16 %.2f ms\n", best32 * 1e3,
         best16 * 1e3);
  split_layer(layer, opt, x, y, profile);
  kn_scope_end();
  kn_optim_free(opt);
  kn_module_free(layer);
  kn_generator_free(g);
  return best32 / best16;
}

int main(void) {
  char impl[96];
  if (kn__dnnl_gemm16_impl(KN_BFLOAT16, 1024, 1024, 1024, impl, sizeof impl) != KN_OK)
    die("oneDNN");
  printf("BENCH_INFO onednn_isa %s\n", kn__dnnl_isa_name());
  printf("BENCH_INFO onednn_bf16_matmul %s\n", impl);
  printf("BENCH_INFO bf16_conversions %s\n", kn__cvt16_get()->name);
  bool profile = profiling();
  double mm = mm_ratio();
  const char *isa = kn__dnnl_isa_name();
  /* the goals are for CPUs with bf16 instructions (oneDNN's avx512_core_bf16
  ** and amx ISAs); elsewhere bf16 runs through float32 and they do not apply */
  bool bf16_cpu = strstr(isa, "bf16") || strstr(isa, "amx");
  const char *na = bf16_cpu ? "" : "goal n/a on this CPU, without AVX512-BF16 or AMX: ";
  printf("RATIO mm_bf16_vs_f32 %.3f (%s%s1.8; oneDNN isa %s)\n", mm, na,
         bf16_cpu ? "goal >= " : "its goal is >= ", isa);
  printf("RATIO conv2d_step_bf16_vs_f32 %.3f (no goal; oneDNN isa %s)\n", conv_ratio(), isa);
  double tl = layer_ratio(profile);
  printf("RATIO transformer_layer_step_bf16_vs_f32 %.3f (%s%s1.6; oneDNN isa %s)\n", tl, na,
         bf16_cpu ? "goal >= " : "its goal is >= ", isa);
  if (profile) profile_mm();
  return 0;
}
