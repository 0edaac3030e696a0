/* A function returning nothing. */
#include "kiln/compile.h"
static void nothing(kn_tensor *a) { (void)a; }
kn_compiled *make(void);
kn_compiled *make(void) { return KN_COMPILE(nothing, NULL); }
