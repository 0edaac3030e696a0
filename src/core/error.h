/*
** core/error.h: raising errors. A failing internal function records its
** status and message with kn__error() and returns the status, so callers
** write `return kn__error(KN_ESHAPE, "...", ...);`.
*/
#ifndef KN_CORE_ERROR_H
#define KN_CORE_ERROR_H

#include <assert.h>
#include <stddef.h>
#include "kiln/core.h"

#define KN__ERROR_CAP 2048

/* Record status s and a printf-style message as this thread's last error;
** returns s. Messages longer than KN__ERROR_CAP are truncated with "...". */
kn_status kn__error(kn_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefix the current last-error message with a printf-style context, keeping
** the status: "while tracing fn at f.c:10: <old message>". Returns the status. */
kn_status kn__error_context(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* The current error made a public call return a NULL tensor (op wrappers,
** kn_module_get). */
void kn__error_null_result(void);
/* The hint for a NULL tensor argument: " (did an earlier call fail? <first
** line of that call's error>)" when the last error on this thread made a
** call return a NULL tensor, else "" (an error of another kind, or none,
** explains nothing). Written into buf. */
const char *kn__error_hint(char *buf, size_t n);
#define KN__HINT_CAP 360
/* This thread's last error, saved and put back around work done on the
** side that reports through kn__error but must not change what the caller
** sees (the symbolizer's disk cache, core/symcache.h). */
typedef struct kn__error_state {
  char msg[KN__ERROR_CAP];
  kn_status status;
  unsigned long serial;
} kn__error_state;
void kn__error_save(kn__error_state *s);
void kn__error_restore(const kn__error_state *s);
/* Shorthand for an allocation failure; returns KN_ENOMEM. */
kn_status kn__oom(void);

/* Internal invariants (never user input). */
#define KN_ASSERT(x) assert(x)

#endif
