/*
** ops/reduce_fold.c: any/all, logsumexp and linalg_vector_norm: meta
** functions, and one kernel for every row of the reduction table that folds
** prepared elements into one accumulator (FOLD rows without an order) or
** makes a first pass for a center before it (CENTERED rows).
**
** The kernel runs each row's own prep, combine and finalize
** (ops/reduce_table.h), the functions the code generator emits for the same
** rows. Floating inputs accumulate in double, integer and bool inputs (any,
** all) in int64 through the row's integer combine. any/all give bool (uint8
** inputs give uint8, as torch); logsumexp promotes integer inputs to the
** default float dtype; linalg_vector_norm takes floating inputs and an
** optional floating dtype to compute in (no narrowing), and picks its row by
** the order (kn__red_norm_row). Large reductions run with OpenMP.
*/
#include <math.h>
#include <stdio.h>

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/reduce_table.h"
#include "ops/threads.h"

/* ---- arguments ------------------------------------------------------------------ */

/* A Scalar argument as a double (fallback when omitted). */
static double scalar_arg(const kn__call *c, int i, double fallback) {
  if (i >= c->nargs) return fallback;
  const kn__arg *a = &c->args[i];
  if (a->kind == KN__A_DOUBLE) return a->u.d;
  if (a->kind == KN__A_INT) return (double)a->u.i;
  if (a->kind != KN__A_SCALAR) return fallback;
  switch (a->u.s.kind) {
  case KN_SCALAR_BOOL: return a->u.s.v.b;
  case KN_SCALAR_INT: return (double)a->u.s.v.i;
  default: return a->u.s.v.f;
  }
}

/* The dims argument of each op (any/all without dim: every dim). */
static const kn__arg *dims_of(const kn__call *c, int i) {
  static const kn__arg all = {.kind = KN__A_NONE};
  return i < c->nargs ? &c->args[i] : &all;
}

static bool keepdim_of(const kn__call *c, int i) {
  return i < c->nargs && c->args[i].kind == KN__A_BOOL && c->args[i].u.b;
}

/* Meta of a reduction over dims argument di with keepdim ki, output dt. */
static kn_status fold_meta(const kn__call *c, kn__metas *out, int di, int ki, kn_dtype dt,
                           bool *mask) {
  const kn_tensor *t = c->args[0].u.t;
  kn_status st = kn__reduce_mask(c->op->name, t, dims_of(c, di), mask);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  kn__reduce_shape(t, mask, keepdim_of(c, ki), m);
  return KN_OK;
}

/* ---- meta ------------------------------------------------------------------------ */

/* any/all(self) and any/all.dim(self, dim, keepdim) */
kn_status kn__meta_any(const kn__call *c, kn__metas *out) {
  bool mask[KN_MAX_DIMS];
  kn_dtype dt = c->args[0].u.t->dtype == KN_UINT8 ? KN_UINT8 : KN_BOOL;
  return fold_meta(c, out, 1, 2, dt, mask);
}

/* logsumexp(self, dim, keepdim) */
kn_status kn__meta_logsumexp(const kn__call *c, kn__metas *out) {
  bool mask[KN_MAX_DIMS];
  kn_dtype dt = c->args[0].u.t->dtype;
  return fold_meta(c, out, 1, 2, kn_dtype_is_floating(dt) ? dt : kn_default_dtype(), mask);
}

static kn_status norm_dtype(const kn__call *c, kn_dtype *dt) {
  kn_dtype in = c->args[0].u.t->dtype;
  if (!kn_dtype_is_floating(in))
    return kn__error(KN_EDTYPE,
                     "linalg.vector_norm: Expected a floating point or complex tensor as input. "
                     "Got %s", kn__torch_dtype_name(in));
  *dt = kn__arg_dtype(c, 4, in);
  if ((unsigned)*dt >= KN_DTYPE_COUNT)
    return kn__error(KN_EDTYPE, "linalg.vector_norm: invalid dtype %d", (int)*dt);
  if (!kn_dtype_is_floating(*dt))
    return kn__error(KN_EDTYPE,
                     "linalg.vector_norm: dtype should be floating point or complex, but got %s",
                     kn__torch_dtype_name(*dt));
  if (kn_promote_types(in, *dt) != *dt)
    return kn__error(KN_EDTYPE,
                     "linalg.vector_norm: the dtype of the input (%s) should be convertible "
                     "without narrowing to the specified dtype (%s)",
                     kn__torch_dtype_name(in), kn__torch_dtype_name(*dt));
  return KN_OK;
}

