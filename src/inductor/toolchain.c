/*
** inductor/toolchain.c: turning generated C into loaded code (the caches
** around it are codecache.c).
**
** The compiler is KILN_CC (default "cc") with KILN_CFLAGS (default: the
** target's flags, target.h: "-O3 -march=native -fopenmp -ffp-contract=off
** -fno-math-errno -fno-trapping-math" for "c"; -shared -fPIC are always added), started with fork/exec (no shell) with umask 077 (its output is
** private to the user), in a process group of its own and in the private
** build directory (so the names it records are the same in every build of
** a source); its stdout and stderr are captured. KILN_COMPILE_TIMEOUT
** (seconds, default 300, 0: none) bounds a compile: past it the whole
** process group is killed and the compile fails with an error saying so.
**
** A large program is compiled as several translation units at once
** (tu_split.c; one per 48 KB of source, at most one per processor the load
** average leaves idle, or KILN_COMPILE_JOBS), then linked into the one
** shared object; a failing unit is named in the error.
**
** Loading: a shared object is loaded through the descriptor its checks were
** made on (dlopen of /proc/self/fd/N), never by a path that could name
** another file by then; on a noexec mount through an in-memory copy
** (memfd_create) of the same bytes.
*/
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/cachefs.h"
#include "core/error.h"
#include "inductor/cuda_target.h"
#include "inductor/toolchain.h"
#include "logging/log.h"

#define MAX_ARGS 96 /* the compiler, its flags, the output and up to KN__IND_TU_MAX inputs */
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: an executable memfd, where the sysctl asks for it */
#endif

/* ---- the toolchain ------------------------------------------------------------ */
static bool find_on_path(const char *cc, char *out, size_t n) {
  if (strchr(cc, '/')) return realpath(cc, out) != NULL || (snprintf(out, n, "%s", cc), false);
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  for (const char *p = path; *p;) {
    const char *e = strchr(p, ':');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char cand[4096];
    snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, cc);
    if (access(cand, X_OK) == 0 && realpath(cand, out)) return true;
    p += len + (e ? 1 : 0);
  }
  return false;
}

static atomic_bool warned_timeout, warned_jobs;

/* KILN_COMPILE_JOBS: 0 (unset or empty: automatic) or 1 to KN__IND_TU_MAX;
** anything else is logged once and automatic used. */
static int compile_jobs(void) {
  const char *v = getenv("KILN_COMPILE_JOBS");
  if (!v || !*v) return 0;
  char *end;
  long j = strtol(v, &end, 10);
  if (end != v && !*end && j >= 0 && j <= KN__IND_TU_MAX) return (int)j;
  if (!atomic_exchange(&warned_jobs, true))
    KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "KILN_COMPILE_JOBS: expected a number of translation units "
           "from 0 (automatic) to %d, found '%.100s'; using automatic", KN__IND_TU_MAX, v);
  return 0;
}

void kn__ind_tool_init(kn__ind_tool *t, const kn__ind_target *tg) {
  const char *cc = getenv("KILN_CC"), *fl = getenv("KILN_CFLAGS");
  t->target = tg;
  snprintf(t->cc, sizeof t->cc, "%s", cc && *cc ? cc : "cc");
  snprintf(t->flags, sizeof t->flags, "%s", fl ? fl : tg->cflags);
  struct stat sb;
  if (!find_on_path(t->cc, t->resolved, sizeof t->resolved)) t->resolved[0] = 0;
  if (t->resolved[0] && stat(t->resolved, &sb) == 0)
    snprintf(t->ident, sizeof t->ident, "%s %lld %lld", t->resolved, (long long)sb.st_size,
             (long long)sb.st_mtime);
  else snprintf(t->ident, sizeof t->ident, "%s (not found)", t->cc);
  if (tg == &kn__ind_target_cuda) { /* the device code is for this device's architecture */
    size_t used = strlen(t->ident);
    kn__cu_ident(t->ident + used, sizeof t->ident - used);
  }
  char why[200];
  t->timeout_s = kn__compile_timeout(why, sizeof why);
  if (why[0] && !atomic_exchange(&warned_timeout, true))
    KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "%s", why);
  t->jobs = compile_jobs();
}

