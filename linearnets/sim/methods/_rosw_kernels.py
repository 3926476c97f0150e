"""Compiled Rosenbrock-W loop, for any model with a Jacobian-vector product (numba).

The algorithm of ``methods.rosw.RosenbrockWStepper`` in ``methods.base.integrate``, agreeing
to the tolerance; a model calls it from a ``cache=True`` entry point of its own
(docs/simulator.md, "The compiled loops").
"""
from __future__ import annotations

import numpy as np

from ..._numba_cache import njit
from ._erk_kernels import accept_step
from .compiled import NONSTIFF

__all__ = ["make_rosw_advance", "NONSTIFF", "CTL_FIELDS"]

#: The entries of the ``ctl`` argument of ``rosw_advance``, in order.
CTL_FIELDS = ("exponent", "rtol", "atol", "safety", "min_factor", "max_factor", "min_err",
              "min_step_ulps", "krylov_tol", "max_krylov", "boundary", "explicit_stages",
              "switch_steps")


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
def _dot(a, b, w):
    """``sum w a b`` with ``w`` (n,), or ``a . b`` (``np.dot``) when ``w`` is empty."""
    if w.shape[0] == 0:
        return np.dot(a, b)
    acc = 0.0
    for m in range(a.shape[0]):
        acc += w[m] * a[m] * b[m]
    return acc


def make_rosw_advance(rhs, jvp):
    """``(rosw_advance, cg_solve)``, ``@njit(nogil=True)`` and uncached, around the model's
    numba functions ``rhs(y, out, data)`` and ``jvp(v, out, y, jdata)``."""

    @njit(nogil=True)
    def cg_solve(x, b, hg, scale, tol, maxiter, r, p, Jv, y, jv, w):
        """``RosenbrockWStepper._solve``: CG on ``(I - hg J) x = b`` into ``x`` in the metric
        ``w`` (empty: identity), ``J v = jvp(v, out, y, jv)``; ``(converged, its, rho)``."""
        n = x.shape[0]
        for m in range(n):
            x[m] = b[m]
        jvp(x, Jv, y, jv)
        xx = _dot(x, x, w)
        rho = -_dot(x, Jv, w) / xx if xx > 0.0 else 0.0
        for m in range(n):
            r[m] = Jv[m] * hg                   # r = b - (x - hg J x) = hg J x
        it = 1
        if _scaled_rms(r, scale) <= tol:
            return True, it, rho
        for m in range(n):
            p[m] = r[m]
        rr = _dot(r, r, w)
        pp = rr
        while it < maxiter:
            jvp(p, Jv, y, jv)
            it += 1
            for m in range(n):
                Jv[m] = p[m] - hg * Jv[m]       # A p, in place of J p
            pAp = _dot(p, Jv, w)
            if not pAp > 0.0:
                return False, it, rho
            rho = max(rho, (pAp - pp) / hg / pp)
            alpha = rr / pAp
            for m in range(n):
                x[m] += alpha * p[m]
                r[m] -= alpha * Jv[m]
            if _scaled_rms(r, scale) <= tol:
                return True, it, rho
            rr_new = _dot(r, r, w)
            beta = rr_new / rr
            for m in range(n):
                p[m] = p[m] * beta + r[m]
            rr = rr_new
            pp = _dot(p, p, w)
        return False, it, rho

    @njit(nogil=True)
    def rosw_advance(y, f0, U, work, th, stats, t_target, max_steps, a, c, mw, ew, gamma, ctl,
                     base, scratch, jv):
        """Advance ``y`` (n,) from ``th[0]`` to exactly ``t_target`` with Rosenbrock-W steps:
        ``f0 = f(y)`` as ``rhs(y, f0, base)`` on entry and exit (``jv`` shares what it left in
        ``base``), stages as ``rhs(Y_i, f_i, scratch)``; ``U`` (s, n) the stage solutions,
        ``work`` (7, n) scratch, or (8, n) with the metric last; ``a, c, mw, ew, gamma`` the
        U-form (``RosenbrockW.transformed``); ``ctl`` as :data:`CTL_FIELDS` (``boundary`` 0: no
        hand-back test); ``th = [t, h, rho, h_prev, err_prev, n_cheaper, cost0]`` and ``stats
        = [nfev, accepted, rejected, njev]`` in place.  Returns 0 at ``t_target``, -1 step
        underflow, -2 a non-finite f, -3 ``max_steps`` spent, :data:`NONSTIFF` at the hand-back."""
        s, n = mw.shape[0], y.shape[0]
        exponent, rtol, atol = ctl[0], ctl[1], ctl[2]
        safety, min_factor, max_factor, min_err, ulps = ctl[3], ctl[4], ctl[5], ctl[6], ctl[7]
        ktol, kmax = ctl[8], int(ctl[9])
        boundary, s_erk, switch_steps = ctl[10], ctl[11], ctl[12]
        Yi, fi, bi, r, p, Jv, scale = work[0], work[1], work[2], work[3], work[4], work[5], work[6]
        metric = work[7] if work.shape[0] > 7 else work[0, :0]
        t, h = th[0], th[1]
        rejected, rho = False, 0.0
        while True:
            if stats[1] + stats[2] >= max_steps:
                th[0], th[1] = t, h
                return -3
            if h < ulps * (np.nextafter(t, np.inf) - t):
                th[0], th[1] = t, h
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
                    rhs(Yi, fi, scratch)
                    stats[0] += 1
                for m in range(n):
                    acc = fi[m] * hg
                    for j in range(i):
                        if c[i, j] != 0.0:
                            acc += (gamma * c[i, j]) * U[j, m]
                    bi[m] = acc
                ok, its, rho_i = cg_solve(U[i], bi, hg, scale, ktol, kmax, r, p, Jv, y, jv,
                                          metric)
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
            rhs(y, f0, base)
            stats[0] += 1
            for m in range(n):
                if not np.isfinite(f0[m]):
                    th[0], th[1] = t, h
                    return -2
            if clipped:
                th[0], th[1] = t_target, h
                return 0
            t = t + h_try
            if switch_steps > 0.0 and th[5] >= switch_steps:
                th[0], th[1] = t, h
                return NONSTIFF

    return rosw_advance, cg_solve
