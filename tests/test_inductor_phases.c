/*
** tests/test_inductor_phases.c: inductor's compile-phase times. A cold
** compile of the seed's example_fn, traced and read back with the strict
** reader, has chromium B/E pairs compile_fx_inner > inductor_lowering,
** inductor_scheduling, inductor_codegen, inductor_cc, inductor_load (in that
** order, nested, inside backend_compile); its compilation_metrics carry
** inductor_cumulative_compile_time_us and
** inductor_code_gen_cumulative_compile_time_us consistent with the events'
** timestamps, and the legacy *_time_s fields derived from them;
** kn_compile_times lists every phase. The artifacts come in the seeds'
** order: fx_graph_runnable, inductor_output_code, fx_graph_cache_miss.
*/
#include "inductor_util.h"
#include "kiln/log.h"
#include "kiln/trace.h"
#include "logging/log.h"
#include "support/trace_util.h"
#include "trace/reader.h"

static kn_tensor *example_fn(kn_tensor *a) {
  kn_tensor *out = kn_mul(a, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32));
  return kn_add(out, kn_ones(KN_SHAPE(10, 10), KN_FLOAT32));
}

#define MAXEV 64
typedef struct ev { char name[64]; char ph; double ts; } ev;

/* The inductor records in trace order, space-separated. */
static char order[512];

/* Chromium events and the (last) compilation_metrics of the trace; fills
** order. */
static int read_trace(ev *evs, json_t **metrics) {
  order[0] = 0;
  char *path = kn_trace_file_path();
  cr_assert_not_null(path);
  kn__trace_reader_opts o = {.strict = true};
  kn__trace_reader *r = kn__trace_reader_open(path, &o);
  cr_assert_not_null(r, "%s", kn_last_error());
  int n = 0;
  const kn__trace_record *rec;
  kn_status st;
  while ((st = kn__trace_reader_next(r, &rec)) == KN_OK && rec) {
    if (!strcmp(rec->event, "compilation_metrics")) {
      json_decref(*metrics);
      *metrics = json_deep_copy(rec->value);
    }
    const char *art = !strcmp(rec->event, "artifact")
                          ? json_string_value(json_object_get(rec->value, "name")) : NULL;
    const char *name = art ? art : rec->event;
    if (strstr(name, "fx_graph") || !strcmp(name, "inductor_output_code"))
      snprintf(order + strlen(order), sizeof order - strlen(order), "%s ", name);
    if (strcmp(rec->event, "chromium_event") || n == MAXEV) continue;
    json_t *p = json_loads(rec->payload, 0, NULL);
    cr_assert_not_null(p, "chromium payload is JSON");
    snprintf(evs[n].name, sizeof evs[n].name, "%s", json_string_value(json_object_get(p, "name")));
    evs[n].ph = json_string_value(json_object_get(p, "ph"))[0];
    evs[n].ts = json_number_value(json_object_get(p, "ts"));
    n++;
    json_decref(p);
  }
  cr_assert_eq(st, KN_OK, "strict read: %s", kn_last_error());
  kn__trace_reader_close(r);
  free(path);
  return n;
}

static int find(const ev *evs, int n, const char *name, char ph) {
  for (int i = 0; i < n; i++)
    if (!strcmp(evs[i].name, name) && evs[i].ph == ph) return i;
  return -1;
}

static int64_t metric(json_t *m, const char *k) {
  json_t *v = json_object_get(m, k);
  cr_assert(json_is_integer(v), "metric %s is an integer", k);
  return json_integer_value(v);
}

Test(inductor_phases, chromium_events_metrics_and_compile_times) {
  char dir[64];
  ind_cache_dir(dir, sizeof dir);
  kn__compile_times_reset();
  char *tdir = kn_test_trace_start();
  kn_compile_options o = {.backend = "inductor"};
  kn_compiled *f = KN_COMPILE(example_fn, &o);
  kn_scope_begin();
  cr_assert_not_null(kn_call_t(f, kn_randn(KN_SHAPE(10, 10), NULL, KN_FLOAT32)));
  kn_scope_end();
  ev evs[MAXEV];
  json_t *m = NULL;
  int n = read_trace(evs, &m);
  kn_trace_disable();
  /* the seeds' order (trace_format.md 3.8) */
  cr_expect_str_eq(order, "fx_graph_runnable inductor_output_code fx_graph_cache_miss ");
  static const char *const inner[] = {"inductor_lowering", "inductor_scheduling",
                                      "inductor_codegen", "inductor_cc", "inductor_load"};
  int ob = find(evs, n, "compile_fx_inner", 'B'), oe = find(evs, n, "compile_fx_inner", 'E');
  int bb = find(evs, n, "backend_compile", 'B'), be = find(evs, n, "backend_compile", 'E');
  cr_assert(bb >= 0 && bb < ob && ob < oe && oe < be, "compile_fx_inner inside backend_compile");
  int prev = ob;
  double inner_us = 0, cg_us = 0;
  for (int k = 0; k < 5; k++) {
    int b = find(evs, n, inner[k], 'B'), e = find(evs, n, inner[k], 'E');
    cr_assert(prev < b && b + 1 == e && e < oe, "%s: B then E, after the previous phase", inner[k]);
    inner_us += evs[e].ts - evs[b].ts;
    if (k >= 2) cg_us += evs[e].ts - evs[b].ts;
    prev = e;
  }
  double outer_us = evs[oe].ts - evs[ob].ts;
  cr_assert_not_null(m);
  int64_t tot = metric(m, "inductor_cumulative_compile_time_us");
  int64_t cg = metric(m, "inductor_code_gen_cumulative_compile_time_us");
  /* the metrics time the same spans as the events (monotonic vs wall clock,
  ** and the events' own writing, differ by far less than 5 ms) */
  cr_expect(tot > 0 && tot <= outer_us + 5000 && tot + 5000 >= inner_us,
            "inductor total %lld us, events: outer %.0f inner %.0f", (long long)tot, outer_us,
            inner_us);
  cr_expect(cg > 0 && cg <= tot && fabs((double)cg - cg_us) <= 5000, "code gen %lld us, events %.0f",
            (long long)cg, cg_us);
  cr_expect(metric(m, "dynamo_cumulative_compile_time_us") >= tot);
  cr_expect_float_eq(json_real_value(json_object_get(m, "inductor_compile_time_s")), (double)tot / 1e6, 1e-9);
  cr_expect_float_eq(json_real_value(json_object_get(m, "code_gen_time_s")), (double)cg / 1e6, 1e-9);
  json_decref(m);
  char *times = kn_compile_times(true);
  cr_assert_not_null(times);
  cr_expect(strstr(times, "\ncompile_fx_inner "), "%s", times);
  for (int k = 0; k < 5; k++) {
    char line[64];
    snprintf(line, sizeof line, "\n%s ", inner[k]);
    cr_expect(strstr(times, line), "%s in kn_compile_times:\n%s", inner[k], times);
  }
  free(times);
  kn_compiled_free(f);
  kn_test_rmdir(tdir);
  ind_rm(dir);
}
