/*
** graph/graph_rewrite.c: passes that put new ops into a graph: the
** decomposition pass (a composite op becomes the ops its op-table kernel
** calls) and the pattern rewriter (a pattern graph's matches are replaced by
** a replacement graph). Both record the new ops the way the capture frontend
** does: a dispatcher mode (the recorder) sees each call made on meta tensors
** that stand for graph values, computes the outputs' metadata below it and
** inserts a call node before the node being replaced.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"
#include "ops/cuda_ops.h"
#include "tensor/tensor.h"

/* ---- meta tensors for graph values ----------------------------------------- */

static kn_tensor *meta_tensor(const kn__vmeta *m) {
  if (m->kind != KN__V_TENSOR) return kn__error(KN_EINVAL, "rewrite: a value without metadata"), NULL;
  int64_t sz[KN_MAX_DIMS], st[KN_MAX_DIMS];
  bool sym = !kn__sym_is_const(m->offset);
  for (int d = 0; d < m->ndim; d++) {
    sz[d] = kn__sym_hint(m->sizes[d]);
    st[d] = kn__sym_hint(m->strides[d]);
    sym = sym || !kn__sym_is_const(m->sizes[d]) || !kn__sym_is_const(m->strides[d]);
  }
  kn__storage *s = kn__storage_new(0, KN_META);
  kn_tensor *t = s ? kn__tensor_wrap(s, m->dtype, m->ndim, sz, st, kn__sym_hint(m->offset)) : NULL;
  if (s) kn__storage_release(s);
  if (t && sym) {
    t->sym = malloc(sizeof *t->sym);
    if (!t->sym) {
      kn_release(t);
      t = NULL;
    } else {
      memcpy(t->sym->sizes, m->sizes, sizeof m->sizes);
      memcpy(t->sym->strides, m->strides, sizeof m->strides);
      t->sym->offset = m->offset;
    }
  }
  if (!t) kn__oom();
  return t;
}

/* ---- the recorder ----------------------------------------------------------------- */

typedef struct recorder {
  kn__mode mode;
  kn__graph *g;
  kn_device device;  /* of the values recorded (the meta tensors report meta) */
  kn__tmap map;
} recorder;

static kn_status bind(recorder *r, kn_tensor *t, kn__gref v) { return kn__tmap_bind(&r->map, t, v); }

static kn_status lookup(void *ud, kn_tensor *t, kn__gref *out) {
  recorder *r = ud;
  if (kn__tmap_find(&r->map, t, out)) return KN_OK;
  return kn__error(KN_EINVAL, "rewrite: an op used a tensor that is no graph value "
                              "(a constant made outside the dispatcher)");
}

static kn_status record(kn__mode *self, kn__call *c, kn__outs *out) {
  recorder *r = self->state;
  kn_status st = kn__dispatch_below(self, c, out);
  if (st != KN_OK) return st;
  kn__vmeta *m = calloc((size_t)out->n + 1, sizeof *m);
  if (!m) return kn__oom();
  for (int i = 0; i < out->n; i++) {
    kn__vmeta_from_tensor(out->t[i], &m[i]);
    m[i].device = r->device;
  }
  kn__gnode *n = kn__graph_call_from(r->g, c, lookup, r, out->n, m);
  free(m);
  for (int i = 0; n && i < out->n; i++) {
    kn__gref v = kn__graph_value(r->g, n, i);
    if (!v.node || bind(r, out->t[i], v) != KN_OK) n = NULL;
  }
  if (n) return KN_OK;
  st = kn_last_status();
  kn__outs_fini(out); /* a failed call returns no outputs */
  kn__outs_init(out);
  return st;
}

static void recorder_init(recorder *r, kn__graph *g, const kn__gnode *at) {
  memset(r, 0, sizeof *r);
  r->mode = (kn__mode){"graph_rewrite", record, r};
  r->g = g;
  r->device = at->nout > 0 && at->meta[0].kind == KN__V_TENSOR ? at->meta[0].device : KN_CPU;
}

static void recorder_fini(recorder *r) {
  kn__tmap_fini(&r->map);
}

