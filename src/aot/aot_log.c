/*
** aot/aot_log.c: the AOT graphs in logs and structured traces. Each graph
** is written as the graph printer shows it (sizes, strides and devices): the
** trace events aot_joint_graph, aot_forward_graph, aot_backward_graph and
** aot_inference_graph, and the log artifacts aot_joint_graph (the joint
** graph) and aot_graphs (the others), titled as PyTorch's
** "===== Forward graph 0 =====" (the number counts AOT compiles).
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "aot/aot.h"
#include "logging/log.h"
#include "trace/trace.h"

static atomic_int next_aot_id;

int kn__aot_next_id(void) { return atomic_fetch_add(&next_aot_id, 1); }

static const char *const event_names[] = {"aot_joint_graph", "aot_forward_graph",
                                          "aot_backward_graph", "aot_inference_graph"};
static const char *const titles[] = {"Joint graph", "Forward graph", "Backward graph",
                                     "Inference graph"};

static void log_artifact(kn__aot_graph_kind kind, const char *code, int id) {
  char title[80];
  snprintf(title, sizeof title, "===== %s %d =====\n", titles[kind], id);
  char *txt = kn__graph_format_traced(title, "<eval_with_key>", code);
  if (!txt) return;
  if (kind == KN__AOT_JOINT) KN_LOG_ARTIFACT(KN_ART_AOT_JOINT_GRAPH, "%s", txt);
  else KN_LOG_ARTIFACT(KN_ART_AOT_GRAPHS, "%s", txt);
  free(txt);
}

void kn__aot_log_graph(kn__aot_graph_kind kind, const kn__graph *g, int id) {
  bool art = kind == KN__AOT_JOINT ? KN_ARTIFACT_ENABLED(KN_ART_AOT_JOINT_GRAPH)
                                   : KN_ARTIFACT_ENABLED(KN_ART_AOT_GRAPHS);
  if (!art && !kn__trace_enabled()) return;
  char *code = kn__graph_code(g, NULL);
  if (!code) return;
  if (kn__trace_enabled())
    (void)kn__trace_structured(event_names[kind], NULL, code, SIZE_MAX, NULL);
  if (art) log_artifact(kind, code, id);
  free(code);
}
