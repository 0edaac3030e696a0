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
** Each op's public-call form is a row of the op facts table
** (ops/ops_repro.def, keyed by op id): a condition on its arguments and a
** template of the call, or the reason the op has none. A node whose op has
** no public form (or whose arguments fit no row) means no repro: the
** artifact is not written and the log says which node and why
** (KILN_LOGS=+inductor). Multi-output nodes fill an array o<K>, which
** getitem nodes read.
** Symbolic int arguments are written as their example values. Nothing the
** user wrote reaches the file: variables are named after node indices and
** node names appear in comments reduced to [A-Za-z0-9_.].
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda.h"
#include "inductor/inductor.h"
#include "logging/log.h"
#include "ops/opfacts.h"
#include "trace/events.h"

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

/* Does node n's op return a tuple or a list (its outputs go to an array
** o<K>, even when there is one)? */
static bool multi_out(const kn__gnode *n) {
  const char *ret = n->opdef ? strstr(n->opdef->schema, "-> ") : NULL;
  return n->nout > 1 || (ret && (ret[3] == '(' || strstr(ret, "[]")));
}

/* The C variable holding a value: v<K>, or o<K>[i] for output i of a
** multi-output node. */
static bool put_ref(kn__sb *sb, kn__gref r) {
  if (!r.node) return kn__sb_puts(sb, "NULL"), true;
  if (multi_out(r.node)) kn__sb_printf(sb, "o%d[%d]", r.node->index, r.idx);
  else if (r.idx == 0) kn__sb_printf(sb, "v%d", r.node->index);
  else return false;
  return true;
}

static bool put_arg(kn__sb *sb, const kn__garg *a) {
  switch (a->kind) {
  case KN__GA_TENSOR: return put_ref(sb, a->u.t);
  case KN__GA_INT: kn__sb_printf(sb, "INT64_C(%lld)", (long long)kn__sym_hint(a->u.i)); return true;
  case KN__GA_DOUBLE: put_double(sb, a->u.d); return true;
  case KN__GA_BOOL: kn__sb_puts(sb, a->u.b ? "true" : "false"); return true;
  case KN__GA_SCALAR: return put_scalar(sb, a->u.s);
  case KN__GA_GEN: kn__sb_puts(sb, "gen"); return true; /* the repro's seeded generator */
  case KN__GA_DTYPE: {
    const char *e = dtype_enum(a->u.dt);
    if (e) kn__sb_puts(sb, e);
    return e != NULL;
  }
  default: return false;
  }
}

/* An int list (as a compound literal) or a tensor list (an array of
** variables); the length only when count. */
static bool put_list(kn__sb *sb, const kn__garg *a, bool count) {
  if (a->kind == KN__GA_TENSORS) {
    if (count) return kn__sb_printf(sb, "%d", a->u.ts.n), true;
    kn__sb_puts(sb, "(kn_tensor *const[]){");
    for (int i = 0; i < a->u.ts.n; i++) {
      if (i) kn__sb_puts(sb, ", ");
      if (!put_ref(sb, a->u.ts.v[i])) return false;
    }
    kn__sb_puts(sb, a->u.ts.n ? "}" : "NULL}");
    return true;
  }
  if (a->kind != KN__GA_INTS) return false;
  if (count) return kn__sb_printf(sb, "%d", a->u.ints.n), true;
  kn__sb_puts(sb, "(const int64_t[]){");
  for (int i = 0; i < a->u.ints.n; i++)
    kn__sb_printf(sb, "%sINT64_C(%lld)", i ? ", " : "", (long long)kn__sym_hint(a->u.ints.v[i]));
  kn__sb_puts(sb, a->u.ints.n ? "}" : "0}");
  return true;
}

static bool omitted(const kn__gnode *n, int k) {
  return k >= n->nargs || n->args[k].kind == KN__GA_NONE ||
         (n->args[k].kind == KN__GA_TENSOR && !n->args[k].u.t.node);
}

