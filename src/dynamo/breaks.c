/*
** dynamo/breaks.c: one trace from start to end (kn__trace_call) and the
** graph breaks inside it (kn_item, kn_is_true, kn_graph_break, kn_print).
**
** A break ends the current segment: the values user code still holds become
** its outputs, it is compiled and run on the real values, the break's answer
** is computed from the real value and returned to the user's C code, and a
** new segment (a new frame, "resume_in_<fn>_at_<line>") starts whose inputs
** are the carried values (L['___stack0'] ...). The entry records the answer;
** a call that gets another answer traces again and adds a branch.
*/
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/tracer.h"
#include "ops/autocast.h"
#include "kiln/autograd.h"
#include "logging/log.h"
#include "tensor/handles.h"
#include "tensor/tensor.h"
#include "trace/events.h"
#include "trace/trace.h"


/* ---- guard dumps ------------------------------------------------------------------ */
void kn__trace_guard_dump(kn__trace *tr, kn__tseg *s) {
  if (s->quiet) return;
  if (tr->nseg == 1) {
    if (kn__trace_finish_guards(tr) != KN_OK) return;
    char *d = kn__guards_dump(&tr->guards);
    kn__fc_guards(&s->fc, d, kn__guards_count(&tr->guards), kn__guards_nshape_live(&tr->guards));
    free(d);
    return;
  }
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, "GUARDS:\n\nTREE_GUARD_MANAGER:\n+- RootGuardManager\n"
                   "| +- GLOBAL_STATE: ___check_global_state()");
  kn__sb_printf(&sb, "\n| +- RESUME: inputs carried from the previous segment (%d)", s->nin);
  kn__fc_guards(&s->fc, kn__sb_cstr(&sb), 1, 0);
  kn__sb_fini(&sb);
}

static void end_seg(kn__trace *tr, const kn__fc_info *extra) {
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  kn__fc_info info = {.cache_size = tr->f->nentries, .suppress_errors = tr->f->opts.suppress_errors};
  if (extra) info = *extra;
  kn__fc_end(&s->fc, &info);
}

/* ---- the trace tree ---------------------------------------------------------------- */
/* Link a finished segment below the segment whose break led to it. */
static kn_status link_segment(kn__trace *tr, kn__segment *seg, bool quiet) {
  if (quiet) return KN_OK;
  if (!tr->parent) {
    tr->root_seg = seg;
    return KN_OK;
  }
  kn__segment *p = tr->parent;
  if (p->nchild == p->capchild) {
    int nc = p->capchild ? p->capchild * 2 : 2;
    kn__child *n = realloc(p->child, sizeof *n * (size_t)nc);
    if (!n) return kn__oom();
    p->child = n;
    p->capchild = nc;
  }
  p->child[p->nchild++] = (kn__child){tr->parent_answer, seg};
  return KN_OK;
}

static kn__segment *known_child(const kn__segment *s, double ans) {
  for (int i = 0; s && i < s->nchild; i++)
    if (s->child[i].answer == ans) return s->child[i].seg;
  return NULL;
}

/* The frame resuming after a break at `at`. Without a location (no debug
** info in the user's code) break sites are told apart by their position in
** the trace: the k-th break resumes in "resume_in_<fn>_at_unknown_<k>". */
static kn__frame *resume_frame(kn__trace *tr, const kn__srcframe *at) {
  kn_compiled *f = tr->f;
  char key[600], name[300];
  if (at) {
    snprintf(key, sizeof key, "%s:%d", at->file ? at->file : "?", at->line);
    snprintf(name, sizeof name, "resume_in_%s_at_%d", f->frame.name, at->line);
  } else {
    snprintf(key, sizeof key, "<unknown>#%d", tr->nseg);
    snprintf(name, sizeof name, "resume_in_%s_at_unknown_%d", f->frame.name, tr->nseg);
  }
  bool found = false;
  kn__frame *fr = kn__hm_get(f->resume, key, &found);
  if (found) return fr;
  fr = calloc(1, sizeof *fr);
  if (!fr) return NULL;
  fr->frame_id = -1;
  fr->name = strdup(name);
  fr->file = strdup(at && at->file ? at->file : f->frame.file);
  fr->line = at ? at->line : f->frame.line;
  if (!fr->name || !fr->file || !kn__hm_put(f->resume, key, fr)) {
    free(fr->name);
    free(fr->file);
    free(fr);
    return NULL;
  }
  return fr;
}

/* "file:line" of a break site, or "<unknown>" without a location. */
static void site_text(const kn__srcframe *at, char *buf, size_t n) {
  if (at && at->file) snprintf(buf, n, "%s:%d", at->file, at->line);
  else snprintf(buf, n, "<unknown>");
}

/* ---- breaks ---------------------------------------------------------------------------- */
static const char *brk_type(kn__brk k) {
  switch (k) {
  case KN__BRK_ITEM: return "Call to `kn_item()`";
  case KN__BRK_BOOL: return "Data-dependent branching";
  case KN__BRK_EXPLICIT: return "Call to `kn_graph_break()`";
  case KN__BRK_PRINT: return "Call to `kn_print()`";
  case KN__BRK_UNSUPPORTED: return "Dynamic shape operator";
  case KN__BRK_AUTOGRAD: return "Unsupported Tensor.backward() call";
  case KN__BRK_REQUIRES_GRAD: return "Call to `kn_set_requires_grad()` on a traced tensor";
  case KN__BRK_HOST: return "Call to `kn_host_read()`";
  default: return "Unsupported operation";
  }
}

static const char *brk_hint(kn__brk k) {
  switch (k) {
  case KN__BRK_ITEM: return "Keep the value as a tensor (0-dim) and use tensor ops instead of kn_item().";
  case KN__BRK_BOOL: return "Compute both branches and select with tensor ops (kn_where) instead of branching in C.";
  case KN__BRK_EXPLICIT: return "Remove the `kn_graph_break()` call.";
  case KN__BRK_PRINT: return "Remove the kn_print() call, or print outside the compiled function.";
  case KN__BRK_UNSUPPORTED:
    return "Use an op with a fixed output shape (a mask with kn_where) or run it outside the compiled function.";
  case KN__BRK_AUTOGRAD:
    return "Call kn_backward() on the compiled function's result after the call to keep one graph.";
  case KN__BRK_REQUIRES_GRAD:
    return "Create the tensor outside the compiled function, or pass it in already requiring grad.";
  case KN__BRK_HOST:
    return "Return the value from the compiled function and read it after the call to keep one graph.";
  default: return "Run this part outside the compiled function.";
  }
}

