/*
** kiln/ops_shape.h: views (view, reshape, permute, transpose, expand, slice, select, squeeze, ...), joining and splitting (cat, stack, split, chunk), indexing (index_select, gather, scatter, masked_fill, index_put, setitem).
** Ownership and errors: see kiln/tensor.h and kiln/ops.h.
*/
#ifndef KILN_OPS_SHAPE_H
#define KILN_OPS_SHAPE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
