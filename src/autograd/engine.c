/*
** autograd/engine.c: the backward engine behind kn_backward and
** kn_autograd_grad. One run: find the graph reachable from the roots, keep
** the nodes that lead to what is wanted (every leaf for backward, the
** captured inputs for grad), count dependencies, then execute nodes whose
** gradients are complete, highest sequence number first (as PyTorch's ready
** queue), summing contributions per node input. Not thread-safe on a shared
** graph (one backward per graph at a time).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "core/hashmap.h"
#include "kiln/autograd.h"
#include "kiln/ops_pointwise.h"
#include "ops/autocast.h"
#include "ops/cuda_ops.h"
#include "ops/iter.h"
#include "tensor/handles.h"

typedef struct gnode {
  kn__node *node;   /* borrowed: the roots and edges keep it alive */
  int deps;         /* incoming edges from needed nodes not yet executed */
  bool needed, queued;
  kn_tensor **buf;  /* nout accumulated gradients (owned) */
  bool *own;        /* nout: buf[i] was allocated by the engine (grad_accum.c) */
} gnode;

typedef struct capture {
  kn__node *node;
  int input_nr;
} capture;

typedef struct run {
  kn__hashmap index;  /* node pointer -> gnode index + 1 */
  gnode *g;
  int n, cap;
  int *heap;          /* ready gnodes, max-heap by seq */
  int nheap;
  bool retain_graph, create_graph, accumulate;
  capture *caps;      /* kn_autograd_grad only */
  int ncaps;
  kn_tensor **cap_out;
  kn__edge *roots;    /* owned root edges, released last */
  int nroots;
  struct final_cb *finals; /* kn_autograd_queue_callback, in queue order (owned) */
  int nfinals, capfinals;
  struct run *outer;  /* the run this one is nested in (a backward inside a hook) */
} run;

typedef struct final_cb {
  kn_backward_final_fn fn;
  void *ud;
} final_cb;

/* The backward running on this thread (innermost), for
** kn_autograd_queue_callback. */
static _Thread_local run *cur_run;

static const char *const freed_msg =
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.";

/* ---- graph discovery ------------------------------------------------------------- */

static int find(const run *r, const kn__node *n) {
  bool found = false;
  void *v = kn__hm_get_u64(&r->index, (uint64_t)(uintptr_t)n, &found);
  return found ? (int)(intptr_t)v - 1 : -1;
}

static int add_node(run *r, kn__node *n) {
  int i = find(r, n);
  if (i >= 0) return i;
  if (r->n == r->cap) {
    int nc = r->cap ? r->cap * 2 : 32;
    gnode *ng = realloc(r->g, (size_t)nc * sizeof *ng);
    if (!ng) return -1;
    r->g = ng;
    r->cap = nc;
  }
  gnode *g = &r->g[r->n];
  memset(g, 0, sizeof *g);
  g->node = n;
  g->buf = calloc((size_t)(n->nout > 0 ? n->nout : 1), sizeof *g->buf);
  g->own = calloc((size_t)(n->nout > 0 ? n->nout : 1), sizeof *g->own);
  if (!g->buf || !g->own ||
      !kn__hm_put_u64(&r->index, (uint64_t)(uintptr_t)n, (void *)(intptr_t)(r->n + 1))) {
    free(g->buf);
    free(g->own);
    return -1;
  }
  return r->n++;
}

static bool is_capture(const run *r, const kn__node *n) {
  for (int c = 0; c < r->ncaps; c++)
    if (r->caps[c].node == n) return true;
  return false;
}

