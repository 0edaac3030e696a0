/*
** cuda/loader.c: finding the CUDA driver with dlopen, initialising the
** device (once per process), making its primary context current on each
** calling thread, and the driver's error messages.
*/
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_int.h"
#include "logging/log.h"

static kn__cuda_rt rt;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static kn_status init_status;
static char init_msg[KN__ERROR_CAP];
static _Thread_local bool ctx_current;

kn__cuda_rt *kn__cuda_rt_get(void) { return &rt; }

const char *kn__cu_errstr(int r, char *buf, size_t n) {
  const char *name = NULL, *text = NULL;
  if (rt.cu.GetErrorName) rt.cu.GetErrorName(r, &name);
  if (rt.cu.GetErrorString) rt.cu.GetErrorString(r, &text);
  if (name && text) snprintf(buf, n, "%s (%s)", name, text);
  else snprintf(buf, n, "CUDA error %d (unknown to the driver)", r);
  return buf;
}

kn_status kn__cu_check(int r, const char *call) {
  if (r == KN__CU_SUCCESS) return KN_OK;
  char e[320];
  kn__cu_errstr(r, e, sizeof e);
  kn_status s = r == KN__CU_ERROR_OUT_OF_MEMORY ? KN_ENOMEM : KN_EINTERNAL;
  return kn__error(s, "CUDA driver call %s failed: %s", call, e);
}

void *kn__cuda_dlopen(const char *env, const char *const *sonames, char *path, size_t npath,
                      char *why, size_t nwhy) {
  const char *given = getenv(env);
  why[0] = '\0';
  if (given && given[0]) {
    void *h = dlopen(given, RTLD_NOW | RTLD_LOCAL);
    if (h) snprintf(path, npath, "%s", given);
    else snprintf(why, nwhy, "%s=%s: %s", env, given, dlerror());
    return h;
  }
  size_t used = 0;
  for (size_t i = 0; sonames[i]; i++) {
    void *h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      snprintf(path, npath, "%s", sonames[i]);
      return h;
    }
    if (used < nwhy)
      used += (size_t)snprintf(why + used, nwhy - used, "%s%s", i ? "; " : "", dlerror());
  }
  if (used < nwhy) snprintf(why + used, nwhy - used, " (set %s to the library's path)", env);
  return NULL;
}

bool kn__cuda_dlsyms(void *lib, void **table, const char *const *names, const bool *req,
                     size_t nfn, char *why, size_t nwhy) {
  for (size_t i = 0; i < nfn; i++) {
    table[i] = dlsym(lib, names[i]);
    if (!table[i] && req[i]) {
      snprintf(why, nwhy, "the library has no %s (too old a version?)", names[i]);
      return false;
    }
  }
  return true;
}

#define KN__FN_NAME(field, sym, req, ret, args) sym,
#define KN__FN_REQ(field, sym, req, ret, args) req,
static const char *const cu_names[] = {KN__CU_FUNCS(KN__FN_NAME)};
static const bool cu_req[] = {KN__CU_FUNCS(KN__FN_REQ)};
#undef KN__FN_NAME
#undef KN__FN_REQ

/* init_fail: record the failure of initialisation (prefixed "no CUDA
** driver/GPU found: " when there is no usable driver or device). */
static void init_fail(kn_status s, bool no_gpu, const char *fmt, const char *what) {
  char body[KN__ERROR_CAP - 64];
  snprintf(body, sizeof body, fmt, what);
  snprintf(init_msg, sizeof init_msg, "%s%s", no_gpu ? "no CUDA driver/GPU found: " : "", body);
  init_status = s;
}

static bool load_driver(void) {
  static const char *const sonames[] = {"libcuda.so.1", "libcuda.so", NULL};
  char why[1024];
  void *lib = kn__cuda_dlopen("KILN_CUDA_DRIVER", sonames, rt.driver_path,
                              sizeof rt.driver_path, why, sizeof why);
  if (!lib) {
    init_fail(KN_EUNSUPPORTED, true, "cannot load the CUDA driver: %s", why);
    return false;
  }
  if (!kn__cuda_dlsyms(lib, (void **)&rt.cu, cu_names, cu_req, sizeof cu_names / sizeof *cu_names,
                       why, sizeof why)) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%.500s: %.600s", rt.driver_path, why);
    memset(&rt.cu, 0, sizeof rt.cu);
    init_fail(KN_EUNSUPPORTED, true, "unusable CUDA driver %s", msg);
    return false;
  }
  return true;
}

