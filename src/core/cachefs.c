/*
** core/cachefs.c: see cachefs.h.
*/
#include "core/cachefs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/error.h"

/* ---- the root ------------------------------------------------------------------- */

/* out = v (without trailing slashes) + suffix, when v is absolute and short
** enough. */
static kn_status root_from(const char *var, const char *v, const char *suffix, char *out) {
  size_t len = strlen(v), total;
  while (len > 1 && v[len - 1] == '/') len--;
  if (v[0] != '/')
    return kn__error(KN_EINVAL, "%s must be an absolute path, found '%.200s'", var, v);
  total = len + strlen(suffix);
  if (total > KN__CACHE_ROOT_MAX)
    return kn__error(KN_EINVAL, "the cache directory from %s is %zu characters long; kiln accepts "
                     "at most %d (the paths of the files under it must fit in PATH_MAX, %d)",
                     var, total, KN__CACHE_ROOT_MAX, PATH_MAX);
  snprintf(out, KN__CACHE_PATH_CAP, "%.*s%s", (int)len, v, suffix);
  return KN_OK;
}

kn_status kn__cache_root(char out[KN__CACHE_PATH_CAP], const char **from) {
  const char *d = getenv("KILN_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  const char *var = NULL;
  kn_status st;
  if (d && *d) st = root_from(var = "KILN_CACHE_DIR", d, "", out);
  else if (x && x[0] == '/') st = root_from(var = "XDG_CACHE_HOME", x, "/kiln", out);
  else if (h && *h) st = root_from(var = "HOME", h, "/.cache/kiln", out);
  else st = kn__error(KN_EINVAL, "no cache directory: set KILN_CACHE_DIR (or HOME)");
  if (from) *from = var;
  return st;
}

/* ---- checking directories -------------------------------------------------------- */

/* May a directory above a cache directory be trusted? */
static bool parent_ok(const struct stat *sb, const char *path, char *why, size_t n) {
  if (!S_ISDIR(sb->st_mode))
    return snprintf(why, n, "'%s' is not a directory", path), false;
  if (sb->st_uid != 0 && sb->st_uid != geteuid())
    return snprintf(why, n, "'%s', above the cache directory, is owned by uid %u (expected root or "
                    "you, uid %u)", path, (unsigned)sb->st_uid, (unsigned)geteuid()), false;
  if ((sb->st_mode & 022) && !(sb->st_mode & S_ISVTX))
    return snprintf(why, n, "'%s', above the cache directory, is writable by its group or others "
                    "(mode %04o) without the sticky bit", path, (unsigned)(sb->st_mode & 07777)),
           false;
  return true;
}

/* May a cache directory itself be trusted? */
static bool own_ok(const struct stat *sb, const char *path, char *why, size_t n) {
  if (!S_ISDIR(sb->st_mode))
    return snprintf(why, n, "'%s' is not a directory", path), false;
  if (sb->st_uid != geteuid())
    return snprintf(why, n, "cache directory '%s' is owned by uid %u, not by you (uid %u)", path,
                    (unsigned)sb->st_uid, (unsigned)geteuid()), false;
  if (sb->st_mode & 022)
    return snprintf(why, n, "cache directory '%s' is writable by its group or others (mode %04o)",
                    path, (unsigned)(sb->st_mode & 07777)), false;
  return true;
}

static bool check_dir(int fd, const char *path, bool own, char *why, size_t n) {
  struct stat sb;
  const char *p = path[0] ? path : "/";
  if (fstat(fd, &sb) != 0)
    return snprintf(why, n, "cannot examine '%s': %s", p, strerror(errno)), false;
  return own ? own_ok(&sb, p, why, n) : parent_ok(&sb, p, why, n);
}

/* The next directory below fd (one component, not followed if a link);
** path grows by it. -1 with why. */
static int step(int fd, const char *comp, size_t len, char *path, char *why, size_t n) {
  size_t used = strlen(path);
  if (len > NAME_MAX || used + len + 2 > KN__CACHE_PATH_CAP)
    return snprintf(why, n, "a name in '%s' is too long", path), -1;
  snprintf(path + used, KN__CACHE_PATH_CAP - used, "/%.*s", (int)len, comp);
  char name[NAME_MAX + 1];
  memcpy(name, comp, len);
  name[len] = 0;
  int nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (nfd < 0)
    snprintf(why, n, "cannot open '%s': %s%s", path, strerror(errno),
             errno == ELOOP || errno == ENOTDIR ? " (it changed while being checked)" : "");
  return nfd;
}

/* Open the resolved absolute path one component at a time without following
** links, checking every directory above the last as a parent and the last
** as a cache directory (own) or a parent. A descriptor open for reading, or
** -1 with why. */
static int walk(const char *real, bool own, char *why, size_t n) {
  char path[KN__CACHE_PATH_CAP] = "";
  int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const char *p = real;
  if (fd < 0) return snprintf(why, n, "cannot open '/': %s", strerror(errno)), -1;
  for (;;) {
    while (*p == '/') p++;
    size_t len = strcspn(p, "/");
    if (!check_dir(fd, path, own && !len, why, n)) break;
    if (!len) {
      int rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (rfd < 0) snprintf(why, n, "cannot open '%s': %s", path, strerror(errno));
      close(fd);
      return rfd;
    }
    int nfd = step(fd, p, len, path, why, n);
    close(fd);
    if ((fd = nfd) < 0) return -1;
    p += len;
  }
  close(fd);
  return -1;
}

/* Make the missing directories of path, 0700 whatever the umask. */
static bool make_dirs(const char *path, char *why, size_t n) {
  char buf[KN__CACHE_PATH_CAP];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1;; p++) {
    if (*p && *p != '/') continue;
    char c = *p;
    *p = 0;
    if (mkdir(buf, 0700) == 0) {
      if (chmod(buf, 0700) != 0)
        return snprintf(why, n, "cannot set the mode of '%s': %s", buf, strerror(errno)), false;
    } else if (errno != EEXIST) {
      return snprintf(why, n, "cannot create '%s': %s", buf, strerror(errno)), false;
    }
    if (!c) return true;
    *p = c;
  }
}

