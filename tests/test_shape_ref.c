/*
** test_shape_ref.c: shape and indexing ops against torch 1.13 fixtures
** (tests/fixtures/shape.json, written by tools/ref/gen_shape.py): output
** values and dtypes, the geometry (sizes, strides, storage offset) of every
** view, and the gradients of sum() of the outputs.
*/
#include <criterion/criterion.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

#define MAXO 8

static int64_t pint(const json_t *c, const char *k) { return kn_fixture_param_int(c, k, 0); }

/* Run the case's op on inputs; fills outs, returns their number or -1. */
static int run(const json_t *c, kn_tensor **in, int nin, kn_tensor **o) {
  const char *op = kn_fixture_op(c);
  kn_tensor *x = in[0];
  int64_t v[KN_MAX_DIMS], w[KN_MAX_DIMS];
  int n = kn_fixture_param_ints(c, "size", v, KN_MAX_DIMS);
  if (!strcmp(op, "view")) o[0] = kn_view(x, n, v);
  else if (!strcmp(op, "reshape")) o[0] = kn_reshape(x, n, v);
  else if (!strcmp(op, "permute"))
    o[0] = kn_permute(x, kn_fixture_param_ints(c, "dims", v, KN_MAX_DIMS), v);
  else if (!strcmp(op, "transpose")) o[0] = kn_transpose(x, pint(c, "dim0"), pint(c, "dim1"));
  else if (!strcmp(op, "t")) o[0] = kn_t(x);
  else if (!strcmp(op, "expand")) o[0] = kn_expand(x, n, v);
  else if (!strcmp(op, "unsqueeze")) o[0] = kn_unsqueeze(x, pint(c, "dim"));
  else if (!strcmp(op, "squeeze")) o[0] = kn_squeeze(x);
  else if (!strcmp(op, "squeeze_dim")) o[0] = kn_squeeze_dim(x, pint(c, "dim"));
  else if (!strcmp(op, "flatten")) o[0] = kn_flatten(x, pint(c, "start"), pint(c, "end"));
  else if (!strcmp(op, "slice"))
    o[0] = kn_slice(x, pint(c, "dim"), pint(c, "start"), pint(c, "end"), pint(c, "step"));
  else if (!strcmp(op, "narrow"))
    o[0] = kn_narrow(x, pint(c, "dim"), pint(c, "start"), pint(c, "length"));
  else if (!strcmp(op, "select")) o[0] = kn_select(x, pint(c, "dim"), pint(c, "index"));
  else if (!strcmp(op, "diagonal"))
    o[0] = kn_diagonal(x, pint(c, "offset"), pint(c, "dim1"), pint(c, "dim2"));
  else if (!strcmp(op, "as_strided")) {
    kn_fixture_param_ints(c, "stride", w, KN_MAX_DIMS);
    o[0] = kn_as_strided(x, n, v, w, pint(c, "offset"));
  } else if (!strcmp(op, "unbind")) return kn_unbind(x, pint(c, "dim"), o, MAXO);
  else if (!strcmp(op, "split"))
    return kn_split(x, pint(c, "split_size"), pint(c, "dim"), o, MAXO);
  else if (!strcmp(op, "split_with_sizes"))
    return kn_split_sizes(x, kn_fixture_param_ints(c, "sizes", v, KN_MAX_DIMS), v,
                          pint(c, "dim"), o, MAXO);
  else if (!strcmp(op, "chunk")) return kn_chunk(x, pint(c, "chunks"), pint(c, "dim"), o, MAXO);
  else if (!strcmp(op, "cat")) o[0] = kn_cat(in, nin, pint(c, "dim"));
  else if (!strcmp(op, "stack")) o[0] = kn_stack(in, nin, pint(c, "dim"));
  else if (!strcmp(op, "index_select")) o[0] = kn_index_select(x, pint(c, "dim"), in[1]);
  else if (!strcmp(op, "gather")) o[0] = kn_gather(x, pint(c, "dim"), in[1]);
  else if (!strcmp(op, "scatter")) o[0] = kn_scatter(x, pint(c, "dim"), in[1], in[2]);
  else if (!strcmp(op, "scatter_value"))
    o[0] = kn_scatter_value(x, pint(c, "dim"), in[1],
                            kn_float(kn_fixture_param_double(c, "value", 0)));
  else if (!strcmp(op, "scatter_add")) o[0] = kn_scatter_add(x, pint(c, "dim"), in[1], in[2]);
  else if (!strcmp(op, "masked_fill"))
    o[0] = kn_masked_fill(x, in[1], kn_float(kn_fixture_param_double(c, "value", 0)));
  else if (!strcmp(op, "masked_fill_tensor")) o[0] = kn_masked_fill_tensor(x, in[1], in[2]);
  else if (!strcmp(op, "index")) o[0] = kn_index(x, in + 1, nin - 1);
  else if (!strcmp(op, "index_put"))
    o[0] = kn_index_put(x, in + 1, nin - 2, in[nin - 1],
                        kn_fixture_param_bool(c, "accumulate", false));
  else if (!strcmp(op, "slice_scatter"))
    o[0] = kn_slice_scatter(x, in[1], pint(c, "dim"), pint(c, "start"), pint(c, "end"),
                            pint(c, "step"));
  else if (!strcmp(op, "select_scatter"))
    o[0] = kn_select_scatter(x, in[1], pint(c, "dim"), pint(c, "index"));
  else if (!strcmp(op, "diagonal_scatter"))
    o[0] = kn_diagonal_scatter(x, in[1], pint(c, "offset"), pint(c, "dim1"), pint(c, "dim2"));
  else if (!strcmp(op, "setitem_slice")) {
    o[0] = kn_clone(x);
    if (kn_setitem_slice(o[0], pint(c, "dim"), pint(c, "start"), pint(c, "end"),
                         pint(c, "step"), in[1]) != KN_OK)
      return -1;
  } else {
    cr_assert_fail("unknown op %s", op);
  }
  return o[0] ? 1 : -1;
}

