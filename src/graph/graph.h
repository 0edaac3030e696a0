/*
** graph/graph.h: the graph IR of captured programs (internal, FX-like).
**
** A graph is an ordered list of nodes. Four opcodes, as in torch.fx:
**   placeholder    one per graph input (a tensor), named after its source
**                  (L['a'] -> target "L_a_", name "l_a_");
**   get_attr       a constant tensor held by the graph (a tensor created
**                  outside the traced function and captured; parameters);
**   call_function  one op of the op table (kn__opdef) with arguments shaped
**                  like a dispatcher call: tensor arguments refer to values
**                  of earlier nodes (node + output index), everything else
**                  is a constant (ints and int lists may be symbolic kn_sym);
**                  a "getitem" call_function (opdef NULL) picks output k of
**                  a multi-output node, as FX's operator.getitem does;
**   output         the graph's results (one, last).
** Every node carries metadata: the example value of each output (dtype,
** symbolic sizes/strides, device, requires_grad), the user's source location
** and inlined call stack, and a sequence number.
**
** OWNERSHIP. The graph owns its nodes and every string and array reachable
** from them (all functions below copy what they are given), a reference to
** each get_attr tensor, and optionally its shape env. kn__gnode pointers are
** borrowed from the graph and valid until kn__graph_free (or until the node
** is erased). Node fields are READ-ONLY for users of this header: change a
** graph only through the functions here (they keep names and user counts
** consistent).
**
** THREADS. A graph is built by one thread; once built, any number of threads
** may print, hash, verify or run it (kn__gprog_run is reentrant).
**
** Other pieces: printers (graph_code / tabular / sizes, as the spec shows
** them), a verifier, a canonical serialization and its SHA-256, and an
** interpreter (kn__gprog) that runs a graph on real tensors through the
** dispatcher: the "eager" backend's compiled program. The public graph
** module object (kn_graph_module, include/kiln/graph.h) wraps a graph and a
** program.
*/
#ifndef KN_GRAPH_GRAPH_H
#define KN_GRAPH_GRAPH_H

#include <jansson.h>

#include "dynamic/sym.h"
#include "kiln/compile.h"
#include "kiln/graph.h"
#include "ops/opdef.h"

typedef struct kn__graph kn__graph;
typedef struct kn__gnode kn__gnode;

typedef enum kn__gop {
  KN__GN_PLACEHOLDER = 0,
  KN__GN_CALL,      /* call_function */
  KN__GN_GET_ATTR,
  KN__GN_OUTPUT
} kn__gop;

/* ---- values and their example metadata ----------------------------------- */
/* A value: output `idx` of `node`. */
typedef struct kn__gref {
  kn__gnode *node;   /* borrowed from the graph; NULL = absent optional tensor */
  int idx;
} kn__gref;

/* The tensor-to-value map of a recording mode (decomposition, rewriting,
** AOT's joint trace): which graph value each tensor seen stands for. Tensors
** are retained; lookups go newest first. Zero-initialise, then bind; fini
** releases the tensors. */
typedef struct kn__tmap_entry {
  kn_tensor *t; /* retained */
  kn__gref v;
} kn__tmap_entry;
typedef struct kn__tmap {
  kn__tmap_entry *e;
  int n, cap;
} kn__tmap;
kn_status kn__tmap_bind(kn__tmap *m, kn_tensor *t, kn__gref v);
/* The value t itself is bound to (not a view of it). */
bool kn__tmap_find(const kn__tmap *m, const kn_tensor *t, kn__gref *out);
void kn__tmap_fini(kn__tmap *m);

typedef enum kn__vkind {
  KN__V_TENSOR = 0,
  KN__V_NONE        /* no example value (e.g. the output node) */
} kn__vkind;

/* Example metadata of one value (what FX keeps in meta["example_value"]).
** kn_sym expressions are owned by the shape env the graph refers to. */
typedef struct kn__vmeta {
  kn__vkind kind;
  kn_dtype dtype;
  kn_device device;
  bool requires_grad;
  int ndim;
  kn_sym sizes[KN_MAX_DIMS];
  kn_sym strides[KN_MAX_DIMS];
  kn_sym offset;
} kn__vmeta;

