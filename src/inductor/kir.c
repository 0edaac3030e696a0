/*
** inductor/kir.c: the kernel IR of a plan (kir.h): building the item list,
** the memory-planning pass, and the IR's verifier (the printer is
** kir_print.c).
**
** Memory planning, as one pass over the items:
**   liveness   the last item that reads each slot (a value read by a node
**              inlined into a kernel counts at that kernel; graph outputs
**              live to the end; graph inputs and constants are never freed);
**   pooling    a slot written by kernels and read by kernels only
**              (reusable: an extern call may return a view sharing its
**              input's memory) goes to a pool once dead; the next kernel's
**              outputs take pooled buffers of the same sizes and dtype, and
**              what is left in the pool is released before that kernel
**              allocates (or before the next extern call, or at the end);
**              other dead slots are released right after their last reader;
**   in place   a pointwise kernel's output is written over one of its reads
**              that dies in it, when that read is reusable, has the
**              output's sizes and dtype and is read at the output's own
**              element (contiguous with the kernel's sizes).
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/kir.h"

const kn__vmeta *kn__kir_slot_meta(const kn__ind_plan *p, int slot) {
  return &p->slot_node[slot]->meta[p->slot_out[slot]];
}

static bool sym_eq(kn_sym a, kn_sym b) { return a.c == b.c && a.e == b.e; }
static bool sym_is(kn_sym v, int64_t c) { return kn__sym_is_const(v) && v.c == c; }

bool kn__kir_same_layout(const kn__vmeta *a, const kn__vmeta *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (!sym_eq(a->sizes[d], b->sizes[d])) return false;
  return true;
}

bool kn__kir_same_elements(const kn__vmeta *s, const kn__vmeta *m) {
  if (m->ndim != s->ndim) return false;
  kn_sym expect = kn__sym_const(1);
  for (int d = m->ndim - 1; d >= 0; d--) {
    if (!sym_eq(m->sizes[d], s->sizes[d])) return false;
    if (sym_is(m->sizes[d], 1)) continue;
    if (!sym_eq(m->strides[d], expect)) return false;
    expect = kn__sym_mul(expect, m->sizes[d]);
  }
  return true;
}

/* ---- building ------------------------------------------------------------------- */
/* Growable int and read lists of the item being built. */
static bool push_int(int **v, int *n, int x) {
  int *g = realloc(*v, ((size_t)*n + 1) * sizeof *g);
  if (!g) return false;
  g[(*n)++] = x;
  *v = g;
  return true;
}

static bool add_read(kn__kir_item *it, int slot, const kn__vmeta *m) {
  for (int i = 0; i < it->nreads; i++)
    if (it->reads[i].slot == slot) return true;
  kn__kir_read *r = realloc(it->reads, ((size_t)it->nreads + 1) * sizeof *r);
  if (!r) return false;
  r[it->nreads++] = (kn__kir_read){slot, m};
  it->reads = r;
  return true;
}

static bool add_write(kn__kir_item *it, int slot, int node) {
  kn__kir_write *w = realloc(it->writes, ((size_t)it->nwrites + 1) * sizeof *w);
  if (!w) return false;
  w[it->nwrites++] = (kn__kir_write){slot, node, -1, false};
  it->writes = w;
  return true;
}

static bool read_ref(const kn__ind_plan *p, kn__kir_item *it, kn__gref r) {
  if (!r.node) return true;
  int s = kn__ind_value_slot(p, r);
  return s < 0 || add_read(it, s, &r.node->meta[r.idx]);
}

/* Reads and computed nodes of the tree rooted at n (inlined producers are
** computed in the kernel; constants are expressions, neither; a root of
** the same loop collected before n, which n reads, is computed too: in[]
** marks it). */
static bool collect(const kn__ind_plan *p, kn__kir_item *it, const kn__gnode *n, unsigned char *in) {
  const kn__ind_node *pn = &p->nodes[n->index];
  if (!in[n->index]) {
    in[n->index] = 1;
    if (!push_int(&it->nodes, &it->nnodes, n->index)) return false;
  }
  for (int q = 0; q < pn->f.nopnds && q < n->nargs; q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind != KN__GA_TENSOR) continue;
    const kn__gnode *m = a->u.t.node;
    if (p->nodes[m->index].expr || (!p->nodes[m->index].inlined && in[m->index])) continue;
    if (p->nodes[m->index].inlined ? !collect(p, it, m, in) : !read_ref(p, it, a->u.t))
      return false;
  }
  return true;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The pointwise kernel launched at node i: i alone, or the horizontal set
