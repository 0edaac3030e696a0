/*
** ops/dispatch.c: the op table instance and the one dispatcher every op call
** goes through: mode stack -> autograd -> backend (meta or CPU).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "ops/autocast.h"
#include "ops/cuda_ops.h"
#include "ops/opdef.h"
#include "ops/pointwise.h"
#include "ops/threads.h"
#include "tensor/handles.h"
#include "profiler/profiler.h"

const kn__opdef kn__ops[KN__OP_COUNT] = {
#define KN_OP(ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN) \
  [KN_OP_##ID] = {KN_OP_##ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN},
#include "ops/ops.def"
#undef KN_OP
};

/* The table must have exactly one row per op id. */
#define KN_OP(ID, NAME, OVERLOAD, SCHEMA, FLAGS, META, KERNEL, BACKWARD, GRADFN) +1
_Static_assert(0
#include "ops/ops.def"
                   == KN__OP_COUNT,
               "every op id needs exactly one row in ops/ops.def");
#undef KN_OP

const kn__opdef *kn__op_lookup(const char *qname) {
  const char *dot = strchr(qname, '.');
  size_t nlen = dot ? (size_t)(dot - qname) : strlen(qname);
  const char *ov = dot ? dot + 1 : "";
  for (int i = 0; i < KN__OP_COUNT; i++) {
    const kn__opdef *op = &kn__ops[i];
    if (strlen(op->name) == nlen && !strncmp(op->name, qname, nlen) &&
        !strcmp(op->overload, ov))
      return op;
  }
  return NULL;
}

/* ---- output lists ----------------------------------------------------------- */

void kn__metas_init(kn__metas *m) {
  m->n = 0;
  m->cap = KN__INLINE_OUTS;
  m->m = m->inl;
}

void kn__metas_fini(kn__metas *m) {
  if (m->m != m->inl) free(m->m);
  kn__metas_init(m);
}

kn__outmeta *kn__metas_push(kn__metas *m, kn_dtype dt) {
  if (m->n == m->cap) {
    int ncap = m->cap * 2;
    kn__outmeta *nm = malloc((size_t)ncap * sizeof *nm);
    if (!nm) return NULL;
    memcpy(nm, m->m, (size_t)m->n * sizeof *nm);
    if (m->m != m->inl) free(m->m);
    m->m = nm;
    m->cap = ncap;
  }
  kn__outmeta *o = &m->m[m->n++];
  /* sizes/strides are written by the meta function up to ndim; clearing
  ** them all would be a large share of a small op's cost */
  o->ndim = 0;
  o->offset = kn__sym_const(0);
  o->dtype = dt;
  o->view_of = -1;
  o->alias_of = -1;
  return o;
}

kn__outmeta *kn__metas_push_like(kn__metas *m, const kn_tensor *t, kn_dtype dt) {
  kn__outmeta *o = kn__metas_push(m, dt);
  if (o) {
    o->ndim = t->ndim;
    kn__tensor_symsizes(t, o->sizes);
  }
  return o;
}

kn__outmeta *kn__metas_push_sizes(kn__metas *m, kn_dtype dt, int nd, const kn_sym *sz) {
  kn__outmeta *o = kn__metas_push(m, dt);
  if (!o) return NULL;
  o->ndim = nd;
  for (int d = 0; d < nd; d++) o->sizes[d] = sz[d];
  return o;
}

void kn__outs_init(kn__outs *o) {
  o->n = 0;
  o->cap = KN__INLINE_OUTS;
  o->t = o->inl;
}

void kn__outs_fini(kn__outs *o) {
  for (int i = 0; i < o->n; i++) kn_release(o->t[i]);
  if (o->t != o->inl) free(o->t);
  kn__outs_init(o);
}

