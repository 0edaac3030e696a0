/*
** dynamo/lift.c: tensors a traced function reaches other than through its
** arguments: a module or tensor behind the user-data pointer, a global or
** a struct field. Such a real tensor, met while tracing, is lifted as a
** graph input when it requires grad or belongs to a module (a parameter or
** buffer), as PyTorch lifts a module's parameters and buffers wherever the
** module is reached: it gets a placeholder in the segment that meets it, a
** value-table slot filled from its source at the start of every call, and
** guards. Gradients flow to it through the compiled graphs, and in-place
** updates (an optimizer step, running statistics) are read fresh on every
** call, never baked in. Other real tensors stay graph constants.
**
** Sources name what kiln holds, since C pointers cannot be read back:
**   G['ud']._modules['0']._parameters['weight']  the module is the user-data
**                                               pointer of kn_compile_fn
**   G['__module_0']._parameters['weight']       another module reached by
**                                               kn_module_get
**   G['__tensor_0']                             a tensor met as a value
** The entry keeps a reference on each captured module's struct and an ID
** guard on it (___check_obj_id): kn_module_free of that module fails the
** guard ("... was freed") and the next call recompiles. Modules declared in
** kn_compile_options.globals (G['model']) and argument modules are no
** captures: their tensors are inputs from the start (fakify.c), and a module
** reached below one of them finds its tensors' stand-ins here (`known`).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dynamo/tracer.h"
#include "logging/log.h"
#include "tensor/tensor.h"

/* ---- stand-ins of real tensors ------------------------------------------------- */
kn_status kn__trace_know(kn__trace *tr, kn_tensor *real, kn_tensor *fake) {
  if (tr->nknown == tr->capknown) {
    int nc = tr->capknown ? tr->capknown * 2 : 32;
    kn__known *nk = realloc(tr->known, sizeof *nk * (size_t)nc);
    if (!nk) return kn__oom();
    tr->known = nk;
    tr->capknown = nc;
  }
  tr->known[tr->nknown++] = (kn__known){real, fake};
  return KN_OK;
}

static kn_tensor *known_fake(const kn__trace *tr, const kn_tensor *real) {
  for (int i = 0; i < tr->nknown; i++)
    if (tr->known[i].real == real) return tr->known[i].fake;
  return NULL;
}

/* ---- errors ------------------------------------------------------------------- */
/* The trace stops; the compile fails naming the tensor and the user line. */
static kn_status lift_fail(kn__trace *tr, const char *expr, const kn_tensor *t, const char *why) {
  const char *kind = t->in_module       ? "module's parameter or buffer"
                     : t->requires_grad ? "tensor that requires grad"
                                        : "tensor's gradient (.grad)";
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  int n = kn__trace_user_stack(tr, fr, KN__SRC_MAX_FRAMES, NULL);
  char site[600] = "<unknown>";
  if (n > 0 && fr[n - 1].file)
    snprintf(site, sizeof site, "%s:%d in %s", fr[n - 1].file, fr[n - 1].line,
             fr[n - 1].func ? fr[n - 1].func : "?");
  char msg[1600];
  snprintf(msg, sizeof msg,
           "cannot lift %s (a %s reached at %s through a pointer, not an argument) as a graph "
           "input of compiled function '%s': %s",
           expr, kind, site, tr->f->frame.name, why);
  return kn__trace_refuse(tr, n > 0 ? &fr[n - 1] : NULL, msg);
}

/* ---- sources -------------------------------------------------------------------- */
/* The user frame of the current call (its line is the guards' comment). */
static bool user_frame(kn__trace *tr, kn__srcframe *out) {
  kn__srcframe fr[KN__SRC_MAX_FRAMES];
  int n = kn__trace_user_stack(tr, fr, KN__SRC_MAX_FRAMES, NULL);
  if (n > 0) *out = fr[n - 1];
  return n > 0;
}

static kn_status add_guard(kn__trace *tr, kn__guard *g, const kn__src *src, const char *code) {
  kn__srcframe fr;
  g->src = *src;
  g->code = (char *)code;
  g->comment = user_frame(tr, &fr) ? kn__trace_guard_comment(&fr) : NULL;
  kn_status st = kn__guards_add(&tr->guards, g);
  free(g->comment);
  return st;
}

