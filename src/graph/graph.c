/*
** graph/graph.c: graph construction: nodes, arguments, user counts,
** placeholders named after their sources, getitem nodes for multi-output
** ops, source locations, renames and dead-code elimination.
** Everything a node points to is carved from the graph's arena.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"

/* ---- metadata helpers ---------------------------------------------------- */

void kn__vmeta_from_tensor(const kn_tensor *t, kn__vmeta *out) {
  memset(out, 0, sizeof *out);
  out->kind = KN__V_TENSOR;
  out->dtype = t->dtype;
  out->device = t->device;
  out->requires_grad = t->requires_grad;
  out->ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) {
    out->sizes[d] = t->sym ? t->sym->sizes[d] : kn__sym_const(t->sizes[d]);
    out->strides[d] = t->sym ? t->sym->strides[d] : kn__sym_const(t->strides[d]);
  }
  out->offset = t->sym ? t->sym->offset : kn__sym_const(t->offset);
}

void kn__vmeta_from_outmeta(const kn__outmeta *m, kn_device dev, bool requires_grad,
                            kn__vmeta *out) {
  memset(out, 0, sizeof *out);
  out->kind = KN__V_TENSOR;
  out->dtype = m->dtype;
  out->device = dev;
  out->requires_grad = requires_grad;
  out->ndim = m->ndim;
  kn_sym st = kn__sym_const(1);
  for (int d = m->ndim - 1; d >= 0; d--) {
    out->sizes[d] = m->sizes[d];
    if (m->view_of >= 0) {
      out->strides[d] = m->strides[d];
    } else {
      out->strides[d] = st;
      /* contiguous: stride of a size-0/1 dim is still the running product */
      st = kn__sym_mul(st, kn__sym_max(m->sizes[d], kn__sym_const(1)));
    }
  }
  out->offset = m->view_of >= 0 ? m->offset : kn__sym_const(0);
}

kn__garg kn__garg_ints64(const int64_t *v, int n, kn_sym *out) {
  for (int i = 0; i < n; i++) out[i] = kn__sym_const(v[i]);
  return KN_GA_INTS(out, n);
}

/* ---- graphs ------------------------------------------------------------- */

kn__graph *kn__graph_new(void) {
  kn__graph *g = calloc(1, sizeof *g);
  if (!g) {
    kn__oom();
    return NULL;
  }
  kn__arena_init(&g->arena, 0);
  kn__gnames_init(&g->names);
  kn__hm_init(&g->getitems, false);
  return g;
}

void kn__graph_free(kn__graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i]->attr) kn_release(g->nodes[i]->attr);
  if (g->owns_env) kn__shape_env_free(g->env);
  kn__hm_fini(&g->getitems);
  kn__gnames_fini(&g->names);
  kn__arena_fini(&g->arena);
  free(g->nodes);
  free(g);
}

void kn__graph_set_shape_env(kn__graph *g, kn__shape_env *env, bool take_ownership) {
  /* the graph always holds a reference: its nodes' sizes point into env */
  if (!take_ownership) kn__shape_env_retain(env);
  if (g->owns_env) kn__shape_env_free(g->env);
  g->env = env;
  g->owns_env = env != NULL;
}

kn__shape_env *kn__graph_shape_env(const kn__graph *g) { return g->env; }
int kn__graph_num_nodes(const kn__graph *g) { return g->n; }
kn__gnode *kn__graph_node(const kn__graph *g, int i) {
  return i >= 0 && i < g->n ? g->nodes[i] : NULL;
}
int kn__graph_num_inputs(const kn__graph *g) { return g->ninputs; }
kn__gnode *kn__graph_input(const kn__graph *g, int i) {
  return i >= 0 && i < g->ninputs ? g->nodes[i] : NULL;
}
kn__gnode *kn__graph_output_node(const kn__graph *g) { return g->output; }

int kn__graph_op_count(const kn__graph *g) {
  int c = 0;
  for (int i = 0; i < g->n; i++) c += g->nodes[i]->op == KN__GN_CALL && g->nodes[i]->opdef;
  return c;
}

kn__gnode *kn__graph_find(const kn__graph *g, const char *name) {
  bool found;
  kn__gnode *n = kn__hm_get(&g->names.used, name, &found);
  return found ? n : NULL;
}

/* ---- node creation ------------------------------------------------------ */

static void reindex(kn__graph *g, int from) {
  for (int i = from; i < g->n; i++) g->nodes[i]->index = i;
}

