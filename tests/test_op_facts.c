/*
** tests/test_op_facts.c: the per-op facts table (ops/ops_facts.def) covers
** the op table. The test walks every op of ops/ops.def and fails, naming the
** op and the fact, for any op missing a fact its flags require, or whose
** fact contradicts its flags or the pointwise formula table.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/opfacts.h"
#include "ops/pointwise.h"

static const char *qname(const kn__opdef *op, char *buf, size_t n) {
  snprintf(buf, n, "%s%s%s", op->name, *op->overload ? "." : "", op->overload);
  return buf;
}

/* ---- recompute class ----------------------------------------------------------- */

Test(op_facts, every_op_has_a_recompute_class) {
  for (int id = 0; id < KN__OP_COUNT; id++) {
    char q[128];
    cr_expect_neq(kn__op_facts(id)->recompute, KN__RC_NONE,
                  "op %s has no recompute class (a row in ops/ops_facts.def)",
                  qname(&kn__ops[id], q, sizeof q));
  }
}

Test(op_facts, recompute_class_agrees_with_the_flags) {
  const uint32_t unsafe = KN_OPF_RANDOM | KN_OPF_INPLACE | KN_OPF_DATA_DEP;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    kn__recompute rc = kn__op_facts(id)->recompute;
    char q[128];
    qname(op, q, sizeof q);
    if (op->flags & unsafe)
      cr_expect_eq(rc, KN__RC_NEVER, "op %s is random, in-place or data-dependent: recompute "
                   "class must be NEVER, found %s", q, kn__recompute_name(rc));
    else
      cr_expect_neq(rc, KN__RC_NEVER, "op %s: recompute class NEVER needs a reason in its flags "
                    "(random, in-place, data-dependent)", q);
    if ((op->flags & KN_OPF_VIEW) && !(op->flags & unsafe))
      cr_expect_eq(rc, KN__RC_CHEAP, "view op %s: recompute class must be CHEAP, found %s", q,
                   kn__recompute_name(rc));
  }
}

/* A pointwise op of the formula table is CHEAP exactly when its formula is
** memory-bound (the eager kernels' own measure), else COMPUTE. */
Test(op_facts, pointwise_recompute_class_follows_the_formula_table) {
  int n = 0;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__pwinfo *pi = kn__pw_info(id);
    if (!pi->present || pi->inplace) continue;
    char q[128];
    kn__recompute want = kn__pw_form(pi->code)->memory_bound ? KN__RC_CHEAP : KN__RC_COMPUTE;
    cr_expect_eq(kn__op_facts(id)->recompute, want, "op %s: formula %s wants recompute class "
                 "%s, found %s", qname(&kn__ops[id], q, sizeof q), kn__pw_form(pi->code)->name,
                 kn__recompute_name(want), kn__recompute_name(kn__op_facts(id)->recompute));
    n++;
  }
  cr_expect_gt(n, 60); /* 66 functional rows of KN__PW_OPS today */
}

/* Literal classes of well-known ops (what torch's min-cut partitioner does
** with them: pointwise and shape ops recomputed, GEMMs and reductions saved,
** random ops never recomputed). */
Test(op_facts, recompute_class_of_known_ops) {
  struct { int id; kn__recompute rc; } want[] = {
      {KN_OP_ADD, KN__RC_CHEAP},       {KN_OP_RELU, KN__RC_CHEAP},
      {KN_OP_WHERE, KN__RC_CHEAP},     {KN_OP_TO_COPY, KN__RC_CHEAP},
      {KN_OP_FULL, KN__RC_CHEAP},      {KN_OP_RESHAPE, KN__RC_CHEAP},
      {KN_OP_VIEW, KN__RC_CHEAP},      {KN_OP_EXP, KN__RC_COMPUTE},
      {KN_OP_TANH, KN__RC_COMPUTE},    {KN_OP_DIV, KN__RC_COMPUTE},
      {KN_OP_MM, KN__RC_SAVE},         {KN_OP_ADDMM, KN__RC_SAVE},
      {KN_OP_SUM_DIM, KN__RC_SAVE},    {KN_OP_SOFTMAX, KN__RC_SAVE},
      {KN_OP_DROPOUT, KN__RC_NEVER},   {KN_OP_RANDN, KN__RC_NEVER},
      {KN_OP_NONZERO, KN__RC_NEVER},   {KN_OP_ADD_, KN__RC_NEVER},
  };
  for (size_t k = 0; k < sizeof want / sizeof *want; k++)
    cr_expect_eq(kn__op_facts(want[k].id)->recompute, want[k].rc, "%s: want %s, found %s",
                 kn__ops[want[k].id].name, kn__recompute_name(want[k].rc),
                 kn__recompute_name(kn__op_facts(want[k].id)->recompute));
  cr_expect(kn__op_recomputable(KN_OP_EXP) && !kn__op_cheap(KN_OP_EXP));
  cr_expect(kn__op_recomputable(KN_OP_ADD) && kn__op_cheap(KN_OP_ADD));
  cr_expect(!kn__op_recomputable(KN_OP_MM) && !kn__op_recomputable(KN_OP_DROPOUT));
}