/* Metadata of a (real, meta or fake) tensor: symbolic when t->sym is set. */
void kn__vmeta_from_tensor(const kn_tensor *t, kn__vmeta *out);
/* Metadata from an op's output metadata (contiguous strides are computed for
** fresh outputs; views keep the meta's strides). */
void kn__vmeta_from_outmeta(const kn__outmeta *m, kn_device dev, bool requires_grad,
                            kn__vmeta *out);

/* ---- call arguments ---------------------------------------------------- */
typedef enum kn__gargkind {
  KN__GA_NONE = 0,  /* omitted optional argument (-> KN_A_NONE) */
  KN__GA_TENSOR,    /* .t (node NULL: omitted optional tensor -> KN_A_T(NULL)) */
  KN__GA_TENSORS,   /* .ts: list of values */
  KN__GA_INT,       /* .i: possibly symbolic (in a Scalar position: an int Scalar) */
  KN__GA_DOUBLE,    /* .d */
  KN__GA_BOOL,      /* .b */
  KN__GA_SCALAR,    /* .s */
  KN__GA_INTS,      /* .ints: list of possibly symbolic ints (sizes, dims) */
  KN__GA_DTYPE,     /* .dt */
  KN__GA_GEN        /* .gen: borrowed generator (NULL = default); must outlive the graph */
} kn__gargkind;

typedef struct kn__garg {
  kn__gargkind kind;
  union {
    kn__gref t;
    struct { const kn__gref *v; int n; } ts;
    kn_sym i;
    double d;
    bool b;
    kn_scalar s;
    struct { const kn_sym *v; int n; } ints;
    kn_dtype dt;
    kn_generator *gen;
  } u;
} kn__garg;

/* Argument builders. Arrays passed to the builders are copied when the node
** is created (kn__graph_call), so they may live on the caller's stack. */
#define KN_GA_T(node_) ((kn__garg){.kind = KN__GA_TENSOR, .u.t = {(node_), 0}})
#define KN_GA_TI(node_, i_) ((kn__garg){.kind = KN__GA_TENSOR, .u.t = {(node_), (i_)}})
#define KN_GA_REF(ref_) ((kn__garg){.kind = KN__GA_TENSOR, .u.t = (ref_)})
#define KN_GA_TS(v_, n_) ((kn__garg){.kind = KN__GA_TENSORS, .u.ts = {(v_), (n_)}})
#define KN_GA_I(x) ((kn__garg){.kind = KN__GA_INT, .u.i = kn__sym_const(x)})
#define KN_GA_SYM(x) ((kn__garg){.kind = KN__GA_INT, .u.i = (x)})
#define KN_GA_D(x) ((kn__garg){.kind = KN__GA_DOUBLE, .u.d = (x)})
#define KN_GA_B(x) ((kn__garg){.kind = KN__GA_BOOL, .u.b = (x)})
#define KN_GA_S(x) ((kn__garg){.kind = KN__GA_SCALAR, .u.s = (x)})
#define KN_GA_INTS(v_, n_) ((kn__garg){.kind = KN__GA_INTS, .u.ints = {(v_), (n_)}})
#define KN_GA_DT(x) ((kn__garg){.kind = KN__GA_DTYPE, .u.dt = (x)})
#define KN_GA_GEN(x) ((kn__garg){.kind = KN__GA_GEN, .u.gen = (x)})
#define KN_GA_NONE ((kn__garg){.kind = KN__GA_NONE})

/* Constant int lists from int64 arrays: writes n constants into out (caller's
** storage, e.g. a local kn_sym[KN_MAX_DIMS]) and returns the argument. */
kn__garg kn__garg_ints64(const int64_t *v, int n, kn_sym *out);
/* Is argument i of op a Scalar in its schema? A KN__GA_INT there (a
** symbolic int, such as the count a derivative rule divides by) is passed to
** the op as an int Scalar (KN_A_S(kn_int(value))). */
bool kn__schema_arg_is_scalar(const kn__opdef *op, int i);

