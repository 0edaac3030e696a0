/*
** core/alloc_hook.h: allocation fault injection. This header is included
** ahead of every library source file (CMake passes -include), after the C
** library's own declarations, and turns malloc, calloc, realloc, strdup and
** aligned_alloc into wrappers that tests can make fail at the N-th call, as
** the test builds of Lua and SQLite do. With no failure armed a wrapper costs
** one relaxed atomic load and a predictable branch.
*/
#ifndef KN_CORE_ALLOC_HOOK_H
#define KN_CORE_ALLOC_HOOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Allocations left before the armed failure; 0 = nothing armed. */
extern atomic_long kn__alloc_countdown;

/* Slow path: count one allocation; true when this one must fail. */
bool kn__alloc_tick(void);

/* Arm the hook: the n-th allocation from now (n >= 1) returns NULL, once;
** n <= 0 disarms it. Process-wide; for tests. */
void kn__alloc_fail_at(long n);
/* Did the armed failure happen since the last kn__alloc_fail_at? */
bool kn__alloc_failed(void);

static inline bool kn__alloc_should_fail(void) {
  if (__builtin_expect(atomic_load_explicit(&kn__alloc_countdown, memory_order_relaxed) == 0, 1))
    return false;
  return kn__alloc_tick();
}

static inline void *kn__malloc(size_t n) { return kn__alloc_should_fail() ? NULL : malloc(n); }
static inline void *kn__calloc(size_t n, size_t m) {
  return kn__alloc_should_fail() ? NULL : calloc(n, m);
}
static inline void *kn__realloc(void *p, size_t n) {
  return kn__alloc_should_fail() ? NULL : realloc(p, n);
}
static inline char *kn__strdup(const char *s) { return kn__alloc_should_fail() ? NULL : strdup(s); }
static inline void *kn__aligned_alloc(size_t a, size_t n) {
  return kn__alloc_should_fail() ? NULL : aligned_alloc(a, n);
}

#define malloc(n) kn__malloc(n)
#define calloc(n, m) kn__calloc(n, m)
#define realloc(p, n) kn__realloc(p, n)
#define strdup(s) kn__strdup(s)
#define aligned_alloc(a, n) kn__aligned_alloc(a, n)

#endif
