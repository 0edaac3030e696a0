/*
** tests/test_dynamo_lift.c: modules and tensors a compiled function reaches
** through a pointer (the user-data pointer, a global, a child found with
** kn_module_child) instead of its arguments. Their parameters and buffers
** must be graph inputs, never constants: a few SGD steps trained through
** the compiled function on "eager", "aot_eager" and "inductor" give the
** losses of the same steps run eagerly on a twin model (same seed; float32,
** rtol 1e-5: compiled reductions add in another order), every parameter
** has a gradient after each backward, batch-norm running statistics move
** on every call as eagerly, and one graph serves all steps. Pointing a
** declared global at another module, or freeing a captured one, recompiles
** with the guard that failed; a parameter whose requires_grad changes
** recompiles; kn_export refuses to lift, naming the tensor and the line.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Keep the frames of functions that end in a tail call to a kiln op. */
#pragma GCC optimize("no-optimize-sibling-calls")

#include "kiln/autograd.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "support/fixture.h"

static const char *const backends[] = {"eager", "aot_eager", "inductor"};
#define NBACKENDS 3
#define STEPS 4

/* Linear(4, 8), ReLU, Linear(8, 3), initialised from `seed`. */
static kn_module *mlp(uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_module *m = kn_nn_sequential(3, (kn_module *[]){kn_nn_linear(4, 8, true, g), kn_nn_relu(),
                                                     kn_nn_linear(8, 3, true, g)});
  kn_generator_free(g);
  cr_assert_not_null(m, "%s", kn_last_error());
  return m;
}

/* A root with children "encoder" (Sequential: Linear(4, 8), ReLU) and
** "head" (Linear(8, 3)). */
static kn_module *encoder_head(uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_module *root = kn_module_new();
  kn_module *enc = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(4, 8, true, g), kn_nn_relu()});
  cr_assert_eq(kn_module_add_child(root, "encoder", enc), KN_OK);
  cr_assert_eq(kn_module_add_child(root, "head", kn_nn_linear(8, 3, true, g)), KN_OK);
  kn_generator_free(g);
  return root;
}

/* Inputs and targets of step i (the same for both twins). */
static void batch(int i, kn_tensor **x, kn_tensor **y) {
  kn_generator *g = kn_generator_new(100 + (uint64_t)i);
  *x = kn_randn(KN_SHAPE(6, 4), g, KN_FLOAT32);
  *y = kn_randn(KN_SHAPE(6, 3), g, KN_FLOAT32);
  kn_generator_free(g);
}

static kn_tensor *mse(kn_tensor *out, kn_tensor *y) {
  return kn_mse_loss(out, y, KN_REDUCTION_MEAN);
}

/* ---- the compiled functions --------------------------------------------------------- */
static kn_module *g_model;         /* an undeclared global */
static kn_module *g_declared;      /* declared in kn_compile_options.globals */

static kn_value loss_ud(const kn_value *a, int n, void *ud) {
  (void)n;
  return kn_vtensor(mse(kn_nn_forward(ud, a[0].u.t), a[1].u.t));
}

static kn_value loss_global(const kn_value *a, int n, void *ud) {
  (void)n, (void)ud;
  return kn_vtensor(mse(kn_nn_forward(g_model, a[0].u.t), a[1].u.t));
}

/* y = head(encoder.0(x).relu()): children reached with kn_module_child from
** the module in args[2] (an argument) or, when there is none, from ud. */
static kn_value loss_children(const kn_value *a, int n, void *ud) {
  kn_module *root = n > 2 ? a[2].u.m : ud;
  kn_tensor *h = kn_relu(kn_nn_forward(kn_module_child(root, "encoder.0"), a[0].u.t));
  return kn_vtensor(mse(kn_nn_forward(kn_module_child(root, "head"), h), a[1].u.t));
}

static kn_value forward_declared(const kn_value *a, int n, void *ud) {
  (void)n, (void)ud;
  return kn_vtensor(kn_nn_forward(g_declared, a[0].u.t));
}

