/*
** inductor/codegen_expsum.c: a row kernel's sum(exp(x - c)) as one call of
** the vector-math table's fused exp-and-sum (ops/vmath.h, expsum_f32) per
** block (C targets).
**
** softmax, log_softmax and cross_entropy's logsumexp sum exp(x - max) over
** a row of float32 x. Computed as any vector-math member of a sum's block
** (codegen.c, block_vm), that took a loop writing x - max into a block on
** the stack (or into the output keeping it), the table's array exp of the
** block, and a loop adding the exps to the pass's 16 double lanes: three
** passes over the block, and the exps stored and reloaded. The fused call
** reads x in place, subtracts c in float, computes the same exp (bit for
** bit the array function's) and adds the exps to the lanes in groups of
** 64 (each lane's four exps summed in float, then once in double: its
** contract in ops/vmath.h; blocks are 256 long but the last, so a row's
** groups do not depend on the blocks); where a later pass reads x - max
** (log_softmax) or the exps (softmax) from an output, the call writes them
** there. The remainder of a row (< 16 elements) is one more table call, on
** the row's last 16 elements read as one vector (expsum_tail).
** The call also fetches the input's block of the row two rows on
** (kn__cg_call_prefetch), a line at a time between its arithmetic.
**
** The pattern: a SUM or MEAN member of a group whose element is a float32
** exp member of the pass (not computed before), whose operand is a float32
** sub member a - alpha * b with a read from an input with stride 1 along the
** innermost reduced dim and b the same for the whole row (a row value such
** as the max, a constant or a scalar): c = alpha * b, rounded to float as
** the sub's formula rounds it. Where b is the row's maximum of a itself (an
** amax member over the same dims, alpha 1: softmax, log_softmax,
** cross_entropy), the call is the table's expsum_max_f32, whose exp skips
** its upper range check (every x - c is <= 0 or NaN): one vector operation
** of about fifteen fewer per 16 elements on AVX-512, the same results.
**
** The maximum pass before it (and amax's, logsumexp's shift) is one call of
** the table's row maximum (rowmax_f32) for a float32 row read in place:
** the lanes' loop keeps 16 float32 lanes, one AVX-512 vector, so the pass
** was one chain of 64 dependent max steps a row of 1024 (~250 cycles);
** the table keeps four. The maximum is the lanes' (NaNs skipped, -inf when
** none; a NaN in the row still makes amax's result NaN), but for the sign
** of a maximum that is a zero of either sign.
*/
#include <math.h>
#include <string.h>

#include "inductor/cgen.h"
#include "ops/pointwise.h"
#include "ops/reduce_table.h"
#include "ops/vmath.h"

/* Member m of the group, a float32 pointwise node computing code (vm
** function vm when >= 0) per element, not one an earlier pass kept. */
static bool f32_member(const kctx *k, const kn__gnode *m, int code, int vm) {
  const kn__ind_node *mn = &k->p->nodes[m->index];
  return kn__cg_member(k, m) && mn->kind == KN__IND_PW && !mn->row && !mn->expr &&
         mn->f.code == code && (vm < 0 || mn->f.vm == vm) && mn->f.ct == KN_FLOAT32 &&
         m->meta[0].dtype == KN_FLOAT32 && !k->stash_ready[m->index] && !k->blk[m->index] &&
         m->nargs >= kn__pw_form((kn__pwcode)mn->f.code)->nin;
}

/* Is operand b of the sub the same for the whole row (into c: alpha * b in
** float, as the formula computes it)? */
static bool row_shift(kctx *k, const kn__gnode *sub, kn__sb *c) {
  const kn__garg *b = &sub->args[1];
  double alpha = k->p->nodes[sub->index].f.p1;
  if (!isfinite(alpha)) return false;
  if (b->kind == KN__GA_TENSOR) {
    const kn__ind_node *bn = &k->p->nodes[b->u.t.node->index];
    if (!bn->expr && !(bn->row && kn__cg_member(k, b->u.t.node))) return false;
  } else if (b->kind != KN__GA_SCALAR) {
    return false;
  }
  if (alpha == 1) { /* 1 * b == b in float, NaN included */
    kn__cg_operand(k, c, sub, 1);
    return true;
  }
  kn__sb_printf(c, "(float)(((float)(%a)) * ", alpha);
  kn__cg_operand(k, c, sub, 1);
  kn__sb_putc(c, ')');
  return true;
}

