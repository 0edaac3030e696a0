/*
** tests/test_inductor_optim.c: optimizer steps compiled by inductor (one
** captured graph over every parameter and its state, written back in place)
** against the same optimizer stepped eagerly: parameters and state buffers
** bit for bit after several steps, over parameters of mixed sizes, for
** Adam, AdamW and Adam with weight decay, SGD with momentum, nesterov and
** weight decay, and RMSprop (centered, momentum).
**
** The generated code is checked against literals: a parameter's bias
** corrections (0-dim values of its step) are computed once before its
** update loop, inside the update's kernel (no kernel and no buffer of their
** own), and loops over constant sizes below 65536 elements print no OpenMP.
*/
#include "inductor_util.h"
#include "kiln/log.h"
#include "kiln/profiler.h"
#include "kiln/optim.h"
#include "optim/optim_int.h"
#include "support/files.h"
#include "support/log_capture.h"

static char cache[64];

static void setup(void) { ind_cache_dir(cache, sizeof cache); }
static void teardown(void) {
  if (!getenv("KN_TEST_KEEP_CACHE")) ind_rm(cache);
}

TestSuite(inductor_optim, .init = setup, .fini = teardown, .timeout = 300);

enum { NP = 5 };
static const int64_t sizes[NP][2] = {{16, 1}, {3, 7}, {1000, 1}, {10, 1}, {64, 9}};

typedef kn_optimizer *(*make_fn)(kn_tensor *const *, int, const kn_optim_options *);

/* Parameters (owned) of the mixed sizes, the same values each call. */
static void params(kn_tensor **p, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_scope_begin();
  for (int i = 0; i < NP; i++) {
    p[i] = kn_retain(kn_randn(KN_SHAPE(sizes[i][0], sizes[i][1]), g, KN_FLOAT32));
    kn_set_requires_grad(p[i], true);
  }
  kn_scope_end();
  kn_generator_free(g);
}

/* Are a and b the same bits (float32, same numel)? */
static bool same_bits(kn_tensor *a, kn_tensor *b) {
  return a && b && kn_numel(a) == kn_numel(b) &&
         !memcmp(kn_data(a), kn_data(b), (size_t)kn_numel(a) * sizeof(float));
}

/* Every tensor entry of the two state trees ("<i>.exp_avg", ...) equal. */
static void expect_same_state(kn_optimizer *e, kn_optimizer *c, const char *what) {
  static const char *const names[] = {"exp_avg", "exp_avg_sq", "momentum_buffer",
                                      "square_avg", "grad_avg"};
  for (int i = 0; i < NP; i++)
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
      char path[32];
      snprintf(path, sizeof path, "%d.%s", i, names[k]);
      kn_tensor *te = kn__optim_uses_state(e, names[k]) ? kn_module_get(kn_optim_state(e), path) : NULL;
      if (!te) continue;
      kn_tensor *tc = kn_module_get(kn_optim_state(c), path);
      cr_expect(same_bits(te, tc), "%s: state %s differs", what, path);
    }
  kn_clear_error();
}

/* Step one optimizer eagerly and one compiled by inductor over equal
** parameters and gradients for 4 steps: the same bits after every step. */
/* Profiled events named name since kn_profiler_start; stops the profiler. */
static int stop_counting(const char *name) {
  kn_profiler_stop();
  int n = 0;
  kn_profiler_event ev;
  for (int i = 0; i < kn_profiler_num_events(); i++)
    if (kn_profiler_get_event(i, &ev) && !strcmp(ev.name, name)) n++;
  kn_profiler_clear();
  return n;
}

/* copies (may be NULL): add the write-back copies of the compiled steps. */
static void compare_counting(make_fn make, kn_optim_options o, const char *what, int *copies) {
  kn_tensor *pe[NP], *pc[NP];
  params(pe, 11);
  params(pc, 11);
  kn_optimizer *e = make(pe, NP, &o), *c = make(pc, NP, &o);
  cr_assert(e && c, "%s: %s", what, kn_last_error());
  kn_generator *g = kn_generator_new(3);
  kn_compile_options co = {.backend = "inductor"};
  for (int s = 0; s < 4; s++) {
    kn_scope_begin();
    for (int i = 0; i < NP; i++) {
      kn_tensor *gr = kn_randn(KN_SHAPE(sizes[i][0], sizes[i][1]), g, KN_FLOAT32);
      kn_set_grad(pe[i], gr), kn_set_grad(pc[i], kn_clone(gr));
    }
    cr_assert_eq(kn_optim_step(e), KN_OK, "%s: %s", what, kn_last_error());
    if (copies) cr_assert_eq(kn_profiler_start(), KN_OK);
    cr_assert_eq(kn_optim_step_compiled(c, &co), KN_OK, "%s: %s", what, kn_last_error());
    if (copies) *copies += stop_counting("aten::copy_");
    for (int i = 0; i < NP; i++)
      cr_expect(same_bits(pe[i], pc[i]), "%s: param %d differs after step %d", what, i, s + 1);
    kn_scope_end();
  }
  expect_same_state(e, c, what);
  kn_generator_free(g);
  kn_optim_free(e), kn_optim_free(c);
  for (int i = 0; i < NP; i++) kn_release(pe[i]), kn_release(pc[i]);
}

