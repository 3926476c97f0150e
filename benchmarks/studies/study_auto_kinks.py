"""``method="auto"`` against fixed methods on sliding ReLU flows (docs/simulator.md).

Two problems, every method at the same tolerances, best of two timed runs (numba, compiled
loops loaded untimed first); only ratios within a row mean anything on a shared machine:

- ``small``: ``benchmarks/bench_mlp.py``'s small problem (10-64-64-1 ReLU, P = 200, sliding
  along kinks from t = 0) at rtol = kink_rtol = ``--rtol``, to ``--t-end``;
- ``luo``: ``experiments/luo_two_layer``'s ``point`` at m = ``--width``, seed 0, over
  gamma in {0.2, 1, 1.8} and gamma' in {-0.8, 0, 0.8} (the experiment's tolerances).

Run: ``python benchmarks/studies/study_auto_kinks.py [--only small,luo] [--methods auto,SSPRK104]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "experiments", "luo_two_layer"))

import linearnets as ln  # noqa: E402


def small(methods, rtol, t_end):
    from bench_mlp import make
    pb = make("small", quick=False)

    def run(m, tol):
        return ln.gradient_flow(pb["ws"], pb["X"], pb["Y"], [t_end], rtol=tol, kink_rtol=tol,
                                backend="numba", record=("outputs",), method=m,
                                max_steps=10 ** 7, **pb["kw"])
    for m in methods:
        run(m, 1e-3)
    F0 = None
    for m in methods:
        best, tr = np.inf, None
        for _ in range(2):
            t0 = time.perf_counter()
            tr = run(m, rtol)
            best = min(best, time.perf_counter() - t0)
        F = tr.outputs[-1]
        F0 = F if F0 is None else F0
        print(f"small rtol {rtol:g} {m:9s} {best:8.3f} s  nfev {tr.nfev:8d}  steps {tr.nsteps:6d}"
              f"  by BS32 {tr.fallback_steps:6d}  sliding {tr.sliding_time:.3f}"
              f"  |F - F[{methods[0]}]| / |F| {np.abs(F - F0).max() / np.abs(F0).max():.2e}",
              flush=True)


def luo(methods, width):
    import luo as experiment
    orig = ln.gradient_flow
    try:
        for g in (0.2, 1.0, 1.8):
            for gp in (-0.8, 0.0, 0.8):
                row = []
                for m in methods:
                    seen = {}

                    def gf(*a, m=m, seen=seen, **k):
                        k["method"] = m
                        seen["tr"] = orig(*a, **k)
                        return seen["tr"]
                    ln.gradient_flow = gf
                    t0 = time.perf_counter()
                    r = experiment.point(g, gp, width, 0)
                    dt = time.perf_counter() - t0
                    row.append(f"{m}: {dt:6.2f} s nfev {seen['tr'].nfev:7d} rd_w {r['rd_w']:.5f}")
                print(f"luo gamma {g} gamma' {gp} m {width} | " + " | ".join(row), flush=True)
    finally:
        ln.gradient_flow = orig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="small,luo")
    ap.add_argument("--methods", default="auto,SSPRK104")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--t-end", type=float, default=4.0)
    ap.add_argument("--width", type=int, default=1000)
    args = ap.parse_args(argv)
    methods = args.methods.split(",")
    only = args.only.split(",")
    if "small" in only:
        small(methods, args.rtol, args.t_end)
    if "luo" in only:
        luo(methods, args.width)


if __name__ == "__main__":
    main()
