/*
** test_trace_reader.c: the strict trace reader on the four real PyTorch
** logs (record counts from the trace spec §5.2) and on hand-made corrupted
** inputs (each defect with its line number, never a crash).
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <md5.h>

#include "core/error.h"
#include "trace/reader.h"

#define FIX KN_FIXTURE_DIR "/pytorch_traces/"

typedef struct counts {
  uint64_t records, str, payloads, defects;
  uint64_t defect_lines[16];
  char first_msg[512];
} counts;

static void on_defect(void *ud, const kn__trace_defect *d) {
  counts *c = ud;
  if (c->defects == 0) snprintf(c->first_msg, sizeof c->first_msg, "%s", d->message);
  if (c->defects < 16) c->defect_lines[c->defects] = d->line;
  c->defects++;
}

static void check_fixture(const char *file, uint64_t records, uint64_t str,
                          uint64_t payloads) {
  counts c;
  memset(&c, 0, sizeof c);
  kn__trace_reader_opts o = {.strict = true, .on_defect = on_defect, .ud = &c};
  kn__trace_reader *r = kn__trace_reader_open(file, &o);
  cr_assert_not_null(r, "%s", kn_last_error());
  const kn__trace_record *rec;
  kn_status st;
  while ((st = kn__trace_reader_next(r, &rec)) == KN_OK && rec) {
    c.records++;
    if (strcmp(rec->event, "str") == 0) c.str++;
    if (rec->has_payload) {
      c.payloads++;
      cr_assert(rec->payload_md5_ok);
    }
  }
  cr_assert_eq(st, KN_OK, "%s: %s", file, kn_last_error());
  cr_assert_eq(c.defects, 0, "%s: %s", file, c.first_msg);
  cr_assert_eq(kn__trace_reader_defects(r), 0);
  cr_assert_eq(c.records, records, "%s: %llu records", file,
               (unsigned long long)c.records);
  cr_assert_eq(kn__trace_reader_records(r), records);
  cr_assert_eq(c.str, str);
  cr_assert_eq(c.records - c.str, records - str); /* tlparse's "ok" count */
  cr_assert_eq(c.payloads, payloads);
  kn__trace_reader_close(r);
}

/* ok = records - str: simple 64, comp_metrics 12, chromium_events 13,
** rank_1 245 (spec §5.2); all 212 payloads of rank_1 verify. */
Test(reader_fixtures, simple) { check_fixture(FIX "simple.log", 76, 12, 59); }
Test(reader_fixtures, comp_metrics) { check_fixture(FIX "comp_metrics.log", 26, 14, 6); }
Test(reader_fixtures, chromium_events) {
  check_fixture(FIX "chromium_events.log", 21, 8, 8);
}
Test(reader_fixtures, rank_1) {
  check_fixture(FIX "dedicated_log_torch_trace_rank_1_fglwclht.log", 250, 5, 212);
}