** whose last root it is. */
static kn_status pointwise_item(const kn__ind_plan *p, int i, kn__kir_item *it, unsigned char *in) {
  it->kind = KN__KIR_POINTWISE;
  for (int m = 0; m <= i; m++) {
    if (m != i && (p->nodes[i].hz != i || p->nodes[m].hz != i || p->nodes[m].inlined)) continue;
    if (it->nroots == KN__HZ_MAX)
      return kn__error(KN_EINTERNAL, "inductor: kernel %d (node %s): more than KN__HZ_MAX = %d "
                       "roots in one horizontal loop (the scheduler splits sets at that "
                       "capacity)", i, kn__graph_node(p->g, i)->name, KN__HZ_MAX);
    it->roots[it->nroots++] = m;
  }
  it->space = &kn__graph_node(p->g, i)->meta[0];
  memset(in, 0, (size_t)p->nnodes + 1);
  for (int o = 0; o < it->nroots; o++) {
    const kn__gnode *r = kn__graph_node(p->g, it->roots[o]);
    if (!collect(p, it, r, in) || !add_write(it, p->nodes[r->index].slot, r->index))
      return kn__oom();
  }
  if (it->nnodes > 1) qsort(it->nodes, (size_t)it->nnodes, sizeof *it->nodes, cmp_int);
  return KN_OK;
}

static int nops(const kn__ind_plan *p, const kn__gnode *n) {
  const kn__ind_node *pn = &p->nodes[n->index];
  int q = pn->kind == KN__IND_RED ? 1 : pn->f.nopnds;
  return q < n->nargs ? q : n->nargs;
}

/* A reduction group's kernel: reads are the members' operands that are not
** members; writes the members read outside the group. */
static kn_status group_item(const kn__ind_plan *p, int gi, kn__kir_item *it) {
  const kn__ind_group *g = &p->groups[gi];
  *it = (kn__kir_item){.kind = KN__KIR_REDUCTION, .id = g->root, .group = gi, .space = g->space,
                       .mask = g->mask};
  for (int i = 0; i < g->nmembers; i++) {
    const kn__gnode *n = kn__graph_node(p->g, g->members[i]);
    if (!push_int(&it->nodes, &it->nnodes, n->index)) return kn__oom();
    for (int q = 0; q < nops(p, n); q++) {
      const kn__garg *a = &n->args[q];
      if (a->kind == KN__GA_TENSOR && a->u.t.node && p->nodes[a->u.t.node->index].group != gi &&
          !p->nodes[a->u.t.node->index].expr && !read_ref(p, it, a->u.t))
        return kn__oom();
    }
  }
  for (int i = 0; i < g->nmembers; i++) {
    int m = g->members[i];
    if (p->nodes[m].slot >= 0 && !add_write(it, p->nodes[m].slot, m)) return kn__oom();
  }
  return KN_OK;
}

/* An extern step: reads the slots of its tensor arguments, writes its outputs. */
static kn_status extern_item(const kn__ind_plan *p, const kn__gnode *n, kn__kir_item *it) {
  *it = (kn__kir_item){.kind = KN__KIR_EXTERN, .id = n->index, .step = p->nodes[n->index].step,
                       .group = -1};
  for (int a = 0; a < n->nargs; a++) {
    const kn__garg *ga = &n->args[a];
    if (ga->kind == KN__GA_TENSOR && !read_ref(p, it, ga->u.t)) return kn__oom();
    for (int j = 0; ga->kind == KN__GA_TENSORS && j < ga->u.ts.n; j++)
      if (!read_ref(p, it, ga->u.ts.v[j])) return kn__oom();
  }
  for (int k = 0; k < n->nout; k++)
    if (!add_write(it, p->nodes[n->index].slot + k, n->index)) return kn__oom();
  return KN_OK;
}

