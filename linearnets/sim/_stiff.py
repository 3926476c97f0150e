"""Integration that is not limited by stability: a Rosenbrock-W method with matrix-free Krylov solves.

Why
---
Once the strong modes of a linear network have been learned they relax at a
rate ``O(eta L s^{2-2/L})``, while weaker modes may still sit on a plateau of
length ``~ sigma^{2-L}/s``.  An explicit method must keep ``h lambda_max`` inside
its (small) stability region, so its step is capped by the fast, converged
modes rather than by accuracy.  The Jacobian of gradient flow is
``-eta Hessian`` -- symmetric, with a real spectrum -- so a linearly implicit
method whose linear systems ``(I - h gamma J) x = b`` are solved by conjugate
gradients, with matrix-free Jacobian-vector products, removes that cap.

What
----
* :class:`Flow` -- the right-hand side and its exact Jacobian-vector product on an
  array module ``xp`` (numpy here; CuPy in ``_cupy.py`` runs the same code).
  With ``A_l = W_L...W_{l+1}`` (C x N_l), ``R_l = E W_1^T...W_{l-1}^T`` (C x N_{l-1}),
  ``dW_l/dt = eta_l A_l^T R_l``, the directional derivative along ``V = (V_1..V_L)`` is

      d(dW_l/dt) = eta_l (dA_l^T R_l + A_l^T dR_l),
      dA_{l-1} = dA_l W_l + A_l V_l  (dA_L = 0),  dW = dA_0,
      dE = -dW Sxx,  dR_1 = dE,  dR_{l+1} = dR_l W_l^T + R_l V_l^T,

  O(L) narrow (C-row) products, about twice a gradient, reusing ``A_l`` and ``R_l``
  from the gradient at the step's start.  The gradient is ``_rhs.rhs``'s
  (``_rhs.chain_products``, which keeps ``A_l^T`` and ``R_l = G_l``); the product
  carries the transposes ``dA_l^T`` the same way.
* :data:`ROS34PW2` -- the Rosenbrock-W method of Rang & Angermann, BIT 45 (2005)
  761-787: 4 stages, order 3, embedded order 2, L-stable, stiffly accurate, and of
  order 3 for *any* Jacobian approximation (a W-method), so inexact Krylov
  solves do not spoil its order.  Stored as data (``methods.rosw``); :func:`rosw_run` runs
  it as :class:`FlowRosenbrock` (``methods.rosw.RosenbrockWStepper`` with this exact
  product) in the one adaptive loop ``methods.base.integrate``.
* :func:`erk_run` -- an explicit embedded Runge-Kutta pair on ``xp``: the stepper
  ``methods.erk.ExplicitRK`` in the one adaptive loop ``methods.base.integrate``, with
  the stability cap of ``_explicit``: the stiffness ``rho = |f(y_new) - f(Y_s)| / |y_new - Y_s|``
  of Hairer & Wanner (``dop853.f``/``dopri5.f``, *Solving ODEs II* IV.2), from the
  last two evaluations at ``t + h``, caps the step at ``STABILITY_SAFETY * boundary / rho``.
  When the cap binds for ``STIFF_STEPS`` accepted steps in a row (stability, not
  accuracy, sets the step) the problem is declared stiff.
* Methods registered on the numpy backend: ``"ROS34PW2"`` and ``"auto"``
  (DOP853 until the stiffness test fires, then ROS34PW2, and back to DOP853 when
  that is cheaper per unit time by ``methods.base.SWITCH_BACK_MARGIN``).  Each switch back multiplies the stiff steps
  in a row that the next switch needs by ``SWITCH_BACKOFF``.
* The numba backend: ``"ROS34PW2"`` (:func:`solve_rosw_numba`) steps with
  :func:`rosw_run_compiled`, the algorithm of :func:`rosw_run` as one compiled loop
  (the runner ``methods.compiled.rosw`` on a :class:`CompiledFlow`: right-hand side
  and Jacobian-vector product compiled, the linear model's entry point in
  ``models/_linear_kernels``); ``"auto"`` (:func:`solve_auto_numba`) runs the same
  phases as on numpy, the DOP853 ones in the compiled explicit loops (whose stiffness
  test, ``SolverOptions.stiff_steps``, counts as :func:`erk_run` does), the ROS34PW2
  ones by :func:`rosw_run_compiled`.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from . import _explicit, _rhs
from ._explicit import select_initial_step, solve_numba
from ._solvers import FlowStatus, RawResult, register_solver
from ._tableaux import DOP853, TABLEAUX
from .methods import compiled
from .methods.base import StepperOptions, integrate
from .methods.erk import ExplicitRK
from .methods.rosw import (FAILED_SOLVE_ERR, KRYLOV_TOL, MAX_KRYLOV, RosenbrockW,  # noqa: F401
                           RosenbrockWStepper)
from .methods.rosw import ROS34PW2_TABLEAU as ROS34PW2
from .models.base import inverse_rates

__all__ = ["Flow", "RosenbrockW", "ROS34PW2", "KRYLOV_TOL", "MAX_KRYLOV", "STIFF_STEPS",
           "SWITCH_BACKOFF", "FlowRosenbrock", "rosw_run", "rosw_run_compiled", "erk_run", "solve",
           "solve_auto_numba", "solve_rosw_numba", "CompiledFlow"]

#: Largest step growth factor of the Rosenbrock stepper (``RosenbrockWStepper.MAX_FACTOR``).
ROSW_MAX_FACTOR = RosenbrockWStepper.MAX_FACTOR
#: Accepted steps in a row whose step the stability cap shortened before switching.
STIFF_STEPS = 15
#: Each switch back to the explicit pair (the Rosenbrock method proved dearer)
#: multiplies the stiff steps required before the next switch by this, so that a
#: problem the explicit pair handles best wastes a geometrically shrinking share
#: of its work on trial Rosenbrock phases.
SWITCH_BACKOFF = 4


# --------------------------------------------------------------------------------------------
# right-hand side and Jacobian-vector product on an array module
# --------------------------------------------------------------------------------------------
class Flow:
    """Gradient-flow right-hand side and its Jacobian-vector product on array module ``xp``.

    Parameters
    ----------
    problem : FlowProblem
    xp : module
        ``numpy`` or ``cupy`` (anything with their array API).

    Notes
    -----
    ``rhs(y, out, keep=True)`` stores the products of ``y`` (views into ``y`` and
    the C-row chains), which :meth:`jvp` then differentiates at ``y``: the caller
    must leave ``y`` unchanged while it uses :meth:`jvp`.
    """

    def __init__(self, problem, xp=np):
        self.xp = xp
        self.shapes = tuple(problem.shapes)
        self.offsets = [int(o) for o in problem.offsets]
        self.n = self.offsets[-1]
        self.eta = [float(e) for e in problem.eta_l]
        self.white = problem.white   # skip the product with Sxx = I
        self.Sxx = xp.asarray(problem.Sxx)
        self.Syx = xp.asarray(problem.Syx)
        self.base = None
        #: ``1 / eta`` per weight where the per-layer rates differ (else None): the inner
        #: product in which ``jvp`` is self-adjoint
        self.metric = inverse_rates(problem, self.eta, xp)
        self.nfev = 0
        self.njev = 0

    def views(self, y):
        """Layer views ``[W_1..W_L]`` into the flat vector ``y``."""
        o = self.offsets
        return [y[o[i]:o[i + 1]].reshape(self.shapes[i]) for i in range(len(self.shapes))]

    def rhs(self, y, out, keep=False):
        """Write ``dy/dt`` at ``y`` (n,) into ``out`` (n,) and return it (``_rhs.rhs``)."""
        self.nfev += 1
        Ws = self.views(y)
        At, G = _rhs.chain_products(Ws, self.Sxx, self.Syx, self.white)
        _rhs.velocity(At, G, self.eta, self.views(out), self.xp)
        if keep:
            self.base = (Ws, At, G)
        return out

    def jvp(self, v, out):
        """Write ``J(y) v`` into ``out``, ``y`` the state of the last ``rhs(..., keep=True)``."""
        xp = self.xp
        self.njev += 1
        Ws, At, G = self.base
        V = self.views(v)
        dWs = self.views(out)
        L = len(Ws)
        # dAt[i] = d(At[i]) = d(W_L ... W_{i+2})^T, dW^T = d(W_L ... W_1)^T
        dAt = [None] * L
        if L > 1:
            dAt[L - 2] = V[L - 1].T
            for i in range(L - 3, -1, -1):
                dAt[i] = Ws[i + 1].T @ dAt[i + 1] + V[i + 1].T @ At[i + 1]
            dWT = Ws[0].T @ dAt[0] + V[0].T @ At[0]
        else:
            dWT = V[0].T
        dG = -(dWT.T if self.white else (self.Sxx @ dWT).T)
        for i in range(L):
            if i > 0:
                dG = _rhs.times_transpose(dG, Ws[i - 1]) + G[i - 1] @ V[i - 1].T
            if i == L - 1:
                xp.multiply(dG, self.eta[i], out=dWs[i])
            else:
                # one product with inner dimension 2C: [dAt, At] [G; dG]
                left = xp.concatenate((dAt[i], At[i]), axis=1)
                right = xp.concatenate((G[i], dG), axis=0)
                if self.eta[i] != 1.0:
                    right *= self.eta[i]
                xp.matmul(left, right, out=dWs[i])
        return out


def CompiledFlow(problem):
    """:class:`Flow` with its right-hand side and Jacobian-vector product compiled: the
    Rosenbrock-W ops of ``models/_linear_ops.CompiledFlow`` (numba, on first use)."""
    from .models import _linear_ops  # numba compiles (or loads its cache) on first use
    return _linear_ops.CompiledFlow(problem)


# --------------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------------
class _Stats:
    __slots__ = ("nsteps", "nrej", "ncg", "stiff_at", "switches", "capped")

    def __init__(self):
        self.nsteps = self.nrej = self.ncg = self.switches = self.capped = 0
        self.stiff_at = None


def initial_step(flow, y, f0, t0, t_end, error_order, rtol, atol):
    """Hairer-Norsett-Wanner's initial step (``_explicit.select_initial_step``) on ``flow.xp``."""
    xp = flow.xp
    return select_initial_step(lambda v: flow.rhs(v, xp.empty_like(v)), t0, y, f0, t_end,
                               error_order, rtol, atol, xp=xp)


