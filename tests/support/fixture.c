/*
** tests/support/fixture.c: the torch reference fixture reader (format in
** tools/ref/README.md) and the tensor comparison used by tests.
** Values are read as doubles; integer values that JSON holds exactly are
** stored exactly (int64 included).
*/
#include "support/fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tensor/tensor.h"

struct kn_fixture {
  json_t *root;
  json_t *cases; /* borrowed from root */
};

kn_fixture *kn_fixture_load(const char *path) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) {
    kn__error(KN_EPARSE, "fixture %s: line %d: %s", path, err.line, err.text);
    return NULL;
  }
  json_t *cases = json_is_array(root) ? root : json_object_get(root, "cases");
  if (!json_is_array(cases)) {
    json_decref(root);
    kn__error(KN_EPARSE, "fixture %s: expected an object with a \"cases\" list", path);
    return NULL;
  }
  kn_fixture *f = malloc(sizeof *f);
  if (!f) {
    json_decref(root);
    kn__oom();
    return NULL;
  }
  f->root = root;
  f->cases = cases;
  return f;
}

kn_fixture *kn_fixture_load_named(const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", KN_FIXTURE_DIR, name);
  return kn_fixture_load(path);
}

void kn_fixture_free(kn_fixture *f) {
  if (!f) return;
  json_decref(f->root);
  free(f);
}

int kn_fixture_ncases(const kn_fixture *f) { return (int)json_array_size(f->cases); }

const json_t *kn_fixture_case(const kn_fixture *f, int i) {
  return json_array_get(f->cases, (size_t)i);
}

const json_t *kn_fixture_find(const kn_fixture *f, const char *name) {
  for (int i = 0, n = kn_fixture_ncases(f); i < n; i++) {
    const json_t *c = kn_fixture_case(f, i);
    if (!strcmp(kn_fixture_name(c), name)) return c;
  }
  return NULL;
}

/* ---- case fields ------------------------------------------------------------ */

static const char *str_field(const json_t *c, const char *key) {
  const char *s = json_string_value(json_object_get(c, key));
  return s ? s : "";
}

const char *kn_fixture_name(const json_t *c) { return str_field(c, "name"); }
const char *kn_fixture_op(const json_t *c) { return str_field(c, "op"); }

static const json_t *list_item(const json_t *c, const char *key, int i) {
  const json_t *v = json_array_get(json_object_get(c, key), (size_t)i);
  return json_is_null(v) ? NULL : v;
}

int kn_fixture_ninputs(const json_t *c) {
  return (int)json_array_size(json_object_get(c, "inputs"));
}
const json_t *kn_fixture_input(const json_t *c, int i) { return list_item(c, "inputs", i); }
int kn_fixture_noutputs(const json_t *c) {
  return (int)json_array_size(json_object_get(c, "outputs"));
}
const json_t *kn_fixture_output(const json_t *c, int i) { return list_item(c, "outputs", i); }
const json_t *kn_fixture_grad(const json_t *c, int i) { return list_item(c, "grads", i); }
const json_t *kn_fixture_grad_output(const json_t *c, int i) {
  return list_item(c, "grad_outputs", i);
}

const json_t *kn_fixture_param(const json_t *c, const char *key) {
  return json_object_get(json_object_get(c, "params"), key);
}

double kn_fixture_param_double(const json_t *c, const char *key, double dflt) {
  const json_t *v = kn_fixture_param(c, key);
  if (json_is_number(v)) return json_number_value(v);
  if (json_is_boolean(v)) return json_is_true(v) ? 1.0 : 0.0;
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (!strcmp(s, "nan")) return NAN;
    if (!strcmp(s, "inf")) return INFINITY;
    if (!strcmp(s, "-inf")) return -INFINITY;
  }
  return dflt;
}

int64_t kn_fixture_param_int(const json_t *c, const char *key, int64_t dflt) {
  const json_t *v = kn_fixture_param(c, key);
  if (json_is_integer(v)) return (int64_t)json_integer_value(v);
  if (json_is_boolean(v)) return json_is_true(v);
  return dflt;
}

bool kn_fixture_param_bool(const json_t *c, const char *key, bool dflt) {
  const json_t *v = kn_fixture_param(c, key);
  if (json_is_boolean(v)) return json_is_true(v);
  if (json_is_integer(v)) return json_integer_value(v) != 0;
  return dflt;
}

