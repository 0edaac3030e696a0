/*
** inductor/inductor.h: the code-generating backend "inductor" (internal).
**
** kn__inductor_compile has the shape of every backend (kn_backend_fn): it
** lowers the graph module's graph to one C translation unit (fused pointwise
** loops, reductions, extern calls of kiln's eager ops for everything else),
** compiles it with the system C compiler, loads it and returns a callable.
** See docs/INDUCTOR.md.
**
** Pieces:
**   formula.c    per-op element formulas and compute types (lowering rules)
**   decomp.c     the decomposition table (softmax, norms, losses -> core ops)
**   lower.c      the plan: a kind per node, value slots, symbolic sizes
**   reduce_lower.c reductions from the reduction table (ops/reduce_table.h)
**   sched.c      the scheduler: fusion groups, the schedule/fusion logs
**   kir.c        the kernel IR: items, memory planning, verifier (kir_print.c)
**   target.c     the targets (c, c_scalar) and KILN_INDUCTOR_TARGET
**   codegen.c    walks the IR, calling the target; the C targets' printer
**   sched_epi.c  the scheduler's epilogue pass (pointwise kernels into GEMM externs)
**   gemm.c       running a GEMM / convolution extern step with its epilogue
**   toolchain.c  the compiler (fork/exec, time limit, parallel units), loading through a descriptor
**   tu_split.c   a program as several translation units (KILN_COMPILE_JOBS)
**   codecache.c  the memory and disk caches (keys, trust rules, temporaries),
**                tiered compiles (KILN_INDUCTOR_TIERED)
**   cache_meta.c the text of the cache's .meta and .fxg files (toolchain.h)
**   backend.c    the backend entry point and the runtime of a compiled graph
**   runnable.c   fx_graph_runnable: the graph as a standalone C repro
**   phase.c      compile-phase times (chromium events, compile times, metrics)
*/
#ifndef KN_INDUCTOR_INDUCTOR_H
#define KN_INDUCTOR_INDUCTOR_H

#include <stdatomic.h>

#include "core/strbuf.h"
#include "graph/graph.h"
#include "kiln/compile.h"
#include "ops/reduce_table.h"

/* The backend (kn_backend_fn shape; ud is unused). On failure the error
** names the cause (no compiler, compiler error with its stderr, ...). */
kn_status kn__inductor_compile(kn_graph_module *gm, kn_tensor *const *example_inputs, int n,
                               void *ud, kn_compiled_graph *out);
/* Run c (a callable kn__inductor_compile returned; another backend's just
** runs), told that outputs[k] will be copied into into[k] (borrowed; NULL:
** no copy) right after the call: an output that is the root of a pointwise
** kernel whose only reader of that input is the kernel itself (element i
** for element i) is computed in into[k] and returned as it. The outputs
** are autoreleased (the open scope's references, or the caller's when no
** scope is open), as every output of a compiled graph. AOT autograd's kn__aot_config.fw_run_into under "inductor". */
kn_status kn__inductor_run_into(const kn_compiled_graph *c, kn_tensor *const *in, int nin,
                                kn_tensor **out, int nout, kn_tensor *const *into);

/* mode "reduce-overhead" (cudagraphs.c): wrap the callable g of graph gm
** so that its launches are captured into a CUDA graph per input geometry and
** replayed (static inputs and outputs; see the banner there). On success
** *g is the wrapper, which owns the former callable; on failure *g is
** unchanged. */
kn_status kn__cudagraphs_wrap(const kn_graph_module *gm, kn_compiled_graph *g);
/* The same for a training graph (AOT's forward or backward): a replay never
** overwrites outputs still in use (a call whose earlier outputs are still
** referenced runs the graph normally instead), and no recording keeps its
** inputs (they may be another recording's outputs: saved activations). */
kn_status kn__cudagraphs_wrap_guarded(const kn_graph_module *gm, kn_compiled_graph *g);
/* A wrapper's counts of recordings and replays; false when g is not one. */
bool kn__cudagraphs_stats(const kn_compiled_graph *g, int64_t *recorded, int64_t *replayed);

/* The dispatcher's device backend for KN_CUDA (ops/cuda_ops.h's
** kn__device_backend_fn): call c as a compiled single-op graph on the GPU,
** cached per op, dtypes, sizes, strides and argument values
** (cuda_eager.c). KN_EUNSUPPORTED naming the op and cuda:0 when the code
** generator cannot lower it. */
struct kn__call;
struct kn__outs;
kn_status kn__ind_cuda_eager(const struct kn__call *c, struct kn__outs *out);

