/*
** core/symcache.c: the symbolizer's disk cache (core/symcache.h). Callers
** hold core/symbolize.c's lock; nothing here locks.
*/
#include "core/symcache.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cachefs.h"
#include "core/error.h"
#include "core/hashmap.h"
#include "core/strbuf.h"

#define SYM_FILE_MAX (16 << 20) /* the longest file read or written */
#define SYM_HEADER "kiln-symbols 1\n"

typedef struct symmod {
  uintptr_t base;     /* load bias (dlpi_addr): offsets are pc - base */
  uintptr_t lo, hi;   /* the span of its PT_LOAD segments */
  const ElfW(Phdr) *phdr; /* its program headers (mapped with it) */
  int phnum;
  char id[129];       /* build ID in hex; "" when it has none */
  int debug_file;     /* separate debug info for id now: -1 not looked, 0 none, 1 some */
  bool read;          /* its build ID found and its file read */
  bool dirty;         /* frames noted since the last save */
  kn__hashmap frames; /* offset -> kn__srcframe* (owned, never freed) */
} symmod;

static symmod *mods;
static int nmods, capmods;
static char debug_dir[256] = "/usr/lib/debug"; /* kn__symcache_debug_dir */
static kn__cachedir dir = {.fd = -1};
static int dir_state; /* 0: not tried; 1: open; -1: unusable */

/* ---- modules ---------------------------------------------------------------------- */
static void hex_id(const unsigned char *d, size_t n, char *out, size_t cap) {
  static const char digits[] = "0123456789abcdef";
  size_t k = 0;
  for (size_t i = 0; i < n && k + 2 < cap; i++) {
    out[k++] = digits[d[i] >> 4];
    out[k++] = digits[d[i] & 15];
  }
  out[k] = 0;
}

/* The GNU build ID in the note segment at p (p_memsz bytes, notes aligned
** to align), hex into out; false when it has none. */
static bool note_build_id(const char *p, size_t size, size_t align, char *out, size_t cap) {
  const char *end = p + size;
  while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
    const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
    size_t name = (nh->n_namesz + align - 1) & ~(align - 1);
    size_t desc = (nh->n_descsz + align - 1) & ~(align - 1);
    const char *nm = p + sizeof *nh;
    if (name > (size_t)(end - nm) || desc > (size_t)(end - nm - name)) return false;
    if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(nm, "GNU", 4) &&
        nh->n_descsz > 0) {
      hex_id((const unsigned char *)nm + name, nh->n_descsz, out, cap);
      return true;
    }
    p = nm + name + desc;
  }
  return false;
}

static symmod *find_mod(uintptr_t pc) {
  for (int i = 0; i < nmods; i++)
    if (pc >= mods[i].lo && pc < mods[i].hi) return &mods[i];
  return NULL;
}

static int add_mod(struct dl_phdr_info *info, size_t size, void *ud) {
  (void)size;
  (void)ud;
  symmod m = {.base = info->dlpi_addr, .lo = UINTPTR_MAX, .phdr = info->dlpi_phdr,
              .phnum = info->dlpi_phnum, .debug_file = -1};
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD) {
      if (a < m.lo) m.lo = a;
      if (a + ph->p_memsz > m.hi) m.hi = a + ph->p_memsz;
    }
  }
  if (m.lo >= m.hi || find_mod(m.lo)) return 0; /* empty, or already known */
  if (nmods == capmods) {
    int cap = capmods ? capmods * 2 : 32;
    symmod *n = realloc(mods, sizeof *n * (size_t)cap);
    if (!n) return 1;
    mods = n;
    capmods = cap;
  }
  kn__hm_init(&m.frames, false);
  mods[nmods++] = m;
  return 0;
}

static void find_build_id(symmod *m) {
  for (int i = 0; i < m->phnum && !m->id[0]; i++) {
    const ElfW(Phdr) *ph = &m->phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    size_t align = ph->p_align == 8 ? 8 : 4;
    note_build_id((const char *)(m->base + ph->p_vaddr), ph->p_memsz, align, m->id, sizeof m->id);
  }
}

/* The module holding pc; the list is extended when pc lies in none known
** (a shared object loaded since). Modules are never removed. */
static symmod *module_of(uintptr_t pc) {
  symmod *m = find_mod(pc);
  if (m) return m;
  dl_iterate_phdr(add_mod, NULL);
  return find_mod(pc);
}

/* ---- files --------------------------------------------------------------------- */
static bool open_dir(void) {
  if (dir_state) return dir_state > 0;
  char root[KN__CACHE_PATH_CAP];
  bool ok = kn__cache_root(root, NULL) == KN_OK &&
            kn__cachedir_open(root, "symbols", true, &dir) == KN_OK;
  dir_state = ok ? 1 : -1;
  return ok;
}

static void file_name(const symmod *m, char *out, size_t n) { snprintf(out, n, "%s.sym", m->id); }

static bool storable(const char *s) { return s && *s && !strpbrk(s, "\t\n"); }

/* A frame with a function (or none) but no file and line: what libdw finds
** in code without debug info. */
static bool partial(const kn__srcframe *f) { return !f->file; }

/* Keep f for offset off (strings copied; func may be NULL, file NULL with
** line 0 for a partial frame) unless the module has one. */
static void put_frame(symmod *m, uint64_t off, const char *func, const char *file, int line) {
  bool found = false;
  kn__hm_get_u64(&m->frames, off, &found);
  if (found) return;
  kn__srcframe *f = malloc(sizeof *f);
  char *fn = func ? strdup(func) : NULL, *fl = file ? strdup(file) : NULL;
  if (f && (fn || !func) && (fl || !file) && kn__hm_put_u64(&m->frames, off, f)) {
    *f = (kn__srcframe){fn, fl, file ? line : 0};
    return;
  }
  free(f);
  free(fn);
  free(fl);
}

