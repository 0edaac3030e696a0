/*
** dynamic/sym.h: symbolic integers for sizes and strides.
**
** A kn_sym is either a constant (e == NULL, value in c) or an expression over
** size symbols s0, s1, ... (e != NULL; c then holds the expression's HINT:
** its value for the example inputs being traced). Eager code only ever sees
** constants, and every operation has an inline constant fast path, so meta
** functions can be written once over kn_sym and cost almost nothing eagerly.
**
** Expressions live in a shape environment (kn__shape_env): symbols with their
** hints and value ranges, hash-consed expression nodes (structurally equal
** expressions are the same pointer), and the guards recorded while tracing.
** The operations on symbolic values use the calling thread's current shape
** env (kn__shape_env_current), which the tracing mode installs.
**
** Queries (==, <, <= ...) either decide statically (constants, identical
** expressions, or value ranges: sizes are >= 0, and symbols created for
** sizes that were specialised for 0 and 1 are >= 2) or report that a guard
** is needed. kn__sym_guard_* answer with the hints and record the guard in
** the current env, as PyTorch's ShapeEnv does when tracing.
*/
#ifndef KN_DYNAMIC_SYM_H
#define KN_DYNAMIC_SYM_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/core.h"

typedef struct kn__symnode kn__symnode;
typedef struct kn__shape_env kn__shape_env;

typedef struct kn_sym {
  int64_t c;              /* the constant, or the hint of the expression */
  const kn__symnode *e;   /* NULL for a constant; owned by a shape env */
} kn_sym;

static inline kn_sym kn__sym_const(int64_t v) { return (kn_sym){v, NULL}; }
static inline bool kn__sym_is_const(kn_sym a) { return a.e == NULL; }
/* The concrete value (constant) or hint (symbolic). */
static inline int64_t kn__sym_hint(kn_sym a) { return a.c; }

/* Slow paths (at least one operand symbolic); see the inline wrappers. */
kn_sym kn__sym_add_slow(kn_sym a, kn_sym b);
kn_sym kn__sym_sub_slow(kn_sym a, kn_sym b);
kn_sym kn__sym_mul_slow(kn_sym a, kn_sym b);
kn_sym kn__sym_floordiv_slow(kn_sym a, kn_sym b);
kn_sym kn__sym_mod_slow(kn_sym a, kn_sym b);
kn_sym kn__sym_max_slow(kn_sym a, kn_sym b);
kn_sym kn__sym_min_slow(kn_sym a, kn_sym b);

/* Size arithmetic never overflows silently: a result that does not fit in
** int64 saturates and sets this thread's overflow flag, which the
** dispatcher turns into an error after an op's meta function
** (kn__sym_overflow_take). */
extern _Thread_local bool kn__sym_overflowed;
/* Was there an overflow since the last call? Clears the flag. */
bool kn__sym_overflow_take(void);

static inline int64_t kn__sym_saturate(bool negative) {
  kn__sym_overflowed = true;
  return negative ? INT64_MIN : INT64_MAX;
}
static inline int64_t kn__ck_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kn__sym_saturate(a < 0) : r;
}
static inline int64_t kn__ck_sub(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_sub_overflow(a, b, &r) ? kn__sym_saturate(a < 0) : r;
}
static inline int64_t kn__ck_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kn__sym_saturate((a < 0) != (b < 0)) : r;
}

