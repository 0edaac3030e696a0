/*
** tools/report/outdir.c: output directory preparation and confined writes.
**
** All writes go through openat/mkdirat on a descriptor of OUT with
** O_NOFOLLOW on every component, and emptying OUT (--overwrite) unlinks
** symlinks instead of descending into them. Relative paths are checked
** against a small alphabet before use, so a trace cannot name "..", an
** absolute path or a hidden file.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "report/outdir.h"

static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

char *rp_safe_name(char *dst, size_t cap, const char *src) {
  size_t max = cap - 1 < RP_NAME_MAX ? cap - 1 : RP_NAME_MAX, n = 0;
  for (; src && src[n] && n < max; n++) {
    char c = src[n];
    dst[n] = name_char(c) ? c : '_';
  }
  if (n == 0) dst[n++] = '_';
  dst[n] = '\0';
  if (dst[0] == '.') dst[0] = '_';
  return dst;
}

bool rp_rel_path_ok(const char *rel) {
  if (!rel || !*rel || *rel == '/') return false;
  const char *p = rel;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 0 || n > 255 || p[0] == '.') return false;
    for (size_t i = 0; i < n; i++)
      if (!name_char(p[i])) return false;
    if (!e) break;
    p = e + 1;
    if (!*p) return false;
  }
  return true;
}

/* Remove everything inside the directory fd (closed here). Symlinks are
** unlinked, never followed; subdirectories are opened with O_NOFOLLOW. */
static bool empty_dir(int fd) {
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return false;
  }
  bool ok = true;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      ok = false;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      int sub = openat(dirfd(d), e->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0 || !empty_dir(sub) ||
          unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) != 0)
        ok = false;
    } else if (unlinkat(dirfd(d), e->d_name, 0) != 0) {
      ok = false;
    }
  }
  closedir(d);
  return ok;
}

/* A new open file description of the directory fd: dup() would share the
** read position, so a second listing would start at the end. */
static int reopen_dir(int fd) {
  return openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static bool dir_is_empty(int fd) {
  int dup_fd = reopen_dir(fd);
  if (dup_fd < 0) return false;
  DIR *d = fdopendir(dup_fd);
  if (!d) {
    close(dup_fd);
    return false;
  }
  bool empty = true;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      empty = false;
      break;
    }
  closedir(d);
  return empty;
}

/* mkdir -p for the user-given OUT path (its parents are the user's). */
static kn_status make_dirs(const char *path) {
  char *p = strdup(path);
  if (!p) return kn__oom();
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      kn_status st = kn__error(KN_EIO, "cannot create directory '%s': %s", p,
                               strerror(errno));
      free(p);
      return st;
    }
    *s = '/';
  }
  kn_status st = KN_OK;
  if (mkdir(p, 0755) != 0 && errno != EEXIST)
    st = kn__error(KN_EIO, "cannot create directory '%s': %s", p,
                   strerror(errno));
  free(p);
  return st;
}

/* lstat of OUT without its trailing slashes: "link/" would follow link. */
static int lstat_trimmed(const char *path, struct stat *st) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  char *p = strndup(path, n);
  if (!p) return -1;
  int rc = lstat(p, st);
  free(p);
  return rc;
}

kn_status rp_out_prepare(rp_out *o, const char *path, bool overwrite) {
  o->fd = -1;
  o->path = NULL;
  struct stat st;
  if (lstat_trimmed(path, &st) != 0) {
    kn_status s = make_dirs(path);
    if (s) return s;
  } else if (S_ISLNK(st.st_mode)) {
    return kn__error(KN_EINVAL, "output '%s' is a symbolic link; kiln report "
                     "never writes or deletes through a link: name the "
                     "directory itself", path);
  } else if (!S_ISDIR(st.st_mode)) {
    return kn__error(KN_EINVAL, "output '%s' exists and is not a directory",
                     path);
  }
  /* O_NOFOLLOW: a link swapped in after the check is refused too. */
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return kn__error(KN_EIO, "cannot open output directory '%s': %s", path,
                     strerror(errno));
  if (!dir_is_empty(fd)) {
    if (!overwrite) {
      close(fd);
      return kn__error(KN_EINVAL,
                       "directory '%s' already exists and is not empty; pass "
                       "--overwrite to replace it or use -o OUTDIR",
                       path);
    }
    int sub = reopen_dir(fd);
    if (sub < 0 || !empty_dir(sub)) {
      close(fd);
      return kn__error(KN_EIO, "cannot empty output directory '%s'", path);
    }
  }
  o->path = strdup(path);
  if (!o->path) {
    close(fd);
    return kn__oom();
  }
  o->fd = fd;
  return KN_OK;
}

void rp_out_close(rp_out *o) {
  if (o->fd >= 0) close(o->fd);
  o->fd = -1;
  free(o->path);
  o->path = NULL;
}

/* Walk rel's directory components from OUT, creating them; returns a
** descriptor of the last directory (caller closes) and *leaf. */
static int walk_dirs(rp_out *o, const char *rel, char *buf, const char **leaf) {
  strcpy(buf, rel);
  int fd = dup(o->fd);
  char *p = buf;
  for (char *s; fd >= 0 && (s = strchr(p, '/')); p = s + 1) {
    *s = '\0';
    if (mkdirat(fd, p, 0755) != 0 && errno != EEXIST) {
      close(fd);
      return -1;
    }
    int next = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
  }
  *leaf = p;
  return fd;
}

FILE *rp_out_fopen(rp_out *o, const char *rel) {
  if (!rp_rel_path_ok(rel)) {
    kn__error(KN_EINVAL, "unsafe output path '%s'", rel ? rel : "(null)");
    return NULL;
  }
  char buf[1024];
  if (strlen(rel) >= sizeof buf) {
    kn__error(KN_EINVAL, "output path too long: '%.60s...'", rel);
    return NULL;
  }
  const char *leaf;
  int dfd = walk_dirs(o, rel, buf, &leaf);
  if (dfd < 0) {
    kn__error(KN_EIO, "cannot create directories for '%s' in '%s': %s", rel,
              o->path, strerror(errno));
    return NULL;
  }
  int fd = openat(dfd, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
                  O_CLOEXEC, 0644);
  int err = errno;
  close(dfd);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    kn__error(KN_EIO, "cannot write '%s/%s': %s", o->path, rel,
              strerror(fd >= 0 ? errno : err));
  }
  return f;
}

bool rp_out_exists(rp_out *o, const char *rel) {
  struct stat st;
  return rp_rel_path_ok(rel) &&
         fstatat(o->fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool rp_out_unlink(rp_out *o, const char *rel) {
  return rp_rel_path_ok(rel) && unlinkat(o->fd, rel, 0) == 0;
}
