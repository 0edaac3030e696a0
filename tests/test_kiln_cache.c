/*
** test_kiln_cache.c: `kiln cache` (tools/cmd_cache.c) on hand-made cache
** directories in the layout of src/inductor/codecache.c: listing with sizes,
** ages and total; --clear removing only kiln's files; a foreign file, a
** symbolic link with a kiln name and a linked-in inductor directory left
** alone; an empty and a missing directory; temporaries of running compiles
** kept by a clear, stale ones removed; a note on a directory kiln would not
** use; a relative KILN_CACHE_DIR; the aotautograd/ and symbols/ directories
** (hand-made, and as a compile in another process writes them).
*/
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "support/report_util.h"

#define KEY_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define KEY_B "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* Run `kiln cache <args>`; stdout in *out (owned). Returns the exit status. */
static int kiln_cache(const char *args, char **out) {
  char path[] = "/tmp/kn_cache_out_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  kn__sb cmd = KN__SB_INIT;
  kn__sb_printf(&cmd, "env -u KILN_CACHE_DIR '%s' cache %s > '%s' 2>&1", KN_TOOL_PATH, args, path);
  int rc = system(kn__sb_cstr(&cmd));
  kn__sb_fini(&cmd);
  *out = ru_read(path, NULL);
  unlink(path);
  cr_assert_not_null(*out);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Write n bytes into dir/name, modified `ago` seconds ago. */
static void put(const char *dir, const char *name, size_t n, long ago) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/%s", dir, name);
  FILE *f = fopen(kn__sb_cstr(&p), "wb");
  cr_assert_not_null(f);
  for (size_t i = 0; i < n; i++) fputc('x', f);
  fclose(f);
  struct timespec ts[2] = {{time(NULL) - ago, 0}, {time(NULL) - ago, 0}};
  cr_assert_eq(utimensat(AT_FDCWD, kn__sb_cstr(&p), ts, 0), 0);
  kn__sb_fini(&p);
}

static bool exists(const char *dir, const char *name) {
  kn__sb p = KN__SB_INIT;
  kn__sb_printf(&p, "%s/%s", dir, name);
  struct stat sb;
  bool ok = lstat(kn__sb_cstr(&p), &sb) == 0;
  kn__sb_fini(&p);
  return ok;
}

/* A cache dir with two entries (A: 3 files, 2 hours old; B: 2 files, 3 days
** old), a foreign file and a symlink with a kiln name pointing outside. */
static char *make_cache(char **outside) {
  char *top = ru_tmpdir();
  kn__sb ind = KN__SB_INIT;
  kn__sb_printf(&ind, "%s/inductor", top);
  cr_assert_eq(mkdir(kn__sb_cstr(&ind), 0755), 0);
  put(kn__sb_cstr(&ind), KEY_A ".c", 1000, 7200);
  put(kn__sb_cstr(&ind), KEY_A ".so", 2000, 7300);
  put(kn__sb_cstr(&ind), KEY_A ".meta", 48, 7200);
  put(kn__sb_cstr(&ind), KEY_B ".c", 100, 3 * 86400);
  put(kn__sb_cstr(&ind), KEY_B ".so.tmp.123.0x1", 24, 3 * 86400);
  put(kn__sb_cstr(&ind), "notes.txt", 5, 0);
  *outside = ru_tmpdir();
  put(*outside, "precious.so", 7, 0);
  kn__sb link = KN__SB_INIT, target = KN__SB_INIT;
  kn__sb_printf(&link, "%s/%s.so", kn__sb_cstr(&ind), KEY_B);
  kn__sb_printf(&target, "%s/precious.so", *outside);
  cr_assert_eq(symlink(kn__sb_cstr(&target), kn__sb_cstr(&link)), 0);
  kn__sb_fini(&link);
  kn__sb_fini(&target);
  kn__sb_fini(&ind);
  return top;
}

