/*
** tests/nodebug/nodebug_fn.c: a function to compile, built without debug
** info (-g0) so traces of it have no source lines (test_dynamo_srcloc.c).
*/
#include "kiln/kiln.h"

kn_tensor *nodebug_fn(kn_tensor *x);

kn_tensor *nodebug_fn(kn_tensor *x) {
  kn_tensor *y = kn_mul_scalar(x, kn_float(2));
  y = kn_add(y, x);
  return kn_neg(y);
}
