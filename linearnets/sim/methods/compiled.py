"""The compiled loops' runners: Python only at output times (numba backend).

``methods.base.integrate`` is the one adaptive loop of the numpy and CuPy backends; on
numba the whole stepping loop is compiled (``methods/_erk_kernels``,
``methods/_rosw_kernels`` and the linear model's stage stores), and this module drives
such a loop from Python: it evaluates the first derivative, chooses the initial step,
calls the compiled loop once per output interval (in chunks, so that Ctrl-C lands within
a fraction of a second), forms the outputs inside a step with dense output, and returns
the same :class:`~linearnets.sim.methods.base.Result` as ``integrate``.  There is one
runner per algorithm family, with ``integrate``'s calling convention:

* :func:`erk` -- embedded explicit Runge-Kutta pairs (RK45, DOP853, BS32, SSPRK104 as a
  Butcher tableau), with the predictive step, the stability cap, dense output, the
  stiffness test of ``method="auto"``, and for the models that have them the low-order
  pair at kinks and a stop event (:func:`erk_batch`: the same for a batch of members);
* :func:`ssp` -- SSPRK104 in Ketcheson's two-register low-storage form (the same loop
  contract, no stiffness test);
* :func:`rosw` -- the Rosenbrock-W method ROS34PW2 (Krylov solves with the model's
  Jacobian-vector product), with the test that hands back to an explicit pair.

Nothing here knows networks.  The first argument, ``ops``, is a model's compiled
operations for one loop (the linear network's are built in ``models/_linear_ops.py``, the
MLP's by ``MLPNumba.compiled_ops`` and ``batch_ops``): an object with

``first(y) -> f``
    ``f(y)`` (n,) into the loop's own storage (the first stage slot), returned; a model
    with kinks also keeps the switch pattern of ``y`` here;
``stop_value(y) -> g or None``
    the model's stop function at ``y`` right after ``first`` (None: no stop event);
``rhs(v, out) -> out``
    ``f(v)`` into ``out`` without touching the loop's storage (the initial step);
``prepare(tab, low, options, predictive, cap_safety, stiff_steps)``
    the loop's arguments for the pair ``tab`` (and the fallback ``low`` at kinks);
``advance(y, y_new, th, t_target, t_out, stats, budget) -> code``
    one call of the model's cached entry point into the compiled loop (the loop's
    contract: ``methods/_erk_kernels.make_erk_advance``);
``interpolate(theta, y, y_new, h) -> state`` and ``interpolate_many(thetas, y, y_new, h,
batch) -> states``
    the continuous extension of the step just held (:data:`PENDING`), one output or
    many (rows);
``fsal()``
    the last stage's derivative becomes the first (completing a held step);
``detects_stiffness``
    whether the loop has the stiffness test (its ``stiff`` constants then carry
    ``stiff_steps``).

:class:`DenseStages` is these operations for any model with a compiled ``rhs`` and a
loop of ``make_erk_advance``; :class:`BatchStages` their batch axis (:func:`erk_batch`:
B members of one model, each with its own step control, driven from several threads).

The Rosenbrock-W runner's ``ops`` has ``rosw_advance`` (the model's entry point into
``methods/_rosw_kernels.make_rosw_advance``), ``rhs(y, out, keep=True)``, ``metric`` and
the data tuples ``rhs_args``, ``scratch_args``, ``jvp_args`` (see :func:`rosw`).
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .base import (CALM_STEPS, KINK_GROWTH, KINK_REJECTIONS, MAX_FACTOR, MIN_FACTOR,
                   MIN_STEP_ULPS, NO_PREVIOUS_STEP, NONSTIFF_RESET, PREDICTIVE_MIN_ERR, SAFETY,
                   STABILITY_SAFETY, STIFFNESS_MEMORY, STIFFNESS_MIN_REL, STIFFNESS_STATE_ULPS,
                   STOP_ITERATIONS, STOP_XTOL, SWITCH_BACK_MARGIN, FlowStatus, Result,
                   dense_batch_rows, observe_step, select_initial_step)

__all__ = ["erk", "ssp", "rosw", "control", "stiffness_args", "PENDING", "STIFF", "NONSTIFF",
           "INTERRUPT_STEPS", "INTERRUPT_WORK", "MIN_CHUNK_STEPS", "ROSW_CHUNK_EVALS",
           "JVP_COST", "chunk_budget", "advance_in_chunks", "dense_target", "interpolates",
           "complete_pending", "stiff_fired", "DenseStages", "STOPPED",
           "tableau_args", "loop_control", "BatchStages", "erk_batch", "BATCH_THREADS",
           "batch_threads"]

#: Work of one call of a compiled stepping loop: at most INTERRUPT_STEPS attempted steps
#: and at most INTERRUPT_WORK state entries times stages (``n s`` a step), at least
#: MIN_CHUNK_STEPS steps.  The loops return to Python that often and resume where they
#: stopped (:func:`advance_in_chunks`), so that a KeyboardInterrupt (Ctrl-C), which Python
#: delivers only between its own bytecodes, lands within a fraction of a second (measured
#: on a loaded 2-core machine: 0.1-0.5 s, small and 300-wide networks) rather than at the
#: next output time; a return costs microseconds against milliseconds of stepping.
INTERRUPT_STEPS = 1000
INTERRUPT_WORK = 1 << 23
MIN_CHUNK_STEPS = 2
#: Evaluations counted per Rosenbrock step when its compiled loop is run in chunks:
#: four stages and a few Krylov products.
ROSW_CHUNK_EVALS = 16
#: Right-hand sides counted for one Jacobian-vector product (as ``methods.rosw``).
JVP_COST = 2

#: Return code of an explicit loop holding an accepted step across an output time
#: (dense output): its stages are kept for the runner to interpolate
#: (``_erk_kernels.PENDING``).
PENDING = 1
#: Return code of an explicit loop whose stiffness test fired (``_erk_kernels.STIFF``).
STIFF = 2
#: Return code of the Rosenbrock-W loop whose hand-back test fired
#: (``_rosw_kernels.NONSTIFF``).
NONSTIFF = 3
#: Return code of an explicit loop whose stop event fired (``_erk_kernels.STOPPED``).
STOPPED = 4
#: Sizes of the explicit loops' state ``th`` and counters ``stats``, and the entries of
#: ``th`` past the linear network's nine (``_erk_kernels.make_erk_advance``).
TH_SIZE, STATS_SIZE = 16, 7
TH_LAST_CROSS, TH_SLIDING, TH_T_STOP, TH_G = 12, 13, 14, 15

#: Threads that drive the members of a batch (:func:`erk_batch`); None: this machine's cores.
BATCH_THREADS = None

_EPS = float(np.finfo(np.float64).eps)
_STATUS_BY_CODE = {st.code: st for st in FlowStatus}


# --------------------------------------------------------------------------------------------
# the pieces every runner shares
# --------------------------------------------------------------------------------------------
def chunk_budget(attempted, max_steps, n, s):
    """The step budget of one compiled call after ``attempted`` steps (accepted plus
    rejected) of a run with budget ``max_steps``, state size ``n`` and ``s`` evaluations a
    step: at most :data:`INTERRUPT_STEPS` steps and :data:`INTERRUPT_WORK` entries times
    stages more (at least :data:`MIN_CHUNK_STEPS`), never past ``max_steps``."""
    chunk = max(MIN_CHUNK_STEPS, min(INTERRUPT_STEPS, INTERRUPT_WORK // max(1, int(n) * int(s))))
    return min(int(max_steps), int(attempted) + chunk)


def advance_in_chunks(advance, counts, max_steps, n, s):
    """Run a compiled stepping loop in chunks: ``advance(budget)`` calls it with a step
    budget (it returns ``FlowStatus.MAX_STEPS.code`` once ``counts[1] + counts[2]``, its
    accepted plus rejected steps, reach ``budget``, with its state in place to resume) and
    is called again until it returns anything else or the run's own ``max_steps`` is spent.
    Between calls Python runs, and a pending KeyboardInterrupt is raised there."""
    exhausted = FlowStatus.MAX_STEPS.code
    while True:
        budget = chunk_budget(counts[1] + counts[2], max_steps, n, s)
        code = advance(budget)
        if code != exhausted or budget >= max_steps:
            return code


def interpolates(dense, tab):
    """Whether outputs are interpolated: dense output asked for, and ``tab`` has a
    continuous extension."""
    return bool(dense) and tab.dense_P is not None


def dense_target(t_eval, k, dense, tab):
    """``(t_target, t_out)`` of an explicit loop: without dense output every output time
    ends a step (``t_out`` infinite); with it only the last does, and the loop returns
    :data:`PENDING` after the step that reaches ``t_out = t_eval[k]``."""
    if interpolates(dense, tab):
        return float(t_eval[-1]), float(t_eval[k])
    return float(t_eval[k]), math.inf


def complete_pending(k, t_eval, th, y, y_new, interpolate, observe, fsal,
                     interpolate_many=None):
    """After a compiled loop returned :data:`PENDING`: observe the outputs inside the held
    step (``methods.base.observe_step``, ``interpolate(theta)``,
    ``interpolate_many(thetas)``), then complete the step as the loop would have -- ``y``
    takes ``y_new``, ``fsal()`` moves ``f(y_new)`` into the first stage slot, the time
    becomes ``th[6]``.  Returns the next output index."""
    k = observe_step(k, t_eval, float(th[0]), float(th[5]), float(th[6]), y_new, interpolate,
                     observe, interpolate_many)
    y[:] = y_new
    fsal()
    th[0] = th[6]
    return k


def stiff_fired(stiff_steps, th):
    """Whether the stiffness test of an explicit loop (``th[7]``, ``_erk_kernels.count_stiff``)
    has reached ``stiff_steps`` (a loop returning 0 on an output time leaves the count for
    its runner to read)."""
    return stiff_steps > 0 and th[7] >= stiff_steps


def stiffness_args(tab, stiff_steps=0, cap_safety=None, stiff_held=1.0):
    """``(wd, stiff)`` for the compiled explicit loops: the tableau's stiffness weights and
    ``[boundary, STABILITY_SAFETY, STIFFNESS_MEMORY, STIFFNESS_MIN_REL, sum |wd|,
    STIFFNESS_STATE_ULPS eps, NONSTIFF_RESET, stiff_steps, stiff_held]`` (``stiff_steps`` 0:
    no stiffness test; it counts the steps the cap held below ``1 / stiff_held`` of the
    accuracy step), the constants read from this module (a study may set them here);
    ``cap_safety`` 0 switches the cap off (boundary 0), another value replaces
    ``STABILITY_SAFETY``.  A tableau whose last stage is not at ``t + h`` has no estimate:
    no cap, as ``ExplicitRK``."""
    has = tab.stability_boundary > 0.0 and tab.c[-1] == 1.0
    wd = np.ascontiguousarray(tab.stiffness_weights if has else np.zeros(tab.n_stages),
                              dtype=np.float64)
    safety = STABILITY_SAFETY if cap_safety is None else float(cap_safety)
    boundary = tab.stability_boundary if safety > 0.0 and has else 0.0
    stiff = np.array([boundary, safety, STIFFNESS_MEMORY,
                      STIFFNESS_MIN_REL, float(np.abs(wd).sum()), STIFFNESS_STATE_ULPS * _EPS,
                      NONSTIFF_RESET, stiff_steps, stiff_held], dtype=np.float64)
    return wd, stiff


def control(tab, options, stiff_steps=0, cap_safety=None, stiff_held=1.0):
    """The control tuple the linear network's factored-stage loops take after their tableau:
    ``(exponent, rtol, atol, SAFETY, MIN_FACTOR, MAX_FACTOR, PREDICTIVE_MIN_ERR,
    MIN_STEP_ULPS, wd, stiff)`` (:func:`stiffness_args`)."""
    wd, stiff = stiffness_args(tab, stiff_steps, cap_safety, stiff_held)
    return (-1.0 / (tab.error_order + 1), float(options.rtol), float(options.atol), SAFETY,
            MIN_FACTOR, MAX_FACTOR, PREDICTIVE_MIN_ERR, MIN_STEP_ULPS, wd, stiff)


def _message(status, t, nonfinite):
    """``integrate``'s message of a run that ended with ``status`` at ``t``."""
    if status.success:
        return status.message
    msg = f"{status.message} at t = {t:.6g}"
    if nonfinite:
        msg += "; the rejected trial steps overflowed (non-finite stages)"
    return msg


