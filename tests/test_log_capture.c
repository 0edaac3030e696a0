/*
** test_log_capture.c: record counts per artifact and component through the
** capture sink, each test run twice (KILN_LOGS and kn_set_logs), the port of
** the seed's make_logging_test; and the compile-times table of
** kn_dump_compile_times.
**
** fake_compile() stands in for a compile of the seed's example_fn: the
** INFO/DEBUG lines of each subsystem and one record per artifact, except
** the seed's fixed counts (bytecode 2, output_code 2, aot_graphs 3).
*/
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logging/log.h"
#include "support/log_capture.h"

static int records_of(int art) {
  switch (art) {
  case KN_ART_BYTECODE: return 2;
  case KN_ART_OUTPUT_CODE: return 2;
  case KN_ART_AOT_GRAPHS: return 3;
  default: return 1;
  }
}

static bool with_warning; /* also emit one WARNING (component tests) */

static void fake_compile(void) {
  KN_LOG(KN_LOG_DYNAMO_SYMBOLIC_CONVERT, KN_INFO, "Step 1: dynamo start tracing example_fn");
  for (int i = 0; i < 3; i++) KN_LOG(KN_LOG_DYNAMO_SYMBOLIC_CONVERT, KN_DEBUG, "TRACE op %d", i);
  KN_LOG(KN_LOG_SYMBOLIC_SHAPES, KN_INFO, "create_symbol s0 = 1000");
  KN_LOG(KN_LOG_DYNAMO_OUTPUT_GRAPH, KN_INFO, "Step 2: calling compiler function inductor");
  KN_LOG(KN_LOG_AOT, KN_INFO, "aot step 1");
  KN_LOG(KN_LOG_AOT, KN_INFO, "aot step 2");
  KN_LOG(KN_LOG_AOT, KN_DEBUG, "aot detail");
  KN_LOG(KN_LOG_INDUCTOR, KN_INFO, "Step 3: inductor compiling FORWARDS graph 0");
  KN_LOG(KN_LOG_INDUCTOR, KN_INFO, "Step 3: inductor done compiling FORWARDS graph 0");
  KN_LOG(KN_LOG_INDUCTOR_SCHEDULER, KN_DEBUG, "scheduler detail");
  if (with_warning) KN_LOG(KN_LOG_DYNAMO_CONVERT_FRAME, KN_WARNING, "a warning");
  for (int a = 0; a < KN__ARTIFACT_COUNT; a++)
    for (int k = 0; k < records_of(a); k++) KN_LOG_ARTIFACT(a, "artifact record %d", k);
}

typedef struct expect {
  size_t total;
  const char *artifact; /* when set, every record must be of it */
} expect;

static void run_and_count(const kn_test_records *r, void *ud) {
  const expect *e = ud;
  fake_compile();
  cr_assert_eq(r->n, e->total, "got %zu records, want %zu", r->n, e->total);
  if (e->artifact) cr_assert_eq(kn_test_count_artifact(r, e->artifact), e->total);
}

#define RUN(total, art, ...)                                            \
  do {                                                                  \
    kn_log_setting s_[] = {__VA_ARGS__};                                \
    expect e_ = {(total), (art)};                                       \
    kn_test_logging_twice(s_, sizeof s_ / sizeof s_[0], run_and_count, &e_); \
  } while (0)

TestSuite(log_capture, .init = kn_test_log_clean);

static const char *const art_names[] = {
#define ART_NAME(id, name, owner, flags, desc) name,
    KN_ARTIFACT_MAP(ART_NAME)
#undef ART_NAME
};

Test(log_capture, each_artifact_alone_gives_its_records) {
  for (int a = 0; a < KN__ARTIFACT_COUNT; a++) {
    kn_log_setting s[] = {KN_LOG_FLAG(art_names[a], 1)};
    expect e = {(size_t)records_of(a), art_names[a]};
    kn_test_logging_twice(s, 1, run_and_count, &e);
  }
}

Test(log_capture, fixed_counts_of_the_seed) {
  RUN(2, "bytecode", KN_LOG_FLAG("bytecode", 1));
  RUN(2, "output_code", KN_LOG_FLAG("output_code", 1));
  RUN(3, "aot_graphs", KN_LOG_FLAG("aot_graphs", 1));
  RUN(2, NULL, KN_LOG_FLAG("guards", 1), KN_LOG_FLAG("recompiles", 1));
}

