/*
** dynamo/guardsrc.c: where each shape guard of a trace came from. The shape
** environment calls a hook for every guard it records (not for the ones it
** drops as implied); the hook notes the op being traced, the user's stack
** (the line that called the op, or that read a size as an int) and the
** framework stack (kiln's frames from the public function the user called to
** the code that needed the guard), as PyTorch's ShapeEnv notes user_stack
** and stack. They fill the guard_added_fast records, the symbolic_shapes
** log line and the guard's comment in the guard dump.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dynamo/tracer.h"
#include "logging/log.h"
#include "trace/events.h"
#include "trace/trace.h"

#define MAX_FW 32 /* framework frames kept per guard (the innermost) */

void kn__gsrc_fini(kn__gsrc *g) {
  free(g->user);
  free(g->fw);
  memset(g, 0, sizeof *g);
}

static kn__srcframe *copy_frames(const kn__srcframe *f, int n) {
  if (n <= 0) return NULL;
  kn__srcframe *c = malloc(sizeof *c * (size_t)n);
  if (c) memcpy(c, f, sizeof *c * (size_t)n);
  return c;
}

/* Make room for the provenance of guard `index`. */
static kn__gsrc *slot_for(kn__trace *tr, int index) {
  if (index >= tr->capgsrc) {
    int nc = tr->capgsrc ? tr->capgsrc * 2 : 16;
    while (nc <= index) nc *= 2;
    kn__gsrc *ng = realloc(tr->gsrc, sizeof *ng * (size_t)nc);
    if (!ng) return NULL;
    memset(ng + tr->capgsrc, 0, sizeof *ng * (size_t)(nc - tr->capgsrc));
    tr->gsrc = ng;
    tr->capgsrc = nc;
  }
  if (index >= tr->ngsrc) tr->ngsrc = index + 1;
  return &tr->gsrc[index];
}

static void on_guard(void *ud, const kn__shape_env *env, int index) {
  (void)env;
  kn__trace *tr = ud;
  kn__gsrc *g = slot_for(tr, index);
  if (!g) return; /* out of memory: the guard just has no stacks */
  kn__gsrc_fini(g);
  void *addrs[KN__SRC_CAPTURE_FRAMES];
  int n = kn__srcloc_capture(addrs, KN__SRC_CAPTURE_FRAMES);
  int base = kn__user_base_depth();
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  const char *api = NULL;
  /* guards a backend adds (AOT's joint graph) have no user line */
  int nu = tr->in_backend ? 0 : kn__srcloc_user_stack(addrs, n, base, fr, KN__SRC_MAX_FRAMES, &api);
  g->user = copy_frames(fr, nu);
  g->nuser = g->user ? nu : 0;
  int nf = kn__srcloc_framework_stack(addrs, n, tr->in_backend ? n : base, fr, MAX_FW);
  g->fw = copy_frames(fr, nf);
  g->nfw = g->fw ? nf : 0;
  if (tr->cur_op) snprintf(g->op, sizeof g->op, "kiln.ops.%s", tr->cur_op);
  else if (tr->in_backend) snprintf(g->op, sizeof g->op, "%s", kn__backend_name(tr->f));
  else if (api) snprintf(g->op, sizeof g->op, "%s", api); /* kn_size read by user code */
}

void kn__gsrc_install(kn__trace *tr, bool on) {
  kn__shape_env_set_guard_hook(tr->env, on ? on_guard : NULL, on ? tr : NULL);
}

const kn__gsrc *kn__gsrc_of(const kn__trace *tr, int index) {
  return index >= 0 && index < tr->ngsrc ? &tr->gsrc[index] : NULL;
}

char *kn__gsrc_comment(const kn__trace *tr, int index) {
  const kn__gsrc *g = kn__gsrc_of(tr, index);
  if (!g || !g->nuser || !g->user[g->nuser - 1].file) return NULL;
  const kn__srcframe *f = &g->user[g->nuser - 1];
  const char *line = kn__srcloc_line(f->file, f->line);
  const char *p = line ? line : "";
  while (*p == ' ' || *p == '\t') p++;
  const char *base = strrchr(f->file, '/');
  char buf[1024];
  snprintf(buf, sizeof buf, "%s  # %s:%d in %s", p, base ? base + 1 : f->file, f->line,
           f->func ? f->func : "?");
  return strdup(buf);
}

/* A stack as trace frames (with their source lines), then as JSON. */
static json_t *stack_json(const kn__srcframe *f, int n) {
  kn__trace_frame tf[KN__SRC_MAX_FRAMES];
  int k = 0;
  for (int i = 0; i < n && k < KN__SRC_MAX_FRAMES; i++) {
    if (!f[i].file || !f[i].func) continue;
    const char *loc = kn__srcloc_line(f[i].file, f[i].line);
    while (loc && (*loc == ' ' || *loc == '\t')) loc++;
    tf[k++] = (kn__trace_frame){f[i].file, f[i].line, f[i].func, loc};
  }
  json_t *j = kn__trace_stack(tf, (size_t)k);
  return j ? j : json_array();
}

/* " at file.c:12 in fn (src/ops/shape_util.c:118 in kn__infer_size)", as
** PyTorch's "[guard added]" lines name the user line and the framework frame. */
static void where(const kn__gsrc *g, char *buf, size_t n) {
  buf[0] = 0;
  if (!g) return;
  size_t len = 0;
  if (g->nuser) {
    const kn__srcframe *u = &g->user[g->nuser - 1];
    len += (size_t)snprintf(buf, n, " at %s:%d in %s", u->file, u->line, u->func ? u->func : "?");
  }
  if (g->nfw && len < n) {
    const kn__srcframe *f = &g->fw[g->nfw - 1];
    const char *src = f->file ? strstr(f->file, "/src/") : NULL;
    snprintf(buf + len, n - len, " (%s:%d in %s)", src ? src + 1 : f->file ? f->file : "?",
             f->line, f->func);
  }
}

void kn__gsrc_emit(kn__trace *tr, int index, const char *expr) {
  const kn__gsrc *g = kn__gsrc_of(tr, index);
  char at[1024];
  where(g, at, sizeof at);
  KN_LOG(KN_LOG_SYMBOLIC_SHAPES, KN_DEBUG, "eval %s [guard added]%s", expr, at);
  if (!kn__trace_enabled()) return;
  json_t *us = g ? stack_json(g->user, g->nuser) : json_array();
  json_t *fs = g ? stack_json(g->fw, g->nfw) : json_array();
  json_t *m = json_pack("{s:s, s:o, s:o}", "expr", expr, "user_stack", us, "stack", fs);
  (void)kn__trace_structured("guard_added_fast", m, NULL, 0, NULL);
}
