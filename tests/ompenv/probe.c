/* A program linked with the shared libkiln, for test_ompenv: libgomp prints
** its settings at start-up (OMP_DISPLAY_ENV), before main runs. */
#include <stdio.h>

#include "kiln/kiln.h"

int main(void) {
  printf("kiln %s\n", kn_version());
  return 0;
}
