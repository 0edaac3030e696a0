/*
** tensor/tensor.c: tensor lifetime (reference counts, autorelease scopes),
** construction of plain and view tensors, and metadata accessors. Tensor
** structs come from and go back to the per-thread pools (tensor/pool.h).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "tensor/handles.h"
#include "tensor/pool.h"
#include "tensor/tensor.h"

int64_t kn_live_tensors(void) { return kn__live_count(KN__LIVE_TENSORS); }

/* libkiln_ompenv chooses kiln's OpenMP wait policy before libgomp starts
** (src/ompenv/ompenv.c). This reference, in an object every program using
** kiln links, keeps that library in the program's (or libkiln.so's)
** DT_NEEDED list: linkers drop shared libraries nothing refers to
** (--as-needed). */
extern int kn__ompenv_choice;
__attribute__((used)) static int *const keep_ompenv = &kn__ompenv_choice;

/* ---- reference counts --------------------------------------------------------- */

/* Checked mode (tensor/handles.h): is t a released or unknown handle? The
** error names it; one predictable branch when the mode is off. */
static bool dead(const kn_tensor *t, const char *api, const char *what) {
  return KN__HANDLES_CHECKED() && t && kn__handle_check(t, api, what) != KN_OK;
}

kn_tensor *kn_retain(kn_tensor *t) {
  if (dead(t, "kn_retain", "the tensor")) return NULL;
  if (t) atomic_fetch_add(&t->refcount, 1);
  return t;
}

void kn_release(kn_tensor *t) {
  if (!t || dead(t, "kn_release", NULL)) return;
  long old = atomic_fetch_sub(&t->refcount, 1);
  if (old != 1) {
    if (__builtin_expect(old < 1, 0)) { /* no reference left: released twice */
      atomic_fetch_add(&t->refcount, 1);
      kn__handle_released_twice(t);
    }
    return;
  }
  if (t->mode_data_free) t->mode_data_free(t->mode_data);
  for (kn__acc_hook *h = t->acc_hooks, *nx; h; h = nx) {
    nx = h->next;
    free(h);
  }
  kn_release(t->grad);
  if (t->retains_grad) kn__autograd_forget(t);
  if (t->grad_fn) kn__node_release(t->grad_fn);
  kn__storage_release(t->storage);
  free(t->sym);
  if (KN__HANDLES_CHECKED()) kn__handle_released(t);
  else kn__pool_put_live(KN__POOL_TENSOR, t, sizeof *t, KN__LIVE_TENSORS);
}

/* ---- autorelease scopes ------------------------------------------------------- */

typedef struct scope_stack {
  kn_tensor **items;
  size_t len, cap;
  size_t *marks;      /* start index of each open scope */
  size_t depth, mcap;
} scope_stack;

static _Thread_local scope_stack scopes;

/* Scopes that could not be opened for lack of memory. While one is open,
** every call that would register a result fails with KN_ENOMEM (so nothing
** escapes unowned), and kn_scope_end closes it without releasing. */
static _Thread_local size_t lost_scopes;

