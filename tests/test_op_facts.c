/*
** tests/test_op_facts.c: the per-op facts table (ops/ops_facts.def) covers
** the op table. The test walks every op of ops/ops.def and fails, naming the
** op and the fact, for any op missing a fact its flags require, or whose
** fact contradicts its flags or the pointwise formula table.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ops/opfacts.h"
#include "graph/graph.h"
#include "inductor/inductor.h"
#include "ops/pointwise.h"

static const char *qname(const kn__opdef *op, char *buf, size_t n) {
  snprintf(buf, n, "%s%s%s", op->name, *op->overload ? "." : "", op->overload);
  return buf;
}

/* ---- recompute class ----------------------------------------------------------- */

Test(op_facts, every_op_has_a_recompute_class) {
  for (int id = 0; id < KN__OP_COUNT; id++) {
    char q[128];
    cr_expect_neq(kn__op_facts(id)->recompute, KN__RC_NONE,
                  "op %s has no recompute class (a row in ops/ops_facts.def)",
                  qname(&kn__ops[id], q, sizeof q));
  }
}

Test(op_facts, recompute_class_agrees_with_the_flags) {
  const uint32_t unsafe = KN_OPF_RANDOM | KN_OPF_INPLACE | KN_OPF_DATA_DEP;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    kn__recompute rc = kn__op_facts(id)->recompute;
    char q[128];
    qname(op, q, sizeof q);
    if (op->flags & unsafe)
      cr_expect_eq(rc, KN__RC_NEVER, "op %s is random, in-place or data-dependent: recompute "
                   "class must be NEVER, found %s", q, kn__recompute_name(rc));
    else
      cr_expect_neq(rc, KN__RC_NEVER, "op %s: recompute class NEVER needs a reason in its flags "
                    "(random, in-place, data-dependent)", q);
    if ((op->flags & KN_OPF_VIEW) && !(op->flags & unsafe))
      cr_expect_eq(rc, KN__RC_CHEAP, "view op %s: recompute class must be CHEAP, found %s", q,
                   kn__recompute_name(rc));
  }
}

/* A pointwise op of the formula table is CHEAP exactly when its formula is
** memory-bound (the eager kernels' own measure), else COMPUTE. */
Test(op_facts, pointwise_recompute_class_follows_the_formula_table) {
  int n = 0;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__pwinfo *pi = kn__pw_info(id);
    if (!pi->present || pi->inplace) continue;
    char q[128];
    kn__recompute want = kn__pw_form(pi->code)->memory_bound ? KN__RC_CHEAP : KN__RC_COMPUTE;
    cr_expect_eq(kn__op_facts(id)->recompute, want, "op %s: formula %s wants recompute class "
                 "%s, found %s", qname(&kn__ops[id], q, sizeof q), kn__pw_form(pi->code)->name,
                 kn__recompute_name(want), kn__recompute_name(kn__op_facts(id)->recompute));
    n++;
  }
  cr_expect_gt(n, 60); /* 66 functional rows of KN__PW_OPS today */
}

