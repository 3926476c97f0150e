"""Which continuous extension to trust between steps: RK45's against DOP853's.

``gradient_flow(..., dense=True)`` evaluates output times inside a step with the
method's continuous extension.  On a gradient flow escaping a saddle, the steps of
the escape span its own time scale, far from the asymptotic regime in which an
extension's order says anything.  This script integrates such a flow (a 6-8-8-2
network from sigma = 1e-2, two teacher modes; the second escape happens near t = 150)
to t = 300 with 200 log-spaced outputs and prints, in units of rtol, the largest
error of the outputs against a tight reference (DOP853, rtol 1e-12, stepping onto
every output):

* ``gradient_flow`` RK45 and SSPRK104, stepping onto the outputs and interpolating
  (dense=True: Shampine's quartic, and the cubic Hermite interpolant);
* scipy's ``solve_ivp`` RK45 and DOP853 with ``dense_output=True`` (the same
  extensions: Dormand-Prince's order-4 one, and dop853.f's order-7 one with three
  extra stages), evaluated at the outputs.

DOP853's extension misses by thousands of rtol inside the escape while the step end
points meet the tolerance, which is why ``dense=True`` is not offered for DOP853.

Usage::

    python benchmarks/studies/study_dense_output.py
"""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

import linearnets as ln
from linearnets.data import teacher_task
from linearnets.sim.models import linear as _rhs

RTOLS = (1e-5, 1e-8)


def main():
    X, Y = teacher_task(100, 6, (1.0, 0.6), seed=0)
    ws = ln.init_network((6, 8, 8, 2), 1e-2, seed=1)
    shapes = tuple(w.shape for w in ws)
    problem = _rhs.make_problem(shapes, X, Y)
    t = np.concatenate(([0.0], np.geomspace(1e-2, 300.0, 200)))
    ref = ln.gradient_flow(ws, X, Y, t, rtol=1e-12, atol=1e-16, backend="numpy").end_to_end
    scale = np.abs(ref).max()

    def error(W):
        e = np.abs(W - ref).reshape(t.size, -1).max(axis=1) / scale
        return e.max(), t[e.argmax()]

    def f(_, y):
        return _rhs.rhs(y, problem, np.empty_like(y))

    print(f"{'integrator':34s} {'rtol':>6s} {'steps':>6s} {'max error / rtol':>17s} {'at t':>7s}")
    for rtol in RTOLS:
        atol = rtol * 1e-3
        for method in ("RK45", "SSPRK104"):
            for dense in (False, True):
                tr = ln.gradient_flow(ws, X, Y, t, rtol=rtol, atol=atol, method=method,
                                      backend="numpy", dense=dense)
                e, at = error(tr.end_to_end)
                label = f"gradient_flow {method} dense={dense}"
                print(f"{label:34s} {rtol:6.0e} {tr.nsteps:6d} {e / rtol:17.2f} {at:7.1f}")
        for method in ("RK45", "DOP853"):
            sol = solve_ivp(f, (0.0, t[-1]), _rhs.pack(ws), method=method, rtol=rtol, atol=atol,
                            dense_output=True)
            W = np.array([_rhs.end_to_end_flat(sol.sol(tk), shapes) for tk in t])
            e, at = error(W)
            label = f"scipy {method} dense_output"
            print(f"{label:34s} {rtol:6.0e} {sol.t.size - 1:6d} {e / rtol:17.2f} {at:7.1f}")


if __name__ == "__main__":
    main()
