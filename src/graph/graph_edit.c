/*
** graph/graph_edit.c: editing graphs after they are built: the users of a
** value, replace-all-uses, an insertion point (insert-before), copies and
** subgraph extraction. Passes (graph_passes.c) are written with these.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"

/* ---- users ---------------------------------------------------------------- */

/* Does argument a refer to node n (any output when idx < 0)? */
static bool arg_refers(const kn__garg *a, const kn__gnode *n, int idx) {
  if (a->kind == KN__GA_TENSOR)
    return a->u.t.node == n && (idx < 0 || a->u.t.idx == idx);
  if (a->kind == KN__GA_TENSORS)
    for (int j = 0; j < a->u.ts.n; j++)
      if (a->u.ts.v[j].node == n && (idx < 0 || a->u.ts.v[j].idx == idx)) return true;
  return false;
}

static bool node_uses(const kn__gnode *user, const kn__gnode *n, int idx) {
  for (int i = 0; i < user->nargs; i++)
    if (arg_refers(&user->args[i], n, idx)) return true;
  return false;
}

int kn__graph_users(const kn__graph *g, const kn__gnode *n, kn__gnode **out, int cap) {
  int count = 0;
  for (int i = n->index + 1; i < g->n; i++) {
    if (!node_uses(g->nodes[i], n, -1)) continue;
    if (out && count < cap) out[count] = g->nodes[i];
    count++;
  }
  return count;
}

/* ---- replace-all-uses --------------------------------------------------------- */

static kn_status check_value(const kn__graph *g, kn__gref r, const char *what) {
  if (!r.node || r.node->graph != g || g->nodes[r.node->index] != r.node)
    return kn__error(KN_EINVAL, "replace_all_uses: the %s value is not a node of this graph",
                     what);
  if (r.idx < 0 || r.idx >= r.node->nout)
    return kn__error(KN_EINVAL, "replace_all_uses: '%s' has no output %d", r.node->name, r.idx);
  return KN_OK;
}

static void swap_ref(kn__gref *r, kn__gref from, kn__gref to) {
  if (r->node == from.node && r->idx == from.idx) *r = to;
}

int kn__graph_replace_all_uses(kn__graph *g, kn__gref from, kn__gref to) {
  if (check_value(g, from, "old") != KN_OK || check_value(g, to, "new") != KN_OK) return -1;
  int changed = 0;
  for (int i = from.node->index + 1; i < g->n; i++) {
    kn__gnode *u = g->nodes[i];
    if (u == to.node || !node_uses(u, from.node, from.idx)) continue;
    if (u->index < to.node->index)
      return kn__error(KN_EINVAL, "replace_all_uses: '%s' uses '%s' but comes before '%s'",
                       u->name, from.node->name, to.node->name), -1;
  }
  for (int i = from.node->index + 1; i < g->n; i++) {
    kn__gnode *u = g->nodes[i];
    if (u == to.node || !node_uses(u, from.node, from.idx)) continue;
    kn__gnode_count_users(u, -1);
    kn__garg *a = (kn__garg *)u->args; /* arena memory owned by g */
    for (int k = 0; k < u->nargs; k++) {
      if (a[k].kind == KN__GA_TENSOR) swap_ref(&a[k].u.t, from, to);
      if (a[k].kind == KN__GA_TENSORS)
        for (int j = 0; j < a[k].u.ts.n; j++) swap_ref((kn__gref *)&a[k].u.ts.v[j], from, to);
    }
    kn__gnode_count_users(u, 1);
    changed++;
  }
  return changed;
}

/* ---- insertion point -------------------------------------------------------- */

kn__gnode *kn__graph_set_insert_point(kn__graph *g, kn__gnode *before) {
  kn__gnode *old = g->insert_before;
  if (before && (before->graph != g || before->op == KN__GN_PLACEHOLDER)) before = NULL;
  g->insert_before = before;
  return old;
}

/* ---- copies ------------------------------------------------------------------ */

/* Maps a value of the source graph to the new graph (NULL node: absent). */
typedef kn_status (*remap_fn)(void *ud, kn__gref in, kn__gref *out);

