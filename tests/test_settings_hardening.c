/*
** test_settings_hardening.c: bad KILN_LOGS_FORMAT values are rejected with a
** message naming the problem (never read past the string, never pad lines
** to gigabytes); a KILN_LOGS_OUT file that cannot be written and a trace
** file on a full disk are reported once, and the trace file then ends at
** its last complete record.
*/
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "logging/log_int.h"
#include "support/log_capture.h"
#include "support/trace_util.h"
#include "trace/trace.h"

static kn_log_record rec(const char *msg) {
  return (kn_log_record){.name = "kiln.dynamo", .level = KN_INFO, .message = msg,
                         .pathname = "t.c", .filename = "t.c", .lineno = 7, .rank = -1};
}

/* The line a record formats to under the current settings. */
static char *formatted(const char *msg) {
  kn_log_record r = rec(msg);
  return kn_log_format_record(&r);
}

static void set_format(void *fmt) {
  setenv("KILN_LOGS_FORMAT", fmt, 1);
  kn__log_reset_for_tests();
}

/* Setting fmt prints `want` on stderr and keeps the default (glog) format. */
static void rejected(const char *fmt, const char *want) {
  char *copy = strdup(fmt); /* heap: ASan sees a read past its end */
  char *err = kn_test_capture_stderr(set_format, copy);
  cr_assert(strstr(err, want) != NULL, "expected '%s' in: %s", want, err);
  cr_assert(strstr(err, "using the default format") != NULL, "%s", err);
  free(err);
  char *line = formatted("m");
  cr_assert(line && line[0] == 'I' && strstr(line, "t.c:7] m"), "%s", line);
  free(line);
  free(copy);
  kn_test_log_clean();
}

Test(settings, logs_format_ending_in_a_lone_percent_is_rejected) {
  rejected("%(message)s %", "the format ends with a lone '%'");
  rejected("%", "the format ends with a lone '%'");
  rejected("%(message", "expected \"%(field)s\" or \"%%\"");
}

Test(settings, logs_format_widths_are_bounded) {
  /* each line was padded to a gigabyte */
  rejected("%(message)1000000000s", "width or precision larger than 1024");
  rejected("%(message).99999999999999999999s", "width or precision larger than 1024");
  rejected("%(levelno)-4096d", "width or precision larger than 1024");
  /* the bound itself is accepted */
  char *fmt = strdup("[%(levelname)1024s]");
  set_format(fmt);
  char *line = formatted("m");
  cr_assert_not_null(line);
  cr_assert_eq(strlen(line), 1026, "%zu", strlen(line));
  cr_assert(!strcmp(line + 1021, "INFO]"), "%s", line + 1021);
  free(line);
  free(fmt);
  kn_test_log_clean();
}

/* Run body in a child with stderr going to a file; return what it wrote. */
static char *child_stderr(void (*body)(void *), void *ud) {
  char path[] = "/tmp/kn_settings_err_XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 2);
    body(ud);
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  char *text = kn_test_read_file(path, NULL);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d: %s", status, text);
  close(fd);
  unlink(path);
  return text;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static void log_to_dev_full(void *ud) {
  (void)ud;
  setenv("KILN_LOGS", "+dynamo", 1);
  setenv("KILN_LOGS_OUT", "/dev/full", 1);
  unsetenv("KILN_LOGS_FORMAT");
  kn__log_reset_for_tests();
  for (int i = 0; i < 3; i++) KN_LOG(KN_LOG_DYNAMO, KN_INFO, "line %d", i);
}

Test(settings, logs_out_that_cannot_be_written_warns_once) {
  char *err = child_stderr(log_to_dev_full, NULL);
  cr_assert_eq(count(err, "kiln: cannot write to KILN_LOGS_OUT file /dev/full: No space left "
                          "on device; logging to stderr only from now on\n"), 1, "%s", err);
  for (int i = 0; i < 3; i++) {
    char want[16];
    snprintf(want, sizeof want, "line %d\n", i);
    cr_assert_eq(count(err, want), 1, "stderr still gets every line: %s", err);
  }
  free(err);
}

/* ---- the trace on a full disk --------------------------------------------------- */

#define PAYLOAD_LINE "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"

static void trace_until_full(void *dir) {
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = {10000, 10000}; /* the "disk" holds 10,000 bytes */
  setrlimit(RLIMIT_FSIZE, &lim);
  kn_trace_enable(dir);
  char payload[20 * sizeof PAYLOAD_LINE] = ""; /* 20 lines joined by newlines */
  for (int i = 0; i < 20; i++) strcat(strcat(payload, i ? "\n" : ""), PAYLOAD_LINE);
  int ok = 0;
  kn_status st = KN_OK;
  for (int i = 0; i < 100 && st == KN_OK; i++) {
    kn__trace_opts o = {.file = "src/x.c", .line = i + 1};
    st = kn__trace_structured("artifact", NULL, payload, SIZE_MAX, &o);
    ok += st == KN_OK;
  }
  /* later records are dropped without another message */
  kn__trace_opts o = {.file = "src/x.c", .line = 999};
  kn_status later = kn__trace_structured("artifact", NULL, "x", SIZE_MAX, &o);
  char *path = kn_trace_file_path();
  fprintf(stderr, "ok=%d first_error=%s later=%s enabled=%d path=%s\n", ok, kn_status_name(st),
          kn_status_name(later), kn_trace_is_enabled(), path ? path : "none");
  free(path);
  kn_trace_disable();
}

Test(settings, trace_on_a_full_disk_ends_at_the_last_complete_record) {
  char *dir = kn_test_tmpdir();
  char *err = child_stderr(trace_until_full, dir);
  cr_assert_eq(count(err, "kiln: cannot write trace file '"), 1, "%s", err);
  cr_assert(strstr(err, "File too large; tracing stopped (the file ends at the last complete "
                        "record)\n") != NULL, "%s", err);
  int ok = -1;
  char path[4096] = "";
  const char *summary = strstr(err, "ok=");
  cr_assert_not_null(summary, "%s", err);
  cr_assert_eq(sscanf(summary, "ok=%d first_error=io_error later=ok enabled=0 path=%4095s", &ok,
                      path), 2, "%s", summary);
  size_t n = 0;
  char *text = kn_test_read_file(path, &n);
  cr_assert_not_null(text, "%s", path);
  /* every record is a header line and 20 payload lines */
  cr_assert_gt(ok, 3);
  cr_assert_lt(n, 10000);
  cr_assert_eq(count(text, "\n"), ok * 21, "%zu bytes: %s", n, text + (n > 200 ? n - 200 : 0));
  cr_assert_eq(count(text, "\t" PAYLOAD_LINE "\n"), ok * 20);
  cr_assert_eq(text[n - 1], '\n');
  free(text);
  free(err);
  kn_test_rmdir(dir);
}
