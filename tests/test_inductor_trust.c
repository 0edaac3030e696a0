/*
** tests/test_inductor_trust.c: the code cache as a trust boundary (the
** rules of docs/INDUCTOR.md, "Trust rules"). Another user's code planted in
** the cache (a world-writable or foreign directory, a group-writable one,
** a foreign entry in a private directory, a symbolic link) never runs: the
** plant is a shared object whose constructor creates a marker file, with a
** .meta that matches it, and the marker must stay absent while the result
** is computed right. A FIFO where a .meta should be is refused, not waited
** on; umask 000 still gives private directories and files; a .meta for
** another CPU is refused; KILN_CACHE_DIR relative, a symbolic link or too
** long is refused with a message; a compiler that never exits is stopped
** at KILN_COMPILE_TIMEOUT; `kiln cache --clear` during a compile does not
** break it; stale temporaries of ended compiles are removed; a noexec
** cache loads through in-memory copies. Another user is simulated by
** chown to uid 65534 (nobody), which needs root: those tests skip with a
** message otherwise. The victim of a plant is a new process (this program
** run again on one test): within one process the dynamic loader would
** answer a path it loaded before with the object it loaded then.
*/
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sha2.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/cachefs.h"
#include "core/cputarget.h"
#include "inductor/inductor.h"
#include "inductor_util.h"
#include "kiln/trace.h"
#include "support/files.h"
#include "support/log_capture.h"
#include "support/trace_util.h"

#define OTHER_UID 65534 /* "nobody": the other user */

static kn_tensor *fn(kn_tensor *a, kn_tensor *b) {
  return kn_add_scalar(kn_mul(kn_sigmoid(a), b), kn_float(0.5));
}

/* sigmoid(a) * b + 0.5 computed by hand in float. */
static bool expect_fn(kn_tensor *got, kn_tensor *a, kn_tensor *b) {
  if (!got || kn_numel(got) != kn_numel(a)) return false;
  const float *g = kn_data(got), *x = kn_data(a), *y = kn_data(b);
  for (int64_t i = 0; i < kn_numel(a); i++) {
    float want = (1.0f / (1.0f + expf(-x[i]))) * y[i] + 0.5f;
    if (fabsf(g[i] - want) > 1e-6f * (1 + fabsf(want))) return false;
  }
  return true;
}

static kn_tensor *dyn_neg(kn_tensor *x) { return kn_neg(x); }

/* Compile fn (a new process as far as inductor knows: its memory cache is
** forgotten first) and check one result. */
static bool run_once(bool suppress) {
  kn__ind_cache_forget_memory();
  kn_compile_options o = {.backend = "inductor", .suppress_errors = suppress};
  kn_compiled *f = KN_COMPILE(fn, &o);
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(33, 17), NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(KN_SHAPE(33, 17), NULL, KN_FLOAT32);
  bool ok = expect_fn(kn_call_t(f, a, b), a, b);
  kn_scope_end();
  kn_compiled_free(f);
  return ok;
}

static void need_root(void) {
  if (geteuid() != 0)
    cr_skip_test("needs root: another user's files are simulated by chown to uid %d",
                 OTHER_UID);
}

static void sh(const char *fmt, const char *a, const char *b) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static bool exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* The key of the one entry in dir/inductor (its .meta's name). */
static void the_key(const char *dir, char key[65]) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "ls %s/inductor | grep 'meta$' | cut -c1-64", dir);
  FILE *p = popen(cmd, "r");
  cr_assert(p && fscanf(p, "%64s", key) == 1, "no .meta in %s", dir);
  pclose(p);
  cr_assert_eq(strlen(key), 64);
}

/* Records of a logger whose name contains logger with text in their message. */
static int count(const kn_test_records *r, const char *logger, const char *text) {
  int n = 0;
  for (size_t i = 0; i < r->n; i++)
    n += strstr(r->v[i].name, logger) && strstr(r->v[i].message, text);
  return n;
}

/* ---- the plant ---------------------------------------------------------------------- */

