/*
** core/hashmap.h: an open-addressing hash map from keys to void* values.
** Keys are either NUL-terminated strings (copied into the map) or 64-bit
** integers; one map holds one kind. Insertion order is not kept.
*/
#ifndef KN_CORE_HASHMAP_H
#define KN_CORE_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kn__hm_slot {
  uint64_t hash;  /* 0 = empty, 1 = deleted, else hash | 2 */
  union { char *s; uint64_t u; } key;
  void *val;
} kn__hm_slot;

typedef struct kn__hashmap {
  kn__hm_slot *slots;
  size_t cap;   /* power of two, or 0 */
  size_t len;   /* live entries */
  size_t used;  /* live + deleted */
  bool str_keys;
} kn__hashmap;

/* str_keys selects string keys (copied, owned by the map) or u64 keys. */
void kn__hm_init(kn__hashmap *m, bool str_keys);
/* Frees the map's key copies; values are the caller's. */
void kn__hm_fini(kn__hashmap *m);

/* Insert or replace. Returns false on OOM (the map is unchanged). */
bool kn__hm_put(kn__hashmap *m, const char *key, void *val);
bool kn__hm_put_u64(kn__hashmap *m, uint64_t key, void *val);
/* Lookup; *found (optional) tells a stored NULL from a missing key. */
void *kn__hm_get(const kn__hashmap *m, const char *key, bool *found);
void *kn__hm_get_u64(const kn__hashmap *m, uint64_t key, bool *found);
/* Remove; returns whether the key was present. */
bool kn__hm_del(kn__hashmap *m, const char *key);
bool kn__hm_del_u64(kn__hashmap *m, uint64_t key);

/* Iterate: for (size_t i = 0; kn__hm_next(m, &i, &slot);) ... */
bool kn__hm_next(const kn__hashmap *m, size_t *i, const kn__hm_slot **slot);

/* 64-bit FNV-1a of n bytes, and of a C string. */
uint64_t kn__hash_bytes(const void *p, size_t n);
uint64_t kn__hash_str(const char *s);
uint64_t kn__hash_u64(uint64_t x);

#endif
