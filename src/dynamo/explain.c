/*
** dynamo/explain.c: kn_explain, the C form of torch._dynamo.explain. The
** function is traced once into a private copy of the compiled function (its
** own empty cache, counters and automatic-dynamic state, the eager backend),
** the breaks are collected through a thread-local hook that breaks.c calls,
** and the entry's segments and guards are read back; then the private state
** is discarded, so the user's compiled function is left as it was.
*/
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/dynamo.h"
#include "dynamo/tracer.h"

/* ---- collecting breaks ------------------------------------------------------------- */
typedef struct collector {
  kn_explain_break *v;
  int n, cap;
  bool oom;
} collector;

static _Thread_local collector *cur;

static char *dup_or_null(const char *s, bool *oom) {
  if (!s) return NULL;
  char *d = strdup(s);
  if (!d) *oom = true;
  return d;
}

static void frame_fini(kn_explain_frame *f) {
  free(f->file);
  free(f->func);
  free(f->code);
}

static void break_fini(kn_explain_break *b) {
  free(b->reason);
  for (int i = 0; i < b->nstack; i++) frame_fini(&b->stack[i]);
  free(b->stack);
}

static void copy_frame(kn_explain_frame *dst, const kn__srcframe *fr, bool *oom) {
  const char *src = kn__srcloc_line(fr->file, fr->line);
  while (src && (*src == ' ' || *src == '\t')) src++;
  dst->file = dup_or_null(fr->file, oom);
  dst->line = fr->line;
  dst->func = dup_or_null(fr->func, oom);
  dst->code = dup_or_null(src, oom);
}

static bool grow(collector *c) {
  if (c->n < c->cap) return true;
  int cap = c->cap ? c->cap * 2 : 4;
  kn_explain_break *v = realloc(c->v, sizeof *v * (size_t)cap);
  if (!v) return false;
  c->v = v;
  c->cap = cap;
  return true;
}

void kn__explain_note_break(const char *reason, const char *op, const kn__srcframe *fr, int n) {
  collector *c = cur;
  if (!c || c->oom) return;
  if (!grow(c)) {
    c->oom = true;
    return;
  }
  kn_explain_break *b = &c->v[c->n++];
  *b = (kn_explain_break){0};
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, reason ? reason : "?");
  if (op) kn__sb_printf(&sb, ": kiln.ops.%s", op);
  b->reason = kn__sb_take(&sb);
  b->stack = n > 0 ? calloc((size_t)n, sizeof *b->stack) : NULL;
  if (!b->reason || (n > 0 && !b->stack)) {
    c->oom = true;
    return;
  }
  b->nstack = n;
  for (int i = 0; i < n; i++) copy_frame(&b->stack[i], &fr[i], &c->oom);
}

/* ---- the private compiled function ------------------------------------------------- */
static kn_status private_copy(const kn_compiled *f, kn_compiled *p) {
  *p = (kn_compiled){0};
  p->fn = f->fn;
  p->ud = f->ud;
  p->tfn = f->tfn;
  p->nargs = f->nargs;
  p->opts = f->opts;
  p->opts.backend = "eager";
  p->opts.backend_fn = NULL;
  p->opts.backend_ud = NULL;
  p->opts.fullgraph = false;
  p->opts.suppress_errors = false;
  p->opts.guard_fail_fn = NULL;
  p->arg_names = f->arg_names; /* borrowed */
  p->narg_names = f->narg_names;
  p->globals = f->globals; /* borrowed */
  p->nglobals = f->nglobals;
  p->frame = (kn__frame){-1, 0, f->frame.name, f->frame.file, f->frame.line}; /* borrowed */
  p->next_all = p->prev_all = p; /* not in the list kn_reset walks */
  p->resume = malloc(sizeof *p->resume);
  p->dyn_state = malloc(sizeof *p->dyn_state);
  if (!p->resume || !p->dyn_state) {
    free(p->resume);
    free(p->dyn_state);
    return kn__oom();
  }
  kn__hm_init(p->resume, true);
  kn__hm_init(p->dyn_state, true);
  return KN_OK;
}

static void private_free(kn_compiled *p) {
  const kn__hm_slot *sl;
  for (size_t i = 0; kn__hm_next(p->resume, &i, &sl);) {
    kn__frame *fr = sl->val;
    free(fr->name);
    free(fr->file);
    free(fr);
  }
  for (size_t i = 0; kn__hm_next(p->dyn_state, &i, &sl);) free(sl->val);
  kn__hm_fini(p->resume);
  kn__hm_fini(p->dyn_state);
  free(p->resume);
  free(p->dyn_state);
}

