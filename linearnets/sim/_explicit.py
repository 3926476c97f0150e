"""Adaptive embedded explicit Runge-Kutta integration of the linear network, every tableau.

The numpy solver (:func:`erk_solve`) is the reference: the stepper
``methods.erk.ExplicitRK`` driven by the one adaptive loop ``methods.base.integrate``
(step-size control with Gustafsson's predictive step, initial step, output times or
dense output, stability cap, failure reporting: see that module).  On networks wide
enough that a layer's stage updates are cheaper kept as rank-C factors, the numpy
backend hands the tableau to the factored-stage stepper of ``_lowrank`` (see
:func:`linearnets.sim._lowrank.worth_factoring`), which enters the same loop through
:func:`adaptive_run`.

The numba backend runs the same algorithm compiled (:func:`erk_compiled`: the loop of
``methods/_erk_kernels.make_erk_advance`` through a model's cached entry point, for the
linear network ``models/_linear_kernels.erk_advance``), one call per output interval, so
there is no Python per step.  It uses the control constants of ``methods.base``
(re-exported here; :func:`stiffness_args` reads this module's ``STABILITY_SAFETY`` and
``STIFFNESS_MEMORY``, and so do the numpy solvers, so that a study may change them in
one place).  The two backends agree to the tolerance, not bit for bit: their products
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
from .methods.erk import ExplicitRK

__all__ = ["SAFETY", "MIN_FACTOR", "MAX_FACTOR", "PREDICTIVE_MIN_ERR", "MIN_STEP_ULPS",
           "STABILITY_SAFETY", "STIFFNESS_MEMORY", "STIFFNESS_MIN_REL", "STIFFNESS_STATE_ULPS",
           "stiffness_estimate",
           "stability_cap", "predictive_step", "NO_PREVIOUS_STEP", "accept_step",
           "select_initial_step",
           "error_norm", "erk_solve", "adaptive_run", "raw_result", "erk_fixed", "solve_numpy", "solve_numba",
           "compiled_result", "compiled_start", "erk_compiled", "chain_layout", "PENDING", "observe_step",
           "interpolates", "dense_target", "complete_pending", "STIFF", "NONSTIFF_RESET",
           "DENSE_BATCH_BYTES", "dense_batch_rows", "INTERRUPT_STEPS", "INTERRUPT_WORK",
           "MIN_CHUNK_STEPS",
           "chunk_budget", "advance_in_chunks", "stiff_fired"]

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
_EPS = float(np.finfo(np.float64).eps)


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


#: Return code of the compiled loops for an accepted step that reaches the next output
#: time in dense mode: its stages are kept for the caller to interpolate, and the caller
#: then completes the step (:func:`observe_step`).
PENDING = 1
#: Return code of the compiled loops whose stiffness test fired
#: (``SolverOptions.stiff_steps``, ``_kernels.count_stiff``).
STIFF = 2



def interpolates(options, tab):
    """Whether outputs are interpolated: dense output asked for, and ``tab`` has a
    continuous extension."""
    return options.dense and tab.dense_P is not None


def dense_target(t_eval, k, options, tab):
    """``(t_target, t_out)`` for the compiled loops: without dense output every output
    time ends a step (``t_out`` infinite); with it only the last does, and the loop
    returns :data:`PENDING` after the step that reaches ``t_out = t_eval[k]``."""
    if interpolates(options, tab):
        return float(t_eval[-1]), float(t_eval[k])
    return float(t_eval[k]), math.inf


def complete_pending(k, t_eval, th, y, y_new, interpolate, observe, fsal,
                     interpolate_many=None):
    """After a compiled loop returned :data:`PENDING`: observe the outputs inside the held
    step (:func:`observe_step`, ``interpolate(theta)``, ``interpolate_many(thetas)``), then
    complete the step as the loop would have -- ``y`` takes ``y_new``, ``fsal()`` moves
    ``f(y_new)`` into the first stage slot, the time becomes ``th[6]``.  Returns the next
    output index."""
    k = observe_step(k, t_eval, float(th[0]), float(th[5]), float(th[6]), y_new, interpolate,
                     observe, interpolate_many)
    y[:] = y_new
    fsal()
    th[0] = th[6]
    return k




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


def stiffness_args(tab, stiff_steps=0):
    """``(wd, stiff)`` for the compiled loops: the tableau's stiffness weights and
    ``[boundary, STABILITY_SAFETY, STIFFNESS_MEMORY, STIFFNESS_MIN_REL, sum |wd|,
    STIFFNESS_STATE_ULPS eps, NONSTIFF_RESET, stiff_steps]`` (``stiff_steps`` 0: no
    stiffness test, ``SolverOptions.stiff_steps``)."""
    wd = np.ascontiguousarray(tab.stiffness_weights, dtype=np.float64)
    stiff = np.array([tab.stability_boundary, STABILITY_SAFETY, STIFFNESS_MEMORY,
                      STIFFNESS_MIN_REL, float(np.abs(wd).sum()), STIFFNESS_STATE_ULPS * _EPS,
                      NONSTIFF_RESET, stiff_steps], dtype=np.float64)
    return wd, stiff


def compiled_start(first, rhs_args, y, t_eval, tab, options, observe, rhs=None):
    """:func:`_start` for a compiled loop: ``first()`` evaluates ``f(y)`` into the loop's
    own storage, the initial-step selection uses ``rhs(v, out, rhs_args)`` (a model's
    compiled right-hand side and its data tuple), by default the linear network's
    ``_kernels.rhs_flat(v, out, *rhs_args)``.

    Returns ``(early, th, stats)``: the loop's state ``th = [t, h, rho, h_prev,
    err_prev, h_step, t_new, n_stiff, n_nonstiff]`` (``h_step, t_new``: the step a
    :data:`PENDING` return holds; the last two: the counts of the stiffness test) and
    counters ``stats = [nfev, accepted, rejected, nonfinite, capped]``, unless the run ends
    here (``early``, as in :func:`_start`).
    """
    if rhs is None:
        from . import _kernels as kern  # numba compiles (or loads its cache) on first use only

        def dense_rhs(v, out):
            kern.rhs_flat(v, out, *rhs_args)
            return out
    else:
        def dense_rhs(v, out):
            rhs(v, out, rhs_args)
            return out

    with np.errstate(all="ignore"):
        early, h, nfev = _start(first, dense_rhs, y, t_eval, tab, options, observe)
    th = np.array([float(t_eval[0]), h, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    stats = np.array([nfev, 0, 0, 0, 0], dtype=np.int64)
    return early, th, stats


def erk_compiled(advance, rhs, data, y0, t_eval, tab, options, observe):
    """The numba twin of :func:`erk_solve` for any model: Python only at output times.

    ``advance`` is the model's cached entry point into the loop of
    ``methods._erk_kernels.make_erk_advance``, ``rhs(y, out, data)`` its compiled
    right-hand side (called from here for the first evaluation and the initial step)
    and ``data`` the tuple both take.  Same contract as :func:`erk_solve` (a RawResult).
    """
    from .methods import _erk_kernels as ek  # numba compiles (or loads its cache) on first use

    rtol, atol = float(options.rtol), float(options.atol)
    s = tab.n_stages
    n = y0.size
    T = t_eval.size
    y = np.array(y0, dtype=np.float64, copy=True)
    K = np.empty((s + 1, n))

    def first():
        rhs(y, K[0], data)
        return K[0]

    early, th, stats = compiled_start(first, data, y, t_eval, tab, options, observe, rhs=rhs)
    if early is not None:
        return early
    use_e3 = tab.e3 is not None
    e3 = tab.e3 if use_e3 else np.zeros_like(tab.e)
    y_new = np.empty(n)
    out = np.empty(n)
    wd, stiff = stiffness_args(tab, options.stiff_steps)

    def interpolate(theta):
        ek.stage_state(y, K, tab.dense_weights(theta), th[5], out)
        return out

    # the states of the outputs inside a step (observe_step passes at most this many)
    batch = np.empty((dense_batch_rows(n), n)) if interpolates(options, tab) else None

    def interpolate_many(thetas):
        ek.stage_states(y, K, tab.dense_weights(thetas), th[5], batch)
        return batch

    def fsal():
        K[0] = K[s]

    code = 0
    k = 1
    while k < T:
        t_target, t_out = dense_target(t_eval, k, options, tab)
        code = advance_in_chunks(
            lambda budget: advance(
                y, K, y_new, th, t_target, t_out, stats, budget, tab.A, tab.b, tab.e, e3, use_e3,
                -1.0 / (tab.error_order + 1), rtol, atol, SAFETY, MIN_FACTOR, MAX_FACTOR,
                PREDICTIVE_MIN_ERR, MIN_STEP_ULPS, wd, stiff, data),
            stats, options.max_steps, n, s)
        if code == PENDING:
            k = complete_pending(k, t_eval, th, y, y_new, interpolate, observe, fsal,
                                 interpolate_many)
            code = 0
            continue
        if code != 0:
            break
        observe(k, y)
        k += 1
        if stiff_fired(options, th):
            code = STIFF
            break
    return compiled_result(code, k, y, th, stats, options, tab.stability_boundary)


def _erk_numba(problem, y0, t_eval, tab, options, observe):
    """:func:`erk_compiled` on the linear network: the entry point
    ``models._linear_kernels.erk_advance`` with the data tuple :func:`numba_rhs_args`."""
    from .models import _linear_kernels as lk  # numba compiles (or loads its cache) on first use

    return erk_compiled(lk.erk_advance, lk.rhs, numba_rhs_args(problem), y0, t_eval, tab,
                        options, observe)


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


def stiff_fired(options, th):
    """Whether the stiffness test of a compiled loop (``th[7]``, ``_kernels.count_stiff``)
    has reached ``options.stiff_steps`` (a loop returning 0 on an output time leaves the
    count for its caller to read)."""
    return options.stiff_steps > 0 and th[7] >= options.stiff_steps


def compiled_result(code, k, y, th, stats, options, boundary=0.0):
    """The RawResult of a compiled loop from its return code, ``th = [t, h, rho, ...]`` and
    ``stats = [nfev, accepted, rejected, nonfinite, capped]``; ``k`` output times reached,
    ``boundary`` the tableau's stability boundary (for the message).  :data:`STIFF`
    gives a successful result with ``stiff=True`` and the proposed step ``th[1]``."""
    stiff = code == STIFF
    status = FlowStatus.SUCCESS if stiff else _STATUS_BY_CODE[code]
    t, h = float(th[0]), float(th[1])
    msg = (status.message if status.success
           else _failure_message(status, t, h, options.max_steps, bool(stats[3]), float(th[2]),
                                 boundary))
    return RawResult(k, t, y, int(stats[0]), int(stats[1]), int(stats[2]), status, msg,
                     stiff=stiff, h_next=h, ncapped=int(stats[4]))


_STATUS_BY_CODE = {st.code: st for st in FlowStatus}


def solve_numba(tab):
    """Build the numba-backend solver for tableau ``tab``: one compiled call per output interval."""
    def solver(problem, y0, t_eval, options, observe):
        from . import _lowrank
        if _lowrank.worth_factoring(problem, tab.n_stages):
            return _lowrank.lowrank_solve_numba(problem, y0, t_eval, tab, options, observe)
        return _erk_numba(problem, y0, t_eval, tab, options, observe)
    solver.__doc__ = (f"{tab.name} on the numba backend (whole stepping loop compiled; stages "
                      "in factored form where that saves work, see ``_lowrank``).")
    return solver


for _name, _tab in TABLEAUX.items():
    register_solver(_name, "numpy", solve_numpy(_tab))
    register_solver(_name, "numba", solve_numba(_tab))
