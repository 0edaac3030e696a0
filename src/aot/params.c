/*
** aot/params.c: parameters created inside the compiled function (PyTorch's
** nn.Parameter built in forward; in C kn_set_requires_grad on a fresh tensor,
** a call node with set_requires_grad). As PyTorch lifts such a parameter into
** a graph input, the captured graph is split in two:
**   - the prologue: the calls the new leaves are made of (and nothing else),
**     returning the leaves; run by the interpreter without grad on every call,
**     then each result is made to require grad (a new leaf per call, as eager);
**   - the main graph: the captured graph with each new leaf replaced by a
**     placeholder appended after the inputs, compiled by kn__aot_compile as a
**     graph with one more input that requires grad.
** Their gradients flow to the new leaves, as in eager mode.
**
** Captured constants that require grad (a global parameter the function
** reads: a get_attr whose tensor requires grad) are lifted the same way,
** as PyTorch lifts a module's parameters into inputs: each becomes a
** placeholder after the inputs and every call passes the tensor itself, so
** its gradient accumulates in its .grad as in eager mode, and a function
** that returns it returns the caller's tensor (an is_input output).
*/
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "core/error.h"
#include "kiln/autograd.h"
#include "tensor/tensor.h"

bool kn__aot_creates_params(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++)
    if (kn__graph_node(g, i)->set_requires_grad) return true;
  return false;
}

/* The compiled pair: the prologue's program and the inner AOT callable. */
typedef struct lifted {
  kn__graph *pro;   /* owned */
  kn__gprog *prog;  /* over pro */
  kn_graph_module *main_gm;
  kn_compiled_graph inner;
  int nparams;
} lifted;

static void lifted_free(void *p) {
  lifted *l = p;
  if (!l) return;
  if (l->inner.free_state) l->inner.free_state(l->inner.state);
  kn_graph_module_free(l->main_gm);
  kn__gprog_free(l->prog);
  kn__graph_free(l->pro);
  free(l);
}

/* ---- the prologue ----------------------------------------------------------------- */

/* Mark the call nodes the new leaves are computed from (and the leaves). */
static void mark_ancestors(const kn__graph *g, bool *mark) {
  for (int i = kn__graph_num_nodes(g) - 1; i >= 0; i--) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->set_requires_grad) mark[i] = true;
    if (!mark[i] || n->op != KN__GN_CALL) continue;
    for (int a = 0; a < n->nargs; a++) {
      if (n->args[a].kind == KN__GA_TENSOR && n->args[a].u.t.node)
        mark[n->args[a].u.t.node->index] = true;
      for (int k = 0; n->args[a].kind == KN__GA_TENSORS && k < n->args[a].u.ts.n; k++)
        mark[n->args[a].u.ts.v[k].node->index] = true;
    }
  }
}

/* Argument a of n with values mapped through map[] (lists into *buf). */
static kn__garg remap_arg(const kn__garg *a, kn__gnode **map, kn__gref *buf) {
  kn__garg r = *a;
  if (a->kind == KN__GA_TENSOR && a->u.t.node) {
    r.u.t = (kn__gref){map[a->u.t.node->index], a->u.t.idx};
  } else if (a->kind == KN__GA_TENSORS) {
    for (int k = 0; k < a->u.ts.n; k++)
      buf[k] = (kn__gref){map[a->u.ts.v[k].node->index], a->u.ts.v[k].idx};
    r.u.ts.v = buf;
  }
  return r;
}

