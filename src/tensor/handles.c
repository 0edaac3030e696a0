/*
** tensor/handles.c: the checked handle mode (KILN_DEBUG; tensor/handles.h).
**
** A process-wide map from tensor addresses to records, under one mutex.
** A record holds the tensor's serial number and the raw backtrace of its
** creation; when the tensor's last reference goes, the backtrace of the
** release, and its dtype and sizes. The struct of a released tensor is not
** freed or pooled: filled with 0xdb (and poisoned for AddressSanitizer) it
** waits in a FIFO quarantine, so its address cannot be handed to a new
** tensor while the record says "released". The oldest tombstone's memory
** and record go when the quarantine is full; a handle that old is then
** reported as unknown. Backtraces are symbolized only when something is
** reported (an error, or the tensors live at exit).
*/
#include "tensor/handles.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/hashmap.h"
#include "core/strbuf.h"
#include "core/symbolize.h"
#include "logging/log.h"
#include "tensor/pool.h"
#include "tensor/tensor.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifdef KN_DEBUG_BUILD
#define DEBUG_BUILD true
#else
#define DEBUG_BUILD false
#endif

#define NFRAMES 32 /* frames kept per backtrace: enough to reach the user's code */

typedef struct hrec {
  const kn_tensor *t; /* the key; the struct's memory while the record lives */
  uint64_t serial;    /* 1, 2, ...: the tensor's number in this process */
  bool dead, logged;
  kn_dtype dtype;     /* at release */
  int ndim;
  int64_t sizes[KN_MAX_DIMS];
  struct hrec *qnext; /* the quarantine's FIFO */
  int ncreated, nreleased;
  void *created[NFRAMES];
  void *released[NFRAMES];
} hrec;

bool kn__handles_checked;

static pthread_mutex_t hlock = PTHREAD_MUTEX_INITIALIZER;
static kn__hashmap recs; /* address -> hrec* */
static bool recs_init;
static uint64_t serials;
static hrec *q_head, *q_tail; /* oldest first */
static size_t q_len;

static uint64_t key(const void *t) { return (uint64_t)(uintptr_t)t; }

/* ---- the mode ---------------------------------------------------------------- */

int kn__handles_mode_from_env(const char *v, bool debug_build) {
  if (!v) return debug_build ? 1 : 0;
  static const char *const on[] = {"1", "true", "yes", "on"};
  static const char *const off[] = {"0", "false", "no", "off"};
  for (int i = 0; i < 4; i++) {
    if (!strcasecmp(v, on[i])) return 1;
    if (!strcasecmp(v, off[i])) return 0;
  }
  return -1;
}

/* Before any other constructor of the library (and so before any tensor). */
__attribute__((constructor(101))) static void init_mode(void) {
  const char *v = getenv("KILN_DEBUG");
  int m = kn__handles_mode_from_env(v, DEBUG_BUILD);
  if (m < 0) {
    m = DEBUG_BUILD;
    fprintf(stderr, "kiln: KILN_DEBUG=%s is not a switch (expected 1/true/yes/on or "
            "0/false/no/off); checked handles stay %s\n", v, m ? "on" : "off");
  }
  kn__handles_checked = m;
}

/* ---- records ------------------------------------------------------------------- */

void *kn__handle_new(size_t size) {
  hrec *r = malloc(sizeof *r);
  void *t = calloc(1, size);
  if (!r || !t) {
    free(r);
    free(t);
    return NULL;
  }
  memset(r, 0, offsetof(hrec, created));
  r->t = t;
  r->ncreated = kn__backtrace(r->created, NFRAMES);
  pthread_mutex_lock(&hlock);
  if (!recs_init) {
    kn__hm_init(&recs, false);
    recs_init = true;
  }
  r->serial = ++serials;
  bool ok = kn__hm_put_u64(&recs, key(t), r);
  pthread_mutex_unlock(&hlock);
  if (!ok) {
    free(r);
    free(t);
    return NULL;
  }
  kn__live_add(KN__LIVE_TENSORS, 1);
  return t;
}

