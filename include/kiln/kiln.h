/*
** kiln/kiln.h: the umbrella header. Include this one.
*/
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/core.h"
#include "kiln/tensor.h"
#include "kiln/ops.h"
#include "kiln/compile.h"
#include "kiln/autograd.h"
#include "kiln/autocast.h"
#include "kiln/graph.h"
#include "kiln/log.h"
#include "kiln/random.h"
#include "kiln/trace.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "kiln/checkpoint.h"
#include "kiln/data.h"
#include "kiln/profiler.h"
#include "kiln/threads.h"
#include "kiln/distributed.h"
#include "kiln/cuda.h"

#endif
