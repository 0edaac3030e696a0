/*
** graph/graph_verify.c: the graph verifier. Checks what every consumer of
** a graph relies on (printers, the interpreter, later AOT and Inductor):
** order, references, user counts, names, opcodes and example metadata.
** Errors name the node and what was expected and found.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"

static kn_status check_ref(const kn__graph *g, const kn__gnode *user, kn__gref r, int *users,
                           bool optional) {
  if (!r.node) {
    if (optional) return KN_OK;
    return kn__error(KN_EINVAL, "graph verify: node '%s' has a missing tensor argument",
                     user->name);
  }
  if (r.node->graph != g || r.node->index < 0 || r.node->index >= g->n ||
      g->nodes[r.node->index] != r.node)
    return kn__error(KN_EINVAL, "graph verify: node '%s' refers to a node that is not in the "
                     "graph", user->name);
  if (r.node->index >= user->index)
    return kn__error(KN_EINVAL, "graph verify: node '%s' (#%d) uses '%s' (#%d), which does not "
                     "come before it", user->name, user->index, r.node->name, r.node->index);
  if (r.idx < 0 || r.idx >= r.node->nout)
    return kn__error(KN_EINVAL, "graph verify: node '%s' uses output %d of '%s', which has %d "
                     "output(s)", user->name, r.idx, r.node->name, r.node->nout);
  users[r.node->index]++;
  return KN_OK;
}

static kn_status check_meta(const kn__gnode *n, const kn__vmeta *m, int k) {
  if (m->kind == KN__V_NONE) return KN_OK;
  if (m->kind != KN__V_TENSOR)
    return kn__error(KN_EINVAL, "graph verify: node '%s' output %d has an unknown value kind %d",
                     n->name, k, (int)m->kind);
  if (m->ndim < 0 || m->ndim > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "graph verify: node '%s' output %d: expected rank 0..%d, got %d",
                     n->name, k, KN_MAX_DIMS, m->ndim);
  if ((unsigned)m->dtype >= KN_DTYPE_COUNT || (m->device != KN_CPU && m->device != KN_META && m->device != KN_CUDA))
    return kn__error(KN_EINVAL, "graph verify: node '%s' output %d: invalid dtype %d or device %d",
                     n->name, k, (int)m->dtype, (int)m->device);
  for (int d = 0; d < m->ndim; d++)
    if (kn__sym_hint(m->sizes[d]) < 0)
      return kn__error(KN_EINVAL, "graph verify: node '%s' output %d: negative size %lld at "
                       "dim %d", n->name, k, (long long)kn__sym_hint(m->sizes[d]), d);
  return KN_OK;
}

/* Every argument of a call fits its op's schema (count and types). */
static kn_status check_call_args(const kn__gnode *n) {
  kn__schema_arg sa[KN__MAX_ARGS];
  int ns = kn__schema_args(n->opdef->schema, sa);
  if (n->nargs > ns)
    return kn__error(KN_EINVAL, "graph verify: node '%s' calls %s with %d arguments; its schema "
                     "has %d", n->name, n->opdef->name, n->nargs, ns);
  for (int i = 0; i < n->nargs; i++) {
    if (kn__garg_fits(&n->args[i], &sa[i])) continue;
    kn__sb v = KN__SB_INIT;
    kn__gfmt_arg(&v, &n->args[i]);
    kn_status st = kn__error(KN_EINVAL, "graph verify: node '%s': argument %d (%.*s) of %s does "
                             "not fit the schema %s: got %s", n->name, i, sa[i].name_len,
                             sa[i].name, n->opdef->name, n->opdef->schema,
                             kn__sb_failed(&v) ? "?" : kn__sb_cstr(&v));
    kn__sb_fini(&v);
    return st;
  }
  return KN_OK;
}

static bool same_meta(const kn__vmeta *a, const kn__vmeta *b) {
  if (a->kind != b->kind) return false;
  if (a->kind == KN__V_NONE) return true;
  if (a->dtype != b->dtype || a->ndim != b->ndim || a->device != b->device) return false;
  for (int d = 0; d < a->ndim; d++)
    if (kn__sym_hint(a->sizes[d]) != kn__sym_hint(b->sizes[d])) return false;
  return true;
}

