"""gen_loss: torch 1.13 references for the losses (mse_loss, l1_loss,
binary_cross_entropy, nll_loss, cross_entropy), read by
tests/test_loss.c.  /usr/bin/python3 tools/ref/gen_loss.py

Params: "reduction" (0 none, 1 mean, 2 sum, as at::Reduction),
"ignore_index", "label_smoothing", "weight" (bool: the last input is the
class/element weight).
"""
import torch
import torch.nn.functional as F

import refgen

RED = {0: "none", 1: "mean", 2: "sum"}
x = refgen.randn(4, 5, requires_grad=True)
y = refgen.randn(4, 5, gen=refgen.seeded(1), requires_grad=True)
yrow = refgen.randn(5, gen=refgen.seeded(2), requires_grad=True)
logits = refgen.randn(6, 4, gen=refgen.seeded(3), requires_grad=True)
logp = torch.log_softmax(logits.detach(), 1).requires_grad_(True)
tgt = torch.tensor([0, 3, 1, 3, 2, 0])
tgt_ign = torch.tensor([0, -100, 1, 3, -100, 2])
tgt_ign1 = torch.tensor([1, 1, 2, 0, 1, 3])
cw = torch.tensor([0.5, 2.0, 1.0, 0.25], dtype=torch.float64)
vec = refgen.randn(4, gen=refgen.seeded(4), requires_grad=True)
p = (torch.rand(3, 4, generator=refgen.seeded(5), dtype=torch.float64) * 0.98 + 0.01)
p = torch.round(p * 1e4) / 1e4
p.requires_grad_(True)
q = torch.round(torch.rand(3, 4, generator=refgen.seeded(6), dtype=torch.float64) * 1e4) / 1e4
q.requires_grad_(True)
bw = torch.tensor([1.0, 0.5, 2.0, 1.5], dtype=torch.float64)
edge = torch.tensor([0.0, 1.0, 0.5, 1e-50], dtype=torch.float64)
edge_t = torch.tensor([1.0, 0.0, 0.5, 1.0], dtype=torch.float64)

cases = []


def add(name, op, fn, inputs, **params):
    cases.append(refgen.op_case(name, op, fn, inputs, params=params))


for r in (0, 1, 2):
    add("mse_%s" % RED[r], "mse_loss", lambda a, b, r=r: F.mse_loss(a, b, reduction=RED[r]),
        [x, y], reduction=r)
    add("l1_%s" % RED[r], "l1_loss", lambda a, b, r=r: F.l1_loss(a, b, reduction=RED[r]),
        [x, y], reduction=r)
    add("bce_%s" % RED[r], "binary_cross_entropy",
        lambda a, b, r=r: F.binary_cross_entropy(a, b, reduction=RED[r]), [p, q], reduction=r)
    add("bce_w_%s" % RED[r], "binary_cross_entropy",
        lambda a, b, w, r=r: F.binary_cross_entropy(a, b, weight=w, reduction=RED[r]),
        [p, q, bw], reduction=r, weight=True)
    add("nll_%s" % RED[r], "nll_loss",
        lambda a, t, r=r: F.nll_loss(a, t, reduction=RED[r]), [logp, tgt], reduction=r)
    add("nll_w_ign_%s" % RED[r], "nll_loss",
        lambda a, t, w, r=r: F.nll_loss(a, t, weight=w, reduction=RED[r]),
        [logp, tgt_ign, cw], reduction=r, weight=True, ignore_index=-100)
    add("nll_ign1_%s" % RED[r], "nll_loss",
        lambda a, t, r=r: F.nll_loss(a, t, reduction=RED[r], ignore_index=1),
        [logp, tgt_ign1], reduction=r, ignore_index=1)
    add("ce_%s" % RED[r], "cross_entropy",
        lambda a, t, r=r: F.cross_entropy(a, t, reduction=RED[r]), [logits, tgt], reduction=r)
    add("ce_w_ign_%s" % RED[r], "cross_entropy",
        lambda a, t, w, r=r: F.cross_entropy(a, t, weight=w, reduction=RED[r]),
        [logits, tgt_ign, cw], reduction=r, weight=True, ignore_index=-100)
    add("ce_ls_%s" % RED[r], "cross_entropy",
        lambda a, t, r=r: F.cross_entropy(a, t, reduction=RED[r], label_smoothing=0.1),
        [logits, tgt], reduction=r, label_smoothing=0.1)
    add("ce_ls_w_ign_%s" % RED[r], "cross_entropy",
        lambda a, t, w, r=r: F.cross_entropy(a, t, weight=w, reduction=RED[r],
                                             label_smoothing=0.2),
        [logits, tgt_ign, cw], reduction=r, weight=True, ignore_index=-100, label_smoothing=0.2)
add("mse_broadcast", "mse_loss", lambda a, b: F.mse_loss(a, b.expand(4, 5)), [x, yrow],
    reduction=1)
add("nll_1d", "nll_loss", lambda a, t: F.nll_loss(a, t), [vec, torch.tensor(2)], reduction=1)
add("ce_1d", "cross_entropy", lambda a, t: F.cross_entropy(a, t), [vec, torch.tensor(3)],
    reduction=1)
add("bce_clamp", "binary_cross_entropy",
    lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), [edge, edge_t], reduction=0)
add("bce_f32", "binary_cross_entropy", lambda a, b: F.binary_cross_entropy(a, b),
    [p.detach().float(), q.detach().float()], reduction=1)
add("nll_all_ignored", "nll_loss", lambda a, t: F.nll_loss(a, t),
    [logp.detach()[:2], torch.tensor([-100, -100])], reduction=1)

# spatial inputs [N, C, d1, ...] with targets [N, d1, ...]
sp3 = refgen.randn(2, 4, 3, gen=refgen.seeded(7), requires_grad=True)
sp4 = refgen.randn(2, 4, 2, 2, gen=refgen.seeded(8), requires_grad=True)
t3 = torch.tensor([[0, 3, -100], [2, 1, 1]])
t4 = torch.tensor([[[0, 3], [1, 1]], [[2, -100], [3, 0]]])
for r in (0, 1, 2):
    add("nll_3d_w_%s" % RED[r], "nll_loss",
        lambda a, t, w, r=r: F.nll_loss(a, t, weight=w, reduction=RED[r]),
        [sp3, t3, cw], reduction=r, weight=True, ignore_index=-100)
    add("ce_4d_%s" % RED[r], "cross_entropy",
        lambda a, t, r=r: F.cross_entropy(a, t, reduction=RED[r]), [sp4, t4], reduction=r)
    add("ce_3d_ls_w_%s" % RED[r], "cross_entropy",
        lambda a, t, w, r=r: F.cross_entropy(a, t, weight=w, reduction=RED[r],
                                             label_smoothing=0.15),
        [sp3, t3, cw], reduction=r, weight=True, ignore_index=-100, label_smoothing=0.15)

refgen.write("loss", cases)
