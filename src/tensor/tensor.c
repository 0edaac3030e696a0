/*
** tensor/tensor.c: tensor lifetime (reference counts, autorelease scopes),
** construction of plain and view tensors, and metadata accessors. Tensor
** structs come from and go back to the per-thread pools (tensor/pool.h).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "tensor/pool.h"
#include "tensor/tensor.h"

int64_t kn_live_tensors(void) { return kn__live_count(KN__LIVE_TENSORS); }

/* ---- reference counts --------------------------------------------------------- */

kn_tensor *kn_retain(kn_tensor *t) {
  if (t) atomic_fetch_add(&t->refcount, 1);
  return t;
}

void kn_release(kn_tensor *t) {
  if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
  if (t->mode_data_free) t->mode_data_free(t->mode_data);
  kn_release(t->grad);
  if (t->retains_grad) kn__autograd_forget(t);
  if (t->grad_fn) kn__node_release(t->grad_fn);
  kn__storage_release(t->storage);
  free(t->sym);
  kn__live_add(KN__LIVE_TENSORS, -1);
  kn__pool_put(KN__POOL_TENSOR, t, sizeof *t);
}

/* ---- autorelease scopes ------------------------------------------------------- */

typedef struct scope_stack {
  kn_tensor **items;
  size_t len, cap;
  size_t *marks;      /* start index of each open scope */
  size_t depth, mcap;
} scope_stack;

static _Thread_local scope_stack scopes;

void kn_scope_begin(void) {
  if (scopes.depth == scopes.mcap) {
    size_t ncap = scopes.mcap ? scopes.mcap * 2 : 8;
    size_t *nm = realloc(scopes.marks, ncap * sizeof *nm);
    if (!nm) abort(); /* cannot report: begin has no status; 8-byte allocs */
    scopes.marks = nm;
    scopes.mcap = ncap;
  }
  scopes.marks[scopes.depth++] = scopes.len;
}

static void free_scope_storage(void) {
  if (scopes.depth == 0) {
    free(scopes.items);
    free(scopes.marks);
    memset(&scopes, 0, sizeof scopes);
  }
}

void kn_scope_end(void) { kn_scope_end_keep(NULL); }

kn_tensor *kn_scope_end_keep(kn_tensor *keep) {
  if (scopes.depth == 0) return keep;
  kn_retain(keep);
  size_t mark = scopes.marks[--scopes.depth];
  /* Release newest first: later results usually depend on earlier ones. */
  while (scopes.len > mark) kn_release(scopes.items[--scopes.len]);
  free_scope_storage();
  return keep ? kn__autorelease(keep) : NULL;
}

kn_tensor *kn__autorelease(kn_tensor *t) {
  if (!t || scopes.depth == 0) return t;
  if (scopes.len == scopes.cap) {
    size_t ncap = scopes.cap ? scopes.cap * 2 : 64;
    kn_tensor **ni = realloc(scopes.items, ncap * sizeof *ni);
    if (!ni) {
      /* Cannot record: release now would hand out a dead pointer, so keep
      ** it alive (a leak under OOM is the lesser evil) and say so. */
      kn__oom();
      return t;
    }
    scopes.items = ni;
    scopes.cap = ncap;
  }
  scopes.items[scopes.len++] = t;
  return t;
}

/* ---- geometry helpers ------------------------------------------------------------ */

void kn__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = acc;
    acc *= sizes[d] > 1 ? sizes[d] : 1;
  }
}

int64_t kn__numel(int ndim, const int64_t *sizes) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) { /* no division: this runs on every op */
    if (sizes[d] < 0 || __builtin_mul_overflow(n, sizes[d], &n)) return -1;
  }
  return n;
}

