/*
** dynamo/segments.c: graph segments. While tracing: start a segment (a frame
** compile), finish it (output node, compile with the backend, run it on the
** real values so the user's C code can continue past a break). At run time:
** replay an entry's segment tree, checking each break's recorded answer.
*/
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/tracer.h"
#include "kiln/autograd.h"
#include "logging/log.h"
#include "tensor/tensor.h"
#include "trace/events.h"
#include "trace/trace.h"

/* ---- freeing ------------------------------------------------------------------- */
static void rspec_fini(kn__rspec *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) rspec_fini(&r->items[i]);
  free(r->items);
}

void kn__segment_free(kn__segment *s) {
  if (!s) return;
  for (int i = 0; i < s->nchild; i++) kn__segment_free(s->child[i].seg);
  free(s->child);
  if (s->cg.free_state) s->cg.free_state(s->cg.state);
  kn_graph_module_free(s->gm);
  free(s->in_slot);
  free(s->out_slot);
  rspec_fini(s->result);
  free(s->result);
  free(s->ag);
  free(s);
}

void kn__values_free(kn_tensor **vals, int n) {
  if (!vals) return;
  for (int i = 0; i < n; i++) kn_release(vals[i]);
  free(vals);
}

void kn__entry_free(kn__entry *e) {
  if (!e) return;
  kn__guards_fini(&e->guards);
  kn__segment_free(e->root);
  for (int i = 0; i < e->nroot_inputs; i++) kn__src_fini(&e->root_src[i]);
  free(e->root_src);
  for (int i = 0; i < e->ncap; i++) kn__src_fini(&e->cap_src[i]);
  free(e->cap_src);
  free(e->cap_slot);
  kn__shape_env_free(e->env);
  for (int i = 0; i < e->nbranch_envs; i++) kn__shape_env_free(e->branch_envs[i]);
  free(e->branch_envs);
  for (int i = 0; i < e->nbranch_guards; i++) kn__guards_fini(&e->branch_guards[i]);
  free(e->branch_guards);
  free(e);
}

bool kn__entry_check(const kn__entry *e, const kn_value *args, int nargs) {
  if (!kn__guards_check(&e->guards, args, nargs)) return false;
  for (int i = 0; i < e->nbranch_guards; i++)
    if (!kn__guards_check(&e->branch_guards[i], args, nargs)) return false;
  return true;
}

char *kn__entry_reason(const kn__entry *e, const kn_value *args, int nargs, bool verbose) {
  char *r = kn__guards_reason(&e->guards, args, nargs, verbose);
  for (int i = 0; !r && i < e->nbranch_guards; i++)
    r = kn__guards_reason(&e->branch_guards[i], args, nargs, verbose);
  return r;
}

/* ---- running one segment ---------------------------------------------------------- */
static kn_status run_segment(kn__segment *s, kn_tensor **vals) {
  kn_tensor *in_inl[8], *out_inl[8];
  kn_tensor **in = s->nin <= 8 ? in_inl : malloc(sizeof *in * (size_t)s->nin);
  kn_tensor **out = s->nout <= 8 ? out_inl : malloc(sizeof *out * (size_t)s->nout);
  kn_status st = KN_OK;
  if (!in || !out) st = kn__oom();
  for (int i = 0; st == KN_OK && i < s->nin; i++) {
    in[i] = vals[s->in_slot[i]];
    if (!in[i]) st = kn__error(KN_EINTERNAL, "graph segment input %d has no value", i);
  }
  if (st == KN_OK) {
    /* outputs follow the op convention: new references recorded in the
    ** open scope; keep them past it */
    kn_scope_begin();
    st = s->cg.run(s->cg.state, in, s->nin, out, s->nout);
    for (int j = 0; st == KN_OK && j < s->nout; j++) kn_retain(out[j]);
    kn_scope_end();
  }
  for (int j = 0; st == KN_OK && j < s->nout; j++) {
    kn_tensor **dst = &vals[s->out_slot[j]];
    kn_release(*dst);
    *dst = out[j];
  }
  if (in != in_inl) free(in);
  if (out != out_inl) free(out);
  return st;
}

/* The answer a break records for value t. */
static kn_status break_answer(kn__brk brk, kn_tensor *t, double *ans) {
  *ans = 0;
  if (brk == KN__BRK_ITEM || brk == KN__BRK_BOOL) {
    double v = 0;
    kn_status st = kn_item_double(t, &v);
    if (st != KN_OK) return st;
    *ans = brk == KN__BRK_BOOL ? (v != 0) : v;
  } else if (brk == KN__BRK_PRINT) {
    return kn_print_tensor(t, NULL);
  }
  return KN_OK;
}

