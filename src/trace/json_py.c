/*
** trace/json_py.c: a JSON writer byte-compatible with Python's json.dumps.
**
** jansson's own dumper is close (same default separators) but differs in
** details that change payload hashes: it has no indent-0 layout, writes
** \uXXXX in upper case and formats reals with %.17g. This file writes the
** jansson value tree itself; see json_py.h for the rules.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/json_py.h"

/* Decode one UTF-8 sequence at s[*i]; -1 when malformed. */
static long utf8_next(const unsigned char *s, size_t n, size_t *i) {
  unsigned c = s[*i];
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + (size_t)len > n) return -1;
  long cp = len == 1 ? (long)c : (long)(c & (0x7Fu >> len));
  for (int k = 1; k < len; k++) {
    if ((s[*i + (size_t)k] & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (s[*i + (size_t)k] & 0x3F);
  }
  static const long min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  *i += (size_t)len;
  return cp;
}

static void escape_cp(kn__sb *sb, long cp) {
  if (cp > 0xFFFF) {
    cp -= 0x10000;
    kn__sb_printf(sb, "\\u%04lx\\u%04lx", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    kn__sb_printf(sb, "\\u%04lx", cp);
  }
}

bool kn__json_py_string(kn__sb *sb, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  kn__sb_putc(sb, '"');
  for (size_t i = 0; i < n;) {
    size_t run = i;
    while (run < n && s[run] >= 0x20 && s[run] < 0x7F && s[run] != '"' && s[run] != '\\')
      run++;
    kn__sb_putn(sb, str + i, run - i);
    if ((i = run) == n) break;
    long cp = utf8_next(s, n, &i);
    switch (cp) {
    case -1: return false;
    case '"': kn__sb_puts(sb, "\\\""); break;
    case '\\': kn__sb_puts(sb, "\\\\"); break;
    case '\n': kn__sb_puts(sb, "\\n"); break;
    case '\r': kn__sb_puts(sb, "\\r"); break;
    case '\t': kn__sb_puts(sb, "\\t"); break;
    case '\b': kn__sb_puts(sb, "\\b"); break;
    case '\f': kn__sb_puts(sb, "\\f"); break;
    default: escape_cp(sb, cp);
    }
  }
  kn__sb_putc(sb, '"');
  return true;
}

/* Shortest "%.*e" text of d that reads back as d. */
static void shortest(double d, char *buf, size_t n) {
  for (int p = 0; p < 17; p++) {
    snprintf(buf, n, "%.*e", p, d);
    if (strtod(buf, NULL) == d) return;
  }
}

bool kn__json_py_real(kn__sb *sb, double d) {
  if (!isfinite(d)) return false;
  char buf[40], digits[24];
  shortest(d, buf, sizeof buf);
  const char *p = buf;
  if (*p == '-') kn__sb_putc(sb, *p++);
  size_t nd = 0;
  for (; *p != 'e'; p++)
    if (*p != '.') digits[nd++] = *p;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = '\0';
  int exp = atoi(p + 1);
  if (exp >= 16 || exp < -4) { /* repr switches to scientific here */
    kn__sb_putc(sb, digits[0]);
    if (nd > 1) kn__sb_printf(sb, ".%s", digits + 1);
    kn__sb_printf(sb, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
  } else if (exp < 0) {
    kn__sb_printf(sb, "0.%.*s%s", -exp - 1, "000", digits);
  } else {
    size_t ip = (size_t)exp + 1;
    for (size_t k = 0; k < ip; k++) kn__sb_putc(sb, k < nd ? digits[k] : '0');
    kn__sb_printf(sb, ".%s", nd > ip ? digits + ip : "0");
  }
  return true;
}

static bool dump(kn__sb *sb, const json_t *v, kn__json_py_mode mode);

static bool dump_object(kn__sb *sb, const json_t *v, kn__json_py_mode mode) {
  const char *sep = mode == KN__JSON_INDENT0 ? ",\n" : ", ";
  void *it = json_object_iter((json_t *)v);
  if (!it) { kn__sb_puts(sb, "{}"); return true; }
  kn__sb_puts(sb, mode == KN__JSON_INDENT0 ? "{\n" : "{");
  for (bool first = true; it; it = json_object_iter_next((json_t *)v, it), first = false) {
    const char *key = json_object_iter_key(it);
    if (!first) kn__sb_puts(sb, sep);
    if (!kn__json_py_string(sb, key, strlen(key))) return false;
    kn__sb_puts(sb, ": ");
    if (!dump(sb, json_object_iter_value(it), mode)) return false;
  }
  kn__sb_puts(sb, mode == KN__JSON_INDENT0 ? "\n}" : "}");
  return true;
}

static bool dump_array(kn__sb *sb, const json_t *v, kn__json_py_mode mode) {
  size_t n = json_array_size(v);
  if (n == 0) { kn__sb_puts(sb, "[]"); return true; }
  kn__sb_puts(sb, mode == KN__JSON_INDENT0 ? "[\n" : "[");
  for (size_t i = 0; i < n; i++) {
    if (i) kn__sb_puts(sb, mode == KN__JSON_INDENT0 ? ",\n" : ", ");
    if (!dump(sb, json_array_get(v, i), mode)) return false;
  }
  kn__sb_puts(sb, mode == KN__JSON_INDENT0 ? "\n]" : "]");
  return true;
}

static bool dump(kn__sb *sb, const json_t *v, kn__json_py_mode mode) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return dump_object(sb, v, mode);
  case JSON_ARRAY: return dump_array(sb, v, mode);
  case JSON_STRING: return kn__json_py_string(sb, json_string_value(v), json_string_length(v));
  case JSON_INTEGER: kn__sb_printf(sb, "%lld", (long long)json_integer_value(v)); return true;
  case JSON_REAL: return kn__json_py_real(sb, json_real_value(v));
  case JSON_TRUE: kn__sb_puts(sb, "true"); return true;
  case JSON_FALSE: kn__sb_puts(sb, "false"); return true;
  case JSON_NULL: kn__sb_puts(sb, "null"); return true;
  }
  return false;
}

bool kn__json_py_dump(kn__sb *sb, const json_t *v, kn__json_py_mode mode) {
  return v && dump(sb, v, mode);
}

bool kn__json_py_payload(kn__sb *sb, const json_t *v) {
  if (!json_is_array(v)) return kn__json_py_dump(sb, v, KN__JSON_INDENT0);
  kn__sb_puts(sb, "[\n");
  for (size_t i = 0; i < json_array_size(v); i++) {
    if (i) kn__sb_puts(sb, ",\n");
    if (!dump(sb, json_array_get(v, i), KN__JSON_COMPACT)) return false;
  }
  kn__sb_puts(sb, "\n]");
  return true;
}
