/*
** trace/reader_meta.c: the header grammar and metadata checks of the trace
** reader (spec §1.2, §1.3, §1.6, §1.7).
**
** Header: LEVEL MMDD HH:MM:SS.uuuuuu SP THREAD SP PATH ":" LINE "]" SP JSON.
** PATH is everything up to the first ':' (so it can never contain one). The
** metadata's first key is the event name; the context keys that follow are
** typed (ints or null), has_payload is 32 lowercase hex digits, and stack
** frames are {line, name, filename: known interned id[, loc]}.
*/
#include <string.h>

#include "trace/reader_int.h"

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decimal digits at l[*i]; at least one, value must fit in int64. */
static bool digits(const char *l, size_t n, size_t *i, int64_t *out) {
  size_t k = *i;
  int64_t v = 0;
  if (k >= n || !is_digit(l[k])) return false;
  for (; k < n && is_digit(l[k]); k++) {
    if (v > (INT64_MAX - 9) / 10) return false;
    v = v * 10 + (l[k] - '0');
  }
  *i = k;
  *out = v;
  return true;
}

static bool fail(kn__sb *err, const char *what, const char *l, size_t n,
                 size_t at) {
  size_t rest = at < n ? n - at : 0;
  kn__sb_clear(err);
  kn__sb_printf(err, "bad record header: expected %s at column %zu, found ", what,
                at + 1);
  if (rest == 0)
    kn__sb_puts(err, "end of line");
  else
    kn__sb_printf(err, "\"%.*s\"%s", (int)(rest < 40 ? rest : 40), l + at,
                  rest > 40 ? "..." : "");
  return false;
}

static bool timestamp(const char *l, size_t n, size_t i) {
  static const char pat[] = "dddd dd:dd:dd.dddddd";
  if (n - i < sizeof pat - 1) return false;
  for (size_t k = 0; k < sizeof pat - 1; k++) {
    bool ok = pat[k] == 'd' ? is_digit(l[i + k]) : l[i + k] == pat[k];
    if (!ok) return false;
  }
  return true;
}

bool kn__trace_hdr_parse(const char *l, size_t n, kn__trace_hdr *h, kn__sb *err) {
  size_t i = 0;
  if (n > 0 && l[0] == '\t')
    return fail(err, "a header line (this is a payload line outside any record "
                "with has_payload)", l, n, 0);
  if (n > 0 && l[0] == '[') {
    const char *e = memchr(l, ']', n);
    if (e && (size_t)(e - l) + 1 < n && e[1] == ':') i = (size_t)(e - l) + 2;
  }
  if (i >= n || !strchr("VIWEC", l[i]) || l[i] == '\0')
    return fail(err, "a level letter V, I, W, E or C", l, n, i);
  h->level = l[i++];
  if (!timestamp(l, n, i))
    return fail(err, "a timestamp MMDD HH:MM:SS.uuuuuu", l, n, i);
  h->ts = l + i;
  i += 20;
  if (i >= n || l[i++] != ' ') return fail(err, "a space", l, n, i - 1);
  if (!digits(l, n, &i, &h->thread)) return fail(err, "a process or thread id", l, n, i);
  if (i >= n || l[i++] != ' ') return fail(err, "a space", l, n, i - 1);
  size_t p = i;
  while (i < n && l[i] != ':') i++;
  if (i == p || l[p] == ' ' || i >= n)
    return fail(err, "a source path followed by ':'", l, n, p);
  h->path = l + p;
  h->path_len = i - p;
  i++;
  if (!digits(l, n, &i, &h->src_line)) return fail(err, "a line number", l, n, i);
  if (n - i < 3 || l[i] != ']' || l[i + 1] != ' ')
    return fail(err, "\"] \" followed by JSON metadata", l, n, i);
  h->json = l + i + 2;
  h->json_len = n - i - 2;
  return true;
}

/* ------------------------------------------------------------------------ */

static bool mfail(kn__sb *err, const char *fmt, const char *a, const char *b) {
  kn__sb_clear(err);
  kn__sb_printf(err, fmt, a, b);
  return false;
}

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real";
  case JSON_TRUE: case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

static bool is_reserved(const char *k) {
  static const char *const names[] = {"rank", "compiled_autograd_id", "frame_id",
    "frame_compile_id", "attempt", "severity", "timestamp", "pathname",
    "thread", "has_payload", "stack", NULL};
  for (const char *const *p = names; *p; p++)
    if (strcmp(*p, k) == 0) return true;
  return false;
}

/* A context id: integer in [0, UINT32_MAX] or null (-1). */
static bool ctx_int(const char *key, json_t *v, int64_t *out, kn__sb *err) {
  if (json_is_null(v)) { *out = -1; return true; }
  if (json_is_integer(v) && json_integer_value(v) >= 0 &&
      json_integer_value(v) <= (json_int_t)UINT32_MAX) {
    *out = json_integer_value(v);
    return true;
  }
  return mfail(err, "metadata \"%s\": expected a non-negative 32-bit integer or "
               "null, found %s", key, json_is_integer(v) ? "an out-of-range integer"
                                                         : type_name(v));
}

