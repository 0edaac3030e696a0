/*
** inductor/runnable.c: fx_graph_runnable, a standalone C file that rebuilds
** a graph compiled by inductor with kiln's public ops and compiles it again:
**   cc repro.c $(pkg-config --cflags --libs kiln) && ./a.out
** The file defines the graph as a kn_fn (one public op call per node), makes
** random inputs and constants of the recorded sizes and dtypes from a seeded
** generator, compiles the function with backend "inductor" (fullgraph; dynamic
** when an input has a symbolic size) and calls it once; it exits 0 when the
** compile and the call succeed, 1 with kiln's error otherwise.
**
** Each op is one row below: its qualified name, an optional condition on its
** arguments, and a template of the public call ($k: argument k as a C
** expression, @k / #k: an int list's array and length). An op without a row
** (or whose arguments fail every row's condition) means no repro: the
** artifact is not written and the reason is logged (KILN_LOGS=+inductor).
** Symbolic int arguments are written as their example values. Nothing the
** user wrote reaches the file: variables are named after node indices and
** node names appear in comments reduced to [A-Za-z0-9_.].
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"
#include "logging/log.h"
#include "trace/events.h"

/* cond: -1 none; else the argument index that must be omitted (KN__GA_NONE)
** or, for a scalar, equal to 1 (alpha). */
typedef struct row { const char *op, *tmpl; int cond; } row;

