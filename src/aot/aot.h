/*
** aot/aot.h: AOT autograd (internal). From a captured graph (what a backend
** receives), ahead of time:
**   - the joint graph: the forward ops and the op table's derivative rules
**     traced together on meta tensors under a recording dispatcher mode;
**     placeholders primals_1.. (the graph's inputs) then tangents_1.. (one
**     per differentiable output); it returns the forward outputs, then the
**     gradient of each input that requires grad and receives one;
**   - the default partition: a forward graph returning its outputs then the
**     saved values (what backward reads from the forward side), and a
**     backward graph taking the saved values then the tangents and returning
**     the input gradients;
**   - or, when no input requires grad or grad mode is off, one inference
**     graph (the captured ops traced without autograd).
** The runtime (runtime.c) compiles both graphs with a forward and a backward
** compiler (kn_backend_fn) and attaches one CompiledFunctionBackward node to
** the outputs. Backend "aot_eager" uses the interpreter for both.
**
** Before tracing, functionalize.c turns the captured graph's in-place ops
** and views into functional ops and a runtime plan (write-backs, outputs
** that alias inputs or each other), which runtime.c applies after each call.
**
** Not built yet: the min-cut partitioner, argument deduplication and the
** rest of the runtime plan (docs/AOT.md).
*/
#ifndef KN_AOT_AOT_H
#define KN_AOT_AOT_H

#include "graph/graph.h"

/* The joint graph of one captured graph and what its outputs mean. */
typedef struct kn__aot_joint {
  kn__graph *g;         /* owned; borrows the captured graph's shape env */
  int nprimals;         /* placeholders 0..nprimals-1 are the graph's inputs */
  int ntangents;        /* then one tangent per differentiable output */
  int nfw_out;          /* outputs 0..nfw_out-1: the forward's results */
  int ngrads;           /* then ngrads input gradients */
  int *grad_input;      /* [ngrads] which input each gradient is for (owned) */
  bool *out_diff;       /* [nfw_out] does output i take a tangent (owned) */
} kn__aot_joint;

/* Trace gm's graph into a joint graph. requires_grad[i] (ninputs entries,
** as many as the graph's placeholders) marks the inputs that get gradients.
** Without any, or when grad mode is off, the result has no tangents and no
** gradients: the inference graph. KN_OK or an error (nothing leaks). */
kn_status kn__aot_trace_joint(const kn__graph *g, const bool *requires_grad, int ninputs,
                              bool inference, kn__aot_joint *out);
void kn__aot_joint_fini(kn__aot_joint *j);

/* The default partition of a joint graph. */
typedef struct kn__aot_parts {
  kn__graph *fw;        /* owned: primals -> forward outputs + saved values */
  kn__graph *bw;        /* owned: saved values + tangents -> gradients */
  int nsaved;           /* number of saved values */
} kn__aot_parts;

/* Forward = every call that does not depend on a tangent; saved = forward
** values (placeholders included) that a backward call or a gradient output
** reads, in joint-graph order. Both graphs keep the joint graph's symbolic
** metadata and borrow its shape env. */
kn_status kn__aot_partition(const kn__aot_joint *j, kn__aot_parts *out);
void kn__aot_parts_fini(kn__aot_parts *p);

/* The AOT backend: traces, partitions and compiles the graphs with fw and bw
** (each gets a graph module and its example meta inputs; bw may equal fw),
** fills out with the runtime's callable. Registered as "aot_eager" with the
** graph interpreter for both. */
typedef struct kn__aot_config {
  kn_backend_fn fw_compiler;
  void *fw_ud;
  kn_backend_fn bw_compiler;
  void *bw_ud;
} kn__aot_config;
kn_status kn__aot_compile(kn_graph_module *gm, kn_tensor *const *examples, int n,
                          const kn__aot_config *cfg, kn_compiled_graph *out);
/* kn_backend_fn shape of kn__aot_compile with ud = NULL: interpreter for both. */
kn_status kn__aot_eager_compile(kn_graph_module *gm, kn_tensor *const *examples, int n, void *ud,
                                kn_compiled_graph *out);

/* ---- functionalization and the runtime plan (functionalize.c, plan.c) ------- */
/* What a caller-visible output is, as the runtime rebuilds it after the
** compiled call (PyTorch's OutputType). */
typedef enum kn__aot_out_kind {
  KN__AOT_OUT_NON_ALIAS = 0,  /* a fresh tensor: the forward's value */
  KN__AOT_OUT_IS_INPUT,       /* the caller's input `base` itself */
  KN__AOT_OUT_ALIAS_OF_INPUT, /* a view of input `base` (regenerated on it) */
  KN__AOT_OUT_SAME_AS_OUTPUT, /* the same tensor as user output `base` */
  KN__AOT_OUT_ALIAS_OF_OUTPUT /* a view of forward output `base` (a user output or an
                              ** intermediate base the plan added) */
} kn__aot_out_kind;

