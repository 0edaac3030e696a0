/*
** tests/test_inductor_cache.c: inductor's caches and failure paths: a
** second compile hits the memory cache, a new process (memory cache
** forgotten) hits the disk cache, a truncated or foreign .so is detected and
** rebuilt, an unwritable KILN_CACHE_DIR compiles without a disk cache, two
** processes compiling the same graph at once both succeed, a missing
** compiler or a compiler error is a BackendCompilerFailed error (or an eager
** fallback under suppress_errors) that keeps the compiler's output, and one
** compiled program runs from 4 threads at once.
*/
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "inductor/inductor.h"
#include "inductor_util.h"
#include "kiln/trace.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

static kn_tensor *fn(kn_tensor *a, kn_tensor *b) {
  return kn_add_scalar(kn_mul(kn_sigmoid(a), b), kn_float(0.5));
}

/* sigmoid(a) * b + 0.5 computed by hand in float. */
static bool expect_fn(kn_tensor *got, kn_tensor *a, kn_tensor *b) {
  if (!got || kn_numel(got) != kn_numel(a)) return false;
  const float *g = kn_data(got), *x = kn_data(a), *y = kn_data(b);
  for (int64_t i = 0; i < kn_numel(a); i++) {
    float want = (1.0f / (1.0f + expf(-x[i]))) * y[i] + 0.5f;
    if (fabsf(g[i] - want) > 1e-6f * (1 + fabsf(want))) return false;
  }
  return true;
}

static bool run_once(const kn_compile_options *o) {
  kn_compiled *f = KN_COMPILE(fn, o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(33, 17), NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(KN_SHAPE(33, 17), NULL, KN_FLOAT32);
  bool ok = expect_fn(kn_call_t(f, a, b), a, b);
  kn_scope_end();
  kn_compiled_free(f);
  return ok;
}

static kn_compile_options opts(void) { return (kn_compile_options){.backend = "inductor"}; }

static bool trace_has(const char *a, const char *b) {
  char *t = kn_test_trace_text();
  bool yes = t && strstr(t, a) && (!b || strstr(t, b));
  free(t);
  return yes;
}

Test(inductor_cache, memory_then_disk_hits) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  char *tdir = kn_test_trace_start();
  kn_compile_options o = opts();
  cr_expect(run_once(&o));
  cr_expect(trace_has("fx_graph_cache_miss", "not in cache"));
  cr_expect(trace_has("inductor_output_code", dir));
  cr_expect(run_once(&o));
  cr_expect(trace_has("fx_graph_cache_hit", "found in memory"));
  kn__ind_cache_forget_memory();
  cr_expect(run_once(&o));
  cr_expect(trace_has("fx_graph_cache_hit", "found on disk"));
  cr_expect_eq(ind_count(dir, ".so"), 1);
  cr_expect_eq(ind_count(dir, ".meta"), 1);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  ind_rm(dir);
}

/* The graph-level key: a new process (memory forgotten) finds the graph's
** entry (<graph key>.fxg naming the source's key) and loads the shared
** object without generating code or running the compiler; the artifact's
** key is the graph key, the name of the .fxg file. */
Test(inductor_cache, warm_process_skips_codegen_by_graph_key) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = opts();
  cr_assert(run_once(&o));
  cr_expect_eq(ind_count(dir, ".fxg"), 1);
  kn__ind_cache_forget_memory();
  char *tdir = kn_test_trace_start();
  cr_expect(run_once(&o));
  char *t = kn_test_trace_text();
  cr_assert(t);
  cr_expect(strstr(t, "fx_graph_cache_hit") && strstr(t, "found on disk"), "%s", t);
  cr_expect_null(strstr(t, "inductor_codegen"), "no code generated on a graph hit");
  cr_expect_null(strstr(t, "inductor_cc"), "no compiler run on a graph hit");
  cr_expect(strstr(t, "inductor_load"), "the shared object is loaded");
  char cmd[300], key[80] = "";
  snprintf(cmd, sizeof cmd, "ls %s/inductor | grep 'fxg$' | cut -c1-64", dir);
  FILE *p = popen(cmd, "r");
  cr_assert(p && fscanf(p, "%70s", key) == 1);
  pclose(p);
  cr_expect(strstr(t, key), "the hit names the graph key %s", key);
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  ind_rm(dir);
}

