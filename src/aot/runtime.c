/*
** aot/runtime.c: the AOT backend and its runtime. Compiling traces the joint
** graph, partitions it and compiles the forward and backward graphs with the
** configured compilers (or traces one inference graph). A call runs the
** compiled forward without recording autograd, then attaches ONE node,
** CompiledFunctionBackward, to the differentiable outputs; its backward runs
** the compiled backward graph on the saved values and the tangents. The
** graph compiled is the functionalized one (functionalize.c); after the
** call the runtime plan (plan.c) writes mutated inputs back and rebuilds
** the outputs that alias inputs or each other.
*/
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "autograd/autograd.h"
#include "core/error.h"
#include "kiln/autograd.h"
#include "kiln/ops.h"
#include "ops/iter.h"
#include "tensor/tensor.h"

/* One compiled graph: its module (the callable may run it) and callable. */
typedef struct cgraph {
  kn_graph_module *gm;
  kn_compiled_graph c;
  int nin, nout;
} cgraph;

/* The compiled function: shared by the callable and every live backward
** node (reference counted: a node may outlive the cache entry). */
typedef struct aot_fn {
  atomic_long refs;
  bool inference;
  cgraph fw, bw;   /* inference: fw only */
  kn__aot_plan plan;
  int nuser;       /* forward outputs: write-backs, user outputs, bases (plan) */
  int nsaved;
  bool *out_diff;  /* [nuser] */
  bool *node_out;  /* [nuser] outputs the node is attached to (fresh, differentiable) */
  int ngrads;
  int *grad_input; /* [ngrads] */
  int nin;
  kn__aot_run_into_fn run_into; /* kn__aot_config.fw_run_into */
  bool caller_mode; /* some call node runs in the caller's grad mode (grad_mode -1): the
                    ** node is attached only when the caller's mode is on; otherwise
                    ** every node has its own mode (a captured graph) and it always is */
} aot_fn;

static void cgraph_fini(cgraph *g) {
  if (g->c.free_state) g->c.free_state(g->c.state);
  kn_graph_module_free(g->gm);
}

static void fn_release(void *p) {
  aot_fn *f = p;
  if (!f || atomic_fetch_sub(&f->refs, 1) != 1) return;
  cgraph_fini(&f->fw);
  cgraph_fini(&f->bw);
  free(f->out_diff);
  free(f->node_out);
  free(f->grad_input);
  kn__aot_plan_fini(&f->plan);
  free(f);
}

/* Compile g (ownership passes to the module) with compiler fn. */
/* An alias of t without history (shares storage). Owned or NULL. */
static kn_tensor *alias(kn_tensor *t) {
  return kn__make_view(t, t->ndim, t->sizes, t->strides, t->offset);
}

static kn_status compile_graph(kn__graph *g, kn_backend_fn fn, void *ud, kn_tensor *const *ex,
                               int nex, cgraph *out) {
  out->nin = kn__graph_num_inputs(g);
  kn__gnode *o = kn__graph_output_node(g);
  out->nout = o ? o->nargs : 0;
  kn_status st = kn__graph_module_new(g, &out->gm);
  if (st == KN_OK) st = fn(out->gm, ex, nex, ud, &out->c);
  if (st == KN_OK && !out->c.run) st = kn__error(KN_EINVAL, "aot: the compiler returned no callable");
  return st;
}

/* ---- the backward node ------------------------------------------------------------ */

typedef struct bw_ctx {
  aot_fn *f;          /* counted reference */
  kn_tensor **saved;  /* [nsaved] owned, without history */
  kn_tensor **outs;   /* [nuser] detached aliases of the outputs (zero tangents' shapes) */
  kn_tensor **in;     /* [nin] the call's inputs, retained (double backward's edges) */
} bw_ctx;

static void ctx_free(void *p) {
  bw_ctx *c = p;
  for (int i = 0; c->saved && i < c->f->nsaved; i++) kn_release(c->saved[i]);
  for (int i = 0; c->outs && i < c->f->nuser; i++) kn_release(c->outs[i]);
  for (int i = 0; c->in && i < c->f->nin; i++) kn_release(c->in[i]);
  free(c->in);
  free(c->saved);
  free(c->outs);
  fn_release(c->f);
  free(c);
}

