/*
** inductor/cudagraphs.c: mode "reduce-overhead", CUDA graphs around a
** compiled graph (PyTorch's cudagraph trees, simplified to one recording per
** compiled graph and concrete input geometry).
**
** Per distinct input geometry (sizes, strides, dtypes): the first call runs
** the graph normally (warm-up: kernels are loaded, caches filled); the
** second copies the inputs into static input buffers, captures the graph's
** launches on kiln's stream into a CUDA graph (the buffers it allocates
** meanwhile become the graph's private pool) and keeps its outputs as the
** static outputs; that call and every later one copy the inputs into the
** static buffers (skipped for an input that is its static buffer) and
** replay the graph. Inputs passed again at the same addresses get a
** recording of their own that reads them in place (no copies: one graph
** launch a call). The outputs returned are new aliases of the static
** outputs: the next replay of the same recording overwrites them (as
** PyTorch's "overwritten by a subsequent run"); clone one to keep it.
**
** Training (kn__cudagraphs_wrap_guarded: inductor wraps AOT's forward and
** backward graphs apart): a replay would overwrite outputs autograd still
** holds (saved activations, gradients), so a call that finds a tensor
** still on the last replay's outputs runs the graph normally; outputs on
** an input's memory are handed out as views of the caller's input, and no
** recording keeps its inputs (they may be another recording's outputs).
**
** A graph is not captured (it runs normally, the reason logged once to
** perf_hints at WARNING and to the cudagraphs artifact, in PyTorch's words
** "skipping cudagraphs due to ...") when it mutates an input, when it
** holds a random op (dropout: its generator's counter lives on the host,
** so a replay would draw the same numbers), when an input is on the CPU
** (a CPU-only graph simply runs), when a call needs autograd, when an
** output aliases an input or is not on the GPU, or when the capture fails
** (work that cannot be captured: a copy to the host, a synchronisation);
** the last three mark that geometry's recording only.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda.h"
#include "inductor/inductor.h"
#include "kiln/cuda.h"
#include "kiln/ops_pointwise.h"
#include "logging/log.h"
#include "ops/opdef.h"
#include "tensor/tensor.h"

/* An output of a training graph that is a view of one of its inputs (a
** saved primal, a transposed weight): a replay hands out the same view of
** the caller's input. */
typedef struct passview {
  int input; /* -1: not a view of an input */
  int ndim;
  int64_t sizes[KN_MAX_DIMS], strides[KN_MAX_DIMS];
  int64_t doff; /* its offset past the input's */
} passview;

typedef struct rec {
  struct rec *next;
  int64_t *key;          /* per input: dtype, ndim, sizes, strides */
  int nkey;
  int calls;             /* calls of this geometry so far */
  char *skip;            /* owned: why this geometry runs without a graph, or NULL */
  kn__cuda_graph *graph; /* owned */
  kn_tensor **sin, **sout; /* owned references: static inputs and outputs */
  int nin, nout;
  bool checks;           /* the graph holds a device-side check (cuda/devcheck.c) */
  struct rec *direct;    /* owned: the recording made on the inputs themselves, or NULL */
  void **last;           /* [nin] the inputs' device addresses at the last replay */
  passview *pass;        /* [nout] guarded graphs only, or NULL */
} rec;

typedef struct cg {
  kn_compiled_graph inner; /* owned */
  char **names;            /* the graph's input names (owned), for messages */
  int nnames;
  char *skip;              /* the graph's own reason (mutated inputs), or NULL */
  pthread_mutex_t mu;      /* one call at a time: replays share the static buffers */
  rec *recs;
  bool told;               /* a reason was logged (once per compiled graph) */
  bool guarded;            /* a training graph: no replay over outputs in use, no
                              recording that keeps its inputs */
  bool told_busy;          /* the outputs-in-use hint was logged */
  int64_t nrecorded, nreplayed; /* statistics, under mu */
} cg;

/* ---- reasons ------------------------------------------------------------------- */

