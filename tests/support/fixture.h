/*
** tests/support/fixture.h: reading torch reference fixtures (JSON written by
** tools/ref/refgen.py; the format is documented in tools/ref/README.md) and
** comparing kiln tensors with expected values (NaN equals NaN, infinities
** must match exactly, everything else within atol + rtol * |expected|).
**
** Ownership: kn_fixture_load returns an owned fixture (kn_fixture_free).
** Every const json_t * returned here is borrowed from the fixture and lives
** until kn_fixture_free. Tensors built here are new kiln references (also
** recorded in the open autorelease scope, as every kiln result).
*/
#ifndef KN_TESTS_FIXTURE_H
#define KN_TESTS_FIXTURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kiln/kiln.h"

typedef struct kn_fixture kn_fixture;

/* Load a fixture file. Owned; NULL on error (message in kn_last_error()). */
kn_fixture *kn_fixture_load(const char *path);
/* Load KN_FIXTURE_DIR "/" name. Owned or NULL. */
kn_fixture *kn_fixture_load_named(const char *name);
void kn_fixture_free(kn_fixture *f);

/* Cases, in file order. Borrowed. */
int kn_fixture_ncases(const kn_fixture *f);
const json_t *kn_fixture_case(const kn_fixture *f, int i);
/* The case with this name, or NULL. Borrowed. */
const json_t *kn_fixture_find(const kn_fixture *f, const char *name);

/* Fields of a case ("" / 0 / NULL when absent). Borrowed. */
const char *kn_fixture_name(const json_t *c);
const char *kn_fixture_op(const json_t *c);
int kn_fixture_ninputs(const json_t *c);
const json_t *kn_fixture_input(const json_t *c, int i);
int kn_fixture_noutputs(const json_t *c);
const json_t *kn_fixture_output(const json_t *c, int i);
/* Expected gradient of input i, or NULL (no gradient recorded / null). */
const json_t *kn_fixture_grad(const json_t *c, int i);
/* The grad_output used for the gradients of output i, or NULL, meaning the
** gradients are those of sum() of the outputs (grad_output all ones). */
const json_t *kn_fixture_grad_output(const json_t *c, int i);
/* A param (any JSON value) or NULL. */
const json_t *kn_fixture_param(const json_t *c, const char *key);
double kn_fixture_param_double(const json_t *c, const char *key, double dflt);
int64_t kn_fixture_param_int(const json_t *c, const char *key, int64_t dflt);
bool kn_fixture_param_bool(const json_t *c, const char *key, bool dflt);
/* Copies an integer list param into out (at most cap); returns its length,
** or -1 when absent or not a list of integers. A bare integer counts as a
** list of one. */
int kn_fixture_param_ints(const json_t *c, const char *key, int64_t *out, int cap);

/* Build a kiln tensor from an encoded tensor (contiguous, CPU). Sets
** requires_grad when the encoding says "requires_grad": true. New
** reference, or NULL with kn_last_error() on a malformed encoding. */
kn_tensor *kn_fixture_tensor(const json_t *enc);
/* A contiguous CPU tensor of dtype dt with the given values (numel of
** sizes entries, row-major), converted to dt. New reference or NULL. */
kn_tensor *kn_fixture_from_doubles(kn_dtype dt, int ndim, const int64_t *sizes,
                                   const double *values);
/* Parse a dtype name ("float32"); false if unknown. */
bool kn_fixture_dtype(const char *name, kn_dtype *out);

/* Does actual match the encoded tensor (same sizes and dtype, values close)?
** On mismatch writes a message into why (n bytes) naming the first
** mismatching flat index and both values, and returns false. */
bool kn_fixture_close(const kn_tensor *actual, const json_t *expected, double rtol,
                      double atol, char *why, size_t n);
/* The same between two kiln tensors (sizes must match; dtypes may differ
** unless check_dtype). */
bool kn_tensors_close(const kn_tensor *actual, const kn_tensor *expected, double rtol,
                      double atol, bool check_dtype, char *why, size_t n);
/* Element-wise closeness rule used above (NaN == NaN; inf only equals the
** same inf). */
bool kn_values_close(double actual, double expected, double rtol, double atol);

#endif
