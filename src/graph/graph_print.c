/*
** graph/graph_print.c: the graph printers, in the forms torch.fx and
** Dynamo log them: print_readable() code (graph_code, also the payload of
** dynamo_output_graph), the tabulate table (graph), the tensor sizes
** (graph_sizes) and the "sizes" metadata of dynamo_output_graph.
*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"

/* ---- user source lines (read from the file when it is readable) ---------- */
typedef struct srccache {
  const char *file;   /* borrowed: the graph's copy */
  char *text;         /* owned; NULL when unreadable */
  size_t len;
} srccache;

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  kn__sb sb = KN__SB_INIT;
  char buf[8192];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, f)) > 0) kn__sb_putn(&sb, buf, k);
  fclose(f);
  *len = sb.len;
  return kn__sb_take(&sb);
}

/* The stripped text of line `line` of file into sb (nothing if unreadable). */
static void source_line(srccache *c, const char *file, int line, kn__sb *sb) {
  if (!c->file || strcmp(c->file, file) != 0) {
    free(c->text);
    c->file = file;
    c->text = read_file(file, &c->len);
  }
  if (!c->text || line < 1) return;
  const char *p = c->text, *end = c->text + c->len;
  for (int l = 1; l < line && p < end; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl ? nl + 1 : end;
  }
  const char *e = memchr(p, '\n', (size_t)(end - p));
  if (!e) e = end;
  while (p < e && isspace((unsigned char)*p)) p++;
  while (e > p && isspace((unsigned char)e[-1])) e--;
  kn__sb_putn(sb, p, (size_t)(e - p));
}

/* ---- print_readable --------------------------------------------------------- */

static bool same_stack(const kn__gnode *a, const kn__gnode *b) {
  if (!a || !b || a->nstack != b->nstack) return false;
  for (int i = 0; i < a->nstack; i++)
    if (a->stack[i].line != b->stack[i].line || strcmp(a->stack[i].file, b->stack[i].file) ||
        strcmp(a->stack[i].func, b->stack[i].func))
      return false;
  if ((a->code == NULL) != (b->code == NULL)) return false;
  return !a->code || strcmp(a->code, b->code) == 0;
}

/* FX's append_stacktrace_summary: a comment when the location changes. */
static void stack_summary(kn__sb *body, const kn__gnode *n, const kn__gnode **prev,
                          srccache *src) {
  if (n->nstack > 0) {
    if (same_stack(n, *prev)) return;
    *prev = n;
    const kn__gframe *f = &n->stack[n->nstack - 1];
    kn__sb_printf(body, "\n # File: %s:%d in %s, code: ", f->file, f->line, f->func);
    if (n->code) kn__sb_puts(body, n->code);
    else source_line(src, f->file, f->line, body);
    kn__sb_putc(body, '\n');
  } else if (*prev) {
    *prev = NULL;
    kn__sb_puts(body, "\n# No stacktrace found for following nodes\n");
  }
}

static void annotation(kn__sb *sb, const kn__gnode *n, const kn__gprint_opts *o) {
  if (n->nout != 1 || n->meta[0].kind != KN__V_TENSOR) return;
  char *s = kn__vmeta_str(&n->meta[0], o);
  if (!s) {
    sb->oom = true;
    return;
  }
  kn__sb_printf(sb, ": \"%s\"", s);
  free(s);
}

static void call_args(kn__sb *sb, const kn__gnode *n) {
  kn__schema_arg sa[KN__MAX_ARGS];
  int ns = kn__schema_args(n->opdef->schema, sa);
  bool first = true;
  for (int i = 0; i < n->nargs; i++) {
    if (kn__gargs_kw_default(n, sa, ns, i)) continue;
    if (!first) kn__sb_puts(sb, ", ");
    first = false;
    if (i < ns && sa[i].kwonly) kn__sb_printf(sb, "%.*s = ", sa[i].name_len, sa[i].name);
    kn__gfmt_arg_as(sb, &n->args[i], i < ns ? &sa[i] : NULL);
  }
}

