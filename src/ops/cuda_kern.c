/*
** ops/cuda_kern.c: copies and fills of CUDA tensors. A strided copy (with
** dtype conversion and broadcasting) or fill runs as a small CUDA kernel
** compiled with NVRTC the first time a process needs it (one module per
** pair of dtypes for copies, one for fills) and kept for the process; a
** contiguous copy of one dtype is a plain device-to-device memcpy, and
** copies between host and device go through a contiguous staging tensor.
**
** _nll_loss_target (the checking part of nll_loss's decomposition) is one
** more such kernel: a target out of bounds is a device-side check
** (cuda/devcheck.c), reported at the next synchronisation. native_dropout
** and its backward are two more (one module per dtype): the mask comes
** from the same Philox blocks of the generator as on the CPU
** (ops/nn_misc.c), so a seed gives the same mask on either device.
**
** Conversions follow kiln's CPU kernels: integers convert through int64,
** anything involving a floating type through double (float16 and bfloat16
** round to nearest even from float), bool is x != 0.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "cuda/cuda.h"
#include "kiln/cuda.h"
#include "ops/cuda_ops.h"
#include "ops/iter.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

/* The geometry a kernel walks (same layout in the CUDA source below). */
typedef struct geom {
  long long n;
  int nd;
  long long size[KN_MAX_DIMS];
  long long ss[KN_MAX_DIMS]; /* source strides (elements) */
  long long ds[KN_MAX_DIMS]; /* destination strides */
} geom;

static const char *prelude =
    "#define KN_MAX_DIMS 8\n"
    "struct geom { long long n; int nd; long long size[KN_MAX_DIMS];\n"
    "  long long ss[KN_MAX_DIMS]; long long ds[KN_MAX_DIMS]; };\n"
    "#ifndef KN_CUDA_SHIM\n"
    "__device__ float kn_h2f(unsigned short h) { float f;\n"
    "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
    "__device__ unsigned short kn_f2h(float f) { unsigned short h;\n"
    "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "#else /* the host shim of the tests: the same conversions in bits */\n"
    "static float kn_h2f(unsigned short h) { unsigned e = (h >> 10) & 31u, m = h & 1023u;\n"
    "  float f = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)\n"
    "          : ldexpf((float)(m | 1024u), (int)e - 25); return (h & 0x8000u) ? -f : f; }\n"
    "static unsigned short kn_f2h(float f) { unsigned u = __float_as_uint(f);\n"
    "  unsigned short s = (unsigned short)((u >> 16) & 0x8000u); u &= 0x7fffffffu;\n"
    "  if (u > 0x7f800000u) return s | 0x7e00u;\n"
    "  if (u >= 0x477ff000u) return s | 0x7c00u;\n"
    "  if (u < 0x38800000u) return s | (unsigned short)nearbyintf(__uint_as_float(u) * 16777216.0f);\n"
    "  u -= 0x38000000u; return s | (unsigned short)((u + 0xfffu + ((u >> 13) & 1u)) >> 13); }\n"
    "#endif\n"
    "__device__ float kn_b2f(unsigned short b) { return __uint_as_float((unsigned)b << 16); }\n"
    "__device__ unsigned short kn_f2b(float f) { unsigned u = __float_as_uint(f);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
    "  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }\n"
    "#define KN_LOOP_T(T, BODY) \\\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < g.n;\\\n"
    "       i += (long long)gridDim.x * blockDim.x) { T r = (T)i; long long so = 0, dof = 0;\\\n"
    "    for (int d = g.nd - 1; d >= 0; d--) { T c = r % (T)g.size[d]; r /= (T)g.size[d];\\\n"
    "      so += (long long)c * g.ss[d]; dof += (long long)c * g.ds[d]; } BODY; }\n"
    "/* 32-bit index arithmetic when the count allows (64-bit division is slow) */\n"
    "#define KN_LOOP(BODY) \\\n"
    "  if (g.n <= 0xffffffffLL) { KN_LOOP_T(unsigned, BODY) } else { KN_LOOP_T(long long, BODY) }\n";

/* The C type, the kind and the load/store expressions of each dtype. */
static const char *ctype(kn_dtype dt) {
  static const char *const t[] = {"unsigned char", "unsigned char", "signed char", "short", "int",
                                  "long long", "unsigned short", "unsigned short", "float",
                                  "double"};
  return t[dt];
}

static bool is_float(kn_dtype dt) {
  return dt == KN_FLOAT16 || dt == KN_BFLOAT16 || dt == KN_FLOAT32 || dt == KN_FLOAT64;
}

