/*
** tests/test_checkpoint_files.c: how checkpoints reach the disk (kn_save,
** kn_optim_save; core/fileio.c): two processes saving one path at once each
** leave a whole file, a link planted where the temporary file used to be is
** not followed, the file and then its directory are synced, nothing is left
** behind on errors, and a directory path says that it is one.
*/
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "kiln/checkpoint.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "support/files.h"

/* ---- fsync, watched ------------------------------------------------------------------ */
/* The test executable's fsync is the one the (static) library calls: it
** counts the calls on the file being saved (before the rename: it is not at
** the path yet) and on its directory (after the rename: the path holds the
** file synced). */
static const char *watched; /* the path being saved */
static int file_syncs, dir_syncs, out_of_order;
static ino_t synced_file;

int fsync(int fd) {
  struct stat fs, ps;
  if (watched && fstat(fd, &fs) == 0) {
    bool at_path = stat(watched, &ps) == 0;
    if (S_ISDIR(fs.st_mode)) {
      dir_syncs++;
      out_of_order += !at_path || ps.st_ino != synced_file;
    } else {
      file_syncs++;
      synced_file = fs.st_ino;
      out_of_order += at_path && ps.st_ino == fs.st_ino;
    }
  }
  return (int)syscall(SYS_fsync, fd);
}

/* ---- helpers ------------------------------------------------------------------------- */
static char dir_buf[128];

/* A fresh, empty directory of this test. */
static const char *test_dir(const char *name) {
  snprintf(dir_buf, sizeof dir_buf, "/tmp/kn_ckf_%d_%s", (int)getpid(), name);
  cr_assert_eq(mkdir(dir_buf, 0700), 0, "mkdir %s", dir_buf);
  return dir_buf;
}

/* The names in dir, sorted, joined by spaces. */
static void list_dir(const char *dir, char *out, size_t n) {
  struct dirent **ents;
  int k = scandir(dir, &ents, NULL, alphasort);
  cr_assert_geq(k, 0);
  out[0] = '\0';
  for (int i = 0; i < k; i++) {
    if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..")) {
      if (out[0]) strncat(out, " ", n - strlen(out) - 1);
      strncat(out, ents[i]->d_name, n - strlen(out) - 1);
    }
    free(ents[i]);
  }
  free(ents);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

/* A Linear(n, n) whose every parameter element is value. */
static kn_module *filled(int n, float value) {
  kn_module *m = kn_nn_linear(n, n, true, NULL);
  bool prev = kn_no_grad_begin();
  kn_fill_(kn_module_get(m, "weight"), kn_float(value));
  kn_fill_(kn_module_get(m, "bias"), kn_float(value));
  kn_no_grad_end(prev);
  return m;
}

/* Every parameter element of m is one value, returned in *v. */
static bool uniform(kn_module *m, float *v) {
  const char *names[2] = {"weight", "bias"};
  *v = *(const float *)kn_data(kn_module_get(m, "weight"));
  for (int k = 0; k < 2; k++) {
    kn_tensor *t = kn_module_get(m, names[k]);
    const float *d = kn_data(t);
    for (int64_t i = 0; i < kn_numel(t); i++)
      if (d[i] != *v) return false;
  }
  return true;
}

/* ---- concurrent saves ------------------------------------------------------------------ */
#define ROUNDS 60

/* A child: save a model of value's, load the path back, ROUNDS times. The
** exit code says what went wrong first. */
static int saver(const char *path, float value) {
  kn_module *m = filled(96, value), *back = filled(96, 0);
  int rc = 0;
  for (int r = 0; r < ROUNDS && !rc; r++) {
    float v = 0;
    if (kn_save(m, path) != KN_OK) rc = 1;
    else if (kn_load(back, path) != KN_OK) rc = 2;
    else if (!uniform(back, &v) || (v != 1 && v != 2)) rc = 3;
  }
  if (rc) fprintf(stderr, "saver %g: %s\n", value, kn_last_error());
  kn_module_free(m), kn_module_free(back);
  return rc;
}

Test(checkpoint_files, concurrent_saves_each_leave_a_whole_file) {
  const char *dir = test_dir("race");
  char path[200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    cr_assert_geq(kids[k], 0);
    if (kids[k] == 0) _exit(saver(path, (float)(k + 1)));
  }
  static const char *what[] = {"", "a save failed", "a load failed", "a mixed file"};
  for (int k = 0; k < 2; k++) {
    int status = 0;
    cr_assert_eq(waitpid(kids[k], &status, 0), kids[k]);
    cr_assert(WIFEXITED(status), "saver %d died", k + 1);
    int rc = WEXITSTATUS(status);
    cr_assert_eq(rc, 0, "saver %d: %s", k + 1, rc <= 3 ? what[rc] : "?");
  }
  kn_module *back = filled(96, 0);
  float v = 0;
  cr_assert_eq(kn_load(back, path), KN_OK, "%s", kn_last_error());
  cr_assert(uniform(back, &v) && (v == 1 || v == 2), "the final file is mixed");
  char names[512];
  list_dir(dir, names, sizeof names);
  cr_assert_str_eq(names, "model.safetensors"); /* no temporary file left */
  kn_module_free(back);
  remove(path), rmdir(dir);
}

