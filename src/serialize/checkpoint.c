/*
** serialize/checkpoint.c: kn_save / kn_load of module state and optimizer
** state as safetensors files (kiln/checkpoint.h). Loading = read the file,
** parse and validate it (safetensors.c), compare with the destination
** tensors and report every difference, build every value as a temporary,
** then copy them all in.
*/
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/strbuf.h"
#include "dynamo/dynamo.h"
#include "kiln/checkpoint.h"
#include "kiln/kiln.h"
#include "optim/optim_int.h"
#include "serialize/safetensors.h"
#include "tensor/tensor.h"

/* ---- the destination: named tensors ------------------------------------------------ */
typedef struct named {
  char **name; /* owned */
  kn_tensor **t; /* borrowed */
  int n, cap;
  const kn_optimizer *opt; /* optimizer state: leave out "<i>.param" and unused entries */
} named;

static void named_free(named *v) {
  for (int i = 0; i < v->n; i++) free(v->name[i]);
  free(v->name);
  free(v->t);
}

static kn_status named_cb(void *ud, const char *suffix, const char *path, kn_tensor *t,
                          bool is_param) {
  (void)suffix;
  named *v = ud;
  if (v->opt && is_param) return KN_OK;
  const char *dot = v->opt ? strchr(path, '.') : NULL;
  if (dot && !kn__optim_uses_state(v->opt, dot + 1)) return KN_OK;
  if (v->n == v->cap) {
    int nc = v->cap ? v->cap * 2 : 16;
    char **nn = realloc(v->name, sizeof *nn * (size_t)nc);
    if (nn) v->name = nn;
    kn_tensor **nt = realloc(v->t, sizeof *nt * (size_t)nc);
    if (nt) v->t = nt;
    if (!nn || !nt) return kn__oom();
    v->cap = nc;
  }
  v->name[v->n] = strdup(path);
  if (!v->name[v->n]) return kn__oom();
  v->t[v->n++] = t;
  return KN_OK;
}

static kn_status collect(kn_module *m, const kn_optimizer *opt, named *out) {
  memset(out, 0, sizeof *out);
  out->opt = opt;
  kn_status st = kn__module_visit(m, named_cb, out);
  if (st != KN_OK) named_free(out);
  return st;
}

/* ---- writing ----------------------------------------------------------------------- */
static kn_status write_all(FILE *f, const void *p, size_t n) {
  return n == 0 || fwrite(p, 1, n, f) == n ? KN_OK : kn__error(KN_EIO, "write failed: %s",
                                                              strerror(errno));
}

static json_t *header_of(const named *v, kn_tensor **cont, json_t *meta) {
  json_t *h = json_object();
  uint64_t off = 0;
  if (h && meta) json_object_set(h, "__metadata__", meta);
  for (int i = 0; h && i < v->n; i++) {
    json_t *shape = json_array();
    for (int d = 0; shape && d < kn_ndim(cont[i]); d++)
      json_array_append_new(shape, json_integer(kn_size(cont[i], d)));
    uint64_t nb = (uint64_t)kn_numel(cont[i]) * kn_dtype_size(kn_tensor_dtype(cont[i]));
    json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype",
                          kn__st_dtype_name(kn_tensor_dtype(cont[i])), "shape", shape,
                          "data_offsets", (json_int_t)off, (json_int_t)(off + nb));
    off += nb;
    if (!e || json_object_set_new(h, v->name[i], e)) {
      json_decref(h);
      return NULL;
    }
  }
  return h;
}

typedef struct out_file {
  const named *v;
  kn_tensor **cont;
  const char *header; /* JSON, padded to a multiple of 8 with spaces */
  size_t hl, padded;
} out_file;

static kn_status write_body(void *ud, FILE *f) {
  const out_file *o = ud;
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)o->padded >> (8 * i));
  kn_status st = write_all(f, len8, 8);
  if (st == KN_OK) st = write_all(f, o->header, o->hl);
  for (size_t i = o->hl; i < o->padded && st == KN_OK; i++) st = write_all(f, " ", 1);
  for (int i = 0; i < o->v->n && st == KN_OK; i++)
    st = write_all(f, kn_data(o->cont[i]), (size_t)kn_numel(o->cont[i]) *
                                               kn_dtype_size(kn_tensor_dtype(o->cont[i])));
  return st;
}

