/*
** dynamo/tracer.c: the tracing mode. Every op call with a fake input (or a
** factory call) made while the user function runs under the mode becomes a
** graph node: arguments are mapped to graph values, the outputs' metadata
** comes from running the call below the mode on fake tensors (factories: from
** their meta function), and the fake outputs are bound to the new node. Calls
** on real tensors only run eagerly (their results are constants for the
** graph). Also: trace_source / trace_call logs and the first error's report.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kiln/autograd.h"
#include "core/strbuf.h"
#include "dynamo/tracer.h"
#include "logging/log.h"

static _Thread_local kn__trace *cur;

kn__trace *kn__trace_current(void) { return cur; }
void kn__trace_set_current(kn__trace *tr) { cur = tr; }

/* ---- bindings ----------------------------------------------------------------- */
static void bind_free(void *p) { free(p); }

kn__tbind *kn__tbind_of(const kn__trace *tr, const kn_tensor *t) {
  if (!t || t->mode_data_free != bind_free) return NULL;
  kn__tbind *b = t->mode_data;
  return b && b->tr == tr ? b : NULL;
}

kn_status kn__trace_keep(kn__trace *tr, kn_tensor *t) {
  if (tr->nfakes == tr->capfakes) {
    int nc = tr->capfakes ? tr->capfakes * 2 : 32;
    kn_tensor **nf = realloc(tr->fakes, sizeof *nf * (size_t)nc);
    if (!nf) return kn__oom();
    tr->fakes = nf;
    tr->capfakes = nc;
  }
  tr->fakes[tr->nfakes++] = kn_retain(t);
  return KN_OK;
}

kn_status kn__tbind_set(kn__trace *tr, kn_tensor *t, int seg, kn__gnode *node, int idx,
                        int slot) {
  kn__tbind *b = kn__tbind_of(tr, t);
  if (!b) {
    if (t->mode_data)
      return kn__error(KN_ESTATE, "a tensor traced by another compiled call was used here");
    b = malloc(sizeof *b);
    if (!b) return kn__oom();
    t->mode_data = b;
    t->mode_data_free = bind_free;
    kn_status st = kn__trace_keep(tr, t);
    if (st != KN_OK) return st;
  }
  *b = (kn__tbind){tr, seg, node, idx, slot};
  return KN_OK;
}

int kn__trace_new_slot(kn__trace *tr, kn_tensor *real) {
  if (tr->nslots == tr->capslots) {
    int nc = tr->capslots ? tr->capslots * 2 : 16;
    kn_tensor **ns = realloc(tr->slot_real, sizeof *ns * (size_t)nc);
    if (!ns) {
      kn__oom();
      return -1;
    }
    tr->slot_real = ns;
    tr->capslots = nc;
  }
  tr->slot_real[tr->nslots] = real ? kn_retain(real) : NULL;
  return tr->nslots++;
}

static kn__tseg *cur_seg(kn__trace *tr) { return &tr->segs[tr->nseg - 1]; }

static kn_status push_int(int **v, int *n, int *cap, int x) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 8;
    int *nv = realloc(*v, sizeof *nv * (size_t)nc);
    if (!nv) return kn__oom();
    *v = nv;
    *cap = nc;
  }
  (*v)[(*n)++] = x;
  return KN_OK;
}

kn_status kn__tseg_add_input(kn__tseg *s, int slot) {
  return push_int(&s->in_slot, &s->nin, &s->capin, slot);
}

