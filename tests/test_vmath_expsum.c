/*
** test_vmath_expsum.c: the fused exp(x - c) and its sum of every vector-math
** table this CPU runs (kn__vm_expsum_f32, ops/vmath.h), against a second
** implementation from the same table's parts: t = x - c in float, the
** table's own array exp of those t, then the contract's sums: groups of 256
** from the block's start, then of 64, lane l adding in double the float
** F = (e[g+l] + e[g+16+l]) + (e[g+32+l] + e[g+48+l]) of a group of 64, or
** (F(g) + F(g+64)) + (F(g+128) + F(g+192)) of one of 256, the elements
** after the last whole group each added in double to lane i % 16 in
** increasing i. The stored differences and exps must be the same bits, and
** so must the 16 lane sums (the same additions in the same order), NaN
** matching NaN. Lengths 0..140
** each (no group, one, two), then up to 9000 around the vector, lane and
** group widths, wide-ranged and of one size (whose sums round differently
** in another order); unaligned blocks; NaN, +-inf, huge negative, denormal and
** subnormal-producing inputs; shifts c of 0, finite, +inf and NaN; the
** fetch hint (ahead) changes nothing. expsum_max_f32 (for a shift at least
** every x) gives the same bits as expsum_f32 wherever that holds.
*/
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/vmath.h"

#define L KN__VM_SUM_LANES
#define NMAX 9000

/* a and b the same bits, or both NaN */
static bool same_f(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a); }
static bool same_d(double a, double b) {
  return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

/* Inputs over the exp's whole range and its edges (deterministic). */
static void fill(float *x, int64_t n) {
  uint32_t s = 12345;
  static const float edge[] = {NAN,    INFINITY, -INFINITY, -1e30f, -FLT_MAX, 88.8f,  -103.9f,
                               -87.5f, 0.0f,     -0.0f,     1e-40f, 1e-3f,    -200.0f, 89.0f};
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (i % 37 == 5) ? edge[(s >> 8) % (sizeof edge / sizeof edge[0])]
                         : ((float)(s >> 8) / 16777216.0f - 0.6f) * 220.0f;
  }
}

/* The reference: d, e and the lanes from the table's exp of x - c. */
static void reference(const kn__vmath *t, float *e, float *d, const float *x, float c, int64_t n,
                      double *acc) {
  for (int64_t i = 0; i < n; i++) d[i] = x[i] - c;
  t->f32[KN__VM_EXP](e, d, n);
  int64_t i = 0;
  for (; i + 16 * L <= n; i += 16 * L)
    for (int l = 0; l < L; l++) {
      float f[4];
      for (int g = 0; g < 4; g++) {
        const float *p = e + i + 4 * L * g + l;
        f[g] = (p[0] + p[L]) + (p[2 * L] + p[3 * L]);
      }
      acc[l] += (double)((f[0] + f[1]) + (f[2] + f[3]));
    }
  for (; i + 4 * L <= n; i += 4 * L)
    for (int l = 0; l < L; l++) {
      float p = e[i + l] + e[i + L + l], q = e[i + 2 * L + l] + e[i + 3 * L + l];
      acc[l] += (double)(p + q);
    }
  for (; i < n; i++) acc[i % L] += (double)e[i];
}

static void lanes_init(double *acc) {
  for (int l = 0; l < L; l++) acc[l] = l * 0.25 - 1.0;
}

static int64_t first_diff_f(const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!same_f(a[i], b[i])) return i;
  return -1;
}

static int first_diff_d(const double *a, const double *b) {
  for (int l = 0; l < L; l++)
    if (!same_d(a[l], b[l])) return l;
  return -1;
}

