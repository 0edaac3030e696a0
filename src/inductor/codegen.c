/*
** inductor/codegen.c: walking the kernel IR (kir.h) and calling the target
** (target.h, kn__ind_codegen_target), and the C targets' printer: the C
** translation unit of an IR. It prints what the IR and its memory plan
** say (buffers read and written, in place, reuse, frees); the target's
** dialect says whether loops carry OpenMP pragmas and vector-math
** functions the x86-64 vector ABI.
**
**   prelude    includes, the runtime table type, the formulas' vocabulary
**              (helpers and vector-math functions: kn__ind_formula_prelude);
**              printed by codegen_call.c
**   kernels    one static function per kernel root (or horizontal set of
**              roots): a loop over the root's sizes computing the fused
**              trees one element at a time and storing each root, or for
**              a reduction a loop over outputs, each reducing its elements
**              in order with the fused prologue; an output may be written
**              in place over an input that dies in the kernel
**   call       the entry point: the IR's items in order (extern steps,
**              kernel launches) with their buffer events (codegen_call.c)
**
** Loops: when every input of a kernel is read contiguously with the
** kernel's own sizes (or is one broadcast element), one flat loop in blocks
** (a function of a range of elements, run by a team sized from a grain when
** large: run_parts; a contiguous inner loop gcc
** vectorises); otherwise rows of the last dimension, each input's row offset
** computed from its strides (broadcast dimensions have stride 0, views are
** read through their strides: no copies). Sizes and strides that are
** symbolic are read from s[]; everything else is a literal. No user string
** reaches the source unescaped: node names in comments keep [A-Za-z0-9_.].
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/cgen.h"
#include "logging/log.h"
#include "ops/pointwise.h"
#include "ops/vmath.h"

/* A kernel over a constant space of fewer elements is printed without
** OpenMP text (small_space): twice KN_GRAIN, the prelude's smaller grain,
** below which kn_team always picks one thread. */
#define SMALL 65536

/* The names of the conversions of a dtype in generated code ("" where the
** dtype needs none): loading an element, rounding a value, storing it. */
const char *kn__cg_ld_fn(kn_dtype dt) {
  return dt == KN_BFLOAT16 ? "kn_ld_bf16" : dt == KN_FLOAT16 ? "kn_ld_f16" : "";
}
static const char *rnd_fn(kn_dtype dt) {
  return dt == KN_BFLOAT16 ? "kn_rnd_bf16" : dt == KN_FLOAT16 ? "kn_rnd_f16" : "";
}
const char *kn__cg_st_fn(kn_dtype dt) {
  return dt == KN_BFLOAT16 ? "kn_st_bf16" : dt == KN_FLOAT16 ? "kn_st_f16" : "";
}

/* "const T vN = R((T)(" for node n's value (T its value type, R its
** rounding); the expression follows, closed by "))". */
void kn__cg_value_open(kn__sb *sb, const char *indent, const kn__gnode *n) {
  kn_dtype dt = n->meta[0].dtype;
  const char *vt = kn__ind_vtype(dt);
  kn__sb_printf(sb, "%sconst %s v%d = %s((%s)(", indent, vt, n->index, rnd_fn(dt), vt);
}

/* A comment-safe copy of a name (graph names may come from user labels). */
void kn__cg_put_safe(kn__sb *sb, const char *s) {
  for (int i = 0; s && s[i] && i < 64; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    kn__sb_putc(sb, ok ? c : '_');
  }
}

/* The end of a generated statement's comment: the op's and the node's names
** (made safe for a C comment), then the comment's close and a newline. */
void kn__cg_node_comment(kn__sb *sb, const kn__gnode *n) {
  kn__cg_put_safe(sb, n->opdef->name);
  kn__sb_putc(sb, ' ');
  kn__cg_put_safe(sb, n->name);
  kn__sb_puts(sb, " */\n");
}


void kn__cg_sym_text(kctx *k, kn__sb *sb, kn_sym v) {
  if (kn__sym_is_const(v)) {
    kn__sb_printf(sb, "INT64_C(%lld)", (long long)v.c);
    return;
  }
  int i = kn__ind_symx(k->p, v);
  if (i >= k->nused && i >= 0) { /* grow the table of symbols read */
    int cap = i + 1 > 2 * k->nused ? i + 1 : 2 * k->nused;
    unsigned char *u = realloc(k->used, (size_t)cap);
    if (!u) i = -1;
    else {
      memset(u + k->nused, 0, (size_t)(cap - k->nused));
      k->used = u;
      k->nused = cap;
    }
  }
  if (i < 0) {
    k->failed = true;
    return;
  }
  k->used[i] = 1;
  kn__sb_printf(sb, "S%d", i);
}

static bool sym_is(kn_sym v, int64_t c) { return kn__sym_is_const(v) && v.c == c; }

/* The leaf of a buffer read: one of the IR item's reads (a read the IR
** does not list is an internal error: the launch passes the IR's reads). */
int kn__cg_leaf_index(kctx *k, int slot, const kn__vmeta *m) {
  for (int i = 0; i < k->nleaves; i++)
    if (k->leaves[i].slot == slot) return i;
  k->unplanned = true;
  k->alias[k->nleaves] = -1; /* capacity: every slot once (kctx_alloc) */
  k->leaves[k->nleaves] = (leaf){slot, m};
  return k->nleaves++;
}

/* Leaf read contiguously with the kernel's sizes? One element? */
bool kn__cg_leaf_same(const kctx *k, const kn__vmeta *m) { return kn__kir_same_elements(k->shape, m); }
bool kn__cg_leaf_scalar(const kn__vmeta *m) {
  for (int d = 0; d < m->ndim; d++)
    if (!sym_is(m->sizes[d], 1)) return false;
  return true;
}

/* Stride of leaf l along kernel dimension d (0 when broadcast). */
void kn__cg_leaf_stride(kctx *k, kn__sb *sb, const leaf *l, int d) {
  int ld = d - (k->shape->ndim - l->m->ndim);
  if (ld < 0 || sym_is(l->m->sizes[ld], 1)) kn__sb_puts(sb, "0");
  else kn__cg_sym_text(k, sb, l->m->strides[ld]);
}

/* The name of the pointer to leaf li: inL, or the output it is written over. */
static void leaf_ptr(const kctx *k, kn__sb *sb, int li) {
  int o = k->g ? -1 : k->alias[li];
  if (o < 0) kn__sb_printf(sb, "in%d", li);
  else if (k->nroots == 1) kn__sb_puts(sb, "out");
  else kn__sb_printf(sb, "out%d", o);
}

static void load_elem(kctx *k, kn__sb *sb, int li);
/* Leaf li's element, as a value (float16/bfloat16 widened to float). */
void kn__cg_load(kctx *k, kn__sb *sb, int li) {
  kn__sb_printf(sb, "%s(", kn__cg_ld_fn(k->leaves[li].m->dtype));
  load_elem(k, sb, li);
  kn__sb_putc(sb, ')');
}

static void load_elem(kctx *k, kn__sb *sb, int li) {
  const leaf *l = &k->leaves[li];
  if (!k->g && k->alias[li] >= 0) { /* written in place: the same element */
    leaf_ptr(k, sb, li);
    kn__sb_puts(sb, k->flat ? "[i]" : "[r * len + j]");
    return;
  }
  int rl = k->g && k->inner ? kn__cg_ramp_level(k, li) : -1;
  if (rl >= 0) kn__sb_printf(sb, "j%d", rl); /* an index ramp: the loop's index */
  else if (kn__cg_leaf_scalar(l->m)) kn__sb_printf(sb, "in%d[0]", li);
  else if (k->g && k->inner) kn__sb_printf(sb, "in%d[p%d_%d]", li, li, k->depth - 1);
  else if (k->g) kn__sb_printf(sb, "in%d[o%d]", li, li);
  else if (k->flat) kn__sb_printf(sb, "in%d[i]", li);
  else {
    kn__sb_printf(sb, "in%d[o%d + j * (", li, li);
    kn__cg_leaf_stride(k, sb, l, k->shape->ndim - 1);
    kn__sb_puts(sb, ")]");
  }
}

static void put_double(kn__sb *sb, double v) {
  if (isnan(v)) kn__sb_puts(sb, "NAN");
  else if (isinf(v)) kn__sb_puts(sb, v > 0 ? "INFINITY" : "(-INFINITY)");
  else kn__sb_printf(sb, "(%.17g)", v);
}
static void put_int(kn__sb *sb, int64_t v) {
  if (v == INT64_MIN) kn__sb_puts(sb, "INT64_MIN");
  else kn__sb_printf(sb, "INT64_C(%lld)", (long long)v);
}
static void put_scalar(kn__sb *sb, kn_scalar s) {
  if (s.kind == KN_SCALAR_FLOAT) put_double(sb, s.v.f);
  else if (s.kind == KN_SCALAR_INT) put_int(sb, s.v.i);
  else kn__sb_puts(sb, s.v.b ? "1" : "0");
}

bool kn__cg_is_root(const kctx *k, const kn__gnode *m) {
  for (int o = 0; !k->g && o < k->nroots; o++)
    if (k->roots[o] == m) return true;
  return false;
}

/* Is node m's value a local variable vM of the kernel (inlined, a group
** member, or a root of the same pointwise loop), rather than a buffer read? */
static bool is_var(const kctx *k, const kn__gnode *m) {
  const kn__ind_node *mn = &k->p->nodes[m->index];
  return mn->inlined || (k->g && mn->group == k->gi) || kn__cg_is_root(k, m);
}


