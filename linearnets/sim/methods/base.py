"""Steppers that know nothing about networks, and the one adaptive loop that drives them
(numpy and CuPy; docs/simulator.md, "The adaptive loop" and "Module overviews").

The scalar step-size rules (``error_norm``, ``step_factor``, ``kink_factor``,
``predictive_step``, ``accept_step``, ``stiffness_estimate``, ``stability_cap``) are written
once, here: ``register_jitable`` makes each a plain function in Python and compiles it into
the numba loops that call it (``_erk_kernels``, ``_rosw_kernels``).  So are the rules on the
loop state ``th``, ``stats`` (``accept_into``, ``count_stiff``, ``count_cheaper``,
``kink_rejection``, ``kink_accepted``), which :class:`Controller` calls and the loops
compile inline."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np
from numba.extending import register_jitable

from . import _loop_state as S
from ._loop_state import NONSTIFF, STIFF, STOPPED

__all__ = ["FlowStatus", "Stepper", "StepperOptions", "StepControl", "Result", "integrate",
           "sumsq",
           "error_norm", "step_factor", "kink_factor", "SAFETY", "MIN_FACTOR", "MAX_FACTOR",
           "KINK_REJECTIONS", "CALM_STEPS", "KINK_GROWTH", "KINK_EARLY_STEPS",
           "kink_tolerances", "PREDICTIVE_MIN_ERR",
           "MIN_STEP_ULPS", "STABILITY_SAFETY", "STIFFNESS_MEMORY", "STIFFNESS_MIN_REL",
           "STIFFNESS_STATE_ULPS", "NONSTIFF_RESET", "DENSE_BATCH_BYTES", "CLIP_EPS",
           "loop_state", "predictive_step", "accept_step", "stiffness_estimate",
           "stability_cap", "select_initial_step", "dense_batch_rows",
           "observe_step", "observe_until", "Controller", "accept_into", "count_stiff",
           "count_cheaper", "kink_rejection", "kink_accepted", "loop_result"]

#: Safety factor on the optimal step.
SAFETY = 0.9
#: Smallest and largest factor by which one step may change the next.
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
#: Floor on the previous step's error in the predictive controller (``radau5.f``).
PREDICTIVE_MIN_ERR = 1e-2
#: A step shorter than this many ulps of t is an underflow.
MIN_STEP_ULPS = 10.0
#: Fraction of the estimated stability limit ``boundary / rho`` a step may grow to.
STABILITY_SAFETY = 0.9
#: Decay per accepted step of the remembered stiffness estimate (docs/simulator.md).
STIFFNESS_MEMORY = 0.95
#: A stiffness estimate counts only when the differences it divides exceed this fraction
#: of the derivatives they are formed from (below, rounding dominates).
STIFFNESS_MIN_REL = 1e-6
#: Floor of the estimate's state difference, in rounding units ``eps |y|`` of the state.
STIFFNESS_STATE_ULPS = 1.0
#: Non-stiff steps that reset the count of the stiffness test (Hairer's ``nonsti``).
NONSTIFF_RESET = 6
#: The switch back from a Rosenbrock-W phase needs the explicit pair cheaper per unit time
#: by this factor (a hysteresis).
SWITCH_BACK_MARGIN = 1.25
#: Consecutive rejections across a switching surface before the low-order fallback.
KINK_REJECTIONS = 3
#: Calm accepted steps in a row (no evaluation crossed a switch) before the primary resumes.
CALM_STEPS = 16
#: Largest step growth while the fallback stepper runs.
KINK_GROWTH = 2.0
#: Accepted steps of the fallback at ``kink_rtol`` before it turns to ``kink_rtol_late``
#: (docs/methods.md, "What kink_rtol trades"): a lazy centred ReLU net took 29-46 of them in
#: all, a rich one 500-3,000 (300 reached 1e-3 on every draw measured; 100 missed one).
KINK_EARLY_STEPS = 300
#: Illinois iterations and tolerance (fraction of the step) locating a stop inside a step.
STOP_ITERATIONS = 60
STOP_XTOL = 1e-12
#: Bytes of interpolated states formed in one call of ``interpolate_many`` (dense output).
DENSE_BATCH_BYTES = 1 << 22
_EPS = float(np.finfo(np.float64).eps)
#: A step within this many units of ``|t_target|`` of an output time is stretched onto it.
CLIP_EPS = 4.0 * _EPS


class FlowStatus(enum.Enum):
    """Outcome of an integration; ``.code`` (int, 0 = success) and ``.message`` (str)."""

    SUCCESS = (0, "reached the last t_eval")
    STEP_UNDERFLOW = (-1, "step size fell below the floating-point resolution of t")
    NONFINITE = (-2, "the right-hand side or the state became non-finite (NaN or inf)")
    MAX_STEPS = (-3, "step budget max_steps exhausted")
    BREAKDOWN = (-4, "step control broke down")
    INTERRUPTED = (-5, "interrupted (KeyboardInterrupt)")

    def __init__(self, code, message):
        self.code, self.message = code, message

    @property
    def success(self) -> bool:
        return self is FlowStatus.SUCCESS

    def __str__(self):
        return f"{self.name}: {self.message}"


@register_jitable
def error_norm(e5, e3=0.0, use_e3=False, h=1.0, n=1):
    """The error norm of a step from the sums ``e5``, ``e3`` of its scaled squared error
    estimates (``(d / (atol + rtol max(|y|, |y_new|)))^2``): ``|h| sqrt(e5 / n)``, or
    Hairer's DOP853 norm ``|h| e5 / sqrt((e5 + 0.01 e3) n)`` (accept if < 1)."""
    if n == 0 or (use_e3 and e5 == 0.0 and e3 == 0.0):
        return 0.0
    if not use_e3:
        return abs(h) * math.sqrt(e5 / n)
    return abs(h) * e5 / math.sqrt((e5 + 0.01 * e3) * n)