/* Open (making it 0700 if create) the subdirectory sub of top, checked as a
** cache directory. -1 with why. */
static int open_sub(int top, const char *real, const char *sub, bool create, char *why, size_t n) {
  char path[KN__CACHE_PATH_CAP];
  snprintf(path, sizeof path, "%.3800s/%.200s", real, sub);
  int fd = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) { /* made only when missing: fewer calls when warm */
    if (mkdirat(top, sub, 0700) == 0) {
      if (fchmodat(top, sub, 0700, 0) != 0)
        return snprintf(why, n, "cannot set the mode of '%s': %s", path, strerror(errno)), -1;
    } else if (errno != EEXIST) {
      return snprintf(why, n, "cannot create '%s': %s", path, strerror(errno)), -1;
    }
    fd = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (fd < 0)
    return snprintf(why, n, "cannot open '%s': %s%s", path, strerror(errno),
                    errno == ELOOP || errno == ENOTDIR ? " (a symbolic link or not a directory; "
                                                         "not followed)" : ""), -1;
  if (!check_dir(fd, path, true, why, n) ||
      (create && faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0 &&
       snprintf(why, n, "cache directory '%s' is not writable: %s", path, strerror(errno)))) {
    close(fd);
    return -1;
  }
  return fd;
}

static kn_status refused(kn__cachedir *out, const char *why) {
  out->fd = -1;
  return kn__error(KN_EIO, "%s", why);
}

