/*
** tests/test_checkpoint.c: kn_save / kn_load and the optimizer state in the
** safetensors format: round trips, a file written by an independent writer
** (tools/ref/gen_safetensors.py: struct + json + numpy from torch 1.13
** weights), PyTorch's load_state_dict messages, and truncated or corrupted
** files rejected without touching the model.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kiln/checkpoint.h"
#include "kiln/kiln.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "optim/optim_int.h"
#include "support/files.h"
#include "support/fixture.h"

static char path_buf[256];

static const char *tmp_path(const char *name) {
  snprintf(path_buf, sizeof path_buf, "/tmp/kn_ckpt_%d_%s", (int)getpid(), name);
  return path_buf;
}

static kn_module *cnn(uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  kn_conv2d_options pad1 = {.padding = {1, 1}};
  kn_module *m = kn_nn_sequential(
      6, (kn_module *[]){kn_nn_conv2d(1, 4, 3, 3, &pad1, g),
                         kn_nn_batchnorm2d(4, 1e-5, 0.1, true, true), kn_nn_relu(),
                         kn_nn_maxpool2d(2, 0, 0), kn_nn_flatten(1, -1),
                         kn_nn_linear(64, 10, true, g)});
  kn_generator_free(g);
  return m;
}

static void assert_same_state(kn_module *a, kn_module *b) {
  const char *names[] = {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                         "1.running_var", "1.num_batches_tracked", "5.weight", "5.bias"};
  char why[256];
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    cr_assert(kn_tensors_close(kn_module_get(a, names[i]), kn_module_get(b, names[i]), 0, 0,
                               true, why, sizeof why), "%s: %s", names[i], why);
}

Test(checkpoint, module_round_trip_restores_parameters_and_buffers) {
  kn_scope_begin();
  kn_module *a = cnn(1), *b = cnn(2);
  kn_nn_forward(a, kn_randn(KN_SHAPE(3, 1, 8, 8), NULL, KN_FLOAT32)); /* move running stats */
  const char *p = tmp_path("rt.safetensors");
  cr_assert_eq(kn_save(a, p), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_load(b, p), KN_OK, "%s", kn_last_error());
  assert_same_state(a, b);
  /* The header as an independent reader sees it. */
  size_t len = 0;
  char *raw = kn_test_read_file(p, &len);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | (uint8_t)raw[i];
  cr_assert_eq(hl % 8, 0);
  json_t *h = json_loadb(raw + 8, hl, 0, NULL);
  cr_assert_not_null(h);
  cr_assert_str_eq(json_string_value(json_object_get(json_object_get(h, "__metadata__"),
                                                     "format")), "pt");
  json_t *w = json_object_get(h, "5.weight");
  cr_assert_str_eq(json_string_value(json_object_get(w, "dtype")), "F32");
  cr_assert_eq(json_integer_value(json_array_get(json_object_get(w, "shape"), 0)), 10);
  json_t *nbt = json_object_get(h, "1.num_batches_tracked");
  cr_assert_str_eq(json_string_value(json_object_get(nbt, "dtype")), "I64");
  cr_assert_eq(json_array_size(json_object_get(nbt, "shape")), 0);
  json_t *off = json_object_get(w, "data_offsets");
  int64_t b0 = json_integer_value(json_array_get(off, 0));
  float first;
  memcpy(&first, raw + 8 + hl + b0, 4);
  cr_assert_eq(first, ((float *)kn_data(kn_module_get(a, "5.weight")))[0]);
  json_decref(h);
  free(raw);
  remove(p);
  kn_module_free(a), kn_module_free(b);
  kn_scope_end();
}

Test(checkpoint, loads_a_file_from_an_independent_writer) {
  kn_scope_begin();
  kn_module *m = kn_nn_sequential(4, (kn_module *[]){
                                         kn_nn_linear(4, 8, true, NULL),
                                         kn_nn_batchnorm1d(8, 1e-5, 0.1, true, true),
                                         kn_nn_relu(), kn_nn_linear(8, 3, true, NULL)});
  cr_assert_eq(kn_load(m, KN_FIXTURE_DIR "/torch_mlp.safetensors"), KN_OK, "%s",
               kn_last_error());
  int64_t nbt = 0;
  kn_item_int(kn_module_get(m, "1.num_batches_tracked"), &nbt);
  cr_assert_eq(nbt, 3);
  kn_nn_train(m, false);
  kn_fixture *f = kn_fixture_load_named("torch_mlp.json");
  const json_t *c = kn_fixture_case(f, 0);
  kn_tensor *y = kn_nn_forward(m, kn_fixture_tensor(kn_fixture_input(c, 0)));
  char why[256];
  cr_assert(kn_fixture_close(y, kn_fixture_output(c, 0), 1e-5, 1e-6, why, sizeof why), "%s", why);
  kn_fixture_free(f);
  kn_module_free(m);
  kn_scope_end();
}

