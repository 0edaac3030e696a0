/*
** tensor/random.h: the Philox stream behind kn_generator (internal).
*/
#ifndef KN_TENSOR_RANDOM_H
#define KN_TENSOR_RANDOM_H

#include "kiln/random.h"

struct kn_generator {
  uint64_t seed;
  uint64_t offset; /* in blocks of four 32-bit outputs */
};

/* The default generator when g is NULL; borrowed. */
kn_generator *kn__generator_or_default(kn_generator *g);
/* Reserve n blocks; returns the first block's counter. */
uint64_t kn__generator_reserve(kn_generator *g, uint64_t nblocks);
/* Philox4x32-10 on a raw 128-bit counter and 64-bit key. */
void kn__philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* The four 32-bit outputs of block `counter` for `seed`. */
void kn__philox(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* Uniform doubles in [0, 1) with 53 random bits from two 32-bit words. */
static inline double kn__u01_double(uint32_t a, uint32_t b) {
  return (double)(((uint64_t)a << 21) ^ (b >> 11)) * (1.0 / 9007199254740992.0);
}
/* Uniform floats in [0, 1) with 24 random bits. */
static inline float kn__u01_float(uint32_t a) { return (float)(a >> 8) * (1.0f / 16777216.0f); }

#endif