/* Orders without an identity (negative, inf) refuse an empty reduced dim,
** with torch's messages. */
static kn_status norm_identity(const kn_tensor *t, const bool *mask, double ord) {
  if (ord >= 0 && !isinf(ord)) return KN_OK;
  for (int d = 0; d < t->ndim; d++) {
    if (!mask[d] || t->sizes[d] != 0) continue;
    if (ord < 0)
      return kn__error(KN_EINVAL, "linalg.vector_norm cannot compute the %g norm on an empty "
                       "tensor because the operation does not have an identity", ord);
    return kn__error(KN_EINVAL, "linalg.vector_norm cannot compute the inf norm on the "
                     "dimension %dbecause this dimension is empty and the operation does not "
                     "have an identity", d);
  }
  return KN_OK;
}

/* linalg_vector_norm(self, ord, dim?, keepdim, *, dtype?) */
kn_status kn__meta_vector_norm(const kn__call *c, kn__metas *out) {
  kn_dtype dt = KN_FLOAT32;
  kn_status st = norm_dtype(c, &dt);
  bool mask[KN_MAX_DIMS];
  if (st == KN_OK) st = fold_meta(c, out, 2, 3, dt, mask);
  if (st == KN_OK) st = norm_identity(c->args[0].u.t, mask, scalar_arg(c, 1, 2));
  return st;
}

/* ---- rows ------------------------------------------------------------------------- */

typedef struct fold {
  kn_dtype dt;   /* input dtype */
  double c;      /* the row's constant (reduce_table.def) */
  double d;      /* floating accumulator */
  int64_t u;     /* integer accumulator */
  bool nan;      /* a NaN was prepared (rows whose NaN WINS) */
} fold;

/* Four accumulators over contiguous floats (the row's combine is
** associative), merged in a fixed order: the same bits on every run. Rows
** whose NaN wins combine by order and note NaN beside. */
#define FOLD_STEP(K, a, v)                     \
  {                                            \
    const double v_ = kn__red_prep_##K(v, f->c); \
    a = kn__red_comb_##K(a, v_);               \
    if (wins) nan |= v_ != v_;                 \
  }
#define FOLD_CONTIG(K, T)                                                               \
  {                                                                                     \
    const T *x = (const T *)p;                                                          \
    double a1 = kn__red_rows[KN__RED_##K].init, a2 = a1, a3 = a1;                       \
    int64_t i = 0;                                                                      \
    for (; i + 4 <= n; i += 4) {                                                        \
      FOLD_STEP(K, a, x[i])                                                             \
      FOLD_STEP(K, a1, x[i + 1])                                                        \
      FOLD_STEP(K, a2, x[i + 2])                                                        \
      FOLD_STEP(K, a3, x[i + 3])                                                        \
    }                                                                                   \
    for (; i < n; i++) FOLD_STEP(K, a, x[i])                                            \
    a = kn__red_comb_##K(kn__red_comb_##K(a, a1), kn__red_comb_##K(a2, a3));            \
  }

#define KN_RED(K, name, init, iinit, better, ibetter, prep, comb, icomb, fin, A, S, NAN_, col, \
               PRE)                                                                         \
  static void row_##K(void *state, const char *p, int64_t n, int64_t s, int64_t start) {     \
    (void)start;                                                                            \
    fold *f = state;                                                                        \
    if (!kn_dtype_is_floating(f->dt)) {                                                     \
      for (int64_t i = 0; i < n; i++)                                                       \
        f->u = kn__red_icomb_##K(f->u, kn__load_int(p + i * s, f->dt));                     \
      return;                                                                               \
    }                                                                                       \
    const bool wins = KN__RNAN_##NAN_ == KN__RNAN_WINS;                                     \
    bool nan = false;                                                                       \
    double a = f->d;                                                                        \
    if (f->dt == KN_FLOAT32 && s == 4) FOLD_CONTIG(K, float)                                \
    else if (f->dt == KN_FLOAT64 && s == 8) FOLD_CONTIG(K, double)                          \
    else                                                                                    \
      for (int64_t i = 0; i < n; i++) FOLD_STEP(K, a, kn__load_double(p + i * s, f->dt))    \
    f->d = a;                                                                               \
    f->nan |= nan;                                                                          \
  }
