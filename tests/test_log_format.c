/*
** test_log_format.c: exact log line formats (spec §6): the glog prefix with
** rank, compile id and artifact tags, one prefix per message line, raw
** artifacts, Traceback/Stack blocks, KILN_LOGS_FORMAT, and the byte
** identity of KILN_LOGS_OUT with stderr (in a child process).
*/
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "logging/log.h"
#include "support/log_capture.h"
#include "trace/compile_id.h"

#define T0 (1732192496LL * 1000000 + 789123) /* 2024-11-21 12:34:56.789123 UTC */

static void utc(void) {
  setenv("TZ", "UTC", 1);
  tzset();
  kn_test_log_clean();
}

static kn_log_record rec(int level, const char *msg) {
  return (kn_log_record){.name = "kiln.dynamo", .level = level, .message = msg,
                         .pathname = KN_SOURCE_DIR "/src/dynamo/symbolic_convert.c",
                         .filename = "symbolic_convert.c", .lineno = 2456,
                         .created_us = T0, .pid = 4242, .rank = -1};
}

static void check_format(const kn_log_record *r, const char *want) {
  char *got = kn_log_format_record(r);
  cr_assert_str_eq(got, want);
  free(got);
}

Test(log_format, glog_line_with_compile_id, .init = utc) {
  kn_log_record r = rec(KN_INFO, "Step 1: dynamo start tracing fn /home/user/t.c:3");
  r.compile_id = "0/0";
  check_format(&r, "I1121 12:34:56.789123 4242 src/dynamo/symbolic_convert.c:2456] [0/0] "
                   "Step 1: dynamo start tracing fn /home/user/t.c:3");
}

Test(log_format, level_letters_and_unknown_level, .init = utc) {
  const struct { int level; const char *lead; } cases[] = {
      {KN_DEBUG, "V1121"}, {KN_INFO, "I1121"}, {KN_WARNING, "W1121"},
      {KN_ERROR, "E1121"}, {KN_CRITICAL, "C1121"}, {15, "Level 151121"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kn_log_record r = rec(cases[i].level, "m");
    char *got = kn_log_format_record(&r);
    cr_assert(!strncmp(got, cases[i].lead, strlen(cases[i].lead)), "%s", got);
    free(got);
  }
}

Test(log_format, recompile_artifact_every_line_prefixed, .init = utc) {
  kn_log_record r = rec(KN_DEBUG,
                        "Recompiling function fn in /home/user/t.c:3\n"
                        "    triggered by the following guard failure(s):\n"
                        "    - 0/0: tensor 'L['x']' size mismatch at index 0. expected 4, actual 5");
  r.name = "kiln.dynamo.guards.__recompiles";
  r.artifact = "recompiles";
  r.compile_id = "0/1";
  r.pathname = KN_SOURCE_DIR "/src/dynamo/guards.c";
  r.lineno = 2611;
  r.created_us = 1732192497LL * 1000000 + 1000;
  check_format(&r,
      "V1121 12:34:57.001000 4242 src/dynamo/guards.c:2611] [0/1] [__recompiles] "
      "Recompiling function fn in /home/user/t.c:3\n"
      "V1121 12:34:57.001000 4242 src/dynamo/guards.c:2611] [0/1] [__recompiles]     "
      "triggered by the following guard failure(s):\n"
      "V1121 12:34:57.001000 4242 src/dynamo/guards.c:2611] [0/1] [__recompiles]     "
      "- 0/0: tensor 'L['x']' size mismatch at index 0. expected 4, actual 5");
}

Test(log_format, rank_prefix_and_attempt, .init = utc) {
  kn_log_record r = rec(KN_WARNING, "kiln.dynamo hit config.cache_size_limit (8)");
  r.rank = 0;
  r.compile_id = "0/8_1";
  r.pathname = KN_SOURCE_DIR "/src/dynamo/convert_frame.c";
  r.lineno = 744;
  r.created_us = 1732192500LL * 1000000 + 100;
  check_format(&r, "[rank0]:W1121 12:35:00.000100 4242 src/dynamo/convert_frame.c:744] [0/8_1] "
                   "kiln.dynamo hit config.cache_size_limit (8)");
}

Test(log_format, empty_and_trailing_lines_keep_prefix, .init = utc) {
  kn_log_record r = rec(KN_INFO, "a\n\nb\n");
  r.pathname = "/elsewhere/user_code.c";
  r.lineno = 7;
  const char *p = "I1121 12:34:56.789123 4242 user_code.c:7]";
  char want[512];
  snprintf(want, sizeof want, "%s a\n%s \n%s b\n%s ", p, p, p, p);
  check_format(&r, want);
}

Test(log_format, raw_artifact_is_bare_message, .init = utc) {
  kn_log_record r = rec(KN_INFO, "custom format");
  r.artifact = "custom_format_test_artifact";
  r.raw = true;
  check_format(&r, "custom format");
}

Test(log_format, exc_and_stack_blocks, .init = utc) {
  kn_log_record r = rec(KN_ERROR, "test dynamo");
  r.exc_text = "Traceback (most recent call last):\n  while x\nkiln.shape_error: bad";
  r.stack_text = "Stack (most recent call last):\n  f";
  const char *p = "E1121 12:34:56.789123 4242 src/dynamo/symbolic_convert.c:2456]";
  char want[1024];
  snprintf(want, sizeof want,
           "%s test dynamo\n%s Traceback (most recent call last):\n%s   while x\n"
           "%s kiln.shape_error: bad\n%s Stack (most recent call last):\n%s   f",
           p, p, p, p, p, p);
  check_format(&r, want);
}

/* ---- live emission through the capture sink ------------------------------ */

static kn_test_records got;

static void capture(void) {
  utc();
  (void)kn_test_custom_artifact();
  kn_set_logs_str("+dynamo,recompiles,custom_format_test_artifact");
  got = (kn_test_records){0};
  kn_test_capture_begin(&got);
}

static void release(void) {
  kn_test_capture_end(&got);
  kn_test_records_free(&got);
}

Test(log_emit, compile_id_tag_inside_compile_only, .init = capture, .fini = release) {
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "outside");
  kn__compile_ctx saved, inner;
  kn__compile_ctx_enter((kn_compile_id){-1, 0, 1}, &saved);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "inside");
  kn__compile_ctx_get()->attempt = 1;
  KN_LOG_ARTIFACT(KN_ART_RECOMPILES, "attempt %d", 1);
  kn__compile_ctx_enter((kn_compile_id){2, 0, 1}, &inner);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "compiled autograd");
  kn__compile_ctx_leave(&inner);
  kn__compile_ctx_leave(&saved);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "after");
  cr_assert_eq(got.n, 5);
  cr_assert_null(got.v[0].compile_id);
  cr_assert_str_eq(got.v[1].compile_id, "0/1");
  cr_assert_str_eq(got.v[2].compile_id, "0/1_1");
  cr_assert_str_eq(got.v[2].artifact, "recompiles");
  cr_assert_str_eq(got.v[2].name, "kiln.dynamo.guards.__recompiles");
  cr_assert_str_eq(got.v[3].compile_id, "!2/0/1");
  cr_assert_null(got.v[4].compile_id);
}

