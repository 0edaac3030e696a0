/*
** tests/support/gradcheck.h: finite-difference gradient checks in float64,
** like torch.autograd.gradcheck / gradgradcheck. The full Jacobian is
** compared: numerically by central differences (x +- eps per input element)
** and analytically by one kn_autograd_grad call per output element.
**
** fn computes the output from inputs[0..n) with kiln ops and returns it (a
** new reference, as every op result; it may live in the autorelease scope:
** the checker opens a scope around every call of fn). Inputs that require
** grad are differentiated and must be float64 CPU tensors with distinct
** (non-overlapping) elements; the checker perturbs their data in place and
** restores it. Other inputs are passed through unchanged.
*/
#ifndef KN_TESTS_GRADCHECK_H
#define KN_TESTS_GRADCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/kiln.h"

typedef kn_tensor *(*kn_gc_fn)(kn_tensor *const *inputs, int n, void *ud);

typedef struct kn_gradcheck_opts {
  double eps;   /* finite-difference step; 1e-6 */
  double atol;  /* 1e-5 */
  double rtol;  /* 1e-3 */
} kn_gradcheck_opts;

#define KN_GRADCHECK_DEFAULTS ((kn_gradcheck_opts){1e-6, 1e-5, 1e-3})

/* First order: analytical d(out)/d(inputs) vs central differences. true when
** every entry satisfies |a - n| <= atol + rtol * |n|; otherwise false with a
** message in why naming the input, the output and input elements, the
** numerical (expected) and analytical (got) values. */
bool kn_gradcheck(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud, char *why,
                  size_t whyn);
bool kn_gradcheck_ex(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud,
                     const kn_gradcheck_opts *opts, char *why, size_t whyn);

/* Second order: with a fixed pseudo-random v shaped like the output, checks
** the Jacobian of g(x) = d(out . v)/dx (computed with create_graph) against
** central differences of g, for every differentiated input. */
bool kn_gradgradcheck(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud, char *why,
                      size_t whyn);
bool kn_gradgradcheck_ex(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud,
                         const kn_gradcheck_opts *opts, char *why, size_t whyn);

#endif
