/*
** inductor/reduce_lower.c: reductions in generated code, from the reduction
** table (ops/reduce_table.h) the eager kernels use.
**
**   classify   a reduction node of the graph onto its table row, its
**              reduced dims and its correction (kn__ind_red_classify)
**   prelude    each used row's expressions as static inline functions of
**              the generated source: kn_red_{better,prep,comb}_<K>_<f32|f64>
**              and kn_red_fin_<K>, the very text the eager kernels compile
**   lanes      the accumulator of a pass: 16 lanes (element j of the
**              innermost loop into lane j % 16, in order), their start,
**              update and combination in lane order after the row (the
**              same sizes give the same result on every run)
**
** Lanes are of the row's accumulator type: double (WIDE: sums, products,
** moments) or the input's type (INPUT: max, min, and the value of argmax /
** argmin, whose lanes carry the first index of their extreme too; lanes
** merge by the row's `better`, ties and NaN pairs to the smaller index).
** The NaN rule WINS of a one-value row (max, min) keeps a NaN flag per lane
** beside the order-only combine (a select and an or: both vectorise, where
** one select on a NaN-aware condition does not); a flagged row is NaN.
** A CENTERED row makes two passes: its PRE row's, whose finalize gives the
** center ctrID (var/std: MEAN, the mean; logsumexp: SHIFT, the largest
** element or 0), then its own over elements prepared with the center. A
** one-pass row with a prep (the norms) prepares each element with the row's
** constant (the p-norm's order, a literal of the source).
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"

/* ---- classification --------------------------------------------------------------- */

/* Reduced dims of input x from argument a (ints, one int, or none / [] =
** every dim) into *mask; false for a symbolic or repeated dim. */
static bool red_mask(const kn__gnode *n, int a, const kn__vmeta *x, unsigned *mask) {
  const kn__garg *g = a >= 0 && a < n->nargs ? &n->args[a] : NULL;
  kn_sym one[1];
  const kn_sym *v = NULL;
  int nv = 0;
  if (g && g->kind == KN__GA_INTS) v = g->u.ints.v, nv = g->u.ints.n;
  else if (g && g->kind == KN__GA_INT) one[0] = g->u.i, v = one, nv = 1;
  *mask = nv == 0 ? (1u << x->ndim) - 1 : 0;
  for (int j = 0; j < nv; j++) {
    int64_t dd = v[j].c < 0 ? v[j].c + x->ndim : v[j].c;
    if (!kn__sym_is_const(v[j]) || dd < 0 || dd >= x->ndim || ((*mask >> dd) & 1)) return false;
    *mask |= 1u << dd;
  }
  return true;
}

/* A reduced dim of size 0 (a reduction without identity refuses it). */
static bool reduces_nothing(const kn__vmeta *x, unsigned mask) {
  for (int d = 0; d < x->ndim; d++)
    if (((mask >> d) & 1) && kn__sym_is_const(x->sizes[d]) && x->sizes[d].c == 0) return true;
  return false;
}

/* A constant Scalar argument a as a double (2 when omitted: the norm's
** default order); false for a symbolic one. */
static bool const_scalar(const kn__gnode *n, int a, double *v) {
  const kn__garg *g = a < n->nargs ? &n->args[a] : NULL;
  *v = 2;
  if (!g || g->kind == KN__GA_NONE) return true;
  if (g->kind == KN__GA_DOUBLE) *v = g->u.d;
  else if (g->kind == KN__GA_INT && kn__sym_is_const(g->u.i)) *v = (double)g->u.i.c;
  else if (g->kind == KN__GA_SCALAR && g->u.s.kind == KN_SCALAR_FLOAT) *v = g->u.s.v.f;
  else if (g->kind == KN__GA_SCALAR && g->u.s.kind == KN_SCALAR_INT) *v = (double)g->u.s.v.i;
  else return false;
  return true;
}