Test(kiln_cache, lists_entries_sizes_ages_and_total) {
  char *outside, *top = make_cache(&outside), *out;
  int rc;
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--dir '%s'", top);
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 0, "%s", out);
  /* newest first; A = 1000 + 2000 + 48 bytes, B = 100 + 24 */
  const char *a = strstr(out, "  " KEY_A "     3.0 KiB     2h  .c .so .meta\n");
  const char *b = strstr(out, "  " KEY_B "       124 B     3d  .c .so(partial)\n");
  cr_assert(a && b && a < b, "%s", out);
  cr_assert(strstr(out, "total: 2 entries, 5 files, 3.1 KiB (3172 bytes)\n"), "%s", out);
  cr_assert(strstr(out, "stale temporaries of ended compiles: 1 (removed by --clear or the next "
                        "compile)\n"), "%s", out);
  cr_assert(strstr(out, "not kiln's: 2 (left alone)\n"), "%s", out);
  free(out);
  kn__sb_fini(&args);
  ru_rmtree(top);
  ru_rmtree(outside);
  free(top);
  free(outside);
}

Test(kiln_cache, clear_removes_only_kiln_files_and_follows_no_link) {
  char *outside, *top = make_cache(&outside), *out;
  int rc;
  kn__sb args = KN__SB_INIT, ind = KN__SB_INIT;
  kn__sb_printf(&args, "--clear --dir '%s'", top);
  kn__sb_printf(&ind, "%s/inductor", top);
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "kiln cache: removed 5 files (3.1 KiB) from "), "%s", out);
  cr_assert(strstr(out, "not kiln's: 2 (left alone)\n"), "%s", out);
  free(out);
  cr_assert_not(exists(kn__sb_cstr(&ind), KEY_A ".so"));
  cr_assert_not(exists(kn__sb_cstr(&ind), KEY_B ".so.tmp.123.0x1"));
  cr_assert(exists(kn__sb_cstr(&ind), "notes.txt"));
  cr_assert(exists(kn__sb_cstr(&ind), KEY_B ".so"), "the symlink itself stays");
  cr_assert(exists(outside, "precious.so"), "the link's target stays");
  /* listing again: nothing of kiln's left */
  kn__sb_clear(&args);
  kn__sb_printf(&args, "--dir '%s'", top);
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "total: 0 entries, 0 files, 0 B (0 bytes)\n"), "%s", out);
  free(out);
  kn__sb_fini(&args);
  kn__sb_fini(&ind);
  ru_rmtree(top);
  ru_rmtree(outside);
  free(top);
  free(outside);
}

Test(kiln_cache, linked_inductor_directory_is_not_followed) {
  char *outside, *top = make_cache(&outside), *out;
  int rc;
  char *other = ru_tmpdir();
  put(outside, KEY_A ".c", 10, 0);
  kn__sb link = KN__SB_INIT, args = KN__SB_INIT;
  kn__sb_printf(&link, "%s/inductor", other);
  cr_assert_eq(symlink(outside, kn__sb_cstr(&link)), 0);
  kn__sb_printf(&args, "--clear --dir '%s'", other);
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 1, "%s", out);
  cr_assert(strstr(out, "not followed"), "%s", out);
  cr_assert(exists(outside, KEY_A ".c"));
  free(out);
  kn__sb_fini(&link);
  kn__sb_fini(&args);
  ru_rmtree(top);
  ru_rmtree(outside);
  ru_rmtree(other);
  free(top);
  free(outside);
  free(other);
}

Test(kiln_cache, empty_and_missing_directories) {
  char *top = ru_tmpdir(), *out;
  int rc;
  kn__sb args = KN__SB_INIT, ind = KN__SB_INIT;
  kn__sb_printf(&args, "--dir '%s'", top);
  kn__sb_printf(&ind, "%s/inductor", top);
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "/inductor does not exist: no cache entries\n"), "%s", out);
  free(out);
  cr_assert_eq(mkdir(kn__sb_cstr(&ind), 0755), 0);
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "total: 0 entries, 0 files, 0 B (0 bytes)\n"), "%s", out);
  cr_assert_null(strstr(out, "not kiln's"), "%s", out);
  free(out);
  kn__sb_clear(&args);
  kn__sb_printf(&args, "--clear --dir '%s'", top);
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 0, "%s", out);
  cr_assert(strstr(out, "kiln cache: removed 0 files (0 B) from "), "%s", out);
  free(out);
  kn__sb_fini(&args);
  kn__sb_fini(&ind);
  ru_rmtree(top);
  free(top);
}

