/*
** tools/cmd_cache.c: `kiln cache`, kiln's disk caches. Lists the entries of
** DIR/inductor (generated code), DIR/aotautograd (prepared AOT compiles)
** and DIR/symbols (source locations per module) (DIR: --dir, else
** KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; the layouts
** of src/inductor/toolchain.c, src/aot/aot_cache_disk.c and
** src/core/symcache.c) with sizes and ages and a total per directory;
** --clear removes them.
**
** Only kiln's own files count: regular files named after their directory's
** key (64 hex digits in inductor/ and aotautograd/, a module's build ID of 2
** to 128 hex digits in symbols/) with one of its extensions (.c, .so, .meta,
** .fxg; .entry; .sym), and the temporaries of writes (core/cachefs.h): files
** <key>.<ext>.tmp.<pid>-<ns>.* of a write and private build directories
** <key>.tmp.<pid>-<ns>.*. A temporary whose write has ended (stale: its
** process is gone, or it is older than the stale age) is removed by
** --clear; one of a running compile is left alone, so a clear never breaks
** a compile. Everything else (other names, other directories, symbolic
** links even with a kiln name) is counted as "not kiln's" and left alone.
** Each directory is read through a descriptor opened with O_NOFOLLOW and
** files are examined with fstatat(AT_SYMLINK_NOFOLLOW) and removed with
** unlinkat, so no link is followed out of it. A directory kiln would refuse
** to use (the trust rules of docs/INDUCTOR.md) is still listed, with a note
** saying why.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "core/cachefs.h"
#include "core/error.h"

static const char *help =
    "usage: kiln cache [--dir DIR] [--clear]\n"
    "\n"
    "List the entries of kiln's disk caches with their sizes, ages and a\n"
    "total per directory: inductor/ (generated C source, shared object and\n"
    "checksum file per compiled graph), aotautograd/ (one file per prepared\n"
    "AOT compile) and symbols/ (source locations, one file per module).\n"
    "\n"
    "  --dir DIR   the cache directory (default: KILN_CACHE_DIR, else\n"
    "              $XDG_CACHE_HOME/kiln, else ~/.cache/kiln); entries are in\n"
    "              DIR/inductor, DIR/aotautograd and DIR/symbols\n"
    "  --clear     remove the entries and the temporary files of ended\n"
    "              compiles; temporaries of running compiles and files that\n"
    "              are not kiln's (other names, directories, symbolic links)\n"
    "              are left alone\n"
    "  -h, --help  this help\n"
    "\n"
    "Exit status: 0 on success (also for an empty or missing cache), 1 when\n"
    "the directory cannot be read or a file cannot be removed, 2 on a bad\n"
    "argument.\n";

#define KEY_MAX KN__CACHE_KEY_MAX

/* One cache directory under DIR: its name, the hex digits of its keys and
** the extensions of its files. */
typedef struct section {
  const char *sub;
  int key_min, key_max;
  const char *const *exts;
  int nexts;
} section;

static const char *const inductor_exts[] = {".c", ".so", ".meta", ".fxg"};
static const char *const aot_exts[] = {".entry"};
static const char *const symbol_exts[] = {".sym"};

static const section sections[] = {
    {"inductor", 64, 64, inductor_exts, 4},
    {"aotautograd", 64, 64, aot_exts, 1},
    {"symbols", KN__CACHE_KEY_MIN, KEY_MAX, symbol_exts, 1},
};

typedef struct entry {
  char key[KEY_MAX + 1];
  long long bytes;
  time_t newest;
  unsigned files; /* bit 2k: complete file of exts[k]; bit 2k+1: a partial one;
                     bit 2 * nexts: a build directory */
} entry;

typedef struct scan {
  const section *sec;
  entry *v;
  size_t n, cap;
  long long bytes, removed_bytes;
  int files, foreign, removed, failed, stale, running;
  double timeout_s; /* KILN_COMPILE_TIMEOUT: how old a temporary must be to be stale */
  time_t now;
} scan;

/* Bit of the section's extension at s (see entry.files), or -1. */
static int ext_bit(const section *sec, const char *s) {
  if (!strncmp(s, ".tmp.", 5)) return 2 * sec->nexts;
  for (int i = 0; i < sec->nexts; i++) {
    size_t n = strlen(sec->exts[i]);
    if (!strncmp(s, sec->exts[i], n) && (s[n] == 0 || !strncmp(s + n, ".tmp.", 5)))
      return 2 * i + (s[n] != 0);
  }
  return -1;
}