Test(log_capture, component_levels) {
  with_warning = true;
  RUN(1, NULL); /* defaults: the one warning */
  /* INFO: step 1, create_symbol, step 2; the warning. */
  RUN(4, NULL, KN_LOG_LEVEL("dynamo", KN_INFO));
  /* DEBUG adds 3 trace lines and the 12 default-on artifacts under dynamo. */
  RUN(18, NULL, KN_LOG_LEVEL("dynamo", KN_DEBUG));
  RUN(3, NULL, KN_LOG_LEVEL("aot", KN_INFO));
  /* aot DEBUG: 3 lines, aot_graphs (3) and aot_joint_graph, the warning. */
  RUN(8, NULL, KN_LOG_LEVEL("aot", KN_DEBUG));
  RUN(3, NULL, KN_LOG_LEVEL("inductor", KN_INFO));
  /* inductor DEBUG: 3 lines, post_grad_graphs and cudagraphs (output_code is off). */
  RUN(6, NULL, KN_LOG_LEVEL("inductor", KN_DEBUG));
  /* -dynamo hides even the warning. */
  RUN(0, NULL, KN_LOG_LEVEL("dynamo", KN_ERROR));
}

static void no_default_off(const kn_test_records *r, void *ud) {
  (void)ud;
  fake_compile();
  cr_assert_eq(kn_test_count_name(r, ".__bytecode"), 0);
  cr_assert_eq(kn_test_count_name(r, ".__output_code"), 0);
  cr_assert_eq(kn_test_count_name(r, ".__graph_code"), 1);
}

Test(log_capture, dynamo_debug_default_off_artifacts) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_DEBUG)};
  kn_test_logging_twice(s, 1, no_default_off, NULL);
}

static void default_logging(const kn_test_records *r, void *ud) {
  (void)ud;
  fake_compile();
  cr_assert_gt(kn_test_count_name(r, ".__graph_breaks"), 0);
  cr_assert_gt(kn_test_count_name(r, ".__recompiles"), 0);
  cr_assert_gt(kn_test_count_name(r, ".symbolic_shapes"), 0);
  cr_assert_gt(kn_test_count_name(r, ".__guards"), 0);
  cr_assert_eq(kn_test_count_name(r, ".__bytecode"), 0);
}

Test(log_capture, default_logging_preset) {
  kn_log_setting s[] = {KN_LOG_DEFAULT_LOGGING};
  cr_assert_eq(sizeof s / sizeof s[0], 9);
  kn_test_logging_twice(s, sizeof s / sizeof s[0], default_logging, NULL);
}

static void custom_format(const kn_test_records *r, void *ud) {
  (void)ud;
  KN_LOG(KN_LOG_DYNAMO, KN_INFO, "test dynamo");
  KN_LOG_TO(kn_test_custom_artifact(), KN_INFO, "custom format");
  cr_assert_eq(r->n, 2);
  cr_assert(strchr(r->v[0].formatted, 'I'));
  cr_assert_str_eq(r->v[1].formatted, "custom format");
  const kn_test_record *one = kn_test_get_record(r, "custom");
  cr_assert_not_null(one);
  cr_assert_str_eq(one->artifact, "custom_format_test_artifact");
}

Test(log_capture, custom_format) {
  kn_log_setting s[] = {KN_LOG_LEVEL("dynamo", KN_INFO)};
  kn_test_logging_twice(s, 1, custom_format, NULL);
}

/* ---- compile times ----------------------------------------------------------- */

static void record_phases(void) {
  kn__compile_times_reset();
  kn__compile_time_record("_compile.compile_inner", 0.5);
  kn__compile_time_record("OutputGraph.call_user_compiler", 0.25);
  kn__compile_time_record("compile_fx.<locals>.fw_compiler_base", 1.0);
  kn__compile_time_record("compile_fx_inner", 0.125);
  kn__compile_time_record("compile_fx_inner", 0.0625);
}

Test(compile_times, table_per_call_and_aggregate) {
  record_phases();
  char *t = kn_compile_times(false);
  cr_assert_str_eq(t,
                   "kiln compilation metrics:\n"
                   "Function                              Runtimes (s)\n"
                   "------------------------------------  --------------\n"
                   "_compile.compile_inner                0.5000\n"
                   "OutputGraph.call_user_compiler        0.2500\n"
                   "compile_fx.<locals>.fw_compiler_base  1.0000\n"
                   "compile_fx_inner                      0.1250, 0.0625");
  free(t);
  t = kn_compile_times(true);
  cr_assert_str_eq(t,
                   "kiln compilation metrics:\n"
                   "Function                              Runtimes (s)\n"
                   "------------------------------------  --------------\n"
                   "_compile.compile_inner                0.5000\n"
                   "OutputGraph.call_user_compiler        0.2500\n"
                   "compile_fx.<locals>.fw_compiler_base  1.0000\n"
                   "compile_fx_inner                      0.1875");
  free(t);
  kn__compile_times_reset();
}

