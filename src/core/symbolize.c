/*
** core/symbolize.c: backtraces symbolized to function/file/line with
** libdwfl (dlopen'ed; the few entry points are declared here with opaque
** types). The address cache is process-wide and guarded by one mutex, which
** also guards the disk cache (core/symcache.h) consulted before libdw.
*/
#include "core/symbolize.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "core/hashmap.h"
#include "core/symcache.h"

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
static bool cache_init;
/* A frame came from the disk cache: libdw searched for it in some process
** (partial frames are only stored so), so it can be loaded here too. */
static bool disk_vouched;

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
static atomic_bool local_only; /* kn__symbolize_local_only */

void kn__symbolize_local_only(void) { atomic_store(&local_only, true); }

static int find_debuginfo(Dwfl_Module *m, void **ud, const char *modname, uint64_t base,
                          const char *file, const char *link, uint32_t crc, char **out) {
  const char *urls = getenv("DEBUGINFOD_URLS");
  bool std_ok = !atomic_load(&local_only);
  if (std_ok && urls && *urls) return std_find_debuginfo(m, ud, modname, base, file, link, crc, out);
  int fd = build_id_find_debuginfo(m, ud, modname, base, file, link, crc, out);
  if (fd < 0 && link && std_ok) fd = std_find_debuginfo(m, ud, modname, base, file, link, crc, out);
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


int kn__backtrace(void **addrs, int cap) { return backtrace(addrs, cap); }

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

kn__srcframe kn__symbolize(void *addr) {
  uint64_t pc = (uint64_t)(uintptr_t)addr;
  if (pc) pc -= 1; /* inside the call instruction */
  pthread_mutex_lock(&lock);
  if (!cache_init) {
    kn__hm_init(&addr_cache, false);
    cache_init = true;
  }
  bool found = false;
  kn__srcframe *c = kn__hm_get_u64(&addr_cache, pc, &found);
  kn__srcframe r = {NULL, NULL, 0};
  if (found && c) {
    r = *c;
  } else if (kn__symcache_find(pc, &r)) { /* strings owned by the disk cache */
    disk_vouched = true;
    kn__srcframe *n = malloc(sizeof *n);
    if (n && kn__hm_put_u64(&addr_cache, pc, n)) *n = r;
    else free(n);
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
        kn__symcache_note(pc, n, dw.ok);
      }
    } else {
      r.func = r.file = NULL;
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

void kn__symbolize_save(void) {
  pthread_mutex_lock(&lock);
  kn__symcache_save();
  pthread_mutex_unlock(&lock);
}

bool kn__symbolize_available(void) {
  pthread_mutex_lock(&lock);
  if (!dw.tried && !disk_vouched) dw_load();
  bool ok = dw.tried ? dw.ok : disk_vouched;
  pthread_mutex_unlock(&lock);
  return ok;
}

/* kiln's own source tree: this file is <root>/src/core/symbolize.c */
static bool in_kiln_tree(const char *file) {
  static const char self[] = __FILE__;
  static const char tail[] = "src/core/symbolize.c";
  size_t ls = sizeof self - 1, lt = sizeof tail - 1;
  if (!file || ls < lt) return false;
  size_t root = ls - lt; /* length of "<root>/" */
  return root > 0 && !strncmp(file, self, root) && !strncmp(file + root, "src/", 4);
}

bool kn__is_kiln_frame(const kn__srcframe *f) {
  return (f->func && !strncmp(f->func, "kn_", 3)) || in_kiln_tree(f->file);
}

/* The base of the shared object holding this code, or NULL when that is
** the program itself (kiln linked statically) or unknown. */
static void *kiln_library_base(void) {
  static void *base;
  static int known;
  if (__atomic_load_n(&known, __ATOMIC_ACQUIRE)) return base;
  Dl_info me, exe;
  void *b = NULL;
  if (dladdr((void *)kiln_library_base, &me) && me.dli_fbase &&
      dladdr((void *)getauxval(AT_ENTRY), &exe) && exe.dli_fbase != me.dli_fbase)
    b = me.dli_fbase;
  base = b;
  __atomic_store_n(&known, 1, __ATOMIC_RELEASE);
  return base;
}

bool kn__in_kiln_library(void *addr) {
  void *base = kiln_library_base();
  Dl_info i;
  return base && addr && dladdr(addr, &i) && i.dli_fbase == base;
}