static void tell_skip(cg *c, const char *why) {
  if (c->told) return;
  c->told = true;
  KN_LOG_ARTIFACT_AT(KN_ART_PERF_HINTS, KN_WARNING, "skipping cudagraphs due to %s", why);
  KN_LOG_ARTIFACT(KN_ART_CUDAGRAPHS, "skipping cudagraphs due to %s", why);
}

/* The base a view chain ends at. */
static const kn__gnode *base_of(const kn__gnode *n) {
  while (n->op == KN__GN_CALL && n->opdef && (n->opdef->flags & KN_OPF_VIEW) && n->nargs > 0 &&
         n->args[0].kind == KN__GA_TENSOR && n->args[0].u.t.node)
    n = n->args[0].u.t.node;
  return n;
}

/* In-place writes to graph inputs (through views too). */
static int mutated_inputs(const kn__graph *g) {
  int count = 0;
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->op != KN__GN_CALL || !n->opdef || !(n->opdef->flags & KN_OPF_INPLACE) ||
        n->nargs == 0 || n->args[0].kind != KN__GA_TENSOR || !n->args[0].u.t.node)
      continue;
    if (base_of(n->args[0].u.t.node)->op == KN__GN_PLACEHOLDER) count++;
  }
  return count;
}

/* The first op that draws from a generator (dropout, rand), or NULL: the
** generator's counter moves on the host, so a replay would draw the same
** numbers again. */
static const char *random_op(const kn__graph *g) {
  for (int i = 0; i < kn__graph_num_nodes(g); i++) {
    const kn__gnode *n = kn__graph_node(g, i);
    if (n->op == KN__GN_CALL && n->opdef && (n->opdef->flags & KN_OPF_RANDOM))
      return n->opdef->name;
  }
  return NULL;
}

static const char *input_name(const cg *c, int i) {
  return i < c->nnames && c->names[i] ? c->names[i] : "?";
}

/* Why this call cannot use a graph at all (written into buf), or NULL. */
static const char *call_skip(cg *c, kn_tensor *const *in, int nin, char *buf, size_t n) {
  if (c->skip) return c->skip;
  bool grad = kn__grad_enabled();
  for (int i = 0; i < nin; i++) {
    if (!kn__tensor_on_cuda(in[i])) {
      snprintf(buf, n, "cpu device (%s)", input_name(c, i));
      return buf;
    }
    if (grad && in[i]->requires_grad) {
      snprintf(buf, n, "autograd: input %s requires grad (a callable captured whole records "
               "its forward only: the inductor backend records training graphs)",
               input_name(c, i));
      return buf;
    }
  }
  return NULL;
}

/* ---- recordings ---------------------------------------------------------------- */

static int key_len(kn_tensor *const *in, int nin) {
  int n = 0;
  for (int i = 0; i < nin; i++) n += 3 + 2 * in[i]->ndim;
  return n;
}

/* Write the inputs' key into k (NULL: compare with k instead); false on the
** first difference. No allocation on the path of every call. */
static bool key_put(int64_t *k, const int64_t *cmp, kn_tensor *const *in, int nin) {
  int at = 0;
  for (int i = 0; i < nin; i++) {
    int64_t v[3 + 2 * KN_MAX_DIMS];
    int n = 0;
    v[n++] = in[i]->dtype;
    v[n++] = in[i]->ndim;
    v[n++] = in[i]->device;
    for (int d = 0; d < in[i]->ndim; d++) v[n++] = in[i]->sizes[d];
    for (int d = 0; d < in[i]->ndim; d++) v[n++] = in[i]->strides[d];
    if (cmp && memcmp(cmp + at, v, (size_t)n * sizeof *v)) return false;
    if (k) memcpy(k + at, v, (size_t)n * sizeof *v);
    at += n;
  }
  return true;
}

