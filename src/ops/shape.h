/*
** ops/shape.h: helpers shared by the shape and indexing op family
** (ops/shape*.c, ops/index*.c); internal.
**
** A kn__geom is the symbolic geometry of a tensor or a view: sizes, strides
** (elements) and storage offset. View meta functions read their input's
** geometry, transform it, and push it as a view output.
*/
#ifndef KN_OPS_SHAPE_H
#define KN_OPS_SHAPE_H

#include "ops/opdef.h"

typedef struct kn__geom {
  int nd;
  kn_sym sz[KN_MAX_DIMS];
  kn_sym st[KN_MAX_DIMS];
  kn_sym off;
} kn__geom;

/* The geometry of t (symbolic when t is). */
void kn__geom_of(const kn_tensor *t, kn__geom *g);
/* Push g as a view of args[argi] (dtype of that tensor). */
kn_status kn__push_view(kn__metas *out, const kn__call *c, int argi, const kn__geom *g);
/* Push a fresh contiguous output of dtype dt and sizes sz[0..nd). */
kn_status kn__push_fresh(kn__metas *out, kn_dtype dt, int nd, const kn_sym *sz);
/* "[2, 3]" for symbolic sizes into buf (snprintf semantics). */
int kn__format_symsizes(int nd, const kn_sym *s, char *buf, size_t n);
/* Wrap dim against ndim (PyTorch's message on error). */
kn_status kn__shape_wrap(int64_t dim, int ndim, int *out);
/* Python-style clamping of slice bounds for a dimension of the given size:
** negative start/end count from the end, then both are clamped to [0, size]
** with end >= start (guards recorded for symbolic sizes). */
void kn__slice_bounds(kn_sym size, kn_sym start, kn_sym end, kn_sym *s, kn_sym *e);
/* Number of elements of a slice [start, end) with step > 0 (after clamping). */
kn_sym kn__slice_len(kn_sym start, kn_sym end, int64_t step);

/* Resolve a size list with at most one -1 against numel (PyTorch's
** infer_size): KN_ESHAPE "shape '[3, 5]' is invalid for input of size 12". */
kn_status kn__infer_size(const kn__arg *req, kn_sym numel, kn_sym *out);
/* PyTorch's computeStride: strides that make `nsz` a view of geometry
** (osz, ost), or false when no such strides exist. */
bool kn__compute_stride(int ond, const kn_sym *osz, const kn_sym *ost, int nnd,
                        const kn_sym *nsz, kn_sym *nst);
/* Product of sizes. */
kn_sym kn__sym_numel(int nd, const kn_sym *sz);

/* Apply slice / select / diagonal to a geometry (PyTorch's checks and
** messages). */
kn_status kn__geom_slice(kn__geom *g, int64_t dim, const kn__arg *start, const kn__arg *end,
                         int64_t step);
kn_status kn__geom_select(kn__geom *g, int64_t dim, int64_t index);
kn_status kn__geom_diagonal(kn__geom *g, int64_t offset, int64_t dim1, int64_t dim2);

/* The gradient of as_strided(input geometry -> view geometry) for grad (op
** _as_strided_backward). geom: the op's six geometry arguments (input size,
** stride, offset, then the view's), int lists and ints that may carry
** symbols (kn__arg.sym), so the recorded call and its output's sizes stay
** symbolic. New reference in the current scope, or NULL. */
kn_tensor *kn__as_strided_grad(kn_tensor *grad, const kn__arg *geom);

/* PyTorch's legacy type name of a dtype ("Float", "Long"); static. */
const char *kn__legacy_type_name(kn_dtype dt);

/* Composite kernels open a private autorelease scope, call public ops, and
** push the result with this (it takes a new reference of r; NULL r gives the
** last error's status), then close the scope. */
kn_status kn__composite_push(kn__outs *out, kn_tensor *r);

#endif
