/*
** tensor/print.c: readable printing in PyTorch's layout:
**   tensor([[ 1.5000, -2.2500],
**           [ 3.0000,  4.0000]], dtype=float64, requires_grad=True)
** One formatter per tensor (integer mode "1.", fixed "%.4f" or scientific
** "%.4e", chosen from the finite non-zero magnitudes as torch does), every
** element right-aligned to the widest, and tensors over 1000 elements
** summarised with "..." (first and last three entries of each dimension).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "tensor/handles.h"
#include "cuda/cuda.h"
#include "tensor/tensor.h"

#define EDGE 3
#define THRESHOLD 1000

typedef struct fmt {
  char mode;     /* 'b' bool, 'i' integer dtype, 'n' float whole numbers, 'f' fixed, 'e' sci */
  int width;
  bool summarize;
} fmt;

static double elem(const kn_tensor *t, const int64_t *idx) { return kn_get(t, idx); }

static int format_one(char *buf, size_t n, const fmt *f, double v) {
  if (f->mode == 'b') return snprintf(buf, n, "%s", v != 0 ? "True" : "False");
  if (f->mode == 'i') return snprintf(buf, n, "%lld", (long long)v);
  if (isnan(v)) return snprintf(buf, n, "nan");
  if (isinf(v)) return snprintf(buf, n, v > 0 ? "inf" : "-inf");
  if (f->mode == 'n') return snprintf(buf, n, "%.0f.", v);
  if (f->mode == 'e') return snprintf(buf, n, "%.4e", v);
  return snprintf(buf, n, "%.4f", v);
}

/* Visit every printed element (respecting summarisation). */
typedef void (*visit_fn)(void *ud, double v);

static void visit(const kn_tensor *t, int d, int64_t *idx, bool summ, visit_fn fn, void *ud) {
  if (d == t->ndim) {
    fn(ud, elem(t, idx));
    return;
  }
  int64_t n = t->sizes[d];
  for (int64_t i = 0; i < n; i++) {
    if (summ && n > 2 * EDGE && i == EDGE) i = n - EDGE;
    idx[d] = i;
    visit(t, d + 1, idx, summ, fn, ud);
  }
}

typedef struct stats { double maxabs, minabs; bool any, all_int; } stats;

static void gather(void *ud, double v) {
  stats *s = ud;
  if (!isfinite(v)) return;
  if (v != ceil(v)) s->all_int = false;
  double a = fabs(v);
  if (a == 0) return;
  if (!s->any || a > s->maxabs) s->maxabs = a;
  if (!s->any || a < s->minabs) s->minabs = a;
  s->any = true;
}

typedef struct widest { const fmt *f; int w; } widest;

/* Like torch, float widths come from the finite non-zero values only. */
static void measure(void *ud, double v) {
  widest *w = ud;
  if (w->f->mode != 'b' && w->f->mode != 'i' && (!isfinite(v) || v == 0)) return;
  char buf[64];
  int n = format_one(buf, sizeof buf, w->f, v);
  if (n > w->w) w->w = n;
}

static fmt choose(const kn_tensor *t, bool summ) {
  fmt f = {'f', 1, summ};
  int64_t idx[KN_MAX_DIMS] = {0};
  if (t->dtype == KN_BOOL) f.mode = 'b';
  else if (!kn_dtype_is_floating(t->dtype)) f.mode = 'i';
  else {
    stats s = {0, 0, false, true};
    visit(t, 0, idx, summ, gather, &s);
    if (s.all_int) f.mode = (s.any && (s.maxabs / s.minabs > 1000 || s.maxabs > 1e8)) ? 'e' : 'n';
    else if (s.any && (s.maxabs / s.minabs > 1000 || s.maxabs > 1e8 || s.minabs < 1e-4)) f.mode = 'e';
  }
  widest w = {&f, 1};
  visit(t, 0, idx, summ, measure, &w);
  f.width = w.w;
  return f;
}

/* One innermost row, wrapped at 80 columns like torch's _vector_str. */
static void emit_row(kn__sb *sb, const kn_tensor *t, const fmt *f, int64_t *idx, int indent) {
  int d = t->ndim - 1;
  int64_t n = t->sizes[d];
  int per_line = (80 - indent) / (f->width + 2);
  if (per_line < 1) per_line = 1;
  int on_line = 0;
  kn__sb_putc(sb, '[');
  for (int64_t i = 0; i < n; i++) {
    if (on_line == per_line) {
      kn__sb_printf(sb, "\n%*s", indent + 1, "");
      on_line = 0;
    }
    if (f->summarize && n > 2 * EDGE && i == EDGE) {
      kn__sb_puts(sb, " ...,");
      i = n - EDGE - 1;
      on_line++;
      if (on_line < per_line) kn__sb_putc(sb, ' ');
      continue;
    }
    char buf[64];
    idx[d] = i;
    format_one(buf, sizeof buf, f, elem(t, idx));
    kn__sb_printf(sb, "%*s", f->width, buf);
    on_line++;
    if (i + 1 < n) kn__sb_puts(sb, on_line < per_line ? ", " : ",");
  }
  kn__sb_putc(sb, ']');
}

