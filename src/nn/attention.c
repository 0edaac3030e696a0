/*
** nn/attention.c: MultiheadAttention (self- and cross-attention, with
** PyTorch's attention masks) and the (post-norm) TransformerEncoderLayer,
** written with kiln ops.
**   MultiheadAttention: i[0] embed_dim, i[1] num_heads, i[2] batch_first;
**                       d[0] dropout on the attention weights
**   TransformerEncoderLayer: i[0] d_model, i[1] batch_first
**
** The computation is torch's multi_head_attention_forward: scores =
** q / sqrt(head_dim) @ k^T per head, the masks added (a float mask) or
** filled in with -inf (a bool mask, true = not allowed), softmax over the
** keys, dropout in training mode, weights @ v, out_proj. Unless the caller
** asks for the attention weights, the middle part is one fused
** scaled_dot_product_attention call (ops/nn_attention.c; the masks merged
** into one, the causal mask by position), as torch 2 does; with weights
** wanted it is computed op by op. Sizes are read as symbolic ints, so batch
** and sequence lengths stay dynamic when compiled.
*/
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "nn/nn_int.h"
#include "ops/cuda_ops.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/symsize.h"
#include "tensor/tensor.h"

static kn_sym ssize(const kn_tensor *t, int d) {
  kn_sym s[KN_MAX_DIMS];
  kn__tensor_symsizes(t, s);
  return s[d];
}

/* [B, L, E] -> [B, heads, L, E / heads]. B and L are never read as ints
** (kn_unflatten), so they stay symbolic inside a compiled function and one
** graph serves every (B, L). */
static kn_tensor *split_heads(kn_tensor *t, int64_t heads) {
  return t ? kn_transpose(kn_unflatten(t, 2, 2, (int64_t[]){heads, -1}), 1, 2) : NULL;
}

/* ---- masks -------------------------------------------------------------------- */

/* Sizes as "[2, 5]" (hints) for messages. */
static const char *shape_str(const kn_tensor *t, char *buf, size_t n) {
  int k = snprintf(buf, n, "[");
  for (int d = 0; d < t->ndim && k > 0 && (size_t)k < n; d++)
    k += snprintf(buf + k, n - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->sizes[d]);
  if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
  return buf;
}

/* A mask's dtype: bool, uint8 (taken as bool, as torch does) or the query's. */
static kn_status check_mask_dtype(const char *name, const kn_tensor *m, kn_dtype qdt) {
  if (m->dtype == KN_BOOL || m->dtype == KN_UINT8 || m->dtype == qdt) return KN_OK;
  if (!kn_dtype_is_floating(m->dtype))
    return kn__error(KN_EDTYPE, "MultiheadAttention: Only float, byte, and bool types are "
                                "supported for %s, not %s", name, kn__torch_dtype_name(m->dtype));
  return kn__error(KN_EDTYPE, "MultiheadAttention: expected %s of dtype Bool or %s (the "
                              "query's), found %s", name, kn__torch_dtype_name(qdt),
                   kn__torch_dtype_name(m->dtype));
}

/* Does t have the symbolic sizes want[0..n)? (guards where needed) */
static bool sizes_are(const kn_tensor *t, int n, const kn_sym *want) {
  if (t->ndim != n) return false;
  for (int d = 0; d < n; d++)
    if (!kn__sym_guard_eq(ssize(t, d), want[d])) return false;
  return true;
}

