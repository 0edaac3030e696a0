/*
** test_shape_sym.c: shape op meta functions over symbolic sizes: views of a
** meta tensor of sizes [s0, s1] get symbolic sizes, strides and offsets
** (checked by evaluating them for other symbol values), and ops whose
** number of outputs depends on a size specialise it with a guard.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dynamic/sym.h"
#include "kiln/kiln.h"
#include "tensor/tensor.h"

static kn__shape_env *env, *prev;
static kn_sym s0, s1;
static int64_t live0;

static void setup(void) {
  live0 = kn_live_tensors();
  env = kn__shape_env_new();
  prev = kn__shape_env_set_current(env);
  cr_assert_eq(kn__shape_env_create_symbol(env, 5, 2, &s0), KN_OK);
  cr_assert_eq(kn__shape_env_create_symbol(env, 7, 2, &s1), KN_OK);
  kn_scope_begin();
}

static void teardown(void) {
  kn_scope_end();
  kn__shape_env_set_current(prev);
  kn__shape_env_free(env);
  cr_assert_eq(kn_live_tensors(), live0);
}

TestSuite(shape_sym, .init = setup, .fini = teardown);

/* A meta tensor of symbolic sizes [s0, s1] (contiguous). */
static kn_tensor *sym_input(void) {
  kn_tensor *t = kn_empty_meta(KN_SHAPE(5, 7), KN_FLOAT32);
  kn__symshape *s = calloc(1, sizeof *s);
  s->sizes[0] = s0;
  s->sizes[1] = s1;
  s->strides[0] = s1;
  s->strides[1] = kn__sym_const(1);
  s->offset = kn__sym_const(0);
  t->sym = s;
  return t;
}

/* Values of t's symbolic size/stride/offset for s0 = 9, s1 = 4. */
static const int64_t vals[] = {9, 4};
static int64_t size_at(const kn_tensor *t, int d) {
  return t->sym ? kn__sym_eval(t->sym->sizes[d], vals) : t->sizes[d];
}
static int64_t stride_at(const kn_tensor *t, int d) {
  return t->sym ? kn__sym_eval(t->sym->strides[d], vals) : t->strides[d];
}
static int64_t offset_at(const kn_tensor *t) {
  return t->sym ? kn__sym_eval(t->sym->offset, vals) : t->offset;
}

Test(shape_sym, views_keep_symbolic_geometry) {
  kn_tensor *x = sym_input();
  kn_tensor *sl = kn_slice(x, 1, 1, KN_SLICE_END, 1);
  cr_assert_not_null(sl, "%s", kn_last_error());
  cr_assert_eq(size_at(sl, 1), 3);   /* s1 - 1 */
  cr_assert_eq(kn_size(sl, 1), 6);   /* the hint */
  cr_assert_eq(offset_at(sl), 1);
  kn_tensor *st = kn_slice(x, 1, 0, KN_SLICE_END, 2);
  cr_assert_eq(size_at(st, 1), 2);   /* (s1 + 1) // 2 */
  cr_assert_eq(stride_at(st, 1), 2);
  kn_tensor *se = kn_select(x, 0, -1);
  cr_assert_eq(offset_at(se), 32);   /* (s0 - 1) * s1 */
  cr_assert_eq(kn_ndim(se), 1);
  kn_tensor *v = kn_view(x, KN_SHAPE(-1));
  cr_assert_eq(size_at(v, 0), 36);   /* s0 * s1 */
  kn_tensor *r = kn_reshape(x, KN_SHAPE(-1, 1));
  cr_assert_eq(size_at(r, 0), 36);
  kn_tensor *rc = kn_reshape(kn_t(x), KN_SHAPE(-1)); /* a copy, still symbolic */
  cr_assert_eq(size_at(rc, 0), 36);
  kn_tensor *tr = kn_t(x);
  cr_assert_eq(size_at(tr, 0), 4);
  cr_assert_eq(stride_at(tr, 1), 4);
  kn_tensor *e = kn_expand(kn_unsqueeze(x, 0), KN_SHAPE(3, -1, -1));
  cr_assert_eq(size_at(e, 1), 9);
  cr_assert_eq(stride_at(e, 0), 0);
  cr_assert_eq(stride_at(e, 1), 4);
  kn_tensor *dg = kn_diagonal(x, 0, 0, 1);
  cr_assert_eq(size_at(dg, 0), 4);   /* Min(s0, s1) */
  cr_assert_eq(stride_at(dg, 0), 5); /* s1 + 1 */
  kn_tensor *parts[] = {x, x};
  kn_tensor *c = kn_cat(parts, 2, 0);
  cr_assert_eq(size_at(c, 0), 18);   /* 2 * s0 */
  kn_tensor *idx = kn_empty_meta(KN_SHAPE(3), KN_INT64);
  kn_tensor *is = kn_index_select(x, 1, idx);
  cr_assert_eq(size_at(is, 0), 9);
  cr_assert_eq(size_at(is, 1), 3);
}

Test(shape_sym, unbind_specialises_with_a_guard) {
  kn_tensor *x = sym_input();
  int before = kn__shape_env_nguards(env);
  kn_tensor *o[8];
  cr_assert_eq(kn_unbind(x, 0, o, 8), 5);
  cr_assert_eq(kn__shape_env_nguards(env), before + 1);
  cr_assert_str_eq(kn__shape_env_guard_str(env, before), "Eq(s0, 5)");
  cr_assert_eq(size_at(o[4], 0), 4); /* each piece keeps s1 */
}
