/*
** distributed/ddp.c: DistributedDataParallel (kiln/distributed.h).
**
** At wrap time the parameters are grouped into buckets, in reverse
** registration order (gradients become ready roughly from the last layer
** back), each up to bucket_cap_mb and of one dtype. A post-accumulate-grad
** hook on every parameter marks it ready; when every parameter of a bucket
** is ready, the bucket's gradients, multiplied by 1 / world size, are
** copied into its flat buffer and an asynchronous all-reduce (sum) of the
** buffer starts while the rest of the backward runs. Buckets start strictly
** in index order, so every rank issues the same collectives in the same
** order. The first hook of a backward queues a final callback
** (kn_autograd_queue_callback, PyTorch's queue_callback) that, once the
** backward's last node ran, launches what is left (unused parameters),
** waits, and writes the averaged gradients back into each .grad: no call is
** needed after kn_backward.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "distributed/dist_int.h"
#include "dynamo/ddp_optimizer.h"
#include "ops/iter.h"
#include "kiln/autograd.h"
#include "kiln/nn.h"
#include "kiln/ops_pointwise.h"

#define KN__DDP_DEFAULT_CAP_MB 25.0
/* PyTorch's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES): the last
** layers' gradients, ready first, start their all-reduce early. */
#define KN__DDP_FIRST_BUCKET_BYTES (1024.0 * 1024.0)

typedef struct bucket {
  int n;               /* parameters in the bucket */
  int *idx;            /* their indices in ddp->params (owned) */
  kn_tensor **ps;      /* the parameters (borrowed tensors, array owned) */
  int64_t *off;        /* element offset of each in flat (owned) */
  int64_t numel;
  kn_dtype dtype;
  int ready;           /* parameters marked ready in this backward */
  kn_tensor *flat;     /* owned contiguous buffer of numel elements */
  kn_dist_work *work;  /* the all-reduce in flight, or NULL */
} bucket;

struct kn_ddp {
  kn_module *m;        /* borrowed */
  kn_ddp_options opt;
  int np;
  kn_tensor **params;  /* borrowed tensors (array owned) */
  char **names;        /* dotted names (owned) */
  int *bucket_of;      /* per parameter (owned) */
  int *hook_id;        /* per parameter; 0 when not registered (owned) */
  bool *got;           /* per parameter: ready in this backward (owned) */
  int nb;
  bucket *b;           /* owned */
  int next_launch;     /* buckets [0, next_launch) were launched */
  int launched_in_bw, last_launched_in_bw;
  bool sync;
  bool final_queued;   /* this backward's end finishes the averaging */
  bool auto_done;      /* a backward's end finished it since kn_ddp_finish_backward */
};

kn_ddp_options kn_ddp_default_options(void) {
  return (kn_ddp_options){.bucket_cap_mb = KN__DDP_DEFAULT_CAP_MB,
                          .find_unused_parameters = false, .broadcast_buffers = true,
                          .optimize_ddp = true};
}

kn_module *kn_ddp_module(kn_ddp *ddp) { return ddp ? ddp->m : NULL; }
int kn_ddp_num_buckets(const kn_ddp *ddp) { return ddp ? ddp->nb : 0; }
int kn_ddp_buckets_launched_in_backward(const kn_ddp *ddp) {
  return ddp ? ddp->last_launched_in_bw : 0;
}

kn_tensor *const *kn_ddp_bucket_params(const kn_ddp *ddp, int b, int *n) {
  if (n) *n = 0;
  if (!ddp || b < 0 || b >= ddp->nb) {
    kn__error(KN_ERANGE, "kn_ddp_bucket_params: expected a bucket in [0, %d), found %d",
              ddp ? ddp->nb : 0, b);
    return NULL;
  }
  if (n) *n = ddp->b[b].n;
  return ddp->b[b].ps;
}

/* ---- wrapping ------------------------------------------------------------------- */

typedef struct name_list {
  kn_ddp *ddp;
  int i;
} name_list;

static kn_status take_name(void *ud, const char *name, kn_tensor *t) {
  name_list *nl = ud;
  (void)t;
  if (nl->i >= nl->ddp->np) return KN_OK;
  if (!(nl->ddp->names[nl->i++] = strdup(name))) return kn__oom();
  return KN_OK;
}