/* A recomputed constant node m as an expression of its dtype. */
static void constant(kctx *k, kn__sb *sb, const kn__gnode *m) {
  kn_dtype dt = m->meta[0].dtype;
  kn__sb_printf(sb, "%s((%s)(", rnd_fn(dt), kn__ind_vtype(dt));
  kn__cg_expand(k, sb, m);
  kn__sb_puts(sb, "))");
}

/* Operand q of n as a C expression of the compute type (or bool). */
static void operand(kctx *k, kn__sb *sb, const kn__gnode *n, int q) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  const char *ct = kn__ind_ctype(q == 0 && in->f.cond_first ? KN_BOOL : in->f.ct);
  const kn__garg *a = &n->args[q];
  kn__sb_printf(sb, "((%s)", ct);
  if (a->kind == KN__GA_SCALAR) put_scalar(sb, a->u.s);
  else if (k->p->nodes[a->u.t.node->index].expr) constant(k, sb, a->u.t.node);
  else if (is_var(k, a->u.t.node)) kn__sb_printf(sb, "v%d", a->u.t.node->index);
  else if (k->hoisted == n) kn__sb_printf(sb, "ld%d_%d", n->index, q);
  else {
    const kn__gnode *m = a->u.t.node;
    kn__cg_load(k, sb, kn__cg_leaf_index(k, kn__ind_value_slot(k->p, a->u.t), &m->meta[a->u.t.idx]));
  }
  kn__sb_putc(sb, ')');
}

void kn__cg_operand(kctx *k, kn__sb *sb, const kn__gnode *n, int q) { operand(k, sb, n, q); }

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The formula's text with its vocabulary bound: operands a b c, the compute
** type T, the parameter P1 (as T) and PI (int64); other words are copied. */
void kn__cg_expand(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_formula *f = &k->p->nodes[n->index].f;
  const char *exact = k->t && k->t->inline_exact && f->vm >= 0 && kn__pw_form(f->code)->nin == 1
                          ? kn__vm_exact_c((kn__vmop)f->vm) : NULL;
  for (const char *t = exact ? exact : f->tmpl; *t;) {
    if (!ident_char(*t)) {
      kn__sb_putc(sb, *t++);
      continue;
    }
    size_t len = 1;
    while (ident_char(t[len])) len++;
    if (len == 1 && *t >= 'a' && *t <= 'c') operand(k, sb, n, *t - 'a');
    else if (len == 1 && *t == 'T') kn__sb_puts(sb, kn__ind_ctype(f->ct));
    else if (len == 2 && !strncmp(t, "P1", 2)) {
      kn__sb_printf(sb, "((%s)", kn__ind_ctype(f->ct));
      put_double(sb, f->p1);
      kn__sb_putc(sb, ')');
    } else if (len == 2 && !strncmp(t, "PI", 2)) put_int(sb, f->ip1);
    else kn__sb_printf(sb, "%.*s", (int)len, t);
    t += len;
  }
}

/* Is operand q of n read from a buffer (not a scalar, constant or variable)? */
static bool is_load(const kctx *k, const kn__gnode *n, int q) {
  const kn__garg *a = &n->args[q];
  if (a->kind != KN__GA_TENSOR || k->p->nodes[a->u.t.node->index].expr) return false;
  return !is_var(k, a->u.t.node);
}

/* A formula that evaluates an operand only on some condition (?:, && or ||)
** gets its buffer reads as statements first: every element is then read
** unconditionally. gcc 12 at -O3 with AVX or AVX2 (not SSE, not AVX-512)
** if-converts a conditional read inside a reduction's row loop into a
** masked load with a wrong mask and returned a wrong sum (threshold_backward
** read in the sum of a backward graph: half its terms); plain loads and a
** select are also what every vector ISA does best. */
void kn__cg_hoist_loads(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  const char *t = in->f.tmpl;
  k->hoisted = NULL;
  if (!strchr(t, '?') && !strstr(t, "&&") && !strstr(t, "||")) return;
  for (int q = 0; q < in->f.nopnds && q < n->nargs; q++) {
    if (!is_load(k, n, q)) continue;
    const char *ct = kn__ind_ctype(q == 0 && in->f.cond_first ? KN_BOOL : in->f.ct);
    const kn__gnode *m = n->args[q].u.t.node;
    kn__sb_printf(sb, "      const %s ld%d_%d = (%s)", ct, n->index, q, ct);
    kn__cg_load(k, sb, kn__cg_leaf_index(k, kn__ind_value_slot(k->p, n->args[q].u.t), &m->meta[n->args[q].u.t.idx]));
    kn__sb_puts(sb, ";\n");
  }
  k->hoisted = n;
}

/* Statements before a kernel's loop computing the 0-dim values inlined in
** the tree of n (the scheduler's scalar_into_loop): once per call instead
** of once per element; the loop reads them as variables. */
static void hoist_scalars(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  for (int q = 0; q < in->f.nopnds && q < n->nargs; q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind != KN__GA_TENSOR || !k->p->nodes[a->u.t.node->index].inlined) continue;
    if (a->u.t.node->meta[a->u.t.idx].ndim == 0) kn__cg_stmts(k, sb, a->u.t.node);
    else hoist_scalars(k, sb, a->u.t.node);
  }
}

/* Statements computing the tree of n, producers first (a root of the same
** loop that n reads among them: the loop's roots come in graph order, so in
** its last loop it is computed already; a staging loop computes it again). */
void kn__cg_stmts(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  if (k->done[n->index]) return; /* recomputed nodes read twice: once per element */
  k->done[n->index] = 1;
  if (k->blk && k->blk[n->index]) { /* computed for the block (codegen_vmblock.c) */
    kn__cg_value_open(sb, "      ", n);
    kn__sb_printf(sb, "vmo%d[l]));  /* ", n->index);
    kn__cg_node_comment(sb, n);
    return;
  }
  for (int q = 0; q < in->f.nopnds && q < n->nargs; q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind == KN__GA_TENSOR &&
        (k->p->nodes[a->u.t.node->index].inlined || kn__cg_is_root(k, a->u.t.node)))
      kn__cg_stmts(k, sb, a->u.t.node);
  }
  kn__cg_hoist_loads(k, sb, n);
  kn__cg_value_open(sb, "      ", n);
  kn__cg_expand(k, sb, n);
  k->hoisted = NULL;
  kn__sb_puts(sb, "));  /* ");
  kn__cg_node_comment(sb, n);
}

void kn__cg_numel_text(kctx *k, kn__sb *sb, int ndim) {
  kn__sb_puts(sb, "INT64_C(1)");
  for (int d = 0; d < ndim; d++) {
    kn__sb_puts(sb, " * ");
    kn__cg_sym_text(k, sb, k->shape->sizes[d]);
  }
}

/* The name of output o of a pointwise kernel: out (one root) or outO. */
static void out_ptr(const kctx *k, kn__sb *sb, int o) {
  if (k->nroots == 1) kn__sb_puts(sb, "out");
  else kn__sb_printf(sb, "out%d", o);
}

/* The stores of every root at element `at` (after all values: a leaf
** written in place is read before its element is written). */
static void stores(const kctx *k, kn__sb *sb, const char *at) {
  for (int o = 0; o < k->nroots; o++) {
    kn__sb_puts(sb, "      ");
    out_ptr(k, sb, o);
    kn__sb_printf(sb, "[%s] = %s(v%d);\n", at, kn__cg_st_fn(k->roots[o]->meta[0].dtype),
                  k->roots[o]->index);
  }
}

void kn__cg_stores(const kctx *k, kn__sb *sb, const char *at) { stores(k, sb, at); }

/* Is the kernel's space known at compile time to hold fewer than SMALL
** elements (every size a constant)? Such a kernel's team is always one
** thread (kn_team's grains are at least SMALL / 2), so it is printed
** without any OpenMP text. */
static bool small_space(const kctx *k) {
  int64_t n = 1;
  if (!k->shape) return false;
  for (int d = 0; d < k->shape->ndim; d++) {
    kn_sym v = k->shape->sizes[d];
    if (!kn__sym_is_const(v) || v.c < 0 || (v.c > 0 && n > SMALL / v.c)) return false;
    n *= v.c;
  }
  return n < SMALL;
}

/* The loop over a pointwise kernel's elements [lo, hi) in blocks. */
static void flat_loop(kctx *k, kn__sb *sb, const char *body) {
  kn__sb_puts(sb, "  for (int64_t b = lo; b < hi; b += KN_BLOCK) {\n"
                  "    const int64_t e = hi - b < KN_BLOCK ? hi : b + KN_BLOCK;\n"
                  "    for (int64_t i = b; i < e; i++) {\n");
  kn__sb_puts(sb, body);
  stores(k, sb, "i");
  kn__sb_puts(sb, "    }\n  }\n");
}

/* Start of a row-offset computation: t = idx and a zero offset per leaf. */
void kn__cg_offsets_begin(kctx *k, kn__sb *sb, const char *idx) {
  kn__sb_printf(sb, "    int64_t t = %s;\n", idx);
  for (int li = 0; li < k->nleaves; li++) kn__sb_printf(sb, "    int64_t o%d = 0;\n", li);
}

/* Peel dim d's index off t and add it to every leaf's offset. */
void kn__cg_offsets_dim(kctx *k, kn__sb *sb, int d) {
  kn__sb_puts(sb, "    {\n      const int64_t sz = ");
  kn__cg_sym_text(k, sb, k->shape->sizes[d]);
  kn__sb_puts(sb, ", id = t % sz;\n      t /= sz;\n");
  for (int li = 0; li < k->nleaves; li++) {
    kn__sb_printf(sb, "      o%d += id * (", li);
    kn__cg_leaf_stride(k, sb, &k->leaves[li], d);
    kn__sb_puts(sb, ");\n");
  }
  kn__sb_puts(sb, "    }\n");
}