/* The item launched at node i, if any (*made false otherwise). */
static kn_status item_at(kn__ind_plan *p, int i, kn__kir_item *it, unsigned char *in, bool *made) {
  const kn__ind_node *pn = &p->nodes[i];
  *made = true;
  if (pn->kind == KN__IND_EXTERN) return extern_item(p, kn__graph_node(p->g, i), it);
  if (pn->group >= 0 && p->groups[pn->group].root == i) return group_item(p, pn->group, it);
  if (pn->kind == KN__IND_PW && pn->group < 0 && !pn->inlined && !pn->expr && pn->epi < 0 &&
      (pn->hz < 0 || pn->hz == i)) {
    *it = (kn__kir_item){.id = i, .group = -1};
    return pointwise_item(p, i, it, in);
  }
  *made = false;
  return KN_OK;
}

/* The epilogue item of extern node e (its kernel's root is p->nodes[e].epi). */
static kn_status epilogue_item(kn__ind_plan *p, int e, kn__kir_item *it, unsigned char *in) {
  int r = p->nodes[e].epi;
  *it = (kn__kir_item){.id = r, .group = -1};
  kn_status st = pointwise_item(p, r, it, in);
  it->kind = KN__KIR_EPILOGUE;
  it->id = e;
  it->step = p->nodes[e].step;
  it->gemm = p->nodes[e].slot;
  return st;
}

bool kn__kir_has_epilogue(const kn__kir *ir, int j) {
  return ir->items[j].kind == KN__KIR_EXTERN && j + 1 < ir->nitems &&
         ir->items[j + 1].kind == KN__KIR_EPILOGUE;
}

kn_status kn__kir_build(kn__ind_plan *p, kn__kir *ir) {
  memset(ir, 0, sizeof *ir);
  ir->p = p;
  ir->items = calloc((size_t)p->nnodes + (size_t)p->nepilogues + 1, sizeof *ir->items);
  unsigned char *in = malloc((size_t)p->nnodes + 1);
  kn_status st = ir->items && in ? KN_OK : kn__oom();
  for (int i = 0; st == KN_OK && i < p->nnodes; i++) {
    bool made;
    st = item_at(p, i, &ir->items[ir->nitems], in, &made);
    if (made) ir->nitems++; /* counted on failure too: kn__kir_free frees its lists */
    if (st == KN_OK && p->nodes[i].kind == KN__IND_EXTERN && p->nodes[i].epi >= 0) {
      st = epilogue_item(p, i, &ir->items[ir->nitems], in);
      ir->nitems++;
    }
  }
  free(in);
  if (st != KN_OK) kn__kir_free(ir);
  return st;
}

static void plan_clear(kn__kir *ir) {
  for (int j = 0; j < ir->nitems; j++) {
    kn__kir_item *it = &ir->items[j];
    free(it->free_before);
    free(it->free_after);
    it->free_before = it->free_after = NULL;
    it->nfree_before = it->nfree_after = 0;
    for (int w = 0; w < it->nwrites; w++) it->writes[w].from = -1, it->writes[w].inplace = false;
  }
  free(ir->free_end);
  free(ir->last);
  free(ir->reusable);
  ir->free_end = ir->last = NULL;
  ir->reusable = NULL;
  ir->nfree_end = 0;
  ir->planned = false;
}

void kn__kir_free(kn__kir *ir) {
  if (!ir->items) return;
  plan_clear(ir);
  for (int j = 0; j < ir->nitems; j++) {
    free(ir->items[j].nodes);
    free(ir->items[j].reads);
    free(ir->items[j].writes);
  }
  free(ir->items);
  memset(ir, 0, sizeof *ir);
}

/* ---- memory planning ----------------------------------------------------------------- */
typedef struct mplan {
  kn__kir *ir;
  int *user;     /* [nnodes] a node's (last) user */
  int *lastn;    /* [nslots] the node index of the step that reads the slot last */
  int *item_of;  /* [nnodes + 1] the item launched at a node, or -1 */
  int *pool, npool;
} mplan;

