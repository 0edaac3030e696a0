/*
** tests/test_inductor_ctime.c: what keeps a cold compile short (docs/INDUCTOR.md,
** "Compile time"): a program split into translation units compiled in
** parallel (tu_split.c, KILN_COMPILE_JOBS), and tiered compiles
** (KILN_INDUCTOR_TIERED: a fast first tier, the optimised build swapped in
** behind it, while other threads call the compiled function).
**
** Results are compared with the eager ops (within float32 rounding: a
** reduction adds in lanes), and bit for bit with the ordinary build of the
** same program (one translation unit, optimised): the generated code fixes
** the order of every operation and contracts no FMA, so neither the split
** nor the first tier's -O1 may change a bit.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "inductor/inductor.h"
#include "inductor/toolchain.h"
#include "inductor_util.h"
#include "kiln/log.h"
#include "kiln/trace.h"
#include "support/files.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

static char cache[64];

static void setup(void) {
  ind_cache_dir(cache, sizeof cache);
  kn_manual_seed(5);
  kn__ind_cache_forget_memory();
}
static void teardown(void) {
  kn__ind_tier_wait();
  unsetenv("KILN_COMPILE_JOBS");
  unsetenv("KILN_INDUCTOR_TIERED");
  unsetenv("KILN_CC");
  ind_rm(cache);
}

TestSuite(inductor_ctime, .init = setup, .fini = teardown, .timeout = 300);

/* ---- the splitter on text ------------------------------------------------------------ */
static const char program[] =
    "/* generated */\n#define KN_HID x\n\n"
    "/* kernel 3: a (flat loop, 1 inputs) */\n"
    "static void kernel3(const int64_t *restrict s, float *restrict out, "
    "const float *restrict in0) {\n"
    "  out[0] = in0[0];\n}\n\n"
    "/* kernel 5: group of b (row loop, 2 nodes, 1 outputs) */\n"
    "static void kn_rows5(int64_t o, const int64_t *restrict s, double *restrict out0) {\n"
    "  out0[o] = 1;\n}\n"
    "static void kernel5(const int64_t *restrict s, double *restrict out0) {\n"
    "  out0[0] = 1;\n}\n\n"
    "/* kernel 9: c (flat loop, 2 inputs) */\n"
    "static void kernel9(const int64_t *restrict s, float *restrict out) {\n"
    "  out[0] = 2;\n}\n\n"
    "int call(const kn_rt *rt, void *ctx, const int64_t *s);\n"
    "int call(const kn_rt *rt, void *ctx, const int64_t *s) {\n  return 0;\n}\n";

static int count(const char *s, const char *what) { return (int)kn_test_count_of(s, what); }