Test(checkpoint, mismatches_are_listed_and_nothing_is_loaded) {
  kn_scope_begin();
  kn_module *src = kn_nn_sequential(2, (kn_module *[]){kn_nn_linear(4, 3, true, NULL),
                                                       kn_nn_linear(3, 2, true, NULL)});
  const char *p = tmp_path("mm.safetensors");
  cr_assert_eq(kn_save(src, p), KN_OK);
  kn_module *dst = kn_nn_sequential(3, (kn_module *[]){kn_nn_linear(5, 3, true, NULL),
                                                       kn_nn_linear(3, 2, false, NULL),
                                                       kn_nn_linear(2, 2, true, NULL)});
  kn_tensor *before = kn_clone(kn_module_get(dst, "1.weight"));
  cr_assert_eq(kn_load(dst, p), KN_EINVAL);
  char expect[1024];
  snprintf(expect, sizeof expect,
           "loading '%s': Error(s) in loading state_dict for Sequential:\n"
           "\tMissing key(s) in state_dict: \"2.weight\", \"2.bias\".\n"
           "\tUnexpected key(s) in state_dict: \"1.bias\".\n"
           "\tsize mismatch for 0.weight: copying a param with shape [3, 4] from checkpoint, "
           "the shape in current model is [3, 5].", p);
  cr_assert_str_eq(kn_last_error(), expect);
  char why[128];
  cr_assert(kn_tensors_close(kn_module_get(dst, "1.weight"), before, 0, 0, true, why, sizeof why),
            "a failed load changed 1.weight");
  cr_assert_eq(kn_load(dst, "/nonexistent/x.safetensors"), KN_EIO);
  remove(p);
  kn_module_free(src), kn_module_free(dst);
  kn_scope_end();
}

static void write_bytes(const char *p, const void *d, size_t n) {
  FILE *f = fopen(p, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(d, 1, n, f), n);
  fclose(f);
}

/* A header by hand + data bytes. */
static void write_st(const char *p, const char *header, size_t data_len) {
  size_t hl = strlen(header);
  char *buf = calloc(1, 8 + hl + data_len + 1);
  for (int i = 0; i < 8; i++) buf[i] = (char)((uint64_t)hl >> (8 * i));
  memcpy(buf + 8, header, hl);
  write_bytes(p, buf, 8 + hl + data_len);
  free(buf);
}