static void check_geometry(const json_t *c, kn_tensor *const *o, int n) {
  const json_t *g = kn_fixture_param(c, "geometry");
  if (!g) return;
  cr_assert_eq((int)json_array_size(g), n, "%s: %d views, torch has %zu", kn_fixture_name(c), n,
               json_array_size(g));
  for (int i = 0; i < n; i++) {
    const json_t *e = json_array_get(g, (size_t)i);
    const json_t *sz = json_array_get(e, 0), *st = json_array_get(e, 1);
    cr_assert_eq(kn_ndim(o[i]), (int)json_array_size(sz), "%s: output %d rank",
                 kn_fixture_name(c), i);
    for (int d = 0; d < kn_ndim(o[i]); d++) {
      cr_assert_eq(kn_sizes(o[i])[d], json_integer_value(json_array_get(sz, (size_t)d)),
                   "%s: output %d size %d", kn_fixture_name(c), i, d);
      cr_assert_eq(kn_strides(o[i])[d], json_integer_value(json_array_get(st, (size_t)d)),
                   "%s: output %d stride %d: %lld vs torch %lld", kn_fixture_name(c), i, d,
                   (long long)kn_strides(o[i])[d],
                   (long long)json_integer_value(json_array_get(st, (size_t)d)));
    }
    cr_assert_eq(kn_storage_offset(o[i]), json_integer_value(json_array_get(e, 2)),
                 "%s: output %d storage offset %lld", kn_fixture_name(c), i,
                 (long long)kn_storage_offset(o[i]));
  }
}

static void check_case(const json_t *c) {
  const char *name = kn_fixture_name(c);
  int nin = kn_fixture_ninputs(c);
  kn_tensor *in[8], *used[8], *o[MAXO];
  for (int i = 0; i < nin; i++) {
    in[i] = kn_fixture_tensor(kn_fixture_input(c, i));
    cr_assert_not_null(in[i], "%s: %s", name, kn_last_error());
    used[i] = in[i];
  }
  int64_t pd[KN_MAX_DIMS];
  int np = kn_fixture_param_ints(c, "pre_permute", pd, KN_MAX_DIMS);
  if (np > 0) used[0] = kn_permute(in[0], np, pd);
  if (kn_fixture_param_bool(c, "pre_t", false)) used[0] = kn_t(used[0]);
  int n = run(c, used, nin, o);
  cr_assert(n > 0, "%s: %s", name, kn_last_error());
  cr_assert_eq(n, kn_fixture_noutputs(c), "%s: %d outputs", name, n);
  char why[256];
  for (int i = 0; i < n; i++)
    cr_assert(kn_fixture_close(o[i], kn_fixture_output(c, i), 1e-12, 1e-12, why, sizeof why),
              "%s: output %d: %s", name, i, why);
  check_geometry(c, o, n);
  /* gradients of sum(outputs) */
  kn_tensor *wrt[8], *gout[MAXO], *g[8];
  int k[8], m = 0;
  for (int i = 0; i < nin; i++)
    if (kn_fixture_grad(c, i)) {
      k[m] = i;
      wrt[m++] = in[i];
    }
  if (m == 0) return;
  for (int i = 0; i < n; i++) gout[i] = kn_ones(kn_ndim(o[i]), kn_sizes(o[i]), KN_FLOAT64);
  kn_status st = kn_autograd_grad(o, n, wrt, m, gout, false, false, true, g);
  cr_assert_eq(st, KN_OK, "%s: backward: %s", name, kn_last_error());
  for (int j = 0; j < m; j++)
    cr_assert(kn_fixture_close(g[j], kn_fixture_grad(c, k[j]), 1e-12, 1e-12, why, sizeof why),
              "%s: grad of input %d: %s", name, k[j], why);
}

Test(shape_ref, every_case_matches_torch) {
  int64_t live0 = kn_live_tensors();
  kn_fixture *f = kn_fixture_load_named("shape.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  cr_assert_geq(kn_fixture_ncases(f), 40);
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    kn_scope_begin();
    check_case(kn_fixture_case(f, i));
    kn_scope_end();
  }
  kn_fixture_free(f);
  cr_assert_eq(kn_live_tensors(), live0, "leaked tensors");
}