static double scalar_value(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

/* One placeholder (kind c, argument k: see ops/ops_repro.def). */
static bool put_placeholder(kn__sb *sb, char c, int k, const kn__gnode *n) {
  if ((c == '!' || c == '?' || c == '^') && omitted(n, k)) return kn__sb_puts(sb, "NULL"), true;
  if (k >= n->nargs) return false;
  const kn__garg *a = &n->args[k];
  switch (c) {
  case '$': case '!': return put_arg(sb, a);
  case '@': case '#': return put_list(sb, a, c == '#');
  case '^':
    if (a->kind == KN__GA_INTS && a->u.ints.n == 0) return kn__sb_puts(sb, "NULL"), true;
    return put_list(sb, a, false);
  case '?':
    if (a->kind != KN__GA_SCALAR) return false;
    kn__sb_puts(sb, "(const kn_scalar[]){");
    bool ok = put_scalar(sb, a->u.s);
    kn__sb_putc(sb, '}');
    return ok;
  case '~':
    if (a->kind == KN__GA_SCALAR) put_double(sb, scalar_value(a->u.s));
    else if (a->kind == KN__GA_DOUBLE) put_double(sb, a->u.d);
    else return false;
    return true;
  default: return false;
  }
}

/* Expand a template for node n into sb; false if an argument does not
** fit. */
static bool expand(kn__sb *sb, const char *tmpl, const kn__gnode *n) {
  for (const char *p = tmpl; *p; p++) {
    if (p[0] == '%' && (p[1] == 'o' || p[1] == 'n')) {
      if (p[1] == 'o') kn__sb_printf(sb, "o%d", n->index);
      else kn__sb_printf(sb, "%d", n->nout);
      p++;
    } else if (strchr("$!?@^#~", *p) && p[1] >= '0' && p[1] <= '9') {
      if (!put_placeholder(sb, p[0], p[1] - '0', n)) return false;
      p++;
    } else {
      kn__sb_putc(sb, *p);
    }
  }
  return true;
}

/* One clause of a row's condition (see ops/ops_repro.def). */
static bool clause_holds(const kn__gnode *n, int k, char what) {
  if (what == 'o') return omitted(n, k);
  if (what == 'p') return !omitted(n, k);
  if (what == 'u' && omitted(n, k)) return true;
  if (omitted(n, k)) return false;
  const kn__garg *a = &n->args[k];
  switch (what) {
  case 'u': return a->kind == KN__GA_SCALAR && scalar_value(a->u.s) == 1.0;
  case 'f': return a->kind == KN__GA_BOOL && !a->u.b;
  case 'n': return a->kind == KN__GA_INT && kn__sym_hint(a->u.i) == -1;
  case 'w': return a->kind == KN__GA_INTS && a->u.ints.n == 2;
  case 'z': {
    bool z = a->kind == KN__GA_INTS;
    for (int i = 0; z && i < a->u.ints.n; i++) z = kn__sym_hint(a->u.ints.v[i]) == 0;
    return z;
  }
  default: return false;
  }
}

static bool cond_holds(const char *cond, const kn__gnode *n) {
  for (const char *p = cond; *p; p++) {
    if (*p == ' ') continue;
    if (p[0] < '0' || p[0] > '9' || !p[1] || !clause_holds(n, p[0] - '0', p[1])) return false;
    p++;
  }
  return true;
}

/* A getitem node: `kn_tensor *vK = oS[i];`. */
static bool emit_getitem(kn__sb *sb, const kn__gnode *n) {
  if (n->nargs != 2 || n->args[0].kind != KN__GA_TENSOR || !n->args[0].u.t.node ||
      n->args[1].kind != KN__GA_INT)
    return false;
  kn__gref r = {n->args[0].u.t.node, (int)kn__sym_hint(n->args[1].u.i)};
  kn__sb_printf(sb, "  kn_tensor *v%d = ", n->index);
  if (!put_ref(sb, r)) return false;
  kn__sb_puts(sb, ";\n");
  return true;
}

/* One call node as `kn_tensor *vK = <call>;` (or, with several outputs,
** `kn_tensor *oK[N] = {0}; <statement>;`); false with *reason set to the
** op's "no public form" reason, or left NULL when no row fits. */
static bool emit_call(kn__sb *sb, const kn__gnode *n, const char **reason) {
  if (!n->opdef) return emit_getitem(sb, n);
  int nr;
  const kn__repro *rows = kn__op_repro(n->opdef->id, &nr);
  for (int i = 0; i < nr; i++) {
    if (!rows[i].tmpl) return *reason = rows[i].reason, false;
    if (!cond_holds(rows[i].cond, n)) continue;
    kn__sb line = KN__SB_INIT;
    if (multi_out(n))
      kn__sb_printf(&line, "  kn_tensor *o%d[%d] = {0};\n  ", n->index, n->nout ? n->nout : 1);
    else kn__sb_printf(&line, "  kn_tensor *v%d = ", n->index);
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
** (a constant) or in[k] (an input); one of a CUDA graph is drawn on the host
** (the same values as on the CPU) and copied to the repro's device. */
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
  if (m->device == KN_CUDA) kn__sb_puts(sb, "on_device(");
  kn__sb_printf(sb, mk, m->ndim, var, k, e);
  kn__sb_puts(sb, m->device == KN_CUDA ? ");\n" : ";\n");
  return true;
}

static const char prelude[] =
    "/* fx_graph_runnable: a standalone reproduction of a graph compiled by\n"
    "** kiln's inductor backend. Build and run:\n"
    "**   cc repro.c $(pkg-config --cflags --libs kiln) && ./a.out\n"
    "** The graph is rebuilt with kiln's public ops on random inputs of the\n"
    "** recorded sizes and dtypes (seed 0), compiled with backend \"inductor\" and\n"
    "** called once. Exit status 0: compiled and ran; 1: kiln's error on stderr. */\n"
    "#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n\n#include \"kiln/kiln.h\"\n\n"
    "static kn_generator *gen; /* inputs, constants and the graph's random ops draw from it */\n";

/* A graph on the GPU: its inputs and constants live there, which the repro
** says once, as PyTorch's repro gives each input's device
** (device(type='cuda', index=0)); KN_CPU there runs the same repro on the
** host. */
static void emit_device(kn__sb *sb) {
  kn__sb_printf(sb, "\n/* The graph's inputs and constants live on device(type='cuda', index=%d)\n"
                    "** (KILN_CUDA_DEVICE selects the GPU); KN_CPU here runs the repro on the "
                    "host. */\n"
                    "static const kn_device device = KN_CUDA;\n\n"
                    "/* t copied to `device`, or NULL with kiln's error. */\n"
                    "static kn_tensor *on_device(kn_tensor *t) {\n"
                    "  kn_tensor *d = NULL;\n"
                    "  return t && kn_to_device(t, device, &d) == KN_OK ? d : NULL;\n"
                    "}\n", kn__cuda_device_index());
}

/* Does a graph input or constant of g live on the GPU? */
static bool on_cuda(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    bool holder = n->op == KN__GN_PLACEHOLDER || n->op == KN__GN_GET_ATTR;
    if (holder && n->nout > 0 && n->meta[0].kind == KN__V_TENSOR && n->meta[0].device == KN_CUDA)
      return true;
  }
  return false;
}

/* The body of the graph function; false for a node without a public
** form (*why: its target; *reason: the op's documented reason, or NULL
** when no row of the op fits the node's arguments). */
static bool emit_fn(kn__sb *sb, const kn__graph *g, const char **why, const char **reason) {
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
    } else if (n->op == KN__GN_CALL && !emit_call(sb, n, reason)) {
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
  kn__sb_printf(sb, "\nint main(void) {\n  kn_scope_begin();\n  gen = "
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

char *kn__ind_runnable(const kn__graph *g, const char **why, const char **reason) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, prelude);
  if (on_cuda(g)) emit_device(&sb);
  kn__sb fn = KN__SB_INIT;
  *why = *reason = NULL;
  bool ok = emit_fn(&fn, g, why, reason) && emit_main(&sb, g, why);
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
  const char *why = NULL, *reason = NULL;
  char *src = kn__ind_runnable(g, &why, &reason);
  if (!src) {
    KN_LOG(KN_LOG_INDUCTOR, KN_DEBUG, "fx_graph_runnable: no public call for %s%s%s; not written",
           why ? why : "the graph", reason ? ": " : "", reason ? reason : "");
    return;
  }
  (void)kn__trace_artifact("fx_graph_runnable", "string", src, SIZE_MAX, NULL);
  free(src);
}