static kn_value forward_global(const kn_value *a, int n, void *ud) {
  (void)n, (void)ud;
  return kn_vtensor(kn_nn_forward(g_model, a[0].u.t));
}

/* ---- training twins -------------------------------------------------------------------- */
typedef struct trainer {
  kn_module *model;  /* whose parameters the compiled function reaches */
  kn_compiled *f;
  kn_module *arg;    /* passed as args[2] when set */
} trainer;

static kn_optimizer *sgd_of(kn_module *m) {
  kn_tensor **ps = NULL;
  int n = kn_nn_parameters(m, &ps);
  cr_assert_gt(n, 0, "%s", kn_last_error());
  kn_optimizer *o = kn_sgd(ps, n, &(kn_optim_options){.lr = 0.1});
  free(ps);
  cr_assert_not_null(o, "%s", kn_last_error());
  return o;
}

typedef struct gradcheck {
  const char *what;
  int n;
} gradcheck;

static kn_status has_grad(void *ud, const char *name, kn_tensor *t) {
  gradcheck *gc = ud;
  cr_assert_not_null(kn_grad(t), "%s: parameter %s has no gradient after backward", gc->what, name);
  gc->n++;
  return KN_OK;
}

/* STEPS SGD steps of `model` eagerly with loss = fn(x, y; model as ud), and
** of t->model through t->f: the same losses, a gradient on every parameter. */
static void train_twins(kn_fn fn, kn_module *model, trainer *t, const char *what) {
  kn_optimizer *oe = sgd_of(model), *oc = sgd_of(t->model);
  int nparams = kn_optim_num_params(oc);
  for (int i = 0; i < STEPS; i++) {
    kn_scope_begin();
    kn_tensor *x, *y;
    batch(i, &x, &y);
    int n = t->arg ? 3 : 2;
    kn_value args[3] = {kn_vtensor(x), kn_vtensor(y), kn_vmodule(t->arg)};
    kn_value eargs[3] = {args[0], args[1], kn_vmodule(model)};
    kn_value le = fn(eargs, n, model), lc;
    cr_assert_not_null(le.u.t, "%s: %s", what, kn_last_error());
    cr_assert_eq(kn_call(t->f, args, n, &lc), KN_OK, "%s: %s", what, kn_last_error());
    double de = kn_get(le.u.t, NULL), dc = kn_get(lc.u.t, NULL);
    cr_expect(fabs(dc - de) <= 1e-5 * fabs(de) + 1e-7, "%s step %d: compiled loss %.9g, eager %.9g",
              what, i, dc, de);
    cr_assert_eq(kn_backward(le.u.t, NULL), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_backward(lc.u.t, NULL), KN_OK, "%s: %s", what, kn_last_error());
    gradcheck gc = {what, 0};
    cr_assert_eq(kn_nn_named_tensors(t->model, true, has_grad, &gc), KN_OK);
    cr_assert_eq(gc.n, nparams);
    cr_assert_eq(kn_optim_step(oe), KN_OK, "%s", kn_last_error());
    cr_assert_eq(kn_optim_step(oc), KN_OK, "%s", kn_last_error());
    kn_optim_zero_grad(oe);
    kn_optim_zero_grad(oc);
    kn_value_release(lc);
    kn_scope_end();
  }
  kn_optim_free(oe);
  kn_optim_free(oc);
}

/* The compiled function for backend b, counting its graphs. */
static kn_compiled *compile_counted(kn_fn fn, void *ud, int nargs, kn_compile_counter *cc,
                                    const char *b) {
  *cc = (kn_compile_counter){0, 0, b};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = cc};
  kn_compiled *f = kn_compile_fn(fn, ud, nargs, "loss", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  return f;
}

