/*
** dynamo/tracer.h: the state of one trace (internal to tracer.c, fakify.c,
** breaks.c and segments.c).
**
** A trace runs the user function once under the tracing mode. Each fake
** tensor carries a binding (its mode_data): the segment and graph value that
** produce it, and its value-table slot once it has one. Slots: the root
** inputs first (one per distinct input tensor), then values carried across
** graph breaks and returned values, numbered in the order they get one.
*/
#ifndef KN_DYNAMO_TRACER_H
#define KN_DYNAMO_TRACER_H

#include "dynamo/dynamo.h"
#include "dynamo/frame.h"
#include "ops/opdef.h"
#include "tensor/tensor.h"

typedef struct kn__tbind {
  kn__trace *tr;
  int seg;
  kn__gnode *node;
  int idx;
  int slot; /* -1 until the value has a slot */
} kn__tbind;

/* One segment being traced. */
typedef struct kn__tseg {
  kn__graph *g;           /* owned until handed to a segment */
  kn__fc fc;              /* its frame compile */
  bool quiet;             /* replaying a known segment */
  bool grad_in;           /* the grad mode when it started */
  kn__segment *known;     /* quiet: the existing segment */
  int nstack;             /* ___stackN counter */
  struct { kn_tensor *real; kn__gnode *node; } consts[16];
  int nconsts;
  int *in_slot;           /* slot of each placeholder, in order */
  int nin, capin;
  int *out_slot;          /* slots produced here, in order */
  kn__gref *out_ref;
  int nout, capout;
} kn__tseg;

typedef struct kn__subst {
  const kn_module *m;
  char *path;
  kn_tensor *fake;
} kn__subst;

/* A real tensor and the fake standing for it (arguments, lifted tensors). */
typedef struct kn__known {
  kn_tensor *real, *fake; /* borrowed: the trace holds both */
} kn__known;

/* A tensor lifted as a graph input (lift.c): its value-table slot and its
** source (owned). fresh: lifted by a segment traced now, not a replay. */
typedef struct kn__lifted {
  int slot;
  kn__src src;
  bool fresh;
} kn__lifted;

/* A module captured through a pointer: the source it is named by. */
typedef struct kn__capmod {
  const kn_module *m;
  char expr[40];
} kn__capmod;

/* Where a shape guard came from (guardsrc.c). Frames outermost first;
** their strings are borrowed from the source-location cache. */
typedef struct kn__gsrc {
  char op[64];            /* "kiln.ops.matmul", "kn_size", a backend's name, or "" */
  kn__srcframe *user;     /* the user's stack (owned) */
  int nuser;
  kn__srcframe *fw;       /* kiln's frames that added it (owned) */
  int nfw;
} kn__gsrc;

struct kn__trace {
  kn__mode mode;
  kn_compiled *f;
  const kn_value *args;   /* the real arguments */
  int nargs;
  kn_value *fargs;        /* the arguments with fakes (deep copy) */
  kn__shape_env *env;     /* owned until handed to the entry */
  bool export_mode;       /* kn_export: breaks are errors */
  bool exporting;         /* KN__TRACE_EXPORT: nothing can be lifted */
  /* segments of this trace */
  kn__tseg *segs;
  int nseg, capseg;
  kn__segment *cur_known; /* quiet replay position in an existing tree */
  kn__entry *into;        /* extending this entry's tree, or NULL */
  kn__segment *parent;    /* the segment whose break led to the current one */
  double parent_answer;
  kn__segment *root_seg;  /* the first segment (new entries) */
  /* value table while tracing: real values per slot (owned) */
  kn_tensor **slot_real;
  int nslots, capslots;
  int nroot;
  kn__src *root_src;      /* [nroot] */
  /* every fake created (one reference each, owned) */
  kn_tensor **fakes;
  int nfakes, capfakes;
  kn__subst *subst;
  int nsubst;
  /* real tensors with a stand-in, lifted inputs, captured modules (lift.c) */
  kn__known *known;
  int nknown, capknown;
  kn__lifted *lifted;
  int nlifted, caplifted;
  kn__capmod *capmods;
  int ncapmods;
  int ncaptensors;
  /* guards */
  kn__guards guards;
  int *root_first_line;   /* per root slot: node that first used it */
  kn__gnode **root_first_node;
  /* errors */
  kn_status err;
  char *err_msg;          /* the first error (owned) */
  kn__srcframe err_frame;
  /* describe events */
  int describer_id, ndescribed;
  int base_depth;
  /* a graph break that must end the trace with an error (fullgraph) */
  bool stop;
  char *trace_src_last;   /* last trace_source file:line (dedup) */
  int nguards_emitted;    /* shape guards already written as guard_added_fast */
  kn__gsrc *gsrc;         /* per shape-env guard index: where it came from */
  int ngsrc, capgsrc;
  const char *cur_op;     /* the op being traced (its name), or NULL */
  bool in_backend;        /* a backend is compiling a segment */
  int nint_syms;          /* int arguments given a symbol */
  bool guards_done;       /* comments and size lower bounds added */
  /* adding a branch: the value table of the cached run that missed it
  ** (owned); quiet segments and breaks take their values from it instead of
  ** running again */
  kn_tensor **partial;
  int npartial;
  const kn__segment *miss_seg; /* the break whose answer missed (replay ends there) */
  bool eager_rest;        /* KN__TRACE_EAGER_REST: past miss_seg, run eagerly */
  bool eager;             /* ... and now past it: ops run on the real values */
  const kn__recompile_note *note; /* for the first segment really traced */
  const char *recompile_msg; /* logged inside the first frame's context */
  bool recompile_verbose;
};