static void compare(make_fn make, kn_optim_options o, const char *what) {
  compare_counting(make, o, what, NULL);
}

Test(inductor_optim, adam_variants_match_eager_bit_for_bit) {
  compare(kn_adam, (kn_optim_options){.lr = 1e-2}, "Adam");
  compare(kn_adam, (kn_optim_options){.lr = 1e-2, .weight_decay = 0.1}, "Adam weight decay");
  compare(kn_adamw, (kn_optim_options){.lr = 1e-2, .beta1 = 0.8, .eps = 1e-6}, "AdamW");
}

Test(inductor_optim, sgd_and_rmsprop_match_eager_bit_for_bit) {
  compare(kn_sgd, (kn_optim_options){.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}, "SGD");
  compare(kn_sgd, (kn_optim_options){.lr = 0.05, .momentum = 0.9, .nesterov = true},
          "SGD nesterov");
  compare(kn_rmsprop, (kn_optim_options){.lr = 0.01, .momentum = 0.5, .centered = true},
          "RMSprop");
}

/* The text of the kernel function named by its first line containing key. */
static char *kernel_of(const char *src, const char *key) {
  const char *k = strstr(src, key);
  while (k && k > src && strncmp(k, "static void kn_part", 19)) k--;
  const char *end = k ? strstr(k, "\n}\n") : NULL;
  return end ? strndup(k, (size_t)(end - k)) : NULL;
}

/* Adam's step per parameter: the step count's increment (a 0-dim kernel
** written in place into "step"), and one loop computing exp_avg,
** exp_avg_sq and the update of the parameter, which takes the new averages
** from registers (they are stored for the state too) and whose bias
** corrections are 0-dim trees computed once before the loop: 2 kernels per
** parameter,
** each output a new slot (4 per parameter) that the call computes in the
** state or parameter tensor it is written back to (no copy_ after the
** first, eager, step), no OpenMP (every loop runs over constant sizes
** below 65536 elements). */
Test(inductor_optim, adam_bias_corrections_are_computed_before_the_update_loop) {
  kn_test_records r = {0};
  kn_set_logs_str("fusion");
  kn_test_capture_begin(&r);
  int copies = 0;
  compare_counting(kn_adam, (kn_optim_options){.lr = 1e-3}, "Adam", &copies);
  kn_test_capture_end(&r);
  cr_expect_eq(copies, 0, "write-back copies: %d", copies);
  kn_set_logs_str("");
  const char *rec = "fusion: div inlined into mul_3: its only user, a 0-dim value computed once "
                    "before its loop";
  cr_expect_not_null(kn_test_get_record(&r, rec), "no record '%s'", rec);
  kn_test_records_free(&r);
  char *src = kn_test_inductor_sources(cache);
  cr_assert_not_null(src);
  cr_expect_eq(kn_test_count_of(src, "static void kernel"), 2 * NP, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "rt->alloc("), 4 * NP, "%s", src);
  cr_expect_eq(kn_test_count_of(src, "#pragma omp"), 0, "%s", src);
  char *upd = kernel_of(src, "/* sub sub */");
  cr_assert_not_null(upd, "%s", src);
  const char *pw = strstr(upd, "/* pow pow_1 */"), *loop = strstr(upd, "for (int64_t b");
  cr_expect(pw && loop && pw < loop, "the bias correction is not before the loop:\n%s", upd);
  cr_expect(strstr(upd, "sqrt(((float)"), "sqrt is not inline:\n%s", upd);
  const char *avg = strstr(upd, "/* add add_1 */"), *upd_at = strstr(upd, "/* sub sub */");
  cr_expect(avg && upd_at && avg < upd_at, "exp_avg is not computed in the update's loop:\n%s",
            upd);
  free(upd);
  free(src);
}
