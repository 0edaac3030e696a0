/*
** test_grad_scaler.c: kn_grad_scaler against torch's GradScaler algorithm
** (the scale trajectory and skipped steps worked out by hand from
** _amp_update_scale_ and the defaults 65536 / 2.0 / 0.5 / 2000), float16
** training with autocast (unscaled float16 gradients underflow, scaled
** ones match float32), and optimizers' float32 master weights.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kiln/kiln.h"
#include "support/fixture.h"

static int64_t live0;
static void setup(void) {
  live0 = kn_live_tensors();
  kn_scope_begin();
}
static void teardown(void) {
  kn_scope_end();
  cr_assert_eq(kn_live_tensors(), live0);
}
TestSuite(grad_scaler, .init = setup, .fini = teardown);

static double at(kn_tensor *t, int i) {
  kn_tensor *c = kn_to(t, KN_FLOAT64);
  return ((const double *)kn_data(c))[i];
}

/* Give w the gradient scale * (1, 2, 3), or with element 1 = bad. */
static void set_grad(kn_tensor *w, double scale, double bad) {
  kn_tensor *g = kn_empty(1, (int64_t[]){3}, KN_FLOAT32);
  float *p = kn_data(g);
  for (int i = 0; i < 3; i++) p[i] = (float)(scale * (i + 1));
  if (bad != 0) p[1] = (float)bad;
  kn_set_grad(w, g);
}

Test(grad_scaler, scale_trajectory_and_skipped_steps) {
  kn_tensor *w = kn_zeros(1, (int64_t[]){3}, KN_FLOAT32);
  kn_set_requires_grad(w, true);
  kn_optimizer *opt = kn_sgd(&w, 1, &(kn_optim_options){.lr = 0.5});
  kn_grad_scaler *sc = kn_grad_scaler_new(&(kn_grad_scaler_options){
      .init_scale = 8, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 2});
  cr_assert_not_null(sc, "%s", kn_last_error());
  /* step: bad gradient?  expected: stepped, scale after update */
  const struct { double bad; bool stepped; double scale; } plan[] = {
      {0, true, 8}, {0, true, 16}, {INFINITY, false, 8}, {0, true, 8}, {NAN, false, 4},
      {0, true, 4}, {0, true, 8}};
  int steps = 0;
  for (size_t k = 0; k < sizeof plan / sizeof plan[0]; k++) {
    set_grad(w, kn_grad_scaler_get_scale(sc), plan[k].bad);
    bool stepped;
    cr_assert_eq(kn_grad_scaler_step(sc, opt, &stepped), KN_OK, "%s", kn_last_error());
    cr_assert_eq(stepped, plan[k].stepped, "step %zu", k);
    cr_assert_eq(kn_grad_scaler_update(sc), KN_OK);
    cr_assert_eq(kn_grad_scaler_get_scale(sc), plan[k].scale, "step %zu", k);
    steps += stepped;
    /* each taken step subtracts lr * (1, 2, 3): the unscaled gradient */
    for (int i = 0; i < 3; i++) cr_assert_eq(at(w, i), -0.5 * (i + 1) * steps, "step %zu", k);
  }
  cr_assert_eq(kn_optim_steps(opt), 5);
  kn_grad_scaler_free(sc);
  kn_optim_free(opt);
}

Test(grad_scaler, defaults_grow_after_2000_clean_updates) {
  kn_tensor *w = kn_zeros(1, (int64_t[]){3}, KN_FLOAT32);
  kn_set_requires_grad(w, true);
  kn_optimizer *opt = kn_sgd(&w, 1, &(kn_optim_options){.lr = 1e-3});
  kn_grad_scaler *sc = kn_grad_scaler_new(NULL);
  cr_assert_eq(kn_grad_scaler_get_scale(sc), 65536.0);
  set_grad(w, 1, 0);
  for (int k = 1; k <= 2000; k++) {
    cr_assert_eq(kn_grad_scaler_step(sc, opt, NULL), KN_OK);
    cr_assert_eq(kn_grad_scaler_update(sc), KN_OK);
    cr_assert_eq(kn_grad_scaler_get_scale(sc), k < 2000 ? 65536.0 : 131072.0, "update %d", k);
  }
  /* one overflow: backoff 0.5 */
  set_grad(w, 1, INFINITY);
  cr_assert_eq(kn_grad_scaler_step(sc, opt, NULL), KN_OK);
  cr_assert_eq(kn_grad_scaler_update(sc), KN_OK);
  cr_assert_eq(kn_grad_scaler_get_scale(sc), 65536.0);
  kn_grad_scaler_free(sc);
  kn_optim_free(opt);
}

Test(grad_scaler, misuse_is_an_error) {
  kn_tensor *w = kn_zeros(1, (int64_t[]){3}, KN_FLOAT32);
  kn_set_requires_grad(w, true);
  kn_optimizer *opt = kn_sgd(&w, 1, &(kn_optim_options){.lr = 0.1});
  kn_grad_scaler *sc = kn_grad_scaler_new(NULL);
  cr_assert_eq(kn_grad_scaler_update(sc), KN_ESTATE);
  cr_assert_str_eq(kn_last_error(), "No inf checks were recorded prior to update().");
  set_grad(w, 1, 0);
  cr_assert_eq(kn_grad_scaler_unscale(sc, opt), KN_OK);
  cr_assert_eq(kn_grad_scaler_unscale(sc, opt), KN_ESTATE);
  cr_assert_str_eq(kn_last_error(),
                   "unscale_() has already been called on this optimizer since the last update().");
  cr_assert_eq(kn_grad_scaler_step(sc, opt, NULL), KN_OK);
  cr_assert_eq(kn_grad_scaler_step(sc, opt, NULL), KN_ESTATE);
  cr_assert_str_eq(kn_last_error(), "step() has already been called since the last update().");
  cr_assert_eq(kn_grad_scaler_update(sc), KN_OK);
  cr_assert_null(kn_grad_scaler_new(&(kn_grad_scaler_options){.growth_factor = 0.9}));
  cr_assert(strstr(kn_last_error(), "The growth factor must be > 1.0."), "%s", kn_last_error());
  cr_assert_null(kn_grad_scaler_new(&(kn_grad_scaler_options){.backoff_factor = 1.5}));
  cr_assert_null(kn_grad_scaler_new(&(kn_grad_scaler_options){.growth_interval = -1}));
  kn_grad_scaler_free(sc);
  kn_optim_free(opt);
}

