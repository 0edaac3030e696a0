/*
** bench_conv.c: kiln's float32 conv2d against a oneDNN convolution primitive
** called directly in the same run.
**
** N=32, C=O=64, 56x56, 3x3, padding 1, with bias (a ResNet stage). The
** reference is a forward convolution primitive built once on the layouts a
** kiln caller holds (NCHW activations, OIHW weights), run on the same
** buffers, in two ways: with those plain layouts, and with the layouts oneDNN
** prefers (blocked) plus the reorders from and to the plain buffers. kiln
** goes through kn_conv2d (dispatcher, fresh output, its primitive cache).
** Prints
**   BENCH conv2d_kiln_ms, conv2d_onednn_plain_ms, conv2d_onednn_blocked_ms
**   RATIO conv2d_vs_onednn <faster direct time / kiln time> (goal >= 0.9)
** and, for information, RATIO conv2d_onednn_blocked_vs_plain (the plain
** primitive's time over the blocked one's with its reorders: why kiln picks
** the blocked layouts), BENCH conv2d_onednn_blocked_kernel_ms: the blocked
** primitive alone with the data already reordered (what a caller that keeps
** its tensors in oneDNN layouts would pay), and BENCH conv2d_backward_kiln_ms
** (input, weight and bias gradients through autograd; twice the forward's
** FLOPs). BENCH_INFO names the implementations oneDNN picked.
*/
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kiln/kiln.h"
#include "ops/nn_dnnl.h"
#include "bench_util.h"

#define REPS 7
enum { N = 32, C = 64, O = 64, H = 56, W = 56, K = 3 };

#define CHECK(x)                                                                          \
  do {                                                                                    \
    dnnl_status_t s_ = (x);                                                               \
    if (s_ != dnnl_success) {                                                             \
      fprintf(stderr, "bench_conv: %s failed (%d)\n", #x, (int)s_);                       \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

/* A direct oneDNN forward convolution: primitive, engine, stream, memories
** (src, wei, dst in the primitive's layouts; usr_* wrap the plain buffers,
** with reorders to and from them when the layouts differ). */
typedef struct direct {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  dnnl_primitive_t prim, r_src, r_wei, r_dst;
  dnnl_memory_t src, wei, bias, dst, usr_src, usr_wei, usr_dst;
  char impl[64];
} direct;

static void md4(dnnl_memory_desc_t *md, int64_t a, int64_t b, int64_t c, int64_t d,
                dnnl_format_tag_t tag) {
  dnnl_dims_t dims = {a, b, c, d};
  CHECK(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag));
}

/* A plain memory over p (stored in *usr) and a reorder between it and the
** primitive's memory m (plain -> m, or m -> plain when back). */
static dnnl_primitive_t reorder_to(direct *d, dnnl_memory_t *usr, int64_t a, int64_t b, int64_t c,
                                   int64_t e, dnnl_format_tag_t tag, float *p, dnnl_memory_t m,
                                   bool back) {
  dnnl_memory_desc_t md;
  md4(&md, a, b, c, e, tag);
  CHECK(dnnl_memory_create(usr, &md, d->eng, p));
  const dnnl_memory_desc_t *pm;
  CHECK(dnnl_memory_get_memory_desc(m, &pm));
  dnnl_primitive_desc_t rpd;
  CHECK(dnnl_reorder_primitive_desc_create(&rpd, back ? pm : &md, d->eng, back ? &md : pm,
                                           d->eng, NULL));
  dnnl_primitive_t r;
  CHECK(dnnl_primitive_create(&r, rpd));
  dnnl_primitive_desc_destroy(rpd);
  return r;
}

/* Build the primitive with plain layouts (blocked = false) or with the ones
** oneDNN prefers; memories are allocated by oneDNN (blocked) or wrap the
** given buffers (plain). */
static void direct_init(direct *d, bool blocked, float *x, float *w, float *b, float *y) {
  CHECK(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags));
  dnnl_memory_desc_t src, wei, bias, dst;
  md4(&src, N, C, H, W, blocked ? dnnl_format_tag_any : dnnl_nchw);
  md4(&wei, O, C, K, K, blocked ? dnnl_format_tag_any : dnnl_oihw);
  md4(&dst, N, O, H, W, blocked ? dnnl_format_tag_any : dnnl_nchw);
  dnnl_dims_t bd = {O}, st = {1, 1}, pad = {1, 1};
  CHECK(dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_a));
  dnnl_convolution_desc_t cd;
  CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct,
                                           &src, &wei, &bias, &dst, st, pad, pad));
  dnnl_primitive_desc_t pd;
  CHECK(dnnl_primitive_desc_create(&pd, &cd, NULL, d->eng, NULL));
  const char *impl = "unknown";
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  snprintf(d->impl, sizeof d->impl, "%s", impl);
  const dnnl_memory_desc_t *qs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *qw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  const dnnl_memory_desc_t *qd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
  void *h = blocked ? DNNL_MEMORY_ALLOCATE : NULL;
  CHECK(dnnl_memory_create(&d->src, qs, d->eng, blocked ? h : x));
  CHECK(dnnl_memory_create(&d->wei, qw, d->eng, blocked ? h : w));
  CHECK(dnnl_memory_create(&d->bias, &bias, d->eng, b));
  CHECK(dnnl_memory_create(&d->dst, qd, d->eng, blocked ? h : y));
  CHECK(dnnl_primitive_create(&d->prim, pd));
  dnnl_primitive_desc_destroy(pd);
  d->r_src = d->r_wei = d->r_dst = NULL;
  d->usr_src = d->usr_wei = d->usr_dst = NULL;
  if (blocked) {
    d->r_src = reorder_to(d, &d->usr_src, N, C, H, W, dnnl_nchw, x, d->src, false);
    d->r_wei = reorder_to(d, &d->usr_wei, O, C, K, K, dnnl_oihw, w, d->wei, false);
    d->r_dst = reorder_to(d, &d->usr_dst, N, O, H, W, dnnl_nchw, y, d->dst, true);
  }
}

