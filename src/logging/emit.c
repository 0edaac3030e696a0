/*
** logging/emit.c: from a log call to bytes on stderr.
**
** The message is formatted outside the lock; then, under the lock, the
** record goes to the installed sinks and, unless a sink is exclusive, one
** write() of the formatted text to stderr and one to the KILN_LOGS_OUT file,
** so both receive identical bytes. Also the "Traceback" (this thread's
** last error, its "while ..." contexts as frames) and "Stack" (the C
** backtrace) blocks, the rank, and the test reset.
*/
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "logging/log_int.h"
#include "trace/compile_id.h"

/* 0, or the errno of the failed write. */
static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* A failed write to KILN_LOGS_OUT (a full disk, /dev/full) is reported once
** on stderr, and the file is closed: later lines go to stderr only. */
void kn__log_write_raw(const char *text, size_t n) {
  write_all(2, text, n);
  if (kn__logs.out_fd < 0) return;
  int err = write_all(kn__logs.out_fd, text, n);
  if (!err) return;
  char msg[600];
  int m = snprintf(msg, sizeof msg, "kiln: cannot write to KILN_LOGS_OUT file %s: %s; logging "
                   "to stderr only from now on\n", kn__logs.out_path ? kn__logs.out_path : "?",
                   strerror(err));
  write_all(2, msg, m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1);
  close(kn__logs.out_fd);
  kn__logs.out_fd = -1;
}

/* The error chain: "while a: while b: msg" → one frame per context. */
static void exc_block(kn__sb *sb) {
  kn_status st = kn_last_status();
  const char *msg = kn_last_error();
  if (st == KN_OK) {
    kn__sb_puts(sb, "kiln: no error recorded on this thread");
    return;
  }
  kn__sb_puts(sb, "Traceback (most recent call last):\n");
  while (!strncmp(msg, "while ", 6)) {
    const char *end = strstr(msg, ": ");
    if (!end) break;
    kn__sb_printf(sb, "  %.*s\n", (int)(end - msg), msg);
    msg = end + 2;
  }
  kn__sb_printf(sb, "kiln.%s: %s", kn_status_name(st), msg);
}

