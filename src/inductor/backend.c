/*
** inductor/backend.c: the backend entry point and the runtime of a compiled
** graph.
**
** Compile: plan the graph (lower.c), generate its C (codegen.c), compile and
** load it (toolchain.c). Run: bind the size symbols from the inputs' sizes,
** evaluate the plan's symbolic expressions into s[], check that every input
** has the strides the code was generated for, and call the generated `call`,
** which calls back for extern ops, buffers and frees. The program is
** reentrant: each run has its own frame.
**
** Eager fallbacks (the graph interpreter, same results): a call that needs
** autograd (grad mode on and an input or constant requires grad: kernels do
** not record gradients; the AOT layer will hand inductor forward and
** backward graphs instead), inputs whose strides differ from the traced
** ones (possible when strides are not guarded), and graphs that create
** tensors requiring grad. Without autograd, the grad mode a node was traced
** under changes nothing, so kernels ignore it.
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda.h"
#include "kiln/cuda.h"
#include "inductor/inductor.h"
#include "inductor/target.h"
#include "ops/cuda_ops.h"
#include "ops/threads.h"
#include "ops/vmath.h"
#include "logging/log.h"
#include "profiler/profiler.h"
#include "tensor/tensor.h"
#include "trace/compile_id.h"
#include "trace/events.h"

typedef struct bind { int input, dim, sym; } bind;

typedef struct prog {
  kn__graph *graph; /* owned: after decomposition and GEMM epilogues (kn__ind_post_grad) */
  const kn__ind_target *target; /* static: KILN_INDUCTOR_TARGET's, or cuda (target.h) */
  kn_device device; /* where the inputs and every buffer live: KN_CPU or KN_CUDA */
  kn__ind_plan plan;
  kn__ind_call_fn call;
  kn__ind_tier *tier; /* owned reference: tiered compiles' entry point (call when NULL) */
  kn__gprog *eager;
  int ninputs, noutputs, nsyms, nbind;
  int *out_slot;
  int *into_input; /* [noutputs] the input output k may be computed in (run_into), or -1 */
  bind *binds;
  atomic_bool told_fallback;
  kn_compile_id cid;   /* the compile that made it (compilation_metrics_runtime) */
  atomic_bool ran;     /* a CUDA program has run once */
} prog;

typedef struct frame {
  const prog *p;
  kn_tensor **vals;
  bool *owned;
  int64_t *symvals;
  kn_tensor **donor; /* [nslots] or NULL: the input slot s is computed in (run_into) */
} frame;

/* ---- runtime callbacks ------------------------------------------------------------ */
/* The address of t's first element: host memory, or the device's. */
static void *data_of(const kn_tensor *t) {
  return kn__tensor_on_cuda(t) ? kn_cuda_data_ptr(t) : kn_data(t);
}

static int64_t eval(const frame *f, kn_sym v) {
  return kn__sym_is_const(v) ? v.c : kn__sym_eval(v, f->symvals);
}

/* Slot s computed in place, in the tensor the caller wants it in (an input
** it copies the result into, or the destination itself), when that has the
** slot's sizes and dtype, contiguous; else the slot gets its own buffer. */
static bool take_donor(frame *f, int s, void **out) {
  if (!f->donor || !f->donor[s]) return false;
  const kn_tensor *t = f->donor[s];
  const kn__vmeta *m = &f->p->plan.slot_node[s]->meta[f->p->plan.slot_out[s]];
  if (t->ndim != m->ndim || t->dtype != m->dtype || !kn__contiguous(t)) return false;
  for (int d = 0; d < m->ndim; d++)
    if (t->sizes[d] != eval(f, m->sizes[d])) return false;
  f->vals[s] = kn_retain(f->donor[s]);
  f->owned[s] = true;
  *out = data_of(f->vals[s]);
  return true;
}

static int rt_alloc(void *ctx, int slot, void **out) {
  frame *f = ctx;
  if (take_donor(f, slot, out)) return 0;
  const kn__gnode *n = f->p->plan.slot_node[slot];
  const kn__vmeta *m = &n->meta[f->p->plan.slot_out[slot]];
  int64_t sizes[KN_MAX_DIMS];
  for (int d = 0; d < m->ndim; d++) sizes[d] = eval(f, m->sizes[d]);
  kn_tensor *t = kn__empty(m->ndim, sizes, m->dtype, f->p->device);
  if (!t) return -1;
  f->vals[slot] = t;
  f->owned[slot] = true;
  *out = data_of(t);
  return 0;
}

