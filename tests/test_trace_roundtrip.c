/*
** test_trace_roundtrip.c: the writer against the reader and against real
** PyTorch output: every record of the Aug 2025 rank-1 fixture rebuilt byte
** for byte, compilation_metrics from the fixture's own values, every record
** type written then read back strictly, and many threads tracing at once.
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/trace.h"
#include "support/trace_util.h"
#include "trace/events.h"
#include "trace/reader.h"
#include "trace/trace.h"

#define RANK1 KN_FIXTURE_DIR "/pytorch_traces/dedicated_log_torch_trace_rank_1_fglwclht.log"

static char *dir;
static void setup(void) { dir = kn_test_trace_start(); }
static void teardown(void) {
  kn_trace_disable();
  kn_trace_set_rank(-1);
  kn_test_rmdir(dir);
}
TestSuite(roundtrip, .init = setup, .fini = teardown);

/* Write rec again with the same header fields and context. */
static void rewrite(const kn__trace_record *rec) {
  kn__trace_fake_header(rec->timestamp, (long)rec->thread);
  kn_trace_set_rank(rec->rank);
  kn__trace_opts o = {.file = rec->src_file, .line = (int)rec->src_line};
  o.suppress_context = strcmp(rec->event, "str") == 0;
  o.stack = json_object_get(rec->metadata, "stack");
  kn__compile_ctx saved;
  bool in_ctx = rec->attempt >= 0;
  if (in_ctx) {
    kn__compile_ctx_enter(rec->compile_id, &saved);
    kn__compile_ctx_get()->attempt = rec->attempt;
  } else if (rec->has_compile_id) {
    o.compile_id = &rec->compile_id;
  }
  kn_status st = kn__trace_structured(rec->event, json_incref(rec->value),
                                      rec->has_payload ? rec->payload : NULL,
                                      rec->payload_len, &o);
  cr_assert_eq(st, KN_OK, "line %llu: %s", (unsigned long long)rec->line, kn_last_error());
  if (in_ctx) kn__compile_ctx_leave(&saved);
}

Test(roundtrip, rebuilds_pytorch_fixture_byte_for_byte) {
  kn__trace_reader_opts ro = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open(RANK1, &ro);
  const kn__trace_record *rec;
  int n = 0;
  while (kn__trace_reader_next(r, &rec) == KN_OK && rec) {
    rewrite(rec);
    n++;
  }
  cr_assert_eq(n, 250);
  kn__trace_reader_close(r);
  size_t want_len, got_len;
  char *want = kn_test_read_file(RANK1, &want_len);
  char *path = kn_trace_file_path();
  char *got = kn_test_read_file(path, &got_len);
  size_t i = 0;
  while (i < want_len && i < got_len && want[i] == got[i]) i++;
  size_t line = 1;
  for (size_t k = 0; k < i; k++) line += want[k] == '\n';
  cr_assert(i == want_len && i == got_len,
            "first difference at byte %zu (line %zu): want \"%.80s\" got \"%.80s\"", i,
            line, want + i, got + i);
  free(want);
  free(got);
  free(path);
}

/* The fixture's first compilation_metrics, fed back as fields. */
Test(roundtrip, compilation_metrics_matches_fixture_record) {
  kn__trace_reader *r = kn__trace_reader_open(RANK1, NULL);
  const kn__trace_record *rec;
  while (kn__trace_reader_next(r, &rec) == KN_OK && rec &&
         strcmp(rec->event, "compilation_metrics") != 0) {
  }
  cr_assert_not_null(rec);
  kn__trace_fake_header(rec->timestamp, (long)rec->thread);
  kn_trace_set_rank(1);
  kn__compile_ctx saved;
  kn__compile_ctx_enter(rec->compile_id, &saved);
  kn__trace_opts o = {.file = rec->src_file, .line = (int)rec->src_line};
  cr_assert_eq(kn__trace_compilation_metrics(json_deep_copy(rec->value), &o), KN_OK,
               "%s", kn_last_error());
  kn__compile_ctx_leave(&saved);
  size_t len;
  char *want = kn_test_read_file(RANK1, &len);
  char *at = want;
  for (uint64_t l = 1; l < rec->line; l++) at = strchr(at, '\n') + 1;
  *strchr(at, '\n') = '\0';
  char *got = kn_test_trace_text();
  cr_assert_eq(got[strlen(got) - 1], '\n');
  got[strlen(got) - 1] = '\0';
  cr_assert_str_eq(got, at);
  free(got);
  free(want);
  kn__trace_reader_close(r);
}

