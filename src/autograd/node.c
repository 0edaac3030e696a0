/*
** autograd/node.c: grad_fn nodes: creation while ops run (record), the
** in-place checks, gradient edges and AccumulateGrad, custom nodes, saved
** tensors and their version check, retain_grad, detach, and releasing
** nodes without deep recursion (a long chain is freed iteratively).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "cuda/cuda.h"
#include "kiln/cuda.h"
#include "kiln/autograd.h"
#include "ops/iter.h"
#include "tensor/handles.h"

/* Like PyTorch's sequence_nr: a per-thread increasing counter. */
static _Thread_local uint64_t seq_counter;

uint64_t kn__next_seq(void) { return seq_counter++; }

uint64_t kn__peek_seq(void) { return seq_counter; }

int64_t kn_grad_fn_seq_nr(const kn_tensor *t) {
  if (!t || !t->grad_fn || t->grad_fn->seq == UINT64_MAX) return -1;
  return (int64_t)t->grad_fn->seq;
}

/* ---- allocation and release --------------------------------------------------- */

kn__node *kn__node_alloc(kn__node_kind kind, int nin, int nout) {
  kn__node *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  atomic_init(&n->refcount, 1);
  n->kind = kind;
  n->nin = nin;
  n->nout = nout;
  n->next = calloc((size_t)(nin > 0 ? nin : 1), sizeof *n->next);
  n->out_dtype = calloc((size_t)(nout > 0 ? nout : 1), sizeof *n->out_dtype);
  if (!n->next || !n->out_dtype) {
    free(n->next);
    free(n->out_dtype);
    free(n);
    return NULL;
  }
  return n;
}

void kn__node_retain(kn__node *n) {
  if (n) atomic_fetch_add(&n->refcount, 1);
}

/* Free the tensors and arrays of a saved call. */
static void call_free(kn__call *c) {
  for (int i = 0; i < c->nargs; i++) {
    kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR) {
      kn_release(a->u.t);
    } else if (a->kind == KN__A_TENSORS) {
      for (int j = 0; j < a->u.ts.n; j++) kn_release(a->u.ts.v[j]);
      free((void *)a->u.ts.v);
    } else if (a->kind == KN__A_INTS) {
      free((void *)a->u.ints.v);
    }
    free((void *)a->sym);
  }
  c->nargs = 0;
}

/* A metadata-only stand-in for a saved tensor (same sizes, strides, dtype). */
kn_tensor *kn__saved_stand_in(const kn_tensor *t) {
  return kn__empty_strided(t->ndim, t->sizes, t->strides, t->dtype, KN_META);
}

void kn__node_release_saved(kn__node *n) {
  if (n->kind == KN__NODE_COPYSLICES) kn__node_release_saved(n->cs->fn);
  if (n->kind != KN__NODE_OP || n->released) return;
  n->released = true;
  /* Values are freed; shapes stay (as meta stand-ins), so rules that only
  ** need sizes still run, as PyTorch's nodes that save only sizes. */
  int flat = 0;
  for (int i = 0; i < n->call.nargs; i++) {
    kn__arg *a = &n->call.args[i];
    int cnt = a->kind == KN__A_TENSOR ? 1 : a->kind == KN__A_TENSORS ? a->u.ts.n : 0;
    kn_tensor **slot = a->kind == KN__A_TENSOR ? &a->u.t : (kn_tensor **)a->u.ts.v;
    for (int j = 0; j < cnt; j++, flat++) {
      kn_tensor *old = slot[j];
      slot[j] = old ? kn__saved_stand_in(old) : NULL;
      n->in_info[flat].check = false;
      kn_release(old);
    }
  }
  for (int i = 0; i < n->nout; i++) {
    kn_tensor *old = n->saved_out[i];
    n->saved_out[i] = old ? kn__saved_stand_in(old) : NULL;
    n->out_info[i].check = false;
    kn_release(old);
  }
}

