"""Compiled embedded Runge-Kutta loop, for any model (numba; nothing here knows networks).

The step-size control of the compiled explicit loops (the stiffness test, the stability
cap and the kink bookkeeping on the loop state of ``_loop_state``; the scalar rules are
``methods.base``'s), the stage states of the continuous extension, and
:func:`make_erk_advance`, which builds the adaptive loop around a model's numba functions.
The dispatcher it returns is not cached by itself: a model calls it from a module-level
``@njit(cache=True, nogil=True)`` entry point of its own module, which numba caches with the
loop and the model's functions compiled in (``models/_linear_kernels.erk_advance``,
``models/_mlp_kernels.erk_advance_smooth``); a dispatcher passed as an *argument* to a
cached kernel is recompiled in every process.  ``methods.compiled.erk`` drives an entry
point from Python.  The scalar helpers are ``inline="always"``, compiled into each loop.
"""
from __future__ import annotations

import numpy as np

from ..._numba_cache import njit
from . import _loop_state as S
from ._loop_state import PENDING, STIFF, STOPPED
from . import base
from .base import (CALM_STEPS, CLIP_EPS, KINK_EARLY_STEPS, KINK_GROWTH, KINK_REJECTIONS,
                   MAX_FACTOR, MIN_FACTOR, MIN_STEP_ULPS, STIFFNESS_MEMORY, STOP_ITERATIONS,
                   STOP_XTOL, error_norm, illinois_bracket, illinois_theta, stability_cap,
                   step_factor, stiffness_estimate)

__all__ = ["accept_into", "sumsq", "count_stiff", "count_cheaper", "PENDING", "STIFF",
           "step_guard", "settle", "hold_step", "stage_state", "stage_states",
           "make_erk_advance", "STOPPED", "error_norm", "kink_rejection", "kink_accepted",
           "dense_stiffness_sums"]


#: ``base``'s rules on the loop state, compiled into each loop
accept_into, count_stiff, count_cheaper, kink_rejection, kink_accepted = (
    njit(inline="always")(f) for f in (base.accept_into, base.count_stiff, base.count_cheaper,
                                       base.kink_rejection, base.kink_accepted))


@njit(cache=True)
def sumsq(X):
    """``sum X^2``, left to right."""
    acc = 0.0
    for v in X.ravel():
        acc += v * v
    return acc


@njit(cache=True, inline="always")
def step_guard(h, min_step, stats, max_steps, nonfinite):
    """-3: the step budget spent; -1: ``h < min_step`` (after non-finite trials or not); 0."""
    if stats[S.ACCEPTED] + stats[S.REJECTED] >= max_steps:
        return -3
    if h < min_step:
        stats[S.NONFINITE_TRIALS] = 1 if nonfinite else 0
        return -1
    return 0


@njit(cache=True)
def settle(y, cur, in_y):
    """Copy the current state ``cur`` into the caller's ``y`` unless it is already there."""
    if not in_y:
        y[:] = cur


@njit(cache=True, inline="always")
def hold_step(th, t, h, h_try, t_new, y, y_new, swapped):
    """:data:`PENDING`: the accepted step ``t -> t_new`` recorded in ``th``, its start in ``y``
    and its end in ``y_new`` (exchanged first if the loop ``swapped`` their roles)."""
    th[S.T], th[S.H], th[S.H_STEP], th[S.T_NEW] = t, h, h_try, t_new
    if swapped:
        for m in range(y.shape[0]):
            y[m], y_new[m] = y_new[m], y[m]
    return PENDING


@njit(cache=True)
def stage_state(y, K, w, h, out):
    """``out = (sum_j w_j K_j) h + y`` over the nonzero ``w_j``, as ``methods.erk.ExplicitRK``."""
    n = y.shape[0]
    for m in range(n):
        out[m] = 0.0
    for j in range(w.shape[0]):
        a = w[j]
        if a != 0.0:
            for m in range(n):
                out[m] += a * K[j, m]
    for m in range(n):
        out[m] = out[m] * h + y[m]


@njit(cache=True)
def stage_states(y, K, W, h, out):
    """:func:`stage_state` for each row of ``W`` (m, s + 1) into the first m rows of ``out``."""
    for i in range(W.shape[0]):
        stage_state(y, K, W[i], h, out[i])