static const row rows[] = {
    {"add.Tensor", "kn_add_scaled($0, $1, $2)", -1},
    {"sub.Tensor", "kn_sub_scaled($0, $1, $2)", -1},
    {"add.Scalar", "kn_add_scalar($0, $1)", 2},
    {"sub.Scalar", "kn_sub_scalar($0, $1)", 2},
    {"mul.Tensor", "kn_mul($0, $1)", -1},
    {"mul.Scalar", "kn_mul_scalar($0, $1)", -1},
    {"div.Tensor", "kn_div($0, $1)", -1},
    {"div.Scalar", "kn_div_scalar($0, $1)", -1},
    {"maximum", "kn_maximum($0, $1)", -1},
    {"minimum", "kn_minimum($0, $1)", -1},
    {"pow.Tensor_Tensor", "kn_pow($0, $1)", -1},
    {"pow.Tensor_Scalar", "kn_pow_scalar($0, $1)", -1},
    {"pow.Scalar", "kn_scalar_pow($0, $1)", -1},
    {"eq.Tensor", "kn_eq($0, $1)", -1}, {"ne.Tensor", "kn_ne($0, $1)", -1},
    {"lt.Tensor", "kn_lt($0, $1)", -1}, {"le.Tensor", "kn_le($0, $1)", -1},
    {"gt.Tensor", "kn_gt($0, $1)", -1}, {"ge.Tensor", "kn_ge($0, $1)", -1},
    {"eq.Scalar", "kn_eq_scalar($0, $1)", -1}, {"ne.Scalar", "kn_ne_scalar($0, $1)", -1},
    {"lt.Scalar", "kn_lt_scalar($0, $1)", -1}, {"le.Scalar", "kn_le_scalar($0, $1)", -1},
    {"gt.Scalar", "kn_gt_scalar($0, $1)", -1}, {"ge.Scalar", "kn_ge_scalar($0, $1)", -1},
    {"logical_and", "kn_logical_and($0, $1)", -1},
    {"logical_or", "kn_logical_or($0, $1)", -1},
    {"logical_not", "kn_logical_not($0)", -1},
    {"neg", "kn_neg($0)", -1}, {"abs", "kn_abs($0)", -1}, {"sgn", "kn_sgn($0)", -1},
    {"reciprocal", "kn_reciprocal($0)", -1}, {"exp", "kn_exp($0)", -1},
    {"exp2", "kn_exp2($0)", -1}, {"log", "kn_log($0)", -1}, {"log2", "kn_log2($0)", -1},
    {"log1p", "kn_log1p($0)", -1}, {"expm1", "kn_expm1($0)", -1},
    {"sqrt", "kn_sqrt($0)", -1}, {"rsqrt", "kn_rsqrt($0)", -1}, {"sin", "kn_sin($0)", -1},
    {"cos", "kn_cos($0)", -1}, {"tan", "kn_tan($0)", -1}, {"tanh", "kn_tanh($0)", -1},
    {"sigmoid", "kn_sigmoid($0)", -1}, {"relu", "kn_relu($0)", -1},
    {"silu", "kn_silu($0)", -1}, {"erf", "kn_erf($0)", -1}, {"log10", "kn_log10($0)", -1},
    {"sinh", "kn_sinh($0)", -1}, {"cosh", "kn_cosh($0)", -1}, {"asin", "kn_asin($0)", -1},
    {"acos", "kn_acos($0)", -1}, {"atan", "kn_atan($0)", -1}, {"erfc", "kn_erfc($0)", -1},
    {"round", "kn_round($0)", -1}, {"trunc", "kn_trunc($0)", -1},
    {"floor", "kn_floor($0)", -1}, {"ceil", "kn_ceil($0)", -1},
    {"gelu", "kn_gelu($0, (kn_gelu_approx)$1)", -1},
    {"softplus", "kn_softplus($0, $1, $2)", -1},
    {"where.self", "kn_where($0, $1, $2)", -1},
    {"threshold_backward", "kn_threshold_backward($0, $1, $2)", -1},
    {"sigmoid_backward", "kn_sigmoid_backward($0, $1)", -1},
    {"tanh_backward", "kn_tanh_backward($0, $1)", -1},
    {"gelu_backward", "kn_gelu_backward($0, $1, (kn_gelu_approx)$2)", -1},
    {"clone", "kn_clone($0)", -1},
    {"contiguous", "kn_contiguous($0)", -1},
    {"_to_copy", "kn_to_copy($0, $1)", -1},
    {"to.dtype", "kn_to($0, $1)", -1},
    {"full", "kn_full(#0, @0, $1, $2)", -1},
    {"sum", "kn_sum($0)", 1},
    {"sum.dim_IntList", "kn_sum_dims($0, @1, #1, $2)", 3},
    {"sum.dim_IntList", "kn_sum_dtype($0, @1, #1, $2, $3)", -1},
    {"mean", "kn_mean($0)", 1},
    {"mean.dim", "kn_mean_dims($0, @1, #1, $2)", 3},
    {"mean.dim", "kn_mean_dtype($0, @1, #1, $2, $3)", -1},
    {"amax", "kn_amax($0, @1, #1, $2)", -1},
    {"amin", "kn_amin($0, @1, #1, $2)", -1},
    {"_softmax", "kn_softmax($0, $1)", -1},
    {"_log_softmax", "kn_log_softmax($0, $1)", -1},
    {"mm", "kn_mm($0, $1)", -1}, {"bmm", "kn_bmm($0, $1)", -1},
    {"dot", "kn_dot($0, $1)", -1}, {"mv", "kn_mv($0, $1)", -1},
    {"matmul", "kn_matmul($0, $1)", -1},
    {"addmm", "kn_addmm($0, $1, $2, $3, $4)", -1},
    {"linear", "kn_linear($0, $1, $2)", -1},
    {"view", "kn_view($0, #1, @1)", -1},
    {"reshape", "kn_reshape($0, #1, @1)", -1},
    {"permute", "kn_permute($0, #1, @1)", -1},
    {"transpose.int", "kn_transpose($0, $1, $2)", -1},
    {"t", "kn_t($0)", -1},
    {"expand", "kn_expand($0, #1, @1)", -1},
    {"unsqueeze", "kn_unsqueeze($0, $1)", -1},
    {"squeeze", "kn_squeeze($0)", -1},
    {"squeeze.dim", "kn_squeeze_dim($0, $1)", -1},
    {"narrow", "kn_narrow($0, $1, $2, $3)", -1},
    {"unflatten.int", "kn_unflatten($0, $1, #2, @2)", -1},
    {"select.int", "kn_select($0, $1, $2)", -1},
};

static const char *dtype_enum(kn_dtype dt) {
  switch (dt) {
  case KN_FLOAT32: return "KN_FLOAT32";
  case KN_FLOAT64: return "KN_FLOAT64";
  case KN_INT64: return "KN_INT64";
  case KN_INT32: return "KN_INT32";
  case KN_BOOL: return "KN_BOOL";
  default: return NULL;
  }
}