/* Per-opcode shape of a node. */
static kn_status check_kind(const kn__graph *g, const kn__gnode *n, int i) {
  switch (n->op) {
  case KN__GN_PLACEHOLDER:
    if (i >= g->ninputs)
      return kn__error(KN_EINVAL, "graph verify: placeholder '%s' at #%d comes after other "
                       "nodes (placeholders must come first)", n->name, i);
    if (n->nout != 1 || !n->target)
      return kn__error(KN_EINVAL, "graph verify: placeholder '%s' must have one value and a "
                       "target", n->name);
    return KN_OK;
  case KN__GN_GET_ATTR: {
    if (n->nout != 1 || !n->attr)
      return kn__error(KN_EINVAL, "graph verify: get_attr '%s' holds no tensor", n->name);
    kn__vmeta m;
    kn__vmeta_from_tensor(n->attr, &m);
    if (!same_meta(&m, &n->meta[0]))
      return kn__error(KN_EINVAL, "graph verify: get_attr '%s': metadata does not match the "
                       "constant it holds", n->name);
    return KN_OK;
  }
  case KN__GN_CALL:
    if (n->opdef) return n->nargs <= KN__MAX_ARGS ? check_call_args(n)
                         : kn__error(KN_EINVAL, "graph verify: '%s' has %d arguments (max %d)",
                                     n->name, n->nargs, KN__MAX_ARGS);
    if (n->nargs != 2 || n->args[0].kind != KN__GA_TENSOR || !n->args[0].u.t.node ||
        n->args[1].kind != KN__GA_INT || n->args[1].u.i.c != n->args[0].u.t.idx || n->nout != 1)
      return kn__error(KN_EINVAL, "graph verify: call '%s' has no op and is not a getitem "
                       "(source, index)", n->name);
    if (!same_meta(&n->meta[0], &n->args[0].u.t.node->meta[n->args[0].u.t.idx]))
      return kn__error(KN_EINVAL, "graph verify: getitem '%s': metadata differs from output %d "
                       "of '%s'", n->name, n->args[0].u.t.idx, n->args[0].u.t.node->name);
    return KN_OK;
  case KN__GN_OUTPUT:
    if (i != g->n - 1 || n != g->output)
      return kn__error(KN_EINVAL, "graph verify: output node '%s' is not the last node", n->name);
    for (int a = 0; a < n->nargs; a++)
      if (n->args[a].kind != KN__GA_TENSOR || !n->args[a].u.t.node)
        return kn__error(KN_EINVAL, "graph verify: output %d is not a tensor value", a);
    return KN_OK;
  }
  return kn__error(KN_EINVAL, "graph verify: node #%d has an unknown opcode %d", i, (int)n->op);
}

static kn_status check_args(const kn__graph *g, const kn__gnode *n, int *users) {
  for (int a = 0; a < n->nargs; a++) {
    const kn__garg *ga = &n->args[a];
    kn_status st = KN_OK;
    if (ga->kind == KN__GA_TENSOR) st = check_ref(g, n, ga->u.t, users, true);
    for (int j = 0; ga->kind == KN__GA_TENSORS && st == KN_OK && j < ga->u.ts.n; j++)
      st = check_ref(g, n, ga->u.ts.v[j], users, false);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

kn_status kn__graph_verify(const kn__graph *g) {
  if (!g) return kn__error(KN_EINVAL, "graph verify: graph is NULL");
  if (!g->output)
    return kn__error(KN_EINVAL, "graph verify: the graph has no output node");
  int *users = calloc((size_t)g->n + 1, sizeof *users);
  if (!users) return kn__oom();
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    if (n->index != i || n->graph != g)
      st = kn__error(KN_EINVAL, "graph verify: node '%s' is at #%d but records #%d", n->name, i,
                     n->index);
    else if (!n->name || !*n->name || kn__graph_find(g, n->name) != n)
      st = kn__error(KN_EINVAL, "graph verify: node #%d has no unique name", i);
    else st = check_kind(g, n, i);
    for (int k = 0; st == KN_OK && k < n->nout; k++) st = check_meta(n, &n->meta[k], k);
    if (st == KN_OK) st = check_args(g, n, users);
  }
  for (int i = 0; st == KN_OK && i < g->n; i++)
    if (users[i] != g->nodes[i]->nusers)
      st = kn__error(KN_EINVAL, "graph verify: node '%s' records %d users, found %d",
                     g->nodes[i]->name, g->nodes[i]->nusers, users[i]);
  free(users);
  return st;
}