static void emit(kn__sb *sb, const kn_tensor *t, const fmt *f, int d, int64_t *idx, int indent) {
  if (d == t->ndim) {
    char buf[64];
    format_one(buf, sizeof buf, f, elem(t, idx));
    kn__sb_printf(sb, "%*s", f->width, buf);
    return;
  }
  if (d == t->ndim - 1) {
    emit_row(sb, t, f, idx, indent + d);
    return;
  }
  kn__sb_putc(sb, '[');
  int64_t n = t->sizes[d];
  for (int64_t i = 0; i < n; i++) {
    if (f->summarize && n > 2 * EDGE && i == EDGE) {
      kn__sb_puts(sb, "...,");
      for (int k = 0; k < t->ndim - d - 1; k++) kn__sb_putc(sb, '\n');
      kn__sb_printf(sb, "%*s", indent + d + 1, "");
      i = n - EDGE;
    }
    idx[d] = i;
    emit(sb, t, f, d + 1, idx, indent);
    if (i + 1 < n) {
      kn__sb_putc(sb, ',');
      for (int k = 0; k < t->ndim - d - 1; k++) kn__sb_putc(sb, '\n');
      kn__sb_printf(sb, "%*s", indent + d + 1, "");
    }
  }
  kn__sb_putc(sb, ']');
}

static void suffix(kn__sb *sb, const kn_tensor *t, bool empty) {
  if (t->device == KN_CUDA) kn__sb_printf(sb, ", device='cuda:%d'", kn__cuda_device_index());
  if (empty && t->ndim != 1) {
    kn__sb_puts(sb, ", size=(");
    for (int d = 0; d < t->ndim; d++)
      kn__sb_printf(sb, d ? ", %lld" : "%lld", (long long)t->sizes[d]);
    kn__sb_puts(sb, t->ndim == 1 ? ",)" : ")");
  }
  if (t->dtype != KN_FLOAT32 && t->dtype != KN_INT64 && !(t->dtype == KN_BOOL && !empty))
    kn__sb_printf(sb, ", dtype=%s", kn_dtype_name(t->dtype));
  if (t->device == KN_META) kn__sb_puts(sb, ", device='meta'");
  if (t->grad_fn) kn__sb_printf(sb, ", grad_fn=<%s>", kn_grad_fn_name(t));
  else if (t->requires_grad) kn__sb_puts(sb, ", requires_grad=True");
}

char *kn_tensor_to_string(const kn_tensor *t) {
  kn__sb sb = KN__SB_INIT;
  if (!t) {
    kn__error(KN_EINVAL, "kn_tensor_to_string: expected a tensor, got NULL");
    return NULL;
  }
  if (KN__HANDLES_CHECKED() && kn__handle_check(t, "kn_tensor_to_string", "the tensor") != KN_OK)
    return NULL;
  kn__sb_puts(&sb, "tensor(");
  int64_t numel = kn_numel(t);
  if (t->device == KN_META || t->is_fake) {
    kn__sb_puts(&sb, "..., size=(");
    for (int d = 0; d < t->ndim; d++)
      kn__sb_printf(&sb, d ? ", %lld" : "%lld", (long long)t->sizes[d]);
    kn__sb_puts(&sb, t->ndim == 1 ? ",)" : ")");
    kn__sb_printf(&sb, ", dtype=%s", kn_dtype_name(t->dtype));
    kn__sb_puts(&sb, t->is_fake ? ", fake=True)" : ", device='meta')");
    return kn__sb_take(&sb);
  }
  if (numel == 0) {
    kn__sb_puts(&sb, "[]");
    suffix(&sb, t, true);
  } else {
    /* a CUDA tensor's elements are read from a host copy */
    kn_tensor *h = t->device == KN_CUDA ? kn__tensor_host_copy(t) : NULL;
    if (t->device == KN_CUDA && !h) {
      kn__sb_fini(&sb);
      return NULL;
    }
    const kn_tensor *v = h ? h : t;
    fmt f = choose(v, numel > THRESHOLD);
    int64_t idx[KN_MAX_DIMS] = {0};
    emit(&sb, v, &f, 0, idx, 7);
    suffix(&sb, t, false);
    kn_release(h);
  }
  kn__sb_putc(&sb, ')');
  char *s = kn__sb_take(&sb);
  if (!s) kn__oom();
  return s;
}

kn_status kn_print_tensor(const kn_tensor *t, FILE *out) {
  if (!t) return kn__error(KN_EINVAL, "kn_print_tensor: expected a tensor, got NULL");
  if (KN__HANDLES_CHECKED() && kn__handle_check(t, "kn_print_tensor", "the tensor") != KN_OK)
    return kn_last_status();
  const kn__fake_hooks *h = kn__fake_hooks_for(t);
  if (h) {
    /* a value of a compiled function: printed on every call (kn_print) */
    kn_status st = !out || out == stdout ? h->print(t) : h->refuse(t, "kn_print_tensor to a file");
    if (st != KN__FAKE_PASS) return st;
  }
  char *s = kn_tensor_to_string(t);
  if (!s) return kn_last_status();
  fprintf(out ? out : stdout, "%s\n", s);
  free(s);
  return KN_OK;
}
