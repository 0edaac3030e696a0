/*
** dynamo/dynamo.h: internals of the capture frontend (kiln/compile.h).
**
**   values.c    kiln values, tuples, modules, sources (paths from the call's
**               arguments to a value: L['a'], L['ys'][0], L['self']._modules...,
**               or from a declared global / a captured object: G['model'])
**   lift.c      tensors reached other than through the arguments, lifted as
**               graph inputs (parameters, buffers, tensors requiring grad)
**   guards.c    the flat check array, failure reasons, the guard dump
**   srcloc.c    user call stacks (backtrace + libdw) and source lines
**   tracer.c    the tracing mode: graph nodes for op calls, trace logs
**   fakify.c    fake inputs, their guards, describe_* / create_symbol records
**   segments.c  graph segments: finish/compile/run, replaying an entry
**   breaks.c    one trace from start to end, and its graph breaks
**   eager_rest.c past the cache limit: the rest of a call run eagerly from
**               the break that answered differently
**   frame.c     per-frame compile records (dynamo_start ... compilation_metrics)
**   compile.c   kn_compile, kn_call, the cache, recompiles, limits, kn_reset
**   backends.c  the function's backend (registry: graph/backend.c), the compile counter
**   explain.c   kn_explain: one trace into a private copy, read back
**
** A compiled function owns a list of cache entries (most recently used
** first). An entry = guards + a tree of segments: a segment is one graph
** ending either at the function's return (a leaf) or at a graph break whose
** recorded answer selects the child segment. Values flow between segments
** through a per-call value table: the root inputs (tensor sources) first,
** then the carried values in the order they were first needed.
*/
#ifndef KN_DYNAMO_DYNAMO_H
#define KN_DYNAMO_DYNAMO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hashmap.h"
#include "dynamic/sym.h"
#include "graph/graph.h"
#include "dynamo/srcloc.h"
#include "kiln/compile.h"
#include "trace/compile_id.h"

/* ---- sources ------------------------------------------------------------ */
#define KN__SRC_MAXIDX 4
#define KN__SRC_GLOBAL (-2) /* a declared global (kn_compile_options.globals) */
#define KN__SRC_OBJECT (-3) /* an object the trace captured (lift.c) */
typedef struct kn__src {
  int arg;                  /* argument index, or KN__SRC_GLOBAL / KN__SRC_OBJECT */
  int nidx;                 /* list/tuple item indexes after the argument */
  int idx[KN__SRC_MAXIDX];
  char *modpath;            /* dotted module tensor path, or NULL; owned */
  char *expr;               /* "L['a']"; owned */
  /* KN__SRC_GLOBAL: the user's pointer variable, read on every call
  ** (borrowed; one of the two is set) */
  kn_module *const *gmod;
  kn_tensor *const *gten;
  /* KN__SRC_OBJECT: the captured module or tensor (a reference each copy
  ** of the source holds; one of the two is set) */
  kn_module *omod;
  kn_tensor *otensor;
} kn__src;

/* Resolve s against the call's arguments; false when the path does not
** exist (wrong kind, index out of range, missing module entry, a captured
** module that was freed). */
bool kn__src_get(const kn__src *s, const kn_value *args, int nargs, kn_value *out);
/* Deep copy / free. */
kn_status kn__src_copy(kn__src *dst, const kn__src *s);
void kn__src_fini(kn__src *s);
/* Python type name of a value kind: "<class 'int'>". */
const char *kn__value_pytype(kn_value_kind k);
/* Python repr of a double (shortest round-trip, "3.0"). */
void kn__py_float_repr(double d, char *buf, size_t n);
/* Module internals. */
int kn__module_count(const kn_module *m);
/* Visit every tensor of m (params then buffers then children, recursively)
** with its source suffix ("._modules['0']._parameters['weight']") and its
** dotted path; stops at the first non-OK status. */
typedef kn_status (*kn__module_visit_fn)(void *ud, const char *suffix, const char *path,
                                         kn_tensor *t, bool is_param);
