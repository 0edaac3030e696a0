/*
** tests/test_inductor_runnable.c: the fx_graph_runnable artifact of the
** "inductor" backend. For a pointwise chain, a reduction, an extern op (mm),
** a graph with dynamic sizes and one with multi-output ops (topk, chunk as split), the artifact is read back from the trace
** with the strict reader, written to repro.c, compiled against the build
** tree's headers and static library, and run: it must compile its graph with
** inductor (a new shared object in its own cache directory) and exit 0.
** Skipped when there is no C compiler. Node names in the repro are escaped.
*/
#include <sys/wait.h>

#include "core/strbuf.h"
#include "inductor_util.h"
#include "kiln/cuda.h"
#include "kiln/trace.h"
#include "support/files.h"
#include "support/trace_util.h"
#include "graph/graph.h"
#include "inductor/inductor.h"
#include "trace/reader.h"

static kn_tensor *chain(kn_tensor *x) {
  kn_tensor *t = kn_mul_scalar(x, kn_float(1.5));
  t = kn_add(t, x);
  return kn_sigmoid(kn_sub_scalar(t, kn_float(0.25)));
}

static kn_tensor *reduction(kn_tensor *x) {
  return kn_sum_dims(kn_exp(x), (const int64_t[]){1}, 1, false);
}

static kn_tensor *with_mm(kn_tensor *a, kn_tensor *b) {
  return kn_relu(kn_add_scalar(kn_mm(a, b), kn_int(1)));
}

/* Multi-output ops: their outputs go to an array that getitems read. */
static kn_tensor *with_topk(kn_tensor *x) {
  kn_tensor *idx = NULL, *parts[2] = {NULL, NULL};
  kn_tensor *v = kn_topk(x, 2, 1, true, true, &idx);
  if (kn_chunk(x, 2, 1, parts, 2) != 2) return NULL;
  return kn_add(kn_mul_scalar(v, kn_float(2)), parts[1]);
}

/* Every payload of artifact `name` in the current trace, strictly read. */
static int artifacts(const char *name, char **out, int cap) {
  char *path = kn_trace_file_path();
  cr_assert_not_null(path);
  kn__trace_reader_opts o = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open(path, &o);
  cr_assert_not_null(r, "%s", kn_last_error());
  int n = 0;
  const kn__trace_record *rec;
  while (kn__trace_reader_next(r, &rec) == KN_OK && rec) {
    json_t *nm = strcmp(rec->event, "artifact") ? NULL : json_object_get(rec->value, "name");
    if (nm && !strcmp(json_string_value(nm), name) && n < cap) out[n++] = strdup(rec->payload);
  }
  cr_assert_eq(kn__trace_reader_defects(r), 0);
  kn__trace_reader_close(r);
  free(path);
  return n;
}

static bool have_cc(void) { return system("cc --version > /dev/null 2>&1") == 0; }

/* The link line of the build tree's static library (kiln.pc's libraries). */
static void link_flags(kn__sb *sb) {
  FILE *p = popen("pkg-config --static --libs-only-l " KN_PC_FILE, "r");
  cr_assert_not_null(p);
  char buf[1024] = "";
  cr_assert_not_null(fgets(buf, sizeof buf, p));
  pclose(p);
  buf[strcspn(buf, "\n")] = 0;
  char *k = strstr(buf, "-lkiln ");
  cr_assert_not_null(k);
  memset(k, ' ', 6);
  /* -lkiln_ompenv: the build tree's (an installed kiln.pc has its -L and rpath) */
  kn__sb_printf(sb, "'%s' -L'%s' -Wl,-rpath,'%s' %s", KN_STATIC_LIB, KN_OMPENV_DIR,
                KN_OMPENV_DIR, buf);
}