/* Depth-first from the roots; `order` receives nodes in post-order (every
** node after all nodes it leads to), which decides `needed`. */
static kn_status discover(run *r, kn__node *const *roots, int nroots) {
  typedef struct frame { int gi, k; } frame;
  int cap = 64, sp = 0;
  frame *st = malloc((size_t)cap * sizeof *st);
  int *order = malloc(sizeof *order * 1), norder = 0, ordcap = 1;
  kn_status status = st && order ? KN_OK : kn__oom();
  for (int ri = 0; status == KN_OK && ri < nroots; ri++) {
    if (!roots[ri] || find(r, roots[ri]) >= 0) continue;
    int gi = add_node(r, roots[ri]);
    if (gi < 0) { status = kn__oom(); break; }
    st[sp++] = (frame){gi, 0};
    while (sp > 0 && status == KN_OK) {
      frame *f = &st[sp - 1];
      kn__node *n = r->g[f->gi].node;
      if (f->k == n->nin) { /* done: post-order */
        if (norder == ordcap) {
          ordcap *= 2;
          int *no = realloc(order, (size_t)ordcap * sizeof *no);
          if (!no) { status = kn__oom(); break; }
          order = no;
        }
        order[norder++] = f->gi;
        sp--;
        continue;
      }
      kn__node *next = n->next[f->k++].fn;
      if (!next || find(r, next) >= 0) continue;
      int ni = add_node(r, next);
      if (ni < 0) { status = kn__oom(); break; }
      if (sp == cap) {
        cap *= 2;
        frame *ns = realloc(st, (size_t)cap * sizeof *ns);
        if (!ns) { status = kn__oom(); break; }
        st = ns;
      }
      st[sp++] = (frame){ni, 0};
    }
  }
  /* needed: backward wants every node; grad wants paths to captures */
  for (int o = 0; status == KN_OK && o < norder; o++) {
    gnode *g = &r->g[order[o]];
    if (r->accumulate) {
      g->needed = true;
      continue;
    }
    g->needed = is_capture(r, g->node);
    for (int k = 0; !g->needed && k < g->node->nin; k++) {
      kn__node *nx = g->node->next[k].fn;
      g->needed = nx && g->node->kind != KN__NODE_ACCUM && r->g[find(r, nx)].needed;
    }
  }
  for (int i = 0; status == KN_OK && i < r->n; i++) {
    if (!r->g[i].needed) continue;
    for (int k = 0; k < r->g[i].node->nin; k++) {
      kn__node *nx = r->g[i].node->next[k].fn;
      if (nx && r->g[find(r, nx)].needed) r->g[find(r, nx)].deps++;
    }
  }
  free(st);
  free(order);
  return status;
}

/* ---- the ready queue ------------------------------------------------------------------- */

static bool before(const run *r, int a, int b) {
  return r->g[a].node->seq > r->g[b].node->seq;
}

static void heap_push(run *r, int gi) {
  int i = r->nheap++;
  r->heap[i] = gi;
  while (i > 0 && before(r, r->heap[i], r->heap[(i - 1) / 2])) {
    int p = (i - 1) / 2, t = r->heap[p];
    r->heap[p] = r->heap[i];
    r->heap[i] = t;
    i = p;
  }
  r->g[gi].queued = true;
}

static int heap_pop(run *r) {
  int top = r->heap[0];
  r->heap[0] = r->heap[--r->nheap];
  for (int i = 0;;) {
    int l = 2 * i + 1, rr = l + 1, m = i;
    if (l < r->nheap && before(r, r->heap[l], r->heap[m])) m = l;
    if (rr < r->nheap && before(r, r->heap[rr], r->heap[m])) m = rr;
    if (m == i) break;
    int t = r->heap[m];
    r->heap[m] = r->heap[i];
    r->heap[i] = t;
    i = m;
  }
  return top;
}

/* ---- gradient arithmetic ------------------------------------------------------------------ */

/* a + b of gradients on the GPU: the add op's backend (no history), which
** runs it on the device or says why it cannot. */
static kn_tensor *add_device(const kn_tensor *a, const kn_tensor *b) {
  kn__call call = {.op = &kn__ops[KN_OP_ADD], .nargs = 3,
                   .args = {KN_A_T((kn_tensor *)a), KN_A_T((kn_tensor *)b), KN_A_S(kn_int(1))}};
  kn__outs o;
  kn__outs_init(&o);
  if (kn__dispatch_backend(&call, &o) != KN_OK) return NULL;
  kn_tensor *r = o.n == 1 ? kn_retain(o.t[0]) : NULL;
  kn__outs_fini(&o);
  return r;
}

/* a + b without dispatch (no history): same sizes; result has a's dtype. */
static kn_tensor *add_raw(const kn_tensor *a, const kn_tensor *b) {
  if (kn__tensor_on_cuda(a) || kn__tensor_on_cuda(b)) return add_device(a, b);
  kn_tensor *out = kn__contiguous_copy(a, a->dtype);
  if (!out || a->device == KN_META || a->is_fake) return out;
  kn_tensor *bc = kn__contiguous_copy(b, a->dtype);
  if (!bc) {
    kn_release(out);
    return NULL;
  }
  int64_t n = kn__numel(out->ndim, out->sizes);
  if (out->dtype == KN_FLOAT32) {
    float *o = kn_data(out);
    const float *x = kn_data(bc);
    for (int64_t i = 0; i < n; i++) o[i] += x[i];
  } else if (out->dtype == KN_FLOAT64) {
    double *o = kn_data(out);
    const double *x = kn_data(bc);
    for (int64_t i = 0; i < n; i++) o[i] += x[i];
  } else {
    size_t es = kn_dtype_size(out->dtype);
    unsigned char *o = kn_data(out);
    const unsigned char *x = kn_data(bc);
    for (int64_t i = 0; i < n; i++)
      kn__store_double(o + (size_t)i * es, out->dtype,
                       kn__load_double(o + (size_t)i * es, out->dtype) +
                           kn__load_double(x + (size_t)i * es, out->dtype));
  }
  kn_release(bc);
  return out;
}

