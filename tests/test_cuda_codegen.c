/*
** tests/test_cuda_codegen.c: the cuda target's compile and load steps
** without a GPU, on the fake CUDA driver (tests/support/fakecuda.c: a
** device of sm_90 that runs no kernels) and, where this machine has it, the
** real NVRTC (skipped otherwise):
**   - NVRTC compiles the device half of every golden file
**     (tests/golden/cuda/NAME.cu) for the device's architecture: the text the
**     generator prints is valid CUDA C++ for the real compiler, not only
**     for g++ and the shim;
**   - the target's compile step makes one shared object from a golden
**     file (the host half compiled by the system compiler, the device image
**     inside it), and its load step reads the image back and hands it to
**     the driver: the fake driver refuses to load modules, and the error
**     names the object and the driver's refusal;
**   - a device-code error fails the compile with NVRTC's log in the
**     message, and no object is written.
*/
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/cuda.h"
#include "inductor/target.h"
#include "inductor/toolchain.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "support/files.h"

#define GOLDEN_DIR KN_SOURCE_DIR "/tests/golden/cuda"

/* The fake driver; and a reference to dynamo/backends.c, whose constructor
** registers the built-in backends and the CUDA eager handler (a static link
** keeps only the objects a program references). */
static void use_fake(void) {
  setenv("KILN_CUDA_DRIVER", KN_FAKECUDA_PATH, 1);
  kn_compile_counter cc = {0};
  kn_compile_counter_clear(&cc);
}
TestSuite(cuda_codegen, .init = use_fake, .timeout = 300);

static const char *const goldens[] = {"example_fn", "broadcast_add", "softmax", "layer_norm",
                                      "sum_mean_amax", "argmax", "var", "bf16_chain",
                                      "extern_mm"};

/* Skip when NVRTC cannot be loaded here; fail on any other init error. */
static void need_nvrtc(void) {
  void *img = NULL;
  size_t n = 0;
  bool ptx = false;
  kn_status s = kn__cuda_compile("extern \"C\" __global__ void k(void) {}\n", "probe.cu", NULL,
                                 &img, &n, &ptx, NULL);
  free(img);
  if (s == KN_EUNSUPPORTED && strstr(kn_last_error(), "cannot load NVRTC"))
    cr_skip_test("no NVRTC on this machine: %s", kn_last_error());
  cr_assert_eq(s, KN_OK, "%s", kn_last_error());
}

Test(cuda_codegen, nvrtc_compiles_every_golden_file) {
  need_nvrtc();
  for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.cu", GOLDEN_DIR, goldens[i]);
    char *src = kn_test_read_file(path, NULL);
    cr_assert_not_null(src, "%s", path);
    void *img = NULL;
    size_t n = 0;
    bool ptx = false;
    kn__sb log;
    kn__sb_init(&log);
    kn_status s = kn__cuda_compile(src, path, NULL, &img, &n, &ptx, &log);
    cr_expect_eq(s, KN_OK, "%s: %s\n%s", goldens[i], kn_last_error(), kn__sb_cstr(&log));
    cr_expect_gt(n, 0, "%s: an empty image", goldens[i]);
    kn__sb_fini(&log);
    free(img);
    free(src);
  }
}

