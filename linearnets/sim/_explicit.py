"""Adaptive embedded explicit Runge-Kutta integration of the linear network, every tableau.

The numpy solver (:func:`erk_solve`) is the reference: the stepper
``methods.erk.ExplicitRK`` driven by the one adaptive loop ``methods.base.integrate``
(step-size control with Gustafsson's predictive step, initial step, output times or
dense output, stability cap, failure reporting: see that module).  On networks wide
enough that a layer's stage updates are cheaper kept as rank-C factors, the numpy
backend hands the tableau to the factored-stage stepper of ``_lowrank`` (see
:func:`linearnets.sim._lowrank.worth_factoring`), which enters the same loop through
:func:`adaptive_run`.

The numba backend runs the same algorithm compiled (the runner ``methods.compiled.erk``
on the linear network's ops, ``models/_linear_ops.erk_ops``: the loop of
``methods/_erk_kernels.make_erk_advance`` through its cached entry point, or the
factored stages of ``_lowrank_kernels``), one call per output interval, so there is no
Python per step.  It uses the control constants of ``methods.base`` (re-exported here).  The two backends agree to the tolerance, not bit for bit: their products
round differently, and an adaptive code turns a rounding difference that flips one
accept/reject decision into a difference of the order of the local error the
controller allows (``rtol``); a flow escaping a saddle amplifies a last-bit difference
on its own (on the medium benchmark network two runs differing by 4e-14 at t = 550
differed by 2e-5 at t = 700).

Stability cap: once some modes of a network have converged, the step is limited
by stability rather than accuracy, and the plain controller keeps growing the
step past the stability boundary and getting it rejected (17 % and 27 % of the
attempts of RK45 on the medium and large problems of ``benchmarks/bench_flow.py``);
the cap (``methods.base``) holds it at ``STABILITY_SAFETY`` of the estimated limit.
A non-finite error norm (a trial stage overflowed) counts as a rejection with
factor MIN_FACTOR; if that drives the step to underflow the run ends with
``FlowStatus.STEP_UNDERFLOW`` and says so.  ``FlowStatus.NONFINITE`` means the
right-hand side at an accepted state (the initial one) is not finite.
"""
from __future__ import annotations

import math

import numpy as np

from . import _rhs
from ._solvers import FlowStatus, RawResult, register_solver
from ._tableaux import TABLEAUX
from .methods.base import (DENSE_BATCH_BYTES, MAX_FACTOR, MIN_FACTOR, MIN_STEP_ULPS,  # noqa: F401
                           NO_PREVIOUS_STEP, NONSTIFF_RESET, PREDICTIVE_MIN_ERR, SAFETY,
                           STABILITY_SAFETY, STIFFNESS_MEMORY, STIFFNESS_MIN_REL,
                           STIFFNESS_STATE_ULPS, Stepper, StepperOptions, accept_step,
                           dense_batch_rows, integrate, observe_step, predictive_step,
                           select_initial_step, stability_cap, step_after_accept,  # noqa: F401
                           step_after_reject, stiffness_estimate)
from .methods import compiled
from .methods.erk import ExplicitRK

__all__ = ["SAFETY", "MIN_FACTOR", "MAX_FACTOR", "PREDICTIVE_MIN_ERR", "MIN_STEP_ULPS",
           "STABILITY_SAFETY", "STIFFNESS_MEMORY", "STIFFNESS_MIN_REL", "STIFFNESS_STATE_ULPS",
           "stiffness_estimate",
           "stability_cap", "predictive_step", "NO_PREVIOUS_STEP", "accept_step",
           "select_initial_step",
           "error_norm", "erk_solve", "adaptive_run", "raw_result", "erk_fixed", "solve_numpy",
           "solve_numba", "chain_layout", "numba_rhs_args", "observe_step", "NONSTIFF_RESET",
           "DENSE_BATCH_BYTES", "dense_batch_rows"]