/* ---- the ABI between kiln and generated code -------------------------------
** Generated code sees only this table (no kiln symbols are linked), passed to
** `int call(const kn__ind_rt *rt, void *ctx, const int64_t *s)`; s holds the
** values of the plan's symbolic size expressions. Callbacks return 0 on
** success, nonzero after setting kiln's error; call returns nonzero then.
** vmath returns the vector-math table the eager kernels use (a kn__vmath,
** ops/vmath.h): generated code computes exp, log, tanh, ... with it. */
#define KN__IND_ABI 5
/* A generated epilogue (kir.h's KN__KIR_EPILOGUE item): computes rows
** [r0, r1) of its output space (every dim but the last) from the GEMM's
** output g (the whole output's data; those rows are final) and the
** buffers a[] the launch packed (a[0]: the size table s). */
typedef void (*kn__ind_epi_fn)(void *const *a, void *g, int64_t r0, int64_t r1);
typedef struct kn__ind_rt {
  int (*ext)(void *ctx, int step);              /* run extern step `step` */
  int (*alloc)(void *ctx, int slot, void **p);  /* allocate the buffer of slot */
  void *(*ptr)(void *ctx, int slot);            /* data pointer of a slot */
  void (*release)(void *ctx, int slot);         /* free a slot after its last use */
  const void *(*vmath)(void);                   /* the vector-math table */
  /* slot `to` takes over the buffer of dead slot `from` (same sizes, dtype) */
  int (*reuse)(void *ctx, int from, int to, void **p);
  /* CUDA programs (ABI 103, the cuda target): queue kernel fn on kiln's
  ** stream (grid, block, dynamic shared bytes, a pointer to each parameter);
  ** C programs never call it (their table names it only to reach ext_epi) */
  int (*launch)(void *ctx, void *fn, const unsigned grid[3], const unsigned block[3],
                unsigned shmem, void **args);
  /* C programs (ABI 4): run extern step `step` (a GEMM or convolution,
  ** gemm.c) calling epi on
  ** each block of its output's rows while it is in cache; into: the
  ** buffer the output is computed in (of its sizes and dtype, contiguous;
  ** the step's slot then holds nothing), NULL: a new buffer the slot holds */
  int (*ext_epi)(void *ctx, int step, kn__ind_epi_fn epi, void *const *a, void *into);
} kn__ind_rt;
typedef int (*kn__ind_call_fn)(const kn__ind_rt *rt, void *ctx, const int64_t *s);

/* ---- formulas (formula.c) ---------------------------------------------------- */
/* Element formula of a lowerable pointwise node: C text over the formula
** table's vocabulary (ops/pointwise_formulas.h): operands a b c, the compute
** type T, the parameter P1 (converted to T) and its int64 value PI. */
typedef struct kn__ind_formula {
  const char *tmpl;
  int code;           /* kn__pwcode, or -1 */
  int vm;             /* vector-math function (ops/vmath.h) it calls, or -1 */
  kn_dtype ct;        /* compute type */
  int nopnds;         /* operands: leading tensor/scalar args */
  double p1;          /* parameter ($1) */
  int64_t ip1;        /* integer parameter ($i) */
  bool cond_first;    /* operand $a is read as bool (where) */
} kn__ind_formula;
/* ---- the lowering table (lowering.c, lowering.def) ------------------------------- */
/* How inductor lowers each op: the one place in inductor that names
** specific ops (see inductor/lowering.def for the classes and roles). */
typedef enum kn__ind_lclass {
  KN__IND_L_NONE = 0, /* no row (never valid for an op of the table) */
  KN__IND_L_FORMULA,
  KN__IND_L_SELECT,
  KN__IND_L_CAST,
  KN__IND_L_CONSTANT,
  KN__IND_L_REDUCTION,
  KN__IND_L_DECOMP,
  KN__IND_L_EXTERN,
  KN__IND_L_BROADCAST,
} kn__ind_lclass;