/* attn_mask [L, S] or [B * heads, L, S]; key_padding_mask [B, S]. */
static kn_status check_masks(const kn_attention_mask *mk, const kn_tensor *q, const kn_tensor *k,
                             int64_t heads) {
  kn_sym b = ssize(q, 0), l = ssize(q, 1), s = ssize(k, 1), bh = kn__sym_mul(b, kn__sym_const(heads));
  kn_sym want2[2] = {l, s}, want3[3] = {bh, l, s}, wantp[2] = {b, s};
  char got[96];
  const kn_tensor *am = mk->attn_mask, *kp = mk->key_padding_mask;
  kn_status st = am ? check_mask_dtype("attn_mask", am, q->dtype) : KN_OK;
  if (st == KN_OK && kp) st = check_mask_dtype("key_padding_mask", kp, q->dtype);
  if (st != KN_OK) return st;
  if (am && am->ndim != 2 && am->ndim != 3)
    return kn__error(KN_ESHAPE, "MultiheadAttention: attn_mask's dimension %d is not supported "
                                "(expected [L, S] or [N * num_heads, L, S])", am->ndim);
  if (am && am->ndim == 2 && !sizes_are(am, 2, want2))
    return kn__error(KN_ESHAPE, "MultiheadAttention: The shape of the 2D attn_mask is %s, but "
                                "should be [%lld, %lld] ([L, S])", shape_str(am, got, sizeof got),
                     (long long)kn__sym_hint(l), (long long)kn__sym_hint(s));
  if (am && am->ndim == 3 && !sizes_are(am, 3, want3))
    return kn__error(KN_ESHAPE, "MultiheadAttention: The shape of the 3D attn_mask is %s, but "
                                "should be [%lld, %lld, %lld] ([N * num_heads, L, S])",
                     shape_str(am, got, sizeof got), (long long)kn__sym_hint(bh),
                     (long long)kn__sym_hint(l), (long long)kn__sym_hint(s));
  if (kp && !sizes_are(kp, 2, wantp))
    return kn__error(KN_ESHAPE, "MultiheadAttention: expecting key_padding_mask shape of [%lld, "
                                "%lld] ([N, S]), but got %s", (long long)kn__sym_hint(b),
                     (long long)kn__sym_hint(s), shape_str(kp, got, sizeof got));
  return KN_OK;
}

/* On the GPU masks are applied with ops that run there (masked_fill has no
** GPU kernel; ops/nn.h, kn__mask_scores) and the causal mask is built on
** the device; the CPU keeps masked_fill and its position mask. */
static bool on_gpu(const kn_tensor *t) { return kn__value_device(t) == KN_CUDA; }

/* scores with mask m applied: -inf where a bool mask is true, or m added. */
static kn_tensor *apply_mask(kn_tensor *scores, kn_tensor *m) {
  if (!scores || !m) return NULL;
  if (m->dtype == KN_UINT8) m = kn_to(m, KN_BOOL);
  if (m && m->dtype == KN_BOOL && on_gpu(scores))
    return kn__mask_scores(scores, kn_logical_not(m));
  if (m && m->dtype == KN_BOOL) return kn_masked_fill(scores, m, kn_float(-INFINITY));
  return kn_add(scores, m);
}

/* The causal mask [L, S] (bool, true where key j > query i), from sizes. */
static kn_tensor *causal_mask(kn_sym l, kn_sym s) {
  kn_tensor *ones = kn__full_sym(2, (kn_sym[]){l, s}, kn_int(1), KN_INT64);
  return kn_gt(kn_cumsum(ones, 1), kn_cumsum(ones, 0)); /* j + 1 > i + 1 */
}

/* scores [B, heads, L, S] with every mask of mk applied. */
static kn_tensor *masked_scores(kn_tensor *scores, const kn_attention_mask *mk, int64_t heads) {
  if (!mk || !scores) return scores;
  kn_tensor *am = mk->attn_mask, *kp = mk->key_padding_mask;
  kn_sym l = ssize(scores, 2), s = ssize(scores, 3);
  if (am && am->ndim == 3) {
    kn_sym to[4] = {kn__sym_floordiv(ssize(am, 0), kn__sym_const(heads)), kn__sym_const(heads),
                    l, s};
    am = kn__reshape_sym(am, 4, to);
    if (!am) return NULL;
  }
  if (!am && mk->is_causal && !on_gpu(scores)) am = causal_mask(l, s);
  else if (!am && mk->is_causal && !kn__sym_guard_eq_int(kn__numel_sym(scores), 0))
    am = kn_logical_not(kn__causal_keep(scores));
  if (am) scores = apply_mask(scores, am);
  if (kp) scores = apply_mask(scores, kn_unsqueeze(kn_unsqueeze(kp, 1), 1)); /* [B, 1, 1, S] */
  return scores;
}

