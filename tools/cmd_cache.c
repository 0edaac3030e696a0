/*
** tools/cmd_cache.c: `kiln cache`, the inductor disk cache. Lists the
** entries of DIR/inductor (DIR: --dir, else KILN_CACHE_DIR, else
** $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; the layout of
** src/inductor/toolchain.c) with sizes and ages and a total; --clear removes
** them.
**
** Only kiln's own files count: regular files named <64 hex digits>.c, .so,
** .meta or .fxg (a graph key naming its source's key), and the temporary files of an interrupted write (<key>.<ext>.tmp.*).
** Everything else (other names, directories, symbolic links even with a
** kiln name) is counted as "not kiln's" and left alone. The directory is read
** through a descriptor opened with O_NOFOLLOW and files are examined with
** fstatat(AT_SYMLINK_NOFOLLOW) and removed with unlinkat, so no link is
** followed out of it.
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

static const char *help =
    "usage: kiln cache [--dir DIR] [--clear]\n"
    "\n"
    "List the entries of the inductor disk cache (generated C source,\n"
    "shared object and checksum file per compiled graph) with their sizes,\n"
    "ages and a total.\n"
    "\n"
    "  --dir DIR   the cache directory (default: KILN_CACHE_DIR, else\n"
    "              $XDG_CACHE_HOME/kiln, else ~/.cache/kiln); entries are in\n"
    "              DIR/inductor\n"
    "  --clear     remove the entries; files that are not kiln's (other\n"
    "              names, directories, symbolic links) are left alone\n"
    "  -h, --help  this help\n"
    "\n"
    "Exit status: 0 on success (also for an empty or missing cache), 1 when\n"
    "the directory cannot be read or a file cannot be removed, 2 on a bad\n"
    "argument.\n";

#define KEY_LEN 64

typedef struct entry {
  char key[KEY_LEN + 1];
  long long bytes;
  time_t newest;
  unsigned files; /* bit 2k: complete file of exts[k]; bit 2k+1: a partial one */
} entry;

typedef struct scan {
  entry *v;
  size_t n, cap;
  long long bytes, removed_bytes;
  int files, foreign, removed, failed;
} scan;

static const char *const exts[] = {".c", ".so", ".meta", ".fxg"};
#define NEXTS ((int)(sizeof exts / sizeof exts[0]))

/* Bit of the kiln extension at s (see entry.files), or -1. */
static int ext_bit(const char *s) {
  for (int i = 0; i < NEXTS; i++) {
    size_t n = strlen(exts[i]);
    if (!strncmp(s, exts[i], n) && (s[n] == 0 || !strncmp(s + n, ".tmp.", 5)))
      return 2 * i + (s[n] != 0);
  }
  return -1;
}

/* Is name one of kiln's cache file names? */
static bool kiln_name(const char *name) {
  for (int i = 0; i < KEY_LEN; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
  return ext_bit(name + KEY_LEN) >= 0;
}

static entry *entry_for(scan *s, const char *key) {
  for (size_t i = 0; i < s->n; i++)
    if (!strncmp(s->v[i].key, key, KEY_LEN)) return &s->v[i];
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    entry *v = realloc(s->v, cap * sizeof *v);
    if (!v) return NULL;
    s->v = v;
    s->cap = cap;
  }
  entry *e = &s->v[s->n++];
  memset(e, 0, sizeof *e);
  memcpy(e->key, key, KEY_LEN);
  return e;
}

static void add_file(scan *s, const char *name, const struct stat *sb) {
  entry *e = entry_for(s, name);
  if (!e) return;
  e->bytes += sb->st_size;
  if (sb->st_mtime > e->newest) e->newest = sb->st_mtime;
  e->files |= 1u << ext_bit(name + KEY_LEN);
  s->bytes += sb->st_size;
  s->files++;
}

