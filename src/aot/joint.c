/*
** aot/joint.c: the joint graph. The captured graph runs on meta tensors
** standing for its inputs (symbolic sizes kept) under a recording dispatcher
** mode; autograd records its nodes on those meta tensors as in eager mode,
** then kn_autograd_grad runs the op table's derivative rules (written with
** kiln ops) under the same mode, so forward and backward land in one graph.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aot/aot.h"
#include "autograd/autograd.h"
#include "core/error.h"
#include "kiln/autograd.h"
#include "tensor/tensor.h"

/* ---- the recorder: tensor -> graph value --------------------------------------- */

typedef struct recorder {
  kn__mode mode;
  kn__graph *g;
  kn__tmap map;
  /* symbols of the inputs' sizes, by hint: int-list arguments equal to a
  ** hint are recorded as the symbol (sizes read by derivative rules) */
  kn_sym syms[64];
  int nsyms;
  const char *op; /* the call being recorded (messages) */
  bool in_backward; /* recording the derivative rules */
  uint64_t seq_base; /* the autograd sequence number when the trace began */
} recorder;

static kn_status bind(recorder *r, kn_tensor *t, kn__gref v) { return kn__tmap_bind(&r->map, t, v); }

static kn_status lookup_bound(void *ud, kn_tensor *t, kn__gref *out);

static bool same_view(const kn_tensor *a, const kn_tensor *b) {
  if (a->storage != b->storage || a->dtype != b->dtype || a->ndim != b->ndim ||
      a->offset != b->offset)
    return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || a->strides[d] != b->strides[d]) return false;
  return true;
}

/* The value of t, or of a tensor t aliases exactly (the engine hands
** derivative rules aliases of saved outputs). */
static bool find_bound(const recorder *r, const kn_tensor *t, kn__gref *out) {
  if (kn__tmap_find(&r->map, t, out)) return true;
  for (int i = r->map.n - 1; i >= 0; i--)
    if (same_view(r->map.e[i].t, t)) {
      *out = r->map.e[i].v;
      return true;
    }
  return false;
}

static kn__gnode *record_call(recorder *r, const kn__call *c, kn__graph_lookup_fn look, int nout,
                              const kn__vmeta *metas);

/* PyTorch's seq_nr of the op about to run: the node it makes, or, in the
** derivative rules, the node whose rule runs; relative to the trace's start. */
static int64_t seq_now(const recorder *r) {
  int64_t seq = kn__autograd_current_seq();
  if (seq < 0) seq = (int64_t)kn__peek_seq();
  return seq - (int64_t)r->seq_base;
}

/* A view a rule made without the dispatcher (kn__make_view of a saved
** tensor): as_strided of the value whose storage it shares. */
static bool view_of_bound(recorder *r, kn_tensor *t, kn__gref *out) {
  int i = r->map.n - 1;
  while (i >= 0 && r->map.e[i].t->storage != t->storage) i--;
  if (i < 0) return false;
  kn__call c = {.op = &kn__ops[KN_OP_AS_STRIDED], .nargs = 4};
  c.args[0] = KN_A_T(r->map.e[i].t);
  c.args[1] = KN_A_INTS(t->sizes, t->ndim);
  c.args[2] = KN_A_INTS(t->strides, t->ndim);
  c.args[3] = KN_A_I(t->offset);
  kn__vmeta m;
  kn__vmeta_from_tensor(t, &m);
  m.device = KN_CPU;
  kn__gnode *n = record_call(r, &c, lookup_bound, 1, &m);
  if (!n) return false;
  n->autograd_seq_nr = seq_now(r);
  *out = (kn__gref){n, 0};
  return bind(r, t, *out) == KN_OK;
}

/* A tensor that is no graph value: a real constant becomes a get_attr. */
static kn_status lookup(void *ud, kn_tensor *t, kn__gref *out) {
  recorder *r = ud;
  if (find_bound(r, t, out)) return KN_OK;
  if (t->storage && t->storage->device == KN_META && view_of_bound(r, t, out)) return KN_OK;
  if (t->storage && t->storage->device == KN_META)
    return kn__error(KN_EINVAL, "aot: %s used a meta tensor that is no graph value "
                                "(made outside the dispatcher)", r->op ? r->op : "an op");
  kn__gnode *n = kn__graph_get_attr(r->g, "_tensor_constant0", t);
  if (!n) return kn_last_status();
  *out = (kn__gref){n, 0};
  return bind(r, t, *out);
}

