/*
** autograd/autograd.h: the eager autograd graph (internal).
**
** A kn__node is one grad_fn: a recorded op (its derivative rule and the
** saved forward call), a leaf's AccumulateGrad, or a custom node with a C
** backward callback (how a compiled backward attaches to its outputs).
** Nodes are reference counted: tensors own their grad_fn, nodes own their
** next edges, an AccumulateGrad owns its leaf, and a leaf caches its
** accumulator weakly (t->grad_acc), so the graph has no cycles. Saved
** outputs are aliases without history; the node restores them as outputs of
** itself only while it runs under create_graph.
*/
#ifndef KN_AUTOGRAD_AUTOGRAD_H
#define KN_AUTOGRAD_AUTOGRAD_H

#include "ops/opdef.h"

typedef enum kn__node_kind {
  KN__NODE_OP,
  KN__NODE_ACCUM,
  KN__NODE_CUSTOM,
  KN__NODE_COPYSLICES /* an in-place op on a view, seen from the view's base */
} kn__node_kind;

/* What a CopySlices node knows: the in-place op's node and the geometry of
** the modified view inside its base. */
typedef struct kn__cslice {
  kn__node *fn;              /* owned: the in-place op's node */
  int ndim, base_ndim;
  int64_t sizes[KN_MAX_DIMS], strides[KN_MAX_DIMS], offset; /* offset from base's */
  int64_t base_sizes[KN_MAX_DIMS], base_strides[KN_MAX_DIMS];
} kn__cslice;

/* An edge to the node that takes the gradient of one input: `input_nr` is
** the output of `fn` the input was (its output_nr). fn NULL: no gradient. */
typedef struct kn__edge {
  kn__node *fn;   /* owned reference or NULL */
  int input_nr;
} kn__edge;

/* What was saved about one tensor, for the version check's message. */
typedef struct kn__saved_info {
  uint64_t version;
  const char *grad_fn; /* name of its grad_fn when saved, or NULL (leaf) */
  const kn__node *node; /* its grad_fn when saved (compared, never followed) */
  int output_nr;
  bool check;          /* false for private copies nobody else can modify */
} kn__saved_info;

/* A custom backward: fill grad_inputs[k] (for each k where needs[k]) from
** grad_outputs (NULL entries: no gradient flowed into that output). Results
** must be registered in the current autorelease scope (every public op
** result is); the engine retains what it keeps. Runs with grad mode set to
** create_graph. */
typedef kn_status (*kn__custom_backward)(void *ctx, kn_tensor *const *grad_outputs, int nout,
                                         kn_tensor **grad_inputs, const bool *needs, int nin,
                                         bool create_graph);

struct kn__node {
  atomic_long refcount;
  kn__node_kind kind;
  uint64_t seq;              /* creation order; UINT64_MAX for AccumulateGrad */
  int nin, nout;
  kn__edge *next;            /* nin edges (owned) */
  /* output metadata, for zero-filling and checks */
  kn_dtype *out_dtype;
  /* KN__NODE_OP */
  kn__call call;             /* the forward call; tensors retained */
  kn__saved_info *in_info;   /* per flat input */
  kn_tensor **saved_out;     /* nout aliases without history (owned) */
  kn__saved_info *out_info;
  bool released;             /* saved tensors freed after backward */
  bool on_meta;              /* recorded on meta/fake tensors */
  /* KN__NODE_ACCUM */
  kn_tensor *leaf;           /* owned reference */
  /* KN__NODE_CUSTOM */
  const char *name;
  kn__custom_backward custom;
  void *ctx;
  void (*ctx_free)(void *);
  struct kn__tmeta { int ndim; int64_t sizes[KN_MAX_DIMS]; } *in_meta; /* per input */
  /* KN__NODE_COPYSLICES */
  kn__cslice *cs;            /* owned */
  /* non-leaf tensors with retains_grad whose grad_fn this is (weak) */
  kn_tensor **retained;
  int nretained, capretained;
  struct kn__node *rel_next; /* release queue link (see kn__node_release) */
};

void kn__node_retain(kn__node *n);
void kn__node_release(kn__node *n);
/* The grad_fn name of a node ("AddBackward0", "AccumulateGrad"); static or
** owned by the node. */
const char *kn__node_name(const kn__node *n);

/* The edge along which t's gradient flows: (grad_fn, output_nr) for
** non-leaves, the (created on demand) AccumulateGrad for leaves that
** require grad, {NULL} otherwise. The returned fn is a NEW reference. */
kn_status kn__gradient_edge(kn_tensor *t, kn__edge *out);

