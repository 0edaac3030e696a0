/*
** kiln/tensor.h: tensors, dtypes, devices, ownership.
**
** OWNERSHIP RULE. Tensors are reference counted. Every function that returns
** a kn_tensor* returns a NEW reference, unless its comment says "borrowed".
** A new reference is released with kn_release(). When an autorelease scope
** is open on the calling thread (kn_scope_begin), each new reference that
** kiln returns is also recorded in that scope and released when the scope
** ends: inside a scope you never release temporaries yourself; to keep a
** tensor past kn_scope_end(), call kn_retain() on it (you then own that
** extra reference) or pass it to kn_scope_end_keep(). A function that takes
** a tensor argument borrows it: it never consumes the caller's reference.
**
** On failure a function returning a tensor returns NULL and kn_last_error()
** tells what was expected and what was found. Every op accepts NULL inputs
** and then fails with KN_EINVAL, so chains of calls need one check at the
** end.
*/
#ifndef KILN_TENSOR_H
#define KILN_TENSOR_H

#include <stdio.h>

#include "kiln/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_MAX_DIMS 8

/* X-macro: enum, name (PyTorch's spelling), element size, kind
** (b = bool, u = unsigned int, i = signed int, f = float). The order is the
** promotion order within a kind. */
#define KN_DTYPE_MAP(X)                 \
  X(KN_BOOL, "bool", 1, 'b')            \
  X(KN_UINT8, "uint8", 1, 'u')          \
  X(KN_INT8, "int8", 1, 'i')            \
  X(KN_INT16, "int16", 2, 'i')          \
  X(KN_INT32, "int32", 4, 'i')          \
  X(KN_INT64, "int64", 8, 'i')          \
  X(KN_FLOAT16, "float16", 2, 'f')      \
  X(KN_BFLOAT16, "bfloat16", 2, 'f')    \
  X(KN_FLOAT32, "float32", 4, 'f')      \
  X(KN_FLOAT64, "float64", 8, 'f')

typedef enum kn_dtype {
#define KN__DTYPE_ENUM(e, name, size, kind) e,
  KN_DTYPE_MAP(KN__DTYPE_ENUM)
#undef KN__DTYPE_ENUM
  KN_DTYPE_COUNT
} kn_dtype;

typedef enum kn_device {
  KN_CPU = 0,  /* data in host memory */
  KN_META = 1, /* metadata only: sizes, strides, dtype; no data */
  KN_CUDA = 2  /* data in the memory of the CUDA device (kiln/cuda.h) */
} kn_device;

typedef struct kn_tensor kn_tensor;

/* A scalar argument: the kind decides type promotion as in PyTorch (an int
** scalar never promotes a float tensor; a float scalar promotes an int
** tensor to the default float dtype). */
typedef enum kn_scalar_kind { KN_SCALAR_BOOL, KN_SCALAR_INT, KN_SCALAR_FLOAT } kn_scalar_kind;
typedef struct kn_scalar {
  kn_scalar_kind kind;
  union { bool b; int64_t i; double f; } v;
} kn_scalar;
#define kn_int(x) ((kn_scalar){KN_SCALAR_INT, {.i = (x)}})
#define kn_float(x) ((kn_scalar){KN_SCALAR_FLOAT, {.f = (x)}})
#define kn_bool(x) ((kn_scalar){KN_SCALAR_BOOL, {.b = (x)}})

/* ---- dtypes ---------------------------------------------------------- */
KN_API const char *kn_dtype_name(kn_dtype dt);      /* "float32"; static */
KN_API size_t kn_dtype_size(kn_dtype dt);
KN_API bool kn_dtype_is_floating(kn_dtype dt);
KN_API bool kn_dtype_is_integral(kn_dtype dt, bool include_bool);
/* PyTorch's promote_types (the lattice of torch.promote_types).
** KN_DTYPE_COUNT, with KN_EDTYPE, for an invalid dtype. */
KN_API kn_dtype kn_promote_types(kn_dtype a, kn_dtype b);
/* The default float dtype (float32). */
KN_API kn_dtype kn_default_dtype(void);

