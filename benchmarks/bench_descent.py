"""Gradient descent: a full-batch step of ``ln.gradient_descent`` against one compiled
gradient evaluation of the same model, and against PyTorch, same run.

Problems: bench_mlp's small problem (10-64-64-1 ReLU, P = 200, squared loss, He init, a
ReLU teacher), and the same at hidden widths ``--widths`` (default 256, 512).

Measured, every side on one thread (threadpoolctl on the BLAS pools, ``torch.set_num_threads
(1)``), best of ``--rounds`` alternating rounds:

- step: ``ln.gradient_descent(..., backend="numba")`` from step 0 to ``n`` (one compiled
  loop, the model's compiled gradient) minus the same call to step 1, over ``n - 1``: the
  cost of a step without the call's fixed cost;
- gradient: one call of the compiled model's right-hand side ``MLPNumba.rhs(y, out)`` (the
  gradient the loop calls, from Python: its call overhead included), target: step <= 1.5x;
- GEMM floor: the matrix products that any backpropagated gradient of this network
  forms (forward ``H_l W_{l+1}^T``, backward ``G^T H`` and ``G W``), timed alone with
  ``np.dot`` into preallocated outputs;
- torch: a full-batch step of PyTorch float64 on CPU (``torch.autograd.grad`` of the same
  loss, then ``w -= lr * g`` under ``no_grad``), per step over ``n`` steps; skipped when
  torch is not importable (it is not a dependency of the package).  Targets: >= 5x torch's
  steps per second at width 64, >= 1x at widths >= 256.

Run: ``python benchmarks/bench_descent.py [--widths 256,512] [--steps 2000] [--rounds 3]``.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import linearnets as ln  # noqa: E402
from bench_mlp import make  # noqa: E402
from problems import best_of as best  # noqa: E402
from linearnets.sim.models import get_model, parse_options  # noqa: E402

LR = 0.01


def problem(width):
    pb = make("small", quick=False)
    if width != 64:
        rng = np.random.default_rng(width)
        sizes = (10, width, width, 1)
        pb = dict(pb, sizes=sizes, ws=ln.init_network(sizes, np.sqrt(2.0), seed=rng))
    return pb


def package_step(pb, n):
    X, Y, ws, kw = pb["X"], pb["Y"], pb["ws"], pb["kw"]
    long_ = lambda: ln.gradient_descent(ws, X, Y, [n], LR, backend="numba", **kw)  # noqa: E731
    short = lambda: ln.gradient_descent(ws, X, Y, [1], LR, backend="numba", **kw)  # noqa: E731
    long_(), short()                                     # compile / load
    return long_, short


def gradient_call(pb, reps):
    kw = pb["kw"]
    opts = parse_options(len(pb["ws"]), activation=kw["activation"], loss=kw["loss"])
    net = get_model("mlp").numba_model(pb["ws"], None, opts).prepare(pb["X"], pb["Y"])
    y, out = net.y0.copy(), np.empty(net.y0.size)
    net.rhs(y, out)

    def run():
        for _ in range(reps):
            net.rhs(y, out)
    return run


def gemm_floor(pb, reps):
    """The products of one gradient: forward ``h W^T`` per layer, ``G^T h`` per layer and
    ``G W`` below the top, on arrays of the problem's shapes."""
    P = pb["X"].shape[0]
    rng = np.random.default_rng(0)
    ops = []
    h = pb["X"]
    for w in pb["ws"]:
        r, c = w.shape
        hin = h if h.shape == (P, c) else rng.standard_normal((P, c))
        G = rng.standard_normal((P, r))
        ops.append((hin, w.T.copy(), np.empty((P, r))))          # forward
        ops.append((G.T.copy(), hin, np.empty((r, c))))          # weight gradient
        if c != pb["X"].shape[1]:
            ops.append((G, w, np.empty((P, c))))                 # backpropagation
        h = rng.standard_normal((P, r))

    def run():
        for _ in range(reps):
            for a, b, out in ops:
                np.dot(a, b, out)
    return run


def torch_steps(pb, n):
    import torch
    torch.set_num_threads(1)
    X = torch.from_numpy(pb["X"])
    Y = torch.from_numpy(pb["Y"])
    P = X.shape[0]

    def run():
        Ws = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in pb["ws"]]
        for _ in range(n):
            h = X
            for w in Ws[:-1]:
                h = torch.relu(h @ w.T)
            F = h @ Ws[-1].T
            loss = 0.5 * ((Y - F) ** 2).sum() / P
            gs = torch.autograd.grad(loss, Ws)
            with torch.no_grad():
                for w, g in zip(Ws, gs):
                    w -= LR * g
        return Ws
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", default="256,512")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    widths = [64] + [int(w) for w in args.widths.split(",") if w]
    have_torch = importlib.util.find_spec("torch") is not None
    print(f"bench_descent: one thread, best of {args.rounds} alternating rounds; torch "
          f"{'yes' if have_torch else 'absent (rows skipped)'}")
    head = (f"{'width':>6} {'steps':>6} {'GD step us':>11} {'gradient us':>12} {'step/grad':>10}"
            f" {'GEMM floor us':>14} {'torch step us':>14} {'vs torch':>9}")
    print(head)
    with threadpool_limits(1):
        for width in widths:
            pb = problem(width)
            n = args.steps if width <= 64 else max(args.steps // (width // 64) ** 2, 50)
            long_, short = package_step(pb, n)
            grad = gradient_call(pb, n)
            floor = gemm_floor(pb, n)
            tr = torch_steps(pb, n) if have_torch else None
            if tr is not None:
                tr()
            t_long = t_short = t_grad = t_torch = t_floor = np.inf
            for _ in range(args.rounds):           # alternating rounds
                t_long = min(t_long, best(long_, 1))
                t_short = min(t_short, best(short, 1))
                t_grad = min(t_grad, best(grad, 1))
                t_floor = min(t_floor, best(floor, 1))
                if tr is not None:
                    t_torch = min(t_torch, best(tr, 1))
            step = (t_long - t_short) / (n - 1)
            g = t_grad / n
            ts = t_torch / n if tr is not None else np.nan
            print(f"{width:>6} {n:>6} {step * 1e6:>11.2f} {g * 1e6:>12.2f} {step / g:>10.2f}"
                  f" {t_floor / n * 1e6:>14.2f} {ts * 1e6:>14.2f} {ts / step:>8.2f}x")


if __name__ == "__main__":
    main()
