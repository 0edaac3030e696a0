"""gen_reduce: torch 1.13 references for the reduction family (sum, mean,
prod, amax/amin, argmax/argmin, var/std, any/all, logsumexp,
linalg_vector_norm, cumsum, softmax, log_softmax), read by
tests/test_reduce_ref.c.  /usr/bin/python3 tools/ref/gen_reduce.py

Params: "dims" (list; absent = the all-dims overload), "keepdim",
"correction", "dim" (argmax/any/all/cumsum/softmax; absent = flattened
argmax, all-dims any/all), "ord" (vector norm; "inf" / "-inf" as strings),
"dtype" (vector norm's dtype= as kiln's dtype name).
"""
import torch

import refgen

x = refgen.randn(3, 4, 5, requires_grad=True)
m = refgen.randn(4, 6, gen=refgen.seeded(1), requires_grad=True)
ties = torch.tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, -1.0], [0.0, -2.0, -2.0, 0.0]],
                    dtype=torch.float64, requires_grad=True)
zeros1 = torch.tensor([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [-1.0, 2.0, 0.5]],
                      dtype=torch.float64, requires_grad=True)
big = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 5.0]], dtype=torch.float64,
                   requires_grad=True)
ints = torch.tensor([[3, -1, 4], [1, 5, -9]], dtype=torch.int32)

cases = []


def add(name, op, fn, inputs, **params):
    cases.append(refgen.op_case(name, op, fn, inputs, params=params))


add("sum_all", "sum", torch.sum, [x])
add("mean_all", "mean", torch.mean, [x])
add("prod_all", "prod", torch.prod, [m])
for dims in ([1], [0, 2], [-1], [2, 0, 1]):
    for kd in (False, True):
        tag = "_".join(str(d) for d in dims).replace("-", "n") + ("_kd" if kd else "")
        add("sum_" + tag, "sum.dim_IntList", lambda t, d=dims, k=kd: t.sum(d, keepdim=k), [x],
            dims=dims, keepdim=kd)
        add("mean_" + tag, "mean.dim", lambda t, d=dims, k=kd: t.mean(d, keepdim=k), [x],
            dims=dims, keepdim=kd)
        add("amax_" + tag, "amax", lambda t, d=dims, k=kd: t.amax(d, keepdim=k), [x],
            dims=dims, keepdim=kd)
        add("amin_" + tag, "amin", lambda t, d=dims, k=kd: t.amin(d, keepdim=k), [x],
            dims=dims, keepdim=kd)
        for corr in (0, 1, 2):
            add("var_%s_c%d" % (tag, corr), "var.correction",
                lambda t, d=dims, k=kd, c=corr: torch.var(t, d, correction=c, keepdim=k), [x],
                dims=dims, keepdim=kd, correction=corr)
        add("std_" + tag, "std.correction",
            lambda t, d=dims, k=kd: torch.std(t, d, correction=1, keepdim=k), [x],
            dims=dims, keepdim=kd, correction=1)
add("var_all", "var.correction", lambda t: torch.var(t), [m], correction=1)
add("std_all_c0", "std.correction", lambda t: torch.std(t, None, correction=0), [m], correction=0)
for d in (0, 1, -1):
    for kd in (False, True):
        add("prod_d%d%s" % (d + 2, "_kd" if kd else ""), "prod.dim_int",
            lambda t, dd=d, k=kd: t.prod(dd, keepdim=k), [m], dim=d, keepdim=kd)
    add("cumsum_d%d" % (d + 2), "cumsum", lambda t, dd=d: torch.cumsum(t, dd), [x], dim=d)
    add("softmax_d%d" % (d + 2), "_softmax", lambda t, dd=d: torch.softmax(t, dd), [x], dim=d)
    add("log_softmax_d%d" % (d + 2), "_log_softmax", lambda t, dd=d: torch.log_softmax(t, dd),
        [x], dim=d)