int kn_fixture_param_ints(const json_t *c, const char *key, int64_t *out, int cap) {
  const json_t *v = kn_fixture_param(c, key);
  if (json_is_integer(v)) {
    if (cap > 0) out[0] = (int64_t)json_integer_value(v);
    return 1;
  }
  if (!json_is_array(v)) return -1;
  int n = (int)json_array_size(v);
  for (int i = 0; i < n; i++) {
    const json_t *x = json_array_get(v, (size_t)i);
    if (!json_is_integer(x)) return -1;
    if (i < cap) out[i] = (int64_t)json_integer_value(x);
  }
  return n;
}

/* ---- tensors ------------------------------------------------------------------- */

bool kn_fixture_dtype(const char *name, kn_dtype *out) {
  for (int d = 0; d < KN_DTYPE_COUNT; d++)
    if (name && !strcmp(name, kn_dtype_name((kn_dtype)d))) {
      *out = (kn_dtype)d;
      return true;
    }
  return false;
}

/* Decode one JSON value: number, bool, or "nan"/"inf"/"-inf". */
static bool decode_value(const json_t *v, double *d, bool *is_int, int64_t *i) {
  *is_int = false;
  if (json_is_integer(v)) {
    *is_int = true;
    *i = (int64_t)json_integer_value(v);
    *d = (double)*i;
  } else if (json_is_real(v)) {
    *d = json_real_value(v);
  } else if (json_is_boolean(v)) {
    *is_int = true;
    *i = json_is_true(v);
    *d = (double)*i;
  } else if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (!strcmp(s, "nan")) *d = NAN;
    else if (!strcmp(s, "inf")) *d = INFINITY;
    else if (!strcmp(s, "-inf")) *d = -INFINITY;
    else return false;
  } else {
    return false;
  }
  return true;
}

typedef struct enc {
  kn_dtype dtype;
  int ndim;
  int64_t sizes[KN_MAX_DIMS];
  int64_t numel;
  const json_t *values;
} enc;

static kn_status parse_enc(const json_t *e, enc *out) {
  if (!json_is_object(e)) return kn__error(KN_EPARSE, "fixture tensor: expected an object");
  const char *dt = json_string_value(json_object_get(e, "dtype"));
  if (!kn_fixture_dtype(dt, &out->dtype))
    return kn__error(KN_EPARSE, "fixture tensor: unknown dtype %s", dt ? dt : "(missing)");
  const json_t *sz = json_object_get(e, "sizes");
  if (!json_is_array(sz) || json_array_size(sz) > KN_MAX_DIMS)
    return kn__error(KN_EPARSE, "fixture tensor: expected \"sizes\" as a list of <= %d ints",
                     KN_MAX_DIMS);
  out->ndim = (int)json_array_size(sz);
  out->numel = 1;
  for (int d = 0; d < out->ndim; d++) {
    out->sizes[d] = (int64_t)json_integer_value(json_array_get(sz, (size_t)d));
    out->numel *= out->sizes[d];
  }
  out->values = json_object_get(e, "values");
  if (!json_is_array(out->values) || (int64_t)json_array_size(out->values) != out->numel)
    return kn__error(KN_EPARSE, "fixture tensor: expected %lld values, found %lld",
                     (long long)out->numel, (long long)json_array_size(out->values));
  return KN_OK;
}

static void store(void *p, kn_dtype dt, double d, bool is_int, int64_t i) {
  if (is_int && !kn_dtype_is_floating(dt)) kn__store_int(p, dt, i);
  else kn__store_double(p, dt, d);
}

kn_tensor *kn_fixture_tensor(const json_t *e) {
  enc en;
  if (parse_enc(e, &en) != KN_OK) return NULL;
  kn_tensor *t = kn__empty(en.ndim, en.sizes, en.dtype, KN_CPU);
  if (!t) return NULL;
  unsigned char *p = kn_data(t);
  size_t es = kn_dtype_size(en.dtype);
  for (int64_t k = 0; k < en.numel; k++) {
    double d;
    bool is_int;
    int64_t i = 0;
    if (!decode_value(json_array_get(en.values, (size_t)k), &d, &is_int, &i)) {
      kn__error(KN_EPARSE, "fixture tensor: value %lld is not a number", (long long)k);
      kn_release(t);
      return NULL;
    }
    store(p + (size_t)k * es, en.dtype, d, is_int, i);
  }
  if (json_is_true(json_object_get(e, "requires_grad")) &&
      kn_set_requires_grad(t, true) != KN_OK) {
    kn_release(t);
    return NULL;
  }
  return kn__autorelease(t);
}