/* Destroy one node whose count reached zero; release its edges' nodes
** (queued, since this runs inside the release loop). */
static void node_destroy(kn__node *n) {
  for (int k = 0; k < n->nin; k++) kn__node_release(n->next[k].fn);
  if (n->kind == KN__NODE_OP) {
    call_free(&n->call);
    for (int i = 0; n->saved_out && i < n->nout; i++) kn_release(n->saved_out[i]);
  }
  if (n->leaf) {
    if (n->leaf->grad_acc == n) n->leaf->grad_acc = NULL;
    kn_release(n->leaf);
  }
  if (n->ctx_free) n->ctx_free(n->ctx);
  if (n->cs) {
    kn__node_release(n->cs->fn); /* queued: we are inside the release loop */
    free(n->cs);
  }
  free(n->saved_out);
  free(n->in_info);
  free(n->out_info);
  free(n->retained);
  free(n->in_meta);
  free(n->next);
  free(n->out_dtype);
  free(n);
}

/* Releasing a node can release tensors that release nodes: nested calls
** only drop their reference and, when it was the last one, queue the node
** on an intrusive list (no allocation, so freeing never fails); the
** outermost call drains the list. */
static _Thread_local struct {
  kn__node *head;
  bool active;
} rel;

void kn__node_release(kn__node *n) {
  if (!n || atomic_fetch_sub(&n->refcount, 1) != 1) return;
  n->rel_next = rel.head;
  rel.head = n;
  if (rel.active) return;
  rel.active = true;
  while (rel.head) {
    kn__node *cur = rel.head;
    rel.head = cur->rel_next;
    node_destroy(cur);
  }
  rel.active = false;
}

/* ---- names ---------------------------------------------------------------------- */

const char *kn__node_name(const kn__node *n) {
  if (!n) return "";
  switch (n->kind) {
  case KN__NODE_OP: return n->call.op->grad_fn_name;
  case KN__NODE_ACCUM: return "AccumulateGrad";
  case KN__NODE_COPYSLICES: return "CopySlices";
  default: return n->name ? n->name : "CustomBackward";
  }
}

const char *kn__torch_type_name(kn_dtype dt) {
  static const char *const names[KN_DTYPE_COUNT] = {
      [KN_BOOL] = "torch.BoolTensor",     [KN_UINT8] = "torch.ByteTensor",
      [KN_INT8] = "torch.CharTensor",     [KN_INT16] = "torch.ShortTensor",
      [KN_INT32] = "torch.IntTensor",     [KN_INT64] = "torch.LongTensor",
      [KN_FLOAT16] = "torch.HalfTensor",  [KN_BFLOAT16] = "torch.BFloat16Tensor",
      [KN_FLOAT32] = "torch.FloatTensor", [KN_FLOAT64] = "torch.DoubleTensor"};
  return (unsigned)dt < KN_DTYPE_COUNT ? names[dt] : "torch.Tensor";
}

/* ---- edges and AccumulateGrad ------------------------------------------------------ */

kn_status kn__gradient_edge(kn_tensor *t, kn__edge *out) {
  out->fn = NULL;
  out->input_nr = 0;
  if (!t || !t->requires_grad) return KN_OK;
  if (t->grad_fn) {
    kn__node_retain(t->grad_fn);
    out->fn = t->grad_fn;
    out->input_nr = t->output_nr;
    return KN_OK;
  }
  if (t->grad_acc) {
    kn__node_retain(t->grad_acc);
    out->fn = t->grad_acc;
    return KN_OK;
  }
  kn__node *a = kn__node_alloc(KN__NODE_ACCUM, 0, 1);
  if (!a) return kn__oom();
  a->seq = UINT64_MAX; /* accumulate as soon as ready, as PyTorch */
  a->leaf = kn_retain(t);
  a->out_dtype[0] = t->dtype;
  t->grad_acc = a; /* weak: the node owns the leaf, not the reverse */
  out->fn = a;
  return KN_OK;
}

