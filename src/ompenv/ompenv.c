/*
** ompenv/ompenv.c: libkiln_ompenv.so, kiln's default OpenMP wait policy.
**
** libgomp's idle threads spin after each parallel region (GOMP_SPINCOUNT,
** 300000 turns by default) before they sleep. On a machine with other work
** (OpenBLAS's own threads, other processes) the spinning threads take the
** cores that work needs: kiln measured a loop of its kernels and BLAS calls
** ~3x slower, and up to 20x on a busy machine. kiln therefore chooses
** OMP_WAIT_POLICY=passive (idle threads sleep at once) unless the user set
** OMP_WAIT_POLICY or GOMP_SPINCOUNT, which are left as they are.
**
** libgomp reads its environment once, in its own constructor, which the
** dynamic loader runs before the constructors of any library that depends
** on libgomp, libkiln included. So the choice lives in this separate
** library, which depends on libc only and is linked after libgomp and
** oneDNN (which uses libgomp) wherever kiln is linked (libkiln.so, and
** programs linking libkiln.a). The loader initialises first the library it
** meets last (breadth first over the DT_NEEDED lists, each object's
** dependencies before the object), so this one runs before libgomp, which
** then reads the setting. It is not part of the libkiln objects
** (CMakeLists.txt builds it on its own).
*/
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>

/* 0: this constructor has not run; 1: kiln set OMP_WAIT_POLICY=passive;
** 2: the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT was kept. */
__attribute__((visibility("default"))) int kn__ompenv_choice;

__attribute__((constructor)) static void choose_wait_policy(void) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) {
    kn__ompenv_choice = 2;
    return;
  }
  kn__ompenv_choice = setenv("OMP_WAIT_POLICY", "passive", 0) == 0 ? 1 : 0;
}

/* The OpenBLAS core this library set (OPENBLAS_CORETYPE), "" when it set
** none: the user's setting was kept (kn__ompenv_blas_kept 1), or the CPU is
** left to OpenBLAS. */
__attribute__((visibility("default"))) const char *kn__ompenv_blas_core = "";
__attribute__((visibility("default"))) int kn__ompenv_blas_kept;

/* OPENBLAS_CORETYPE for this CPU, NULL: OpenBLAS's own choice (always on
** CPUs other than x86). */
static const char *blas_core(void) {
#if !defined(__x86_64__) && !defined(__i386__)
  return NULL;
#else
  __builtin_cpu_init();
  if (!__builtin_cpu_is("intel")) return NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SKYLAKEX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "HASWELL";
  return NULL;
#endif
}

__attribute__((constructor)) static void choose_blas_core(void) {
  const char *user = getenv("OPENBLAS_CORETYPE");
  if (user && *user) {
    kn__ompenv_blas_kept = 1;
    return;
  }
  const char *core = blas_core();
  if (core && setenv("OPENBLAS_CORETYPE", core, 1) == 0) kn__ompenv_blas_core = core;
}