@register_jitable
def step_factor(err, exponent, after_rejection=False, max_factor=MAX_FACTOR):
    """The factor on ``h`` after an error norm ``err``: ``SAFETY err^exponent`` in
    ``[MIN_FACTOR, max_factor]``, at most 1 right after a rejection; ``exponent = -1 / (q +
    1)`` for an estimator of order q, ``-1`` across a kink."""
    fac = max_factor if err == 0.0 else min(max_factor, max(MIN_FACTOR, SAFETY * err ** exponent))
    return min(1.0, fac) if after_rejection else fac


def sumsq(x, xp=np):
    """``sum x^2`` as a Python float, elementwise (not a threaded BLAS dot product)."""
    return float(xp.sum(x * x))


@register_jitable
def predictive_step(h_next, h_try, err, exponent, h_prev, err_prev):
    """The smaller of ``h_next`` and Gustafsson's predictive step after an accepted ``h_try``,
    ``SAFETY h_try (h_try / h_prev) (err_prev / err^2)^(-exponent)``, at least ``MIN_FACTOR
    h_try`` (Gustafsson 1994; HNW II, IV.8, ``radau5.f``); unchanged if h_prev or err is 0."""
    if h_prev <= 0.0 or err == 0.0:
        return h_next
    h_pred = SAFETY * h_try * (h_try / h_prev) * (err_prev / err / err) ** (-exponent)
    return min(h_next, max(h_pred, MIN_FACTOR * h_try))


@register_jitable
def accept_step(h, h_try, err, exponent, max_factor, rejected, clipped, memory):
    """Next step after an accepted ``h_try`` with error ``err < 1``: ``h_try`` times
    :func:`step_factor` (at most ``max_factor``), at least the planned ``h`` after a step
    shortened onto an output time (``clipped``), then :func:`predictive_step` from ``memory
    = (h_prev, err_prev)``.  Returns ``(h_next, memory)``; a clipped step predicts nothing
    and leaves the memory as it was."""
    h_next = h_try * step_factor(err, exponent, rejected, max_factor)
    if clipped and not rejected:
        h_next = max(h_next, h)
    if clipped:
        return h_next, memory
    h_prev, err_prev = memory
    return (predictive_step(h_next, h_try, err, exponent, h_prev, err_prev),
            (h_try, max(err, PREDICTIVE_MIN_ERR)))


def accept_into(th, h, h_try, err, exponent, max_factor, rejected, clipped):
    """:func:`accept_step` with its memory in ``th[S.H_PREV]``, ``th[S.ERR_PREV]``."""
    h, memory = accept_step(h, h_try, err, exponent, max_factor, rejected, clipped,
                            (th[S.H_PREV], th[S.ERR_PREV]))
    th[S.H_PREV], th[S.ERR_PREV] = memory
    return h


def count_stiff(h_capped, h_free, th, stats, steps, held):
    """Counts a capped step and the stiffness test of :class:`StepControl`'s ``steps``,
    ``held`` in ``th``, ``stats``: True once it fires."""
    if h_capped < h_free:
        stats[S.CAPPED] += 1
    if steps <= 0:
        return False
    if h_capped * held < h_free:
        th[S.N_NONSTIFF] = 0.0
        th[S.N_STIFF] += 1.0
    else:
        th[S.N_NONSTIFF] += 1.0
        if th[S.N_NONSTIFF] == NONSTIFF_RESET:
            th[S.N_STIFF] = 0.0
    return th[S.N_STIFF] >= steps


