"""gen_pointwise: torch 1.13 references for the pointwise family (arithmetic,
unary math, comparisons, logical ops, where, clamp, pow, casts), read by
tests/test_pointwise_ref.c.  /usr/bin/python3 tools/ref/gen_pointwise.py

The "op" field names the kiln function the test calls. Params: "s" (the
scalar operand; "s_float": true when it is a Python float), "alpha" (with
"alpha_float"), "mode" ("trunc"/"floor"), "approximate", "min"/"max",
"dtype". Gradients (float64 inputs) are those of sum() of the output.
"""
import math

import torch

import refgen

F64 = torch.float64
x = refgen.randn(2, 3, requires_grad=True)
y = refgen.randn(2, 3, gen=refgen.seeded(1), requires_grad=True)
row = refgen.randn(3, gen=refgen.seeded(2), requires_grad=True)
col = refgen.randn(2, 1, gen=refgen.seeded(3), requires_grad=True)
pos = (refgen.randn(2, 3, gen=refgen.seeded(4)).abs() + 0.25).detach().requires_grad_(True)
x32 = refgen.randn(2, 3, dtype=torch.float32, gen=refgen.seeded(5))
wide = torch.tensor([-7.5, -2.5, -1.0, -0.5, 0.0, 0.5, 1.5, 2.5, 3.7, 100.0], dtype=torch.float32)
special = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.0],
                       dtype=torch.float32)
i64 = torch.tensor([[7, -7, 3], [0, 12, -5]], dtype=torch.int64)
i32 = torch.tensor([2, -3, 4], dtype=torch.int32)
u8 = torch.tensor([[200, 3, 0], [255, 17, 128]], dtype=torch.uint8)
i8 = torch.tensor([-1, 100, -128], dtype=torch.int8)
b = torch.tensor([[True, False, True], [False, False, True]])
h = torch.tensor([0.5, -1.25, 3.0], dtype=torch.float16)
bf = torch.tensor([[1.5, -2.0, 0.125], [7.0, 0.3, -0.01]], dtype=torch.bfloat16)

cases = []


def add(name, op, fn, inputs, **params):
    """Record a case; combinations torch 1.13 does not implement are skipped
    (and listed), their errors are tested by hand in the C tests."""
    if op.split("_scalar")[0] in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                                  "logical_or", "logical_not", "where", "div_mode", "to"):
        inputs = [t.detach() for t in inputs]  # no gradients: bool or piecewise-constant
    try:
        cases.append(refgen.op_case(name, op, fn, inputs, params=params))
    except RuntimeError as e:
        print("skipped %s: %s" % (name, str(e).splitlines()[0]))


# ---- unary math on float64 (with gradients), float32, ints and half types --------
UNARY = {
    "neg": torch.neg, "abs": torch.abs, "sgn": torch.sgn, "exp": torch.exp,
    "exp2": torch.exp2, "expm1": torch.expm1, "sin": torch.sin, "cos": torch.cos,
    "tan": torch.tan, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "silu": torch.nn.functional.silu, "erf": torch.erf, "round": torch.round,
    "trunc": torch.trunc, "floor": torch.floor, "ceil": torch.ceil,
}
POSITIVE = {"log": torch.log, "log2": torch.log2, "log1p": torch.log1p, "sqrt": torch.sqrt,
            "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal}
for name, fn in UNARY.items():
    # torch returns sgn's zero gradient as an unmaterialised tensor: no grads
    add(name + "_f64", name, fn, [x.detach() if name == "sgn" else x])
    add(name + "_f32_wide", name, fn, [wide])
for name, fn in POSITIVE.items():
    add(name + "_f64", name, fn, [pos])
    add(name + "_f32_wide", name, fn, [wide])
for name in ("exp", "sigmoid", "tanh", "sqrt", "log", "erf", "silu"):
    fn = UNARY.get(name) or POSITIVE[name]
    add(name + "_int64", name, fn, [i64])
    add(name + "_bf16", name, fn, [bf])
for name in ("neg", "abs", "sgn", "relu", "round", "floor"):
    add(name + "_int64", name, UNARY[name], [i64])
for name in ("relu", "sgn", "abs", "neg", "exp", "sigmoid", "tanh", "floor", "sqrt"):
    fn = UNARY.get(name) or POSITIVE[name]
    add(name + "_special", name, fn, [special])
add("gelu_f64", "gelu", torch.nn.functional.gelu, [x], approximate="none")
add("gelu_tanh_f64", "gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh"), [x],
    approximate="tanh")
add("gelu_f32_wide", "gelu", torch.nn.functional.gelu, [wide], approximate="none")
add("gelu_tanh_f32_wide", "gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    [wide], approximate="tanh")
add("sgn_bool", "sgn", torch.sgn, [b])
add("exp_bool", "exp", torch.exp, [b])
add("logical_not_f32", "logical_not", torch.logical_not, [special])
add("logical_not_int", "logical_not", torch.logical_not, [i64])

# ---- binary arithmetic: broadcasting and promotion -------------------------------
BIN = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
       "maximum": torch.maximum, "minimum": torch.minimum}
