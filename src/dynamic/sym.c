/*
** dynamic/sym.c: symbolic integer expressions.
**
** Canonical form: every symbolic value is a POLY node, a sum of terms
** coef * atom1^p1 * atom2^p2 ..., terms sorted by monomial and atoms inside a
** monomial by id. Atoms are symbols and opaque nodes (FloorDiv, Mod, Max,
** Min of two values that did not simplify). Nodes are hash-consed per shape
** env (keyed by a textual signature), so two equal polynomials are one
** pointer, and a - b is the constant 0 exactly when a and b are equal
** polynomials. Value ranges of atoms give interval bounds for any
** expression, which decide most size queries without a guard.
*/
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/hashmap.h"
#include "core/strbuf.h"
#include "dynamic/sym.h"

typedef enum { N_SYMBOL, N_FLOORDIV, N_MOD, N_MAX, N_MIN, N_POLY } nkind;

typedef struct factor { const kn__symnode *atom; int pow; } factor;
typedef struct term { int64_t coef; int nf; const factor *f; } term;

struct kn__symnode {
  nkind kind;
  int id;                  /* creation order within the env; orders atoms */
  int sym;                 /* N_SYMBOL: symbol index */
  double lo, hi;           /* value range (doubles, +-INFINITY unbounded) */
  kn_sym a, b;             /* opaque nodes: operands */
  int nt;                  /* N_POLY: terms, constant term last (nf == 0) */
  const term *t;
};

/* A recorded guard: d rel 0 (d = a - b; dc when d is a constant), its text,
** and its canonical form (see canonical()): q rel v with q the non-constant
** part scaled to a positive leading coefficient and coefficients of gcd 1,
** rel one of EQ, NE, GE, LE (NULL q: no canonical form). A guard made
** redundant by a later, stronger one on the same q is dead: not checked. */
typedef struct guard {
  const kn__symnode *d;
  int64_t dc;
  kn__sym_rel rel;
  char *text;
  const kn__symnode *q;
  kn__sym_rel crel;
  int64_t cv;
  bool dead;
} guard;

struct kn__shape_env {
  atomic_int refs;         /* kn__shape_env_retain / kn__shape_env_free */
  kn__arena arena;
  kn__hashmap nodes;       /* signature -> node */
  int nnodes;
  const kn__symnode **syms;
  int nsyms, capsyms;
  guard *guards;
  int nguards, capguards;
  /* repl[i]: the symbol that replaces symbol i after a guard Eq(si, sj)
  ** (the older one), or -1; nrepl entries */
  int *repl;
  int nrepl;
  int nlive;               /* guards not dead */
  kn__shape_env_guard_hook hook; /* called for each guard recorded */
  void *hook_ud;
  bool oom;
};

static _Thread_local kn__shape_env *current;

_Thread_local bool kn__sym_overflowed;

bool kn__sym_overflow_take(void) {
  bool r = kn__sym_overflowed;
  kn__sym_overflowed = false;
  return r;
}

kn__shape_env *kn__shape_env_current(void) { return current; }
kn__shape_env *kn__shape_env_set_current(kn__shape_env *env) {
  kn__shape_env *old = current;
  current = env;
  return old;
}

kn__shape_env *kn__shape_env_new(void) {
  kn__shape_env *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  atomic_init(&e->refs, 1);
  kn__arena_init(&e->arena, 0);
  kn__hm_init(&e->nodes, true);
  return e;
}

void kn__shape_env_retain(kn__shape_env *e) {
  if (e) atomic_fetch_add(&e->refs, 1);
}

void kn__shape_env_free(kn__shape_env *e) {
  if (!e || atomic_fetch_sub(&e->refs, 1) != 1) return;
  for (int i = 0; i < e->nguards; i++) free(e->guards[i].text);
  free(e->guards);
  free(e->repl);
  free(e->syms);
  kn__hm_fini(&e->nodes);
  kn__arena_fini(&e->arena);
  if (current == e) current = NULL;
  free(e);
}

/* ---- polynomials as scratch term lists ------------------------------------------ */

typedef struct poly { int n, cap; term *t; kn__arena *ar; bool oom; } poly;

static void poly_push(poly *p, int64_t coef, int nf, const factor *f) {
  if (p->n == p->cap) {
    int ncap = p->cap ? p->cap * 2 : 8;
    term *nt = kn__arena_alloc(p->ar, (size_t)ncap * sizeof *nt);
    if (!nt) { p->oom = true; return; }
    if (p->n) memcpy(nt, p->t, (size_t)p->n * sizeof *nt);
    p->t = nt;
    p->cap = ncap;
  }
  p->t[p->n++] = (term){coef, nf, f};
}

