"""Numba kernels of the Rosenbrock-W stepper (``_stiff.py`` is the numpy reference).

* :func:`cg_solve` -- ``_stiff.cg_solve``: conjugate gradients on ``(I - hg J) x = b``
  with the compiled Jacobian-vector product ``_kernels.jvp_flat``;
* :func:`rosw_advance` -- ``_stiff.rosw_run`` advancing to one output time without
  returning to Python: stages, Krylov solves, error control and the test that hands
  back to an explicit pair.

The same operations in the same order as the numpy reference, elementwise sums as
loops and inner products through ``np.dot`` (BLAS ``ddot``): the two backends take
the same steps up to the rounding of those inner products.  The right-hand side at
the step's start is evaluated with the buffers ``base``, whose partial products
:func:`cg_solve` differentiates (``jv`` holds the same ``abuf``/``gbuf``); the stages
use ``scratch`` (``_stiff.CompiledFlow`` lays both out).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._kernels import accept_step, jvp_flat, rhs_flat

__all__ = ["cg_solve", "rosw_advance", "NONSTIFF", "CTL_FIELDS"]

#: Return code of :func:`rosw_advance` when, for the required number of accepted
#: steps in a row, the explicit pair would have advanced more cheaply (``_stiff.rosw_run``
#: with ``switch_back``).
NONSTIFF = 3

#: The entries of the ``ctl`` argument of :func:`rosw_advance`, in order.
CTL_FIELDS = ("exponent", "rtol", "atol", "safety", "min_factor", "max_factor", "min_err",
              "min_step_ulps", "krylov_tol", "max_krylov", "boundary", "explicit_stages",
              "switch_steps")


@njit(cache=True)
def _jvp(v, out, y, jv):
    jvp_flat(v, out, y, jv[0], jv[1], jv[2], jv[3], jv[4], jv[5], jv[6], jv[7], jv[8], jv[9],
             jv[10], jv[11], jv[12], jv[13], jv[14])


@njit(cache=True)
def _rhs(y, out, a):
    rhs_flat(y, out, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
             a[12])


@njit(cache=True)
def _scaled_rms(x, scale):
    """``sqrt(mean((x / scale)^2))`` (0 for an empty vector)."""
    n = x.shape[0]
    if n == 0:
        return 0.0
    acc = 0.0
    for m in range(n):
        v = x[m] / scale[m]
        acc += v * v
    return np.sqrt(acc / n)


@njit(cache=True)
def cg_solve(x, b, hg, scale, tol, maxiter, r, p, Jv, y, jv):
    """Solve ``(I - hg J) x = b`` into ``x`` (n,) by conjugate gradients from ``x = b``.

    ``J`` is the Jacobian at ``y`` (``jv``: the trailing arguments of
    ``_kernels.jvp_flat`` with the partial products of ``y``); ``r``, ``p``, ``Jv``
    are (n,) scratch.  The iteration stops when ``rms(r / scale) <= tol``.

    Returns ``(converged, iterations, rho)``: not converged after ``maxiter``
    Jacobian-vector products or on non-positive curvature; ``rho`` the largest
    Rayleigh quotient ``-p.Jp / p.p`` met (``_stiff.cg_solve``).
    """
    n = x.shape[0]
    for m in range(n):
        x[m] = b[m]
    _jvp(x, Jv, y, jv)
    xx = np.dot(x, x)
    rho = -np.dot(x, Jv) / xx if xx > 0.0 else 0.0
    for m in range(n):
        r[m] = Jv[m] * hg                   # r = b - (x - hg J x) = hg J x
    it = 1
    if _scaled_rms(r, scale) <= tol:
        return True, it, rho
    for m in range(n):
        p[m] = r[m]
    rr = np.dot(r, r)
    pp = rr
    while it < maxiter:
        _jvp(p, Jv, y, jv)
        it += 1
        for m in range(n):
            Jv[m] = p[m] - hg * Jv[m]       # A p, in place of J p
        pAp = np.dot(p, Jv)
        if not pAp > 0.0:
            return False, it, rho
        rho = max(rho, (pAp - pp) / hg / pp)
        alpha = rr / pAp
        for m in range(n):
            x[m] += alpha * p[m]
            r[m] -= alpha * Jv[m]
        if _scaled_rms(r, scale) <= tol:
            return True, it, rho
        rr_new = np.dot(r, r)
        beta = rr_new / rr
        for m in range(n):
            p[m] = p[m] * beta + r[m]
        rr = rr_new
        pp = np.dot(p, p)
    return False, it, rho


@njit(cache=True)
def rosw_advance(y, f0, U, work, th, stats, t_target, max_steps, a, c, mw, ew, gamma, ctl,
                 base, scratch, jv):
    """Advance ``y`` (n,) from ``th[0]`` to exactly ``t_target`` with Rosenbrock-W steps.

    ``f0 = f(y)``, evaluated with the buffers ``base`` (whose partial products ``jv``
    shares), on entry and exit; ``U`` (s, n) the stage solutions and ``work`` (7, n)
    scratch; ``a, c, mw, ew`` the transformed coefficients of
    ``_stiff.RosenbrockW.transformed`` and ``gamma`` its diagonal; ``ctl`` the
    settings named by :data:`CTL_FIELDS` (``boundary`` 0: no hand-back test).
    ``th = [t, h, rho, h_prev, err_prev, n_cheaper, cost0]`` (time, proposed step,
    the largest Rayleigh quotient of the last accepted step, the memory of
    ``_kernels.accept_step``, the steps in a row the explicit pair would have taken
    more cheaply and the cost counter at the last of them) and ``stats = [nfev,
    accepted, rejected, njev]`` are updated in place.

    Returns 0 on reaching ``t_target``, -1 step-size underflow, -2 a non-finite
    right-hand side (after the step that produced it: ``y`` holds its end, ``th[0]``
    its start), -3 step budget ``max_steps`` (accepted plus rejected) exhausted, or
    :data:`NONSTIFF` after an accepted step that did not end on ``t_target`` once
    ``n_cheaper`` reached ``switch_steps``.
    """
    s = mw.shape[0]
    n = y.shape[0]
    exponent, rtol, atol = ctl[0], ctl[1], ctl[2]
    safety, min_factor, max_factor, min_err, ulps = ctl[3], ctl[4], ctl[5], ctl[6], ctl[7]
    ktol, kmax = ctl[8], int(ctl[9])
    boundary, s_erk, switch_steps = ctl[10], ctl[11], ctl[12]
    Yi, fi, rhs, r, p, Jv, scale = work[0], work[1], work[2], work[3], work[4], work[5], work[6]
    t = th[0]
    h = th[1]
    rejected = False
    rho = 0.0
    while True:
        if stats[1] + stats[2] >= max_steps:
            th[0] = t
            th[1] = h
            return -3
        if h < ulps * (np.nextafter(t, np.inf) - t):
            th[0] = t
            th[1] = h
            return -1
        clipped = t + h >= t_target
        h_try = t_target - t if clipped else h
        hg = h_try * gamma
        for m in range(n):
            scale[m] = atol + rtol * abs(y[m])
        ok = True
        for i in range(s):
            if i == 0:
                for m in range(n):
                    fi[m] = f0[m]
            else:
                for m in range(n):
                    acc = y[m]
                    for j in range(i):
                        if a[i, j] != 0.0:
                            acc += a[i, j] * U[j, m]
                    Yi[m] = acc
                _rhs(Yi, fi, scratch)
                stats[0] += 1
            for m in range(n):
                acc = fi[m] * hg
                for j in range(i):
                    if c[i, j] != 0.0:
                        acc += (gamma * c[i, j]) * U[j, m]
                rhs[m] = acc
            ok, its, rho_i = cg_solve(U[i], rhs, hg, scale, ktol, kmax, r, p, Jv, y, jv)
            stats[3] += its
            rho = max(rho, rho_i)
            if not ok:
                break
        err = np.inf
        if ok:
            # the new state (into Yi) and the scaled error, in one pass
            e2 = 0.0
            for m in range(n):
                yn = y[m]
                ev = 0.0
                for i in range(s):
                    yn += mw[i] * U[i, m]
                    ev += ew[i] * U[i, m]
                Yi[m] = yn
                v = ev / (atol + rtol * max(abs(y[m]), abs(yn)))
                e2 += v * v
            err = np.sqrt(e2 / n) if n else 0.0
        if not err < 1.0:
            stats[2] += 1
            h = h_try * (min_factor if not np.isfinite(err)
                         else max(min_factor, safety * err ** exponent))
            rejected = True
            continue
        if boundary > 0.0 and not clipped:
            # the explicit pair's step would be min(h, boundary / rho), at s_erk
            # right-hand sides each; this method paid (rhs + 2 jvp) since the last step
            cost = stats[0] + 2.0 * stats[3]
            h_erk = h_try if rho <= 0.0 else min(h_try, boundary / rho)
            cheaper = s_erk / h_erk < (cost - th[6]) / h_try
            th[5] = th[5] + 1.0 if cheaper else 0.0
            th[6] = cost
        th[2] = rho
        rho = 0.0
        h = accept_step(h, h_try, err, exponent, max_factor, safety, min_factor, rejected,
                        clipped, th, min_err)
        rejected = False
        stats[1] += 1
        for m in range(n):
            y[m] = Yi[m]
        _rhs(y, f0, base)
        stats[0] += 1
        for m in range(n):
            if not np.isfinite(f0[m]):
                th[0] = t
                th[1] = h
                return -2
        if clipped:
            th[0] = t_target
            th[1] = h
            return 0
        t = t + h_try
        if switch_steps > 0.0 and th[5] >= switch_steps:
            th[0] = t
            th[1] = h
            return NONSTIFF
