/*
** dynamo/frame.c: the records of one frame compile, in the seeds' order:
** [recompile_reasons] -> dynamo_start -> (describe_* per input) -> ... ->
** dynamo_output_graph (+ graph/graph_code/graph_sizes logs) -> guards ->
** compilation_metrics, with chromium begin/end events per phase and the
** INFO "Step N" progress lines. Everything runs inside the frame's compile
** context, so logs carry the [frame/compile] tag and trace records the ids.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aot/aot.h"
#include "core/error.h"
#include "dynamo/frame.h"
#include "inductor/inductor.h"
#include "logging/log.h"
#include "trace/events.h"
#include "trace/trace.h"

static double mono_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

void kn__fc_begin(kn__fc *c, kn__frame *fr, const kn__recompile_note *note, bool quiet) {
  memset(c, 0, sizeof *c);
  c->frame = fr;
  c->quiet = quiet;
  if (fr->frame_id < 0) fr->frame_id = kn__next_frame_id();
  int64_t fcid = quiet ? (fr->ncompiles > 0 ? fr->ncompiles - 1 : 0) : fr->ncompiles++;
  c->cid = (kn_compile_id){-1, fr->frame_id, fcid};
  kn__compile_ctx_enter(c->cid, &c->saved);
  c->start_wall_us = kn__trace_now_us();
  c->t0 = mono_us();
  c->tbegin = kn__compile_time_begin();
  kn__ind_times_take(NULL, NULL); /* this frame's inductor time starts now */
  kn__aot_times_take(NULL, NULL); /* and its AOT time */
  if (quiet) return;
  if (note && note->msg) {
    if (note->verbose) KN_LOG_ARTIFACT(KN_ART_RECOMPILES_VERBOSE, "%s", note->msg);
    else KN_LOG_ARTIFACT(KN_ART_RECOMPILES, "%s", note->msg);
  }
  if (note && note->reasons_json && kn__trace_enabled()) {
    json_t *j = json_loads(note->reasons_json, 0, NULL);
    if (j) {
      (void)kn__trace_artifact_json("recompile_reasons", j, NULL);
      json_decref(j);
    }
  }
  if (kn__trace_enabled()) {
    kn__trace_frame tf = {fr->file ? fr->file : "<unknown>", fr->line, fr->name, NULL};
    (void)kn__trace_dynamo_start(&tf, 1, NULL);
    (void)kn__trace_chromium_event("dynamo", 'B', -1, NULL, NULL);
    (void)kn__trace_chromium_event("entire_frame_compile", 'B', -1, NULL, NULL);
  }
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "Step 1: dynamo start tracing %s %s:%d", fr->name,
         fr->file ? fr->file : "<unknown>", fr->line);
  KN_LOG(KN_LOG_DYNAMO, KN_DEBUG, "dynamo start compiling %s %s:%d", fr->name,
         fr->file ? fr->file : "<unknown>", fr->line);
}

void kn__fc_restart(kn__fc *c, const char *reason) {
  if (c->quiet) return;
  if (c->nrestart < 4) c->restart[c->nrestart++] = reason ? strdup(reason) : NULL;
  kn__compile_ctx_get()->attempt++;
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "Restarting analysis due to %s", reason ? reason : "graph break");
}

void kn__fc_graph(kn__fc *c, const kn__graph *g) {
  c->graph_ops = kn__graph_op_count(g);
  c->graph_nodes = kn__graph_num_nodes(g);
  c->graph_inputs = kn__graph_num_inputs(g);
  if (c->quiet) return;
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "Step 1: dynamo done tracing %s (return)",
         c->frame->name);
  if (c->graph_ops == 0) return; /* an empty graph is not compiled */
  char title[64];
  snprintf(title, sizeof title, "===== __compiled_fn_%d =====", kn__next_compiled_fn_number());
  const char *fn_name = title + 6; /* graph_sizes adds its own "=====" */
  const char *file = c->frame->file ? c->frame->file : "<unknown>";
  if (kn__trace_enabled()) {
    char *code = kn__graph_code(g, NULL);
    json_t *sizes = kn__graph_sizes_json(g);
    if (sizes && code) (void)kn__trace_structured("dynamo_output_graph", sizes, code, SIZE_MAX, NULL);
    else json_decref(sizes);
    free(code);
  }
  if (KN_ARTIFACT_ENABLED(KN_ART_GRAPH_CODE)) {
    char *code = kn__graph_code(g, NULL);
    char *txt = code ? kn__graph_format_traced(title, file, code) : NULL;
    if (txt) KN_LOG_ARTIFACT(KN_ART_GRAPH_CODE, "%s", txt);
    free(txt);
    free(code);
  }
  if (KN_ARTIFACT_ENABLED(KN_ART_GRAPH)) {
    char *tab = kn__graph_tabular(g);
    char *txt = tab ? kn__graph_format_traced(title, file, tab) : NULL;
    if (txt) KN_LOG_ARTIFACT(KN_ART_GRAPH, "%s", txt);
    free(txt);
    free(tab);
  }
  if (KN_ARTIFACT_ENABLED(KN_ART_GRAPH_SIZES)) {
    char title2[64];
    snprintf(title2, sizeof title2, "%.*s", (int)(strlen(fn_name) - 6), fn_name);
    char *s = kn__graph_sizes(g, title2);
    if (s) KN_LOG_ARTIFACT(KN_ART_GRAPH_SIZES, "%s", s);
    free(s);
  }
}

