"""Compiled embedded Runge-Kutta loop, for any model (numba; nothing here knows networks).

The step-size control of the compiled explicit loops, written once: the error norm, the
controller with Gustafsson's predictive step, the stiffness estimate and the stability
cap, the stiffness test and the checks before a step (``methods.base`` is the numpy
reference); the stage states of the continuous extension; and :func:`make_erk_advance`,
which builds the adaptive loop around a model's operations.

``make_erk_advance(rhs, switches=None, stop=None, store=None)`` takes the model's numba
functions: always ``rhs(y, out, data)`` (``dy/dt`` at ``y`` (n,) into ``out`` (n,);
``data`` is one tuple of the model's arrays, passed through untouched), a piecewise-smooth
model's switch functions, a stop function, or a stage store (the linear network's factored
stages).  A loop built without switches has no kink code, one without a stop no stop code.
The returned ``@njit(nogil=True)`` dispatcher has the signature :data:`ERK_ADVANCE_ARGS` and
is not cached by itself: a model calls it from a module-level ``@njit(cache=True,
nogil=True)`` entry point of its own module, which numba caches with the loop and the
model's functions compiled in (``models/_linear_kernels.erk_advance``,
``models/_mlp_kernels.erk_advance_smooth``); a dispatcher passed as an *argument* to a
cached kernel is recompiled in every process.  ``methods.compiled.erk`` drives an entry
point from Python.  The scalar helpers are ``inline="always"``, compiled into each loop.
"""
from __future__ import annotations

import numpy as np

from ..._numba_cache import njit

__all__ = ["error_norm", "step_after_accept", "predictive_step", "accept_step", "sumsq",
           "stiffness_estimate", "stability_cap", "capped_step", "count_stiff", "PENDING", "STIFF",
           "step_guard", "exchange", "settle", "hold_step", "stage_state", "stage_states",
           "make_erk_advance", "ERK_ADVANCE_ARGS", "STOPPED", "TH_SIZE", "STATS_SIZE",
           "CTL_FIELDS", "step_factor", "kink_factor"]

#: The arguments of a loop built by :func:`make_erk_advance`, in order.
ERK_ADVANCE_ARGS = ("y", "K", "y_new", "th", "t_target", "t_out", "stats", "max_steps", "tab",
                    "low", "ctl", "wd", "stiff", "pat", "ybuf", "data")


@njit(cache=True, inline="always")
def error_norm(e5, e3, use_e3, h, n):
    """``methods.base``'s error norm from the scaled sums: RMS, or Hairer's DOP853 norm."""
    if not use_e3:
        return abs(h) * np.sqrt(e5 / n)
    if e5 == 0.0 and e3 == 0.0:
        return 0.0
    return abs(h) * e5 / np.sqrt((e5 + 0.01 * e3) * n)


@njit(cache=True, inline="always")
def step_after_accept(h, h_try, err, exponent, max_factor, safety, rejected, clipped):
    """The standard controller's step after an accepted ``h_try`` (``methods.base.accept_step``)."""
    factor = max_factor if err == 0.0 else min(max_factor, safety * err ** exponent)
    if rejected:
        factor = min(1.0, factor)
    h_next = h_try * factor
    if clipped and not rejected:
        h_next = max(h_next, h)
    return h_next


@njit(cache=True, inline="always")
def predictive_step(h_next, h_try, err, exponent, h_prev, err_prev, safety, min_factor):
    """``methods.base.predictive_step`` for the compiled loops (same operations)."""
    if h_prev <= 0.0 or err == 0.0:
        return h_next
    h_pred = safety * h_try * (h_try / h_prev) * (err_prev / err / err) ** (-exponent)
    return min(h_next, max(h_pred, min_factor * h_try))


@njit(cache=True, inline="always")
def accept_step(h, h_try, err, exponent, max_factor, safety, min_factor, rejected, clipped,
                th, min_err):
    """``methods.base.accept_step``; the previous accepted step and its floored error in
    ``th[3]``, ``th[4]``, which this step then replaces (unless ``clipped``)."""
    h = step_after_accept(h, h_try, err, exponent, max_factor, safety, rejected, clipped)
    if not clipped:
        h = predictive_step(h, h_try, err, exponent, th[3], th[4], safety, min_factor)
        th[3] = h_try
        th[4] = max(err, min_err)
    return h