def _early(k, t, y, nfev, status):
    return Result(n_done=k, t_last=t, y_last=y, nfev=nfev, nsteps=0, nrejected=0,
                  status=status, message=_message(status, t, False))


def _start(ops, y, t_eval, t0, order, options, observe):
    """The start of a run at ``t0``: ``f(y)`` (``ops.first``), the outputs at ``t0``, the
    first step.  Returns ``(early, k, h, nfev)``: ``early`` is the finished Result when the
    run ends here (a non-finite derivative, or no output after ``t0``)."""
    t = float(t0)
    with np.errstate(all="ignore"):
        f0 = ops.first(y)
    nfev = 1
    k = 0
    T = t_eval.size
    while k < T and t_eval[k] <= t:
        observe(k, y)
        k += 1
    if not np.all(np.isfinite(f0)):
        return _early(k, t, y, nfev, FlowStatus.NONFINITE), k, 0.0, nfev
    if k == T:
        return _early(k, t, y, nfev, FlowStatus.SUCCESS), k, 0.0, nfev
    if options.first_step is not None:
        return None, k, float(options.first_step), nfev
    with np.errstate(all="ignore"):
        h = select_initial_step(lambda v: ops.rhs(v, np.empty_like(v)), t, y, f0,
                                float(t_eval[-1]), order, float(options.rtol),
                                float(options.atol))
    return None, k, h, nfev + 1