/* Sum of two gradients: with history under create_graph (kn_add),
** raw otherwise (*fresh set: a new buffer nobody else has seen). Returns an
** owned reference (not in any scope) or NULL. */
static kn_tensor *grad_sum(kn_tensor *a, kn_tensor *b, bool create_graph, bool *fresh) {
  *fresh = !create_graph || (!a->requires_grad && !b->requires_grad);
  if (*fresh) return add_raw(a, b);
  kn_scope_begin();
  bool prev = kn_set_grad_enabled(true);
  kn_tensor *s = kn_retain(kn_add(a, b));
  kn_set_grad_enabled(prev);
  kn_scope_end();
  return s;
}

/* buf[i] += g (g borrowed); in place when the engine owns buf[i] (*own). */
static kn_status accumulate(kn_tensor **slot, bool *own, kn_tensor *g, bool create_graph) {
  if (!*slot) {
    *slot = kn_retain(g);
    *own = false;
    return KN_OK;
  }
  if (!create_graph && *own && !g->requires_grad && kn__grad_exclusive(*slot) &&
      kn__grad_can_add_into(*slot, g)) {
    kn__grad_add_into(*slot, g);
    return KN_OK;
  }
  kn_tensor *s = grad_sum(*slot, g, create_graph, own);
  if (!s) return kn_last_status();
  kn_release(*slot);
  *slot = s;
  return KN_OK;
}

static bool same_sizes(const kn_tensor *a, const kn_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d]) return false;
  return true;
}

static kn_status shape_error(const char *who, int k, const kn_tensor *g, const kn_tensor *in) {
  char a[160], b[160];
  kn__format_sizes(g->ndim, g->sizes, a, sizeof a);
  kn__format_sizes(in->ndim, in->sizes, b, sizeof b);
  return kn__error(KN_EAUTOGRAD,
                   "Function %s returned an invalid gradient at index %d - got %s but expected "
                   "shape compatible with %s", who, k, a, b);
}

/* ---- executing one node ------------------------------------------------------------------ */

/* A metadata-only stand-in for a saved tensor modified in place: rules that
** only read its shape still work; rules that read values produce meta
** results, which run_op turns into the version error. */
static kn_tensor *stand_in(const kn_tensor *t) { return kn__saved_stand_in(t); }

typedef struct opctx {
  kn__call call;                 /* shallow copy, stand-ins substituted */
  kn_tensor **outs;              /* nout saved outputs for the rule (malloc) */
  kn_tensor **lists[KN__MAX_ARGS]; /* substituted tensor lists (malloc) */
  int first_bad;                 /* -1, or saved index (inputs, then outputs) */
} opctx;

static void opctx_free(opctx *o) {
  free(o->outs);
  for (int i = 0; i < KN__MAX_ARGS; i++) free(o->lists[i]);
}

/* Saved output i for the rule: the alias, or (create_graph) an alias that is
** output i of n again, so the rule's use of it is differentiable. */
static kn_tensor *saved_output(kn__node *n, int i, bool create_graph) {
  kn_tensor *s = n->saved_out[i];
  kn_tensor *a = kn__tensor_alias(s);
  if (a && create_graph && kn_dtype_is_floating(a->dtype)) {
    kn__node_retain(n);
    a->grad_fn = n;
    a->output_nr = i;
    a->requires_grad = true;
  }
  return kn__autorelease(a);
}

/* *slot is saved tensor `flat`: replace it by a stand-in (registered in the
** rule's scope) when it was modified since it was saved. */
static kn_status check_saved(kn__node *n, opctx *o, kn_tensor **slot, int flat) {
  kn_tensor *t = *slot;
  if (!t || kn__saved_version_error(n, t, &n->in_info[flat]) == KN_OK) return KN_OK;
  if (o->first_bad < 0) o->first_bad = flat;
  kn_tensor *m = kn__autorelease(stand_in(t));
  if (!m) return kn_last_status();
  *slot = m;
  return KN_OK;
}

