/*
** tools/report/jsonout.c: JSON written from the bytes that were read.
**
** raw.jsonl lines and chromium events used to be parsed into jansson trees
** and dumped again, which cost more than half of the run on real traces.
** Here a chromium payload is validated and minified in one pass (the
** grammar of RFC 8259, UTF-8 checked, nesting bounded), and a raw.jsonl
** line is the metadata text as read with the report's fields appended.
*/
#include <string.h>

#include "report/jsonout.h"

/* Length of the UTF-8 sequence at s (n bytes left), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
             : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (!len || len > n || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4))
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (len == 3 && ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F)))
    return 0;
  if (len == 4 && ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F)))
    return 0;
  return len;
}

static bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

/* A string token starting at s[*i] == '"'; copied to out. */
static bool string_tok(const char *s, size_t n, size_t *i, kn__sb *out) {
  size_t start = (*i)++;
  while (*i < n && s[*i] != '"') {
    unsigned char c = (unsigned char)s[*i];
    if (c < 0x20) return false;
    if (c == '\\') {
      if (*i + 1 >= n || !strchr("\"\\/bfnrtu", s[*i + 1]) || !s[*i + 1])
        return false;
      if (s[*i + 1] == 'u') {
        for (size_t k = 2; k < 6; k++)
          if (*i + k >= n || !is_hex(s[*i + k])) return false;
        *i += 6;
      } else {
        *i += 2;
      }
      continue;
    }
    size_t len = utf8_len((const unsigned char *)s + *i, n - *i);
    if (!len) return false;
    *i += len;
  }
  if (*i >= n) return false;
  (*i)++;
  kn__sb_putn(out, s + start, *i - start);
  return true;
}

static size_t digits(const char *s, size_t n, size_t i) {
  size_t k = i;
  while (k < n && s[k] >= '0' && s[k] <= '9') k++;
  return k - i;
}

static bool number_tok(const char *s, size_t n, size_t *i, kn__sb *out) {
  size_t k = *i;
  if (k < n && s[k] == '-') k++;
  size_t d = digits(s, n, k);
  if (!d || (d > 1 && s[k] == '0')) return false;
  k += d;
  if (k < n && s[k] == '.') {
    if (!(d = digits(s, n, k + 1))) return false;
    k += 1 + d;
  }
  if (k < n && (s[k] == 'e' || s[k] == 'E')) {
    k++;
    if (k < n && (s[k] == '+' || s[k] == '-')) k++;
    if (!(d = digits(s, n, k))) return false;
    k += d;
  }
  kn__sb_putn(out, s + *i, k - *i);
  *i = k;
  return true;
}

static bool literal_tok(const char *s, size_t n, size_t *i, kn__sb *out) {
  static const char *const lits[] = {"true", "false", "null"};
  for (int k = 0; k < 3; k++) {
    size_t len = strlen(lits[k]);
    if (n - *i >= len && !memcmp(s + *i, lits[k], len)) {
      kn__sb_putn(out, lits[k], len);
      *i += len;
      return true;
    }
  }
  return false;
}

static void skip_ws(const char *s, size_t n, size_t *i) {
  while (*i < n && (s[*i] == ' ' || s[*i] == '\t' || s[*i] == '\n' ||
                    s[*i] == '\r'))
    (*i)++;
}

enum { VALUE, FIRST_KEY, KEY, COLON, NEXT, FIRST_VALUE };

