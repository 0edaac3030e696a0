/* A program with libgomp and without kiln, for test_ompenv: libgomp's own
** default wait policy, which kiln's choice replaces. */
#include <omp.h>
#include <stdio.h>

int main(void) {
  printf("%d\n", omp_get_max_threads());
  return 0;
}