static int cmp_monomial(const term *x, const term *y) {
  if (x->nf == 0 || y->nf == 0) return (x->nf == 0) - (y->nf == 0); /* constant last */
  int dx = 0, dy = 0;
  for (int i = 0; i < x->nf; i++) dx += x->f[i].pow;
  for (int i = 0; i < y->nf; i++) dy += y->f[i].pow;
  if (dx != dy) return dy - dx; /* higher degree first */
  for (int i = 0; i < x->nf && i < y->nf; i++) {
    if (x->f[i].atom->id != y->f[i].atom->id) return x->f[i].atom->id - y->f[i].atom->id;
    if (x->f[i].pow != y->f[i].pow) return y->f[i].pow - x->f[i].pow;
  }
  return x->nf - y->nf;
}

static int cmp_term(const void *a, const void *b) { return cmp_monomial(a, b); }

/* Sort, merge equal monomials, drop zero coefficients. */
static void poly_normalise(poly *p) {
  if (p->n > 1) qsort(p->t, (size_t)p->n, sizeof *p->t, cmp_term);
  int w = 0;
  for (int r = 0; r < p->n; r++) {
    if (w > 0 && cmp_monomial(&p->t[w - 1], &p->t[r]) == 0) p->t[w - 1].coef += p->t[r].coef;
    else p->t[w++] = p->t[r];
    if (p->t[w - 1].coef == 0) w--;
  }
  p->n = w;
}

/* ---- nodes ------------------------------------------------------------------------ */

static double node_eval_range(const kn__symnode *n, bool hi);

static void sig_value(kn__sb *sb, kn_sym v) {
  if (!v.e) kn__sb_printf(sb, "%lld", (long long)v.c);
  else kn__sb_printf(sb, "#%d", v.e->id);
}

static const kn__symnode *intern_node(kn__shape_env *env, kn__symnode *proto, const char *sig) {
  const kn__symnode *hit = kn__hm_get(&env->nodes, sig, NULL);
  if (hit) return hit;
  kn__symnode *n = kn__arena_alloc(&env->arena, sizeof *n);
  if (!n) { env->oom = true; return NULL; }
  *n = *proto;
  n->id = env->nnodes++;
  if (!kn__hm_put(&env->nodes, sig, n)) { env->oom = true; return NULL; }
  return n;
}

/* Wrap a normalised term list as a value with the given hint. */
static kn_sym make_poly(kn__shape_env *env, poly *p, int64_t hint) {
  if (p->n == 0) return kn__sym_const(0);
  if (p->n == 1 && p->t[0].nf == 0) return kn__sym_const(p->t[0].coef);
  kn__sb sig = KN__SB_INIT;
  kn__sb_puts(&sig, "P");
  for (int i = 0; i < p->n; i++) {
    kn__sb_printf(&sig, "%+lld", (long long)p->t[i].coef);
    for (int j = 0; j < p->t[i].nf; j++)
      kn__sb_printf(&sig, "*#%d^%d", p->t[i].f[j].atom->id, p->t[i].f[j].pow);
  }
  kn__symnode proto = {.kind = N_POLY, .nt = p->n, .t = p->t};
  const kn__symnode *n = kn__sb_failed(&sig) ? NULL : intern_node(env, &proto, kn__sb_cstr(&sig));
  kn__sb_fini(&sig);
  if (!n) { env->oom = true; return kn__sym_const(hint); }
  kn__symnode *m = (kn__symnode *)n;
  m->lo = node_eval_range(n, false);
  m->hi = node_eval_range(n, true);
  return (kn_sym){hint, n};
}

/* The terms of a value (a constant is one constant term). */
static void terms_of(kn__shape_env *env, kn_sym v, poly *out) {
  out->n = out->cap = 0;
  out->t = NULL;
  out->ar = &env->arena;
  out->oom = false;
  if (!v.e) {
    if (v.c) poly_push(out, v.c, 0, NULL);
    return;
  }
  for (int i = 0; i < v.e->nt; i++) poly_push(out, v.e->t[i].coef, v.e->t[i].nf, v.e->t[i].f);
}

/* A value that is just one atom. */
static kn_sym atom_value(kn__shape_env *env, const kn__symnode *atom, int64_t hint) {
  factor *f = kn__arena_alloc(&env->arena, sizeof *f);
  if (!f) { env->oom = true; return kn__sym_const(hint); }
  f->atom = atom;
  f->pow = 1;
  poly p = {0, 0, NULL, &env->arena, false};
  poly_push(&p, 1, 1, f);
  return make_poly(env, &p, hint);
}

