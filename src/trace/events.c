/*
** trace/events.c: stack encoding, dynamo_start, artifact and chromium_event
** records. compilation_metrics lives in metrics.c.
*/
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "trace/events.h"
#include "trace/json_py.h"

json_t *kn__trace_stack(const kn__trace_frame *frames, size_t n) {
  if (!kn__trace_enabled()) return NULL;
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) {
    const kn__trace_frame *f = &frames[i];
    int64_t id = kn__trace_intern(f->filename);
    json_t *o = id < 0 || !f->name ? NULL
                : json_pack("{sI,ss,sI}", "line", (json_int_t)f->line, "name",
                            f->name, "filename", (json_int_t)id);
    if (o && f->loc && json_object_set_new(o, "loc", json_string(f->loc)) != 0) {
      json_decref(o);
      o = NULL;
    }
    if (!o || json_array_append_new(a, o) != 0) {
      json_decref(a);
      a = NULL;
    }
  }
  return a;
}

kn_status kn__trace_dynamo_start_at(const char *file, int line, const kn__trace_frame *frames,
                                    size_t n, const kn__trace_opts *o) {
  kn__trace_opts ob;
  o = kn__trace_at(&ob, o, file, line);
  if (!kn__trace_enabled()) return KN_OK;
  json_t *stack = kn__trace_stack(frames, n);
  if (!stack)
    return kn__error(KN_EINVAL, "dynamo_start: expected frames with a file and "
                     "a function name (valid UTF-8)");
  return kn__trace_structured("dynamo_start", json_pack("{so}", "stack", stack),
                              NULL, 0, o);
}

kn_status kn__trace_artifact_at(const char *file, int line, const char *name,
                                const char *encoding, const char *payload, size_t len,
                                const kn__trace_opts *o) {
  kn__trace_opts ob;
  o = kn__trace_at(&ob, o, file, line);
  if (!kn__trace_enabled()) return KN_OK;
  if (!name || !encoding || !payload ||
      (strcmp(encoding, "string") != 0 && strcmp(encoding, "json") != 0))
    return kn__error(KN_EINVAL, "artifact '%s': expected a payload with encoding "
                     "\"string\" or \"json\", found %s", name ? name : "(null)",
                     encoding ? encoding : "(null)");
  json_t *meta = json_pack("{ss,ss}", "name", name, "encoding", encoding);
  if (!meta)
    return kn__error(KN_EINVAL, "artifact name: expected valid UTF-8");
  return kn__trace_structured("artifact", meta, payload, len, o);
}

kn_status kn__trace_artifact_json_at(const char *file, int line, const char *name,
                                     const json_t *value, const kn__trace_opts *o) {
  kn__trace_opts ob;
  o = kn__trace_at(&ob, o, file, line);
  if (!kn__trace_enabled()) return KN_OK;
  kn__sb sb = KN__SB_INIT;
  bool ok = kn__json_py_payload(&sb, value);
  kn_status s = kn__sb_failed(&sb) ? kn__oom()
                : !ok ? kn__error(KN_EINVAL, "artifact '%s': the value holds "
                                  "something JSON cannot carry", name ? name : "")
                      : kn__trace_artifact(name, "json", kn__sb_cstr(&sb), sb.len, o);
  kn__sb_fini(&sb);
  return s;
}

double kn__trace_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  long long ns = (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
  return (double)ns / 1000.0;
}

/* The compile id a chromium event belongs to, as args.compile_id shows it. */
static void chromium_compile_id(const kn__trace_opts *o, char *buf, size_t n) {
  const kn__compile_ctx *ctx = kn__compile_ctx_get();
  if (o && o->compile_id) kn__compile_id_format(*o->compile_id, buf, n);
  else if (ctx->active) kn__compile_id_format(ctx->id, buf, n);
  else snprintf(buf, n, "None");
}

kn_status kn__trace_chromium_event_at(const char *file, int line, const char *name, char ph,
                                      double ts_us, json_t *args, const kn__trace_opts *o) {
  kn__trace_opts ob;
  o = kn__trace_at(&ob, o, file, line);
  if (!kn__trace_enabled()) { json_decref(args); return KN_OK; }
  if (!name || (ph != 'B' && ph != 'E' && ph != 'i') ||
      (args && !json_is_object(args))) {
    json_decref(args);
    return kn__error(KN_EINVAL, "chromium_event: expected a name, ph 'B', 'E' or "
                     "'i' and an object of args, found ph '%c'", ph ? ph : '0');
  }
  char id[64];
  chromium_compile_id(o, id, sizeof id);
  if (!args) args = json_object();
  json_object_set_new(args, "compile_id", json_string(id));
  char phs[2] = {ph, '\0'};
  json_t *ev = json_pack("{ss,sf,so,ss,ss,si,si}", "name", name, "ts",
                         ts_us < 0 ? kn__trace_now_us() : ts_us, "args", args,
                         "ph", phs, "cat", "dynamo_timed", "tid", 0, "pid", 0);
  if (ev && ph == 'i') json_object_set_new(ev, "s", json_string("p"));
  kn__sb sb = KN__SB_INIT;
  bool ok = ev && kn__json_py_payload(&sb, ev);
  json_decref(ev);
  kn_status s = kn__sb_failed(&sb) ? kn__oom()
                : !ok ? kn__error(KN_EINVAL, "chromium_event '%s': args hold a "
                                  "value JSON cannot carry", name)
                      : kn__trace_structured("chromium_event", NULL, kn__sb_cstr(&sb),
                                             sb.len, o);
  kn__sb_fini(&sb);
  return s;
}
