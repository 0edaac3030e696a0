/*
** tests/support/gradcheck.c: finite-difference gradient checks. One core
** compares full Jacobians of a multi-output function: the user's fn (first
** order) or the gradient function x -> d(fn(x) . v)/dx (second order).
** Every evaluation runs inside its own autorelease scope.
*/
#include "support/gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/tensor.h"

#define MAX_INPUTS 16
#define MAX_OUTS 16

/* A function of the inputs with several outputs (all new references in the
** current scope; NULL entries mean zero). Returns the count or -1. */
typedef struct mfn mfn;
struct mfn {
  int (*eval)(const mfn *self, kn_tensor *const *inputs, int n, bool create_graph,
              kn_tensor **outs);
  kn_gc_fn fn;
  void *ud;
  kn_tensor *v; /* second order: the fixed grad_output */
  bool second;
};

/* ---- element access --------------------------------------------------------------- */

static int64_t flat_offset(const kn_tensor *t, int64_t k) {
  int64_t off = 0;
  for (int d = kn_ndim(t) - 1; d >= 0; d--) {
    int64_t s = kn_sizes(t)[d];
    off += (k % s) * kn_strides(t)[d];
    k /= s;
  }
  return off;
}

static double *elem_ptr(kn_tensor *t, int64_t k) {
  return (double *)kn_data(t) + flat_offset(t, k);
}

static void read_flat(const kn_tensor *t, double *dst) {
  const unsigned char *p = kn_data(t);
  size_t es = kn_dtype_size(kn_tensor_dtype(t));
  for (int64_t k = 0, n = kn_numel(t); k < n; k++)
    dst[k] = kn__load_double(p + (size_t)flat_offset(t, k) * es, kn_tensor_dtype(t));
}

/* ---- the two functions ---------------------------------------------------------- */

static int eval_first(const mfn *self, kn_tensor *const *inputs, int n, bool create_graph,
                      kn_tensor **outs) {
  (void)create_graph;
  outs[0] = self->fn(inputs, n, self->ud);
  return outs[0] ? 1 : -1;
}

static int diff_inputs(kn_tensor *const *inputs, int n, kn_tensor **diff) {
  int m = 0;
  for (int i = 0; i < n; i++)
    if (inputs[i] && kn_requires_grad(inputs[i])) diff[m++] = inputs[i];
  return m;
}

static int eval_second(const mfn *self, kn_tensor *const *inputs, int n, bool create_graph,
                       kn_tensor **outs) {
  kn_tensor *y = self->fn(inputs, n, self->ud);
  if (!y) return -1;
  kn_tensor *diff[MAX_INPUTS];
  int m = diff_inputs(inputs, n, diff);
  if (kn_autograd_grad(&y, 1, diff, m, &self->v, create_graph, create_graph, true, outs) !=
      KN_OK)
    return -1;
  for (int i = 0; i < m; i++)
    if (!outs[i]) {
      outs[i] = kn_zeros(kn_ndim(diff[i]), kn_sizes(diff[i]), KN_FLOAT64);
      if (!outs[i]) return -1;
    }
  return m;
}

/* ---- the core ----------------------------------------------------------------------- */

typedef struct jac {
  int nout, m;
  int64_t onum[MAX_OUTS];
  int64_t inum[MAX_INPUTS];
  double *num[MAX_OUTS][MAX_INPUTS]; /* numerical d out[p][k] / d in[i][j] at k*inum + j */
  double *plus[MAX_OUTS];
} jac;

static void jac_free(jac *J) {
  for (int p = 0; p < J->nout; p++) {
    free(J->plus[p]);
    for (int i = 0; i < J->m; i++) free(J->num[p][i]);
  }
}

static bool fail(char *why, size_t whyn, const char *what) {
  snprintf(why, whyn, "%s: %s", what, kn_last_error());
  return false;
}

/* Evaluate without graph and store values (into J->plus, or subtract them
** to form the central difference for column j of input i). */
static bool numeric_eval(const mfn *f, kn_tensor *const *inputs, int n, jac *J, int i,
                         int64_t j, bool minus, double eps, char *why, size_t whyn) {
  kn_scope_begin();
  kn_tensor *outs[MAX_OUTS] = {0};
  bool prev = kn_set_grad_enabled(f->second); /* first order needs no graph */
  int no = f->eval(f, inputs, n, false, outs);
  kn_set_grad_enabled(prev);
  bool ok = no == J->nout;
  if (!ok) fail(why, whyn, "evaluating the function at a perturbed point failed");
  for (int p = 0; ok && p < no; p++) {
    double *buf = malloc((size_t)(J->onum[p] ? J->onum[p] : 1) * sizeof *buf);
    if (!buf) {
      ok = false;
      break;
    }
    read_flat(outs[p], buf);
    for (int64_t k = 0; k < J->onum[p]; k++) {
      if (!minus) J->plus[p][k] = buf[k];
      else J->num[p][i][k * J->inum[i] + j] = (J->plus[p][k] - buf[k]) / (2 * eps);
    }
    free(buf);
  }
  kn_scope_end();
  return ok;
}

