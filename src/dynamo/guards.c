/*
** dynamo/guards.c: the guards of one cache entry. A flat array of checks,
** evaluated in order by one C loop (the fast path of every compiled call);
** the slow path recomputes failure reasons with PyTorch's exact texts
** (logging_and_recompile_ux.md §8.2) and the dump prints the guard tree
** with each guard's user source line (§8.3).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "core/strbuf.h"
#include "dynamo/dynamo.h"
#include "kiln/autocast.h"
#include "kiln/autograd.h"
#include "tensor/tensor.h"

#define MAX_SLOTS KN__MAX_TRACED_INPUTS
#define MAX_INT_SYMS 64 /* int arguments with a symbol (fakify.c) */
#define MAX_SYMS (MAX_SLOTS * KN_MAX_DIMS + MAX_INT_SYMS)

void kn__guards_init(kn__guards *gs) { memset(gs, 0, sizeof *gs); }

void kn__guards_fini(kn__guards *gs) {
  for (int i = 0; i < gs->n; i++) {
    kn__src_fini(&gs->g[i].src);
    free(gs->g[i].code);
    free(gs->g[i].comment);
  }
  for (int i = 0; i < gs->nshape; i++) {
    free(gs->shape_code[i]);
    if (gs->shape_comment) free(gs->shape_comment[i]);
  }
  free(gs->shape_code);
  free(gs->shape_comment);
  free(gs->g);
  free(gs->sym_slot);
  free(gs->sym_dim);
  free(gs->sym_hint);
  kn__guards_init(gs);
}

kn_status kn__guards_add(kn__guards *gs, const kn__guard *g) {
  if (gs->n == gs->cap) {
    int nc = gs->cap ? gs->cap * 2 : 8;
    kn__guard *ng = realloc(gs->g, sizeof *ng * (size_t)nc);
    if (!ng) return kn__oom();
    gs->g = ng;
    gs->cap = nc;
  }
  kn__guard *d = &gs->g[gs->n];
  *d = *g;
  if (kn__src_copy(&d->src, &g->src) != KN_OK) return kn__oom();
  d->code = g->code ? strdup(g->code) : NULL;
  d->comment = g->comment ? strdup(g->comment) : NULL;
  if ((g->code && !d->code) || (g->comment && !d->comment)) {
    kn__src_fini(&d->src);
    free(d->code);
    free(d->comment);
    return kn__oom();
  }
  if (g->kind == KN__G_TENSOR && g->tensor_slot + 1 > gs->ntensors)
    gs->ntensors = g->tensor_slot + 1;
  gs->n++;
  return KN_OK;
}

bool kn__guards_shape_live(const kn__guards *gs, int i) {
  return !gs->env || !kn__shape_env_guard_dead(gs->env, i);
}

int kn__guards_nshape_live(const kn__guards *gs) {
  int n = 0;
  for (int i = 0; i < gs->nshape; i++) n += kn__guards_shape_live(gs, i);
  return n;
}

int kn__guards_count(const kn__guards *gs) { return gs->n + kn__guards_nshape_live(gs); }

/* ---- names ------------------------------------------------------------------- */
static const char *scalar_type_name(kn_dtype dt) {
  static const char *const names[KN_DTYPE_COUNT] = {
      [KN_BOOL] = "Bool",    [KN_UINT8] = "Byte",       [KN_INT8] = "Char",
      [KN_INT16] = "Short",  [KN_INT32] = "Int",        [KN_INT64] = "Long",
      [KN_FLOAT16] = "Half", [KN_BFLOAT16] = "BFloat16", [KN_FLOAT32] = "Float",
      [KN_FLOAT64] = "Double"};
  return (unsigned)dt < KN_DTYPE_COUNT ? names[dt] : "Unknown";
}

static const char *key_set(kn_device d) {
  return d == KN_META   ? "DispatchKeySet(Meta, BackendSelect, ADInplaceOrView, AutogradMeta)"
         : d == KN_CUDA ? "DispatchKeySet(CUDA, BackendSelect, ADInplaceOrView, AutogradCUDA)"
                        : "DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)";
}