def count_cheaper(th, cost, h, rho, boundary, stages):
    """The switch-back test after an unclipped accepted step ``h`` that brought the work to
    ``cost``: the explicit pair's step would be ``min(h, boundary / rho)`` at ``stages``
    right-hand sides each.  Counts in ``th[S.N_CHEAPER]`` the steps in a row it was cheaper."""
    h_erk = h if rho <= 0.0 else min(h, boundary / rho)
    cheaper = stages / h_erk < (cost - th[S.COST0]) / h
    th[S.N_CHEAPER] = th[S.N_CHEAPER] + 1.0 if cheaper else 0.0
    th[S.COST0] = cost


def kink_rejection(th, on_low, max_rejections):
    """A step rejected across a switch, counted on the primary pair: after ``max_rejections``
    in a row the loop turns to the fallback pair.  Returns whether it is on the fallback."""
    if on_low:
        return True
    th[S.KINK_REJ] += 1.0
    if th[S.KINK_REJ] < max_rejections:
        return False
    th[S.ACTIVE], th[S.KINK_REJ], th[S.CALM] = 1.0, 0.0, 0.0
    return True


def kink_accepted(th, stats, on_low, crossed, stage_crossed, t_new, calm_max):
    """The counts, sliding time and calm steps after a step accepted at ``t_new`` with
    ``crossed`` switches at its end; back to the primary pair after ``calm_max`` calm steps.
    Returns whether the loop stays on the fallback."""
    if on_low:
        stats[S.FALLBACK_STEPS] += 1
    if crossed > 0:
        stats[S.KINKS] += crossed
        if th[S.CALM] <= calm_max and not np.isnan(th[S.LAST_CROSS]):
            th[S.SLIDING] += t_new - th[S.LAST_CROSS]
        th[S.LAST_CROSS] = t_new
        th[S.CALM] = 0.0
    elif stage_crossed:
        th[S.CALM] = 0.0       # a stage crossed, the end did not: along a kink
    else:
        th[S.CALM] += 1.0
    th[S.KINK_REJ] = 0.0
    if on_low and th[S.CALM] >= calm_max:
        th[S.ACTIVE] = 0.0
        return False
    return on_low


@register_jitable
def stiffness_estimate(num, dd, ref, wsum, h, yy):
    """Hairer's stiffness estimate ``rho = sqrt(num / dd) / h`` (``dopri5.f``): ``num = |K_s -
    K_{s-1}|^2`` (``K_s = f(y_new)``), ``dd = |sum_j w_j K_j|^2`` (``w =
    tab.stiffness_weights``), ``ref = |K_0|^2``, ``wsum = sum_j |w_j|``, ``yy = |y_new|^2``;
    0 when a difference is below ``STIFFNESS_MIN_REL`` of its scale, ``dd`` floored at
    ``STIFFNESS_STATE_ULPS eps |y_new|``."""
    rel2 = STIFFNESS_MIN_REL * STIFFNESS_MIN_REL
    if not (dd > rel2 * wsum * wsum * ref and num > rel2 * ref):
        return 0.0
    res = STIFFNESS_STATE_ULPS * _EPS / h
    rho = math.sqrt(num / max(dd, res * res * yy)) / abs(h)
    return rho if math.isfinite(rho) else 0.0


@register_jitable
def stability_cap(h_next, rho, boundary, safety=None):
    """``h_next`` limited to ``safety * boundary / rho`` (``safety`` by default
    STABILITY_SAFETY); unchanged when ``rho`` is 0 (no estimate) or ``boundary`` is 0."""
    if not (rho > 0.0 and boundary > 0.0):
        return h_next
    return min(h_next, (STABILITY_SAFETY if safety is None else safety) * boundary / rho)


def _rms(x):
    # one dot product of the flat state (numpy or cupy; one scalar comes to the host)
    return math.sqrt(float(x @ x) / x.size) if x.size else 0.0


def select_initial_step(fun, y0, f0, interval, error_order, rtol, atol, xp=np):
    """The first step from ``y0`` with ``f0`` the derivative there (``xp``'s arrays), at most
    ``interval``: Hairer-Norsett-Wanner I, Sec. II.4, as in scipy, at the cost of one
    evaluation ``fun(y, dt)`` (``dt`` after the start); 0 where the problem's scale is beyond
    float64 (the loop then reports a step-size underflow)."""
    scale = atol + xp.abs(y0) * rtol
    d0 = _rms(y0 / scale)
    d1 = _rms(f0 / scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, interval)
    if not h0 > 0.0:    # the flow's time scale is below float64's resolution
        return 0.0
    f1 = fun(y0 + h0 * f0, h0)
    d2 = _rms((f1 - f0) / scale) / h0
    if not math.isfinite(d2):
        return h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (error_order + 1))
    return min(100 * h0, h1, interval)