kn_status kn__module_visit(kn_module *m, kn__module_visit_fn fn, void *ud);
/* Tracing substitutes stand-ins for module tensors (fn NULL to clear):
** kn_module_get asks it first. It sets *out to the stand-in (borrowed), or
** leaves it NULL for the real tensor; an error status makes kn_module_get
** return NULL (the error is set). Thread-local. */
typedef kn_status (*kn__module_subst_fn)(void *ud, kn_module *m, const char *path,
                                         kn_tensor **out);
void kn__module_set_subst(kn__module_subst_fn fn, void *ud);
/* The tensor at dotted path (borrowed), or NULL; no error, no stand-in. */
kn_tensor *kn__module_lookup(kn_module *m, const char *path);
/* The source suffix of the tensor at path ("._modules['0']._parameters['weight']")
** into buf, and whether it is a parameter. KN_EINVAL when path names none. */
kn_status kn__module_suffix(const kn_module *m, const char *path, char *buf, size_t n,
                            bool *is_param);
/* The module's struct is reference counted: kn_module_free destroys the
** contents, marks it freed and drops the owner's reference; captured
** sources hold the others. */
void kn__module_ref(kn_module *m);
void kn__module_unref(kn_module *m); /* NULL: no-op */
bool kn__module_freed(const kn_module *m);
/* Distinct tensors the arguments of one traced call may hold (tensor slots
** in fakify.c and guards.c; an optimizer step over 100 parameters with
** Adam's state reads about 500). */
#define KN__MAX_TRACED_INPUTS 1024
/* Layer data attached to a module (src/nn): ext is freed with free_ext when
** the module is freed or the data replaced. kn__module_ext: borrowed. */
void kn__module_set_ext(kn_module *m, void *ext, void (*free_ext)(void *));
void *kn__module_ext(const kn_module *m);
/* The module's own entries in insertion order: kind 0 parameter, 1 buffer,
** 2 child; *t / *child borrowed. Returns the entry's name (borrowed). */
int kn__module_nitems(const kn_module *m);
const char *kn__module_item(const kn_module *m, int i, int *kind, kn_tensor **t,
                            kn_module **child);

/* Tuples created by kn_tuple inside a user function live in the calling
** thread's tuple pool until the compiled call ends. */
void kn__tuple_pool_mark(size_t *mark);
void kn__tuple_pool_release(size_t mark);
/* A deep copy of v with retained tensors (owned by the caller). */
kn_status kn__value_clone(kn_value v, kn_value *out);

/* ---- guards ------------------------------------------------------------- */
typedef enum kn__gkind {
  KN__G_KIND,       /* the value's kind (type) */
  KN__G_TENSOR,     /* TENSOR_MATCH (+ aliasing) */
  KN__G_INT,
  KN__G_DOUBLE,
  KN__G_BOOL,
  KN__G_LEN,
  KN__G_MODULE_ID,
  KN__G_GRAD_MODE,
  KN__G_SYM_MIN     /* a dynamic size's lower bound (2 <= size) */
} kn__gkind;

typedef struct kn__guard {
  kn__gkind kind;
  kn__src src;
  kn_value_kind vkind;
  /* tensors */
  kn_dtype dtype;
  kn_device device;
  bool requires_grad;
  int ndim;
  int64_t sizes[KN_MAX_DIMS], strides[KN_MAX_DIMS];
  uint32_t dyn_size, dyn_stride; /* bit d: dim d not checked */
  int tensor_slot;       /* index among the tensor guards */
  int alias_of;          /* tensor slot this must be identical to, or -1 */
  /* scalars, lengths, identities */
  int64_t i;
  double d;
  bool b;
  const void *ptr;
  int dim;               /* KN__G_SYM_MIN: the dim */
  /* text */
  char *code;            /* the guard's source text */
  char *comment;         /* "<user line>  # file:line in fn" or NULL */
} kn__guard;