bool kn__outs_push(kn__outs *o, kn_tensor *t) {
  if (o->n == o->cap) {
    int ncap = o->cap * 2;
    kn_tensor **nt = malloc((size_t)ncap * sizeof *nt);
    if (!nt) {
      kn_release(t);
      return false;
    }
    memcpy(nt, o->t, (size_t)o->n * sizeof *nt);
    if (o->t != o->inl) free(o->t);
    o->t = nt;
    o->cap = ncap;
  }
  o->t[o->n++] = t;
  return true;
}

/* ---- call helpers ----------------------------------------------------------- */

int kn__call_ninputs(const kn__call *c) {
  int n = 0;
  for (int i = 0; i < c->nargs; i++) {
    if (c->args[i].kind == KN__A_TENSOR) n++;
    else if (c->args[i].kind == KN__A_TENSORS) n += c->args[i].u.ts.n;
  }
  return n;
}

int kn__bw_input_index(const kn__call *c, int argi, int j) {
  int n = 0;
  for (int i = 0; i < argi; i++) {
    if (c->args[i].kind == KN__A_TENSOR) n++;
    else if (c->args[i].kind == KN__A_TENSORS) n += c->args[i].u.ts.n;
  }
  return n + j;
}

kn_tensor *kn__call_input(const kn__call *c, int k) {
  for (int i = 0; i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR) {
      if (k == 0) return a->u.t;
      k--;
    } else if (a->kind == KN__A_TENSORS) {
      if (k < a->u.ts.n) return a->u.ts.v[k];
      k -= a->u.ts.n;
    }
  }
  return NULL;
}

void kn__tensor_symsizes(const kn_tensor *t, kn_sym *sizes) {
  for (int d = 0; d < t->ndim; d++)
    sizes[d] = t->sym ? t->sym->sizes[d] : kn__sym_const(t->sizes[d]);
}

/* ---- backend ------------------------------------------------------------------ */

/* Do the call's tensors carry data? Meta or fake inputs make every output
** metadata-only. */
static bool metadata_only(const kn_tensor *t) { return t->device == KN_META || t->is_fake; }

static bool call_is_meta(const kn__call *c) { return kn__call_any_input(c, metadata_only); }

static void sym_to_concrete(int nd, const kn_sym *s, int64_t *out) {
  for (int d = 0; d < nd; d++) out[d] = kn__sym_hint(s[d]);
}

static bool any_symbolic(int nd, const kn_sym *s) {
  for (int d = 0; d < nd; d++)
    if (!kn__sym_is_const(s[d])) return true;
  return false;
}

/* Attach symbolic geometry to t when the meta result was symbolic. */
static kn_status attach_sym(kn_tensor *t, const kn__outmeta *m, bool view) {
  if (!any_symbolic(m->ndim, m->sizes) &&
      !(view && (any_symbolic(m->ndim, m->strides) || !kn__sym_is_const(m->offset))))
    return KN_OK;
  kn__symshape *s = calloc(1, sizeof *s);
  if (!s) return kn__oom();
  for (int d = 0; d < m->ndim; d++) s->sizes[d] = m->sizes[d];
  if (view) {
    for (int d = 0; d < m->ndim; d++) s->strides[d] = m->strides[d];
    s->offset = m->offset;
  } else {
    /* contiguous symbolic strides */
    kn_sym acc = kn__sym_const(1);
    for (int d = m->ndim - 1; d >= 0; d--) {
      s->strides[d] = acc;
      acc = kn__sym_mul(acc, kn__sym_max(m->sizes[d], kn__sym_const(1)));
    }
    s->offset = kn__sym_const(0);
  }
  t->sym = s;
  return KN_OK;
}

