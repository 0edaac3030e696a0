/*
** aot/partition.c: building the forward and backward graphs from a plan,
** and the default partitioner. A call node of the joint graph belongs to the
** backward when it depends on a tangent, to the forward otherwise; the
** default forward returns its outputs then every forward value (placeholders
** included) that the backward reads, in joint-graph order. The min-cut plan
** (partition_mincut.c) saves fewer values and recomputes forward nodes in
** the backward.
*/
#include <stdlib.h>
#include <string.h>

#include "aot/partition_int.h"
#include "core/error.h"

/* Node copies from the joint graph into one part: map[i] = copy of node i. */
typedef struct part {
  kn__graph *g;
  kn__gnode **map;
} part;

static kn__gref remap(const part *p, kn__gref v) {
  return v.node ? (kn__gref){p->map[v.node->index], v.idx} : v;
}

static kn_status copy_call(part *p, const kn__gnode *n) {
  kn__garg args[KN__MAX_ARGS];
  kn__gref *lists[KN__MAX_ARGS] = {0};
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < n->nargs; i++) {
    args[i] = n->args[i];
    if (args[i].kind == KN__GA_TENSOR) args[i].u.t = remap(p, args[i].u.t);
    if (args[i].kind != KN__GA_TENSORS) continue;
    int m = args[i].u.ts.n;
    if (!(lists[i] = malloc(((size_t)m + 1) * sizeof **lists))) st = kn__oom();
    for (int k = 0; st == KN_OK && k < m; k++) lists[i][k] = remap(p, args[i].u.ts.v[k]);
    args[i].u.ts.v = lists[i];
  }
  kn__gnode *c = NULL;
  if (st == KN_OK) {
    c = n->opdef ? kn__graph_call(p->g, n->opdef, n->nargs, args, n->nout, n->meta)
                 : kn__graph_getitem(p->g, p->map[n->args[0].u.t.node->index],
                                     (int)kn__sym_hint(n->args[1].u.i));
    if (c && n->stack) st = kn__graph_node_set_stack(c, n->stack, n->nstack, n->code);
    if (c) c->autograd_seq_nr = n->autograd_seq_nr;
    if (!c) st = kn_last_status();
  }
  for (int i = 0; i < n->nargs; i++) free(lists[i]);
  p->map[n->index] = c;
  return st;
}

static kn_status copy_node(part *p, const kn__gnode *n) {
  if (n->op == KN__GN_GET_ATTR) {
    p->map[n->index] = kn__graph_get_attr(p->g, n->target, n->attr);
    return p->map[n->index] ? KN_OK : kn_last_status();
  }
  return copy_call(p, n);
}

static kn_status placeholder(part *p, const kn__gnode *n, const char *name) {
  p->map[n->index] = kn__graph_placeholder(p->g, name ? name : n->name, n->meta);
  return p->map[n->index] ? KN_OK : kn_last_status();
}

/* bwd[i]: node i depends on a tangent. */
static void mark_backward(const kn__aot_joint *j, bool *bwd) {
  const kn__graph *g = j->g;
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    bwd[i] = n->op == KN__GN_PLACEHOLDER && i >= j->nprimals;
    for (int a = 0; !bwd[i] && n->op == KN__GN_CALL && a < n->nargs; a++) {
      const kn__garg *x = &n->args[a];
      if (x->kind == KN__GA_TENSOR && x->u.t.node) bwd[i] = bwd[x->u.t.node->index];
      for (int k = 0; x->kind == KN__GA_TENSORS && k < x->u.ts.n; k++)
        bwd[i] = bwd[i] || bwd[x->u.ts.v[k].node->index];
    }
  }
}

static void mark_ref(const bool *bwd, kn__gref v, bool *saved) {
  if (v.node && !bwd[v.node->index]) saved[v.node->index] = true;
}

static bool has_sym_args(const kn__gnode *n) {
  for (int a = 0; a < n->nargs; a++) {
    const kn__garg *x = &n->args[a];
    if (x->kind == KN__GA_INT && !kn__sym_is_const(x->u.i)) return true;
    for (int k = 0; x->kind == KN__GA_INTS && k < x->u.ints.n; k++)
      if (!kn__sym_is_const(x->u.ints.v[k])) return true;
  }
  return false;
}

