/*
** examples/char_lstm.c: a character-level language model on a text every
** Debian machine has (default /usr/share/common-licenses/GPL-3): Embedding
** -> LSTM -> Linear, trained with Adam and gradient clipping on random
** 48-character windows, then sampled from.
**
**   build/examples/char_lstm [text_file] [steps]
**
** The training step (forward + loss) is compiled: the LSTM's loop over 48
** time steps is traced into one graph. 150 steps by default (about 30 s on
** 2 cores). Prints the loss every 50 steps (it falls from about
** ln(vocabulary) ~ 4.3 to below 2) and 300 sampled characters. Uses only the public API (#include <kiln/kiln.h>).
*/
#include <kiln/kiln.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQ 48
#define BATCH 32
#define EMBED 32
#define HIDDEN 128

typedef struct corpus {
  unsigned char *text;
  long len;
  int vocab;
  int64_t id_of[256];
  unsigned char char_of[256];
} corpus;

static int read_corpus(const char *path, corpus *c) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  c->text = malloc(1 << 20);
  c->len = c->text ? (long)fread(c->text, 1, 1 << 20, f) : 0;
  fclose(f);
  if (c->len < SEQ + 2) return -1;
  memset(c->id_of, -1, sizeof c->id_of);
  for (long i = 0; i < c->len; i++)
    if (c->id_of[c->text[i]] < 0) {
      c->char_of[c->vocab] = c->text[i];
      c->id_of[c->text[i]] = c->vocab++;
    }
  return 0;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) { /* xorshift64 */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* x[b, t] = text[o + t], y[b, t] = text[o + t + 1] for random offsets o. */
static void batch(const corpus *c, kn_tensor **x, kn_tensor **y) {
  static int64_t xs[BATCH * SEQ], ys[BATCH * SEQ];
  for (int b = 0; b < BATCH; b++) {
    long o = (long)(next_rand() % (uint64_t)(c->len - SEQ - 1));
    for (int t = 0; t < SEQ; t++) {
      xs[b * SEQ + t] = c->id_of[c->text[o + t]];
      ys[b * SEQ + t] = c->id_of[c->text[o + t + 1]];
    }
  }
  *x = kn_from_ints(xs, KN_SHAPE(BATCH, SEQ));
  *y = kn_from_ints(ys, KN_SHAPE(BATCH * SEQ));
}

/* loss = cross_entropy(model(x) as [B*T, V], y) */
static kn_value loss_fn(const kn_value *args, int nargs, void *ud) {
  (void)nargs, (void)ud;
  kn_tensor *logits = kn_nn_forward(args[0].u.m, args[1].u.t);
  kn_tensor *flat = kn_flatten(logits, 0, 1);
  return kn_vtensor(kn_cross_entropy(flat, args[2].u.t, NULL, KN_REDUCTION_MEAN, -100, 0.0));
}

/* Sample n characters after a prompt, feeding the last SEQ characters. */
static void sample(kn_module *m, const corpus *c, const char *prompt, int n, double temp) {
  unsigned char buf[SEQ];
  int len = 0;
  for (const char *p = prompt; *p && len < SEQ; p++)
    if (c->id_of[(unsigned char)*p] >= 0) buf[len++] = (unsigned char)*p;
  fputs(prompt, stdout);
  bool prev = kn_no_grad_begin();
  kn_nn_train(m, false);
  for (int i = 0; i < n; i++) {
    kn_scope_begin();
    int64_t ids[SEQ];
    for (int t = 0; t < len; t++) ids[t] = c->id_of[buf[t]];
    kn_tensor *logits = kn_nn_forward(m, kn_from_ints(ids, KN_SHAPE(1, len)));
    kn_tensor *last = kn_select(kn_select(logits, 0, 0), 0, len - 1);
    kn_tensor *p = kn_contiguous(kn_softmax(kn_div_scalar(last, kn_float(temp)), 0));
    const float *pr = p ? kn_data(p) : NULL;
    double u = (double)(next_rand() >> 11) / 9007199254740992.0, acc = 0;
    int k = 0;
    for (; pr && k < c->vocab - 1; k++)
      if ((acc += pr[k]) > u) break;
    unsigned char ch = c->char_of[k];
    putchar(ch);
    if (len == SEQ) memmove(buf, buf + 1, SEQ - 1), len--;
    buf[len++] = ch;
    kn_scope_end();
  }
  putchar('\n');
  kn_nn_train(m, true);
  kn_no_grad_end(prev);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/usr/share/common-licenses/GPL-3";
  int steps = argc > 2 ? atoi(argv[2]) : 150;
  corpus c = {0};
  if (read_corpus(path, &c) != 0) {
    fprintf(stderr, "error: cannot read a text of at least %d bytes from %s\n", SEQ + 2, path);
    return 1;
  }
  kn_generator *g = kn_generator_new(5);
  kn_module *m = kn_nn_sequential(3, (kn_module *[]){
                                         kn_nn_embedding(c.vocab, EMBED, KN_NO_PADDING_IDX, g),
                                         kn_nn_lstm(EMBED, HIDDEN, 1, true, true, g),
                                         kn_nn_linear(HIDDEN, c.vocab, true, g)});
  kn_tensor **ps = NULL;
  int np = m ? kn_nn_parameters(m, &ps) : -1;
  kn_optimizer *opt = np > 0 ? kn_adam(ps, np, &(kn_optim_options){.lr = 1e-2}) : NULL;
  kn_compiled *f = kn_compile_fn(loss_fn, NULL, 3, "loss_fn", __FILE__, __LINE__, NULL);
  int rc = opt && f ? 0 : 1;
  printf("%s: %ld characters, vocabulary %d; Embedding(%d) -> LSTM(%d) -> Linear, %lld "
         "parameters\n", path, c.len, c.vocab, EMBED, HIDDEN,
         (long long)kn_nn_num_parameters(m));
  double first = NAN, last = NAN;
  for (int s = 0; s < steps && rc == 0; s++) {
    kn_scope_begin();
    kn_tensor *x, *y;
    batch(&c, &x, &y);
    kn_value args[3] = {kn_vmodule(m), kn_vtensor(x), kn_vtensor(y)}, out;
    kn_status st = kn_call(f, args, 3, &out);
    if (st == KN_OK) st = kn_item_double(out.u.t, &last);
    if (st == KN_OK) st = kn_backward(out.u.t, NULL);
    if (st == KN_OK) st = kn_clip_grad_norm(ps, np, 1.0, 2.0, NULL);
    if (st == KN_OK) st = kn_optim_step(opt);
    kn_optim_zero_grad(opt);
    if (out.kind == KN_VTENSOR) kn_value_release(out);
    kn_scope_end();
    if (st != KN_OK) rc = 1;
    if (s == 0) first = last;
    if (rc == 0 && (s % 50 == 0 || s == steps - 1)) printf("step %4d  loss %.4f\n", s, last);
  }
  if (rc == 0) {
    printf("--- sample ---\n");
    sample(m, &c, "The ", 300, 0.8);
    rc = last < first ? 0 : 1;
  } else {
    fprintf(stderr, "error: %s\n", kn_last_error());
  }
  free(ps);
  kn_compiled_free(f);
  kn_optim_free(opt);
  kn_module_free(m);
  kn_generator_free(g);
  free(c.text);
  return rc;
}
