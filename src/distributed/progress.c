/*
** distributed/progress.c: the progress engine of non-blocking collectives.
**
** Open MPI moves a non-blocking collective forward only inside MPI calls of
** the process that started it (`ompi_info` says "OMPI progress: no"): a DDP
** bucket's all-reduce started during backward otherwise stands still until
** the next MPI call, which came only at the next gradient hook or at the
** end of backward, so nothing of it overlapped the backward's compute. Like
** PyTorch's ProcessGroupMPI, which runs MPI on a thread of its own, kiln
** starts one thread per process (KILN_DIST_PROGRESS=thread, the default)
** that tests the requests in flight every KN__DIST_POLL_US microseconds and
** sleeps on a condition variable while none is. Every MPI call of kiln's
** takes one lock, so MPI needs only MPI_THREAD_SERIALIZED.
**
** The thread only observes completion (MPI_Test); finishing a work (the
** average's division, the copy back into a strided tensor) and every error
** stay on the thread that owns the work (kn_dist_wait / kn_dist_test).
*/
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "core/error.h"
#include "distributed/dist_int.h"
#include "profiler/profiler.h"

static struct {
  pthread_mutex_t lock; /* every MPI call of kiln's, and the fields below */
  pthread_cond_t wake;  /* signalled when a work starts or the thread must stop */
  pthread_t thread;
  bool on, stop;
  kn_dist_work *active; /* started, not yet seen complete (linked by next_active) */
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

void kn__dist_lock(void) { pthread_mutex_lock(&P.lock); }
void kn__dist_unlock(void) { pthread_mutex_unlock(&P.lock); }
bool kn__dist_progress_on(void) { return P.on; }

void kn__dist_test_locked(kn_dist_work *w) {
  if (atomic_load_explicit(&w->mpi_done, memory_order_relaxed)) return;
  int flag = 1, rc = MPI_SUCCESS;
  if (w->req != MPI_REQUEST_NULL) rc = MPI_Test(&w->req, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) w->mpi_failed = KN__DIST_FAILED_COLLECTIVE;
  else if (flag && w->narr && (rc = MPI_Testall(w->narr, w->arr, &flag, MPI_STATUSES_IGNORE)))
    w->mpi_failed = KN__DIST_FAILED_ARRIVALS;
  w->mpi_rc = rc;
  if (!flag && rc == MPI_SUCCESS) return;
  w->t1_ns = kn__prof_now_ns();
  atomic_store_explicit(&w->mpi_done, true, memory_order_release);
}

void kn__dist_unlink_locked(kn_dist_work *w) {
  if (!w->active) return;
  kn_dist_work **p = &P.active;
  while (*p != w) p = &(*p)->next_active;
  *p = w->next_active;
  w->next_active = NULL;
  w->active = false;
}

void kn__dist_progress_add(kn_dist_work *w) {
  if (!P.on) return;
  kn__dist_lock();
  w->next_active = P.active;
  P.active = w;
  w->active = true;
  pthread_cond_signal(&P.wake);
  kn__dist_unlock();
}

void kn__dist_progress_remove(kn_dist_work *w) {
  kn__dist_lock();
  kn__dist_unlink_locked(w);
  kn__dist_unlock();
}

/* One pass over the works in flight (lock held): test each, drop the ones
** seen complete or failed. */
static void poll_active(void) {
  kn_dist_work **p = &P.active;
  while (*p) {
    kn_dist_work *w = *p;
    kn__dist_test_locked(w);
    if (!atomic_load_explicit(&w->mpi_done, memory_order_relaxed)) {
      p = &w->next_active;
      continue;
    }
    *p = w->next_active;
    w->next_active = NULL;
    w->active = false;
  }
}

static void *progress_main(void *arg) {
  (void)arg;
  const struct timespec pause = {0, KN__DIST_POLL_US * 1000L};
  kn__dist_lock();
  while (!P.stop) {
    if (!P.active) {
      pthread_cond_wait(&P.wake, &P.lock);
      continue;
    }
    poll_active();
    kn__dist_unlock();
    nanosleep(&pause, NULL);
    kn__dist_lock();
  }
  kn__dist_unlock();
  return NULL;
}

kn_status kn__dist_progress_start(void) {
  if (P.on) return KN_OK;
  sigset_t all, old;
  sigfillset(&all);
  /* the thread takes no signal: the user's handlers run where they expect */
  pthread_sigmask(SIG_SETMASK, &all, &old);
  P.stop = false;
  int rc = pthread_create(&P.thread, NULL, progress_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0)
    return kn__error(KN_EINTERNAL, "kn_dist_init: starting the progress thread failed (error "
                     "%d); set KILN_DIST_PROGRESS=none to run without it", rc);
  P.on = true;
  return KN_OK;
}

void kn__dist_progress_stop(void) {
  if (!P.on) return;
  kn__dist_lock();
  P.stop = true;
  while (P.active) kn__dist_unlink_locked(P.active); /* in flight: a broken group's */
  pthread_cond_signal(&P.wake);
  kn__dist_unlock();
  pthread_join(P.thread, NULL);
  P.on = false;
}