static void visit(scan *s, int dfd, const char *name, bool clear) {
  struct stat sb;
  if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) return; /* gone meanwhile */
  if (!S_ISREG(sb.st_mode) || !kiln_name(name)) {
    s->foreign++;
    return;
  }
  if (!clear) return add_file(s, name, &sb);
  if (unlinkat(dfd, name, 0) == 0) {
    s->removed++;
    s->removed_bytes += sb.st_size;
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

/* ".c .so(partial) .meta" */
static void file_list(unsigned bits, char *out, size_t n) {
  size_t used = 0;
  out[0] = 0;
  for (int b = 0; b < 2 * NEXTS; b++)
    if (bits & (1u << b))
      used += (size_t)snprintf(out + used, n - used, "%s%s%s", used ? " " : "", exts[b / 2],
                               b % 2 ? "(partial)" : "");
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
  printf("kiln cache: %s/inductor\n", dir);
  if (s->n) printf("  %-64s  %10s  %5s  files\n", "key", "size", "age");
  for (size_t i = 0; i < s->n; i++) {
    human(s->v[i].bytes, sz, sizeof sz);
    age(now, s->v[i].newest, ag, sizeof ag);
    file_list(s->v[i].files, fl, sizeof fl);
    printf("  %s  %10s  %5s  %s\n", s->v[i].key, sz, ag, fl);
  }
  human(s->bytes, sz, sizeof sz);
  printf("total: %zu entr%s, %d file%s, %s (%lld bytes)\n", s->n, s->n == 1 ? "y" : "ies",
         s->files, s->files == 1 ? "" : "s", sz, s->bytes);
  if (s->foreign) printf("not kiln's: %d (left alone)\n", s->foreign);
}

static void print_clear(const scan *s, const char *dir) {
  char sz[32];
  human(s->removed_bytes, sz, sizeof sz);
  printf("kiln cache: removed %d file%s (%s) from %s/inductor\n", s->removed,
         s->removed == 1 ? "" : "s", sz, dir);
  if (s->foreign) printf("not kiln's: %d (left alone)\n", s->foreign);
}

/* The cache directory: --dir, KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln. */
static bool default_dir(char *out, size_t n) {
  const char *d = getenv("KILN_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  if (d && *d) snprintf(out, n, "%s", d);
  else if (x && *x) snprintf(out, n, "%s/kiln", x);
  else if (h && *h) snprintf(out, n, "%s/.cache/kiln", h);
  else return false;
  return true;
}

/* Open DIR/inductor without following a link at either step. -1 with errno. */
static int open_cache(const char *dir) {
  int top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (top < 0) return -1;
  int fd = openat(top, "inductor", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int saved = errno;
  close(top);
  errno = saved;
  return fd;
}

static int run(const char *dir, bool clear) {
  int fd = open_cache(dir);
  if (fd < 0 && errno == ENOENT) {
    printf("kiln cache: %s/inductor does not exist: no cache entries\n", dir);
    return 0;
  }
  if (fd < 0) {
    fprintf(stderr, "kiln cache: cannot open '%s/inductor': %s%s\n", dir, strerror(errno),
            errno == ELOOP || errno == ENOTDIR ? " (a symbolic link or not a directory; not "
                                                 "followed)" : "");
    return 1;
  }
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    fprintf(stderr, "kiln cache: cannot read '%s/inductor': %s\n", dir, strerror(errno));
    return 1;
  }
  scan s = {0};
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) visit(&s, dirfd(d), e->d_name, clear);
  closedir(d);
  if (clear) print_clear(&s, dir);
  else print_list(&s, dir);
  free(s.v);
  return s.failed ? 1 : 0;
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
  char buf[4096];
  if (!dir && !default_dir(buf, sizeof buf)) {
    fprintf(stderr, "kiln cache: no cache directory: set KILN_CACHE_DIR or HOME, or pass "
            "--dir DIR\n");
    return 1;
  }
  return run(dir ? dir : buf, clear);
}
