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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/tracer.h"
#include "logging/log.h"
#include "tensor/tensor.h"
#include "trace/events.h"
#include "trace/trace.h"


/* ---- guard dumps ------------------------------------------------------------------ */
void kn__trace_guard_dump(kn__trace *tr, kn__tseg *s) {
  if (s->quiet) return;
  if (tr->nseg == 1) {
    if (kn__trace_finish_guards(tr) != KN_OK) return;
    char *d = kn__guards_dump(&tr->guards);
    kn__fc_guards(&s->fc, d, kn__guards_count(&tr->guards), tr->guards.nshape);
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

static kn__frame *resume_frame(kn__trace *tr, const kn__srcframe *at) {
  kn_compiled *f = tr->f;
  char key[600];
  snprintf(key, sizeof key, "%s:%d", at->file ? at->file : "?", at->line);
  bool found = false;
  kn__frame *fr = kn__hm_get(f->resume, key, &found);
  if (found) return fr;
  fr = calloc(1, sizeof *fr);
  if (!fr) return NULL;
  char name[300];
  snprintf(name, sizeof name, "resume_in_%s_at_%d", f->frame.name, at->line);
  fr->frame_id = -1;
  fr->name = strdup(name);
  fr->file = strdup(at->file ? at->file : f->frame.file);
  fr->line = at->line;
  if (!fr->name || !fr->file || !kn__hm_put(f->resume, key, fr)) {
    free(fr->name);
    free(fr->file);
    free(fr);
    return NULL;
  }
  return fr;
}

/* ---- breaks ---------------------------------------------------------------------------- */
static const char *brk_type(kn__brk k) {
  switch (k) {
  case KN__BRK_ITEM: return "Unsupported Tensor.item() call with capture_scalar_outputs=False";
  case KN__BRK_BOOL: return "Data-dependent branching";
  case KN__BRK_EXPLICIT: return "Call to `kn_graph_break()`";
  case KN__BRK_PRINT: return "Call to `kn_print()`";
  case KN__BRK_UNSUPPORTED: return "Dynamic shape operator";
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
  default: return "Run this part outside the compiled function.";
  }
}

/* The graph_breaks artifact, the dedup line and the trace artifact. */
static void report_break(kn__trace *tr, kn__brk k, const kn__opdef *op, const kn__srcframe *fr,
                         int n) {
  const kn__srcframe *at = n > 0 ? &fr[n - 1] : NULL;
  const char *file = at && at->file ? at->file : tr->f->frame.file;
  int line = at ? at->line : tr->f->frame.line;
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "Graph break in user code at %s:%d\nGraph Break Reason: %s\n  Explanation: ",
                file, line, brk_type(k));
  switch (k) {
  case KN__BRK_ITEM: kn__sb_puts(&sb, "kn_item() reads a tensor's data, which a traced graph does not have."); break;
  case KN__BRK_BOOL: kn__sb_puts(&sb, "A C condition depends on a tensor's value."); break;
  case KN__BRK_EXPLICIT: kn__sb_puts(&sb, "User-inserted graph break."); break;
  case KN__BRK_PRINT: kn__sb_puts(&sb, "Printing needs the tensor's value."); break;
  case KN__BRK_UNSUPPORTED:
    kn__sb_printf(&sb, "Operator `kiln.ops.%s`'s output shape depends on input Tensor data.",
                  op ? op->name : "?");
    break;
  default: kn__sb_puts(&sb, "This operation cannot be captured."); break;
  }
  kn__sb_printf(&sb, "\n  Hint: %s", brk_hint(k));
  if (k == KN__BRK_UNSUPPORTED)
    kn__sb_printf(&sb, "\n  Developer debug context: dynamic shape operator: kiln.ops.%s",
                  op ? op->name : "?");
  kn__sb_puts(&sb, "\nUser code traceback:");
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
      KN_LOG(KN_LOG_DYNAMO, KN_DEBUG, "Unsupported break in user code at %s:%d (details suppressed)",
             file, line);
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

/* After the segment ran: run the op eagerly on the real values into a new
** slot and bind a fake to it (an input of the next segment). */
static kn_status dd_run(kn__trace *tr, ddcall *dd, kn__segment *seg, bool quiet, double *ans) {
  int oslot = kn__trace_new_slot(tr, NULL);
  if (oslot < 0) return kn_last_status();
  if (!quiet) seg->brk_out_slot = oslot;
  else if (seg->brk_out_slot != oslot)
    return kn__error(KN_ESTATE, "the compiled function did not trace the same way twice "
                                "(a kiln function must be pure: see docs/DYNAMO.md)");
  kn_status st = kn__segment_run_op(seg, tr->slot_real, ans);
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

/* End the current segment at a break on value t (may be NULL; dd: a
** data-dependent op call); returns the answer through *ans. On error the
** trace stops. */
static kn_status do_break(kn__trace *tr, kn__brk k, kn_tensor *t, ddcall *dd, double *ans) {
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  const char *api = NULL;
  int n = kn__trace_user_stack(tr, fr, KN__SRC_MAX_FRAMES, &api);
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  if (tr->export_mode || tr->f->opts.fullgraph) {
    const kn__srcframe *at = n > 0 ? &fr[n - 1] : NULL;
    tr->stop = true;
    char msg[1024];
    snprintf(msg, sizeof msg, "graph break in user code at %s:%d (fullgraph=true): %s%s%s",
             at && at->file ? at->file : tr->f->frame.file, at ? at->line : tr->f->frame.line,
             brk_type(k), dd ? ": dynamic shape operator: kiln.ops." : "",
             dd ? dd->c->op->name : "");
    if (!tr->err) {
      tr->err = KN_EUNSUPPORTED;
      tr->err_msg = strdup(msg);
      if (at) tr->err_frame = *at;
    }
    return kn__error(KN_EUNSUPPORTED, "%s", msg);
  }
  if (!s->quiet) {
    if (n > 0) {
      char nm[32];
      snprintf(nm, sizeof nm, "%s", k == KN__BRK_EXPLICIT ? "graph_break" : "break");
      kn__trace_log_call(tr, nm, &fr[n - 1], n - 1, api);
    }
    report_break(tr, k, dd ? dd->c->op : NULL, fr, n);
    kn__fc_restart(&s->fc, brk_type(k));
    redescribe(tr);
  }
  int slot = -1;
  kn_status st = t ? kn__trace_slot_of(tr, t, &slot) : KN_OK;
  if (st == KN_OK && dd) st = dd_slots(tr, dd);
  if (st == KN_OK) st = kn__trace_carry_live(tr);
  kn__mode_pop(&tr->mode);
  kn__segment *seg = NULL;
  if (st == KN_OK) st = kn__tseg_finish(tr, k, slot, &seg);
  if (st == KN_OK && dd && !s->quiet) dd_store(dd, seg);
  if (st == KN_OK) end_seg(tr, NULL);
  if (st == KN_OK && t) st = (k == KN__BRK_PRINT) ? kn_print_tensor(tr->slot_real[slot], NULL)
                                                  : KN_OK;
  double a = 0;
  if (st == KN_OK && dd) st = dd_run(tr, dd, seg, s->quiet, &a);
  if (st == KN_OK && t && k != KN__BRK_PRINT) {
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
    tr->cur_known = quiet ? known_child(seg, a) : NULL;
    if (quiet && !tr->cur_known) /* leaving the known tree: fresh slots from here on */
      while (tr->nslots < tr->into->nslots && st == KN_OK)
        st = kn__trace_new_slot(tr, NULL) < 0 ? kn_last_status() : KN_OK;
    kn__frame *rf = st == KN_OK ? resume_frame(tr, n > 0 ? &fr[n - 1] : NULL) : NULL;
    if (st == KN_OK && !rf) st = kn__oom();
    if (st == KN_OK) st = kn__tseg_start(tr, rf, NULL);
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

static bool traced(kn__trace **trp, kn_tensor *t) {
  kn__trace *tr = kn__trace_current();
  *trp = tr;
  return tr && (!t || kn__tbind_of(tr, t));
}

double kn_item(kn_tensor *t) {
  kn__trace *tr;
  double v = NAN;
  if (!t) {
    kn__error(KN_EINVAL, "kn_item: the tensor is NULL");
    return NAN;
  }
  if (!traced(&tr, t)) return kn_item_double(t, &v) == KN_OK ? v : NAN;
  if (tr->stop || do_break(tr, KN__BRK_ITEM, t, NULL, &v) != KN_OK) return NAN;
  return v;
}

bool kn_is_true(kn_tensor *t) {
  kn__trace *tr;
  double v = 0;
  if (!t) {
    kn__error(KN_EINVAL, "kn_is_true: the tensor is NULL");
    return false;
  }
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
  if (!t) return kn__error(KN_EINVAL, "kn_print: the tensor is NULL");
  if (!traced(&tr, t)) return kn_print_tensor(t, NULL);
  if (tr->stop) return kn__error(KN_ESTATE, "kn_print: tracing stopped after an earlier error");
  return do_break(tr, KN__BRK_PRINT, t, NULL, &v);
}

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
  kn__guards_fini(&tr->guards);
  kn__shape_env_free(tr->env);
  free(tr->err_msg);
  free(tr->trace_src_last);
  free(tr);
}

/* The failed compile's records: dynamo_error artifact, metrics with the
** failure, and the error message. */
static kn_status fail(kn__trace *tr) {
  kn_status st = tr->err ? tr->err : kn_last_status();
  if (st == KN_OK) st = KN_EINTERNAL;
  const char *msg = tr->err_msg ? tr->err_msg : kn_last_error();
  char *copy = strdup(msg ? msg : "unknown error");
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  const char *ftype = st == KN_EUNSUPPORTED ? "Unsupported" : "TorchRuntimeError";
  if (!s->quiet && kn__trace_enabled()) {
    kn__sb sb = KN__SB_INIT;
    kn__sb_printf(&sb, "Traceback (most recent call last):\nkiln.dynamo.exc.%s: %s\n", ftype,
                  copy ? copy : "");
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
  if (tr->guards.nshape == 0) return KN_OK;
  kn__guards *ng = realloc(into->branch_guards, sizeof *ng * (size_t)(into->nbranch_guards + 1));
  if (!ng) return kn__oom();
  into->branch_guards = ng;
  into->branch_guards[into->nbranch_guards++] = tr->guards;
  kn__guards_init(&tr->guards);
  return KN_OK;
}

kn_status kn__trace_call(kn_compiled *f, const kn_value *args, int nargs, kn__entry *into,
                         const char *reasons_json, kn__entry **out_entry, kn_value *result) {
  *out_entry = NULL;
  *result = kn_vnone();
  kn__trace *tr = calloc(1, sizeof *tr);
  if (!tr) return kn__oom();
  tr->f = f;
  tr->args = args;
  tr->nargs = nargs;
  tr->into = into;
  tr->cur_known = into ? into->root : NULL;
  tr->env = kn__shape_env_new();
  static int describer;
  tr->describer_id = describer++;
  kn__guards_init(&tr->guards);
  kn__trace_mode_init(tr);
  if (!tr->env) {
    free(tr);
    return kn__oom();
  }
  kn__shape_env *prev_env = kn__shape_env_set_current(tr->env);
  kn_status st = kn__tseg_start(tr, &f->frame, reasons_json);
  bool started = st == KN_OK;
  if (st == KN_OK) st = kn__trace_fakify(tr);
  kn_value ret = kn_vnone();
  size_t mark;
  kn__tuple_pool_mark(&mark);
  if (st == KN_OK) st = kn__mode_push(&tr->mode);
  if (st == KN_OK) {
    kn__trace_set_current(tr);
    kn_status ust = kn__invoke_user(f, tr->fargs, nargs, &ret);
    kn__trace_set_current(NULL);
    kn__mode_pop(&tr->mode);
    if (tr->err == KN_OK && ust != KN_OK) {
      tr->err = ust;
      tr->err_msg = strdup(kn_last_error());
    }
    st = tr->err;
  }
  kn__module_set_subst(NULL, NULL);
  kn__rspec *spec = calloc(1, sizeof *spec);
  if (st == KN_OK && !spec) st = kn__oom();
  if (st == KN_OK) st = result_spec(tr, ret, spec);
  kn_value_release(ret);
  kn__tuple_pool_release(mark);
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
      e->cid = e->root->cid;
      if (st == KN_OK) *out_entry = e;
      else kn__entry_free(e); /* nobody else holds it */
    }
  } else if (into) {
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
      if (gst == KN_OK) gst = keep_branch_guards(tr, into);
      if (st == KN_OK) st = gst;
    } else if (st == KN_OK) {
      st = kn__oom();
    }
  } else if (!into && tr->root_seg) {
    kn__segment_free(tr->root_seg);
  }
  if (st != KN_OK) {
    kn_value_release(*result);
    *result = kn_vnone();
  }
  trace_free(tr);
  return st;
}
