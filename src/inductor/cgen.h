/*
** inductor/cgen.h: the element-expression machinery of codegen.c's printer,
** shared by the targets that print C-family kernels (the C targets in
** codegen.c, the CUDA target in target_cuda.c). Internal to src/inductor.
**
** A kernel context (kctx) holds one kernel item's leaves (the buffers it
** reads, named in<L>), its symbols (S<i>: the plan's size expressions it
** reads) and the state of a reduction group's passes. The functions print
** statements computing fused element trees (v<node> variables), loads
** through each leaf's strides, and the memory plan's buffer events: what
** is target-neutral. Loops, launches and the prelude are each target's.
*/
#ifndef KN_INDUCTOR_CGEN_H
#define KN_INDUCTOR_CGEN_H

#include "inductor/target.h"

/* ---- kernel context ------------------------------------------------------------ */
/* No capacity of a kernel is fixed here: the scheduler bounds what one
** kernel reads (KN__KER_MAX_READS) and the roots of a horizontal set
** (KN__HZ_MAX), the IR's verifier checks them; leaves, outputs and symbols
** are sized from the plan. The leaves are the IR item's reads, in order
** (a group's per-element outputs after them). */
typedef struct leaf { int slot; const kn__vmeta *m; } leaf;
typedef struct kctx {
  kn__ind_plan *p;
  const kn__ind_target *t;  /* the C dialect: OpenMP, vectoriser hints */
  const kn__kir_item *it;   /* the kernel's IR item */
  const kn__gnode *roots[KN__HZ_MAX]; /* pointwise kernels: the nodes written */
  int nroots;
  int *alias;               /* [capacity] pointwise kernels: leaf read through output alias[l], or -1 */
  const kn__vmeta *shape;   /* the kernel's iteration sizes */
  leaf *leaves;             /* [capacity]: every buffer read (and a group's per-element outputs) */
  int nleaves;
  bool flat;
  bool epi;                 /* an epilogue kernel: rows [r0, r1) of its space */
  bool failed;              /* out of memory */
  bool unplanned;           /* read a buffer the IR item does not list */
  unsigned char *used;      /* [nused] symbols read by this kernel */
  int nused;
  /* reduction groups */
  const kn__ind_group *g;   /* NULL outside group kernels */
  int gi;
  int depth;                /* reduced dims (nested loops) */
  bool inner;               /* emitting inside the reduced loops */
  unsigned char *done;      /* [nnodes] per-element values emitted in this pass */
  int *stash;               /* [nnodes] output kept in by a reduction pass, or -1 */
  unsigned char *stash_ready; /* [nnodes] kept value written by a finished pass */
  unsigned char *blk;       /* [nnodes] vector-math node computed for the block (vmoN[l]); NULL: none */
  kn__vmeta *outm;          /* [nmembers] contiguous layouts of the per-element outputs */
  int nouts;
  int *outs;                /* [nmembers] stored members */
  const kn__gnode *hoisted; /* node whose loads are bound to ldN_Q before its statement */
  int pf_blocks;            /* leaves [0, pf_blocks) prefetch in a pass's blocks (group_prefetch) */
  int pf_call;              /* 1 + the leaf a fused call fetches itself in those blocks; 0: none */
  bool expsum;              /* this pass's blocks are one fused exp-and-sum call each */
  /* rows pipelined (codegen_pipe.c): row o + 1's pass of pipe_lead made in
  ** row o's pass of pipe_host, reading leaf pipe_leaf; NULL: none */
  const kn__gnode *pipe_lead, *pipe_host;
  int pipe_leaf;
} kctx;

