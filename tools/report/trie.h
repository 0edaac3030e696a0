/*
** tools/report/trie.h: the stack trie of compiles.
**
** Each dynamo_start stack (outermost frame first) is inserted as a path;
** the compile id that started there is a terminal of the last node. Frames
** are equal when filename id, line, name and source text are equal. Children
** keep insertion order, so the rendering is chronological and deterministic.
** A chain without branching prints as a flat list; nesting appears only
** where stacks diverge. Children are found through one hash table over
** (parent, frame), so many distinct stacks insert in linear time, and
** freeing and printing are iterative, so a stack of any depth is safe.
*/
#ifndef KN_TOOLS_REPORT_TRIE_H
#define KN_TOOLS_REPORT_TRIE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rp_frame {
  int64_t file;      /* interned filename id */
  int64_t line;
  char *name;        /* owned */
  char *loc;         /* owned; NULL when absent */
} rp_frame;

typedef struct rp_trie_node {
  rp_frame frame;
  struct rp_trie_node *parent;
  uint64_t hash;     /* of (parent, frame), for the child table */
  size_t depth;      /* frames from the root */
  struct rp_trie_node **kids;
  size_t nkids, capkids;
  size_t *terms;     /* compile indices ending here */
  size_t nterms, capterms;
} rp_trie_node;

typedef struct rp_trie {
  rp_trie_node root;
  size_t inserted;   /* number of stacks inserted */
  rp_trie_node **tab;/* open addressing over every non-root node */
  size_t tabcap, nnodes;
  size_t maxdepth;   /* deepest node, in frames */
} rp_trie;

void rp_trie_init(rp_trie *t);
void rp_trie_fini(rp_trie *t);
/* Insert the first nframes frames of a JSON stack (array of {filename,
** line, name[, loc]} objects) ending at compile index term. Malformed frames
** are skipped and counted in *bad (optional). false on OOM. */
bool rp_trie_insert(rp_trie *t, json_t *stack, size_t nframes, size_t term,
                    size_t *bad);

/* Renderers supplied by the caller. */
typedef struct rp_trie_render {
  void (*frame)(void *ud, FILE *f, const rp_frame *fr);
  void (*term)(void *ud, FILE *f, size_t compile);
  void *ud;
} rp_trie_render;

/* Write the trie as nested <ul>/<li> HTML (iteratively). */
void rp_trie_write(const rp_trie *t, FILE *f, const rp_trie_render *r);

#endif