static bool has_sym_sizes(const kn__gnode *n) {
  for (int d = 0; n->meta && d < n->meta[0].ndim; d++)
    if (!kn__sym_is_const(n->meta[0].sizes[d])) return true;
  return false;
}

/* Saved symbolic sizes: the graph IR has no int values, so a backward
** whose arguments use size symbols gets the primals whose sizes they are
** (saved by reference; the interpreter binds symbols from input sizes). */
static void mark_saved_sizes(const kn__aot_joint *j, const kn__aot_cut *pl) {
  const kn__graph *g = j->g;
  bool need = false, *saved = pl->saved;
  for (int i = 0; !need && i < kn__graph_num_nodes(g); i++)
    need = (pl->bwd[i] || pl->recompute[i]) && kn__graph_node(g, i)->op == KN__GN_CALL &&
           has_sym_args(kn__graph_node(g, i));
  for (int i = 0; need && i < j->nprimals; i++)
    if (has_sym_sizes(kn__graph_input(g, i))) saved[kn__graph_input(g, i)->index] = true;
}

/* saved[i]: forward node i is read by a backward node or returned as a gradient. */
static void mark_saved(const kn__aot_joint *j, const bool *bwd, bool *saved) {
  const kn__graph *g = j->g;
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    bool reads = (n->op == KN__GN_CALL && bwd[i]) || n->op == KN__GN_OUTPUT;
    for (int a = 0; reads && a < n->nargs; a++) {
      const kn__garg *x = &n->args[a];
      if (n->op == KN__GN_OUTPUT && a < j->nfw_out) continue;
      if (x->kind == KN__GA_TENSOR) mark_ref(bwd, x->u.t, saved);
      for (int k = 0; x->kind == KN__GA_TENSORS && k < x->u.ts.n; k++) mark_ref(bwd, x->u.ts.v[k], saved);
    }
  }
}

static kn_status build_forward(const kn__aot_joint *j, const kn__aot_cut *pl,
                               kn__aot_parts *out, part *p) {
  const kn__graph *g = j->g;
  const bool *saved = pl->saved;
  int nn = kn__graph_num_nodes(g);
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < nn; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (!pl->in_fw[i] && n->op != KN__GN_PLACEHOLDER) continue;
    if (pl->bwd[i] || n->op == KN__GN_OUTPUT) continue;
    st = n->op == KN__GN_PLACEHOLDER ? placeholder(p, n, NULL) : copy_node(p, n);
  }
  const kn__gnode *o = kn__graph_output_node(g);
  kn__gref *v = malloc(((size_t)j->nfw_out + (size_t)nn + 1) * sizeof *v);
  if (st == KN_OK && !v) st = kn__oom();
  int k = 0;
  for (int i = 0; st == KN_OK && i < j->nfw_out; i++) v[k++] = remap(p, o->args[i].u.t);
  for (int i = 0; st == KN_OK && i < nn; i++) {
    if (!saved[i]) continue;
    v[k++] = (kn__gref){p->map[i], 0}; /* getitems are their own nodes */
    out->saved_bytes += kn__aot_node_bytes(kn__graph_node(g, i));
  }
  out->nsaved = k - j->nfw_out;
  if (st == KN_OK && !kn__graph_output(p->g, k, v)) st = kn_last_status();
  free(v);
  return st == KN_OK ? kn__graph_verify(p->g) : st;
}

static kn_status build_backward(const kn__aot_joint *j, const kn__aot_cut *pl, part *p) {
  const kn__graph *g = j->g;
  int nn = kn__graph_num_nodes(g);
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < nn; i++)
    if (pl->saved[i]) st = placeholder(p, kn__graph_node(g, i), NULL);
  for (int i = 0; st == KN_OK && i < nn; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (!pl->bwd[i] && !(pl->recompute[i] && !pl->saved[i])) continue;
    st = n->op == KN__GN_PLACEHOLDER ? placeholder(p, n, NULL) : copy_node(p, n);
  }
  const kn__gnode *o = kn__graph_output_node(g);
  kn__gref *v = calloc((size_t)j->ngrads + 1, sizeof *v);
  if (st == KN_OK && !v) st = kn__oom();
  for (int i = 0; st == KN_OK && i < j->ngrads; i++) v[i] = remap(p, o->args[j->nfw_out + i].u.t);
  if (st == KN_OK && !kn__graph_output(p->g, j->ngrads, v)) st = kn_last_status();
  free(v);
  return st == KN_OK ? kn__graph_verify(p->g) : st;
}