/* The captured module m's source name; the first time, its ID guard. */
static kn_status capture_module(kn__trace *tr, kn_module *m, const char **expr) {
  for (int i = 0; i < tr->ncapmods; i++)
    if (tr->capmods[i].m == m) {
      *expr = tr->capmods[i].expr;
      return KN_OK;
    }
  kn__capmod *nc = realloc(tr->capmods, sizeof *nc * (size_t)(tr->ncapmods + 1));
  if (!nc) return kn__oom();
  tr->capmods = nc;
  kn__capmod *c = &tr->capmods[tr->ncapmods];
  c->m = m;
  if ((void *)m == tr->f->ud) snprintf(c->expr, sizeof c->expr, "G['ud']");
  else snprintf(c->expr, sizeof c->expr, "G['__module_%d']", tr->ncapmods);
  tr->ncapmods++;
  *expr = c->expr;
  char code[128];
  snprintf(code, sizeof code, "___check_obj_id(%s, %p)", c->expr, (void *)m);
  kn__guard g = {.kind = KN__G_MODULE_ID, .ptr = m, .alias_of = -1};
  kn__src src = {.arg = KN__SRC_OBJECT, .expr = c->expr, .omod = m};
  if (!tr->segs[tr->nseg - 1].quiet)
    KN_LOG(KN_LOG_DYNAMO, KN_INFO,
           "%s: a module reached through a pointer, not an argument: its tensors are lifted as "
           "graph inputs and the compiled entry holds it (declare the pointer in "
           "kn_compile_options.globals to guard what it points to)", c->expr);
  return add_guard(tr, &g, &src, code);
}

/* The source of real tensor t: module m's tensor at path, or t itself. */
static kn_status source_of(kn__trace *tr, kn_tensor *t, kn_module *m, const char *path,
                           kn__src *src, char *expr, size_t n, bool *is_param) {
  *src = (kn__src){.arg = KN__SRC_OBJECT, .expr = expr};
  *is_param = false;
  if (!m) {
    snprintf(expr, n, "G['__tensor_%d']", tr->ncaptensors++);
    src->otensor = t;
    return KN_OK;
  }
  const char *base = "";
  kn_status st = capture_module(tr, m, &base);
  char suffix[1024];
  if (st == KN_OK) st = kn__module_suffix(m, path, suffix, sizeof suffix, is_param);
  if (st != KN_OK) return st;
  snprintf(expr, n, "%s%s", base, suffix);
  src->omod = m;
  src->modpath = (char *)path;
  return KN_OK;
}

/* ---- lifting ---------------------------------------------------------------------- */
static kn_status push_lifted(kn__trace *tr, int slot, const kn__src *src, bool fresh) {
  if (tr->nlifted == tr->caplifted) {
    int nc = tr->caplifted ? tr->caplifted * 2 : 8;
    kn__lifted *nl = realloc(tr->lifted, sizeof *nl * (size_t)nc);
    if (!nl) return kn__oom();
    tr->lifted = nl;
    tr->caplifted = nc;
  }
  kn__lifted *l = &tr->lifted[tr->nlifted];
  l->slot = slot;
  l->fresh = fresh;
  kn_status st = kn__src_copy(&l->src, src);
  if (st == KN_OK) tr->nlifted++;
  return st;
}

/* The placeholder, slot, binding and guard of lifted tensor t. */
static kn_status lift_input(kn__trace *tr, kn_tensor *t, const kn__src *src, bool is_param,
                            kn_tensor **fake) {
  kn__tseg *s = &tr->segs[tr->nseg - 1];
  kn__guard g = {.kind = KN__G_TENSOR, .tensor_slot = tr->guards.ntensors, .alias_of = -1,
                 .dtype = t->dtype, .device = t->device, .requires_grad = t->requires_grad,
                 .ndim = t->ndim};
  memcpy(g.sizes, t->sizes, sizeof g.sizes);
  memcpy(g.strides, t->strides, sizeof g.strides);
  /* parameters and buffers keep static shapes (torch's force_parameter_static_shapes) */
  kn_tensor *f = kn__trace_make_fake(tr, t, src->expr, g.tensor_slot, true, &g.dyn_size,
                                     &g.dyn_stride);
  if (!f) return kn_last_status();
  kn__vmeta vm;
  kn__vmeta_from_tensor(f, &vm);
  kn__gnode *ph = kn__graph_placeholder(s->g, src->expr, &vm);
  int slot = ph ? kn__trace_new_slot(tr, t) : -1;
  kn_status st = slot >= 0 ? kn__tbind_set(tr, f, tr->nseg - 1, ph, 0, slot) : kn_last_status();
  if (st == KN_OK) st = kn__tseg_add_input(s, slot);
  kn_release(f); /* the trace keeps its reference (kn__tbind_set) */
  if (st == KN_OK) st = kn__trace_know(tr, t, f);
  if (st == KN_OK) st = push_lifted(tr, slot, src, !s->quiet);
  if (st != KN_OK) return st;
  if (!s->quiet) kn__trace_describe(tr, t, src->expr, is_param);
  char code[1200];
  kn__tensor_guard_code(src->expr, t, g.dyn_size, g.dyn_stride, code, sizeof code);
  st = add_guard(tr, &g, src, code);
  if (st == KN_OK) *fake = f;
  return st;
}