kn_status kn__trace_value(kn__trace *tr, kn_tensor *t, kn__gref *out) {
  kn__tseg *s = cur_seg(tr);
  int si = tr->nseg - 1;
  kn__tbind *b = kn__tbind_of(tr, t);
  if (b && b->seg == si) {
    *out = kn__graph_value(s->g, b->node, b->idx);
    return out->node ? KN_OK : kn_last_status();
  }
  if (b) {
    if (b->slot < 0)
      return kn__error(KN_EINTERNAL, "a value computed before a graph break was not carried over");
    char src[1200];
    const char *lifted = kn__trace_lifted_source(tr, b->slot); /* read from its source */
    if (lifted) snprintf(src, sizeof src, "%s", lifted);
    else snprintf(src, sizeof src, "L['___stack%d']", s->nstack++);
    kn__vmeta vm;
    kn__vmeta_from_tensor(t, &vm);
    kn__gnode *ph = kn__graph_placeholder(s->g, src, &vm);
    if (!ph) return kn_last_status();
    kn_status st = kn__tseg_add_input(s, b->slot);
    if (st != KN_OK) return st;
    if (!s->quiet) kn__trace_describe(tr, tr->slot_real[b->slot], src, false);
    b->seg = si;
    b->node = ph;
    b->idx = 0;
    *out = (kn__gref){ph, 0};
    return KN_OK;
  }
  if (t->is_fake) return kn__error(KN_ESTATE, "a tensor traced by another compiled call was used here");
  for (int i = 0; i < s->nconsts; i++)
    if (s->consts[i].real == t) {
      *out = (kn__gref){s->consts[i].node, 0};
      return KN_OK;
    }
  char nm[48];
  snprintf(nm, sizeof nm, "_tensor_constant%d", s->nconsts);
  kn__gnode *n = kn__graph_get_attr(s->g, nm, t);
  if (!n) return kn_last_status();
  if (s->nconsts < (int)(sizeof s->consts / sizeof s->consts[0])) {
    s->consts[s->nconsts].real = t;
    s->consts[s->nconsts++].node = n;
  }
  *out = (kn__gref){n, 0};
  return KN_OK;
}

/* ---- user stacks and trace logs ------------------------------------------------ */
int kn__trace_user_stack(kn__trace *tr, kn__srcframe *out, int cap, const char **api) {
  void *addrs[KN__SRC_CAPTURE_FRAMES];
  int n = kn__srcloc_capture(addrs, KN__SRC_CAPTURE_FRAMES);
  (void)tr;
  return kn__srcloc_user_stack(addrs, n, kn__user_base_depth(), out, cap, api);
}

static void strip_copy(char *dst, size_t n, const char *src) {
  while (*src == ' ' || *src == '\t') src++;
  snprintf(dst, n, "%s", src);
  size_t l = strlen(dst);
  while (l && (dst[l - 1] == ' ' || dst[l - 1] == '\t')) dst[--l] = 0;
}

static void depth_suffix(char *buf, size_t n, int depth) {
  if (depth > 0) snprintf(buf, n, " (inline depth: %d)", depth);
  else buf[0] = 0;
}

static void log_trace_source(kn__trace *tr, const kn__srcframe *fr, int depth) {
  if (!KN_ARTIFACT_ENABLED(KN_ART_TRACE_SOURCE) || !fr->file) return;
  char key[1024];
  snprintf(key, sizeof key, "%s:%d:%d", fr->file, fr->line, depth);
  if (tr->trace_src_last && !strcmp(tr->trace_src_last, key)) return;
  free(tr->trace_src_last);
  tr->trace_src_last = strdup(key);
  const char *line = kn__srcloc_line(fr->file, fr->line);
  char ds[32];
  depth_suffix(ds, sizeof ds, depth);
  KN_LOG_ARTIFACT(KN_ART_TRACE_SOURCE, "TRACE starts_line %s:%d in %s%s\n    %s", fr->file,
                  fr->line, fr->func ? fr->func : "?", ds, line ? line : "");
}

/* "~~~~^^^^^" under the call of `api` in line: '~' under the name, '^' from
** '(' to its matching ')'. */
static void call_markers(const char *line, const char *api, kn__sb *sb) {
  const char *p = api ? strstr(line, api) : NULL;
  while (p && p[strlen(api)] != '(') p = strstr(p + 1, api);
  if (!p) return;
  for (const char *q = line; q < p; q++) kn__sb_putc(sb, *q == '\t' ? '\t' : ' ');
  const char *q = p + strlen(api);
  for (const char *k = p; k < q; k++) kn__sb_putc(sb, '~');
  int depth = 0;
  for (; *q; q++) {
    kn__sb_putc(sb, '^');
    if (*q == '(') depth++;
    else if (*q == ')' && --depth == 0) break;
  }
}