/* ---- source locations --------------------------------------------------- */
/* One frame of the user's call stack. */
typedef struct kn__gframe {
  const char *file;  /* graph-owned copy once stored in a node */
  int line;
  const char *func;
} kn__gframe;

/* ---- nodes --------------------------------------------------------------- */
struct kn__gnode {
  kn__graph *graph;          /* owner (borrowed back-pointer) */
  kn__gop op;
  int index;                 /* position in the graph's node order */
  const char *name;          /* unique in the graph ("l_a_", "add", "sum_1") */
  const char *target;        /* placeholder: "L_a_"; get_attr: attribute name;
                                call: "kiln.ops.add" or "getitem"; output: "output" */
  const char *source;        /* placeholder: "L['a']"; NULL otherwise */
  const kn__opdef *opdef;    /* call_function op; NULL for getitem and others */
  int nargs;                 /* call: args in schema order; output: one per result */
  const kn__garg *args;      /* getitem: (KN__GA_TENSOR src, KN__GA_INT k) */
  int nout;                  /* number of values (1 for placeholder/get_attr,
                                0 for output, nout of the op for calls) */
  const kn__vmeta *meta;     /* [nout] example metadata */
  kn_tensor *attr;           /* get_attr: the graph's reference to the constant */
  int nusers;                /* references from later nodes' arguments */
  /* metadata */
  int seq_nr;                /* creation order within the graph (0, 1, ...) */
  int64_t autograd_seq_nr;   /* call: the sequence number of the eager autograd
                                node the op belongs to (PyTorch's meta["seq_nr"]:
                                a forward op's own node, a backward op's node
                                whose derivative rule made it), relative to the
                                trace's first; -1 when unknown */
  int nstack;                /* call stack, outermost first; loc = stack[nstack-1] */
  const kn__gframe *stack;   /* NULL when unknown */
  const char *code;          /* the user's source line (stripped), or NULL:
                                read from stack[nstack-1].file when printing */
  /* replayed by the interpreter */
  signed char grad_mode;     /* call: -1 = the caller's; 0/1 = run with grad
                                mode off/on (the mode when it was traced) */
  bool set_requires_grad;    /* call: make output 0 (a new leaf) require grad */
};

/* Inline depth of the node's op call (0 = in the compiled function itself),
** -1 when the location is unknown. */
static inline int kn__gnode_inline_depth(const kn__gnode *n) { return n->nstack - 1; }

/* ---- graphs ---------------------------------------------------------------- */
/* A new empty graph. Owned: free with kn__graph_free. NULL on OOM. */
kn__graph *kn__graph_new(void);
/* Frees nodes, strings, and releases get_attr tensors and the graph's
** reference to its shape env. NULL is ignored. */
void kn__graph_free(kn__graph *g);
/* The shape env whose expressions appear in the graph's kn_sym values. The
** graph holds a reference to env (released in kn__graph_free), so a graph
** module outlives the trace that made it. take_ownership: the caller's
** reference passes to the graph; otherwise the graph adds its own.
** Borrowed (returned). */
void kn__graph_set_shape_env(kn__graph *g, kn__shape_env *env, bool take_ownership);
kn__shape_env *kn__graph_shape_env(const kn__graph *g);

/* Node list in order (borrowed). */
int kn__graph_num_nodes(const kn__graph *g);
kn__gnode *kn__graph_node(const kn__graph *g, int i);
/* Placeholders in order (graph inputs) and the output node (NULL until set). */
int kn__graph_num_inputs(const kn__graph *g);
kn__gnode *kn__graph_input(const kn__graph *g, int i);
kn__gnode *kn__graph_output_node(const kn__graph *g);
/* Number of call_function nodes that call an op (getitem excluded): the
** seeds' CompileCounter op_count. */
int kn__graph_op_count(const kn__graph *g);
/* Find a node by name; borrowed or NULL. */
kn__gnode *kn__graph_find(const kn__graph *g, const char *name);