for name, fn in BIN.items():
    add(name + "_f64", name, fn, [x, y])
    add(name + "_bcast_row", name, fn, [x, row])
    add(name + "_bcast_col_row", name, fn, [col, row])
    add(name + "_i64_i32", name, fn, [i64, i32])
    add(name + "_u8_i8", name, fn, [u8, i8])
    add(name + "_f16_i64", name, fn, [h, i64])
    add(name + "_bf16_f32", name, fn, [bf, x32])
    add(name + "_special", name, fn, [special, special.flip(0)])
    if name not in ("sub",):
        add(name + "_bool_bool", name, fn, [b, b.flip(1)])
    add(name + "_u8_f64_0dim", name, fn, [u8, torch.tensor(2.5, dtype=F64)])
add("add_alpha_f64", "add", lambda a, c: torch.add(a, c, alpha=-1.5), [x, row], alpha=-1.5,
    alpha_float=True)
add("add_alpha_int", "add", lambda a, c: torch.add(a, c, alpha=3), [i64, i32], alpha=3)
add("sub_alpha_f64", "sub", lambda a, c: torch.sub(a, c, alpha=2), [x, col], alpha=2)
for mode in ("trunc", "floor"):
    add("div_%s_f64" % mode, "div_mode", lambda a, c, m=mode: torch.div(a, c, rounding_mode=m),
        [x, y], mode=mode)
    add("div_%s_int" % mode, "div_mode", lambda a, c, m=mode: torch.div(a, c, rounding_mode=m),
        [i64, i32], mode=mode)
    add("div_%s_f32_neg" % mode, "div_mode",
        lambda a, c, m=mode: torch.div(a, c, rounding_mode=m),
        [wide, torch.tensor([-0.75], dtype=torch.float32)], mode=mode)
add("pow_f64", "pow", torch.pow, [pos, y])
add("pow_int", "pow", torch.pow, [i64.abs(), torch.tensor([0, 1, 2], dtype=torch.int64)])
add("pow_f32_special", "pow", torch.pow, [special, torch.tensor([2.0], dtype=torch.float32)])

# ---- scalar operands --------------------------------------------------------------
SCAL = {"add": lambda t, s: torch.add(t, s), "sub": lambda t, s: torch.sub(t, s),
        "mul": lambda t, s: torch.mul(t, s), "div": lambda t, s: torch.div(t, s),
        "pow": lambda t, s: torch.pow(t, s), "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
        "le": torch.le, "gt": torch.gt, "ge": torch.ge}
for name, fn in SCAL.items():
    for tname, t in (("f64", x), ("i64", i64), ("u8", u8), ("bf16", bf), ("bool", b)):
        for s in (2, 0.5):
            if name == "pow" and (tname == "bool" or (tname == "f64" and s == 0.5)):
                continue
            if name == "sub" and tname == "bool":
                continue
            add("%s_scalar_%s_%s" % (name, tname, str(s).replace(".", "p")), name + "_scalar",
                lambda a, f=fn, v=s: f(a, v), [t], s=s, s_float=isinstance(s, float))
add("pow_scalar_pos_half", "pow_scalar", lambda a: torch.pow(a, 0.5), [pos], s=0.5, s_float=True)
add("scalar_pow_f64", "scalar_pow", lambda a: torch.pow(1.7, a), [x], s=1.7, s_float=True)
add("scalar_pow_int", "scalar_pow", lambda a: torch.pow(2, a), [i64.abs()], s=2)

# ---- comparisons and logical ops --------------------------------------------------
for name in ("eq", "ne", "lt", "le", "gt", "ge"):
    fn = getattr(torch, name)
    add(name + "_f64", name, fn, [x, x.detach().round()])
    add(name + "_i64_f32", name, fn, [i64, x32 * 5])
    add(name + "_u8_i8", name, fn, [u8, i8])
    add(name + "_special", name, fn, [special, special.flip(0)])
for name in ("logical_and", "logical_or"):
    fn = getattr(torch, name)
    add(name + "_f32_i64", name, fn, [special, torch.tensor([0, 3, 0, 1, 0, -2])])
    add(name + "_bool_bcast", name, fn, [b, torch.tensor([True, False, True])])

# ---- where, clamp ------------------------------------------------------------------
add("where_f64", "where", torch.where, [x.detach() > 0, x, y])
add("where_bcast", "where", torch.where, [torch.tensor([[True], [False]]), row, x])
add("where_mixed", "where", torch.where, [b, i64, h])
for lo, hi in ((-0.5, 0.7), (None, 0.2), (0, None)):
    add("clamp_f64_%s_%s" % (lo, hi), "clamp", lambda t, a=lo, c=hi: torch.clamp(t, a, c), [x],
        **{k: v for k, v in (("min", lo), ("max", hi)) if v is not None})
add("clamp_int_float", "clamp", lambda t: torch.clamp(t, -2.5, 4), [i64], min=-2.5, max=4)
add("clamp_int", "clamp", lambda t: torch.clamp(t, -2, 4), [i64], min=-2, max=4)
add("clamp_special", "clamp", lambda t: torch.clamp(t, -1, 1), [special], min=-1, max=1)

# ---- casts -----------------------------------------------------------------------------
for dt in ("float16", "bfloat16", "int32", "uint8", "bool", "float64"):
    add("to_%s_from_f32" % dt, "to", lambda t, d=dt: t.to(getattr(torch, d)), [wide], dtype=dt)
add("to_f32_from_f64", "to", lambda t: t.to(torch.float32), [x], dtype="float32")
add("to_f32_from_bf16", "to", lambda t: t.to(torch.float32), [bf], dtype="float32")
add("to_int8_from_i64", "to", lambda t: t.to(torch.int8), [i64 * 40], dtype="int8")

refgen.write("pointwise", cases)
