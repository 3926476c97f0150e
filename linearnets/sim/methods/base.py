"""Steppers that know nothing about networks, and the one loop that drives them.

A stepper advances ``dy/dt = rhs(t, y)`` on a flat float64 vector (numpy, or CuPy
through the namespace ``xp``) by one attempted step and estimates its local error;
:func:`integrate` is the adaptive loop, written once for every stepper: step-size
control, the initial step, stepping onto output times, failure reporting, a stop
rule located inside a step, and the switch to a low-order pair at kinks of a
piecewise-smooth vector field.

Step-size control (Hairer, Norsett & Wanner, *Solving ODEs I*, II.4; as
``scipy.integrate._ivp``): a step with error norm ``err <= 1`` (RMS of the error
estimate over ``atol + rtol max(|y|, |y_new|)``) is accepted; the next step is
``h * clip(SAFETY * err^(-1/(q+1)), MIN_FACTOR, MAX_FACTOR)``, ``q`` the order of
the error estimator, and after a rejection it may not grow.

Kinks (ReLU-type activations).  A model whose vector field is only piecewise
smooth exposes the sign pattern of its switching functions at its latest
evaluation (``switches``).  A step across a switching surface has a local error
``O(h |jump of f|)`` whatever the order of the method, so a high-order pair
rejects step after step there, and where the flow slides along the surface
(Filippov) it chatters across it and stalls.  The loop counts consecutive
rejections whose trial state lies on the other side of some switch; after
``KINK_REJECTIONS`` of them it continues with the low-order ``fallback`` stepper at
the tolerance ``kink_rtol``, and returns to the primary one after ``CALM_STEPS``
accepted steps without a crossing.  It counts the switches crossed by accepted
steps (``kinks``) and the time spent sliding (``sliding_time``: the time between
crossings at most ``CALM_STEPS`` accepted steps apart, the chattering that is the
discrete image of sliding).  While the fallback runs, a step across a kink sets the
next step by ``SAFETY / err`` (its error is first order in ``h``) and no step grows by
more than ``KINK_GROWTH``.

Accuracy on a non-smooth flow: away from kinks the local error per step is held
below ``atol + rtol |y|`` as usual.  On a step that crosses a kink the error
estimate measures ``h |jump|``, so accepted crossing steps, and the chattering
across a sliding surface, keep the state within about ``kink_rtol |y|`` (RMS) of the
exact piecewise-smooth (Filippov) solution per step; the global error over a
sliding stretch grows at most linearly with its length.  Accuracy is therefore
``O(kink_rtol)`` near kinks, ``O(rtol)`` elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .._solvers import FlowStatus

__all__ = ["Stepper", "StepperOptions", "Result", "integrate", "rms_norm", "SAFETY",
           "MIN_FACTOR", "MAX_FACTOR", "KINK_REJECTIONS", "CALM_STEPS"]

#: Safety factor on the optimal step.
SAFETY = 0.9
#: Smallest and largest factor by which one step may change the next.
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
#: Consecutive rejections across a switching surface before the low-order fallback.
KINK_REJECTIONS = 3
#: Accepted steps without a crossing after which the primary stepper resumes.
CALM_STEPS = 16
#: Largest step growth while the fallback stepper runs.
KINK_GROWTH = 2.0
#: Illinois iterations and tolerance (fraction of the step) locating a stop inside a step.
STOP_ITERATIONS = 60
STOP_XTOL = 1e-12


def rms_norm(x, xp=np):
    """Root-mean-square norm of ``x`` as a Python float."""
    n = x.size
    return float(xp.sqrt(xp.sum(x * x) / n)) if n else 0.0


class Stepper:
    """One attempted step of an embedded method, and its step-size rule.

    Subclasses set ``tableau`` (class data) and implement :meth:`attempt`.

    Parameters
    ----------
    rhs : callable ``rhs(t, y) -> dy``
        Flat arrays (n,); the returned array is copied, so it may be a buffer.
    n : int
        State size.
    rtol, atol : float
    xp : module
        Array namespace (numpy or CuPy).
    """

    tableau = None
    SAFETY = SAFETY
    MIN_FACTOR = MIN_FACTOR
    MAX_FACTOR = MAX_FACTOR

    def __init__(self, rhs, n, rtol, atol, xp=np):
        self.rhs = rhs
        self.n = int(n)
        self.rtol = float(rtol)
        self.atol = float(atol)
        self.xp = xp

    @property
    def name(self):
        return self.tableau.name

    @property
    def n_evals(self) -> int:
        """Right-hand-side evaluations per attempted step."""
        return self.tableau.n_stages

    @property
    def error_exponent(self) -> float:
        return -1.0 / (self.tableau.error_order + 1)

    def attempt(self, t, y, f, h):
        """``(y_new, f_new, err)``: the step of size ``h`` from ``(t, y)`` with ``f = rhs(t, y)``,
        ``f_new = rhs(t + h, y_new)`` and the scaled error norm ``err`` (accept if <= 1)."""
        raise NotImplementedError

    def factor(self, err, after_rejection=False):
        """The factor on ``h`` for the next step after an error norm ``err``."""
        if err == 0.0:
            fac = self.MAX_FACTOR
        else:
            fac = min(self.MAX_FACTOR,
                      max(self.MIN_FACTOR, self.SAFETY * err ** self.error_exponent))
        return min(1.0, fac) if after_rejection else fac

    def initial_step(self, t0, y0, f0, h_max):
        """Hairer-Norsett-Wanner II.4 (as ``scipy.integrate._ivp.common.select_initial_step``);
        costs one evaluation."""
        xp = self.xp
        if y0.size == 0:
            return h_max
        scale = self.atol + xp.abs(y0) * self.rtol
        d0 = rms_norm(y0 / scale, xp)
        d1 = rms_norm(f0 / scale, xp)
        h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
        h0 = min(h0, h_max)
        f1 = self.rhs(t0 + h0, y0 + h0 * f0)
        d2 = rms_norm((f1 - f0) / scale, xp) / h0
        q = self.tableau.error_order
        if d1 <= 1e-15 and d2 <= 1e-15:
            h1 = max(1e-6, h0 * 1e-3)
        else:
            h1 = (0.01 / max(d1, d2)) ** (1.0 / (q + 1))
        return min(100 * h0, h1, h_max)


@dataclass(frozen=True)
class StepperOptions:
    """Settings of :func:`integrate`.

    Attributes
    ----------
    rtol, atol : float
    max_steps : int
        Budget of attempted steps.
    first_step : float or None
    kink_rtol : float
        Relative tolerance of the fallback stepper at kinks (>= rtol).
    """

    rtol: float = 1e-8
    atol: float = 1e-12
    max_steps: int = 1_000_000
    first_step: Optional[float] = None
    kink_rtol: float = 1e-6


@dataclass(frozen=True)
class Result:
    """What :func:`integrate` hands back (like ``_solvers.RawResult``, plus the stop and kinks).

    Attributes
    ----------
    n_done : int
        Output times reached (``observe`` was called for ``k < n_done``).
    t_last : float
        Time of ``y_last``, the last accepted state (the stopped state after a stop).
    y_last : ndarray (n,)
    nfev, nsteps, nrejected : int
    status : FlowStatus
    message : str
    t_stop : float or None
        Where the stop rule fired (None if it did not).
    kinks : int
        Switches crossed by accepted steps.
    sliding_time : float
        Time between kink crossings at most ``CALM_STEPS`` accepted steps apart.
    fallback_steps : int
        Accepted steps taken by the fallback stepper.
    """

    n_done: int
    t_last: float
    y_last: object
    nfev: int
    nsteps: int
    nrejected: int
    status: FlowStatus
    message: str
    t_stop: Optional[float] = None
    kinks: int = 0
    sliding_time: float = 0.0
    fallback_steps: int = 0


def _kink_factor(err, after_rejection):
    """Step factor after a step across a kink: its error is ``O(h |jump|)``, first order in
    ``h`` whatever the method's order, so the factor is ``SAFETY / err``."""
    fac = MAX_FACTOR if err == 0.0 else min(MAX_FACTOR, max(MIN_FACTOR, SAFETY / err))
    return min(1.0, fac) if after_rejection else fac


