/*
** inductor/codegen.c: the C translation unit of a plan.
**
**   prelude    includes, the runtime table type, the formulas' vocabulary
**              (helpers and vector-math functions: kn__ind_formula_prelude)
**   kernels    one static function per kernel root: a loop over the root's
**              sizes computing the fused tree one element at a time, or for
**              a reduction a loop over outputs, each reducing its elements
**              in order with the fused prologue
**   call       the entry point: extern steps, kernel launches and early
**              frees in graph order
**
** Loops: when every input of a kernel is read contiguously with the
** kernel's own sizes (or is one broadcast element), one flat loop in blocks
** (OpenMP over blocks above KN_PAR_MIN elements, a contiguous inner loop gcc
** vectorises); otherwise rows of the last dimension, each input's row offset
** computed from its strides (broadcast dimensions have stride 0, views are
** read through their strides: no copies). Sizes and strides that are
** symbolic are read from s[]; everything else is a literal. No user string
** reaches the source unescaped: node names in comments keep [A-Za-z0-9_.].
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"

static const char prelude[] =
    "#include <stdbool.h>\n"
    "#include <stdint.h>\n"
    "#include <tgmath.h>\n\n"
    "#define KN_PAR_MIN 65536\n"
    "#define KN_BLOCK 4096\n\n"
    "typedef struct kn_rt {\n"
    "  int (*ext)(void *ctx, int step);\n"
    "  int (*alloc)(void *ctx, int slot, void **p);\n"
    "  void *(*ptr)(void *ctx, int slot);\n"
    "  void (*release)(void *ctx, int slot);\n"
    "  const void *(*vmath)(void);\n"
    "} kn_rt;\n\n"
    "int kn_ind_abi(void);\n"
    "int kn_ind_abi(void) { return 2; }\n\n";

/* A comment-safe copy of a name (graph names may come from user labels). */
static void put_safe(kn__sb *sb, const char *s) {
  for (int i = 0; s && s[i] && i < 64; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    kn__sb_putc(sb, ok ? c : '_');
  }
}

/* ---- kernel context ------------------------------------------------------------ */
typedef struct leaf { int slot; const kn__vmeta *m; } leaf;
typedef struct kctx {
  kn__ind_plan *p;
  bool per_elem;            /* reduction, general layout: inK[pK] */
  const kn__gnode *root;
  const kn__vmeta *shape;   /* the kernel's iteration sizes */
  leaf leaves[64];
  int nleaves;
  bool flat;
  bool failed;
  unsigned char used[256];  /* symbols read by this kernel */
} kctx;

static void sym_text(kctx *k, kn__sb *sb, kn_sym v) {
  if (kn__sym_is_const(v)) {
    kn__sb_printf(sb, "INT64_C(%lld)", (long long)v.c);
    return;
  }
  int i = kn__ind_symx(k->p, v);
  if (i < 0 || i >= 256) {
    k->failed = true;
    return;
  }
  k->used[i] = 1;
  kn__sb_printf(sb, "S%d", i);
}

static bool sym_is(kn_sym v, int64_t c) { return kn__sym_is_const(v) && v.c == c; }

static int leaf_index(kctx *k, int slot, const kn__vmeta *m) {
  for (int i = 0; i < k->nleaves; i++)
    if (k->leaves[i].slot == slot) return i;
  if (k->nleaves == 64) {
    k->failed = true;
    return 0;
  }
  k->leaves[k->nleaves] = (leaf){slot, m};
  return k->nleaves++;
}

/* Collect the leaves (buffers read) of the tree rooted at n. */
static void collect(kctx *k, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  for (int q = 0; q < in->f.nopnds && q < n->nargs; q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind != KN__GA_TENSOR) continue;
    const kn__gnode *m = a->u.t.node;
    if (k->p->nodes[m->index].inlined) collect(k, m);
    else leaf_index(k, kn__ind_value_slot(k->p, a->u.t), &m->meta[a->u.t.idx]);
  }
}

/* Leaf read contiguously with the kernel's sizes? One element? */
static bool leaf_same(const kctx *k, const kn__vmeta *m) {
  const kn__vmeta *s = k->shape;
  if (m->ndim != s->ndim) return false;
  kn_sym expect = kn__sym_const(1);
  for (int d = m->ndim - 1; d >= 0; d--) {
    if (m->sizes[d].c != s->sizes[d].c || m->sizes[d].e != s->sizes[d].e) return false;
    if (sym_is(m->sizes[d], 1)) continue;
    if (m->strides[d].c != expect.c || m->strides[d].e != expect.e) return false;
    expect = kn__sym_mul(expect, m->sizes[d]);
  }
  return true;
}
static bool leaf_scalar(const kn__vmeta *m) {
  for (int d = 0; d < m->ndim; d++)
    if (!sym_is(m->sizes[d], 1)) return false;
  return true;
}

