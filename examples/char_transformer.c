/*
** examples/char_transformer.c: a character-level transformer language
** model. Token embedding + learned positional embedding -> causal
** TransformerEncoderLayers (is_causal: position t sees positions <= t) ->
** Linear head over the characters, trained with Adam on random windows of
** a short text held in this file (the opening of Lewis Carroll's "Alice's
** Adventures in Wonderland", 1865, public domain), with the loss step
** compiled (forward and backward through inductor). Then it samples text
** with temperature and top-k (kn_topk + kn_multinomial from a seeded
** generator), saves the model (kn_save), loads the file into a model built
** with other weights (kn_load) and checks that the reloaded model samples
** exactly the same text.
**
**   build/examples/char_transformer [steps [checkpoint.safetensors]]
**
** 120 steps by default (a few seconds once the generated code is in
** kiln's cache). The checkpoint goes to a temporary file, removed at the
** end, unless a path is given. Exit status 0 when the loss fell (the mean
** of the last 10 steps below the mean of the first 10) and the reloaded
** model's sample equals the original's. Uses only the public API.
*/
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEQ 32     /* context length */
#define BATCH 16
#define DIM 48     /* d_model */
#define HEADS 4
#define FF 96      /* dim_feedforward */
#define LAYERS 2
#define NARGS (3 + LAYERS + 2) /* tok, pos, layers..., head, x, y */

static const char TEXT[] =
    "Alice was beginning to get very tired of sitting by her sister on the bank, and of "
    "having nothing to do: once or twice she had peeped into the book her sister was "
    "reading, but it had no pictures or conversations in it, 'and what is the use of a "
    "book,' thought Alice 'without pictures or conversations?' So she was considering in "
    "her own mind (as well as she could, for the hot day made her feel very sleepy and "
    "stupid), whether the pleasure of making a daisy-chain would be worth the trouble of "
    "getting up and picking the daisies, when suddenly a White Rabbit with pink eyes ran "
    "close by her. There was nothing so very remarkable in that; nor did Alice think it so "
    "very much out of the way to hear the Rabbit say to itself, 'Oh dear! Oh dear! I shall "
    "be late!' (when she thought it over afterwards, it occurred to her that she ought to "
    "have wondered at this, but at the time it all seemed quite natural); but when the "
    "Rabbit actually took a watch out of its waistcoat-pocket, and looked at it, and then "
    "hurried on, Alice started to her feet, for it flashed across her mind that she had "
    "never before seen a rabbit with either a waistcoat-pocket, or a watch to take out of "
    "it, and burning with curiosity, she ran across the field after it, and fortunately was "
    "just in time to see it pop down a large rabbit-hole under the hedge. In another moment "
    "down went Alice after it, never once considering how in the world she was to get out "
    "again. The rabbit-hole went straight on like a tunnel for some way, and then dipped "
    "suddenly down, so suddenly that Alice had not a moment to think about stopping herself "
    "before she found herself falling down a very deep well. Either the well was very deep, "
    "or she fell very slowly, for she had plenty of time as she went down to look about her "
    "and to wonder what was going to happen next. First, she tried to look down and make out "
    "what she was coming to, but it was too dark to see anything; then she looked at the "
    "sides of the well, and noticed that they were filled with cupboards and book-shelves; "
    "here and there she saw maps and pictures hung upon pegs. She took down a jar from one "
    "of the shelves as she passed; it was labelled 'ORANGE MARMALADE', but to her great "
    "disappointment it was empty: she did not like to drop the jar for fear of killing "
    "somebody underneath, so managed to put it into one of the cupboards as she fell past "
    "it. 'Well!' thought Alice to herself, 'after such a fall as this, I shall think nothing "
    "of tumbling down stairs! How brave they'll all think me at home! Why, I wouldn't say "
    "anything about it, even if I fell off the top of the house!' (Which was very likely "
    "true.) Down, down, down. Would the fall never come to an end? ";

/* The characters of TEXT, sorted: id <-> character. */
typedef struct vocab {
  int n;
  int64_t id_of[256];
  char char_of[256];
} vocab;

static void make_vocab(vocab *v) {
  bool seen[256] = {false};
  for (const char *p = TEXT; *p; p++) seen[(unsigned char)*p] = true;
  v->n = 0;
  for (int c = 0; c < 256; c++) {
    v->id_of[c] = seen[c] ? v->n : -1;
    if (seen[c]) v->char_of[v->n++] = (char)c;
  }
}

/* The model: one module tree (what kn_save writes) whose parts are also
** passed to the compiled step one by one as module arguments. */
typedef struct model {
  kn_module *root, *tok, *pos, *layer[LAYERS], *head;
} model;

/* Add child c to m as name (m owns it from then on; freed here on failure). */
static kn_module *add(kn_module *m, const char *name, kn_module *c) {
  if (c && kn_module_add_child(m, name, c) == KN_OK) return c;
  kn_module_free(c);
  return NULL;
}