/* Literal classes of well-known ops (what torch's min-cut partitioner does
** with them: pointwise and shape ops recomputed, GEMMs and reductions saved,
** random ops never recomputed). */
Test(op_facts, recompute_class_of_known_ops) {
  struct { int id; kn__recompute rc; } want[] = {
      {KN_OP_ADD, KN__RC_CHEAP},       {KN_OP_RELU, KN__RC_CHEAP},
      {KN_OP_WHERE, KN__RC_CHEAP},     {KN_OP_TO_COPY, KN__RC_CHEAP},
      {KN_OP_FULL, KN__RC_CHEAP},      {KN_OP_RESHAPE, KN__RC_CHEAP},
      {KN_OP_VIEW, KN__RC_CHEAP},      {KN_OP_EXP, KN__RC_COMPUTE},
      {KN_OP_TANH, KN__RC_COMPUTE},    {KN_OP_DIV, KN__RC_COMPUTE},
      {KN_OP_MM, KN__RC_SAVE},         {KN_OP_ADDMM, KN__RC_SAVE},
      {KN_OP_SUM_DIM, KN__RC_SAVE},    {KN_OP_SOFTMAX, KN__RC_SAVE},
      {KN_OP_DROPOUT, KN__RC_NEVER},   {KN_OP_RANDN, KN__RC_NEVER},
      {KN_OP_NONZERO, KN__RC_NEVER},   {KN_OP_ADD_, KN__RC_NEVER},
  };
  for (size_t k = 0; k < sizeof want / sizeof *want; k++)
    cr_expect_eq(kn__op_facts(want[k].id)->recompute, want[k].rc, "%s: want %s, found %s",
                 kn__ops[want[k].id].name, kn__recompute_name(want[k].rc),
                 kn__recompute_name(kn__op_facts(want[k].id)->recompute));
  cr_expect(kn__op_recomputable(KN_OP_EXP) && !kn__op_cheap(KN_OP_EXP));
  cr_expect(kn__op_recomputable(KN_OP_ADD) && kn__op_cheap(KN_OP_ADD));
  cr_expect(!kn__op_recomputable(KN_OP_MM) && !kn__op_recomputable(KN_OP_DROPOUT));
}

/* ---- functional / in-place partners -------------------------------------------------- */

/* The argument list of a schema with the alias annotations of self and the
** result removed: "(Tensor(a!) self, Scalar other) -> Tensor(a!)" ->
** "(Tensor self, Scalar other) -> Tensor". */
static void plain_args(const char *schema, char *out, size_t n) {
  const char *p = strchr(schema, '(');
  size_t k = 0;
  for (; p && *p && k + 1 < n; p++) {
    if (!strncmp(p, "(a!)", 4)) { p += 3; continue; }
    out[k++] = *p;
  }
  out[k] = 0;
}

/* The op named name.overload in the table, or -1. */
static int find_op(const char *name, const char *overload) {
  for (int id = 0; id < KN__OP_COUNT; id++)
    if (!strcmp(kn__ops[id].name, name) && !strcmp(kn__ops[id].overload, overload)) return id;
  return -1;
}

Test(op_facts, partners_are_mutual_and_take_the_same_arguments) {
  int pairs = 0;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    int p = kn__op_facts(id)->partner;
    if (p < 0) continue;
    char q[128], qp[128], a[512], b[512];
    qname(op, q, sizeof q);
    qname(&kn__ops[p], qp, sizeof qp);
    cr_expect_eq(kn__op_facts(p)->partner, id, "op %s names partner %s, whose partner is not %s",
                 q, qp, q);
    cr_expect_neq(op->flags & KN_OPF_INPLACE, kn__ops[p].flags & KN_OPF_INPLACE,
                  "op %s and its partner %s must be one in-place, one functional", q, qp);
    plain_args(op->schema, a, sizeof a);
    plain_args(kn__ops[p].schema, b, sizeof b);
    cr_expect_str_eq(a, b, "op %s and its partner %s take other arguments", q, qp);
    pairs += (op->flags & KN_OPF_INPLACE) != 0;
  }
  cr_expect_geq(pairs, 27); /* 27 in-place ops of the table have a functional op today */
}