/* Stride of leaf l along kernel dimension d (0 when broadcast). */
static void leaf_stride(kctx *k, kn__sb *sb, const leaf *l, int d) {
  int ld = d - (k->shape->ndim - l->m->ndim);
  if (ld < 0 || sym_is(l->m->sizes[ld], 1)) kn__sb_puts(sb, "0");
  else sym_text(k, sb, l->m->strides[ld]);
}

static void load(kctx *k, kn__sb *sb, int li) {
  const leaf *l = &k->leaves[li];
  if (leaf_scalar(l->m)) kn__sb_printf(sb, "in%d[0]", li);
  else if (k->flat) kn__sb_printf(sb, "in%d[i]", li);
  else if (k->per_elem) kn__sb_printf(sb, "in%d[p%d]", li, li);
  else {
    kn__sb_printf(sb, "in%d[o%d + j * (", li, li);
    leaf_stride(k, sb, l, k->shape->ndim - 1);
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

/* Operand q of n as a C expression of the compute type (or bool). */
static void operand(kctx *k, kn__sb *sb, const kn__gnode *n, int q) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  const char *ct = kn__ind_ctype(q == 0 && in->f.cond_first ? KN_BOOL : in->f.ct);
  const kn__garg *a = &n->args[q];
  kn__sb_printf(sb, "((%s)", ct);
  if (a->kind == KN__GA_SCALAR) put_scalar(sb, a->u.s);
  else if (k->p->nodes[a->u.t.node->index].inlined) kn__sb_printf(sb, "v%d", a->u.t.node->index);
  else {
    const kn__gnode *m = a->u.t.node;
    load(k, sb, leaf_index(k, kn__ind_value_slot(k->p, a->u.t), &m->meta[a->u.t.idx]));
  }
  kn__sb_putc(sb, ')');
}

static bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The formula's text with its vocabulary bound: operands a b c, the compute
** type T, the parameter P1 (as T) and PI (int64); other words are copied. */
static void expand(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_formula *f = &k->p->nodes[n->index].f;
  for (const char *t = f->tmpl; *t;) {
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

/* Statements computing the tree of n, producers first. */
static void stmts(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  for (int q = 0; q < in->f.nopnds && q < n->nargs; q++) {
    const kn__garg *a = &n->args[q];
    if (a->kind == KN__GA_TENSOR && k->p->nodes[a->u.t.node->index].inlined)
      stmts(k, sb, a->u.t.node);
  }
  const char *ot = kn__ind_ctype(n->meta[0].dtype);
  kn__sb_printf(sb, "      const %s v%d = (%s)(", ot, n->index, ot);
  expand(k, sb, n);
  kn__sb_puts(sb, ");  /* ");
  put_safe(sb, n->opdef->name);
  kn__sb_putc(sb, ' ');
  put_safe(sb, n->name);
  kn__sb_puts(sb, " */\n");
}

static void numel_text(kctx *k, kn__sb *sb, int ndim) {
  kn__sb_puts(sb, "INT64_C(1)");
  for (int d = 0; d < ndim; d++) {
    kn__sb_puts(sb, " * ");
    sym_text(k, sb, k->shape->sizes[d]);
  }
}

static void flat_loop(kctx *k, kn__sb *sb, const char *body, int root) {
  kn__sb_puts(sb, "  #pragma omp parallel for if (n >= KN_PAR_MIN)\n"
                  "  for (int64_t b = 0; b < n; b += KN_BLOCK) {\n"
                  "    const int64_t e = n - b < KN_BLOCK ? n : b + KN_BLOCK;\n"
                  "    for (int64_t i = b; i < e; i++) {\n");
  kn__sb_puts(sb, body);
  kn__sb_printf(sb, "      out[i] = v%d;\n    }\n  }\n", root);
  (void)k;
}

/* Row offsets of every leaf for the outer index `idx` (dims [0, nd - rk)). */
static void outer_offsets(kctx *k, kn__sb *sb, int nd, int rk, const char *idx) {
  kn__sb_printf(sb, "    int64_t t = %s;\n", idx);
  for (int li = 0; li < k->nleaves; li++) kn__sb_printf(sb, "    int64_t o%d = 0;\n", li);
  for (int d = nd - rk - 1; d >= 0; d--) {
    kn__sb_puts(sb, "    {\n      const int64_t sz = ");
    sym_text(k, sb, k->shape->sizes[d]);
    kn__sb_puts(sb, ", id = t % sz;\n      t /= sz;\n");
    for (int li = 0; li < k->nleaves; li++) {
      kn__sb_printf(sb, "      o%d += id * (", li);
      leaf_stride(k, sb, &k->leaves[li], d);
      kn__sb_puts(sb, ");\n");
    }
    kn__sb_puts(sb, "    }\n");
  }
}

static void row_loop(kctx *k, kn__sb *sb, const char *body, int root) {
  int nd = k->shape->ndim;
  kn__sb_puts(sb, "  const int64_t rows = ");
  numel_text(k, sb, nd - 1);
  kn__sb_puts(sb, ";\n  const int64_t len = ");
  sym_text(k, sb, k->shape->sizes[nd - 1]);
  kn__sb_puts(sb, ";\n  #pragma omp parallel for if (n >= KN_PAR_MIN)\n"
                  "  for (int64_t r = 0; r < rows; r++) {\n");
  outer_offsets(k, sb, nd, 1, "r");
  kn__sb_puts(sb, "    for (int64_t j = 0; j < len; j++) {\n");
  kn__sb_puts(sb, body);
  kn__sb_printf(sb, "      out[r * len + j] = v%d;\n    }\n  }\n", root);
}

/* The kernel function of root n (its loop in `loop`) and its launch. */
static void emit_kernel(kctx *k, const kn__gnode *n, kn__sb *loop, kn__sb *ker, kn__sb *call,
                        const char *kind) {
  const char *ot = kn__ind_ctype(n->meta[0].dtype);
  kn__sb_printf(ker, "/* kernel %d: ", n->index);
  put_safe(ker, n->name);
  kn__sb_printf(ker, " (%s, %d inputs) */\nstatic void kernel%d(const int64_t *restrict s, "
                "%s *restrict out", kind, k->nleaves, n->index, ot);
  for (int i = 0; i < k->nleaves; i++)
    kn__sb_printf(ker, ", const %s *restrict in%d", kn__ind_ctype(k->leaves[i].m->dtype), i);
  kn__sb_puts(ker, ") {\n  (void)s;\n");
  for (int i = 0; i < 256; i++)
    if (k->used[i]) kn__sb_printf(ker, "  const int64_t S%d = s[%d];\n", i, i);
  kn__sb_puts(ker, kn__sb_cstr(loop));
  kn__sb_puts(ker, "}\n\n");
  int slot = k->p->nodes[n->index].slot;
  kn__sb_printf(call, "  {  /* ");
  put_safe(call, n->name);
  kn__sb_printf(call, " */\n    void *o;\n    if (rt->alloc(ctx, %d, &o)) return -1;\n"
                "    kernel%d(s, (%s *)o", slot, n->index, ot);
  for (int i = 0; i < k->nleaves; i++)
    kn__sb_printf(call, ", (const %s *)rt->ptr(ctx, %d)", kn__ind_ctype(k->leaves[i].m->dtype),
                  k->leaves[i].slot);
  kn__sb_puts(call, ");\n  }\n");
  if (k->failed || kn__sb_failed(loop)) kn__sb_reserve(ker, SIZE_MAX / 2);
}

/* One kernel function for root n, into ker; its launch into call. */
static void kernel(kn__ind_plan *p, const kn__gnode *n, kn__sb *ker, kn__sb *call) {
  kctx *k = calloc(1, sizeof *k);
  if (!k) {
    kn__sb_reserve(ker, SIZE_MAX / 2); /* marks the buffer failed */
    return;
  }
  *k = (kctx){.p = p, .root = n, .shape = &n->meta[0]};
  collect(k, n);
  k->flat = true;
  for (int i = 0; i < k->nleaves; i++)
    k->flat &= leaf_same(k, k->leaves[i].m) || leaf_scalar(k->leaves[i].m);
  if (n->meta[0].ndim == 0) k->flat = true;
  kn__sb body, loop;
  kn__sb_init(&body);
  kn__sb_init(&loop);
  stmts(k, &body, n);
  kn__sb_puts(&loop, "  const int64_t n = ");
  numel_text(k, &loop, n->meta[0].ndim);
  kn__sb_puts(&loop, ";\n");
  (k->flat ? flat_loop : row_loop)(k, &loop, kn__sb_cstr(&body), n->index);
  emit_kernel(k, n, &loop, ker, call, k->flat ? "flat loop" : "row loop");
  if (kn__sb_failed(&body)) kn__sb_reserve(ker, SIZE_MAX / 2);
  kn__sb_fini(&body);
  kn__sb_fini(&loop);
  free(k);
}

/* ---- reductions ---------------------------------------------------------------- */
static const char *const red_init[] = {"0", "0", "-INFINITY"};

/* Per element: each leaf's position from its row offset and r. */
static void inner_offsets(kctx *k, kn__sb *sb, int nd, int rk) {
  kn__sb_puts(sb, "      int64_t u = r;\n");
  for (int li = 0; li < k->nleaves; li++) kn__sb_printf(sb, "      int64_t p%d = o%d;\n", li, li);
  for (int d = nd - 1; d >= nd - rk; d--) {
    kn__sb_puts(sb, "      {\n        const int64_t sz = ");
    sym_text(k, sb, k->shape->sizes[d]);
    kn__sb_puts(sb, ", id = u % sz;\n        u /= sz;\n");
    for (int li = 0; li < k->nleaves; li++) {
      kn__sb_printf(sb, "        p%d += id * (", li);
      leaf_stride(k, sb, &k->leaves[li], d);
      kn__sb_puts(sb, ");\n");
    }
    kn__sb_puts(sb, "      }\n");
  }
}

/* The reduced value x of element (o, r): prologue statements, or a load. */
static void red_value(kctx *k, kn__sb *sb, const kn__gnode *n, const char *ct) {
  const kn__garg *a = &n->args[0];
  const kn__gnode *src = a->u.t.node;
  if (k->p->nodes[src->index].inlined) {
    stmts(k, sb, src);
    kn__sb_printf(sb, "      const %s x = v%d;\n", ct, src->index);
  } else {
    kn__sb_printf(sb, "      const %s x = ", ct);
    load(k, sb, leaf_index(k, kn__ind_value_slot(k->p, a->u.t), &src->meta[a->u.t.idx]));
    kn__sb_puts(sb, ";\n");
  }
}

static void red_loop(kctx *k, kn__sb *sb, const kn__gnode *n) {
  const kn__ind_node *in = &k->p->nodes[n->index];
  int nd = k->shape->ndim, rk = in->red_k;
  const char *ct = kn__ind_ctype(n->meta[0].dtype);
  kn__sb_puts(sb, "  const int64_t outer = ");
  numel_text(k, sb, nd - rk);
  kn__sb_puts(sb, ", red = INT64_C(1)");
  for (int d = nd - rk; d < nd; d++) {
    kn__sb_puts(sb, " * ");
    sym_text(k, sb, k->shape->sizes[d]);
  }
  kn__sb_puts(sb, ";\n  #pragma omp parallel for if (outer * red >= KN_PAR_MIN)\n"
                  "  for (int64_t o = 0; o < outer; o++) {\n");
  if (!k->flat) outer_offsets(k, sb, nd, rk, "o");
  kn__sb_printf(sb, "    double acc = %s;\n    for (int64_t r = 0; r < red; r++) {\n",
                red_init[in->red_op]);
  if (k->flat) kn__sb_puts(sb, "      const int64_t i = o * red + r;\n");
  else inner_offsets(k, sb, nd, rk);
  red_value(k, sb, n, ct);
  if (in->red_op == 2) kn__sb_puts(sb, "      if (x != x || x > acc) acc = x;\n    }\n");
  else kn__sb_puts(sb, "      acc += x;\n    }\n");
  if (in->red_op == 1) kn__sb_puts(sb, "    acc = acc / (double)red;\n");
  kn__sb_printf(sb, "    out[o] = (%s)acc;\n  }\n", ct);
}

/* A reduction kernel: its prologue (inlined pointwise producers) and the
** loop over outputs, each reduced in order (reproducible). */
static void red_kernel(kn__ind_plan *p, const kn__gnode *n, kn__sb *ker, kn__sb *call) {
  kctx *k = calloc(1, sizeof *k);
  if (!k) {
    kn__sb_reserve(ker, SIZE_MAX / 2);
    return;
  }
  const kn__garg *a = &n->args[0];
  *k = (kctx){.p = p, .root = n, .shape = &a->u.t.node->meta[a->u.t.idx]};
  if (p->nodes[a->u.t.node->index].inlined) collect(k, a->u.t.node);
  else leaf_index(k, kn__ind_value_slot(p, a->u.t), k->shape);
  k->flat = true;
  for (int i = 0; i < k->nleaves; i++)
    k->flat &= leaf_same(k, k->leaves[i].m) || leaf_scalar(k->leaves[i].m);
  k->per_elem = !k->flat;
  kn__sb loop;
  kn__sb_init(&loop);
  red_loop(k, &loop, n);
  emit_kernel(k, n, &loop, ker, call, k->flat ? "flat reduction" : "strided reduction");
  kn__sb_fini(&loop);
  free(k);
}

/* ---- liveness -------------------------------------------------------------------- */
/* The node index of the step that computes node i (its kernel root). */
static int step_of(const kn__ind_plan *p, const int *user, int i) {
  while (p->nodes[i].inlined) i = user[i];
  return i;
}

static void note_use(const kn__ind_plan *p, int *last, kn__gref r, int at) {
  int s = r.node ? kn__ind_value_slot(p, r) : -1;
  if (s >= 0 && last[s] < at) last[s] = at;
}

/* last[slot]: index of the last step reading the slot (graph outputs: nnodes). */
static void liveness(const kn__ind_plan *p, const int *user, int *last) {
  for (int s = 0; s < p->nslots; s++) last[s] = p->slot_node[s]->index;
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(p->g, i);
    int at = n->op == KN__GN_OUTPUT ? p->nnodes : step_of(p, user, i);
    for (int a = 0; a < n->nargs; a++) {
      const kn__garg *ga = &n->args[a];
      if (ga->kind == KN__GA_TENSOR) note_use(p, last, ga->u.t, at);
      for (int j = 0; ga->kind == KN__GA_TENSORS && j < ga->u.ts.n; j++)
        note_use(p, last, ga->u.ts.v[j], at);
    }
  }
}

static void users_of(const kn__ind_plan *p, int *user) {
  for (int i = 0; i < p->nnodes; i++) user[i] = -1;
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(p->g, i);
    for (int a = 0; a < n->nargs; a++)
      if (n->args[a].kind == KN__GA_TENSOR && n->args[a].u.t.node)
        user[n->args[a].u.t.node->index] = i;
  }
}

static void releases(const kn__ind_plan *p, const int *last, int at, kn__sb *call) {
  for (int s = 0; s < p->nslots; s++) {
    const kn__ind_node *in = &p->nodes[p->slot_node[s]->index];
    if (last[s] == at && in->kind != KN__IND_INPUT && in->kind != KN__IND_ATTR)
      kn__sb_printf(call, "  rt->release(ctx, %d);\n", s);
  }
}

static void extern_call(const kn__ind_plan *p, const kn__gnode *n, kn__sb *call) {
  kn__sb_printf(call, "  if (rt->ext(ctx, %d)) return -1;  /* extern ", p->nodes[n->index].step);
  put_safe(call, n->target);
  kn__sb_putc(call, ' ');
  put_safe(call, n->name);
  kn__sb_puts(call, " */\n");
}

kn_status kn__ind_codegen(kn__ind_plan *p, kn__sb *sb) {
  int *user = malloc(((size_t)p->nnodes + 1) * sizeof *user);
  int *last = malloc(((size_t)p->nslots + 1) * sizeof *last);
  if (!user || !last) {
    free(user);
    free(last);
    return kn__oom();
  }
  users_of(p, user);
  liveness(p, user, last);
  kn__sb ker, call;
  kn__sb_init(&ker);
  kn__sb_init(&call);
  kn__sb_puts(&call, "int call(const kn_rt *rt, void *ctx, const int64_t *s);\n"
                     "int call(const kn_rt *rt, void *ctx, const int64_t *s) {\n" KN__IND_VM_BIND);
  for (int i = 0; i < p->nnodes; i++) {
    const kn__gnode *n = kn__graph_node(p->g, i);
    const kn__ind_node *in = &p->nodes[i];
    if (in->kind == KN__IND_EXTERN) extern_call(p, n, &call);
    else if (in->kind == KN__IND_PW && !in->inlined) kernel(p, n, &ker, &call);
    else if (in->kind == KN__IND_RED) red_kernel(p, n, &ker, &call);
    else continue;
    releases(p, last, i, &call);
  }
  kn__sb_puts(&call, "  return 0;\n}\n");
  kn__sb_puts(sb, "/* generated by kiln inductor */\n");
  kn__sb_puts(sb, prelude);
  kn_status st = kn__ind_formula_prelude(p, sb);
  kn__sb_puts(sb, kn__sb_cstr(&ker));
  kn__sb_puts(sb, kn__sb_cstr(&call));
  bool bad = st != KN_OK || kn__sb_failed(&ker) || kn__sb_failed(&call) || kn__sb_failed(sb);
  kn__sb_fini(&ker);
  kn__sb_fini(&call);
  free(user);
  free(last);
  return bad ? kn__error(KN_ENOMEM, "inductor: out of memory while generating code (or more "
                         "than 64 inputs / 256 symbolic sizes in one kernel)") : KN_OK;
}
