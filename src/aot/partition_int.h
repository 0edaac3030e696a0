/*
** aot/partition_int.h: what a partitioner decides about each node of a
** joint graph (internal to partition*.c). partition.c builds the forward and
** backward graphs from such a plan; partition_mincut.c fills one by min-cut.
*/
#ifndef KN_AOT_PARTITION_INT_H
#define KN_AOT_PARTITION_INT_H

#include "aot/aot.h"

/* Per joint-graph node (arrays of kn__graph_num_nodes entries, borrowed). */
typedef struct kn__aot_cut {
  bool *bwd;       /* depends on a tangent: computed in the backward */
  bool *saved;     /* forward value returned by the forward and taken by the backward */
  bool *recompute; /* forward node copied into the backward (rematerialized) */
  bool *in_fw;     /* node copied into the forward graph */
} kn__aot_cut;

/* Bytes of node n's first value (sizes at their hints; 0 without metadata). */
int64_t kn__aot_node_bytes(const kn__gnode *n);

/* The min-cut choice of saved and recomputed nodes, given plan->bwd: fills
** plan->saved, plan->recompute and plan->in_fw. *usable is false when the
** graph is not eligible (in-place ops, or no finite cut): the caller then
** uses the default partition. KN_OK or KN_ENOMEM. */
kn_status kn__aot_mincut_plan(const kn__aot_joint *j, kn__aot_cut *plan, bool *usable);

#endif