typedef struct kn__guards {
  int n, cap;
  kn__guard *g;
  int ntensors;
  /* symbolic sizes: symbol k is size `sym_dim[k]` of tensor slot sym_slot[k];
  ** an int argument's symbol has sym_slot[k] = -1 and is specialised to its
  ** hint sym_hint[k] (its KN__G_INT guard holds it there) */
  int nsyms;
  int *sym_slot, *sym_dim;
  int64_t *sym_hint;
  kn__shape_env *env;    /* borrowed (owned by the entry) */
  int nshape;            /* number of shape-env guards (dead ones included) */
  char **shape_code;     /* their text in source terms */
  char **shape_comment;  /* "<user line>  # file:line in fn" of each, or NULL */
} kn__guards;

void kn__guards_init(kn__guards *gs);
void kn__guards_fini(kn__guards *gs);
/* Append a guard (copied; strings owned by gs afterwards). */
kn_status kn__guards_add(kn__guards *gs, const kn__guard *g);
/* The fast check: true when every guard passes. */
bool kn__guards_check(const kn__guards *gs, const kn_value *args, int nargs);
/* Failure reasons (slow path): the first failing check (verbose: every
** failing check), joined by '\n'. Owned string; "" never returned (a
** non-empty fallback names the guard). NULL when all guards pass. */
char *kn__guards_reason(const kn__guards *gs, const kn_value *args, int nargs, bool verbose);
/* The `guards` artifact / dynamo_cpp_guards_str text (tree form). Owned. */
char *kn__guards_dump(const kn__guards *gs);
/* Number of guards (for compilation_metrics guard_count), and of the live
** shape-env guards among them (shape_env_guard_count); dead shape guards
** (implied by a later one, see dynamic/sym.h) are not counted. */
int kn__guards_count(const kn__guards *gs);
int kn__guards_nshape_live(const kn__guards *gs);
/* Is shape guard i (0 <= i < nshape) live? */
bool kn__guards_shape_live(const kn__guards *gs, int i);

/* ---- segments and cache entries --------------------------------------------- */
typedef enum kn__brk {
  KN__BRK_NONE = 0,   /* a leaf: the function returned */
  KN__BRK_ITEM,       /* kn_item: answer = the value */
  KN__BRK_BOOL,       /* kn_is_true: answer = 0/1 */
  KN__BRK_EXPLICIT,   /* kn_graph_break: no answer */
  KN__BRK_PRINT,      /* kn_print: print the value, no answer */
  KN__BRK_UNSUPPORTED, /* an op that cannot be captured: run it eagerly */
  KN__BRK_AUTOGRAD,   /* kn_backward / kn_autograd_grad: run on the real values */
  KN__BRK_REQUIRES_GRAD, /* kn_set_requires_grad on a traced value */
  KN__BRK_HOST        /* kn_host_read: hand the value to a C callback */
} kn__brk;

/* What a KN__BRK_AUTOGRAD break runs, on value-table slots. */
#define KN__AG_MAX 8
typedef struct kn__agcall {
  int n, m;                 /* m = 0: kn_backward (gradients go to .grad) */
  int out_slot[KN__AG_MAX];
  int gout_slot[KN__AG_MAX]; /* -1: implicit */
  int in_slot[KN__AG_MAX];
  int res_slot[KN__AG_MAX]; /* kn_autograd_grad's results */
  bool retain_graph, create_graph, allow_unused;
} kn__agcall;

/* The shape of a returned value: tensors refer to the value table. */
typedef struct kn__rspec {
  kn_value_kind kind;
  int slot;               /* tensors: value-table index */
  kn_value konst;         /* scalars: the constant */
  int n;
  struct kn__rspec *items;
} kn__rspec;

typedef struct kn__segment kn__segment;
typedef struct kn__child {
  double answer;
  kn__segment *seg;
} kn__child;

