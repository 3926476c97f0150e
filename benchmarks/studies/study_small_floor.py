"""How fast can any RK45 run of the small problem be on this machine?

``bench_flow.py`` asks ``gradient_flow`` to beat scipy's RK45 on its small problem
(20-32-32-1, 1,696 parameters) by 20x.  This script measures what an RK45 run costs
when nothing but the arithmetic is left: :func:`bare_rk45` is the whole run -- the
initial step (Hairer-Norsett-Wanner, as scipy), Dormand-Prince 5(4) steps with
scipy's step-size controller, first-same-as-last -- in one compiled call with no
validation, no outputs, no stability cap and no result object, on either gradient:

* ``rhs_flat``: ``_kernels.rhs_flat``, the gradient the compiled steppers use (BLAS);
* ``loops``: ``study_narrow_kernel.hand_rhs``, the fastest gradient measured for this
  network (hand-written loops, 1.35-1.8x faster than BLAS with one output).

Beside them, in the same run and scored as ``bench_flow.py`` scores (wall time at the
loosest tolerance that reaches 1e-4 relative error of ``W(t_end)``, the next tighter
one reaching it too): scipy's RK45 on the plain numpy gradient (the baseline) and
``gradient_flow(method="RK45", backend="numba")``.  The bare runs set a floor under any
implementation of the method on this machine: ``gradient_flow`` adds to it its
validation, set-up and outputs, its own controller (stability cap, output times) and
the stepping loop's bookkeeping.

What it shows on this machine (three runs): scipy's RK45 takes 8.7-9.2 ms (284
evaluations); the bare run 1.23-1.33 ms with the loops and 1.68-1.77 ms with
``rhs_flat`` (290 evaluations: scipy's controller; 4.2-4.6 and 5.8-6.1 us each, of
which the gradient is about 2 and 3.3 us and the stage sums and error norm over the
1,696 numbers the rest), 6.8-7.5x faster than scipy; ``gradient_flow`` 1.57-1.68 ms
(5.5-5.7x) in 188 evaluations, the fewest of any run.  At those 188 evaluations the
bare cost per evaluation makes 0.80-0.86 ms, 10.7-11.5x faster than scipy's RK45:
20x leaves 0.46 ms, 2.45 us per evaluation, about the gradient's own time in loops.

Usage::

    python benchmarks/studies/study_small_floor.py
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np
from numba import njit
from scipy.integrate import solve_ivp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import linearnets as ln  # noqa: E402
from linearnets.sim.models import _linear_kernels as _kernels, linear as _rhs  # noqa: E402
from linearnets.sim.methods.base import MAX_FACTOR, MIN_FACTOR, SAFETY  # noqa: E402
from linearnets.sim.methods.tableaux import RK45  # noqa: E402
from linearnets.sim.models.linear import chain_layout, numba_rhs_args  # noqa: E402

import bench_flow as bf  # noqa: E402
from study_narrow_kernel import hand_rhs  # noqa: E402

#: Timed repetitions of each bare run and of each gradient_flow run (the best counts).
REPEATS = 200


@njit(cache=True)
def _gradient(loops, y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW,
         tbuf, wend):
    if loops:
        hand_rhs(y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, wend)
    else:
        _kernels.rhs_flat(y, out, Sxx, Syx, eta_l, (rows, cols, offs, aoff, goff), abuf, gbuf,
                          (WT, SW, tbuf))


@njit(cache=True)
def _sum(K, w, k, y, out):
    """``out = y + sum_{j<k} w_j K_j`` (``y`` None: 0 +) as row updates, which vectorise."""
    if y is None:
        out[:] = 0.0
    else:
        out[:] = y
    for j in range(k):
        c = w[j]
        if c != 0.0:
            Kj = K[j]
            for m in range(out.size):
                out[m] += c * Kj[m]


@njit(cache=True)
def _rms_scaled(v, y, y2, rtol, atol):
    acc = 0.0
    for m in range(v.size):
        sc = atol + rtol * max(abs(y[m]), abs(y2[m]))
        acc += (v[m] / sc) ** 2
    return math.sqrt(acc / v.size)


@njit(cache=True)
def bare_rk45(loops, y0, t_end, rtol, atol, A, b, e, K, ytmp, ynew, err, Sxx, Syx, eta_l, rows,
              cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf, wend):
    """RK45 from ``y0`` at t = 0 to ``t_end``: ``(y(t_end), nfev)``; every buffer given."""
    n = y0.size
    s = b.size
    y = y0.copy()
    args = (Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf, wend)
    _gradient(loops, y, K[0], *args)
    nfev = 1
    # initial step (Hairer-Norsett-Wanner I, Sec. II.4, as scipy's select_initial_step)
    d0 = _rms_scaled(y, y, y, rtol, atol)
    d1 = _rms_scaled(K[0], y, y, rtol, atol)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, t_end)
    for m in range(n):
        ytmp[m] = y[m] + h0 * K[0, m]
    _gradient(loops, ytmp, K[1], *args)
    nfev += 1
    for m in range(n):
        err[m] = K[1, m] - K[0, m]
    d2 = _rms_scaled(err, y, y, rtol, atol) / h0
    h1 = (max(1e-6, h0 * 1e-3) if (d1 <= 1e-15 and d2 <= 1e-15)
          else (0.01 / max(d1, d2)) ** 0.2)
    h = min(100 * h0, h1)
    t = 0.0
    while t < t_end:
        h = min(h, t_end - t)
        for i in range(1, s):
            _sum(K, h * A[i], i, y, ytmp)
            _gradient(loops, ytmp, K[i], *args)
        _sum(K, h * b, s, y, ynew)
        _gradient(loops, ynew, K[s], *args)
        nfev += s
        _sum(K, h * e, s + 1, None, err)
        en = _rms_scaled(err, y, ynew, rtol, atol)
        if en < 1.0:
            t += h
            for m in range(n):
                y[m] = ynew[m]
                K[0, m] = K[s, m]
            h *= MAX_FACTOR if en == 0.0 else min(MAX_FACTOR, SAFETY * en ** -0.2)
        else:
            h *= max(MIN_FACTOR, SAFETY * en ** -0.2)
    return y, nfev


def main():
    ws, X, Y, tmax = bf.make("small")
    shapes = tuple(w.shape for w in ws)
    problem = _rhs.make_problem(shapes, X, Y)
    t_end, Wref, _ = bf.reference(ws, X, Y, tmax, "numba")
    y0 = _rhs.pack(ws)
    n = y0.size
    C, D = problem.Syx.shape
    args = numba_rhs_args(problem)
    rows, cols, offs, aoff, goff = chain_layout(problem)
    # numba_rhs_args: Sxx, Syx, eta_l, lay, abuf, gbuf, (WT, SW, tbuf), flattened here
    Sxx, Syx, eta_l, _, abuf, gbuf, (WT, SW, tbuf) = args
    kargs = (Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf,
             np.empty((C, D)))
    s = RK45.n_stages
    bufs = (np.empty((s + 1, n)), np.empty(n), np.empty(n), np.empty(n))
    A, b, e = (np.ascontiguousarray(a, dtype=np.float64) for a in (RK45.A, RK45.b, RK45.e))
    bf.REPEATS, bf.REPEAT_TIME, bf.MAX_REPEATS = REPEATS, 0.0, REPEATS
    print(f"small problem: n = {n} parameters, t_end = {t_end:.6g}; the time of each run is "
          f"the best of {REPEATS}")

    def bare(loops):
        def run(rtol):
            y, nfev = bare_rk45(loops, y0, t_end, rtol, rtol * bf.ATOL_RATIO, A, b, e, *bufs,
                                *kargs)
            return _rhs.end_to_end_flat(y, shapes), nfev
        return run

    plain = bf.plain_gradient(shapes, problem.Sxx, problem.Syx)

    def scipy_rk45(rtol):
        sol = solve_ivp(plain, (0.0, t_end), y0, method="RK45", rtol=rtol,
                        atol=rtol * bf.ATOL_RATIO)
        return _rhs.end_to_end_flat(sol.y[:, -1], shapes), sol.nfev

    def flow(rtol):
        tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * bf.ATOL_RATIO,
                              backend="numba", method="RK45")
        return tr.end_to_end[-1], tr.nfev

    bare(True)(1e-2)  # compile (or load the cache) outside the timing
    bare(False)(1e-2)
    flow(1e-2)
    y = np.empty(n)
    hargs = kargs[:10] + (kargs[-1],)
    for label, f in (("rhs_flat", lambda: _kernels.rhs_flat(y0, y, *args)),
                     ("loops", lambda: hand_rhs(y0, y, *hargs))):
        print(f"  one gradient ({label}, called from Python): {bf.time_call(f) * 1e6:.2f} us")
    rows_out = []
    for label, run in (("scipy RK45 (baseline)", scipy_rk45),
                       ("bare RK45, rhs_flat", bare(False)), ("bare RK45, loops", bare(True)),
                       ("gradient_flow RK45, numba", flow)):
        with np.errstate(all="ignore"):  # a loose run may blow up: it then misses the target
            (rtol, dt, nfev, err, _), ok = bf.scan(run, Wref, bf.RTOLS)
        rows_out.append((label, rtol, dt, nfev, err, ok))
    base = rows_out[0][2]
    print(f"  {'run':28s} {'rtol':>7s} {'time (ms)':>10s} {'vs RK45':>8s} {'nfev':>6s} "
          f"{'us/eval':>8s} {'error':>9s}")
    for label, rtol, dt, nfev, err, ok in rows_out:
        print(f"  {label:28s} {rtol:7.0e} {dt * 1e3:10.3f} {base / dt:7.2f}x {nfev:6d} "
              f"{dt / nfev * 1e6:8.2f} {err:9.2e}" + ("" if ok else "  (target missed)"))
    # the bare cost per evaluation at the fewest evaluations any run needed
    fewest = min(r[3] for r in rows_out if r[5])
    per = rows_out[2][2] / rows_out[2][3]
    print(f"  floor: {fewest} evaluations (the fewest above) x {per * 1e6:.2f} us (bare, loops) = "
          f"{fewest * per * 1e3:.3f} ms, {base / (fewest * per):.1f}x faster than scipy's RK45; "
          f"20x leaves {base / 20 * 1e3:.3f} ms, {base / 20 / fewest * 1e6:.2f} us per evaluation")


if __name__ == "__main__":
    main()
