/*
** tensor/tensor.h: the tensor and storage structs (internal).
**
** A tensor is a strided view of a storage: element (i0, i1, ...) lives at
** storage->data + (offset + sum(ik * strides[k])) * elsize. Views share the
** storage (and so the version counter, which lives in the storage). Meta
** tensors, and fake tensors used for tracing, have no storage data.
** sizes/strides always hold concrete values (for symbolic tensors: hints);
** `sym` is non-NULL only for tensors whose sizes are symbolic.
*/
#ifndef KN_TENSOR_TENSOR_H
#define KN_TENSOR_TENSOR_H

#include <stdatomic.h>

#include "dynamic/sym.h"
#include "kiln/tensor.h"

typedef struct kn__node kn__node; /* autograd graph node (autograd/) */

typedef struct kn__storage {
  atomic_long refcount;
  void *data;           /* NULL for meta storage */
  size_t nbytes;
  kn_device device;
  bool from_allocator;  /* data came from the caching allocator */
  bool borrowed;        /* data belongs to the user (kn_from_blob) */
  atomic_ulong version; /* bumped by in-place writes */
} kn__storage;

/* Symbolic shape of a tensor under tracing; owned by the tensor. */
typedef struct kn__symshape {
  kn_sym sizes[KN_MAX_DIMS];
  kn_sym strides[KN_MAX_DIMS];
  kn_sym offset;
} kn__symshape;

/* A post-accumulate-grad hook of a leaf (kn_register_post_accumulate_grad_hook
** in kiln/autograd.h): run by the backward engine after the leaf's .grad was
** updated. The list is owned by the tensor and freed with it. */
typedef struct kn__acc_hook {
  kn_status (*fn)(void *ud, kn_tensor *leaf);
  void *ud;
  int id;
  struct kn__acc_hook *next;
} kn__acc_hook;

struct kn_tensor {
  /* first: a pooled struct's free-list link overwrites it, never the
  ** reference count, which stays 0 so a second kn_release is recognised */
  kn__storage *storage;     /* owned reference; never NULL */
  atomic_long refcount;
  kn_dtype dtype;
  kn_device device;         /* the device the tensor reports */
  bool is_fake;             /* tracing stand-in: reports CPU, holds no data */
  bool in_module;           /* added to a kn_module as a parameter or buffer
                               (never cleared): tracing lifts it as an input */
  bool is_grad;             /* set as a tensor's .grad (kn_set_grad): tracing
                               refuses to make it a constant */
  int ndim;
  int64_t sizes[KN_MAX_DIMS];
  int64_t strides[KN_MAX_DIMS]; /* in elements */
  int64_t offset;               /* in elements */
  kn__symshape *sym;        /* owned; NULL when sizes are all constants */

  /* autograd */
  bool requires_grad;       /* leaf flag, or "has grad_fn" for non-leaves */
  bool retains_grad;
  kn_tensor *grad;          /* owned reference or NULL */
  kn__node *grad_fn;        /* owned reference or NULL (NULL = leaf) */
  int output_nr;            /* which output of grad_fn this tensor is */
  kn__node *grad_acc;       /* leaf's gradient accumulator (weak cache) */
  struct kn__acc_hook *acc_hooks; /* post-accumulate-grad hooks (owned list) */

  /* dispatcher modes may attach data (e.g. the graph node that produced a
  ** traced tensor); the owning mode frees it through the destructor. */
  void *mode_data;
  void (*mode_data_free)(void *);
};

/* ---- construction (tensor.c) ------------------------------------------- */
/* A new contiguous tensor with fresh (uninitialised) storage from the
** caching allocator. Owned; NULL with kn_last_error on bad sizes or OOM.
** Internal constructors never register results in the autorelease scope:
** the public entry points do that once, on success (kn__autorelease). */
kn_tensor *kn__empty(int ndim, const int64_t *sizes, kn_dtype dt, kn_device dev);
/* Same, with the given strides (which must be non-overlapping and fit). */
kn_tensor *kn__empty_strided(int ndim, const int64_t *sizes,
                             const int64_t *strides, kn_dtype dt, kn_device dev);
