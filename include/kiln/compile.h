/*
** kiln/compile.h: the capture frontend ("dynamo"): turn a C function that
** uses kiln ops into a guarded, cached compiled function.
**
**   static kn_tensor *example_fn(kn_tensor *a) { ... kiln ops ... }
**   kn_compiled *f = KN_COMPILE(example_fn, NULL);   // options: NULL = defaults
**   kn_tensor *y = kn_call_t(f, x);                  // new reference, like an op
**   kn_compiled_free(f);
**
** On a call whose inputs no cached entry accepts, the function is traced once
** with fake tensors standing for its tensor inputs (op calls become graph
** nodes, C control flow runs natively on the concrete scalars), guards are
** built for everything the trace depended on, the backend compiles the graph
** and the entry is cached. Later calls check the guards (a flat array, in C)
** and run the cached program. See docs/DYNAMO.md.
**
** PURITY RULE: a compiled function must do its work through kiln ops. Plain C
** side effects (printf, writing globals, reading tensor data through
** kn_data) happen only while tracing, not on cached calls. Use kn_print for
** printing and kn_item / kn_is_true for data-dependent decisions: they are
** traced (they end a graph segment; see "graph breaks" in docs/DYNAMO.md).
**
** Ownership: arguments are borrowed. One rule, as everywhere in kiln: a
** tensor returned as kn_tensor * (kn_call_t, kn_call_tensors) is a new
** reference recorded in the open autorelease scope, like an op's result; a
** result written to a kn_value (kn_call's *out) is owned by the caller,
** who releases it with kn_value_release (it is not in any scope).
** A user function runs inside its own autorelease scope: create temporaries
** freely and return results WITHOUT retaining them.
*/
#ifndef KILN_COMPILE_H
#define KILN_COMPILE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- values ------------------------------------------------------------ */
typedef enum kn_value_kind {
  KN_VNONE = 0,
  KN_VTENSOR,
  KN_VINT,
  KN_VDOUBLE,
  KN_VBOOL,
  KN_VLIST,
  KN_VTUPLE,
  KN_VMODULE
} kn_value_kind;

typedef struct kn_module kn_module;

/* A kiln value. Lists/tuples point at `n` items (borrowed when passed as an
** argument; see kn_tuple for returning several values). */
typedef struct kn_value {
  kn_value_kind kind;
  int n;
  union {
    kn_tensor *t;
    int64_t i;
    double d;
    bool b;
    const struct kn_value *items;
    kn_module *m;
  } u;
} kn_value;

static inline kn_value kn_vnone(void) { kn_value v = {KN_VNONE, 0, {.i = 0}}; return v; }
static inline kn_value kn_vtensor(kn_tensor *t) { kn_value v = {KN_VTENSOR, 0, {.t = t}}; return v; }
static inline kn_value kn_vint(int64_t i) { kn_value v = {KN_VINT, 0, {.i = i}}; return v; }
static inline kn_value kn_vdouble(double d) { kn_value v = {KN_VDOUBLE, 0, {.d = d}}; return v; }
static inline kn_value kn_vbool(bool b) { kn_value v = {KN_VBOOL, 0, {.b = b}}; return v; }
static inline kn_value kn_vlist(int n, const kn_value *items) {
  kn_value v = {KN_VLIST, n, {.items = items}}; return v;
}
static inline kn_value kn_vmodule(kn_module *m) { kn_value v = {KN_VMODULE, 0, {.m = m}}; return v; }
/* A tuple result built inside a user function: copies items (the tensors
** are borrowed, as for a single tensor result). The copy lives until the
** compiled call returns. A negative n, NULL items with n > 0, or OOM give
** none, with kn_last_error. */
KN_API kn_value kn_tuple(int n, const kn_value *items);
/* Release what a compiled call returned: tensor references and tuple
** storage. */
KN_API void kn_value_release(kn_value v);