/* Row offsets of every leaf for the outer index `idx` (dims [0, nd - rk)). */
static void outer_offsets(kctx *k, kn__sb *sb, int nd, int rk, const char *idx) {
  kn__cg_offsets_begin(k, sb, idx);
  for (int d = nd - rk - 1; d >= 0; d--) kn__cg_offsets_dim(k, sb, d);
}

/* The loop over a pointwise kernel's rows [lo, hi) (of the last dim). */
static void row_loop(kctx *k, kn__sb *sb, const char *body) {
  int nd = k->shape->ndim;
  kn__sb_puts(sb, "  const int64_t len = ");
  kn__cg_sym_text(k, sb, k->shape->sizes[nd - 1]);
  kn__sb_puts(sb, ";\n");
  kn__sb_puts(sb, "  for (int64_t r = lo; r < hi; r++) {\n");
  outer_offsets(k, sb, nd, 1, "r");
  kn__sb_puts(sb, "    for (int64_t j = 0; j < len; j++) {\n");
  kn__sb_puts(sb, body);
  stores(k, sb, "r * len + j");
  kn__sb_puts(sb, "    }\n  }\n");
}

/* One call of part function fn over all n pieces: fn(0, n, ...), or
** fn(base, base + n, ...) when the pieces start at base. */
static void whole_call(kn__sb *sb, const char *ind, const char *fn, const char *base,
                       const char *n, const char *args) {
  if (base) kn__sb_printf(sb, "%s%s(%s, %s + %s%s);\n", ind, fn, base, base, n, args);
  else kn__sb_printf(sb, "%s%s(0, %s%s);\n", ind, fn, n, args);
}

/* How a kernel runs its part function fn over n pieces (elements or rows,
** from base, or 0 when base is NULL; work elements in all; the arguments
** after the range: args): on the calling thread when the team is one
** thread (no OpenMP call at all), else shares for a team sized by
** KN_GRAIN (kn_team), eight a thread (kn_parts, kn_share in the prelude)
** that the threads take as they finish the one before (a thread on a
** slower core takes fewer instead of the team waiting for its equal
** share), in a region of all the threads set, the surplus ones idle: a
** smaller region makes libgomp end threads of its pool and the next larger
** one create them again (ops/threads.h, kn__par_threads). Without OpenMP,
** one call. Shares of elements start on multiples of 64 (from base), so no
** two threads write one cache line. */
static void run_parts(const kctx *k, kn__sb *sb, const char *fn, const char *base, const char *n,
                      const char *work, const char *grain, int align, const char *args) {
  const char *b = base ? base : "", *plus = base ? " + " : "";
  if (!k->t->openmp || small_space(k)) {
    whole_call(sb, "  ", fn, base, n, args);
    return;
  }
  kn__sb_printf(sb, "  const int nt = kn_team(%s, %s, %s);\n  if (nt < 2) {\n", work, n, grain);
  whole_call(sb, "    ", fn, base, n, args);
  kn__sb_printf(sb, "    return;\n  }\n"
                    "  const int np = kn_parts(nt, %s, %s, %s);\n"
                    "  kn_join j = {0, 0, 0};\n"
                    "  #pragma omp parallel num_threads(omp_get_max_threads())\n"
                    "  {\n"
                    "    kn_join_enter(&j);\n"
                    "    #pragma omp for schedule(dynamic, 1) nowait\n"
                    "    for (int t = 0; t < np; t++)\n"
                    "      %s(%s%skn_share(%s, t, np, %d), %s%skn_share(%s, t + 1, np, %d)%s);\n"
                    "    kn_join_close(&j);\n"
                    "  }\n",
                work, n, grain, fn, b, plus, n, align, b, plus, n, align, args);
}

/* The comment of a pointwise kernel named after its last root. */
static void kernel_comment(const kctx *k, kn__sb *ker, const char *kind) {
  const kn__gnode *last = k->roots[k->nroots - 1];
  kn__sb_printf(ker, "/* kernel %d: ", last->index);
  for (int o = 0; o < k->nroots; o++) {
    if (o) kn__sb_putc(ker, ' ');
    kn__cg_put_safe(ker, k->roots[o]->name);
  }
  kn__sb_printf(ker, " (%s%s, %d inputs) */\n", kind, k->nroots > 1 ? ", horizontal" : "",
                k->nleaves);
}

/* A pointwise kernel's pointer parameters (after s), or with names only
** the arguments passing them on. */
static void kernel_params(const kctx *k, kn__sb *ker, bool names) {
  for (int o = 0; o < k->nroots; o++) {
    if (!names) kn__sb_printf(ker, ", %s *restrict ", kn__ind_ctype(k->roots[o]->meta[0].dtype));
    else kn__sb_puts(ker, ", ");
    out_ptr(k, ker, o);
  }
  for (int i = 0; i < k->nleaves; i++)
    if (k->alias[i] >= 0) continue;
    else if (names) kn__sb_printf(ker, ", in%d", i);
    else kn__sb_printf(ker, ", const %s *restrict in%d", kn__ind_ctype(k->leaves[i].m->dtype), i);
}

/* The signature and first statements of kernelN (part: kn_partN, the
** loop over pieces [lo, hi), which gcc keeps out of line: the kernel calls
** it from two places). */
static void kernel_open(const kctx *k, kn__sb *ker, bool part) {
  int id = k->roots[k->nroots - 1]->index;
  if (part)
    kn__sb_printf(ker, "__attribute__((noinline)) static void kn_part%d(int64_t lo, int64_t hi, "
                  "const int64_t *restrict s", id);
  else kn__sb_printf(ker, "static void kernel%d(const int64_t *restrict s", id);
  kernel_params(k, ker, false);
  kn__sb_puts(ker, ") {\n  (void)s;\n");
  for (int i = 0; i < k->nused; i++)
    if (k->used[i]) kn__sb_printf(ker, "  const int64_t S%d = s[%d];\n", i, i);
}

/* An epilogue kernel's comment, before its part function. */
static void epilogue_comment(const kctx *k, kn__sb *ker, const char *kind) {
  const kn__kir_item *it = k->it;
  kn__sb_printf(ker, "/* kernel %d: ", it->id);
  for (int o = 0; o < k->nroots; o++) {
    kn__cg_put_safe(ker, k->roots[o]->name);
    kn__sb_putc(ker, ' ');
  }
  kn__sb_puts(ker, "(epilogue of ");
  kn__cg_put_safe(ker, kn__graph_node(k->p->g, it->id)->name);
  kn__sb_printf(ker, ", %s%s, %d inputs) */\n", kind, k->nroots > 1 ? ", horizontal" : "",
                k->nleaves);
}

/* An epilogue kernel's entry kernel<id>(a, g, r0, r1) (kn__ind_epi_fn):
** its outputs a[1 + w] and leaves a[1 + nwrites + l], the extern's output
** g (written over by the output that takes it); runs the part function
** over rows [r0, r1) of the extern's output (their elements in a flat
** loop) as run_parts shares them. */
static void epilogue_entry(kctx *k, kn__sb *ker, bool computes) {
  const kn__kir_item *it = k->it;
  kn__sb range; /* first: the length's text marks the symbols it reads as used */
  kn__sb_init(&range);
  kn__sb_puts(&range, "  const int64_t len = ");
  kn__cg_sym_text(k, &range, k->shape->sizes[k->shape->ndim - 1]);
  kn__sb_puts(&range, k->flat ? ";\n  const int64_t b0 = r0 * len, n = (r1 - r0) * len;\n"
                              : ";\n  const int64_t b0 = r0, n = r1 - r0;\n");
  kn__sb_printf(ker, "static void kernel%d(void *const *a, void *g, int64_t r0, int64_t r1) {\n"
                     "  const int64_t *s = a[0];\n  (void)s;\n  (void)g;\n", it->id);
  for (int o = 0; o < k->nroots; o++) {
    const kn__kir_write *w = &it->writes[o];
    kn__sb_printf(ker, "  %s *restrict ", kn__ind_ctype(k->roots[o]->meta[0].dtype));
    out_ptr(k, ker, o);
    if (w->inplace && w->from == it->gemm) kn__sb_puts(ker, " = g;\n");
    else kn__sb_printf(ker, " = a[%d];\n", 1 + o);
  }
  for (int i = 0; i < k->nleaves; i++) {
    if (k->alias[i] >= 0) continue;
    kn__sb_printf(ker, "  const %s *restrict in%d = ", kn__ind_ctype(k->leaves[i].m->dtype), i);
    if (k->leaves[i].slot == it->gemm) kn__sb_puts(ker, "g;\n");
    else kn__sb_printf(ker, "a[%d];\n", 1 + it->nwrites + i);
  }
  for (int i = 0; i < k->nused; i++)
    if (k->used[i]) kn__sb_printf(ker, "  const int64_t S%d = s[%d];\n", i, i);
  kn__sb_puts(ker, kn__sb_cstr(&range));
  kn__sb fn, args;
  kn__sb_init(&fn);
  kn__sb_init(&args);
  kn__sb_printf(&fn, "kn_part%d", k->roots[k->nroots - 1]->index);
  kn__sb_puts(&args, ", s");
  kernel_params(k, &args, true);
  run_parts(k, ker, kn__sb_cstr(&fn), "b0", "n", k->flat ? "n" : "n * len",
            computes ? "KN_GRAIN" : "KN_GRAIN_MEM", k->flat ? 64 : 1, kn__sb_cstr(&args));
  kn__sb_puts(ker, "}\n\n");
  if (kn__sb_failed(&range) || kn__sb_failed(&fn) || kn__sb_failed(&args)) k->failed = true;
  kn__sb_fini(&range);
  kn__sb_fini(&fn);
  kn__sb_fini(&args);
}