Test(kiln_cache, default_directory_and_bad_arguments) {
  char *top = ru_tmpdir(), *out;
  int rc;
  kn__sb args = KN__SB_INIT;
  /* XDG_CACHE_HOME/kiln is the default when KILN_CACHE_DIR is unset */
  kn__sb_printf(&args, "--bogus");
  rc = kiln_cache(kn__sb_cstr(&args), &out);
  cr_assert_eq(rc, 2, "%s", out);
  cr_assert(strstr(out, "unknown argument '--bogus'"), "%s", out);
  free(out);
  cr_assert_eq(setenv("XDG_CACHE_HOME", top, 1), 0);
  rc = kiln_cache("", &out);
  cr_assert_eq(rc, 0, "%s", out);
  kn__sb_clear(&args);
  kn__sb_printf(&args, "kiln cache: %s/kiln/inductor does not exist", top);
  cr_assert(strstr(out, kn__sb_cstr(&args)), "%s", out);
  free(out);
  kn__sb_fini(&args);
  ru_rmtree(top);
  free(top);
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

/* Temporaries of compiles: a build directory and a file of this (running)
** process, a build directory of an ended one. The listing counts them; a
** clear removes only the ended one's. */
Test(kiln_cache, temporaries_of_running_compiles_survive_a_clear) {
  char *top = ru_tmpdir(), *out;
  kn__sb ind = KN__SB_INIT, name = KN__SB_INIT, args = KN__SB_INIT;
  kn__sb_printf(&ind, "%s/inductor", top);
  cr_assert_eq(mkdir(kn__sb_cstr(&ind), 0700), 0);
  unsigned long long ns = my_pid_ns();
  kn__sb_printf(&name, "%s/" KEY_A ".tmp.%d-%llu.AbCdEf", kn__sb_cstr(&ind), (int)getpid(), ns);
  cr_assert_eq(mkdir(kn__sb_cstr(&name), 0700), 0);
  put(kn__sb_cstr(&name), KEY_A ".c", 100, 0);
  kn__sb_clear(&name);
  kn__sb_printf(&name, KEY_A ".meta.tmp.%d-%llu.GhIjKl", (int)getpid(), ns);
  put(kn__sb_cstr(&ind), kn__sb_cstr(&name), 10, 0);
  kn__sb_clear(&name);
  kn__sb_printf(&name, "%s/" KEY_B ".tmp.%d-%llu.MnOpQr", kn__sb_cstr(&ind), (int)dead_pid(), ns);
  cr_assert_eq(mkdir(kn__sb_cstr(&name), 0700), 0);
  put(kn__sb_cstr(&name), KEY_B ".so", 1000, 0);
  kn__sb_printf(&args, "--dir '%s'", top);
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  cr_expect(strstr(out, "  " KEY_B "      1000 B     0s  .tmp/(partial)\n"), "%s", out);
  cr_expect(strstr(out, "total: 2 entries, 3 files, 1.1 KiB (1110 bytes)\n"), "%s", out);
  cr_expect(strstr(out, "stale temporaries of ended compiles: 1 (removed by --clear or the next "
                        "compile)\n"), "%s", out);
  cr_expect(strstr(out, "temporaries of running compiles: 2\n"), "%s", out);
  free(out);
  kn__sb_clear(&args);
  kn__sb_printf(&args, "--clear --dir '%s'", top);
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  cr_expect(strstr(out, "kiln cache: removed 1 file (1000 B) from "), "%s", out);
  cr_expect(strstr(out, "temporaries of running compiles: 2 (left alone)\n"), "%s", out);
  free(out);
  cr_expect_not(exists(kn__sb_cstr(&name), ""), "the ended compile's directory is gone");
  kn__sb_clear(&name);
  kn__sb_printf(&name, KEY_A ".tmp.%d-%llu.AbCdEf", (int)getpid(), ns);
  cr_expect(exists(kn__sb_cstr(&ind), kn__sb_cstr(&name)), "the running compile's directory stays");
  kn__sb_fini(&ind);
  kn__sb_fini(&name);
  kn__sb_fini(&args);
  ru_rmtree(top);
  free(top);
}

/* A directory kiln would not use is still listed, with the reason. */
Test(kiln_cache, untrusted_directory_is_listed_with_a_note) {
  char *top = ru_tmpdir(), *out;
  kn__sb ind = KN__SB_INIT, args = KN__SB_INIT, want = KN__SB_INIT;
  kn__sb_printf(&ind, "%s/inductor", top);
  cr_assert_eq(mkdir(kn__sb_cstr(&ind), 0700), 0);
  cr_assert_eq(chmod(kn__sb_cstr(&ind), 0775), 0);
  put(kn__sb_cstr(&ind), KEY_A ".c", 10, 0);
  kn__sb_printf(&args, "--dir '%s'", top);
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  kn__sb_printf(&want, "note: kiln does not use this cache: cache directory '%s' is writable by "
                "its group or others (mode 0775)\n", kn__sb_cstr(&ind));
  cr_expect(strstr(out, kn__sb_cstr(&want)), "%s", out);
  cr_expect(strstr(out, "total: 1 entry, 1 file, 10 B (10 bytes)\n"), "%s", out);
  free(out);
  kn__sb_fini(&ind);
  kn__sb_fini(&args);
  kn__sb_fini(&want);
  ru_rmtree(top);
  free(top);
}

/* KILN_CACHE_DIR is checked as the library checks it. */
Test(kiln_cache, relative_cache_dir_is_an_error) {
  char path[] = "/tmp/kn_cache_out_XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  kn__sb cmd = KN__SB_INIT;
  kn__sb_printf(&cmd, "KILN_CACHE_DIR=rel/dir '%s' cache > '%s' 2>&1", KN_TOOL_PATH, path);
  int rc = system(kn__sb_cstr(&cmd));
  char *out = ru_read(path, NULL);
  unlink(path);
  cr_assert(out);
  cr_expect(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "%s", out);
  cr_expect(strstr(out, "kiln cache: KILN_CACHE_DIR must be an absolute path, found 'rel/dir' (or "
                        "pass --dir DIR)\n"), "%s", out);
  free(out);
  kn__sb_fini(&cmd);
}

#define BUILD_ID "3f1c0a2b4d5e6f708192a3b4c5d6e7f801234567"

/* aotautograd/ and symbols/ beside inductor/: their keys (64 hex digits; a
** build ID of 2 to 128) and extensions; a stale temporary of a write;
** names that are not kiln's (upper case, no key, another extension). */
Test(kiln_cache, aot_and_symbols_directories_are_listed_and_cleared) {
  char *top = ru_tmpdir(), *out;
  kn__sb aot = KN__SB_INIT, sym = KN__SB_INIT, args = KN__SB_INIT;
  kn__sb_printf(&aot, "%s/aotautograd", top);
  kn__sb_printf(&sym, "%s/symbols", top);
  cr_assert_eq(mkdir(kn__sb_cstr(&aot), 0700), 0);
  cr_assert_eq(mkdir(kn__sb_cstr(&sym), 0700), 0);
  put(kn__sb_cstr(&aot), KEY_A ".entry", 300, 60);
  put(kn__sb_cstr(&aot), KEY_B ".so", 5, 0); /* an inductor extension: not here */
  put(kn__sb_cstr(&sym), BUILD_ID ".sym", 2048, 120);
  put(kn__sb_cstr(&sym), "ab.sym", 10, 3600);
  put(kn__sb_cstr(&sym), BUILD_ID ".sym.tmp.123.0x1", 7, 3 * 86400);
  put(kn__sb_cstr(&sym), "3F1C.sym", 1, 0);
  put(kn__sb_cstr(&sym), ".sym", 1, 0);
  kn__sb_printf(&args, "--dir '%s'", top);
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  const char *ind = strstr(out, "/inductor does not exist: no cache entries\n");
  const char *a = strstr(out, "/aotautograd\n"), *sy = strstr(out, "/symbols\n");
  cr_assert(ind && a && sy && ind < a && a < sy, "%s", out);
  cr_expect(strstr(a, "  " KEY_A "       300 B     1m  .entry\n"), "%s", out);
  cr_expect(strstr(a, "total: 1 entry, 1 file, 300 B (300 bytes)\nnot kiln's: 1"), "%s", out);
  char line[2][160]; /* the list's columns: key (64 wide), size (10 wide), age, files */
  snprintf(line[0], sizeof line[0], "  %-64s  %10s  %5s  %s\n", BUILD_ID, "2.0 KiB", "2m",
           ".sym .sym(partial)");
  snprintf(line[1], sizeof line[1], "  %-64s  %10s  %5s  %s\n", "ab", "10 B", "1h", ".sym");
  cr_expect(strstr(sy, line[0]) && strstr(sy, line[1]), "%s", out);
  cr_expect(strstr(sy, "total: 2 entries, 3 files, 2.0 KiB (2065 bytes)\n"
                       "stale temporaries of ended compiles: 1"), "%s", out);
  cr_expect(strstr(sy, "not kiln's: 2 (left alone)\n"), "%s", out);
  free(out);
  kn__sb_printf(&args, " --clear");
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  cr_expect(strstr(out, "kiln cache: removed 1 file (300 B) from "), "%s", out);
  cr_expect(strstr(out, "kiln cache: removed 3 files (2.0 KiB) from "), "%s", out);
  cr_expect_not(exists(kn__sb_cstr(&sym), BUILD_ID ".sym"));
  cr_expect_not(exists(kn__sb_cstr(&sym), BUILD_ID ".sym.tmp.123.0x1"));
  cr_expect(exists(kn__sb_cstr(&sym), "3F1C.sym") && exists(kn__sb_cstr(&aot), KEY_B ".so"));
  free(out);
  kn__sb_fini(&aot);
  kn__sb_fini(&sym);
  kn__sb_fini(&args);
  ru_rmtree(top);
  free(top);
}

static kn_tensor *cached_fn(kn_tensor *x) { return kn_tanh(kn_add(kn_mul(x, x), x)); }

/* In a new process with KILN_CACHE_DIR=dir: compile cached_fn with inductor
** and call it (its gradient too, so AOT prepares a joint graph); exits 0
** when the result is right. */
static void compile_in_child(const char *dir) {
  setenv("KILN_CACHE_DIR", dir, 1);
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(cached_fn, &o);
  kn_scope_begin();
  kn_tensor *x = kn_full(KN_SHAPE(4), kn_float(0.5), KN_FLOAT32);
  kn_set_requires_grad(x, true);
  kn_tensor *y = f ? kn_call_t(f, x) : NULL;
  bool ok = y && fabs(kn_get(y, (int64_t[]){0}) - tanh(0.75)) < 1e-6 &&
            kn_backward(kn_sum(y), NULL) == KN_OK;
  kn_scope_end();
  kn_compiled_free(f);
  _exit(ok ? 0 : 1);
}

/* What a compile writes is what `kiln cache` lists and clears: one entry in
** each of the three directories at least, none after --clear. */
Test(kiln_cache, lists_and_clears_what_a_compile_wrote) {
  char *top = ru_tmpdir(), *out;
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) compile_in_child(top);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the compile in the child failed");
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--dir '%s'", top);
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  const char *ind = strstr(out, "/inductor\n"), *a = strstr(out, "/aotautograd\n"),
             *sy = strstr(out, "/symbols\n");
  cr_assert(ind && a && sy, "%s", out);
  cr_expect(strstr(ind, " .c .so .meta") && strstr(a, " .entry\n") && strstr(sy, " .sym\n"), "%s",
            out);
  cr_expect_null(strstr(out, "not kiln's"), "%s", out);
  cr_expect_null(strstr(out, "total: 0 entries"), "%s", out);
  free(out);
  kn__sb_printf(&args, " --clear");
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  free(out);
  kn__sb_fini(&args);
  kn__sb_printf(&args, "--dir '%s'", top);
  cr_assert_eq(kiln_cache(kn__sb_cstr(&args), &out), 0, "%s", out);
  const char *z = out;
  int empty = 0;
  while ((z = strstr(z, "total: 0 entries, 0 files, 0 B (0 bytes)\n"))) empty++, z++;
  cr_expect_eq(empty, 3, "%s", out);
  free(out);
  kn__sb_fini(&args);
  ru_rmtree(top);
  free(top);
}