static json_t *metrics_value(const char *text, const char **event) {
  static char ev[64];
  const char *meta = strstr(text, "] {\"") + 4;
  snprintf(ev, sizeof ev, "%.*s", (int)(strchr(meta, '"') - meta), meta);
  *event = ev;
  json_t *all = json_loads(strstr(text, "] ") + 2, 0, NULL);
  json_t *v = json_incref(json_object_get(all, ev));
  json_decref(all);
  return v;
}

Test(roundtrip, compilation_metrics_fills_and_checks) {
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, 0, 0}, &saved);
  json_t *f = json_pack("{ss,ss,si,si,sI,sI,s[],ss,ss}", "co_name", "fn", "co_filename",
                        "/t.c", "co_firstlineno", 3, "graph_op_count", 2,
                        "start_time_us", (json_int_t)1500000,
                        "dynamo_cumulative_compile_time_us", (json_int_t)250000,
                        "restart_reasons", "fail_type", "BackendCompilerFailed",
                        "fail_reason", "boom");
  cr_assert_eq(kn__trace_compilation_metrics(f, NULL), KN_OK, "%s", kn_last_error());
  kn__compile_ctx_leave(&saved);
  char *text = kn_test_trace_text();
  const char *event;
  json_t *v = metrics_value(text, &event);
  cr_assert_str_eq(event, "compilation_metrics");
  cr_assert_eq(json_object_size(v), 88);
  cr_assert_str_eq(json_string_value(json_object_get(v, "compile_id")), "0/0");
  cr_assert_eq(json_real_value(json_object_get(v, "start_time")), 1.5);
  cr_assert_eq(json_real_value(json_object_get(v, "entire_frame_compile_time_s")), 0.25);
  cr_assert_eq(json_integer_value(json_object_get(v, "log_format_version")), 3);
  cr_assert(json_is_false(json_object_get(v, "is_runtime")));
  cr_assert(json_is_null(json_object_get(v, "guard_count")));
  cr_assert_str_eq(json_object_iter_key(json_object_iter(v)), "compile_id");
  json_decref(v);
  free(text);
  json_t *bad[] = {
      json_pack("{ss}", "fail_type", "X"),
      json_pack("{ss}", "fail_reason", "X"),
      json_pack("{si}", "no_such_field", 1),
      json_pack("{ss}", "graph_op_count", "2"),
      json_pack("{s[i]}", "restart_reasons", 1),
  };
  const char *why[] = {"only fail_type", "only fail_reason", "no_such_field",
                       "graph_op_count", "restart_reasons"};
  for (size_t i = 0; i < 5; i++) {
    cr_assert_eq(kn__trace_compilation_metrics(bad[i], NULL), KN_EINVAL);
    cr_assert(strstr(kn_last_error(), why[i]), "%s", kn_last_error());
  }
  cr_assert_eq(kn__trace_compilation_metrics(json_pack("{sbsb}", "is_forward", 0,
                                                       "is_runtime", 1), NULL), KN_OK);
  text = kn_test_trace_text();
  char *last = text;
  for (char *p = text; (p = strstr(p, "\nV1206 ")); p++) last = p + 1;
  v = metrics_value(last, &event); /* the last record */
  cr_assert_str_eq(event, "bwd_compilation_metrics_runtime");
  json_decref(v);
  free(text);
}

/* ---- write, then read strictly ------------------------------------------ */

static void write_one_of_each(void) {
  kn__compile_ctx saved;
  kn_compile_id id = {-1, 1, 0};
  kn__compile_ctx_enter(id, &saved);
  const kn__trace_frame fr[] = {{"/u/main.c", 10, "main", "f(x);"}, {"/u/f.c", 2, "f", NULL}};
  cr_assert_eq(kn__trace_dynamo_start(fr, 2, NULL), KN_OK);
  KN_TRACE("describe_storage", json_pack("{sisisi}", "id", 0, "describer_id", 0, "size", 64), NULL);
  KN_TRACE("dynamo_output_graph", json_pack("{s{s[ii]}}", "sizes", "l_x_", 4, 4),
           "class GraphModule:\n    def forward(self, l_x_):\n        return (l_x_,)\n");
  kn__trace_chromium_event("dynamo", 'B', -1, NULL, NULL);
  kn__compile_ctx_get()->attempt = 1;
  kn__trace_artifact("dynamo_error", "string", "Traceback\n  line 1\n", SIZE_MAX, NULL);
  json_t *j = json_pack("{s[s]}", "keys", "\xc3\xa9t\xc3\xa9");
  kn__trace_artifact_json("fx_graph_cache_miss", j, NULL);
  json_decref(j);
  KN_TRACE("dynamo_cpp_guards_str", NULL, "TREE_GUARD_MANAGER:\n| +- GuardManager");
  kn__trace_compilation_metrics(json_pack("{ss,ss}", "fail_type", "E", "fail_reason", "r"), NULL);
  kn__trace_chromium_event("dynamo", 'E', -1, json_pack("{si}", "n", 1), NULL);
  kn__compile_ctx_leave(&saved);
  json_t *stack = kn__trace_stack(fr, 1);
  kn__trace_opts o = {.stack = stack};
  kn__trace_artifact("make_fx_fail_partial", "string", "", 0, &o);
  json_decref(stack);
}