kn_status kn__segment_run_op(const kn__segment *s, kn_tensor **vals, double *ans) {
  kn__arg args[KN__MAX_ARGS];
  for (int i = 0; i < s->brk_nargs; i++) {
    args[i] = s->brk_args[i];
    if (s->brk_arg_slot[i] >= 0) args[i].u.t = vals[s->brk_arg_slot[i]];
  }
  kn_scope_begin();
  kn_tensor *r = kn__invoke(s->brk_op->id, s->brk_nargs, args);
  if (r) kn_retain(r);
  kn_scope_end();
  if (!r) return kn_last_status() != KN_OK ? kn_last_status() : KN_EINTERNAL;
  kn_release(vals[s->brk_out_slot]);
  vals[s->brk_out_slot] = r;
  *ans = r->ndim > 0 ? (double)r->sizes[0] : 0;
  return KN_OK;
}

static kn_status run_autograd(const kn__agcall *ag, kn_tensor **vals) {
  kn_tensor *outs[KN__AG_MAX], *gouts[KN__AG_MAX], *ins[KN__AG_MAX], *res[KN__AG_MAX];
  bool given = false;
  for (int i = 0; i < ag->n; i++) {
    outs[i] = vals[ag->out_slot[i]];
    gouts[i] = ag->gout_slot[i] >= 0 ? vals[ag->gout_slot[i]] : NULL;
    given = given || gouts[i];
  }
  if (ag->m == 0) return kn_backward_ex(outs[0], gouts[0], ag->retain_graph, ag->create_graph);
  for (int j = 0; j < ag->m; j++) ins[j] = vals[ag->in_slot[j]];
  kn_scope_begin();
  kn_status st = kn_autograd_grad(outs, ag->n, ins, ag->m, given ? gouts : NULL, ag->retain_graph,
                                  ag->create_graph, ag->allow_unused, res);
  for (int j = 0; st == KN_OK && j < ag->m; j++) {
    kn_release(vals[ag->res_slot[j]]);
    vals[ag->res_slot[j]] = kn_retain(res[j]);
  }
  kn_scope_end();
  return st;
}

kn_status kn__segment_run_action(const kn__segment *s, kn_tensor **vals) {
  switch (s->brk) {
  case KN__BRK_AUTOGRAD: return run_autograd(s->ag, vals);
  case KN__BRK_REQUIRES_GRAD: return kn_set_requires_grad(vals[s->brk_slot], s->brk_flag);
  case KN__BRK_HOST: {
    double v = 0;
    kn_status st = kn_item_double(vals[s->brk_slot], &v);
    if (st == KN_OK) s->host_fn(v, s->host_ud);
    return st;
  }
  default: return KN_OK;
  }
}

static kn__segment *find_child(const kn__segment *s, double ans) {
  for (int i = 0; i < s->nchild; i++)
    if (s->child[i].answer == ans || (isnan(ans) && isnan(s->child[i].answer)))
      return s->child[i].seg;
  return NULL;
}

static kn_status build_result(const kn__rspec *r, kn_tensor **vals, kn_value *out) {
  *out = r->konst;
  out->kind = r->kind;
  if (r->kind == KN_VTENSOR) {
    out->u.t = kn_retain(vals[r->slot]);
    return KN_OK;
  }
  if (r->kind != KN_VTUPLE && r->kind != KN_VLIST) return KN_OK;
  kn_value *items = calloc((size_t)(r->n ? r->n : 1), sizeof *items);
  if (!items) return kn__oom();
  for (int i = 0; i < r->n; i++) {
    kn_status st = build_result(&r->items[i], vals, &items[i]);
    if (st != KN_OK) {
      for (int j = 0; j < i; j++) kn_value_release(items[j]);
      free(items);
      return st;
    }
  }
  out->n = r->n;
  out->u.items = items;
  return KN_OK;
}

/* The value table handed to the trace that adds a missing branch: every
** slot an owned reference (the root inputs too). NULL when out of memory
** (the trace then runs the known segments again). */
static kn_tensor **hand_over(kn_tensor **vals, int n, int nroot) {
  kn_tensor **p = calloc((size_t)(n ? n : 1), sizeof *p);
  (void)nroot; /* root inputs are borrowed from the call: retained like the rest */
  for (int i = 0; p && i < n; i++) p[i] = kn_retain(vals[i]);
  return p;
}