/* kn_dtype_size, inline (from the same table, include/kiln/tensor.h). */
static inline size_t kn__dtype_size(kn_dtype dt) {
  switch (dt) {
#define KN__DTYPE_SIZE_CASE(e, name, size, kind) \
  case e: return size;
    KN_DTYPE_MAP(KN__DTYPE_SIZE_CASE)
#undef KN__DTYPE_SIZE_CASE
  default: return 0;
  }
}
/* kn_is_contiguous for a non-NULL t, inline (the per-op path asks it of
** every operand). */
static inline bool kn__contiguous(const kn_tensor *t) {
  int64_t expect = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    if (t->sizes[d] == 0) return true;
    if (t->sizes[d] != 1 && t->strides[d] != expect) return false;
    expect *= t->sizes[d];
  }
  return true;
}
/* kn__empty(like->ndim, like->sizes, dt, KN_CPU) without its checks, for
** sizes already known valid: those of an existing contiguous (or
** one-element) tensor whose dtype is at least as wide as dt, which holds
** them in memory (the dispatcher's fast path). Owned; NULL with
** kn_last_error on OOM. */
kn_tensor *kn__empty_like_valid(const kn_tensor *like, kn_dtype dt);
/* A view of base's storage with new geometry; shares storage (retained).
** Owned. The caller has validated the geometry. */
kn_tensor *kn__make_view(kn_tensor *base, int ndim, const int64_t *sizes,
                         const int64_t *strides, int64_t offset);
/* An alias of t: same storage and geometry, symbolic sizes too (a fake or
** meta tensor stays symbolic), no autograd history. Owned or NULL. */
kn_tensor *kn__tensor_alias(kn_tensor *t);
/* The sequence number of t's grad_fn node (the profiler's "Sequence number"),
** or -1 when t is NULL or has none. */
int64_t kn__tensor_grad_fn_seq(const kn_tensor *t);
/* A tensor struct around an existing storage (retained). Owned. */
kn_tensor *kn__tensor_wrap(kn__storage *st, kn_dtype dt, int ndim,
                           const int64_t *sizes, const int64_t *strides,
                           int64_t offset);
/* Record t in the current autorelease scope, if one is open. Returns t; on
** OOM releases t and returns NULL with KN_ENOMEM (the call then fails). */
kn_tensor *kn__autorelease(kn_tensor *t);
/* Record ts[0..n) (NULL entries skipped). On OOM releases them all, sets
** them to NULL and returns KN_ENOMEM. */
kn_status kn__autorelease_many(kn_tensor **ts, int n);

/* Does the geometry fit? Sizes >= 0, at most KN_MAX_DIMS dims, the element
** and byte counts fit in int64 and, when strides is not NULL, so does the
** farthest byte the view reaches from offset (>= 0). KN_EINVAL/KN_ERANGE
** naming `what` and the sizes otherwise. Every tensor kiln creates passes
** this, so kernels can do index arithmetic in int64 without overflow. */
kn_status kn__check_geometry(const char *what, int ndim, const int64_t *sizes,
                             const int64_t *strides, int64_t offset, kn_dtype dt);
/* Contiguous strides for sizes. */
void kn__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
/* Product of sizes; -1 on overflow. */
int64_t kn__numel(int ndim, const int64_t *sizes);
/* Normalise a possibly negative dim against ndim; KN_ERANGE with PyTorch's
** message "Dimension out of range (expected to be in range of [-2, 1], but
** got 2)" when it is out of range. */
kn_status kn__wrap_dim(int64_t dim, int ndim, int *out);
/* Writes "[3, 4]" into buf (snprintf semantics). */
int kn__format_sizes(int ndim, const int64_t *sizes, char *buf, size_t n);
/* Is the calling code running inside a dispatcher mode's handler (an op
** being traced or propagated), rather than user code? (ops/dispatch.c) */
bool kn__dispatch_in_handler(void);
/* Bump the version counter of t's storage. */
void kn__bump_version(kn_tensor *t);