/* Caller holds hlock: forget the oldest tombstone (into *out) when the
** quarantine is over its size. */
static hrec *evict_locked(void) {
  if (q_len <= KN__HANDLES_QUARANTINE) return NULL;
  hrec *old = q_head;
  q_head = old->qnext;
  if (!q_head) q_tail = NULL;
  q_len--;
  (void)kn__hm_del_u64(&recs, key(old->t));
  return old;
}

static void free_tombstone(hrec *r) {
  UNPOISON((void *)r->t, sizeof(kn_tensor));
  free((void *)r->t);
  free(r);
}

void kn__handle_released(kn_tensor *t) {
  void *frames[NFRAMES];
  int n = kn__backtrace(frames, NFRAMES);
  hrec *old = NULL;
  pthread_mutex_lock(&hlock);
  hrec *r = recs_init ? kn__hm_get_u64(&recs, key(t), NULL) : NULL;
  if (r && !r->dead) {
    r->dead = true;
    r->dtype = t->dtype;
    r->ndim = t->ndim;
    memcpy(r->sizes, t->sizes, sizeof r->sizes);
    memcpy(r->released, frames, (size_t)n * sizeof *frames);
    r->nreleased = n;
    memset(t, 0xdb, sizeof *t);
    POISON(t, sizeof *t);
    if (q_tail) q_tail->qnext = r;
    else q_head = r;
    q_tail = r;
    q_len++;
    old = evict_locked();
  }
  pthread_mutex_unlock(&hlock);
  if (old) free_tombstone(old);
  kn__live_add(KN__LIVE_TENSORS, -1);
  if (!r) free(t); /* created before checked mode was on: not registered */
}

kn_status kn__handles_set_checked(bool on) {
  int64_t live = kn_live_tensors();
  if (live != 0)
    return kn__error(KN_ESTATE, "checked handles can be switched only while no tensor is live "
                     "(%lld are)", (long long)live);
  pthread_mutex_lock(&hlock);
  while (q_head) {
    hrec *r = q_head;
    q_head = r->qnext;
    free_tombstone(r);
  }
  q_tail = NULL;
  q_len = 0;
  serials = 0;
  if (recs_init) kn__hm_fini(&recs);
  recs_init = false;
  kn__handles_checked = on;
  pthread_mutex_unlock(&hlock);
  return KN_OK;
}

/* ---- naming places -------------------------------------------------------------- */

/* Where a backtrace taken inside kiln entered it: the innermost frame of
** the user's code after kiln's own frames. A frame is kiln's by its name,
** its source path or, for libkiln.so, its address. A frame without debug
** info that is none of these is kiln's static helper when the next frame
** that can be told is kiln's (the user's code does not sit between kiln's
** frames; a compiled function, which does, is a frame with debug info), and
** else the user's frame without debug info. found is false when there is
** no such frame. (Which kiln function the user called is not named: a tail
** call inside kiln can hide it.) */
typedef struct site {
  kn__srcframe f;
  bool found;
} site;

typedef enum frame_kind { FR_KILN, FR_OTHER, FR_UNKNOWN } frame_kind;

static frame_kind classify(void *addr, kn__srcframe *f) {
  *f = kn__symbolize(addr);
  if (kn__is_kiln_frame(f) || kn__in_kiln_library(addr)) return FR_KILN;
  return f->file ? FR_OTHER : FR_UNKNOWN;
}

static site user_site(void *const *frames, int n) {
  bool seen_kiln = false;
  for (int i = 0; i < n; i++) {
    kn__srcframe f, g;
    frame_kind k = classify(frames[i], &f);
    if (k == FR_KILN) seen_kiln = true;
    if (k == FR_KILN || !seen_kiln) continue; /* before kiln: the sanitizers' own frames */
    if (k == FR_OTHER) return (site){f, true};
    frame_kind next = FR_OTHER;
    for (int j = i + 1; j < n && (next = classify(frames[j], &g)) == FR_UNKNOWN;) j++;
    if (next != FR_KILN && f.func) return (site){f, true};
  }
  return (site){{NULL, NULL, 0}, false};
}