/* A view whose base got a new history in place after the view was made
** (PyTorch regenerates such a view's grad_fn; kiln refuses rather than
** return a gradient through the stale history). */
static kn_status check_stale_view(const kn__node *n) {
  if (!(n->call.op->flags & KN_OPF_VIEW) || n->released || n->nin < 1) return KN_OK;
  const kn_tensor *base = kn__call_input(&n->call, 0);
  const kn__saved_info *i = &n->in_info[0];
  if (!base || !i->check || kn_tensor_version(base) == i->version || base->grad_fn == i->node)
    return KN_OK;
  return kn__error(KN_EUNSUPPORTED,
                   "the base of a view (output 0 of %s) was modified by an in-place operation "
                   "after the view was created, which changed the base's history to %s; "
                   "kiln cannot regenerate the view's grad_fn yet: take the view again after "
                   "the in-place operation", kn__node_name(n),
                   base->grad_fn ? kn__node_name(base->grad_fn) : "a leaf");
}

static kn_status prepare_op(kn__node *n, opctx *o, bool create_graph) {
  memset(o, 0, sizeof *o);
  o->first_bad = -1;
  kn_status vst = check_stale_view(n);
  if (vst != KN_OK) return vst;
  o->call = n->call;
  o->first_bad = -1;
  kn_status st = KN_OK;
  int flat = 0;
  for (int i = 0; st == KN_OK && i < o->call.nargs; i++) {
    kn__arg *a = &o->call.args[i];
    if (a->kind == KN__A_TENSOR) {
      st = check_saved(n, o, &a->u.t, flat++);
    } else if (a->kind == KN__A_TENSORS && a->u.ts.n > 0) {
      o->lists[i] = malloc((size_t)a->u.ts.n * sizeof *o->lists[i]);
      if (!o->lists[i]) return kn__oom();
      memcpy(o->lists[i], a->u.ts.v, (size_t)a->u.ts.n * sizeof *o->lists[i]);
      for (int j = 0; st == KN_OK && j < a->u.ts.n; j++)
        st = check_saved(n, o, &o->lists[i][j], flat++);
      a->u.ts.v = o->lists[i];
    }
  }
  o->outs = calloc((size_t)(n->nout ? n->nout : 1), sizeof *o->outs);
  if (st == KN_OK && !o->outs) st = kn__oom();
  for (int i = 0; st == KN_OK && i < n->nout; i++) {
    kn_tensor *s = n->saved_out[i];
    if (kn__saved_version_error(n, s, &n->out_info[i]) != KN_OK) {
      if (o->first_bad < 0) o->first_bad = n->nin + i;
      o->outs[i] = kn__autorelease(stand_in(s));
    } else {
      o->outs[i] = saved_output(n, i, create_graph);
    }
    if (!o->outs[i]) st = kn_last_status();
  }
  return st;
}

static kn_status version_error(kn__node *n, int bad) {
  if (bad < n->nin) {
    kn_tensor *t = kn__call_input(&n->call, bad);
    return kn__saved_version_error(n, t, &n->in_info[bad]);
  }
  return kn__saved_version_error(n, n->saved_out[bad - n->nin], &n->out_info[bad - n->nin]);
}

/* Run the derivative rule of an op node. grads[k] receive owned results. */
kn_status kn__run_op(kn__node *n, kn_tensor **gout, const bool *needs, kn_tensor **grads,
                        bool create_graph) {
  opctx o;
  kn_status st = prepare_op(n, &o, create_graph);
  kn_tensor **gin = calloc((size_t)(n->nin ? n->nin : 1), sizeof *gin);
  if (!gin && st == KN_OK) st = kn__oom();
  if (st == KN_OK) {
    kn__bwctx ctx = {&o.call, o.outs, n->nout, gout, gin, needs, n->nin, NULL};
    kn__autocast_exclude_push(); /* gradients in the forward ops' dtypes */
    st = n->call.op->backward(&ctx);
    kn__autocast_exclude_pop();
  }
  for (int k = 0; st == KN_OK && k < n->nin; k++) {
    if (!needs[k] || !gin[k]) continue;
    kn_tensor *in = kn__call_input(&n->call, k);
    if (gin[k]->device == KN_META && !n->on_meta) {
      st = KN_EAUTOGRAD; /* a stand-in's values were needed */
      break;
    }
    if (!same_sizes(gin[k], in)) st = shape_error(kn__node_name(n), k, gin[k], in);
    else if (gin[k]->dtype != in->dtype) /* as PyTorch: cast to the input's dtype */
      grads[k] = kn_retain(kn_to(gin[k], in->dtype));
    else grads[k] = kn_retain(gin[k]);
    if (st == KN_OK && !grads[k]) st = kn_last_status();
  }
  if (st != KN_OK && o.first_bad >= 0) st = version_error(n, o.first_bad);
  else if (st != KN_OK && n->released) st = kn__error(KN_EAUTOGRAD, "%s", freed_msg);
  opctx_free(&o);
  free(gin);
  return st;
}

