/*
** tests/test_inductor_cuda.c: the code generator's `cuda` target
** (src/inductor/target_cuda.c, cuda_kernels.c) without a GPU:
**   - golden files: the generated text (device code and host program) of
**     representative graphs captured from kiln functions equals
**     tests/golden/cuda/<name>.cu (regenerate them with
**     KILN_UPDATE_GOLDEN=1 after a deliberate change, and read the diff);
**   - every golden file compiles: its device half with g++ -std=c++17
**     -fsyntax-only against tests/cuda/shim.h (CUDA's built-ins for g++),
**     its host half with gcc -std=c17 -fsyntax-only -Wall -Werror;
**   - pointwise kernels run: a golden file's device half built with g++
**     and the shim runs each kernel sequentially over its blocks and
**     threads on the inputs' bytes, and the result equals eager's (bit for
**     bit: the same formulas in the same types);
**   - structure: pointwise kernels are grid-stride loops with 64-bit
**     indices, reductions combine with warp shuffles and a block fold,
**     symbolic sizes are kernel parameters, an extern GEMM stays an
**     rt->ext call.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "graph/graph.h"
#include "inductor/inductor.h"
#include "inductor/target.h"
#include "inductor/toolchain.h"
#include "kiln/kiln.h"
#include "inductor_util.h"
#include "support/files.h"

#define GOLDEN_DIR KN_SOURCE_DIR "/tests/golden/cuda"
#define SHIM KN_SOURCE_DIR "/tests/cuda/shim.h"

/* The backend: the graph's CUDA text into *ud (a char **), then eager. */
static kn_status cuda_text_backend(kn_graph_module *gm, kn_tensor *const *ex, int n, void *ud,
                                   kn_compiled_graph *out) {
  const kn__graph *g = kn__graph_module_graph(gm);
  kn__graph *pg = NULL;
  kn__ind_plan plan;
  memset(&plan, 0, sizeof plan);
  kn_status st = kn__ind_post_grad(g, &pg);
  if (st == KN_OK) st = kn__ind_plan_build(pg, false, &plan);
  kn__sb sb;
  kn__sb_init(&sb);
  kn__shape_env *prev = kn__shape_env_set_current(kn__graph_shape_env(g));
  if (st == KN_OK) st = kn__ind_codegen_target(&plan, &kn__ind_target_cuda, &sb);
  kn__shape_env_set_current(prev);
  if (st == KN_OK) {
    free(*(char **)ud);
    *(char **)ud = kn__sb_take(&sb);
  }
  kn__sb_fini(&sb);
  kn__ind_plan_free(&plan);
  kn__graph_free(pg);
  return st == KN_OK ? kn_backend_compile("eager", gm, ex, n, out) : st;
}

/* ---- the graphs -------------------------------------------------------------------- */
static kn_tensor *example_fn(kn_tensor *a) {
  int64_t sz[2] = {1000, 1000};
  return kn_add(kn_mul(a, kn_ones(2, sz, KN_FLOAT32)), kn_ones(2, sz, KN_FLOAT32));
}
static kn_tensor *bcast_add(kn_tensor *a, kn_tensor *b) { return kn_add(kn_transpose(a, 0, 1), b); }
static kn_tensor *softmax(kn_tensor *x) { return kn_softmax(x, -1); }
static kn_tensor *layer_norm(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
  int64_t ns[1] = {kn_size(x, -1)};
  return kn_layer_norm(x, 1, ns, w, b, 1e-5);
}
static kn_tensor *reductions(kn_tensor *x) {
  int64_t d1[1] = {1};
  kn_tensor *s = kn_sum_dims(x, d1, 1, false), *m = kn_mean_dims(x, d1, 1, false);
  return kn_add(kn_add(s, m), kn_amax(x, d1, 1, false));
}
static kn_tensor *argmax(kn_tensor *x) { return kn_argmax_dim(x, 1, false); }
static kn_tensor *var(kn_tensor *x) {
  int64_t d1[1] = {1};
  return kn_var(x, d1, 1, 1, false);
}
static kn_tensor *bf16_chain(kn_tensor *a, kn_tensor *b) {
  kn_tensor *x = kn_mul(kn_add(a, b), a);
  return kn_where(kn_gt_scalar(a, kn_float(0)), kn_exp(x), kn_relu(b));
}
static kn_tensor *mm_relu(kn_tensor *a, kn_tensor *b) { return kn_relu(kn_mm(kn_tanh(a), b)); }

/* ---- helpers ------------------------------------------------------------------------- */
static char *golden_path(const char *name) {
  static char p[512];
  snprintf(p, sizeof p, "%s/%s.cu", GOLDEN_DIR, name);
  return p;
}