/* ---- reading the entry back -------------------------------------------------------- */
static const kn__graph *seg_graph(const kn__segment *s) {
  return s->gm ? kn__graph_module_graph(s->gm) : NULL;
}

/* The segments of a fresh trace form one path: root, then each break's child. */
static const kn__segment *next_seg(const kn__segment *s) {
  return s->nchild > 0 ? s->child[0].seg : NULL;
}

static kn_status fill_graph(kn_explain_graph *out, const kn__segment *s, const kn__graph *g) {
  char cid[64];
  kn__compile_id_format(s->cid, cid, sizeof cid);
  out->compile_id = strdup(cid);
  out->op_count = kn__graph_op_count(g);
  out->ops = calloc((size_t)out->op_count, sizeof *out->ops);
  out->code = kn__graph_code(g, NULL);
  if (!out->compile_id || !out->ops || !out->code) return kn__oom();
  int k = 0;
  for (int i = 0; i < kn__graph_num_nodes(g) && k < out->op_count; i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->op != KN__GN_CALL || !n->opdef) continue;
    if (!(out->ops[k++] = strdup(n->target))) return kn__oom();
  }
  return KN_OK;
}

static kn_status add_graphs(kn_explanation *x, const kn__segment *root) {
  int n = 0;
  for (const kn__segment *s = root; s; s = next_seg(s))
    n += seg_graph(s) && kn__graph_op_count(seg_graph(s)) > 0;
  x->graphs = calloc((size_t)(n ? n : 1), sizeof *x->graphs);
  if (!x->graphs) return kn__oom();
  for (const kn__segment *s = root; s; s = next_seg(s)) {
    const kn__graph *g = seg_graph(s);
    if (!g || kn__graph_op_count(g) == 0) continue;
    kn_status st = fill_graph(&x->graphs[x->graph_count++], s, g);
    if (st != KN_OK) return st;
    x->op_count += x->graphs[x->graph_count - 1].op_count;
  }
  return KN_OK;
}

static const char *guard_label(kn__gkind k) {
  switch (k) {
  case KN__G_KIND: return "TYPE_MATCH";
  case KN__G_TENSOR: return "TENSOR_MATCH";
  case KN__G_INT: case KN__G_DOUBLE: case KN__G_BOOL: return "EQUALS_MATCH";
  case KN__G_LEN: return "LENGTH_CHECK";
  case KN__G_MODULE_ID: return "ID_MATCH";
  case KN__G_GRAD_MODE: return "GLOBAL_STATE";
  case KN__G_SYM_MIN: return "SHAPE_ENV";
  }
  return "GUARD";
}

static kn_status add_guards(kn_explanation *x, const kn__guards *gs) {
  int n = gs->n + gs->nshape;
  x->guards = calloc((size_t)(n ? n : 1), sizeof *x->guards);
  if (!x->guards) return kn__oom();
  kn__sb sb = KN__SB_INIT;
  for (int i = 0; i < n; i++) {
    kn__sb_clear(&sb);
    if (i < gs->n) {
      const kn__guard *g = &gs->g[i];
      kn__sb_printf(&sb, "%s: %s", guard_label(g->kind), g->code ? g->code : g->src.expr);
    } else if (kn__guards_shape_live(gs, i - gs->n)) {
      kn__sb_printf(&sb, "SHAPE_ENV: %s", gs->shape_code[i - gs->n]);
    } else {
      continue; /* implied by a later guard */
    }
    if (kn__sb_failed(&sb) || !(x->guards[x->nguards] = strdup(kn__sb_cstr(&sb)))) break;
    x->nguards++;
  }
  kn__sb_fini(&sb);
  return x->nguards == gs->n + kn__guards_nshape_live(gs) ? KN_OK : kn__oom();
}

static kn_explanation *build(const kn__entry *e, collector *c) {
  kn_explanation *x = calloc(1, sizeof *x);
  if (!x) {
    kn__oom();
    return NULL;
  }
  x->breaks = c->v;
  x->graph_break_count = c->n;
  c->v = NULL;
  c->n = 0;
  kn_status st = c->oom ? kn__oom() : add_graphs(x, e->root);
  if (st == KN_OK) st = add_guards(x, &e->guards);
  if (st != KN_OK) {
    kn_explanation_free(x);
    return NULL;
  }
  return x;
}