/* Through a unique temporary file, fsync and rename (core/fileio.h). */
static kn_status write_file(const char *path, const named *v, kn_tensor **cont, json_t *meta) {
  json_t *h = header_of(v, cont, meta);
  char *js = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(h);
  if (!js) return kn__oom();
  size_t hl = strlen(js);
  out_file o = {v, cont, js, hl, (hl + 7) / 8 * 8};
  kn_status st = kn__file_save(path, write_body, &o);
  free(js);
  return st;
}

static kn_status save_named(const char *who, const char *path, const named *v, json_t *meta) {
  kn_tensor **cont = calloc((size_t)(v->n ? v->n : 1), sizeof *cont);
  if (!cont) return kn__oom();
  kn_status st = KN_OK;
  kn_scope_begin();
  for (int i = 0; i < v->n && st == KN_OK; i++) {
    cont[i] = kn_contiguous(v->t[i]);
    if (!cont[i]) st = kn_last_status();
    else if (!kn__st_dtype_name(kn_tensor_dtype(cont[i])))
      st = kn__error(KN_EDTYPE, "%s: tensor '%s' has dtype %s, which safetensors cannot "
                                "store", who, v->name[i], kn_dtype_name(kn_tensor_dtype(cont[i])));
  }
  if (st == KN_OK && (st = write_file(path, v, cont, meta)) != KN_OK) kn__error_context("%s", who);
  kn_scope_end();
  free(cont);
  return st;
}

kn_status kn_save(kn_module *m, const char *path) {
  if (!m || !path) return kn__error(KN_EINVAL, "kn_save: expected a module and a path");
  named v;
  kn_status st = collect(m, NULL, &v);
  if (st != KN_OK) return st;
  json_t *meta = json_pack("{s:s}", "format", "pt");
  const char *prev = kn__data_api_begin("kn_save");
  st = meta ? save_named("kn_save", path, &v, meta) : kn__oom();
  kn__data_api_end(prev);
  json_decref(meta);
  named_free(&v);
  return st;
}

/* ---- reading ------------------------------------------------------------------------ */
static void put_shape(kn__sb *sb, int nd, const int64_t *s) {
  kn__sb_putc(sb, '[');
  for (int d = 0; d < nd; d++) kn__sb_printf(sb, "%s%lld", d ? ", " : "", (long long)s[d]);
  kn__sb_putc(sb, ']');
}

static void list_keys(kn__sb *sb, const char *what, const char **keys, int n) {
  if (!n) return;
  kn__sb_printf(sb, "\n\t%s key(s) in state_dict: ", what);
  for (int i = 0; i < n; i++) kn__sb_printf(sb, "%s\"%s\"", i ? ", " : "", keys[i]);
  kn__sb_puts(sb, ".");
}

static void mismatches(kn__sb *sb, const named *v, const kn__st_file *f, int *nerr) {
  for (int i = 0; i < v->n; i++) {
    const kn__st_entry *e = kn__st_find(f, v->name[i]);
    if (!e) continue;
    kn_tensor *t = v->t[i];
    bool same = e->ndim == kn_ndim(t);
    for (int d = 0; same && d < e->ndim; d++) same = e->shape[d] == kn_size(t, d);
    if (!same) {
      kn__sb_printf(sb, "\n\tsize mismatch for %s: copying a param with shape ", v->name[i]);
      put_shape(sb, e->ndim, e->shape);
      kn__sb_puts(sb, " from checkpoint, the shape in current model is ");
      put_shape(sb, kn_ndim(t), kn_sizes(t));
      kn__sb_puts(sb, ".");
      (*nerr)++;
    } else if (e->dtype != kn_tensor_dtype(t)) {
      kn__sb_printf(sb, "\n\tdtype mismatch for %s: the checkpoint has %s (%s), the tensor in "
                        "current model is %s.", v->name[i], kn__st_dtype_name(e->dtype),
                    kn_dtype_name(e->dtype), kn_dtype_name(kn_tensor_dtype(t)));
      (*nerr)++;
    }
  }
}

