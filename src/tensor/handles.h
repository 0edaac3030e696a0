/*
** tensor/handles.h: the checked handle mode (KILN_DEBUG), see handles.c.
**
** In checked mode every tensor struct is registered when it is created,
** with a backtrace of the call that created it. When its last reference
** goes, the struct is not reused: it stays allocated, poisoned, as a
** tombstone holding where it was created and released (a bounded
** quarantine), so a later use of the handle is recognised and named
** instead of reading whatever took the slot. Uses are checked at the entry
** points (the dispatcher, the accessors, printing, retain/release,
** backward, compiled calls); a failed check is an error value (NULL or a
** status, with kn_last_error) and is logged once per handle. At exit the
** tensors still live are reported, grouped by creation site.
**
** Off (the default in release builds), the cost is one predictable branch
** per checked use: the KN__HANDLES_CHECKED() test below.
*/
#ifndef KN_TENSOR_HANDLES_H
#define KN_TENSOR_HANDLES_H

#include <stdbool.h>
#include <stddef.h>

#include "kiln/tensor.h"

/* Decided once, before any tensor exists (a constructor reading KILN_DEBUG;
** on by default in Debug builds). */
extern bool kn__handles_checked;
#define KN__HANDLES_CHECKED() __builtin_expect(kn__handles_checked, 0)

/* Tombstones kept before the oldest one's memory is freed (and its record
** forgotten): a handle used after this many later releases is reported as
** unknown rather than named. */
#define KN__HANDLES_QUARANTINE 65536

/* What KILN_DEBUG=value selects: 1 on, 0 off, -1 not a recognised value
** (1/true/yes/on, 0/false/no/off, any case); NULL: the build's default. */
int kn__handles_mode_from_env(const char *value, bool debug_build);

/* Checked mode: a zeroed tensor struct of size bytes, counted live and
** registered with the caller's backtrace. Owned; NULL on OOM. */
void *kn__handle_new(size_t size);
/* Checked mode: t's last reference is gone (its members are released): the
** struct becomes a tombstone recording where this happened. */
void kn__handle_released(kn_tensor *t);
/* Checked mode: is t a live tensor? KN_OK, or KN_EINVAL with the message
** "<api>: <what> is a released tensor: ..." naming the handle, where it was
** created and where it was released (or that kiln has no record of it);
** logged once per handle. */
kn_status kn__handle_check(const kn_tensor *t, const char *api, const char *what);
/* Checked mode, the two halves of kn__handle_check, for callers that name
** the argument only when it is dead: is t a live tensor; the error. */
bool kn__handle_live(const kn_tensor *t);
kn_status kn__handle_dead(const kn_tensor *t, const char *api, const char *what);
/* Checked mode: kn__handle_check on ts[0..n) (NULL entries and a NULL ts
** are skipped), naming "<list> <i>" ("input 2"). */
kn_status kn__handle_check_list(kn_tensor *const *ts, int n, const char *api, const char *list);
/* Unchecked mode: kn_release found no reference left on t (released once
** too often, while its struct was still unused): the error and the log. */
void kn__handle_released_twice(const kn_tensor *t);

/* Checked mode: the tensors live now, grouped by creation site, most
** first ("3000 tensors are still live, by where they were created:\n..."),
** at most max_sites lines and a line for the rest. Owned string (free());
** NULL when none is live, when off, or on OOM. */
char *kn__handles_live_report(int max_sites);
/* Tests: switch checked mode on or off. KN_ESTATE while tensors are live
** (their records would be missing or stale); forgets every tombstone and
** numbers tensors from 1 again. */
kn_status kn__handles_set_checked(bool on);

#endif