def _switches(stats):
    """What an ``"auto"`` run appends to its message: where it first switched, and how
    often (nothing if it never did)."""
    if stats.stiff_at is None:
        return ""
    return (f" (stiff from t={stats.stiff_at:.6g}: switched DOP853 -> ROS34PW2; "
            f"{stats.switches} switch(es) in all)")


def _failure(status, t, h, max_steps):
    if status is FlowStatus.MAX_STEPS:
        return f"{status.message} ({max_steps} attempted steps) at t={t:.6g}"
    return f"{status.message} at t={t:.6g} (h={h:.3g})"


# --------------------------------------------------------------------------------------------
# the Rosenbrock-W stepper on a Flow
# --------------------------------------------------------------------------------------------
class FlowRosenbrock(RosenbrockWStepper):
    """``methods.rosw.RosenbrockWStepper`` on a :class:`Flow` (or :class:`CompiledFlow`), with
    its exact Jacobian-vector product.

    ``flow.jvp`` differentiates at the state of the latest ``flow.rhs(..., keep=True)``:
    ``f(y_new)`` of an accepted step is evaluated with ``keep=True``, so the next step's
    Jacobian comes free, and a step from any other state first evaluates there with
    ``keep=True`` (counted with that attempt).  A product costs about two right-hand
    sides (:attr:`JVP_COST`), and ``f(y_new)`` of a rejected step is not evaluated.

    Parameters
    ----------
    flow : Flow or CompiledFlow
    rtol, atol : float
    tab : RosenbrockW

    CG runs in the inner product of ``flow.metric`` (``1 / eta`` per weight where the
    per-layer rates differ), in which ``J`` is self-adjoint.
    """

    JVP_COST = 2.0
    EVALUATE_REJECTED = False

    def __init__(self, flow, rtol, atol, tab=ROS34PW2):
        self.tableau = tab
        self.metric = flow.metric
        super().__init__(None, flow.n, rtol, atol, flow.xp, fun=flow.rhs)
        self.flow = flow
        self._kept = None
        self._jv = flow.xp.empty(flow.n)

    def evaluate(self, t, y):
        """``f(y)``, its products kept for the Jacobian of a step from ``y``."""
        out = self.flow.rhs(y, self.xp.empty_like(y), keep=True)
        self._kept = y
        return out

    def _freeze(self, t, y, f):
        if self._kept is not y:
            self.flow.rhs(y, self._jv, keep=True)
            self._kept = y
            self._frozen_evals += 1
        flow, jv = self.flow, self._jv
        return lambda v: flow.jvp(v, jv)