static int split_flags(char *flags, char **argv, int at) {
  char *save = NULL;
  for (char *tok = strtok_r(flags, " \t\n", &save); tok && at < MAX_ARGS - 6 - KN__IND_TU_MAX;
       tok = strtok_r(NULL, " \t\n", &save))
    argv[at++] = tok;
  return at;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Start the compiler (path: resolved, or "" to search PATH for argv[0]) on
** argv in directory dir, in a process group of its own, its output to a
** pipe (*rfd). */
static kn_status spawn(const char *path, char **argv, const char *dir, pid_t *pid, int *rfd) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) return kn__error(KN_EIO, "inductor: pipe: %s", strerror(errno));
  pid_t parent = getpid();
  *pid = fork();
  if (*pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return kn__error(KN_EIO, "inductor: fork: %s", strerror(errno));
  }
  if (*pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a compiler never outlives the program waiting for it */
    if (getppid() != parent) _exit(127);
    umask(077);
    dup2(pfd[1], 1);
    dup2(pfd[1], 2);
    static const char d[] = "cannot enter the build directory\n";
    if (chdir(dir) != 0) {
      ssize_t w = write(2, d, sizeof d - 1);
      (void)w;
      _exit(126);
    }
    if (path[0]) execv(path, argv);
    else execvp(argv[0], argv);
    static const char m[] = "exec failed: no such compiler or not executable\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    _exit(127);
  }
  setpgid(*pid, *pid); /* both sides: whichever runs first */
  close(pfd[1]);
  *rfd = pfd[0];
  return KN_OK;
}

/* Collect fd's output into msgs until it is closed; false when the deadline
** (0: none) passes first. */
static bool drain_until(int fd, kn__sb *msgs, double deadline) {
  char buf[4096];
  for (;;) {
    double left = deadline > 0 ? deadline - now_s() : 1;
    if (left <= 0) return false;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, deadline > 0 ? (int)(left * 1000) + 1 : -1);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue; /* the deadline is checked above */
    ssize_t k = read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return true;
    kn__sb_putn(msgs, buf, (size_t)k);
  }
}

/* Wait for pid; false when the deadline (0: none) passes first. A child
** reaped elsewhere (SIGCHLD ignored) counts as a success. */
static bool wait_until(pid_t pid, int *status, double deadline) {
  long ns = 50000;
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return *status = 0, true;
    if (deadline > 0 && now_s() >= deadline) return false;
    nanosleep(&(struct timespec){0, ns}, NULL);
    ns = ns < 10000000 ? 2 * ns : ns;
  }
}