Test(lift, model_behind_the_user_data_pointer_trains_on_every_backend) {
  for (int b = 0; b < NBACKENDS; b++) {
    kn_module *ref = mlp(7), *model = mlp(7);
    kn_compile_counter cc;
    trainer t = {model, compile_counted(loss_ud, model, 2, &cc, backends[b]), NULL};
    train_twins(loss_ud, ref, &t, backends[b]);
    cr_expect_eq(cc.frame_count, 1, "%s: %d graphs for %d steps", backends[b], cc.frame_count,
                 STEPS);
    kn_compiled_free(t.f);
    kn_module_free(model);
    kn_module_free(ref);
  }
}

Test(lift, model_behind_a_global_trains_on_every_backend) {
  for (int b = 0; b < NBACKENDS; b++) {
    kn_module *ref = mlp(8);
    g_model = mlp(8);
    kn_compile_counter cc;
    trainer t = {g_model, compile_counted(loss_global, NULL, 2, &cc, backends[b]), NULL};
    train_twins(loss_ud, ref, &t, backends[b]); /* the eager twin: ref as ud */
    cr_expect_eq(cc.frame_count, 1, "%s: %d graphs", backends[b], cc.frame_count);
    kn_compiled_free(t.f);
    kn_module_free(g_model);
    g_model = NULL;
    kn_module_free(ref);
  }
}

Test(lift, nested_children_train_on_every_backend) {
  for (int b = 0; b < NBACKENDS; b++)
    for (int as_arg = 0; as_arg < 2; as_arg++) {
      kn_module *ref = encoder_head(9), *root = encoder_head(9);
      kn_compile_counter cc;
      char what[64];
      snprintf(what, sizeof what, "%s, root %s", backends[b], as_arg ? "an argument" : "ud");
      trainer t = {root, compile_counted(loss_children, as_arg ? NULL : root, as_arg ? 3 : 2, &cc,
                                         backends[b]),
                   as_arg ? root : NULL};
      train_twins(loss_children, ref, &t, what);
      cr_expect_eq(cc.frame_count, 1, "%s: %d graphs", what, cc.frame_count);
      kn_compiled_free(t.f);
      kn_module_free(root);
      kn_module_free(ref);
    }
}

/* ---- buffers ------------------------------------------------------------------------------ */
/* Linear(4, 6), BatchNorm1d(6), ReLU, Linear(6, 3) in training mode. */
static kn_module *bn_net(uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_module *m = kn_nn_sequential(4, (kn_module *[]){kn_nn_linear(4, 6, true, g),
                                                     kn_nn_batchnorm1d(6, 1e-5, 0.1, true, true),
                                                     kn_nn_relu(), kn_nn_linear(6, 3, true, g)});
  kn_generator_free(g);
  cr_assert_not_null(m, "%s", kn_last_error());
  return m;
}

static void expect_buffers_equal(kn_module *got, kn_module *want, const char *what, int call) {
  const char *names[] = {"1.running_mean", "1.running_var", "1.num_batches_tracked"};
  for (int k = 0; k < 3; k++) {
    char why[256];
    cr_expect(kn_tensors_close(kn_module_get(got, names[k]), kn_module_get(want, names[k]), 1e-5,
                               1e-6, false, why, sizeof why),
              "%s, after call %d: %s: %s", what, call, names[k], why);
  }
}

Test(lift, batchnorm_statistics_reached_through_a_pointer_move_on_every_call) {
  for (int b = 0; b < NBACKENDS; b++) {
    kn_module *ref = bn_net(3), *model = bn_net(3);
    kn_compile_counter cc;
    trainer t = {model, compile_counted(loss_ud, model, 2, &cc, backends[b]), NULL};
    train_twins(loss_ud, ref, &t, backends[b]);
    expect_buffers_equal(model, ref, backends[b], STEPS);
    double nb = kn_get(kn_module_get(model, "1.num_batches_tracked"), NULL);
    cr_expect_eq(nb, STEPS, "%s: num_batches_tracked %g after %d calls", backends[b], nb, STEPS);
    cr_expect_eq(cc.frame_count, 1, "%s: %d graphs", backends[b], cc.frame_count);
    kn_compiled_free(t.f);
    kn_module_free(model);
    kn_module_free(ref);
  }
}