/* Each referenced node dies at its last user: FX's "x = y = None". */
static void deletions(kn__sb *body, const kn__graph *g, const kn__gnode *n, const int *last) {
  int count = 0;
  for (int i = 0; i < n->nargs; i++) {
    const kn__garg *a = &n->args[i];
    int k = a->kind == KN__GA_TENSOR ? (a->u.t.node ? 1 : 0)
                                     : a->kind == KN__GA_TENSORS ? a->u.ts.n : 0;
    for (int j = 0; j < k; j++) {
      const kn__gnode *r = a->kind == KN__GA_TENSOR ? a->u.t.node : a->u.ts.v[j].node;
      if (last[r->index] != n->index) continue;
      bool dup = false; /* the same node twice in one call: once */
      for (int i2 = 0; i2 <= i && !dup; i2++) {
        const kn__garg *b = &n->args[i2];
        int k2 = b->kind == KN__GA_TENSOR ? (b->u.t.node ? 1 : 0)
                                          : b->kind == KN__GA_TENSORS ? b->u.ts.n : 0;
        for (int j2 = 0; j2 < k2 && (i2 < i || j2 < j); j2++)
          dup = dup || (b->kind == KN__GA_TENSOR ? b->u.t.node : b->u.ts.v[j2].node) == r;
      }
      if (dup) continue;
      kn__sb_puts(body, count++ ? " = " : ";  ");
      kn__sb_puts(body, r->name);
    }
  }
  if (n->nusers == 0) {
    kn__sb_puts(body, count++ ? " = " : ";  ");
    kn__sb_puts(body, n->name);
  }
  kn__sb_puts(body, count ? " = None\n" : "\n");
  (void)g;
}

static void mark_last_uses(const kn__graph *g, int *last) {
  for (int i = 0; i < g->n; i++) last[i] = -1;
  for (int u = g->n - 1; u >= 0; u--) {
    const kn__gnode *n = g->nodes[u];
    for (int i = 0; i < n->nargs; i++) {
      const kn__garg *a = &n->args[i];
      if (a->kind == KN__GA_TENSOR && a->u.t.node && last[a->u.t.node->index] < 0)
        last[a->u.t.node->index] = u;
      if (a->kind == KN__GA_TENSORS)
        for (int j = 0; j < a->u.ts.n; j++)
          if (last[a->u.ts.v[j].node->index] < 0) last[a->u.ts.v[j].node->index] = u;
    }
  }
}

static void emit_node(kn__sb *body, const kn__gnode *n, const kn__gprint_opts *o) {
  kn__sb_puts(body, n->name);
  annotation(body, n, o);
  kn__sb_puts(body, " = ");
  if (n->op == KN__GN_GET_ATTR) {
    kn__sb_printf(body, "self.%s", n->target);
  } else if (!n->opdef) { /* getitem */
    kn__sb_printf(body, "%s[%lld]", n->args[0].u.t.node->name, (long long)n->args[1].u.i.c);
  } else {
    kn__sb_printf(body, "%s(", n->target);
    call_args(body, n);
    kn__sb_putc(body, ')');
  }
}

static void emit_output(kn__sb *body, const kn__gnode *n) {
  kn__sb_puts(body, "return (");
  for (int i = 0; i < n->nargs; i++) {
    if (i) kn__sb_puts(body, ", ");
    kn__gfmt_arg(body, &n->args[i]);
  }
  kn__sb_puts(body, n->nargs == 1 ? ",)\n" : ")\n");
}

/* Indent every line after the first by `ind` spaces (FX's _addindent and
** the body's own indentation). */
static void put_indented(kn__sb *out, const char *s, const char *ind) {
  for (const char *p = s;;) {
    const char *nl = strchr(p, '\n');
    kn__sb_puts(out, ind);
    if (!nl) {
      kn__sb_puts(out, p);
      break;
    }
    kn__sb_putn(out, p, (size_t)(nl - p + 1));
    p = nl + 1;
  }
}

char *kn__graph_code(const kn__graph *g, const kn__gprint_opts *opts) {
  kn__gprint_opts o = opts ? *opts : KN__GPRINT_DEFAULT;
  int *last = malloc((size_t)(g->n ? g->n : 1) * sizeof *last);
  if (!last) return kn__oom(), NULL;
  mark_last_uses(g, last);
  kn__sb body = KN__SB_INIT, sig = KN__SB_INIT, out = KN__SB_INIT;
  srccache src = {0};
  const kn__gnode *prev = NULL;
  kn__sb_puts(&sig, "def forward(self");
  for (int i = 0; i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    if (n->op == KN__GN_PLACEHOLDER) {
      kn__sb_printf(&sig, ", %s", n->target);
      annotation(&sig, n, &o);
      if (strcmp(n->name, n->target) != 0) kn__sb_printf(&body, "%s = %s\n", n->name, n->target);
      continue;
    }
    if (n->op == KN__GN_OUTPUT) {
      emit_output(&body, n);
      continue;
    }
    stack_summary(&body, n, &prev, &src);
    emit_node(&body, n, &o);
    deletions(&body, g, n, last);
  }
  kn__sb_puts(&sig, "):\n");
  free(src.text);
  free(last);
  const char *b = kn__sb_cstr(&body);
  while (*b == '\n') b++;
  if (!*b) b = "pass\n";
  kn__sb_puts(&out, "class GraphModule(torch.nn.Module):\n    ");
  kn__sb_puts(&out, kn__sb_cstr(&sig));
  put_indented(&out, b, "        ");
  bool oom = kn__sb_failed(&body) || kn__sb_failed(&sig);
  kn__sb_fini(&body);
  kn__sb_fini(&sig);
  if (oom) {
    kn__sb_fini(&out);
    return kn__oom(), NULL;
  }
  char *s = kn__sb_take(&out);
  if (!s) kn__oom();
  return s;
}

