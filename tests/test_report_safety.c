/*
** test_report_safety.c: `kiln report` on hostile and broken traces, and its
** command line: everything from a trace is escaped, names derived from the
** trace stay inside OUT, OUT must be empty unless --overwrite (and symlinks
** in it are not followed), --strict stops with file and line, a directory
** input picks its newest file, --all-ranks-html compares ranks.
*/
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "kiln/kiln.h"
#include "support/report_util.h"

#define FIX KN_FIXTURE_DIR "/pytorch_traces/"


static size_t count(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p++) n++;
  return n;
}

static void hostile_trace(const char *path) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  ru_record(f, 1, "{\"str\": [\"/u/<script>alert(1)</script>.py\", 0]}", NULL);
  ru_record(f, 2, "{\"dynamo_start\": {\"stack\": [{\"line\": 3, \"name\": "
            "\"<img src=x onerror=alert(1)>\", \"filename\": 0, \"loc\": "
            "\"</pre><script>evil()</script>\"}]}, \"frame_id\": 0, "
            "\"frame_compile_id\": 0, \"attempt\": 0}", NULL);
  const char *names[] = {"../../../../tmp/evil", "/etc/passwd", "a\\\\b",
                         ".hidden", "x/../../y"};
  for (int i = 0; i < 5; i++) {
    char meta[300];
    snprintf(meta, sizeof meta, "{\"artifact\": {\"name\": \"%s\", "
             "\"encoding\": \"string\"}, \"frame_id\": 0, \"frame_compile_id\":"
             " 0, \"attempt\": 0}", names[i]);
    ru_record(f, 3 + i, meta, "<script>alert('x')</script>");
  }
  kn__sb big = KN__SB_INIT;
  kn__sb_puts(&big, "{\"artifact\": {\"name\": \"");
  for (int i = 0; i < 5000; i++) kn__sb_putc(&big, 'A');
  kn__sb_puts(&big, "\", \"encoding\": \"json\"}, \"frame_id\": 0, "
                    "\"frame_compile_id\": 0, \"attempt\": 0}");
  ru_record(f, 9, kn__sb_cstr(&big), "{\"k\": \"<b>bold</b>\"}");
  kn__sb_fini(&big);
  ru_record(f, 10, "{\"inductor_output_code\": {\"filename\": "
            "\"/x/../../<evil>.py\"}, \"frame_id\": 0, \"frame_compile_id\": 0,"
            " \"attempt\": 0}", "def f():\n    return '<script>x</script>'");
  ru_record(f, 11, "{\"dump_file\": {\"name\": \"../../etc/x\"}, \"frame_id\": "
            "0, \"frame_compile_id\": 0, \"attempt\": 0}", "</pre><script>s()");
  ru_record(f, 12, "{\"link\": {\"name\": \"<b>click</b>\", \"url\": "
            "\"javascript:alert(1)\"}, \"frame_id\": 0, \"frame_compile_id\": "
            "0, \"attempt\": 0}", NULL);
  ru_record(f, 13, "{\"artifact\": {\"name\": \"dynamo_graph_break_reason\", "
            "\"encoding\": \"string\"}, \"frame_id\": 0, \"frame_compile_id\": "
            "0, \"attempt\": 0}", "Graph break in user code at /u/<script>.py:"
            "3\nGraph Break Reason: <img src=y>");
  ru_record(f, 14, "{\"compilation_metrics\": {\"co_name\": \"<script>\", "
            "\"co_filename\": \"<f>\", \"co_firstlineno\": 1, \"fail_type\": "
            "\"<x>\", \"fail_reason\": \"</td><script>r()</script>\", "
            "\"graph_op_count\": 1, \"restart_reasons\": [\"<r>\"]}, "
            "\"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0}", NULL);
  ru_record(f, 15, "{\"<script>\": {}, \"frame_id\": 0, \"frame_compile_id\": "
            "0, \"attempt\": 0}", NULL);
  fclose(f);
}

static bool safe_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
         c == '/' || c == '\n';
}

