"""Would a Runge-Kutta-Chebyshev method help the medium problem of ``bench_flow.py``?

RKC (Sommeijer, Shampine & Verwer, J. Comput. Appl. Math. 88 (1997) 315-326) is the
classical explicit method for moderately stiff problems with a real spectrum: order
2, ``s`` stages chosen per step, a stability interval ``beta(s) ~ 0.65 s^2`` (damping
``eps = 2/13``), so its interval per evaluation grows like ``0.65 s`` -- against 1.39
for SSPRK104.  Gradient flow qualifies: its Jacobian ``-diag(eta) H`` (H the Hessian of
the loss) is similar to a symmetric matrix, so its eigenvalues are real.

This script runs a straightforward RKC on the medium network (compiled right-hand
side, the spectral radius from Lanczos, ``scipy.sparse.linalg.eigsh``, on the exact
Jacobian-vector products of ``models.linear.RosenbrockOps``, times 1.2, refreshed every
``REFRESH`` accepted steps and after every rejection) at several tolerances, and
prints evaluations, the mean stage count, the error of W(t_end) and the time beside
what ``gradient_flow(method="SSPRK104")`` needs in the same run.

What it shows: RKC's steps are set by its accuracy, not by stability -- the mean
stage count stays near 2-3 -- and an order-2 method needs more evaluations than
SSPRK104 to reach ``bench_flow.py``'s 1e-4 (on this machine 4,207 at rtol 1e-5
against 2,212).  The medium problem's stiffness ratio ``h rho`` at steps of the size a
fourth-order method takes is moderate; only a stabilised method of order 4 (ROCK4)
could trade stages for stability there.

The stepper checks its own coefficients first: the stage recurrence applied to
``y' = z y`` must give a polynomial with Taylor coefficients 1, 1, 1/2 (order 2)
bounded by 1 on ``[-beta(s), 0]``.

Usage::

    python benchmarks/studies/study_rkc.py [--rtols 1e-3 1e-4 1e-5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from numpy.polynomial import Polynomial

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow

import bench_flow as bf  # noqa: E402
import linearnets as ln  # noqa: E402
from linearnets.sim.models import linear as _rhs  # noqa: E402
from linearnets.sim.models.linear import RosenbrockOps  # noqa: E402

#: Damping of the Chebyshev polynomial (SSV97).
DAMPING = 2.0 / 13.0
#: Accepted steps between two spectral-radius estimates, and the estimate's safety factor.
REFRESH, RHO_SAFETY = 25, 1.2
#: Step-size controller (SSV97): safety, and the bounds of the factor.
SAFETY, MIN_FACTOR, MAX_FACTOR = 0.8, 0.1, 10.0


def coefficients(s):
    """``(mu, nu, mu_t, gamma_t)`` (each (s + 1,)) of the s-stage RKC recurrence (SSV97)::

        Y_1 = y + mu_t[1] h F(y),
        Y_j = (1 - mu_j - nu_j) y + mu_j Y_{j-1} + nu_j Y_{j-2} + mu_t[j] h F(Y_{j-1})
              + gamma_t[j] h F(y),                                   j = 2 .. s,

    with ``y_new = Y_s``; also returns ``beta``, the real stability interval.
    """
    w0 = 1.0 + DAMPING / s ** 2
    T, dT, ddT = np.zeros(s + 1), np.zeros(s + 1), np.zeros(s + 1)
    T[0], T[1], dT[1] = 1.0, w0, 1.0
    for j in range(2, s + 1):
        T[j] = 2 * w0 * T[j - 1] - T[j - 2]
        dT[j] = 2 * T[j - 1] + 2 * w0 * dT[j - 1] - dT[j - 2]
        ddT[j] = 4 * dT[j - 1] + 2 * w0 * ddT[j - 1] - ddT[j - 2]
    w1 = dT[s] / ddT[s]
    b = np.zeros(s + 1)
    b[2:] = ddT[2:] / dT[2:] ** 2
    b[0] = b[1] = b[2]
    a = 1.0 - b * T
    mu, nu, mu_t, gamma_t = (np.zeros(s + 1) for _ in range(4))
    mu_t[1] = b[1] * w1
    for j in range(2, s + 1):
        mu[j] = 2 * w0 * b[j] / b[j - 1]
        nu[j] = -b[j] / b[j - 2]
        mu_t[j] = 2 * w1 * b[j] / b[j - 1]
        gamma_t[j] = -a[j - 1] * mu_t[j]
    beta = (1.0 + w0) / w1
    return mu, nu, mu_t, gamma_t, beta


def stability_function(s, z):
    """The s-stage recurrence applied to ``y' = z y`` (y = 1, h = 1): ``Y_s`` for ``z`` a
    ``numpy.polynomial.Polynomial`` (the stability polynomial) or an array of points."""
    mu, nu, mu_t, gamma_t, _ = coefficients(s)
    prev, cur = z ** 0, 1.0 + mu_t[1] * z
    for j in range(2, s + 1):
        prev, cur = cur, ((1 - mu[j] - nu[j]) + mu[j] * cur + nu[j] * prev
                          + mu_t[j] * z * cur + gamma_t[j] * z)
    return cur


def check_coefficients(stages=(2, 3, 5, 10, 40)):
    """The recurrence on ``y' = z y`` is a polynomial with Taylor coefficients 1, 1, 1/2,
    bounded by 1 in modulus on ``[-beta, 0]``; raises AssertionError otherwise."""
    for s in stages:
        beta = coefficients(s)[-1]
        c = stability_function(s, Polynomial([0.0, 1.0])).coef
        assert np.allclose(c[:3], [1.0, 1.0, 0.5], rtol=1e-9, atol=0.0), (s, c[:3])
        # the bound at points, through the recurrence (the monomial form loses digits)
        R = stability_function(s, np.linspace(-beta, 0.0, 4001))
        assert np.max(np.abs(R)) <= 1.0 + 1e-9, s
        assert beta >= 0.6 * s ** 2 or s < 5, (s, beta)


def rkc(problem, y0, t_end, rtol, atol):
    """RKC from 0 to ``t_end``: ``(y, nfev, njev, steps, rejected, mean stages)``."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    flow = RosenbrockOps(problem)
    n = y0.size
    scratch = np.empty(n)
    vec = None

    def spectral_radius(y):
        nonlocal vec
        flow.rhs(y, scratch, keep=True)
        op = LinearOperator((n, n), dtype=np.float64,
                            matvec=lambda v: flow.jvp(np.ascontiguousarray(v.ravel()),
                                                      np.empty(n)))
        vals, vecs = eigsh(op, k=1, which="LM", tol=1e-2, v0=vec, ncv=12)
        vec = vecs[:, 0]
        return RHO_SAFETY * abs(vals[0])

    y = y0.copy()
    F0 = flow.rhs(y, np.empty(n))
    rho = spectral_radius(y)
    t, h = 0.0, min(1.0 / rho, 1e-2 * t_end)
    err_prev = h_prev = None
    steps = rejected = since = stages = 0
    Yp, Yc, Fj, F1 = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    while t < t_end:
        h = min(h, t_end - t)
        s = max(2, 1 + int(np.sqrt(1.0 + 1.54 * h * rho)))
        mu, nu, mu_t, gamma_t, _ = coefficients(s)
        Yp[:] = y
        np.add(y, mu_t[1] * h * F0, out=Yc)
        for j in range(2, s + 1):
            flow.rhs(Yc, Fj)
            Yn = ((1 - mu[j] - nu[j]) * y + mu[j] * Yc + nu[j] * Yp + (mu_t[j] * h) * Fj
                  + (gamma_t[j] * h) * F0)
            Yp[:], Yc[:] = Yc, Yn
        flow.rhs(Yc, F1)
        stages += s
        # SSV97's error estimate: (12 (y_n - y_{n+1}) + 6 h (F_n + F_{n+1})) / 15
        est = (12.0 * (y - Yc) + 6.0 * h * (F0 + F1)) / 15.0
        scale = atol + rtol * np.maximum(np.abs(y), np.abs(Yc))
        err = float(np.sqrt(np.mean((est / scale) ** 2)))
        if err <= 1.0:
            t += h
            y[:] = Yc
            F0[:] = F1
            steps += 1
            since += 1
            fac = MAX_FACTOR if err == 0.0 else SAFETY / err ** (1 / 3)
            if err_prev is not None and err > 0.0:
                # SSV97's predictive controller, never above the plain one
                fac = min(fac, SAFETY * err_prev ** (1 / 3) / err ** (2 / 3) * h / h_prev)
            h_prev, err_prev = h, err
            h *= min(MAX_FACTOR, max(MIN_FACTOR, fac))
            if since >= REFRESH:
                rho, since = spectral_radius(y), 0
        else:
            rejected += 1
            h *= max(MIN_FACTOR, SAFETY / err ** (1 / 3)) if np.isfinite(err) else MIN_FACTOR
            rho, since = spectral_radius(y), 0
    return y, flow.nfev, flow.njev, steps, rejected, stages / max(steps + rejected, 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtols", type=float, nargs="+", default=[1e-3, 1e-4, 1e-5])
    args = ap.parse_args(argv)
    check_coefficients()
    ws, X, Y, tmax = bf.make("medium")
    shapes = tuple(w.shape for w in ws)
    problem = _rhs.make_problem(shapes, X, Y)
    t0 = time.perf_counter()
    t_end, Wref, _ = bf.reference(ws, X, Y, tmax, "numba")
    print(f"medium problem, t_end = {t_end:.6g} (reference {time.perf_counter() - t0:.0f} s); "
          f"target {bf.TARGET:g} relative error of W(t_end)")
    print(f"  {'method':10s} {'rtol':>7s} {'nfev':>6s} {'jvp':>5s} {'steps':>6s} {'rej':>4s} "
          f"{'stages':>6s} {'error':>9s} {'time (s)':>9s}")
    ln.gradient_flow(ws, X, Y, [0.0, 1e-3], backend="numba", method="SSPRK104")
    base = None
    for rtol in (1e-2, 3e-3):
        t0 = time.perf_counter()
        tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * bf.ATOL_RATIO,
                              backend="numba", method="SSPRK104")
        dt = time.perf_counter() - t0
        err = bf.rel_err(tr.end_to_end[-1], Wref)
        if base is None and err <= bf.TARGET:
            base = (tr.nfev, dt)
        print(f"  {'SSPRK104':10s} {rtol:7.0e} {tr.nfev:6d} {'-':>5s} {tr.nsteps:6d} "
              f"{tr.nrejected:4d} {10:6d} {err:9.2e} {dt:9.2f}", flush=True)
    y0 = _rhs.pack(ws)
    for rtol in args.rtols:
        t0 = time.perf_counter()
        y, nfev, njev, steps, rej, mean_s = rkc(problem, y0, t_end, rtol, rtol * bf.ATOL_RATIO)
        dt = time.perf_counter() - t0
        err = bf.rel_err(_rhs.end_to_end_flat(y, shapes), Wref)
        ratio = (f"  {nfev / base[0]:.2f}x SSPRK104's evaluations" if base and err <= bf.TARGET
                 else "")
        print(f"  {'RKC':10s} {rtol:7.0e} {nfev:6d} {njev:5d} {steps:6d} {rej:4d} {mean_s:6.1f} "
              f"{err:9.2e} {dt:9.2f}{ratio}", flush=True)


if __name__ == "__main__":
    main()