def rosw_fixed_step(flow, y, h, tab=ROS34PW2, tol=1e-10):
    """One step with tight Krylov solves and no error control (convergence checks only)."""
    stepper = FlowRosenbrock(flow, 1e-3, 1e-3, tab)
    stepper.krylov_tol = tol
    y = flow.xp.array(y, copy=True)
    f0 = stepper.evaluate(0.0, y)
    y_new, _, err = stepper.attempt(0.0, y, f0, h)
    if err == FAILED_SOLVE_ERR:
        raise RuntimeError("Krylov solve failed")
    return y_new


def rosw_run(flow, y, t, h, t_eval, k, options, observe, stats, tab=ROS34PW2,
             switch_back=None):
    """Advance ``y`` from ``t`` over ``t_eval[k:]`` with the Rosenbrock-W method ``tab``.

    :class:`FlowRosenbrock` in the one adaptive loop ``methods.base.integrate``, with the
    predictive controller (as the explicit pairs): each step freezes the exact Jacobian
    at its start, solves the stage systems by conjugate gradients and controls the local
    error with the embedded solution; output times are hit exactly.  The step budget
    ``options.max_steps`` is shared with the steps already in ``stats``.

    With ``switch_back = tab_explicit`` the run stops early, returning ``nonstiff=True``,
    once for ``STIFF_STEPS`` accepted steps in a row the explicit pair would have
    advanced more cheaply (``integrate(switch_back=...)``: its ``s`` right-hand sides
    per step of ``min(h, boundary / rho)``, ``rho`` the Krylov solves' Rayleigh quotient,
    by the margin ``SWITCH_BACK_MARGIN``, against this method's right-hand sides plus
    two per Jacobian-vector product, per unit time).

    Returns
    -------
    (status, t, y, h, k, nonstiff)
    """
    stepper = FlowRosenbrock(flow, options.rtol, options.atol, tab)
    opts = StepperOptions(rtol=float(options.rtol), atol=float(options.atol),
                          max_steps=int(options.max_steps) - stats.nsteps - stats.nrej,
                          first_step=h)
    res = integrate(None, y, t_eval, lambda *_: stepper, opts, observe, t0=t, xp=flow.xp,
                    k0=k, predictive=True, switch_back=switch_back,
                    switch_steps=STIFF_STEPS if switch_back is not None else 0)
    stats.nsteps += res.nsteps
    stats.nrej += res.nrejected
    stats.ncg += stepper.n_jvp
    return res.status, res.t_last, res.y_last, res.h_next, res.n_done, res.nonstiff