def _start(evaluate_f0, fun, y, t_eval, tab, options, observe):
    """Evaluate ``f0 = evaluate_f0()``, observe ``t_eval[0]`` and choose the first step.

    ``fun(v, out)`` is a dense right-hand side for the initial-step selection.
    Returns ``(early, h, nfev)``: ``early`` is the finished RawResult when the run
    ends here (non-finite right-hand side, or a single output time), else None.
    """
    t = float(t_eval[0])
    f0 = evaluate_f0()
    nfev = 1
    observe(0, y)
    if not np.all(np.isfinite(f0)):
        return (RawResult(1, t, y, nfev, 0, 0, FlowStatus.NONFINITE,
                          _failure_message(FlowStatus.NONFINITE, t, 0.0, options.max_steps)),
                0.0, nfev)
    if t_eval.size == 1:
        return RawResult(1, t, y, nfev, 0, 0, FlowStatus.SUCCESS, FlowStatus.SUCCESS.message), 0.0, nfev
    if options.first_step is not None:
        return None, float(options.first_step), nfev
    h = select_initial_step(lambda v: fun(v, np.empty_like(v)), t, y, f0,
                            float(t_eval[-1]), tab.error_order, options.rtol, options.atol)
    return None, h, nfev + 1




def error_norm(e5, e3, use_e3, h, n):
    """Error norm of a step from its sums of scaled squared error estimates.

    The RMS norm ``|h| sqrt(e5 / n)``, or with a second (third-order) estimate
    Hairer's DOP853 norm ``|h| e5 / sqrt((e5 + 0.01 e3) n)``.
    """
    if not use_e3:
        return abs(h) * math.sqrt(e5 / n)
    if e5 == 0.0 and e3 == 0.0:
        return 0.0
    return abs(h) * e5 / math.sqrt((e5 + 0.01 * e3) * n)




def _failure_message(status, t, h, max_steps, nonfinite=False, rho=0.0, boundary=0.0):
    """The message of a failed run; ``rho`` (the remembered stiffness estimate) and the
    tableau's ``boundary`` tell whether an exhausted budget went on stability-capped steps."""
    if status is FlowStatus.MAX_STEPS:
        msg = f"{status.message} ({max_steps} attempted steps) at t={t:.6g}"
        # the cap sets h * rho = STABILITY_SAFETY * boundary exactly (up to rounding)
        if rho > 0.0 and boundary > 0.0 and h * rho >= 0.999 * STABILITY_SAFETY * boundary:
            msg += (f"; the step (h={h:.3g}) was held at the stability limit of converged "
                    f"modes (stiffness {rho:.3g}): method='auto' switches to the L-stable "
                    f"ROS34PW2 there")
        return msg
    if status is FlowStatus.NONFINITE:
        return f"{status.message} at t={t:.6g}"
    why = "; the rejected trial steps overflowed (non-finite stages)" if nonfinite else ""
    return f"{status.message} at t={t:.6g} (h={h:.3g}{why})"


def _stepper_options(options, first_step=None):
    """The :class:`~linearnets.sim.methods.base.StepperOptions` of ``SolverOptions``."""
    return StepperOptions(rtol=float(options.rtol), atol=float(options.atol),
                          max_steps=int(options.max_steps),
                          first_step=options.first_step if first_step is None else first_step)


def raw_result(res, options, boundary=0.0, nfev=0):
    """The :class:`RawResult` of a ``methods.base.Result``, with this module's failure
    messages (``boundary``: the tableau's stability boundary where the run was capped)
    and ``nfev`` evaluations made before the loop."""
    status = res.status
    msg = (status.message if status.success
           else _failure_message(status, res.t_last, res.h_next, options.max_steps,
                                 res.nonfinite, res.rho, boundary))
    return RawResult(res.n_done, res.t_last, res.y_last, res.nfev + nfev, res.nsteps,
                     res.nrejected, status, msg, stiff=res.stiff, h_next=res.h_next,
                     ncapped=res.ncapped)


