/*
** kiln/ops_pointwise.h: elementwise math, comparisons, logical ops, where, clamp, pow, casts and copies, in-place variants.
** Ownership and errors: see kiln/tensor.h and kiln/ops.h.
*/
#ifndef KILN_OPS_POINTWISE_H
#define KILN_OPS_POINTWISE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