/* A graph with symbolic sizes compiled again in a new process gives the
** right result (its size expressions come from generating its code, which
** a graph-key hit would skip). */
static kn_tensor *dyn_fn(kn_tensor *x) { return kn_neg(kn_add(kn_mul_scalar(x, kn_float(2)), x)); }

Test(inductor_cache, dynamic_graph_again_in_a_new_process) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  for (int run = 0; run < 2; run++) {
    kn_compile_options o = {.backend = "inductor", .dynamic = KN_DYNAMIC_TRUE};
    kn_compiled *f = KN_COMPILE(dyn_fn, &o);
    kn_scope_begin();
    kn_tensor *x = kn_randn(KN_SHAPE(5 + run), NULL, KN_FLOAT32);
    kn_tensor *y = kn_call_t(f, x);
    cr_assert(y, "%s", kn_last_error());
    for (int64_t i = 0; i < 5 + run; i++) /* -(2x + x), rounded in float */
      cr_expect(fabs(kn_get(y, &i) + 3 * kn_get(x, &i)) <= 1e-6 * (1 + fabs(kn_get(x, &i))),
                "run %d, element %lld: %g for x = %g", run, (long long)i, kn_get(y, &i),
                kn_get(x, &i));
    kn_scope_end();
    kn_compiled_free(f);
    kn_reset();
    kn__ind_cache_forget_memory();
  }
  ind_rm(dir);
}

/* Damage a copy and move it into place: the loaded file (mapped by this
** process) keeps its inode, as it would in another process. */
static void damage(const char *dir, const char *how) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "cd %s/inductor && for g in *.so; do f=$g.x; cp $g $f && %s && "
           "mv -f $f $g; done", dir, how);
  cr_assert_eq(system(cmd), 0);
}

static void rebuilt_after(const char *how) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  char *tdir = kn_test_trace_start();
  kn_compile_options o = opts();
  cr_assert(run_once(&o));
  kn__ind_cache_forget_memory();
  damage(dir, how);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_expect(run_once(&o), "%s", how);
  kn_test_capture_end(&r);
  cr_expect(trace_has("fx_graph_cache_miss", "corrupted"), "%s", how);
  cr_expect(kn_test_count_name(&r, "inductor") >= 1, "the rebuild is logged");
  kn_test_records_free(&r);
  kn__ind_cache_forget_memory();
  cr_expect(run_once(&o));
  cr_expect(trace_has("fx_graph_cache_hit", "found on disk"), "rebuilt entry is valid");
  kn_trace_disable();
  kn_test_rmdir(tdir);
  ind_rm(dir);
}

Test(inductor_cache, truncated_so_rebuilt) { rebuilt_after("truncate -s 100 $f"); }
Test(inductor_cache, corrupted_so_rebuilt) {
  rebuilt_after("printf 'garbage' | dd of=$f bs=1 seek=2000 conv=notrunc 2>/dev/null");
}
Test(inductor_cache, foreign_so_rebuilt) { rebuilt_after("cp /bin/true $f"); }

Test(inductor_cache, unwritable_dir_compiles_without_disk_cache) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  char bad[128];
  snprintf(bad, sizeof bad, "%s/file", dir);
  FILE *fp = fopen(bad, "w");
  cr_assert(fp);
  fclose(fp);
  strcat(bad, "/sub"); /* under a regular file: cannot be created, even as root */
  setenv("KILN_CACHE_DIR", bad, 1);
  char *tdir = kn_test_trace_start();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_compile_options o = opts();
  cr_expect(run_once(&o));
  kn_test_capture_end(&r);
  cr_expect_not_null(kn_test_get_record(&r, "compiling without a disk cache"));
  cr_expect(trace_has("fx_graph_cache_bypass", "not usable"));
  kn_test_records_free(&r);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  ind_rm(dir);
}

Test(inductor_cache, two_processes_race) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  pid_t kids[2];
  for (int i = 0; i < 2; i++) {
    kids[i] = fork();
    cr_assert(kids[i] >= 0);
    if (kids[i] == 0) {
      kn_compile_options o = opts();
      _exit(run_once(&o) ? 0 : 1);
    }
  }
  for (int i = 0; i < 2; i++) {
    int st = 0;
    cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d", i);
  }
  cr_expect_eq(ind_count(dir, ".so"), 1);
  cr_expect_eq(ind_count(dir, ".tmp"), 0);
  kn_compile_options o = opts();
  cr_expect(run_once(&o));
  ind_rm(dir);
}

