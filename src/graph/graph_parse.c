/*
** graph/graph_parse.c: graph code (kn__graph_code's print_readable form)
** back into a graph, so tests of passes can be written as text in -> text
** out. Line by line: forward's parameters are placeholders, each assignment
** a node, "# File:" comments locations, "return (...)" the output.
*/
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"

typedef struct parser {
  kn__graph *g;
  const char *text;       /* whole text (for the multi-output pre-scan) */
  const char *rest;       /* text after the current line */
  int lineno;
  const kn__gparse_const *consts;
  int nconsts;
  kn__gframe frame;       /* location of the following nodes (file NULL: none) */
  char file[512], func[256], code[1024];
} parser;

#define PERR(p, ...) perr_at(p, __VA_ARGS__)
static kn_status perr_at(const parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static kn_status perr_at(const parser *p, const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return kn__error(KN_EINVAL, "graph parse: line %d: %s", p->lineno, msg);
}

/* ---- small lexing helpers ------------------------------------------------- */

static const char *skip_ws(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

static bool is_ident(int c) { return isalnum(c) || c == '_'; }

/* Copy the identifier at s into out; returns its end (s when none). */
static const char *ident(const char *s, char *out, size_t cap) {
  size_t n = 0;
  while (is_ident((unsigned char)s[n])) n++;
  if (n >= cap) n = cap - 1;
  memcpy(out, s, n);
  out[n] = '\0';
  return s + n;
}

/* Trimmed copy of [b, e). */
static void trimmed(const char *b, const char *e, char *out, size_t cap) {
  while (b < e && isspace((unsigned char)*b)) b++;
  while (e > b && isspace((unsigned char)e[-1])) e--;
  size_t n = (size_t)(e - b) < cap - 1 ? (size_t)(e - b) : cap - 1;
  memcpy(out, b, n);
  out[n] = '\0';
}

/* Split s at top-level commas (outside [] () and quotes) into pieces
** (pointers into s, which is modified). Returns the count, -1 if > cap. */
static int split_top(char *s, char **pieces, int cap) {
  int n = 0, depth = 0;
  bool quote = false;
  char *start = s;
  for (char *c = s;; c++) {
    if (*c == '"') quote = !quote;
    else if (!quote && (*c == '[' || *c == '(')) depth++;
    else if (!quote && (*c == ']' || *c == ')')) depth--;
    if (*c == '\0' || (*c == ',' && depth == 0 && !quote)) {
      bool end = *c == '\0';
      *c = '\0';
      char *b = (char *)skip_ws(start);
      if (*b) {
        if (n == cap) return -1;
        pieces[n++] = b;
        for (char *t = b + strlen(b); t > b && isspace((unsigned char)t[-1]); t--) t[-1] = '\0';
      }
      if (end) break;
      start = c + 1;
    }
  }
  return n;
}

/* ---- metadata: "f32[3, 4][4, 1]cpu" ---------------------------------------- */

static int int_list(const char *s, const char **end, kn_sym *out, int cap) {
  if (*s != '[') return -1;
  int n = 0;
  s = skip_ws(s + 1);
  while (*s != ']') {
    char *e;
    long long v = strtoll(s, &e, 10);
    if (e == s || n == cap) return -1;
    out[n++] = kn__sym_const(v);
    s = skip_ws(e);
    if (*s == ',') s = skip_ws(s + 1);
    else if (*s != ']') return -1;
  }
  *end = s + 1;
  return n;
}

static kn_status parse_meta(const parser *p, const char *s, kn__vmeta *m) {
  memset(m, 0, sizeof *m);
  m->kind = KN__V_TENSOR;
  char abbr[16];
  const char *e = ident(s, abbr, sizeof abbr);
  int dt = 0;
  while (dt < KN_DTYPE_COUNT && strcmp(kn__dtype_abbr((kn_dtype)dt), abbr)) dt++;
  if (dt == KN_DTYPE_COUNT) return PERR(p, "unknown dtype '%s' in \"%s\"", abbr, s);
  m->dtype = (kn_dtype)dt;
  const char *e2;
  int nd = int_list(e, &e2, m->sizes, KN_MAX_DIMS);
  if (nd < 0) return PERR(p, "expected constant sizes such as [3, 4] in \"%s\"", s);
  m->ndim = nd;
  if (int_list(e2, &e, m->strides, KN_MAX_DIMS) != nd)
    return PERR(p, "expected %d constant strides in \"%s\"", nd, s);
  m->offset = kn__sym_const(0);
  if (!strcmp(e, "cpu")) m->device = KN_CPU;
  else if (!strcmp(e, "meta")) m->device = KN_META;
  else if (!strcmp(e, "cuda") || !strcmp(e, "cuda:0")) m->device = KN_CUDA;
  else return PERR(p, "expected device cpu, cuda or meta in \"%s\"", s);
  return KN_OK;
}

/* "\"f32[3][1]cpu\"" (with quotes) -> meta. */
static kn_status parse_annot(const parser *p, const char *s, kn__vmeta *m) {
  char buf[256];
  size_t n = strlen(s);
  if (n < 2 || s[0] != '"' || s[n - 1] != '"' || n - 2 >= sizeof buf)
    return PERR(p, "expected a quoted annotation such as \"f32[3][1]cpu\", got %s", s);
  memcpy(buf, s + 1, n - 2);
  buf[n - 2] = '\0';
  return parse_meta(p, buf, m);
}

/* ---- values ------------------------------------------------------------------- */

typedef enum ptype { PT_TENSOR, PT_TENSORS, PT_INT, PT_INTS, PT_DOUBLE, PT_BOOL, PT_SCALAR,
                     PT_DTYPE, PT_GEN, PT_UNKNOWN } ptype;

/* How a value of schema argument a is written. */
static ptype schema_type(const kn__schema_arg *a) {
  switch (a->type) {
  case KN__PT_TENSOR: return a->list ? PT_TENSORS : PT_TENSOR;
  case KN__PT_INT: return a->list ? PT_INTS : PT_INT;
  case KN__PT_BOOL: return a->list ? PT_INTS : PT_BOOL;
  case KN__PT_FLOAT: return PT_DOUBLE;
  case KN__PT_SCALAR: return PT_SCALAR;
  case KN__PT_DTYPE: return PT_DTYPE;
  case KN__PT_GENERATOR: return PT_GEN;
  case KN__PT_ENUM: return PT_INT;
  case KN__PT_OTHER: return PT_UNKNOWN;
  }
  return PT_UNKNOWN;
}

/* A value reference "add" or "split[1]". */
static bool parse_ref(const parser *p, const char *s, kn__gref *out) {
  char name[256];
  const char *e = ident(s, name, sizeof name);
  if (e == s || isdigit((unsigned char)*s)) return false;
  kn__gnode *n = kn__graph_find(p->g, name);
  if (!n || n->nout < 1) return false;
  int idx = 0;
  if (*e == '[') {
    char *e2;
    idx = (int)strtol(e + 1, &e2, 10);
    if (e2 == e + 1 || *e2 != ']' || e2[1] || idx < 0 || idx >= n->nout) return false;
  } else if (*e) {
    return false;
  }
  *out = (kn__gref){n, idx};
  return true;
}

static bool parse_number(const char *s, bool *is_float, double *d, long long *i) {
  char *e;
  *i = strtoll(s, &e, 10);
  if (e != s && !*e) {
    *is_float = false;
    return true;
  }
  *d = strtod(s, &e);
  *is_float = true;
  return e != s && !*e;
}

/* One argument of type t from text s into out; lists use the arena. */
static bool parse_typed(parser *p, const char *s, ptype t, kn__garg *out);

/* A value of schema argument sa: enum values by name, else by type. */
static bool parse_value(parser *p, const char *s, const kn__schema_arg *sa, kn__garg *out) {
  for (int i = 0; i < sa->nenum; i++)
    if (!strcmp(s, sa->enum_names[i])) {
      *out = KN_GA_I(i);
      return true;
    }
  ptype t = schema_type(sa);
  if (t == PT_INTS && s[0] != '[') t = PT_INT; /* int[1] dim written as one int */
  return parse_typed(p, s, t, out);
}

static bool parse_typed(parser *p, const char *s, ptype t, kn__garg *out) {
  if (!strcmp(s, "None")) {
    *out = t == PT_GEN ? KN_GA_GEN(NULL) : KN_GA_NONE; /* the default generator */
    return true;
  }
  bool fl;
  double d = 0;
  long long i = 0;
  switch (t) {
  case PT_TENSOR: out->kind = KN__GA_TENSOR; return parse_ref(p, s, &out->u.t);
  case PT_BOOL:
    if (strcmp(s, "True") && strcmp(s, "False")) return false;
    *out = KN_GA_B(!strcmp(s, "True"));
    return true;
  case PT_DTYPE:
    for (int dt = 0; dt < KN_DTYPE_COUNT; dt++)
      if (!strncmp(s, "kiln.", 5) && !strcmp(s + 5, kn_dtype_name((kn_dtype)dt))) {
        *out = KN_GA_DT((kn_dtype)dt);
        return true;
      }
    return false;
  case PT_INT:
    if (!parse_number(s, &fl, &d, &i) || fl) return false;
    *out = KN_GA_I(i);
    return true;
  case PT_DOUBLE:
    if (!parse_number(s, &fl, &d, &i)) return false;
    *out = KN_GA_D(fl ? d : (double)i);
    return true;
  case PT_SCALAR:
    if (!strcmp(s, "True") || !strcmp(s, "False")) {
      *out = KN_GA_S(kn_bool(!strcmp(s, "True")));
      return true;
    }
    if (!parse_number(s, &fl, &d, &i)) return false;
    *out = KN_GA_S(fl ? kn_float(d) : kn_int(i));
    return true;
  case PT_TENSORS:
  case PT_INTS: {
    size_t n = strlen(s);
    if (n < 2 || s[0] != '[' || s[n - 1] != ']') return false;
    char *inner = kn__arena_alloc(&p->g->arena, n);
    char *items[64];
    if (!inner) return false;
    memcpy(inner, s + 1, n - 2);
    inner[n - 2] = '\0';
    int k = split_top(inner, items, 64);
    if (k < 0) return false;
    if (t == PT_TENSORS) {
      kn__gref *v = kn__arena_alloc(&p->g->arena, (size_t)(k + 1) * sizeof *v);
      for (int j = 0; v && j < k; j++)
        if (!parse_ref(p, items[j], &v[j])) return false;
      *out = KN_GA_TS(v, k);
      return v != NULL;
    }
    kn_sym *v = kn__arena_alloc(&p->g->arena, (size_t)(k + 1) * sizeof *v);
    for (int j = 0; v && j < k; j++) {
      if (!parse_number(items[j], &fl, &d, &i) || fl) return false;
      v[j] = kn__sym_const(i);
    }
    *out = KN_GA_INTS(v, k);
    return v != NULL;
  }
  case PT_GEN:
  case PT_UNKNOWN: return false;
  }
  return false;
}

/* ---- calls ---------------------------------------------------------------------- */

/* Arguments of op from the pieces "a", "2", "alpha = 0.5"; false when they
** do not fit its schema (another overload may). */
static bool call_args(parser *p, const kn__opdef *op, char **pieces, int np, kn__garg *args,
                      int *nargs) {
  kn__schema_arg sa[KN__MAX_ARGS];
  int ns = kn__schema_args(op->schema, sa);
  bool set[KN__MAX_ARGS] = {false};
  int npos = 0, last = -1;
  for (int k = 0; k < np; k++) {
    const char *eq = strstr(pieces[k], " = ");
    int i = npos;
    const char *val = pieces[k];
    if (eq) {
      for (i = 0; i < ns; i++)
        if ((int)(eq - pieces[k]) == sa[i].name_len && !strncmp(pieces[k], sa[i].name, (size_t)sa[i].name_len))
          break;
      val = eq + 3;
    } else {
      npos++;
    }
    if (i >= ns || set[i] || (eq && !sa[i].kwonly) || (!eq && sa[i].kwonly)) return false;
    if (!parse_value(p, val, &sa[i], &args[i])) return false;
    set[i] = true;
    if (i > last) last = i;
  }
  /* every positional argument up to the last given one, then omitted
  ** keyword-only ones at their defaults while they can be written */
  for (int i = 0; i <= last; i++)
    if (!set[i] && !sa[i].kwonly) return false;
  int n = last + 1;
  for (int i = 0; i < ns; i++) {
    if (set[i] || !sa[i].kwonly || i < npos) continue;
    char def[64];
    if (!sa[i].def) {
      if (i < n) return false;
      break;
    }
    trimmed(sa[i].def, sa[i].def + sa[i].def_len, def, sizeof def);
    if (!parse_value(p, def, &sa[i], &args[i])) {
      if (i < n) return false;
      break;
    }
    if (i >= n) n = i + 1;
  }
  *nargs = n;
  return true;
}

/* How many outputs node `name` has: 1 + the highest "name[k]" in the text
** after this line (at least 1). */
static int count_outputs(const parser *p, const char *name) {
  size_t len = strlen(name);
  int n = 1;
  for (const char *s = p->rest; (s = strstr(s, name)) != NULL; s += len) {
    if (s > p->text && is_ident((unsigned char)s[-1])) continue;
    if (s[len] != '[') continue;
    int k = atoi(s + len + 1);
    if (k + 1 > n) n = k + 1;
  }
  return n;
}

static kn__gnode *parse_call(parser *p, const char *name, const char *rhs, const kn__vmeta *meta) {
  char opname[128], argtext[2048];
  const char *e = ident(rhs + 9, opname, sizeof opname);
  size_t n = strlen(e);
  if (*e != '(' || e[n - 1] != ')' || n - 2 >= sizeof argtext)
    return PERR(p, "expected kiln.ops.<op>(...), got %s", rhs), NULL;
  int nout = meta ? 1 : count_outputs(p, name);
  kn__vmeta none[64];
  if (nout > 64) return PERR(p, "too many outputs of %s", name), NULL;
  for (int i = 0; i < nout; i++) none[i] = (kn__vmeta){.kind = KN__V_NONE};
  for (int id = 0; id < KN__OP_COUNT; id++) {
    const kn__opdef *op = &kn__ops[id];
    if (strcmp(op->name, opname)) continue;
    memcpy(argtext, e + 1, n - 2);
    argtext[n - 2] = '\0';
    char *pieces[KN__MAX_ARGS + 1];
    kn__garg args[KN__MAX_ARGS];
    int np = split_top(argtext, pieces, KN__MAX_ARGS + 1), nargs = 0;
    if (np < 0 || np > KN__MAX_ARGS || !call_args(p, op, pieces, np, args, &nargs)) continue;
    return kn__graph_call(p->g, op, nargs, args, nout, meta ? meta : none);
  }
  return PERR(p, "no overload of %s takes (%.*s)", opname, (int)(n - 2), e + 1), NULL;
}

/* ---- lines ---------------------------------------------------------------------- */

static kn__gnode *parse_getitem(parser *p, const char *rhs, const kn__vmeta *meta) {
  kn__gref r;
  if (!parse_ref(p, rhs, &r) || r.node->nout < 2)
    return PERR(p, "expected <multi-output node>[k], got %s", rhs), NULL;
  if (meta && r.node->meta[r.idx].kind == KN__V_NONE) ((kn__vmeta *)r.node->meta)[r.idx] = *meta;
  return kn__graph_getitem(p->g, r.node, r.idx);
}

static kn__gnode *parse_attr(parser *p, const char *attr) {
  for (int i = 0; i < p->nconsts; i++)
    if (!strcmp(p->consts[i].name, attr)) return kn__graph_get_attr(p->g, attr, p->consts[i].value);
  return PERR(p, "no constant named '%s' was given", attr), NULL;
}

/* "name[: "meta"] = rhs[;  x = None]" */
static kn_status parse_assign(parser *p, char *line) {
  char *semi = strstr(line, ";  ");
  if (semi) *semi = '\0';
  char name[256];
  const char *s = ident(line, name, sizeof name);
  kn__vmeta meta;
  bool has_meta = false;
  s = skip_ws(s);
  if (*s == ':') {
    const char *eq = strstr(s, " = ");
    char annot[256];
    if (!eq) return PERR(p, "expected ' = ' after the annotation");
    trimmed(s + 1, eq, annot, sizeof annot);
    if (parse_annot(p, annot, &meta) != KN_OK) return kn_last_status();
    has_meta = true;
    s = eq + 1;
  }
  s = skip_ws(s);
  if (*s != '=') return PERR(p, "expected an assignment, got '%s'", line);
  char rhs[2048];
  trimmed(s + 1, s + strlen(s), rhs, sizeof rhs);
  kn__gnode *ph = kn__graph_find(p->g, name);
  if (ph && ph->op == KN__GN_PLACEHOLDER && !strcmp(ph->target, rhs)) return KN_OK; /* l_a_ = L_a_ */
  kn__gnode *n;
  if (!strncmp(rhs, "kiln.ops.", 9)) n = parse_call(p, name, rhs, has_meta ? &meta : NULL);
  else if (!strncmp(rhs, "self.", 5)) n = parse_attr(p, rhs + 5);
  else n = parse_getitem(p, rhs, has_meta ? &meta : NULL);
  if (!n) return kn_last_status();
  if (strcmp(n->name, name) && kn__graph_node_set_name_hint(n, name) != KN_OK) return kn_last_status();
  if (strcmp(n->name, name)) return PERR(p, "the name '%s' is taken", name);
  if (p->frame.file && kn__graph_node_set_stack(n, &p->frame, 1, p->code) != KN_OK)
    return kn_last_status();
  return KN_OK;
}

/* "# File: path:line in fn, code: text" */
static kn_status parse_location(parser *p, const char *s) {
  const char *code = strstr(s, ", code: ");
  const char *in = NULL;
  for (const char *t = s; (t = strstr(t, " in ")) && (!code || t < code); t++) in = t;
  const char *colon = NULL;
  for (const char *t = s; in && t < in; t++)
    if (*t == ':') colon = t;
  if (!code || !in || !colon) return PERR(p, "expected '# File: <path>:<line> in <fn>, code: ...'");
  trimmed(s, colon, p->file, sizeof p->file);
  trimmed(in + 4, code, p->func, sizeof p->func);
  snprintf(p->code, sizeof p->code, "%s", code + 8);
  p->frame = (kn__gframe){p->file, atoi(colon + 1), p->func};
  return KN_OK;
}

static kn_status parse_params(parser *p, char *line) {
  char *open = strchr(line, '('), *close = strrchr(line, ')');
  if (!open || !close || close < open) return PERR(p, "expected def forward(self, ...):");
  *close = '\0';
  char *params[256];
  int n = split_top(open + 1, params, 256);
  if (n < 1 || strcmp(params[0], "self")) return PERR(p, "expected forward's first parameter self");
  for (int i = 1; i < n; i++) {
    char target[256];
    const char *s = skip_ws(ident(params[i], target, sizeof target));
    kn__vmeta m;
    if (*s == ':' && parse_annot(p, skip_ws(s + 1), &m) != KN_OK) return kn_last_status();
    if (!kn__graph_placeholder(p->g, target, *s == ':' ? &m : NULL)) return kn_last_status();
  }
  return KN_OK;
}

static kn_status parse_return(parser *p, char *s) {
  size_t n = strlen(s);
  if (n < 2 || s[0] != '(' || s[n - 1] != ')') return PERR(p, "expected return (a, b, ...)");
  s[n - 1] = '\0';
  char *items[256];
  int k = split_top(s + 1, items, 256);
  kn__gref vals[256];
  for (int i = 0; i < k; i++)
    if (!parse_ref(p, items[i], &vals[i])) return PERR(p, "unknown value '%s' returned", items[i]);
  return kn__graph_output(p->g, k < 0 ? 0 : k, vals) ? KN_OK : kn_last_status();
}

static kn_status parse_line(parser *p, char *line) {
  char *s = (char *)skip_ws(line);
  if (!*s || !strncmp(s, "class GraphModule", 17)) return KN_OK;
  if (!strncmp(s, "def forward(", 12)) return parse_params(p, s);
  if (!strncmp(s, "# File: ", 8)) return parse_location(p, s + 8);
  if (!strcmp(s, "# No stacktrace found for following nodes")) {
    p->frame.file = NULL;
    return KN_OK;
  }
  if (!strncmp(s, "return ", 7)) return parse_return(p, s + 7);
  return parse_assign(p, s);
}

kn__graph *kn__graph_parse(const char *text, const kn__gparse_const *consts, int nconsts) {
  if (!text) return kn__error(KN_EINVAL, "graph parse: no text"), NULL;
  parser p = {kn__graph_new(), text, text, 0, consts, nconsts, {0}, "", "", ""};
  if (!p.g) return NULL;
  kn_status st = KN_OK;
  char *line = NULL;
  for (const char *s = text; st == KN_OK && *s;) {
    const char *e = strchr(s, '\n');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    p.lineno++;
    p.rest = s + n;
    line = malloc(n + 1);
    if (!line) {
      st = kn__oom();
      break;
    }
    memcpy(line, s, n);
    line[n] = '\0';
    st = parse_line(&p, line);
    free(line);
    s += n + (e ? 1 : 0);
  }
  if (st == KN_OK && !kn__graph_output_node(p.g)) st = kn__error(KN_EINVAL, "graph parse: no return line");
  if (st == KN_OK) st = kn__graph_verify(p.g);
  if (st == KN_OK) return p.g;
  kn__graph_free(p.g);
  return NULL;
}
