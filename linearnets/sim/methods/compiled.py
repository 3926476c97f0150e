"""The compiled loops' runners: Python only at output times (numba backend;
docs/simulator.md, "Module overviews", lists the ``ops`` a model supplies)."""
from __future__ import annotations

import math
import os

import numpy as np

from .base import (STABILITY_SAFETY, SWITCH_BACK_MARGIN, FlowStatus, StepControl,
                   as_observer, dense_batch_rows, kink_tolerances, loop_result, loop_state,
                   observe_step, observe_until, select_initial_step)
from . import _loop_state as S
from ._loop_state import NONSTIFF, PENDING, STIFF, STOPPED

__all__ = ["erk", "rosw", "stiffness_args", "PENDING", "STIFF", "NONSTIFF",
           "INTERRUPT_STEPS", "INTERRUPT_WORK", "MIN_CHUNK_STEPS", "ROSW_CHUNK_EVALS",
           "JVP_COST", "advance_in_chunks", "stiff_fired", "DenseStageOps",
           "STOPPED", "tableau_args", "loop_control", "BATCH_THREADS", "batch_threads"]

#: Work of one call of a compiled loop: at most INTERRUPT_STEPS attempted steps and
#: INTERRUPT_WORK state entries times stages, at least MIN_CHUNK_STEPS steps; between calls
#: Python runs and a KeyboardInterrupt lands (docs/simulator.md, "The compiled loops").
INTERRUPT_STEPS = 1000
INTERRUPT_WORK = 1 << 23
MIN_CHUNK_STEPS = 2
#: Evaluations counted per Rosenbrock step when its compiled loop is run in chunks.
ROSW_CHUNK_EVALS = 16
#: Right-hand sides counted for one Jacobian-vector product (as ``methods.rosw``).
JVP_COST = 2

#: Threads that drive the members of an ensemble (:func:`batch_threads`); None: the cores.
BATCH_THREADS = None


