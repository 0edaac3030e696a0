/*
** tests/test_profiler.c: the op-level profiler (kiln/profiler.h): op events
** with shapes, threads and autograd sequence numbers, nesting of composite
** ops, ranges for optimizer steps, compiled calls and compile phases, the
** Chrome trace export and the key_averages table.
*/
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/kiln.h"

static int find(const char *name, int from, kn_profiler_event *e) {
  for (int i = from; i < kn_profiler_num_events(); i++)
    if (kn_profiler_get_event(i, e) && !strcmp(e->name, name)) return i;
  return -1;
}

Test(profiler, op_events_have_shapes_thread_and_sequence_numbers) {
  kn_scope_begin();
  kn_tensor *a = kn_randn(KN_SHAPE(2, 3), NULL, KN_FLOAT32);
  kn_tensor *b = kn_randn(KN_SHAPE(3, 4), NULL, KN_FLOAT32);
  kn_set_requires_grad(a, true);
  cr_assert_eq(kn_profiler_start(), KN_OK);
  cr_assert_eq(kn_profiler_start(), KN_ESTATE);
  kn_tensor *c = kn_mm(a, b);
  kn_tensor *d = kn_mm(kn_detach(a), b);
  cr_assert_eq(kn_profiler_stop(), KN_OK);
  kn_mm(a, b); /* not recorded */
  kn_profiler_event e;
  int i = find("aten::mm", 0, &e);
  cr_assert_geq(i, 0);
  cr_assert_str_eq(e.shapes, "[[2, 3], [3, 4]]");
  cr_assert_str_eq(e.category, "cpu_op");
  cr_assert_eq(e.thread, (uint64_t)gettid());
  cr_assert_geq(e.dur_ns, 0);
  cr_assert_geq(e.seq, 0, "mm on an input that requires grad records a node");
  int j = find("aten::mm", i + 1, &e);
  cr_assert_gt(j, i);
  cr_assert_eq(e.seq, -1, "no autograd node without grad");
  cr_assert_eq(find("aten::mm", j + 1, &e), -1);
  cr_assert_not_null(c);
  cr_assert_not_null(d);
  kn_profiler_clear();
  cr_assert_eq(kn_profiler_num_events(), 0);
  kn_scope_end();
}

static kn_value fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  return kn_vtensor(kn_relu(kn_mul(args[0].u.t, args[0].u.t)));
}

Test(profiler, ranges_table_and_chrome_trace) {
  kn_scope_begin();
  kn_tensor *w = kn_randn(KN_SHAPE(4, 3), NULL, KN_FLOAT32);
  kn_set_requires_grad(w, true);
  kn_optimizer *opt = kn_adam(&w, 1, NULL);
  kn_compiled *f = kn_compile_fn(fn, NULL, 1, "square_relu", __FILE__, __LINE__, NULL);
  cr_assert_eq(kn_profiler_start(), KN_OK);
  kn_profiler_range_push("my_block");
  for (int k = 0; k < 3; k++) {
    kn_tensor *x = kn_randn(KN_SHAPE(5, 3), NULL, KN_FLOAT32);
    kn_tensor *loss = kn_sum(kn_linear(x, w, NULL)); /* linear is a composite */
    cr_assert_eq(kn_backward(loss, NULL), KN_OK, "%s", kn_last_error());
    kn_optim_step(opt);
    kn_optim_zero_grad(opt);
    kn_value arg = kn_vtensor(x), out;
    cr_assert_eq(kn_call(f, &arg, 1, &out), KN_OK, "%s", kn_last_error());
    kn_value_release(out);
  }
  kn_profiler_range_pop();
  cr_assert_eq(kn_profiler_stop(), KN_OK);
  kn_profiler_event e, inner;
  cr_assert_geq(find("Optimizer.step#Adam.step", 0, &e), 0);
  cr_assert_str_eq(e.category, "user_annotation");
  int r = find("Torch-Compiled Region: square_relu", 0, &e);
  cr_assert_geq(r, 0);
  cr_assert_geq(find("_compile.compile_inner", 0, &inner), 0, "the compile phase is a range");
  cr_assert(inner.start_ns >= e.start_ns && inner.start_ns + inner.dur_ns <= e.start_ns + e.dur_ns,
            "the first compiled call contains its compile");
  kn_profiler_event blk;
  cr_assert_geq(find("my_block", 0, &blk), 0);
  int lin = find("aten::linear", 0, &e);
  cr_assert_geq(lin, 0);
  kn_profiler_event mm;
  int imm = find("aten::mm", 0, &mm);
  cr_assert(imm >= 0 && imm < lin, "mm finishes first");
  cr_assert(mm.start_ns >= e.start_ns && mm.start_ns + mm.dur_ns <= e.start_ns + e.dur_ns,
            "linear (composite) contains its mm");
  cr_assert(blk.start_ns <= e.start_ns && e.start_ns + e.dur_ns <= blk.start_ns + blk.dur_ns);

  char *t = kn_profiler_table("cpu_time_total", 0);
  cr_assert_not_null(t);
  cr_assert(strstr(t, "Self CPU %") && strstr(t, "# of Calls"), "%s", t);
  char *row = strstr(t, "Optimizer.step#Adam.step");
  cr_assert_not_null(row, "%s", t);
  cr_assert_eq(strtol(strrchr(strtok(row, "\n"), ' ') - 3, NULL, 10), 3, "three steps: %s", row);
  free(t);

  char path[64];
  snprintf(path, sizeof path, "/tmp/kn_prof_%d.json", (int)getpid());
  cr_assert_eq(kn_profiler_export_chrome_trace(path), KN_OK, "%s", kn_last_error());
  json_t *root = json_load_file(path, 0, NULL);
  cr_assert_not_null(root);
  json_t *evs = json_object_get(root, "traceEvents");
  cr_assert_eq((int)json_array_size(evs), kn_profiler_num_events());
  bool saw = false;
  for (size_t k = 0; k < json_array_size(evs); k++) {
    json_t *ev = json_array_get(evs, k);
    cr_assert_str_eq(json_string_value(json_object_get(ev, "ph")), "X");
    cr_assert(json_is_number(json_object_get(ev, "ts")));
    cr_assert(json_is_number(json_object_get(ev, "dur")));
    if (strcmp(json_string_value(json_object_get(ev, "name")), "aten::linear")) continue;
    json_t *dims = json_object_get(json_object_get(ev, "args"), "Input Dims");
    cr_assert_eq(json_integer_value(json_array_get(json_array_get(dims, 0), 0)), 5);
    cr_assert_eq(json_integer_value(json_array_get(json_array_get(dims, 1), 0)), 4);
    cr_assert(json_is_integer(json_object_get(json_object_get(ev, "args"), "Sequence number")));
    saw = true;
  }
  cr_assert(saw);
  json_decref(root);
  remove(path);
  kn_profiler_clear();
  kn_compiled_free(f);
  kn_optim_free(opt);
  kn_scope_end();
}
