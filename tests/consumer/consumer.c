/* Uses an installed kiln: prints the version and a 2x2 tensor of ones. */
#include <kiln/kiln.h>
#include <stdio.h>

int main(void) {
  kn_tensor *t = kn_ones(KN_SHAPE(2, 2), KN_FLOAT32);
  if (!t) {
    fprintf(stderr, "error: %s\n", kn_last_error());
    return 1;
  }
  printf("kiln %s\n", kn_version());
  kn_print_tensor(t, stdout);
  kn_release(t);
  return 0;
}
