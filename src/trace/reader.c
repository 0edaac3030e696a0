/*
** trace/reader.c: the strict structured-trace reader (contract in reader.h).
**
** One pass, streaming: lines come from a kn__linesrc (no allocation per
** line); a record is a header line, its metadata parsed once by jansson,
** then (only when has_payload is present) the following tab lines, joined
** into one reused buffer and hashed with MD5. Empty lines are skipped
** everywhere, as tlparse does. A defect costs the record it is in: the
** reader reports it and resumes at the next line that is not a payload line.
*/
#include <errno.h>
#include <md5.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "trace/linesrc.h"
#include "trace/reader_int.h"

struct kn__trace_reader {
  kn__linesrc src;
  FILE *own;             /* opened by us, closed at close */
  char *name;            /* for messages */
  kn__trace_reader_opts opts;
  kn__trace_record rec;
  json_t *meta;          /* metadata of rec; owned */
  char ts[21];
  kn__sb path, payload, msg;
  kn__sb metatext;       /* the metadata's JSON text as read */
  kn__hashmap strings;   /* interned id -> owned copy */
  uint64_t records, defects;
  int64_t max_string_id;
  kn_status stuck;       /* set once strict mode stopped */
};

static kn__trace_reader *make(FILE *f, FILE *own, const char *name,
                              const kn__trace_reader_opts *opts) {
  kn__trace_reader *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  if (opts) r->opts = *opts;
  r->own = own;
  r->max_string_id = -1;
  r->name = strdup(name ? name : "<stream>");
  kn__hm_init(&r->strings, false);
  size_t max_line = r->opts.max_record_bytes;
  if (!r->name || !kn__linesrc_init(&r->src, f, max_line)) {
    r->own = NULL;
    kn__trace_reader_close(r);
    return NULL;
  }
  return r;
}

kn__trace_reader *kn__trace_reader_open_stream(FILE *f, const char *name,
                                               const kn__trace_reader_opts *opts) {
  if (!f) {
    kn__error(KN_EINVAL, "trace reader: expected an open stream, found NULL");
    return NULL;
  }
  kn__trace_reader *r = make(f, NULL, name, opts);
  if (!r) kn__oom();
  return r;
}

kn__trace_reader *kn__trace_reader_open(const char *path,
                                        const kn__trace_reader_opts *opts) {
  if (!path) {
    kn__error(KN_EINVAL, "trace reader: expected a file path, found NULL");
    return NULL;
  }
  if (strcmp(path, "-") == 0) return kn__trace_reader_open_stream(stdin, "<stdin>", opts);
  FILE *f = fopen(path, "rb");
  if (!f) {
    kn__error(KN_EIO, "cannot open trace file '%s': %s", path, strerror(errno));
    return NULL;
  }
  kn__trace_reader *r = make(f, f, path, opts);
  if (!r) {
    fclose(f);
    kn__oom();
  }
  return r;
}

void kn__trace_reader_close(kn__trace_reader *r) {
  if (!r) return;
  const kn__hm_slot *slot;
  for (size_t i = 0; kn__hm_next(&r->strings, &i, &slot);) free(slot->val);
  kn__hm_fini(&r->strings);
  json_decref(r->meta);
  kn__linesrc_fini(&r->src);
  kn__sb_fini(&r->path);
  kn__sb_fini(&r->payload);
  kn__sb_fini(&r->msg);
  kn__sb_fini(&r->metatext);
  if (r->own) fclose(r->own);
  free(r->name);
  free(r);
}

const char *kn__trace_reader_string(const kn__trace_reader *r, int64_t id) {
  if (!r || id < 0) return NULL;
  return kn__hm_get_u64(&r->strings, (uint64_t)id, NULL);
}

int64_t kn__trace_reader_max_string_id(const kn__trace_reader *r) {
  return r->max_string_id;
}

uint64_t kn__trace_reader_defects(const kn__trace_reader *r) { return r->defects; }
uint64_t kn__trace_reader_records(const kn__trace_reader *r) { return r->records; }

/* Report the defect whose message is in r->msg. KN_OK to go on, KN_EPARSE
** when strict mode stops here. */
static kn_status defect(kn__trace_reader *r, uint64_t line) {
  if (kn__sb_failed(&r->msg)) return r->stuck = kn__oom();
  r->defects++;
  kn__trace_defect d = {line, kn__sb_cstr(&r->msg)};
  if (r->opts.on_defect) r->opts.on_defect(r->opts.ud, &d);
  if (!r->opts.strict) return KN_OK;
  return r->stuck = kn__error(KN_EPARSE, "%s:%llu: %s", r->name,
                              (unsigned long long)line, d.message);
}