Test(inductor_ctime, split_text_into_units) {
  cr_expect_eq(kn__ind_tu_kernels(program), 3);
  kn__sb u[KN__IND_TU_MAX];
  for (int i = 0; i < KN__IND_TU_MAX; i++) kn__sb_init(&u[i]);
  int got = 0;
  cr_assert_eq(kn__ind_tu_split(program, 2, u, &got), KN_OK);
  cr_assert_eq(got, 2);
  const char *a = kn__sb_cstr(&u[0]), *b = kn__sb_cstr(&u[1]);
  /* unit 0: the shared definitions, every kernel declared, the entry point */
  cr_expect(!strncmp(a, "#define KN_TU_PART 1\n#define KN_TU_MAIN 1\n/* generated */\n", 58),
            "%s", a);
  cr_expect(!strncmp(b, "#define KN_TU_PART 1\n/* generated */\n", 36), "%s", b);
  cr_expect_eq(count(a, "KN_HID void kernel5(const int64_t *restrict s, double *restrict out0);\n"),
               1, "%s", a);
  cr_expect_eq(count(a, ";\nKN_HID void kernel9(const int64_t *restrict s, float *restrict out);\n"),
               1, "%s", a);
  cr_expect_eq(count(a, "int call(const kn_rt *rt, void *ctx, const int64_t *s) {\n  return 0;\n}\n"),
               1);
  cr_expect_eq(count(b, "int call("), 0);
  /* every kernel defined exactly once over the units, none static */
  for (int k = 0; k < 3; k++) {
    char def[40];
    snprintf(def, sizeof def, "KN_HID void kernel%d(", (int[]){3, 5, 9}[k]);
    cr_expect_eq(count(a, def) + count(b, def), 2, "kernel %d: declared once, defined once", k);
  }
  cr_expect_eq(count(a, "static void kernel") + count(b, "static void kernel"), 0);
  cr_expect_eq(count(a, "  out[0] = in0[0];\n") + count(b, "  out[0] = in0[0];\n"), 1);
  cr_expect_eq(count(a, "  out0[0] = 1;\n") + count(b, "  out0[0] = 1;\n"), 1);
  /* a kernel's helper stays static, beside it */
  const char *rows = "/* kernel 5: group of b (row loop, 2 nodes, 1 outputs) */\n"
                     "static void kn_rows5(int64_t o, const int64_t *restrict s, double *restrict "
                     "out0) {\n  out0[o] = 1;\n}\nKN_HID void kernel5(";
  cr_expect_eq(count(a, rows) + count(b, rows), 1, "%s\n%s", a, b);
  cr_expect_eq(count(a, "  out[0] = 2;\n") + count(b, "  out[0] = 2;\n"), 1);
  for (int i = 0; i < KN__IND_TU_MAX; i++) kn__sb_fini(&u[i]);
}

/* More units than kernels: one kernel each; a text without kernels (a graph
** of extern calls only) or not in the printer's layout stays whole. */
Test(inductor_ctime, split_limits) {
  kn__sb u[KN__IND_TU_MAX];
  for (int i = 0; i < KN__IND_TU_MAX; i++) kn__sb_init(&u[i]);
  int got = 0;
  cr_assert_eq(kn__ind_tu_split(program, 8, u, &got), KN_OK);
  cr_expect_eq(got, 3);
  for (int i = 0; i < 3; i++) /* unit 0 also declares the three */
    cr_expect_eq(count(kn__sb_cstr(&u[i]), "KN_HID void kernel"), i ? 1 : 4, "unit %d", i);
  for (int i = 0; i < KN__IND_TU_MAX; i++) kn__sb_clear(&u[i]);
  const char *externs = "/* p */\nint call(const kn_rt *rt, void *ctx, const int64_t *s) {\n}\n";
  cr_assert_eq(kn__ind_tu_split(externs, 4, u, &got), KN_OK);
  cr_expect_eq(got, 1);
  cr_expect_eq(kn__ind_tu_kernels(externs), 0);
  const char *odd = "/* kernel 1: x */\nvoid kernel1(void) {}\nint call(const kn_rt *rt) {}\n";
  cr_assert_eq(kn__ind_tu_split(odd, 4, u, &got), KN_OK);
  cr_expect_eq(got, 1, "not the printer's layout: compiled whole");
  cr_expect_eq(u[0].len, 0);
  for (int i = 0; i < KN__IND_TU_MAX; i++) kn__sb_fini(&u[i]);
}

/* ---- compiled programs ----------------------------------------------------------------- */
/* Softmax over alternating dims (a reduction group each, reading the vector
** math table pointer the entry point binds) and tanh / sin (vector-math
** functions that only one unit defines): several kernels. */
static kn_tensor *many(kn_tensor *x) {
  kn_tensor *t = x;
  for (int i = 0; i < 4; i++) {
    t = kn_softmax(kn_add(kn_mul_scalar(t, kn_float(1.5)), x), i % 2);
    t = kn_tanh(kn_add(t, kn_sin(x)));
  }
  return kn_add(t, kn_exp(kn_sum_dims(t, (int64_t[]){1}, 1, true)));
}

