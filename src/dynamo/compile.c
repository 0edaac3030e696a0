/*
** dynamo/compile.c: compiled functions. kn_compile_* records the function,
** its name and location and the options; kn_call checks the cache entries
** (most recently used first), runs a hit, and on a miss gathers the guard
** failure reasons (recompile message, recompile_reasons, guard_fail_fn),
** applies the cache limit (warning once, then new inputs run eagerly while
** the existing entries stay in use) or traces a new entry. kn_reset forgets
** every compiled function's state.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/dynamo.h"
#include "dynamo/tracer.h"
#include "logging/log.h"
#include "tensor/tensor.h"
#include "trace/trace.h"

#define URL "https://pytorch.org/docs/main/torch.compiler_troubleshooting.html"

/* ---- process-wide state (reset by kn_reset) --------------------------------------- */
static pthread_mutex_t glock = PTHREAD_MUTEX_INITIALIZER;
static int64_t frame_counter;
static int compiled_fn_counter;
static kn__hashmap break_sites;
static bool break_sites_init;
static kn_compiled *all_fns;

int64_t kn__next_frame_id(void) {
  pthread_mutex_lock(&glock);
  int64_t id = frame_counter++;
  pthread_mutex_unlock(&glock);
  return id;
}

int kn__next_compiled_fn_number(void) {
  pthread_mutex_lock(&glock);
  int n = ++compiled_fn_counter;
  pthread_mutex_unlock(&glock);
  return n;
}

bool kn__graph_break_first_at(const char *file, int line) {
  char key[600];
  snprintf(key, sizeof key, "%s:%d", file ? file : "?", line);
  pthread_mutex_lock(&glock);
  if (!break_sites_init) {
    kn__hm_init(&break_sites, true);
    break_sites_init = true;
  }
  bool found = false;
  (void)kn__hm_get(&break_sites, key, &found);
  if (!found) (void)kn__hm_put(&break_sites, key, NULL);
  pthread_mutex_unlock(&glock);
  return !found;
}

void kn__dynamo_reset_globals(void) {
  pthread_mutex_lock(&glock);
  frame_counter = 0;
  compiled_fn_counter = 0;
  if (break_sites_init) {
    kn__hm_fini(&break_sites);
    break_sites_init = false;
  }
  pthread_mutex_unlock(&glock);
}

/* ---- names ------------------------------------------------------------------------- */
const char *kn__default_arg_name(int i, char *buf, size_t n) {
  if (i < 26) snprintf(buf, n, "%c", 'a' + i);
  else snprintf(buf, n, "arg%d", i);
  return buf;
}

void kn__arg_source(const kn_compiled *f, int i, char *buf, size_t n) {
  char d[32];
  const char *nm = i < f->narg_names && f->arg_names[i] ? f->arg_names[i]
                                                        : kn__default_arg_name(i, d, sizeof d);
  snprintf(buf, n, "L['%s']", nm);
}

/* ---- creation ------------------------------------------------------------------------ */
static void free_frame(kn__frame *fr) {
  free(fr->name);
  free(fr->file);
}

static void free_maps(kn_compiled *f) {
  if (f->resume) {
    const kn__hm_slot *sl;
    for (size_t i = 0; kn__hm_next(f->resume, &i, &sl);) {
      free_frame(sl->val);
      free(sl->val);
    }
    kn__hm_fini(f->resume);
    kn__hm_init(f->resume, true);
  }
  if (f->dyn_state) {
    const kn__hm_slot *sl;
    for (size_t i = 0; kn__hm_next(f->dyn_state, &i, &sl);) free(sl->val);
    kn__hm_fini(f->dyn_state);
    kn__hm_init(f->dyn_state, true);
  }
}

static void drop_entries(kn_compiled *f) {
  while (f->entries) {
    kn__entry *e = f->entries;
    f->entries = e->next;
    kn__entry_free(e);
  }
  f->nentries = 0;
}

static void forget(kn_compiled *f) {
  drop_entries(f);
  free_maps(f);
  f->ncompiles = 0;
  f->limit_hit = false;
  f->skip = false;
  free(f->last_reason);
  f->last_reason = NULL;
  f->frame.frame_id = -1;
  f->frame.ncompiles = 0;
}