static bool md5_hex(json_t *v, char md5[33], kn__sb *err) {
  const char *s = json_string_value(v);
  bool ok = s && json_string_length(v) == 32;
  for (size_t i = 0; ok && i < 32; i++)
    ok = is_digit(s[i]) || (s[i] >= 'a' && s[i] <= 'f');
  if (!ok)
    return mfail(err, "metadata \"has_payload\": expected 32 lowercase hex digits, "
                 "found %s%s", json_is_string(v) ? s : type_name(v), "");
  memcpy(md5, s, 33);
  return true;
}

static bool frame_ok(json_t *f, const kn__hashmap *strings, size_t i,
                     const char *key, kn__sb *err) {
  json_t *line = json_object_get(f, "line"), *name = json_object_get(f, "name");
  json_t *file = json_object_get(f, "filename"), *loc = json_object_get(f, "loc");
  kn__sb_clear(err);
  if (!json_is_object(f) || !json_is_integer(line) || !json_is_string(name) ||
      !json_is_integer(file) || (loc && !json_is_string(loc) && !json_is_null(loc))) {
    kn__sb_printf(err, "\"%s\" frame %zu: expected {\"line\": int, \"name\": str, "
                  "\"filename\": int[, \"loc\": str]}", key, i);
    return false;
  }
  bool found = false;
  json_int_t id = json_integer_value(file);
  if (id >= 0) kn__hm_get_u64(strings, (uint64_t)id, &found);
  if (!found) {
    kn__sb_printf(err, "\"%s\" frame %zu: filename id %lld was not defined by an "
                  "earlier \"str\" record", key, i, (long long)id);
    return false;
  }
  return true;
}

static bool stack_ok(json_t *st, const kn__hashmap *strings, const char *key,
                     kn__sb *err) {
  if (!st) return true;
  if (!json_is_array(st))
    return mfail(err, "\"%s\": expected an array of frames, found %s", key,
                 type_name(st));
  for (size_t i = 0; i < json_array_size(st); i++)
    if (!frame_ok(json_array_get(st, i), strings, i, key, err)) return false;
  return true;
}

static bool str_value_ok(json_t *v, kn__sb *err) {
  json_t *id = json_array_get(v, 1);
  if (json_is_array(v) && json_array_size(v) == 2 &&
      json_is_string(json_array_get(v, 0)) && json_is_integer(id) &&
      json_integer_value(id) >= 0 && json_integer_value(id) <= (json_int_t)UINT32_MAX)
    return true;
  return mfail(err, "\"str\" record: expected [string, id] with a non-negative "
               "32-bit id, found %s%s", type_name(v), "");
}

static bool value_ok(kn__trace_record *rec, const kn__hashmap *strings,
                     kn__sb *err) {
  if (strcmp(rec->event, "str") == 0) return str_value_ok(rec->value, err);
  if (!json_is_object(rec->value)) return true;
  return stack_ok(json_object_get(rec->value, "stack"), strings, "stack", err) &&
         stack_ok(json_object_get(rec->value, "user_stack"), strings,
                  "user_stack", err);
}

static bool ctx_key(const char *k, json_t *v, kn__trace_record *rec,
                    const kn__hashmap *strings, char md5[33], kn__sb *err) {
  if (strcmp(k, "rank") == 0) return ctx_int(k, v, &rec->rank, err);
  if (strcmp(k, "compiled_autograd_id") == 0)
    return ctx_int(k, v, &rec->compile_id.compiled_autograd_id, err);
  if (strcmp(k, "frame_id") == 0) return ctx_int(k, v, &rec->compile_id.frame_id, err);
  if (strcmp(k, "frame_compile_id") == 0)
    return ctx_int(k, v, &rec->compile_id.frame_compile_id, err);
  if (strcmp(k, "attempt") == 0) return ctx_int(k, v, &rec->attempt, err);
  if (strcmp(k, "has_payload") == 0) {
    rec->has_payload = true;
    return md5_hex(v, md5, err);
  }
  if (strcmp(k, "stack") == 0) return stack_ok(v, strings, "stack", err);
  return true; /* unknown keys are kept, never a defect (spec §1.9) */
}

bool kn__trace_meta_check(json_t *meta, const kn__hashmap *strings,
                          kn__trace_record *rec, char md5[33], kn__sb *err) {
  md5[0] = '\0';
  rec->rank = rec->attempt = -1;
  rec->compile_id = KN_COMPILE_ID_NONE;
  rec->has_payload = false;
  void *it = json_object_iter(meta);
  if (!it) return mfail(err, "metadata: expected an object whose first key is the "
                        "event name, found an empty object%s%s", "", "");
  rec->event = json_object_iter_key(it);
  rec->value = json_object_iter_value(it);
  if (is_reserved(rec->event))
    return mfail(err, "metadata: expected the event name as first key, found "
                 "reserved key \"%s\"%s", rec->event, "");
  for (it = json_object_iter_next(meta, it); it; it = json_object_iter_next(meta, it))
    if (!ctx_key(json_object_iter_key(it), json_object_iter_value(it), rec,
                 strings, md5, err))
      return false;
  rec->has_compile_id = rec->compile_id.frame_id >= 0 ||
                        rec->compile_id.frame_compile_id >= 0 ||
                        rec->compile_id.compiled_autograd_id >= 0;
  return value_ok(rec, strings, err);
}