void kn_scope_begin(void) {
  if (scopes.depth == scopes.mcap) {
    size_t ncap = scopes.mcap ? scopes.mcap * 2 : 8;
    size_t *nm = realloc(scopes.marks, ncap * sizeof *nm);
    if (!nm) {
      kn__oom();
      lost_scopes++;
      return;
    }
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
  if (dead(keep, "kn_scope_end_keep", "the tensor to keep")) keep = NULL;
  if (lost_scopes > 0) {
    lost_scopes--;
    return keep;
  }
  if (scopes.depth == 0) return keep;
  kn_retain(keep);
  size_t mark = scopes.marks[--scopes.depth];
  /* Release newest first: later results usually depend on earlier ones. */
  while (scopes.len > mark) kn_release(scopes.items[--scopes.len]);
  free_scope_storage();
  return keep ? kn__autorelease(keep) : NULL;
}

static bool scope_reserve(size_t n) {
  if (scopes.cap - scopes.len >= n) return true;
  size_t ncap = scopes.cap ? scopes.cap : 64;
  while (ncap - scopes.len < n) ncap *= 2;
  kn_tensor **ni = realloc(scopes.items, ncap * sizeof *ni);
  if (!ni) return false;
  scopes.items = ni;
  scopes.cap = ncap;
  return true;
}

kn_tensor *kn__autorelease(kn_tensor *t) {
  if (!t || (scopes.depth == 0 && lost_scopes == 0)) return t;
  if (lost_scopes > 0 || !scope_reserve(1)) {
    /* Cannot record it, so the call fails: release and report (a NULL
    ** result whose error a later call's hint quotes). */
    kn_release(t);
    kn__oom();
    kn__error_null_result();
    return NULL;
  }
  scopes.items[scopes.len++] = t;
  return t;
}

kn_status kn__autorelease_many(kn_tensor **ts, int n) {
  if ((scopes.depth == 0 && lost_scopes == 0) || n <= 0) return KN_OK;
  if (lost_scopes > 0 || !scope_reserve((size_t)n)) {
    for (int i = 0; i < n; i++) {
      kn_release(ts[i]);
      ts[i] = NULL;
    }
    return kn__oom();
  }
  for (int i = 0; i < n; i++)
    if (ts[i]) scopes.items[scopes.len++] = ts[i];
  return KN_OK;
}

/* ---- geometry helpers ------------------------------------------------------------ */

void kn__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = acc;
    /* saturates: only a tensor with no elements can get here with sizes
    ** whose product overflows, and then strides are never used to reach */
    if (sizes[d] > 1 && __builtin_mul_overflow(acc, sizes[d], &acc)) acc = INT64_MAX;
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
  kn_tensor *t;
  if (KN__HANDLES_CHECKED()) { /* registered, never pooled */
    if (!(t = kn__handle_new(sizeof *t))) return NULL;
  } else if ((t = kn__pool_take_live(KN__POOL_TENSOR, sizeof *t, KN__LIVE_TENSORS))) {
    /* everything but the geometry arrays, which are written up to ndim
    ** (a pooled struct's entries beyond ndim are stale, never read) */
    memset(t, 0, offsetof(kn_tensor, sizes));
    memset(&t->offset, 0, sizeof *t - offsetof(kn_tensor, offset));
  } else if (!(t = calloc(1, sizeof *t))) {
    return NULL;
  } else {
    kn__live_add(KN__LIVE_TENSORS, 1);
  }
  atomic_init(&t->refcount, 1);
  t->storage = st;
  t->dtype = dt;
  t->device = st->device;
  t->ndim = ndim;
  for (int d = 0; d < ndim; d++) { /* a loop: ndim is small, a memcpy call costs more */
    t->sizes[d] = sizes[d];
    t->strides[d] = strides[d];
  }
  t->offset = offset;
  return t;
}

kn_tensor *kn__tensor_wrap(kn__storage *st, kn_dtype dt, int ndim, const int64_t *sizes,
                           const int64_t *strides, int64_t offset) {
  kn_tensor *t = wrap_owned(st, dt, ndim, sizes, strides, offset);
  if (t) kn__storage_retain(st);
  return t;
}

static kn_status geometry_error(const char *what, const char *problem, int ndim,
                                const int64_t *sizes) {
  char buf[256];
  kn__format_sizes(ndim, sizes, buf, sizeof buf);
  return kn__error(KN_ERANGE, "%s: %s (sizes %s)", what, problem, buf);
}

/* The index one past the farthest element the geometry reaches, in
** elements, or -1 when that does not fit in int64. 0 for no elements. */
static int64_t reach(int ndim, const int64_t *sizes, const int64_t *strides, int64_t offset) {
  int64_t r = offset, step;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] == 0) return 0;
    int64_t st = strides[d] < 0 ? -strides[d] : strides[d];
    if (strides[d] == INT64_MIN || __builtin_mul_overflow(sizes[d] - 1, st, &step) ||
        __builtin_add_overflow(r, step, &r))
      return -1;
  }
  return __builtin_add_overflow(r, 1, &r) ? -1 : r;
}