static bool near_eager(kn_tensor *got, kn_tensor *want) {
  return ind_close(got, want, 1e-5, 1e-6, "compiled vs eager");
}

static bool same_bits(kn_tensor *got, kn_tensor *want) {
  return got && want && kn_numel(got) == kn_numel(want) &&
         !memcmp(kn_data(got), kn_data(want), (size_t)kn_numel(want) * sizeof(float));
}

/* Compile many and call it on x under the inductor log; the records in r. */
static kn_tensor *compile_call(kn_compiled **f, kn_tensor *x, kn_test_records *r) {
  kn_set_logs_str("+inductor");
  kn_test_capture_begin(r);
  kn_compile_options o = {.backend = "inductor"};
  *f = KN_COMPILE(many, &o);
  kn_tensor *y = *f ? kn_call_t(*f, x) : NULL;
  kn_test_capture_end(r);
  kn_set_logs_str("");
  return y;
}

/* The ordinary build's result (one unit, not tiered) in a cache of its own. */
static kn_tensor *reference(kn_tensor *x) {
  char dir[64];
  const char *jobs = getenv("KILN_COMPILE_JOBS"), *tiered = getenv("KILN_INDUCTOR_TIERED");
  char *j = jobs ? strdup(jobs) : NULL, *t = tiered ? strdup(tiered) : NULL;
  setenv("KILN_COMPILE_JOBS", "1", 1);
  unsetenv("KILN_INDUCTOR_TIERED");
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(many, &o);
  kn_tensor *y = f ? kn_call_t(f, x) : NULL;
  cr_assert_not_null(y, "%s", kn_last_error());
  kn_retain(y);
  kn_compiled_free(f);
  ind_rm(dir);
  kn__ind_cache_forget_memory();
  setenv("KILN_CACHE_DIR", cache, 1);
  if (j) setenv("KILN_COMPILE_JOBS", j, 1);
  else unsetenv("KILN_COMPILE_JOBS");
  if (t) setenv("KILN_INDUCTOR_TIERED", t, 1);
  free(j);
  free(t);
  return y;
}

static const kn_test_record *find(const kn_test_records *r, const char *s) {
  for (size_t i = 0; i < r->n; i++)
    if (strstr(r->v[i].message, s)) return &r->v[i];
  return NULL;
}

Test(inductor_ctime, split_program_computes_as_eager) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(37, 45), NULL, KN_FLOAT32);
  kn_tensor *eager = many(x), *want = reference(x);
  cr_expect(near_eager(want, eager));
  setenv("KILN_COMPILE_JOBS", "3", 1);
  kn_test_records r = {0};
  kn_compiled *f;
  kn_tensor *got = compile_call(&f, x, &r);
  cr_assert_not_null(got, "%s", kn_last_error());
  cr_expect(find(&r, "translation units in parallel") &&
            strstr(find(&r, "translation units in parallel")->message, " as 3 translation units"));
  cr_expect(same_bits(got, want), "compiled in 3 units: the ordinary build's bits");
  cr_expect_eq(ind_count(cache, ".so"), 1);
  cr_expect_eq(ind_count(cache, ".c"), 1, "the cache keeps the whole program's source");
  kn_test_records_free(&r);
  kn_compiled_free(f);
  kn_release(want);
  kn_scope_end();
}

