/*
** nn/rnn.c: LSTM (multi-layer, batch_first), written with kiln ops: each
** layer projects the whole input sequence once (x W_ih^T + b_ih + b_hh, one
** GEMM), then runs the recurrence in one op (kn_lstm_layer, ops/nn_rnn.c:
** per step one GEMM h W_hh^T and one fused cell pass).
**   i[0] input_size, i[1] hidden_size, i[2] num_layers, i[3] bias,
**   i[4] batch_first
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "nn/nn_int.h"
#include "ops/symsize.h"
#include "tensor/tensor.h"

static kn_tensor *param(const kn__nn_ctx *c, const char *kind, int layer) {
  char name[40];
  snprintf(name, sizeof name, "%s_l%d", kind, layer);
  return kn__nn_get(c, name);
}

/* One layer over x [B, T, in] from (h, c) [B, H]; returns [B, T, H] and
** updates *h, *c. Inside the caller's scope. The input projection of all
** steps is one GEMM (x [B*T, in] @ W_ih^T + (b_ih + b_hh)); the recurrence
** is one op (kn_lstm_layer: per step one GEMM h @ W_hh^T and one fused cell
** pass), and so is its backward. */
static kn_tensor *lstm_layer(const kn__nn_layer *l, const kn__nn_ctx *c, int k, kn_tensor *x,
                             kn_tensor **h, kn_tensor **cell) {
  kn_tensor *b = l->i[3] ? kn_add(param(c, "bias_ih", k), param(c, "bias_hh", k)) : NULL;
  kn_tensor *pre = l->i[3] && !b ? NULL : kn_linear(x, param(c, "weight_ih", k), b);
  return pre ? kn_lstm_layer(pre, *h, *cell, param(c, "weight_hh", k), h, cell) : NULL;
}

/* The batch size stays symbolic (no guard on it under dynamic shapes). */
static kn_tensor *state_or_zeros(kn_tensor *s, int k, kn_sym batch, int64_t hidden) {
  return s ? kn_select(s, 0, k)
           : kn__full_sym(2, (kn_sym[]){batch, kn__sym_const(hidden)}, kn_float(0), KN_FLOAT32);
}

/* Sizes are compared symbolically: a sequence length that became dynamic
** is not guarded on (its range, >= 2, already excludes 0). */
static kn_status check_input(const kn__nn_layer *l, kn_tensor *x) {
  kn_sym sx[KN_MAX_DIMS];
  if (kn_ndim(x) == 3) kn__tensor_symsizes(x, sx);
  if (kn_ndim(x) != 3 || !kn__sym_guard_eq_int(sx[2], l->i[0]))
    return kn__error(KN_ESHAPE, "LSTM: expected input of shape [%s, %lld], found %dD input "
                                "with last size %lld", l->i[4] ? "B, T" : "T, B",
                     (long long)l->i[0], kn_ndim(x),
                     (long long)(kn_ndim(x) ? kn_size(x, kn_ndim(x) - 1) : 0));
  if (kn__sym_guard_eq_int(sx[l->i[4] ? 1 : 0], 0))
    return kn__error(KN_ESHAPE, "LSTM: expected at least one time step");
  return KN_OK;
}

static kn_tensor *lstm_run(kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x, kn_tensor *h0,
                           kn_tensor *c0, kn_tensor **h_n, kn_tensor **c_n) {
  if (check_input(l, x) != KN_OK) return NULL;
  kn_scope_begin();
  if (!l->i[4]) x = kn_transpose(x, 0, 1); /* run batch-first */
  kn_sym sx[KN_MAX_DIMS];
  kn__tensor_symsizes(x, sx);
  kn_sym batch = sx[0];
  int64_t hidden = l->i[1];
  kn_tensor *hs[16], *cs[16];
  for (int k = 0; k < l->i[2] && x; k++) {
    hs[k] = state_or_zeros(h0, k, batch, hidden);
    cs[k] = state_or_zeros(c0, k, batch, hidden);
    x = lstm_layer(l, c, k, x, &hs[k], &cs[k]);
  }
  if (x && !l->i[4]) x = kn_transpose(x, 0, 1);
  kn_tensor *hn = x ? kn_stack(hs, (int)l->i[2], 0) : NULL;
  kn_tensor *cn = x ? kn_stack(cs, (int)l->i[2], 0) : NULL;
  if (h_n) *h_n = kn_retain(hn);
  if (c_n) *c_n = kn_retain(cn);
  return kn_scope_end_keep(x);
}