/* ---- modules: named trees of parameters, buffers and submodules -------- */
/* A new empty module; owned (kn_module_free frees children too). */
KN_API kn_module *kn_module_new(void);
KN_API void kn_module_free(kn_module *m);
/* Add a parameter/buffer (retained) or a child (owned by m from now on). */
KN_API kn_status kn_module_add_param(kn_module *m, const char *name, kn_tensor *t);
KN_API kn_status kn_module_add_buffer(kn_module *m, const char *name, kn_tensor *t);
KN_API kn_status kn_module_add_child(kn_module *m, const char *name, kn_module *child);
/* Look up a tensor by dotted path ("layers.0.weight"); borrowed, NULL if
** missing. Inside a traced call this returns the traced stand-in (for any
** module: one passed as an argument, or one reached through a pointer,
** whose tensors are then lifted as graph inputs; see docs/DYNAMO.md,
** "Modules and tensors reached through pointers"). */
KN_API kn_tensor *kn_module_get(kn_module *m, const char *path);
/* The child module at a name or dotted path ("encoder", "encoder.layers.0",
** as PyTorch's get_submodule). Borrowed: owned by m's tree, valid until m
** is freed (do not kn_module_free it). NULL with kn_last_error() naming the
** missing part and the children that exist, or a tensor named instead of a
** module. */
KN_API kn_module *kn_module_child(kn_module *m, const char *path);
/* Move every parameter and buffer of m's tree to device dev (KN_CPU or
** KN_CUDA), as PyTorch's module.to(device): each tensor not already there is
** replaced by a copy on dev, a leaf that requires grad when the old one did
** (gradients are not carried over; make optimizers after the move). The
** module keeps the new tensors; references the caller holds to the old ones
** stay valid and keep the old data. On an error (no GPU, out of memory) the
** tensors moved so far stay moved and the error names the first that was
** not. */
KN_API kn_status kn_module_to_device(kn_module *m, kn_device dev);

/* ---- user functions ------------------------------------------------------ */
/* The general form: args[0..nargs) in, one value out. */
typedef kn_value (*kn_fn)(const kn_value *args, int nargs, void *ud);

/* ---- backends ------------------------------------------------------------ */
typedef struct kn_graph_module kn_graph_module; /* kiln/graph.h */

/* What a backend returns: a callable that runs the graph on real tensors.
** run fills outputs[0..nout) the way kiln ops return tensors: new references
** recorded in the open autorelease scope (kiln runs it inside one), e.g. the
** results of kn_graph_module_call or of kiln ops. */
typedef struct kn_compiled_graph {
  kn_status (*run)(void *state, kn_tensor *const *inputs, int ninputs,
                   kn_tensor **outputs, int noutputs);
  void *state;
  void (*free_state)(void *state); /* may be NULL */
} kn_compiled_graph;

/* A user backend: receives the graph module (borrowed: it lives as long as
** the cache entry, so the callable may keep and run it) and the example
** inputs (fake tensors: metadata only), and returns a callable in *out.
** Returning an error makes kiln log "WON'T CONVERT" and run eagerly
** (suppress_errors) or fail the call. */
typedef kn_status (*kn_backend_fn)(kn_graph_module *gm, kn_tensor *const *example_inputs,
                                   int ninputs, void *ud, kn_compiled_graph *out);

/* The backend registry: names usable as kn_compile_options.backend.
** "eager" (the graph interpreter: each node runs through the dispatcher) is
** built in. kn_register_backend adds `name` (letters, digits, '_', '-', '.';
** copied) for fn, which receives `ud` on every compile. Registering a name
** that exists fails (KN_EINVAL, "duplicate name"); entries are never
** removed. Safe to call from any thread, also while other threads compile. */
KN_API kn_status kn_register_backend(const char *name, kn_backend_fn fn, void *ud);
/* Compile gm with the registered backend `name` ("eager", "inductor",
** "aot_eager", or one added with kn_register_backend), so that backends
** compose: a custom backend inspects or rewrites the graph it receives and
** hands it on, as PyTorch backends call compile_fx. gm and example_inputs
** are the ones the calling backend received (borrowed); *out receives the
** callable, which the calling backend returns to kiln as its own (kiln
** frees it). On an error *out is zeroed and kn_last_error() names the
** backend and its error; an unknown name lists the registered ones. */
KN_API kn_status kn_backend_compile(const char *name, kn_graph_module *gm,
                                    kn_tensor *const *example_inputs, int ninputs,
                                    kn_compiled_graph *out);
/* Registered names in registration order ("eager" first): writes up to cap
** of them into names (borrowed: valid for the life of the process) and
** returns how many are registered. names may be NULL (count only). */
KN_API int kn_list_backends(const char **names, int cap);

/* Test backend counting graphs and call nodes, as PyTorch's CompileCounter:
** frame_count += 1 per graph compiled, op_count += number of call nodes.
** Use: kn_compile_counter cc = {0}; opts.backend_fn = kn_compile_counter_backend;
** opts.backend_ud = &cc. With `inner` set (a backend name such as "eager"),
** it is CompileCounterWithBackend. */
typedef struct kn_compile_counter {
  int frame_count;
  int op_count;
  const char *inner; /* NULL = "eager" */
} kn_compile_counter;
KN_API kn_status kn_compile_counter_backend(kn_graph_module *gm, kn_tensor *const *example_inputs,
                                            int ninputs, void *ud, kn_compiled_graph *out);