Test(log_emit, golden_line_of_a_live_call, .init = capture, .fini = release) {
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, 3, 0}, &saved);
  int line = __LINE__ + 1;
  KN_LOG_ARTIFACT(KN_ART_RECOMPILES, "Recompiling function %s\n    reason %d", "fn", 7);
  kn__compile_ctx_leave(&saved);
  cr_assert_eq(got.n, 1);
  char *norm = kn_test_normalize(got.v[0].formatted);
  char want[512];
  snprintf(want, sizeof want,
           "VMMDD HH:MM:SS.uuuuuu PID tests/test_log_format.c:%d] [3/0] [__recompiles] "
           "Recompiling function fn\n"
           "VMMDD HH:MM:SS.uuuuuu PID tests/test_log_format.c:%d] [3/0] [__recompiles]     "
           "reason 7", line, line);
  cr_assert_str_eq(norm, want);
  free(norm);
  /* The live prefix carries this process's pid and a well-formed time. */
  regex_t re;
  char pat[128];
  snprintf(pat, sizeof pat, "^V[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} %d tests/",
           (int)getpid());
  cr_assert_eq(regcomp(&re, pat, REG_EXTENDED), 0);
  cr_assert_eq(regexec(&re, got.v[0].formatted, 0, NULL, 0), 0, "%s", got.v[0].formatted);
  regfree(&re);
}

Test(log_emit, multiline_every_line_has_level_letter, .init = capture, .fini = release) {
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "test\ndynamo");
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "%s", "test\ndynamo");
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "test\n%s", "test\ndynamo");
  cr_assert_eq(got.n, 3);
  size_t lines = 0;
  for (size_t i = 0; i < got.n; i++) {
    char *copy = strdup(got.v[i].formatted);
    for (char *l = strtok(copy, "\n"); l; l = strtok(NULL, "\n"), lines++)
      cr_assert(l[0] == 'I' && strstr(l, "tests/test_log_format.c:"), "%s", l);
    free(copy);
  }
  cr_assert_eq(lines, 7);
}

Test(log_emit, custom_format_artifact_and_exc_stack, .init = capture, .fini = release) {
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "test dynamo");
  KN_LOG_TO(kn_test_custom_artifact(), KN_INFO, "custom format");
  kn__error(KN_ESHAPE, "expected 3, found 4");
  kn__error_context("while tracing %s", "fn");
  KN_LOG_EXC(KN_LOG_DYNAMO, KN_ERROR, "test dynamo");
  KN_LOG_EXC(KN_LOG_DYNAMO, KN_INFO, "with exc");
  KN_LOG_STACK(KN_LOG_DYNAMO, KN_INFO, "with stack");
  cr_assert_eq(got.n, 5);
  cr_assert(strchr(got.v[0].formatted, 'I'));
  cr_assert_str_eq(got.v[1].formatted, "custom format");
  cr_assert(strstr(got.v[2].formatted, "] Traceback (most recent call last):\n"));
  cr_assert(strstr(got.v[2].formatted, "]   while tracing fn\n"));
  cr_assert(strstr(got.v[2].formatted, "] kiln.shape_error: expected 3, found 4"));
  cr_assert(strstr(got.v[3].formatted, "Traceback"));
  cr_assert(strstr(got.v[4].formatted, "] Stack (most recent call last):\n"));
  kn_clear_error();
}

