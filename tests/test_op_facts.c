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

/* ---- functional / in-place partners -------------------------------------------------- */

/* The argument list of a schema with the alias annotations of self and the
** result removed: "(Tensor(a!) self, Scalar other) -> Tensor(a!)" ->
** "(Tensor self, Scalar other) -> Tensor". */
static void plain_args(const char *schema, char *out, size_t n) {
  const char *p = strchr(schema, '(');
  size_t k = 0;
  for (; p && *p && k + 1 < n; p++) {
    if (!strncmp(p, "(a!)", 4)) { p += 3; continue; }
    out[k++] = *p;
  }
  out[k] = 0;
}

/* The op named name.overload in the table, or -1. */
static int find_op(const char *name, const char *overload) {
  for (int id = 0; id < KN__OP_COUNT; id++)
    if (!strcmp(kn__ops[id].name, name) && !strcmp(kn__ops[id].overload, overload)) return id;
  return -1;
}

Test(op_facts, partners_are_mutual_and_take_the_same_arguments) {
  int pairs = 0;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    int p = kn__op_facts(id)->partner;
    if (p < 0) continue;
    char q[128], qp[128], a[512], b[512];
    qname(op, q, sizeof q);
    qname(&kn__ops[p], qp, sizeof qp);
    cr_expect_eq(kn__op_facts(p)->partner, id, "op %s names partner %s, whose partner is not %s",
                 q, qp, q);
    cr_expect_neq(op->flags & KN_OPF_INPLACE, kn__ops[p].flags & KN_OPF_INPLACE,
                  "op %s and its partner %s must be one in-place, one functional", q, qp);
    plain_args(op->schema, a, sizeof a);
    plain_args(kn__ops[p].schema, b, sizeof b);
    cr_expect_str_eq(a, b, "op %s and its partner %s take other arguments", q, qp);
    pairs += (op->flags & KN_OPF_INPLACE) != 0;
  }
  cr_expect_geq(pairs, 27); /* 27 in-place ops of the table have a functional op today */
}

/* Every in-place op whose torch functional form (its name without the
** trailing '_', same overload) is in the table is partnered with it, and
** the reverse; the in-place ops without one are exactly those torch's
** functional form of which kiln does not define (copy, fill, zero) and
** kiln's own _setitem ops. */
Test(op_facts, every_inplace_op_has_its_functional_partner) {
  static const char *const none[] = {"copy_", "fill_", "zero_", "_setitem_slice_",
                                     "_setitem_select_"};
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    if (!(op->flags & KN_OPF_INPLACE)) continue;
    char q[128], base[96];
    qname(op, q, sizeof q);
    size_t l = strlen(op->name);
    snprintf(base, sizeof base, "%.*s", (int)(l - 1), op->name);
    int f = find_op(base, op->overload);
    char a[512], b[512];
    plain_args(op->schema, a, sizeof a);
    if (f >= 0) plain_args(kn__ops[f].schema, b, sizeof b);
    if (f >= 0 && !(kn__ops[f].flags & KN_OPF_INPLACE) && !strcmp(a, b))
      cr_expect_eq(kn__op_facts(id)->partner, f, "in-place op %s lacks its functional partner "
                   "%s.%s", q, base, op->overload);
    bool listed = false;
    for (size_t k = 0; k < sizeof none / sizeof *none; k++) listed |= !strcmp(op->name, none[k]);
    cr_expect_eq(kn__op_facts(id)->partner < 0, listed,
                 "in-place op %s: partner %s, expected %s", q,
                 kn__op_facts(id)->partner < 0 ? "none" : "present",
                 listed ? "none (torch's functional form is not in the table)" : "one");
  }
  /* pow_.Scalar's functional op is pow.Tensor_Scalar (pow.Scalar is
  ** Scalar ** Tensor) */
  cr_expect_eq(kn__op_facts(KN_OP_POW_SCALAR_)->partner, KN_OP_POW_SCALAR);
  cr_expect_eq(kn__op_facts(KN_OP_POW_SELF_SCALAR)->partner, -1);
  cr_expect_eq(kn__op_facts(KN_OP_INDEX_PUT_)->partner, KN_OP_INDEX_PUT);
}