/* The graph_breaks artifact, the dedup line and the trace artifact. */
static void report_break(kn__trace *tr, kn__brk k, const kn__opdef *op, const kn__srcframe *fr,
                         int n) {
  const kn__srcframe *at = n > 0 ? &fr[n - 1] : NULL;
  /* without a location, breaks are deduplicated per function and position */
  const char *file = at && at->file ? at->file : tr->f->frame.file;
  int line = at ? at->line : -tr->nseg;
  char site[600];
  site_text(at, site, sizeof site);
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "Graph break in user code at %s\nGraph Break Reason: %s\n  Explanation: ",
                site, brk_type(k));
  switch (k) {
  case KN__BRK_ITEM: kn__sb_puts(&sb, "kn_item() reads a tensor's data, which a traced graph does not have."); break;
  case KN__BRK_BOOL: kn__sb_puts(&sb, "A C condition depends on a tensor's value."); break;
  case KN__BRK_EXPLICIT: kn__sb_puts(&sb, "User-inserted graph break."); break;
  case KN__BRK_PRINT: kn__sb_puts(&sb, "Printing needs the tensor's value."); break;
  case KN__BRK_UNSUPPORTED:
    kn__sb_printf(&sb, "Operator `kiln.ops.%s`'s output shape depends on input Tensor data.",
                  op ? op->name : "?");
    break;
  case KN__BRK_AUTOGRAD:
    kn__sb_puts(&sb, "kn_backward() and kn_autograd_grad() run the autograd engine on real "
                     "tensors: they run between two graphs.");
    break;
  case KN__BRK_REQUIRES_GRAD:
    kn__sb_puts(&sb, "requires_grad changes how the ops that follow record autograd history.");
    break;
  case KN__BRK_HOST: kn__sb_puts(&sb, "The value is handed to C code on every call."); break;
  default: kn__sb_puts(&sb, "This operation cannot be captured."); break;
  }
  kn__sb_printf(&sb, "\n  Hint: %s", brk_hint(k));
  if (k == KN__BRK_UNSUPPORTED)
    kn__sb_printf(&sb, "\n  Developer debug context: dynamic shape operator: kiln.ops.%s",
                  op ? op->name : "?");
  kn__sb_puts(&sb, "\nUser code traceback:");
  if (n == 0) kn__sb_puts(&sb, "\n  <unknown>");
  for (int i = 0; i < n; i++) {
    const char *src = kn__srcloc_line(fr[i].file, fr[i].line);
    while (src && (*src == ' ' || *src == '\t')) src++;
    kn__sb_printf(&sb, "\n  File \"%s\", line %d, in %s\n    %s", fr[i].file ? fr[i].file : "?",
                  fr[i].line, fr[i].func ? fr[i].func : "?", src ? src : "");
  }
  if (!kn__sb_failed(&sb)) {
    if (kn__graph_break_first_at(file, line))
      KN_LOG_ARTIFACT(KN_ART_GRAPH_BREAKS, "%s", kn__sb_cstr(&sb));
    else
      KN_LOG(KN_LOG_DYNAMO, KN_DEBUG, "Unsupported break in user code at %s (details suppressed)",
             site);
    if (kn__trace_enabled())
      (void)kn__trace_artifact("dynamo_graph_break_reason", "string", kn__sb_cstr(&sb), SIZE_MAX,
                               NULL);
  }
  kn__sb_fini(&sb);
}

/* Re-describe the current segment's inputs after the restart. */
static void redescribe(kn__trace *tr) {
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  if (s->quiet || !kn__trace_enabled()) return;
  tr->ndescribed = 0;
  for (int i = 0; i < s->nin && s->g; i++) {
    const kn__gnode *ph = kn__graph_input(s->g, i);
    if (ph) kn__trace_describe(tr, tr->slot_real[s->in_slot[i]], ph->source, false);
  }
}

/* A data-dependent op call that ends a segment (KN__BRK_UNSUPPORTED): the
** call and, after the break, the fake standing for its output (owned). */
typedef struct ddcall {
  const kn__call *c;
  int slot[KN__MAX_ARGS];
  kn_tensor *fake_out;
} ddcall;

/* Slots of the call's tensor arguments (carried to the eager op). */
static kn_status dd_slots(kn__trace *tr, ddcall *dd) {
  const kn__call *c = dd->c;
  for (int i = 0; i < c->nargs; i++) {
    dd->slot[i] = -1;
    switch (c->args[i].kind) {
    case KN__A_TENSOR:
      if (c->args[i].u.t) {
        kn_status st = kn__trace_slot_of(tr, c->args[i].u.t, &dd->slot[i]);
        if (st != KN_OK) return st;
      }
      break;
    case KN__A_NONE: case KN__A_INT: case KN__A_DOUBLE: case KN__A_BOOL: case KN__A_SCALAR:
    case KN__A_DTYPE:
      break;
    default:
      return kn__error(KN_EUNSUPPORTED, "%s: a data-dependent op with list or generator "
                       "arguments cannot be traced", c->op->name);
    }
  }
  return KN_OK;
}

static void dd_store(const ddcall *dd, kn__segment *seg) {
  const kn__call *c = dd->c;
  seg->brk_op = c->op;
  seg->brk_nargs = c->nargs;
  for (int i = 0; i < c->nargs; i++) {
    seg->brk_args[i] = c->args[i];
    seg->brk_arg_slot[i] = dd->slot[i];
    if (dd->slot[i] >= 0) seg->brk_args[i].u.t = NULL;
  }
  seg->brk_out_slot = -1;
}

static const char *c_name(const ddcall *dd) { return dd->c->op->name; }

