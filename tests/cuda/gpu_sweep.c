/*
** tests/cuda/gpu_sweep.c: the code generator's CUDA kernels on a GPU
** against kiln's eager CPU ops. Each case is a kiln function traced on the
** CPU and compiled with the `cuda` target (NVRTC, the code cache), run on
** the device on the same inputs (gpu_prog.h) and compared with the eager
** CPU result: the unary formulas in float32 (a selection in float64), the
** binary ones in float32, bfloat16 and float16 (float32 also broadcast and
** with a transposed input), fused chains, reductions of every row of the
** reduction table over the last, the first and all dims (rows of 1000 and
** of 7), softmax, log_softmax, layer_norm (float32; float64 on one shape).
** About 150 programs, each compiled once (NVRTC and gcc). One line per
** case: "CUDA-CHECK sweep.<case> ok|FAIL <detail>" (a case whose graph
** keeps an extern step prints "CUDA-SKIP"), then the same function on CUDA
** tensors, eagerly ("sweep.<case>.eager_cuda": single-op graphs) and
** compiled by the "inductor" backend ("sweep.<case>.compiled_cuda"), each
** against the CPU; exit 1 on any FAIL, 77 without a CUDA driver or GPU.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda.h"
#include "gpu_check.h"
#include "gpu_prog.h"
#include "kiln/cuda.h"
#include "kiln/kiln.h"

/* ---- the cases ------------------------------------------------------------------------- */
typedef kn_tensor *(*fn1)(kn_tensor *);
typedef kn_tensor *(*fn2)(kn_tensor *, kn_tensor *);

typedef enum dom { ANY, POS, UNIT } dom; /* input domain: any, > 0, (-1, 1) */
typedef struct unary { const char *name; fn1 f; dom d; } unary;
typedef struct binary { const char *name; fn2 f; dom d; } binary;

static kn_tensor *gelu(kn_tensor *a) { return kn_gelu(a, KN_GELU_NONE); }
static kn_tensor *gelu_tanh(kn_tensor *a) { return kn_gelu(a, KN_GELU_TANH); }
static const unary unaries[] = {
    {"neg", kn_neg, ANY},     {"abs", kn_abs, ANY},       {"sgn", kn_sgn, ANY},
    {"reciprocal", kn_reciprocal, POS}, {"exp", kn_exp, ANY}, {"exp2", kn_exp2, ANY},
    {"log", kn_log, POS},     {"log2", kn_log2, POS},     {"log10", kn_log10, POS},
    {"log1p", kn_log1p, POS}, {"expm1", kn_expm1, ANY},   {"sqrt", kn_sqrt, POS},
    {"rsqrt", kn_rsqrt, POS}, {"sin", kn_sin, ANY},       {"cos", kn_cos, ANY},
    {"tan", kn_tan, UNIT},    {"tanh", kn_tanh, ANY},     {"sigmoid", kn_sigmoid, ANY},
    {"relu", kn_relu, ANY},   {"silu", kn_silu, ANY},     {"gelu", gelu, ANY},
    {"gelu_tanh", gelu_tanh, ANY}, {"erf", kn_erf, ANY},  {"erfc", kn_erfc, ANY},
    {"sinh", kn_sinh, ANY},   {"cosh", kn_cosh, ANY},     {"asin", kn_asin, UNIT},
    {"acos", kn_acos, UNIT},  {"atan", kn_atan, ANY},     {"round", kn_round, ANY},
    {"trunc", kn_trunc, ANY}, {"floor", kn_floor, ANY},   {"ceil", kn_ceil, ANY},
};
static kn_tensor *where_gt(kn_tensor *a, kn_tensor *b) { return kn_where(kn_gt(a, b), a, b); }
static kn_tensor *chain(kn_tensor *a, kn_tensor *b) {
  return kn_mul(kn_tanh(kn_add(kn_mul(a, b), a)), kn_sigmoid(kn_sub(b, a)));
}
static const binary binaries[] = {
    {"add", kn_add, ANY},         {"sub", kn_sub, ANY},         {"mul", kn_mul, ANY},
    {"div", kn_div, POS},         {"maximum", kn_maximum, ANY}, {"minimum", kn_minimum, ANY},
    {"pow", kn_pow, POS},         {"eq", kn_eq, ANY},           {"lt", kn_lt, ANY},
    {"ge", kn_ge, ANY},           {"where_gt", where_gt, ANY},  {"chain", chain, ANY},
};

