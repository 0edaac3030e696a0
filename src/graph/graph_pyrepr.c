/*
** graph/graph_pyrepr.c: values written the way Python prints them, so the
** graph printers match FX's output: float repr (shortest round trip, "1e-05"),
** dtypes ("torch.float32"), symbolic ints, argument lists, type annotations
** ("f32[3, 4][4, 1]cpu"), and the argument names of an op's schema.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_int.h"

void kn__py_float(kn__sb *sb, double v) {
  if (isnan(v)) {
    kn__sb_puts(sb, "nan");
    return;
  }
  if (isinf(v)) {
    kn__sb_puts(sb, v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[40];
  int p = 0;
  for (; p < 17; p++) { /* shortest %.{p}e that reads back exactly */
    snprintf(buf, sizeof buf, "%.*e", p, v);
    if (strtod(buf, NULL) == v) break;
  }
  char digits[24];
  int nd = 0, neg = buf[0] == '-';
  const char *s = buf + neg;
  for (; *s && *s != 'e'; s++)
    if (*s >= '0' && *s <= '9') digits[nd++] = *s;
  int e = atoi(s + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = '\0';
  if (neg) kn__sb_putc(sb, '-');
  if (e >= -4 && e < 16) {
    if (e >= 0) {
      for (int i = 0; i <= e; i++) kn__sb_putc(sb, i < nd ? digits[i] : '0');
      kn__sb_putc(sb, '.');
      if (nd > e + 1) kn__sb_puts(sb, digits + e + 1);
      else kn__sb_putc(sb, '0');
    } else {
      kn__sb_puts(sb, "0.");
      for (int i = 0; i < -e - 1; i++) kn__sb_putc(sb, '0');
      kn__sb_puts(sb, digits);
    }
  } else {
    kn__sb_putc(sb, digits[0]);
    if (nd > 1) kn__sb_printf(sb, ".%s", digits + 1);
    kn__sb_printf(sb, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  }
}

void kn__py_dtype(kn__sb *sb, kn_dtype dt) { kn__sb_printf(sb, "kiln.%s", kn_dtype_name(dt)); }

void kn__py_sym(kn__sb *sb, kn_sym s) {
  if (kn__sym_is_const(s)) {
    kn__sb_printf(sb, "%lld", (long long)s.c);
    return;
  }
  char buf[256];
  kn__sym_format(s, buf, sizeof buf);
  kn__sb_puts(sb, buf);
}

const char *kn__dtype_abbr(kn_dtype dt) {
  static const char *const abbr[KN_DTYPE_COUNT] = {
      [KN_BOOL] = "b8",     [KN_UINT8] = "u8",      [KN_INT8] = "i8",
      [KN_INT16] = "i16",   [KN_INT32] = "i32",     [KN_INT64] = "i64",
      [KN_FLOAT16] = "f16", [KN_BFLOAT16] = "bf16", [KN_FLOAT32] = "f32",
      [KN_FLOAT64] = "f64"};
  return (unsigned)dt < KN_DTYPE_COUNT ? abbr[dt] : "?";
}

static void sym_list(kn__sb *sb, int n, const kn_sym *v) {
  kn__sb_putc(sb, '[');
  for (int i = 0; i < n; i++) {
    if (i) kn__sb_puts(sb, ", ");
    kn__py_sym(sb, v[i]);
  }
  kn__sb_putc(sb, ']');
}

char *kn__vmeta_str(const kn__vmeta *m, const kn__gprint_opts *opts) {
  kn__gprint_opts o = opts ? *opts : KN__GPRINT_DEFAULT;
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, kn__dtype_abbr(m->dtype));
  sym_list(&sb, m->ndim, m->sizes);
  if (o.include_stride) sym_list(&sb, m->ndim, m->strides);
  if (o.include_device)
    kn__sb_puts(&sb, m->device == KN_META ? "meta" : m->device == KN_CUDA ? "cuda:0" : "cpu");
  return kn__sb_take(&sb);
}

static void fmt_ref(kn__sb *sb, kn__gref r) {
  if (!r.node) {
    kn__sb_puts(sb, "None");
    return;
  }
  kn__sb_puts(sb, r.node->name);
  if (r.node->nout != 1) kn__sb_printf(sb, "[%d]", r.idx);
}

