"""gen_sdpa: torch reference fixtures for scaled_dot_product_attention
(tests/fixtures/sdpa.json).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_sdpa.py
torch 1.13 has no torch.nn.functional.scaled_dot_product_attention (it came
with torch 2.0), so the reference is the formula that function documents,
computed with torch ops in float64:
    attn = q @ k.transpose(-2, -1) * scale        (scale = 1 / sqrt(E) unless given)
    attn = attn.masked_fill(~mask, -inf)           (bool mask: True = attend)
    attn = attn + mask                             (float mask)
    attn = attn.masked_fill(~ones(L, S).tril(), -inf)   (is_causal)
    out  = softmax(attn, -1) @ v
inputs: query, key, value[, attn_mask]; params: is_causal, scale (absent:
the default); outputs: [out]; grads of sum(out * grad_output) for every input
that requires grad (a float mask included).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402

cases = []


def sdpa(q, k, v, mask=None, is_causal=False, scale=None):
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) * (scale if scale is not None else 1.0 / math.sqrt(E))
    if mask is not None and mask.dtype == torch.bool:
        s = s.masked_fill(~mask, float("-inf"))
    elif mask is not None:
        s = s + mask
    if is_causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, -1) @ v


def x64(*sizes, seed):
    return refgen.randn(*sizes, gen=refgen.seeded(seed), dtype=torch.float64, requires_grad=True)


def add(name, q, k, v, mask=None, is_causal=False, scale=None, seed=0):
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    out_shape = q.shape[:-1] + v.shape[-1:]
    g_out = torch.randn(out_shape, generator=refgen.seeded(seed + 100),
                        dtype=torch.float64).round(decimals=4)
    params = {"is_causal": is_causal}
    if scale is not None:
        params["scale"] = scale

    def fn(q, k, v, m=None):
        return sdpa(q, k, v, m, is_causal, scale)
    cases.append(refgen.op_case(name, "scaled_dot_product_attention", fn, inputs, params,
                                grad_outputs=[g_out]))


add("plain_4d", x64(2, 3, 5, 4, seed=1), x64(2, 3, 7, 4, seed=2), x64(2, 3, 7, 6, seed=3), seed=1)
add("causal_square", x64(1, 2, 6, 4, seed=4), x64(1, 2, 6, 4, seed=5), x64(1, 2, 6, 4, seed=6),
    is_causal=True, seed=2)
add("causal_top_left_l4_s6", x64(2, 1, 4, 3, seed=7), x64(2, 1, 6, 3, seed=8),
    x64(2, 1, 6, 5, seed=9), is_causal=True, seed=3)
pad = torch.ones(2, 1, 1, 7, dtype=torch.bool)
pad[0, 0, 0, 5:] = False
pad[1, 0, 0, 3:] = False
add("bool_padding_mask", x64(2, 2, 5, 4, seed=10), x64(2, 2, 7, 4, seed=11),
    x64(2, 2, 7, 4, seed=12), mask=pad, seed=4)
fmask = refgen.randn(5, 7, gen=refgen.seeded(13), dtype=torch.float64, requires_grad=True)
add("float_mask_with_grad", x64(2, 2, 5, 4, seed=14), x64(2, 2, 7, 4, seed=15),
    x64(2, 2, 7, 4, seed=16), mask=fmask, seed=5)
add("custom_scale_3d", x64(3, 5, 4, seed=17), x64(3, 5, 4, seed=18), x64(3, 5, 2, seed=19),
    scale=0.3, seed=6)
add("seq1_heads1", x64(2, 1, 1, 4, seed=20), x64(2, 1, 1, 4, seed=21), x64(2, 1, 1, 4, seed=22),
    seed=7)

refgen.write("sdpa", cases)
