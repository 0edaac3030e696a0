/*
** core/cachefs.h: the directories and files of kiln's disk caches (the
** inductor code cache, the AOT cache), under the trust rules of
** docs/INDUCTOR.md ("Trust rules"):
**
** - A cache directory is used only when it is a real directory (the
**   directory named is never a symbolic link), owned by the effective user
**   and not writable by its group or others; every directory above it (of
**   its resolved path, up to /) must be owned by root or the effective user
**   and not writable by group or others unless its sticky bit is set (as
**   /tmp). Directories kiln creates are made 0700 whatever the umask.
** - An entry is opened without following a link (O_NOFOLLOW) and without
**   blocking (O_NONBLOCK: a FIFO or device is refused, never waited on), and
**   checked on the opened descriptor: a regular file, owned by the
**   effective user, not writable by group or others, not longer than its
**   kind allows. Callers read (and load) what they checked through that
**   descriptor.
** - Files are written under a temporary name in the same directory
**   (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 whatever the umask) and renamed
**   into place. Temporary names are "<name>.tmp.<pid>-<pid namespace>.<6
**   random characters>"; one whose process is gone (in this pid namespace),
**   or that is older than the stale age, is stale and may be removed.
**
** These functions report through their results (kn__error messages or a
** `why` buffer); the layers above decide what to log.
*/
#ifndef KN_CORE_CACHEFS_H
#define KN_CORE_CACHEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

#include "kiln/core.h"

/* Room for any path kiln makes under a cache directory. */
#define KN__CACHE_PATH_CAP 4096
/* The longest cache directory accepted: a build directory under it and the
** files in that must still fit in PATH_MAX (4096). */
#define KN__CACHE_ROOT_MAX 3800
/* The compile time limit when KILN_COMPILE_TIMEOUT is unset, in seconds. */
#define KN__COMPILE_TIMEOUT_DEFAULT 300.0

/* The cache root into out: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln (an
** absolute XDG_CACHE_HOME only, as the XDG spec says), else
** $HOME/.cache/kiln. KN_OK, or KN_EINVAL with a message when KILN_CACHE_DIR
** is relative or longer than KN__CACHE_ROOT_MAX, or when none of the three
** gives a directory. *from (optional) names the variable used. */
kn_status kn__cache_root(char out[KN__CACHE_PATH_CAP], const char **from);

/* An open, checked cache directory. */
typedef struct kn__cachedir {
  int fd;                        /* the directory (O_DIRECTORY); -1 when closed */
  bool noexec;                   /* on a file system mounted noexec */
  char path[KN__CACHE_PATH_CAP]; /* its resolved absolute path */
} kn__cachedir;

/* Open ROOT/SUB (SUB one name, e.g. "inductor") under the rules above,
** creating missing directories 0700 when create is set. KN_OK with *out
** open; else an error whose message says what was refused and why (out->fd
** is -1). */
kn_status kn__cachedir_open(const char *root, const char *sub, bool create, kn__cachedir *out);
/* Open a directory to make private temporary directories in (such as
** TMPDIR): it and every directory above it are checked as parents (owned by
** root or you, not writable by group or others unless sticky). */
kn_status kn__cachedir_open_tmp(const char *path, kn__cachedir *out);
void kn__cachedir_close(kn__cachedir *d);

/* Open name in directory dfd for reading and check the descriptor (see the
** rules above; max_bytes bounds its size). The descriptor (owned: close
** it), or -1: *missing then says there was no such file, else why says what
** was refused. sb (optional) gets the file's status. */
int kn__cache_open(int dfd, const char *name, long long max_bytes, struct stat *sb, bool *missing,
                   char *why, size_t n);
/* Read a checked entry whole (at most max_bytes): an owned, NUL-terminated
** copy with *len its length, or NULL (*missing, or why as above; also on
** a read error or out of memory). */
char *kn__cache_read(int dfd, const char *name, size_t max_bytes, size_t *len, bool *missing,
                     char *why, size_t n);
/* Write data as dfd/name through a temporary file renamed into place. KN_OK
** or KN_EIO naming the file. */
kn_status kn__cache_write(int dfd, const char *name, const void *data, size_t len);

/* A fresh temporary name for name into out ("<name>.tmp.<pid>-<ns>.XXXXXX"
** with random characters). */
void kn__cache_tmp_name(const char *name, char *out, size_t n);
/* Make a private (0700) temporary directory for name in dfd; its name into
** out. KN_OK or KN_EIO. */
kn_status kn__cache_mkdtemp(int dfd, const char *name, char *out, size_t n);
/* The keys of cache file names: lowercase hex digits, 64 for a SHA-256
** (inductor/, aotautograd/), 2 to 128 for a module's build ID (symbols/). */
#define KN__CACHE_KEY_MIN 2
#define KN__CACHE_KEY_MAX 128
/* How many lowercase hex digits name starts with, counting no further than
** KN__CACHE_KEY_MAX + 1 (so a longer run reads as too long for a key). */
int kn__cache_hex_run(const char *name);
/* Is name a temporary of kiln's naming ("<key><.ext>?.tmp.<pid>[-<ns>].
** <rest>", the key as above)? *pid and *ns (0: not named) get what it
** names. */
bool kn__cache_tmp_parse(const char *name, long long *pid, unsigned long long *ns);
/* Is the temporary name, last modified at mtime, stale at time now: its
** process is gone (named in this pid namespace), or it is older than
** kn__cache_stale_age(timeout_s)? */
bool kn__cache_tmp_stale(const char *name, time_t mtime, time_t now, double timeout_s);
/* The age after which any temporary is stale: twice the compile time limit,
** at least an hour; a day when there is no limit (timeout_s 0). */
double kn__cache_stale_age(double timeout_s);
/* Remove the temporary name in dfd: a file, or a directory with the files
** in it (not deeper). 0, or -1 with errno. */
int kn__cache_remove_tmp(int dfd, const char *name);
/* Remove the stale temporaries of kiln's naming in dfd; returns how many. */
int kn__cache_sweep(int dfd, double timeout_s);

/* The compile time limit in seconds from KILN_COMPILE_TIMEOUT (0: none):
** the default when unset; when set but not a number of seconds in
** [0, 1e6], the default with why describing the bad value (else why is
** ""). */
double kn__compile_timeout(char *why, size_t n);

#endif