void kn__fc_backend_begin(kn__fc *c, const char *backend) {
  c->backend_t0 = mono_us();
  if (c->quiet) return;
  if (kn__trace_enabled()) (void)kn__trace_chromium_event("backend_compile", 'B', -1, NULL, NULL);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "Step 2: calling compiler function %s", backend);
}

void kn__fc_backend_end(kn__fc *c, const char *backend) {
  c->backend_us += mono_us() - c->backend_t0;
  if (c->quiet) return;
  if (kn__trace_enabled()) (void)kn__trace_chromium_event("backend_compile", 'E', -1, NULL, NULL);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "Step 2: done compiler function %s", backend);
}

void kn__fc_guards(kn__fc *c, const char *dump, int nguards, int nshape) {
  c->guard_count = nguards;
  c->shape_guard_count = nshape;
  c->has_guarded_code = true;
  if (c->quiet || !dump) return;
  if (kn__trace_enabled())
    (void)kn__trace_structured("dynamo_cpp_guards_str", NULL, dump, SIZE_MAX, NULL);
  KN_LOG_ARTIFACT(KN_ART_GUARDS, "%s", dump);
}

static kn_status set_int(json_t *o, const char *k, int64_t v) {
  return json_object_set_new(o, k, json_integer(v)) ? kn__oom() : KN_OK;
}

void kn__fc_end(kn__fc *c, const kn__fc_info *info) {
  double dur = mono_us() - c->t0;
  if (!c->quiet) {
    kn__compile_time_end("_compile.compile_inner", c->tbegin);
    if (c->backend_us > 0) kn__compile_time_record("OutputGraph.call_user_compiler",
                                                   c->backend_us / 1e6);
  }
  if (!c->quiet && kn__trace_enabled()) {
    json_t *m = json_object();
    kn__frame *fr = c->frame;
    if (m) {
      json_object_set_new(m, "co_name", json_string(fr->name));
      json_object_set_new(m, "co_filename", json_string(fr->file ? fr->file : "<unknown>"));
      set_int(m, "co_firstlineno", fr->line);
      set_int(m, "cache_size", info ? info->cache_size : 0);
      set_int(m, "accumulated_cache_size", info ? info->cache_size : 0);
      set_int(m, "guard_count", c->guard_count);
      set_int(m, "shape_env_guard_count", c->shape_guard_count);
      set_int(m, "graph_op_count", c->graph_ops);
      set_int(m, "graph_node_count", c->graph_nodes);
      set_int(m, "graph_input_count", c->graph_inputs);
      set_int(m, "start_time_us", (int64_t)c->start_wall_us);
      set_int(m, "duration_us", (int64_t)dur);
      set_int(m, "dynamo_cumulative_compile_time_us", (int64_t)dur);
      double aot_us, aot_bw_us;
      kn__aot_times_take(&aot_us, &aot_bw_us); /* AOT's own time when it ran */
      set_int(m, "aot_autograd_cumulative_compile_time_us",
              (int64_t)(aot_us > 0 ? aot_us : c->backend_us));
      if (aot_us > 0) set_int(m, "backward_cumulative_compile_time_us", (int64_t)aot_bw_us);
      double ind_us, ind_cg_us;
      kn__ind_times_take(&ind_us, &ind_cg_us);
      if (ind_us > 0) {
        set_int(m, "inductor_cumulative_compile_time_us", (int64_t)ind_us);
        set_int(m, "inductor_code_gen_cumulative_compile_time_us", (int64_t)ind_cg_us);
      }
      set_int(m, "end_time_us", (int64_t)(c->start_wall_us + dur));
      json_t *rr = json_array();
      for (int i = 0; i < c->nrestart; i++)
        if (c->restart[i]) json_array_append_new(rr, json_string(c->restart[i]));
      json_object_set_new(m, "restart_reasons", rr);
      json_object_set_new(m, "has_guarded_code", json_boolean(c->has_guarded_code));
      json_object_set_new(m, "config_suppress_errors",
                          json_boolean(info && info->suppress_errors));
      json_object_set_new(m, "is_forward", json_true());
      set_int(m, "num_graph_breaks", c->nrestart);
      if (info && info->fail_type) {
        json_object_set_new(m, "fail_type", json_string(info->fail_type));
        json_object_set_new(m, "fail_reason", json_string(info->fail_reason ? info->fail_reason : ""));
        if (info->fail_file) {
          json_object_set_new(m, "fail_user_frame_filename", json_string(info->fail_file));
          set_int(m, "fail_user_frame_lineno", info->fail_line > 0 ? info->fail_line : 0);
        }
      }
      json_t *args = json_object();
      if (args) json_object_set_new(args, "co_name", json_string(fr->name));
      (void)kn__trace_chromium_event("entire_frame_compile", 'E', -1, NULL, NULL);
      (void)kn__trace_chromium_event("dynamo", 'E', -1, args, NULL);
      (void)kn__trace_compilation_metrics(m, NULL);
    }
  }
  for (int i = 0; i < c->nrestart; i++) free(c->restart[i]);
  c->nrestart = 0;
  kn__compile_ctx_leave(&c->saved);
}