void kn__gfmt_arg(kn__sb *sb, const kn__garg *a) {
  switch (a->kind) {
  case KN__GA_NONE: kn__sb_puts(sb, "None"); break;
  case KN__GA_TENSOR: fmt_ref(sb, a->u.t); break;
  case KN__GA_TENSORS:
    kn__sb_putc(sb, '[');
    for (int i = 0; i < a->u.ts.n; i++) {
      if (i) kn__sb_puts(sb, ", ");
      fmt_ref(sb, a->u.ts.v[i]);
    }
    kn__sb_putc(sb, ']');
    break;
  case KN__GA_INT: kn__py_sym(sb, a->u.i); break;
  case KN__GA_DOUBLE: kn__py_float(sb, a->u.d); break;
  case KN__GA_BOOL: kn__sb_puts(sb, a->u.b ? "True" : "False"); break;
  case KN__GA_SCALAR:
    if (a->u.s.kind == KN_SCALAR_FLOAT) kn__py_float(sb, a->u.s.v.f);
    else if (a->u.s.kind == KN_SCALAR_INT) kn__sb_printf(sb, "%lld", (long long)a->u.s.v.i);
    else kn__sb_puts(sb, a->u.s.v.b ? "True" : "False");
    break;
  case KN__GA_INTS: sym_list(sb, a->u.ints.n, a->u.ints.v); break;
  case KN__GA_DTYPE: kn__py_dtype(sb, a->u.dt); break;
  case KN__GA_GEN: kn__sb_puts(sb, a->u.gen ? "<torch.Generator>" : "None"); break;
  }
}

/* Values of enum-like arguments, in the order of the ints kiln passes
** (ATen's Reduction enum; gelu's approximate 0 = 'none', 1 = 'tanh'; div's
** rounding_mode kn_rounding_mode: 0 = None, 1 = 'trunc', 2 = 'floor'). */
static const char *const reductions[] = {"None", "Mean", "Sum"};
static const char *const approximations[] = {"'none'", "'tanh'"};
static const char *const rounding_modes[] = {"None", "'trunc'", "'floor'"};
static const char *const memory_formats[] = {"contiguous_format", "preserve_format",
                                             "channels_last"};

/* Type of the schema item [item, name): "Tensor(a!)", "int[1]?", "str". */
static void type_of(const char *item, const char *name, kn__schema_arg *a) {
  char t[64];
  while (item < name && *item == ' ') item++;
  size_t n = (size_t)(name - item);
  while (n > 0 && item[n - 1] == ' ') n--;
  if (n >= sizeof t) n = sizeof t - 1;
  memcpy(t, item, n);
  t[n] = '\0';
  a->optional = n > 0 && t[n - 1] == '?';
  a->list = strchr(t, '[') != NULL;
  a->type = !strncmp(t, "Tensor", 6)       ? KN__PT_TENSOR
            : !strncmp(t, "int", 3) || !strncmp(t, "SymInt", 6) ? KN__PT_INT
            : !strncmp(t, "float", 5)      ? KN__PT_FLOAT
            : !strncmp(t, "bool", 4)       ? KN__PT_BOOL
            : !strncmp(t, "ScalarType", 10) ? KN__PT_DTYPE
            : !strncmp(t, "Scalar", 6)     ? KN__PT_SCALAR
            : !strncmp(t, "Generator", 9)  ? KN__PT_GENERATOR
                                           : KN__PT_OTHER;
  int len = (int)(a->name_len);
  if (a->type == KN__PT_INT && !a->list && len == 9 && !strncmp(name, "reduction", 9)) {
    a->enum_names = reductions;
    a->nenum = 3;
  } else if (!strncmp(t, "str", 3) && len == 11 && !strncmp(name, "approximate", 11)) {
    a->enum_names = approximations;
    a->nenum = 2;
  } else if (!strncmp(t, "str", 3) && len == 13 && !strncmp(name, "rounding_mode", 13)) {
    a->enum_names = rounding_modes;
    a->nenum = 3;
  } else if (!strncmp(t, "MemoryFormat", 12)) {
    a->enum_names = memory_formats;
    a->nenum = 3;
  }
  if (a->enum_names) a->type = KN__PT_ENUM;
}

