"""gen_rnn: torch reference fixtures for the recurrent layers
(tests/fixtures/rnn.json).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_rnn.py
Cases:
  fused_lstm_cell*  the LSTM cell of torch._thnn_fused_lstm_cell(input_gates,
                    hidden_gates, cx, input_bias, hidden_bias) computed with
                    torch's CPU ops (the fused kernel is CUDA-only in torch)
                    in float64: outputs [hy, cy], and
                    the gradients of every input for the given grad_outputs.
  lstm_*            torch's LSTM (torch._VF.lstm, the kernel behind nn.LSTM)
                    training step: inputs = [x, h0, c0, then the flat weights
                    in nn.LSTM's order (weight_ih_l0, weight_hh_l0, bias_ih_l0,
                    bias_hh_l0, ...)]; outputs = [y, h_n, c_n]; gradients of
                    every input for the given grad_outputs. params: "cfg" (the
                    constructor arguments as the kiln test passes them) and
                    "names" (the weights' names).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402

cases = []


def rnd(*sizes, seed, scale=1.0, dtype=torch.float32, grad=True):
    t = (refgen.randn(*sizes, gen=refgen.seeded(seed)) * scale).round(decimals=4)
    return t.to(dtype).requires_grad_(grad)


def cell_case(name, batch, hidden, bias, only=None):
    dt = torch.float64
    ins = [rnd(batch, 4 * hidden, seed=1, dtype=dt), rnd(batch, 4 * hidden, seed=2, dtype=dt),
           rnd(batch, hidden, seed=3, dtype=dt)]
    if bias:
        ins += [rnd(4 * hidden, seed=4, dtype=dt), rnd(4 * hidden, seed=5, dtype=dt)]
    go = [rnd(batch, hidden, seed=6, dtype=dt, grad=False),
          rnd(batch, hidden, seed=7, dtype=dt, grad=False)]
    if only is not None:
        go[1 - only] = None

    def fn(ig, hg, cx, *b):
        # torch's fused kernel is CUDA-only; on CPU torch computes the cell
        # with these ops (aten/src/ATen/native/RNN.cpp, LSTMCell)
        gates = ig + hg + (b[0] + b[1] if b else 0)
        i, f, g, o = gates.chunk(4, 1)
        cy = torch.sigmoid(f) * cx + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(cy), cy
    cases.append(refgen.op_case(name, "_thnn_fused_lstm_cell", fn, ins,
                                params={"bias": bias}, grad_outputs=go))


def lstm_case(name, inp, hidden, layers, bias, batch_first, batch, steps, seed):
    shape = (batch, steps, inp) if batch_first else (steps, batch, inp)
    x = rnd(*shape, seed=seed)
    h0 = rnd(layers, batch, hidden, seed=seed + 1, scale=0.5)
    c0 = rnd(layers, batch, hidden, seed=seed + 2, scale=0.5)
    names, ws = [], []
    for k in range(layers):
        n_in = inp if k == 0 else hidden
        kinds = [("weight_ih", (4 * hidden, n_in)), ("weight_hh", (4 * hidden, hidden))]
        if bias:
            kinds += [("bias_ih", (4 * hidden,)), ("bias_hh", (4 * hidden,))]
        for j, (kind, sz) in enumerate(kinds):
            names.append("%s_l%d" % (kind, k))
            ws.append(rnd(*sz, seed=seed + 10 + 4 * k + j, scale=0.3))
    ys = (batch, steps, hidden) if batch_first else (steps, batch, hidden)
    go = [rnd(*ys, seed=seed + 3, grad=False), rnd(layers, batch, hidden, seed=seed + 4, grad=False),
          rnd(layers, batch, hidden, seed=seed + 5, grad=False)]

    def fn(x, h0, c0, *w):
        return torch._VF.lstm(x, (h0, c0), list(w), bias, layers, 0.0, True, False, batch_first)
    cfg = {"in": inp, "hidden": hidden, "layers": layers, "bias": bias,
           "batch_first": batch_first}
    cases.append(refgen.op_case(name, "LSTM", fn, [x, h0, c0] + ws,
                                params={"cfg": cfg, "names": names}, grad_outputs=go))


cell_case("fused_lstm_cell_bias", 3, 5, True)
cell_case("fused_lstm_cell_nobias", 4, 3, False)
cell_case("fused_lstm_cell_grad_h_only", 2, 4, True, only=0)
cell_case("fused_lstm_cell_grad_c_only", 2, 4, False, only=1)
lstm_case("lstm_2layer_batch_first", 5, 7, 2, True, True, 3, 6, seed=20)
lstm_case("lstm_seq_first_nobias", 4, 6, 1, False, False, 2, 5, seed=40)

refgen.write("rnn", cases, generator="gen_rnn.py")
