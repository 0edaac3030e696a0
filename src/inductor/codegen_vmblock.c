/*
** inductor/codegen_vmblock.c: a pointwise kernel's vector math a block at a
** time (C targets).
**
** A transcendental function in a fused element loop (exp, log1p, tanh,
** sigmoid, pow, ...) is the eager kernels' table function (ops/vmath.h).
** Called once per element, it reaches the table through the vector-ABI
** versions of the prelude (formula.c): gcc calls one per 8 lanes (AVX2),
** each an indirect call of the table's array function on 8 elements, which
** reloads its constants and passes the lanes through memory; an unvectorised
** loop (the -O1 tier, the scalar target, a remainder) calls the scalar
** version, a whole 64-byte vector per element. On the 2-core AMD EPYC
** (AVX2) log1p(exp(x / 2)) * tanh(x) + sigmoid(x) over 1M floats took
** 7.4 ms that way and 4.7 ms eager (one array call per op over the tensor).
**
** So a kernel that calls the table computes its elements in blocks of
** KN_VB (the prelude's): for each vector-math node, producers first, a loop
** fills the block of its operands (vmiN_Q[], the node's inlined operand
** trees recomputed per element: pointwise arithmetic, no vector math), then
** one call of the table's array function writes its block (vmoN[]); a last
** loop computes the roots from the blocks and stores them. The same
** function on the same values as the per-element call and the eager op
** (the table's functions work lane by lane), so the results are equal, bit
** for bit; the blocks stay in L1. A kernel stages VMB_MAX nodes at most
** (the blocks live on the thread's stack: 3 x KN_VB doubles each at most);
** further ones keep the per-element call. Flat loops block their range,
** row loops each row.
*/
#include <stdlib.h>
#include <string.h>

#include "inductor/cgen.h"
#include "ops/pointwise.h"
#include "ops/vmath.h"

#define VMB_MAX 32

/* Is n computed by a table function (not a constant expression, not a
** function the target prints as exact C, kn__vm_exact_c)? */
static bool table_node(const kctx *k, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  if (in->kind != KN__IND_PW || in->expr || in->row || in->f.vm < 0 || in->f.code < 0) return false;
  if (in->f.ct != KN_FLOAT32 && in->f.ct != KN_FLOAT64) return false;
  int nin = kn__pw_form(in->f.code)->nin;
  if (nin > n->nargs || nin > in->f.nopnds) return false;
  return !(k->t->inline_exact && nin == 1 && kn__vm_exact_c((kn__vmop)in->f.vm));
}

typedef struct vmlist { const kn__gnode *v[VMB_MAX]; int n; unsigned char *seen; } vmlist;

/* The table nodes of n's tree (n and its inlined operands, as kn__cg_stmts
** walks it), operands first; nodes already computed before the loop (done:
** 0-dim values hoisted out of it) are not the loop's. */
static void collect(const kctx *k, const kn__gnode *n, vmlist *l) {
  if (l->seen[n->index] || k->done[n->index]) return;
  l->seen[n->index] = 1;
  const kn__ind_node *in = &k->p->nodes[n->index];
  for (int q = 0; q < in->f.nopnds && q < n->nargs; q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind == KN__GA_TENSOR && k->p->nodes[a->u.t.node->index].inlined) collect(k, a->u.t.node, l);
  }
  if (l->n < VMB_MAX && table_node(k, n)) l->v[l->n++] = n;
}

/* The loop over the block's elements, its index named as the kernel's
** element loop names it (idx: "i = b + l" or "j = jb + l"); done reset to
** the values computed before the loop. */
static void block_loop_open(kctx *k, kn__sb *sb, const char *idx, const unsigned char *pre) {
  memcpy(k->done, pre, (size_t)k->p->nnodes + 1);
  kn__sb_printf(sb, "    for (int64_t l = 0; l < bn; l++) {\n      const int64_t %s;\n", idx);
}

/* Where the table reads operand q of v from, when it can read it in place
** (into src, true): the block of a node computed for the block in v's
** compute type, or in a flat kernel a buffer of that type read at the
** element (not one written in place, not a broadcast scalar). */
static bool direct(kctx *k, const kn__gnode *v, int q, kn__sb *src) {
  const kn__garg *a = &v->args[q];
  kn_dtype ct = k->p->nodes[v->index].f.ct;
  if (a->kind != KN__GA_TENSOR) return false;
  const kn__gnode *m = a->u.t.node;
  const kn__ind_node *mn = &k->p->nodes[m->index];
  if (k->blk[m->index]) {
    if (m->meta[0].dtype != ct || mn->f.ct != ct) return false;
    kn__sb_printf(src, "vmo%d", m->index);
    return true;
  }
  if (!k->flat || mn->inlined || mn->expr || kn__cg_is_root(k, m)) return false;
  int li = kn__cg_leaf_index(k, kn__ind_value_slot(k->p, a->u.t), &m->meta[a->u.t.idx]);
  if (k->alias[li] >= 0 || kn__cg_leaf_scalar(k->leaves[li].m) || k->leaves[li].m->dtype != ct)
    return false;
  kn__sb_printf(src, "in%d + b", li);
  return true;
}

