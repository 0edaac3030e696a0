/*
** dynamo/frame.h: one frame compile in progress (frame.c): its compile id
** and context, timings, and the records it writes (see frame.c).
*/
#ifndef KN_DYNAMO_FRAME_H
#define KN_DYNAMO_FRAME_H

#include "dynamo/dynamo.h"

typedef struct kn__fc {
  kn__frame *frame;       /* borrowed */
  kn_compile_id cid;
  kn__compile_ctx saved;
  bool quiet;             /* replaying a known segment: no records */
  double start_wall_us, t0, tbegin, backend_t0, backend_us;
  int graph_ops, graph_nodes, graph_inputs;
  int guard_count, shape_guard_count;
  bool has_guarded_code;
  int nrestart;
  char *restart[4];       /* owned */
} kn__fc;

typedef struct kn__fc_info {
  int cache_size;
  bool suppress_errors;
  const char *fail_type, *fail_reason, *fail_file;
  int fail_line;
} kn__fc_info;

/* Enter the frame's next compile (allocating its frame id on first use):
** [the recompile note], dynamo_start, chromium B events, Step 1. */
void kn__fc_begin(kn__fc *c, kn__frame *fr, const kn__recompile_note *note, bool quiet);
/* A restart of the analysis (graph break): attempt + 1, reason kept for
** compilation_metrics.restart_reasons. */
void kn__fc_restart(kn__fc *c, const char *reason);
/* The traced graph: dynamo_output_graph and the graph log artifacts (skipped
** for graphs without ops). */
void kn__fc_graph(kn__fc *c, const kn__graph *g);
void kn__fc_backend_begin(kn__fc *c, const char *backend);
void kn__fc_backend_end(kn__fc *c, const char *backend);
/* The guard dump: dynamo_cpp_guards_str and the guards artifact. */
void kn__fc_guards(kn__fc *c, const char *dump, int nguards, int nshape);
/* compilation_metrics, chromium E events; leaves the compile context. */
void kn__fc_end(kn__fc *c, const kn__fc_info *info);

#endif
