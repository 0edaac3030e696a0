/*
** kiln/random.h: seedable random number generators.
**
** A kn_generator is a counter-based Philox4x32-10 stream: (seed, offset).
** Each random op reads the counters [offset, offset + n) and advances
** offset, so results depend only on the seed and the sequence of ops, never
** on the number of threads. A generator is not thread-safe: use one per
** thread. Random ops take a generator; NULL means the process-wide default
** generator (documented global state, seeded with kn_manual_seed; seed 0 at
** start).
*/
#ifndef KILN_RANDOM_H
#define KILN_RANDOM_H

#include "kiln/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_generator kn_generator;

/* A new generator. Owned: free with kn_generator_free. NULL on OOM. */
KN_API kn_generator *kn_generator_new(uint64_t seed);
KN_API void kn_generator_free(kn_generator *g);
/* Restart g (or the default generator when g is NULL) from seed. */
KN_API void kn_generator_seed(kn_generator *g, uint64_t seed);
/* Seed the default generator. */
KN_API void kn_manual_seed(uint64_t seed);
/* Current position of the stream (to save and restore it). */
KN_API uint64_t kn_generator_offset(const kn_generator *g);
KN_API void kn_generator_set_offset(kn_generator *g, uint64_t offset);

#ifdef __cplusplus
}
#endif
#endif