#include "ops/reduce_table.def"
#undef KN_RED

static const kn__row_fn row_fns[KN__RED_COUNT] = {
#define KN_RED(K, ...) [KN__RED_##K] = row_##K,
#include "ops/reduce_table.def"
#undef KN_RED
};

/* ---- kernel -------------------------------------------------------------------------- */

/* One output: the PRE row's pass for the center (CENTERED rows), then the
** row's pass, finalized into dst. */
static void fold_out(const kn__redplan *p, const char *base, kn__red_kind k, kn_dtype dt,
                     double c, char *dst, kn_dtype odt) {
  const kn__red_row *r = &kn__red_rows[k];
  double n = (double)p->nred;
  if (r->pre != KN__RED_NONE) {
    const kn__red_row *q = &kn__red_rows[r->pre];
    fold f0 = {dt, 0, q->init, q->iinit, false};
    kn__redplan_rows(p, base, row_fns[r->pre], &f0);
    c = kn__red_finalize(r->pre, f0.nan ? NAN : f0.d, n, 0, 0);
  }
  fold f = {dt, c, r->init, r->iinit, false};
  kn__redplan_rows(p, base, row_fns[k], &f);
  if (f.nan) f.d = NAN;
  if (kn_dtype_is_floating(dt)) kn__store_double(dst, odt, kn__red_finalize(k, f.d, n, 0, c));
  else kn__store_int(dst, odt, f.u);
}

/* Row k over dims argument di of the call's input (converted first to a
** floating output's dtype), constant c. */
static kn_status fold_kernel(const kn__call *c, kn__outs *out, kn__red_kind k, int di, double cst) {
  kn_tensor *o = out->t[0];
  bool mask[KN_MAX_DIMS];
  kn_status st = kn__reduce_mask(c->op->name, c->args[0].u.t, dims_of(c, di), mask);
  if (st != KN_OK) return st;
  kn_dtype idt = kn_dtype_is_floating(o->dtype) ? o->dtype : c->args[0].u.t->dtype;
  kn_tensor *t = kn__reduce_input_as(c->args[0].u.t, idt);
  if (!t) return kn__oom();
  kn__redplan p;
  kn__redplan_init(&p, t, mask);
  char *dst = kn_data(o);
  size_t oes = kn_dtype_size(o->dtype);
  KN__PAR_FOR(kn__par_team(p.nout * p.nred, p.nout, KN__GRAIN),
  for (int64_t i = 0; i < p.nout; i++)
    fold_out(&p, kn__redplan_at(&p, i), k, t->dtype, cst, dst + (size_t)i * oes, o->dtype););
  kn_release(t);
  return KN_OK;
}

kn_status kn__k_any(const kn__call *c, kn__outs *out) {
  return fold_kernel(c, out, KN__RED_ANY, 1, 0);
}

kn_status kn__k_all(const kn__call *c, kn__outs *out) {
  return fold_kernel(c, out, KN__RED_ALL, 1, 0);
}

kn_status kn__k_logsumexp(const kn__call *c, kn__outs *out) {
  return fold_kernel(c, out, KN__RED_LSE, 1, 0);
}

kn_status kn__k_vector_norm(const kn__call *c, kn__outs *out) {
  double ord = scalar_arg(c, 1, 2);
  return fold_kernel(c, out, kn__red_norm_row(ord)->kind, 2, ord);
}

/* The order argument of a linalg_vector_norm call (for its derivative). */
double kn__vector_norm_ord(const kn__call *c) { return scalar_arg(c, 1, 2); }
