/*
** test_trace_writer.c: byte-exact records from the trace writer, compared
** with literal text built from the trace spec (§1.2-1.7, §3.6-3.7). The
** header clock and pid are pinned with kn__trace_fake_header.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/trace.h"
#include "support/trace_util.h"
#include "trace/events.h"
#include "trace/trace.h"

#define HDR(site) "V1206 15:20:13.926000 1543231 " site "] "

static char *dir;
static void setup(void) { dir = kn_test_trace_start(); }
static void teardown(void) {
  kn_trace_disable();
  kn_test_rmdir(dir);
}
TestSuite(writer, .init = setup, .fini = teardown);

static void text_is(const char *want) {
  char *got = kn_test_trace_text();
  cr_assert_str_eq(got, want);
  free(got);
}

static kn__trace_opts at(const char *file, int line) {
  return (kn__trace_opts){.file = file, .line = line};
}

Test(writer, lazy_file_name_and_path) {
  char *path = kn_trace_file_path();
  cr_assert_null(path, "file created before the first record");
  kn__trace_opts o = at("src/x.c", 1);
  cr_assert_eq(kn__trace_structured("e", NULL, NULL, 0, &o), KN_OK);
  path = kn_trace_file_path();
  cr_assert_not_null(path);
  regex_t re;
  cr_assert_eq(regcomp(&re, "/dedicated_log_kiln_trace_[a-z0-9_]{8}\\.log$",
                       REG_EXTENDED), 0);
  cr_assert_eq(regexec(&re, path, 0, NULL, 0), 0, "%s", path);
  cr_assert_eq(strncmp(path, dir, strlen(dir)), 0);
  regfree(&re);
  free(path);
  text_is(HDR("src/x.c:1") "{\"e\": {}}\n");
}

Test(writer, rank_in_name_and_records_and_nested_dir) {
  kn_trace_disable();
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  cr_assert_eq(kn_trace_enable(sub), KN_OK);
  kn_trace_set_rank(3);
  kn__trace_opts o = at("src/x.c", 2);
  kn__trace_structured("e", json_pack("{si}", "k", 1), NULL, 0, &o);
  char *path = kn_trace_file_path();
  cr_assert(strstr(path, "/a/b/dedicated_log_kiln_trace_rank_3_"), "%s", path);
  free(path);
  text_is(HDR("src/x.c:2") "{\"e\": {\"k\": 1}, \"rank\": 3}\n");
  kn_trace_set_rank(-1);
  kn_trace_disable();
  snprintf(sub, sizeof sub, "%s/a", dir);
  kn_test_rmdir(strdup(sub));
}

Test(writer, disabled_writes_nothing) {
  kn_trace_disable();
  cr_assert(!kn_trace_is_enabled());
  int evaluated = 0;
  KN_TRACE("e", (evaluated++, json_object()), NULL);
  cr_assert_eq(evaluated, 0, "metadata built while tracing is off");
  cr_assert_eq(kn__trace_structured("e", json_object(), "x", 1, NULL), KN_OK);
  cr_assert_eq(kn__trace_intern("a.c"), -1);
  cr_assert_null(kn_trace_file_path());
  DIR *d = opendir(dir);
  int entries = 0;
  while (readdir(d)) entries++;
  closedir(d);
  cr_assert_eq(entries, 2); /* . and .. */
}

Test(writer, env_var_enables) {
  kn_trace_disable();
  setenv("KILN_TRACE", dir, 1);
  cr_assert_eq(kn__trace_init_from_env(), KN_OK);
  cr_assert(kn_trace_is_enabled());
  unsetenv("KILN_TRACE");
}

Test(writer, header_path_is_shortened_and_has_no_colon) {
  kn__trace_opts a = at("/home/u/kiln/src/dynamo/capture.c", 10);
  kn__trace_opts b = at("C:\\weird:path.c", 11);
  kn__trace_structured("e", NULL, NULL, 0, &a);
  kn__trace_structured("e", NULL, NULL, 0, &b);
  kn__trace_structured("e", NULL, NULL, 0, NULL); /* the call site */
  char want[512];
  snprintf(want, sizeof want, HDR("src/dynamo/capture.c:10") "{\"e\": {}}\n"
           HDR("C_\\weird_path.c:11") "{\"e\": {}}\n"
           HDR("tests/test_trace_writer.c:%d") "{\"e\": {}}\n", __LINE__ - 4);
  text_is(want);
}