/* ---- recompiles ---------------------------------------------------------------------------- */
typedef struct reasons {
  char text[4][600];
  int n;
} reasons;

static void on_guard_fail(const kn_guard_failure *gf, void *ud) {
  reasons *r = ud;
  if (r->n < 4) snprintf(r->text[r->n++], sizeof r->text[0], "%s", gf->reason);
}

/* f(x) == the eager forward of m. */
static void expect_forward(kn_compiled *f, kn_module *m, const char *what) {
  kn_scope_begin();
  kn_tensor *x, *y;
  batch(0, &x, &y);
  kn_value arg = kn_vtensor(x), out;
  cr_assert_eq(kn_call(f, &arg, 1, &out), KN_OK, "%s: %s", what, kn_last_error());
  char why[256];
  cr_expect(kn_tensors_close(out.u.t, kn_nn_forward(m, x), 1e-5, 1e-6, false, why, sizeof why),
            "%s: %s", what, why);
  kn_value_release(out);
  kn_scope_end();
}

Test(lift, a_declared_global_pointing_at_another_module_recompiles) {
  kn_module *a = mlp(1), *b = mlp(2);
  g_declared = a;
  reasons r = {0};
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_guard_fail, .guard_fail_ud = &r,
                          .globals = (const kn_compile_global[]){{"model", &g_declared, NULL}},
                          .nglobals = 1};
  kn_compiled *f = kn_compile_fn(forward_declared, NULL, 1, "fwd", __FILE__, __LINE__, &o);
  cr_assert_not_null(f, "%s", kn_last_error());
  expect_forward(f, a, "module a");
  g_declared = b;
  expect_forward(f, b, "module b");
  cr_assert_eq(r.n, 1);
  char want[128];
  snprintf(want, sizeof want, "___check_obj_id(G['model'], %p)", (void *)a);
  cr_expect(strstr(r.text[0], want) == r.text[0], "reason: %s (wanted %s)", r.text[0], want);
  cr_expect(strstr(r.text[0], "# test_dynamo_lift.c:"), "reason with the line: %s", r.text[0]);
  g_declared = a; /* the first entry again: no compile */
  expect_forward(f, a, "module a again");
  cr_expect_eq(cc.frame_count, 2);
  g_declared = NULL;
  kn_scope_begin();
  kn_value arg = kn_vtensor(kn_ones(KN_SHAPE(6, 4), KN_FLOAT32)), out;
  cr_expect_neq(kn_call(f, &arg, 1, &out), KN_OK, "a NULL module cannot run");
  kn_scope_end();
  cr_expect(r.n >= 2 && strstr(r.text[1], "___check_obj_id(G['model']"), "%s", r.text[1]);
  kn_compiled_free(f);
  kn_module_free(a);
  kn_module_free(b);
}

Test(lift, a_captured_module_freed_and_replaced_recompiles) {
  g_model = mlp(1);
  reasons r = {0};
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_guard_fail, .guard_fail_ud = &r};
  kn_compiled *f = kn_compile_fn(forward_global, NULL, 1, "fwd", __FILE__, __LINE__, &o);
  expect_forward(f, g_model, "first module");
  expect_forward(f, g_model, "first module, cached");
  cr_expect_eq(cc.frame_count, 1);
  kn_module_free(g_model);
  g_model = mlp(2);
  expect_forward(f, g_model, "the module that replaced it");
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(r.n, 1);
  cr_expect(strstr(r.text[0], "G['__module_0'] was freed (kn_module_free): ___check_obj_id("
                              "G['__module_0'], ") == r.text[0], "reason: %s", r.text[0]);
  kn_compiled_free(f);
  kn_module_free(g_model);
  g_model = NULL;
}

