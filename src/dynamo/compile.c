/*
** dynamo/compile.c: compiled functions. kn_compile_* records the function,
** its name and location and the options; kn_call checks the cache entries
** (most recently used first), runs a hit, and on a miss gathers the guard
** failure reasons (recompile message, recompile_reasons, guard_fail_fn),
** applies the cache limit (warning once, then new inputs run eagerly while
** the existing entries stay in use) or traces a new entry. kn_reset forgets
** every compiled function's state.
**
** Threads: a call checks the guards and replays an entry under the shared
** entries_lock; misses go to slow_call, serialised by compile_lock, which
** looks again when the entry list changed while it waited. kn_reset marks
** every function stale (reset_epoch) and forgets the idle ones at once,
** the busy ones at their next call (ensure_fresh). Locks: dynamo.h.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/dynamo.h"
#include "profiler/profiler.h"
#include "dynamo/tracer.h"
#include "logging/log.h"
#include "tensor/handles.h"
#include "tensor/tensor.h"
#include "trace/trace.h"

#define DOCS "docs/DYNAMO.md, \"Cache, recompiles and the limit\""

/* ---- process-wide state (reset by kn_reset) ---------------------------------------
** Counters are atomics; the graph-break dedup set and the list of live
** compiled functions have a mutex each. None of these locks is held while
** another lock is taken, except list_lock in kn_reset, which only try-locks
** the functions' locks (a tracing thread that creates a compiled function
** or reaches a graph break never waits for kn_reset). */
static _Atomic int_least64_t frame_counter;
static atomic_int compiled_fn_counter;
static atomic_uint reset_epoch;
static pthread_mutex_t break_lock = PTHREAD_MUTEX_INITIALIZER;
static kn__hashmap break_sites;
static bool break_sites_init;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static kn_compiled *all_fns;

int64_t kn__next_frame_id(void) { return atomic_fetch_add(&frame_counter, 1); }

int kn__next_compiled_fn_number(void) { return atomic_fetch_add(&compiled_fn_counter, 1) + 1; }

bool kn__graph_break_first_at(const char *file, int line) {
  char key[600];
  snprintf(key, sizeof key, "%s:%d", file ? file : "?", line);
  pthread_mutex_lock(&break_lock);
  if (!break_sites_init) {
    kn__hm_init(&break_sites, true);
    break_sites_init = true;
  }
  bool found = false;
  (void)kn__hm_get(&break_sites, key, &found);
  if (!found) (void)kn__hm_put(&break_sites, key, NULL);
  pthread_mutex_unlock(&break_lock);
  return !found;
}

