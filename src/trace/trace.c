/*
** trace/trace.c: the structured-trace writer: process-wide settings, lazy
** file creation, record framing, MD5, and string interning.
**
** Global state (documented process-wide setting): the target directory, the
** open file and the intern table, guarded by two mutexes taken in the order
** intern_lock -> file_lock. A record is assembled outside the locks and
** written with one write(2) on an unbuffered descriptor, so records of
** concurrent threads never interleave and each is on disk when the call
** returns ("flushed per record").
*/
#include <errno.h>
#include <fcntl.h>
#include <md5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/intern.h"
#include "trace/json_py.h"
#include "trace/trace.h"

atomic_bool kn__trace_on;
static _Atomic int_least64_t trace_rank = -1;
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
  char *dir;          /* owned; NULL when off */
  char *path;         /* owned; NULL until the file exists */
  int fd;
  kn__intern strings; /* guarded by intern_lock */
  bool strings_live;
  char fake_ts[21];   /* test hook, "" = real clock */
  long fake_pid;
} st = {.fd = -1};

/* ---- settings ---------------------------------------------------------- */

static void reset_strings(void) {
  if (st.strings_live) kn__intern_fini(&st.strings);
  st.strings_live = false;
}

static void close_file(void) {
  if (st.fd >= 0) close(st.fd);  /* (st.path may outlive the fd: see write_failed) */
  st.fd = -1;
  free(st.path);
  free(st.dir);
  st.path = st.dir = NULL;
}

static kn_status mkdir_p(const char *dir);

/* The directory exists (created if needed) and can take a new file. */
static kn_status usable_dir(const char *dir) {
  kn_status s = mkdir_p(dir);
  if (s != KN_OK) return kn__error_context("kn_trace_enable");
  struct stat sb;
  int err = stat(dir, &sb) != 0 ? errno : !S_ISDIR(sb.st_mode) ? ENOTDIR
                                          : access(dir, W_OK | X_OK) != 0 ? errno : 0;
  if (err)
    return kn__error(KN_EIO, "kn_trace_enable: cannot use '%s' as the trace directory: %s", dir,
                     strerror(err));
  return KN_OK;
}

kn_status kn_trace_enable(const char *dir) {
  if (!dir || !*dir)
    return kn__error(KN_EINVAL, "kn_trace_enable: expected a directory, found %s",
                     dir ? "\"\"" : "NULL");
  kn_status us = usable_dir(dir);
  if (us != KN_OK) return us;
  char *copy = strdup(dir);
  if (!copy) return kn__oom();
  pthread_mutex_lock(&intern_lock);
  pthread_mutex_lock(&file_lock);
  close_file();
  reset_strings();
  st.dir = copy;
  atomic_store(&kn__trace_on, true);
  pthread_mutex_unlock(&file_lock);
  pthread_mutex_unlock(&intern_lock);
  return KN_OK;
}

void kn_trace_disable(void) {
  pthread_mutex_lock(&intern_lock);
  pthread_mutex_lock(&file_lock);
  atomic_store(&kn__trace_on, false);
  close_file();
  reset_strings();
  pthread_mutex_unlock(&file_lock);
  pthread_mutex_unlock(&intern_lock);
}

bool kn_trace_is_enabled(void) { return kn__trace_enabled(); }

char *kn_trace_file_path(void) {
  pthread_mutex_lock(&file_lock);
  char *p = st.path ? strdup(st.path) : NULL;
  pthread_mutex_unlock(&file_lock);
  return p;
}

void kn_trace_set_rank(int64_t rank) { atomic_store(&trace_rank, rank < 0 ? -1 : rank); }

void kn__trace_fake_header(const char *ts, long pid) {
  pthread_mutex_lock(&file_lock);
  snprintf(st.fake_ts, sizeof st.fake_ts, "%s", ts ? ts : "");
  st.fake_pid = pid;
  pthread_mutex_unlock(&file_lock);
}

kn_status kn__trace_init_from_env(void) {
  const char *dir = getenv("KILN_TRACE");
  kn_status s = dir && *dir ? kn_trace_enable(dir) : KN_OK;
  if (s != KN_OK) {
    fprintf(stderr, "kiln: KILN_TRACE: %s; no trace is written\n", kn_last_error());
    kn_clear_error();
  }
  return s;
}

__attribute__((constructor)) static void trace_from_env(void) {
  (void)kn__trace_init_from_env();
}

/* ---- the file ---------------------------------------------------------- */

static kn_status mkdir_p(const char *dir) {
  char *p = strdup(dir);
  if (!p) return kn__oom();
  for (char *s = p + 1;; s++) {
    char c = *s;
    if (c != '/' && c != '\0') continue;
    *s = '\0';
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      kn_status e = kn__error(KN_EIO, "cannot create the trace directory '%s': %s", p,
                              strerror(errno));
      free(p);
      return e;
    }
    *s = c;
    if (c == '\0') break;
  }
  free(p);
  return KN_OK;
}

