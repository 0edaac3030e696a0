"""gen_selftest: fixtures that exercise the fixture reader itself
(tests/test_autograd_support.c). /usr/bin/python3 tools/ref/gen_selftest.py"""
import torch

import refgen

x = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.0, -1.5]], dtype=torch.float64,
                 requires_grad=True)
cases = [
    refgen.op_case("square_sum", "mul", lambda a: a * a, [x]),
    refgen.op_case("exp_gradout", "exp", torch.exp, [x],
                   grad_outputs=[torch.full((2, 3), 2.0, dtype=torch.float64)]),
    refgen.case("specials", "none",
                [torch.tensor([float("nan"), float("inf"), -float("inf"), 1.25])],
                [torch.tensor([float("nan"), float("inf"), -float("inf"), 1.25])],
                params={"dims": [0, 1], "alpha": 2.5, "keepdim": True}),
    refgen.case("ints", "none",
                [torch.tensor([[1, 2], [3, -4]], dtype=torch.int64),
                 torch.tensor([True, False])],
                [torch.tensor([2 ** 40 + 1], dtype=torch.int64)]),
]
refgen.write("selftest", cases)
