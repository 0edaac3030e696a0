/*
** inductor/lower.c: the plan of a graph. Every node gets a kind: graph
** inputs and constants (read in place), pointwise nodes inductor computes
** (kernels), and extern calls of the eager op for everything else. A
** pointwise node whose value has exactly one user, that user pointwise over
** the same sizes, is inlined into it (vertical fusion): a chain of such
** nodes becomes one loop and its intermediates never exist. Graphs with
** in-place ops are not fused (a mutation between producer and consumer
** would be reordered). Value slots number the buffers a run holds.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"

static bool same_sizes(const kn__vmeta *a, const kn__vmeta *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d].c != b->sizes[d].c || a->sizes[d].e != b->sizes[d].e) return false;
  return true;
}

static bool has_inplace(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->opdef && (n->opdef->flags & KN_OPF_INPLACE)) return true;
  }
  return false;
}

/* user[i]: the index of a node that reads node i (the last one seen). */
static void find_users(const kn__graph *g, int *user) {
  int nn = kn__graph_num_nodes(g);
  for (int i = 0; i < nn; i++) user[i] = -1;
  for (int i = 0; i < nn; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    for (int a = 0; a < n->nargs; a++) {
      const kn__garg *ga = &n->args[a];
      if (ga->kind == KN__GA_TENSOR && ga->u.t.node) user[ga->u.t.node->index] = i;
      for (int j = 0; ga->kind == KN__GA_TENSORS && j < ga->u.ts.n; j++)
        if (ga->u.ts.v[j].node) user[ga->u.ts.v[j].node->index] = i;
    }
  }
}

static kn_status alloc_plan(kn__ind_plan *p, int nn) {
  p->nodes = calloc((size_t)nn + 1, sizeof *p->nodes);
  p->step_node = calloc((size_t)nn + 1, sizeof *p->step_node);
  /* at most one slot per output value */
  int nv = 1;
  for (int i = 0; i < nn; i++) nv += kn__graph_node(p->g, i)->nout;
  p->slot_node = calloc((size_t)nv, sizeof *p->slot_node);
  p->slot_out = calloc((size_t)nv, sizeof *p->slot_out);
  if (!p->nodes || !p->step_node || !p->slot_node || !p->slot_out) return kn__oom();
  return KN_OK;
}

static int new_slots(kn__ind_plan *p, const kn__gnode *n, int count) {
  int first = p->nslots;
  for (int k = 0; k < count; k++) {
    p->slot_node[p->nslots] = n;
    p->slot_out[p->nslots++] = k;
  }
  return first;
}

/* sum / mean / amax of a float tensor over its last red_k dims (all dims
** when the dim list is empty or absent), no dtype argument. */
static bool reduction(const kn__gnode *n, kn__ind_node *in) {
  int id = n->opdef->id;
  int op = id == KN_OP_SUM || id == KN_OP_SUM_DIM ? 0
           : id == KN_OP_MEAN || id == KN_OP_MEAN_DIM ? 1
           : id == KN_OP_AMAX ? 2 : -1;
  if (op < 0 || n->nout != 1 || n->args[0].kind != KN__GA_TENSOR || !n->args[0].u.t.node)
    return false;
  const kn__vmeta *x = &n->args[0].u.t.node->meta[n->args[0].u.t.idx];
  bool dims_arg = id == KN_OP_SUM_DIM || id == KN_OP_MEAN_DIM || id == KN_OP_AMAX;
  int dt_arg = id == KN_OP_AMAX ? -1 : dims_arg ? 3 : 1; /* dtype= must be absent */
  if (dt_arg >= 0 && n->nargs > dt_arg && n->args[dt_arg].kind != KN__GA_NONE) return false;
  if ((x->dtype != KN_FLOAT32 && x->dtype != KN_FLOAT64) || n->meta[0].dtype != x->dtype ||
      x->ndim == 0)
    return false;
  bool seen[KN_MAX_DIMS] = {false};
  int k = 0;
  if (dims_arg && n->args[1].kind == KN__GA_INTS && n->args[1].u.ints.n > 0) {
    for (int j = 0; j < n->args[1].u.ints.n; j++) {
      kn_sym d = n->args[1].u.ints.v[j];
      int64_t dd = d.c < 0 ? d.c + x->ndim : d.c;
      if (!kn__sym_is_const(d) || dd < 0 || dd >= x->ndim || seen[dd]) return false;
      seen[dd] = true;
      k++;
    }
    for (int d = x->ndim - k; d < x->ndim; d++)
      if (!seen[d]) return false; /* not the last dims */
  } else {
    k = x->ndim;
  }
  for (int d = x->ndim - k; op == 2 && d < x->ndim; d++)
    if (kn__sym_is_const(x->sizes[d]) && x->sizes[d].c == 0) return false; /* amax of nothing */
  in->red_op = op;
  in->red_k = k;
  return true;
}