def advance_in_chunks(advance, counts, max_steps, n, s, tick=None, th=None):
    """Call the compiled loop ``advance()`` with the budget of attempted steps in
    ``counts[S.BUDGET]`` raised by a chunk (:data:`INTERRUPT_STEPS`; state size ``n``, ``s``
    evaluations a step) until it returns other than ``FlowStatus.MAX_STEPS.code`` or
    ``max_steps`` is spent, ``tick(th[S.T])`` (the progress hook) after each; its last code."""
    chunk = max(MIN_CHUNK_STEPS, min(INTERRUPT_STEPS, INTERRUPT_WORK // max(1, int(n) * int(s))))
    exhausted = FlowStatus.MAX_STEPS.code
    while True:
        attempted = int(counts[S.ACCEPTED] + counts[S.REJECTED])
        budget = counts[S.BUDGET] = min(int(max_steps), attempted + chunk)
        code = advance()
        if tick is not None:
            tick(float(th[S.T]))
        if code != exhausted or budget >= max_steps:
            return code


def stiff_fired(stiff_steps, th):
    """Whether the stiffness test of an explicit loop (``th[S.N_STIFF]``) fired."""
    return stiff_steps > 0 and th[S.N_STIFF] >= stiff_steps


def stiffness_args(tab, stiff_steps=0, cap_safety=None, stiff_held=1.0):
    """``(wd, stiff)`` of the compiled explicit loops: the stiffness weights and the constants
    of ``_loop_state``'s stiff (``cap_safety`` 0: no cap; None: here's ``STABILITY_SAFETY``;
    no cap where the last stage is not at ``t + h``)."""
    has = tab.stability_boundary > 0.0 and tab.c[-1] == 1.0
    wd = tab.stiffness_weights if has else np.zeros(tab.n_stages)
    safety = STABILITY_SAFETY if cap_safety is None else float(cap_safety)
    boundary = tab.stability_boundary if safety > 0.0 and has else 0.0
    stiff = np.array([boundary, safety, float(np.abs(wd).sum()), stiff_steps, stiff_held],
                     dtype=np.float64)
    return wd, stiff


def tableau_args(tab, rtol, e3=None):
    """``(A, b, e, e3, use_e3, exponent, rtol)`` (slots ``_loop_state.P_*``): a pair as the
    compiled ERK loop takes it (``Tableau`` keeps its arrays contiguous float64; ``e3`` in
    place of the tableau's).  A plain tuple: numba's dispatcher types it fastest."""
    use_e3 = tab.e3 is not None
    e3 = (tab.e3 if use_e3 else np.zeros_like(tab.e)) if e3 is None else e3
    return tab.A, tab.b, tab.e, e3, use_e3, -1.0 / (tab.error_order + 1), float(rtol)


def loop_control(options, predictive):
    """The control array of the compiled ERK loop (its slots: ``_loop_state``'s ctl)."""
    return np.array([float(options.atol), 1.0 if predictive else 0.0])


def _start(first, rhs, y, t_eval, t, order, options, observe, k):
    """The start of a run at ``t``: ``f(y) = first(y)``, the outputs at ``t``, the first
    step (``rhs(v, out)`` for its trial evaluation).  Returns ``(early, k, h, nfev, f0)``:
    ``early`` the finished Result when the run ends here."""
    with np.errstate(all="ignore"):
        f0 = first(y)
    k = observe_until(k, t_eval, t, y, observe)
    bad = not np.all(np.isfinite(f0))
    if bad or k == t_eval.size:
        code = FlowStatus.NONFINITE.code if bad else 0
        early = loop_result(code, k, y, *loop_state(t, 0.0, 1), None, t_eval, observe)
        return early, k, 0.0, 1, f0
    if options.first_step is not None:
        return None, k, float(options.first_step), 1, f0
    with np.errstate(all="ignore"):
        h = select_initial_step(lambda v, dt: rhs(v, np.empty_like(v)), y, f0,
                                float(t_eval[-1]) - t, order, options.rtol, options.atol)
    return None, k, h, 2, f0


def _outputs(advance, y, th, stats, t_eval, k, observe, max_steps, work, steps=0, held=None):
    """Call the compiled loop ``advance()`` (:func:`advance_in_chunks`, ``work`` its ``(n,
    s)``) onto each output time from ``k``: ``(code, k)``.  With dense output ``held(k)``
    observes the outputs inside a step held across them (:data:`PENDING`) and completes it."""
    code = 0
    while k < t_eval.size:
        # with dense output only the last output time ends a step: the loop returns PENDING
        # after the step that reaches t_out = t_eval[k]
        th[S.T_TARGET] = t_eval[-1] if held else t_eval[k]
        if held:
            th[S.T_OUT] = t_eval[k]
        with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
            code = advance_in_chunks(advance, stats, max_steps, *work, observe.tick, th)
        if code == PENDING:
            k, code = held(k), 0
            continue
        if code != 0:
            break
        observe(k, y)
        k += 1
        if stiff_fired(steps, th):
            code = STIFF
            break
    return code, k


#: The compiled explicit loop's default control: the predictive controller and the stability
#: cap (``cap_safety`` None: :data:`STABILITY_SAFETY` at the call).
ERK_CONTROL = StepControl(predictive=True, cap_safety=None)


def erk(ops, y0, t_eval, primary, options, observe, control=ERK_CONTROL, *, t0=None, k0=0,
        f0=None):
    """Integrate with the compiled embedded Runge-Kutta loop of ``ops`` (docs/simulator.md,
    "Module overviews") and the pair ``primary`` (a Tableau) from ``y0`` at ``t0`` (by default
    ``t_eval[0]``) onto ``t_eval[k0:]``: the numba counterpart of ``methods.base.integrate``
    with ``methods.erk.ExplicitRK``, its ``options``, ``observe`` and ``control`` (``fallback``
    a Tableau, no switch-back test, ``cap_safety`` None: ``STABILITY_SAFETY`` at the call);
    kink switches and the stop event are the ``ops``' own; ``f0``: ``ops.first(y0)``, which
    the caller evaluated on ``ops`` prepared as here (None: prepared and evaluated here).
    Returns a Result."""
    tab, low = primary, control.fallback
    t_eval, observe = np.asarray(t_eval, dtype=np.float64), as_observer(observe)
    t0 = float(t_eval[0]) if t0 is None else float(t0)
    y = np.array(y0, dtype=np.float64, copy=True)
    n, s = y.size, tab.n_stages
    steps = int(control.stiff_steps)
    first = ops.first
    if f0 is not None:
        def first(v):       # (evaluated at y0 already)
            return f0
    else:
        ops.prepare(tab, low, options, predictive=control.predictive,
                    cap_safety=control.cap_safety, stiff_steps=steps,
                    stiff_held=control.stiff_held)
    early, k, h, nfev, _ = _start(first, ops.rhs, y, t_eval, t0, tab.error_order, options,
                                  observe, int(k0))
    if early is not None:
        return early
    th, stats = loop_state(t0, h, nfev)
    dense = bool(control.dense) and tab.dense_P is not None and low is None
    g0 = ops.stop_value(y)
    if g0 is not None:
        th[S.G] = g0
        if g0 <= 0.0:
            th[S.T_STOP] = t0
            return loop_result(STOPPED, k, y, th, stats, low, t_eval, observe)
    y_new = np.empty(n)
    th[S.T_OUT] = math.inf
    # the states of the outputs inside a step (observe_step passes at most this many)
    batch = np.empty((dense_batch_rows(n), n)) if dense else None

    def held(k):
        # the outputs inside the held step, then the step completed as the loop would
        h_step = float(th[S.H_STEP])
        k = observe_step(k, t_eval, float(th[S.T]), h_step, float(th[S.T_NEW]), y_new, None,
                         observe,
                         lambda thetas: ops.interpolate_many(thetas, y, y_new, h_step, batch))
        y[:] = y_new
        ops.fsal()
        th[S.T] = th[S.T_NEW]
        return k
    code, k = _outputs(lambda: ops.advance(y, y_new, th, stats), y, th, stats, t_eval, k,
                       observe, int(options.max_steps), (ops.eval_work or n, s), steps,
                       held if dense else None)
    return loop_result(code, k, y, th, stats, low, t_eval, observe)


class DenseStageOps:
    """The explicit ops of a model with a compiled right-hand side, stages as the rows of
    ``K``: ``advance`` its entry point into ``_erk_kernels.make_erk_advance``'s loop, ``rhs(y,
    out, data)``, ``switches = (crossings, keep_pattern)`` and ``stop(y, data) -> g`` on its
    data tuple ``data`` (docs/simulator.md, "Module overviews"); ``rhs`` evaluates on
    ``rhs_data``, which a subclass with a store of its own in ``data`` keeps apart."""

    #: The work of one evaluation in state entries (None: the state size) for the chunks.
    eval_work = None
    #: Whether the stages are the rows of ``K`` (False: the ops keep them in ``data``).
    stages_in_K = True
    #: The third-order companion's weights in place of the tableau's (None: the tableau's).
    e3 = None

    def __init__(self, advance, rhs, data, n, switches=None, n_switches=0, stop=None):
        from . import _erk_kernels  # numba compiles (or loads its cache) on first use
        self._ek = _erk_kernels
        self._advance, self._rhs, self.data, self.n = advance, rhs, data, int(n)
        self.rhs_data = data
        self._switches, self._stop = switches, stop
        self.pat = np.zeros(int(n_switches) if switches is not None else 0, dtype=np.bool_)
        self.ybuf = np.empty(self.n if stop is not None else 0)
        self.K = None

    def prepare(self, tab, low, options, predictive, cap_safety, stiff_steps=0, stiff_held=1.0):
        self.tab, self.s = tab, tab.n_stages
        rows = max(tab.n_stages, low.n_stages if low is not None else 0) + 1
        if self.stages_in_K and (self.K is None or self.K.shape[0] < rows):
            self.K = np.empty((rows, self.n))
        pair = tableau_args(tab, options.rtol, self.e3)
        if low is None:
            self.pairs = (pair, pair, pair)
        else:
            early, late = kink_tolerances(options)
            self.pairs = (pair, tableau_args(low, early), tableau_args(low, late))
        self.control = (loop_control(options, predictive),
                        *stiffness_args(tab, stiff_steps, cap_safety, stiff_held))

    def first(self, y):
        self._rhs(y, self.K[0], self.rhs_data)
        if self._switches is not None:
            self._switches[1](self.data, self.pat)
        return self.K[0]

    def stop_value(self, y):
        return None if self._stop is None else float(self._stop(y, self.data))

    def rhs(self, v, out):
        self._rhs(v, out, self.rhs_data)
        return out

    def advance(self, y, y_new, th, stats):
        return self._advance(y, self.K, y_new, th, stats, self.pairs, self.control, self.pat,
                             self.ybuf, self.data)

    def interpolate_many(self, thetas, y, y_new, h, batch):
        self._ek.stage_states(y, self.K[:self.s + 1], self.tab.dense_weights(thetas), h, batch)
        return batch

    def fsal(self):
        self.K[0] = self.K[self.s]


def batch_threads(B):
    """Threads that drive an ensemble of B members (:data:`BATCH_THREADS`, else this
    machine's cores), at most B."""
    n = BATCH_THREADS or os.cpu_count() or 1
    return max(1, min(int(B), int(n)))


def rosw(ops, y0, t_eval, tab, options, observe, *, t0=None, k0=0, start=True,
         switch_back=None, switch_steps=0):
    """Integrate with the compiled Rosenbrock-W loop of ``ops`` onto ``t_eval[k0:]``.

    The numba counterpart of ``methods.base.integrate`` with
    ``methods.rosw.RosenbrockWStepper`` and ``predictive=True`` (``ops``, and the arguments
    as for :func:`erk`: docs/simulator.md, "Module overviews").  ``start`` False: the run
    continues one with the step ``options.first_step``.  ``Result.nfev`` counts a product
    as :data:`JVP_COST` evaluations, the first ``f(y)`` included.
    """
    t_eval, observe = np.asarray(t_eval, dtype=np.float64), as_observer(observe)
    t = float(t_eval[0]) if t0 is None else float(t0)
    y = np.array(y0, dtype=np.float64, copy=True)
    n = y.size
    k, h, started = int(k0), options.first_step, 1

    def first(v):       # f(y), keeping the products of y for the Jacobian-vector products
        return ops.rhs(v, np.empty(n), keep=True)
    if start:
        early, k, h, started, f0 = _start(first, ops.rhs, y, t_eval, t, tab.error_order,
                                          options, observe, k)
        if early is not None:
            return early
    else:
        f0 = first(y)
    a, c, m, e = (np.ascontiguousarray(v, dtype=np.float64) for v in tab.transformed())
    U = np.empty((tab.n_stages, n))
    work = np.empty((S.W_METRIC + (ops.metric is not None), n))
    if ops.metric is not None:
        work[S.W_METRIC] = ops.metric    # CG in the inner product in which J is self-adjoint
    # a fresh controller memory, as the numpy loop starts with; the kernel's counters start
    # at zero after f0
    th, stats = loop_state(t, float(h))
    uform, data = (a, c, m, e, float(tab.gamma)), (ops.rhs_args, ops.scratch_args, ops.jvp_args)
    sb = switch_back
    ctl = np.array([-1.0 / (tab.error_order + 1), options.rtol, options.atol,
                    *((STABILITY_SAFETY * sb.stability_boundary, SWITCH_BACK_MARGIN * sb.n_stages,
                       switch_steps) if sb is not None else (0.0, 0.0, 0.0))], dtype=np.float64)
    code, k = _outputs(lambda: ops.rosw_advance(y, f0, U, work, th, stats, uform, ctl, data), y,
                       th, stats, t_eval, k, observe, int(options.max_steps),
                       (n, ROSW_CHUNK_EVALS))
    ops.nfev += int(stats[S.NFEV])
    ops.njev += int(stats[S.NJEV])
    stats[S.NFEV] += started + JVP_COST * stats[S.NJEV]
    return loop_result(code, k, y, th, stats, None, t_eval, observe)
