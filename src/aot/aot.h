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
** Partitioners: the default one and min-cut rematerialization
** (partition_mincut.c). Compiles go through an in-memory cache (aot_cache.c).
** Parameters created inside the function are lifted into inputs (params.c).
** Before tracing, functionalize.c turns the captured graph's in-place ops
** and views into functional ops and a runtime plan (write-backs, outputs
** that alias inputs or each other), which runtime.c applies after each call.
** See docs/AOT.md for what is not built yet.
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

/* A meta tensor with m's (possibly symbolic) geometry, on a meta storage as
** large as the geometry spans (views such as as_strided check it);
** contiguous: strides recomputed (tangents). Owned, or NULL with the error set. */
kn_tensor *kn__aot_meta_of(const kn__vmeta *m, bool contiguous);

/* Trace gm's graph into a joint graph. requires_grad[i] (ninputs entries,
** as many as the graph's placeholders) marks the inputs that get gradients.
** Without any, or when grad mode is off, the result has no tangents and no
** gradients: the inference graph. KN_OK or an error (nothing leaks). */
kn_status kn__aot_trace_joint(const kn__graph *g, const bool *requires_grad, int ninputs,
                              bool inference, kn__aot_joint *out);
void kn__aot_joint_fini(kn__aot_joint *j);

/* The partitioners (docs/AOT.md): the default one saves what backward
** reads; min-cut saves a minimum-byte set and recomputes cheap forward ops
** (pointwise, views) in the backward. */
typedef enum kn__aot_partitioner {
  KN__AOT_PART_DEFAULT = 0,
  KN__AOT_PART_MINCUT
} kn__aot_partitioner;
/* "default" / "min_cut" (static). */
const char *kn__aot_partitioner_name(kn__aot_partitioner p);

/* A partition of a joint graph. */
typedef struct kn__aot_parts {
  kn__graph *fw;        /* owned: primals -> forward outputs + saved values */
  kn__graph *bw;        /* owned: saved values + tangents -> gradients */
  int nsaved;           /* number of saved values */
  int64_t saved_bytes;  /* their bytes (sizes at their hints) */
  int nrecomputed;      /* forward nodes recomputed in the backward (min-cut) */
  kn__aot_partitioner used; /* min-cut falls back to default on ineligible graphs */
} kn__aot_parts;

/* Forward = every call that does not depend on a tangent; saved = forward
** values (placeholders included) that a backward call or a gradient output
** reads, in joint-graph order. Both graphs keep the joint graph's symbolic
** metadata and borrow its shape env. */
kn_status kn__aot_partition(const kn__aot_joint *j, kn__aot_parts *out);
/* Partition with the given partitioner. Min-cut (partition_mincut.c): a
** max-flow over the forward nodes, capacities their bytes; pointwise and
** view ops, getitems and constants may be recomputed in the backward,
** random, in-place and every other op (matmul, convolution, reductions...)
** never. The forward returns the outputs then the cut's values; the
** backward takes them, recomputes what else it needs, then runs as before.
** A graph with in-place ops gets the default partition (out->used says). */
kn_status kn__aot_partition_with(const kn__aot_joint *j, kn__aot_partitioner how,
                                 kn__aot_parts *out);
void kn__aot_parts_fini(kn__aot_parts *p);

/* The AOT backend: traces, partitions and compiles the graphs with fw and bw
** (each gets a graph module and its example meta inputs; bw may equal fw),
** fills out with the runtime's callable. Registered as "aot_eager" with the
** graph interpreter for both. */
/* Runs c (a callable fw_compiler returned), told that outputs[k] will be
** copied into into[k] (borrowed; NULL: no copy) right after the call: it
** may compute output k in into[k] and return into[k] itself (a new
** reference), and the plan then skips that copy. */
typedef kn_status (*kn__aot_run_into_fn)(const kn_compiled_graph *c, kn_tensor *const *in, int nin,
                                         kn_tensor **out, int nout, kn_tensor *const *into);