kn_status kn__cachedir_open(const char *root, const char *sub, bool create, kn__cachedir *out) {
  char why[KN__CACHE_PATH_CAP + 256], real[PATH_MAX], dir[KN__CACHE_PATH_CAP];
  struct stat sb;
  *out = (kn__cachedir){.fd = -1};
  snprintf(dir, sizeof dir, "%s", root);
  for (size_t len = strlen(dir); len > 1 && dir[len - 1] == '/';) dir[--len] = 0;
  bool missing = lstat(dir, &sb) != 0;
  if (!missing && S_ISLNK(sb.st_mode)) {
    ssize_t k = readlink(dir, real, sizeof real - 1);
    real[k > 0 ? k : 0] = 0;
    snprintf(why, sizeof why, "'%.1800s' is a symbolic link (to '%.1800s'); kiln does not use "
             "a link as its cache directory: name the directory itself", dir, real);
    return refused(out, why);
  }
  if (create && missing && !make_dirs(dir, why, sizeof why)) return refused(out, why);
  if (!realpath(dir, real)) {
    snprintf(why, sizeof why, "cannot resolve '%s': %s", dir, strerror(errno));
    return refused(out, why);
  }
  if (strlen(real) > KN__CACHE_ROOT_MAX) {
    snprintf(why, sizeof why, "'%s' resolves to a path %zu characters long; kiln accepts at most "
             "%d", dir, strlen(real), KN__CACHE_ROOT_MAX);
    return refused(out, why);
  }
  int top = walk(real, true, why, sizeof why);
  int fd = top < 0 ? -1 : open_sub(top, real, sub, create, why, sizeof why);
  if (top >= 0) close(top);
  if (fd < 0) return refused(out, why);
  out->fd = fd;
  snprintf(out->path, sizeof out->path, "%.3800s/%.200s", real, sub);
  struct statvfs vs;
  out->noexec = fstatvfs(fd, &vs) == 0 && (vs.f_flag & ST_NOEXEC);
  return KN_OK;
}

kn_status kn__cachedir_open_tmp(const char *path, kn__cachedir *out) {
  char why[KN__CACHE_PATH_CAP + 256], real[PATH_MAX];
  *out = (kn__cachedir){.fd = -1};
  if (!realpath(path, real)) {
    snprintf(why, sizeof why, "cannot resolve '%s': %s", path, strerror(errno));
    return refused(out, why);
  }
  int fd = strlen(real) > KN__CACHE_ROOT_MAX ? -1 : walk(real, false, why, sizeof why);
  if (fd < 0 && strlen(real) > KN__CACHE_ROOT_MAX)
    snprintf(why, sizeof why, "'%.200s...' is longer than %d characters", real, KN__CACHE_ROOT_MAX);
  if (fd < 0) return refused(out, why);
  out->fd = fd;
  snprintf(out->path, sizeof out->path, "%.3800s", real);
  struct statvfs vs;
  out->noexec = fstatvfs(fd, &vs) == 0 && (vs.f_flag & ST_NOEXEC);
  return KN_OK;
}

void kn__cachedir_close(kn__cachedir *d) {
  if (d->fd >= 0) close(d->fd);
  d->fd = -1;
}

/* ---- entries --------------------------------------------------------------------- */

static const char *kind(mode_t m) {
  return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m)
         ? "a symbolic link (not followed)" : "not a regular file";
}

static bool entry_ok(const struct stat *sb, const char *name, long long max, char *why, size_t n) {
  if (!S_ISREG(sb->st_mode))
    return snprintf(why, n, "'%s' is %s, not a regular file", name, kind(sb->st_mode)), false;
  if (sb->st_uid != geteuid())
    return snprintf(why, n, "'%s' is owned by uid %u, not by you (uid %u)", name,
                    (unsigned)sb->st_uid, (unsigned)geteuid()), false;
  if (sb->st_mode & 022)
    return snprintf(why, n, "'%s' is writable by its group or others (mode %04o)", name,
                    (unsigned)(sb->st_mode & 07777)), false;
  if ((long long)sb->st_size > max)
    return snprintf(why, n, "'%s' is %lld bytes long, more than the %lld an entry of its kind may "
                    "have", name, (long long)sb->st_size, max), false;
  return true;
}