void kn__gfmt_arg_as(kn__sb *sb, const kn__garg *a, const kn__schema_arg *sa) {
  if (sa && sa->type == KN__PT_ENUM && a->kind == KN__GA_INT && kn__sym_is_const(a->u.i) &&
      a->u.i.c >= 0 && a->u.i.c < sa->nenum) {
    kn__sb_puts(sb, sa->enum_names[a->u.i.c]);
    return;
  }
  kn__gfmt_arg(sb, a);
}

bool kn__garg_fits(const kn__garg *a, const kn__schema_arg *sa) {
  switch (a->kind) {
  case KN__GA_NONE: return sa->optional || sa->def || sa->type == KN__PT_GENERATOR;
  case KN__GA_TENSOR:
    return sa->type == KN__PT_TENSOR && !sa->list && (a->u.t.node || sa->optional || sa->def);
  case KN__GA_TENSORS: return sa->type == KN__PT_TENSOR && sa->list;
  case KN__GA_INT: /* an int also stands for a one-element list (int[1] dim) */
    return sa->type == KN__PT_INT || sa->type == KN__PT_ENUM || sa->type == KN__PT_SCALAR;
  case KN__GA_INTS: return sa->list && (sa->type == KN__PT_INT || sa->type == KN__PT_BOOL);
  case KN__GA_DOUBLE: return sa->type == KN__PT_FLOAT || sa->type == KN__PT_SCALAR;
  case KN__GA_BOOL: return sa->type == KN__PT_BOOL || sa->type == KN__PT_SCALAR;
  case KN__GA_SCALAR: return sa->type == KN__PT_SCALAR || sa->type == KN__PT_FLOAT;
  case KN__GA_DTYPE: return sa->type == KN__PT_DTYPE;
  case KN__GA_GEN: return sa->type == KN__PT_GENERATOR;
  }
  return false;
}

/* "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor":
** split the parenthesised list at top-level commas; the name is the last
** word before '=' (or the end) of each item, the default what follows '='. */
int kn__schema_args(const char *schema, kn__schema_arg *out) {
  const char *p = schema ? strchr(schema, '(') : NULL;
  if (!p) return 0;
  int n = 0, depth = 0;
  bool kw = false;
  const char *item = ++p;
  for (; *p; p++) {
    if (*p == '(' || *p == '[') depth++;
    else if ((*p == ')' || *p == ']') && depth > 0) depth--;
    else if (depth == 0 && (*p == ',' || *p == ')')) {
      const char *eq = item;
      while (eq < p && *eq != '=') eq++;
      const char *end = eq;
      while (end > item && end[-1] == ' ') end--;
      const char *b = end;
      while (b > item && b[-1] != ' ') b--;
      if (end - b == 1 && *b == '*') {
        kw = true;
      } else if (end > b && n < KN__MAX_ARGS) {
        out[n] = (kn__schema_arg){.name = b, .name_len = (int)(end - b), .kwonly = kw};
        type_of(item, b, &out[n]);
        if (eq < p) {
          out[n].def = eq + 1;
          out[n].def_len = (int)(p - eq - 1);
        }
        n++;
      }
      if (*p == ')') break;
      item = p + 1;
    }
  }
  return n;
}

bool kn__schema_arg_is_scalar(const kn__opdef *op, int i) {
  kn__schema_arg sa[KN__MAX_ARGS];
  int k = op ? kn__schema_args(op->schema, sa) : 0;
  return i >= 0 && i < k && sa[i].type == KN__PT_SCALAR;
}

bool kn__gargs_kw_default(const kn__gnode *n, const kn__schema_arg *sa, int nsa, int i) {
  if (i >= nsa || !sa[i].kwonly) return false;
  if (n->args[i].kind == KN__GA_NONE) return true;
  if (!sa[i].def) return false;
  kn__sb sb = KN__SB_INIT;
  kn__gfmt_arg_as(&sb, &n->args[i], &sa[i]);
  bool same = !kn__sb_failed(&sb) && sb.len == (size_t)sa[i].def_len &&
              memcmp(kn__sb_cstr(&sb), sa[i].def, sb.len) == 0;
  kn__sb_fini(&sb);
  return same;
}