def _result(code, k, y, th, stats, low=None):
    """The Result of an explicit loop from its return code, ``th`` and ``stats``
    (``_erk_kernels.make_erk_advance``); :data:`STIFF` is a successful result with
    ``stiff=True`` and the proposed step ``th[1]``, :data:`STOPPED` one with ``t_stop``."""
    stiff = code == STIFF
    stopped = code == STOPPED
    status = FlowStatus.SUCCESS if stiff or stopped else _STATUS_BY_CODE[code]
    t = float(th[0])
    nonfinite = bool(stats[3])
    msg = _message(status, t, nonfinite and not status.success)
    t_stop = float(th[TH_T_STOP]) if stopped else None
    if stopped:
        msg += f"; stopped at t = {t_stop:.6g}"
    kinks = int(stats[5]) if stats.size > 5 else 0
    if kinks:
        msg += (f"; {kinks} kink crossings, {float(th[TH_SLIDING]):.3g} time units sliding, "
                f"{int(stats[6])} steps by {low.name if low is not None else '-'}")
    return Result(n_done=k, t_last=t, y_last=y, nfev=int(stats[0]), nsteps=int(stats[1]),
                  nrejected=int(stats[2]), status=status, message=msg, t_stop=t_stop,
                  kinks=kinks, sliding_time=float(th[TH_SLIDING]) if kinks else 0.0,
                  fallback_steps=int(stats[6]) if stats.size > 6 else 0, h_next=float(th[1]),
                  rho=float(th[2]), ncapped=int(stats[4]), stiff=stiff, nonfinite=nonfinite)


