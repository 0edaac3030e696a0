/*
** kiln/nn.h: layers (torch.nn in C). Every layer is a kn_module (the
** parameter tree of kiln/compile.h) carrying PyTorch's parameter and buffer
** names (weight, bias, running_mean, ...), initialised with the same
** distributions as PyTorch's reset_parameters, plus its configuration, a
** forward function and a training flag. Layers nest: a Sequential owns its
** children, named "0", "1", ...
**
**   kn_generator *g = kn_generator_new(0);
**   kn_module *net = kn_nn_sequential(3, (kn_module *[]){
**       kn_nn_linear(64, 32, true, g), kn_nn_relu(), kn_nn_linear(32, 10, true, g)});
**   kn_tensor *y = kn_nn_forward(net, x);     // new reference, like an op
**   kn_nn_print(net, stdout);                 // Sequential( (0): Linear(...) ...)
**   kn_module_free(net);                      // frees the children too
**
** Forward functions read parameters with kn_module_get, so a layer called
** inside a compiled function uses the traced stand-ins and its parameters
** and buffers are guarded graph inputs, whether the module is passed as a
** kn_vmodule argument or reached through a pointer (the user-data pointer,
** a global, kn_module_child of either: see docs/DYNAMO.md, "Modules and
** tensors reached through pointers").
**
** Ownership: constructors return an owned module (kn_module_free), or NULL
** with kn_last_error() on bad arguments. A constructor that receives child
** modules takes ownership of them, also on failure (they are freed). Tensors
** follow kiln/tensor.h (new references, recorded in the open scope).
** Parameters are float32 leaves that require grad; random initialisation
** draws from gen (NULL: the default generator).
*/
#ifndef KILN_NN_H
#define KILN_NN_H

#include <stdio.h>

#include "kiln/compile.h"
#include "kiln/random.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layers ---------------------------------------------------------------- */
/* Linear: weight [out, in], bias [out]; both U(-1/sqrt(in), 1/sqrt(in)). */
KN_API kn_module *kn_nn_linear(int64_t in_features, int64_t out_features, bool bias,
                               kn_generator *gen);

/* Conv2d options; zero-initialised fields mean PyTorch's defaults
** (stride 1, padding 0, dilation 1, groups 1, bias on unless no_bias). */
typedef struct kn_conv2d_options {
  int64_t stride[2];
  int64_t padding[2];
  bool padding_same; /* padding="same" (stride must be 1) */
  int64_t dilation[2];
  int64_t groups;
  bool no_bias;
} kn_conv2d_options;
/* Conv2d: weight [out, in/groups, kh, kw], bias [out]; both
** U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * kh * kw. opts may
** be NULL. */
KN_API kn_module *kn_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kh,
                               int64_t kw, const kn_conv2d_options *opts, kn_generator *gen);

/* BatchNorm1d ([N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]):
** weight ones, bias zeros (affine), buffers running_mean zeros, running_var
** ones, num_batches_tracked (int64 0) when track_running_stats. Training
** uses batch statistics and updates the running ones with momentum
** (momentum < 0: cumulative average, PyTorch's momentum=None); eval uses
** the running statistics. PyTorch's defaults: eps 1e-5, momentum 0.1. */
KN_API kn_module *kn_nn_batchnorm1d(int64_t num_features, double eps, double momentum,
                                    bool affine, bool track_running_stats);
KN_API kn_module *kn_nn_batchnorm2d(int64_t num_features, double eps, double momentum,
                                    bool affine, bool track_running_stats);
/* LayerNorm over the trailing ndim dims: weight ones, bias zeros. */
KN_API kn_module *kn_nn_layernorm(int ndim, const int64_t *normalized_shape, double eps,
                                  bool elementwise_affine);
/* Embedding: weight [num, dim] ~ N(0, 1), row padding_idx zero
** (KN_NO_PADDING_IDX for none; negative counts from the end). */
KN_API kn_module *kn_nn_embedding(int64_t num_embeddings, int64_t embedding_dim,
                                  int64_t padding_idx, kn_generator *gen);