void kn__trace_log_call(kn__trace *tr, const char *node_name, const kn__srcframe *fr, int depth,
                        const char *api) {
  (void)tr;
  if (!KN_ARTIFACT_ENABLED(KN_ART_TRACE_CALL) || !fr->file) return;
  const char *line = kn__srcloc_line(fr->file, fr->line);
  kn__sb sb = KN__SB_INIT;
  char ds[32];
  depth_suffix(ds, sizeof ds, depth);
  kn__sb_printf(&sb, "TRACE FX call %s from %s:%d in %s%s\n%s", node_name, fr->file, fr->line,
                fr->func ? fr->func : "?", ds, line ? line : "");
  if (line) {
    kn__sb_putc(&sb, '\n');
    call_markers(line, api, &sb);
  }
  KN_LOG_ARTIFACT(KN_ART_TRACE_CALL, "%s", kn__sb_cstr(&sb));
  kn__sb_fini(&sb);
}

/* ---- the first error ------------------------------------------------------------ */
static void fake_repr(kn__sb *sb, const kn_tensor *t) {
  kn__sb_puts(sb, "FakeTensor(..., size=(");
  for (int d = 0; d < t->ndim; d++)
    kn__sb_printf(sb, "%s%lld", d ? ", " : "", (long long)t->sizes[d]);
  if (t->ndim == 1) kn__sb_putc(sb, ',');
  kn__sb_putc(sb, ')');
  const char *gf = kn_grad_fn_name(t);
  if (gf) kn__sb_printf(sb, ", grad_fn=<%s>", gf);
  else if (t->requires_grad) kn__sb_puts(sb, ", requires_grad=True");
  kn__sb_putc(sb, ')');
}

static void note_error(kn__trace *tr, const kn__call *c, kn_status st) {
  if (tr->err != KN_OK) return;
  tr->err = st;
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  const char *api = NULL;
  int n = kn__trace_user_stack(tr, fr, KN__SRC_MAX_FRAMES, &api);
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "Failed running call_function kiln.ops.%s(*(", c->op->name);
  /* positional parameters only (the schema's keyword-only ones follow "*") */
  int npos = c->nargs;
  const char *star = c->op->schema ? strstr(c->op->schema, ", *") : NULL;
  if (star) {
    npos = 0;
    const char *open = strchr(c->op->schema, '(');
    for (const char *q = open; q && q < star; q++) npos += *q == ',' || (q == open && q[1] != ')');
  }
  bool first = true;
  for (int i = 0; i < c->nargs && i < npos; i++) {
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_NONE) continue;
    if (!first) kn__sb_puts(&sb, ", ");
    first = false;
    switch (a->kind) {
    case KN__A_TENSOR:
      if (a->u.t) fake_repr(&sb, a->u.t);
      else kn__sb_puts(&sb, "None");
      break;
    case KN__A_INT: kn__sb_printf(&sb, "%lld", (long long)a->u.i); break;
    case KN__A_DOUBLE: kn__sb_printf(&sb, "%g", a->u.d); break;
    case KN__A_BOOL: kn__sb_puts(&sb, a->u.b ? "True" : "False"); break;
    case KN__A_INTS:
      kn__sb_putc(&sb, '[');
      for (int k = 0; k < a->u.ints.n; k++)
        kn__sb_printf(&sb, "%s%lld", k ? ", " : "", (long long)a->u.ints.v[k]);
      kn__sb_putc(&sb, ']');
      break;
    default: kn__sb_puts(&sb, "..."); break;
    }
  }
  kn__sb_printf(&sb, "), **{}):\n%s", kn_last_error());
  if (n > 0) {
    tr->err_frame = fr[n - 1];
    kn__sb_puts(&sb, "\n\nfrom user code:");
    for (int i = 0; i < n; i++) {
      const char *line = kn__srcloc_line(fr[i].file, fr[i].line);
      char stripped[512] = "";
      if (line) strip_copy(stripped, sizeof stripped, line);
      kn__sb_printf(&sb, "\n   File \"%s\", line %d, in %s\n    %s", fr[i].file ? fr[i].file : "?",
                    fr[i].line, fr[i].func ? fr[i].func : "?", stripped);
    }
  }
  tr->err_msg = kn__sb_take(&sb);
  if (tr->err_msg) kn__error(st, "%s", tr->err_msg);
}

