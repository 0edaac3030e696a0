/*
** nn/init.c: PyTorch's initialisation distributions for the layers
** (reset_parameters): uniform bounds, standard normal, constants.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "dynamo/dynamo.h"
#include "nn/nn_int.h"

static kn_tensor *as_leaf(kn_tensor *t) {
  if (t && kn_set_requires_grad(t, true) != KN_OK) {
    kn_release(t);
    return NULL;
  }
  return t;
}

/* An owned reference to t (not recorded in any scope) after closing the
** scope the caller opened. */
static kn_tensor *owned(kn_tensor *t) {
  kn_retain(t);
  kn_scope_end();
  return t;
}

kn_tensor *kn__nn_uniform(int ndim, const int64_t *sizes, double bound, kn_generator *gen) {
  kn_scope_begin();
  kn_tensor *u = kn_rand(ndim, sizes, gen, KN_FLOAT32); /* [0, 1) */
  kn_tensor *p = kn_add_scalar(kn_mul_scalar(u, kn_float(2 * bound)), kn_float(-bound));
  return as_leaf(owned(p));
}

kn_tensor *kn__nn_normal(int ndim, const int64_t *sizes, kn_generator *gen) {
  kn_scope_begin();
  return as_leaf(owned(kn_randn(ndim, sizes, gen, KN_FLOAT32)));
}

kn_tensor *kn__nn_const(int ndim, const int64_t *sizes, double value, kn_dtype dtype,
                        bool requires_grad) {
  kn_scope_begin();
  kn_tensor *t = owned(kn_full(ndim, sizes, kn_float(value), dtype));
  return requires_grad ? as_leaf(t) : t;
}

kn_status kn__nn_add(kn_module *m, const char *name, kn_tensor *t, bool param) {
  if (!t) return kn_last_status() ? kn_last_status() : kn__oom();
  kn_status st = param ? kn_module_add_param(m, name, t) : kn_module_add_buffer(m, name, t);
  kn_release(t);
  return st;
}