kn_status kn__entry_run(kn_compiled *f, kn__entry *e, const kn_value *args, int nargs,
                        kn_value *result, kn__branch_miss *bm) {
  (void)f;
  kn_tensor *inl[16];
  kn_tensor **vals = e->nslots <= 16 ? inl : calloc((size_t)e->nslots, sizeof *vals);
  if (!vals) return kn__oom();
  memset(vals, 0, sizeof *vals * (size_t)(e->nslots <= 16 ? 16 : 0));
  for (int i = 0; i < e->nroot_inputs; i++) {
    kn_value v;
    if (!kn__src_get(&e->root_src[i], args, nargs, &v) || v.kind != KN_VTENSOR) {
      if (vals != inl) free(vals);
      return kn__error(KN_EINTERNAL, "guarded input %s is missing", e->root_src[i].expr);
    }
    vals[i] = v.u.t;
  }
  kn_status st = KN_OK;
  for (int i = 0; i < e->ncap; i++) { /* lifted inputs: read fresh (a reference each) */
    kn_value v;
    if (!kn__src_get(&e->cap_src[i], args, nargs, &v) || v.kind != KN_VTENSOR) {
      st = kn__error(KN_EINTERNAL, "guarded input %s is missing", e->cap_src[i].expr);
      break;
    }
    vals[e->cap_slot[i]] = kn_retain(v.u.t);
  }
  kn__segment *s = st == KN_OK ? e->root : NULL, *missed = NULL;
  double missed_ans = 0;
  bool caller_grad = kn_is_grad_enabled(); /* what the entry's guard checked */
  while (st == KN_OK && s) {
    /* each segment runs in the grad mode it was traced in, and leaves the
    ** one the C code had at its end (kn_set_grad_enabled inside the
    ** function, not restored, is replayed: the caller sees it) */
    kn_set_grad_enabled(s->grad_in);
    st = run_segment(s, vals);
    kn_set_grad_enabled(s->grad_out);
    if (st != KN_OK) break;
    if (s->brk == KN__BRK_NONE) {
      st = build_result(s->result, vals, result);
      break;
    }
    double ans = 0;
    if (s->brk == KN__BRK_UNSUPPORTED) st = kn__segment_run_op(s, vals, &ans);
    else if (s->brk >= KN__BRK_AUTOGRAD) st = kn__segment_run_action(s, vals);
    else if (s->brk_slot >= 0) st = break_answer(s->brk, vals[s->brk_slot], &ans);
    if (st != KN_OK) break;
    kn__segment *c = find_child(s, ans);
    if (!c) {
      st = KN__MISS_BRANCH;
      missed = s;
      missed_ans = ans;
    }
    s = c;
  }
  /* a call that did not finish leaves the caller's mode (a miss traces the
  ** function again from its start) */
  if (st != KN_OK) kn_set_grad_enabled(caller_grad);
  if (st == KN__MISS_BRANCH && bm) {
    bm->vals = hand_over(vals, e->nslots, e->nroot_inputs);
    bm->nvals = bm->vals ? e->nslots : 0;
    bm->seg = missed;
    bm->answer = missed_ans;
  }
  for (int i = e->nroot_inputs; i < e->nslots; i++) kn_release(vals[i]);
  if (vals != inl) free(vals);
  return st;
}

static void answer_text(kn__sb *sb, kn__brk brk, double v) {
  if (brk == KN__BRK_BOOL) kn__sb_puts(sb, v != 0 ? "True" : "False");
  else kn__sb_printf(sb, "%.17g", v);
}

char *kn__branch_miss_reason(const kn__branch_miss *bm) {
  const kn__segment *s = bm->seg;
  if (!s) return strdup("a graph break answered differently (new branch)");
  kn__sb sb = KN__SB_INIT;
  char cid[64];
  kn__compile_id_format(s->cid, cid, sizeof cid);
  const char *what = s->brk == KN__BRK_BOOL ? "kn_is_true()"
                     : s->brk == KN__BRK_UNSUPPORTED ? "the size(0) of a data-dependent op"
                                                    : "kn_item()";
  kn__sb_printf(&sb, "a graph break answered differently (new branch): %s at the end of %s "
                     "gave ", what, cid);
  answer_text(&sb, s->brk, bm->answer);
  kn__sb_puts(&sb, ", recorded: ");
  for (int i = 0; i < s->nchild && i < 4; i++) {
    if (i) kn__sb_puts(&sb, ", ");
    answer_text(&sb, s->brk, s->child[i].answer);
  }
  if (s->nchild > 4) kn__sb_printf(&sb, " (+%d more)", s->nchild - 4);
  return kn__sb_take(&sb);
}