static bool numeric(const mfn *f, kn_tensor *const *inputs, int n, kn_tensor *const *diff,
                    jac *J, double eps, char *why, size_t whyn) {
  for (int i = 0; i < J->m; i++)
    for (int64_t j = 0; j < J->inum[i]; j++) {
      double *x = elem_ptr(diff[i], j), x0 = *x;
      *x = x0 + eps;
      bool ok = numeric_eval(f, inputs, n, J, i, j, false, eps, why, whyn);
      *x = x0 - eps;
      ok = ok && numeric_eval(f, inputs, n, J, i, j, true, eps, why, whyn);
      *x = x0;
      if (!ok) return false;
    }
  return true;
}

static kn_tensor *one_hot(const kn_tensor *like, int64_t k) {
  kn_tensor *g = kn_zeros(kn_ndim(like), kn_sizes(like), kn_tensor_dtype(like));
  if (g) kn__store_double((unsigned char *)kn_data(g) + (size_t)k * kn_dtype_size(g->dtype),
                          g->dtype, 1.0);
  return g;
}

static bool same_sizes(const kn_tensor *a, const kn_tensor *b) {
  if (kn_ndim(a) != kn_ndim(b)) return false;
  for (int d = 0; d < kn_ndim(a); d++)
    if (kn_sizes(a)[d] != kn_sizes(b)[d]) return false;
  return true;
}

/* Compare one analytical row (output p, element k) with the numbers. */
static bool compare_row(const jac *J, int p, int64_t k, kn_tensor *const *grads,
                        kn_tensor *const *diff, const kn_gradcheck_opts *o, bool second,
                        char *why, size_t whyn) {
  for (int i = 0; i < J->m; i++) {
    if (grads[i] && !same_sizes(grads[i], diff[i])) {
      char a[128], b[128];
      kn__format_sizes(kn_ndim(grads[i]), kn_sizes(grads[i]), a, sizeof a);
      kn__format_sizes(kn_ndim(diff[i]), kn_sizes(diff[i]), b, sizeof b);
      snprintf(why, whyn, "the gradient of input %d has sizes %s but the input has %s", i, a, b);
      return false;
    }
    double *row = calloc((size_t)(J->inum[i] ? J->inum[i] : 1), sizeof *row);
    if (!row) return fail(why, whyn, "out of memory");
    if (grads[i]) read_flat(grads[i], row);
    for (int64_t j = 0; j < J->inum[i]; j++) {
      double nv = J->num[p][i][k * J->inum[i] + j], av = row[j];
      if (!(fabs(av - nv) <= o->atol + o->rtol * fabs(nv))) {
        snprintf(why, whyn,
                 "%sJacobian mismatch for differentiated input %d, output %d element %lld, "
                 "input element %lld: numerical (expected) %.10g, analytical (got) %.10g%s",
                 second ? "second order: " : "", i, p, (long long)k, (long long)j, nv, av,
                 grads[i] ? "" : " (no gradient was computed)");
        free(row);
        return false;
      }
    }
    free(row);
  }
  return true;
}

static bool analytic(const jac *J, kn_tensor *const *outs, kn_tensor *const *diff,
                     const kn_gradcheck_opts *o, bool second, char *why, size_t whyn) {
  for (int p = 0; p < J->nout; p++)
    for (int64_t k = 0; k < J->onum[p]; k++) {
      kn_scope_begin();
      kn_tensor *grads[MAX_INPUTS] = {0};
      bool ok = true;
      if (kn_requires_grad(outs[p])) {
        kn_tensor *go = one_hot(outs[p], k);
        ok = go && kn_autograd_grad(&outs[p], 1, diff, J->m, &go, true, false, true,
                                    grads) == KN_OK;
        if (!ok) fail(why, whyn, "computing the analytical gradient failed");
      }
      ok = ok && compare_row(J, p, k, grads, diff, o, second, why, whyn);
      kn_scope_end();
      if (!ok) return false;
    }
  return true;
}

