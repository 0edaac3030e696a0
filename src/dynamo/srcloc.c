/*
** dynamo/srcloc.c: the user frames of a backtrace (symbolized by
** core/symbolize.c) and a per-file cache of source lines. The cache is
** process-wide and guarded by one mutex; it only grows while tracing (never
** on cached calls).
*/
#include "dynamo/srcloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hashmap.h"
#include "logging/log.h"
#include "trace/trace.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kn__hashmap file_cache; /* path -> struct srcfile* */
static bool caches_init;

static void init_caches(void) {
  if (caches_init) return;
  kn__hm_init(&file_cache, true);
  caches_init = true;
}

int kn__srcloc_capture(void **addrs, int cap) { return kn__backtrace(addrs, cap); }

int kn__srcloc_base_depth(const char *func) {
  void *addrs[KN__SRC_CAPTURE_FRAMES];
  int n = kn__backtrace(addrs, KN__SRC_CAPTURE_FRAMES);
  for (int i = 0; i < n; i++) {
    kn__srcframe f = kn__symbolize(addrs[i]);
    if (f.func && !strcmp(f.func, func)) return n - i;
  }
  return n > 1 ? n - 1 : n;
}

/* Say once per process how to get source lines when none can be found: a
** WARNING when something shows source lines (a structured trace, or the
** graph_code / trace_source / trace_call / graph_breaks logs), else INFO. */
static atomic_bool told_no_debug;

static int notice_level(void) {
  bool shown = kn__trace_enabled() || KN_ARTIFACT_ENABLED(KN_ART_GRAPH_CODE) ||
               KN_ARTIFACT_ENABLED(KN_ART_TRACE_SOURCE) || KN_ARTIFACT_ENABLED(KN_ART_TRACE_CALL) ||
               KN_ARTIFACT_ENABLED(KN_ART_GRAPH_BREAKS);
  return shown ? KN_WARNING : KN_INFO;
}

static void tell_no_debug_info(const char *func) {
  if (atomic_exchange(&told_no_debug, true)) return;
  int level = notice_level();
  if (!kn__symbolize_available())
    KN_LOG(KN_LOG_DYNAMO, level,
           "kiln could not load libdw.so.1 (elfutils), so graph code and logs have no source "
           "lines. Install it (Debian: libdw1) to get `# File:` comments and trace_source lines.");
  else
    KN_LOG(KN_LOG_DYNAMO, level,
           "no debug info for the compiled function %s, so graph code and logs have no source "
           "lines. Compile the code you pass to kn_compile with -g (and "
           "-fno-optimize-sibling-calls for exact lines); see docs/DYNAMO.md, \"Tracing\".",
           func ? func : "?");
}

int kn__srcloc_user_stack(void *const *addrs, int n, int base_depth, kn__srcframe *out,
                          int cap, const char **api) {
  if (api) *api = NULL;
  /* addrs[n - base_depth] is the frame that called the user's root
  ** function; user frames are above it (smaller indexes). */
  int top = n - base_depth; /* the index of the frame that called the user's function */
  if (top <= 0 || top > n) return 0;
  int cnt = 0;
  const char *last_kiln = NULL;
  /* walk from the innermost frame outwards, remembering the kiln function
  ** directly called by the innermost user frame */
  kn__srcframe tmp[KN__SRC_MAX_FRAMES];
  int nt = 0;
  bool seen_kiln = false; /* frames before kiln's own (sanitizer interceptors) are skipped */
  /* a frame outside kiln (above the last kiln frame: the user's) without a file */
  const char *nodebug = NULL;
  for (int i = 0; i < top && nt < KN__SRC_MAX_FRAMES; i++) {
    kn__srcframe f = kn__symbolize(addrs[i]);
    if (!f.func && !kn__symbolize_available()) nodebug = "?";
    if (!f.func) continue;
    bool kiln = kn__is_kiln_frame(&f);
    if (!seen_kiln && !kiln) continue;
    seen_kiln = true;
    if (kiln) {
      nodebug = NULL; /* kiln's own static helpers lack files in release builds */
      if (nt == 0) last_kiln = f.func;
      continue;
    }
    if (!f.file) { /* no debug info: kiln's static helpers or unlocatable code */
      nodebug = f.func;
      continue;
    }
    tmp[nt++] = f;
  }
  /* no user frame has a location: the user's code lacks debug info */
  if (nt == 0 && nodebug) tell_no_debug_info(nodebug);
  if (api) *api = last_kiln;
  for (int i = nt - 1; i >= 0 && cnt < cap; i--) out[cnt++] = tmp[i];
  return cnt;
}

/* Frames of the shape environment and of this bookkeeping are not part of a
** framework stack (PyTorch leaves symbolic_shapes.py out the same way). */
static bool uninteresting(const kn__srcframe *f) {
  static const char *const parts[] = {"/src/dynamic/", "/src/dynamo/srcloc.c",
                                      "/src/core/symbolize.c", "/src/dynamo/guardsrc.c"};
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
    if (f->file && strstr(f->file, parts[i])) return true;
  return false;
}

