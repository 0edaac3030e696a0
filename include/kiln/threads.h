/*
** kiln/threads.h: how many threads kiln's kernels use.
**
** One process-wide setting governs every parallel loop kiln runs: the eager
** kernels, the loops of generated (compiled) code, oneDNN's GEMMs and
** convolutions and OpenBLAS's float64 GEMMs. Its first value comes from the
** environment variable KILN_NUM_THREADS (a whole number from 1 to
** KN_MAX_THREADS; a malformed value is reported once as a warning and
** ignored); unset, kiln follows OpenMP's own default (OMP_NUM_THREADS, else
** one thread per core). A new value takes effect on every thread that calls
** into kiln afterwards, including threads that already exist: each applies
** it at its next op or compiled call.
*/
#ifndef KILN_THREADS_H
#define KILN_THREADS_H

#include "kiln/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_MAX_THREADS 4096

/* Use n threads (1 <= n <= KN_MAX_THREADS) from now on. KN_EINVAL, naming
** the value found, for anything else (nothing changes then). */
KN_API kn_status kn_set_num_threads(int n);
/* The number of threads kiln's kernels use now: the last kn_set_num_threads
** value, else KILN_NUM_THREADS, else OpenMP's default for this thread. */
KN_API int kn_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif
