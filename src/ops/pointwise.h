/*
** ops/pointwise.h: internals shared by the pointwise family's files
** (pointwise_formulas.h: the one table of element formulas they expand;
** pointwise_meta.c: metadata and type rules; pointwise_kern.c: the element
** loops; pointwise_bw.c: derivative rules; pointwise_api.c: public
** wrappers; pointwise_copy.c: copies and fills).
**
** Every pointwise op computes in a "compute type": float32 (also for
** float16/bfloat16, rounded once on store), float64, int64 (every integer
** type and bool; results wrap like a C cast on store) or bool (logical ops).
** Operands of another dtype are converted to the compute type first.
*/
#ifndef KN_OPS_POINTWISE_H
#define KN_OPS_POINTWISE_H

#include "ops/opdef.h"
#include "ops/pointwise_formulas.h"

/* What an op computes; one code per element formula (the rows of
** KN__PW_FORMULAS, ops/pointwise_formulas.h). */
typedef enum kn__pwcode {
#define KN__PW_CODE(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D) KN__PW_##CODE,
  KN__PW_FORMULAS(KN__PW_CODE)
#undef KN__PW_CODE
  KN__PW_NCODES
} kn__pwcode;

/* Per-formula facts of the table (indexed by code). */
typedef struct kn__pwform {
  const char *name;  /* "ADD" */
  int nin;           /* operands */
  bool bool_out;     /* writes bool */
  int classes;       /* KN__PWC_F | KN__PWC_I | KN__PWC_B */
  int vm;            /* vector-math function, or -1 */
  bool memory_bound;
} kn__pwform;
/* The facts of formula code (static). */
const kn__pwform *kn__pw_form(kn__pwcode code);

/* Kinds of result dtype of a pointwise op. */
typedef enum kn__pwkind {
  KN__PWK_SAME,     /* the promoted type (add, mul, neg, ...) */
  KN__PWK_FLOAT,    /* promoted, integers -> default float (div, exp, ...) */
  KN__PWK_BOOL,     /* comparisons and logical ops: bool */
} kn__pwkind;

/* Per-op facts for the shared meta functions and kernels. */
typedef struct kn__pwinfo {
  kn__pwcode code;
  kn__pwkind kind;
  int nopnds;        /* leading operand args (tensors or scalars) */
  bool inplace;
  bool present;      /* the op has a row in KN__PW_OPS */
} kn__pwinfo;

/* The facts for op id (every row of ops_pointwise.def that uses the shared
** meta functions has an entry: KN__PW_OPS; present is false for others). */
const kn__pwinfo *kn__pw_info(int opid);

/* Extra parameters of an element formula. */
typedef struct kn__pwparams {
  double alpha;      /* add/sub: other is scaled by alpha */
  int64_t ialpha;
  double lo, hi;     /* clamp bounds, threshold (lo); softplus: beta (alpha), threshold (lo) */
  bool has_lo, has_hi;
} kn__pwparams;

/* An operand: a tensor, or a scalar broadcast everywhere. */
typedef struct kn__pwopnd {
  const kn_tensor *t;  /* NULL for a scalar */
  kn_scalar s;
} kn__pwopnd;

/* Compute type for a promoted dtype (see the banner). */
kn_dtype kn__pw_compute_type(kn_dtype promoted);
/* Run an element formula: out[i] = f(in[0][i], in[1][i], ...) with the inputs
** broadcast to out's shape, computing in cc (out is written in its own dtype;
** comparisons write bool). Returns an error for integer division by zero. */
kn_status kn__pw_run(kn_tensor *out, int nin, const kn__pwopnd *in, kn_dtype cc,
                     kn__pwcode code, const kn__pwparams *prm);

/* The dispatcher's fast path for a pointwise call that no layer above the
** backend sees (ops/dispatch.c checks that: no mode, autocast, profiler or
** checked handles; grad_on: grad mode). It takes the call when every tensor
** argument is an operand on the CPU, not fake, without symbolic sizes,
** and not requiring grad while grad_on, and the operands' shapes are one
** shape or one-element shapes of no more dims (the broadcast shape is
** then that shape); in-place ops are never taken. Taken: returns true,
** *st the call's status and *out its output (owned; NULL on error, with
** the error the general path raises). The types, the checks and the
** kernel are the general path's own; only the shape rule, the output's
** allocation and the layers are skipped. false: not taken, nothing done. */
bool kn__pw_fast(const kn__call *c, bool grad_on, kn_status *st, kn_tensor **out);

/* PyTorch's name of a dtype in error messages ("Float", "Long"). Static. */
const char *kn__pw_torch_name(kn_dtype dt);
/* torch.can_cast(from, to): no float -> integral, no non-bool -> bool. */
bool kn__pw_can_cast(kn_dtype from, kn_dtype to);
/* The check in-place ops make: result dtype castable to self's, and the
** broadcast shape equal to self's. */
kn_status kn__pw_check_inplace(const kn_tensor *self, kn_dtype result, int nd,
                               const kn_sym *shape);

/* Scalar value helpers. */
double kn__pw_scalar_double(kn_scalar s);
int64_t kn__pw_scalar_int(kn_scalar s);

#endif
