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
#include "ops/cuda_ops.h"
#include "tensor/tensor.h"

/* ---- the recorder: tensor -> graph value --------------------------------------- */

typedef struct recorder {
  kn__mode mode;
  kn__graph *g;
  kn__tmap map;
  /* the inputs' size symbols: a plain int equal to one of their hints in a
  ** SymInt argument of a derivative rule's call is taken for a size the
  ** rule read as an int (plain_read) */
  kn_sym syms[64];
  int nsyms;
  const char *op; /* the call being recorded (messages) */
  bool in_backward; /* recording the derivative rules */
  uint64_t seq_base; /* the autograd sequence number when the trace began */
  bool plain_read;  /* a rule passed a size as a plain int: specialise */
  kn_device dev;    /* the graph's device: cuda when a primal is (values made from
                    ** no graph value, as factory ops make them, live there) */
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

/* The device of the graph value bound to t (the graph's device for a
** tensor that is no graph value). The recorded tensors are meta tensors:
** their devices come from the graph. */
static kn_device value_device(const recorder *r, const kn_tensor *t) {
  kn__gref v;
  if (t && find_bound(r, t, &v) && v.node) return v.node->meta[v.idx].device;
  return r->dev;
}

/* The device call c runs on, as the dispatcher decides it: cuda when a
** tensor input is there, the graph's device when it has no tensor input. */
static kn_device call_device(const recorder *r, const kn__call *c) {
  int n = kn__call_ninputs(c), seen = 0;
  for (int k = 0; k < n; k++) {
    const kn_tensor *t = kn__call_input(c, k);
    if (!t) continue;
    seen++;
    if (value_device(r, t) == KN_CUDA) return KN_CUDA;
  }
  return seen ? KN_CPU : r->dev;
}

/* PyTorch's seq_nr of the op about to run: the node it makes, or, in the
** derivative rules, the node whose rule runs; relative to the trace's start. */
static int64_t seq_now(const recorder *r) {
  int64_t seq = kn__autograd_current_seq();
  if (seq < 0) seq = (int64_t)kn__peek_seq();
  return seq - (int64_t)r->seq_base;
}

/* A view a rule made without the dispatcher (kn__make_view of a saved
** tensor): as_strided of the value whose storage it shares, over t's
** symbolic geometry. */
static bool view_of_bound(recorder *r, kn_tensor *t, kn__gref *out) {
  int i = r->map.n - 1;
  while (i >= 0 && r->map.e[i].t->storage != t->storage) i--;
  if (i < 0) return false;
  kn__vmeta m;
  kn__vmeta_from_tensor(t, &m);
  m.device = value_device(r, r->map.e[i].t);
  kn__call c = {.op = &kn__ops[KN_OP_AS_STRIDED], .nargs = 4};
  c.args[0] = KN_A_T(r->map.e[i].t);
  c.args[1] = KN_A_SYMINTS(t->sizes, m.sizes, t->ndim);
  c.args[2] = KN_A_SYMINTS(t->strides, m.strides, t->ndim);
  c.args[3] = KN_A_SYMINT(&m.offset);
  kn__gnode *n = kn__graph_call_from(r->g, &c, lookup_bound, r, 1, &m);
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
    for (int k = 0; !seen && k < r->nsyms; k++) seen = r->syms[k].e == s.e;
    if (!seen && r->nsyms < 64) r->syms[r->nsyms++] = s;
  }
}

/* Is parameter i of schema ("op(Tensor self, SymInt[] size, ...)") a
** SymInt or SymInt[]? */
static bool symint_param(const char *schema, int i) {
  const char *p = schema ? strchr(schema, '(') : NULL;
  if (!p) return false;
  int depth = 0, k = 0;
  const char *item = p + 1;
  for (const char *q = p + 1; *q; q++) {
    if (*q == '[' || *q == '(') {
      depth++;
    } else if ((*q == ']' || *q == ')') && depth > 0) {
      depth--;
    } else if (depth == 0 && (*q == ',' || *q == ')')) {
      while (*item == ' ') item++;
      bool star = *item == '*' && item + 1 == q; /* the kw-only marker */
      if (!star && k++ == i) return !strncmp(item, "SymInt", 6);
      if (*q == ')') break;
      item = q + 1;
    }
  }
  return false;
}

static bool is_size_hint(const recorder *r, int64_t v) {
  for (int k = 0; k < r->nsyms; k++)
    if (kn__sym_hint(r->syms[k]) == v) return true;
  return false;
}

/* Did a derivative rule pass a size it read as a plain int? A SymInt
** argument without symbols (kn__arg.sym) whose value is the hint of an
** input size is taken for one: the joint graph is then specialised. */
static void check_plain_sizes(recorder *r, const kn__call *c) {
  for (int i = 0; !r->plain_read && i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    if (a->sym || (a->kind != KN__A_INT && a->kind != KN__A_INTS)) continue;
    if (!symint_param(c->op->schema, i)) continue;
    int n = a->kind == KN__A_INT ? 1 : a->u.ints.n;
    for (int j = 0; j < n && !r->plain_read; j++)
      r->plain_read = is_size_hint(r, a->kind == KN__A_INT ? a->u.i : a->u.ints.v[j]);
  }
}

