/*
** core/arena.h: a bump allocator. Objects that live exactly as long as one
** owner (a graph, a parse, a compile) are carved from an arena and released
** together by kn__arena_fini(). Allocation failure returns NULL.
*/
#ifndef KN_CORE_ARENA_H
#define KN_CORE_ARENA_H

#include <stddef.h>

typedef struct kn__arena_block kn__arena_block;

typedef struct kn__arena {
  kn__arena_block *head; /* newest block; blocks are chained to older ones */
  size_t block_size;     /* default size of new blocks */
  size_t used;           /* bytes handed out, for statistics */
} kn__arena;

/* Initialise an empty arena; block_size 0 picks 64 KiB. */
void kn__arena_init(kn__arena *a, size_t block_size);
/* Release every block. The arena may be reused after kn__arena_init. */
void kn__arena_fini(kn__arena *a);
/* n bytes aligned to 16, uninitialised; owned by the arena. NULL on OOM. */
void *kn__arena_alloc(kn__arena *a, size_t n);
/* n zeroed bytes; owned by the arena. NULL on OOM. */
void *kn__arena_calloc(kn__arena *a, size_t count, size_t size);
/* A NUL-terminated copy of s (or of its first n bytes); owned by the arena. */
char *kn__arena_strdup(kn__arena *a, const char *s);
char *kn__arena_strndup(kn__arena *a, const char *s, size_t n);

#endif