struct kn__segment {
  kn_graph_module *gm;    /* owns the graph */
  kn_compiled_graph cg;   /* the backend's callable */
  int nin, nout;
  int *in_slot;           /* value-table index of each input */
  int *out_slot;          /* value-table index of each output */
  kn_compile_id cid;
  /* the grad mode the segment starts in (its graph runs and was compiled in
  ** it; nodes keep their own) and the one the C code had when it ended:
  ** set after the segment runs, so a break's action and the caller see it */
  bool grad_in, grad_out;
  /* what ends the segment */
  kn__brk brk;
  int brk_slot;           /* value-table index of the queried value */
  /* KN__BRK_UNSUPPORTED: the op run eagerly after this segment; its answer
  ** is the output's size(0), its output goes to brk_out_slot */
  const kn__opdef *brk_op;
  int brk_nargs;
  kn__arg brk_args[KN__MAX_ARGS]; /* non-tensor arguments by value */
  int brk_arg_slot[KN__MAX_ARGS]; /* tensor arguments: value-table index, else -1 */
  int brk_out_slot;
  kn__agcall *ag;         /* KN__BRK_AUTOGRAD (owned) */
  bool brk_flag;          /* KN__BRK_REQUIRES_GRAD: the flag */
  void (*host_fn)(double value, void *ud); /* KN__BRK_HOST */
  void *host_ud;
  int nchild, capchild;
  kn__child *child;
  /* leaf */
  kn__rspec *result;
};

typedef struct kn__entry {
  struct kn__entry *next;
  kn__guards guards;
  kn__shape_env *env;     /* owned */
  kn__shape_env **branch_envs; /* owned: envs of branches traced later */
  int nbranch_envs;
  /* guards of branches traced later whose trace added shape guards: all of
  ** them are checked at the entry (kn__entry_check) */
  kn__guards *branch_guards; /* owned */
  int nbranch_guards;
  kn__segment *root;
  int nslots;             /* value-table size (grows with branches) */
  int nroot_inputs;       /* root inputs = the first slots */
  kn__src *root_src;      /* [nroot_inputs] */
  /* lifted inputs (lift.c): value-table slot and source of each, read at
  ** the start of every run (branches traced later append theirs) */
  int ncap;
  int *cap_slot;
  kn__src *cap_src;
  kn_compile_id cid;
} kn__entry;

void kn__segment_free(kn__segment *s);
void kn__entry_free(kn__entry *e);
/* True when the entry's guards and the guards of every branch traced into
** it later pass (a branch relied on them, so a cached call must not replay
** it otherwise). */
bool kn__entry_check(const kn__entry *e, const kn_value *args, int nargs);
/* The failure reasons of the entry (its own guards first, then its
** branches'); owned, NULL when everything passes. */
char *kn__entry_reason(const kn__entry *e, const kn_value *args, int nargs, bool verbose);

/* ---- frames (compile ids per compiled function / resume point) ------------- */
typedef struct kn__frame {
  int64_t frame_id;        /* -1 until the first compile */
  int64_t ncompiles;       /* next frame_compile_id */
  char *name;              /* "example_fn" or "resume_in_example_fn_at_12" */
  char *file;
  int line;
} kn__frame;

