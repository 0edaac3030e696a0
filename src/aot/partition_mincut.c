/*
** aot/partition_mincut.c: the min-cut rematerialization partitioner.
**
** Which forward values to save is a minimum cut. Every forward node n is
** split into n_in -> n_out with capacity = its bytes (sizes at their hints;
** a multi-output node cannot be saved as a whole: its getitems can). Edges
** of infinite capacity: source -> n_in for the primals and for every node
** that must not be recomputed (random, in-place and anything that is not a
** pointwise or view op: matmul, convolution, reductions ...), n_out -> u_in
** for each forward user u, and n_out -> sink when a backward node reads n
** or n is returned as a gradient. A cut separates the primals from
** everything the backward reads; the nodes whose n_in -> n_out edge it cuts
** are saved, and the forward nodes between them and the backward are
** recomputed there. Max-flow by Dinic's algorithm on 64-bit capacities; the
** cut is the set reachable from the source in the residual network (the cut
** nearest to the inputs), except that between cuts of equal bytes the one
** saving fewer results of ops that cannot be recomputed wins (capacity()).
*/
#include <stdlib.h>
#include <string.h>

#include "aot/partition_int.h"
#include "core/error.h"
#include "ops/opfacts.h"

#define INF_CAP ((int64_t)1 << 62)

/* ---- Dinic's max-flow ------------------------------------------------------------- */

typedef struct fedge {
  int to, next;
  int64_t cap;
} fedge;

typedef struct flownet {
  int nv, ne, cap_e;
  fedge *e;
  int *head, *level, *it, *queue;
} flownet;

static kn_status net_init(flownet *f, int nv) {
  memset(f, 0, sizeof *f);
  f->nv = nv;
  f->head = malloc((size_t)nv * 4 * sizeof(int));
  if (!f->head) return kn__oom();
  f->level = f->head + nv;
  f->it = f->level + nv;
  f->queue = f->it + nv;
  for (int v = 0; v < nv; v++) f->head[v] = -1;
  return KN_OK;
}

static void net_fini(flownet *f) {
  free(f->head);
  free(f->e);
}

static kn_status half_edge(flownet *f, int u, int v, int64_t cap) {
  if (f->ne == f->cap_e) {
    int nc = f->cap_e ? 2 * f->cap_e : 64;
    fedge *e = realloc(f->e, (size_t)nc * sizeof *e);
    if (!e) return kn__oom();
    f->e = e;
    f->cap_e = nc;
  }
  f->e[f->ne] = (fedge){v, f->head[u], cap};
  f->head[u] = f->ne++;
  return KN_OK;
}

/* u -> v with capacity cap, and its residual twin (edge index ^ 1). */
static kn_status add_edge(flownet *f, int u, int v, int64_t cap) {
  kn_status st = half_edge(f, u, v, cap);
  return st == KN_OK ? half_edge(f, v, u, 0) : st;
}

/* Levels by BFS over edges with residual capacity; true if t is reached. */
static bool bfs(flownet *f, int s, int t) {
  for (int v = 0; v < f->nv; v++) f->level[v] = -1;
  int qh = 0, qt = 0;
  f->level[s] = 0;
  f->queue[qt++] = s;
  while (qh < qt) {
    int u = f->queue[qh++];
    for (int k = f->head[u]; k >= 0; k = f->e[k].next)
      if (f->e[k].cap > 0 && f->level[f->e[k].to] < 0) {
        f->level[f->e[k].to] = f->level[u] + 1;
        f->queue[qt++] = f->e[k].to;
      }
  }
  return f->level[t] >= 0;
}

static int64_t dfs(flownet *f, int u, int t, int64_t pushed) {
  if (u == t) return pushed;
  for (; f->it[u] >= 0; f->it[u] = f->e[f->it[u]].next) {
    fedge *e = &f->e[f->it[u]];
    if (e->cap <= 0 || f->level[e->to] != f->level[u] + 1) continue;
    int64_t got = dfs(f, e->to, t, pushed < e->cap ? pushed : e->cap);
    if (got > 0) {
      e->cap -= got;
      f->e[f->it[u] ^ 1].cap += got;
      return got;
    }
  }
  return 0;
}

