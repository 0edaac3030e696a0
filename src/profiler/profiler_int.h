/*
** profiler/profiler_int.h: the event record shared by profiler.c
** (recording) and export.c (Chrome trace, table).
*/
#ifndef KN_PROFILER_PROFILER_INT_H
#define KN_PROFILER_PROFILER_INT_H

#include <stdint.h>

typedef struct kn__prof_ev {
  char *name;           /* owned */
  const char *category; /* static */
  char *shapes;         /* owned, may be NULL */
  int64_t start_ns, dur_ns;
  uint64_t thread;
  int64_t seq;
} kn__prof_ev;

/* A copy of the event array (the strings stay owned by the profiler; valid
** until the next start/clear). *out is malloc'd (free it). Count or -1. */
int kn__prof_snapshot(kn__prof_ev **out);

#endif