/* Create the output tensor for one meta entry on device dev (KN_META for
** metadata only). Owned, or NULL. */
static kn_tensor *make_output(const kn__call *c, const kn__outmeta *m, kn_device dev) {
  bool meta = dev == KN_META;
  int64_t sizes[KN_MAX_DIMS];
  sym_to_concrete(m->ndim, m->sizes, sizes);
  kn_tensor *t = NULL;
  if (m->alias_of >= 0) {
    t = kn_retain(c->args[m->alias_of].u.t);
    return t;
  }
  if (m->view_of >= 0) {
    int64_t strides[KN_MAX_DIMS];
    sym_to_concrete(m->ndim, m->strides, strides);
    if (kn__check_geometry(c->op->name, m->ndim, sizes, strides, kn__sym_hint(m->offset),
                           m->dtype) != KN_OK)
      return NULL;
    t = kn__make_view(c->args[m->view_of].u.t, m->ndim, sizes, strides,
                      kn__sym_hint(m->offset));
  } else {
    t = kn__empty(m->ndim, sizes, m->dtype, dev);
  }
  if (!t) return NULL;
  /* fake inputs give fake outputs that report the device the fake input
  ** does (the real tensor's: cpu or cuda) */
  for (int k = 0, n = kn__call_ninputs(c); k < n && meta && m->view_of < 0; k++) {
    const kn_tensor *in = kn__call_input(c, k);
    if (in && in->is_fake) {
      t->is_fake = true;
      t->device = in->device == KN_CUDA ? KN_CUDA : KN_CPU;
      break;
    }
  }
  if (attach_sym(t, m, m->view_of >= 0) != KN_OK) {
    kn_release(t);
    return NULL;
  }
  return t;
}

/* Writing into a tensor whose elements share memory (a stride-0 dim of
** size > 1, as expand makes) would depend on the element order: refused,
** as PyTorch does. */
static kn_status check_no_internal_overlap(const kn__call *c) {
  const kn_tensor *t = c->args[0].kind == KN__A_TENSOR ? c->args[0].u.t : NULL;
  for (int d = 0; t && d < t->ndim; d++)
    if (t->sizes[d] > 1 && t->strides[d] == 0)
      return kn__error(KN_EUNSUPPORTED,
                       "%s: unsupported operation: more than one element of the written-to "
                       "tensor refers to a single memory location. Please clone the tensor "
                       "(kn_clone) before performing the operation.",
                       c->op->name);
  return KN_OK;
}

/* Run the meta function; an overflow in its size arithmetic is an error. */
static kn_status run_meta(const kn__call *c, kn__metas *metas) {
  bool outer = kn__sym_overflow_take(); /* an enclosing call's flag */
  kn_status st = c->op->meta(c, metas);
  if (kn__sym_overflow_take()) { /* (an error the overflow caused names saturated values) */
    char buf[256] = "";
    const kn_tensor *in = kn__call_ninputs(c) > 0 ? kn__call_input(c, 0) : NULL;
    if (in) kn__format_sizes(in->ndim, in->sizes, buf, sizeof buf);
    st = kn__error(KN_ERANGE, "%s: integer overflow computing the output sizes (input sizes %s)",
                   c->op->name, in ? buf : "none");
  }
  if (outer) kn__sym_overflowed = true;
  return st;
}

/* The backend layer: meta function, outputs, kernel. A call with a tensor on
** the GPU runs there (ops/cuda_ops.h: the ops layer's CUDA kernels or the
** registered device backend); no CPU kernel ever sees device memory. */
static kn_status backend(kn__call *c, kn__outs *out, bool force_meta) {
  const kn__opdef *op = c->op;
  if (op->flags & KN_OPF_COMPOSITE) return op->kernel(c, out);
  bool meta = force_meta || call_is_meta(c);
  kn_device dev = KN_META;
  kn_status st = meta ? KN_OK : kn__call_device(c, &dev);
  if (st == KN_OK && (op->flags & KN_OPF_INPLACE)) st = check_no_internal_overlap(c);
  if (st != KN_OK) return st;
  kn__metas metas;
  kn__metas_init(&metas);
  st = run_meta(c, &metas);
  for (int i = 0; st == KN_OK && i < metas.n; i++) {
    kn_tensor *t = make_output(c, &metas.m[i], dev);
    if (!t) st = kn_last_status() != KN_OK ? kn_last_status() : kn__oom();
    else if (!kn__outs_push(out, t)) st = kn__oom();
  }
  kn__metas_fini(&metas);
  if (st == KN_OK && !meta && !(op->flags & KN_OPF_VIEW))
    st = dev == KN_CUDA ? kn__cuda_kernel(c, out) : op->kernel(c, out);
  if (st == KN_OK && (op->flags & KN_OPF_INPLACE)) kn__bump_version(c->args[0].u.t);
  if (st != KN_OK) kn__outs_fini(out);
  return st;
}