int kn__cache_open(int dfd, const char *name, long long max_bytes, struct stat *sbo, bool *missing,
                   char *why, size_t n) {
  struct stat sb;
  *missing = false;
  /* refused before opening: opening a device may act on it */
  if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
    *missing = errno == ENOENT;
    snprintf(why, n, *missing ? "not in cache" : "cannot examine '%s': %s", name, strerror(errno));
    return -1;
  }
  if (!entry_ok(&sb, name, max_bytes, why, n)) return -1;
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    *missing = errno == ENOENT; /* removed meanwhile */
    snprintf(why, n, *missing ? "not in cache" : "cannot open '%s': %s", name, strerror(errno));
    return -1;
  }
  if (fstat(fd, &sb) != 0 || !entry_ok(&sb, name, max_bytes, why, n)) {
    close(fd);
    return -1;
  }
  if (sbo) *sbo = sb;
  return fd;
}

char *kn__cache_read(int dfd, const char *name, size_t max_bytes, size_t *len, bool *missing,
                     char *why, size_t n) {
  struct stat sb;
  int fd = kn__cache_open(dfd, name, (long long)max_bytes, &sb, missing, why, n);
  if (fd < 0) return NULL;
  size_t cap = (size_t)sb.st_size, got = 0;
  char *buf = malloc(cap + 1);
  ssize_t r = 0;
  while (buf && got < cap &&
         ((r = read(fd, buf + got, cap - got)) > 0 || (r < 0 && errno == EINTR)))
    got += r > 0 ? (size_t)r : 0;
  if (!buf || r < 0) snprintf(why, n, "cannot read '%s': %s", name, buf ? strerror(errno)
                                                                        : "out of memory");
  close(fd);
  if (!buf || r < 0) return free(buf), NULL;
  buf[got] = 0;
  *len = got;
  return buf;
}

static bool write_all(int fd, const char *p, size_t len) {
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    len -= (size_t)w;
  }
  return true;
}