/* Compile a kiln-looking shared object whose constructor creates marker. */
static void evil_so(const char *so, const char *marker) {
  char src[300];
  snprintf(src, sizeof src, "%s.evil.c", so);
  FILE *f = fopen(src, "w");
  cr_assert(f);
  fprintf(f, "#include <fcntl.h>\n#include <unistd.h>\n"
             "__attribute__((constructor)) static void planted(void) {\n"
             "  int fd = open(\"%s\", O_CREAT | O_WRONLY, 0600);\n  if (fd >= 0) close(fd);\n}\n"
             "int kn_ind_abi(void) { return %d; }\n"
             "int call(const void *rt, void *ctx, const long long *s) { (void)rt; (void)ctx; "
             "(void)s; return 0; }\n", marker, KN__IND_ABI);
  fclose(f);
  sh("cc -shared -fPIC -o '%s' '%s'", so, src);
  unlink(src);
}

/* Rewrite the size and SHA-256 fields (4th and 5th) of the .meta at meta to
** describe so, keeping everything else. */
static void match_meta(const char *meta, const char *so) {
  char line[600], out[700], dig[65], *tok[8];
  FILE *f = fopen(meta, "r");
  cr_assert(f && fgets(line, sizeof line, f), "%s", meta);
  fclose(f);
  int n = 0;
  for (char *s = strtok(line, " \n"); s && n < 8; s = strtok(NULL, " \n")) tok[n++] = s;
  cr_assert_geq(n, 5, "a .meta has at least 5 fields");
  struct stat sb;
  cr_assert(stat(so, &sb) == 0 && SHA256File(so, dig));
  char size[32];
  snprintf(size, sizeof size, "%lld", (long long)sb.st_size);
  tok[3] = size;
  tok[4] = dig;
  size_t used = 0;
  for (int i = 0; i < n; i++)
    used += (size_t)snprintf(out + used, sizeof out - used, "%s%s", i ? " " : "", tok[i]);
  f = fopen(meta, "w");
  cr_assert(f);
  fprintf(f, "%s\n", out);
  fclose(f);
}

/* Replace entry key of dir with a plant (owned by owner, mode mode) and a
** .meta that matches it; marker is what the plant would create. */
static void plant(const char *dir, const char *key, uid_t owner, mode_t mode, char *marker) {
  char so[300], meta[300];
  snprintf(marker, 300, "%s.planted-code-ran", dir);
  snprintf(so, sizeof so, "%s/inductor/%s.so", dir, key);
  snprintf(meta, sizeof meta, "%s/inductor/%s.meta", dir, key);
  unlink(so);
  evil_so(so, marker);
  match_meta(meta, so);
  cr_assert_eq(chown(so, owner, owner), 0);
  cr_assert_eq(chown(meta, owner, owner), 0);
  cr_assert_eq(chmod(so, mode), 0);
  cr_assert_eq(chmod(meta, mode & 0666), 0);
}

/* Run by victim_unharmed in a process of its own (KN_TRUST_VICTIM set): two
** compiles of fn, right each time. */
Test(inductor_trust, victim) {
  if (!getenv("KN_TRUST_VICTIM")) cr_skip_test("run by the plant tests in a process of its own");
  cr_assert(run_once(false), "first compile: %s", kn_last_error());
  cr_assert(run_once(false), "second compile: %s", kn_last_error());
}

/* After a plant: a new process (the victim: this program, whose dynamic
** loader has loaded nothing from the cache yet) computes right twice, the
** planted code never ran, and its log says warning `times` times. */
static void victim_unharmed(const char *dir, const char *marker, const char *warning, int times) {
  char exe[2048], log[300], cmd[3000];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert(k > 0);
  exe[k] = 0;
  snprintf(log, sizeof log, "%s.victim.log", dir);
  /* BXFI_MAP would make the child take itself for one of Criterion's workers */
  snprintf(cmd, sizeof cmd, "env -u BXFI_MAP KN_TRUST_VICTIM=1 KILN_CACHE_DIR='%s' '%s' "
           "--filter='inductor_trust/victim' >'%s' 2>&1", dir, exe, log);
  int rc = system(cmd);
  char *out = kn_test_read_file(log, NULL);
  cr_assert(out);
  cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "the victim computes right: %s", out);
  cr_expect_not(exists(marker), "the planted code ran");
  cr_expect_eq(kn_test_count_of(out, warning), times, "'%s' %d times in: %s", warning, times, out);
  free(out);
  unlink(log);
  unlink(marker);
}

