/*
** test_report_limits.c: `kiln report` against traces built to exhaust it:
** an OUT that is a symlink, a stack of 500k frames, many distinct stacks,
** a huge interned-string id, many compile ids, and more rank files than
** open descriptors. Each case crashed, hung, deleted files or took hundreds
** of MB before the limits in docs/REPORT.md ("Limits") were added.
*/
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "report/trie.h"
#include "support/report_util.h"

#define FIX KN_FIXTURE_DIR "/pytorch_traces/"
#define HDR "V0822 14:00:48.899000 1 a.py:1] "


Test(report_limits, out_symlink_is_refused_and_its_target_kept) {
  char *tmp = ru_tmpdir();
  char *target = ru_path2(tmp, "target"), *link = ru_path2(tmp, "out");
  cr_assert_eq(mkdir(target, 0755), 0);
  char *keep = ru_path2(target, "keep.txt");
  fclose(fopen(keep, "w"));
  cr_assert_eq(symlink("target", link), 0);
  const char *forms[] = {"%s", "%s/"};
  for (int i = 0; i < 2; i++) {
    kn__sb out = KN__SB_INIT;
    kn__sb_printf(&out, forms[i], link);
    char *err = NULL;
    int rc = ru_kilnf(&err, "--overwrite -o '%s' '" FIX "simple.log'",
                  kn__sb_cstr(&out));
    cr_assert_eq(rc, 1, "OUT %s: rc %d", kn__sb_cstr(&out), rc);
    cr_assert_not_null(strstr(err, "is a symbolic link"), "%s", err);
    free(err);
    kn__sb_fini(&out);
  }
  cr_assert_eq(access(keep, F_OK), 0, "the link's target was emptied");
  char *listing = ru_list(target);
  cr_assert_str_eq(listing, "keep.txt\n");
  struct stat st;
  cr_assert_eq(lstat(link, &st), 0);
  cr_assert(S_ISLNK(st.st_mode), "the link itself is left alone");
  free(listing), free(keep), free(target), free(link);
  ru_rmtree(tmp);
  free(tmp);
}

/* One dynamo_start whose stack has n frames a.py:0 ... a.py:n-1. */
static void deep_trace(const char *path, size_t n) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(HDR "{\"str\": [\"a.py\", 0]}\n" HDR "{\"dynamo_start\": {\"stack\": [",
        f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s{\"line\": %zu, \"name\": \"f\", \"filename\": 0}",
            i ? ", " : "", i);
  fputs("]}, \"frame_id\": 0, \"frame_compile_id\": 0, \"attempt\": 0}\n", f);
  fclose(f);
}

