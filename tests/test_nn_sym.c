/*
** test_nn_sym.c: nn meta functions over symbolic sizes: with a batch size
** s0 and spatial size s1, mm/conv2d/max_pool2d produce outputs whose sizes
** are expressions (e.g. "((s1 - 1)//2) + 1"), and checks on symbolic sizes
** record guards in the shape env.
*/
#include <stdlib.h>

#include "nn_util.h"
#include "ops/opdef.h"

static kn__shape_env *env, *prev;
static int64_t live0;

static void setup(void) {
  live0 = kn_live_tensors();
  env = kn__shape_env_new();
  prev = kn__shape_env_set_current(env);
  kn_scope_begin();
}
static void teardown(void) {
  kn_scope_end();
  kn__shape_env_set_current(prev);
  kn__shape_env_free(env);
  cr_assert_eq(kn_live_tensors(), live0);
}
TestSuite(nn_sym, .init = setup, .fini = teardown);

/* A meta tensor whose sizes are the given syms (hints as concrete sizes). */
static kn_tensor *sym_meta(int nd, const kn_sym *s, kn_dtype dt) {
  int64_t hint[KN_MAX_DIMS];
  for (int d = 0; d < nd; d++) hint[d] = kn__sym_hint(s[d]);
  kn_tensor *t = kn_empty_meta(nd, hint, dt);
  kn__symshape *ss = calloc(1, sizeof *ss);
  cr_assert_not_null(ss);
  kn_sym acc = kn__sym_const(1);
  for (int d = nd - 1; d >= 0; d--) {
    ss->sizes[d] = s[d];
    ss->strides[d] = acc;
    acc = kn__sym_mul(acc, s[d]);
  }
  ss->offset = kn__sym_const(0);
  t->sym = ss;
  return t;
}

static void expect_size(const kn_tensor *t, int d, const char *want) {
  char buf[128];
  kn_sym s = t->sym ? t->sym->sizes[d] : kn__sym_const(t->sizes[d]);
  kn__sym_format(s, buf, sizeof buf);
  cr_assert_str_eq(buf, want, "dim %d: %s, want %s", d, buf, want);
}

Test(nn_sym, conv_pool_mm_sizes_are_expressions) {
  kn_sym s0, s1;
  cr_assert_eq(kn__shape_env_create_symbol(env, 4, 2, &s0), KN_OK);
  cr_assert_eq(kn__shape_env_create_symbol(env, 9, 2, &s1), KN_OK);
  kn_tensor *x = sym_meta(4, (kn_sym[]){s0, kn__sym_const(3), s1, s1}, KN_FLOAT32);
  kn_tensor *w = kn_empty_meta(KN_SHAPE(8, 3, 3, 3), KN_FLOAT32);
  kn_tensor *y = kn_conv2d(x, w, NULL, (int64_t[]){2, 2}, (int64_t[]){1, 1}, NULL, 1);
  cr_assert_not_null(y, "%s", kn_last_error());
  expect_size(y, 0, "s0");
  expect_size(y, 1, "8");
  cr_assert_eq(kn_size(y, 2), 5); /* hint: (9 + 2 - 3) // 2 + 1 */
  char buf[128];
  kn__sym_format(y->sym->sizes[2], buf, sizeof buf);
  cr_assert(strstr(buf, "s1") != NULL, "%s", buf);
  kn_tensor *p = kn_max_pool2d(x, (int64_t[]){2, 2}, NULL, NULL, NULL, false);
  cr_assert_not_null(p, "%s", kn_last_error());
  expect_size(p, 0, "s0");
  cr_assert_eq(kn_size(p, 3), 4);
  /* mm with a symbolic inner size guards Eq(s1, s1) statically; with
  ** different symbols it records a guard */
  kn_tensor *a = sym_meta(2, (kn_sym[]){s0, s1}, KN_FLOAT32);
  kn_tensor *b = sym_meta(2, (kn_sym[]){s1, kn__sym_const(5)}, KN_FLOAT32);
  kn_tensor *c = kn_mm(a, b);
  cr_assert_not_null(c, "%s", kn_last_error());
  expect_size(c, 0, "s0");
  expect_size(c, 1, "5");
  int g0 = kn__shape_env_nguards(env);
  kn_tensor *b2 = sym_meta(2, (kn_sym[]){s0, kn__sym_const(5)}, KN_FLOAT32);
  kn_tensor *bad = kn_mm(a, b2); /* hints 9 != 4: shape error naming symbols */
  cr_assert_null(bad);
  cr_assert(strstr(kn_last_error(), "(s0xs1 and s0x5)") != NULL, "%s", kn_last_error());
  cr_assert_gt(kn__shape_env_nguards(env), g0);
}