static void classify(kn__ind_plan *p, const kn__gnode *n) {
  kn__ind_node *in = &p->nodes[n->index];
  in->slot = -1;
  switch (n->op) {
  case KN__GN_PLACEHOLDER: in->kind = KN__IND_INPUT; break;
  case KN__GN_GET_ATTR: in->kind = KN__IND_ATTR; break;
  case KN__GN_OUTPUT: in->kind = KN__IND_SKIP; return;
  case KN__GN_CALL:
    if (!n->opdef) in->kind = KN__IND_ALIAS;
    else if (kn__ind_formula_for(n, &in->f)) in->kind = KN__IND_PW;
    else if (reduction(n, in)) in->kind = KN__IND_RED;
    else in->kind = KN__IND_EXTERN;
    break;
  }
  if (in->kind == KN__IND_ALIAS) {
    const kn__gnode *src = n->args[0].u.t.node;
    in->slot = p->nodes[src->index].slot + (int)n->args[1].u.i.c;
  } else if (in->kind == KN__IND_EXTERN) {
    in->step = p->nsteps;
    p->step_node[p->nsteps++] = n;
    in->slot = new_slots(p, n, n->nout);
  } else if (in->kind != KN__IND_PW && in->kind != KN__IND_RED) {
    in->slot = new_slots(p, n, 1);
  }
}

/* Pointwise nodes: inline into the single pointwise user of equal sizes, or
** into the reduction that reads them (its prologue), or give a buffer slot
** (a kernel root). Reductions are always kernel roots. */
static void fuse(kn__ind_plan *p, const int *user, bool allow) {
  int nn = p->nnodes;
  for (int i = 0; i < nn; i++) {
    kn__ind_node *in = &p->nodes[i];
    if (in->kind == KN__IND_RED) {
      in->slot = new_slots(p, kn__graph_node(p->g, i), 1);
      p->nkernels++;
    }
    if (in->kind != KN__IND_PW) continue;
    const kn__gnode *n = kn__graph_node(p->g, i);
    int u = user[i];
    const kn__gnode *un = u >= 0 ? kn__graph_node(p->g, u) : NULL;
    bool inl = allow && n->nusers == 1 && un &&
               ((p->nodes[u].kind == KN__IND_PW && same_sizes(&n->meta[0], &un->meta[0])) ||
                (p->nodes[u].kind == KN__IND_RED && un->args[0].u.t.node == n));
    in->inlined = inl;
    if (inl) p->nfused++;
    else {
      in->slot = new_slots(p, n, 1);
      p->nkernels++;
    }
  }
}

/* A vector-math node (exp, tanh, ...; formula.c) inlined into a reduction's
** prologue would run one element at a time (the reduction loop is not
** vectorised), each call computing a whole vector: it becomes a kernel root
** instead (a vectorised loop, with its own inlined producers), read by the
** reduction. */
static void unfuse_vm(kn__ind_plan *p, const kn__gnode *n) {
  for (int q = 0; q < n->nargs; q++) {
    if (n->args[q].kind != KN__GA_TENSOR || !n->args[q].u.t.node) continue;
    const kn__gnode *m = n->args[q].u.t.node;
    kn__ind_node *mn = &p->nodes[m->index];
    if (!mn->inlined) continue;
    if (mn->f.vm >= 0) {
      mn->inlined = false;
      mn->slot = new_slots(p, m, 1);
      p->nkernels++;
      p->nfused--;
    } else {
      unfuse_vm(p, m);
    }
  }
}

kn_status kn__ind_plan_build(const kn__graph *g, kn__ind_plan *p) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->nnodes = kn__graph_num_nodes(g);
  int *user = malloc(((size_t)p->nnodes + 1) * sizeof *user);
  kn_status st = user ? alloc_plan(p, p->nnodes) : kn__oom();
  if (st != KN_OK) {
    free(user);
    kn__ind_plan_free(p);
    return st;
  }
  find_users(g, user);
  /* slots of producers exist before their getitems: classify in order, but
  ** pointwise slots are given by fuse() afterwards; aliases of pointwise
  ** nodes cannot occur (pointwise nodes have one output). */
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "inductor_lowering");
  for (int i = 0; i < p->nnodes; i++) classify(p, kn__graph_node(g, i));
  kn__ind_phase_end(&ph);
  kn__ind_phase_begin(&ph, "inductor_scheduling");
  fuse(p, user, !has_inplace(g));
  for (int i = 0; i < p->nnodes; i++)
    if (p->nodes[i].kind == KN__IND_RED) unfuse_vm(p, kn__graph_node(g, i));
  kn__ind_phase_end(&ph);
  free(user);
  return KN_OK;
}

void kn__ind_plan_free(kn__ind_plan *p) {
  free(p->nodes);
  free(p->step_node);
  free(p->slot_node);
  free(p->slot_out);
  free(p->symx);
  memset(p, 0, sizeof *p);
}

int kn__ind_value_slot(const kn__ind_plan *p, kn__gref r) {
  const kn__ind_node *in = &p->nodes[r.node->index];
  if (in->slot < 0) return -1;
  return in->kind == KN__IND_EXTERN ? in->slot + r.idx : in->slot;
}

int kn__ind_symx(kn__ind_plan *p, kn_sym e) {
  for (int k = 0; k < p->nsymx; k++)
    if (p->symx[k].e == e.e) return k;
  kn_sym *v = realloc(p->symx, ((size_t)p->nsymx + 1) * sizeof *v);
  if (!v) return -1;
  p->symx = v;
  p->symx[p->nsymx] = e;
  return p->nsymx++;
}