def rosw_run_compiled(flow, y, t, h, t_eval, k, options, observe, stats, tab=ROS34PW2,
                      switch_back=None):
    """:func:`rosw_run` with its stepping compiled: the runner ``methods.compiled.rosw`` on
    the ops of a :class:`CompiledFlow` ``flow`` (its entry point into
    ``methods/_rosw_kernels.make_rosw_advance``'s loop), one call per output time.

    Same arguments, contract and return value ``(status, t, y, h, k, nonstiff)``; the
    counters of ``flow`` (``nfev``, ``njev``) and ``stats`` advance as they would there.
    The algorithm is that of :func:`rosw_run`; the steps differ only where the rounding
    of the inner products (``np.dot`` or loops in compiled code against numpy's ``vdot``)
    flips a decision.
    """
    opts = StepperOptions(rtol=float(options.rtol), atol=float(options.atol),
                          max_steps=int(options.max_steps) - stats.nsteps - stats.nrej,
                          first_step=h)
    njev = flow.njev
    res = compiled.rosw(flow, y, t_eval, tab, opts, observe, t0=t, k0=k,
                        switch_back=switch_back,
                        switch_steps=STIFF_STEPS if switch_back is not None else 0)
    stats.nsteps += res.nsteps
    stats.nrej += res.nrejected
    stats.ncg += flow.njev - njev
    return res.status, res.t_last, res.y_last, res.h_next, res.n_done, res.nonstiff