def erk_solve(fun, y0, t_eval, tab, options, observe):
    """Integrate ``dy/dt = fun(y)`` with the embedded pair ``tab``, hitting every ``t_eval``.

    ``methods.erk.ExplicitRK`` in the loop ``methods.base.integrate``, with the
    controls of the compiled loops: the predictive step, the stability cap
    (``STABILITY_SAFETY``, ``STIFFNESS_MEMORY`` of this module), dense output with
    ``options.dense`` and the stiffness test with ``options.stiff_steps``.

    Parameters
    ----------
    fun : callable ``fun(y, out) -> out``
        Autonomous right-hand side; writes into ``out`` (n,).
    y0 : ndarray, shape (n,)
    t_eval : ndarray, shape (T,)
        Strictly increasing; ``t_eval[0]`` is the start time.
    tab : Tableau
    options : SolverOptions
    observe : callable ``observe(k, y)``

    Returns
    -------
    RawResult
    """
    y0 = np.asarray(y0, dtype=np.float64)
    stepper = ExplicitRK(None, y0.size, options.rtol, options.atol, fun=fun, tableau=tab)
    with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
        res = integrate(None, y0, t_eval, lambda *_: stepper, _stepper_options(options),
                        observe, t0=float(t_eval[0]), predictive=True,
                        cap_safety=STABILITY_SAFETY, stiffness_memory=STIFFNESS_MEMORY,
                        stiff_steps=int(options.stiff_steps), dense=options.dense)
    return raw_result(res, options, tab.stability_boundary if stepper.stiffness else 0.0)


class _HookStepper(Stepper):
    """The stage interface of ``methods.base`` over the hooks of :func:`adaptive_run`;
    the stages (and ``f``) live in the hooks' own storage, the states in two buffers."""

    def __init__(self, tab, trial, accepted, stiffness, interpolate, like):
        super().__init__(None, like.size, 0.0, 0.0)
        self.tableau = tab
        self._trial, self._accepted = trial, accepted
        self._bufs = (np.empty_like(like), np.empty_like(like))
        self.stiffness = stiffness
        self.interpolate = interpolate

    def attempt(self, t, y, f, h):
        y_new = self._bufs[1] if y is self._bufs[0] else self._bufs[0]
        return y_new, None, self._trial(y, y_new, h)

    def accept(self, f_new):
        self._accepted()


def adaptive_run(trial, accepted, y, h, nfev, t_eval, tab, options, observe, stiffness=None,
                 interpolate=None):
    """The loop ``methods.base.integrate`` for a stepper given as hooks, from ``t_eval[0]``
    (already observed, ``f(y)`` evaluated: ``nfev`` evaluations so far) with first step ``h``.

    ``trial(y, y_new, h_try) -> err`` computes one attempted step of ``tab.n_stages``
    evaluations into ``y_new`` and returns its error norm; ``stiffness(h_try, y_new) ->
    rho`` (optional) estimates the stiffness from the stages of the step just accepted, and
    ``accepted()`` is then called (first-same-as-last bookkeeping).
    ``interpolate(theta, y, y_new, h)`` evaluates the continuous extension of the step
    just accepted (from ``y`` to ``y_new`` with step ``h``); it is used when
    ``options.dense`` is set and the tableau has one.  The controls are those of
    :func:`erk_solve`.

    Returns
    -------
    RawResult
    """
    stepper = _HookStepper(tab, trial, accepted, stiffness, interpolate, y)
    res = integrate(None, y, t_eval, lambda *_: stepper, _stepper_options(options, h),
                    observe, t0=float(t_eval[0]), f0=(), k0=1, predictive=True,
                    cap_safety=STABILITY_SAFETY if stiffness is not None else 0.0,
                    stiffness_memory=STIFFNESS_MEMORY, stiff_steps=int(options.stiff_steps),
                    dense=options.dense)
    return raw_result(res, options, tab.stability_boundary if stiffness is not None else 0.0,
                      nfev)