/* Every difference between the file and the destination, or KN_OK. */
static kn_status compare(const named *v, const kn__st_file *f, const char *what) {
  const char **missing = calloc((size_t)v->n + 1, sizeof *missing);
  const char **unexpected = calloc((size_t)f->n + 1, sizeof *unexpected);
  if (!missing || !unexpected) {
    free(missing), free(unexpected);
    return kn__oom();
  }
  int nm = 0, nu = 0, nerr = 0;
  for (int i = 0; i < v->n; i++)
    if (!kn__st_find(f, v->name[i])) missing[nm++] = v->name[i];
  for (int j = 0; j < f->n; j++) {
    bool known = false;
    for (int i = 0; i < v->n && !known; i++) known = !strcmp(v->name[i], f->entries[j].name);
    if (!known) unexpected[nu++] = f->entries[j].name;
  }
  kn__sb sb;
  kn__sb_init(&sb);
  kn__sb_printf(&sb, "Error(s) in loading state_dict for %s:", what);
  list_keys(&sb, "Missing", missing, nm);
  list_keys(&sb, "Unexpected", unexpected, nu);
  mismatches(&sb, v, f, &nerr);
  kn_status st = nm + nu + nerr ? kn__error(KN_EINVAL, "%s", kn__sb_cstr(&sb)) : KN_OK;
  kn__sb_fini(&sb);
  free(missing), free(unexpected);
  return st;
}

/* Temporaries for every value first, then the copies (which cannot fail
** on matching shapes and dtypes). */
static kn_status commit(const named *v, const kn__st_file *f) {
  kn_status st = KN_OK;
  kn_scope_begin();
  kn_tensor **tmp = calloc((size_t)v->n + 1, sizeof *tmp);
  if (!tmp) st = kn__oom();
  for (int i = 0; i < v->n && st == KN_OK; i++) {
    const kn__st_entry *e = kn__st_find(f, v->name[i]);
    tmp[i] = kn_from_array(e->data, e->ndim, e->shape, e->dtype);
    if (!tmp[i]) st = kn_last_status();
  }
  bool prev = kn_no_grad_begin();
  for (int i = 0; i < v->n && st == KN_OK; i++) st = kn_copy_(v->t[i], tmp[i]);
  kn_no_grad_end(prev);
  free(tmp);
  kn_scope_end();
  return st;
}

/* Read + parse path; on success the caller frees *buf and *f. */
static kn_status open_checkpoint(const char *path, uint8_t **buf, kn__st_file *f) {
  size_t len = 0;
  char *text = NULL;
  kn_status st = kn__file_read(path, "a safetensors file", &text, &len);
  *buf = (uint8_t *)text;
  if (st == KN_OK && (st = kn__st_parse(*buf, len, f)) != KN_OK) {
    kn__error_context("loading '%s'", path);
    free(*buf);
    *buf = NULL;
  }
  return st;
}

static kn_status load_named(const char *path, kn_module *m, const kn_optimizer *opt,
                            const char *what, kn__st_file *f) {
  named v;
  kn_status st = collect(m, opt, &v);
  if (st != KN_OK) return st;
  st = compare(&v, f, what);
  if (st == KN_OK) st = commit(&v, f);
  else kn__error_context("loading '%s'", path);
  named_free(&v);
  return st;
}

kn_status kn_load(kn_module *m, const char *path) {
  if (!m || !path) return kn__error(KN_EINVAL, "kn_load: expected a module and a path");
  uint8_t *buf = NULL;
  kn__st_file f;
  kn_status st = open_checkpoint(path, &buf, &f);
  if (st != KN_OK) return st;
  const char *type = kn_nn_type(m);
  const char *prev = kn__data_api_begin("kn_load");
  st = load_named(path, m, NULL, type ? type : "Module", &f);
  kn__data_api_end(prev);
  kn__st_free(&f);
  free(buf);
  return st;
}

