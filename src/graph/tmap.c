/*
** graph/tmap.c: the tensor-to-value map recording modes share.
*/
#include <stdlib.h>

#include "core/error.h"
#include "graph/graph.h"
#include "tensor/tensor.h"

kn_status kn__tmap_bind(kn__tmap *m, kn_tensor *t, kn__gref v) {
  if (m->n == m->cap) {
    int cap = m->cap ? 2 * m->cap : 32;
    kn__tmap_entry *e = realloc(m->e, (size_t)cap * sizeof *e);
    if (!e) return kn__oom();
    m->e = e;
    m->cap = cap;
  }
  m->e[m->n++] = (kn__tmap_entry){kn_retain(t), v};
  return KN_OK;
}

bool kn__tmap_find(const kn__tmap *m, const kn_tensor *t, kn__gref *out) {
  for (int i = m->n - 1; i >= 0; i--)
    if (m->e[i].t == t) {
      *out = m->e[i].v;
      return true;
    }
  return false;
}

void kn__tmap_fini(kn__tmap *m) {
  for (int i = 0; i < m->n; i++) kn_release(m->e[i].t);
  free(m->e);
  *m = (kn__tmap){0};
}