int kn__srcloc_framework_stack(void *const *addrs, int n, int base_depth, kn__srcframe *out,
                               int cap) {
  int top = n - base_depth;
  if (top <= 0 || top > n) top = n;
  kn__srcframe tmp[KN__SRC_MAX_FRAMES];
  int nt = 0;
  bool seen_kiln = false;
  for (int i = 0; i < top && nt < KN__SRC_MAX_FRAMES && nt < cap; i++) {
    kn__srcframe f = kn__symbolize(addrs[i]);
    if (!f.func) continue;
    bool kiln = kn__is_kiln_frame(&f);
    if (!kiln && seen_kiln) break; /* the innermost user frame */
    seen_kiln |= kiln;
    if (kiln && f.file && !uninteresting(&f)) tmp[nt++] = f;
  }
  for (int i = 0; i < nt; i++) out[i] = tmp[nt - 1 - i];
  return nt;
}

/* ---- source files ---------------------------------------------------------- */
typedef struct srcfile {
  char *text;
  int nlines;
  char **lines; /* pointers into text */
} srcfile;

static srcfile *load_file(const char *path) {
  FILE *f = fopen(path, "rb");
  srcfile *s = calloc(1, sizeof *s);
  if (!s) {
    if (f) fclose(f);
    return NULL;
  }
  if (!f) return s; /* cached as unreadable */
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (len + 1024 > cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + len, 1, cap - len - 1, f);
    if (r == 0) break;
    len += r;
  }
  fclose(f);
  if (!buf) return s;
  buf[len] = 0;
  int n = 1;
  for (size_t i = 0; i < len; i++) n += buf[i] == '\n';
  s->lines = malloc((size_t)n * sizeof *s->lines);
  if (!s->lines) {
    free(buf);
    return s;
  }
  s->text = buf;
  char *p = buf;
  for (int k = 0; k < n; k++) {
    s->lines[k] = p;
    char *nl = strchr(p, '\n');
    if (!nl) {
      s->nlines = k + 1;
      break;
    }
    *nl = 0;
    if (nl > p && nl[-1] == '\r') nl[-1] = 0;
    p = nl + 1;
    s->nlines = k + 1;
  }
  return s;
}

static srcfile *get_file(const char *path) {
  init_caches();
  bool found = false;
  srcfile *s = kn__hm_get(&file_cache, path, &found);
  if (found) return s;
  s = load_file(path);
  if (s && !kn__hm_put(&file_cache, path, s)) {
    free(s->lines);
    free(s->text);
    free(s);
    s = NULL;
  }
  return s;
}

const char *kn__srcloc_line(const char *file, int line) {
  if (!file || line <= 0) return NULL;
  pthread_mutex_lock(&lock);
  srcfile *s = get_file(file);
  const char *r = (s && s->text && line <= s->nlines) ? s->lines[line - 1] : NULL;
  pthread_mutex_unlock(&lock);
  return r;
}

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Does `l` define function `name`: "<type words> name(" without '=' before
** and not ending with ';'? */
static bool defines(const char *l, const char *name) {
  size_t nl = strlen(name);
  const char *p = strstr(l, name);
  while (p) {
    bool left_ok = p == l || !ident_char(p[-1]);
    const char *q = p + nl;
    while (*q == ' ') q++;
    if (left_ok && *q == '(') {
      if (p == l || l[0] == ' ' || l[0] == '\t' || l[0] == '/' || l[0] == '*' || l[0] == '#')
        return false; /* a call, a comment or a macro, not a definition */
      for (const char *k = l; k < p; k++)
        if (*k == '=' || *k == '(' || *k == ';') return false;
      size_t len = strlen(l);
      while (len && (l[len - 1] == ' ' || l[len - 1] == '\t')) len--;
      return !(len && l[len - 1] == ';');
    }
    p = strstr(p + 1, name);
  }
  return false;
}

int kn__srcloc_def_line(const char *file, const char *name, int from) {
  if (!file || !name || !*name) return from;
  pthread_mutex_lock(&lock);
  srcfile *s = get_file(file);
  int r = from;
  if (s && s->text)
    for (int i = 0; i < s->nlines; i++)
      if (defines(s->lines[i], name)) {
        r = i + 1;
        break;
      }
  pthread_mutex_unlock(&lock);
  return r;
}

void kn__srcloc_reset(void) {
  atomic_store(&told_no_debug, false);
  pthread_mutex_lock(&lock);
  if (caches_init) {
    const kn__hm_slot *sl;
    for (size_t i = 0; kn__hm_next(&file_cache, &i, &sl);) {
      srcfile *s = sl->val;
      if (s) {
        free(s->lines);
        free(s->text);
        free(s);
      }
    }
    kn__hm_fini(&file_cache);
    kn__hm_init(&file_cache, true);
  }
  pthread_mutex_unlock(&lock);
}