/* ---- the compiled function ----------------------------------------------------- */
/* Threads (see docs/ARCHITECTURE.md, "Threads"). fn, ud, tfn, nargs and the
** arg names are read-only after creation; opts too, except that kn_export
** swaps it for its trace under compile_lock (the hit path never reads it).
** Two locks:
**   compile_lock  serialises everything that changes the cache: tracing,
**                 recompile decisions, ncompiles/limit_hit/last_reason, the
**                 frame and resume/automatic-dynamic state, kn_export;
**   entries_lock  a writer-preferring rwlock over the entry list and the
**                 entries' segment trees: calls take it shared for the guard
**                 check and the replay; it is taken exclusive (with
**                 compile_lock held) to link an entry, trace a branch into
**                 an entry, drop entries, and move a hit to the front.
** Lock order: compile_lock, then entries_lock. `gen` counts changes of the
** entry list (written with both locks held), `epoch` is the kn_reset
** generation the state belongs to (stale state is forgotten at the next
** call). */
struct kn_compiled {
  kn_fn fn;
  void *ud;
  void (*tfn)(void);      /* tensor form, or NULL */
  bool tconst;            /* its parameters are const kn_tensor * */
  int nargs;              /* -1: any */
  kn_compile_options opts;
  char **arg_names;       /* owned copies (NULL entries = default names) */
  int narg_names;
  kn_compile_global *globals; /* owned copy (names owned), opts.globals NULL */
  int nglobals;
  pthread_mutex_t compile_lock;
  pthread_rwlock_t entries_lock;
  bool locks_init;        /* the two locks were initialised */
  bool linked;            /* in the list of live compiled functions */
  /* under entries_lock */
  kn__entry *entries;     /* most recently used first */
  int nentries;
  bool skip;              /* drop_cache_on_limit: every call runs eagerly */
  uint64_t gen;
  /* under compile_lock (frame.name, .file and .line are read-only) */
  kn__frame frame;
  int ncompiles;          /* entries + branches, for the cache limit */
  bool limit_hit;         /* the warning was printed: run new inputs eagerly */
  char *last_reason;
  kn__hashmap *resume;    /* break site -> kn__frame* */
  /* automatic dynamic: per tensor source expr, sizes seen at the first compile */
  kn__hashmap *dyn_state; /* source expr -> struct kn__dynstate* */
  _Atomic unsigned epoch;
  /* under the list lock (compile.c) */
  struct kn_compiled *next_all, *prev_all; /* every live compiled function */
};

/* Default argument name of index i ("a".."z", then "arg26"...). Static or
** thread-local buffer; copy it. */
const char *kn__default_arg_name(int i, char *buf, size_t n);
/* The source expression of argument i: "L['a']". */
void kn__arg_source(const kn_compiled *f, int i, char *buf, size_t n);

/* Allocate a frame id (global counter, reset by kn_reset). */
int64_t kn__next_frame_id(void);
/* Global __compiled_fn_N counter. */
int kn__next_compiled_fn_number(void);

/* ---- tracing --------------------------------------------------------------------- */
typedef struct kn__trace kn__trace;

/* Automatic-dynamic state of one tensor source. */
typedef struct kn__dynstate {
  int ndim;
  int64_t sizes[KN_MAX_DIMS];
  uint32_t dynamic;       /* dims that changed: symbolic from now on */
  /* an int argument: its last value, and whether it changed (value or type) */
  bool is_int;
  int64_t ival;
  bool int_dynamic;
} kn__dynstate;

/* Why a compile happens (a recompile): logged under `recompiles` and written
** as the recompile_reasons artifact, in the context of the first compile the
** trace really makes (a branch retrace replays known segments first). */
typedef struct kn__recompile_note {
  const char *msg;          /* the "Recompiling function ..." text */
  const char *reasons_json; /* the recompile_reasons payload */
  bool verbose;             /* msg goes to recompiles_verbose */
} kn__recompile_note;

/* Trace f on args: on success *out_entry is a new entry (not yet linked)
** and *result the call's result (real values). When `into` is an existing
** entry whose root segment tree is being extended (a different answer at a
** break), the trace replays the known segments quietly and adds a branch;
** *out_entry is then NULL. `miss` (may be NULL; its values are taken over)
** is what the cached run that missed the branch left (kn__entry_run): the
** values of the segments it ran, and the break that answered differently,
** where the replay leaves the known tree. With
** KN__TRACE_EAGER_REST (the cache limit was reached) nothing is traced or
** compiled there: the rest of the function runs eagerly on the real values
** and `into` is left as it was (the known segments' effects happened once,
** in the cached run). `note` (may be NULL) says why this is a recompile. */
#define KN__TRACE_EAGER_REST 1 /* finish this call eagerly from the missed break */
#define KN__TRACE_EXPORT 2     /* kn_export: a tensor reached through a pointer is an error */
typedef struct kn__branch_miss kn__branch_miss;
kn_status kn__trace_call(kn_compiled *f, const kn_value *args, int nargs, kn__entry *into,
                         kn__branch_miss *miss, int flags, const kn__recompile_note *note,
                         kn__entry **out_entry, kn_value *result);