/* A cache with one entry compiled by this user. */
static void warm_cache(char *dir, char key[65]) {
  ind_cache_dir(dir, 64);
  cr_assert(run_once(false), "%s", kn_last_error());
  the_key(dir, key);
}

static void clean(const char *dir) {
  char m[300];
  snprintf(m, sizeof m, "%s.planted-code-ran", dir);
  unlink(m);
  ind_rm(dir);
}

/* A world-writable KILN_CACHE_DIR that another user created first, with a
** plant and a matching .meta: the directory is refused (one warning for two
** compiles) and the code compiled in a private directory. */
Test(inductor_trust, plant_in_foreign_world_writable_dir_never_runs) {
  need_root();
  char dir[64], key[65], marker[300], want[300];
  warm_cache(dir, key);
  plant(dir, key, OTHER_UID, 0777, marker);
  sh("chown -R 65534 '%s' && chmod 0777 '%s'", dir, dir);
  sh("chmod 0777 '%s/inductor'%s", dir, "");
  snprintf(want, sizeof want, "inductor: cache directory '%s' is owned by uid 65534, not by you",
           dir);
  victim_unharmed(dir, marker, want, 1);
  victim_unharmed(dir, marker, "compiling without a disk cache", 1);
  clean(dir);
}

/* Our own directory made writable by its group: another member plants. */
Test(inductor_trust, plant_in_group_writable_dir_never_runs) {
  need_root();
  char dir[64], key[65], marker[300], want[300];
  warm_cache(dir, key);
  plant(dir, key, OTHER_UID, 0755, marker);
  sh("chmod 0770 '%s/inductor'%s", dir, "");
  snprintf(want, sizeof want, "inductor: cache directory '%s/inductor' is writable by its group "
           "or others (mode 0770); compiling without a disk cache", dir);
  victim_unharmed(dir, marker, want, 1);
  clean(dir);
}

/* A foreign entry in our private directory (left by root, or by a former
** owner): the entry is refused and rebuilt; the rebuilt entry is ours. */
Test(inductor_trust, foreign_entry_in_private_dir_is_rebuilt) {
  need_root();
  char dir[64], key[65], marker[300], so[300], want[200];
  warm_cache(dir, key);
  plant(dir, key, OTHER_UID, 0644, marker);
  snprintf(want, sizeof want, "'%s.meta' is owned by uid 65534, not by you", key);
  victim_unharmed(dir, marker, want, 1);
  snprintf(so, sizeof so, "%s/inductor/%s.so", dir, key);
  struct stat sb;
  cr_expect(stat(so, &sb) == 0 && sb.st_uid == geteuid(), "the rebuilt .so is the user's");
  victim_unharmed(dir, marker, want, 0);
  clean(dir);
}

/* A symbolic link where the .so should be, to a plant the user owns (so only
** the link is wrong) with a matching .meta: not followed, rebuilt. Needs no
** second user. */
Test(inductor_trust, symlinked_entry_is_not_followed) {
  char dir[64], key[65], marker[300], so[300], meta[300], evil[300], want[200];
  warm_cache(dir, key);
  snprintf(marker, sizeof marker, "%s.planted-code-ran", dir);
  snprintf(so, sizeof so, "%s/inductor/%s.so", dir, key);
  snprintf(meta, sizeof meta, "%s/inductor/%s.meta", dir, key);
  snprintf(evil, sizeof evil, "%s/planted.so", dir);
  evil_so(evil, marker);
  match_meta(meta, evil);
  cr_assert_eq(unlink(so), 0);
  cr_assert_eq(symlink(evil, so), 0);
  snprintf(want, sizeof want, "'%s.so' is a symbolic link (not followed)", key);
  victim_unharmed(dir, marker, want, 1);
  struct stat sb;
  cr_expect(lstat(so, &sb) == 0 && S_ISREG(sb.st_mode), "the link was replaced by the rebuilt .so");
  clean(dir);
}