/* The row of use u at node n (the norm's order picks its row) and its
** constant; false when the order is not a constant. */
static bool use_row(const kn__gnode *n, const kn__red_use *u, kn__ind_node *in) {
  in->red = u->row;
  in->red_c = 0;
  if (u->ord < 0) return true;
  double ord;
  if (!const_scalar(n, u->ord, &ord)) return false;
  in->red = kn__red_norm_row(ord);
  in->red_c = in->red->kind == KN__RED_NORMP ? ord : 0;
  return true;
}

/* Does the row need a reduced element (an ordered row, a norm of negative
** or infinite order)? Eager refuses an empty reduction. */
static bool needs_element(const kn__red_use *u, const kn__ind_node *in) {
  return in->red->ordered || (u->ord >= 0 && in->red->init != 0.0);
}

/* The output dtype a generated reduction of row r over x may have. */
static bool output_fits(const kn__red_row *r, const kn__vmeta *x, kn_dtype odt) {
  if (r->shape == KN__RSHAPE_INDEX) return odt == KN_INT64;
  return odt == x->dtype || odt == KN_BOOL;
}

bool kn__ind_red_classify(const kn__gnode *n, kn__ind_node *in) {
  const kn__red_use *u = kn__red_for_op(n->opdef->id);
  if (!u || n->nout != 1 || n->args[0].kind != KN__GA_TENSOR || !n->args[0].u.t.node)
    return false;
  const kn__vmeta *x = &n->args[0].u.t.node->meta[n->args[0].u.t.idx];
  if (u->dtype >= 0 && n->nargs > u->dtype && n->args[u->dtype].kind != KN__GA_NONE)
    return false; /* dtype= converts first: left to the eager op */
  if ((x->dtype != KN_FLOAT32 && x->dtype != KN_FLOAT64) || x->ndim == 0 || !use_row(n, u, in) ||
      !output_fits(in->red, x, n->meta[0].dtype))
    return false;
  unsigned mask;
  if (!red_mask(n, u->dims, x, &mask)) return false;
  if (needs_element(u, in) && reduces_nothing(x, mask)) return false;
  int64_t corr = 1;
  if (u->corr >= 0 && u->corr < n->nargs && n->args[u->corr].kind == KN__GA_INT) {
    if (!kn__sym_is_const(n->args[u->corr].u.i)) return false;
    corr = n->args[u->corr].u.i.c;
  }
  in->red_mask = mask;
  in->red_corr = corr;
  return true;
}

/* ---- prelude ---------------------------------------------------------------------- */

static const char *sfx(kn_dtype xdt) { return xdt == KN_FLOAT64 ? "f64" : "f32"; }

/* The accumulator's C type of row r over elements of xdt. */
static const char *acc_type(const kn__red_row *r, kn_dtype xdt) {
  return r->acc == KN__RACC_WIDE ? "double" : kn__ind_ctype(xdt);
}

static void row_functions(kn__sb *sb, const kn__red_row *r, kn_dtype xdt) {
  const char *A = acc_type(r, xdt), *T = kn__ind_ctype(xdt), *s = sfx(xdt);
  if (r->ordered)
    kn__sb_printf(sb, "static inline int kn_red_better_%s_%s(%s acc, %s x) { return %s; }\n",
                  r->kname, s, T, T, r->better);
  kn__sb_printf(sb,
                "static inline %s kn_red_prep_%s_%s(%s x, %s c) { (void)c; return %s; }\n"
                "static inline %s kn_red_comb_%s_%s(%s acc, %s x) { return %s; }\n",
                A, r->kname, s, A, A, r->prep, A, r->kname, s, A, A, r->combine);
}

/* Does a used row's text call a helper of KN__RED_HELPERS? */
static bool uses_helpers(bool used[KN__RED_COUNT][2]) {
  for (int k = 0; k < KN__RED_COUNT; k++) {
    const kn__red_row *r = &kn__red_rows[k];
    if ((used[k][0] || used[k][1]) &&
        (strstr(r->prep, "kn__red_") || strstr(r->combine, "kn__red_") ||
         strstr(r->finalize, "kn__red_")))
      return true;
  }
  return false;
}