Test(writer, context_key_order) {
  kn__compile_ctx saved, saved2;
  kn__compile_ctx_enter((kn_compile_id){-1, 0, 1}, &saved);
  kn__compile_ctx_get()->attempt = 2;
  kn_trace_set_rank(0);
  kn__trace_opts o = at("src/x.c", 3);
  kn__trace_structured("a", NULL, NULL, 0, &o);
  kn__compile_ctx_enter((kn_compile_id){1, 2, 3}, &saved2);
  kn__trace_structured("b", NULL, NULL, 0, &o);
  kn__compile_ctx_leave(&saved2);
  kn_compile_id explicit_id = {-1, 4, 0};
  o.compile_id = &explicit_id;
  kn__trace_structured("c", NULL, NULL, 0, &o); /* explicit id: no attempt */
  o.compile_id = NULL;
  o.suppress_context = true;
  kn__trace_structured("d", NULL, NULL, 0, &o);
  kn__compile_ctx_leave(&saved);
  kn_trace_set_rank(-1);
  text_is(HDR("src/x.c:3") "{\"a\": {}, \"rank\": 0, \"frame_id\": 0, "
          "\"frame_compile_id\": 1, \"attempt\": 2}\n"
          HDR("src/x.c:3") "{\"b\": {}, \"rank\": 0, \"compiled_autograd_id\": 1, "
          "\"frame_id\": 2, \"frame_compile_id\": 3, \"attempt\": 0}\n"
          HDR("src/x.c:3") "{\"c\": {}, \"rank\": 0, \"frame_id\": 4, "
          "\"frame_compile_id\": 0}\n"
          HDR("src/x.c:3") "{\"d\": {}}\n");
}

/* spec §1.4 vector 2: a string payload ending in "\n" ends with a lone tab. */
Test(writer, string_artifact_payload_lines) {
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, 0, 0}, &saved);
  kn__trace_opts o = at("src/dynamo/output_graph.c", 7);
  cr_assert_eq(kn__trace_artifact("dynamo_output_graph_text", "string",
                                  "class GraphModule(torch.nn.Module):\n"
                                  "    def forward(self, L_x_: \"f32[4]\"):\n"
                                  "        return (L_x_,)\n", SIZE_MAX, &o), KN_OK);
  kn__trace_structured("empty", NULL, "", 0, &o);
  kn__compile_ctx_leave(&saved);
  text_is(HDR("src/dynamo/output_graph.c:7")
          "{\"artifact\": {\"name\": \"dynamo_output_graph_text\", \"encoding\": "
          "\"string\"}, \"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0, "
          "\"has_payload\": \"7aec2af84bb2867e38eca1a3f5dc8387\"}\n"
          "\tclass GraphModule(torch.nn.Module):\n"
          "\t    def forward(self, L_x_: \"f32[4]\"):\n"
          "\t        return (L_x_,)\n\t\n"
          HDR("src/dynamo/output_graph.c:7") "{\"empty\": {}, \"frame_id\": 0, "
          "\"frame_compile_id\": 0, \"attempt\": 0, \"has_payload\": "
          "\"d41d8cd98f00b204e9800998ecf8427e\"}\n\t\n");
}

/* spec §1.4 vector 3 and §3.5 recompile_reasons. */
Test(writer, json_artifact_list) {
  json_t *v = json_pack("[s]", "0/0: ___check_obj_id(fn, 1)");
  kn__trace_opts o = at("src/dynamo/guards.c", 5);
  cr_assert_eq(kn__trace_artifact_json("recompile_reasons", v, &o), KN_OK);
  json_decref(v);
  cr_assert_eq(kn__trace_artifact("x", "yaml", "", 0, &o), KN_EINVAL);
  text_is(HDR("src/dynamo/guards.c:5")
          "{\"artifact\": {\"name\": \"recompile_reasons\", \"encoding\": \"json\"}, "
          "\"has_payload\": \"c02d3b5fce45ab6059d2cd5157f27e82\"}\n"
          "\t[\n\t\"0/0: ___check_obj_id(fn, 1)\"\n\t]\n");
}