/* A copy of marked node n in p, arguments mapped (NULL with an error). */
static kn__gnode *copy_marked(kn__graph *p, const kn__gnode *n, kn__gnode **map) {
  if (n->op == KN__GN_PLACEHOLDER) return kn__graph_placeholder(p, n->source, n->meta);
  if (n->op == KN__GN_GET_ATTR) return kn__graph_get_attr(p, n->target, n->attr);
  if (!n->opdef) return kn__graph_getitem(p, map[n->args[0].u.t.node->index], (int)kn__sym_hint(n->args[1].u.i));
  size_t total = 1;
  for (int a = 0; a < n->nargs; a++)
    if (n->args[a].kind == KN__GA_TENSORS) total += (size_t)n->args[a].u.ts.n;
  kn__gref *buf = malloc(total * sizeof *buf), *at = buf;
  kn__garg args[KN__MAX_ARGS];
  if (!buf) return kn__oom(), NULL;
  for (int a = 0; a < n->nargs; a++) {
    args[a] = remap_arg(&n->args[a], map, at);
    if (n->args[a].kind == KN__GA_TENSORS) at += n->args[a].u.ts.n;
  }
  kn__gnode *c = kn__graph_call(p, n->opdef, n->nargs, args, n->nout, n->meta);
  free(buf);
  if (c) c->grad_mode = n->grad_mode;
  return c;
}

/* Every placeholder (the prologue takes the call's inputs), the marked
** nodes, and the new leaves returned. Owned graph or NULL. */
static kn__graph *prologue(const kn__graph *g, const bool *mark, int *nparams) {
  int nn = kn__graph_num_nodes(g);
  kn__graph *p = kn__graph_new();
  kn__gnode **map = calloc((size_t)nn + 1, sizeof *map);
  kn__gref *outs = calloc((size_t)nn + 1, sizeof *outs);
  kn_status st = p && map && outs ? KN_OK : kn__oom();
  if (st == KN_OK) kn__graph_set_shape_env(p, kn__graph_shape_env(g), false);
  int np = 0;
  for (int i = 0; st == KN_OK && i < nn; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->op != KN__GN_PLACEHOLDER && !mark[i]) continue;
    if (!(map[i] = copy_marked(p, n, map))) st = kn_last_status();
    else if (n->set_requires_grad) outs[np++] = (kn__gref){map[i], 0};
  }
  if (st == KN_OK && !kn__graph_output(p, np, outs)) st = kn_last_status();
  free(map);
  free(outs);
  if (st != KN_OK) {
    kn__graph_free(p);
    return NULL;
  }
  *nparams = np;
  return p;
}

/* ---- the main graph ---------------------------------------------------------------- */

/* g with each new leaf a placeholder after the inputs ("param_created_inside_k"). */
static kn__graph *main_graph(const kn__graph *g) {
  kn__graph *m = kn__graph_copy(g);
  if (!m) return NULL;
  int k = 0;
  for (int i = 0; i < kn__graph_num_nodes(m); i++) {
    kn__gnode *n = kn__graph_node(m, i);
    if (!n->set_requires_grad) continue;
    char src[64];
    snprintf(src, sizeof src, "param_created_inside_%d", k++);
    kn__vmeta vm = n->meta[0];
    vm.requires_grad = true;
    kn__gnode *at = kn__graph_set_insert_point(m, n); /* the output node exists */
    kn__gnode *ph = kn__graph_placeholder(m, src, &vm); /* n moves to i + 1 */
    kn__graph_set_insert_point(m, at);
    if (!ph || kn__graph_replace_all_uses(m, (kn__gref){n, 0}, (kn__gref){ph, 0}) < 0 ||
        kn__graph_erase_node(m, n) != KN_OK) {
      kn__graph_free(m);
      return NULL;
    }
  }
  kn__graph_eliminate_dead_code(m);
  return m;
}

/* ---- a call ----------------------------------------------------------------------------- */