kn_status kn__check_geometry(const char *what, int ndim, const int64_t *sizes,
                             const int64_t *strides, int64_t offset, kn_dtype dt) {
  if (ndim < 0 || ndim > KN_MAX_DIMS)
    return kn__error(KN_EINVAL, "%s: expected at most %d dimensions, got %d", what, KN_MAX_DIMS,
                     ndim);
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0)
      return kn__error(KN_EINVAL, "%s: Trying to create tensor with negative dimension %lld: %s",
                       what, (long long)sizes[d], "sizes must be >= 0");
  int64_t numel = kn__numel(ndim, sizes), bytes;
  int64_t es = (int64_t)kn_dtype_size(dt);
  if (numel < 0 || __builtin_mul_overflow(numel, es, &bytes))
    return geometry_error(what, "numel: integer multiplication overflow: the number of elements "
                          "(or bytes) does not fit in int64", ndim, sizes);
  if (!strides) return KN_OK;
  if (offset < 0)
    return kn__error(KN_ERANGE, "%s: storage offset must be >= 0, got %lld", what,
                     (long long)offset);
  /* strides in bytes fit too, also those of size-1 dims (kernels scale them all) */
  for (int d = 0; d < ndim; d++)
    if (strides[d] == INT64_MIN ||
        __builtin_mul_overflow(strides[d] < 0 ? -strides[d] : strides[d], es, &bytes))
      return kn__error(KN_ERANGE, "%s: stride %lld of dimension %d does not fit in int64 bytes",
                       what, (long long)strides[d], d);
  int64_t r = reach(ndim, sizes, strides, offset);
  if (r < 0 || __builtin_mul_overflow(r, es, &bytes))
    return geometry_error(what, "integer overflow: the strides and storage offset reach beyond "
                          "int64 bytes", ndim, sizes);
  return KN_OK;
}