Test(checkpoint, truncated_and_corrupted_files_are_errors_and_leave_the_model) {
  kn_scope_begin();
  kn_module *m = kn_nn_linear(3, 2, true, NULL);
  const char *good = tmp_path("good.safetensors");
  cr_assert_eq(kn_save(m, good), KN_OK);
  size_t len = 0;
  char *raw = kn_test_read_file(good, &len);
  kn_tensor *w0 = kn_clone(kn_module_get(m, "weight"));
  char bad[300];
  snprintf(bad, sizeof bad, "%s.bad", good);
  for (size_t cut = 0; cut < len; cut++) {
    write_bytes(bad, raw, cut);
    cr_assert_eq(kn_load(m, bad), KN_EPARSE, "cut at %zu: %s", cut, kn_last_error());
  }
  for (size_t i = 0; i < len; i++) { /* every single-byte corruption: error or a clean load */
    char *c = malloc(len);
    memcpy(c, raw, len);
    c[i] ^= 0x5a;
    write_bytes(bad, c, len);
    kn_status st = kn_load(m, bad);
    cr_assert(st == KN_OK || st == KN_EPARSE || st == KN_EINVAL, "byte %zu: %d", i, st);
    free(c);
    if (st == KN_OK) kn_load(m, good);
  }
  char why[128];
  cr_assert(kn_tensors_close(kn_module_get(m, "weight"), w0, 0, 0, true, why, sizeof why));
  static const struct { const char *header; size_t data; const char *msg; } cases[] = {
      {"{\"weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]},"
       "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[20,28]}}", 28,
       "tensor 'weight': 20 bytes of data, but F32 with 6 elements needs 24"},
      {"{\"weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
       "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}", 24,
       "tensor 'bias' starts at byte 16 of the data, expected 24"},
      {"{\"weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
       "\"bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}", 30,
       "data_offsets [24, 32] outside the 30-byte data section"},
      {"{\"weight\":{\"dtype\":\"Q4\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24,
       "\"dtype\" missing or not one of"},
      {"{\"weight\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}}", 24,
       "\"shape\" entries must be non-negative integers"},
      {"[1, 2]", 0, "the header is not a JSON object"},
      {"{\"__metadata__\":{\"a\":1}}", 0, "__metadata__ value 'a' is not a string"}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    write_st(bad, cases[k].header, cases[k].data);
    cr_assert_eq(kn_load(m, bad), KN_EPARSE, "case %zu", k);
    cr_assert(strstr(kn_last_error(), cases[k].msg), "case %zu: %s", k, kn_last_error());
  }
  uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
  write_bytes(bad, huge, sizeof huge);
  cr_assert_eq(kn_load(m, bad), KN_EPARSE);
  cr_assert(strstr(kn_last_error(), "does not fit the 16-byte file"), "%s", kn_last_error());
  cr_assert(kn_tensors_close(kn_module_get(m, "weight"), w0, 0, 0, true, why, sizeof why));
  remove(bad), remove(good);
  free(raw);
  kn_module_free(m);
  kn_scope_end();
}

Test(checkpoint, optimizer_state_round_trip_continues_identically) {
  kn_scope_begin();
  kn_module *a = cnn(4), *b = cnn(5);
  kn_tensor **pa, **pb;
  int n = kn_nn_parameters(a, &pa);
  kn_nn_parameters(b, &pb);
  kn_optimizer *oa = kn_adam(pa, n, &(kn_optim_options){.lr = 0.01});
  kn_optimizer *ob = kn_adam(pb, n, &(kn_optim_options){.lr = 0.5});
  kn_tensor *x = kn_randn(KN_SHAPE(4, 1, 8, 8), NULL, KN_FLOAT32);
  for (int s = 0; s < 3; s++) {
    cr_assert_eq(kn_backward(kn_sum(kn_nn_forward(a, x)), NULL), KN_OK);
    cr_assert_eq(kn_optim_step(oa), KN_OK);
    kn_optim_zero_grad(oa);
  }
  const char *pm = tmp_path("m.safetensors");
  char po[300];
  snprintf(po, sizeof po, "%s.opt", pm);
  cr_assert_eq(kn_save(a, pm), KN_OK);
  cr_assert_eq(kn_optim_save(oa, po), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_load(b, pm), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_optim_load(ob, po), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_optim_steps(ob), 3);
  cr_assert_float_eq(kn_optim_lr(ob), 0.01, 1e-12);
  for (int s = 0; s < 2; s++) {
    kn_module *ms[2] = {a, b};
    kn_optimizer *os[2] = {oa, ob};
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(kn_backward(kn_sum(kn_nn_forward(ms[k], x)), NULL), KN_OK);
      cr_assert_eq(kn_optim_step(os[k]), KN_OK);
      kn_optim_zero_grad(os[k]);
    }
  }
  assert_same_state(a, b);
  kn_optimizer *sgd = kn_sgd(pb, n, &(kn_optim_options){.lr = 0.1});
  cr_assert_eq(kn_optim_load(sgd, po), KN_EINVAL);
  cr_assert(strstr(kn_last_error(), "holds Adam state, the optimizer is SGD"), "%s",
            kn_last_error());
  cr_assert_eq(kn_load(a, po), KN_EINVAL); /* optimizer file into a model: all keys differ */
  cr_assert(strstr(kn_last_error(), "Unexpected key(s) in state_dict: \"lr\""), "%s",
            kn_last_error());
  remove(pm), remove(po);
  kn_optim_free(oa), kn_optim_free(ob), kn_optim_free(sgd);
  free(pa), free(pb);
  kn_module_free(a), kn_module_free(b);
  kn_scope_end();
}

