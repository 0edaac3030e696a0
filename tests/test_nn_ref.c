/*
** test_nn_ref.c: replays tests/fixtures/nn.json (torch 1.13 eager, written
** by tools/ref/gen_nn.py): outputs and gradients of linear, matmul, addmm,
** conv2d, max/avg pooling, batch_norm (incl. the running-stat update),
** layer_norm and embedding.
*/
#include "nn_util.h"
#include "support/fixture.h"

static int64_t live0;
static void setup(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0, "leaked %lld tensors",
               (long long)(kn_live_tensors() - live0));
}
TestSuite(nn_ref, .init = setup, .fini = teardown);

#define MAXIN 8

/* Runs one case: fills outs (up to 3) and returns how many; in[] are the
** case's inputs (leaves, some requiring grad). */
static int run_case(const json_t *c, kn_tensor **in, int nin, kn_tensor **outs) {
  const char *op = kn_fixture_op(c);
  int64_t st[2], pd[2], dl[2], ks[2];
  int nst = kn_fixture_param_ints(c, "stride", st, 2);
  kn_fixture_param_ints(c, "padding", pd, 2);
  kn_fixture_param_ints(c, "dilation", dl, 2);
  kn_fixture_param_ints(c, "kernel_size", ks, 2);
  if (!strcmp(op, "linear")) {
    outs[0] = kn_linear(in[0], in[1], nin > 2 ? in[2] : NULL);
  } else if (!strcmp(op, "matmul")) {
    outs[0] = kn_matmul(in[0], in[1]);
  } else if (!strcmp(op, "addmm")) {
    outs[0] = kn_addmm(in[0], in[1], in[2], kn_float(kn_fixture_param_double(c, "beta", 1)),
                       kn_float(kn_fixture_param_double(c, "alpha", 1)));
  } else if (!strcmp(op, "convolution")) {
    outs[0] = kn_conv2d(in[0], in[1], nin > 2 ? in[2] : NULL, st, pd, dl,
                        kn_fixture_param_int(c, "groups", 1));
  } else if (!strcmp(op, "max_pool2d_with_indices")) {
    outs[0] = kn_max_pool2d_with_indices(in[0], ks, nst > 0 ? st : NULL, pd, dl,
                                         kn_fixture_param_bool(c, "ceil_mode", false), &outs[1]);
    return 2;
  } else if (!strcmp(op, "avg_pool2d")) {
    outs[0] = kn_avg_pool2d(in[0], ks, nst > 0 ? st : NULL, pd,
                            kn_fixture_param_bool(c, "ceil_mode", false),
                            kn_fixture_param_bool(c, "count_include_pad", true),
                            kn_fixture_param_int(c, "divisor_override", 0));
  } else if (!strcmp(op, "native_batch_norm")) {
    bool affine = kn_fixture_param_bool(c, "affine", false);
    kn_tensor *rm = in[affine ? 3 : 1], *rv = in[affine ? 4 : 2];
    outs[0] = kn_batch_norm(in[0], rm, rv, affine ? in[1] : NULL, affine ? in[2] : NULL,
                            kn_fixture_param_bool(c, "training", true),
                            kn_fixture_param_double(c, "momentum", 0.1),
                            kn_fixture_param_double(c, "eps", 1e-5));
    outs[1] = rm;
    outs[2] = rv;
    return 3;
  } else if (!strcmp(op, "native_layer_norm")) {
    int64_t ns[KN_MAX_DIMS];
    int nn = kn_fixture_param_ints(c, "normalized_shape", ns, KN_MAX_DIMS);
    outs[0] = kn_layer_norm(in[0], nn, ns, nin > 1 ? in[1] : NULL, nin > 2 ? in[2] : NULL,
                            kn_fixture_param_double(c, "eps", 1e-5));
  } else if (!strcmp(op, "embedding")) {
    int64_t pad = kn_fixture_param_int(c, "padding_idx", -1);
    outs[0] = kn_embedding(in[1], in[0], pad < 0 ? KN_NO_PADDING_IDX : pad,
                           kn_fixture_param_bool(c, "scale_grad_by_freq", false));
  } else {
    cr_assert_fail("unknown op %s in case %s", op, kn_fixture_name(c));
  }
  return 1;
}

Test(nn_ref, torch_fixtures_outputs_and_grads) {
  kn_fixture *f = kn_fixture_load_named("nn.json");
  cr_assert_not_null(f, "%s", kn_last_error());
  cr_assert_geq(kn_fixture_ncases(f), 30);
  for (int i = 0; i < kn_fixture_ncases(f); i++) {
    kn_scope_begin();
    const json_t *c = kn_fixture_case(f, i);
    const char *name = kn_fixture_name(c);
    int nin = kn_fixture_ninputs(c);
    kn_tensor *in[MAXIN], *outs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < nin; k++) {
      in[k] = kn_fixture_tensor(kn_fixture_input(c, k));
      cr_assert_not_null(in[k], "%s: %s", name, kn_last_error());
    }
    int no = run_case(c, in, nin, outs);
    cr_assert_not_null(outs[0], "%s: %s", name, kn_last_error());
    cr_assert_eq(no, kn_fixture_noutputs(c), "%s: output count", name);
    double tol = kn_tensor_dtype(in[0]) == KN_FLOAT32 ? 1e-5 : 1e-9;
    char why[512];
    for (int k = 0; k < no; k++)
      cr_assert(kn_fixture_close(outs[k], kn_fixture_output(c, k), tol, tol, why, sizeof why),
                "%s output %d: %s", name, k, why);
    if (kn_fixture_grad(c, 0) || (nin > 1 && kn_fixture_grad(c, 1))) {
      kn_tensor *ones = kn_ones(kn_ndim(outs[0]), kn_sizes(outs[0]), kn_tensor_dtype(outs[0]));
      cr_assert_eq(kn_backward(outs[0], ones), KN_OK, "%s: %s", name, kn_last_error());
      for (int k = 0; k < nin; k++) {
        const json_t *g = kn_fixture_grad(c, k);
        if (!g) continue;
        cr_assert_not_null(kn_grad(in[k]), "%s: no grad for input %d", name, k);
        cr_assert(kn_fixture_close(kn_grad(in[k]), g, tol, tol, why, sizeof why),
                  "%s grad %d: %s", name, k, why);
      }
    }
    kn_scope_end();
  }
  kn_fixture_free(f);
}