/* A FIFO where the .meta should be: refused at once (no one writes to it,
** so a reader would wait forever: the alarm fails the test instead). */
Test(inductor_trust, fifo_meta_is_refused_not_waited_on) {
  char dir[64], key[65], meta[300];
  warm_cache(dir, key);
  snprintf(meta, sizeof meta, "%s/inductor/%s.meta", dir, key);
  cr_assert_eq(unlink(meta), 0);
  cr_assert_eq(mkfifo(meta, 0600), 0);
  alarm(120);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_expect(run_once(false), "%s", kn_last_error());
  kn_test_capture_end(&r);
  alarm(0);
  cr_expect_eq(count(&r, "codecache", "is a FIFO, not a regular file"), 1);
  kn_test_records_free(&r);
  struct stat sb;
  cr_expect(lstat(meta, &sb) == 0 && S_ISREG(sb.st_mode), "the .meta was rebuilt");
  ind_rm(dir);
}

/* ---- modes --------------------------------------------------------------------------- */

static mode_t mode_of(const char *path) {
  struct stat sb;
  cr_assert_eq(lstat(path, &sb), 0, "%s", path);
  return sb.st_mode & 07777;
}

/* Every file in dir: mode & forbidden must be 0. */
static void files_private(const char *dir, mode_t forbidden) {
  char cmd[400], name[400];
  snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 -maxdepth 1", dir);
  FILE *p = popen(cmd, "r");
  int n = 0;
  while (p && fgets(name, sizeof name, p)) {
    name[strcspn(name, "\n")] = 0;
    mode_t m = mode_of(name);
    cr_expect_eq(m & forbidden, 0, "%s has mode %04o", name, (unsigned)m);
    n++;
  }
  if (p) pclose(p);
  cr_expect_geq(n, 3, "files in %s", dir);
}

/* With umask 000 the directories kiln creates are 0700, its files 0600 (the
** .so 0700 at most). */
Test(inductor_trust, umask_000_still_gives_private_files) {
  char top[64], dir[128], sub[160];
  ind_cache_dir(top, sizeof top);
  snprintf(dir, sizeof dir, "%s/made/by/kiln", top);
  setenv("KILN_CACHE_DIR", dir, 1);
  umask(0);
  cr_assert(run_once(false), "%s", kn_last_error());
  const char *made[] = {"/made", "/made/by", "/made/by/kiln", "/made/by/kiln/inductor",
                        "/made/by/kiln/aotautograd"};
  for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
    snprintf(sub, sizeof sub, "%s%s", top, made[i]);
    cr_expect_eq(mode_of(sub), 0700, "%s: %04o", sub, (unsigned)mode_of(sub));
  }
  snprintf(sub, sizeof sub, "%s/inductor", dir);
  files_private(sub, 077);
  char key[65], path[300];
  the_key(dir, key);
  snprintf(path, sizeof path, "%s/%s.meta", sub, key);
  cr_expect_eq(mode_of(path), 0600);
  umask(022);
  ind_rm(top);
}

/* A directory above the cache that others may write without the sticky
** bit could have the cache swapped: refused. With the sticky bit (as /tmp)
** it is used. */
Test(inductor_trust, writable_parent_refused_unless_sticky) {
  char top[64], dir[128];
  ind_cache_dir(top, sizeof top);
  snprintf(dir, sizeof dir, "%s/cache", top);
  setenv("KILN_CACHE_DIR", dir, 1);
  cr_assert_eq(chmod(top, 0777), 0);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_expect(run_once(false), "%s", kn_last_error());
  kn_test_capture_end(&r);
  cr_expect_eq(count(&r, "codecache", "above the cache directory, is writable by its group or "
                                       "others (mode 0777) without the sticky bit"), 1);
  kn_test_records_free(&r);
  cr_assert_eq(chmod(top, 01777), 0);
  char *tdir = kn_test_trace_start();
  cr_expect(run_once(false));
  cr_expect(run_once(false));
  char *t = kn_test_trace_text();
  cr_expect(t && strstr(t, "found on disk"), "a sticky parent is fine");
  free(t);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  ind_rm(top);
}

/* ---- KILN_CACHE_DIR itself ------------------------------------------------------------ */

/* The cache directory value is refused by inductor and the AOT cache, each
** saying message once; the compile works without a disk cache. */
static void refused_with(const char *value, const char *message) {
  setenv("KILN_CACHE_DIR", value, 1);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_expect(run_once(false), "%s", kn_last_error());
  cr_expect(run_once(false), "%s", kn_last_error());
  kn_test_capture_end(&r);
  cr_expect_eq(count(&r, "codecache", message), 1, "%.100s: %s", value, message);
  cr_expect_eq(count(&r, "codecache", "compiling without a disk cache"), 1);
  cr_expect_eq(count(&r, "aot", message), 1, "the AOT cache says so too");
  kn_test_records_free(&r);
}

