/*
** support/shape_util.h: helpers for view and indexing tests: a float32
** tensor 0, 1, 2, ... and a geometry check (sizes, strides, offset) that
** names the calling test line.
*/
#ifndef KN_TEST_SUPPORT_SHAPE_UTIL_H
#define KN_TEST_SUPPORT_SHAPE_UTIL_H

#include "kiln/tensor.h"

/* A contiguous float32 tensor holding 0, 1, 2, ... in row-major order. Owned. */
kn_tensor *kn_test_seq(int n, const int64_t *sizes);
/* Assert t's rank, sizes, strides and storage offset. */
void kn_test_expect_geom(int line, const kn_tensor *t, int nd, const int64_t *sz,
                         const int64_t *st, int64_t off);

#define SZ(...) (const int64_t[]){__VA_ARGS__}
#define G(...) kn_test_expect_geom(__LINE__, __VA_ARGS__)

#endif
