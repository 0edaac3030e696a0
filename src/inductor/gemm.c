/*
** inductor/gemm.c: running a GEMM or convolution extern step with its
** epilogue (a KN__KIR_EPILOGUE item: generated code, printed by the target
** like any pointwise kernel; the scheduler's epilogue pass decides which
** kernel, sched_epi.c). Nothing here knows what the epilogue computes.
**
**   addmm / mm (lowering roles EP_ADDMM, EP_MM) with 2-D float32 / float64
**   operands: the output is computed in blocks of rows (about 1 MiB): the
**   bias rows (addmm's self, broadcast, as eager addmm copies it into its
**   output before the GEMM), the GEMM of the block through the eager
**   kernel (kn__nn_gemm_rows: for float32 the library the whole product's
**   shape takes, ops/gemm_select.h, so the blocks round as eager addmm
**   does; OpenBLAS for float64), then
**   the epilogue over the block while it is in cache;
**   bmm, convolution, or operands the blocked path does not take: the
**   eager op, then the epilogue over blocks of its output's rows.
**
** The output is written in the caller's buffer (`into`: the epilogue's
** output that the memory plan writes over the GEMM's) or in a new tensor.
*/
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"
#include "ops/iter.h"
#include "ops/nn.h"
#include "tensor/tensor.h"