/* ---- links and leftovers ------------------------------------------------------------------ */
Test(checkpoint_files, a_link_at_the_old_temporary_name_is_not_followed) {
  const char *dir = test_dir("link");
  char path[200], tmp[220], victim[200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  snprintf(victim, sizeof victim, "%s/precious.txt", dir);
  write_text(victim, "the victim's own file\n");
  cr_assert_eq(symlink(victim, tmp), 0);
  kn_module *m = filled(4, 3);
  cr_assert_eq(kn_save(m, path), KN_OK, "%s", kn_last_error());
  char *text = kn_test_read_file(victim, NULL);
  cr_assert_str_eq(text, "the victim's own file\n");
  free(text);
  struct stat sb;
  cr_assert_eq(lstat(path, &sb), 0);
  cr_assert(S_ISREG(sb.st_mode), "the checkpoint is not a regular file");
  cr_assert_eq(lstat(tmp, &sb), 0);
  cr_assert(S_ISLNK(sb.st_mode), "the planted link was replaced");
  kn_module *back = filled(4, 0);
  float v = 0;
  cr_assert_eq(kn_load(back, path), KN_OK, "%s", kn_last_error());
  cr_assert(uniform(back, &v) && v == 3);
  kn_module_free(m), kn_module_free(back);
  remove(path), remove(tmp), remove(victim), rmdir(dir);
}

static kn_status half_then_fail(void *ud, FILE *f) {
  (void)ud;
  fputs("partial", f);
  return kn__error(KN_EIO, "the writer failed");
}

static kn_status write_new(void *ud, FILE *f) {
  fputs(ud, f);
  return KN_OK;
}

Test(checkpoint_files, a_failed_save_leaves_the_old_file_and_no_temporary) {
  const char *dir = test_dir("fail");
  char path[200], names[512];
  snprintf(path, sizeof path, "%s/data.bin", dir);
  write_text(path, "old\n");
  cr_assert_eq(kn__file_save(path, half_then_fail, NULL), KN_EIO);
  cr_assert_str_eq(kn_last_error(), "the writer failed");
  char *text = kn_test_read_file(path, NULL);
  cr_assert_str_eq(text, "old\n");
  free(text);
  list_dir(dir, names, sizeof names);
  cr_assert_str_eq(names, "data.bin");
  char new_text[] = "new\n";
  cr_assert_eq(kn__file_save(path, write_new, new_text), KN_OK, "%s", kn_last_error());
  text = kn_test_read_file(path, NULL);
  cr_assert_str_eq(text, "new\n");
  free(text);
  list_dir(dir, names, sizeof names);
  cr_assert_str_eq(names, "data.bin");
  char slash[220];
  snprintf(slash, sizeof slash, "%s/", dir);
  cr_assert_eq(kn__file_save(slash, write_new, new_text), KN_EINVAL);
  char expect[300];
  snprintf(expect, sizeof expect, "'%s' is a directory, expected a file path", slash);
  cr_assert_str_eq(kn_last_error(), expect);
  remove(path), rmdir(dir);
}

/* ---- durability ------------------------------------------------------------------------- */
Test(checkpoint_files, the_file_is_synced_before_the_rename_and_the_directory_after) {
  const char *dir = test_dir("sync");
  char path[200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  kn_module *m = filled(4, 5);
  watched = path;
  cr_assert_eq(kn_save(m, path), KN_OK, "%s", kn_last_error());
  cr_assert_eq(file_syncs, 1);
  cr_assert_eq(dir_syncs, 1);
  cr_assert_eq(out_of_order, 0);
  kn_tensor **ps;
  int n = kn_nn_parameters(m, &ps);
  kn_optimizer *opt = kn_adam(ps, n, NULL);
  cr_assert_eq(kn_optim_save(opt, path), KN_OK, "%s", kn_last_error());
  cr_assert_eq(file_syncs, 2);
  cr_assert_eq(dir_syncs, 2);
  cr_assert_eq(out_of_order, 0);
  watched = NULL;
  kn_optim_free(opt), free(ps);
  kn_module_free(m);
  remove(path), rmdir(dir);
}

/* ---- directories -------------------------------------------------------------------------- */
Test(checkpoint_files, a_directory_path_says_it_is_a_directory) {
  const char *dir = test_dir("isdir");
  kn_module *m = filled(4, 1);
  kn_tensor **ps;
  int n = kn_nn_parameters(m, &ps);
  kn_optimizer *opt = kn_sgd(ps, n, &(kn_optim_options){.lr = 0.1});
  char expect[300];
  snprintf(expect, sizeof expect, "kn_save: '%s' is a directory, expected a file path", dir);
  cr_assert_eq(kn_save(m, dir), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), expect);
  snprintf(expect, sizeof expect, "kn_optim_save: '%s' is a directory, expected a file path",
           dir);
  cr_assert_eq(kn_optim_save(opt, dir), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), expect);
  snprintf(expect, sizeof expect, "'%s' is a directory, expected a safetensors file", dir);
  cr_assert_eq(kn_load(m, dir), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), expect);
  cr_assert_eq(kn_optim_load(opt, dir), KN_EINVAL);
  cr_assert_str_eq(kn_last_error(), expect);
  char names[64];
  list_dir(dir, names, sizeof names);
  cr_assert_str_eq(names, ""); /* nothing was created in it */
  kn_optim_free(opt), free(ps);
  kn_module_free(m);
  rmdir(dir);
}
