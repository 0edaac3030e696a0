/*
** nn/nn_int.h: internals of the layers (kiln/nn.h).
**
**   module.c   layer records on kn_module, forward dispatch, train/eval,
**              parameter iteration, zero_grad, the printed summary
**   layers.c   Linear, Conv2d, norms, Embedding, Dropout, activations,
**              Flatten, pooling, Sequential
**   rnn.c      LSTM
**   attention.c MultiheadAttention (self- and cross-attention, attention masks),
**              TransformerEncoderLayer
**   init.c     PyTorch's initialisation distributions
**
** A layer is a kn_module whose ext is a kn__nn_layer (its type, training
** flag and configuration). Forward functions read tensors through a
** kn__nn_ctx: the root module the user called plus the dotted prefix of the
** current layer, so that while tracing kn_module_get finds the stand-ins
** (they are keyed by the root module and the full path).
*/
#ifndef KN_NN_NN_INT_H
#define KN_NN_NN_INT_H

#include "core/strbuf.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"

typedef struct kn__nn_ctx {
  kn_module *root;
  char prefix[512]; /* "" or "0.1." */
} kn__nn_ctx;

struct kn__nn_layer;
typedef struct kn__nn_type {
  const char *name;
  /* New reference or NULL with kn_last_error(). */
  kn_tensor *(*forward)(kn_module *m, struct kn__nn_layer *l, const kn__nn_ctx *ctx,
                        kn_tensor *x);
  void (*extra_repr)(const struct kn__nn_layer *l, kn__sb *sb); /* may be NULL */
} kn__nn_type;

typedef struct kn__nn_layer {
  const kn__nn_type *type;
  bool training;
  int64_t i[12];
  double d[4];
  kn_generator *gen; /* borrowed (Dropout) */
} kn__nn_layer;

/* A new module carrying a zeroed layer record of type t (owned), or NULL. */
kn_module *kn__nn_new(const kn__nn_type *t, kn__nn_layer **out);
/* The layer record of m (borrowed), or NULL for a plain module. */
kn__nn_layer *kn__nn_layer_of(const kn_module *m);
/* The tensor named `name` of the current layer (borrowed; a stand-in while
** tracing), or NULL. */
kn_tensor *kn__nn_get(const kn__nn_ctx *ctx, const char *name);
/* Forward of m at ctx (ctx names m). */
kn_tensor *kn__nn_forward_at(kn_module *m, const kn__nn_ctx *ctx, kn_tensor *x);
/* ctx for the child `name` of the layer at ctx; KN_ERANGE if too long. */
kn_status kn__nn_child_ctx(const kn__nn_ctx *ctx, const char *name, kn__nn_ctx *out);

/* The child called name (borrowed), or NULL. */
kn_module *kn__nn_child(kn_module *m, const char *name);
/* Forward of m's child `name` at ctx (ctx names m). */
kn_tensor *kn__nn_child_forward(kn_module *m, const kn__nn_ctx *ctx, const char *name,
                                kn_tensor *x);
/* A Linear; ndq: named NonDynamicallyQuantizableLinear (MultiheadAttention's
** out_proj). */
kn_module *kn__nn_linear_typed(bool ndq, int64_t in_features, int64_t out_features, bool bias,
                               kn_generator *gen);

/* ---- init.c ---- */
/* Owned references, recorded in no scope: float32 leaves that require grad
** drawn from U(-bound, bound) / N(0, 1); a constant of any dtype. */
kn_tensor *kn__nn_uniform(int ndim, const int64_t *sizes, double bound, kn_generator *gen);
kn_tensor *kn__nn_normal(int ndim, const int64_t *sizes, kn_generator *gen);
kn_tensor *kn__nn_const(int ndim, const int64_t *sizes, double value, kn_dtype dtype,
                        bool requires_grad);
/* Add t to m as a parameter (buffer when !param) and drop the caller's
** reference (also on failure). */
kn_status kn__nn_add(kn_module *m, const char *name, kn_tensor *t, bool param);

#endif