/* kernelN: its elements n (and rows of a row loop) and run_parts (computes:
** the loop calls vector math). The sizes' text comes first: it may read
** symbols kernel_open declares. */
static void kernel_entry(kctx *k, kn__sb *ker, bool computes) {
  kn__sb n, fn, args;
  kn__sb_init(&n);
  kn__sb_init(&fn);
  kn__sb_init(&args);
  kn__sb_puts(&n, "  const int64_t n = ");
  kn__cg_numel_text(k, &n, k->shape->ndim);
  kn__sb_puts(&n, ";\n");
  if (!k->flat) {
    kn__sb_puts(&n, "  const int64_t rows = ");
    kn__cg_numel_text(k, &n, k->shape->ndim - 1);
    kn__sb_puts(&n, ";\n");
  }
  kn__sb_printf(&fn, "kn_part%d", k->roots[k->nroots - 1]->index);
  kn__sb_puts(&args, ", s");
  kernel_params(k, &args, true);
  kernel_open(k, ker, false);
  kn__sb_puts(ker, kn__sb_cstr(&n));
  run_parts(k, ker, kn__sb_cstr(&fn), NULL, k->flat ? "n" : "rows", "n",
            computes ? "KN_GRAIN" : "KN_GRAIN_MEM", k->flat ? 64 : 1, kn__sb_cstr(&args));
  kn__sb_puts(ker, "}\n\n");
  if (kn__sb_failed(&n) || kn__sb_failed(&fn) || kn__sb_failed(&args)) k->failed = true;
  kn__sb_fini(&n);
  kn__sb_fini(&fn);
  kn__sb_fini(&args);
}

/* A kernel context of plan p whose flag arrays are [nnodes + 1] times
** nflags, with room for every slot and nouts outputs as leaves (each slot
** is one leaf at most); NULL on OOM. Freed by kctx_free. */
kctx *kn__cg_kctx_new(kn__ind_plan *p, int nflags, int nouts) {
  kctx *k = calloc(1, sizeof *k);
  size_t cap = (size_t)p->nslots + (size_t)nouts + 1;
  if (!k) return NULL;
  k->p = p;
  k->done = calloc((size_t)p->nnodes + 1, (size_t)nflags);
  k->leaves = malloc(cap * sizeof *k->leaves);
  k->alias = malloc(cap * sizeof *k->alias);
  k->outs = malloc(((size_t)nouts + 1) * sizeof *k->outs);
  k->outm = malloc(((size_t)nouts + 1) * sizeof *k->outm);
  if (k->done && k->leaves && k->alias && k->outs && k->outm) return k;
  kn__cg_kctx_free(k);
  return NULL;
}

void kn__cg_kctx_free(kctx *k) {
  if (!k) return;
  free(k->done);
  free(k->leaves);
  free(k->alias);
  free(k->outs);
  free(k->outm);
  free(k->used);
  free(k->stash);
  free(k);
}

/* The kernel's leaves: the IR item's reads, in order. */
void kn__cg_item_leaves(kctx *k) {
  for (int r = 0; r < k->it->nreads; r++) {
    k->alias[k->nleaves] = -1;
    k->leaves[k->nleaves++] = (leaf){k->it->reads[r].slot, k->it->reads[r].m};
  }
}

/* The output a read is written in place over (the memory plan's), or -1. */
int kn__cg_inplace_output(const kn__kir_item *it, int slot) {
  for (int w = 0; w < it->nwrites; w++)
    if (it->writes[w].inplace && it->writes[w].from == slot) return w;
  return -1;
}

kn_status kn__cg_kernel_status(kctx *k, bool sb_failed) {
  if (k->unplanned)
    return kn__error(KN_EINTERNAL, "inductor: kernel %d reads a buffer its kernel IR item does "
                     "not list", k->it->id);
  return k->failed || sb_failed ? kn__oom() : KN_OK;
}

/* One kernel function computing the item's roots in one loop (several: a
** horizontal set, launched where its last root is), into ker. */
static kn_status kernel(kn__ind_plan *p, const kn__ind_target *t, const kn__kir_item *it,
                        kn__sb *ker) {
  kctx *k = kn__cg_kctx_new(p, 3, 0);
  if (!k) return kn__oom();
  k->t = t;
  k->it = it;
  k->shape = it->space;
  k->epi = it->kind == KN__KIR_EPILOGUE;
  k->blk = k->done + (size_t)p->nnodes + 1;
  k->nroots = it->nroots;
  for (int o = 0; o < it->nroots; o++) k->roots[o] = kn__graph_node(p->g, it->roots[o]);
  kn__cg_item_leaves(k);
  for (int li = 0; li < k->nleaves; li++) k->alias[li] = kn__cg_inplace_output(it, k->leaves[li].slot);
  k->flat = true;
  for (int i = 0; i < k->nleaves; i++)
    k->flat &= kn__cg_leaf_same(k, k->leaves[i].m) || kn__cg_leaf_scalar(k->leaves[i].m);
  if (k->shape->ndim == 0) k->flat = true;
  kn__sb body, loop;
  kn__sb_init(&body);
  kn__sb_init(&loop);
  for (int o = 0; k->shape->ndim > 0 && o < k->nroots; o++) hoist_scalars(k, &loop, k->roots[o]);
  const char *kind = k->flat ? "flat loop" : "row loop";
  bool staged = kn__cg_vm_blocks(k, &loop);
  if (!staged) {
    for (int o = 0; o < k->nroots; o++) kn__cg_stmts(k, &body, k->roots[o]);
    (k->flat ? flat_loop : row_loop)(k, &loop, kn__sb_cstr(&body));
  }
  (k->epi ? epilogue_comment : kernel_comment)(k, ker, kind);
  kernel_open(k, ker, true);
  kn__sb_puts(ker, kn__sb_cstr(&loop));
  kn__sb_puts(ker, "}\n");
  (k->epi ? epilogue_entry : kernel_entry)(k, ker, staged || strstr(kn__sb_cstr(&body), "kn_vm_"));
  kn_status st = kn__cg_kernel_status(k, kn__sb_failed(&body) || kn__sb_failed(&loop));
  kn__sb_fini(&body);
  kn__sb_fini(&loop);
  kn__cg_kctx_free(k);
  return st;
}

/* ---- reduction groups ------------------------------------------------------------ */
/* One kernel per group: a loop over rows (the kept dims); in each row, the
** members in graph order: a reduction is a pass over the reduced dims
** (nested loops, innermost last) computing the per-element members it
** needs (a sum's pass: its vector-math members for a block of the row at
** once, block_vm) and accumulating in a double, in order (reproducible); a per-row
** member is one statement; a last pass writes the per-element members read
** outside the group. */
bool kn__cg_member(const kctx *k, const kn__gnode *m) { return k->p->nodes[m->index].group == k->gi; }

static int nops(const kctx *k, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  int q = in->kind == KN__IND_RED ? 1 : in->f.nopnds;
  return q < n->nargs ? q : n->nargs;
}

/* Per-element outputs become leaves too (contiguous over the space), after
** the inputs: out leaf indices are >= the first output's. */
void kn__cg_group_outputs(kctx *k) {
  for (int w = 0; w < k->it->nwrites; w++) {
    int m = k->it->writes[w].node;
    k->outs[k->nouts++] = m;
    if (k->p->nodes[m].row) continue;
    int o = k->nouts - 1;
    kn__vmeta *om = &k->outm[o];
    *om = *k->g->space;
    kn_sym st = kn__sym_const(1);
    for (int d = om->ndim - 1; d >= 0; d--) {
      om->strides[d] = st;
      st = kn__sym_mul(st, om->sizes[d]);
    }
    k->alias[k->nleaves] = -1;
    k->leaves[k->nleaves++] = (leaf){-1 - o, om};
  }
}

int kn__cg_out_leaf(const kctx *k, int o) {
  for (int li = 0; li < k->nleaves; li++)
    if (k->leaves[li].slot == -1 - o) return li;
  return 0;
}

void kn__cg_size_product(kctx *k, kn__sb *sb, bool reduced) {
  kn__sb_puts(sb, "INT64_C(1)");
  for (int d = 0; d < k->shape->ndim; d++)
    if ((((k->g->mask >> d) & 1) != 0) == reduced) {
      kn__sb_puts(sb, " * ");
      kn__cg_sym_text(k, sb, k->shape->sizes[d]);
    }
}

/* Row offsets oL of every leaf for row o (kept dims, last varies fastest). */
static void group_row_offsets(kctx *k, kn__sb *sb) {
  kn__cg_offsets_begin(k, sb, "o");
  for (int d = k->shape->ndim - 1; d >= 0; d--)
    if (!((k->g->mask >> d) & 1)) kn__cg_offsets_dim(k, sb, d);
  kn__sb_puts(sb, "    (void)t;\n");
}

/* The reduced dims, ascending, into dims; returns their number. */
int kn__cg_red_dims(const kctx *k, int *dims) {
  int n = 0;
  for (int d = 0; d < k->shape->ndim; d++)
    if ((k->g->mask >> d) & 1) dims[n++] = d;
  return n;
}

/* pL_t: leaf L's offset at loop level t (loop variable jt over dim d). */
static void level_offsets(kctx *k, kn__sb *sb, int t, int d) {
  for (int li = 0; li < k->nleaves; li++) {
    if (t == 0) kn__sb_printf(sb, "      const int64_t p%d_0 = o%d + j0 * (", li, li);
    else kn__sb_printf(sb, "      const int64_t p%d_%d = p%d_%d + j%d * (", li, t, li, t - 1, t);
    kn__cg_leaf_stride(k, sb, &k->leaves[li], d);
    kn__sb_puts(sb, ");\n");
  }
}