/* Write src to dir/repro.c, compile it and run it with a fresh cache dir;
** returns the number of shared objects it created, -1 if it failed. */
static int run_repro(const char *dir, const char *src, int k) {
  kn__sb path = KN__SB_INIT, cmd = KN__SB_INIT;
  kn__sb_printf(&path, "%s/repro%d.c", dir, k);
  FILE *f = fopen(kn__sb_cstr(&path), "w");
  cr_assert_not_null(f);
  fputs(src, f);
  fclose(f);
  kn__sb_printf(&cmd, "cc -std=c17 %s -I'%s/include' '%s' -o '%s/repro%d' ", KN_REPRO_CFLAGS,
                KN_SOURCE_DIR, kn__sb_cstr(&path), dir, k);
  link_flags(&cmd);
  kn__sb_printf(&cmd, " > '%s/cc%d.txt' 2>&1", dir, k);
  int rc = system(kn__sb_cstr(&cmd));
  cr_assert_eq(rc, 0, "repro %d does not compile: %s (see %s/cc%d.txt)", k, kn__sb_cstr(&cmd),
               dir, k);
  char cache[64];
  snprintf(cache, sizeof cache, "/tmp/kiln-repro-XXXXXX");
  cr_assert(mkdtemp(cache));
  kn__sb_clear(&cmd);
  kn__sb_printf(&cmd, "env -u KILN_TRACE KILN_CACHE_DIR='%s' '%s/repro%d' > '%s/out%d.txt' 2>&1",
                cache, dir, k, dir, k);
  rc = system(kn__sb_cstr(&cmd));
  kn__sb_clear(&path);
  kn__sb_printf(&path, "%s/out%d.txt", dir, k);
  char *out = kn_test_read_file(kn__sb_cstr(&path), NULL);
  bool ok = WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && out &&
            strstr(out, "repro: compiled with inductor and ran\n");
  if (!ok) cr_log_error("repro %d failed (status %d): %s", k, rc, out ? out : "");
  int sos = ok ? ind_count(cache, ".so") : -1;
  free(out);
  ind_rm(cache);
  kn__sb_fini(&path);
  kn__sb_fini(&cmd);
  return sos;
}

Test(inductor_runnable, repros_compile_and_run) {
  if (!have_cc()) cr_skip_test("no C compiler");
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  char *tdir = kn_test_trace_start();
  kn_compile_options o = {.backend = "inductor"};
  kn_compile_options od = {.backend = "inductor", .dynamic = KN_DYNAMIC_TRUE};
  kn_compiled *f1 = KN_COMPILE(chain, &o), *f2 = KN_COMPILE(reduction, &o);
  kn_compiled *f3 = KN_COMPILE(with_mm, &o), *f4 = KN_COMPILE(chain, &od);
  kn_compiled *f5 = KN_COMPILE(with_topk, &o);
  kn_scope_begin();
  kn_tensor *x = kn_randn(KN_SHAPE(4, 5), NULL, KN_FLOAT64);
  kn_tensor *b = kn_randn(KN_SHAPE(5, 3), NULL, KN_FLOAT64);
  cr_assert_not_null(kn_call_t(f1, x));
  cr_assert_not_null(kn_call_t(f2, x));
  cr_assert_not_null(kn_call_t(f3, x, b));
  cr_assert_not_null(kn_call_t(f4, kn_randn(KN_SHAPE(7, 3), NULL, KN_FLOAT32)));
  cr_assert_not_null(kn_call_t(f5, x));
  kn_scope_end();
  char *src[8];
  int n = artifacts("fx_graph_runnable", src, 8);
  cr_assert_eq(n, 5, "one fx_graph_runnable per compiled graph, found %d", n);
  /* independent expectations: the public calls of each graph, the sizes */
  cr_expect(strstr(src[0], "kn_mul_scalar(") && strstr(src[0], "kn_sigmoid("), "%s", src[0]);
  cr_expect(strstr(src[1], "kn_sum_dims(") && strstr(src[1], "{INT64_C(4), INT64_C(5)}"));
  cr_expect(strstr(src[2], "kn_mm(") && strstr(src[2], "KN_FLOAT64"), "%s", src[2]);
  cr_expect(strstr(src[3], ".dynamic = KN_DYNAMIC_TRUE") && strstr(src[3], "INT64_C(7)"),
            "%s", src[3]);
  cr_expect(strstr(src[0], ".dynamic = KN_DYNAMIC_FALSE"));
  cr_expect(strstr(src[4], "kn_topk(") && strstr(src[4], "kn_split(") && strstr(src[4], "[1]"),
            "%s", src[4]);
  for (int i = 0; i < n; i++) {
    cr_expect_null(strstr(src[i], "on_device"), "a CPU graph's repro names no device: %s", src[i]);
    cr_expect_eq(run_repro(tdir, src[i], i), 1, "repro %d:\n%s", i, src[i]);
    free(src[i]);
  }
  kn_trace_disable();
  kn_compiled_free(f1);
  kn_compiled_free(f2);
  kn_compiled_free(f3);
  kn_compiled_free(f4);
  kn_compiled_free(f5);
  kn_test_rmdir(tdir);
  ind_rm(dir);
}