static kn_status double_backward(void *ctx, kn_tensor *const *go, int nout, kn_tensor **gi,
                                 const bool *needs, int nin, bool create_graph) {
  (void)ctx, (void)go, (void)nout, (void)gi, (void)needs, (void)nin, (void)create_graph;
  return kn__error(KN_EAUTOGRAD,
                   "torch.compile with aot_autograd does not currently support double backward");
}

/* Under create_graph the gradients get a node whose backward is the error;
** its edges lead to the tangents' and the compiled function's inputs'
** history, so a second backward reaches it as it would reach the inputs. */
static kn_status mark_no_double(bw_ctx *c, kn_tensor *const *go, int nout, kn_tensor **gi, int nin) {
  kn_tensor **all = calloc((size_t)nout + (size_t)nin + 1, sizeof *all);
  if (!all) return kn__oom();
  memcpy(all, go, (size_t)nout * sizeof *all);
  memcpy(all + nout, c->in, (size_t)nin * sizeof *all);
  kn__node *n = kn__node_new_custom("CompiledFunctionBackwardBackward", double_backward, NULL,
                                    NULL, all, nout + nin, nin);
  free(all);
  if (!n) return kn_last_status();
  kn_status st = KN_OK;
  for (int k = 0; st == KN_OK && k < nin; k++)
    if (gi[k] && kn_dtype_is_floating(gi[k]->dtype)) st = kn__node_set_output(n, gi[k], k);
  kn__node_release(n);
  return st;
}

/* Tangents in the backward graph's order: zeros for outputs without one. */
static kn_status tangents(bw_ctx *c, kn_tensor *const *go, kn_tensor **tg) {
  int k = 0;
  for (int i = 0; i < c->f->nuser; i++) {
    if (!c->f->out_diff[i]) continue;
    kn_tensor *o = c->outs[i];
    kn_tensor *t = go[i] ? go[i] : kn_zeros(o->ndim, o->sizes, o->dtype);
    if (!t) return kn_last_status();
    tg[k++] = kn_contiguous(t);
    if (!tg[k - 1]) return kn_last_status();
  }
  return KN_OK;
}

static kn_status run_backward(void *ctx, kn_tensor *const *go, int nout, kn_tensor **gi,
                              const bool *needs, int nin, bool create_graph) {
  bw_ctx *c = ctx;
  aot_fn *f = c->f;
  (void)nout, (void)needs;
  int nb = f->bw.nin;
  kn_tensor **in = calloc((size_t)nb + (size_t)f->ngrads + 1, sizeof *in), **res = in + nb;
  if (!in) return kn__oom();
  memcpy(in, c->saved, (size_t)f->nsaved * sizeof *in);
  bool prev = kn_no_grad_begin();
  kn_scope_begin();
  kn_status st = tangents(c, go, in + f->nsaved);
  if (st == KN_OK) st = f->bw.c.run(f->bw.c.state, in, nb, res, f->ngrads);
  for (int k = 0; st == KN_OK && k < f->ngrads; k++) kn_retain(res[k]); /* past the scope */
  kn_scope_end();
  kn_no_grad_end(prev);
  for (int k = 0; st == KN_OK && k < f->ngrads; k++)
    if (!(gi[f->grad_input[k]] = kn__autorelease(res[k]))) st = kn_last_status();
  free(in);
  if (st != KN_OK) return st;
  if (create_graph) return mark_no_double(c, go, nout, gi, nin);
  return KN_OK;
}

/* ---- a call -------------------------------------------------------------------------- */

/* Outputs that are inputs or repeat an earlier output become aliases, so the
** node never rewrites a caller's tensor or one tensor twice. */
static kn_status own_outputs(kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  for (int i = 0; i < nout; i++) {
    bool dup = false;
    for (int k = 0; k < nin && !dup; k++) dup = out[i] == in[k];
    for (int k = 0; k < i && !dup; k++) dup = out[i] == out[k];
    if (!dup) continue;
    kn_tensor *a = alias(out[i]);
    if (!a) return kn_last_status();
    kn_release(out[i]);
    out[i] = a;
  }
  return KN_OK;
}

/* Is input i written back under grad (then its history leads to this
** node, and the node must not hold it: a reference cycle)? */
static bool written_with_grad(const kn__aot_plan *p, int i) {
  for (int k = 0; k < p->nmutated; k++)
    if (p->mutations[k].input == i && p->mutations[k].with_grad) return true;
  return false;
}

