"""How the stability cap's two constants act on the medium problem of ``bench_flow.py``.

The explicit steppers cap a step at ``STABILITY_SAFETY * boundary / rho``, with
``rho`` Hairer's stiffness estimate remembered with decay ``STIFFNESS_MEMORY`` per
accepted step (``linearnets.sim.methods.base``).  This script runs SSPRK104 and RK45
(numba backend, at the tolerances where ``bench_flow.py`` finds them reaching its
accuracy target) over a grid of the two constants, and prints gradient evaluations,
rejected steps, the error of W(t_end) and the time, each as a ratio against the
shipped constants measured in the same run.

``--diagnose`` then replays the shipped SSPRK104 run on the numpy stepper (the same
steps to the last bit) and, at every rejected step, measures the Jacobian's largest
eigenvalue by power iteration (exact Jacobian-vector products of
``LinearNet.linearize``): ``h lambda_max`` below the stability boundary (13.9) means the
rejection was set by accuracy -- a mode leaving its plateau -- not by stability.

``--exact`` (instead of the grid) runs SSPRK104 on the numpy stepper with the estimate replaced by the
Jacobian's largest eigenvalue itself (Lanczos, ``scipy.sparse.linalg.eigsh``, on the
exact Jacobian-vector products) after every accepted step, without memory: the
evaluations a perfect estimate would save (its own cost not counted).

Usage::

    python benchmarks/studies/study_stability_cap.py [--diagnose] [--exact]
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow

import bench_flow as bf  # noqa: E402
import linearnets as ln  # noqa: E402
from linearnets.sim.models import linear as _rhs  # noqa: E402
from linearnets.sim.methods import base as _explicit, compiled  # noqa: E402
from linearnets.sim.methods.ssp import LowStorageRK  # noqa: E402
from linearnets.sim.methods.tableaux import SSPRK104  # noqa: E402

#: (method, rtol): the tolerances at which bench_flow.py's medium rows reach 1e-4.
RUNS = (("SSPRK104", 3e-3), ("RK45", 1e-2))
SAFETIES = (0.9, 0.95, 1.0)
MEMORIES = (0.95, 0.98, 0.99, 1.0)
#: Power iterations per rejected step (warm-started from the last eigenvector).
POWER_ITERATIONS = 30


def run(ws, X, Y, t_end, method, rtol, safety, memory):
    """(nfev, rejected, seconds, W(t_end)) with the cap's constants set as given."""
    saved = _explicit.STABILITY_SAFETY, _explicit.STIFFNESS_MEMORY
    _explicit.STABILITY_SAFETY, _explicit.STIFFNESS_MEMORY = safety, memory
    compiled.STABILITY_SAFETY, compiled.STIFFNESS_MEMORY = safety, memory  # the numba loops
    try:
        t0 = time.perf_counter()
        tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * bf.ATOL_RATIO,
                              backend="numba", method=method)
        dt = time.perf_counter() - t0
    finally:
        _explicit.STABILITY_SAFETY, _explicit.STIFFNESS_MEMORY = saved
        compiled.STABILITY_SAFETY, compiled.STIFFNESS_MEMORY = saved
    return tr.nfev, tr.nrejected, dt, tr.end_to_end[-1]


def grid(ws, X, Y, t_end, Wref):
    shipped = (_explicit.STABILITY_SAFETY, _explicit.STIFFNESS_MEMORY)
    for method, rtol in RUNS:
        run(ws, X, Y, t_end, method, rtol, *shipped)  # compile / load the cache
        base = run(ws, X, Y, t_end, method, rtol, *shipped)
        print(f"\n{method} numba, rtol {rtol:g}: shipped constants (safety {shipped[0]}, memory "
              f"{shipped[1]}) take {base[0]} evaluations, {base[1]} rejected, "
              f"{base[2]:.2f} s, error {bf.rel_err(base[3], Wref):.2e}")
        print(f"  {'safety':>6s} {'memory':>6s} {'nfev':>6s} {'rej':>4s} {'error':>9s} "
              f"{'nfev/shipped':>12s} {'time/shipped':>12s}")
        for safety, memory in itertools.product(SAFETIES, MEMORIES):
            nfev, rej, dt, W = run(ws, X, Y, t_end, method, rtol, safety, memory)
            flag = "" if bf.rel_err(W, Wref) <= bf.TARGET else "  (target missed)"
            print(f"  {safety:6.2f} {memory:6.3f} {nfev:6d} {rej:4d} {bf.rel_err(W, Wref):9.2e} "
                  f"{nfev / base[0]:12.3f} {dt / base[2]:12.3f}{flag}", flush=True)