typedef enum kn__ind_role {
  KN__IND_R_NONE = 0,
  /* GEMM / convolution extern calls a pointwise kernel may fuse into as
  ** their epilogue (sched_epi.c, gemm.c): EP_ADDMM and EP_MM compute their
  ** output in blocks of rows, EP_BMM and EP_CONV whole, then the epilogue */
  KN__IND_R_EP_ADDMM, KN__IND_R_EP_MM, KN__IND_R_EP_BMM, KN__IND_R_EP_CONV,
  /* decomposition rules (decomp.c) */
  KN__IND_R_DEC_SOFTMAX, KN__IND_R_DEC_LOG_SOFTMAX, KN__IND_R_DEC_LAYER_NORM,
  KN__IND_R_DEC_BATCH_NORM, KN__IND_R_DEC_MSE_LOSS, KN__IND_R_DEC_NLL_LOSS,
  KN__IND_R_DEC_NLL_LOSS_BWD, KN__IND_R_DEC_LOG_SOFTMAX_BWD, KN__IND_R_DEC_LOGSUMEXP,
  /* on the GPU only (their checks) */
  KN__IND_R_DEC_LAYER_NORM_BWD, KN__IND_R_DEC_SOFTMAX_BWD, KN__IND_R_DEC_RESHAPE_COPY,
  KN__IND_R_DEC_KERNEL, /* a composite op, through its own kernel */
  KN__IND_R_COUNT
} kn__ind_role;

typedef struct kn__ind_lowering {
  kn__ind_lclass cls;
  kn__ind_role role;
} kn__ind_lowering;

/* The row of op (EXTERN, no role, for an op outside the table). Borrowed
** (static). */
const kn__ind_lowering *kn__ind_lowering_of(const kn__opdef *op);
/* The first op of the table with role, or NULL. Borrowed (static). */
const kn__opdef *kn__ind_role_op(kn__ind_role role);
/* "FORMULA", ... for messages. Static. */
const char *kn__ind_lclass_name(kn__ind_lclass c);
/* The dim along which output `out` of op holds its own index (element i is
** i, whatever the other dims' indices: an index ramp), or -1 when it is not
** one. Generated code reads a ramp as its loop's index, and a sum of
** where(ramp == t, v, 0) as v at index t (codegen_pick.c). */
int kn__ind_ramp_dim(const kn__opdef *op, int out);

/* Fill f for node n if inductor can compute it inline; false otherwise (the
** node becomes an extern call). */
bool kn__ind_formula_for(const kn__gnode *n, kn__ind_formula *f);
/* C type name of a dtype's elements in generated code (float16 and bfloat16:
** uint16_t, their bits), or NULL if not supported. Static. */
const char *kn__ind_ctype(kn_dtype dt);
/* C type of a dtype's values in generated code: float for float16 and
** bfloat16 (computed in float32, rounded to the dtype), else kn__ind_ctype. */
const char *kn__ind_vtype(kn_dtype dt);
/* Is dt float16 or bfloat16? */
bool kn__ind_half(kn_dtype dt);
struct kn__ind_plan;
/* The source that defines the formulas' vocabulary (helpers, and the
** vector-math functions the plan's formulas call: kn_vm_<CODE>_<f32|f64>,
** each declared `simd` so gcc vectorises the loops that call it; their
** vector versions run the eager kernels' vector-math table on the vector's
** elements), appended to sb. Without vector_abi: scalar functions only,
** no pragma. KN_ENOMEM. */
kn_status kn__ind_formula_prelude(const struct kn__ind_plan *p, bool vector_abi, kn__sb *sb);
/* The statement that binds the vector-math table at the top of call(). */
#define KN__IND_VM_BIND "  kn_vm_bind(rt->vmath());\n"

/* ---- plans (lower.c) ------------------------------------------------------------ */
typedef enum kn__ind_nkind {
  KN__IND_SKIP = 0,  /* output node */
  KN__IND_INPUT,     /* placeholder */
  KN__IND_ATTR,      /* get_attr */
  KN__IND_EXTERN,    /* eager op call */
  KN__IND_ALIAS,     /* getitem: the slot of its source's output */
  KN__IND_PW,        /* pointwise: a kernel root or inlined into its consumer */
  KN__IND_RED        /* reduction over a set of dims (always in a group) */
} kn__ind_nkind;

/* Capacities of one kernel, enforced by the scheduler (sched.c), which
** splits a kernel rather than exceed them; code generation has no fixed
** capacity of its own. */
#define KN__HZ_MAX 8          /* pointwise roots per horizontal loop */
#define KN__KER_MAX_READS 64  /* distinct buffers one kernel reads */

