/*
** ops/nn_onednn.c: the oneDNN side of the nn kernels.
**
** One process-wide CPU engine (created on first use, never destroyed: it is
** a documented process-wide setting like the OpenMP pool) and the kernel
** report behind kn_nn_kernel_info (which oneDNN version and ISA, which
** OpenBLAS core and configuration). The float32 GEMM is in ops/gemm_blas.c,
** the convolution primitives and their cache in ops/nn_conv_dnnl.c.
*/
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "kiln/ops_nn.h"
#include "ops/nn_dnnl.h"

char *openblas_get_config(void);
char *openblas_get_corename(void);

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;

static void engine_init(void) { engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0); }

kn_status kn__dnnl_status(dnnl_status_t s, const char *what) {
  if (s == dnnl_success) return KN_OK;
  if (s == dnnl_out_of_memory) return kn__oom();
  return kn__error(KN_EINTERNAL, "oneDNN %s failed: %s", what, dnnl_status2str(s));
}

kn_status kn__dnnl_engine(dnnl_engine_t *out) {
  pthread_once(&engine_once, engine_init);
  *out = engine;
  return kn__dnnl_status(engine_status, "engine creation");
}

const char *kn__dnnl_isa_name(void) {
  const char *s = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
  if (!s) return "unknown";
  return strncmp(s, "cpu_isa_", 8) == 0 ? s + 8 : s;
}

static pthread_once_t info_once = PTHREAD_ONCE_INIT;
static char info[512];

static void info_init(void) {
  const dnnl_version_t *v = dnnl_version();
  const char *core = openblas_get_corename(), *cfg = openblas_get_config();
  snprintf(info, sizeof info, "float32 conv, float32 gemm per shape: onednn %d.%d.%d isa %s or "
           "openblas (KILN_GEMM); float64 gemm: openblas core %s (%s)", v->major, v->minor,
           v->patch, kn__dnnl_isa_name(), core ? core : "unknown", cfg ? cfg : "unknown");
}

const char *kn_nn_kernel_info(void) {
  pthread_once(&info_once, info_init);
  return info;
}