static kn_status lifted_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  lifted *l = state;
  kn_tensor **all = calloc((size_t)nin + (size_t)l->nparams + 1, sizeof *all);
  if (!all) return kn__oom();
  memcpy(all, in, (size_t)nin * sizeof *all);
  bool prev = kn_no_grad_begin();
  kn_status st = kn__gprog_run(l->prog, in, nin, all + nin, l->nparams);
  kn_no_grad_end(prev);
  if (st != KN_OK) {
    free(all);
    return st;
  }
  for (int k = 0; st == KN_OK && k < l->nparams; k++)
    st = kn_set_requires_grad(all[nin + k], true);
  if (st == KN_OK) st = l->inner.run(l->inner.state, all, nin + l->nparams, out, nout);
  for (int k = 0; k < l->nparams; k++) kn_release(all[nin + k]);
  free(all);
  return st;
}

/* Example inputs of the main graph: the call's, then a meta tensor that
** requires grad per new leaf (owned array; entries from nin on owned). */
static kn_tensor **main_examples(const kn__graph *m, kn_tensor *const *ex, int nin, int np) {
  kn_tensor **all = calloc((size_t)nin + (size_t)np + 1, sizeof *all);
  if (!all) return NULL;
  memcpy(all, ex, (size_t)nin * sizeof *all);
  for (int k = 0; k < np; k++) {
    const kn__vmeta *vm = kn__graph_input(m, nin + k)->meta;
    int64_t sz[KN_MAX_DIMS], sd[KN_MAX_DIMS];
    for (int d = 0; d < vm->ndim; d++) {
      sz[d] = kn__sym_hint(vm->sizes[d]);
      sd[d] = kn__sym_hint(vm->strides[d]);
    }
    all[nin + k] = kn__empty_strided(vm->ndim, sz, sd, vm->dtype, KN_META);
    if (!all[nin + k] || kn_set_requires_grad(all[nin + k], true) != KN_OK) {
      for (int j = nin; j <= nin + k; j++) kn_release(all[j]);
      free(all);
      return NULL;
    }
  }
  return all;
}

/* ---- captured constants that require grad --------------------------------------------- */

static bool grad_const(const kn__gnode *n) {
  return n->op == KN__GN_GET_ATTR && n->attr && n->attr->requires_grad;
}

bool kn__aot_captures_grad_consts(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++)
    if (grad_const(kn__graph_node(g, i))) return true;
  return false;
}

/* The compiled graph with the lifted constants (retained) and the callable. */
typedef struct consts {
  kn_tensor **t;
  int n;
  kn_graph_module *main_gm;
  kn_compiled_graph inner;
} consts;

static void consts_free(void *p) {
  consts *c = p;
  if (!c) return;
  if (c->inner.free_state) c->inner.free_state(c->inner.state);
  kn_graph_module_free(c->main_gm);
  for (int k = 0; k < c->n; k++) kn_release(c->t[k]);
  free(c->t);
  free(c);
}

/* The placeholder standing for the constant n reads (made at its first get_attr). */
static kn__gnode *const_placeholder(kn__graph *m, consts *c, kn__gnode *n, kn__gnode **ph) {
  for (int k = 0; k < c->n; k++)
    if (c->t[k] == n->attr) return ph[k];
  char src[64];
  snprintf(src, sizeof src, "const_requiring_grad_%d", c->n);
  kn__vmeta vm = n->meta[0];
  vm.requires_grad = true;
  kn__gnode *at = kn__graph_set_insert_point(m, n); /* the output node exists */
  kn__gnode *p = kn__graph_placeholder(m, src, &vm);
  kn__graph_set_insert_point(m, at);
  if (!p) return NULL;
  ph[c->n] = p;
  c->t[c->n++] = kn_retain(n->attr);
  return p;
}

