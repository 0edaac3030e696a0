"""gen_optim: torch reference fixtures for kiln/optim.h (tests/fixtures/optim.json).

Run by hand with Debian's torch: /usr/bin/python3 tools/ref/gen_optim.py
Optimizer cases: inputs = the 3 initial parameters, then the gradients of
steps 1..5 (3 per step); outputs = the parameters after each step (3 per
step); params = {"opt": name, "options": kiln's kn_optim_options fields}.
Clipping cases: inputs = gradients, outputs = clipped gradients and the
total norm. Schedule cases: outputs = one tensor of the lr at epochs 0..11.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refgen  # noqa: E402

SHAPES = [(3, 4), (4,), (2, 2, 3)]
STEPS = 5
cases = []


def r32(shape, gen):
    return torch.randn(shape, generator=gen).mul(0.5).round(decimals=4)


def optim_case(name, cls, kwargs, options, seed):
    gen = torch.Generator().manual_seed(seed)
    params = [r32(s, gen).requires_grad_() for s in SHAPES]
    initial = [p.detach().clone() for p in params]
    opt = cls(params, **kwargs)
    grads, after = [], []
    for _ in range(STEPS):
        gs = [r32(s, gen) for s in SHAPES]
        for p, g in zip(params, gs):
            p.grad = g.clone()
        opt.step()
        grads += gs
        after += [p.detach().clone() for p in params]
    cases.append(refgen.case(name, cls.__name__, initial + grads, after,
                             params={"opt": cls.__name__, "options": options}))


O = torch.optim
optim_case("sgd_plain", O.SGD, {"lr": 0.1}, {"lr": 0.1}, 1)
optim_case("sgd_momentum_wd", O.SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01},
           {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01}, 2)
optim_case("sgd_nesterov", O.SGD, {"lr": 0.05, "momentum": 0.8, "nesterov": True},
           {"lr": 0.05, "momentum": 0.8, "nesterov": True}, 3)
optim_case("sgd_dampening", O.SGD, {"lr": 0.05, "momentum": 0.9, "dampening": 0.3},
           {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}, 4)
optim_case("adam_default", O.Adam, {"lr": 0.01}, {"lr": 0.01}, 5)
optim_case("adam_wd_betas", O.Adam, {"lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6,
                                     "weight_decay": 0.1},
           {"lr": 0.02, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1}, 6)
optim_case("adamw_default", O.AdamW, {"lr": 0.01}, {"lr": 0.01}, 7)
optim_case("adamw_wd", O.AdamW, {"lr": 0.03, "weight_decay": 0.2}, {"lr": 0.03,
                                                                    "weight_decay": 0.2}, 8)
optim_case("rmsprop_default", O.RMSprop, {"lr": 0.01}, {"lr": 0.01}, 9)
optim_case("rmsprop_momentum_centered_wd", O.RMSprop,
           {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 0.05},
           {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 0.05},
           10)

# ---- clip_grad_norm_ ------------------------------------------------------------------
for name, max_norm, norm_type, scale in [("clip_l2", 1.0, 2.0, 1.0),
                                         ("clip_l2_noop", 100.0, 2.0, 1.0),
                                         ("clip_inf", 0.5, math.inf, 1.0),
                                         ("clip_l1", 2.0, 1.0, 1.0)]:
    gen = torch.Generator().manual_seed(20)
    params = [torch.zeros(s, requires_grad=True) for s in SHAPES]
    for p in params:
        p.grad = r32(p.shape, gen) * scale
    before = [p.grad.clone() for p in params]
    total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
    cases.append(refgen.case(name, "clip_grad_norm_", before,
                             [p.grad for p in params] + [total.reshape(1).double()],
                             params={"max_norm": max_norm,
                                     "norm_type": "inf" if math.isinf(norm_type) else norm_type}))


# ---- schedules ----------------------------------------------------------------------------
def sched_case(name, make, params):
    p = torch.zeros(1, requires_grad=True)
    opt = O.SGD([p], lr=0.1)
    sch = make(opt)
    lrs = []
    for _ in range(12):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sch.step()
    cases.append(refgen.case(name, type(sch).__name__, [], [torch.tensor(lrs, dtype=torch.float64)],
                             params=params))


S = O.lr_scheduler
sched_case("steplr", lambda o: S.StepLR(o, step_size=3, gamma=0.5),
           {"kind": "step", "step_size": 3, "gamma": 0.5})
sched_case("cosine", lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
           {"kind": "cosine", "t_max": 10, "eta_min": 0.001})
sched_case("linear_warmup", lambda o: S.LinearLR(o, start_factor=0.1, end_factor=1.0,
                                                 total_iters=4),
           {"kind": "linear", "start_factor": 0.1, "end_factor": 1.0, "total_iters": 4})

refgen.write("optim", cases, generator="gen_optim.py")