/* Erase what was inserted before `at` since there were `before` nodes. */
static void rollback(kn__graph *g, kn__gnode *at, int first) {
  for (int i = at->index - 1; i >= first; i--) {
    kn__gnode *n = g->nodes[i];
    if (n->nusers == 0) kn__graph_erase_node(g, n);
  }
}

/* ---- dispatcher calls from graph nodes ------------------------------------------- */

typedef kn_tensor *(*tensor_of_fn)(void *ud, kn__gref v);

/* The call of node n with tensors from tensor_of; int lists and tensor lists
** go to *scratch (caller frees). Symbolic ints pass their hints with their
** symbols attached (kn__arg.sym, borrowed from the graph), so a recording
** of the call keeps them; one in a Scalar position is an int Scalar. */
static kn_status build_call(const kn__gnode *n, tensor_of_fn tof, void *ud, kn__call *c,
                            void **scratch) {
  size_t need = 1;
  for (int i = 0; i < n->nargs; i++) {
    if (n->args[i].kind == KN__GA_INTS) need += (size_t)n->args[i].u.ints.n;
    if (n->args[i].kind == KN__GA_TENSORS) need += (size_t)n->args[i].u.ts.n;
  }
  union slot { int64_t i; kn_tensor *t; } *sp = malloc(need * sizeof *sp);
  *scratch = sp;
  if (!sp) return kn__oom();
  *c = (kn__call){.op = n->opdef, .nargs = n->nargs};
  for (int i = 0; i < n->nargs; i++) {
    const kn__garg *a = &n->args[i];
    kn__arg *o = &c->args[i];
    switch (a->kind) {
    case KN__GA_NONE: *o = KN_A_NONE; break;
    case KN__GA_TENSOR:
      *o = KN_A_T(a->u.t.node ? tof(ud, a->u.t) : NULL);
      if (a->u.t.node && !o->u.t) return kn_last_status();
      break;
    case KN__GA_TENSORS: {
      kn_tensor **v = (kn_tensor **)sp;
      for (int j = 0; j < a->u.ts.n; j++)
        if (!(sp++->t = tof(ud, a->u.ts.v[j]))) return kn_last_status();
      *o = KN_A_TS(v, a->u.ts.n);
      break;
    }
    case KN__GA_INT:
      *o = kn__schema_arg_is_scalar(n->opdef, i) ? KN_A_S(kn_int(kn__sym_hint(a->u.i)))
                                                  : KN_A_I(kn__sym_hint(a->u.i));
      o->sym = &a->u.i;
      break;
    case KN__GA_DOUBLE: *o = KN_A_D(a->u.d); break;
    case KN__GA_BOOL: *o = KN_A_B(a->u.b); break;
    case KN__GA_SCALAR: *o = KN_A_S(a->u.s); break;
    case KN__GA_INTS: {
      int64_t *v = &sp->i;
      for (int j = 0; j < a->u.ints.n; j++) sp++->i = kn__sym_hint(a->u.ints.v[j]);
      *o = KN_A_SYMINTS(v, a->u.ints.v, a->u.ints.n);
      break;
    }
    case KN__GA_DTYPE: *o = KN_A_DT(a->u.dt); break;
    case KN__GA_GEN: *o = KN_A_GEN(a->u.gen); break;
    }
  }
  return KN_OK;
}

/* ---- decomposition ------------------------------------------------------------------ */

/* Tensors of g's values for a decomposed node: fresh meta tensors, bound. */
static kn_tensor *bound_meta(void *ud, kn__gref v) {
  recorder *r = ud;
  for (int i = r->map.n - 1; i >= 0; i--)
    if (r->map.e[i].v.node == v.node && r->map.e[i].v.idx == v.idx) return r->map.e[i].t;
  kn_tensor *t = meta_tensor(&v.node->meta[v.idx]);
  if (!t) return NULL;
  kn_status st = bind(r, t, v);
  kn_release(t); /* the binding holds it */
  return st == KN_OK ? t : NULL;
}