/* The expression converting src element `x` (named by the macro) to the
** destination's C type. */
static void convert_expr(kn__sb *sb, kn_dtype sd, kn_dtype dd) {
  if (sd == dd) {
    kn__sb_puts(sb, "x");
    return;
  }
  const char *wide = is_float(sd) || is_float(dd) ? "double" : "long long";
  char load[64];
  if (sd == KN_FLOAT16) snprintf(load, sizeof load, "(%s)kn_h2f(x)", wide);
  else if (sd == KN_BFLOAT16) snprintf(load, sizeof load, "(%s)kn_b2f(x)", wide);
  else snprintf(load, sizeof load, "(%s)x", wide);
  if (dd == KN_BOOL) kn__sb_printf(sb, "(unsigned char)(%s != 0)", load);
  else if (dd == KN_FLOAT16) kn__sb_printf(sb, "kn_f2h((float)%s)", load);
  else if (dd == KN_BFLOAT16) kn__sb_printf(sb, "kn_f2b((float)%s)", load);
  else kn__sb_printf(sb, "(%s)%s", ctype(dd), load);
}

typedef struct kernel_cache {
  kn__cuda_module *mod;
  void *fn;
} kernel_cache;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static kernel_cache copies[KN_DTYPE_COUNT][KN_DTYPE_COUNT]; /* under cache_mu */
static kernel_cache fills[4];                               /* by log2 element size */
static kernel_cache nll_target;                             /* _nll_loss_target */
static kernel_cache dropouts[KN_DTYPE_COUNT][2];            /* native_dropout, its backward */

/* Compile src, load it and find kernel name into *k (cache_mu held). */
static kn_status build(const char *src, const char *file, const char *name, kernel_cache *k) {
  void *image = NULL;
  size_t n = 0;
  kn_status s = kn__cuda_compile(src, file, NULL, &image, &n, NULL, NULL);
  if (s == KN_OK) s = kn__cuda_module_load(image, n, &k->mod);
  free(image);
  if (s == KN_OK) s = kn__cuda_module_fn(k->mod, name, &k->fn);
  if (s == KN_OK) kn__cuda_prof_name(k->fn, file); /* KILN_CUDA_PROFILE's name */
  if (s != KN_OK) {
    kn__cuda_module_unload(k->mod);
    k->mod = NULL;
    k->fn = NULL;
  }
  return s;
}

/* The kernel of cache slot k, built on first use from the source gen
** writes after the prelude (gen(sb, ud)) into file's module; *fn is it. */
typedef void (*src_fn)(kn__sb *sb, const void *ud);

static kn_status cached(kernel_cache *k, src_fn gen, const void *ud, const char *file,
                        const char *name, void **fn) {
  pthread_mutex_lock(&cache_mu);
  kn_status s = KN_OK;
  if (!k->fn) {
    kn__sb sb;
    kn__sb_init(&sb);
    kn__sb_puts(&sb, prelude);
    gen(&sb, ud);
    s = kn__sb_failed(&sb) ? kn__oom() : build(kn__sb_cstr(&sb), file, name, k);
    kn__sb_fini(&sb);
  }
  *fn = k->fn;
  pthread_mutex_unlock(&cache_mu);
  return s;
}

typedef struct dtype_pair { kn_dtype sd, dd; } dtype_pair;

static void copy_src(kn__sb *sb, const void *ud) {
  const dtype_pair *d = ud;
  kn__sb_printf(sb, "extern \"C\" __global__ void kn_copy(const %s *src, %s *dst, geom g) {\n"
                    "  KN_LOOP({ %s x = src[so]; dst[dof] = ",
                ctype(d->sd), ctype(d->dd), ctype(d->sd));
  convert_expr(sb, d->sd, d->dd);
  kn__sb_puts(sb, "; })\n}\n");
}

static kn_status copy_kernel(kn_dtype sd, kn_dtype dd, void **fn) {
  char file[64];
  snprintf(file, sizeof file, "kiln_copy_%s_%s.cu", kn_dtype_name(sd), kn_dtype_name(dd));
  dtype_pair d = {sd, dd};
  return cached(&copies[sd][dd], copy_src, &d, file, "kn_copy", fn);
}

static const char *const fill_types[] = {"unsigned char", "unsigned short", "unsigned int",
                                         "unsigned long long"};