/* The node index of the step that computes node i (its kernel's). */
static int step_of(const kn__ind_plan *p, const int *user, int i) {
  while (p->nodes[i].inlined) i = user[i];
  return kn__ind_run_point(p, i);
}

static void note_use(const kn__ind_plan *p, int *last, kn__gref r, int at) {
  int s = r.node ? kn__ind_value_slot(p, r) : -1;
  if (s >= 0 && last[s] < at) last[s] = at;
}

static void liveness(mplan *m) {
  const kn__ind_plan *p = m->ir->p;
  for (int i = 0; i < p->nnodes; i++) m->user[i] = -1;
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(p->g, i);
    for (int a = 0; a < n->nargs; a++)
      if (n->args[a].kind == KN__GA_TENSOR && n->args[a].u.t.node)
        m->user[n->args[a].u.t.node->index] = i;
  }
  for (int s = 0; s < p->nslots; s++) m->lastn[s] = kn__ind_run_point(p, p->slot_node[s]->index);
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(p->g, i);
    int at = n->op == KN__GN_OUTPUT ? p->nnodes : step_of(p, m->user, i);
    for (int a = 0; a < n->nargs; a++) {
      const kn__garg *ga = &n->args[a];
      if (ga->kind == KN__GA_TENSOR) note_use(p, m->lastn, ga->u.t, at);
      for (int j = 0; ga->kind == KN__GA_TENSORS && j < ga->u.ts.n; j++)
        note_use(p, m->lastn, ga->u.ts.v[j], at);
    }
  }
}

/* Slots written by kernels and read by kernels only. */
static void mark_reusable(const kn__ind_plan *p, unsigned char *r) {
  for (int s = 0; s < p->nslots; s++) { /* a GEMM with an epilogue: a new buffer, gemm.c */
    const kn__ind_node *n = &p->nodes[p->slot_node[s]->index];
    r[s] = n->kind == KN__IND_PW || n->kind == KN__IND_RED || (n->kind == KN__IND_EXTERN && n->epi >= 0);
  }
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(p->g, i);
    if (p->nodes[i].kind != KN__IND_EXTERN && p->nodes[i].kind != KN__IND_ALIAS) continue;
    for (int a = 0; a < n->nargs; a++) {
      const kn__garg *ga = &n->args[a];
      int sl = ga->kind == KN__GA_TENSOR && ga->u.t.node ? kn__ind_value_slot(p, ga->u.t) : -1;
      if (sl >= 0) r[sl] = 0;
      for (int j = 0; ga->kind == KN__GA_TENSORS && j < ga->u.ts.n; j++)
        if ((sl = kn__ind_value_slot(p, ga->u.ts.v[j])) >= 0) r[sl] = 0;
    }
  }
}

/* Outputs written in place over a read that dies at this kernel. */
/* The read at position k of the in-place search: an epilogue's GEMM output
** first (written over, it never exists apart from the output), then the
** others in order. */
static int inplace_order(const kn__kir_item *it, int gi, int k) {
  if (gi >= it->nreads) return k;
  return k == 0 ? gi : k <= gi ? k - 1 : k;
}

static void plan_inplace(mplan *m, kn__kir_item *it) {
  bool used[KN__HZ_MAX] = {false};
  int gi = it->nreads;
  for (int k = 0; it->kind == KN__KIR_EPILOGUE && k < it->nreads; k++)
    if (it->reads[k].slot == it->gemm) gi = k;
  for (int k = 0; k < it->nreads; k++) {
    int li = inplace_order(it, gi, k);
    int sl = it->reads[li].slot;
    const kn__vmeta *rm = it->reads[li].m;
    if (!m->ir->reusable[sl] || m->lastn[sl] != it->id || !kn__kir_same_elements(it->space, rm))
      continue;
    for (int o = 0; o < it->nroots; o++) {
      if (used[o] || !kn__kir_same_layout(rm, &kn__graph_node(m->ir->p->g, it->roots[o])->meta[0]))
        continue;
      it->writes[o].from = sl;
      it->writes[o].inplace = used[o] = true;
      m->lastn[sl] = -2; /* taken over: never released */
      break;
    }
  }
}

