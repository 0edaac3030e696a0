/*
** dynamo/srcloc.c: backtraces symbolized to function/file/line with libdwfl
** (dlopen'ed; the few entry points are declared here with opaque types) and
** a per-file cache of source lines. Both caches are process-wide and guarded
** by one mutex; they only grow while tracing (never on cached calls).
*/
#include "dynamo/srcloc.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hashmap.h"
#include "logging/log.h"
#include "trace/trace.h"

/* ---- libdwfl, declared by hand ------------------------------------------ */
typedef struct Dwfl Dwfl;
typedef struct Dwfl_Module Dwfl_Module;
typedef struct Dwfl_Line Dwfl_Line;
typedef struct {
  void *find_elf;
  void *find_debuginfo;
  void *section_address;
  char **debuginfo_path;
} dwfl_callbacks;

static struct {
  bool tried, ok;
  Dwfl *dwfl;
  dwfl_callbacks cb;
  Dwfl *(*begin)(const dwfl_callbacks *);
  int (*proc_report)(Dwfl *, int);
  int (*report_end)(Dwfl *, void *, void *);
  Dwfl_Module *(*addrmodule)(Dwfl *, uint64_t);
  const char *(*addrname)(Dwfl_Module *, uint64_t);
  Dwfl_Line *(*getsrc)(Dwfl_Module *, uint64_t);
  const char *(*lineinfo)(Dwfl_Line *, uint64_t *, int *, int *, uint64_t *, uint64_t *);
} dw;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kn__hashmap addr_cache;  /* u64 address -> kn__srcframe* */
static kn__hashmap file_cache;  /* path -> struct srcfile* */
static bool caches_init;

static void *sym(void *h, const char *name) { return dlsym(h, name); }

/* libdwfl's find_debuginfo callbacks (same signature). */
typedef int (*find_debuginfo_fn)(Dwfl_Module *, void **, const char *, uint64_t, const char *,
                                 const char *, uint32_t, char **);
static find_debuginfo_fn std_find_debuginfo, build_id_find_debuginfo;

/* Separate debug info by build ID (/usr/lib/debug/.build-id), then, for a
** module naming one with .gnu_debuglink, libdwfl's standard search. The
** standard search alone also starts elfutils' debuginfod client (a dlopen
** of libdebuginfod with libcurl and its TLS and LDAP libraries, ~5 ms) for
** every module without debug info; that happens only when DEBUGINFOD_URLS
** asks for it. */
static int find_debuginfo(Dwfl_Module *m, void **ud, const char *modname, uint64_t base,
                          const char *file, const char *link, uint32_t crc, char **out) {
  const char *urls = getenv("DEBUGINFOD_URLS");
  if (urls && *urls) return std_find_debuginfo(m, ud, modname, base, file, link, crc, out);
  int fd = build_id_find_debuginfo(m, ud, modname, base, file, link, crc, out);
  if (fd < 0 && link) fd = std_find_debuginfo(m, ud, modname, base, file, link, crc, out);
  return fd;
}

static void dw_load(void) {
  dw.tried = true;
  void *h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  dw.begin = (Dwfl * (*)(const dwfl_callbacks *)) sym(h, "dwfl_begin");
  dw.proc_report = (int (*)(Dwfl *, int))sym(h, "dwfl_linux_proc_report");
  dw.report_end = (int (*)(Dwfl *, void *, void *))sym(h, "dwfl_report_end");
  dw.addrmodule = (Dwfl_Module * (*)(Dwfl *, uint64_t)) sym(h, "dwfl_addrmodule");
  dw.addrname = (const char *(*)(Dwfl_Module *, uint64_t))sym(h, "dwfl_module_addrname");
  dw.getsrc = (Dwfl_Line * (*)(Dwfl_Module *, uint64_t)) sym(h, "dwfl_module_getsrc");
  dw.lineinfo = (const char *(*)(Dwfl_Line *, uint64_t *, int *, int *, uint64_t *,
                                 uint64_t *))sym(h, "dwfl_lineinfo");
  dw.cb.find_elf = sym(h, "dwfl_linux_proc_find_elf");
  std_find_debuginfo = (find_debuginfo_fn)sym(h, "dwfl_standard_find_debuginfo");
  build_id_find_debuginfo = (find_debuginfo_fn)sym(h, "dwfl_build_id_find_debuginfo");
  dw.cb.find_debuginfo = std_find_debuginfo && build_id_find_debuginfo ? (void *)find_debuginfo : NULL;
  if (!dw.begin || !dw.proc_report || !dw.report_end || !dw.addrmodule || !dw.addrname ||
      !dw.getsrc || !dw.lineinfo || !dw.cb.find_elf || !dw.cb.find_debuginfo)
    return;
  dw.dwfl = dw.begin(&dw.cb);
  if (!dw.dwfl) return;
  if (dw.proc_report(dw.dwfl, (int)getpid()) != 0) return;
  if (dw.report_end(dw.dwfl, NULL, NULL) != 0) return;
  dw.ok = true;
}