kn_status kn__dispatch_backend(kn__call *c, kn__outs *out) { return backend(c, out, false); }

kn_status kn__dispatch_backend_meta(kn__call *c, kn__outs *out) { return backend(c, out, true); }

/* ---- autograd layer ----------------------------------------------------------- */

static kn_status dispatch_autograd(kn__call *c, kn__outs *out) {
  const kn__opdef *op = c->op;
  if (op->flags & KN_OPF_COMPOSITE) return op->kernel(c, out);
  bool need = kn__autograd_needed(c);
  if ((op->flags & KN_OPF_INPLACE) && kn__grad_enabled()) {
    kn_status st = kn__autograd_check_inplace(c);
    if (st != KN_OK) return st;
  }
  kn_status st = kn__dispatch_backend(c, out);
  if (st == KN_OK && need) {
    st = kn__autograd_record(c, out);
    if (st != KN_OK) kn__outs_fini(out);
  }
  return st;
}

/* ---- modes ------------------------------------------------------------------------- */

#define KN__MAX_MODES 16
typedef struct mode_stack {
  kn__mode *m[KN__MAX_MODES];
  int n;       /* pushed */
  int active;  /* modes [0, active) are visible to new calls */
} mode_stack;

static _Thread_local mode_stack modes;

kn_status kn__mode_push(kn__mode *m) {
  if (modes.n == KN__MAX_MODES)
    return kn__error(KN_ESTATE, "dispatcher mode stack is full (%d modes)", KN__MAX_MODES);
  modes.m[modes.n++] = m;
  modes.active = modes.n;
  return KN_OK;
}

void kn__mode_pop(kn__mode *m) {
  KN_ASSERT(modes.n > 0 && modes.m[modes.n - 1] == m);
  (void)m;
  modes.n--;
  modes.active = modes.n;
}

int kn__mode_depth(void) { return modes.n; }

bool kn__dispatch_in_handler(void) { return modes.active < modes.n; }

/* Run the call starting at mode index `top - 1` going down. */
static kn_status dispatch_from(int top, kn__call *c, kn__outs *out) {
  if (top <= 0) return dispatch_autograd(c, out);
  kn__mode *m = modes.m[top - 1];
  int saved = modes.active;
  modes.active = top - 1; /* calls made by the handler see lower modes only */
  kn_status st = m->handle(m, c, out);
  modes.active = saved;
  return st;
}

kn_status kn__dispatch_below(kn__mode *self, kn__call *c, kn__outs *out) {
  int i = modes.n - 1;
  while (i >= 0 && modes.m[i] != self) i--;
  KN_ASSERT(i >= 0);
  int saved = modes.active;
  kn_status st = dispatch_from(i, c, out);
  modes.active = saved;
  return st;
}

kn_status kn__mode_decompose(kn__mode *self, kn__call *c, kn__outs *out) {
  if (!(c->op->flags & KN_OPF_COMPOSITE)) return kn__dispatch_below(self, c, out);
  int i = modes.n - 1;
  while (i >= 0 && modes.m[i] != self) i--;
  KN_ASSERT(i >= 0);
  int saved = modes.active;
  modes.active = i + 1; /* self and the modes below see the kernel's calls */
  kn_status st = c->op->kernel(c, out);
  modes.active = saved;
  return st;
}

