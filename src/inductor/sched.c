/*
** inductor/sched.c: the scheduler. Given the kinds of lower.c, it decides
** which nodes share a kernel and which values exist in memory.
**
** 0. Constants (pointwise nodes without tensor inputs) that only pointwise
**    nodes read are expressions in their readers: no kernel, no buffer.
** 1. Reduction groups, in graph order. A reduction starts a group over its
**    input's sizes S and its reduced dims (or joins the group its input
**    comes from, or, horizontally, an independent group of the same S and
**    dims); the pointwise producers of its input join it as a prologue, and
**    pointwise consumers join it when their sizes are S (per element) or S
**    with the reduced dims 1 (per row: computed once per row, e.g. the rstd
**    of a layer norm). Softmax, layer norm, batch norm and log_softmax are
**    each one group: one kernel that makes a few passes over each row.
** 2. A pointwise node outside groups is inlined into its only user when that
**    user is a pointwise node of the same sizes outside groups (a chain is
**    one loop), or recomputed in each of several readers when it is one
**    cheap formula over inputs every reader reads itself.
** 3. Horizontal fusion: pointwise kernels of the same sizes that read a
**    common buffer are one loop writing several outputs. A kernel that
**    reads the output of such a loop joins it too (vertically): the loop
**    stores that value and hands it on in a register (an optimizer's new
**    exp_avg, kept in its state and read by the parameter's update).
** 4. Slots: a node gets a buffer only when something outside its kernel
**    reads it (another kernel, an extern call, the graph's output).
** 5. Epilogues (sched_epi.c, when the target runs them): a pointwise kernel
**    reading the whole output of a GEMM / convolution extern call runs in
**    that call, over blocks of its output.
**
** Capacities: a kernel reads at most KN__KER_MAX_READS buffers. Steps 1-3
** split rather than exceed it (a member refused, an inlined operand
** stored, a horizontal root refused), so no kernel is ever failed or
** truncated for its size.
**
** Order: a group runs where its last member is. A node may join only if
** every reader outside the group comes after that point, so no kernel or
** extern call reads a value before it is written. Graphs with in-place ops
** are not fused at all (a mutation could be reordered).
**
** The `schedule` artifact lists the kernels in order; `fusion` logs every
** decision with its reason.
*/
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "inductor/inductor.h"
#include "logging/log.h"
#include "ops/opfacts.h"

#define KN__STR_(x) #x
#define KN__STR(x) KN__STR_(x)

/* A set of values (node, output), the buffers a kernel reads. */
typedef struct vref { int node, idx; } vref;
typedef struct vset { int n, cap; vref *v; } vset;

typedef struct sctx {
  kn__ind_plan *p;
  int nn;
  int *uoff, *uidx; /* users of node i: uidx[uoff[i] .. uoff[i + 1]) */
  bool fusion_log;
  vset *reads;      /* [nn] pointwise node outside groups: what its loop would read */
  vset *greads;     /* [ngroups] what each group's kernel reads */
  int ngreads;
  vset tmp;         /* scratch */
} sctx;

static const kn__gnode *node(const sctx *s, int i) { return kn__graph_node(s->p->g, i); }

static bool same_sizes(const kn__vmeta *a, const kn__vmeta *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d].c != b->sizes[d].c || a->sizes[d].e != b->sizes[d].e) return false;
  return true;
}

/* ---- users ------------------------------------------------------------------- */
static void each_input(const kn__gnode *n, void (*f)(void *, int), void *ud) {
  for (int a = 0; a < n->nargs; a++) {
    const kn__garg *ga = &n->args[a];
    if (ga->kind == KN__GA_TENSOR && ga->u.t.node) f(ud, ga->u.t.node->index);
    for (int j = 0; ga->kind == KN__GA_TENSORS && j < ga->u.ts.n; j++)
      if (ga->u.ts.v[j].node) f(ud, ga->u.ts.v[j].node->index);
  }
}

typedef struct ucount { sctx *s; int at; } ucount;
static void count_use(void *ud, int i) { ((sctx *)ud)->uoff[i + 1]++; }
static void put_use(void *ud, int i) {
  ucount *u = ud;
  u->s->uidx[u->s->uoff[i]++] = u->at;
}

static kn_status build_users(sctx *s) {
  s->uoff = calloc((size_t)s->nn + 2, sizeof *s->uoff);
  if (!s->uoff) return kn__oom();
  for (int i = 0; i < s->nn; i++) each_input(node(s, i), count_use, s);
  for (int i = 0; i < s->nn; i++) s->uoff[i + 1] += s->uoff[i];
  s->uidx = malloc(((size_t)s->uoff[s->nn] + 1) * sizeof *s->uidx);
  if (!s->uidx) return kn__oom();
  for (int i = 0; i < s->nn; i++) { /* fill, shifting uoff up by one slot */
    ucount u = {s, i};
    each_input(node(s, i), put_use, &u);
  }
  for (int i = s->nn; i > 0; i--) s->uoff[i] = s->uoff[i - 1];
  s->uoff[0] = 0;
  return KN_OK;
}