/* Node names in comments: [A-Za-z0-9_.] only. */
static void put_safe(kn__sb *sb, const char *s) {
  for (; s && *s; s++) {
    char c = *s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    kn__sb_putc(sb, ok ? c : '_');
  }
}

static void put_double(kn__sb *sb, double d) {
  if (isnan(d)) kn__sb_puts(sb, "NAN");
  else if (isinf(d)) kn__sb_puts(sb, d > 0 ? "INFINITY" : "-INFINITY");
  else kn__sb_printf(sb, "%.17g", d);
}

static bool put_scalar(kn__sb *sb, kn_scalar s) {
  switch (s.kind) {
  case KN_SCALAR_INT: kn__sb_printf(sb, "kn_int(INT64_C(%lld))", (long long)s.v.i); return true;
  case KN_SCALAR_BOOL: kn__sb_puts(sb, s.v.b ? "kn_bool(true)" : "kn_bool(false)"); return true;
  case KN_SCALAR_FLOAT: kn__sb_puts(sb, "kn_float("); put_double(sb, s.v.f); kn__sb_putc(sb, ')');
    return true;
  default: return false;
  }
}

/* The C variable holding a value (only single-output nodes are rows). */
static bool put_ref(kn__sb *sb, kn__gref r) {
  if (!r.node) return kn__sb_puts(sb, "NULL"), true;
  if (r.idx != 0) return false;
  kn__sb_printf(sb, "v%d", r.node->index);
  return true;
}

static bool put_arg(kn__sb *sb, const kn__garg *a) {
  switch (a->kind) {
  case KN__GA_TENSOR: return put_ref(sb, a->u.t);
  case KN__GA_INT: kn__sb_printf(sb, "INT64_C(%lld)", (long long)kn__sym_hint(a->u.i)); return true;
  case KN__GA_DOUBLE: put_double(sb, a->u.d); return true;
  case KN__GA_BOOL: kn__sb_puts(sb, a->u.b ? "true" : "false"); return true;
  case KN__GA_SCALAR: return put_scalar(sb, a->u.s);
  case KN__GA_DTYPE: {
    const char *e = dtype_enum(a->u.dt);
    if (e) kn__sb_puts(sb, e);
    return e != NULL;
  }
  default: return false;
  }
}

static bool put_ints(kn__sb *sb, const kn__garg *a, bool count) {
  if (a->kind != KN__GA_INTS) return false;
  if (count) return kn__sb_printf(sb, "%d", a->u.ints.n), true;
  kn__sb_puts(sb, "(const int64_t[]){");
  for (int i = 0; i < a->u.ints.n; i++)
    kn__sb_printf(sb, "%sINT64_C(%lld)", i ? ", " : "", (long long)kn__sym_hint(a->u.ints.v[i]));
  kn__sb_puts(sb, a->u.ints.n ? "}" : "0}");
  return true;
}

/* Expand a row's template for node n into sb; false if an argument does
** not fit. */
static bool expand(kn__sb *sb, const char *tmpl, const kn__gnode *n) {
  for (const char *p = tmpl; *p; p++) {
    if ((*p != '$' && *p != '@' && *p != '#') || p[1] < '0' || p[1] > '9') {
      kn__sb_putc(sb, *p);
      continue;
    }
    int k = p[1] - '0';
    if (k >= n->nargs) return false;
    bool ok = *p == '$' ? put_arg(sb, &n->args[k]) : put_ints(sb, &n->args[k], *p == '#');
    if (!ok) return false;
    p++;
  }
  return true;
}

static bool cond_holds(const row *r, const kn__gnode *n) {
  if (r->cond < 0) return true;
  if (r->cond >= n->nargs) return true; /* omitted trailing argument */
  const kn__garg *a = &n->args[r->cond];
  if (a->kind == KN__GA_NONE) return true;
  return a->kind == KN__GA_SCALAR && ((a->u.s.kind == KN_SCALAR_INT && a->u.s.v.i == 1) ||
                                      (a->u.s.kind == KN_SCALAR_FLOAT && a->u.s.v.f == 1.0));
}