typedef struct kn__aot_config {
  kn_backend_fn fw_compiler;
  void *fw_ud;
  kn_backend_fn bw_compiler;
  void *bw_ud;
  kn_backend_fn inference_compiler; /* NULL: fw_compiler compiles inference graphs too
                                       (with fw_ud) */
  kn__aot_partitioner partitioner; /* zero: the default partitioner; the
                                      KILN_AOT_PARTITIONER setting overrides it */
  kn__aot_run_into_fn fw_run_into; /* NULL, or how inference graphs with inputs mutated
                                      under no_grad run (their write-backs in place) */
  int (*inference_passes)(kn__graph *g); /* NULL, or the compiler's passes over an
                                      inference graph, in place, before fw_compiler gets
                                      it (inductor's joint-graph passes); < 0: failed */
} kn__aot_config;
kn_status kn__aot_compile(kn_graph_module *gm, kn_tensor *const *examples, int n,
                          const kn__aot_config *cfg, kn_compiled_graph *out);
/* Parameters created inside (params.c): does g make a new leaf require grad
** (a call node with set_requires_grad)? Then kn__aot_compile hands it to
** kn__aot_compile_new_params: a prologue graph computes the new leaves on
** every call (without grad; each then requires grad) and the rest is
** compiled by kn__aot_compile with them as extra inputs. */
bool kn__aot_creates_params(const kn__graph *g);
kn_status kn__aot_compile_new_params(kn_graph_module *gm, kn_tensor *const *examples, int n,
                                     const kn__aot_config *cfg, kn_compiled_graph *out);
/* Captured constants that require grad (params.c): does g read one (a
** get_attr)? Then kn__aot_compile hands it to kn__aot_compile_grad_consts:
** each becomes a placeholder after the inputs, and every call passes the
** tensor itself (its gradient accumulates in its .grad; returned, it is the
** caller's tensor). */
bool kn__aot_captures_grad_consts(const kn__graph *g);
kn_status kn__aot_compile_grad_consts(kn_graph_module *gm, kn_tensor *const *examples, int n,
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
  int64_t sizes[KN_MAX_DIMS], strides[KN_MAX_DIMS]; /* at the traced sizes (the dump) */
  int64_t offset;
  kn_sym ssizes[KN_MAX_DIMS], sstrides[KN_MAX_DIMS]; /* the same, symbolic: */
  kn_sym soffset;                                    /* evaluated at each call's sizes */
} kn__aot_geom;

/* Symbol `sym` is the size of input `input` at dim `dim`. */
typedef struct kn__aot_bind {
  int input, dim, sym;
} kn__aot_bind;

typedef struct kn__aot_out_info {
  kn__aot_out_kind kind;
  int base;                /* input index, user output index or forward output index */
  kn__aot_geom view;       /* ALIAS_OF_*: the view on the base */
  kn__aot_geom base_geom;  /* ALIAS_OF_OUTPUT: the base's geometry the view assumes */
  signed char grad_mode;   /* ALIAS_OF_*: the grad mode the view is regenerated in, as its
                           ** view ops ran: 0 off (one of them ran without grad), 1 on,
                           ** -1 the caller's */
} kn__aot_out_info;

