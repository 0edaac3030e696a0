/*
** test_symcache.c: the symbolizer's disk cache (core/symcache.h). A first
** process looks its call sites up with libdw and stores them under
** KILN_CACHE_DIR/symbols; a second process compiling the same function
** prints the same graph code and trace_call lines (file:line of the user's
** calls, the source lines, the node names taken from the kiln functions
** called) without loading libdw. A damaged or untrusted file is not used:
** the lines then come from libdw, the same.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "core/symbolize.h"
#include "core/symcache.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"

TestSuite(symcache, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

enum { MUL_LINE = __LINE__ + 2 };
static kn_tensor *user_fn(kn_tensor *x) {
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  return kn_neg(kn_add(y, x));
}

static bool mapped(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
  fclose(f);
  return found;
}

typedef struct run_result {
  bool libdw; /* was libdw loaded in the process */
  char *text; /* the graph_code and trace_call records, one per line (owned) */
} run_result;

/* In a new process using cache directory dir: compile user_fn with the
** graph_code and trace_call logs on and call it; what it logged. */
static void child(const char *dir, int fd) {
  setenv("KILN_CACHE_DIR", dir, 1);
  kn_test_records r = {0};
  kn_set_logs_str("graph_code,trace_call");
  kn_test_capture_begin(&r);
  kn_compile_options o = {.backend = "eager"};
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))user_fn, 1, "user_fn", __FILE__,
                                        __LINE__, &o);
  kn_scope_begin();
  kn_tensor *y = f ? kn_call_t(f, kn_ones(KN_SHAPE(3), KN_FLOAT32)) : NULL;
  bool ok = y && kn_get(y, (int64_t[]){0}) == -3.0; /* -(2x + x) at x = 1 */
  kn_scope_end();
  kn_test_capture_end(&r);
  char flag = !ok ? 'E' : mapped("libdw") ? 'L' : 'N';
  bool w = write(fd, &flag, 1) == 1;
  for (size_t i = 0; i < r.n && w; i++) {
    const char *m = r.v[i].message;
    w = write(fd, m, strlen(m)) == (ssize_t)strlen(m) && write(fd, "\n", 1) == 1;
  }
  _exit(w ? 0 : 1);
}

/* A child process with a pipe to its parent: 0 in the child (which writes
** fd[1]), the child's pid in the parent (which reads fd[0]). */
static pid_t fork_piped(int fd[2]) {
  cr_assert_eq(pipe(fd), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  close(fd[pid == 0 ? 0 : 1]);
  return pid;
}

static run_result run_process(const char *dir) {
  int fd[2];
  pid_t pid = fork_piped(fd);
  if (pid == 0) child(dir, fd[1]);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  cr_assert(buf);
  ssize_t k;
  while ((k = read(fd[0], buf + len, cap - len - 1)) > 0) {
    len += (size_t)k;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    cr_assert(buf);
  }
  buf[len] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cr_assert(len > 0 && buf[0] != 'E', "the compiled function failed in the child");
  run_result r = {buf[0] == 'L', strdup(buf + 1)};
  free(buf);
  return r;
}

/* The one symbols file naming user_fn in dir/symbols, into path. */
static void symbols_file(const char *dir, char *path, size_t n) {
  char sub[512];
  snprintf(sub, sizeof sub, "%s/symbols", dir);
  DIR *d = opendir(sub);
  cr_assert(d, "%s was not made", sub);
  path[0] = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strstr(e->d_name, ".sym") || strstr(e->d_name, ".tmp")) continue;
    char p[1024], line[4096];
    snprintf(p, sizeof p, "%s/%s", sub, e->d_name);
    FILE *f = fopen(p, "r");
    cr_assert(f);
    while (fgets(line, sizeof line, f))
      if (strstr(line, " user_fn\t")) snprintf(path, n, "%s", p);
    fclose(f);
  }
  closedir(d);
  cr_assert(path[0], "no symbols file names user_fn");
}

/* The file keys frames by offsets into their modules, never by this
** process's addresses (which differ from process to process): every offset
** lies below the program's load address (a position-independent program is
** loaded far above 4 GiB). */
static void expect_offsets(const char *path) {
  uintptr_t at = (uintptr_t)(void *)user_fn;
  if (at < ((uintptr_t)1 << 32)) return; /* not position-independent: nothing to tell apart */
  FILE *f = fopen(path, "r");
  cr_assert(f);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    if (n++ == 0) continue; /* the header */
    unsigned long long off = strtoull(line, NULL, 16);
    cr_expect_lt(off, (unsigned long long)1 << 32, "an address, not an offset: %s", line);
  }
  fclose(f);
  cr_expect_gt(n, 1);
}