/* ---- reference counting and scopes ------------------------------------ */
/* Adds a reference; returns t (so `keep = kn_retain(x)` reads well). */
KN_API kn_tensor *kn_retain(kn_tensor *t);
/* Drops a reference; NULL is ignored. */
KN_API void kn_release(kn_tensor *t);
/* Open an autorelease scope on this thread. Scopes nest. */
KN_API void kn_scope_begin(void);
/* Close the innermost scope, releasing the references it recorded. */
KN_API void kn_scope_end(void);
/* Close the innermost scope but hand `keep` (may be NULL) to the enclosing
** scope, or to the caller as a new reference if no scope remains. Returns
** keep. */
KN_API kn_tensor *kn_scope_end_keep(kn_tensor *keep);
/* Number of live tensors and storages in this process (for leak tests). */
KN_API int64_t kn_live_tensors(void);
KN_API int64_t kn_live_storages(void);

/* ---- metadata ---------------------------------------------------------- */
KN_API int kn_ndim(const kn_tensor *t);
/* Size of dimension d; negative d counts from the end. -1 on a bad dim. */
KN_API int64_t kn_size(const kn_tensor *t, int d);
KN_API int64_t kn_stride(const kn_tensor *t, int d);
/* The sizes/strides arrays (ndim entries); borrowed from t. */
KN_API const int64_t *kn_sizes(const kn_tensor *t);
KN_API const int64_t *kn_strides(const kn_tensor *t);
KN_API int64_t kn_storage_offset(const kn_tensor *t);
KN_API int64_t kn_numel(const kn_tensor *t);
KN_API kn_dtype kn_tensor_dtype(const kn_tensor *t);
KN_API kn_device kn_tensor_device(const kn_tensor *t);
KN_API bool kn_is_contiguous(const kn_tensor *t);
/* Pointer to the first element (storage data + offset); borrowed, NULL on
** meta tensors. Valid while t lives. */
KN_API void *kn_data(const kn_tensor *t);
/* Element at a multi-index (ndim entries) converted to double; NAN on a bad
** index (with kn_last_error set). For tests and debugging. */
KN_API double kn_get(const kn_tensor *t, const int64_t *index);
/* Value of a one-element tensor as double / int64. KN_OK or an error. */
KN_API kn_status kn_item_double(const kn_tensor *t, double *out);
KN_API kn_status kn_item_int(const kn_tensor *t, int64_t *out);
/* Version counter: bumped by every in-place op on t or a view sharing its
** storage. */
KN_API uint64_t kn_tensor_version(const kn_tensor *t);
/* Do a and b share storage? */
KN_API bool kn_same_storage(const kn_tensor *a, const kn_tensor *b);

/* ---- printing ------------------------------------------------------------ */
/* PyTorch's layout: "tensor([[1., 2.],\n        [3., 4.]], dtype=float64)".
** Owned: free() it. NULL on OOM or a NULL tensor (KN_EINVAL). */
KN_API char *kn_tensor_to_string(const kn_tensor *t);
/* Print t and a newline to out (stdout when NULL). */
KN_API kn_status kn_print_tensor(const kn_tensor *t, FILE *out);

/* ---- autograd metadata --------------------------------------------------- */
KN_API bool kn_requires_grad(const kn_tensor *t);
/* Mark a leaf as requiring grad. KN_EAUTOGRAD on a non-leaf or on an
** integer tensor (only floating point tensors can require gradients). */
KN_API kn_status kn_set_requires_grad(kn_tensor *t, bool requires_grad);
KN_API bool kn_is_leaf(const kn_tensor *t);
/* The accumulated gradient, or NULL; borrowed from t. */
KN_API kn_tensor *kn_grad(const kn_tensor *t);
/* Replace (or clear, with NULL) t's .grad. */
KN_API void kn_set_grad(kn_tensor *t, kn_tensor *grad);
/* Name of t's grad_fn ("AddBackward0") or NULL for leaves; static. */
KN_API const char *kn_grad_fn_name(const kn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