/* The trace running on this thread (NULL outside tracing). */
kn__trace *kn__trace_current(void);

/* Bindings. */
kn__tbind *kn__tbind_of(const kn__trace *tr, const kn_tensor *t);
kn_status kn__tbind_set(kn__trace *tr, kn_tensor *t, int seg, kn__gnode *node, int idx, int slot);
/* Keep a reference to a fake created by the trace. */
kn_status kn__trace_keep(kn__trace *tr, kn_tensor *t);
/* A new slot with its real value (reference taken). Returns the index or -1. */
int kn__trace_new_slot(kn__trace *tr, kn_tensor *real);
/* The graph value of t in the current segment: its node, a placeholder for a
** value carried from an earlier segment, or a get_attr for a real tensor. */
kn_status kn__trace_value(kn__trace *tr, kn_tensor *t, kn__gref *out);

/* Fakification of the root inputs (fakify.c): fills tr->fargs, the root
** placeholders and slots, the input guards and the describe_* records. */
kn_status kn__trace_fakify(kn__trace *tr);
/* The fake for real tensor t at source src (fakify.c): same dtype and
** geometry, symbolic sizes where dynamic (never for a parameter: param),
** always a leaf. Owned, or NULL with the error set. */
kn_tensor *kn__trace_make_fake(kn__trace *tr, kn_tensor *t, const char *src, int slot,
                               bool param, uint32_t *dyn_size, uint32_t *dyn_stride);
/* The TENSOR_MATCH guard's text: "check_tensor(<expr>, Tensor, ...)". */
void kn__tensor_guard_code(const char *expr, const kn_tensor *t, uint32_t dyn_size,
                           uint32_t dyn_stride, char *code, size_t n);
/* A guard's comment for a user frame: "<line>  # file:line in fn". Owned,
** NULL without a location. */
char *kn__trace_guard_comment(const kn__srcframe *fr);

/* ---- lifted inputs (lift.c) ----
** A real tensor met while tracing that requires grad or belongs to a module
** (a parameter or buffer), or that kn_module_get reached through a module
** that is no argument, becomes a graph input read from its source on every
** call, with guards on it (and on the module's identity). Other real
** tensors stay constants. */
/* fake stands for real in this trace. */
kn_status kn__trace_know(kn__trace *tr, kn_tensor *real, kn_tensor *fake);
/* Lift real tensor t; m and path: how kn_module_get reached it (NULL: met
** as a value). *fake: its stand-in (borrowed), or NULL when t stays a
** constant. An error stops the trace with a message naming t and the
** user's line. */
kn_status kn__trace_lift(kn__trace *tr, kn_tensor *t, kn_module *m, const char *path,
                         kn_tensor **fake);
/* Lift the real tensor inputs of an op call that need it, replacing them in
** c by their stand-ins; a list argument is copied into lists[i] (the caller
** frees each with free()). */
kn_status kn__trace_lift_call(kn__trace *tr, kn__call *c, kn_tensor **lists[KN__MAX_ARGS]);
/* kn_module_get(m, path) on a module that is no argument (fakify.c's
** substitution hook falls back to it). */
kn_status kn__trace_module_subst(kn__trace *tr, kn_module *m, const char *path,
                                 kn_tensor **out);
/* The source text of a lifted slot, or NULL. */
const char *kn__trace_lifted_source(const kn__trace *tr, int slot);
/* Did a segment traced now (not a replay) lift anything? */
bool kn__trace_lifted_fresh(const kn__trace *tr);
/* Move the freshly lifted inputs' slots and sources into entry e. */
kn_status kn__trace_lifted_to_entry(kn__trace *tr, kn__entry *e);
/* Free the trace's lifting state. */
void kn__trace_lift_fini(kn__trace *tr);