/* ---- the fast check ------------------------------------------------------------ */
static inline bool get(const kn__guard *g, const kn_value *args, int nargs, kn_value *v) {
  if (g->src.nidx == 0 && !g->src.modpath && g->src.arg >= 0) {
    if (g->src.arg >= nargs) return false;
    *v = args[g->src.arg];
    return true;
  }
  return kn__src_get(&g->src, args, nargs, v);
}

static bool tensor_ok(const kn__guard *g, const kn_tensor *t) {
  if (t->device != g->device || t->dtype != g->dtype || t->requires_grad != g->requires_grad ||
      t->ndim != g->ndim)
    return false;
  for (int d = 0; d < g->ndim; d++) {
    if (!(g->dyn_size >> d & 1) && t->sizes[d] != g->sizes[d]) return false;
    if (!(g->dyn_stride >> d & 1) && t->strides[d] != g->strides[d]) return false;
  }
  return true;
}

/* The tensors of the slots filled so far, against which a tensor guarded as
** unaliased is checked. Tensor guards fill slots in increasing order (a new
** slot is the next one; an alias guard refills an earlier slot with the same
** tensor), so "none of slots[0, tensor_slot)" is "none seen so far". Up to
** SEEN_SCAN slots the check scans them; above, an open-addressing set of the
** pointers (at least twice as many cells as slots) makes the whole check
** linear: a compiled Adam step guards 500 tensors, and the pairwise scan
** was about a tenth of its call. */
#define SEEN_SCAN 16
/* seen_init rounds 2 * ntensors up to a power of two: within 2 * MAX_SLOTS */
_Static_assert((MAX_SLOTS & (MAX_SLOTS - 1)) == 0, "MAX_SLOTS must be a power of two");
typedef struct seen {
  kn_tensor **cell; /* NULL: the scan; else mask + 1 cells, NULL when empty */
  uint32_t mask;
} seen;

static void seen_init(seen *s, kn_tensor **cells, int ntensors) {
  s->cell = NULL;
  s->mask = 0;
  if (ntensors <= SEEN_SCAN) return;
  uint32_t n = 64;
  while (n < 2u * (uint32_t)ntensors) n *= 2;
  memset(cells, 0, sizeof *cells * n);
  s->cell = cells;
  s->mask = n - 1;
}

