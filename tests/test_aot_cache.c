/*
** test_aot_cache.c: the AOT cache on disk (KILN_CACHE_DIR set). A compile
** writes DIR/aotautograd/<key>.entry (atomically: no temporary file stays);
** with the memory cache emptied (as in a new process) the same compile hits
** the disk ("found on disk"), skips the joint trace, logs the same forward
** and backward graphs and computes eager's gradients; a corrupted or
** truncated entry is detected, reported as a miss with its reason, rebuilt
** and rewritten; so is one that breaks the trust rules (a FIFO, a symbolic
** link, another user's file); a group-writable directory is not used.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aot/aot.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/trace.h"
#include "support/dynamo_util.h"
#include "support/trace_util.h"
#include "support/log_capture.h"

static char *dir, *cache;
static void setup(void) {
  kn_reset();
  dir = kn_test_trace_start();
  cache = kn_test_tmpdir();
  setenv("KILN_CACHE_DIR", cache, 1);
}
static void teardown(void) {
  kn_trace_disable();
  kn_test_rmdir(dir);
  kn_test_rmdir(cache);
  unsetenv("KILN_CACHE_DIR");
  unsetenv("KILN_AOT_DISK_CACHE");
  unsetenv("XDG_CACHE_HOME");
  kn_reset();
}
TestSuite(aot_cache, .init = setup, .fini = teardown);

static kn_tensor *sin_mul(kn_tensor *x, kn_tensor *y) { return kn_mul(kn_sin(x), y); }

static kn_tensor *leaf(bool rg, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_tensor *t = kn_randn(KN_SHAPE(3, 4), g, KN_FLOAT64);
  kn_generator_free(g);
  if (rg) kn_set_requires_grad(t, true);
  return t;
}

/* Compile sin_mul afresh (a new frame), run forward and backward; returns
** x's gradient's max difference from eager's. */
static double compile_and_run(void) {
  kn_compile_options o = {.backend = "aot_eager", .dynamic = KN_DYNAMIC_FALSE};
  kn_compiled *f = KN_COMPILE(sin_mul, &o);
  kn_scope_begin();
  kn_tensor *x = leaf(true, 1), *x2 = leaf(true, 1), *y = leaf(false, 2);
  kn_tensor *out = kn_call_t(f, x, y);
  cr_assert(out, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(out), NULL), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_backward(kn_sum(sin_mul(x2, y)), NULL), KN_OK, "%s", kn_last_error());
  double d = -1;
  kn_item_double(kn_amax(kn_abs(kn_sub(kn_grad(x), kn_grad(x2))), NULL, 0, false), &d);
  kn_scope_end();
  kn_compiled_free(f);
  return d;
}

/* The one entry file's path under the cache root `root`, checking nothing
** else is in its aotautograd directory. */
static char *entry_file_in(const char *root) {
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/aotautograd", root);
  DIR *d = opendir(sub);
  cr_assert(d, "no %s", sub);
  char *found = NULL;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    n++;
    cr_expect(strlen(e->d_name) == 64 + 6 && strstr(e->d_name, ".entry"), "unexpected file %s",
              e->d_name);
    free(found);
    found = malloc(4600);
    snprintf(found, 4600, "%.4200s/%.256s", sub, e->d_name);
  }
  closedir(d);
  cr_assert_eq(n, 1, "%d files in %s", n, sub);
  return found;
}

static char *entry_file(void) { return entry_file_in(cache); }

static char *json_field(const char *artifact, int n, const char *field) {
  char *p = kn_test_dyn_payload(artifact, n);
  if (!p) return NULL;
  json_t *j = json_loads(p, 0, NULL);
  free(p);
  const char *v = json_string_value(json_object_get(j, field));
  char *r = v ? strdup(v) : NULL;
  json_decref(j);
  return r;
}

Test(aot_cache, disk_entry_serves_a_new_process) {
  cr_expect_eq(compile_and_run(), 0.0);
  char *path = entry_file();
  kn__aot_cache_clear(); /* what a new process starts with */
  cr_expect_eq(compile_and_run(), 0.0);
  free(kn_test_dyn_trace(false, NULL));
  char *r = json_field("aotautograd_cache_hit", 0, "reason");
  cr_expect_str_eq(r, "found on disk");
  char *k1 = json_field("aotautograd_cache_miss", 0, "key"), *k2 = json_field("aotautograd_cache_hit", 0, "key");
  cr_expect(k1 && k2 && !strcmp(k1, k2) && strstr(path, k1), "%s %s %s", k1, k2, path);
  char *joint2 = kn_test_dyn_payload("aot_joint_graph", 1);
  cr_expect_null(joint2, "the hit traced no joint graph");
  free(joint2);
  for (int i = 0; i < 2; i++) {
    const char *ev = i ? "aot_backward_graph" : "aot_forward_graph";
    char *a = kn_test_dyn_payload(ev, 0), *b = kn_test_dyn_payload(ev, 1);
    cr_expect(a && b && !strcmp(a, b), "%s differs after the disk hit:\n%s\n%s", ev, a, b);
    free(a), free(b);
  }
  free(r), free(k1), free(k2), free(path);
}