/* ---- optimizer state ------------------------------------------------------------------ */
/* %.17g (which reads back exactly) in the "C" locale, whatever LC_NUMERIC
** the program set: a file reads the same everywhere. */
static kn_status format_double(char *buf, size_t n, double v) {
  locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (!c) return kn__oom();
  locale_t was = uselocale(c);
  snprintf(buf, n, "%.17g", v);
  uselocale(was);
  freelocale(c);
  return KN_OK;
}

/* strtod in the "C" locale into *ok: false unless all of s is one number. */
static kn_status parse_double(const char *s, double *out, bool *ok) {
  locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  if (!c) return kn__oom();
  char *end = NULL;
  *out = strtod_l(s, &end, c);
  freelocale(c);
  *ok = end != s && !*end;
  return KN_OK;
}

/* __metadata__: the type, the step count, the number of parameters and the
** hyperparameters besides lr (doubles as %.17g, which reads back exactly). */
static json_t *optim_meta(kn_optimizer *opt) {
  char steps[32], np[32], val[40];
  snprintf(steps, sizeof steps, "%lld", (long long)kn_optim_steps(opt));
  snprintf(np, sizeof np, "%d", kn_optim_num_params(opt));
  json_t *meta = json_pack("{s:s, s:s, s:s}", "optimizer", kn_optim_name(opt), "steps", steps,
                           "num_params", np);
  kn_optim_options o = kn__optim_options(opt);
  int n = 0;
  const kn__optim_field *fl = kn__optim_fields(opt, &n);
  for (int i = 0; meta && i < n; i++) {
    const char *p = (const char *)&o + fl[i].offset;
    if (fl[i].is_bool) snprintf(val, sizeof val, "%s", *(const bool *)p ? "true" : "false");
    else if (format_double(val, sizeof val, *(const double *)p) != KN_OK) val[0] = '\0';
    if (!val[0] || json_object_set_new(meta, fl[i].name, json_string(val)))
      json_decref(meta), meta = NULL;
  }
  return meta;
}

kn_status kn_optim_save(kn_optimizer *opt, const char *path) {
  if (!opt || !path) return kn__error(KN_EINVAL, "kn_optim_save: expected an optimizer and a path");
  named v;
  kn_status st = collect(kn_optim_state(opt), opt, &v);
  if (st != KN_OK) return st;
  json_t *meta = optim_meta(opt);
  st = meta ? save_named("kn_optim_save", path, &v, meta) : kn__oom();
  json_decref(meta);
  named_free(&v);
  return st;
}

/* A decimal integer in [0, max], digits only. */
static bool parse_count(const char *s, int64_t max, int64_t *out) {
  int64_t v = 0;
  if (!s || !*s) return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (max - (*s - '0')) / 10) return false;
    v = v * 10 + (*s - '0');
  }
  *out = v;
  return true;
}

static kn_status check_optim_meta(kn_optimizer *opt, const kn__st_file *f, int64_t *steps) {
  const char *name = json_string_value(json_object_get(f->metadata, "optimizer"));
  const char *np = json_string_value(json_object_get(f->metadata, "num_params"));
  const char *sp = json_string_value(json_object_get(f->metadata, "steps"));
  int64_t n = 0;
  if (!name || !np || !sp)
    return kn__error(KN_EINVAL, "not an optimizer checkpoint: __metadata__ needs optimizer, "
                                "num_params and steps");
  if (strcmp(name, kn_optim_name(opt)))
    return kn__error(KN_EINVAL, "the checkpoint holds %s state, the optimizer is %s", name,
                     kn_optim_name(opt));
  if (!parse_count(np, INT32_MAX, &n) || !parse_count(sp, INT64_MAX, steps))
    return kn__error(KN_EPARSE, "__metadata__: num_params '%.40s' and steps '%.40s' must be "
                                "non-negative decimal integers", np, sp);
  if (n != kn_optim_num_params(opt))
    return kn__error(KN_EINVAL, "the checkpoint has state for %s parameters, the optimizer "
                                "has %d", np, kn_optim_num_params(opt));
  return KN_OK;
}

