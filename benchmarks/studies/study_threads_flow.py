"""What the package's own choice of BLAS threads gives a flow, idle and with one core busy.

Times ``ln.gradient_flow`` (default method, backend and tolerances, a fresh warm process)
on two problems, in alternating rounds: with the package's rule (what a user gets), with
the libraries' whole pool forced (``ln.threads(pool)``: what the package did before it chose)
and with one thread forced (``ln.threads(1)``), each idle and then with one core busy with
an unrelated process (``benchmarks/problems.busy_core``).  Printed: the median wall time of
each setting over the rounds and its ratio to the package's rule in the same machine state.

* ``tanh``: bench_mlp's smooth problem, 10-64-64-1 tanh with biases, P = 200, to t = 50;
* ``relu``: a centred 64-200-1 ReLU net on the bundled digits (0 against 1, P = 100,
  alpha = 1), to t = 20;
* ``wide``: 64-512-512-1 tanh, P = 1000 (products above ``CROSSOVER``), to t = 0.5.

Usage::

    python benchmarks/studies/study_threads_flow.py [--rounds 3] [--problems tanh,relu,wide]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import bench_mlp  # noqa: E402
from problems import busy_core  # noqa: E402

import linearnets as ln  # noqa: E402


def problem(name):
    if name == "tanh":
        pb = bench_mlp.make("smooth", True)
        return pb["ws"], pb["X"], pb["Y"], pb["kw"], 50.0
    rng = np.random.default_rng(7)
    if name == "relu":
        from sklearn.datasets import load_digits
        X, y = load_digits(n_class=2, return_X_y=True)
        X = (X - X.mean(0)) / (X.std(0) + 1e-12)
        X, y = X[:100], np.where(y[:100] == 0, -1.0, 1.0)
        ws = ln.init_network((64, 200, 1), np.sqrt(2.0), seed=rng)
        return ws, X, y, dict(activation="relu", centered=True), 20.0
    X = rng.standard_normal((1000, 64))
    Y = np.tanh(X[:, :3].sum(1, keepdims=True))
    ws = ln.init_network((64, 512, 512, 1), 1.0, seed=rng)
    return ws, X, Y, dict(activation="tanh"), 0.5


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--problems", default="tanh,relu,wide")
    args = ap.parse_args(argv)
    pool = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    settings = {"package's rule": None, f"pool ({pool})": pool, "one thread": 1}
    print(f"{os.cpu_count()} cores, BLAS pool {pool}, load average {os.getloadavg()[0]:.2f}")
    for name in args.problems.split(","):
        ws, X, Y, kw, t_end = problem(name)
        run = (lambda: ln.gradient_flow(ws, X, Y, [t_end], **kw))
        run()                                                    # compile or load
        for busy in (False, True):
            times = {k: [] for k in settings}
            with busy_core(busy):
                for _ in range(args.rounds):
                    for label, n in settings.items():
                        t0 = time.perf_counter()
                        if n is None:
                            tr = run()
                        else:
                            with ln.threads(n):
                                tr = run()
                        times[label].append(time.perf_counter() - t0)
            base = np.median(times["package's rule"])
            cells = ", ".join(f"{k} {np.median(v) * 1e3:.0f} ms ({np.median(v) / base:.2f}x)"
                              for k, v in times.items())
            print(f"{name:5s} {'busy' if busy else 'idle'}: {cells}; nfev {tr.nfev}", flush=True)


if __name__ == "__main__":
    main()