static void reorder_run(direct *d, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  CHECK(dnnl_primitive_execute(r, d->stream, 2, a));
}

/* The blocked primitive with the reorders from and to the plain buffers. */
static double direct_run_reordered(direct *d) {
  double t0 = kn_bench_wall_s();
  reorder_run(d, d->r_src, d->usr_src, d->src);
  reorder_run(d, d->r_wei, d->usr_wei, d->wei);
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei},
                             {DNNL_ARG_BIAS, d->bias}, {DNNL_ARG_DST, d->dst}};
  CHECK(dnnl_primitive_execute(d->prim, d->stream, 4, args));
  reorder_run(d, d->r_dst, d->dst, d->usr_dst);
  CHECK(dnnl_stream_wait(d->stream));
  return kn_bench_wall_s() - t0;
}

static double direct_run(direct *d) {
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei},
                             {DNNL_ARG_BIAS, d->bias}, {DNNL_ARG_DST, d->dst}};
  double t0 = kn_bench_wall_s();
  CHECK(dnnl_primitive_execute(d->prim, d->stream, 4, args));
  CHECK(dnnl_stream_wait(d->stream));
  return kn_bench_wall_s() - t0;
}

static void direct_free(direct *d) {
  dnnl_primitive_t rs[3] = {d->r_src, d->r_wei, d->r_dst};
  dnnl_memory_t us[3] = {d->usr_src, d->usr_wei, d->usr_dst};
  for (int i = 0; i < 3; i++) {
    if (rs[i]) dnnl_primitive_destroy(rs[i]);
    if (us[i]) dnnl_memory_destroy(us[i]);
  }
  dnnl_primitive_destroy(d->prim);
  dnnl_memory_destroy(d->src);
  dnnl_memory_destroy(d->wei);
  dnnl_memory_destroy(d->bias);
  dnnl_memory_destroy(d->dst);
  dnnl_stream_destroy(d->stream);
  dnnl_engine_destroy(d->eng);
}

static double kiln_run(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  static const int64_t pad[2] = {1, 1};
  double t0 = kn_bench_wall_s();
  kn_tensor *y = kn_conv2d(x, w, b, NULL, pad, NULL, 1);
  double t = kn_bench_wall_s() - t0;
  if (!y) {
    fprintf(stderr, "bench_conv: %s\n", kn_last_error());
    exit(1);
  }
  kn_release(y);
  return t;
}

