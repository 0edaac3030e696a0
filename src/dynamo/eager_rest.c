/*
** dynamo/eager_rest.c: the rest of a call run eagerly. Past the cache limit,
** a call whose graph break answers differently has already run the known
** segments (their effects happened: an in-place update, a backward), and no
** new trace or compile may start. The user function is invoked again under
** the tracing mode; breaks.c replays the known segments quietly with the
** values of the run that missed, and at the break that answered differently
** switches the trace to eager (kn__trace.eager). From there on:
**   - an op call runs for real: each stand-in argument the C code still
**     holds is replaced by the real value it is bound to (its value-table
**     slot; values user code holds at a break always get one), real tensors
**     pass as they are, and the results are real tensors;
**   - kn_item, kn_print, kn_host_read, kn_backward, ... on a stand-in act on
**     its real value (breaks.c);
**   - the function's result is mapped to real values.
** Nothing is recorded, no segment is made, no backend runs.
*/
#include <stdlib.h>

#include "core/error.h"
#include "dynamo/tracer.h"
#include "kiln/autograd.h"
#include "tensor/tensor.h"

kn_tensor *kn__trace_real_of(kn__trace *tr, kn_tensor *t) {
  kn__tbind *b = kn__tbind_of(tr, t);
  if (!b) {
    if (t && t->is_fake)
      return kn__error(KN_ESTATE, "a tensor traced by another compiled call was used here"), NULL;
    return t;
  }
  kn_tensor *r = b->slot >= 0 && b->slot < tr->nslots ? tr->slot_real[b->slot] : NULL;
  if (!r)
    kn__error(KN_EINTERNAL, "a value computed before a graph break was not carried over");
  return r;
}

static size_t list_items(const kn__call *c) {
  size_t n = 0;
  for (int i = 0; i < c->nargs; i++)
    if (c->args[i].kind == KN__A_TENSORS) n += (size_t)c->args[i].u.ts.n;
  return n;
}

kn_status kn__trace_eager_call(kn__trace *tr, kn__mode *self, kn__call *c, kn__outs *out) {
  kn__call r = *c;
  size_t nl = list_items(c);
  kn_tensor *inl[16], **buf = nl <= 16 ? inl : malloc(nl * sizeof *buf), **at = buf;
  if (!buf) return kn__oom();
  kn_status st = KN_OK;
  for (int i = 0; st == KN_OK && i < r.nargs; i++) {
    kn__arg *a = &r.args[i];
    if (a->kind == KN__A_TENSOR && a->u.t && !(a->u.t = kn__trace_real_of(tr, a->u.t)))
      st = kn_last_status();
    if (a->kind != KN__A_TENSORS) continue;
    for (int j = 0; st == KN_OK && j < a->u.ts.n; j++)
      if (!(at[j] = kn__trace_real_of(tr, a->u.ts.v[j]))) st = kn_last_status();
    a->u.ts.v = at;
    at += a->u.ts.n;
  }
  if (st == KN_OK) st = kn__dispatch_below(self, &r, out);
  if (buf != inl) free(buf);
  return st;
}

/* Real values of n tensors (NULL entries stay NULL) into dst. */
static kn_status real_all(kn__trace *tr, kn_tensor *const *src, int n, kn_tensor **dst) {
  for (int i = 0; i < n; i++) {
    dst[i] = src && src[i] ? kn__trace_real_of(tr, src[i]) : NULL;
    if (src && src[i] && !dst[i]) return kn_last_status();
  }
  return KN_OK;
}

kn_status kn__trace_eager_autograd(kn__trace *tr, const kn__autograd_call *c) {
  kn_tensor *outs[KN__AG_MAX], *gouts[KN__AG_MAX], *ins[KN__AG_MAX];
  if (c->n > KN__AG_MAX || c->m > KN__AG_MAX)
    return kn__error(KN_EUNSUPPORTED, "%s with more than %d %s on values of a compiled function",
                     c->m ? "kn_autograd_grad" : "kn_backward", KN__AG_MAX,
                     c->n > KN__AG_MAX ? "outputs" : "inputs");
  kn_status st = real_all(tr, c->outputs, c->n, outs);
  if (st == KN_OK) st = real_all(tr, c->grad_outputs, c->n, gouts);
  if (st == KN_OK) st = real_all(tr, c->inputs, c->m, ins);
  if (st != KN_OK) return st;
  if (c->m == 0)
    return kn_backward_ex(outs[0], c->grad_outputs ? gouts[0] : NULL, c->retain_graph,
                          c->create_graph);
  return kn_autograd_grad(outs, c->n, ins, c->m, c->grad_outputs ? gouts : NULL, c->retain_graph,
                          c->create_graph, c->allow_unused, c->out_grads);
}

kn_status kn__trace_eager_result(kn__trace *tr, kn_value *v) {
  if (v->kind == KN_VTENSOR && v->u.t) {
    kn_tensor *r = kn__trace_real_of(tr, v->u.t);
    if (!r) return kn_last_status();
    kn_retain(r);
    kn_release(v->u.t);
    v->u.t = r;
    return KN_OK;
  }
  if (v->kind != KN_VTUPLE && v->kind != KN_VLIST) return KN_OK;
  kn_value *items = (kn_value *)v->u.items; /* the result's own copy (kn__value_clone) */
  for (int i = 0; i < v->n; i++) {
    kn_status st = kn__trace_eager_result(tr, &items[i]);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}
