/*
** tools/report/trie.c: building and printing the stack trie.
**
** Every node but the root sits in one open-addressing table keyed by
** (parent, frame), so looking a child up costs the same for a node with
** one child or a million. Nodes are freed by walking that table, and
** rendering keeps its own stack, so neither recurses over the input's
** depth.
*/
#include <stdlib.h>
#include <string.h>

#include "core/hashmap.h"
#include "report/trie.h"

void rp_trie_init(rp_trie *t) { memset(t, 0, sizeof *t); }

static void node_free(rp_trie_node *n) {
  free(n->kids);
  free(n->terms);
  free(n->frame.name);
  free(n->frame.loc);
}

void rp_trie_fini(rp_trie *t) {
  for (size_t i = 0; i < t->tabcap; i++)
    if (t->tab[i]) {
      node_free(t->tab[i]);
      free(t->tab[i]);
    }
  free(t->tab);
  node_free(&t->root);
  memset(t, 0, sizeof *t);
}

static bool same_str(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return !strcmp(a, b);
}

static bool frame_eq(const rp_frame *a, const rp_frame *b) {
  return a->file == b->file && a->line == b->line &&
         same_str(a->name, b->name) && same_str(a->loc, b->loc);
}

static uint64_t frame_hash(const rp_trie_node *parent, const rp_frame *f) {
  uint64_t h = kn__hash_u64((uint64_t)(uintptr_t)parent);
  h = kn__hash_u64(h ^ (uint64_t)f->file) + (uint64_t)f->line;
  h = kn__hash_u64(h) ^ kn__hash_str(f->name);
  return kn__hash_u64(h ^ (f->loc ? kn__hash_str(f->loc) : 7));
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

static void tab_place(rp_trie_node **tab, size_t cap, rp_trie_node *n) {
  size_t i = n->hash & (cap - 1);
  while (tab[i]) i = (i + 1) & (cap - 1);
  tab[i] = n;
}

/* Keep the table at most half full. */
static bool tab_reserve(rp_trie *t) {
  if ((t->nnodes + 1) * 2 <= t->tabcap) return true;
  size_t nc = t->tabcap ? t->tabcap * 2 : 64;
  rp_trie_node **nt = calloc(nc, sizeof *nt);
  if (!nt) return false;
  for (size_t i = 0; i < t->tabcap; i++)
    if (t->tab[i]) tab_place(nt, nc, t->tab[i]);
  free(t->tab);
  t->tab = nt;
  t->tabcap = nc;
  return true;
}

static rp_trie_node *lookup(const rp_trie *t, const rp_trie_node *parent,
                            const rp_frame *f, uint64_t h) {
  if (!t->tabcap) return NULL;
  for (size_t i = h & (t->tabcap - 1); t->tab[i]; i = (i + 1) & (t->tabcap - 1)) {
    rp_trie_node *k = t->tab[i];
    if (k->hash == h && k->parent == parent && frame_eq(&k->frame, f))
      return k;
  }
  return NULL;
}

static rp_trie_node *new_child(rp_trie *t, rp_trie_node *n, const rp_frame *f,
                               uint64_t h) {
  if (!tab_reserve(t) ||
      !grow((void **)&n->kids, &n->capkids, n->nkids + 1, sizeof *n->kids))
    return NULL;
  rp_trie_node *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->frame.file = f->file;
  k->frame.line = f->line;
  k->frame.name = strdup(f->name);
  k->frame.loc = f->loc ? strdup(f->loc) : NULL;
  if (!k->frame.name || (f->loc && !k->frame.loc)) {
    node_free(k);
    free(k);
    return NULL;
  }
  k->parent = n;
  k->hash = h;
  k->depth = n->depth + 1;
  if (k->depth > t->maxdepth) t->maxdepth = k->depth;
  tab_place(t->tab, t->tabcap, k);
  t->nnodes++;
  n->kids[n->nkids++] = k;
  return k;
}

static rp_trie_node *child(rp_trie *t, rp_trie_node *n, const rp_frame *f) {
  uint64_t h = frame_hash(n, f);
  rp_trie_node *k = lookup(t, n, f, h);
  return k ? k : new_child(t, n, f, h);
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
    rp_frame f = {json_integer_value(file), json_integer_value(line),
                  (char *)json_string_value(name),
                  json_is_string(loc) ? (char *)json_string_value(loc) : NULL};
    n = child(t, n, &f);
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

/* A lone child continues the current list; returns the chain's last node. */
static const rp_trie_node *chain(const rp_trie_node *n, FILE *f,
                                 const rp_trie_render *r) {
  while (n->nkids == 1) {
    n = n->kids[0];
    fputs("<li>", f);
    item(n, f, r);
    fputs("</li>\n", f);
  }
  return n;
}

typedef struct pos {
  const rp_trie_node *n;
  size_t next;
} pos;

/* Siblings each get a nested list; an explicit stack replaces recursion. */
static void branches(const rp_trie_node *top, FILE *f, const rp_trie_render *r) {
  pos *st = NULL;
  size_t n = 0, cap = 0;
  if (!grow((void **)&st, &cap, 1, sizeof *st)) return;
  st[n++] = (pos){chain(top, f, r), 0};
  while (n) {
    pos *p = &st[n - 1];
    if (p->next == p->n->nkids) {
      if (--n) fputs("</ul></li>\n", f);
      continue;
    }
    const rp_trie_node *k = p->n->kids[p->next++];
    fputs("<li class=\"branch\">", f);
    item(k, f, r);
    if (!k->nkids) {
      fputs("</li>\n", f);
      continue;
    }
    fputs("\n<ul>\n", f);
    if (!grow((void **)&st, &cap, n + 1, sizeof *st)) break;
    st[n++] = (pos){chain(k, f, r), 0};
  }
  free(st);
}

void rp_trie_write(const rp_trie *t, FILE *f, const rp_trie_render *r) {
  fputs("<ul class=\"trie\">\n", f);
  for (size_t i = 0; i < t->root.nterms; i++) {
    fputs("<li>", f);
    r->term(r->ud, f, t->root.terms[i]);
    fputs(" (empty stack)</li>\n", f);
  }
  branches(&t->root, f, r);
  fputs("</ul>\n", f);
}
