"""gen_layers: torch reference fixtures for the layers of kiln/nn.h
(tests/fixtures/layers.json).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_layers.py
Each case builds a torch.nn module with seeded weights and runs one forward.
inputs = [x, then every state_dict entry in order]; params = {"names": the
state_dict names, "cfg": the constructor arguments as the kiln test passes
them, "training": mode, "repr": str(module)}; outputs = [y, then the state
after the forward (running statistics change in training mode)].
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402

cases = []


def randomize(m, seed):
    """Non-trivial weights and statistics (rounded so the JSON stays short)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in m.state_dict().items():
            if t.dtype != torch.float32:
                continue
            v = torch.randn(t.shape, generator=g).mul(0.5).round(decimals=4)
            if name.endswith("running_var"):
                v = v.abs() + 0.5
            t.copy_(v)


def add(name, m, x, cfg, training=True, seed=1, randomize_state=True, call=None):
    if randomize_state:
        randomize(m, seed)
    m.train(training)
    names = list(m.state_dict().keys())
    state = [t.detach().clone() for t in m.state_dict().values()]
    with torch.no_grad():
        y = call(m, x) if call else m(x)
    after = [t.detach().clone() for t in m.state_dict().values()]
    cases.append(refgen.case(name, type(m).__name__, [x] + state, [y] + after,
                             params={"names": names, "cfg": cfg, "training": training,
                                     "repr": str(m)}))


def x32(*sizes, seed=0):
    return refgen.randn(*sizes, gen=refgen.seeded(seed), dtype=torch.float32)


# ---- Linear -----------------------------------------------------------------------
add("linear_bias", nn.Linear(5, 3), x32(4, 5), {"in": 5, "out": 3, "bias": True})
add("linear_nobias_3d", nn.Linear(5, 3, bias=False), x32(2, 3, 5),
    {"in": 5, "out": 3, "bias": False})

# ---- Conv2d -------------------------------------------------------------------------
for name, args, kw, xs in [
        ("conv_basic", (3, 4, (3, 3)), {}, (2, 3, 6, 6)),
        ("conv_stride_pad", (2, 4, (3, 2)), {"stride": (2, 1), "padding": (1, 1)}, (1, 2, 7, 5)),
        ("conv_same_dil_groups", (4, 6, (3, 3)), {"padding": "same", "dilation": 2, "groups": 2},
         (1, 4, 7, 6)),
        ("conv_same_odd", (2, 3, (2, 4)), {"padding": "same", "bias": False}, (2, 2, 5, 6)),
        ("conv_dilation_nobias", (2, 2, (2, 2)), {"dilation": (2, 1), "bias": False},
         (1, 2, 6, 6))]:
    m = nn.Conv2d(*args, **kw)
    cfg = {"in": args[0], "out": args[1], "kernel": list(args[2]),
           "stride": list(m.stride), "padding": [0, 0] if m.padding == "same" else list(m.padding),
           "same": m.padding == "same", "dilation": list(m.dilation), "groups": m.groups,
           "bias": m.bias is not None}
    add(name, m, x32(*xs), cfg)

# ---- BatchNorm ------------------------------------------------------------------------
add("bn1d_train", nn.BatchNorm1d(3), x32(5, 3),
    {"dims": 1, "c": 3, "eps": 1e-5, "momentum": 0.1, "affine": True, "track": True})
add("bn1d_train_3d", nn.BatchNorm1d(3, momentum=0.3), x32(4, 3, 2),
    {"dims": 1, "c": 3, "eps": 1e-5, "momentum": 0.3, "affine": True, "track": True})
add("bn2d_train", nn.BatchNorm2d(4, eps=1e-3), x32(2, 4, 3, 3),
    {"dims": 2, "c": 4, "eps": 1e-3, "momentum": 0.1, "affine": True, "track": True})
add("bn2d_eval", nn.BatchNorm2d(4), x32(2, 4, 3, 3),
    {"dims": 2, "c": 4, "eps": 1e-5, "momentum": 0.1, "affine": True, "track": True},
    training=False)