Test(lift, a_lifted_parameter_whose_requires_grad_changes_recompiles) {
  kn_module *m = mlp(4);
  reasons r = {0};
  kn_compile_counter cc = {0, 0, "eager"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .guard_fail_fn = on_guard_fail, .guard_fail_ud = &r};
  kn_compiled *f = kn_compile_fn(loss_ud, m, 2, "loss", __FILE__, __LINE__, &o);
  kn_scope_begin();
  kn_tensor *x, *y;
  batch(0, &x, &y);
  kn_value args[2] = {kn_vtensor(x), kn_vtensor(y)}, out;
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  kn_value_release(out);
  kn_set_requires_grad(kn_module_get(m, "0.weight"), false); /* freeze the first layer */
  cr_assert_eq(kn_call(f, args, 2, &out), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(out.u.t, NULL), KN_OK, "%s", kn_last_error());
  cr_expect_null(kn_grad(kn_module_get(m, "0.weight")), "a frozen weight got a gradient");
  cr_expect_not_null(kn_grad(kn_module_get(m, "2.weight")));
  kn_value_release(out);
  kn_scope_end();
  cr_expect_eq(cc.frame_count, 2);
  cr_assert_eq(r.n, 1);
  cr_expect_str_eq(r.text[0], "tensor 'G['ud']._modules['0']._parameters['weight']' "
                              "requires_grad mismatch. expected requires_grad=1");
  kn_compiled_free(f);
  kn_module_free(m);
}

/* ---- tensors behind pointers ---------------------------------------------------------------- */
static kn_tensor *g_w;     /* requires grad, in no module */
static kn_tensor *g_scale; /* a plain constant */

static kn_value weighted(const kn_value *a, int n, void *ud) {
  (void)n, (void)ud;
  return kn_vtensor(kn_sum(kn_mul(kn_matmul(a[0].u.t, g_w), g_scale)));
}

Test(lift, a_tensor_requiring_grad_gets_gradients_and_a_constant_is_read_by_reference) {
  for (int b = 0; b < NBACKENDS; b++) {
    kn_scope_begin();
    kn_generator *g = kn_generator_new(5);
    g_w = kn_retain(kn_randn(KN_SHAPE(4, 2), g, KN_FLOAT32));
    kn_set_requires_grad(g_w, true);
    g_scale = kn_retain(kn_full(KN_SHAPE(2), kn_float(2), KN_FLOAT32));
    kn_tensor *x = kn_randn(KN_SHAPE(3, 4), g, KN_FLOAT32);
    kn_generator_free(g);
    kn_compile_counter cc;
    kn_compiled *f = compile_counted(weighted, NULL, 1, &cc, backends[b]);
    for (int step = 0; step < 3; step++) {
      kn_value arg = kn_vtensor(x), out;
      kn_tensor *ref = weighted(&arg, 1, NULL).u.t;
      cr_assert_eq(kn_backward(ref, NULL), KN_OK, "%s", kn_last_error());
      kn_tensor *gref = kn_clone(kn_grad(g_w));
      kn_set_grad(g_w, NULL);
      cr_assert_eq(kn_call(f, &arg, 1, &out), KN_OK, "%s: %s", backends[b], kn_last_error());
      char why[256];
      cr_expect(kn_tensors_close(out.u.t, ref, 1e-5, 1e-6, false, why, sizeof why),
                "%s step %d: %s", backends[b], step, why);
      cr_assert_eq(kn_backward(out.u.t, NULL), KN_OK, "%s", kn_last_error());
      cr_assert_not_null(kn_grad(g_w), "%s: G['__tensor_0'] has no gradient", backends[b]);
      cr_expect(kn_tensors_close(kn_grad(g_w), gref, 1e-5, 1e-6, false, why, sizeof why),
                "%s step %d: gradient %s", backends[b], step, why);
      kn_set_grad(g_w, NULL);
      kn_value_release(out);
      /* in-place updates of both are read by the next call */
      bool prev = kn_no_grad_begin();
      kn_add_scalar_(g_w, kn_float(0.25));
      kn_no_grad_end(prev);
      kn_fill_(g_scale, kn_float(3 + step));
    }
    cr_expect_eq(cc.frame_count, 1, "%s: %d graphs", backends[b], cc.frame_count);
    kn_compiled_free(f);
    kn_release(g_w);
    kn_release(g_scale);
    kn_scope_end();
  }
}

