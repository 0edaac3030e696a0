/*
** ops/opdef.h: the op table and the dispatcher (internal).
**
** Every op is one row of the X-macro table in ops/ops.def (which includes one
** .def file per op family). A row names the op and its overload, its schema
** (PyTorch's notation), flags, and three functions:
**   meta     output dtype/device/sizes (over symbolic sizes), and for view
**            ops the view's strides and offset; every shape and dtype error
**            is raised here, naming both shapes;
**   kernel   the CPU computation into outputs the dispatcher allocated (for
**            KN_OPF_COMPOSITE ops: an implementation in terms of other ops);
**   backward the derivative rule, written with kiln's public ops, so it runs
**            eagerly now and under a tracing mode later; kn__bw_none when the
**            op is not differentiable.
** The enum of op ids is generated from the same table, and so are the
** prototypes: a row without its functions fails to link, an op id without a
** row cannot exist, and KN__OP_COUNT is checked against the table's size.
**
** Dispatch (ops/dispatch.c) runs a call through, top to bottom:
**   0. autocast (ops/autocast.c), when a region is open on the thread: the
**      call's inputs are cast by its policy row (ops/ops_autocast.def);
**   1. the mode stack (thread-local; tracing and fake modes push themselves
**      here: the capture frontend's tracing mode records graph nodes instead
**      of computing). While a mode handles a call, calls it makes see only
**      the modes below it. kn__dispatch_below continues the call.
**   2. autograd: when grad mode is on and an input requires grad, run below
**      and then record a graph node (autograd/) on the outputs;
**   3. the backend: meta propagation (meta or fake inputs: outputs get
**      metadata only) or CPU (allocate outputs, run the kernel). In-place ops
**      bump the version counter.
*/
#ifndef KN_OPS_OPDEF_H
#define KN_OPS_OPDEF_H

#include "dynamic/sym.h"
#include "kiln/tensor.h"
#include "tensor/tensor.h"

/* ---- flags ------------------------------------------------------------- */
enum {
  KN_OPF_POINTWISE = 1u << 0,  /* elementwise, broadcasting */
  KN_OPF_REDUCTION = 1u << 1,
  KN_OPF_VIEW = 1u << 2,       /* outputs alias an input (no kernel) */
  KN_OPF_INPLACE = 1u << 3,    /* writes args[0] and returns it */
  KN_OPF_RANDOM = 1u << 4,     /* draws from a generator */
  KN_OPF_FACTORY = 1u << 5,    /* no tensor inputs */
  KN_OPF_COMPOSITE = 1u << 6,  /* kernel is written with other ops */
  KN_OPF_NONDIFF = 1u << 7,    /* outputs never require grad (compare, argmax) */
  KN_OPF_DATA_DEP = 1u << 8,   /* output shape depends on data (nonzero) */
};

/* ---- arguments ----------------------------------------------------------- */
typedef struct kn_generator kn_generator;

typedef enum kn__argkind {
  KN__A_NONE = 0,   /* an omitted optional argument */
  KN__A_TENSOR,     /* .t (NULL only for optional tensors) */
  KN__A_TENSORS,    /* .ts: a list of tensors */
  KN__A_INT,        /* .i */
  KN__A_DOUBLE,     /* .d */
  KN__A_BOOL,       /* .b */
  KN__A_SCALAR,     /* .s */
  KN__A_INTS,       /* .ints: a list of ints (sizes, dims) */
  KN__A_DTYPE,      /* .dt */
  KN__A_GEN,        /* .gen */
} kn__argkind;

typedef struct kn__arg {
  kn__argkind kind;
  union {
    kn_tensor *t;
    struct { kn_tensor *const *v; int n; } ts;
    int64_t i;
    double d;
    bool b;
    kn_scalar s;
    struct { const int64_t *v; int n; } ints;
    kn_dtype dt;
    kn_generator *gen;
  } u;
  /* Symbolic values of an int, int-list or int-Scalar argument (1 entry, or
  ** u.ints.n), or NULL: the values in u are then constants. When set, u
  ** holds the hints, so kernels read u as always; meta functions and the
  ** recording modes read the symbols (kn__arg_symint(s)). Borrowed for the
  ** call; the autograd node's saved call copies them. */
  const kn_sym *sym;
} kn__arg;