typedef struct kn__ind_node {
  kn__ind_nkind kind;
  int slot;          /* first value slot (-1: inlined or kept in a group, no buffer) */
  bool inlined;
  int step;          /* extern step index (KN__IND_EXTERN) */
  kn__ind_formula f; /* KN__IND_PW */
  const kn__red_row *red; /* KN__IND_RED: its row of the reduction table */
  int64_t red_corr;  /* KN__IND_RED: the correction (var, std) */
  double red_c;      /* KN__IND_RED: the row's constant (the p-norm's order) */
  unsigned red_mask; /* KN__IND_RED: bit d set when dim d is reduced */
  int group;         /* index of its reduction group, -1 when none */
  bool row;          /* group member computed once per row (reduction results) */
  bool expr;         /* a constant (no tensor inputs) written as an expression
                     ** wherever it is read: no statement, no buffer */
  int hz;            /* KN__IND_PW kernel root fused horizontally: the root whose
                     ** kernel computes it (the set's last), -1 when alone */
  int epi;           /* KN__IND_EXTERN: the root of the pointwise kernel fused
                     ** as its epilogue; KN__IND_PW root: the extern node it
                     ** is the epilogue of (runs there); -1: none */
} kn__ind_node;

/* A reduction group: one kernel over the rows of a space S (the kept dims),
** each row reduced over the masked dims; members are reductions over S,
** pointwise nodes of S's sizes (computed per element, recomputed in each
** pass that needs them) and pointwise nodes of the row's sizes (S with the
** reduced dims 1: computed once per row). Members whose value is read
** outside the group have a slot; the others never exist in memory. */
typedef struct kn__ind_group {
  const kn__vmeta *space;
  unsigned mask;
  int root;          /* the last member: where the kernel runs */
  int nmembers;
  int *members;      /* node indices, ascending */
} kn__ind_group;

typedef struct kn__ind_plan {
  const kn__graph *g;
  int nnodes;
  kn__ind_node *nodes;          /* [nnodes], by node index */
  int nslots;
  const kn__gnode **slot_node;  /* [nslots] the node whose value a slot holds */
  int *slot_out;                /* [nslots] output index of that node */
  int nsteps;                   /* extern steps */
  const kn__gnode **step_node;  /* [nsteps] */
  int nsymx;                    /* symbolic expressions evaluated per call */
  kn_sym *symx;                 /* [nsymx] */
  int nkernels, nfused;         /* kernels emitted, nodes inlined */
  bool epilogues;               /* the target runs epilogue items (set before scheduling) */
  int nepilogues;               /* pointwise kernels fused into an extern as its epilogue */
  long epi_work;                /* nodes the epilogue pass visited (linear in the graph) */
  int ngroups;
  kn__ind_group *groups;        /* [ngroups] */
} kn__ind_plan;

/* Build the plan of g (borrowed; must outlive the plan). epilogues: the
** target runs epilogue items (kir.h), so the scheduler may fuse pointwise
** kernels into GEMM / convolution extern steps. KN_ENOMEM. */
kn_status kn__ind_plan_build(const kn__graph *g, bool epilogues, kn__ind_plan *p);
/* The scheduler (sched.c): constants recomputed in their readers,
** reduction groups (vertical and horizontal fusion around reductions), then
** inlining of single-use pointwise chains and of cheap multi-use producers,
** horizontal fusion of pointwise loops over the same sizes that read a
** common input, and value slots of everything that must exist in memory,
** splitting kernels that would read more than KN__KER_MAX_READS buffers,
** then (p->epilogues) epilogues (kn__ind_schedule_epilogues);
** logs the schedule and fusion artifacts. allow: fusion permitted (no in-place op in
** the graph). Called by kn__ind_plan_build after classification. */
kn_status kn__ind_schedule(kn__ind_plan *p, bool allow);
/* The epilogue pass (sched_epi.c): a pointwise kernel (not horizontal)
** that reads the whole output of a GEMM / convolution extern step E
** (float32/float64, contiguous, its own sizes), everything else it reads
** being computed before E, runs at E as E's epilogue (kn__ind_node.epi),
** over blocks of E's output while they are in cache. One linear pass over
** the kernels and their operand trees (p->epi_work counts the nodes it
** visited); log: the fusion artifact is on. Returns the number fused. */
int kn__ind_schedule_epilogues(kn__ind_plan *p, bool log);
/* Where node i's value is computed: its kernel's or group's run point
** (an epilogue's: its extern node), itself for inputs and externs. */
int kn__ind_run_point(const kn__ind_plan *p, int i);
/* A new slot for output k.. of n (count slots). */
int kn__ind_new_slots(kn__ind_plan *p, const kn__gnode *n, int count);

