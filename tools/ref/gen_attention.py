"""gen_attention: torch reference fixtures for MultiheadAttention and
TransformerEncoderLayer with attention masks (tests/fixtures/attention.json).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_attention.py
Each case builds the torch module with seeded weights (dropout 0, training
mode, so torch runs its general path, not the inference fast path), calls it
with masks, and records the outputs and the gradients of
sum(out * g_out) [+ sum(weights * g_w)] for fixed random g's with respect to
every input that requires grad and every parameter.

inputs: one tensor per role, in the order of params["roles"]:
  "query", "key", "value" (absent key: key = query; absent value: value =
  key, as kiln's kn_nn_multihead_attention_forward takes them), "attn_mask",
  "key_padding_mask", and "state:<name>" for each state_dict entry.
params: {"module": "mha" | "encoder", "cfg": constructor arguments,
         "roles": [...], "need_weights": bool}
outputs: [out] or [out, averaged attention weights]; grads: per input.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402

cases = []


def randomize(m, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for t in m.state_dict().values():
            t.copy_(torch.randn(t.shape, generator=g).mul(0.5).round(decimals=4))


def x32(*sizes, seed=0, grad=True):
    return refgen.randn(*sizes, gen=refgen.seeded(seed), dtype=torch.float32, requires_grad=grad)


def causal_bool(l, s=None):
    return torch.ones(l, s or l, dtype=torch.bool).triu(1)


def padding(rows, s):
    """key_padding_mask [N, S]: row r masks its last rows[r] keys."""
    m = torch.zeros(len(rows), s, dtype=torch.bool)
    for r, n in enumerate(rows):
        if n:
            m[r, s - n:] = True
    return m


def add(name, module, cfg, inputs, seed=1, need_weights=True, grads=True):
    """inputs: list of (role, tensor). Runs the module and records the case."""
    m = module
    randomize(m, seed)
    m.train(True)
    names = list(m.state_dict().keys())
    params = dict(m.named_parameters())
    tensors = dict(inputs)
    q = tensors["query"]
    k = tensors.get("key", q)
    v = tensors.get("value", k)
    kw = {}
    if "attn_mask" in tensors:
        kw["attn_mask" if cfg["module"] == "mha" else "src_mask"] = tensors["attn_mask"]
    if "key_padding_mask" in tensors:
        kpm = "key_padding_mask" if cfg["module"] == "mha" else "src_key_padding_mask"
        kw[kpm] = tensors["key_padding_mask"]
    if cfg["module"] == "mha":
        out, w = m(q, k, v, need_weights=need_weights, **kw)
        outs = [out, w] if need_weights else [out]
    else:
        outs = [m(q, **kw)]
    gen = refgen.seeded(seed + 100)
    g_outs = [torch.randn(o.shape, generator=gen).round(decimals=4) for o in outs]
    roles = [r for r, _ in inputs] + ["state:" + n for n in names]
    all_in = [t for _, t in inputs] + [params.get(n, m.state_dict()[n]) for n in names]
    grad_list = None
    if grads:
        diff = [t for t in all_in if t.requires_grad]
        loss = sum((o * g).sum() for o, g in zip(outs, g_outs))
        gs = iter(torch.autograd.grad(loss, diff))
        grad_list = [next(gs) if t.requires_grad else None for t in all_in]
    enc_in = [t.detach().clone().requires_grad_(t.requires_grad) for t in all_in]
    cases.append(refgen.case(name, cfg["module"], enc_in, [o.detach() for o in outs],
                             params={"module": cfg["module"], "cfg": cfg, "roles": roles,
                                     "need_weights": need_weights},
                             grads=grad_list, grad_outputs=g_outs if grads else None))


def mha(e, heads, batch_first=True):
    return (nn.MultiheadAttention(e, heads, batch_first=batch_first),
            {"module": "mha", "e": e, "heads": heads, "batch_first": batch_first})


def encoder(d, nhead, ff, batch_first=True):
    return (nn.TransformerEncoderLayer(d, nhead, dim_feedforward=ff, dropout=0.0,
                                       batch_first=batch_first),
            {"module": "encoder", "d": d, "nhead": nhead, "ff": ff, "batch_first": batch_first})


N, L, E, H = 2, 5, 8, 2

# ---- MultiheadAttention, self-attention ----------------------------------------------
add("mha_causal_bool", *mha(E, H), [("query", x32(N, L, E, seed=1)),
                                    ("attn_mask", causal_bool(L))])
fmask = refgen.randn(L, L, gen=refgen.seeded(2), dtype=torch.float32, requires_grad=True)
add("mha_float_mask_2d_with_grad", *mha(E, H), [("query", x32(N, L, E, seed=3)),
                                                ("attn_mask", fmask)])
g3 = torch.Generator().manual_seed(4)
mask3d = (torch.rand(N * H, L, L, generator=g3) < 0.4) & ~torch.eye(L, dtype=torch.bool)
add("mha_bool_mask_3d", *mha(E, H), [("query", x32(N, L, E, seed=5)), ("attn_mask", mask3d)])
fmask3d = refgen.randn(N * H, L, L, gen=refgen.seeded(6), dtype=torch.float32)
add("mha_float_mask_3d", *mha(E, H), [("query", x32(N, L, E, seed=7)), ("attn_mask", fmask3d)])
add("mha_key_padding", *mha(E, H), [("query", x32(N, L, E, seed=8)),
                                    ("key_padding_mask", padding([0, 2], L))])
add("mha_causal_and_padding", *mha(E, H), [("query", x32(N, L, E, seed=9)),
                                           ("attn_mask", causal_bool(L)),
                                           ("key_padding_mask", padding([1, 0], L))])
add("mha_float_mask_and_bool_padding", *mha(E, H),
    [("query", x32(N, L, E, seed=10)),
     ("attn_mask", nn.Transformer.generate_square_subsequent_mask(L)),
     ("key_padding_mask", padding([0, 3], L))])
fkpm = torch.zeros(N, L).masked_fill(padding([2, 1], L), float("-inf"))
add("mha_float_padding", *mha(E, H), [("query", x32(N, L, E, seed=11)),
                                      ("key_padding_mask", fkpm)])
add("mha_seq_first_masks", *mha(6, 3, batch_first=False),
    [("query", x32(4, 3, 6, seed=12)), ("attn_mask", causal_bool(4)),
     ("key_padding_mask", padding([0, 1, 2], 4))])
add("mha_no_weights", *mha(E, H), [("query", x32(N, L, E, seed=13)),
                                   ("attn_mask", causal_bool(L))], need_weights=False)

# ---- cross-attention ----------------------------------------------------------------
S = 6
add("mha_cross_separate_kv", *mha(E, H),
    [("query", x32(N, 4, E, seed=14)), ("key", x32(N, S, E, seed=15)),
     ("value", x32(N, S, E, seed=16)),
     ("attn_mask", refgen.randn(4, S, gen=refgen.seeded(17), dtype=torch.float32)),
     ("key_padding_mask", padding([2, 0], S))])
add("mha_cross_key_is_value", *mha(E, H, batch_first=False),
    [("query", x32(3, N, E, seed=18)), ("key", x32(S, N, E, seed=19)),
     ("attn_mask", causal_bool(3, S))])

# ---- fully masked rows: NaN, as torch 1.13 ----------------------------------------------
add("mha_fully_masked_row_nan", *mha(E, H),
    [("query", x32(N, L, E, seed=20, grad=False)), ("key_padding_mask", padding([0, L], L))],
    grads=False)

# ---- TransformerEncoderLayer ----------------------------------------------------------
add("encoder_causal_float_and_padding", *encoder(E, H, 16),
    [("query", x32(N, L, E, seed=21)),
     ("attn_mask", nn.Transformer.generate_square_subsequent_mask(L)),
     ("key_padding_mask", padding([0, 2], L))])
add("encoder_seq_first_bool_3d", *encoder(6, 2, 12, batch_first=False),
    [("query", x32(4, N, 6, seed=22)),
     ("attn_mask", causal_bool(4).expand(N * 2, 4, 4).contiguous())])

refgen.write("attention", cases, generator="gen_attention.py")
