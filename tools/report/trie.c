/*
** tools/report/trie.c: building and printing the stack trie.
**
** Insertion looks children up linearly: real traces have few distinct
** callers per frame. Rendering recurses once per branching level only;
** single-child chains are printed iteratively at the same list level, so a
** very deep single stack cannot exhaust the C stack.
*/
#include <stdlib.h>
#include <string.h>

#include "report/trie.h"

void rp_trie_init(rp_trie *t) { memset(t, 0, sizeof *t); }

static void node_fini(rp_trie_node *n) {
  for (size_t i = 0; i < n->nkids; i++) {
    node_fini(n->kids[i]);
    free(n->kids[i]);
  }
  free(n->kids);
  free(n->terms);
  free(n->frame.name);
  free(n->frame.loc);
}

void rp_trie_fini(rp_trie *t) {
  node_fini(&t->root);
  memset(t, 0, sizeof *t);
}

static bool same_str(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return !strcmp(a, b);
}

static bool frame_eq(const rp_frame *a, int64_t file, int64_t line,
                     const char *name, const char *loc) {
  return a->file == file && a->line == line && same_str(a->name, name) &&
         same_str(a->loc, loc);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap * 2 : 4;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, nc * elem);
  if (!q) return false;
  *p = q;
  *cap = nc;
  return true;
}

static rp_trie_node *child(rp_trie_node *n, int64_t file, int64_t line,
                           const char *name, const char *loc) {
  for (size_t i = n->nkids; i-- > 0;)
    if (frame_eq(&n->kids[i]->frame, file, line, name, loc)) return n->kids[i];
  if (!grow((void **)&n->kids, &n->capkids, n->nkids + 1, sizeof *n->kids))
    return NULL;
  rp_trie_node *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->frame.file = file;
  k->frame.line = line;
  k->frame.name = strdup(name);
  k->frame.loc = loc ? strdup(loc) : NULL;
  if (!k->frame.name || (loc && !k->frame.loc)) {
    node_fini(k);
    free(k);
    return NULL;
  }
  n->kids[n->nkids++] = k;
  return k;
}

bool rp_trie_insert(rp_trie *t, json_t *stack, size_t nframes, size_t term,
                    size_t *bad) {
  rp_trie_node *n = &t->root;
  size_t i;
  json_t *fr;
  json_array_foreach(stack, i, fr) {
    if (i >= nframes) break;
    json_t *file = json_object_get(fr, "filename");
    json_t *line = json_object_get(fr, "line");
    json_t *name = json_object_get(fr, "name");
    json_t *loc = json_object_get(fr, "loc");
    if (!json_is_integer(file) || !json_is_integer(line) ||
        !json_is_string(name)) {
      if (bad) (*bad)++;
      continue;
    }
    n = child(n, json_integer_value(file), json_integer_value(line),
              json_string_value(name),
              json_is_string(loc) ? json_string_value(loc) : NULL);
    if (!n) return false;
  }
  if (!grow((void **)&n->terms, &n->capterms, n->nterms + 1, sizeof *n->terms))
    return false;
  n->terms[n->nterms++] = term;
  t->inserted++;
  return true;
}

static void item(const rp_trie_node *n, FILE *f, const rp_trie_render *r) {
  for (size_t i = 0; i < n->nterms; i++) {
    r->term(r->ud, f, n->terms[i]);
    fputc(' ', f);
  }
  r->frame(r->ud, f, &n->frame);
}

/* Children of n: a lone child continues the current list; siblings each get
** a nested list. */
static void kids(const rp_trie_node *n, FILE *f, const rp_trie_render *r) {
  while (n->nkids == 1) {
    n = n->kids[0];
    fputs("<li>", f);
    item(n, f, r);
    fputs("</li>\n", f);
  }
  for (size_t i = 0; i < n->nkids; i++) {
    fputs("<li class=\"branch\">", f);
    item(n->kids[i], f, r);
    if (n->kids[i]->nkids) {
      fputs("\n<ul>\n", f);
      kids(n->kids[i], f, r);
      fputs("</ul>", f);
    }
    fputs("</li>\n", f);
  }
}

void rp_trie_write(const rp_trie *t, FILE *f, const rp_trie_render *r) {
  fputs("<ul class=\"trie\">\n", f);
  for (size_t i = 0; i < t->root.nterms; i++) {
    fputs("<li>", f);
    r->term(r->ud, f, t->root.terms[i]);
    fputs(" (empty stack)</li>\n", f);
  }
  kids(&t->root, f, r);
  fputs("</ul>\n", f);
}
