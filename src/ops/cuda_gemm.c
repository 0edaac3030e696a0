/*
** ops/cuda_gemm.c: mm, bmm and addmm on CUDA tensors through cuBLAS
** (kn__cuda_gemm). An operand whose last two dimensions are row-major or
** column-major (unit stride in one of them) is passed as it is, transposed
** or not; any other layout is first copied contiguous on the device. The
** meta functions have checked ranks, sizes and dtypes; outputs are fresh
** contiguous device tensors.
*/
#include "core/error.h"
#include "cuda/cuda.h"
#include "kiln/cuda.h"
#include "ops/cuda_ops.h"
#include "tensor/tensor.h"

typedef struct operand {
  const void *p;
  bool t;         /* column-major (a transposed row-major matrix) */
  int64_t ld, bs; /* leading dimension, batch stride (elements) */
  kn_tensor *tmp; /* owned contiguous copy, or NULL */
} operand;

static int64_t max1(int64_t v) { return v > 1 ? v : 1; }

/* x: a matrix (2-D) or a batch of them (3-D). */
static kn_status make_operand(const kn_tensor *x, operand *o) {
  int nd = x->ndim;
  int64_t rows = x->sizes[nd - 2], cols = x->sizes[nd - 1];
  int64_t rs = x->strides[nd - 2], cs = x->strides[nd - 1];
  *o = (operand){kn_cuda_data_ptr(x), false, 0, nd == 3 && x->sizes[0] > 1 ? x->strides[0] : 0,
                 NULL};
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= max1(cols))) {
    o->ld = rows <= 1 ? max1(cols) : rs;
  } else if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= max1(rows))) {
    o->t = true;
    o->ld = cols <= 1 ? max1(rows) : cs;
  } else {
    if (!(o->tmp = kn__cuda_contiguous(x, x->dtype))) return kn_last_status();
    o->p = kn_cuda_data_ptr(o->tmp);
    o->ld = max1(cols);
    o->bs = nd == 3 && x->sizes[0] > 1 ? rows * cols : 0;
  }
  return o->p || rows * cols == 0 ? KN_OK : kn_last_status();
}

static kn_status check_dtype(const kn__call *c, kn_dtype dt) {
  if (dt == KN_FLOAT32 || dt == KN_FLOAT64 || dt == KN_FLOAT16 || dt == KN_BFLOAT16) return KN_OK;
  return kn__error(KN_EUNSUPPORTED,
                   "aten.%s: no CUDA kernel for %s (cuBLAS multiplies float32, float64, float16 "
                   "and bfloat16 matrices) (cuda:%d)",
                   c->op->name, kn_dtype_name(dt), kn__cuda_device_index());
}

static double scalar_value(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}

/* out (contiguous, [batch,] m x n) = alpha * a @ b + beta * out. */
static kn_status product(const kn__call *c, const kn_tensor *a, const kn_tensor *b, kn_tensor *out,
                         double alpha, double beta) {
  kn_status st = check_dtype(c, out->dtype);
  int nd = out->ndim;
  int64_t m = out->sizes[nd - 2], n = out->sizes[nd - 1], k = a->sizes[a->ndim - 1];
  int64_t batch = nd == 3 ? out->sizes[0] : 1;
  if (st != KN_OK || m * n * batch == 0) return st;
  if (k == 0 && beta == 0) return kn__cuda_fill(out, &(uint64_t){0});
  operand oa, ob;
  st = make_operand(a, &oa);
  if (st == KN_OK) {
    st = make_operand(b, &ob);
    if (st == KN_OK) {
      st = kn__cuda_gemm(out->dtype, oa.t, ob.t, m, n, k, alpha, oa.p, oa.ld, oa.bs, ob.p, ob.ld,
                         ob.bs, beta, kn_cuda_data_ptr(out), n, m * n, batch);
      kn_release(ob.tmp);
    }
    kn_release(oa.tmp);
  }
  return st;
}

kn_status kn__cuda_k_mm(const kn__call *c, kn__outs *out) {
  return product(c, c->args[0].u.t, c->args[1].u.t, out->t[0], 1.0, 0.0);
}

kn_status kn__cuda_k_bmm(const kn__call *c, kn__outs *out) {
  return product(c, c->args[0].u.t, c->args[1].u.t, out->t[0], 1.0, 0.0);
}

/* addmm(self, mat1, mat2, *, beta, alpha): self broadcast into the output
** first (unless beta is 0: then self is ignored, NaNs included, as in
** PyTorch). */
kn_status kn__cuda_k_addmm(const kn__call *c, kn__outs *out) {
  double beta = scalar_value(c->args[3].u.s), alpha = scalar_value(c->args[4].u.s);
  kn_status st = check_dtype(c, out->t[0]->dtype);
  if (st == KN_OK && beta != 0) st = kn__cuda_copy_into(out->t[0], c->args[0].u.t);
  if (st != KN_OK) return st;
  return product(c, c->args[1].u.t, c->args[2].u.t, out->t[0], alpha, beta);
}