Test(inductor_cache, missing_compiler_is_backend_error) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  setenv("KILN_CC", "kiln-no-such-cc", 1);
  kn_compile_options o = opts();
  kn_compiled *f = KN_COMPILE(fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(4, 4), NULL, KN_FLOAT32);
  cr_expect_null(kn_call_t(f, a, a));
  cr_expect(strstr(kn_last_error(), "BackendCompilerFailed: backend='inductor'"), "%s",
            kn_last_error());
  cr_expect(strstr(kn_last_error(), "no C compiler: 'kiln-no-such-cc' was not found"), "%s",
            kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  o.suppress_errors = true;
  cr_expect(run_once(&o), "eager fallback gives the right result");
  unsetenv("KILN_CC");
  ind_rm(dir);
}

Test(inductor_cache, compiler_error_keeps_stderr) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  setenv("KILN_CFLAGS", "-O2 -fkiln-no-such-flag", 1);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_compile_options o = opts();
  kn_compiled *f = KN_COMPILE(fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(4, 4), NULL, KN_FLOAT32);
  cr_expect_null(kn_call_t(f, a, a));
  cr_expect(strstr(kn_last_error(), "failed (exit status"), "%s", kn_last_error());
  cr_expect(strstr(kn_last_error(), "-fkiln-no-such-flag"), "compiler output in the error");
  kn_scope_end();
  kn_compiled_free(f);
  kn_test_capture_end(&r);
  const kn_test_record *rec = kn_test_get_record(&r, "-fkiln-no-such-flag");
  cr_expect(rec && strstr(rec->message, "failed (exit status"), "compiler output in the log");
  kn_test_records_free(&r);
  unsetenv("KILN_CFLAGS");
  ind_rm(dir);
}

/* ---- threads ---------------------------------------------------------------------------- */
typedef struct tctx { kn_compiled *f; kn_tensor *a, *b; int ok; } tctx;

static void *worker(void *p) {
  tctx *c = p;
  for (int i = 0; i < 50; i++) {
    kn_scope_begin();
    c->ok += expect_fn(kn_call_t(c->f, c->a, c->b), c->a, c->b);
    kn_scope_end();
  }
  return NULL;
}

Test(inductor_cache, one_program_from_four_threads) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = opts();
  kn_compiled *f = KN_COMPILE(fn, &o);
  kn_tensor *a = kn_randn(KN_SHAPE(257, 300), NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(KN_SHAPE(257, 300), NULL, KN_FLOAT32);
  kn_scope_begin();
  cr_assert(expect_fn(kn_call_t(f, a, b), a, b)); /* compiled before the threads start */
  kn_scope_end();
  tctx c[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    c[i] = (tctx){f, a, b, 0};
    cr_assert_eq(pthread_create(&th[i], NULL, worker, &c[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    cr_expect_eq(c[i].ok, 50, "thread %d", i);
  }
  kn_compiled_free(f);
  kn_release(a);
  kn_release(b);
  cr_expect_eq(ind_count(dir, ".so"), 1);
  ind_rm(dir);
}

/* Run by the next test in a child process (KN_IDENT_CHILD set): a compile
** after leaving the directory the program was started from. */
Test(inductor_cache, ident_child) {
  if (!getenv("KN_IDENT_CHILD")) cr_skip_test("run by rebuilt_program_started_by_relative_path");
  cr_assert_eq(chdir("/"), 0);
  kn_compile_options o = opts();
  cr_expect(run_once(&o));
}

/* The graph key names the program kiln is linked into even when it was
** started as ./prog and changed directory (argv[0] no longer names it): a
** rebuilt program (another modification time) never finds the entries of
** the old one, whose code generator may number buffers differently. */
Test(inductor_cache, rebuilt_program_started_by_relative_path) {
  char dir[64], exe[2048], cmd[6000];
  ind_cache_dir(dir, sizeof dir);
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert(k > 0);
  exe[k] = 0;
  /* BXFI_MAP would make the child take itself for one of Criterion's sandboxed workers */
  const char *run = "env -u BXFI_MAP KN_IDENT_CHILD=1 ./prog --filter='inductor_cache/ident_child' "
                    ">/dev/null 2>&1";
  snprintf(cmd, sizeof cmd, "cp '%s' %s/prog && cd %s && %s && touch -d '2001-02-03' prog && %s",
           exe, dir, dir, run, run);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
  cr_expect_eq(ind_count(dir, ".fxg"), 2, "one graph entry per build of the program");
  ind_rm(dir);
}