static kn_value scaled(const kn_value *a, int n, void *ud) {
  (void)n, (void)ud;
  return kn_vtensor(kn_mul(a[0].u.t, g_scale));
}

Test(lift, a_declared_tensor_global_is_read_through_its_pointer) {
  kn_scope_begin();
  kn_tensor *two = kn_full(KN_SHAPE(2), kn_float(2), KN_FLOAT32);
  kn_tensor *five = kn_full(KN_SHAPE(2), kn_float(5), KN_FLOAT32);
  g_scale = two;
  kn_compile_counter cc = {0, 0, "inductor"};
  kn_compile_options o = {.backend_fn = kn_compile_counter_backend, .backend_ud = &cc,
                          .globals = (const kn_compile_global[]){{"scale", NULL, &g_scale}},
                          .nglobals = 1};
  kn_compiled *f = kn_compile_fn(scaled, NULL, 1, "scaled", __FILE__, __LINE__, &o);
  kn_value arg = kn_vtensor(kn_ones(KN_SHAPE(2), KN_FLOAT32)), out;
  cr_assert_eq(kn_call(f, &arg, 1, &out), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){1}), 2.0);
  kn_value_release(out);
  g_scale = five; /* another tensor of the same kind: the same entry reads it */
  cr_assert_eq(kn_call(f, &arg, 1, &out), KN_OK, "%s", kn_last_error());
  cr_expect_eq(kn_get(out.u.t, (int64_t[]){1}), 5.0);
  kn_value_release(out);
  cr_expect_eq(cc.frame_count, 1);
  kn_compiled_free(f);
  g_scale = NULL;
  kn_scope_end();
}

/* ---- graph breaks --------------------------------------------------------------------------- */
/* The head's sign depends on the data: a break, and one branch per answer.
** The encoder's parameters are lifted before the break, the head's after. */
static kn_value branchy(const kn_value *a, int n, void *ud) {
  (void)n;
  kn_tensor *h = kn_relu(kn_nn_forward(kn_module_child(ud, "encoder.0"), a[0].u.t));
  kn_tensor *out = kn_nn_forward(kn_module_child(ud, "head"), h);
  if (!kn_is_true(kn_gt(kn_sum(a[0].u.t), kn_scalar_tensor(kn_float(0), KN_FLOAT32))))
    out = kn_neg(out);
  return kn_vtensor(mse(out, a[1].u.t));
}

/* A whole step but the optimizer: backward inside (a break running the
** backward on the real values), the loss returned. */
static kn_value step_inside(const kn_value *a, int n, void *ud) {
  kn_value l = loss_ud(a, n, ud);
  if (l.u.t && kn_backward(l.u.t, NULL) != KN_OK) return kn_vnone();
  return l;
}

Test(lift, lifted_inputs_across_breaks_and_branches_train_on_every_backend) {
  for (int b = 0; b < NBACKENDS; b++) {
    kn_module *ref = encoder_head(21), *root = encoder_head(21);
    kn_compile_counter cc;
    trainer t = {root, compile_counted(branchy, root, 2, &cc, backends[b]), NULL};
    /* batches 0..3 have both signs of sum(x): both branches are traced */
    train_twins(branchy, ref, &t, backends[b]);
    cr_expect_geq(cc.frame_count, 3, "%s: %d graphs", backends[b], cc.frame_count);
    kn_compiled_free(t.f);
    kn_module_free(root);
    kn_module_free(ref);
  }
}