kn_status kn__wrap_dim(int64_t dim, int ndim, int *out) {
  int64_t lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
  if (dim < lo || dim > hi)
    return kn__error(KN_ERANGE,
                     "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                     (long long)lo, (long long)hi, (long long)dim);
  *out = (int)(dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim);
  return KN_OK;
}

int kn__format_sizes(int ndim, const int64_t *sizes, char *buf, size_t n) {
  int len = snprintf(buf, n, "[");
  for (int d = 0; d < ndim; d++) {
    size_t used = (size_t)len < n ? (size_t)len : n;
    len += snprintf(buf + used, n - used, d ? ", %lld" : "%lld", (long long)sizes[d]);
  }
  size_t used = (size_t)len < n ? (size_t)len : n;
  return len + snprintf(buf + used, n - used, "]");
}

void kn__bump_version(kn_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }

/* ---- construction -------------------------------------------------------------- */

/* A tensor struct that takes over the caller's reference to st. */
static kn_tensor *wrap_owned(kn__storage *st, kn_dtype dt, int ndim, const int64_t *sizes,
                             const int64_t *strides, int64_t offset) {
  kn_tensor *t = kn__pool_take(KN__POOL_TENSOR, sizeof *t);
  if (t) memset(t, 0, sizeof *t);
  else if (!(t = calloc(1, sizeof *t))) return NULL;
  atomic_init(&t->refcount, 1);
  t->storage = st;
  t->dtype = dt;
  t->device = st->device;
  t->ndim = ndim;
  memcpy(t->sizes, sizes, (size_t)ndim * sizeof *sizes);
  memcpy(t->strides, strides, (size_t)ndim * sizeof *strides);
  t->offset = offset;
  kn__live_add(KN__LIVE_TENSORS, 1);
  return t;
}

kn_tensor *kn__tensor_wrap(kn__storage *st, kn_dtype dt, int ndim, const int64_t *sizes,
                           const int64_t *strides, int64_t offset) {
  kn_tensor *t = wrap_owned(st, dt, ndim, sizes, strides, offset);
  if (t) kn__storage_retain(st);
  return t;
}

static kn_status check_sizes(int ndim, const int64_t *sizes, int64_t *numel) {
  if (ndim < 0 || ndim > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "expected at most %d dimensions, got %d", KN_MAX_DIMS, ndim);
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0)
      return kn__error(KN_EINVAL, "Trying to create tensor with negative dimension %lld: %s",
                       (long long)sizes[d], "sizes must be >= 0");
  *numel = kn__numel(ndim, sizes);
  if (*numel < 0) return kn__error(KN_EINVAL, "tensor size overflows int64");
  return KN_OK;
}

kn_tensor *kn__empty_strided(int ndim, const int64_t *sizes, const int64_t *strides,
                             kn_dtype dt, kn_device dev) {
  int64_t numel = 0;
  if (check_sizes(ndim, sizes, &numel) != KN_OK) return NULL;
  if ((unsigned)dt >= KN_DTYPE_COUNT) {
    kn__error(KN_EDTYPE, "invalid dtype %d", (int)dt);
    return NULL;
  }
  int64_t extent = 0; /* one past the largest reachable element */
  if (numel > 0) {
    extent = 1;
    for (int d = 0; d < ndim; d++) {
      if (strides[d] < 0) {
        kn__error(KN_EINVAL, "negative strides are not supported");
        return NULL;
      }
      extent += (sizes[d] - 1) * strides[d];
    }
  }
  kn__storage *st = kn__storage_new((size_t)extent * kn_dtype_size(dt), dev);
  if (!st) {
    kn__oom();
    return NULL;
  }
  kn_tensor *t = wrap_owned(st, dt, ndim, sizes, strides, 0);
  if (!t) {
    kn__storage_release(st);
    kn__oom();
  }
  return t;
}

kn_tensor *kn__empty(int ndim, const int64_t *sizes, kn_dtype dt, kn_device dev) {
  int64_t strides[KN_MAX_DIMS];
  if (ndim < 0 || ndim > KN_MAX_DIMS) {
    kn__error(KN_EINVAL, "expected at most %d dimensions, got %d", KN_MAX_DIMS, ndim);
    return NULL;
  }
  kn__contiguous_strides(ndim, sizes, strides);
  return kn__empty_strided(ndim, sizes, strides, dt, dev);
}

kn_tensor *kn__make_view(kn_tensor *base, int ndim, const int64_t *sizes,
                         const int64_t *strides, int64_t offset) {
  kn_tensor *t = kn__tensor_wrap(base->storage, base->dtype, ndim, sizes, strides, offset);
  if (!t) {
    kn__oom();
    return NULL;
  }
  t->device = base->device;
  t->is_fake = base->is_fake;
  return t;
}

/* ---- accessors ------------------------------------------------------------------- */

int kn_ndim(const kn_tensor *t) { return t ? t->ndim : -1; }

/* Reading a symbolic size or stride as a plain integer bakes its current
** value into whatever the caller computes with it, so under tracing the
** value is specialised: a guard Eq(s, value) is recorded in the current
** shape environment and the compiled entry only serves inputs of that size.
** (A no-op for constant sizes and outside tracing.) Internal code that
** must not specialise reads t->sizes / t->sym directly. */
static void specialise(kn_sym s) {
  /* Reads made by ops themselves (meta functions, composite kernels: they
  ** run inside a dispatcher mode's handler) keep sizes symbolic. */
  if (!kn__sym_is_const(s) && !kn__dispatch_in_handler())
    kn__sym_guard_eq_int(s, kn__sym_hint(s));
}

static void specialise_all(const kn_tensor *t, bool strides) {
  if (!t->sym) return;
  for (int d = 0; d < t->ndim; d++) specialise(strides ? t->sym->strides[d] : t->sym->sizes[d]);
  if (strides) specialise(t->sym->offset);
}

