/*
** tests/support/log_capture.h: the C port of PyTorch's logging test harness
** (logging_utils.py): capture the records that reach the log output, turn
** kn_set_logs settings into the equivalent KILN_LOGS string, and run a test
** body twice, once configured through the environment and once through the
** API, with the same expectations.
*/
#ifndef KN_TESTS_SUPPORT_LOG_CAPTURE_H
#define KN_TESTS_SUPPORT_LOG_CAPTURE_H

#include "support/files.h"

#include <stddef.h>

#include "kiln/log.h"

/* A copied record; every string owned by the list. */
typedef struct kn_test_record {
  char *name, *artifact, *compile_id, *message, *formatted;
  int level;
} kn_test_record;

typedef struct kn_test_records {
  kn_test_record *v;
  size_t n, cap;
} kn_test_records;

/* Unset KILN_LOGS, KILN_LOGS_OUT, KILN_LOGS_FORMAT and reset logging. */
void kn_test_log_clean(void);
/* Start capturing into r (an exclusive sink: nothing reaches stderr). */
void kn_test_capture_begin(kn_test_records *r);
void kn_test_capture_end(kn_test_records *r);
void kn_test_records_free(kn_test_records *r);
/* Records whose artifact is art (NULL: module records). */
size_t kn_test_count_artifact(const kn_test_records *r, const char *art);
/* Records whose logger name contains s. */
size_t kn_test_count_name(const kn_test_records *r, const char *s);
/* The single record whose message contains s; NULL if none or several. */
const kn_test_record *kn_test_get_record(const kn_test_records *r, const char *s);

/* kwargs_to_settings: a flag gives "name", level 10 "+name", 20 "name",
** 40 "-name"; other levels give NULL. Owned by the caller (free()). */
char *kn_test_settings_string(const kn_log_setting *s, size_t n);

/* make_logging_test: run body with KILN_LOGS=<settings string>, then with
** kn_set_logs(s, n), each after a reset and on a fresh record list. */
typedef void (*kn_test_body)(const kn_test_records *r, void *ud);
void kn_test_logging_twice(const kn_log_setting *s, size_t n, kn_test_body body, void *ud);

/* Replace each glog prefix's date, time and pid by "MMDD HH:MM:SS.uuuuuu PID".
** Owned by the caller. */
char *kn_test_normalize(const char *text);

/* The test-only artifact "custom_format_test_artifact" (owner kiln.dynamo,
** printed as the bare message), registered on first use: its logger id. */
kn_logger_id kn_test_custom_artifact(void);
/* Run fn with fd 2 redirected to a temporary file; return what was written. */
char *kn_test_capture_stderr(void (*fn)(void *), void *ud);

#endif
