/*
** ops/pointwise_cvt16.c: float32 element formulas on bfloat16/float16
** operands without float32 copies of whole tensors (see ops/pointwise.h).
**
** A formula computes in float32 whenever an operand is 16-bit. Instead of
** widening each 16-bit input into a float32 tensor and narrowing a float32
** result tensor afterwards (three passes over memory, the float32 ones twice
** the bytes), each row of the iterator is processed in blocks of BLK
** elements: the 16-bit inputs' block is widened into a stack buffer with the
** vector conversions (exact), the float32 row function runs on the buffers
** (and on float32 operands in place), and a 16-bit result block is rounded
** once into the output, to nearest even as the whole-tensor conversion does.
** The results are bit for bit those of the copying path.
*/
#include "core/error.h"
#include "ops/cvt16.h"
#include "ops/pointwise_cvt16.h"

enum { BLK = 256 };

bool kn__pw16_is16(kn_dtype dt) { return dt == KN_BFLOAT16 || dt == KN_FLOAT16; }

/* n float32 values of a 16-bit operand s bytes apart (s 0: one value). */
static void widen(float *y, const char *x, int64_t s, kn_dtype dt, int64_t n) {
  if (s == 2 && kn__cvt16_run(y, KN_FLOAT32, x, dt, n)) return;
  for (int64_t i = 0; i < n; i++) y[i] = (float)kn__load_double(x + i * s, dt);
}

static void narrow(char *y, int64_t s, kn_dtype dt, const float *x, int64_t n) {
  if (s == 2 && kn__cvt16_run(y, dt, x, KN_FLOAT32, n)) return;
  for (int64_t i = 0; i < n; i++) kn__store_double(y + i * s, dt, (double)x[i]);
}

/* One block of m elements at element i0 of the row. */
static void block(const kn__pw16ctx *c, char **p, const int64_t *s, int64_t i0, int64_t m) {
  float buf[3][BLK];
  char *q[3];
  int64_t qs[3];
  for (int k = 0; k < c->nops; k++) {
    char *at = p[k] + i0 * s[k];
    if (!kn__pw16_is16(c->dt[k])) {
      q[k] = at, qs[k] = s[k];
      continue;
    }
    q[k] = (char *)buf[k];
    qs[k] = k > 0 && s[k] == 0 ? 0 : (int64_t)sizeof(float);
    if (k > 0) widen(buf[k], at, s[k], c->dt[k], qs[k] ? m : 1);
  }
  c->fn(q, qs, m, c->ctx);
  if (kn__pw16_is16(c->dt[0])) narrow(p[0] + i0 * s[0], s[0], c->dt[0], buf[0], m);
}

void kn__pw16_rows(char **p, const int64_t *s, int64_t n, const void *vctx) {
  const kn__pw16ctx *c = vctx;
  for (int64_t i0 = 0; i0 < n; i0 += BLK) block(c, p, s, i0, n - i0 < BLK ? n - i0 : BLK);
}