# --------------------------------------------------------------------------------------------
# explicit stepper with the stiffness test
# --------------------------------------------------------------------------------------------
def erk_run(flow, y, t, h, t_eval, k, tab, options, observe, stats, detect_stiffness=False,
            stiff_steps=STIFF_STEPS, f0=None):
    """Advance ``y`` from ``t`` over ``t_eval[k:]`` with the embedded explicit pair ``tab``.

    ``methods.erk.ExplicitRK`` on ``flow.xp`` in the loop ``methods.base.integrate``, with
    the controls of ``_explicit.erk_solve`` (predictive step, stability cap, dense output
    with ``options.dense``), from the first step ``h``; ``f0`` is ``f(y)`` if the caller
    has it (else it is evaluated here).  With ``detect_stiffness`` the run stops early,
    returning ``stiff=True``, once the cap has bound (the accuracy controller asked for
    a longer step than stability allows) for ``stiff_steps`` accepted steps in a row.
    The step budget ``options.max_steps`` is shared with the steps already in ``stats``.

    Returns
    -------
    (status, t, y, h, k, stiff)
    """
    xp = flow.xp
    stepper = ExplicitRK(None, y.size, options.rtol, options.atol, xp, fun=flow.rhs,
                         tableau=tab)
    opts = StepperOptions(rtol=float(options.rtol), atol=float(options.atol),
                          max_steps=int(options.max_steps) - stats.nsteps - stats.nrej,
                          first_step=h)
    res = integrate(None, y, t_eval, lambda *_: stepper, opts, observe, t0=t, xp=xp,
                    f0=f0, k0=k, predictive=True, cap_safety=_explicit.STABILITY_SAFETY,
                    stiffness_memory=_explicit.STIFFNESS_MEMORY,
                    stiff_steps=int(stiff_steps) if detect_stiffness else 0,
                    dense=options.dense)
    stats.nsteps += res.nsteps
    stats.nrej += res.nrejected
    stats.capped += res.ncapped
    if res.stiff and stats.stiff_at is None:
        stats.stiff_at = res.t_last
    return res.status, res.t_last, res.y_last, res.h_next, res.n_done, res.stiff


# --------------------------------------------------------------------------------------------
# solvers (the _solvers interface), generic in the array module
# --------------------------------------------------------------------------------------------
def solve(problem, y0, t_eval, options, observe, method="ROS34PW2", xp=np, to_host=None,
          flow=None, rosw=rosw_run):
    """Integrate on array module ``xp`` with ``method``: "ROS34PW2", "auto" or a ``TABLEAUX`` name.

    ``to_host`` converts a device vector to numpy (identity for numpy); ``observe``
    always receives numpy arrays.  ``flow`` (default ``Flow(problem, xp)``) and
    ``rosw`` (:func:`rosw_run` or :func:`rosw_run_compiled`) choose the right-hand
    side and the Rosenbrock stepper.  Returns a :class:`RawResult` with ``y_last`` on
    the host.
    """
    to_host = to_host or (lambda a: a)
    flow = Flow(problem, xp) if flow is None else flow
    stats = _Stats()
    y = xp.array(y0, dtype=xp.float64, copy=True)
    t = float(t_eval[0])
    T = t_eval.size

    def obs(k, v):
        observe(k, to_host(v))

    f0 = flow.rhs(y, xp.empty_like(y))
    obs(0, y)
    if not bool(xp.all(xp.isfinite(f0))):
        st = FlowStatus.NONFINITE
        return RawResult(1, t, to_host(y), flow.nfev, 0, 0, st, _failure(st, t, 0.0, options.max_steps))
    if T == 1:
        return RawResult(1, t, to_host(y), flow.nfev, 0, 0, FlowStatus.SUCCESS,
                         FlowStatus.SUCCESS.message)
    explicit = TABLEAUX.get(method) if method != "auto" else DOP853
    order = explicit.error_order if explicit is not None else ROS34PW2.error_order
    if options.first_step is not None:
        h = float(options.first_step)
    else:
        with np.errstate(all="ignore"):
            h = initial_step(flow, y, f0, t, float(t_eval[-1]), order, options.rtol, options.atol)
    k = 1
    auto = method == "auto"
    with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
        if explicit is None:
            status, t, y, h, k, _ = rosw(flow, y, t, h, t_eval, k, options, obs, stats)
        else:
            stiff = True
            status = FlowStatus.SUCCESS
            backs = 0      # switches back to the explicit pair so far
            first = f0     # f(y) at the start is known; after a stiff phase it is not
            while stiff and status.success and k < T:
                status, t, y, h, k, stiff = erk_run(flow, y, t, h, t_eval, k, explicit, options,
                                                    obs, stats, detect_stiffness=auto,
                                                    stiff_steps=STIFF_STEPS * SWITCH_BACKOFF ** backs,
                                                    f0=first)
                first = None
                if stiff and status.success and k < T:
                    stats.switches += 1
                    status, t, y, h, k, stiff = rosw(flow, y, t, h, t_eval, k, options, obs,
                                                     stats, switch_back=explicit)
                    stats.switches += stiff
                    backs += stiff
    msg = status.message if status.success else _failure(status, t, h, options.max_steps)
    if auto:
        msg += _switches(stats)
    # one Jacobian-vector product costs about two right-hand sides: report both in nfev
    return RawResult(k, t, to_host(y), flow.nfev + 2 * flow.njev, stats.nsteps, stats.nrej,
                     status, msg, ncapped=stats.capped)