/* Compare text with the golden file (or write it under KILN_UPDATE_GOLDEN). */
static void check_golden(const char *name, const char *text) {
  cr_assert_not_null(text, "%s: no CUDA text (%s)", name, kn_last_error());
  const char *path = golden_path(name);
  const char *up = getenv("KILN_UPDATE_GOLDEN");
  if (up && *up && strcmp(up, "0")) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return;
  }
  char *want = kn_test_read_file(path, NULL);
  cr_assert_not_null(want, "%s missing: run with KILN_UPDATE_GOLDEN=1 to create it", path);
  cr_expect_str_eq(text, want, "%s differs from the generated text (KILN_UPDATE_GOLDEN=1 "
                   "regenerates it)", path);
  free(want);
}

/* Compile FN with the capturing backend and call it once (the backend runs
** the graph eagerly: what matters is the captured text, in `text`). */
#define CAPTURE(FN, DYN, ...)                                                        \
  char *text = NULL;                                                                 \
  kn_compile_options o = {.backend_fn = cuda_text_backend, .backend_ud = &text,     \
                          .dynamic = DYN};                                           \
  kn_compiled *f = KN_COMPILE(FN, &o);                                               \
  cr_assert_not_null(f, "%s", kn_last_error());                                      \
  cr_assert_not_null(kn_call_t(f, __VA_ARGS__), "%s", kn_last_error());               \
  kn_compiled_free(f)

static int count_of(const char *s, const char *needle) { return kn_test_count_of(s, needle); }

TestSuite(inductor_cuda, .timeout = 300);

Test(inductor_cuda, golden_example_fn) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){1000, 1000}, NULL, KN_FLOAT32);
  CAPTURE(example_fn, KN_DYNAMIC_FALSE, a);
  check_golden("example_fn", text);
  cr_expect_eq(count_of(text, "__global__ void kernel"), 1, "one fused kernel:\n%s", text);
  cr_expect_gt(count_of(text, "i += (int64_t)gridDim.x * blockDim.x"), 0, "grid-stride loop");
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_broadcast_strided_add) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){5, 4}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(1, (int64_t[]){5}, NULL, KN_FLOAT32);
  CAPTURE(bcast_add, KN_DYNAMIC_FALSE, a, b);
  check_golden("broadcast_add", text);
  cr_expect_gt(count_of(text, ", strided"), 0, "a strided kernel:\n%s", text);
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_softmax_symbolic) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){8, 33}, NULL, KN_FLOAT32);
  CAPTURE(softmax, KN_DYNAMIC_TRUE, x);
  check_golden("softmax", text);
  cr_expect_gt(count_of(text, "const int64_t S0"), 0, "symbolic sizes as parameters:\n%s", text);
  cr_expect_gt(count_of(text, "kn_block_fold(acc"), 0, "a block combine");
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_layer_norm) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){6, 16}, NULL, KN_FLOAT32);
  kn_tensor *w = kn_randn(1, (int64_t[]){16}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(1, (int64_t[]){16}, NULL, KN_FLOAT32);
  CAPTURE(layer_norm, KN_DYNAMIC_FALSE, x, w, b);
  check_golden("layer_norm", text);
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_sum_mean_amax) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){7, 300}, NULL, KN_FLOAT32);
  CAPTURE(reductions, KN_DYNAMIC_FALSE, x);
  check_golden("sum_mean_amax", text);
  cr_expect_gt(count_of(text, "nan"), 0, "amax keeps a NaN flag");
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_argmax) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){7, 300}, NULL, KN_FLOAT32);
  CAPTURE(argmax, KN_DYNAMIC_FALSE, x);
  check_golden("argmax", text);
  cr_expect_gt(count_of(text, "kn_block_arg(acc"), 0, "an index-carrying combine:\n%s", text);
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_var) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){7, 300}, NULL, KN_FLOAT64);
  CAPTURE(var, KN_DYNAMIC_FALSE, x);
  check_golden("var", text);
  cr_expect_gt(count_of(text, "kn_red_prep_VAR_f64(x, ctr"), 0, "a deviation pass:\n%s", text);
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_bf16_chain) {
  kn_scope_begin();
  kn_tensor *a = kn_to(kn_randn(2, (int64_t[]){16, 16}, NULL, KN_FLOAT32), KN_BFLOAT16);
  kn_tensor *b = kn_to(kn_randn(2, (int64_t[]){16, 16}, NULL, KN_FLOAT32), KN_BFLOAT16);
  CAPTURE(bf16_chain, KN_DYNAMIC_FALSE, a, b);
  check_golden("bf16_chain", text);
  cr_expect_gt(count_of(text, "kn_ld_bf16(in"), 0, "16-bit loads:\n%s", text);
  free(text);
  kn_scope_end();
}