int64_t kn_size(const kn_tensor *t, int d) {
  int w = 0;
  if (!t || kn__wrap_dim(d, t->ndim, &w) != KN_OK || t->ndim == 0) return -1;
  if (t->sym) specialise(t->sym->sizes[w]);
  return t->sizes[w];
}

int64_t kn_stride(const kn_tensor *t, int d) {
  int w = 0;
  if (!t || kn__wrap_dim(d, t->ndim, &w) != KN_OK || t->ndim == 0) return -1;
  if (t->sym) specialise(t->sym->strides[w]);
  return t->strides[w];
}

const int64_t *kn_sizes(const kn_tensor *t) {
  specialise_all(t, false);
  return t->sizes;
}
const int64_t *kn_strides(const kn_tensor *t) {
  specialise_all(t, true);
  return t->strides;
}
int64_t kn_storage_offset(const kn_tensor *t) {
  if (t->sym) specialise(t->sym->offset);
  return t->offset;
}
int64_t kn_numel(const kn_tensor *t) {
  if (!t) return -1;
  specialise_all(t, false);
  return kn__numel(t->ndim, t->sizes);
}
kn_dtype kn_tensor_dtype(const kn_tensor *t) { return t->dtype; }
kn_device kn_tensor_device(const kn_tensor *t) { return t->device; }

bool kn_is_contiguous(const kn_tensor *t) {
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] == 0) return true;
    if (t->sizes[d] != 1 && t->strides[d] != expect) return false;
    expect *= t->sizes[d];
  }
  return true;
}

void *kn_data(const kn_tensor *t) {
  if (!t || !t->storage->data) return NULL;
  return (char *)t->storage->data + t->offset * (int64_t)kn_dtype_size(t->dtype);
}

double kn_get(const kn_tensor *t, const int64_t *index) {
  if (!t || !t->storage->data) {
    kn__error(KN_EINVAL, "kn_get: tensor has no data (meta or fake)");
    return NAN;
  }
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    if (index[d] < 0 || index[d] >= t->sizes[d]) {
      kn__error(KN_ERANGE, "index %lld is out of bounds for dimension %d with size %lld",
                (long long)index[d], d, (long long)t->sizes[d]);
      return NAN;
    }
    off += index[d] * t->strides[d];
  }
  return kn__load_double((char *)t->storage->data + off * (int64_t)kn_dtype_size(t->dtype),
                         t->dtype);
}

static kn_status check_item(const kn_tensor *t) {
  if (!t) return kn__error(KN_EINVAL, "item: tensor is NULL");
  if (kn_numel(t) != 1)
    return kn__error(KN_EINVAL,
                     "a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)kn_numel(t));
  if (!t->storage->data)
    return kn__error(KN_EINVAL, "item: tensor has no data (meta or fake)");
  return KN_OK;
}

kn_status kn_item_double(const kn_tensor *t, double *out) {
  kn_status st = check_item(t);
  if (st == KN_OK) *out = kn__load_double(kn_data(t), t->dtype);
  return st;
}

kn_status kn_item_int(const kn_tensor *t, int64_t *out) {
  kn_status st = check_item(t);
  if (st == KN_OK) *out = kn__load_int(kn_data(t), t->dtype);
  return st;
}

uint64_t kn_tensor_version(const kn_tensor *t) { return atomic_load(&t->storage->version); }
bool kn_same_storage(const kn_tensor *a, const kn_tensor *b) { return a->storage == b->storage; }

bool kn_requires_grad(const kn_tensor *t) { return t && t->requires_grad; }
bool kn_is_leaf(const kn_tensor *t) { return t && t->grad_fn == NULL; }
kn_tensor *kn_grad(const kn_tensor *t) { return t ? t->grad : NULL; }

void kn_set_grad(kn_tensor *t, kn_tensor *grad) {
  kn_retain(grad);
  kn_release(t->grad);
  t->grad = grad;
}

kn_status kn_set_requires_grad(kn_tensor *t, bool requires_grad) {
  if (!t) return kn__error(KN_EINVAL, "set_requires_grad: tensor is NULL");
  if (t->grad_fn) {
    if (requires_grad) return KN_OK;
    return kn__error(KN_EAUTOGRAD,
                     "you can only change requires_grad flags of leaf variables. If you want "
                     "to use a computed variable in a subgraph that doesn't require "
                     "differentiation use var_no_grad = var.detach().");
  }
  if (requires_grad && !kn_dtype_is_floating(t->dtype))
    return kn__error(KN_EAUTOGRAD,
                     "only Tensors of floating point dtype can require gradients (got %s)",
                     kn_dtype_name(t->dtype));
  t->requires_grad = requires_grad;
  return KN_OK;
}

const char *kn_grad_fn_name(const kn_tensor *t) {
  return t && t->grad_fn ? kn__node_name(t->grad_fn) : NULL;
}
