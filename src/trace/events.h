/*
** trace/events.h: helpers for the trace records every subsystem shares:
** stacks with interned file names, dynamo_start, artifact, chromium_event
** and compilation_metrics (trace_format.md §1.6, §1.7, §3.2, §3.5-3.7).
** Each is a no-op returning KN_OK when tracing is off (one branch), and
** json_t arguments documented as stolen are released even on error.
*/
#ifndef KN_TRACE_EVENTS_H
#define KN_TRACE_EVENTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"

/* One stack frame; loc (the source line text) may be NULL (not written). */
typedef struct kn__trace_frame {
  const char *filename;
  int64_t line;
  const char *name;
  const char *loc;
} kn__trace_frame;

/* A stack as JSON, outermost frame first: [{"line", "name", "filename":
** interned id[, "loc"]}...]. Owned by the caller; NULL when tracing is off,
** on OOM or on a NULL filename/name. */
json_t *kn__trace_stack(const kn__trace_frame *frames, size_t n);

/* {"dynamo_start": {"stack": [...]}} for the compile starting now. */
kn_status kn__trace_dynamo_start_at(const char *file, int line, const kn__trace_frame *frames,
                                    size_t n, const kn__trace_opts *o);
#define kn__trace_dynamo_start(...) kn__trace_dynamo_start_at(__FILE__, __LINE__, __VA_ARGS__)

/* {"artifact": {"name": name, "encoding": "string"|"json"}} with the payload
** text (len, or strlen when SIZE_MAX). KN_EINVAL for another encoding. */
kn_status kn__trace_artifact_at(const char *file, int line, const char *name,
                                const char *encoding, const char *payload, size_t len,
                                const kn__trace_opts *o);
#define kn__trace_artifact(...) kn__trace_artifact_at(__FILE__, __LINE__, __VA_ARGS__)
/* A "json" artifact from a value (borrowed), encoded as spec §1.4 says. */
kn_status kn__trace_artifact_json_at(const char *file, int line, const char *name,
                                     const json_t *value, const kn__trace_opts *o);
#define kn__trace_artifact_json(...) kn__trace_artifact_json_at(__FILE__, __LINE__, __VA_ARGS__)

/* Wall-clock time in microseconds since the epoch, as PyTorch's
** time.time_ns() / 1000 (a float with a fractional part). */
double kn__trace_now_us(void);
/* A chromium_event record: payload {"name", "ts", "args", "ph", "cat":
** "dynamo_timed", "tid": 0, "pid": 0[, "s": "p"]}. ph is 'B', 'E' or 'i'
** (instant, process scope). args (stolen, NULL = {}) gets "compile_id" last:
** the compile id of o or of the compile context, else "None". ts_us < 0 =
** now. The record carries compile-id keys only inside a compile. */
kn_status kn__trace_chromium_event_at(const char *file, int line, const char *name, char ph,
                                      double ts_us, json_t *args, const kn__trace_opts *o);
#define kn__trace_chromium_event(...) kn__trace_chromium_event_at(__FILE__, __LINE__, __VA_ARGS__)

/* A compilation_metrics record. fields (stolen) holds the metrics kiln
** knows, by PyTorch's names; the record lists every field of PyTorch's
** CompilationMetrics in its order with null for the missing ones, fills
** compile_id (from o or the compile context), log_format_version 3, and the
** legacy *_s fields from their *_us sources. The event is
** "compilation_metrics", "bwd_..." when is_forward is false, "..._runtime"
** when is_runtime is true. KN_EINVAL for an unknown field, a field of the
** wrong type for tlparse, or fail_type without fail_reason (or vice versa). */
kn_status kn__trace_compilation_metrics_at(const char *file, int line, json_t *fields,
                                           const kn__trace_opts *o);
#define kn__trace_compilation_metrics(...)                                     \
  kn__trace_compilation_metrics_at(__FILE__, __LINE__, __VA_ARGS__)

/* A compilation_metrics_runtime record for the graph compiled as id
** (fields stolen; is_runtime is set): written now, or, while this thread is
** inside a compile (kiln runs a new graph within the compile of its frame,
** PyTorch after it), held until the outermost compile context is left
** (kn__compile_ctx_on_leave runs the flush), so it follows the compile's own
** compilation_metrics as in PyTorch's traces. */
void kn__trace_runtime_metrics(json_t *m, kn_compile_id id);
void kn__trace_runtime_metrics_flush(void);

#endif
