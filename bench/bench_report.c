/*
** bench/bench_report.c: throughput of `kiln report`.
**
** Generates a valid trace of at least 200 MB in a temporary directory (real
** record mix: string table, dynamo_start stacks, chromium events, graphs,
** artifacts, generated code, guards, compilation_metrics; every payload
** with its correct MD5 so the reader really verifies it), runs the built
** kiln binary on it once, times `cat FILE > /dev/null` on the same file in
** the same run, prints
**   BENCH report_parse_mb_s <MB/s>
**   RATIO report_vs_cat <time of kiln report / time of cat>
**   BENCH report_max_rss_mb <peak memory of kiln report>
** and deletes everything it wrote. KN_BENCH_REPORT_MB overrides the size.
*/
#include <ftw.h>
#include <md5.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/strbuf.h"

extern char **environ;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void record(FILE *f, const char *meta, const kn__sb *payload) {
  fputs("V1121 10:00:00.000000 4242 torch/_dynamo/bench.py:1] ", f);
  if (!payload) {
    fprintf(f, "%s\n", meta);
    return;
  }
  char hex[33];
  MD5Data((const unsigned char *)payload->buf, payload->len, hex);
  size_t ml = strlen(meta);
  fprintf(f, "%.*s, \"has_payload\": \"%s\"}\n\t", (int)(ml - 1), meta, hex);
  const char *p = payload->buf, *end = p + payload->len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    fwrite(p, 1, n, f);
    fputs(nl ? "\n\t" : "\n", f);
    p += n + (nl != NULL);
  }
  if (payload->len && payload->buf[payload->len - 1] == '\n') fputc('\n', f);
}

/* Text of about `bytes` bytes, varied by seed so every MD5 differs. */
static void text(kn__sb *sb, unsigned seed, size_t bytes, const char *kind) {
  kn__sb_clear(sb);
  for (unsigned i = 0; sb->len < bytes; i++)
    kn__sb_printf(sb, "    %s_%u_%u = torch.ops.aten.mul.Tensor(arg%u_1, "
                  "%s_%u); # <line %u>\n", kind, seed, i, i % 7, kind,
                  (seed * 31 + i) % 1000, i);
}

static void one_compile(FILE *f, unsigned k, kn__sb *p) {
  char ids[96], meta[2048];
  snprintf(ids, sizeof ids, "\"frame_id\": %u, \"frame_compile_id\": 0, "
           "\"attempt\": 0", k);
  if (k % 50 == 0) {
    snprintf(meta, sizeof meta, "{\"str\": [\"/home/u/model_%u.py\", %u]}",
             k / 50, k / 50 + 1);
    record(f, meta, NULL);
  }
  snprintf(meta, sizeof meta, "{\"dynamo_start\": {\"stack\": [{\"line\": 10, "
           "\"name\": \"<module>\", \"filename\": 0, \"loc\": \"main()\"}, "
           "{\"line\": %u, \"name\": \"forward_%u\", \"filename\": %u}]}, %s}",
           k % 400, k % 13, k / 50 + 1, ids);
  record(f, meta, NULL);
  const char *events[] = {"dynamo", "entire_frame_compile", "backend_compile"};
  for (int e = 0; e < 6; e++) {
    kn__sb_clear(p);
    kn__sb_printf(p, "{\n\"name\": \"%s\",\n\"ts\": %u.5,\n\"args\": {\n"
                  "\"compile_id\": \"%u/0\"\n},\n\"ph\": \"%c\",\n\"cat\": "
                  "\"dynamo_timed\",\n\"tid\": 0,\n\"pid\": 0\n}",
                  events[e % 3], k * 100 + (unsigned)e, k, e < 3 ? 'B' : 'E');
    snprintf(meta, sizeof meta, "{\"chromium_event\": {}, %s}", ids);
    record(f, meta, p);
  }
  text(p, k, 40000, "graph");
  snprintf(meta, sizeof meta, "{\"dynamo_output_graph\": {\"sizes\": {\"l_x_\":"
           " [%u, 64]}}, %s}", k % 97, ids);
  record(f, meta, p);
  const char *arts[] = {"before_pre_grad_graph", "after_pre_grad_graph",
                        "aot_forward_graph_fw_metadata", "fx_graph_runnable",
                        "inductor_post_grad_graph"};
  for (int a = 0; a < 5; a++) {
    text(p, k * 7 + (unsigned)a, 12000, arts[a]);
    snprintf(meta, sizeof meta, "{\"artifact\": {\"name\": \"%s\", "
             "\"encoding\": \"string\"}, %s}", arts[a], ids);
    record(f, meta, p);
  }
  kn__sb_clear(p);
  kn__sb_printf(p, "{\n\"key\": \"f%08x\",\n\"cache_state\": \"miss\",\n"
                "\"components\": [\n\"a\",\n\"b\"\n]\n}", k * 2654435761u);
  snprintf(meta, sizeof meta, "{\"artifact\": {\"name\": \"fx_graph_cache_miss\""
           ", \"encoding\": \"json\"}, %s}", ids);
  record(f, meta, p);
  text(p, k * 13, 40000, "kernel");
  snprintf(meta, sizeof meta, "{\"inductor_output_code\": {\"filename\": "
           "\"/tmp/cache/c%08x.py\"}, %s}", k * 2654435761u, ids);
  record(f, meta, p);
  text(p, k * 17, 10000, "guard");
  snprintf(meta, sizeof meta, "{\"dynamo_cpp_guards_str\": {}, %s}", ids);
  record(f, meta, p);
  snprintf(meta, sizeof meta, "{\"compilation_metrics\": {\"compile_id\": "
           "\"%u/0\", \"co_name\": \"forward_%u\", \"co_filename\": "
           "\"/home/u/model.py\", \"co_firstlineno\": %u, \"cache_size\": 0, "
           "\"guard_count\": 12, \"graph_op_count\": 30, \"graph_node_count\": "
           "34, \"graph_input_count\": 3, \"entire_frame_compile_time_s\": "
           "0.25, \"backend_compile_time_s\": 0.2, \"fail_type\": null, "
           "\"fail_reason\": null, \"restart_reasons\": [], "
           "\"dynamo_config\": \"{\\\"assume_static_by_default\\\": true}\"}, "
           "%s}", k, k % 13, k % 400, ids);
  record(f, meta, NULL);
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

/* Run argv, return wall seconds (negative on failure); *rss_kb = peak. */
static double run(char *const argv[], long *rss_kb) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1 /* O_WRONLY */, 0);
  double t0 = now();
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0) return -1;
  posix_spawn_file_actions_destroy(&fa);
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) return -1;
  double t = now() - t0;
  if (rss_kb) *rss_kb = ru.ru_maxrss;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