static void *rt_ptr(void *ctx, int slot) { return data_of(((frame *)ctx)->vals[slot]); }

static void rt_release(void *ctx, int slot) {
  frame *f = ctx;
  if (f->owned[slot]) kn_release(f->vals[slot]);
  f->vals[slot] = NULL;
  f->owned[slot] = false;
}

/* Arguments of an extern call; lists and ints go to mem (caller frees). */
static kn_status ext_args(frame *f, const kn__gnode *n, kn__call *c, void **mem) {
  size_t need = 0;
  for (int a = 0; a < n->nargs; a++)
    need += n->args[a].kind == KN__GA_TENSORS ? (size_t)n->args[a].u.ts.n * sizeof(kn_tensor *)
            : n->args[a].kind == KN__GA_INTS  ? (size_t)n->args[a].u.ints.n * sizeof(int64_t)
                                              : 0;
  char *buf = *mem = malloc(need + 1);
  if (!buf) return kn__oom();
  c->op = n->opdef;
  c->nargs = n->nargs;
  for (int a = 0; a < n->nargs; a++) {
    const kn__garg *g = &n->args[a];
    kn__arg *x = &c->args[a];
    switch (g->kind) {
    case KN__GA_NONE: *x = KN_A_NONE; break;
    case KN__GA_TENSOR:
      *x = KN_A_T(g->u.t.node ? f->vals[kn__ind_value_slot(&f->p->plan, g->u.t)] : NULL);
      break;
    case KN__GA_TENSORS: {
      kn_tensor **v = (kn_tensor **)(void *)buf;
      for (int j = 0; j < g->u.ts.n; j++)
        v[j] = g->u.ts.v[j].node ? f->vals[kn__ind_value_slot(&f->p->plan, g->u.ts.v[j])] : NULL;
      *x = KN_A_TS(v, g->u.ts.n);
      buf += (size_t)g->u.ts.n * sizeof *v;
    } break;
    case KN__GA_INT: /* a symbolic int in a Scalar position is an int Scalar */
      *x = kn__schema_arg_is_scalar(n->opdef, a) ? KN_A_S(kn_int(eval(f, g->u.i)))
                                                  : KN_A_I(eval(f, g->u.i));
      break;
    case KN__GA_DOUBLE: *x = KN_A_D(g->u.d); break;
    case KN__GA_BOOL: *x = KN_A_B(g->u.b); break;
    case KN__GA_SCALAR: *x = KN_A_S(g->u.s); break;
    case KN__GA_INTS: {
      int64_t *v = (int64_t *)(void *)buf;
      for (int j = 0; j < g->u.ints.n; j++) v[j] = eval(f, g->u.ints.v[j]);
      *x = KN_A_INTS(v, g->u.ints.n);
      buf += (size_t)g->u.ints.n * sizeof *v;
    } break;
    case KN__GA_DTYPE: *x = KN_A_DT(g->u.dt); break;
    case KN__GA_GEN: *x = KN_A_GEN(g->u.gen); break;
    }
  }
  return KN_OK;
}

/* The end of an extern step: on success its outputs o (moved, o is left
** empty) fill node n's slots and the frame owns them; on failure o is
** released and the error names the node. Returns 0 or -1. */
static int ext_finish(frame *f, const kn__gnode *n, kn_status st, kn__outs *o) {
  if (st != KN_OK) {
    kn__outs_fini(o);
    kn__error_context("while running graph node '%s'", n->name);
    return -1;
  }
  int slot = f->p->plan.nodes[n->index].slot;
  for (int k = 0; k < o->n; k++) {
    f->vals[slot + k] = o->t[k];
    f->owned[slot + k] = true;
  }
  o->n = 0;
  kn__outs_fini(o);
  return 0;
}

static int rt_ext(void *ctx, int step) {
  frame *f = ctx;
  const kn__gnode *n = f->p->plan.step_node[step];
  kn__call c;
  void *mem = NULL;
  kn_status st = ext_args(f, n, &c, &mem);
  kn__outs o;
  kn__outs_init(&o);
  if (st == KN_OK) st = kn__dispatch(&c, &o);
  free(mem);
  if (st == KN_OK && o.n != n->nout)
    st = kn__error(KN_EINTERNAL, "inductor: op %s returned %d outputs, the graph expects %d",
                   n->opdef->name, o.n, n->nout);
  return ext_finish(f, n, st, &o);
}