Test(inductor_trust, relative_cache_dir_is_refused) {
  char top[64];
  ind_cache_dir(top, sizeof top);
  cr_assert_eq(chdir(top), 0);
  refused_with("rel/cache", "KILN_CACHE_DIR must be an absolute path, found 'rel/cache'");
  cr_expect_not(exists("rel"), "nothing is made at a relative path");
  cr_assert_eq(chdir("/"), 0);
  ind_rm(top);
}

Test(inductor_trust, symlinked_cache_dir_is_refused) {
  char top[64], real[128], link[128], msg[400];
  ind_cache_dir(top, sizeof top);
  snprintf(real, sizeof real, "%s/real", top);
  snprintf(link, sizeof link, "%s/link", top);
  cr_assert_eq(mkdir(real, 0700), 0);
  cr_assert_eq(symlink(real, link), 0);
  snprintf(msg, sizeof msg, "'%s' is a symbolic link (to '%s')", link, real);
  refused_with(link, msg);
  cr_expect_not(exists(real) && exists(strcat(real, "/inductor")), "nothing is made behind it");
  ind_rm(top);
}

Test(inductor_trust, overlong_cache_dir_is_refused_not_cut) {
  char top[64], *dir = malloc(4200);
  ind_cache_dir(top, sizeof top);
  size_t n = (size_t)snprintf(dir, 4200, "%s", top);
  while (n < 4088) n += (size_t)snprintf(dir + n, 4200 - n, "/%s", "d123456789");
  dir[4088] = 0;
  refused_with(dir, "is 4088 characters long; kiln accepts at most 3800");
  char cmd[200];
  snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 | grep -q .", top);
  cr_expect_neq(system(cmd), 0, "nothing is made under a cut path");
  free(dir);
  ind_rm(top);
}

/* ---- the CPU target ------------------------------------------------------------------- */

/* A .meta that names another CPU is refused and the entry rebuilt for this
** one; the new .meta names this CPU. */
Test(inductor_trust, meta_for_another_cpu_is_rebuilt) {
  char dir[64], key[65], meta[300], line[600];
  warm_cache(dir, key);
  snprintf(meta, sizeof meta, "%s/inductor/%s.meta", dir, key);
  FILE *f = fopen(meta, "r");
  cr_assert(f && fgets(line, sizeof line, f));
  fclose(f);
  char *last = strrchr(line, ' ');
  cr_assert(last);
  cr_expect(strstr(line, kn__cpu_target()), "the .meta names this CPU: %s", line);
  snprintf(last + 1, sizeof line - (size_t)(last + 1 - line), "x86_64-GenuineIntel-6.60-0.0\n");
  f = fopen(meta, "w");
  fputs(line, f);
  fclose(f);
  char *tdir = kn_test_trace_start();
  cr_expect(run_once(false));
  char *t = kn_test_trace_text();
  cr_expect(t && strstr(t, "compiled for another CPU (target x86_64-GenuineIntel-6.60-0.0"), "%s",
            t ? "" : "no trace");
  free(t);
  f = fopen(meta, "r");
  cr_assert(f && fgets(line, sizeof line, f));
  fclose(f);
  cr_expect(strstr(line, kn__cpu_target()), "rebuilt for this CPU: %s", line);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  ind_rm(dir);
}

