/*
** cuda/stream.c: copies, memset, synchronisation, CUDA graph capture and
** the event timer, all on kiln's one stream.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_int.h"

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static bool capture_on; /* under cap_mu */

struct kn__cuda_graph {
  void *graph; /* CUgraph */
  void *exec;  /* CUgraphExec */
  kn__cuda_pool *pool; /* owned: the blocks the captured work freed (alloc.c) */
};

#define DPTR(p) ((kn__cudptr)(uintptr_t)(p))

bool kn__cuda_capturing(void) {
  pthread_mutex_lock(&cap_mu);
  bool on = capture_on;
  pthread_mutex_unlock(&cap_mu);
  return on;
}

static kn_status no_host_work_in_capture(const char *what) {
  if (!kn__cuda_capturing()) return KN_OK;
  return kn__error(KN_ESTATE,
                   "%s during CUDA graph capture: only work queued on the device can be "
                   "recorded (copy to or from the host before or after the capture)",
                   what);
}

kn_status kn__cuda_synchronize(void) {
  kn_status s = kn__cuda_enter();
  if (s == KN_OK) s = no_host_work_in_capture("synchronising the stream");
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  s = kn__cu_check(r->cu.StreamSynchronize(r->stream), "cuStreamSynchronize");
  return s == KN_OK ? kn__cuda_check_read() : s;
}

static kn_status check_devices(kn_device dd, kn_device sd) {
  if ((dd == KN_CPU || dd == KN_CUDA) && (sd == KN_CPU || sd == KN_CUDA)) return KN_OK;
  return kn__error(KN_EINVAL, "kn__cuda_memcpy: expected cpu or cuda memory on both sides, got "
                              "device %d and %d", (int)dd, (int)sd);
}

kn_status kn__cuda_memcpy(void *dst, kn_device dd, const void *src, kn_device sd, size_t n) {
  kn_status s = check_devices(dd, sd);
  if (s == KN_OK) s = kn__cuda_enter();
  if (s != KN_OK || n == 0) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  if (dd == KN_CUDA && sd == KN_CUDA) {
    int pr = kn__cuda_prof_begin();
    s = kn__cu_check(r->cu.MemcpyDtoDAsync(DPTR(dst), DPTR(src), n, r->stream),
                     "cuMemcpyDtoDAsync_v2");
    kn__cuda_prof_end(pr, NULL, "device-to-device copy");
    return s;
  }
  if (dd == KN_CPU && sd == KN_CPU) {
    memcpy(dst, src, n);
    return KN_OK;
  }
  s = no_host_work_in_capture(dd == KN_CPU ? "a copy to the host" : "a copy from the host");
  if (s != KN_OK) return s;
  if (dd == KN_CUDA)
    s = kn__cu_check(r->cu.MemcpyHtoDAsync(DPTR(dst), src, n, r->stream), "cuMemcpyHtoDAsync_v2");
  else
    s = kn__cu_check(r->cu.MemcpyDtoHAsync(dst, DPTR(src), n, r->stream), "cuMemcpyDtoHAsync_v2");
  if (s != KN_OK) return s;
  s = kn__cu_check(r->cu.StreamSynchronize(r->stream), "cuStreamSynchronize");
  return s == KN_OK && dd == KN_CPU ? kn__cuda_check_read() : s;
}

kn_status kn__cuda_memset0(void *dptr, size_t n) {
  kn_status s = kn__cuda_enter();
  if (s != KN_OK || n == 0) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  return kn__cu_check(r->cu.MemsetD8Async(DPTR(dptr), 0, n, r->stream), "cuMemsetD8Async");
}

/* ---- graphs ---- */

kn_status kn__cuda_capture_begin(void) {
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  pthread_mutex_lock(&cap_mu);
  if (capture_on) s = kn__error(KN_ESTATE, "kn__cuda_capture_begin: a capture is in progress");
  else s = kn__cu_check(r->cu.StreamBeginCapture(r->stream, KN__CU_CAPTURE_MODE_RELAXED),
                        "cuStreamBeginCapture_v2");
  if (s == KN_OK) {
    capture_on = true;
    kn__cuda_set_capturing(true);
  }
  pthread_mutex_unlock(&cap_mu);
  return s;
}

static kn_status instantiate(void *graph, void **exec) {
  kn__cuda_rt *r = kn__cuda_rt_get();
  if (r->cu.GraphInstantiateWithFlags)
    return kn__cu_check(r->cu.GraphInstantiateWithFlags(exec, graph, 0),
                        "cuGraphInstantiateWithFlags");
  if (r->cu.GraphInstantiate2) {
    char log[512] = "";
    int e = r->cu.GraphInstantiate2(exec, graph, NULL, log, sizeof log);
    kn_status s = kn__cu_check(e, "cuGraphInstantiate_v2");
    if (s != KN_OK && log[0]) kn__error_context("%s", log);
    return s;
  }
  return kn__error(KN_EUNSUPPORTED, "the CUDA driver has neither cuGraphInstantiateWithFlags nor "
                                    "cuGraphInstantiate_v2");
}

