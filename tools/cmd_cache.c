/*
** tools/cmd_cache.c: `kiln cache`, the inductor disk cache. Lists the
** entries of DIR/inductor (DIR: --dir, else KILN_CACHE_DIR, else
** $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; the layout of
** src/inductor/toolchain.c) with sizes and ages and a total; --clear removes
** them.
**
** Only kiln's own files count: regular files named <64 hex digits>.c, .so,
** .meta or .fxg (a graph key naming its source's key), and the temporaries
** of compiles (core/cachefs.h): files <key>.<ext>.tmp.<pid>-<ns>.* of a
** write and private build directories <key>.tmp.<pid>-<ns>.*. A temporary
** whose compile has ended (stale: its process is gone, or it is older than
** the stale age) is removed by --clear; one of a running compile is left
** alone, so a clear never breaks a compile. Everything else (other names,
** other directories, symbolic links even with a kiln name) is counted as
** "not kiln's" and left alone. The directory is read through a descriptor
** opened with O_NOFOLLOW and files are examined with
** fstatat(AT_SYMLINK_NOFOLLOW) and removed with unlinkat, so no link is
** followed out of it. A directory kiln would refuse to use (the trust rules
** of docs/INDUCTOR.md) is still listed, with a note saying why.
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
    "List the entries of the inductor disk cache (generated C source,\n"
    "shared object and checksum file per compiled graph) with their sizes,\n"
    "ages and a total.\n"
    "\n"
    "  --dir DIR   the cache directory (default: KILN_CACHE_DIR, else\n"
    "              $XDG_CACHE_HOME/kiln, else ~/.cache/kiln); entries are in\n"
    "              DIR/inductor\n"
    "  --clear     remove the entries and the temporary files of ended\n"
    "              compiles; temporaries of running compiles and files that\n"
    "              are not kiln's (other names, directories, symbolic links)\n"
    "              are left alone\n"
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
  unsigned files; /* bit 2k: complete file of exts[k]; bit 2k+1: a partial one;
                     bit 2 * NEXTS: a build directory */
} entry;

typedef struct scan {
  entry *v;
  size_t n, cap;
  long long bytes, removed_bytes;
  int files, foreign, removed, failed, stale, running;
  double timeout_s; /* KILN_COMPILE_TIMEOUT: how old a temporary must be to be stale */
  time_t now;
} scan;

static const char *const exts[] = {".c", ".so", ".meta", ".fxg"};
#define NEXTS ((int)(sizeof exts / sizeof exts[0]))

/* Bit of the kiln extension at s (see entry.files), or -1. */
static int ext_bit(const char *s) {
  if (!strncmp(s, ".tmp.", 5)) return 2 * NEXTS;
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

static void add_file(scan *s, const char *name, const struct stat *sb, long long bytes) {
  entry *e = entry_for(s, name);
  if (!e) return;
  e->bytes += bytes;
  if (sb->st_mtime > e->newest) e->newest = sb->st_mtime;
  e->files |= 1u << ext_bit(name + KEY_LEN);
  s->bytes += bytes;
  s->files++;
}

static void visit(scan *s, int dfd, const char *name, bool clear) {
  struct stat sb;
  long long pid;
  unsigned long long ns;
  if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) return; /* gone meanwhile */
  bool tmp = kn__cache_tmp_parse(name, &pid, &ns);
  if (!kiln_name(name) || !(S_ISREG(sb.st_mode) || (tmp && S_ISDIR(sb.st_mode)))) {
    s->foreign++;
    return;
  }
  bool stale = tmp && kn__cache_tmp_stale(name, sb.st_mtime, s->now, s->timeout_s);
  long long bytes = S_ISDIR(sb.st_mode) ? dir_bytes(dfd, name) : (long long)sb.st_size;
  s->stale += stale;
  s->running += tmp && !stale;
  if (!clear || (tmp && !stale)) return add_file(s, name, &sb, bytes);
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
static void file_list(unsigned bits, char *out, size_t n) {
  size_t used = 0;
  out[0] = 0;
  for (int b = 0; b <= 2 * NEXTS; b++)
    if (bits & (1u << b))
      used += (size_t)snprintf(out + used, n - used, "%s%s%s", used ? " " : "",
                               b < 2 * NEXTS ? exts[b / 2] : ".tmp/", b % 2 || b == 2 * NEXTS
                                                                         ? "(partial)" : "");
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
  print_temporaries(s, false);
  if (s->foreign) printf("not kiln's: %d (left alone)\n", s->foreign);
}

static void print_clear(const scan *s, const char *dir) {
  char sz[32];
  human(s->removed_bytes, sz, sizeof sz);
  printf("kiln cache: removed %d file%s (%s) from %s/inductor\n", s->removed,
         s->removed == 1 ? "" : "s", sz, dir);
  print_temporaries(s, true);
  if (s->foreign) printf("not kiln's: %d (left alone)\n", s->foreign);
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

/* Say so when kiln would not use the directory (the trust rules). */
static void trust_note(const char *dir) {
  kn__cachedir cd;
  if (kn__cachedir_open(dir, "inductor", false, &cd) == KN_OK) return kn__cachedir_close(&cd);
  printf("note: kiln does not use this cache: %s\n", kn_last_error());
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
  char why[300];
  scan s = {.timeout_s = kn__compile_timeout(why, sizeof why), .now = time(NULL)};
  if (why[0]) fprintf(stderr, "kiln cache: %s\n", why);
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) visit(&s, dirfd(d), e->d_name, clear);
  closedir(d);
  if (clear) print_clear(&s, dir);
  else print_list(&s, dir);
  trust_note(dir);
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
  char buf[KN__CACHE_PATH_CAP];
  if (!dir && kn__cache_root(buf, NULL) != KN_OK) {
    fprintf(stderr, "kiln cache: %s (or pass --dir DIR)\n", kn_last_error());
    return 1;
  }
  if (dir) snprintf(buf, sizeof buf, "%s", dir);
  for (size_t len = strlen(buf); len > 1 && buf[len - 1] == '/';) buf[--len] = 0;
  return run(buf, clear);
}
