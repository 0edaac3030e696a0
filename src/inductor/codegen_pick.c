/*
** inductor/codegen_pick.c: index ramps in a reduction group's kernel (C
** targets' printer, see cgen.h).
**
** A value whose element at index i along one dim is i (an index ramp: the
** class indices of nll_loss's decomposition, `_nll_loss_target`'s second
** output; the lowering table says which values are ramps,
** kn__ind_ramp_dim) is read inside the group's reduced loops as the loop's
** index (`j0`) instead of from its buffer. And a sum over that dim of
** `where(ramp == t, v, 0)`, with t the same along the row, is the row's
** one element where the index is t (0 when t is outside [0, len)): the pass
** becomes one evaluation of v at index t. nll_loss's loss and row weight,
** and cross_entropy backward's sum of the nll gradient, are such sums: each
** compared every element of the row with the target (a compare of int64
** class indices loaded from memory, a select, a double add per element)
** where one load of the target's logit gives the same value. The result is
** the same bits: the lanes add +0.0 to that one value (+0.0 + v, as here).
*/
#include <math.h>
#include <string.h>

#include "inductor/cgen.h"
#include "ops/pointwise.h"

static bool sym_same(kn_sym a, kn_sym b) { return a.c == b.c && a.e == b.e; }

/* The reduced loop level (0 = outermost reduced dim) of kernel dim kd, or -1
** when kd is not reduced. */
static int level_of(const kctx *k, int kd) {
  int t = 0;
  for (int d = 0; d < k->shape->ndim; d++) {
    if (!((k->g->mask >> d) & 1)) continue;
    if (d == kd) return t;
    t++;
  }
  return -1;
}

/* The reduced loop level whose index value m (the value of slot) holds
** element-wise, or -1: slot is an index ramp along a dim that lines up
** (right-aligned) with a reduced dim of the kernel, of the same size. */
static int ramp_level(const kctx *k, int slot, const kn__vmeta *m) {
  if (!k->g || slot < 0 || slot >= k->p->nslots) return -1;
  const kn__gnode *src = k->p->slot_node[slot];
  int rd = src ? kn__ind_ramp_dim(src->opdef, k->p->slot_out[slot]) : -1;
  if (rd < 0 || rd >= m->ndim) return -1;
  int kd = k->shape->ndim - m->ndim + rd;
  if (kd < 0 || !sym_same(m->sizes[rd], k->shape->sizes[kd])) return -1;
  return level_of(k, kd);
}

/* The C targets' loops name each reduced level's index jT (the CUDA
** printer, k->t NULL, walks the row with one flat j: it loads the ramp). */
int kn__cg_ramp_level(const kctx *k, int li) {
  if (!k->t || li < 0 || li >= k->nleaves) return -1;
  return ramp_level(k, k->leaves[li].slot, k->leaves[li].m);
}

/* ---- one-hot sums ------------------------------------------------------------------ */
/* The value ref r of node n's argument q, following getitems to the node
** that makes it (getitem k of an extern: that extern's output k). */
static bool arg_ref(const kn__gnode *n, int q, kn__gref *r) {
  if (q >= n->nargs || n->args[q].kind != KN__GA_TENSOR || !n->args[q].u.t.node) return false;
  *r = n->args[q].u.t;
  return true;
}

/* Is argument q of n a ramp along the kernel's single reduced dim? */
static bool ramp_arg(const kctx *k, const kn__gnode *n, int q) {
  kn__gref r;
  if (!arg_ref(n, q, &r) || kn__cg_member(k, r.node) || k->p->nodes[r.node->index].expr) return false;
  int slot = kn__ind_value_slot(k->p, r);
  return ramp_level(k, slot, &r.node->meta[r.idx]) == 0;
}

/* Is argument q of n the same at every element of a row: a scalar, a
** constant, a per-row member, or a buffer of size 1 along the reduced dim? */
static bool row_constant_arg(const kctx *k, const kn__gnode *n, int q, int kd) {
  if (q >= n->nargs) return false;
  const kn__garg *a = &n->args[q];
  if (a->kind == KN__GA_SCALAR) return a->u.s.kind == KN_SCALAR_INT;
  kn__gref r;
  if (!arg_ref(n, q, &r)) return false;
  const kn__ind_node *in = &k->p->nodes[r.node->index];
  const kn__vmeta *m = &r.node->meta[r.idx];
  if (m->dtype != KN_INT64) return false;
  if (in->expr) return true;
  if (kn__cg_member(k, r.node)) return in->row;
  int ld = kd - (k->shape->ndim - m->ndim);
  return ld < 0 || (kn__sym_is_const(m->sizes[ld]) && m->sizes[ld].c == 1);
}