/* One hyperparameter from __metadata__ into o (absent: o keeps the
** optimizer's own value, as files written before they were recorded). */
static kn_status read_field(const kn__st_file *f, const kn__optim_field *fl,
                            kn_optim_options *o) {
  const char *s = json_string_value(json_object_get(f->metadata, fl->name));
  char *p = (char *)o + fl->offset;
  if (!s) return KN_OK;
  if (fl->is_bool && (!strcmp(s, "true") || !strcmp(s, "false"))) {
    *(bool *)p = s[0] == 't';
    return KN_OK;
  }
  double d = 0;
  bool ok = false;
  if (!fl->is_bool && parse_double(s, &d, &ok) != KN_OK) return KN_ENOMEM;
  if (!ok)
    return kn__error(KN_EPARSE, "__metadata__ '%s' is '%.40s', expected %s", fl->name, s,
                     fl->is_bool ? "true or false" : "a number");
  *(double *)p = d;
  return KN_OK;
}

/* The options the checkpoint holds, checked with the constructor's rules. */
static kn_status read_options(kn_optimizer *opt, const kn__st_file *f, kn_optim_options *o) {
  *o = kn__optim_options(opt);
  int n = 0;
  const kn__optim_field *fl = kn__optim_fields(opt, &n);
  kn_status st = KN_OK;
  for (int i = 0; i < n && st == KN_OK; i++) st = read_field(f, &fl[i], o);
  const kn__st_entry *lr = kn__st_find(f, "lr");
  if (lr && lr->dtype == KN_FLOAT64 && lr->ndim == 0) /* else compare() names the mismatch */
    memcpy(&o->lr, lr->data, sizeof o->lr);
  const char *field = NULL;
  if (st == KN_OK && (st = kn__optim_validate(opt, o, &field)) != KN_OK)
    kn__error_context("hyperparameter '%s' in the checkpoint", field);
  return st;
}

/* The parameters' state buffers the file has entries for (zeros until the
** copy). */
static kn_status ensure_states(kn_optimizer *opt, const kn__st_file *f) {
  kn_status st = KN_OK;
  for (int i = 0; i < kn_optim_num_params(opt) && st == KN_OK; i++) {
    char key[40];
    snprintf(key, sizeof key, "%d.", i);
    bool any = false;
    for (int j = 0; j < f->n && !any; j++) any = !strncmp(f->entries[j].name, key, strlen(key));
    if (any) st = kn__optim_ensure_state(opt, i);
  }
  return st;
}

/* Options first (they decide which state buffers exist), then the tensors;
** a failure puts the options back. */
kn_status kn_optim_load(kn_optimizer *opt, const char *path) {
  if (!opt || !path) return kn__error(KN_EINVAL, "kn_optim_load: expected an optimizer and a path");
  uint8_t *buf = NULL;
  kn__st_file f;
  kn_status st = open_checkpoint(path, &buf, &f);
  if (st != KN_OK) return st;
  int64_t steps = 0;
  kn_optim_options was = kn__optim_options(opt), o;
  st = check_optim_meta(opt, &f, &steps);
  if (st == KN_OK) st = read_options(opt, &f, &o);
  if (st != KN_OK) kn__error_context("loading '%s'", path);
  bool applied = st == KN_OK && (st = kn__optim_apply(opt, &o)) == KN_OK;
  if (st == KN_OK) st = ensure_states(opt, &f);
  if (st == KN_OK) st = load_named(path, kn_optim_state(opt), opt, kn_optim_name(opt), &f);
  if (st == KN_OK) kn__optim_restored(opt, steps);
  else if (applied) kn__optim_apply(opt, &was);
  kn__st_free(&f);
  free(buf);
  return st;
}
