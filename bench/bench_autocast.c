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
** BENCH_INFO lines name oneDNN's ISA, the implementation oneDNN offers for a
** bfloat16 matmul (and whether kiln uses it) and the conversion table.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

/* One training step of the layer; bf16: under bfloat16 autocast. */
static double layer_step(kn_module *layer, kn_optimizer *opt, kn_tensor *x, kn_tensor *y,
                         bool bf16) {
  double t0 = kn_bench_wall_s();
  kn_scope_begin();
  if (bf16) kn_autocast_begin(KN_BFLOAT16);
  kn_tensor *out = kn_nn_transformer_encoder_layer_forward(layer, x, NULL);
  kn_tensor *loss = out ? kn_mse_loss(out, y, KN_REDUCTION_MEAN) : NULL;
  if (bf16) kn_autocast_end();
  if (!loss || kn_backward(loss, NULL) != KN_OK || kn_optim_step(opt) != KN_OK) die("step");
  kn_optim_zero_grad(opt);
  kn_scope_end();
  return kn_bench_wall_s() - t0;
}

static double layer_ratio(void) {
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
  double mm = mm_ratio();
  printf("RATIO mm_bf16_vs_f32 %.3f (goal >= 1.8 with AVX512-BF16/AMX; oneDNN isa %s)\n", mm,
         kn__dnnl_isa_name());
  double tl = layer_ratio();
  printf("RATIO transformer_layer_step_bf16_vs_f32 %.3f (goal >= 1.6 with AVX512-BF16/AMX; "
         "oneDNN isa %s)\n", tl, kn__dnnl_isa_name());
  return 0;
}