static kn_status attach(aot_fn *f, kn_tensor *const *in, int nin, kn_tensor **outs,
                        kn_tensor **saved) {
  bw_ctx *c = calloc(1, sizeof *c);
  if (!c) return kn__oom();
  atomic_fetch_add(&f->refs, 1);
  c->f = f;
  c->saved = saved;
  c->outs = calloc((size_t)f->nuser + 1, sizeof *c->outs);
  c->in = calloc((size_t)nin + 1, sizeof *c->in);
  for (int i = 0; c->outs && i < f->nuser; i++) c->outs[i] = alias(outs[i]);
  for (int i = 0; c->in && i < nin; i++) /* an input written back under grad gets history */
    c->in[i] = written_with_grad(&f->plan, i) ? alias(in[i]) : kn_retain(in[i]);
  kn__node *n = kn__node_new_custom("CompiledFunctionBackward", run_backward, c, ctx_free, in, nin,
                                    f->nuser);
  if (!n) return c->outs && c->in ? kn_last_status() : kn__oom();
  kn_status st = c->outs && c->in ? KN_OK : kn__oom();
  for (int i = 0; st == KN_OK && i < f->nuser; i++)
    if (f->node_out[i]) st = kn__node_set_output(n, outs[i], i);
  kn__node_release(n);
  return st;
}

/* An inference graph's call, telling a callable that can write outputs in
** place which of them the plan copies into an input mutated under no_grad
** (the new values come first); the plan then skips those copies. */
static kn_status run_fw_graph(aot_fn *f, kn_tensor *const *in, int nin, kn_tensor **all, int n) {
  const kn__aot_plan *p = &f->plan;
  if (!f->inference || !f->run_into || p->nmutated == 0 || p->nmutated > n)
    return f->fw.c.run(f->fw.c.state, in, nin, all, n);
  kn_tensor **into = calloc((size_t)n, sizeof *into);
  if (!into) return kn__oom();
  for (int k = 0; k < p->nmutated; k++)
    if (p->mutations[k].input >= 0 && p->mutations[k].input < nin && !p->mutations[k].with_grad)
      into[k] = in[p->mutations[k].input];
  kn_status st = f->run_into(&f->fw.c, in, nin, all, n, into);
  free(into);
  return st;
}

/* The forward's outputs (all[nuser + nsaved], owned) for one call. */
static kn_status run_forward(aot_fn *f, kn_tensor *const *in, int nin, kn_tensor **all, int n) {
  bool prev = kn_no_grad_begin();
  kn_scope_begin(); /* the callable's results are recorded in it: take our own */
  kn_status st = run_fw_graph(f, in, nin, all, n);
  for (int i = 0; st == KN_OK && i < n; i++) kn_retain(all[i]);
  kn_scope_end();
  kn_no_grad_end(prev);
  if (st != KN_OK) memset(all, 0, (size_t)n * sizeof *all);
  return st;
}

/* Saved value v (owned, without history): an alias, or a copy when v is
** an input the plan writes into after the forward (a partition may save a
** primal by reference, and the backward means its value before the write). */
static kn_tensor *saved_value(const aot_fn *f, kn_tensor *const *in, int nin, kn_tensor *v) {
  for (int k = 0; k < f->plan.nmutated; k++) {
    int j = f->plan.mutations[k].input;
    if (j >= 0 && j < nin && kn_same_storage(v, in[j])) return kn__contiguous_copy(v, v->dtype);
  }
  return alias(v);
}

/* Keep the saved values and attach the node. */
static kn_status keep_saved(aot_fn *f, kn_tensor *const *in, int nin, kn_tensor **all) {
  kn_tensor **saved = calloc((size_t)f->nsaved + 1, sizeof *saved);
  kn_status st = saved ? KN_OK : kn__oom();
  for (int i = 0; st == KN_OK && i < f->nsaved; i++) /* no history: never the node's outputs */
    if (!(saved[i] = saved_value(f, in, nin, all[f->nuser + i]))) st = kn_last_status();
  if (st == KN_OK && (!f->caller_mode || kn_is_grad_enabled()))
    return attach(f, in, nin, all, saved);
  for (int i = 0; saved && i < f->nsaved; i++) kn_release(saved[i]);
  free(saved);
  return st;
}