/* Every in-place op whose torch functional form (its name without the
** trailing '_', same overload) is in the table is partnered with it, and
** the reverse; the in-place ops without one are exactly those torch's
** functional form of which kiln does not define (copy, fill, zero) and
** kiln's own _setitem ops. */
Test(op_facts, every_inplace_op_has_its_functional_partner) {
  static const char *const none[] = {"copy_", "fill_", "zero_", "_setitem_slice_",
                                     "_setitem_select_"};
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    if (!(op->flags & KN_OPF_INPLACE)) continue;
    char q[128], base[96];
    qname(op, q, sizeof q);
    size_t l = strlen(op->name);
    snprintf(base, sizeof base, "%.*s", (int)(l - 1), op->name);
    int f = find_op(base, op->overload);
    char a[512], b[512];
    plain_args(op->schema, a, sizeof a);
    if (f >= 0) plain_args(kn__ops[f].schema, b, sizeof b);
    if (f >= 0 && !(kn__ops[f].flags & KN_OPF_INPLACE) && !strcmp(a, b))
      cr_expect_eq(kn__op_facts(id)->partner, f, "in-place op %s lacks its functional partner "
                   "%s.%s", q, base, op->overload);
    bool listed = false;
    for (size_t k = 0; k < sizeof none / sizeof *none; k++) listed |= !strcmp(op->name, none[k]);
    cr_expect_eq(kn__op_facts(id)->partner < 0, listed,
                 "in-place op %s: partner %s, expected %s", q,
                 kn__op_facts(id)->partner < 0 ? "none" : "present",
                 listed ? "none (torch's functional form is not in the table)" : "one");
  }
  /* pow_.Scalar's functional op is pow.Tensor_Scalar (pow.Scalar is
  ** Scalar ** Tensor) */
  cr_expect_eq(kn__op_facts(KN_OP_POW_SCALAR_)->partner, KN_OP_POW_SCALAR);
  cr_expect_eq(kn__op_facts(KN_OP_POW_SELF_SCALAR)->partner, -1);
  cr_expect_eq(kn__op_facts(KN_OP_INDEX_PUT_)->partner, KN_OP_INDEX_PUT);
}

/* ---- repro templates ------------------------------------------------------------------ */

Test(op_facts, every_op_has_a_repro_row_or_a_reason) {
  int last = -1, with_tmpl = 0;
  for (int id = 0; id < KN__OP_COUNT; id++) {
    char q[128];
    qname(&kn__ops[id], q, sizeof q);
    int n;
    const kn__repro *r = kn__op_repro(id, &n);
    cr_expect_gt(n, 0, "op %s has no repro template and no 'no public form' reason "
                 "(ops/ops_repro.def): fx_graph_runnable would silently lack it", q);
    if (n <= 0) continue;
    cr_expect_gt(r - kn__op_repro(0, &(int){0}), last, "op %s: rows out of op id order", q);
    last = (int)(r - kn__op_repro(0, &(int){0})) + n - 1;
    for (int i = 0; i < n; i++) {
      if (!r[i].tmpl) {
        cr_expect_eq(n, 1, "op %s: a 'no public form' entry must be its only row", q);
        cr_expect(r[i].reason && strlen(r[i].reason) > 10, "op %s: no public form needs a reason",
                  q);
        continue;
      }
      with_tmpl++;
      const char *ret = strstr(kn__ops[id].schema, "-> ");
      bool several = ret && (ret[3] == '(' || strstr(ret, "[]"));
      cr_expect_eq(strstr(r[i].tmpl, "%o") != NULL, several,
                   "op %s returns %s: its template must %s the output array %%o", q,
                   several ? "several tensors" : "one tensor", several ? "fill" : "not use");
      for (const char *p = r[i].cond; *p; p++) {
        if (*p == ' ') continue;
        cr_expect(p[0] >= '0' && p[0] <= '9' && p[1] && strchr("opufnwz", p[1]),
                  "op %s: bad condition clause in \"%s\"", q, r[i].cond);
        if (p[1]) p++;
      }
    }
  }
  cr_expect_gt(with_tmpl, 180);
}

/* The arguments of a schema, each as (type, has default). */
typedef struct sarg { char type[32]; bool dflt; } sarg;