static kn_compiled *make(kn_fn fn, void *ud, void (*tfn)(void), int nargs, const char *name,
                         const char *file, int line, const kn_compile_options *opts) {
  if ((!fn && !tfn) || !name || nargs < -1) {
    kn__error(KN_EINVAL, "kn_compile: expected a function, its name and nargs >= -1; found %s, "
              "%s and %d", fn || tfn ? "a function" : "NULL", name ? name : "NULL", nargs);
    return NULL;
  }
  kn_compile_options o = opts ? *opts : (kn_compile_options){0};
  if (!o.backend_fn && o.backend && strcmp(o.backend, "eager")) {
    kn__error(KN_EINVAL, "kn_compile: unknown backend '%s' (expected \"eager\" or a backend_fn)",
              o.backend);
    return NULL;
  }
  if (o.narg_names < 0) {
    kn__error(KN_EINVAL, "kn_compile: narg_names must be >= 0 (0 = NULL-terminated), got %d",
              o.narg_names);
    return NULL;
  }
  if (o.cache_size_limit < 0 || o.accumulated_cache_size_limit < 0) {
    kn__error(KN_EINVAL, "kn_compile: cache limits must be >= 0 (0 = default), got %d and %d",
              o.cache_size_limit, o.accumulated_cache_size_limit);
    return NULL;
  }
  if (!o.cache_size_limit) o.cache_size_limit = 8;
  if (!o.accumulated_cache_size_limit) o.accumulated_cache_size_limit = 256;
  kn_compiled *f = calloc(1, sizeof *f);
  if (!f) goto oom;
  f->fn = fn;
  f->ud = ud;
  f->tfn = tfn;
  f->nargs = nargs;
  f->opts = o;
  f->opts.arg_names = NULL;
  f->frame.frame_id = -1;
  /* the definition's location from the debug info (first line of the
  ** function's code), else found by name in the source file */
  void (*addr)(void) = tfn ? tfn : (void (*)(void))fn;
  kn__srcframe d = kn__srcloc_symbolize((void *)((uintptr_t)addr + 1));
  if (d.file && d.line > 0) {
    file = d.file;
    line = d.line;
  } else if (file) {
    line = kn__srcloc_def_line(file, name, line);
  }
  f->frame.name = strdup(name);
  f->frame.file = strdup(file ? file : "<unknown>");
  f->frame.line = line;
  f->resume = malloc(sizeof *f->resume);
  if (f->resume) kn__hm_init(f->resume, true); /* before any goto oom: freed there */
  f->dyn_state = malloc(sizeof *f->dyn_state);
  if (f->dyn_state) kn__hm_init(f->dyn_state, true);
  if (!f->frame.name || !f->frame.file || !f->resume || !f->dyn_state) goto oom;
  if (o.arg_names) {
    /* without a count: up to the NULL entry, and never past nargs */
    int n = o.narg_names;
    while (o.narg_names == 0 && (nargs < 0 || n < nargs) && o.arg_names[n]) n++;
    f->arg_names = calloc((size_t)(n ? n : 1), sizeof *f->arg_names);
    if (!f->arg_names) goto oom;
    f->narg_names = n;
    for (int i = 0; i < n; i++)
      if (o.arg_names[i] && !(f->arg_names[i] = strdup(o.arg_names[i]))) goto oom;
  }
  pthread_mutex_lock(&glock);
  f->next_all = all_fns;
  if (all_fns) all_fns->prev_all = f;
  all_fns = f;
  pthread_mutex_unlock(&glock);
  return f;
oom:
  if (f) {
    f->next_all = f->prev_all = f; /* not linked */
    kn_compiled_free(f);
  }
  kn__oom();
  return NULL;
}

kn_compiled *kn_compile_fn(kn_fn fn, void *ud, int nargs, const char *name, const char *file,
                           int line, const kn_compile_options *opts) {
  return make(fn, ud, NULL, nargs, name, file, line, opts);
}