/* ---- retain_grad bookkeeping ---------------------------------------------------- */

static bool retained_add(kn__node *n, kn_tensor *t) {
  if (n->nretained == n->capretained) {
    int nc = n->capretained ? n->capretained * 2 : 2;
    kn_tensor **nr = realloc(n->retained, (size_t)nc * sizeof *nr);
    if (!nr) return false;
    n->retained = nr;
    n->capretained = nc;
  }
  n->retained[n->nretained++] = t;
  return true;
}

static void retained_remove(kn__node *n, const kn_tensor *t) {
  for (int i = 0; n && i < n->nretained; i++)
    if (n->retained[i] == t) {
      n->retained[i] = n->retained[--n->nretained];
      return;
    }
}

void kn__autograd_forget(kn_tensor *t) {
  if (t->retains_grad) retained_remove(t->grad_fn, t);
  t->retains_grad = false;
}

kn_status kn_retain_grad(kn_tensor *t) {
  if (!t) return kn__error(KN_EINVAL, "retain_grad: tensor is NULL");
  if (KN__HANDLES_CHECKED() && kn__handle_check(t, "kn_retain_grad", "the tensor"))
    return kn_last_status();
  const kn__fake_hooks *h = kn__fake_hooks_for(t);
  kn_status hs = h ? h->refuse(t, "kn_retain_grad") : KN__FAKE_PASS;
  if (hs != KN__FAKE_PASS) return hs;
  if (!t->requires_grad)
    return kn__error(KN_EAUTOGRAD, "can't retain_grad on Tensor that has requires_grad=False");
  if (!t->grad_fn || t->retains_grad) return KN_OK; /* leaves keep .grad anyway */
  if (!retained_add(t->grad_fn, t)) return kn__oom();
  t->retains_grad = true;
  return KN_OK;
}

/* Make n the history of t (output output_nr). Takes a new reference to n. */
kn_status kn__set_history(kn_tensor *t, kn__node *n, int output_nr) {
  if (t->retains_grad) {
    retained_remove(t->grad_fn, t);
    if (!retained_add(n, t)) {
      t->retains_grad = false;
      return kn__oom();
    }
  }
  kn__node_retain(n);
  kn__node *old = t->grad_fn;
  t->grad_fn = n;
  t->output_nr = output_nr;
  t->requires_grad = true;
  kn__node_release(old);
  return KN_OK;
}

kn_status kn__node_set_output(kn__node *n, kn_tensor *t, int output_nr) {
  if (!n || !t || output_nr < 0 || output_nr >= n->nout)
    return kn__error(KN_EINVAL, "set_output: bad node, tensor or output index %d", output_nr);
  if (!kn_dtype_is_floating(t->dtype))
    return kn__error(KN_EAUTOGRAD, "only Tensors of floating point dtype can require "
                                   "gradients (got %s)", kn_dtype_name(t->dtype));
  n->out_dtype[output_nr] = t->dtype;
  return kn__set_history(t, n, output_nr);
}

/* ---- saved tensors ----------------------------------------------------------------- */

static kn__saved_info info_of(const kn_tensor *t, bool check) {
  kn__saved_info i = {0, NULL, NULL, 0, check};
  if (!t) return i;
  i.version = kn_tensor_version(t);
  i.grad_fn = t->grad_fn ? kn__node_name(t->grad_fn) : NULL;
  i.node = t->grad_fn;
  i.output_nr = t->output_nr;
  return i;
}

kn__saved_info kn__saved_info_of(const kn_tensor *t) { return info_of(t, true); }