/* Node creation. Each returns the new node (borrowed from g) or NULL with
** kn_last_error set (KN_ENOMEM, KN_EINVAL for bad arguments, KN_ESTATE after
** the output node). Nodes are appended in order; the output node comes last. */

/* A graph input named from its source: "L['a']" -> target "L_a_", name
** "l_a_"; "L['self']._modules['layers']._modules['0']._parameters['weight']"
** -> "l_self_modules_layers_modules_0_parameters_weight_"; "L['___stack0']"
** -> "l_stack0_". meta may be NULL (no example value). */
kn__gnode *kn__graph_placeholder(kn__graph *g, const char *source, const kn__vmeta *meta);
/* A constant tensor: the graph retains `value` (any tensor: real data is
** needed to run the graph). attr is the attribute name ("_tensor_constant0";
** deduplicated). The node's metadata is value's. */
kn__gnode *kn__graph_get_attr(kn__graph *g, const char *attr, kn_tensor *value);
/* A call of op with nargs arguments (schema order); tensor arguments must
** refer to earlier nodes of g. metas[nout] describe the outputs (may be NULL:
** unknown). Named after the op ("add", "sum_1", "ones_1", ...). */
kn__gnode *kn__graph_call(kn__graph *g, const kn__opdef *op, int nargs, const kn__garg *args,
                          int nout, const kn__vmeta *metas);
/* Record a dispatcher call as a call node (the tracing mode's shortcut):
** each tensor argument t is mapped to a graph value by lookup(ud, t, &ref)
** (which may create nodes, e.g. a get_attr for a tensor captured from
** outside; it returns KN_OK or an error that is passed on); NULL optional
** tensors stay absent; ints, int lists, scalars, dtypes ... become constants
** (int lists copied). metas as for kn__graph_call. */
typedef kn_status (*kn__graph_lookup_fn)(void *ud, kn_tensor *t, kn__gref *out);
kn__gnode *kn__graph_call_from(kn__graph *g, const kn__call *c, kn__graph_lookup_fn lookup,
                               void *ud, int nout, const kn__vmeta *metas);
/* Output k of multi-output node src as its own node ("getitem", "getitem_1"),
** FX's operator.getitem; its metadata is src->meta[k]. Repeated calls for the
** same (src, k) return the same node. */
kn__gnode *kn__graph_getitem(kn__graph *g, kn__gnode *src, int k);
/* The single-tensor value for output k of node n: n itself when k == 0 and n
** has one output, else the getitem node (created on first use). */
kn__gref kn__graph_value(kn__graph *g, kn__gnode *n, int k);
/* The output node: returns the n values as a tuple. Once per graph. */
kn__gnode *kn__graph_output(kn__graph *g, int n, const kn__gref *vals);

/* Record where the node's op was called: stack[nstack] outermost first (the
** innermost frame is the op call itself; inline depth = nstack - 1). Strings
** are copied. code may be NULL (then printers read the line from the file).
** KN_ENOMEM on failure. */
kn_status kn__graph_node_set_stack(kn__gnode *n, const kn__gframe *stack, int nstack,
                                   const char *code);
/* Rename a node after a user-chosen label (FX names values after the
** variable they were assigned to): "output", then "output_1", ... (FX's
** dedup rules; names that shadow Python builtins/keywords get a suffix).
** The old name is released. KN_EINVAL for an empty hint, KN_ENOMEM. */
kn_status kn__graph_node_set_name_hint(kn__gnode *n, const char *hint);
/* Erase a node that has no users (not the output node). KN_ESTATE if used. */
kn_status kn__graph_erase_node(kn__graph *g, kn__gnode *n);
/* Remove call_function nodes whose values are unused, except ops with side
** effects (in-place, random). Returns the number of nodes removed. */
int kn__graph_eliminate_dead_code(kn__graph *g);