/* One length at offsets (x, e, d) = (ox, oe, od) floats from aligned bases. */
static void check(const kn__vmath *t, const float *src, int64_t n, float c, int ox, int oe, int od) {
  static float xb[NMAX + 16], eb[NMAX + 16], db[NMAX + 16], re[NMAX], rd[NMAX];
  float *x = xb + ox, *e = eb + oe, *d = db + od;
  memcpy(x, src, (size_t)n * sizeof *x);
  double acc[L], racc[L];
  lanes_init(acc);
  lanes_init(racc);
  reference(t, re, rd, x, c, n, racc);
  t->expsum_f32(e, d, x, c, n, acc, NULL);
  int64_t de = first_diff_f(e, re, n), dd = first_diff_f(d, rd, n);
  int dl = first_diff_d(acc, racc);
  cr_expect(de < 0, "%s n %lld c %a: exp[%lld] = %a, table exp %a", t->name, (long long)n, c,
            (long long)de, de < 0 ? 0 : e[de], de < 0 ? 0 : re[de]);
  cr_expect(dd < 0, "%s n %lld c %a: d[%lld] = %a, want %a", t->name, (long long)n, c,
            (long long)dd, dd < 0 ? 0 : d[dd], dd < 0 ? 0 : rd[dd]);
  cr_expect(dl < 0, "%s n %lld c %a: lane %d = %a, want %a", t->name, (long long)n, c, dl,
            dl < 0 ? 0 : acc[dl], dl < 0 ? 0 : racc[dl]);
  /* neither output stored, the block itself as the fetch hint: the same lanes */
  lanes_init(acc);
  t->expsum_f32(NULL, NULL, x, c, n, acc, x);
  dl = first_diff_d(acc, racc);
  cr_expect(dl < 0, "%s n %lld c %a, no outputs: lane %d = %a, want %a", t->name, (long long)n,
            c, dl, dl < 0 ? 0 : acc[dl], dl < 0 ? 0 : racc[dl]);
}

static const float shifts[] = {0.0f, 3.25f, -71.5f, INFINITY, NAN};

Test(vmath_expsum, every_table_every_short_length) {
  static float src[NMAX];
  fill(src, NMAX);
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (int64_t n = 0; n <= 140; n++)
      for (size_t k = 0; k < sizeof shifts / sizeof shifts[0]; k++)
        check(t, src + n, n, shifts[k], (int)(n % 3), (int)(n % 5), (int)(n % 7));
  }
}

/* Inputs in [-2, 0] (deterministic): exps of one size, whose float sums
** round differently in another order. */
static void fill_narrow(float *x, int64_t n) {
  uint32_t s = 777;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = -(float)(s >> 8) / 8388608.0f;
  }
}

Test(vmath_expsum, every_table_long_lengths_narrow) {
  static float src[NMAX];
  fill_narrow(src, NMAX);
  const int64_t lens[] = {64, 200, 1024, 1031, 9000};
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++)
      check(t, src, lens[j], 0.0f, (int)(j % 4), 1, 2);
  }
}

Test(vmath_expsum, every_table_long_lengths_unaligned) {
  static float src[NMAX];
  fill(src, NMAX);
  const int64_t lens[] = {63, 64, 65, 255, 256, 257, 1000, 1023, 1024, 1031, 4099, 8191, 9000};
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++)
      for (size_t k = 0; k < 3; k++)
        check(t, src + NMAX - lens[j], lens[j], shifts[k], (int)(j % 4), (int)(j + k) % 3 + 1, 0);
  }
}

/* Blocks of a multiple of 64 then the rest continue the lanes: the same
** sums as one call; the exp written over x (in place) and the difference
** over x give the same bits as separate outputs. */
Test(vmath_expsum, blocks_continue_and_in_place) {
  enum { N = 1037 };
  static float x[N], e[N], d[N], y[N];
  fill(x, N);
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    double one[L], split[L];
    lanes_init(one);
    lanes_init(split);
    t->expsum_f32(e, d, x, 1.5f, N, one, NULL);
    for (int64_t b = 0; b < N; b += 256)
      t->expsum_f32(NULL, NULL, x + b, 1.5f, N - b < 256 ? N - b : 256, split,
                    b + 512 < N ? x + b + 512 : NULL);
    int dl = first_diff_d(one, split);
    cr_expect(dl < 0, "%s: blocks of 256 differ from one call at lane %d", t->name, dl);
    memcpy(y, x, sizeof y);
    lanes_init(split);
    t->expsum_f32(y, NULL, y, 1.5f, N, split, NULL);
    cr_expect(first_diff_f(y, e, N) < 0 && first_diff_d(one, split) < 0, "%s: exp in place",
              t->name);
    memcpy(y, x, sizeof y);
    lanes_init(split);
    t->expsum_f32(NULL, y, y, 1.5f, N, split, NULL);
    cr_expect(first_diff_f(y, d, N) < 0 && first_diff_d(one, split) < 0, "%s: x - c in place",
              t->name);
  }
}

