"""What a dense grid of output times costs ``gradient_flow``, stepped and interpolated.

By default the steppers land exactly on every output time (no interpolation), so
each output ends a step: ``T`` output times cost at least ``T - 1`` steps, however
long the steps could otherwise be.  With ``dense=True`` (RK45, SSPRK104) the outputs
inside a step come from its continuous extension and only the last one ends a step.  This
script integrates the small and medium problems of ``bench_flow.py`` to their
``t_end`` with ``T`` log-spaced output times (from 1e-2, plus 0) and prints gradient
evaluations, steps, time and the largest error of the outputs against a tight
reference (relative to the largest entry of the end-to-end map), each cost as a
ratio against the two-point run ``[0, t_end]`` measured in the same run.

``--observations`` measures instead what observing costs on the large problem on the
numba backend (DOP853, rtol 1e-2, outputs evenly spaced to ``t_end``): the shipped
observers, whose products are compiled (``_kernels.end_to_end``, ``balance_drift``,
``probe_ntk``), against the same runs observing through numpy's BLAS, a library
whose threads contend with the compiled loop's, which still spin when an output is
observed; without recordings at 2, 21 and 101 outputs, then recording the
conservation drift, and the NTK on 50 training points, at 11.

Usage::

    python benchmarks/bench_outputs.py [--problems small,medium] [--observations]
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

#: (method, rtol, dense) per problem: the fastest rows of bench_flow.py on the numba
#: backend, and RK45 interpolating (on the small problem SSPRK104 interpolating too, at
#: the tolerance bench_flow.py finds for it there).
RUNS = {"small": (("RK45", 3e-5, False), ("RK45", 3e-5, True), ("SSPRK104", 1e-6, True)),
        "medium": (("SSPRK104", 3e-3, False), ("SSPRK104", 3e-3, True), ("RK45", 1e-2, False),
                   ("RK45", 1e-2, True))}
#: Numbers of output times tried (2 is the baseline [0, t_end]).
COUNTS = {"small": (2, 10, 100, 1000), "medium": (2, 10, 100, 1000)}


def grid(t_end, T):
    if T == 2:
        return np.array([0.0, t_end])
    return np.concatenate(([0.0], np.logspace(-2, np.log10(t_end), T - 1)))


def observations(counts=(2, 21, 101), record_count=11, probe_size=50):
    """Time of large-problem runs with the shipped (compiled) and the numpy observers:
    the end-to-end map at ``counts`` outputs, then recording the conservation drift and
    the NTK on ``probe_size`` training points at ``record_count`` outputs."""
    from linearnets.sim import flow

    ws, X, Y, tmax = bf.make("large")
    t_end, _, _ = bf.reference(ws, X, Y, tmax, "numba")
    factories = ("_end_to_end_of", "_balance_drift_of", "_probe_ntk_of")
    shipped = {name: getattr(flow, name) for name in factories}

    def use(observer):
        for name, make in shipped.items():
            if observer == "compiled":
                setattr(flow, name, make)
            else:  # the reference path, whatever the backend
                setattr(flow, name, lambda problem, backend, *a, make=make: make(problem, "numpy",
                                                                                   *a))

    def timed(te, **extra):
        times = {}
        for observer in ("numpy", "compiled") * 2:
            use(observer)
            t0 = time.perf_counter()
            tr = ln.gradient_flow(ws, X, Y, te, **kw, **extra)
            times[observer] = min(times.get(observer, np.inf), time.perf_counter() - t0)
        return tr, times["numpy"], times["compiled"]

    print(f"\n=== large: t_end = {t_end:.6g}; DOP853 numba, rtol 1e-2, T evenly spaced outputs")
    print(f"  {'record':13s} {'T':>4s} {'nfev':>6s} {'numpy BLAS (s)':>14s} {'compiled (s)':>12s} "
          f"{'ratio':>6s} {'ms per output saved':>19s}")
    kw = dict(rtol=1e-2, atol=1e-2 * bf.ATOL_RATIO, backend="numba", method="DOP853")
    ln.gradient_flow(ws, X, Y, [0.0, 1e-6], **kw)  # compiled / cache loaded
    rows = [("-", T, {}) for T in counts]
    rows += [("conservation", record_count, dict(record=("conservation",))),
             ("ntk (probe)", record_count, dict(probe=(X[:probe_size], Y[:probe_size])))]
    try:
        for label, T, extra in rows:
            tr, a, b = timed(np.linspace(0.0, t_end, T), **extra)
            print(f"  {label:13s} {T:4d} {tr.nfev:6d} {a:14.3f} {b:12.3f} {a / b:6.2f} "
                  f"{(a - b) / T * 1e3:19.1f}", flush=True)
    finally:
        use("compiled")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="small,medium")
    ap.add_argument("--observations", action="store_true",
                    help="instead: the cost of observing on the large problem, compiled "
                         "against numpy's BLAS")
    args = ap.parse_args(argv)
    if args.observations:
        observations()
        return
    for name in args.problems.split(","):
        ws, X, Y, tmax = bf.make(name)
        t_end, _, _ = bf.reference(ws, X, Y, tmax, "numba")
        print(f"\n=== {name}: t_end = {t_end:.6g}")
        print(f"  {'method':9s} {'dense':5s} {'rtol':>6s} {'T':>5s} {'nfev':>7s} {'steps':>6s} "
              f"{'time (s)':>9s} {'nfev/base':>9s} {'time/base':>9s} {'max error':>9s}")
        refs = {}
        for method, rtol, dense in RUNS[name]:
            base = None
            for T in COUNTS[name]:
                te = grid(t_end, T)
                if T not in refs:
                    refs[T] = ln.gradient_flow(ws, X, Y, te, rtol=1e-9, atol=1e-13,
                                               backend="numba").end_to_end
                kw = dict(rtol=rtol, atol=rtol * bf.ATOL_RATIO, backend="numba", method=method,
                          dense=dense)
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
                err = np.abs(tr.end_to_end - refs[T]).max() / np.abs(refs[T]).max()
                print(f"  {method:9s} {str(dense):5s} {rtol:6.0e} {T:5d} {tr.nfev:7d} {tr.nsteps:6d} "
                      f"{dt:9.4f} {tr.nfev / base[0]:9.2f} {dt / base[1]:9.2f} {err:9.2e}",
                      flush=True)


if __name__ == "__main__":
    main()
