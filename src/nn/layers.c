/*
** nn/layers.c: Linear, Conv2d, BatchNorm1d/2d, LayerNorm, Embedding,
** Dropout, activations, Flatten, MaxPool2d/AvgPool2d and Sequential.
** Configuration lives in the layer record's i[] / d[] slots, named per type
** below; parameters and buffers in the module under PyTorch's names.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dynamo/dynamo.h"
#include "nn/nn_int.h"

static const char *tf(bool b) { return b ? "True" : "False"; }

static void put_float(kn__sb *sb, double d) {
  char buf[40];
  kn__py_float_repr(d, buf, sizeof buf);
  kn__sb_puts(sb, buf);
}

/* Frees m and returns NULL when st is not OK. */
static kn_module *finish(kn_module *m, kn_status st) {
  if (st == KN_OK) return m;
  kn_module_free(m);
  return NULL;
}

static kn_module *bad(const char *fmt, const char *layer, int64_t v) {
  kn__error(KN_EINVAL, fmt, layer, (long long)v);
  return NULL;
}

/* ---- Linear: i[0] in, i[1] out, i[2] bias ---------------------------------------- */
static kn_tensor *linear_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m;
  return kn_linear(x, kn__nn_get(c, "weight"), l->i[2] ? kn__nn_get(c, "bias") : NULL);
}

static void linear_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "in_features=%lld, out_features=%lld, bias=%s", (long long)l->i[0],
                (long long)l->i[1], tf(l->i[2]));
}

static const kn__nn_type linear_type = {"Linear", linear_fwd, linear_repr};
/* MultiheadAttention's out_proj: a Linear under another name. */
static const kn__nn_type ndq_linear_type = {"NonDynamicallyQuantizableLinear", linear_fwd,
                                            linear_repr};

kn_module *kn_nn_linear(int64_t in_features, int64_t out_features, bool bias,
                        kn_generator *gen) {
  return kn__nn_linear_typed(false, in_features, out_features, bias, gen);
}

kn_module *kn__nn_linear_typed(bool ndq, int64_t in_features, int64_t out_features, bool bias,
                               kn_generator *gen) {
  if (in_features <= 0 || out_features <= 0)
    return bad("%s: expected positive feature counts, found %lld", "Linear",
               in_features <= 0 ? in_features : out_features);
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(ndq ? &ndq_linear_type : &linear_type, &l);
  if (!m) return NULL;
  l->i[0] = in_features, l->i[1] = out_features, l->i[2] = bias;
  double bound = 1.0 / sqrt((double)in_features); /* kaiming_uniform(a=sqrt(5)) */
  kn_status st = kn__nn_add(m, "weight", kn__nn_uniform(KN_SHAPE(out_features, in_features),
                                                        bound, gen), true);
  if (st == KN_OK && bias)
    st = kn__nn_add(m, "bias", kn__nn_uniform(KN_SHAPE(out_features), bound, gen), true);
  return finish(m, st);
}

/* ---- Conv2d: i[0] in, i[1] out, i[2..3] kernel, i[4..5] stride, i[6..7] padding,
** i[8..9] dilation, i[10] groups, i[11] bias | same << 1 ------------------------- */
static kn_tensor *conv_same(kn__nn_layer *l, kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  int64_t pad[2], extra[2];
  for (int k = 0; k < 2; k++) {
    int64_t total = l->i[8 + k] * (l->i[2 + k] - 1);
    pad[k] = total / 2 + total % 2; /* odd totals: one more on the far side */
    extra[k] = total % 2;
  }
  kn_tensor *y = kn_conv2d(x, w, b, &l->i[4], pad, &l->i[8], l->i[10]);
  int nd = y ? kn_ndim(y) : 0;
  for (int k = 0; k < 2 && y; k++)
    if (extra[k]) y = kn_narrow(y, nd - 2 + k, 1, kn_size(y, nd - 2 + k) - 1);
  return y;
}

static kn_tensor *conv_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m;
  kn_tensor *w = kn__nn_get(c, "weight"), *b = (l->i[11] & 1) ? kn__nn_get(c, "bias") : NULL;
  if (!(l->i[11] & 2)) return kn_conv2d(x, w, b, &l->i[4], &l->i[6], &l->i[8], l->i[10]);
  kn_scope_begin();
  return kn_scope_end_keep(conv_same(l, x, w, b));
}

static void pair(kn__sb *sb, const char *name, const int64_t *v) {
  kn__sb_printf(sb, ", %s=(%lld, %lld)", name, (long long)v[0], (long long)v[1]);
}

