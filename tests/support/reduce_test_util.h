/*
** support/reduce_test_util.h: small tensor helpers for the reduction and
** loss tests: tensors from literal values, aranges, a transposed view and an
** element-wise comparison with a tolerance. Returned tensors are new
** references registered in the open autorelease scope.
*/
#ifndef KN_TEST_REDUCE_TEST_UTIL_H
#define KN_TEST_REDUCE_TEST_UTIL_H

#include "kiln/kiln.h"

/* A contiguous tensor holding vals (numel values) converted to dt. */
kn_tensor *rt_from(kn_dtype dt, int ndim, const int64_t *sizes, const double *vals);
/* A contiguous tensor holding 0, 1, 2, ... */
kn_tensor *rt_arange(kn_dtype dt, int ndim, const int64_t *sizes);
/* The transpose (a strided view) of a 2-d tensor. */
kn_tensor *rt_transpose(kn_tensor *t);
/* Assert every element (row-major) equals exp within tol (abs + rel). */
void rt_expect(kn_tensor *t, const double *exp, double tol);

#endif
