/*
** test_dynamo_module.c: a two-layer MLP as a module (named parameters),
** compiled with the eager backend: outputs and gradients (autograd runs
** through the compiled graph) equal the eager ones; parameters are
** described as parameters in the trace.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keep the frames of functions that end in a tail call to a kiln op. */
#pragma GCC optimize("no-optimize-sibling-calls")

#include "dynamo/dynamo.h"
#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"

static kn_value mlp(const kn_value *args, int n, void *ud) {
  (void)n;
  (void)ud;
  kn_module *m = args[0].u.m;
  kn_tensor *h = kn_relu(kn_linear(args[1].u.t, kn_module_get(m, "layers.0.weight"),
                                   kn_module_get(m, "layers.0.bias")));
  kn_tensor *y = kn_linear(h, kn_module_get(m, "layers.1.weight"), kn_module_get(m, "layers.1.bias"));
  return kn_vtensor(kn_mse_loss(y, args[2].u.t, KN_REDUCTION_MEAN));
}

static kn_module *make_mlp(void) {
  kn_module *root = kn_module_new(), *layers = kn_module_new();
  int64_t in[] = {4, 8}, out[] = {8, 2};
  for (int l = 0; l < 2; l++) {
    kn_module *lin = kn_module_new();
    kn_tensor *w = kn_randn(KN_SHAPE(out[l], in[l]), NULL, KN_FLOAT32);
    kn_tensor *b = kn_randn(KN_SHAPE(out[l]), NULL, KN_FLOAT32);
    kn_set_requires_grad(w, true);
    kn_set_requires_grad(b, true);
    kn_module_add_param(lin, "weight", w);
    kn_module_add_param(lin, "bias", b);
    kn_release(w);
    kn_release(b);
    char nm[4];
    snprintf(nm, sizeof nm, "%d", l);
    kn_module_add_child(layers, nm, lin);
  }
  kn_module_add_child(root, "layers", layers);
  return root;
}

Test(module, mlp_outputs_and_gradients_match_eager) {
  char *dir = kn_test_trace_start();
  int64_t live0 = kn_live_tensors();
  kn_module *m = make_mlp();
  kn_compile_options o = {.arg_names = (const char *[]){"self", "x", "target", NULL}};
  kn_compiled *f = kn_compile_fn(mlp, NULL, 3, "forward", __FILE__, __LINE__, &o);
  const char *names[] = {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"};
  for (int step = 0; step < 3; step++) {
    kn_scope_begin();
    kn_tensor *x = kn_randn(KN_SHAPE(5, 4), NULL, KN_FLOAT32);
    kn_tensor *t = kn_randn(KN_SHAPE(5, 2), NULL, KN_FLOAT32);
    kn_value args[] = {kn_vmodule(m), kn_vtensor(x), kn_vtensor(t)};
    /* eager reference */
    kn_value ref = mlp(args, 3, NULL);
    cr_assert_eq(kn_backward(ref.u.t, NULL), KN_OK, "%s", kn_last_error());
    double gref[4][40];
    for (int p = 0; p < 4; p++) {
      kn_tensor *g = kn_grad(kn_module_get(m, names[p]));
      for (int64_t i = 0; i < kn_numel(g); i++) gref[p][i] = ((float *)kn_data(g))[i];
      kn_set_grad(kn_module_get(m, names[p]), NULL);
    }
    /* compiled */
    kn_value out;
    cr_assert_eq(kn_call(f, args, 3, &out), KN_OK, "%s", kn_last_error());
    /* float32, the compiled reduction adds in another order: relative */
    double lo = kn_get(out.u.t, NULL), lr = kn_get(ref.u.t, NULL);
    cr_expect_leq(fabs(lo - lr), 1e-6 * fmax(1.0, fabs(lr)), "loss %.9g, eager %.9g", lo, lr);
    cr_assert_eq(kn_backward(out.u.t, NULL), KN_OK, "%s", kn_last_error());
    for (int p = 0; p < 4; p++) {
      kn_tensor *g = kn_grad(kn_module_get(m, names[p]));
      cr_assert(g, "no gradient for %s", names[p]);
      for (int64_t i = 0; i < kn_numel(g); i++)
        cr_expect_float_eq(((float *)kn_data(g))[i], gref[p][i], 1e-5, "%s[%lld]", names[p], (long long)i);
      kn_set_grad(kn_module_get(m, names[p]), NULL);
    }
    kn_value_release(out);
    kn_scope_end();
  }
  uint64_t defects = 9;
  char *tr = kn_test_dyn_trace(true, &defects);
  cr_expect_eq(defects, 0);
  cr_expect_eq(kn_test_count_sub(tr, "{\"dynamo_output_graph\""), 1, "%s", tr);
  cr_expect(strstr(tr, "\"requires_grad\": true, \"is_parameter\": true, \"stride\": [4, 1]"), "%s", tr);
  cr_expect(strstr(tr, "\"source\": \"L['self']._modules['layers']._modules['0']._parameters['weight']\""), "%s", tr);
  free(tr);
  kn_compiled_free(f);
  kn_module_free(m);
  kn_reset();
  cr_expect_eq(kn_live_tensors(), live0);
  kn_trace_disable();
  kn_test_rmdir(dir);
}

/* A module with hundreds of entries (an optimizer's state: its names are
** found through a hash index past 8 entries): every name is found with
** its own tensor, at either depth, in insertion order; a name that is the
** prefix of another, a missing one and a duplicate are told apart. */
Test(module, many_entries_are_found_by_name) {
  int64_t live0 = kn_live_tensors();
  kn_module *root = kn_module_new();
  kn_tensor *ts[300];
  for (int i = 0; i < 300; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "%d", i);
    kn_module *c = kn_module_new();
    ts[i] = kn_full(KN_SHAPE(1), kn_float(i), KN_FLOAT32);
    cr_assert_eq(kn_module_add_buffer(c, "v", ts[i]), KN_OK);
    cr_assert_eq(kn_module_add_child(root, nm, c), KN_OK, "%s", kn_last_error());
    kn_release(ts[i]);
  }
  cr_expect_eq(kn_module_add_buffer(root, "17", ts[0]), KN_EINVAL);
  cr_expect_str_eq(kn_last_error(), "kn_module_add: the module already has an entry named '17'");
  for (int i = 0; i < 300; i++) {
    char path[24];
    snprintf(path, sizeof path, "%d.v", i);
    kn_tensor *t = kn_module_get(root, path);
    cr_assert_eq(t, ts[i], "%s", path);
    cr_expect_eq(((float *)kn_data(t))[0], (float)i);
  }
  cr_expect_null(kn_module_get(root, "300.v"));
  cr_expect_null(kn_module_get(root, "1.w"));
  cr_expect_null(kn_module_get(root, "29"));
  int kind;
  kn_tensor *t;
  kn_module *c = NULL;
  cr_expect_str_eq(kn__module_item(root, 123, &kind, &t, &c), "123");
  cr_expect_eq(kind, 2);
  kn_module_free(root);
  cr_expect_eq(kn_live_tensors(), live0);
}
