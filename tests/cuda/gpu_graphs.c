/*
** tests/cuda/gpu_graphs.c: mode "reduce-overhead" (CUDA graphs) on a GPU:
** compiled graphs replayed by the driver against eager kiln on the CPU, the
** documented output aliasing, one recording per size, and the trace of one
** call against seed test_cudagraphs' record sequence. One line per check
** ("CUDA-CHECK graphs.<name> ok|FAIL ..."); exit 77 without a CUDA driver
** or GPU. The same program runs on the fake driver (KILN_CUDA_DRIVER and
** KILN_CUDA_NVRTC naming tests/libkn_fakecuda.so and libkn_fakenvrtc.so).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda.h"
#include "gpu_check.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "../support/ten_ops.h"

static kn_tensor *dev(kn_tensor *t, kn_device d) {
  kn_tensor *o = NULL;
  return kn_to_device(t, d, &o) == KN_OK ? o : NULL;
}

/* got (any device) equals eager ten_ops(a, b) on the CPU. */
static bool matches(kn_tensor *got, kn_tensor *a, kn_tensor *b) {
  kn_tensor *g = got ? dev(got, KN_CPU) : NULL, *w = kn_contiguous(ten_ops(a, b));
  bool ok = g && kn_numel(g) == kn_numel(w);
  for (int64_t i = 0; ok && i < kn_numel(w); i++) {
    float x = ((const float *)kn_data(g))[i], y = ((const float *)kn_data(w))[i];
    ok = fabsf(x - y) <= 1e-5f + 1e-5f * fabsf(y);
  }
  return ok;
}

static kn_compiled *compile_ro(void) {
  return KN_COMPILE(ten_ops, &(kn_compile_options){.backend = "inductor",
                                                   .mode = "reduce-overhead"});
}

static void check_replays(void) {
  kn_scope_begin();
  kn_compiled *f = compile_ro();
  bool ok = f != NULL;
  for (int k = 0; ok && k < 6; k++) {
    kn_tensor *a = kn_randn(2, (int64_t[]){256, 256}, NULL, KN_FLOAT32);
    kn_tensor *b = kn_randn(2, (int64_t[]){256, 256}, NULL, KN_FLOAT32);
    ok = matches(kn_call_t(f, dev(a, KN_CUDA), dev(b, KN_CUDA)), a, b);
  }
  CHECK("graphs.replays_match_cpu", ok, "%s", kn_last_error());
  kn_compiled_free(f);
  kn_scope_end();
}

static void check_aliasing(void) {
  kn_scope_begin();
  kn_compiled *f = compile_ro();
  int64_t sz[1] = {1000};
  kn_tensor *a1 = kn_randn(1, sz, NULL, KN_FLOAT32), *b1 = kn_randn(1, sz, NULL, KN_FLOAT32);
  kn_tensor *a2 = kn_randn(1, sz, NULL, KN_FLOAT32), *b2 = kn_randn(1, sz, NULL, KN_FLOAT32);
  kn_tensor *y1 = NULL, *y2 = NULL, *kept = NULL;
  if (f && kn_call_t(f, dev(a1, KN_CUDA), dev(b1, KN_CUDA))) { /* warm-up */
    y1 = kn_call_t(f, dev(a1, KN_CUDA), dev(b1, KN_CUDA));
    kept = y1 ? kn_clone(y1) : NULL;
    y2 = kn_call_t(f, dev(a2, KN_CUDA), dev(b2, KN_CUDA));
  }
  bool ok = y1 && y2 && kept && kn_same_storage(y1, y2) && matches(y1, a2, b2) &&
            matches(y2, a2, b2) && matches(kept, a1, b1);
  CHECK("graphs.outputs_alias_static_outputs", ok, "%s", kn_last_error());
  kn_compiled_free(f);
  kn_scope_end();
}

static void check_sizes(void) {
  kn_scope_begin();
  kn_compiled *f = compile_ro();
  int64_t rows[] = {64, 64, 96, 96, 80, 80, 96, 64, 64, 80};
  bool ok = f != NULL;
  for (int k = 0; ok && k < 10; k++) {
    kn_tensor *a = kn_randn(2, (int64_t[]){rows[k], 32}, NULL, KN_FLOAT32);
    kn_tensor *b = kn_randn(2, (int64_t[]){rows[k], 32}, NULL, KN_FLOAT32);
    ok = matches(kn_call_t(f, dev(a, KN_CUDA), dev(b, KN_CUDA)), a, b);
  }
  CHECK("graphs.each_size_records_and_replays", ok, "%s", kn_last_error());
  kn_compiled_free(f);
  kn_scope_end();
}