/* Guards that depend on the traced graph (first-use comments, shape env);
** called after the trace. */
kn_status kn__trace_finish_guards(kn__trace *tr);
/* Describe one fake input (describe_storage/tensor/source). */
void kn__trace_describe(kn__trace *tr, const kn_tensor *real, const char *source, bool is_param);

/* Segments (segments.c). Start a segment (frame compile begins). */
/* Start a segment of frame fr; the first one that is not a quiet replay
** takes the trace's recompile note. */
kn_status kn__tseg_start(kn__trace *tr, kn__frame *fr);
/* Finish the current segment with outputs = the given slots' values in the
** current graph; makes a kn__segment (compiled), runs it on the real slot
** values, stores the real outputs. brk/brk_slot describe the break. */
kn_status kn__tseg_finish(kn__trace *tr, kn__brk brk, int brk_slot, kn__segment **out);
/* The user stack of the current op call (outermost first) and the kiln API
** function it called. */
int kn__trace_user_stack(kn__trace *tr, kn__srcframe *out, int cap, const char **api);
/* Stop the trace on something it cannot capture: the trace's first error
** becomes msg (copied) at user frame at (NULL: unknown), and the error is
** raised as KN_EUNSUPPORTED, which this returns. */
kn_status kn__trace_refuse(kn__trace *tr, const kn__srcframe *at, const char *msg);

/* Shape guard provenance (guardsrc.c). Install (on) or remove the shape
** env's guard hook that notes where each guard came from. */
void kn__gsrc_install(kn__trace *tr, bool on);
void kn__gsrc_fini(kn__gsrc *g);
/* The provenance of env guard `index`, or NULL (borrowed). */
const kn__gsrc *kn__gsrc_of(const kn__trace *tr, int index);
/* "user line  # file.c:12 in fn" for the guard dump (owned), or NULL. */
char *kn__gsrc_comment(const kn__trace *tr, int index);
/* Log "eval <expr> [guard added] at ..." and write its guard_added_fast
** record with the user and framework stacks. */
void kn__gsrc_emit(kn__trace *tr, int index, const char *expr);

/* ---- internal plumbing between tracer.c, fakify.c, segments.c, breaks.c ---- */
/* The trace running on this thread is tr (NULL: none). */
void kn__trace_set_current(kn__trace *tr);
/* Set up tr->mode (the dispatcher mode that records nodes). */
void kn__trace_mode_init(kn__trace *tr);
/* Free the fake argument copies and module substitutions. */
void kn__trace_free_fargs(kn__trace *tr);
/* The slot of traced value t; a value of the current segment gets a new slot
** (an output of the segment); real tensors become graph constants. */
kn_status kn__trace_slot_of(kn__trace *tr, kn_tensor *t, int *slot);
/* Give slots to the values of the current segment user code still holds. */
kn_status kn__trace_carry_live(kn__trace *tr);
/* A call of a data-dependent op (KN_OPF_DATA_DEP) on traced values: a graph
** break; the op runs eagerly on the real values and *out gets the fake that
** stands for its output in the next segment. */
kn_status kn__trace_data_dep_break(kn__trace *tr, const kn__call *c, kn__outs *out);
/* Quiet replay with a partial table: slot_real[slots[j]] = partial value. */
void kn__trace_take_partial(kn__trace *tr, const int *slots, int n);
/* Capture kn_set_requires_grad(t, true) on t's node when t is a new leaf
** of the current segment no op has used yet; false otherwise. */
bool kn__trace_capture_requires_grad(kn__trace *tr, kn_tensor *t);
/* The rest of a call run eagerly (eager_rest.c). The real value a stand-in
** of this trace is bound to (its slot's value), t itself for a real tensor;
** borrowed; NULL with the error set when the stand-in has no value. */
kn_tensor *kn__trace_real_of(kn__trace *tr, kn_tensor *t);
/* Run op call c on the real values (tracing mode `self`). */
kn_status kn__trace_eager_call(kn__trace *tr, kn__mode *self, kn__call *c, kn__outs *out);
/* kn_backward / kn_autograd_grad on the real values; gradients in c->out_grads. */
kn_status kn__trace_eager_autograd(kn__trace *tr, const kn__autograd_call *c);
/* Replace the stand-ins in v (owned: the user function's result) by their
** real values, in place. */
kn_status kn__trace_eager_result(kn__trace *tr, kn_value *v);
/* Write the guard dump of segment s's frame. */
void kn__trace_guard_dump(kn__trace *tr, kn__tseg *s);
/* Record that the next placeholder of s reads slot `slot`. */
kn_status kn__tseg_add_input(kn__tseg *s, int slot);
/* The trace_call record of one traced call. */
void kn__trace_log_call(kn__trace *tr, const char *node_name, const kn__srcframe *fr, int depth,
                        const char *api);

#endif
