/*
** tests/tsan/runner.c: the test runner behind tests/tsan/criterion/criterion.h
** (ThreadSanitizer build only). Runs every registered test in a forked
** child, in registration order, and exits non-zero when one failed. The
** command line's Criterion options are accepted and ignored.
*/
#include "criterion/criterion.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 256
#define MAX_SUITES 32

typedef struct suite {
  const char *name;
  kn_shim_extra x;
} suite;

typedef struct test {
  const char *suite, *name;
  void (*fn)(void);
  kn_shim_extra x;
} test;

static suite suites[MAX_SUITES];
static int nsuites;
static test tests[MAX_TESTS];
static int ntests;
static bool failed; /* in the child: a cr_expect failed */

void kn_shim_add_suite(const char *name, kn_shim_extra x) {
  if (nsuites < MAX_SUITES) suites[nsuites++] = (suite){name, x};
}

void kn_shim_add_test(const char *s, const char *name, void (*fn)(void), kn_shim_extra x) {
  if (ntests < MAX_TESTS) tests[ntests++] = (test){s, name, fn, x};
}

void kn_shim_fail(bool fatal, const char *file, int line, const char *expr, const char *fmt, ...) {
  fprintf(stderr, "[----] %s:%d: %s failed: %s\n", file, line, fatal ? "assertion" : "expectation",
          expr);
  if (*fmt) {
    va_list ap;
    va_start(ap, fmt);
    fputs("[----]   ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
  failed = true;
  if (fatal) {
    fflush(NULL);
    _exit(1);
  }
}

static const kn_shim_extra *suite_of(const char *name) {
  for (int i = 0; i < nsuites; i++)
    if (!strcmp(suites[i].name, name)) return &suites[i].x;
  return NULL;
}

static void run_child(const test *t) {
  const kn_shim_extra *s = suite_of(t->suite);
  int timeout = t->x.timeout ? t->x.timeout : s && s->timeout ? s->timeout : 600;
  alarm((unsigned)timeout);
  if (s && s->init) s->init();
  if (t->x.init) t->x.init();
  t->fn();
  if (t->x.fini) t->x.fini();
  if (s && s->fini) s->fini();
  fflush(NULL);
  _exit(failed ? 1 : 0);
}

/* One test in a child process; true when it passed. */
static bool run(const test *t) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) run_child(t);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    fprintf(stderr, "[FAIL] %s::%s: could not run it\n", t->suite, t->name);
    return false;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    fprintf(stderr, "[PASS] %s::%s\n", t->suite, t->name);
    return true;
  }
  if (WIFSIGNALED(status))
    fprintf(stderr, "[FAIL] %s::%s: CRASH (signal %d%s)\n", t->suite, t->name, WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? ", timed out" : "");
  else fprintf(stderr, "[FAIL] %s::%s\n", t->suite, t->name);
  return false;
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  int nfail = 0;
  for (int i = 0; i < ntests; i++) nfail += !run(&tests[i]);
  fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d\n", ntests,
          ntests - nfail, nfail);
  return nfail ? 1 : 0;
}