static kn_status aot_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  aot_fn *f = state;
  if (nin != f->nin || nout != f->plan.nuser)
    return kn__error(KN_EINVAL, "aot: expected %d inputs and %d outputs, got %d and %d", f->nin,
                     f->plan.nuser, nin, nout);
  int n = f->nuser + f->nsaved;
  kn_tensor **all = calloc((size_t)n + (size_t)nout + 1, sizeof *all), **user = all + n;
  if (!all) return kn__oom();
  kn_status st = run_forward(f, in, nin, all, n);
  if (st == KN_OK && !f->inference) st = own_outputs(in, nin, all, f->nuser);
  if (st == KN_OK && !f->inference) st = keep_saved(f, in, nin, all);
  if (st == KN_OK) st = kn__aot_plan_apply(&f->plan, in, all, user);
  for (int i = 0; st == KN_OK && i < nout; i++) out[i] = kn__autorelease(user[i]);
  for (int i = 0; i < n; i++) kn_release(all[i]);
  free(all);
  return st;
}

/* ---- compiling ----------------------------------------------------------------------- */

static kn_status compile_inference(aot_fn *f, const kn__graph *g, const kn__aot_config *cfg,
                                   kn_tensor *const *ex, int n) {
  kn__aot_prepared pr;
  kn_status st = kn__aot_prepare(g, NULL, n, true, cfg, &pr);
  if (st != KN_OK) return st;
  f->inference = true;
  f->nuser = pr.nuser;
  kn__aot_plan_log(&f->plan, false);
  kn__aot_log_prepared(&pr);
  if (cfg->inference_passes && cfg->inference_passes(pr.fw) < 0) {
    kn__aot_prepared_fini(&pr);
    return kn_last_status();
  }
  kn__aot_phase ph;
  kn__aot_phase_begin(&ph, "aot_compile_fw");
  st = compile_graph(pr.fw, cfg->inference_compiler ? cfg->inference_compiler : cfg->fw_compiler,
                     cfg->fw_ud, ex, n, &f->fw);
  kn__aot_phase_end(&ph);
  pr.fw = NULL; /* the module owns it */
  kn__aot_prepared_fini(&pr);
  return st;
}

/* Meta example inputs of a graph's placeholders (owned array of owned tensors). */
static kn_tensor **examples_of(const kn__graph *g) {
  int n = kn__graph_num_inputs(g);
  kn_tensor **ex = calloc((size_t)n + 1, sizeof *ex);
  for (int i = 0; ex && i < n; i++) {
    const kn__vmeta *m = kn__graph_input(g, i)->meta;
    int64_t sz[KN_MAX_DIMS], sd[KN_MAX_DIMS];
    for (int d = 0; d < m->ndim; d++) {
      sz[d] = kn__sym_hint(m->sizes[d]);
      sd[d] = kn__sym_hint(m->strides[d]);
    }
    ex[i] = kn__empty_strided(m->ndim, sz, sd, m->dtype, KN_META);
  }
  return ex;
}

static void examples_free(kn_tensor **ex, int n) {
  for (int i = 0; ex && i < n; i++) kn_release(ex[i]);
  free(ex);
}

static kn_status compile_training(aot_fn *f, const kn__graph *g, const bool *rg,
                                  const kn__aot_config *cfg, kn_tensor *const *ex, int n) {
  kn__aot_prepared p;
  kn_status st = kn__aot_prepare(g, rg, n, false, cfg, &p);
  if (st != KN_OK) return st;
  f->nuser = p.nuser;
  f->ngrads = p.ngrads;
  f->nsaved = p.nsaved;
  f->out_diff = p.out_diff;
  f->grad_input = p.grad_input;
  p.out_diff = NULL;
  p.grad_input = NULL;
  kn__aot_plan_log(&f->plan, true);
  kn__aot_log_prepared(&p);
  kn_tensor **bex = examples_of(p.bw);
  int nb = kn__graph_num_inputs(p.bw);
  kn__aot_phase ph;
  kn__aot_phase_begin(&ph, "aot_compile_fw");
  st = compile_graph(p.fw, cfg->fw_compiler, cfg->fw_ud, ex, n, &f->fw);
  kn__aot_phase_end(&ph);
  p.fw = NULL;
  if (st == KN_OK) st = bex ? KN_OK : kn__oom();
  kn__aot_phase_begin(&ph, "aot_compile_bw");
  if (st == KN_OK) {
    st = compile_graph(p.bw, cfg->bw_compiler, cfg->bw_ud, bex, nb, &f->bw);
    p.bw = NULL; /* the module owns it */
  }
  kn__aot_phase_end(&ph);
  kn__aot_prepared_fini(&p);
  examples_free(bex, nb);
  return st;
}