static int schema_args(const char *schema, sarg *out, int cap) {
  const char *p = strchr(schema, '(') + 1;
  int n = 0, depth = 0;
  char buf[128];
  size_t k = 0;
  for (; *p && n < cap; p++) {
    if ((*p == ',' || *p == ')') && depth == 0) {
      buf[k] = 0;
      const char *b = buf;
      while (*b == ' ') b++;
      if (*b && strcmp(b, "*")) {
        size_t tl = strcspn(b, " ");
        snprintf(out[n].type, sizeof out[n].type, "%.*s", (int)tl, b);
        out[n].dflt = strchr(b, '=') != NULL;
        n++;
      }
      k = 0;
      if (*p == ')') break;
      continue;
    }
    if (*p == '(') depth++;
    if (*p == ')') depth--;
    if (k + 1 < sizeof buf) buf[k++] = *p;
  }
  return n;
}

static int schema_nout(const char *schema) {
  const char *r = strstr(schema, "->");
  if (strstr(r, "[]")) return 2;
  if (!strchr(r, '(')) return 1;
  int n = 1;
  for (const char *p = strchr(r, '('); *p; p++) n += *p == ',';
  return n;
}


/* An argument of schema type t standing for any value; omit 1 leaves out
** optional ('?') arguments, 2 also those with a default. */
static kn__garg synth(const sarg *a, kn__gnode *x, kn__gref *list, int omit) {
  const char *t = a->type;
  bool opt = strchr(t, '?') != NULL || (omit == 2 && a->dflt);
  if (omit && opt && strncmp(t, "Tensor", 6)) return (kn__garg){.kind = KN__GA_NONE};
  if (omit && opt && !strcmp(t, "Tensor?")) return KN_GA_T(NULL);
  if (strstr(t, "Tensor") && strstr(t, "[]")) return KN_GA_TS(list, 2);
  if (!strncmp(t, "Tensor", 6)) return KN_GA_T(x);
  static const kn_sym zeros2[2] = {{.c = 0}, {.c = 0}};
  if (strchr(t, '[')) return KN_GA_INTS(zeros2, 2);
  if (!strncmp(t, "int", 3) || !strncmp(t, "SymInt", 6) || !strncmp(t, "str", 3))
    return KN_GA_I(1);
  if (!strncmp(t, "float", 5)) return KN_GA_D(0.5);
  if (!strncmp(t, "bool", 4)) return KN_GA_B(false);
  if (!strncmp(t, "Scalar", 6) && strncmp(t, "ScalarType", 10)) return KN_GA_S(kn_int(1));
  if (!strncmp(t, "ScalarType", 10)) return (kn__garg){.kind = KN__GA_DTYPE, .u.dt = KN_FLOAT32};
  if (!strncmp(t, "Generator", 9)) return (kn__garg){.kind = KN__GA_GEN};
  return (kn__garg){.kind = KN__GA_NONE}; /* MemoryFormat */
}

/* Adds a call of op id to g with every argument synthesized (optional ones
** present, or omitted), plus a getitem for a second output; NULL on failure. */
static kn__gnode *synth_call(kn__graph *g, int id, kn__gnode *x, kn__gref *list, int omit) {
  sarg sa[16];
  int na = schema_args(kn__ops[id].schema, sa, 16), nout = schema_nout(kn__ops[id].schema);
  kn__garg args[16];
  for (int i = 0; i < na; i++) args[i] = synth(&sa[i], x, list, omit);
  kn__vmeta m[4];
  for (int k = 0; k < nout; k++) m[k] = x->meta[0];
  kn__gnode *n = kn__graph_call(g, &kn__ops[id], na, args, nout, m);
  if (n && nout > 1) (void)kn__graph_getitem(g, n, 1);
  return n;
}

static kn__graph *base_graph(kn__gnode **x, kn__gref *list) {
  kn__graph *g = kn__graph_new();
  kn__vmeta m = {.kind = KN__V_TENSOR, .dtype = KN_FLOAT32, .ndim = 1};
  m.sizes[0] = kn__sym_const(3);
  m.strides[0] = kn__sym_const(1);
  *x = kn__graph_placeholder(g, "L['x']", &m);
  list[0] = list[1] = (kn__gref){*x, 0};
  return g;
}