/* drv: a driver call during initialisation; false (recorded) on failure. */
static bool drv(int r, const char *call, bool no_gpu) {
  if (r == KN__CU_SUCCESS) return true;
  char e[320], msg[512];
  snprintf(msg, sizeof msg, "%s failed: %s", call, kn__cu_errstr(r, e, sizeof e));
  init_fail(no_gpu ? KN_EUNSUPPORTED : KN_EINTERNAL, no_gpu, "%s", msg);
  return false;
}

static bool pick_device(void) {
  const char *env = getenv("KILN_CUDA_DEVICE");
  int count = 0;
  if (!drv(rt.cu.Init(0), "cuInit", true)) return false;
  if (!drv(rt.cu.DeviceGetCount(&count), "cuDeviceGetCount", true)) return false;
  if (count <= 0) {
    init_fail(KN_EUNSUPPORTED, true, "%s", "the CUDA driver reports no device");
    return false;
  }
  char *end = NULL;
  long ord = env && env[0] ? strtol(env, &end, 10) : 0;
  if ((env && env[0] && *end) || ord < 0 || ord >= count) {
    char msg[256];
    snprintf(msg, sizeof msg, "KILN_CUDA_DEVICE=%s: expected a device index from 0 to %d (%d device%s)",
             env, count - 1, count, count == 1 ? "" : "s");
    init_fail(KN_EINVAL, false, "%s", msg);
    return false;
  }
  rt.ordinal = (int)ord;
  return drv(rt.cu.DeviceGet(&rt.device, rt.ordinal), "cuDeviceGet", false);
}

static bool describe_device(void) {
  int major = 0, minor = 0;
  if (!drv(rt.cu.DeviceGetName(rt.name, (int)sizeof rt.name, rt.device), "cuDeviceGetName", false) ||
      !drv(rt.cu.DeviceGetAttribute(&major, KN__CU_ATTR_CC_MAJOR, rt.device), "cuDeviceGetAttribute",
           false) ||
      !drv(rt.cu.DeviceGetAttribute(&minor, KN__CU_ATTR_CC_MINOR, rt.device), "cuDeviceGetAttribute",
           false) ||
      !drv(rt.cu.DeviceGetAttribute(&rt.sms, KN__CU_ATTR_SM_COUNT, rt.device), "cuDeviceGetAttribute",
           false) ||
      !drv(rt.cu.DeviceTotalMem(&rt.total_mem, rt.device), "cuDeviceTotalMem_v2", false) ||
      !drv(rt.cu.DriverGetVersion(&rt.driver_version), "cuDriverGetVersion", false))
    return false;
  rt.name[sizeof rt.name - 1] = '\0';
  rt.arch = major * 10 + minor;
  return true;
}

static void init_once_fn(void) {
  init_status = KN_OK;
  if (!load_driver() || !pick_device() || !describe_device()) return;
  if (!drv(rt.cu.PrimaryCtxRetain(&rt.ctx, rt.device), "cuDevicePrimaryCtxRetain", false) ||
      !drv(rt.cu.CtxSetCurrent(rt.ctx), "cuCtxSetCurrent", false) ||
      !drv(rt.cu.StreamCreate(&rt.stream, KN__CU_STREAM_NON_BLOCKING), "cuStreamCreate", false)) {
    rt.ctx = NULL;
    return;
  }
  KN_LOG(KN_LOG_CUDA, KN_INFO,
         "cuda:%d %s, sm_%d, %d SMs, %.1f GiB, driver %d.%d (%s)", rt.ordinal, rt.name, rt.arch,
         rt.sms, (double)rt.total_mem / (1024.0 * 1024.0 * 1024.0), rt.driver_version / 1000,
         rt.driver_version % 1000 / 10, rt.driver_path);
}

kn_status kn__cuda_init(void) {
  pthread_once(&init_once, init_once_fn);
  if (init_status != KN_OK) return kn__error(init_status, "%s", init_msg);
  return KN_OK;
}

bool kn__cuda_available(void) {
  pthread_once(&init_once, init_once_fn);
  return init_status == KN_OK;
}

kn_status kn__cuda_enter(void) {
  if (ctx_current) return KN_OK;
  kn_status s = kn__cuda_init();
  if (s != KN_OK) return s;
  s = kn__cu_check(rt.cu.CtxSetCurrent(rt.ctx), "cuCtxSetCurrent");
  if (s == KN_OK) ctx_current = true;
  return s;
}

int kn__cuda_arch(void) { return kn__cuda_available() ? rt.arch : 0; }
const char *kn__cuda_device_name(void) { return kn__cuda_available() ? rt.name : ""; }
int kn__cuda_sm_count(void) { return kn__cuda_available() ? rt.sms : 0; }
int kn__cuda_device_index(void) { return kn__cuda_available() ? rt.ordinal : 0; }