static void put_site(kn__sb *sb, void *const *frames, int n) {
  site s = user_site(frames, n);
  if (s.found && s.f.file)
    kn__sb_printf(sb, "%s:%d in %s", s.f.file, s.f.line, s.f.func ? s.f.func : "?");
  else if (s.found)
    kn__sb_printf(sb, "%s (no debug info)", s.f.func);
  else if (!kn__symbolize_available())
    kn__sb_puts(sb, "an unknown place (kiln could not load libdw.so.1 to read debug info)");
  else
    kn__sb_puts(sb, "an unknown place (no symbols)");
}

static void put_tensor(kn__sb *sb, const hrec *r) {
  char sizes[160];
  kn__format_sizes(r->ndim, r->sizes, sizes, sizeof sizes);
  kn__sb_printf(sb, "handle %p (tensor #%llu, %s %s)", (const void *)r->t,
                (unsigned long long)r->serial, kn_dtype_name(r->dtype), sizes);
}

/* ---- checks -------------------------------------------------------------------- */

static kn_status report(const char *msg, bool log) {
  kn_status st = kn__error(KN_EINVAL, "%s", msg);
  if (log) KN_LOG(KN_LOG_KILN, KN_ERROR, "%s", msg);
  return st;
}

bool kn__handle_live(const kn_tensor *t) {
  pthread_mutex_lock(&hlock);
  const hrec *r = recs_init ? kn__hm_get_u64(&recs, key(t), NULL) : NULL;
  bool live = r && !r->dead;
  pthread_mutex_unlock(&hlock);
  return live;
}

kn_status kn__handle_check(const kn_tensor *t, const char *api, const char *what) {
  return kn__handle_live(t) ? KN_OK : kn__handle_dead(t, api, what);
}

kn_status kn__handle_dead(const kn_tensor *t, const char *api, const char *what) {
  pthread_mutex_lock(&hlock);
  hrec *r = recs_init ? kn__hm_get_u64(&recs, key(t), NULL) : NULL;
  if (r && !r->dead) { /* alive after all (another thread's doing) */
    pthread_mutex_unlock(&hlock);
    return KN_OK;
  }
  hrec copy;
  bool log = true;
  if (r) {
    copy = *r;
    log = !r->logged;
    r->logged = true;
  }
  pthread_mutex_unlock(&hlock);
  kn__sb sb = KN__SB_INIT;
  if (!r) {
    kn__sb_printf(&sb, "%s: %s is not a live tensor: kiln has no record of handle %p (released "
                  "more than %d releases ago, so KILN_DEBUG no longer remembers it, or not a "
                  "tensor handle at all)", api, what ? what : "the tensor", (const void *)t,
                  KN__HANDLES_QUARANTINE);
  } else {
    if (what) kn__sb_printf(&sb, "%s: %s is a released tensor: ", api, what);
    else kn__sb_printf(&sb, "%s: tensor released twice: ", api);
    put_tensor(&sb, &copy);
    kn__sb_puts(&sb, " was created at ");
    put_site(&sb, copy.created, copy.ncreated);
    kn__sb_puts(&sb, what ? " and released at " : " and already released at ");
    put_site(&sb, copy.released, copy.nreleased);
    kn__sb_puts(&sb, what ? "; a tensor cannot be used after its last reference is released"
                          : "; each reference is released once");
  }
  kn_status st = report(kn__sb_failed(&sb) ? "a released tensor was used" : kn__sb_cstr(&sb), log);
  kn__sb_fini(&sb);
  return st;
}

kn_status kn__handle_check_list(kn_tensor *const *ts, int n, const char *api, const char *list) {
  char what[64];
  for (int i = 0; ts && i < n; i++) {
    if (!ts[i] || kn__handle_live(ts[i])) continue;
    snprintf(what, sizeof what, "%s %d", list, i);
    return kn__handle_dead(ts[i], api, what);
  }
  return KN_OK;
}

