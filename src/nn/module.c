/*
** nn/module.c: layer records on kn_module, forward dispatch, train/eval,
** parameter iteration, zero_grad and print(model).
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dynamo/dynamo.h"
#include "nn/nn_int.h"

kn_module *kn__nn_new(const kn__nn_type *t, kn__nn_layer **out) {
  kn_module *m = kn_module_new();
  kn__nn_layer *l = calloc(1, sizeof *l);
  if (!m || !l) {
    kn_module_free(m);
    free(l);
    kn__oom();
    return NULL;
  }
  l->type = t;
  l->training = true;
  kn__module_set_ext(m, l, free);
  if (out) *out = l;
  return m;
}

kn__nn_layer *kn__nn_layer_of(const kn_module *m) { return kn__module_ext(m); }

const char *kn_nn_type(const kn_module *m) {
  kn__nn_layer *l = kn__nn_layer_of(m);
  return l ? l->type->name : NULL;
}

kn_tensor *kn__nn_get(const kn__nn_ctx *ctx, const char *name) {
  char path[600];
  snprintf(path, sizeof path, "%s%s", ctx->prefix, name);
  return kn_module_get(ctx->root, path);
}

kn_status kn__nn_child_ctx(const kn__nn_ctx *ctx, const char *name, kn__nn_ctx *out) {
  out->root = ctx->root;
  int n = snprintf(out->prefix, sizeof out->prefix, "%s%s.", ctx->prefix, name);
  if (n < 0 || (size_t)n >= sizeof out->prefix)
    return kn__error(KN_ERANGE, "layer path too long at '%s'", name);
  return KN_OK;
}

kn_tensor *kn__nn_forward_at(kn_module *m, const kn__nn_ctx *ctx, kn_tensor *x) {
  kn__nn_layer *l = kn__nn_layer_of(m);
  if (!l) {
    kn__error(KN_EINVAL, "kn_nn_forward: expected a layer (a module made by kn_nn_*), "
                         "found a plain kn_module");
    return NULL;
  }
  if (!x) {
    kn__error(KN_EINVAL, "%s.forward: expected an input tensor, found NULL", l->type->name);
    return NULL;
  }
  return l->type->forward(m, l, ctx, x);
}

kn_tensor *kn_nn_forward(kn_module *m, kn_tensor *input) {
  kn__nn_ctx ctx = {m, ""};
  return kn__nn_forward_at(m, &ctx, input);
}

kn_module *kn__nn_child(kn_module *m, const char *name) {
  for (int i = 0; i < kn__module_nitems(m); i++) {
    int kind;
    kn_tensor *t;
    kn_module *c;
    const char *n = kn__module_item(m, i, &kind, &t, &c);
    if (kind == 2 && !strcmp(n, name)) return c;
  }
  return NULL;
}

kn_tensor *kn__nn_child_forward(kn_module *m, const kn__nn_ctx *ctx, const char *name,
                                kn_tensor *x) {
  kn__nn_ctx cc;
  kn_module *c = kn__nn_child(m, name);
  if (!c) {
    kn__error(KN_EINTERNAL, "layer has no child '%s'", name);
    return NULL;
  }
  return kn__nn_child_ctx(ctx, name, &cc) == KN_OK ? kn__nn_forward_at(c, &cc, x) : NULL;
}

void kn_nn_train(kn_module *m, bool training) {
  kn__nn_layer *l = kn__nn_layer_of(m);
  if (l) l->training = training;
  for (int i = 0; i < kn__module_nitems(m); i++) {
    int kind;
    kn_tensor *t;
    kn_module *c;
    kn__module_item(m, i, &kind, &t, &c);
    if (kind == 2) kn_nn_train(c, training);
  }
}

bool kn_nn_is_training(const kn_module *m) {
  kn__nn_layer *l = kn__nn_layer_of(m);
  return l ? l->training : false;
}

/* ---- iteration ------------------------------------------------------------------ */
typedef struct named_visit {
  bool params;
  kn_nn_tensor_fn fn;
  void *ud;
} named_visit;

static kn_status named_cb(void *ud, const char *suffix, const char *path, kn_tensor *t,
                          bool is_param) {
  (void)suffix;
  named_visit *v = ud;
  return is_param == v->params ? v->fn(v->ud, path, t) : KN_OK;
}