/* Extern step `step` with its generated epilogue (gemm.c), profiled as the
** op it runs; into: the buffer its output is computed in, or NULL: the
** step's slot holds a new tensor. */
static int rt_ext_epi(void *ctx, int step, kn__ind_epi_fn epi, void *const *a, void *into) {
  frame *f = ctx;
  const kn__gnode *n = f->p->plan.step_node[step];
  kn__call c;
  void *mem = NULL;
  kn_status st = ext_args(f, n, &c, &mem);
  kn__outs o;
  kn__outs_init(&o);
  int64_t t0 = st == KN_OK && KN__PROF_ON() ? kn__prof_op_begin() : 0;
  if (st == KN_OK) st = kn__ind_epilogue_run(n, &c, epi, a, into, &o.t[0]);
  o.n = st == KN_OK && o.t[0];
  if (t0) kn__dispatch_prof_end(t0, &c, &o);
  free(mem);
  return ext_finish(f, n, st, &o);
}

/* The vector-math table the eager kernels use at this moment. */
static const void *rt_vmath(void) { return kn__vmath_get(); }

/* Slot `to` takes over the buffer of dead slot `from` (the code generator
** pairs only slots of the same sizes and dtype). Never a donor input's
** buffer, even where run_into offers one for `to`: the kernel may read
** `from` through its output pointer (written in place over it; Adam's
** exp_avg over the weight-decayed gradient), and a donor holds other
** values. The output is then copied into the input after the call. */
static int rt_reuse(void *ctx, int from, int to, void **out) {
  frame *f = ctx;
  f->vals[to] = f->vals[from];
  f->owned[to] = f->owned[from];
  f->vals[from] = NULL;
  f->owned[from] = false;
  *out = data_of(f->vals[to]);
  return 0;
}

/* A kernel of a CUDA program, queued on kiln's stream. */
static int rt_launch(void *ctx, void *fn, const unsigned grid[3], const unsigned block[3],
                     unsigned shmem, void **args) {
  (void)ctx;
  return kn__cuda_launch(fn, grid, block, shmem, args) == KN_OK ? 0 : -1;
}

static const kn__ind_rt runtime = {rt_ext, rt_alloc, rt_ptr, rt_release, rt_vmath, rt_reuse,
                                   rt_launch, rt_ext_epi};

/* ---- running ----------------------------------------------------------------------- */
static bool strides_match(const frame *f, const kn__gnode *ph, const kn_tensor *t) {
  const kn__vmeta *m = &ph->meta[0];
  if (t->ndim != m->ndim || t->dtype != m->dtype || t->device != f->p->device) return false;
  for (int d = 0; d < m->ndim; d++)
    if (t->sizes[d] > 1 && t->strides[d] != eval(f, m->strides[d])) return false;
  return true;
}

/* Does this call need the eager interpreter (see the banner)? */
static bool needs_eager(const frame *f, kn_tensor *const *in) {
  const prog *p = f->p;
  bool grad = kn__grad_enabled();
  for (int i = 0; i < p->ninputs; i++) {
    if (grad && in[i]->requires_grad) return true;
    if (!strides_match(f, kn__graph_input(p->plan.g, i), in[i])) return true;
  }
  for (int s = 0; grad && s < p->plan.nslots; s++)
    if (p->plan.nodes[p->plan.slot_node[s]->index].kind == KN__IND_ATTR &&
        p->plan.slot_node[s]->attr->requires_grad)
      return true;
  return false;
}

static kn_status run_eager(prog *p, kn_tensor *const *in, kn_tensor **out) {
  if (!atomic_exchange(&p->told_fallback, true))
    KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: running a call with the eager interpreter "
           "(autograd needed or input strides differ from the traced ones)");
  kn_status st = kn__gprog_run(p->eager, in, p->ninputs, out, p->noutputs);
  for (int i = 0; st == KN_OK && i < p->noutputs; i++) kn__autorelease(out[i]);
  return st;
}