/* Take a pooled buffer of w's sizes and dtype. */
static void pool_take(mplan *m, kn__kir_write *w) {
  const kn__ind_plan *p = m->ir->p;
  for (int k = 0; k < m->npool; k++) {
    if (!kn__kir_same_layout(kn__kir_slot_meta(p, m->pool[k]), kn__kir_slot_meta(p, w->slot)))
      continue;
    w->from = m->pool[k];
    m->pool[k] = m->pool[--m->npool];
    return;
  }
}

static bool pool_flush(mplan *m, int **to, int *n) {
  for (int k = 0; k < m->npool; k++)
    if (!push_int(to, n, m->pool[k])) return false;
  m->npool = 0;
  return true;
}

/* Slots whose last reader is item it: pooled, or released after it. */
static bool releases(mplan *m, kn__kir_item *it) {
  const kn__ind_plan *p = m->ir->p;
  for (int s = 0; s < p->nslots; s++) {
    kn__ind_nkind k = p->nodes[p->slot_node[s]->index].kind;
    if (m->lastn[s] != it->id || k == KN__IND_INPUT || k == KN__IND_ATTR) continue;
    if (m->ir->reusable[s]) m->pool[m->npool++] = s; /* each slot once: room for all */
    else if (!push_int(&it->free_after, &it->nfree_after, s)) return false;
  }
  return true;
}

static bool plan_item(mplan *m, kn__kir_item *it, bool has_epilogue) {
  if (has_epilogue) return true; /* the step's buffer events are on its epilogue item */
  if (it->kind == KN__KIR_POINTWISE || it->kind == KN__KIR_EPILOGUE) plan_inplace(m, it);
  for (int w = 0; it->kind != KN__KIR_EXTERN && w < it->nwrites; w++)
    if (!it->writes[w].inplace) pool_take(m, &it->writes[w]);
  return pool_flush(m, &it->free_before, &it->nfree_before) && releases(m, it);
}

/* ir->last: liveness in item indices (-1: no item reads it last, such as a
** value read only by an alias; nitems: a graph output). */
static void last_items(mplan *m) {
  const kn__ind_plan *p = m->ir->p;
  for (int s = 0; s < p->nslots; s++) {
    int at = m->lastn[s];
    m->ir->last[s] = at == p->nnodes ? m->ir->nitems : at >= 0 ? m->item_of[at] : -1;
  }
}

kn_status kn__kir_plan_memory(kn__kir *ir) {
  const kn__ind_plan *p = ir->p;
  plan_clear(ir);
  size_t nn = (size_t)p->nnodes + 1, ns = (size_t)p->nslots + 1;
  mplan m = {ir, malloc(nn * sizeof(int)), malloc(ns * sizeof(int)), malloc(nn * sizeof(int)),
             malloc(ns * sizeof(int)), 0};
  ir->last = malloc(ns * sizeof *ir->last);
  ir->reusable = calloc(ns, 1);
  bool ok = m.user && m.lastn && m.item_of && m.pool && ir->last && ir->reusable;
  if (ok) {
    liveness(&m);
    mark_reusable(p, ir->reusable);
    for (size_t i = 0; i < nn; i++) m.item_of[i] = -1;
    for (int j = 0; j < ir->nitems; j++) m.item_of[ir->items[j].id] = j;
    last_items(&m); /* before in-place writes mark their reads taken */
    for (int j = 0; ok && j < ir->nitems; j++) ok = plan_item(&m, &ir->items[j], kn__kir_has_epilogue(ir, j));
    ok = ok && pool_flush(&m, &ir->free_end, &ir->nfree_end);
  }
  free(m.user);
  free(m.lastn);
  free(m.item_of);
  free(m.pool);
  if (!ok) {
    plan_clear(ir);
    return kn__oom();
  }
  ir->planned = true;
  return KN_OK;
}

/* ---- the verifier ----------------------------------------------------------------------- */
enum { UNDEF, LIVE, DEAD };