# prod with zeros: one zero in a row, two zeros, none
add("prod_zeros_d1", "prod.dim_int", lambda t: t.prod(1), [zeros1], dim=1, keepdim=False)
add("prod_zeros_d0", "prod.dim_int", lambda t: t.prod(0), [zeros1], dim=0, keepdim=False)
add("prod_zeros_all", "prod", torch.prod, [zeros1])
# ties: amax/amin share the gradient evenly
add("amax_ties_d1", "amax", lambda t: t.amax(1), [ties], dims=[1], keepdim=False)
add("amin_ties_d1", "amin", lambda t: t.amin(1), [ties], dims=[1], keepdim=False)
add("amax_ties_all", "amax", lambda t: t.amax(), [ties], dims=[], keepdim=False)
add("amin_ties_d0_kd", "amin", lambda t: t.amin(0, keepdim=True), [ties], dims=[0], keepdim=True)
add("softmax_big", "_softmax", lambda t: torch.softmax(t, 1), [big], dim=1)
add("log_softmax_big", "_log_softmax", lambda t: torch.log_softmax(t, 1), [big], dim=1)
# non-differentiable / integer cases
for d in (None, 0, 1, -1):
    for kd in (False, True):
        if d is None and kd:
            continue
        p = {"keepdim": kd}
        if d is not None:
            p["dim"] = d
        tag = "all" if d is None else "d%d" % (d + 2)
        add("argmax_ties_%s%s" % (tag, "_kd" if kd else ""), "argmax",
            lambda t, dd=d, k=kd: t.detach().argmax(dd, keepdim=k) if dd is not None
            else t.detach().argmax(), [ties.detach()], **p)
        add("argmin_x_%s%s" % (tag, "_kd" if kd else ""), "argmin",
            lambda t, dd=d, k=kd: t.argmin(dd, keepdim=k) if dd is not None else t.argmin(),
            [m.detach()[:, :3]], **p)
add("sum_int32", "sum", torch.sum, [ints])
add("sum_int32_d1", "sum.dim_IntList", lambda t: t.sum([1]), [ints], dims=[1], keepdim=False)
add("prod_int32_d0", "prod.dim_int", lambda t: t.prod(0), [ints], dim=0, keepdim=False)
add("cumsum_int32", "cumsum", lambda t: torch.cumsum(t, 1), [ints], dim=1)
add("amax_int32", "amax", lambda t: t.amax([0]), [ints], dims=[0], keepdim=False)
add("cumsum_f32", "cumsum", lambda t: torch.cumsum(t, 0), [x.detach().float()], dim=0)
add("softmax_f32", "_softmax", lambda t: torch.softmax(t, 2), [x.detach().float()], dim=2)
add("var_f32", "var.correction", lambda t: torch.var(t, [1]), [x.detach().float()],
    dims=[1], keepdim=False, correction=1)


# ---- any/all: every dtype, NaN counts as true, empty reductions ----
inf, nan = float("inf"), float("nan")
anyin = {
    "f64": torch.tensor([[0.0, nan, 0.0], [0.0, 0.0, 0.0], [1.0, -2.0, 0.5]], dtype=torch.float64),
    "f32": torch.tensor([[0.0, 0.0, 3.0, 0.0], [1.0, 1.0, inf, -1.0]]),
    "i32": torch.tensor([[0, 0, 7], [1, 2, 3], [0, 0, 0]], dtype=torch.int32),
    "u8": torch.tensor([[0, 4], [2, 9]], dtype=torch.uint8),
    "bool": torch.tensor([[True, False, True], [True, True, True]]),
}
for tag, t in anyin.items():
    for op in ("any", "all"):
        add("%s_%s" % (op, tag), op, lambda a, o=op: getattr(a, o)(), [t])
        for d in (0, 1, -1):
            for kd in (False, True):
                add("%s_%s_d%d%s" % (op, tag, d + 2, "_kd" if kd else ""), op + ".dim",
                    lambda a, o=op, dd=d, k=kd: getattr(a, o)(dd, keepdim=k), [t], dim=d,
                    keepdim=kd)
empty = torch.zeros(0, 3)
for op in ("any", "all"):
    add("%s_empty_d0" % op, op + ".dim", lambda a, o=op: getattr(a, o)(0), [empty], dim=0,
        keepdim=False)
    add("%s_empty_all" % op, op, lambda a, o=op: getattr(a, o)(), [empty])
    add("%s_x3d_d1" % op, op + ".dim", lambda a, o=op: getattr(a, o)(1),
        [(x.detach() > 0.5).double()], dim=1, keepdim=False)

# ---- logsumexp: dims, keepdim, special values, integer inputs ----
for dims in ([1], [0, 2], [-1], [2, 0, 1]):
    for kd in (False, True):
        tag = "_".join(str(d) for d in dims).replace("-", "n") + ("_kd" if kd else "")
        add("logsumexp_" + tag, "logsumexp",
            lambda t, d=dims, k=kd: torch.logsumexp(t, d, keepdim=k), [x], dims=dims, keepdim=kd)
add("logsumexp_big_d1", "logsumexp", lambda t: torch.logsumexp(t, 1), [big], dims=[1],
    keepdim=False)