kn_status kn__cache_write(int dfd, const char *name, const void *data, size_t len) {
  char tmp[NAME_MAX + 1];
  int fd = -1;
  for (int i = 0; i < 16 && fd < 0; i++) {
    kn__cache_tmp_name(name, tmp, sizeof tmp);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    return kn__error(KN_EIO, "cannot create a temporary file for '%s': %s", name, strerror(errno));
  bool ok = fchmod(fd, 0600) == 0 && write_all(fd, data, len);
  ok = close(fd) == 0 && ok;
  if (ok && renameat(dfd, tmp, dfd, name) == 0) return KN_OK;
  int e = errno;
  unlinkat(dfd, tmp, 0);
  return kn__error(KN_EIO, "cannot write '%s': %s", name, strerror(e));
}

/* ---- temporaries ----------------------------------------------------------------- */

/* The inode of this process's pid namespace; 0 when unknown. */
static unsigned long long pid_ns(void) {
  struct stat sb;
  return stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

void kn__cache_tmp_name(const char *name, char *out, size_t n) {
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char r[6];
  if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    unsigned long long x = (unsigned long long)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
                           (unsigned long long)(uintptr_t)out;
    for (size_t i = 0; i < sizeof r; i++, x >>= 8) r[i] = (unsigned char)x;
  }
  char s[7];
  for (size_t i = 0; i < sizeof r; i++) s[i] = abc[r[i] % 62];
  s[6] = 0;
  snprintf(out, n, "%s.tmp.%ld-%llu.%s", name, (long)getpid(), pid_ns(), s);
}

kn_status kn__cache_mkdtemp(int dfd, const char *name, char *out, size_t n) {
  for (int i = 0; i < 16; i++) {
    kn__cache_tmp_name(name, out, n);
    if (mkdirat(dfd, out, 0700) == 0) {
      if (fchmodat(dfd, out, 0700, 0) == 0) return KN_OK;
      break;
    }
    if (errno != EEXIST) break;
  }
  return kn__error(KN_EIO, "cannot create a private directory for '%s': %s", name,
                   strerror(errno));
}

static const char *digits(const char *p, unsigned long long *v) {
  const char *s = p;
  *v = 0;
  for (; *p >= '0' && *p <= '9' && p - s < 19; p++) *v = *v * 10 + (unsigned)(*p - '0');
  return p > s ? p : NULL;
}

static bool lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

int kn__cache_hex_run(const char *name) {
  int k = 0;
  while (k <= KN__CACHE_KEY_MAX && lower_hex(name[k])) k++;
  return k;
}

bool kn__cache_tmp_parse(const char *name, long long *pid, unsigned long long *ns) {
  int k = kn__cache_hex_run(name);
  if (k < KN__CACHE_KEY_MIN || k > KN__CACHE_KEY_MAX) return false;
  const char *p = name + k, *t = strstr(p, ".tmp.");
  if (!t) return false;
  for (const char *q = p + 1; t != p && q < t; q++)
    if (*q < 'a' || *q > 'z') return false;
  if (t != p && (*p != '.' || t == p + 1)) return false;
  unsigned long long v, w = 0;
  const char *q = digits(t + 5, &v);
  if (q && *q == '-') q = digits(q + 1, &w);
  if (!q || *q != '.' || !q[1]) return false;
  *pid = (long long)v;
  *ns = w;
  return true;
}

double kn__cache_stale_age(double timeout_s) {
  if (timeout_s <= 0) return 86400;
  return 2 * timeout_s > 3600 ? 2 * timeout_s : 3600;
}

bool kn__cache_tmp_stale(const char *name, time_t mtime, time_t now, double timeout_s) {
  long long pid;
  unsigned long long ns, mine;
  if (!kn__cache_tmp_parse(name, &pid, &ns)) return false;
  if (difftime(now, mtime) > kn__cache_stale_age(timeout_s)) return true;
  if (!ns || !(mine = pid_ns()) || ns != mine || pid <= 0 || pid > INT_MAX) return false;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int kn__cache_remove_tmp(int dfd, const char *name) {
  if (unlinkat(dfd, name, 0) == 0) return 0;
  if (errno != EISDIR && errno != EPERM) return -1;
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0) close(fd);
    return -1;
  }
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
  return unlinkat(dfd, name, AT_REMOVEDIR);
}

int kn__cache_sweep(int dfd, double timeout_s) {
  int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), removed = 0;
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0) close(fd);
    return 0;
  }
  time_t now = time(NULL);
  long long pid;
  unsigned long long ns;
  struct stat sb;
  for (struct dirent *e; (e = readdir(d));)
    if (kn__cache_tmp_parse(e->d_name, &pid, &ns) &&
        fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
        kn__cache_tmp_stale(e->d_name, sb.st_mtime, now, timeout_s) &&
        kn__cache_remove_tmp(dfd, e->d_name) == 0)
      removed++;
  closedir(d);
  return removed;
}

/* ---- the compile time limit ------------------------------------------------------ */

double kn__compile_timeout(char *why, size_t n) {
  const char *v = getenv("KILN_COMPILE_TIMEOUT");
  if (why && n) why[0] = 0;
  if (!v || !*v) return KN__COMPILE_TIMEOUT_DEFAULT;
  char *end;
  errno = 0;
  double s = strtod(v, &end);
  if (end != v && !*end && !errno && s >= 0 && s <= 1e6) return s;
  if (why && n)
    snprintf(why, n, "KILN_COMPILE_TIMEOUT: expected a number of seconds from 0 to 1000000 (0: no "
             "limit), found '%.100s'; using %g", v, KN__COMPILE_TIMEOUT_DEFAULT);
  return KN__COMPILE_TIMEOUT_DEFAULT;
}