/* One call node as `kn_tensor *vK = <call>;`. */
static bool emit_call(kn__sb *sb, const kn__gnode *n) {
  if (!n->opdef || n->nout != 1) return false;
  char q[128];
  snprintf(q, sizeof q, "%s%s%s", n->opdef->name, *n->opdef->overload ? "." : "",
           n->opdef->overload);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    if (strcmp(rows[i].op, q) || !cond_holds(&rows[i], n)) continue;
    kn__sb line = KN__SB_INIT;
    kn__sb_printf(&line, "  kn_tensor *v%d = ", n->index);
    bool ok = expand(&line, rows[i].tmpl, n);
    if (ok) {
      kn__sb_puts(sb, kn__sb_cstr(&line));
      kn__sb_puts(sb, ";  /* ");
      put_safe(sb, n->name);
      kn__sb_puts(sb, " */\n");
    }
    kn__sb_fini(&line);
    if (ok) return true;
  }
  return false;
}

/* `static const int64_t` sizes and a random tensor of meta m into c<k>
** (a constant) or in[k] (an input). */
static bool emit_random(kn__sb *sb, const char *var, int k, const kn__vmeta *m, bool *dyn) {
  bool input = !strcmp(var, "in");
  const char *e = dtype_enum(m->dtype);
  if (m->kind != KN__V_TENSOR || !e) return false;
  kn__sb_printf(sb, "  static const int64_t size%s%d[] = {", var, k);
  for (int d = 0; d < m->ndim; d++) {
    kn__sb_printf(sb, "%sINT64_C(%lld)", d ? ", " : "", (long long)kn__sym_hint(m->sizes[d]));
    if (!kn__sym_is_const(m->sizes[d])) *dyn = true;
  }
  kn__sb_printf(sb, "%s};\n", m->ndim ? "" : "0");
  const char *mk = m->dtype == KN_FLOAT32 || m->dtype == KN_FLOAT64 ? "kn_randn(%d, size%s%d, gen, %s)"
                   : m->dtype == KN_BOOL ? "kn_to_copy(kn_randint(0, 2, %d, size%s%d, gen, KN_INT64), %s)"
                                         : "kn_randint(-8, 8, %d, size%s%d, gen, %s)";
  kn__sb_printf(sb, input ? "  %s[%d] = " : "  %s%d = ", var, k);
  kn__sb_printf(sb, mk, m->ndim, var, k, e);
  kn__sb_puts(sb, ";\n");
  return true;
}

static const char prelude[] =
    "/* fx_graph_runnable: a standalone reproduction of a graph compiled by\n"
    "** kiln's inductor backend. Build and run:\n"
    "**   cc repro.c $(pkg-config --cflags --libs kiln) && ./a.out\n"
    "** The graph is rebuilt with kiln's public ops on random inputs of the\n"
    "** recorded sizes and dtypes (seed 0), compiled with backend \"inductor\" and\n"
    "** called once. Exit status 0: compiled and ran; 1: kiln's error on stderr. */\n"
    "#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n\n#include \"kiln/kiln.h\"\n\n";

/* The body of the graph function; false for a node without a row. */
static bool emit_fn(kn__sb *sb, const kn__graph *g, const char **why) {
  kn__sb_puts(sb, "static kn_value repro(const kn_value *args, int nargs, void *ud) {\n"
                  "  (void)nargs, (void)ud;\n");
  int in = 0;
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->op == KN__GN_PLACEHOLDER) {
      kn__sb_printf(sb, "  kn_tensor *v%d = args[%d].u.t;  /* ", n->index, in++);
      put_safe(sb, n->name);
      kn__sb_puts(sb, " */\n");
    } else if (n->op == KN__GN_GET_ATTR) {
      kn__sb_printf(sb, "  kn_tensor *v%d = c%d;\n", n->index, n->index);
    } else if (n->op == KN__GN_CALL && !emit_call(sb, n)) {
      *why = n->target;
      return false;
    } else if (n->op == KN__GN_OUTPUT) {
      kn__sb_printf(sb, "  return kn_tuple(%d, (const kn_value[]){", n->nargs);
      for (int k = 0; k < n->nargs; k++) {
        if (n->args[k].kind != KN__GA_TENSOR || !n->args[k].u.t.node) return *why = "output", false;
        kn__sb_printf(sb, "%skn_vtensor(", k ? ", " : "");
        if (!put_ref(sb, n->args[k].u.t)) return *why = "output", false;
        kn__sb_putc(sb, ')');
      }
      kn__sb_puts(sb, n->nargs ? "});\n}\n\n" : "kn_vnone()});\n}\n\n");
    }
  }
  return true;
}