/* Overwrite bytes at offset `at` from the end (truncate: cut there). */
static void damage(const char *path, long at, bool truncate_it) {
  FILE *f = fopen(path, "r+b");
  cr_assert(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  if (truncate_it) {
    fclose(f);
    cr_assert_eq(truncate(path, len - at), 0);
    return;
  }
  fseek(f, len - at, SEEK_SET);
  int c = fgetc(f);
  fseek(f, len - at, SEEK_SET);
  fputc(c == 'x' ? 'y' : 'x', f);
  fclose(f);
}

static void rebuilt_after(long at, bool truncate_it) {
  cr_expect_eq(compile_and_run(), 0.0);
  char *path = entry_file();
  damage(path, at, truncate_it);
  kn__aot_cache_clear();
  cr_expect_eq(compile_and_run(), 0.0, "a damaged entry is never used");
  kn__aot_cache_clear();
  cr_expect_eq(compile_and_run(), 0.0);
  free(kn_test_dyn_trace(false, NULL));
  char *r1 = json_field("aotautograd_cache_miss", 1, "reason");
  char *r2 = json_field("aotautograd_cache_hit", 0, "reason");
  cr_expect_str_eq(r1, "corrupted cache entry (rebuilt)");
  cr_expect_str_eq(r2, "found on disk", "the rebuilt entry serves the third compile");
  free(r1), free(r2), free(path);
}

Test(aot_cache, corrupted_graph_code_is_rebuilt) { rebuilt_after(200, false); }
Test(aot_cache, corrupted_digest_is_rebuilt) { rebuilt_after(10, false); }
Test(aot_cache, truncated_entry_is_rebuilt) { rebuilt_after(150, true); }

/* The entry replaced (by how: 'f' a FIFO, 'o' another user's file, 'l' a
** symbolic link to a copy) is refused as corrupted, never waited on, and
** rebuilt as a regular file of the user's. */
static void refused_entry(char how) {
  cr_expect_eq(compile_and_run(), 0.0);
  char *path = entry_file(), copy[4700];
  snprintf(copy, sizeof copy, "%s.copy", cache);
  if (how == 'f' || how == 'l') cr_assert_eq(rename(path, copy), 0);
  if (how == 'f') cr_assert_eq(mkfifo(path, 0600), 0);
  if (how == 'l') cr_assert_eq(symlink(copy, path), 0);
  if (how == 'o') cr_assert_eq(chown(path, 65534, 65534), 0);
  kn__aot_cache_clear();
  alarm(120);
  cr_expect_eq(compile_and_run(), 0.0, "a refused entry is never used");
  alarm(0);
  free(kn_test_dyn_trace(false, NULL));
  char *r = json_field("aotautograd_cache_miss", 1, "reason");
  cr_expect_str_eq(r, "corrupted cache entry (rebuilt)");
  struct stat sb;
  cr_expect(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid(),
            "rebuilt as the user's regular file");
  unlink(copy);
  free(r), free(path);
}

Test(aot_cache, fifo_entry_is_refused) { refused_entry('f'); }
Test(aot_cache, symlinked_entry_is_refused) { refused_entry('l'); }
Test(aot_cache, another_users_entry_is_refused) {
  if (geteuid() != 0) cr_skip_test("needs root: another user's file is simulated by chown");
  refused_entry('o');
}

/* A group-writable aotautograd directory is not used: compiles work, never
** from the disk. */
Test(aot_cache, group_writable_directory_is_not_used) {
  cr_expect_eq(compile_and_run(), 0.0);
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/aotautograd", cache);
  cr_assert_eq(chmod(sub, 0770), 0);
  kn__aot_cache_clear();
  cr_expect_eq(compile_and_run(), 0.0);
  free(kn_test_dyn_trace(false, NULL));
  char *r = json_field("aotautograd_cache_miss", 1, "reason");
  cr_expect_str_eq(r, "not in cache", "the entry in the untrusted directory was not read");
  free(r);
}

/* Without KILN_CACHE_DIR the disk cache lives under the default root, as
** the code cache's ($XDG_CACHE_HOME/kiln here): a new process reads it. */
Test(aot_cache, default_root_serves_a_new_process) {
  unsetenv("KILN_CACHE_DIR");
  setenv("XDG_CACHE_HOME", cache, 1);
  cr_expect_eq(compile_and_run(), 0.0);
  char root[4200];
  snprintf(root, sizeof root, "%s/kiln", cache);
  char *path = entry_file_in(root);
  kn__aot_cache_clear();
  cr_expect_eq(compile_and_run(), 0.0);
  free(kn_test_dyn_trace(false, NULL));
  char *r = json_field("aotautograd_cache_hit", 0, "reason");
  cr_expect_str_eq(r, "found on disk");
  free(r), free(path);
}

/* KILN_AOT_DISK_CACHE=0 keeps the AOT cache in memory: nothing is written,
** and a new process traces again. */
Test(aot_cache, switched_off_stays_in_memory) {
  setenv("KILN_AOT_DISK_CACHE", "0", 1);
  cr_expect_eq(compile_and_run(), 0.0);
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/aotautograd", cache);
  cr_expect(access(sub, F_OK) != 0, "%s was made", sub);
  kn__aot_cache_clear();
  cr_expect_eq(compile_and_run(), 0.0);
  free(kn_test_dyn_trace(false, NULL));
  char *r = json_field("aotautograd_cache_miss", 1, "reason");
  cr_expect_str_eq(r, "not in cache");
  free(r);
}

/* Another value is named in a warning; the disk cache stays on. */
Test(aot_cache, malformed_switch_is_named_and_ignored) {
  setenv("KILN_AOT_DISK_CACHE", "no", 1);
  kn_test_records rec = {0};
  kn_test_capture_begin(&rec);
  cr_expect_eq(compile_and_run(), 0.0);
  kn_test_capture_end(&rec);
  bool named = false;
  for (size_t i = 0; i < rec.n; i++)
    named |= strstr(rec.v[i].message, "KILN_AOT_DISK_CACHE: expected 0 or 1, found 'no'") != NULL;
  kn_test_records_free(&rec);
  cr_expect(named, "no warning named the setting");
  free(entry_file());
}