static kn__graph *new_part(const kn__aot_joint *j) {
  kn__graph *g = kn__graph_new();
  kn__shape_env *env = kn__graph_shape_env(j->g);
  if (g && env) kn__graph_set_shape_env(g, env, false);
  if (!g) kn__oom();
  return g;
}

/* The default plan: every forward node in the forward, saved what the
** backward reads. */
static void default_plan(const kn__aot_joint *j, kn__aot_cut *pl) {
  for (int i = 0; i < kn__graph_num_nodes(j->g); i++) {
    pl->in_fw[i] = !pl->bwd[i];
    pl->saved[i] = pl->recompute[i] = false;
  }
  mark_saved(j, pl->bwd, pl->saved);
}

static kn_status build_parts(const kn__aot_joint *j, kn__aot_cut *pl, kn__aot_parts *out) {
  int nn = kn__graph_num_nodes(j->g);
  part fw = {new_part(j), calloc((size_t)nn + 1, sizeof(kn__gnode *))};
  part bw = {new_part(j), calloc((size_t)nn + 1, sizeof(kn__gnode *))};
  out->fw = fw.g;
  out->bw = bw.g;
  kn_status st = fw.g && bw.g && fw.map && bw.map ? KN_OK : kn__oom();
  mark_saved_sizes(j, pl);
  for (int i = 0; i < nn; i++) out->nrecomputed += pl->recompute[i] && !pl->saved[i];
  if (st == KN_OK) st = build_forward(j, pl, out, &fw);
  if (st == KN_OK) st = build_backward(j, pl, &bw);
  free(fw.map);
  free(bw.map);
  return st;
}

kn_status kn__aot_partition_with(const kn__aot_joint *j, kn__aot_partitioner how,
                                 kn__aot_parts *out) {
  memset(out, 0, sizeof *out);
  size_t nn = (size_t)kn__graph_num_nodes(j->g) + 1;
  bool *all = calloc(4 * nn, sizeof *all);
  if (!all) return kn__oom();
  kn__aot_cut pl = {all, all + nn, all + 2 * nn, all + 3 * nn};
  mark_backward(j, pl.bwd);
  bool usable = false;
  kn_status st = how == KN__AOT_PART_MINCUT ? kn__aot_mincut_plan(j, &pl, &usable) : KN_OK;
  out->used = usable ? KN__AOT_PART_MINCUT : KN__AOT_PART_DEFAULT;
  if (st == KN_OK && !usable) default_plan(j, &pl);
  if (st == KN_OK) st = build_parts(j, &pl, out);
  free(all);
  if (st != KN_OK) kn__aot_parts_fini(out);
  return st;
}

kn_status kn__aot_partition(const kn__aot_joint *j, kn__aot_parts *out) {
  return kn__aot_partition_with(j, KN__AOT_PART_DEFAULT, out);
}

const char *kn__aot_partitioner_name(kn__aot_partitioner p) {
  return p == KN__AOT_PART_MINCUT ? "min_cut" : "default";
}

int64_t kn__aot_node_bytes(const kn__gnode *n) {
  const kn__vmeta *m = n->meta;
  if (!m || m->kind != KN__V_TENSOR || n->nout != 1) return 0;
  int64_t numel = 1;
  for (int d = 0; d < m->ndim; d++) numel *= kn__sym_hint(m->sizes[d]);
  return numel * (int64_t)kn_dtype_size(m->dtype);
}

void kn__aot_parts_fini(kn__aot_parts *p) {
  kn__graph_free(p->fw);
  kn__graph_free(p->bw);
  memset(p, 0, sizeof *p);
}