/* A bool mask (true = not allowed, MultiheadAttention's convention) as
** scores to add (-inf where true), in dtype dt. */
static kn_tensor *additive(kn_tensor *m, kn_dtype dt) {
  if (!m || m->dtype != KN_BOOL) return m;
  if (on_gpu(m)) return kn_log(kn_to(kn_logical_not(m), dt)); /* log(1) = 0, log(0) = -inf */
  return kn_masked_fill(kn_to(m, dt), m, kn_float(-INFINITY));
}

/* MultiheadAttention's masks as one mask of the fused attention op (bool
** with true = attend, or scores to add), broadcastable to [B, heads, L, S],
** or NULL when there is none; *causal when the causal mask applies (the
** kernel masks by position: no [L, S] mask is built). *bad on error. */
static kn_tensor *sdpa_mask(const kn_attention_mask *mk, int64_t heads, kn_sym l, kn_sym s,
                            kn_dtype dt, bool *causal, bool *bad) {
  *causal = false, *bad = false;
  if (!mk) return NULL;
  kn_tensor *am = mk->attn_mask, *kp = mk->key_padding_mask;
  if (am && am->dtype == KN_UINT8) am = kn_to(am, KN_BOOL);
  if (kp && kp->dtype == KN_UINT8) kp = kn_to(kp, KN_BOOL);
  if (am && am->ndim == 3) {
    kn_sym to[4] = {kn__sym_floordiv(ssize(am, 0), kn__sym_const(heads)), kn__sym_const(heads),
                    l, s};
    am = kn__reshape_sym(am, 4, to);
  }
  if (kp) kp = kn_unsqueeze(kn_unsqueeze(kp, 1), 1); /* [B, 1, 1, S] */
  *causal = !mk->attn_mask && mk->is_causal;
  if ((mk->attn_mask && !am) || (mk->key_padding_mask && !kp)) return *bad = true, NULL;
  kn_tensor *m;
  if (am && kp && am->dtype == KN_BOOL && kp->dtype == KN_BOOL) m = kn_logical_or(am, kp);
  else if (am && kp) m = kn_add(additive(am, dt), additive(kp, dt));
  else m = am ? am : kp;
  if (m && m->dtype == KN_BOOL) m = kn_logical_not(m);
  if (!m && (am || kp)) *bad = true;
  return m;
}

/* softmax(q k^T / sqrt(E) + masks) (dropped out in training) @ v by the fused
** scaled_dot_product_attention op: [B, heads, L, E] each -> [B, heads, L, E]. */
static kn_tensor *fused_attention(const kn__nn_layer *l, kn_tensor *qh, kn_tensor *kh,
                                  kn_tensor *vh, const kn_attention_mask *mk, int64_t heads) {
  bool causal, bad;
  kn_tensor *m = sdpa_mask(mk, heads, ssize(qh, 2), ssize(kh, 2), qh->dtype, &causal, &bad);
  if (bad) return NULL;
  double p = l->training && l->d[0] > 0 ? l->d[0] : 0.0;
  return kn__sdpa_fused(qh, kh, vh, m, p, causal, NULL);
}

/* ---- MultiheadAttention ---------------------------------------------------------- */

/* q, k, v projected with in_proj (one matmul when they are one tensor, as
** torch's _in_projection_packed). */
static bool project(const kn__nn_ctx *c, int64_t e, kn_tensor *q, kn_tensor *k, kn_tensor *v,
                    kn_tensor **out) {
  kn_tensor *w = kn__nn_get(c, "in_proj_weight"), *b = kn__nn_get(c, "in_proj_bias");
  if (!w || !b) return false;
  if (q == k && k == v) {
    kn_tensor *p = kn_linear(q, w, b);
    return p && kn_chunk(p, 3, -1, out, 3) == 3;
  }
  out[0] = kn_linear(q, kn_narrow(w, 0, 0, e), kn_narrow(b, 0, 0, e));
  if (k == v) {
    kn_tensor *p = kn_linear(k, kn_narrow(w, 0, e, 2 * e), kn_narrow(b, 0, e, 2 * e));
    return out[0] && p && kn_chunk(p, 2, -1, out + 1, 2) == 2;
  }
  out[1] = kn_linear(k, kn_narrow(w, 0, e, e), kn_narrow(b, 0, e, e));
  out[2] = kn_linear(v, kn_narrow(w, 0, 2 * e, e), kn_narrow(b, 0, 2 * e, e));
  return out[0] && out[1] && out[2];
}

