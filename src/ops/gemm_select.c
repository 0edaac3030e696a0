/*
** ops/gemm_select.c: the float32 GEMM's library per call shape
** (ops/gemm_select.h): KILN_GEMM, the machine's facts, the rule and the
** record of choices the benchmarks print.
**
** The rule (kn__gemm_choose) comes from the table in docs/KERNELS.md
** ("float32 GEMM: the library per shape"), measured on an AVX2 machine
** (AMD EPYC, OpenBLAS core Zen, oneDNN 2.6 isa avx2): oneDNN 2.6's sgemm is
** slow in A^T B (the weight gradient X^T dY of linear: about half of
** OpenBLAS's speed) and in A B with wide rows (N >= 512) unless M is large
** (N = K = 1024, M < 384: a quarter to a half of OpenBLAS's); elsewhere it
** matches or beats OpenBLAS (B read transposed, small and narrow
** products).
*/
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logging/log.h"
#include "ops/gemm_select.h"
#include "ops/nn_dnnl.h"
#include "ops/threads.h"

char *openblas_get_corename(void);

/* ---- KILN_GEMM ----------------------------------------------------------------- */

static const char *const mode_names[] = {"auto", "onednn", "openblas"};

bool kn__gemm_parse(const char *v, kn__gemm_mode *m, char *why, size_t n) {
  const char *p = v ? v : "";
  while (isspace((unsigned char)*p)) p++;
  size_t len = strlen(p);
  while (len && isspace((unsigned char)p[len - 1])) len--;
  for (int i = 0; i < 3; i++)
    if (len == strlen(mode_names[i]) && !strncmp(p, mode_names[i], len)) {
      *m = (kn__gemm_mode)i;
      return true;
    }
  snprintf(why, n, "KILN_GEMM: expected one of auto, onednn, openblas; found '%.60s'; using "
           "auto", v ? v : "");
  return false;
}

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static _Atomic int mode_set = -1; /* a kn__gemm_set_mode value, else -1 */
static kn__gemm_mode env_mode = KN__GEMM_AUTO;

static void read_env(void) {
  const char *v = getenv("KILN_GEMM");
  char why[160];
  if (v && !kn__gemm_parse(v, &env_mode, why, sizeof why)) {
    KN_LOG(KN_LOG_KILN, KN_WARNING, "%s", why);
    env_mode = KN__GEMM_AUTO;
  }
}

kn__gemm_mode kn__gemm_mode_get(void) {
  int s = atomic_load_explicit(&mode_set, memory_order_relaxed);
  if (s >= 0) return (kn__gemm_mode)s;
  pthread_once(&env_once, read_env);
  return env_mode;
}

void kn__gemm_set_mode(kn__gemm_mode m) { atomic_store(&mode_set, (int)m); }

/* ---- the machine ----------------------------------------------------------------- */

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static kn__gemm_cpu cpu;
static char names[2][48];

/* OpenBLAS's cores that are its generic fallbacks (no kernels tuned for
** the CPU: SSE2/SSE3 code, several times slower than the machine). */
static bool generic_core(const char *c) {
  static const char *const generic[] = {"Prescott", "Core2", "Katmai", "Coppermine",
                                        "Northwood", "Banias", "Atom", "Generic", "Unknown"};
  for (size_t i = 0; i < sizeof generic / sizeof generic[0]; i++)
    if (!strcmp(c, generic[i])) return true;
  return false;
}

static void cpu_init(void) {
  const char *core = openblas_get_corename(), *isa = kn__dnnl_isa_name();
  if (!core) core = "unknown";
  cpu.openblas_tuned = !generic_core(core) && strcmp(core, "unknown") != 0;
  cpu.onednn_avx2 = !strncmp(isa, "avx2", 4);
  snprintf(names[0], sizeof names[0], "onednn:%s", isa);
  snprintf(names[1], sizeof names[1], "openblas:%s", core);
}