# --------------------------------------------------------------------------------------------
# explicit runners
# --------------------------------------------------------------------------------------------
def _tableau(stepper):
    """The tableau of a stepper class (``methods.erk.DOP853``) or a tableau itself."""
    tab = getattr(stepper, "tableau", stepper)
    if tab is None or not hasattr(tab, "n_stages"):
        raise ValueError(f"no Butcher tableau for {stepper!r}")
    return tab


def _explicit(ops, y0, t_eval, primary, options, observe, *, fallback, t0, dense, stiff_steps,
              predictive, cap_safety, stiff_held=1.0):
    tab = _tableau(primary)
    low = _tableau(fallback) if fallback is not None else None
    t_eval = np.asarray(t_eval, dtype=np.float64)
    t0 = float(t_eval[0]) if t0 is None else float(t0)
    y = np.array(y0, dtype=np.float64, copy=True)
    n, s = y.size, tab.n_stages
    T = t_eval.size
    early, k, h, nfev = _start(ops, y, t_eval, t0, tab.error_order, options, observe)
    if early is not None:
        return early
    th = np.zeros(TH_SIZE)
    th[:2] = t0, h
    th[TH_LAST_CROSS] = np.nan
    th[TH_T_STOP] = np.nan
    stats = np.zeros(STATS_SIZE, dtype=np.int64)
    stats[0] = nfev
    steps = int(stiff_steps) if ops.detects_stiffness else 0
    ops.prepare(tab, low, options, predictive=predictive, cap_safety=cap_safety,
                stiff_steps=steps, stiff_held=stiff_held)
    dense = interpolates(dense, tab) and low is None
    g0 = ops.stop_value(y)
    if g0 is not None:
        th[TH_G] = g0
        if g0 <= 0.0:
            th[TH_T_STOP] = t0
            while k < T:
                observe(k, y)
                k += 1
            return _result(STOPPED, k, y, th, stats, low)
    y_new = np.empty(n)
    # the states of the outputs inside a step (observe_step passes at most this many)
    batch = np.empty((dense_batch_rows(n), n)) if dense else None

    def interpolate(theta):
        return ops.interpolate(theta, y, y_new, float(th[5]))

    def interpolate_many(thetas):
        return ops.interpolate_many(thetas, y, y_new, float(th[5]), batch)

    code = 0
    max_steps = int(options.max_steps)
    while k < T:
        t_target, t_out = dense_target(t_eval, k, dense, tab)
        with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
            code = advance_in_chunks(
                lambda budget: ops.advance(y, y_new, th, t_target, t_out, stats, budget),
                stats, max_steps, n, s)
        if code == PENDING:
            k = complete_pending(k, t_eval, th, y, y_new, interpolate, observe, ops.fsal,
                                 interpolate_many)
            code = 0
            continue
        if code == STOPPED:
            while k < T:
                observe(k, y)
                k += 1
            break
        if code != 0:
            break
        observe(k, y)
        k += 1
        if stiff_fired(steps, th):
            code = STIFF
            break
    return _result(code, k, y, th, stats, low)