static kn_status run_custom(kn__node *n, kn_tensor **gout, const bool *needs,
                            kn_tensor **grads, bool create_graph) {
  kn_tensor **gin = calloc((size_t)(n->nin ? n->nin : 1), sizeof *gin);
  if (!gin) return kn__oom();
  kn_status st = n->custom(n->ctx, gout, n->nout, gin, needs, n->nin, create_graph);
  for (int k = 0; st == KN_OK && k < n->nin; k++) {
    if (!needs[k] || !gin[k]) continue;
    const struct kn__tmeta *m = &n->in_meta[k];
    bool ok = gin[k]->ndim == m->ndim;
    for (int d = 0; ok && d < m->ndim; d++) ok = gin[k]->sizes[d] == m->sizes[d];
    if (!ok) {
      char a[160], b[160];
      kn__format_sizes(gin[k]->ndim, gin[k]->sizes, a, sizeof a);
      kn__format_sizes(m->ndim, m->sizes, b, sizeof b);
      st = kn__error(KN_EAUTOGRAD, "Function %s returned an invalid gradient at index %d - got "
                     "%s but expected shape compatible with %s", kn__node_name(n), k, a, b);
    } else {
      grads[k] = kn_retain(gin[k]);
    }
  }
  free(gin);
  return st;
}

/* PyTorch's layout contract for a stolen gradient: contiguous, or strided
** exactly like its leaf. Anything else (a transposed or expanded view) is
** copied to a contiguous buffer, so that .grad never makes the optimizer's
** update walk memory out of order. */
static bool layout_ok(const kn_tensor *g, const kn_tensor *leaf) {
  if (kn_is_contiguous(g)) return true;
  for (int d = 0; d < g->ndim; d++)
    if (g->strides[d] != leaf->strides[d] && g->sizes[d] > 1) return false;
  return true;
}

/* AccumulateGrad: leaf.grad (+)= g. */
static kn_status run_accum(kn__node *n, kn_tensor *g, bool create_graph) {
  kn_tensor *leaf = n->leaf;
  if (!g) return KN_OK;
  if (!same_sizes(g, leaf)) return shape_error("AccumulateGrad", 0, g, leaf);
  kn_tensor *next;
  bool fresh;
  if (leaf->grad) {
    next = grad_sum(leaf->grad, g, create_graph, &fresh);
  } else if (create_graph || (atomic_load(&g->refcount) == 1 &&
                              atomic_load(&g->storage->refcount) == 1 && !g->grad_fn &&
                              layout_ok(g, leaf))) {
    next = kn_retain(g); /* nobody else sees this buffer: steal it */
  } else {
    next = kn__contiguous_copy(g, leaf->dtype);
  }
  if (!next) return kn_last_status();
  kn_set_grad(leaf, next);
  kn_release(next);
  return leaf->acc_hooks ? kn__run_acc_hooks(leaf) : KN_OK;
}

static kn_status execute_node(run *r, int gi);

static _Thread_local int64_t current_seq = -1;

int64_t kn__autograd_current_seq(void) { return current_seq; }

/* Execute gnode gi, then free its gradient buffers (as PyTorch: a node's
** incoming gradients die once it ran, keeping peak memory low). */
static kn_status execute(run *r, int gi) {
  int64_t outer = current_seq;
  uint64_t seq = r->g[gi].node->seq;
  current_seq = seq == UINT64_MAX ? -1 : (int64_t)seq;
  kn_status st = execute_node(r, gi);
  current_seq = outer;
  for (int i = 0; i < r->g[gi].node->nout; i++) {
    kn_release(r->g[gi].buf[i]);
    r->g[gi].buf[i] = NULL;
    r->g[gi].own[i] = false;
  }
  return st;
}