/* Is the shift the row's maximum of the values it is subtracted from (b an
** amax member of the group over the sub's operand a, reducing the same dims,
** alpha 1)? Then every a - b is <= 0 or NaN, and the table's expsum_max_f32
** (the exp without its upper range check) gives the same results. */
static bool shift_is_max(const kctx *k, const kn__ind_node *sum, const kn__gnode *sub) {
  const kn__garg *a = &sub->args[0], *b = &sub->args[1];
  if (k->p->nodes[sub->index].f.p1 != 1 || b->kind != KN__GA_TENSOR || !b->u.t.node) return false;
  const kn__gnode *m = b->u.t.node;
  const kn__ind_node *mn = &k->p->nodes[m->index];
  return mn->kind == KN__IND_RED && mn->red->kind == KN__RED_MAX &&
         mn->red_mask == sum->red_mask && kn__cg_member(k, m) && m->nargs >= 1 &&
         m->args[0].kind == KN__GA_TENSOR && m->args[0].u.t.node == a->u.t.node &&
         m->args[0].u.t.idx == a->u.t.idx;
}

/* Operand a of the sub: an input read in place (its block's address into
** src). */
static bool row_input(kctx *k, const kn__gnode *sub, int nd, const int *dims, kn__sb *src,
                      int *li) {
  const kn__garg *a = &sub->args[0];
  if (a->kind != KN__GA_TENSOR || !a->u.t.node) return false;
  const kn__gnode *m = a->u.t.node;
  const kn__ind_node *mn = &k->p->nodes[m->index];
  if (mn->expr || mn->inlined || kn__cg_member(k, m)) return false;
  *li = kn__cg_leaf_index(k, kn__ind_value_slot(k->p, a->u.t), &m->meta[a->u.t.idx]);
  return kn__cg_row_leaf(k, *li, KN_FLOAT32, nd, dims, src);
}

/* Where the call stores member m for a later pass, into dst: its output's
** block (contiguous when the innermost reduced dim is the last), or a null
** pointer when no pass keeps it; false when it is kept elsewhere. */
static bool kept_at(kctx *k, const kn__gnode *m, int nd, const int *dims, kn__sb *dst) {
  int so = k->stash[m->index];
  if (so < 0) {
    kn__sb_puts(dst, "(float *)0");
    return true;
  }
  if (dims[nd - 1] != k->shape->ndim - 1) return false;
  kn__sb_printf(dst, "out%d + ", so);
  kn__cg_block_at(dst, kn__cg_out_leaf(k, so), nd);
  return true;
}

/* The pass's row (pass 1's) adds elements as they are: sum, mean. */
static bool plain_sum(const kn__ind_node *in) {
  const kn__red_row *r = kn__ind_red_pass_row(in, 1);
  return in->red->acc == KN__RACC_WIDE && r->acc == KN__RACC_WIDE &&
         r->shape == KN__RSHAPE_FOLD && !r->prepped &&
         (r->kind == KN__RED_SUM || r->kind == KN__RED_MEAN);
}

/* The rest of the row (fewer than 16 elements) as one vector: the row's
** last 16 elements read as a whole (no element-wise stores for the table's
** vector load to wait on), x - c in vector float, the table's array exp on
** the 16 lanes. Lanes are independent, so each element gets the bits of
** the element loop's scalar exp call (a padded vector as well); the caller
** adds the exps to lane 0 in order, as that loop did. The element loop
** made a table call per element: 8 calls a row of 1000 cost compiled
** softmax about a fifth of its time. */
static void expsum_tail(kn__sb *tail, const char *e, const char *d, const char *x,
                        const char *c) {
  static const char none[] = "(float *)0";
  kn__sb_printf(tail,
                "        KN_VM_PADV(float, kn_tv_);\n"
                "        kn_tv_ t_ = {0};\n"
                "        __builtin_memcpy(&t_, %s - at_, (at_ + nt_) * sizeof(float));\n"
                "        t_ = t_ - %s;\n", x, c);
  if (strcmp(d, none))
    kn__sb_printf(tail, "        __builtin_memcpy(%s, (float *)&t_ + at_, nt_ * sizeof(float));\n", d);
  kn__sb_printf(tail, "        KN_VMT()->f32[%d]((float *)&t_, (const float *)&t_, 16);\n",
                (int)KN__VM_EXP);
  if (strcmp(e, none))
    kn__sb_printf(tail, "        __builtin_memcpy(%s, (float *)&t_ + at_, nt_ * sizeof(float));\n", e);
}