kn_compiled *kn_compile_tensor_fn(void (*fn)(void), int nargs, const char *name, const char *file,
                                  int line, const kn_compile_options *opts) {
  if (nargs < 1 || nargs > 4) {
    kn__error(KN_EINVAL, "kn_compile_tensor_fn: expected 1 to 4 tensor arguments, got %d", nargs);
    return NULL;
  }
  return make(NULL, NULL, fn, nargs, name, file, line, opts);
}

void kn_compiled_free(kn_compiled *f) {
  if (!f) return;
  if (f->next_all != f) {
    pthread_mutex_lock(&glock);
    if (f->prev_all) f->prev_all->next_all = f->next_all;
    else if (all_fns == f) all_fns = f->next_all;
    if (f->next_all) f->next_all->prev_all = f->prev_all;
    pthread_mutex_unlock(&glock);
  }
  drop_entries(f);
  if (f->resume || f->dyn_state) free_maps(f);
  if (f->resume) kn__hm_fini(f->resume);
  if (f->dyn_state) kn__hm_fini(f->dyn_state);
  free(f->resume);
  free(f->dyn_state);
  for (int i = 0; i < f->narg_names; i++) free(f->arg_names[i]);
  free(f->arg_names);
  free_frame(&f->frame);
  free(f->last_reason);
  free(f);
}

void kn_reset(void) {
  pthread_mutex_lock(&glock);
  for (kn_compiled *f = all_fns; f; f = f->next_all) forget(f);
  pthread_mutex_unlock(&glock);
  kn__dynamo_reset_globals();
}

/* ---- calling the user function --------------------------------------------------------- */
static _Thread_local int base_depth;
int kn__user_base_depth(void) { return base_depth; }

__attribute__((noinline)) kn_status kn__invoke_user(kn_compiled *f, const kn_value *args,
                                                    int nargs, kn_value *result) {
  static _Thread_local int nesting;
  if (kn__trace_current() && nesting == 0) base_depth = kn__srcloc_base_depth("kn__invoke_user");
  nesting++;
  *result = kn_vnone();
  kn_value v = kn_vnone();
  kn_scope_begin();
  if (f->tfn) {
    kn_tensor *t[4] = {0};
    for (int i = 0; i < nargs && i < 4; i++) t[i] = args[i].u.t;
    kn_tensor *r = NULL;
    switch (nargs) {
    case 1: r = ((kn_tensor * (*)(kn_tensor *)) f->tfn)(t[0]); break;
    case 2: r = ((kn_tensor * (*)(kn_tensor *, kn_tensor *)) f->tfn)(t[0], t[1]); break;
    case 3:
      r = ((kn_tensor * (*)(kn_tensor *, kn_tensor *, kn_tensor *)) f->tfn)(t[0], t[1], t[2]);
      break;
    default:
      r = ((kn_tensor * (*)(kn_tensor *, kn_tensor *, kn_tensor *, kn_tensor *)) f->tfn)(
          t[0], t[1], t[2], t[3]);
      break;
    }
    v = kn_vtensor(r);
  } else {
    v = f->fn(args, nargs, f->ud);
  }
  nesting--;
  kn_status st = kn__value_clone(v, result);
  kn_scope_end();
  if (st == KN_OK && result->kind == KN_VTENSOR && !result->u.t)
    st = kn_last_status() != KN_OK ? kn_last_status()
                                   : kn__error(KN_EINVAL, "%s returned a NULL tensor", f->frame.name);
  return st;
}

kn_status kn__call_eager(kn_compiled *f, const kn_value *args, int nargs, kn_value *result) {
  size_t mark;
  kn__tuple_pool_mark(&mark);
  kn_status st = kn__invoke_user(f, args, nargs, result);
  kn__tuple_pool_release(mark);
  if (st != KN_OK) {
    kn_value_release(*result);
    *result = kn_vnone();
  }
  return st;
}

/* ---- recompiles ---------------------------------------------------------------------------- */
typedef struct miss {
  int n;
  char **reason;   /* per entry, newest first (NULL: passed) */
  char **cid;
} miss;

static void miss_free(miss *m) {
  for (int i = 0; i < m->n; i++) {
    free(m->reason[i]);
    free(m->cid[i]);
  }
  free(m->reason);
  free(m->cid);
}