/* ---- editing (graph_edit.c) ------------------------------------------------ */
/* The distinct nodes whose arguments refer to any output of n, in order:
** writes up to cap of them (borrowed) into out (may be NULL) and returns how
** many there are. */
int kn__graph_users(const kn__graph *g, const kn__gnode *n, kn__gnode **out, int cap);
/* Make every argument that refers to value `from` refer to `to` instead
** (user counts follow; `to` itself is left alone). Returns the number of
** nodes changed, or -1 (KN_EINVAL) when a value is not in g or a user of
** `from` comes before `to`'s node. */
int kn__graph_replace_all_uses(kn__graph *g, kn__gref from, kn__gref to);
/* Insert-before: until changed, new call, getitem and get_attr nodes go
** right before `before` (also after the output node exists) instead of at
** the end; NULL restores appending. Placeholders always go after the last
** placeholder. Returns the previous insertion point (to restore it). */
kn__gnode *kn__graph_set_insert_point(kn__graph *g, kn__gnode *before);
/* A copy of g: same nodes, names, arguments, metadata, stacks and
** attributes; constants are shared (retained). The copy borrows g's shape
** env (g's env must outlive it). Owned; NULL on failure (error set). */
kn__graph *kn__graph_copy(const kn__graph *g);
/* The subgraph of the given call nodes of g (any order): each value they
** use from outside becomes a placeholder (source = the value's name,
** "split_1" for output 1 of a multi-output node), in order of first use; the
** output returns each value of a selected node that a node outside the
** selection uses (or g returns), in node order. Borrows g's shape env.
** Owned; NULL on failure (KN_EINVAL for a node that is not a call of g). */
kn__graph *kn__graph_subgraph(const kn__graph *g, kn__gnode *const *nodes, int n);
/* The same, also saying which values of g the subgraph's placeholders
** stand for (in[k], for placeholder k) and which it returns (out[j], for
** output j). The arrays are owned by the caller (free()); set only on
** success. */
typedef struct kn__graph_io {
  kn__gref *in;
  int nin;
  kn__gref *out;
  int nout;
} kn__graph_io;
kn__graph *kn__graph_subgraph_io(const kn__graph *g, kn__gnode *const *nodes, int n,
                                 kn__graph_io *io);

/* ---- passes (graph_passes.c; dead-code elimination above) ------------------ */
/* Common-subexpression elimination: a call node with the same op, the same
** arguments (values by node, constants by value) and the same replayed
** attributes as an earlier one is replaced by it and erased. Never merged:
** random, in-place and data-dependent ops, values written in place (and
** their views and bases), and calls reading such a value (they may see
** different data). Returns the number of nodes removed, -1 on failure. */
int kn__graph_cse(kn__graph *g);
/* No-op removal (PyTorch's joint-graph remove_no_ops): a call computing
** x + 0, 0 + x, x - 0, x * 1, 1 * x or x / 1 (0 and 1 as numbers or as
** full() tensors; add/sub's alpha finite, or 1 when x is the second operand)
** whose value has exactly x's dtype, device, sizes and strides (no
** broadcast, no type promotion) is replaced by x; the calls and constants
** left unused are removed. Kept: values written in place, and a graph output
** that would become an input, a view of one, or another output. As in
** PyTorch, x + 0 for x = -0.0 then gives -0.0 rather than 0.0. Returns the
** number of calls replaced, -1 on failure. */
int kn__graph_remove_noops(kn__graph *g);
/* The pre-grad passes (graph_pregrad.c), run on a captured graph before AOT
** autograd: a copy of g after common-subexpression elimination and
** dead-code elimination. Writes the trace artifacts before_pre_grad_graph
** (g) and after_pre_grad_graph (the copy) as graph code. The copy borrows
** g's shape env. Owned; NULL on failure (error set). */
kn__graph *kn__graph_pre_grad(const kn__graph *g);