/* Run the compilers argv[0..n) at once in dir, each one's output into
** msgs[i]; code[i]: its exit code (128 + signal), or -1 when it was
** stopped at the time limit (all still running then are). */
static void run_all(const kn__ind_tool *t, char ***argv, int n, const char *dir, kn__sb *msgs,
                    int *code, kn_status *st) {
  pid_t pid[KN__IND_TU_MAX];
  int rfd[KN__IND_TU_MAX], started = 0;
  *st = KN_OK;
  for (; started < n && *st == KN_OK; started++)
    if ((*st = spawn(t->resolved, argv[started], dir, &pid[started], &rfd[started])) != KN_OK)
      break;
  double deadline = t->timeout_s > 0 ? now_s() + t->timeout_s : 0;
  bool done = true;
  for (int i = 0; i < started; i++) {
    int status = 0;
    done = done && drain_until(rfd[i], &msgs[i], deadline) && wait_until(pid[i], &status, deadline);
    close(rfd[i]);
    if (!done) {
      kill(-pid[i], SIGKILL);
      kill(pid[i], SIGKILL);
      while (waitpid(pid[i], &status, 0) < 0 && errno == EINTR) {}
      code[i] = -1;
      continue;
    }
    code[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

/* Run the compiler on argv in dir; its exit code (128 + signal), or -1 when
** it was stopped at the time limit. */
static int run_timed(const kn__ind_tool *t, char **argv, const char *dir, kn__sb *msgs,
                     kn_status *st) {
  int code = 0;
  run_all(t, &argv, 1, dir, msgs, &code, st);
  return code;
}

static kn_status cc_failed(const kn__ind_tool *t, int code, const char *shown, kn__sb *msgs) {
  if (code < 0) {
    KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "C compiler '%s' did not finish within %g s on %s; it was "
           "stopped (KILN_COMPILE_TIMEOUT)", t->cc, t->timeout_s, shown);
    return kn__error(KN_EUNSUPPORTED, "inductor: the C compiler '%s' did not finish within %g s "
                     "(KILN_COMPILE_TIMEOUT) compiling %s; it was stopped%s%.1200s", t->cc,
                     t->timeout_s, shown, msgs->len ? ". Its output:\n" : "", kn__sb_cstr(msgs));
  }
  KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "C compiler '%s' failed (exit status %d) on %s:\n%s",
         t->cc, code, shown, kn__sb_cstr(msgs));
  if (code == 127 && !t->resolved[0])
    return kn__error(KN_EUNSUPPORTED, "inductor: no C compiler: '%s' was not found (set KILN_CC "
                     "to a C compiler, or use backend \"eager\")", t->cc);
  return kn__error(KN_EUNSUPPORTED, "inductor: the C compiler '%s' failed (exit status %d):\n%.1200s",
                   t->cc, code, kn__sb_cstr(msgs));
}

/* argv for compiling (or, obj NULL, linking) into out: the compiler, the
** flags (split into buf), then the rest; NULL-terminated. */
static void make_argv(const kn__ind_tool *t, char *buf, char **argv, const char *out, bool obj,
                      char *const *in, int nin) {
  memcpy(buf, t->flags, sizeof t->flags);
  int n = 0;
  argv[n++] = (char *)t->cc;
  n = split_flags(buf, argv, n);
  argv[n++] = (char *)(obj ? "-c" : "-shared");
  argv[n++] = (char *)"-fPIC";
  argv[n++] = (char *)"-o";
  argv[n++] = (char *)out;
  for (int i = 0; i < nin && n < MAX_ARGS - 2; i++) argv[n++] = in[i];
  if (!obj) argv[n++] = (char *)"-lm";
  argv[n] = NULL;
}

static kn_status cc_one(const kn__ind_tool *t, const char *dir, const char *src, const char *so,
                        const char *shown) {
  char buf[sizeof t->flags], *argv[MAX_ARGS], *in = (char *)src;
  make_argv(t, buf, argv, so, false, &in, 1);
  kn__sb msgs;
  kn__sb_init(&msgs);
  kn_status st = KN_OK;
  int code = run_timed(t, argv, dir, &msgs, &st);
  if (st == KN_OK && code != 0) st = cc_failed(t, code, shown, &msgs);
  kn__sb_fini(&msgs);
  return st;
}

/* The program's text (dir/src), or NULL. */
static char *read_text(const char *dir, const char *src) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, src);
  FILE *f = fopen(path, "rb");
  kn__sb sb;
  kn__sb_init(&sb);
  char buf[65536];
  for (size_t k; f && (k = fread(buf, 1, sizeof buf, f)) > 0;) kn__sb_putn(&sb, buf, k);
  bool ok = f && !ferror(f) && !kn__sb_failed(&sb);
  if (f) fclose(f);
  char *text = ok ? kn__sb_take(&sb) : NULL;
  kn__sb_fini(&sb);
  return text;
}