Test(report_limits, stack_of_500k_frames, .timeout = 300) {
  char *tmp = ru_tmpdir();
  char *trace = ru_path2(tmp, "t.log"), *out = ru_path2(tmp, "r");
  deep_trace(trace, 500000);
  char *err = NULL;
  int rc = ru_kilnf(&err, "--strict -o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 0, "rc %d: %s", rc, err);
  free(err);
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(idx);
  /* The whole chain is listed, outermost frame first, innermost last. */
  char *first = strstr(idx, "a.py:0 in f"), *last = strstr(idx, "a.py:499999 in f");
  cr_assert(first && last && first < last);
  /* So deep a trie starts collapsed. */
  cr_assert_not_null(strstr(idx, "<details><summary>Stack trie: 1 stack(s), "
                                 "500000 frame(s), deepest 500000 (collapsed"));
  free(idx), free(ip);
  ru_rmtree(tmp);
  free(trace), free(out), free(tmp);
}

static void frame_html(void *ud, FILE *f, const rp_frame *fr) {
  (void)ud;
  fprintf(f, "%lld", (long long)fr->line);
}

static void term_html(void *ud, FILE *f, size_t c) {
  (void)ud;
  fprintf(f, "[%zu]", c);
}

/* 200k distinct one-frame stacks: linear child lookup needed ~2e10 frame
** comparisons (minutes); hashed lookup needs well under a second. */
Test(report_limits, many_distinct_stacks_insert_in_linear_time,
     .timeout = 20) {
  rp_trie t;
  rp_trie_init(&t);
  enum { N = 200000 };
  for (size_t i = 0; i < N; i++) {
    char js[96];
    snprintf(js, sizeof js, "[{\"filename\": 0, \"line\": %zu, \"name\": \"f\"}]",
             i);
    json_t *st = json_loads(js, 0, NULL);
    cr_assert(rp_trie_insert(&t, st, 1, i, NULL));
    json_decref(st);
  }
  /* Re-inserting an existing stack finds its node again. */
  json_t *again = json_loads("[{\"filename\": 0, \"line\": 7, \"name\": \"f\"}]",
                             0, NULL);
  cr_assert(rp_trie_insert(&t, again, 1, N, NULL));
  json_decref(again);
  cr_assert_eq(t.root.nkids, N);
  cr_assert_eq(t.root.kids[7]->nterms, 2);
  cr_assert_eq(t.root.kids[7]->terms[1], N);
  cr_assert_eq(t.maxdepth, 1);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rp_trie_render rd = {frame_html, term_html, NULL};
  rp_trie_write(&t, f, &rd);
  fclose(f);
  cr_assert_not_null(strstr(buf, "<li class=\"branch\">[7] [200000] 7</li>"));
  free(buf);
  rp_trie_fini(&t);
}

Test(report_limits, huge_string_id_is_a_defect_not_a_huge_table) {
  char *tmp = ru_tmpdir();
  char *trace = ru_path2(tmp, "t.log"), *out = ru_path2(tmp, "r");
  FILE *f = fopen(trace, "w");
  fputs(HDR "{\"str\": [\"x\", 16777216]}\n", f);
  fclose(f);
  char *err = NULL;
  int rc = ru_kilnf(&err, "-o '%s' '%s'", out, trace);
  cr_assert_eq(rc, 0, "%s", err);
  cr_assert_not_null(strstr(err, "1 defects"), "%s", err);
  free(err);
  char *rp = ru_path2(out, "raw.jsonl");
  size_t n = 0;
  char *raw = ru_read(rp, &n);
  cr_assert_str_eq(raw, "{\"string_table\":[]}\n");
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(strstr(idx, "str record id 16777216 is out of range"));
  free(idx), free(ip), free(raw), free(rp);
  ru_rmtree(tmp);
  free(trace), free(out), free(tmp);
}

/* Run kiln in a child with a descriptor limit; returns its exit status and
** its peak RSS in KB. */
static int kiln_limited(const char *args, rlim_t nofile, long *rss_kb) {
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    struct rlimit rl = {nofile, nofile};
    if (nofile) setrlimit(RLIMIT_NOFILE, &rl);
    kn__sb cmd = KN__SB_INIT;
    kn__sb_printf(&cmd, "exec '%s' report %s > /dev/null 2>&1", KN_TOOL_PATH,
                  args);
    execl("/bin/sh", "sh", "-c", kn__sb_cstr(&cmd), (char *)NULL);
    _exit(127);
  }
  int status;
  struct rusage ru;
  cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
  *rss_kb = ru.ru_maxrss;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(report_limits, many_compile_ids_take_bounded_memory, .timeout = 300) {
  char *tmp = ru_tmpdir();
  char *trace = ru_path2(tmp, "t.log"), *out = ru_path2(tmp, "r");
  FILE *f = fopen(trace, "w");
  enum { N = 200000 };
  for (int i = 0; i < N; i++)
    fprintf(f, HDR "{\"foo\": {}, \"frame_id\": %d, \"frame_compile_id\": 0, "
            "\"attempt\": 0}\n", i);
  fclose(f);
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--strict -o '%s' '%s'", out, trace);
  long rss = 0;
  cr_assert_eq(kiln_limited(kn__sb_cstr(&args), 0, &rss), 0);
  kn__sb_fini(&args);
  char *cp = ru_path2(out, "compile_directory.json");
  json_t *dir = json_load_file(cp, 0, NULL);
  cr_assert_eq(json_object_size(dir), N);
  cr_assert(json_is_array(json_object_get(json_object_get(dir, "[199999/0]"),
                                          "artifacts")));
  json_decref(dir);
#if !defined(__SANITIZE_ADDRESS__)
  /* About 1 KB per compile id before (214 MB here); now a few hundred
  ** bytes. (Sanitizer builds keep freed memory in quarantine.) */
  cr_assert_lt(rss, 150 * 1024, "peak RSS %ld KB for %d compile ids", rss, N);
#endif
  free(cp);
  ru_rmtree(tmp);
  free(trace), free(out), free(tmp);
}

Test(report_limits, more_ranks_than_open_files, .timeout = 300) {
  char *tmp = ru_tmpdir();
  char *in = ru_path2(tmp, "in"), *out = ru_path2(tmp, "r");
  cr_assert_eq(mkdir(in, 0755), 0);
  char *src = ru_read(FIX "comp_metrics.log", NULL);
  cr_assert_not_null(src);
  enum { RANKS = 120 };
  for (int i = 0; i < RANKS; i++) {
    kn__sb p = KN__SB_INIT;
    kn__sb_printf(&p, "%s/dedicated_log_torch_trace_rank_%d_x.log", in, i);
    FILE *f = fopen(kn__sb_cstr(&p), "w");
    fputs(src, f);
    fclose(f);
    kn__sb_fini(&p);
  }
  kn__sb args = KN__SB_INIT;
  kn__sb_printf(&args, "--all-ranks-html -o '%s' '%s'", out, in);
  long rss = 0;
  cr_assert_eq(kiln_limited(kn__sb_cstr(&args), 48, &rss), 0,
               "%d ranks with 48 descriptors", RANKS);
  kn__sb_fini(&args);
  char *ip = ru_path2(out, "index.html");
  char *idx = ru_read(ip, NULL);
  cr_assert_not_null(strstr(idx, "<a href=\"rank_119/index.html\">rank 119</a>"));
  cr_assert_not_null(strstr(idx, "All ranks compiled the same compile ids"));
  char *r119 = ru_path2(out, "rank_119/compile_directory.json");
  cr_assert_eq(access(r119, F_OK), 0);
  free(r119), free(idx), free(ip), free(src), free(in), free(out);
  ru_rmtree(tmp);
  free(tmp);
}
