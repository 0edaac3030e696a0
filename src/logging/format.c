/*
** logging/format.c: turning a record into text.
**
** Default (glog style, one prefix per line of the message):
**   {[rankR]:}{L}{MMDD HH:MM:SS}.{usec} {pid} {path}:{line}]{ [cid]}{ [__art]} {text}
** L is V/I/W/E/C for DEBUG..CRITICAL. path is relative to kiln's source root
** ("src/dynamo/guards.c"), or the basename for files outside it. The
** message is followed by the "Traceback" and "Stack" blocks when present.
** Raw artifacts print the bare message; KILN_LOGS_FORMAT replaces all of
** this with a Python %-style format over a fixed set of fields.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "logging/log_int.h"

const char *kn__log_basename(const char *file) {
  const char *slash = strrchr(file, '/');
  return slash ? slash + 1 : file;
}

/* kiln's source root is this file's path minus "src/logging/format.c". */
const char *kn__log_display_path(const char *file) {
  static const char self[] = __FILE__;
  static const char tail[] = "src/logging/format.c";
  size_t n = strlen(self), t = strlen(tail);
  if (n >= t && !strcmp(self + n - t, tail)) {
    size_t root = n - t;
    if (!strncmp(file, self, root) && strlen(file) > root) return file + root;
  }
  return kn__log_basename(file);
}

static const char *level_name(int level, char *buf, size_t n) {
  switch (level) {
  case KN_DEBUG: return "DEBUG";
  case KN_INFO: return "INFO";
  case KN_WARNING: return "WARNING";
  case KN_ERROR: return "ERROR";
  case KN_CRITICAL: return "CRITICAL";
  case KN_NOTSET: return "NOTSET";
  default: snprintf(buf, n, "Level %d", level); return buf;
  }
}

/* The message with its Traceback / Stack blocks, each on a new line. */
static void body(const kn_log_record *r, kn__sb *sb) {
  kn__sb_puts(sb, r->message ? r->message : "");
  const char *blocks[2] = {r->exc_text, r->stack_text};
  for (int i = 0; i < 2; i++) {
    if (!blocks[i]) continue;
    if (sb->len == 0 || sb->buf[sb->len - 1] != '\n') kn__sb_putc(sb, '\n');
    kn__sb_puts(sb, blocks[i]);
  }
}

static void glog_prefix(const kn_log_record *r, kn__sb *sb) {
  char lv[32];
  if (r->rank >= 0) kn__sb_printf(sb, "[rank%d]:", r->rank);
  switch (r->level) {
  case KN_DEBUG: kn__sb_putc(sb, 'V'); break;
  case KN_INFO: kn__sb_putc(sb, 'I'); break;
  case KN_WARNING: kn__sb_putc(sb, 'W'); break;
  case KN_ERROR: kn__sb_putc(sb, 'E'); break;
  case KN_CRITICAL: kn__sb_putc(sb, 'C'); break;
  default: kn__sb_puts(sb, level_name(r->level, lv, sizeof lv));
  }
  time_t secs = (time_t)(r->created_us / 1000000);
  struct tm tm;
  char when[32];
  localtime_r(&secs, &tm);
  strftime(when, sizeof when, "%m%d %H:%M:%S", &tm);
  kn__sb_printf(sb, "%s.%06d %d %s:%d]", when, (int)(r->created_us % 1000000), r->pid,
                kn__log_display_path(r->pathname ? r->pathname : "?"), r->lineno);
  if (r->compile_id) kn__sb_printf(sb, " [%s]", r->compile_id);
  if (r->artifact) kn__sb_printf(sb, " [__%s]", r->artifact);
}

static void format_glog(const kn_log_record *r, kn__sb *out) {
  kn__sb prefix = KN__SB_INIT, text = KN__SB_INIT;
  glog_prefix(r, &prefix);
  body(r, &text);
  const char *p = kn__sb_cstr(&text);
  for (;;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    kn__sb_putn(out, kn__sb_cstr(&prefix), prefix.len);
    kn__sb_putc(out, ' ');
    kn__sb_putn(out, p, n);
    if (!nl) break;
    kn__sb_putc(out, '\n');
    p = nl + 1;
  }
  if (kn__sb_failed(&prefix) || kn__sb_failed(&text)) out->oom = true;
  kn__sb_fini(&prefix);
  kn__sb_fini(&text);
}

/* ---- KILN_LOGS_FORMAT: %(field)[flags][width][.prec]conv ------------------ */

static const char *const fields[] = {"levelname", "message", "pathname", "levelno",
                                     "lineno", "filename", "name"};
#define NFIELDS ((int)(sizeof fields / sizeof fields[0]))

typedef struct spec {
  int field;      /* index into fields */
  char conv[24];  /* printf conversion, e.g. "%-8s" */
  size_t len;     /* bytes of the format consumed */
} spec;

/* Widths and precisions above this are refused: a line is at most a few
** kilobytes, never gigabytes of padding. */
#define KN__FORMAT_MAX_WIDTH 1024

/* The number of digits at p, and their value (capped) in *v. */
static size_t digits(const char *p, long *v) {
  size_t n = strspn(p, "0123456789");
  *v = 0;
  for (size_t i = 0; i < n; i++) *v = *v > KN__FORMAT_MAX_WIDTH ? *v : *v * 10 + (p[i] - '0');
  return n;
}