/* Processors this process may run on (1 when unknown). */
static int processors(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* Processors not busy with other work: this process's, less the
** one-minute load average beyond the one this process adds (at least 1). On
** a machine whose processors are all busy, parallel units only add the
** prelude's cost and a link. */
static int idle_processors(void) {
  int cpus = processors();
  double load[1];
  if (getloadavg(load, 1) != 1) return cpus;
  double idle = (double)cpus + 1.0 - load[0];
  return idle < 1 ? 1 : idle > cpus ? cpus : (int)idle;
}

/* Units to split a program of len bytes into: KILN_COMPILE_JOBS when set,
** else one per KN__IND_TU_BYTES of source, at most one per idle processor. */
static int units_for(const kn__ind_tool *t, size_t len) {
  if (t->jobs > 0) return t->jobs;
  size_t by_size = len / KN__IND_TU_BYTES;
  if (by_size < 2) return 1;
  int cpus = idle_processors();
  return by_size < (size_t)cpus ? (int)by_size : cpus;
}

/* Write unit u's text as <stem>.p<u>.c in dir; its name into name. */
static kn_status write_unit(const char *dir, const char *stem, int u, const kn__sb *text,
                            char *name, size_t n) {
  char path[4400];
  snprintf(name, n, "%s.p%d.c", stem, u);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return kn__error(KN_EIO, "inductor: cannot create '%s': %s", path, strerror(errno));
  const char *p = kn__sb_cstr(text);
  size_t left = text->len;
  while (left) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w, left -= (size_t)w;
  }
  int e = errno;
  close(fd);
  return left ? kn__error(KN_EIO, "inductor: cannot write '%s': %s", path, strerror(e)) : KN_OK;
}

/* Compile the n units (names[u]) to objects at once, then link them into so. */
static kn_status cc_units(const kn__ind_tool *t, const char *dir, char (*names)[128], int n,
                          const char *so, const char *shown) {
  char objs[KN__IND_TU_MAX][128], bufs[KN__IND_TU_MAX][sizeof t->flags];
  char *argvs[KN__IND_TU_MAX][MAX_ARGS], **argv[KN__IND_TU_MAX], *in[KN__IND_TU_MAX];
  kn__sb msgs[KN__IND_TU_MAX];
  int code[KN__IND_TU_MAX];
  for (int u = 0; u < n; u++) {
    snprintf(objs[u], sizeof objs[u], "%.120s.o", names[u]);
    char *src = names[u];
    make_argv(t, bufs[u], argvs[u], objs[u], true, &src, 1);
    argv[u] = argvs[u];
    in[u] = objs[u];
    kn__sb_init(&msgs[u]);
  }
  kn_status st = KN_OK;
  run_all(t, argv, n, dir, msgs, code, &st);
  for (int u = 0; u < n && st == KN_OK; u++)
    if (code[u] != 0) {
      char what[4300];
      snprintf(what, sizeof what, "%s (translation unit %d of %d, %s)", shown, u + 1, n, names[u]);
      st = cc_failed(t, code[u], what, &msgs[u]);
    }
  for (int u = 0; u < n; u++) kn__sb_fini(&msgs[u]);
  if (st != KN_OK) return st;
  char buf[sizeof t->flags], *largv[MAX_ARGS];
  make_argv(t, buf, largv, so, false, in, n);
  kn__sb lm;
  kn__sb_init(&lm);
  int lc = run_timed(t, largv, dir, &lm, &st);
  if (st == KN_OK && lc != 0) {
    char what[4300];
    snprintf(what, sizeof what, "%s (linking its %d translation units)", shown, n);
    st = cc_failed(t, lc, what, &lm);
  }
  kn__sb_fini(&lm);
  return st;
}