@njit(cache=True)
def sumsq(X):
    """``sum X^2``, left to right."""
    acc = 0.0
    for v in X.ravel():
        acc += v * v
    return acc


@njit(cache=True, inline="always")
def stiffness_estimate(num, dd, ref, wsum, h, yy, min_rel, ulps_eps):
    """``methods.base.stiffness_estimate`` for the compiled loops (same operations)."""
    rel2 = min_rel * min_rel
    if not (dd > rel2 * wsum * wsum * ref and num > rel2 * ref):
        return 0.0
    res = ulps_eps / h
    rho = np.sqrt(num / max(dd, res * res * yy)) / abs(h)
    return rho if np.isfinite(rho) else 0.0


@njit(cache=True, inline="always")
def stability_cap(h_next, rho, stiff):
    """``methods.base.stability_cap``; ``stiff = [boundary, safety, memory, min_rel, wsum,
    state_ulps * eps]`` (``methods.compiled.stiffness_args``)."""
    if not (rho > 0.0 and stiff[0] > 0.0):
        return h_next
    return min(h_next, stiff[1] * stiff[0] / rho)


@njit(cache=True, inline="always")
def count_stiff(h_capped, h_free, th, stiff, stats):
    """``stats[4]`` counts capped steps; the stiffness test of ``methods.base.integrate``
    (``th[7]``, ``th[8]`` its counts, ``stiff[6:9]`` its constants): True once it fires."""
    if h_capped < h_free:
        stats[4] += 1
    if stiff[7] <= 0.0:
        return False
    if h_capped * stiff[8] < h_free:
        th[8] = 0.0
        th[7] += 1.0
    else:
        th[8] += 1.0
        if th[8] == stiff[6]:
            th[7] = 0.0
    return th[7] >= stiff[7]


@njit(cache=True, inline="always")
def capped_step(h, h_try, num, dd, ref, yy, th, stiff):
    """``h`` capped by the remembered estimate ``th[2]``, updated from the step's sums."""
    rho = max(stiffness_estimate(num, dd, ref, stiff[4], h_try, yy, stiff[3], stiff[5]),
              stiff[2] * th[2])
    th[2] = rho
    return stability_cap(h, rho, stiff)


#: Return code of a loop holding an accepted step across an output time.
PENDING = 1
#: Return code of a loop whose stiffness test fired (:func:`count_stiff`) after an
#: accepted step that did not end on ``t_target``: ``y``, ``K[0]`` and ``th`` hold its end.
STIFF = 2


@njit(cache=True, inline="always")
def step_guard(h, min_step, stats, max_steps, nonfinite):
    """-3: step budget spent; -1: ``h < min_step`` (``stats[3]``: after non-finite trials); 0."""
    if stats[1] + stats[2] >= max_steps:
        return -3
    if h < min_step:
        stats[3] = 1 if nonfinite else 0
        return -1
    return 0


@njit(cache=True)
def exchange(a, b):
    """Swap the contents of ``a`` and ``b`` (n,)."""
    for m in range(a.shape[0]):
        v = a[m]
        a[m] = b[m]
        b[m] = v


@njit(cache=True)
def settle(y, cur, in_y):
    """Copy the current state ``cur`` into the caller's ``y`` unless it is already there."""
    if not in_y:
        y[:] = cur


@njit(cache=True, inline="always")
def hold_step(th, t, h, h_try, t_new, y, y_new, swapped):
    """Hand back an accepted step ``t -> t_new`` of length ``h_try``: record it in ``th``
    (``h``: the step proposed next) and return :data:`PENDING`, the step's start in ``y``
    and its end in ``y_new`` (exchanged first if the loop ``swapped`` their roles)."""
    th[0] = t
    th[1] = h
    th[5] = h_try
    th[6] = t_new
    if swapped:
        exchange(y, y_new)
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


#: Return code of a loop whose stop event fired inside an accepted step: ``y`` holds the
#: located state at ``th[14]`` (:func:`make_erk_advance`).
STOPPED = 4

#: Indices of the loop state ``th`` (float64) beyond the nine of the linear loops.
TH_ACTIVE, TH_KINK_REJ, TH_CALM, TH_LAST_CROSS, TH_SLIDING, TH_T_STOP, TH_G = range(9, 16)
#: Size of ``th`` and of ``stats`` (``[nfev, accepted, rejected, nonfinite, capped, kinks,
#: fallback_steps]``).
TH_SIZE = 16
STATS_SIZE = 7
#: Entries of the control array ``ctl`` of :func:`make_erk_advance`'s loop, in order.
CTL_FIELDS = ("atol", "safety", "min_factor", "max_factor", "min_err", "ulps", "predictive",
              "kink_rejections", "calm_steps", "kink_growth", "stop_iterations", "stop_xtol",
              "clip_eps")


