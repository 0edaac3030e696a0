"""gen_nn: torch reference fixtures for the nn op family (tests/fixtures/nn.json).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_nn.py
Each case records outputs and, for inputs that require grad, the gradients
of sum() of the differentiable outputs (see tools/ref/README.md). Params
name the op's arguments as the kiln test passes them.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402


def rn(*sizes, seed=0, rg=True, dtype=torch.float64):
    return refgen.randn(*sizes, gen=refgen.seeded(seed), requires_grad=rg, dtype=dtype)


cases = []

# ---- linear / matmul -----------------------------------------------------------
for name, xs, ws, bias in [("linear_2d_bias", (4, 3), (5, 3), True),
                           ("linear_3d_bias", (2, 4, 3), (5, 3), True),
                           ("linear_2d_nobias", (4, 3), (2, 3), False)]:
    ins = [rn(*xs, seed=1), rn(*ws, seed=2)] + ([rn(ws[0], seed=3)] if bias else [])
    cases.append(refgen.op_case(name, "linear", lambda *a: F.linear(*a), ins))
for name, a, b in [("matmul_bcast", (2, 1, 3, 4), (3, 4, 2)),
                   ("matmul_vec_batch", (4,), (2, 4, 3)),
                   ("matmul_fold", (2, 3, 4), (4,))]:
    cases.append(refgen.op_case(name, "matmul", torch.matmul, [rn(*a, seed=4), rn(*b, seed=5)]))
cases.append(refgen.op_case("addmm_beta_alpha", "addmm",
                            lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=-2),
                            [rn(3, seed=6), rn(2, 4, seed=7), rn(4, 3, seed=8)],
                            params={"beta": 0.5, "alpha": -2}))

# ---- conv2d ---------------------------------------------------------------------
for name, xs, ws, bias, st, pd, dl, g in [
        ("conv_basic", (2, 3, 5, 5), (4, 3, 3, 3), True, (1, 1), (0, 0), (1, 1), 1),
        ("conv_stride_pad", (1, 2, 6, 5), (3, 2, 3, 2), True, (2, 1), (1, 1), (1, 1), 1),
        ("conv_dilation", (1, 2, 7, 7), (2, 2, 2, 3), False, (1, 2), (0, 1), (2, 2), 1),
        ("conv_groups", (2, 4, 5, 4), (6, 2, 3, 3), True, (1, 1), (1, 1), (1, 1), 2),
        ("conv_depthwise", (1, 3, 4, 4), (3, 1, 2, 2), False, (2, 2), (1, 0), (1, 1), 3),
        ("conv_unbatched", (2, 4, 4), (3, 2, 3, 3), True, (1, 1), (1, 1), (1, 1), 1)]:
    ins = [rn(*xs, seed=11), rn(*ws, seed=12)] + ([rn(ws[0], seed=13)] if bias else [])
    fn = (lambda st, pd, dl, g: lambda x, w, b=None: F.conv2d(x, w, b, st, pd, dl, g))(st, pd, dl, g)
    cases.append(refgen.op_case(name, "convolution", fn, ins,
                                params={"stride": list(st), "padding": list(pd),
                                        "dilation": list(dl), "groups": g}))
x32 = rn(1, 2, 4, 4, seed=14, dtype=torch.float32)
w32 = rn(2, 2, 3, 3, seed=15, dtype=torch.float32)
cases.append(refgen.op_case("conv_float32", "convolution", lambda x, w: F.conv2d(x, w, padding=1),
                            [x32, w32], params={"stride": [1, 1], "padding": [1, 1],
                                                "dilation": [1, 1], "groups": 1}))

# ---- pooling --------------------------------------------------------------------------
for name, xs, k, s, p, d, ceil in [
        ("maxpool_basic", (2, 2, 4, 4), (2, 2), None, (0, 0), (1, 1), False),
        ("maxpool_pad_stride", (1, 2, 5, 6), (3, 3), (2, 2), (1, 1), (1, 1), False),
        ("maxpool_ceil", (1, 1, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True),
        ("maxpool_dilation", (1, 2, 7, 6), (2, 3), (1, 2), (1, 1), (2, 1), False),
        ("maxpool_unbatched", (2, 5, 5), (3, 2), (2, 1), (1, 0), (1, 1), True)]:
    fn = (lambda k, s, p, d, ceil: lambda x: F.max_pool2d(x, k, s, p, d, ceil, return_indices=True))(k, s, p, d, ceil)
    cases.append(refgen.op_case(name, "max_pool2d_with_indices", fn, [rn(*xs, seed=21)],
                                params={"kernel_size": list(k), "stride": list(s) if s else [],
                                        "padding": list(p), "dilation": list(d),
                                        "ceil_mode": ceil}))
for name, xs, k, s, p, ceil, cip, div in [
        ("avgpool_basic", (2, 2, 4, 4), (2, 2), None, (0, 0), False, True, None),
        ("avgpool_pad_include", (1, 2, 5, 5), (3, 3), (2, 2), (1, 1), False, True, None),
        ("avgpool_pad_exclude", (1, 2, 5, 5), (3, 3), (2, 2), (1, 1), False, False, None),
        ("avgpool_ceil", (1, 1, 5, 6), (2, 3), (2, 2), (1, 1), True, False, None),
        ("avgpool_divisor", (1, 1, 4, 4), (2, 2), (1, 1), (0, 0), False, True, 3)]:
    fn = (lambda k, s, p, ceil, cip, div: lambda x: F.avg_pool2d(x, k, s, p, ceil, cip, div))(k, s, p, ceil, cip, div)
    cases.append(refgen.op_case(name, "avg_pool2d", fn, [rn(*xs, seed=22)],
                                params={"kernel_size": list(k), "stride": list(s) if s else [],
                                        "padding": list(p), "ceil_mode": ceil,
                                        "count_include_pad": cip, "divisor_override": div or 0}))

# ---- batch norm (running stats are extra outputs, after the update) ------------------
def bn_case(name, xs, affine, training, momentum=0.1, eps=1e-5):
    x = rn(*xs, seed=31)
    C = xs[1]
    rm = (torch.arange(C, dtype=torch.float64) * 0.1)
    rv = (torch.arange(C, dtype=torch.float64) * 0.2 + 0.5)
    ins = [x] + ([rn(C, seed=32), rn(C, seed=33)] if affine else [])
    rm_in, rv_in = rm.clone(), rv.clone()

    def fn(x, w=None, b=None):
        rm_t, rv_t = rm.clone(), rv.clone()
        out = F.batch_norm(x, rm_t, rv_t, w, b, training, momentum, eps)
        return out, rm_t, rv_t
    outs, grads = refgen.grads_of(fn, ins)
    return refgen.case(name, "native_batch_norm", ins + [rm_in, rv_in], outs,
                       params={"training": training, "momentum": momentum, "eps": eps,
                               "affine": affine},
                       grads=grads + [None, None])

cases.append(bn_case("bn_train_affine", (4, 3, 2, 2), True, True))
cases.append(bn_case("bn_train_plain_2d", (5, 2), False, True, momentum=0.3))
cases.append(bn_case("bn_eval_affine", (2, 3, 3), True, False))

# ---- layer norm --------------------------------------------------------------------------
for name, xs, ns, affine in [("ln_last", (3, 4), (4,), True),
                             ("ln_two_dims", (2, 3, 4), (3, 4), True),
                             ("ln_plain", (2, 5), (5,), False)]:
    ins = [rn(*xs, seed=41)] + ([rn(*ns, seed=42), rn(*ns, seed=43)] if affine else [])
    fn = (lambda ns: lambda x, w=None, b=None: F.layer_norm(x, ns, w, b, 1e-5))(ns)
    cases.append(refgen.op_case(name, "native_layer_norm", fn, ins,
                                params={"normalized_shape": list(ns), "eps": 1e-5}))

# ---- embedding ------------------------------------------------------------------------------
idx = torch.tensor([[0, 2, 4], [2, 2, 1]])
for name, pad, freq in [("emb_plain", None, False), ("emb_padding", 2, False),
                        ("emb_freq", None, True)]:
    fn = (lambda pad, freq: lambda w, i: F.embedding(i, w, pad, None, 2.0, freq))(pad, freq)
    cases.append(refgen.op_case(name, "embedding", fn, [rn(5, 3, seed=51), idx],
                                params={"padding_idx": -1 if pad is None else pad,
                                        "scale_grad_by_freq": freq}))

refgen.write("nn", cases)
