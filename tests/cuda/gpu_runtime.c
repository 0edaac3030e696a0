/*
** tests/cuda/gpu_runtime.c: the CUDA runtime on a real GPU (a plain
** program, no Criterion: it runs on the GPU machine from a carried build).
** One line per check, "CUDA-CHECK <name> ok|FAIL <detail>", then a
** summary; exit 1 on any FAIL, 77 (skip) when there is no CUDA driver or
** GPU. Every result is compared with a host computation or kiln's CPU ops.
*/
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda.h"
#include "kiln/kiln.h"
#include "gpu_check.h"

/* ---- device, copies, allocator ---- */

static void check_device(void) {
  CHECK("device_info", kn__cuda_arch() >= 50 && kn__cuda_sm_count() > 0 && kn__cuda_device_name()[0],
        "arch %d, %d SMs, name '%s'", kn__cuda_arch(), kn__cuda_sm_count(), kn__cuda_device_name());
  printf("device: %s, sm_%d, %d SMs\n", kn__cuda_device_name(), kn__cuda_arch(),
         kn__cuda_sm_count());
}

static void check_copies(void) {
  size_t n = 1000003; /* odd: no size class hides an off-by-one */
  unsigned char *h = malloc(n), *back = malloc(n);
  for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 2654435761u >> 13);
  void *d1 = NULL, *d2 = NULL;
  kn_status s = kn__cuda_alloc(n, &d1);
  if (s == KN_OK) s = kn__cuda_alloc(n, &d2);
  if (s == KN_OK) s = kn__cuda_memcpy(d1, KN_CUDA, h, KN_CPU, n);
  if (s == KN_OK) s = kn__cuda_memcpy(d2, KN_CUDA, d1, KN_CUDA, n);
  if (s == KN_OK) s = kn__cuda_memcpy(back, KN_CPU, d2, KN_CUDA, n);
  CHECK_OK("copy_roundtrip", s, "");
  if (s == KN_OK) CHECK("copy_roundtrip_bytes", memcmp(h, back, n) == 0, "bytes differ");
  s = kn__cuda_memset0((char *)d2 + 100, 1000);
  if (s == KN_OK) s = kn__cuda_memcpy(back, KN_CPU, d2, KN_CUDA, n);
  bool ok = s == KN_OK && memcmp(back, h, 100) == 0 && memcmp(back + 1100, h + 1100, n - 1100) == 0;
  for (size_t i = 100; ok && i < 1100; i++) ok = back[i] == 0;
  CHECK("memset0", ok, "%s", s == KN_OK ? "wrong bytes" : kn_last_error());
  kn__cuda_free(d1);
  kn__cuda_free(d2);
  free(h);
  free(back);
}

static void check_allocator(void) {
  kn__cuda_memstats a, b, c;
  void *p = NULL, *q = NULL;
  kn__cuda_memstats_get(&a);
  kn_status s = kn__cuda_alloc(3 << 20, &p);
  kn__cuda_memstats_get(&b);
  kn__cuda_free(p);
  if (s == KN_OK) s = kn__cuda_alloc(3 << 20, &q);
  kn__cuda_memstats_get(&c);
  CHECK("alloc_reuse", s == KN_OK && q == p && c.n_malloc == b.n_malloc &&
                           b.allocated - a.allocated == (4u << 20),
        "p=%p q=%p mallocs %lld -> %lld, allocated +%zu", p, q, (long long)b.n_malloc,
        (long long)c.n_malloc, b.allocated - a.allocated);
  kn__cuda_free(q);
  s = kn__cuda_empty_cache();
  kn__cuda_memstats_get(&c);
  CHECK("empty_cache", s == KN_OK && c.reserved == c.allocated, "reserved %zu, allocated %zu",
        c.reserved, c.allocated);
  s = kn__cuda_alloc((size_t)1 << 50, &p);
  CHECK("oom_message", s == KN_ENOMEM && strstr(kn_last_error(), "CUDA out of memory"), "status %d: %s",
        s, kn_last_error());
  printf("  (the message: %s)\n", kn_last_error());
}

/* ---- NVRTC, launches, graphs ---- */

static const char *saxpy_src =
    "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

typedef struct saxpy_run {
  kn__cuda_module *mod;
  void *fn, *x, *y;
  int n;
  float *hx, *hy;
} saxpy_run;