void kn__cg_level_offsets(kctx *k, kn__sb *sb, int t, int d) { level_offsets(k, sb, t, d); }

/* Open the loops of levels [0, upto) over the reduced dims. */
static int open_loops(kctx *k, kn__sb *sb, int upto) {
  int dims[KN_MAX_DIMS];
  kn__cg_red_dims(k, dims);
  for (int t = 0; t < upto; t++) {
    kn__sb_printf(sb, "    for (int64_t j%d = 0; j%d < ", t, t);
    kn__cg_sym_text(k, sb, k->shape->sizes[dims[t]]);
    kn__sb_printf(sb, "; j%d++) {\n", t);
    level_offsets(k, sb, t, dims[t]);
  }
  return upto;
}

static void close_loops(kn__sb *sb, int n) {
  for (int i = 0; i < n; i++) kn__sb_puts(sb, "    }\n");
}

int kn__cg_out_index(const kctx *k, int node) {
  for (int o = 0; o < k->nouts; o++)
    if (k->outs[o] == node) return o;
  return -1;
}


/* Statements of the per-element members among n's operands. */
static void operand_stmts(kctx *k, kn__sb *sb, const kn__gnode *n) {
  for (int q = 0; q < nops(k, n); q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind == KN__GA_TENSOR && a->u.t.node && kn__cg_member(k, a->u.t.node) &&
        !k->p->nodes[a->u.t.node->index].row)
      kn__cg_gstmts(k, sb, a->u.t.node);
  }
}

/* Statements of per-element member n and the per-element members it reads
** (once per pass). A member kept in an output buffer by an earlier pass is
** read back from it. */
void kn__cg_gstmts(kctx *k, kn__sb *sb, const kn__gnode *n) {
  if (k->done[n->index]) return;
  k->done[n->index] = 1;
  kn_dtype dt = n->meta[0].dtype;
  const char *ot = kn__ind_vtype(dt);
  int so = k->stash[n->index];
  if (so >= 0 && k->stash_ready[n->index]) {
    kn__sb_printf(sb, "      const %s v%d = %s(out%d[p%d_%d]);  /* kept by an earlier pass */\n",
                  ot, n->index, kn__cg_ld_fn(dt), so, kn__cg_out_leaf(k, so), k->depth - 1);
    return;
  }
  if (k->blk[n->index] == 2) { /* the table wrote the block into its output */
    kn__sb_printf(sb, "      const %s v%d = %s(out%d[p%d_%d]);  /* ", ot, n->index, kn__cg_ld_fn(dt), so,
                  kn__cg_out_leaf(k, so), k->depth - 1);
  } else if (k->blk[n->index]) {
    kn__cg_value_open(sb, "      ", n);
    kn__sb_printf(sb, "vmo%d[l]));  /* ", n->index);
  } else {
    operand_stmts(k, sb, n);
    kn__cg_hoist_loads(k, sb, n);
    kn__cg_value_open(sb, "      ", n);
    kn__cg_expand(k, sb, n);
    k->hoisted = NULL;
    kn__sb_puts(sb, "));  /* ");
  }
  kn__cg_node_comment(sb, n);
  if (so >= 0 && k->blk[n->index] != 2)
    kn__sb_printf(sb, "      out%d[p%d_%d] = %s(v%d);  /* kept for a later pass */\n", so,
                  kn__cg_out_leaf(k, so), k->depth - 1, kn__cg_st_fn(dt), n->index);
}

/* Does per-element member n read m (through per-element members)? */
static bool reads(const kctx *k, const kn__gnode *n, const kn__gnode *m, int budget) {
  if (n == m) return true;
  if (budget == 0 || !kn__cg_member(k, n) || k->p->nodes[n->index].row) return false;
  for (int q = 0; q < nops(k, n); q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind == KN__GA_TENSOR && a->u.t.node && reads(k, a->u.t.node, m, budget - 1))
      return true;
  }
  return false;
}

/* Does per-element member n compute vector math (through per-element members)? */
static bool computes_vm(const kctx *k, const kn__gnode *n, int budget) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  if (budget == 0 || !kn__cg_member(k, n) || in->row) return false;
  if (in->kind == KN__IND_PW && in->f.vm >= 0) return true;
  for (int q = 0; q < nops(k, n); q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind == KN__GA_TENSOR && a->u.t.node && computes_vm(k, a->u.t.node, budget - 1))
      return true;
  }
  return false;
}

/* The input m of a reduction that the last pass computes again (softmax's
** exp) is written to that pass's output buffer instead (same dtype, same
** position), and the last pass reads it back: written in place. */
static void plan_stash(kctx *k, const kn__gnode *m) {
  if (!kn__cg_member(k, m) || k->p->nodes[m->index].row || k->stash[m->index] >= 0) return;
  for (int o = 0; o < k->nouts; o++) {
    const kn__gnode *on = kn__graph_node(k->p->g, k->outs[o]);
    bool used = false;
    for (int j = 0; j < m->index; j++) used |= k->stash[j] == o;
    if (k->p->nodes[on->index].row || used || on->meta[0].dtype != m->meta[0].dtype ||
        !reads(k, on, m, 32))
      continue;
    k->stash[m->index] = o;
    return;
  }
}

/* When the reduction's input is a vector-math member that no output reads
** (log_softmax's exp: the output is (x - max) - log(sum)), its operand may
** be one the output reads: kept in the output instead, the last pass reads
** it back from L1 and writes the output over it in place, and the first
** write of each output line happens in the pass computing the exps, whose
** math hides the line's fetch, instead of in a pass of stores alone. */
static void plan_stash_operand(kctx *k, const kn__gnode *src) {
  const kn__ind_node *sn = &k->p->nodes[src->index];
  if (!kn__cg_member(k, src) || sn->kind != KN__IND_PW || sn->f.vm < 0 || sn->row ||
      k->stash[src->index] >= 0 || nops(k, src) != 1)
    return;
  const kn__garg *a = &src->args[0];
  if (a->kind == KN__GA_TENSOR && a->u.t.node) plan_stash(k, a->u.t.node);
}

/* The innermost loop of a reduction pass with row r's lanes
** (reduce_lower.c): element j accumulates into lane j % 16 (an accumulator
** of the input's type: blocks of 16, which gcc vectorises when the block
** loop is not unrolled first; double: blocks of up to 256 computed into
** tmp[], then combined into the double lanes), the remainder (< 16) into
** lane 0. xv: the element as the pass combines it (x, or its deviation,
** kept in double in tmp[]); code: the block's statements (per element,
** before the block, for the remainder) and the address of a block read in
** place (row_direct; empty if none); with k->expsum, the block's statements
** are one fused call that adds the block to the lanes itself;
** idx: the element's index in the row (index-carrying rows). */
static void red_inner(kctx *k, kn__sb *sb, const kn__gnode *n, const char *const code[5],
                      int dim, const kn__red_row *r, const char *xv, const char *idx) {
  const char *body = code[0], *pre = code[1], *rest = code[2], *tail = code[4];
  kn_dtype xdt = n->args[0].u.t.node->meta[n->args[0].u.t.idx].dtype;
  const char *ct = strcmp(xv, "x") ? "double" : kn__ind_ctype(xdt);
  int t = k->depth - 1;
  kn__sb len;
  kn__sb_init(&len);
  kn__cg_sym_text(k, &len, k->shape->sizes[dim]);
  const char *L = kn__sb_cstr(&len);
  if (r->acc == KN__RACC_INPUT && code[3][0] && !strcmp(xv, "x") && kn__cg_rowmax_row(k, r, xdt)) {
    kn__cg_rowmax_call(sb, r, n->index, code[3], L); /* the row in place: one table call */
  } else if (r->acc == KN__RACC_INPUT) { /* lanes of the compute type, updated in the block loop */
    kn__sb_printf(sb, "    {\n      int64_t jb = 0;\n      for (; jb + 16 <= %s; jb += 16) {\n",
                  L);
    if (k->t->vector_abi) kn__sb_puts(sb, "      #pragma GCC unroll 1\n");
    kn__sb_printf(sb, "      for (int l = 0; l < 16; l++) {\n      const int64_t j%d = jb + l;\n", t);
    kn__sb_puts(sb, body);
    kn__sb_puts(sb, "      ");
    kn__ind_red_update(sb, r, n->index, xdt, "l", xv, idx);
    kn__sb_puts(sb, "      }\n      }\n");
  } else if (k->expsum) { /* one call computes and sums the block (codegen_expsum.c) */
    kn__sb_printf(sb, "    {\n      int64_t jb = 0;\n      while (%s - jb >= 16) {\n"
                  "      const int64_t bn = %s - jb >= 256 ? 256 : (%s - jb) & ~(int64_t)15;\n%s",
                  L, L, L, pre);
  } else if (code[3][0] && !strcmp(xv, "x")) { /* the block in place (row_direct) */
    kn__sb_printf(sb, "    {\n      int64_t jb = 0;\n      while (%s - jb >= 16) {\n"
                  "      const int64_t bn = %s - jb >= 256 ? 256 : (%s - jb) & ~(int64_t)15;\n"
                  "%s      const %s *tmp = %s;\n      for (int64_t b = 0; b < bn; b += 16)\n"
                  "        for (int l = 0; l < 16; l++) ", L, L, L, pre, ct, code[3]);
  } else { /* blocks of up to 256 into tmp[] (converting to the double lanes in
           ** the same loop stops gcc vectorising it), then lane l takes tmp[b + l] */
    kn__sb_printf(sb, "    {\n      int64_t jb = 0;\n      while (%s - jb >= 16) {\n"
                  "      const int64_t bn = %s - jb >= 256 ? 256 : (%s - jb) & ~(int64_t)15;\n"
                  "      %s tmp[256];\n%s      for (int64_t l = 0; l < bn; l++) {\n"
                  "      const int64_t j%d = jb + l;\n", L, L, L, ct, pre, t);
    kn__sb_puts(sb, body);
    kn__sb_printf(sb, "      tmp[l] = %s;\n      }\n      for (int64_t b = 0; b < bn; b += 16)\n"
                  "        for (int l = 0; l < 16; l++) ", xv);
  }
  if (r->acc != KN__RACC_INPUT) {
    if (!k->expsum) kn__ind_red_update(sb, r, n->index, xdt, "l", "tmp[b + l]", idx);
    kn__cg_pipe_block(k, sb, n);
    kn__cg_block_prefetch(k, sb);
    kn__sb_puts(sb, "      jb += bn;\n      }\n");
  }
  if (k->expsum && tail[0]) { /* the rest in one vector (codegen_expsum.c) */
    kn__sb_printf(sb, "      if (jb < %s) {\n        const int64_t nt_ = %s - jb, at_ = %s >= 16 ? "
                  "16 - nt_ : 0;\n%s        for (int64_t q_ = 0; q_ < nt_; q_++) {\n        ", L, L, L, tail);
    kn__ind_red_update(sb, r, n->index, xdt, "0", "t_[at_ + q_]", idx);
    kn__sb_printf(sb, "        }\n        jb = %s;\n      }\n", L);
  }
  kn__sb_printf(sb, "      for (; jb < %s; jb++) {\n      const int64_t j%d = jb;\n", L, t);
  kn__sb_puts(sb, rest);
  kn__sb_puts(sb, "      ");
  kn__ind_red_update(sb, r, n->index, xdt, "0", xv, idx);
  kn__sb_puts(sb, "      }\n    }\n");
  if (kn__sb_failed(&len)) k->failed = true;
  kn__sb_fini(&len);
}

