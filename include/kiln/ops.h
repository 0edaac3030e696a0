/*
** kiln/ops.h: the op API. Every function here is one entry of kiln's op table
** and goes through the dispatcher (eager compute, autograd recording, meta
** propagation, tracing). Results follow the ownership rule of kiln/tensor.h:
** a new reference (recorded in the open autorelease scope, if any), or NULL
** with kn_last_error() set. Tensor arguments are borrowed. Families:
** factories (kiln/ops_factory.h), pointwise (kiln/ops_pointwise.h),
** reductions (kiln/ops_reduce.h), shape and indexing (kiln/ops_shape.h),
** neural-network ops and losses (kiln/ops_nn.h).
*/
#ifndef KILN_OPS_H
#define KILN_OPS_H

#include "kiln/ops_factory.h"
#include "kiln/ops_pointwise.h"
#include "kiln/ops_reduce.h"
#include "kiln/ops_shape.h"
#include "kiln/ops_nn.h"

#endif