static void conv_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "%lld, %lld, kernel_size=(%lld, %lld)", (long long)l->i[0],
                (long long)l->i[1], (long long)l->i[2], (long long)l->i[3]);
  pair(sb, "stride", &l->i[4]);
  if (l->i[11] & 2) kn__sb_puts(sb, ", padding=same");
  else if (l->i[6] || l->i[7]) pair(sb, "padding", &l->i[6]);
  if (l->i[8] != 1 || l->i[9] != 1) pair(sb, "dilation", &l->i[8]);
  if (l->i[10] != 1) kn__sb_printf(sb, ", groups=%lld", (long long)l->i[10]);
  if (!(l->i[11] & 1)) kn__sb_puts(sb, ", bias=False");
}

static const kn__nn_type conv_type = {"Conv2d", conv_fwd, conv_repr};

static int64_t or_default(int64_t v, int64_t d) { return v ? v : d; }

static kn_module *conv_check(const int64_t *cfg) {
  for (int k = 0; k < 4; k++)
    if (cfg[k] <= 0) return bad("%s: expected positive channels and kernel sizes, found %lld",
                                "Conv2d", cfg[k]);
  for (int k = 4; k < 11; k++)
    if (cfg[k] < (k == 6 || k == 7 ? 0 : 1))
      return bad("%s: expected positive stride/dilation/groups and non-negative padding, "
                 "found %lld", "Conv2d", cfg[k]);
  if (cfg[0] % cfg[10] || cfg[1] % cfg[10])
    return bad("%s: in_channels and out_channels must be divisible by groups (%lld)",
               "Conv2d", cfg[10]);
  if ((cfg[11] & 2) && (cfg[4] != 1 || cfg[5] != 1))
    return bad("%s: padding='same' is not supported for strided convolutions (stride %lld)",
               "Conv2d", cfg[4] != 1 ? cfg[4] : cfg[5]);
  return (kn_module *)1;
}

kn_module *kn_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kh, int64_t kw,
                        const kn_conv2d_options *opts, kn_generator *gen) {
  kn_conv2d_options o = opts ? *opts : (kn_conv2d_options){0};
  int64_t cfg[12] = {in_channels, out_channels, kh, kw,
                     or_default(o.stride[0], 1), or_default(o.stride[1], 1),
                     o.padding[0], o.padding[1],
                     or_default(o.dilation[0], 1), or_default(o.dilation[1], 1),
                     or_default(o.groups, 1), (o.no_bias ? 0 : 1) | (o.padding_same ? 2 : 0)};
  if (!conv_check(cfg)) return NULL;
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&conv_type, &l);
  if (!m) return NULL;
  memcpy(l->i, cfg, sizeof cfg);
  int64_t cin = in_channels / cfg[10];
  double bound = 1.0 / sqrt((double)(cin * kh * kw));
  kn_status st = kn__nn_add(m, "weight", kn__nn_uniform(KN_SHAPE(out_channels, cin, kh, kw),
                                                        bound, gen), true);
  if (st == KN_OK && !o.no_bias)
    st = kn__nn_add(m, "bias", kn__nn_uniform(KN_SHAPE(out_channels), bound, gen), true);
  return finish(m, st);
}

/* ---- BatchNorm: i[0] features, i[1] affine, i[2] track, i[3] 1d/2d; d[0] eps,
** d[1] momentum (< 0: cumulative average) --------------------------------------- */
static kn_status bn_check(const kn__nn_layer *l, kn_tensor *x) {
  int nd = kn_ndim(x);
  if (l->i[3] == 1 ? (nd == 2 || nd == 3) : nd == 4) return KN_OK;
  return kn__error(KN_ESHAPE, "expected %s input (got %dD input)",
                   l->i[3] == 1 ? "2D or 3D" : "4D", nd);
}

/* In training with running stats: num_batches_tracked += 1 and the factor
** used for the running averages. */
static double bn_factor(kn__nn_layer *l, const kn__nn_ctx *c) {
  if (!l->training || !l->i[2]) return 0.0;
  kn_tensor *nbt = kn__nn_get(c, "num_batches_tracked");
  bool prev = kn_no_grad_begin();
  kn_add_scalar_(nbt, kn_int(1));
  kn_no_grad_end(prev);
  if (l->d[1] >= 0) return l->d[1];
  int64_t n = 1;
  kn_item_int(nbt, &n);
  return 1.0 / (double)n;
}