Test(lift, backward_inside_the_compiled_function_reaches_lifted_parameters) {
  for (int b = 0; b < NBACKENDS; b++) {
    kn_module *ref = mlp(22), *model = mlp(22);
    kn_optimizer *oe = sgd_of(ref), *oc = sgd_of(model);
    kn_compile_counter cc;
    kn_compiled *f = compile_counted(step_inside, model, 2, &cc, backends[b]);
    for (int i = 0; i < STEPS; i++) {
      kn_scope_begin();
      kn_tensor *x, *y;
      batch(i, &x, &y);
      kn_value args[2] = {kn_vtensor(x), kn_vtensor(y)}, lc;
      kn_tensor *le = step_inside(args, 2, ref).u.t;
      cr_assert_eq(kn_call(f, args, 2, &lc), KN_OK, "%s: %s", backends[b], kn_last_error());
      double de = kn_get(le, NULL), dc = kn_get(lc.u.t, NULL);
      cr_expect(fabs(dc - de) <= 1e-5 * fabs(de) + 1e-7, "%s step %d: %.9g vs %.9g", backends[b],
                i, dc, de);
      gradcheck gc = {backends[b], 0};
      cr_assert_eq(kn_nn_named_tensors(model, true, has_grad, &gc), KN_OK);
      cr_assert_eq(kn_optim_step(oe), KN_OK, "%s", kn_last_error());
      cr_assert_eq(kn_optim_step(oc), KN_OK, "%s", kn_last_error());
      kn_optim_zero_grad(oe);
      kn_optim_zero_grad(oc);
      kn_value_release(lc);
      kn_scope_end();
    }
    /* the loss's graph; the segment after the backward has no ops */
    cr_expect_eq(cc.frame_count, 1, "%s: %d graphs", backends[b], cc.frame_count);
    kn_compiled_free(f);
    kn_optim_free(oe);
    kn_optim_free(oc);
    kn_module_free(model);
    kn_module_free(ref);
  }
}

/* An optimizer step inside reads every parameter's .grad: a new tensor
** after every backward, so no constant can stand for it. */
static kn_value step_with_optimizer(const kn_value *a, int n, void *ud) {
  kn_optimizer *opt = ud;
  (void)a, (void)n;
  kn_optim_step(opt);
  return kn_vnone();
}

Test(lift, a_gradient_read_inside_is_an_error_naming_it_and_the_line) {
  kn_module *m = mlp(23);
  kn_optimizer *opt = sgd_of(m);
  kn_scope_begin();
  kn_tensor *x, *y;
  batch(0, &x, &y);
  kn_value args[2] = {kn_vtensor(x), kn_vtensor(y)};
  kn_tensor *l = loss_ud(args, 2, m).u.t;
  cr_assert_eq(kn_backward(l, NULL), KN_OK);
  kn_compiled *f = kn_compile_fn(step_with_optimizer, opt, 0, "step", __FILE__, __LINE__,
                                 &(kn_compile_options){.backend = "eager"});
  kn_value out;
  cr_assert_neq(kn_call(f, NULL, 0, &out), KN_OK);
  const char *e = kn_last_error();
  cr_expect(strstr(e, "cannot lift a gradient (a tensor's gradient (.grad) reached at "), "%s", e);
  cr_expect(strstr(e, "test_dynamo_lift.c:") && strstr(e, "in step_with_optimizer"), "%s", e);
  cr_expect(strstr(e, "pass the gradients as arguments"), "%s", e);
  kn_scope_end();
  kn_compiled_free(f);
  kn_optim_free(opt);
  kn_module_free(m);
}