kn_tensor *kn__empty_strided(int ndim, const int64_t *sizes, const int64_t *strides,
                             kn_dtype dt, kn_device dev) {
  if ((unsigned)dt >= KN_DTYPE_COUNT) {
    kn__error(KN_EDTYPE, "invalid dtype %d", (int)dt);
    return NULL;
  }
  if (kn__check_geometry("empty", ndim, sizes, strides, 0, dt) != KN_OK) return NULL;
  for (int d = 0; d < ndim; d++)
    if (strides[d] < 0) {
      kn__error(KN_EINVAL, "negative strides are not supported");
      return NULL;
    }
  int64_t extent = reach(ndim, sizes, strides, 0); /* checked above */
  kn__storage *st = kn__storage_new((size_t)extent * kn_dtype_size(dt), dev);
  if (!st) {
    if (dev != KN_CUDA) kn__oom(); /* the CUDA allocator said why */
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

kn_tensor *kn__empty_like_valid(const kn_tensor *like, kn_dtype dt) {
  int64_t strides[KN_MAX_DIMS];
  kn__contiguous_strides(like->ndim, like->sizes, strides);
  int64_t n = kn__numel(like->ndim, like->sizes);
  kn__storage *st = kn__storage_new((size_t)n * kn__dtype_size(dt), KN_CPU);
  if (!st) {
    kn__oom();
    return NULL;
  }
  kn_tensor *t = wrap_owned(st, dt, like->ndim, like->sizes, strides, 0);
  if (!t) {
    kn__storage_release(st);
    kn__oom();
  }
  return t;
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

kn_tensor *kn__tensor_alias(kn_tensor *t) {
  kn_tensor *a = kn__make_view(t, t->ndim, t->sizes, t->strides, t->offset);
  if (a && t->sym) {
    a->sym = malloc(sizeof *a->sym);
    if (!a->sym) {
      kn_release(a);
      kn__oom();
      return NULL;
    }
    memcpy(a->sym, t->sym, sizeof *a->sym);
  }
  return a;
}

/* ---- accessors ------------------------------------------------------------------- */

/* Accessors that cannot return a status report a NULL tensor this way. */
static bool null_tensor(const kn_tensor *t, const char *fn) {
  if (t) return dead(t, fn, "the tensor");
  kn__error(KN_EINVAL, "%s: expected a tensor, got NULL", fn);
  return true;
}

int kn_ndim(const kn_tensor *t) { return null_tensor(t, "kn_ndim") ? -1 : t->ndim; }

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
  if (!t || dead(t, "kn_size", "the tensor") || kn__wrap_dim(d, t->ndim, &w) != KN_OK || t->ndim == 0) return -1;
  if (t->sym) specialise(t->sym->sizes[w]);
  return t->sizes[w];
}

int64_t kn_stride(const kn_tensor *t, int d) {
  int w = 0;
  if (!t || dead(t, "kn_stride", "the tensor") || kn__wrap_dim(d, t->ndim, &w) != KN_OK || t->ndim == 0) return -1;
  if (t->sym) specialise(t->sym->strides[w]);
  return t->strides[w];
}

const int64_t *kn_sizes(const kn_tensor *t) {
  if (null_tensor(t, "kn_sizes")) return NULL;
  specialise_all(t, false);
  return t->sizes;
}
const int64_t *kn_strides(const kn_tensor *t) {
  if (null_tensor(t, "kn_strides")) return NULL;
  specialise_all(t, true);
  return t->strides;
}
int64_t kn_storage_offset(const kn_tensor *t) {
  if (null_tensor(t, "kn_storage_offset")) return -1;
  if (t->sym) specialise(t->sym->offset);
  return t->offset;
}
int64_t kn_numel(const kn_tensor *t) {
  if (!t || dead(t, "kn_numel", "the tensor")) return -1;
  specialise_all(t, false);
  return kn__numel(t->ndim, t->sizes);
}
kn_dtype kn_tensor_dtype(const kn_tensor *t) {
  return null_tensor(t, "kn_tensor_dtype") ? KN_DTYPE_COUNT : t->dtype;
}
kn_device kn_tensor_device(const kn_tensor *t) {
  return null_tensor(t, "kn_tensor_device") ? KN_META : t->device;
}

bool kn_is_contiguous(const kn_tensor *t) {
  return !null_tensor(t, "kn_is_contiguous") && kn__contiguous(t);
}

/* ---- fake tensors reaching the public API ---------------------------------------- */
static _Atomic(const kn__fake_hooks *) fake_hooks;

void kn__set_fake_hooks(const kn__fake_hooks *h) { atomic_store(&fake_hooks, h); }

const kn__fake_hooks *kn__fake_hooks_for(const kn_tensor *t) {
  if (!t || !t->is_fake || kn__dispatch_in_handler()) return NULL;
  return atomic_load(&fake_hooks);
}

static _Thread_local const char *data_api; /* the outermost public data call */

const char *kn__data_api_begin(const char *api) {
  const char *prev = data_api;
  if (!prev) data_api = api;
  return prev;
}

void kn__data_api_end(const char *prev) { data_api = prev; }

/* A data read on a tensor without data: the trace's answer, or why not. */
static kn_status no_data(const kn_tensor *t, const char *api) {
  if (data_api) api = data_api;
  const kn__fake_hooks *h = kn__fake_hooks_for(t);
  kn_status st = h ? h->refuse(t, api) : KN__FAKE_PASS;
  if (st != KN__FAKE_PASS) return st;
  return kn__error(KN_EINVAL,
                   "Cannot access data pointer of Tensor (a %s tensor holds metadata only): %s",
                   t->is_fake ? "fake" : "meta", api);
}

void *kn_data(const kn_tensor *t) {
  if (null_tensor(t, "kn_data")) return NULL;
  if (t->storage->device == KN_CUDA) {
    (void)kn__cuda_refuse_data(t, "kn_data");
    return NULL;
  }
  if (!t->storage->data) {
    (void)no_data(t, "kn_data");
    return NULL;
  }
  return (char *)t->storage->data + t->offset * (int64_t)kn_dtype_size(t->dtype);
}

double kn_get(const kn_tensor *t, const int64_t *index) {
  if (null_tensor(t, "kn_get")) return NAN;
  if (!index && t->ndim > 0) {
    kn__error(KN_EINVAL, "kn_get: expected an index of %d entries, got NULL", t->ndim);
    return NAN;
  }
  if (!t->storage->data) {
    (void)no_data(t, "kn_get");
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
  if (t->storage->device == KN_CUDA) {
    unsigned char buf[8];
    return kn__cuda_read_element(t, off, buf) == KN_OK ? kn__load_double(buf, t->dtype) : NAN;
  }
  return kn__load_double((char *)t->storage->data + off * (int64_t)kn_dtype_size(t->dtype),
                         t->dtype);
}

static kn_status check_item(const kn_tensor *t, const char *api) {
  if (null_tensor(t, api)) return kn_last_status();
  if (kn_numel(t) != 1)
    return kn__error(KN_EINVAL,
                     "a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)kn_numel(t));
  if (!t->storage->data) return no_data(t, api);
  return KN_OK;
}

/* A fake tensor of the running trace: its value is a graph break (kn_item). */
static kn_status traced_item(const kn_tensor *t, double *v) {
  const kn__fake_hooks *h = kn__fake_hooks_for(t);
  return h ? h->item(t, v) : KN__FAKE_PASS;
}

kn_status kn_item_double(const kn_tensor *t, double *out) {
  if (!out) return kn__error(KN_EINVAL, "kn_item_double: the output pointer is NULL");
  if (dead(t, "kn_item_double", "the tensor")) return kn_last_status();
  kn_status st = traced_item(t, out);
  if (st != KN__FAKE_PASS) return st;
  st = check_item(t, "kn_item_double");
  unsigned char buf[8];
  if (st == KN_OK && t->storage->device == KN_CUDA) {
    st = kn__cuda_read_element(t, t->offset, buf);
    if (st == KN_OK) *out = kn__load_double(buf, t->dtype);
  } else if (st == KN_OK) {
    *out = kn__load_double(kn_data(t), t->dtype);
  }
  return st;
}

kn_status kn_item_int(const kn_tensor *t, int64_t *out) {
  if (!out) return kn__error(KN_EINVAL, "kn_item_int: the output pointer is NULL");
  if (dead(t, "kn_item_int", "the tensor")) return kn_last_status();
  double v = 0;
  kn_status st = traced_item(t, &v);
  if (st == KN_OK) *out = (int64_t)v;
  if (st != KN__FAKE_PASS) return st;
  st = check_item(t, "kn_item_int");
  unsigned char buf[8];
  if (st == KN_OK && t->storage->device == KN_CUDA) {
    st = kn__cuda_read_element(t, t->offset, buf);
    if (st == KN_OK) *out = kn__load_int(buf, t->dtype);
  } else if (st == KN_OK) {
    *out = kn__load_int(kn_data(t), t->dtype);
  }
  return st;
}

uint64_t kn_tensor_version(const kn_tensor *t) {
  return null_tensor(t, "kn_tensor_version") ? 0 : atomic_load(&t->storage->version);
}
bool kn_same_storage(const kn_tensor *a, const kn_tensor *b) {
  if (null_tensor(a, "kn_same_storage") || null_tensor(b, "kn_same_storage")) return false;
  return a->storage == b->storage;
}

bool kn_requires_grad(const kn_tensor *t) {
  return t && !dead(t, "kn_requires_grad", "the tensor") && t->requires_grad;
}
bool kn_is_leaf(const kn_tensor *t) {
  return t && !dead(t, "kn_is_leaf", "the tensor") && t->grad_fn == NULL;
}
kn_tensor *kn_grad(const kn_tensor *t) {
  if (dead(t, "kn_grad", "the tensor")) return NULL;
  const kn__fake_hooks *h = kn__fake_hooks_for(t);
  if (h && h->refuse(t, "kn_grad") != KN__FAKE_PASS) return NULL;
  return t ? t->grad : NULL;
}

void kn_set_grad(kn_tensor *t, kn_tensor *grad) {
  if (null_tensor(t, "kn_set_grad") || dead(grad, "kn_set_grad", "the gradient")) return;
  const kn__fake_hooks *h = kn__fake_hooks_for(t);
  if (h && h->refuse(t, "kn_set_grad") != KN__FAKE_PASS) return;
  kn_retain(grad);
  kn_release(t->grad);
  t->grad = grad;
  if (grad) grad->is_grad = true;
}

kn_status kn_set_requires_grad(kn_tensor *t, bool requires_grad) {
  if (!t) return kn__error(KN_EINVAL, "set_requires_grad: tensor is NULL");
  if (dead(t, "kn_set_requires_grad", "the tensor")) return kn_last_status();
  const kn__fake_hooks *h = kn__fake_hooks_for(t);
  kn_status hs = h ? h->set_requires_grad(t, requires_grad) : KN__FAKE_PASS;
  if (hs != KN__FAKE_PASS) return hs;
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
  if (dead(t, "kn_grad_fn_name", "the tensor")) return NULL;
  return t && t->grad_fn ? kn__node_name(t->grad_fn) : NULL;
}

int64_t kn__tensor_grad_fn_seq(const kn_tensor *t) {
  return t && t->grad_fn ? (int64_t)t->grad_fn->seq : -1;
}