static void finish(kn__graph *g, kn__gnode *x) {
  kn__gref outs[] = {{x, 0}};
  cr_assert_not_null(kn__graph_output(g, 1, outs), "%s", kn_last_error());
}

/* The graph's outputs: x and every value in vals (so the program reads
** each call's result). */
static void finish_with(kn__graph *g, kn__gnode *x, kn__gref *vals, int n) {
  vals[n] = (kn__gref){x, 0};
  cr_assert_not_null(kn__graph_output(g, n + 1, vals), "%s", kn_last_error());
}

/* Does op id, with optional arguments present or omitted, expand? */
static bool expands(int id, int omit) {
  kn__gnode *x;
  kn__gref list[2];
  kn__graph *g = base_graph(&x, list);
  bool ok = synth_call(g, id, x, list, omit) != NULL;
  if (ok) finish(g, x);
  const char *why = NULL, *reason = NULL;
  char *src = ok ? kn__ind_runnable(g, &why, &reason) : NULL;
  free(src);
  kn__graph_free(g);
  return src != NULL;
}

/* Every template, expanded for a call with arguments of its schema's types,
** compiles against the public headers (-Werror), and the program returns
** every call's result: a wrong function name, a missing or extra argument,
** a wrong type or a result never assigned fails here. One program holds
** every op's call, so one compiler run checks them all. */
Test(op_facts, every_repro_template_compiles_against_the_public_api) {
  if (system("cc --version > /dev/null 2>&1") != 0) cr_skip_test("no C compiler");
  kn__gnode *x;
  kn__gref list[2];
  kn__graph *g = base_graph(&x, list);
  int calls = 0;
  static kn__gref vals[4 * KN__OP_COUNT];
  for (int id = 0; id < KN__OP_COUNT; id++) {
    int n;
    const kn__repro *r = kn__op_repro(id, &n);
    if (n <= 0 || !r->tmpl) continue;
    int fits = 0;
    for (int omit = 0; omit < 3; omit++) {
      if (!expands(id, omit)) continue;
      fits++;
      kn__gnode *c = synth_call(g, id, x, list, omit);
      if (c) vals[calls++] = kn__graph_value(g, c, 0);
    }
    char q[128];
    cr_expect_gt(fits, 0, "op %s: no repro row fits a call of its schema",
                 qname(&kn__ops[id], q, sizeof q));
  }
  finish_with(g, x, vals, calls);
  const char *why = NULL, *reason = NULL;
  char *src = kn__ind_runnable(g, &why, &reason);
  cr_assert_not_null(src, "%s: %s", why ? why : "?", reason ? reason : "no row fits");
  char dir[] = "/tmp/kn-opfacts-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char path[128], cmd[512];
  snprintf(path, sizeof path, "%s/all.c", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(src, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -std=c17 -fsyntax-only -Wall -Werror -Wno-unused-variable "
           "-Wno-unused-but-set-variable -I'%s/include' '%s' "
           "> '%s/cc.txt' 2>&1", KN_SOURCE_DIR, path, dir);
  int rc = system(cmd);
  cr_expect_eq(rc, 0, "the repro of every op does not compile: see %s/cc.txt", dir);
  cr_expect_gt(calls, 180);
  if (rc == 0) {
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)system(cmd);
  }
  free(src);
  kn__graph_free(g);
}

/* A graph with an op that has no public form gets no repro, and the
** reason is the table's. */
Test(op_facts, an_op_without_public_form_reports_its_reason) {
  kn__gnode *x;
  kn__gref list[2];
  kn__graph *g = base_graph(&x, list);
  cr_assert_not_null(synth_call(g, KN_OP_LAYER_NORM_BACKWARD, x, list, 0));
  finish(g, x);
  const char *why = NULL, *reason = NULL;
  char *src = kn__ind_runnable(g, &why, &reason);
  cr_expect_null(src);
  cr_expect(why && strstr(why, "native_layer_norm_backward"), "%s", why ? why : "(null)");
  cr_expect(reason && strstr(reason, "derivative op"), "%s", reason ? reason : "(null)");
  free(src);
  kn__graph_free(g);
}