static kn_status check_args(const kn__call *c) {
  for (int i = 0; i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    if ((a->kind == KN__A_TENSORS && a->u.ts.n < 0) || (a->kind == KN__A_INTS && a->u.ints.n < 0))
      return kn__error(KN_EINVAL, "%s: argument %d: expected a list length >= 0, got %d",
                       c->op->name, i, a->kind == KN__A_INTS ? a->u.ints.n : a->u.ts.n);
    if (a->kind == KN__A_SCALAR && (unsigned)a->u.s.kind > KN_SCALAR_FLOAT)
      return kn__error(KN_EINVAL, "%s: argument %d: invalid scalar kind %d", c->op->name, i,
                       (int)a->u.s.kind);
    if (a->kind == KN__A_DTYPE && (unsigned)a->u.dt >= KN_DTYPE_COUNT)
      return kn__error(KN_EDTYPE, "%s: argument %d: invalid dtype %d", c->op->name, i,
                       (int)a->u.dt);
    if (a->kind == KN__A_INTS && a->u.ints.n > 0 && !a->u.ints.v)
      return kn__error(KN_EINVAL, "%s: argument %d: int list of length %d is NULL", c->op->name,
                       i, a->u.ints.n);
    if (a->kind == KN__A_TENSORS && a->u.ts.n > 0 && !a->u.ts.v)
      return kn__error(KN_EINVAL, "%s: argument %d: tensor list is NULL", c->op->name, i);
    if (a->kind == KN__A_TENSORS)
      for (int j = 0; j < a->u.ts.n; j++)
        if (!a->u.ts.v[j])
          return kn__error(KN_EINVAL, "%s: argument %d: tensor %d of the list is NULL (did an "
                           "earlier call fail? %s)", c->op->name, i, j, kn_last_error());
  }
  return KN_OK;
}

static void put_sizes(kn__sb *sb, const kn_tensor *t) {
  kn__sb_putc(sb, '[');
  for (int d = 0; t && d < t->ndim; d++)
    kn__sb_printf(sb, "%s%lld", d ? ", " : "", (long long)t->sizes[d]);
  kn__sb_putc(sb, ']');
}

/* The argument sizes of c as the profiler shows them: [[2, 3], [], [3]]. */
static char *shapes_of(const kn__call *c) {
  kn__sb sb;
  kn__sb_init(&sb);
  kn__sb_putc(&sb, '[');
  for (int i = 0; i < c->nargs; i++) {
    if (i) kn__sb_puts(&sb, ", ");
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR) put_sizes(&sb, a->u.t);
    else if (a->kind == KN__A_TENSORS)
      for (int j = 0; j < a->u.ts.n; j++) {
        if (j) kn__sb_puts(&sb, ", ");
        put_sizes(&sb, a->u.ts.v[j]);
      }
    else kn__sb_puts(&sb, "[]");
  }
  kn__sb_putc(&sb, ']');
  if (kn__sb_failed(&sb)) {
    kn__sb_fini(&sb);
    return NULL;
  }
  return kn__sb_take(&sb);
}

void kn__dispatch_prof_end(int64_t t0, const kn__call *c, const kn__outs *out) {
  const kn_tensor *t = out && out->n > 0 ? out->t[0] : NULL;
  kn__prof_op_end(t0, c->op->name, shapes_of(c), kn__tensor_grad_fn_seq(t));
}

/* Checked mode (tensor/handles.h): every tensor argument is a live tensor. */
static kn_status check_handles(const kn__call *c) {
  char what[48];
  for (int i = 0; i < c->nargs; i++) {
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR && a->u.t && !kn__handle_live(a->u.t)) {
      snprintf(what, sizeof what, "argument %d", i);
      return kn__handle_dead(a->u.t, c->op->name, what);
    }
    for (int j = 0; a->kind == KN__A_TENSORS && j < a->u.ts.n; j++)
      if (!kn__handle_live(a->u.ts.v[j])) {
        snprintf(what, sizeof what, "tensor %d of argument %d", j, i);
        return kn__handle_dead(a->u.ts.v[j], c->op->name, what);
      }
  }
  return KN_OK;
}

kn_status kn__dispatch_modes(kn__call *c, kn__outs *out) {
  return dispatch_from(modes.active, c, out);
}