static kn_tensor *lstm_fwd(kn_module *m, kn__nn_layer *l, const kn__nn_ctx *c, kn_tensor *x) {
  (void)m;
  return lstm_run(l, c, x, NULL, NULL, NULL, NULL);
}

static void lstm_repr(const kn__nn_layer *l, kn__sb *sb) {
  kn__sb_printf(sb, "%lld, %lld", (long long)l->i[0], (long long)l->i[1]);
  if (l->i[2] != 1) kn__sb_printf(sb, ", num_layers=%lld", (long long)l->i[2]);
  if (!l->i[3]) kn__sb_puts(sb, ", bias=False");
  if (l->i[4]) kn__sb_puts(sb, ", batch_first=True");
}

static const kn__nn_type lstm_type = {"LSTM", lstm_fwd, lstm_repr};

kn_tensor *kn_nn_lstm_forward(kn_module *m, kn_tensor *input, kn_tensor *h0, kn_tensor *c0,
                              kn_tensor **h_n, kn_tensor **c_n) {
  kn__nn_layer *l = kn__nn_layer_of(m);
  if (h_n) *h_n = NULL;
  if (c_n) *c_n = NULL;
  if (!l || l->type != &lstm_type || !input) {
    kn__error(KN_EINVAL, "kn_nn_lstm_forward: expected an LSTM layer and an input");
    return NULL;
  }
  kn__nn_ctx ctx = {m, ""};
  kn_tensor *hn = NULL, *cn = NULL;
  kn_tensor *y = lstm_run(l, &ctx, input, h0, c0, &hn, &cn);
  /* hn / cn are owned here: hand them out like op results (in the scope). */
  if (y && h_n) *h_n = kn__autorelease(hn);
  else kn_release(hn);
  if (y && c_n) *c_n = kn__autorelease(cn);
  else kn_release(cn);
  return y;
}

kn_module *kn_nn_lstm(int64_t input_size, int64_t hidden_size, int num_layers, bool bias,
                      bool batch_first, kn_generator *gen) {
  if (input_size <= 0 || hidden_size <= 0 || num_layers < 1 || num_layers > 16) {
    kn__error(KN_EINVAL, "LSTM: expected positive sizes and 1 to 16 layers, found %lld, %lld, "
                         "%d", (long long)input_size, (long long)hidden_size, num_layers);
    return NULL;
  }
  kn__nn_layer *l;
  kn_module *m = kn__nn_new(&lstm_type, &l);
  if (!m) return NULL;
  int64_t cfg[5] = {input_size, hidden_size, num_layers, bias, batch_first};
  for (int k = 0; k < 5; k++) l->i[k] = cfg[k];
  double bound = 1.0 / sqrt((double)hidden_size);
  kn_status st = KN_OK;
  for (int k = 0; k < num_layers && st == KN_OK; k++) {
    char name[40];
    int64_t in = k ? hidden_size : input_size;
    snprintf(name, sizeof name, "weight_ih_l%d", k);
    st = kn__nn_add(m, name, kn__nn_uniform(KN_SHAPE(4 * hidden_size, in), bound, gen), true);
    snprintf(name, sizeof name, "weight_hh_l%d", k);
    if (st == KN_OK)
      st = kn__nn_add(m, name, kn__nn_uniform(KN_SHAPE(4 * hidden_size, hidden_size), bound,
                                              gen), true);
    for (int b = 0; b < 2 && bias && st == KN_OK; b++) {
      snprintf(name, sizeof name, b ? "bias_hh_l%d" : "bias_ih_l%d", k);
      st = kn__nn_add(m, name, kn__nn_uniform(KN_SHAPE(4 * hidden_size), bound, gen), true);
    }
  }
  if (st != KN_OK) kn_module_free(m);
  return st == KN_OK ? m : NULL;
}