def erk(ops, y0, t_eval, primary, options, observe, *, fallback=None, t0=None, dense=False,
        stiff_steps=0, predictive=True, cap_safety=None, stiff_held=1.0):
    """Integrate with the compiled embedded Runge-Kutta loop of ``ops`` onto every ``t_eval``.

    The numba counterpart of ``methods.base.integrate`` with ``methods.erk.ExplicitRK``
    (the same calling convention and options, agreeing to the tolerance): the model's
    kink switches and stop event are its ``ops``' own (compiled), not callables.

    Parameters
    ----------
    ops : compiled operations (module docstring)
    y0 : ndarray, shape (n,)
        The state at ``t0`` (not modified).
    t_eval : ndarray, shape (T,)
        Strictly increasing output times ``>= t0``; each ends a step (but see ``dense``).
    primary : Tableau, or a stepper class of ``methods.erk`` (its ``tableau``)
    options : StepperOptions or SolverOptions
        ``rtol``, ``atol``, ``max_steps``, ``first_step`` (and ``kink_rtol`` with a
        ``fallback``).
    observe : callable ``observe(k, y)``
    fallback : Tableau or stepper class, optional
        The low-order pair at kinks (a model whose ops have switches).
    t0 : float, optional
        The start time, by default ``t_eval[0]``.
    dense : bool
        Only the last output time ends a step; the others come from the tableau's
        continuous extension (where it has one, and there is no fallback).
    stiff_steps : int
        > 0 (with the cap): return with ``Result.stiff`` once the stability cap has
        shortened this many accepted steps in a row (loops that have the test), each to
        below ``1 / stiff_held`` of the step accuracy allowed.
    predictive : bool
        Gustafsson's predictive controller, and a step shortened onto an output time
        keeps the planned step (``integrate(predictive=True)``; the default here, with the
        cap, are the controls of a smooth model's run: ``methods.driver``).
    cap_safety : float or None
        > 0: the stability cap at ``cap_safety`` of the estimated limit; 0: no cap; None:
        this module's ``STABILITY_SAFETY`` (read at the call, so that a study may set it).

    Returns
    -------
    Result
    """
    return _explicit(ops, y0, t_eval, primary, options, observe, fallback=fallback, t0=t0,
                     dense=dense, stiff_steps=stiff_steps, predictive=predictive,
                     cap_safety=cap_safety, stiff_held=stiff_held)


def ssp(ops, y0, t_eval, primary, options, observe, *, t0=None, dense=False, stiff_steps=0,
        predictive=True, cap_safety=None, stiff_held=1.0):
    """:func:`erk` for a low-storage SSP loop (``ops``: the model's two-register stages;
    the same contract, the stiffness test included, no kinks)."""
    return _explicit(ops, y0, t_eval, primary, options, observe, fallback=None, t0=t0,
                     dense=dense, stiff_steps=stiff_steps, predictive=predictive,
                     cap_safety=cap_safety, stiff_held=stiff_held)


def tableau_args(tab, rtol):
    """``(A, b, e, e3, use_e3, exponent, rtol)``: a pair as the compiled ERK loop takes it."""
    use_e3 = tab.e3 is not None
    return (np.ascontiguousarray(tab.A, dtype=np.float64),
            np.ascontiguousarray(tab.b, dtype=np.float64),
            np.ascontiguousarray(tab.e, dtype=np.float64),
            np.ascontiguousarray(tab.e3 if use_e3 else np.zeros_like(tab.e), dtype=np.float64),
            use_e3, -1.0 / (tab.error_order + 1), float(rtol))


def loop_control(options, predictive):
    """The control array of the compiled ERK loop (``_erk_kernels.CTL_FIELDS``)."""
    return np.array([float(options.atol), SAFETY, MIN_FACTOR, MAX_FACTOR, PREDICTIVE_MIN_ERR,
                     MIN_STEP_ULPS, 1.0 if predictive else 0.0, KINK_REJECTIONS, CALM_STEPS,
                     KINK_GROWTH, STOP_ITERATIONS, STOP_XTOL, 4.0 * _EPS])


class DenseStages:
    """The explicit ops of a model with a compiled right-hand side (module docstring):
    stage derivatives kept as the rows of ``K``.

    Parameters
    ----------
    advance : numba dispatcher
        The model's cached entry point into ``_erk_kernels.make_erk_advance``'s loop.
    rhs : numba dispatcher
        ``rhs(y, out, data)``.
    data : tuple
        The model's data tuple.
    n : int
    switches : (crossings, keep_pattern), optional
        The model's compiled switch functions (those the loop was built with), for the
        pattern at the start; ``n_switches`` their number.
    stop : numba dispatcher, optional
        ``stop(y, data) -> g`` (as the loop's), for the stop value at the start.
    """

    detects_stiffness = True

    def __init__(self, advance, rhs, data, n, switches=None, n_switches=0, stop=None):
        from . import _erk_kernels  # numba compiles (or loads its cache) on first use
        self._ek = _erk_kernels
        self._advance, self._rhs, self.data = advance, rhs, data
        self.n = int(n)
        self._switches, self._stop = switches, stop
        self.pat = np.zeros(int(n_switches) if switches is not None else 0, dtype=np.bool_)
        self.ybuf = np.empty(self.n if stop is not None else 0)
        self._out = np.empty(self.n)
        self.K = None

    def prepare(self, tab, low, options, predictive, cap_safety, stiff_steps, stiff_held=1.0):
        self.tab = tab
        self.s = tab.n_stages
        rows = max(tab.n_stages, low.n_stages if low is not None else 0) + 1
        if self.K is None or self.K.shape[0] < rows:
            K = np.empty((rows, self.n))
            if self.K is not None:
                K[0] = self.K[0]
            self.K = K
        self.targs = tableau_args(tab, options.rtol)
        self.low = (tableau_args(low, max(float(options.kink_rtol), float(options.rtol)))
                    if low is not None else self.targs)
        self.ctl = loop_control(options, predictive)
        self.wd, self.stiff = stiffness_args(tab, stiff_steps, cap_safety, stiff_held)

    def first(self, y):
        if self.K is None:
            self.K = np.empty((1, self.n))
        self._rhs(y, self.K[0], self.data)
        if self._switches is not None:
            self._switches[1](self.data, self.pat)
        return self.K[0]

    def stop_value(self, y):
        return None if self._stop is None else float(self._stop(y, self.data))

    def rhs(self, v, out):
        self._rhs(v, out, self.data)
        return out

    def advance(self, y, y_new, th, t_target, t_out, stats, budget):
        return self._advance(y, self.K, y_new, th, t_target, t_out, stats, budget, self.targs,
                             self.low, self.ctl, self.wd, self.stiff, self.pat, self.ybuf,
                             self.data)

    def interpolate(self, theta, y, y_new, h):
        s = self.s
        self._ek.stage_state(y, self.K[:s + 1], self.tab.dense_weights(theta), h, self._out)
        return self._out

    def interpolate_many(self, thetas, y, y_new, h, batch):
        s = self.s
        self._ek.stage_states(y, self.K[:s + 1], self.tab.dense_weights(thetas), h, batch)
        return batch

    def fsal(self):
        self.K[0] = self.K[self.s]