static int run(const char *cmd) {
  int rc = system(cmd);
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* A private directory holding text as k.c; its path into dir[cap]. */
static void src_dir(char *dir, size_t cap, const char *text) {
  snprintf(dir, cap, "/tmp/kiln-cuda-cg-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  char path[600];
  snprintf(path, sizeof path, "%s/k.c", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

static void rm_dir(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_expect_eq(run(cmd), 0);
}

Test(cuda_codegen, compile_makes_one_object_and_load_hands_its_image_to_the_driver) {
  need_nvrtc();
  char path[512], dir[64], so[700];
  snprintf(path, sizeof path, "%s/softmax.cu", GOLDEN_DIR);
  char *src = kn_test_read_file(path, NULL);
  cr_assert_not_null(src);
  src_dir(dir, sizeof dir, src);
  free(src);
  kn__ind_tool tool;
  kn__ind_tool_init(&tool, &kn__ind_target_cuda);
  cr_expect(strstr(tool.ident, " cuda sm_90 "), "the keys name the architecture: %s", tool.ident);
  int major = 0, minor = 0;
  cr_assert_eq(kn__cuda_nvrtc_version(&major, &minor), KN_OK, "%s", kn_last_error());
  char nv[64];
  snprintf(nv, sizeof nv, " nvrtc %d.%d", major, minor);
  cr_expect(major >= 11 && strstr(tool.ident, nv), "the keys name NVRTC's version (%s): %s", nv,
            tool.ident);
  kn_status st = kn__ind_target_cuda.compile(&tool, dir, "k.c", "k.so", "k.c");
  cr_assert_eq(st, KN_OK, "%s", kn_last_error());
  snprintf(so, sizeof so, "%s/k.so", dir);
  int fd = open(so, O_RDONLY | O_CLOEXEC);
  cr_assert_geq(fd, 0, "no object written");
  kn__ind_call_fn call = NULL;
  st = kn__ind_target_cuda.load(fd, false, "k.so", &call);
  close(fd);
  cr_expect_neq(st, KN_OK, "the fake driver loads no module");
  cr_expect(strstr(kn_last_error(), "loading the kernels of 'k.so'") &&
                strstr(kn_last_error(), "cuModuleLoadData"),
            "message: %s", kn_last_error());
  /* a C target's loader refuses the object: another ABI */
  fd = open(so, O_RDONLY | O_CLOEXEC);
  cr_assert_geq(fd, 0);
  st = kn__ind_load_fd(fd, false, "k.so", &call);
  close(fd);
  cr_expect_neq(st, KN_OK);
  cr_expect(strstr(kn_last_error(), "is not a kiln inductor object of ABI"), "%s", kn_last_error());
  rm_dir(dir);
}

Test(cuda_codegen, a_device_code_error_fails_with_the_nvrtc_log) {
  need_nvrtc();
  char dir[64], so[700];
  src_dir(dir, sizeof dir, "#if defined(__CUDACC__) || defined(__CUDACC_RTC__)\n"
                           "extern \"C\" __global__ void kernel1(float *out) { out[0] = undefined_name; }\n"
                           "#else\nint call(void);\nint call(void) { return 0; }\n#endif\n");
  kn__ind_tool tool;
  kn__ind_tool_init(&tool, &kn__ind_target_cuda);
  kn_status st = kn__ind_target_cuda.compile(&tool, dir, "k.c", "k.so", "k.c");
  cr_expect_neq(st, KN_OK);
  cr_expect(strstr(kn_last_error(), "NVRTC could not compile k.c for sm_90") &&
                strstr(kn_last_error(), "undefined_name"),
            "message: %s", kn_last_error());
  snprintf(so, sizeof so, "%s/k.so", dir);
  cr_expect_neq(access(so, F_OK), 0, "an object was written");
  rm_dir(dir);
}

/* ---- eager ops on CUDA tensors: single-op graphs --------------------------------------------- */
/* exp of a CUDA tensor becomes a one-node graph compiled for the GPU: on the
** fake driver (no kernels) it gets as far as loading the module, and the
** error names the op, the device and the driver's refusal. */
Test(cuda_codegen, eager_op_compiles_a_single_op_graph) {
  need_nvrtc();
  char cache[] = "/tmp/kiln-cuda-eager-XXXXXX";
  cr_assert_not_null(mkdtemp(cache));
  setenv("KILN_CACHE_DIR", cache, 1);
  kn_scope_begin();
  kn_tensor *x = NULL;
  cr_assert_eq(kn_to_device(kn_randn(1, (int64_t[]){100}, NULL, KN_FLOAT32), KN_CUDA, &x), KN_OK,
               "%s", kn_last_error());
  kn_tensor *y = kn_exp(x);
  cr_expect_null(y);
  cr_expect(strstr(kn_last_error(), "aten.exp: no CUDA kernel: the code generator cannot compile "
                                    "it (cuda:0)") &&
                strstr(kn_last_error(), "cuModuleLoadData"),
            "message: %s", kn_last_error());
  kn_scope_end();
  char cmd[200];
  snprintf(cmd, sizeof cmd, "ls %s/inductor/*.so >/dev/null 2>&1", cache);
  cr_expect_eq(run(cmd), 0, "no compiled object in the cache");
  rm_dir(cache);
}

/* An op the code generator cannot lower fails naming it and the device. */
Test(cuda_codegen, eager_op_without_lowering_fails_clearly) {
  kn_scope_begin();
  kn_tensor *x = NULL;
  cr_assert_eq(kn_to_device(kn_randn(1, (int64_t[]){10}, NULL, KN_FLOAT32), KN_CUDA, &x), KN_OK,
               "%s", kn_last_error());
  kn_tensor *y = kn_cumsum(x, 0);
  cr_expect_null(y);
  cr_expect(strstr(kn_last_error(), "aten.cumsum: no CUDA kernel: the code generator cannot "
                                    "lower it (cuda:0)"),
            "message: %s", kn_last_error());
  kn_scope_end();
}
