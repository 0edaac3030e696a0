/*
** inductor/codegen_pipe.c: a reduction group's rows pipelined (C targets'
** printer, see cgen.h and docs/INDUCTOR.md, "Code generation").
**
** layer_norm's forward makes three passes over a row: its sum (the row
** read from memory), the sum of its squared deviations and the store (both
** over the row in L1). The two sums are chains of double adds, 64 steps a
** row of 1024 floats in 16 lanes, and they ran one after the other: the
** first waiting on memory, the second with memory idle. Here row o + 1's
** first sum is added up in row o's second pass, block by block: the next
** row streams in while this row's arithmetic runs and the two chains
** overlap. Each sum adds the same elements to the same lanes in the same
** order, so the bits do not change.
**
** The first sum (the lead) qualifies when it is the group's first
** reduction, a plain sum in double lanes (no NaN flags, no index, no
** centering, no prep) over an input read in place along the last dim; the
** pass that hosts it is the group's next reduction, a sum made in blocks.
** Row o + 1 must follow row o in the innermost kept dim within the part
** [lo, hi) the function computes (nx_); at a part's first row, or after a
** row without a successor there, the lead's own pass runs.
*/
#include <string.h>

#include "inductor/cgen.h"

/* The group's next reduction member after index *from (advanced past it),
** or NULL. */
static const kn__gnode *next_red(const kctx *k, int *from) {
  for (; *from < k->g->nmembers; (*from)++) {
    const kn__gnode *n = kn__graph_node(k->p->g, k->g->members[*from]);
    const kn__ind_node *in = &k->p->nodes[n->index];
    if (in->row && in->kind == KN__IND_RED) {
      (*from)++;
      return n;
    }
  }
  return NULL;
}

/* A sum in double lanes updated block by block, without NaN flags, index
** lanes or a centering pass, that is not an index pick. */
static bool plain_sum(kctx *k, const kn__gnode *n) {
  const kn__red_row *r = k->p->nodes[n->index].red;
  return r->acc == KN__RACC_WIDE && r->shape == KN__RSHAPE_FOLD && r->nan != KN__RNAN_WINS &&
         r->pre == KN__RED_NONE && !kn__cg_pick_row(k, n);
}

/* The leaf the lead n reads in place along the last dim, with rows that
** move along the innermost kept dim; -1 if none. */
static int lead_leaf(kctx *k, const kn__gnode *n) {
  const kn__gnode *src = n->args[0].u.t.node;
  const kn__ind_node *sn = &k->p->nodes[src->index];
  const kn__vmeta *sm = &src->meta[n->args[0].u.t.idx];
  if (k->p->nodes[n->index].red->prepped || sn->expr || sn->inlined || sn->group == k->gi ||
      (sm->dtype != KN_FLOAT32 && sm->dtype != KN_FLOAT64))
    return -1;
  int li = kn__cg_leaf_index(k, kn__ind_value_slot(k->p, n->args[0].u.t), sm);
  int dims[1] = {k->shape->ndim - 1};
  kn__sb at, rs;
  kn__sb_init(&at);
  kn__sb_init(&rs);
  bool ok = kn__cg_row_leaf(k, li, sm->dtype, 1, dims, &at);
  kn__cg_leaf_stride(k, &rs, &k->leaves[li], k->shape->ndim - 2);
  ok = ok && strcmp(kn__sb_cstr(&rs), "0");
  if (kn__sb_failed(&at) || kn__sb_failed(&rs)) k->failed = true;
  kn__sb_fini(&at);
  kn__sb_fini(&rs);
  return ok ? li : -1;
}

void kn__cg_pipe_plan(kctx *k) {
  int dims[KN_MAX_DIMS], nd = k->shape->ndim, from = 0;
  k->pipe_lead = k->pipe_host = NULL;
  if (!k->t || !k->t->vector_abi || nd < 2 || kn__cg_red_dims(k, dims) != 1 || dims[0] != nd - 1)
    return;
  const kn__gnode *lead = next_red(k, &from), *host = lead ? next_red(k, &from) : NULL;
  if (!host || !plain_sum(k, lead) || !plain_sum(k, host)) return;
  int li = lead_leaf(k, lead);
  if (li < 0) return;
  k->pipe_lead = lead;
  k->pipe_host = host;
  k->pipe_leaf = li;
}

