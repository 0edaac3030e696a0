/*
** test_report_streams.c: raw.jsonl and chromium_events.json are written from
** the bytes read (no parse-and-dump). On the four PyTorch traces, each line
** must still equal, as JSON, what a second implementation builds from the
** trace with the reader and jansson: the metadata plus timestamp, thread,
** pathname, lineno and payload_filename, and each chromium payload. The
** minifier behind it is checked on its own against RFC 8259 cases.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/strbuf.h"
#include "report/jsonout.h"
#include "support/report_util.h"
#include "trace/reader.h"

#define FIX KN_FIXTURE_DIR "/pytorch_traces/"

/* Expected raw.jsonl lines (without the string table) and chromium events. */
static void expected(const char *trace, json_t *raw, json_t *chromium) {
  kn__trace_reader *rd = kn__trace_reader_open(trace, NULL);
  cr_assert_not_null(rd);
  const kn__trace_record *rec;
  while (kn__trace_reader_next(rd, &rec) == KN_OK && rec) {
    if (!strcmp(rec->event, "str")) continue;
    if (!strcmp(rec->event, "chromium_event")) {
      json_array_append_new(chromium, json_loadb(rec->payload, rec->payload_len,
                                                 0, NULL));
      continue;
    }
    json_t *o = json_deep_copy(rec->metadata);
    const char *path = rec->src_file;
    while (*path == ' ') path++;
    json_object_set_new(o, "timestamp", json_string(rec->timestamp));
    json_object_set_new(o, "thread", json_integer(rec->thread));
    json_object_set_new(o, "pathname", json_string(path));
    json_object_set_new(o, "lineno", json_integer(rec->src_line));
    json_array_append_new(raw, o);
  }
  kn__trace_reader_close(rd);
}

static void check_fixture(const char *name) {
  char *tmp = ru_tmpdir();
  kn__sb args = KN__SB_INIT, trace = KN__SB_INIT, p = KN__SB_INIT;
  kn__sb_printf(&trace, FIX "%s", name);
  kn__sb_printf(&args, "--strict -o '%s/r' '%s'", tmp, kn__sb_cstr(&trace));
  char *err = NULL;
  cr_assert_eq(ru_kiln(kn__sb_cstr(&args), &err), 0, "%s", err);
  free(err);
  json_t *raw = json_array(), *chromium = json_array();
  expected(kn__sb_cstr(&trace), raw, chromium);
  kn__sb_printf(&p, "%s/r/raw.jsonl", tmp);
  char *text = ru_read(kn__sb_cstr(&p), NULL);
  cr_assert_not_null(text);
  size_t i = 0;
  char *line = strchr(text, '\n') + 1; /* after the string table */
  for (char *nl; (nl = strchr(line, '\n')); line = nl + 1, i++) {
    json_t *got = json_loadb(line, (size_t)(nl - line), 0, NULL);
    cr_assert_not_null(got, "%s: raw.jsonl line %zu is not JSON", name, i + 2);
    json_object_del(got, "payload_filename");
    cr_assert(json_equal(got, json_array_get(raw, i)), "%s: line %zu: %.*s",
              name, i + 2, (int)(nl - line), line);
    json_decref(got);
  }
  cr_assert_eq(i, json_array_size(raw), "%s: raw.jsonl lines", name);
  kn__sb_clear(&p);
  kn__sb_printf(&p, "%s/r/chromium_events.json", tmp);
  json_t *ev = json_load_file(kn__sb_cstr(&p), 0, NULL);
  cr_assert(json_equal(ev, chromium), "%s: chromium events differ", name);
  json_decref(ev), json_decref(raw), json_decref(chromium);
  free(text);
  kn__sb_fini(&args), kn__sb_fini(&trace), kn__sb_fini(&p);
  ru_rmtree(tmp);
  free(tmp);
}

Test(report_streams, fixtures_equal_a_jansson_rebuild) {
  const char *names[] = {"simple.log", "comp_metrics.log", "chromium_events.log",
                         "dedicated_log_torch_trace_rank_1_fglwclht.log"};
  for (size_t i = 0; i < 4; i++) check_fixture(names[i]);
}

static char *minify(const char *s) {
  kn__sb b = KN__SB_INIT;
  kn__sb_puts(&b, "x");
  bool ok = rp_json_minify_object(s, strlen(s), &b);
  char *r = ok ? strdup(kn__sb_cstr(&b) + 1) : NULL;
  if (!ok) cr_assert_eq(b.len, 1, "nothing appended on failure: %s", s);
  kn__sb_fini(&b);
  return r;
}

Test(report_streams, minifier_accepts_json_objects_only) {
  const char *ok[][2] = {
      {"{}", "{}"},
      {" {\n\t\"a\" : [ 1 , -2.5e+3 , true , null , \"x y\" ] }\n",
       "{\"a\":[1,-2.5e+3,true,null,\"x y\"]}"},
      {"{\"k\\\"\\u00e9\": {\"n\": {}} , \"e\": []}",
       "{\"k\\\"\\u00e9\":{\"n\":{}},\"e\":[]}"},
      {"{\"\xc3\xa9\": 0}", "{\"\xc3\xa9\":0}"}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char *got = minify(ok[i][0]);
    cr_assert_not_null(got, "refused: %s", ok[i][0]);
    cr_assert_str_eq(got, ok[i][1]);
    json_t *a = json_loads(ok[i][0], 0, NULL), *b = json_loads(got, 0, NULL);
    cr_assert(json_equal(a, b), "same value: %s", ok[i][0]);
    json_decref(a), json_decref(b);
    free(got);
  }
  const char *bad[] = {"", "[]", "1", "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}",
                       "{,}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":-}",
                       "{\"a\":tru}", "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}",
                       "{\"a\":\"\\u12g4\"}", "{\"a\":\"\xc3\"}", "{\"a\":[}",
                       "{\"a\":1} {}", "{\"a\":1]", "{1:2}", "{\"a\" 1}",
                       "{\"a\":\"\xed\xa0\x80\"}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *got = minify(bad[i]);
    cr_assert_null(got, "accepted: %s -> %s", bad[i], got);
  }
  /* Nesting past the limit is refused, at the limit accepted. */
  kn__sb deep = KN__SB_INIT;
  kn__sb_puts(&deep, "{\"a\":");
  for (int i = 0; i < RP_JSON_MAX_DEPTH - 1; i++) kn__sb_putc(&deep, '[');
  for (int i = 0; i < RP_JSON_MAX_DEPTH - 1; i++) kn__sb_putc(&deep, ']');
  kn__sb_putc(&deep, '}');
  char *got = minify(kn__sb_cstr(&deep));
  cr_assert_not_null(got);
  free(got);
  kn__sb_clear(&deep);
  kn__sb_puts(&deep, "{\"a\":");
  for (int i = 0; i < RP_JSON_MAX_DEPTH; i++) kn__sb_putc(&deep, '[');
  for (int i = 0; i < RP_JSON_MAX_DEPTH; i++) kn__sb_putc(&deep, ']');
  kn__sb_putc(&deep, '}');
  cr_assert_null(minify(kn__sb_cstr(&deep)));
  kn__sb_fini(&deep);
}

Test(report_streams, json_string_escapes) {
  kn__sb b = KN__SB_INIT;
  rp_json_string(&b, "a\"b\\c\n\x01\xff\xc3\xa9");
  cr_assert_str_eq(kn__sb_cstr(&b), "\"a\\\"b\\\\c\\u000a\\u0001\\ufffd\xc3\xa9\"");
  kn__sb_fini(&b);
}
