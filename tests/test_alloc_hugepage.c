/*
** test_alloc_hugepage.c: fresh tensor buffers of 4 MB and more are advised
** to use transparent huge pages (tensor/alloc.c), as numpy does for its
** large arrays: the mapping that holds such a buffer's data is THP-eligible
** in /proc/self/smaps ("THPeligible: 1"), which it is not by default when
** the kernel's THP mode is "madvise". Skipped where the kernel has no THP or
** has it switched off.
*/
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "tensor/tensor.h"

TestSuite(alloc_hugepage);

/* The kernel's THP mode is "always" or "madvise". */
static bool thp_available(void) {
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return false;
  char buf[128] = {0};
  bool ok = fgets(buf, sizeof buf, f) && !strstr(buf, "[never]");
  fclose(f);
  return ok;
}

/* THPeligible of the mapping holding p: 0 or 1, -1 when not found. */
static int thp_eligible(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  bool inside = false;
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
      inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    else if (inside && strncmp(line, "THPeligible:", 12) == 0)
      found = (int)strtol(line + 12, NULL, 10);
  }
  fclose(f);
  return found;
}

Test(alloc_hugepage, large_buffers_are_thp_eligible) {
  if (!thp_available()) cr_skip_test("no transparent huge pages on this kernel");
  kn__allocator_empty_cache();
  /* 16 MB plus a little: a size nothing else cached */
  kn_tensor *t = kn_empty(KN_SHAPE((4 << 20) + 1008), KN_FLOAT32);
  cr_assert_not_null(t);
  char *d = kn_data(t);
  /* a point well inside the buffer, away from its unaligned head */
  cr_expect_eq(thp_eligible(d + (8 << 20)), 1, "a 16 MB tensor's mapping is THP-eligible");
  kn_release(t);
}
