/*
** serialize/safetensors.c: validating parser of the safetensors container
** (see safetensors.h). Pure: jansson and core/error only.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "serialize/safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this build assumes a little-endian host"
#endif

static const struct { const char *name; kn_dtype dt; size_t size; } dtypes[] = {
    {"BOOL", KN_BOOL, 1},    {"U8", KN_UINT8, 1},     {"I8", KN_INT8, 1},
    {"I16", KN_INT16, 2},    {"I32", KN_INT32, 4},    {"I64", KN_INT64, 8},
    {"F16", KN_FLOAT16, 2},  {"BF16", KN_BFLOAT16, 2}, {"F32", KN_FLOAT32, 4},
    {"F64", KN_FLOAT64, 8}};
#define NDTYPES (sizeof dtypes / sizeof *dtypes)

const char *kn__st_dtype_name(kn_dtype dt) {
  for (size_t i = 0; i < NDTYPES; i++)
    if (dtypes[i].dt == dt) return dtypes[i].name;
  return NULL;
}

bool kn__st_dtype(const char *name, kn_dtype *out) {
  for (size_t i = 0; name && i < NDTYPES; i++)
    if (!strcmp(dtypes[i].name, name)) {
      *out = dtypes[i].dt;
      return true;
    }
  return false;
}

static size_t dtype_size(kn_dtype dt) {
  for (size_t i = 0; i < NDTYPES; i++)
    if (dtypes[i].dt == dt) return dtypes[i].size;
  return 0;
}

void kn__st_free(kn__st_file *f) {
  if (!f) return;
  json_decref(f->header);
  free(f->entries);
  memset(f, 0, sizeof *f);
}

const kn__st_entry *kn__st_find(const kn__st_file *f, const char *name) {
  for (int i = 0; i < f->n; i++)
    if (!strcmp(f->entries[i].name, name)) return &f->entries[i];
  return NULL;
}

static kn_status bad(const char *name, const char *what) {
  return kn__error(KN_EPARSE, "safetensors: tensor '%s': %s", name, what);
}

/* Non-negative integer JSON value that fits in int64 / size_t. */
static bool get_u64(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
  *out = (uint64_t)json_integer_value(v);
  return true;
}

static kn_status parse_shape(const char *name, const json_t *shape, kn__st_entry *e,
                             uint64_t *numel) {
  if (!json_is_array(shape) || json_array_size(shape) > KN_MAX_DIMS)
    return bad(name, "\"shape\" must be a list of at most 8 sizes");
  e->ndim = (int)json_array_size(shape);
  *numel = 1;
  for (int d = 0; d < e->ndim; d++) {
    uint64_t s;
    if (!get_u64(json_array_get(shape, (size_t)d), &s) || s > (uint64_t)INT64_MAX)
      return bad(name, "\"shape\" entries must be non-negative integers");
    e->shape[d] = (int64_t)s;
    if (s && *numel > UINT64_MAX / s) return bad(name, "the shape's element count overflows");
    *numel *= s;
  }
  return KN_OK;
}

static kn_status parse_entry(const char *name, const json_t *v, size_t data_len,
                             kn__st_entry *e, uint64_t *begin) {
  if (!json_is_object(v)) return bad(name, "expected an object");
  e->name = name;
  if (!kn__st_dtype(json_string_value(json_object_get(v, "dtype")), &e->dtype))
    return bad(name, "\"dtype\" missing or not one of BOOL, U8, I8, I16, I32, I64, F16, BF16, "
                     "F32, F64");
  uint64_t numel = 0, b = 0, end = 0;
  kn_status st = parse_shape(name, json_object_get(v, "shape"), e, &numel);
  if (st != KN_OK) return st;
  const json_t *off = json_object_get(v, "data_offsets");
  if (!json_is_array(off) || json_array_size(off) != 2 ||
      !get_u64(json_array_get(off, 0), &b) || !get_u64(json_array_get(off, 1), &end))
    return bad(name, "\"data_offsets\" must be [begin, end]");
  if (b > end || end > data_len) {
    kn__error(KN_EPARSE, "safetensors: tensor '%s': data_offsets [%llu, %llu] outside the "
                         "%zu-byte data section", name, (unsigned long long)b,
              (unsigned long long)end, data_len);
    return KN_EPARSE;
  }
  size_t isz = dtype_size(e->dtype);
  if (numel > UINT64_MAX / isz || numel * isz != end - b) {
    kn__error(KN_EPARSE, "safetensors: tensor '%s': %llu bytes of data, but %s with %llu "
                         "elements needs %llu", name, (unsigned long long)(end - b),
              kn__st_dtype_name(e->dtype), (unsigned long long)numel,
              (unsigned long long)(numel > UINT64_MAX / isz ? 0 : numel * isz));
    return KN_EPARSE;
  }
  e->nbytes = (size_t)(end - b);
  *begin = b;
  return KN_OK;
}

