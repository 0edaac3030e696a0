/*
** graph/graph_serial.c: the canonical text of a graph and its SHA-256.
**
** One line per node: "%<index> <opcode> <op name.overload | getitem>" with
** arguments (values as %node.output, constants with their kind, doubles in
** hex-float so the text is exact) and example metadata. Names, sources,
** source locations and sequence numbers are left out: two captures of the
** same computation get the same text, and any change that matters to a
** compiled program (an op, a constant, a dtype, a size, a node run without
** grad mode or made to require grad) changes it.
** get_attr constants contribute dtype, geometry and their data bytes.
*/
#include <sha2.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "graph/graph_int.h"

static void ser_sym(kn__sb *sb, kn_sym s) {
  if (kn__sym_is_const(s)) {
    kn__sb_printf(sb, "%lld", (long long)s.c);
    return;
  }
  char buf[256];
  kn__sym_format(s, buf, sizeof buf);
  kn__sb_printf(sb, "{%s}", buf);
}

static void ser_ref(kn__sb *sb, kn__gref r) {
  if (r.node) kn__sb_printf(sb, "%%%d.%d", r.node->index, r.idx);
  else kn__sb_puts(sb, "%none");
}

static void ser_scalar(kn__sb *sb, kn_scalar s) {
  if (s.kind == KN_SCALAR_FLOAT) kn__sb_printf(sb, "f:%a", s.v.f);
  else if (s.kind == KN_SCALAR_INT) kn__sb_printf(sb, "i:%lld", (long long)s.v.i);
  else kn__sb_printf(sb, "b:%d", s.v.b ? 1 : 0);
}

static void ser_arg(kn__sb *sb, const kn__garg *a) {
  switch (a->kind) {
  case KN__GA_NONE: kn__sb_puts(sb, "none"); break;
  case KN__GA_TENSOR: kn__sb_puts(sb, "t:"); ser_ref(sb, a->u.t); break;
  case KN__GA_TENSORS:
    kn__sb_puts(sb, "ts:[");
    for (int i = 0; i < a->u.ts.n; i++) {
      if (i) kn__sb_putc(sb, ',');
      ser_ref(sb, a->u.ts.v[i]);
    }
    kn__sb_putc(sb, ']');
    break;
  case KN__GA_INT: kn__sb_puts(sb, "i:"); ser_sym(sb, a->u.i); break;
  case KN__GA_DOUBLE: kn__sb_printf(sb, "d:%a", a->u.d); break;
  case KN__GA_BOOL: kn__sb_printf(sb, "b:%d", a->u.b ? 1 : 0); break;
  case KN__GA_SCALAR: kn__sb_puts(sb, "s:"); ser_scalar(sb, a->u.s); break;
  case KN__GA_INTS:
    kn__sb_puts(sb, "is:[");
    for (int i = 0; i < a->u.ints.n; i++) {
      if (i) kn__sb_putc(sb, ',');
      ser_sym(sb, a->u.ints.v[i]);
    }
    kn__sb_putc(sb, ']');
    break;
  case KN__GA_DTYPE: kn__sb_printf(sb, "dt:%s", kn_dtype_name(a->u.dt)); break;
  case KN__GA_GEN: kn__sb_puts(sb, a->u.gen ? "gen:custom" : "gen:default"); break;
  }
}

static void ser_meta(kn__sb *sb, const kn__vmeta *m) {
  if (m->kind == KN__V_NONE) {
    kn__sb_puts(sb, " :none");
    return;
  }
  kn__sb_printf(sb, " :%s%s%s[", kn_dtype_name(m->dtype), m->device == KN_META ? ":meta" : m->device == KN_CUDA ? ":cuda" : "",
                m->requires_grad ? ":rg" : "");
  for (int d = 0; d < m->ndim; d++) {
    if (d) kn__sb_putc(sb, ',');
    ser_sym(sb, m->sizes[d]);
  }
  kn__sb_puts(sb, "][");
  for (int d = 0; d < m->ndim; d++) {
    if (d) kn__sb_putc(sb, ',');
    ser_sym(sb, m->strides[d]);
  }
  kn__sb_puts(sb, "]+");
  ser_sym(sb, m->offset);
}

/* Data bytes of a constant in logical (row-major) order, as hex. */
static void ser_data(kn__sb *sb, const kn_tensor *t) {
  const unsigned char *base = kn_data(t);
  if (!base) {
    kn__sb_puts(sb, " data:none");
    return;
  }
  size_t es = kn_dtype_size(t->dtype);
  int64_t n = kn_numel(t), idx[KN_MAX_DIMS] = {0};
  kn__sb_puts(sb, " data:");
  for (int64_t e = 0; e < n; e++) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    const unsigned char *p = base + off * (int64_t)es;
    for (size_t b = 0; b < es; b++) kn__sb_printf(sb, "%02x", p[b]);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->sizes[d]) break;
      idx[d] = 0;
    }
  }
}

static const char *opcode(kn__gop op) {
  static const char *const names[] = {"placeholder", "call_function", "get_attr", "output"};
  return (unsigned)op < 4 ? names[op] : "?";
}

char *kn__graph_serialize(const kn__graph *g) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "kiln-graph 1 nodes=%d inputs=%d\n", g->n, g->ninputs);
  for (int i = 0; i < g->n; i++) {
    const kn__gnode *n = g->nodes[i];
    kn__sb_printf(&sb, "%%%d %s", i, opcode(n->op));
    if (n->op == KN__GN_CALL) {
      if (n->opdef) kn__sb_printf(&sb, " %s.%s", n->opdef->name, n->opdef->overload);
      else kn__sb_puts(&sb, " getitem");
    }
    if (n->nargs) {
      kn__sb_puts(&sb, " (");
      for (int a = 0; a < n->nargs; a++) {
        if (a) kn__sb_puts(&sb, ", ");
        ser_arg(&sb, &n->args[a]);
      }
      kn__sb_putc(&sb, ')');
    }
    for (int k = 0; k < n->nout; k++) ser_meta(&sb, &n->meta[k]);
    if (n->attr) ser_data(&sb, n->attr);
    if (n->grad_mode == 0) kn__sb_puts(&sb, " no_grad"); /* replayed by the interpreter */
    if (n->set_requires_grad) kn__sb_puts(&sb, " requires_grad_");
    kn__sb_putc(&sb, '\n');
  }
  char *s = kn__sb_take(&sb);
  if (!s) kn__oom();
  return s;
}

kn_status kn__graph_hash(const kn__graph *g, char hex[65]) {
  char *s = kn__graph_serialize(g);
  if (!s) return KN_ENOMEM;
  SHA2_CTX ctx;
  SHA256Init(&ctx);
  SHA256Update(&ctx, (const uint8_t *)s, strlen(s));
  SHA256End(&ctx, hex);
  free(s);
  return KN_OK;
}