static void fill_src(kn__sb *sb, const void *ud) {
  const char *t = fill_types[*(const int *)ud];
  kn__sb_printf(sb, "extern \"C\" __global__ void kn_fill(%s *dst, %s v, geom g) {\n"
                    "  KN_LOOP({ (void)so; dst[dof] = v; })\n}\n", t, t);
}

static kn_status fill_kernel(size_t es, void **fn) {
  int l = es == 1 ? 0 : es == 2 ? 1 : es == 4 ? 2 : 3;
  char file[32];
  snprintf(file, sizeof file, "kiln_fill_%zu.cu", es);
  return cached(&fills[l], fill_src, &l, file, "kn_fill", fn);
}

static void launch_dims(long long n, unsigned grid[3], unsigned block[3]) {
  long long blocks = (n + 255) / 256, cap = (long long)kn__cuda_sm_count() * 32;
  if (cap < 1) cap = 1;
  grid[0] = (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
  grid[1] = grid[2] = 1;
  block[0] = 256;
  block[1] = block[2] = 1;
}

/* dst's geometry, with src broadcast to it (src may be NULL). */
static void make_geom(const kn_tensor *dst, const kn_tensor *src, geom *g) {
  memset(g, 0, sizeof *g);
  g->n = kn__numel(dst->ndim, dst->sizes);
  g->nd = dst->ndim;
  int off = src ? dst->ndim - src->ndim : 0;
  for (int d = 0; d < dst->ndim; d++) {
    g->size[d] = dst->sizes[d];
    g->ds[d] = dst->strides[d];
    int sdim = d - off;
    g->ss[d] = src && sdim >= 0 && src->sizes[sdim] != 1 ? src->strides[sdim] : 0;
  }
}

static bool dense_same(const kn_tensor *dst, const kn_tensor *src) {
  if (dst->dtype != src->dtype || dst->ndim != src->ndim) return false;
  for (int d = 0; d < dst->ndim; d++)
    if (dst->sizes[d] != src->sizes[d]) return false;
  return kn_is_contiguous(dst) && kn_is_contiguous(src);
}

/* Both on the device. */
static kn_status device_copy(kn_tensor *dst, const kn_tensor *src) {
  geom g;
  make_geom(dst, src, &g);
  if (g.n == 0) return KN_OK;
  void *d = kn_cuda_data_ptr(dst), *s = kn_cuda_data_ptr(src);
  if (dense_same(dst, src))
    return kn__cuda_memcpy(d, KN_CUDA, s, KN_CUDA, (size_t)g.n * kn_dtype_size(dst->dtype));
  void *fn = NULL;
  kn_status st = copy_kernel(src->dtype, dst->dtype, &fn);
  if (st != KN_OK) return st;
  unsigned grid[3], block[3];
  launch_dims(g.n, grid, block);
  void *args[] = {&s, &d, &g};
  return kn__cuda_launch(fn, grid, block, 0, args);
}

static kn_status check_broadcast(const kn_tensor *dst, const kn_tensor *src) {
  bool ok = src->ndim <= dst->ndim;
  for (int d = 0; ok && d < src->ndim; d++) {
    int64_t s = src->sizes[d], t = dst->sizes[dst->ndim - src->ndim + d];
    ok = s == t || s == 1;
  }
  if (ok) return KN_OK;
  char a[160], b[160];
  kn__format_sizes(src->ndim, src->sizes, a, sizeof a);
  kn__format_sizes(dst->ndim, dst->sizes, b, sizeof b);
  return kn__error(KN_ESHAPE, "copy: the source of sizes %s cannot be broadcast to %s", a, b);
}

/* Host to device: the source, broadcast and converted, staged contiguous on
** the host, uploaded, then copied into dst's strides when they differ. */
static kn_status upload(kn_tensor *dst, const kn_tensor *src) {
  kn_tensor *host = kn__empty(dst->ndim, dst->sizes, dst->dtype, KN_CPU);
  kn_status st = host ? kn__copy_into(host, src) : kn_last_status();
  size_t bytes = host ? (size_t)kn__numel(dst->ndim, dst->sizes) * kn_dtype_size(dst->dtype) : 0;
  if (st == KN_OK && kn_is_contiguous(dst)) {
    st = kn__cuda_memcpy(kn_cuda_data_ptr(dst), KN_CUDA, kn_data(host), KN_CPU, bytes);
  } else if (st == KN_OK) {
    kn_tensor *stage = kn__empty(dst->ndim, dst->sizes, dst->dtype, KN_CUDA);
    st = stage ? kn__cuda_memcpy(kn_cuda_data_ptr(stage), KN_CUDA, kn_data(host), KN_CPU, bytes)
               : kn_last_status();
    if (st == KN_OK) st = device_copy(dst, stage);
    kn_release(stage);
  }
  kn_release(host);
  return st;
}

kn_status kn__cuda_copy_into(kn_tensor *dst, const kn_tensor *src) {
  kn_status st = check_broadcast(dst, src);
  if (st != KN_OK || kn__numel(dst->ndim, dst->sizes) == 0) return st;
  bool dc = kn__tensor_on_cuda(dst), sc = kn__tensor_on_cuda(src);
  if (dc && sc) return device_copy(dst, src);
  if (dc) return upload(dst, src);
  if (!sc) return kn__copy_into(dst, src);
  /* device to host: the elements src reaches, then a host copy */
  kn_tensor *h = kn__tensor_host_copy(src);
  if (!h) return kn_last_status();
  st = kn__copy_into(dst, h);
  kn_release(h);
  return st;
}

kn_status kn__cuda_fill(kn_tensor *dst, const void *value) {
  geom g;
  make_geom(dst, NULL, &g);
  if (g.n == 0) return KN_OK;
  size_t es = kn_dtype_size(dst->dtype);
  void *d = kn_cuda_data_ptr(dst);
  unsigned long long bits = 0; /* little-endian: the kernel reads the low es bytes */
  memcpy(&bits, value, es);
  if (bits == 0 && kn_is_contiguous(dst)) return kn__cuda_memset0(d, (size_t)g.n * es);
  void *fn = NULL;
  kn_status st = fill_kernel(es, &fn);
  if (st != KN_OK) return st;
  unsigned grid[3], block[3];
  launch_dims(g.n, grid, block);
  void *args[] = {&d, &bits, &g};
  return kn__cuda_launch(fn, grid, block, 0, args);
}

kn_tensor *kn__cuda_contiguous(const kn_tensor *t, kn_dtype dt) {
  kn_tensor *r = kn__empty(t->ndim, t->sizes, dt, KN_CUDA);
  if (r && device_copy(r, t) != KN_OK) {
    kn_release(r);
    return NULL;
  }
  return r;
}

/* ---- _nll_loss_target -------------------------------------------------------------- */
static const char nll_src[] =
    "extern \"C\" __global__ void kn_nll_target(const long long *t, long long *dst,\n"
    "    long long *cls, long long n, long long ncls, long long ignore,\n"
    "    unsigned long long *slot) {\n"
    "  const long long m = n > ncls ? n : ncls;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < m;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    if (i < ncls) cls[i] = i;\n"
    "    if (i >= n) continue;\n"
    "    const long long v = t[i];\n"
    "    const bool bad = v != ignore && (v < 0 || v >= ncls);\n"
    "    dst[i] = v == ignore || bad ? -1 : v;\n"
    "    if (bad && atomicCAS(slot, 0ull, 1ull) == 0ull) slot[1] = (unsigned long long)v;\n"
    "  }\n"
    "}\n";

static kn_status nll_kernel(void **fn) {
  pthread_mutex_lock(&cache_mu);
  kn_status s = nll_target.fn ? KN_OK : build(nll_src, "kiln_nll_target.cu", "kn_nll_target",
                                              &nll_target);
  *fn = nll_target.fn;
  pthread_mutex_unlock(&cache_mu);
  return s;
}

/* _nll_loss_target(target, size, ignore_index) on the device: the checked
** target (ignored rows -1) and the class indices, as the CPU kernel
** (ops/loss_nll.c) makes them; a target outside [0, C) fails at the next
** synchronisation ("Target 12 is out of bounds."). */
kn_status kn__cuda_k_nll_target(const kn__call *c, kn__outs *out) {
  int nd = c->args[1].u.ints.n;
  long long ncls = c->args[1].u.ints.v[nd >= 2 ? 1 : 0], ignore = c->args[2].u.i;
  kn_tensor *t = kn__cuda_contiguous(c->args[0].u.t, KN_INT64);
  if (!t) return kn_last_status();
  long long n = kn__numel(t->ndim, t->sizes), m = n > ncls ? n : ncls;
  void *fn = NULL, *slot = NULL;
  kn_status st = m > 0 ? nll_kernel(&fn) : KN_OK;
  if (st == KN_OK && m > 0) st = kn__cuda_check_slot(&slot);
  if (st == KN_OK && m > 0) {
    void *tp = kn_cuda_data_ptr(t), *dp = kn_cuda_data_ptr(out->t[0]),
         *cp = kn_cuda_data_ptr(out->t[1]);
    unsigned grid[3], block[3];
    launch_dims(m, grid, block);
    void *args[] = {&tp, &dp, &cp, &n, &ncls, &ignore, &slot};
    st = kn__cuda_launch(fn, grid, block, 0, args);
  }
  kn_release(t);
  return st;
}

/* ---- native_dropout and its backward ----------------------------------------------- */
/* Philox4x32-10 as tensor/random.c computes it (the high and low words of
** the products without __umulhi, so the tests' host shim runs it too), and
** the CPU kernel's rule per element: kept when the 24-bit uniform of its
** word is below 1 - p, then x * scale in double, stored in the dtype. */
static const char dropout_src[] =
    "__device__ void kn_philox(unsigned long long seed, unsigned long long ctr, unsigned r[4]) {\n"
    "  unsigned c0 = (unsigned)ctr, c1 = (unsigned)(ctr >> 32), c2 = 0, c3 = 0;\n"
    "  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);\n"
    "  for (int i = 0; i < 10; i++) {\n"
    "    unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;\n"
    "    unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1;\n"
    "    c0 = n0; c1 = (unsigned)p1; c2 = n2; c3 = (unsigned)p0;\n"
    "    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;\n"
    "  }\n"
    "  r[0] = c0; r[1] = c1; r[2] = c2; r[3] = c3;\n"
    "}\n"
    "extern \"C\" __global__ void kn_dropout(const T *x, T *o, unsigned char *m, long long n,\n"
    "    unsigned long long seed, unsigned long long first, float keep, double scale, int train) {\n"
    "  for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < (n + 3) / 4;\n"
    "       b += (long long)gridDim.x * blockDim.x) {\n"
    "    unsigned r[4] = {0, 0, 0, 0};\n"
    "    if (train) kn_philox(seed, first + (unsigned long long)b, r);\n"
    "    for (int k = 0; k < 4 && b * 4 + k < n; k++) {\n"
    "      const long long i = b * 4 + k;\n"
    "      const bool kept = !train || (float)(r[k] >> 8) * (1.0f / 16777216.0f) < keep;\n"
    "      m[i] = kept;\n"
    "      o[i] = ST(kept ? LD(x[i]) * (train ? scale : 1.0) : 0.0);\n"
    "    }\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void kn_dropout_bw(const T *g, const unsigned char *m, T *o,\n"
    "    long long n, double scale) {\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x)\n"
    "    o[i] = ST(m[i] ? LD(g[i]) * scale : 0.0);\n"
    "}\n";

static void dropout_src_of(kn__sb *sb, const void *ud) {
  static const char *const ld[] = {[KN_FLOAT16] = "(double)kn_h2f(v)",
                                   [KN_BFLOAT16] = "(double)kn_b2f(v)",
                                   [KN_FLOAT32] = "(double)(v)", [KN_FLOAT64] = "(v)"};
  static const char *const st[] = {[KN_FLOAT16] = "kn_f2h((float)(v))",
                                   [KN_BFLOAT16] = "kn_f2b((float)(v))",
                                   [KN_FLOAT32] = "(float)(v)", [KN_FLOAT64] = "(v)"};
  kn_dtype dt = *(const kn_dtype *)ud;
  kn__sb_printf(sb, "typedef %s T;\n#define LD(v) %s\n#define ST(v) %s\n", ctype(dt), ld[dt],
                st[dt]);
  kn__sb_puts(sb, dropout_src);
}

/* The dropout kernel of dtype dt (backward: its backward's), built once. */
static kn_status dropout_kernel(kn_dtype dt, bool backward, void **fn) {
  char file[64];
  snprintf(file, sizeof file, "kiln_dropout%s_%s.cu", backward ? "_backward" : "",
           kn_dtype_name(dt));
  return cached(&dropouts[dt][backward], dropout_src_of, &dt, file,
                backward ? "kn_dropout_bw" : "kn_dropout", fn);
}

/* Run kernel fn over n elements with args, then copy each contiguous
** temporary tmp[j] into the output it stands for (outputs that are not
** contiguous). */
static kn_status launch_into(void *fn, long long n, void **args, kn_tensor **tmp,
                             kn__outs *out) {
  unsigned grid[3], block[3];
  launch_dims(n, grid, block);
  kn_status st = n > 0 ? kn__cuda_launch(fn, grid, block, 0, args) : KN_OK;
  for (int j = 0; j < out->n; j++)
    if (tmp[j] != out->t[j]) {
      if (st == KN_OK) st = device_copy(out->t[j], tmp[j]);
      kn_release(tmp[j]);
    }
  return st;
}

/* out->t[j], or a contiguous temporary of its sizes (owned) when it is not
** contiguous; NULL on OOM. */
static kn_tensor *dense_out(kn__outs *out, int j) {
  kn_tensor *t = out->t[j];
  return kn_is_contiguous(t) ? t : kn__empty(t->ndim, t->sizes, t->dtype, KN_CUDA);
}

static kn_status dropout_args_check(kn_dtype dt) {
  if (dt == KN_FLOAT16 || dt == KN_BFLOAT16 || dt == KN_FLOAT32 || dt == KN_FLOAT64) return KN_OK;
  return kn__error(KN_EDTYPE, "dropout: expected a floating point input, got %s",
                   kn_dtype_name(dt));
}

/* native_dropout(input, p, train, generator) on the device: the output and
** its mask, the generator's Philox blocks reserved as on the CPU. */
kn_status kn__cuda_k_dropout(const kn__call *c, kn__outs *out) {
  kn_status st = dropout_args_check(c->args[0].u.t->dtype);
  kn_tensor *x = st == KN_OK ? kn__cuda_contiguous(c->args[0].u.t, c->args[0].u.t->dtype) : NULL;
  if (!x) return kn_last_status();
  double p = c->args[1].u.d, scale = p >= 1 ? 0.0 : 1.0 / (1.0 - p);
  int train = c->args[2].kind != KN__A_BOOL || c->args[2].u.b;
  kn_generator *gen = kn__generator_or_default(c->args[3].kind == KN__A_GEN ? c->args[3].u.gen : NULL);
  long long n = kn__numel(x->ndim, x->sizes);
  unsigned long long seed = gen->seed, first = train && n > 0
      ? kn__generator_reserve(gen, (uint64_t)((n + 3) / 4)) : 0;
  float keep = (float)(1.0 - p);
  void *fn = NULL;
  kn_tensor *tmp[2] = {dense_out(out, 0), dense_out(out, 1)};
  if (!tmp[0] || !tmp[1]) st = kn__oom();
  if (st == KN_OK && n > 0) st = dropout_kernel(x->dtype, false, &fn);
  void *xp = kn_cuda_data_ptr(x), *op = tmp[0] ? kn_cuda_data_ptr(tmp[0]) : NULL,
       *mp = tmp[1] ? kn_cuda_data_ptr(tmp[1]) : NULL;
  void *args[] = {&xp, &op, &mp, &n, &seed, &first, &keep, &scale, &train};
  if (st == KN_OK) st = launch_into(fn, n, args, tmp, out);
  else for (int j = 0; j < 2; j++) if (tmp[j] != out->t[j]) kn_release(tmp[j]);
  kn_release(x);
  return st;
}

/* native_dropout_backward(grad_output, mask, scale) on the device. */
kn_status kn__cuda_k_dropout_backward(const kn__call *c, kn__outs *out) {
  kn_status st = dropout_args_check(c->args[0].u.t->dtype);
  kn_tensor *g = st == KN_OK ? kn__cuda_contiguous(c->args[0].u.t, c->args[0].u.t->dtype) : NULL;
  kn_tensor *m = g ? kn__cuda_contiguous(c->args[1].u.t, KN_BOOL) : NULL;
  kn_tensor *tmp[1] = {m ? dense_out(out, 0) : NULL};
  st = tmp[0] ? KN_OK : kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
  long long n = g ? kn__numel(g->ndim, g->sizes) : 0;
  double scale = c->args[2].u.d;
  void *fn = NULL;
  if (st == KN_OK && n > 0) st = dropout_kernel(g->dtype, true, &fn);
  void *gp = g ? kn_cuda_data_ptr(g) : NULL, *mp = m ? kn_cuda_data_ptr(m) : NULL,
       *op = tmp[0] ? kn_cuda_data_ptr(tmp[0]) : NULL;
  void *args[] = {&gp, &mp, &op, &n, &scale};
  if (st == KN_OK) st = launch_into(fn, n, args, tmp, out);
  else if (tmp[0] && tmp[0] != out->t[0]) kn_release(tmp[0]);
  kn_release(g);
  kn_release(m);
  return st;
}