static void bind_frame(frame *f, kn_tensor *const *in) {
  const prog *p = f->p;
  for (int b = 0; b < p->nbind; b++)
    f->symvals[p->binds[b].sym] = in[p->binds[b].input]->sizes[p->binds[b].dim];
  for (int s = 0; s < p->plan.nslots; s++) {
    const kn__gnode *n = p->plan.slot_node[s];
    kn__ind_nkind k = p->plan.nodes[n->index].kind;
    if (k == KN__IND_INPUT) f->vals[s] = in[n->index];
    else if (k == KN__IND_ATTR) f->vals[s] = n->attr;
  }
}

static kn_status finish(frame *f, int rc, kn_tensor **out) {
  const prog *p = f->p;
  kn_status st = KN_OK;
  if (rc) st = kn_last_status() != KN_OK ? kn_last_status()
                                          : kn__error(KN_EINTERNAL, "inductor: call failed");
  for (int i = 0; st == KN_OK && i < p->noutputs; i++)
    out[i] = kn__autorelease(kn_retain(f->vals[p->out_slot[i]]));
  for (int s = 0; s < p->plan.nslots; s++)
    if (f->owned[s]) kn_release(f->vals[s]);
  return st;
}

typedef struct stcount { const void *st; int n; } stcount;

static size_t st_slot(const void *st, size_t cap) {
  uintptr_t h = (uintptr_t)st >> 4;
  return (size_t)((h * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

/* The inputs' storages as an open-addressing set counting each storage's
** inputs (so that a graph of hundreds of inputs, an optimizer step, checks
** sharing in O(n) rather than pairwise): *cap slots, a power of 2, of
** (storage, count; 0: empty); NULL on OOM. Freed by the caller. */
static stcount *storage_counts(const prog *p, kn_tensor *const *in, size_t *cap) {
  size_t c = 16;
  while (c < 2 * (size_t)p->ninputs) c *= 2;
  stcount *set = calloc(c, sizeof *set);
  for (int i = 0; set && i < p->ninputs; i++) {
    size_t k = st_slot(in[i]->storage, c);
    while (set[k].n && set[k].st != in[i]->storage) k = (k + 1) & (c - 1);
    set[k].st = in[i]->storage;
    set[k].n++;
  }
  *cap = c;
  return set;
}

/* How many inputs storage st belongs to. */
static int storage_count(const stcount *set, size_t cap, const void *st) {
  size_t k = st_slot(st, cap);
  while (set[k].n && set[k].st != st) k = (k + 1) & (cap - 1);
  return set[k].n;
}

/* Is output k's slot computed for it alone (no other output, no input)? */
static bool slot_alone(const prog *p, int k) {
  for (int i = 0; i < p->noutputs; i++)
    if (i != k && p->out_slot[i] == p->out_slot[k]) return false;
  return p->out_slot[k] >= 0;
}

/* The slots computed in the tensors the caller copies them into: output k
** when into[k] is the input the plan allows for it (into_tables) and no
** other input shares its memory, or when into[k] is a tensor of no input
** (an eager CUDA op's output: computed there, no copy). take_donor checks
** the geometry when the slot is allocated. */
static kn_tensor **donors(const prog *p, kn_tensor *const *in, kn_tensor *const *into) {
  kn_tensor **d = NULL;
  size_t cap = 0;
  stcount *st = into ? storage_counts(p, in, &cap) : NULL;
  for (int k = 0; st && k < p->noutputs; k++) {
    int j = p->into_input[k];
    kn_tensor *t = NULL;
    if (j >= 0 && into[k] == in[j] && storage_count(st, cap, in[j]->storage) == 1) t = in[j];
    else if (into[k] && into[k]->device == p->device && slot_alone(p, k) &&
             storage_count(st, cap, into[k]->storage) == 0)
      t = into[k];
    if (!t) continue;
    if (!d && !(d = calloc((size_t)p->plan.nslots, sizeof *d))) break;
    d[p->out_slot[k]] = t;
  }
  free(st);
  return d;
}

static kn_status run_with(prog *p, kn_tensor *const *in, int nin, kn_tensor **out, int nout,
                          kn_tensor *const *into);

/* The first run of a CUDA program: its compilation_metrics_runtime record
** (PyTorch writes one after the first run of a GPU graph: the work its
** runtime does once, there Triton's, here the driver's lazy loading of the
** kernels at their first launch), under the compile's id, without attempt. */
static void runtime_metrics(const prog *p, double t0_us) {
  if (!kn__trace_enabled()) return;
  double t1 = kn__trace_now_us();
  kn__trace_runtime_metrics(json_pack("{s:I, s:I}", "start_time_us", (json_int_t)t0_us,
                                      "duration_us", (json_int_t)(t1 > t0_us ? t1 - t0_us : 0)),
                            p->cid);
}

static kn_status ind_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  return run_with(state, in, nin, out, nout, NULL);
}

kn_status kn__inductor_run_into(const kn_compiled_graph *c, kn_tensor *const *in, int nin,
                                kn_tensor **out, int nout, kn_tensor *const *into) {
  if (c->run != ind_run) return c->run(c->state, in, nin, out, nout);
  return run_with(c->state, in, nin, out, nout, into);
}

static kn_status run_frame(prog *p, kn_tensor *const *in, kn_tensor **out,
                           kn_tensor *const *into);

/* Is t a 0-dim tensor in host memory (a scalar that joins a GPU graph)? */
static bool host_scalar(const kn_tensor *t) {
  return t->ndim == 0 && !kn__tensor_on_cuda(t) && t->device != KN_META && !t->is_fake;
}

/* A GPU program's 0-dim host inputs, copied to the device for the call (a
** one-element upload each, as an eager op on CUDA tensors lifts them). */
static kn_status run_lifted(prog *p, kn_tensor *const *in, int nin, kn_tensor **out,
                            kn_tensor *const *into) {
  kn_tensor **lifted = calloc((size_t)nin, sizeof *lifted);
  if (!lifted) return kn__oom();
  kn_status st = KN_OK;
  for (int i = 0; i < nin && st == KN_OK; i++) {
    if (!host_scalar(in[i])) {
      lifted[i] = kn_retain(in[i]);
      continue;
    }
    lifted[i] = kn__empty(0, NULL, in[i]->dtype, KN_CUDA);
    st = lifted[i] ? kn__cuda_copy_into(lifted[i], in[i]) : kn_last_status();
  }
  if (st == KN_OK) st = run_frame(p, lifted, out, into);
  for (int i = 0; i < nin; i++) kn_release(lifted[i]);
  free(lifted);
  return st;
}

static kn_status run_with(prog *p, kn_tensor *const *in, int nin, kn_tensor **out, int nout,
                          kn_tensor *const *into) {
  if (nin != p->ninputs || nout != p->noutputs)
    return kn__error(KN_EINVAL, "inductor: expected %d inputs and %d outputs, got %d and %d",
                     p->ninputs, p->noutputs, nin, nout);
  bool lift = false;
  for (int i = 0; i < nin; i++) {
    if (!in[i]) return kn__error(KN_EINVAL, "inductor: graph input %d is NULL", i);
    lift |= p->device == KN_CUDA && host_scalar(in[i]);
  }
  return lift ? run_lifted(p, in, nin, out, into) : run_frame(p, in, out, into);
}

static kn_status run_frame(prog *p, kn_tensor *const *in, kn_tensor **out,
                           kn_tensor *const *into) {
  size_t ns = (size_t)p->plan.nslots, nv = (size_t)p->nsyms + 1, nx = (size_t)p->plan.nsymx + 1;
  char *mem = calloc(1, ns * (sizeof(kn_tensor *) + sizeof(bool)) + (nv + nx) * sizeof(int64_t));
  if (!mem) return kn__oom();
  int64_t *s = (int64_t *)(void *)mem;
  frame f = {p, (kn_tensor **)(void *)(mem + nx * sizeof(int64_t)), NULL,
             (int64_t *)(void *)(mem + nx * sizeof(int64_t) + ns * sizeof(kn_tensor *)), NULL};
  f.owned = (bool *)(f.symvals + nv);
  bind_frame(&f, in);
  kn_status st;
  if (needs_eager(&f, in)) {
    st = run_eager(p, in, out);
  } else {
    for (int k = 0; k < p->plan.nsymx; k++) s[k] = kn__sym_eval(p->plan.symx[k], f.symvals);
    f.donor = donors(p, in, into);
    kn__threads_sync(); /* the generated loops' team size */
    kn__ind_call_fn fn = p->tier ? kn__ind_tier_call(p->tier) : p->call;
    bool first = p->device == KN_CUDA && !atomic_exchange(&p->ran, true);
    double t0 = first ? kn__trace_now_us() : 0;
    st = finish(&f, fn(&runtime, &f, s), out);
    if (first) runtime_metrics(p, t0);
  }
  free(f.donor);
  free(mem);
  return st;
}

/* ---- compiling ----------------------------------------------------------------------- */
static void prog_free(void *state) {
  prog *p = state;
  if (!p) return;
  kn__ind_plan_free(&p->plan);
  kn__graph_free(p->graph);
  kn__gprog_free(p->eager);
  free(p->out_slot);
  free(p->into_input);
  free(p->binds);
  kn__ind_tier_release(p->tier);
  free(p);
}

static int plain_symbol(kn_sym v) {
  if (kn__sym_is_const(v)) return -1;
  char buf[32], extra;
  int k;
  kn__sym_format(v, buf, sizeof buf);
  return sscanf(buf, "s%d%c", &k, &extra) == 1 ? k : -1;
}

static kn_status io_tables(prog *p) {
  const kn__graph *g = p->plan.g;
  const kn__gnode *o = kn__graph_output_node(g);
  p->ninputs = kn__graph_num_inputs(g);
  p->noutputs = o ? o->nargs : 0;
  kn__shape_env *env = kn__graph_shape_env(g);
  p->nsyms = env ? kn__shape_env_nsymbols(env) : 0;
  p->out_slot = calloc((size_t)p->noutputs + 1, sizeof *p->out_slot);
  p->binds = calloc((size_t)p->ninputs * KN_MAX_DIMS + 1, sizeof *p->binds);
  if (!p->out_slot || !p->binds) return kn__oom();
  for (int i = 0; i < p->noutputs; i++) {
    if (o->args[i].kind != KN__GA_TENSOR || !o->args[i].u.t.node)
      return kn__error(KN_EUNSUPPORTED, "inductor: graph output %d is not a tensor", i);
    p->out_slot[i] = kn__ind_value_slot(&p->plan, o->args[i].u.t);
  }
  for (int i = 0; i < p->ninputs; i++) {
    const kn__vmeta *m = &kn__graph_input(g, i)->meta[0];
    for (int d = 0; m->kind == KN__V_TENSOR && d < m->ndim; d++) {
      int k = plain_symbol(m->sizes[d]);
      if (k < 0) continue;
      p->binds[p->nbind++] = (bind){i, d, k};
      if (k + 1 > p->nsyms) p->nsyms = k + 1;
    }
  }
  return KN_OK;
}

static bool sym_same(kn_sym a, kn_sym b) {
  return kn__sym_query(a, KN__SYM_EQ, b) == KN__SYM_TRUE;
}

/* Is m contiguous with n's sizes and dtype? Sizes may be symbolic (equal
** expressions; called with the graph's shape env current). */
static bool same_contiguous(const kn__vmeta *m, const kn__vmeta *n) {
  if (m->kind != KN__V_TENSOR || m->dtype != n->dtype || m->ndim != n->ndim) return false;
  kn_sym want = kn__sym_const(1);
  for (int d = m->ndim - 1; d >= 0; d--) {
    if (!sym_same(m->sizes[d], n->sizes[d])) return false;
    bool one = kn__sym_is_const(m->sizes[d]) && m->sizes[d].c == 1;
    if (!one && !sym_same(m->strides[d], want)) return false;
    want = kn__sym_mul(want, m->sizes[d]);
  }
  return true;
}

/* Is u computed inside the loop of kernel root r (u itself, or inlined into
** a chain of single users ending at r)? */
static bool in_kernel(const kn__ind_plan *pl, const kn__gnode *u, const kn__gnode *r) {
  for (int hops = 0; hops < 64 && u; hops++) {
    if (u == r) return true;
    if (pl->nodes[u->index].kind != KN__IND_PW || !pl->nodes[u->index].inlined) return false;
    kn__gnode *next = NULL;
    if (kn__graph_users(pl->g, u, &next, 1) != 1) return false;
    u = next;
  }
  return false;
}

/* Can output k be computed in graph input j? Its value is the root of a
** pointwise kernel (not a reduction group, not an epilogue: its GEMM may be
** computed in the output's buffer before the epilogue reads the input), input j has its sizes, dtype
** and contiguous strides, and every reader of input j is inside that
** kernel, reading element i for element i: written in place, each element
** is read before it is overwritten and by nothing after. */
/* The readers of a graph input (at most 16: more never qualify), looked up
** once per input: a graph of hundreds of inputs and outputs (an optimizer
** step) would otherwise scan the graph for every pair. */
typedef struct readers { int n; kn__gnode *u[16]; } readers;

static bool into_ok(const prog *p, int k, int j, const readers *rd) {
  const kn__ind_plan *pl = &p->plan;
  const kn__gnode *o = kn__graph_output_node(pl->g), *r = o->args[k].u.t.node;
  const kn__gnode *ph = kn__graph_input(pl->g, j);
  const kn__ind_node *rn = &pl->nodes[r->index];
  if (rn->kind != KN__IND_PW || rn->group >= 0 || rn->inlined || rn->slot < 0 || rn->epi >= 0 ||
      !same_contiguous(&ph->meta[0], &r->meta[0]) || rd->n < 1 || rd->n > 16)
    return false;
  for (int u = 0; u < rd->n; u++)
    if (!in_kernel(pl, rd->u[u], r)) return false;
  for (int i = 0; i < p->noutputs; i++)
    if ((i != k && p->out_slot[i] == p->out_slot[k]) || o->args[i].u.t.node == ph) return false;
  return true;
}

/* into_input[k]: the one input output k may be computed in, or -1. */
static kn_status into_tables(prog *p) {
  p->into_input = malloc(((size_t)p->noutputs + 1) * sizeof *p->into_input);
  readers *rd = malloc(((size_t)p->ninputs + 1) * sizeof *rd);
  if (!p->into_input || !rd) {
    free(rd);
    return kn__oom();
  }
  for (int j = 0; j < p->ninputs; j++)
    rd[j].n = kn__graph_users(p->plan.g, kn__graph_input(p->plan.g, j), rd[j].u, 16);
  for (int k = 0; k < p->noutputs; k++) {
    p->into_input[k] = -1;
    for (int j = 0; j < p->ninputs && p->into_input[k] < 0; j++)
      if (into_ok(p, k, j, &rd[j])) p->into_input[k] = j;
  }
  free(rd);
  return KN_OK;
}

/* A node that makes a new leaf require grad needs the interpreter. */
static bool makes_leaves(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++)
    if (kn__graph_node(g, i)->set_requires_grad) return true;
  return false;
}

static void log_plan(const prog *p) {
  if (!KN_LOG_ENABLED(KN_LOG_INDUCTOR, KN_DEBUG)) return;
  for (int s = 0; s < p->plan.nsteps; s++)
    KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: no lowering for %s (node %s): extern call of "
           "the eager op", p->plan.step_node[s]->target, p->plan.step_node[s]->name);
  KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: %d kernels, %d nodes fused into them, %d extern "
         "calls", p->plan.nkernels, p->plan.nfused, p->plan.nsteps);
}