/* Max flow from s to t, capped at INF_CAP (an uncuttable network). */
static int64_t max_flow(flownet *f, int s, int t) {
  int64_t flow = 0;
  while (flow < INF_CAP && bfs(f, s, t)) {
    memcpy(f->it, f->head, (size_t)f->nv * sizeof(int));
    for (int64_t got; flow < INF_CAP && (got = dfs(f, s, t, INF_CAP)) > 0;) flow += got;
  }
  (void)bfs(f, s, t); /* level >= 0: the source side of the cut */
  return flow;
}

/* ---- the network of a joint graph --------------------------------------------------- */

enum { SRC = 0, SNK = 1 };
static int n_in(int i) { return 2 + 2 * i; }
static int n_out(int i) { return 3 + 2 * i; }

/* Values the backward may compute again instead of saving: attributes,
** getitem, and calls whose op's recompute class (ops/ops_facts.def) is
** CHEAP or COMPUTE. */
static bool recomputable(const kn__gnode *n) {
  if (n->op == KN__GN_GET_ATTR) return true;
  if (n->op != KN__GN_CALL) return false;
  return !n->opdef || kn__op_recomputable(n->opdef->id); /* no opdef: getitem */
}

typedef kn_status (*ref_fn)(void *ud, const kn__gnode *user, int arg, kn__gref v);

/* fn(ud, n, a, v) for every tensor value v an argument a of n refers to. */
static kn_status each_ref(const kn__gnode *n, ref_fn fn, void *ud) {
  kn_status st = KN_OK;
  for (int a = 0; st == KN_OK && a < n->nargs; a++) {
    const kn__garg *x = &n->args[a];
    if (x->kind == KN__GA_TENSOR && x->u.t.node) st = fn(ud, n, a, x->u.t);
    for (int k = 0; st == KN_OK && x->kind == KN__GA_TENSORS && k < x->u.ts.n; k++)
      if (x->u.ts.v[k].node) st = fn(ud, n, a, x->u.ts.v[k]);
  }
  return st;
}

typedef struct build {
  flownet net;
  const kn__aot_joint *j;
  const bool *bwd;
} build;

/* The edges out of the value v a node reads: to the user (forward) or to
** the sink (a backward node, or a gradient output). */
static kn_status use_edge(void *ud, const kn__gnode *user, int arg, kn__gref v) {
  build *b = ud;
  int i = v.node->index;
  if (b->bwd[i]) return KN_OK;
  if (user->op == KN__GN_OUTPUT)
    return arg < b->j->nfw_out ? KN_OK : add_edge(&b->net, n_out(i), SNK, INF_CAP);
  if (b->bwd[user->index]) return add_edge(&b->net, n_out(i), SNK, INF_CAP);
  return add_edge(&b->net, n_out(i), n_in(user->index), INF_CAP);
}

/* The capacity of n_in -> n_out: n's bytes times tie (more than the number
** of nodes), plus 1 when n is a call that cannot be recomputed (a GEMM, a
** reduction): of the cuts with the fewest bytes, the one saving the fewest
** such results wins, so relu(addmm(...)) saves relu's result rather than
** the GEMM's, and the forward keeps the GEMM + activation as one call. */
static int64_t capacity(const kn__gnode *n, int64_t tie) {
  if (n->nout != 1) return INF_CAP;
  int64_t bytes = kn__aot_node_bytes(n);
  if (bytes > INF_CAP / 4 / tie) return INF_CAP / 4;
  return bytes * tie + (n->op == KN__GN_CALL && !recomputable(n));
}

static kn_status node_edges(build *b, const kn__gnode *n, int64_t tie) {
  int i = n->index;
  kn_status st = KN_OK;
  if (n->op != KN__GN_OUTPUT && !b->bwd[i]) {
    st = add_edge(&b->net, n_in(i), n_out(i), capacity(n, tie));
    if (st == KN_OK && (n->op == KN__GN_PLACEHOLDER || !recomputable(n)))
      st = add_edge(&b->net, SRC, n_in(i), INF_CAP);
  }
  return st == KN_OK && n->op != KN__GN_PLACEHOLDER ? each_ref(n, use_edge, b) : st;
}

/* ---- from the cut to the plan ------------------------------------------------------ */