/* A compiler failing on one unit: the error names the unit and carries the
** compiler's output. */
Test(inductor_ctime, split_compile_error_names_the_unit) {
  char cc[128];
  snprintf(cc, sizeof cc, "%s/unit-cc", cache);
  FILE *fp = fopen(cc, "w");
  cr_assert(fp);
  fprintf(fp, "#!/bin/sh\ncase \"$*\" in *.p1.c*) echo \"unit-cc: cannot compile this one\"; "
              "exit 3;; esac\nexec cc \"$@\"\n");
  fclose(fp);
  cr_assert_eq(chmod(cc, 0700), 0);
  setenv("KILN_CC", cc, 1);
  setenv("KILN_COMPILE_JOBS", "2", 1);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(8, 9), NULL, KN_FLOAT32);
  kn_test_records r = {0};
  kn_compiled *f;
  cr_expect_null(compile_call(&f, x, &r));
  const char *e = kn_last_error();
  cr_expect(strstr(e, "the C compiler '") && strstr(e, "failed (exit status 3)") &&
            strstr(e, "unit-cc: cannot compile this one"), "%s", e);
  const kn_test_record *w = find(&r, "(translation unit 2 of 2, ");
  cr_expect(w && strstr(w->message, ".p1.c)") && strstr(w->message, "cannot compile this one"));
  kn_test_records_free(&r);
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- tiered compiles --------------------------------------------------------------------- */
Test(inductor_ctime, tiered_swaps_in_the_optimised_build) {
  setenv("KILN_INDUCTOR_TIERED", "1", 1);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(33, 40), NULL, KN_FLOAT32);
  kn_tensor *want = reference(x);
  cr_expect(near_eager(want, many(x)));
  kn_test_records r = {0};
  kn_compiled *f;
  kn_tensor *got = compile_call(&f, x, &r);
  cr_assert_not_null(got, "%s", kn_last_error());
  cr_expect(same_bits(got, want), "the first tier: the ordinary build's bits");
  cr_expect(find(&r, "runs its first tier (-O1); the optimised build follows"));
  kn_test_records r2 = {0};
  kn_test_capture_begin(&r2);
  kn_set_logs_str("+inductor");
  kn__ind_tier_wait();
  kn_set_logs_str("");
  kn_test_capture_end(&r2);
  cr_expect(find(&r2, "the optimised build of") && find(&r2, "is in use"));
  cr_expect(same_bits(kn_call_t(f, x), want), "the optimised build: the ordinary build's bits");
  /* the cache holds the optimised build only, under the ordinary key */
  cr_expect_eq(ind_count(cache, ".so"), 1);
  cr_expect_eq(ind_count(cache, ".meta"), 1);
  cr_expect_eq(ind_count(cache, ".fxg"), 1);
  kn_test_records_free(&r);
  kn_test_records_free(&r2);
  kn_compiled_free(f);
  /* a new process (memory cache forgotten), tiered or not, finds it on disk */
  kn__ind_cache_forget_memory();
  unsetenv("KILN_INDUCTOR_TIERED");
  kn_test_records r3 = {0};
  char *tdir = kn_test_trace_start();
  kn_set_logs_str("+inductor");
  kn_test_capture_begin(&r3);
  kn_compile_options o = {.backend = "inductor"};
  f = KN_COMPILE(many, &o);
  got = f ? kn_call_t(f, x) : NULL;
  kn_test_capture_end(&r3);
  kn_set_logs_str("");
  cr_expect(same_bits(got, want));
  char *trace = kn_test_trace_text();
  cr_expect(trace && strstr(trace, "fx_graph_cache_hit") && strstr(trace, "found on disk"));
  free(trace);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  cr_expect_null(find(&r3, "first tier"));
  kn_test_records_free(&r3);
  kn_compiled_free(f);
  kn_release(want);
  kn_scope_end();
}

/* Threads calling the compiled function while its optimised build is swapped
** in: every call gives the ordinary build's bits (ThreadSanitizer checks
** the swap). */
typedef struct caller { kn_compiled *f; kn_tensor *x, *want; atomic_int *bad; } caller;

static void *call_loop(void *arg) {
  caller *c = arg;
  for (int i = 0; i < 60; i++) {
    kn_scope_begin();
    if (!same_bits(kn_call_t(c->f, c->x), c->want)) atomic_fetch_add(c->bad, 1);
    kn_scope_end();
  }
  return NULL;
}

