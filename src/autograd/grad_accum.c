/*
** autograd/grad_accum.c: in-place gradient accumulation for the backward
** engine (see autograd.h, "Gradient buffers the engine owns").
**
** A select or slice used many times (an LSTM takes one time step of its
** projected input per step) used to pay, per use, a zero tensor the size of
** the whole input and a scatter of one slice into it, and then a full-size
** sum with the other uses' gradients. Here the engine keeps one buffer per
** node input that it allocated itself and nobody else can see; a select or
** slice adds its gradient into the matching view of that buffer, and other
** gradients are added into it in place. The arithmetic is the same as the
** derivative rule's (zeros plus the slice, summed in the order the engine
** runs the nodes), so the values equal the rule path's (a slice's -0.0
** lands in a fresh buffer as 0.0 + -0.0 = 0.0, as PyTorch's in-place
** accumulation does).
*/
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "ops/iter.h"
#include "ops/shape.h"
#include "ops/symsize.h"

bool kn__grad_exclusive(const kn_tensor *t) {
  return atomic_load(&t->refcount) == 1 && atomic_load(&t->storage->refcount) == 1 &&
         !t->grad_fn && !t->sym && !t->is_fake && t->device == KN_CPU &&
         !t->storage->borrowed && t->storage->data && kn_is_contiguous(t);
}

static bool float_dtype(kn_dtype dt) { return dt == KN_FLOAT32 || dt == KN_FLOAT64; }

static void add_row(char **p, const int64_t *s, int64_t n, const void *ctx) {
  kn_dtype dt = *(const kn_dtype *)ctx;
  if (dt == KN_FLOAT32) {
    if (s[0] == 4 && s[1] == 4) {
      float *restrict o = (float *)p[0];
      const float *restrict x = (const float *)p[1];
      for (int64_t i = 0; i < n; i++) o[i] += x[i];
    } else {
      for (int64_t i = 0; i < n; i++) *(float *)(p[0] + i * s[0]) += *(float *)(p[1] + i * s[1]);
    }
  } else if (s[0] == 8 && s[1] == 8) {
    double *restrict o = (double *)p[0];
    const double *restrict x = (const double *)p[1];
    for (int64_t i = 0; i < n; i++) o[i] += x[i];
  } else {
    for (int64_t i = 0; i < n; i++) *(double *)(p[0] + i * s[0]) += *(double *)(p[1] + i * s[1]);
  }
}

bool kn__grad_can_add_into(const kn_tensor *dst, const kn_tensor *src) {
  if (dst->dtype != src->dtype || !float_dtype(dst->dtype) || dst->ndim != src->ndim ||
      src->is_fake || src->device != KN_CPU || dst->device != KN_CPU || !src->storage->data ||
      src->storage == dst->storage)
    return false;
  for (int d = 0; d < dst->ndim; d++)
    if (dst->sizes[d] != src->sizes[d]) return false;
  return true;
}

void kn__grad_add_into(kn_tensor *dst, const kn_tensor *src) {
  kn__iter it;
  kn__iter_init(&it, dst->ndim, dst->sizes);
  kn__iter_add(&it, dst);
  kn__iter_add(&it, src);
  kn_dtype dt = dst->dtype;
  kn__iter_run(&it, add_row, &dt, KN__PAR_GRAIN_MEM);
}

/* Is n a select or slice whose gradient can go straight into a buffer? */
static bool slice_node(const kn__node *n, const kn_tensor *gout) {
  int id = n->call.op->id;
  if (n->kind != KN__NODE_OP || (id != KN_OP_SELECT && id != KN_OP_SLICE) || n->nin != 1 ||
      n->released || n->on_meta || kn__mode_depth() > 0)
    return false;
  const kn__arg *a = n->call.args;
  for (int i = 1; i < n->call.nargs; i++)
    if (a[i].sym || (a[i].kind != KN__A_INT && a[i].kind != KN__A_NONE)) return false;
  const kn_tensor *self = a[0].u.t;
  return self && !self->sym && !self->is_fake && self->device == KN_CPU &&
         float_dtype(self->dtype) && gout && !gout->sym && !gout->is_fake &&
         gout->device == KN_CPU && gout->dtype == self->dtype && gout->storage->data;
}

/* The view of buf (shaped like the node's input) that the node's output was. */
static kn_tensor *view_in(const kn__node *n, kn_tensor *buf) {
  const kn__arg *a = n->call.args;
  kn__geom g;
  kn__geom_of(buf, &g);
  kn_status st = n->call.op->id == KN_OP_SELECT
                     ? kn__geom_select(&g, a[1].u.i, a[2].u.i)
                     : kn__geom_slice(&g, a[1].u.i, &a[2], &a[3], a[4].u.i);
  if (st != KN_OK) return NULL;
  int64_t sz[KN_MAX_DIMS], sd[KN_MAX_DIMS];
  for (int d = 0; d < g.nd; d++) {
    sz[d] = kn__sym_hint(g.sz[d]);
    sd[d] = kn__sym_hint(g.st[d]);
  }
  return kn__make_view(buf, g.nd, sz, sd, kn__sym_hint(g.off));
}

/* Make *slot a zero-filled or copied buffer of self's shape the engine owns. */
static kn_status own_buffer(const kn_tensor *self, kn_tensor **slot, bool *own) {
  if (*slot && *own && kn__grad_exclusive(*slot) && (*slot)->dtype == self->dtype) return KN_OK;
  kn_tensor *b;
  if (*slot) {
    b = kn__contiguous_copy(*slot, self->dtype);
  } else {
    b = kn__empty(self->ndim, self->sizes, self->dtype, KN_CPU);
    if (b) memset(kn_data(b), 0, (size_t)kn_numel(b) * kn_dtype_size(b->dtype));
  }
  if (!b) return kn_last_status();
  kn_release(*slot);
  *slot = b;
  *own = true;
  return KN_OK;
}

kn_status kn__slice_grad_accumulate(kn__node *n, kn_tensor *gout, kn_tensor **slot, bool *own,
                                    bool *done) {
  *done = false;
  if (!slice_node(n, gout)) return KN_OK;
  kn_tensor *self = n->call.args[0].u.t;
  kn_status st = own_buffer(self, slot, own);
  if (st != KN_OK) return st;
  kn_tensor *v = view_in(n, *slot);
  if (!v) return kn_last_status();
  bool ok = kn__grad_can_add_into(v, gout);
  if (ok) kn__grad_add_into(v, gout);
  kn_release(v);
  *done = ok;
  return KN_OK;
}