static kn_status lookup_bound(void *ud, kn_tensor *t, kn__gref *out) {
  return find_bound(ud, t, out) ? KN_OK : kn__error(KN_EINVAL, "aot: no graph value");
}

static void add_syms(recorder *r, const kn__vmeta *m) {
  for (int d = 0; d < m->ndim; d++) {
    kn_sym s = m->sizes[d];
    bool seen = kn__sym_is_const(s);
    for (int k = 0; !seen && k < r->nsyms; k++)
      seen = kn__sym_hint(r->syms[k]) == kn__sym_hint(s);
    if (!seen && r->nsyms < 64) r->syms[r->nsyms++] = s;
  }
}

/* The symbol for an int a derivative rule passes (the forward's ints are
** the captured graph's constants and stay so). */
static kn_sym sym_of(const recorder *r, int64_t v) {
  for (int k = 0; r->in_backward && k < r->nsyms; k++)
    if (kn__sym_hint(r->syms[k]) == v) return r->syms[k];
  return kn__sym_const(v);
}

/* A dispatcher argument as a graph argument: tensors through look; ints
** and int-list entries equal to a symbolic input size's hint become that
** symbol (sizes a derivative rule read as ints). */
static kn_status to_garg(recorder *r, const kn__arg *a, kn__graph_lookup_fn look, kn__garg *out,
                         kn__gref *refs, kn_sym *syms) {
  switch (a->kind) {
  case KN__A_NONE: *out = KN_GA_NONE; return KN_OK;
  case KN__A_TENSOR:
    *out = KN_GA_REF(((kn__gref){NULL, 0}));
    return a->u.t ? look(r, a->u.t, &out->u.t) : KN_OK;
  case KN__A_TENSORS:
    for (int j = 0; j < a->u.ts.n; j++) {
      kn_status st = look(r, a->u.ts.v[j], &refs[j]);
      if (st != KN_OK) return st;
    }
    *out = KN_GA_TS(refs, a->u.ts.n);
    return KN_OK;
  case KN__A_INT: *out = KN_GA_SYM(sym_of(r, a->u.i)); return KN_OK;
  case KN__A_DOUBLE: *out = KN_GA_D(a->u.d); return KN_OK;
  case KN__A_BOOL: *out = KN_GA_B(a->u.b); return KN_OK;
  case KN__A_SCALAR: *out = KN_GA_S(a->u.s); return KN_OK;
  case KN__A_INTS:
    for (int j = 0; j < a->u.ints.n; j++) syms[j] = sym_of(r, a->u.ints.v[j]);
    *out = KN_GA_INTS(syms, a->u.ints.n);
    return KN_OK;
  case KN__A_DTYPE: *out = KN_GA_DT(a->u.dt); return KN_OK;
  case KN__A_GEN: *out = KN_GA_GEN(a->u.gen); return KN_OK;
  }
  return kn__error(KN_EINVAL, "aot: unknown argument kind %d", (int)a->kind);
}

/* Record call c as a node (kn__graph_call_from with symbolic ints). */
static kn__gnode *record_call(recorder *r, const kn__call *c, kn__graph_lookup_fn look, int nout,
                              const kn__vmeta *metas) {
  size_t nref = 1, nsym = 1;
  for (int i = 0; i < c->nargs; i++) {
    if (c->args[i].kind == KN__A_TENSORS) nref += (size_t)c->args[i].u.ts.n;
    if (c->args[i].kind == KN__A_INTS) nsym += (size_t)c->args[i].u.ints.n;
  }
  kn__gref *refs = malloc(nref * sizeof *refs);
  kn_sym *syms = malloc(nsym * sizeof *syms);
  kn__garg args[KN__MAX_ARGS];
  kn__gnode *n = NULL;
  kn_status st = refs && syms ? KN_OK : kn__oom();
  for (size_t i = 0, rr = 0, ss = 0; st == KN_OK && i < (size_t)c->nargs; i++) {
    st = to_garg(r, &c->args[i], look, &args[i], refs + rr, syms + ss);
    if (c->args[i].kind == KN__A_TENSORS) rr += (size_t)c->args[i].u.ts.n;
    if (c->args[i].kind == KN__A_INTS) ss += (size_t)c->args[i].u.ints.n;
  }
  if (st == KN_OK) n = kn__graph_call(r->g, c->op, c->nargs, args, nout, metas);
  free(refs);
  free(syms);
  return n;
}

