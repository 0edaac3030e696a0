/*
** examples/mlp_train.c: the eager demo. Trains a small MLP (2 -> 32 -> 32 -> 1,
** tanh) to fit f(a, b) = sin(2a) * cos(b) on 256 points drawn from a seeded
** generator, with plain SGD written with kiln ops: forward (linear, tanh),
** mse_loss, kn_backward, then p -= lr * p.grad under no_grad. Prints the loss every 100
** steps; it falls by about two orders of magnitude.
** Uses only the public API (#include <kiln/kiln.h>).
*/
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>

#define NPOINTS 256
#define HIDDEN 32
#define STEPS 1000
#define LR 0.1

typedef struct mlp {
  kn_tensor *w[3], *b[3]; /* owned; leaves that require grad */
} mlp;

/* Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) weights, as torch.nn.Linear. */
static kn_tensor *param(int64_t rows, int64_t cols, int64_t fan_in, kn_generator *gen) {
  kn_scope_begin();
  double bound = 1.0 / sqrt((double)fan_in);
  int64_t sizes[2] = {rows, cols};
  int nd = cols > 0 ? 2 : 1;
  kn_tensor *u = kn_rand(nd, sizes, gen, KN_FLOAT32);                 /* [0, 1) */
  kn_tensor *p = kn_add_scalar(kn_mul_scalar(u, kn_float(2 * bound)), kn_float(-bound));
  p = kn_scope_end_keep(p);
  if (p && kn_set_requires_grad(p, true) != KN_OK) {
    kn_release(p);
    return NULL;
  }
  return p;
}

static kn_tensor *forward(const mlp *m, kn_tensor *x) {
  kn_tensor *h = kn_tanh(kn_linear(x, m->w[0], m->b[0]));
  h = kn_tanh(kn_linear(h, m->w[1], m->b[1]));
  return kn_linear(h, m->w[2], m->b[2]);
}

/* p -= lr * p.grad; clear the grad. No graph is recorded for the update. */
static kn_status sgd_step(mlp *m, double lr) {
  bool prev = kn_no_grad_begin();
  kn_status st = KN_OK;
  for (int i = 0; i < 3 && st == KN_OK; i++) {
    kn_tensor *ps[2] = {m->w[i], m->b[i]};
    for (int j = 0; j < 2 && st == KN_OK; j++) {
      st = kn_sub_scaled_(ps[j], kn_grad(ps[j]), kn_float(lr));
      kn_set_grad(ps[j], NULL);
    }
  }
  kn_no_grad_end(prev);
  return st;
}

/* Inputs in [-1.5, 1.5)^2 and targets sin(2a) * cos(b). */
static kn_status make_data(kn_generator *gen, kn_tensor **x, kn_tensor **y) {
  kn_scope_begin();
  kn_tensor *u = kn_rand(KN_SHAPE(NPOINTS, 2), gen, KN_FLOAT32);
  kn_tensor *xs = kn_add_scalar(kn_mul_scalar(u, kn_float(3.0)), kn_float(-1.5));
  kn_tensor *a = kn_narrow(xs, 1, 0, 1), *b = kn_narrow(xs, 1, 1, 1); /* [N, 1] each */
  kn_tensor *ys = kn_mul(kn_sin(kn_mul_scalar(a, kn_float(2))), kn_cos(b));
  *x = kn_retain(xs);
  *y = kn_retain(ys);
  kn_scope_end();
  return *x && *y ? KN_OK : kn_last_status();
}

int main(void) {
  kn_generator *gen = kn_generator_new(1234);
  mlp m = {{NULL}, {NULL}};
  kn_tensor *x = NULL, *y = NULL;
  int rc = 1;
  if (!gen || make_data(gen, &x, &y) != KN_OK) goto done;
  m.w[0] = param(HIDDEN, 2, 2, gen), m.b[0] = param(HIDDEN, 0, 2, gen);
  m.w[1] = param(HIDDEN, HIDDEN, HIDDEN, gen), m.b[1] = param(HIDDEN, 0, HIDDEN, gen);
  m.w[2] = param(1, HIDDEN, HIDDEN, gen), m.b[2] = param(1, 0, HIDDEN, gen);
  for (int i = 0; i < 3; i++)
    if (!m.w[i] || !m.b[i]) goto done;

  printf("kiln %s eager demo: MLP 2-%d-%d-1 (tanh), %d points, SGD lr=%.2f\n", kn_version(),
         HIDDEN, HIDDEN, NPOINTS, LR);
  double first = 0, last = 0;
  for (int step = 0; step <= STEPS; step++) {
    kn_scope_begin();
    kn_tensor *loss = kn_mse_loss(forward(&m, x), y, KN_REDUCTION_MEAN);
    double l = NAN;
    kn_status st = loss ? kn_item_double(loss, &l) : kn_last_status();
    if (st == KN_OK) st = kn_backward(loss, NULL);
    if (st == KN_OK) st = sgd_step(&m, LR);
    kn_scope_end();
    if (st != KN_OK) goto done;
    if (step == 0) first = l;
    last = l;
    if (step % 100 == 0) printf("step %4d  loss %.6f\n", step, l);
  }
  printf("loss fell from %.6f to %.6f (%.1fx)\n", first, last, first / last);
  rc = last < first ? 0 : 1;
done:
  if (rc && kn_last_status() != KN_OK) fprintf(stderr, "error: %s\n", kn_last_error());
  for (int i = 0; i < 3; i++) kn_release(m.w[i]), kn_release(m.b[i]);
  kn_release(x);
  kn_release(y);
  kn_generator_free(gen);
  return rc;
}