kn_status kn__ind_red_prelude(const kn__ind_plan *p, kn__sb *sb) {
  bool used[KN__RED_COUNT][2] = {{false}}, any = false;
  for (int i = 0; i < p->nnodes; i++) {
    const kn__ind_node *in = &p->nodes[i];
    if (in->kind != KN__IND_RED) continue;
    const kn__gnode *n = kn__graph_node(p->g, i);
    bool d = n->args[0].u.t.node->meta[n->args[0].u.t.idx].dtype == KN_FLOAT64;
    used[in->red->kind][d] = any = true;
    if (in->red->pre != KN__RED_NONE) used[in->red->pre][d] = true;
  }
  if (!any) return KN_OK;
  kn__sb_puts(sb, "/* reductions: rows of the eager kernels' table (ops/reduce_table.def) */\n");
  if (uses_helpers(used)) kn__sb_puts(sb, KN__RED_HELPERS_TEXT "\n");
  for (int k = 0; k < KN__RED_COUNT; k++) {
    const kn__red_row *r = &kn__red_rows[k];
    for (int d = 0; d < 2; d++)
      if (used[k][d]) row_functions(sb, r, d ? KN_FLOAT64 : KN_FLOAT32);
    if (used[k][0] || used[k][1])
      kn__sb_printf(sb, "static inline double kn_red_fin_%s(double acc, double n, double corr, "
                    "double c) { (void)n; (void)corr; (void)c; return %s; }\n", r->kname,
                    r->finalize);
  }
  kn__sb_puts(sb, "\n");
  return kn__sb_failed(sb) ? kn__oom() : KN_OK;
}

/* ---- lanes ------------------------------------------------------------------------- */

/* A one-value row whose NaN wins: its lanes keep NaN flags. */
static bool nan_flags(const kn__red_row *r) {
  return r->shape == KN__RSHAPE_FOLD && r->nan == KN__RNAN_WINS;
}

const kn__red_row *kn__ind_red_pass_row(const kn__ind_node *in, int pass) {
  return in->red->pre != KN__RED_NONE && pass == 0 ? &kn__red_rows[in->red->pre] : in->red;
}

/* The row's constant c as C text: the center of a CENTERED row, else the
** literal (exact: %.17g). */
static void c_text(char *buf, size_t len, const kn__ind_node *in, int id) {
  if (in->red->pre != KN__RED_NONE) snprintf(buf, len, "ctr%d", id);
  else if (isfinite(in->red_c)) snprintf(buf, len, "%.17g", in->red_c);
  else snprintf(buf, len, "%sINFINITY", in->red_c < 0 ? "-" : "");
}

void kn__ind_red_xv(char *buf, size_t len, const kn__ind_node *in, int id, kn_dtype xdt,
                    int pass) {
  const kn__red_row *r = kn__ind_red_pass_row(in, pass);
  if (!r->prepped) {
    snprintf(buf, len, "x");
    return;
  }
  char c[48];
  c_text(c, sizeof c, in, id);
  snprintf(buf, len, "kn_red_prep_%s_%s(x, %s)", r->kname, sfx(xdt), c);
}

void kn__ind_red_lanes_open(kn__sb *sb, const kn__red_row *r, int id, kn_dtype xdt) {
  kn__sb_printf(sb, "    %s lane%d[16];\n", acc_type(r, xdt), id);
  if (r->shape == KN__RSHAPE_INDEX) kn__sb_printf(sb, "    int64_t ilane%d[16];\n", id);
  if (nan_flags(r)) kn__sb_printf(sb, "    int nan%d[16];\n", id);
  kn__sb_printf(sb, "    for (int l = 0; l < 16; l++) { lane%d[l] = %s;", id, r->init_text);
  if (r->shape == KN__RSHAPE_INDEX) kn__sb_printf(sb, " ilane%d[l] = 0;", id);
  if (nan_flags(r)) kn__sb_printf(sb, " nan%d[l] = 0;", id);
  kn__sb_puts(sb, " }\n");
}

