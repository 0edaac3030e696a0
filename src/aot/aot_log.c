/*
** aot/aot_log.c: the AOT graphs in logs and structured traces. Each graph
** is written as the graph printer shows it (sizes, strides and devices): the
** trace events aot_joint_graph, aot_forward_graph, aot_backward_graph and
** aot_inference_graph, and the log artifacts aot_joint_graph (the joint
** graph) and aot_graphs (the others), titled as PyTorch's
** "===== Forward graph 0 =====" (the number counts AOT compiles). Also the
** AOT phases (chromium B/E events, kn_dump_compile_times entries and the
** thread's sums for compilation_metrics), the aotautograd_cache_* and
** torch._functorch.config artifacts.
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aot/aot.h"
#include "logging/log.h"
#include "trace/events.h"
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

/* ---- phases and compile times ------------------------------------------------------- */

static _Thread_local double tls_total_us, tls_bw_us;

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void kn__aot_phase_begin(kn__aot_phase *ph, const char *name) {
  ph->name = name;
  ph->t0 = mono_s();
  if (kn__trace_enabled()) (void)kn__trace_chromium_event(name, 'B', -1, NULL, NULL);
}

void kn__aot_phase_end(kn__aot_phase *ph) {
  double s = mono_s() - ph->t0;
  if (kn__trace_enabled()) (void)kn__trace_chromium_event(ph->name, 'E', -1, NULL, NULL);
  kn__compile_time_record(ph->name, s);
  if (!strcmp(ph->name, "create_aot_dispatcher_function")) tls_total_us += s * 1e6;
  else if (!strcmp(ph->name, "aot_compile_bw")) tls_bw_us += s * 1e6;
}

void kn__aot_times_take(double *total_us, double *bw_us) {
  if (total_us) *total_us = tls_total_us;
  if (bw_us) *bw_us = tls_bw_us;
  tls_total_us = tls_bw_us = 0;
}

/* ---- the cache and configuration artifacts ----------------------------------------- */

void kn__aot_log_cache(const char *name, const char *key, const char *reason) {
  if (!kn__trace_enabled()) return;
  json_t *j = json_pack("{s:s, s:s}", "key", key, "reason", reason);
  if (j) (void)kn__trace_artifact_json(name, j, NULL);
  json_decref(j);
}

void kn__aot_log_config(const char *text) {
  if (kn__trace_enabled() && text)
    (void)kn__trace_artifact("torch._functorch.config", "string", text, SIZE_MAX, NULL);
}

void kn__aot_log_prepared(const kn__aot_prepared *p) {
  if (p->inference) {
    kn__aot_log_graph(KN__AOT_INFERENCE, p->fw, p->id);
    kn__aot_log_config(p->config);
    return;
  }
  kn__aot_log_graph(KN__AOT_FORWARD, p->fw, p->id);
  kn__aot_log_graph(KN__AOT_BACKWARD, p->bw, p->id);
}
