/*
** profiler/profiler.c: recording (kiln/profiler.h). Events are appended to
** one mutex-protected array; each thread keeps its own stack of open user
** ranges. KILN_PROFILE starts the profiler when the library loads.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/strbuf.h"
#include "logging/log.h"
#include "profiler/profiler.h"
#include "profiler/profiler_int.h"

atomic_int kn__prof_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kn__prof_ev *events;
static int nevents, cap_events;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void ev_free(kn__prof_ev *e) {
  free(e->name);
  free(e->shapes);
}

void kn_profiler_clear(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nevents; i++) ev_free(&events[i]);
  free(events);
  events = NULL;
  nevents = cap_events = 0;
  pthread_mutex_unlock(&lock);
}

/* Takes ownership of e's strings (freed when it cannot be stored). */
static void push(kn__prof_ev e) {
  pthread_mutex_lock(&lock);
  if (nevents == cap_events) {
    int nc = cap_events ? cap_events * 2 : 1024;
    kn__prof_ev *ne = realloc(events, sizeof *ne * (size_t)nc);
    if (ne) events = ne, cap_events = nc;
  }
  if (nevents < cap_events && e.name) events[nevents++] = e;
  else ev_free(&e);
  pthread_mutex_unlock(&lock);
}

kn_status kn_profiler_start(void) {
  if (atomic_load(&kn__prof_on)) return kn__error(KN_ESTATE, "the profiler is already running");
  kn_profiler_clear();
  atomic_store(&kn__prof_on, 1);
  kn__compile_times_set_hook(kn__prof_range_done); /* compile phases become ranges */
  return KN_OK;
}

kn_status kn_profiler_stop(void) {
  if (!atomic_load(&kn__prof_on)) return kn__error(KN_ESTATE, "the profiler is not running");
  atomic_store(&kn__prof_on, 0);
  kn__compile_times_set_hook(NULL);
  return KN_OK;
}

bool kn_profiler_is_running(void) { return atomic_load(&kn__prof_on) != 0; }

/* ---- op events ------------------------------------------------------------------- */
int64_t kn__prof_op_begin(void) { return now_ns(); }

void kn__prof_op_end(int64_t begin_ns, const char *op, char *shapes, int64_t seq) {
  int64_t end = now_ns();
  size_t n = strlen(op) + 7;
  char *name = malloc(n);
  if (name) snprintf(name, n, "aten::%s", op);
  push((kn__prof_ev){name, "cpu_op", shapes, begin_ns, end - begin_ns, (uint64_t)gettid(), seq});
}

/* ---- ranges ----------------------------------------------------------------------- */
void kn__prof_range_done(const char *name, double seconds) {
  int64_t end = now_ns(), dur = (int64_t)(seconds * 1e9);
  push((kn__prof_ev){strdup(name), "user_annotation", strdup(""), end - dur, dur,
                     (uint64_t)gettid(), -1});
}

int64_t kn__prof_range_begin(void) { return now_ns(); }
int64_t kn__prof_now_ns(void) { return now_ns(); }
uint64_t kn__prof_thread_id(void) { return (uint64_t)gettid(); }

void kn__prof_span(const char *name, char *shapes, int64_t begin_ns, int64_t end_ns,
                   uint64_t thread) {
  push((kn__prof_ev){strdup(name), "cpu_op", shapes, begin_ns, end_ns - begin_ns, thread, -1});
}

void kn__prof_range_end(const char *prefix, const char *name, int64_t begin_ns) {
  int64_t end = now_ns();
  size_t n = strlen(prefix) + strlen(name) + 1;
  char *full = malloc(n);
  if (full) snprintf(full, n, "%s%s", prefix, name);
  push((kn__prof_ev){full, "user_annotation", strdup(""), begin_ns, end - begin_ns,
                     (uint64_t)gettid(), -1});
}

#define MAX_OPEN 64
static _Thread_local struct { char *name; int64_t start; } open_ranges[MAX_OPEN];
static _Thread_local int nopen, ndropped;

void kn_profiler_range_push(const char *name) {
  if (nopen == MAX_OPEN || !name) {
    ndropped++;
    return;
  }
  open_ranges[nopen].name = strdup(name);
  open_ranges[nopen++].start = now_ns();
}

void kn_profiler_range_pop(void) {
  if (ndropped) {
    ndropped--;
    return;
  }
  if (!nopen) return;
  nopen--;
  char *name = open_ranges[nopen].name;
  if (!atomic_load(&kn__prof_on)) {
    free(name);
    return;
  }
  int64_t start = open_ranges[nopen].start;
  push((kn__prof_ev){name, "user_annotation", strdup(""), start, now_ns() - start,
                     (uint64_t)gettid(), -1});
}

/* ---- reading ------------------------------------------------------------------------ */
int kn_profiler_num_events(void) {
  pthread_mutex_lock(&lock);
  int n = nevents;
  pthread_mutex_unlock(&lock);
  return n;
}

bool kn_profiler_get_event(int i, kn_profiler_event *out) {
  pthread_mutex_lock(&lock);
  bool ok = out && i >= 0 && i < nevents;
  if (ok) {
    const kn__prof_ev *e = &events[i];
    *out = (kn_profiler_event){e->name, e->category, e->shapes ? e->shapes : "",
                               e->start_ns, e->dur_ns, e->thread, e->seq};
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

/* Copy of all events (for export), sorted by thread then start. Owned. */
int kn__prof_snapshot(kn__prof_ev **out) {
  pthread_mutex_lock(&lock);
  int n = nevents;
  *out = malloc(sizeof **out * (size_t)(n ? n : 1));
  if (*out) memcpy(*out, events, sizeof **out * (size_t)n);
  pthread_mutex_unlock(&lock);
  return *out ? n : -1;
}

/* ---- KILN_PROFILE ------------------------------------------------------------------- */
static char *profile_path;

static void write_at_exit(void) {
  kn_profiler_stop();
  if (kn_profiler_export_chrome_trace(profile_path) != KN_OK)
    fprintf(stderr, "kiln: KILN_PROFILE: %s\n", kn_last_error());
  free(profile_path);
  kn_profiler_clear();
}

__attribute__((constructor)) static void profile_from_env(void) {
  const char *p = getenv("KILN_PROFILE");
  if (!p || !*p || !(profile_path = strdup(p))) return;
  if (atexit(write_at_exit) == 0) kn_profiler_start();
}