/* flags, width, precision and conversion after "%(field)"; false with a
** message if bad. */
static bool parse_conv(const char *p, spec *sp, const char *f, char *err, size_t errn) {
  long width = 0, prec = 0;
  size_t mods = strspn(p, "-#0 +");
  mods += digits(p + mods, &width);
  if (p[mods] == '.') mods += 1 + digits(p + mods + 1, &prec);
  if (width > KN__FORMAT_MAX_WIDTH || prec > KN__FORMAT_MAX_WIDTH) {
    snprintf(err, errn, "width or precision larger than %d at \"%.20s\"", KN__FORMAT_MAX_WIDTH,
             f);
    return false;
  }
  char c = p[mods];
  bool numeric = sp->field == 3 || sp->field == 4;
  if (!c || !strchr("sdir", c) || ((c == 'd' || c == 'i') && !numeric) || mods > 16) {
    snprintf(err, errn, "bad conversion for field '%s' at \"%.20s\"", fields[sp->field], f);
    return false;
  }
  snprintf(sp->conv, sizeof sp->conv, "%%%.*s%c", (int)mods, p, c == 'r' ? 's' : c);
  sp->len = (size_t)(p + mods + 1 - f);
  return true;
}

/* Parse a conversion at f ("%(name)-8s"); false with a message if bad. */
static bool parse_spec(const char *f, spec *sp, char *err, size_t errn) {
  const char *close = f[1] == '(' ? strchr(f + 2, ')') : NULL;
  if (!close) {
    snprintf(err, errn, "expected \"%%(field)s\" or \"%%%%\" at \"%.20s\"%s", f,
             f[1] ? "" : " (the format ends with a lone '%')");
    return false;
  }
  size_t klen = (size_t)(close - f - 2);
  sp->field = -1;
  for (int i = 0; i < NFIELDS; i++)
    if (strlen(fields[i]) == klen && !strncmp(fields[i], f + 2, klen)) sp->field = i;
  if (sp->field < 0) {
    snprintf(err, errn, "unknown field '%.*s'", (int)klen, f + 2);
    return false;
  }
  return parse_conv(close + 1, sp, f, err, errn);
}

kn_status kn__log_check_format(const char *fmt) {
  char err[160];
  for (const char *p = fmt; *p; p++) {
    if (*p != '%') continue;
    if (p[1] == '%') { p++; continue; }
    spec sp;
    if (!parse_spec(p, &sp, err, sizeof err))
      return kn__error(KN_EINVAL, "KILN_LOGS_FORMAT \"%s\": %s; valid fields are levelname, "
                       "message, pathname, levelno, lineno, filename and name", fmt, err);
    p += sp.len - 1;
  }
  return KN_OK;
}

static void put_field(const kn_log_record *r, const spec *sp, kn__sb *out) {
  char lv[32], num[32];
  const char *s = NULL;
  int v = 0;
  switch (sp->field) {
  case 0: s = level_name(r->level, lv, sizeof lv); break;
  case 1: s = r->message ? r->message : ""; break;
  case 2: s = r->pathname ? r->pathname : ""; break;
  case 3: v = r->level; break;
  case 4: v = r->lineno; break;
  case 5: s = r->filename ? r->filename : ""; break;
  default: s = r->name ? r->name : ""; break;
  }
  char conv = sp->conv[strlen(sp->conv) - 1];
  if (!s && conv == 's') {
    snprintf(num, sizeof num, "%d", v);
    s = num;
  }
  if (s) kn__sb_printf(out, sp->conv, s);
  else kn__sb_printf(out, sp->conv, v);
}

static void format_custom(const kn_log_record *r, const char *fmt, kn__sb *out) {
  char err[160];
  for (const char *p = fmt; *p; p++) {
    spec sp;
    if (*p != '%') kn__sb_putc(out, *p);
    else if (p[1] == '%') kn__sb_putc(out, '%'), p++;
    else if (parse_spec(p, &sp, err, sizeof err)) put_field(r, &sp, out), p += sp.len - 1;
    else kn__sb_putc(out, *p); /* unreachable: formats are checked when set */
  }
  kn_log_record bare = *r;
  bare.message = "";
  kn__sb blocks = KN__SB_INIT;
  if (r->exc_text || r->stack_text) {
    kn__sb_puts(&blocks, kn__sb_cstr(out));
    body(&bare, &blocks);
    kn__sb_clear(out);
    kn__sb_putn(out, kn__sb_cstr(&blocks), blocks.len);
  }
  kn__sb_fini(&blocks);
}

void kn__log_format(const kn_log_record *r, kn__sb *out) {
  if (kn__logs.format) format_custom(r, kn__logs.format, out);
  else if (r->raw) body(r, out);
  else format_glog(r, out);
}

char *kn_log_format_record(const kn_log_record *rec) {
  if (!rec) {
    kn__error(KN_EINVAL, "kn_log_format_record: expected a record, got NULL");
    return NULL;
  }
  kn__log_ensure_init();
  kn__sb sb = KN__SB_INIT;
  pthread_mutex_lock(&kn__logs.lock);
  kn__log_format(rec, &sb);
  pthread_mutex_unlock(&kn__logs.lock);
  return kn__sb_take(&sb);
}
