/*
** ops/opfacts.c: the per-op facts table (ops/ops_facts.def) as an array
** indexed by op id.
*/
#include "ops/opfacts.h"

/* Partner op ids by name, NONE for none. */
enum {
  KN__PT_NONE = -1,
#define KN_OP(ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN) \
  KN__PT_##ID = KN_OP_##ID,
#include "ops/ops.def"
#undef KN_OP
};

static const kn__opfacts facts[KN__OP_COUNT] = {
#define KN_FACT(ID, RECOMPUTE, PARTNER) [KN_OP_##ID] = {KN__RC_##RECOMPUTE, KN__PT_##PARTNER},
#include "ops/ops_facts.def"
#undef KN_FACT
};

/* Build-time check: one row per op (a duplicate row fails -Woverride-init;
** a missing one leaves KN__RC_NONE, which tests/test_op_facts.c reports by
** name). */
enum {
  KN__FACT_NROWS = 0
#define KN_FACT(ID, RECOMPUTE, PARTNER) +1
#include "ops/ops_facts.def"
#undef KN_FACT
};
_Static_assert((int)KN__FACT_NROWS == (int)KN__OP_COUNT,
               "ops/ops_facts.def must have exactly one row per op of ops/ops.def");

const kn__opfacts *kn__op_facts(int id) { return &facts[id]; }

const char *kn__recompute_name(kn__recompute rc) {
  static const char *const names[] = {"NONE", "CHEAP", "COMPUTE", "SAVE", "NEVER"};
  return (unsigned)rc < sizeof names / sizeof *names ? names[rc] : "?";
}

static const kn__repro repros[] = {
#define KN_REPRO(ID, COND, TMPL) {KN_OP_##ID, COND, TMPL, NULL},
#define KN_NO_REPRO(ID, REASON) {KN_OP_##ID, "", NULL, REASON},
#include "ops/ops_repro.def"
#undef KN_REPRO
#undef KN_NO_REPRO
};

const kn__repro *kn__op_repro(int id, int *n) {
  const size_t nr = sizeof repros / sizeof *repros;
  size_t i = 0;
  while (i < nr && repros[i].op != id) i++;
  size_t j = i;
  while (j < nr && repros[j].op == id) j++;
  *n = (int)(j - i);
  return i < nr ? &repros[i] : NULL;
}