kn_status kn__trace_lift(kn__trace *tr, kn_tensor *t, kn_module *m, const char *path,
                         kn_tensor **fake) {
  *fake = t->is_fake ? NULL : known_fake(tr, t);
  if (t->is_fake || *fake) return KN_OK;
  bool plain = !m && !t->requires_grad && !t->in_module;
  if (plain && !t->is_grad) return KN_OK; /* a constant */
  if (tr->stop) return kn__error(KN_ESTATE, "tracing stopped after an earlier error");
  if (plain)
    return lift_fail(tr, "a gradient", t, "a .grad read inside the compiled "
                                   "function is a new tensor after every backward, so it can be "
                                   "neither a constant nor an input read at the call's start; "
                                   "pass the gradients as arguments (as kn_optim_step_compiled "
                                   "does) or use them after the compiled call returns");
  char expr[1200];
  kn__src src;
  bool is_param;
  kn_status st = source_of(tr, t, m, path, &src, expr, sizeof expr, &is_param);
  if (st != KN_OK) return lift_fail(tr, m ? path : "a tensor", t, kn_last_error());
  if (tr->exporting)
    return lift_fail(tr, expr, t, "an exported graph takes only the arguments; pass the module "
                     "(or the tensor) as an argument");
  if (tr->guards.ntensors >= KN__MAX_TRACED_INPUTS) {
    char why[96];
    snprintf(why, sizeof why, "a trace has at most %d tensor inputs", KN__MAX_TRACED_INPUTS);
    return lift_fail(tr, expr, t, why);
  }
  st = lift_input(tr, t, &src, is_param, fake);
  return st == KN_OK ? KN_OK : lift_fail(tr, expr, t, kn_last_error());
}

kn_status kn__trace_module_subst(kn__trace *tr, kn_module *m, const char *path,
                                 kn_tensor **out) {
  *out = NULL;
  kn_tensor *t = kn__module_lookup(m, path);
  if (!t || kn__trace_current() != tr) return KN_OK; /* kn_module_get reports a missing path */
  return kn__trace_lift(tr, t, m, path, out);
}

kn_status kn__trace_lift_call(kn__trace *tr, kn__call *c, kn_tensor **lists[KN__MAX_ARGS]) {
  for (int i = 0; i < KN__MAX_ARGS; i++) lists[i] = NULL;
  for (int i = 0; i < c->nargs; i++) {
    kn__arg *a = &c->args[i];
    kn_tensor *f = NULL;
    if (a->kind == KN__A_TENSOR && a->u.t) {
      kn_status st = kn__trace_lift(tr, a->u.t, NULL, NULL, &f);
      if (st != KN_OK) return st;
      if (f) a->u.t = f;
    }
    for (int j = 0; a->kind == KN__A_TENSORS && j < a->u.ts.n; j++) {
      if (!a->u.ts.v[j]) continue;
      kn_status st = kn__trace_lift(tr, a->u.ts.v[j], NULL, NULL, &f);
      if (st != KN_OK) return st;
      if (!f) continue;
      if (!lists[i]) { /* the caller's array is never written */
        lists[i] = malloc(sizeof *lists[i] * (size_t)a->u.ts.n);
        if (!lists[i]) return kn__oom();
        memcpy(lists[i], a->u.ts.v, sizeof *lists[i] * (size_t)a->u.ts.n);
        a->u.ts.v = lists[i];
      }
      lists[i][j] = f;
    }
  }
  return KN_OK;
}

/* ---- handing lifted inputs to the cache entry ------------------------------------- */
const char *kn__trace_lifted_source(const kn__trace *tr, int slot) {
  for (int i = 0; i < tr->nlifted; i++)
    if (tr->lifted[i].slot == slot) return tr->lifted[i].src.expr;
  return NULL;
}

bool kn__trace_lifted_fresh(const kn__trace *tr) {
  for (int i = 0; i < tr->nlifted; i++)
    if (tr->lifted[i].fresh) return true;
  return false;
}

kn_status kn__trace_lifted_to_entry(kn__trace *tr, kn__entry *e) {
  int n = 0;
  for (int i = 0; i < tr->nlifted; i++) n += tr->lifted[i].fresh;
  if (n == 0) return KN_OK;
  int *ns = realloc(e->cap_slot, sizeof *ns * (size_t)(e->ncap + n));
  if (!ns) return kn__oom();
  e->cap_slot = ns;
  kn__src *nsrc = realloc(e->cap_src, sizeof *nsrc * (size_t)(e->ncap + n));
  if (!nsrc) return kn__oom();
  e->cap_src = nsrc;
  for (int i = 0; i < tr->nlifted; i++) {
    kn__lifted *l = &tr->lifted[i];
    if (!l->fresh) continue;
    e->cap_slot[e->ncap] = l->slot;
    e->cap_src[e->ncap++] = l->src; /* moved */
    l->src = (kn__src){0};
    l->fresh = false;
  }
  return KN_OK;
}

void kn__trace_lift_fini(kn__trace *tr) {
  for (int i = 0; i < tr->nlifted; i++) kn__src_fini(&tr->lifted[i].src);
  free(tr->lifted);
  free(tr->known);
  free(tr->capmods);
  tr->lifted = NULL;
  tr->known = NULL;
  tr->capmods = NULL;
  tr->nlifted = tr->nknown = tr->ncapmods = 0;
}