/* The top of the stack: autocast (when a region is open), then the modes. */
static kn_status dispatch_top(kn__call *c, kn__outs *out) {
  if (kn__autocast_active()) return kn__autocast_call(c, out);
  return dispatch_from(modes.active, c, out);
}

kn_status kn__dispatch(kn__call *c, kn__outs *out) {
  kn__threads_sync(); /* kn_set_num_threads on another thread: apply it here */
  kn_status st = check_args(c);
  if (st == KN_OK && KN__HANDLES_CHECKED()) st = check_handles(c);
  if (st != KN_OK) return st;
  if (KN__PROF_ON()) { /* the profiler: one predictable branch when off */
    int64_t t0 = kn__prof_op_begin();
    st = dispatch_top(c, out);
    kn__dispatch_prof_end(t0, c, st == KN_OK ? out : NULL);
    return st;
  }
  return dispatch_top(c, out);
}

/* ---- public-wrapper helpers ---------------------------------------------------- */

static kn_status prepare(kn__call *c, kn__opid id, int nargs, const kn__arg *args) {
  KN_ASSERT(nargs <= KN__MAX_ARGS);
  c->op = &kn__ops[id];
  c->nargs = nargs;
  memcpy(c->args, args, (size_t)nargs * sizeof *args);
  /* A NULL required tensor usually means an earlier call failed. */
  char h[KN__HINT_CAP];
  for (int i = 0; i < nargs; i++)
    if (args[i].kind == KN__A_TENSOR && !args[i].u.t)
      return kn__error(KN_EINVAL, "%s: argument %d is a NULL tensor%s", c->op->name, i,
                       kn__error_hint(h, sizeof h));
  return KN_OK;
}

/* Does no layer above the backend see a call made now (no autocast region,
** no visible mode, no profiler, no checked handles)? The fast path's test. */
static bool layers_idle(void) {
  return modes.active == 0 && !kn__autocast_active() && !KN__PROF_ON() &&
         !KN__HANDLES_CHECKED();
}

static _Thread_local uint64_t fast_calls; /* taken on this thread */

uint64_t kn__dispatch_fast_calls(void) { return fast_calls; }

/* The fast path (docs/KERNELS.md, "The per-op path"): a pointwise call no
** layer sees, of operands of one shape, runs its types, output and kernel
** directly. false: not taken, nothing done. */
static bool invoke_fast(kn__call *c, kn_status *st, kn_tensor **r) {
  const kn__opdef *op = c->op;
  if ((op->kernel != kn__k_pw_binary && op->kernel != kn__k_pw_unary) ||
      (op->flags & (KN_OPF_COMPOSITE | KN_OPF_VIEW | KN_OPF_INPLACE)))
    return false;
  kn__threads_sync(); /* what kn__dispatch does first */
  if (!layers_idle() || !kn__pw_fast(c, kn__grad_enabled(), st, r)) return false;
  fast_calls++;
  return true;
}

kn_tensor *kn__invoke(kn__opid id, int nargs, const kn__arg *args) {
  kn__call c;
  if (prepare(&c, id, nargs, args) != KN_OK) {
    kn__error_null_result();
    return NULL;
  }
  kn_tensor *r;
  kn_status st;
  if (invoke_fast(&c, &st, &r)) {
    if (st == KN_OK) return kn__autorelease(r);
    kn__error_null_result();
    return NULL;
  }
  kn__outs out;
  kn__outs_init(&out);
  if (kn__dispatch(&c, &out) != KN_OK) {
    kn__error_null_result();
    return NULL;
  }
  KN_ASSERT(out.n >= 1);
  r = out.t[0];
  out.t[0] = NULL;
  kn__outs_fini(&out);
  return kn__autorelease(r);
}