/* ---- segments while tracing ---------------------------------------------------------- */
kn_status kn__tseg_start(kn__trace *tr, kn__frame *fr) {
  if (tr->nseg == tr->capseg) {
    int nc = tr->capseg ? tr->capseg * 2 : 4;
    kn__tseg *ns = realloc(tr->segs, sizeof *ns * (size_t)nc);
    if (!ns) return kn__oom();
    tr->segs = ns;
    tr->capseg = nc;
  }
  kn__tseg *s = &tr->segs[tr->nseg];
  memset(s, 0, sizeof *s);
  s->g = kn__graph_new();
  if (!s->g) return kn__oom();
  kn__graph_set_shape_env(s->g, tr->env, false);
  s->known = tr->cur_known;
  tr->ndescribed = 0; /* one describer per frame */
  s->quiet = s->known != NULL;
  s->grad_in = kn_is_grad_enabled();
  tr->nseg++;
  kn__fc_begin(&s->fc, fr, s->quiet ? NULL : tr->note, s->quiet);
  if (!s->quiet) tr->note = NULL;
  return KN_OK;
}

static kn_status push_out(kn__tseg *s, int slot, kn__gref ref) {
  if (s->nout == s->capout) {
    int nc = s->capout ? s->capout * 2 : 8;
    int *no = realloc(s->out_slot, sizeof *no * (size_t)nc);
    if (!no) return kn__oom();
    s->out_slot = no;
    kn__gref *nr = realloc(s->out_ref, sizeof *nr * (size_t)nc);
    if (!nr) return kn__oom();
    s->out_ref = nr;
    s->capout = nc;
  }
  s->out_slot[s->nout] = slot;
  s->out_ref[s->nout++] = ref;
  return KN_OK;
}

/* The slot of traced value t, giving a value of the current segment a new
** slot (an output of the segment). Real tensors become graph constants. */
kn_status kn__trace_slot_of(kn__trace *tr, kn_tensor *t, int *slot) {
  kn__tbind *b = kn__tbind_of(tr, t);
  kn_tensor *lifted = NULL;
  if (!b) { /* a real tensor: lifted when it needs to be (lift.c) */
    kn_status st = kn__trace_lift(tr, t, NULL, NULL, &lifted);
    if (st != KN_OK) return st;
    if (lifted) b = kn__tbind_of(tr, lifted);
  }
  if (!b) {
    kn__gref r;
    kn_status st = kn__trace_value(tr, t, &r); /* a get_attr constant */
    if (st != KN_OK) return st;
    int k = kn__trace_new_slot(tr, NULL);
    if (k < 0) return kn_last_status();
    *slot = k;
    return push_out(&tr->segs[tr->nseg - 1], k, r);
  }
  if (b->slot >= 0) {
    *slot = b->slot;
    return KN_OK;
  }
  if (b->seg != tr->nseg - 1)
    return kn__error(KN_EINTERNAL, "a value computed before a graph break was not carried over");
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  int k = kn__trace_new_slot(tr, NULL);
  if (k < 0) return kn_last_status();
  b->slot = k;
  *slot = k;
  return push_out(s, k, kn__graph_value(s->g, b->node, b->idx));
}