add("bn2d_cumulative", nn.BatchNorm2d(2, momentum=None), x32(3, 2, 2, 2),
    {"dims": 2, "c": 2, "eps": 1e-5, "momentum": -1, "affine": True, "track": True})
add("bn2d_noaffine_notrack", nn.BatchNorm2d(2, affine=False, track_running_stats=False),
    x32(3, 2, 2, 2),
    {"dims": 2, "c": 2, "eps": 1e-5, "momentum": 0.1, "affine": False, "track": False},
    training=False)

# ---- LayerNorm -----------------------------------------------------------------------
add("layernorm_1d", nn.LayerNorm(6), x32(2, 3, 6), {"shape": [6], "eps": 1e-5, "affine": True})
add("layernorm_2d", nn.LayerNorm([3, 4], eps=1e-6), x32(2, 3, 4),
    {"shape": [3, 4], "eps": 1e-6, "affine": True})

# ---- Embedding -------------------------------------------------------------------------
add("embedding_pad", nn.Embedding(10, 4, padding_idx=2),
    torch.tensor([[1, 2, 3], [9, 0, 2]]), {"num": 10, "dim": 4, "padding_idx": 2})

# ---- activations, Flatten, Dropout (eval), pooling ----------------------------------------
xa = x32(2, 3, 4, seed=5)
for name, m, cfg in [("relu", nn.ReLU(), {}), ("gelu", nn.GELU(), {"tanh": False}),
                     ("gelu_tanh", nn.GELU(approximate="tanh"), {"tanh": True}),
                     ("silu", nn.SiLU(), {}), ("tanh", nn.Tanh(), {}),
                     ("sigmoid", nn.Sigmoid(), {}), ("dropout_eval", nn.Dropout(0.5), {"p": 0.5})]:
    add(name, m, xa, cfg, training=name != "dropout_eval")
add("flatten_default", nn.Flatten(), x32(2, 3, 4, 5), {"start": 1, "end": -1})
add("flatten_0_1", nn.Flatten(0, 1), x32(2, 3, 4, 5), {"start": 0, "end": 1})
xp = x32(2, 3, 7, 6, seed=6)
add("maxpool_2", nn.MaxPool2d(2), xp, {"k": 2, "s": 0, "p": 0})
add("maxpool_3_2_1", nn.MaxPool2d(3, stride=2, padding=1), xp, {"k": 3, "s": 2, "p": 1})
add("avgpool_2", nn.AvgPool2d(2), xp, {"k": 2, "s": 0, "p": 0})
add("avgpool_3_2_1", nn.AvgPool2d(3, stride=2, padding=1), xp, {"k": 3, "s": 2, "p": 1})

# ---- Sequential: a small CNN, training mode -----------------------------------------------
seq = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                    nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10))
add("sequential_cnn", seq, x32(3, 1, 8, 8, seed=7), {})

# ---- LSTM, MultiheadAttention, TransformerEncoderLayer --------------------------------------
add("lstm_2layer_batch_first", nn.LSTM(3, 5, num_layers=2, batch_first=True), x32(2, 4, 3, seed=8),
    {"in": 3, "hidden": 5, "layers": 2, "bias": True, "batch_first": True},
    call=lambda m, x: m(x)[0])
add("lstm_seq_first_nobias", nn.LSTM(4, 3, bias=False), x32(5, 2, 4, seed=9),
    {"in": 4, "hidden": 3, "layers": 1, "bias": False, "batch_first": False},
    call=lambda m, x: m(x)[0])
add("mha_batch_first", nn.MultiheadAttention(8, 2, batch_first=True), x32(2, 5, 8, seed=10),
    {"e": 8, "heads": 2, "batch_first": True}, call=lambda m, x: m(x, x, x)[0])
add("mha_seq_first", nn.MultiheadAttention(6, 3), x32(4, 2, 6, seed=11),
    {"e": 6, "heads": 3, "batch_first": False}, call=lambda m, x: m(x, x, x)[0])
add("transformer_encoder_layer",
    nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True), x32(2, 5, 8, seed=12),
    {"d": 8, "nhead": 2, "ff": 16, "dropout": 0.1, "batch_first": True}, training=False)

refgen.write("layers", cases, generator="gen_layers.py")
