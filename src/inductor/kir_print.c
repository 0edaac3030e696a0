/*
** inductor/kir_print.c: the kernel IR as text (kir.h), the kernel_ir log
** artifact's content. One line per item, then indented lines: the buffers
** it reads (slot, dtype, sizes, strides), the nodes it computes with their
** operands (vN: a node computed in the kernel, sN: a buffer read, cN: a
** constant written as an expression, numbers: scalars), the buffers it
** writes with the memory plan's decision, and its lifetime events:
**
**   kernel_ir: 2 items, 3 slots
**   0: pointwise kernel 2 float64[4, 3] (roots mul)
**     read s0 float64[4, 3][3, 1]
**     v1 = add(s0, 1)
**     v2 = mul(v1, v1)
**     write s1 <- new
**   end: free s1
**
** An epilogue kernel (after its extern step, same node) reads
**   1: epilogue kernel 3 float32[8, 16] (roots relu; over blocks of step 0's output s3)
*/
#include "core/error.h"
#include "inductor/kir.h"

static void put_sym(kn__sb *sb, kn_sym v) {
  char buf[128];
  kn__sym_format(v, buf, sizeof buf);
  kn__sb_puts(sb, buf);
}

static void put_syms(kn__sb *sb, const kn_sym *v, int n) {
  kn__sb_putc(sb, '[');
  for (int d = 0; d < n; d++) {
    if (d) kn__sb_puts(sb, ", ");
    put_sym(sb, v[d]);
  }
  kn__sb_putc(sb, ']');
}

static void put_scalar(kn__sb *sb, kn_scalar s) {
  if (s.kind == KN_SCALAR_FLOAT) kn__sb_printf(sb, "%.17g", s.v.f);
  else if (s.kind == KN_SCALAR_INT) kn__sb_printf(sb, "%lld", (long long)s.v.i);
  else kn__sb_puts(sb, s.v.b ? "true" : "false");
}

static bool computed_in(const kn__kir_item *it, int node) {
  for (int i = 0; i < it->nnodes; i++)
    if (it->nodes[i] == node) return true;
  return false;
}

static void put_operand(kn__sb *sb, const kn__kir *ir, const kn__kir_item *it, const kn__garg *a) {
  if (a->kind == KN__GA_SCALAR) put_scalar(sb, a->u.s);
  else if (a->kind != KN__GA_TENSOR || !a->u.t.node) kn__sb_puts(sb, "?");
  else if (ir->p->nodes[a->u.t.node->index].expr) kn__sb_printf(sb, "c%d", a->u.t.node->index);
  else if (computed_in(it, a->u.t.node->index)) kn__sb_printf(sb, "v%d", a->u.t.node->index);
  else kn__sb_printf(sb, "s%d", kn__ind_value_slot(ir->p, a->u.t));
}

/* vN = op(operands): the formula's operands, a reduction's input and dims. */
static void put_node(kn__sb *sb, const kn__kir *ir, const kn__kir_item *it, int node) {
  const kn__gnode *n = kn__graph_node(ir->p->g, node);
  const kn__ind_node *pn = &ir->p->nodes[node];
  bool red = pn->kind == KN__IND_RED;
  int nq = red ? 1 : pn->f.nopnds;
  kn__sb_printf(sb, "    v%d = %s(", node, n->opdef ? n->opdef->name : "?");
  for (int q = 0; q < nq && q < n->nargs; q++) {
    if (q) kn__sb_puts(sb, ", ");
    put_operand(sb, ir, it, &n->args[q]);
  }
  if (red) {
    kn__sb_puts(sb, "; ");
    for (const char *c = pn->red->kname; *c; c++) /* the row's kind: "SUM" as sum */
      kn__sb_putc(sb, (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c));
    kn__sb_printf(sb, " over mask 0x%x", pn->red_mask);
  }
  kn__sb_putc(sb, ')');
  if (!red && pn->row) kn__sb_puts(sb, "  per row");
  kn__sb_putc(sb, '\n');
}

static void put_write(kn__sb *sb, const kn__kir_write *w) {
  kn__sb_printf(sb, "    write s%d", w->slot);
  if (w->from < 0) kn__sb_puts(sb, " <- new\n");
  else kn__sb_printf(sb, " <- s%d (%s)\n", w->from, w->inplace ? "in place" : "reused");
}

static void put_frees(kn__sb *sb, const char *what, const int *s, int n) {
  if (n == 0) return;
  kn__sb_puts(sb, what);
  for (int k = 0; k < n; k++) kn__sb_printf(sb, " s%d", s[k]);
  kn__sb_putc(sb, '\n');
}

static void put_head(kn__sb *sb, const kn__kir *ir, int j) {
  const kn__kir_item *it = &ir->items[j];
  const kn__gnode *n = kn__graph_node(ir->p->g, it->id);
  if (it->kind == KN__KIR_EXTERN) {
    kn__sb_printf(sb, "%d: extern step %d %s (node %s)\n", j, it->step,
                  n->opdef ? n->opdef->name : "?", n->name);
    return;
  }
  const char *kind = it->kind == KN__KIR_POINTWISE ? "pointwise"
                     : it->kind == KN__KIR_EPILOGUE ? "epilogue" : "reduction";
  kn__sb_printf(sb, "%d: %s kernel %d %s", j, kind, it->id, kn_dtype_name(it->space->dtype));
  put_syms(sb, it->space->sizes, it->space->ndim);
  if (it->kind == KN__KIR_REDUCTION) {
    kn__sb_printf(sb, " (reduced mask 0x%x)\n", it->mask);
    return;
  }
  kn__sb_puts(sb, " (roots");
  for (int o = 0; o < it->nroots; o++)
    kn__sb_printf(sb, " %s", kn__graph_node(ir->p->g, it->roots[o])->name);
  if (it->kind == KN__KIR_EPILOGUE)
    kn__sb_printf(sb, "; over blocks of step %d's output s%d", it->step, it->gemm);
  kn__sb_puts(sb, ")\n");
}

static void put_item(kn__sb *sb, const kn__kir *ir, int j) {
  const kn__kir_item *it = &ir->items[j];
  put_head(sb, ir, j);
  put_frees(sb, "    free before:", it->free_before, it->nfree_before);
  for (int r = 0; r < it->nreads; r++) {
    const kn__vmeta *m = it->reads[r].m;
    kn__sb_printf(sb, "    read s%d %s", it->reads[r].slot, kn_dtype_name(m->dtype));
    put_syms(sb, m->sizes, m->ndim);
    put_syms(sb, m->strides, m->ndim);
    kn__sb_putc(sb, '\n');
  }
  for (int i = 0; it->kind != KN__KIR_EXTERN && i < it->nnodes; i++)
    put_node(sb, ir, it, it->nodes[i]);
  for (int w = 0; w < it->nwrites; w++) put_write(sb, &it->writes[w]);
  put_frees(sb, "    free after:", it->free_after, it->nfree_after);
}

kn_status kn__kir_print(const kn__kir *ir, kn__sb *sb) {
  kn__sb_printf(sb, "kernel_ir: %d items, %d slots\n", ir->nitems, ir->p->nslots);
  for (int j = 0; j < ir->nitems; j++) put_item(sb, ir, j);
  put_frees(sb, "end: free", ir->free_end, ir->nfree_end);
  return kn__sb_failed(sb) ? kn__oom() : KN_OK;
}