kn_status kn__saved_version_error(const kn__node *n, const kn_tensor *t,
                                  const kn__saved_info *info) {
  (void)n;
  if (!t || !info->check || kn_tensor_version(t) == info->version) return KN_OK;
  char sizes[160], which[160] = "";
  kn__format_sizes(t->ndim, t->sizes, sizes, sizeof sizes);
  if (info->grad_fn)
    snprintf(which, sizeof which, ", which is output %d of %s,", info->output_nr,
             info->grad_fn);
  return kn__error(KN_EAUTOGRAD,
                   "one of the variables needed for gradient computation has been modified by "
                   "an inplace operation: [%s %s]%s is at version %llu; expected version %llu "
                   "instead. Hint: the tensor was modified in place after it was saved for "
                   "backward; use the out-of-place op, or clone the tensor before modifying it.",
                   kn__torch_type_name(t->dtype), sizes, which,
                   (unsigned long long)kn_tensor_version(t),
                   (unsigned long long)info->version);
}

/* ---- the pre-image of in-place ops ------------------------------------------------- */

/* An in-place op overwrites args[0]; rules may need its old value (mul_).
** check_inplace copies it into a plain buffer (not a tensor, so a failing op
** leaves no live tensor behind); record turns it into the saved input. */
static _Thread_local struct {
  const kn__call *call;
  void *data;
  size_t nbytes;
} pre;

static void pre_clear(void) {
  free(pre.data);
  pre.data = NULL;
  pre.call = NULL;
}

static kn_status pre_save(const kn__call *c) {
  pre_clear();
  kn_tensor *self = c->args[0].u.t;
  if (self->device == KN_META || self->is_fake) {
    pre.call = c;
    return KN_OK;
  }
  kn_tensor *copy = kn__contiguous_copy(self, self->dtype);
  if (!copy) return kn_last_status();
  pre.nbytes = (size_t)kn__numel(copy->ndim, copy->sizes) * kn_dtype_size(copy->dtype);
  pre.data = malloc(pre.nbytes ? pre.nbytes : 1);
  kn_status st = pre.data ? KN_OK : kn__oom();
  if (st == KN_OK && kn__tensor_on_cuda(copy)) /* the pre-image of device memory, on the host */
    st = kn__cuda_memcpy(pre.data, KN_CPU, kn_cuda_data_ptr(copy), KN_CUDA, pre.nbytes);
  else if (st == KN_OK) memcpy(pre.data, kn_data(copy), pre.nbytes);
  kn_release(copy);
  if (st != KN_OK) {
    pre_clear();
    return st;
  }
  pre.call = c;
  return KN_OK;
}

/* The saved pre-image as a tensor without history, or NULL (error). */
static kn_tensor *pre_take(const kn__call *c) {
  kn_tensor *self = c->args[0].u.t;
  bool meta = self->device == KN_META || self->is_fake;
  if (pre.call != c || (!meta && !pre.data)) {
    kn__error(KN_EINTERNAL, "%s: in-place pre-image missing", c->op->name);
    return NULL;
  }
  bool cuda = kn__tensor_on_cuda(self);
  kn_tensor *t = kn__empty(self->ndim, self->sizes, self->dtype,
                           meta ? KN_META : cuda ? KN_CUDA : KN_CPU);
  if (t && cuda && kn__cuda_memcpy(kn_cuda_data_ptr(t), KN_CUDA, pre.data, KN_CPU, pre.nbytes)) {
    kn_release(t);
    t = NULL;
  } else if (t && !meta && !cuda) {
    memcpy(kn_data(t), pre.data, pre.nbytes);
  }
  if (t && self->is_fake) {
    t->is_fake = true;
    t->device = KN_CPU;
  }
  pre_clear();
  return t;
}

static bool is_view_node(const kn__node *n) {
  return n && n->kind == KN__NODE_OP && (n->call.op->flags & KN_OPF_VIEW);
}