/* ---- tabular ------------------------------------------------------------------ */
#define NCOL 5

static void tab_args(kn__sb *sb, const kn__gnode *n) {
  kn__schema_arg sa[KN__MAX_ARGS];
  int ns = n->opdef ? kn__schema_args(n->opdef->schema, sa) : 0;
  int np = 0;
  kn__sb_putc(sb, '(');
  for (int i = 0; i < n->nargs; i++) {
    if (i < ns && sa[i].kwonly) continue;
    if (np++) kn__sb_puts(sb, ", ");
    if (!n->opdef && i == 0) kn__sb_puts(sb, n->args[0].u.t.node->name);
    else kn__gfmt_arg_as(sb, &n->args[i], i < ns ? &sa[i] : NULL);
  }
  kn__sb_puts(sb, np == 1 ? ",)" : ")");
}

static void tab_kwargs(kn__sb *sb, const kn__gnode *n) {
  kn__schema_arg sa[KN__MAX_ARGS];
  int ns = n->opdef ? kn__schema_args(n->opdef->schema, sa) : 0;
  int nk = 0;
  kn__sb_putc(sb, '{');
  for (int i = 0; i < n->nargs && i < ns; i++) {
    if (!sa[i].kwonly || kn__gargs_kw_default(n, sa, ns, i)) continue;
    if (nk++) kn__sb_puts(sb, ", ");
    kn__sb_printf(sb, "'%.*s': ", sa[i].name_len, sa[i].name);
    kn__gfmt_arg_as(sb, &n->args[i], &sa[i]);
  }
  kn__sb_putc(sb, '}');
}

static const char *opcode_name(kn__gop op) {
  switch (op) {
  case KN__GN_PLACEHOLDER: return "placeholder";
  case KN__GN_CALL: return "call_function";
  case KN__GN_GET_ATTR: return "get_attr";
  case KN__GN_OUTPUT: return "output";
  }
  return "?";
}

/* One row of cells as owned strings. */
static bool tab_row(const kn__gnode *n, char **cells) {
  kn__sb a = KN__SB_INIT, k = KN__SB_INIT;
  if (n->op == KN__GN_CALL) {
    tab_args(&a, n);
    tab_kwargs(&k, n);
  } else if (n->op == KN__GN_OUTPUT) {
    kn__sb_puts(&a, "((");
    for (int i = 0; i < n->nargs; i++) {
      if (i) kn__sb_puts(&a, ", ");
      kn__gfmt_arg(&a, &n->args[i]);
    }
    kn__sb_puts(&a, n->nargs == 1 ? ",),)" : "),)");
    kn__sb_puts(&k, "{}");
  } else {
    kn__sb_puts(&a, "()");
    kn__sb_puts(&k, "{}");
  }
  cells[0] = strdup(opcode_name(n->op));
  cells[1] = strdup(n->name);
  cells[2] = strdup(n->target);
  cells[3] = kn__sb_take(&a);
  cells[4] = kn__sb_take(&k);
  for (int c = 0; c < NCOL; c++)
    if (!cells[c]) return false;
  return true;
}

static void put_row(kn__sb *sb, char *const *cells, const size_t *w) {
  size_t start = sb->len;
  for (int c = 0; c < NCOL; c++) {
    if (c) kn__sb_puts(sb, "  ");
    kn__sb_printf(sb, "%-*s", (int)w[c], cells[c]);
  }
  while (!sb->oom && sb->len > start && sb->buf[sb->len - 1] == ' ') sb->len--; /* rstrip */
  kn__sb_putc(sb, '\n');
}