kn_status kn__ind_cc(const kn__ind_tool *t, const char *dir, const char *src, const char *so,
                     const char *shown) {
  char *text = read_text(dir, src);
  int want = text ? units_for(t, strlen(text)) : 1, got = 1;
  if (want > KN__IND_TU_MAX) want = KN__IND_TU_MAX;
  kn__sb units[KN__IND_TU_MAX];
  for (int u = 0; u < KN__IND_TU_MAX; u++) kn__sb_init(&units[u]);
  kn_status st = want > 1 ? kn__ind_tu_split(text, want, units, &got) : KN_OK;
  free(text);
  char names[KN__IND_TU_MAX][128], stem[100];
  snprintf(stem, sizeof stem, "%.*s", (int)strcspn(src, "."), src);
  for (int u = 0; st == KN_OK && got > 1 && u < got; u++)
    st = write_unit(dir, stem, u, &units[u], names[u], sizeof names[u]);
  for (int u = 0; u < KN__IND_TU_MAX; u++) kn__sb_fini(&units[u]);
  if (st != KN_OK) return st;
  if (got <= 1) return cc_one(t, dir, src, so, shown);
  KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "inductor: compiling %s as %d translation units in parallel",
         shown, got);
  return cc_units(t, dir, names, got, so, shown);
}

/* ---- loading ---------------------------------------------------------------------- */

/* A name for dlopen that reaches fd and that this process never used before:
** the dynamic loader answers a name it has loaded before with the object it
** loaded then, and descriptor numbers are reused. "/proc/self/fd/N", with
** segments "/." (0) and "/self/.." (1) after "/proc" spelling a counter in
** binary (all lead back to /proc). */
static void fd_path(int fd, char *out, size_t n) {
  static atomic_ulong loads;
  unsigned long k = atomic_fetch_add(&loads, 1) + 1;
  size_t used = (size_t)snprintf(out, n, "/proc");
  for (int b = 62 - __builtin_clzl(k); b >= 0; b--)
    used += (size_t)snprintf(out + used, n - used, "%s", (k >> b) & 1 ? "/self/.." : "/.");
  snprintf(out + used, n - used, "/self/fd/%d", fd);
}

/* dlopen fd (the handle into *h). */
static kn_status open_from(int fd, const char *shown, void **h) {
  char name[640];
  fd_path(fd, name, sizeof name);
  *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!*h) return kn__error(KN_EIO, "inductor: cannot load '%s': %s", shown, dlerror());
  return KN_OK;
}

/* An in-memory copy of fd's bytes (a memfd), or -1 with errno. */
static int mem_copy(int fd) {
  int m = memfd_create("kiln-inductor", MFD_CLOEXEC | MFD_EXEC);
  if (m < 0 && errno == EINVAL) m = memfd_create("kiln-inductor", MFD_CLOEXEC);
  if (m < 0) return -1;
  char buf[16384];
  for (off_t off = 0;;) {
    ssize_t r = pread(fd, buf, sizeof buf, off);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return m;
    if (r < 0 || write(m, buf, (size_t)r) != r) break;
    off += r;
  }
  int e = errno;
  close(m);
  errno = e;
  return -1;
}

kn_status kn__ind_dlopen_fd(int fd, bool noexec, const char *shown, void **h) {
  if (!noexec) return open_from(fd, shown, h);
  int m = mem_copy(fd);
  if (m < 0)
    return kn__error(KN_EIO, "inductor: cannot load '%s': its file system is mounted noexec and "
                     "no in-memory copy could be made (%s)", shown, strerror(errno));
  kn_status st = open_from(m, shown, h);
  close(m);
  return st;
}

kn_status kn__ind_load_fd(int fd, bool noexec, const char *shown, kn__ind_call_fn *out) {
  void *h = NULL;
  kn_status st = kn__ind_dlopen_fd(fd, noexec, shown, &h);
  if (st == KN_OK) {
    int (*abi)(void) = (int (*)(void))dlsym(h, "kn_ind_abi");
    kn__ind_call_fn fn = (kn__ind_call_fn)dlsym(h, "call");
    if (!abi || !fn || abi() != KN__IND_ABI) {
      dlclose(h);
      return kn__error(KN_EIO, "inductor: '%s' is not a kiln inductor object of ABI %d", shown,
                       KN__IND_ABI);
    }
    *out = fn; /* the handle stays open for the life of the process */
    return KN_OK;
  }
  if (!noexec) return st;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", kn_last_error());
  return kn__error(st, "%s (its file system is mounted noexec, so an in-memory copy was loaded: "
                   "set KILN_CACHE_DIR to a directory on an exec mount)", msg);
}