/* After the segment ran: run the op eagerly on the real values into a new
** slot and bind a fake to it (an input of the next segment). */
static kn_status dd_run(kn__trace *tr, ddcall *dd, kn__segment *seg, bool quiet, double *ans) {
  int oslot = kn__trace_new_slot(tr, NULL);
  if (oslot < 0) return kn_last_status();
  if (!quiet) seg->brk_out_slot = oslot;
  else if (seg->brk_out_slot != oslot)
    return kn__error(KN_ESTATE, "the compiled function did not trace the same way twice "
                                "(a kiln function must be pure: see docs/DYNAMO.md)");
  kn_status st = KN_OK;
  if (quiet && tr->partial) { /* the cached run computed it already */
    kn__trace_take_partial(tr, &oslot, 1);
    if (!tr->slot_real[oslot]) return kn__error(KN_EINTERNAL, "%s: no value was kept", c_name(dd));
    *ans = tr->slot_real[oslot]->ndim > 0 ? (double)tr->slot_real[oslot]->sizes[0] : 0;
  } else {
    st = kn__segment_run_op(seg, tr->slot_real, ans);
  }
  if (st != KN_OK) return st;
  const kn_tensor *r = tr->slot_real[oslot];
  kn_tensor *fk = kn__empty(r->ndim, r->sizes, r->dtype, KN_META);
  if (!fk) return kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
  fk->is_fake = true;
  fk->device = r->device;
  st = kn__tbind_set(tr, fk, tr->nseg - 1, NULL, 0, oslot);
  if (st != KN_OK) {
    kn_release(fk);
    return st;
  }
  dd->fake_out = fk;
  return KN_OK;
}

/* A break: what ends the segment, and what it acts on. */
typedef struct brkreq {
  kn__brk k;
  kn_tensor *t;                 /* the queried value, or NULL */
  ddcall *dd;                   /* KN__BRK_UNSUPPORTED */
  const kn__autograd_call *agc; /* KN__BRK_AUTOGRAD */
  kn__agcall ag;                /* its slots */
  bool flag;                    /* KN__BRK_REQUIRES_GRAD */
  void (*host_fn)(double, void *);
  void *host_ud;
} brkreq;

/* Slots of an autograd call's tensors (before the segment ends). */
static kn_status ag_slots(kn__trace *tr, brkreq *rq) {
  const kn__autograd_call *c = rq->agc;
  kn__agcall *a = &rq->ag;
  *a = (kn__agcall){.n = c->n, .m = c->m, .retain_graph = c->retain_graph,
                    .create_graph = c->create_graph, .allow_unused = c->allow_unused};
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < c->n; i++) {
    kn_tensor *g = c->grad_outputs ? c->grad_outputs[i] : NULL;
    a->gout_slot[i] = -1;
    if (!c->outputs[i]) return kn__error(KN_EINVAL, "backward: output %d is NULL", i);
    st = kn__trace_slot_of(tr, c->outputs[i], &a->out_slot[i]);
    if (st == KN_OK && g) st = kn__trace_slot_of(tr, g, &a->gout_slot[i]);
  }
  for (int j = 0; st == KN_OK && j < c->m; j++) {
    if (!c->inputs[j]) return kn__error(KN_EINVAL, "grad: input %d is NULL", j);
    st = kn__trace_slot_of(tr, c->inputs[j], &a->in_slot[j]);
  }
  return st;
}

static kn_status act_store(const brkreq *rq, kn__segment *seg) {
  seg->brk_flag = rq->flag;
  seg->host_fn = rq->host_fn;
  seg->host_ud = rq->host_ud;
  if (rq->k != KN__BRK_AUTOGRAD) return KN_OK;
  seg->ag = malloc(sizeof *seg->ag);
  if (!seg->ag) return kn__oom();
  *seg->ag = rq->ag;
  return KN_OK;
}

/* A fake standing for real value slot_real[slot] (bound to it; the trace
** keeps one reference, the other is returned). */
static kn_status bind_result(kn__trace *tr, int slot, kn_tensor **out) {
  const kn_tensor *r = tr->slot_real[slot];
  *out = NULL;
  if (!r) return KN_OK; /* an unused input's gradient (allow_unused) */
  kn_tensor *fk = kn__empty(r->ndim, r->sizes, r->dtype, KN_META);
  if (!fk) return kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
  fk->is_fake = true;
  fk->device = r->device;
  fk->requires_grad = r->requires_grad;
  kn_status st = kn__tbind_set(tr, fk, tr->nseg - 1, NULL, 0, slot);
  if (st != KN_OK) {
    kn_release(fk);
    return st;
  }
  *out = fk;
  return KN_OK;
}

/* After the segment ran: the break's action on the real values (once: a
** quiet replay with the cached run's values does not repeat it). */
static kn_status act_run(kn__trace *tr, brkreq *rq, kn__segment *seg, bool quiet) {
  if (quiet && seg->brk != rq->k)
    return kn__error(KN_ESTATE, "the compiled function did not trace the same way twice "
                                "(a kiln function must be pure: see docs/DYNAMO.md)");
  int m = rq->k == KN__BRK_AUTOGRAD ? rq->ag.m : 0;
  for (int j = 0; j < m; j++) {
    int k = kn__trace_new_slot(tr, NULL);
    if (k < 0) return kn_last_status();
    if (quiet && seg->ag->res_slot[j] != k)
      return kn__error(KN_ESTATE, "the compiled function did not trace the same way twice "
                                  "(a kiln function must be pure: see docs/DYNAMO.md)");
    rq->ag.res_slot[j] = seg->ag->res_slot[j] = k;
  }
  kn_status st = KN_OK;
  if (quiet && tr->partial) kn__trace_take_partial(tr, rq->ag.res_slot, m);
  else st = kn__segment_run_action(seg, tr->slot_real);
  for (int j = 0; st == KN_OK && j < m; j++) {
    kn_tensor *fk = NULL;
    st = bind_result(tr, rq->ag.res_slot[j], &fk);
    rq->agc->out_grads[j] = fk ? kn__autorelease(fk) : NULL;
  }
  if (st == KN_OK && rq->k == KN__BRK_REQUIRES_GRAD) rq->t->requires_grad = rq->flag;
  return st;
}