static kn_status gather(kn_compiled *f, const kn_value *args, int nargs, bool verbose, miss *m) {
  m->n = 0;
  m->reason = calloc((size_t)(f->nentries ? f->nentries : 1), sizeof *m->reason);
  m->cid = calloc((size_t)(f->nentries ? f->nentries : 1), sizeof *m->cid);
  if (!m->reason || !m->cid) return kn__oom();
  for (kn__entry *e = f->entries; e; e = e->next) {
    char *r = kn__entry_reason(e, args, nargs, verbose);
    if (!r) r = strdup("a graph break answered differently (new branch)");
    char buf[64];
    kn__compile_id_format(e->cid, buf, sizeof buf);
    m->reason[m->n] = r;
    m->cid[m->n++] = strdup(buf);
  }
  return KN_OK;
}

static void indent_lines(kn__sb *sb, const char *text, const char *prefix) {
  const char *p = text;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    if (len) kn__sb_puts(sb, prefix);
    kn__sb_putn(sb, p, len);
    if (!nl) break;
    kn__sb_putc(sb, '\n');
    p = nl + 1;
  }
}

static char *recompile_message(kn_compiled *f, const miss *m, bool verbose) {
  kn__sb body = KN__SB_INIT;
  kn__sb_puts(&body, "triggered by the following guard failure(s):\n");
  for (int i = 0; i < m->n; i++) {
    if (verbose) {
      if (i) kn__sb_puts(&body, "\n\n");
      kn__sb_printf(&body, "guard %d failures:\n", i);
      indent_lines(&body, m->reason[i], "- ");
    } else {
      if (i) kn__sb_putc(&body, '\n');
      indent_lines(&body, m->reason[i], "- ");
    }
  }
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "Recompiling function %s in %s:%d\n", f->frame.name, f->frame.file,
                f->frame.line);
  indent_lines(&sb, kn__sb_cstr(&body), "    ");
  kn__sb_fini(&body);
  return kn__sb_take(&sb);
}

static char *reasons_json(const miss *m) {
  kn__sb sb = KN__SB_INIT;
  json_t *a = json_array();
  for (int i = 0; a && i < m->n; i++) {
    kn__sb_clear(&sb);
    kn__sb_printf(&sb, "%s: %s", m->cid[i], m->reason[i]);
    json_array_append_new(a, json_string(kn__sb_cstr(&sb)));
  }
  kn__sb_fini(&sb);
  char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return s;
}

static void limit_warning_body(kn_compiled *f, const miss *m, bool accumulated);
/* Logged inside the context of the compile that would have happened
** ("[0/8]"), as PyTorch does since 2.5. */
static void limit_warning(kn_compiled *f, const miss *m, bool accumulated) {
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, f->frame.frame_id, f->frame.ncompiles}, &saved);
  limit_warning_body(f, m, accumulated);
  kn__compile_ctx_leave(&saved);
}

static void limit_warning_body(kn_compiled *f, const miss *m, bool accumulated) {
  const char *lt = accumulated ? "accumulated_cache_size_limit" : "cache_size_limit";
  int lim = accumulated ? f->opts.accumulated_cache_size_limit : f->opts.cache_size_limit;
  kn__sb more = KN__SB_INIT;
  if (m->n > 1) kn__sb_printf(&more, " (+%d more; KILN_LOGS=\"recompiles\")", m->n - 1);
  KN_LOG(KN_LOG_DYNAMO_CONVERT_FRAME, KN_WARNING,
         "kiln.dynamo hit config.%s (%d)\n"
         "   function: '%s' (%s:%d)\n"
         "   last reason: %s: %s%s\n"
         "To log all recompilation reasons, use KILN_LOGS=\"recompiles\".\n"
         "Already compiled versions stay in use; new inputs run eagerly (raise "
         "kn_compile_options.%s to compile more).\n"
         "To diagnose recompilation issues, see " URL ".",
         lt, lim, f->frame.name, f->frame.file, f->frame.line, m->n ? m->cid[0] : "-",
         m->n ? m->reason[0] : "Unable to find recompilation reasons", kn__sb_cstr(&more), lt);
  kn__sb_fini(&more);
}