/* One line "<hex offset> <line> <func>\t<file>" (NUL-terminated, its
** newline removed), or "<hex offset> 0 <func>\t" for a partial frame ("?":
** no function); false when it does not parse. */
static bool parse_line(symmod *m, char *s) {
  char *e = NULL;
  unsigned long long off = strtoull(s, &e, 16);
  if (e == s || *e != ' ') return false;
  char *l = e + 1;
  long line = strtol(l, &e, 10);
  if (e == l || *e != ' ' || line < 0 || line > 100000000) return false;
  char *func = e + 1, *tab = strchr(func, '\t');
  if (!tab || tab == func || !tab[1] != !line) return false;
  *tab = 0;
  if (line) put_frame(m, off, func, tab + 1, (int)line);
  else put_frame(m, off, strcmp(func, "?") ? func : NULL, NULL, 0);
  return true;
}

/* Merge the module's file into its frames (a missing or refused file, or
** one of another format, adds nothing). */
static void read_file(symmod *m) {
  char name[160], why[256];
  bool missing = false;
  size_t len = 0;
  file_name(m, name, sizeof name);
  char *text = kn__cache_read(dir.fd, name, SYM_FILE_MAX, &len, &missing, why, sizeof why);
  if (!text) return;
  if (!strncmp(text, SYM_HEADER, strlen(SYM_HEADER))) {
    char *p = text + strlen(SYM_HEADER);
    for (char *nl; (nl = strchr(p, '\n')); p = nl + 1) { /* a last line without '\n' is cut */
      *nl = 0;
      parse_line(m, p);
    }
  }
  free(text);
}

static void write_file(symmod *m) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, SYM_HEADER);
  const kn__hm_slot *sl;
  for (size_t i = 0; kn__hm_next(&m->frames, &i, &sl);) {
    const kn__srcframe *f = sl->val;
    kn__sb_printf(&sb, "%llx %d %s\t%s\n", (unsigned long long)sl->key.u, f->line,
                  f->func ? f->func : "?", f->file ? f->file : "");
  }
  char name[160];
  file_name(m, name, sizeof name);
  if (!kn__sb_failed(&sb) && sb.len <= SYM_FILE_MAX)
    (void)kn__cache_write(dir.fd, name, kn__sb_cstr(&sb), sb.len);
  kn__sb_fini(&sb);
}

/* ---- the interface --------------------------------------------------------------- */
/* The module of pc with its file read, or NULL when pc has none to cache. */
static symmod *cached_module(uint64_t pc) {
  symmod *m = module_of((uintptr_t)pc);
  if (!m) return NULL;
  if (!m->read) {
    m->read = true;
    find_build_id(m);
    if (m->id[0] && open_dir()) read_file(m);
  }
  return m->id[0] && dir_state > 0 ? m : NULL;
}

/* Is there separate debug info for m's build ID now (Debian's debug
** packages: <debug dir>/.build-id/<2 hex digits>/<the rest>.debug)? Asked
** once per module and process. */
static bool has_debug_file(symmod *m) {
  if (m->debug_file < 0) {
    char path[sizeof debug_dir + 160];
    struct stat st;
    snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", debug_dir, m->id, m->id + 2);
    m->debug_file = strlen(m->id) > 2 && stat(path, &st) == 0;
  }
  return m->debug_file > 0;
}

bool kn__symcache_find(uint64_t pc, kn__srcframe *out) {
  kn__error_state es;
  kn__error_save(&es);
  symmod *m = cached_module(pc);
  kn__error_restore(&es);
  bool found = false;
  const kn__srcframe *f = m ? kn__hm_get_u64(&m->frames, pc - m->base, &found) : NULL;
  if (!found || !f || (partial(f) && has_debug_file(m))) return false;
  *out = *f;
  return true;
}

void kn__symcache_note(uint64_t pc, const kn__srcframe *f, bool searched) {
  bool whole = storable(f->func) && storable(f->file) && f->line > 0;
  bool part = searched && !f->file && !f->line && (!f->func || storable(f->func));
  if (!whole && !part) return;
  kn__error_state es;
  kn__error_save(&es);
  symmod *m = cached_module(pc);
  kn__error_restore(&es);
  if (!m || (part && has_debug_file(m))) return;
  size_t before = m->frames.len;
  put_frame(m, pc - m->base, f->func, whole ? f->file : NULL, f->line);
  if (m->frames.len != before) m->dirty = true;
}

void kn__symcache_debug_dir(const char *path) {
  snprintf(debug_dir, sizeof debug_dir, "%s", path ? path : "/usr/lib/debug");
  for (int i = 0; i < nmods; i++) mods[i].debug_file = -1;
}

void kn__symcache_save(void) {
  if (dir_state <= 0) return;
  kn__error_state es;
  kn__error_save(&es);
  bool swept = false;
  for (int i = 0; i < nmods; i++) {
    if (!mods[i].dirty) continue;
    mods[i].dirty = false;
    read_file(&mods[i]); /* what other processes added since */
    if (!swept) /* before writing, as the other caches: temporaries of writes that never ended */
      (void)kn__cache_sweep(dir.fd, kn__compile_timeout(NULL, 0));
    swept = true;
    write_file(&mods[i]);
  }
  kn__error_restore(&es);
}