static kn_status broadcast_one(void *ud, const char *name, kn_tensor *t) {
  (void)ud;
  kn_status st = kn_dist_broadcast(t, 0);
  if (st != KN_OK) kn__error_context("DDP: broadcasting '%s' from rank 0", name);
  return st;
}

/* Rank 0's parameters and buffers to every rank (no autograd: in place on
** leaves). */
static kn_status broadcast_state(kn_module *m, bool params) {
  bool prev = kn_no_grad_begin();
  kn_status st = kn_nn_named_tensors(m, params, broadcast_one, NULL);
  kn_no_grad_end(prev);
  return st;
}

static kn_status add_to_bucket(bucket *bk, kn_ddp *ddp, int i) {
  int *idx = realloc(bk->idx, (size_t)(bk->n + 1) * sizeof *idx);
  if (idx) bk->idx = idx;
  int64_t *off = idx ? realloc(bk->off, (size_t)(bk->n + 1) * sizeof *off) : NULL;
  if (off) bk->off = off;
  kn_tensor **ps = off ? realloc(bk->ps, (size_t)(bk->n + 1) * sizeof *ps) : NULL;
  if (!ps) return kn__oom();
  bk->ps = ps;
  kn_tensor *p = ddp->params[i];
  bk->idx[bk->n] = i;
  bk->off[bk->n] = bk->numel;
  bk->ps[bk->n] = p;
  bk->numel += kn_numel(p);
  bk->dtype = kn_tensor_dtype(p);
  bk->n++;
  ddp->bucket_of[i] = (int)(bk - ddp->b);
  return KN_OK;
}

/* Put the buckets in the order order[0..nb) (the order they closed). */
static kn_status renumber(kn_ddp *ddp, const int *order) {
  bucket *nb = malloc((size_t)(ddp->nb ? ddp->nb : 1) * sizeof *nb);
  if (!nb) return kn__oom();
  for (int k = 0; k < ddp->nb; k++) {
    nb[k] = ddp->b[order[k]];
    for (int j = 0; j < nb[k].n; j++) ddp->bucket_of[nb[k].idx[j]] = k;
  }
  memcpy(ddp->b, nb, (size_t)ddp->nb * sizeof *nb);
  free(nb);
  return KN_OK;
}

/* The open bucket of dtype dt (one per dtype, as PyTorch keys buckets by
** dtype and device), or a new one; *closed: how many of that dtype were
** closed already (the first one's limit is the first bucket's). */
static bucket *open_bucket(kn_ddp *ddp, bool *open, kn_dtype dt) {
  for (int k = 0; k < ddp->nb; k++)
    if (open[k] && ddp->b[k].dtype == dt) return &ddp->b[k];
  open[ddp->nb] = true;
  ddp->b[ddp->nb].dtype = dt;
  return &ddp->b[ddp->nb++];
}

/* PyTorch's compute_bucket_assignment_by_size over the parameters in the
** order their gradients become ready (reverse registration order, as
** PyTorch's rebuilt buckets): a parameter joins the open bucket of its
** dtype, and the bucket closes once it holds at least its limit (the first
** bucket of a dtype: min(1 MiB, cap); later ones: cap). Buckets are
** numbered in the order they close, the ones left open last. */
static kn_status make_buckets(kn_ddp *ddp) {
  double cap_mb = ddp->opt.bucket_cap_mb > 0 ? ddp->opt.bucket_cap_mb : KN__DDP_DEFAULT_CAP_MB;
  double cap = cap_mb * 1024.0 * 1024.0;
  double first = cap < KN__DDP_FIRST_BUCKET_BYTES ? cap : KN__DDP_FIRST_BUCKET_BYTES;
  size_t n = (size_t)(ddp->np ? ddp->np : 1);
  ddp->b = calloc(n, sizeof *ddp->b);
  bool *open = calloc(n, sizeof *open);
  int *closed_of = calloc(n, sizeof *closed_of); /* per bucket: closed ones of its dtype before */
  int *order = calloc(n, sizeof *order);
  kn_status st = ddp->b && open && closed_of && order ? KN_OK : kn__oom();
  int nclosed = 0;
  for (int i = ddp->np - 1; st == KN_OK && i >= 0; i--) {
    kn_dtype dt = kn_tensor_dtype(ddp->params[i]);
    bucket *cur = open_bucket(ddp, open, dt);
    int k = (int)(cur - ddp->b);
    if (cur->n == 0) {
      for (int j = 0; j < nclosed; j++) closed_of[k] += ddp->b[order[j]].dtype == dt;
    }
    st = add_to_bucket(cur, ddp, i);
    double bytes = (double)cur->numel * (double)kn_dtype_size(dt);
    if (st == KN_OK && bytes >= (closed_of[k] ? cap : first)) {
      open[k] = false;
      order[nclosed++] = k;
    }
  }
  for (int k = 0; st == KN_OK && k < ddp->nb; k++)
    if (open[k]) order[nclosed++] = k;
  if (st == KN_OK) st = renumber(ddp, order);
  free(open);
  free(closed_of);
  free(order);
  for (int k = 0; st == KN_OK && k < ddp->nb; k++) {
    bucket *bk = &ddp->b[k];
    if (!(bk->flat = kn__empty(1, &bk->numel, bk->dtype, KN_CPU))) st = kn_last_status();
  }
  return st;
}