static void call_guard_fail_fn(kn_compiled *f, const miss *m) {
  if (!f->opts.guard_fail_fn) return;
  for (int i = 0; i < m->n; i++) {
    kn_guard_failure gf = {m->reason[i] && *m->reason[i] ? m->reason[i] : "unknown reason",
                           f->frame.name, m->cid[i]};
    f->opts.guard_fail_fn(&gf, f->opts.guard_fail_ud);
  }
}

static void wont_convert(kn_compiled *f) {
  int lvl = f->opts.suppress_errors ? KN_WARNING : KN_INFO;
  KN_LOG(KN_LOG_DYNAMO_CONVERT_FRAME, lvl,
         "WON'T CONVERT %s %s line %d \ndue to: \nTraceback (most recent call last):\n%s",
         f->frame.name, f->frame.file, f->frame.line, kn_last_error());
}

/* Trace and add an entry (or extend `into`); on failure the WON'T CONVERT
** policy applies. */
static kn_status compile_and_run(kn_compiled *f, const kn_value *args, int nargs, kn__entry *into,
                                 const char *rj, const char *msg, bool verbose, kn_value *out) {
  kn__entry *e = NULL;
  if (msg) {
    /* logged inside the new compile's context: the trace call enters it */
    kn__compile_ctx saved;
    kn_compile_id next = {-1, f->frame.frame_id, f->frame.ncompiles};
    kn__compile_ctx_enter(next, &saved);
    if (verbose) KN_LOG_ARTIFACT(KN_ART_RECOMPILES_VERBOSE, "%s", msg);
    else KN_LOG_ARTIFACT(KN_ART_RECOMPILES, "%s", msg);
    kn__compile_ctx_leave(&saved);
  }
  kn_status st = kn__trace_call(f, args, nargs, into, rj, &e, out);
  if (st == KN_OK) {
    f->ncompiles++;
    if (e) {
      e->next = f->entries;
      f->entries = e;
      f->nentries++;
    }
    return KN_OK;
  }
  wont_convert(f);
  if (!f->opts.suppress_errors || f->opts.fullgraph) return st;
  return kn__call_eager(f, args, nargs, out);
}

static void move_to_front(kn_compiled *f, kn__entry *prev, kn__entry *e) {
  if (!prev) return;
  prev->next = e->next;
  e->next = f->entries;
  f->entries = e;
}

static kn_status check_call(const char *api, kn_compiled *f, const kn_value *args, int nargs) {
  if (!f) return kn__error(KN_EINVAL, "%s: the compiled function is NULL", api);
  if (nargs < 0 || (nargs > 0 && !args) || (f->nargs >= 0 && nargs != f->nargs))
    return kn__error(KN_EINVAL, "%s: expected %d arguments, got %d%s", f->frame.name, f->nargs,
                     nargs, nargs > 0 && !args ? " at NULL" : "");
  if (f->tfn)
    for (int i = 0; i < nargs; i++)
      if (args[i].kind != KN_VTENSOR || !args[i].u.t)
        return kn__error(KN_EINVAL, "%s: argument %d: expected a tensor", f->frame.name, i);
  return KN_OK;
}