/* The lead's element type, and its lanes' type. */
static kn_dtype lead_dtype(const kctx *k) {
  return k->pipe_lead->args[0].u.t.node->meta[k->pipe_lead->args[0].u.t.idx].dtype;
}

void kn__cg_pipe_decl(kctx *k, kn__sb *sb) {
  if (!k->pipe_lead) return;
  const kn__red_row *r = k->p->nodes[k->pipe_lead->index].red;
  kn__ind_red_lanes_named(sb, r, lead_dtype(k), "nxl", k->pipe_lead->index, false);
  kn__sb_puts(sb, "  int nxh_ = 0;  /* nxl: the next row's lanes of its first sum, computed */\n");
}

void kn__cg_pipe_row(kctx *k, kn__sb *sb) {
  if (!k->pipe_lead) return;
  kn__sb size;
  kn__sb_init(&size);
  kn__cg_sym_text(k, &size, k->shape->sizes[k->shape->ndim - 2]);
  kn__sb_printf(sb, "    const int nx_ = o + 1 < hi && o %% (%s) + 1 < (%s);  /* row o + 1 next */\n",
                kn__sb_cstr(&size), kn__sb_cstr(&size));
  if (kn__sb_failed(&size)) k->failed = true;
  kn__sb_fini(&size);
}

void kn__cg_pipe_open(kctx *k, kn__sb *sb, const kn__gnode *n) {
  int id = k->pipe_lead ? k->pipe_lead->index : -1;
  if (n == k->pipe_lead)
    kn__sb_printf(sb, "    if (nxh_)\n      for (int l = 0; l < 16; l++) lane%d[l] = nxl%d[l];\n"
                  "    else {\n", id, id);
  else if (n == k->pipe_host)
    kn__ind_red_lanes_named(sb, k->p->nodes[id].red, lead_dtype(k), "nl", id, true);
}

/* The address of the next row's element `at` of the lead's leaf. */
static void next_row(kctx *k, kn__sb *sb, const char *at) {
  int li = k->pipe_leaf;
  kn__sb_printf(sb, "in%d + o%d + (", li, li);
  kn__cg_leaf_stride(k, sb, &k->leaves[li], k->shape->ndim - 2);
  kn__sb_printf(sb, ") + %s", at);
}

void kn__cg_pipe_block(kctx *k, kn__sb *sb, const kn__gnode *n) {
  if (n != k->pipe_host) return;
  int id = k->pipe_lead->index;
  kn_dtype xdt = lead_dtype(k);
  kn__sb_printf(sb, "      if (nx_) {  /* the next row's block of its first sum */\n"
                "        const %s *nb_ = ", kn__ind_ctype(xdt));
  next_row(k, sb, "jb");
  kn__sb_puts(sb, ";\n        for (int64_t b = 0; b < bn; b += 16)\n"
                  "          for (int l = 0; l < 16; l++) ");
  kn__ind_red_update_named(sb, k->p->nodes[id].red, xdt, "nl", id, "l", "nb_[b + l]");
  kn__sb_puts(sb, "      }\n");
}

void kn__cg_pipe_close(kctx *k, kn__sb *sb, const kn__gnode *n) {
  if (!k->pipe_lead) return;
  int id = k->pipe_lead->index;
  if (n == k->pipe_lead) {
    kn__sb_puts(sb, "    }\n");
    return;
  }
  if (n != k->pipe_host) return;
  kn__sb len, x;
  kn__sb_init(&len);
  kn__sb_init(&x);
  kn__cg_sym_text(k, &len, k->shape->sizes[k->shape->ndim - 1]);
  kn__sb_putc(&x, '*');
  kn__sb_putc(&x, '(');
  next_row(k, &x, "j_");
  kn__sb_putc(&x, ')');
  kn__sb_printf(sb, "    if (nx_)  /* the next row's rest, as its own pass adds it */\n"
                "      for (int64_t j_ = (%s) & ~(int64_t)15; j_ < (%s); j_++)\n        ",
                kn__sb_cstr(&len), kn__sb_cstr(&len));
  kn__ind_red_update_named(sb, k->p->nodes[id].red, lead_dtype(k), "nl", id, "0",
                           kn__sb_cstr(&x));
  kn__sb_printf(sb, "    for (int l = 0; l < 16; l++) nxl%d[l] = nl%d[l];\n    nxh_ = nx_;\n",
                id, id);
  if (kn__sb_failed(&len) || kn__sb_failed(&x)) k->failed = true;
  kn__sb_fini(&len);
  kn__sb_fini(&x);
}
