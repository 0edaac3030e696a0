/*
** trace/metrics.c: the compilation_metrics record (trace_format.md §3.6).
**
** PyTorch logs every field of its CompilationMetrics dataclass, null when
** unknown, in declaration order; the table below is that order (as in the
** Aug 2025 fixture, LOG_FORMAT_VERSION 3). tlparse deserializes a subset
** with fixed types and drops the whole record when one is wrong, so those
** fields are type-checked here.
*/
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "trace/events.h"

typedef enum { ANY, STR, UINT, REAL, STRLIST, BOOL } kind;

static const struct field { const char *name; kind k; } fields[] = {
  {"compile_id", STR}, {"frame_key", STR}, {"co_name", STR}, {"co_filename", STR},
  {"co_firstlineno", UINT}, {"cache_size", UINT}, {"accumulated_cache_size", UINT},
  {"guard_count", UINT}, {"shape_env_guard_count", UINT}, {"graph_op_count", UINT},
  {"graph_node_count", UINT}, {"graph_input_count", UINT}, {"start_time", REAL},
  {"entire_frame_compile_time_s", REAL}, {"backend_compile_time_s", REAL},
  {"inductor_compile_time_s", REAL}, {"code_gen_time_s", REAL}, {"fail_type", STR},
  {"fail_reason", STR}, {"fail_user_frame_filename", STR},
  {"fail_user_frame_lineno", UINT}, {"non_compliant_ops", STRLIST},
  {"compliant_custom_ops", STRLIST}, {"restart_reasons", STRLIST},
  {"dynamo_time_before_restart_s", REAL}, {"stack_trace", STRLIST},
  {"graph_node_shapes", STR}, {"has_guarded_code", BOOL},
  {"remote_cache_time_saved_s", REAL}, {"structured_logging_overhead_s", REAL},
  {"config_suppress_errors", BOOL}, {"config_inline_inbuilt_nn_modules", BOOL},
  {"specialize_float", BOOL}, {"dynamo_config", STR}, {"is_forward", BOOL},
  {"num_triton_bundles", UINT}, {"remote_fx_graph_cache_get_time_ms", UINT},
  {"remote_fx_graph_cache_put_time_ms", UINT}, {"start_time_us", UINT},
  {"duration_us", UINT}, {"dynamo_cumulative_compile_time_us", UINT},
  {"aot_autograd_cumulative_compile_time_us", UINT},
  {"inductor_cumulative_compile_time_us", UINT},
  {"inductor_code_gen_cumulative_compile_time_us", UINT},
  {"triton_compile_time_us", UINT}, {"runtime_cudagraphify_time_us", UINT},
  {"runtime_triton_autotune_time_us", UINT},
  {"dynamo_compile_time_before_restart_us", UINT},
  {"distributed_ephemeral_timeout_us", UINT}, {"structured_logging_overhead_us", UINT},
  {"remote_fx_graph_cache_get_time_us", UINT}, {"remote_fx_graph_cache_put_time_us", UINT},
  {"backward_cumulative_compile_time_us", UINT}, {"end_time_us", UINT},
  {"pre_grad_pass_time_us", UINT}, {"post_grad_pass_time_us", UINT},
  {"joint_graph_pass_time_us", UINT}, {"log_format_version", UINT},
  {"inductor_config", STR}, {"remote_cache_version", UINT},
  {"inductor_fx_remote_cache_hit_count", UINT},
  {"inductor_fx_remote_cache_miss_count", UINT},
  {"inductor_fx_remote_cache_backend_type", STR},
  {"inductor_fx_remote_cache_hit_keys", STR}, {"inductor_fx_remote_cache_miss_keys", STR},
  {"cuda_version", STR}, {"triton_version", STR}, {"feature_usage", ANY},
  {"compile_time_autotune_time_us", UINT}, {"is_runtime", BOOL}, {"gc_time_us", UINT},
  {"tensorify_float_attempt", BOOL}, {"tensorify_float_success", BOOL},
  {"tensorify_float_failure", STRLIST}, {"guard_latency_us", REAL},
  {"recompile_reason", STR}, {"num_graph_breaks", UINT},
  {"triton_kernel_compile_times_us", STR}, {"ir_count", UINT},
  {"cudagraph_skip_reason", STR}, {"python_version", STR},
  {"pgo_put_remote_code_state_time_us", UINT}, {"pgo_get_remote_code_state_time_us", UINT},
  {"param_numel", UINT}, {"param_bytes", UINT}, {"param_count", UINT},
  {"recompile_user_contexts", ANY}, {"inline_inbuilt_nn_modules_candidate", BOOL},
};
#define NFIELDS (sizeof fields / sizeof fields[0])

/* Legacy seconds fields derived from their microsecond sources. */
static const struct { const char *s, *us; } legacy[] = {
  {"start_time", "start_time_us"},
  {"entire_frame_compile_time_s", "dynamo_cumulative_compile_time_us"},
  {"backend_compile_time_s", "aot_autograd_cumulative_compile_time_us"},
  {"inductor_compile_time_s", "inductor_cumulative_compile_time_us"},
  {"code_gen_time_s", "inductor_code_gen_cumulative_compile_time_us"},
  {"dynamo_time_before_restart_s", "dynamo_compile_time_before_restart_us"},
};