static kn_status generate(prog *p, char **src) {
  kn__sb sb;
  kn__sb_init(&sb);
  kn__shape_env *prev = kn__shape_env_set_current(kn__graph_shape_env(p->plan.g));
  kn_status st = kn__ind_codegen_target(&p->plan, p->target, &sb);
  kn__shape_env_set_current(prev);
  if (st == KN_OK && !(*src = kn__sb_take(&sb))) st = kn__oom();
  kn__sb_fini(&sb);
  return st;
}

/* The graph before and after kiln's one post-grad pass (activations folded
** into GEMM / convolution calls, gemm.c): the seeds' before_post_grad_graph
** and inductor_post_grad_graph artifacts. */
/* Does g use no symbolic size anywhere (metadata or int arguments)? The
** plan's table of symbolic expressions is filled while generating code, so
** only static graphs may skip code generation on a graph-cache hit. */
static bool sym_static(const kn__garg *a) {
  if (a->kind == KN__GA_INT) return kn__sym_is_const(a->u.i);
  for (int j = 0; a->kind == KN__GA_INTS && j < a->u.ints.n; j++)
    if (!kn__sym_is_const(a->u.ints.v[j])) return false;
  return true;
}

static bool graph_is_static(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    for (int a = 0; a < n->nargs; a++)
      if (!sym_static(&n->args[a])) return false;
    for (int k = 0; n->op != KN__GN_OUTPUT && k < n->nout; k++) {
      const kn__vmeta *m = &n->meta[k];
      if (m->kind == KN__V_TENSOR && !kn__sym_is_const(m->offset)) return false;
      for (int d = 0; m->kind == KN__V_TENSOR && d < m->ndim; d++)
        if (!kn__sym_is_const(m->sizes[d]) || !kn__sym_is_const(m->strides[d])) return false;
    }
  }
  return true;
}