/* ---- the mode ------------------------------------------------------------------------- */
/* Fake outputs of a factory call from its meta function. */
static kn_status fake_factory(const kn__call *c, kn__outs *out) {
  kn__metas metas;
  kn__metas_init(&metas);
  kn_status st = c->op->meta(c, &metas);
  for (int i = 0; st == KN_OK && i < metas.n; i++) {
    int64_t sizes[KN_MAX_DIMS];
    for (int d = 0; d < metas.m[i].ndim; d++) sizes[d] = kn__sym_hint(metas.m[i].sizes[d]);
    kn_tensor *t = kn__empty(metas.m[i].ndim, sizes, metas.m[i].dtype, KN_META);
    if (!t) {
      st = kn_last_status() ? kn_last_status() : kn__oom();
      break;
    }
    t->is_fake = true;
    t->device = KN_CPU;
    if (!kn__outs_push(out, t)) st = kn__oom();
  }
  kn__metas_fini(&metas);
  if (st != KN_OK) kn__outs_fini(out);
  return st;
}

typedef struct argscratch {
  kn__garg ga[KN__MAX_ARGS];
  kn_sym ints[KN__MAX_ARGS][16];
  kn__gref *lists[KN__MAX_ARGS];
} argscratch;

static void scratch_fini(argscratch *a) {
  for (int i = 0; i < KN__MAX_ARGS; i++) free(a->lists[i]);
}