/* One write-back: the new value (a forward output) copied into an input or
** into a constant the graph captured. */
typedef struct kn__aot_mutation {
  int input;          /* placeholder index, or -1 for a constant */
  kn_tensor *konst;   /* the captured constant (retained) when input < 0 */
  bool with_grad;     /* some mutation ran with grad mode on: copy under the caller's mode */
  bool grad_forced;   /* ... in a node traced with grad on (kn_set_grad_enabled inside the
                      ** function): copy with grad whatever the caller's mode */
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
  kn__shape_env *env;          /* a reference: owns the geometries' expressions */
  int nsyms, nbinds;           /* symbols of env; how each is read off an input */
  kn__aot_bind *binds;         /* [nbinds] owned */
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

/* Which AOT graph a log call writes. */
typedef enum kn__aot_graph_kind {
  KN__AOT_JOINT = 0,
  KN__AOT_FORWARD,
  KN__AOT_BACKWARD,
  KN__AOT_INFERENCE
} kn__aot_graph_kind;

/* ---- the configuration (aot_config.c) -------------------------------------------- */
/* The partitioner a compile uses: KILN_AOT_PARTITIONER ("default" or
** "min_cut", read on each compile; another value is ignored with a warning)
** when set, else cfg->partitioner. *from (may be NULL) names where it came
** from: "KILN_AOT_PARTITIONER" or "backend" (static). */
kn__aot_partitioner kn__aot_partitioner_resolve(const kn__aot_config *cfg, const char **from);
/* The settings that shaped a compile (p and where it came from, as
** kn__aot_partitioner_resolve gives them), one "name = value" line each
** (Python literals, sorted): the payload of the torch._functorch.config
** artifact and part of the cache key. Owned string or NULL (OOM). */
char *kn__aot_config_text(kn__aot_partitioner p, const char *from);

/* ---- the cache and the graphs to compile (aot_cache.c) ------------------------------ */
/* What compiling needs from the joint graph: the forward (or inference) and
** backward graphs and how the runtime calls them. */
typedef struct kn__aot_prepared {
  bool inference;
  kn__graph *fw;        /* owned: forward or inference graph */
  kn__graph *bw;        /* owned; NULL for inference */
  int nuser, ngrads, nsaved;
  bool *out_diff;       /* [nuser] owned (training) */
  int *grad_input;      /* [ngrads] owned (training) */
  int id;               /* the AOT compile number (graph titles) */
  char *config;         /* owned: kn__aot_config_text */
} kn__aot_prepared;
/* Trace and partition g (inference: trace only), or take both from the AOT
** cache. The cache key is the SHA-256 of the graph's canonical text, each
** input's dtype, geometry and requires_grad, grad mode and the
** configuration text; a graph with symbolic sizes or a user generator
** bypasses it (the joint trace adds size guards a hit would skip; a
** generator is borrowed). Writes aotautograd_cache_miss / _hit / _bypass
** (JSON {"key", "reason"}), aot_joint_graph and torch._functorch.config
** (training) to the trace, and times the phases. KN_OK or an error (nothing
** leaks). The cache is process-wide, in memory, bounded (oldest out), and
** on disk under the cache root unless KILN_AOT_DISK_CACHE=0
** (aot_cache_disk.c). */
kn_status kn__aot_prepare(const kn__graph *g, const bool *requires_grad, int n, bool inference,
                          const kn__aot_config *cfg, kn__aot_prepared *out);
void kn__aot_prepared_fini(kn__aot_prepared *p);
/* Log the prepared graphs: aot_forward_graph and aot_backward_graph, or
** aot_inference_graph then torch._functorch.config (the seeds' orders). */
void kn__aot_log_prepared(const kn__aot_prepared *p);
/* Entries in the cache and hits so far (tests). Clear: drop every entry. */
void kn__aot_cache_stats(int *entries, int *hits);
void kn__aot_cache_clear(void);

/* ---- observability (aot_log.c) ---------------------------------------------- */
/* A timed AOT phase: a chromium B/E pair named `name` and an entry of
** kn_dump_compile_times; the calling thread sums them for compilation
** metrics (kn__aot_times_take). */
typedef struct kn__aot_phase {
  const char *name;
  double t0;
} kn__aot_phase;
void kn__aot_phase_begin(kn__aot_phase *ph, const char *name);
void kn__aot_phase_end(kn__aot_phase *ph);
/* This thread's AOT time since the last take, in microseconds: total
** (create_aot_dispatcher_function) and backward compile (aot_compile_bw);
** resets both. NULL pointers are allowed. */
void kn__aot_times_take(double *total_us, double *bw_us);
/* A trace artifact named name, JSON {"key": key, "reason": reason}. */
void kn__aot_log_cache(const char *name, const char *key, const char *reason);
/* The torch._functorch.config artifact with payload text. */
void kn__aot_log_config(const char *text);
/* A number for one AOT compile (0, 1, ...: the id in the graphs' titles). */
int kn__aot_next_id(void);
/* Write g as the trace event aot_<kind>_graph (payload: graph code) and the
** log artifact aot_joint_graph (joint) or aot_graphs (the others). Failures
** to format are ignored (observability never fails a compile). */
void kn__aot_log_graph(kn__aot_graph_kind kind, const kn__graph *g, int id);

#endif
