/*
** ops/pointwise_cvt16.h: float32 element formulas read and write
** bfloat16/float16 operands block by block (internal; ops/pointwise_cvt16.c).
*/
#ifndef KN_OPS_POINTWISE_CVT16_H
#define KN_OPS_POINTWISE_CVT16_H

#include "ops/iter.h"

/* A float32 row function and the dtypes of its operands (0: the output,
** then the inputs; each float32, bfloat16 or float16). */
typedef struct kn__pw16ctx {
  kn__iter_row_fn fn;
  const void *ctx;
  int nops;
  kn_dtype dt[3];
} kn__pw16ctx;

/* Is dt bfloat16 or float16? */
bool kn__pw16_is16(kn_dtype dt);
/* An iterator row function (ctx: a kn__pw16ctx) running ctx->fn on float32
** blocks of the row: 16-bit inputs widened, a 16-bit output rounded once. */
void kn__pw16_rows(char **p, const int64_t *s, int64_t n, const void *ctx);

#endif