/* A break reached while the rest of the call runs eagerly (eager_rest.c):
** what it asks, answered from the real values. */
static kn_status eager_break(kn__trace *tr, brkreq *rq, double *ans) {
  kn_tensor *r = rq->t ? kn__trace_real_of(tr, rq->t) : NULL;
  double v = 0;
  *ans = 0;
  if (rq->t && !r) return kn_last_status();
  switch (rq->k) {
  case KN__BRK_ITEM: case KN__BRK_BOOL: case KN__BRK_HOST: {
    kn_status st = kn_item_double(r, &v);
    if (st != KN_OK) return st;
    *ans = rq->k == KN__BRK_BOOL ? (v != 0) : v;
    if (rq->k == KN__BRK_HOST) rq->host_fn(v, rq->host_ud);
    return KN_OK;
  }
  case KN__BRK_PRINT: return kn_print_tensor(r, NULL);
  case KN__BRK_REQUIRES_GRAD: {
    kn_status st = kn_set_requires_grad(r, rq->flag);
    if (st == KN_OK) rq->t->requires_grad = rq->flag;
    return st;
  }
  default: return KN_OK; /* kn_graph_break(); data-dependent ops and autograd calls never
                          ** get here (kn__trace_eager_call, hook_autograd) */
  }
}

/* Leaving the known tree past the cache limit: no new segment; the rest of
** the call runs eagerly. */
static bool go_eager(kn__trace *tr, bool quiet) {
  if (!quiet || tr->cur_known || !tr->eager_rest) return false;
  tr->eager = true;
  return true;
}

/* Start the segment that resumes after the break at `at` (NULL: unknown). */
static kn_status next_segment(kn__trace *tr, bool quiet, const kn__srcframe *at) {
  kn_status st = KN_OK;
  if (quiet && !tr->cur_known) /* leaving the known tree: fresh slots from here on */
    while (tr->nslots < tr->into->nslots && st == KN_OK)
      st = kn__trace_new_slot(tr, NULL) < 0 ? kn_last_status() : KN_OK;
  kn__frame *rf = st == KN_OK ? resume_frame(tr, at) : NULL;
  if (st == KN_OK && !rf) st = kn__oom();
  return st == KN_OK ? kn__tseg_start(tr, rf) : st;
}

/* End the current segment at a break; returns the answer through *ans. On
** error the trace stops. */
static kn_status do_break_x(kn__trace *tr, brkreq *rq, double *ans) {
  if (tr->eager) return eager_break(tr, rq, ans);
  kn__brk k = rq->k;
  kn_tensor *t = rq->t;
  ddcall *dd = rq->dd;
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  const char *api = NULL;
  int n = kn__trace_user_stack(tr, fr, KN__SRC_MAX_FRAMES, &api);
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  if (tr->export_mode || tr->f->opts.fullgraph) {
    const kn__srcframe *at = n > 0 ? &fr[n - 1] : NULL;
    char msg[1024], site[600];
    site_text(at, site, sizeof site);
    snprintf(msg, sizeof msg, "graph break in user code at %s (fullgraph=true): %s%s%s", site,
             brk_type(k), dd ? ": dynamic shape operator: kiln.ops." : "",
             dd ? dd->c->op->name : "");
    return kn__trace_refuse(tr, at, msg);
  }
  if (!s->quiet) {
    if (n > 0) {
      char nm[32];
      snprintf(nm, sizeof nm, "%s", k == KN__BRK_EXPLICIT ? "graph_break" : "break");
      kn__trace_log_call(tr, nm, &fr[n - 1], n - 1, api);
    }
    report_break(tr, k, dd ? dd->c->op : NULL, fr, n);
    kn__explain_note_break(brk_type(k), dd ? dd->c->op->name : NULL, fr, n);
    kn__fc_restart(&s->fc, brk_type(k));
    redescribe(tr);
  }
  int slot = -1;
  kn_status st = t ? kn__trace_slot_of(tr, t, &slot) : KN_OK;
  if (st == KN_OK && dd) st = dd_slots(tr, dd);
  if (st == KN_OK && rq->agc) st = ag_slots(tr, rq);
  if (st == KN_OK) st = kn__trace_carry_live(tr);
  kn__mode_pop(&tr->mode);
  kn__segment *seg = NULL;
  if (st == KN_OK) st = kn__tseg_finish(tr, k, slot, &seg);
  if (st == KN_OK && dd && !s->quiet) dd_store(dd, seg);
  if (st == KN_OK && !s->quiet) st = act_store(rq, seg);
  if (st == KN_OK) end_seg(tr, NULL);
  if (st == KN_OK && k == KN__BRK_PRINT && !(s->quiet && tr->partial))
    st = kn_print_tensor(tr->slot_real[slot], NULL);
  double a = 0;
  if (st == KN_OK && dd) st = dd_run(tr, dd, seg, s->quiet, &a);
  if (st == KN_OK && k >= KN__BRK_AUTOGRAD) st = act_run(tr, rq, seg, s->quiet);
  if (st == KN_OK && t && (k == KN__BRK_ITEM || k == KN__BRK_BOOL)) {
    double v = 0;
    st = kn_item_double(tr->slot_real[slot], &v);
    a = k == KN__BRK_BOOL ? (v != 0) : v;
  }
  bool quiet = s->quiet;
  if (st == KN_OK) st = link_segment(tr, seg, quiet);
  else if (seg && !quiet) kn__segment_free(seg);
  if (st == KN_OK) {
    tr->parent = seg;
    tr->parent_answer = a;
    /* the run that missed stopped at miss_seg: what follows it is traced
    ** afresh, even a branch another thread added there since */
    tr->cur_known = quiet && seg != tr->miss_seg ? known_child(seg, a) : NULL;
    if (!go_eager(tr, quiet)) st = next_segment(tr, quiet, n > 0 ? &fr[n - 1] : NULL);
  }
  kn_status pst = kn__mode_push(&tr->mode);
  if (st == KN_OK) st = pst;
  if (st != KN_OK) {
    tr->stop = true;
    if (!tr->err) {
      tr->err = st;
      tr->err_msg = strdup(kn_last_error());
    }
    return st;
  }
  *ans = a;
  return KN_OK;
}

static kn_status do_break(kn__trace *tr, kn__brk k, kn_tensor *t, ddcall *dd, double *ans) {
  brkreq rq = {.k = k, .t = t, .dd = dd};
  return do_break_x(tr, &rq, ans);
}