static void expect_lines(const char *text) {
  char want[512];
  snprintf(want, sizeof want,
           "# File: %s:%d in user_fn, code: kn_tensor *y = kn_mul_scalar(x, kn_float(2));",
           __FILE__, MUL_LINE);
  cr_expect(strstr(text, want), "missing \"%s\" in:\n%s", want, text);
  snprintf(want, sizeof want,
           "TRACE FX call mul from %s:%d in user_fn\n  kn_tensor *y = kn_mul_scalar(x, "
           "kn_float(2));\n",
           __FILE__, MUL_LINE);
  cr_expect(strstr(text, want), "missing \"%s\" in:\n%s", want, text);
  snprintf(want, sizeof want, "TRACE FX call add from %s:%d in user_fn", __FILE__, MUL_LINE + 1);
  cr_expect(strstr(text, want), "missing \"%s\" in:\n%s", want, text);
}

static void fresh_dir(char *dir) {
  cr_assert(mkdtemp(dir));
  cr_assert(!mapped("libdw"), "libdw was loaded before the test started");
}

static void remove_dir(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

Test(symcache, second_process_prints_the_same_lines_without_libdw) {
  char dir[] = "/tmp/kiln-symcache-XXXXXX";
  fresh_dir(dir);
  run_result a = run_process(dir), b = run_process(dir);
  cr_expect(a.libdw, "the first process did not look anything up");
  cr_expect(!b.libdw, "the second process loaded libdw");
  expect_lines(a.text);
  expect_lines(b.text);
  cr_expect_str_eq(b.text, a.text);
  char path[1024];
  symbols_file(dir, path, sizeof path);
  FILE *f = fopen(path, "r");
  char head[64] = "";
  cr_assert(f && fgets(head, sizeof head, f));
  fclose(f);
  cr_expect_str_eq(head, "kiln-symbols 1\n");
  expect_offsets(path);
  free(a.text);
  free(b.text);
  remove_dir(dir);
}

/* Lines that do not parse (a partial frame with a file, a complete one
** without, no function, a negative line, no tab, and a last line cut
** short) are skipped: the frames come from libdw again and the file is
** written whole. */
Test(symcache, damaged_file_is_looked_up_again) {
  char dir[] = "/tmp/kiln-symcache-XXXXXX";
  fresh_dir(dir);
  run_result a = run_process(dir);
  char path[1024];
  symbols_file(dir, path, sizeof path);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs("kiln-symbols 1\nnot a line\n12 x user_fn\tnowhere.c\n34 0 user_fn\tnowhere.c\n"
        "78 0 \t\n9a -1 user_fn\t\nbc 0 user_fn\nde 5 user_fn\t\n56 7 user_fn", f);
  fclose(f);
  run_result b = run_process(dir);
  cr_expect(b.libdw);
  cr_expect_str_eq(b.text, a.text);
  run_result c = run_process(dir); /* the file was rewritten with the frames */
  cr_expect(!c.libdw);
  cr_expect_str_eq(c.text, a.text);
  free(a.text);
  free(b.text);
  free(c.text);
  remove_dir(dir);
}

/* A symbolic link is not followed (core/cachefs.h): the frames come from
** libdw. */
Test(symcache, linked_file_is_not_used) {
  char dir[] = "/tmp/kiln-symcache-XXXXXX";
  fresh_dir(dir);
  run_result a = run_process(dir);
  char path[1024], moved[1100];
  symbols_file(dir, path, sizeof path);
  snprintf(moved, sizeof moved, "%s/elsewhere", dir);
  cr_assert_eq(rename(path, moved), 0);
  cr_assert_eq(symlink(moved, path), 0);
  run_result b = run_process(dir);
  cr_expect(b.libdw, "a linked symbols file was used");
  cr_expect_str_eq(b.text, a.text);
  free(a.text);
  free(b.text);
  remove_dir(dir);
}

static void put_file(const char *dir, const char *name, long ago) {
  char p[1024];
  snprintf(p, sizeof p, "%s/symbols/%s", dir, name);
  FILE *f = fopen(p, "w");
  cr_assert(f);
  fputs("partial", f);
  fclose(f);
  struct timespec ts[2] = {{time(NULL) - ago, 0}, {time(NULL) - ago, 0}};
  cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static bool present(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/symbols/%s", dir, name);
  return access(p, F_OK) == 0;
}

/* A temporary left by a write that never ended (its process gone: here,
** days old) is removed when a process saves; one of a write that may still
** run (recent, this process's pid) stays. */
Test(symcache, save_removes_stale_temporaries) {
  char dir[] = "/tmp/kiln-symcache-XXXXXX", sub[64], live[128];
  fresh_dir(dir);
  snprintf(sub, sizeof sub, "%s/symbols", dir);
  cr_assert_eq(mkdir(sub, 0700), 0);
  const char *stale = "0123456789abcdef0123456789abcdef01234567.sym.tmp.999999-1.x";
  snprintf(live, sizeof live, "89abcdef.sym.tmp.%d.x", (int)getpid());
  put_file(dir, stale, 3 * 86400);
  put_file(dir, live, 0);
  run_result a = run_process(dir);
  cr_expect(!present(dir, stale), "the stale temporary is still there");
  cr_expect(present(dir, live), "a temporary that may be in use was removed");
  free(a.text);
  remove_dir(dir);
}

/* ---- code without debug info ---------------------------------------------- */

typedef struct frame_result {
  bool libdw;     /* was libdw loaded in the process */
  bool complete;  /* the frame had a file and line */
  char func[128]; /* its function ("" when none) */
} frame_result;

/* In a new process using cache directory dir and separate debug files under
** dbg: the frame of an address inside kn_nodebug_twice, in a shared object
** built without debug info (tests/support/nodebug.c). */
static frame_result nodebug_frame(const char *dir, const char *dbg) {
  int fd[2];
  pid_t pid = fork_piped(fd);
  if (pid == 0) {
    setenv("KILN_CACHE_DIR", dir, 1);
    kn__symcache_debug_dir(dbg);
    void *lib = dlopen(KN_NODEBUG_PATH, RTLD_NOW | RTLD_LOCAL);
    char *at = lib ? (char *)dlsym(lib, "kn_nodebug_twice") : NULL;
    frame_result r = {0};
    if (at) {
      kn__srcframe f = kn__symbolize(at + 4);
      kn__symbolize_save();
      r.complete = f.file && f.line > 0;
      snprintf(r.func, sizeof r.func, "%s", f.func ? f.func : "");
    }
    r.libdw = mapped("libdw");
    _exit(write(fd[1], &r, sizeof r) == sizeof r ? 0 : 1);
  }
  frame_result r;
  cr_assert_eq(read(fd[0], &r, sizeof r), (ssize_t)sizeof r);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return r;
}

/* The build ID of the symbols file holding a partial frame of func, into
** id ("" when none). */
static void partial_file_id(const char *dir, const char *func, char *id, size_t n) {
  char sub[512], want[160];
  snprintf(sub, sizeof sub, "%s/symbols", dir);
  snprintf(want, sizeof want, " 0 %s\t\n", func);
  DIR *d = opendir(sub);
  cr_assert(d);
  id[0] = 0;
  for (struct dirent *e; (e = readdir(d));) {
    const char *dot = strstr(e->d_name, ".sym");
    if (!dot || dot[4]) continue;
    char p[1024], line[4096];
    snprintf(p, sizeof p, "%s/%s", sub, e->d_name);
    FILE *f = fopen(p, "r");
    cr_assert(f);
    while (fgets(line, sizeof line, f))
      if (strstr(line, want)) snprintf(id, n, "%.*s", (int)(dot - e->d_name), e->d_name);
    fclose(f);
  }
  closedir(d);
}

/* A frame libdw finds without a file or line (code built without -g) is
** kept too: the next process gets the same function name without loading
** libdw. Once a separate debug file for the module's build ID exists (a
** debug package installed since), the partial frame is not trusted: libdw
** is asked again. */
Test(symcache, partial_frames_are_kept_until_a_debug_file_appears) {
  char dir[] = "/tmp/kiln-symcache-XXXXXX", dbg[600];
  fresh_dir(dir);
  snprintf(dbg, sizeof dbg, "%s/debug", dir);
  cr_assert_eq(mkdir(dbg, 0700), 0);
  frame_result a = nodebug_frame(dir, dbg), b = nodebug_frame(dir, dbg);
  cr_assert_str_eq(a.func, "kn_nodebug_twice");
  cr_assert(!a.complete, "code built with -g0 had a file and line");
  cr_expect(a.libdw, "the first process did not look anything up");
  cr_expect(!b.libdw, "the second process loaded libdw");
  cr_expect_str_eq(b.func, a.func);
  cr_expect(!b.complete);
  char id[160], path[1200];
  partial_file_id(dir, a.func, id, sizeof id);
  cr_assert(strlen(id) > 2, "no partial frame of %s was written", a.func);
  snprintf(path, sizeof path, "%s/.build-id", dbg);
  cr_assert_eq(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/.build-id/%.2s", dbg, id);
  cr_assert_eq(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", dbg, id, id + 2);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fclose(f);
  frame_result c = nodebug_frame(dir, dbg);
  cr_expect(c.libdw, "a partial frame was trusted although a debug file exists");
  cr_expect_str_eq(c.func, a.func);
  remove_dir(dir);
}