static kn_tensor *bn_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m;
  if (bn_check(l, x) != KN_OK) return NULL;
  double factor = bn_factor(l, c);
  bool use_batch = l->training || !l->i[2];
  kn_tensor *rm = l->i[2] ? kn__nn_get(c, "running_mean") : NULL;
  kn_tensor *rv = l->i[2] ? kn__nn_get(c, "running_var") : NULL;
  kn_tensor *w = l->i[1] ? kn__nn_get(c, "weight") : NULL;
  kn_tensor *b = l->i[1] ? kn__nn_get(c, "bias") : NULL;
  return kn_batch_norm(x, rm, rv, w, b, use_batch, factor, l->d[0]);
}

static void bn_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "%lld, eps=", (long long)l->i[0]);
  put_float(sb, l->d[0]);
  kn__sb_puts(sb, ", momentum=");
  if (l->d[1] < 0) kn__sb_puts(sb, "None");
  else put_float(sb, l->d[1]);
  kn__sb_printf(sb, ", affine=%s, track_running_stats=%s", tf(l->i[1]), tf(l->i[2]));
}

static const kn__nn_type bn1_type = {"BatchNorm1d", bn_fwd, bn_repr};
static const kn__nn_type bn2_type = {"BatchNorm2d", bn_fwd, bn_repr};

static kn_module *batchnorm(int dims, int64_t c, double eps, double momentum, bool affine,
                            bool track) {
  if (c <= 0) return bad("%s: expected a positive num_features, found %lld",
                         dims == 1 ? "BatchNorm1d" : "BatchNorm2d", c);
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(dims == 1 ? &bn1_type : &bn2_type, &l);
  if (!m) return NULL;
  l->i[0] = c, l->i[1] = affine, l->i[2] = track, l->i[3] = dims;
  l->d[0] = eps, l->d[1] = momentum;
  kn_status st = KN_OK;
  if (affine) {
    st = kn__nn_add(m, "weight", kn__nn_const(KN_SHAPE(c), 1.0, KN_FLOAT32, true), true);
    if (st == KN_OK)
      st = kn__nn_add(m, "bias", kn__nn_const(KN_SHAPE(c), 0.0, KN_FLOAT32, true), true);
  }
  if (st == KN_OK && track) {
    kn_tensor *rm = kn__nn_const(KN_SHAPE(c), 0.0, KN_FLOAT32, false);
    kn_tensor *rv = kn__nn_const(KN_SHAPE(c), 1.0, KN_FLOAT32, false);
    kn_tensor *nbt = kn__nn_const(0, NULL, 0, KN_INT64, false);
    st = kn__nn_add(m, "running_mean", rm, false);
    if (st == KN_OK) st = kn__nn_add(m, "running_var", rv, false);
    else kn_release(rv);
    if (st == KN_OK) st = kn__nn_add(m, "num_batches_tracked", nbt, false);
    else kn_release(nbt);
  }
  return finish(m, st);
}

kn_module *kn_nn_batchnorm1d(int64_t n, double eps, double momentum, bool affine, bool track) {
  return batchnorm(1, n, eps, momentum, affine, track);
}
kn_module *kn_nn_batchnorm2d(int64_t n, double eps, double momentum, bool affine, bool track) {
  return batchnorm(2, n, eps, momentum, affine, track);
}

/* ---- LayerNorm: i[0] ndim, i[1] affine, i[2..] shape; d[0] eps --------------------- */
static kn_tensor *ln_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m;
  kn_tensor *w = l->i[1] ? kn__nn_get(c, "weight") : NULL;
  kn_tensor *b = l->i[1] ? kn__nn_get(c, "bias") : NULL;
  return kn_layer_norm(x, (int)l->i[0], &l->i[2], w, b, l->d[0]);
}

static void ln_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_putc(sb, '(');
  for (int k = 0; k < l->i[0]; k++)
    kn__sb_printf(sb, "%s%lld", k ? ", " : "", (long long)l->i[2 + k]);
  kn__sb_puts(sb, l->i[0] == 1 ? ",), eps=" : "), eps=");
  put_float(sb, l->d[0]);
  kn__sb_printf(sb, ", elementwise_affine=%s", tf(l->i[1]));
}

static const kn__nn_type ln_type = {"LayerNorm", ln_fwd, ln_repr};