/* ---- lowering class (inductor/lowering.def) -------------------------------------------- */

static bool is_role(kn__ind_role r, kn__ind_role lo, kn__ind_role hi) { return r >= lo && r <= hi; }

Test(op_facts, every_op_has_a_lowering_class_that_fits_its_flags) {
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    const kn__ind_lowering *l = kn__ind_lowering_of(op);
    const kn__pwinfo *pi = kn__pw_info(id);
    char q[128];
    qname(op, q, sizeof q);
    const char *cls = kn__ind_lclass_name(l->cls);
    cr_expect_neq(l->cls, KN__IND_L_NONE, "op %s has no lowering class (a row in "
                  "inductor/lowering.def)", q);
    /* a pointwise op of the formula table lowers by its formula, unless the
    ** formula is eager-only (no compute class; clamp's read the bounds) */
    bool formula = pi->present && !pi->inplace && kn__pw_form(pi->code)->classes != 0 &&
                   pi->code != KN__PW_CLAMP;
    cr_expect_eq(l->cls == KN__IND_L_FORMULA, formula, "op %s: lowering class %s, but its "
                 "formula table row says %s", q, cls, formula ? "FORMULA" : "not FORMULA");
    if (op->flags & KN_OPF_INPLACE)
      cr_expect_eq(l->cls, KN__IND_L_EXTERN, "in-place op %s must lower as EXTERN (found %s): "
                   "functionalization removes it before inductor", q, cls);
    cr_expect_eq(l->role == KN__IND_R_DEC_KERNEL, (op->flags & KN_OPF_COMPOSITE) != 0,
                 "op %s: a composite op decomposes through its kernel, and only it", q);
    if (l->cls == KN__IND_L_DECOMP)
      cr_expect(is_role(l->role, KN__IND_R_DEC_SOFTMAX, KN__IND_R_DEC_KERNEL),
                "op %s: class DECOMP needs a decomposition rule (role DEC_*)", q);
    if (is_role(l->role, KN__IND_R_DEC_SOFTMAX, KN__IND_R_DEC_KERNEL))
      cr_expect_eq(l->cls, KN__IND_L_DECOMP, "op %s: a DEC_* role needs class DECOMP", q);
    if (is_role(l->role, KN__IND_R_EP_ADDMM, KN__IND_R_EP_CONV))
      cr_expect(l->cls == KN__IND_L_EXTERN,
                "op %s: a GEMM / convolution an epilogue fuses into runs as an extern call", q);
    if (l->cls == KN__IND_L_REDUCTION)
      cr_expect(op->flags & KN_OPF_REDUCTION, "op %s: class REDUCTION, flags say otherwise", q);
    if (l->cls == KN__IND_L_SELECT || l->cls == KN__IND_L_CAST || l->cls == KN__IND_L_CONSTANT)
      cr_expect(op->flags & (KN_OPF_POINTWISE | KN_OPF_FACTORY), "op %s: class %s needs a "
                "pointwise or factory op", q, cls);
    if (l->cls == KN__IND_L_BROADCAST)
      cr_expect(op->flags & KN_OPF_VIEW, "op %s: class BROADCAST needs a view op", q);
  }
}

