/*
** ompenv/ompenv.c: libkiln_ompenv.so, kiln's default OpenMP wait policy.
**
** libgomp's idle threads spin after each parallel region (GOMP_SPINCOUNT,
** 300000 turns by default) before they sleep. On a machine with other work
** (OpenBLAS's own threads, other processes) the spinning threads take the
** cores that work needs: kiln measured a loop of its kernels and BLAS calls
** ~3x slower, and up to 20x on a busy machine. Sleeping at once costs a
** wake-up per region instead, which on a quiet virtual machine with many
** CPUs is the whole kernel: on a 16-CPU VM a compiled 1M-element add took
** 106-162 us on 16 threads passive (334 on one) against 23-28 us with a
** short spin (GOMP_SPINCOUNT=30000), while with all 16 CPUs busy the same
** spin made an MLP training step 2.4-3.5x slower than passive (docs/KERNELS.md,
** "The wait policy"). So kiln chooses per process, when it starts
** (kn__ompenv_wait_rule): a short spin (KN__SPINCOUNT turns) where at least
** KN__SPIN_MIN_CPUS CPUs are this process's and the 1-minute load average
** is under half of them, else OMP_WAIT_POLICY=passive (idle threads sleep
** at once). OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user are left as
** they are.
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
#define _GNU_SOURCE /* setenv, sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define KN__SPINCOUNT "30000" /* libgomp's turns: ~0.8 ms at ~27 ns a turn */
#define KN__SPIN_MIN_CPUS 8

/* 0: this constructor has not run; 1: kiln set OMP_WAIT_POLICY=passive;
** 2: the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT was kept; 3: kiln set
** GOMP_SPINCOUNT=KN__SPINCOUNT (a short spin). */
__attribute__((visibility("default"))) int kn__ompenv_choice;

/* Does a process with `cpus` CPUs of its own on a machine of 1-minute load
** average `load` spin (true) or sleep at once (false)? */
__attribute__((visibility("default"))) bool kn__ompenv_wait_rule(int cpus, double load);
bool kn__ompenv_wait_rule(int cpus, double load) {
  return cpus >= KN__SPIN_MIN_CPUS && load >= 0 && load < cpus / 2.0;
}

static int own_cpus(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

/* The 1-minute load average; -1 when /proc/loadavg cannot be read (then
** no spin: the machine's state is unknown). */
static double load_1min(void) {
  FILE *f = fopen("/proc/loadavg", "r");
  double l = -1;
  if (f && fscanf(f, "%lf", &l) != 1) l = -1;
  if (f) fclose(f);
  return l;
}

__attribute__((constructor)) static void choose_wait_policy(void) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) {
    kn__ompenv_choice = 2;
    return;
  }
  if (kn__ompenv_wait_rule(own_cpus(), load_1min()))
    kn__ompenv_choice = setenv("GOMP_SPINCOUNT", KN__SPINCOUNT, 0) == 0 ? 3 : 0;
  else
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