/* One step of the grammar at a non-blank s[*i]; stack holds '{' or '['. */
static bool step(const char *s, size_t n, size_t *i, int *want, char *stack,
                 size_t *depth, kn__sb *out) {
  char c = s[*i];
  bool in_obj = *depth && stack[*depth - 1] == '{';
  if ((*want == FIRST_KEY && c == '}') || (*want == FIRST_VALUE && c == ']') ||
      (*want == NEXT && (c == '}' || c == ']'))) {
    if (!*depth || c != (in_obj ? '}' : ']')) return false;
    kn__sb_putc(out, c);
    (*i)++, (*depth)--;
    *want = NEXT;
    return true;
  }
  if (*want == NEXT && c == ',' && *depth) {
    kn__sb_putc(out, c);
    (*i)++;
    *want = in_obj ? KEY : VALUE;
    return true;
  }
  if (*want == COLON) {
    if (c != ':') return false;
    kn__sb_putc(out, c);
    (*i)++;
    *want = VALUE;
    return true;
  }
  if (*want == FIRST_KEY || *want == KEY) {
    if (c != '"' || !string_tok(s, n, i, out)) return false;
    *want = COLON;
    return true;
  }
  if (*want != VALUE && *want != FIRST_VALUE) return false;
  if (c == '{' || c == '[') {
    if (*depth == RP_JSON_MAX_DEPTH) return false;
    stack[(*depth)++] = c;
    kn__sb_putc(out, c);
    (*i)++;
    *want = c == '{' ? FIRST_KEY : FIRST_VALUE;
    return true;
  }
  bool ok = c == '"' ? string_tok(s, n, i, out)
            : (c == '-' || (c >= '0' && c <= '9')) ? number_tok(s, n, i, out)
                                                   : literal_tok(s, n, i, out);
  *want = NEXT;
  return ok;
}

bool rp_json_minify_object(const char *s, size_t n, kn__sb *out) {
  char stack[RP_JSON_MAX_DEPTH];
  size_t depth = 0, i = 0, mark = out->len;
  int want = VALUE;
  skip_ws(s, n, &i);
  if (i >= n || s[i] != '{') return false;
  do {
    if (!step(s, n, &i, &want, stack, &depth, out)) break;
    skip_ws(s, n, &i);
  } while (depth && i < n);
  skip_ws(s, n, &i);
  bool ok = !depth && want == NEXT && i == n && !kn__sb_failed(out);
  if (!ok) out->len = mark;
  return ok;
}

void rp_json_string(kn__sb *out, const char *s) {
  kn__sb_putc(out, '"');
  const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
  while (p < end) {
    size_t len = utf8_len(p, (size_t)(end - p));
    if (*p == '"' || *p == '\\') {
      kn__sb_putc(out, '\\');
      kn__sb_putc(out, (char)*p++);
    } else if (*p < 0x20 || !len) {
      kn__sb_printf(out, "\\u%04x", *p < 0x20 ? *p : 0xfffd);
      p++;
    } else {
      kn__sb_putn(out, (const char *)p, len);
      p += len;
    }
  }
  kn__sb_putc(out, '"');
}

bool rp_json_open_object(kn__sb *out, const char *text, size_t n) {
  while (n && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\r'))
    n--;
  if (!n || text[n - 1] != '}' || memchr(text, '\n', n)) return false;
  size_t end = n - 1;
  while (end && (text[end - 1] == ' ' || text[end - 1] == '\t')) end--;
  if (!end || text[end - 1] == '{') return false;
  kn__sb_putn(out, text, end);
  return true;
}

/* End of the JSON value starting at s[i] in minified, valid JSON. */
static size_t value_end(const char *s, size_t n, size_t i) {
  size_t depth = 0;
  for (; i < n; i++) {
    char c = s[i];
    if (c == '"') {
      for (i++; i < n && s[i] != '"'; i++)
        if (s[i] == '\\') i++;
      if (!depth) return i + 1;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (!depth) return i;
      if (!--depth) return i + 1;
    } else if (!depth && c == ',') {
      return i;
    }
  }
  return n;
}

bool rp_json_field(const char *s, size_t n, const char *key, const char **val,
                   size_t *vlen) {
  size_t klen = strlen(key), i = 1;
  if (n < 2 || s[0] != '{') return false;
  while (i < n && s[i] == '"') {
    size_t k = value_end(s, n, i); /* the key string */
    bool hit = k - i == klen + 2 && !memcmp(s + i + 1, key, klen);
    if (k >= n || s[k] != ':') return false;
    size_t e = value_end(s, n, k + 1);
    if (hit) {
      *val = s + k + 1;
      *vlen = e - (k + 1);
      return true;
    }
    i = e + (e < n && s[e] == ',');
  }
  return false;
}