Test(inductor_cuda, golden_extern_mm) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){8, 12}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(2, (int64_t[]){12, 5}, NULL, KN_FLOAT32);
  CAPTURE(mm_relu, KN_DYNAMIC_FALSE, a, b);
  check_golden("extern_mm", text);
  cr_expect_eq(count_of(text, "rt->ext(ctx,"), 1, "one extern call:\n%s", text);
  free(text);
  kn_scope_end();
}

/* ---- every golden file compiles --------------------------------------------------------- */
static const char *const goldens[] = {"example_fn", "broadcast_add", "softmax", "layer_norm",
                                      "sum_mean_amax", "argmax", "var", "bf16_chain",
                                      "extern_mm"};

/* Run cmd (its output into the test log); its exit status. */
static int run(const char *cmd) {
  int rc = system(cmd);
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* One compiler run over every golden file: the device halves with g++ and
** the shim (the shim_runs_* tests also build most of them into programs),
** the host halves as C with warnings as errors. */
Test(inductor_cuda, golden_files_compile) {
  cr_assert_eq(run("command -v g++ >/dev/null && command -v gcc >/dev/null"), 0,
               "g++ and gcc are needed to check the CUDA golden files");
  char files[2400] = "";
  size_t len = 0;
  for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++)
    len += (size_t)snprintf(files + len, sizeof files - len, " %s", golden_path(goldens[i]));
  cr_assert_lt(len, sizeof files);
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "g++ -std=c++17 -fsyntax-only -include %s -x c++%s 2>&1", SHIM, files);
  cr_expect_eq(run(cmd), 0, "device halves: %s", cmd);
  snprintf(cmd, sizeof cmd, "gcc -std=c17 -fsyntax-only -Wall -Wextra -Werror -x c%s 2>&1", files);
  cr_expect_eq(run(cmd), 0, "host halves: %s", cmd);
}

/* A syntax error in device code is caught (the check checks). */
Test(inductor_cuda, shim_check_rejects_a_typo) {
  char path[] = "/tmp/kiln-cuda-typo-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  const char bad[] = "#if defined(__CUDACC__) || defined(KN_CUDA_SHIM)\n"
                     "extern \"C\" __global__ void kernel1(float *out) { out[threadIdx.x] = fabsf(; }\n"
                     "#endif\n";
  cr_assert_eq(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
  close(fd);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "g++ -std=c++17 -fsyntax-only -include %s -x c++ %s 2>/dev/null",
           SHIM, path);
  cr_expect_neq(run(cmd), 0, "a typo in device code passes the check");
  unlink(path);
}