#define KN_A_T(x) ((kn__arg){.kind = KN__A_TENSOR, .u.t = (x)})
#define KN_A_TS(v_, n_) ((kn__arg){.kind = KN__A_TENSORS, .u.ts = {(v_), (n_)}})
#define KN_A_I(x) ((kn__arg){.kind = KN__A_INT, .u.i = (x)})
#define KN_A_D(x) ((kn__arg){.kind = KN__A_DOUBLE, .u.d = (x)})
#define KN_A_B(x) ((kn__arg){.kind = KN__A_BOOL, .u.b = (x)})
#define KN_A_S(x) ((kn__arg){.kind = KN__A_SCALAR, .u.s = (x)})
#define KN_A_INTS(v_, n_) ((kn__arg){.kind = KN__A_INTS, .u.ints = {(v_), (n_)}})
#define KN_A_DT(x) ((kn__arg){.kind = KN__A_DTYPE, .u.dt = (x)})
#define KN_A_GEN(x) ((kn__arg){.kind = KN__A_GEN, .u.gen = (x)})
#define KN_A_NONE ((kn__arg){.kind = KN__A_NONE})
/* Symbolic forms: hints in u, the symbols in sym (see kn__arg). */
#define KN_A_SYMINTS(hints_, syms_, n_) \
  ((kn__arg){.kind = KN__A_INTS, .u.ints = {(hints_), (n_)}, .sym = (syms_)})
#define KN_A_SYMINT(symp_) ((kn__arg){.kind = KN__A_INT, .u.i = (symp_)->c, .sym = (symp_)})
#define KN_A_SYMSCALAR(symp_) \
  ((kn__arg){.kind = KN__A_SCALAR, .u.s = kn_int((symp_)->c), .sym = (symp_)})

/* The symbolic value of an int argument (or of an int-list entry j): the
** attached symbol, else the constant. */
static inline kn_sym kn__arg_symint(const kn__arg *a) {
  return a->sym ? a->sym[0] : kn__sym_const(a->kind == KN__A_SCALAR ? a->u.s.v.i : a->u.i);
}
static inline kn_sym kn__arg_symint_at(const kn__arg *a, int j) {
  return a->sym ? a->sym[j] : kn__sym_const(a->u.ints.v[j]);
}

#define KN__MAX_ARGS 12

struct kn__opdef;

typedef struct kn__call {
  const struct kn__opdef *op;
  int nargs;
  kn__arg args[KN__MAX_ARGS];
} kn__call;

/* ---- output metadata (what meta functions produce) ---------------------- */
typedef struct kn__outmeta {
  kn_dtype dtype;
  int ndim;
  kn_sym sizes[KN_MAX_DIMS];
  /* View ops only: geometry of the view of args[view_of].t. */
  int view_of;              /* -1 for a fresh output */
  kn_sym strides[KN_MAX_DIMS];
  kn_sym offset;
  /* In-place ops: the output is args[alias_of].t itself; -1 otherwise. */
  int alias_of;
} kn__outmeta;

/* A list of outputs (metadata or tensors). Most ops have one or two; split
** and unbind may have many, so the list grows beyond its inline slots. */
#define KN__INLINE_OUTS 4
typedef struct kn__metas {
  int n, cap;
  kn__outmeta *m;
  kn__outmeta inl[KN__INLINE_OUTS];
} kn__metas;

typedef struct kn__outs {
  int n, cap;
  kn_tensor **t;            /* owned references */
  kn_tensor *inl[KN__INLINE_OUTS];
} kn__outs;

void kn__metas_init(kn__metas *m);
void kn__metas_fini(kn__metas *m);
/* A new entry, initialised as a fresh contiguous output of dtype dt, rank 0
** (view_of = alias_of = -1). NULL on OOM. */
kn__outmeta *kn__metas_push(kn__metas *m, kn_dtype dt);
/* The same, shaped like t (its rank and symbolic sizes), with dtype dt. */
kn__outmeta *kn__metas_push_like(kn__metas *m, const kn_tensor *t, kn_dtype dt);
/* The same, of rank nd with symbolic sizes sz (an input's, so that under
** dynamic shapes the output keeps its symbols). */
kn__outmeta *kn__metas_push_sizes(kn__metas *m, kn_dtype dt, int nd, const kn_sym *sz);
void kn__outs_init(kn__outs *o);
/* Releases every output still held. */
void kn__outs_fini(kn__outs *o);
/* Appends an owned reference; false on OOM (t is released). */
bool kn__outs_push(kn__outs *o, kn_tensor *t);

