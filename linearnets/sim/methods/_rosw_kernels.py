"""Compiled Rosenbrock-W loop, for any model with a Jacobian-vector product (numba).

The algorithm of ``methods.rosw.RosenbrockWStepper`` in ``methods.base.integrate``, agreeing
to the tolerance; a model calls it from a ``cache=True`` entry point of its own
(docs/simulator.md, "The compiled loops").
"""
from __future__ import annotations

import numpy as np

from ..._numba_cache import njit
from . import _loop_state as S
from ._erk_kernels import accept_into, count_cheaper, step_guard
from .base import MIN_FACTOR, MIN_STEP_ULPS, step_factor
from ._loop_state import NONSTIFF
from .rosw import KRYLOV_TOL, MAX_KRYLOV, RosenbrockWStepper

_MAX_FACTOR = RosenbrockWStepper.MAX_FACTOR

__all__ = ["make_rosw_advance", "NONSTIFF"]


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
    """``rosw_advance``, ``@njit(nogil=True)`` and uncached, around the model's
    numba functions ``rhs(y, out, data)`` and ``jvp(v, out, y, jdata)``."""

    @njit(nogil=True)
    def cg_solve(x, b, hg, scale, r, p, Jv, y, jv, w):
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
        if _scaled_rms(r, scale) <= KRYLOV_TOL:
            return True, it, rho
        for m in range(n):
            p[m] = r[m]
        rr = _dot(r, r, w)
        pp = rr
        while it < MAX_KRYLOV:
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
            if _scaled_rms(r, scale) <= KRYLOV_TOL:
                return True, it, rho
            rr_new = _dot(r, r, w)
            beta = rr_new / rr
            for m in range(n):
                p[m] = p[m] * beta + r[m]
            rr = rr_new
            pp = _dot(p, p, w)
        return False, it, rho

    @njit(nogil=True)
    def rosw_advance(y, f0, U, work, th, stats, uform, ctl, data):
        """Advance ``y`` (n,) from ``th[S.T]`` to exactly ``th[S.T_TARGET]`` with Rosenbrock-W
        steps, at most ``stats[S.BUDGET]`` attempted steps: ``data = (base, scratch, jv)``,
        ``f0 = f(y)`` as ``rhs(y, f0, base)`` on entry and exit (``jv`` shares what it left in
        ``base``), stages as ``rhs(Y_i, f_i, scratch)``; ``U`` (s, n) the stage solutions,
        ``work`` (7, n) scratch, or (8, n) with the metric last; ``uform = (a, c, mw, ew,
        gamma)`` (``RosenbrockW.transformed``); ``ctl`` as named in ``_loop_state``
        (``R_BOUNDARY`` 0: no hand-back test); ``th`` and ``stats`` (slots named there) in
        place.  Returns 0 at the target, -1 step underflow, -2 a non-finite f, -3 the budget
        spent, :data:`NONSTIFF` at the hand-back."""
        a, c, mw, ew, gamma = uform
        base, scratch, jv = data
        t_target, max_steps = th[S.T_TARGET], stats[S.BUDGET]
        s, n = mw.shape[0], y.shape[0]
        exponent, rtol, atol = ctl[S.R_EXPONENT], ctl[S.R_RTOL], ctl[S.R_ATOL]
        boundary, s_erk = ctl[S.R_BOUNDARY], ctl[S.R_EXPLICIT_STAGES]
        switch_steps = ctl[S.R_SWITCH_STEPS]
        Yi, fi, bi, r = work[S.W_Y], work[S.W_F], work[S.W_B], work[S.W_R]
        p, Jv, scale = work[S.W_P], work[S.W_JV], work[S.W_SCALE]
        metric = work[S.W_METRIC] if work.shape[0] > S.W_METRIC else work[0, :0]
        t, h = th[S.T], th[S.H]
        rejected, rho = False, 0.0
        while True:
            code = step_guard(h, MIN_STEP_ULPS * (np.nextafter(t, np.inf) - t), stats, max_steps,
                              False)
            if code != 0:
                th[S.T], th[S.H] = t, h
                return code
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
                    stats[S.NFEV] += 1
                for m in range(n):
                    acc = fi[m] * hg
                    for j in range(i):
                        if c[i, j] != 0.0:
                            acc += (gamma * c[i, j]) * U[j, m]
                    bi[m] = acc
                ok, its, rho_i = cg_solve(U[i], bi, hg, scale, r, p, Jv, y, jv, metric)
                stats[S.NJEV] += its
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
                stats[S.REJECTED] += 1
                h = h_try * (MIN_FACTOR if not np.isfinite(err)
                             else step_factor(err, exponent, True))
                rejected = True
                continue
            if boundary > 0.0 and not clipped:
                # the work so far: a Jacobian-vector product costs two right-hand sides
                count_cheaper(th, stats[S.NFEV] + 2.0 * stats[S.NJEV], h_try, rho, boundary, s_erk)
            th[S.RHO] = rho
            rho = 0.0
            h = accept_into(th, h, h_try, err, exponent, _MAX_FACTOR, rejected, clipped)
            rejected = False
            stats[S.ACCEPTED] += 1
            for m in range(n):
                y[m] = Yi[m]
            rhs(y, f0, base)
            stats[S.NFEV] += 1
            for m in range(n):
                if not np.isfinite(f0[m]):
                    th[S.T], th[S.H] = t, h
                    return -2
            if clipped:
                th[S.T], th[S.H] = t_target, h
                return 0
            t = t + h_try
            if switch_steps > 0.0 and th[S.N_CHEAPER] >= switch_steps:
                th[S.T], th[S.H] = t, h
                return NONSTIFF

    return rosw_advance