/* ---- pointwise kernels run through the shim ------------------------------------------------ */
/* Build golden file `name`'s device half with g++ and the shim into a
** program running `body` (launches through kn_shim_run over the buffers:
** out, sized as want, and i0, i1 ... holding the inputs' bytes), and
** compare its out with want: bit for bit, or within tol (relative and
** absolute) for floating results, one ulp for bfloat16. */
static void run_kernels(const char *name, const char *body, kn_tensor *const *in, int nin,
                        kn_tensor *want, double tol) {
  char dir[] = "/tmp/kiln-cuda-shim-XXXXXX", path[600], cmd[2400];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/run.cpp", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fprintf(f, "#include \"%s\"\n#include \"%s\"\n#include <cstdio>\n#include <vector>\n"
             "static std::vector<char> rd(const char *p) {\n"
             "  std::vector<char> v;\n  FILE *f = fopen(p, \"rb\");\n  int c;\n"
             "  while (f && (c = fgetc(f)) != EOF) v.push_back((char)c);\n"
             "  if (f) fclose(f);\n  return v;\n}\n"
             "int main(int argc, char **argv) {\n  (void)argc;\n", SHIM, golden_path(name));
  for (int i = 0; i < nin; i++) fprintf(f, "  std::vector<char> i%d = rd(argv[%d]);\n", i, i + 1);
  fprintf(f, "  std::vector<char> out(%zu);\n  %s;\n"
             "  FILE *o = fopen(argv[%d], \"wb\");\n  fwrite(out.data(), 1, out.size(), o);\n"
             "  return fclose(o) != 0;\n}\n",
          (size_t)kn_numel(want) * kn_dtype_size(kn_tensor_dtype(want)), body, nin + 1);
  fclose(f);
  int len = snprintf(cmd, sizeof cmd, "g++ -std=c++17 -O1 -o %s/run %s 2>&1 && %s/run", dir, path,
                     dir);
  for (int i = 0; i < nin; i++) {
    char in_path[640];
    snprintf(in_path, sizeof in_path, "%s/in%d.bin", dir, i);
    kn_tensor *c = kn_contiguous(in[i]);
    FILE *w = fopen(in_path, "wb");
    cr_assert_not_null(w);
    fwrite(kn_data(c), 1, (size_t)kn_numel(c) * kn_dtype_size(kn_tensor_dtype(c)), w);
    fclose(w);
    len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %s", in_path);
  }
  snprintf(cmd + len, sizeof cmd - (size_t)len, " %s/out.bin", dir);
  cr_assert_eq(run(cmd), 0, "%s: %s", name, cmd);
  snprintf(path, sizeof path, "%s/out.bin", dir);
  size_t n = 0;
  char *got = kn_test_read_file(path, &n);
  kn_tensor *w = kn_contiguous(want);
  size_t nb = (size_t)kn_numel(w) * kn_dtype_size(kn_tensor_dtype(w));
  cr_assert(got && n == nb, "%s: %zu bytes, expected %zu", name, n, nb);
  if (kn_tensor_dtype(w) == KN_BFLOAT16) { /* exp: CUDA math vs the vector table, 1 ulp */
    const uint16_t *g16 = (const uint16_t *)got, *w16 = kn_data(w);
    for (int64_t i = 0; i < kn_numel(w); i++)
      cr_expect_leq(abs((int)g16[i] - (int)w16[i]), 1, "%s: element %lld: 0x%x, eager 0x%x", name,
                    (long long)i, g16[i], w16[i]);
  } else if (tol > 0) {
    kn_tensor *g = kn_from_array(got, kn_ndim(w), kn_sizes(w), kn_tensor_dtype(w));
    cr_expect(ind_close(g, w, tol, tol, name), "%s: the kernels' result differs from eager's", name);
  } else {
    cr_expect_eq(memcmp(got, kn_data(w), nb), 0, "%s: the kernels' result differs from eager's",
                 name);
  }
  free(got);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq(run(cmd), 0);
}

/* Three blocks of 256 threads for 10^6 elements: the grid-stride loop covers
** them all. */
Test(inductor_cuda, shim_runs_example_fn) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){1000, 1000}, NULL, KN_FLOAT32);
  run_kernels("example_fn",
              "kn_shim_run(3, 256, [&] { kernel4((float *)out.data(), (const float *)i0.data()); })",
              (kn_tensor *[]){a}, 1, example_fn(a), 0);
  kn_scope_end();
}

/* A transposed read (strides 1, 4 over a's buffer) plus a broadcast row. */
Test(inductor_cuda, shim_runs_broadcast_strided_add) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(2, (int64_t[]){5, 4}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(1, (int64_t[]){5}, NULL, KN_FLOAT32);
  run_kernels("broadcast_add", "kn_shim_run(1, 256, [&] { kernel3((float *)out.data(), "
              "(const float *)i0.data(), (const float *)i1.data()); })", (kn_tensor *[]){a, b}, 2,
              bcast_add(a, b), 0);
  kn_scope_end();
}

/* bfloat16 loads, float compute rounded per node, exp, where, stores (within
** one bfloat16 ulp: the shim's expf against eager's vector-math table). */
Test(inductor_cuda, shim_runs_bf16_chain) {
  kn_scope_begin();
  kn_tensor *a = kn_to(kn_mul_scalar(kn_randn(2, (int64_t[]){16, 16}, NULL, KN_FLOAT32),
                                     kn_float(3)), KN_BFLOAT16);
  kn_tensor *b = kn_to(kn_randn(2, (int64_t[]){16, 16}, NULL, KN_FLOAT32), KN_BFLOAT16);
  run_kernels("bf16_chain", "kn_shim_run(1, 256, [&] { kernel7((uint16_t *)out.data(), "
              "(const uint16_t *)i0.data(), (const uint16_t *)i1.data()); })",
              (kn_tensor *[]){a, b}, 2, bf16_chain(a, b), 0);
  kn_scope_end();
}

/* ---- reductions run through the shim (threads, barriers, shuffles) ---------------------- */
/* Rows of 33 (fewer than the block's threads: idle threads fold the
** identity) with symbolic sizes as parameters; 3 blocks for 8 rows. */
Test(inductor_cuda, shim_runs_softmax) {
  kn_scope_begin();
  kn_tensor *x = kn_mul_scalar(kn_randn(2, (int64_t[]){8, 33}, NULL, KN_FLOAT32), kn_float(4));
  run_kernels("softmax", "kn_shim_run(3, 256, [&] { kernel6((float *)out.data(), "
              "(const float *)i0.data(), 8, 33); })", (kn_tensor *[]){x}, 1, softmax(x), 1e-6);
  kn_scope_end();
}

