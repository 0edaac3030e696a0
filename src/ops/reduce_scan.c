/*
** ops/reduce_scan.c: cumsum along a dim. Integer and bool inputs give int64
** unless a dtype is given (then the input is converted first), as in torch.
** Floating sums run in double along each line.
*/
#include "core/error.h"
#include "ops/reduce.h"

/* cumsum(self, dim, dtype?) */
kn_status kn__meta_cumsum(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  int dim;
  kn_status st = kn__wrap_dim(c->args[1].u.i, t->ndim, &dim);
  if (st != KN_OK) return st;
  kn_dtype dt = kn__arg_dtype(c, 2, kn_dtype_is_integral(t->dtype, true) ? KN_INT64 : t->dtype);
  if ((unsigned)dt >= KN_DTYPE_COUNT)
    return kn__error(KN_EDTYPE, "cumsum(): invalid dtype %d", (int)dt);
  kn__outmeta *m = kn__metas_push(out, dt);
  if (!m) return kn__oom();
  m->ndim = t->ndim;
  kn__tensor_symsizes(t, m->sizes);
  return KN_OK;
}

kn_status kn__k_cumsum(const kn__call *c, kn__outs *out) {
  kn_tensor *o = out->t[0];
  int dim = 0;
  kn__wrap_dim(c->args[1].u.i, o->ndim, &dim);
  bool explicit_dt = c->nargs > 2 && c->args[2].kind == KN__A_DTYPE;
  kn_tensor *t = kn__reduce_input_as(c->args[0].u.t, explicit_dt ? o->dtype : c->args[0].u.t->dtype);
  if (!t) return kn__oom();
  const kn_tensor *ts[2] = {t, o};
  kn__lines l;
  kn__lines_init(&l, 2, ts, dim);
  bool fl = kn_dtype_is_floating(t->dtype);
#pragma omp parallel for if (l.nlines * l.len >= KN__RED_PAR_MIN && l.nlines > 1) schedule(static)
  for (int64_t i = 0; i < l.nlines; i++) {
    const char *x = kn__lines_at(&l, 0, i);
    char *y = (char *)kn__lines_at(&l, 1, i);
    double d = 0;
    uint64_t u = 0;
    for (int64_t k = 0; k < l.len; k++) {
      if (fl) {
        d += kn__load_double(x + k * l.st[0], t->dtype);
        kn__store_double(y + k * l.st[1], o->dtype, d);
      } else {
        u += (uint64_t)kn__load_int(x + k * l.st[0], t->dtype);
        kn__store_int(y + k * l.st[1], o->dtype, (int64_t)u);
      }
    }
  }
  kn_release(t);
  return KN_OK;
}