/* Median time of the three gradients of y = conv2d(x, w, b). */
static double kiln_backward_ms(kn_tensor *x0, kn_tensor *w0, kn_tensor *b0) {
  static const int64_t pad[2] = {1, 1};
  kn_scope_begin();
  kn_tensor *in[3] = {kn_detach(x0), kn_detach(w0), kn_detach(b0)};
  for (int i = 0; i < 3; i++) kn_set_requires_grad(in[i], true);
  kn_tensor *y = kn_conv2d(in[0], in[1], in[2], NULL, pad, NULL, 1);
  kn_tensor *gy = y ? kn_ones(kn_ndim(y), kn_sizes(y), KN_FLOAT32) : NULL;
  double t[5];
  for (int r = 0; r < 5 && gy; r++) {
    kn_tensor *g[3];
    double t0 = kn_bench_wall_s();
    if (kn_autograd_grad(&y, 1, in, 3, &gy, true, false, false, g) != KN_OK) gy = NULL;
    t[r] = kn_bench_wall_s() - t0;
  }
  if (!gy) {
    fprintf(stderr, "bench_conv: %s\n", kn_last_error());
    exit(1);
  }
  kn_scope_end();
  return kn_bench_median(t, 5) * 1e3;
}

static void fill(kn_tensor *t, int mod, float scale) {
  float *p = kn_data(t);
  for (int64_t i = 0; i < kn_numel(t); i++) p[i] = (float)(i % mod) * scale - 0.5f;
}

int main(void) {
  kn_tensor *x = kn_empty(KN_SHAPE(N, C, H, W), KN_FLOAT32);
  kn_tensor *w = kn_empty(KN_SHAPE(O, C, K, K), KN_FLOAT32);
  kn_tensor *b = kn_empty(KN_SHAPE(O), KN_FLOAT32);
  float *y = malloc(sizeof(float) * N * O * H * W);
  if (!x || !w || !b || !y) return 1;
  fill(x, 13, 0.08f), fill(w, 7, 0.1f), fill(b, 5, 0.2f);
  direct plain, blocked;
  direct_init(&plain, false, kn_data(x), kn_data(w), kn_data(b), y);
  direct_init(&blocked, true, kn_data(x), kn_data(w), kn_data(b), y);
  printf("BENCH_INFO onednn_isa %s\n", kn__dnnl_isa_name());
  printf("BENCH_INFO conv2d_onednn_plain_impl %s\n", plain.impl);
  printf("BENCH_INFO conv2d_onednn_blocked_impl %s\n", blocked.impl);
  kn__convg g = {.N = N, .C = C, .H = H, .W = W, .O = O, .kh = K, .kw = K, .OH = H, .OW = W,
                 .G = 1, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .dh = 1, .dw = 1};
  char impl[64];
  if (kn__dnnl_conv_impl(&g, KN_FLOAT32, impl, sizeof impl) == KN_OK)
    printf("BENCH_INFO conv2d_kiln_impl %s\n", impl);
  double tk[REPS], tp[REPS], tr[REPS], tb[REPS];
  /* warm up (builds kiln's primitive cache), then interleave */
  kiln_run(x, w, b), direct_run(&plain), direct_run_reordered(&blocked), direct_run(&blocked);
  for (int r = 0; r < REPS; r++) {
    if (r % 2) tk[r] = kiln_run(x, w, b), tp[r] = direct_run(&plain);
    else tp[r] = direct_run(&plain), tk[r] = kiln_run(x, w, b);
    tr[r] = direct_run_reordered(&blocked);
    tb[r] = direct_run(&blocked);
  }
  double mk = kn_bench_median(tk, REPS) * 1e3, mp = kn_bench_median(tp, REPS) * 1e3;
  double mr = kn_bench_median(tr, REPS) * 1e3, mb = kn_bench_median(tb, REPS) * 1e3;
  double gflop = 2.0 * N * O * H * W * C * K * K * 1e-9;
  printf("BENCH conv2d_kiln_ms %.2f (%.1f GFLOP/s)\n", mk, gflop / mk * 1e3);
  printf("BENCH conv2d_onednn_plain_ms %.2f (%.1f GFLOP/s)\n", mp, gflop / mp * 1e3);
  printf("BENCH conv2d_onednn_blocked_ms %.2f (%.1f GFLOP/s)\n", mr, gflop / mr * 1e3);
  printf("BENCH conv2d_onednn_blocked_kernel_ms %.2f (%.1f GFLOP/s)\n", mb, gflop / mb * 1e3);
  double mbw = kiln_backward_ms(x, w, b);
  printf("BENCH conv2d_backward_kiln_ms %.2f (%.1f GFLOP/s)\n", mbw, 2 * gflop / mbw * 1e3);
  printf("RATIO conv2d_vs_onednn %.3f (goal >= 0.9)\n", (mp < mr ? mp : mr) / mk);
  printf("RATIO conv2d_onednn_blocked_vs_plain %.3f (plain time / blocked with reorders)\n",
         mp / mr);
  direct_free(&plain);
  direct_free(&blocked);
  kn_release(x), kn_release(w), kn_release(b);
  free(y);
  return 0;
}
