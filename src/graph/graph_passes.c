/*
** graph/graph_passes.c: passes over a graph: common-subexpression
** elimination (dead-code elimination is in graph.c). A pass changes the
** graph in place through the editing API and returns what it changed; the
** interpreter is the reference it must agree with on every input.
*/
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