/* A copy of n's arguments with every value remapped; tensor lists go to
** one malloc'd array returned in *lists (caller frees it). */
static kn_status remap_args(const kn__gnode *n, remap_fn map, void *ud, kn__garg *out,
                            kn__gref **lists) {
  *lists = NULL;
  size_t total = 0;
  for (int i = 0; i < n->nargs; i++)
    if (n->args[i].kind == KN__GA_TENSORS) total += (size_t)n->args[i].u.ts.n;
  kn__gref *refs = total ? malloc(total * sizeof *refs) : NULL;
  if (total && !refs) return kn__oom();
  *lists = refs;
  for (int i = 0; i < n->nargs; i++) {
    out[i] = n->args[i];
    kn_status st = KN_OK;
    if (out[i].kind == KN__GA_TENSOR && out[i].u.t.node) {
      st = map(ud, n->args[i].u.t, &out[i].u.t);
    } else if (out[i].kind == KN__GA_TENSORS) {
      for (int j = 0; st == KN_OK && j < out[i].u.ts.n; j++)
        st = map(ud, n->args[i].u.ts.v[j], &refs[j]);
      out[i].u.ts.v = refs;
      refs += out[i].u.ts.n;
    }
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* Copy node n into ng (not placeholders, not the output): same op,
** arguments remapped, name, metadata, stack, grad mode. */
static kn__gnode *copy_node(kn__graph *ng, const kn__gnode *n, remap_fn map, void *ud) {
  kn__gnode *c = NULL;
  if (n->op == KN__GN_GET_ATTR) {
    c = kn__graph_get_attr(ng, n->target, n->attr);
  } else if (!n->opdef) { /* getitem */
    kn__gref src;
    if (map(ud, n->args[0].u.t, &src) != KN_OK) return NULL;
    if (src.node->nout == 1) return src.node; /* already the value: a subgraph input */
    c = kn__graph_getitem(ng, src.node, src.idx);
  } else {
    kn__garg args[KN__MAX_ARGS];
    kn__gref *lists = NULL;
    if (remap_args(n, map, ud, args, &lists) == KN_OK)
      c = kn__graph_call(ng, n->opdef, n->nargs, args, n->nout, n->meta);
    free(lists);
  }
  if (!c) return NULL;
  if (strcmp(c->name, n->name) && kn__graph_node_set_name_hint(c, n->name) != KN_OK) return NULL;
  if (n->nstack && kn__graph_node_set_stack(c, n->stack, n->nstack, n->code) != KN_OK) return NULL;
  c->grad_mode = n->grad_mode;
  c->set_requires_grad = n->set_requires_grad;
  c->autograd_seq_nr = n->autograd_seq_nr;
  return c;
}

typedef struct copy_state {
  kn__gnode **map; /* source index -> new node (NULL: not copied) */
  const kn__graph *src;
  kn__graph *dst;
} copy_state;

static kn_status map_copied(void *ud, kn__gref in, kn__gref *out) {
  copy_state *cs = ud;
  kn__gnode *m = cs->map[in.node->index];
  if (!m)
    return kn__error(KN_EINVAL, "graph copy: '%s' is used before it is defined", in.node->name);
  *out = (kn__gref){m, in.idx};
  return KN_OK;
}

static kn_status copy_output(copy_state *cs, const kn__gnode *o) {
  kn__gref *vals = o->nargs ? malloc((size_t)o->nargs * sizeof *vals) : NULL;
  if (o->nargs && !vals) return kn__oom();
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < o->nargs; i++) st = map_copied(cs, o->args[i].u.t, &vals[i]);
  if (st == KN_OK && !kn__graph_output(cs->dst, o->nargs, vals)) st = kn_last_status();
  free(vals);
  return st;
}

kn__graph *kn__graph_copy(const kn__graph *g) {
  kn__graph *ng = kn__graph_new();
  copy_state cs = {calloc((size_t)g->n + 1, sizeof(kn__gnode *)), g, ng};
  kn_status st = ng && cs.map ? KN_OK : kn__oom();
  if (st == KN_OK) kn__graph_set_shape_env(ng, g->env, false);
  for (int i = 0; st == KN_OK && i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    if (n->op == KN__GN_OUTPUT) {
      st = copy_output(&cs, n);
    } else if (n->op == KN__GN_PLACEHOLDER) {
      cs.map[i] = kn__graph_placeholder(ng, n->source, n->meta);
      if (!cs.map[i]) st = kn_last_status();
    } else {
      cs.map[i] = copy_node(ng, n, map_copied, &cs);
      if (!cs.map[i]) st = kn_last_status();
    }
  }
  free(cs.map);
  if (st == KN_OK) return ng;
  kn__graph_free(ng);
  return NULL;
}

/* ---- subgraphs ---------------------------------------------------------------- */

typedef struct sub_state {
  copy_state cs;
  kn__gnode **inputs; /* [0, n): the source node of input k; [n, 2n): its output index */
  const bool *in_set;
  kn__gref *outs;     /* the values of g the subgraph returns, or NULL (owned) */
  int nouts;
} sub_state;

/* A value from outside the selection becomes a placeholder named after it
** ("add" -> source "add", "split" output 1 -> "split_1"), created once. */
static kn_status map_sub(void *ud, kn__gref in, kn__gref *out) {
  sub_state *s = ud;
  if (s->in_set[in.node->index]) return map_copied(&s->cs, in, out);
  for (int i = 0; i < kn__graph_num_inputs(s->cs.dst); i++) {
    if (s->inputs[i] == in.node &&
        (intptr_t)s->inputs[kn__graph_num_nodes(s->cs.src) + i] == in.idx) {
      *out = (kn__gref){kn__graph_input(s->cs.dst, i), 0};
      return KN_OK;
    }
  }
  char src[300];
  if (in.node->nout == 1) snprintf(src, sizeof src, "%s", in.node->name);
  else snprintf(src, sizeof src, "%s_%d", in.node->name, in.idx);
  int k = kn__graph_num_inputs(s->cs.dst);
  kn__gnode *ph = kn__graph_placeholder(s->cs.dst, src, &in.node->meta[in.idx]);
  if (!ph) return kn_last_status();
  s->inputs[k] = in.node;
  s->inputs[kn__graph_num_nodes(s->cs.src) + k] = (kn__gnode *)(intptr_t)in.idx;
  *out = (kn__gref){ph, 0};
  return KN_OK;
}

/* Outputs of the subgraph: each value of a selected node used by a node
** outside the selection (or returned by g), in node order. */
static kn_status sub_outputs(sub_state *s, const kn__graph *g) {
  int cap = 8, n = 0;
  kn__gref *vals = malloc((size_t)cap * sizeof *vals);
  if (!vals) return kn__oom();
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < g->n; i++) {
    const kn__gnode *v = g->nodes[i];
    if (!s->in_set[i]) continue;
    for (int k = 0; st == KN_OK && k < v->nout; k++) {
      bool outside = false;
      for (int u = i + 1; u < g->n && !outside; u++)
        outside = !s->in_set[u] && node_uses(g->nodes[u], v, k);
      if (!outside) continue;
      if (n == cap) {
        kn__gref *nv = realloc(vals, (size_t)(cap *= 2) * sizeof *nv);
        if (!nv) {
          st = kn__oom();
          break;
        }
        vals = nv;
      }
      st = map_copied(&s->cs, (kn__gref){(kn__gnode *)v, k}, &vals[n++]);
      if (st == KN_OK && s->outs) s->outs[s->nouts++] = (kn__gref){(kn__gnode *)v, k};
    }
  }
  if (st == KN_OK && !kn__graph_output(s->cs.dst, n, vals)) st = kn_last_status();
  free(vals);
  return st;
}

