/*
** trace/compile_id.c: parsing the PyTorch string form of a CompileId.
**
** Grammar (trace format spec §2.2), ASCII digits only, nothing after:
**   compile-id = N "/" N  |  "!" N [ "/" N "/" N ]
** Each N must fit in an int32 (tlparse stores u32, PyTorch ids are small);
** unlike Python's regexes, a trailing newline or a Unicode digit is refused.
*/
#include <stdint.h>

#include "core/error.h"
#include "trace/compile_id.h"

/* One decimal number at *p; advances *p. False when there is no digit or the
** value exceeds INT32_MAX. */
static bool number(const char **p, int64_t *out) {
  const char *s = *p;
  int64_t v = 0;
  if (*s < '0' || *s > '9') return false;
  for (; *s >= '0' && *s <= '9'; s++) {
    v = v * 10 + (*s - '0');
    if (v > INT32_MAX) return false;
  }
  *p = s;
  *out = v;
  return true;
}

static bool parse(const char *s, kn_compile_id *id) {
  *id = KN_COMPILE_ID_NONE;
  if (*s == '!') {
    s++;
    if (!number(&s, &id->compiled_autograd_id)) return false;
    if (*s == '\0') return true;
    if (*s++ != '/') return false;
  }
  if (!number(&s, &id->frame_id)) return false;
  if (*s++ != '/') return false;
  if (!number(&s, &id->frame_compile_id)) return false;
  return *s == '\0';
}

kn_status kn__compile_id_parse(const char *s, kn_compile_id *out) {
  kn_compile_id id;
  if (!s)
    return kn__error(KN_EINVAL, "Invalid compile_id: expected a string, found NULL");
  if (!parse(s, &id))
    return kn__error(KN_EPARSE,
                     "Invalid compile_id '%s': expected \"F/C\", \"!A\" or "
                     "\"!A/F/C\" with decimal numbers below 2^31",
                     s);
  *out = id;
  return KN_OK;
}