static kn_status on_grad_ready(void *ud, kn_tensor *leaf);

static kn_status check_params(kn_ddp *ddp) {
  for (int i = 0; i < ddp->np; i++) {
    kn_tensor *p = ddp->params[i];
    kn_dtype dt = kn_tensor_dtype(p); /* the gradients' dtypes all-reduce sums */
    if (dt != KN_FLOAT32 && dt != KN_FLOAT64)
      return kn__error(KN_EDTYPE, "kn_ddp_wrap: expected float32 or float64 parameters, "
                       "found '%s' of %s", ddp->names[i], kn_dtype_name(kn_tensor_dtype(p)));
    if (!kn_is_leaf(p) || !kn_requires_grad(p))
      return kn__error(KN_EINVAL, "kn_ddp_wrap: expected parameters that are leaves requiring "
                       "grad, found '%s'", ddp->names[i]);
  }
  return KN_OK;
}

static kn_status setup(kn_ddp *ddp) {
  int np = kn_nn_parameters(ddp->m, &ddp->params);
  if (np < 0) return (kn_status)np;
  ddp->np = np;
  size_t n = (size_t)(np ? np : 1);
  ddp->names = calloc(n, sizeof *ddp->names);
  ddp->bucket_of = calloc(n, sizeof *ddp->bucket_of);
  ddp->hook_id = calloc(n, sizeof *ddp->hook_id);
  ddp->got = calloc(n, sizeof *ddp->got);
  if (!ddp->names || !ddp->bucket_of || !ddp->hook_id || !ddp->got) return kn__oom();
  kn_status st = kn_nn_named_tensors(ddp->m, true, take_name, &(name_list){ddp, 0});
  if (st == KN_OK) st = check_params(ddp);
  if (st == KN_OK) st = broadcast_state(ddp->m, true);
  if (st == KN_OK) st = broadcast_state(ddp->m, false);
  if (st == KN_OK) st = make_buckets(ddp);
  for (int i = 0; st == KN_OK && i < np; i++)
    st = kn_register_post_accumulate_grad_hook(ddp->params[i], on_grad_ready, ddp,
                                               &ddp->hook_id[i]);
  /* compiled graphs reading these parameters split at the same caps */
  double cap = (ddp->opt.bucket_cap_mb > 0 ? ddp->opt.bucket_cap_mb : KN__DDP_DEFAULT_CAP_MB) *
               1024.0 * 1024.0;
  double first = cap < KN__DDP_FIRST_BUCKET_BYTES ? cap : KN__DDP_FIRST_BUCKET_BYTES;
  if (st == KN_OK)
    st = kn__ddp_optimizer_register(ddp, ddp->params, np, (int64_t)cap, (int64_t)first,
                                    ddp->opt.optimize_ddp);
  return st;
}

kn_ddp *kn_ddp_wrap(kn_module *module, const kn_ddp_options *options) {
  if (!module) {
    kn__error(KN_EINVAL, "kn_ddp_wrap: expected a module, found NULL");
    return NULL;
  }
  if (kn__dist_check_ready("kn_ddp_wrap") != KN_OK) return NULL;
  kn_ddp *ddp = calloc(1, sizeof *ddp);
  if (!ddp) {
    kn__oom();
    return NULL;
  }
  ddp->m = module;
  ddp->opt = options ? *options : kn_ddp_default_options();
  ddp->sync = true;
  if (setup(ddp) != KN_OK) {
    kn_ddp_free(ddp);
    return NULL;
  }
  return ddp;
}