/* ---- the seed's test_cudagraphs ------------------------------------------------- */

static kn_tensor *inductor_schedule_fn(kn_tensor *a) {
  kn_tensor *ones = kn_name(kn_pow_scalar(a, kn_float(0)), "ones");
  return kn_name(kn_add(a, ones), "output");
}

/* The record names of the trace file at path, one per line ("artifact:"
** and the artifact's name for artifacts), without chromium_event and str
** records (the seed's harness filters them too). */
static void record_names(const char *path, char *out, size_t n) {
  FILE *f = fopen(path, "r");
  char line[65536];
  size_t len = 0;
  out[0] = '\0';
  while (f && fgets(line, sizeof line, f)) {
    char *rec = line[0] == '\t' ? NULL : strstr(line, "] {\"");
    if (!rec) continue;
    char *key = rec + 4, *end = strchr(key, '"');
    char *name = strstr(line, "\"artifact\": {\"name\": \"");
    if (name) {
      name += 22;
      int nl = (int)(strchr(name, '"') - name);
      len += (size_t)snprintf(out + len, n - len, "artifact:%.*s\n", nl, name);
    } else if (end && strncmp(key, "chromium_event\"", 15) && strncmp(key, "str\"", 4)) {
      len += (size_t)snprintf(out + len, n - len, "%.*s\n", (int)(end - key), key);
    }
    if (len >= n) break;
  }
  if (f) fclose(f);
}

static void check_trace(void) {
  char dir[] = "/tmp/kiln-gpu-graphs-XXXXXX", cache[] = "/tmp/kiln-gpu-graphs-cache-XXXXXX";
  if (!mkdtemp(dir) || !mkdtemp(cache)) {
    CHECK("graphs.trace_is_seed_test_cudagraphs", false, "no temporary directory");
    return;
  }
  setenv("KILN_CACHE_DIR", cache, 1); /* a cache miss, as the seed's */
  kn_trace_enable(dir);
  kn_scope_begin();
  kn_compiled *f =
      KN_COMPILE(inductor_schedule_fn, &(kn_compile_options){.mode = "reduce-overhead"});
  kn_tensor *x = dev(kn_ones(2, (int64_t[]){1000, 1000}, KN_FLOAT32), KN_CUDA);
  kn_tensor *y = f && x ? kn_call_t(f, x) : NULL;
  bool ran = y && kn_get(y, (int64_t[]){999, 0}) == 2.0;
  kn_scope_end();
  char *path = kn_trace_file_path(), got[4096];
  kn_trace_disable();
  record_names(path ? path : "", got, sizeof got);
  static const char want[] =
      "dynamo_start\ndescribe_storage\ndescribe_tensor\ndescribe_source\ndynamo_output_graph\n"
      "artifact:before_pre_grad_graph\nartifact:after_pre_grad_graph\n"
      "artifact:aotautograd_cache_miss\nartifact:aot_forward_graph_fw_metadata\n"
      "aot_inference_graph\nartifact:torch._functorch.config\nartifact:before_joint_graph\n"
      "artifact:after_joint_graph\nartifact:fx_graph_runnable\nartifact:before_post_grad_graph\n"
      "artifact:inductor_post_grad_graph\ninductor_output_code\nartifact:triton_kernel_info\n"
      "artifact:fx_graph_cache_miss\ndynamo_cpp_guards_str\ncompilation_metrics\n"
      "compilation_metrics_runtime\n";
  CHECK("graphs.trace_is_seed_test_cudagraphs", ran && !strcmp(got, want),
        "ran %d; records:\n%s%s", ran, got, kn_last_error());
  kn_compiled_free(f);
  free(path);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, cache);
  if (system(cmd) != 0) printf("could not remove %s\n", dir);
}

int main(void) {
  if (kn__cuda_init() != KN_OK) {
    printf("SKIP: %s\n", kn_last_error());
    return strstr(kn_last_error(), "no CUDA driver/GPU found") ? 77 : 1;
  }
  printf("device: %s, sm_%d\n", kn__cuda_device_name(), kn__cuda_arch());
  kn_manual_seed(5);
  kn_compiled *bad = KN_COMPILE(ten_ops, &(kn_compile_options){.mode = "max-autotune"});
  CHECK("graphs.unknown_mode_refused",
        !bad && strstr(kn_last_error(), "Unrecognized mode=max-autotune"), "%s", kn_last_error());
  check_replays();
  check_aliasing();
  check_sizes();
  check_trace();
  return kn__gpu_check_summary("gpu_graphs");
}
