/* quickstart.c: eager tensors and autograd in a few lines (shown in README). */
#include <kiln/kiln.h>
#include <stdio.h>

int main(void) {
  kn_scope_begin(); /* every tensor created below is released at kn_scope_end */
  kn_tensor *x = kn_from_floats((float[]){1, 2, 3, 4}, KN_SHAPE(2, 2));
  kn_set_requires_grad(x, true);
  kn_tensor *y = kn_sum(kn_mul(kn_exp(x), x)); /* sum(exp(x) * x) */
  if (!y || kn_backward(y, NULL) != KN_OK) {
    fprintf(stderr, "error: %s\n", kn_last_error());
    kn_scope_end();
    return 1;
  }
  kn_print_tensor(y, stdout);          /* tensor(296.1456, grad_fn=<SumBackward0>) */
  kn_print_tensor(kn_grad(x), stdout); /* d/dx = exp(x) * (x + 1) */
  kn_scope_end();
  return 0;
}