typedef struct walk {
  const kn__aot_joint *j;
  kn__aot_cut *pl;
  bool ok; /* false: the backward needs an unsaved primal */
} walk;

static kn_status need_recompute(void *ud, const kn__gnode *user, int arg, kn__gref v);

/* The backward needs forward value i: saved, or recomputed from what it reads. */
static kn_status recompute_node(walk *w, const kn__gnode *n) {
  int i = n->index;
  if (w->pl->saved[i] || w->pl->recompute[i]) return KN_OK;
  if (n->op == KN__GN_PLACEHOLDER) {
    w->ok = false; /* an unsaved primal: cannot happen with a finite cut */
    return KN_OK;
  }
  w->pl->recompute[i] = true;
  return each_ref(n, need_recompute, w);
}

static kn_status need_recompute(void *ud, const kn__gnode *user, int arg, kn__gref v) {
  walk *w = ud;
  (void)user, (void)arg;
  return w->pl->bwd[v.node->index] ? KN_OK : recompute_node(w, v.node);
}

/* The backward's reads of forward values (backward nodes and gradient outputs). */
static kn_status bw_reads(void *ud, const kn__gnode *user, int arg, kn__gref v) {
  walk *w = ud;
  if (user->op == KN__GN_OUTPUT && arg < w->j->nfw_out) return KN_OK;
  return need_recompute(ud, user, arg, v);
}

static kn_status need_fw(void *ud, const kn__gnode *user, int arg, kn__gref v) {
  walk *w = ud;
  (void)user, (void)arg;
  int i = v.node->index;
  if (w->pl->in_fw[i]) return KN_OK;
  w->pl->in_fw[i] = true;
  return each_ref(v.node, need_fw, w);
}

/* The forward computes its outputs, the saved values and random ops (their
** draws keep eager's order). */
static kn_status forward_nodes(walk *w) {
  const kn__graph *g = w->j->g;
  const kn__gnode *o = kn__graph_output_node(g);
  kn_status st = KN_OK;
  for (int a = 0; st == KN_OK && a < w->j->nfw_out; a++)
    if (o->args[a].kind == KN__GA_TENSOR && o->args[a].u.t.node)
      st = need_fw(w, o, a, o->args[a].u.t);
  for (int i = 0; st == KN_OK && i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    bool keep = w->pl->saved[i] ||
                (n->op == KN__GN_CALL && n->opdef && !w->pl->bwd[i] &&
                 (n->opdef->flags & KN_OPF_RANDOM));
    if (keep) st = need_fw(w, n, 0, (kn__gref){(kn__gnode *)n, 0});
  }
  return st;
}

static kn_status fill_plan(const kn__aot_joint *j, const flownet *net, kn__aot_cut *pl,
                           bool *usable) {
  const kn__graph *g = j->g;
  int nn = kn__graph_num_nodes(g);
  for (int i = 0; i < nn; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    pl->saved[i] = !pl->bwd[i] && n->op != KN__GN_OUTPUT && net->level[n_in(i)] >= 0 &&
                   net->level[n_out(i)] < 0;
  }
  walk w = {j, pl, true};
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < nn; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (pl->bwd[i] || n->op == KN__GN_OUTPUT) st = each_ref(n, bw_reads, &w);
  }
  if (st == KN_OK) st = forward_nodes(&w);
  *usable = w.ok;
  return st;
}

static bool has_inplace(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->op == KN__GN_CALL && n->opdef && (n->opdef->flags & KN_OPF_INPLACE)) return true;
  }
  return false;
}

kn_status kn__aot_mincut_plan(const kn__aot_joint *j, kn__aot_cut *pl, bool *usable) {
  *usable = false;
  const kn__graph *g = j->g;
  int nn = kn__graph_num_nodes(g);
  if (has_inplace(g)) return KN_OK;
  build b = {.j = j, .bwd = pl->bwd};
  kn_status st = net_init(&b.net, 2 + 2 * nn);
  for (int i = 0; st == KN_OK && i < nn; i++) st = node_edges(&b, kn__graph_node(g, i), nn + 1);
  if (st == KN_OK && max_flow(&b.net, SRC, SNK) < INF_CAP) st = fill_plan(j, &b.net, pl, usable);
  net_fini(&b.net);
  return st;
}