void kn_ddp_free(kn_ddp *ddp) {
  if (!ddp) return;
  kn__ddp_optimizer_unregister(ddp);
  for (int i = 0; i < ddp->np; i++) {
    if (ddp->hook_id && ddp->hook_id[i])
      kn_remove_post_accumulate_grad_hook(ddp->params[i], ddp->hook_id[i]);
    if (ddp->names) free(ddp->names[i]);
  }
  for (int k = 0; k < ddp->nb; k++) {
    kn__dist_work_free(ddp->b[k].work);
    kn_release(ddp->b[k].flat);
    free(ddp->b[k].idx);
    free(ddp->b[k].off);
    free(ddp->b[k].ps);
  }
  free(ddp->b);
  free(ddp->params);
  free(ddp->names);
  free(ddp->bucket_of);
  free(ddp->hook_id);
  free(ddp->got);
  free(ddp);
}

/* ---- backward -------------------------------------------------------------------- */

/* The view of bucket bk's flat buffer that holds its j-th parameter. Owned. */
static kn_tensor *slot_view(bucket *bk, int j) {
  kn_tensor *p = bk->ps[j], *f = bk->flat;
  int64_t strides[KN_MAX_DIMS], s = 1;
  for (int d = p->ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= p->sizes[d];
  }
  return kn__tensor_wrap(f->storage, f->dtype, p->ndim, p->sizes, strides, f->offset + bk->off[j]);
}

/* dst[i] = src[i] * (1 / world) over n elements of a floating dtype (the
** averaging, folded into the copy as PyTorch's reducer multiplies by the
** reciprocal while it copies a gradient into its bucket; exact for a power
** of two ranks); a plain copy for one rank. dst may be src. On the MLP's
** 4.2 MB bucket a scalar division per element took 0.65 ms, this
** vectorised multiply 0.15 ms (memcpy: 0.12 ms). */
static void copy_scaled(void *dst, const void *src, int64_t n, kn_dtype dt, int world) {
  if (world == 1) {
    memmove(dst, src, (size_t)n * kn_dtype_size(dt));
  } else if (dt == KN_FLOAT32) {
    float *d = dst, r = 1.0f / (float)world;
    const float *s = src;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = s[i] * r;
  } else {
    double *d = dst, r = 1.0 / world;
    const double *s = src;
    _Pragma("omp simd") for (int64_t i = 0; i < n; i++) d[i] = s[i] * r;
  }
}

/* Bucket bk's j-th slot <- the parameter's gradient times 1 / world size
** (zeros without a gradient). */
static kn_status fill_slot(bucket *bk, int j, int world) {
  kn_tensor *g = kn_grad(bk->ps[j]);
  size_t esz = kn_dtype_size(bk->dtype);
  int64_t n = kn_numel(bk->ps[j]);
  char *dst = (char *)kn_data(bk->flat) + bk->off[j] * (int64_t)esz;
  if (!g) {
    memset(dst, 0, (size_t)n * esz);
    return KN_OK;
  }
  if (kn_is_contiguous(g) && kn_tensor_dtype(g) == bk->dtype) {
    copy_scaled(dst, kn_data(g), n, bk->dtype, world);
    return KN_OK;
  }
  kn_tensor *v = slot_view(bk, j);
  bool prev = kn_no_grad_begin();
  kn_status st = v ? kn_copy_(v, g) : kn_last_status();
  kn_no_grad_end(prev);
  kn_release(v);
  if (st == KN_OK) copy_scaled(dst, dst, n, bk->dtype, world);
  return st;
}

/* Copy the bucket's gradients, times 1 / world size, into its flat buffer
** and start the all-reduce (a sum: the average, without a pass of its own
** over the result). */
static kn_status launch(kn_ddp *ddp, int k) {
  bucket *bk = &ddp->b[k];
  int world = kn_dist_world_size();
  kn_status st = KN_OK;
  for (int j = 0; st == KN_OK && j < bk->n; j++) st = fill_slot(bk, j, world);
  if (st == KN_OK) st = kn_dist_all_reduce_async(bk->flat, KN_REDUCE_SUM, &bk->work);
  if (st != KN_OK) kn__error_context("DDP: bucket %d of %d", k, ddp->nb);
  return st;
}