int main(void) {
  long target_mb = getenv("KN_BENCH_REPORT_MB") ? atol(getenv("KN_BENCH_REPORT_MB")) : 200;
  /* tmpfs when there is one: the output is ~15k small files, and on a disk
  ** file system their inode allocation, not the report, dominates. */
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR")
                     : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  char dir[256];
  snprintf(dir, sizeof dir, "%s/kiln_bench_report_XXXXXX", base);
  if (!mkdtemp(dir)) return 1;
  char trace[300], out[300];
  snprintf(trace, sizeof trace, "%s/trace.log", dir);
  snprintf(out, sizeof out, "%s/out", dir);
  FILE *f = fopen(trace, "w");
  if (!f) return 1;
  kn__sb p = KN__SB_INIT;
  fputs("V1121 10:00:00.000000 4242 torch/_logging/structured.py:1] {\"str\": "
        "[\"/home/u/train.py\", 0]}\n", f);
  for (unsigned k = 0; ftell(f) < target_mb * 1000000L; k++) one_compile(f, k, &p);
  kn__sb_fini(&p);
  fclose(f);
  double mb = (double)file_size(trace) / 1e6;
  char tool[] = KN_TOOL_PATH, cmd[] = "report", strict[] = "--strict",
       o[] = "-o", cat[] = "/bin/cat";
  char *kiln_argv[] = {tool, cmd, strict, o, out, trace, NULL};
  long rss = 0;
  double t_report = run(kiln_argv, &rss);
  char *cat_argv[] = {cat, trace, NULL};
  double t_cat = run(cat_argv, NULL);
  if (!getenv("KN_BENCH_REPORT_KEEP")) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  if (t_report <= 0 || t_cat <= 0) {
    fprintf(stderr, "bench_report: kiln report or cat failed\n");
    return 1;
  }
  printf("trace %.1f MB: kiln report %.3f s, cat %.3f s\n", mb, t_report, t_cat);
  printf("BENCH report_parse_mb_s %.1f MB/s\n", mb / t_report);
  printf("RATIO report_vs_cat %.2f\n", t_report / t_cat);
  printf("BENCH report_max_rss_mb %.1f MB\n", (double)rss / 1024.0);
  return 0;
}