static void random_suffix(char out[9]) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
  unsigned char r[8];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t x = (uint64_t)t.tv_nsec * 0x9E3779B97F4A7C15u ^ (uint64_t)getpid();
    for (int i = 0; i < 8; i++) r[i] = (unsigned char)(x >> (8 * i));
  }
  for (int i = 0; i < 8; i++) out[i] = alphabet[r[i] % (sizeof alphabet - 1)];
  out[8] = '\0';
}

/* Create <dir>/dedicated_log_kiln_trace_[rank_R_]XXXXXXXX.log exclusively. */
static kn_status create_file(void) {
  kn_status s = mkdir_p(st.dir);
  if (s) return s;
  int64_t rank = atomic_load(&trace_rank);
  kn__sb path = KN__SB_INIT;
  for (int tries = 0; tries < 100; tries++) {
    char rnd[9];
    random_suffix(rnd);
    kn__sb_clear(&path);
    kn__sb_printf(&path, "%s/dedicated_log_kiln_trace_", st.dir);
    if (rank >= 0) kn__sb_printf(&path, "rank_%lld_", (long long)rank);
    kn__sb_printf(&path, "%s.log", rnd);
    if (kn__sb_failed(&path)) break;
    st.fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (st.fd >= 0) {
      st.path = kn__sb_take(&path);
      return KN_OK;
    }
    if (errno != EEXIST) {
      s = kn__error(KN_EIO, "cannot create trace file '%s': %s", path.buf,
                    strerror(errno));
      kn__sb_fini(&path);
      return s;
    }
  }
  kn__sb_fini(&path);
  return kn__error(KN_EIO, "cannot create a trace file in '%s'", st.dir);
}