/* Every output value of the selected nodes: a bound for the outputs. */
static int sub_values(const kn__graph *g, const bool *in_set) {
  int n = 0;
  for (int i = 0; i < g->n; i++) n += in_set[i] ? g->nodes[i]->nout : 0;
  return n;
}

kn__graph *kn__graph_subgraph_io(const kn__graph *g, kn__gnode *const *nodes, int n,
                                 kn__graph_io *io) {
  kn__graph *ng = kn__graph_new();
  bool *in_set = calloc((size_t)g->n + 1, sizeof *in_set);
  sub_state s = {{calloc((size_t)g->n + 1, sizeof(kn__gnode *)), g, ng},
                 calloc(2 * (size_t)g->n + 1, sizeof(kn__gnode *)), in_set, NULL, 0};
  kn_status st = ng && in_set && s.cs.map && s.inputs ? KN_OK : kn__oom();
  for (int i = 0; st == KN_OK && i < n; i++) {
    if (!nodes[i] || nodes[i]->graph != g || nodes[i]->op != KN__GN_CALL)
      st = kn__error(KN_EINVAL, "subgraph: node %d is not a call node of this graph", i);
    else in_set[nodes[i]->index] = true;
  }
  if (st == KN_OK && io && !(s.outs = malloc((size_t)(sub_values(g, in_set) + 1) * sizeof *s.outs)))
    st = kn__oom();
  if (st == KN_OK) kn__graph_set_shape_env(ng, g->env, false);
  for (int i = 0; st == KN_OK && i < g->n; i++) {
    if (!in_set[i]) continue;
    s.cs.map[i] = copy_node(ng, g->nodes[i], map_sub, &s);
    if (!s.cs.map[i]) st = kn_last_status();
  }
  if (st == KN_OK) st = sub_outputs(&s, g);
  int nin = st == KN_OK ? kn__graph_num_inputs(ng) : 0;
  if (st == KN_OK && io && !(io->in = malloc((size_t)(nin + 1) * sizeof *io->in))) st = kn__oom();
  if (st == KN_OK && io) {
    for (int k = 0; k < nin; k++)
      io->in[k] = (kn__gref){s.inputs[k], (int)(intptr_t)s.inputs[g->n + k]};
    io->nin = nin;
    io->out = s.outs;
    io->nout = s.nouts;
    s.outs = NULL;
  }
  free(s.outs);
  free(in_set);
  free(s.cs.map);
  free(s.inputs);
  if (st == KN_OK) return ng;
  kn__graph_free(ng);
  return NULL;
}

kn__graph *kn__graph_subgraph(const kn__graph *g, kn__gnode *const *nodes, int n) {
  return kn__graph_subgraph_io(g, nodes, n, NULL);
}