def erk_fixed(fun, y0, t_grid, tab):
    """Fixed-step integration on the grid ``t_grid`` (no error control); returns y at t_grid[-1].

    For convergence-order checks only (``fun(y, out) -> out``).
    """
    s = tab.n_stages
    y = np.array(y0, dtype=np.float64, copy=True)
    K = np.empty((s, y.size))
    ys = np.empty_like(y)
    for t0, t1 in zip(t_grid[:-1], t_grid[1:]):
        h = t1 - t0
        fun(y, K[0])
        for i in range(1, s):
            ys[:] = y + h * (tab.A[i, :i] @ K[:i])
            fun(ys, K[i])
        y = y + h * (tab.b @ K)
    return y


def solve_numpy(tab):
    """Build the numpy-backend solver for tableau ``tab`` (see ``_solvers`` for the signature)."""
    def solver(problem, y0, t_eval, options, observe):
        from . import _lowrank
        if _lowrank.worth_factoring(problem, tab.n_stages):
            return _lowrank.lowrank_solve(problem, y0, t_eval, tab, options, observe)
        return erk_solve(lambda y, out: _rhs.rhs(y, problem, out), y0, t_eval, tab, options,
                         observe)
    solver.__doc__ = (f"{tab.name} on the numpy backend (stages in factored form where that "
                      "saves work, see ``_lowrank``).")
    return solver


def chain_layout(problem):
    """``(rows, cols, offs, aoff, goff)`` (int64): layer shapes, their offsets in the flat
    state, and the offsets of the partial products ``A_i^T`` (rows[i] x C) and ``G_i``
    (C x cols[i]) in flat buffers, as ``_kernels.chains`` lays them out."""
    C = problem.Syx.shape[0]
    rows = np.array([r for r, _ in problem.shapes], dtype=np.int64)
    cols = np.array([c for _, c in problem.shapes], dtype=np.int64)
    offs = np.ascontiguousarray(problem.offsets, dtype=np.int64)
    aoff = np.concatenate(([0], np.cumsum(C * rows))).astype(np.int64)
    goff = np.concatenate(([0], np.cumsum(C * cols))).astype(np.int64)
    return rows, cols, offs, aoff, goff


def numba_rhs_args(problem):
    """The trailing arguments of ``_kernels.rhs_flat`` (data, layout and scratch) for ``problem``:
    the data tuple of the linear model's compiled loops (``models/_linear_kernels.rhs``)."""
    shapes = problem.shapes
    C, D = problem.Syx.shape
    rows, cols, offs, aoff, goff = chain_layout(problem)
    return (np.ascontiguousarray(problem.Sxx), np.ascontiguousarray(problem.Syx),
            np.ascontiguousarray(problem.eta_l, dtype=np.float64), rows, cols, offs,
            np.empty(aoff[-1]), aoff, np.empty(goff[-1]), goff,
            np.empty((D, C)), np.empty((D, C)), np.empty(2 * C * max(max(sh) for sh in shapes)))


def solve_numba(tab):
    """Build the numba-backend solver for tableau ``tab``: the runner ``methods.compiled.erk``
    on the linear network's ops (``models/_linear_ops.erk_ops``)."""
    def solver(problem, y0, t_eval, options, observe):
        from .models import _linear_ops as lk  # numba compiles (or loads) on first use
        res = compiled.erk(lk.erk_ops(problem, tab), y0, t_eval, tab, options, observe,
                           dense=options.dense, stiff_steps=options.stiff_steps)
        return raw_result(res, options, tab.stability_boundary)
    solver.__doc__ = (f"{tab.name} on the numba backend (whole stepping loop compiled; stages "
                      "in factored form where that saves work, see ``_lowrank``).")
    return solver


for _name, _tab in TABLEAUX.items():
    register_solver(_name, "numpy", solve_numpy(_tab))
    register_solver(_name, "numba", solve_numba(_tab))