def dense_batch_rows(n):
    """Interpolated states (rows of n numbers) formed per call of an ``interpolate_many``:
    as many as fit in DENSE_BATCH_BYTES, at least one."""
    return max(1, DENSE_BATCH_BYTES // (8 * max(n, 1)))


class Observer:
    """What the loops call at output times: ``observe(k, y)`` for output ``k``; ``many(k,
    states)`` for several outputs of one step at once (dense output; None: one by one);
    ``tick(t)``, the run's progress, before each step or compiled chunk (None: nothing)."""

    def __init__(self, one, many=None, tick=None):
        self.one, self.many, self.tick = one, many, tick

    def __call__(self, k, y):
        self.one(k, y)


class StopEvent:
    """A stop rule of :func:`integrate`: ``event(y) -> g``, the run stops where ``g`` first
    becomes ``<= 0``; ``rule`` its spec (``(kind, value)``), which a model whose compiled
    loop has the event reads (``Model.compiled_events``), or None."""

    def __init__(self, g, rule=None):
        self.g, self.rule = g, rule

    def __call__(self, y):
        return self.g(y)


def as_observer(observe):
    """``observe`` as an :class:`Observer` (a plain ``observe(k, y)`` has no hooks)."""
    return observe if isinstance(observe, Observer) else Observer(observe)


def observe_step(k, t_eval, t, h_step, t_new, y_new, interpolate, observe,
                 interpolate_many=None):
    """Observe every output time in ``(t, t_new]`` of the accepted step ``t -> t_new`` (every
    loop's output-time driver); returns the next output index.  Outputs before ``t_new`` are
    ``interpolate(theta)``, the state at ``t + theta h_step``, or ``interpolate_many(thetas)``
    where given (``interpolate`` then unused), up to :func:`dense_batch_rows` rows at once,
    observed by ``observe.many(k, states)`` (an :class:`Observer`'s); one at ``t_new`` is
    ``y_new``."""
    inner = k
    if interpolate_many is not None:
        end = k + int(np.searchsorted(t_eval[k:], t_new, side="right"))  # t_eval[end-1] <= t_new
        inner = end - 1 if end > k and float(t_eval[end - 1]) == t_new else end
    if inner > k:
        rows = dense_batch_rows(y_new.size)
        many = observe.many
        while k < inner:
            stop = min(inner, k + rows)
            states = interpolate_many((t_eval[k:stop] - t) / h_step)[:stop - k]
            if many is not None:
                many(k, states)
            else:
                for i in range(stop - k):
                    observe(k + i, states[i])
            k = stop
    while k < t_eval.size and t_eval[k] <= t_new:
        tk = float(t_eval[k])
        observe(k, y_new if tk == t_new else interpolate((tk - t) / h_step))
        k += 1
    return k


def observe_until(k, t_eval, t, y, observe):
    """Observe ``y`` at the output times ``t_eval[k:] <= t``; returns the next output index."""
    while k < t_eval.size and t_eval[k] <= t:
        observe(k, y)
        k += 1
    return k


class Stepper:
    """One attempted step of an embedded method, and its step-size rule: subclasses set
    ``tableau`` and implement :meth:`attempt`; :meth:`accept`, ``stiffness`` and
    ``interpolate`` are optional hooks of :func:`integrate`.

    Parameters
    ----------
    rhs : callable ``rhs(t, y) -> dy``
        Flat arrays (n,); the returned array is copied, so it may be a buffer.
    n : int
    rtol, atol : float
    xp : module (numpy or CuPy)
    fun : callable ``fun(y, out) -> out``, optional
        An autonomous right-hand side into ``out`` (n,), used instead of ``rhs`` where given.
    """

    tableau = None
    fun = None
    MAX_FACTOR = MAX_FACTOR
    #: ``stiffness(h, y_new) -> rho`` and ``interpolate(theta, y, y_new, h) -> state`` of the
    #: step just accepted (before :meth:`accept`), or None.
    stiffness = None
    interpolate = None
    #: The spectral-radius estimate and the work so far (right-hand sides) of a stepper
    #: that keeps them (Rosenbrock-W, for ``integrate``'s ``switch_back``), else None.
    rho = None
    cost = None

    def __init__(self, rhs, n, rtol, atol, xp=np, fun=None):
        self.rhs, self.fun, self.xp = rhs, fun, xp
        self.n, self.rtol, self.atol = int(n), float(rtol), float(atol)

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

    def _eval(self, t, y, out):
        if self.fun is not None:
            self.fun(y, out)
        else:
            out[...] = self.rhs(t, y)
        return out

    def evaluate(self, t, y):
        """``f(t, y)`` as an array of its own (the first evaluation of a run)."""
        return self._eval(t, y, self.xp.empty_like(y))

    def attempt(self, t, y, f, h):
        """``(y_new, f_new, err)``: the step of size ``h`` from ``(t, y)`` with ``f = rhs(t, y)``,
        ``f_new = rhs(t + h, y_new)`` and the scaled error norm ``err`` (accept if < 1)."""
        raise NotImplementedError

    def accept(self, f_new):
        """The step just attempted is accepted: ``f`` at its end for the next attempt."""
        return f_new

    def factor(self, err, after_rejection=False):
        """The factor on ``h`` after an error norm ``err`` (:func:`step_factor`)."""
        return step_factor(err, self.error_exponent, after_rejection)

    def initial_step(self, t0, y0, f0, h_max):
        """Hairer-Norsett-Wanner II.4 (:func:`select_initial_step`); costs one evaluation."""
        if y0.size == 0:
            return h_max
        # Stepper.evaluate: a new array (a subclass may evaluate into its stage storage)
        return select_initial_step(lambda v, dt: Stepper.evaluate(self, t0 + dt, v), y0, f0,
                                   h_max, self.tableau.error_order, self.rtol, self.atol,
                                   self.xp)


class StepperOptions(NamedTuple):
    """Settings of :func:`integrate`: tolerances, the budget of attempted steps, the first
    step (None: chosen) and the fallback stepper's relative tolerance at kinks (>= rtol) for
    its first :data:`KINK_EARLY_STEPS` accepted steps and after them (None: the same)."""

    rtol: float = 1e-8
    atol: float = 1e-12
    max_steps: int = 1_000_000
    first_step: Optional[float] = None
    kink_rtol: float = 1e-6
    kink_rtol_late: Optional[float] = None


def kink_tolerances(options):
    """``(early, late)``: the fallback's relative tolerances at kinks before and after
    :data:`KINK_EARLY_STEPS` of its accepted steps, each at least ``options.rtol``."""
    rtol, early = float(options.rtol), float(options.kink_rtol)
    late = options.kink_rtol_late
    return max(early, rtol), max(early if late is None else float(late), rtol)


@dataclass(frozen=True)
class Result:
    """What :func:`integrate` (and every compiled runner) hands back.

    Attributes
    ----------
    n_done : int
        Output times reached (``observe`` was called for ``k < n_done``).
    t_last, y_last : float, ndarray (n,)
        The last accepted state and its time (the stopped state after a stop).
    nfev, nsteps, nrejected, status, message : int, int, int, FlowStatus, str
    t_stop : float or None
        Where the stop rule fired.
    kinks, sliding_time, fallback_steps : int, float, int
        Switches crossed by accepted steps, the time between crossings at most
        ``CALM_STEPS`` calm accepted steps apart, the accepted steps of the fallback.
    h_next, rho, ncapped : float, float, int
        The step planned next, the remembered stiffness estimate (0 without the stability
        cap), the accepted steps after which the cap shortened the next step.
    stiff, nonstiff, nonfinite : bool
        The stiffness test (``stiff_steps``) or the switch-back test (``switch_back``)
        ended the run at ``t_last``; the last rejected trial steps overflowed.
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
    h_next: float = 0.0
    rho: float = 0.0
    ncapped: int = 0
    stiff: bool = False
    nonfinite: bool = False
    nonstiff: bool = False


def loop_state(t, h, nfev=0):
    """``(th, stats)``, the state of a loop (slots named in ``_loop_state``) starting at ``t``
    with the step ``h`` after ``nfev`` evaluations."""
    th, stats = np.zeros(S.TH_SIZE), np.zeros(S.STATS_SIZE, dtype=np.int64)
    th[S.T], th[S.H], stats[S.NFEV] = t, h, nfev
    th[S.LAST_CROSS] = th[S.T_STOP] = np.nan
    return th, stats


_STATUS_BY_CODE = {st.code: st for st in FlowStatus}


def loop_result(code, k, y, th, stats, low, t_eval, observe):
    """The Result of a loop (every loop's) from its return code, ``th`` and ``stats``
    (:data:`STIFF`, :data:`NONSTIFF`: a success with ``stiff``, ``nonstiff``; :data:`STOPPED`:
    one with ``t_stop``, the stopped state observed at every later output); its message says
    where a failed run stopped, whether its rejected trial steps overflowed, and the kinks
    crossed, the time spent sliding and the steps taken by the fallback ``low``."""
    stiff, nonstiff, stopped = code == STIFF, code == NONSTIFF, code == STOPPED
    if stopped:
        k = observe_until(k, t_eval, math.inf, y, observe)
    status = FlowStatus.SUCCESS if stiff or nonstiff or stopped else _STATUS_BY_CODE[code]
    t = float(th[S.T])
    t_stop = float(th[S.T_STOP]) if stopped else None
    kinks, fallback_steps = int(stats[S.KINKS]), int(stats[S.FALLBACK_STEPS])
    sliding = float(th[S.SLIDING]) if kinks else 0.0
    msg = status.message
    if not status.success:
        msg = f"{msg} at t = {t:.6g}"
        if stats[S.NONFINITE_TRIALS]:
            msg += "; the rejected trial steps overflowed (non-finite stages)"
    if stopped:
        msg += f"; stopped at t = {t_stop:.6g}"
    if kinks:
        msg += (f"; {kinks} kink crossings, {sliding:.3g} time units sliding, "
                f"{fallback_steps} steps by {low.name if low else '-'}")
    return Result(n_done=k, t_last=t, y_last=y, nfev=int(stats[S.NFEV]),
                  nsteps=int(stats[S.ACCEPTED]), nrejected=int(stats[S.REJECTED]),
                  status=status, message=msg, t_stop=t_stop,
                  kinks=kinks, sliding_time=sliding, fallback_steps=fallback_steps,
                  h_next=float(th[S.H]), rho=float(th[S.RHO]), ncapped=int(stats[S.CAPPED]),
                  stiff=stiff, nonfinite=bool(stats[S.NONFINITE_TRIALS]), nonstiff=nonstiff)


@register_jitable
def kink_factor(err, after_rejection):
    """Step factor after a step across a kink: its error is ``O(h |jump|)``, first order in
    ``h`` whatever the method's order, so the factor is ``SAFETY / err``
    (:func:`step_factor` with exponent -1)."""
    return step_factor(err, -1.0, after_rejection)


@register_jitable
def illinois_theta(lo, hi, glo, ghi):
    """The regula falsi point of the bracket ``[lo, hi]`` (values ``glo > 0 >= ghi``), its
    midpoint where the secant leaves it or is flat."""
    if glo == ghi:
        return 0.5 * (lo + hi)
    th = hi - ghi * (hi - lo) / (ghi - glo)
    return th if lo < th < hi else 0.5 * (lo + hi)


@register_jitable
def illinois_bracket(lo, hi, glo, ghi, side, th, g):
    """``(lo, hi, glo, ghi, side)`` after the value ``g`` at ``th``: Illinois halves the kept
    end's value when the same end moves twice in a row (``side``: -1 hi, 1 lo)."""
    if g <= 0:
        return lo, th, (glo * 0.5 if side == -1 else glo), g, -1
    return th, hi, g, (ghi * 0.5 if side == 1 else ghi), 1


def _locate_stop(stepper, t, y, f, h, g0, stop, y1):
    """Illinois regula falsi on ``theta`` in [0, 1] for ``stop(y(t + theta h)) = 0`` along the
    stepper's own step to ``y1``: ``(theta, y_theta, nfev)`` with ``stop(y_theta) <= 0``."""
    lo, hi, glo, ghi, side = 0.0, 1.0, g0, -1.0, 0
    y_hi, nfev = y1, 0
    for _ in range(STOP_ITERATIONS):
        if hi - lo <= STOP_XTOL:
            break
        th = illinois_theta(lo, hi, glo, ghi)
        y_th, _, _ = stepper.attempt(t, y, f, th * h)
        nfev += stepper.n_evals
        g = stop(y_th)
        if g <= 0:
            y_hi = y_th
        lo, hi, glo, ghi, side = illinois_bracket(lo, hi, glo, ghi, side, th, g)
    return hi, y_hi, nfev


@dataclass(frozen=True)
class StepControl:
    """How :func:`integrate` chooses its steps beyond the tolerances of
    :class:`StepperOptions` (diffrax's ``stepsize_controller``).

    Attributes
    ----------
    predictive : bool
        Keep the planned step across a step shortened onto an output time, and hold
        steps to Gustafsson's predictive step (:func:`accept_step`).
    cap_safety : float
        > 0: the stability cap ``cap_safety * boundary / rho`` from the stepper's
        ``stiffness`` estimate (remembered with decay ``STIFFNESS_MEMORY``).
    stiff_steps, stiff_held : int, float
        > 0 (with the cap): return with ``Result.stiff`` once the cap has held this many
        accepted steps in a row below ``1 / stiff_held`` of the step accuracy allowed.
    dense : bool
        Only the last output time ends a step; the others are the stepper's
        ``interpolate`` (where it has one and there is no kink fallback).
    fallback : type, optional
        The low-order stepper for kinks (used only with ``integrate``'s ``switches``).
    switch_back, switch_steps : Tableau, int, optional
        With a stepper that keeps its spectral radius ``rho`` and work ``cost`` (Rosenbrock-W):
        return with ``Result.nonstiff`` once, for ``switch_steps`` unclipped accepted steps
        in a row, this pair would have cost less per unit time (docs/simulator.md).
    """

    predictive: bool = False
    cap_safety: float = 0.0
    stiff_steps: int = 0
    stiff_held: float = 1.0
    dense: bool = False
    fallback: object = None
    switch_back: object = None
    switch_steps: int = 0


class Controller:
    """The step control of :func:`integrate` (diffrax's ``adapt_step_size``): which stepper
    takes the next step (``active``: the ``main`` one, or the ``low`` fallback near kinks),
    the step after each attempt, the stability cap and the tests of :class:`StepControl`
    that end a stretch (``ends``).  Its state is the compiled loop's, ``th`` and ``stats``
    (slots named in ``_loop_state``), kept by the same rules (:func:`kink_accepted`, ...)."""

    def __init__(self, control, main, low, late=None):
        self.control, self.main, self.low, self.active = control, main, low, main
        self.late = late            # the fallback's rtol after KINK_EARLY_STEPS (None: kept)
        self.capping = control.cap_safety > 0.0 and main.stiffness is not None
        self.boundary = main.tableau.stability_boundary if self.capping else 0.0
        self.th, self.stats = loop_state(0.0, 0.0)
        self.rejected, self.ends = False, None
        back = control.switch_back
        if back is not None:
            if main.rho is None or main.cost is None:
                raise ValueError("switch_back: the stepper keeps no rho and cost estimate")
            self.erk_stages = SWITCH_BACK_MARGIN * back.n_stages
            self.erk_boundary = STABILITY_SAFETY * back.stability_boundary
            self.th[S.COST0] = main.cost

    def reject(self, step, err, crossed):
        """The step after ``step`` was rejected with error norm ``err`` (``crossed``: a
        switch changed on the way): the fallback after ``KINK_REJECTIONS`` of those."""
        on_low = self.active is self.low
        if crossed and self.low is not None:
            on_low = kink_rejection(self.th, on_low, KINK_REJECTIONS)
            self.active = self.low if on_low else self.main
        self.rejected = True
        return step * (kink_factor(err, True) if crossed and on_low
                       else self.active.factor(err, True))

    def accept(self, h, step, err, clipped, crossed=0, along=False, t_new=0.0, y_new=None):
        """The step after an accepted ``step`` (``h`` the one planned; ``clipped``: shortened
        onto an output time) from ``t_new``, ``y_new``; ``ends`` set where a test of
        :class:`StepControl` ends the stretch there."""
        took, main, c, th, stats = self.active, self.main, self.control, self.th, self.stats
        on_low = kink_accepted(th, stats, took is self.low, crossed, along, t_new, CALM_STEPS)
        if took is self.low and stats[S.FALLBACK_STEPS] == KINK_EARLY_STEPS and self.late:
            took.rtol = self.late
        self.active = active = self.low if on_low else main
        rejected, self.rejected = self.rejected, False
        if on_low:
            # near a kink: a crossing step's error is first order in h, and growth is
            # held to KINK_GROWTH (a step grown past the next crossing is rejected)
            fac = kink_factor(err, rejected) if crossed else active.factor(err, rejected)
            h = step * min(fac, KINK_GROWTH)
        elif c.predictive:
            h = float(accept_into(th, h, step, err, active.error_exponent, active.MAX_FACTOR,
                                  rejected, clipped))
        else:
            h = step * active.factor(err, rejected)
        h_free = h
        if self.capping and took is main:
            th[S.RHO] = max(main.stiffness(step, y_new), STIFFNESS_MEMORY * th[S.RHO])
            h = float(stability_cap(h, th[S.RHO], self.boundary, c.cap_safety))
        stiff = count_stiff(h, h_free, th, stats, c.stiff_steps, c.stiff_held)
        if c.switch_back is not None and took is main and not clipped:
            count_cheaper(th, main.cost, step, main.rho, self.erk_boundary, self.erk_stages)
        self.ends = ("stiff" if stiff else "nonstiff" if 0 < c.switch_steps <= th[S.N_CHEAPER]
                     else None)
        return h


def integrate(rhs, y0, t_eval, primary, options, observe, *, control=StepControl(),
              switches=None, stop=None, t0=0.0, xp=np, k0=0):
    """Integrate ``dy/dt = rhs(t, y)`` from ``y0`` at ``t0`` onto every time of ``t_eval``.

    Parameters
    ----------
    rhs : callable ``rhs(t, y) -> dy``
    y0 : ndarray (n,)
        The state at ``t0`` (copied).
    t_eval : ndarray (T,)
        Strictly increasing output times ``>= t0``; each ends a step (but see
        ``StepControl.dense``).
    primary : callable ``primary(rhs, n, rtol, atol, xp) -> Stepper``
        A :class:`Stepper` subclass, or a factory of one.
    options : StepperOptions
    observe : callable ``observe(k, y)``
        Called once for each reached output time, in order; its attribute ``tick``, where
        it has one (the run's progress hook), is called with ``t`` before every step.
    control : StepControl
    switches : callable ``() -> ndarray of bool``, optional
        The sign pattern of the switching functions at the latest ``rhs`` call.
    stop : callable ``stop(y) -> float``, optional
        Stop rule: the run stops where it first becomes ``<= 0`` (located inside the
        step); every later output time gets the stopped state.
    t0, xp : float, module
    k0 : int
        Outputs ``k < k0`` were observed by the caller (a run resumed inside
        ``t_eval``); observation starts at ``k0``.

    Returns
    -------
    Result
        Failures (step underflow, a non-finite state, the budget spent) are its ``status``.
    """
    observe = as_observer(observe)
    n = y0.size
    # every evaluation compares the switch pattern with the step's start: a stage may
    # cross a switching surface that the step's end does not (sliding)
    stage_cross = False
    kinks = switches is not None and control.fallback is not None
    if kinks:
        user_rhs = rhs

        def rhs(t, y):
            nonlocal stage_cross
            out = user_rhs(t, y)
            if not stage_cross and pat is not None:
                now = switches()
                stage_cross = now is not None and bool(xp.any(now != pat))
            return out
    main = primary(rhs, n, options.rtol, options.atol, xp)
    early, late = kink_tolerances(options)
    low = control.fallback(rhs, n, early, options.atol, xp) if kinks else None
    pat = None
    T = t_eval.size
    t = float(t0)
    y = xp.array(y0, dtype=xp.float64, copy=True)
    f = main.evaluate(t, y)
    pat = switches() if switches is not None else None
    if pat is not None:
        pat = pat.copy()
    h = 0.0
    nonfinite = False
    ctl = Controller(control, main, low, late)
    th, stats = ctl.th, ctl.stats
    stats[S.NFEV] = 1       # f(y0)

    def done(code):
        th[S.T], th[S.H], stats[S.NONFINITE_TRIALS] = t, h, nonfinite
        return loop_result(code, k, y, th, stats, low, t_eval, observe)

    # the outputs at the start (observed even where f is not finite: they are the state)
    k = observe_until(k0, t_eval, t, y, observe)
    if not bool(xp.all(xp.isfinite(f))):
        return done(FlowStatus.NONFINITE.code)
    if stop is not None:
        g = stop(y)
        if g <= 0:
            th[S.T_STOP] = t
            return done(STOPPED)
    if k == T:
        return done(0)
    if options.first_step is not None:
        h = min(options.first_step, t_eval[-1] - t)
    else:
        h = main.initial_step(t, y, f, t_eval[-1] - t)
        stats[S.NFEV] += 1
    # (not with the kink fallback: a step of the fallback would have to interpolate too)
    dense = bool(control.dense) and low is None and main.interpolate is not None
    tick = observe.tick
    while k < T:
        if tick is not None:
            tick(t)
        # with dense output only the last output time ends a step
        target = float(t_eval[-1] if dense else t_eval[k])
        if stats[S.ACCEPTED] + stats[S.REJECTED] >= options.max_steps:
            return done(FlowStatus.MAX_STEPS.code)
        # MIN_STEP_ULPS units in the last place of t (a NaN step fails too)
        if not h >= MIN_STEP_ULPS * (np.nextafter(t, np.inf) - t):
            return done(FlowStatus.STEP_UNDERFLOW.code)
        clipped = h >= target - t or t + h >= target - CLIP_EPS * abs(target)
        t_new = target if clipped else t + h
        step = t_new - t
        stage_cross = False
        active = ctl.active
        y_new, f_new, err = active.attempt(t, y, f, step)
        stats[S.NFEV] += active.n_evals
        nonfinite = not math.isfinite(err)
        if nonfinite:       # the stages overflowed: MIN_FACTOR, as after any infinite error
            stats[S.REJECTED] += 1
            h = ctl.reject(step, math.inf, 0)
            continue
        crossed = 0
        if pat is not None:
            pat_new = switches()
            crossed = int(xp.count_nonzero(pat_new != pat))
        if not err < 1.0:
            stats[S.REJECTED] += 1
            h = ctl.reject(step, err, crossed or stage_cross)
            continue
        stats[S.ACCEPTED] += 1
        if stop is not None:
            g_new = stop(y_new)
            if g_new <= 0:
                theta, y, extra = _locate_stop(active, t, y, f, step, g, stop, y_new)
                stats[S.NFEV] += extra
                t = th[S.T_STOP] = t + theta * step
                return done(STOPPED)
            g = g_new
        if crossed:
            pat = pat_new.copy()
        h = ctl.accept(h, step, err, clipped, crossed, stage_cross, t_new, y_new)
        if dense:
            # the outputs inside the step, while y and the stages are still the step's
            k = observe_step(k, t_eval, t, step, t_new, y_new,
                             lambda theta: main.interpolate(theta, y, y_new, step), observe)
        f = active.accept(f_new)
        t, y = t_new, y_new
        k = observe_until(k, t_eval, t, y, observe)
        if ctl.ends is not None and k < T:
            return done(STIFF if ctl.ends == "stiff" else NONSTIFF)
    return done(0)