/* ---- optimizer hyperparameters in checkpoints ------------------------------------------ */
/* The file at p as header JSON (owned) and its data section (owned). */
static json_t *read_st(const char *p, char **data, size_t *data_len) {
  size_t len = 0;
  char *raw = kn_test_read_file(p, &len);
  cr_assert_not_null(raw);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | (uint8_t)raw[i];
  json_t *h = json_loadb(raw + 8, hl, JSON_REJECT_DUPLICATES, NULL);
  cr_assert_not_null(h);
  *data_len = len - 8 - hl;
  *data = malloc(*data_len + 1);
  memcpy(*data, raw + 8 + hl, *data_len);
  free(raw);
  return h;
}

/* Write header h (padded to 8 bytes, as kn_save) and data to p. */
static void write_st_json(const char *p, json_t *h, const char *data, size_t data_len) {
  char *js = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
  size_t hl = strlen(js), padded = (hl + 7) / 8 * 8;
  char *buf = malloc(8 + padded + data_len);
  for (int i = 0; i < 8; i++) buf[i] = (char)((uint64_t)padded >> (8 * i));
  memcpy(buf + 8, js, hl);
  memset(buf + 8 + hl, ' ', padded - hl);
  memcpy(buf + 8 + padded, data, data_len);
  write_bytes(p, buf, 8 + padded + data_len);
  free(buf), free(js);
}

/* Set (or with value NULL, remove) __metadata__[key] of the file at p. */
static void set_meta(const char *p, const char *key, const char *value) {
  char *data;
  size_t n;
  json_t *h = read_st(p, &data, &n);
  json_t *meta = json_object_get(h, "__metadata__");
  if (value) json_object_set_new(meta, key, json_string(value));
  else json_object_del(meta, key);
  write_st_json(p, h, data, n);
  json_decref(h), free(data);
}

/* Overwrite the value of the 0-d float64 tensor "lr" in the file at p. */
static void set_lr(const char *p, double lr) {
  char *data;
  size_t n;
  json_t *h = read_st(p, &data, &n);
  json_t *e = json_object_get(h, "lr");
  cr_assert_str_eq(json_string_value(json_object_get(e, "dtype")), "F64");
  memcpy(data + json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 0)), &lr,
         sizeof lr);
  write_st_json(p, h, data, n);
  json_decref(h), free(data);
}

typedef kn_optimizer *(*optim_ctor)(kn_tensor *const *, int, const kn_optim_options *);

static bool same_options(const kn_optim_options *a, const kn_optim_options *b) {
  return a->lr == b->lr && a->momentum == b->momentum && a->dampening == b->dampening &&
         a->weight_decay == b->weight_decay && a->nesterov == b->nesterov &&
         a->beta1 == b->beta1 && a->beta2 == b->beta2 && a->eps == b->eps &&
         a->alpha == b->alpha && a->centered == b->centered;
}

