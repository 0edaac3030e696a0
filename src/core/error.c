/*
** core/error.c: status names and the thread-local last-error message.
*/
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static _Thread_local char last_msg[KN__ERROR_CAP];
static _Thread_local kn_status last_status = KN_OK;
/* errors raised on this thread, and the one that made a call return NULL */
static _Thread_local unsigned long serial, null_serial;

const char *kn_status_name(kn_status s) {
  switch (s) {
#define KN__STATUS_NAME(code, val, name, desc) case code: return name;
    KN_STATUS_MAP(KN__STATUS_NAME)
#undef KN__STATUS_NAME
  }
  return "unknown_status";
}

const char *kn_status_str(kn_status s) {
  switch (s) {
#define KN__STATUS_DESC(code, val, name, desc) case code: return desc;
    KN_STATUS_MAP(KN__STATUS_DESC)
#undef KN__STATUS_DESC
  }
  return "unknown status";
}

const char *kn_last_error(void) { return last_msg; }
kn_status kn_last_status(void) { return last_status; }

void kn_clear_error(void) {
  last_msg[0] = '\0';
  last_status = KN_OK;
}

void kn__error_save(kn__error_state *s) {
  memcpy(s->msg, last_msg, sizeof last_msg);
  s->status = last_status;
  s->serial = serial;
}

void kn__error_restore(const kn__error_state *s) {
  memcpy(last_msg, s->msg, sizeof last_msg);
  last_status = s->status;
  serial = s->serial;
}

const char *kn_version(void) { return "0.1.0"; }

static void mark_truncated(int n) {
  if (n >= (int)sizeof last_msg)
    memcpy(last_msg + sizeof last_msg - 4, "...", 4);
}

/* Messages are formatted into a local buffer first: an argument may be the
** previous message itself (kn_last_error()). */
kn_status kn__error(kn_status s, const char *fmt, ...) {
  char msg[KN__ERROR_CAP];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(last_msg, msg, sizeof msg);
  mark_truncated(n);
  last_status = s;
  serial++;
  return s;
}

/* What the hint quotes: the first line of the error that started a chain
** of NULL results (a NULL argument's own error passes its origin on). */
static _Thread_local char origin[320], pending[320];
static _Thread_local unsigned long pending_serial = (unsigned long)-1;

void kn__error_null_result(void) {
  null_serial = serial;
  if (serial == pending_serial + 1) { /* raised for a NULL argument: same origin */
    memcpy(origin, pending, sizeof origin);
    return;
  }
  size_t len = strcspn(last_msg, "\n");
  snprintf(origin, sizeof origin, "%.*s%s", (int)(len > 300 ? 300 : len), last_msg,
           len > 300 ? "..." : "");
}

const char *kn__error_hint(char *buf, size_t n) {
  buf[0] = '\0';
  pending[0] = '\0';
  pending_serial = serial;
  if (last_status == KN_OK || !serial || null_serial != serial || !origin[0]) return buf;
  memcpy(pending, origin, sizeof pending);
  snprintf(buf, n, " (did an earlier call fail? %s)", origin);
  return buf;
}

kn_status kn__error_context(const char *fmt, ...) {
  char ctx[KN__ERROR_CAP];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(ctx, sizeof ctx, fmt, ap);
  va_end(ap);
  if (n < 0) return last_status;
  char joined[KN__ERROR_CAP];
  int m = snprintf(joined, sizeof joined, "%s: %s", ctx, last_msg);
  memcpy(last_msg, joined, sizeof joined);
  mark_truncated(m);
  return last_status;
}

kn_status kn__oom(void) { return kn__error(KN_ENOMEM, "out of memory"); }