/* Length of name's key (its leading lowercase hex digits) when name is one
** of the section's file names, else 0. */
static int key_len(const section *sec, const char *name) {
  int k = kn__cache_hex_run(name);
  return k >= sec->key_min && k <= sec->key_max && ext_bit(sec, name + k) >= 0 ? k : 0;
}

static entry *entry_for(scan *s, const char *key, int len) {
  for (size_t i = 0; i < s->n; i++)
    if ((int)strlen(s->v[i].key) == len && !strncmp(s->v[i].key, key, (size_t)len)) return &s->v[i];
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    entry *v = realloc(s->v, cap * sizeof *v);
    if (!v) return NULL;
    s->v = v;
    s->cap = cap;
  }
  entry *e = &s->v[s->n++];
  memset(e, 0, sizeof *e);
  memcpy(e->key, key, (size_t)len);
  return e;
}

/* Bytes of the regular files in the directory name of dfd. */
static long long dir_bytes(int dfd, const char *name) {
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  long long bytes = 0;
  struct stat sb;
  if (!d && fd >= 0) close(fd);
  for (struct dirent *e; d && (e = readdir(d));)
    if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
      bytes += sb.st_size;
  if (d) closedir(d);
  return bytes;
}

static void add_file(scan *s, const char *name, int klen, const struct stat *sb,
                     long long bytes) {
  entry *e = entry_for(s, name, klen);
  if (!e) return;
  e->bytes += bytes;
  if (sb->st_mtime > e->newest) e->newest = sb->st_mtime;
  e->files |= 1u << ext_bit(s->sec, name + klen);
  s->bytes += bytes;
  s->files++;
}

static void visit(scan *s, int dfd, const char *name, bool clear) {
  struct stat sb;
  long long pid;
  unsigned long long ns;
  if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) return; /* gone meanwhile */
  bool tmp = kn__cache_tmp_parse(name, &pid, &ns);
  int klen = key_len(s->sec, name);
  if (!klen || !(S_ISREG(sb.st_mode) || (tmp && S_ISDIR(sb.st_mode)))) {
    s->foreign++;
    return;
  }
  bool stale = tmp && kn__cache_tmp_stale(name, sb.st_mtime, s->now, s->timeout_s);
  long long bytes = S_ISDIR(sb.st_mode) ? dir_bytes(dfd, name) : (long long)sb.st_size;
  s->stale += stale;
  s->running += tmp && !stale;
  if (!clear || (tmp && !stale)) return add_file(s, name, klen, &sb, bytes);
  if ((tmp ? kn__cache_remove_tmp(dfd, name) : unlinkat(dfd, name, 0)) == 0) {
    s->removed++;
    s->removed_bytes += bytes;
  } else if (errno != ENOENT) {
    fprintf(stderr, "kiln cache: cannot remove '%s': %s\n", name, strerror(errno));
    s->failed++;
  }
}

static void human(long long b, char *out, size_t n) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (b < 1024) {
    snprintf(out, n, "%lld B", b);
    return;
  }
  double v = (double)b / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, u++;
  snprintf(out, n, "%.1f %s", v, units[u]);
}

static void age(time_t now, time_t t, char *out, size_t n) {
  long long d = now > t ? (long long)(now - t) : 0;
  if (d < 60) snprintf(out, n, "%llds", d);
  else if (d < 3600) snprintf(out, n, "%lldm", d / 60);
  else if (d < 86400) snprintf(out, n, "%lldh", d / 3600);
  else snprintf(out, n, "%lldd", d / 86400);
}

/* ".c .so(partial) .meta .tmp/(partial)" */
static void file_list(const section *sec, unsigned bits, char *out, size_t n) {
  size_t used = 0;
  int nb = 2 * sec->nexts;
  out[0] = 0;
  for (int b = 0; b <= nb; b++)
    if (bits & (1u << b))
      used += (size_t)snprintf(out + used, n - used, "%s%s%s", used ? " " : "",
                               b < nb ? sec->exts[b / 2] : ".tmp/",
                               b % 2 || b == nb ? "(partial)" : "");
}

static void print_temporaries(const scan *s, bool clear) {
  if (s->stale && !clear)
    printf("stale temporaries of ended compiles: %d (removed by --clear or the next compile)\n",
           s->stale);
  if (s->running)
    printf("temporaries of running compiles: %d%s\n", s->running, clear ? " (left alone)" : "");
}

static int by_age(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->newest != y->newest) return x->newest > y->newest ? -1 : 1;
  return strcmp(x->key, y->key);
}