Test(writer, dynamo_start_with_stack_interns_files_once) {
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, 0, 0}, &saved);
  kn__trace_opts o = at("src/dynamo/convert_frame.c", 247);
  cr_assert_eq(kn__trace_intern("/k/src/dynamo/convert_frame.c"), 0);
  const kn__trace_frame frames[] = {
      {"/home/u/test2.c", 177, "main", "main();"},
      {"/home/u/lib.c", 66, "inner", NULL},
  };
  cr_assert_eq(kn__trace_dynamo_start(frames, 2, &o), KN_OK);
  const kn__trace_frame again[] = {{"/home/u/lib.c", 70, "inner2", "x \"y\""}};
  cr_assert_eq(kn__trace_dynamo_start(again, 1, &o), KN_OK);
  cr_assert_eq(kn__trace_intern("/home/u/test2.c"), 1);
  cr_assert_eq(kn__trace_intern(NULL), -1);
  kn__compile_ctx_leave(&saved);
  char *got = kn_test_trace_text();
  cr_assert(strstr(got, "src/dynamo/convert_frame.c:247] {\"dynamo_start\""));
  /* The str records' header names the writer's own file; compare the rest. */
  const char *want[] = {
      "{\"str\": [\"/k/src/dynamo/convert_frame.c\", 0]}",
      "{\"str\": [\"/home/u/test2.c\", 1]}",
      "{\"str\": [\"/home/u/lib.c\", 2]}",
      "{\"dynamo_start\": {\"stack\": [{\"line\": 177, \"name\": \"main\", "
      "\"filename\": 1, \"loc\": \"main();\"}, {\"line\": 66, \"name\": \"inner\", "
      "\"filename\": 2}]}, \"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0}",
      "{\"dynamo_start\": {\"stack\": [{\"line\": 70, \"name\": \"inner2\", "
      "\"filename\": 2, \"loc\": \"x \\\"y\\\"\"}]}, \"frame_id\": 0, "
      "\"frame_compile_id\": 0, \"attempt\": 0}",
  };
  char *save = NULL, *line = strtok_r(got, "\n", &save);
  for (size_t i = 0; i < 5; i++, line = strtok_r(NULL, "\n", &save)) {
    cr_assert_not_null(line, "line %zu missing", i);
    cr_assert_eq(strncmp(line, "V1206 15:20:13.926000 1543231 src/", 34), 0, "%s", line);
    const char *meta = strstr(line, "] ") + 2;
    cr_assert_str_eq(meta, want[i]);
  }
  cr_assert_null(line);
  free(got);
}

/* The first record of the rank-1 fixture, rebuilt. */
Test(writer, chromium_event_matches_pytorch) {
  kn__trace_fake_header("0822 14:00:48.899000", 2354972);
  kn_trace_set_rank(1);
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, 0, 0}, &saved);
  kn__trace_opts o = at("torch/_dynamo/utils.py", 1946);
  cr_assert_eq(kn__trace_chromium_event("dynamo", 'B', 1755896448899586.8, NULL, &o),
               KN_OK);
  kn__compile_ctx_leave(&saved);
  kn_trace_set_rank(-1);
  text_is("V0822 14:00:48.899000 2354972 torch/_dynamo/utils.py:1946] "
          "{\"chromium_event\": {}, \"rank\": 1, \"frame_id\": 0, \"frame_compile_id\": 0, "
          "\"attempt\": 0, \"has_payload\": \"bf343eb353aa3cee680d6447e7bc54dc\"}\n"
          "\t{\n\t\"name\": \"dynamo\",\n\t\"ts\": 1755896448899586.8,\n\t\"args\": {\n"
          "\t\"compile_id\": \"0/0\"\n\t},\n\t\"ph\": \"B\",\n\t\"cat\": \"dynamo_timed\",\n"
          "\t\"tid\": 0,\n\t\"pid\": 0\n\t}\n");
}