/* Dropout(p): zeroes elements with probability p in training mode, drawing
** from gen (borrowed; must outlive the layer; NULL = default generator). */
KN_API kn_module *kn_nn_dropout(double p, kn_generator *gen);
KN_API kn_module *kn_nn_relu(void);
KN_API kn_module *kn_nn_gelu(bool tanh_approximation);
KN_API kn_module *kn_nn_silu(void);
KN_API kn_module *kn_nn_tanh(void);
KN_API kn_module *kn_nn_sigmoid(void);
/* Flatten(start_dim, end_dim); PyTorch's defaults are 1, -1. */
KN_API kn_module *kn_nn_flatten(int64_t start_dim, int64_t end_dim);
/* MaxPool2d / AvgPool2d with square windows; stride 0 means kernel_size. */
KN_API kn_module *kn_nn_maxpool2d(int64_t kernel_size, int64_t stride, int64_t padding);
KN_API kn_module *kn_nn_avgpool2d(int64_t kernel_size, int64_t stride, int64_t padding);
/* Sequential of n layers (owned from now on; NULL entries are an error,
** and then every non-NULL entry is freed). */
KN_API kn_module *kn_nn_sequential(int n, kn_module *const *layers);
/* Append a layer to a Sequential (owned by it, also on failure). */
KN_API kn_status kn_nn_sequential_append(kn_module *seq, kn_module *layer);

/* LSTM: per layer k weight_ih_l<k> [4H, in], weight_hh_l<k> [4H, H],
** bias_ih_l<k>, bias_hh_l<k> [4H], all U(-1/sqrt(H), 1/sqrt(H)); gates in
** PyTorch's order (input, forget, cell, output). Input [B, T, in]
** (batch_first) or [T, B, in]; kn_nn_forward returns the last layer's
** hidden states for every step, shaped like the input. */
KN_API kn_module *kn_nn_lstm(int64_t input_size, int64_t hidden_size, int num_layers, bool bias,
                             bool batch_first, kn_generator *gen);
/* The full LSTM call: h0 and c0 [num_layers, B, H] may be NULL (zeros);
** *h_n and *c_n (may be NULL) receive the final states (new references). */
KN_API kn_tensor *kn_nn_lstm_forward(kn_module *lstm, kn_tensor *input, kn_tensor *h0,
                                     kn_tensor *c0, kn_tensor **h_n, kn_tensor **c_n);
/* MultiheadAttention(embed_dim, num_heads): in_proj_weight [3E, E]
** (xavier_uniform), in_proj_bias [3E] zeros, child out_proj (weight like
** Linear's, bias zeros). Inputs [N, L, E] (batch_first) or [L, N, E];
** dropout applies to the attention weights in training mode.
** kn_nn_forward(mha, x) is self-attention without masks. */
KN_API kn_module *kn_nn_multihead_attention(int64_t embed_dim, int64_t num_heads, double dropout,
                                            bool batch_first, kn_generator *gen);
/* TransformerEncoderLayer (post-norm, ReLU, PyTorch's defaults: dropout
** 0.1, layer_norm_eps 1e-5): x = norm1(x + dropout1(self_attn(x)));
** x = norm2(x + dropout2(linear2(dropout(relu(linear1(x)))))). Dropout
** layers draw from the default generator. kn_nn_forward runs it without
** masks. */
KN_API kn_module *kn_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead,
                                                  int64_t dim_feedforward, double dropout,
                                                  bool batch_first, kn_generator *gen);