/* g with each constant that requires grad read from a placeholder. */
static kn__graph *const_graph(const kn__graph *g, consts *c) {
  kn__graph *m = kn__graph_copy(g);
  int nn = kn__graph_num_nodes(g);
  kn__gnode **ph = calloc((size_t)nn + 1, sizeof *ph), **gets = calloc((size_t)nn + 1, sizeof *gets);
  c->t = calloc((size_t)nn + 1, sizeof *c->t);
  kn_status st = m && ph && gets && c->t ? KN_OK : kn__oom();
  int ng = 0; /* the nodes first: placeholders are inserted before them */
  for (int i = 0; st == KN_OK && i < nn; i++)
    if (grad_const(kn__graph_node(m, i))) gets[ng++] = kn__graph_node(m, i);
  for (int k = 0; st == KN_OK && k < ng; k++) {
    kn__gnode *p = const_placeholder(m, c, gets[k], ph);
    if (!p || kn__graph_replace_all_uses(m, (kn__gref){gets[k], 0}, (kn__gref){p, 0}) < 0 ||
        kn__graph_erase_node(m, gets[k]) != KN_OK)
      st = kn_last_status();
  }
  free(ph);
  free(gets);
  if (st == KN_OK) return m;
  kn__graph_free(m);
  return NULL;
}

static kn_status consts_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  consts *c = state;
  kn_tensor **all = calloc((size_t)nin + (size_t)c->n + 1, sizeof *all);
  if (!all) return kn__oom();
  memcpy(all, in, (size_t)nin * sizeof *all);
  memcpy(all + nin, c->t, (size_t)c->n * sizeof *all);
  kn_status st = c->inner.run(c->inner.state, all, nin + c->n, out, nout);
  free(all);
  return st;
}

kn_status kn__aot_compile_grad_consts(kn_graph_module *gm, kn_tensor *const *ex, int n,
                                      const kn__aot_config *cfg, kn_compiled_graph *out) {
  consts *c = calloc(1, sizeof *c);
  if (!c) return kn__oom();
  kn__graph *m = const_graph(kn__graph_module_graph(gm), c);
  kn_status st = m ? kn__graph_module_new(m, &c->main_gm) : kn_last_status();
  kn_tensor **mex = st == KN_OK ? main_examples(kn__graph_module_graph(c->main_gm), ex, n, c->n)
                                : NULL;
  if (st == KN_OK && !mex) st = kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
  if (st == KN_OK) st = kn__aot_compile(c->main_gm, mex, n + c->n, cfg, &c->inner);
  for (int k = 0; mex && k < c->n; k++) kn_release(mex[n + k]);
  free(mex);
  if (st != KN_OK) {
    consts_free(c);
    return st;
  }
  *out = (kn_compiled_graph){consts_run, c, consts_free};
  return KN_OK;
}

kn_status kn__aot_compile_new_params(kn_graph_module *gm, kn_tensor *const *ex, int n,
                                     const kn__aot_config *cfg, kn_compiled_graph *out) {
  const kn__graph *g = kn__graph_module_graph(gm);
  int nn = kn__graph_num_nodes(g);
  bool *mark = calloc((size_t)nn + 1, sizeof *mark);
  lifted *l = calloc(1, sizeof *l);
  if (!mark || !l) return free(mark), free(l), kn__oom();
  mark_ancestors(g, mark);
  l->pro = prologue(g, mark, &l->nparams);
  free(mark);
  kn_status st = l->pro ? kn__gprog_new(l->pro, &l->prog) : kn_last_status();
  kn__graph *m = st == KN_OK ? main_graph(g) : NULL;
  if (st == KN_OK && !m) st = kn_last_status();
  if (st == KN_OK) st = kn__graph_module_new(m, &l->main_gm);
  kn_tensor **mex = st == KN_OK ? main_examples(kn__graph_module_graph(l->main_gm), ex, n,
                                                l->nparams) : NULL;
  if (st == KN_OK && !mex) st = kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
  if (st == KN_OK) st = kn__aot_compile(l->main_gm, mex, n + l->nparams, cfg, &l->inner);
  for (int k = 0; mex && k < l->nparams; k++) kn_release(mex[n + k]);
  free(mex);
  if (st != KN_OK) {
    lifted_free(l);
    return st;
  }
  *out = (kn_compiled_graph){lifted_run, l, lifted_free};
  return KN_OK;
}
