/*
** core/fileio.c: whole-file reads and atomic, durable file replacement
** (see fileio.h).
*/
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/strbuf.h"

/* ---- reading ----------------------------------------------------------------------- */
/* Read fd to its end into a buffer of at least hint + 1 bytes (grown as needed). */
static kn_status read_fd(int fd, const char *path, size_t hint, char **buf, size_t *len) {
  size_t cap = hint + 1 > 4096 ? hint + 1 : 4096, n = 0;
  char *b = malloc(cap);
  if (!b) return kn__oom();
  for (;;) {
    if (n + 1 == cap) {
      char *nb = cap <= SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
      if (!nb) return free(b), kn__oom();
      b = nb, cap *= 2;
    }
    ssize_t r = read(fd, b + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      kn_status st = kn__error(KN_EIO, "cannot read '%s': %s", path, strerror(errno));
      free(b);
      return st;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  b[n] = '\0';
  *buf = b, *len = n;
  return KN_OK;
}

kn_status kn__file_read(const char *path, const char *what, char **buf, size_t *len) {
  *buf = NULL, *len = 0;
  if (!path) return kn__error(KN_EINVAL, "expected a path to %s, found NULL", what);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kn__error(KN_EIO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  kn_status st = KN_OK;
  if (fstat(fd, &sb) != 0) st = kn__error(KN_EIO, "cannot stat '%s': %s", path, strerror(errno));
  else if (S_ISDIR(sb.st_mode))
    st = kn__error(KN_EINVAL, "'%s' is a directory, expected %s", path, what);
  else
    st = read_fd(fd, path, S_ISREG(sb.st_mode) && sb.st_size > 0 ? (size_t)sb.st_size : 0, buf,
                 len);
  close(fd);
  return st;
}

/* ---- saving ------------------------------------------------------------------------ */
/* 16 hex digits, from getrandom (a clock and pid mix if that fails: the
** exclusive create keeps even a guessable name safe). */
static void random_hex(char out[17]) {
  uint64_t x = 0;
  if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    x = ((uint64_t)t.tv_nsec * 0x9E3779B97F4A7C15u) ^ ((uint64_t)t.tv_sec << 20) ^
        (uint64_t)getpid();
  }
  for (int i = 0; i < 16; i++) out[i] = "0123456789abcdef"[(x >> (4 * i)) & 15];
  out[16] = '\0';
}

/* path's directory ("." when it has none) into dir, its last component's offset in *base. */
static kn_status split_path(const char *path, kn__sb *dir, size_t *base) {
  const char *slash = strrchr(path, '/');
  *base = slash ? (size_t)(slash - path) + 1 : 0;
  if (!path[*base])
    return kn__error(KN_EINVAL, "'%s' ends with '/', expected a file path", path);
  if (!slash) kn__sb_puts(dir, ".");
  else kn__sb_putn(dir, path, slash == path ? 1 : (size_t)(slash - path));
  return kn__sb_failed(dir) ? kn__oom() : KN_OK;
}

/* Create "<dir>/.<name>.<hex>.tmp" exclusively; its name goes to tmp. */
static kn_status create_tmp(const char *dir, const char *name, kn__sb *tmp, int *fd) {
  for (int tries = 0; tries < 64; tries++) {
    char hex[17];
    random_hex(hex);
    kn__sb_clear(tmp);
    /* at most 200 bytes of the name, so the temporary name fits NAME_MAX */
    kn__sb_printf(tmp, "%s/.%.200s.%s.tmp", dir, name, hex);
    if (kn__sb_failed(tmp)) return kn__oom();
    *fd = open(tmp->buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (*fd >= 0) return KN_OK;
    if (errno != EEXIST)
      return kn__error(KN_EIO, "cannot create a temporary file in '%s': %s", dir,
                       strerror(errno));
  }
  return kn__error(KN_EIO, "cannot create a temporary file in '%s': 64 random names taken", dir);
}

/* Run fn into fd, flush, fsync and close it (always closed). */
static kn_status write_and_sync(int fd, const char *tmp, kn__file_writer fn, void *ud) {
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    kn_status st = kn__error(KN_EIO, "cannot write '%s': %s", tmp, strerror(errno));
    close(fd);
    return st;
  }
  kn_status st = fn(ud, f);
  if (st == KN_OK && fflush(f) != 0)
    st = kn__error(KN_EIO, "cannot write '%s': %s", tmp, strerror(errno));
  if (st == KN_OK && ferror(f)) st = kn__error(KN_EIO, "cannot write '%s': a write failed", tmp);
  if (st == KN_OK && fsync(fd) != 0)
    st = kn__error(KN_EIO, "cannot sync '%s' to disk: %s", tmp, strerror(errno));
  if (fclose(f) != 0 && st == KN_OK)
    st = kn__error(KN_EIO, "cannot write '%s': %s", tmp, strerror(errno));
  return st;
}

/* Make the rename durable. A file system that cannot sync directories
** (EINVAL) has nothing to sync. */
static kn_status sync_dir(const char *dir, const char *path) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err = fd < 0 || fsync(fd) != 0 ? errno : 0;
  if (fd >= 0) close(fd);
  if (!err || err == EINVAL) return KN_OK;
  return kn__error(KN_EIO, "'%s' was replaced, but its directory '%s' could not be synced to "
                           "disk, so the change may not survive a power loss: %s",
                   path, dir, strerror(err));
}

static kn_status check_target(const char *path) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
    return kn__error(KN_EINVAL, "'%s' is a directory, expected a file path", path);
  return KN_OK;
}

static kn_status rename_into_place(const char *tmp, const char *path) {
  if (rename(tmp, path) == 0) return KN_OK;
  int err = errno;
  if (err == EISDIR) return kn__error(KN_EINVAL, "'%s' is a directory, expected a file path", path);
  return kn__error(KN_EIO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(err));
}

kn_status kn__file_save(const char *path, kn__file_writer fn, void *ud) {
  if (!path || !*path)
    return kn__error(KN_EINVAL, "expected a file path, found %s", path ? "\"\"" : "NULL");
  kn__sb dir = KN__SB_INIT, tmp = KN__SB_INIT;
  size_t base = 0;
  int fd = -1;
  kn_status st = check_target(path);
  if (st == KN_OK) st = split_path(path, &dir, &base);
  if (st == KN_OK) st = create_tmp(dir.buf, path + base, &tmp, &fd);
  if (st == KN_OK) st = write_and_sync(fd, tmp.buf, fn, ud);
  if (st == KN_OK) st = rename_into_place(tmp.buf, path);
  if (st == KN_OK) st = sync_dir(dir.buf, path);
  else if (fd >= 0) unlink(tmp.buf);
  kn__sb_fini(&dir), kn__sb_fini(&tmp);
  return st;
}
