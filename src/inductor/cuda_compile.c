/*
** inductor/cuda_compile.c: the CUDA target's compile and load (target.h's
** contracts, called by the code cache on a miss / a load).
**
** compile: NVRTC (kn__cuda_compile: cubin for this device's architecture,
** or PTX) on the source's device half, then the system compiler on a small
** C file that includes the source (its host half: gcc does not define
** __CUDACC__) and holds the device image as a byte array. One shared
** object carries both, so the code cache's trust rules (the .meta's size
** and SHA-256 of the .so) cover the device code too, and its keys hold the
** device's architecture, name and NVRTC's version (kn__cu_ident in the
** compiler's identity).
** load: dlopen the object, check its ABI (103), load its image as a module
** and fill its kn_ind_fns[] with the kernels named by kn_ind_kernels[]. The
** module, like the object, stays loaded for the life of the process.
*/
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda.h"
#include "inductor/cuda_target.h"
#include "inductor/toolchain.h"
#include "logging/log.h"

#define CU_ABI 103

void kn__cu_ident(char *buf, size_t n) {
  int major = 0, minor = 0;
  if (!kn__cuda_available()) {
    snprintf(buf, n, " no CUDA device");
  } else if (kn__cuda_nvrtc_version(&major, &minor) == KN_OK) {
    snprintf(buf, n, " cuda sm_%d %s nvrtc %d.%d", kn__cuda_arch(), kn__cuda_device_name(), major,
             minor);
  } else {
    kn_clear_error(); /* the compile itself reports the missing NVRTC */
    snprintf(buf, n, " cuda sm_%d %s no NVRTC", kn__cuda_arch(), kn__cuda_device_name());
  }
}

/* The text of the file at path (owned), or NULL. */
static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  kn__sb sb;
  kn__sb_init(&sb);
  char buf[8192];
  size_t r;
  while ((r = fread(buf, 1, sizeof buf, f)) > 0) kn__sb_putn(&sb, buf, r);
  fclose(f);
  char *s = kn__sb_failed(&sb) ? NULL : kn__sb_take(&sb);
  kn__sb_fini(&sb);
  return s;
}

/* dir/<src>.host.c: the source's host half and the image's bytes. */
static kn_status write_host(const char *dir, const char *src, const unsigned char *img, size_t n,
                            bool ptx, char *name, size_t cap) {
  snprintf(name, cap, "%s.host.c", src);
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return kn__error(KN_EIO, "inductor: cannot write '%s'", path);
  fprintf(f, "#include \"%s\"\n/* the device image (%s, %zu bytes) */\n"
             "const unsigned char kn_ind_image[] = {", src, ptx ? "PTX" : "cubin", n);
  for (size_t i = 0; i < n; i++) fprintf(f, "%s%u,", i % 24 ? "" : "\n", img[i]);
  fprintf(f, "0};\nconst unsigned long kn_ind_image_size = %zu;\n", n);
  return fclose(f) ? kn__error(KN_EIO, "inductor: cannot write '%s'", path) : KN_OK;
}

kn_status kn__cu_compile(const kn__ind_tool *tool, const char *dir, const char *src,
                         const char *so, const char *shown) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, src);
  char *text = read_all(path);
  if (!text) return kn__error(KN_EIO, "inductor: cannot read '%s'", path);
  void *img = NULL;
  size_t nimg = 0;
  bool ptx = false;
  kn__sb log;
  kn__sb_init(&log);
  kn_status st = kn__cuda_compile(text, shown, NULL, &img, &nimg, &ptx, &log);
  free(text);
  if (st != KN_OK && kn__sb_cstr(&log)[0])
    KN_LOG(KN_LOG_INDUCTOR, KN_WARNING, "NVRTC failed on %s:\n%s", shown, kn__sb_cstr(&log));
  kn__sb_fini(&log);
  if (st != KN_OK) return st;
  char host[512];
  st = write_host(dir, src, img, nimg, ptx, host, sizeof host);
  free(img);
  return st == KN_OK ? kn__ind_cc(tool, dir, host, so, shown) : st;
}

/* The modules loaded, kept for the life of the process (their kernels are
** called through kn_ind_fns[] of objects that are never unloaded). */
static pthread_mutex_t loaded_mu = PTHREAD_MUTEX_INITIALIZER;
static kn__cuda_module **loaded;
static size_t nloaded, caploaded;

static bool keep_module(kn__cuda_module *m) {
  pthread_mutex_lock(&loaded_mu);
  if (nloaded == caploaded) {
    size_t cap = caploaded ? caploaded * 2 : 16;
    kn__cuda_module **nl = realloc(loaded, cap * sizeof *nl);
    if (nl) {
      loaded = nl;
      caploaded = cap;
    }
  }
  bool ok = nloaded < caploaded;
  if (ok) loaded[nloaded++] = m;
  pthread_mutex_unlock(&loaded_mu);
  return ok;
}

/* The module of h's image, kn_ind_fns[] filled from it. */
static kn_status bind_kernels(void *h, const char *shown) {
  const unsigned char *img = dlsym(h, "kn_ind_image");
  const unsigned long *nimg = dlsym(h, "kn_ind_image_size");
  const char *const *names = dlsym(h, "kn_ind_kernels");
  void **fns = dlsym(h, "kn_ind_fns");
  if (!img || !nimg || !names || !fns)
    return kn__error(KN_EIO, "inductor: '%s' has no device image or kernel table", shown);
  kn__cuda_module *m = NULL;
  kn_status st = kn__cuda_module_load(img, (size_t)*nimg, &m);
  const char *const *notes = dlsym(h, "kn_ind_kernel_notes"); /* what each computes */
  for (int k = 0; st == KN_OK && names[k]; k++) {
    st = kn__cuda_module_fn(m, names[k], &fns[k]);
    if (st == KN_OK && notes && notes[k]) kn__cuda_prof_name(fns[k], notes[k]);
  }
  if (st == KN_OK && !keep_module(m)) st = kn__oom();
  if (st != KN_OK && m) kn__cuda_module_unload(m);
  if (st != KN_OK) return kn__error(st, "inductor: loading the kernels of '%s': %s", shown,
                                    kn_last_error());
  return KN_OK; /* m stays loaded (keep_module): the kernels' functions are its */
}

kn_status kn__cu_load(int fd, bool noexec, const char *shown, kn__ind_call_fn *out) {
  void *h = NULL;
  kn_status st = kn__ind_dlopen_fd(fd, noexec, shown, &h);
  if (st != KN_OK) return st;
  int (*abi)(void) = (int (*)(void))dlsym(h, "kn_ind_abi");
  kn__ind_call_fn fn = (kn__ind_call_fn)dlsym(h, "call");
  if (!abi || !fn || abi() != CU_ABI) {
    dlclose(h);
    return kn__error(KN_EIO, "inductor: '%s' is not a kiln CUDA object of ABI %d", shown, CU_ABI);
  }
  st = bind_kernels(h, shown);
  if (st != KN_OK) {
    dlclose(h);
    return st;
  }
  *out = fn; /* the handle stays open for the life of the process */
  return KN_OK;
}