@njit(cache=True, inline="always")
def _no_crossings(data, pat, first_only):
    return 0


@njit(cache=True, inline="always")
def _no_pattern(data, pat):
    return None


@njit(cache=True, inline="always")
def _no_stop(y, data):
    return 1.0


@njit(cache=True, inline="always")
def _no_store_stiffness(s, wd, data):
    return 0.0, 0.0, 0.0


@njit(cache=True, inline="always")
def _no_store_fsal(s, data):
    return None


@njit(cache=True, inline="always")
def step_factor(err, exponent, safety, min_factor, max_factor, after_rejection):
    """``methods.base.Stepper.factor``: the factor on ``h`` after an error norm ``err``."""
    if err == 0.0:
        fac = max_factor
    else:
        fac = min(max_factor, max(min_factor, safety * err ** exponent))
    return min(1.0, fac) if after_rejection else fac


@njit(cache=True, inline="always")
def kink_factor(err, safety, min_factor, max_factor, after_rejection):
    """``methods.base.kink_factor``: the factor ``SAFETY / err`` after a step across a kink."""
    fac = max_factor if err == 0.0 else min(max_factor, max(min_factor, safety / err))
    return min(1.0, fac) if after_rejection else fac


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
        h, A, b, e, e3, use_e3, rtol, atol, data) -> err`` forms the stages of a step of
        ``h`` from ``y`` (slot 0 holding ``f(y)``), the end state ``y_new`` and the error
        norm; ``stiffness_sums(s, wd, data) -> (num, dd, ref)`` those of the accepted step
        (:func:`stiffness_estimate`); ``fsal(s, data)`` makes slot ``s`` slot 0.  The loop
        then never touches ``K`` and swaps the state and trial arrays instead of copying.
        Not with ``switches`` or ``stop``.

    Returns
    -------
    numba dispatcher
        ``erk_advance(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl,
        wd, stiff, pat, ybuf, data) -> int`` (``@njit(nogil=True)``, not cached: call it
        from a module-level cached entry point, see the module docstring).
    """
    kinks = switches is not None
    stops = stop is not None
    stored = store is not None
    if stored and (kinks or stops):
        raise ValueError("store: a stage store's loop takes no switches and no stop")
    crossings, keep_pattern = switches if kinks else (_no_crossings, _no_pattern)
    stop_value = stop if stops else _no_stop
    store_stiffness, store_fsal = store[1:] if stored else (_no_store_stiffness, _no_store_fsal)

    @njit(nogil=True, inline="always")
    def _dense_attempt(y, K, y_new, h_try, A, b, e, e3, use_e3, rtol, atol, pat, data):
        """One attempted step of ``h_try`` from ``y``: ``(err, stage_crossed)``."""
        s = b.shape[0]
        n = y.shape[0]
        crossed = False
        for i in range(1, s + 1):
            stage_state(y, K, (b if i == s else A[i])[:i], h_try, y_new)
            rhs(y_new, K[i], data)
            if kinks and not crossed:
                crossed = crossings(data, pat, True) > 0
        # error norm (RMS, or Hairer's DOP853 combination of err5 and err3)
        e5 = 0.0
        e3n = 0.0
        for m in range(n):
            sc = atol + rtol * max(abs(y[m]), abs(y_new[m]))
            acc = 0.0
            acc3 = 0.0
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
        store_attempt = store[0]

        @njit(nogil=True, inline="always")
        def _attempt(y, K, y_new, h_try, A, b, e, e3, use_e3, rtol, atol, pat, data):
            return store_attempt(y, y_new, h_try, A, b, e, e3, use_e3, rtol, atol, data), False
    else:
        _attempt = _dense_attempt

    @njit(nogil=True, inline="always")
    def _locate(y, K, y_new, ybuf, h_try, g0, tb, ctl, pat, data, stats):
        """``methods.base._locate_stop``: the located state into ``ybuf``; returns ``theta``."""
        A, b, e, e3, use_e3, exponent, rtol = tb
        atol, iters, xtol = ctl[0], int(ctl[10]), ctl[11]
        n = y.shape[0]
        lo, hi = 0.0, 1.0
        glo, ghi = g0, -1.0
        side = 0
        for m in range(n):
            ybuf[m] = y_new[m]
        for _ in range(iters):
            if hi - lo <= xtol:
                break
            if glo == ghi:
                th = 0.5 * (lo + hi)
            else:
                th = hi - ghi * (hi - lo) / (ghi - glo)
                if not lo < th < hi:
                    th = 0.5 * (lo + hi)
            _attempt(y, K, y_new, th * h_try, A, b, e, e3, use_e3, rtol, atol, pat, data)
            stats[0] += b.shape[0]
            g = stop_value(y_new, data)
            if g <= 0.0:
                hi, ghi = th, g
                for m in range(n):
                    ybuf[m] = y_new[m]
                if side == -1:
                    glo *= 0.5
                side = -1
            else:
                lo, glo = th, g
                if side == 1:
                    ghi *= 0.5
                side = 1
        return hi

    @njit(nogil=True)
    def erk_advance(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd,
                    stiff, pat, ybuf, data):
        """Advance ``y`` (n,) from ``th[0]`` to exactly ``t_target`` with adaptive steps.

        ``K`` (at least s + 1 rows of the larger pair, n) holds stage derivatives,
        ``K[0] = f(y)`` on entry and exit; ``tab`` and ``low`` are the primary and the
        low-order pair as tuples ``(A, b, e, e3, use_e3, exponent, rtol)`` (``low`` only
        used at kinks); ``ctl`` the constants of :data:`CTL_FIELDS` (``predictive`` 1:
        the predictive controller of :func:`accept_step` and a step shortened onto an
        output time keeping the planned one, as the linear network's loops; 0: the plain
        controller, as ``integrate`` without ``predictive``).

        ``th = [t, h, rho, h_prev, err_prev, h_step, t_new, n_stiff, n_nonstiff, active,
        kink_rejections, calm, last_cross, sliding, t_stop, g]`` (time, proposed step,
        remembered stiffness estimate, the last accepted unclipped step and its floored
        error, see :func:`accept_step`; the pending step; the counts of the stiffness
        test, see :func:`count_stiff`; at kinks the stepper in use (0 primary, 1
        fallback), the rejections across a switch in a row, the calm steps since the last
        crossing, the time of the last crossing (NaN: none yet) and the time spent
        sliding; where the stop fired, and the stop value at ``y``) and ``stats =
        [nfev, accepted, rejected, nonfinite, capped, kinks, fallback_steps]`` are updated
        in place (``nonfinite`` = 1 when an underflow followed non-finite trial steps).
        ``wd`` are the primary's stiffness weights and ``stiff`` the stability-cap
        constants (see :func:`stability_cap`; ``stiff[0] = 0``: no cap); ``pat`` the
        switch pattern at the last crossing (kinks), ``ybuf`` (n,) scratch for a stop.

        Returns 0 on success, -1 step-size underflow, -3 step budget exhausted (codes of
        ``FlowStatus``); on failure ``y`` and ``th`` hold the last accepted state.  An
        accepted step that ends at or after ``t_out`` (dense output; infinite otherwise)
        returns :data:`PENDING` before its bookkeeping: ``y`` and ``K`` are still the
        step's, ``y_new`` its end state at ``th[6] = t_new``, ``th[5]`` its length; the
        caller completes it.  With the stiffness test on (``stiff[7] > 0``) a step after
        which it fires returns :data:`STIFF` unless it ended on ``t_target`` (then 0: the
        caller reads ``th[7]``).  :data:`STOPPED`: the stop event fired; ``y`` holds the
        located state, ``th[0] = th[14]`` its time.
        """
        n = y.shape[0]
        atol, safety, min_factor, max_factor, min_err, ulps = (ctl[0], ctl[1], ctl[2], ctl[3],
                                                                ctl[4], ctl[5])
        predictive = ctl[6] != 0.0
        kink_rej_max, calm_max, growth, clip_eps = ctl[7], ctl[8], ctl[9], ctl[12]
        capping = stiff[0] > 0.0
        t = th[0]
        h = th[1]
        nonfinite = False
        cur = y            # a store's loop swaps the state and the trial state
        nxt = y_new
        in_y = True
        while True:
            min_step = ulps * (np.nextafter(t, np.inf) - t)
            if h < min_step:
                h = min_step
            rejected = False
            while True:
                code = step_guard(h, min_step, stats, max_steps, nonfinite)
                if code != 0:
                    th[0] = t
                    th[1] = h
                    settle(y, cur, in_y)
                    return code
                on_low = kinks and th[9] != 0.0
                tb = low if on_low else tab
                A, b, e, e3, use_e3, exponent, rtol = tb
                s = b.shape[0]
                clipped = h >= t_target - t or t + h >= t_target - clip_eps * abs(t_target)
                h_try = t_target - t if clipped else h
                err, stage_crossed = _attempt(cur, K, nxt, h_try, A, b, e, e3, use_e3, rtol,
                                              atol, pat, data)
                stats[0] += s
                if not np.isfinite(err):
                    stats[2] += 1
                    nonfinite = True
                    rejected = True
                    h = h_try * min_factor
                    continue
                nonfinite = False
                crossed = crossings(data, pat, False) if kinks else 0
                if err < 1.0:
                    break
                stats[2] += 1
                if kinks:
                    cr = crossed > 0 or stage_crossed
                    if cr and not on_low:
                        th[10] += 1.0
                        if th[10] >= kink_rej_max:
                            th[9] = 1.0
                            th[10] = 0.0
                            th[11] = 0.0
                            on_low = True
                    if cr and on_low:
                        h = h_try * kink_factor(err, safety, min_factor, max_factor, True)
                    else:
                        h = h_try * step_factor(err, (low if on_low else tab)[5], safety,
                                                min_factor, max_factor, True)
                else:
                    h = h_try * max(min_factor, safety * err ** exponent)
                rejected = True
            t_new = t_target if clipped else t + h_try
            if stops:
                g_new = stop_value(y_new, data)
                if g_new <= 0.0:
                    theta = _locate(y, K, y_new, ybuf, h_try, th[15], tb, ctl, pat, data, stats)
                    stats[1] += 1
                    for m in range(n):
                        y[m] = ybuf[m]
                    th[14] = t + theta * h_try
                    th[0] = th[14]
                    th[1] = h
                    return STOPPED
                th[15] = g_new
            stats[1] += 1
            took_main = not on_low
            if kinks:
                if on_low:
                    stats[6] += 1
                if crossed > 0:
                    stats[5] += crossed
                    if th[11] <= calm_max and not np.isnan(th[12]):
                        th[13] += t_new - th[12]
                    th[12] = t_new
                    th[11] = 0.0
                    keep_pattern(data, pat)
                elif stage_crossed:
                    th[11] = 0.0       # a stage crossed, the end did not: along a kink
                else:
                    th[11] += 1.0
                if on_low and th[11] >= calm_max:
                    th[9] = 0.0
                    on_low = False
                th[10] = 0.0
            if on_low:
                if crossed > 0:
                    fac = kink_factor(err, safety, min_factor, max_factor, rejected)
                else:
                    fac = step_factor(err, exponent, safety, min_factor, max_factor, rejected)
                h = h_try * min(fac, growth)
            elif predictive:
                h = accept_step(h, h_try, err, tab[5], max_factor, safety, min_factor,
                                rejected, clipped, th, min_err)
            else:
                h = h_try * step_factor(err, tab[5], safety, min_factor, max_factor, rejected)
            stiff_now = False
            if capping and took_main and stored:
                num, dd, ref = store_stiffness(s, wd, data)
                h_free = h
                h = capped_step(h, h_try, num, dd, ref, sumsq(nxt), th, stiff)
                stiff_now = count_stiff(h, h_free, th, stiff, stats)
            elif capping and took_main:
                # stiffness estimate from the accepted step's stages (as methods.erk.ExplicitRK)
                ref = 0.0
                num = 0.0
                dd = 0.0
                yy = 0.0
                for m in range(n):
                    yy += y_new[m] * y_new[m]
                    ref += K[0, m] * K[0, m]
                    dv = K[s, m] - K[s - 1, m]
                    num += dv * dv
                    acc = 0.0
                    for j in range(s):
                        if wd[j] != 0.0:
                            acc += wd[j] * K[j, m]
                    dd += acc * acc
                h_free = h
                h = capped_step(h, h_try, num, dd, ref, yy, th, stiff)
                stiff_now = count_stiff(h, h_free, th, stiff, stats)
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
                th[0] = t_target if clipped else t + h_try
                th[1] = h
                settle(y, cur, in_y)
                return 0 if clipped else STIFF
            t = t + h_try

    return erk_advance