Test(op_facts, lowering_of_known_ops) {
  struct { int id; kn__ind_lclass cls; kn__ind_role role; } want[] = {
      {KN_OP_ADD, KN__IND_L_FORMULA, KN__IND_R_NONE},
      {KN_OP_RELU, KN__IND_L_FORMULA, KN__IND_R_NONE},
      {KN_OP_GELU, KN__IND_L_FORMULA, KN__IND_R_NONE},
      {KN_OP_BMM, KN__IND_L_EXTERN, KN__IND_R_EP_BMM},
      {KN_OP_MM, KN__IND_L_EXTERN, KN__IND_R_EP_MM},
      {KN_OP_WHERE, KN__IND_L_SELECT, KN__IND_R_NONE},
      {KN_OP_TO_COPY, KN__IND_L_CAST, KN__IND_R_NONE},
      {KN_OP_FULL, KN__IND_L_CONSTANT, KN__IND_R_NONE},
      {KN_OP_SUM_DIM, KN__IND_L_REDUCTION, KN__IND_R_NONE},
      {KN_OP_SOFTMAX, KN__IND_L_DECOMP, KN__IND_R_DEC_SOFTMAX},
      {KN_OP_NLL_LOSS2D, KN__IND_L_DECOMP, KN__IND_R_DEC_NLL_LOSS},
      {KN_OP_CROSS_ENTROPY, KN__IND_L_DECOMP, KN__IND_R_DEC_KERNEL},
      {KN_OP_ADDMM, KN__IND_L_EXTERN, KN__IND_R_EP_ADDMM},
      {KN_OP_CONVOLUTION, KN__IND_L_EXTERN, KN__IND_R_EP_CONV},
      {KN_OP_CLAMP, KN__IND_L_EXTERN, KN__IND_R_NONE},
      {KN_OP_TOPK, KN__IND_L_EXTERN, KN__IND_R_NONE},
  };
  for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
    const kn__ind_lowering *l = kn__ind_lowering_of(&kn__ops[want[k].id]);
    cr_expect(l->cls == want[k].cls && l->role == want[k].role, "%s: want %s/%d, found %s/%d",
              kn__ops[want[k].id].name, kn__ind_lclass_name(want[k].cls), (int)want[k].role,
              kn__ind_lclass_name(l->cls), (int)l->role);
  }
  cr_expect_eq(kn__ind_role_op(KN__IND_R_EP_CONV), &kn__ops[KN_OP_CONVOLUTION]);
  /* an op outside the table lowers as an extern call */
  kn__opdef fused = {.id = -1, .name = "not_an_op"};
  cr_expect_eq(kn__ind_lowering_of(&fused)->cls, KN__IND_L_EXTERN);
  cr_expect(kn__ind_has_decomp(KN_OP_LAYER_NORM) && !kn__ind_has_decomp(KN_OP_MM) &&
            !kn__ind_has_decomp(KN_OP_LINEAR));
}

/* A view (one output, its schema's "-> Tensor(a)" notwithstanding) assigns
** its result to a variable; topk (a tuple) fills an array that its getitem
** reads. */
Test(op_facts, repro_variables_follow_the_number_of_outputs) {
  kn__gnode *x;
  kn__gref list[2];
  kn__graph *g = base_graph(&x, list);
  kn__gnode *v = synth_call(g, KN_OP_VIEW, x, list, 0);
  kn__gnode *t = synth_call(g, KN_OP_TOPK, x, list, 0);
  cr_assert(v && t);
  kn__gref vals[3] = {{v, 0}, kn__graph_value(g, t, 1)};
  finish_with(g, x, vals, 2);
  const char *why = NULL, *reason = NULL;
  char *src = kn__ind_runnable(g, &why, &reason);
  cr_assert_not_null(src, "%s", why ? why : "");
  char want[64];
  snprintf(want, sizeof want, "kn_tensor *v%d = kn_view(v0, ", v->index);
  cr_expect(strstr(src, want), "want '%s' in:\n%s", want, src);
  snprintf(want, sizeof want, "o%d[0] = kn_topk(v0, ", t->index);
  cr_expect(strstr(src, want), "want '%s' in:\n%s", want, src);
  snprintf(want, sizeof want, " = o%d[1];", t->index);
  cr_expect(strstr(src, want), "want '%s' in:\n%s", want, src);
  free(src);
  kn__graph_free(g);
}
