/*
** core/arena.c: bump allocation in chained blocks.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"

struct kn__arena_block {
  kn__arena_block *prev;
  size_t cap, off;
  _Alignas(16) unsigned char data[];
};

void kn__arena_init(kn__arena *a, size_t block_size) {
  a->head = NULL;
  a->block_size = block_size ? block_size : (size_t)64 << 10;
  a->used = 0;
}

void kn__arena_fini(kn__arena *a) {
  kn__arena_block *b = a->head;
  while (b) {
    kn__arena_block *p = b->prev;
    free(b);
    b = p;
  }
  a->head = NULL;
  a->used = 0;
}

void *kn__arena_alloc(kn__arena *a, size_t n) {
  size_t need = (n + 15) & ~(size_t)15;
  if (need < n) return NULL; /* overflow */
  kn__arena_block *b = a->head;
  if (!b || b->cap - b->off < need) {
    size_t cap = need > a->block_size ? need : a->block_size;
    if (cap > SIZE_MAX - sizeof *b) return NULL;
    b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->off = 0;
    b->prev = a->head;
    a->head = b;
  }
  void *p = b->data + b->off;
  b->off += need;
  a->used += need;
  return p;
}

void *kn__arena_calloc(kn__arena *a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) return NULL;
  void *p = kn__arena_alloc(a, count * size);
  if (p) memset(p, 0, count * size);
  return p;
}

char *kn__arena_strndup(kn__arena *a, const char *s, size_t n) {
  char *p = kn__arena_alloc(a, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *kn__arena_strdup(kn__arena *a, const char *s) {
  return kn__arena_strndup(a, s, strlen(s));
}
