/*
** trace/compile_ctx.c: the thread-local compile context.
*/
#include <stdio.h>

#include "trace/compile_id.h"

static _Thread_local kn__compile_ctx ctx = {false, {-1, -1, -1}, 0, false, false};

kn__compile_ctx *kn__compile_ctx_get(void) { return &ctx; }

void kn__compile_ctx_enter(kn_compile_id id, kn__compile_ctx *saved) {
  *saved = ctx;
  ctx.active = true;
  ctx.id = id;
  ctx.attempt = 0;
}

static _Thread_local void (*on_leave)(void); /* run when the outermost context is left */

void kn__compile_ctx_on_leave(void (*fn)(void)) { on_leave = fn; }

void kn__compile_ctx_leave(const kn__compile_ctx *saved) {
  ctx = *saved;
  void (*fn)(void) = ctx.active ? NULL : on_leave;
  if (fn) {
    on_leave = NULL;
    fn();
  }
}

int kn__compile_id_format(kn_compile_id id, char *buf, size_t n) {
  if (id.compiled_autograd_id >= 0) {
    if (id.frame_id < 0 || id.frame_compile_id < 0)
      return snprintf(buf, n, "!%lld", (long long)id.compiled_autograd_id);
    return snprintf(buf, n, "!%lld/%lld/%lld", (long long)id.compiled_autograd_id,
                    (long long)id.frame_id, (long long)id.frame_compile_id);
  }
  return snprintf(buf, n, "%lld/%lld", (long long)id.frame_id,
                  (long long)id.frame_compile_id);
}

int kn__compile_id_format_attempt(kn_compile_id id, int64_t attempt, char *buf,
                                  size_t n) {
  int len = kn__compile_id_format(id, buf, n);
  if (attempt <= 0 || len < 0) return len;
  size_t used = (size_t)len < n ? (size_t)len : (n ? n - 1 : 0);
  int more = snprintf(buf + used, n - used, "_%lld", (long long)attempt);
  return len + more;
}
