/*
** dynamo/fakify.c: the root inputs of a trace. Every argument is walked with
** its source; tensors become fake tensors (same dtype/geometry, no data,
** symbolic sizes for dynamic dims) bound to graph placeholders, described in
** the trace (describe_storage / describe_tensor / describe_source and
** create_symbol), and guarded; scalars, lists, None and modules get the
** guards of what C code can read from them.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/error.h"
#include "cuda/cuda.h"
#include "dynamo/tracer.h"
#include "kiln/autocast.h"
#include "kiln/autograd.h"
#include "kiln/ops_pointwise.h"
#include "logging/log.h"
#include "tensor/tensor.h"
#include "trace/events.h"
#include "trace/trace.h"

/* ---- describe records ------------------------------------------------------------ */
static const char *py_dtype(kn_dtype dt, char *buf, size_t n) {
  snprintf(buf, n, "torch.%s", kn_dtype_name(dt));
  return buf;
}

static json_t *int_list(int n, const int64_t *v) {
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

void kn__trace_describe(kn__trace *tr, const kn_tensor *real, const char *source, bool is_param) {
  if (!kn__trace_enabled() || !real) return;
  int id = tr->ndescribed++;
  json_t *st = json_pack("{s:i, s:i, s:I}", "id", id, "describer_id", tr->describer_id, "size",
                         (json_int_t)real->storage->nbytes);
  (void)kn__trace_structured("describe_storage", st, NULL, 0, NULL);
  json_t *t = json_object();
  if (t) {
    json_object_set_new(t, "id", json_integer(id));
    json_object_set_new(t, "ndim", json_integer(real->ndim));
    char dt[40];
    json_object_set_new(t, "dtype", json_string(py_dtype(real->dtype, dt, sizeof dt)));
    char devs[48];
    if (real->device == KN_CUDA)
      snprintf(devs, sizeof devs, "device(type='cuda', index=%d)", kn__cuda_device_index());
    else snprintf(devs, sizeof devs, "device(type='%s')", real->device == KN_META ? "meta" : "cpu");
    json_object_set_new(t, "device", json_string(devs));
    json_object_set_new(t, "size", int_list(real->ndim, real->sizes));
    json_object_set_new(t, "dynamo_hint_overrides", json_object());
    if (kn_is_leaf(real)) json_object_set_new(t, "is_leaf", json_true());
    if (real->requires_grad) json_object_set_new(t, "requires_grad", json_true());
    if (is_param) json_object_set_new(t, "is_parameter", json_true());
    json_object_set_new(t, "stride", int_list(real->ndim, real->strides));
    if (real->offset) json_object_set_new(t, "storage_offset", json_integer(real->offset));
    json_object_set_new(t, "storage", json_integer(id));
    json_object_set_new(t, "view_func", json_string("<built-in method _view_func_unsafe of Tensor object>"));
    json_object_set_new(t, "describer_id", json_integer(tr->describer_id));
    (void)kn__trace_structured("describe_tensor", t, NULL, 0, NULL);
  }
  json_t *s = json_pack("{s:i, s:i, s:s}", "describer_id", tr->describer_id, "id", id, "source",
                        source);
  (void)kn__trace_structured("describe_source", s, NULL, 0, NULL);
}

/* ---- fake tensors ------------------------------------------------------------------ */
/* Which dims of the tensor at `expr` are dynamic (bit d), updating the
** automatic-dynamic state. */
static uint32_t dynamic_dims(kn__trace *tr, const char *expr, const kn_tensor *t, bool param) {
  kn_compiled *f = tr->f;
  uint32_t mask = 0;
  if (param || f->opts.dynamic == KN_DYNAMIC_FALSE || tr->export_mode) return 0;
  if (f->opts.dynamic == KN_DYNAMIC_TRUE) {
    mask = (1u << t->ndim) - 1;
  } else {
    bool found = false;
    kn__dynstate *ds = kn__hm_get(f->dyn_state, expr, &found);
    if (!found) {
      ds = calloc(1, sizeof *ds);
      if (!ds || !kn__hm_put(f->dyn_state, expr, ds)) {
        free(ds);
        return 0;
      }
      ds->ndim = t->ndim;
      memcpy(ds->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    } else if (!tr->into) {
      if (ds->is_int) { /* an int before: every dim changed */
        KN_LOG(KN_LOG_DYNAMO, KN_INFO, "automatic dynamic %s dim %d != int", expr, t->ndim);
        ds->is_int = false;
        ds->dynamic = (1u << t->ndim) - 1;
        ds->ndim = t->ndim;
      }
      if (ds->ndim != t->ndim) {
        KN_LOG(KN_LOG_DYNAMO, KN_INFO, "automatic dynamic %s dim %d != %d", expr, t->ndim,
               ds->ndim);
        ds->dynamic = (1u << (t->ndim > ds->ndim ? t->ndim : ds->ndim)) - 1;
        ds->ndim = t->ndim;
      }
      for (int d = 0; d < t->ndim; d++)
        if (!(ds->dynamic >> d & 1) && ds->sizes[d] != t->sizes[d]) {
          KN_LOG(KN_LOG_DYNAMO, KN_INFO, "automatic dynamic %s size(%d) %lld != %lld", expr, d,
                 (long long)t->sizes[d], (long long)ds->sizes[d]);
          ds->dynamic |= 1u << d;
        }
      memcpy(ds->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    }
    mask = ds->dynamic;
  }
  for (int d = 0; d < t->ndim; d++)
    if (t->sizes[d] < 2) mask &= ~(1u << d); /* 0 and 1 stay specialised */
  return mask & ((1u << t->ndim) - 1);
}

/* Is the int argument at `expr` (value v) dynamic? dynamic=true: always;
** auto: once its value or its type changed between compiles. */
static bool int_is_dynamic(kn__trace *tr, const char *expr, int64_t v) {
  kn_compiled *f = tr->f;
  if (f->opts.dynamic == KN_DYNAMIC_FALSE || tr->export_mode) return false;
  if (f->opts.dynamic == KN_DYNAMIC_TRUE) return true;
  bool found = false;
  kn__dynstate *ds = kn__hm_get(f->dyn_state, expr, &found);
  if (!found) {
    ds = calloc(1, sizeof *ds);
    if (!ds || !kn__hm_put(f->dyn_state, expr, ds)) {
      free(ds);
      return false;
    }
    ds->is_int = true;
    ds->ival = v;
    return false;
  }
  if (!tr->into) {
    if (!ds->is_int) {
      KN_LOG(KN_LOG_DYNAMO, KN_INFO, "automatic dynamic int %s (was a tensor)", expr);
      ds->int_dynamic = true;
    } else if (!ds->int_dynamic && ds->ival != v) {
      KN_LOG(KN_LOG_DYNAMO, KN_INFO, "automatic dynamic int %s val %lld != %lld", expr,
             (long long)v, (long long)ds->ival);
      ds->int_dynamic = true;
    }
    ds->is_int = true;
    ds->ival = v;
  }
  return ds->int_dynamic;
}

/* Symbol k (the env's newest) stands for size `dim` of tensor slot `slot`, or
** (slot -1) for an int argument specialised to `hint`. */
static kn_status push_sym(kn__trace *tr, int slot, int dim, int64_t hint) {
  kn__guards *gs = &tr->guards;
  int k = kn__shape_env_nsymbols(tr->env) - 1;
  int *ns = realloc(gs->sym_slot, sizeof(int) * (size_t)(k + 1));
  if (ns) gs->sym_slot = ns;
  int *nd = ns ? realloc(gs->sym_dim, sizeof(int) * (size_t)(k + 1)) : NULL;
  if (nd) gs->sym_dim = nd;
  int64_t *nh = nd ? realloc(gs->sym_hint, sizeof(int64_t) * (size_t)(k + 1)) : NULL;
  if (!nh) return kn__oom();
  gs->sym_hint = nh;
  gs->sym_slot[k] = slot;
  gs->sym_dim[k] = dim;
  gs->sym_hint[k] = hint;
  gs->nsyms = k + 1;
  return KN_OK;
}

static void emit_create_symbol(kn__trace *tr, kn_sym s, int64_t val, const char *src,
                               const char *vr) {
  char name[32], v[32];
  kn__sym_format(s, name, sizeof name);
  snprintf(v, sizeof v, "%lld", (long long)val);
  if (!tr->segs[0].quiet) {
    KN_LOG(KN_LOG_SYMBOLIC_SHAPES, KN_INFO, "create_symbol %s = %lld for %s %s", name,
           (long long)val, src, vr);
    if (kn__trace_enabled()) {
      json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:[], s:[]}", "symbol", name, "val", v, "vr",
                            vr, "source", src, "user_stack", "stack");
      (void)kn__trace_structured("create_symbol", m, NULL, 0, NULL);
    }
  }
}

/* The fake of a non-leaf input is a non-leaf too (a clone of the leaf fake,
** as PyTorch's fakification does), so in-place ops on it trace as they run
** eagerly. Takes f over. */
static kn_tensor *non_leaf(kn_tensor *f) {
  if (!kn_is_contiguous(f)) return f; /* a clone would not keep the strides */
  bool prev = kn_set_grad_enabled(true);
  kn_scope_begin();
  kn_tensor *c = kn_retain(kn_clone(f));
  kn_scope_end();
  kn_set_grad_enabled(prev);
  if (!c) {
    kn_release(f);
    return NULL;
  }
  kn_release(f);
  return c;
}

kn_tensor *kn__trace_make_fake(kn__trace *tr, kn_tensor *t, const char *src, int slot,
                               bool param, uint32_t *dyn_size, uint32_t *dyn_stride) {
  kn__storage *st = kn__storage_new(t->storage->nbytes, KN_META);
  if (!st) {
    kn__oom();
    return NULL;
  }
  kn_tensor *f = kn__tensor_wrap(st, t->dtype, t->ndim, t->sizes, t->strides, t->offset);
  kn__storage_release(st);
  if (!f) {
    kn__oom();
    return NULL;
  }
  f->is_fake = true;
  f->device = t->device;
  f->requires_grad = t->requires_grad;
  uint32_t mask = dynamic_dims(tr, src, t, param);
  *dyn_size = mask;
  *dyn_stride = 0;
  if (mask) {
    kn__symshape *ss = calloc(1, sizeof *ss);
    if (!ss) {
      kn_release(f);
      kn__oom();
      return NULL;
    }
    for (int d = 0; d < t->ndim; d++) {
      ss->sizes[d] = kn__sym_const(t->sizes[d]);
      if (mask >> d & 1) {
        char s[160];
        snprintf(s, sizeof s, "%s.size()[%d]", src, d);
        if (kn__shape_env_create_symbol(tr->env, t->sizes[d], 2, &ss->sizes[d]) != KN_OK) {
          free(ss);
          kn_release(f);
          return NULL;
        }
        if (push_sym(tr, slot, d, t->sizes[d]) != KN_OK) {
          free(ss);
          kn_release(f);
          return NULL;
        }
        emit_create_symbol(tr, ss->sizes[d], t->sizes[d], s, "[2, int_oo]");
      }
    }
    /* contiguous inputs get symbolic strides; others keep theirs */
    if (kn_is_contiguous(t)) {
      kn_sym acc = kn__sym_const(1);
      for (int d = t->ndim - 1; d >= 0; d--) {
        ss->strides[d] = acc;
        if (!kn__sym_is_const(acc)) *dyn_stride |= 1u << d;
        acc = kn__sym_mul(acc, ss->sizes[d]);
      }
    } else {
      for (int d = 0; d < t->ndim; d++) ss->strides[d] = kn__sym_const(t->strides[d]);
    }
    ss->offset = kn__sym_const(t->offset);
    f->sym = ss;
  }
  return f;
}

void kn__tensor_guard_code(const char *expr, const kn_tensor *t, uint32_t dyn_size,
                           uint32_t dyn_stride, char *code, size_t n) {
  char sz[256] = "", sd[256] = "";
  for (int d = 0, a = 0, b = 0; d < t->ndim; d++) {
    if (dyn_size >> d & 1) a += snprintf(sz + a, sizeof sz - (size_t)a, "%sNone", d ? ", " : "");
    else a += snprintf(sz + a, sizeof sz - (size_t)a, "%s%lld", d ? ", " : "", (long long)t->sizes[d]);
    if (dyn_stride >> d & 1) b += snprintf(sd + b, sizeof sd - (size_t)b, "%sNone", d ? ", " : "");
    else b += snprintf(sd + b, sizeof sd - (size_t)b, "%s%lld", d ? ", " : "", (long long)t->strides[d]);
    if (a >= (int)sizeof sz || b >= (int)sizeof sd) break;
  }
  char dev[16] = "None"; /* PyTorch's device index, for CUDA tensors */
  if (t->device == KN_CUDA) snprintf(dev, sizeof dev, "%d", kn__cuda_device_index());
  snprintf(code, n,
           "check_tensor(%s, Tensor, %s, torch.%s, device=%s, requires_grad=%s, size=[%s], "
           "stride=[%s])",
           expr,
           t->device == KN_META   ? "DispatchKeySet(Meta, BackendSelect, ADInplaceOrView, AutogradMeta)"
           : t->device == KN_CUDA ? "DispatchKeySet(CUDA, BackendSelect, ADInplaceOrView, AutogradCUDA)"
                                  : "DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)",
           kn_dtype_name(t->dtype), dev, t->requires_grad ? "True" : "False", sz, sd);
}

/* ---- walking the arguments ------------------------------------------------------------- */
typedef struct walk {
  kn__trace *tr;
  kn_tensor *seen_real[KN__MAX_TRACED_INPUTS];
  kn_tensor *seen_fake[KN__MAX_TRACED_INPUTS];
  int nseen;
} walk;

static kn_status add_guard(kn__trace *tr, kn__guard *g, const kn__src *src, const char *code) {
  g->src = *src;
  g->code = (char *)code;
  return kn__guards_add(&tr->guards, g);
}

/* A tensor input: fake, placeholder, slot, guard, describe. */
static kn_status tensor_input(walk *w, const kn__src *src, kn_tensor *t, bool param,
                              kn_tensor **fake_out) {
  kn__trace *tr = w->tr;
  if (!t) return kn__error(KN_EINVAL, "argument %s is a NULL tensor", src->expr);
  if (t->is_fake) return kn__error(KN_EINVAL, "argument %s is a traced tensor", src->expr);
  for (int i = 0; i < w->nseen; i++)
    if (w->seen_real[i] == t) { /* the same tensor again: alias guard */
      kn__guard g = {.kind = KN__G_TENSOR, .tensor_slot = i, .alias_of = i,
                     .dtype = t->dtype, .device = t->device, .requires_grad = t->requires_grad,
                     .ndim = t->ndim};
      memcpy(g.sizes, t->sizes, sizeof g.sizes);
      memcpy(g.strides, t->strides, sizeof g.strides);
      char code[512];
      snprintf(code, sizeof code, "%s is %s", tr->root_src[i].expr, src->expr);
      *fake_out = w->seen_fake[i];
      return add_guard(tr, &g, src, code);
    }
  if (w->nseen == KN__MAX_TRACED_INPUTS)
    return kn__error(KN_EUNSUPPORTED, "at most %d tensor inputs can be traced",
                     KN__MAX_TRACED_INPUTS);
  int slot = w->nseen;
  kn__guard g = {.kind = KN__G_TENSOR, .tensor_slot = slot, .alias_of = -1, .dtype = t->dtype,
                 .device = t->device, .requires_grad = t->requires_grad, .ndim = t->ndim};
  memcpy(g.sizes, t->sizes, sizeof g.sizes);
  memcpy(g.strides, t->strides, sizeof g.strides);
  if (!tr->segs[0].quiet) kn__trace_describe(tr, t, src->expr, param);
  kn_tensor *f = kn__trace_make_fake(tr, t, src->expr, slot, param, &g.dyn_size, &g.dyn_stride);
  if (f && t->grad_fn && t->requires_grad) f = non_leaf(f);
  if (!f) return kn_last_status();
  kn__vmeta vm;
  kn__vmeta_from_tensor(f, &vm);
  kn__gnode *ph = kn__graph_placeholder(tr->segs[0].g, src->expr, &vm);
  int s2 = ph ? kn__trace_new_slot(tr, t) : -1;
  kn_status st = ph && s2 >= 0 ? kn__tbind_set(tr, f, 0, ph, 0, s2) : kn_last_status();
    if (st == KN_OK) st = kn__tseg_add_input(&tr->segs[0], s2);
  if (st != KN_OK) {
    kn_release(f);
    return st;
  }
  kn__src *rs = realloc(tr->root_src, sizeof *rs * (size_t)(tr->nroot + 1));
  if (!rs) {
    kn_release(f);
    return kn__oom();
  }
  tr->root_src = rs;
  st = kn__src_copy(&tr->root_src[tr->nroot], src);
  if (st != KN_OK) {
    kn_release(f);
    return st;
  }
  tr->nroot++;
  w->seen_real[w->nseen] = t;
  w->seen_fake[w->nseen++] = f;
  kn_release(f); /* the trace keeps its own reference (kn__tbind_set) */
  *fake_out = f;
  st = kn__trace_know(tr, t, f);
  if (st != KN_OK) return st;
  char code[1024];
  kn__tensor_guard_code(src->expr, t, g.dyn_size, g.dyn_stride, code, sizeof code);
  return add_guard(tr, &g, src, code);
}

static kn_status walk_value(walk *w, kn__src *src, kn_value v, kn_value *fv, int depth);

typedef struct modwalk {
  walk *w;
  kn__src *base;
  const kn_module *m;
} modwalk;

static kn_status mod_tensor(void *ud, const char *suffix, const char *path, kn_tensor *t,
                            bool is_param) {
  modwalk *mw = ud;
  kn__trace *tr = mw->w->tr;
  char expr[1200];
  snprintf(expr, sizeof expr, "%s%s", mw->base->expr, suffix);
  kn__src s = *mw->base;
  s.expr = expr;
  s.modpath = (char *)path;
  kn_tensor *fake = NULL;
  kn_status st = tensor_input(mw->w, &s, t, is_param, &fake);
  if (st != KN_OK) return st;
  kn__subst *ns = realloc(tr->subst, sizeof *ns * (size_t)(tr->nsubst + 1));
  if (!ns) return kn__oom();
  tr->subst = ns;
  char *p = strdup(path);
  if (!p) return kn__oom();
  tr->subst[tr->nsubst++] = (kn__subst){mw->m, p, fake};
  return KN_OK;
}

static kn_status walk_value(walk *w, kn__src *src, kn_value v, kn_value *fv, int depth) {
  kn__trace *tr = w->tr;
  *fv = v;
  kn__guard g = {.kind = KN__G_KIND, .vkind = v.kind, .alias_of = -1};
  char code[1024];
  switch (v.kind) {
  case KN_VTENSOR:
    return tensor_input(w, src, v.u.t, false, &fv->u.t);
  case KN_VINT:
    /* (at most 64 int symbols: the guard check's symbol table is fixed) */
    if (int_is_dynamic(tr, src->expr, v.u.i) && tr->nint_syms < 64) {
      tr->nint_syms++;
      /* a symbol (create_symbol), specialised at once: C code reads the
      ** value, so the guard below keeps it (see docs/DYNAMO.md) */
      kn_sym sym;
      kn_status st = kn__shape_env_create_symbol(tr->env, v.u.i, INT64_MIN, &sym);
      if (st == KN_OK) st = push_sym(tr, -1, 0, v.u.i);
      if (st != KN_OK) return st;
      emit_create_symbol(tr, sym, v.u.i, src->expr, "[-int_oo, int_oo]");
    }
    g.kind = KN__G_INT;
    g.i = v.u.i;
    snprintf(code, sizeof code, "%s == %lld", src->expr, (long long)v.u.i);
    return add_guard(tr, &g, src, code);
  case KN_VDOUBLE: {
    char r[40];
    kn__py_float_repr(v.u.d, r, sizeof r);
    g.kind = KN__G_DOUBLE;
    g.d = v.u.d;
    snprintf(code, sizeof code, "%s == %s", src->expr, r);
    return add_guard(tr, &g, src, code);
  }
  case KN_VBOOL:
    g.kind = KN__G_BOOL;
    g.b = v.u.b;
    snprintf(code, sizeof code, "%s == %s", src->expr, v.u.b ? "True" : "False");
    return add_guard(tr, &g, src, code);
  case KN_VNONE:
    snprintf(code, sizeof code, "%s is None", src->expr);
    return add_guard(tr, &g, src, code);
  case KN_VMODULE: {
    g.kind = KN__G_MODULE_ID;
    g.ptr = v.u.m;
    snprintf(code, sizeof code, "___check_obj_id(%s, %p)", src->expr, (void *)v.u.m);
    kn_status st = add_guard(tr, &g, src, code);
    modwalk mw = {w, src, v.u.m};
    return st == KN_OK ? kn__module_visit(v.u.m, mod_tensor, &mw) : st;
  }
  case KN_VLIST:
  case KN_VTUPLE: {
    fv->u.items = NULL; /* the copy owns its own items, never the caller's */
    if (v.n < 0 || (v.n > 0 && !v.u.items))
      return kn__error(KN_EINVAL, "%s: expected a %s of n >= 0 items, got n = %d and items %s",
                       src->expr, v.kind == KN_VLIST ? "list" : "tuple", v.n,
                       v.u.items ? "set" : "NULL");
    if (depth >= KN__SRC_MAXIDX)
      return kn__error(KN_EUNSUPPORTED, "%s: lists nested deeper than %d cannot be traced",
                       src->expr, KN__SRC_MAXIDX);
    snprintf(code, sizeof code, "type(%s) is %s", src->expr, v.kind == KN_VLIST ? "list" : "tuple");
    kn_status st = add_guard(tr, &g, src, code);
    if (st != KN_OK) return st;
    kn__guard lg = {.kind = KN__G_LEN, .i = v.n, .alias_of = -1};
    snprintf(code, sizeof code, "len(%s) == %d", src->expr, v.n);
    st = add_guard(tr, &lg, src, code);
    if (st != KN_OK) return st;
    kn_value *items = calloc((size_t)(v.n ? v.n : 1), sizeof *items);
    if (!items) return kn__oom();
    fv->u.items = items;
    for (int i = 0; i < v.n; i++) {
      kn__src s = *src;
      char expr[1024];
      snprintf(expr, sizeof expr, "%s[%d]", src->expr, i);
      s.expr = expr;
      s.idx[s.nidx++] = i;
      st = walk_value(w, &s, v.u.items[i], &items[i], depth + 1);
      if (st != KN_OK) return st;
    }
    return KN_OK;
  }
  }
  return KN_OK;
}

/* kn_module_get while tracing: an argument module's stand-in, else the
** tensor is lifted (lift.c). */
static kn_status subst(void *ud, kn_module *m, const char *path, kn_tensor **out) {
  kn__trace *tr = ud;
  for (int i = 0; i < tr->nsubst; i++)
    if (tr->subst[i].m == m && !strcmp(tr->subst[i].path, path)) {
      *out = tr->subst[i].fake;
      return KN_OK;
    }
  return kn__trace_module_subst(tr, m, path, out);
}

static void free_fargs(kn_value *v, int n) {
  for (int i = 0; i < n; i++)
    if ((v[i].kind == KN_VLIST || v[i].kind == KN_VTUPLE) && v[i].u.items) {
      free_fargs((kn_value *)v[i].u.items, v[i].n);
      free((void *)v[i].u.items);
    }
}

void kn__trace_free_fargs(kn__trace *tr) {
  if (!tr->fargs) return;
  free_fargs(tr->fargs, tr->nargs);
  free(tr->fargs);
  tr->fargs = NULL;
  for (int i = 0; i < tr->nsubst; i++) free(tr->subst[i].path);
  free(tr->subst);
  tr->subst = NULL;
  tr->nsubst = 0;
}

kn_status kn__trace_fakify(kn__trace *tr) {
  walk w = {.tr = tr};
  tr->fargs = calloc((size_t)(tr->nargs ? tr->nargs : 1), sizeof *tr->fargs);
  if (!tr->fargs) return kn__oom();
  /* the global state: grad mode, and the autocast dtype (float32: off) */
  kn__guard gm = {.kind = KN__G_GRAD_MODE, .b = kn_is_grad_enabled(),
                  .i = (int64_t)kn_autocast_dtype(), .alias_of = -1};
  kn__src none = {.arg = -1, .expr = (char *)"G"};
  kn_status st = add_guard(tr, &gm, &none, "___check_global_state()");
  for (int i = 0; st == KN_OK && i < tr->nargs; i++) {
    char expr[256];
    kn__arg_source(tr->f, i, expr, sizeof expr);
    kn__src s = {.arg = i, .expr = expr};
    st = walk_value(&w, &s, tr->args[i], &tr->fargs[i], 0);
  }
  /* declared globals: read through their pointers, inputs like arguments */
  for (int i = 0; st == KN_OK && i < tr->f->nglobals; i++) {
    const kn_compile_global *gl = &tr->f->globals[i];
    char expr[256];
    snprintf(expr, sizeof expr, "G['%s']", gl->name);
    kn__src s = {.arg = KN__SRC_GLOBAL, .expr = expr, .gmod = gl->module, .gten = gl->tensor};
    kn_value v = kn_vnone(), fv;
    (void)kn__src_get(&s, NULL, 0, &v);
    st = walk_value(&w, &s, v, &fv, 0);
  }
  tr->root_first_node = calloc((size_t)(tr->nroot ? tr->nroot : 1), sizeof *tr->root_first_node);
  if (st == KN_OK && !tr->root_first_node) st = kn__oom();
  kn__module_set_subst(subst, tr);
  return st;
}

/* ---- guards after the trace ------------------------------------------------------------ */
char *kn__trace_guard_comment(const kn__srcframe *fr) {
  if (!fr || !fr->file) return NULL;
  const char *line = kn__srcloc_line(fr->file, fr->line);
  const char *p = line ? line : "";
  while (*p == ' ' || *p == '\t') p++;
  const char *base = strrchr(fr->file, '/');
  char buf[1024];
  snprintf(buf, sizeof buf, "%s  # %s:%d in %s", p, base ? base + 1 : fr->file, fr->line,
           fr->func ? fr->func : "?");
  return strdup(buf);
}

/* Replace symbols s<k> in a sympy string by their sources. */
static char *to_source_terms(kn__trace *tr, const char *expr) {
  kn__sb sb = KN__SB_INIT;
  for (const char *p = expr; *p;) {
    if (*p == 's' && p[1] >= '0' && p[1] <= '9' && (p == expr || !((p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z') || p[-1] == '_'))) {
      char *end;
      long k = strtol(p + 1, &end, 10);
      if (k >= 0 && k < tr->guards.nsyms && tr->guards.sym_slot[k] >= 0) {
        int slot = tr->guards.sym_slot[k];
        kn__sb_printf(&sb, "%s.size()[%d]", tr->root_src[slot].expr, tr->guards.sym_dim[k]);
        p = end;
        continue;
      }
    }
    kn__sb_putc(&sb, *p++);
  }
  return kn__sb_take(&sb);
}

kn_status kn__trace_finish_guards(kn__trace *tr) {
  kn__guards *gs = &tr->guards;
  kn_compiled *f = tr->f;
  for (int i = 0; i < gs->nshape; i++) {
    free(gs->shape_code[i]);
    if (gs->shape_comment) free(gs->shape_comment[i]);
  }
  free(gs->shape_code);
  free(gs->shape_comment);
  gs->shape_code = gs->shape_comment = NULL;
  gs->nshape = 0;
  if (tr->guards_done) goto shape;
  tr->guards_done = true;
  kn__srcframe deffr = {f->frame.name, f->frame.file, f->frame.line};
  char *defc = kn__trace_guard_comment(&deffr);
  /* tensor guards: the line of the first op that used the input */
  for (int i = 0; i < gs->n; i++) {
    kn__guard *g = &gs->g[i];
    if (g->kind == KN__G_GRAD_MODE || g->comment) continue;
    const kn__gnode *first = NULL;
    if (g->kind == KN__G_TENSOR && g->tensor_slot < tr->nroot)
      first = tr->root_first_node[g->alias_of >= 0 ? g->alias_of : g->tensor_slot];
    if (first && first->nstack > 0) {
      const kn__gframe *gf = &first->stack[first->nstack - 1];
      kn__srcframe fr = {gf->func, gf->file, gf->line};
      g->comment = kn__trace_guard_comment(&fr);
    } else if (defc) {
      g->comment = strdup(defc);
    }
  }
  free(defc);
  /* symbolic sizes: lower bounds and the shape env's guards */
  for (int k = 0; k < gs->nsyms; k++) {
    int slot = gs->sym_slot[k];
    if (slot < 0) continue; /* an int: its value guard holds it */
    kn__guard g = {.kind = KN__G_SYM_MIN, .i = 2, .dim = gs->sym_dim[k], .alias_of = -1};
    char code[512];
    snprintf(code, sizeof code, "2 <= %s.size()[%d]", tr->root_src[slot].expr, gs->sym_dim[k]);
    kn_status st = add_guard(tr, &g, &tr->root_src[slot], code);
    if (st != KN_OK) return st;
  }
shape:
  gs->env = tr->env;
  int ng = kn__shape_env_nguards(tr->env);
  gs->shape_code = calloc((size_t)(ng ? ng : 1), sizeof *gs->shape_code);
  gs->shape_comment = calloc((size_t)(ng ? ng : 1), sizeof *gs->shape_comment);
  if (!gs->shape_code || !gs->shape_comment) return kn__oom();
  for (int i = 0; i < ng; i++) {
    gs->shape_code[i] = to_source_terms(tr, kn__shape_env_guard_str(tr->env, i));
    if (!gs->shape_code[i]) return kn__oom();
    gs->shape_comment[i] = kn__gsrc_comment(tr, i); /* NULL when unknown */
    gs->nshape = i + 1;
  }
  return KN_OK;
}
