/*
** ops/reduce.h: shared machinery of the reduction family (internal).
**
** A reduction maps an input onto an output whose dims are the input's kept
** dims. kn__redplan splits the input's geometry into kept dims (one output
** element each, in the output's contiguous order) and reduced dims
** (coalesced, row-major order), so a kernel visits, for every output element,
** the rows of its reduced region with kn__redplan_rows. Element order inside
** the region is the row-major order of the reduced dims (argmax relies on it).
*/
#ifndef KN_OPS_REDUCE_H
#define KN_OPS_REDUCE_H

#include "kiln/ops_reduce.h"
#include "ops/opdef.h"

/* A whole-tensor sum of at least this many contiguous floats sums blocks
** of 16384 (on threads: ops/threads.h), then the blocks' sums in order. */
#define KN__RED_PAR_MIN 65536

typedef struct kn__redplan {
  int nk, nr;
  int64_t ksz[KN_MAX_DIMS], kst[KN_MAX_DIMS]; /* kept dims: sizes, byte strides */
  int64_t rsz[KN_MAX_DIMS], rst[KN_MAX_DIMS]; /* reduced dims: sizes, byte strides */
  int64_t nout, nred;                         /* output elements, elements per output */
  const char *base;                           /* input data */
} kn__redplan;

/* A row of n elements with byte stride `stride`; `start` is the index (in
** the reduced region) of its first element. */
typedef void (*kn__row_fn)(void *state, const char *p, int64_t n, int64_t stride,
                           int64_t start);

/* Parse a dims argument (KN__A_INTS, one KN__A_INT, or KN__A_NONE / empty list = all dims)
** into mask[d] (true = reduced). Errors as PyTorch: dim out of range, "dim 0
** appears multiple times in the list of dims". */
kn_status kn__reduce_mask(const char *op, const kn_tensor *t, const kn__arg *dims, bool *mask);
/* Set m's sizes to t's sizes reduced over mask (size 1 with keepdim). */
void kn__reduce_shape(const kn_tensor *t, const bool *mask, bool keepdim, kn__outmeta *m);
/* Build the plan for t reduced over mask (t must have data). */
void kn__redplan_init(kn__redplan *p, const kn_tensor *t, const bool *mask);
/* Start of output o's reduced region in the input. */
const char *kn__redplan_at(const kn__redplan *p, int64_t o);
/* Visit the rows of the reduced region starting at base. */
void kn__redplan_rows(const kn__redplan *p, const char *base, kn__row_fn fn, void *state);

/* PyTorch's ScalarType name of a dtype ("Float", "Long"); static. */
const char *kn__torch_dtype_name(kn_dtype dt);
/* The dtype argument at index i (KN__A_DTYPE), or fallback when omitted. */
kn_dtype kn__arg_dtype(const kn__call *c, int i, kn_dtype fallback);
/* Number of elements of t in the dims of mask. */
int64_t kn__reduce_count(const kn_tensor *t, const bool *mask);
/* Input of a reduction as dtype dt: t itself (a new reference) when it
** already has dt, else a contiguous converted copy. Owned; NULL on OOM. */
kn_tensor *kn__reduce_input_as(kn_tensor *t, kn_dtype dt);

/* The order argument of a linalg_vector_norm call (2 when omitted). */
double kn__vector_norm_ord(const kn__call *c);

/* Lines along one dim of up to 4 same-shaped tensors: line o of tensor k
** starts at kn__lines_at(l, k, o) and steps by l->st[k] bytes, l->len
** elements long (used by scans and softmax). */
typedef struct kn__lines {
  int nt;
  int64_t nlines, len;
  int64_t st[4];
  kn__redplan p[4];
} kn__lines;
void kn__lines_init(kn__lines *l, int nt, const kn_tensor *const *ts, int dim);
/* A line of n elements (byte stride) converted to / from doubles; fast for
** contiguous float32/float64. */
void kn__line_load(const char *p, int64_t stride, kn_dtype dt, int64_t n, double *dst);
void kn__line_store(char *p, int64_t stride, kn_dtype dt, int64_t n, const double *src);
static inline const char *kn__lines_at(const kn__lines *l, int k, int64_t o) {
  return kn__redplan_at(&l->p[k], o);
}

#endif