Test(log_emit, rank_prefix_on_live_lines, .init = capture, .fini = release) {
  kn_set_log_rank(0);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "woof");
  kn_set_log_rank(-1);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "arf");
  cr_assert_eq(got.n, 2);
  cr_assert(!strncmp(got.v[0].formatted, "[rank0]:I", 9), "%s", got.v[0].formatted);
  cr_assert_eq(got.v[1].formatted[0], 'I');
}

/* ---- KILN_LOGS_FORMAT ------------------------------------------------------ */

static void fmt_env(const char *fmt) {
  utc();
  setenv("KILN_LOGS_FORMAT", fmt, 1);
  kn__log_reset_for_tests();
}

Test(log_format, logs_format_env_replaces_prefix) {
  fmt_env("%(levelname)s:%(name)s:%(message)s");
  kn_log_record r = rec(KN_INFO, "two\nlines");
  r.artifact = "graph";
  r.compile_id = "0/0";
  check_format(&r, "INFO:kiln.dynamo:two\nlines");
  fmt_env("short");
  check_format(&r, "INFO:kiln.dynamo:two\nlines");
  fmt_env("[%(levelno)3d] %(filename)s:%(lineno)d %(pathname)s 100%%");
  r.exc_text = "Traceback (most recent call last):\nkiln.io_error: x";
  check_format(&r, "[ 20] symbolic_convert.c:2456 " KN_SOURCE_DIR
                   "/src/dynamo/symbolic_convert.c 100%\n"
                   "Traceback (most recent call last):\nkiln.io_error: x");
  kn_test_log_clean();
}

static void bad_format(void *ud) {
  (void)ud;
  fmt_env("%(levelname)s %(bogus)s");
}

Test(log_format, logs_format_unknown_field_is_named_and_ignored) {
  char *err = kn_test_capture_stderr(bad_format, NULL);
  cr_assert_str_eq(err, "kiln: KILN_LOGS_FORMAT \"%(levelname)s %(bogus)s\": unknown field "
                        "'bogus'; valid fields are levelname, message, pathname, levelno, "
                        "lineno, filename and name; using the default format\n");
  free(err);
  kn_log_record r = rec(KN_INFO, "m");
  check_format(&r, "I1121 12:34:56.789123 4242 src/dynamo/symbolic_convert.c:2456] m");
  kn_test_log_clean();
}

/* ---- KILN_LOGS_OUT: a child process, stderr and the file compared ---------- */

static void child_logs(void) {
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "Step 1: dynamo start tracing fn t.c:3");
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, 0, 0}, &saved);
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "two\nlines");
  KN_LOG_ARTIFACT(KN_ART_GRAPH_CODE, "TRACED GRAPH");
  KN_LOG(KN_LOG_INDUCTOR, KN_INFO, "not enabled");
  kn__compile_ctx_leave(&saved);
  KN_LOG(KN_LOG_DYNAMO_GUARDS, KN_WARNING, "warn");
}

Test(log_out, file_is_byte_identical_to_stderr) {
  char out[] = "/tmp/kn_logs_out_XXXXXX", err[] = "/tmp/kn_logs_err_XXXXXX";
  int ofd = mkstemp(out), efd = mkstemp(err);
  cr_assert(ofd >= 0 && efd >= 0);
  close(ofd);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(efd, 2);
    setenv("KILN_LOGS", "+dynamo", 1);
    setenv("KILN_LOGS_OUT", out, 1);
    unsetenv("KILN_LOGS_FORMAT");
    kn__log_reset_for_tests();
    child_logs();
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  size_t nf, ne;
  char *file = kn_test_read_file(out, &nf), *stderr_text = kn_test_read_file(err, &ne);
  cr_assert_eq(nf, ne);
  cr_assert_eq(memcmp(file, stderr_text, nf), 0);
  char *norm = kn_test_normalize(file);
  cr_assert(strstr(norm, "IMMDD HH:MM:SS.uuuuuu PID tests/test_log_format.c:"));
  size_t lines = 0;
  for (const char *p = norm; *p; p++) lines += *p == '\n';
  cr_assert_eq(lines, 5, "%s", norm); /* step, two lines, graph_code, warn */
  cr_assert(strstr(norm, "] [0/0] [__graph_code] TRACED GRAPH\n"));
  free(norm), free(file), free(stderr_text);
  close(efd);
  unlink(out), unlink(err);
}
