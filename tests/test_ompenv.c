/*
** test_ompenv.c: kiln's default OpenMP wait policy (src/ompenv/ompenv.c).
** libgomp itself is asked what it runs with: OMP_DISPLAY_ENV=VERBOSE makes
** it print its settings when it starts, GOMP_SPINCOUNT among them (0 for
** the passive policy, 30000 for kiln's short spin, 300000 for libgomp's
** own default, 30000000000 for active). Checked for a program linking
** libkiln.a (this test program) and for one linking libkiln.so, with the
** variables unset (kiln's choice) and set by the user (kept). The same for
** OpenBLAS's kernels: OPENBLAS_VERBOSE=2 makes OpenBLAS print the core
** whose kernels it took ("Core: SkylakeX"), expected from /proc/cpuinfo's
** vendor and flags.
*/
#include <criterion/criterion.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kiln/kiln.h"

/* What libgomp printed at the start of `exe` run under `env`. */
static char *gomp_settings(const char *env, const char *exe) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd,
           "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=VERBOSE %s %s 2>&1 >/dev/null",
           env, exe);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char *out = calloc(1, 1 << 16);
  size_t n = fread(out, 1, (1 << 16) - 1, p);
  out[n] = 0;
  pclose(p);
  cr_assert(strstr(out, "OPENMP DISPLAY ENVIRONMENT BEGIN"), "no settings from libgomp:\n%s", out);
  return out;
}

static void expect_spincount(const char *env, const char *exe, const char *want) {
  char *out = gomp_settings(env, exe), line[80];
  snprintf(line, sizeof line, "  GOMP_SPINCOUNT = '%s'\n", want);
  cr_expect(strstr(out, line), "%s %s: expected \"%s\" in:\n%s", env, exe, line, out);
  free(out);
}

/* This test program, which links libkiln.a ("--list": print the tests). */
static const char *static_program(void) {
  static char cmd[1100];
  char self[1024];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cr_assert_gt(n, 0);
  self[n] = 0;
  snprintf(cmd, sizeof cmd, "'%s' --list", self);
  return cmd;
}
#define STATIC_PROGRAM static_program()

/* kiln's rule, from literals: a short spin only with 8 CPUs or more of the
** process's own and a 1-minute load under half of them. */
extern bool kn__ompenv_wait_rule(int cpus, double load);
Test(ompenv, the_wait_rule) {
  cr_expect(!kn__ompenv_wait_rule(1, 0.0));
  cr_expect(!kn__ompenv_wait_rule(2, 0.0));
  cr_expect(!kn__ompenv_wait_rule(7, 0.0));
  cr_expect(kn__ompenv_wait_rule(8, 0.0));
  cr_expect(kn__ompenv_wait_rule(8, 3.99));
  cr_expect(!kn__ompenv_wait_rule(8, 4.0));
  cr_expect(kn__ompenv_wait_rule(16, 0.3));
  cr_expect(!kn__ompenv_wait_rule(16, 9.0));
  cr_expect(!kn__ompenv_wait_rule(64, -1.0)); /* no /proc/loadavg: unknown load */
}

/* One CPU of its own (taskset): the rule says passive on any machine. */
Test(ompenv, kiln_chooses_passive_waiting_on_one_cpu) {
  expect_spincount("taskset -c 0", STATIC_PROGRAM, "0");
  expect_spincount("taskset -c 0", KN_OMPENV_PROBE, "0");
}

/* What the rule says for this process's CPUs and the load now. */
static bool spin_here(void) {
  cpu_set_t set;
  cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
  double load = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f && fscanf(f, "%lf", &load) != 1) load = -1;
  if (f) fclose(f);
  cr_log_info("%d CPUs, load %.2f", CPU_COUNT(&set), load);
  return kn__ompenv_wait_rule(CPU_COUNT(&set), load);
}

/* On this machine, what the rule says for its CPUs and load, read before
** and after the programs read it (when the load crossed the rule's edge in
** between, the programs' answer is unknown: skipped, saying so). */
Test(ompenv, kiln_chooses_by_the_rule_when_the_user_did_not) {
  bool spin = spin_here();
  char *a = gomp_settings("", STATIC_PROGRAM), *b = gomp_settings("", KN_OMPENV_PROBE);
  if (spin_here() != spin) {
    free(a), free(b);
    cr_skip_test("the load crossed the rule's edge while the programs started");
  }
  const char *want = spin ? "  GOMP_SPINCOUNT = '30000'\n" : "  GOMP_SPINCOUNT = '0'\n";
  cr_expect(strstr(a, want), "libkiln.a program: expected \"%s\" in:\n%s", want, a);
  cr_expect(strstr(b, want), "libkiln.so program: expected \"%s\" in:\n%s", want, b);
  free(a), free(b);
}