/* Values of the current segment that user code still holds get slots. */
kn_status kn__trace_carry_live(kn__trace *tr) {
  int si = tr->nseg - 1;
  for (int i = 0; i < tr->nfakes; i++) {
    kn_tensor *t = tr->fakes[i];
    kn__tbind *b = kn__tbind_of(tr, t);
    if (!b || b->seg != si || b->slot >= 0 || b->node->op == KN__GN_PLACEHOLDER) continue;
    if (atomic_load(&t->refcount) <= 1) continue;
    int k;
    kn_status st = kn__trace_slot_of(tr, t, &k);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

static kn_status copy_ints(int **dst, const int *src, int n) {
  *dst = malloc(sizeof(int) * (size_t)(n ? n : 1));
  if (!*dst) return kn__oom();
  if (n) memcpy(*dst, src, sizeof(int) * (size_t)n);
  return KN_OK;
}

static kn_status compile_segment(kn__trace *tr, kn__tseg *s, kn__segment **out) {
  kn__segment *seg = calloc(1, sizeof *seg);
  if (!seg) return kn__oom();
  seg->cid = s->fc.cid;
  seg->nin = s->nin;
  seg->nout = s->nout;
  kn_status st = copy_ints(&seg->in_slot, s->in_slot, s->nin);
  if (st == KN_OK) st = copy_ints(&seg->out_slot, s->out_slot, s->nout);
  if (st == KN_OK) {
    kn__graph *g = s->g;
    s->g = NULL;
    st = kn__graph_module_new(g, &seg->gm);
  }
  if (st == KN_OK && s->fc.graph_ops > 0) {
    const char *bn = kn__backend_name(tr->f);
    int n = kn__graph_num_inputs(kn__graph_module_graph(seg->gm));
    kn_tensor *ex_inl[32];
    kn_tensor **ex = n <= 16 ? ex_inl : calloc(2 * (size_t)n, sizeof *ex);
    kn_tensor **reals = ex ? ex + n : NULL; /* the placeholders' real values */
    if (!ex) st = kn__oom();
    for (int i = 0; st == KN_OK && i < n; i++) {
      int slot = s->in_slot[i];
      reals[i] = slot >= 0 && slot < tr->nslots ? tr->slot_real[slot] : NULL;
      /* the example inputs are the fakes bound to the placeholders */
      ex[i] = NULL;
      const kn__gnode *ph = kn__graph_input(kn__graph_module_graph(seg->gm), i);
      for (int k = 0; k < tr->nfakes && !ex[i]; k++) {
        kn__tbind *b = kn__tbind_of(tr, tr->fakes[k]);
        if (b && b->node == ph) ex[i] = tr->fakes[k];
        else if (b && b->slot == s->in_slot[i]) ex[i] = tr->fakes[k];
      }
    }
    if (st == KN_OK) {
      kn__fc_backend_begin(&s->fc, bn);
      tr->in_backend = true;
      st = kn__backend_compile(tr->f, seg->gm, ex, reals, n, &seg->cg);
      tr->in_backend = false;
      kn__fc_backend_end(&s->fc, bn);
    }
    if (ex != ex_inl) free(ex);
  } else if (st == KN_OK) {
    st = kn__eager_compile(seg->gm, &seg->cg); /* nothing for a backend to compile */
  }
  if (st != KN_OK) {
    kn__segment_free(seg);
    return st;
  }
  *out = seg;
  return KN_OK;
}

void kn__trace_take_partial(kn__trace *tr, const int *slots, int n) {
  for (int j = 0; j < n; j++) {
    int k = slots[j];
    kn_tensor *v = k < tr->npartial ? tr->partial[k] : NULL;
    kn_release(tr->slot_real[k]);
    tr->slot_real[k] = kn_retain(v);
  }
}

/* guard_added_fast records (and log lines) for the shape guards recorded
** since the last call. */
static void emit_guards(kn__trace *tr, const kn__tseg *s) {
  int ng = kn__shape_env_nguards(tr->env);
  for (; tr->nguards_emitted < ng; tr->nguards_emitted++)
    if (!s->quiet)
      kn__gsrc_emit(tr, tr->nguards_emitted, kn__shape_env_guard_str(tr->env, tr->nguards_emitted));
}

kn_status kn__tseg_finish(kn__trace *tr, kn__brk brk, int brk_slot, kn__segment **out) {
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  *out = NULL;
  if (!kn__graph_output(s->g, s->nout, s->out_ref)) return kn_last_status();
  emit_guards(tr, s);
  kn__fc_graph(&s->fc, s->g);
  kn_status st = KN_OK;
  kn__segment *seg = NULL;
  /* the C code's grad mode at the break or return: the segment is compiled
  ** and runs in the mode it started in, then the C code goes on in this one */
  bool grad_out = kn_set_grad_enabled(s->grad_in);
  if (s->quiet) {
    seg = s->known;
    if (seg->nout != s->nout || seg->nin != s->nin || seg->grad_out != grad_out)
      st = kn__error(KN_ESTATE, "the compiled function did not trace the same way twice "
                                "(a kiln function must be pure: see docs/DYNAMO.md)");
    kn__graph_free(s->g);
    s->g = NULL;
  } else {
    st = compile_segment(tr, s, &seg);
    emit_guards(tr, s); /* the ones the backend added */
    if (st == KN_OK) {
      seg->brk = brk;
      seg->brk_slot = brk_slot;
      seg->grad_in = s->grad_in;
      seg->grad_out = grad_out;
    }
  }
  if (st == KN_OK && s->quiet && tr->partial) kn__trace_take_partial(tr, seg->out_slot, seg->nout);
  else if (st == KN_OK) st = run_segment(seg, tr->slot_real);
  kn_set_grad_enabled(grad_out);
  if (st != KN_OK) {
    if (!s->quiet) kn__segment_free(seg);
    return st;
  }
  /* a resumed segment that ends at the return with no op compiles nothing:
  ** PyTorch skips such a frame (no guards), so no guards are written */
  if (brk != KN__BRK_NONE || tr->nseg == 1 || s->fc.graph_ops > 0) kn__trace_guard_dump(tr, s);
  *out = seg;
  return KN_OK;
}