static kn_status map_args(kn__trace *tr, const kn__call *c, argscratch *a) {
  memset(a->lists, 0, sizeof a->lists);
  for (int i = 0; i < c->nargs; i++) {
    const kn__arg *x = &c->args[i];
    kn__garg *g = &a->ga[i];
    kn_status st = KN_OK;
    switch (x->kind) {
    case KN__A_NONE: *g = KN_GA_NONE; break;
    case KN__A_TENSOR:
      *g = (kn__garg){.kind = KN__GA_TENSOR, .u.t = {NULL, 0}};
      if (x->u.t) st = kn__trace_value(tr, x->u.t, &g->u.t);
      break;
    case KN__A_TENSORS:
      a->lists[i] = calloc((size_t)(x->u.ts.n ? x->u.ts.n : 1), sizeof(kn__gref));
      if (!a->lists[i]) return kn__oom();
      for (int k = 0; st == KN_OK && k < x->u.ts.n; k++)
        st = kn__trace_value(tr, x->u.ts.v[k], &a->lists[i][k]);
      *g = KN_GA_TS(a->lists[i], x->u.ts.n);
      break;
    case KN__A_INT: *g = KN_GA_I(x->u.i); break;
    case KN__A_DOUBLE: *g = KN_GA_D(x->u.d); break;
    case KN__A_BOOL: *g = KN_GA_B(x->u.b); break;
    case KN__A_SCALAR: *g = KN_GA_S(x->u.s); break;
    case KN__A_INTS:
      if (x->u.ints.n > 16) return kn__error(KN_EUNSUPPORTED, "%s: int lists longer than 16 cannot be traced", c->op->name);
      *g = kn__garg_ints64(x->u.ints.v, x->u.ints.n, a->ints[i]);
      break;
    case KN__A_DTYPE: *g = KN_GA_DT(x->u.dt); break;
    case KN__A_GEN: *g = KN_GA_GEN(x->u.gen); break;
    }
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* Name hint from the public function the user called ("kn_ones" -> "ones")
** when it differs from the op's own name. */
static const char *name_from_api(kn__gnode *n, const kn__call *c, const char *api) {
  const kn__opdef *op = c->op;
  if (op->id == KN_OP_FULL && c->args[1].kind == KN__A_SCALAR) {
    kn_scalar v = c->args[1].u.s;
    double d = v.kind == KN_SCALAR_FLOAT ? v.v.f : v.kind == KN_SCALAR_INT ? (double)v.v.i : v.v.b;
    const char *nm = d == 1 ? "ones" : d == 0 ? "zeros" : NULL;
    if (nm && kn__graph_node_set_name_hint(n, nm) == KN_OK)
      return d == 1 ? "kn_ones" : "kn_zeros";
  }
  if (!api || strncmp(api, "kn_", 3) || api[3] == '_') return NULL;
  const char *stem = api + 3;
  size_t ol = strlen(op->name);
  if (!strncmp(stem, op->name, ol) || !*stem) return api;
  (void)kn__graph_node_set_name_hint(n, stem);
  return api;
}

static kn_status record(kn__trace *tr, kn__call *c, kn__outs *out, const argscratch *a) {
  kn__tseg *s = cur_seg(tr);
  kn__vmeta vm_inl[KN__INLINE_OUTS];
  kn__vmeta *vm = out->n <= KN__INLINE_OUTS ? vm_inl : malloc(sizeof *vm * (size_t)out->n);
  if (!vm) return kn__oom();
  for (int i = 0; i < out->n; i++) kn__vmeta_from_tensor(out->t[i], &vm[i]);
  kn__gnode *node = kn__graph_call(s->g, c->op, c->nargs, a->ga, out->n, vm);
  if (vm != vm_inl) free(vm);
  if (!node) return kn_last_status();
  node->grad_mode = kn_is_grad_enabled() ? 1 : 0; /* kn_set_grad_enabled inside is replayed */
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  const char *api = NULL;
  int n = s->quiet ? 0 : kn__trace_user_stack(tr, fr, KN__SRC_MAX_FRAMES, &api);
  if (n > 0) {
    kn__gframe gf[KN__SRC_MAX_FRAMES];
    for (int i = 0; i < n; i++) gf[i] = (kn__gframe){fr[i].file, fr[i].line, fr[i].func};
    const char *line = kn__srcloc_line(fr[n - 1].file, fr[n - 1].line);
    char code[512] = "";
    if (line) strip_copy(code, sizeof code, line);
    kn_status st = kn__graph_node_set_stack(node, gf, n, line ? code : NULL);
    if (st != KN_OK) return st;
  }
  if (n == 0) api = NULL; /* no user frame (a tail call): no call site */
  const char *api2 = name_from_api(node, c, api);
  char opapi[64];
  snprintf(opapi, sizeof opapi, "kn_%s", c->op->name);
  if (n > 0) {
    const char *line = kn__srcloc_line(fr[n - 1].file, fr[n - 1].line);
    const char *cands[3] = {api, api2, opapi};
    for (int k = 0; line && k < 3; k++) {
      char pat[80];
      snprintf(pat, sizeof pat, "%s(", cands[k] ? cands[k] : "\x01");
      if (cands[k] && strstr(line, pat)) {
        api = cands[k];
        break;
      }
    }
  }
  for (int i = 0; i < out->n; i++) {
    kn_status st = kn__tbind_set(tr, out->t[i], tr->nseg - 1, node, i, -1);
    if (st != KN_OK) return st;
  }
  /* first uses of the root inputs (guard comments) */
  for (int k = 0; k < c->nargs; k++)
    if (a->ga[k].kind == KN__GA_TENSOR && a->ga[k].u.t.node &&
        a->ga[k].u.t.node->op == KN__GN_PLACEHOLDER && tr->nseg == 1) {
      int idx = -1;
      for (int j = 0; j < kn__graph_num_inputs(s->g); j++)
        if (kn__graph_input(s->g, j) == a->ga[k].u.t.node) idx = j;
      if (idx >= 0 && idx < tr->nroot && !tr->root_first_node[idx])
        tr->root_first_node[idx] = node;
    }
  if (n > 0) {
    log_trace_source(tr, &fr[n - 1], n - 1);
    kn__trace_log_call(tr, node->name, &fr[n - 1], n - 1, api);
  }
  return KN_OK;
}

static kn_status handle_call(kn__mode *self, kn__trace *tr, kn__call *c, kn__outs *out) {
  bool factory = (c->op->flags & KN_OPF_FACTORY) != 0;
  bool anyfake = false;
  for (int k = 0, n = kn__call_ninputs(c); k < n; k++) {
    kn_tensor *t = kn__call_input(c, k);
    if (t && t->is_fake) anyfake = true;
  }
  /* random ops are recorded even on real inputs: folding them into
  ** constants would freeze their draws */
  bool random_on_real = !factory && !anyfake && (c->op->flags & KN_OPF_RANDOM);
  /* an output shape that depends on the data cannot be traced: a break */
  if (anyfake && (c->op->flags & KN_OPF_DATA_DEP)) return kn__trace_data_dep_break(tr, c, out);
  if (!factory && !anyfake && !random_on_real) return kn__dispatch_below(self, c, out);
  if (tr->stop)
    return kn__error(KN_ESTATE, "%s: tracing stopped after an earlier error", c->op->name);
  argscratch a;
  kn_status st = map_args(tr, c, &a);
  tr->cur_op = c->op->name; /* guards added below come from this op */
  if (st == KN_OK)
    st = factory || random_on_real ? fake_factory(c, out) : kn__dispatch_below(self, c, out);
  tr->cur_op = NULL;
  if (st != KN_OK) {
    scratch_fini(&a);
    note_error(tr, c, st);
    return st;
  }
  st = record(tr, c, out, &a);
  scratch_fini(&a);
  if (st != KN_OK) {
    kn__outs_fini(out);
    note_error(tr, c, st);
  }
  return st;
}

/* Real inputs that need it are lifted first (lift.c): an op on a parameter
** reached through a pointer is recorded, not run once at trace time. */
static kn_status handle(kn__mode *self, kn__call *c, kn__outs *out) {
  kn__trace *tr = self->state;
  if (tr->eager) return kn__trace_eager_call(tr, self, c, out); /* past the cache limit */
  kn_tensor **lists[KN__MAX_ARGS];
  kn_status st = kn__trace_lift_call(tr, c, lists);
  if (st == KN_OK) st = handle_call(self, tr, c, out);
  for (int i = 0; i < KN__MAX_ARGS; i++) free(lists[i]);
  return st;
}

void kn__trace_mode_init(kn__trace *tr) {
  tr->mode = (kn__mode){"dynamo_tracing", handle, tr};
}

/* kn_set_requires_grad(t, true) on a new leaf that no op has used yet (a
** factory's result): captured on its node. Anything else is a break. */
bool kn__trace_capture_requires_grad(kn__trace *tr, kn_tensor *t) {
  kn__tbind *b = kn__tbind_of(tr, t);
  if (!b || b->seg != tr->nseg - 1 || !b->node || b->node->op != KN__GN_CALL || b->idx != 0 ||
      b->node->nusers > 0 || t->grad_fn || b->node->nout != 1)
    return false;
  b->node->set_requires_grad = true;
  ((kn__vmeta *)b->node->meta)[0].requires_grad = true;
  return true;
}

/* ---- naming ---------------------------------------------------------------------------- */
kn_tensor *kn_name(kn_tensor *t, const char *name) {
  kn__trace *tr = cur;
  if (!tr || tr->eager || !t || !name) return t; /* eager: no graph to name in */
  kn__tbind *b = kn__tbind_of(tr, t);
  if (b && b->seg == tr->nseg - 1 && b->node->op == KN__GN_CALL && b->node->nout == 1)
    (void)kn__graph_node_set_name_hint(b->node, name);
  return t;
}