# --------------------------------------------------------------------------------------------
# the batch axis: B members through the same compiled explicit loop, in parallel
# --------------------------------------------------------------------------------------------
class BatchStages:
    """The explicit ops of a batch of B members of one model (:func:`erk_batch`): each
    member's stage derivatives in ``K[b]``, its data tuple ``member(b)``; every member runs
    the model's own compiled loop (the entry point of :class:`DenseStages`), which releases
    the GIL, so that threads drive disjoint sets of members at once.

    Parameters
    ----------
    advance : numba dispatcher
        The model's cached entry point into ``_erk_kernels.make_erk_advance``'s loop.
    rhs : numba dispatcher
        ``rhs(y, out, data)`` (one member).
    member : callable ``member(b) -> tuple``
        Member b's data tuple (views of the batch's arrays, the types of the serial one:
        no new compilation).
    B, n : int
    switches, n_switches, stop
        As for :class:`DenseStages`.
    """

    def __init__(self, advance, rhs, member, B, n, switches=None, n_switches=0, stop=None):
        self._advance, self._rhs = advance, rhs
        self.B, self.n = int(B), int(n)
        self.data = [member(b) for b in range(self.B)]
        self._switches, self._stop = switches, stop
        self.PAT = np.zeros((self.B, int(n_switches) if switches is not None else 0),
                            dtype=np.bool_)
        self.YBUF = np.empty((self.B, self.n if stop is not None else 0))
        self.K = None

    def prepare(self, tab, low, options, predictive, cap_safety):
        rows = max(tab.n_stages, low.n_stages if low is not None else 0) + 1
        K = np.empty((self.B, rows, self.n))
        if self.K is not None:
            K[:, 0] = self.K[:, 0]
        self.K = K
        self.targs = tableau_args(tab, options.rtol)
        self.low = (tableau_args(low, max(float(options.kink_rtol), float(options.rtol)))
                    if low is not None else self.targs)
        self.ctl = loop_control(options, predictive)
        self.wd, self.stiff = stiffness_args(tab, 0, cap_safety)

    def first(self, b, y):
        if self.K is None:
            self.K = np.empty((self.B, 1, self.n))
        data = self.data[b]
        self._rhs(y, self.K[b, 0], data)
        if self._switches is not None:
            self._switches[1](data, self.PAT[b])
        return self.K[b, 0]

    def stop_value(self, b, y):
        return None if self._stop is None else float(self._stop(y, self.data[b]))

    def rhs(self, b, v, out):
        self._rhs(v, out, self.data[b])
        return out

    def advance(self, b, Y, Ynew, TH, t_target, t_out, STATS, budget):
        """Member b's loop to ``t_target`` (its return code)."""
        return self._advance(Y[b], self.K[b], Ynew[b], TH[b], t_target, t_out, STATS[b],
                             budget, self.targs, self.low, self.ctl, self.wd, self.stiff,
                             self.PAT[b], self.YBUF[b], self.data[b])


def batch_threads(B):
    """Threads that drive a batch of B members (:data:`BATCH_THREADS`, else this machine's
    cores), at most B."""
    n = BATCH_THREADS or os.cpu_count() or 1
    return max(1, min(int(B), int(n)))


def _run_members(chunks, task):
    """``task(members)`` for each chunk of member indices, on threads when there are several
    (the compiled loops release the GIL); exceptions propagate."""
    if len(chunks) == 1:
        task(chunks[0])
        return
    with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        for fut in [pool.submit(task, c) for c in chunks]:
            fut.result()


