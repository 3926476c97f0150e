"""What integrating far past convergence costs, with and without the stiffness switch.

Once the modes of a linear network have converged, an explicit method's step is
held at its stability limit (``1 / rate`` of the fastest relaxing mode), so the cost
of DOP853 grows linearly with the horizon: a grid of output times shared by a sweep
over initial scales, long enough for the slowest run, makes every faster run pay for
it.  ``method="auto"`` detects the held step and switches to the L-stable ROS34PW2,
whose steps then grow with ``t``.  This script integrates two networks to horizons
``t_end`` from 1e2 to 1e8 (60 log-spaced outputs from 0.1, plus 0) and prints
gradient evaluations (plus two per Jacobian-vector product for auto), time, the
final loss, and each time as a ratio to DOP853 on the numba backend at the same
horizon, measured in the same run (where DOP853 would take longer than
``DOP853_MAX_T`` it is not run):

* ``tour``: the depth-3 network of README's tour (10-50-50-1, balanced init at
  sigma = 0.1, whitened scalar teacher s = 2, P = 40);
* ``bottleneck``: 6-2-3 learning a rank-3 task with label noise (P = 100), whose
  loss converges to a nonzero minimum the bottleneck cannot pass.

Usage::

    python benchmarks/bench_horizon.py
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import linearnets as ln  # noqa: E402
from linearnets.data import teacher_task  # noqa: E402

#: Horizons integrated.
HORIZONS = (1e2, 1e4, 1e6, 1e8)
#: DOP853 is run up to this horizon only (its cost grows linearly beyond convergence).
DOP853_MAX_T = 1e4
#: Repetitions (the best time counts).
REPEATS = 3


def problems():
    X, y, beta = ln.scalar_teacher(P=40, D=10, s=2.0, seed=0)
    tour = ln.init_balanced((10, 50, 50, 1), sigma=0.1, left=[[1.0]], right=beta[:, None])
    X2, Y2 = teacher_task(100, 6, (1.0, 0.5, 0.2), seed=0)
    Y2 = Y2 + 0.1 * np.random.default_rng(0).standard_normal(Y2.shape)
    neck = ln.init_network((6, 2, 3), 1e-2, seed=0)
    return {"tour": (tour, X, y), "bottleneck": (neck, X2, Y2)}


def timed(ws, X, Y, t_eval, method, backend):
    ln.gradient_flow(ws, X, Y, t_eval[:3], method=method, backend=backend)  # compile/warm up
    best = np.inf
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        tr = ln.gradient_flow(ws, X, Y, t_eval, method=method, backend=backend)
        best = min(best, time.perf_counter() - t0)
    return tr, best


def main():
    runs = (("DOP853", "numba"), ("auto", "numpy"), ("auto", "numba"))
    for name, (ws, X, Y) in problems().items():
        print(f"\n=== {name}: layers {'-'.join(str(w.shape[1]) for w in ws)}-{ws[-1].shape[0]}, "
              f"default tolerances (rtol 1e-8, atol 1e-12)")
        print(f"  {'t_end':>7s} {'method':7s} {'backend':7s} {'nfev':>8s} {'time (s)':>9s} "
              f"{'vs DOP853':>9s} {'final loss':>11s}  switch")
        for t_end in HORIZONS:
            t_eval = np.concatenate(([0.0], np.logspace(-1, np.log10(t_end), 60)))
            base = None
            for method, backend in runs:
                if method == "DOP853" and t_end > DOP853_MAX_T:
                    print(f"  {t_end:7.0e} {method:7s} {backend:7s} "
                          f"{'(not run: grows ~ t_end)':>30s}")
                    continue
                tr, dt = timed(ws, X, Y, t_eval, method, backend)
                if method == "DOP853":
                    base = dt
                ratio = f"{base / dt:8.1f}x" if base is not None else f"{'-':>9s}"
                switch = (tr.message.split("(stiff from ")[1].rstrip(")")
                          if "stiff from" in tr.message else "")
                ok = "" if tr.success else f"  FAILED: {tr.message}"
                print(f"  {t_end:7.0e} {method:7s} {backend:7s} {tr.nfev:8d} {dt:9.4f} {ratio} "
                      f"{tr.loss[-1]:11.3e}  {switch}{ok}", flush=True)


if __name__ == "__main__":
    main()