/* ---- logging ------------------------------------------------------------------- */
static void fusion_log(const sctx *s, const char *fmt, const char *a, const char *b, int gi) {
  if (!s->fusion_log) return;
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a, b, gi);
  KN_LOG_ARTIFACT(KN_ART_FUSION, "fusion: %s", msg);
}

static void fusion_logf(const sctx *s, const char *fmt, ...) {
  if (!s->fusion_log) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  KN_LOG_ARTIFACT(KN_ART_FUSION, "fusion: %s", msg);
}

static void put_sizes(kn__sb *sb, const kn__vmeta *m) {
  kn__sb_putc(sb, '[');
  for (int d = 0; d < m->ndim; d++) {
    char buf[64];
    kn__sym_format(m->sizes[d], buf, sizeof buf);
    kn__sb_printf(sb, "%s%s", d ? ", " : "", buf);
  }
  kn__sb_putc(sb, ']');
}

/* ---- capacity: the buffers one kernel reads -------------------------------------- */
/* At most KN__KER_MAX_READS distinct buffers per kernel. Where fusing
** would read more, the scheduler splits: a reduction group refuses the
** member (it starts or joins another kernel), a pointwise chain stores
** the operand with the most reads in a buffer of its own (its own kernel),
** a horizontal set refuses the root. */
static bool vset_has(const vset *s, vref r) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i].node == r.node && s->v[i].idx == r.idx) return true;
  return false;
}

static kn_status vset_add(vset *s, vref r) {
  if (vset_has(s, r)) return KN_OK;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    vref *v = realloc(s->v, (size_t)cap * sizeof *v);
    if (!v) return kn__oom();
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = r;
  return KN_OK;
}

static kn_status vset_union(vset *s, const vset *o) {
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < o->n; i++) st = vset_add(s, o->v[i]);
  return st;
}

static void vset_remove(vset *s, vref r) {
  for (int i = 0; i < s->n; i++)
    if (s->v[i].node == r.node && s->v[i].idx == r.idx) {
      s->v[i] = s->v[--s->n];
      return;
    }
}

static void vset_free(vset *s) {
  free(s->v);
  *s = (vset){0, 0, NULL};
}

/* ---- groups ---------------------------------------------------------------------- */
static const kn__gnode *arg_node(const kn__gnode *n, int a) {
  return n->args[a].kind == KN__GA_TENSOR ? n->args[a].u.t.node : NULL;
}

static int nopnds(const sctx *s, const kn__gnode *n) {
  const kn__ind_node *in = &s->p->nodes[n->index];
  int k = in->kind == KN__IND_RED ? 1 : in->f.nopnds;
  return k < n->nargs ? k : n->nargs;
}

/* m's sizes are S's with the reduced dims 1 (or m is 0-dim and the group
** reduces every dim: one row). */
static bool row_sized(const kn__vmeta *m, const kn__ind_group *g) {
  const kn__vmeta *sp = g->space;
  if (m->ndim == 0 && g->mask == (1u << sp->ndim) - 1) return true;
  if (m->ndim != sp->ndim) return false;
  for (int d = 0; d < m->ndim; d++) {
    kn_sym want = (g->mask >> d) & 1 ? kn__sym_const(1) : sp->sizes[d];
    if (m->sizes[d].c != want.c || m->sizes[d].e != want.e) return false;
  }
  return true;
}

/* A 0-dim pointwise node that reads no tensor (a `full`) with one user:
** computed per element where that member reads it (never written: a
** per-element output would have the group's sizes). */
static bool constant_scalar(const sctx *s, const kn__gnode *n) {
  if (n->meta[0].ndim != 0 || n->nusers != 1) return false;
  for (int a = 0; a < nopnds(s, n); a++)
    if (arg_node(n, a)) return false;
  return true;
}

/* Can n be a member of group g (*row: per row)? Its operands that are
** members must be readable where n is computed. */
static bool fits(const sctx *s, int gi, const kn__gnode *n, bool *row) {
  const kn__ind_group *g = &s->p->groups[gi];
  const kn__ind_node *in = &s->p->nodes[n->index];
  if (in->kind == KN__IND_RED) {
    const kn__gnode *x = arg_node(n, 0);
    if (in->red_mask != g->mask || !same_sizes(&x->meta[n->args[0].u.t.idx], g->space)) return false;
    *row = true;
  } else if (in->kind == KN__IND_PW) {
    if (same_sizes(&n->meta[0], g->space) || constant_scalar(s, n)) *row = false;
    else if (row_sized(&n->meta[0], g)) *row = true;
    else return false;
  } else {
    return false;
  }
  for (int a = 0; a < nopnds(s, n); a++) {
    const kn__gnode *m = arg_node(n, a);
    if (!m || s->p->nodes[m->index].group != gi) continue;
    bool mrow = s->p->nodes[m->index].row;
    if (in->kind == KN__IND_RED && mrow) return false;                 /* reduces a row value */
    if (*row && !mrow && in->kind != KN__IND_RED) return false;        /* impossible sizes */
    if (!*row && mrow && m->meta[0].ndim != g->space->ndim) return false; /* not keepdim */
  }
  return true;
}