int kn__invoke_multi(kn__opid id, int nargs, const kn__arg *args,
                     kn_tensor **outs, int cap) {
  if (!outs || cap < 0) {
    kn__error(KN_EINVAL, "%s: expected an output array with room for cap >= 0 tensors, got %s "
              "with cap %d", kn__ops[id].name, outs ? "an array" : "NULL", cap);
    return -1;
  }
  kn__call c;
  if (prepare(&c, id, nargs, args) != KN_OK) return -1;
  kn__outs out;
  kn__outs_init(&out);
  if (kn__dispatch(&c, &out) != KN_OK) return -1;
  if (out.n > cap) {
    int n = out.n;
    kn__outs_fini(&out);
    kn__error(KN_ERANGE, "%s produced %d outputs but the caller has room for %d",
              c.op->name, n, cap);
    return -1;
  }
  int n = out.n;
  for (int i = 0; i < n; i++) {
    outs[i] = out.t[i];
    out.t[i] = NULL;
  }
  kn__outs_fini(&out);
  return kn__autorelease_many(outs, n) == KN_OK ? n : -1;
}

/* ---- shared table entries ----------------------------------------------------- */

kn_status kn__bw_none(kn__bwctx *ctx) {
  return kn__error(KN_EAUTOGRAD, "%s is not differentiable", ctx->call->op->name);
}

kn_status kn__kernel_view(const kn__call *c, kn__outs *out) {
  (void)c;
  (void)out;
  return KN_OK;
}

/* ---- meta of composite ops ------------------------------------------------------- */

/* A metadata-only alias of t: same dtype, geometry and symbolic sizes. */
static kn_tensor *meta_alias(const kn_tensor *t) {
  kn__storage *st = kn__storage_new(0, KN_META);
  if (!st) return NULL;
  kn_tensor *m = kn__tensor_wrap(st, t->dtype, t->ndim, t->sizes, t->strides, t->offset);
  kn__storage_release(st);
  if (m && t->sym) {
    m->sym = malloc(sizeof *m->sym);
    if (!m->sym) {
      kn_release(m);
      return NULL;
    }
    *m->sym = *t->sym;
  }
  return m;
}

/* Run the composite's decomposition on metadata-only copies of the inputs
** and describe its outputs. Tracing modes use this to record a composite op
** as one node. The outputs are reported as fresh tensors. */
kn_status kn__meta_composite(const kn__call *c, kn__metas *out) {
  kn__call mc = *c;
  kn_tensor *owned[KN__MAX_ARGS] = {0};
  kn_tensor **lists[KN__MAX_ARGS] = {0};
  kn_status st = KN_OK;
  for (int i = 0; i < c->nargs && st == KN_OK; i++) {
    const kn__arg *a = &c->args[i];
    if (a->kind == KN__A_TENSOR && a->u.t) {
      owned[i] = meta_alias(a->u.t);
      if (!owned[i]) st = kn__oom();
      mc.args[i].u.t = owned[i];
    } else if (a->kind == KN__A_TENSORS) {
      lists[i] = calloc((size_t)a->u.ts.n + 1, sizeof *lists[i]);
      if (!lists[i]) st = kn__oom();
      for (int j = 0; st == KN_OK && j < a->u.ts.n; j++)
        if (!(lists[i][j] = meta_alias(a->u.ts.v[j]))) st = kn__oom();
      mc.args[i].u.ts.v = lists[i];
    }
  }
  kn__outs o;
  kn__outs_init(&o);
  if (st == KN_OK) st = c->op->kernel(&mc, &o);
  for (int i = 0; st == KN_OK && i < o.n; i++) {
    kn__outmeta *m = kn__metas_push(out, o.t[i]->dtype);
    if (!m) {
      st = kn__oom();
      break;
    }
    m->ndim = o.t[i]->ndim;
    kn__tensor_symsizes(o.t[i], m->sizes);
  }
  kn__outs_fini(&o);
  for (int i = 0; i < c->nargs; i++) {
    kn_release(owned[i]);
    if (lists[i]) {
      for (int j = 0; j < c->args[i].u.ts.n; j++) kn_release(lists[i][j]);
      free(lists[i]);
    }
  }
  return st;
}
