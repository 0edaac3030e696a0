/*
** cuda/nvrtc.c: compiling CUDA C with NVRTC (loaded at first use), loading
** modules and launching kernels.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_int.h"
#include "logging/log.h"

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static kn__nvrtc_api nvrtc;
static bool nvrtc_ok;
static char nvrtc_path[512];
static char nvrtc_why[1400];
static int nvrtc_major, nvrtc_minor;

#define KN__FN_NAME(field, sym, req, ret, args) sym,
#define KN__FN_REQ(field, sym, req, ret, args) req,
static const char *const nvrtc_names[] = {KN__NVRTC_FUNCS(KN__FN_NAME)};
static const bool nvrtc_req[] = {KN__NVRTC_FUNCS(KN__FN_REQ)};
#undef KN__FN_NAME
#undef KN__FN_REQ

static void nvrtc_load(void) {
  static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
  char why[1200];
  void *lib = kn__cuda_dlopen("KILN_CUDA_NVRTC", sonames, nvrtc_path, sizeof nvrtc_path, why,
                              sizeof why);
  if (!lib) {
    snprintf(nvrtc_why, sizeof nvrtc_why, "cannot load NVRTC: %s", why);
    return;
  }
  if (!kn__cuda_dlsyms(lib, (void **)&nvrtc, nvrtc_names, nvrtc_req,
                       sizeof nvrtc_names / sizeof *nvrtc_names, why, sizeof why)) {
    snprintf(nvrtc_why, sizeof nvrtc_why, "unusable NVRTC %.500s: %.800s", nvrtc_path, why);
    return;
  }
  nvrtc.Version(&nvrtc_major, &nvrtc_minor);
  KN_LOG(KN_LOG_CUDA, KN_INFO, "NVRTC %d.%d (%s)", nvrtc_major, nvrtc_minor, nvrtc_path);
  nvrtc_ok = true;
}

kn_status kn__nvrtc_get(const kn__nvrtc_api **api) {
  pthread_once(&nvrtc_once, nvrtc_load);
  *api = &nvrtc;
  return nvrtc_ok ? KN_OK : kn__error(KN_EUNSUPPORTED, "%s", nvrtc_why);
}

const char *kn__cuda_nvrtc_path(void) { return nvrtc_ok ? nvrtc_path : ""; }

kn_status kn__cuda_nvrtc_version(int *major, int *minor) {
  const kn__nvrtc_api *api = NULL;
  kn_status s = kn__nvrtc_get(&api);
  *major = s == KN_OK ? nvrtc_major : 0;
  *minor = s == KN_OK ? nvrtc_minor : 0;
  return s;
}

/* The architecture to compile for: the device's when NVRTC supports it,
** else the newest NVRTC knows below it (as PTX the driver compiles on). */
static int target_arch(const kn__nvrtc_api *api, int arch, bool *ptx_only) {
  int n = 0;
  *ptx_only = false;
  if (!api->GetNumSupportedArchs || !api->GetSupportedArchs || api->GetNumSupportedArchs(&n) ||
      n <= 0 || n > 256)
    return arch;
  int archs[256], best = 0;
  if (api->GetSupportedArchs(archs)) return arch;
  for (int i = 0; i < n; i++) {
    if (archs[i] == arch) return arch;
    if (archs[i] < arch && archs[i] > best) best = archs[i];
  }
  if (best == 0) return arch;
  *ptx_only = true;
  return best;
}

/* Split opts at blanks into argv (strings of buf, owned by the caller). */
static int split_opts(char *buf, const char **argv, int cap) {
  int n = 0;
  for (char *p = buf; *p && n < cap;) {
    while (*p == ' ' || *p == '\t' || *p == '\n') *p++ = '\0';
    if (!*p) break;
    argv[n++] = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
  }
  return n;
}

static char *program_log(const kn__nvrtc_api *api, void *prog) {
  size_t n = 0;
  if (api->GetProgramLogSize(prog, &n) || n == 0) return NULL;
  char *log = malloc(n + 1);
  if (!log) return NULL;
  if (api->GetProgramLog(prog, log)) log[0] = '\0';
  log[n] = '\0';
  return log;
}

/* The first lines of the log (at most 1,200 bytes) for the message. */
static void log_head(const char *log, char *out, size_t n) {
  size_t len = strlen(log);
  if (len + 1 <= n && len <= 1200) {
    memcpy(out, log, len + 1);
    return;
  }
  size_t cut = n - 1 < 1200 ? n - 1 : 1200;
  while (cut > 0 && log[cut] != '\n') cut--;
  snprintf(out, n, "%.*s\n...", (int)cut, log);
}

static kn_status compile_error(const kn__nvrtc_api *api, int r, void *prog, const char *name,
                               const char *arch, kn__sb *log) {
  char *text = program_log(api, prog);
  char head[1300] = "";
  if (text) log_head(text, head, sizeof head);
  if (log && text) kn__sb_puts(log, text);
  kn_status s = kn__error(KN_EINVAL, "NVRTC could not compile %s for %s: %s%s%s", name, arch,
                          api->GetErrorString(r), head[0] ? "\n" : "", head);
  free(text);
  return s;
}