/* A context for plan p (flag arrays [nnodes + 1] x nflags, room for nouts
** group outputs); NULL on OOM. Owned by the caller: kn__cg_kctx_free. */
kctx *kn__cg_kctx_new(kn__ind_plan *p, int nflags, int nouts);
void kn__cg_kctx_free(kctx *k);
/* Is m a root of k's pointwise loop (its value the variable vM there)? */
bool kn__cg_is_root(const kctx *k, const kn__gnode *m);
/* The kernel's leaves: the IR item's reads, in order. */
void kn__cg_item_leaves(kctx *k);
/* The output a read is written in place over (the memory plan's), or -1. */
int kn__cg_inplace_output(const kn__kir_item *it, int slot);
/* KN_EINTERNAL when the kernel read an unplanned buffer, KN_ENOMEM on a
** failed buffer, else KN_OK. */
kn_status kn__cg_kernel_status(kctx *k, bool sb_failed);
/* Symbol v as text: a literal, or S<i> (marking it used). */
void kn__cg_sym_text(kctx *k, kn__sb *sb, kn_sym v);
/* The product of the first ndim sizes of the kernel's space. */
void kn__cg_numel_text(kctx *k, kn__sb *sb, int ndim);
/* Leaf offsets: "t = idx" and o<L> = 0; then dim d's index peeled off t
** and added to every leaf's offset o<L>. */
void kn__cg_offsets_begin(kctx *k, kn__sb *sb, const char *idx);
void kn__cg_offsets_dim(kctx *k, kn__sb *sb, int d);
bool kn__cg_leaf_same(const kctx *k, const kn__vmeta *m);
bool kn__cg_leaf_scalar(const kn__vmeta *m);
/* Stride of leaf l along kernel dim d (0 when broadcast). */
void kn__cg_leaf_stride(kctx *k, kn__sb *sb, const leaf *l, int d);
int kn__cg_leaf_index(kctx *k, int slot, const kn__vmeta *m);
/* Leaf li's element as a value (16-bit types widened to float). */
void kn__cg_load(kctx *k, kn__sb *sb, int li);
/* Pointwise kernels: the statements of node n's tree, producers first (a
** node computed for the block, blk set, reads its block vmoN[l]). */
void kn__cg_stmts(kctx *k, kn__sb *sb, const kn__gnode *n);
/* Operand q of node n as an expression of its compute type. */
void kn__cg_operand(kctx *k, kn__sb *sb, const kn__gnode *n, int q);
/* The stores of a pointwise kernel's roots at element `at`. */
void kn__cg_stores(const kctx *k, kn__sb *sb, const char *at);
/* A pointwise kernel's loop with its vector-math nodes computed a block at
** a time (codegen_vmblock.c): printed into sb and true, or false (nothing
** printed) when the kernel calls no vector-math function of the table. The
** context's blk flags ([nnodes + 1], after done) are its to set. */
bool kn__cg_vm_blocks(kctx *k, kn__sb *sb);
/* Node n's formula with its operands bound; the "const T vN = R((T)("
** that opens a node's value statement; hoisted conditional loads. */
void kn__cg_expand(kctx *k, kn__sb *sb, const kn__gnode *n);
void kn__cg_value_open(kn__sb *sb, const char *indent, const kn__gnode *n);
void kn__cg_hoist_loads(kctx *k, kn__sb *sb, const kn__gnode *n);
/* The end of a statement comment (op and node names, comment-safe), and a
** comment-safe name. */
void kn__cg_node_comment(kn__sb *sb, const kn__gnode *n);
void kn__cg_put_safe(kn__sb *sb, const char *s);
/* The conversions of a dtype ("" where it needs none). */
const char *kn__cg_ld_fn(kn_dtype dt);
const char *kn__cg_st_fn(kn_dtype dt);
/* Reduction groups: the group's stored members as leaves (per-element
** ones contiguous over the space), their leaf, their index; is m a member;
** the product of the kept (reduced false) or reduced sizes; the reduced
** dims ascending (returns their number); per-element member statements
** (inner loads at p<L>_<depth-1>). */
void kn__cg_group_outputs(kctx *k);
/* The context of reduction item it's kernel for target t (NULL: a printer
** that reads no dialect flag): group, space, reduced depth, stash -1 (no
** value kept between passes), leaves and stored outputs; NULL on OOM.
** Owned by the caller: kn__cg_kctx_free. */
kctx *kn__cg_group_kctx(kn__ind_plan *p, const kn__ind_target *t, const kn__kir_item *it);
int kn__cg_out_leaf(const kctx *k, int o);
int kn__cg_out_index(const kctx *k, int node);
bool kn__cg_member(const kctx *k, const kn__gnode *m);
void kn__cg_size_product(kctx *k, kn__sb *sb, bool reduced);
int kn__cg_red_dims(const kctx *k, int *dims);
void kn__cg_gstmts(kctx *k, kn__sb *sb, const kn__gnode *n);
/* The offsets p<L>_t of every leaf at reduced loop level t (loop variable
** jt over kernel dim d). */
void kn__cg_level_offsets(kctx *k, kn__sb *sb, int t, int d);
/* In a reduction pass over nd reduced dims (dims ascending): the offset of
** leaf li's element at the start of the innermost dim's block (jb); is leaf
** li a buffer of type dt with stride 1 along that dim (its block's address
** into sb)? */
void kn__cg_block_at(kn__sb *sb, int li, int nd);
bool kn__cg_row_leaf(kctx *k, int li, kn_dtype dt, int nd, const int *dims, kn__sb *sb);
/* Sum n's pass over float32 exp(a - alpha * b), a read in place and b the
** same for the row (codegen_expsum.c): the fused table call of each block
** printed into pre (it adds the block to n's lanes and stores the exps or
** a - alpha * b where an output keeps them), and into tail the rest of the
** row's (fewer than 16 elements from jb, nt_ of them, the last in lane
** at_ + nt_ - 1 of the 16-float vector t_ it declares: the row's last 16
** elements, zero-padded in a row under 16) computation up to its exps in
** t_, stores included, and true; else false, nothing printed. */
bool kn__cg_expsum_block(kctx *k, kn__sb *pre, kn__sb *tail, const kn__gnode *n, int nd,
                         const int *dims);
