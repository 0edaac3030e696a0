/*
** inductor/lowering.c: the lowering table (inductor/lowering.def) as an
** array indexed by op id.
*/
#include "inductor/inductor.h"

static const kn__ind_lowering table[KN__OP_COUNT] = {
#define KN_LOWER(ID, CLASS, ROLE) [KN_OP_##ID] = {KN__IND_L_##CLASS, KN__IND_R_##ROLE},
#include "inductor/lowering.def"
#undef KN_LOWER
};

/* Build-time check: one row per op (a duplicate fails -Woverride-init; a
** missing one reads as KN__IND_L_NONE, which tests/test_op_facts.c reports
** by name). */
enum {
  KN__LOWER_NROWS = 0
#define KN_LOWER(ID, CLASS, ROLE) +1
#include "inductor/lowering.def"
#undef KN_LOWER
};
_Static_assert((int)KN__LOWER_NROWS == (int)KN__OP_COUNT,
               "inductor/lowering.def must have exactly one row per op of ops/ops.def");

const kn__ind_lowering *kn__ind_lowering_of(const kn__opdef *op) {
  static const kn__ind_lowering outside = {KN__IND_L_EXTERN, KN__IND_R_NONE};
  if (!op || op->id < 0 || op->id >= KN__OP_COUNT || op != &kn__ops[op->id]) return &outside;
  return &table[op->id];
}

const char *kn__ind_lclass_name(kn__ind_lclass c) {
  static const char *const names[] = {"NONE",      "FORMULA", "SELECT", "CAST",
                                      "CONSTANT",  "REDUCTION", "DECOMP", "EXTERN",
                                      "BROADCAST"};
  return (unsigned)c < sizeof names / sizeof *names ? names[c] : "?";
}

const kn__opdef *kn__ind_role_op(kn__ind_role role) {
  for (int id = 0; id < KN__OP_COUNT; id++)
    if (table[id].role == role) return &kn__ops[id];
  return NULL;
}

/* _nll_loss_target's second output holds the class indices 0 .. C-1 along
** its dim 0 (loss_nll.c): a ramp. */
int kn__ind_ramp_dim(const kn__opdef *op, int out) {
  return op == &kn__ops[KN_OP_NLL_LOSS_TARGET] && out == 1 ? 0 : -1;
}