Test(writer, chromium_event_outside_compile_and_instant) {
  kn__trace_opts o = at("src/x.c", 9);
  json_t *args = json_pack("{ss}", "fn_name", "f");
  cr_assert_eq(kn__trace_chromium_event("fx_graph_cache_miss", 'i', 2.5, args, &o), KN_OK);
  cr_assert_eq(kn__trace_chromium_event("x", 'X', 1.0, NULL, &o), KN_EINVAL);
  text_is(HDR("src/x.c:9") "{\"chromium_event\": {}, \"has_payload\": "
          "\"d173585a6770c910fb282e8247cf1749\"}\n"
          "\t{\n\t\"name\": \"fx_graph_cache_miss\",\n\t\"ts\": 2.5,\n\t\"args\": {\n"
          "\t\"fn_name\": \"f\",\n\t\"compile_id\": \"None\"\n\t},\n\t\"ph\": \"i\",\n"
          "\t\"cat\": \"dynamo_timed\",\n\t\"tid\": 0,\n\t\"pid\": 0,\n\t\"s\": \"p\"\n\t}\n");
}

Test(writer, rejects_reserved_event_and_bad_values) {
  kn__trace_opts o = at("src/x.c", 1);
  cr_assert_eq(kn__trace_structured("rank", NULL, NULL, 0, &o), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "\"rank\""));
  cr_assert_eq(kn__trace_structured("", NULL, NULL, 0, &o), KN_EINVAL);
  json_t *bad = json_object();
  json_object_set_new_nocheck(bad, "k", json_stringn_nocheck("\xff", 1));
  cr_assert_eq(kn__trace_structured("e", bad, NULL, 0, &o), KN_EINVAL);
  text_is("");
}

static kn_status build_record(void *ud, json_t **meta, kn__sb *payload, bool *has) {
  int *calls = ud;
  (*calls)++;
  *meta = json_pack("{ss}", "name", "lazy");
  kn__sb_puts(payload, "a\nb");
  *has = true;
  return KN_OK;
}

Test(writer, lazy_builder_runs_only_when_enabled) {
  int calls = 0;
  kn__trace_opts o = at("src/x.c", 4);
  cr_assert_eq(kn__trace_structured_lazy("e", build_record, &calls, &o), KN_OK);
  cr_assert_eq(calls, 1);
  kn_trace_disable();
  cr_assert_eq(kn__trace_structured_lazy("e", build_record, &calls, &o), KN_OK);
  cr_assert_eq(calls, 1);
}

Test(writer, lazy_builder_output) {
  int calls = 0;
  kn__trace_opts o = at("src/x.c", 4);
  kn__trace_structured_lazy("e", build_record, &calls, &o);
  /* md5("a\nb") */
  text_is(HDR("src/x.c:4") "{\"e\": {\"name\": \"lazy\"}, \"has_payload\": "
          "\"8cdeb44417f3c26826595d5820cf5700\"}\n\ta\n\tb\n");
}

Test(writer, enable_errors) {
  cr_assert_eq(kn_trace_enable(""), KN_EINVAL);
  cr_assert_eq(kn_trace_enable(NULL), KN_EINVAL);
  char file[4200], sub[4300];
  snprintf(file, sizeof file, "%s/plain", dir);
  FILE *f = fopen(file, "w");
  fclose(f);
  snprintf(sub, sizeof sub, "%s/deeper", file);
  /* an unusable directory is an error at once (tests/test_dynamo_errors.c) */
  cr_assert_eq(kn_trace_enable(sub), KN_EIO);
  cr_assert(strstr(kn_last_error(), "cannot create the trace directory"), "%s", kn_last_error());
  cr_assert(strstr(kn_last_error(), file), "%s", kn_last_error());
  cr_assert_null(kn_trace_file_path());
}