void kn__ind_red_update(kn__sb *sb, const kn__red_row *r, int id, kn_dtype xdt, const char *l,
                        const char *x, const char *idx) {
  const char *s = sfx(xdt);
  if (r->shape == KN__RSHAPE_INDEX)
    kn__sb_printf(sb, "{ const int b_ = kn_red_better_%s_%s(lane%d[%s], %s); "
                  "ilane%d[%s] = b_ ? %s : ilane%d[%s]; lane%d[%s] = b_ ? %s : lane%d[%s]; }\n",
                  r->kname, s, id, l, x, id, l, idx, id, l, id, l, x, id, l);
  else if (nan_flags(r))
    kn__sb_printf(sb, "{ lane%d[%s] = kn_red_comb_%s_%s(lane%d[%s], %s); nan%d[%s] |= %s != %s; }\n",
                  id, l, r->kname, s, id, l, x, id, l, x, x);
  else
    kn__ind_red_update_named(sb, r, xdt, "lane", id, l, x);
}

void kn__ind_red_lanes_named(kn__sb *sb, const kn__red_row *r, kn_dtype xdt, const char *name,
                             int id, bool in_row) {
  const char *ind = in_row ? "    " : "  ";
  kn__sb_printf(sb, "%s%s %s%d[16];\n%sfor (int l = 0; l < 16; l++) %s%d[l] = %s;\n", ind,
                acc_type(r, xdt), name, id, ind, name, id, r->init_text);
}

void kn__ind_red_update_named(kn__sb *sb, const kn__red_row *r, kn_dtype xdt, const char *name,
                              int id, const char *l, const char *x) {
  kn__sb_printf(sb, "%s%d[%s] = kn_red_comb_%s_%s(%s%d[%s], %s);\n", name, id, l, r->kname,
                sfx(xdt), name, id, l, x);
}

void kn__ind_red_lanes_close(kn__sb *sb, const kn__red_row *r, int id, kn_dtype xdt) {
  const char *s = sfx(xdt);
  kn__sb_printf(sb, "    %s acc%d = lane%d[0];\n", acc_type(r, xdt), id, id);
  if (r->shape != KN__RSHAPE_INDEX) {
    kn__sb_printf(sb, "    for (int l = 1; l < 16; l++) acc%d = kn_red_comb_%s_%s(acc%d, lane%d[l]);\n",
                  id, r->kname, s, id, id);
    if (nan_flags(r))
      kn__sb_printf(sb, "    for (int l = 0; l < 16; l++) if (nan%d[l]) acc%d = NAN;\n", id, id);
    return;
  }
  kn__sb_printf(sb, "    int64_t iacc%d = ilane%d[0];\n    for (int l = 1; l < 16; l++) {\n"
                "      const int tie_ = lane%d[l] == acc%d || (lane%d[l] != lane%d[l] && acc%d != acc%d);\n"
                "      if (kn_red_better_%s_%s(acc%d, lane%d[l]) || (tie_ && ilane%d[l] < iacc%d))\n"
                "        { acc%d = lane%d[l]; iacc%d = ilane%d[l]; }\n    }\n",
                id, id, id, id, id, id, id, id, r->kname, s, id, id, id, id, id, id, id, id);
}

void kn__ind_red_result(kn__sb *sb, const kn__ind_node *in, int id, kn_dtype odt) {
  const char *ot = kn__ind_ctype(odt);
  if (in->red->shape == KN__RSHAPE_INDEX)
    kn__sb_printf(sb, "    const %s v%d = iacc%d;\n", ot, id, id);
  else {
    char c[48];
    c_text(c, sizeof c, in, id);
    kn__sb_printf(sb, "    const %s v%d = (%s)kn_red_fin_%s(acc%d, (double)red, %lld.0, %s);\n",
                  ot, id, ot, in->red->kname, id, (long long)in->red_corr, c);
  }
}

void kn__ind_red_center(kn__sb *sb, const kn__ind_node *in, int id) {
  kn__sb_printf(sb, "    ctr%d = kn_red_fin_%s(acc%d, (double)red, 0.0, 0.0);\n", id,
                kn__red_rows[in->red->pre].kname, id);
}