/* The recording of this geometry, added when new (mu held); NULL on OOM. */
static rec *find_rec(cg *c, kn_tensor *const *in, int nin) {
  int nkey = key_len(in, nin);
  for (rec *r = c->recs; r; r = r->next)
    if (r->nkey == nkey && key_put(NULL, r->key, in, nin)) return r;
  rec *r = calloc(1, sizeof *r);
  int64_t *key = malloc(((size_t)nkey + 1) * sizeof *key);
  if (!r || !key) {
    free(r);
    free(key);
    return NULL;
  }
  key_put(key, NULL, in, nin);
  r->key = key;
  r->nkey = nkey;
  r->next = c->recs;
  c->recs = r;
  return r;
}

static void rec_free(rec *r);

static void rec_clear(rec *r) {
  if (r->direct) rec_free(r->direct);
  r->direct = NULL;
  free(r->last);
  r->last = NULL;
  kn__cuda_graph_free(r->graph);
  r->graph = NULL;
  for (int i = 0; r->sin && i < r->nin; i++) kn_release(r->sin[i]);
  for (int i = 0; r->sout && i < r->nout; i++) kn_release(r->sout[i]);
  free(r->sin);
  free(r->sout);
  free(r->pass);
  r->sin = r->sout = NULL;
  r->pass = NULL;
}

static void rec_free(rec *r) {
  rec_clear(r);
  free(r->key);
  free(r->skip);
  free(r);
}

