/*
** tests/support/log_capture.c: record capture and the run-twice harness for
** logging tests (see log_capture.h).
*/
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "logging/log.h"
#include "support/log_capture.h"

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

void kn_test_log_clean(void) {
  unsetenv("KILN_LOGS");
  unsetenv("KILN_LOGS_OUT");
  unsetenv("KILN_LOGS_FORMAT");
  kn__log_reset_for_tests();
}

static void sink(const kn_log_record *rec, void *ud) {
  kn_test_records *r = ud;
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 16;
    r->v = realloc(r->v, r->cap * sizeof *r->v);
    if (!r->v) abort();
  }
  r->v[r->n++] = (kn_test_record){
      dup_or_null(rec->name), dup_or_null(rec->artifact), dup_or_null(rec->compile_id),
      dup_or_null(rec->message), kn_log_format_record(rec), rec->level};
}

void kn_test_capture_begin(kn_test_records *r) {
  kn_log_add_sink(sink, r, KN_LOG_SINK_EXCLUSIVE);
}

void kn_test_capture_end(kn_test_records *r) { kn_log_remove_sink(sink, r); }

void kn_test_records_free(kn_test_records *r) {
  for (size_t i = 0; i < r->n; i++) {
    kn_test_record *x = &r->v[i];
    free(x->name), free(x->artifact), free(x->compile_id), free(x->message);
    free(x->formatted);
  }
  free(r->v);
  *r = (kn_test_records){0};
}

size_t kn_test_count_artifact(const kn_test_records *r, const char *art) {
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++) {
    const char *a = r->v[i].artifact;
    if (art ? (a && !strcmp(a, art)) : !a) n++;
  }
  return n;
}

size_t kn_test_count_name(const kn_test_records *r, const char *s) {
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++)
    if (strstr(r->v[i].name, s)) n++;
  return n;
}

const kn_test_record *kn_test_get_record(const kn_test_records *r, const char *s) {
  const kn_test_record *found = NULL;
  for (size_t i = 0; i < r->n; i++) {
    if (!strstr(r->v[i].message, s)) continue;
    if (found) return NULL;
    found = &r->v[i];
  }
  return found;
}

char *kn_test_settings_string(const kn_log_setting *s, size_t n) {
  kn__sb sb = KN__SB_INIT;
  for (size_t i = 0; i < n; i++) {
    const char *prefix = NULL;
    if (s[i].kind == KN_LOG_SET_FLAG) prefix = "";
    else if (s[i].value == KN_DEBUG) prefix = "+";
    else if (s[i].value == KN_INFO) prefix = "";
    else if (s[i].value == KN_ERROR) prefix = "-";
    if (!prefix) {
      kn__sb_fini(&sb);
      return NULL;
    }
    kn__sb_printf(&sb, "%s%s%s", i ? "," : "", prefix, s[i].name);
  }
  return kn__sb_take(&sb);
}

void kn_test_logging_twice(const kn_log_setting *s, size_t n, kn_test_body body, void *ud) {
  char *env = kn_test_settings_string(s, n);
  if (!env) abort();
  for (int pass = 0; pass < 2; pass++) {
    kn_test_log_clean();
    if (pass == 0) {
      setenv("KILN_LOGS", env, 1);
      kn__log_reset_for_tests();
    } else if (kn_set_logs(s, n) != KN_OK) {
      abort();
    }
    kn_test_records r = {0};
    kn_test_capture_begin(&r);
    body(&r, ud);
    kn_test_capture_end(&r);
    kn_test_records_free(&r);
  }
  free(env);
  kn_test_log_clean();
}

char *kn_test_normalize(const char *text) {
  regex_t re;
  regcomp(&re, "^(\\[rank[0-9]+\\]:)?([A-Z])[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} [0-9]+ ",
          REG_EXTENDED | REG_NEWLINE);
  kn__sb sb = KN__SB_INIT;
  const char *p = text;
  regmatch_t m[3];
  int eflags = 0;
  while (*p && regexec(&re, p, 3, m, eflags) == 0) {
    kn__sb_putn(&sb, p, (size_t)m[0].rm_so);
    if (m[1].rm_so >= 0) kn__sb_putn(&sb, p + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so));
    kn__sb_printf(&sb, "%c", p[m[2].rm_so]);
    kn__sb_puts(&sb, "MMDD HH:MM:SS.uuuuuu PID ");
    p += m[0].rm_eo;
    eflags = REG_NOTBOL;
    if (p > text && p[-1] == '\n') eflags = 0;
  }
  kn__sb_puts(&sb, p);
  regfree(&re);
  return kn__sb_take(&sb);
}

char *kn_test_capture_stderr(void (*fn)(void *), void *ud) {
  char path[] = "/tmp/kn_test_stderr_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  fn(ud);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  char *text = kn_test_read_file(path, NULL);
  unlink(path);
  return text;
}

kn_logger_id kn_test_custom_artifact(void) {
  static kn_logger_id id = -1;
  if (id < 0 && kn_log_register_artifact("custom_format_test_artifact", "kiln.dynamo",
                                         "Testing only", KN_ARTIFACT_RAW, &id) != KN_OK)
    id = -1;
  return id;
}