Test(checkpoint, loaded_hyperparameters_obey_the_constructors_rules) {
  static const struct {
    optim_ctor ctor;
    kn_optim_options good, bad; /* bad: the same rule broken, for the constructor's message */
    const char *field, *value;  /* value NULL: the "lr" tensor gets bad.lr */
  } cases[] = {
      {kn_adam, {.lr = 0.01}, {.lr = -1}, "lr", NULL},
      {kn_adam, {.lr = 0.01}, {.lr = NAN}, "lr", NULL},
      {kn_sgd, {.lr = 0.1}, {.lr = -0.5}, "lr", NULL},
      {kn_adam, {.lr = 0.01}, {.beta1 = 1.5}, "beta1", "1.5"},
      {kn_adamw, {.lr = 0.01}, {.beta2 = -0.1}, "beta2", "-0.10000000000000001"},
      {kn_adam, {.lr = 0.01}, {.eps = -1e-8}, "eps", "-1e-08"},
      {kn_sgd, {.lr = 0.1}, {.lr = 0.1, .momentum = -0.5}, "momentum", "-0.5"},
      {kn_rmsprop, {.lr = 0.01}, {.alpha = -0.99}, "alpha", "-0.98999999999999999"},
      {kn_rmsprop, {.lr = 0.01}, {.momentum = -1}, "momentum", "-1"},
      {kn_sgd, {.lr = 0.1, .momentum = 0.9}, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5,
                                              .nesterov = true}, "nesterov", "true"},
  };
  const char *p = tmp_path("hyper.opt");
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    kn_scope_begin();
    kn_module *m = kn_nn_linear(3, 2, true, NULL);
    kn_tensor **ps;
    int n = kn_nn_parameters(m, &ps);
    cr_assert_null(cases[k].ctor(ps, n, &cases[k].bad), "case %zu", k);
    char expect[512];
    snprintf(expect, sizeof expect, "loading '%s': hyperparameter '%s' in the checkpoint: %s", p,
             cases[k].field, kn_last_error());
    kn_optimizer *opt = cases[k].ctor(ps, n, &cases[k].good);
    cr_assert_eq(kn_optim_save(opt, p), KN_OK, "%s", kn_last_error());
    if (!cases[k].value) set_lr(p, cases[k].bad.lr);
    else set_meta(p, cases[k].field, cases[k].value);
    if (k == sizeof cases / sizeof *cases - 1) set_meta(p, "dampening", "0.5");
    kn_optim_options before = kn__optim_options(opt);
    cr_assert_eq(kn_optim_load(opt, p), KN_EINVAL, "case %zu", k);
    cr_assert_str_eq(kn_last_error(), expect, "case %zu", k);
    kn_optim_options after = kn__optim_options(opt);
    cr_assert(same_options(&before, &after), "case %zu: a refused load changed the options", k);
    cr_assert_eq(kn_optim_lr(opt), cases[k].good.lr);
    kn_optim_free(opt), free(ps), kn_module_free(m);
    kn_scope_end();
  }
  remove(p);
}

/* Train a few steps with a, save, load into b (built with other options),
** then step both: b continues exactly as a. */
static void resume_elsewhere(optim_ctor ctor, kn_optim_options oa_opts, kn_optim_options ob_opts,
                             const kn_compile_options *co) {
  kn_scope_begin();
  kn_module *a = cnn(6), *b = cnn(7);
  kn_tensor **pa, **pb;
  int n = kn_nn_parameters(a, &pa);
  kn_nn_parameters(b, &pb);
  kn_optimizer *oa = ctor(pa, n, &oa_opts), *ob = ctor(pb, n, &ob_opts);
  kn_tensor *x = kn_randn(KN_SHAPE(4, 1, 8, 8), NULL, KN_FLOAT32);
  kn_module *ms[2] = {a, b};
  kn_optimizer *os[2] = {oa, ob};
  for (int s = 0; s < 4; s++) /* both take steps: b has state (and a compiled step) */
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(kn_backward(kn_sum(kn_nn_forward(ms[k], x)), NULL), KN_OK);
      cr_assert_eq(co && s ? kn_optim_step_compiled(os[k], co) : kn_optim_step(os[k]), KN_OK,
                   "%s", kn_last_error());
      kn_optim_zero_grad(os[k]);
    }
  const char *pm = tmp_path("resume.model"), *po = "/tmp/kn_ckpt_resume.opt";
  char pob[300];
  snprintf(pob, sizeof pob, "%s.%d", po, (int)getpid());
  cr_assert_eq(kn_save(a, pm), KN_OK);
  cr_assert_eq(kn_optim_save(oa, pob), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_load(b, tmp_path("resume.model")), KN_OK, "%s", kn_last_error());
  cr_assert_eq(kn_optim_load(ob, pob), KN_OK, "%s", kn_last_error());
  kn_optim_options ra = kn__optim_options(oa), rb = kn__optim_options(ob);
  cr_assert(same_options(&ra, &rb), "the loaded options differ from the saved ones");
  for (int s = 0; s < 2; s++)
    for (int k = 0; k < 2; k++) {
      cr_assert_eq(kn_backward(kn_sum(kn_nn_forward(ms[k], x)), NULL), KN_OK);
      cr_assert_eq(co ? kn_optim_step_compiled(os[k], co) : kn_optim_step(os[k]), KN_OK, "%s",
                   kn_last_error());
      kn_optim_zero_grad(os[k]);
    }
  assert_same_state(a, b);
  remove(tmp_path("resume.model")), remove(pob);
  kn_optim_free(oa), kn_optim_free(ob);
  free(pa), free(pb);
  kn_module_free(a), kn_module_free(b);
  kn_scope_end();
}