static void print_list(scan *s, const char *dir) {
  if (s->n > 1) qsort(s->v, s->n, sizeof *s->v, by_age);
  time_t now = time(NULL);
  char sz[32], ag[32], fl[64];
  printf("kiln cache: %s/%s\n", dir, s->sec->sub);
  if (s->n) printf("  %-64s  %10s  %5s  files\n", "key", "size", "age");
  for (size_t i = 0; i < s->n; i++) {
    human(s->v[i].bytes, sz, sizeof sz);
    age(now, s->v[i].newest, ag, sizeof ag);
    file_list(s->sec, s->v[i].files, fl, sizeof fl);
    printf("  %-64s  %10s  %5s  %s\n", s->v[i].key, sz, ag, fl);
  }
  human(s->bytes, sz, sizeof sz);
  printf("total: %zu entr%s, %d file%s, %s (%lld bytes)\n", s->n, s->n == 1 ? "y" : "ies",
         s->files, s->files == 1 ? "" : "s", sz, s->bytes);
  print_temporaries(s, false);
  if (s->foreign) printf("not kiln's: %d (left alone)\n", s->foreign);
}

static void print_clear(const scan *s, const char *dir) {
  char sz[32];
  human(s->removed_bytes, sz, sizeof sz);
  printf("kiln cache: removed %d file%s (%s) from %s/%s\n", s->removed,
         s->removed == 1 ? "" : "s", sz, dir, s->sec->sub);
  print_temporaries(s, true);
  if (s->foreign) printf("not kiln's: %d (left alone)\n", s->foreign);
}

/* Open DIR/sub without following a link at either step. -1 with errno. */
static int open_cache(const char *dir, const char *sub) {
  int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0) return -1;
  int fd = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int saved = errno;
  close(top);
  errno = saved;
  return fd;
}

/* Say so when kiln would not use the directory (the trust rules). */
static void trust_note(const char *dir, const char *sub) {
  kn__cachedir cd;
  if (kn__cachedir_open(dir, sub, false, &cd) == KN_OK) return kn__cachedir_close(&cd);
  printf("note: kiln does not use this cache: %s\n", kn_last_error());
}

/* List or clear one section; 0, or 1 when it cannot be read or a file
** cannot be removed. */
static int run_section(const char *dir, const section *sec, bool clear) {
  int fd = open_cache(dir, sec->sub);
  if (fd < 0 && errno == ENOENT) {
    printf("kiln cache: %s/%s does not exist: no cache entries\n", dir, sec->sub);
    return 0;
  }
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    int err = errno;
    if (fd >= 0) close(fd);
    fprintf(stderr, "kiln cache: cannot open '%s/%s': %s%s\n", dir, sec->sub, strerror(err),
            err == ELOOP || err == ENOTDIR ? " (a symbolic link or not a directory; not "
                                             "followed)" : "");
    return 1;
  }
  char why[300];
  scan s = {.sec = sec, .timeout_s = kn__compile_timeout(why, sizeof why), .now = time(NULL)};
  if (why[0]) fprintf(stderr, "kiln cache: %s\n", why);
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) visit(&s, dirfd(d), e->d_name, clear);
  closedir(d);
  if (clear) print_clear(&s, dir);
  else print_list(&s, dir);
  trust_note(dir, sec->sub);
  free(s.v);
  return s.failed ? 1 : 0;
}

static int run(const char *dir, bool clear) {
  int rc = 0;
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
    rc |= run_section(dir, &sections[i], clear);
  return rc;
}

int kn_cmd_cache(int argc, char **argv) {
  const char *dir = NULL;
  bool clear = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(help, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--clear")) {
      clear = true;
    } else if (!strcmp(argv[i], "--dir") && i + 1 < argc && *argv[i + 1]) {
      dir = argv[++i];
    } else {
      fprintf(stderr, "kiln cache: unknown argument '%s' (expected --dir DIR, --clear or "
              "--help)\n", argv[i]);
      return 2;
    }
  }
  char buf[KN__CACHE_PATH_CAP];
  if (!dir && kn__cache_root(buf, NULL) != KN_OK) {
    fprintf(stderr, "kiln cache: %s (or pass --dir DIR)\n", kn_last_error());
    return 1;
  }
  if (dir) snprintf(buf, sizeof buf, "%s", dir);
  for (size_t len = strlen(buf); len > 1 && buf[len - 1] == '/';) buf[--len] = 0;
  return run(buf, clear);
}
