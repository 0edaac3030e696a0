/* Uses an installed kiln: prints the version and a 2x2 tensor of ones, and
** checks a float64 product (OpenBLAS: run.sh reads which kernels it took). */
#include <kiln/kiln.h>
#include <stdio.h>

int main(void) {
  kn_tensor *t = kn_ones(KN_SHAPE(2, 2), KN_FLOAT32);
  if (!t) {
    fprintf(stderr, "error: %s\n", kn_last_error());
    return 1;
  }
  kn_tensor *d = kn_ones(KN_SHAPE(8, 8), KN_FLOAT64), *p = kn_matmul(d, d);
  if (!p || kn_get(p, (int64_t[]){3, 5}) != 8.0) {
    fprintf(stderr, "error: float64 product: %s\n", p ? "wrong value" : kn_last_error());
    return 1;
  }
  kn_release(d), kn_release(p);
  printf("kiln %s\n", kn_version());
  kn_print_tensor(t, stdout);
  kn_release(t);
  return 0;
}