kn_module *kn_nn_layernorm(int ndim, const int64_t *shape, double eps, bool affine) {
  if (ndim < 1 || ndim > 10 || !shape)
    return bad("%s: expected 1 to 10 normalized dims, found %lld", "LayerNorm", ndim);
  for (int k = 0; k < ndim; k++)
    if (shape[k] <= 0) return bad("%s: expected positive sizes, found %lld", "LayerNorm",
                                  shape[k]);
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&ln_type, &l);
  if (!m) return NULL;
  l->i[0] = ndim, l->i[1] = affine, l->d[0] = eps;
  memcpy(&l->i[2], shape, sizeof *shape * (size_t)ndim);
  kn_status st = KN_OK;
  if (affine) {
    st = kn__nn_add(m, "weight", kn__nn_const(ndim, shape, 1.0, KN_FLOAT32, true), true);
    if (st == KN_OK)
      st = kn__nn_add(m, "bias", kn__nn_const(ndim, shape, 0.0, KN_FLOAT32, true), true);
  }
  return finish(m, st);
}

/* ---- Embedding: i[0] num, i[1] dim, i[2] padding_idx (INT64_MIN: none) -------------- */
static kn_tensor *emb_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m;
  return kn_embedding(x, kn__nn_get(c, "weight"), l->i[2], false);
}

static void emb_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "%lld, %lld", (long long)l->i[0], (long long)l->i[1]);
  if (l->i[2] != KN_NO_PADDING_IDX) kn__sb_printf(sb, ", padding_idx=%lld", (long long)l->i[2]);
}

static const kn__nn_type emb_type = {"Embedding", emb_fwd, emb_repr};

static kn_status zero_row(kn_tensor *w, int64_t row) {
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  kn_status st = kn_zero_(kn_select(w, 0, row));
  kn_no_grad_end(prev);
  kn_scope_end();
  return st;
}

kn_module *kn_nn_embedding(int64_t num, int64_t dim, int64_t padding_idx, kn_generator *gen) {
  if (num <= 0 || dim <= 0)
    return bad("%s: expected positive sizes, found %lld", "Embedding", num <= 0 ? num : dim);
  if (padding_idx != KN_NO_PADDING_IDX && padding_idx < 0) padding_idx += num;
  if (padding_idx != KN_NO_PADDING_IDX && (padding_idx < 0 || padding_idx >= num))
    return bad("%s: padding_idx must be within num_embeddings, found %lld", "Embedding",
               padding_idx);
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&emb_type, &l);
  if (!m) return NULL;
  l->i[0] = num, l->i[1] = dim, l->i[2] = padding_idx;
  kn_tensor *w = kn__nn_normal(KN_SHAPE(num, dim), gen);
  kn_status st = w && padding_idx != KN_NO_PADDING_IDX ? zero_row(w, padding_idx) : KN_OK;
  if (st != KN_OK) kn_release(w);
  else st = kn__nn_add(m, "weight", w, true);
  return finish(m, st);
}

/* ---- Dropout: d[0] p ---------------------------------------------------------------- */
static kn_tensor *drop_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m, (void)c;
  return kn_dropout(x, l->d[0], l->training, l->gen);
}

static void drop_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_puts(sb, "p=");
  put_float(sb, l->d[0]);
  kn__sb_puts(sb, ", inplace=False");
}

static const kn__nn_type drop_type = {"Dropout", drop_fwd, drop_repr};

kn_module *kn_nn_dropout(double p, kn_generator *gen) {
  if (!(p >= 0 && p <= 1)) {
    kn__error(KN_EINVAL, "dropout probability has to be between 0 and 1, but got %g", p);
    return NULL;
  }
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&drop_type, &l);
  if (m) l->d[0] = p, l->gen = gen;
  return m;
}

/* ---- activations: i[0] GELU tanh approximation ------------------------------------ */
#define ACT(fname, tname, expr)                                                         \
  static kn_tensor *fname##_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c,     \
                                kn_tensor *x) {                                         \
    (void)m, (void)l, (void)c;                                                          \
    return expr;                                                                        \
  }                                                                                     \
  static const kn__nn_type fname##_type = {tname, fname##_fwd, NULL};                   \
  kn_module *kn_nn_##fname(void) { return kn__nn_new(&fname##_type, NULL); }
ACT(relu, "ReLU", kn_relu(x))
ACT(silu, "SiLU", kn_silu(x))
ACT(tanh, "Tanh", kn_tanh(x))
ACT(sigmoid, "Sigmoid", kn_sigmoid(x))
#undef ACT

static kn_tensor *gelu_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m, (void)c;
  return kn_gelu(x, l->i[0] ? KN_GELU_TANH : KN_GELU_NONE);
}

static void gelu_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "approximate='%s'", l->i[0] ? "tanh" : "none");
}

static const kn__nn_type gelu_type = {"GELU", gelu_fwd, gelu_repr};

kn_module *kn_nn_gelu(bool tanh_approximation) {
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&gelu_type, &l);
  if (m) l->i[0] = tanh_approximation;
  return m;
}