Test(roundtrip, every_record_type_reads_back_strictly) {
  write_one_of_each();
  char *path = kn_trace_file_path();
  kn__trace_reader_opts ro = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open(path, &ro);
  static const char *const events[] = {"str", "str", "dynamo_start", "describe_storage",
      "dynamo_output_graph", "chromium_event", "artifact", "artifact",
      "dynamo_cpp_guards_str", "compilation_metrics", "chromium_event", "artifact"};
  const kn__trace_record *rec;
  size_t n = 0;
  kn_status st;
  while ((st = kn__trace_reader_next(r, &rec)) == KN_OK && rec) {
    cr_assert(n < 12);
    cr_assert_str_eq(rec->event, events[n], "record %zu", n);
    if (n >= 2 && n <= 10) {
      cr_assert(rec->has_compile_id);
      cr_assert_eq(rec->compile_id.frame_id, 1);
      cr_assert_eq(rec->attempt, n >= 6 ? 1 : 0, "record %zu", n);
    }
    if (n == 2) {
      json_t *f1 = json_array_get(json_object_get(rec->value, "stack"), 1);
      int64_t fid = json_integer_value(json_object_get(f1, "filename"));
      cr_assert_str_eq(kn__trace_reader_string(r, fid), "/u/f.c");
    }
    if (n == 4)
      cr_assert_str_eq(rec->payload, "class GraphModule:\n    def forward(self, l_x_):\n"
                       "        return (l_x_,)\n");
    if (n == 7) cr_assert_str_eq(rec->payload, "{\n\"keys\": [\n\"\\u00e9t\\u00e9\"\n]\n}");
    if (n == 11) {
      cr_assert(!rec->has_compile_id);
      cr_assert(json_is_array(json_object_get(rec->metadata, "stack")));
      cr_assert_eq(rec->payload_lines, 1);
    }
    n++;
  }
  cr_assert_eq(st, KN_OK, "%s", kn_last_error());
  cr_assert_eq(n, 12);
  cr_assert_eq(kn__trace_reader_defects(r), 0);
  kn__trace_reader_close(r);
  free(path);
}

/* ---- threads ----------------------------------------------------------- */

#define THREADS 4
#define PER_THREAD 300

static void *tracer(void *arg) {
  long t = (long)arg;
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, t, 0}, &saved);
  for (int i = 0; i < PER_THREAD; i++) {
    char file[64], payload[128];
    snprintf(file, sizeof file, "/src/file_%d.c", i % 17); /* shared names */
    const kn__trace_frame fr[] = {{file, i, "f", NULL}};
    json_t *stack = kn__trace_stack(fr, 1);
    snprintf(payload, sizeof payload, "thread %ld\nrecord %d\n", t, i);
    KN_TRACE("artifact", json_pack("{sisiso}", "t", (int)t, "i", i, "stack", stack), payload);
  }
  kn__compile_ctx_leave(&saved);
  return NULL;
}

Test(roundtrip, threads_write_complete_records) {
  pthread_t th[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, tracer, (void *)t);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  char *path = kn_trace_file_path();
  kn__trace_reader_opts ro = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open(path, &ro);
  static bool seen[THREADS][PER_THREAD];
  const kn__trace_record *rec;
  int strs = 0, arts = 0;
  kn_status st;
  while ((st = kn__trace_reader_next(r, &rec)) == KN_OK && rec) {
    if (strcmp(rec->event, "str") == 0) {
      cr_assert_eq(json_integer_value(json_array_get(rec->value, 1)), strs);
      strs++;
      continue;
    }
    int t = (int)json_integer_value(json_object_get(rec->value, "t"));
    int i = (int)json_integer_value(json_object_get(rec->value, "i"));
    cr_assert_eq(rec->compile_id.frame_id, t);
    char want[128];
    snprintf(want, sizeof want, "thread %d\nrecord %d\n", t, i);
    cr_assert_str_eq(rec->payload, want);
    cr_assert(!seen[t][i]);
    seen[t][i] = true;
    arts++;
  }
  cr_assert_eq(st, KN_OK, "%s", kn_last_error());
  cr_assert_eq(strs, 17);
  cr_assert_eq(arts, THREADS * PER_THREAD);
  cr_assert_eq(kn__trace_reader_defects(r), 0);
  kn__trace_reader_close(r);
  free(path);
}
