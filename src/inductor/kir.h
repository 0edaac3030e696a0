/*
** inductor/kir.h: the kernel IR, between the scheduler's plan and a target
** (internal to src/inductor; see docs/INDUCTOR.md, "Kernel IR and targets").
**
** The plan (lower.c, sched.c) says which nodes share a kernel; the kernel
** IR lists, in launch order, what the generated program does:
**
**   KN__KIR_POINTWISE  one loop over an iteration space (symbolic sizes)
**                      computing one root or a horizontal set of roots;
**   KN__KIR_REDUCTION  a reduction group's kernel: rows of a space, each
**                      reduced over the masked dims (the group's members);
**   KN__KIR_EXTERN     an extern step: kiln's eager op called from the
**                      generated code;
**   KN__KIR_EPILOGUE   a pointwise kernel fused into the GEMM / convolution
**                      extern step right before it (same id; the scheduler's
**                      epilogue pass, sched_epi.c): the extern call computes
**                      its output in blocks of rows (gemm.c) and the kernel
**                      runs over each block (rows [r0, r1) of its space)
**                      while it is in cache. Its fields are a pointwise
**                      kernel's; step is the extern's. The memory plan
**                      writes its output over the GEMM's output when
**                      nothing else reads that (the GEMM is then computed
**                      in the output's buffer and never exists apart), and
**                      places every buffer event of the step on this item.
**
** Each kernel item names the buffers (value slots) it reads, with their
** sizes and strides (a size-1 or missing leading dim is a broadcast), the
** buffers it writes, and the nodes it computes: the fused element
** expression trees, whose leaves are its reads, constants and scalars, and
** whose inner nodes are the plan's formulas (formula.c); a reduction
** group's combine is its members' row of the reduction table
** (ops/reduce_table.def).
**
** Memory planning (kn__kir_plan_memory) is a pass of its own over that
** list: liveness (the last item reading each slot), buffers freed after
** their last use, outputs written in place over an input that dies in the
** kernel, and outputs taking over the buffer of a dead slot of the same
** sizes and dtype. Its result is lifetime events on the items; a target
** prints them, deciding nothing. kn__kir_verify checks an IR,
** kn__kir_print dumps it (the kernel_ir log artifact).
*/
#ifndef KN_INDUCTOR_KIR_H
#define KN_INDUCTOR_KIR_H

#include "inductor/inductor.h"

typedef enum kn__kir_kind {
  KN__KIR_POINTWISE, KN__KIR_REDUCTION, KN__KIR_EXTERN, KN__KIR_EPILOGUE
} kn__kir_kind;

/* A buffer a kernel reads: its slot and the value's metadata (dtype, sizes,
** strides, as the plan's graph has them; borrowed from the graph). */
typedef struct kn__kir_read {
  int slot;
  const kn__vmeta *m;
} kn__kir_read;

/* A buffer an item writes. from/inplace are the memory plan's: from is the
** slot whose (dead) buffer it takes over, -1 for a new allocation; inplace
** when from is a read of this kernel that dies in it (element i written
** over element i). */
typedef struct kn__kir_write {
  int slot;
  int node;    /* the node whose value it holds */
  int from;
  bool inplace;
} kn__kir_write;

typedef struct kn__kir_item {
  kn__kir_kind kind;
  int id;                 /* kernels: the node where the kernel runs (kernel<id>); extern: its node */
  int step;               /* extern, epilogue: the step index (rt->ext, rt->ext_epi) */
  int gemm;               /* epilogue: the slot of the extern's output it reads */
  int group;              /* reduction: the plan's group index; -1 otherwise */
  const kn__vmeta *space; /* kernels: the iteration sizes (a group: the space S) */
  unsigned mask;          /* reduction: bit d set when dim d is reduced */
  int nroots;             /* pointwise: roots written (horizontal set when > 1) */
  int roots[KN__HZ_MAX];  /* node indices, ascending; the last is id */
  int nnodes, *nodes;     /* kernels: the nodes computed in it (graph order) */
  int nreads;
  kn__kir_read *reads;    /* kernels: distinct buffers read; extern: slots of its arguments */
  int nwrites;
  kn__kir_write *writes;  /* slots written (pointwise: one per root, in root order) */
  /* memory plan (kn__kir_plan_memory) */
  int nfree_before, *free_before; /* dead buffers released before this item's allocations */
  int nfree_after, *free_after;   /* dead after this item, released right after it */
} kn__kir_item;

typedef struct kn__kir {
  kn__ind_plan *p;        /* borrowed: the plan (graph, formulas, groups, slots) */
  int nitems;
  kn__kir_item *items;
  int nfree_end, *free_end; /* released at the end of the call */
  bool planned;           /* kn__kir_plan_memory ran */
  /* the planning pass's tables, [nslots] each */
  int *last;              /* the item that reads the slot last; -1: none; nitems: a graph output */
  unsigned char *reusable;/* written by kernels and read by kernels only */
} kn__kir;

/* Build the IR of plan p (borrowed: it must outlive the IR) into *ir:
** items in launch order, without memory plan. KN_ENOMEM; KN_EINTERNAL
** when the plan breaks a capacity (more than KN__HZ_MAX roots). */
kn_status kn__kir_build(kn__ind_plan *p, kn__kir *ir);
/* The memory-planning pass (fills the plan fields of every item and
** free_end; may run again). KN_ENOMEM. */
kn_status kn__kir_plan_memory(kn__kir *ir);
/* Check the IR: items in graph order; every slot read is defined before
** (a graph input or constant, or written by an earlier item) and neither
** freed nor taken over since; a kernel reads at most KN__KER_MAX_READS
** buffers and has at most KN__HZ_MAX roots; reads are broadcastable to the
** kernel's space and writes have its sizes (a group's row outputs: with
** the reduced dims 1); a buffer taken over is dead and has the same sizes
** and dtype; an epilogue follows its extern step and reads its output
** with the kernel's sizes, contiguously. KN_OK, or KN_EINTERNAL with a message naming the item, the
** slot and what was expected and found. */
kn_status kn__kir_verify(const kn__kir *ir);
/* The IR as text, appended to sb (one line per item, indented lines for
** its computed nodes and lifetime events). KN_ENOMEM. */
kn_status kn__kir_print(const kn__kir *ir, kn__sb *sb);
/* Free what kn__kir_build allocated (not the plan). */
void kn__kir_free(kn__kir *ir);

/* Is item j an extern step whose epilogue is item j + 1? */
bool kn__kir_has_epilogue(const kn__kir *ir, int j);

/* Is the slot's value (m) read with exactly the kernel space's sizes,
** contiguously (element i at offset i)? */
bool kn__kir_same_elements(const kn__vmeta *space, const kn__vmeta *m);
/* Do a and b have the same dtype and sizes? */
bool kn__kir_same_layout(const kn__vmeta *a, const kn__vmeta *b);
/* Metadata of a slot's value. */
const kn__vmeta *kn__kir_slot_meta(const kn__ind_plan *p, int slot);

#endif