/* Run gnode gi: captures, retained grads, the node's function, then pass
** its input gradients along its edges. */
static kn_status execute_node(run *r, int gi) {
  gnode *g = &r->g[gi];
  kn__node *n = g->node;
  for (int c = 0; c < r->ncaps; c++)
    if (r->caps[c].node == n && g->buf[r->caps[c].input_nr] && !r->cap_out[c])
      r->cap_out[c] = kn_retain(g->buf[r->caps[c].input_nr]);
  for (int i = 0; r->accumulate && i < n->nretained; i++) {
    kn_tensor *t = n->retained[i];
    kn_tensor *gb = g->buf[t->output_nr];
    if (!gb) continue;
    bool fresh;
    kn_tensor *s = t->grad ? grad_sum(t->grad, gb, r->create_graph, &fresh) : kn_retain(gb);
    if (!s) return kn_last_status();
    kn_set_grad(t, s);
    kn_release(s);
  }
  bool any = false;
  for (int i = 0; i < n->nout; i++) any = any || g->buf[i];
  kn_status st = KN_OK;
  if (n->kind == KN__NODE_ACCUM) {
    if (r->accumulate) st = run_accum(n, g->buf[0], r->create_graph);
    return st;
  }
  int nin = n->nin;
  bool any_need = false;
  bool *needs = calloc((size_t)(nin ? nin : 1), sizeof *needs);
  kn_tensor **grads = calloc((size_t)(nin ? nin : 1), sizeof *grads);
  if (!needs || !grads) st = kn__oom();
  for (int k = 0; st == KN_OK && k < nin; k++) {
    kn__node *nx = n->next[k].fn;
    needs[k] = nx && r->g[find(r, nx)].needed;
    any_need = any_need || needs[k];
  }
  bool direct = false; /* a select/slice gradient went straight into its buffer */
  if (st == KN_OK && any && any_need && !r->create_graph && nin == 1 && needs[0] &&
      n->kind == KN__NODE_OP && (st = check_stale_view(n)) == KN_OK) {
    int ti = find(r, n->next[0].fn), k = n->next[0].input_nr;
    st = kn__slice_grad_accumulate(n, g->buf[0], &r->g[ti].buf[k], &r->g[ti].own[k], &direct);
  }
  if (st == KN_OK && any && any_need && !direct) {
    kn_scope_begin();
    bool prev = kn_set_grad_enabled(r->create_graph);
    if (n->kind == KN__NODE_OP) st = kn__run_op(n, g->buf, needs, grads, r->create_graph);
    else if (n->kind == KN__NODE_CUSTOM)
      st = run_custom(n, g->buf, needs, grads, r->create_graph);
    else st = kn__copyslices_backward(n, g->buf[0], needs, grads, r->create_graph);
    kn_set_grad_enabled(prev);
    kn_scope_end();
  }
  if (st == KN_OK && !r->retain_graph) kn__node_release_saved(n);
  for (int k = 0; st == KN_OK && k < nin; k++) {
    if (!needs[k]) continue;
    int ti = find(r, n->next[k].fn);
    int in = n->next[k].input_nr;
    if (grads[k]) st = accumulate(&r->g[ti].buf[in], &r->g[ti].own[in], grads[k], r->create_graph);
    if (st == KN_OK && --r->g[ti].deps == 0) heap_push(r, ti);
  }
  for (int k = 0; grads && k < nin; k++) kn_release(grads[k]);
  free(grads);
  free(needs);
  return st;
}

/* ---- a run ----------------------------------------------------------------------------------- */

static void run_free(run *r) {
  for (int i = 0; i < r->n; i++) {
    for (int k = 0; k < r->g[i].node->nout; k++) kn_release(r->g[i].buf[k]);
    free(r->g[i].buf);
    free(r->g[i].own);
  }
  free(r->g);
  free(r->heap);
  kn__hm_fini(&r->index);
  for (int i = 0; i < r->nroots; i++) kn__node_release(r->roots[i].fn);
  free(r->roots);
  free(r->finals);
}

kn_status kn_autograd_queue_callback(kn_backward_final_fn fn, void *ud) {
  run *r = cur_run;
  if (!fn)
    return kn__error(KN_EINVAL, "kn_autograd_queue_callback: expected a callback, found NULL");
  if (!r)
    return kn__error(KN_ESTATE, "kn_autograd_queue_callback: final callbacks can only be "
                     "installed during the backward pass (from a hook), found no backward "
                     "running on this thread");
  if (r->nfinals == r->capfinals) {
    int cap = r->capfinals ? r->capfinals * 2 : 4;
    final_cb *f = realloc(r->finals, (size_t)cap * sizeof *f);
    if (!f) return kn__oom();
    r->finals = f;
    r->capfinals = cap;
  }
  r->finals[r->nfinals++] = (final_cb){fn, ud};
  return KN_OK;
}