static kn_status defectf(kn__trace_reader *r, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kn_status defectf(kn__trace_reader *r, uint64_t line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kn__sb_clear(&r->msg);
  kn__sb_vprintf(&r->msg, fmt, ap);
  va_end(ap);
  return defect(r, line);
}

static kn_status io_error(kn__trace_reader *r) {
  if (ferror(r->src.f))
    return r->stuck = kn__error(KN_EIO, "reading trace '%s': %s", r->name,
                                strerror(errno));
  return r->stuck = kn__oom();
}

/* Peek the next non-empty line: 1, 0 at end, -1 on error. */
static int peek(kn__trace_reader *r) {
  for (;;) {
    int k = kn__linesrc_peek(&r->src);
    if (k != 1 || r->src.len > 0 || r->src.oversized) return k;
    kn__linesrc_consume(&r->src);
  }
}

/* Skip the payload lines of a record that was rejected. */
static int skip_payload(kn__trace_reader *r) {
  int k;
  while ((k = peek(r)) == 1 && !r->src.oversized && r->src.line[0] == '\t')
    kn__linesrc_consume(&r->src);
  return k < 0 ? -1 : 0;
}

/* Collect the payload lines after a header with has_payload. *bad is set
** when a defect was reported (the record is then dropped). */
static kn_status read_payload(kn__trace_reader *r, size_t header_len, bool *bad) {
  kn__trace_record *rec = &r->rec;
  size_t max = r->opts.max_record_bytes;
  kn__sb_clear(&r->payload);
  rec->payload_lines = 0;
  int k;
  while ((k = peek(r)) == 1) {
    uint64_t line = r->src.lineno + 1;
    if (r->src.oversized) {
      kn__linesrc_consume(&r->src);
      *bad = true;
      kn_status st = defectf(r, line, "line longer than max_record_bytes (%zu)", max);
      if (st) return st;
      continue;
    }
    if (r->src.line[0] != '\t') break;
    if (!*bad && max && header_len + r->payload.len + r->src.len > max) {
      *bad = true;
      kn_status st = defectf(r, rec->line, "record larger than max_record_bytes "
                             "(%zu)", max);
      if (st) return st;
    }
    if (!*bad) {
      if (rec->payload_lines) kn__sb_putc(&r->payload, '\n');
      kn__sb_putn(&r->payload, r->src.line + 1, r->src.len - 1);
    }
    rec->payload_lines++;
    kn__linesrc_consume(&r->src);
  }
  if (k < 0) return io_error(r);
  if (kn__sb_failed(&r->payload)) return r->stuck = kn__oom();
  return KN_OK;
}

static kn_status check_md5(kn__trace_reader *r, const char *want) {
  char got[MD5_DIGEST_STRING_LENGTH];
  kn__trace_record *rec = &r->rec;
  MD5Data((const uint8_t *)rec->payload, rec->payload_len, got);
  rec->payload_md5_ok = strcmp(got, want) == 0;
  if (rec->payload_md5_ok) return KN_OK;
  return defectf(r, rec->line, "payload MD5 mismatch: has_payload is %s but the %llu "
                 "payload line(s) hash to %s", want,
                 (unsigned long long)rec->payload_lines, got);
}

/* A "str" record: remember the string under its id. */
static kn_status intern(kn__trace_reader *r) {
  json_t *v = r->rec.value;
  const char *s = json_string_value(json_array_get(v, 0));
  uint64_t id = (uint64_t)json_integer_value(json_array_get(v, 1));
  char *old = kn__hm_get_u64(&r->strings, id, NULL);
  if (old && strcmp(old, s) == 0) return KN_OK;
  char *copy = strdup(s);
  if (!copy || !kn__hm_put_u64(&r->strings, id, copy)) {
    free(copy);
    return r->stuck = kn__oom();
  }
  free(old);
  if ((int64_t)id > r->max_string_id) r->max_string_id = (int64_t)id;
  if (old)
    return defectf(r, r->rec.line, "string id %llu redefined with a different "
                   "string", (unsigned long long)id);
  return KN_OK;
}

/* Header fields into the record (copied out of the line buffer). */
static bool take_header(kn__trace_reader *r, const kn__trace_hdr *h, uint64_t line) {
  kn__trace_record *rec = &r->rec;
  memset(rec, 0, sizeof *rec);
  rec->line = line;
  rec->level = h->level;
  memcpy(r->ts, h->ts, 20);
  r->ts[20] = '\0';
  rec->timestamp = r->ts;
  rec->thread = h->thread;
  kn__sb_clear(&r->path);
  kn__sb_putn(&r->path, h->path, h->path_len);
  rec->src_file = kn__sb_cstr(&r->path);
  rec->src_line = h->src_line;
  rec->payload = "";
  rec->payload_md5_ok = true;
  return !kn__sb_failed(&r->path);
}

/* Parse the peeked header line and its metadata. *bad on a defect. */
static kn_status read_header(kn__trace_reader *r, bool *bad, char md5[33]) {
  uint64_t line = r->src.lineno + 1;
  kn__trace_hdr h;
  if (!kn__trace_hdr_parse(r->src.line, r->src.len, &h, &r->msg)) {
    *bad = true;
    return defect(r, line);
  }
  if (!take_header(r, &h, line)) return r->stuck = kn__oom();
  json_error_t jerr;
  r->meta = json_loadb(h.json, h.json_len, JSON_REJECT_DUPLICATES, &jerr);
  if (!r->meta || !json_is_object(r->meta)) {
    *bad = true;
    if (r->meta)
      return defectf(r, line, "metadata: expected a JSON object, found another "
                     "JSON value");
    return defectf(r, line, "metadata is not valid JSON (column %d: %s)",
                   jerr.column + (int)(h.json - r->src.line), jerr.text);
  }
  r->rec.metadata = r->meta;
  kn__sb_clear(&r->metatext);
  kn__sb_putn(&r->metatext, h.json, h.json_len);
  if (kn__sb_failed(&r->metatext)) return r->stuck = kn__oom();
  r->rec.metadata_text = kn__sb_cstr(&r->metatext);
  r->rec.metadata_len = r->metatext.len;
  if (!kn__trace_meta_check(r->meta, &r->strings, &r->rec, md5, &r->msg)) {
    *bad = true;
    return defect(r, line);
  }
  return KN_OK;
}

/* The record starting at the peeked line. *ok when it is to be returned. */
static kn_status read_record(kn__trace_reader *r, bool *ok) {
  char md5[33];
  bool bad = false;
  size_t header_len = r->src.len;
  kn_status st = read_header(r, &bad, md5);
  kn__linesrc_consume(&r->src);
  if (st || bad) {
    if (!st && skip_payload(r) < 0) return io_error(r);
    return st;
  }
  kn__trace_record *rec = &r->rec;
  if (rec->has_payload) {
    if ((st = read_payload(r, header_len, &bad)) || bad) return st;
    rec->payload = kn__sb_cstr(&r->payload);
    rec->payload_len = r->payload.len;
    if ((st = check_md5(r, md5))) return st;
  } else if (peek(r) == 1 && !r->src.oversized && r->src.line[0] == '\t') {
    st = defectf(r, r->src.lineno + 1, "payload line after a record without "
                 "has_payload (record at line %llu)", (unsigned long long)rec->line);
    if (st || skip_payload(r) < 0) return st ? st : io_error(r);
  }
  if (strcmp(rec->event, "str") == 0 && (st = intern(r))) return st;
  *ok = true;
  return KN_OK;
}

kn_status kn__trace_reader_next(kn__trace_reader *r, const kn__trace_record **out) {
  *out = NULL;
  if (r->stuck)
    return kn__error(r->stuck, "%s: reading stopped after an earlier error",
                     r->name);
  json_decref(r->meta);
  r->meta = NULL;
  for (;;) {
    int k = peek(r);
    if (k < 0) return io_error(r);
    if (k == 0) return KN_OK;
    if (r->src.oversized) {
      uint64_t line = r->src.lineno + 1;
      kn__linesrc_consume(&r->src);
      kn_status st = defectf(r, line, "line longer than max_record_bytes (%zu)",
                             r->opts.max_record_bytes);
      if (st) return st;
      if (skip_payload(r) < 0) return io_error(r);
      continue;
    }
    bool ok = false;
    kn_status st = read_record(r, &ok);
    if (st) return st;
    if (ok) {
      r->records++;
      *out = &r->rec;
      return KN_OK;
    }
    json_decref(r->meta);
    r->meta = NULL;
  }
}