void kn__handle_released_twice(const kn_tensor *t) {
  char msg[400];
  snprintf(msg, sizeof msg, "kn_release: tensor released twice: handle %p has no reference "
           "left; each reference is released once (run with KILN_DEBUG=1 to learn where it "
           "was created and released)", (const void *)t);
  (void)report(msg, true);
}

/* ---- the tensors live at exit --------------------------------------------------- */

typedef struct group {
  const char *site; /* the map's key */
  int64_t n;
} group;

static int by_count(const void *a, const void *b) {
  const group *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? 1 : -1;
  return strcmp(x->site, y->site);
}

/* Caller holds hlock: count the live records per creation site into m
** (site text -> count). Returns how many are live, -1 on OOM. */
static int64_t count_sites_locked(kn__hashmap *m) {
  int64_t live = 0;
  const kn__hm_slot *sl;
  for (size_t i = 0; recs_init && kn__hm_next(&recs, &i, &sl);) {
    const hrec *r = sl->val;
    if (r->dead) continue;
    kn__sb sb = KN__SB_INIT;
    put_site(&sb, r->created, r->ncreated);
    bool found = false;
    const char *s = kn__sb_failed(&sb) ? "?" : kn__sb_cstr(&sb);
    uintptr_t n = (uintptr_t)kn__hm_get(m, s, &found);
    bool ok = kn__hm_put(m, s, (void *)(n + 1));
    kn__sb_fini(&sb);
    if (!ok) return -1;
    live++;
  }
  return live;
}

static char *format_groups(const kn__hashmap *m, int64_t live, int max_sites) {
  group *g = malloc((m->len ? m->len : 1) * sizeof *g);
  if (!g) return NULL;
  size_t ng = 0;
  const kn__hm_slot *sl;
  for (size_t i = 0; kn__hm_next(m, &i, &sl);)
    g[ng++] = (group){sl->key.s, (int64_t)(uintptr_t)sl->val};
  qsort(g, ng, sizeof *g, by_count);
  kn__sb sb = KN__SB_INIT;
  kn__sb_printf(&sb, "%lld %s still live, by where %s created (KILN_DEBUG):", (long long)live,
                live == 1 ? "tensor is" : "tensors are", live == 1 ? "it was" : "they were");
  int64_t rest = live;
  size_t shown = ng < (size_t)max_sites ? ng : (size_t)max_sites;
  for (size_t i = 0; i < shown; i++) {
    kn__sb_printf(&sb, "\n  %6lld  %s", (long long)g[i].n, g[i].site);
    rest -= g[i].n;
  }
  if (ng > shown)
    kn__sb_printf(&sb, "\n  %6lld  from %zu other places", (long long)rest, ng - shown);
  kn__sb_puts(&sb, "\nRelease each reference (kn_release) or create temporaries inside a scope "
              "(kn_scope_begin / kn_scope_end).");
  free(g);
  return kn__sb_failed(&sb) ? (kn__sb_fini(&sb), NULL) : kn__sb_take(&sb);
}

char *kn__handles_live_report(int max_sites) {
  if (!kn__handles_checked) return NULL;
  kn__hashmap m;
  kn__hm_init(&m, true);
  pthread_mutex_lock(&hlock);
  int64_t live = count_sites_locked(&m);
  pthread_mutex_unlock(&hlock);
  char *text = live > 0 ? format_groups(&m, live, max_sites > 0 ? max_sites : 1) : NULL;
  kn__hm_fini(&m);
  return text;
}

/* After the library's other destructors (a lower priority runs later). */
__attribute__((destructor(101))) static void report_at_exit(void) {
  kn__symbolize_local_only(); /* libcurl may be finalised by now */
  char *text = kn__handles_live_report(10);
  if (text) KN_LOG(KN_LOG_KILN, KN_WARNING, "%s", text);
  free(text);
}
