/*
** ops/reduce_scan.c: cumsum along a dim. Integer and bool inputs give int64
** unless a dtype is given (then the input is converted first), as in torch.
** Floating sums run in double along each line.
*/
#include <stdlib.h>

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/threads.h"

/* cumsum(self, dim, dtype?) */
kn_status kn__meta_cumsum(const kn__call *c, kn__metas *out) {
  const kn_tensor *t = c->args[0].u.t;
  int dim;
  kn_status st = kn__wrap_dim(c->args[1].u.i, t->ndim, &dim);
  if (st != KN_OK) return st;
  kn_dtype dt = kn__arg_dtype(c, 2, kn_dtype_is_integral(t->dtype, true) ? KN_INT64 : t->dtype);
  if ((unsigned)dt >= KN_DTYPE_COUNT)
    return kn__error(KN_EDTYPE, "cumsum(): invalid dtype %d", (int)dt);
  kn__outmeta *m = kn__metas_push_like(out, t, dt);
  if (!m) return kn__oom();
  return KN_OK;
}

/* Integer lines: int64 running sums that wrap like torch's. */
static void cumsum_int(const kn__lines *l, int64_t i, kn_dtype it, kn_dtype ot) {
  const char *x = kn__lines_at(l, 0, i);
  char *y = (char *)kn__lines_at(l, 1, i);
  uint64_t u = 0;
  for (int64_t k = 0; k < l->len; k++) {
    u += (uint64_t)kn__load_int(x + k * l->st[0], it);
    kn__store_int(y + k * l->st[1], ot, (int64_t)u);
  }
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
  bool fl = kn_dtype_is_floating(t->dtype), oom = false;
  KN__PAR_REGION(kn__par_team(l.nlines * l.len, l.nlines, KN__GRAIN),
  {
    double *buf = fl ? malloc((size_t)(l.len > 0 ? l.len : 1) * sizeof *buf) : NULL;
    if (fl && !buf) {
      _Pragma("omp atomic write")
      oom = true;
    }
    _Pragma("omp for schedule(static)")
    for (int64_t i = 0; i < l.nlines; i++) {
      if (!fl) {
        cumsum_int(&l, i, t->dtype, o->dtype);
        continue;
      }
      if (!buf) continue;
      kn__line_load(kn__lines_at(&l, 0, i), l.st[0], t->dtype, l.len, buf);
      for (int64_t k = 1; k < l.len; k++) buf[k] += buf[k - 1]; /* running sum in double */
      kn__line_store((char *)kn__lines_at(&l, 1, i), l.st[1], o->dtype, l.len, buf);
    }
    free(buf);
  });
  kn_release(t);
  return oom ? kn__oom() : KN_OK;
}
