/*
** graph/graph_passes.c: passes over a graph: common-subexpression
** elimination (dead-code elimination is in graph.c). A pass changes the
** graph in place through the editing API and returns what it changed; the
** interpreter is the reference it must agree with on every input.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hashmap.h"
#include "core/strbuf.h"
#include "graph/graph_int.h"

/* The values written (in place) by the graph, and every view they were
** taken from or that was taken of them: an in-place op's first argument,
** followed through view ops to their bases. mutated[i] for node index i. */
static void mark_mutated(const kn__graph *g, bool *mutated) {
  for (int i = g->n - 1; i >= 0; i--) {
    const kn__gnode *n = g->nodes[i];
    bool inplace = n->opdef && (n->opdef->flags & KN_OPF_INPLACE);
    if (!inplace && !mutated[i]) continue;
    if (inplace) mutated[i] = true;
    /* the written tensor, and the base of a view that is (or aliases) it */
    if (n->nargs > 0 && n->args[0].kind == KN__GA_TENSOR && n->args[0].u.t.node &&
        (inplace || (n->opdef && (n->opdef->flags & KN_OPF_VIEW))))
      mutated[n->args[0].u.t.node->index] = true;
  }
  /* views of a mutated value see the writes too */
  for (int i = 0; i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    if (n->opdef && (n->opdef->flags & KN_OPF_VIEW) && n->nargs > 0 &&
        n->args[0].kind == KN__GA_TENSOR && n->args[0].u.t.node &&
        mutated[n->args[0].u.t.node->index])
      mutated[i] = true;
  }
}

static bool reads_mutated(const kn__gnode *n, const bool *mutated) {
  for (int i = 0; i < n->nargs; i++) {
    const kn__garg *a = &n->args[i];
    if (a->kind == KN__GA_TENSOR && a->u.t.node && mutated[a->u.t.node->index]) return true;
    if (a->kind == KN__GA_TENSORS)
      for (int j = 0; j < a->u.ts.n; j++)
        if (mutated[a->u.ts.v[j].node->index]) return true;
  }
  return false;
}

static void key_sym(kn__sb *sb, kn_sym s) {
  if (kn__sym_is_const(s)) kn__sb_printf(sb, "%lld,", (long long)s.c);
  else kn__sb_printf(sb, "e%p,", (const void *)s.e); /* hash-consed: equal = same */
}

static void key_arg(kn__sb *sb, const kn__garg *a) {
  kn__sb_printf(sb, "|%d:", (int)a->kind);
  switch (a->kind) {
  case KN__GA_NONE: break;
  case KN__GA_TENSOR:
    if (a->u.t.node) kn__sb_printf(sb, "%d.%d", a->u.t.node->index, a->u.t.idx);
    break;
  case KN__GA_TENSORS:
    for (int j = 0; j < a->u.ts.n; j++)
      kn__sb_printf(sb, "%d.%d,", a->u.ts.v[j].node->index, a->u.ts.v[j].idx);
    break;
  case KN__GA_INT: key_sym(sb, a->u.i); break;
  case KN__GA_DOUBLE: kn__sb_printf(sb, "%a", a->u.d); break;
  case KN__GA_BOOL: kn__sb_putc(sb, a->u.b ? 'T' : 'F'); break;
  case KN__GA_SCALAR:
    if (a->u.s.kind == KN_SCALAR_FLOAT) kn__sb_printf(sb, "f%a", a->u.s.v.f);
    else if (a->u.s.kind == KN_SCALAR_INT) kn__sb_printf(sb, "i%lld", (long long)a->u.s.v.i);
    else kn__sb_printf(sb, "b%d", (int)a->u.s.v.b);
    break;
  case KN__GA_INTS:
    for (int j = 0; j < a->u.ints.n; j++) key_sym(sb, a->u.ints.v[j]);
    break;
  case KN__GA_DTYPE: kn__sb_printf(sb, "%d", (int)a->u.dt); break;
  case KN__GA_GEN: kn__sb_printf(sb, "%p", (void *)a->u.gen); break;
  }
}

