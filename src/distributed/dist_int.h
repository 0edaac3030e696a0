/*
** distributed/dist_int.h: the process group and the asynchronous work
** engine shared by the collectives and DDP (internal; MPI builds only).
**
** Every collective gets a sequence number (the same on every rank, since
** all ranks call the same collectives in the same order). Alongside the
** collective itself, each rank sends its sequence number to every other
** rank on a second communicator ("arrivals") and posts a receive from each:
** when the collective does not complete in time, the receives still open
** name the ranks that never entered it.
*/
#ifndef KN_DISTRIBUTED_DIST_INT_H
#define KN_DISTRIBUTED_DIST_INT_H

#include <mpi.h>
#include <stdatomic.h>

#include "kiln/distributed.h"
#include "tensor/tensor.h"

struct kn_dist_work {
  char name[32];        /* "all_reduce" */
  uint64_t seq;         /* collective number, from 1 */
  double deadline;      /* CLOCK_MONOTONIC seconds */
  MPI_Request req;      /* the collective; MPI_REQUEST_NULL when local */
  int narr;             /* 2 * (world - 1) arrival requests */
  MPI_Request *arr;     /* receives first, then sends (owned) */
  int64_t *arr_buf;     /* world - 1 received numbers, then the one sent (owned) */
  bool done;            /* completed, successfully or not */
  kn_status status;
  char *error;          /* message of a failed work (owned), re-raised by wait */
  /* finishing: result buffer written back into target, AVG division */
  kn_tensor *target;    /* owned reference: the tensor the result goes to */
  kn_tensor *buf;       /* owned: the buffer MPI writes (may be target) */
  kn_tensor *send;      /* owned: the packed input buffer, or NULL */
  bool divide;          /* AVG: divide buf by the world size when done */
  struct kn_dist_work *next_abandoned; /* a failed work MPI may still write */
  /* seen by MPI_Test (the owner's poll or the progress thread, under the
  ** lock); the owner finishes the work from these */
  atomic_bool mpi_done;  /* the collective and the arrival messages completed,
                            or an MPI_Test of them failed (mpi_failed) */
  int mpi_failed;        /* KN__DIST_FAILED_*: which MPI_Test failed (0: none) */
  int mpi_rc;            /* its MPI error code */
  int64_t t0_ns, t1_ns;  /* started; seen complete by MPI_Test (profiler clock) */
  uint64_t tid;          /* the thread that started it */
  bool active;           /* on the progress thread's list */
  struct kn_dist_work *next_active;
};

enum { KN__DIST_FAILED_COLLECTIVE = 1, KN__DIST_FAILED_ARRIVALS = 2 };

/* The progress thread's pause between two passes over the works in flight.
** Measured on 2 ranks sharing 2 cores, each computing 5-6 ms beside a 4.2 MB
** all-reduce: 50 us hid the whole all-reduce (1.7 ms waited after the compute
** without the thread) for 0.14 ms more compute; 200 us slowed the compute
** more (sleeping through rounds while the peer waits). */
#define KN__DIST_POLL_US 50

/* The MPI datatype of a kiln dtype; false when unsupported. */
bool kn__dist_mpi_type(kn_dtype dt, MPI_Datatype *out);
/* The communicator of collectives (MPI_COMM_NULL without MPI started). */
MPI_Comm kn__dist_comm(void);
/* KN_OK when the group is initialised and not broken; else the error,
** naming `what` (the collective). */
kn_status kn__dist_check_ready(const char *what);
/* A new work named `name` with the next sequence number and its deadline;
** posts the arrival messages when MPI runs. Owned, or NULL (error set). */
kn_dist_work *kn__dist_work_begin(const char *name);
/* Record an MPI failure of w's start (rc from an MPI call): sets the error,
** marks w done and the group broken. Returns the status. */
kn_status kn__dist_work_mpi_error(kn_dist_work *w, const char *call, int rc);
/* Number of works in flight (started, not completed). */
int kn__dist_pending(void);
/* Free a work (waits for it first when in flight). */
void kn__dist_work_free(kn_dist_work *w);
/* Drive MPI's progress on w without blocking; *done as kn_dist_test. */
kn_status kn__dist_poll(kn_dist_work *w, bool *done);

/* ---- the progress engine (progress.c) ---- */
/* The lock around every MPI call of kiln's once MPI started (the progress
** thread makes MPI calls too: MPI_THREAD_SERIALIZED). */
void kn__dist_lock(void);
void kn__dist_unlock(void);
/* MPI_Test w's collective, then its arrival messages, once (lock held):
** sets w->mpi_done (with w->mpi_failed / mpi_rc on an MPI error). No-op
** once mpi_done is set. */
void kn__dist_test_locked(kn_dist_work *w);
/* Take w off the progress thread's list (lock held / taking the lock). */
void kn__dist_unlink_locked(kn_dist_work *w);
void kn__dist_progress_remove(kn_dist_work *w);
/* Hand a started work (its MPI request posted) to the progress thread;
** no-op when the thread does not run. */
void kn__dist_progress_add(kn_dist_work *w);
/* Start / stop (join) the progress thread; start fails with KN_EINTERNAL. */
kn_status kn__dist_progress_start(void);
void kn__dist_progress_stop(void);
bool kn__dist_progress_on(void);

#endif