kn_status kn_nn_named_tensors(kn_module *m, bool params, kn_nn_tensor_fn fn, void *ud) {
  if (!m || !fn) return kn__error(KN_EINVAL, "kn_nn_named_tensors: expected a module and a "
                                             "callback, found NULL");
  named_visit v = {params, fn, ud};
  return kn__module_visit(m, named_cb, &v);
}

typedef struct plist {
  kn_tensor **items;
  int n, cap;
  int64_t numel;
} plist;

static kn_status plist_add(void *ud, const char *name, kn_tensor *t) {
  (void)name;
  plist *p = ud;
  p->numel += kn_numel(t);
  if (p->n == p->cap) {
    int nc = p->cap ? p->cap * 2 : 16;
    kn_tensor **ni = realloc(p->items, sizeof *ni * (size_t)nc);
    if (!ni) return kn__oom();
    p->items = ni;
    p->cap = nc;
  }
  p->items[p->n++] = t;
  return KN_OK;
}

int kn_nn_parameters(kn_module *m, kn_tensor ***out) {
  plist p = {0};
  kn_status st = out ? kn_nn_named_tensors(m, true, plist_add, &p)
                     : kn__error(KN_EINVAL, "kn_nn_parameters: expected an output pointer");
  if (st != KN_OK) {
    free(p.items);
    return st;
  }
  *out = p.items;
  return p.n;
}

static kn_status count_cb(void *ud, const char *name, kn_tensor *t) {
  (void)name;
  *(int64_t *)ud += kn_numel(t);
  return KN_OK;
}

int64_t kn_nn_num_parameters(kn_module *m) {
  int64_t n = 0;
  return kn_nn_named_tensors(m, true, count_cb, &n) == KN_OK ? n : 0;
}

static kn_status zero_cb(void *ud, const char *name, kn_tensor *t) {
  (void)ud, (void)name;
  kn_set_grad(t, NULL);
  return KN_OK;
}

void kn_nn_zero_grad(kn_module *m) {
  if (m) kn_nn_named_tensors(m, true, zero_cb, NULL);
}

/* ---- print(model) -------------------------------------------------------------- */
/* Appends s to sb, indenting every line after the first by two spaces. */
static void put_indented(kn__sb *sb, const char *s) {
  for (; *s; s++) {
    kn__sb_putc(sb, *s);
    if (*s == '\n') kn__sb_puts(sb, "  ");
  }
}

static void repr_into(const kn_module *m, kn__sb *sb) {
  kn__nn_layer *l = kn__nn_layer_of(m);
  kn__sb_printf(sb, "%s(", l ? l->type->name : "Module");
  if (l && l->type->extra_repr) l->type->extra_repr(l, sb);
  bool any = false;
  for (int i = 0; i < kn__module_nitems(m); i++) {
    int kind;
    kn_tensor *t;
    kn_module *c;
    const char *name = kn__module_item(m, i, &kind, &t, &c);
    if (kind != 2) continue;
    kn__sb child;
    kn__sb_init(&child);
    repr_into(c, &child);
    kn__sb_printf(sb, "\n  (%s): ", name);
    put_indented(sb, kn__sb_cstr(&child));
    kn__sb_fini(&child);
    any = true;
  }
  kn__sb_puts(sb, any ? "\n)" : ")");
}

char *kn_nn_repr(const kn_module *m) {
  if (!m) {
    kn__error(KN_EINVAL, "kn_nn_repr: expected a module, found NULL");
    return NULL;
  }
  kn__sb sb;
  kn__sb_init(&sb);
  repr_into(m, &sb);
  if (kn__sb_failed(&sb)) {
    kn__sb_fini(&sb);
    kn__oom();
    return NULL;
  }
  return kn__sb_take(&sb);
}

kn_status kn_nn_print(const kn_module *m, FILE *out) {
  char *s = kn_nn_repr(m);
  if (!s) return kn_last_status();
  int rc = fprintf(out ? out : stdout, "%s\n", s);
  free(s);
  return rc < 0 ? kn__error(KN_EIO, "kn_nn_print: write failed") : KN_OK;
}