const kn__gemm_cpu *kn__gemm_cpu_get(void) {
  pthread_once(&cpu_once, cpu_init);
  return &cpu;
}

const char *kn__gemm_lib_name(kn__gemm_lib lib) {
  pthread_once(&cpu_once, cpu_init);
  return names[lib == KN__GEMM_LIB_OPENBLAS];
}

/* ---- the rule -------------------------------------------------------------------- */

/* The measured rule (AVX2 class, tuned OpenBLAS): OpenBLAS where oneDNN
** 2.6's sgemm was measured slower, oneDNN elsewhere (B transposed, A and B
** both transposed, narrow products, large M). */
static kn__gemm_lib auto_lib(const kn__gemm_cpu *c, kn__gemm_shape s) {
  if (!c->openblas_tuned || !c->onednn_avx2 || s.tb) return KN__GEMM_LIB_ONEDNN;
  if (s.ta) /* A^T B: linear's weight gradient X^T dY */
    return s.N >= 512 || (s.N >= 256 && s.M * s.K >= 16384) ? KN__GEMM_LIB_OPENBLAS
                                                               : KN__GEMM_LIB_ONEDNN;
  return s.N >= 512 && s.M < 1024 ? KN__GEMM_LIB_OPENBLAS : KN__GEMM_LIB_ONEDNN; /* A B */
}

kn__gemm_plan kn__gemm_choose(kn__gemm_mode mode, const kn__gemm_cpu *c, kn__gemm_shape s,
                              int threads) {
  kn__gemm_plan p;
  p.lib = mode == KN__GEMM_ONEDNN     ? KN__GEMM_LIB_ONEDNN
          : mode == KN__GEMM_OPENBLAS ? KN__GEMM_LIB_OPENBLAS
                                      : auto_lib(c, s);
  int64_t t = s.M * s.N * s.K / KN__GRAIN_MAC;
  if (p.lib == KN__GEMM_LIB_OPENBLAS) { /* at least one block of rows or columns a thread */
    int64_t units = (s.M > s.N ? s.M : s.N) / 16;
    if (t > units) t = units;
  }
  p.team = t < 2 ? 1 : t < threads ? (int)t : threads < 1 ? 1 : threads;
  return p;
}

/* ---- the record ------------------------------------------------------------------ */

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool rec_on;
static kn__gemm_rec recs[KN__GEMM_REC_MAX];
static int nrec;
static int64_t rec_dropped;

void kn__gemm_record(bool on) {
  pthread_mutex_lock(&rec_lock);
  if (on) nrec = 0, rec_dropped = 0;
  atomic_store(&rec_on, on);
  pthread_mutex_unlock(&rec_lock);
}

static bool same(const kn__gemm_rec *r, kn__gemm_shape s, int threads, kn__gemm_plan p) {
  return r->s.ta == s.ta && r->s.tb == s.tb && r->s.M == s.M && r->s.N == s.N &&
         r->s.K == s.K && r->threads == threads && r->plan.lib == p.lib &&
         r->plan.team == p.team;
}

void kn__gemm_note(kn__gemm_shape s, int threads, kn__gemm_plan p) {
  if (!atomic_load_explicit(&rec_on, memory_order_relaxed)) return;
  pthread_mutex_lock(&rec_lock);
  int i = 0;
  while (i < nrec && !same(&recs[i], s, threads, p)) i++;
  if (i == nrec && nrec < KN__GEMM_REC_MAX) recs[nrec++] = (kn__gemm_rec){s, threads, p, 0};
  if (i < nrec) recs[i].calls++;
  else rec_dropped++;
  pthread_mutex_unlock(&rec_lock);
}

int kn__gemm_recorded(kn__gemm_rec *out, int max, int64_t *dropped) {
  pthread_mutex_lock(&rec_lock);
  int n = nrec < max ? nrec : max;
  memcpy(out, recs, (size_t)n * sizeof *out);
  if (dropped) *dropped = rec_dropped;
  pthread_mutex_unlock(&rec_lock);
  return n;
}