static bool check_inputs(kn_tensor *const *inputs, int n, kn_tensor **diff, int *m,
                         char *why, size_t whyn) {
  if (n > MAX_INPUTS) {
    snprintf(why, whyn, "at most %d inputs are supported, got %d", MAX_INPUTS, n);
    return false;
  }
  *m = diff_inputs(inputs, n, diff);
  for (int i = 0; i < *m; i++)
    if (kn_tensor_dtype(diff[i]) != KN_FLOAT64 || kn_tensor_device(diff[i]) != KN_CPU) {
      snprintf(why, whyn, "differentiated input %d must be a float64 CPU tensor, got %s", i,
               kn_dtype_name(kn_tensor_dtype(diff[i])));
      return false;
    }
  if (*m == 0) {
    snprintf(why, whyn, "no input requires grad");
    return false;
  }
  return true;
}

static bool run_check(const mfn *f, kn_tensor *const *inputs, int n,
                      const kn_gradcheck_opts *o, char *why, size_t whyn) {
  kn_tensor *diff[MAX_INPUTS];
  jac J;
  memset(&J, 0, sizeof J);
  if (!check_inputs(inputs, n, diff, &J.m, why, whyn)) return false;
  bool prev = kn_set_grad_enabled(true);
  kn_scope_begin();
  kn_tensor *outs[MAX_OUTS] = {0};
  int no = f->eval(f, inputs, n, true, outs);
  bool ok = no >= 0 || fail(why, whyn, "evaluating the function failed");
  J.nout = no > 0 ? no : 0;
  for (int i = 0; i < J.m; i++) J.inum[i] = kn_numel(diff[i]);
  for (int p = 0; ok && p < J.nout; p++) {
    J.onum[p] = kn_numel(outs[p]);
    ok = kn_tensor_device(outs[p]) == KN_CPU;
    if (!ok) snprintf(why, whyn, "output %d is not a CPU tensor", p);
    J.plus[p] = malloc((size_t)(J.onum[p] ? J.onum[p] : 1) * sizeof(double));
    for (int i = 0; i < J.m; i++)
      J.num[p][i] = calloc((size_t)(J.onum[p] * J.inum[i] + 1), sizeof(double));
  }
  ok = ok && numeric(f, inputs, n, diff, &J, o->eps, why, whyn);
  ok = ok && analytic(&J, outs, diff, o, f->second, why, whyn);
  kn_scope_end();
  kn_set_grad_enabled(prev);
  jac_free(&J);
  return ok;
}

bool kn_gradcheck_ex(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud,
                     const kn_gradcheck_opts *opts, char *why, size_t whyn) {
  mfn f = {eval_first, fn, ud, NULL, false};
  return run_check(&f, inputs, n, opts, why, whyn);
}

bool kn_gradcheck(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud, char *why,
                  size_t whyn) {
  kn_gradcheck_opts o = KN_GRADCHECK_DEFAULTS;
  return kn_gradcheck_ex(fn, inputs, n, ud, &o, why, whyn);
}

/* A fixed pseudo-random v in [0.5, 1.5) with alternating signs. */
static kn_tensor *make_v(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud) {
  kn_scope_begin();
  bool prev = kn_no_grad_begin();
  kn_tensor *y = fn(inputs, n, ud);
  kn_no_grad_end(prev);
  kn_tensor *v = y ? kn__empty(kn_ndim(y), kn_sizes(y), kn_tensor_dtype(y), KN_CPU) : NULL;
  kn_scope_end();
  if (!v) return NULL;
  uint64_t s = 0x9E3779B97F4A7C15u;
  size_t es = kn_dtype_size(kn_tensor_dtype(v));
  for (int64_t k = 0, m = kn_numel(v); k < m; k++) {
    s = s * 6364136223846793005u + 1442695040888963407u;
    double u = 0.5 + (double)(s >> 11) / 9007199254740992.0;
    kn__store_double((unsigned char *)kn_data(v) + (size_t)k * es, kn_tensor_dtype(v),
                     (k % 2) ? -u : u);
  }
  return v;
}

bool kn_gradgradcheck_ex(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud,
                         const kn_gradcheck_opts *opts, char *why, size_t whyn) {
  kn_tensor *v = make_v(fn, inputs, n, ud);
  if (!v) return fail(why, whyn, "evaluating the function failed");
  mfn f = {eval_second, fn, ud, v, true};
  bool ok = run_check(&f, inputs, n, opts, why, whyn);
  kn_release(v);
  return ok;
}

bool kn_gradgradcheck(kn_gc_fn fn, kn_tensor *const *inputs, int n, void *ud, char *why,
                      size_t whyn) {
  kn_gradcheck_opts o = KN_GRADCHECK_DEFAULTS;
  return kn_gradgradcheck_ex(fn, inputs, n, ud, &o, why, whyn);
}