/* Launch the ready buckets that follow the launched ones (index order). */
static kn_status launch_ready(kn_ddp *ddp, bool in_backward) {
  while (ddp->next_launch < ddp->nb && ddp->b[ddp->next_launch].ready == ddp->b[ddp->next_launch].n) {
    kn_status st = launch(ddp, ddp->next_launch++);
    if (st != KN_OK) return st;
    if (in_backward) ddp->launched_in_bw++;
  }
  return KN_OK;
}

/* Let MPI progress the buckets in flight (Open MPI moves non-blocking
** collectives forward only inside MPI calls). */
static kn_status progress(kn_ddp *ddp) {
  for (int k = 0; k < ddp->next_launch; k++) {
    bool done;
    kn_status st = ddp->b[k].work ? kn_dist_test(ddp->b[k].work, &done) : KN_OK;
    if (st != KN_OK) return st;
  }
  return KN_OK;
}

static kn_status finish(kn_ddp *ddp);
static void reset(kn_ddp *ddp);

/* The end of a synchronised backward (the engine's final callback, as
** PyTorch's reducer queues finalize_backward): launch what is left, wait,
** write the averaged gradients. After a failed backward: drop this
** backward's state (waiting for the all-reduces already started). */
static kn_status on_backward_end(void *ud, kn_status backward_status) {
  kn_ddp *ddp = ud;
  ddp->final_queued = false;
  if (backward_status != KN_OK) {
    reset(ddp);
    return backward_status;
  }
  ddp->auto_done = true;
  return finish(ddp);
}

static kn_status on_grad_ready(void *ud, kn_tensor *leaf) {
  kn_ddp *ddp = ud;
  if (!ddp->sync) return KN_OK;
  int i = 0;
  while (i < ddp->np && ddp->params[i] != leaf) i++;
  if (i == ddp->np) return KN_OK;
  if (!ddp->final_queued) {
    kn_status st = kn_autograd_queue_callback(on_backward_end, ddp);
    if (st != KN_OK) return st;
    ddp->final_queued = true;
    ddp->auto_done = false;
  }
  if (ddp->got[i])
    return kn__error(KN_ESTATE, "DDP: parameter '%s' got its gradient twice in one backward",
                     ddp->names[i]);
  ddp->got[i] = true;
  ddp->b[ddp->bucket_of[i]].ready++;
  kn_status st = launch_ready(ddp, true);
  return st == KN_OK ? progress(ddp) : st;
}

/* The parameters without a gradient in this backward, or an error naming
** them when find_unused_parameters is off. */
static kn_status mark_unused(kn_ddp *ddp) {
  kn__sb sb;
  kn__sb_init(&sb);
  int missing = 0;
  for (int i = 0; i < ddp->np; i++) {
    if (ddp->got[i]) continue;
    if (missing++ < 8) kn__sb_printf(&sb, "%s'%s'", missing > 1 ? ", " : "", ddp->names[i]);
    ddp->got[i] = true;
    ddp->b[ddp->bucket_of[i]].ready++;
  }
  kn_status st = KN_OK;
  if (missing && !ddp->opt.find_unused_parameters)
    st = kn__error(KN_ESTATE, "DDP: expected every parameter to get a gradient in the backward "
                   "(or find_unused_parameters), found %d without: %s%s", missing,
                   kn__sb_cstr(&sb), missing > 8 ? ", ..." : "");
  kn__sb_fini(&sb);
  return st;
}

/* With find_unused_parameters: which parameters got a gradient on some
** rank (all-reduce MAX of the local flags). Owned int64 tensor, or NULL. */
static kn_tensor *globally_used(kn_ddp *ddp, const bool *local) {
  int64_t n = ddp->np;
  kn_tensor *u = kn__empty(1, &n, KN_INT64, KN_CPU);
  if (!u) return NULL;
  for (int i = 0; i < ddp->np; i++) ((int64_t *)kn_data(u))[i] = local[i];
  if (kn_dist_all_reduce(u, KN_REDUCE_MAX) != KN_OK) {
    kn_release(u);
    return NULL;
  }
  return u;
}

