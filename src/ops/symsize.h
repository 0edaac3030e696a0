/*
** ops/symsize.h: sizes as symbolic ints, for derivative rules (internal).
**
** A rule that passes a size to an op must not read it as a plain int: under
** tracing with dynamic shapes (AOT's joint graph) the size is a symbol (s0),
** and an int would record the traced size as a constant. These helpers take
** and give kn_sym values (constants in eager mode, where every operation has
** a constant fast path) and pass them to the ops as symbolic arguments
** (kn__arg.sym), so the recorded call holds s0 and its output's sizes stay
** symbolic. Decisions on sizes use kn__sym_guard_* (a guard when a
** comparison with a concrete value cannot be decided statically).
**
** Every function returning a tensor returns it registered in the current
** autorelease scope (as the public ops), or NULL with the error set; NULL
** inputs give NULL.
*/
#ifndef KN_OPS_SYMSIZE_H
#define KN_OPS_SYMSIZE_H

#include "ops/opdef.h"

/* Symbolic strides of t (constants unless t->sym); kn__tensor_symsizes
** (ops/opdef.h) gives the sizes. */
void kn__tensor_symstrides(const kn_tensor *t, kn_sym *strides);
/* An int or int-list argument forwarded from a forward call as a known
** value: a copy of *a whose symbols (a's own, or its constants) are written
** to store (1 entry, or one per list entry, at most KN_MAX_DIMS), so the
** joint trace never takes it for a size read as a plain int. */
kn__arg kn__arg_known(const kn__arg *a, kn_sym *store);
/* The number of elements of t over its symbolic sizes. */
kn_sym kn__numel_sym(const kn_tensor *t);
/* The product of the sizes of t's dims selected by mask (a reduction's count). */
kn_sym kn__count_sym(const kn_tensor *t, const bool *mask);
/* Do a and b have the same sizes? Symbolic comparison (guards if needed). */
bool kn__same_sizes(const kn_tensor *a, const kn_tensor *b);

/* expand / reshape to symbolic sizes, or to like's sizes. */
kn_tensor *kn__expand_sym(kn_tensor *t, int n, const kn_sym *sizes);
kn_tensor *kn__expand_like(kn_tensor *t, const kn_tensor *like);
kn_tensor *kn__reshape_sym(kn_tensor *t, int n, const kn_sym *sizes);
kn_tensor *kn__reshape_like(kn_tensor *t, const kn_tensor *like);
/* A fresh contiguous tensor of symbolic sizes filled with value. */
kn_tensor *kn__full_sym(int n, const kn_sym *sizes, kn_scalar value, kn_dtype dt);
/* view to symbolic sizes (t's layout must allow it, as kn_view). */
kn_tensor *kn__view_sym(kn_tensor *t, int n, const kn_sym *sizes);
/* Zeros with like's sizes and dtype (a fresh contiguous tensor). */
kn_tensor *kn__zeros_like_sym(const kn_tensor *like);
/* sum_to_size over symbolic target sizes (reduce_api.c), and to like's sizes. */
kn_tensor *kn__sum_to_symsize(kn_tensor *t, int ndim, const kn_sym *sizes);
kn_tensor *kn__sum_to_like(kn_tensor *t, const kn_tensor *like);
/* Zeros with like's sizes and dtype dt. */
kn_tensor *kn__zeros_shaped(const kn_tensor *like, kn_dtype dt);
/* t / n for a symbolic int n (div.Scalar with a symbolic Scalar). */
kn_tensor *kn__div_symint(kn_tensor *t, kn_sym n);
/* slice(t, dim, start, end, step) and slice_scatter(self, src, dim, start,
** end, step) with symbolic bounds; select and select_scatter with a
** symbolic index. */
kn_tensor *kn__slice_sym(kn_tensor *t, int64_t dim, kn_sym start, kn_sym end, int64_t step);
kn_tensor *kn__slice_scatter_sym(kn_tensor *self, kn_tensor *src, int64_t dim, kn_sym start,
                                 kn_sym end, int64_t step);
kn_tensor *kn__select_sym(kn_tensor *t, int64_t dim, kn_sym index);
kn_tensor *kn__select_scatter_sym(kn_tensor *self, kn_tensor *src, int64_t dim, kn_sym index);

#endif