/* The output that keeps v for a later pass (same dtype), when its block is
** contiguous there (the innermost reduced dim is the last: outputs are
** contiguous over the space): the table writes it in place; else -1. */
static int direct_out(const kctx *k, const kn__gnode *v, int nd, const int *dims) {
  int so = k->stash[v->index];
  if (so < 0 || dims[nd - 1] != k->shape->ndim - 1) return -1;
  return k->p->nodes[v->index].f.ct == v->meta[0].dtype ? so : -1;
}

/* The offset of leaf li's element at the start of the block (jb) of the
** innermost of nd reduced dims: the outer level's offset, or the row's. */
static void block_at(kn__sb *sb, int li, int nd) {
  if (nd > 1) kn__sb_printf(sb, "p%d_%d + jb", li, nd - 2);
  else kn__sb_printf(sb, "o%d + jb", li);
}

void kn__cg_block_at(kn__sb *sb, int li, int nd) { block_at(sb, li, nd); }

/* Whether leaf li is a buffer of type dt with stride 1 along the innermost
** reduced dim; if so its block's address into sb. */
static bool row_leaf(kctx *k, int li, kn_dtype dt, int nd, const int *dims, kn__sb *sb) {
  const kn__vmeta *lm = k->leaves[li].m;
  int ld = dims[nd - 1] - (k->shape->ndim - lm->ndim);
  if (lm->dtype != dt || ld < 0 || sym_is(lm->sizes[ld], 1) || !sym_is(lm->strides[ld], 1))
    return false;
  kn__sb_printf(sb, "in%d + ", li);
  block_at(sb, li, nd);
  return true;
}

bool kn__cg_row_leaf(kctx *k, int li, kn_dtype dt, int nd, const int *dims, kn__sb *sb) {
  return row_leaf(k, li, dt, nd, dims, sb);
}

/* Operand q of table node v read in place (its address into src, true): a
** buffer of v's compute type read with stride 1 along the innermost reduced
** dim, so the block's operands lie in a row from its first element's. */
static bool direct_in(kctx *k, const kn__gnode *v, int q, int nd, const int *dims, kn__sb *src) {
  const kn__garg *a = &v->args[q];
  if (a->kind != KN__GA_TENSOR) return false;
  const kn__gnode *m = a->u.t.node;
  kn_dtype ct = k->p->nodes[v->index].f.ct;
  if (k->p->nodes[m->index].expr || is_var(k, m) || m->meta[a->u.t.idx].dtype != ct) return false;
  return row_leaf(k, kn__cg_leaf_index(k, kn__ind_value_slot(k->p, a->u.t), &m->meta[a->u.t.idx]),
                  ct, nd, dims, src);
}

/* The address of the block read by reduction n's pass (into ptr; nothing if
** none) when its element x is a float buffer's with stride 1 along the
** innermost reduced dim: an input's, or a member's whose block the table
** computed (log_softmax's exp, vmoN[]; not one a later pass reads, which
** the element loop stores) or wrote into the output keeping it (softmax's
** exp over the last dim). The lanes then read the block there instead of
** from a copy in tmp[]. */
static void row_direct(kctx *k, const kn__gnode *n, int nd, const int *dims, kn__sb *ptr) {
  const kn__gnode *src = n->args[0].u.t.node;
  const kn__vmeta *sm = &src->meta[n->args[0].u.t.idx];
  if (sm->dtype != KN_FLOAT32 && sm->dtype != KN_FLOAT64) return;
  if (kn__cg_member(k, src)) {
    if (k->blk[src->index] == 1 && k->stash[src->index] < 0) { /* else the copy loop keeps it */
      kn__sb_printf(ptr, "vmo%d", src->index);
    } else if (k->blk[src->index] == 2) {
      int so = k->stash[src->index];
      kn__sb_printf(ptr, "out%d + ", so);
      block_at(ptr, kn__cg_out_leaf(k, so), nd);
    }
  } else if (!k->p->nodes[src->index].expr && !is_var(k, src)) {
    int li = kn__cg_leaf_index(k, kn__ind_value_slot(k->p, n->args[0].u.t), sm);
    (void)row_leaf(k, li, sm->dtype, nd, dims, ptr);
  }
}

/* Operand q of table node v kept in an output by this pass (log_softmax's
** x - max: the loop filling the block's operands writes it there, element
** j at the output's j, contiguous when the innermost reduced dim is the
** last): its block's address into src, true; the call reads it there. */
static bool kept_in(kctx *k, const kn__gnode *v, int q, int nd, const int *dims, kn__sb *src) {
  const kn__garg *a = &v->args[q];
  if (a->kind != KN__GA_TENSOR || !kn__cg_member(k, a->u.t.node)) return false;
  const kn__gnode *m = a->u.t.node;
  int so = k->stash[m->index];
  if (so < 0 || k->stash_ready[m->index] || k->p->nodes[m->index].row ||
      dims[nd - 1] != k->shape->ndim - 1 || m->meta[0].dtype != k->p->nodes[v->index].f.ct)
    return false;
  kn__sb_printf(src, "out%d + ", so);
  block_at(src, kn__cg_out_leaf(k, so), nd);
  return true;
}

/* Vector-math member v of a sum's block: a loop filling vmiV_q[] with the
** operands it cannot read in place (direct_in, kept_in: the loop then only
** computes and keeps them), then one call of the table's array function on
** the block (vmoV[], bit-identical to eager: the same function on the same
** values). */
static void block_vm(kctx *k, kn__sb *pre, const kn__gnode *v, int nd, const int *dims) {
  const kn__ind_formula *f = &k->p->nodes[v->index].f;
  const char *ct = kn__ind_ctype(f->ct), *tab = f->ct == KN_FLOAT64 ? "f64" : "f32";
  int q, no = nops(k, v), nloop = 0;
  kn__sb src[2];
  bool in_place[2];
  for (q = 0; q < no; q++) {
    kn__sb_init(&src[q]);
    bool kept = kept_in(k, v, q, nd, dims, &src[q]);
    in_place[q] = kept || direct_in(k, v, q, nd, dims, &src[q]);
    if (!in_place[q]) kn__sb_printf(&src[q], "vmi%d_%d", v->index, q);
    if (!in_place[q]) kn__sb_printf(pre, "      %s vmi%d_%d[256];\n", ct, v->index, q);
    nloop += !in_place[q] || kept;
  }
  int so = direct_out(k, v, nd, dims);
  if (so < 0) kn__sb_printf(pre, "      %s vmo%d[256];\n", ct, v->index);
  if (nloop) {
    kn__sb_printf(pre, "      for (int64_t l = 0; l < bn; l++) {\n      const int64_t j%d = jb + l;\n",
                  k->depth - 1);
    level_offsets(k, pre, nd - 1, dims[nd - 1]);
    memset(k->done, 0, (size_t)k->p->nnodes);
    operand_stmts(k, pre, v);
    for (q = 0; q < no; q++) {
      if (in_place[q]) continue;
      kn__sb_printf(pre, "      vmi%d_%d[l] = ", v->index, q);
      operand(k, pre, v, q);
      kn__sb_puts(pre, ";\n");
    }
    kn__sb_puts(pre, "      }\n");
  }
  kn__sb_printf(pre, "      KN_VMT()->%s%s[%d](", tab, no == 2 ? "b" : "", f->vm);
  if (so >= 0) { /* out + the block's first element's offset */
    kn__sb_printf(pre, "out%d + ", so);
    block_at(pre, kn__cg_out_leaf(k, so), nd);
  } else {
    kn__sb_printf(pre, "vmo%d", v->index);
  }
  for (q = 0; q < no; q++) {
    kn__sb_printf(pre, ", %s", kn__sb_cstr(&src[q]));
    if (kn__sb_failed(&src[q])) k->failed = true;
    kn__sb_fini(&src[q]);
  }
  kn__sb_puts(pre, ", bn);\n");
  k->blk[v->index] = so >= 0 ? 2 : 1;
}