static inline int64_t kn__floordiv64(int64_t a, int64_t b) {
  if (b == -1) return kn__ck_sub(0, a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t kn__mod64(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static inline kn_sym kn__sym_add(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? kn__sym_const(kn__ck_add(a.c, b.c)) : kn__sym_add_slow(a, b);
}
static inline kn_sym kn__sym_sub(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? kn__sym_const(kn__ck_sub(a.c, b.c)) : kn__sym_sub_slow(a, b);
}
static inline kn_sym kn__sym_mul(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? kn__sym_const(kn__ck_mul(a.c, b.c)) : kn__sym_mul_slow(a, b);
}
/* Python floor division / modulo; b must not be 0 (callers check). */
static inline kn_sym kn__sym_floordiv(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? kn__sym_const(kn__floordiv64(a.c, b.c))
                        : kn__sym_floordiv_slow(a, b);
}
static inline kn_sym kn__sym_mod(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? kn__sym_const(kn__mod64(a.c, b.c)) : kn__sym_mod_slow(a, b);
}
static inline kn_sym kn__sym_max(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? kn__sym_const(a.c > b.c ? a.c : b.c) : kn__sym_max_slow(a, b);
}
static inline kn_sym kn__sym_min(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? kn__sym_const(a.c < b.c ? a.c : b.c) : kn__sym_min_slow(a, b);
}

/* Result of a static query. */
typedef enum kn__sym_truth {
  KN__SYM_FALSE = 0,
  KN__SYM_TRUE = 1,
  KN__SYM_NEEDS_GUARD = 2  /* cannot be decided without a guard */
} kn__sym_truth;

typedef enum kn__sym_rel { KN__SYM_EQ, KN__SYM_NE, KN__SYM_LT, KN__SYM_LE, KN__SYM_GT, KN__SYM_GE } kn__sym_rel;

/* Decide a rel b statically, never recording anything. */
kn__sym_truth kn__sym_query(kn_sym a, kn__sym_rel rel, kn_sym b);
/* Decide a rel b: statically if possible, else by the hints, recording the
** answer as a guard in the current shape env (e.g. "Eq(s0, s1)" or
** "Ne(s0, 10)"). Constants never need an env. */
bool kn__sym_guard(kn_sym a, kn__sym_rel rel, kn_sym b);
static inline bool kn__sym_guard_eq(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? a.c == b.c : kn__sym_guard(a, KN__SYM_EQ, b);
}
static inline bool kn__sym_guard_eq_int(kn_sym a, int64_t b) {
  return kn__sym_guard_eq(a, kn__sym_const(b));
}
static inline bool kn__sym_guard_lt(kn_sym a, kn_sym b) {
  return (!a.e && !b.e) ? a.c < b.c : kn__sym_guard(a, KN__SYM_LT, b);
}

/* Print in sympy's style ("s0*s1", "s0 + 1", "2*s0", "(s0//2)", "Max(s0, s1)")
** into buf (snprintf semantics). */
int kn__sym_format(kn_sym a, char *buf, size_t n);
/* The same with the replacements env's guards made: after Eq(s1, s2) holds,
** s2 prints as s1 (PyTorch's ShapeEnv replacements). env may be NULL. */
int kn__sym_format_canon(const kn__shape_env *env, kn_sym a, char *buf, size_t n);

/* ---- shape environments ---------------------------------------------- */
/* A new empty env; owned, free with kn__shape_env_free. NULL on OOM.
** Envs are reference counted: whatever keeps expressions of an env (a graph
** module's graph, a cache entry) holds a reference, so the expressions live
** as long as their longest holder. */
kn__shape_env *kn__shape_env_new(void);
/* Add a reference (NULL is ignored). */
void kn__shape_env_retain(kn__shape_env *env);
/* Drop a reference; the env is freed with the last one. */
void kn__shape_env_free(kn__shape_env *env);
/* The calling thread's current env (borrowed), or NULL. */
kn__shape_env *kn__shape_env_current(void);
/* Install env as current; returns the previous one (restore it after). */
kn__shape_env *kn__shape_env_set_current(kn__shape_env *env);
/* A fresh symbol s<k> (k = number of symbols so far) with the given hint and
** lower bound (use 2 for sizes specialised for 0 and 1, 0 otherwise).
** *out receives it. KN_ENOMEM on failure. */
kn_status kn__shape_env_create_symbol(kn__shape_env *env, int64_t hint,
                                      int64_t lower_bound, kn_sym *out);
/* Number of symbols and the name of symbol k ("s0"); borrowed. */
int kn__shape_env_nsymbols(const kn__shape_env *env);
/* Guards recorded so far, in order, as sympy-style strings ("Eq(s0, s1)");
** borrowed from env.
**
** Guards are kept simplified as they are added: a guard implied by one
** already recorded (the same guard again, its mirror image Eq(b, a), the
** same condition scaled, or a bound implied by an equality or a tighter
** bound on the same expression) is not recorded; a recorded guard that a new
** one implies (1024 < 64*s0 before Eq(64*s0, 8192)) stays in the list, with
** its index, but is dead: it is not checked and not counted live. */
int kn__shape_env_nguards(const kn__shape_env *env);
const char *kn__shape_env_guard_str(const kn__shape_env *env, int i);
/* The number of guards not dead, and whether guard i is dead. */
int kn__shape_env_nlive(const kn__shape_env *env);
bool kn__shape_env_guard_dead(const kn__shape_env *env, int i);
/* Called with the index of each guard as it is recorded (not for the ones
** dropped as implied), on the recording thread, e.g. to note where it came
** from. NULL removes it. */
typedef void (*kn__shape_env_guard_hook)(void *ud, const kn__shape_env *env, int index);
void kn__shape_env_set_guard_hook(kn__shape_env *env, kn__shape_env_guard_hook hook, void *ud);
/* The index k of a plain symbol (s<k>, not 2*s<k> or s<k> + 1), else -1. */
int kn__sym_symbol_index(kn_sym a);
/* Evaluate an expression for given symbol values (vals[k] for symbol k). */
int64_t kn__sym_eval(kn_sym a, const int64_t *vals);
/* Check every live recorded guard against symbol values; returns the index
** of the first failing guard, or -1 when all hold. */
int kn__shape_env_check_guards(const kn__shape_env *env, const int64_t *vals);

#endif