static bool traced(kn__trace **trp, kn_tensor *t) {
  kn__trace *tr = kn__trace_current();
  *trp = tr;
  return tr && (!t || kn__tbind_of(tr, t));
}

double kn_item(kn_tensor *t) {
  kn__trace *tr;
  double v = NAN;
  if (!t) {
    kn__error(KN_EINVAL, "kn_item: expected a tensor, got NULL");
    return NAN;
  }
  if (KN__HANDLES_CHECKED() && kn__handle_check(t, "kn_item", "the tensor")) return NAN;
  if (!traced(&tr, t)) return kn_item_double(t, &v) == KN_OK ? v : NAN;
  if (tr->stop || do_break(tr, KN__BRK_ITEM, t, NULL, &v) != KN_OK) return NAN;
  return v;
}

bool kn_is_true(kn_tensor *t) {
  kn__trace *tr;
  double v = 0;
  if (!t) {
    kn__error(KN_EINVAL, "kn_is_true: expected a tensor, got NULL");
    return false;
  }
  if (KN__HANDLES_CHECKED() && kn__handle_check(t, "kn_is_true", "the tensor")) return false;
  if (!traced(&tr, t)) return kn_item_double(t, &v) == KN_OK && v != 0;
  if (tr->stop || do_break(tr, KN__BRK_BOOL, t, NULL, &v) != KN_OK) return false;
  return v != 0;
}

void kn_graph_break(void) {
  kn__trace *tr = kn__trace_current();
  double v;
  if (tr && !tr->stop) (void)do_break(tr, KN__BRK_EXPLICIT, NULL, NULL, &v);
}

kn_status kn_print(kn_tensor *t) {
  kn__trace *tr;
  double v;
  if (!t) return kn__error(KN_EINVAL, "kn_print: expected a tensor, got NULL");
  if (KN__HANDLES_CHECKED() && kn__handle_check(t, "kn_print", "the tensor"))
    return kn_last_status();
  if (!traced(&tr, t)) return kn_print_tensor(t, NULL);
  if (tr->stop) return kn__error(KN_ESTATE, "kn_print: tracing stopped after an earlier error");
  return do_break(tr, KN__BRK_PRINT, t, NULL, &v);
}

kn_status kn_host_read(kn_tensor *t, void (*fn)(double value, void *ud), void *ud) {
  kn__trace *tr;
  double v = 0;
  if (!t) return kn__error(KN_EINVAL, "kn_host_read: expected a tensor, got NULL");
  if (!fn) return kn__error(KN_EINVAL, "kn_host_read: the callback is NULL");
  if (KN__HANDLES_CHECKED() && kn__handle_check(t, "kn_host_read", "the tensor"))
    return kn_last_status();
  if (!traced(&tr, t)) {
    kn_status st = kn_item_double(t, &v);
    if (st == KN_OK) fn(v, ud);
    return st;
  }
  if (tr->stop) return kn__error(KN_ESTATE, "kn_host_read: tracing stopped after an earlier error");
  if (kn_numel(t) != 1)
    return kn__error(KN_EINVAL, "kn_host_read: a Tensor with %lld elements cannot be converted "
                     "to Scalar", (long long)kn_numel(t));
  brkreq rq = {.k = KN__BRK_HOST, .t = t, .host_fn = fn, .host_ud = ud};
  return do_break_x(tr, &rq, &v);
}

/* ---- public entry points reached with a traced tensor (kn__fake_hooks) ----------------- */
static kn__trace *trace_of(const kn_tensor *t) {
  kn__trace *tr = kn__trace_current();
  return tr && kn__tbind_of(tr, t) ? tr : NULL;
}

static kn_status stopped(const char *api) {
  return kn__error(KN_ESTATE, "%s: tracing stopped after an earlier error", api);
}