kn_status kn_call(kn_compiled *f, const kn_value *args, int nargs, kn_value *out) {
  if (!out) return kn__error(KN_EINVAL, "kn_call: out is NULL");
  *out = kn_vnone();
  kn_status cst = check_call("kn_call", f, args, nargs);
  if (cst != KN_OK) return cst;
  /* called while another compiled function is traced: inline it (its ops
  ** are recorded in the caller's graph) */
  if (f->skip || kn__trace_current()) return kn__call_eager(f, args, nargs, out);
  kn__entry *prev = NULL;
  for (kn__entry *e = f->entries; e; prev = e, e = e->next) {
    if (!kn__entry_check(e, args, nargs)) continue;
    kn_status st = kn__entry_run(f, e, args, nargs, out);
    if (st == KN_OK) {
      move_to_front(f, prev, e);
      return KN_OK;
    }
    if (st != KN__MISS_BRANCH) return st;
    /* a break answered differently: add a branch to this entry */
    move_to_front(f, prev, e);
    if (f->ncompiles >= f->opts.cache_size_limit) {
      if (!f->limit_hit) {
        miss m = {0};
        m.n = 1;
        char *r = strdup("a graph break answered differently (new branch)");
        char cid[64];
        kn__compile_id_format(e->cid, cid, sizeof cid);
        char *c = strdup(cid);
        m.reason = &r;
        m.cid = &c;
        limit_warning(f, &m, false);
        free(r);
        free(c);
        f->limit_hit = true;
      }
      return kn__call_eager(f, args, nargs, out);
    }
    return compile_and_run(f, args, nargs, e, NULL, NULL, false, out);
  }
  if (!f->entries) return compile_and_run(f, args, nargs, NULL, NULL, NULL, false, out);
  /* a miss: every entry rejected the call */
  bool verbose = KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES_VERBOSE);
  miss m;
  kn_status st = gather(f, args, nargs, verbose, &m);
  if (st != KN_OK) {
    miss_free(&m);
    return st;
  }
  call_guard_fail_fn(f, &m);
  free(f->last_reason);
  f->last_reason = m.n ? strdup(m.reason[0]) : NULL;
  bool acc = f->nentries >= f->opts.accumulated_cache_size_limit;
  if (acc || f->ncompiles >= f->opts.cache_size_limit) {
    if (!f->limit_hit) limit_warning(f, &m, acc);
    f->limit_hit = true;
    miss_free(&m);
    if (f->opts.drop_cache_on_limit) {
      drop_entries(f);
      f->skip = true;
    }
    if (f->opts.fullgraph)
      return kn__error(KN_ESTATE, "%s: %s reached, and fullgraph=true makes this a hard failure",
                       f->frame.name, acc ? "accumulated_cache_size_limit" : "cache_size_limit");
    return kn__call_eager(f, args, nargs, out);
  }
  char *msg = recompile_message(f, &m, verbose);
  char *rj = reasons_json(&m);
  miss_free(&m);
  st = compile_and_run(f, args, nargs, NULL, rj, msg, verbose, out);
  free(msg);
  free(rj);
  return st;
}

kn_tensor *kn_call_tensors(kn_compiled *f, kn_tensor *const *args, int nargs) {
  if (nargs < 0 || (nargs > 0 && !args)) {
    kn__error(KN_EINVAL, "kn_call_tensors: expected an array of nargs >= 0 tensors, got %d at %s",
              nargs, args ? "an array" : "NULL");
    return NULL;
  }
  kn_value inl[8] = {{0}};
  kn_value *v = nargs <= 8 ? inl : malloc(sizeof *v * (size_t)(nargs > 0 ? nargs : 1));
  if (!v) {
    kn__oom();
    return NULL;
  }
  for (int i = 0; i < nargs; i++) v[i] = kn_vtensor(args[i]);
  kn_value out;
  kn_status st = kn_call(f, v, nargs, &out);
  if (v != inl) free(v);
  if (st != KN_OK) return NULL;
  if (out.kind != KN_VTENSOR) {
    kn_value_release(out);
    kn__error(KN_EINVAL, "%s did not return a tensor", f->frame.name);
    return NULL;
  }
  return kn__autorelease(out.u.t);
}

kn_graph_module *kn_export(kn_compiled *f, const kn_value *args, int nargs) {
  if (check_call("kn_export", f, args, nargs) != KN_OK) return NULL;
  kn__entry *e = NULL;
  kn_value out;
  /* one trace, no breaks, no backend: the graph as captured */
  kn_compile_options saved = f->opts;
  f->opts.fullgraph = true;
  f->opts.backend_fn = NULL;
  f->opts.backend = "eager";
  kn_status st = kn__trace_call(f, args, nargs, NULL, NULL, &e, &out);
  f->opts = saved;
  if (st != KN_OK) return NULL;
  kn_value_release(out);
  kn_graph_module *gm = e->root->gm;
  e->root->gm = NULL;
  kn__entry_free(e);
  return gm;
}