/* The averaged gradients of bucket k into the parameters' .grad (a
** parameter no rank used keeps its .grad as it was); with
** gradient_as_bucket_view, .grad becomes the bucket's slot itself. */
static kn_status write_back(kn_ddp *ddp, int k, const int64_t *used) {
  bucket *bk = &ddp->b[k];
  kn_status st = KN_OK;
  for (int j = 0; st == KN_OK && j < bk->n; j++) {
    kn_tensor *p = bk->ps[j], *g = kn_grad(p);
    if (used && !used[bk->idx[j]]) continue;
    kn_tensor *v = slot_view(bk, j);
    if (!v) return kn_last_status();
    if (ddp->opt.gradient_as_bucket_view) {
      kn_set_grad(p, v);
    } else if (g && kn_is_contiguous(g) && kn_tensor_dtype(g) == bk->dtype) {
      memcpy(kn_data(g), kn_data(v), (size_t)kn_numel(v) * kn_dtype_size(bk->dtype));
    } else if (g) {
      bool prev = kn_no_grad_begin();
      st = kn_copy_(g, v);
      kn_no_grad_end(prev);
    } else {
      kn_tensor *c = kn__contiguous_copy(v, bk->dtype);
      if (c) kn_set_grad(p, c);
      st = c ? KN_OK : kn_last_status();
      kn_release(c);
    }
    kn_release(v);
  }
  return st;
}

static void reset(kn_ddp *ddp) {
  for (int k = 0; k < ddp->nb; k++) {
    kn__dist_work_free(ddp->b[k].work);
    ddp->b[k].work = NULL;
    ddp->b[k].ready = 0;
  }
  memset(ddp->got, 0, (size_t)(ddp->np ? ddp->np : 1) * sizeof *ddp->got);
  ddp->next_launch = 0;
  ddp->last_launched_in_bw = ddp->launched_in_bw;
  ddp->launched_in_bw = 0;
}

static kn_status finish(kn_ddp *ddp) {
  bool *local = NULL;
  if (ddp->opt.find_unused_parameters) {
    local = malloc((size_t)(ddp->np ? ddp->np : 1) * sizeof *local);
    if (!local) return kn__oom();
    memcpy(local, ddp->got, (size_t)ddp->np * sizeof *local);
  }
  kn_status st = mark_unused(ddp);
  if (st == KN_OK) st = launch_ready(ddp, false);
  for (int k = 0; st == KN_OK && k < ddp->nb; k++) st = kn_dist_wait(ddp->b[k].work);
  kn_tensor *used = NULL;
  if (st == KN_OK && local && !(used = globally_used(ddp, local))) st = kn_last_status();
  for (int k = 0; st == KN_OK && k < ddp->nb; k++)
    st = write_back(ddp, k, used ? kn_data(used) : NULL);
  if (st != KN_OK) kn__error_context("DDP: averaging the gradients at the end of backward");
  kn_release(used);
  free(local);
  reset(ddp);
  return st;
}

kn_status kn_ddp_finish_backward(kn_ddp *ddp) {
  if (!ddp) return kn__error(KN_EINVAL, "kn_ddp_finish_backward: expected a DDP wrapper, found NULL");
  if (!ddp->sync) return KN_OK;
  if (ddp->auto_done) { /* the backward's end did it */
    ddp->auto_done = false;
    return KN_OK;
  }
  kn_status st = finish(ddp);
  if (st != KN_OK) kn__error_context("kn_ddp_finish_backward");
  return st;
}

bool kn_ddp_set_sync(kn_ddp *ddp, bool sync) {
  if (!ddp) return false;
  bool prev = ddp->sync;
  ddp->sync = sync;
  return prev;
}

kn_tensor *kn_ddp_forward(kn_ddp *ddp, kn_tensor *input) {
  if (!ddp) {
    kn__error(KN_EINVAL, "kn_ddp_forward: expected a DDP wrapper, found NULL");
    return NULL;
  }
  if (ddp->opt.broadcast_buffers && kn_dist_world_size() > 1 &&
      broadcast_state(ddp->m, false) != KN_OK)
    return NULL;
  return kn_nn_forward(ddp->m, input);
}
