/*
** logging/compile_times.c: named phase timings and their table.
**
** Subsystems add durations per phase name; kn_compile_times() prints them as
** tabulate's "simple" table: a header row, dashes as wide as each column,
** two-space gaps, each column as wide as max(header + 2, widest cell), and
** no trailing spaces. Values print as %.4f, summed when aggregated, else
** joined by ", ". Rows keep first-recorded order.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/strbuf.h"
#include "logging/log.h"

typedef struct phase {
  char *name;
  double *secs;
  size_t n, cap;
} phase;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static phase *phases;
static size_t nphases, cap_phases;
static bool at_exit_registered;

static void dump_at_exit(void) {
  kn_dump_compile_times();
  kn__compile_times_reset();
}

static phase *find_or_add(const char *name) {
  for (size_t i = 0; i < nphases; i++)
    if (!strcmp(phases[i].name, name)) return &phases[i];
  if (nphases == cap_phases) {
    size_t cap = cap_phases ? cap_phases * 2 : 16;
    phase *p = realloc(phases, cap * sizeof *p);
    if (!p) return NULL;
    phases = p;
    cap_phases = cap;
  }
  char *copy = strdup(name);
  if (!copy) return NULL;
  phases[nphases] = (phase){copy, NULL, 0, 0};
  return &phases[nphases++];
}

static _Atomic(kn__compile_time_hook) time_hook;

void kn__compile_times_set_hook(kn__compile_time_hook hook) { atomic_store(&time_hook, hook); }

void kn__compile_time_record(const char *phase_name, double seconds) {
  kn__compile_time_hook hook = atomic_load_explicit(&time_hook, memory_order_relaxed);
  if (hook) hook(phase_name, seconds); /* e.g. a profiler range */
  pthread_mutex_lock(&lock);
  if (!at_exit_registered) at_exit_registered = atexit(dump_at_exit) == 0;
  phase *p = find_or_add(phase_name);
  if (p && p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 4;
    double *s = realloc(p->secs, cap * sizeof *s);
    if (s) p->secs = s, p->cap = cap;
  }
  if (p && p->n < p->cap) p->secs[p->n++] = seconds;
  pthread_mutex_unlock(&lock);
}

double kn__compile_time_begin(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void kn__compile_time_end(const char *phase_name, double begin) {
  kn__compile_time_record(phase_name, kn__compile_time_begin() - begin);
}

void kn__compile_times_reset(void) {
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < nphases; i++) {
    free(phases[i].name);
    free(phases[i].secs);
  }
  free(phases);
  phases = NULL;
  nphases = cap_phases = 0;
  pthread_mutex_unlock(&lock);
}

static void cell(const phase *p, bool aggregate, kn__sb *sb) {
  double sum = 0;
  for (size_t j = 0; j < p->n; j++) {
    if (aggregate) sum += p->secs[j];
    else kn__sb_printf(sb, "%s%.4f", j ? ", " : "", p->secs[j]);
  }
  if (aggregate) kn__sb_printf(sb, "%.4f", sum);
}

/* One table row: cells padded to the widths, right spaces stripped. */
static void row(kn__sb *sb, const char *a, const char *b, size_t w0) {
  kn__sb_printf(sb, "\n%-*s  %s", (int)w0, a, b);
  while (sb->len && sb->buf[sb->len - 1] == ' ') sb->buf[--sb->len] = '\0';
}

char *kn_compile_times(bool aggregate) {
  static const char h0[] = "Function", h1[] = "Runtimes (s)";
  kn__sb sb = KN__SB_INIT, c = KN__SB_INIT;
  pthread_mutex_lock(&lock);
  size_t w0 = sizeof h0 - 1 + 2, w1 = sizeof h1 - 1 + 2;
  for (size_t i = 0; i < nphases; i++) {
    kn__sb_clear(&c);
    cell(&phases[i], aggregate, &c);
    if (strlen(phases[i].name) > w0) w0 = strlen(phases[i].name);
    if (c.len > w1) w1 = c.len;
  }
  kn__sb_puts(&sb, "kiln compilation metrics:");
  row(&sb, h0, h1, w0);
  kn__sb_putc(&sb, '\n');
  for (size_t i = 0; i < w0; i++) kn__sb_putc(&sb, '-');
  kn__sb_puts(&sb, "  ");
  for (size_t i = 0; i < w1; i++) kn__sb_putc(&sb, '-');
  for (size_t i = 0; i < nphases; i++) {
    kn__sb_clear(&c);
    cell(&phases[i], aggregate, &c);
    row(&sb, phases[i].name, kn__sb_cstr(&c), w0);
  }
  pthread_mutex_unlock(&lock);
  if (kn__sb_failed(&c)) sb.oom = true;
  kn__sb_fini(&c);
  return kn__sb_take(&sb);
}

void kn_dump_compile_times(void) {
  if (!kn_log_enabled(KN_LOG_DYNAMO_UTILS, KN_INFO)) return;
  char *table = kn_compile_times(true);
  if (table) KN_LOG(KN_LOG_DYNAMO_UTILS, KN_INFO, "%s", table);
  free(table);
}