Test(inductor_cuda, shim_runs_layer_norm) {
  kn_scope_begin();
  kn_tensor *x = kn_randn(2, (int64_t[]){6, 16}, NULL, KN_FLOAT32);
  kn_tensor *w = kn_randn(1, (int64_t[]){16}, NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(1, (int64_t[]){16}, NULL, KN_FLOAT32);
  run_kernels("layer_norm", "kn_shim_run(6, 256, [&] { kernel11((float *)out.data(), "
              "(const float *)i0.data(), (const float *)i1.data(), (const float *)i2.data()); })",
              (kn_tensor *[]){x, w, b}, 3, layer_norm(x, w, b), 1e-5);
  kn_scope_end();
}

/* Rows of 300 (threads take one or two elements); sum, mean and amax (with
** a NaN in row 2: amax is NaN there) in one group, then the add kernel
** written in place over the sum. */
Test(inductor_cuda, shim_runs_sum_mean_amax) {
  kn_scope_begin();
  kn_tensor *x = kn_contiguous(kn_randn(2, (int64_t[]){7, 300}, NULL, KN_FLOAT32));
  ((float *)kn_data(x))[2 * 300 + 123] = NAN;
  run_kernels("sum_mean_amax",
              "std::vector<char> m(28), a(28);\n"
              "  kn_shim_run(7, 256, [&] { kernel3((float *)out.data(), (float *)m.data(), "
              "(float *)a.data(), (const float *)i0.data()); });\n"
              "  kn_shim_run(1, 256, [&] { kernel5((float *)out.data(), (const float *)m.data(), "
              "(const float *)a.data()); })", (kn_tensor *[]){x}, 1, reductions(x), 1e-5);
  kn_scope_end();
}

/* The first index of the maximum: ties (a repeated maximum, in different
** threads' elements) and a NaN (its first index wins). */
Test(inductor_cuda, shim_runs_argmax) {
  kn_scope_begin();
  kn_tensor *x = kn_contiguous(kn_randn(2, (int64_t[]){7, 300}, NULL, KN_FLOAT32));
  float *p = kn_data(x);
  p[1 * 300 + 7] = p[1 * 300 + 263] = p[1 * 300 + 5] = 50;
  p[3 * 300 + 290] = p[3 * 300 + 40] = NAN;
  run_kernels("argmax", "kn_shim_run(2, 256, [&] { kernel1((int64_t *)out.data(), "
              "(const float *)i0.data()); })", (kn_tensor *[]){x}, 1, argmax(x), 0);
  kn_scope_end();
}

/* Two passes: the mean, then the squared deviations (float64). */
Test(inductor_cuda, shim_runs_var) {
  kn_scope_begin();
  kn_tensor *x = kn_add_scalar(kn_randn(2, (int64_t[]){7, 300}, NULL, KN_FLOAT64), kn_float(1e3));
  run_kernels("var", "kn_shim_run(7, 256, [&] { kernel1((double *)out.data(), "
              "(const double *)i0.data()); })", (kn_tensor *[]){x}, 1, var(x), 1e-12);
  kn_scope_end();
}

/* ---- compile without a GPU ---------------------------------------------------------------- */
/* The target's compile step needs NVRTC and the device: without a driver it
** fails with the runtime's clear error, and writes no object. */
Test(inductor_cuda, compile_without_driver_fails_clearly) {
  setenv("KILN_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  char dir[] = "/tmp/kiln-cuda-cc-XXXXXX", cmd[1200], so[700];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(cmd, sizeof cmd, "cp %s %s/k.c", golden_path("example_fn"), dir);
  cr_assert_eq(run(cmd), 0);
  kn__ind_tool tool;
  kn__ind_tool_init(&tool, &kn__ind_target_cuda);
  cr_expect(strstr(tool.ident, "no CUDA device"), "the key's identity names the device: %s",
            tool.ident);
  kn_status st = kn__ind_target_cuda.compile(&tool, dir, "k.c", "k.so", "k.c");
  cr_expect_neq(st, KN_OK);
  cr_expect(strstr(kn_last_error(), "no CUDA driver/GPU found"), "message: %s", kn_last_error());
  cr_expect(strstr(kn_last_error(), "/nonexistent/libcuda.so.1"), "names the library: %s",
            kn_last_error());
  snprintf(so, sizeof so, "%s/k.so", dir);
  cr_expect_neq(access(so, F_OK), 0, "an object was written");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq(run(cmd), 0);
}
