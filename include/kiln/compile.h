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
** Ownership: arguments are borrowed. Results are new references (tensor
** results are also recorded in the open autorelease scope, like op results).
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
** missing. Inside a traced call this returns the traced stand-in. */
KN_API kn_tensor *kn_module_get(kn_module *m, const char *path);

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

typedef struct kn_compile_options {
  const char *backend;       /* "eager" (NULL = "eager") */
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
} kn_compile_options;

typedef struct kn_compiled kn_compiled;

/* Compile fn (general form) taking nargs arguments (-1: any number). name,
** file and line identify it in logs and traces (KN_COMPILE_FN fills them).
** opts may be NULL. Owned: kn_compiled_free. NULL on bad options. */
KN_API kn_compiled *kn_compile_fn(kn_fn fn, void *ud, int nargs, const char *name,
                                  const char *file, int line, const kn_compile_options *opts);
/* The tensor form: fn is kn_tensor *(*)(kn_tensor *, ...) with nargs (1..4)
** tensor arguments. */
KN_API kn_compiled *kn_compile_tensor_fn(void (*fn)(void), int nargs, const char *name,
                                         const char *file, int line,
                                         const kn_compile_options *opts);
KN_API void kn_compiled_free(kn_compiled *f);

/* Call: args borrowed; *out receives the result (kn_value_release it). On
** an error *out is none and nothing leaks. */
KN_API kn_status kn_call(kn_compiled *f, const kn_value *args, int nargs, kn_value *out);
/* Tensors in, tensor out: a new reference (recorded in the open scope), or
** NULL with kn_last_error(). */
KN_API kn_tensor *kn_call_tensors(kn_compiled *f, kn_tensor *const *args, int nargs);
#define kn_call_t(f, ...)                                                      \
  kn_call_tensors((f), (kn_tensor *const[]){__VA_ARGS__},                      \
                  (int)(sizeof((kn_tensor *[]){__VA_ARGS__}) / sizeof(kn_tensor *)))

/* KN_COMPILE(fn, opts): fn is either a tensor function with 1-4 tensor
** arguments or a kn_fn (general form, any number of arguments). The
** function's name and source file are recorded; its line is found in the
** file when readable (else the line of this macro). */
#define KN__TFN(n) kn_tensor *(*)(KN__TARGS##n)
#define KN__TARGS1 kn_tensor *
#define KN__TARGS2 kn_tensor *, kn_tensor *
#define KN__TARGS3 kn_tensor *, kn_tensor *, kn_tensor *
#define KN__TARGS4 kn_tensor *, kn_tensor *, kn_tensor *, kn_tensor *
#define KN__ARITY(fn)                                                          \
  _Generic(&(fn), KN__TFN(1): 1, KN__TFN(2): 2, KN__TFN(3): 3, KN__TFN(4): 4, default: 0)
#define KN_COMPILE(fn, opts)                                                   \
  (KN__ARITY(fn) ? kn_compile_tensor_fn((void (*)(void))(fn), KN__ARITY(fn), #fn, __FILE__, \
                                        __LINE__, (opts))                      \
                 : kn_compile_fn((kn_fn)(void (*)(void))(fn), NULL, -1, #fn, __FILE__, \
                                 __LINE__, (opts)))

/* Forget every compiled entry of every compiled function, the frame and
** graph counters, automatic-dynamic state and deduplication state. */
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

/* ---- export --------------------------------------------------------------------- */
/* Trace fn once on args (no guards, no cache, no graph breaks allowed) and
** return the graph module (owned; kn_graph_module_free). NULL with
** kn_last_error on a break or an error. */
KN_API kn_graph_module *kn_export(kn_compiled *f, const kn_value *args, int nargs);

#ifdef __cplusplus
}
#endif
#endif