/* Attention masks, PyTorch's forward arguments; a NULL pointer or a
** zeroed struct means none. L is the query length, S the key length, N the
** batch size. A bool (or uint8) mask marks with true the positions that may
** not be attended to (their scores become -inf); a floating mask (of the
** query's dtype) is added to the scores, and gets gradients when it
** requires grad. A query row whose every key is masked has softmax over
** -inf only: its output is NaN, as in PyTorch (torch 1.13's
** multi_head_attention_forward; only its eval-mode fast path differs). */
typedef struct kn_attention_mask {
  kn_tensor *attn_mask;        /* [L, S], or [N * num_heads, L, S] per batch and head */
  kn_tensor *key_padding_mask; /* [N, S]: true marks padding keys */
  /* Causal attention: query i attends to keys j <= i. With attn_mask set
  ** this is PyTorch 2's hint that attn_mask is the causal mask (attn_mask
  ** is applied as given); without one, kiln applies the causal mask itself
  ** (PyTorch's modules then fail; its scaled_dot_product_attention builds
  ** the mask the same way). */
  bool is_causal;
} kn_attention_mask;

/* MultiheadAttention.forward(query, key, value, key_padding_mask,
** need_weights, attn_mask, is_causal): key and value of shape [N, S, E]
** (batch_first) or [S, N, E]; key NULL means query (self-attention), value
** NULL means key. Returns the attention output shaped like query; when
** attn_weights is not NULL it receives the attention weights averaged over
** heads, [N, L, S] (need_weights=True, average_attn_weights=True; after
** dropout in training mode). mask may be NULL. Both results are new
** references. Shape and dtype mistakes are KN_ESHAPE / KN_EDTYPE naming
** the mask, the shape found and the one expected. */
KN_API kn_tensor *kn_nn_multihead_attention_forward(kn_module *mha, kn_tensor *query,
                                                    kn_tensor *key, kn_tensor *value,
                                                    const kn_attention_mask *mask,
                                                    kn_tensor **attn_weights);
/* TransformerEncoderLayer.forward(src, src_mask, src_key_padding_mask,
** is_causal): the masks go to self_attn (mask may be NULL). */
KN_API kn_tensor *kn_nn_transformer_encoder_layer_forward(kn_module *layer, kn_tensor *src,
                                                          const kn_attention_mask *mask);
/* nn.Transformer.generate_square_subsequent_mask(size): a float32
** [size, size] mask, -inf above the diagonal and 0 elsewhere. */
KN_API kn_tensor *kn_nn_square_subsequent_mask(int64_t size);

/* ---- using a layer ------------------------------------------------------------ */
/* Run the layer (and its children). New reference, or NULL with
** kn_last_error() (KN_EINVAL if m is not a layer). */
KN_API kn_tensor *kn_nn_forward(kn_module *m, kn_tensor *input);
/* Training mode on or off for m and every layer below it (model.train() /
** model.eval()). */
KN_API void kn_nn_train(kn_module *m, bool training);
KN_API bool kn_nn_is_training(const kn_module *m);
/* The layer's type name ("Linear"), or NULL for a plain kn_module. Static. */
KN_API const char *kn_nn_type(const kn_module *m);

/* Visit every parameter (params = true) or buffer (false) below m, in
** PyTorch's named_parameters / named_buffers order, with its dotted name
** ("0.weight"). t is borrowed. Stops at the first non-OK status and
** returns it. */
typedef kn_status (*kn_nn_tensor_fn)(void *ud, const char *name, kn_tensor *t);
KN_API kn_status kn_nn_named_tensors(kn_module *m, bool params, kn_nn_tensor_fn fn, void *ud);
/* The parameters (model.parameters()): *out receives a malloc'd array
** (caller frees it with free) of borrowed tensors. Returns the count, or a
** negative status. */
KN_API int kn_nn_parameters(kn_module *m, kn_tensor ***out);
/* Total number of parameter elements (sum of numel). */
KN_API int64_t kn_nn_num_parameters(kn_module *m);
/* Drop every parameter's .grad (zero_grad(set_to_none=True)). */
KN_API void kn_nn_zero_grad(kn_module *m);
/* print(model): PyTorch's module repr. kn_nn_repr returns a malloc'd string
** (caller frees) or NULL on OOM. */
KN_API char *kn_nn_repr(const kn_module *m);
KN_API kn_status kn_nn_print(const kn_module *m, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