/* ---- Flatten: i[0] start, i[1] end ---------------------------------------------------- */
static kn_tensor *flat_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m, (void)c;
  return kn_flatten(x, l->i[0], l->i[1]);
}

static void flat_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "start_dim=%lld, end_dim=%lld", (long long)l->i[0], (long long)l->i[1]);
}

static const kn__nn_type flat_type = {"Flatten", flat_fwd, flat_repr};

kn_module *kn_nn_flatten(int64_t start_dim, int64_t end_dim) {
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&flat_type, &l);
  if (m) l->i[0] = start_dim, l->i[1] = end_dim;
  return m;
}

/* ---- pooling: i[0..1] kernel, i[2..3] stride, i[4..5] padding ------------------------- */
static kn_tensor *maxp_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m, (void)c;
  return kn_max_pool2d(x, &l->i[0], &l->i[2], &l->i[4], NULL, false);
}

static kn_tensor *avgp_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m, (void)c;
  return kn_avg_pool2d(x, &l->i[0], &l->i[2], &l->i[4], false, true, 0);
}

static void maxp_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "kernel_size=%lld, stride=%lld, padding=%lld, dilation=1, ceil_mode=False",
                (long long)l->i[0], (long long)l->i[2], (long long)l->i[4]);
}

static void avgp_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "kernel_size=%lld, stride=%lld, padding=%lld", (long long)l->i[0],
                (long long)l->i[2], (long long)l->i[4]);
}

static const kn__nn_type maxp_type = {"MaxPool2d", maxp_fwd, maxp_repr};
static const kn__nn_type avgp_type = {"AvgPool2d", avgp_fwd, avgp_repr};

static kn_module *pool(const kn__nn_type *t, int64_t k, int64_t s, int64_t p) {
  if (k <= 0 || s < 0 || p < 0)
    return bad("%s: expected a positive kernel_size and non-negative stride/padding, "
               "found %lld", t->name, k <= 0 ? k : s < 0 ? s : p);
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(t, &l);
  if (!m) return NULL;
  s = s ? s : k;
  int64_t cfg[6] = {k, k, s, s, p, p};
  memcpy(l->i, cfg, sizeof cfg);
  return m;
}

kn_module *kn_nn_maxpool2d(int64_t k, int64_t s, int64_t p) { return pool(&maxp_type, k, s, p); }
kn_module *kn_nn_avgpool2d(int64_t k, int64_t s, int64_t p) { return pool(&avgp_type, k, s, p); }

/* ---- Sequential ----------------------------------------------------------------------- */
static kn_tensor *seq_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)l;
  kn_scope_begin();
  for (int i = 0; i < kn__module_nitems(m) && x; i++) {
    int kind;
    kn_tensor *t;
    kn_module *child;
    const char *name = kn__module_item(m, i, &kind, &t, &child);
    kn__nn_ctx cc;
    if (kind != 2) continue;
    if (kn__nn_child_ctx(c, name, &cc) != KN_OK) x = NULL;
    else x = kn__nn_forward_at(child, &cc, x);
  }
  return kn_scope_end_keep(x);
}

static const kn__nn_type seq_type = {"Sequential", seq_fwd, NULL};

kn_status kn_nn_sequential_append(kn_module *seq, kn_module *layer) {
  kn__nn_layer *l = kn__nn_layer_of(seq);
  if (!l || l->type != &seq_type || !layer) {
    kn_module_free(layer);
    return kn__error(KN_EINVAL, "kn_nn_sequential_append: expected a Sequential and a layer");
  }
  char name[24];
  snprintf(name, sizeof name, "%d", kn__module_nitems(seq));
  kn_status st = kn_module_add_child(seq, name, layer);
  if (st != KN_OK) kn_module_free(layer);
  return st;
}

kn_module *kn_nn_sequential(int n, kn_module *const *layers) {
  kn_module *m = n >= 0 && (layers || n == 0) ? kn__nn_new(&seq_type, NULL) : NULL;
  kn_status st = m ? KN_OK
                   : kn__error(KN_EINVAL, "kn_nn_sequential: expected n >= 0 layers, found %d",
                               n);
  for (int i = 0; i < n && layers; i++) {
    if (st == KN_OK && !layers[i])
      st = kn__error(KN_EINVAL, "kn_nn_sequential: layer %d is NULL", i);
    if (st == KN_OK) st = kn_nn_sequential_append(m, layers[i]);
    else kn_module_free(layers[i]);
  }
  return finish(m, st);
}