/* Static input buffers of the inputs' geometry, holding their values. */
static kn_status static_inputs(rec *r, kn_tensor *const *in, int nin) {
  r->nin = nin;
  r->sin = calloc((size_t)nin + 1, sizeof *r->sin);
  if (!r->sin) return kn__oom();
  for (int i = 0; i < nin; i++) {
    r->sin[i] = kn__empty_strided(in[i]->ndim, in[i]->sizes, in[i]->strides, in[i]->dtype,
                                  KN_CUDA);
    if (!r->sin[i]) return kn_last_status() ? kn_last_status() : kn__oom();
    kn_status st = kn_copy_(r->sin[i], in[i]);
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

/* Output o as a view of static input i into r->pass (guarded graphs). */
static void pass_view(rec *r, int o, int i, const kn_tensor *out) {
  passview *p = &r->pass[o];
  p->input = i;
  p->ndim = out->ndim;
  memcpy(p->sizes, out->sizes, (size_t)out->ndim * sizeof *p->sizes);
  memcpy(p->strides, out->strides, (size_t)out->ndim * sizeof *p->strides);
  p->doff = out->offset - r->sin[i]->offset;
}

/* Why the captured outputs cannot be handed out as static outputs, or NULL.
** A guarded graph's output on an input's memory becomes a view of the
** caller's input (r->pass) instead. */
static const char *bad_outputs(rec *r, bool guarded, kn_tensor *const *out, int nout, char *buf,
                               size_t n) {
  for (int o = 0; o < nout; o++) {
    if (!kn__tensor_on_cuda(out[o])) {
      snprintf(buf, n, "an output on the cpu (output %d)", o);
      return buf;
    }
    if (guarded) r->pass[o].input = -1;
    for (int i = 0; i < r->nin; i++)
      if (kn_same_storage(out[o], r->sin[i]) && guarded) {
        pass_view(r, o, i, out[o]);
        break;
      } else if (kn_same_storage(out[o], r->sin[i])) {
        snprintf(buf, n, "output %d aliasing input %d", o, i);
        return buf;
      }
  }
  return NULL;
}

/* Capture one run of the graph on the static inputs (mu held). On a capture
** that fails, r->skip says why and KN_OK is returned (the call runs
** normally); other errors are returned. */
static kn_status capture(cg *c, rec *r, int nout) {
  kn_tensor **out = calloc((size_t)nout + 1, sizeof *out);
  r->sout = calloc((size_t)nout + 1, sizeof *r->sout);
  if (!out || !r->sout) {
    free(out);
    return kn__oom();
  }
  r->nout = nout;
  if (c->guarded && !(r->pass = calloc((size_t)nout + 1, sizeof *r->pass))) {
    free(out);
    return kn__oom();
  }
  kn_scope_begin();
  kn_status st = kn__cuda_capture_begin();
  if (st != KN_OK) {
    kn_scope_end();
    free(out);
    return st;
  }
  uint64_t epoch = kn__cuda_check_epoch();
  kn_status run = c->inner.run(c->inner.state, r->sin, r->nin, out, nout);
  r->checks = kn__cuda_check_epoch() != epoch;
  char why[1200] = "";
  if (run != KN_OK)
    snprintf(why, sizeof why, "a step that cannot be captured: %s", kn_last_error());
  st = kn__cuda_capture_end(&r->graph);
  const char *bad = run == KN_OK ? bad_outputs(r, c->guarded, out, nout, why, sizeof why) : NULL;
  for (int o = 0; run == KN_OK && !bad && o < nout; o++)
    if (!r->pass || r->pass[o].input < 0) r->sout[o] = kn_retain(out[o]);
  kn_scope_end();
  free(out);
  if (why[0]) {
    rec_clear(r);
    r->skip = strdup(why);
    return r->skip ? KN_OK : kn__oom();
  }
  return st;
}

/* src into its static buffer dst (the same geometry): one device memcpy
** when both are contiguous, else the copy_ op. */
static kn_status copy_in(kn_tensor *dst, kn_tensor *src) {
  void *d = kn_cuda_data_ptr(dst), *s = kn_cuda_data_ptr(src);
  if (d == s) return KN_OK; /* the input is its static buffer */
  if (!kn_is_contiguous(src) || !kn_is_contiguous(dst)) return kn_copy_(dst, src);
  return kn__cuda_memcpy(d, KN_CUDA, s, KN_CUDA, (size_t)kn_numel(src) * kn_dtype_size(src->dtype));
}

/* Copy the inputs into the static buffers, replay, alias the outputs. */
static kn_status replay(cg *c, rec *r, kn_tensor *const *in, kn_tensor **out) {
  for (int i = 0; i < r->nin; i++) {
    kn_status st = copy_in(r->sin[i], in[i]);
    if (st != KN_OK) return st;
  }
  kn_status st = kn__cuda_graph_launch(r->graph);
  if (st != KN_OK) return st;
  if (r->checks) kn__cuda_check_arm(); /* read its check at the next synchronisation */
  for (int o = 0; o < r->nout; o++) {
    const passview *p = r->pass && r->pass[o].input >= 0 ? &r->pass[o] : NULL;
    kn_tensor *a = p ? kn__make_view(in[p->input], p->ndim, p->sizes, p->strides,
                                     in[p->input]->offset + p->doff)
                     : kn__tensor_alias(r->sout[o]);
    if (!a) {
      for (int k = 0; k < o; k++) out[k] = NULL; /* autoreleased already */
      return kn__oom();
    }
    out[o] = kn__autorelease(a);
  }
  c->nreplayed++;
  return KN_OK;
}

/* Record this geometry's graph (mu held): static inputs, then the capture. */
static kn_status record(cg *c, rec *r, kn_tensor *const *in, int nin, int nout) {
  kn_status st = static_inputs(r, in, nin);
  if (st == KN_OK) st = capture(c, r, nout);
  if (st != KN_OK) {
    rec_clear(r);
    return st;
  }
  if (r->skip) return KN_OK;
  c->nrecorded++;
  KN_LOG_ARTIFACT(KN_ART_CUDAGRAPHS, "recorded a CUDA graph of the compiled graph for input "
                  "geometry %d of this graph (%d inputs, %d outputs)", (int)c->nrecorded, nin,
                  nout);
  return KN_OK;
}

/* ---- the callable ------------------------------------------------------------- */

/* ---- recordings on the inputs themselves ---------------------------------------- */
/* A caller that passes the same tensors again and again (a fixed input
** buffer, parameters) gets a second recording of the same geometry whose
** static inputs are those tensors themselves (kept alive by the recording):
** its replay reads them where they are, without the copies into static
** buffers, one graph launch per call. It is made when a call's inputs have
** the addresses of the previous call's and used while they do; other
** inputs replay the copying recording. */
static bool same_places(void *const *a, kn_tensor *const *in, int nin) {
  for (int i = 0; i < nin; i++)
    if (a[i] != kn_cuda_data_ptr(in[i])) return false;
  return true;
}

static bool direct_fits(const rec *d, kn_tensor *const *in, int nin) {
  if (!d || d->skip || !d->graph || d->nin != nin) return false;
  for (int i = 0; i < nin; i++)
    if (kn_cuda_data_ptr(d->sin[i]) != kn_cuda_data_ptr(in[i])) return false;
  return true;
}

static kn_status record_direct(cg *c, rec *r, kn_tensor *const *in, int nin, int nout) {
  rec *d = calloc(1, sizeof *d);
  if (!d || !(d->sin = calloc((size_t)nin + 1, sizeof *d->sin))) {
    free(d);
    return kn__oom();
  }
  d->nin = nin;
  for (int i = 0; i < nin; i++) d->sin[i] = kn_retain(in[i]);
  kn_status st = capture(c, d, nout);
  if (st != KN_OK) {
    rec_free(d);
    return st;
  }
  r->direct = d; /* a skipped one stays, so that it is not tried again */
  if (!d->skip) c->nrecorded++;
  return KN_OK;
}

/* Remember where this call's inputs are; true when the previous call's were
** in the same places. */
static bool same_as_last(rec *r, kn_tensor *const *in, int nin) {
  bool same = r->last && same_places(r->last, in, nin);
  if (!r->last) r->last = calloc((size_t)nin + 1, sizeof *r->last);
  for (int i = 0; r->last && i < nin; i++) r->last[i] = kn_cuda_data_ptr(in[i]);
  return same;
}

/* The replay of an existing recording r: its direct variant when the inputs
** are its static inputs, recording that variant when the inputs stay put. */
static kn_status replay_any(cg *c, rec *r, kn_tensor *const *in, int nin, kn_tensor **out,
                            int nout) {
  if (direct_fits(r->direct, in, nin)) return replay(c, r->direct, in, out);
  if (same_as_last(r, in, nin) && !r->direct) {
    kn_status st = record_direct(c, r, in, nin, nout);
    if (st != KN_OK) return st;
    if (direct_fits(r->direct, in, nin)) return replay(c, r->direct, in, out);
  }
  return replay(c, r, in, out);
}

/* ---- training graphs ---------------------------------------------------------- */
/* Is an output of r's last replay still referenced outside the recording
** (a saved activation whose backward has not run, a gradient kept as
** .grad)? Its storage has one reference per tensor on it: the recording's
** own static output, and whatever aliases are alive. */
static bool outputs_in_use(const rec *r) {
  for (int o = 0; o < r->nout; o++)
    if (r->sout[o] && atomic_load(&r->sout[o]->storage->refcount) > 1) return true;
  return false;
}

static kn_status run_busy(cg *c, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  if (!c->told_busy) {
    c->told_busy = true;
    KN_LOG_ARTIFACT(KN_ART_CUDAGRAPHS, "a call ran without its CUDA graph: outputs of the "
                    "graph's last replay are still in use (saved for a backward that has not "
                    "run, or gradients kept as .grad); a replay would overwrite them");
  }
  return c->inner.run(c->inner.state, in, nin, out, nout);
}

static kn_status cg_call(cg *c, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  rec *r = find_rec(c, in, nin);
  if (!r) return kn__oom();
  if (!r->skip && !r->graph && r->calls++ == 0) { /* warm-up */
    KN_LOG_ARTIFACT(KN_ART_CUDAGRAPHS, "warming up the compiled graph on a new input geometry "
                    "(%d inputs): the next call of this geometry records a CUDA graph", nin);
    return c->inner.run(c->inner.state, in, nin, out, nout);
  }
  if (!r->skip && !r->graph) {
    kn_status st = record(c, r, in, nin, nout);
    if (st != KN_OK) return st;
  }
  if (r->skip) {
    tell_skip(c, r->skip);
    return c->inner.run(c->inner.state, in, nin, out, nout);
  }
  if (r->nout != nout || r->nin != nin)
    return kn__error(KN_EINVAL, "cudagraphs: expected %d inputs and %d outputs, got %d and %d",
                     r->nin, r->nout, nin, nout);
  if (c->guarded && outputs_in_use(r)) return run_busy(c, in, nin, out, nout);
  return c->guarded ? replay(c, r, in, out) : replay_any(c, r, in, nin, out, nout);
}

static kn_status cg_run(void *state, kn_tensor *const *in, int nin, kn_tensor **out, int nout) {
  cg *c = state;
  char buf[300];
  pthread_mutex_lock(&c->mu);
  const char *why = call_skip(c, in, nin, buf, sizeof buf);
  if (why) tell_skip(c, why);
  kn_status st = why ? c->inner.run(c->inner.state, in, nin, out, nout)
                     : cg_call(c, in, nin, out, nout);
  pthread_mutex_unlock(&c->mu);
  return st;
}

static void cg_free(void *state) {
  cg *c = state;
  if (!c) return;
  while (c->recs) {
    rec *r = c->recs;
    c->recs = r->next;
    rec_free(r);
  }
  if (c->inner.free_state) c->inner.free_state(c->inner.state);
  for (int i = 0; i < c->nnames; i++) free(c->names[i]);
  free(c->names);
  free(c->skip);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static kn_status keep_names(cg *c, const kn__graph *g) {
  c->nnames = kn__graph_num_inputs(g);
  c->names = calloc((size_t)c->nnames + 1, sizeof *c->names);
  if (!c->names) return kn__oom();
  for (int i = 0; i < c->nnames; i++) {
    const char *nm = kn__graph_input(g, i)->name;
    if (nm && !(c->names[i] = strdup(nm))) return kn__oom();
  }
  return KN_OK;
}

static kn_status wrap(const kn_graph_module *gm, kn_compiled_graph *g, bool guarded) {
  cg *c = calloc(1, sizeof *c);
  if (!c) return kn__oom();
  pthread_mutex_init(&c->mu, NULL);
  c->inner = *g;
  const kn__graph *gr = kn__graph_module_graph(gm);
  int nmut = mutated_inputs(gr);
  const char *rnd = random_op(gr);
  char buf[200];
  if (nmut > 0) snprintf(buf, sizeof buf, "mutated inputs (%d instances)", nmut);
  else if (rnd)
    snprintf(buf, sizeof buf, "a random op (aten.%s draws from a generator whose state is on "
             "the host: a replay would repeat its numbers)", rnd);
  kn_status st = keep_names(c, gr);
  if (st == KN_OK && (nmut > 0 || rnd) && !(c->skip = strdup(buf))) st = kn__oom();
  if (st != KN_OK) {
    c->inner = (kn_compiled_graph){0}; /* the caller keeps g */
    cg_free(c);
    return st;
  }
  c->guarded = guarded;
  *g = (kn_compiled_graph){cg_run, c, cg_free};
  return KN_OK;
}

kn_status kn__cudagraphs_wrap(const kn_graph_module *gm, kn_compiled_graph *g) {
  return wrap(gm, g, false);
}

kn_status kn__cudagraphs_wrap_guarded(const kn_graph_module *gm, kn_compiled_graph *g) {
  return wrap(gm, g, true);
}

bool kn__cudagraphs_stats(const kn_compiled_graph *g, int64_t *recorded, int64_t *replayed) {
  if (!g || g->run != cg_run) return false;
  cg *c = g->state;
  pthread_mutex_lock(&c->mu);
  *recorded = c->nrecorded;
  *replayed = c->nreplayed;
  pthread_mutex_unlock(&c->mu);
  return true;
}