void kn__dynamo_reset_globals(void) {
  atomic_store(&frame_counter, 0);
  atomic_store(&compiled_fn_counter, 0);
  pthread_mutex_lock(&break_lock);
  if (break_sites_init) {
    kn__hm_fini(&break_sites);
    break_sites_init = false;
  }
  pthread_mutex_unlock(&break_lock);
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

/* Both locks held (or f not shared yet). */
static void drop_entries(kn_compiled *f) {
  while (f->entries) {
    kn__entry *e = f->entries;
    f->entries = e->next;
    kn__entry_free(e);
  }
  f->nentries = 0;
  f->gen++;
}

/* Both locks held. */
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

/* Forget f's state if kn_reset ran since it was last forgotten; `wait`:
** block for f's locks, else give up when f is busy (it is then forgotten
** at its next call). */
static void refresh(kn_compiled *f, bool wait) {
  if (wait) {
    pthread_mutex_lock(&f->compile_lock);
    pthread_rwlock_wrlock(&f->entries_lock);
  } else {
    if (pthread_mutex_trylock(&f->compile_lock)) return;
    if (pthread_rwlock_trywrlock(&f->entries_lock)) {
      pthread_mutex_unlock(&f->compile_lock);
      return;
    }
  }
  unsigned now = atomic_load(&reset_epoch);
  if (atomic_load(&f->epoch) != now) {
    forget(f);
    atomic_store(&f->epoch, now);
  }
  pthread_rwlock_unlock(&f->entries_lock);
  pthread_mutex_unlock(&f->compile_lock);
}

static inline void ensure_fresh(kn_compiled *f) {
  if (atomic_load_explicit(&f->epoch, memory_order_acquire) !=
      atomic_load_explicit(&reset_epoch, memory_order_acquire))
    refresh(f, true);
}

/* A writer-preferring rwlock: a compile waiting to publish is not starved
** by threads that keep hitting the cache. */
static bool init_locks(kn_compiled *f) {
  pthread_rwlockattr_t a;
  if (pthread_rwlockattr_init(&a)) return false;
  (void)pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  bool ok = pthread_rwlock_init(&f->entries_lock, &a) == 0;
  pthread_rwlockattr_destroy(&a);
  if (ok && pthread_mutex_init(&f->compile_lock, NULL)) {
    pthread_rwlock_destroy(&f->entries_lock);
    ok = false;
  }
  f->locks_init = ok;
  return ok;
}

/* Declared globals: a name of letters, digits and '_', unique, and exactly
** one pointer variable each. */
static kn_status check_globals(const kn_compile_options *o) {
  if (o->nglobals < 0 || (o->nglobals > 0 && !o->globals))
    return kn__error(KN_EINVAL, "kn_compile: expected globals[0..nglobals), found nglobals = %d "
                     "and globals %s", o->nglobals, o->globals ? "set" : "NULL");
  for (int i = 0; i < o->nglobals; i++) {
    const kn_compile_global *g = &o->globals[i];
    bool ok = g->name && *g->name;
    for (const char *p = g->name; ok && *p; p++)
      ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_';
    if (!ok)
      return kn__error(KN_EINVAL, "kn_compile: globals[%d]: expected a name of letters, digits "
                       "and '_', found %s%s%s", i, g->name ? "'" : "", g->name ? g->name : "NULL",
                       g->name ? "'" : "");
    if (!g->module == !g->tensor)
      return kn__error(KN_EINVAL, "kn_compile: globals[%d] ('%s'): expected exactly one of module "
                       "and tensor (the address of the pointer variable), found %s", i, g->name,
                       g->module ? "both" : "neither");
    for (int j = 0; j < i; j++)
      if (!strcmp(o->globals[j].name, g->name))
        return kn__error(KN_EINVAL, "kn_compile: globals[%d]: duplicate name '%s'", i, g->name);
  }
  return KN_OK;
}

static kn_status copy_globals(kn_compiled *f, const kn_compile_options *o) {
  if (o->nglobals == 0) return KN_OK;
  f->globals = calloc((size_t)o->nglobals, sizeof *f->globals);
  if (!f->globals) return kn__oom();
  f->nglobals = o->nglobals;
  for (int i = 0; i < o->nglobals; i++) {
    f->globals[i] = o->globals[i];
    if (!(f->globals[i].name = strdup(o->globals[i].name))) return kn__oom();
  }
  return KN_OK;
}

static kn_compiled *make(kn_fn fn, void *ud, void (*tfn)(void), int nargs, const char *name,
                         const char *file, int line, const kn_compile_options *opts) {
  if ((!fn && !tfn) || !name || nargs < -1) {
    kn__error(KN_EINVAL, "kn_compile: expected a function, its name and nargs >= -1; found %s, "
              "%s and %d", fn || tfn ? "a function" : "NULL", name ? name : "NULL", nargs);
    return NULL;
  }
  kn_compile_options o = opts ? *opts : (kn_compile_options){0};
  if (kn__backend_resolve(&o) != KN_OK || kn__mode_resolve(&o) != KN_OK) return NULL;
  if (o.narg_names < 0) {
    kn__error(KN_EINVAL, "kn_compile: narg_names must be >= 0 (0 = NULL-terminated), got %d",
              o.narg_names);
    return NULL;
  }
  if (check_globals(&o) != KN_OK) return NULL;
  if (o.cache_size_limit < 0 || o.accumulated_cache_size_limit < 0) {
    kn__error(KN_EINVAL, "kn_compile: cache limits must be >= 0 (0 = default), got %d and %d",
              o.cache_size_limit, o.accumulated_cache_size_limit);
    return NULL;
  }
  if (!o.cache_size_limit) o.cache_size_limit = 8;
  if (!o.accumulated_cache_size_limit) o.accumulated_cache_size_limit = 256;
  kn_compiled *f = calloc(1, sizeof *f);
  if (!f || !init_locks(f)) goto oom;
  atomic_store(&f->epoch, atomic_load(&reset_epoch));
  f->fn = fn;
  f->ud = ud;
  f->tfn = tfn;
  f->nargs = nargs;
  f->opts = o;
  f->opts.arg_names = NULL;
  f->opts.globals = NULL;
  if (copy_globals(f, &o) != KN_OK) goto oom;
  f->frame.frame_id = -1;
  /* the definition's location from the debug info (first line of the
  ** function's code), else found by name in the source file */
  void (*addr)(void) = tfn ? tfn : (void (*)(void))fn;
  kn__srcframe d = kn__symbolize((void *)((uintptr_t)addr + 1));
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
  pthread_mutex_lock(&list_lock);
  f->next_all = all_fns;
  if (all_fns) all_fns->prev_all = f;
  all_fns = f;
  f->linked = true;
  pthread_mutex_unlock(&list_lock);
  return f;
oom:
  kn_compiled_free(f);
  kn__oom();
  return NULL;
}

kn_compiled *kn_compile_fn(kn_fn fn, void *ud, int nargs, const char *name, const char *file,
                           int line, const kn_compile_options *opts) {
  return make(fn, ud, NULL, nargs, name, file, line, opts);
}

kn_compiled *kn_compile_tensor_fn(void (*fn)(void), int nargs, const char *name, const char *file,
                                  int line, const kn_compile_options *opts) {
  bool tconst = (nargs & KN_TENSOR_FN_CONST) != 0;
  nargs &= ~KN_TENSOR_FN_CONST;
  if (nargs < 1 || nargs > KN_TENSOR_FN_MAX_ARGS) {
    kn__error(KN_EINVAL, "kn_compile_tensor_fn: expected 1 to %d tensor arguments, got %d",
              KN_TENSOR_FN_MAX_ARGS, nargs);
    return NULL;
  }
  kn_compiled *f = make(NULL, NULL, fn, nargs, name, file, line, opts);
  if (f) f->tconst = tconst;
  return f;
}

void kn_compiled_free(kn_compiled *f) {
  if (!f) return;
  if (f->linked) {
    pthread_mutex_lock(&list_lock);
    if (f->prev_all) f->prev_all->next_all = f->next_all;
    else all_fns = f->next_all;
    if (f->next_all) f->next_all->prev_all = f->prev_all;
    pthread_mutex_unlock(&list_lock);
  }
  drop_entries(f);
  if (f->resume || f->dyn_state) free_maps(f);
  if (f->resume) kn__hm_fini(f->resume);
  if (f->dyn_state) kn__hm_fini(f->dyn_state);
  free(f->resume);
  free(f->dyn_state);
  for (int i = 0; i < f->narg_names; i++) free(f->arg_names[i]);
  free(f->arg_names);
  for (int i = 0; i < f->nglobals; i++) free((char *)f->globals[i].name);
  free(f->globals);
  free_frame(&f->frame);
  free(f->last_reason);
  if (f->locks_init) {
    pthread_rwlock_destroy(&f->entries_lock);
    pthread_mutex_destroy(&f->compile_lock);
  }
  free(f);
}

/* May overlap calls, compiles, creation and freeing of compiled functions
** in other threads: a function busy in another thread is forgotten when
** its current call has finished (at its next call). */
void kn_reset(void) {
  atomic_fetch_add(&reset_epoch, 1);
  kn__dynamo_reset_globals();
  kn__aot_cache_clear();
  pthread_mutex_lock(&list_lock);
  for (kn_compiled *f = all_fns; f; f = f->next_all) refresh(f, false);
  pthread_mutex_unlock(&list_lock);
}

/* ---- calling the user function ----------------------------------------------------------- */
/* The tensor form, called through its exact type. */
#define KN__P1(T) T
#define KN__P2(T) KN__P1(T), T
#define KN__P3(T) KN__P2(T), T
#define KN__P4(T) KN__P3(T), T
#define KN__P5(T) KN__P4(T), T
#define KN__P6(T) KN__P5(T), T
#define KN__P7(T) KN__P6(T), T
#define KN__P8(T) KN__P7(T), T
#define KN__A1 t[0]
#define KN__A2 KN__A1, t[1]
#define KN__A3 KN__A2, t[2]
#define KN__A4 KN__A3, t[3]
#define KN__A5 KN__A4, t[4]
#define KN__A6 KN__A5, t[5]
#define KN__A7 KN__A6, t[6]
#define KN__A8 KN__A7, t[7]
#define KN__CALLT(n, T) ((kn_tensor * (*)(KN__P##n(T))) fn)(KN__A##n)
#define KN__CASES(T)                                                                  \
  case 1: return KN__CALLT(1, T);                                                    \
  case 2: return KN__CALLT(2, T);                                                    \
  case 3: return KN__CALLT(3, T);                                                    \
  case 4: return KN__CALLT(4, T);                                                    \
  case 5: return KN__CALLT(5, T);                                                    \
  case 6: return KN__CALLT(6, T);                                                    \
  case 7: return KN__CALLT(7, T);                                                    \
  default: return KN__CALLT(8, T);

/* Always inlined: no kiln frame may stand between kn__invoke_user (where the
** user's stack depth is measured) and the user's function, in any build. */
static inline __attribute__((always_inline)) kn_tensor *
call_tensor_fn(void (*fn)(void), bool tconst, kn_tensor *const *t, int n) {
  if (tconst) switch (n) { KN__CASES(const kn_tensor *) }
  switch (n) { KN__CASES(kn_tensor *) }
}

/* ---- calling the user function (cont.) --------------------------------------------------------- */
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
    kn_tensor *t[KN_TENSOR_FN_MAX_ARGS] = {0};
    for (int i = 0; i < nargs && i < KN_TENSOR_FN_MAX_ARGS; i++) t[i] = args[i].u.t;
    v = kn_vtensor(call_tensor_fn(f->tfn, f->tconst, t, nargs));
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

/* Is entry i's reason the same text as a newer entry's? */
static bool said_before(const miss *m, int i) {
  for (int j = 0; j < i; j++)
    if (!strcmp(m->reason[j], m->reason[i])) return true;
  return false;
}

static char *recompile_message(kn_compiled *f, const miss *m, bool verbose) {
  kn__sb body = KN__SB_INIT;
  kn__sb_puts(&body, "triggered by the following guard failure(s):\n");
  for (int i = 0; i < m->n; i++) {
    if (verbose) {
      if (i) kn__sb_puts(&body, "\n\n");
      kn__sb_printf(&body, "guard %d failures:\n", i);
      indent_lines(&body, m->reason[i], "- ");
    } else if (!said_before(m, i)) { /* several entries may fail the same way */
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
  if (m->n > 1) kn__sb_printf(&more, " (+%d more)", m->n - 1);
  bool logged = KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES) ||
                KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES_VERBOSE);
  KN_LOG(KN_LOG_DYNAMO_CONVERT_FRAME, KN_WARNING,
         "kiln.dynamo hit config.%s (%d)\n"
         "   function: '%s' (%s:%d)\n"
         "   last reason: %s: %s%s\n"
         "%s\n"
         "Already compiled versions stay in use; new inputs run eagerly (raise "
         "kn_compile_options.%s to compile more).\n"
         "To diagnose recompilation issues, see " DOCS ".",
         lt, lim, f->frame.name, f->frame.file, f->frame.line, m->n ? m->cid[0] : "-",
         m->n ? m->reason[0] : "Unable to find recompilation reasons", kn__sb_cstr(&more),
         logged ? "The recompilation reasons are logged above (recompiles)."
                : "To log all recompilation reasons, use KILN_LOGS=\"recompiles\".",
         lt);
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
  const char *body = NULL;
  const char *type = kn__exc_type(kn_last_status(), kn_last_error(), &body);
  KN_LOG(KN_LOG_DYNAMO_CONVERT_FRAME, lvl,
         "WON'T CONVERT %s %s line %d \ndue to: \nTraceback (most recent call last):\n"
         "kiln.%s: %s",
         f->frame.name, f->frame.file, f->frame.line, type, body);
}

/* Trace and add an entry (or extend `into` with a branch, reusing the
** values of the run that missed it, bm: taken over), compile_lock
** held. On failure *eager says whether the WON'T CONVERT policy runs the
** call eagerly (the caller does, after unlocking). */
static kn_status compile_entry(kn_compiled *f, const kn_value *args, int nargs, kn__entry *into,
                               kn__branch_miss *bm, const char *rj, const char *msg,
                               bool verbose, kn_value *out, bool *eager) {
  *eager = false;
  /* logged inside the new compile's context, where the trace makes it */
  kn__recompile_note note = {msg, rj, verbose};
  /* a branch grows an entry that other threads may be replaying: exclusive
  ** for the whole trace; a new entry is private until it is linked */
  if (into) pthread_rwlock_wrlock(&f->entries_lock);
  kn__entry *e = NULL;
  kn_status st = kn__trace_call(f, args, nargs, into, bm, 0, msg || rj ? &note : NULL, &e, out);
  if (!into && e) pthread_rwlock_wrlock(&f->entries_lock);
  if (e) {
    e->next = f->entries;
    f->entries = e;
    f->nentries++;
  }
  if (into || e) {
    f->gen++;
    pthread_rwlock_unlock(&f->entries_lock);
  }
  if (st == KN_OK) {
    f->ncompiles++;
    return KN_OK;
  }
  wont_convert(f);
  *eager = f->opts.suppress_errors && !f->opts.fullgraph;
  return st;
}

/* entries_lock held exclusive. e is compared by identity only: it may have
** been dropped since it was seen. Returns whether e is linked. */
static bool move_to_front(kn_compiled *f, const kn__entry *e) {
  for (kn__entry **p = &f->entries; *p; p = &(*p)->next)
    if (*p == e) {
      kn__entry *hit = *p;
      *p = hit->next;
      hit->next = f->entries;
      f->entries = hit;
      return true;
    }
  return false;
}

/* Checked mode (tensor/handles.h): the tensors among the arguments, lists
** and tuples included, are live. */
static kn_status check_handles(const char *fn, const kn_value *v, int n, const char *what) {
  char w[96];
  for (int i = 0; i < n; i++) {
    bool tensor = v[i].kind == KN_VTENSOR && v[i].u.t;
    bool list = (v[i].kind == KN_VLIST || v[i].kind == KN_VTUPLE) && v[i].u.items;
    if (!(tensor && !kn__handle_live(v[i].u.t)) && !list) continue;
    snprintf(w, sizeof w, "%s%s %d", what, *what ? " item" : "argument", i);
    kn_status st = tensor ? kn__handle_dead(v[i].u.t, fn, w)
                          : check_handles(fn, v[i].u.items, v[i].n, w);
    if (st != KN_OK) return st;
  }
  return KN_OK;
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
  return KN__HANDLES_CHECKED() ? check_handles(f->frame.name, args, nargs, "") : KN_OK;
}

/* ---- the hit path ------------------------------------------------------------------------ */
typedef enum found { FOUND_NONE, FOUND_HIT, FOUND_BRANCH, FOUND_ERROR, FOUND_SKIP } found;

typedef struct lookup {
  found kind;
  kn_status st;
  const kn__entry *e; /* the entry whose guards passed */
  int pos;            /* its position in the list */
  uint64_t gen;       /* the list generation seen */
  kn__branch_miss bm; /* FOUND_BRANCH: the values so far (owned) and the break */
} lookup;

/* Under the shared lock: the first entry whose guards pass runs. */
static void find(kn_compiled *f, const kn_value *args, int nargs, kn_value *out, lookup *lk) {
  *lk = (lookup){FOUND_NONE, KN_OK, NULL, 0, 0, {0}};
  pthread_rwlock_rdlock(&f->entries_lock);
  lk->gen = f->gen;
  if (f->skip) lk->kind = FOUND_SKIP;
  for (kn__entry *e = f->skip ? NULL : f->entries; e; e = e->next, lk->pos++) {
    if (!kn__entry_check(e, args, nargs)) continue;
    lk->st = kn__entry_run(f, e, args, nargs, out, &lk->bm);
    lk->e = e;
    lk->kind = lk->st == KN_OK ? FOUND_HIT : lk->st == KN__MISS_BRANCH ? FOUND_BRANCH : FOUND_ERROR;
    break;
  }
  pthread_rwlock_unlock(&f->entries_lock);
}

/* Most recently used first: a hit behind the head moves to the front when
** the list is free; under contention the move is skipped (the order only
** decides which entry is checked first). */
static void promote(kn_compiled *f, const lookup *lk) {
  if (lk->pos == 0 || pthread_rwlock_trywrlock(&f->entries_lock)) return;
  move_to_front(f, lk->e);
  pthread_rwlock_unlock(&f->entries_lock);
}

/* ---- misses (compile_lock held) ------------------------------------------------------------ */
/* Whether another thread added the missed branch while this one waited. */
static bool branch_known(const kn__branch_miss *bm) {
  for (int i = 0; bm->seg && i < bm->seg->nchild; i++)
    if (bm->seg->child[i].answer == bm->answer) return true;
  return false;
}

/* Finish this call eagerly from the break that answered differently (the
** known segments, and a backward in them, already ran): no new trace, no
** compile, the entry stays as it is (the cache limit, or a branch another
** thread added meanwhile). */
static kn_status finish_eagerly(kn_compiled *f, const kn_value *args, int nargs, kn__entry *e,
                                kn__branch_miss *bm, kn_value *out) {
  kn__entry *none = NULL;
  pthread_rwlock_wrlock(&f->entries_lock);
  kn_status st = kn__trace_call(f, args, nargs, e, bm, KN__TRACE_EAGER_REST, NULL, &none, out);
  pthread_rwlock_unlock(&f->entries_lock);
  return st;
}

/* drop_cache_on_limit: free every entry; later calls run eagerly. */
static void skip_from_now(kn_compiled *f) {
  if (!f->opts.drop_cache_on_limit) return;
  pthread_rwlock_wrlock(&f->entries_lock);
  drop_entries(f);
  f->skip = true;
  pthread_rwlock_unlock(&f->entries_lock);
}

/* A break of the entry found answered differently: add a branch to it (a
** recompile, logged with its reason), or at the cache limit finish the call
** eagerly from that break. The known segments already ran, so the call is
** never re-run from the start. */
static kn_status new_branch(kn_compiled *f, const kn_value *args, int nargs, lookup *lk,
                            kn_value *out, bool *eager) {
  kn__branch_miss *bm = &lk->bm;
  kn__entry *e = (kn__entry *)lk->e;
  pthread_rwlock_wrlock(&f->entries_lock);
  bool linked = move_to_front(f, e);
  pthread_rwlock_unlock(&f->entries_lock);
  if (!linked) { /* kn_reset forgot the function while this call ran */
    kn__values_free(bm->vals, bm->nvals);
    return kn__error(KN_ESTATE, "%s: kn_reset() ran while this call was between two graph "
                     "segments; the call stopped after its first segments (call it again)",
                     f->frame.name);
  }
  if (branch_known(bm)) /* added by another thread meanwhile: no recompile */
    return finish_eagerly(f, args, nargs, e, bm, out);
  char cid[64];
  kn__compile_id_format(e->cid, cid, sizeof cid);
  char *r = kn__branch_miss_reason(bm);
  char *c = strdup(cid);
  miss m = {1, &r, &c};
  kn_status st;
  if (!r || !c) {
    kn__values_free(bm->vals, bm->nvals);
    st = kn__oom();
  } else if (f->ncompiles >= f->opts.cache_size_limit) {
    call_guard_fail_fn(f, &m);
    if (!f->limit_hit) limit_warning(f, &m, false);
    f->limit_hit = true;
    st = finish_eagerly(f, args, nargs, e, bm, out);
    skip_from_now(f);
  } else {
    call_guard_fail_fn(f, &m);
    free(f->last_reason);
    f->last_reason = strdup(r);
    bool verbose = KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES_VERBOSE);
    char *msg = recompile_message(f, &m, verbose);
    char *rj = reasons_json(&m);
    st = compile_entry(f, args, nargs, e, bm, rj, msg, verbose, out, eager);
    free(msg);
    free(rj);
  }
  free(r);
  free(c);
  return st;
}