static void stack_block(kn__sb *sb) {
  void *frames[64];
  int n = backtrace(frames, 64);
  char **names = backtrace_symbols(frames, n);
  kn__sb_puts(sb, "Stack (most recent call last):");
  /* Skip this function and the emitter: the caller is the newest frame. */
  for (int i = n - 1; i >= 3; i--)
    kn__sb_printf(sb, "\n  %s", names ? names[i] : "?");
  free(names);
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void dispatch(const kn_log_record *r) {
  bool exclusive = false;
  for (int i = 0; i < kn__logs.nsinks; i++) {
    kn__logs.sinks[i].fn(r, kn__logs.sinks[i].userdata);
    if (kn__logs.sinks[i].flags & KN_LOG_SINK_EXCLUSIVE) exclusive = true;
  }
  if (exclusive) return;
  kn__sb text = KN__SB_INIT;
  kn__log_format(r, &text);
  kn__sb_putc(&text, '\n');
  if (!kn__sb_failed(&text)) kn__log_write_raw(text.buf, text.len);
  kn__sb_fini(&text);
}

void kn__log_vemit(int logger, int level, unsigned flags, const char *file, int line,
                   const char *fmt, va_list ap) {
  kn__log_ensure_init();
  if (logger < 0 || logger >= KN__LOG_MAX ||
      atomic_load_explicit(&kn__log_gate[logger], memory_order_relaxed) > level)
    return;
  kn__sb msg = KN__SB_INIT, exc = KN__SB_INIT, stack = KN__SB_INIT;
  kn__sb_vprintf(&msg, fmt, ap);
  if (flags & KN__LOG_EXC) exc_block(&exc);
  if (flags & KN__LOG_STACK) stack_block(&stack);
  char cid[64];
  const kn__compile_ctx *ctx = kn__compile_ctx_get();
  if (ctx->active) kn__compile_id_format_attempt(ctx->id, ctx->attempt, cid, sizeof cid);
  kn_log_record r = {
      .level = level, .compile_id = ctx->active ? cid : NULL,
      .message = kn__sb_cstr(&msg),
      .exc_text = (flags & KN__LOG_EXC) ? kn__sb_cstr(&exc) : NULL,
      .stack_text = (flags & KN__LOG_STACK) ? kn__sb_cstr(&stack) : NULL,
      .pathname = file, .filename = kn__log_basename(file), .lineno = line,
      .created_us = now_us(), .pid = (int)getpid()};
  pthread_mutex_lock(&kn__logs.lock);
  const kn__logger *lg = &kn__logs.loggers[logger];
  r.name = lg->name;
  if (lg->artifact >= 0) {
    r.artifact = kn__logs.artifacts[lg->artifact].name;
    r.raw = (kn__logs.artifacts[lg->artifact].flags & KN_ARTIFACT_RAW) != 0;
  }
  r.rank = kn__logs.rank;
  dispatch(&r);
  pthread_mutex_unlock(&kn__logs.lock);
  kn__sb_fini(&msg);
  kn__sb_fini(&exc);
  kn__sb_fini(&stack);
}

void kn__log_emit(int logger, int level, unsigned flags, const char *file, int line,
                  const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kn__log_vemit(logger, level, flags, file, line, fmt, ap);
  va_end(ap);
}

void kn_log_write(kn_logger_id id, int level, const char *file, int line, const char *fmt,
                  ...) {
  va_list ap;
  va_start(ap, fmt);
  kn__log_vemit(id, level, 0, file ? file : "?", line, fmt, ap);
  va_end(ap);
}

/* ---- sinks, rank, output configuration ---------------------------------- */

kn_status kn_log_add_sink(kn_log_sink_fn fn, void *userdata, unsigned flags) {
  if (!fn) return kn__error(KN_EINVAL, "expected a sink function, found NULL");
  kn__log_ensure_init();
  pthread_mutex_lock(&kn__logs.lock);
  kn_status s = KN_OK;
  if (kn__logs.nsinks >= KN__SINK_MAX)
    s = kn__error(KN_ERANGE, "at most %d log sinks can be installed", KN__SINK_MAX);
  else
    kn__logs.sinks[kn__logs.nsinks++] = (kn__log_sink){fn, userdata, flags};
  pthread_mutex_unlock(&kn__logs.lock);
  return s;
}

bool kn_log_remove_sink(kn_log_sink_fn fn, void *userdata) {
  bool found = false;
  pthread_mutex_lock(&kn__logs.lock);
  for (int i = 0; i < kn__logs.nsinks && !found; i++) {
    if (kn__logs.sinks[i].fn != fn || kn__logs.sinks[i].userdata != userdata) continue;
    memmove(&kn__logs.sinks[i], &kn__logs.sinks[i + 1],
            (size_t)(kn__logs.nsinks - i - 1) * sizeof kn__logs.sinks[0]);
    kn__logs.nsinks--;
    found = true;
  }
  pthread_mutex_unlock(&kn__logs.lock);
  return found;
}

void kn_set_log_rank(int rank) {
  pthread_mutex_lock(&kn__logs.lock);
  kn__logs.rank = rank < 0 ? -1 : rank;
  pthread_mutex_unlock(&kn__logs.lock);
}

void kn__log_close_output(void) {
  if (kn__logs.out_fd >= 0) close(kn__logs.out_fd);
  kn__logs.out_fd = -1;
  free(kn__logs.out_path);
  kn__logs.out_path = NULL;
  free(kn__logs.format);
  kn__logs.format = NULL;
}

void kn__log_read_env_output(void) {
  const char *out = getenv("KILN_LOGS_OUT");
  if (out && *out) {
    kn__logs.out_fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (kn__logs.out_fd < 0)
      fprintf(stderr, "kiln: cannot open KILN_LOGS_OUT file %s: %s\n", out, strerror(errno));
    kn__logs.out_path = strdup(out); /* for the message of a failed write; NULL on OOM */
  }
  const char *fmt = getenv("KILN_LOGS_FORMAT");
  if (!fmt || !*fmt) return;
  if (!strcmp(fmt, "short") || !strcmp(fmt, "basic")) fmt = "%(levelname)s:%(name)s:%(message)s";
  if (kn__log_check_format(fmt) != KN_OK) {
    fprintf(stderr, "kiln: %s; using the default format\n", kn_last_error());
    kn_clear_error();
    return;
  }
  kn__logs.format = strdup(fmt);
}

void kn__log_reset_for_tests(void) {
  kn__log_ensure_init();
  pthread_mutex_lock(&kn__logs.lock);
  kn__log_close_output();
  kn__logs.nsinks = 0;
  kn__logs.rank = -1;
  kn__log_read_env_output();
  kn__log_read_env_settings();
  pthread_mutex_unlock(&kn__logs.lock);
}