def erk_batch(ops, Y0, t_eval, primary, options, observe, *, fallback=None, t0=None,
              predictive=True, cap_safety=None):
    """:func:`erk` for a batch of B members of one model, each with its own step control.

    Every member takes the steps a run of it alone takes (the same compiled loop, member
    by member, on its own data); the members are split between :func:`batch_threads`
    threads, each driving its share through every output time (the loops run without the
    GIL).  A member that
    fails or stops drops out; the others go on.

    Parameters
    ----------
    ops : BatchStages
    Y0 : ndarray (B, n)
        The members' states at ``t0`` (not modified).
    t_eval, primary, options, fallback, t0, predictive, cap_safety
        As for :func:`erk` (no dense output, no stiffness test).
    observe : callable ``observe(k, members, states)``
        Output ``k`` of the members ``members`` (int array), ``states`` (len(members), n);
        called from the driving threads (under the GIL), in order of ``k`` per member.

    Returns
    -------
    list of Result
        One per member (``y_last`` a view into one (B, n) array).
    """
    tab = _tableau(primary)
    low = _tableau(fallback) if fallback is not None else None
    t_eval = np.asarray(t_eval, dtype=np.float64)
    t0 = float(t_eval[0]) if t0 is None else float(t0)
    Y = np.array(Y0, dtype=np.float64, copy=True)
    B, n = Y.shape
    T = t_eval.size
    TH = np.zeros((B, TH_SIZE))
    TH[:, 0] = t0
    TH[:, TH_LAST_CROSS] = np.nan
    TH[:, TH_T_STOP] = np.nan
    STATS = np.zeros((B, STATS_SIZE), dtype=np.int64)
    codes = np.zeros(B, dtype=np.int64)
    kdone = np.zeros(B, dtype=np.int64)     # outputs observed
    k0 = int(np.searchsorted(t_eval, t0, side="right"))     # outputs at t0
    early = [None] * B
    for b in range(B):
        y = Y[b]
        with np.errstate(all="ignore"):
            f0 = ops.first(b, y)
        STATS[b, 0] = 1
        if not np.all(np.isfinite(f0)):
            early[b] = FlowStatus.NONFINITE
            continue
        g0 = ops.stop_value(b, y)
        if g0 is not None:
            TH[b, TH_G] = g0
            if g0 <= 0.0:
                TH[b, TH_T_STOP] = t0
                codes[b] = STOPPED
                early[b] = STOPPED
                continue
        if options.first_step is not None:
            TH[b, 1] = float(options.first_step)
        elif k0 < T:
            with np.errstate(all="ignore"):
                TH[b, 1] = select_initial_step(lambda v, b=b: ops.rhs(b, v, np.empty_like(v)),
                                               t0, y, f0, float(t_eval[-1]), tab.error_order,
                                               float(options.rtol), float(options.atol))
            STATS[b, 0] += 1
    ops.prepare(tab, low, options, predictive=predictive, cap_safety=cap_safety)
    members = np.arange(B)
    for k in range(k0):
        observe(k, members, Y)
    kdone[:] = k0
    for b in range(B):
        if early[b] is STOPPED:
            for k in range(k0, T):
                observe(k, members[b:b + 1], Y[b:b + 1])
            kdone[b] = T
    max_steps = int(options.max_steps)
    Ynew = np.empty_like(Y)
    s = tab.n_stages

    def drive(chunk):
        going = [b for b in chunk if early[b] is None]
        for k in range(k0, T):
            t_target = float(t_eval[k])
            for b in going:
                with np.errstate(all="ignore"):
                    codes[b] = advance_in_chunks(
                        lambda budget, b=b: ops.advance(b, Y, Ynew, TH, t_target, math.inf,
                                                        STATS, budget),
                        STATS[b], max_steps, n, s)
            reached = [b for b in going if codes[b] in (0, STOPPED)]
            if reached:
                idx = np.array(reached)
                observe(k, idx, Y[idx])
                kdone[idx] = k + 1
            for b in reached:
                if codes[b] == STOPPED:      # it holds its state for the later outputs too
                    for kk in range(k + 1, T):
                        observe(kk, members[b:b + 1], Y[b:b + 1])
                    kdone[b] = T
            going = [b for b in going if codes[b] == 0]

    nthreads = batch_threads(B)
    _run_members([members[i::nthreads] for i in range(nthreads)], drive)
    results = []
    for b in range(B):
        if early[b] is FlowStatus.NONFINITE:
            results.append(_early(int(kdone[b]), t0, Y[b], int(STATS[b, 0]),
                                  FlowStatus.NONFINITE))
            continue
        results.append(_result(int(codes[b]), int(kdone[b]), Y[b], TH[b], STATS[b], low))
    return results