static kn_status hook_item(const kn_tensor *t, double *out) {
  kn__trace *tr = trace_of(t);
  if (!tr) return KN__FAKE_PASS;
  if (tr->stop) return stopped("kn_item_double");
  if (kn_numel(t) != 1)
    return kn__error(KN_EINVAL, "a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)kn_numel(t));
  return do_break(tr, KN__BRK_ITEM, (kn_tensor *)t, NULL, out);
}

static kn_status hook_print(const kn_tensor *t) {
  kn__trace *tr = trace_of(t);
  double v;
  if (!tr) return KN__FAKE_PASS;
  if (tr->stop) return stopped("kn_print_tensor");
  return do_break(tr, KN__BRK_PRINT, (kn_tensor *)t, NULL, &v);
}

/* Public calls that fill new tensors from C memory or a file (docs/DYNAMO.md). */
static bool fills_tensors(const char *api) {
  static const char *const names[] = {"kn_from_array", "kn_from_floats", "kn_from_doubles",
                                      "kn_from_ints", "kn_load", "kn_load_csv",
                                      "kn_loader_next", NULL};
  for (int i = 0; names[i]; i++)
    if (!strcmp(api, names[i])) return true;
  return false;
}

/* Public calls that read a traced tensor's memory (docs/DYNAMO.md). */
static bool reads_data(const char *api) { return !strcmp(api, "kn_data") || !strcmp(api, "kn_get"); }

/* An entry point that cannot work on a traced value: the trace stops and the
** compiled call fails with this error. */
static kn_status hook_refuse(const kn_tensor *t, const char *api) {
  kn__trace *tr = trace_of(t);
  if (!tr) return KN__FAKE_PASS;
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  int n = kn__trace_user_stack(tr, fr, KN__SRC_MAX_FRAMES, NULL);
  char site[600];
  site_text(n > 0 ? &fr[n - 1] : NULL, site, sizeof site);
  char msg[1300];
  bool fills = fills_tensors(api);
  snprintf(msg, sizeof msg,
           fills ? "%s%s at %s: inside compiled function '%s' tensors are traced stand-ins "
                   "without data, so none can be filled from C memory or a file; create the "
                   "tensor before the compiled call and use it inside (a constant of the graph) "
                   "or pass it as an argument (docs/DYNAMO.md, purity rule)"
                 : "%s%s at %s: inside compiled function '%s' tensors are traced stand-ins "
                   "without data or gradients; read a value with kn_item() or kn_host_read(), "
                   "print with kn_print(), or use the compiled call's results after it returns "
                   "(docs/DYNAMO.md, purity rule)",
           fills || reads_data(api) ? "Cannot access data pointer of Tensor (a traced stand-in): "
                                    : "",
           api, site, tr->f->frame.name);
  return kn__trace_refuse(tr, n > 0 ? &fr[n - 1] : NULL, msg);
}

kn_status kn__trace_refuse(kn__trace *tr, const kn__srcframe *at, const char *msg) {
  if (!tr->err) {
    tr->err = KN_EUNSUPPORTED;
    tr->err_msg = strdup(msg);
    if (at) tr->err_frame = *at;
  }
  tr->stop = true;
  return kn__error(KN_EUNSUPPORTED, "%s", msg);
}

static kn_status hook_autograd(const kn__autograd_call *c) {
  kn__trace *tr = NULL;
  for (int i = 0; i < c->n && !tr; i++) tr = trace_of(c->outputs[i]);
  for (int i = 0; c->grad_outputs && i < c->n && !tr; i++)
    if (c->grad_outputs[i]) tr = trace_of(c->grad_outputs[i]);
  for (int j = 0; j < c->m && !tr; j++) tr = trace_of(c->inputs[j]);
  if (!tr) return KN__FAKE_PASS;
  const char *api = c->m ? "kn_autograd_grad" : "kn_backward";
  if (tr->stop) return stopped(api);
  if (tr->eager) return kn__trace_eager_autograd(tr, c); /* past the cache limit */
  if (c->n > KN__AG_MAX || c->m > KN__AG_MAX)
    return hook_refuse(c->outputs[0], c->n > KN__AG_MAX ? "kn_autograd_grad with more than 8 outputs"
                                                        : "kn_autograd_grad with more than 8 inputs");
  brkreq rq = {.k = KN__BRK_AUTOGRAD, .agc = c};
  double v;
  return do_break_x(tr, &rq, &v);
}

static kn_status hook_set_requires_grad(kn_tensor *t, bool flag) {
  kn__trace *tr = trace_of(t);
  if (!tr || t->requires_grad == flag || t->grad_fn) return KN__FAKE_PASS;
  if (tr->stop) return stopped("kn_set_requires_grad");
  if (flag && !kn_dtype_is_floating(t->dtype)) return KN__FAKE_PASS; /* the eager error */
  if (flag && !tr->eager && kn__trace_capture_requires_grad(tr, t))
    return KN__FAKE_PASS; /* flag the fake too */
  brkreq rq = {.k = KN__BRK_REQUIRES_GRAD, .t = t, .flag = flag};
  double v;
  return do_break_x(tr, &rq, &v);
}

static const kn__fake_hooks hooks = {hook_item, hook_print, hook_refuse, hook_autograd,
                                     hook_set_requires_grad};

kn_status kn__trace_data_dep_break(kn__trace *tr, const kn__call *c, kn__outs *out) {
  if (tr->stop)
    return kn__error(KN_ESTATE, "%s: tracing stopped after an earlier error", c->op->name);
  ddcall dd = {.c = c};
  double a;
  kn_status st = do_break(tr, KN__BRK_UNSUPPORTED, NULL, &dd, &a);
  if (st != KN_OK) {
    kn_release(dd.fake_out);
    return st;
  }
  if (!kn__outs_push(out, dd.fake_out)) return kn__oom();
  return KN_OK;
}

/* ---- one trace ------------------------------------------------------------------------- */
static kn_status result_spec(kn__trace *tr, kn_value v, kn__rspec *r) {
  memset(r, 0, sizeof *r);
  r->kind = v.kind;
  r->konst = v;
  if (v.kind == KN_VTENSOR) {
    if (!v.u.t)
      return tr->err ? tr->err : kn__error(KN_EINVAL, "the compiled function returned a NULL tensor");
    r->konst.u.t = NULL;
    return kn__trace_slot_of(tr, v.u.t, &r->slot);
  }
  if (v.kind == KN_VMODULE)
    return kn__error(KN_EUNSUPPORTED, "a compiled function cannot return a module");
  if (v.kind != KN_VTUPLE && v.kind != KN_VLIST) return KN_OK;
  r->konst.u.items = NULL;
  r->items = calloc((size_t)(v.n ? v.n : 1), sizeof *r->items);
  if (!r->items) return kn__oom();
  r->n = v.n;
  for (int i = 0; i < v.n; i++) {
    kn_status st = result_spec(tr, v.u.items[i], &r->items[i]);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

static bool has_slot(const int *v, int n, int slot) {
  for (int i = 0; i < n; i++)
    if (v[i] == slot) return true;
  return false;
}

/* A tensor a resumed segment returns that an earlier segment computed and
** this one never read (no placeholder: nothing reads it) is described as
** this segment's input, once, as PyTorch describes a local that a resume
** frame returns (the fake it makes for it is then pruned from the graph). */
static void describe_returned(kn__trace *tr, const kn__rspec *r, int **seen, int *nseen) {
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  for (int i = 0; i < r->n; i++) describe_returned(tr, &r->items[i], seen, nseen);
  if (r->kind != KN_VTENSOR || has_slot(s->in_slot, s->nin, r->slot) ||
      has_slot(s->out_slot, s->nout, r->slot) || has_slot(*seen, *nseen, r->slot))
    return;
  int *ns = realloc(*seen, sizeof *ns * (size_t)(*nseen + 1));
  if (!ns) return; /* a record less; the trace stays valid */
  *seen = ns;
  ns[(*nseen)++] = r->slot;
  char src[64];
  snprintf(src, sizeof src, "L['___stack%d']", s->nstack++);
  kn__trace_describe(tr, tr->slot_real[r->slot], src, false);
}

static void describe_returned_values(kn__trace *tr, const kn__rspec *r) {
  if (tr->nseg < 2 || tr->segs[tr->nseg - 1].quiet || !kn__trace_enabled()) return;
  int *seen = NULL, nseen = 0;
  describe_returned(tr, r, &seen, &nseen);
  free(seen);
}

static void rspec_free(kn__rspec *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) rspec_free(&r->items[i]);
  free(r->items);
}

static kn_status real_result(const kn__rspec *r, kn__trace *tr, kn_value *out) {
  *out = r->konst;
  out->kind = r->kind;
  if (r->kind == KN_VTENSOR) {
    out->u.t = kn_retain(tr->slot_real[r->slot]);
    return KN_OK;
  }
  if (r->kind != KN_VTUPLE && r->kind != KN_VLIST) return KN_OK;
  kn_value *items = calloc((size_t)(r->n ? r->n : 1), sizeof *items);
  if (!items) return kn__oom();
  for (int i = 0; i < r->n; i++) (void)real_result(&r->items[i], tr, &items[i]);
  out->n = r->n;
  out->u.items = items;
  return KN_OK;
}

static void trace_free(kn__trace *tr) {
  for (int i = 0; i < tr->nseg; i++) {
    kn__graph_free(tr->segs[i].g);
    free(tr->segs[i].in_slot);
    free(tr->segs[i].out_slot);
    free(tr->segs[i].out_ref);
  }
  free(tr->segs);
  kn__trace_free_fargs(tr);
  for (int i = 0; i < tr->nslots; i++) kn_release(tr->slot_real[i]);
  free(tr->slot_real);
  for (int i = 0; i < tr->nfakes; i++) {
    kn_tensor *t = tr->fakes[i];
    if (t->mode_data_free) t->mode_data_free(t->mode_data);
    t->mode_data = NULL;
    t->mode_data_free = NULL;
    kn_release(t);
  }
  free(tr->fakes);
  for (int i = 0; i < tr->nroot; i++) kn__src_fini(&tr->root_src[i]);
  free(tr->root_src);
  free(tr->root_first_node);
  kn__trace_lift_fini(tr);
  kn__guards_fini(&tr->guards);
  if (tr->env) kn__gsrc_install(tr, false);
  kn__shape_env_free(tr->env);
  for (int i = 0; i < tr->ngsrc; i++) kn__gsrc_fini(&tr->gsrc[i]);
  free(tr->gsrc);
  free(tr->err_msg);
  free(tr->trace_src_last);
  kn__values_free(tr->partial, tr->npartial);
  free(tr);
}

const char *kn__exc_type(kn_status st, const char *msg, const char **body) {
  static const char bcf[] = "BackendCompilerFailed: ";
  *body = msg;
  if (!strncmp(msg, bcf, sizeof bcf - 1)) {
    *body = msg + sizeof bcf - 1;
    return "BackendCompilerFailed";
  }
  return kn_status_name(st);
}

/* The failed compile's records: dynamo_error artifact, metrics with the
** failure, and the error message. */
static kn_status fail(kn__trace *tr) {
  kn_status st = tr->err ? tr->err : kn_last_status();
  if (st == KN_OK) st = KN_EINTERNAL;
  const char *msg = tr->err_msg ? tr->err_msg : kn_last_error();
  char *copy = strdup(msg ? msg : "unknown error");
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  const char *body = NULL;
  const char *ftype = kn__exc_type(st, copy ? copy : "", &body); /* "shape_error" */
  if (!s->quiet && kn__trace_enabled()) {
    kn__sb sb = KN__SB_INIT;
    kn__sb_printf(&sb, "Traceback (most recent call last):\nkiln.%s: %s\n", ftype, body);
    (void)kn__trace_artifact("dynamo_error", "string", kn__sb_cstr(&sb), SIZE_MAX, NULL);
    kn__sb_fini(&sb);
  }
  kn__fc_info info = {.cache_size = tr->f->nentries,
                      .suppress_errors = tr->f->opts.suppress_errors,
                      .fail_type = ftype,
                      .fail_reason = copy ? copy : "",
                      .fail_file = tr->err_frame.file,
                      .fail_line = tr->err_frame.line};
  end_seg(tr, &info);
  kn__error(st, "%s", copy ? copy : "unknown error");
  free(copy);
  return st;
}

/* A branch traced into an existing entry may have relied on shape guards the
** entry's first trace did not need (its env has been moved into the entry,
** so the guard set's borrowed env stays valid). */
static kn_status keep_branch_guards(kn__trace *tr, kn__entry *into) {
  if (tr->guards.nshape == 0 && !kn__trace_lifted_fresh(tr)) return KN_OK;
  kn__guards *ng = realloc(into->branch_guards, sizeof *ng * (size_t)(into->nbranch_guards + 1));
  if (!ng) return kn__oom();
  into->branch_guards = ng;
  into->branch_guards[into->nbranch_guards++] = tr->guards;
  kn__guards_init(&tr->guards);
  return KN_OK;
}

/* The function returned: its last segment is finished (compiled, run) and
** linked, and *result gets the real values of what it returned (ret). */
static kn_status finish_traced(kn__trace *tr, kn_status st, kn_value ret, bool started,
                               kn_value *result) {
  kn__rspec *spec = calloc(1, sizeof *spec);
  if (st == KN_OK && !spec) st = kn__oom();
  if (st == KN_OK) st = result_spec(tr, ret, spec);
  if (st == KN_OK) describe_returned_values(tr, spec);
  kn__segment *seg = NULL;
  if (st == KN_OK) st = kn__tseg_finish(tr, KN__BRK_NONE, -1, &seg);
  if (st == KN_OK) {
    bool quiet = tr->segs[tr->nseg - 1].quiet;
    if (!quiet) {
      seg->result = spec;
      spec = NULL;
    }
    st = link_segment(tr, seg, quiet);
    if (st != KN_OK && !quiet) kn__segment_free(seg);
  }
  if (st == KN_OK) end_seg(tr, NULL);
  else if (started) st = fail(tr);
  if (st == KN_OK) st = real_result(seg->result ? seg->result : spec, tr, result);
  rspec_free(spec);
  free(spec);
  return st;
}

/* The rest of the call ran eagerly (eager_rest.c): no segment to finish (the
** last one, a quiet replay, ended at the break); *ret (the function's
** result) is moved to *result with its stand-ins replaced by real values.
** An error is the call's, as eagerly: nothing was being compiled. */
static kn_status finish_eager(kn__trace *tr, kn_status st, kn_value *ret, kn_value *result) {
  if (st != KN_OK) return tr->err_msg ? kn__error(st, "%s", tr->err_msg) : st;
  st = kn__trace_eager_result(tr, ret);
  if (st != KN_OK) return st;
  *result = *ret;
  *ret = kn_vnone();
  return KN_OK;
}

/* A compiled function's autocast regions must pair up: its graphs hold the
** casts, but a region left open (or one of the caller's closed) would not
** be replayed by later calls. */
static kn_status unpaired_autocast(const kn_compiled *f, int depth_before) {
  return kn__error(KN_EUNSUPPORTED, "%s: kn_autocast_begin/kn_autocast_end calls inside a "
                   "compiled function must pair up (open autocast regions went from %d to %d); "
                   "open the region around the call instead", f->frame.name, depth_before,
                   kn__autocast_state.depth);
}

kn_status kn__trace_call(kn_compiled *f, const kn_value *args, int nargs, kn__entry *into,
                         kn__branch_miss *miss, int flags, const kn__recompile_note *note,
                         kn__entry **out_entry, kn_value *result) {
  *out_entry = NULL;
  *result = kn_vnone();
  kn__set_fake_hooks(&hooks);
  kn__trace *tr = calloc(1, sizeof *tr);
  if (!tr) {
    if (miss) kn__values_free(miss->vals, miss->nvals);
    return kn__oom();
  }
  tr->partial = miss && into ? miss->vals : NULL;
  tr->npartial = tr->partial ? miss->nvals : 0;
  tr->miss_seg = miss && into ? miss->seg : NULL;
  if (miss && !into) kn__values_free(miss->vals, miss->nvals);
  tr->exporting = (flags & KN__TRACE_EXPORT) != 0;
  tr->eager_rest = into && miss && (flags & KN__TRACE_EAGER_REST);
  tr->note = note;
  tr->f = f;
  tr->args = args;
  tr->nargs = nargs;
  tr->into = into;
  tr->cur_known = into ? into->root : NULL;
  tr->env = kn__shape_env_new();
  static atomic_int describer; /* process-wide: traces run in several threads */
  tr->describer_id = atomic_fetch_add(&describer, 1);
  kn__guards_init(&tr->guards);
  kn__trace_mode_init(tr);
  if (!tr->env) {
    free(tr);
    return kn__oom();
  }
  kn__shape_env *prev_env = kn__shape_env_set_current(tr->env);
  bool caller_grad = kn_is_grad_enabled();
  kn__gsrc_install(tr, true);
  kn_status st = kn__tseg_start(tr, &f->frame);
  bool started = st == KN_OK;
  if (st == KN_OK) st = kn__trace_fakify(tr);
  kn_value ret = kn_vnone();
  size_t mark;
  kn__tuple_pool_mark(&mark);
  if (st == KN_OK) st = kn__mode_push(&tr->mode);
  if (st == KN_OK) {
    kn__trace_set_current(tr);
    int ac_depth = kn__autocast_state.depth;
    kn_status ust = kn__invoke_user(f, tr->fargs, nargs, &ret);
    kn__trace_set_current(NULL);
    kn__mode_pop(&tr->mode);
    if (ust == KN_OK && kn__autocast_state.depth != ac_depth)
      ust = unpaired_autocast(f, ac_depth);
    if (tr->err == KN_OK && ust != KN_OK) {
      tr->err = ust;
      tr->err_msg = strdup(kn_last_error());
    }
    st = tr->err;
  }
  kn__module_set_subst(NULL, NULL);
  if (tr->eager) st = finish_eager(tr, st, &ret, result);
  else st = finish_traced(tr, st, ret, started, result);
  kn_value_release(ret);
  kn__tuple_pool_release(mark);
  kn__gsrc_install(tr, false); /* the env outlives the trace */
  kn__shape_env_set_current(prev_env);
  if (st == KN_OK && !into) {
    kn__entry *e = calloc(1, sizeof *e);
    if (!e) {
      st = kn__oom();
      kn__segment_free(tr->root_seg);
    } else {
      if (kn__trace_finish_guards(tr) != KN_OK) st = kn_last_status();
      e->guards = tr->guards;
      kn__guards_init(&tr->guards);
      e->env = tr->env;
      tr->env = NULL;
      e->root = tr->root_seg;
      e->nslots = tr->nslots;
      e->nroot_inputs = tr->nroot;
      e->root_src = tr->root_src;
      tr->root_src = NULL;
      tr->nroot = 0;
      if (st == KN_OK) st = kn__trace_lifted_to_entry(tr, e);
      e->cid = e->root->cid;
      if (st == KN_OK) *out_entry = e;
      else kn__entry_free(e); /* nobody else holds it */
    }
  } else if (into && !tr->eager_rest) {
    if (tr->nslots > into->nslots) into->nslots = tr->nslots;
    /* the branch relied on its shape guards: they are checked at the entry
    ** (also after a failed trace: segments linked before the error stay) */
    /* (the replayed root graph is freed: comments use the function's line) */
    for (int i = 0; i < tr->nroot; i++) tr->root_first_node[i] = NULL;
    kn_status gst = kn__trace_finish_guards(tr);
    /* graphs linked into the tree refer to this trace's symbols */
    kn__shape_env **ne = realloc(into->branch_envs, sizeof *ne * (size_t)(into->nbranch_envs + 1));
    if (ne) {
      into->branch_envs = ne;
      into->branch_envs[into->nbranch_envs++] = tr->env;
      tr->env = NULL;
      /* guards first: they must be kept while the lifted inputs are fresh */
      if (gst == KN_OK) gst = keep_branch_guards(tr, into);
      if (gst == KN_OK) gst = kn__trace_lifted_to_entry(tr, into);
      if (st == KN_OK) st = gst;
    } else if (st == KN_OK) {
      st = kn__oom();
    }
  } else if (!into && tr->root_seg) {
    kn__segment_free(tr->root_seg);
  }
  if (st != KN_OK) { /* the call did not happen: the caller's grad mode stays */
    kn_value_release(*result);
    *result = kn_vnone();
    kn_set_grad_enabled(caller_grad);
  }
  trace_free(tr);
  kn__symbolize_save(); /* the next process finds this trace's frames without libdw */
  return st;
}
