"""gen_autograd: reference gradients of small composite graphs (the engine
end to end): writes tests/fixtures/autograd.json.
/usr/bin/python3 tools/ref/gen_autograd.py"""
import torch
import torch.nn.functional as F

import refgen


def mlp_loss(x, y, w0, b0, w1, b1):
    h = torch.tanh(F.linear(x, w0, b0))
    return F.mse_loss(F.linear(h, w1, b1), y)


def diamond(x):
    a = torch.exp(x)
    b = a * x
    c = torch.tanh(a)
    return (b + c * a).sum(dim=1)


g = refgen.seeded(7)
x = refgen.randn(5, 3, gen=g)
y = refgen.randn(5, 2, gen=g)
w0 = refgen.randn(4, 3, gen=g, requires_grad=True)
b0 = refgen.randn(4, gen=g, requires_grad=True)
w1 = refgen.randn(2, 4, gen=g, requires_grad=True)
b1 = refgen.randn(2, gen=g, requires_grad=True)
d = refgen.randn(2, 3, gen=g, requires_grad=True)
cases = [
    refgen.op_case("mlp_tanh_mse", "linear,tanh,linear,mse_loss", mlp_loss,
                   [x, y, w0, b0, w1, b1]),
    refgen.op_case("diamond_exp_mul_tanh", "exp,mul,tanh,add,sum.dim_IntList", diamond, [d],
                   grad_outputs=[torch.tensor([1.0, -2.0], dtype=torch.float64)]),
]
refgen.write("autograd", cases)
