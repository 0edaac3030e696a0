/*
** tests/test_pointwise_formulas.c: the pointwise formula table
** (ops/pointwise_formulas.h) covers the op table. Every op of ops.def whose
** meta function is the shared pointwise one has a row (and only those), its
** row agrees with the op's schema (in-place ops write self, operand counts,
** bool results for comparisons), and an op without a row is refused with an
** error instead of running another formula (before the table, a missing
** entry read as zeros: the add formula).
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/pointwise.h"
#include "ops/vmath.h"

static bool shared_meta(const kn__opdef *op) {
  return op->meta == kn__meta_pw_binary || op->meta == kn__meta_pw_unary;
}

Test(pointwise_formulas, every_shared_pointwise_op_has_a_row_and_no_other_op_does) {
  int rows = 0;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    const kn__pwinfo *pi = kn__pw_info(id);
    cr_expect_eq(pi->present, shared_meta(op), "%s.%s: row %s, shared meta %s", op->name,
                 op->overload, pi->present ? "present" : "missing",
                 shared_meta(op) ? "yes" : "no");
    cr_expect_eq(op->kernel == kn__k_pw_binary || op->kernel == kn__k_pw_unary, shared_meta(op),
                 "%s: the shared meta function goes with the shared kernel", op->name);
    rows += pi->present;
  }
  cr_expect_gt(rows, 90); /* ops_pointwise.def has 97 such rows today */
}

Test(pointwise_formulas, rows_agree_with_the_schemas) {
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__pwinfo *pi = kn__pw_info(id);
    if (!pi->present) continue;
    const kn__opdef *op = &kn__ops[id];
    const kn__pwform *f = kn__pw_form(pi->code);
    bool writes_self = strstr(op->schema, "Tensor(a!) self") != NULL;
    cr_expect_eq(pi->inplace, writes_self, "%s: in-place flag", op->schema);
    cr_expect_eq(f->nin, pi->nopnds == 3 ? 1 : pi->nopnds, "%s: operands", op->schema);
    bool returns_bool_kind = pi->kind == KN__PWK_BOOL;
    cr_expect_eq(returns_bool_kind, (op->flags & KN_OPF_NONDIFF) != 0,
                 "%s: comparisons and logical ops (not differentiable) give bool", op->schema);
    cr_expect(f->bool_out == returns_bool_kind, "%s: formula %s writes bool", op->schema,
              f->name);
    cr_expect(f->classes != 0 || pi->code == KN__PW_SOFTPLUS, "%s: formula %s has no class",
              op->schema, f->name);
  }
}

/* The vector-math column names the function of the formula's own name. */
Test(pointwise_formulas, vector_math_column_matches_the_formula) {
  static const struct { kn__pwcode code; int vm; } want[] = {
      {KN__PW_EXP, KN__VM_EXP},         {KN__PW_LOG1P, KN__VM_LOG1P},
      {KN__PW_TANH, KN__VM_TANH},       {KN__PW_ERFC, KN__VM_ERFC},
      {KN__PW_GELU_TANH, KN__VM_GELU_TANH}, {KN__PW_POW, KN__VM_POW},
      {KN__PW_GELU_TANH_BW, KN__VM_GELU_TANH_BW}, {KN__PW_ADD, -1},
      {KN__PW_RELU, -1},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    cr_expect_eq(kn__pw_form(want[i].code)->vm, want[i].vm, "%s",
                 kn__pw_form(want[i].code)->name);
}

/* A call of the shared meta function or kernel for an op without a row is
** an error naming the op. */
Test(pointwise_formulas, an_op_without_a_row_is_refused) {
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(2, 2), KN_FLOAT32);
  kn__call c = {.op = &kn__ops[KN_OP_MM], .nargs = 2, .args = {KN_A_T(x), KN_A_T(x)}};
  kn__metas m;
  kn__metas_init(&m);
  cr_assert_eq(kn__meta_pw_binary(&c, &m), KN_EINVAL);
  cr_expect(strstr(kn_last_error(), "mm: no row in the pointwise formula table"), "%s",
            kn_last_error());
  kn__metas_fini(&m);
  kn__outs o;
  kn__outs_init(&o);
  cr_expect_eq(kn__k_pw_unary(&c, &o), KN_EINVAL);
  kn__outs_fini(&o);
  kn_scope_end();
}
