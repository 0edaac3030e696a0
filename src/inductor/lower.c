/*
** inductor/lower.c: the plan of a graph. Every node gets a kind: graph
** inputs and constants (read in place), pointwise nodes inductor computes,
** reductions (every row of the reduction table over any set of dims:
** reduce_lower.c), and extern calls of
** the eager op for everything else. The scheduler (sched.c) then decides
** which nodes share a kernel. Value slots number the buffers a run holds.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"

static bool has_inplace(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->opdef && (n->opdef->flags & KN_OPF_INPLACE)) return true;
  }
  return false;
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

int kn__ind_new_slots(kn__ind_plan *p, const kn__gnode *n, int count) {
  int first = p->nslots;
  for (int k = 0; k < count; k++) {
    p->slot_node[p->nslots] = n;
    p->slot_out[p->nslots++] = k;
  }
  return first;
}

/* A reduction whose eager kernel has a column path (the table's `columns`:
** sum, mean) over leading dims whose kept dims end in a contiguous run
** of at least 16 elements (a bias gradient: [N, H] summed over N) that no
** pointwise node reads: the eager kernel adds whole rows into vector
** accumulators (ops/reduce.c), where a generated reduction would walk each
** output's strided column (0.9 ms for the [256, 512] bias gradient of an
** MLP's backward, 0.03 ms eagerly). Left to the eager op: same bits too.
** Not on the GPU, where the eager op is itself a generated kernel. */
static bool column_sum(const kn__graph *g, const kn__gnode *n, const kn__ind_node *in) {
  const kn__vmeta *x = &n->args[0].u.t.node->meta[n->args[0].u.t.idx];
  if (x->device == KN_CUDA) return false;
  int nd = x->ndim, lead = 0;
  while (lead < nd && ((in->red_mask >> lead) & 1)) lead++;
  if (!in->red->columns || lead == 0 || lead == nd || in->red_mask != (1u << lead) - 1 ||
      !kn__sym_is_const(x->sizes[nd - 1]) || x->sizes[nd - 1].c < 16 ||
      !kn__sym_is_const(x->strides[nd - 1]) || x->strides[nd - 1].c != 1)
    return false;
  kn__gnode *users[16];
  int nu = kn__graph_users(g, n, users, 16);
  kn__ind_formula f;
  for (int u = 0; u < nu; u++)
    if (u >= 16 || (users[u]->op == KN__GN_CALL && users[u]->opdef &&
                    kn__ind_formula_for(users[u], &f)))
      return false;
  return true;
}

/* Whether generated code computes node u (a pointwise formula other than a
** BROADCAST, or a reduction op). */
static bool lowered_reader(const kn__gnode *u) {
  if (u->op != KN__GN_CALL || !u->opdef) return false;
  kn__ind_lclass c = kn__ind_lowering_of(u->opdef)->cls;
  kn__ind_formula f;
  return c == KN__IND_L_REDUCTION || (c != KN__IND_L_BROADCAST && kn__ind_formula_for(u, &f));
}

/* A BROADCAST node (expand) read by anything but generated code (the graph's
** output, an extern call such as addmm's bias), or by more than 16 nodes:
** it stays the eager view (an extern call), so that an output aliasing its
** input keeps aliasing it, with eager's strides, and no expanded copy is
** materialised for an extern reader. */
static bool view_kept(const kn__graph *g, const kn__gnode *n) {
  if (kn__ind_lowering_of(n->opdef)->cls != KN__IND_L_BROADCAST) return false;
  kn__gnode *users[16];
  int nu = kn__graph_users(g, n, users, 16);
  for (int u = 0; u < nu; u++)
    if (u >= 16 || !lowered_reader(users[u])) return true;
  return false;
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
    else if (kn__ind_formula_for(n, &in->f) && !view_kept(p->g, n)) in->kind = KN__IND_PW;
    else if (kn__ind_red_classify(n, in) && !column_sum(p->g, n, in)) in->kind = KN__IND_RED;
    else in->kind = KN__IND_EXTERN, in->red = NULL, in->red_mask = 0;
    break;
  }
  if (in->kind == KN__IND_ALIAS) {
    const kn__gnode *src = n->args[0].u.t.node;
    in->slot = p->nodes[src->index].slot + (int)n->args[1].u.i.c;
  } else if (in->kind == KN__IND_EXTERN) {
    in->step = p->nsteps;
    p->step_node[p->nsteps++] = n;
    in->slot = kn__ind_new_slots(p, n, n->nout);
  } else if (in->kind != KN__IND_PW && in->kind != KN__IND_RED) {
    in->slot = kn__ind_new_slots(p, n, 1);
  }
}

kn_status kn__ind_plan_build(const kn__graph *g, bool epilogues, kn__ind_plan *p) {
  memset(p, 0, sizeof *p);
  p->g = g;
  p->epilogues = epilogues;
  p->nnodes = kn__graph_num_nodes(g);
  kn_status st = alloc_plan(p, p->nnodes);
  if (st != KN_OK) {
    kn__ind_plan_free(p);
    return st;
  }
  /* slots of producers exist before their getitems: classify in order, but
  ** pointwise slots are given by fuse() afterwards; aliases of pointwise
  ** nodes cannot occur (pointwise nodes have one output). */
  kn__ind_phase ph;
  kn__ind_phase_begin(&ph, "inductor_lowering");
  for (int i = 0; i < p->nnodes; i++) classify(p, kn__graph_node(g, i));
  kn__ind_phase_end(&ph);
  kn__ind_phase_begin(&ph, "inductor_scheduling");
  st = kn__ind_schedule(p, !has_inplace(g));
  kn__ind_phase_end(&ph);
  if (st != KN_OK) kn__ind_plan_free(p);
  return st;
}

void kn__ind_plan_free(kn__ind_plan *p) {
  free(p->nodes);
  free(p->step_node);
  free(p->slot_node);
  free(p->slot_out);
  free(p->symx);
  for (int g = 0; g < p->ngroups; g++) free(p->groups[g].members);
  free(p->groups);
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