static kn__ind_lclass lclass(const kn__gnode *n) { return kn__ind_lowering_of(n->opdef)->cls; }

/* Is argument q of n a constant +0 (a `full` of 0)? */
static bool zero_arg(const kctx *k, const kn__gnode *n, int q) {
  kn__gref r;
  if (!arg_ref(n, q, &r) || !k->p->nodes[r.node->index].expr || !r.node->opdef ||
      lclass(r.node) != KN__IND_L_CONSTANT || r.node->nargs < 2 ||
      r.node->args[1].kind != KN__GA_SCALAR)
    return false;
  kn_scalar s = r.node->args[1].u.s;
  if (s.kind == KN_SCALAR_INT) return s.v.i == 0;
  return s.kind == KN_SCALAR_FLOAT && s.v.f == 0 && !signbit(s.v.f);
}

/* The where of a one-hot sum n (where(eq(ramp, t), v, +0) summed over one
** reduced dim, float elements), with *tq: which argument of the eq is t;
** NULL when n is not one. */
static const kn__gnode *one_hot(const kctx *k, const kn__gnode *n, int *tq) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  int dims[KN_MAX_DIMS];
  if (in->kind != KN__IND_RED || kn__cg_red_dims(k, dims) != 1 || in->red->prepped ||
      in->red->shape != KN__RSHAPE_FOLD || in->red->acc != KN__RACC_WIDE ||
      (in->red->kind != KN__RED_SUM && in->red->kind != KN__RED_MEAN))
    return NULL;
  kn__gref w, c;
  if (!arg_ref(n, 0, &w) || !kn__cg_member(k, w.node) || k->p->nodes[w.node->index].row ||
      !w.node->opdef || lclass(w.node) != KN__IND_L_SELECT)
    return NULL;
  kn_dtype dt = w.node->meta[0].dtype;
  if ((dt != KN_FLOAT32 && dt != KN_FLOAT64) || !zero_arg(k, w.node, 2) || !arg_ref(w.node, 0, &c) ||
      !kn__cg_member(k, c.node) || k->p->nodes[c.node->index].kind != KN__IND_PW ||
      k->p->nodes[c.node->index].f.code != KN__PW_EQ)
    return NULL;
  for (int q = 0; q < 2; q++)
    if (ramp_arg(k, c.node, q) && row_constant_arg(k, c.node, 1 - q, dims[0])) {
      *tq = 1 - q;
      return w.node;
    }
  return NULL;
}

bool kn__cg_pick_row(kctx *k, const kn__gnode *n) {
  int tq;
  return one_hot(k, n, &tq) != NULL;
}

bool kn__cg_pick_pass(kctx *k, kn__sb *sb, const kn__gnode *n) {
  int tq, dims[KN_MAX_DIMS];
  const kn__gnode *w = one_hot(k, n, &tq);
  if (!w) return false;
  kn__cg_red_dims(k, dims);
  const kn__gnode *eq = w->args[0].u.t.node;
  const kn__ind_node *in = &k->p->nodes[n->index];
  kn_dtype dt = w->meta[0].dtype;
  int id = n->index;
  kn__sb_puts(sb, "    /* ");
  kn__cg_node_comment(sb, n);
  kn__sb_printf(sb, "    double acc%d = %s;  /* one-hot: the element where the index is t */\n"
                "    {\n      const int64_t t%d = (int64_t)", id, in->red->init_text, id);
  kn__cg_operand(k, sb, eq, tq);
  kn__sb_printf(sb, ";\n      if (t%d >= 0 && t%d < ", id, id);
  kn__cg_sym_text(k, sb, k->shape->sizes[dims[0]]);
  kn__sb_printf(sb, ") {\n      const int64_t j0 = t%d;\n", id);
  kn__cg_level_offsets(k, sb, 0, dims[0]);
  memset(k->done, 0, (size_t)k->p->nnodes);
  memset(k->blk, 0, (size_t)k->p->nnodes);
  k->inner = true;
  const kn__gnode *v = w->args[1].u.t.node;
  if (w->args[1].kind == KN__GA_TENSOR && v && kn__cg_member(k, v) && !k->p->nodes[v->index].row)
    kn__cg_gstmts(k, sb, v);
  kn__sb_printf(sb, "      const %s x = (%s)", kn__ind_ctype(dt), kn__ind_ctype(dt));
  kn__cg_operand(k, sb, w, 1);
  kn__sb_printf(sb, ";\n      acc%d = kn_red_comb_%s_%s(acc%d, x);\n      }\n    }\n", id,
                in->red->kname, dt == KN_FLOAT64 ? "f64" : "f32", id);
  k->inner = false;
  kn__ind_red_result(sb, in, id, n->meta[0].dtype);
  return true;
}