/* 0, or the errno of the failed write. */
static int write_all(const char *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(st.fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return k < 0 ? errno : EIO;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* A record that cannot be written in full (a full disk, a file size limit)
** is cut off the file, which then ends at the last complete record; tracing
** stops with one message on stderr. The file's path stays reported. */
static kn_status write_failed(off_t start, int err) {
  bool cut = start >= 0 && ftruncate(st.fd, start) == 0;
  kn_status s = kn__error(KN_EIO, "cannot write trace file '%s': %s; tracing stopped%s",
                          st.path, strerror(err),
                          cut ? " (the file ends at the last complete record)" : "");
  fprintf(stderr, "kiln: %s\n", kn_last_error());
  close(st.fd);
  st.fd = -1;
  free(st.dir);
  st.dir = NULL;
  atomic_store(&kn__trace_on, false);
  return s;
}

static kn_status emit(const kn__sb *rec) {
  kn_status s = KN_OK;
  pthread_mutex_lock(&file_lock);
  if (!st.dir) goto out; /* disabled meanwhile */
  if (st.fd < 0 && (s = create_file())) goto out;
  off_t start = lseek(st.fd, 0, SEEK_END); /* where this record begins (O_APPEND) */
  int err = write_all(rec->buf, rec->len);
  if (err) s = write_failed(start, err);
out:
  pthread_mutex_unlock(&file_lock);
  return s;
}

/* ---- record text --------------------------------------------------------- */

static void put_path(kn__sb *sb, const char *file) {
  if (!file || !*file) file = "kiln";
  const char *cut = NULL;
  for (const char *const *m = (const char *const[]){"/src/", "/tests/", "/tools/",
                                                     "/bench/", "/examples/", NULL};
       *m; m++) {
    const char *at = strstr(file, *m);
    if (at && (!cut || at > cut)) cut = at + 1;
  }
  if (cut) file = cut;
  while (*file == ' ' || *file == '/') file++;
  for (const char *c = *file ? file : "kiln"; *c; c++)
    kn__sb_putc(sb, (*c == ':' || (unsigned char)*c < 0x20) ? '_' : *c);
}

static void put_header(kn__sb *sb, const kn__trace_opts *o) {
  char ts[64];
  long pid;
  pthread_mutex_lock(&file_lock);
  bool fake = st.fake_ts[0] != '\0';
  if (fake) memcpy(ts, st.fake_ts, sizeof st.fake_ts);
  pid = st.fake_pid;
  pthread_mutex_unlock(&file_lock);
  if (!fake) {
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    localtime_r(&now.tv_sec, &tm);
    snprintf(ts, sizeof ts, "%02d%02d %02d:%02d:%02d.%06d", (tm.tm_mon + 1) % 100,
             tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100,
             (int)(now.tv_nsec / 1000000) * 1000);
    pid = (long)getpid();
  }
  kn__sb_printf(sb, "V%s %ld ", ts, pid);
  put_path(sb, o->file);
  kn__sb_printf(sb, ":%d] ", o->line);
}

static void put_id(kn__sb *sb, const char *key, int64_t v) {
  if (v >= 0) kn__sb_printf(sb, ", \"%s\": %lld", key, (long long)v);
}

static bool put_context(kn__sb *sb, const kn__trace_opts *o) {
  if (o->suppress_context) return true;
  put_id(sb, "rank", atomic_load(&trace_rank));
  const kn__compile_ctx *ctx = kn__compile_ctx_get();
  if (!o->compile_id && !ctx->active) {
    if (o->stack) {
      kn__sb_puts(sb, ", \"stack\": ");
      if (!kn__json_py_dump(sb, o->stack, KN__JSON_COMPACT)) return false;
    }
    return true;
  }
  kn_compile_id id = o->compile_id ? *o->compile_id : ctx->id;
  put_id(sb, "compiled_autograd_id", id.compiled_autograd_id);
  put_id(sb, "frame_id", id.frame_id);
  put_id(sb, "frame_compile_id", id.frame_compile_id);
  if (!o->compile_id) kn__sb_printf(sb, ", \"attempt\": %lld", (long long)ctx->attempt);
  return true;
}

static void put_payload(kn__sb *sb, const char *p, size_t n) {
  char md5[MD5_DIGEST_STRING_LENGTH];
  MD5Data((const uint8_t *)p, n, md5);
  kn__sb_printf(sb, ", \"has_payload\": \"%s\"}", md5);
  const char *end = p + n;
  for (;;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    kn__sb_puts(sb, "\n\t");
    kn__sb_putn(sb, p, (size_t)((nl ? nl : end) - p));
    if (!nl) break;
    p = nl + 1;
  }
}

static bool reserved(const char *e) {
  static const char *const names[] = {"rank", "compiled_autograd_id", "frame_id",
    "frame_compile_id", "attempt", "severity", "timestamp", "pathname", "thread",
    "has_payload", "stack", "lineno", "payload_filename", NULL};
  for (const char *const *p = names; *p; p++)
    if (strcmp(*p, e) == 0) return true;
  return false;
}

const kn__trace_opts *kn__trace_at(kn__trace_opts *buf, const kn__trace_opts *o,
                                   const char *file, int line) {
  if (o && o->file) return o;
  *buf = o ? *o : (kn__trace_opts){0};
  buf->file = file;
  buf->line = line;
  return buf;
}

kn_status kn__trace_structured_at(const char *file, int line, const char *event,
                                  json_t *metadata, const char *payload, size_t payload_len,
                                  const kn__trace_opts *opts) {
  if (!kn__trace_enabled()) { json_decref(metadata); return KN_OK; }
  kn__trace_opts ob;
  const kn__trace_opts *o = kn__trace_at(&ob, opts, file, line);
  if (!event || !*event || reserved(event)) {
    json_decref(metadata);
    return kn__error(KN_EINVAL, "trace event name: expected a non-reserved name, "
                     "found \"%s\"", event ? event : "(null)");
  }
  if (payload && payload_len == SIZE_MAX) payload_len = strlen(payload);
  kn__sb sb = KN__SB_INIT;
  put_header(&sb, o);
  kn__sb_putc(&sb, '{');
  bool ok = kn__json_py_string(&sb, event, strlen(event));
  kn__sb_puts(&sb, ": ");
  json_t *empty = metadata ? NULL : json_object();
  ok = ok && kn__json_py_dump(&sb, metadata ? metadata : empty, KN__JSON_COMPACT);
  json_decref(empty);
  json_decref(metadata);
  ok = ok && put_context(&sb, o);
  if (payload) put_payload(&sb, payload, payload_len);
  else kn__sb_putc(&sb, '}');
  kn__sb_putc(&sb, '\n');
  kn_status s = kn__sb_failed(&sb) ? kn__oom()
                : !ok ? kn__error(KN_EINVAL, "trace event \"%s\": metadata holds a "
                                  "value JSON cannot carry", event)
                      : emit(&sb);
  kn__sb_fini(&sb);
  return s;
}

kn_status kn__trace_structured_lazy_at(const char *file, int line, const char *event,
                                       kn__trace_build_fn build, void *ud,
                                       const kn__trace_opts *opts) {
  if (!kn__trace_enabled()) return KN_OK;
  kn__trace_opts ob;
  opts = kn__trace_at(&ob, opts, file, line);
  json_t *meta = NULL;
  kn__sb payload = KN__SB_INIT;
  bool has_payload = false;
  kn_status s = build(ud, &meta, &payload, &has_payload);
  if (s == KN_OK && kn__sb_failed(&payload)) s = kn__oom();
  if (s == KN_OK)
    s = kn__trace_structured(event, meta, has_payload ? kn__sb_cstr(&payload) : NULL,
                             payload.len, opts);
  else
    json_decref(meta);
  kn__sb_fini(&payload);
  return s;
}

/* ---- interning ------------------------------------------------------------ */

int64_t kn__trace_intern(const char *s) {
  if (!s || !kn__trace_enabled()) return -1;
  json_t *str = json_string(s); /* also checks UTF-8 */
  if (!str) return -1;
  int64_t out = -1;
  pthread_mutex_lock(&intern_lock);
  if (!st.strings_live) {
    kn__intern_init(&st.strings);
    st.strings_live = true;
  }
  uint32_t id;
  int is_new = 0;
  if (kn__intern_add(&st.strings, s, &id, &is_new)) {
    out = id;
    if (is_new) {
      kn__trace_opts o = {.file = __FILE__, .line = __LINE__, .suppress_context = true};
      kn__trace_structured("str", json_pack("[Oi]", str, (json_int_t)id), NULL, 0, &o);
    }
  }
  pthread_mutex_unlock(&intern_lock);
  json_decref(str);
  return out;
}