/* ---- the API ----------------------------------------------------------------------- */
static kn_status check_call(const kn_compiled *f, const kn_value *args, int nargs) {
  if (!f) return kn__error(KN_EINVAL, "kn_explain: the compiled function is NULL");
  if (nargs < 0 || (nargs > 0 && !args) || (f->nargs >= 0 && nargs != f->nargs))
    return kn__error(KN_EINVAL, "kn_explain: %s expects %d arguments, got %d", f->frame.name,
                     f->nargs, nargs);
  if (f->tfn)
    for (int i = 0; i < nargs; i++)
      if (args[i].kind != KN_VTENSOR || !args[i].u.t)
        return kn__error(KN_EINVAL, "kn_explain: %s: argument %d: expected a tensor",
                         f->frame.name, i);
  if (kn__trace_current())
    return kn__error(KN_ESTATE, "kn_explain: called while a compiled function is being "
                                "traced (call it outside compiled functions)");
  return KN_OK;
}

kn_explanation *kn_explain(kn_compiled *f, const kn_value *args, int nargs) {
  if (check_call(f, args, nargs) != KN_OK) return NULL;
  kn_compiled p;
  if (private_copy(f, &p) != KN_OK) return NULL;
  collector c = {0};
  collector *saved = cur;
  cur = &c;
  kn__entry *e = NULL;
  kn_value out;
  kn_status st = kn__trace_call(&p, args, nargs, NULL, NULL, 0, NULL, &e, &out);
  cur = saved;
  kn_explanation *x = NULL;
  if (st == KN_OK) {
    kn_value_release(out);
    x = e ? build(e, &c) : NULL;
    if (!e) kn__error(KN_EINTERNAL, "kn_explain: the trace made no cache entry");
  }
  for (int i = 0; i < c.n; i++) break_fini(&c.v[i]);
  free(c.v);
  if (e) kn__entry_free(e);
  private_free(&p);
  return x;
}

kn_explanation *kn_explain_tensors(kn_compiled *f, kn_tensor *const *args, int nargs) {
  if (nargs < 0 || nargs > 64 || (nargs > 0 && !args)) {
    kn__error(KN_EINVAL, "kn_explain_tensors: expected 0 to 64 tensors, got %d", nargs);
    return NULL;
  }
  kn_value v[64];
  for (int i = 0; i < nargs; i++) v[i] = kn_vtensor(args[i]);
  return kn_explain(f, v, nargs);
}

static void str_breaks(kn__sb *sb, const kn_explanation *e) {
  kn__sb_puts(sb, "Break Reasons:\n");
  for (int i = 0; i < e->graph_break_count; i++) {
    const kn_explain_break *b = &e->breaks[i];
    kn__sb_printf(sb, "  Break Reason %d:\n    Reason: %s\n    User Stack:\n", i + 1, b->reason);
    for (int k = 0; k < b->nstack; k++) {
      const kn_explain_frame *fr = &b->stack[k];
      kn__sb_printf(sb, "      File \"%s\", line %d, in %s\n", fr->file ? fr->file : "?",
                    fr->line, fr->func ? fr->func : "?");
      if (fr->code) kn__sb_printf(sb, "        %s\n", fr->code);
    }
  }
}

char *kn_explanation_str(const kn_explanation *e) {
  if (!e) {
    kn__error(KN_EINVAL, "kn_explanation_str: the explanation is NULL");
    return NULL;
  }
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "Graph Count: %d\nGraph Break Count: %d\nOp Count: %d\n", e->graph_count,
                e->graph_break_count, e->op_count);
  str_breaks(&sb, e);
  kn__sb_puts(&sb, "Ops per Graph:\n");
  for (int i = 0; i < e->graph_count; i++) {
    kn__sb_printf(&sb, "  Ops %d:\n", i + 1);
    for (int k = 0; k < e->graphs[i].op_count; k++)
      kn__sb_printf(&sb, "    %s\n", e->graphs[i].ops[k]);
  }
  kn__sb_puts(&sb, "Out Guards:\n");
  for (int i = 0; i < e->nguards; i++)
    kn__sb_printf(&sb, "  Guard %d:\n    %s\n", i + 1, e->guards[i]);
  if (kn__sb_failed(&sb)) {
    kn__sb_fini(&sb);
    kn__oom();
    return NULL;
  }
  return kn__sb_take(&sb);
}

void kn_explanation_free(kn_explanation *e) {
  if (!e) return;
  for (int i = 0; i < e->graph_break_count; i++) break_fini(&e->breaks[i]);
  free(e->breaks);
  for (int i = 0; i < e->graph_count; i++) {
    kn_explain_graph *g = &e->graphs[i];
    for (int k = 0; g->ops && k < g->op_count; k++) free(g->ops[k]);
    free(g->ops);
    free(g->code);
    free(g->compile_id);
  }
  free(e->graphs);
  for (int i = 0; i < e->nguards; i++) free(e->guards[i]);
  free(e->guards);
  free(e);
}