/* The target names this CPU as /proc/cpuinfo describes it: vendor, family,
** model, and the feature bits of sse4_2 (leaf 1 ECX bit 20), avx2 (leaf 7
** EBX bit 5) and avx512f (leaf 7 EBX bit 16). */
Test(inductor_trust, cpu_target_names_this_cpu) {
#if !defined(__x86_64__)
  cr_skip_test("the x86-64 target is checked on x86-64 only");
#else
  char *info = kn_test_read_file("/proc/cpuinfo", NULL), vendor[64] = "", want[160];
  cr_assert(info);
  unsigned fam = 0, model = 0, w[9] = {0};
  cr_assert_eq(sscanf(strstr(info, "vendor_id"), "vendor_id : %63s", vendor), 1);
  cr_assert_eq(sscanf(strstr(info, "cpu family"), "cpu family : %u", &fam), 1);
  cr_assert_eq(sscanf(strstr(info, "\nmodel"), "\nmodel : %u", &model), 1);
  snprintf(want, sizeof want, "x86_64-%s-%u.%u-", vendor, fam, model);
  const char *t = kn__cpu_target();
  cr_expect_eq(strncmp(t, want, strlen(want)), 0, "%s starts with %s", t, want);
  cr_assert_eq(sscanf(t + strlen(want), "%x.%x.%x.%x.%x.%x.%x.%x-%x", &w[0], &w[1], &w[2], &w[3],
                      &w[4], &w[5], &w[6], &w[7], &w[8]), 9, "%s", t);
  char *flags = strstr(info, "\nflags");
  cr_assert(flags);
  *strchr(flags + 1, '\n') = 0;
  cr_expect_eq(!!strstr(flags, " sse4_2"), !!(w[0] & (1u << 20)), "sse4_2 in %s", t);
  cr_expect_eq(!!strstr(flags, " avx2"), !!(w[2] & (1u << 5)), "avx2 in %s", t);
  cr_expect_eq(!!strstr(flags, " avx512f"), !!(w[2] & (1u << 16)), "avx512f in %s", t);
  free(info);
#endif
}

/* ---- the compile time limit -------------------------------------------------------------- */

/* A compiler script (mode 0700) with body. */
static void fake_cc(const char *path, const char *body) {
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fprintf(f, "#!/bin/sh\n%s\n", body);
  fclose(f);
  cr_assert_eq(chmod(path, 0700), 0);
}

/* Is pid gone (or a zombie nobody reaped yet)? Waits up to 2 s for it. */
static bool gone(pid_t pid) {
  for (int i = 0; i < 200; i++) {
    char path[64], state = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    bool z = fscanf(f, "%*d (%*[^)]) %c", &state) == 1 && state == 'Z';
    fclose(f);
    if (z) return true;
    usleep(10000);
  }
  return false;
}

/* A compiler that never exits (a shell whose child sleeps, both in its
** process group) is stopped at KILN_COMPILE_TIMEOUT: the compile fails with
** a message saying so; with suppress_errors the eager fallback runs. */
Test(inductor_trust, compiler_that_never_exits_is_stopped) {
  char dir[64], cc[128], pidfile[128], body[300];
  ind_cache_dir(dir, sizeof dir);
  snprintf(cc, sizeof cc, "%s/slow-cc", dir);
  snprintf(pidfile, sizeof pidfile, "%s/sleeper.pid", dir);
  snprintf(body, sizeof body, "sleep 600 &\necho $! > '%s'\nwait", pidfile);
  fake_cc(cc, body);
  setenv("KILN_CC", cc, 1);
  setenv("KILN_COMPILE_TIMEOUT", "0.5", 1);
  alarm(120);
  cr_expect_not(run_once(false));
  cr_expect(strstr(kn_last_error(), "the C compiler '") &&
            strstr(kn_last_error(), "did not finish within 0.5 s (KILN_COMPILE_TIMEOUT)"), "%s",
            kn_last_error());
  cr_expect(strstr(kn_last_error(), "BackendCompilerFailed"), "%s", kn_last_error());
  char *p = kn_test_read_file(pidfile, NULL);
  cr_assert(p, "the fake compiler started its sleeper");
  cr_expect(gone((pid_t)atoi(p)), "the compiler's child %s was killed with it", p);
  free(p);
  cr_expect(run_once(true), "the eager fallback computes right");
  alarm(0);
  unsetenv("KILN_CC");
  unsetenv("KILN_COMPILE_TIMEOUT");
  ind_rm(dir);
}

