/*
** core/intern.c: interning on top of the string hash map.
*/
#include <stdlib.h>

#include "core/intern.h"

void kn__intern_init(kn__intern *t) {
  kn__hm_init(&t->ids, true);
  kn__arena_init(&t->strings, 0);
  t->by_id = NULL;
  t->len = t->cap = 0;
}

void kn__intern_fini(kn__intern *t) {
  kn__hm_fini(&t->ids);
  kn__arena_fini(&t->strings);
  free(t->by_id);
  t->by_id = NULL;
  t->len = t->cap = 0;
}

const char *kn__intern_add(kn__intern *t, const char *s, uint32_t *id, int *is_new) {
  bool found;
  uintptr_t v = (uintptr_t)kn__hm_get(&t->ids, s, &found);
  if (found) {
    if (id) *id = (uint32_t)(v - 1);
    if (is_new) *is_new = 0;
    return t->by_id[v - 1];
  }
  if (t->len == t->cap) {
    uint32_t ncap = t->cap ? t->cap * 2 : 32;
    const char **nb = realloc(t->by_id, ncap * sizeof *nb);
    if (!nb) return NULL;
    t->by_id = nb;
    t->cap = ncap;
  }
  char *copy = kn__arena_strdup(&t->strings, s);
  if (!copy || !kn__hm_put(&t->ids, s, (void *)(uintptr_t)(t->len + 1)))
    return NULL;
  t->by_id[t->len] = copy;
  if (id) *id = t->len;
  if (is_new) *is_new = 1;
  t->len++;
  return copy;
}

const char *kn__intern_str(const kn__intern *t, uint32_t id) {
  return id < t->len ? t->by_id[id] : NULL;
}
