"""PyTorch's own figures for kiln's GPU benchmarks, on the same GPU.

Run on a machine with an NVIDIA GPU and PyTorch 2 (python3 tests/cuda/torch_baseline.py
[workload ...]); each line reads

    TORCH <workload> <mode> <median_us> <min_us>

wall time per call (the call and a torch.cuda.synchronize), so that the lines compare with
kiln's "BENCH" lines of tests/cuda/gpu_bench.c and tests/cuda/gpu_train.c, which time the
same work the same way:

    example_fn       a * ones(n, n) + ones(n, n), n = 1000 and 8192 (eager, compiled)
    ten_op           the 10-op pointwise graph of tests/support/ten_ops.h on 16 elements
                     (eager, compiled, reduce-overhead)
    mlp_train        Linear(784,512)-ReLU-Linear(512,512)-ReLU-Linear(512,10), batch 256,
                     cross_entropy, backward, SGD(lr=0.01) step, zero_grad
                     (eager, compiled: the loss and the optimizer step compiled;
                     reduce-overhead: the same with mode="reduce-overhead")
    transformer      TransformerEncoderLayer(256, 4, 1024, dropout=0, batch_first) on
                     (16, 128, 256): forward, sum, backward, zero_grad (eager, compiled,
                     reduce-overhead)

A workload that fails prints "TORCH <workload> <mode> FAILED <reason>" and the others go on.
"""
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = "cuda"


def timed(step, reps, warm=5):
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    v = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        v.append(time.perf_counter() - t0)
    return statistics.median(v) * 1e6, min(v) * 1e6


def example_fn(a):
    n = a.shape[0]
    out = a.mul(torch.ones(n, n, device=DEV))
    return out.add(torch.ones(n, n, device=DEV))


def ten_ops(a, b):
    t = a * b
    t = t + a
    t = t - b
    t = t * 0.5
    t = torch.sin(t)
    t = t * t
    t = t + 1
    t = -t
    t = torch.exp(t)
    return t + b


def build_example(n):
    def build(mode):
        a = torch.randn(n, n, device=DEV)
        f = example_fn if mode == "eager" else torch.compile(example_fn, dynamic=False)
        return lambda: f(a)
    return build


def build_ten_op(mode):
    a, b = torch.randn(16, device=DEV), torch.randn(16, device=DEV)
    if mode == "eager":
        f = ten_ops
    else:
        f = torch.compile(ten_ops, dynamic=False, mode=None if mode == "compiled" else mode)
    return lambda: f(a, b)


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10)).to(DEV)


def mlp_loss(model, x, y):
    return F.cross_entropy(model(x), y)


def build_mlp_train(mode):
    model = mlp()
    x = torch.randn(256, 784, device=DEV)
    y = torch.randint(0, 10, (256,), device=DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if mode == "eager":
        loss_fn, opt_step = mlp_loss, opt.step
    else:
        m = None if mode == "compiled" else mode
        loss_fn = torch.compile(mlp_loss, dynamic=False, mode=m)

        @torch.compile(dynamic=False)
        def opt_step():
            opt.step()

    def step():
        loss = loss_fn(model, x, y)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
    return step


def build_transformer(mode):
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True).to(DEV)
    layer.train()
    x = torch.randn(16, 128, 256, device=DEV)

    def loss(layer, x):
        return layer(x).sum()
    if mode == "eager":
        f = loss
    else:
        f = torch.compile(loss, dynamic=False, mode=None if mode == "compiled" else mode)

    def step():
        f(layer, x).backward()
        layer.zero_grad(set_to_none=True)
    return step


WORKLOADS = [  # the training steps first (a time limit around the run cuts the rest)
    ("mlp_train", build_mlp_train, ["eager", "compiled", "reduce-overhead"], 300),
    ("transformer", build_transformer, ["eager", "compiled", "reduce-overhead"], 100),
    ("ten_op", build_ten_op, ["eager", "compiled", "reduce-overhead"], 2000),
    ("example_fn_8192", build_example(8192), ["eager", "compiled"], 50),
    ("example_fn", build_example(1000), ["eager", "compiled"], 500),
]


def main():
    want = set(sys.argv[1:])
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
    for name, build, modes, reps in WORKLOADS:
        if want and name not in want:
            continue
        for mode in modes:
            try:
                t0 = time.perf_counter()
                step = build(mode)
                step()
                torch.cuda.synchronize()
                first = (time.perf_counter() - t0) * 1e3
                med, low = timed(step, reps)
                print(f"TORCH {name} {mode} {med:.1f} {low:.1f}", flush=True)
                print(f"# {name} {mode}: first call {first:.0f} ms, {reps} reps", flush=True)
            except Exception as e:  # noqa: BLE001 - report and go on
                msg = " ".join(f"{type(e).__name__}: {e}".split())[:300]
                print(f"TORCH {name} {mode} FAILED {msg}", flush=True)


if __name__ == "__main__":
    main()
