/*
** inductor/formula.c: which pointwise nodes inductor computes inline, in
** which compute type, and with which element formula. The formulas are the
** eager kernels' own: the text of the formula table
** (ops/pointwise_formulas.h), with the same compute types (float32 for
** float32, float64, int64 with wrap-around for integers, bool for logical
** ops). Formulas that the eager kernels compute with vector math (exp, log,
** tanh, erf, gelu, pow, ...) call functions of the generated file that run
** the same vector-math table (KN__IND_VM_PRELUDE, kn__ind_vm_prelude), so
** compiled and eager results are equal. float16 and bfloat16 compute in
** float32 like the eager kernels (each node's value rounded to its dtype,
** codegen.c). A node that does not fit (integer division, mixed zero-dim
** promotion, ...) returns false and runs as
** an extern call of the eager op. Which ops are formulas, selects, casts or
** constants is the lowering table's (inductor/lowering.def).
*/
#include <stddef.h>
#include <string.h>

#include "core/error.h"
#include "inductor/inductor.h"
#include "ops/pointwise.h"
#include "ops/vmath.h"

const char *kn__ind_ctype(kn_dtype dt) {
  switch (dt) {
  case KN_BOOL: return "bool";
  case KN_UINT8: return "uint8_t";
  case KN_INT8: return "int8_t";
  case KN_INT16: return "int16_t";
  case KN_INT32: return "int32_t";
  case KN_INT64: return "int64_t";
  case KN_FLOAT32: return "float";
  case KN_FLOAT64: return "double";
  case KN_FLOAT16:
  case KN_BFLOAT16: return "uint16_t";
  default: return NULL;
  }
}

const char *kn__ind_vtype(kn_dtype dt) {
  return kn__ind_half(dt) ? "float" : kn__ind_ctype(dt);
}

bool kn__ind_half(kn_dtype dt) { return dt == KN_FLOAT16 || dt == KN_BFLOAT16; }

