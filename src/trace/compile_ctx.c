/*
** trace/compile_ctx.c: the thread-local compile context.
*/
#include "trace/compile_id.h"

static _Thread_local kn__compile_ctx ctx = {false, {-1, -1, -1}, 0};

kn__compile_ctx *kn__compile_ctx_get(void) { return &ctx; }

void kn__compile_ctx_enter(kn_compile_id id, kn__compile_ctx *saved) {
  *saved = ctx;
  ctx.active = true;
  ctx.id = id;
  ctx.attempt = 0;
}

void kn__compile_ctx_leave(const kn__compile_ctx *saved) { ctx = *saved; }
