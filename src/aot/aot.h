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
** Not built yet: functionalization, the min-cut partitioner, argument
** deduplication, output aliasing and the rest of the runtime plan (docs/AOT.md).
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
  bool specialised;     /* a derivative rule read a symbolic size as a plain int:
                        ** every input size was guarded to its traced value */
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