Test(reader_fixtures, rank_1_first_records_fields) {
  kn__trace_reader *r =
      kn__trace_reader_open(FIX "dedicated_log_torch_trace_rank_1_fglwclht.log", NULL);
  cr_assert_not_null(r);
  const kn__trace_record *rec;
  cr_assert_eq(kn__trace_reader_next(r, &rec), KN_OK);
  cr_assert_eq(rec->line, 1);
  cr_assert_eq(rec->level, 'V');
  cr_assert_str_eq(rec->timestamp, "0822 14:00:48.899000");
  cr_assert_eq(rec->thread, 2354972);
  cr_assert_str_eq(rec->src_file, "torch/_dynamo/utils.py");
  cr_assert_eq(rec->src_line, 1946);
  cr_assert_str_eq(rec->event, "chromium_event");
  cr_assert_eq(rec->rank, 1);
  cr_assert(rec->has_compile_id);
  cr_assert_eq(rec->compile_id.frame_id, 0);
  cr_assert_eq(rec->compile_id.frame_compile_id, 0);
  cr_assert_eq(rec->compile_id.compiled_autograd_id, -1);
  cr_assert_eq(rec->attempt, 0);
  cr_assert_eq(rec->payload_lines, 11);
  cr_assert_str_eq(rec->payload,
                   "{\n\"name\": \"dynamo\",\n\"ts\": 1755896448899586.8,\n\"args\": {\n"
                   "\"compile_id\": \"0/0\"\n},\n\"ph\": \"B\",\n\"cat\": \"dynamo_timed\",\n"
                   "\"tid\": 0,\n\"pid\": 0\n}");
  cr_assert_eq(rec->payload_len, strlen(rec->payload));
  for (int i = 0; i < 2; i++) cr_assert_eq(kn__trace_reader_next(r, &rec), KN_OK);
  cr_assert_str_eq(rec->event, "str");
  cr_assert_eq(rec->line, 26);
  cr_assert_str_eq(kn__trace_reader_string(r, 0),
                   "/home/skarjala/pytorch/torch/_dynamo/convert_frame.py");
  cr_assert_null(kn__trace_reader_string(r, 1));
  cr_assert_eq(kn__trace_reader_max_string_id(r), 0);
  while (kn__trace_reader_next(r, &rec) == KN_OK && rec) {
  }
  cr_assert_eq(kn__trace_reader_max_string_id(r), 4); /* 5 str records */
  cr_assert_not_null(kn__trace_reader_string(r, 4));
  kn__trace_reader_close(r);
}

Test(reader_fixtures, comp_metrics_thread_id_and_null_free_ids) {
  kn__trace_reader *r = kn__trace_reader_open(FIX "comp_metrics.log", NULL);
  const kn__trace_record *rec;
  cr_assert_eq(kn__trace_reader_next(r, &rec), KN_OK);
  cr_assert_eq(rec->thread, 139877824898048LL);
  cr_assert_str_eq(rec->src_file, "torch/_logging/structured.py");
  cr_assert_eq(rec->rank, -1);
  cr_assert(!rec->has_compile_id);
  cr_assert_str_eq(json_string_value(json_array_get(rec->value, 0)),
                   "/data/users/jjwu/a/pytorch/test/dynamo/test_misc.py");
  kn__trace_reader_close(r);
}

/* ---- corrupted inputs -------------------------------------------------- */

#define H(path) "V1206 15:20:13.926000 1543231 " path "] "
#define CTX "\"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0"
#define L1 H("torch/_logging/structured.py:28") "{\"str\": [\"/tmp/a.py\", 0]}\n"
#define L2 H("torch/_dynamo/convert_frame.py:1") "{\"dynamo_start\": {\"stack\": " \
  "[{\"line\": 3, \"name\": \"f\", \"filename\": 0}]}, " CTX "}\n"
#define L3 H("torch/_dynamo/guards.py:9") "{\"artifact\": {\"name\": " \
  "\"recompile_reasons\", \"encoding\": \"json\"}, " CTX ", \"has_payload\": " \
  "\"c02d3b5fce45ab6059d2cd5157f27e82\"}\n"
#define L456 "\t[\n\t\"0/0: ___check_obj_id(fn, 1)\"\n\t]\n"
#define L7 H("torch/_dynamo/guards.py:20") "{\"dynamo_cpp_guards_str\": {}, " CTX \
  ", \"has_payload\": \"d41d8cd98f00b204e9800998ecf8427e\"}\n\t\n"
#define GOOD L1 L2 L3 L456 L7

static counts read_text(const char *text, bool strict, kn_status *last) {
  counts c;
  memset(&c, 0, sizeof c);
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  cr_assert_not_null(f);
  kn__trace_reader_opts o = {.strict = strict, .on_defect = on_defect, .ud = &c};
  kn__trace_reader *r = kn__trace_reader_open_stream(f, "mem", &o);
  const kn__trace_record *rec;
  kn_status st;
  while ((st = kn__trace_reader_next(r, &rec)) == KN_OK && rec) c.records++;
  if (last) *last = st;
  cr_assert_eq(kn__trace_reader_defects(r), c.defects);
  kn__trace_reader_close(r);
  fclose(f);
  return c;
}