static kn_status check_inputs(const kn__nn_layer *l, const kn_tensor *q, const kn_tensor *k,
                              const kn_tensor *v) {
  const kn_tensor *in[3] = {q, k, v};
  const char *names[3] = {"query", "key", "value"};
  int64_t e = l->i[0];
  for (int j = 0; j < 3; j++)
    if (in[j]->ndim != 3 || in[j]->sizes[2] != e)
      return kn__error(KN_ESHAPE, "MultiheadAttention: expected %s of shape [%s, %lld], found "
                                  "%dD input with last size %lld", names[j],
                       l->i[2] ? "N, L" : "L, N", (long long)e, in[j]->ndim,
                       (long long)(in[j]->ndim ? in[j]->sizes[in[j]->ndim - 1] : 0));
  int bd = l->i[2] ? 0 : 1;
  if (!kn__sym_guard_eq(ssize(q, bd), ssize(k, bd)) || !kn__sym_guard_eq(ssize(k, bd), ssize(v, bd)))
    return kn__error(KN_ESHAPE, "MultiheadAttention: query, key and value must have the same "
                                "batch size, found %lld, %lld and %lld", (long long)q->sizes[bd],
                     (long long)k->sizes[bd], (long long)v->sizes[bd]);
  if (!kn__sym_guard_eq(ssize(k, 1 - bd), ssize(v, 1 - bd)))
    return kn__error(KN_ESHAPE, "MultiheadAttention: key and value must have the same sequence "
                                "length, found %lld and %lld", (long long)k->sizes[1 - bd],
                     (long long)v->sizes[1 - bd]);
  return KN_OK;
}

/* The attention of m at ctx c. Batch-first inside; *weights (may be NULL)
** gets the attention weights averaged over heads [B, L, S] (an owned
** reference). The result is a new reference in the caller's scope, or NULL. */
static kn_tensor *mha_run(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *q,
                          kn_tensor *k, kn_tensor *v, const kn_attention_mask *mk,
                          kn_tensor **weights) {
  int64_t e = l->i[0], heads = l->i[1];
  if (check_inputs(l, q, k, v) != KN_OK) return NULL;
  kn_scope_begin();
  bool self = q == k && k == v, kv = k == v;
  if (!l->i[2]) {
    q = kn_transpose(q, 0, 1);
    k = self ? q : kn_transpose(k, 0, 1);
    v = self || kv ? k : kn_transpose(v, 0, 1);
  }
  kn_tensor *qkv[3] = {NULL, NULL, NULL};
  if ((mk && check_masks(mk, q, k, heads) != KN_OK) || !project(c, e, q, k, v, qkv))
    return kn_scope_end_keep(NULL);
  kn_tensor *attn = NULL, *o;
  if (weights) { /* the weights are wanted: the unfused form computes them */
    kn_tensor *qh = kn_div_scalar(split_heads(qkv[0], heads), kn_float(sqrt((double)(e / heads))));
    kn_tensor *scores = kn_matmul(qh, kn_transpose(split_heads(qkv[1], heads), -2, -1));
    attn = kn_softmax(masked_scores(scores, mk, heads), -1);
    if (attn && l->training && l->d[0] > 0) attn = kn_dropout(attn, l->d[0], true, NULL);
    o = kn_matmul(attn, split_heads(qkv[2], heads));
  } else {
    kn_tensor *qh = split_heads(qkv[0], heads), *kh = split_heads(qkv[1], heads);
    kn_tensor *vh = split_heads(qkv[2], heads);
    o = qh && kh && vh ? fused_attention(l, qh, kh, vh, mk, heads) : NULL;
  }
  o = kn_transpose(o, 1, 2);
  o = o ? kn_flatten(o, 2, 3) : NULL;
  kn_tensor *y = o ? kn__nn_child_forward(m, c, "out_proj", o) : NULL;
  if (y && !l->i[2]) y = kn_transpose(y, 0, 1);
  if (y && weights)
    *weights = kn_retain(kn_div_scalar(kn_sum_dims(attn, (int64_t[]){1}, 1, false),
                                       kn_int(heads)));
  if (y && weights && !*weights) y = NULL;
  return kn_scope_end_keep(y);
}