KN_API void kn_compile_counter_clear(kn_compile_counter *cc);

/* ---- options --------------------------------------------------------------- */
typedef enum kn_dynamic { KN_DYNAMIC_AUTO = 0, KN_DYNAMIC_TRUE, KN_DYNAMIC_FALSE } kn_dynamic;

/* Passed to guard_fail_fn once per cache entry that rejected a call. */
typedef struct kn_guard_failure {
  const char *reason;   /* "tensor 'L['a']' size mismatch at index 0. expected 8, actual 9" */
  const char *fn_name;  /* the compiled function */
  const char *compile_id; /* "0/2": the rejected entry */
} kn_guard_failure;

/* A module or tensor the compiled function reaches through a C pointer
** instead of its arguments (a global variable, a field of the user-data
** struct), declared so that kiln reads the pointer on every call: it is
** guarded like an argument named G['name'] (a module by identity,
** `___check_obj_id(G['name'], 0x...)`; a tensor by TENSOR_MATCH), so a
** pointer set to another module recompiles, and its parameters and buffers
** are graph inputs. Undeclared pointers are followed too (their tensors
** are lifted when met), but a change of the pointer itself is invisible
** then: see docs/DYNAMO.md, "Modules and tensors reached through pointers". */
typedef struct kn_compile_global {
  const char *name;          /* letters, digits and '_'; unique; copied */
  kn_module *const *module;  /* the pointer variable holding the module, or NULL */
  kn_tensor *const *tensor;  /* or the one holding a tensor: exactly one is set */
} kn_compile_global;

typedef struct kn_compile_options {
  const char *backend;       /* a registered backend name (NULL = "inductor"; built in:
                                 "eager", "inductor" as in docs/INDUCTOR.md); an
                                 unknown name fails kn_compile with the list of
                                 registered ones (kn_register_backend) */
  kn_backend_fn backend_fn;  /* a user backend instead of a named one */
  void *backend_ud;
  kn_dynamic dynamic;        /* automatic dynamic shapes by default */
  bool fullgraph;            /* a graph break is an error naming its location */
  int cache_size_limit;      /* 0 = 8 */
  int accumulated_cache_size_limit; /* 0 = 256 */
  void (*guard_fail_fn)(const kn_guard_failure *f, void *ud);
  void *guard_fail_ud;
  bool suppress_errors;      /* compile failures run the function eagerly */
  bool drop_cache_on_limit;  /* at the cache limit, also drop the cached entries */
  /* Names of the arguments in guards and logs (NULL: "a", "b", "c", ...).
  ** With narg_names > 0, exactly that many entries are read (a NULL entry
  ** keeps the default name); with narg_names == 0 the array must end with a
  ** NULL entry. Copied by kn_compile_*. */
  const char *const *arg_names;
  int narg_names;
  /* Pointers read on every call (above). The array and names are copied;
  ** the pointer variables are borrowed: they must stay valid while the
  ** compiled function is called. */
  const kn_compile_global *globals;
  int nglobals;
  /* torch.compile's mode: NULL or "default", or "reduce-overhead": graphs
  ** whose inputs are on the GPU are captured into CUDA graphs and replayed
  ** (warm-up on the first call of each input geometry, recording on the
  ** second, replays after; outputs alias static buffers that the next call
  ** overwrites: docs/CUDA.md, "CUDA graphs"). Graphs on the CPU, or that
  ** mutate inputs or need autograd, run as in "default" (the reason goes to
  ** the perf_hints and cudagraphs logs). Another name fails kn_compile,
  ** listing the modes. Applies to every backend's callable. */
  const char *mode;
} kn_compile_options;

typedef struct kn_compiled kn_compiled;

/* Compile fn (general form) taking nargs arguments (-1: any number). name,
** file and line identify it in logs and traces (KN_COMPILE_FN fills them).
** opts may be NULL. Owned: kn_compiled_free. NULL on bad options. */
KN_API kn_compiled *kn_compile_fn(kn_fn fn, void *ud, int nargs, const char *name,
                                  const char *file, int line, const kn_compile_options *opts);
/* The tensor form: fn is kn_tensor *(*)(kn_tensor *, ...) with nargs
** (1..KN_TENSOR_FN_MAX_ARGS) tensor arguments; nargs | KN_TENSOR_FN_CONST when
** they are all const kn_tensor *. */
#define KN_TENSOR_FN_MAX_ARGS 8
#define KN_TENSOR_FN_CONST 0x100
KN_API kn_compiled *kn_compile_tensor_fn(void (*fn)(void), int nargs, const char *name,
                                         const char *file, int line,
                                         const kn_compile_options *opts);