/* 0 on success; m->root is then the whole model (kn_module_free frees it). */
static int build(model *m, int vocab_size, uint64_t seed) {
  kn_generator *g = kn_generator_new(seed);
  memset(m, 0, sizeof *m);
  m->root = kn_module_new();
  bool ok = m->root && g;
  if (ok) m->tok = add(m->root, "tok_emb", kn_nn_embedding(vocab_size, DIM, KN_NO_PADDING_IDX, g));
  if (ok) m->pos = add(m->root, "pos_emb", kn_nn_embedding(SEQ, DIM, KN_NO_PADDING_IDX, g));
  ok = ok && m->tok && m->pos;
  for (int l = 0; l < LAYERS && ok; l++) {
    char name[16];
    snprintf(name, sizeof name, "layer%d", l);
    m->layer[l] = add(m->root, name, kn_nn_transformer_encoder_layer(DIM, HEADS, FF, 0.0, true, g));
    ok = m->layer[l] != NULL;
  }
  if (ok) m->head = add(m->root, "head", kn_nn_linear(DIM, vocab_size, true, g));
  kn_generator_free(g);
  return ok && m->head ? 0 : -1;
}

/* logits [B, T, V] of ids [B, T] (T <= SEQ): causal self-attention only. */
static kn_tensor *forward(kn_module *tok, kn_module *pos, kn_module *const *layer,
                          kn_module *head, kn_tensor *ids) {
  int64_t t = kn_size(ids, 1);
  kn_tensor *h = kn_add(kn_nn_forward(tok, ids), kn_nn_forward(pos, kn_arange(kn_int(0), kn_int(t),
                                                                                kn_int(1))));
  kn_attention_mask causal = {.is_causal = true};
  for (int l = 0; l < LAYERS; l++) h = kn_nn_transformer_encoder_layer_forward(layer[l], h, &causal);
  return kn_nn_forward(head, h);
}

/* The compiled step: cross_entropy(logits as [B*T, V], y [B*T]). */
static kn_value loss_fn(const kn_value *a, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_module *layer[LAYERS];
  for (int l = 0; l < LAYERS; l++) layer[l] = a[2 + l].u.m;
  kn_tensor *logits = forward(a[0].u.m, a[1].u.m, layer, a[2 + LAYERS].u.m, a[3 + LAYERS].u.t);
  return kn_vtensor(kn_cross_entropy(kn_flatten(logits, 0, 1), a[4 + LAYERS].u.t, NULL,
                                     KN_REDUCTION_MEAN, -100, 0.0));
}

/* BATCH random windows: x[b, t] = TEXT[o + t], y[b, t] = TEXT[o + t + 1]. */
static void batch(const vocab *v, kn_generator *g, kn_tensor **x, kn_tensor **y) {
  int64_t len = (int64_t)strlen(TEXT), xs[BATCH * SEQ], ys[BATCH * SEQ];
  kn_tensor *off = kn_randint(0, len - SEQ - 1, KN_SHAPE(BATCH), g, KN_INT64);
  const int64_t *o = kn_data(off);
  for (int b = 0; b < BATCH; b++)
    for (int t = 0; t < SEQ; t++) {
      xs[b * SEQ + t] = v->id_of[(unsigned char)TEXT[o[b] + t]];
      ys[b * SEQ + t] = v->id_of[(unsigned char)TEXT[o[b] + t + 1]];
    }
  *x = kn_from_ints(xs, KN_SHAPE(BATCH, SEQ));
  *y = kn_from_ints(ys, KN_SHAPE(BATCH * SEQ));
}

/* Train for `steps` steps; *first / *last: mean loss of the first and last
** 10 steps. 0 on success. */
static int train(model *m, const vocab *v, int steps, double *first, double *last) {
  kn_tensor **ps = NULL;
  int np = kn_nn_parameters(m->root, &ps);
  kn_optimizer *opt = np > 0 ? kn_adam(ps, np, &(kn_optim_options){.lr = 3e-3}) : NULL;
  kn_compiled *step = kn_compile_fn(loss_fn, NULL, NARGS, "loss_fn", __FILE__, __LINE__, NULL);
  kn_generator *g = kn_generator_new(7);
  int rc = opt && step && g ? 0 : 1, window = steps < 20 ? steps / 2 : 10;
  *first = *last = 0;
  for (int s = 0; s < steps && rc == 0; s++) {
    kn_scope_begin();
    kn_tensor *x, *y;
    batch(v, g, &x, &y);
    kn_value args[NARGS] = {kn_vmodule(m->tok), kn_vmodule(m->pos)}, out = kn_vnone();
    for (int l = 0; l < LAYERS; l++) args[2 + l] = kn_vmodule(m->layer[l]);
    args[2 + LAYERS] = kn_vmodule(m->head);
    args[3 + LAYERS] = kn_vtensor(x), args[4 + LAYERS] = kn_vtensor(y);
    double loss = NAN;
    kn_status st = kn_call(step, args, NARGS, &out);
    if (st == KN_OK) st = kn_item_double(out.u.t, &loss);
    if (st == KN_OK) st = kn_backward(out.u.t, NULL);
    if (st == KN_OK) st = kn_clip_grad_norm(ps, np, 1.0, 2.0, NULL);
    if (st == KN_OK) st = kn_optim_step(opt);
    kn_optim_zero_grad(opt);
    kn_value_release(out);
    kn_scope_end();
    if (st != KN_OK) rc = 1;
    if (s < window) *first += loss / window;
    if (s >= steps - window) *last += loss / window;
    if (rc == 0 && (s % 20 == 0 || s == steps - 1)) printf("step %4d  loss %.4f\n", s, loss);
  }
  if (rc) fprintf(stderr, "error: %s\n", kn_last_error());
  kn_generator_free(g);
  kn_compiled_free(step);
  kn_optim_free(opt);
  free(ps);
  return rc;
}

