"""refgen: shared helpers for the torch reference fixture generators.

Each op family has a tools/ref/gen_<family>.py that imports this module,
computes outputs (and gradients) with torch eager for fixed small inputs and
writes tests/fixtures/<family>.json. Run generators by hand with Debian's
torch: `/usr/bin/python3 tools/ref/gen_<family>.py`. The JSON format is
described in tools/ref/README.md; tests read it with tests/support/fixture.h.
"""
import json
import math
import os
import sys

import torch

FORMAT = "kiln-ref-1"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE_DIR = os.path.join(REPO, "tests", "fixtures")

_DTYPES = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8",
    torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.float32: "float32", torch.float64: "float64",
}


def _value(v):
    """One element as JSON: ints and bools as integers, floats as numbers or
    the strings "nan", "inf", "-inf"."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(v)


def encode(t, requires_grad=None):
    """Encode a tensor: dtype, sizes, row-major values (and requires_grad if
    asked, or when t is a leaf that requires grad)."""
    t = t.detach()
    flat = t.reshape(-1)
    if t.dtype in (torch.float16, torch.bfloat16):
        flat = flat.to(torch.float64)  # exact: both widen losslessly
    enc = {"dtype": _DTYPES[t.dtype], "sizes": list(t.shape),
           "values": [_value(v) for v in flat.tolist()]}
    if requires_grad:
        enc["requires_grad"] = True
    return enc


def case(name, op, inputs, outputs, params=None, grads=None, grad_outputs=None):
    """Build one case. inputs/outputs: lists of tensors (an output may be a
    single tensor); grads: list with a tensor or None per input; grad_outputs:
    list per output or None (gradients of sum() of the outputs)."""
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    c = {"name": name, "op": op,
         "inputs": [encode(t, t.requires_grad) for t in inputs],
         "params": params or {},
         "outputs": [encode(t) for t in outputs]}
    if grads is not None:
        c["grads"] = [None if g is None else encode(g) for g in grads]
    if grad_outputs is not None:
        c["grad_outputs"] = [None if g is None else encode(g) for g in grad_outputs]
    return c


def grads_of(fn, inputs, grad_outputs=None):
    """Run fn(*inputs) with torch autograd. Inputs that require grad get
    gradients: of sum() of the outputs, or of the given grad_outputs.
    Returns (outputs list, grads list with None for non-differentiated inputs)."""
    xs = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    out = fn(*xs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    diff = [x for x in xs if x.requires_grad]
    grads = [None] * len(xs)
    if diff:
        if grad_outputs is None:
            total = sum(o.sum() for o in outs if o.requires_grad)
            gs = torch.autograd.grad(total, diff, allow_unused=True)
        else:
            pairs = [(o, g) for o, g in zip(outs, grad_outputs) if g is not None]
            gs = torch.autograd.grad([o for o, _ in pairs], diff,
                                     [g for _, g in pairs], allow_unused=True)
        it = iter(gs)
        grads = [next(it) if x.requires_grad else None for x in xs]
    return [o.detach() for o in outs], grads


def op_case(name, op, fn, inputs, params=None, grad_outputs=None):
    """Shorthand: compute outputs and gradients of fn(*inputs) and build the
    case (gradients only when some input requires grad)."""
    outs, grads = grads_of(fn, inputs, grad_outputs)
    has_grads = any(t.requires_grad for t in inputs)
    return case(name, op, inputs, outs, params,
                grads if has_grads else None,
                grad_outputs if has_grads else None)


def write(family, cases, generator=None):
    """Write tests/fixtures/<family>.json (one case per line) and print a
    summary line."""
    names = [c["name"] for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError("duplicate case names: %s" % sorted(dup))
    doc = {"format": FORMAT, "family": family,
           "generator": generator or os.path.basename(sys.argv[0]),
           "torch_version": torch.__version__.split("+")[0],
           "cases": cases}
    os.makedirs(FIXTURE_DIR, exist_ok=True)
    path = os.path.join(FIXTURE_DIR, family + ".json")
    head = dict(doc)
    del head["cases"]
    with open(path, "w") as f:
        # one case per line: diffs stay readable, files stay small
        f.write(json.dumps(head, allow_nan=False)[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, allow_nan=False, separators=(",", ":"))
                           for c in cases))
        f.write("\n]}\n")
    print("wrote %s: %d cases" % (os.path.relpath(path, REPO), len(cases)))
    return path


def seeded(seed=0):
    """A torch.Generator with a fixed seed, for reproducible inputs."""
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def randn(*sizes, dtype=torch.float64, gen=None, requires_grad=False):
    """Reproducible normal inputs (rounded to 4 decimals so fixtures stay short)."""
    t = torch.randn(*sizes, generator=gen or seeded(0), dtype=torch.float64)
    t = torch.round(t * 1e4) / 1e4
    return t.to(dtype).requires_grad_(requires_grad)