/* A graph whose inputs are on the GPU (the fake driver, tests/support/
** fakecuda.c): the repro names the device once, as PyTorch's repro gives
** each input's device=device(type='cuda', index=0), and draws the inputs on
** the host before copying them there. It compiles and runs on the fake
** driver, and with that one line rewritten to KN_CPU on the host. A CPU
** graph's repro has none of it (the first test's files are unchanged). */
Test(inductor_runnable, a_cuda_graph_names_its_device) {
  if (!have_cc()) cr_skip_test("no C compiler");
  setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1);
  setenv("KILN_CUDA_CUBLAS", KN_FAKECUDA_PATH, 1);
  setenv("KILN_CUDA_NVRTC", KN_FAKENVRTC_PATH, 1);
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  char *tdir = kn_test_trace_start();
  kn_compiled *f = KN_COMPILE(chain, &(kn_compile_options){.backend = "inductor"});
  kn_scope_begin();
  kn_tensor *x = NULL;
  cr_assert_eq(kn_to_device(kn_randn(KN_SHAPE(4, 5), NULL, KN_FLOAT32), KN_CUDA, &x), KN_OK,
               "%s", kn_last_error());
  cr_assert_not_null(kn_call_t(f, x), "%s", kn_last_error());
  kn_scope_end();
  char *src[2];
  cr_assert_eq(artifacts("fx_graph_runnable", src, 2), 1);
  cr_expect(strstr(src[0], "device(type='cuda', index=0)"), "%s", src[0]);
  const char *line = "static const kn_device device = KN_CUDA;";
  char *at = strstr(src[0], line);
  cr_assert_not_null(at, "%s", src[0]);
  cr_expect(strstr(src[0], "in[0] = on_device(kn_randn(2, sizein0, gen, KN_FLOAT32));"), "%s",
            src[0]);
  cr_expect_geq(run_repro(tdir, src[0], 0), 0, "the repro runs on the (fake) GPU:\n%s", src[0]);
  memcpy(strstr(at, "KN_CUDA"), "KN_CPU; ", 8); /* the device rewritten to cpu */
  cr_expect_eq(run_repro(tdir, src[0], 1), 1, "the repro runs on the host:\n%s", src[0]);
  free(src[0]);
  kn_trace_disable();
  kn_compiled_free(f);
  kn_test_rmdir(tdir);
  ind_rm(dir);
}

/* A graph built by hand whose placeholder source and constant name hold C
** comment terminators and quotes: the repro carries only [A-Za-z0-9_.] of
** them, in comments. */
Test(inductor_runnable, user_names_are_escaped) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = {.kind = KN__V_TENSOR, .dtype = KN_FLOAT32, .ndim = 1};
  m.sizes[0] = kn__sym_const(3);
  m.strides[0] = kn__sym_const(1);
  kn__gnode *in = kn__graph_placeholder(g, "L['x*/ evil(); /*\"']", &m);
  cr_assert_not_null(in, "%s", kn_last_error());
  kn_tensor *w = kn_ones(KN_SHAPE(3), KN_FLOAT32);
  kn__gnode *c = kn__graph_get_attr(g, "w*/ bad(); /*\"\n#include", w);
  cr_assert_not_null(c, "%s", kn_last_error());
  kn__garg args[] = {KN_GA_T(in), KN_GA_T(c)};
  kn__gnode *r = kn__graph_call(g, kn__op_lookup("mul.Tensor"), 2, args, 1, &m);
  cr_assert_not_null(r, "%s", kn_last_error());
  kn__gref outs[] = {{r, 0}};
  cr_assert_not_null(kn__graph_output(g, 1, outs));
  const char *why = NULL, *reason = NULL;
  char *src = kn__ind_runnable(g, &why, &reason);
  cr_assert_not_null(src, "%s", why ? why : "");
  cr_expect_null(strstr(src, "evil()"), "%s", src);
  cr_expect_null(strstr(src, "bad()"), "%s", src);
  cr_expect_null(strstr(src, "*/ "), "%s", src);
  int includes = 0;
  for (const char *p = src; (p = strstr(p, "#include")); p++) includes++;
  cr_expect_eq(includes, 4, "only the repro's own includes: %s", src);
  cr_expect(strstr(src, "kn_mul(v0, v1)"), "%s", src);
  free(src);
  kn__graph_free(g);
  kn_release(w);
}
