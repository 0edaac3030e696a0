/*
** core/hashmap.c: linear probing with tombstones, grown at 70% load.
*/
#include <stdlib.h>
#include <string.h>

#include "core/hashmap.h"

#define EMPTY 0u
#define DELETED 1u

uint64_t kn__hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t kn__hash_str(const char *s) { return kn__hash_bytes(s, strlen(s)); }

uint64_t kn__hash_u64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

void kn__hm_init(kn__hashmap *m, bool str_keys) {
  memset(m, 0, sizeof *m);
  m->str_keys = str_keys;
}

void kn__hm_fini(kn__hashmap *m) {
  if (m->str_keys)
    for (size_t i = 0; i < m->cap; i++)
      if (m->slots[i].hash > DELETED) free(m->slots[i].key.s);
  free(m->slots);
  kn__hm_init(m, m->str_keys);
}

static uint64_t tag(uint64_t h) { return h | 2u; }

static bool key_eq(const kn__hashmap *m, const kn__hm_slot *s, const char *sk,
                   uint64_t uk) {
  if (!m->str_keys) return s->key.u == uk;
  return sk && strcmp(s->key.s, sk) == 0;
}

/* Index of the slot holding the key, or of the slot to insert it into. */
static size_t probe(const kn__hashmap *m, uint64_t h, const char *sk,
                    uint64_t uk, bool *hit) {
  size_t mask = m->cap - 1, i = (size_t)h & mask, tomb = (size_t)-1;
  for (;;) {
    const kn__hm_slot *s = &m->slots[i];
    if (s->hash == EMPTY) {
      *hit = false;
      return tomb != (size_t)-1 ? tomb : i;
    }
    if (s->hash == DELETED) {
      if (tomb == (size_t)-1) tomb = i;
    } else if (s->hash == h && key_eq(m, s, sk, uk)) {
      *hit = true;
      return i;
    }
    i = (i + 1) & mask;
  }
}

static bool grow(kn__hashmap *m) {
  size_t ncap = m->cap ? m->cap * 2 : 16;
  if (m->len * 2 < m->cap) ncap = m->cap; /* mostly tombstones: rehash */
  kn__hm_slot *old = m->slots;
  size_t ocap = m->cap;
  kn__hm_slot *ns = calloc(ncap, sizeof *ns);
  if (!ns) return false;
  m->slots = ns;
  m->cap = ncap;
  m->used = m->len;
  for (size_t i = 0; i < ocap; i++) {
    if (old[i].hash <= DELETED) continue;
    bool hit;
    size_t j = probe(m, old[i].hash, old[i].key.s, old[i].key.u, &hit);
    m->slots[j] = old[i];
  }
  free(old);
  return true;
}

static bool put(kn__hashmap *m, uint64_t h, const char *sk, uint64_t uk,
                void *val) {
  if ((m->used + 1) * 10 > m->cap * 7 && !grow(m)) return false;
  bool hit;
  size_t i = probe(m, h, sk, uk, &hit);
  kn__hm_slot *s = &m->slots[i];
  if (hit) {
    s->val = val;
    return true;
  }
  if (m->str_keys) {
    char *copy = strdup(sk);
    if (!copy) return false;
    s->key.s = copy;
  } else {
    s->key.u = uk;
  }
  if (s->hash == EMPTY) m->used++;
  s->hash = h;
  s->val = val;
  m->len++;
  return true;
}

static void *get(const kn__hashmap *m, uint64_t h, const char *sk, uint64_t uk,
                 bool *found) {
  bool hit = false;
  size_t i = m->cap ? probe(m, h, sk, uk, &hit) : 0;
  if (found) *found = hit;
  return hit ? m->slots[i].val : NULL;
}

static bool del(kn__hashmap *m, uint64_t h, const char *sk, uint64_t uk) {
  bool hit = false;
  size_t i = m->cap ? probe(m, h, sk, uk, &hit) : 0;
  if (!hit) return false;
  if (m->str_keys) free(m->slots[i].key.s);
  m->slots[i].hash = DELETED;
  m->slots[i].val = NULL;
  m->len--;
  return true;
}

bool kn__hm_put(kn__hashmap *m, const char *key, void *val) {
  return put(m, tag(kn__hash_str(key)), key, 0, val);
}
bool kn__hm_put_u64(kn__hashmap *m, uint64_t key, void *val) {
  return put(m, tag(kn__hash_u64(key)), NULL, key, val);
}
void *kn__hm_get(const kn__hashmap *m, const char *key, bool *found) {
  return get(m, tag(kn__hash_str(key)), key, 0, found);
}
void *kn__hm_get_u64(const kn__hashmap *m, uint64_t key, bool *found) {
  return get(m, tag(kn__hash_u64(key)), NULL, key, found);
}
bool kn__hm_del(kn__hashmap *m, const char *key) {
  return del(m, tag(kn__hash_str(key)), key, 0);
}
bool kn__hm_del_u64(kn__hashmap *m, uint64_t key) {
  return del(m, tag(kn__hash_u64(key)), NULL, key);
}

bool kn__hm_next(const kn__hashmap *m, size_t *i, const kn__hm_slot **slot) {
  while (*i < m->cap) {
    const kn__hm_slot *s = &m->slots[(*i)++];
    if (s->hash > DELETED) {
      *slot = s;
      return true;
    }
  }
  return false;
}