KN_API void kn_compiled_free(kn_compiled *f);

/* Call: args borrowed; *out receives the result (kn_value_release it). On
** an error *out is none and nothing leaks. Any number of threads may call
** one compiled function at once (compiles are serialised per function);
** kn_compiled_free(f) must not overlap calls of f, and f's guard_fail_fn
** and backend callable must not call f (docs/ARCHITECTURE.md, "Threads"). */
KN_API kn_status kn_call(kn_compiled *f, const kn_value *args, int nargs, kn_value *out);
/* Tensors in, tensor out: a new reference (recorded in the open scope), or
** NULL with kn_last_error(). */
KN_API kn_tensor *kn_call_tensors(kn_compiled *f, kn_tensor *const *args, int nargs);
#define kn_call_t(f, ...)                                                      \
  kn_call_tensors((f), (kn_tensor *const[]){__VA_ARGS__},                      \
                  (int)(sizeof((kn_tensor *[]){__VA_ARGS__}) / sizeof(kn_tensor *)))

/* KN_COMPILE(fn, opts): fn is either a kn_fn (general form, any number of
** arguments) or a tensor function kn_tensor *fn(kn_tensor *a, ...) with 1 to
** 8 parameters, all kn_tensor * or all const kn_tensor *. Any other
** signature is a compile-time error (a static assertion naming these
** forms). The function's name and source file are recorded; its line is
** found in the file when readable (else the line of this macro). opts is
** NULL, a pointer, or written in place as a compound literal, whose commas
** the macro accepts:
**   KN_COMPILE(fn, &(kn_compile_options){.backend = "eager", .fullgraph = true}) */
#define KN__TP1(T) T
#define KN__TP2(T) KN__TP1(T), T
#define KN__TP3(T) KN__TP2(T), T
#define KN__TP4(T) KN__TP3(T), T
#define KN__TP5(T) KN__TP4(T), T
#define KN__TP6(T) KN__TP5(T), T
#define KN__TP7(T) KN__TP6(T), T
#define KN__TP8(T) KN__TP7(T), T
#define KN__TFN(n) kn_tensor *(*)(KN__TP##n(kn_tensor *))
#define KN__CTFN(n) kn_tensor *(*)(KN__TP##n(const kn_tensor *))
/* 1..8: tensor form; 0x101..0x108: const tensor form; -1: kn_fn; 0: neither */
#define KN__FORM(fn)                                                           \
  _Generic((fn), kn_fn: -1,                                                    \
           KN__TFN(1): 1, KN__TFN(2): 2, KN__TFN(3): 3, KN__TFN(4): 4,         \
           KN__TFN(5): 5, KN__TFN(6): 6, KN__TFN(7): 7, KN__TFN(8): 8,         \
           KN__CTFN(1): 0x101, KN__CTFN(2): 0x102, KN__CTFN(3): 0x103,         \
           KN__CTFN(4): 0x104, KN__CTFN(5): 0x105, KN__CTFN(6): 0x106,         \
           KN__CTFN(7): 0x107, KN__CTFN(8): 0x108, default: 0)
#define KN__CHECK_FORM(fn)                                                     \
  ((void)sizeof(struct {                                                       \
    _Static_assert(KN__FORM(fn) != 0,                                          \
                   "KN_COMPILE(" #fn ", ...): unsupported signature. Accepted forms: "  \
                   "kn_value fn(const kn_value *args, int nargs, void *ud), or "       \
                   "kn_tensor *fn(kn_tensor *a, ...) with 1 to 8 parameters, all "     \
                   "kn_tensor * or all const kn_tensor *");                            \
    int kn__form;                                                              \
  }))
#define KN_COMPILE(fn, ...) /* ...: opts (variadic: a compound literal has commas) */ \
  (KN__CHECK_FORM(fn),                                                         \
   KN__FORM(fn) > 0 ? kn_compile_tensor_fn((void (*)(void))(fn), KN__FORM(fn), #fn, __FILE__, \
                                           __LINE__, (__VA_ARGS__))            \
                    : kn_compile_fn((kn_fn)(void (*)(void))(fn), NULL, -1, #fn, __FILE__, \
                                    __LINE__, (__VA_ARGS__)))

/* Forget every compiled entry of every compiled function, the frame and
** graph counters, automatic-dynamic state, deduplication state and the AOT
** cache (docs/AOT.md). May run while other threads call compiled
** functions: a function busy at that moment finishes its call and forgets
** its state when its next call starts. */
KN_API void kn_reset(void);

