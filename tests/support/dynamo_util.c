/*
** support/dynamo_util.c: the seeds' trace normalization over kiln's strict
** trace reader (see dynamo_util.h).
*/
#include "support/dynamo_util.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "kiln/compile.h"
#include "kiln/trace.h"
#include "support/log_capture.h"
#include "trace/reader.h"

static const char *const foreign[] = {
    "before_pre_grad_graph", "after_pre_grad_graph", "aotautograd_cache_miss",
    "aot_forward_graph_fw_metadata", "torch._functorch.config", "before_joint_graph",
    "after_joint_graph", "fx_graph_runnable", "before_post_grad_graph", "triton_kernel_info",
    "fx_graph_cache_miss", NULL};

static bool owned(const char *event, const char *art) {
  if (!strncmp(event, "aot_", 4) || !strncmp(event, "inductor_", 9) ||
      !strncmp(event, "bwd_", 4) || !strcmp(event, "compilation_metrics_runtime"))
    return false;
  if (art)
    for (int i = 0; foreign[i]; i++)
      if (!strcmp(art, foreign[i])) return false;
  return true;
}

static void stub(json_t *o, const char *k, const char *v) {
  if (o && json_is_object(o) && json_object_get(o, k)) json_object_set_new(o, k, json_string(v));
}

static void normalize(json_t *md, const char *event) {
  if (json_object_get(md, "has_payload")) json_object_set_new(md, "has_payload", json_string("HASH"));
  if (json_object_get(md, "stack")) json_object_set_new(md, "stack", json_string("STACK"));
  json_t *v = json_object_get(md, event);
  if (!strcmp(event, "dynamo_start")) stub(v, "stack", "STACK");
  if (strstr(event, "compilation_metrics")) json_object_set_new(md, event, json_string("METRICS"));
  if (!strncmp(event, "describe_", 9)) stub(v, "describer_id", "ID");
  if (!strcmp(event, "describe_tensor")) stub(v, "view_func", "VIEW_FUNC");
  if (!strcmp(event, "inductor_output_code")) {
    stub(v, "filename", "FILENAME");
    stub(v, "file_path", "FILENAME");
  }
  if (!strcmp(event, "create_symbol") || !strcmp(event, "guard_added_fast") ||
      !strcmp(event, "create_unbacked_symbol")) {
    stub(v, "user_stack", "STACK");
    stub(v, "stack", "STACK");
  }
}

static void count_defect(void *ud, const kn__trace_defect *d) {
  (void)d;
  (*(uint64_t *)ud)++;
}

typedef bool (*visit_fn)(void *ud, const kn__trace_record *rec);

static void each_record(uint64_t *defects, visit_fn fn, void *ud) {
  uint64_t dummy = 0;
  if (!defects) defects = &dummy;
  *defects = 0;
  char *path = kn_trace_file_path();
  if (!path) return;
  kn__trace_reader_opts o = {.strict = false, .on_defect = count_defect, .ud = defects};
  kn__trace_reader *r = kn__trace_reader_open(path, &o);
  free(path);
  if (!r) {
    (*defects)++;
    return;
  }
  const kn__trace_record *rec;
  while (kn__trace_reader_next(r, &rec) == KN_OK && rec)
    if (!fn(ud, rec)) break;
  kn__trace_reader_close(r);
}

typedef struct view {
  kn__sb sb;
  bool owned_only;
} view;

static bool add_line(void *ud, const kn__trace_record *rec) {
  view *v = ud;
  if (!strcmp(rec->event, "str") || !strcmp(rec->event, "chromium_event")) return true;
  const char *art = NULL;
  if (!strcmp(rec->event, "artifact"))
    art = json_string_value(json_object_get(rec->value, "name"));
  if (v->owned_only && !owned(rec->event, art)) return true;
  json_t *md = json_deep_copy(rec->metadata);
  normalize(md, rec->event);
  char *s = json_dumps(md, JSON_PRESERVE_ORDER);
  if (s) {
    kn__sb_puts(&v->sb, s);
    kn__sb_putc(&v->sb, '\n');
  }
  free(s);
  json_decref(md);
  return true;
}

char *kn_test_dyn_trace(bool owned_only, uint64_t *defects) {
  view v = {KN__SB_INIT, owned_only};
  each_record(defects, add_line, &v);
  char *s = kn__sb_take(&v.sb);
  return s ? s : strdup("");
}

typedef struct find {
  const char *event;
  int n;
  char *out;
} find;

static bool find_payload(void *ud, const kn__trace_record *rec) {
  find *f = ud;
  const char *name = rec->event;
  if (!strcmp(rec->event, "artifact")) name = json_string_value(json_object_get(rec->value, "name"));
  if (!name || strcmp(name, f->event)) return true;
  if (f->n-- > 0) return true;
  f->out = strndup(rec->payload, rec->payload_len);
  return false;
}

char *kn_test_dyn_payload(const char *event, int n) {
  find f = {event, n, NULL};
  each_record(NULL, find_payload, &f);
  return f.out;
}

static bool find_metadata(void *ud, const kn__trace_record *rec) {
  find *f = ud;
  if (strcmp(rec->event, f->event)) return true;
  if (f->n-- > 0) return true;
  f->out = json_dumps(rec->value, JSON_PRESERVE_ORDER | JSON_COMPACT);
  return false;
}

char *kn_test_dyn_metadata(const char *event, int n) {
  find f = {event, n, NULL};
  each_record(NULL, find_metadata, &f);
  return f.out;
}

char *kn_test_dyn_filter(const char *text) {
  kn__sb sb = KN__SB_INIT;
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    char *line = strndup(p, len);
    json_t *j = line ? json_loads(line, 0, NULL) : NULL;
    if (j) {
      const char *event = json_object_iter_key(json_object_iter(j));
      const char *art = NULL;
      if (event && !strcmp(event, "artifact"))
        art = json_string_value(json_object_get(json_object_get(j, "artifact"), "name"));
      if (event && owned(event, art)) {
        kn__sb_puts(&sb, line);
        kn__sb_putc(&sb, '\n');
      }
      json_decref(j);
    }
    free(line);
    if (!nl) break;
    p = nl + 1;
  }
  char *s = kn__sb_take(&sb);
  return s ? s : strdup("");
}

int kn_test_count_sub(const char *hay, const char *needle) {
  int n = 0;
  size_t l = strlen(needle);
  for (const char *p = hay; l && (p = strstr(p, needle)); p += l) n++;
  return n;
}

char *kn_test_capture_stdout(void (*fn)(void *), void *ud) {
  fflush(stdout);
  FILE *tmp = tmpfile();
  if (!tmp) return NULL;
  int saved = dup(1);
  dup2(fileno(tmp), 1);
  fn(ud);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  off_t n = lseek(fileno(tmp), 0, SEEK_END);
  char *buf = malloc((size_t)(n > 0 ? n : 0) + 1);
  if (buf) {
    lseek(fileno(tmp), 0, SEEK_SET);
    ssize_t r = read(fileno(tmp), buf, (size_t)(n > 0 ? n : 0));
    buf[r > 0 ? r : 0] = 0;
  }
  fclose(tmp);
  return buf;
}

static int64_t live_at_setup;

void kn_test_dynamo_setup(void) {
  kn_reset();
  kn_test_log_clean();
  live_at_setup = kn_live_tensors();
}

void kn_test_dynamo_teardown(void) {
  kn_reset();
  cr_expect_eq(kn_live_tensors(), live_at_setup, "leaked tensors: %lld",
               (long long)(kn_live_tensors() - live_at_setup));
}