Test(compile_times, narrow_and_empty_tables) {
  kn__compile_times_reset();
  char *t = kn_compile_times(true);
  cr_assert_str_eq(t, "kiln compilation metrics:\n"
                      "Function    Runtimes (s)\n"
                      "----------  --------------");
  free(t);
  kn__compile_time_record("a", 12.5);
  double t0 = kn__compile_time_begin();
  kn__compile_time_end("b", t0);
  t = kn_compile_times(true);
  cr_assert_str_eq(t, "kiln compilation metrics:\n"
                      "Function    Runtimes (s)\n"
                      "----------  --------------\n"
                      "a           12.5000\n"
                      "b           0.0000");
  free(t);
  kn__compile_times_reset();
}

Test(compile_times, dump_is_one_info_record_on_dynamo_utils, .init = kn_test_log_clean) {
  record_phases();
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  kn_dump_compile_times(); /* not enabled: nothing */
  cr_assert_eq(r.n, 0);
  kn_test_capture_end(&r);
  setenv("KILN_LOGS", "kiln.dynamo.utils", 1);
  kn__log_reset_for_tests();
  kn_test_capture_begin(&r);
  kn_dump_compile_times();
  kn_test_capture_end(&r);
  cr_assert_eq(r.n, 1);
  cr_assert_str_eq(r.v[0].name, "kiln.dynamo.utils");
  cr_assert_eq(r.v[0].level, KN_INFO);
  cr_assert(!strncmp(r.v[0].message, "kiln compilation metrics:\nFunction", 34));
  cr_assert(strstr(r.v[0].message, "\ncompile_fx_inner                      0.1875"));
  kn_test_records_free(&r);
  kn__compile_times_reset();
  kn_test_log_clean();
}

/* ---- cost model and threads -------------------------------------------------- */

static int evaluated;
static int side_effect(void) { return ++evaluated; }

Test(log_capture, disabled_calls_evaluate_nothing) {
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  evaluated = 0;
  KN_LOG(KN_LOG_DYNAMO, KN_DEBUG, "%d", side_effect());
  KN_LOG_ARTIFACT(KN_ART_OUTPUT_CODE, "%d", side_effect());
  KN_LOG_TO(KN_LOG_INDUCTOR, KN_INFO, "%d", side_effect());
  cr_assert_eq(evaluated, 0);
  cr_assert_eq(r.n, 0);
  KN_LOG(KN_LOG_DYNAMO, KN_WARNING, "%d", side_effect());
  cr_assert_eq(evaluated, 1);
  cr_assert_eq(r.n, 1);
  cr_assert_str_eq(r.v[0].message, "1");
  kn_test_capture_end(&r);
  kn_test_records_free(&r);
}

#define PER_THREAD 500

static void *log_many(void *arg) {
  for (int i = 0; i < PER_THREAD; i++) KN_LOG(KN_LOG_AOT, KN_INFO, "thread %d record %d", *(int *)arg, i);
  return NULL;
}

static void *flip_settings(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) kn_set_logs_str(i % 2 ? "aot,guards" : "aot");
  return NULL;
}

Test(log_capture, threads_log_whole_records) {
  cr_assert_eq(kn_set_logs_str("aot"), KN_OK);
  kn_test_records r = {0};
  kn_test_capture_begin(&r);
  pthread_t t[3];
  int ids[2] = {0, 1};
  pthread_create(&t[0], NULL, log_many, &ids[0]);
  pthread_create(&t[1], NULL, log_many, &ids[1]);
  pthread_create(&t[2], NULL, flip_settings, NULL);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  kn_test_capture_end(&r);
  cr_assert_eq(r.n, 2 * PER_THREAD);
  int next[2] = {0, 0};
  for (size_t i = 0; i < r.n; i++) {
    int th, k;
    cr_assert_eq(sscanf(r.v[i].message, "thread %d record %d", &th, &k), 2);
    cr_assert_eq(k, next[th]++, "records of one thread stay in order");
  }
  kn_test_records_free(&r);
}