Test(checkpoint, hyperparameters_are_restored_and_training_resumes_identically) {
  resume_elsewhere(kn_sgd, (kn_optim_options){.lr = 0.05, .momentum = 0.9, .dampening = 0.1,
                                              .weight_decay = 1e-3},
                   (kn_optim_options){.lr = 0.5}, NULL);
  resume_elsewhere(kn_sgd, (kn_optim_options){.lr = 0.05, .momentum = 0.8, .nesterov = true},
                   (kn_optim_options){.lr = 0.5, .momentum = 0.3}, NULL);
  resume_elsewhere(kn_rmsprop, (kn_optim_options){.lr = 0.01, .alpha = 0.9, .momentum = 0.5,
                                                  .centered = true, .eps = 1e-6},
                   (kn_optim_options){.lr = 0.02}, NULL);
  /* the other way: b's buffers for momentum and centering go unused */
  resume_elsewhere(kn_rmsprop, (kn_optim_options){.lr = 0.01},
                   (kn_optim_options){.lr = 0.02, .momentum = 0.5, .centered = true}, NULL);
  resume_elsewhere(kn_sgd, (kn_optim_options){.lr = 0.05}, (kn_optim_options){.lr = 0.5,
                                                                             .momentum = 0.9},
                   NULL);
  resume_elsewhere(kn_adamw, (kn_optim_options){.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95,
                                                .eps = 1e-7, .weight_decay = 0.1 + 0.2},
                   (kn_optim_options){.lr = 0.1}, NULL);
}

Test(checkpoint, loaded_hyperparameters_replace_those_of_a_compiled_step) {
  kn_compile_options co = {.backend = "eager"};
  resume_elsewhere(kn_adam, (kn_optim_options){.lr = 0.01, .beta1 = 0.5, .eps = 1e-3},
                   (kn_optim_options){.lr = 0.01}, &co);
}

Test(checkpoint, optimizer_metadata_is_checked_and_old_files_still_load) {
  kn_scope_begin();
  kn_module *m = kn_nn_linear(3, 2, true, NULL);
  kn_tensor **ps;
  int n = kn_nn_parameters(m, &ps);
  kn_optimizer *opt = kn_sgd(ps, n, &(kn_optim_options){.lr = 0.1, .momentum = 0.9});
  const char *p = tmp_path("meta.opt");
  static const struct { const char *key, *value, *msg; } cases[] = {
      {"momentum", "abc", "__metadata__ 'momentum' is 'abc', expected a number"},
      {"momentum", "0.5x", "__metadata__ 'momentum' is '0.5x', expected a number"},
      {"nesterov", "yes", "__metadata__ 'nesterov' is 'yes', expected true or false"},
      {"steps", "-3", "__metadata__: num_params '2' and steps '-3' must be non-negative decimal "
                      "integers"},
      {"num_params", "2x", "__metadata__: num_params '2x' and steps '0' must be non-negative "
                           "decimal integers"}};
  char expect[512];
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    cr_assert_eq(kn_optim_save(opt, p), KN_OK);
    set_meta(p, cases[k].key, cases[k].value);
    cr_assert_eq(kn_optim_load(opt, p), KN_EPARSE, "case %zu", k);
    snprintf(expect, sizeof expect, "loading '%s': %s", p, cases[k].msg);
    cr_assert_str_eq(kn_last_error(), expect, "case %zu", k);
  }
  /* A file from before the hyperparameters were recorded: the optimizer
  ** keeps its own (and takes the learning rate, which was recorded). */
  kn_optimizer *other = kn_sgd(ps, n, &(kn_optim_options){.lr = 0.7, .momentum = 0.2});
  cr_assert_eq(kn_optim_save(other, p), KN_OK);
  const char *keys[] = {"momentum", "dampening", "weight_decay", "nesterov"};
  for (int i = 0; i < 4; i++) set_meta(p, keys[i], NULL);
  cr_assert_eq(kn_optim_load(opt, p), KN_OK, "%s", kn_last_error());
  kn_optim_options o = kn__optim_options(opt);
  cr_assert_eq(o.momentum, 0.9);
  cr_assert_eq(kn_optim_lr(opt), 0.7);
  remove(p);
  kn_optim_free(opt), kn_optim_free(other), free(ps);
  kn_module_free(m);
  kn_scope_end();
}