static kn_tensor *input(dom d, int64_t r, int64_t c, kn_dtype dt) {
  kn_tensor *x = kn_randn(2, (int64_t[]){r, c}, NULL, KN_FLOAT32);
  if (d == POS) x = kn_add_scalar(kn_abs(x), kn_float(0.25));
  if (d == UNIT) x = kn_mul_scalar(kn_tanh(x), kn_float(0.95));
  return kn_contiguous(kn_to(x, dt));
}

/* Tolerance of a result of dtype dt (CUDA's math functions are within a few
** ulp of the eager vector-math tables; the 16-bit types round each node). */
static double tol(kn_dtype dt) {
  return dt == KN_FLOAT64 ? 1e-12 : dt == KN_FLOAT32 ? 2e-5 : dt == KN_BFLOAT16 ? 1.6e-2 : 2e-3;
}

/* got equals want within rtol = atol = t (NaNs at the same places). */
static bool close_to(kn_tensor *got, kn_tensor *want, double t, char *why, size_t n) {
  if (!got || kn_numel(got) != kn_numel(want) || kn_tensor_dtype(got) != kn_tensor_dtype(want)) {
    snprintf(why, n, "no result, or its size or dtype differs (%s)", got ? "" : kn_last_error());
    return false;
  }
  kn_tensor *g = kn_contiguous(kn_to(got, KN_FLOAT64)), *w = kn_contiguous(kn_to(want, KN_FLOAT64));
  const double *a = kn_data(g), *b = kn_data(w);
  for (int64_t i = 0; i < kn_numel(g); i++) {
    if ((isnan(a[i]) && isnan(b[i])) || a[i] == b[i]) continue;
    if (!(fabs(a[i] - b[i]) <= t + t * fabs(b[i]))) {
      snprintf(why, n, "element %lld: cuda %.17g, cpu %.17g", (long long)i, a[i], b[i]);
      return false;
    }
  }
  return true;
}

