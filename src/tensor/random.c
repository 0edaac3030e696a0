/*
** tensor/random.c: Philox4x32-10 (Salmon et al., "Parallel random numbers:
** as easy as 1, 2, 3", SC11) and the generator objects.
*/
#include <stdlib.h>

#include "tensor/random.h"

static kn_generator default_gen = {0, 0};

kn_generator *kn_generator_new(uint64_t seed) {
  kn_generator *g = malloc(sizeof *g);
  if (g) {
    g->seed = seed;
    g->offset = 0;
  }
  return g;
}

void kn_generator_free(kn_generator *g) { free(g); }

void kn_generator_seed(kn_generator *g, uint64_t seed) {
  g = kn__generator_or_default(g);
  g->seed = seed;
  g->offset = 0;
}

void kn_manual_seed(uint64_t seed) { kn_generator_seed(NULL, seed); }
uint64_t kn_generator_offset(const kn_generator *g) { return g ? g->offset : default_gen.offset; }
void kn_generator_set_offset(kn_generator *g, uint64_t offset) {
  kn__generator_or_default(g)->offset = offset;
}

kn_generator *kn__generator_or_default(kn_generator *g) { return g ? g : &default_gen; }

uint64_t kn__generator_reserve(kn_generator *g, uint64_t nblocks) {
  g = kn__generator_or_default(g);
  uint64_t first = g->offset;
  g->offset += nblocks;
  return first;
}

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}

void kn__philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, c0, &hi0, &lo0);
    mulhilo(0xCD9E8D57u, c2, &hi1, &lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

void kn__philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0, 0};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  kn__philox4x32(ctr, key, out);
}