/* The final callbacks, in queue order (those they queue included), each
** told the backward's status; the first failure becomes the backward's. */
static kn_status run_finals(run *r, kn_status st) {
  for (int i = 0; i < r->nfinals; i++) {
    kn_status cs = r->finals[i].fn(r->finals[i].ud, st);
    if (st == KN_OK && cs != KN_OK) st = cs;
  }
  return st;
}

/* Check one root and its gradient (NULL: implicit ones). On success *go is
** an owned reference. */
static kn_status root_grad(kn_tensor *t, kn_tensor *given, int i, kn_tensor **go) {
  *go = NULL;
  if (!t) {
    char h[KN__HINT_CAP];
    return kn__error(KN_EINVAL, "backward: output %d is NULL%s", i, kn__error_hint(h, sizeof h));
  }
  if (!t->requires_grad)
    return kn__error(KN_EAUTOGRAD,
                     "element %d of tensors does not require grad and does not have a grad_fn",
                     i);
  if (given) {
    if (!same_sizes(given, t)) {
      char a[160], b[160];
      kn__format_sizes(given->ndim, given->sizes, a, sizeof a);
      kn__format_sizes(t->ndim, t->sizes, b, sizeof b);
      return kn__error(KN_ESHAPE,
                       "Mismatch in shape: grad_output[%d] has a shape of torch.Size(%s) and "
                       "output[%d] has a shape of torch.Size(%s).", i, a, i, b);
    }
    *go = kn_retain(given);
    return KN_OK;
  }
  if (kn__numel(t->ndim, t->sizes) != 1)
    return kn__error(KN_EAUTOGRAD, "grad can be implicitly created only for scalar outputs");
  kn_device dev = t->device == KN_META ? KN_META : kn__tensor_on_cuda(t) ? KN_CUDA : KN_CPU;
  *go = kn__empty(t->ndim, t->sizes, t->dtype, dev);
  if (!*go) return kn_last_status();
  unsigned char one[8] = {0};
  kn__store_double(one, t->dtype, 1.0);
  kn_status st = KN_OK;
  if (dev == KN_CUDA) st = kn__cuda_fill(*go, one);
  else if (dev == KN_CPU) memcpy(kn_data(*go), one, kn_dtype_size(t->dtype));
  if (st != KN_OK) {
    kn_release(*go);
    *go = NULL;
  }
  return st;
  return KN_OK;
}

static kn_status engine_run(run *r, kn_tensor *const *outputs, int n,
                            kn_tensor *const *grad_outputs) {
  kn__node **roots = calloc((size_t)(n > 0 ? n : 1), sizeof *roots);
  kn__edge *edges = calloc((size_t)(n > 0 ? n : 1), sizeof *edges);
  r->roots = edges;
  r->nroots = edges ? n : 0;
  kn_tensor **gos = calloc((size_t)(n > 0 ? n : 1), sizeof *gos);
  kn_status st = roots && edges && gos ? KN_OK : kn__oom();
  for (int i = 0; st == KN_OK && i < n; i++) {
    st = root_grad(outputs[i], grad_outputs ? grad_outputs[i] : NULL, i, &gos[i]);
    if (st == KN_OK) st = kn__gradient_edge(outputs[i], &edges[i]);
    roots[i] = edges[i].fn;
  }
  if (st == KN_OK) st = discover(r, roots, n);
  if (st == KN_OK && !(r->heap = malloc(sizeof *r->heap * (size_t)(r->n ? r->n : 1))))
    st = kn__oom();
  for (int i = 0; st == KN_OK && i < n; i++) {
    int gi = find(r, roots[i]);
    int k = edges[i].input_nr;
    if (r->g[gi].needed) st = accumulate(&r->g[gi].buf[k], &r->g[gi].own[k], gos[i], r->create_graph);
  }
  for (int i = 0; st == KN_OK && i < n; i++) {
    int gi = find(r, roots[i]);
    if (r->g[gi].needed && r->g[gi].deps == 0 && !r->g[gi].queued) heap_push(r, gi);
  }
  r->outer = cur_run;
  cur_run = r;
  while (st == KN_OK && r->nheap > 0) st = execute(r, heap_pop(r));
  st = run_finals(r, st);
  cur_run = r->outer;
  for (int i = 0; gos && i < n; i++) kn_release(gos[i]);
  free(roots);
  free(gos);
  return st;
}