special = torch.tensor([[-inf, -inf, -inf], [inf, 1.0, 2.0], [nan, 0.0, 1.0], [-inf, 0.0, 1.0],
                        [inf, -inf, 0.0], [inf, inf, 3.0]], dtype=torch.float64)
add("logsumexp_special_d1", "logsumexp", lambda t: torch.logsumexp(t, 1), [special], dims=[1],
    keepdim=False)
add("logsumexp_special_d0_kd", "logsumexp", lambda t: torch.logsumexp(t, 0, keepdim=True),
    [special[[0, 1, 3]]], dims=[0], keepdim=True)
add("logsumexp_f32", "logsumexp", lambda t: torch.logsumexp(t, [2]), [x.detach().float()],
    dims=[2], keepdim=False)
add("logsumexp_int32", "logsumexp", lambda t: torch.logsumexp(t, [1]), [ints], dims=[1],
    keepdim=False)
add("logsumexp_bool", "logsumexp", lambda t: torch.logsumexp(t, [0]),
    [torch.tensor([[True, False], [True, True]])], dims=[0], keepdim=False)
add("logsumexp_empty", "logsumexp", lambda t: torch.logsumexp(t, [0]), [empty], dims=[0],
    keepdim=False)


# ---- linalg_vector_norm: orders, dims, keepdim, zeros, ties, NaN, dtype= ----
def ordp(o):
    return {"ord": "inf" if o == inf else "-inf" if o == -inf else o}


ORDS = [2, 1, inf, -inf, 0, 3, 0.5, 1.5, -1, 2.5]


def otag(o):
    return {inf: "inf", -inf: "ninf"}.get(o, str(o).replace(".", "p").replace("-", "n"))


for o in ORDS:
    for dims in (None, [1], [0, 2], [-1]):
        for kd in (False, True):
            if dims is None and kd:
                continue
            tag = "all" if dims is None else "_".join(str(d) for d in dims).replace("-", "n")
            add("norm_%s_%s%s" % (otag(o), tag, "_kd" if kd else ""), "linalg_vector_norm",
                lambda t, oo=o, d=dims, k=kd: torch.linalg.vector_norm(t, oo, d, k), [x],
                dims=dims or [], keepdim=kd, **ordp(o))
zrow = torch.tensor([[1.5, 0.0, -2.0], [0.0, 0.0, 0.0], [-1.0, 2.0, 0.5]], dtype=torch.float64,
                    requires_grad=True)
for o in ORDS:
    add("norm_%s_zeros_d1" % otag(o), "linalg_vector_norm",
        lambda t, oo=o: torch.linalg.vector_norm(t, oo, 1), [zrow], dims=[1], keepdim=False,
        **ordp(o))
absties = torch.tensor([[1.0, -3.0, 3.0, 2.0], [-5.0, 5.0, 0.5, -1.0], [0.5, -2.0, 2.0, -0.5]],
                       dtype=torch.float64, requires_grad=True)
for o in (inf, -inf):
    add("norm_%s_ties_d1" % otag(o), "linalg_vector_norm",
        lambda t, oo=o: torch.linalg.vector_norm(t, oo, 1), [absties], dims=[1], keepdim=False,
        **ordp(o))
    add("norm_%s_ties_all" % otag(o), "linalg_vector_norm",
        lambda t, oo=o: torch.linalg.vector_norm(t, oo), [absties], dims=[], keepdim=False,
        **ordp(o))
nanrows = torch.tensor([[nan, 1.0, -2.0], [inf, 1.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
for o in ORDS:
    add("norm_%s_special_d1" % otag(o), "linalg_vector_norm",
        lambda t, oo=o: torch.linalg.vector_norm(t, oo, 1), [nanrows], dims=[1], keepdim=False,
        **ordp(o))
for o in (2, inf, 0.5):
    add("norm_%s_f32_d1" % otag(o), "linalg_vector_norm",
        lambda t, oo=o: torch.linalg.vector_norm(t, oo, 1), [x.detach().float()], dims=[1],
        keepdim=False, **ordp(o))
add("norm_2_f32_dtype_f64", "linalg_vector_norm",
    lambda t: torch.linalg.vector_norm(t, 2, [2], dtype=torch.float64), [x.detach().float()],
    dims=[2], keepdim=False, ord=2, dtype="float64")
add("norm_2_empty", "linalg_vector_norm", lambda t: torch.linalg.vector_norm(t, 2, [0]),
    [empty], dims=[0], keepdim=False, ord=2)
add("norm_2_scalar", "linalg_vector_norm", lambda t: torch.linalg.vector_norm(t),
    [torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)], dims=[], keepdim=False, ord=2)

refgen.write("reduce", cases)
