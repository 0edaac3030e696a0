/*
** data/csv.c: the numeric CSV parser (see csv.h). Syntax is checked here,
** field by field; the C library's strtod_l / strtof_l then give the
** correctly rounded value of a checked decimal literal.
*/
#include <fenv.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "data/csv.h"
#include "tensor/tensor.h"

typedef struct parser {
  const char *name;
  kn_dtype dt;
  size_t isz;
  locale_t c_locale;
  uint8_t *data; /* owned until handed to the table */
  size_t n, cap; /* elements */
  int64_t rows, cols, first_line, line;
} parser;

typedef struct field {
  const char *b, *e; /* trimmed */
  int64_t col;
  bool last_after_comma; /* an empty last field: the line ends with a comma */
} field;

static const struct { kn_dtype dt; int64_t lo, hi; } int_ranges[] = {
    {KN_BOOL, 0, 1},           {KN_UINT8, 0, 255},         {KN_INT8, -128, 127},
    {KN_INT16, -32768, 32767}, {KN_INT32, INT32_MIN, INT32_MAX}, {KN_INT64, INT64_MIN, INT64_MAX}};

/* ---- messages --------------------------------------------------------------------- */
/* The field as quoted text: at most 40 bytes, others than printable ASCII as \xNN. */
static void quote(kn__sb *sb, const char *b, const char *e) {
  kn__sb_putc(sb, '\'');
  for (const char *s = b; s < e && s < b + 40; s++) {
    unsigned char c = (unsigned char)*s;
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') kn__sb_putc(sb, (char)c);
    else kn__sb_printf(sb, "\\x%02x", c);
  }
  kn__sb_puts(sb, e - b > 40 ? "'..." : "'");
}

static const char *expected(kn_dtype dt) {
  switch (dt) {
  case KN_BOOL: return "0 or 1 (bool)";
  case KN_UINT8: return "an integer (uint8)";
  case KN_INT8: return "an integer (int8)";
  case KN_INT16: return "an integer (int16)";
  case KN_INT32: return "an integer (int32)";
  case KN_INT64: return "an integer (int64)";
  case KN_FLOAT16: return "a number (float16)";
  case KN_BFLOAT16: return "a number (bfloat16)";
  case KN_FLOAT32: return "a number (float32)";
  default: return "a number (float64)";
  }
}

/* "NAME: line L, column C: <what>" + the quoted field + tail. */
static kn_status fail(const parser *p, const field *f, const char *what, bool quoted,
                      const char *tail) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "%s: line %lld, column %lld: %s", p->name, (long long)p->line,
                (long long)f->col, what);
  if (quoted) quote(&sb, f->b, f->e);
  kn__sb_puts(&sb, tail);
  kn_status st = kn__sb_failed(&sb) ? kn__oom() : kn__error(KN_EPARSE, "%s", sb.buf);
  kn__sb_fini(&sb);
  return st;
}

static kn_status not_a_value(const parser *p, const field *f) {
  char what[64];
  snprintf(what, sizeof what, "expected %s, found ", expected(p->dt));
  bool text = (*f->b >= 'a' && *f->b <= 'z') || (*f->b >= 'A' && *f->b <= 'Z');
  return fail(p, f, what, true, text && p->rows == 0 ? " (kn_load_csv reads no header row)" : "");
}

static kn_status out_of_range(const parser *p, const field *f, const char *range) {
  return fail(p, f, "", true, range);
}

/* ---- integers ---------------------------------------------------------------------- */
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* [+-]digits, exactly, into *v; false on bad syntax, *overflow past int64. */
static bool read_int(const char *b, const char *e, int64_t *v, bool *overflow) {
  bool neg = b < e && *b == '-';
  if (b < e && (*b == '-' || *b == '+')) b++;
  if (b == e) return false;
  uint64_t mag = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  *overflow = false;
  for (; b < e; b++) {
    if (!is_digit(*b)) return false;
    unsigned d = (unsigned)(*b - '0');
    if (mag > (lim - d) / 10) *overflow = true;
    else mag = mag * 10 + d;
  }
  *v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return true;
}