Test(inductor_trust, bad_compile_timeout_is_reported) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  const char *bad[] = {"soon", "-1", "1e99", "nan", "5s"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char why[300], want[200];
    setenv("KILN_COMPILE_TIMEOUT", bad[i], 1);
    cr_expect_eq(kn__compile_timeout(why, sizeof why), 300.0, "%s", bad[i]);
    snprintf(want, sizeof want, "KILN_COMPILE_TIMEOUT: expected a number of seconds from 0 to "
             "1000000 (0: no limit), found '%s'; using 300", bad[i]);
    cr_expect_str_eq(why, want);
  }
  setenv("KILN_COMPILE_TIMEOUT", "soon", 1);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_expect(run_once(false), "an invalid value means the default: %s", kn_last_error());
  kn_test_capture_end(&r);
  cr_expect_not_null(kn_test_get_record(&r, "found 'soon'; using 300"));
  kn_test_records_free(&r);
  setenv("KILN_COMPILE_TIMEOUT", "0", 1);
  cr_expect_eq(kn__compile_timeout(NULL, 0), 0.0, "0: no limit");
  setenv("KILN_COMPILE_TIMEOUT", "2.5", 1);
  cr_expect_eq(kn__compile_timeout(NULL, 0), 2.5);
  unsetenv("KILN_COMPILE_TIMEOUT");
  cr_expect_eq(kn__compile_timeout(NULL, 0), 300.0);
  ind_rm(dir);
}

/* ---- clearing and temporaries ------------------------------------------------------------ */

/* `kiln cache --clear` runs just before the real compiler starts and again
** just after it ends (a compiler wrapper): the compile succeeds and its
** entry is recorded. */
Test(inductor_trust, clear_during_compile_does_not_break_it) {
  char dir[64], cc[128], body[800];
  ind_cache_dir(dir, sizeof dir);
  snprintf(cc, sizeof cc, "%s/clearing-cc", dir);
  snprintf(body, sizeof body,
           "'%s' cache --clear --dir '%s' >/dev/null || exit 91\n"
           "cc \"$@\" || exit $?\n"
           "'%s' cache --clear --dir '%s' >/dev/null || exit 92", KN_TOOL_PATH, dir, KN_TOOL_PATH,
           dir);
  fake_cc(cc, body);
  setenv("KILN_CC", cc, 1);
  for (int i = 0; i < 2; i++) cr_expect(run_once(false), "run %d: %s", i, kn_last_error());
  cr_expect_eq(ind_count(dir, ".so"), 1, "the entry is recorded");
  cr_expect_eq(ind_count(dir, ".meta"), 1);
  unsetenv("KILN_CC");
  ind_rm(dir);
}

/* Two compiles of one source (each in its own private build directory,
** where the compiler runs) give the same bytes: nothing of the directory's
** name gets in, so when two processes race to record an entry, the .meta of
** one describes the .so of the other too. */
Test(inductor_trust, compiles_in_private_directories_give_the_same_bytes) {
  char dir[64], key[65], so[300], cmd[700];
  warm_cache(dir, key);
  snprintf(so, sizeof so, "%s/inductor/%s.so", dir, key);
  size_t n1 = 0, n2 = 0;
  char *first = kn_test_read_file(so, &n1);
  cr_assert(first);
  snprintf(cmd, sizeof cmd, "rm -f %s/inductor/*.so %s/inductor/*.meta", dir, dir);
  cr_assert_eq(system(cmd), 0);
  cr_assert(run_once(false), "%s", kn_last_error());
  char *second = kn_test_read_file(so, &n2);
  cr_assert(second);
  cr_expect(n1 == n2 && !memcmp(first, second, n1), "the rebuilt .so differs (%zu, %zu bytes)",
            n1, n2);
  free(first);
  free(second);
  ind_rm(dir);
}