/* ---- derivative rules ----------------------------------------------------- */
/* What a derivative rule sees. Inputs are the call's tensor arguments in
** argument order, lists flattened (kn__bw_input_index maps arg/list index to
** the flat index). A rule sets grad_inputs[k] for each k with
** needs_input_grad[k], using public ops (their results belong to the scope
** the engine opens around the rule; the engine keeps what it needs). */
typedef struct kn__bwctx {
  const kn__call *call;        /* the forward call; its tensors are saved */
  kn_tensor *const *outputs;   /* saved forward outputs (no grad history) */
  int nout;
  kn_tensor *const *grad_outputs; /* per output; NULL when it has no gradient */
  kn_tensor **grad_inputs;     /* per flat tensor input */
  const bool *needs_input_grad;
  int ninputs;
  void *saved;                 /* rule-private data saved at forward time */
} kn__bwctx;

/* ---- the op table ------------------------------------------------------- */
typedef kn_status (*kn__meta_fn)(const kn__call *c, kn__metas *out);
typedef kn_status (*kn__kernel_fn)(const kn__call *c, kn__outs *out);
typedef kn_status (*kn__backward_fn)(kn__bwctx *ctx);

typedef struct kn__opdef {
  int id;
  const char *name;          /* "add" */
  const char *overload;      /* "Tensor", or "" */
  const char *schema;        /* "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" */
  uint32_t flags;
  kn__meta_fn meta;
  kn__kernel_fn kernel;
  kn__backward_fn backward;  /* kn__bw_none if not differentiable */
  const char *grad_fn_name;  /* "AddBackward0" */
} kn__opdef;

/* The rule for ops without a derivative (never called for a rule). */
kn_status kn__bw_none(kn__bwctx *ctx);
/* Meta function of composite ops: run the kernel on meta tensors. */
kn_status kn__meta_composite(const kn__call *c, kn__metas *out);
/* Kernel of view ops: nothing to compute (the dispatcher made the views). */
kn_status kn__kernel_view(const kn__call *c, kn__outs *out);

/* Prototypes for every function named in the table. */
#define KN_OP(ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN) \
  kn_status META(const kn__call *c, kn__metas *out);                            \
  kn_status KERNEL(const kn__call *c, kn__outs *out);                           \
  kn_status BACKWARD(kn__bwctx *ctx);
#include "ops/ops.def"
#undef KN_OP

typedef enum kn__opid {
#define KN_OP(ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN) KN_OP_##ID,
#include "ops/ops.def"
#undef KN_OP
  KN__OP_COUNT
} kn__opid;

/* The table, indexed by kn__opid. */
extern const kn__opdef kn__ops[KN__OP_COUNT];
/* Look an op up by "name.overload" ("add.Tensor", "relu" for the default
** overload). NULL if unknown. Borrowed (static). */
const kn__opdef *kn__op_lookup(const char *qualified_name);

/* ---- the dispatcher ----------------------------------------------------- */
/* Run a call through modes, autograd and backend. On success out holds the
** outputs (owned references, not registered in any scope); on failure out is
** empty and kn_last_error says why. */
kn_status kn__dispatch(kn__call *c, kn__outs *out);
/* The same below the autocast layer (ops/autocast.h): modes, autograd,
** backend. */
kn_status kn__dispatch_modes(kn__call *c, kn__outs *out);
/* Records call c, begun at t0 (kn__prof_op_begin), with the profiler: its op
** name, argument sizes and the autograd node of its first output (out may
** be NULL: the call failed). */
void kn__dispatch_prof_end(int64_t t0, const kn__call *c, const kn__outs *out);

/* Convenience for public wrappers: dispatch op `id` with args and return its
** single output registered in the current autorelease scope, or NULL. */
kn_tensor *kn__invoke(kn__opid id, int nargs, const kn__arg *args);
/* How many kn__invoke calls of this thread took the fast path (a pointwise
** call no mode, autocast region, profiler or autograd sees, with operands
** of one shape: docs/KERNELS.md, "The per-op path"). For tests. */
uint64_t kn__dispatch_fast_calls(void);
/* The same for ops with several outputs: fills outs[0..n) (each registered
** in the scope) and returns the number of outputs, or -1 on error. When the
** op produces more than cap outputs, the extra ones are released and -1 is
** returned with KN_ERANGE. */
int kn__invoke_multi(kn__opid id, int nargs, const kn__arg *args,
                     kn_tensor **outs, int cap);