char *kn__graph_tabular(const kn__graph *g) {
  static const char *const hdr[NCOL] = {"opcode", "name", "target", "args", "kwargs"};
  char **cells = calloc((size_t)g->n * NCOL + 1, sizeof *cells);
  if (!cells) return kn__oom(), NULL;
  size_t w[NCOL];
  for (int c = 0; c < NCOL; c++) w[c] = strlen(hdr[c]);
  bool ok = true;
  for (int i = 0; i < g->n && ok; i++) {
    ok = tab_row(g->nodes[i], cells + (size_t)i * NCOL);
    for (int c = 0; c < NCOL && ok; c++) {
      size_t l = strlen(cells[(size_t)i * NCOL + c]);
      if (l > w[c]) w[c] = l;
    }
  }
  kn__sb sb = KN__SB_INIT;
  if (ok) {
    put_row(&sb, (char *const *)hdr, w);
    for (int c = 0; c < NCOL; c++) {
      if (c) kn__sb_puts(&sb, "  ");
      for (size_t j = 0; j < w[c]; j++) kn__sb_putc(&sb, '-');
    }
    for (int i = 0; i < g->n; i++) {
      kn__sb_putc(&sb, '\n');
      put_row(&sb, cells + (size_t)i * NCOL, w);
      sb.len--; /* rows are joined by newlines, no trailing one */
      if (!sb.oom) sb.buf[sb.len] = '\0';
    }
  }
  for (size_t i = 0; i < (size_t)g->n * NCOL; i++) free(cells[i]);
  free(cells);
  if (!ok) {
    kn__sb_fini(&sb);
    return kn__oom(), NULL;
  }
  char *s = kn__sb_take(&sb);
  if (!s) kn__oom();
  return s;
}

/* ---- sizes --------------------------------------------------------------------- */

/* Sizes print with the symbols that guards replaced substituted (s2 -> s1
** after Eq(s1, s2)), as PyTorch prints them. */
static void canon_sym(kn__sb *sb, const kn__graph *g, kn_sym s) {
  char buf[256];
  kn__sym_format_canon(kn__graph_shape_env(g), s, buf, sizeof buf);
  kn__sb_puts(sb, buf);
}

static void py_tuple(kn__sb *sb, const kn__graph *g, const kn__vmeta *m, bool concrete) {
  kn__sb_putc(sb, '(');
  for (int d = 0; d < m->ndim; d++) {
    if (d) kn__sb_puts(sb, ", ");
    if (concrete) kn__sb_printf(sb, "%lld", (long long)kn__sym_hint(m->sizes[d]));
    else canon_sym(sb, g, m->sizes[d]);
  }
  kn__sb_puts(sb, m->ndim == 1 ? ",)" : ")");
}

/* The single tensor example value of a node, or NULL. */
static const kn__vmeta *tensor_value(const kn__gnode *n) {
  return n->nout == 1 && n->meta[0].kind == KN__V_TENSOR ? &n->meta[0] : NULL;
}

char *kn__graph_sizes(const kn__graph *g, const char *title) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "TRACED GRAPH TENSOR SIZES\n===== %s =====\n", title ? title : "");
  for (int i = 0; i < g->n; i++) {
    const kn__vmeta *m = tensor_value(g->nodes[i]);
    if (!m) continue;
    kn__sb_printf(&sb, "%s: ", g->nodes[i]->name);
    py_tuple(&sb, g, m, false);
    kn__sb_putc(&sb, '\n');
    bool sym = false;
    for (int d = 0; d < m->ndim; d++) sym = sym || !kn__sym_is_const(m->sizes[d]);
    if (!sym) continue;
    kn__sb_printf(&sb, "%s (concrete): ", g->nodes[i]->name);
    py_tuple(&sb, g, m, true);
    kn__sb_putc(&sb, '\n');
  }
  char *s = kn__sb_take(&sb);
  if (!s) kn__oom();
  return s;
}

json_t *kn__graph_sizes_json(const kn__graph *g) {
  json_t *sizes = json_object(), *root = json_object();
  bool ok = sizes && root;
  for (int i = 0; ok && i < g->n; i++) {
    const kn__vmeta *m = tensor_value(g->nodes[i]);
    if (!m) continue;
    json_t *arr = json_array();
    ok = arr != NULL;
    for (int d = 0; ok && d < m->ndim; d++) {
      json_t *v;
      if (kn__sym_is_const(m->sizes[d])) {
        v = json_integer(m->sizes[d].c);
      } else {
        char buf[256];
        kn__sym_format_canon(kn__graph_shape_env(g), m->sizes[d], buf, sizeof buf);
        v = json_string(buf);
      }
      ok = v && json_array_append_new(arr, v) == 0;
    }
    if (!ok) json_decref(arr);
    else ok = json_object_set_new(sizes, g->nodes[i]->name, arr) == 0; /* steals arr */
  }
  if (ok && json_object_set_new(root, "sizes", sizes) == 0) return root;
  json_decref(sizes);
  json_decref(root);
  kn__oom();
  return NULL;
}

char *kn__graph_format_traced(const char *name, const char *filename, const char *body) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "TRACED GRAPH\n %s %s %s\n", name ? name : "", filename ? filename : "",
                body ? body : "");
  char *s = kn__sb_take(&sb);
  if (!s) kn__oom();
  return s;
}
