/*
** autograd/copyslices.c: in-place ops on views that have history. As in
** PyTorch, the view's base gets a new history, a CopySlices node wrapping
** the in-place op's node: its backward copies the base's gradient, runs the
** op's rule on the region the view covers and writes the result back; the
** view itself becomes as_strided(base). Only first-order gradients flow
** through CopySlices (double backward reports that it is unsupported).
*/
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "ops/iter.h"

static bool is_view_node(const kn__node *n) {
  return n && n->kind == KN__NODE_OP && (n->call.op->flags & KN_OPF_VIEW);
}

kn_tensor *kn__view_base(const kn_tensor *t) {
  const kn_tensor *cur = t;
  while (cur && is_view_node(cur->grad_fn)) {
    if (cur->grad_fn->released) return NULL; /* the saved base is gone */
    cur = kn__call_input(&cur->grad_fn->call, 0);
  }
  return (kn_tensor *)cur;
}

/* view's new history: a recorded as_strided(base) at the view's geometry. */
static kn_status rebase_view(kn_tensor *view, kn_tensor *base) {
  kn__call ac = {.op = &kn__ops[KN_OP_AS_STRIDED], .nargs = 4};
  ac.args[0] = KN_A_T(base);
  ac.args[1] = KN_A_INTS(view->sizes, view->ndim);
  ac.args[2] = KN_A_INTS(view->strides, view->ndim);
  ac.args[3] = KN_A_I(view->offset);
  kn__outs o;
  kn__outs_init(&o);
  if (!kn__outs_push(&o, kn_retain(view))) return kn__oom();
  kn_status st = kn__autograd_record(&ac, &o);
  kn__outs_fini(&o);
  return st;
}

kn_status kn__copyslices_record(kn__node *fn, kn_tensor *view, kn_tensor *base) {
  if (!base || !base->grad_fn || fn->nout != 1) {
    kn__node_release(fn);
    return kn__error(KN_EUNSUPPORTED, "in-place op on a view: the view's base is unknown");
  }
  kn__node *cs = kn__node_alloc(KN__NODE_COPYSLICES, fn->nin, 1);
  kn__cslice *c = cs ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    kn__node_release(cs);
    kn__node_release(fn);
    return kn__oom();
  }
  cs->cs = c;
  c->fn = fn; /* consumed */
  /* fn's edge 0 is the view's old history, which holds the base: keeping it
  ** would make a cycle (base -> CopySlices -> fn -> view node -> base), and
  ** CopySlices routes that gradient through its own edge 0 anyway. */
  kn__node_release(fn->next[0].fn);
  fn->next[0].fn = NULL;
  cs->seq = kn__next_seq();
  cs->out_dtype[0] = base->dtype;
  c->ndim = view->ndim;
  c->base_ndim = base->ndim;
  memcpy(c->sizes, view->sizes, sizeof c->sizes);
  memcpy(c->strides, view->strides, sizeof c->strides);
  c->offset = view->offset - base->offset;
  memcpy(c->base_sizes, base->sizes, sizeof c->base_sizes);
  memcpy(c->base_strides, base->strides, sizeof c->base_strides);
  kn_status st = kn__gradient_edge(base, &cs->next[0]);
  for (int k = 1; k < fn->nin; k++) {
    cs->next[k] = fn->next[k];
    kn__node_retain(cs->next[k].fn);
  }
  if (st == KN_OK) st = kn__set_history(base, cs, 0);
  kn__node_release(cs); /* base holds it now (or it dies on error) */
  if (st == KN_OK) st = rebase_view(view, base);
  return st;
}

/* Zero the elements of a (strided) tensor (on the GPU: copied from the host). */
static kn_status zero_fill(kn_tensor *t) {
  kn_tensor *z = kn__empty(t->ndim, t->sizes, t->dtype, KN_CPU);
  if (!z) return kn_last_status();
  memset(kn_data(z), 0, (size_t)kn__numel(z->ndim, z->sizes) * kn_dtype_size(z->dtype));
  kn_status st = kn__copy_into(t, z);
  kn_release(z);
  return st;
}

kn_status kn__copyslices_backward(kn__node *n, kn_tensor *g, const bool *needs,
                                  kn_tensor **grads, bool create_graph) {
  const kn__cslice *c = n->cs;
  if (!g) return KN_OK;
  if (create_graph)
    return kn__error(KN_EUNSUPPORTED, "double backward through CopySlices (an in-place op on "
                                      "a view) is not supported yet");
  kn_tensor *result = kn__empty_strided(c->base_ndim, c->base_sizes, c->base_strides,
                                        g->dtype, kn__tensor_on_cuda(g) ? KN_CUDA : KN_CPU);
  kn_tensor *slice = NULL, *gs = NULL;
  kn_tensor **fg = calloc((size_t)n->nin, sizeof *fg);
  kn_status st = result && fg ? kn__copy_into(result, g) : kn__oom();
  if (st == KN_OK && !(slice = kn__make_view(result, c->ndim, c->sizes, c->strides, c->offset)))
    st = kn_last_status();
  if (st == KN_OK && !(gs = kn__contiguous_copy(slice, slice->dtype))) st = kn_last_status();
  if (st == KN_OK) st = kn__run_op(c->fn, &gs, needs, fg, false);
  /* the region now holds the gradient w.r.t. the view's old values */
  if (st == KN_OK) st = fg[0] ? kn__copy_into(slice, fg[0]) : zero_fill(slice);
  if (st == KN_OK) {
    grads[0] = needs[0] ? kn_retain(result) : NULL;
    for (int k = 1; k < n->nin; k++) {
      grads[k] = fg[k];
      fg[k] = NULL;
    }
  }
  for (int k = 0; fg && k < n->nin; k++) kn_release(fg[k]);
  free(fg);
  kn_release(gs);
  kn_release(slice);
  kn_release(result);
  return st;
}