kn_status kn__cuda_capture_end(kn__cuda_graph **out) {
  *out = NULL;
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  pthread_mutex_lock(&cap_mu);
  if (!capture_on) {
    pthread_mutex_unlock(&cap_mu);
    return kn__error(KN_ESTATE, "kn__cuda_capture_end: no capture is in progress");
  }
  void *graph = NULL, *exec = NULL;
  s = kn__cu_check(r->cu.StreamEndCapture(r->stream, &graph), "cuStreamEndCapture");
  capture_on = false;
  kn__cuda_set_capturing(false);
  pthread_mutex_unlock(&cap_mu);
  kn__cuda_pool *pool = kn__cuda_pool_detach();
  if (s == KN_OK) s = instantiate(graph, &exec);
  kn__cuda_graph *g = s == KN_OK ? malloc(sizeof *g) : NULL;
  if (s == KN_OK && !g) s = kn__oom();
  if (s != KN_OK) {
    if (exec) r->cu.GraphExecDestroy(exec);
    if (graph) r->cu.GraphDestroy(graph);
    kn__cuda_pool_release(pool); /* nothing of the capture will run */
    return s;
  }
  g->graph = graph;
  g->exec = exec;
  g->pool = pool;
  *out = g;
  return KN_OK;
}

kn_status kn__cuda_graph_launch(kn__cuda_graph *g) {
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  int pr = kn__cuda_prof_begin();
  s = kn__cu_check(r->cu.GraphLaunch(g->exec, r->stream), "cuGraphLaunch");
  kn__cuda_prof_end(pr, NULL, "CUDA graph (a replay)");
  return s;
}

void kn__cuda_graph_free(kn__cuda_graph *g) {
  if (!g) return;
  if (kn__cuda_enter() == KN_OK) {
    kn__cuda_rt *r = kn__cuda_rt_get();
    r->cu.GraphExecDestroy(g->exec);
    r->cu.GraphDestroy(g->graph);
  }
  kn__cuda_pool_release(g->pool); /* replays already queued run first (one stream) */
  free(g);
}

/* ---- timer ---- */

static pthread_mutex_t timer_mu = PTHREAD_MUTEX_INITIALIZER;
static void *ev_start, *ev_stop; /* created at first use, under timer_mu */

static kn_status timer_events(void) {
  kn__cuda_rt *r = kn__cuda_rt_get();
  kn_status s = KN_OK;
  if (!ev_start) s = kn__cu_check(r->cu.EventCreate(&ev_start, 0), "cuEventCreate");
  if (s == KN_OK && !ev_stop) s = kn__cu_check(r->cu.EventCreate(&ev_stop, 0), "cuEventCreate");
  return s;
}

kn_status kn__cuda_timer_start(void) {
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  pthread_mutex_lock(&timer_mu);
  s = timer_events();
  if (s == KN_OK) s = kn__cu_check(r->cu.EventRecord(ev_start, r->stream), "cuEventRecord");
  pthread_mutex_unlock(&timer_mu);
  return s;
}

kn_status kn__cuda_timer_stop(double *ms) {
  *ms = 0;
  kn_status s = kn__cuda_enter();
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  float f = 0;
  pthread_mutex_lock(&timer_mu);
  s = ev_start ? KN_OK : kn__error(KN_ESTATE, "kn__cuda_timer_stop before kn__cuda_timer_start");
  if (s == KN_OK) s = kn__cu_check(r->cu.EventRecord(ev_stop, r->stream), "cuEventRecord");
  if (s == KN_OK) s = kn__cu_check(r->cu.EventSynchronize(ev_stop), "cuEventSynchronize");
  if (s == KN_OK && r->cu.EventElapsedTime2)
    s = kn__cu_check(r->cu.EventElapsedTime2(&f, ev_start, ev_stop), "cuEventElapsedTime_v2");
  else if (s == KN_OK && r->cu.EventElapsedTime)
    s = kn__cu_check(r->cu.EventElapsedTime(&f, ev_start, ev_stop), "cuEventElapsedTime");
  else if (s == KN_OK)
    s = kn__error(KN_EUNSUPPORTED, "the CUDA driver has no cuEventElapsedTime");
  pthread_mutex_unlock(&timer_mu);
  *ms = f;
  return s;
}