/* ---- ranges -------------------------------------------------------------------------- */

static void mul_range(double alo, double ahi, double blo, double bhi, double *lo, double *hi) {
  double c[4] = {alo * blo, alo * bhi, ahi * blo, ahi * bhi};
  *lo = INFINITY;
  *hi = -INFINITY;
  for (int i = 0; i < 4; i++) {
    double x = isnan(c[i]) ? 0.0 : c[i]; /* 0 * inf: the zero bound wins */
    if (x < *lo) *lo = x;
    if (x > *hi) *hi = x;
  }
}

static void range_of(kn_sym v, double *lo, double *hi) {
  if (!v.e) { *lo = *hi = (double)v.c; return; }
  *lo = v.e->lo;
  *hi = v.e->hi;
}

static double node_eval_range(const kn__symnode *n, bool want_hi) {
  double lo = 0, hi = 0;
  for (int i = 0; i < n->nt; i++) {
    double tlo = (double)n->t[i].coef, thi = tlo;
    for (int j = 0; j < n->t[i].nf; j++) {
      const kn__symnode *a = n->t[i].f[j].atom;
      for (int k = 0; k < n->t[i].f[j].pow; k++) mul_range(tlo, thi, a->lo, a->hi, &tlo, &thi);
    }
    lo += tlo;
    hi += thi;
  }
  return want_hi ? hi : lo;
}

/* ---- arithmetic ------------------------------------------------------------------------ */

static kn_sym no_env(kn_sym a, kn_sym b, int64_t hint) {
  (void)a;
  (void)b;
  return kn__sym_const(hint); /* symbolic values outside a shape env: keep the hint */
}

static kn__shape_env *env_for(void) { return current; }

kn_sym kn__sym_add_slow(kn_sym a, kn_sym b) {
  kn__shape_env *env = env_for();
  if (!env) return no_env(a, b, kn__ck_add(a.c, b.c));
  poly pa, pb;
  terms_of(env, a, &pa);
  terms_of(env, b, &pb);
  for (int i = 0; i < pb.n; i++) poly_push(&pa, pb.t[i].coef, pb.t[i].nf, pb.t[i].f);
  poly_normalise(&pa);
  if (pa.oom || pb.oom) { env->oom = true; return kn__sym_const(kn__ck_add(a.c, b.c)); }
  return make_poly(env, &pa, kn__ck_add(a.c, b.c));
}

kn_sym kn__sym_mul_slow(kn_sym a, kn_sym b) {
  kn__shape_env *env = env_for();
  if (!env) return no_env(a, b, kn__ck_mul(a.c, b.c));
  poly pa, pb, r = {0, 0, NULL, &env->arena, false};
  terms_of(env, a, &pa);
  terms_of(env, b, &pb);
  for (int i = 0; i < pa.n; i++)
    for (int j = 0; j < pb.n; j++) {
      /* merge the two sorted factor lists */
      int cap = pa.t[i].nf + pb.t[j].nf, nf = 0;
      factor *f = cap ? kn__arena_alloc(&env->arena, (size_t)cap * sizeof *f) : NULL;
      if (cap && !f) { env->oom = true; return kn__sym_const(kn__ck_mul(a.c, b.c)); }
      int x = 0, y = 0;
      while (x < pa.t[i].nf || y < pb.t[j].nf) {
        const factor *fx = x < pa.t[i].nf ? &pa.t[i].f[x] : NULL;
        const factor *fy = y < pb.t[j].nf ? &pb.t[j].f[y] : NULL;
        if (fx && fy && fx->atom == fy->atom) {
          f[nf++] = (factor){fx->atom, fx->pow + fy->pow};
          x++, y++;
        } else if (fx && (!fy || fx->atom->id < fy->atom->id)) {
          f[nf++] = *fx, x++;
        } else {
          f[nf++] = *fy, y++;
        }
      }
      poly_push(&r, pa.t[i].coef * pb.t[j].coef, nf, f);
    }
  poly_normalise(&r);
  if (r.oom || pa.oom || pb.oom) { env->oom = true; return kn__sym_const(kn__ck_mul(a.c, b.c)); }
  return make_poly(env, &r, kn__ck_mul(a.c, b.c));
}

kn_sym kn__sym_sub_slow(kn_sym a, kn_sym b) {
  return kn__sym_add(a, kn__sym_mul(b, kn__sym_const(-1)));
}

