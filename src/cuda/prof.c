/*
** cuda/prof.c: KILN_CUDA_PROFILE=1, the GPU time of every kernel launch and
** cuBLAS product on kiln's stream, summed per kernel. Each launch is
** bracketed by two events on the stream (nothing waits for them); a report
** synchronises, reads every pair's elapsed time and prints the kernels by
** total time: when a program asks (kn__cuda_prof_report), and for what is
** left when the process exits (stderr). A generated kernel is named by what it computes (the notes
** the CUDA target writes beside its kernels), a product by its shape.
** Launches queued while a CUDA graph is captured are not timed (their
** replays are one graph launch, timed as "CUDA graph").
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cuda_int.h"

typedef struct prec {
  void *ev[2];
  int label;
} prec;

typedef struct plabel {
  const void *fn; /* the function a label names (NULL: a literal label) */
  char *text;
  double ms;
  long calls;
} plabel;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool on;
static prec *recs;       /* under mu */
static int nrecs, caprecs;
static unsigned gen;     /* reports so far: a handle from before a report is stale */
static plabel *labels;   /* under mu */
static int nlabels, caplabels;

#define KN__PROF_MAX_RECS 1000000 /* < 2^20: a handle is the index and a generation */

static void at_exit(void) {
  pthread_mutex_lock(&mu);
  int n = nrecs;
  pthread_mutex_unlock(&mu);
  if (n > 0) (void)kn__cuda_prof_report(stderr, 40);
}

static void read_env(void) {
  const char *e = getenv("KILN_CUDA_PROFILE");
  on = e && *e && strcmp(e, "0") != 0;
  if (on) atexit(at_exit); /* what no report printed yet, when the process exits */
}

bool kn__cuda_prof_on(void) {
  pthread_once(&once, read_env);
  return on;
}

/* The label of fn or of text (mu held); -1 when out of memory. */
static int label_of(const void *fn, const char *text) {
  for (int i = 0; i < nlabels; i++)
    if (fn ? labels[i].fn == fn : !labels[i].fn && !strcmp(labels[i].text, text)) return i;
  if (nlabels == caplabels) {
    int cap = caplabels ? 2 * caplabels : 64;
    plabel *l = realloc(labels, (size_t)cap * sizeof *l);
    if (!l) return -1;
    labels = l;
    caplabels = cap;
  }
  char buf[48];
  if (!text) snprintf(buf, sizeof buf, "kernel %p", fn);
  char *t = strdup(text ? text : buf);
  if (!t) return -1;
  labels[nlabels] = (plabel){fn, t, 0, 0};
  return nlabels++;
}

void kn__cuda_prof_name(const void *fn, const char *text) {
  if (!kn__cuda_prof_on() || !fn || !text) return;
  pthread_mutex_lock(&mu);
  int i = label_of(fn, NULL);
  if (i >= 0) {
    char *t = strdup(text);
    if (t) {
      free(labels[i].text);
      labels[i].text = t;
    }
  }
  pthread_mutex_unlock(&mu);
}

static void destroy(kn__cuda_rt *r, prec *p) {
  for (int i = 0; i < 2 && r->cu.EventDestroy; i++)
    if (p->ev[i]) r->cu.EventDestroy(p->ev[i]);
}

int kn__cuda_prof_begin(void) {
  if (!kn__cuda_prof_on() || kn__cuda_capturing()) return -1;
  kn__cuda_rt *r = kn__cuda_rt_get();
  pthread_mutex_lock(&mu);
  int k = -1;
  if (nrecs == caprecs && caprecs < KN__PROF_MAX_RECS) {
    int cap = caprecs ? 2 * caprecs : 1024;
    prec *p = realloc(recs, (size_t)cap * sizeof *p);
    if (p) recs = p, caprecs = cap;
  }
  if (nrecs < caprecs) {
    prec *p = &recs[nrecs];
    p->ev[0] = p->ev[1] = NULL;
    p->label = -1;
    if (r->cu.EventCreate(&p->ev[0], 0) == 0 && r->cu.EventCreate(&p->ev[1], 0) == 0 &&
        r->cu.EventRecord(p->ev[0], r->stream) == 0)
      k = (int)((gen & 0x3ffu) << 20) | nrecs++; /* the report generation in the high bits */
    else
      destroy(r, p);
  }
  pthread_mutex_unlock(&mu);
  return k;
}

void kn__cuda_prof_end(int k, const void *fn, const char *text) {
  if (k < 0) return;
  kn__cuda_rt *r = kn__cuda_rt_get();
  pthread_mutex_lock(&mu);
  int i = k & 0xfffff;
  if ((unsigned)(k >> 20) == (gen & 0x3ffu) && i < nrecs) { /* else a report came between */
    recs[i].label = label_of(fn, text);
    r->cu.EventRecord(recs[i].ev[1], r->stream);
  }
  pthread_mutex_unlock(&mu);
}

static int by_time(const void *a, const void *b) {
  double x = ((const plabel *)a)->ms, y = ((const plabel *)b)->ms;
  return (x < y) - (x > y);
}

kn_status kn__cuda_prof_report(FILE *out, int top) {
  if (!kn__cuda_prof_on()) return KN_OK;
  kn_status s = kn__cuda_synchronize();
  if (s != KN_OK) return s;
  kn__cuda_rt *r = kn__cuda_rt_get();
  pthread_mutex_lock(&mu);
  double total = 0;
  for (int k = 0; k < nrecs; k++) {
    float ms = 0;
    int (*elapsed)(float *, void *, void *) = r->cu.EventElapsedTime2 ? r->cu.EventElapsedTime2
                                                                      : r->cu.EventElapsedTime;
    if (elapsed && recs[k].label >= 0 && elapsed(&ms, recs[k].ev[0], recs[k].ev[1]) == 0) {
      labels[recs[k].label].ms += ms;
      labels[recs[k].label].calls++;
      total += ms;
    }
    destroy(r, &recs[k]);
  }
  int n = nrecs;
  nrecs = 0;
  gen++;
  plabel *sorted = nlabels ? malloc((size_t)nlabels * sizeof *sorted) : NULL;
  if (sorted) memcpy(sorted, labels, (size_t)nlabels * sizeof *sorted);
  if (sorted) qsort(sorted, (size_t)nlabels, sizeof *sorted, by_time);
  if (out) {
    fprintf(out, "KILN_CUDA_PROFILE: %d timed launches, %.3f ms of GPU time\n", n, total);
    fprintf(out, "%10s %7s %9s %6s  %s\n", "total_ms", "calls", "avg_us", "share", "kernel");
  }
  for (int i = 0; out && sorted && i < nlabels && i < top; i++)
    if (sorted[i].calls)
      fprintf(out, "%10.3f %7ld %9.2f %5.1f%%  %s\n", sorted[i].ms, sorted[i].calls,
              1e3 * sorted[i].ms / (double)sorted[i].calls,
              total > 0 ? 100 * sorted[i].ms / total : 0, sorted[i].text);
  for (int i = 0; i < nlabels; i++) labels[i].ms = 0, labels[i].calls = 0;
  pthread_mutex_unlock(&mu);
  free(sorted);
  return KN_OK;
}