static const struct field *find(const char *name) {
  for (size_t i = 0; i < NFIELDS; i++)
    if (strcmp(fields[i].name, name) == 0) return &fields[i];
  return NULL;
}

static bool kind_ok(kind k, json_t *v) {
  if (json_is_null(v)) return true;
  switch (k) {
  case STR: return json_is_string(v);
  case UINT: return json_is_integer(v) && json_integer_value(v) >= 0;
  case REAL: return json_is_number(v);
  case BOOL: return json_is_boolean(v);
  case STRLIST:
    if (!json_is_array(v)) return false;
    for (size_t i = 0; i < json_array_size(v); i++)
      if (!json_is_string(json_array_get(v, i))) return false;
    return true;
  case ANY: return true;
  }
  return false;
}

static kn_status check(json_t *in) {
  const char *key;
  json_t *v;
  json_object_foreach(in, key, v) {
    const struct field *f = find(key);
    if (!f)
      return kn__error(KN_EINVAL, "compilation_metrics: unknown field \"%s\"", key);
    if (!kind_ok(f->k, v))
      return kn__error(KN_EINVAL, "compilation_metrics field \"%s\": wrong JSON "
                       "type for tlparse", key);
  }
  bool type = !json_is_null(json_object_get(in, "fail_type")) &&
              json_object_get(in, "fail_type");
  bool reason = !json_is_null(json_object_get(in, "fail_reason")) &&
                json_object_get(in, "fail_reason");
  if (type != reason)
    return kn__error(KN_EINVAL, "compilation_metrics: fail_type and fail_reason "
                     "must be set together, found only %s",
                     type ? "fail_type" : "fail_reason");
  return KN_OK;
}

/* Fill compile_id, log_format_version and the legacy fields in place. */
static void complete(json_t *in, const kn__trace_opts *o) {
  const kn__compile_ctx *ctx = kn__compile_ctx_get();
  if (!json_object_get(in, "compile_id") && ((o && o->compile_id) || ctx->active)) {
    char id[64];
    kn__compile_id_format(o && o->compile_id ? *o->compile_id : ctx->id, id, sizeof id);
    json_object_set_new(in, "compile_id", json_string(id));
  }
  json_object_set_new(in, "log_format_version", json_integer(3));
  if (!json_object_get(in, "is_runtime")) json_object_set_new(in, "is_runtime", json_false());
  for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++) {
    json_t *us = json_object_get(in, legacy[i].us);
    if (json_is_integer(us) && !json_object_get(in, legacy[i].s))
      json_object_set_new(in, legacy[i].s,
                          json_real((double)json_integer_value(us) / 1e6));
  }
}

kn_status kn__trace_compilation_metrics_at(const char *file, int line, json_t *in,
                                           const kn__trace_opts *o) {
  kn__trace_opts ob;
  o = kn__trace_at(&ob, o, file, line);
  if (!kn__trace_enabled()) { json_decref(in); return KN_OK; }
  if (!json_is_object(in)) {
    json_decref(in);
    return kn__error(KN_EINVAL, "compilation_metrics: expected an object of fields");
  }
  kn_status s = check(in);
  if (s) { json_decref(in); return s; }
  complete(in, o);
  json_t *out = json_object();
  for (size_t i = 0; out && i < NFIELDS; i++) {
    json_t *v = json_object_get(in, fields[i].name);
    json_object_set(out, fields[i].name, v ? v : json_null());
  }
  bool bwd = json_is_false(json_object_get(in, "is_forward"));
  bool runtime = json_is_true(json_object_get(in, "is_runtime"));
  json_decref(in);
  if (!out) return kn__oom();
  char event[64];
  snprintf(event, sizeof event, "%scompilation_metrics%s", bwd ? "bwd_" : "",
           runtime ? "_runtime" : "");
  return kn__trace_structured(event, out, NULL, 0, o);
}

/* ---- runtime records ---------------------------------------------------------------- */

#define MAX_PENDING 16
static _Thread_local struct pending {
  json_t *m;
  kn_compile_id id;
} pending[MAX_PENDING];
static _Thread_local int npending;

static void runtime_now(json_t *m, kn_compile_id id) {
  kn__trace_opts o = {.file = __FILE__, .line = __LINE__, .compile_id = &id};
  (void)kn__trace_compilation_metrics(m, &o);
}

void kn__trace_runtime_metrics(json_t *m, kn_compile_id id) {
  if (!m) return;
  json_object_set_new(m, "is_runtime", json_true());
  if (!kn__compile_ctx_get()->active) {
    runtime_now(m, id);
  } else if (npending < MAX_PENDING) {
    pending[npending].m = m;
    pending[npending++].id = id;
    kn__compile_ctx_on_leave(kn__trace_runtime_metrics_flush);
  } else {
    json_decref(m); /* a compile that ran more graphs than this keeps the first ones */
  }
}

void kn__trace_runtime_metrics_flush(void) {
  int n = npending;
  npending = 0;
  for (int i = 0; i < n; i++) runtime_now(pending[i].m, pending[i].id);
}