/* CUDA copies of in[n] into out (the caller's scope keeps them). */
static kn_status to_cuda(kn_tensor *const *in, int n, kn_tensor **out) {
  for (int i = 0; i < n; i++) {
    kn_status st = kn_to_device(in[i], KN_CUDA, &out[i]);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* A CUDA result back on the host (NULL passes through). */
static kn_tensor *to_host(kn_tensor *t) {
  kn_tensor *h = NULL;
  return t && kn_to_device(t, KN_CPU, &h) == KN_OK ? h : NULL;
}

static kn_tensor *call_fn(void (*fn)(void), int nargs, kn_tensor *const *in) {
  if (nargs == 1) return ((fn1)fn)(in[0]);
  return ((fn2)fn)(in[0], in[1]);
}

/* The same function on CUDA tensors: eagerly (each op a compiled single-op
** graph, or the ops layer's own kernels) and compiled by the "inductor"
** backend (the graph's inputs on CUDA: the cuda target). */
static void run_on_cuda_tensors(const char *check, void (*fn)(void), int nargs,
                                kn_tensor *const *in, kn_tensor *want) {
  char name[200], why[400] = "";
  kn_tensor *cin[2] = {0};
  kn_status st = to_cuda(in, nargs, cin);
  kn_tensor *got = st == KN_OK ? to_host(call_fn(fn, nargs, cin)) : NULL;
  if (!got) snprintf(why, sizeof why, "%s", kn_last_error());
  snprintf(name, sizeof name, "%s.eager_cuda", check);
  CHECK(name, got && close_to(got, want, tol(kn_tensor_dtype(want)), why, sizeof why), "%s", why);
  kn_compiled *f = st == KN_OK ? kn_compile_tensor_fn(fn, nargs, check, __FILE__, __LINE__,
                                                      &(kn_compile_options){.backend = "inductor",
                                                                            .fullgraph = true})
                               : NULL;
  got = f ? to_host(kn_call_tensors(f, cin, nargs)) : NULL;
  why[0] = 0;
  if (!got) snprintf(why, sizeof why, "%s", kn_last_error());
  snprintf(name, sizeof name, "%s.compiled_cuda", check);
  CHECK(name, got && close_to(got, want, tol(kn_tensor_dtype(want)), why, sizeof why), "%s", why);
  kn_compiled_free(f);
}

/* Build, run and compare one case. */
static void run_case(const char *name, void (*fn)(void), int nargs, kn_tensor *const *in,
                     kn_tensor *want) {
  char check[160], why[400] = "";
  snprintf(check, sizeof check, "sweep.%s", name);
  gpu_prog p;
  kn_status st = gpu_prog_build(fn, nargs, in, &p);
  if (st == KN_OK && p.plan.nsteps > 0) {
    printf("CUDA-SKIP %s: %d extern step(s) (%s): needs eager CUDA ops\n", check, p.plan.nsteps,
           p.plan.step_node[0]->target);
    gpu_prog_free(&p);
    return;
  }
  gpu_run r = {0};
  if (st == KN_OK) st = gpu_run_begin(&p, in, nargs, &r);
  if (st == KN_OK) st = gpu_run_call(&r);
  if (st == KN_OK) st = kn__cuda_synchronize();
  kn_tensor *got = st == KN_OK ? gpu_run_output(&r, 0) : NULL;
  if (st != KN_OK) snprintf(why, sizeof why, "%s", kn_last_error());
  bool ok = st == KN_OK && close_to(got, want, tol(kn_tensor_dtype(want)), why, sizeof why);
  CHECK(check, ok, "%s", why);
  if (got) kn_release(got);
  gpu_run_end(&r);
  gpu_prog_free(&p);
  run_on_cuda_tensors(check, fn, nargs, in, want);
}

static const char *dt_name(kn_dtype dt) {
  return dt == KN_FLOAT64 ? "f64" : dt == KN_FLOAT32 ? "f32" : dt == KN_BFLOAT16 ? "bf16" : "f16";
}

/* every formula in float32; in float64 those whose CUDA math differs most */
static bool in_f64(const char *name) {
  static const char *const some[] = {"exp", "log", "tanh", "erf", "sigmoid", "gelu", "sqrt", "sin"};
  for (size_t i = 0; i < sizeof some / sizeof some[0]; i++)
    if (!strcmp(name, some[i])) return true;
  return false;
}

static void sweep_unary(kn_dtype dt) {
  for (size_t i = 0; i < sizeof unaries / sizeof unaries[0]; i++) {
    if (dt == KN_FLOAT64 && !in_f64(unaries[i].name)) continue;
    kn_scope_begin();
    const unary *u = &unaries[i];
    kn_tensor *x = input(u->d, 64, 1000, dt);
    char name[96];
    snprintf(name, sizeof name, "%s.%s", u->name, dt_name(dt));
    run_case(name, (void (*)(void))u->f, 1, (kn_tensor *[]){x}, u->f(x));
    kn_scope_end();
  }
}

static void sweep_binary(kn_dtype dt) {
  for (size_t i = 0; i < sizeof binaries / sizeof binaries[0]; i++) {
    kn_scope_begin();
    const binary *b = &binaries[i];
    kn_tensor *x = input(b->d, 64, 1000, dt), *y = input(b->d, 64, 1000, dt);
    char name[96];
    snprintf(name, sizeof name, "%s.%s", b->name, dt_name(dt));
    run_case(name, (void (*)(void))b->f, 2, (kn_tensor *[]){x, y}, b->f(x, y));
    if (dt != KN_FLOAT32) { /* the layouts once, in float32 */
      kn_scope_end();
      continue;
    }
    /* broadcast: a column against a row; strided: a transposed input */
    kn_tensor *col = input(b->d, 64, 1, dt), *row = input(b->d, 1, 1000, dt);
    snprintf(name, sizeof name, "%s.%s.broadcast", b->name, dt_name(dt));
    run_case(name, (void (*)(void))b->f, 2, (kn_tensor *[]){col, row}, b->f(col, row));
    kn_tensor *t = kn_transpose(input(b->d, 1000, 64, dt), 0, 1);
    snprintf(name, sizeof name, "%s.%s.transposed", b->name, dt_name(dt));
    run_case(name, (void (*)(void))b->f, 2, (kn_tensor *[]){t, y}, b->f(t, y));
    kn_scope_end();
  }
}

/* ---- reductions -------------------------------------------------------------------------- */
static kn_tensor *sum_last(kn_tensor *x) { return kn_sum_dims(x, (int64_t[]){1}, 1, false); }
static kn_tensor *sum_first(kn_tensor *x) { return kn_sum_dims(x, (int64_t[]){0}, 1, false); }
static kn_tensor *sum_all(kn_tensor *x) { return kn_sum(x); }
static kn_tensor *mean_last(kn_tensor *x) { return kn_mean_dims(x, (int64_t[]){1}, 1, true); }
static kn_tensor *prod_last(kn_tensor *x) { return kn_prod_dim(x, 1, false); }
static kn_tensor *amax_last(kn_tensor *x) { return kn_amax(x, (int64_t[]){1}, 1, false); }
static kn_tensor *amin_first(kn_tensor *x) { return kn_amin(x, (int64_t[]){0}, 1, false); }
static kn_tensor *argmax_last(kn_tensor *x) { return kn_argmax_dim(x, 1, false); }
static kn_tensor *argmin_first(kn_tensor *x) { return kn_argmin_dim(x, 0, false); }
static kn_tensor *var_last(kn_tensor *x) { return kn_var(x, (int64_t[]){1}, 1, 1, false); }
static kn_tensor *std_first(kn_tensor *x) { return kn_std(x, (int64_t[]){0}, 1, 0, false); }
static kn_tensor *softmax_last(kn_tensor *x) { return kn_softmax(x, 1); }
static kn_tensor *log_softmax_last(kn_tensor *x) { return kn_log_softmax(x, 1); }
static kn_tensor *softmax_first(kn_tensor *x) { return kn_softmax(x, 0); }
static kn_tensor *layer_norm(kn_tensor *x) {
  return kn_layer_norm(x, 1, (int64_t[]){kn_size(x, 1)}, NULL, NULL, 1e-5);
}
static kn_tensor *sum_exp_scaled(kn_tensor *x) { /* fused prologue and epilogue */
  return kn_mul_scalar(sum_last(kn_exp(kn_mul_scalar(x, kn_float(0.5)))), kn_float(3));
}
static const unary reductions[] = {
    {"sum_last", sum_last, ANY},       {"sum_first", sum_first, ANY},
    {"sum_all", sum_all, ANY},         {"mean_last", mean_last, ANY},
    {"prod_last", prod_last, UNIT},    {"amax_last", amax_last, ANY},
    {"amin_first", amin_first, ANY},   {"argmax_last", argmax_last, ANY},
    {"argmin_first", argmin_first, ANY}, {"var_last", var_last, ANY},
    {"std_first", std_first, ANY},     {"softmax_last", softmax_last, ANY},
    {"log_softmax_last", log_softmax_last, ANY}, {"softmax_first", softmax_first, ANY},
    {"layer_norm", layer_norm, ANY},   {"sum_exp_scaled", sum_exp_scaled, ANY},
};

static void sweep_reductions(kn_dtype dt) {
  /* rows of 1000 and of 7 (fewer than a warp), 64 and 3000 of them; float64
  ** the first shape only */
  const int64_t shapes[][2] = {{64, 1000}, {3000, 7}};
  for (size_t i = 0; i < sizeof reductions / sizeof reductions[0]; i++)
    for (int s = 0; s < (dt == KN_FLOAT64 ? 1 : 2); s++) {
      kn_scope_begin();
      const unary *u = &reductions[i];
      kn_tensor *x = input(u->d, shapes[s][0], shapes[s][1], dt);
      if (!strcmp(u->name, "prod_last")) x = kn_add_scalar(x, kn_float(1.0)); /* no underflow */
      char name[96];
      snprintf(name, sizeof name, "%s.%s.%lldx%lld", u->name, dt_name(dt),
               (long long)shapes[s][0], (long long)shapes[s][1]);
      run_case(name, (void (*)(void))u->f, 1, (kn_tensor *[]){x}, u->f(x));
      kn_scope_end();
    }
}

int main(void) {
  if (kn__cuda_init() != KN_OK) {
    printf("SKIP: %s\n", kn_last_error());
    return strstr(kn_last_error(), "no CUDA driver/GPU found") ? 77 : 1;
  }
  printf("device: %s, sm_%d\n", kn__cuda_device_name(), kn__cuda_arch());
  kn_manual_seed(5);
  sweep_unary(KN_FLOAT32);
  sweep_binary(KN_FLOAT32);
  sweep_reductions(KN_FLOAT32);
  sweep_reductions(KN_FLOAT64);
  sweep_unary(KN_FLOAT64);
  sweep_binary(KN_BFLOAT16);
  sweep_binary(KN_FLOAT16);
  return kn__gpu_check_summary("gpu_sweep");
}