/* In-place on a view with history: the base's history is rewritten
** (CopySlices, see copyslices.c). A view of a leaf that requires grad is
** refused as in PyTorch; so is a view whose base cannot be found (its
** graph was freed). */
static kn_status check_view(const kn__call *c, const kn_tensor *self) {
  if (!is_view_node(self->grad_fn)) return KN_OK;
  const kn_tensor *base = kn__view_base(self);
  if (base && base->requires_grad && !base->grad_fn)
    return kn__error(KN_EAUTOGRAD, "a view of a leaf Variable that requires grad is being used "
                                   "in an in-place operation.");
  if (base && base->grad_fn && kn_same_storage(base, self) && base->device != KN_META &&
      !base->is_fake)
    return KN_OK;
  return kn__error(KN_EUNSUPPORTED,
                   "%s: in-place modification of this view (output of %s) is not supported: "
                   "its base is unknown (graph freed) or has no history; use the out-of-place "
                   "op", c->op->name, kn__node_name(self->grad_fn));
}

kn_status kn__autograd_check_inplace(const kn__call *c) {
  kn_tensor *self = c->args[0].u.t;
  if (self && self->requires_grad && !self->grad_fn)
    return kn__error(KN_EAUTOGRAD,
                     "a leaf Variable that requires grad is being used in an in-place "
                     "operation.");
  kn_status st = self ? check_view(c, self) : KN_OK;
  if (st != KN_OK) return st;
  if (self && kn__autograd_needed(c)) return pre_save(c);
  return KN_OK;
}

/* ---- recording ------------------------------------------------------------------------ */

/* A copy of an argument's symbols (1, or one per list entry). Owned or NULL. */
static const kn_sym *sym_copy(const kn__arg *a) {
  size_t n = a->kind == KN__A_INTS ? (size_t)a->u.ints.n : 1;
  kn_sym *s = malloc((n ? n : 1) * sizeof *s);
  if (s && n) memcpy(s, a->sym, n * sizeof *s);
  return s;
}

/* Deep-copy the call: tensors retained, lists copied. in-place: inputs that
** are args[0] become `pre` (a reference is taken for each use). */
static kn_status call_copy(kn__call *dst, const kn__call *src, kn_tensor *self_pre) {
  dst->op = src->op;
  dst->nargs = 0;
  kn_tensor *self = self_pre ? src->args[0].u.t : NULL;
  for (int i = 0; i < src->nargs; i++) {
    kn__arg a = src->args[i];
    if (a.sym && !(a.sym = sym_copy(&src->args[i]))) return kn__oom();
    if (a.kind == KN__A_TENSOR) {
      a.u.t = kn_retain(a.u.t && a.u.t == self ? self_pre : a.u.t);
    } else if (a.kind == KN__A_TENSORS) {
      kn_tensor **v = malloc((size_t)(a.u.ts.n ? a.u.ts.n : 1) * sizeof *v);
      if (!v) return free((void *)a.sym), kn__oom();
      for (int j = 0; j < a.u.ts.n; j++)
        v[j] = kn_retain(a.u.ts.v[j] == self && self ? self_pre : a.u.ts.v[j]);
      a.u.ts.v = v;
    } else if (a.kind == KN__A_INTS) {
      int64_t *v = malloc((size_t)(a.u.ints.n ? a.u.ints.n : 1) * sizeof *v);
      if (!v) return free((void *)a.sym), kn__oom();
      if (a.u.ints.n) memcpy(v, a.u.ints.v, (size_t)a.u.ints.n * sizeof *v);
      a.u.ints.v = v;
    }
    dst->args[dst->nargs++] = a;
  }
  return KN_OK;
}

/* A new alias of t without history (shares storage and version). */
static kn_tensor *alias_of(kn_tensor *t) { return kn__tensor_alias(t); }

static kn_status record_saved(kn__node *n, const kn__call *c, kn__outs *out,
                              kn_tensor *self_pre) {
  kn_status st = call_copy(&n->call, c, self_pre);
  if (st != KN_OK) return st;
  for (int k = 0; k < n->nin; k++) {
    kn_tensor *t = kn__call_input(&n->call, k);
    n->in_info[k] = info_of(t, t != self_pre || !self_pre);
  }
  for (int i = 0; i < n->nout; i++) {
    n->saved_out[i] = alias_of(out->t[i]);
    if (!n->saved_out[i]) return kn__oom();
    n->out_info[i] = info_of(out->t[i], true);
    n->out_info[i].grad_fn = kn__node_name(n);
    n->out_info[i].output_nr = i;
    n->out_dtype[i] = out->t[i]->dtype;
    n->on_meta = n->on_meta || out->t[i]->device == KN_META || out->t[i]->is_fake;
  }
  return KN_OK;
}

