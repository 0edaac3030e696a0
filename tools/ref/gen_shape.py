"""gen_shape: torch 1.13 reference fixtures for kiln's shape and indexing ops.

Writes tests/fixtures/shape.json (read by tests/test_shape_ref.c). Every case
records outputs, the gradients of sum() of the outputs for inputs that
require grad, and for view ops the geometry torch gives each output
(params["geometry"]: [sizes, strides, storage_offset] per output). Params
"pre_permute" / "pre_t" describe a non-contiguous view taken of input 0
before the op (applied identically by the test).

Run: /usr/bin/python3 tools/ref/gen_shape.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402


def rn(*sizes, seed=0, rg=True):
    return refgen.randn(*sizes, gen=refgen.seeded(seed), requires_grad=rg)


def long(*vals, shape=None):
    t = torch.tensor(vals, dtype=torch.int64)
    return t.view(*shape) if shape else t


def pre(x, params):
    if "pre_permute" in params:
        x = x.permute(*params["pre_permute"])
    if params.get("pre_t"):
        x = x.t()
    return x


def geom(outs):
    return [[list(o.shape), list(o.stride()), o.storage_offset()] for o in outs]


CASES = []


def add(name, op, fn, inputs, params=None, view=False):
    params = dict(params or {})

    def run(*xs):
        xs = list(xs)
        xs[0] = pre(xs[0], params)
        return fn(*xs)

    c = refgen.op_case(name, op, run, inputs, params)
    if view:
        xs = [t.detach() for t in inputs]
        xs[0] = pre(xs[0], params)
        out = fn(*xs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        for o in outs:
            assert o.storage().data_ptr() == xs[0].storage().data_ptr(), name
        c["params"]["geometry"] = geom(outs)
    CASES.append(c)


def main():
    x = rn(2, 6)
    y = rn(2, 3, 4, seed=1)
    add("view_infer", "view", lambda a: a.view(3, -1), [x], {"size": [3, -1]}, view=True)
    add("view_noncontig", "view", lambda a: a.view(3, 2, 2, 2), [y],
        {"size": [3, 2, 2, 2], "pre_permute": [1, 0, 2]}, view=True)
    add("reshape_alias", "reshape", lambda a: a.reshape(-1, 2), [y], {"size": [-1, 2]}, view=True)
    add("reshape_copy", "reshape", lambda a: a.reshape(6, 4), [y],
        {"size": [6, 4], "pre_permute": [2, 0, 1]})
    add("permute", "permute", lambda a: a.permute(2, 0, 1), [y], {"dims": [2, 0, 1]}, view=True)
    add("transpose", "transpose", lambda a: a.transpose(-1, 0), [y], {"dim0": -1, "dim1": 0},
        view=True)
    add("t", "t", lambda a: a.t(), [x], {}, view=True)
    add("expand", "expand", lambda a: a.expand(3, -1, 6), [rn(2, 1, seed=2)],
        {"size": [3, -1, 6]}, view=True)
    add("unsqueeze", "unsqueeze", lambda a: a.unsqueeze(-2), [y], {"dim": -2}, view=True)
    add("squeeze", "squeeze", lambda a: a.squeeze(), [rn(1, 3, 1, 2, seed=3)], {}, view=True)
    add("squeeze_dim", "squeeze_dim", lambda a: a.squeeze(2), [rn(1, 3, 1, 2, seed=3)],
        {"dim": 2}, view=True)
    add("flatten_view", "flatten", lambda a: a.flatten(1), [y], {"start": 1, "end": -1},
        view=True)
    add("flatten_copy", "flatten", lambda a: a.flatten(0, 1), [y],
        {"start": 0, "end": 1, "pre_permute": [1, 0, 2]})
    add("slice_step", "slice", lambda a: a[:, -5::2], [x],
        {"dim": 1, "start": -5, "end": 2**63 - 1, "step": 2}, view=True)
    add("slice_clamp", "slice", lambda a: a[1:100], [y],
        {"dim": 0, "start": 1, "end": 100, "step": 1}, view=True)
    add("slice_noncontig", "slice", lambda a: a[:, 1:3], [y],
        {"dim": 1, "start": 1, "end": 3, "step": 1, "pre_permute": [2, 1, 0]}, view=True)
    add("narrow", "narrow", lambda a: a.narrow(-1, -3, 2), [y],
        {"dim": -1, "start": -3, "length": 2}, view=True)
    add("select_neg", "select", lambda a: a.select(1, -1), [y], {"dim": 1, "index": -1},
        view=True)
    add("diagonal", "diagonal", lambda a: a.diagonal(1, 2, 1), [y],
        {"offset": 1, "dim1": 2, "dim2": 1}, view=True)
    add("diagonal_neg", "diagonal", lambda a: a.diagonal(-1), [x],
        {"offset": -1, "dim1": 0, "dim2": 1}, view=True)
    add("as_strided", "as_strided", lambda a: a.as_strided((3, 3), (2, 1), 1), [rn(12, seed=4)],
        {"size": [3, 3], "stride": [2, 1], "offset": 1}, view=True)
    add("unbind", "unbind", lambda a: a.unbind(1), [y], {"dim": 1}, view=True)
    add("split", "split", lambda a: a.split(4, -1), [x], {"split_size": 4, "dim": -1}, view=True)
    add("split_sizes", "split_with_sizes", lambda a: a.split([1, 3, 2], 1), [x],
        {"sizes": [1, 3, 2], "dim": 1}, view=True)
    add("chunk", "chunk", lambda a: a.chunk(4, 1), [x], {"chunks": 4, "dim": 1}, view=True)
    add("cat", "cat", lambda a, b: torch.cat([a, b], 1), [x, rn(2, 2, seed=5)], {"dim": 1})
    add("cat_promote_legacy", "cat",
        lambda a, b, c: torch.cat([a, b, c], 0),
        [rn(1, 3, seed=6), torch.zeros(0, dtype=torch.float32), torch.arange(6).view(2, 3)],
        {"dim": 0})
    add("cat_noncontig", "cat", lambda a, b: torch.cat([a, b], -1), [y, rn(3, 2, 1, seed=7)],
        {"dim": -1, "pre_permute": [1, 0, 2]})
    add("stack", "stack", lambda a, b: torch.stack([a, b], 1), [x, rn(2, 6, seed=8)], {"dim": 1})
    add("index_select", "index_select", lambda a, i: a.index_select(2, i), [y, long(3, 0, 3)],
        {"dim": 2})
    add("gather", "gather", lambda a, i: a.gather(0, i), [x, long(1, 0, 1, 1, shape=(2, 2))],
        {"dim": 0})
    add("scatter", "scatter", lambda a, i, s: a.scatter(1, i, s),
        [x, long(5, 0, 2, 3, shape=(2, 2)), rn(2, 2, seed=9)], {"dim": 1})
    add("scatter_value", "scatter_value", lambda a, i: a.scatter(1, i, -2.5),
        [x, long(5, 0, 2, 3, shape=(2, 2))], {"dim": 1, "value": -2.5})
    add("scatter_add", "scatter_add", lambda a, i, s: a.scatter_add(0, i, s),
        [x, long(1, 1, 0, 1, 1, 0, shape=(2, 3)), rn(2, 3, seed=10)], {"dim": 0})
    mask = torch.tensor([[True, False, True, False, False, True]])
    add("masked_fill", "masked_fill", lambda a, m: a.masked_fill(m, 1.5), [x, mask],
        {"value": 1.5})
    add("masked_fill_tensor", "masked_fill_tensor", lambda a, m, v: a.masked_fill(m, v),
        [x, mask, torch.tensor(-3.0, dtype=torch.float64).requires_grad_()], {})
    add("index_two", "index", lambda a, i, j: a[i, j], [y, long(1, 0), long(2, -1)], {})
    add("index_mask", "index", lambda a, m: a[m], [x, x.detach() > 0.2], {})
    add("index_put_acc", "index_put",
        lambda a, i, v: a.index_put((i,), v, accumulate=True),
        [x, long(1, 0, 1), rn(6, seed=11)], {"accumulate": True})
    add("index_put_two", "index_put",
        lambda a, i, j, v: a.index_put((i, j), v),
        [x, long(0, 1), long(5, -6), rn(2, seed=12)], {"accumulate": False})
    add("slice_scatter", "slice_scatter",
        lambda a, s: torch.slice_scatter(a, s, 1, 1, 6, 2), [x, rn(2, 3, seed=13)],
        {"dim": 1, "start": 1, "end": 6, "step": 2})
    add("select_scatter", "select_scatter",
        lambda a, s: torch.select_scatter(a, s, 0, -1), [x, rn(6, seed=14)],
        {"dim": 0, "index": -1})
    add("diagonal_scatter", "diagonal_scatter",
        lambda a, s: torch.diagonal_scatter(a, s, 2), [x, rn(2, seed=15)],
        {"offset": 2, "dim1": 0, "dim2": 1})

    def setitem(a, v):
        b = a.clone()
        b[:, 1::2] = v
        return b
    add("setitem_slice", "setitem_slice", setitem, [x, rn(2, 1, seed=16)],
        {"dim": 1, "start": 1, "end": 2**63 - 1, "step": 2})
    refgen.write("shape", CASES, "gen_shape.py")


if __name__ == "__main__":
    main()