/* ---- reductions (reduce_lower.c) ------------------------------------------------ */
/* Is n a reduction inductor generates (a row of the reduction table over
** float32/float64, constant dims and order, no dtype=)? Fills in's red,
** red_mask, red_corr and red_c. */
bool kn__ind_red_classify(const kn__gnode *n, kn__ind_node *in);
/* The inline functions of every table row p's reductions use. KN_ENOMEM. */
kn_status kn__ind_red_prelude(const kn__ind_plan *p, kn__sb *sb);
/* The row whose functions pass `pass` of reduction in uses (a CENTERED
** row's pass 0 is its PRE row's: the center). Static. */
const kn__red_row *kn__ind_red_pass_row(const kn__ind_node *in, int pass);
/* Into buf: the element as pass `pass` of node id (input dtype xdt)
** combines it: "x", or the row's prep of x with its constant or center. */
void kn__ind_red_xv(char *buf, size_t len, const kn__ind_node *in, int id, kn_dtype xdt,
                    int pass);
/* Text of a pass of node id over elements of xdt with row r: its 16 lanes
** (laneID, ilaneID), the update of lane l by element x (index idx: INDEX
** rows), their combination into accID (iaccID) after the row. */
void kn__ind_red_lanes_open(kn__sb *sb, const kn__red_row *r, int id, kn_dtype xdt);
void kn__ind_red_update(kn__sb *sb, const kn__red_row *r, int id, kn_dtype xdt, const char *l,
                        const char *x, const char *idx);
void kn__ind_red_lanes_close(kn__sb *sb, const kn__red_row *r, int id, kn_dtype xdt);
/* The same lanes named <name>ID (a FOLD row's, no flags): declared and
** set to the row's start (indented for a row's body, in_row, or for the
** function's), and lane l's update by element x. */
void kn__ind_red_lanes_named(kn__sb *sb, const kn__red_row *r, kn_dtype xdt, const char *name,
                             int id, bool in_row);
void kn__ind_red_update_named(kn__sb *sb, const kn__red_row *r, kn_dtype xdt, const char *name,
                              int id, const char *l, const char *x);
/* `const <odt> vID = ...` from the accumulator (the row's finalize over
** `red` elements, or the index). */
void kn__ind_red_result(kn__sb *sb, const kn__ind_node *in, int id, kn_dtype odt);
/* `ctrID = ...`: the center of a CENTERED row from its pass 0 (the PRE
** row's finalize). */
void kn__ind_red_center(kn__sb *sb, const kn__ind_node *in, int id);

/* ---- decomposition (decomp.c) ------------------------------------------------ */
/* Copy g and decompose the copy's calls that have a row in inductor's
** table (and composite ops) into core ops and drop dead nodes; emits the
** before_post_grad_graph / inductor_post_grad_graph artifacts and the
** post_grad_graphs log. *out is owned (kn__graph_free). */
kn_status kn__ind_post_grad(const kn__graph *g, kn__graph **out);
/* The joint-graph passes PyTorch's inductor runs on an inference graph
** before compiling it: no-op removal (kn__graph_remove_noops), in place on
** g, between the before_joint_graph and after_joint_graph artifacts (graph
** code). AOT autograd's kn__aot_config.inference_passes under "inductor".
** Returns the number of calls removed, -1 on failure (error set). */
int kn__ind_joint_graph_passes(kn__graph *g);
/* Is op id decomposed by one of inductor's rules (lowering class DECOMP,
** not a composite op's own kernel)? */
bool kn__ind_has_decomp(int op);
void kn__ind_plan_free(kn__ind_plan *p);
/* The slot holding value (node, output k). */
int kn__ind_value_slot(const kn__ind_plan *p, kn__gref r);
/* Index of expression e in the plan's table (added if new); -1 on OOM. */
int kn__ind_symx(kn__ind_plan *p, kn_sym e);

/* ---- code generation: kir.c (the kernel IR), target.c, codegen.c --------------
** See kir.h and target.h: kn__ind_codegen_target(plan, target, sb). */

/* ---- GEMM / convolution epilogues (gemm.c) ------------------------------------- */
/* Run extern node n (a lowering role EP_*) on its arguments c with the
** generated epilogue epi(a, ...) over each block of its output's rows:
** addmm / mm (2-D float32 / float64) in blocks of rows through the eager
** GEMM kernel, each block's epilogue right after it; bmm / convolution
** through the eager op, then the epilogue in blocks. into: the output's
** buffer (contiguous, the traced sizes and dtype; *out stays NULL), or
** NULL: *out is a new tensor holding it. */
kn_status kn__ind_epilogue_run(const kn__gnode *n, kn__call *c, kn__ind_epi_fn epi,
                               void *const *a, void *into, kn_tensor **out);

