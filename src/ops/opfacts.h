/*
** ops/opfacts.h: the per-op facts kept beside the op table (internal).
**
** Each op of ops/ops.def has one row in ops/ops_facts.def, keyed by its op
** id, stating what the layers above would otherwise each decide by name:
** the recompute class that both the AOT min-cut partitioner and inductor's
** scheduler read (one policy), the functional/in-place partner that
** functionalization follows, and (ops/ops_repro.def) how the op is written
** as a public call in fx_graph_runnable. tests/test_op_facts.c walks the op table and
** fails for any op missing a fact its flags require.
*/
#ifndef KN_OPS_OPFACTS_H
#define KN_OPS_OPFACTS_H

#include <stdbool.h>

#include "ops/opdef.h"

/* Recompute classes (see ops/ops_facts.def for what each means). */
typedef enum kn__recompute {
  KN__RC_NONE = 0,  /* no row (never valid for an op of the table) */
  KN__RC_CHEAP,
  KN__RC_COMPUTE,
  KN__RC_SAVE,
  KN__RC_NEVER,
} kn__recompute;

typedef struct kn__opfacts {
  kn__recompute recompute;
  int partner;  /* the in-place op's functional op or the reverse; -1: none */
} kn__opfacts;

/* The facts of op id (0 <= id < KN__OP_COUNT). Borrowed (static). */
const kn__opfacts *kn__op_facts(int id);
/* The name of a recompute class ("CHEAP"), for messages. Static. */
const char *kn__recompute_name(kn__recompute rc);

/* One way to write an op as a public call (ops/ops_repro.def): a
** condition and a template, or (tmpl NULL) the reason it has none. */
typedef struct kn__repro {
  int op;
  const char *cond;    /* clauses on the arguments; "" for none */
  const char *tmpl;    /* NULL: no public form */
  const char *reason;  /* no public form: why (else NULL) */
} kn__repro;

/* The repro rows of op id: sets *n to their number (0 only for an op the
** table lacks) and returns the first. Borrowed (static). */
const kn__repro *kn__op_repro(int id, int *n);

/* The partitioner's question: may the backward compute op id's result again
** from saved inputs instead of saving it (CHEAP or COMPUTE)? */
static inline bool kn__op_recomputable(int id) {
  kn__recompute rc = kn__op_facts(id)->recompute;
  return rc == KN__RC_CHEAP || rc == KN__RC_COMPUTE;
}
/* Inductor's question: is op id cheap enough to compute again in every
** pointwise reader (CHEAP)? */
static inline bool kn__op_cheap(int id) { return kn__op_facts(id)->recompute == KN__RC_CHEAP; }

#endif