static char *replace(const char *s, const char *from, const char *to) {
  const char *at = strstr(s, from);
  cr_assert_not_null(at, "'%s' not in text", from);
  size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
  return out;
}

Test(reader_corrupt, good_input_is_clean) {
  counts c = read_text(GOOD, true, NULL);
  cr_assert_eq(c.records, 4);
  cr_assert_eq(c.defects, 0, "%s", c.first_msg);
}

Test(reader_corrupt, crlf_no_final_newline_and_blank_lines_are_legal) {
  const char *t = "\n" H("a.py:1") "{\"x\": {}}\r\n\r\n"
                  H("a.py:2") "{\"y\": {}, \"has_payload\": "
                  "\"c02d3b5fce45ab6059d2cd5157f27e82\"}\r\n\t[\r\n\n"
                  "\t\"0/0: ___check_obj_id(fn, 1)\"\r\n\t]";
  counts c = read_text(t, true, NULL);
  cr_assert_eq(c.defects, 0, "%s", c.first_msg);
  cr_assert_eq(c.records, 2);
}

Test(reader_corrupt, rank_prefix_is_accepted) {
  const char *t = "[rank0]:" H("a.py:1") "{\"x\": {}, \"rank\": 0}\n";
  FILE *f = fmemopen((void *)t, strlen(t), "r");
  kn__trace_reader_opts o = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open_stream(f, "mem", &o);
  const kn__trace_record *rec;
  cr_assert_eq(kn__trace_reader_next(r, &rec), KN_OK, "%s", kn_last_error());
  cr_assert_str_eq(rec->event, "x");
  cr_assert_eq(rec->rank, 0);
  cr_assert_str_eq(rec->src_file, "a.py");
  cr_assert_eq(rec->src_line, 1);
  kn__trace_reader_close(r);
  fclose(f);
}

Test(reader_corrupt, flipped_payload_byte) {
  char *t = replace(GOOD, "obj_id(fn", "obj_id(fm");
  counts c = read_text(t, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 3);
  cr_assert(strstr(c.first_msg, "MD5 mismatch"), "%s", c.first_msg);
  cr_assert(strstr(c.first_msg, "c02d3b5fce45ab6059d2cd5157f27e82"));
  cr_assert_eq(c.records, 4); /* still returned, flagged */
  free(t);
}

Test(reader_corrupt, md5_flag_on_returned_record) {
  char *t = replace(GOOD, "obj_id(fn", "obj_id(fm");
  FILE *f = fmemopen(t, strlen(t), "r");
  kn__trace_reader *r = kn__trace_reader_open_stream(f, "mem", NULL);
  const kn__trace_record *rec;
  for (int i = 0; i < 3; i++) kn__trace_reader_next(r, &rec);
  cr_assert_str_eq(rec->event, "artifact");
  cr_assert(!rec->payload_md5_ok);
  cr_assert_str_eq(rec->payload, "[\n\"0/0: ___check_obj_id(fm, 1)\"\n]");
  kn__trace_reader_next(r, &rec);
  cr_assert(rec->payload_md5_ok);
  cr_assert_str_eq(rec->payload, "");
  cr_assert_eq(rec->payload_lines, 1);
  kn__trace_reader_close(r);
  fclose(f);
  free(t);
}

Test(reader_corrupt, broken_json) {
  char *t = replace(GOOD, "\"attempt\": 0}\n", "\"attempt\": 0\n");
  counts c = read_text(t, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 2);
  cr_assert(strstr(c.first_msg, "not valid JSON"), "%s", c.first_msg);
  cr_assert_eq(c.records, 3);
  free(t);
}