Test(inductor_ctime, tiered_swap_while_threads_call) {
  setenv("KILN_INDUCTOR_TIERED", "1", 1);
  kn_scope_begin(); /* x, want: the references retained here, released at the end */
  kn_tensor *x = kn_retain(kn_randn(KN_SHAPE(16, 24), NULL, KN_FLOAT32));
  kn_tensor *want = reference(x);
  kn_scope_end();
  kn_test_records r = {0};
  kn_compiled *f;
  kn_scope_begin();
  cr_assert(same_bits(compile_call(&f, x, &r), want), "%s", kn_last_error());
  kn_scope_end();
  atomic_int bad = 0;
  caller c = {f, x, want, &bad};
  pthread_t th[3];
  for (int i = 0; i < 3; i++) cr_assert_eq(pthread_create(&th[i], NULL, call_loop, &c), 0);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  kn__ind_tier_wait();
  call_loop(&c);
  cr_expect_eq(atomic_load(&bad), 0);
  kn_test_records_free(&r);
  kn_compiled_free(f);
  kn_release(x);
  kn_release(want);
}

Test(inductor_ctime, tiered_setting_is_checked) {
  const char *v[] = {"", "0", "1", "yes"};
  const bool on[] = {false, false, true, false};
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  for (int i = 0; i < 4; i++) {
    setenv("KILN_INDUCTOR_TIERED", v[i], 1);
    cr_expect_eq(kn__ind_tiered(), on[i], "'%s'", v[i]);
  }
  kn_test_capture_end(&r);
  cr_expect(
      find(&r, "KILN_INDUCTOR_TIERED: expected 0 or 1, found 'yes'; tiered compiles stay off"));
  kn_test_records_free(&r);
}

/* ---- what gcc compiles fast --------------------------------------------------------------- */
static kn_tensor *softmax_rows(kn_tensor *x) { return kn_softmax(x, 1); }

/* A reduction group's rows are a function of a range of rows with the
** kernel's restrict pointers (gcc's outlined OpenMP body would read them
** from a struct, unqualified, and version every inner loop for aliasing:
** three times the compile time); under OpenMP each thread of the team
** calls it for its share. The scalar target has no OpenMP region: the
** kernel calls it once. */
Test(inductor_ctime, reduction_rows_are_a_function_under_openmp) {
  const char *targets[] = {"c", "c_scalar"};
  for (int t = 0; t < 2; t++) {
    setenv("KILN_INDUCTOR_TARGET", targets[t], 1);
    kn__ind_cache_forget_memory();
    kn_scope_begin();
    kn_tensor *x = kn_randn(KN_SHAPE(512, 160), NULL, KN_FLOAT32); /* >= 65536: OpenMP text */
    kn_compile_options o = {.backend = "inductor"};
    kn_compiled *f = KN_COMPILE(softmax_rows, &o);
    cr_assert(ind_close(f ? kn_call_t(f, x) : NULL, kn_softmax(x, 1), 1e-6, 1e-7, targets[t]));
    kn_compiled_free(f);
    kn_scope_end();
  }
  unsetenv("KILN_INDUCTOR_TARGET");
  char *src = kn_test_inductor_sources(cache);
  cr_assert_not_null(src);
  /* both programs are in the cache: a row function each, called by the c
  ** target's team */
  cr_expect_eq(count(src, "static void kn_rows"), 2, "%s", src);
  cr_expect_eq(count(src, "(int64_t lo, int64_t hi, const int64_t *restrict s, float *restrict "
                          "out0, const float *restrict in0) {\n"), 2, "%s", src);
  cr_expect_eq(count(src, "    #pragma omp for schedule(dynamic, 1) nowait\n"
                          "    for (int t = 0; t < np; t++)\n      kn_rows"), 1, "%s", src);
  cr_expect_eq(count(src, "  for (int64_t o = lo; o < hi; o++) {\n"), 2, "%s", src);
  cr_expect_eq(count(src, "static void kernel"), 2);
  free(src);
}