kn_tensor *kn_fixture_from_doubles(kn_dtype dt, int ndim, const int64_t *sizes,
                                   const double *values) {
  kn_tensor *t = kn__empty(ndim, sizes, dt, KN_CPU);
  if (!t) return NULL;
  unsigned char *p = kn_data(t);
  size_t es = kn_dtype_size(dt);
  for (int64_t k = 0, n = kn_numel(t); k < n; k++)
    kn__store_double(p + (size_t)k * es, dt, values[k]);
  return kn__autorelease(t);
}

/* ---- comparison ------------------------------------------------------------------ */

bool kn_values_close(double a, double e, double rtol, double atol) {
  if (isnan(a) || isnan(e)) return isnan(a) && isnan(e);
  if (isinf(a) || isinf(e)) return a == e;
  return fabs(a - e) <= atol + rtol * fabs(e);
}

/* Value k (row-major) of a strided tensor, as double. */
static double value_at(const kn_tensor *t, int64_t k) {
  int64_t idx[KN_MAX_DIMS];
  int nd = kn_ndim(t);
  const int64_t *sz = kn_sizes(t);
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = sz[d] ? k % sz[d] : 0;
    k = sz[d] ? k / sz[d] : 0;
  }
  return kn_get(t, idx);
}

static bool sizes_match(const kn_tensor *a, int nd, const int64_t *sz, char *why, size_t n) {
  bool ok = kn_ndim(a) == nd;
  for (int d = 0; ok && d < nd; d++) ok = kn_sizes(a)[d] == sz[d];
  if (!ok) {
    char sa[256], se[256];
    kn__format_sizes(kn_ndim(a), kn_sizes(a), sa, sizeof sa);
    kn__format_sizes(nd, sz, se, sizeof se);
    snprintf(why, n, "sizes differ: got %s, expected %s", sa, se);
  }
  return ok;
}

static bool check_common(const kn_tensor *a, kn_dtype edt, int nd, const int64_t *sz,
                         bool check_dtype, char *why, size_t n) {
  if (!a) {
    snprintf(why, n, "actual tensor is NULL (last error: %s)", kn_last_error());
    return false;
  }
  if (check_dtype && kn_tensor_dtype(a) != edt) {
    snprintf(why, n, "dtype differs: got %s, expected %s", kn_dtype_name(kn_tensor_dtype(a)),
             kn_dtype_name(edt));
    return false;
  }
  if (kn_tensor_device(a) == KN_META) {
    snprintf(why, n, "actual tensor is a meta tensor (no values)");
    return false;
  }
  return sizes_match(a, nd, sz, why, n);
}

bool kn_fixture_close(const kn_tensor *actual, const json_t *expected, double rtol,
                      double atol, char *why, size_t n) {
  enc en;
  if (parse_enc(expected, &en) != KN_OK) {
    snprintf(why, n, "%s", kn_last_error());
    return false;
  }
  if (!check_common(actual, en.dtype, en.ndim, en.sizes, true, why, n)) return false;
  for (int64_t k = 0; k < en.numel; k++) {
    double e, a = value_at(actual, k);
    bool is_int;
    int64_t i;
    if (!decode_value(json_array_get(en.values, (size_t)k), &e, &is_int, &i)) {
      snprintf(why, n, "expected value %lld is not a number", (long long)k);
      return false;
    }
    if (!kn_values_close(a, e, rtol, atol)) {
      snprintf(why, n, "mismatch at flat index %lld: got %.17g, expected %.17g", (long long)k,
               a, e);
      return false;
    }
  }
  return true;
}

bool kn_tensors_close(const kn_tensor *actual, const kn_tensor *expected, double rtol,
                      double atol, bool check_dtype, char *why, size_t n) {
  if (!expected) {
    snprintf(why, n, "expected tensor is NULL");
    return false;
  }
  if (!check_common(actual, kn_tensor_dtype(expected), kn_ndim(expected), kn_sizes(expected),
                    check_dtype, why, n))
    return false;
  for (int64_t k = 0, m = kn_numel(expected); k < m; k++) {
    double a = value_at(actual, k), e = value_at(expected, k);
    if (!kn_values_close(a, e, rtol, atol)) {
      snprintf(why, n, "mismatch at flat index %lld: got %.17g, expected %.17g", (long long)k,
               a, e);
      return false;
    }
  }
  return true;
}