/* A view's geometry on its base (offset relative to the base's). */
typedef struct kn__aot_geom {
  int ndim;
  int64_t sizes[KN_MAX_DIMS], strides[KN_MAX_DIMS];
  int64_t offset;
} kn__aot_geom;

typedef struct kn__aot_out_info {
  kn__aot_out_kind kind;
  int base;                /* input index, user output index or forward output index */
  kn__aot_geom view;       /* ALIAS_OF_*: the view on the base */
  kn__aot_geom base_geom;  /* ALIAS_OF_OUTPUT: the base's geometry the view assumes */
} kn__aot_out_info;

/* One write-back: the new value (a forward output) copied into an input or
** into a constant the graph captured. */
typedef struct kn__aot_mutation {
  int input;          /* placeholder index, or -1 for a constant */
  kn_tensor *konst;   /* the captured constant (retained) when input < 0 */
  bool with_grad;     /* some mutation ran with grad mode on: copy under the caller's mode */
} kn__aot_mutation;

typedef struct kn__aot_input_info {
  bool mutates_data;
  bool mutates_metadata;   /* always false: kiln has no in-place metadata ops */
  bool mutated_under_no_grad;
} kn__aot_input_info;

/* The runtime plan, held as data. The functional graph's outputs are, in
** order: the new values of the mutated tensors (nmutated, mutations[]), the
** user outputs (nuser, outs[]), then nbases intermediate bases (tensors two
** aliasing outputs are views of). */
typedef struct kn__aot_plan {
  int ninputs;
  kn__aot_input_info *inputs;  /* [ninputs] owned */
  int nmutated;
  kn__aot_mutation *mutations; /* [nmutated] owned */
  int nuser;
  kn__aot_out_info *outs;      /* [nuser] owned */
  int nbases;
} kn__aot_plan;

/* Functionalize g: a new graph (owned: *out_g) computing the same values
** without in-place ops on anything the caller can see: x.add_(y) becomes
** add + a write-back in the plan; a mutation through a view becomes the
** functional op and its write into the base (nested *_scatter ops for
** slice/select/diagonal chains, an index_put at the view's positions
** otherwise); later reads of views of a mutated base are regenerated from
** it. Nodes keep their replayed grad mode and source locations. Fills plan
** (kn__aot_plan_fini). Errors as eager code would raise them (writing
** into an expanded tensor: "unsupported operation: more than one element of
** the written-to tensor refers to a single memory location"); nothing leaks. */
kn_status kn__aot_functionalize(const kn__graph *g, kn__graph **out_g, kn__aot_plan *plan);
void kn__aot_plan_fini(kn__aot_plan *p);
/* A readable dump of the plan (PyTorch's ViewAndMutationMeta field names).
** is_train: a training compile. Owned string, NULL on OOM. */
char *kn__aot_plan_str(const kn__aot_plan *p, bool is_train);
/* The artifact aot_forward_graph_fw_metadata (the dump) when tracing. */
void kn__aot_plan_log(const kn__aot_plan *p, bool is_train);
/* After the compiled call: fw[] holds the forward's outputs (nmutated +
** nuser + nbases, owned). Copies each mutated value into its target once,
** then fills user[nuser] (owned references) as the caller must see them:
** the forward's value, the input itself, or a view regenerated on the
** input or output it aliases. fw[] entries moved to user[] are set NULL. */
kn_status kn__aot_plan_apply(const kn__aot_plan *p, kn_tensor *const *in, kn_tensor **fw,
                             kn_tensor **user);

/* ---- observability (aot_log.c) ---------------------------------------------- */
typedef enum kn__aot_graph_kind {
  KN__AOT_JOINT = 0,
  KN__AOT_FORWARD,
  KN__AOT_BACKWARD,
  KN__AOT_INFERENCE
} kn__aot_graph_kind;
/* A number for one AOT compile (0, 1, ...: the id in the graphs' titles). */
int kn__aot_next_id(void);
/* Write g as the trace event aot_<kind>_graph (payload: graph code) and the
** log artifact aot_joint_graph (joint) or aot_graphs (the others). Failures
** to format are ignored (observability never fails a compile). */
void kn__aot_log_graph(kn__aot_graph_kind kind, const kn__graph *g, int id);

#endif