static kn_status parse_int(const parser *p, const field *f, void *out) {
  int64_t v = 0, lo = 0, hi = 0;
  bool overflow = false;
  for (size_t i = 0; i < sizeof int_ranges / sizeof *int_ranges; i++)
    if (int_ranges[i].dt == p->dt) lo = int_ranges[i].lo, hi = int_ranges[i].hi;
  if (!read_int(f->b, f->e, &v, &overflow)) return not_a_value(p, f);
  if (overflow || v < lo || v > hi) {
    char range[96];
    snprintf(range, sizeof range, " is out of range for %s [%lld, %lld]", kn_dtype_name(p->dt),
             (long long)lo, (long long)hi);
    return out_of_range(p, f, range);
  }
  kn__store_int(out, p->dt, v);
  return KN_OK;
}

/* ---- floats ------------------------------------------------------------------------ */
static bool ieq(const char *b, const char *e, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(e - b) != n) return false;
  for (size_t i = 0; i < n; i++)
    if ((b[i] | 0x20) != word[i]) return false;
  return true;
}

/* The decimal literal syntax of csv.h; *special for inf / infinity / nan. */
static bool float_syntax(const char *b, const char *e, bool *special) {
  if (b < e && (*b == '+' || *b == '-')) b++;
  *special = ieq(b, e, "inf") || ieq(b, e, "infinity") || ieq(b, e, "nan");
  if (*special) return true;
  int digits = 0;
  while (b < e && is_digit(*b)) b++, digits++;
  if (b < e && *b == '.') b++;
  while (b < e && is_digit(*b)) b++, digits++;
  if (!digits) return false;
  if (b < e && (*b == 'e' || *b == 'E')) {
    b++;
    if (b < e && (*b == '+' || *b == '-')) b++;
    if (b == e || !is_digit(*b)) return false;
    while (b < e && is_digit(*b)) b++;
  }
  return b == e;
}

/* strtof_l of s rounded in mode (FE_DOWNWARD / FE_UPWARD). */
static float strtof_mode(const char *s, locale_t c, int mode) {
  int was = fegetround();
  fesetround(mode);
  float v = strtof_l(s, NULL, c);
  fesetround(was);
  return v;
}

/* A float16 / bfloat16 pattern's value, the infinity pattern read as the
** power of two past the largest finite value (the overflow threshold is the
** midpoint between that and the largest finite). */
static double half_value(uint16_t h, bool bf16) {
  uint16_t mag = h & 0x7fff;
  double sign = h & 0x8000 ? -1.0 : 1.0;
  if (mag == (bf16 ? 0x7f80 : 0x7c00)) return sign * (bf16 ? 0x1p128 : 0x1p16);
  return bf16 ? kn__bf16_to_float(h) : kn__half_to_float(h);
}

static uint16_t to_half(float v, bool bf16) {
  return bf16 ? kn__float_to_bf16(v) : kn__float_to_half(v);
}

/* The float16 / bfloat16 nearest to the decimal s, ties to even. Every such
** value and every midpoint between two neighbours is a float, so with lo <=
** s <= hi the floats below and above s (adjacent, or equal when s is one):
** if lo and hi round alike, so does s; if not, the midpoint between their
** two results is lo or hi, and s lies on the other side of it. */
static uint16_t parse_half(const char *s, locale_t c, bool bf16) {
  float lo = strtof_mode(s, c, FE_DOWNWARD), hi = strtof_mode(s, c, FE_UPWARD);
  uint16_t a = to_half(lo, bf16), b = to_half(hi, bf16);
  if (a == b) return a;
  double mid = (half_value(a, bf16) + half_value(b, bf16)) / 2;
  return mid == (double)lo ? b : a;
}

