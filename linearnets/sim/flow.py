"""The public gradient-flow integrator for deep linear networks.

:func:`gradient_flow` integrates

    dW_l/dt = eta (W_L ... W_{l+1})^T E (W_{l-1} ... W_1)^T ,   E = Syx - W Sxx ,

the exact gradient flow of the loss ``(1/2P) sum_mu |y_mu - W x_mu|^2`` with
``W = W_L ... W_1``, for any depth and widths.  The data enter only through
``Sxx = X^T X / P`` and ``Syx = Y^T X / P``, computed once.  The integration
methods live in a registry (``_solvers``): adaptive embedded Runge-Kutta pairs
``"RK45"`` (Dormand-Prince 5(4)), ``"DOP853"`` (Hairer's 8(5,3)) and
``"SSPRK104"`` (Ketcheson's ten-stage SSP method, order 4, with an order-3
estimate; run in its two-register low-storage form, ``_lowstorage``) on the
``"numpy"`` and ``"numba"`` backends, plus whatever other modules register.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .. import backend as _backend
from .._validation import as_float_array, check_int, check_matrix, check_positive, overflow_check
from . import _rhs
from ._solvers import FlowStatus, SolverOptions, backends_for, get_solver
from ._tableaux import TABLEAUX
from .network import check_weights
from .ntk import _ntk

__all__ = ["gradient_flow", "Trajectory", "FlowStatus", "FlowWarning", "FlowError",
           "RECORDABLE", "DEFAULT_MAX_STEPS", "DEFAULT_METHOD", "DENSE_METHODS"]

#: Quantities that ``record=`` can ask for.
RECORDABLE = ("weights", "modes", "conservation", "ntk")

#: Methods with a continuous extension for ``dense=True`` (``Tableau.dense_P``).
DENSE_METHODS = tuple(name for name, tab in TABLEAUX.items() if tab.dense_P is not None)

#: Default budget of attempted steps.
DEFAULT_MAX_STEPS = 1_000_000

#: Default method of :func:`gradient_flow`: ``"auto"`` (DOP853, switching to the L-stable
#: ROS34PW2 where converged modes hold DOP853's step at its stability limit, and back).
#: Until that happens it is DOP853 itself (on numba the same compiled loop), so it is never
#: much slower than DOP853 (``benchmarks/bench_flow.py --quick``: 0.97-1.0x its time on the
#: small and medium problems), while a run far past convergence ("train to convergence"
#: with a generous horizon) costs it little: on the 10-20-20-1 network of issue 23 to
#: t = 1e8 DOP853 spends 12 million evaluations (173 s) and fails, auto finishes in ~1 s.
DEFAULT_METHOD = "auto"

#: Smallest accepted rtol: below it the error estimate is dominated by rounding.
MIN_RTOL = 100 * np.finfo(np.float64).eps
#: rtol must be below this: a local error of the size of the state itself is no control
#: (DOP853 at rtol 5 recorded a loss of 9.7e18 after starting at 0.448).
MAX_RTOL = 1.0
#: atol must be below this: an absolute error of one per weight and step is no control on
#: networks whose weights are O(1) or smaller (small initialisation).
MAX_ATOL = 1.0
#: An output whose loss exceeds the initial loss by more than this factor (and by more than
#: the rounding of the loss, BREAKDOWN_ROUNDING of its terms) is not a state of gradient flow,
#: whose loss never increases: the step control has broken down there, and neither it nor
#: any later state is recorded (``FlowStatus.BREAKDOWN``).
BREAKDOWN_RISE = 10.0
BREAKDOWN_ROUNDING = 1e-6

#: A successful explicit run whose stability cap shortened at least this many steps,
#: and at least CAPPED_HINT_SHARE of them, says so in its message and names the method
#: that is not held there.  (Below a thousand such steps the run costs little anyway:
#: a switch to ROS34PW2 itself waits for 15 capped steps in a row.)
CAPPED_HINT_STEPS = 1000
CAPPED_HINT_SHARE = 0.5


class FlowWarning(RuntimeWarning):
    """Issued by :func:`gradient_flow` when a run fails (``Trajectory.success`` False: step
    budget spent, step-size underflow, non-finite state, step control broken down), unless
    ``raise_on_failure=True``.  Attributed to the first caller outside ``linearnets``."""


class FlowError(RuntimeError):
    """Raised by ``gradient_flow(..., raise_on_failure=True)`` for a failed run; the
    :class:`Trajectory` (outputs reached, status, message) is its ``trajectory``."""

    def __init__(self, message, trajectory):
        super().__init__(message)
        self.trajectory = trajectory


_QUIET = threading.local()


@contextlib.contextmanager
def _reported_once():
    """Inner :func:`gradient_flow` calls (a model that runs the linear loops) report no
    failure: the outer call reports the result it returns."""
    _QUIET.depth = getattr(_QUIET, "depth", 0) + 1
    try:
        yield
    finally:
        _QUIET.depth -= 1


def _outside_stacklevel():
    """The ``stacklevel`` of a warning issued here that names the first frame outside the
    package (a user's call, not the module of ``linearnets`` that passed it on)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _report_failure(traj, raise_on_failure):
    """``traj``; a failed run warns (:class:`FlowWarning`) or raises (:class:`FlowError`)."""
    if traj.success or getattr(_QUIET, "depth", 0) > 0:
        return traj
    msg = f"gradient flow failed: {traj.message}"
    if raise_on_failure:
        raise FlowError(msg, traj)
    warnings.warn(f"{msg} (the outputs reached are kept, later ones are NaN; "
                  f"raise_on_failure=True raises instead)", FlowWarning,
                  stacklevel=_outside_stacklevel())
    return traj


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Result of :func:`gradient_flow` (immutable; every array is owned and read-only).

    If the run failed (``success`` False), rows of the time-indexed arrays after
    the last reached output time are NaN (shapes never change), ``weights`` is
    the last accepted state, at time ``t_last``.

    Attributes
    ----------
    t : ndarray, shape (T,)
        The requested output times, since initialisation (the weights passed in are the
        state at t = 0).
    loss : ndarray, shape (T,)
        ``(1/2P) |Y - X W(t)^T|_F^2``.
    end_to_end : ndarray, shape (T, C, D)
        ``W_L(t) ... W_1(t)``.
    weights : tuple of ndarray
        Final ``(W_1, ..., W_L)``.
    t_last : float
        Time of ``weights`` (``t[-1]`` on success).
    nfev, nsteps, nrejected : int
        Right-hand-side evaluations, accepted steps, rejected steps.
    success : bool
    status : FlowStatus
        ``status.code`` (0 = success) and ``status.message``.
    message : str
        What happened, with the time where a failed run stopped.
    method, backend : str
        The method and the concrete backend that ran.
    dense : bool
        Whether output times inside a step were interpolated (``dense=True``) rather
        than stepped onto.
    weights_t : tuple of ndarray (T, N_l, N_{l-1}), or None
        Recorded with ``record=("weights",)``.
    modes : ndarray, shape (T, r), or None
        ``c_alpha(t) = u_alpha^T W(t) v_alpha`` along the SVD
        ``Syx = sum s_alpha u_alpha v_alpha^T``, ``r = min(C, D)`` (record ``"modes"``);
        ``mode_s`` (r,), ``mode_u`` (C, r), ``mode_v`` (D, r) give the singular values
        and vectors.
    conservation : ndarray, shape (T,), or None
        ``max_l |W_{l+1}^T W_{l+1} - W_l W_l^T - (same at t = 0)|_F``, zero for the
        exact flow: an accuracy diagnostic (record ``"conservation"``; zeros for L = 1).
    ntk : ndarray, shape (T, Q, Q) or (T, Q, Q, C, C), or None
        Empirical NTK on the probe inputs (``probe=`` or record ``"ntk"``).
    ntk_norm : ndarray, shape (T,), or None
        Its Frobenius norm.
    ntk_alignment : ndarray, shape (T,), or None
        Kernel-target alignment ``y^T K y / (|K|_F |y|^2)`` with the probe targets
        (outputs flattened sample-major for C > 1); None without targets.
    biases : tuple of ndarray (N_l,), or None
        Final trained hidden biases ``(b_1, ..., b_{L-1})`` (``biases=`` given).
    biases_t : tuple of ndarray (T, N_l), or None
        Recorded with ``record=("weights",)`` when the network has biases.
    outputs : ndarray, shape (T, Q, C), or None
        ``F`` on the probe inputs (on the training inputs without a probe), recorded with
        ``record=("outputs",)``.
    t_stop : float or None
        Where the stop rule (``stop=``) fired; the outputs from then on are the stopped
        state.  None if it did not fire (or no rule was given).
    kinks, sliding_time, fallback_steps : int, float, int
        Piecewise-smooth (ReLU-type) networks: switches of training pre-activations
        crossed by accepted steps, the time covered by runs of consecutive crossing
        steps (chattering along a kink: sliding), and the steps taken there by the
        low-order pair (``linearnets.sim.methods.base``).  0 for smooth networks.
    weights0, biases0 : tuple of ndarray, or None
        The parameters at t = 0 (for regime diagnostics such as the relative change
        per layer); ``biases0`` is None without trained biases.
    """

    t: np.ndarray
    loss: np.ndarray
    end_to_end: np.ndarray
    weights: tuple
    t_last: float
    nfev: int
    nsteps: int
    nrejected: int
    success: bool
    status: FlowStatus
    message: str
    method: str
    backend: str
    weights_t: Optional[tuple] = None
    modes: Optional[np.ndarray] = None
    mode_s: Optional[np.ndarray] = None
    mode_u: Optional[np.ndarray] = None
    mode_v: Optional[np.ndarray] = None
    conservation: Optional[np.ndarray] = None
    ntk: Optional[np.ndarray] = None
    ntk_norm: Optional[np.ndarray] = None
    ntk_alignment: Optional[np.ndarray] = None
    dense: bool = False
    biases: Optional[tuple] = None
    biases_t: Optional[tuple] = None
    outputs: Optional[np.ndarray] = None
    t_stop: Optional[float] = None
    kinks: int = 0
    sliding_time: float = 0.0
    fallback_steps: int = 0
    weights0: Optional[tuple] = None
    biases0: Optional[tuple] = None

    def __post_init__(self):
        for name in ("t", "loss", "end_to_end", "modes", "mode_s", "mode_u", "mode_v",
                     "conservation", "ntk", "ntk_norm", "ntk_alignment", "outputs"):
            a = getattr(self, name)
            if a is not None:
                a.setflags(write=False)
        for group in (self.weights, self.weights_t, self.biases, self.biases_t, self.weights0,
                      self.biases0):
            for a in group or ():
                a.setflags(write=False)

    @property
    def depth(self) -> int:
        return len(self.weights)


def _end_to_end_of(problem, backend):
    """``(f, many)``: ``f(y, out)`` writes the end-to-end map (C, D) of the flat state ``y``
    into ``out``, ``many(Ys, out)`` those of the rows of ``Ys`` (m, n) into ``out`` (m, C, D).

    On the numba backend compiled products (``_kernels.end_to_end``, ``end_to_end_many``):
    there the loop's BLAS threads may still be spinning when an output is observed, and
    numpy's BLAS, another library with threads of its own, would contend with them for
    the cores.
    """
    if backend == "numba":
        from . import _kernels
        from ._explicit import chain_layout

        rows, cols, offs, _, _ = chain_layout(problem)
        buf = np.empty(2 * problem.Syx.shape[0] * int(cols.max()))

        def compiled(y, out):
            _kernels.end_to_end(np.ascontiguousarray(y, dtype=np.float64), rows, cols, offs,
                                out, buf)

        def compiled_many(Ys, out):
            _kernels.end_to_end_many(np.ascontiguousarray(Ys, dtype=np.float64), rows, cols,
                                     offs, out, buf)
        return compiled, compiled_many

    def reference(y, out):
        out[...] = _rhs.end_to_end_flat(y, problem.shapes, problem.offsets)

    def reference_many(Ys, out):
        for y, o in zip(Ys, out):
            reference(y, o)
    return reference, reference_many


def _balance_drift_of(problem, backend):
    """``f(y, Wl, first)``: ``max_l |W_{l+1}^T W_{l+1} - W_l W_l^T - (same at the first
    call)|_F`` of the flat state ``y`` (layer views ``Wl``), 0 at the first call and for
    L = 1.  Compiled on the numba backend (``_kernels.balance_drift``), for the reason
    given in :func:`_end_to_end_of`."""
    L = len(problem.shapes)
    if backend == "numba":
        from . import _kernels
        from ._explicit import chain_layout

        rows, cols, offs, _, _ = chain_layout(problem)
        sq = [int(r) * int(r) for r in rows[:-1]]
        goffs = np.concatenate(([0], np.cumsum(sq))).astype(np.int64)
        gram, gram0 = np.empty(goffs[-1]), np.empty(goffs[-1])
        tmp = np.empty(max(sq, default=0))

        def compiled(y, Wl, first):
            return float(_kernels.balance_drift(np.ascontiguousarray(y, dtype=np.float64), rows,
                                                cols, offs, gram, gram0, goffs, first, tmp))
        return compiled

    gram0 = []

    def reference(y, Wl, first):
        grams = [Wl[i + 1].T @ Wl[i + 1] - Wl[i] @ Wl[i].T for i in range(L - 1)]
        if first:
            gram0[:] = grams
        return max((np.linalg.norm(g - g0) for g, g0 in zip(grams, gram0)), default=0.0)
    return reference


def _probe_ntk_of(problem, backend, Xp):
    """``f(y, Wl)``: the empirical NTK on the probe inputs ``Xp`` (Q, D) of the flat state
    ``y`` (layer views ``Wl``), (Q, Q) for one output, (Q, Q, C, C) for C.  Compiled on the
    numba backend (``_kernels.probe_ntk``), for the reason given in :func:`_end_to_end_of`."""
    if backend == "numba":
        from . import _kernels
        from ._explicit import chain_layout

        rows, cols, offs, _, _ = chain_layout(problem)
        C = problem.Syx.shape[0]
        Q = Xp.shape[0]
        Xc = np.ascontiguousarray(Xp, dtype=np.float64)
        width = int(cols.max())
        out = np.empty((Q, Q, C, C))
        abuf, hbuf = np.empty(2 * C * width), np.empty(2 * Q * width)
        tt, hh = np.empty((len(problem.shapes), C, C)), np.empty((Q, Q))

        def compiled(y, Wl):
            _kernels.probe_ntk(np.ascontiguousarray(y, dtype=np.float64), rows, cols, offs, Xc,
                               out, abuf, tt, hbuf, hh)
            return out[:, :, 0, 0] if C == 1 else out
        return compiled

    def reference(y, Wl):
        return _ntk(Wl, Xp, Xp)
    return reference


class _BreakdownGuard:
    """Watches the loss at the outputs of a run for a rise no controlled integration of
    gradient flow makes (:data:`BREAKDOWN_RISE`): the loss, a quadratic form in the
    end-to-end map, is evaluated from the sufficient statistics (``O(C D^2)`` a map; its
    cancellation is far below the rise it looks for).  ``broken`` is the first output that
    rose (None while none has), ``last_y`` a copy of the last state before it."""

    def __init__(self, problem):
        self.Sxx, self.Syx = problem.Sxx, problem.Syx
        self.syy = 0.5 * float(np.sum(problem.Y * problem.Y)) / problem.P
        self.loss0 = None
        self.loss_bad = None
        self.broken = None
        self.last_y = None

    def _losses(self, W):
        # 1/2 tr(W Sxx W^T) - tr(W Syx^T) + 1/2 tr Syy, and the size of its terms
        quad = 0.5 * np.einsum("kcd,de,kce->k", W, self.Sxx, W)
        lin = np.einsum("kcd,cd->k", W, self.Syx)
        return quad - lin + self.syy, np.abs(quad) + np.abs(lin) + self.syy

    def rose(self, k, W, states):
        """Check the outputs ``k, k + 1, ...`` with maps ``W`` (m, C, D) and states (m, n)
        or (n,); True (and ``broken`` set) if one rose."""
        states = np.asarray(states)
        states = states[None] if states.ndim == 1 else states
        loss, size = self._losses(W)
        if self.loss0 is None:
            self.loss0 = float(loss[0])
        with np.errstate(invalid="ignore"):
            bad = ~((loss - self.loss0 <= max((BREAKDOWN_RISE - 1.0) * self.loss0, 0.0))
                    | (loss - self.loss0 <= BREAKDOWN_ROUNDING * size))
        if (k == 0 and not bad[1:].any()) or not bad.any():
            self.last_y = np.array(states[-1], dtype=np.float64, copy=True)
            return False
        i = int(np.argmax(bad))
        if i == 0 and k == 0:
            i = int(np.argmax(bad[1:])) + 1
        self.broken = k + i
        self.loss_bad = float(loss[i])
        if i > 0:
            self.last_y = np.array(states[i - 1], dtype=np.float64, copy=True)
        return True


def _check_t_eval(t_eval):
    """``t_eval`` as a float64 (T,) array: times since initialisation, strictly increasing
    and ``>= 0`` (a ``ValueError`` naming ``t_eval`` otherwise)."""
    t = as_float_array(t_eval, "t_eval", ndim=(0, 1)).reshape(-1)
    if t.size == 0:
        raise ValueError("t_eval must contain at least one time")
    if t.size > 1 and not np.all(np.diff(t) > 0):
        raise ValueError("t_eval must be strictly increasing")
    if t[0] < 0:
        raise ValueError(f"t_eval: times are measured from initialisation (the weights are the "
                         f"state at t = 0) and must be >= 0, got {t[0]!r}")
    return np.ascontiguousarray(t)


def solver_times(t_eval):
    """``(t_solve, skip)``: the times a solver integrates through for the checked output
    times ``t_eval`` -- from t = 0, the time of the initial weights, so a leading 0 is
    prepended where ``t_eval[0] > 0`` -- and how many leading solver outputs (0 or 1) are
    not outputs of the run."""
    if t_eval[0] > 0:
        return np.concatenate(([0.0], t_eval)), 1
    return t_eval, 0


def _check_data(X, Y, shapes):
    """``X`` (P, D) and ``Y`` (P, C) as float64 with P >= 1 and the D and C of the layer
    ``shapes`` (``ValueError`` naming X or Y)."""
    X = check_matrix(X, "X")
    if X.shape[0] < 1:
        raise ValueError("X must hold at least one sample (P >= 1 rows), got P = 0")
    Y = as_float_array(Y, "Y", ndim=(1, 2))
    Y = np.ascontiguousarray(Y.reshape(-1, 1) if Y.ndim == 1 else Y)
    D, C = shapes[0][1], shapes[-1][0]
    if X.shape[1] != D:
        raise ValueError(f"X has {X.shape[1]} columns but weights[0] expects D={D}")
    if D < 1 or Y.shape[1] < 1:
        raise ValueError(f"X and Y need at least one column each (D >= 1 inputs, C >= 1 "
                         f"outputs), got X {X.shape}, Y {Y.shape}")
    overflow_check(X, "X", "the statistics X^T X / P")
    overflow_check(Y, "Y", "the loss (1/2P) sum ||y||^2", factor=Y.shape[1])
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got {X.shape[0]} and "
                         f"{Y.shape[0]}")
    if Y.shape[1] != C:
        raise ValueError(f"Y has {Y.shape[1]} outputs but weights[-1] has C={C} rows")
    return X, Y


def _check_tolerances(rtol, atol):
    """``(rtol, atol)`` as floats in ``MIN_RTOL <= rtol < MAX_RTOL`` and
    ``0 < atol < MAX_ATOL`` (a ``ValueError`` naming the argument otherwise)."""
    rtol = float(check_positive(rtol, "rtol", ndim=0))
    atol = float(check_positive(atol, "atol", ndim=0))
    if rtol < MIN_RTOL:
        raise ValueError(f"rtol must be >= {MIN_RTOL:.3g} (rounding limit), got {rtol!r}")
    if not rtol < MAX_RTOL:
        raise ValueError(f"rtol must be < {MAX_RTOL:g}: a relative error of a whole state per "
                         f"step is no error control, got {rtol!r}")
    if not atol < MAX_ATOL:
        raise ValueError(f"atol must be < {MAX_ATOL:g} (an absolute error per weight and "
                         f"step), got {atol!r}")
    return rtol, atol


def _check_record(record, allowed=RECORDABLE):
    """``record`` as a frozenset of names from ``allowed`` (``ValueError`` naming record)."""
    if record is None:
        return frozenset()
    if isinstance(record, str):
        record = (record,)
    try:
        rec = frozenset(record)
    except TypeError as exc:
        raise ValueError(f"record must be a collection of names from {allowed}") from exc
    bad = [r for r in rec if r not in allowed]
    if bad:
        raise ValueError(f"record: unknown quantity {bad[0]!r}; choose from {allowed}")
    return rec


def _check_probe(probe, D, C):
    if isinstance(probe, tuple):
        if len(probe) != 2:
            raise ValueError("probe must be inputs Xp (Q, D) or a pair (Xp, Yp)")
        Xp, Yp = probe
    else:
        Xp, Yp = probe, None
    Xp = check_matrix(Xp, "probe inputs")
    if Xp.shape[1] != D:
        raise ValueError(f"probe inputs have {Xp.shape[1]} columns, expected D={D}")
    if Xp.shape[0] < 1:
        raise ValueError("probe inputs must hold at least one row (Q >= 1), got Q = 0")
    if Yp is not None:
        Yp = as_float_array(Yp, "probe targets", ndim=(1, 2))
        Yp = Yp.reshape(-1, 1) if Yp.ndim == 1 else Yp
        if Yp.shape != (Xp.shape[0], C):
            raise ValueError(f"probe targets must have shape ({Xp.shape[0]}, {C}), got {Yp.shape}")
        if not np.any(Yp != 0):
            raise ValueError("probe targets (the training Y when no probe is given) are all zero: "
                             "the kernel-target alignment is undefined; pass probe inputs alone")
    return Xp, Yp


def _check_max_steps(max_steps):
    return check_int(max_steps, "max_steps", minimum=1)


def gradient_flow(weights, X, Y, t_eval, eta=1.0, rtol=1e-8, atol=1e-12, backend="auto", *,
                  method=DEFAULT_METHOD, record=(), probe=None, max_steps=DEFAULT_MAX_STEPS,
                  first_step=None, dense=False, activation="linear", biases=None,
                  multipliers=None, alpha=1.0, centered=False, loss="mse", lr_scales=None,
                  stop=None, kink_rtol=None, raise_on_failure=False):
    """Integrate gradient flow of a network: a deep linear one by default, any other
    through the network keywords below.

    For a linear network on the squared loss, solves
    ``dW_l/dt = eta (W_L...W_{l+1})^T (Syx - W Sxx) (W_{l-1}...W_1)^T`` from
    ``weights`` at time t = 0 (time is measured from initialisation, as in every closed
    form: ``mode_strength(0, ...) = c0``) with an adaptive, error-controlled method,
    stepping exactly onto every output time (or, with ``dense=True``, interpolating
    between steps).

    Parameters
    ----------
    weights : list of ndarray
        ``[W_1, ..., W_L]``, the state at t = 0, ``W_l`` of shape (N_l, N_{l-1});
        never modified.
    X : array_like, shape (P, D)
        Inputs (need not be whitened).
    Y : array_like, shape (P, C) or (P,)
        Targets; 1-D means C = 1.
    t_eval : array_like, shape (T,)
        Strictly increasing output times since initialisation, all ``>= 0`` (a negative
        time is a ``ValueError``); may span many decades.  They need not contain 0:
        ``np.logspace(-2, 4, 49)`` integrates from t = 0 and returns those 49 times only.
    eta : float
        Learning rate, ``> 0``.
    rtol, atol : float
        Relative (``100 eps <= rtol < 1``) and absolute (``0 < atol < 1``) local error
        tolerances.  Whatever the tolerances, an output whose loss rose above
        ``BREAKDOWN_RISE`` times the initial loss (the loss of gradient flow never rises)
        ends the run with ``FlowStatus.BREAKDOWN``: neither it nor any later state is
        recorded.
    backend : {"auto", "numpy", "numba", "cupy"}
        Where the integration runs; results are numpy float64 arrays in any case.
    method : str
        A registered method: ``"auto"`` (default, :data:`DEFAULT_METHOD`: DOP853 until
        converged modes hold its step at the stability limit, then the L-stable
        ROS34PW2, and back where that is cheaper; safe for ``t_eval`` running far past
        convergence, and as fast as DOP853 before; numpy, numba and cupy backends, on
        numba with both phases compiled), ``"DOP853"``, ``"RK45"``, ``"SSPRK104"``
        (ten stages, order 4, a real stability interval 2.5x longer per evaluation:
        for runs whose step is held back by converged modes, often the fastest to a
        given accuracy on wide networks), ``"ROS34PW2"`` ...
    record : collection of str
        Any of ``"weights"``, ``"modes"``, ``"conservation"``, ``"ntk"``.
    probe : ndarray (Q, D) or tuple (Xp (Q, D), Yp (Q, C) or (Q,)), optional
        Inputs (and targets) on which to record the empirical NTK; implies
        ``"ntk"``.  With ``"ntk"`` but no probe the training data ``(X, Y)`` are used.
    max_steps : int
        Budget of attempted steps.
    first_step : float, optional
        Initial step (default: chosen automatically).
    dense : bool
        False (default): every output time ends a step, so each output is a state of
        the integrator itself.  True (``method="RK45"`` or ``"SSPRK104"``, see
        ``DENSE_METHODS``): steps go as far as the error control allows, the output
        times inside a step are evaluated with the method's continuous extension
        ``y(t + theta h) = y + h sum_j B_j(theta) K_j``, and only the last output time
        ends a step.  RK45: Shampine's (1986) quartic, order 4; SSPRK104: the cubic
        Hermite interpolant on the step's ends and their derivatives, order 3 like its
        error estimate; neither costs an evaluation.  Many output times then cost
        little more than two (``benchmarks/bench_outputs.py``); the interpolation
        error is of the order of the step's local error, a few ``rtol`` on plateaus and
        where the flow is smooth, but more inside a saddle escape, where a step is long
        and the state turns fast (400 outputs on the small problem of
        ``benchmarks/bench_flow.py``: RK45 off by 64 ``rtol``, SSPRK104 by 185); the loss
        along interpolated outputs is non-increasing only up to such errors (SSPRK104 at
        rtol 1e-5: rises of 7e-10 of the initial loss on a plateau).  Other
        methods raise ``ValueError`` (DOP853's order-7 extension misses a saddle
        escape by thousands of ``rtol``: ``benchmarks/study_dense_output.py``).
    activation : str or tuple
        ``"linear"`` (default), ``"relu"``, ``"leaky_relu"`` (slope 0.01, or
        ``("leaky_relu", a)``), ``"softplus"`` (beta 1, or ``("softplus", beta)``),
        ``"tanh"``: the network ``h_l = phi(m_l W_l h_{l-1} + b_l)``,
        ``f = m_L W_L h_{L-1}`` (docs/conventions.md, "Beyond linear networks"; model in
        ``linearnets.sim.models.mlp``).
    biases : list of ndarray (N_l,), optional
        ``[b_1, ..., b_{L-1}]``: trained hidden biases at t = 0.
    multipliers : sequence of L floats > 0, optional
        Forward multipliers ``m_l`` (all 1 by default).
    alpha : float > 0
        Output scale: ``F = alpha f``.
    centered : bool
        ``F = alpha (f - f_0)``, ``f_0`` the network at t = 0 (fixed).
    loss : str or tuple
        ``"mse"`` or ``"soft_hinge"`` (``beta_h = 20``, or ``("soft_hinge", beta_h)``; C = 1,
        labels +-1); the loss is ``(1/(alpha^2 P)) sum_mu l(F(x_mu), y_mu)``.
    lr_scales : sequence of L floats > 0, optional
        Layer l (``W_l`` and ``b_l``) moves with ``eta * lr_scales[l-1]``.
    stop : None, "margin" or ("loss", value)
        Stop once every margin ``y F >= 1`` (soft hinge, where Geiger et al. stop) or once
        the loss reaches ``value``; the time is located inside the step
        (``Trajectory.t_stop``) and later outputs equal the stopped state.
    kink_rtol : float, optional
        Tolerance of the low-order pair at kinks of ReLU-type networks (default
        ``max(rtol, 1e-4)``).  Accuracy on such a piecewise-smooth flow: ``rtol`` per step
        away from kinks, ``kink_rtol`` on steps across them and while the flow slides
        along one (``linearnets.sim.methods.base``).
    raise_on_failure : bool
        False (default): a failed run (``success`` False) issues a :class:`FlowWarning`
        and returns its :class:`Trajectory`.  True: it raises :class:`FlowError` (a
        ``RuntimeError``; the trajectory is its ``trajectory`` attribute).

    A linear network with the squared loss, with or without ``alpha``, ``multipliers``,
    ``centered``, ``lr_scales``, stays on the sufficient-statistics loops (targets
    ``Y / (alpha M) (+ X W_0^T)``, rates ``eta M^2 lr_scales``, ``M = prod m_l``:
    ``linearnets.sim.models.linear``); other networks (and stop rules) run on raw
    samples through ``linearnets.sim.general``, where ``method`` is one of
    ``"DOP853"``, ``"RK45"``, ``"SSPRK104"``, ``"BS32"``, ``"HE21"`` (``"auto"``: DOP853) or
    the Rosenbrock-W ``"ROS34PW2"`` (matrix-free CG stage solves, for stiff networks:
    ``linearnets.sim.methods.rosw``; BS32 at kinks, as for the others),
    ``backend="cupy"`` runs the numpy reference on CuPy arrays, and ``"numba"`` (and
    ``"auto"`` where numba is installed) the compiled MLP of
    ``linearnets.sim.models._mlp_kernels``.  ``end_to_end`` and ``"modes"`` exist only for linear activations
    without biases (``end_to_end`` None otherwise, ``"modes"`` a ``ValueError``).

    Returns
    -------
    Trajectory
        ``success`` is False, with a message, if the step size underflowed, the
        state became non-finite, the step budget ran out or step control broke down
        (``FlowStatus.BREAKDOWN``); the outputs reached until then are kept and later
        rows are NaN, and a :class:`FlowWarning` says so (``raise_on_failure``).  The message of a successful
        explicit run whose steps were mostly held at the stability limit of
        converged modes (at least ``CAPPED_HINT_STEPS`` of them) says so and names
        ``method="auto"``.

    Examples
    --------
    >>> from linearnets.data import scalar_teacher
    >>> from linearnets.sim.network import init_network
    >>> X, y, beta = scalar_teacher(20, 3, 1.0)
    >>> ws = init_network((3, 4, 1), 0.1)
    >>> traj = gradient_flow(ws, X, y, [0.0, 50.0], backend="numpy")
    >>> bool(traj.success and traj.loss[-1] < 1e-10)
    True
    """
    from . import general
    if general.needs_general(activation, biases, multipliers, alpha, centered, loss, stop,
                             record) or kink_rtol is not None:
        with _reported_once():
            traj = general.gradient_flow(
                weights, X, Y, t_eval, eta, rtol, atol, backend, method=method, record=record,
                probe=probe, max_steps=max_steps, first_step=first_step, dense=dense,
                activation=activation, biases=biases, multipliers=multipliers, alpha=alpha,
                centered=centered, loss=loss, lr_scales=lr_scales, stop=stop, kink_rtol=kink_rtol)
        return _report_failure(traj, raise_on_failure)
    ws = check_weights(weights)
    if lr_scales is not None:
        from .models import parse_options
        lr_scales = parse_options(len(ws), lr_scales=lr_scales).lr_scales
    shapes = tuple(w.shape for w in ws)
    X, Y = _check_data(X, Y, shapes)
    D, C = shapes[0][1], shapes[-1][0]
    t_eval = _check_t_eval(t_eval)
    eta = float(check_positive(eta, "eta", ndim=0))
    rtol, atol = _check_tolerances(rtol, atol)
    max_steps = _check_max_steps(max_steps)
    if first_step is not None:
        first_step = float(check_positive(first_step, "first_step", ndim=0))
    if not isinstance(dense, (bool, np.bool_)):
        raise ValueError(f"dense must be True or False, got {dense!r}")
    if dense and method not in DENSE_METHODS:
        raise ValueError(f"dense=True needs a method with a continuous extension "
                         f"{DENSE_METHODS}, got method={method!r} (which steps onto every "
                         f"output time: pass dense=False)")
    _backend.check_backend(backend)
    rec = _check_record(record)
    if not isinstance(method, str):
        raise ValueError(f"method must be a string, got {method!r}")
    available = backends_for(method)
    if probe is not None or "ntk" in rec:
        Xp, Yp = _check_probe(probe if probe is not None else (X, Y), D, C)
        rec = rec | {"ntk"}

    problem = _rhs.make_problem(shapes, X, Y, eta, lr_scale=lr_scales)
    concrete = _backend.resolve_backend(backend, problem.max_width, available)
    solver = get_solver(method, concrete)
    options = SolverOptions(rtol=rtol, atol=atol, max_steps=max_steps, first_step=first_step,
                            dense=bool(dense))

    # the weights are the state at t = 0: the solver starts there, and an output time 0 it
    # needs but the caller did not ask for is dropped from the outputs (row `skip`)
    t_solve, skip = solver_times(t_eval)
    T = t_solve.size
    L = len(shapes)
    nan = np.nan
    e2e = np.full((T, C, D), nan)
    weights_t = tuple(np.full((T,) + s, nan) for s in shapes) if "weights" in rec else None
    if "modes" in rec:
        U, s_modes, Vt = np.linalg.svd(problem.Syx, full_matrices=False)
        V = Vt.T.copy()
        modes = np.full((T, s_modes.size), nan)
    else:
        U = s_modes = V = modes = None
    cons = np.full(T, nan) if "conservation" in rec else None
    if "ntk" in rec:
        Q = Xp.shape[0]
        ntk = np.full((T, Q, Q) if C == 1 else (T, Q, Q, C, C), nan)
        ntk_norm = np.full(T, nan)
        ntk_align = np.full(T, nan) if Yp is not None else None
        yflat = Yp.reshape(-1) if Yp is not None else None
    else:
        ntk = ntk_norm = ntk_align = None
    # the layer views are only needed by the recordings that read single layers
    need_layers = weights_t is not None or cons is not None or ntk is not None

    end_to_end, end_to_end_many = _end_to_end_of(problem, concrete)
    drift = _balance_drift_of(problem, concrete) if cons is not None else None
    kernel = _probe_ntk_of(problem, concrete, Xp) if ntk is not None else None

    guard = _BreakdownGuard(problem)

    def observe(k, y):
        if guard.broken is not None:
            return  # nothing is recorded once step control has broken down
        end_to_end(y, e2e[k])
        if guard.rose(k, e2e[k:k + 1], y):
            return
        Wl = _rhs.unpack(y, shapes, problem.offsets) if need_layers else None
        if weights_t is not None:
            for i in range(L):
                weights_t[i][k] = Wl[i]
        if modes is not None:
            modes[k] = np.einsum("ca,cd,da->a", U, e2e[k], V)
        if cons is not None:
            cons[k] = drift(y, Wl, k == 0)
        if ntk is not None:
            K = kernel(y, Wl)
            ntk[k] = K
            ntk_norm[k] = np.linalg.norm(K)
            if ntk_align is not None:
                Kmat = K if C == 1 else K.transpose(0, 2, 1, 3).reshape(Q * C, Q * C)
                denom = ntk_norm[k] * (yflat @ yflat)
                ntk_align[k] = (yflat @ Kmat @ yflat) / denom if denom > 0 else nan

    def observe_many(k, states):
        # the outputs k, k + 1, ... of one step (dense output), states (m, n): the maps in
        # one call where nothing else reads the states
        if need_layers:
            for i, y in enumerate(states):
                observe(k + i, y)
            return
        if guard.broken is not None:
            return
        m = states.shape[0]
        end_to_end_many(states, e2e[k:k + m])
        if guard.rose(k, e2e[k:k + m], states):
            m = guard.broken - k
        if modes is not None:
            for i in range(k, k + m):
                modes[i] = np.einsum("ca,cd,da->a", U, e2e[i], V)

    observe.many = observe_many
    y0 = _rhs.pack(ws)
    # a state that overflows is reported through the status, not through warnings
    with np.errstate(over="ignore", invalid="ignore"):
        raw = solver(problem, y0, t_solve, options, observe)
        n = raw.n_done
        status, message, t_last, y_last = raw.status, raw.message, raw.t_last, raw.y_last
        if guard.broken is not None:
            n = guard.broken
            status, t_last, y_last = FlowStatus.BREAKDOWN, float(t_solve[n - 1]), guard.last_y
            message = (f"{status.message}: the loss rose from {guard.loss0:.6g} at t=0 to "
                       f"{guard.loss_bad:.6g} at t={t_solve[n]:.6g}; the outputs from there on "
                       f"are not recorded (a tighter rtol or atol keeps control)")
            e2e[n:] = nan
        loss = np.full(T, nan)
        loss[:n] = _rhs.loss_from_end_to_end(e2e[:n], problem)
    final = tuple(np.array(w, copy=True) for w in _rhs.unpack(_backend.to_numpy(y_last),
                                                              shapes))
    if (status.success and method in TABLEAUX and raw.ncapped >= CAPPED_HINT_STEPS
            and raw.ncapped >= CAPPED_HINT_SHARE * raw.nsteps):
        # converged modes, not accuracy, set the steps: the failure message of an
        # exhausted budget says the same (_explicit._failure_message)
        message += (f"; {raw.ncapped} of {raw.nsteps} steps were held at the stability limit "
                    f"of converged modes: method='auto' switches to the L-stable ROS34PW2 "
                    f"there")
    def out(a):
        # the rows of the requested output times, owned by the result
        return None if a is None else (a[skip:].copy() if skip else a)

    return _report_failure(Trajectory(
        t=t_eval.copy(), loss=out(loss), end_to_end=out(e2e), weights=final,
        t_last=float(t_last), nfev=int(raw.nfev), nsteps=int(raw.nsteps),
        nrejected=int(raw.nrejected), success=status.success, status=status, message=message,
        method=method, backend=concrete,
        weights_t=None if weights_t is None else tuple(out(w) for w in weights_t),
        modes=out(modes), mode_s=s_modes, mode_u=U, mode_v=V, conservation=out(cons),
        ntk=out(ntk), ntk_norm=out(ntk_norm), ntk_alignment=out(ntk_align), dense=bool(dense),
        weights0=tuple(np.array(w, copy=True) for w in ws)),
        raise_on_failure)
