/*
** nn/attention.c: MultiheadAttention used as self-attention and the
** (post-norm) TransformerEncoderLayer, written with kiln ops.
**   MultiheadAttention: i[0] embed_dim, i[1] num_heads, i[2] batch_first;
**                       d[0] dropout on the attention weights
**   TransformerEncoderLayer: i[0] d_model, i[1] batch_first
*/
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "nn/nn_int.h"

/* [B, L, E] -> [B, heads, L, E / heads]. B and L are never read as ints
** (kn_unflatten, kn_flatten), so they stay symbolic inside a compiled
** function and one graph serves every (B, L). */
static kn_tensor *split_heads(kn_tensor *t, int64_t heads) {
  return kn_transpose(kn_unflatten(t, 2, 2, (int64_t[]){heads, -1}), 1, 2);
}

static kn_tensor *mha_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  int64_t e = l->i[0], heads = l->i[1];
  if (kn_ndim(x) != 3 || kn_size(x, 2) != e) {
    kn__error(KN_ESHAPE, "MultiheadAttention: expected input [%s, %lld], found %dD input",
              l->i[2] ? "B, L" : "L, B", (long long)e, kn_ndim(x));
    return NULL;
  }
  kn_scope_begin();
  if (!l->i[2]) x = kn_transpose(x, 0, 1);
  kn_tensor *qkv[3];
  kn_tensor *proj = kn_linear(x, kn__nn_get(c, "in_proj_weight"), kn__nn_get(c, "in_proj_bias"));
  if (!proj || kn_chunk(proj, 3, 2, qkv, 3) != 3) return kn_scope_end_keep(NULL);
  kn_tensor *q = kn_div_scalar(split_heads(qkv[0], heads), kn_float(sqrt((double)(e / heads))));
  kn_tensor *scores = kn_matmul(q, kn_transpose(split_heads(qkv[1], heads), -2, -1));
  kn_tensor *attn = kn_softmax(scores, -1);
  if (l->training && l->d[0] > 0) attn = kn_dropout(attn, l->d[0], true, NULL);
  kn_tensor *o = kn_transpose(kn_matmul(attn, split_heads(qkv[2], heads)), 1, 2);
  o = kn_flatten(o, 2, 3);
  kn_tensor *y = o ? kn__nn_child_forward(m, c, "out_proj", o) : NULL;
  if (y && !l->i[2]) y = kn_transpose(y, 0, 1);
  return kn_scope_end_keep(y);
}

static const kn__nn_type mha_type = {"MultiheadAttention", mha_fwd, NULL};

static kn_module *bad(const char *what, int64_t a, int64_t b) {
  kn__error(KN_EINVAL, "%s: embed_dim (%lld) must be positive and divisible by num_heads (%lld)",
            what, (long long)a, (long long)b);
  return NULL;
}

kn_module *kn_nn_multihead_attention(int64_t e, int64_t heads, double dropout, bool batch_first,
                                     kn_generator *gen) {
  if (e <= 0 || heads <= 0 || e % heads) return bad("MultiheadAttention", e, heads);
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&mha_type, &l);
  if (!m) return NULL;
  l->i[0] = e, l->i[1] = heads, l->i[2] = batch_first, l->d[0] = dropout;
  double xavier = sqrt(6.0 / (double)(e + 3 * e)); /* fan_in e, fan_out 3e */
  kn_status st = kn__nn_add(m, "in_proj_weight", kn__nn_uniform(KN_SHAPE(3 * e, e), xavier, gen),
                            true);
  if (st == KN_OK)
    st = kn__nn_add(m, "in_proj_bias", kn__nn_const(KN_SHAPE(3 * e), 0, KN_FLOAT32, true), true);
  kn_module *out = st == KN_OK ? kn__nn_linear_typed(true, e, e, true, gen) : NULL;
  if (st == KN_OK) st = out ? kn_module_add_child(m, "out_proj", out) : kn_last_status();
  if (st != KN_OK) kn_module_free(out);
  if (st == KN_OK) { /* PyTorch zeroes out_proj.bias */
    bool prev = kn_no_grad_begin();
    st = kn_zero_(kn_module_get(m, "out_proj.bias"));
    kn_no_grad_end(prev);
  }
  if (st != KN_OK) kn_module_free(m);
  return st == KN_OK ? m : NULL;
}

/* ---- TransformerEncoderLayer ------------------------------------------------------- */
static kn_tensor *enc_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)l;
  kn_scope_begin();
  kn_tensor *sa = kn__nn_child_forward(m, c, "self_attn", x);
  sa = sa ? kn__nn_child_forward(m, c, "dropout1", sa) : NULL;
  x = sa ? kn__nn_child_forward(m, c, "norm1", kn_add(x, sa)) : NULL;
  kn_tensor *ff = x ? kn_relu(kn__nn_child_forward(m, c, "linear1", x)) : NULL;
  ff = ff ? kn__nn_child_forward(m, c, "dropout", ff) : NULL;
  ff = ff ? kn__nn_child_forward(m, c, "linear2", ff) : NULL;
  ff = ff ? kn__nn_child_forward(m, c, "dropout2", ff) : NULL;
  x = ff ? kn__nn_child_forward(m, c, "norm2", kn_add(x, ff)) : NULL;
  return kn_scope_end_keep(x);
}

static const kn__nn_type enc_type = {"TransformerEncoderLayer", enc_fwd, NULL};

kn_module *kn_nn_transformer_encoder_layer(int64_t d, int64_t nhead, int64_t ff, double dropout,
                                           bool batch_first, kn_generator *gen) {
  if (d <= 0 || nhead <= 0 || d % nhead || ff <= 0) return bad("TransformerEncoderLayer", d, nhead);
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&enc_type, &l);
  if (!m) return NULL;
  l->i[0] = d, l->i[1] = batch_first;
  const char *names[] = {"self_attn", "linear1", "dropout", "linear2",
                         "norm1",     "norm2",   "dropout1", "dropout2"};
  kn_module *kids[8] = {kn_nn_multihead_attention(d, nhead, dropout, batch_first, gen),
                        kn_nn_linear(d, ff, true, gen),
                        kn_nn_dropout(dropout, NULL),
                        kn_nn_linear(ff, d, true, gen),
                        kn_nn_layernorm(1, &d, 1e-5, true),
                        kn_nn_layernorm(1, &d, 1e-5, true),
                        kn_nn_dropout(dropout, NULL),
                        kn_nn_dropout(dropout, NULL)};
  kn_status st = KN_OK;
  for (int k = 0; k < 8; k++) {
    if (st == KN_OK && !kids[k]) st = kn_last_status() != KN_OK ? kn_last_status() : KN_ENOMEM;
    kn_status added = st == KN_OK ? kn_module_add_child(m, names[k], kids[k]) : st;
    if (added != KN_OK) kn_module_free(kids[k]); /* not owned by m */
    st = added;
  }
  if (st != KN_OK) kn_module_free(m);
  return st == KN_OK ? m : NULL;
}