kn_status kn__autograd_record(const kn__call *c, kn__outs *out) {
  bool inplace = (c->op->flags & KN_OPF_INPLACE) != 0;
  kn_tensor *self_pre = NULL;
  if (inplace && !(self_pre = pre_take(c))) return kn_last_status();
  int nin = kn__call_ninputs(c);
  kn__node *n = kn__node_alloc(KN__NODE_OP, nin, out->n);
  kn_status st = n ? KN_OK : kn__oom();
  if (st == KN_OK) {
    n->call.op = c->op;
    n->seq = kn__next_seq();
    n->in_info = calloc((size_t)(nin ? nin : 1), sizeof *n->in_info);
    n->out_info = calloc((size_t)(out->n ? out->n : 1), sizeof *n->out_info);
    n->saved_out = calloc((size_t)(out->n ? out->n : 1), sizeof *n->saved_out);
    if (!n->in_info || !n->out_info || !n->saved_out) st = kn__oom();
  }
  for (int k = 0; st == KN_OK && k < nin; k++)
    st = kn__gradient_edge(kn__call_input(c, k), &n->next[k]);
  if (st == KN_OK) st = record_saved(n, c, out, self_pre);
  kn_release(self_pre);
  kn_tensor *self = inplace ? c->args[0].u.t : NULL;
  if (st == KN_OK && self && is_view_node(self->grad_fn))
    return kn__copyslices_record(n, self, kn__view_base(self)); /* consumes n */
  for (int i = 0; st == KN_OK && i < out->n; i++)
    if (kn_dtype_is_floating(out->t[i]->dtype)) st = kn__set_history(out->t[i], n, i);
  kn__node_release(n); /* the outputs hold it now */
  return st;
}

/* ---- custom nodes ------------------------------------------------------------------- */

kn__node *kn__node_new_custom(const char *name, kn__custom_backward fn, void *ctx,
                              void (*ctx_free)(void *), kn_tensor *const *inputs, int nin,
                              int nout) {
  kn__node *n = kn__node_alloc(KN__NODE_CUSTOM, nin, nout);
  if (!n) {
    if (ctx_free) ctx_free(ctx);
    kn__oom();
    return NULL;
  }
  n->seq = kn__next_seq();
  n->name = name;
  n->custom = fn;
  n->ctx = ctx;
  n->ctx_free = ctx_free;
  n->in_meta = calloc((size_t)(nin ? nin : 1), sizeof *n->in_meta);
  if (!n->in_meta) {
    kn__node_release(n);
    kn__oom();
    return NULL;
  }
  for (int k = 0; k < nin; k++) {
    if (inputs && inputs[k]) {
      n->in_meta[k].ndim = inputs[k]->ndim;
      memcpy(n->in_meta[k].sizes, inputs[k]->sizes, sizeof n->in_meta[k].sizes);
    }
    if (kn__gradient_edge(inputs ? inputs[k] : NULL, &n->next[k]) != KN_OK) {
      kn__node_release(n);
      return NULL;
    }
  }
  return n;
}

/* ---- detach --------------------------------------------------------------------------- */

kn_tensor *kn_detach(kn_tensor *t) {
  if (!t) {
    char h[KN__HINT_CAP];
    kn__error(KN_EINVAL, "detach: tensor is NULL%s", kn__error_hint(h, sizeof h));
    return NULL;
  }
  const kn__fake_hooks *fh = kn__fake_hooks_for(t);
  if (fh && fh->refuse(t, "kn_detach") != KN__FAKE_PASS) return NULL;
  return kn__autorelease(alias_of(t));
}