/* Insert n at position pos (growing the array). */
static kn_status insert_node(kn__graph *g, kn__gnode *n, int pos) {
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 16;
    kn__gnode **v = realloc(g->nodes, (size_t)cap * sizeof *v);
    if (!v) return kn__oom();
    g->nodes = v;
    g->cap = cap;
  }
  memmove(g->nodes + pos + 1, g->nodes + pos, (size_t)(g->n - pos) * sizeof *g->nodes);
  g->nodes[pos] = n;
  g->n++;
  reindex(g, pos);
  return KN_OK;
}

static kn__gnode *new_node(kn__graph *g, kn__gop op, const char *candidate, int nout,
                           const kn__vmeta *metas) {
  if (g->output && !g->insert_before)
    return kn__error(KN_ESTATE, "graph: cannot add a node after the output node"), NULL;
  kn__gnode *n = kn__arena_calloc(&g->arena, 1, sizeof *n);
  kn__vmeta *m = nout ? kn__arena_calloc(&g->arena, (size_t)nout, sizeof *m) : NULL;
  if (!n || (nout && !m)) return kn__oom(), NULL;
  for (int i = 0; i < nout; i++) {
    if (metas) m[i] = metas[i];
    else m[i].kind = KN__V_NONE;
  }
  n->graph = g;
  n->op = op;
  n->nout = nout;
  n->meta = m;
  n->seq_nr = g->next_seq;
  n->autograd_seq_nr = -1;
  n->grad_mode = -1;
  n->name = kn__gnames_create(&g->names, &g->arena, candidate, n);
  if (!n->name) return kn__oom(), NULL;
  return n;
}

static kn_status add_node(kn__graph *g, kn__gnode *n, int pos) {
  kn_status st = insert_node(g, n, pos);
  if (st != KN_OK) {
    kn__gnames_release(&g->names, n->name);
    return st;
  }
  g->next_seq++;
  return KN_OK;
}

/* Where a new non-placeholder node goes: before the insertion point, or last. */
static int append_pos(const kn__graph *g) {
  return g->insert_before ? g->insert_before->index : g->n;
}

kn__gnode *kn__graph_placeholder(kn__graph *g, const char *source, const kn__vmeta *meta) {
  if (!source || !*source) return kn__error(KN_EINVAL, "placeholder: empty source"), NULL;
  char *target = kn__graph_source_to_target(source);
  if (!target) return kn__oom(), NULL;
  char snake[256];
  kn__gnames_snake(target, snake, sizeof snake);
  kn__gnode *n = new_node(g, KN__GN_PLACEHOLDER, snake, 1, meta);
  if (n) {
    n->target = kn__arena_strdup(&g->arena, target);
    n->source = kn__arena_strdup(&g->arena, source);
    if (!n->target || !n->source) {
      kn__gnames_release(&g->names, n->name);
      n = NULL;
      kn__oom();
    }
  }
  free(target);
  if (!n || add_node(g, n, g->ninputs) != KN_OK) return NULL;
  g->ninputs++;
  return n;
}

kn__gnode *kn__graph_get_attr(kn__graph *g, const char *attr, kn_tensor *value) {
  if (!attr || !*attr || !value)
    return kn__error(KN_EINVAL, "get_attr: expected an attribute name and a tensor"), NULL;
  kn__vmeta m;
  kn__vmeta_from_tensor(value, &m);
  kn__gnode *n = new_node(g, KN__GN_GET_ATTR, attr, 1, &m);
  if (!n) return NULL;
  n->target = n->name; /* FX: the attribute is stored under the unique name */
  if (add_node(g, n, append_pos(g)) != KN_OK) return NULL;
  n->attr = kn_retain(value);
  return n;
}

/* Check a value reference against the graph; message names the node. */
static kn_status check_ref(const kn__graph *g, const char *who, kn__gref r, bool optional) {
  if (!r.node) {
    if (optional) return KN_OK;
    return kn__error(KN_EINVAL, "%s: a tensor argument refers to no node", who);
  }
  if (r.node->graph != g || r.node->index >= g->n || g->nodes[r.node->index] != r.node)
    return kn__error(KN_EINVAL, "%s: argument '%s' is not a node of this graph", who,
                     r.node->name);
  if (r.idx < 0 || r.idx >= r.node->nout)
    return kn__error(KN_EINVAL, "%s: argument refers to output %d of '%s', which has %d",
                     who, r.idx, r.node->name, r.node->nout);
  return KN_OK;
}