static const char *kind_name(kn__kir_kind k) {
  return k == KN__KIR_POINTWISE   ? "pointwise kernel"
         : k == KN__KIR_REDUCTION ? "reduction kernel"
         : k == KN__KIR_EPILOGUE  ? "epilogue kernel"
                                  : "extern step";
}

/* KN_EINTERNAL: item j, then fmt's text. */
static kn_status bad(const kn__kir *ir, int j, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kn_status bad(const kn__kir *ir, int j, const char *fmt, ...) {
  const kn__kir_item *it = &ir->items[j];
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return kn__error(KN_EINTERNAL, "inductor: kernel IR item %d (%s at node %d): %s", j,
                   kind_name(it->kind), it->id, msg);
}

static const char *state_name(unsigned char s) {
  return s == UNDEF ? "not defined yet" : s == DEAD ? "already freed or taken over" : "live";
}

static bool same_sizes(const kn__vmeta *a, const kn__vmeta *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (!sym_eq(a->sizes[d], b->sizes[d])) return false;
  return true;
}

/* Read m broadcastable to the space s (trailing dims aligned)? A symbolic
** size that may equal the space's is accepted (the graph's guards hold
** them equal; the code reads it with its own strides). */
static bool broadcastable(const kn__vmeta *s, const kn__vmeta *m) {
  if (m->ndim > s->ndim) return false;
  for (int d = 0; d < m->ndim; d++) {
    kn_sym a = m->sizes[d], b = s->sizes[d + s->ndim - m->ndim];
    if (!sym_is(a, 1) && !sym_eq(a, b) && kn__sym_query(a, KN__SYM_EQ, b) == KN__SYM_FALSE)
      return false;
  }
  return true;
}

static kn_status check_reads(const kn__kir *ir, int j, const unsigned char *st) {
  const kn__kir_item *it = &ir->items[j];
  if (it->kind != KN__KIR_EXTERN && it->nreads > KN__KER_MAX_READS)
    return bad(ir, j, "reads %d buffers, more than KN__KER_MAX_READS = %d", it->nreads,
               KN__KER_MAX_READS);
  if (it->nroots > KN__HZ_MAX)
    return bad(ir, j, "has %d roots, more than KN__HZ_MAX = %d", it->nroots, KN__HZ_MAX);
  for (int r = 0; r < it->nreads; r++) {
    int s = it->reads[r].slot;
    if (s < 0 || s >= ir->p->nslots) return bad(ir, j, "reads slot %d, which does not exist", s);
    if (st[s] != LIVE) return bad(ir, j, "reads slot %d, which is %s", s, state_name(st[s]));
    if (it->kind != KN__KIR_EXTERN && !broadcastable(it->space, it->reads[r].m))
      return bad(ir, j, "reads slot %d with sizes that do not broadcast to the kernel's "
                 "iteration space", s);
  }
  return KN_OK;
}

static kn_status kill(const kn__kir *ir, int j, unsigned char *st, int s, const char *why) {
  if (s < 0 || s >= ir->p->nslots || st[s] != LIVE)
    return bad(ir, j, "frees slot %d, which is not live (%s)", s, why);
  st[s] = DEAD;
  return KN_OK;
}

static kn_status check_write(const kn__kir *ir, int j, unsigned char *st, const kn__kir_write *w) {
  const kn__kir_item *it = &ir->items[j];
  if (w->slot < 0 || w->slot >= ir->p->nslots || st[w->slot] != UNDEF)
    return bad(ir, j, "writes slot %d, which is %s", w->slot,
               w->slot < 0 || w->slot >= ir->p->nslots ? "no slot" : state_name(st[w->slot]));
  const kn__vmeta *wm = kn__kir_slot_meta(ir->p, w->slot);
  if ((it->kind == KN__KIR_POINTWISE || it->kind == KN__KIR_EPILOGUE) && !same_sizes(wm, it->space))
    return bad(ir, j, "writes slot %d with sizes other than the kernel's iteration space",
               w->slot);
  if (w->from >= 0) {
    bool read = false;
    for (int r = 0; r < it->nreads; r++) read |= it->reads[r].slot == w->from;
    if (w->inplace && (!read || ir->last[w->from] != j))
      return bad(ir, j, "writes in place over slot %d, which is %s", w->from,
                 read ? "read after this kernel" : "not read by this kernel");
    if (!kn__kir_same_layout(kn__kir_slot_meta(ir->p, w->from), wm))
      return bad(ir, j, "takes over the buffer of slot %d, whose sizes or dtype differ from the "
                 "output's", w->from);
    if (!w->inplace && ir->last[w->from] >= j)
      return bad(ir, j, "takes over the buffer of slot %d, which is read by this kernel or "
                 "later", w->from);
    kn_status s = kill(ir, j, st, w->from, "taken over");
    if (s != KN_OK) return s;
  }
  st[w->slot] = LIVE;
  return KN_OK;
}

/* An epilogue follows its extern step and reads its whole output. */
static kn_status check_epilogue(const kn__kir *ir, int j) {
  const kn__kir_item *it = &ir->items[j];
  if (j == 0 || ir->items[j - 1].kind != KN__KIR_EXTERN || ir->items[j - 1].id != it->id ||
      ir->items[j - 1].step != it->step)
    return bad(ir, j, "is not right after the extern step %d it is the epilogue of", it->step);
  for (int r = 0; r < it->nreads; r++)
    if (it->reads[r].slot == it->gemm)
      return kn__kir_same_elements(it->space, it->reads[r].m)
                 ? KN_OK
                 : bad(ir, j, "reads the extern's output (slot %d) other than element for "
                       "element", it->gemm);
  return bad(ir, j, "does not read the extern's output (slot %d)", it->gemm);
}

static kn_status check_item(const kn__kir *ir, int j, unsigned char *st) {
  const kn__kir_item *it = &ir->items[j];
  bool epi = it->kind == KN__KIR_EPILOGUE;
  if (j > 0 && (epi ? it->id != ir->items[j - 1].id : it->id <= ir->items[j - 1].id))
    return bad(ir, j, "runs at node %d, not after the item before it", it->id);
  kn_status s = epi ? check_epilogue(ir, j) : KN_OK;
  if (s == KN_OK) s = check_reads(ir, j, st);
  for (int k = 0; s == KN_OK && k < it->nfree_before; k++) {
    int f = it->free_before[k];
    s = f >= 0 && f < ir->p->nslots && ir->last[f] >= j
            ? bad(ir, j, "frees slot %d before it, but the slot is read by it or later", f)
            : kill(ir, j, st, f, "freed before the item");
  }
  for (int w = 0; s == KN_OK && w < it->nwrites; w++) s = check_write(ir, j, st, &it->writes[w]);
  for (int k = 0; s == KN_OK && k < it->nfree_after; k++) {
    int f = it->free_after[k];
    s = f >= 0 && f < ir->p->nslots && ir->last[f] > j
            ? bad(ir, j, "frees slot %d after it, but the slot is read later", f)
            : kill(ir, j, st, f, "freed after the item");
  }
  return s;
}

kn_status kn__kir_verify(const kn__kir *ir) {
  const kn__ind_plan *p = ir->p;
  if (!ir->planned) return kn__error(KN_EINTERNAL, "inductor: kernel IR verified before its memory plan");
  unsigned char *st = calloc((size_t)p->nslots + 1, 1);
  if (!st) return kn__oom();
  for (int s = 0; s < p->nslots; s++) {
    kn__ind_nkind k = p->nodes[p->slot_node[s]->index].kind;
    if (k == KN__IND_INPUT || k == KN__IND_ATTR) st[s] = LIVE;
  }
  kn_status s = KN_OK;
  for (int j = 0; s == KN_OK && j < ir->nitems; j++) s = check_item(ir, j, st);
  for (int k = 0; s == KN_OK && k < ir->nfree_end; k++) {
    int f = ir->free_end[k];
    if (f < 0 || f >= p->nslots || st[f] != LIVE)
      s = kn__error(KN_EINTERNAL, "inductor: kernel IR: frees slot %d at the end, which is not "
                    "live", f);
    else st[f] = DEAD;
  }
  free(st);
  return s;
}
