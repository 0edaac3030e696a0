/*
** support/aot_sweep.h: the AOT op sweep shared by test_aot_sweep.c
** (backend "aot_eager") and test_aot_sweep_inductor.c (backend
** "inductor"). A case compiles f(x[, y]) = op(x[, y]) alone and in a
** two-op chain through it and compares outputs and input gradients with
** the same function run eagerly (see aot_sweep.c for layouts, sizes and
** tolerances). Every differentiable row of the op table has a case or a
** written reason to be left out (kn_test_aot_sweep_uncovered checks it).
*/
#ifndef KN_TEST_AOT_SWEEP_H
#define KN_TEST_AOT_SWEEP_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"

typedef enum kn_sweep_layout { KN_SWEEP_CONTIG, KN_SWEEP_TRANSPOSED, KN_SWEEP_BROADCAST } kn_sweep_layout;

typedef struct kn_sweep_opts {
  const char *backend; /* "aot_eager" or "inductor" */
  kn_dtype dtype;
  double tol;          /* atol = rtol */
  kn_sweep_layout layout;
  bool dynamic;        /* compiled with dynamic sizes, called at two sizes */
  int64_t rows;        /* rows of x: 5, or 0 for the zero-size sweep */
  bool count_compiles; /* dynamic: compiles no more often than "eager" */
  bool chained_only;   /* only the two-op chains (the op alone is skipped) */
} kn_sweep_opts;

/* Runs every case under o; prints each mismatch to stderr and returns how
** many cases differ from eager. */
int kn_test_aot_sweep(const kn_sweep_opts *o);
/* Differentiable op-table rows (no KN_OPF_NONDIFF/FACTORY, a derivative
** rule) that no case's captured graph calls and that have no reason to be
** left out; plus rows given a reason that a case does call. Prints each to
** stderr; returns the count (0 when the sweep is complete). */
int kn_test_aot_sweep_uncovered(void);
/* Number of cases and of rows left out with a reason. */
int kn_test_aot_sweep_cases(void);
int kn_test_aot_sweep_left_out(void);

#endif
