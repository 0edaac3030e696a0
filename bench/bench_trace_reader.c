/*
** bench_trace_reader.c: throughput of the strict trace reader on a large
** trace written by kiln's own writer (a realistic mix per compile: str,
** dynamo_start with a stack, describe_*, graphs, generated code, chromium
** events, compilation_metrics), and the cost of a trace call when tracing
** is off. Usage: bench_trace_reader [MB] (default 200).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kiln/trace.h"
#include "trace/events.h"
#include "trace/reader.h"
#include "trace/trace.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void one_compile(int frame, const char *graph, const char *code) {
  kn__compile_ctx saved;
  kn__compile_ctx_enter((kn_compile_id){-1, frame, 0}, &saved);
  kn__trace_chromium_event("dynamo", 'B', -1, NULL, NULL);
  const kn__trace_frame fr[] = {{"/home/u/train.c", 120, "main", "step(model, x);"},
                                {"/home/u/model.c", 40 + frame % 7, "forward", NULL}};
  kn__trace_dynamo_start(fr, 2, NULL);
  for (int i = 0; i < 4; i++) {
    KN_TRACE("describe_storage", json_pack("{sisisi}", "id", i, "describer_id", 0, "size", 4096), NULL);
    KN_TRACE("describe_tensor", json_pack("{sisiss[ii]}", "id", i, "ndim", 2, "dtype",
                                          "float32", "size", 32, 32), NULL);
  }
  KN_TRACE("dynamo_output_graph", json_pack("{s{}}", "sizes"), graph);
  kn__trace_artifact("inductor_output_code", "string", code, SIZE_MAX, NULL);
  KN_TRACE("dynamo_cpp_guards_str", NULL, graph);
  kn__trace_compilation_metrics(json_pack("{ss,ss,si,si,sI}", "co_name", "forward",
                                          "co_filename", "/home/u/model.c", "co_firstlineno",
                                          40, "graph_op_count", 12, "start_time_us",
                                          (json_int_t)1700000000000000), NULL);
  kn__trace_chromium_event("dynamo", 'E', -1, NULL, NULL);
  kn__compile_ctx_leave(&saved);
}

static char *text_block(const char *line, int n) {
  size_t len = strlen(line);
  char *s = malloc(len * (size_t)n + 1), *p = s;
  for (int i = 0; i < n; i++, p += len) memcpy(p, line, len);
  *p = '\0';
  return s;
}

int main(int argc, char **argv) {
  double mb = argc > 1 ? atof(argv[1]) : 200.0;
  char dir[] = "/tmp/kn_bench_trace_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  kn_trace_enable(dir);
  char *graph = text_block("    add_3: \"f32[32, 32]\" = torch.ops.aten.add.Tensor(mul_2, l_y_);\n", 40);
  char *code = text_block("        for (int64_t i0 = 0; i0 < 1024; i0++) { out[i0] = in0[i0] * in1[i0]; }\n", 250);
  char *path = NULL;
  struct stat sb = {0};
  double t0 = now_s();
  for (int frame = 0; sb.st_size < (off_t)(mb * 1e6); frame++) {
    one_compile(frame, graph, code);
    if (frame % 100 == 0) {
      if (!path) path = kn_trace_file_path();
      stat(path, &sb);
    }
  }
  double t_write = now_s() - t0;
  kn_trace_disable();
  double size_mb = (double)sb.st_size / 1e6;
  printf("wrote %.1f MB in %.2f s (%.0f MB/s)\n", size_mb, t_write, size_mb / t_write);

  kn__trace_reader_opts o = {.strict = true};
  t0 = now_s();
  kn__trace_reader *r = kn__trace_reader_open(path, &o);
  const kn__trace_record *rec;
  unsigned long n = 0;
  kn_status st;
  while ((st = kn__trace_reader_next(r, &rec)) == KN_OK && rec) n++;
  double t_read = now_s() - t0;
  printf("read %lu records strictly (status %d, %llu defects) in %.2f s: %.0f MB/s\n", n,
         st, (unsigned long long)kn__trace_reader_defects(r), t_read, size_mb / t_read);
  kn__trace_reader_close(r);

  long calls = 100000000;
  int built = 0;
  t0 = now_s();
  for (long i = 0; i < calls; i++) KN_TRACE("e", (built++, json_object()), NULL);
  double t_off = now_s() - t0;
  printf("disabled KN_TRACE: %.2f ns per call (%d built)\n", t_off / (double)calls * 1e9, built);

  unlink(path);
  rmdir(dir);
  free(path);
  free(graph);
  free(code);
  return st == KN_OK && n > 0 ? 0 : 1;
}