static unsigned long long my_pid_ns(void) {
  struct stat sb;
  return stat("/proc/self/ns/pid", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

static pid_t dead_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  cr_assert(p > 0 && waitpid(p, NULL, 0) == p);
  return p;
}

#define TMPKEY "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* dir/inductor/name as a file (or a directory with a file), mtime ago. */
static void tmp_at(const char *dir, const char *name, bool is_dir, long ago) {
  char path[1200];
  snprintf(path, sizeof path, "%s/inductor/%s", dir, name);
  if (is_dir) {
    cr_assert_eq(mkdir(path, 0700), 0, "%s", path);
    char in[1300];
    snprintf(in, sizeof in, "%s/%s.c", path, TMPKEY);
    FILE *f = fopen(in, "w");
    cr_assert(f);
    fclose(f);
  } else {
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fclose(f);
  }
  struct timespec ts[2] = {{time(NULL) - ago, 0}, {time(NULL) - ago, 0}};
  cr_assert_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static bool tmp_exists(const char *dir, const char *name) {
  char path[1200];
  snprintf(path, sizeof path, "%s/inductor/%s", dir, name);
  return exists(path);
}

/* Temporaries of ended compiles (their process gone, or older than the
** stale age) are removed by the next compile; those of running processes
** (this one), and fresh ones whose process cannot be checked, stay. */
Test(inductor_trust, stale_temporaries_are_removed_by_the_next_compile) {
  char dir[64], key[65], n[5][200];
  warm_cache(dir, key);
  unsigned long long ns = my_pid_ns();
  pid_t dead = dead_pid();
  snprintf(n[0], sizeof n[0], TMPKEY ".so.tmp.%d-%llu.AAAAAA", (int)dead, ns);
  snprintf(n[1], sizeof n[1], TMPKEY ".tmp.%d-%llu.BBBBBB", (int)dead, ns);
  snprintf(n[2], sizeof n[2], TMPKEY ".c.tmp.77.0x7ffd1234");
  snprintf(n[3], sizeof n[3], TMPKEY ".meta.tmp.%d-%llu.CCCCCC", (int)getpid(), ns);
  snprintf(n[4], sizeof n[4], TMPKEY ".fxg.tmp.77.0x7ffd1234");
  tmp_at(dir, n[0], false, 0);
  tmp_at(dir, n[1], true, 0);
  tmp_at(dir, n[2], false, 7200); /* older than the stale age (1 hour by default) */
  tmp_at(dir, n[3], false, 0);    /* this process: running */
  tmp_at(dir, n[4], false, 0);    /* no namespace in its name: cannot tell yet */
  kn_compile_options o = {.backend = "inductor"};
  kn__ind_cache_forget_memory();
  kn_compiled *f = KN_COMPILE(dyn_neg, &o);
  kn_scope_begin();
  kn_tensor *x = kn_ones(KN_SHAPE(3), KN_FLOAT32), *y = kn_call_t(f, x);
  cr_assert(y && kn_get(y, (int64_t[]){0}) == -1.0, "a miss compiles: %s", kn_last_error());
  kn_scope_end();
  kn_compiled_free(f);
  for (int i = 0; i < 3; i++) cr_expect_not(tmp_exists(dir, n[i]), "%s removed", n[i]);
  for (int i = 3; i < 5; i++) cr_expect(tmp_exists(dir, n[i]), "%s kept", n[i]);
  ind_rm(dir);
}

/* ---- noexec --------------------------------------------------------------------------- */

/* A tmpfs mounted noexec at a fresh directory (into dir), in a mount
** namespace of this test process only; false when that is not allowed. */
static bool noexec_mount(char *dir, size_t n) {
  snprintf(dir, n, "/tmp/kiln-noexec-XXXXXX");
  if (!mkdtemp(dir)) return false;
  bool ok = geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
            mount("tmpfs", dir, "tmpfs", MS_NOEXEC | MS_NOSUID, "mode=0700,size=64m") == 0;
  if (!ok) rmdir(dir);
  return ok;
}

/* A cache on a noexec mount: compiled code is loaded from in-memory copies
** (one warning), from a fresh compile and from the disk cache. */
Test(inductor_trust, noexec_cache_loads_through_memory_copies) {
  char dir[64], cache[96];
  if (!noexec_mount(dir, sizeof dir))
    cr_skip_test("needs root and mount namespaces to mount a noexec tmpfs");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  setenv("KILN_CACHE_DIR", cache, 1);
  char *tdir = kn_test_trace_start();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  cr_expect(run_once(false), "fresh compile: %s", kn_last_error());
  cr_expect(run_once(false), "from the disk cache: %s", kn_last_error());
  kn_test_capture_end(&r);
  char *t = kn_test_trace_text();
  cr_expect(t && strstr(t, "found on disk"), "the second run hit the disk cache");
  free(t);
  const kn_test_record *w = kn_test_get_record(&r, "mounted noexec");
  cr_expect(w && strstr(w->message, "compiled code is loaded from in-memory copies"), "%s",
            w ? w->message : "no single noexec warning");
  cr_expect_eq(kn_test_count_name(&r, "codecache"), 1, "one warning, nothing else");
  kn_test_records_free(&r);
  kn_trace_disable();
  kn_test_rmdir(tdir);
  umount2(dir, MNT_DETACH);
  rmdir(dir);
}
