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

#endif