/* The formula table (ops/pointwise_formulas.h) as text, by compute class:
** float, int64, bool (NULL where the class has no formula). Formulas whose
** float version is a vector-math function call it by name (see vm_text). */
typedef struct row { const char *fl, *in, *bo; } row;
#define KN__IND_ROW(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D)                    \
  [KN__PW_##CODE] = {((CL) & KN__PWC_F) && (VM) < 0 ? #F : NULL,                \
                     ((CL) & KN__PWC_I) ? #I : NULL, ((CL) & KN__PWC_B) ? #B : NULL},
static const row rows[KN__PW_NCODES] = {KN__PW_FORMULAS(KN__IND_ROW)};
#undef KN__IND_ROW

/* Calls of the vector-math functions of the generated file (one per
** formula and float type: kn_vm_EXP_f32(a), kn_vm_POW_f64(a, b)). */
#define KN__IND_VMTEXT(CODE, NIN, OUT, CL, F, I, B, VM, MEM, D)                 \
  [KN__PW_##CODE] = {(VM) < 0 ? NULL : (NIN) == 1 ? "kn_vm_" #CODE "_f32(a)" : "kn_vm_" #CODE "_f32(a, b)", \
                     (VM) < 0 ? NULL : (NIN) == 1 ? "kn_vm_" #CODE "_f64(a)" : "kn_vm_" #CODE "_f64(a, b)"},
static const char *const vm_text[KN__PW_NCODES][2] = {KN__PW_FORMULAS(KN__IND_VMTEXT)};
#undef KN__IND_VMTEXT

static bool is_float(kn_dtype dt) {
  return dt == KN_FLOAT32 || dt == KN_FLOAT64 || kn__ind_half(dt);
}

static double scalar_double(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? s.v.f : s.kind == KN_SCALAR_INT ? (double)s.v.i : s.v.b;
}
static int64_t scalar_int(kn_scalar s) {
  return s.kind == KN_SCALAR_FLOAT ? (int64_t)s.v.f : s.kind == KN_SCALAR_INT ? s.v.i : s.v.b;
}

/* torch's result_type for the operands, in the cases inductor lowers:
** tensors of one dtype, or tensors that all have dimensions, plus scalars,
** or floating tensors with dimensions and zero-dim tensors of any dtype (the
** dimensioned tensors' type wins: SGD's param - grad * lr with a float64
** lr); false when zero-dim tensors would need the other category rules. */
static bool promoted_type(const kn__gnode *n, int nopnds, kn_dtype *out) {
  bool have = false, zero_dim = false, mixed = false, fscalar = false, iscalar = false;
  bool have_dim = false;
  kn_dtype pt = KN_BOOL, dim_t = KN_BOOL;
  for (int i = 0; i < nopnds && i < n->nargs; i++) {
    const kn__garg *a = &n->args[i];
    if (a->kind == KN__GA_SCALAR) {
      fscalar |= a->u.s.kind == KN_SCALAR_FLOAT;
      iscalar |= a->u.s.kind == KN_SCALAR_INT;
      continue;
    }
    if (a->kind != KN__GA_TENSOR || !a->u.t.node) return false;
    const kn__vmeta *m = &a->u.t.node->meta[a->u.t.idx];
    if (m->kind != KN__V_TENSOR || !kn__ind_ctype(m->dtype)) return false;
    zero_dim |= m->ndim == 0;
    mixed |= have && m->dtype != pt;
    pt = have ? kn_promote_types(pt, m->dtype) : m->dtype;
    have = true;
    if (m->ndim > 0) dim_t = have_dim ? kn_promote_types(dim_t, m->dtype) : m->dtype;
    have_dim |= m->ndim > 0;
  }
  if (zero_dim && mixed && have_dim && is_float(dim_t)) pt = dim_t, mixed = false;
  if (!have || (zero_dim && mixed)) return false;
  if (fscalar && !is_float(pt)) pt = KN_FLOAT32;
  else if (iscalar && pt == KN_BOOL) pt = KN_INT64;
  *out = pt;
  return true;
}

static kn__pwcode actual_code(const kn__gnode *n, kn__pwcode code) {
  const kn__garg *last = n->nargs > 1 ? &n->args[n->nargs - 1] : NULL;
  bool tanh_approx = last && last->kind == KN__GA_INT && kn__sym_is_const(last->u.i) &&
                     last->u.i.c == 1;
  if (code == KN__PW_DIV_TRUNC)
    return n->nargs > 2 && n->args[2].kind == KN__GA_INT && n->args[2].u.i.c == 2
               ? KN__PW_DIV_FLOOR : KN__PW_DIV_TRUNC;
  if (code == KN__PW_GELU && tanh_approx) return KN__PW_GELU_TANH;
  if (code == KN__PW_GELU_BW && tanh_approx) return KN__PW_GELU_TANH_BW;
  return code;
}

/* add/sub alpha, threshold, clamp bounds into f; false if unsupported. */
static bool params(const kn__gnode *n, kn__pwcode code, kn__ind_formula *f) {
  f->p1 = 1;
  f->ip1 = 1;
  if ((code == KN__PW_ADD || code == KN__PW_SUB) && n->nargs > 2 &&
      n->args[2].kind == KN__GA_SCALAR) {
    f->p1 = scalar_double(n->args[2].u.s);
    f->ip1 = scalar_int(n->args[2].u.s);
  }
  if (code == KN__PW_THRESHOLD_BW) {
    if (n->nargs < 3 || n->args[2].kind != KN__GA_SCALAR) return false;
    f->p1 = scalar_double(n->args[2].u.s);
    f->ip1 = scalar_int(n->args[2].u.s);
  }
  return true;
}

/* Is operand q of n the scalar 2 (pow's x ** 2, computed as x * x like
** the eager kernel)? */
static bool scalar_two(const kn__gnode *n, int q) {
  return n->nargs > q && n->args[q].kind == KN__GA_SCALAR && scalar_double(n->args[q].u.s) == 2;
}

static const char *float_text(kn__pwcode code, const kn__gnode *n, kn__ind_formula *f) {
  if (code == KN__PW_POW && scalar_two(n, 1)) return "a * a";
  if (rows[code].fl) return rows[code].fl;
  const char *vm = vm_text[code][f->ct == KN_FLOAT64];
  if (vm) f->vm = kn__pw_form(code)->vm;
  return vm;
}

static bool pointwise_formula(const kn__gnode *n, kn__ind_formula *f) {
  const kn__pwinfo *pi = kn__pw_info(n->opdef->id);
  if (!pi->present || pi->nopnds <= 0 || pi->inplace) return false;
  kn_dtype pt, ot = n->meta[0].dtype;
  if (!promoted_type(n, pi->nopnds, &pt)) return false;
  bool logical = pi->code == KN__PW_LAND || pi->code == KN__PW_LOR || pi->code == KN__PW_LNOT;
  if (logical && pt != KN_BOOL) return false;
  if (pi->kind == KN__PWK_BOOL ? ot != KN_BOOL : ot != pt) return false;
  kn__pwcode code = actual_code(n, pi->code);
  f->ct = logical ? KN_BOOL : kn__pw_compute_type(pt);
  f->nopnds = pi->nopnds;
  f->code = code;
  f->vm = -1;
  if (!params(n, code, f)) return false;
  bool fl = is_float(f->ct);
  f->tmpl = f->ct == KN_BOOL ? rows[code].bo : fl ? float_text(code, n, f) : rows[code].in;
  return f->tmpl != NULL;
}

/* CONSTANT (full(size, value, dtype)), or CAST (_to_copy, clone: the
** first argument converted) and BROADCAST (expand: the first argument,
** broadcast to the output's sizes by its leaf's strides). */
static bool other_formula(const kn__gnode *n, kn__ind_lclass cls, kn__ind_formula *f) {
  kn_dtype ot = n->meta[0].dtype;
  if (!kn__ind_ctype(ot) || ot == KN_UINT8 || ot == KN_INT8 || ot == KN_INT16 ||
      ot == KN_INT32)
    return false;
  f->ct = kn__ind_half(ot) ? KN_FLOAT32 : ot; /* float16/bfloat16: computed in float */
  switch (cls) {
  case KN__IND_L_CONSTANT:
    if (n->nargs < 2 || n->args[1].kind != KN__GA_SCALAR) return false;
    f->p1 = scalar_double(n->args[1].u.s);
    f->ip1 = scalar_int(n->args[1].u.s);
    f->nopnds = 0;
    f->tmpl = is_float(ot) || ot == KN_BOOL ? "P1" : "(T)PI";
    return true;
  case KN__IND_L_CAST:
  case KN__IND_L_BROADCAST: {
    const kn__garg *a = &n->args[0];
    if (a->kind != KN__GA_TENSOR || !a->u.t.node) return false;
    if (!kn__ind_ctype(a->u.t.node->meta[a->u.t.idx].dtype)) return false;
    f->nopnds = 1;
    f->tmpl = "a";
    return true;
  }
  default: return false;
  }
}

/* where(cond, self, other): cond is read as bool, the others promoted. */
static bool where_formula(const kn__gnode *n, kn__ind_formula *f) {
  if (n->nargs != 3 || n->args[0].kind != KN__GA_TENSOR || !n->args[0].u.t.node) return false;
  const kn__vmeta *c = &n->args[0].u.t.node->meta[n->args[0].u.t.idx];
  kn__gnode tmp = *n; /* the value operands alone */
  tmp.args = n->args + 1;
  tmp.nargs = 2;
  kn_dtype pt;
  if (c->dtype != KN_BOOL || !promoted_type(&tmp, 2, &pt) || pt != n->meta[0].dtype) return false;
  f->ct = kn__ind_half(pt) ? KN_FLOAT32 : pt == KN_FLOAT32 || pt == KN_FLOAT64 || pt == KN_BOOL ? pt : KN_INT64;
  f->nopnds = 3;
  f->cond_first = true;
  f->tmpl = "(a ? b : c)";
  return true;
}

bool kn__ind_formula_for(const kn__gnode *n, kn__ind_formula *f) {
  memset(f, 0, sizeof *f);
  f->code = f->vm = -1;
  if (n->op != KN__GN_CALL || !n->opdef || n->nout != 1 || n->meta[0].kind != KN__V_TENSOR)
    return false;
  if (n->set_requires_grad) return false;
  if (!kn__ind_ctype(n->meta[0].dtype)) return false;
  if (n->meta[0].device != KN_CPU && n->meta[0].device != KN_CUDA) return false;
  kn__ind_lclass cls = kn__ind_lowering_of(n->opdef)->cls;
  switch (cls) {
  case KN__IND_L_FORMULA: return pointwise_formula(n, f);
  case KN__IND_L_SELECT: return where_formula(n, f);
  case KN__IND_L_CAST:
  case KN__IND_L_BROADCAST:
  case KN__IND_L_CONSTANT: return other_formula(n, cls, f);
  default: return false;
  }
}

/* ---- the vocabulary in generated code ---------------------------------------------- */

/* The vector-math table's layout (ops/vmath.h's kn__vmath; the eager-only
** members before expsum_f32 as placeholders of a function pointer's size,
** checked below), the binding of the table in use, and the macros that
** define one vector-math function:
** a scalar version, and vector versions under the names of the x86-64
** vector function ABI (_ZGV<isa>N<lanes><v...>_<name>: isa b SSE, c AVX,
** d AVX2, e AVX-512), each running the table's array function on its
** lanes in place (vector types alias their elements in gcc); the scalar
** version runs one element zero-padded to 64 bytes, a whole vector of every
** table. The scalar declaration carries `simd`, so gcc's vectoriser
** calls the vector versions from vectorised loops. The functions of the
** tables work lane by lane, so a lane's result does not depend on its
** neighbours: equal to the eager kernel's. */
_Static_assert(offsetof(kn__vmath, expsum_f32) ==
                   offsetof(kn__vmath, f64b) + sizeof(kn__vm2_f64[KN__VM_NBINARY]) +
                       3 * sizeof(void (*)(void)),
               "generated code's kn_vmtab places expsum_f32 where kn__vmath has it");
_Static_assert(offsetof(kn__vmath, rowmax_f32) ==
                   offsetof(kn__vmath, expsum_f32) + sizeof(kn__vm_expsum_f32),
               "generated code's kn_vmtab places rowmax_f32 where kn__vmath has it");
_Static_assert(offsetof(kn__vmath, expsum_max_f32) ==
                   offsetof(kn__vmath, rowmax_f32) + sizeof(kn__vm_rowmax_f32),
               "generated code's kn_vmtab places expsum_max_f32 where kn__vmath has it");
static const char vm_pragmas[] =
    "#pragma GCC diagnostic ignored \"-Wpsabi\"\n"
    "#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
    "#pragma GCC target(\"prefer-vector-width=512\")\n"
    "#endif\n";
static const char vm_table[] =
    "typedef struct kn_vmtab {\n"
    "  const char *name;\n"
    "  void (*f32[KN_VM_NU])(float *, const float *, int64_t);\n"
    "  void (*f64[KN_VM_NU])(double *, const double *, int64_t);\n"
    "  void (*f32b[KN_VM_NB])(float *, const float *, const float *, int64_t);\n"
    "  void (*f64b[KN_VM_NB])(double *, const double *, const double *, int64_t);\n"
    "  void (*softmax_f32)(void), (*softmax_bwd_f32)(void), (*softplus_f32)(void);\n"
    "  void (*expsum_f32)(float *, float *, const float *, float, int64_t, double *,\n"
    "                     const float *);\n"
    "  float (*rowmax_f32)(const float *, int64_t, int *);\n"
    "  void (*expsum_max_f32)(float *, float *, const float *, float, int64_t, double *,\n"
    "                         const float *);\n"
    "} kn_vmtab;\n"
    "#ifdef KN_TU_PART\n"
    "KN_HID extern const kn_vmtab *_Atomic kn_vmt;\n"
    "#if KN_TU_DEFS\n"
    "KN_HID const kn_vmtab *_Atomic kn_vmt;\n"
    "#endif\n"
    "#else\n"
    "static const kn_vmtab *_Atomic kn_vmt;\n"
    "#endif\n"
    "static inline void kn_vm_bind(const void *t) {\n"
    "  atomic_store_explicit(&kn_vmt, (const kn_vmtab *)t, memory_order_relaxed);\n"
    "}\n"
    "#define KN_VMT() atomic_load_explicit(&kn_vmt, memory_order_relaxed)\n"
    "/* one element runs as a whole vector of the widest table (64 bytes),\n"
    "** built in a register and stored whole: an array written element by\n"
    "** element and read back as one vector stalled the table's load */\n"
    "#define KN_VM_PAD(T) (64 / (int)sizeof(T))\n"
    "#define KN_VM_PADV(T, N) typedef T N __attribute__((vector_size(64), may_alias))\n";
/* `simd` on the scalar declarations (scalar targets: nothing). */
static const char vm_simd[] =
    "#if defined(__GNUC__) && !defined(__clang__)\n"
    "#define KN_SIMD __attribute__((simd(\"notinbranch\")))\n"
    "#else\n"
    "#define KN_SIMD\n"
    "#endif\n";
static const char vm_decl[] =
    "#define KN_VM_DECL(NAME, T, ...) \\\n"
    "  KN_HID KN_SIMD __attribute__((const, nothrow)) T NAME(__VA_ARGS__);\n";
/* The vector versions (scalar targets: none). */
static const char vm1_w[] =
    "#define KN_VM1_W(NAME, T, F, K, ISA, W) \\\n"
    "  typedef T NAME##_##ISA##_t __attribute__((vector_size(W * sizeof(T)), may_alias)); \\\n"
    "  KN_HID NAME##_##ISA##_t NAME##_##ISA(NAME##_##ISA##_t x) __asm__(\"_ZGV\" #ISA \"N\" #W \"v_\" #NAME); \\\n"
    "  NAME##_##ISA##_t NAME##_##ISA(NAME##_##ISA##_t x) { \\\n"
    "    NAME##_##ISA##_t y; \\\n"
    "    KN_VMT()->F[K]((T *)&y, (const T *)&x, W); \\\n"
    "    return y; \\\n"
    "  }\n";
static const char vm1[] =
    "#if !KN_TU_DEFS\n"
    "#define KN_VM1(NAME, T, F, K, W1, W2, W3) KN_VM_DECL(NAME, T, T)\n"
    "#else\n"
    "#define KN_VM1(NAME, T, F, K, W1, W2, W3) \\\n"
    "  KN_VM_DECL(NAME, T, T) \\\n"
    "  KN_HID T NAME##_s(T x) __asm__(#NAME); \\\n"
    "  T NAME##_s(T x) { \\\n"
    "    KN_VM_PADV(T, NAME##_pv); \\\n"
    "    NAME##_pv xs = {x}, ys; \\\n"
    "    KN_VMT()->F[K]((T *)&ys, (const T *)&xs, KN_VM_PAD(T)); \\\n"
    "    return ys[0]; \\\n"
    "  } \\\n"
    "  KN_VM1_W(NAME, T, F, K, b, W1) KN_VM1_W(NAME, T, F, K, c, W2) \\\n"
    "  KN_VM1_W(NAME, T, F, K, d, W2) KN_VM1_W(NAME, T, F, K, e, W3)\n"
    "#endif\n";
static const char vm2_w[] =
    "#define KN_VM2_W(NAME, T, F, K, ISA, W) \\\n"
    "  typedef T NAME##_##ISA##_t __attribute__((vector_size(W * sizeof(T)), may_alias)); \\\n"
    "  KN_HID NAME##_##ISA##_t NAME##_##ISA(NAME##_##ISA##_t a, NAME##_##ISA##_t b) \\\n"
    "      __asm__(\"_ZGV\" #ISA \"N\" #W \"vv_\" #NAME); \\\n"
    "  NAME##_##ISA##_t NAME##_##ISA(NAME##_##ISA##_t a, NAME##_##ISA##_t b) { \\\n"
    "    NAME##_##ISA##_t y; \\\n"
    "    KN_VMT()->F[K]((T *)&y, (const T *)&a, (const T *)&b, W); \\\n"
    "    return y; \\\n"
    "  }\n";
static const char vm2[] =
    "#if !KN_TU_DEFS\n"
    "#define KN_VM2(NAME, T, F, K, W1, W2, W3) KN_VM_DECL(NAME, T, T, T)\n"
    "#else\n"
    "#define KN_VM2(NAME, T, F, K, W1, W2, W3) \\\n"
    "  KN_VM_DECL(NAME, T, T, T) \\\n"
    "  KN_HID T NAME##_s(T a, T b) __asm__(#NAME); \\\n"
    "  T NAME##_s(T a, T b) { \\\n"
    "    KN_VM_PADV(T, NAME##_pv); \\\n"
    "    NAME##_pv as = {a}, bs = {b}, ys; \\\n"
    "    KN_VMT()->F[K]((T *)&ys, (const T *)&as, (const T *)&bs, KN_VM_PAD(T)); \\\n"
    "    return ys[0]; \\\n"
    "  } \\\n"
    "  KN_VM2_W(NAME, T, F, K, b, W1) KN_VM2_W(NAME, T, F, K, c, W2) \\\n"
    "  KN_VM2_W(NAME, T, F, K, d, W2) KN_VM2_W(NAME, T, F, K, e, W3)\n"
    "#endif\n";

/* The machinery: vector_abi false leaves out the pragmas, `simd` and the
** vector versions (their macros expand to nothing). */
static void vm_machinery(kn__sb *sb, bool vector_abi) {
  kn__sb_puts(sb, "#include <stdatomic.h>\n");
  if (vector_abi) kn__sb_puts(sb, vm_pragmas);
  kn__sb_puts(sb, vm_table);
  kn__sb_puts(sb, vector_abi ? vm_simd : "#define KN_SIMD\n");
  kn__sb_puts(sb, vm_decl);
  kn__sb_puts(sb, vector_abi ? vm1_w : "#define KN_VM1_W(NAME, T, F, K, ISA, W)\n");
  kn__sb_puts(sb, vm1);
  kn__sb_puts(sb, vector_abi ? vm2_w : "#define KN_VM2_W(NAME, T, F, K, ISA, W)\n");
  kn__sb_puts(sb, vm2);
}

/* One KN_VM1/KN_VM2 line for formula code in float type f64 (0: float). */
static void vm_function(kn__sb *sb, int code, int f64) {
  const kn__pwform *fm = kn__pw_form((kn__pwcode)code);
  const char *sfx = f64 ? "f64" : "f32";
  kn__sb_printf(sb, "KN_VM%d(kn_vm_%s_%s, %s, %s%s, %d, %s)\n", fm->nin, fm->name, sfx,
                f64 ? "double" : "float", sfx, fm->nin == 2 ? "b" : "", fm->vm,
                f64 ? "2, 4, 8" : "4, 8, 16");
}

kn_status kn__ind_formula_prelude(const kn__ind_plan *p, bool vector_abi, kn__sb *sb) {
  kn__sb_puts(sb, "/* the formulas' helpers (ops/pointwise_formulas.h) */\n");
  kn__sb_puts(sb, KN__PW_HELPERS_TEXT "\n" KN__PW_GENERIC_TEXT "\n");
  kn__sb_printf(sb, "/* vector math: the eager kernels' table */\n#define KN_VM_NU %d\n"
                "#define KN_VM_NB %d\n", (int)KN__VM_NUNARY, (int)KN__VM_NBINARY);
  vm_machinery(sb, vector_abi);
  bool used[KN__PW_NCODES][2] = {{false}};
  for (int i = 0; i < p->nnodes; i++) {
    const kn__ind_node *in = &p->nodes[i];
    if (in->kind == KN__IND_PW && in->f.vm >= 0 && in->f.code >= 0)
      used[in->f.code][in->f.ct == KN_FLOAT64] = true;
  }
  for (int c = 0; c < KN__PW_NCODES; c++)
    for (int d = 0; d < 2; d++)
      if (used[c][d]) vm_function(sb, c, d);
  kn__sb_puts(sb, "\n");
  return kn__sb_failed(sb) ? kn__oom() : KN_OK;
}