/* A call on a value of a compiled function being traced: a graph break
** (the capture frontend runs it on the real values), or KN__FAKE_PASS. */
static kn_status traced_call(const kn__autograd_call *c) {
  const kn__fake_hooks *h = NULL;
  for (int i = 0; i < c->n && !h; i++) {
    h = kn__fake_hooks_for(c->outputs[i]);
    if (!h && c->grad_outputs && c->grad_outputs[i]) h = kn__fake_hooks_for(c->grad_outputs[i]);
  }
  for (int j = 0; j < c->m && !h; j++) h = kn__fake_hooks_for(c->inputs[j]);
  return h ? h->autograd(c) : KN__FAKE_PASS;
}

kn_status kn_backward_ex(kn_tensor *t, kn_tensor *grad, bool retain_graph, bool create_graph) {
  if (KN__HANDLES_CHECKED() && ((t && kn__handle_check(t, "kn_backward", "the tensor")) ||
                                (grad && kn__handle_check(grad, "kn_backward", "the gradient"))))
    return kn_last_status();
  kn__autograd_call c = {.outputs = &t, .n = 1, .grad_outputs = grad ? &grad : NULL,
                         .retain_graph = retain_graph, .create_graph = create_graph};
  kn_status hs = traced_call(&c);
  if (hs != KN__FAKE_PASS) return hs;
  run r;
  memset(&r, 0, sizeof r);
  kn__hm_init(&r.index, false);
  r.retain_graph = retain_graph;
  r.create_graph = create_graph;
  r.accumulate = true;
  kn_status st = engine_run(&r, &t, 1, grad ? &grad : NULL);
  run_free(&r);
  return st;
}

kn_status kn_backward(kn_tensor *t, kn_tensor *grad) {
  return kn_backward_ex(t, grad, false, false);
}

kn_status kn_autograd_grad(kn_tensor *const *outputs, int n, kn_tensor *const *inputs, int m,
                           kn_tensor *const *grad_outputs, bool retain_graph,
                           bool create_graph, bool allow_unused, kn_tensor **out_grads) {
  if (!out_grads) return kn__error(KN_EINVAL, "grad: the output array out_grads is NULL");
  for (int j = 0; j < m; j++) out_grads[j] = NULL;
  if (n <= 0 || m <= 0 || !outputs || !inputs)
    return kn__error(KN_EINVAL, "grad requires at least one output and one input (got %d%s and "
                     "%d%s)", n, outputs ? "" : " at NULL", m, inputs ? "" : " at NULL");
  if (KN__HANDLES_CHECKED() &&
      (kn__handle_check_list(outputs, n, "kn_autograd_grad", "output") ||
       kn__handle_check_list(inputs, m, "kn_autograd_grad", "input") ||
       kn__handle_check_list(grad_outputs, n, "kn_autograd_grad", "grad_output")))
    return kn_last_status();
  kn__autograd_call c = {outputs, n, inputs, m, grad_outputs, retain_graph, create_graph,
                         allow_unused, out_grads};
  kn_status hs = traced_call(&c);
  if (hs != KN__FAKE_PASS) return hs;
  run r;
  memset(&r, 0, sizeof r);
  kn__hm_init(&r.index, false);
  r.retain_graph = retain_graph;
  r.create_graph = create_graph;
  r.caps = calloc((size_t)m, sizeof *r.caps);
  r.cap_out = out_grads;
  r.ncaps = m;
  kn_status st = r.caps ? KN_OK : kn__oom();
  for (int j = 0; st == KN_OK && j < m; j++) {
    kn_tensor *x = inputs[j];
    if (!x) st = kn__error(KN_EINVAL, "grad: input %d is NULL", j);
    else if (!x->requires_grad)
      st = kn__error(KN_EAUTOGRAD, "One of the differentiated Tensors does not require grad");
    else {
      kn__edge e;
      st = kn__gradient_edge(x, &e);
      r.caps[j] = (capture){e.fn, e.input_nr}; /* owned until the run ends */
    }
  }
  if (st == KN_OK) st = engine_run(&r, outputs, n, grad_outputs);
  for (int j = 0; st == KN_OK && j < m; j++) {
    if (!out_grads[j] && !allow_unused)
      st = kn__error(KN_EAUTOGRAD, "One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.");
  }
  if (st == KN_OK) st = kn__autorelease_many(out_grads, m);
  for (int j = 0; st != KN_OK && j < m; j++) {
    kn_release(out_grads[j]);
    out_grads[j] = NULL;
  }
  run_free(&r);
  for (int j = 0; r.caps && j < m; j++) kn__node_release(r.caps[j].node);
  free(r.caps);
  return st;
}