static kn_sym opaque(nkind k, kn_sym a, kn_sym b, int64_t hint) {
  kn__shape_env *env = env_for();
  if (!env) return no_env(a, b, hint);
  kn__sb sig = KN__SB_INIT;
  kn__sb_printf(&sig, "O%d(", (int)k);
  sig_value(&sig, a);
  kn__sb_putc(&sig, ',');
  sig_value(&sig, b);
  kn__sb_putc(&sig, ')');
  double alo, ahi, blo, bhi;
  range_of(a, &alo, &ahi);
  range_of(b, &blo, &bhi);
  kn__symnode proto = {.kind = k, .a = a, .b = b, .lo = -INFINITY, .hi = INFINITY};
  if (k == N_MAX) proto.lo = fmax(alo, blo), proto.hi = fmax(ahi, bhi);
  if (k == N_MIN) proto.lo = fmin(alo, blo), proto.hi = fmin(ahi, bhi);
  if (k == N_MOD && !b.e && b.c > 0) proto.lo = 0, proto.hi = (double)(b.c - 1);
  if (k == N_FLOORDIV && alo >= 0 && blo > 0) proto.lo = floor(alo / bhi), proto.hi = floor(ahi / blo);
  const kn__symnode *n = kn__sb_failed(&sig) ? NULL : intern_node(env, &proto, kn__sb_cstr(&sig));
  kn__sb_fini(&sig);
  if (!n) return kn__sym_const(hint);
  return atom_value(env, n, hint);
}

/* Is every coefficient of a (a polynomial) divisible by the constant d? */
static bool divisible(kn_sym a, int64_t d) {
  if (!a.e) return a.c % d == 0;
  for (int i = 0; i < a.e->nt; i++)
    if (a.e->t[i].coef % d != 0) return false;
  return true;
}

static kn_sym scale_down(kn_sym a, int64_t d) {
  kn__shape_env *env = env_for();
  poly p;
  terms_of(env, a, &p);
  for (int i = 0; i < p.n; i++) p.t[i].coef /= d;
  return make_poly(env, &p, kn__floordiv64(a.c, d));
}

kn_sym kn__sym_floordiv_slow(kn_sym a, kn_sym b) {
  int64_t hint = b.c ? kn__floordiv64(a.c, b.c) : 0;
  if (!b.e && b.c == 1) return a;
  if (!b.e && b.c != 0 && env_for() && divisible(a, b.c)) return scale_down(a, b.c);
  return opaque(N_FLOORDIV, a, b, hint);
}

kn_sym kn__sym_mod_slow(kn_sym a, kn_sym b) {
  int64_t hint = b.c ? kn__mod64(a.c, b.c) : 0;
  if (!b.e && b.c != 0 && divisible(a, b.c)) return kn__sym_const(0);
  return opaque(N_MOD, a, b, hint);
}

/* Commutative opaque ops get their operands in a fixed order. */
static void order(kn_sym *a, kn_sym *b) {
  int ia = a->e ? a->e->id : -1, ib = b->e ? b->e->id : -1;
  if (ia > ib || (ia == ib && a->c > b->c)) {
    kn_sym t = *a;
    *a = *b;
    *b = t;
  }
}

kn_sym kn__sym_max_slow(kn_sym a, kn_sym b) {
  kn__sym_truth ge = kn__sym_query(a, KN__SYM_GE, b);
  if (ge == KN__SYM_TRUE) return a;
  if (ge == KN__SYM_FALSE) return b;
  int64_t hint = a.c > b.c ? a.c : b.c;
  order(&a, &b);
  return opaque(N_MAX, a, b, hint);
}

kn_sym kn__sym_min_slow(kn_sym a, kn_sym b) {
  kn__sym_truth le = kn__sym_query(a, KN__SYM_LE, b);
  if (le == KN__SYM_TRUE) return a;
  if (le == KN__SYM_FALSE) return b;
  int64_t hint = a.c < b.c ? a.c : b.c;
  order(&a, &b);
  return opaque(N_MIN, a, b, hint);
}

/* ---- queries ------------------------------------------------------------------------ */

static kn__sym_truth truth(bool b) { return b ? KN__SYM_TRUE : KN__SYM_FALSE; }

