/*
** graph/backend.c: the backend registry and the built-in "eager" backend.
**
** A backend turns a graph module into a callable (kn_backend_fn). The
** registry maps names to backends for kn_compile's `backend` option; capture
** (dynamo), AOT and the code generator all reach backends through it, so it
** lives in the graph layer below them. "eager" (the graph interpreter) is
** built in. Entries are never removed: names and functions returned by a
** lookup stay valid for the life of the process. One mutex guards the table.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "graph/graph.h"
#include "tensor/tensor.h"

/* ---- the eager backend: the graph interpreter ------------------------------ */
static kn_status eager_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  kn_status st = kn__gprog_run(state, in, nin, out, nout);
  return st == KN_OK ? kn__autorelease_many(out, nout) : st;
}

static void eager_free(void *state) { kn__gprog_free(state); }

kn_status kn__eager_compile(kn_graph_module *gm, kn_compiled_graph *out) {
  kn__gprog *p = NULL;
  kn_status st = kn__gprog_new(kn__graph_module_graph(gm), &p);
  if (st != KN_OK) return st;
  *out = (kn_compiled_graph){eager_run, p, eager_free};
  return KN_OK;
}

static kn_status eager_backend(kn_graph_module *gm, kn_tensor *const *examples, int n, void *ud,
                               kn_compiled_graph *out) {
  (void)examples;
  (void)n;
  (void)ud;
  if (!gm || !out) return kn__error(KN_EINVAL, "eager backend: expected a graph module");
  return kn__eager_compile(gm, out);
}

/* ---- the registry ------------------------------------------------------------ */
typedef struct backend_entry {
  const char *name; /* owned (static for the built-ins) */
  kn_backend_fn fn;
  void *ud;
} backend_entry;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static backend_entry builtin[] = {{"eager", eager_backend, NULL}};
#define NBUILTIN ((int)(sizeof builtin / sizeof builtin[0]))
static backend_entry *reg;  /* registered after the built-ins, in order */
static int nreg, capreg;

static const backend_entry *entry_at(int i) { return i < NBUILTIN ? &builtin[i] : &reg[i - NBUILTIN]; }

/* Caller holds reg_lock. */
static const backend_entry *find_locked(const char *name) {
  for (int i = 0; i < NBUILTIN + nreg; i++)
    if (!strcmp(entry_at(i)->name, name)) return entry_at(i);
  return NULL;
}

static bool valid_name(const char *name) {
  if (!name || !*name) return false;
  for (const char *p = name; *p; p++)
    if (!(*p == '_' || *p == '-' || *p == '.' || (*p >= 'a' && *p <= 'z') ||
          (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
      return false;
  return true;
}

static kn_status add_locked(const char *name, kn_backend_fn fn, void *ud) {
  if (find_locked(name))
    return kn__error(KN_EINVAL, "kn_register_backend: duplicate name: '%s' is already registered",
                     name);
  if (nreg == capreg) {
    int cap = capreg ? capreg * 2 : 8;
    backend_entry *r = realloc(reg, (size_t)cap * sizeof *r);
    if (!r) return kn__oom();
    reg = r;
    capreg = cap;
  }
  char *copy = strdup(name);
  if (!copy) return kn__oom();
  reg[nreg++] = (backend_entry){copy, fn, ud};
  return KN_OK;
}

kn_status kn_register_backend(const char *name, kn_backend_fn fn, void *ud) {
  if (!valid_name(name))
    return kn__error(KN_EINVAL,
                     "kn_register_backend: expected a name of letters, digits, '_', '-' or '.', "
                     "got %s%s%s", name ? "'" : "", name ? name : "NULL", name ? "'" : "");
  if (!fn)
    return kn__error(KN_EINVAL, "kn_register_backend: expected a backend function for '%s', got NULL",
                     name);
  pthread_mutex_lock(&reg_lock);
  kn_status st = add_locked(name, fn, ud);
  pthread_mutex_unlock(&reg_lock);
  return st;
}

/* "\"eager\", \"mine\"" into sb. Caller holds reg_lock. */
static void names_locked(kn__sb *sb) {
  for (int i = 0; i < NBUILTIN + nreg; i++)
    kn__sb_printf(sb, "%s\"%s\"", i ? ", " : "", entry_at(i)->name);
}

kn_status kn__backend_lookup(const char *name, const char **canon, kn_backend_fn *fn, void **ud) {
  pthread_mutex_lock(&reg_lock);
  const backend_entry *e = find_locked(name ? name : "eager");
  if (e) {
    if (canon) *canon = e->name;
    if (fn) *fn = e->fn;
    if (ud) *ud = e->ud;
    pthread_mutex_unlock(&reg_lock);
    return KN_OK;
  }
  kn__sb sb;
  kn__sb_init(&sb);
  names_locked(&sb);
  pthread_mutex_unlock(&reg_lock);
  kn_status st = kn__error(KN_EINVAL, "unknown backend '%s' (registered: %s)", name,
                           kn__sb_failed(&sb) ? "?" : kn__sb_cstr(&sb));
  kn__sb_fini(&sb);
  return st;
}

int kn_list_backends(const char **names, int cap) {
  pthread_mutex_lock(&reg_lock);
  int n = NBUILTIN + nreg;
  for (int i = 0; names && i < n && i < cap; i++) names[i] = entry_at(i)->name;
  pthread_mutex_unlock(&reg_lock);
  return n;
}

kn_status kn_backend_compile(const char *name, kn_graph_module *gm,
                             kn_tensor *const *example_inputs, int ninputs,
                             kn_compiled_graph *out) {
  if (out) memset(out, 0, sizeof *out);
  if (!name || !gm || !out || ninputs < 0 || (ninputs > 0 && !example_inputs))
    return kn__error(KN_EINVAL, "kn_backend_compile: expected a backend name, a graph module, "
                     "ninputs >= 0 example inputs and an output; found name %s, module %s, "
                     "%d inputs at %s and output %s", name ? name : "NULL", gm ? "set" : "NULL",
                     ninputs, example_inputs ? "an array" : "NULL", out ? "set" : "NULL");
  kn_backend_fn fn = NULL;
  void *ud = NULL;
  const char *canon = NULL;
  if (kn__backend_lookup(name, &canon, &fn, &ud) != KN_OK)
    return kn__error_context("kn_backend_compile");
  kn_status st = fn(gm, example_inputs, ninputs, ud, out);
  if (st == KN_OK && !out->run) st = kn__error(KN_EINVAL, "it returned no callable");
  if (st == KN_OK) return KN_OK;
  if (out->free_state) out->free_state(out->state);
  memset(out, 0, sizeof *out);
  if (kn_last_status() == KN_OK) /* a backend that failed without saying why */
    kn__error(st, "it returned %s", kn_status_name(st));
  return kn__error_context("kn_backend_compile: backend '%s' failed", canon);
}