/* ---- errors ------------------------------------------------------------------------------------ */
Test(lift, export_names_the_tensor_it_cannot_lift_and_the_line) {
  g_model = mlp(1);
  kn_compiled *f = kn_compile_fn(forward_global, NULL, 1, "fwd", __FILE__, __LINE__, NULL);
  kn_scope_begin();
  kn_value arg = kn_vtensor(kn_ones(KN_SHAPE(2, 4), KN_FLOAT32));
  cr_assert_null(kn_export(f, &arg, 1));
  const char *e = kn_last_error();
  cr_expect(strstr(e, "cannot lift G['__module_0']._modules['0']._parameters['") &&
                strstr(e, "'] (a module's parameter or buffer reached at "),
            "%s", e);
  cr_expect(strstr(e, "test_dynamo_lift.c:") && strstr(e, "in forward_global"), "%s", e);
  cr_expect(strstr(e, "pass the module (or the tensor) as an argument"), "%s", e);
  kn_scope_end();
  kn_compiled_free(f);
  kn_module_free(g_model);
  g_model = NULL;
}

Test(lift, bad_globals_are_refused) {
  kn_module *m = NULL;
  kn_tensor *t = NULL;
  struct {
    kn_compile_global g[2];
    int n;
    const char *msg;
  } cases[] = {
      {{{"model", &m, &t}}, 1, "globals[0] ('model'): expected exactly one of module and tensor"},
      {{{"model", NULL, NULL}}, 1, "found neither"},
      {{{"my model", &m, NULL}}, 1, "globals[0]: expected a name of letters, digits and '_', "
                                    "found 'my model'"},
      {{{NULL, &m, NULL}}, 1, "found NULL"},
      {{{"m", &m, NULL}, {"m", NULL, &t}}, 2, "globals[1]: duplicate name 'm'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kn_compile_options o = {.globals = cases[i].g, .nglobals = cases[i].n};
    cr_expect_null(kn_compile_fn(loss_ud, NULL, 2, "f", __FILE__, __LINE__, &o));
    cr_expect(strstr(kn_last_error(), cases[i].msg), "case %zu: %s", i, kn_last_error());
  }
  kn_compile_options o = {.nglobals = 1};
  cr_expect_null(kn_compile_fn(loss_ud, NULL, 2, "f", __FILE__, __LINE__, &o));
  cr_expect(strstr(kn_last_error(), "found nglobals = 1 and globals NULL"), "%s", kn_last_error());
}

Test(lift, module_child_finds_children_by_name_and_dotted_path) {
  kn_module *root = encoder_head(1);
  kn_module *enc = kn_module_child(root, "encoder");
  cr_assert_not_null(enc, "%s", kn_last_error());
  cr_expect_str_eq(kn_nn_type(enc), "Sequential");
  kn_module *lin = kn_module_child(root, "encoder.0");
  cr_assert_not_null(lin, "%s", kn_last_error());
  cr_expect_str_eq(kn_nn_type(lin), "Linear");
  cr_expect_eq(kn_module_child(enc, "0"), lin);
  cr_expect_eq(kn_module_get(lin, "weight"), kn_module_get(root, "encoder.0.weight"));
  struct {
    const char *path, *msg;
  } bad[] = {
      {"decoder", "kn_module_child: 'decoder': no child 'decoder' in the module (its children: "
                  "'encoder', 'head')"},
      {"encoder.2", "kn_module_child: 'encoder.2': no child '2' in 'encoder' (its children: "
                    "'0', '1')"},
      {"encoder.0.weight", "kn_module_child: 'encoder.0.weight': 'weight' is a parameter of "
                           "'encoder.0', not a child module"},
      {"encoder.1.x", "no child 'x' in 'encoder.1' (it has no children)"},
      {"encoder.", "kn_module_child: 'encoder.': no child '' in 'encoder'"},
      {"", "expected a module and a child's name or dotted path"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_expect_null(kn_module_child(root, bad[i].path), "%s", bad[i].path);
    cr_expect(strstr(kn_last_error(), bad[i].msg), "%s: %s", bad[i].path, kn_last_error());
  }
  cr_expect_null(kn_module_child(NULL, "encoder"));
  cr_expect(strstr(kn_last_error(), "found NULL and 'encoder'"), "%s", kn_last_error());
  kn_module_free(root);
}
