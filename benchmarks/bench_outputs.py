"""What a dense grid of output times costs ``gradient_flow``.

The steppers land exactly on every output time (no interpolation), so each output
ends a step: ``T`` output times cost at least ``T - 1`` steps, however long the
steps could otherwise be.  This script integrates the small and medium problems of
``bench_flow.py`` to their ``t_end`` with ``T`` log-spaced output times (from 1e-2,
plus 0) and prints gradient evaluations, steps and time, each as a ratio against the
two-point run ``[0, t_end]`` measured in the same run.

Usage::

    python benchmarks/bench_outputs.py [--problems small,medium]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_flow as bf  # noqa: E402
import linearnets as ln  # noqa: E402

#: (method, rtol) per problem: the fastest rows of bench_flow.py on the numba backend.
RUNS = {"small": (("RK45", 3e-5),), "medium": (("SSPRK104", 3e-3), ("RK45", 1e-2))}
#: Numbers of output times tried (2 is the baseline [0, t_end]).
COUNTS = {"small": (2, 10, 100, 1000), "medium": (2, 10, 100, 1000)}


def grid(t_end, T):
    if T == 2:
        return np.array([0.0, t_end])
    return np.concatenate(([0.0], np.logspace(-2, np.log10(t_end), T - 1)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="small,medium")
    args = ap.parse_args(argv)
    for name in args.problems.split(","):
        ws, X, Y, tmax = bf.make(name)
        t_end, _, _ = bf.reference(ws, X, Y, tmax, "numba")
        print(f"\n=== {name}: t_end = {t_end:.6g}")
        print(f"  {'method':9s} {'rtol':>6s} {'T':>5s} {'nfev':>7s} {'steps':>6s} {'time (s)':>9s} "
              f"{'nfev/base':>9s} {'time/base':>9s}")
        for method, rtol in RUNS[name]:
            base = None
            for T in COUNTS[name]:
                te = grid(t_end, T)
                kw = dict(rtol=rtol, atol=rtol * bf.ATOL_RATIO, backend="numba", method=method)
                ln.gradient_flow(ws, X, Y, te[:2], **kw)  # compiled / cache loaded
                dt = np.inf
                for _ in range(bf.REPEATS):
                    t0 = time.perf_counter()
                    tr = ln.gradient_flow(ws, X, Y, te, **kw)
                    dt = min(dt, time.perf_counter() - t0)
                    if dt > 1.0:
                        break
                if base is None:
                    base = (tr.nfev, dt)
                print(f"  {method:9s} {rtol:6.0e} {T:5d} {tr.nfev:7d} {tr.nsteps:6d} {dt:9.4f} "
                      f"{tr.nfev / base[0]:9.2f} {dt / base[1]:9.2f}", flush=True)


if __name__ == "__main__":
    main()
