/*
** core/cputarget.c: see cputarget.h.
*/
#include "core/cputarget.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

static char target[200];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Keep only [A-Za-z0-9._-] in s (others become '_'). */
static void token(char *s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '.' || *s == '-'))
      *s = '_';
}

#if defined(__x86_64__)
/* The register state the OS saves (XCR0), when it says so (OSXSAVE). */
static unsigned xcr0(unsigned ecx1) {
  if (!(ecx1 & (1u << 27))) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  return lo;
}

static void detect(void) {
  unsigned a, b, c, d, w[8] = {0}, max = __get_cpuid_max(0, NULL);
  char vendor[13] = {0};
  __cpuid(0, a, b, c, d);
  memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
  __cpuid(1, a, b, c, d);
  unsigned fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
  if (fam == 0xf) fam += (a >> 20) & 0xff;
  if (fam == 0x6 || fam >= 0xf) model += ((a >> 16) & 0xf) << 4;
  w[0] = c, w[1] = d;
  if (max >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    w[2] = b, w[3] = c, w[4] = d;
    if (a >= 1) __cpuid_count(7, 1, w[5], b, c, d);
  }
  if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u) __cpuid(0x80000001u, a, b, w[6], w[7]);
  token(vendor);
  snprintf(target, sizeof target, "x86_64-%s-%u.%u-%x.%x.%x.%x.%x.%x.%x.%x-%x", vendor, fam, model,
           w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], xcr0(w[0]));
}
#elif defined(__aarch64__)
static void detect(void) {
  snprintf(target, sizeof target, "aarch64-%lx.%lx", getauxval(AT_HWCAP), getauxval(AT_HWCAP2));
}
#else
static void detect(void) {
  struct utsname u;
  snprintf(target, sizeof target, "%s-unknown", uname(&u) == 0 ? u.machine : "unknown");
  token(target);
}
#endif

const char *kn__cpu_target(void) {
  pthread_once(&once, detect);
  return target;
}