# --------------------------------------------------------------------------------------------
# Rosenbrock-W runner
# --------------------------------------------------------------------------------------------
def rosw(ops, y0, t_eval, tableau, options, observe, *, t0=None, k0=0, switch_back=None,
         switch_steps=0):
    """Integrate with the compiled Rosenbrock-W loop of ``ops`` onto ``t_eval[k0:]``.

    The numba counterpart of ``methods.base.integrate`` with
    ``methods.rosw.RosenbrockWStepper`` and ``predictive=True``: each step freezes the
    Jacobian at its start (``ops.rhs(y, f, keep=True)``), solves the stage systems by
    conjugate gradients in the metric ``ops.metric`` and controls the local error with the
    embedded solution; output times are hit exactly.  The first step is
    ``options.first_step`` (required: the Rosenbrock phases continue a run).

    ``ops`` has ``rosw_advance`` (the model's entry point into
    ``_rosw_kernels.make_rosw_advance``'s loop), ``rhs(y, out, keep=False)`` (counting its
    calls in ``ops.nfev``), ``metric`` ((n,) or None) and the data tuples ``rhs_args``,
    ``scratch_args`` and ``jvp_args`` of the loop; ``ops.nfev`` and ``ops.njev`` advance
    by the loop's evaluations and products.

    With ``switch_back`` (an explicit tableau) the run returns with ``Result.nonstiff``
    once, for ``switch_steps`` accepted steps in a row, that pair at its stability-capped
    step would have advanced more cheaply by ``SWITCH_BACK_MARGIN``
    (``integrate(switch_back=...)``).  ``Result.nfev`` counts a product as
    :data:`JVP_COST` evaluations, the first ``f(y)`` included.
    """
    from ._rosw_kernels import NONSTIFF as _nonstiff  # numba compiles on first use only
    assert _nonstiff == NONSTIFF
    tab = tableau
    t_eval = np.asarray(t_eval, dtype=np.float64)
    t = float(t_eval[0]) if t0 is None else float(t0)
    y = np.array(y0, dtype=np.float64, copy=True)
    n = y.size
    a, c, m, e = (np.ascontiguousarray(v, dtype=np.float64) for v in tab.transformed())
    f0 = ops.rhs(y, np.empty(n), keep=True)
    U = np.empty((tab.n_stages, n))
    work = np.empty((7 if ops.metric is None else 8, n))
    if ops.metric is not None:
        work[7] = ops.metric      # CG in the inner product in which J is self-adjoint
    # th = [t, h, rho, h_prev, err_prev, n_cheaper, cost0]: a fresh controller memory, as
    # the numpy loop starts with; the kernel's counters start at zero after f0
    th = np.array([t, float(options.first_step), 0.0, NO_PREVIOUS_STEP[0],
                   NO_PREVIOUS_STEP[1], 0.0, 0.0])
    counts = np.zeros(4, dtype=np.int64)
    switch = switch_back is not None
    from .rosw import KRYLOV_TOL, MAX_KRYLOV, RosenbrockWStepper
    ctl = np.array([-1.0 / (tab.error_order + 1), options.rtol, options.atol, SAFETY, MIN_FACTOR,
                    RosenbrockWStepper.MAX_FACTOR, PREDICTIVE_MIN_ERR, MIN_STEP_ULPS,
                    KRYLOV_TOL, MAX_KRYLOV,
                    STABILITY_SAFETY * switch_back.stability_boundary if switch else 0.0,
                    SWITCH_BACK_MARGIN * switch_back.n_stages if switch else 0.0,
                    switch_steps if switch else 0.0],
                   dtype=np.float64)
    budget = int(options.max_steps)
    code = 0
    k = int(k0)
    T = t_eval.size
    while k < T:
        # in chunks (advance_in_chunks): a step is the stages plus the Krylov iterations'
        # products, counted here as ROSW_CHUNK_EVALS evaluations
        with np.errstate(all="ignore"):
            code = advance_in_chunks(
                lambda chunk, t_k=float(t_eval[k]): ops.rosw_advance(
                    y, f0, U, work, th, counts, t_k, chunk, a, c, m, e, float(tab.gamma), ctl,
                    ops.rhs_args, ops.scratch_args, ops.jvp_args),
                counts, budget, n, ROSW_CHUNK_EVALS)
        if code != 0:
            break
        observe(k, y)
        k += 1
    ops.nfev += int(counts[0])
    ops.njev += int(counts[3])
    nonstiff = code == NONSTIFF
    status = FlowStatus.SUCCESS if nonstiff else _STATUS_BY_CODE[code]
    t_last = float(th[0])
    return Result(n_done=k, t_last=t_last, y_last=y,
                  nfev=1 + int(counts[0]) + JVP_COST * int(counts[3]), nsteps=int(counts[1]),
                  nrejected=int(counts[2]), status=status,
                  message=_message(status, t_last, False), h_next=float(th[1]),
                  rho=float(th[2]), nonstiff=nonstiff)

