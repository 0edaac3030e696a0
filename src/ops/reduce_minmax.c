/*
** ops/reduce_minmax.c: amax/amin over dims and argmax/argmin over one dim or
** the flattened tensor. NaN wins (as in torch: amax of a row holding NaN is
** NaN, argmax points at the first NaN); ties in argmax/argmin resolve to the
** first occurrence. Reducing over an empty dim is an error, with torch's
** messages.
*/
#include <math.h>

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/reduce_table.h"
#include "ops/threads.h"

/* ---- meta ------------------------------------------------------------------ */

/* torch's checks for reductions without an identity (amax, argmax, ...). */
static kn_status check_nonempty(const char *op, const kn_tensor *t, const bool *mask,
                                bool dim_given) {
  if (kn_numel(t) != 0) return KN_OK;
  if (!dim_given)
    return kn__error(KN_EINVAL,
                     "%s(): Expected reduction dim to be specified for input.numel() == 0.%s",
                     op, op[0] == 'a' && op[1] == 'm' ? " Specify the reduction dim with the "
                                                        "'dim' argument." : "");
  for (int d = 0; d < t->ndim; d++)
    if (mask[d] && t->sizes[d] == 0)
      return kn__error(KN_ERANGE, "%s(): Expected reduction dim %d to have non-zero size.", op, d);
  return KN_OK;
}

/* amax/amin(self, dims, keepdim) */
kn_status kn__meta_amax(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  bool mask[KN_MAX_DIMS];
  kn_status st = kn__reduce_mask(c->op->name, t, &c->args[1], mask);
  if (st != KN_OK) return st;
  bool given = c->args[1].kind == KN__A_INTS && c->args[1].u.ints.n > 0;
  st = check_nonempty(c->op->name, t, mask, given);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, t->dtype);
  if (!m) return kn__oom();
  kn__reduce_shape(t, mask, c->args[2].u.b, m);
  return KN_OK;
}

/* argmax/argmin(self, dim?, keepdim): one dim, or none for the flattened
** tensor (keepdim then keeps every dim as size 1). */
static kn_status arg_mask(const kn__call *c, const kn_tensor *t, bool *mask) {
  if (c->args[1].kind != KN__A_INT) {
    for (int d = 0; d < KN_MAX_DIMS; d++) mask[d] = d < t->ndim;
    return KN_OK;
  }
  kn__arg one = KN_A_INTS(&c->args[1].u.i, 1);
  return kn__reduce_mask(c->op->name, t, &one, mask);
}

kn_status kn__meta_argmax(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  bool mask[KN_MAX_DIMS];
  kn_status st = arg_mask(c, t, mask);
  if (st != KN_OK) return st;
  st = check_nonempty(c->op->name, t, mask, c->args[1].kind == KN__A_INT);
  if (st != KN_OK) return st;
  kn__outmeta *m = kn__metas_push(out, KN_INT64);
  if (!m) return kn__oom();
  kn__reduce_shape(t, mask, c->args[2].u.b, m);
  return KN_OK;
}

/* ---- kernels ----------------------------------------------------------------- */

/* The running extreme and its index, started and replaced as the table's
** row says (ops/reduce_table.h: the NaN rule and first-index ties are in
** its `better`). amax/amin share argmax/argmin's rows' order. */
typedef struct best {
  kn_dtype dt;
  kn__red_kind kind; /* KN__RED_ARGMAX or KN__RED_ARGMIN */
  double d;          /* floating best */
  int64_t i;         /* integer best */
  int64_t at;        /* index of the best in the reduced region */
} best;

/* One row of doubles (or floats) with the order of row K. */
#define BEST_LOOP(K, LOAD)                            \
  for (int64_t k = 0; k < n; k++) {                   \
    double v = LOAD;                                  \
    if (kn__red_better_##K(b->d, v)) b->d = v, b->at = start + k; \
  }
#define BEST_ILOOP(K)                                              \
  for (int64_t k = 0; k < n; k++) {                                \
    int64_t v = kn__load_int(p + k * s, b->dt);                    \
    if (kn__red_ibetter_##K(b->i, v)) b->i = v, b->at = start + k; \
  }

static void row_best(void *state, const char *p, int64_t n, int64_t s, int64_t start) {
  best *b = state;
  bool max = b->kind == KN__RED_ARGMAX;
  if (b->dt == KN_FLOAT32 && s == 4) {
    const float *x = (const float *)p;
    if (max) BEST_LOOP(ARGMAX, x[k]) else BEST_LOOP(ARGMIN, x[k])
  } else if (kn_dtype_is_floating(b->dt)) {
    if (max) BEST_LOOP(ARGMAX, kn__load_double(p + k * s, b->dt))
    else BEST_LOOP(ARGMIN, kn__load_double(p + k * s, b->dt))
  } else {
    if (max) BEST_ILOOP(ARGMAX) else BEST_ILOOP(ARGMIN)
  }
}

static kn_status best_kernel(const kn_tensor *t, const bool *mask, bool max, bool index,
                             kn_tensor *o) {
  kn__redplan p;
  kn__redplan_init(&p, t, mask);
  char *dst = kn_data(o);
  size_t oes = kn_dtype_size(o->dtype);
  const kn__red_row *row = &kn__red_rows[max ? KN__RED_ARGMAX : KN__RED_ARGMIN];
  KN__PAR_FOR(kn__par_team(p.nout * p.nred, p.nout, KN__GRAIN),
  for (int64_t i = 0; i < p.nout; i++) {
    best b = {t->dtype, row->kind, row->init, row->iinit, 0};
    kn__redplan_rows(&p, kn__redplan_at(&p, i), row_best, &b);
    char *q = dst + (size_t)i * oes;
    if (index) *(int64_t *)q = b.at;
    else if (kn_dtype_is_floating(t->dtype)) kn__store_double(q, o->dtype, b.d);
    else kn__store_int(q, o->dtype, b.i);
  });
  return KN_OK;
}

static kn_status amax_like(const kn__call *c, kn__outs *out, bool max) {
  bool mask[KN_MAX_DIMS];
  kn_status st = kn__reduce_mask(c->op->name, c->args[0].u.t, &c->args[1], mask);
  if (st != KN_OK) return st;
  return best_kernel(c->args[0].u.t, mask, max, false, out->t[0]);
}

static kn_status argmax_like(const kn__call *c, kn__outs *out, bool max) {
  bool mask[KN_MAX_DIMS];
  kn_status st = arg_mask(c, c->args[0].u.t, mask);
  if (st != KN_OK) return st;
  return best_kernel(c->args[0].u.t, mask, max, true, out->t[0]);
}

kn_status kn__k_amax(const kn__call *c, kn__outs *out) { return amax_like(c, out, true); }
kn_status kn__k_amin(const kn__call *c, kn__outs *out) { return amax_like(c, out, false); }
kn_status kn__k_argmax(const kn__call *c, kn__outs *out) { return argmax_like(c, out, true); }
kn_status kn__k_argmin(const kn__call *c, kn__outs *out) { return argmax_like(c, out, false); }
