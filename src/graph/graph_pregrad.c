/*
** graph/graph_pregrad.c: the pre-grad passes, run on a captured graph
** before AOT autograd traces it (PyTorch's pre_grad_passes). They are the
** graph layer's passes that are safe on a captured, not yet functional
** graph: dead-code elimination (keeps in-place and random calls) and
** common-subexpression elimination (never merges random, in-place or
** data-dependent calls, nor calls reading a value written in place). The
** graph is written to the structured trace before (before_pre_grad_graph)
** and after (after_pre_grad_graph) the passes, as graph code.
*/
#include <stdlib.h>

#include "core/error.h"
#include "graph/graph.h"
#include "trace/events.h"
#include "trace/trace.h"

static void log_graph(const char *name, const kn__graph *g) {
  if (!kn__trace_enabled()) return;
  char *code = kn__graph_code(g, NULL);
  if (code) (void)kn__trace_artifact(name, "string", code, SIZE_MAX, NULL);
  free(code);
}

kn__graph *kn__graph_pre_grad(const kn__graph *g) {
  if (!g) return kn__error(KN_EINVAL, "pre-grad passes: expected a graph, got NULL"), NULL;
  log_graph("before_pre_grad_graph", g);
  kn__graph *c = kn__graph_copy(g);
  if (!c) return NULL;
  if (kn__graph_cse(c) < 0 || kn__graph_eliminate_dead_code(c) < 0) {
    kn__graph_free(c);
    return NULL;
  }
  log_graph("after_pre_grad_graph", c);
  return c;
}