/* What makes two calls the same computation: op, arguments (values by
** node), the attributes the interpreter replays. Owned string or NULL. */
static char *call_key(const kn__gnode *n) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "%s.%s/%d/%d/%d", n->opdef ? n->opdef->name : "getitem",
                n->opdef ? n->opdef->overload : "", n->nout, (int)n->grad_mode,
                (int)n->set_requires_grad);
  for (int i = 0; i < n->nargs; i++) key_arg(&sb, &n->args[i]);
  return kn__sb_take(&sb);
}

static bool cse_candidate(const kn__gnode *n, const bool *mutated) {
  if (n->op != KN__GN_CALL) return false;
  if (n->opdef && (n->opdef->flags & (KN_OPF_INPLACE | KN_OPF_RANDOM | KN_OPF_DATA_DEP)))
    return false;
  return !mutated[n->index] && !reads_mutated(n, mutated);
}

/* n duplicates `orig`: its uses go to orig, then n goes. */
static kn_status merge_into(kn__graph *g, kn__gnode *n, kn__gnode *orig) {
  for (int k = 0; k < n->nout; k++)
    if (kn__graph_replace_all_uses(g, (kn__gref){n, k}, (kn__gref){orig, k}) < 0)
      return kn_last_status();
  return kn__graph_erase_node(g, n);
}

int kn__graph_cse(kn__graph *g) {
  bool *mutated = calloc((size_t)g->n + 1, sizeof *mutated);
  if (!mutated) return kn__oom(), -1;
  mark_mutated(g, mutated);
  kn__hashmap seen;
  kn__hm_init(&seen, true);
  int merged = 0;
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < g->n; i++) {
    kn__gnode *n = g->nodes[i];
    if (!cse_candidate(n, mutated)) continue;
    char *key = call_key(n);
    if (!key) {
      st = kn__oom();
      break;
    }
    bool found;
    kn__gnode *orig = kn__hm_get(&seen, key, &found);
    if (found) {
      /* erasing n shifts later nodes: keep mutated[] aligned */
      memmove(mutated + i, mutated + i + 1, (size_t)(g->n - i - 1) * sizeof *mutated);
      st = merge_into(g, n, orig);
      merged += st == KN_OK;
      i--;
    } else if (!kn__hm_put(&seen, key, n)) {
      st = kn__oom();
    }
    free(key);
  }
  kn__hm_fini(&seen);
  free(mutated);
  return st == KN_OK ? merged : -1;
}

/* ---- no-op removal ----------------------------------------------------------------- */

static bool sym_same(kn_sym a, kn_sym b) { return a.e == b.e && (a.e || a.c == b.c); }

/* Same dtype, device, sizes and strides (sizes and strides hash-consed). */
static bool same_layout(const kn__vmeta *a, const kn__vmeta *b) {
  if (a->kind != KN__V_TENSOR || b->kind != KN__V_TENSOR || a->dtype != b->dtype ||
      a->device != b->device || a->ndim != b->ndim)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (!sym_same(a->sizes[d], b->sizes[d]) || !sym_same(a->strides[d], b->strides[d]))
      return false;
  return true;
}

/* A constant number argument (Scalar, int or double) equal to v. */
static bool number_is(const kn__garg *a, double v) {
  switch (a->kind) {
  case KN__GA_SCALAR:
    return a->u.s.kind == KN_SCALAR_FLOAT ? a->u.s.v.f == v
           : a->u.s.kind == KN_SCALAR_INT ? (double)a->u.s.v.i == v
                                          : (double)a->u.s.v.b == v;
  case KN__GA_INT: return kn__sym_is_const(a->u.i) && (double)a->u.i.c == v;
  case KN__GA_DOUBLE: return a->u.d == v;
  default: return false;
  }
}

/* A tensor argument made by full(size, v), or a number argument equal to v. */
static bool const_is(const kn__garg *a, double v) {
  if (a->kind != KN__GA_TENSOR) return number_is(a, v);
  const kn__gnode *m = a->u.t.node;
  return m && m->op == KN__GN_CALL && m->opdef && m->opdef->id == KN_OP_FULL &&
         !m->set_requires_grad && m->nargs >= 2 && number_is(&m->args[1], v);
}