static kn_status record(kn__mode *self, kn__call *c, kn__outs *out) {
  recorder *r = self->state;
  /* autograd records a composite op's parts, and so does the joint graph
  ** (as PyTorch decomposes CompositeImplicitAutograd ops): a part's saved
  ** tensors are then graph values */
  if (c->op->flags & KN_OPF_COMPOSITE) return kn__mode_decompose(self, c, out);
  r->op = c->op->name;
  int64_t seq = seq_now(r);
  kn_status st = kn__dispatch_below(self, c, out);
  if (st != KN_OK) return st;
  kn__vmeta *m = calloc((size_t)out->n + 1, sizeof *m);
  if (!m) return kn__oom();
  for (int i = 0; i < out->n; i++) {
    kn__vmeta_from_tensor(out->t[i], &m[i]);
    m[i].device = KN_CPU;
  }
  kn__gnode *n = record_call(r, c, lookup, out->n, m);
  free(m);
  if (n) n->autograd_seq_nr = seq;
  for (int i = 0; n && i < out->n; i++) {
    kn__gref v = kn__graph_value(r->g, n, i);
    if (!v.node || bind(r, out->t[i], v) != KN_OK) n = NULL;
  }
  if (n) return KN_OK;
  st = kn_last_status();
  kn__outs_fini(out);
  kn__outs_init(out);
  return st;
}

static void recorder_fini(recorder *r) {
  kn__tmap_fini(&r->map);
}

/* ---- meta tensors for graph values ------------------------------------------------ */

/* A meta tensor with m's (possibly symbolic) geometry; contiguous: strides
** recomputed (tangents). Owned or NULL. */
static kn_tensor *meta_of(const kn__vmeta *m, bool contiguous) {
  if (m->kind != KN__V_TENSOR) return kn__error(KN_EINVAL, "aot: a value without metadata"), NULL;
  kn_sym st[KN_MAX_DIMS], one = kn__sym_const(1);
  kn_sym acc = one;
  for (int d = m->ndim - 1; d >= 0; d--) {
    st[d] = contiguous ? acc : m->strides[d];
    if (contiguous) acc = kn__sym_mul(acc, kn__sym_max(m->sizes[d], one));
  }
  kn_sym off = contiguous ? kn__sym_const(0) : m->offset;
  int64_t sz[KN_MAX_DIMS], sd[KN_MAX_DIMS];
  bool sym = !kn__sym_is_const(off);
  for (int d = 0; d < m->ndim; d++) {
    sz[d] = kn__sym_hint(m->sizes[d]);
    sd[d] = kn__sym_hint(st[d]);
    sym = sym || !kn__sym_is_const(m->sizes[d]) || !kn__sym_is_const(st[d]);
  }
  kn__storage *s = kn__storage_new(0, KN_META);
  kn_tensor *t = s ? kn__tensor_wrap(s, m->dtype, m->ndim, sz, sd, kn__sym_hint(off)) : NULL;
  if (s) kn__storage_release(s);
  if (t && sym && !(t->sym = malloc(sizeof *t->sym))) {
    kn_release(t);
    t = NULL;
  }
  if (t && sym) {
    memcpy(t->sym->sizes, m->sizes, sizeof m->sizes);
    memcpy(t->sym->strides, st, sizeof st);
    t->sym->offset = off;
  }
  if (!t) kn__oom();
  return t;
}

/* ---- tracing ------------------------------------------------------------------------- */

typedef struct jtrace {
  recorder r;
  kn_tensor **prim;  /* [nprim] owned meta primals */
  kn_tensor **outs;  /* [nout] owned forward results */
  kn_tensor **tang;  /* [nout] owned tangents (NULL: output takes none) */
  kn_tensor **grads; /* [nprim] owned gradients (NULL: none) */
  int nprim, nout;
} jtrace;