static kn_status saxpy_setup(saxpy_run *r, int n) {
  memset(r, 0, sizeof *r);
  r->n = n;
  void *image = NULL;
  size_t nimage = 0;
  bool ptx = false;
  kn_status s = kn__cuda_compile(saxpy_src, "saxpy.cu", NULL, &image, &nimage, &ptx, NULL);
  if (s != KN_OK) return s;
  printf("  saxpy compiled to %s, %zu bytes\n", ptx ? "PTX" : "cubin", nimage);
  s = kn__cuda_module_load(image, nimage, &r->mod);
  free(image);
  if (s == KN_OK) s = kn__cuda_module_fn(r->mod, "saxpy", &r->fn);
  r->hx = malloc(sizeof(float) * (size_t)n);
  r->hy = malloc(sizeof(float) * (size_t)n);
  for (int i = 0; i < n; i++) {
    r->hx[i] = (float)(i % 1000) * 0.001f;
    r->hy[i] = (float)(i % 77) - 30.0f;
  }
  size_t bytes = sizeof(float) * (size_t)n;
  if (s == KN_OK) s = kn__cuda_alloc(bytes, &r->x);
  if (s == KN_OK) s = kn__cuda_alloc(bytes, &r->y);
  if (s == KN_OK) s = kn__cuda_memcpy(r->x, KN_CUDA, r->hx, KN_CPU, bytes);
  if (s == KN_OK) s = kn__cuda_memcpy(r->y, KN_CUDA, r->hy, KN_CPU, bytes);
  return s;
}