/* ---- passes that add ops (graph_rewrite.c) ----------------------------------- */
/* Decomposition: every call of a composite op (KN_OPF_COMPOSITE: its
** op-table kernel is written with other ops) becomes the calls its kernel
** makes, recorded on meta tensors standing for the node's arguments and
** inserted where the node was (its uses move to their results). Composite
** ops among those calls are decomposed in the next sweep, until none is
** left (at most 8 sweeps). Calls with a replayed grad mode are left alone.
** Symbolic ints in arguments are recorded as their hints (constants).
** Returns the number of nodes decomposed, -1 on failure (the failing node
** is left as it was). */
int kn__graph_decompose(kn__graph *g);
/* The same, also decomposing the calls for which rule_of returns a rule (a
** kernel-shaped function written with kiln's ops; NULL: keep the call), as
** a backend's decomposition table does; rule_of sees the calls with a
** replayed grad mode too (it may return their composite kernel). */
typedef kn_status (*kn__decomp_fn)(const kn__call *c, kn__outs *out);
int kn__graph_decompose_with(kn__graph *g, kn__decomp_fn (*rule_of)(const kn__gnode *n));
/* Pattern rewriter: every match of `pattern` in g (a graph returning one
** op result; its placeholders match any value, the same placeholder the same
** value; ops, constants and the structure must be equal) is replaced by
** `replacement` (same number of inputs, one result), whose ops are recorded
** on meta tensors of the matched values and inserted before the matched
** root; the matched nodes nothing else uses are erased. Nodes a
** replacement inserted are not matched again (x + x -> (x + x) ends).
** Patterns hold pure ops only. Returns the number of replacements, -1 on
** failure. */
int kn__graph_replace_pattern(kn__graph *g, const kn__graph *pattern, const kn__graph *replacement);

/* ---- text parser (graph_parse.c) ---------------------------------------------- */
/* A named constant for the parser's get_attr lines. */
typedef struct kn__gparse_const {
  const char *name;  /* "_tensor_constant0" */
  kn_tensor *value;  /* borrowed; the graph retains it */
} kn__gparse_const;
/* Parse graph code as kn__graph_code prints it (class GraphModule ...,
** include_stride and include_device on): placeholders from forward's
** parameters with their annotations, "x: \"f32[3][1]cpu\" = kiln.ops.op(a,
** 2, alpha = 0.5)" calls (positional arguments in schema order, keyword-only
** ones by name, omitted ones at their schema default), "x = y[k]" getitems,
** "self.<attr>" get_attrs (values from consts[nconsts]), "# File: f:l in fn,
** code: c" locations, and the return tuple. Sizes must be constants. Owned
** graph (verified); NULL with a message naming the line on failure. */
kn__graph *kn__graph_parse(const char *text, const kn__gparse_const *consts, int nconsts);

/* FX's name sanitizer alone: "L['a']" -> "L_a_" (what a placeholder's target
** is) and its snake-cased form. Owned strings (free()); NULL on OOM. */
char *kn__graph_source_to_target(const char *source);

/* ---- verifier -------------------------------------------------------------- */
/* Check structure and metadata: every tensor argument refers to an earlier
** node's existing output, getitem indices are in range, user counts match,
** names are unique, placeholders come first, exactly one output node comes
** last, example metadata is consistent (ndim in range, kinds), and every
** call's arguments fit its op's schema (count and types). KN_OK or
** KN_EINVAL with a message naming the node and what is wrong. */
kn_status kn__graph_verify(const kn__graph *g);

/* ---- printers (each returns an owned string: free(); NULL on OOM) ---------- */
typedef struct kn__gprint_opts {
  bool include_stride;   /* "f32[3, 4][4, 1]cpu" (true) or "f32[3, 4]" */
  bool include_device;
} kn__gprint_opts;
#define KN__GPRINT_DEFAULT ((kn__gprint_opts){true, true})