Test(ompenv, the_users_setting_is_kept) {
  expect_spincount("OMP_WAIT_POLICY=active", STATIC_PROGRAM, "30000000000");
  expect_spincount("OMP_WAIT_POLICY=active", KN_OMPENV_PROBE, "30000000000");
  expect_spincount("GOMP_SPINCOUNT=12345", STATIC_PROGRAM, "12345");
  expect_spincount("GOMP_SPINCOUNT=12345", KN_OMPENV_PROBE, "12345");
}

/* In this process too: the choice was made before libgomp started, and ops
** run (kiln's kernels are what pull libgomp into this program). */
extern int kn__ompenv_choice;
Test(ompenv, this_process_made_its_choice) {
  kn_tensor *a = kn_full(KN_SHAPE(1 << 17), kn_float(1), KN_FLOAT32); /* big: a parallel region */
  kn_tensor *b = kn_add(a, a);
  cr_assert_eq(kn_get(b, (int64_t[]){7}), 2.0);
  kn_release(a), kn_release(b);
  cr_assert(kn__ompenv_choice >= 1 && kn__ompenv_choice <= 3, "choice %d", kn__ompenv_choice);
  const char *wp = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
  if (kn__ompenv_choice == 1) cr_assert_str_eq(wp, "passive");
  else if (kn__ompenv_choice == 3) cr_assert_str_eq(spin, "30000");
  else cr_assert(wp || spin);
}

/* Without kiln, libgomp's own default: what kiln's choice replaces. */
Test(ompenv, libgomp_alone_spins) {
  expect_spincount("", KN_GOMP_ONLY_PROBE, "300000");
}

/* ---- OpenBLAS's kernels -------------------------------------------------------- */

/* The core OpenBLAS printed when `exe` started under `env` (OPENBLAS_VERBOSE
** 2), into core. */
static void blas_core_of(const char *env, const char *exe, char *core, size_t size) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 %s %s 2>&1 >/dev/null",
           env, exe);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char line[256];
  core[0] = 0;
  while (fgets(line, sizeof line, p)) {
    if (strncmp(line, "Core: ", 6) || core[0]) continue;
    size_t k = strcspn(line + 6, "\n");
    k = k < size ? k : size - 1;
    memcpy(core, line + 6, k);
    core[k] = 0;
  }
  pclose(p);
  cr_assert(core[0], "%s %s: OpenBLAS printed no core", env, exe);
}

/* Whether /proc/cpuinfo's first processor has every flag of the
** space-separated list, and is GenuineIntel. */
static bool cpuinfo_has(const char *flags) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  cr_assert_not_null(f);
  char line[8192];
  bool intel = false, all = false;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "vendor_id", 9)) intel = strstr(line, "GenuineIntel") != NULL;
    if (strncmp(line, "flags", 5)) continue;
    all = true;
    char want[256];
    snprintf(want, sizeof want, "%s", flags);
    for (char *w = strtok(want, " "); w && all; w = strtok(NULL, " ")) {
      char pat[300];
      snprintf(pat, sizeof pat, " %s ", w);
      line[strcspn(line, "\n")] = ' ';
      all = strstr(line, pat) != NULL;
    }
    break;
  }
  fclose(f);
  return intel && all;
}

/* The core kiln should set (NULL: OpenBLAS's own choice). */
static const char *expected_core(void) {
  if (cpuinfo_has("avx512f avx512cd avx512bw avx512dq avx512vl")) return "SkylakeX";
  if (cpuinfo_has("avx2 fma")) return "Haswell";
  return NULL;
}

Test(ompenv, kiln_picks_openblas_kernels_for_the_cpu) {
  const char *want = expected_core();
  const char *progs[] = {STATIC_PROGRAM, KN_OMPENV_PROBE};
  for (int i = 0; i < 2; i++) {
    char core[64];
    blas_core_of("", progs[i], core, sizeof core);
    if (want) cr_expect_str_eq(core, want, "%s", progs[i]);
    else cr_log_info("not an Intel CPU with AVX2: OpenBLAS chose %s itself", core);
  }
}

Test(ompenv, the_users_openblas_core_is_kept) {
  const char *progs[] = {STATIC_PROGRAM, KN_OMPENV_PROBE};
  for (int i = 0; i < 2; i++) {
    char core[64];
    blas_core_of("OPENBLAS_CORETYPE=PRESCOTT", progs[i], core, sizeof core);
    cr_expect_str_eq(core, "Prescott", "%s", progs[i]);
  }
}

extern const char *kn__ompenv_blas_core;
extern int kn__ompenv_blas_kept;
Test(ompenv, this_process_set_its_openblas_core) {
  const char *env = getenv("OPENBLAS_CORETYPE"), *want = expected_core();
  if (kn__ompenv_blas_kept) {
    cr_assert(env && *env);
    cr_assert_str_eq(kn__ompenv_blas_core, "");
  } else if (want) {
    cr_assert_not_null(env);
    cr_assert_str_eq(env, kn__ompenv_blas_core);
    cr_assert(!strcasecmp(env, want), "set %s, expected %s", env, want);
  } else {
    cr_assert_str_eq(kn__ompenv_blas_core, "");
  }
}