/* The node is attached to the differentiable forward outputs the caller
** gets as they are: not to user outputs the plan rebuilds as aliases. */
static kn_status node_outputs(aot_fn *f) {
  if (!(f->node_out = calloc((size_t)f->nuser + 1, sizeof *f->node_out))) return kn__oom();
  for (int i = 0; i < f->nuser; i++) {
    int u = i - f->plan.nmutated;
    bool alias = u >= 0 && u < f->plan.nuser && f->plan.outs[u].kind != KN__AOT_OUT_NON_ALIAS;
    f->node_out[i] = f->out_diff[i] && !alias;
  }
  return KN_OK;
}

/* A training compile: grad mode is on, or some call node of g was traced
** with it on (kn_set_grad_enabled(true) inside a function called with it
** off). *caller: some node runs in the caller's mode (grad_mode -1). */
static bool needs_grad(const kn__graph *g, bool *caller) {
  bool forced = false;
  *caller = false;
  for (int i = 0, nn = kn__graph_num_nodes(g); i < nn; i++) {
    const kn__gnode *nd = kn__graph_node(g, i);
    if (nd->op != KN__GN_CALL) continue;
    *caller |= nd->grad_mode < 0;
    forced |= nd->grad_mode > 0;
  }
  return forced || kn_is_grad_enabled();
}

kn_status kn__aot_compile(kn_graph_module *gm, kn_tensor *const *ex, int n,
                          const kn__aot_config *cfg, kn_compiled_graph *out) {
  if (!gm || !cfg || !cfg->fw_compiler || !cfg->bw_compiler || !out || (n > 0 && !ex))
    return kn__error(KN_EINVAL, "aot: expected a graph module, its example inputs and compilers");
  const kn__graph *g = kn__graph_module_graph(gm);
  if (n != kn__graph_num_inputs(g))
    return kn__error(KN_EINVAL, "aot: expected %d example inputs, got %d", kn__graph_num_inputs(g), n);
  if (kn__aot_creates_params(g)) return kn__aot_compile_new_params(gm, ex, n, cfg, out);
  if (kn__aot_captures_grad_consts(g)) return kn__aot_compile_grad_consts(gm, ex, n, cfg, out);
  aot_fn *f = calloc(1, sizeof *f);
  bool *rg = calloc((size_t)n + 1, sizeof *rg);
  if (!f || !rg) return free(f), free(rg), kn__oom();
  atomic_init(&f->refs, 1);
  f->nin = n;
  f->run_into = cfg->fw_run_into;
  bool any = false;
  for (int i = 0; i < n; i++) { /* the placeholder's metadata also says it (no example given) */
    const kn__vmeta *m = kn__graph_input(g, i)->meta;
    any |= rg[i] = (ex[i] && ex[i]->requires_grad) || (m && m->requires_grad);
  }
  kn__aot_phase ph;
  kn__aot_phase_begin(&ph, "create_aot_dispatcher_function");
  kn__graph *fg = NULL, *pg = kn__graph_pre_grad(g);
  kn_status st = pg ? kn__aot_functionalize(pg, &fg, &f->plan) : kn_last_status();
  if (st == KN_OK)
    st = any && needs_grad(fg, &f->caller_mode) ? compile_training(f, fg, rg, cfg, ex, n)
                                                : compile_inference(f, fg, cfg, ex, n);
  kn__aot_phase_end(&ph);
  kn__graph_free(fg);
  kn__graph_free(pg);
  if (st == KN_OK && !f->inference) st = node_outputs(f);
  free(rg);
  if (st != KN_OK) {
    fn_release(f);
    return st;
  }
  *out = (kn_compiled_graph){aot_run, f, fn_release};
  return KN_OK;
}

kn_status kn__aot_eager_compile(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                kn_compiled_graph *out) {
  (void)ud;
  kn_backend_fn eager = NULL;
  void *eud = NULL;
  kn_status st = kn__backend_lookup("eager", NULL, &eager, &eud);
  if (st != KN_OK) return st;
  kn__aot_config cfg = {eager, eud, eager, eud, NULL, KN__AOT_PART_DEFAULT, NULL, NULL};
  return kn__aot_compile(gm, ex, n, &cfg, out);
}
