/*
** ops/index.h: element helpers shared by the indexing kernels (ops/index.c,
** ops/index_put.c); internal.
*/
#ifndef KN_OPS_INDEX_H
#define KN_OPS_INDEX_H

#include "ops/opdef.h"

/* *dst += *src for one element of dtype dt (bool: logical or). */
void kn__elem_accumulate(char *dst, const char *src, kn_dtype dt);
/* The flat-th element (row-major) of an integer tensor, as int64. */
int64_t kn__index_value(const kn_tensor *idx, int64_t flat);
/* KN_ERANGE "index 5 is out of bounds for dimension 0 with size 2". */
kn_status kn__out_of_bounds(int64_t i, int dim, int64_t size);

/* Contiguous index_select and gather, split over kiln's threads
** (ops/index_rows.c): the _ok tests say when they apply (d already
** wrapped); the kernels check every index first, with the general
** kernels' errors. */
bool kn__index_select_fast_ok(const kn_tensor *self, const kn_tensor *o);
kn_status kn__index_select_fast(const kn_tensor *self, int d, const kn_tensor *index,
                                kn_tensor *o);
bool kn__gather_fast_ok(const kn_tensor *self, int d, const kn_tensor *index, const kn_tensor *o);
kn_status kn__gather_fast(const kn_tensor *self, int d, const kn_tensor *index, kn_tensor *o);
/* scatter / scatter_add into o (already a copy of self): src, or value (one
** element of o's dtype) when src is NULL; acc adds. */
bool kn__scatter_fast_ok(const kn_tensor *o, int d, const kn_tensor *index, const kn_tensor *src);
kn_status kn__scatter_fast(kn_tensor *o, int d, const kn_tensor *index, const kn_tensor *src,
                           const char *value, bool acc);

#endif