bool kn__cg_expsum_block(kctx *k, kn__sb *pre, kn__sb *tail, const kn__gnode *n, int nd,
                         const int *dims) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  if (n->nargs < 1 || n->args[0].kind != KN__GA_TENSOR || !plain_sum(in)) return false;
  const kn__gnode *ex = n->args[0].u.t.node;
  if (!ex || ex->meta[n->args[0].u.t.idx].dtype != KN_FLOAT32 ||
      !f32_member(k, ex, k->p->nodes[ex->index].f.code, KN__VM_EXP) ||
      ex->args[0].kind != KN__GA_TENSOR || !ex->args[0].u.t.node)
    return false;
  const kn__gnode *sub = ex->args[0].u.t.node;
  if (!f32_member(k, sub, KN__PW_SUB, -1)) return false;
  kn__sb e, d, x, c, a;
  kn__sb_init(&e), kn__sb_init(&d), kn__sb_init(&x), kn__sb_init(&c), kn__sb_init(&a);
  int li = -1;
  bool ok = row_input(k, sub, nd, dims, &x, &li) && row_shift(k, sub, &c) &&
            kept_at(k, ex, nd, dims, &e) && kept_at(k, sub, nd, dims, &d);
  if (ok) {
    kn__cg_call_prefetch(k, li, &a);
    const bool mx = shift_is_max(k, in, sub);
    kn__sb_printf(pre,
                  "      KN_VMT()->expsum%s_f32(%s, %s, %s, %s, bn, lane%d,\n"
                  "                           %s);  /* exp(x - c), sum; the row ahead%s */\n",
                  mx ? "_max" : "", kn__sb_cstr(&e), kn__sb_cstr(&d), kn__sb_cstr(&x),
                  kn__sb_cstr(&c), n->index, kn__sb_cstr(&a), mx ? "; c is its max" : "");
    expsum_tail(tail, kn__sb_cstr(&e), kn__sb_cstr(&d), kn__sb_cstr(&x), kn__sb_cstr(&c));
  }
  if (kn__sb_failed(&e) || kn__sb_failed(&d) || kn__sb_failed(&x) || kn__sb_failed(&c) ||
      kn__sb_failed(&a))
    k->failed = true;
  kn__sb_fini(&e), kn__sb_fini(&d), kn__sb_fini(&x), kn__sb_fini(&c), kn__sb_fini(&a);
  return ok;
}

/* amax and logsumexp's shift: the rows of x > acc ? x : acc from -inf over
** x as it is, one value (argmax carries an index; the inf-norm takes |x|). */
bool kn__cg_rowmax_row(const kctx *k, const kn__red_row *r, kn_dtype xdt) {
  return xdt == KN_FLOAT32 && k->t->openmp &&
         (r->kind == KN__RED_MAX || r->kind == KN__RED_SHIFT);
}

void kn__cg_rowmax_call(kn__sb *sb, const kn__red_row *r, int id, const char *addr,
                        const char *len) {
  kn__sb_printf(sb, "    {\n      int64_t jb = 0;\n      {\n        int nan_ = 0;\n"
                "        const float m_ = KN_VMT()->rowmax_f32(%s, %s, &nan_);"
                "  /* the row's max */\n"
                "        ", addr, len);
  kn__ind_red_update(sb, r, id, KN_FLOAT32, "0", "(nan_ ? NAN : m_)", "0");
  kn__sb_printf(sb, "        jb = %s;\n      }\n", len);
}