Test(reader_corrupt, stray_line) {
  char *t = replace(GOOD, L3, "hello world\n" L3);
  counts c = read_text(t, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 3);
  cr_assert(strstr(c.first_msg, "level letter"), "%s", c.first_msg);
  cr_assert(strstr(c.first_msg, "hello world"), "%s", c.first_msg);
  cr_assert_eq(c.records, 4);
  free(t);
}

Test(reader_corrupt, stray_payload_line_at_start) {
  counts c = read_text("\tdangling\n" GOOD, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 1);
  cr_assert(strstr(c.first_msg, "payload line"), "%s", c.first_msg);
  cr_assert_eq(c.records, 4);
}

Test(reader_corrupt, truncated_in_payload) {
  char text[] = GOOD;
  char *cut = strstr(text, "check_obj");
  *cut = '\0';
  counts c = read_text(text, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 3);
  cr_assert_eq(c.records, 3);
}

Test(reader_corrupt, truncated_in_header) {
  char text[] = GOOD;
  char *cut = strstr(text, "{\"dynamo_cpp");
  cut[10] = '\0';
  counts c = read_text(text, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 7);
  cr_assert_eq(c.records, 3);
}

Test(reader_corrupt, missing_has_payload) {
  char *t = replace(GOOD, ", \"has_payload\": \"c02d3b5fce45ab6059d2cd5157f27e82\"", "");
  counts c = read_text(t, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 4);
  cr_assert(strstr(c.first_msg, "without has_payload (record at line 3)"), "%s",
            c.first_msg);
  cr_assert_eq(c.records, 4);
  free(t);
}