static kn_status record(kn__mode *self, kn__call *c, kn__outs *out) {
  recorder *r = self->state;
  /* autograd records a composite op's parts, and so does the joint graph
  ** (as PyTorch decomposes CompositeImplicitAutograd ops): a part's saved
  ** tensors are then graph values */
  if (c->op->flags & KN_OPF_COMPOSITE) return kn__mode_decompose(self, c, out);
  r->op = c->op->name;
  int64_t seq = seq_now(r);
  if (r->in_backward) check_plain_sizes(r, c);
  kn_status st = kn__dispatch_below(self, c, out);
  if (st != KN_OK) return st;
  kn__vmeta *m = calloc((size_t)out->n + 1, sizeof *m);
  if (!m) return kn__oom();
  kn_device dev = call_device(r, c);
  for (int i = 0; i < out->n; i++) {
    kn__vmeta_from_tensor(out->t[i], &m[i]);
    m[i].device = dev;
  }
  kn__gnode *n = kn__graph_call_from(r->g, c, lookup, r, out->n, m);
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

/* Elements a storage needs for this geometry. A meta tensor's storage spans
** its traced geometry (meta storage holds no data), so ops that check bounds
** against it (as_strided) trace as they run on the inputs. */
static int64_t span_of(int nd, const int64_t *sz, const int64_t *sd, int64_t off) {
  int64_t span = 1 + off;
  for (int d = 0; d < nd; d++) {
    if (sz[d] == 0) return 0;
    span += (sz[d] - 1) * sd[d];
  }
  return span;
}

kn_tensor *kn__aot_meta_of(const kn__vmeta *m, bool contiguous) {
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
  size_t nbytes = (size_t)span_of(m->ndim, sz, sd, kn__sym_hint(off)) * kn_dtype_size(m->dtype);
  kn__storage *s = kn__storage_new(nbytes, KN_META);
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
    if (!n || !(t->prim[i] = kn__aot_meta_of(ph->meta, false))) return kn_last_status();
    if (ph->meta->device == KN_CUDA) t->r.dev = KN_CUDA;
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
    kn_device dev = value_device(&t->r, t->outs[i]);
    m.device = dev;
    char name[32];
    snprintf(name, sizeof name, "tangents_%d", ++*ntang);
    if (!(t->tang[i] = kn__aot_meta_of(&m, true))) return kn_last_status();
    /* gradients get history (create_graph), so the engine sums them with
    ** dispatched adds rather than raw kernels */
    if (kn_set_requires_grad(t->tang[i], true) != KN_OK) return kn_last_status();
    kn__vmeta_from_tensor(t->tang[i], &m);
    m.device = dev;
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

/* The graph value of forward result i: a value the trace recorded, or a
** captured constant the graph returns as it is (a get_attr). */
static kn_status output_value(recorder *r, kn_tensor *t, int i, kn__gref *v) {
  if (find_bound(r, t, v)) return KN_OK;
  if (t->storage && t->storage->device == KN_META)
    return kn__error(KN_EINVAL, "aot: output %d is no graph value", i);
  return lookup(r, t, v);
}

/* The output node: forward results, then the gradients that exist. */
static kn_status finish(jtrace *t, kn__aot_joint *j) {
  int n = t->nout + t->nprim;
  kn__gref *v = calloc((size_t)n + 1, sizeof *v);
  j->grad_input = calloc((size_t)t->nprim + 1, sizeof *j->grad_input);
  if (!v || !j->grad_input) return free(v), kn__oom();
  kn_status st = KN_OK;
  int k = 0;
  for (int i = 0; st == KN_OK && i < t->nout; i++) st = output_value(&t->r, t->outs[i], i, &v[k++]);
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

/* A derivative rule read a size as a plain int (check_plain_sizes): the
** graph holds that traced size as a constant, right only at that size. The
** joint graph is then specialised: every input size gets a guard on its
** hint (kept with the guards the rules and meta functions added), and other
** sizes recompile. Otherwise the rules passed every size as a symbol and
** the graph is valid for every size the recorded guards admit. */
static void specialise_sizes(recorder *r) {
  for (int k = 0; k < r->nsyms; k++) (void)kn__sym_guard_eq_int(r->syms[k], kn__sym_hint(r->syms[k]));
}

/* KN_CUDA when an input of g is on the GPU (its graph runs there), else
** KN_META (the meta tensors of the trace stand for host values). */
static kn_device inputs_device(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_inputs(g); i++)
    if (kn__graph_input(g, i)->meta->device == KN_CUDA) return KN_CUDA;
  return KN_META;
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
  if (st == KN_OK) { /* the meta tensors stand for the graph's values (cuda or cpu) */
    kn_device prev = kn__meta_values_device_set(inputs_device(g));
    st = trace_body(&t, g, requires_grad, inference, out);
    kn__meta_values_device_set(prev);
    kn__mode_pop(&t.r.mode);
  }
  if (env && t.r.plain_read) specialise_sizes(&t.r);
  out->specialised = env && t.r.plain_read;
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