/* ---- inside user functions ---------------------------------------------------- */
/* Name a value: the graph node producing t is called `name` ("output",
** then "output_1", ...). A no-op outside tracing. Returns t. */
KN_API kn_tensor *kn_name(kn_tensor *t, const char *name);
/* The value of a one-element tensor. Eagerly: kn_item_double. While
** tracing: a graph break; the answer is recorded and checked on every
** cached call (a different answer traces a new branch). NAN on error. */
KN_API double kn_item(kn_tensor *t);
/* A tensor used as a condition (nonzero?); traced like kn_item. */
KN_API bool kn_is_true(kn_tensor *t);
/* An explicit graph break. */
KN_API void kn_graph_break(void);
/* Print a tensor (traced: printed with the real value on every call). */
KN_API kn_status kn_print(kn_tensor *t);
/* Hand the value of a one-element tensor to C code without specialising on
** it: fn(value, ud) is called with the real value at this point of every
** call, traced or cached (a graph break with no recorded answer, so a new
** value never recompiles). For logging a loss from inside a compiled step.
** ud must stay valid as long as the compiled function is called. Eagerly:
** fn is called at once. */
KN_API kn_status kn_host_read(kn_tensor *t, void (*fn)(double value, void *ud), void *ud);

/* ---- export --------------------------------------------------------------------- */
/* Trace fn once on args (no guards, no cache, no graph breaks allowed) and
** return the graph module (owned; kn_graph_module_free). NULL with
** kn_last_error on a break or an error. */
KN_API kn_graph_module *kn_export(kn_compiled *f, const kn_value *args, int nargs);

/* ---- explain ------------------------------------------------------------------- */
/* What kn_compile makes of fn on these arguments, as torch._dynamo.explain:
** the graphs (with their ops), the graph breaks (reason and user location)
** and the guards. The function is traced as a first call would trace it,
** into a private cache entry that is then discarded: f's cache entries,
** compile counters and automatic-dynamic state are not touched, and its
** backend is not called (the graphs run on the eager backend, since graph
** breaks need the real values). The trace is logged and written to the
** structured trace like any compile. Everything below is owned by the
** kn_explanation (kn_explanation_free). */
typedef struct kn_explain_frame {
  char *file;             /* NULL when unknown (no debug info) */
  int line;
  char *func;
  char *code;             /* the source line, trimmed; NULL when unreadable */
} kn_explain_frame;

typedef struct kn_explain_break {
  char *reason;           /* "Data-dependent branching", "Call to `kn_graph_break()`" */
  int nstack;             /* user stack, outermost first: the break is at stack[nstack - 1] */
  kn_explain_frame *stack;
} kn_explain_break;

typedef struct kn_explain_graph {
  char *compile_id;       /* "0/0", "1/0": the frame and compile of the graph */
  int op_count;           /* call nodes (as kn_compile_counter counts them) */
  char **ops;             /* [op_count] their targets: "kiln.ops.mul" */
  char *code;             /* the graph as code (the graph_code form) */
} kn_explain_graph;

typedef struct kn_explanation {
  int graph_count;        /* graphs with ops, i.e. handed to a backend */
  int graph_break_count;
  int op_count;           /* over every graph */
  kn_explain_graph *graphs;  /* [graph_count] in execution order */
  kn_explain_break *breaks;  /* [graph_break_count] in execution order */
  int nguards;
  char **guards;          /* "TENSOR_MATCH: check_tensor(L['a'], ...)", "SHAPE_ENV: ..." */
} kn_explanation;

/* Explain f on args (borrowed). Owned result: kn_explanation_free. NULL with
** kn_last_error() when the trace fails (the error a call would report), on
** bad arguments, or when called while a compiled function is being traced. */
KN_API kn_explanation *kn_explain(kn_compiled *f, const kn_value *args, int nargs);
/* The tensor form: kn_explain_t(f, x, y). */
KN_API kn_explanation *kn_explain_tensors(kn_compiled *f, kn_tensor *const *args, int nargs);
#define kn_explain_t(f, ...)                                                   \
  kn_explain_tensors((f), (kn_tensor *const[]){__VA_ARGS__},                   \
                     (int)(sizeof((kn_tensor *[]){__VA_ARGS__}) / sizeof(kn_tensor *)))
/* The explanation as text ("Graph Count: 1\nGraph Break Count: 0\n..."), as
** explain()'s str() prints it. Owned: free(). NULL on out of memory. */
KN_API char *kn_explanation_str(const kn_explanation *e);
KN_API void kn_explanation_free(kn_explanation *e);

#ifdef __cplusplus
}
#endif
#endif
