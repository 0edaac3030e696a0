"""gen_autocast: torch 1.13's CPU autocast policy on kiln's ops, read by
tests/test_autocast.c.  /usr/bin/python3 tools/ref/gen_autocast.py

Each case runs one op under torch.autocast("cpu", dtype=torch.bfloat16)
three times: with every floating input float32, with every floating input
bfloat16, and mixed (the first floating input float32, the others bfloat16).
params.dtypes records the output dtype of each run ("error" when torch
refused the inputs); params.policy is the list torch's dtypes show the op
in: "lower" (cast to the autocast dtype), "fp32" (cast to float32),
"promote" (cast to the widest input type) or "none" (the op's own type
rules). inputs/outputs hold the float32 run (outputs as torch computed them
under autocast), so tests can also compare values.
"""
import torch
import torch.nn.functional as F

import refgen

torch.manual_seed(0)


def rnd(*sizes, seed=0):
    return refgen.randn(*sizes, gen=refgen.seeded(seed)).float()


def unit(*sizes, seed=0):
    t = torch.rand(*sizes, generator=refgen.seeded(seed), dtype=torch.float64) * 0.98 + 0.01
    return (torch.round(t * 1e4) / 1e4).float()


tgt = torch.tensor([0, 3, 1, 3])  # the class targets (params.target)

CASES = [
    # name, kiln op, torch function, inputs
    ("mm", "mm", torch.mm, [rnd(4, 5), rnd(5, 3, seed=1)]),
    ("bmm", "bmm", torch.bmm, [rnd(2, 4, 5), rnd(2, 5, 3, seed=1)]),
    ("addmm", "addmm", torch.addmm, [rnd(3, seed=2), rnd(4, 5), rnd(5, 3, seed=1)]),
    ("linear", "linear", F.linear, [rnd(4, 5), rnd(3, 5, seed=1), rnd(3, seed=2)]),
    ("matmul", "matmul", torch.matmul, [rnd(2, 4, 5), rnd(5, 3, seed=1)]),
    ("conv2d", "convolution", F.conv2d, [rnd(1, 2, 5, 5), rnd(3, 2, 3, 3, seed=1),
                                          rnd(3, seed=2)]),
    ("dot", "dot", torch.dot, [rnd(5), rnd(5, seed=1)]),
    ("mv", "mv", torch.mv, [rnd(4, 5), rnd(5, seed=1)]),
    ("prod", "prod", torch.prod, [unit(2, 3) + 0.5]),
    ("prod_dim", "prod.dim_int", lambda a: torch.prod(a, 1), [unit(2, 3) + 0.5]),
    ("mse_loss", "mse_loss", F.mse_loss, [rnd(4, 5), rnd(4, 5, seed=1)]),
    ("l1_loss", "l1_loss", F.l1_loss, [rnd(4, 5), rnd(4, 5, seed=1)]),
    ("binary_cross_entropy", "binary_cross_entropy", F.binary_cross_entropy,
     [unit(4, 5), unit(4, 5, seed=1)]),
    ("nll_loss", "nll_loss_forward", lambda a: F.nll_loss(a, tgt),
     [torch.log_softmax(rnd(4, 5), 1)]),
    ("cross_entropy", "cross_entropy_loss", lambda a: F.cross_entropy(a, tgt), [rnd(4, 5)]),
    ("cat", "cat", lambda a, b: torch.cat([a, b]), [rnd(2, 3), rnd(2, 3, seed=1)]),
    ("stack", "stack", lambda a, b: torch.stack([a, b]), [rnd(2, 3), rnd(2, 3, seed=1)]),
    ("add", "add.Tensor", torch.add, [rnd(4, 5), rnd(4, 5, seed=1)]),
    ("exp", "exp", torch.exp, [rnd(4, 5)]),
    ("softmax", "_softmax", lambda a: torch.softmax(a, 1), [rnd(4, 5)]),
    ("log_softmax", "_log_softmax", lambda a: torch.log_softmax(a, 1), [rnd(4, 5)]),
    ("logsumexp", "logsumexp", lambda a: torch.logsumexp(a, 1), [rnd(4, 5)]),
    ("vector_norm", "linalg_vector_norm", lambda a: torch.linalg.vector_norm(a, 2, 1),
     [rnd(4, 5)]),
    ("sum", "sum", torch.sum, [rnd(4, 5)]),
    ("mean", "mean", torch.mean, [rnd(4, 5)]),
    ("layer_norm", "native_layer_norm", lambda a: F.layer_norm(a, (5,)), [rnd(4, 5)]),
    ("relu", "relu", torch.relu, [rnd(4, 5)]),
    ("where", "where.self", lambda a, b: torch.where(a > 0, a, b),
     [rnd(4, 5), rnd(4, 5, seed=1)]),
]


def run(fn, inputs, combo):
    xs = []
    for i, t in enumerate(inputs):
        low = combo == "bfloat16" or (combo == "mixed" and i > 0)
        xs.append(t.bfloat16() if low else t)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        try:
            return fn(*xs)
        except RuntimeError:
            return None


def policy(dts):
    if dts["float32"] == "bfloat16":
        return "lower"
    if dts["bfloat16"] == "float32":
        return "fp32"
    return "none"


cases = []
for name, op, fn, inputs in CASES:
    dts = {}
    for combo in ("float32", "bfloat16", "mixed"):
        r = run(fn, inputs, combo)
        dts[combo] = "error" if r is None else refgen._DTYPES[r.dtype]
    pol = policy(dts)
    # promote: mixed inputs run in the widest type where the op alone
    # would refuse them (cat and stack promote in torch anyway)
    if name in ("cat", "stack") and dts["mixed"] == "float32":
        pol = "promote"
    out = run(fn, inputs, "float32")
    cases.append(refgen.case(name, op, inputs, [out],
                             params={"dtypes": dts, "policy": pol, "target": tgt.tolist()}))

refgen.write("autocast", cases)