static kn_status saxpy_launch(saxpy_run *r, float a) {
  unsigned grid[3] = {(unsigned)(r->n + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
  void *args[] = {&a, &r->x, &r->y, &r->n};
  return kn__cuda_launch(r->fn, grid, block, 0, args);
}

/* Whether device y equals hy + times * a * hx (float arithmetic, in order). */
static bool saxpy_matches(saxpy_run *r, float a, int times, double *maxerr) {
  size_t bytes = sizeof(float) * (size_t)r->n;
  float *got = malloc(bytes);
  bool ok = kn__cuda_memcpy(got, KN_CPU, r->y, KN_CUDA, bytes) == KN_OK;
  *maxerr = 0;
  for (int i = 0; ok && i < r->n; i++) {
    float want = r->hy[i];
    for (int t = 0; t < times; t++) want = a * r->hx[i] + want;
    double e = fabs((double)got[i] - (double)want);
    if (e > *maxerr) *maxerr = e;
  }
  free(got);
  return ok && *maxerr <= 1e-5;
}

static void saxpy_free(saxpy_run *r) {
  kn__cuda_free(r->x);
  kn__cuda_free(r->y);
  kn__cuda_module_unload(r->mod);
  free(r->hx);
  free(r->hy);
}

static void check_kernels(void) {
  saxpy_run r;
  double err = 0;
  kn_status s = saxpy_setup(&r, (1 << 20) + 17);
  CHECK_OK("nvrtc_compile_load", s, "");
  if (s != KN_OK) {
    saxpy_free(&r);
    return;
  }
  s = saxpy_launch(&r, 2.5f);
  CHECK("saxpy_vs_cpu", s == KN_OK && saxpy_matches(&r, 2.5f, 1, &err), "%s max err %g",
        s == KN_OK ? "" : kn_last_error(), err);
  /* graph: capture one launch (not run while captured), replay it 3 times */
  kn__cuda_graph *g = NULL;
  s = kn__cuda_capture_begin();
  bool capt = kn__cuda_capturing();
  if (s == KN_OK) s = saxpy_launch(&r, 0.5f);
  kn_status e = kn__cuda_capture_end(&g);
  if (s == KN_OK) s = e;
  CHECK_OK("graph_capture", s, "");
  CHECK("graph_capture_flag", capt && !kn__cuda_capturing(), "capturing %d during, %d after", capt,
        kn__cuda_capturing());
  CHECK("graph_not_run_by_capture", s == KN_OK && saxpy_matches(&r, 2.5f, 1, &err), "err %g", err);
  for (int i = 0; i < 3 && s == KN_OK; i++) s = kn__cuda_graph_launch(g);
  double ms = -1;
  bool replay_ok = s == KN_OK && kn__cuda_synchronize() == KN_OK;
  if (replay_ok) {
    /* y = 2.5x + y0, then 3 x (0.5x + y): compare with the host's order */
    float *keep = malloc(sizeof(float) * (size_t)r.n);
    memcpy(keep, r.hy, sizeof(float) * (size_t)r.n);
    for (int i = 0; i < r.n; i++) r.hy[i] = 2.5f * r.hx[i] + r.hy[i];
    replay_ok = saxpy_matches(&r, 0.5f, 3, &err);
    memcpy(r.hy, keep, sizeof(float) * (size_t)r.n);
    free(keep);
  }
  CHECK("graph_replay", replay_ok, "%s err %g", s == KN_OK ? "" : kn_last_error(), err);
  s = kn__cuda_timer_start();
  for (int i = 0; i < 100 && s == KN_OK; i++) s = kn__cuda_graph_launch(g);
  if (s == KN_OK) s = kn__cuda_timer_stop(&ms);
  CHECK("timer", s == KN_OK && ms > 0, "%s %g ms", s == KN_OK ? "" : kn_last_error(), ms);
  printf("  100 graph replays of saxpy (1M floats): %.3f ms, %.2f us each\n", ms, ms * 10);
  kn__cuda_graph_free(g);
  saxpy_free(&r);
}

static void check_bad_kernel(void) {
  const char *src = "extern \"C\" __global__ void broken(float *x) { x[0] = no_such_name; }\n";
  void *image = NULL;
  size_t n = 0;
  bool ptx = false;
  kn__sb log;
  kn__sb_init(&log);
  kn_status s = kn__cuda_compile(src, "broken.cu", NULL, &image, &n, &ptx, &log);
  const char *m = kn_last_error();
  CHECK("nvrtc_error_message", s == KN_EINVAL && strstr(m, "NVRTC could not compile broken.cu") &&
                                   strstr(m, "no_such_name") && strstr(kn__sb_cstr(&log), "no_such_name"),
        "status %d: %s", s, m);
  printf("  (the message: %s)\n", m);
  kn__sb_fini(&log);
  free(image);
  kn__cuda_module *mod = NULL;
  void *fn = NULL;
  s = kn__cuda_compile(saxpy_src, "saxpy.cu", NULL, &image, &n, &ptx, NULL);
  if (s == KN_OK) s = kn__cuda_module_load(image, n, &mod);
  free(image);
  kn_status e = s == KN_OK ? kn__cuda_module_fn(mod, "nope", &fn) : s;
  CHECK("missing_kernel_name", e == KN_EINVAL && strstr(kn_last_error(), "'nope'"), "%s",
        kn_last_error());
  kn__cuda_module_unload(mod);
}

static void check_bandwidth(void) {
  size_t bytes = (size_t)256 << 20;
  void *a = NULL, *b = NULL;
  kn_status s = kn__cuda_alloc(bytes, &a);
  if (s == KN_OK) s = kn__cuda_alloc(bytes, &b);
  if (s == KN_OK) s = kn__cuda_memset0(a, bytes);
  if (s == KN_OK) s = kn__cuda_memcpy(b, KN_CUDA, a, KN_CUDA, bytes); /* warm up */
  double ms = 0;
  if (s == KN_OK) s = kn__cuda_timer_start();
  for (int i = 0; i < 20 && s == KN_OK; i++) s = kn__cuda_memcpy(b, KN_CUDA, a, KN_CUDA, bytes);
  if (s == KN_OK) s = kn__cuda_timer_stop(&ms);
  double gbs = ms > 0 ? 2.0 * (double)bytes * 20 / (ms * 1e-3) / 1e9 : 0;
  CHECK("d2d_bandwidth", s == KN_OK && gbs > 0, "%s", kn_last_error());
  printf("CUDA-BANDWIDTH d2d_copy %.1f GB/s (read+write, 256 MiB x 20)\n", gbs);
  kn__cuda_free(a);
  kn__cuda_free(b);
}

int main(void) {
  if (kn__cuda_init() != KN_OK) {
    printf("SKIP: %s\n", kn_last_error());
    return strstr(kn_last_error(), "no CUDA driver/GPU found") ? 77 : 1;
  }
  check_device();
  check_copies();
  check_allocator();
  check_kernels();
  check_bad_kernel();
  kn__gpu_check_gemms();
  kn__gpu_check_eager();
  check_bandwidth();
  return kn__gpu_check_summary("gpu_runtime");
}