static double scalar_of(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

/* Rows [r0, r1) of the [M, N] output at out set to the bias b (broadcast). */
static void bias_rows(const kn_tensor *b, char *out, int64_t N, size_t es, int64_t r0, int64_t r1) {
  int64_t rs = 0, cs = 0;
  if (b->ndim == 2) {
    rs = b->sizes[0] == 1 ? 0 : b->strides[0];
    cs = b->sizes[1] == 1 ? 0 : b->strides[1];
  } else if (b->ndim == 1) {
    cs = b->sizes[0] == 1 ? 0 : b->strides[0];
  }
  const char *bp = kn_data((kn_tensor *)b);
  for (int64_t r = r0; r < r1; r++) {
    char *row = out + (size_t)(r * N) * es;
    if (cs == 1) memcpy(row, bp + (size_t)(r * rs) * es, (size_t)N * es);
    else kn__strided_copy(row, (int64_t)es, bp + (size_t)(r * rs) * es, cs * (int64_t)es, es, N);
  }
}

/* Rows per block: about 1 MiB of output, at least 64. */
static int64_t block_rows(int64_t len, size_t es) {
  int64_t rb = len > 0 ? (int64_t)((1024 * 1024) / ((size_t)len * es)) : 64;
  return rb < 64 ? 64 : rb;
}

/* The operands of a blocked GEMM: out = beta * b + alpha * x @ w. */
typedef struct gemm_args {
  const kn_tensor *b, *x, *w;
  double beta, alpha;
} gemm_args;

/* Take c's arguments as a blocked GEMM (addmm or mm over 2-D float32 /
** float64 operands of one dtype)? */
static bool gemm_operands(kn__ind_role role, const kn__call *c, gemm_args *g) {
  bool addmm = role == KN__IND_R_EP_ADDMM;
  if (!addmm && role != KN__IND_R_EP_MM) return false;
  *g = (gemm_args){addmm ? c->args[0].u.t : NULL, c->args[addmm ? 1 : 0].u.t,
                   c->args[addmm ? 2 : 1].u.t, addmm ? scalar_of(c->args[3].u.s) : 0,
                   addmm ? scalar_of(c->args[4].u.s) : 1};
  const kn_tensor *x = g->x, *w = g->w, *b = g->b;
  return x && w && x->ndim == 2 && w->ndim == 2 && x->dtype == w->dtype &&
         (x->dtype == KN_FLOAT32 || x->dtype == KN_FLOAT64) && x->sizes[1] == w->sizes[0] &&
         x->device == KN_CPU && w->device == KN_CPU &&
         (!b || (b->ndim <= 2 && b->dtype == x->dtype && b->device == KN_CPU));
}

static kn__mat mat_of(const kn_tensor *t) {
  return (kn__mat){kn_data((kn_tensor *)t), t->strides[0], t->strides[1]};
}

/* The blocked GEMM into C ([M, N], contiguous), epi after each block. */
static kn_status gemm_blocks(const gemm_args *g, char *C, kn__ind_epi_fn epi, void *const *a) {
  int64_t M = g->x->sizes[0], K = g->x->sizes[1], N = g->w->sizes[1];
  kn_dtype dt = g->x->dtype;
  size_t es = kn_dtype_size(dt);
  int64_t rb = block_rows(N, es);
  bool with_bias = g->b && g->beta != 0;
  kn__mat A = mat_of(g->x), B = mat_of(g->w);
  for (int64_t r0 = 0; r0 < M; r0 += rb) {
    int64_t r1 = r0 + rb < M ? r0 + rb : M;
    if (with_bias) bias_rows(g->b, C, N, es, r0, r1);
    kn__mat Ab = {(const char *)A.p + r0 * A.s0 * (int64_t)es, A.s0, A.s1};
    kn_status st = kn__nn_gemm_rows("addmm_impl_cpu_", dt, r1 - r0, N, K, Ab, B,
                                    C + (size_t)(r0 * N) * es, N, g->alpha,
                                    with_bias ? g->beta : 0.0, M);
    if (st != KN_OK) return st;
    epi(a, C, r0, r1);
  }
  return KN_OK;
}

/* The epilogue over t's rows (every dim but the last), in blocks. */
static void epi_rows(const kn_tensor *t, void *g, kn__ind_epi_fn epi, void *const *a) {
  int64_t len = t->ndim ? t->sizes[t->ndim - 1] : 1, n = kn_numel(t);
  int64_t rows = len ? n / len : 0, rb = block_rows(len, kn_dtype_size(t->dtype));
  for (int64_t r0 = 0; r0 < rows; r0 += rb) epi(a, g, r0, r0 + rb < rows ? r0 + rb : rows);
}

/* The eager op, then the epilogue over its output (copied into `into`). */
static kn_status eager_then_epilogue(const kn__gnode *n, kn__call *c, kn__ind_epi_fn epi,
                                     void *const *a, void *into, kn_tensor **out) {
  kn__outs o;
  kn__outs_init(&o);
  kn_status st = kn__dispatch(c, &o);
  if (st == KN_OK && (o.n != 1 || !kn_is_contiguous(o.t[0]) || o.t[0]->device != KN_CPU ||
                      o.t[0]->dtype != n->meta[0].dtype || o.t[0]->ndim != n->meta[0].ndim))
    st = kn__error(KN_EINTERNAL, "inductor: %s: expected one contiguous %s CPU output of %d "
                   "dims for its epilogue", n->name, kn_dtype_name(n->meta[0].dtype),
                   n->meta[0].ndim);
  if (st == KN_OK) {
    kn_tensor *t = o.t[0];
    if (into) memcpy(into, kn_data(t), (size_t)kn_numel(t) * kn_dtype_size(t->dtype));
    epi_rows(t, into ? into : kn_data(t), epi, a);
    if (!into) {
      *out = t;
      o.n = 0;
    }
  }
  kn__outs_fini(&o);
  return st;
}

kn_status kn__ind_epilogue_run(const kn__gnode *n, kn__call *c, kn__ind_epi_fn epi,
                               void *const *a, void *into, kn_tensor **out) {
  *out = NULL;
  gemm_args g;
  if (!gemm_operands(kn__ind_lowering_of(n->opdef)->role, c, &g))
    return eager_then_epilogue(n, c, epi, a, into, out);
  kn_tensor *t = NULL;
  if (!into) {
    t = kn__empty(2, (int64_t[]){g.x->sizes[0], g.w->sizes[1]}, g.x->dtype, KN_CPU);
    if (!t) return kn_last_status();
  }
  kn_status st = gemm_blocks(&g, into ? into : kn_data(t), epi, a);
  if (st != KN_OK) kn_release(t);
  else *out = t;
  return st;
}