/* ---- tensors on the CUDA device (device.c) ------------------------------- */
/* Is t's storage in device memory? */
bool kn__tensor_on_cuda(const kn_tensor *t);
/* The error of a host data read (api: "kn_data") of a CUDA tensor. */
kn_status kn__cuda_refuse_data(const kn_tensor *t, const char *api);
/* A host copy of CUDA tensor t: the same sizes and strides over a new CPU
** storage holding the elements t reaches (offset 0). Owned, or NULL. */
kn_tensor *kn__tensor_host_copy(const kn_tensor *t);
/* Copy the element at storage offset off (in elements) of CUDA tensor t
** into out (the dtype's size). */
kn_status kn__cuda_read_element(const kn_tensor *t, int64_t off, void *out);

/* ---- storage and the caching allocator (alloc.c) ------------------------ */
/* A new storage of nbytes (data NULL for meta; device memory from the CUDA
** caching allocator for KN_CUDA); refcount 1. NULL on OOM (for KN_CUDA,
** with the allocator's error set). */
kn__storage *kn__storage_new(size_t nbytes, kn_device dev);
/* Bytes of CPU storage made by kn__storage_new since the process started,
** over all threads (a counter for tests: no allocation per use). */
int64_t kn__storage_bytes_made(void);
void kn__storage_retain(kn__storage *s);
void kn__storage_release(kn__storage *s);
/* Raw buffers from the caching allocator: same-size buffers are reused
** instead of being returned to the OS. 64-byte aligned. */
void *kn__cached_alloc(size_t nbytes);
void kn__cached_free(void *p, size_t nbytes);
/* Release every cached buffer to the OS (tests, kn_reset), and the calling
** thread's pooled structs and small buffers (tensor/pool.h). */
void kn__allocator_empty_cache(void);

/* ---- fake tensors reaching the public API (tensor.c) --------------------
** A public entry point that needs a tensor's data or its autograd state
** (reading values, printing, .grad, backward), called from user code with
** a fake tensor, asks the capture frontend, which registers these hooks:
** the call becomes a graph break or an error that fails the compiled call.
** Each hook returns KN__FAKE_PASS when t is not a value of a trace running
** on this thread (the entry point then does what it does on any tensor
** without data). kn__fake_hooks_for(t) is NULL for real tensors, inside op
** handlers, and before any hook is registered. */
#define KN__FAKE_PASS ((kn_status)2)
typedef struct kn__autograd_call {
  kn_tensor *const *outputs;
  int n;
  kn_tensor *const *inputs; /* kn_autograd_grad's inputs; m = 0: kn_backward */
  int m;
  kn_tensor *const *grad_outputs; /* may be NULL */
  bool retain_graph, create_graph, allow_unused;
  kn_tensor **out_grads;    /* [m] */
} kn__autograd_call;
typedef struct kn__fake_hooks {
  kn_status (*item)(const kn_tensor *t, double *out);  /* kn_item_double/int */
  kn_status (*print)(const kn_tensor *t);              /* kn_print_tensor to stdout */
  kn_status (*refuse)(const kn_tensor *t, const char *api); /* anything else */
  kn_status (*autograd)(const kn__autograd_call *c);  /* kn_backward*, kn_autograd_grad */
  kn_status (*set_requires_grad)(kn_tensor *t, bool requires_grad);
} kn__fake_hooks;
void kn__set_fake_hooks(const kn__fake_hooks *h);
const kn__fake_hooks *kn__fake_hooks_for(const kn_tensor *t);
/* The public call a data access is made for: an entry point that reads or
** fills tensor memory through kn_data / kn_get (kn_from_floats, kn_save,
** kn_load, ...) runs its work between prev = kn__data_api_begin("kn_x") and
** kn__data_api_end(prev). When the memory is missing (a traced stand-in,
** a meta tensor), the error and the refuse hook name the outermost such
** call, the one the user made, instead of kn_data. Per thread. */
const char *kn__data_api_begin(const char *api);
void kn__data_api_end(const char *prev);

/* Element-type helpers. */
double kn__load_double(const void *p, kn_dtype dt);
void kn__store_double(void *p, kn_dtype dt, double v);
int64_t kn__load_int(const void *p, kn_dtype dt);
void kn__store_int(void *p, kn_dtype dt, int64_t v);
float kn__half_to_float(uint16_t h);
uint16_t kn__float_to_half(float f);
float kn__bf16_to_float(uint16_t h);
uint16_t kn__float_to_bf16(float f);

#endif