/* Copy args into the arena, validating refs; counts users. */
static kn__garg *copy_args(kn__graph *g, const char *who, int nargs, const kn__garg *args) {
  kn__garg *a = nargs ? kn__arena_calloc(&g->arena, (size_t)nargs, sizeof *a) : NULL;
  if (nargs && !a) return kn__oom(), NULL;
  for (int i = 0; i < nargs; i++) {
    a[i] = args[i];
    if (a[i].kind == KN__GA_TENSOR) {
      if (check_ref(g, who, a[i].u.t, true) != KN_OK) return NULL;
    } else if (a[i].kind == KN__GA_TENSORS) {
      int k = a[i].u.ts.n;
      kn__gref *v = k ? kn__arena_alloc(&g->arena, (size_t)k * sizeof *v) : NULL;
      if (k && !v) return kn__oom(), NULL;
      for (int j = 0; j < k; j++) {
        v[j] = args[i].u.ts.v[j];
        if (check_ref(g, who, v[j], false) != KN_OK) return NULL;
      }
      a[i].u.ts.v = v;
    } else if (a[i].kind == KN__GA_INTS) {
      int k = a[i].u.ints.n;
      if (k < 0) return kn__error(KN_EINVAL, "%s: negative list length", who), NULL;
      kn_sym *v = k ? kn__arena_alloc(&g->arena, (size_t)k * sizeof *v) : NULL;
      if (k && !v) return kn__oom(), NULL;
      if (k) memcpy(v, args[i].u.ints.v, (size_t)k * sizeof *v);
      a[i].u.ints.v = v;
    }
  }
  return a;
}

void kn__gnode_count_users(const kn__gnode *n, int delta) {
  for (int i = 0; i < n->nargs; i++) {
    const kn__garg *a = &n->args[i];
    if (a->kind == KN__GA_TENSOR && a->u.t.node) a->u.t.node->nusers += delta;
    if (a->kind == KN__GA_TENSORS)
      for (int j = 0; j < a->u.ts.n; j++) a->u.ts.v[j].node->nusers += delta;
  }
}

kn__gnode *kn__graph_call(kn__graph *g, const kn__opdef *op, int nargs, const kn__garg *args,
                          int nout, const kn__vmeta *metas) {
  if (!op) return kn__error(KN_EINVAL, "graph call: no op"), NULL;
  if (nargs < 0 || nargs > KN__MAX_ARGS || nout < 0)
    return kn__error(KN_EINVAL, "graph call %s: expected 0..%d arguments and outputs >= 0, "
                     "got %d arguments and %d outputs", op->name, KN__MAX_ARGS, nargs, nout),
           NULL;
  kn__garg *a = copy_args(g, op->name, nargs, args);
  if (nargs && !a) return NULL;
  char target[160];
  snprintf(target, sizeof target, "kiln.ops.%s", op->name);
  kn__gnode *n = new_node(g, KN__GN_CALL, op->name, nout, metas);
  if (!n) return NULL;
  n->target = kn__arena_strdup(&g->arena, target);
  if (!n->target) {
    kn__gnames_release(&g->names, n->name);
    return kn__oom(), NULL;
  }
  n->opdef = op;
  n->nargs = nargs;
  n->args = a;
  if (add_node(g, n, append_pos(g)) != KN_OK) return NULL;
  kn__gnode_count_users(n, 1);
  return n;
}

/* One dispatcher argument as a graph argument; lists use the scratch
** arrays (refs for tensor lists, syms for int lists). Symbolic arguments
** (kn__arg.sym) are recorded as their symbols. */
static kn_status from_arg(const kn__arg *a, kn__garg *out, kn__graph_lookup_fn lookup, void *ud,
                          kn__gref *refs, kn_sym *syms) {
  switch (a->kind) {
  case KN__A_NONE: *out = KN_GA_NONE; return KN_OK;
  case KN__A_TENSOR:
    *out = KN_GA_REF(((kn__gref){NULL, 0}));
    return a->u.t ? lookup(ud, a->u.t, &out->u.t) : KN_OK;
  case KN__A_TENSORS:
    for (int j = 0; j < a->u.ts.n; j++) {
      kn_status st = lookup(ud, a->u.ts.v[j], &refs[j]);
      if (st != KN_OK) return st;
    }
    *out = KN_GA_TS(refs, a->u.ts.n);
    return KN_OK;
  case KN__A_INT: *out = a->sym ? KN_GA_SYM(a->sym[0]) : KN_GA_I(a->u.i); return KN_OK;
  case KN__A_DOUBLE: *out = KN_GA_D(a->u.d); return KN_OK;
  case KN__A_BOOL: *out = KN_GA_B(a->u.b); return KN_OK;
  case KN__A_SCALAR: /* a symbolic int passed as a Scalar is an int value */
    *out = a->sym && !kn__sym_is_const(a->sym[0]) ? KN_GA_SYM(a->sym[0]) : KN_GA_S(a->u.s);
    return KN_OK;
  case KN__A_INTS:
    if (!a->sym) {
      *out = kn__garg_ints64(a->u.ints.v, a->u.ints.n, syms);
      return KN_OK;
    }
    for (int j = 0; j < a->u.ints.n; j++) syms[j] = a->sym[j];
    *out = KN_GA_INTS(syms, a->u.ints.n);
    return KN_OK;
  case KN__A_DTYPE: *out = KN_GA_DT(a->u.dt); return KN_OK;
  case KN__A_GEN: *out = KN_GA_GEN(a->u.gen); return KN_OK;
  }
  return kn__error(KN_EINVAL, "graph call: unknown argument kind %d", (int)a->kind);
}