Test(report_safety, hostile_trace_is_escaped_and_confined) {
  char *tmp = ru_tmpdir();
  char *trace = ru_path2(tmp, "t.log"), *out = ru_path2(tmp, "r");
  hostile_trace(trace);
  char *err = NULL;
  int rc = ru_kilnf(&err, "--strict -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  /* Nothing was written beside OUT (the trace file and OUT only). */
  char *top = ru_list(tmp);
  for (char *p = top; *p;) {
    cr_assert(!strncmp(p, "r/", 2) || !strncmp(p, "t.log\n", 6), "%s", p);
    p = strchr(p, '\n') + 1;
  }
  /* Every name inside OUT is from the safe alphabet, never hidden or long. */
  char *files = ru_list(out);
  for (char *p = files; *p; p++) cr_assert(safe_char(*p), "name char %c", *p);
  cr_assert_null(strstr(files, "/."));
  cr_assert_neq(files[0], '.');
  for (char *l = files, *nl; *l; l = nl + 1) {
    nl = strchr(l, '\n');
    const char *base = l;
    for (const char *q = l; q < nl; q++) if (*q == '/') base = q + 1;
    cr_assert_leq(nl - base, 140, "long name %.*s", (int)(nl - l), l);
  }
  cr_assert_not_null(strstr(files, "-_0_0_0/_._.._.._.._tmp_evil_0.txt\n"),
                     "%s", files);
  cr_assert_not_null(strstr(files, "-_0_0_0/_etc_passwd_1.txt\n"));
  cr_assert_not_null(strstr(files, "-_0_0_0/a_b_2.txt\n"));
  cr_assert_not_null(strstr(files, "-_0_0_0/_hidden_3.txt\n"));
  cr_assert_not_null(strstr(files, "dump_file/______etc_x.html\n"));
  cr_assert_not_null(strstr(files, "-_0_0_0/inductor_output_code__evil__6.html\n"));
  /* No trace text became markup: the only <script> is the filter script. */
  for (char *l = files, *nl; *l; l = nl + 1) {
    nl = strchr(l, '\n');
    *nl = '\0';
    size_t len = strlen(l);
    if (len < 5 || strcmp(l + len - 5, ".html")) continue;
    char *p = ru_path2(out, l);
    char *html = ru_read(p, NULL);
    cr_assert_eq(count(html, "<script"), !strcmp(l, "index.html"), "%s", l);
    cr_assert_eq(count(html, "<img"), 0, "%s", l);
    cr_assert_eq(count(html, "javascript:"), 0, "%s", l);
    cr_assert_eq(count(html, "</td><script"), 0, "%s", l);
    /* Offline: nothing is loaded from anywhere (no src=, no <link>). */
    cr_assert_eq(count(html, " src=\""), 0, "%s", l);
    cr_assert_eq(count(html, "<link"), 0, "%s", l);
    free(html);
    free(p);
  }
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(strstr(idx, "&lt;img src=x onerror=alert(1)&gt;"));
  cr_assert_not_null(strstr(idx, "&lt;b&gt;click&lt;/b&gt;"));
  cr_assert_not_null(strstr(idx, "&lt;script&gt;"));
  size_t checked;
  cr_assert_eq(ru_check_links(out, &checked), 0);
  free(idx), free(ip), free(files), free(top);
  ru_rmtree(tmp);
  free(trace), free(out), free(tmp);
}

Test(report_safety, out_must_be_empty_and_symlinks_are_not_followed) {
  char *tmp = ru_tmpdir();
  char *out = ru_path2(tmp, "r"), *outside = ru_path2(tmp, "outside");
  mkdir(out, 0755);
  mkdir(outside, 0755);
  char *keep = ru_path2(outside, "keep.txt"), *mine = ru_path2(out, "mine.txt");
  fclose(fopen(keep, "w"));
  fclose(fopen(mine, "w"));
  char *err = NULL;
  int rc = ru_kilnf(&err, "-o '%s' '" FIX "simple.log'", out);
  cr_assert_eq(rc, 1);
  cr_assert_not_null(strstr(err, "already exists"), "%s", err);
  cr_assert_not_null(strstr(err, "--overwrite"), "%s", err);
  free(err);
  cr_assert_eq(access(mine, F_OK), 0, "a refused run must not delete");
  /* A symlink inside OUT to a directory outside: --overwrite removes the
  ** link, not what it points to; the report is written. */
  char *link = ru_path2(out, "-_0_0_0");
  cr_assert_eq(symlink(outside, link), 0);
  rc = ru_kilnf(&err, "--overwrite -o '%s' '" FIX "simple.log'", out);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  cr_assert_eq(access(keep, F_OK), 0, "file outside OUT survived");
  char *listing = ru_list(outside);
  cr_assert_str_eq(listing, "keep.txt\n");
  struct stat st;
  cr_assert_eq(lstat(link, &st), 0);
  cr_assert(S_ISDIR(st.st_mode), "the compile dir is a real directory now");
  /* OUT being a regular file is refused. */
  rc = ru_kilnf(&err, "-o '%s' '" FIX "simple.log'", keep);
  cr_assert_eq(rc, 1);
  cr_assert_not_null(strstr(err, "not a directory"), "%s", err);
  free(err);
  free(listing), free(link), free(keep), free(mine);
  ru_rmtree(tmp);
  free(out), free(outside), free(tmp);
}

static void write_bad_trace(const char *path) {
  FILE *f = fopen(path, "w");
  ru_record(f, 1, "{\"dynamo_start\": {\"stack\": []}, \"frame_id\": 0, "
            "\"frame_compile_id\": 0, \"attempt\": 0}", NULL);
  /* Line 2: a payload whose MD5 does not match. */
  fputs("V1121 10:00:00.000000 1 a.c:1] {\"dynamo_output_graph\": {}, "
        "\"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0, "
        "\"has_payload\": \"00000000000000000000000000000000\"}\n\tgraph\n", f);
  fputs("this is not a header\n", f);
  fclose(f);
}

Test(report_safety, strict_names_file_and_line) {
  char *tmp = ru_tmpdir();
  char *trace = ru_path2(tmp, "bad.log"), *out = ru_path2(tmp, "r");
  write_bad_trace(trace);
  char *err = NULL;
  int rc = ru_kilnf(&err, "--strict -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 1);
  cr_assert_not_null(strstr(err, "bad.log:2:"), "%s", err);
  free(err);
  /* Without --strict: both defects are counted and shown in the report. */
  rc = ru_kilnf(&err, "--overwrite -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(strstr(idx, "<p>2 defect(s) in the trace.</p>"), "%s", idx);
  cr_assert_not_null(strstr(idx, "bad.log:2: "));
  cr_assert_not_null(strstr(idx, "bad.log:4: "));
  free(idx), free(ip);
  ru_rmtree(tmp);
  free(trace), free(out), free(tmp);
}

Test(report_safety, other_rank_and_missing_compile_id_in_strict_mode) {
  char *tmp = ru_tmpdir();
  char *trace = ru_path2(tmp, "ranks.log"), *out = ru_path2(tmp, "r");
  FILE *f = fopen(trace, "w");
  ru_record(f, 1, "{\"dynamo_start\": {\"stack\": []}, \"rank\": 0, "
            "\"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0}", NULL);
  ru_record(f, 2, "{\"describe_storage\": {}, \"rank\": 3}", NULL);
  fclose(f);
  char *err = NULL;
  int rc = ru_kilnf(&err, "--strict -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 1);
  cr_assert_not_null(strstr(err, "ranks.log:2: record of rank 3 in a trace of "
                               "rank 0"), "%s", err);
  free(err);
  f = fopen(trace, "w");
  ru_record(f, 1, "{\"describe_storage\": {}}", NULL);
  fclose(f);
  rc = ru_kilnf(&err, "--overwrite --strict -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 0, "tlparse accepts records without ids: %s", err);
  free(err);
  rc = ru_kilnf(&err, "--overwrite --strict-compile-id --strict -o '%s' '%s'", out,
            trace);
  cr_assert_eq(rc, 1);
  cr_assert_not_null(strstr(err, "ranks.log:1: record 'describe_storage' has "
                               "no compile id"), "%s", err);
  free(err);
  ru_rmtree(tmp);
  free(trace), free(out), free(tmp);
}

static void copy(const char *from, const char *to) {
  size_t n;
  char *s = ru_read(from, &n);
  FILE *f = fopen(to, "wb");
  fwrite(s, 1, n, f);
  fclose(f);
  free(s);
}

Test(report_safety, directory_input_reads_newest_file) {
  char *tmp = ru_tmpdir();
  char *logs = ru_path2(tmp, "logs"), *out = ru_path2(tmp, "r");
  mkdir(logs, 0755);
  char *a = ru_path2(logs, "old.log"), *b = ru_path2(logs, "new.log");
  copy(FIX "simple.log", a);
  copy(FIX "chromium_events.log", b);
  struct timespec t[2] = {{1000, 0}, {1000, 0}};
  utimensat(AT_FDCWD, a, t, 0);
  char *err = NULL;
  int rc = ru_kilnf(&err, "--strict -o '%s' '%s'", out, logs);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(strstr(idx, "Trace: <code>new.log</code>"));
  free(idx), free(ip);
  rc = ru_kilnf(&err, "--latest -o '%s' '%s'", out, a);
  cr_assert_eq(rc, 1);
  cr_assert_not_null(strstr(err, "--latest needs a directory"), "%s", err);
  free(err);
  ru_rmtree(tmp);
  free(a), free(b), free(logs), free(out), free(tmp);
}

Test(report_safety, all_ranks_landing_page) {
  char *tmp = ru_tmpdir();
  char *logs = ru_path2(tmp, "logs"), *out = ru_path2(tmp, "r");
  mkdir(logs, 0755);
  char *r0 = ru_path2(logs, "dedicated_log_torch_trace_rank_0_abcd1234.log");
  char *r2 = ru_path2(logs, "dedicated_log_torch_trace_rank_2_zzzz0000.log");
  char *junk = ru_path2(logs, "notes.log");
  copy(FIX "chromium_events.log", r0);
  copy(FIX "comp_metrics.log", r2);
  copy(FIX "simple.log", junk);
  char *err = NULL;
  int rc = ru_kilnf(&err, "--all-ranks-html --strict -o '%s' '%s'", out, logs);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(strstr(idx, "<a href=\"rank_0/index.html\">rank 0</a>"));
  cr_assert_not_null(strstr(idx, "<a href=\"rank_2/index.html\">rank 2</a>"));
  cr_assert_null(strstr(idx, "rank_1"));
  /* [1/0] and [2/0] exist only on rank 2; [0/0]'s graph differs. */
  cr_assert_not_null(strstr(idx, "<tr><td>[1/0]</td><td>0 </td>"), "%s", idx);
  cr_assert_not_null(strstr(idx, "<tr><td>[0/0]</td><td></td><td>yes</td>"));
  char *cp = ru_path2(out, "chromium_events.json");
  char *ev = ru_read(cp, NULL);
  cr_assert_eq(count(ev, "\"pid\":0"), 6, "rank 0's events keep pid 0");
  cr_assert_eq(count(ev, "\"pid\":2"), 0, "comp_metrics.log has no events");
  size_t checked;
  cr_assert_eq(ru_check_links(out, &checked), 0);
  cr_assert_gt(checked, 20);
  free(ev), free(cp), free(idx), free(ip);
  ru_rmtree(tmp);
  free(r0), free(r2), free(junk), free(logs), free(out), free(tmp);
}

Test(report_cli, help_and_usage_errors) {
  char *tmp = ru_tmpdir();
  char *hp = ru_path2(tmp, "help.txt");
  kn__sb cmd = KN__SB_INIT;
  kn__sb_printf(&cmd, "'%s' report --help > '%s'", KN_TOOL_PATH, hp);
  cr_assert_eq(system(kn__sb_cstr(&cmd)), 0);
  kn__sb_fini(&cmd);
  char *help = ru_read(hp, NULL);
  const char *flags[] = {"-o OUT", "--overwrite", "--no-browser", "--strict",
                         "--strict-compile-id", "--latest", "--all-ranks-html",
                         "--custom-header-html FILE", "-v, --verbose",
                         "never\n                         opens a browser"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    cr_assert_not_null(strstr(help, flags[i]), "help lacks %s", flags[i]);
  free(help), free(hp);
  char *err = NULL;
  cr_assert_eq(ru_kiln("--bogus x", &err), 2);
  cr_assert_not_null(strstr(err, "unknown option '--bogus'"));
  free(err);
  cr_assert_eq(ru_kiln("", &err), 2);
  cr_assert_not_null(strstr(err, "missing the trace FILE or DIR"));
  free(err);
  cr_assert_eq(ru_kiln("/nonexistent/trace.log", &err), 1);
  cr_assert_not_null(strstr(err, "'/nonexistent/trace.log' does not exist"));
  free(err);
  /* A custom header lands at the top of the index, verbatim. */
  char *hdr = ru_path2(tmp, "h.html"), *out = ru_path2(tmp, "r");
  FILE *f = fopen(hdr, "w");
  fputs("<div class=\"team\">Team build 7</div>", f);
  fclose(f);
  int rc = ru_kilnf(&err, "--custom-header-html '%s' -o '%s' '" FIX "simple.log'",
                hdr, out);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(strstr(idx, "<body>\n<div class=\"team\">Team build 7</div>"));
  free(idx), free(ip), free(hdr), free(out);
  ru_rmtree(tmp);
  free(tmp);
}

Test(report_safety, oversized_record_is_a_defect_not_a_memory_hog) {
  char *tmp = ru_tmpdir();
  char *trace = ru_path2(tmp, "big.log"), *out = ru_path2(tmp, "r");
  FILE *f = fopen(trace, "w");
  size_t n = 3u << 20;
  char *payload = malloc(n + 1);
  for (size_t i = 0; i < n; i++) payload[i] = i % 100 == 99 ? '\n' : 'x';
  payload[n] = '\0';
  ru_record(f, 1, "{\"dynamo_output_graph\": {}, \"frame_id\": 0, "
            "\"frame_compile_id\": 0, \"attempt\": 0}", payload);
  ru_record(f, 2, "{\"dynamo_start\": {\"stack\": []}, \"frame_id\": 1, "
            "\"frame_compile_id\": 0, \"attempt\": 0}", NULL);
  fclose(f);
  free(payload);
  char *err = NULL;
  int rc = ru_kilnf(&err, "--max-record-mb 1 --strict -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 1);
  cr_assert_not_null(strstr(err, "big.log:1:"), "%s", err);
  free(err);
  /* Tolerant mode skips the big record and keeps the next one. */
  rc = ru_kilnf(&err, "--max-record-mb 1 --overwrite -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  char *files = ru_list(out);
  cr_assert_null(strstr(files, "dynamo_output_graph"));
  free(files);
  char *ip = ru_path2(out, "compile_directory.json");
  char *dirj = ru_read(ip, NULL);
  cr_assert_not_null(strstr(dirj, "\"[1/0]\""));
  free(dirj), free(ip);
  /* With the default limit the 3 MB payload is fine. */
  rc = ru_kilnf(&err, "--strict --overwrite -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 0, "%s", err);
  free(err);
  ru_rmtree(tmp);
  free(trace), free(out), free(tmp);
}

/* The profiler's Chrome trace is JSON, not a structured trace: before the
** check, `kiln report` read it as 0 records and exited 0 with an empty
** report. Now it says what the file is and exits 1, writing nothing. */
Test(report_safety, a_file_that_is_not_a_trace_is_named_and_refused) {
  char *tmp = ru_tmpdir();
  char *prof = ru_path2(tmp, "profile.json"), *out = ru_path2(tmp, "r");
  cr_assert_eq(kn_profiler_start(), KN_OK);
  kn_tensor *a = kn_ones(KN_SHAPE(3), KN_FLOAT32);
  kn_release(kn_add(a, a));
  kn_release(a);
  cr_assert_eq(kn_profiler_stop(), KN_OK);
  cr_assert_eq(kn_profiler_export_chrome_trace(prof), KN_OK, "%s", kn_last_error());
  char *err = NULL, want[2000];
  int rc = ru_kilnf(&err, "-o '%s' '%s'", out, prof);
  cr_expect_eq(rc, 1);
  snprintf(want, sizeof want,
           "kiln report: error: '%s' is not a structured trace (KILN_TRACE or TORCH_TRACE): "
           "none of its first lines is a record header such as 'V1126 20:50:56.316105 15673 "
           "src/dynamo/compile.c:12] {\"dynamo_start\": ...}'; found a JSON document in the "
           "Chrome trace format, as kiln's profiler writes (KILN_PROFILE, "
           "kn_profiler_export_chrome_trace): open it in Perfetto (ui.perfetto.dev) or "
           "chrome://tracing\n", prof);
  cr_expect_str_eq(err, want);
  free(err);
  cr_expect_neq(access(out, F_OK), 0, "no report directory is written");
  /* plain text: the first line is quoted with what a header needs */
  char *txt = ru_path2(tmp, "notes.txt");
  FILE *f = fopen(txt, "w");
  cr_assert_not_null(f);
  fputs("\nhello, this is not a trace\nsecond line\n", f);
  fclose(f);
  rc = ru_kilnf(&err, "-o '%s' '%s'", out, txt);
  cr_expect_eq(rc, 1);
  cr_expect(strstr(err, "is not a structured trace (KILN_TRACE or TORCH_TRACE)"), "%s", err);
  cr_expect(strstr(err, "; found the line 'hello, this is not a trace' ("), "%s", err);
  free(err);
  /* one junk line before the records is a defect of a trace, not a refusal */
  char *trace = ru_path2(tmp, "junk_first.log");
  f = fopen(trace, "w");
  cr_assert_not_null(f);
  fputs("junk\n", f);
  ru_record(f, 2, "{\"dynamo_start\": {\"stack\": []}, \"frame_id\": 0, \"frame_compile_id\": 0, "
            "\"attempt\": 0}", NULL);
  fclose(f);
  rc = ru_kilnf(&err, "-o '%s' '%s'", out, trace);
  cr_expect_eq(rc, 0, "%s", err);
  free(err);
  ru_rmtree(tmp);
  free(prof), free(out), free(txt), free(trace), free(tmp);
}
