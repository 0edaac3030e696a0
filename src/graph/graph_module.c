/*
** graph/graph_module.c: kn_graph_module, the public callable around a
** graph (kn_export's result, and what the "eager" backend compiles to):
** it owns the graph (with its constants) and the interpreter program.
*/
#include <stdlib.h>

#include "core/error.h"
#include "graph/graph.h"

struct kn_graph_module {
  kn__graph *g;   /* owned */
  kn__gprog *p;   /* owned; borrows g */
};

kn_status kn__graph_module_new(kn__graph *g, kn_graph_module **out) {
  *out = NULL;
  if (!g) return kn__error(KN_EINVAL, "graph module: graph is NULL");
  kn_graph_module *gm = calloc(1, sizeof *gm);
  if (!gm) {
    kn__graph_free(g);
    return kn__oom();
  }
  gm->g = g;
  kn_status st = kn__gprog_new(g, &gm->p);
  if (st != KN_OK) {
    kn_graph_module_free(gm);
    return st;
  }
  *out = gm;
  return KN_OK;
}

const kn__graph *kn__graph_module_graph(const kn_graph_module *gm) { return gm ? gm->g : NULL; }

kn_status kn_graph_module_call(kn_graph_module *gm, kn_tensor *const *inputs, int n,
                               kn_tensor **outputs, int m) {
  if (!gm) return kn__error(KN_EINVAL, "graph module is NULL");
  kn_status st = kn__gprog_run(gm->p, inputs, n, outputs, m);
  if (st != KN_OK) return st;
  return kn__autorelease_many(outputs, m);
}

int kn_graph_module_num_inputs(const kn_graph_module *gm) {
  return gm ? kn__gprog_num_inputs(gm->p) : -1;
}

int kn_graph_module_num_outputs(const kn_graph_module *gm) {
  return gm ? kn__gprog_num_outputs(gm->p) : -1;
}

char *kn_graph_module_code(const kn_graph_module *gm) {
  if (!gm) {
    kn__error(KN_EINVAL, "graph module is NULL");
    return NULL;
  }
  return kn__graph_code(gm->g, NULL);
}

void kn_graph_module_free(kn_graph_module *gm) {
  if (!gm) return;
  kn__gprog_free(gm->p);
  kn__graph_free(gm->g);
  free(gm);
}