/* Every entry rejected the call: recompile, or apply the cache limit. */
static kn_status new_entry(kn_compiled *f, const kn_value *args, int nargs, kn_value *out,
                           bool *eager) {
  *eager = false;
  if (!f->nentries) return compile_entry(f, args, nargs, NULL, NULL, NULL, NULL, false, out, eager);
  bool verbose = KN_ARTIFACT_ENABLED(KN_ART_RECOMPILES_VERBOSE);
  miss m;
  pthread_rwlock_rdlock(&f->entries_lock);
  kn_status st = gather(f, args, nargs, verbose, &m);
  pthread_rwlock_unlock(&f->entries_lock);
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
    skip_from_now(f);
    if (f->opts.fullgraph)
      return kn__error(KN_ESTATE, "%s: %s reached, and fullgraph=true makes this a hard failure",
                       f->frame.name, acc ? "accumulated_cache_size_limit" : "cache_size_limit");
    *eager = true;
    return KN_OK;
  }
  char *msg = recompile_message(f, &m, verbose);
  char *rj = reasons_json(&m);
  miss_free(&m);
  st = compile_entry(f, args, nargs, NULL, NULL, rj, msg, verbose, out, eager);
  free(msg);
  free(rj);
  return st;
}

/* Compiles of one function are serialised: the decision is taken again
** when another thread changed the entries while this one waited (a branch
** miss is not looked up again: its segments ran already). */
static kn_status slow_call(kn_compiled *f, const kn_value *args, int nargs, lookup *lk,
                           kn_value *out) {
  pthread_mutex_lock(&f->compile_lock);
  if (lk->kind == FOUND_NONE && lk->gen != f->gen) find(f, args, nargs, out, lk);
  bool eager = lk->kind == FOUND_SKIP;
  kn_status st = lk->st;
  if (lk->kind == FOUND_BRANCH) st = new_branch(f, args, nargs, lk, out, &eager);
  else if (lk->kind == FOUND_NONE) st = new_entry(f, args, nargs, out, &eager);
  pthread_mutex_unlock(&f->compile_lock);
  if (lk->kind == FOUND_HIT) promote(f, lk);
  return eager ? kn__call_eager(f, args, nargs, out) : st;
}