static kn_status take_image(const kn__nvrtc_api *api, void *prog, bool cubin, void **image,
                            size_t *nimage) {
  size_t n = 0;
  int r = cubin ? api->GetCUBINSize(prog, &n) : api->GetPTXSize(prog, &n);
  if (r) return kn__error(KN_EINTERNAL, "NVRTC: getting the %s size: %s", cubin ? "cubin" : "PTX",
                          api->GetErrorString(r));
  char *buf = malloc(n ? n : 1);
  if (!buf) return kn__oom();
  r = cubin ? api->GetCUBIN(prog, buf) : api->GetPTX(prog, buf);
  if (r) {
    free(buf);
    return kn__error(KN_EINTERNAL, "NVRTC: getting the %s: %s", cubin ? "cubin" : "PTX",
                     api->GetErrorString(r));
  }
  *image = buf;
  *nimage = n;
  return KN_OK;
}

static kn_status compile_prog(const kn__nvrtc_api *api, void *prog, const char *name,
                              const char *opts, bool *cubin, kn__sb *log) {
  bool ptx_only = false;
  int arch = target_arch(api, kn__cuda_arch(), &ptx_only);
  *cubin = !ptx_only && api->GetCUBIN && api->GetCUBINSize;
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s_%d", *cubin ? "sm" : "compute", arch);
  char *buf = strdup(opts ? opts : "");
  if (!buf) return kn__oom();
  const char *argv[64] = {archopt, "-default-device", "-std=c++17"};
  int argc = 3 + split_opts(buf, argv + 3, 61);
  int r = api->CompileProgram(prog, argc, argv);
  free(buf);
  if (r) return compile_error(api, r, prog, name, archopt + 19, log);
  if (log) {
    char *text = program_log(api, prog);
    if (text) kn__sb_puts(log, text);
    free(text);
  }
  return KN_OK;
}

kn_status kn__cuda_compile(const char *src, const char *name, const char *opts, void **image,
                           size_t *nimage, bool *is_ptx, kn__sb *log) {
  *image = NULL;
  *nimage = 0;
  const kn__nvrtc_api *api = NULL;
  kn_status s = kn__cuda_init();
  if (s == KN_OK) s = kn__nvrtc_get(&api);
  if (s != KN_OK) return s;
  void *prog = NULL;
  int r = api->CreateProgram(&prog, src, name, 0, NULL, NULL);
  if (r) return kn__error(KN_EINTERNAL, "nvrtcCreateProgram(%s): %s", name, api->GetErrorString(r));
  bool cubin = false;
  s = compile_prog(api, prog, name, opts, &cubin, log);
  if (s == KN_OK) s = take_image(api, prog, cubin, image, nimage);
  api->DestroyProgram(&prog);
  if (is_ptx) *is_ptx = !cubin;
  return s;
}

/* ---- modules and launches ---- */

struct kn__cuda_module {
  void *mod; /* CUmodule */
};

kn_status kn__cuda_module_load(const void *image, size_t nimage, kn__cuda_module **out) {
  *out = NULL;
  (void)nimage; /* the driver reads the image's own size (ELF or NUL-ended PTX) */
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  kn__cuda_module *m = malloc(sizeof *m);
  if (!m) return kn__oom();
  s = kn__cu_check(kn__cuda_rt_get()->cu.ModuleLoadData(&m->mod, image), "cuModuleLoadData");
  if (s != KN_OK) {
    free(m);
    return s;
  }
  *out = m;
  return KN_OK;
}

kn_status kn__cuda_module_fn(kn__cuda_module *m, const char *name, void **fn) {
  *fn = NULL;
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  int r = kn__cuda_rt_get()->cu.ModuleGetFunction(fn, m->mod, name);
  if (r == KN__CU_ERROR_NOT_FOUND)
    return kn__error(KN_EINVAL, "the CUDA module has no kernel named '%s' (declared extern \"C\"?)",
                     name);
  return kn__cu_check(r, "cuModuleGetFunction");
}

void kn__cuda_module_unload(kn__cuda_module *m) {
  if (!m) return;
  if (kn__cuda_enter() == KN_OK) kn__cuda_rt_get()->cu.ModuleUnload(m->mod);
  free(m);
}

kn_status kn__cuda_launch(void *fn, const unsigned grid[3], const unsigned block[3], unsigned shmem,
                          void **args) {
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  if (shmem > 48u * 1024u && r->cu.FuncSetAttribute) {
    s = kn__cu_check(r->cu.FuncSetAttribute(fn, KN__CU_FUNC_ATTR_MAX_DYN_SHMEM, (int)shmem),
                     "cuFuncSetAttribute");
    if (s != KN_OK) return s;
  }
  int pr = kn__cuda_prof_begin();
  s = kn__cu_check(r->cu.LaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
                                      block[2], shmem, r->stream, args, NULL),
                   "cuLaunchKernel");
  kn__cuda_prof_end(pr, fn, NULL);
  return s;
}