/* add/sub's alpha (argument 2): omitted, or a number that is finite (so
** alpha * 0 is 0) or 1. */
static bool alpha_is(const kn__gnode *n, bool one) {
  if (n->nargs < 3 || n->args[2].kind == KN__GA_NONE) return true;
  const kn__garg *a = &n->args[2];
  if (one) return number_is(a, 1);
  if (a->kind == KN__GA_DOUBLE) return isfinite(a->u.d);
  if (a->kind == KN__GA_SCALAR && a->u.s.kind == KN_SCALAR_FLOAT) return isfinite(a->u.s.v.f);
  return a->kind == KN__GA_SCALAR || a->kind == KN__GA_INT;
}

/* The argument (0 or 1) n computes unchanged, or -1: x + 0, 0 + x, x - 0,
** x * 1, 1 * x, x / 1, with 0 and 1 numbers or full() tensors. */
static int noop_operand(const kn__gnode *n) {
  if (n->op != KN__GN_CALL || !n->opdef || n->nargs < 2) return -1;
  const kn__garg *a = &n->args[0], *b = &n->args[1];
  switch (n->opdef->id) {
  case KN_OP_ADD: /* 0 + alpha * x is x only for alpha 1 */
    return const_is(b, 0) && alpha_is(n, false) ? 0 : const_is(a, 0) && alpha_is(n, true) ? 1 : -1;
  case KN_OP_ADD_SCALAR:
  case KN_OP_SUB:
  case KN_OP_SUB_SCALAR: return const_is(b, 0) && alpha_is(n, false) ? 0 : -1;
  case KN_OP_MUL: return const_is(b, 1) ? 0 : const_is(a, 1) ? 1 : -1;
  case KN_OP_MUL_SCALAR:
  case KN_OP_DIV:
  case KN_OP_DIV_SCALAR: return const_is(b, 1) ? 0 : -1;
  default: return -1;
  }
}

/* Is value r (through views) a graph input? */
static bool from_input(kn__gref r) {
  const kn__gnode *m = r.node;
  while (m->op == KN__GN_CALL && m->opdef && (m->opdef->flags & KN_OPF_VIEW) && m->nargs > 0 &&
         m->args[0].kind == KN__GA_TENSOR && m->args[0].u.t.node)
    m = m->args[0].u.t.node;
  return m->op == KN__GN_PLACEHOLDER || m->op == KN__GN_GET_ATTR;
}

static bool is_output(const kn__graph *g, const kn__gnode *n) {
  const kn__gnode *o = g->output;
  for (int a = 0; o && a < o->nargs; a++)
    if (o->args[a].kind == KN__GA_TENSOR && o->args[a].u.t.node == n) return true;
  return false;
}

/* Can n's uses read r instead? r has n's exact layout, neither is written
** in place, and a graph output never becomes an input, a view of one or
** another output (the caller's outputs would alias what they did not). */
static bool noop_replaceable(const kn__graph *g, const kn__gnode *n, kn__gref r,
                             const bool *mutated) {
  if (r.node->op == KN__GN_OUTPUT || mutated[n->index] || mutated[r.node->index] ||
      !same_layout(&n->meta[0], &r.node->meta[r.idx]))
    return false;
  return !is_output(g, n) || (!from_input(r) && !is_output(g, r.node));
}

int kn__graph_remove_noops(kn__graph *g) {
  bool *mutated = calloc((size_t)g->n + 1, sizeof *mutated);
  if (!mutated) return kn__oom(), -1;
  mark_mutated(g, mutated);
  int removed = 0;
  for (int i = 0; i < g->n; i++) {
    kn__gnode *n = g->nodes[i];
    int k = noop_operand(n);
    if (k < 0 || n->args[k].kind != KN__GA_TENSOR || !n->args[k].u.t.node ||
        !noop_replaceable(g, n, n->args[k].u.t, mutated))
      continue;
    if (kn__graph_replace_all_uses(g, (kn__gref){n, 0}, n->args[k].u.t) < 0) {
      free(mutated);
      return -1;
    }
    removed++;
  }
  free(mutated);
  if (removed > 0 && kn__graph_eliminate_dead_code(g) < 0) return -1;
  return removed;
}
