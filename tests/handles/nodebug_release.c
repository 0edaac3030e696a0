/*
** tests/handles/nodebug_release.c: code built without debug info (-g0)
** that creates and releases a tensor (test_handles.c): the places are then
** named by function only.
*/
#include "kiln/kiln.h"

kn_tensor *handles_nodebug_make_and_release(void);

kn_tensor *handles_nodebug_make_and_release(void) {
  kn_tensor *x = kn_zeros(KN_SHAPE(3), KN_FLOAT32);
  kn_release(x);
  return x; /* dead: for the caller to misuse */
}
