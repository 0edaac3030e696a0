/*
** core/intern.h: string interning. Equal strings map to one pointer and one
** dense id (0, 1, 2, ... in order of first sight), so they compare with ==
** and index side tables. The table owns its strings.
*/
#ifndef KN_CORE_INTERN_H
#define KN_CORE_INTERN_H

#include <stdint.h>

#include "core/arena.h"
#include "core/hashmap.h"

typedef struct kn__intern {
  kn__hashmap ids;     /* string -> (id + 1) */
  kn__arena strings;   /* the interned bytes */
  const char **by_id;  /* id -> string */
  uint32_t len, cap;
} kn__intern;

void kn__intern_init(kn__intern *t);
void kn__intern_fini(kn__intern *t);
/* The canonical copy of s (borrowed from t, valid until fini); NULL on OOM.
** *id (optional) receives its id; *is_new (optional) whether it was new. */
const char *kn__intern_add(kn__intern *t, const char *s, uint32_t *id, int *is_new);
/* The string with this id, or NULL if out of range. Borrowed. */
const char *kn__intern_str(const kn__intern *t, uint32_t id);

#endif