Test(reader_corrupt, bad_header_grammar) {
  static const struct { const char *from, *to, *what; } cases[] = {
      {"V1206 15:20:13.926000 1543231 torch/_dynamo/guards.py:20",
       "V1206 15:20:13.926 1543231 torch/_dynamo/guards.py:20", "timestamp"},
      {"V1206 15:20:13.926000 1543231 torch/_dynamo/guards.py:20",
       "X1206 15:20:13.926000 1543231 torch/_dynamo/guards.py:20", "level letter"},
      {"1543231 torch/_dynamo/guards.py:20", "1543231 C:/guards.py:20",
       "line number"},
      {"1543231 torch/_dynamo/guards.py:20", "abc torch/_dynamo/guards.py:20",
       "thread id"},
      {"guards.py:20] ", "guards.py:20 ", "\"] \""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *t = replace(GOOD, cases[i].from, cases[i].to);
    counts c = read_text(t, false, NULL);
    cr_assert_eq(c.defects, 1, "case %zu", i);
    cr_assert_eq(c.defect_lines[0], 7, "case %zu", i);
    cr_assert(strstr(c.first_msg, cases[i].what), "case %zu: %s", i, c.first_msg);
    cr_assert_eq(c.records, 3);
    free(t);
  }
}

Test(reader_corrupt, bad_metadata_values) {
  static const struct { const char *from, *to, *what; } cases[] = {
      {"\"filename\": 0", "\"filename\": 7", "filename id 7"},
      {"\"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0}\n",
       "\"frame_id\": -1, \"frame_compile_id\": 0, \"attempt\": 0}\n", "frame_id"},
      {"{\"dynamo_start\"", "{\"rank\": 0, \"dynamo_start\"", "reserved key"},
      {"{\"dynamo_start\": {\"stack\"", "{\"dynamo_start\": {\"stack\": 1, \"stack\"",
       "duplicate"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *t = replace(GOOD, cases[i].from, cases[i].to);
    counts c = read_text(t, false, NULL);
    cr_assert_eq(c.defects, 1, "case %zu: %s", i, c.first_msg);
    cr_assert_eq(c.defect_lines[0], 2, "case %zu", i);
    cr_assert(strstr(c.first_msg, cases[i].what), "case %zu: %s", i, c.first_msg);
    cr_assert_eq(c.records, 3);
    free(t);
  }
}

Test(reader_corrupt, bad_has_payload_and_str) {
  char *t = replace(GOOD, "c02d3b5fce45ab6059d2cd5157f27e82", "C02D3B5FCE45AB6059D2CD5157F27E82");
  counts c = read_text(t, false, NULL);
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 3);
  cr_assert(strstr(c.first_msg, "lowercase hex"), "%s", c.first_msg);
  cr_assert_eq(c.records, 3); /* the artifact and its payload lines are dropped */
  free(t);
  t = replace(GOOD, "[\"/tmp/a.py\", 0]", "[\"/tmp/a.py\"]");
  c = read_text(t, false, NULL);
  cr_assert_eq(c.defects, 2); /* the str record, then the frame naming id 0 */
  cr_assert_eq(c.defect_lines[0], 1);
  cr_assert_eq(c.defect_lines[1], 2);
  free(t);
}

Test(reader_corrupt, strict_stops_with_line_number) {
  char *t = replace(GOOD, "obj_id(fn", "obj_id(fm");
  kn_status st;
  counts c = read_text(t, true, &st);
  cr_assert_eq(st, KN_EPARSE);
  cr_assert_eq(c.records, 2);
  cr_assert_eq(c.defects, 1);
  cr_assert(strstr(kn_last_error(), "mem:3: payload MD5 mismatch"), "%s",
            kn_last_error());
  free(t);
}

static counts read_limited(size_t max) {
  counts c;
  memset(&c, 0, sizeof c);
  FILE *f = fmemopen((void *)GOOD, strlen(GOOD), "r");
  kn__trace_reader_opts o = {.max_record_bytes = max, .on_defect = on_defect, .ud = &c};
  kn__trace_reader *r = kn__trace_reader_open_stream(f, "mem", &o);
  const kn__trace_record *rec;
  while (kn__trace_reader_next(r, &rec) == KN_OK && rec) c.records++;
  kn__trace_reader_close(r);
  fclose(f);
  return c;
}

Test(reader_corrupt, oversized_line_and_record) {
  /* L3's header line is 223 bytes; with its payload lines the record is 258. */
  cr_assert_eq(strlen(L3), 224);
  counts c = read_limited(200);
  cr_assert_eq(c.defects, 1, "%s", c.first_msg);
  cr_assert_eq(c.defect_lines[0], 3);
  cr_assert(strstr(c.first_msg, "line longer than max_record_bytes (200)"), "%s", c.first_msg);
  cr_assert_eq(c.records, 3);
  c = read_limited(240);
  cr_assert_eq(c.defects, 1, "%s", c.first_msg);
  cr_assert_eq(c.defect_lines[0], 3);
  cr_assert(strstr(c.first_msg, "record larger than max_record_bytes (240)"));
  cr_assert_eq(c.records, 3);
  c = read_limited(300);
  cr_assert_eq(c.defects, 0);
  cr_assert_eq(c.records, 4);
}

Test(reader_corrupt, empty_input_and_missing_file) {
  counts c = read_text("", true, NULL);
  cr_assert_eq(c.records, 0);
  cr_assert_eq(c.defects, 0);
  cr_assert_null(kn__trace_reader_open("/nonexistent/dir/x.log", NULL));
  cr_assert_eq(kn_last_status(), KN_EIO);
  cr_assert(strstr(kn_last_error(), "/nonexistent/dir/x.log"));
}

/* Lines far longer than the 1 MiB read chunk: kept whole when allowed,
** skipped (with the reading position kept right) when over the limit. */
static char *big_record_text(size_t n) {
  char *pay = malloc(n + 1);
  memset(pay, 'a', n);
  pay[n] = '\0';
  char md5[MD5_DIGEST_STRING_LENGTH];
  MD5Data((const uint8_t *)pay, n, md5);
  size_t cap = n + 1024;
  char *t = malloc(cap);
  snprintf(t, cap, H("a.py:1") "{\"big\": {}, \"has_payload\": \"%s\"}\n\t%s\n"
           H("a.py:2") "{\"after\": {}}", md5, pay);
  free(pay);
  return t;
}

Test(reader_corrupt, payload_line_longer_than_read_chunk) {
  size_t n = (size_t)5 << 19; /* 2.5 MiB */
  char *t = big_record_text(n);
  FILE *f = fmemopen(t, strlen(t), "r");
  kn__trace_reader_opts o = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open_stream(f, "mem", &o);
  const kn__trace_record *rec;
  cr_assert_eq(kn__trace_reader_next(r, &rec), KN_OK, "%s", kn_last_error());
  cr_assert_eq(rec->payload_len, n);
  cr_assert_eq(rec->payload[n - 1], 'a');
  cr_assert_eq(kn__trace_reader_next(r, &rec), KN_OK);
  cr_assert_str_eq(rec->event, "after");
  cr_assert_eq(rec->line, 3);
  kn__trace_reader_close(r);
  fclose(f);
  counts c;
  memset(&c, 0, sizeof c);
  f = fmemopen(t, strlen(t), "r");
  kn__trace_reader_opts o2 = {.max_record_bytes = 1000, .on_defect = on_defect, .ud = &c};
  r = kn__trace_reader_open_stream(f, "mem", &o2);
  cr_assert_eq(kn__trace_reader_next(r, &rec), KN_OK);
  cr_assert_str_eq(rec->event, "after");
  cr_assert_eq(c.defects, 1);
  cr_assert_eq(c.defect_lines[0], 2);
  kn__trace_reader_close(r);
  fclose(f);
  free(t);
}

/* Deterministic mutations of a real log (bytes flipped, deleted, lines
** duplicated, cut short): the reader must account for every line as part
** of a record or a defect and never crash (run under ASan too). */
static uint64_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return *s >> 33;
}