/* n characters after prompt into out (n + prompt + 1 bytes): each one drawn
** from softmax(logits / temperature) over the top_k most likely characters,
** with the generator seeded by seed. Eager, without gradients. 0 on success. */
static int sample(model *m, const vocab *v, const char *prompt, int n, double temperature,
                  int top_k, uint64_t seed, char *out) {
  kn_generator *g = kn_generator_new(seed);
  size_t len = strlen(prompt);
  memcpy(out, prompt, len + 1);
  bool prev = kn_no_grad_begin();
  kn_nn_train(m->root, false);
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    kn_scope_begin();
    size_t t = len < SEQ ? len : SEQ; /* the last SEQ characters are the context */
    int64_t ids[SEQ];
    for (size_t k = 0; k < t; k++) ids[k] = v->id_of[(unsigned char)out[len - t + k]];
    kn_tensor *logits = forward(m->tok, m->pos, m->layer, m->head,
                                kn_from_ints(ids, KN_SHAPE(1, (int64_t)t)));
    kn_tensor *last = kn_div_scalar(kn_select(kn_select(logits, 0, 0), 0, (int64_t)t - 1),
                                    kn_float(temperature));
    kn_tensor *idx, *top = kn_topk(last, top_k, -1, true, true, &idx);
    kn_tensor *pick = kn_multinomial(kn_softmax(top, -1), 1, false, g);
    int64_t which = 0, id = 0;
    if (!pick || kn_item_int(pick, &which) != KN_OK ||
        kn_item_int(kn_select(idx, 0, which), &id) != KN_OK) {
      fprintf(stderr, "error: %s\n", kn_last_error());
      rc = 1;
    } else {
      out[len++] = v->char_of[id];
      out[len] = '\0';
    }
    kn_scope_end();
  }
  kn_nn_train(m->root, true);
  kn_no_grad_end(prev);
  kn_generator_free(g);
  return rc;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 120;
  char path[256];
  int fd = -1;
  if (argc > 2) {
    snprintf(path, sizeof path, "%s", argv[2]);
  } else {
    snprintf(path, sizeof path, "%s/char_transformer_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    fd = mkstemp(path);
  }
  vocab v;
  make_vocab(&v);
  model m, reloaded = {0};
  if (steps < 2 || (argc <= 2 && fd < 0) || build(&m, v.n, 1) != 0) {
    fprintf(stderr, "usage: char_transformer [steps >= 2 [checkpoint]] (%s)\n", kn_last_error());
    return 2;
  }
  printf("%zu characters, vocabulary %d; %d causal encoder layers (d_model %d, %d heads), "
         "%lld parameters\n", strlen(TEXT), v.n, LAYERS, DIM, HEADS,
         (long long)kn_nn_num_parameters(m.root));
  double first = 0, last = 0;
  int rc = train(&m, &v, steps, &first, &last);
  static char a[512], b[512];
  if (rc == 0) rc = sample(&m, &v, "Alice ", 200, 0.8, 8, 42, a);
  if (rc == 0) {
    printf("--- sample (temperature 0.8, top-k 8) ---\n%s\n", a);
    /* other weights, then the checkpoint's: the same sample */
    if (build(&reloaded, v.n, 2) != 0 || kn_save(m.root, path) != KN_OK ||
        kn_load(reloaded.root, path) != KN_OK ||
        sample(&reloaded, &v, "Alice ", 200, 0.8, 8, 42, b) != 0) {
      fprintf(stderr, "error: %s\n", kn_last_error());
      rc = 1;
    } else {
      bool same = strcmp(a, b) == 0;
      printf("checkpoint %s: reloaded model samples %s\n", argc > 2 ? path : "(temporary)",
             same ? "the same text" : "a different text");
      rc = same ? 0 : 1;
    }
  }
  printf("mean loss: first 10 steps %.4f, last 10 steps %.4f\n", first, last);
  if (rc == 0 && !(last < first)) {
    fprintf(stderr, "error: the loss did not fall\n");
    rc = 1;
  }
  if (fd >= 0) close(fd), unlink(path);
  kn_module_free(m.root);
  kn_module_free(reloaded.root);
  return rc;
}