/* A float16 linear layer whose loss is tiny (1e-7 of an MSE): its float16
** weight gradient underflows to zero without scaling; with the scaler the
** unscaled gradient equals the float32 one to float16 precision. */
Test(grad_scaler, float16_gradients_underflow_without_scaling) {
  kn_tensor *x = kn_randn(2, (int64_t[]){16, 8}, NULL, KN_FLOAT32);
  kn_tensor *y = kn_randn(2, (int64_t[]){16, 4}, NULL, KN_FLOAT32);
  kn_tensor *w0 = kn_mul_scalar(kn_randn(2, (int64_t[]){4, 8}, NULL, KN_FLOAT32), kn_float(0.1));
  kn_tensor *grads[3];
  for (int pass = 0; pass < 3; pass++) { /* float32, float16 plain, float16 scaled */
    kn_tensor *w = kn_detach(w0);
    kn_set_requires_grad(w, true);
    kn_optimizer *opt = kn_sgd(&w, 1, &(kn_optim_options){.lr = 0.1});
    kn_grad_scaler *sc = kn_grad_scaler_new(NULL);
    if (pass) kn_autocast_begin(KN_FLOAT16);
    kn_tensor *h = kn_linear(x, w, NULL);
    kn_tensor *loss = kn_mul_scalar(kn_mse_loss(h, y, KN_REDUCTION_MEAN), kn_float(1e-7));
    if (pass) kn_autocast_end();
    cr_assert_eq(kn_backward(pass == 2 ? kn_grad_scaler_scale(sc, loss) : loss, NULL), KN_OK,
                 "%s", kn_last_error());
    if (pass == 2) cr_assert_eq(kn_grad_scaler_unscale(sc, opt), KN_OK);
    grads[pass] = kn_clone(kn_grad(w));
    kn_grad_scaler_free(sc);
    kn_optim_free(opt);
  }
  double amax32 = at(kn_amax(kn_abs(grads[0]), NULL, 0, false), 0);
  cr_assert_gt(amax32, 0);
  cr_assert_eq(at(kn_amax(kn_abs(grads[1]), NULL, 0, false), 0), 0.0); /* underflowed */
  char why[256];
  cr_assert(kn_tensors_close(grads[2], grads[0], 1.0 / 128, amax32 / 128, true, why, sizeof why),
            "%s", why);
}

/* bfloat16 parameters and updates below their resolution: without master
** weights every update rounds away; with them the float32 copy accumulates
** and the parameter follows a float32 run, rounded. */
Test(grad_scaler, master_weights_keep_small_updates) {
  kn_tensor *w32 = kn_ones(1, (int64_t[]){4}, KN_FLOAT32);
  kn_set_requires_grad(w32, true);
  kn_optimizer *ref = kn_sgd(&w32, 1, &(kn_optim_options){.lr = 1e-3, .momentum = 0.5});
  kn_tensor *wp[2];
  kn_optimizer *opts[2];
  for (int k = 0; k < 2; k++) {
    wp[k] = kn_ones(1, (int64_t[]){4}, KN_BFLOAT16);
    kn_set_requires_grad(wp[k], true);
    opts[k] = kn_sgd(&wp[k], 1, &(kn_optim_options){.lr = 1e-3, .momentum = 0.5,
                                                     .master_weights = k == 1});
  }
  for (int step = 0; step < 20; step++) {
    kn_set_grad(w32, kn_full(1, (int64_t[]){4}, kn_float(0.25), KN_FLOAT32));
    kn_optim_step(ref);
    for (int k = 0; k < 2; k++) {
      kn_set_grad(wp[k], kn_full(1, (int64_t[]){4}, kn_float(0.25), KN_BFLOAT16));
      cr_assert_eq(kn_optim_step(opts[k]), KN_OK, "%s", kn_last_error());
    }
  }
  cr_assert_eq(at(wp[0], 0), 1.0); /* each update (< 2^-9) rounded away */
  kn_tensor *want = kn_to(kn_to(w32, KN_BFLOAT16), KN_FLOAT64);
  cr_assert_lt(at(w32, 0), 0.995);
  cr_assert_eq(at(wp[1], 0), at(want, 0));
  kn_tensor *master = kn_module_get(kn_optim_state(opts[1]), "0.master");
  cr_assert_not_null(master, "%s", kn_last_error());
  cr_assert_eq(kn_tensor_dtype(master), KN_FLOAT32);
  cr_assert_eq(at(master, 0), at(w32, 0));
  kn_tensor *mom = kn_module_get(kn_optim_state(opts[1]), "0.momentum_buffer");
  cr_assert_eq(kn_tensor_dtype(mom), KN_FLOAT32);
  for (int k = 0; k < 2; k++) kn_optim_free(opts[k]);
  kn_optim_free(ref);
}