def _locate_stop(stepper, t, y, f, h, g0, stop):
    """Illinois regula falsi on ``theta`` in [0, 1] for ``stop(y(t + theta h)) = 0``, ``y(.)``
    the stepper's own step from ``(t, y)``: ``(theta, y_theta, nfev)`` with
    ``stop(y_theta) <= 0``."""
    lo, hi = 0.0, 1.0
    glo, ghi = g0, None
    y_hi, nfev = None, 0
    ghi = -1.0
    side = 0
    for _ in range(STOP_ITERATIONS):
        if hi - lo <= STOP_XTOL:
            break
        if ghi is None or glo == ghi:
            th = 0.5 * (lo + hi)
        else:
            th = hi - ghi * (hi - lo) / (ghi - glo)
            if not lo < th < hi:
                th = 0.5 * (lo + hi)
        y_th, _, _ = stepper.attempt(t, y, f, th * h)
        nfev += stepper.n_evals
        g = stop(y_th)
        if g <= 0:
            hi, ghi, y_hi = th, g, y_th
            if side == -1:
                glo *= 0.5
            side = -1
        else:
            lo, glo = th, g
            if side == 1:
                ghi *= 0.5
            side = 1
    return hi, y_hi, nfev


def integrate(rhs, y0, t_eval, primary, options, observe, *, fallback=None, switches=None,
              stop=None, t0=0.0, xp=np):
    """Integrate ``dy/dt = rhs(t, y)`` from ``y0`` at ``t0`` onto every time of ``t_eval``.

    Parameters
    ----------
    rhs : callable ``rhs(t, y) -> dy``
    y0 : ndarray (n,)
        The state at ``t0`` (not modified).
    t_eval : ndarray (T,)
        Strictly increasing output times ``>= t0``; each one ends a step.
    primary : type
        A :class:`Stepper` subclass.
    options : StepperOptions
    observe : callable ``observe(k, y)``
        Called once for each reached output time, in order.
    fallback : type, optional
        The low-order stepper for kinks (used only with ``switches``).
    switches : callable ``() -> ndarray of bool``, optional
        The sign pattern of the switching functions at the latest ``rhs`` call.
    stop : callable ``stop(y) -> float``, optional
        Stop rule: the run stops where it first becomes ``<= 0`` (located inside the
        step); every later output time gets the stopped state.
    t0 : float
    xp : module

    Returns
    -------
    Result
        Failure (step underflow, a non-finite state, an exhausted budget) is reported
        in ``status``, never raised; no state is recorded once step control has
        broken down.
    """
    n = y0.size
    eps = np.finfo(np.float64).eps
    main = primary(rhs, n, options.rtol, options.atol, xp)
    low = (fallback(rhs, n, max(options.kink_rtol, options.rtol), options.atol, xp)
           if fallback is not None and switches is not None else None)
    T = t_eval.size
    t = float(t0)
    y = xp.array(y0, dtype=xp.float64, copy=True)
    f = xp.array(rhs(t, y), copy=True)
    nfev = 1
    pat = switches() if switches is not None else None
    if pat is not None:
        pat = pat.copy()
    k = 0
    counters = dict(nsteps=0, nrejected=0, kinks=0, fallback_steps=0)
    sliding = 0.0

    def done(status, extra="", t_stop=None, y_out=None):
        msg = status.message if status.success else f"{status.message} at t = {t:.6g}"
        if extra:
            msg += extra
        if counters["kinks"]:
            msg += (f"; {counters['kinks']} kink crossings, {sliding:.3g} time units sliding, "
                    f"{counters['fallback_steps']} steps by {low.name if low else '-'}")
        return Result(n_done=k, t_last=t, y_last=y if y_out is None else y_out, nfev=nfev,
                      nsteps=counters["nsteps"], nrejected=counters["nrejected"],
                      status=status, message=msg, t_stop=t_stop, kinks=counters["kinks"],
                      sliding_time=sliding, fallback_steps=counters["fallback_steps"])

    if not bool(xp.all(xp.isfinite(f))):
        return done(FlowStatus.NONFINITE)
    while k < T and t_eval[k] <= t:
        observe(k, y)
        k += 1
    if stop is not None:
        g = stop(y)
        if g <= 0:
            while k < T:
                observe(k, y)
                k += 1
            return done(FlowStatus.SUCCESS, "; stopped at t = 0", t_stop=t)
    if k == T:
        return done(FlowStatus.SUCCESS)
    if options.first_step is not None:
        h = min(options.first_step, t_eval[-1] - t)
    else:
        h = main.initial_step(t, y, f, t_eval[-1] - t)
        nfev += 1
    active = main
    kink_rejections = calm = 0
    last_cross = None
    rejected = False
    nonfinite = False
    attempts = 0
    while k < T:
        target = float(t_eval[k])
        if attempts >= options.max_steps:
            return done(FlowStatus.MAX_STEPS)
        if h >= target - t or t + h >= target - 4 * eps * abs(target):
            t_new = target
        else:
            t_new = t + h
        step = t_new - t
        if step <= 10 * eps * max(abs(t), 1e-300):
            return done(FlowStatus.NONFINITE if nonfinite else FlowStatus.STEP_UNDERFLOW)
        y_new, f_new, err = active.attempt(t, y, f, step)
        attempts += 1
        nfev += active.n_evals
        if not np.isfinite(err):
            nonfinite = True
            counters["nrejected"] += 1
            rejected = True
            h = step * MIN_FACTOR
            continue
        nonfinite = False
        crossed = 0
        if pat is not None:
            pat_new = switches()
            crossed = int(xp.count_nonzero(pat_new != pat))
        if err <= 1.0:
            if stop is not None:
                g_new = stop(y_new)
                if g_new <= 0:
                    th, y_stop, extra = _locate_stop(active, t, y, f, step, g, stop)
                    nfev += extra
                    t_stop = t + th * step
                    counters["nsteps"] += 1
                    t = t_stop
                    while k < T:
                        observe(k, y_stop)
                        k += 1
                    return done(FlowStatus.SUCCESS, f"; stopped at t = {t_stop:.6g}",
                                t_stop=t_stop, y_out=y_stop)
                g = g_new
            t, y, f = t_new, y_new, f_new
            counters["nsteps"] += 1
            if active is low:
                counters["fallback_steps"] += 1
            if crossed:
                counters["kinks"] += crossed
                if calm <= CALM_STEPS and last_cross is not None:
                    sliding += t - last_cross
                last_cross = t
                calm = 0
                pat = pat_new.copy()
            else:
                calm += 1
            if active is low and calm >= CALM_STEPS:
                active = main
            kink_rejections = 0
            if active is low:
                # near a kink: a crossing step's error is first order in h, and growth is
                # held to KINK_GROWTH (a step grown past the next crossing is rejected)
                fac = _kink_factor(err, rejected) if crossed else active.factor(err, rejected)
                h = step * min(fac, KINK_GROWTH)
            else:
                h = step * active.factor(err, rejected)
            rejected = False
            while k < T and t_eval[k] <= t:
                observe(k, y)
                k += 1
        else:
            counters["nrejected"] += 1
            if crossed and low is not None and active is main:
                kink_rejections += 1
                if kink_rejections >= KINK_REJECTIONS:
                    active = low
                    kink_rejections = 0
                    calm = 0
            h = step * (_kink_factor(err, True) if crossed and active is low
                        else active.factor(err, True))
            rejected = True
    return done(FlowStatus.SUCCESS)