/* The vector-math members a sum over src computes per element, in graph
** order (operands first), each computed for the whole block. */
static void block_vms(kctx *k, kn__sb *pre, const kn__gnode *src, int nd, const int *dims) {
  for (int i = 0; i < k->g->nmembers; i++) {
    const kn__gnode *v = kn__graph_node(k->p->g, k->g->members[i]);
    const kn__ind_node *vn = &k->p->nodes[v->index];
    if (vn->kind == KN__IND_PW && vn->f.vm >= 0 && !vn->row && !k->stash_ready[v->index] &&
        !k->blk[v->index] && reads(k, src, v, 32))
      block_vm(k, pre, v, nd, dims);
  }
}

/* The body of a reduction pass's innermost loop, computing x. */
static void red_body(kctx *k, kn__sb *body, const kn__gnode *n, int nd, const int *dims) {
  const kn__gnode *src = n->args[0].u.t.node;
  const char *ct = kn__ind_ctype(src->meta[n->args[0].u.t.idx].dtype);
  memset(k->done, 0, (size_t)k->p->nnodes);
  level_offsets(k, body, nd - 1, dims[nd - 1]);
  if (kn__cg_member(k, src)) {
    kn__cg_gstmts(k, body, src);
    kn__sb_printf(body, "      const %s x = v%d;\n", ct, src->index);
  } else {
    kn__sb_printf(body, "      const %s x = ", ct);
    kn__cg_load(k, body, kn__cg_leaf_index(k, kn__ind_value_slot(k->p, n->args[0].u.t),
                             &src->meta[n->args[0].u.t.idx]));
    kn__sb_puts(body, ";\n");
  }
}

/* The element's flat index in the row (row-major over the reduced dims),
** for index-carrying rows; empty otherwise. */
static void row_index(kctx *k, kn__sb *sb, const kn__gnode *n, int nd, const int *dims) {
  if (k->p->nodes[n->index].red->shape != KN__RSHAPE_INDEX) return;
  kn__sb_puts(sb, "(int64_t)");
  for (int t = 0; t < nd; t++) kn__sb_putc(sb, '(');
  kn__sb_puts(sb, "j0)");
  for (int t = 1; t < nd; t++) { /* Horner: ((j0 * S1 + j1) * S2 + j2) */
    kn__sb_puts(sb, " * (");
    kn__cg_sym_text(k, sb, k->shape->sizes[dims[t]]);
    kn__sb_printf(sb, ") + j%d)", t);
  }
}

/* The loops of one pass with row r's lanes, combined into accID after. */
static void red_loops(kctx *k, kn__sb *sb, const kn__gnode *n, const char *const text[5],
                      const kn__red_row *r, const char *xv) {
  int dims[KN_MAX_DIMS], nd = kn__cg_red_dims(k, dims);
  kn_dtype xdt = n->args[0].u.t.node->meta[n->args[0].u.t.idx].dtype;
  kn__sb idx;
  kn__sb_init(&idx);
  row_index(k, &idx, n, nd, dims);
  kn__ind_red_lanes_open(sb, r, n->index, xdt);
  kn__cg_pipe_open(k, sb, n);
  int nl = open_loops(k, sb, nd - 1);
  red_inner(k, sb, n, text, dims[nd - 1], r, xv, kn__sb_cstr(&idx));
  close_loops(sb, nl);
  kn__cg_pipe_close(k, sb, n);
  kn__ind_red_lanes_close(sb, r, n->index, xdt);
  if (kn__sb_failed(&idx)) k->failed = true;
  kn__sb_fini(&idx);
}

/* A reduction member: one pass over the row (two for moments: the mean
** first, in a block of its own). */
static void red_pass(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  const kn__gnode *src = n->args[0].u.t.node;
  int dims[KN_MAX_DIMS], nd = kn__cg_red_dims(k, dims);
  kn__sb_puts(sb, "    /* ");
  kn__cg_node_comment(sb, n);
  /* Only a pass computing vector math keeps a value: one of a few compares
  ** and selects (nll's gradient, where(class == target, -g / w, 0)) costs
  ** less computed twice than stored by a pass with little else to do, the
  ** output's lines fetched there with no math to hide behind. */
  if (computes_vm(k, src, 32)) {
    plan_stash(k, src);
    plan_stash_operand(k, src);
  }
  kn__sb code[5];
  for (int c = 0; c < 5; c++) kn__sb_init(&code[c]);
  k->inner = true;
  /* blocks of vector math feed the double lanes' blocks: every pass's row WIDE */
  /* sum(exp(x - max)): one fused call per block instead, the rest one vector */
  k->expsum = kn__cg_expsum_block(k, &code[1], &code[4], n, nd, dims);
  if (!k->expsum && in->red->acc == KN__RACC_WIDE &&
      kn__ind_red_pass_row(in, 0)->acc == KN__RACC_WIDE && kn__cg_member(k, src))
    block_vms(k, &code[1], src, nd, dims);
  red_body(k, &code[0], n, nd, dims);
  if ((in->red->acc == KN__RACC_WIDE && !k->expsum) ||
      kn__cg_rowmax_row(k, kn__ind_red_pass_row(in, 0), src->meta[n->args[0].u.t.idx].dtype))
    row_direct(k, n, nd, dims, &code[3]);
  memset(k->blk, 0, (size_t)k->p->nnodes);
  red_body(k, &code[2], n, nd, dims); /* the remainder: no block */
  k->inner = false;
  const char *text[5];
  for (int c = 0; c < 5; c++) text[c] = kn__sb_cstr(&code[c]);
  kn_dtype xdt = src->meta[n->args[0].u.t.idx].dtype;
  char xv[96];
  if (in->red->shape == KN__RSHAPE_CENTERED) {
    kn__sb_printf(sb, "    double ctr%d;\n    {\n", n->index);
    kn__ind_red_xv(xv, sizeof xv, in, n->index, xdt, 0);
    red_loops(k, sb, n, text, kn__ind_red_pass_row(in, 0), xv);
    kn__ind_red_center(sb, in, n->index);
    kn__sb_puts(sb, "    }\n");
  }
  kn__ind_red_xv(xv, sizeof xv, in, n->index, xdt, 1);
  red_loops(k, sb, n, text, kn__ind_red_pass_row(in, 1), xv);
  k->expsum = false;
  for (int c = 0; c < 5; c++) {
    if (kn__sb_failed(&code[c])) k->failed = true;
    kn__sb_fini(&code[c]);
  }
  for (int i = 0; i < k->p->nnodes; i++)
    if (k->stash[i] >= 0 && k->done[i]) k->stash_ready[i] = 1;
  kn__ind_red_result(sb, in, n->index, n->meta[0].dtype);
}

static void row_member(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  if (in->kind == KN__IND_RED) {
    if (!kn__cg_pick_pass(k, sb, n)) red_pass(k, sb, n);
  } else {
    kn__cg_hoist_loads(k, sb, n);
    kn__cg_value_open(sb, "    ", n);
    kn__cg_expand(k, sb, n);
    k->hoisted = NULL;
    kn__sb_puts(sb, "));  /* ");
    kn__cg_node_comment(sb, n);
  }
  int o = kn__cg_out_index(k, n->index);
  if (o >= 0) kn__sb_printf(sb, "    out%d[o] = %s(v%d);\n", o, kn__cg_st_fn(n->meta[0].dtype), n->index);
}

/* The last pass: per-element members read outside the group (every value
** first, then the stores: a value kept in an output buffer is read before
** that buffer's element is written). */
/* The store pass over one reduced dim in blocks of up to 256: the
** vector-math members the outputs read computed for the whole block first
** (one table call each, as a sum's pass does), then the block's elements. */
static void store_blocks_open(kctx *k, kn__sb *sb) {
  int dims[KN_MAX_DIMS], nd = kn__cg_red_dims(k, dims);
  kn__sb len;
  kn__sb_init(&len);
  kn__cg_sym_text(k, &len, k->shape->sizes[dims[0]]);
  const char *L = kn__sb_cstr(&len);
  kn__sb_printf(sb, "    for (int64_t jb = 0; jb < %s; jb += 256) {\n"
                "      const int64_t bn = %s - jb >= 256 ? 256 : %s - jb;\n", L, L, L);
  for (int o = 0; o < k->nouts; o++)
    if (!k->p->nodes[k->outs[o]].row)
      block_vms(k, sb, kn__graph_node(k->p->g, k->outs[o]), nd, dims);
  kn__cg_block_prefetch(k, sb);
  kn__sb_puts(sb, "      for (int64_t l = 0; l < bn; l++) {\n      const int64_t j0 = jb + l;\n");
  level_offsets(k, sb, 0, dims[0]);
  if (kn__sb_failed(&len)) k->failed = true;
  kn__sb_fini(&len);
}

static void store_pass(kctx *k, kn__sb *sb) {
  bool any = false;
  for (int o = 0; o < k->nouts; o++) any |= !k->p->nodes[k->outs[o]].row;
  if (!any) return;
  int nl = 2;
  k->inner = true;
  if (k->depth == 1) store_blocks_open(k, sb);
  else nl = open_loops(k, sb, k->depth);
  memset(k->done, 0, (size_t)k->p->nnodes);
  for (int o = 0; o < k->nouts; o++)
    if (!k->p->nodes[k->outs[o]].row) kn__cg_gstmts(k, sb, kn__graph_node(k->p->g, k->outs[o]));
  for (int o = 0; o < k->nouts; o++)
    if (!k->p->nodes[k->outs[o]].row)
      kn__sb_printf(sb, "      out%d[p%d_%d] = %s(v%d);\n", o, kn__cg_out_leaf(k, o), k->depth - 1,
                    kn__cg_st_fn(kn__graph_node(k->p->g, k->outs[o])->meta[0].dtype), k->outs[o]);
  k->inner = false;
  memset(k->blk, 0, (size_t)k->p->nnodes);
  close_loops(sb, nl);
}

