/*
** tests/support/fakenvrtc.c: a stand-in for NVRTC (libnvrtc.so) for the
** tests that run compiled CUDA programs on the fake driver (fakecuda.c,
** fakecuda_exec.c) without a GPU. Built as libkn_fakenvrtc.so, named by
** KILN_CUDA_NVRTC.
**
** It compiles nothing: the "PTX" it returns is a magic line followed by the
** CUDA source, which the fake driver builds for the host with g++ when the
** module is loaded (a source that does not compile fails there, with g++'s
** messages on stderr). It reports version 12.9 (a real NVRTC 13 on the same
** machine gives other cache keys) and no cubin or architecture list, so kiln
** takes its PTX path. The options must name an architecture
** (--gpu-architecture=...), as kiln always passes one.
*/
#include <stdlib.h>
#include <string.h>

#include "support/fakecuda.h"

#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#define API __attribute__((visibility("default")))

enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_INVALID_INPUT = 3, NVRTC_ERROR_INVALID_OPTION = 5 };

typedef struct prog {
  char *ptx; /* magic + source */
  size_t n;  /* bytes, with the final NUL */
} prog;

API const char *nvrtcGetErrorString(int r) {
  switch (r) {
  case NVRTC_SUCCESS: return "NVRTC_SUCCESS";
  case NVRTC_ERROR_INVALID_INPUT: return "NVRTC_ERROR_INVALID_INPUT";
  case NVRTC_ERROR_INVALID_OPTION: return "NVRTC_ERROR_INVALID_OPTION";
  default: return "NVRTC_ERROR unknown";
  }
}

API int nvrtcVersion(int *major, int *minor) {
  *major = 12;
  *minor = 9;
  return NVRTC_SUCCESS;
}

API int nvrtcCreateProgram(void **out, const char *src, const char *name, int nh,
                           const char *const *headers, const char *const *names) {
  (void)name, (void)headers, (void)names;
  *out = NULL;
  if (!src || nh != 0) return NVRTC_ERROR_INVALID_INPUT;
  prog *p = malloc(sizeof *p);
  size_t m = strlen(FAKE_PTX_MAGIC), n = strlen(src);
  char *ptx = p ? malloc(m + n + 1) : NULL;
  if (!ptx) {
    free(p);
    return NVRTC_ERROR_INVALID_INPUT;
  }
  memcpy(ptx, FAKE_PTX_MAGIC, m);
  memcpy(ptx + m, src, n + 1);
  p->ptx = ptx;
  p->n = m + n + 1;
  *out = p;
  return NVRTC_SUCCESS;
}

API int nvrtcCompileProgram(void *p, int n, const char *const *opts) {
  if (!p) return NVRTC_ERROR_INVALID_INPUT;
  for (int i = 0; i < n; i++)
    if (!strncmp(opts[i], "--gpu-architecture=", 19)) return NVRTC_SUCCESS;
  return NVRTC_ERROR_INVALID_OPTION;
}

API int nvrtcGetProgramLogSize(void *p, size_t *n) {
  (void)p;
  *n = 1;
  return NVRTC_SUCCESS;
}

API int nvrtcGetProgramLog(void *p, char *log) {
  (void)p;
  log[0] = '\0';
  return NVRTC_SUCCESS;
}

API int nvrtcGetPTXSize(void *p, size_t *n) {
  *n = ((prog *)p)->n;
  return NVRTC_SUCCESS;
}

API int nvrtcGetPTX(void *p, char *out) {
  memcpy(out, ((prog *)p)->ptx, ((prog *)p)->n);
  return NVRTC_SUCCESS;
}

API int nvrtcDestroyProgram(void **p) {
  prog *pr = *p;
  if (pr) free(pr->ptx);
  free(pr);
  *p = NULL;
  return NVRTC_SUCCESS;
}