/* The source of p's plan (phase inductor_codegen), on a graph-cache miss. */
static char *gen_source(void *ud) {
  char *src = NULL;
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "inductor_codegen");
  kn_status st = generate(ud, &src);
  kn__ind_phase_end(&ph);
  return st == KN_OK ? src : NULL;
}

static const char *dev_name(kn_device d) {
  return d == KN_CUDA ? "cuda:0" : d == KN_META ? "meta" : "cpu";
}

/* The device of g's tensor inputs (KN_CPU without any): the CUDA target
** compiles a graph on CUDA; inputs on two devices are an error, except
** that a 0-dim host input joins a GPU graph as a scalar (PyTorch's rule;
** run_lifted copies it there for each call). */
static kn_status graph_device(const kn__graph *g, kn_device *out) {
  *out = KN_CPU;
  int first = -1;
  bool gpu = false;
  for (int i = 0; i < kn__graph_num_inputs(g); i++)
    gpu |= kn__graph_input(g, i)->meta[0].device == KN_CUDA;
  for (int i = 0; i < kn__graph_num_inputs(g); i++) {
    const kn__vmeta *m = &kn__graph_input(g, i)->meta[0];
    if (m->kind != KN__V_TENSOR || (gpu && m->ndim == 0 && m->device == KN_CPU)) continue;
    if (first >= 0 && m->device != *out)
      return kn__error(KN_EINVAL, "inductor: expected all graph inputs on one device, found %s "
                       "(input %d) and %s (input %d)", dev_name(*out), first,
                       dev_name(m->device), i);
    if (first < 0) first = i;
    *out = m->device;
  }
  if (*out != KN_CPU && *out != KN_CUDA)
    return kn__error(KN_EUNSUPPORTED, "inductor: no code generator for device %s",
                     dev_name(*out));
  return KN_OK;
}

