/* Every accepted form compiles without a warning (-Wall -Wextra -pedantic). */
#include "kiln/compile.h"
#define T kn_tensor *
#define C const kn_tensor *
static kn_tensor *one(T a) { return a; }
static kn_tensor *eight(T a, T b, T c, T d, T e, T f, T g, T h) {
  (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h;
  return a;
}
static kn_tensor *cone(C a) { (void)a; return NULL; }
static kn_tensor *ceight(C a, C b, C c, C d, C e, C f, C g, C h) {
  (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h;
  return NULL;
}
static kn_value general(const kn_value *args, int n, void *ud) { (void)n, (void)ud; return args[0]; }
void make(kn_compiled **out);
void make(kn_compiled **out) {
  out[0] = KN_COMPILE(one, NULL);
  out[1] = KN_COMPILE(eight, NULL);
  out[2] = KN_COMPILE(cone, NULL);
  out[3] = KN_COMPILE(ceight, NULL);
  out[4] = KN_COMPILE(general, NULL);
  /* options as a compound literal: its commas are not macro arguments */
  out[5] = KN_COMPILE(one, &(kn_compile_options){.backend = "eager", .fullgraph = true});
  out[6] = KN_COMPILE(general, &(kn_compile_options){.dynamic = KN_DYNAMIC_FALSE,
                                                     .cache_size_limit = 2});
}
