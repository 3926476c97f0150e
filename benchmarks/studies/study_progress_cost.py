"""What ``progress=`` costs: the same ``gradient_flow`` call without the keyword, with
``progress=False`` and with ``progress=True`` (the bar drawn into /dev/null), in one process,
the three alternating over ``--rounds`` rounds (best of ``--repeats`` each).

Two problems: ``numba``, bench_flow's small one (20-32-32-1, P = 200, linear, RK45 at rtol
3e-5 to t = 1122.4: the compiled loop, the hook called per chunk) and ``numpy``, a 10-32-1 tanh
net on 100 samples (DOP853 at rtol 1e-8 to t = 200: the numpy loop, the hook called before
every step).  Without the keyword on a stream that is not a terminal the bar is off, as
``progress=False``: no hook at all.

Run: ``python benchmarks/studies/study_progress_cost.py [--rounds 7] [--repeats 5]``
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import numpy as np

import linearnets as ln


def problems():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 20))
    Y = X @ rng.standard_normal((20, 1)) / np.sqrt(20)
    ws = ln.init_network((20, 32, 32, 1), 0.5, seed=1)
    small = (ws, X, Y, [0.0, 1122.4], dict(backend="numba", method="RK45", rtol=3e-5, atol=3e-8))
    X2 = rng.standard_normal((100, 10))
    Y2 = np.sin(X2[:, :1])
    ws2 = ln.init_network((10, 32, 1), 1.0, seed=2)
    mlp = (ws2, X2, Y2, [0.0, 200.0], dict(backend="numpy", method="DOP853", rtol=1e-8,
                                           activation="tanh"))
    return {"numba": small, "numpy": mlp}


def timed(args, extra, repeats):
    ws, X, Y, t, kw = args
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        tr = ln.gradient_flow(ws, X, Y, t, **kw, **extra)
        best = min(best, time.perf_counter() - start)
    assert tr.success
    return best, tr.nfev


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    variants = {"no keyword": {}, "progress=False": {"progress": False},
                "progress=True": {"progress": True}}
    for name, prob in problems().items():
        timed(prob, {}, 1)                       # compile / warm
        times = {v: [] for v in variants}
        for _ in range(a.rounds):
            for v, extra in variants.items():
                with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                    best, nfev = timed(prob, extra, a.repeats)
                times[v].append(best)
        base = np.array(times["no keyword"])
        print(f"{name}: {nfev} evaluations; best of {a.repeats}, {a.rounds} alternating rounds")
        for v in variants:
            t = np.array(times[v])
            print(f"  {v:15s} min {1e3 * t.min():8.3f} ms  median {1e3 * np.median(t):8.3f} ms  "
                  f"ratio to no keyword: min {t.min() / base.min():.3f}, median of rounds "
                  f"{np.median(t / base):.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