kn__gnode *kn__graph_call_from(kn__graph *g, const kn__call *c, kn__graph_lookup_fn lookup,
                               void *ud, int nout, const kn__vmeta *metas) {
  if (!c || !c->op || !lookup || c->nargs < 0 || c->nargs > KN__MAX_ARGS)
    return kn__error(KN_EINVAL, "graph call: expected a call with an op and a lookup"), NULL;
  size_t nref = 0, nsym = 0;
  for (int i = 0; i < c->nargs; i++) {
    if (c->args[i].kind == KN__A_TENSORS && c->args[i].u.ts.n > 0) nref += (size_t)c->args[i].u.ts.n;
    if (c->args[i].kind == KN__A_INTS && c->args[i].u.ints.n > 0) nsym += (size_t)c->args[i].u.ints.n;
  }
  kn__gref *refs = malloc((nref + 1) * sizeof *refs);
  kn_sym *syms = malloc((nsym + 1) * sizeof *syms);
  kn__gnode *n = NULL;
  kn__garg args[KN__MAX_ARGS];
  if (!refs || !syms) {
    kn__oom();
    goto done;
  }
  size_t r = 0, s = 0;
  for (int i = 0; i < c->nargs; i++) {
    if (from_arg(&c->args[i], &args[i], lookup, ud, refs + r, syms + s) != KN_OK) goto done;
    if (c->args[i].kind == KN__A_TENSORS) r += (size_t)c->args[i].u.ts.n;
    if (c->args[i].kind == KN__A_INTS) s += (size_t)c->args[i].u.ints.n;
  }
  n = kn__graph_call(g, c->op, c->nargs, args, nout, metas);
done:
  free(refs);
  free(syms);
  return n;
}

kn__gnode *kn__graph_getitem(kn__graph *g, kn__gnode *src, int k) {
  if (!src) return kn__error(KN_EINVAL, "getitem: no source node"), NULL;
  if (check_ref(g, "getitem", (kn__gref){src, k}, false) != KN_OK) return NULL;
  uint64_t key = ((uint64_t)src->seq_nr << 20) | (uint64_t)k;
  bool found;
  kn__gnode *old = kn__hm_get_u64(&g->getitems, key, &found);
  if (found) return old;
  kn__garg args[2] = {KN_GA_TI(src, k), KN_GA_I(k)};
  kn__garg *a = copy_args(g, "getitem", 2, args);
  if (!a) return NULL;
  kn__gnode *n = new_node(g, KN__GN_CALL, "getitem", 1, &src->meta[k]);
  if (!n) return NULL;
  n->target = "getitem";
  n->nargs = 2;
  n->args = a;
  if (add_node(g, n, append_pos(g)) != KN_OK) return NULL;
  kn__gnode_count_users(n, 1);
  /* If the cache entry cannot be stored, a later request makes a second
  ** getitem node for the same output: still a correct graph. */
  (void)kn__hm_put_u64(&g->getitems, key, n);
  return n;
}

kn__gref kn__graph_value(kn__graph *g, kn__gnode *n, int k) {
  if (n && n->nout == 1 && k == 0) return (kn__gref){n, 0};
  kn__gnode *gi = kn__graph_getitem(g, n, k);
  return (kn__gref){gi, 0};
}