static kn_status call_impl(kn_compiled *f, const kn_value *args, int nargs, kn_value *out);

kn_status kn_call(kn_compiled *f, const kn_value *args, int nargs, kn_value *out) {
  if (!KN__PROF_ON() || !f) return call_impl(f, args, nargs, out);
  int64_t t0 = kn__prof_range_begin(); /* the profiler's compiled-call range */
  kn_status st = call_impl(f, args, nargs, out);
  kn__prof_range_end("Torch-Compiled Region: ", f->frame.name, t0);
  return st;
}

static kn_status call_impl(kn_compiled *f, const kn_value *args, int nargs, kn_value *out) {
  if (!out) return kn__error(KN_EINVAL, "kn_call: out is NULL");
  *out = kn_vnone();
  kn_status cst = check_call("kn_call", f, args, nargs);
  if (cst != KN_OK) return cst;
  /* called while another compiled function is traced: inline it (its ops
  ** are recorded in the caller's graph) */
  if (kn__trace_current()) return kn__call_eager(f, args, nargs, out);
  ensure_fresh(f);
  lookup lk;
  find(f, args, nargs, out, &lk);
  switch (lk.kind) {
  case FOUND_HIT: promote(f, &lk); return KN_OK;
  case FOUND_ERROR: return lk.st;
  case FOUND_SKIP: return kn__call_eager(f, args, nargs, out);
  default: return slow_call(f, args, nargs, &lk, out);
  }
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
  if (st != KN_OK) {
    kn__error_null_result();
    return NULL;
  }
  if (out.kind != KN_VTENSOR) {
    kn_value_release(out);
    kn__error(KN_EINVAL, "%s did not return a tensor", f->frame.name);
    return NULL;
  }
  return kn__autorelease(out.u.t);
}

kn_graph_module *kn_export(kn_compiled *f, const kn_value *args, int nargs) {
  if (check_call("kn_export", f, args, nargs) != KN_OK) return NULL;
  if (kn__trace_current()) {
    kn__error(KN_ESTATE, "kn_export: called while a compiled function is being traced");
    return NULL;
  }
  ensure_fresh(f);
  kn__entry *e = NULL;
  kn_value out;
  /* one trace, no breaks, no backend: the graph as captured */
  pthread_mutex_lock(&f->compile_lock);
  kn_compile_options saved = f->opts;
  f->opts.fullgraph = true;
  f->opts.backend_fn = NULL;
  f->opts.backend = "eager";
  kn_status st = kn__trace_call(f, args, nargs, NULL, NULL, KN__TRACE_EXPORT, NULL, &e, &out);
  f->opts = saved;
  pthread_mutex_unlock(&f->compile_lock);
  if (st != KN_OK) return NULL;
  kn_value_release(out);
  kn_graph_module *gm = e->root->gm;
  e->root->gm = NULL;
  kn__entry_free(e);
  return gm;
}