typedef struct span { uint64_t b; size_t n; const char *name; } span;

static int cmp_span(const void *x, const void *y) {
  const span *a = x, *b = y;
  return a->b < b->b ? -1 : a->b > b->b ? 1 : (a->n > b->n) - (a->n < b->n);
}

/* The tensors must tile [0, data_len) exactly. */
static kn_status check_tiling(span *sp, int n, size_t data_len) {
  qsort(sp, (size_t)n, sizeof *sp, cmp_span);
  uint64_t at = 0;
  for (int i = 0; i < n; i++) {
    if (sp[i].b != at)
      return kn__error(KN_EPARSE, "safetensors: tensor '%s' starts at byte %llu of the data, "
                                  "expected %llu (tensors must not overlap or leave gaps)",
                       sp[i].name, (unsigned long long)sp[i].b, (unsigned long long)at);
    at += sp[i].n;
  }
  if (at != data_len)
    return kn__error(KN_EPARSE, "safetensors: the tensors cover %llu bytes, but the data "
                                "section has %zu", (unsigned long long)at, data_len);
  return KN_OK;
}

static kn_status parse_header(const uint8_t *data, size_t data_len, kn__st_file *f) {
  size_t cap = json_object_size(f->header);
  f->entries = calloc(cap ? cap : 1, sizeof *f->entries);
  span *sp = calloc(cap ? cap : 1, sizeof *sp);
  kn_status st = f->entries && sp ? KN_OK : kn__oom();
  const char *key;
  json_t *v;
  json_object_foreach(f->header, key, v) {
    if (st != KN_OK) break;
    if (!strcmp(key, "__metadata__")) {
      const char *mk;
      json_t *mv;
      if (!json_is_object(v)) st = kn__error(KN_EPARSE, "safetensors: __metadata__ must be an "
                                                        "object of strings");
      json_object_foreach(v, mk, mv) if (st == KN_OK && !json_is_string(mv)) st =
          kn__error(KN_EPARSE, "safetensors: __metadata__ value '%s' is not a string", mk);
      f->metadata = v;
      continue;
    }
    kn__st_entry *e = &f->entries[f->n];
    uint64_t b = 0;
    st = parse_entry(key, v, data_len, e, &b);
    if (st == KN_OK) e->data = data + b, sp[f->n] = (span){b, e->nbytes, key}, f->n++;
  }
  if (st == KN_OK) st = check_tiling(sp, f->n, data_len);
  free(sp);
  return st;
}

kn_status kn__st_parse(const uint8_t *buf, size_t len, kn__st_file *out) {
  memset(out, 0, sizeof *out);
  if (!buf || len < 8)
    return kn__error(KN_EPARSE, "safetensors: the file has %zu bytes, fewer than the 8-byte "
                                "header length", len);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
  if (n > KN__ST_MAX_HEADER || n > len - 8)
    return kn__error(KN_EPARSE, "safetensors: header length %llu does not fit the %zu-byte "
                                "file (truncated or not a safetensors file)",
                     (unsigned long long)n, len);
  json_error_t je;
  out->header = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
  if (!out->header || !json_is_object(out->header)) {
    kn_status st = kn__error(KN_EPARSE, "safetensors: the header is not a JSON object (%s)",
                             out->header ? "another JSON value" : je.text);
    kn__st_free(out);
    return st;
  }
  kn_status st = parse_header(buf + 8 + n, len - 8 - (size_t)n, out);
  if (st != KN_OK) kn__st_free(out);
  return st;
}
