/*
** test_dynamo_srcloc.c: source locations need debug info. A compiled
** function built without -g (tests/nodebug/nodebug_fn.c, compiled with -g0)
** still traces and runs, and kiln says once, at WARNING, how to get source
** lines; a function with debug info gets its lines and no notice.
*/
#pragma GCC optimize("no-optimize-sibling-calls")
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/log.h"
#include "support/dynamo_util.h"
#include "support/log_capture.h"

kn_tensor *nodebug_fn(kn_tensor *x); /* built with -g0 */

TestSuite(srcloc, .init = kn_test_dynamo_setup, .fini = kn_test_dynamo_teardown);

static kn_tensor *debug_fn(kn_tensor *x) {
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  return kn_neg(kn_add(y, x));
}

static const char notice[] =
    "no debug info for the compiled function nodebug_fn, so graph code and logs have no source "
    "lines. Compile the code you pass to kn_compile with -g (and -fno-optimize-sibling-calls "
    "for exact lines); see docs/DYNAMO.md, \"Tracing\".";

/* Compile fn, call it on two shapes (two traces) with these log settings,
** return the records. */
static void run(kn_tensor *(*fn)(kn_tensor *), const char *name, const char *logs,
                kn_test_records *r) {
  cr_assert_eq(kn_set_logs_str(logs), KN_OK);
  *r = (kn_test_records){0};
  kn_test_capture_begin(r);
  kn_compiled *f = kn_compile_tensor_fn((void (*)(void))fn, 1, name, __FILE__, __LINE__, NULL);
  cr_assert(f);
  kn_scope_begin();
  for (int n = 2; n <= 3; n++) {
    kn_tensor *y = kn_call_t(f, kn_ones(KN_SHAPE(n), KN_FLOAT32));
    cr_assert(y, "%s", kn_last_error());
    cr_expect_eq(kn_get(y, (int64_t[]){0}), -3.0); /* -(2x + x) at x = 1 */
  }
  kn_scope_end();
  kn_compiled_free(f);
  kn_test_capture_end(r);
}

static size_t count_containing(const kn_test_records *r, const char *s) {
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++) n += strstr(r->v[i].message, s) != NULL;
  return n;
}

Test(srcloc, no_debug_info_is_said_once) {
  kn_test_records r;
  run(nodebug_fn, "nodebug_fn", "graph_code", &r);
  size_t warnings = 0;
  for (size_t i = 0; i < r.n; i++) warnings += r.v[i].level == KN_WARNING;
  cr_expect_eq(warnings, 1);
  const kn_test_record *w = kn_test_get_record(&r, "no debug info");
  cr_assert(w);
  cr_expect_str_eq(w->message, notice);
  cr_expect_str_eq(w->name, "kiln.dynamo");
  /* the graphs are still printed, without source comments */
  cr_expect_eq(kn_test_count_artifact(&r, "graph_code"), 2);
  cr_expect_eq(count_containing(&r, "# File:"), 0);
  kn_test_records_free(&r);
}

Test(srcloc, debug_info_gives_lines_and_no_notice) {
  kn_test_records r;
  run(debug_fn, "debug_fn", "graph_code", &r);
  cr_expect_eq(count_containing(&r, "no debug info"), 0);
  cr_expect_eq(count_containing(&r, "# File: " __FILE__), 2);
  kn_test_records_free(&r);
}

/* Nothing shows source lines: the notice is INFO (quiet by default). */
Test(srcloc, no_debug_info_is_info_when_no_lines_are_shown) {
  kn_test_records r;
  run(nodebug_fn, "nodebug_fn", "dynamo", &r);
  const kn_test_record *w = kn_test_get_record(&r, "no debug info");
  cr_assert(w);
  cr_expect_eq(w->level, KN_INFO);
  cr_expect_str_eq(w->message, notice);
  kn_test_records_free(&r);
  run(nodebug_fn, "nodebug_fn", "", &r); /* defaults: once was enough */
  cr_expect_eq(r.n, 0);
  kn_test_records_free(&r);
}

/* Called 200 frames deep: the whole stack is deeper than the 64 user frames
** kept, and the user's lines are still found (the capture is not cut off
** before the frame that called the compiled function). */
static void run_deep(int depth, kn_test_records *r) {
  if (depth > 0) {
    run_deep(depth - 1, r);
    __asm__ volatile("" ::: "memory"); /* keep the frame: no tail call */
    return;
  }
  run(debug_fn, "debug_fn", "graph_code", r);
}

Test(srcloc, deep_caller_stack_keeps_the_lines) {
  kn_test_records r;
  run_deep(200, &r);
  cr_expect_eq(count_containing(&r, "# File: " __FILE__), 2);
  kn_test_records_free(&r);
}

/* Is a file whose path contains name mapped into this process? */
static bool mapped(const char *name) {
  FILE *f = fopen("/proc/self/maps", "r");
  cr_assert(f);
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
  fclose(f);
  return found;
}

static kn_tensor *hook_body(kn_tensor *x) { return kn_neg(kn_add(kn_mul_scalar(x, kn_float(2)), x)); }

/* Looking for missing debug info (a shared object built without -g on the
** stack) does not start elfutils' debuginfod client, a dlopen of
** libdebuginfod and libcurl with its TLS and LDAP libraries, unless
** DEBUGINFOD_URLS asks for it: a warm compile of a program built without -g
** paid ~5 ms for it. */
Test(srcloc, missing_debug_info_does_not_load_debuginfod) {
  unsetenv("DEBUGINFOD_URLS");
  char dir[] = "/tmp/kiln-srcloc-XXXXXX", cmd[512], path[256];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/u.c", dir);
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs("void *(*kn_test_hook)(void *);\n"
        "void *kn_test_user(void *x) { void *y = kn_test_hook(x); return y; }\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O0 -g0 -o %s/u.so %s", dir, path);
  cr_assert_eq(system(cmd), 0, "%s failed", cmd);
  snprintf(path, sizeof path, "%s/u.so", dir);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  cr_assert(h, "%s", dlerror());
  *(kn_tensor *(**)(kn_tensor *))dlsym(h, "kn_test_hook") = hook_body;
  kn_tensor *(*user)(kn_tensor *) = (kn_tensor * (*)(kn_tensor *)) dlsym(h, "kn_test_user");
  kn_test_records r;
  run(user, "kn_test_user", "graph_code", &r);
  kn_test_records_free(&r);
  unlink(path);
  snprintf(path, sizeof path, "%s/u.c", dir);
  unlink(path);
  rmdir(dir);
  cr_assert(mapped("libdw"), "libdw is not loaded: nothing was looked up");
  cr_expect(!mapped("libdebuginfod"), "libdebuginfod was loaded");
}