/* Table node v for the block: the block of each operand the table cannot
** read in place (a loop), then one array call. */
static void stage(kctx *k, kn__sb *sb, const kn__gnode *v, const char *idx, const unsigned char *pre) {
  const kn__ind_formula *f = &k->p->nodes[v->index].f;
  const char *ct = kn__ind_ctype(f->ct), *tab = f->ct == KN_FLOAT64 ? "f64" : "f32";
  int nin = kn__pw_form(f->code)->nin, nloop = 0;
  kn__sb src[2];
  bool in_place[2];
  for (int q = 0; q < nin; q++) {
    kn__sb_init(&src[q]);
    in_place[q] = direct(k, v, q, &src[q]);
    if (!in_place[q]) kn__sb_printf(&src[q], "vmi%d_%d", v->index, q);
    nloop += !in_place[q];
  }
  kn__sb_printf(sb, "    %s vmo%d[KN_VB];\n    {\n", ct, v->index);
  for (int q = 0; q < nin; q++)
    if (!in_place[q]) kn__sb_printf(sb, "    %s vmi%d_%d[KN_VB];\n", ct, v->index, q);
  if (nloop) {
    block_loop_open(k, sb, idx, pre);
    for (int q = 0; q < nin; q++) {
      const kn__garg *a = &v->args[q];
      if (!in_place[q] && a->kind == KN__GA_TENSOR &&
          (k->p->nodes[a->u.t.node->index].inlined || kn__cg_is_root(k, a->u.t.node)))
        kn__cg_stmts(k, sb, a->u.t.node);
    }
    for (int q = 0; q < nin; q++) {
      if (in_place[q]) continue;
      kn__sb_printf(sb, "      vmi%d_%d[l] = ", v->index, q);
      kn__cg_operand(k, sb, v, q);
      kn__sb_puts(sb, ";\n");
    }
    kn__sb_puts(sb, "    }\n");
  }
  kn__sb_printf(sb, "    KN_VMT()->%s%s[%d](vmo%d", tab, nin == 2 ? "b" : "", f->vm, v->index);
  for (int q = 0; q < nin; q++) {
    kn__sb_printf(sb, ", %s", kn__sb_cstr(&src[q]));
    if (kn__sb_failed(&src[q])) k->failed = true;
    kn__sb_fini(&src[q]);
  }
  kn__sb_puts(sb, ", bn);  /* ");
  kn__cg_node_comment(sb, v);
  kn__sb_puts(sb, "    }\n");
  k->blk[v->index] = 1;
}

/* The stages and the last loop of one block (bn elements). */
static void block_body(kctx *k, kn__sb *sb, const vmlist *l, const char *idx, const char *at,
                       const unsigned char *pre) {
  for (int i = 0; i < l->n; i++) stage(k, sb, l->v[i], idx, pre);
  block_loop_open(k, sb, idx, pre);
  for (int o = 0; o < k->nroots; o++) kn__cg_stmts(k, sb, k->roots[o]);
  kn__cg_stores(k, sb, at);
  kn__sb_puts(sb, "    }\n");
}

static void flat_blocks(kctx *k, kn__sb *sb, const vmlist *l, const unsigned char *pre) {
  kn__sb_puts(sb, "  for (int64_t b = lo; b < hi; b += KN_VB) {\n"
                  "    const int64_t bn = hi - b < KN_VB ? hi - b : KN_VB;\n");
  block_body(k, sb, l, "i = b + l", "i", pre);
  kn__sb_puts(sb, "  }\n");
}

static void row_blocks(kctx *k, kn__sb *sb, const vmlist *l, const unsigned char *pre) {
  int nd = k->shape->ndim;
  kn__sb_puts(sb, "  const int64_t len = ");
  kn__cg_sym_text(k, sb, k->shape->sizes[nd - 1]);
  kn__sb_puts(sb, ";\n  for (int64_t r = lo; r < hi; r++) {\n");
  kn__cg_offsets_begin(k, sb, "r");
  for (int d = nd - 2; d >= 0; d--) kn__cg_offsets_dim(k, sb, d);
  kn__sb_puts(sb, "  for (int64_t jb = 0; jb < len; jb += KN_VB) {\n"
                  "    const int64_t bn = len - jb < KN_VB ? len - jb : KN_VB;\n");
  block_body(k, sb, l, "j = jb + l", "r * len + j", pre);
  kn__sb_puts(sb, "  }\n  }\n");
}

bool kn__cg_vm_blocks(kctx *k, kn__sb *sb) {
  size_t nn = (size_t)k->p->nnodes + 1;
  if (!k->t || !k->blk || k->shape->ndim == 0) return false;
  vmlist l = {.n = 0, .seen = calloc(nn, 2)};
  if (!l.seen) {
    k->failed = true;
    return false;
  }
  unsigned char *pre = l.seen + nn;
  for (int o = 0; o < k->nroots; o++) collect(k, k->roots[o], &l);
  if (l.n > 0) {
    memcpy(pre, k->done, nn);
    (k->flat ? flat_blocks : row_blocks)(k, sb, &l, pre);
  }
  free(l.seen);
  return l.n > 0;
}