static bool in_set(const int *v, int n, int x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

/* Would adding node `add` keep every reader outside the group after the
** group's run point? */
static bool order_ok(const sctx *s, int gi, int add) {
  const kn__ind_group *g = &s->p->groups[gi];
  int root = g->root > add ? g->root : add;
  for (int k = 0; k <= g->nmembers; k++) {
    int m = k < g->nmembers ? g->members[k] : add;
    for (int u = s->uoff[m]; u < s->uoff[m + 1]; u++) {
      int user = s->uidx[u];
      if (user != add && !in_set(g->members, g->nmembers, user) && user <= root) return false;
    }
  }
  return true;
}

/* A value that a member of group gi reads from memory (not a member, not
** a recomputed constant)? */
static bool group_leaf(const sctx *s, int gi, const kn__gnode *m) {
  return m && s->p->nodes[m->index].group != gi && !s->p->nodes[m->index].expr;
}

/* How many buffers group gi's kernel would read with n as a member. */
static int reads_with(sctx *s, int gi, const kn__gnode *n) {
  const vset *gr = &s->greads[gi];
  int count = gr->n - vset_has(gr, (vref){n->index, 0});
  s->tmp.n = 0;
  for (int a = 0; a < nopnds(s, n); a++) {
    const kn__gnode *m = arg_node(n, a);
    vref r = {m ? m->index : -1, n->args[a].u.t.idx};
    if (!group_leaf(s, gi, m) || vset_has(gr, r) || vset_has(&s->tmp, r)) continue;
    if (vset_add(&s->tmp, r) != KN_OK) return INT32_MAX;
    count++;
  }
  return count;
}

/* Node i joins group gi's reads: its value is no longer read, its operands are. */
static kn_status add_reads(sctx *s, int gi, const kn__gnode *n) {
  vset *gr = &s->greads[gi];
  vset_remove(gr, (vref){n->index, 0});
  kn_status st = KN_OK;
  for (int a = 0; st == KN_OK && a < nopnds(s, n); a++) {
    const kn__gnode *m = arg_node(n, a);
    if (group_leaf(s, gi, m)) st = vset_add(gr, (vref){m->index, n->args[a].u.t.idx});
  }
  return st;
}

static kn_status add_member(sctx *s, int gi, int i, bool row) {
  kn__ind_group *g = &s->p->groups[gi];
  s->p->nodes[i].group = gi;
  if (add_reads(s, gi, node(s, i)) != KN_OK) return kn_last_status();
  int *v = realloc(g->members, ((size_t)g->nmembers + 1) * sizeof *v);
  if (!v) return kn__oom();
  g->members = v;
  int at = g->nmembers++;
  while (at > 0 && v[at - 1] > i) { /* keep ascending */
    v[at] = v[at - 1];
    at--;
  }
  v[at] = i;
  if (i > g->root) g->root = i;
  s->p->nodes[i].row = row;
  return KN_OK;
}

static int new_group(sctx *s, const kn__gnode *r) {
  kn__ind_plan *p = s->p;
  kn__ind_group *v = realloc(p->groups, ((size_t)p->ngroups + 1) * sizeof *v);
  if (!v) return kn__oom(), -1;
  p->groups = v;
  vset *gr = realloc(s->greads, ((size_t)p->ngroups + 1) * sizeof *gr);
  if (!gr) return kn__oom(), -1;
  s->greads = gr;
  gr[p->ngroups] = (vset){0, 0, NULL};
  s->ngreads = p->ngroups + 1;
  v[p->ngroups] = (kn__ind_group){&arg_node(r, 0)->meta[r->args[0].u.t.idx],
                                  p->nodes[r->index].red_mask, r->index, 0, NULL};
  return p->ngroups++;
}

/* Try to add n to group gi (logged either way when why != NULL). */
static kn_status try_join(sctx *s, int gi, const kn__gnode *n, const char *how, bool *joined) {
  bool row = false;
  *joined = false;
  const char *root = node(s, s->p->groups[gi].members[0])->name;
  if (!fits(s, gi, n, &row)) {
    if (how) fusion_log(s, "%s not fused into group of %s (kernel %d): sizes differ from the "
                        "group's rows", n->name, root, gi);
    return KN_OK;
  }
  if (!order_ok(s, gi, n->index)) {
    fusion_log(s, "%s not fused into group of %s (kernel %d): a node outside the group reads "
               "a member before the group would run", n->name, root, gi);
    return KN_OK;
  }
  if (reads_with(s, gi, n) > KN__KER_MAX_READS) {
    fusion_logf(s, "%s not fused into group of %s (kernel %d): the kernel would read more than "
                "%d buffers (split)", n->name, root, gi, KN__KER_MAX_READS);
    return KN_OK;
  }
  kn_status st = add_member(s, gi, n->index, row);
  if (st == KN_OK && how && s->fusion_log) {
    char msg[160];
    snprintf(msg, sizeof msg, "%%s fused into group of %%s (kernel %%d): %s, %s", how,
             row ? "once per row" : "per element");
    fusion_log(s, msg, n->name, root, gi);
  }
  *joined = st == KN_OK;
  return st;
}

/* Pull the pointwise producers of n's operands into group gi (prologue). */
static kn_status absorb(sctx *s, int gi, const kn__gnode *n) {
  for (int a = 0; a < nopnds(s, n); a++) {
    const kn__gnode *q = arg_node(n, a);
    if (!q || s->p->nodes[q->index].kind != KN__IND_PW || s->p->nodes[q->index].group >= 0 ||
        s->p->nodes[q->index].expr)
      continue;
    bool joined;
    kn_status st = try_join(s, gi, q, "producer (prologue)", &joined);
    if (st == KN_OK && joined) st = absorb(s, gi, q);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* The only group among n's operands' groups (-1: none; -2: several). */
static int operand_group(const sctx *s, const kn__gnode *n) {
  int gi = -1;
  for (int a = 0; a < nopnds(s, n); a++) {
    const kn__gnode *m = arg_node(n, a);
    int g = m ? s->p->nodes[m->index].group : -1;
    if (g >= 0 && gi >= 0 && g != gi) return -2;
    if (g >= 0) gi = g;
  }
  return gi;
}

/* A pointwise node joins the first group among its operands' groups that
** takes it (the members of the others are read from memory). */
static kn_status join_operand_group(sctx *s, const kn__gnode *n) {
  int tried[8], nt = 0;
  bool joined = false;
  kn_status st = KN_OK;
  for (int a = 0; st == KN_OK && !joined && a < nopnds(s, n); a++) {
    const kn__gnode *m = arg_node(n, a);
    int gi = m ? s->p->nodes[m->index].group : -1;
    if (gi < 0 || in_set(tried, nt, gi) || nt == 8) continue;
    tried[nt++] = gi;
    st = try_join(s, gi, n, "reads a member", &joined);
    if (st == KN_OK && joined) st = absorb(s, gi, n); /* its producers outside groups */
  }
  return st;
}

static kn_status place_reduction(sctx *s, const kn__gnode *n) {
  bool joined = false;
  int gi = operand_group(s, n);
  kn_status st = gi >= 0 ? try_join(s, gi, n, "reduces a member", &joined) : KN_OK;
  for (int h = 0; st == KN_OK && !joined && h < s->p->ngroups; h++) {
    bool row;
    if (h != gi && fits(s, h, n, &row) && order_ok(s, h, n->index))
      st = try_join(s, h, n, "horizontal: same rows, independent", &joined);
    if (joined) gi = h;
  }
  if (st == KN_OK && !joined) {
    gi = new_group(s, n);
    if (gi < 0) return kn_last_status();
    st = add_member(s, gi, n->index, true);
    fusion_log(s, "%s starts group of %s (kernel %d): a reduction", n->name, n->name, gi);
  }
  return st == KN_OK ? absorb(s, gi, n) : st;
}

static kn_status form_groups(sctx *s) {
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < s->nn; i++) {
    const kn__gnode *n = node(s, i);
    kn__ind_node *in = &s->p->nodes[i];
    if (in->kind == KN__IND_RED) {
      st = place_reduction(s, n);
    } else if (in->kind == KN__IND_PW && in->group < 0 && !in->expr) {
      st = join_operand_group(s, n);
    }
  }
  return st;
}

/* ---- inlining and slots ----------------------------------------------------------- */
static bool outside_user(const sctx *s, int i) {
  int gi = s->p->nodes[i].group;
  for (int u = s->uoff[i]; u < s->uoff[i + 1]; u++)
    if (s->p->nodes[s->uidx[u]].group != gi || gi < 0) return true;
  return false;
}

/* ---- recomputation ----------------------------------------------------------------- */
/* Cheap enough to compute again in every reader: a pointwise node whose
** op's recompute class (ops/ops_facts.def, the partitioner's policy too) is
** CHEAP: a memory-bound formula, a cast, a where or a constant; never a
** transcendental. Reductions are never recomputed. */
static bool cheap(const sctx *s, int i) {
  return s->p->nodes[i].kind == KN__IND_PW && kn__op_cheap(node(s, i)->opdef->id);
}

static bool tensor_operands(const sctx *s, const kn__gnode *n) {
  for (int a = 0; a < nopnds(s, n); a++)
    if (arg_node(n, a)) return true;
  return false;
}

static int nreaders(const sctx *s, int i) { return s->uoff[i + 1] - s->uoff[i]; }

/* Constants (pointwise nodes without tensor inputs: full, ones, a
** scalar_tensor) that only pointwise nodes read are expressions in their
** readers, in any kernel: never a kernel or a buffer of their own. */
static void mark_constants(sctx *s) {
  for (int i = 0; i < s->nn; i++) {
    kn__ind_node *in = &s->p->nodes[i];
    const kn__gnode *n = node(s, i);
    if (in->kind != KN__IND_PW || tensor_operands(s, n) || !cheap(s, i) || nreaders(s, i) == 0)
      continue;
    bool all_pw = true;
    for (int u = s->uoff[i]; u < s->uoff[i + 1]; u++)
      all_pw &= s->p->nodes[s->uidx[u]].kind == KN__IND_PW;
    if (!all_pw) {
      fusion_logf(s, "%s is not recomputed: a constant, but a reader is not a pointwise node",
                  n->name);
      continue;
    }
    in->expr = true;
    s->p->nfused++;
    fusion_logf(s, "%s recomputed in its %d reader%s: a constant (no tensor inputs)", n->name,
                nreaders(s, i), nreaders(s, i) == 1 ? "" : "s");
  }
}

/* Does node u read value r itself (as one of its operands)? */
static bool reads_value(const sctx *s, const kn__gnode *u, kn__gref r) {
  for (int a = 0; a < nopnds(s, u); a++)
    if (arg_node(u, a) == r.node && u->args[a].u.t.idx == r.idx) return true;
  return false;
}

/* Why pointwise node i, read by several nodes, is not computed again in
** each of them; NULL when it is: one cheap operation, every reader a
** pointwise loop of the same sizes that reads i's tensor inputs itself (so
** recomputing i reads no extra memory). */
static const char *recompute_refusal(const sctx *s, int i) {
  const kn__ind_node *in = &s->p->nodes[i];
  const kn__gnode *n = node(s, i);
  if (!cheap(s, i)) return in->f.vm >= 0 ? "a transcendental function" : "not a cheap formula";
  for (int u = s->uoff[i]; u < s->uoff[i + 1]; u++) {
    const kn__gnode *un = node(s, s->uidx[u]);
    const kn__ind_node *ui = &s->p->nodes[un->index];
    if (ui->kind != KN__IND_PW || ui->group >= 0) return "a reader is not a pointwise loop";
    if (!same_sizes(&n->meta[0], &un->meta[0])) return "a reader has other sizes";
    for (int a = 0; a < nopnds(s, n); a++) {
      const kn__gnode *q = arg_node(n, a);
      if (q && !s->p->nodes[q->index].expr && !reads_value(s, un, n->args[a].u.t))
        return "a reader does not read its inputs";
    }
  }
  return NULL;
}

/* ---- inlining and slots ----------------------------------------------------------- */
/* Is n a 0-dim value read by a loop over more dims (an optimizer's bias
** correction in its update)? Inlined, it is computed once before the loop
** (codegen.c hoists 0-dim trees), not per element. */
static bool scalar_into_loop(const kn__gnode *n, const kn__gnode *un) {
  return n->meta[0].ndim == 0 && un->meta[0].ndim > 0;
}

static bool single_use_inline(const sctx *s, const kn__gnode *n, const kn__gnode *un) {
  const kn__ind_plan *p = s->p;
  return n->nusers == 1 && un && p->nodes[un->index].kind == KN__IND_PW &&
         p->nodes[un->index].group < 0 &&
         (same_sizes(&n->meta[0], &un->meta[0]) || scalar_into_loop(n, un));
}

/* What the loop of pointwise node i would read (into s->reads[i]): its
** operands' buffers, and what operands inlined into it read. */
static kn_status pw_reads(sctx *s, int i) {
  const kn__gnode *n = node(s, i);
  vset *r = &s->reads[i];
  r->n = 0;
  kn_status st = KN_OK;
  for (int a = 0; st == KN_OK && a < nopnds(s, n); a++) {
    const kn__gnode *m = arg_node(n, a);
    const kn__ind_node *mi = m ? &s->p->nodes[m->index] : NULL;
    if (!mi || mi->expr) continue;
    if (mi->inlined) st = vset_union(r, &s->reads[m->index]);
    else st = vset_add(r, (vref){m->index, n->args[a].u.t.idx});
  }
  return st;
}

/* The operand of i inlined into it alone (one reader) that reads the most
** buffers, or NULL. (A node recomputed in several readers reads only what
** each reader reads itself: storing it would add a read.) */
static const kn__gnode *widest_inlined(const sctx *s, const kn__gnode *n) {
  const kn__gnode *best = NULL;
  for (int a = 0; a < nopnds(s, n); a++) {
    const kn__gnode *m = arg_node(n, a);
    if (!m || !s->p->nodes[m->index].inlined || nreaders(s, m->index) != 1) continue;
    if (!best || s->reads[m->index].n > s->reads[best->index].n) best = m;
  }
  return best;
}

/* Split where the loop of i would read more than KN__KER_MAX_READS
** buffers: its widest inlined operands get buffers (kernels of their own),
** until it reads few enough (at most its operands). */
static kn_status split_reads(sctx *s, int i) {
  kn__ind_plan *p = s->p;
  kn_status st = pw_reads(s, i);
  while (st == KN_OK && s->reads[i].n > KN__KER_MAX_READS) {
    const kn__gnode *m = widest_inlined(s, node(s, i));
    if (!m) break;
    p->nodes[m->index].inlined = false;
    p->nodes[m->index].slot = kn__ind_new_slots(p, m, 1);
    p->nkernels++;
    p->nfused--;
    fusion_logf(s, "%s gets a buffer after all: the kernel of %s would read more than %d "
                "buffers (split; this one reads %d)", m->name, node(s, i)->name,
                KN__KER_MAX_READS, s->reads[m->index].n);
    st = pw_reads(s, i);
  }
  return st;
}

static kn_status inline_chains(sctx *s, bool allow) {
  kn__ind_plan *p = s->p;
  for (int i = 0; i < s->nn; i++) {
    kn__ind_node *in = &p->nodes[i];
    if (in->kind != KN__IND_PW || in->group >= 0 || in->expr) continue;
    if (split_reads(s, i) != KN_OK) return kn_last_status();
    const kn__gnode *n = node(s, i);
    int nu = nreaders(s, i), u = nu == 1 ? s->uidx[s->uoff[i]] : -1;
    const kn__gnode *un = u >= 0 ? node(s, u) : NULL;
    const char *why = allow && nu > 1 ? recompute_refusal(s, i) : "";
    bool inl = allow && (single_use_inline(s, n, un) || !why);
    in->inlined = inl;
    if (inl) {
      p->nfused++;
      if (un && scalar_into_loop(n, un))
        fusion_log(s, "%s inlined into %s: its only user, a 0-dim value computed once before "
                   "its loop%.0d", n->name, un->name, 0);
      else if (un)
        fusion_log(s, "%s inlined into %s: its only user, same sizes%.0d", n->name, un->name, 0);
      else fusion_logf(s, "%s recomputed in its %d readers: a cheap operation over inputs they "
                       "read too", n->name, nu);
    } else {
      in->slot = kn__ind_new_slots(p, n, 1);
      p->nkernels++;
      if (allow && un && nu == 1)
        fusion_log(s, "%s gets a buffer: its user %s is not a pointwise node of the same sizes "
                   "outside groups%.0d", n->name, un->name, 0);
      else if (allow && nu > 1)
        fusion_logf(s, "%s gets a buffer: %d readers, not recomputed: %s", n->name, nu, why);
    }
  }
  return KN_OK;
}

/* ---- horizontal fusion -------------------------------------------------------------- */
/* Pointwise kernels over the same sizes that read a common input are one
** loop writing several outputs (sin(x) and cos(x): x is read once). The
** loop runs where the set's last root is, so a root joins a set only if
** every reader of the set's members comes after it (no kernel or extern
** call would read a member before it is written, and the new root reads no
** member). */
static bool pw_root(const kn__ind_node *in) {
  return in->kind == KN__IND_PW && in->group < 0 && !in->inlined && !in->expr;
}

/* Does the loop of root r (r and the nodes inlined into it) read value v? */
static bool tree_reads(const sctx *s, const kn__gnode *r, kn__gref v, int budget) {
  for (int a = 0; a < nopnds(s, r); a++) {
    const kn__gnode *m = arg_node(r, a);
    if (!m) continue;
    if (m == v.node && r->args[a].u.t.idx == v.idx) return true;
    if (budget > 0 && s->p->nodes[m->index].inlined && tree_reads(s, m, v, budget - 1)) return true;
  }
  return false;
}

/* Do the loops of roots a and b read a common buffer? */
static bool shares_input(const sctx *s, const kn__gnode *a, const kn__gnode *b, int budget) {
  for (int q = 0; q < nopnds(s, a); q++) {
    const kn__gnode *m = arg_node(a, q);
    const kn__ind_node *mi = m ? &s->p->nodes[m->index] : NULL;
    if (!mi || mi->expr) continue;
    if (mi->inlined ? budget > 0 && shares_input(s, m, b, budget - 1)
                    : tree_reads(s, b, a->args[q].u.t, 64))
      return true;
  }
  return false;
}

/* Is root m in the set whose last root is last? */
static bool hz_member(const sctx *s, int last, int m) {
  const kn__ind_node *mi = &s->p->nodes[m];
  return pw_root(mi) && (m == last || mi->hz == last);
}

/* Does the loop of root b read a member of the set whose last root is
** last (vertical: b's loop then computes the member's value itself)? */
static bool reads_member(const sctx *s, int last, const kn__gnode *bn, int budget) {
  for (int a = 0; a < nopnds(s, bn); a++) {
    const kn__gnode *m = arg_node(bn, a);
    if (!m) continue;
    if (hz_member(s, last, m->index)) return true;
    if (budget > 0 && s->p->nodes[m->index].inlined && reads_member(s, last, m, budget - 1))
      return true;
  }
  return false;
}

/* May node u, a reader of a member of the set whose last root is last,
** read it once root b joins (the set's loop runs at b)? When u comes at or
** after b, is a member itself, or is computed inside the loop: inlined or
** recomputed only into readers that may. */
static bool reader_ok(const sctx *s, int last, int b, int u, int budget) {
  if (u >= b || hz_member(s, last, u)) return true;
  if (!s->p->nodes[u].inlined || budget <= 0) return false;
  for (int k = s->uoff[u]; k < s->uoff[u + 1]; k++)
    if (s->uidx[k] != b && !reader_ok(s, last, b, s->uidx[k], budget - 1)) return false;
  return true;
}

/* Would the loop of the set whose last root is last, with root b, read
** more than KN__KER_MAX_READS buffers? (OOM: yes, no fusion.) */
static bool hz_too_wide(sctx *s, int last, int b) {
  s->tmp.n = 0;
  bool bad = vset_union(&s->tmp, &s->reads[b]) != KN_OK;
  for (int m = 0; !bad && m <= last; m++) {
    const kn__ind_node *mi = &s->p->nodes[m];
    if (pw_root(mi) && (m == last || mi->hz == last))
      bad = vset_union(&s->tmp, &s->reads[m]) != KN_OK;
  }
  return bad || s->tmp.n > KN__KER_MAX_READS;
}

/* Why root b cannot join the set whose last root is last; NULL if it can. */
static const char *hz_refusal(sctx *s, int last, int b) {
  const kn__gnode *bn = node(s, b);
  int count = 0;
  bool shared = false, sizes = true, order = true;
  for (int m = 0; m <= last; m++) {
    if (!hz_member(s, last, m)) continue;
    sizes &= same_sizes(&node(s, m)->meta[0], &bn->meta[0]);
    for (int u = s->uoff[m]; u < s->uoff[m + 1]; u++) order &= reader_ok(s, last, b, s->uidx[u], 8);
    shared = shared || shares_input(s, node(s, m), bn, 64);
    count++;
  }
  if (!shared && !reads_member(s, last, bn, 64)) return "no common input";
  if (!sizes) return "sizes differ";
  if (!order) return "a reader of the set comes before it";
  if (count >= KN__HZ_MAX) return "the set is full";
  return hz_too_wide(s, last, b) ? "the loop would read more than " KN__STR(KN__KER_MAX_READS) " buffers (split)" : NULL;
}

static void hz_join(sctx *s, int last, int b) {
  kn__ind_plan *p = s->p;
  bool vertical = reads_member(s, last, node(s, b), 64);
  for (int m = 0; m <= last; m++)
    if (hz_member(s, last, m)) p->nodes[m].hz = b;
  p->nodes[b].hz = b;
  p->nkernels--;
  if (vertical)
    fusion_logf(s, "%s fused with %s (kernel %d): same sizes, it reads a value the loop "
                "computes", node(s, b)->name, node(s, last)->name, b);
  else
    fusion_logf(s, "%s fused horizontally with %s (kernel %d): same sizes, a common input",
                node(s, b)->name, node(s, last)->name, b);
}

/* Is every reader of node u computed in the loop of the set whose last
** root is last (a member, or a node inlined into members only)? reader_ok
** with no root joining (no reader's position counts). */
static bool read_in_set(const sctx *s, int last, int u) {
  for (int k = s->uoff[u]; k < s->uoff[u + 1]; k++)
    if (!reader_ok(s, last, INT_MAX, s->uidx[k], 8)) return false;
  return s->uoff[u + 1] > s->uoff[u];
}

/* A member of a set that only the set's own roots read (they joined it
** vertically) needs no buffer: its value stays in the loop, as an inlined
** node's does (its slot is left unused). */
static void drop_unread_members(sctx *s) {
  kn__ind_plan *p = s->p;
  for (int m = 0; m < s->nn; m++) {
    kn__ind_node *mi = &p->nodes[m];
    if (!pw_root(mi) || mi->hz < 0 || mi->hz == m || !read_in_set(s, mi->hz, m)) continue;
    fusion_logf(s, "%s is not stored: only its loop (kernel %d) reads it", node(s, m)->name,
                mi->hz);
    mi->inlined = true;
    mi->hz = -1;
    mi->slot = -1;
    p->nfused++;
  }
}

static void horizontal(sctx *s) {
  kn__ind_plan *p = s->p;
  for (int b = 0; b < s->nn; b++) {
    if (!pw_root(&p->nodes[b])) continue;
    for (int a = b - 1; a >= 0; a--) { /* each set once, through its last root */
      const kn__ind_node *ai = &p->nodes[a];
      if (!pw_root(ai) || (ai->hz >= 0 && ai->hz != a)) continue;
      const char *why = hz_refusal(s, a, b);
      if (!why) {
        hz_join(s, a, b);
        break;
      }
      if (strcmp(why, "no common input"))
        fusion_logf(s, "%s not fused horizontally with %s: %s", node(s, b)->name,
                    node(s, a)->name, why);
    }
  }
}

static void group_slots(sctx *s) {
  kn__ind_plan *p = s->p;
  for (int gi = 0; gi < p->ngroups; gi++) {
    kn__ind_group *g = &p->groups[gi];
    p->nkernels++;
    p->nfused += g->nmembers - 1;
    for (int k = 0; k < g->nmembers; k++)
      if (outside_user(s, g->members[k]))
        p->nodes[g->members[k]].slot = kn__ind_new_slots(p, node(s, g->members[k]), 1);
  }
}

/* ---- the schedule artifact ---------------------------------------------------------- */
static void schedule_log(const sctx *s) {
  if (!KN_ARTIFACT_ENABLED(KN_ART_SCHEDULE)) return;
  const kn__ind_plan *p = s->p;
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "schedule: %d kernels, %d extern calls, %d nodes fused, %d reduction groups",
                p->nkernels, p->nsteps, p->nfused, p->ngroups);
  if (p->nepilogues) kn__sb_printf(&sb, ", %d epilogues", p->nepilogues);
  kn__sb_putc(&sb, '\n');
  for (int i = 0; i < s->nn; i++) {
    const kn__ind_node *in = &p->nodes[i];
    const kn__gnode *n = node(s, i);
    if (in->kind == KN__IND_EXTERN) {
      kn__sb_printf(&sb, "  extern %s (%s)", n->name, n->target);
      if (in->epi >= 0) {
        kn__sb_printf(&sb, " + epilogue kernel %s ", node(s, in->epi)->name);
        put_sizes(&sb, &node(s, in->epi)->meta[0]);
      }
      kn__sb_putc(&sb, '\n');
    } else if (pw_root(in) && in->epi < 0 && (in->hz < 0 || in->hz == i)) {
      kn__sb_printf(&sb, "  kernel%d: pointwise", i);
      for (int m = 0; m <= i; m++)
        if (m == i || (in->hz == i && pw_root(&p->nodes[m]) && p->nodes[m].hz == i))
          kn__sb_printf(&sb, " %s", node(s, m)->name);
      kn__sb_putc(&sb, ' ');
      put_sizes(&sb, &n->meta[0]);
      kn__sb_puts(&sb, in->hz == i ? " (horizontal)\n" : "\n");
    }
    for (int gi = 0; gi < p->ngroups; gi++) {
      const kn__ind_group *g = &p->groups[gi];
      if (g->root != i) continue;
      kn__sb_printf(&sb, "  kernel%d: reduction group over ", i);
      put_sizes(&sb, g->space);
      kn__sb_puts(&sb, " reducing dims");
      for (int d = 0; d < g->space->ndim; d++)
        if ((g->mask >> d) & 1) kn__sb_printf(&sb, " %d", d);
      kn__sb_puts(&sb, ":");
      for (int k = 0; k < g->nmembers; k++) {
        const kn__ind_node *m = &p->nodes[g->members[k]];
        kn__sb_printf(&sb, " %s%s%s", node(s, g->members[k])->name,
                      m->kind == KN__IND_RED ? "(reduction)" : m->row ? "(row)" : "",
                      m->slot >= 0 ? "*" : "");
      }
      kn__sb_puts(&sb, "  (* written to memory)\n");
    }
  }
  if (!kn__sb_failed(&sb)) KN_LOG_ARTIFACT(KN_ART_SCHEDULE, "%s", kn__sb_cstr(&sb));
  kn__sb_fini(&sb);
}

kn_status kn__ind_schedule(kn__ind_plan *p, bool allow) {
  sctx s = {p, p->nnodes, NULL, NULL, KN_ARTIFACT_ENABLED(KN_ART_FUSION), NULL, NULL, 0,
            {0, 0, NULL}};
  for (int i = 0; i < p->nnodes; i++) {
    p->nodes[i].group = -1;
    p->nodes[i].hz = -1;
    p->nodes[i].expr = false;
    p->nodes[i].epi = -1;
  }
  kn_status st = build_users(&s);
  s.reads = calloc((size_t)p->nnodes + 1, sizeof *s.reads);
  if (st == KN_OK && !s.reads) st = kn__oom();
  if (!allow) fusion_log(&s, "no fusion: the graph has in-place ops%s%s%.0d", "", "", 0);
  /* without fusion, each reduction is a group of its own */
  if (st == KN_OK && allow) mark_constants(&s);
  if (st == KN_OK && allow) st = form_groups(&s);
  for (int i = 0; st == KN_OK && !allow && i < p->nnodes; i++)
    if (p->nodes[i].kind == KN__IND_RED) {
      int gi = new_group(&s, node(&s, i));
      st = gi < 0 ? kn_last_status() : add_member(&s, gi, i, true);
    }
  if (st == KN_OK) {
    st = inline_chains(&s, allow);
  }
  if (st == KN_OK) {
    if (allow) horizontal(&s);
    if (allow) drop_unread_members(&s);
    group_slots(&s);
    if (allow && p->epilogues) kn__ind_schedule_epilogues(p, s.fusion_log);
    schedule_log(&s);
  }
  free(s.uoff);
  free(s.uidx);
  for (int i = 0; s.reads && i < p->nnodes; i++) vset_free(&s.reads[i]);
  for (int g = 0; g < s.ngreads; g++) vset_free(&s.greads[g]);
  free(s.reads);
  free(s.greads);
  vset_free(&s.tmp);
  return st;
}