/* a - b's sign, without computing a - b (which may overflow). */
static int64_t diff_sign(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

static bool holds(int64_t d, kn__sym_rel rel) {
  switch (rel) {
  case KN__SYM_EQ: return d == 0;
  case KN__SYM_NE: return d != 0;
  case KN__SYM_LT: return d < 0;
  case KN__SYM_LE: return d <= 0;
  case KN__SYM_GT: return d > 0;
  case KN__SYM_GE: return d >= 0;
  }
  return false;
}

/* The power of atom in term t (0 when absent). */
static int power_in(const term *t, const kn__symnode *atom) {
  for (int j = 0; j < t->nf; j++)
    if (t->f[j].atom == atom) return t->f[j].pow;
  return 0;
}

/* A range with the sign of polynomial n, often tighter than n's own: the
** atoms that divide every term and are positive are factored out (they do
** not change the sign), e.g. 64*s1 - 64*s0*s1 = 64*s1*(1 - s0) < 0 for
** s0 >= 2, where the sum of the terms' ranges is unbounded both ways. */
static void sign_range(const kn__symnode *n, double *lo, double *hi) {
  *lo = n->lo;
  *hi = n->hi;
  if (n->kind != N_POLY || n->nt < 2 || n->t[0].nf > 16) return;
  const term *t0 = &n->t[0];
  int common[16], any = 0;
  for (int j = 0; j < t0->nf; j++) {
    int p = t0->f[j].atom->lo > 0 ? t0->f[j].pow : 0;
    for (int i = 1; i < n->nt && p > 0; i++) {
      int q = power_in(&n->t[i], t0->f[j].atom);
      p = q < p ? q : p;
    }
    common[j] = p;
    any |= p;
  }
  if (!any) return;
  double qlo = 0, qhi = 0;
  for (int i = 0; i < n->nt; i++) {
    double tlo = (double)n->t[i].coef, thi = tlo;
    for (int j = 0; j < n->t[i].nf; j++) {
      const kn__symnode *a = n->t[i].f[j].atom;
      int skip = 0;
      for (int k = 0; k < t0->nf; k++)
        if (t0->f[k].atom == a) skip = common[k];
      for (int k = skip; k < n->t[i].f[j].pow; k++) mul_range(tlo, thi, a->lo, a->hi, &tlo, &thi);
    }
    qlo += tlo;
    qhi += thi;
  }
  *lo = qlo;
  *hi = qhi;
}

kn__sym_truth kn__sym_query(kn_sym a, kn__sym_rel rel, kn_sym b) {
  if (!a.e && !b.e) return truth(holds(diff_sign(a.c, b.c), rel));
  if (a.e == b.e && a.c == b.c && a.e) return truth(holds(0, rel));
  if (!env_for()) return KN__SYM_NEEDS_GUARD;
  kn_sym d = kn__sym_sub(a, b);
  if (!d.e) return truth(holds(d.c, rel));
  double lo, hi;
  sign_range(d.e, &lo, &hi);
  switch (rel) {
  case KN__SYM_EQ: if (lo > 0 || hi < 0) return KN__SYM_FALSE; break;
  case KN__SYM_NE: if (lo > 0 || hi < 0) return KN__SYM_TRUE; break;
  case KN__SYM_LT: if (hi < 0) return KN__SYM_TRUE; if (lo >= 0) return KN__SYM_FALSE; break;
  case KN__SYM_LE: if (hi <= 0) return KN__SYM_TRUE; if (lo > 0) return KN__SYM_FALSE; break;
  case KN__SYM_GT: if (lo > 0) return KN__SYM_TRUE; if (hi <= 0) return KN__SYM_FALSE; break;
  case KN__SYM_GE: if (lo >= 0) return KN__SYM_TRUE; if (hi < 0) return KN__SYM_FALSE; break;
  }
  return KN__SYM_NEEDS_GUARD;
}

static kn__sym_rel negate(kn__sym_rel r) {
  static const kn__sym_rel neg[] = {KN__SYM_NE, KN__SYM_EQ, KN__SYM_GE, KN__SYM_GT, KN__SYM_LE, KN__SYM_LT};
  return neg[r];
}

static void format_guard(kn__sb *sb, kn_sym a, kn__sym_rel rel, kn_sym b) {
  char xa[256], xb[256];
  kn__sym_format(a, xa, sizeof xa);
  kn__sym_format(b, xb, sizeof xb);
  static const char *ops[] = {"", "", "<", "<=", ">", ">="};
  if (rel == KN__SYM_EQ) kn__sb_printf(sb, "Eq(%s, %s)", xa, xb);
  else if (rel == KN__SYM_NE) kn__sb_printf(sb, "Ne(%s, %s)", xa, xb);
  else kn__sb_printf(sb, "%s %s %s", xa, ops[rel], xb);
}

/* The symbol index of a plain symbol value (s3, not 2*s3), else -1. */
int kn__sym_symbol_index(kn_sym v) {
  const kn__symnode *n = v.e;
  if (!n) return -1;
  if (n->kind == N_SYMBOL) return n->sym;
  if (n->kind != N_POLY || n->nt != 1 || n->t[0].coef != 1 || n->t[0].nf != 1) return -1;
  const factor *f = &n->t[0].f[0];
  return f->pow == 1 && f->atom->kind == N_SYMBOL ? f->atom->sym : -1;
}

static int canon(const kn__shape_env *env, int s) {
  while (s >= 0 && s < env->nrepl && env->repl[s] >= 0) s = env->repl[s];
  return s;
}

/* Eq(si, sj) holds: the newer symbol is replaced by the older one. */
static void add_replacement(kn__shape_env *env, int x, int y) {
  x = canon(env, x);
  y = canon(env, y);
  if (x == y) return;
  int hi = x > y ? x : y, lo = x > y ? y : x;
  if (hi >= env->nrepl) {
    int *nr = realloc(env->repl, (size_t)(hi + 1) * sizeof *nr);
    if (!nr) { env->oom = true; return; }
    for (int i = env->nrepl; i <= hi; i++) nr[i] = -1;
    env->repl = nr;
    env->nrepl = hi + 1;
  }
  env->repl[hi] = lo;
}

/* ---- canonical guards ------------------------------------------------------------------- */

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static int64_t ceildiv64(int64_t a, int64_t b) { return -kn__floordiv64(-a, b); }

static kn__sym_rel mirror(kn__sym_rel r) {
  static const kn__sym_rel m[] = {KN__SYM_EQ, KN__SYM_NE, KN__SYM_GT, KN__SYM_GE, KN__SYM_LT, KN__SYM_LE};
  return m[r];
}

/* The canonical form of the guard d rel 0 (struct guard): d = P + c with P
** the non-constant terms; P rel -c is scaled so that P's first coefficient
** is positive (flipping rel) and its coefficients have gcd 1, and strict
** bounds become closed ones. Eq(a, b), Eq(b, a) and Eq(2*a, 2*b) are then
** one form, and 1024 < 64*s0 is s0 >= 17. g->q stays NULL when there is no
** form (no symbolic part, or coefficients too large to negate). */
static void canonical(kn__shape_env *env, kn_sym d, kn__sym_rel rel, guard *g) {
  g->q = NULL;
  const kn__symnode *n = d.e;
  if (!n || n->kind != N_POLY) return;
  int np = n->nt;
  int64_t c = 0, gg = 0;
  if (np && n->t[np - 1].nf == 0) c = n->t[--np].coef;
  if (np == 0 || c == INT64_MIN) return;
  for (int i = 0; i < np; i++) {
    if (n->t[i].coef == INT64_MIN) return;
    gg = gcd64(gg, n->t[i].coef < 0 ? -n->t[i].coef : n->t[i].coef);
  }
  int64_t sign = n->t[0].coef < 0 ? -1 : 1, k = -c * sign;
  if (sign < 0) rel = mirror(rel);
  poly p = {0, 0, NULL, &env->arena, false};
  for (int i = 0; i < np; i++) poly_push(&p, sign * n->t[i].coef / gg, n->t[i].nf, n->t[i].f);
  if (p.oom) return;
  switch (rel) {
  case KN__SYM_EQ:
  case KN__SYM_NE:
    if (k % gg) return; /* never equal: no form (kept as it is) */
    g->crel = rel, g->cv = k / gg;
    break;
  case KN__SYM_GT: g->crel = KN__SYM_GE, g->cv = kn__floordiv64(k, gg) + 1; break;
  case KN__SYM_GE: g->crel = KN__SYM_GE, g->cv = ceildiv64(k, gg); break;
  case KN__SYM_LT: g->crel = KN__SYM_LE, g->cv = ceildiv64(k, gg) - 1; break;
  case KN__SYM_LE: g->crel = KN__SYM_LE, g->cv = kn__floordiv64(k, gg); break;
  }
  g->q = make_poly(env, &p, 0).e;
}

/* Does guard x imply guard y (both with a form on the same q)? */
static bool implies(const guard *x, const guard *y) {
  int64_t a = x->cv, b = y->cv;
  switch (x->crel) {
  case KN__SYM_EQ:
    return y->crel == KN__SYM_EQ ? a == b : y->crel == KN__SYM_NE ? a != b
           : y->crel == KN__SYM_GE ? a >= b : a <= b;
  case KN__SYM_GE: return (y->crel == KN__SYM_GE && a >= b) || (y->crel == KN__SYM_NE && b < a);
  case KN__SYM_LE: return (y->crel == KN__SYM_LE && a <= b) || (y->crel == KN__SYM_NE && b > a);
  default: return y->crel == KN__SYM_NE && a == b;
  }
}

/* Is ng implied by a live guard already recorded? */
static bool redundant(const kn__shape_env *env, const guard *ng) {
  for (int i = 0; ng->q && i < env->nguards; i++) {
    const guard *g = &env->guards[i];
    if (!g->dead && g->q == ng->q && implies(g, ng)) return true;
  }
  return false;
}

/* Recorded guards that ng makes redundant die. */
static void kill_implied(kn__shape_env *env, const guard *ng) {
  for (int i = 0; ng->q && i < env->nguards; i++) {
    guard *g = &env->guards[i];
    if (!g->dead && g->q == ng->q && implies(ng, g)) {
      g->dead = true;
      env->nlive--;
    }
  }
}

static void record(kn__shape_env *env, kn_sym a, kn__sym_rel rel, kn_sym b) {
  if (rel == KN__SYM_EQ && kn__sym_symbol_index(a) >= 0 && kn__sym_symbol_index(b) >= 0)
    add_replacement(env, kn__sym_symbol_index(a), kn__sym_symbol_index(b));
  kn_sym d = kn__sym_sub(a, b);
  guard ng = {.d = d.e, .dc = d.c, .rel = rel};
  canonical(env, d, rel, &ng);
  if (redundant(env, &ng)) return; /* a repeat, a mirror image or implied */
  if (env->nguards == env->capguards) {
    int ncap = env->capguards ? env->capguards * 2 : 16;
    guard *g = realloc(env->guards, (size_t)ncap * sizeof *g);
    if (!g) { env->oom = true; return; }
    env->guards = g;
    env->capguards = ncap;
  }
  kn__sb sb = KN__SB_INIT;
  format_guard(&sb, a, rel, b);
  ng.text = kn__sb_take(&sb);
  if (!ng.text) { env->oom = true; return; }
  kill_implied(env, &ng);
  env->guards[env->nguards++] = ng;
  env->nlive++;
  if (env->hook) env->hook(env->hook_ud, env, env->nguards - 1);
}

bool kn__sym_guard(kn_sym a, kn__sym_rel rel, kn_sym b) {
  kn__sym_truth t = kn__sym_query(a, rel, b);
  if (t != KN__SYM_NEEDS_GUARD) return t == KN__SYM_TRUE;
  bool r = holds(diff_sign(a.c, b.c), rel); /* decide by the hints */
  kn__shape_env *env = env_for();
  if (env) record(env, a, r ? rel : negate(rel), b);
  return r;
}

/* ---- evaluation ----------------------------------------------------------------------- */

static int64_t eval_node(const kn__symnode *n, const int64_t *vals);

int64_t kn__sym_eval(kn_sym a, const int64_t *vals) { return a.e ? eval_node(a.e, vals) : a.c; }

static int64_t eval_node(const kn__symnode *n, const int64_t *vals) {
  switch (n->kind) {
  case N_SYMBOL: return vals[n->sym];
  case N_FLOORDIV: {
    int64_t d = kn__sym_eval(n->b, vals);
    return d ? kn__floordiv64(kn__sym_eval(n->a, vals), d) : 0;
  }
  case N_MOD: {
    int64_t d = kn__sym_eval(n->b, vals);
    return d ? kn__mod64(kn__sym_eval(n->a, vals), d) : 0;
  }
  case N_MAX: {
    int64_t x = kn__sym_eval(n->a, vals), y = kn__sym_eval(n->b, vals);
    return x > y ? x : y;
  }
  case N_MIN: {
    int64_t x = kn__sym_eval(n->a, vals), y = kn__sym_eval(n->b, vals);
    return x < y ? x : y;
  }
  case N_POLY: {
    int64_t s = 0;
    for (int i = 0; i < n->nt; i++) {
      int64_t t = n->t[i].coef;
      for (int j = 0; j < n->t[i].nf; j++)
        for (int k = 0; k < n->t[i].f[j].pow; k++) t *= eval_node(n->t[i].f[j].atom, vals);
      s += t;
    }
    return s;
  }
  }
  return 0;
}

int kn__shape_env_check_guards(const kn__shape_env *env, const int64_t *vals) {
  for (int i = 0; i < env->nguards; i++) {
    const guard *g = &env->guards[i];
    if (g->dead) continue;
    int64_t d = g->d ? eval_node(g->d, vals) : g->dc;
    if (!holds(d, g->rel)) return i;
  }
  return -1;
}

/* ---- symbols ---------------------------------------------------------------------------- */

kn_status kn__shape_env_create_symbol(kn__shape_env *env, int64_t hint, int64_t lower_bound,
                                      kn_sym *out) {
  if (env->nsyms == env->capsyms) {
    int ncap = env->capsyms ? env->capsyms * 2 : 8;
    const kn__symnode **ns = realloc(env->syms, (size_t)ncap * sizeof *ns);
    if (!ns) return kn__oom();
    env->syms = ns;
    env->capsyms = ncap;
  }
  char sig[32];
  snprintf(sig, sizeof sig, "S%d", env->nsyms);
  kn__symnode proto = {.kind = N_SYMBOL, .sym = env->nsyms, .lo = (double)lower_bound,
                       .hi = INFINITY};
  const kn__symnode *n = intern_node(env, &proto, sig);
  if (!n) return kn__oom();
  env->syms[env->nsyms++] = n;
  kn__shape_env *saved = kn__shape_env_set_current(env);
  *out = atom_value(env, n, hint);
  kn__shape_env_set_current(saved);
  return env->oom ? kn__oom() : KN_OK;
}

int kn__shape_env_nsymbols(const kn__shape_env *env) { return env->nsyms; }
int kn__shape_env_nguards(const kn__shape_env *env) { return env->nguards; }
int kn__shape_env_nlive(const kn__shape_env *env) { return env->nlive; }
bool kn__shape_env_guard_dead(const kn__shape_env *env, int i) {
  return i >= 0 && i < env->nguards && env->guards[i].dead;
}
void kn__shape_env_set_guard_hook(kn__shape_env *env, kn__shape_env_guard_hook hook, void *ud) {
  env->hook = hook;
  env->hook_ud = ud;
}
const char *kn__shape_env_guard_str(const kn__shape_env *env, int i) {
  return i >= 0 && i < env->nguards ? env->guards[i].text : NULL;
}

/* ---- printing (sympy's style) -------------------------------------------------------- */

static void fmt_value(kn__sb *sb, kn_sym v);

/* kn__sym_format_canon: print symbols through this env's replacements */
static _Thread_local const kn__shape_env *fmt_env;

static void fmt_atom(kn__sb *sb, const kn__symnode *n) {
  switch (n->kind) {
  case N_SYMBOL: kn__sb_printf(sb, "s%d", fmt_env ? canon(fmt_env, n->sym) : n->sym); return;
  case N_FLOORDIV:
    kn__sb_putc(sb, '(');
    fmt_value(sb, n->a);
    kn__sb_puts(sb, "//");
    fmt_value(sb, n->b);
    kn__sb_putc(sb, ')');
    return;
  default: {
    static const char *names[] = {"", "", "Mod", "Max", "Min"};
    kn__sb_printf(sb, "%s(", names[n->kind]);
    fmt_value(sb, n->a);
    kn__sb_puts(sb, ", ");
    fmt_value(sb, n->b);
    kn__sb_putc(sb, ')');
    return;
  }
  }
}

static void fmt_monomial(kn__sb *sb, const term *t, bool paren_sums) {
  (void)paren_sums;
  for (int j = 0; j < t->nf; j++) {
    if (j) kn__sb_putc(sb, '*');
    fmt_atom(sb, t->f[j].atom);
    if (t->f[j].pow > 1) kn__sb_printf(sb, "**%d", t->f[j].pow);
  }
}

static void fmt_value(kn__sb *sb, kn_sym v) {
  if (!v.e) { kn__sb_printf(sb, "%lld", (long long)v.c); return; }
  const kn__symnode *n = v.e;
  for (int i = 0; i < n->nt; i++) {
    int64_t c = n->t[i].coef;
    int64_t mag = c < 0 ? -c : c;
    if (i == 0) { if (c < 0) kn__sb_putc(sb, '-'); }
    else kn__sb_puts(sb, c < 0 ? " - " : " + ");
    if (n->t[i].nf == 0) { kn__sb_printf(sb, "%lld", (long long)mag); continue; }
    if (mag != 1) kn__sb_printf(sb, "%lld*", (long long)mag);
    fmt_monomial(sb, &n->t[i], true);
  }
}

int kn__sym_format_canon(const kn__shape_env *env, kn_sym a, char *buf, size_t n) {
  const kn__shape_env *saved = fmt_env;
  fmt_env = env;
  int r = kn__sym_format(a, buf, n);
  fmt_env = saved;
  return r;
}

int kn__sym_format(kn_sym a, char *buf, size_t n) {
  if (!a.e) return snprintf(buf, n, "%lld", (long long)a.c);
  kn__sb sb = KN__SB_INIT;
  fmt_value(&sb, a);
  int len = snprintf(buf, n, "%s", kn__sb_failed(&sb) ? "?" : kn__sb_cstr(&sb));
  kn__sb_fini(&sb);
  return len;
}