static bool emit_main(kn__sb *sb, const kn__graph *g, const char **why) {
  kn__sb body = KN__SB_INIT;
  bool dyn = false, ok = true;
  int nin = kn__graph_num_inputs(g);
  for (int i = 0; i < kn__graph_num_nodes(g) && ok; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->op == KN__GN_GET_ATTR) {
      kn__sb_printf(sb, "static kn_tensor *c%d;  /* constant ", n->index);
      put_safe(sb, n->name);
      kn__sb_puts(sb, " */\n");
      ok = emit_random(&body, "c", n->index, &n->meta[0], &dyn);
    }
  }
  for (int i = 0; i < nin && ok; i++) ok = emit_random(&body, "in", i, &kn__graph_input(g, i)->meta[0], &dyn);
  if (!ok) {
    kn__sb_fini(&body);
    return *why = "an input or constant of an unsupported dtype", false;
  }
  kn__sb_printf(sb, "\nint main(void) {\n  kn_scope_begin();\n  kn_generator *gen = "
                "kn_generator_new(0);\n  kn_tensor *in[%d] = {0};\n  kn_value args[%d];\n",
                nin ? nin : 1, nin ? nin : 1);
  kn__sb_puts(sb, kn__sb_cstr(&body));
  kn__sb_fini(&body);
  kn__sb_printf(sb, "  for (int i = 0; i < %d; i++) args[i] = kn_vtensor(in[i]);\n", nin);
  kn__sb_printf(sb,
      "  kn_compile_options opts = {.backend = \"inductor\", .fullgraph = true,\n"
      "                             .dynamic = %s};\n"
      "  kn_compiled *f = kn_compile_fn(repro, NULL, %d, \"repro\", __FILE__, __LINE__, &opts);\n"
      "  kn_value out = kn_vnone();\n"
      "  kn_status st = f ? kn_call(f, args, %d, &out) : KN_EINVAL;\n"
      "  if (st != KN_OK) fprintf(stderr, \"repro: %%s\\n\", kn_last_error());\n"
      "  else printf(\"repro: compiled with inductor and ran\\n\");\n"
      "  kn_value_release(out);\n  kn_compiled_free(f);\n  kn_generator_free(gen);\n"
      "  kn_scope_end();\n  return st == KN_OK ? 0 : 1;\n}\n",
      dyn ? "KN_DYNAMIC_TRUE" : "KN_DYNAMIC_FALSE", nin, nin);
  return true;
}

char *kn__ind_runnable(const kn__graph *g, const char **why) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, prelude);
  kn__sb fn = KN__SB_INIT;
  *why = NULL;
  bool ok = emit_fn(&fn, g, why) && emit_main(&sb, g, why);
  ok = ok && !kn__sb_failed(&sb) && !kn__sb_failed(&fn) &&
       strstr(kn__sb_cstr(&sb), "\nint main(void)"); /* out of memory: no artifact */
  if (ok) {
    /* constants are declared by emit_main, before the function that reads them */
    kn__sb all = KN__SB_INIT;
    const char *s = kn__sb_cstr(&sb), *m = strstr(s, "\nint main(void)");
    kn__sb_putn(&all, s, (size_t)(m - s) + 1);
    kn__sb_puts(&all, "\n");
    kn__sb_puts(&all, kn__sb_cstr(&fn));
    kn__sb_puts(&all, m + 1);
    kn__sb_fini(&sb);
    sb = all;
  }
  kn__sb_fini(&fn);
  char *out = ok && !kn__sb_failed(&sb) ? kn__sb_take(&sb) : NULL;
  kn__sb_fini(&sb);
  if (ok && !out) *why = "out of memory";
  return out;
}

void kn__ind_emit_runnable(const kn__graph *g) {
  if (!kn__trace_enabled()) return;
  const char *why = NULL;
  char *src = kn__ind_runnable(g, &why);
  if (!src) {
    KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "fx_graph_runnable: no public call for %s; not written",
           why ? why : "the graph");
    return;
  }
  (void)kn__trace_artifact("fx_graph_runnable", "string", src, SIZE_MAX, NULL);
  free(src);
}