/* The getitem nodes picking output k of multi-output n: their uses move to
** v[k] and they go (a getitem of a decomposed node would pick from one of
** its results instead). */
static kn_status bypass_getitems(kn__graph *g, kn__gnode *n, const kn__gref *v) {
  kn__gnode *users[64];
  int nu = kn__graph_users(g, n, users, 64);
  if (nu > 64) return kn__error(KN_EUNSUPPORTED, "decompose %s: more than 64 users", n->name);
  for (int i = 0; i < nu; i++) {
    kn__gnode *u = users[i];
    if (u->op != KN__GN_CALL || u->opdef || u->args[0].u.t.node != n) continue;
    int k = (int)u->args[1].u.i.c;
    if (k < 0 || k >= n->nout || kn__graph_replace_all_uses(g, (kn__gref){u, 0}, v[k]) < 0)
      return kn__error(KN_EINVAL, "decompose %s: getitem %s has no output to read", n->name, u->name);
    kn_status st = kn__graph_erase_node(g, u);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* Run rule (n's composite kernel, or a decomposition) under the recorder;
** rewire n's uses. */
static kn_status decompose_node(kn__graph *g, kn__gnode *n, kn__decomp_fn rule) {
  recorder r;
  recorder_init(&r, g, n);
  kn__gnode *prev = kn__graph_set_insert_point(g, n);
  int first = n->index;
  kn__call c;
  void *scratch = NULL;
  kn__outs outs;
  kn__outs_init(&outs);
  kn_status st = build_call(n, bound_meta, &r, &c, &scratch);
  if (st == KN_OK) st = kn__mode_push(&r.mode);
  if (st == KN_OK) {
    kn_device dev = kn__meta_values_device_set(r.device == KN_CUDA ? KN_CUDA : KN_META);
    st = rule(&c, &outs);
    kn__meta_values_device_set(dev);
    kn__mode_pop(&r.mode);
  }
  if (st == KN_OK && outs.n != n->nout)
    st = kn__error(KN_EINVAL, "decompose %s: %d outputs, the node has %d", n->name, outs.n, n->nout);
  kn__gref v[64];
  for (int k = 0; st == KN_OK && k < outs.n && k < 64; k++) st = lookup(&r, outs.t[k], &v[k]);
  if (st == KN_OK && n->nout > 1) st = bypass_getitems(g, n, v);
  for (int k = 0; st == KN_OK && k < outs.n && k < 64; k++)
    if (kn__graph_replace_all_uses(g, (kn__gref){n, k}, v[k]) < 0) st = kn_last_status();
  if (st == KN_OK) st = kn__graph_erase_node(g, n);
  else rollback(g, n, first);
  kn__graph_set_insert_point(g, prev);
  kn__outs_fini(&outs);
  free(scratch);
  recorder_fini(&r);
  return st;
}

static kn__decomp_fn composite_kernel(const kn__gnode *n) {
  return n->opdef && (n->opdef->flags & KN_OPF_COMPOSITE) ? n->opdef->kernel : NULL;
}

/* One sweep over g. */
static int decompose_once(kn__graph *g, kn__decomp_fn (*rule_of)(const kn__gnode *)) {
  int done = 0;
  for (int i = 0; i < g->n; i++) {
    kn__gnode *n = g->nodes[i];
    kn__decomp_fn rule = n->op == KN__GN_CALL ? composite_kernel(n) : NULL;
    /* a replayed grad mode matters to autograd only: a backend's table
    ** (whose kernels record no autograd) decomposes those calls too */
    if (rule && n->grad_mode >= 0) rule = NULL;
    if (!rule && n->op == KN__GN_CALL && rule_of) rule = rule_of(n);
    if (!rule || n->set_requires_grad || n->nout > 64) continue;
    int before = g->n;
    if (decompose_node(g, n, rule) != KN_OK) return -1;
    done++;
    i += g->n - before; /* the new nodes came before n, which is gone: continue after them */
  }
  return done;
}

int kn__graph_decompose(kn__graph *g) { return kn__graph_decompose_with(g, NULL); }

int kn__graph_decompose_with(kn__graph *g, kn__decomp_fn (*rule_of)(const kn__gnode *n)) {
  int total = 0;
  for (int round = 0; round < 8; round++) {
    int n = decompose_once(g, rule_of);
    if (n < 0) return -1;
    if (n == 0) break;
    total += n;
  }
  return total;
}

/* ---- pattern rewriting ----------------------------------------------------------- */

typedef struct match {
  const kn__graph *p;
  kn__gref bound[32];      /* per pattern placeholder */
  bool set[32];
  kn__gnode *nodes[64];    /* matched call nodes of g, root first */
  int nnodes;
} match;

static bool same_const(const kn__garg *a, const kn__garg *b) {
  kn__sb x = KN__SB_INIT, y = KN__SB_INIT;
  kn__gfmt_arg(&x, a);
  kn__gfmt_arg(&y, b);
  bool same = !kn__sb_failed(&x) && !kn__sb_failed(&y) && !strcmp(kn__sb_cstr(&x), kn__sb_cstr(&y));
  kn__sb_fini(&x);
  kn__sb_fini(&y);
  return same;
}

static bool match_ref(match *m, kn__gref pr, kn__gref gr);

static bool match_args(match *m, const kn__gnode *pn, const kn__gnode *gn) {
  if (pn->opdef != gn->opdef || pn->nargs != gn->nargs || pn->nout != gn->nout) return false;
  if (gn->grad_mode != -1 || gn->set_requires_grad) return false;
  for (int i = 0; i < pn->nargs; i++) {
    const kn__garg *a = &pn->args[i], *b = &gn->args[i];
    if (a->kind != b->kind) return false;
    if (a->kind == KN__GA_TENSOR) {
      if (!a->u.t.node != !b->u.t.node) return false;
      if (a->u.t.node && !match_ref(m, a->u.t, b->u.t)) return false;
    } else if (a->kind == KN__GA_TENSORS) {
      if (a->u.ts.n != b->u.ts.n) return false;
      for (int j = 0; j < a->u.ts.n; j++)
        if (!match_ref(m, a->u.ts.v[j], b->u.ts.v[j])) return false;
    } else if (!same_const(a, b)) {
      return false;
    }
  }
  return true;
}

static bool match_ref(match *m, kn__gref pr, kn__gref gr) {
  const kn__gnode *pn = pr.node;
  if (pn->op == KN__GN_PLACEHOLDER) {
    int k = pn->index;
    if (k >= 32) return false;
    if (m->set[k]) return m->bound[k].node == gr.node && m->bound[k].idx == gr.idx;
    m->set[k] = true;
    m->bound[k] = gr;
    return true;
  }
  if (pn->op != KN__GN_CALL || gr.node->op != KN__GN_CALL || pr.idx != gr.idx) return false;
  if (m->nnodes == 64) return false;
  m->nodes[m->nnodes++] = gr.node;
  return match_args(m, pn, gr.node);
}

typedef struct replay {
  recorder r;
  const match *m;
  kn_tensor ***vals;   /* per replacement node: its output tensors */
  const kn__graph *rep;
} replay;

static kn_tensor *replay_tensor(void *ud, kn__gref v) {
  replay *rp = ud;
  kn_tensor *t = rp->vals[v.node->index] ? rp->vals[v.node->index][v.idx] : NULL;
  if (!t) kn__error(KN_EINVAL, "replace_pattern: '%s' has no value", v.node->name);
  return t;
}

/* Run the replacement's calls on the matched values under the recorder. */
static kn_status replay_node(replay *rp, const kn__gnode *n) {
  kn_tensor **v = calloc((size_t)n->nout + 1, sizeof *v);
  if (!v) return kn__oom();
  rp->vals[n->index] = v;
  if (n->op == KN__GN_PLACEHOLDER) {
    v[0] = bound_meta(&rp->r, rp->m->bound[n->index]);
    return v[0] ? KN_OK : kn_last_status();
  }
  if (!n->opdef) { /* getitem */
    v[0] = replay_tensor(rp, n->args[0].u.t);
    return v[0] ? KN_OK : kn_last_status();
  }
  kn__call c;
  void *scratch = NULL;
  kn__outs outs;
  kn__outs_init(&outs);
  kn_status st = build_call(n, replay_tensor, rp, &c, &scratch);
  if (st == KN_OK) st = kn__dispatch(&c, &outs);
  for (int k = 0; st == KN_OK && k < n->nout && k < outs.n; k++) v[k] = outs.t[k]; /* bound */
  kn__outs_fini(&outs); /* the recorder's bindings keep the tensors */
  free(scratch);
  return st;
}

static kn_status replace_match(kn__graph *g, const match *m, const kn__graph *rep) {
  kn__gnode *root = m->nodes[0];
  replay rp = {.m = m, .rep = rep, .vals = calloc((size_t)rep->n + 1, sizeof(kn_tensor **))};
  recorder_init(&rp.r, g, root);
  if (!rp.vals) {
    recorder_fini(&rp.r);
    return kn__oom();
  }
  kn__gnode *prev = kn__graph_set_insert_point(g, root);
  int first = root->index;
  kn_status st = kn__mode_push(&rp.r.mode);
  bool pushed = st == KN_OK;
  for (int i = 0; st == KN_OK && i < rep->n; i++)
    if (rep->nodes[i]->op != KN__GN_OUTPUT) st = replay_node(&rp, rep->nodes[i]);
  if (pushed) kn__mode_pop(&rp.r.mode);
  kn__gref v = {0};
  if (st == KN_OK) {
    kn_tensor *res = replay_tensor(&rp, rep->output->args[0].u.t);
    st = res ? lookup(&rp.r, res, &v) : kn_last_status();
  }
  if (st == KN_OK && kn__graph_replace_all_uses(g, (kn__gref){root, 0}, v) < 0) st = kn_last_status();
  if (st != KN_OK) rollback(g, root, first);
  kn__graph_set_insert_point(g, prev);
  /* the matched nodes nothing uses any more */
  for (int i = 0; st == KN_OK && i < m->nnodes; i++)
    if (m->nodes[i]->graph == g && m->nodes[i]->nusers == 0) kn__graph_erase_node(g, m->nodes[i]);
  for (int i = 0; i < rep->n; i++) free(rp.vals[i]);
  free(rp.vals);
  recorder_fini(&rp.r);
  return st;
}

static kn_status check_pattern(const kn__graph *p, const kn__graph *rep) {
  if (!p->output || p->output->nargs != 1 || !rep->output || rep->output->nargs != 1)
    return kn__error(KN_EINVAL, "replace_pattern: pattern and replacement must return one value");
  if (p->ninputs != rep->ninputs || p->ninputs > 32)
    return kn__error(KN_EINVAL, "replace_pattern: the pattern has %d inputs, the replacement %d",
                     p->ninputs, rep->ninputs);
  const kn__gnode *root = p->output->args[0].u.t.node;
  if (root->op != KN__GN_CALL || !root->opdef)
    return kn__error(KN_EINVAL, "replace_pattern: the pattern must return an op's result");
  for (int i = 0; i < p->n; i++) {
    const kn__gnode *n = p->nodes[i];
    if (n->op == KN__GN_GET_ATTR ||
        (n->opdef && (n->opdef->flags & (KN_OPF_INPLACE | KN_OPF_RANDOM))))
      return kn__error(KN_EINVAL, "replace_pattern: '%s': patterns hold pure ops only", n->name);
  }
  return KN_OK;
}

int kn__graph_replace_pattern(kn__graph *g, const kn__graph *pattern, const kn__graph *rep) {
  if (check_pattern(pattern, rep) != KN_OK) return -1;
  const kn__gnode *proot = pattern->output->args[0].u.t.node;
  int count = 0, first_new = g->next_seq; /* nodes from here on are replacements */
  for (int i = 0; i < g->n; i++) {
    kn__gnode *n = g->nodes[i];
    if (n->op != KN__GN_CALL || n->opdef != proot->opdef || n->seq_nr >= first_new) continue;
    match m = {.p = pattern};
    if (!match_ref(&m, (kn__gref){(kn__gnode *)proot, 0}, (kn__gref){n, 0})) continue;
    if (replace_match(g, &m, rep) != KN_OK) return -1;
    count++;
    i = -1; /* indices moved: look again from the start; a replacement's own
            ** nodes are never matched, so this ends */
  }
  return count;
}