Test(reader_corrupt, mutated_fixture_never_crashes) {
  FILE *src = fopen(FIX "chromium_events.log", "rb");
  cr_assert_not_null(src);
  static char orig[32768], buf[40000];
  size_t n = fread(orig, 1, sizeof orig, src);
  fclose(src);
  static const char junk[] = "\t\n\r{}\":[]V0 x\xff";
  uint64_t seed = 42;
  for (int round = 0; round < 300; round++) {
    memcpy(buf, orig, n);
    size_t len = n;
    int edits = 1 + (int)(lcg(&seed) % 8);
    for (int e = 0; e < edits; e++) {
      size_t at = lcg(&seed) % len;
      switch (lcg(&seed) % 3) {
      case 0: buf[at] = junk[lcg(&seed) % (sizeof junk - 1)]; break;
      case 1: memmove(buf + at, buf + at + 1, len - at - 1); len--; break;
      default: len = at + 1; break;
      }
    }
    buf[len] = '\0';
    counts c;
    memset(&c, 0, sizeof c);
    FILE *f = fmemopen(buf, len, "r");
    kn__trace_reader_opts o = {.on_defect = on_defect, .ud = &c};
    kn__trace_reader *r = kn__trace_reader_open_stream(f, "mut", &o);
    const kn__trace_record *rec;
    kn_status st;
    uint64_t last_line = 0;
    while ((st = kn__trace_reader_next(r, &rec)) == KN_OK && rec) {
      cr_assert_gt(rec->line, last_line, "round %d", round);
      last_line = rec->line;
      c.records++;
    }
    cr_assert_eq(st, KN_OK, "round %d: %s", round, kn_last_error());
    cr_assert_gt(c.records + c.defects, 0, "round %d", round);
    for (uint64_t i = 0; i < c.defects && i < 16; i++)
      cr_assert_gt(c.defect_lines[i], 0);
    kn__trace_reader_close(r);
    fclose(f);
  }
}