def diagnose(ws, X, Y, t_end):
    """h lambda_max at each rejected step of the shipped SSPRK104 run (numpy stepper)."""
    problem = _rhs.make_problem(tuple(w.shape for w in ws), X, Y)
    net = bf._model(problem, ws)
    n = problem.size
    attempts = []
    attempt = LowStorageRK.attempt

    def logged(self, t, y, f, h):
        y_new, f_new, err = attempt(self, t, y, f, h)
        attempts.append([h, y.copy(), err])
        return y_new, f_new, err

    LowStorageRK.attempt = logged
    rtol = dict(RUNS)["SSPRK104"]
    try:
        tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * bf.ATOL_RATIO,
                              backend="numpy", method="SSPRK104")
    finally:
        LowStorageRK.attempt = attempt
    v = np.random.default_rng(0).standard_normal(n)

    def lam_max(y):
        nonlocal v
        jv = net.linearize(y)[0]
        lam = 0.0
        for _ in range(POWER_ITERATIONS):
            out = jv(v / np.linalg.norm(v))
            lam, v = np.linalg.norm(out), out.copy()
        return lam

    B = SSPRK104.stability_boundary
    print(f"\nSSPRK104 numpy, rtol {rtol:g}: {tr.nfev} evaluations, {tr.nsteps} steps, "
          f"{tr.nrejected} rejected; rejected steps (stability boundary {B}):")
    print(f"  {'t':>9s} {'h':>8s} {'error':>8s} {'h lambda_max':>12s}  set by")
    t = 0.0
    inside = 0
    for h, y, err in attempts:
        if err is not None and err < 1.0:
            t += h
            continue
        z = h * lam_max(y)
        inside += z <= B
        print(f"  {t:9.2f} {h:8.4f} {err:8.3g} {z:12.2f}  "
              f"{'accuracy' if z <= B else 'stability'}")
    print(f"  {inside} of {tr.nrejected} rejections inside the stability interval")


def exact_cap(ws, X, Y, t_end, Wref):
    """SSPRK104 (numpy) with the cap set from the exact lambda_max after every step."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    problem = _rhs.make_problem(tuple(w.shape for w in ws), X, Y)
    net = bf._model(problem, ws)
    n = problem.size

    def lam_max(y):
        jv = net.linearize(y)[0]
        op = LinearOperator((n, n), dtype=np.float64,
                            matvec=lambda v: jv(np.ascontiguousarray(v.ravel())).copy())
        return float(abs(eigsh(op, k=1, which="LM", tol=1e-3, return_eigenvectors=False)[0]))

    estimate = LowStorageRK.stiffness

    def exact(self, h_try, y_new):
        estimate(self, h_try, y_new)  # keeps the stepper's own bookkeeping as it was
        return lam_max(y_new)

    saved = _explicit.STABILITY_SAFETY, _explicit.STIFFNESS_MEMORY
    rtol = dict(RUNS)["SSPRK104"]
    print(f"\nSSPRK104 numpy, rtol {rtol:g}: the estimate against the exact lambda_max")
    print(f"  {'cap from':>22s} {'safety':>6s} {'nfev':>6s} {'steps':>6s} {'rej':>4s} "
          f"{'error':>9s}")
    try:
        for label, safety, memory, use_exact in (("estimate (shipped)", saved[0], saved[1], False),
                                             ("exact lambda_max", 0.9, 0.0, True),
                                             ("exact lambda_max", 0.97, 0.0, True)):
            _explicit.STABILITY_SAFETY, _explicit.STIFFNESS_MEMORY = safety, memory
            LowStorageRK.stiffness = exact if use_exact else estimate
            tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * bf.ATOL_RATIO,
                                  backend="numpy", method="SSPRK104")
            print(f"  {label:>22s} {safety:6.2f} {tr.nfev:6d} {tr.nsteps:6d} {tr.nrejected:4d} "
                  f"{bf.rel_err(tr.end_to_end[-1], Wref):9.2e}", flush=True)
    finally:
        LowStorageRK.stiffness = estimate
        _explicit.STABILITY_SAFETY, _explicit.STIFFNESS_MEMORY = saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--diagnose", action="store_true",
                    help="also measure h lambda_max at each rejected SSPRK104 step")
    ap.add_argument("--exact", action="store_true",
                    help="instead of the grid, run SSPRK104 with the cap from the exact "
                         "lambda_max")
    args = ap.parse_args(argv)
    ws, X, Y, tmax = bf.make("medium")
    t0 = time.perf_counter()
    t_end, Wref, _ = bf.reference(ws, X, Y, tmax, "numba")
    print(f"medium problem, t_end = {t_end:.6g} (reference {time.perf_counter() - t0:.0f} s)")
    if args.exact:
        exact_cap(ws, X, Y, t_end, Wref)
    else:
        grid(ws, X, Y, t_end, Wref)
    if args.diagnose:
        diagnose(ws, X, Y, t_end)


if __name__ == "__main__":
    main()
