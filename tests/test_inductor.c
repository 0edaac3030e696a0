/*
** tests/test_inductor.c: the "inductor" backend end to end: the seed's
** example_fn and small graphs give eager's results, fusion leaves one
** kernel per chain, views and broadcasts are read through their strides,
** unlowered ops run as extern calls, dynamic sizes share one program,
** compiler failures are clean errors, and generated code escapes names.
*/
#include "inductor_util.h"

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *out = kn_mul(a, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
  return kn_add(out, kn_ones(KN_SHAPE(1000, 1000), KN_FLOAT32));
}

static kn_compile_options ind_opts(void) {
  return (kn_compile_options){.backend = "inductor"};
}

Test(inductor, example_fn_matches_eager) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn_compile_options o = ind_opts();
  kn_compiled *f = KN_COMPILE(example_fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(1000, 1000), NULL, KN_FLOAT32);
  kn_tensor *got = kn_call_t(f, a);
  cr_expect(ind_close(got, example_fn(a), 0, 0, "example_fn"));
  kn_scope_end();
  kn_compiled_free(f);
  cr_expect_eq(ind_count(dir, ".so"), 1);
  ind_rm(dir);
}