def solve_auto_numba(problem, y0, t_eval, options, observe):
    """``"auto"`` on the numba backend: the phases of :func:`solve` with ``method="auto"``,
    the DOP853 phases in the compiled loops (``_explicit``/``_lowrank``, stiffness test
    ``SolverOptions.stiff_steps``), the ROS34PW2 phases by :func:`rosw_run_compiled` on a
    :class:`CompiledFlow`.

    Each explicit phase starts afresh from the state the Rosenbrock phase left (one
    evaluation of ``f``, as in :func:`solve`); its first output is that state, not an
    output time, and is not observed.
    """
    explicit = solve_numba(DOP853)
    flow = CompiledFlow(problem)
    stats = _Stats()
    T = t_eval.size
    y, t, h, k = y0, float(t_eval[0]), options.first_step, 0
    nfev = 0
    backs = 0
    status = FlowStatus.SUCCESS
    msg = None
    with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
        while True:
            # an explicit phase over the outputs k.. from (t, y); output 0 is the start
            grid = t_eval if k == 0 else np.concatenate(([t], t_eval[k:]))
            shift = 0 if k == 0 else k - 1
            opts = replace(options, first_step=h,
                           max_steps=options.max_steps - stats.nsteps - stats.nrej,
                           stiff_steps=STIFF_STEPS * SWITCH_BACKOFF ** backs)

            def obs(j, v, shift=shift, start=k):
                if start == 0 or j > 0:
                    observe(shift + j, v)

            raw = explicit(problem, y, grid, opts, obs)
            nfev += raw.nfev
            stats.nsteps += raw.nsteps
            stats.nrej += raw.nrejected
            stats.capped += raw.ncapped
            k, t, y, h = shift + raw.n_done, raw.t_last, raw.y_last, raw.h_next
            status = raw.status
            if not status.success:
                # the phase's budget was what the run had left: report the run's
                msg = (_failure(status, t, h, options.max_steps)
                       if status is FlowStatus.MAX_STEPS else raw.message)
                break
            if not raw.stiff or k >= T:
                break
            if stats.stiff_at is None:
                stats.stiff_at = t
            stats.switches += 1
            status, t, y, h, k, back = rosw_run_compiled(flow, y, t, h, t_eval, k, options,
                                                         observe, stats, switch_back=DOP853)
            if not status.success:
                msg = _failure(status, t, h, options.max_steps)
                break
            if not back or k >= T:
                break
            stats.switches += 1
            backs += 1
    msg = (msg if msg is not None else status.message) + _switches(stats)
    return RawResult(k, t, np.array(y), nfev + flow.nfev + 2 * flow.njev, stats.nsteps,
                     stats.nrej, status, msg, ncapped=stats.capped)


def _numpy_solver(method):
    def solver(problem, y0, t_eval, options, observe):
        return solve(problem, y0, t_eval, options, observe, method=method, xp=np)
    solver.__doc__ = f"{method} on the numpy backend (linearnets.sim._stiff)."
    return solver


register_solver("ROS34PW2", "numpy", _numpy_solver("ROS34PW2"))


def solve_rosw_numba(problem, y0, t_eval, options, observe):
    """ROS34PW2 on the numba backend: :func:`solve` on a :class:`CompiledFlow`, stepped by
    :func:`rosw_run_compiled` (the whole stepping loop compiled)."""
    return solve(problem, y0, t_eval, options, observe, method="ROS34PW2",
                 flow=CompiledFlow(problem), rosw=rosw_run_compiled)


register_solver("ROS34PW2", "numba", solve_rosw_numba)
register_solver("auto", "numpy", _numpy_solver("auto"))
register_solver("auto", "numba", solve_auto_numba)