static kn_tensor *mha_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  return mha_run(m, l, c, x, x, x, NULL, NULL);
}

static const kn__nn_type mha_type = {"MultiheadAttention", mha_fwd, NULL};

kn_tensor *kn_nn_multihead_attention_forward(kn_module *mha, kn_tensor *query, kn_tensor *key,
                                             kn_tensor *value, const kn_attention_mask *mask,
                                             kn_tensor **attn_weights) {
  kn__nn_layer *l = kn__nn_layer_of(mha);
  if (attn_weights) *attn_weights = NULL;
  if (!l || l->type != &mha_type || !query) {
    kn__error(KN_EINVAL, "kn_nn_multihead_attention_forward: expected a MultiheadAttention "
                         "layer and a query, found %s and %s", l ? l->type->name : "no layer",
              query ? "a tensor" : "NULL");
    return NULL;
  }
  if (!key) key = query;
  if (!value) value = key;
  kn__nn_ctx ctx = {mha, ""};
  kn_tensor *w = NULL;
  kn_tensor *y = mha_run(mha, l, &ctx, query, key, value, mask, attn_weights ? &w : NULL);
  if (attn_weights && y) *attn_weights = kn__autorelease(w); /* owned here: into the scope */
  return y;
}

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

kn_tensor *kn_nn_square_subsequent_mask(int64_t size) {
  if (size < 0) {
    kn__error(KN_EINVAL, "kn_nn_square_subsequent_mask: expected a size >= 0, found %lld",
              (long long)size);
    return NULL;
  }
  kn_scope_begin();
  kn_tensor *z = kn_zeros(KN_SHAPE(size, size), KN_FLOAT32);
  kn_tensor *r = kn_masked_fill(z, causal_mask(kn__sym_const(size), kn__sym_const(size)),
                                kn_float(-INFINITY));
  return kn_scope_end_keep(r);
}

/* ---- TransformerEncoderLayer ------------------------------------------------------- */
static kn_tensor *enc_run(kn_module *m, const kn__nn_ctx *c, kn_tensor *x,
                          const kn_attention_mask *mk) {
  kn__nn_ctx sc;
  kn_module *sa_mod = kn__nn_child(m, "self_attn");
  if (!sa_mod || kn__nn_child_ctx(c, "self_attn", &sc) != KN_OK) {
    if (!sa_mod) kn__error(KN_EINTERNAL, "layer has no child 'self_attn'");
    return NULL;
  }
  kn_scope_begin();
  kn_tensor *sa = mha_run(sa_mod, kn__nn_layer_of(sa_mod), &sc, x, x, x, mk, NULL);
  sa = sa ? kn__nn_child_forward(m, c, "dropout1", sa) : NULL;
  x = sa ? kn__nn_child_forward(m, c, "norm1", kn_add(x, sa)) : NULL;
  kn_tensor *ff = x ? kn_relu(kn__nn_child_forward(m, c, "linear1", x)) : NULL;
  ff = ff ? kn__nn_child_forward(m, c, "dropout", ff) : NULL;
  ff = ff ? kn__nn_child_forward(m, c, "linear2", ff) : NULL;
  ff = ff ? kn__nn_child_forward(m, c, "dropout2", ff) : NULL;
  x = ff ? kn__nn_child_forward(m, c, "norm2", kn_add(x, ff)) : NULL;
  return kn_scope_end_keep(x);
}

static kn_tensor *enc_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)l;
  return enc_run(m, c, x, NULL);
}

static const kn__nn_type enc_type = {"TransformerEncoderLayer", enc_fwd, NULL};

kn_tensor *kn_nn_transformer_encoder_layer_forward(kn_module *layer, kn_tensor *src,
                                                   const kn_attention_mask *mask) {
  kn__nn_layer *l = kn__nn_layer_of(layer);
  if (!l || l->type != &enc_type || !src) {
    kn__error(KN_EINVAL, "kn_nn_transformer_encoder_layer_forward: expected a "
                         "TransformerEncoderLayer and an input, found %s and %s",
              l ? l->type->name : "no layer", src ? "a tensor" : "NULL");
    return NULL;
  }
  kn__nn_ctx ctx = {layer, ""};
  return enc_run(layer, &ctx, src, mask);
}

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