/* print_readable(): "class GraphModule(torch.nn.Module):\n    def forward(self,
** L_a_: \"f32[1000, 1000][1000, 1]cpu\"):\n        l_a_ = L_a_\n ..." with
** "# File: path:line in fn, code: <line>" comments, ";  x = None" deletions and
** "return (output_1,)". opts may be NULL (defaults). */
char *kn__graph_code(const kn__graph *g, const kn__gprint_opts *opts);
/* The tabular form: columns opcode, name, target, args, kwargs (tabulate's
** "simple" layout). */
char *kn__graph_tabular(const kn__graph *g);
/* "TRACED GRAPH TENSOR SIZES\n===== <title> =====\nl_a_: (s0, 3)\nl_a_ (concrete): (5, 3)\n..." */
char *kn__graph_sizes(const kn__graph *g, const char *title);
/* The log wrapper of graph_code and graph (torch's _format_graph_code):
** "TRACED GRAPH\n <name> <filename> <body>\n". graph_code passes name
** "===== __compiled_fn_1 =====\n" (so the code starts on its own line after
** " <filename> "), the tabular graph passes the bare "__compiled_fn_1". */
char *kn__graph_format_traced(const char *name, const char *filename, const char *body);
/* The dynamo_output_graph metadata: {"sizes": {"l_a_": [1000, 1000], "x": ["s0", 3],
** "sum_1": []}} (tensor-valued nodes in order). New reference (json_decref);
** NULL on OOM. */
json_t *kn__graph_sizes_json(const kn__graph *g);
/* Short type annotation of a value: "f32[3, 4][4, 1]cpu". Owned string. */
char *kn__vmeta_str(const kn__vmeta *m, const kn__gprint_opts *opts);

/* ---- canonical form and hash --------------------------------------------- */
/* Deterministic text of the graph: nodes, ops (name.overload), arguments,
** constants (get_attr tensors: dtype, sizes and data bytes in hex), example
** metadata; no source locations, no sequence numbers. Owned string. */
char *kn__graph_serialize(const kn__graph *g);
/* SHA-256 of the serialization, lowercase hex into hex[65]. KN_ENOMEM. */
kn_status kn__graph_hash(const kn__graph *g, char hex[65]);

/* ---- interpreter ------------------------------------------------------------ */
/* A program that runs g on real tensors: placeholders take inputs[i] in order,
** each call_function goes through kn__dispatch (modes, autograd, backend), the
** output node's values are returned. Arguments are precomputed at creation;
** a run does no string work and allocates nothing but the ops' outputs.
** Symbolic sizes in arguments are evaluated from the inputs' sizes (a symbol
** that is a placeholder's size is bound at run time).
** The program borrows g: g must outlive it. */
typedef struct kn__gprog kn__gprog;
/* Owned: free with kn__gprog_free. KN_EINVAL if g does not verify. */
kn_status kn__gprog_new(const kn__graph *g, kn__gprog **out);
void kn__gprog_free(kn__gprog *p);
int kn__gprog_num_inputs(const kn__gprog *p);
int kn__gprog_num_outputs(const kn__gprog *p);
/* Run: ninputs must equal the number of placeholders and noutputs the number
** of results. outputs[i] receive NEW references (not registered in any
** scope); on failure none are set and nothing leaks. Inputs are borrowed.
** Reentrant: a nested or concurrent run uses a temporary frame. */
kn_status kn__gprog_run(kn__gprog *p, kn_tensor *const *inputs, int ninputs,
                        kn_tensor **outputs, int noutputs);

/* ---- backends (backend.c; the registry's public half is in kiln/compile.h) -- */
/* The built-in "eager" backend: the interpreter over gm's graph; out->state
** owns the program (out->free_state frees it). */
kn_status kn__eager_compile(kn_graph_module *gm, kn_compiled_graph *out);
/* Look up a registered backend by name (NULL = "eager"): sets *canon (the
** registry's copy of the name, valid for the life of the process), *fn and
** *ud (each may be NULL). KN_EINVAL "unknown backend 'x' (registered:
** \"eager\", ...)" when absent. Thread-safe. */
kn_status kn__backend_lookup(const char *name, const char **canon, kn_backend_fn *fn, void **ud);

/* ---- graph modules (the public object, include/kiln/graph.h) --------------- */
/* Wrap g (ownership transferred, also on failure) in a graph module with its
** program. KN_EINVAL if g does not verify. */
kn_status kn__graph_module_new(kn__graph *g, kn_graph_module **out);
/* The module's graph; borrowed. */
const kn__graph *kn__graph_module_graph(const kn_graph_module *gm);

#endif