kn__gnode *kn__graph_output(kn__graph *g, int nvals, const kn__gref *vals) {
  if (nvals < 0) return kn__error(KN_EINVAL, "output: negative count"), NULL;
  kn__garg *a = nvals ? kn__arena_calloc(&g->arena, (size_t)nvals, sizeof *a) : NULL;
  if (nvals && !a) return kn__oom(), NULL;
  for (int i = 0; i < nvals; i++) {
    if (check_ref(g, "output", vals[i], false) != KN_OK) return NULL;
    a[i] = KN_GA_REF(vals[i]);
  }
  if (g->output) return kn__error(KN_ESTATE, "output: the graph has an output node"), NULL;
  kn__gnode *n = new_node(g, KN__GN_OUTPUT, "output", 0, NULL);
  if (!n) return NULL;
  n->target = "output";
  n->nargs = nvals;
  n->args = a;
  if (add_node(g, n, g->n) != KN_OK) return NULL;
  kn__gnode_count_users(n, 1);
  g->output = n;
  return n;
}

/* ---- metadata, renames, erasure ----------------------------------------- */

kn_status kn__graph_node_set_stack(kn__gnode *n, const kn__gframe *stack, int nstack,
                                   const char *code) {
  kn__graph *g = n->graph;
  kn__gframe *fr = nstack > 0 ? kn__arena_alloc(&g->arena, (size_t)nstack * sizeof *fr) : NULL;
  if (nstack > 0 && !fr) return kn__oom();
  for (int i = 0; i < nstack; i++) {
    fr[i].line = stack[i].line;
    fr[i].file = kn__arena_strdup(&g->arena, stack[i].file ? stack[i].file : "");
    fr[i].func = kn__arena_strdup(&g->arena, stack[i].func ? stack[i].func : "");
    if (!fr[i].file || !fr[i].func) return kn__oom();
  }
  const char *c = code ? kn__arena_strdup(&g->arena, code) : NULL;
  if (code && !c) return kn__oom();
  n->stack = fr;
  n->nstack = nstack > 0 ? nstack : 0;
  n->code = c;
  return KN_OK;
}

kn_status kn__graph_node_set_name_hint(kn__gnode *n, const char *hint) {
  if (!n || !hint || !*hint) return kn__error(KN_EINVAL, "set_name_hint: empty name");
  kn__graph *g = n->graph;
  const char *old = n->name;
  kn__gnames_release(&g->names, old);
  const char *name = kn__gnames_create(&g->names, &g->arena, hint, n);
  if (!name) {
    kn__hm_put(&g->names.used, old, n);
    return kn__oom();
  }
  n->name = name;
  if (n->op == KN__GN_GET_ATTR) n->target = name;
  return KN_OK;
}

kn_status kn__graph_erase_node(kn__graph *g, kn__gnode *n) {
  if (!n || n->graph != g || n->index >= g->n || g->nodes[n->index] != n)
    return kn__error(KN_EINVAL, "erase_node: not a node of this graph");
  if (n->nusers > 0)
    return kn__error(KN_ESTATE, "erase_node: '%s' still has %d users", n->name, n->nusers);
  kn__gnode_count_users(n, -1);
  if (n->op == KN__GN_CALL && !n->opdef) {
    uint64_t key = ((uint64_t)n->args[0].u.t.node->seq_nr << 20) | (uint64_t)n->args[0].u.t.idx;
    kn__hm_del_u64(&g->getitems, key);
  }
  if (n == g->output) g->output = NULL;
  if (n == g->insert_before) g->insert_before = NULL;
  if (n->op == KN__GN_PLACEHOLDER) g->ninputs--;
  kn__gnames_release(&g->names, n->name);
  if (n->attr) kn_release(n->attr);
  n->attr = NULL;
  int pos = n->index;
  memmove(g->nodes + pos, g->nodes + pos + 1, (size_t)(g->n - pos - 1) * sizeof *g->nodes);
  g->n--;
  reindex(g, pos);
  n->graph = NULL; /* the arena keeps the memory; the pointer is now dead */
  return KN_OK;
}

static bool has_side_effects(const kn__gnode *n) {
  return n->opdef && (n->opdef->flags & (KN_OPF_INPLACE | KN_OPF_RANDOM));
}

int kn__graph_eliminate_dead_code(kn__graph *g) {
  int removed = 0;
  for (int i = g->n - 1; i >= 0; i--) {
    kn__gnode *n = g->nodes[i];
    if ((n->op == KN__GN_CALL || n->op == KN__GN_GET_ATTR) && n->nusers == 0 &&
        !has_side_effects(n) &&
        kn__graph_erase_node(g, n) == KN_OK)
      removed++;
  }
  return removed;
}