/* Special values, literally: exp(-inf - 0) = 0, exp(huge negative) = 0,
** exp(0) = 1, exp(inf) = inf, exp(NaN) NaN; a NaN makes its lane NaN. */
Test(vmath_expsum, special_values) {
  float x[L] = {-INFINITY, -1e30f, 0.0f, INFINITY, NAN, -0.0f, 1.0f};
  for (int l = 7; l < L; l++) x[l] = -INFINITY;
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    float e[L];
    double acc[L] = {0};
    t->expsum_f32(e, NULL, x, 0.0f, L, acc, NULL);
    cr_expect(e[0] == 0 && e[1] == 0 && e[2] == 1 && e[3] == INFINITY && isnan(e[4]) &&
                  e[5] == 1 && e[15] == 0,
              "%s: exp of specials %a %a %a %a %a %a", t->name, e[0], e[1], e[2], e[3], e[4], e[5]);
    cr_expect(acc[0] == 0 && acc[2] == 1 && acc[3] == INFINITY && isnan(acc[4]) &&
                  fabs(acc[6] - 2.718281828459045) < 1e-6,
              "%s: lanes %a %a %a %a %a", t->name, acc[0], acc[2], acc[3], acc[4], acc[6]);
  }
}

/* expsum_max_f32 against expsum_f32 for shifts at least every x (the row's
** maximum, above it, +inf), rows holding NaN, -inf, huge negative and
** denormal-producing values, every length to 140 and long ones, unaligned:
** the same exps, differences and lanes, bit for bit. */
Test(vmath_expsum, max_shift_matches) {
  static float src[NMAX], e1[NMAX + 16], e2[NMAX + 16], d1[NMAX + 16], d2[NMAX + 16];
  fill(src, NMAX);
  const int64_t lens[] = {300, 1000, 1024, 1031, 4099, 9000};
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    for (int64_t j = 0; j < 141 + 6; j++) {
      int64_t n = j < 141 ? j : lens[j - 141], off = j % 5;
      const float *x = src + NMAX - n;
      float mx = -INFINITY;
      for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
      const float cs[3] = {mx, mx + 40.0f, INFINITY};
      for (int k = 0; k < 3; k++) {
        double a1[L], a2[L];
        lanes_init(a1);
        lanes_init(a2);
        t->expsum_f32(e1 + off, d1 + off, x, cs[k], n, a1, NULL);
        t->expsum_max_f32(e2 + off, d2 + off, x, cs[k], n, a2, x);
        int64_t de = first_diff_f(e1 + off, e2 + off, n);
        int dl = first_diff_d(a1, a2);
        cr_expect(de < 0 && first_diff_f(d1 + off, d2 + off, n) < 0 && dl < 0,
                  "%s n %lld c %a: exp[%lld], lane %d differ", t->name, (long long)n, cs[k],
                  (long long)de, dl);
      }
    }
  }
}

/* The groups literally: 133 zeros with c = 0 (exp 1 each) make two groups
** of 4 per lane and five elements after them: lanes 0-4 hold 9, the rest 8;
** in one group a NaN makes its lane NaN, an inf its lane inf, and a lane of
** -inf stays 0, while every other lane still sums 4 exps of 0; 300 zeros
** make one group of 256 and 44 elements after it (lanes 0-11 hold 19, the
** rest 18). */
Test(vmath_expsum, groups_literally) {
  enum { N = 133 };
  float x[N] = {0};
  for (int isa = 0; isa < KN__ISA_COUNT; isa++) {
    const kn__vmath *t = kn__vmath_table((kn__isa)isa);
    if (!t) continue;
    double acc[L] = {0};
    t->expsum_f32(NULL, NULL, x, 0.0f, N, acc, NULL);
    for (int l = 0; l < L; l++)
      cr_expect(acc[l] == (l < 5 ? 9.0 : 8.0), "%s: lane %d = %a", t->name, l, acc[l]);
    float y[4 * L] = {0};
    y[2 * L + 4] = NAN, y[L + 3] = INFINITY;
    for (int r = 0; r < 4; r++) y[r * L + 9] = -INFINITY;
    double g[L] = {0};
    t->expsum_f32(NULL, NULL, y, 0.0f, 4 * L, g, NULL);
    cr_expect(isnan(g[4]) && g[3] == INFINITY && g[9] == 0 && g[0] == 4 && g[15] == 4,
              "%s: group lanes %a %a %a %a %a", t->name, g[4], g[3], g[9], g[0], g[15]);
    /* 300 zeros: a group of 256 (16 per lane), no group of 64, 44 alone */
    float z[300] = {0};
    double h[L] = {0};
    t->expsum_max_f32(NULL, NULL, z, 0.0f, 300, h, NULL);
    for (int l = 0; l < L; l++)
      cr_expect(h[l] == (l < 12 ? 19.0 : 18.0), "%s: 300: lane %d = %a", t->name, l, h[l]);
  }
}