@njit(cache=True, inline="always")
def dense_stiffness_sums(K, y_new, wd, s):
    """``(num, dd, ref, yy)`` of :func:`stiffness_estimate` from a step's stage rows ``K``."""
    num = dd = ref = yy = 0.0
    for m in range(y_new.shape[0]):
        yy += y_new[m] * y_new[m]
        ref += K[0, m] * K[0, m]
        dv = K[s, m] - K[s - 1, m]
        num += dv * dv
        acc = 0.0
        for j in range(s):
            if wd[j] != 0.0:
                acc += wd[j] * K[j, m]
        dd += acc * acc
    return num, dd, ref, yy


def make_erk_advance(rhs, switches=None, stop=None, store=None):
    """Build the adaptive embedded Runge-Kutta loop around a model's compiled operations.

    Parameters
    ----------
    rhs : numba dispatcher
        ``rhs(y, out, data)``: writes ``dy/dt`` at ``y`` (n,) into ``out`` (n,).
    switches : (crossings, keep_pattern), optional
        A piecewise-smooth model's switching functions (ReLU kinks): ``crossings(data, pat,
        first_only) -> int`` counts the switches whose sign at the latest ``rhs`` call
        differs from the pattern ``pat`` (a bool array; with ``first_only`` any nonzero
        count will do), ``keep_pattern(data, pat)`` stores the latest sign pattern in
        ``pat``.  With them the loop switches to the low-order pair at kinks
        (``methods.base.integrate``'s rule, docs/simulator.md, "The adaptive loop").
        Without them (a smooth model) the loop has no kink code.
    stop : numba dispatcher, optional
        ``stop(y, data) -> g``, called right after ``rhs(y, ., data)`` (so the model may
        read what that evaluation left in ``data``): the run stops where ``g`` first
        becomes ``<= 0``, located inside the step by Illinois regula falsi on the
        method's own step (``integrate``'s ``stop``).  The model may switch it off at run
        time by returning a positive constant.
    store : (attempt, stiffness_sums, fsal), optional
        A stage store (the linear network's rank-C factored stages): ``attempt(y, y_new,
        h, pair, atol, data) -> err`` forms the stages of a step of
        ``h`` from ``y`` (slot 0 holding ``f(y)``), the end state ``y_new`` and the error
        norm; ``stiffness_sums(s, wd, data) -> (num, dd, ref)`` those of the accepted step
        (:func:`stiffness_estimate`); ``fsal(s, data)`` makes slot ``s`` slot 0.  The loop
        then never touches ``K`` and swaps the state and trial arrays instead of copying.
        Not with ``switches`` or ``stop``.

    Returns
    -------
    numba dispatcher
        ``erk_advance(y, K, y_new, th, stats, pairs, control, pat, ybuf, data) -> int``
        (``@njit(nogil=True)``, not cached: call it from a module-level cached entry point,
        see the module docstring).
    """
    kinks = switches is not None
    stops = stop is not None
    stored = store is not None
    if stored and (kinks or stops):
        raise ValueError("store: a stage store's loop takes no switches and no stop")
    # numba prunes the branches of the features a loop lacks (``if kinks:``) before typing
    # them: the None below are never called
    crossings, keep_pattern = switches if kinks else (None, None)
    store_attempt, store_stiffness, store_fsal = store if stored else (None, None, None)

    @njit(nogil=True, inline="always")
    def _dense_attempt(y, K, y_new, h_try, pair, atol, pat, data):
        """One attempted step of ``h_try`` from ``y``: ``(err, stage_crossed)``."""
        A, b, e, e3, use_e3, _, rtol = pair
        s = b.shape[0]
        n = y.shape[0]
        crossed = False
        for i in range(1, s + 1):
            stage_state(y, K, (b if i == s else A[i])[:i], h_try, y_new)
            rhs(y_new, K[i], data)
            if kinks and not crossed:
                crossed = crossings(data, pat, True) > 0
        # error norm (RMS, or Hairer's DOP853 combination of err5 and err3)
        e5 = e3n = 0.0
        for m in range(n):
            sc = atol + rtol * max(abs(y[m]), abs(y_new[m]))
            acc = acc3 = 0.0
            for j in range(s + 1):  # zero weights skipped, as in the numpy stepper
                if e[j] != 0.0:
                    acc += e[j] * K[j, m]
                if use_e3 and e3[j] != 0.0:
                    acc3 += e3[j] * K[j, m]
            acc /= sc
            e5 += acc * acc
            if use_e3:
                acc3 /= sc
                e3n += acc3 * acc3
        return error_norm(e5, e3n, use_e3, h_try, n), crossed

    if stored:
        @njit(nogil=True, inline="always")
        def _attempt(y, K, y_new, h_try, pair, atol, pat, data):
            return store_attempt(y, y_new, h_try, pair, atol, data), False
    else:
        _attempt = _dense_attempt

    @njit(nogil=True, inline="always")
    def _locate(y, K, y_new, ybuf, h_try, g0, pair, atol, pat, data, stats):
        """``methods.base._locate_stop``: the located state into ``ybuf``; returns ``theta``."""
        lo, hi, glo, ghi, side = 0.0, 1.0, g0, -1.0, 0
        ybuf[:] = y_new
        for _ in range(STOP_ITERATIONS):
            if hi - lo <= STOP_XTOL:
                break
            th = illinois_theta(lo, hi, glo, ghi)
            _attempt(y, K, y_new, th * h_try, pair, atol, pat, data)
            stats[S.NFEV] += pair[S.P_B].shape[0]
            g = stop(y_new, data)
            if g <= 0.0:
                ybuf[:] = y_new
            lo, hi, glo, ghi, side = illinois_bracket(lo, hi, glo, ghi, side, th, g)
        return hi

    @njit(nogil=True)
    def erk_advance(y, K, y_new, th, stats, pairs, control, pat, ybuf, data):
        """Advance ``y`` (n,) from ``th[S.T]`` to exactly ``th[S.T_TARGET]`` with adaptive
        steps, at most ``stats[S.BUDGET]`` attempted steps counted in ``stats``.

        ``K`` (at least s + 1 rows of the larger pair, n) holds stage derivatives,
        ``K[0] = f(y)`` on entry and exit; ``pairs = (tab, low, late)`` the primary and the
        low-order pair (only at kinks: ``low`` for its first ``KINK_EARLY_STEPS`` accepted
        steps, ``late`` after them; slots ``S.P_*``); ``control = (ctl, wd,
        stiff)``: the settings named in ``_loop_state`` (``ctl[S.PREDICTIVE]`` 1: the
        predictive controller of :func:`accept_step` and a step shortened onto an output
        time keeping the planned one, as the linear network's loops; 0: the plain
        controller, as ``integrate`` without ``predictive``), the primary's stiffness
        weights and the stability-cap constants (``stiff[S.BOUNDARY] = 0``: no cap).
        ``th`` (float64) and ``stats`` (int64) are the loop state, updated in place, their
        slots named in ``_loop_state``; ``pat`` the switch pattern at the last crossing
        (kinks), ``ybuf`` (n,) scratch for a stop.

        Returns 0 on success, -1 step-size underflow, -3 step budget exhausted (codes of
        ``FlowStatus``); on failure ``y`` and ``th`` hold the last accepted state.  An
        accepted step that ends at or after ``th[S.T_OUT]`` (dense output; infinite
        otherwise) returns :data:`PENDING` before its bookkeeping: ``y`` and ``K`` are still
        the step's, ``y_new`` its end at ``th[S.T_NEW]``, ``th[S.H_STEP]`` its length; the
        caller completes it.  With the stiffness test on a step after which it fires
        returns :data:`STIFF` unless it ended on the target (then 0: the caller reads
        ``th[S.N_STIFF]``).  :data:`STOPPED`: the stop event fired; ``y`` holds the located
        state, ``th[S.T] = th[S.T_STOP]`` its time.
        """
        n = y.shape[0]
        tab, low, late = pairs
        ctl, wd, stiff = control
        atol, predictive = ctl[S.ATOL], ctl[S.PREDICTIVE] != 0.0
        capping = stiff[S.BOUNDARY] > 0.0
        t_target, t_out, max_steps = th[S.T_TARGET], th[S.T_OUT], stats[S.BUDGET]
        t, h, nonfinite = th[S.T], th[S.H], False
        cur, nxt, in_y = y, y_new, True     # a store's loop swaps the state and the trial
        while True:
            min_step = MIN_STEP_ULPS * (np.nextafter(t, np.inf) - t)
            if h < min_step:
                h = min_step
            rejected = False
            while True:
                code = step_guard(h, min_step, stats, max_steps, nonfinite)
                if code != 0:
                    th[S.T], th[S.H] = t, h
                    settle(y, cur, in_y)
                    return code
                on_low = kinks and th[S.ACTIVE] != 0.0
                # the fallback at kink_rtol for its first KINK_EARLY_STEPS steps, then late
                pair = (tab if not on_low else low if stats[S.FALLBACK_STEPS] < KINK_EARLY_STEPS
                        else late)
                s = pair[S.P_B].shape[0]
                clipped = h >= t_target - t or t + h >= t_target - CLIP_EPS * abs(t_target)
                h_try = t_target - t if clipped else h
                err, stage_crossed = _attempt(cur, K, nxt, h_try, pair, atol, pat, data)
                stats[S.NFEV] += s
                nonfinite = not np.isfinite(err)
                if nonfinite:
                    stats[S.REJECTED] += 1
                    rejected = True
                    h = h_try * MIN_FACTOR
                    continue
                crossed = crossings(data, pat, False) if kinks else 0
                if err < 1.0:
                    break
                stats[S.REJECTED] += 1
                exponent = pair[S.P_EXPONENT]
                if kinks and (crossed > 0 or stage_crossed):
                    on_low = kink_rejection(th, on_low, KINK_REJECTIONS)
                    if on_low:
                        exponent = -1.0     # kink_factor: the error is first order in h
                h = h_try * step_factor(err, exponent, True)
                rejected = True
            t_new = t_target if clipped else t + h_try
            if stops:
                g_new = stop(y_new, data)
                if g_new <= 0.0:
                    theta = _locate(y, K, y_new, ybuf, h_try, th[S.G], pair, atol, pat, data,
                                    stats)
                    stats[S.ACCEPTED] += 1
                    y[:] = ybuf
                    th[S.T] = th[S.T_STOP] = t + theta * h_try
                    th[S.H] = h
                    return STOPPED
                th[S.G] = g_new
            stats[S.ACCEPTED] += 1
            took_main = not on_low
            if kinks:
                if crossed > 0:
                    keep_pattern(data, pat)
                on_low = kink_accepted(th, stats, on_low, crossed, stage_crossed, t_new,
                                       CALM_STEPS)
            if on_low:
                # kink_factor (exponent -1) after a crossing; growth held to KINK_GROWTH
                fac = step_factor(err, -1.0 if crossed > 0 else pair[S.P_EXPONENT], rejected)
                h = h_try * min(fac, KINK_GROWTH)
            elif predictive:
                h = accept_into(th, h, h_try, err, tab[S.P_EXPONENT], MAX_FACTOR, rejected, clipped)
            else:
                h = h_try * step_factor(err, tab[S.P_EXPONENT], rejected, MAX_FACTOR)
            stiff_now = False
            if capping and took_main:
                if stored:
                    num, dd, ref = store_stiffness(s, wd, data)
                    yy = sumsq(nxt)
                else:
                    num, dd, ref, yy = dense_stiffness_sums(K, y_new, wd, s)
                # the remembered estimate, updated from the step's sums, caps the step
                rho = max(stiffness_estimate(num, dd, ref, stiff[S.WSUM], h_try, yy),
                          STIFFNESS_MEMORY * th[S.RHO])
                th[S.RHO] = rho
                h_free = h
                h = stability_cap(h, rho, stiff[S.BOUNDARY], stiff[S.CAP_SAFETY])
                stiff_now = count_stiff(h, h_free, th, stats, stiff[S.STIFF_STEPS],
                                        stiff[S.STIFF_HELD])
            if t_new >= t_out:
                return hold_step(th, t, h, h_try, t_new, y, y_new, not in_y)
            if stored:
                cur, nxt = nxt, cur
                in_y = not in_y
                store_fsal(s, data)
            else:
                for m in range(n):
                    y[m] = y_new[m]
                    K[0, m] = K[s, m]
            if clipped or stiff_now:
                th[S.T], th[S.H] = t_target if clipped else t + h_try, h
                settle(y, cur, in_y)
                return 0 if clipped else STIFF
            t = t + h_try

    return erk_advance