/* The group's sizes: outer (rows) and red (elements reduced per row). */
static void group_sizes(kctx *k, kn__sb *sb) {
  kn__sb_puts(sb, "  const int64_t outer = ");
  kn__cg_size_product(k, sb, false);
  kn__sb_puts(sb, ", red = ");
  kn__cg_size_product(k, sb, true);
  kn__sb_puts(sb, ";\n  (void)outer, (void)red;\n");
}

/* The statements of row o: its offsets, then the members (into row). */
static void group_row(kctx *k, kn__sb *row) {
  kn__sb rows;
  kn__sb_init(&rows);
  kn__cg_pipe_plan(k);
  for (int i = 0; i < k->g->nmembers; i++) {
    const kn__gnode *n = kn__graph_node(k->p->g, k->g->members[i]);
    if (k->p->nodes[n->index].row) row_member(k, &rows, n);
  }
  store_pass(k, &rows);
  group_row_offsets(k, row); /* after the passes: they may add leaves */
  if (k->t->vector_abi) kn__cg_group_prefetch(k, row); /* GCC builtins */
  kn__cg_pipe_row(k, row);
  kn__sb_puts(row, kn__sb_cstr(&rows));
  if (kn__sb_failed(&rows)) k->failed = true;
  kn__sb_fini(&rows);
}

/* The parameters of a group's kernel (after s), or with names only the
** arguments passing them on. */
static void group_params(kctx *k, kn__sb *sb, bool names) {
  for (int o = 0; o < k->nouts; o++)
    if (names) kn__sb_printf(sb, ", out%d", o);
    else kn__sb_printf(sb, ", %s *restrict out%d",
                       kn__ind_ctype(kn__graph_node(k->p->g, k->outs[o])->meta[0].dtype), o);
  for (int i = 0; i < k->nleaves; i++)
    if (k->leaves[i].slot >= 0 && names) kn__sb_printf(sb, ", in%d", i);
    else if (k->leaves[i].slot >= 0)
      kn__sb_printf(sb, ", const %s *restrict in%d", kn__ind_ctype(k->leaves[i].m->dtype), i);
}

/* A function's parameter list's end and its first statements: s's
** symbolic sizes. */
static void group_open(kctx *k, kn__sb *ker) {
  group_params(k, ker, false);
  kn__sb_puts(ker, ") {\n  (void)s;\n");
  for (int i = 0; i < k->nused; i++)
    if (k->used[i]) kn__sb_printf(ker, "  const int64_t S%d = s[%d];\n", i, i);
}

/* The kernel: the comment, then a function computing rows [lo, hi)
** (kn_rowsN), and the kernel running it (run_parts). gcc outlines the body
** of an OpenMP loop into a function that reads the kernel's pointers from a
** struct, without their restrict, and then versions every inner loop for
** aliasing: the row function keeps them restrict and compiles in a third of
** the time (docs/INDUCTOR.md, "Compile time"). */
static void group_text(kctx *k, int root, const char *row, kn__sb *ker) {
  const kn__gnode *rn = kn__graph_node(k->p->g, k->g->members[0]);
  kn__sb_printf(ker, "/* kernel %d: group of ", root);
  kn__cg_put_safe(ker, rn->name);
  kn__sb_printf(ker, " (row loop, %d nodes, %d outputs) */\n", k->g->nmembers, k->nouts);
  kn__sb_printf(ker, "__attribute__((noinline)) static void kn_rows%d(int64_t lo, int64_t hi, "
                "const int64_t *restrict s", root);
  group_open(k, ker);
  group_sizes(k, ker);
  kn__cg_pipe_decl(k, ker);
  kn__sb_puts(ker, "  for (int64_t o = lo; o < hi; o++) {\n");
  kn__sb_puts(ker, row);
  kn__sb_puts(ker, "  }\n}\n");
  kn__sb_printf(ker, "static void kernel%d(const int64_t *restrict s", root);
  group_open(k, ker);
  group_sizes(k, ker);
  kn__sb fn, args;
  kn__sb_init(&fn);
  kn__sb_init(&args);
  kn__sb_printf(&fn, "kn_rows%d", root);
  kn__sb_puts(&args, ", s");
  group_params(k, &args, true);
  run_parts(k, ker, kn__sb_cstr(&fn), NULL, "outer", "outer * red", "KN_GRAIN", 1, kn__sb_cstr(&args));
  kn__sb_puts(ker, "}\n\n");
  if (kn__sb_failed(&fn) || kn__sb_failed(&args)) k->failed = true;
  kn__sb_fini(&fn);
  kn__sb_fini(&args);
}

/* The context of reduction item it's kernel (for target t): the group, its
** space and reduced depth, no stash yet (-1: every pass recomputes), its
** leaves and stored outputs; NULL on OOM. */
kctx *kn__cg_group_kctx(kn__ind_plan *p, const kn__ind_target *t, const kn__kir_item *it) {
  const kn__ind_group *g = &p->groups[it->group];
  size_t nn = (size_t)p->nnodes + 1;
  kctx *k = kn__cg_kctx_new(p, 3, g->nmembers);
  if (k) k->stash = malloc(nn * sizeof *k->stash);
  if (!k || !k->stash) {
    kn__cg_kctx_free(k);
    return NULL;
  }
  for (size_t i = 0; i < nn; i++) k->stash[i] = -1;
  k->t = t;
  k->it = it;
  k->shape = g->space;
  k->g = g;
  k->gi = it->group;
  k->stash_ready = k->done + nn;
  k->blk = k->done + 2 * nn;
  for (int d = 0; d < g->space->ndim; d++) k->depth += (g->mask >> d) & 1;
  kn__cg_item_leaves(k);
  kn__cg_group_outputs(k);
  return k;
}

static kn_status group_kernel(kn__ind_plan *p, const kn__ind_target *t, const kn__kir_item *it,
                              kn__sb *ker) {
  kctx *k = kn__cg_group_kctx(p, t, it);
  if (!k) return kn__oom();
  const kn__ind_group *g = k->g;
  kn__sb row;
  kn__sb_init(&row);
  group_row(k, &row);
  group_text(k, g->root, kn__sb_cstr(&row), ker);
  kn_status st = kn__cg_kernel_status(k, kn__sb_failed(&row));
  kn__sb_fini(&row);
  kn__cg_kctx_free(k);
  return st;
}

kn_status kn__ind_c_emit_kernel(const kn__ind_target *t, kn__kir *ir, int j, kn__sb *sb) {
  const kn__kir_item *it = &ir->items[j];
  if (it->kind == KN__KIR_POINTWISE || it->kind == KN__KIR_EPILOGUE) return kernel(ir->p, t, it, sb);
  if (it->kind == KN__KIR_REDUCTION) return group_kernel(ir->p, t, it, sb);
  return KN_OK;
}

/* ---- walking the IR ------------------------------------------------------------------ */
static kn_status log_ir(const kn__kir *ir) {
  if (!KN_ARTIFACT_ENABLED(KN_ART_KERNEL_IR)) return KN_OK;
  kn__sb sb;
  kn__sb_init(&sb);
  kn_status st = kn__kir_print(ir, &sb);
  if (st == KN_OK) KN_LOG_ARTIFACT(KN_ART_KERNEL_IR, "%s", kn__sb_cstr(&sb));
  kn__sb_fini(&sb);
  return st;
}

static kn_status emit_items(const kn__ind_target *t, kn__kir *ir, kn__sb *ker, kn__sb *call) {
  kn_status st = t->emit_entry(t, ir, true, call);
  for (int j = 0; st == KN_OK && j < ir->nitems; j++) {
    const char *why = NULL;
    if (ir->items[j].kind != KN__KIR_EXTERN && !t->supports(t, ir, j, &why))
      return kn__error(KN_EUNSUPPORTED, "inductor: target %s cannot emit kernel %d (node %s): %s",
                       t->name, ir->items[j].id, kn__graph_node(ir->p->g, ir->items[j].id)->name,
                       why ? why : "not supported");
    if (ir->items[j].kind != KN__KIR_EXTERN) st = t->emit_kernel(t, ir, j, ker);
    if (st == KN_OK) st = t->emit_launch(t, ir, j, call);
  }
  return st == KN_OK ? t->emit_entry(t, ir, false, call) : st;
}

kn_status kn__ind_codegen_target(kn__ind_plan *p, const kn__ind_target *t, kn__sb *sb) {
  kn__kir ir;
  kn_status st = kn__kir_build(p, &ir);
  if (st != KN_OK) return st;
  st = kn__kir_plan_memory(&ir);
  if (st == KN_OK) st = kn__kir_verify(&ir);
  if (st == KN_OK) st = log_ir(&ir);
  kn__sb ker, call;
  kn__sb_init(&ker);
  kn__sb_init(&call);
  if (st == KN_OK) st = emit_items(t, &ir, &ker, &call);
  if (st == KN_OK) st = t->prelude(t, &ir, sb);
  if (st == KN_OK) {
    kn__sb_puts(sb, kn__sb_cstr(&ker));
    kn__sb_puts(sb, kn__sb_cstr(&call));
    if (kn__sb_failed(&ker) || kn__sb_failed(&call) || kn__sb_failed(sb))
      st = kn__error(KN_ENOMEM, "inductor: out of memory while generating code");
  }
  kn__sb_fini(&ker);
  kn__sb_fini(&call);
  kn__kir_free(&ir);
  return st;
}