/* Custom nodes (the hook for compiled backwards). Creates a node named
** `name` (static string) whose backward is fn(ctx, ...); its edges lead to
** the history of inputs[0..nin) (NULL or non-requiring inputs get no edge).
** ctx_free (may be NULL) frees ctx when the node dies, also on error.
** Owned reference, or NULL. Attach it to outputs with kn__node_set_output.
** Typical use (an AOT-compiled function):
**   out = compiled forward on detached inputs (no history);
**   n = kn__node_new_custom("CompiledFunctionBackward", bw, ctx, ctx_free,
**                           inputs, nin, nout);
**   kn__node_set_output(n, out_i, i) for each differentiable output;
**   kn__node_release(n);           (the outputs own it now)
** ctx may retain tensors the backward needs, but never a tensor whose
** grad_fn is this node (a reference cycle): save kn_detach() aliases of
** outputs instead, and record kn__saved_info_of(t) to check versions with
** kn__saved_version_error at backward time. */
kn__node *kn__node_new_custom(const char *name, kn__custom_backward fn, void *ctx,
                              void (*ctx_free)(void *), kn_tensor *const *inputs, int nin,
                              int nout);
/* Make n the grad_fn of t as output output_nr (t becomes a non-leaf that
** requires grad; its previous history is dropped). t must be floating. */
kn_status kn__node_set_output(kn__node *n, kn_tensor *t, int output_nr);

/* ---- Gradient buffers the engine owns (grad_accum.c) ----
** The engine marks a node input's accumulated gradient as its own when it
** allocated it (a sum, or a buffer a select/slice gradient went into); while
** nothing else references such a buffer, later gradients are added into it in
** place instead of into a fresh sum. */
/* t can be written in place: only one reference, its own storage (not a
** user's), contiguous CPU data, no history. */
bool kn__grad_exclusive(const kn_tensor *t);
/* dst += src is supported in place: same sizes and floating dtype, src has
** data and another storage. */
bool kn__grad_can_add_into(const kn_tensor *dst, const kn_tensor *src);
/* dst += src (any strides; checked with kn__grad_can_add_into). No dispatch,
** no version bump. */
void kn__grad_add_into(kn_tensor *dst, const kn_tensor *src);
/* When n is a select or slice node on concrete CPU float tensors and no
** dispatcher mode is active: add gout into the matching view of *slot (the
** gradient buffer of n's input; made, with *own set, a zero-filled or copied
** buffer the engine owns when it is not one already) and set *done. Else
** *done is false and nothing changed. */
kn_status kn__slice_grad_accumulate(kn__node *n, kn_tensor *gout, kn_tensor **slot, bool *own,
                                    bool *done);

/* Run leaf's post-accumulate-grad hooks (hooks.c); the first failure stops
** them and is returned. */
kn_status kn__run_acc_hooks(kn_tensor *leaf);

/* Forget a dying tensor that retains its grad (called by kn_release). */
void kn__autograd_forget(kn_tensor *t);
/* Next sequence number (per thread, increasing). */
uint64_t kn__next_seq(void);
/* The number the next node created on this thread will get. */
uint64_t kn__peek_seq(void);
/* While the engine runs a node's backward on this thread (its derivative
** rule, the gradient sums after it): that node's sequence number; -1
** otherwise. What a recording mode stamps on the ops a rule makes. */
int64_t kn__autograd_current_seq(void);
/* Free a node's saved tensors (after a backward without retain_graph): they
** become meta stand-ins keeping only the metadata. */
void kn__node_release_saved(kn__node *n);
/* A metadata-only (meta device) copy of t's geometry. Owned or NULL. */
kn_tensor *kn__saved_stand_in(const kn_tensor *t);
/* Version and origin of t now, for a later kn__saved_version_error. */
kn__saved_info kn__saved_info_of(const kn_tensor *t);
/* The version-counter check of a saved tensor t (info recorded when it was
** saved; n may be NULL): KN_OK, or KN_EAUTOGRAD with PyTorch's message when
** t was modified in place since. */
kn_status kn__saved_version_error(const kn__node *n, const kn_tensor *t,
                                  const kn__saved_info *info);
/* The base of a view with history (the first tensor up its chain of view
** nodes that is not itself such a view), or NULL. Borrowed. */
kn_tensor *kn__view_base(const kn_tensor *t);
/* Record an in-place op on a view: fn (the op's node, consumed) becomes part
** of a CopySlices node that is the base's new history; the view becomes
** as_strided(base). */
kn_status kn__copyslices_record(kn__node *fn, kn_tensor *view, kn_tensor *base);
/* Run a CopySlices node: g is the gradient of the base; grads[k] receive
** owned gradients of the node's inputs. */
kn_status kn__copyslices_backward(kn__node *n, kn_tensor *g, const bool *needs,
                                  kn_tensor **grads, bool create_graph);
/* Run an op node's derivative rule (engine.c). */
kn_status kn__run_op(kn__node *n, kn_tensor **gout, const bool *needs, kn_tensor **grads,
                     bool create_graph);
/* Make n the history of t as output output_nr (takes a new reference). */
kn_status kn__set_history(kn_tensor *t, kn__node *n, int output_nr);
/* A new node of the given kind with nin edges and nout outputs; refcount 1. */
kn__node *kn__node_alloc(kn__node_kind kind, int nin, int nout);

/* PyTorch's legacy type name of a dtype ("torch.FloatTensor"). */
const char *kn__torch_type_name(kn_dtype dt);

#endif