static kn_status parse_float(const parser *p, const field *f, void *out) {
  bool special = false;
  if (!float_syntax(f->b, f->e, &special)) return not_a_value(p, f);
  double value = 0; /* for the overflow check */
  if (p->dt == KN_FLOAT64) {
    value = strtod_l(f->b, NULL, p->c_locale);
    memcpy(out, &value, sizeof value);
  } else if (p->dt == KN_FLOAT32) {
    float v = strtof_l(f->b, NULL, p->c_locale);
    memcpy(out, &v, sizeof v), value = v;
  } else {
    bool bf16 = p->dt == KN_BFLOAT16;
    uint16_t h = parse_half(f->b, p->c_locale, bf16);
    memcpy(out, &h, sizeof h);
    value = (h & 0x7fff) == (bf16 ? 0x7f80 : 0x7c00) ? INFINITY : 0;
  }
  if (isinf(value) && !special) {
    char range[96];
    snprintf(range, sizeof range, " is out of range for %s (largest finite %.17g)",
             kn_dtype_name(p->dt), p->dt == KN_FLOAT64 ? 1.7976931348623157e308
                                   : p->dt == KN_FLOAT32 ? 3.4028234663852886e38
                                   : p->dt == KN_FLOAT16 ? 65504.0 : 3.3895313892515355e38);
    return out_of_range(p, f, range);
  }
  return KN_OK;
}

/* ---- lines ------------------------------------------------------------------------- */
static kn_status push_field(parser *p, const field *f) {
  if (f->b == f->e) {
    char what[64];
    snprintf(what, sizeof what, "empty field, expected %s", expected(p->dt));
    return fail(p, f, what, false, f->last_after_comma ? " (the line ends with a comma)" : "");
  }
  if (p->n == p->cap) {
    size_t nc = p->cap ? p->cap * 2 : 1024;
    uint8_t *nd = nc <= SIZE_MAX / 2 / p->isz ? realloc(p->data, nc * p->isz) : NULL;
    if (!nd) return kn__oom();
    p->data = nd, p->cap = nc;
  }
  void *out = p->data + p->n * p->isz;
  kn_status st = kn_dtype_is_floating(p->dt) ? parse_float(p, f, out) : parse_int(p, f, out);
  if (st == KN_OK) p->n++;
  return st;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* One line [b, e), without its line ending. */
static kn_status parse_line(parser *p, const char *b, const char *e) {
  const char *s = b;
  while (s < e && is_blank(*s)) s++;
  if (s == e) return KN_OK; /* blank */
  int64_t cols = 0;
  for (s = b;;) {
    const char *fe = s;
    while (fe < e && *fe != ',') fe++;
    field f = {s, fe, cols + 1, fe == e && s > b && s[-1] == ','};
    while (f.b < f.e && is_blank(*f.b)) f.b++;
    while (f.e > f.b && is_blank(f.e[-1])) f.e--;
    kn_status st = push_field(p, &f);
    if (st != KN_OK) return st;
    cols++;
    if (fe == e) break;
    s = fe + 1;
  }
  if (p->rows && cols != p->cols)
    return kn__error(KN_EPARSE, "%s: line %lld: %lld columns, but the first row (line %lld) "
                                "has %lld", p->name, (long long)p->line, (long long)cols,
                     (long long)p->first_line, (long long)p->cols);
  if (!p->rows) p->cols = cols, p->first_line = p->line;
  p->rows++;
  return KN_OK;
}

static kn_status parse_text(parser *p, const char *text, size_t len) {
  size_t i = len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0;
  for (p->line = 1; i < len; p->line++) {
    size_t e = i;
    while (e < len && text[e] != '\n' && text[e] != '\r') e++;
    kn_status st = parse_line(p, text + i, text + e);
    if (st != KN_OK) return st;
    if (e + 1 < len && text[e] == '\r' && text[e + 1] == '\n') e++;
    i = e + 1;
  }
  return p->rows ? KN_OK
                 : kn__error(KN_EPARSE, "%s: no rows (the file is empty or every line is blank)",
                             p->name);
}

kn_status kn__csv_parse(const char *text, size_t len, const char *name, kn_dtype dt,
                        kn__csv_table *out) {
  memset(out, 0, sizeof *out);
  if ((unsigned)dt >= KN_DTYPE_COUNT)
    return kn__error(KN_EDTYPE, "kn_load_csv: expected a dtype, found %d", (int)dt);
  parser p = {.name = name, .dt = dt, .isz = kn_dtype_size(dt)};
  p.c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (!p.c_locale) return kn__oom();
  kn_status st = parse_text(&p, text, len);
  freelocale(p.c_locale);
  if (st != KN_OK) {
    free(p.data);
    return st;
  }
  *out = (kn__csv_table){p.data, p.rows, p.cols};
  return KN_OK;
}