/* ---- toolchain and caches (codecache.c, toolchain.c) ------------------------------ */
/* Tiered compiles (KILN_INDUCTOR_TIERED=1): the entry point of a graph whose
** optimised build is still being made, behind the first tier's. Callers
** read it at every call (kn__ind_tier_call, any thread); a background
** thread stores the optimised build's when it is loaded. Code once loaded
** stays loaded for the life of the process, so a caller still running the
** first tier's code is never unmapped. Reference-counted: the compiled
** graph and the background build each hold one. */
typedef struct kn__ind_tier {
  _Atomic(kn__ind_call_fn) call;
  atomic_int refs;
  atomic_bool optimised; /* the optimised build is in use */
} kn__ind_tier;
static inline kn__ind_call_fn kn__ind_tier_call(kn__ind_tier *t) {
  return atomic_load_explicit(&t->call, memory_order_acquire);
}
/* Drop one reference (NULL: nothing). */
void kn__ind_tier_release(kn__ind_tier *t);
/* Wait until every background build of this process has finished (tests,
** benchmarks). */
void kn__ind_tier_wait(void);
/* Is KILN_INDUCTOR_TIERED on ("1"; unset, empty or "0": off; anything
** else is logged once and off)? */
bool kn__ind_tiered(void);

typedef struct kn__ind_loaded {
  kn__ind_call_fn call;
  kn__ind_tier *tier; /* owned reference, or NULL: call is final */
  char key[65];       /* the source's key (names the .c/.so/.meta files) */
  char graph_key[65]; /* the graph's key (the fx_graph_cache_* artifacts' key) */
} kn__ind_loaded;
/* The C source of a graph, generated on a graph-cache miss: owned string, or
** NULL after setting kiln's error. */
typedef char *(*kn__ind_gen_fn)(void *ud);
/* Find the compiled code of a graph, or make it. graph_text is the graph's
** canonical serialisation (with its input metadata); the graph key is its
** SHA-256 with the compiler's identity, the flags, kiln's version and the
** identity of kiln's own code. A hit (memory, or <graph key>.fxg on disk
** naming an intact source entry) loads the shared object without calling
** gen; a miss calls gen(ud) and compiles (or finds) that source by its own
** key. tg (target.h) compiles and loads; its name is in both keys.
** by_graph false (a graph with symbolic sizes, whose plan learns its
** size expressions while code is generated) always calls gen and looks the
** source up by its own key only. The loaded code stays mapped for the life
** of the process. */
struct kn__ind_target;
kn_status kn__ind_load_graph(const char *graph_text, bool by_graph,
                             const struct kn__ind_target *tg, kn__ind_gen_fn gen, void *ud,
                             kn__ind_loaded *out);
/* Tests only: forget the memory cache (as a new process would start). */
void kn__ind_cache_forget_memory(void);

/* ---- compile phases (phase.c) ---------------------------------------------------- */
/* A phase: chromium B at begin, E at end (when tracing), its time recorded
** for kn_dump_compile_times and summed per thread for compilation_metrics.
** Names: compile_fx_inner (a whole compile), inductor_lowering,
** inductor_scheduling, inductor_codegen, inductor_cc, inductor_load. name is
** borrowed (a literal). */
typedef struct kn__ind_phase { const char *name; double t0; } kn__ind_phase;
void kn__ind_phase_begin(kn__ind_phase *ph, const char *name);
double kn__ind_phase_end(kn__ind_phase *ph); /* seconds */
/* The calling thread's inductor time since the last take, in microseconds:
** whole compiles, and codegen + cc + load; then resets both (dynamo takes
** them at the start and end of a frame compile). Either pointer may be NULL. */
void kn__ind_times_take(double *total_us, double *codegen_us);

/* ---- fx_graph_runnable (runnable.c) ------------------------------------------------ */
/* A standalone C program that rebuilds g with kiln's public ops on random
** inputs and compiles it with backend "inductor" (each op written by its
** row of ops/ops_repro.def). Owned (free it); NULL when a node has no
** public-call form, with *why naming it (static or borrowed from g) and
** *reason the op's documented reason for having none (static; NULL when the
** op has rows but none fits the node's arguments), or on OOM. */
char *kn__ind_runnable(const kn__graph *g, const char **why, const char **reason);
/* When tracing: the fx_graph_runnable artifact of g (or a debug log line
** saying why there is none). */
void kn__ind_emit_runnable(const kn__graph *g);

#endif