/* Adds t; false when it was there already. */
static bool seen_add(seen *s, kn_tensor *t) {
  uint64_t h = (uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15ull;
  for (uint32_t i = (uint32_t)(h >> 32) & s->mask;; i = (i + 1) & s->mask) {
    if (s->cell[i] == t) return false;
    if (!s->cell[i]) {
      s->cell[i] = t;
      return true;
    }
  }
}

static bool alias_ok(const kn__guard *g, kn_tensor *t, kn_tensor *const *slots, seen *s) {
  if (g->alias_of >= 0) return slots[g->alias_of] == t;
  if (s->cell) return seen_add(s, t);
  for (int j = 0; j < g->tensor_slot; j++)
    if (slots[j] == t) return false;
  return true;
}

static bool shape_ok(const kn__guards *gs, kn_tensor *const *slots) {
  if (!gs->nsyms) return true;
  int64_t vals[MAX_SYMS];
  for (int k = 0; k < gs->nsyms; k++)
    vals[k] = gs->sym_slot[k] < 0 ? gs->sym_hint[k] : slots[gs->sym_slot[k]]->sizes[gs->sym_dim[k]];
  return !gs->env || kn__shape_env_check_guards(gs->env, vals) < 0;
}

bool kn__guards_check(const kn__guards *gs, const kn_value *args, int nargs) {
  kn_tensor *slots[MAX_SLOTS], *cells[2 * MAX_SLOTS];
  seen sn;
  seen_init(&sn, cells, gs->ntensors);
  for (int i = 0; i < gs->n; i++) {
    const kn__guard *g = &gs->g[i];
    kn_value v;
    if (g->kind != KN__G_GRAD_MODE && !get(g, args, nargs, &v)) return false;
    switch (g->kind) {
    case KN__G_KIND:
      if (v.kind != g->vkind) return false;
      break;
    case KN__G_TENSOR:
      if (v.kind != KN_VTENSOR || !v.u.t || !alias_ok(g, v.u.t, slots, &sn) ||
          !tensor_ok(g, v.u.t))
        return false;
      slots[g->tensor_slot] = v.u.t;
      break;
    case KN__G_INT:
      if (v.kind != KN_VINT || v.u.i != g->i) return false;
      break;
    case KN__G_DOUBLE:
      if (v.kind != KN_VDOUBLE || v.u.d != g->d) return false;
      break;
    case KN__G_BOOL:
      if (v.kind != KN_VBOOL || v.u.b != g->b) return false;
      break;
    case KN__G_LEN:
      if ((v.kind != KN_VLIST && v.kind != KN_VTUPLE) || v.n != g->i) return false;
      break;
    case KN__G_MODULE_ID:
      if (v.kind != KN_VMODULE || (const void *)v.u.m != g->ptr) return false;
      break;
    case KN__G_GRAD_MODE:
      if (kn_is_grad_enabled() != g->b || (int64_t)kn_autocast_dtype() != g->i) return false;
      break;
    case KN__G_SYM_MIN:
      if (v.kind != KN_VTENSOR || v.u.t->ndim <= g->dim || v.u.t->sizes[g->dim] < g->i)
        return false;
      break;
    }
  }
  return shape_ok(gs, slots);
}

/* ---- reasons --------------------------------------------------------------------- */
static void with_comment(kn__sb *sb, const kn__guard *g, const char *code) {
  if (g->comment) kn__sb_printf(sb, "%-60s  # %s", code, g->comment);
  else kn__sb_puts(sb, code);
}

/* Sizes are checked before strides, as PyTorch's TensorCheck does: the
** first differing size wins over any stride (a size the user changed also
** changes the strides before it). */
static bool size_or_stride_reason(kn__sb *sb, const kn__guard *g, const kn_tensor *t) {
  const char *nm = g->src.expr;
  for (int d = 0; d < g->ndim; d++)
    if (!(g->dyn_size >> d & 1) && t->sizes[d] != g->sizes[d]) {
      kn__sb_printf(sb, "tensor '%s' size mismatch at index %d. expected %lld, actual %lld", nm,
                    d, (long long)g->sizes[d], (long long)t->sizes[d]);
      return true;
    }
  for (int d = 0; d < g->ndim; d++)
    if (!(g->dyn_stride >> d & 1) && t->strides[d] != g->strides[d]) {
      kn__sb_printf(sb, "tensor '%s' stride mismatch at index %d. expected %lld, actual %lld",
                    nm, d, (long long)g->strides[d], (long long)t->strides[d]);
      return true;
    }
  return false;
}

/* The reason of a failing tensor check (the first mismatch), or false. */
static bool tensor_reason(kn__sb *sb, const kn__guard *g, kn_value v, kn_tensor *const *slots) {
  const char *nm = g->src.expr;
  if (v.kind != KN_VTENSOR || !v.u.t) {
    kn__sb_printf(sb, "expected type of '%s' to be a tensor type, ' but found %s", nm,
                  kn__value_pytype(v.kind));
    return true;
  }
  kn_tensor *t = v.u.t;
  if (g->alias_of >= 0 && slots[g->alias_of] != t) {
    char code[512];
    snprintf(code, sizeof code, "%s", g->code ? g->code : nm);
    with_comment(sb, g, code);
    return true;
  }
  if (g->alias_of < 0)
    for (int j = 0; j < g->tensor_slot; j++)
      if (slots[j] == t) {
        kn__sb_printf(sb,
                      "Duplicate tensor found where not expected! %sshould not alias to "
                      "anything, but is aliased",
                      nm);
        return true;
      }
  if (t->device != g->device) {
    kn__sb_printf(sb, "tensor '%s' dispatch key set mismatch. expected %s, actual %s", nm,
                  key_set(g->device), key_set(t->device));
  } else if (t->dtype != g->dtype) {
    kn__sb_printf(sb, "tensor '%s' dtype mismatch. expected %s, actual %s", nm,
                  scalar_type_name(g->dtype), scalar_type_name(t->dtype));
  } else if (t->requires_grad != g->requires_grad) {
    kn__sb_printf(sb, "tensor '%s' requires_grad mismatch. expected requires_grad=%d", nm,
                  g->requires_grad ? 1 : 0);
  } else if (t->ndim != g->ndim) {
    kn__sb_printf(sb, "tensor '%s' rank mismatch. expected %d, actual %d", nm, g->ndim, t->ndim);
  } else {
    return size_or_stride_reason(sb, g, t);
  }
  return true;
}

static const char *autocast_name(int64_t dt) {
  return dt == KN_FLOAT32 ? "off" : kn_dtype_name((kn_dtype)dt);
}

/* The global-state guard: grad mode, then the autocast dtype. */
static bool global_state_reason(kn__sb *sb, const kn__guard *g) {
  int64_t ac = (int64_t)kn_autocast_dtype();
  if (kn_is_grad_enabled() != g->b)
    kn__sb_printf(sb, "global state changed: grad_mode %s -> %s", g->b ? "True" : "False",
                  g->b ? "False" : "True");
  else if (ac != g->i)
    kn__sb_printf(sb, "global state changed: autocast %s -> %s", autocast_name(g->i),
                  autocast_name(ac));
  else
    return false;
  return true;
}

/* Append the reason of guard g for this call, if it fails. Returns whether
** it failed; *stop is set when later guards cannot be evaluated. */
static bool reason_of(kn__sb *sb, const kn__guard *g, const kn_value *args, int nargs,
                      kn_tensor **slots, bool *stop) {
  kn_value v = kn_vnone();
  bool have = g->kind == KN__G_GRAD_MODE || get(g, args, nargs, &v);
  if (!have) {
    if (g->kind == KN__G_MODULE_ID && g->src.omod && kn__module_freed(g->src.omod))
      kn__sb_printf(sb, "%s was freed (kn_module_free): ", g->src.expr);
    with_comment(sb, g, g->code ? g->code : g->src.expr);
    *stop = true;
    return true;
  }
  switch (g->kind) {
  case KN__G_TENSOR:
    if (tensor_reason(sb, g, v, slots)) {
      *stop = v.kind != KN_VTENSOR || !v.u.t;
      if (!*stop) slots[g->tensor_slot] = v.u.t;
      return true;
    }
    slots[g->tensor_slot] = v.u.t;
    return false;
  case KN__G_GRAD_MODE:
    return global_state_reason(sb, g);
  case KN__G_KIND:
    if (v.kind == g->vkind) return false;
    break;
  case KN__G_INT:
    if (v.kind == KN_VINT && v.u.i == g->i) return false;
    break;
  case KN__G_DOUBLE:
    if (v.kind == KN_VDOUBLE && v.u.d == g->d) return false;
    break;
  case KN__G_BOOL:
    if (v.kind == KN_VBOOL && v.u.b == g->b) return false;
    break;
  case KN__G_LEN:
    if ((v.kind == KN_VLIST || v.kind == KN_VTUPLE) && v.n == g->i) return false;
    break;
  case KN__G_MODULE_ID:
    if (v.kind == KN_VMODULE && (const void *)v.u.m == g->ptr) return false;
    break;
  case KN__G_SYM_MIN:
    if (v.kind == KN_VTENSOR && v.u.t->ndim > g->dim && v.u.t->sizes[g->dim] >= g->i)
      return false;
    break;
  }
  with_comment(sb, g, g->code ? g->code : g->src.expr);
  if (g->kind == KN__G_KIND) *stop = true; /* later guards read through it */
  return true;
}

/* Does the text sb holds from `from` on (one reason) already appear as a
** whole reason before it? Reasons are separated by '\n'. */
static bool repeats_earlier(const kn__sb *sb, size_t from) {
  if (!sb->buf || from == 0) return false;
  const char *r = sb->buf + from;
  size_t n = sb->len - from;
  for (const char *p = sb->buf; p < sb->buf + from - 1;) {
    const char *nl = memchr(p, '\n', (size_t)(sb->buf + from - 1 - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(sb->buf + from - 1 - p);
    if (len == n && !memcmp(p, r, n)) return true;
    p += len + 1;
  }
  return false;
}

char *kn__guards_reason(const kn__guards *gs, const kn_value *args, int nargs, bool verbose) {
  kn__sb sb = KN__SB_INIT;
  kn_tensor *slots[MAX_SLOTS] = {0};
  bool any = false, stop = false;
  for (int i = 0; i < gs->n && !stop; i++) {
    size_t before = sb.len;
    if (any) kn__sb_putc(&sb, '\n');
    if (reason_of(&sb, &gs->g[i], args, nargs, slots, &stop) &&
        !repeats_earlier(&sb, before + (any ? 1 : 0))) {
      any = true;
      if (!verbose) break;
    } else {
      sb.len = before;
      if (sb.buf) sb.buf[before] = 0;
    }
  }
  if (!stop && (!any || verbose) && gs->nsyms && gs->env) {
    bool have_all = true;
    for (int k = 0; k < gs->nsyms; k++)
      if (gs->sym_slot[k] >= 0 && !slots[gs->sym_slot[k]]) have_all = false;
    if (have_all) {
      int64_t vals[MAX_SYMS];
      for (int k = 0; k < gs->nsyms; k++)
        vals[k] = gs->sym_slot[k] < 0 ? gs->sym_hint[k]
                                      : slots[gs->sym_slot[k]]->sizes[gs->sym_dim[k]];
      int bad = kn__shape_env_check_guards(gs->env, vals);
      if (bad >= 0) {
        if (any) kn__sb_putc(&sb, '\n');
        kn__sb_puts(&sb, bad < gs->nshape ? gs->shape_code[bad]
                                          : kn__shape_env_guard_str(gs->env, bad));
        any = true;
      }
    }
  }
  if (!any) {
    kn__sb_fini(&sb);
    return NULL;
  }
  return kn__sb_take(&sb);
}

/* ---- dump ------------------------------------------------------------------------ */
static const char *kind_label(kn__gkind k) {
  switch (k) {
  case KN__G_KIND: return "TYPE_MATCH";
  case KN__G_TENSOR: return "TENSOR_MATCH";
  case KN__G_INT:
  case KN__G_DOUBLE:
  case KN__G_BOOL: return "EQUALS_MATCH";
  case KN__G_LEN: return "LENGTH_CHECK";
  case KN__G_MODULE_ID: return "ID_MATCH";
  case KN__G_GRAD_MODE: return "GLOBAL_STATE";
  case KN__G_SYM_MIN: return "SHAPE_ENV";
  }
  return "GUARD";
}

char *kn__guards_dump(const kn__guards *gs) {
  kn__sb sb = KN__SB_INIT;
  kn__sb_puts(&sb, "GUARDS:\n\nTREE_GUARD_MANAGER:\n+- RootGuardManager\n");
  const char *last_src = NULL;
  for (int i = 0; i < gs->n; i++) {
    const kn__guard *g = &gs->g[i];
    const char *code = g->code ? g->code : g->src.expr;
    if (g->kind == KN__G_GRAD_MODE) {
      kn__sb_printf(&sb, "| +- GLOBAL_STATE: %s\n", code);
      continue;
    }
    if (!last_src || strcmp(last_src, g->src.expr)) {
      kn__sb_printf(&sb, "| +- GuardManager: source=%s\n", g->src.expr);
      last_src = g->src.expr;
    }
    kn__sb_printf(&sb, "| | +- %s: ", kind_label(g->kind));
    with_comment(&sb, g, code);
    kn__sb_putc(&sb, '\n');
  }
  for (int i = 0; i < gs->nshape; i++) {
    if (!kn__guards_shape_live(gs, i)) continue;
    kn__sb_puts(&sb, "| +- SHAPE_ENV: ");
    if (gs->shape_comment && gs->shape_comment[i])
      kn__sb_printf(&sb, "%-60s  # %s", gs->shape_code[i], gs->shape_comment[i]);
    else
      kn__sb_puts(&sb, gs->shape_code[i]);
    kn__sb_putc(&sb, '\n');
  }
  if (sb.len && sb.buf[sb.len - 1] == '\n') sb.buf[--sb.len] = 0;
  return kn__sb_take(&sb);
}
