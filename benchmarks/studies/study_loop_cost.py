"""What one evaluation of the compiled stepping loop costs on bench_flow's problems.

``bench_flow.py`` times whole ``gradient_flow`` calls; this script times the compiled loop
alone: it runs ``gradient_flow`` once, captures the first call of
``methods.compiled.advance_in_chunks`` (the loop's arguments and every writable array
reachable from them, the model's stage store included) and then replays that call from
the captured state, best of ``--repeats``: the same steps each time, so the time per
evaluation is the loop's own (no validation, set-up or outputs).  It runs on any tree
whose runner calls ``advance_in_chunks`` (``PYTHONPATH`` chooses the tree), so two trees
compare on identical steps.

With ``--parts`` it also times the kernels of SSPRK104's low-storage loop one by one on the
captured store (the gradient's chains, a stage added into a register, the error and
stiffness sums, one vector pass over the state), to split an evaluation into products,
passes and the rest.

Usage::

    PYTHONPATH=$PWD python benchmarks/studies/study_loop_cost.py [--problems small,medium]
        [--methods RK45,DOP853,SSPRK104] [--rtol 1e-5] [--repeats 5] [--parts]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow

import linearnets as ln  # noqa: E402
from linearnets.sim.methods import compiled  # noqa: E402

import bench_flow as bf  # noqa: E402

#: t_end of bench_flow's problems (its reference run prints them).
T_END = {"small": 1122.4, "medium": 1125.1}


def _arrays(obj, seen, out, depth=0):
    """Every writable ndarray reachable from ``obj`` through attributes, tuples and lists."""
    if id(obj) in seen or depth > 4:
        return
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        if obj.flags.writeable and obj.size:
            out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            _arrays(o, seen, out, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for o in vars(obj).values():
            _arrays(o, seen, out, depth + 1)


def capture(ws, X, Y, t_end, method, rtol):
    """Run ``gradient_flow`` once; the first compiled loop call as ``(replay, arrays)``."""
    box = {}
    original = compiled.advance_in_chunks

    def spy(advance, counts, max_steps, n, s, *rest):
        if not box:
            cells = [c.cell_contents for c in (advance.__closure__ or ())]
            arrays = []
            _arrays(cells, set(), arrays)
            box["saved"] = [(a, a.copy()) for a in arrays]
            box["call"] = (advance, counts, max_steps, n, s)
            box["ops"] = next((c for c in cells if hasattr(c, "advance")), None)
        return original(advance, counts, max_steps, n, s, *rest)

    compiled.advance_in_chunks = spy
    try:
        ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * bf.ATOL_RATIO,
                         backend="numba", method=method)
    finally:
        compiled.advance_in_chunks = original
    advance, counts, max_steps, n, s = box["call"]

    def replay():
        for a, c in box["saved"]:
            np.copyto(a, c)
        nfev = int(counts[0])
        t0 = time.perf_counter()
        original(advance, counts, max_steps, n, s)
        return time.perf_counter() - t0, int(counts[0]) - nfev
    return replay, box["ops"]


def best(f, repeats):
    return min(f() for _ in range(repeats))


def parts(ops, repeats):
    """Per-call times (us) of the kernels of SSPRK104's low-storage loop on ``ops.data``."""
    from linearnets.sim.models import _linear_kernels as lk
    d = ops.data
    q1, q2, at, g = d[:4]
    Sxx, Syx, _, lay, _, _, scratch = d[-1]
    y = ops.f0.copy() * 0.0 + 0.01
    y_new = y + 1e-6

    def chains():
        lk.chains(q1, Sxx, Syx, lay, at[3], g[3], scratch)

    def add():
        lk.add_stage(q2, 1e-9, 3, d)

    def err():
        lk.error_sums(y, y_new, q1, 1e-3, 1e-5, 1e-8, d)

    def stiff():
        lk.slot_stiffness_sums(3, 2, d)

    def vpass():
        np.multiply(q1, 0.6, q2)

    out = {}
    for name, f in (("chains (gradient products)", chains), ("add_stage", add),
                    ("error_sums", err), ("slot_stiffness_sums", stiff),
                    ("one vector pass (numpy)", vpass)):
        f()
        reps = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(20):
                f()
            reps.append((time.perf_counter() - t0) / 20)
        out[name] = min(reps) * 1e6
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="small,medium")
    ap.add_argument("--methods", default="RK45,DOP853,SSPRK104")
    ap.add_argument("--rtol", type=float, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--parts", action="store_true")
    a = ap.parse_args(argv)
    for name in a.problems.split(","):
        ws, X, Y, _ = bf.make(name)
        rtol = a.rtol or (1e-5 if name == "small" else 1e-4)
        for m in a.methods.split(","):
            ln.gradient_flow(ws, X, Y, [0.0, 1e-3], backend="numba", method=m)  # compile
            replay, ops = capture(ws, X, Y, T_END[name], m, rtol)
            reps = [replay() for _ in range(a.repeats)]
            dt, nfev = min(reps)
            print(f"{name:7s} {m:9s} {type(ops).__name__:18s} rtol {rtol:.0e}: nfev {nfev:6d}, "
                  f"loop {dt * 1e3:9.2f} ms, {dt / nfev * 1e6:8.2f} us/eval", flush=True)
            if a.parts and m == "SSPRK104" and hasattr(ops, "data"):
                for k, v in parts(ops, a.repeats).items():
                    print(f"    {k:30s} {v:9.2f} us", flush=True)


if __name__ == "__main__":
    main()