static void init_caches(void) {
  if (caches_init) return;
  kn__hm_init(&addr_cache, false);
  kn__hm_init(&file_cache, true);
  caches_init = true;
}

int kn__srcloc_capture(void **addrs, int cap) { return backtrace(addrs, cap); }

int kn__srcloc_base_depth(const char *func) {
  void *addrs[KN__SRC_CAPTURE_FRAMES];
  int n = backtrace(addrs, KN__SRC_CAPTURE_FRAMES);
  for (int i = 0; i < n; i++) {
    kn__srcframe f = kn__srcloc_symbolize(addrs[i]);
    if (f.func && !strcmp(f.func, func)) return n - i;
  }
  return n > 1 ? n - 1 : n;
}

static kn__srcframe lookup(uint64_t pc) {
  kn__srcframe f = {NULL, NULL, 0};
  if (!dw.tried) dw_load();
  if (!dw.ok) return f;
  Dwfl_Module *m = dw.addrmodule(dw.dwfl, pc);
  if (!m) return f;
  f.func = dw.addrname(m, pc);
  Dwfl_Line *ln = dw.getsrc(m, pc);
  if (ln) {
    int line = 0;
    const char *file = dw.lineinfo(ln, NULL, &line, NULL, NULL, NULL);
    f.file = file;
    f.line = line;
  }
  return f;
}

kn__srcframe kn__srcloc_symbolize(void *addr) {
  uint64_t pc = (uint64_t)(uintptr_t)addr;
  if (pc) pc -= 1; /* inside the call instruction */
  pthread_mutex_lock(&lock);
  init_caches();
  bool found = false;
  kn__srcframe *c = kn__hm_get_u64(&addr_cache, pc, &found);
  kn__srcframe r = {NULL, NULL, 0};
  if (found && c) {
    r = *c;
  } else {
    r = lookup(pc);
    kn__srcframe *n = malloc(sizeof *n);
    if (n) {
      n->func = r.func ? strdup(r.func) : NULL;
      n->file = r.file ? strdup(r.file) : NULL;
      n->line = r.line;
      if (!kn__hm_put_u64(&addr_cache, pc, n)) {
        free((char *)n->func);
        free((char *)n->file);
        free(n);
        r.func = r.file = NULL; /* the strings were libdw's: don't keep them */
      } else {
        r = *n;
      }
    } else {
      r.func = r.file = NULL;
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* kiln's own source tree: this file is <root>/src/dynamo/srcloc.c */
static bool in_kiln_tree(const char *file) {
  static const char self[] = __FILE__;
  static const char tail[] = "src/dynamo/srcloc.c";
  size_t ls = sizeof self - 1, lt = sizeof tail - 1;
  if (!file || ls < lt) return false;
  size_t root = ls - lt; /* length of "<root>/" */
  return root > 0 && !strncmp(file, self, root) && !strncmp(file + root, "src/", 4);
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
  if (!dw.ok)
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

static bool is_kiln_frame(const kn__srcframe *f) {
  return (f->func && !strncmp(f->func, "kn_", 3)) || in_kiln_tree(f->file);
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
    kn__srcframe f = kn__srcloc_symbolize(addrs[i]);
    if (!f.func && !dw.ok) nodebug = "?";
    if (!f.func) continue;
    bool kiln = is_kiln_frame(&f);
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
                                      "/src/dynamo/guardsrc.c"};
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
    kn__srcframe f = kn__srcloc_symbolize(addrs[i]);
    if (!f.func) continue;
    bool kiln = is_kiln_frame(&f);
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
