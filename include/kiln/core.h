/*
** kiln/core.h: the pieces every other kiln header builds on: the export
** macro, status codes, the thread-local last-error message, version.
**
** Error convention (one sentence): every kiln function that can fail returns
** a kn_status (KN_OK is 0, errors are negative) or NULL, and then
** kn_last_error() names what was expected and what was found.
*/
#ifndef KILN_CORE_H
#define KILN_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KN_BUILDING)
#define KN_API __attribute__((visibility("default")))
#else
#define KN_API
#endif

#define KN_VERSION_MAJOR 0
#define KN_VERSION_MINOR 1
#define KN_VERSION_PATCH 0

/* X-macro: code, value, name, description. */
#define KN_STATUS_MAP(X)                                                     \
  X(KN_OK, 0, "ok", "success")                                               \
  X(KN_EINVAL, -1, "invalid_argument", "invalid argument")                  \
  X(KN_ESHAPE, -2, "shape_error", "incompatible shapes")                    \
  X(KN_EDTYPE, -3, "dtype_error", "unsupported or mismatched dtype")        \
  X(KN_ENOMEM, -4, "out_of_memory", "out of memory")                        \
  X(KN_EIO, -5, "io_error", "input/output error")                           \
  X(KN_EPARSE, -6, "parse_error", "malformed input")                        \
  X(KN_ERANGE, -7, "out_of_range", "index or value out of range")           \
  X(KN_EAUTOGRAD, -8, "autograd_error", "autograd misuse")                  \
  X(KN_EUNSUPPORTED, -9, "unsupported", "operation not supported")          \
  X(KN_ESTATE, -10, "bad_state", "operation not valid in the current state") \
  X(KN_EINTERNAL, -11, "internal_error", "internal error")

typedef enum kn_status {
#define KN__STATUS_ENUM(code, val, name, desc) code = val,
  KN_STATUS_MAP(KN__STATUS_ENUM)
#undef KN__STATUS_ENUM
} kn_status;

/* Short stable name of a status ("shape_error"); a static string. */
KN_API const char *kn_status_name(kn_status s);
/* One-line description of a status; a static string. */
KN_API const char *kn_status_str(kn_status s);

/* The message of the last error raised on this thread, or "" if none.
** Borrowed: valid until the next kiln call on this thread that fails.
** Like errno, the last error is sticky: successful calls do not reset it;
** only the next failure replaces it and kn_clear_error() forgets it. Check
** a call's own return value (NULL / negative status) before reading it. */
KN_API const char *kn_last_error(void);
/* The status of the last error on this thread (KN_OK if none or after
** kn_clear_error()); sticky as above. */
KN_API kn_status kn_last_status(void);
/* Forget the last error on this thread. */
KN_API void kn_clear_error(void);

/* "0.1.0"; a static string. */
KN_API const char *kn_version(void);

#ifdef __cplusplus
}
#endif
#endif