/* Does a maximum row r over float32 elements xdt take the table's row
** maximum (codegen_expsum.c) when its row is read in place? And the call
** for the row at addr of len elements, into lane 0 of reduction id (opens
** the pass's block as red_inner's lanes loop does; the remainder loop that
** follows finds nothing left). */
bool kn__cg_rowmax_row(const kctx *k, const kn__red_row *r, kn_dtype xdt);
void kn__cg_rowmax_call(kn__sb *sb, const kn__red_row *r, int id, const char *addr,
                        const char *len);
/* Row prefetch (codegen_prefetch.c): at the start of row o, the flags pfL
** of the leaves read (or written) along contiguous rows two rows ahead and
** the whole-row prefetches no blocked pass made; in the first pass made
** in blocks, the prefetches of block [jb, jb + bn) of row o + 2. */
void kn__cg_group_prefetch(kctx *k, kn__sb *sb);
void kn__cg_block_prefetch(kctx *k, kn__sb *sb);
/* A fused call's argument (into sb) for input leaf li's block [jb, jb + bn)
** of row o + 2 when the call is made in the group's first pass in blocks
** and the leaf is read along contiguous rows (that pass's block prefetch
** then leaves the leaf to the call); a null pointer otherwise. */
void kn__cg_call_prefetch(kctx *k, int li, kn__sb *sb);
/* Index ramps (codegen_pick.c): the reduced loop level whose index leaf li
** holds element-wise (read as that loop's variable), or -1; a one-hot sum
** member n (sum of where(ramp == t, v, 0)) printed as the one element
** where the index is t: true, or false and nothing printed. */
int kn__cg_ramp_level(const kctx *k, int li);
bool kn__cg_pick_pass(kctx *k, kn__sb *sb, const kn__gnode *n);
/* Is reduction member n such a one-hot sum (printed by kn__cg_pick_pass)? */
bool kn__cg_pick_row(kctx *k, const kn__gnode *n);
/* Rows pipelined (codegen_pipe.c): choose the lead and host passes (or
** none); the next row's lanes before the row loop; nx_ (row o + 1 is next)
** at a row's start; in the lead's pass (open/close around its loops) the
** lanes taken from the previous row when it computed them; in the host's,
** the next row's lanes declared (open), added up block by block (block,
** in the block loop) and the next row's rest added and handed on (close).
** Each prints nothing for other passes or when no rows are pipelined. */
void kn__cg_pipe_plan(kctx *k);
void kn__cg_pipe_decl(kctx *k, kn__sb *sb);
void kn__cg_pipe_row(kctx *k, kn__sb *sb);
void kn__cg_pipe_open(kctx *k, kn__sb *sb, const kn__gnode *n);
void kn__cg_pipe_block(kctx *k, kn__sb *sb, const kn__gnode *n);
void kn__cg_pipe_close(kctx *k, kn__sb *sb, const kn__gnode *n);
/* Entry point: rt->release of slots; a launch's buffer events (in-place
** takes, reuse, releases, allocations) into o (single) or o[w]. */
void kn__cg_releases(kn__sb *call, const int *slots, int n);
/* An extern step's call (rt->ext) after the releases due before it. */
void kn__cg_extern_call(const kn__ind_plan *p, const kn__kir_item *it, kn__sb *call);
void kn__cg_launch_buffers(const kn__kir_item *it, bool single, kn__sb *call);
/* Does a kernel of p read or compute a float16/bfloat16 value? */
bool kn__cg_plan_has_half(const kn__ind_plan *p);
/* The 16-bit conversions after kn_fbits/kn_bitsf (which each target
** defines: memcpy in C, bit-cast intrinsics in CUDA). */
extern const char kn__cg_half_prelude[];

#endif