static kn_status compile_inner(kn_graph_module *gm, kn_compiled_graph *out);

kn_status kn__inductor_compile(kn_graph_module *gm, kn_tensor *const *example_inputs, int n,
                               void *ud, kn_compiled_graph *out) {
  (void)example_inputs, (void)n, (void)ud;
  if (!gm || !out) return kn__error(KN_EINVAL, "inductor: expected a graph module and an output");
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "compile_fx_inner");
  kn_status st = compile_inner(gm, out);
  kn__ind_phase_end(&ph);
  return st;
}

static kn_status compile_inner(kn_graph_module *gm, kn_compiled_graph *out) {
  const kn__graph *g = kn__graph_module_graph(gm);
  prog *p = calloc(1, sizeof *p);
  if (!p) return kn__oom();
  kn_status st = kn__gprog_new(g, &p->eager);
  if (st == KN_OK && makes_leaves(g)) {
    KN_LOG(KN_LOG_INDUCTOR, KN_INFO, "inductor: the graph creates tensors that require grad; "
           "it runs with the eager interpreter");
    prog_free(p);
    return kn__eager_compile(gm, out);
  }
  if (st == KN_OK) kn__ind_emit_runnable(g);
  if (st == KN_OK) st = graph_device(g, &p->device);
  if (st == KN_OK && p->device == KN_CUDA) p->target = &kn__ind_target_cuda;
  else if (st == KN_OK) st = kn__ind_target_current(&p->target);
  if (st == KN_OK) st = kn__ind_post_grad(g, &p->graph);
  if (st == KN_OK) st = kn__ind_plan_build(p->graph, p->target->epilogues, &p->plan);
  if (st == KN_OK) st = io_tables(p);
  kn__shape_env *prev = kn__shape_env_set_current(kn__graph_shape_env(g));
  if (st == KN_OK) st = into_tables(p);
  char *text = st == KN_OK ? kn__graph_serialize(g) : NULL;
  kn__shape_env_set_current(prev);
  if (st == KN_OK && !text) st = kn__oom();
  kn__ind_loaded ld;
  if (st == KN_OK) st = kn__ind_load_graph(text, graph_is_static(g), p->target, gen_source, p, &ld);
  free(text);
  if (st != KN_OK) {
    prog_free(p);
    return st;
  }
  p->call = ld.call;
  p->tier = ld.tier;
  p->cid = kn__compile_ctx_get()->id;
  log_plan(p);
  *out = (kn_compiled_graph){ind_run, p, prog_free};
  return KN_OK;
}