/* Run segment s's eager op (KN__BRK_UNSUPPORTED) on the value table: stores
** its output (owned by vals) and returns the answer (its size(0)). */
kn_status kn__segment_run_op(const kn__segment *s, kn_tensor **vals, double *ans);

/* Run the action of a break that acts instead of answering
** (KN__BRK_AUTOGRAD / REQUIRES_GRAD / HOST) on the value table. */
kn_status kn__segment_run_action(const kn__segment *s, kn_tensor **vals);

/* Run an entry whose guards passed: returns KN_OK with *result, or
** KN__MISS_BRANCH when a break's answer differs. Then, when `bm` is not
** NULL, it receives the value table so far (e->nslots entries, each an
** owned reference or NULL; kn__values_free): the trace that adds the branch
** reuses these values instead of running the known segments (and their
** effects: backward, prints) again; and the break that answered
** differently. */
#define KN__MISS_BRANCH ((kn_status)1)
struct kn__branch_miss {
  kn_tensor **vals;
  int nvals; /* entries of vals: the entry's slot count when it ran (other
             ** threads' branches may add slots to the entry later) */
  const kn__segment *seg;
  double answer;
};
kn_status kn__entry_run(kn_compiled *f, kn__entry *e, const kn_value *args, int nargs,
                        kn_value *result, kn__branch_miss *bm);
/* The recompile reason of a branch miss (owned). */
char *kn__branch_miss_reason(const kn__branch_miss *bm);
void kn__values_free(kn_tensor **vals, int n);

/* Call the user function eagerly (fallback), result owned by the caller. */
kn_status kn__call_eager(kn_compiled *f, const kn_value *args, int nargs, kn_value *result);
/* Invoke the user function (the tensor form is unpacked). Runs inside an
** autorelease scope; the result's tensors are retained (owned by caller). */
kn_status kn__invoke_user(kn_compiled *f, const kn_value *args, int nargs, kn_value *result);
/* Depth of the backtrace inside kn__invoke_user's caller frame (set while
** the user function runs under tracing). */
int kn__user_base_depth(void);

/* ---- backends ---------------------------------------------------------------------- */
/* Compile gm with f's backend into *out; example inputs are the graph's
** fake inputs, reals the real values of its placeholders on this first call
** (NULL where unknown, or NULL): a graph reading parameters of a model
** under DDP is split at its bucket boundaries first (ddp_optimizer.h). On
** failure the error is set. */
kn_status kn__backend_compile(kn_compiled *f, kn_graph_module *gm, kn_tensor *const *examples,
                              kn_tensor *const *reals, int n, kn_compiled_graph *out);
/* The backend's name in logs and errors: the registered name, "CompileCounter",
** "user_backend". */
const char *kn__backend_name(const kn_compiled *f);
/* Resolve kn_compile's options: a named backend (NULL = "eager") becomes its
** registered function and ud, and o->backend the registry's copy of the name
** (valid for the life of the process); with backend_fn set, o->backend
** becomes NULL. KN_EINVAL listing the registered names when unknown. */
kn_status kn__backend_resolve(kn_compile_options *o);
/* Check o->mode (NULL = "default"; "reduce-overhead") and point it at a
** static copy of its name. KN_EINVAL listing the modes for another name. */
kn_status kn__mode_resolve(kn_compile_options *o);

/* The error type a failed compile reports (kiln's status name such as
** "shape_error" or "unsupported", or "BackendCompilerFailed" for a backend's
** failure) and, in *body, msg without the type's own prefix. */
const char *kn__exc_type(kn_status st, const char *msg, const char **body);

/* ---- misc --------------------------------------------------------------------------- */
/* The global graph-break dedup set (reset by kn_reset). Returns true the first
** time a (file, line) is seen. */
bool kn__graph_break_first_at(const char *file, int line);
void kn__dynamo_reset_globals(void);
/* kn_explain's collector (explain.c): a graph break seen by the trace of
** this thread (reason, user stack outermost first); a no-op unless
** kn_explain is tracing on this thread. */
void kn__explain_note_break(const char *reason, const char *op, const kn__srcframe *fr, int n);

#endif
