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
  } else if (in->kind != KN__IND_PW) {
    in->slot = new_slots(p, n, 1);
  }
}

/* Pointwise nodes: inline into the single pointwise user of equal sizes, or
** give a buffer slot (a kernel root). Nodes are visited in order, so a
** node's producers are decided before it. */
static void fuse(kn__ind_plan *p, const int *user, bool allow) {
  int nn = p->nnodes;
  for (int i = 0; i < nn; i++) {
    kn__ind_node *in = &p->nodes[i];
    if (in->kind != KN__IND_PW) continue;
    const kn__gnode *n = kn__graph_node(p->g, i);
    int u = user[i];
    bool inl = allow && n->nusers == 1 && u >= 0 && p->nodes[u].kind == KN__IND_PW &&
               same_sizes(&n->meta[0], &kn__graph_node(p->g, u)->meta[0]);
    in->inlined = inl;
    if (inl) p->nfused++;
    else {
      in->slot = new_slots(p, n, 1);
      p->nkernels++;
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
  for (int i = 0; i < p->nnodes; i++) classify(p, kn__graph_node(g, i));
  fuse(p, user, !has_inplace(g));
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