static void jtrace_fini(jtrace *t) {
  for (int i = 0; i < t->nprim; i++) {
    if (t->prim) kn_release(t->prim[i]);
    if (t->grads) kn_release(t->grads[i]);
  }
  for (int i = 0; i < t->nout; i++) {
    if (t->outs) kn_release(t->outs[i]);
    if (t->tang) kn_release(t->tang[i]);
  }
  free(t->prim);
  free(t->outs);
  free(t->tang);
  free(t->grads);
  recorder_fini(&t->r);
}

static kn_status make_primals(jtrace *t, const kn__graph *g, const bool *rg) {
  for (int i = 0; i < t->nprim; i++) {
    const kn__gnode *ph = kn__graph_input(g, i);
    char name[32];
    snprintf(name, sizeof name, "primals_%d", i + 1);
    kn__gnode *n = kn__graph_placeholder(t->r.g, name, ph->meta);
    if (!n || !(t->prim[i] = meta_of(ph->meta, false))) return kn_last_status();
    add_syms(&t->r, ph->meta);
    if (rg && rg[i] && kn_set_requires_grad(t->prim[i], true) != KN_OK) return kn_last_status();
    kn_status st = bind(&t->r, t->prim[i], (kn__gref){n, 0});
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* Tangent placeholders for the outputs that have a gradient path. */
static kn_status make_tangents(jtrace *t, bool *diff, int *ntang) {
  *ntang = 0;
  for (int i = 0; i < t->nout; i++) {
    diff[i] = t->outs[i]->requires_grad && kn_dtype_is_floating(t->outs[i]->dtype);
    if (!diff[i]) continue;
    kn__vmeta m;
    kn__vmeta_from_tensor(t->outs[i], &m);
    m.device = KN_CPU;
    char name[32];
    snprintf(name, sizeof name, "tangents_%d", ++*ntang);
    if (!(t->tang[i] = meta_of(&m, true))) return kn_last_status();
    /* gradients get history (create_graph), so the engine sums them with
    ** dispatched adds rather than raw kernels */
    if (kn_set_requires_grad(t->tang[i], true) != KN_OK) return kn_last_status();
    kn__vmeta_from_tensor(t->tang[i], &m);
    m.device = KN_CPU;
    kn__gnode *n = kn__graph_placeholder(t->r.g, name, &m);
    if (!n) return kn_last_status();
    kn_status st = bind(&t->r, t->tang[i], (kn__gref){n, 0});
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* Run the derivative rules: gradients of the inputs that require grad
** (create_graph: every gradient sum goes through the dispatcher). */
static kn_status run_backward(jtrace *t, const bool *diff, const bool *rg) {
  kn_tensor **o = calloc(2 * ((size_t)t->nout + (size_t)t->nprim) + 1, sizeof *o);
  if (!o) return kn__oom();
  kn_tensor **tg = o + t->nout, **in = tg + t->nout, **gr = in + t->nprim;
  int no = 0, ni = 0;
  for (int i = 0; i < t->nout; i++)
    if (diff[i]) {
      o[no] = t->outs[i];
      tg[no++] = t->tang[i];
    }
  for (int i = 0; i < t->nprim; i++)
    if (rg[i]) in[ni++] = t->prim[i];
  kn_scope_begin(); /* the gradients are recorded in it: keep our own references */
  kn_status st = no && ni ? kn_autograd_grad(o, no, in, ni, tg, true, true, true, gr) : KN_OK;
  for (int i = 0, k = 0; st == KN_OK && no && i < t->nprim; i++)
    if (rg[i] && gr[k++]) t->grads[i] = kn_retain(gr[k - 1]);
  kn_scope_end();
  free(o);
  return st;
}

static kn_status trace_body(jtrace *t, const kn__graph *g, const bool *rg, bool inference,
                            kn__aot_joint *j) {
  kn_status st = make_primals(t, g, inference ? NULL : rg);
  kn__gprog *p = NULL;
  if (st == KN_OK) st = kn__gprog_new(g, &p);
  if (st != KN_OK) return st;
  t->nout = kn__gprog_num_outputs(p);
  t->outs = calloc((size_t)t->nout + 1, sizeof *t->outs);
  t->tang = calloc((size_t)t->nout + 1, sizeof *t->tang);
  j->out_diff = calloc((size_t)t->nout + 1, sizeof *j->out_diff);
  if (!t->outs || !t->tang || !j->out_diff) st = kn__oom();
  bool prev = kn_set_grad_enabled(!inference);
  if (st == KN_OK) st = kn__gprog_run(p, t->prim, t->nprim, t->outs, t->nout);
  kn__gprog_free(p);
  if (st == KN_OK && !inference) st = make_tangents(t, j->out_diff, &j->ntangents);
  t->r.in_backward = true;
  if (st == KN_OK && !inference) st = run_backward(t, j->out_diff, rg);
  kn_set_grad_enabled(prev);
  j->nfw_out = t->nout;
  return st;
}

/* The output node: forward results, then the gradients that exist. */
static kn_status finish(jtrace *t, kn__aot_joint *j) {
  int n = t->nout + t->nprim;
  kn__gref *v = calloc((size_t)n + 1, sizeof *v);
  j->grad_input = calloc((size_t)t->nprim + 1, sizeof *j->grad_input);
  if (!v || !j->grad_input) return free(v), kn__oom();
  kn_status st = KN_OK;
  int k = 0;
  for (int i = 0; st == KN_OK && i < t->nout; i++)
    if (!find_bound(&t->r, t->outs[i], &v[k++])) st = kn__error(KN_EINVAL, "aot: output %d is no graph value", i);
  for (int i = 0; st == KN_OK && i < t->nprim; i++) {
    if (!t->grads[i]) continue;
    if (!find_bound(&t->r, t->grads[i], &v[k])) st = lookup(&t->r, t->grads[i], &v[k]);
    k++;
    j->grad_input[j->ngrads++] = i;
  }
  if (st == KN_OK && !kn__graph_output(t->r.g, k, v)) st = kn_last_status();
  free(v);
  if (st == KN_OK) st = kn__graph_verify(t->r.g);
  return st;
}

/* Derivative rules read sizes as plain ints, and an int a rule passes
** cannot be told apart from a size with the same value (a dim, an index,
** 1/numel as a float): recording it as the size's symbol would be right only
** at that size. So a joint graph over symbolic inputs is specialised: every
** input size gets a guard on its hint (kept with the guards the rules'
** reads added), and other sizes recompile. The ints recorded as symbols
** (record_call) then equal the constants they stand for on every call the
** guards admit. */
static void specialise_sizes(recorder *r) {
  for (int k = 0; k < r->nsyms; k++) (void)kn__sym_guard_eq_int(r->syms[k], kn__sym_hint(r->syms[k]));
}

kn_status kn__aot_trace_joint(const kn__graph *g, const bool *requires_grad, int ninputs,
                              bool inference, kn__aot_joint *out) {
  memset(out, 0, sizeof *out);
  if (!g || ninputs != kn__graph_num_inputs(g))
    return kn__error(KN_EINVAL, "aot: expected %d inputs, got %d", g ? kn__graph_num_inputs(g) : 0,
                     ninputs);
  jtrace t;
  memset(&t, 0, sizeof t);
  t.r.mode = (kn__mode){"aot_joint", record, &t.r};
  t.r.seq_base = kn__peek_seq();
  t.nprim = ninputs;
  out->nprimals = ninputs;
  t.r.g = out->g = kn__graph_new();
  t.prim = calloc((size_t)ninputs + 1, sizeof *t.prim);
  t.grads = calloc((size_t)ninputs + 1, sizeof *t.grads);
  kn_status st = out->g && t.prim && t.grads ? KN_OK : kn__oom();
  if (st == KN_OK && kn__graph_shape_env(g)) kn__graph_set_shape_env(out->g, kn__graph_shape_env(g), false);
  kn__shape_env *env = kn__graph_shape_env(g);
  if (st == KN_OK) st = kn__mode_push(&t.r.mode);
  if (st == KN_OK) {
    st = trace_body(&t, g, requires_grad, inference, out);
    kn__mode_pop(&t.r.mode);
  }
  if (env) specialise_sizes(&t.r);
  if (st == KN_OK) st = finish(&t, out);
  jtrace_fini(&t);
  if (st != KN_OK) kn__aot_joint_fini(out);
  return st;
}

void kn__aot_joint_fini(kn__aot_joint *j) {
  kn__graph_free(j->g);
  free(j->grad_input);
  free(j->out_diff);
  memset(j, 0, sizeof *j);
}