/* ---- modes ------------------------------------------------------------------ */
typedef struct kn__mode kn__mode;
struct kn__mode {
  const char *name;
  /* Handle a call: compute or record it, filling out. May call
  ** kn__dispatch_below(self, c, out) to let the layers below run it. */
  kn_status (*handle)(kn__mode *self, kn__call *c, kn__outs *out);
  void *state;
};
/* Push/pop on the calling thread's mode stack (pop must match push). */
kn_status kn__mode_push(kn__mode *m);
void kn__mode_pop(kn__mode *m);
/* Continue a call below mode `self`: lower modes, then autograd, backend. */
kn_status kn__dispatch_below(kn__mode *self, kn__call *c, kn__outs *out);
/* From inside self's handler: run composite op c's kernel (KN_OPF_COMPOSITE)
** with self visible, so each call the kernel makes comes back through self
** (a tracing mode records the decomposition, the ops autograd records);
** other ops go on below as kn__dispatch_below. */
kn_status kn__mode_decompose(kn__mode *self, kn__call *c, kn__outs *out);
/* Number of modes on this thread's stack. */
int kn__mode_depth(void);

/* The backend layer alone (no modes, no autograd): meta or CPU. */
kn_status kn__dispatch_backend(kn__call *c, kn__outs *out);
/* The same, with metadata-only outputs even when no input is a meta tensor
** (a factory call such as full runs no kernel and allocates no data). */
kn_status kn__dispatch_backend_meta(kn__call *c, kn__outs *out);

/* ---- hooks into autograd (autograd/) --------------------------------------- */
bool kn__grad_enabled(void);
/* Does this call need a graph node (grad mode on, differentiable op, some
** tensor input requires grad)? */
bool kn__autograd_needed(const kn__call *c);
/* Check an in-place call before it runs (leaf that requires grad, ...). */
kn_status kn__autograd_check_inplace(const kn__call *c);
/* Record the node for a call that ran: creates the grad_fn, saves inputs
** and outputs, and sets grad_fn/requires_grad on the outputs (rebasing the
** history of an in-place output). */
kn_status kn__autograd_record(const kn__call *c, kn__outs *out);

/* ---- helpers for meta functions and kernels ------------------------------- */
/* Number of flat tensor inputs of a call, and the flat index of tensor j of
** argument i (j = 0 for a single tensor). */
int kn__call_ninputs(const kn__call *c);
int kn__bw_input_index(const kn__call *c, int argi, int j);
/* The flat tensor input k (NULL for an omitted optional tensor). Borrowed. */
kn_tensor *kn__call_input(const kn__call *c, int k);
/* Does pred hold for any tensor input of the call (omitted optional tensors
** skipped)? One walk over the arguments, for the dispatcher's hot path
** (kn__call_input(c, k) rescans them per k); inline so pred inlines too. */
static inline bool kn__call_any_input(const kn__call *c, bool (*pred)(const kn_tensor *)) {
  for (int i = 0; i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR && a->u.t && pred(a->u.t)) return true;
    for (int j = 0; a->kind == KN__A_TENSORS && j < a->u.ts.n; j++)
      if (a->u.ts.v[j] && pred(a->u.ts.v[j])) return true;
  }
  return false;
}
/* Symbolic sizes of t (constants unless t->sym). */
void kn__tensor_symsizes(const kn_tensor *t, kn_sym *sizes);
/* Broadcast two shapes (PyTorch semantics); on mismatch KN_ESHAPE with
** "The size of tensor a (1000) must match the size of tensor b (10) at
** non-singleton dimension 1" naming both full shapes. */
kn_status kn__broadcast_shapes(int na, const kn_sym *a, int nb, const kn_sym *b,
                               int *nout, kn_sym *out);
/* Result dtype of a pointwise op whose operands are the call's first nopnds
** arguments (tensors, tensor lists, scalars; later args such as alpha are
** not operands), as torch's result_type: dimensioned tensors > zero-dim
** tensors > scalars, a lower class winning only with a higher category
** (bool < integral < floating); a float scalar counts as the default dtype. */
kn_dtype kn__result_type(const kn__call *c, int nopnds);

#endif
