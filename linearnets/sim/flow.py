"""The simulator's front end: one validation, one run, one trajectory, one failure report
(docs/simulator.md, "The front end")."""
from __future__ import annotations

import collections
import math
import numbers
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numpy as np

from .. import _threads
from .. import backend as _backend
from .._progress import check_progress, progress_for
from .._validation import as_float_array, check_int, check_matrix, check_positive, overflow_check
from ..curvature import HessianProducts, ModifiedFlow, top_eigenvalues
from ..network import (bias_shapes, check_biases, check_layer_sizes, check_weights, largest_layer,
                       widths_of)
from .methods import METHODS, FlowStatus
from .methods import run as run_method
from .methods.driver import METHODS as _METHOD_KINDS
from .methods.driver import first_stretch
from .methods.base import STABILITY_SAFETY, Observer, Result, StopEvent
from .methods.tableaux import TABLEAUX
from .models import get_model, parse_options, select_model
from .models.base import Layout

__all__ = ["gradient_flow", "prepare_flow", "PreparedFlow", "Trajectory", "FlowStatus",
           "FlowWarning", "FlowError", "FlowInterrupted", "RECORDABLE", "DEFAULT_MAX_STEPS",
           "DEFAULT_METHOD", "DENSE_METHODS", "METHODS", "KINK_RTOL",
           "KINK_RTOL_LATE"]

#: Quantities that ``record=`` can ask for (``"modes"``, ``"conservation"``: linear networks;
#: ``"sharpness"``: the networks of the contract, models ``"mlp"`` and ``"linear"``).
RECORDABLE = ("weights", "outputs", "ntk", "modes", "conservation", "sharpness")
#: Methods with a continuous extension for ``dense=True`` (``Tableau.dense_P``).
DENSE_METHODS = tuple(name for name, tab in TABLEAUX.items() if tab.dense_P is not None)
#: Every method name (``"auto"``: see :data:`DEFAULT_METHOD`).
METHODS = tuple(METHODS)
_EPS = float(np.finfo(np.float64).eps)

#: Default budget of attempted steps.
DEFAULT_MAX_STEPS = 1_000_000
#: Default method of :func:`gradient_flow` (``methods.driver.auto``).
DEFAULT_METHOD = "auto"
#: Default relative tolerances of the low-order pair at kinks: ``max(rtol, KINK_RTOL)`` for
#: its first ``KINK_EARLY_STEPS`` accepted steps (``methods.base``), ``max(rtol,
#: KINK_RTOL_LATE)`` after them.  A lazy ReLU run (~100 steps in all) keeps 3e-4, the one
#: value of 1e-2 to 3e-4 that held a centred ReLU net's held-out outputs and stop time to
#: 1e-3 on every draw at alpha sqrt(h) = 1000; a rich one (thousands of kink steps) runs at
#: 1e-3, which reached 1e-3 there at a third to a seventh of 3e-4's cost (docs/methods.md,
#: "What kink_rtol trades").  A ``kink_rtol`` passed by the caller holds throughout.
KINK_RTOL = 3e-4
KINK_RTOL_LATE = 1e-3
#: Smallest accepted rtol: below it the error estimate is dominated by rounding.
MIN_RTOL = 100 * _EPS
#: rtol and atol must be below these: an error of the size of the state is no control.
MAX_RTOL = 1.0
MAX_ATOL = 1.0
#: The breakdown guard: a rise of the loss above BREAKDOWN_RISE times its initial value, and
#: above BREAKDOWN_ROUNDING of its terms (docs/simulator.md, ``FlowStatus.BREAKDOWN``).
BREAKDOWN_RISE = 10.0
BREAKDOWN_ROUNDING = 1e-6

#: The quick run (``_Quick``): flows of at most QUICK_MAX_SIZE parameters; the prepared
#: flows that :func:`gradient_flow` keeps for it, per thread, and the most data entries
#: (``X`` and ``Y``) of a flow kept.
QUICK_MAX_SIZE = 1 << 16
QUICK_CACHE = 8
QUICK_MAX_DATA = 1 << 17

#: The capped hint: at least this many steps, and this share of them, held by the cap.
CAPPED_HINT_STEPS = 1000
CAPPED_HINT_SHARE = 0.5
_AUTO_HINT = "method='auto' switches to SSPRK104 and the L-stable ROS34PW2 there"


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


class FlowInterrupted(KeyboardInterrupt):
    """Raised by :func:`gradient_flow` (and :func:`~linearnets.gradient_flow_ensemble`) on
    Ctrl-C: a ``KeyboardInterrupt``, so that a script still stops, that carries what was
    computed.

    Attributes
    ----------
    trajectory : Trajectory or EnsembleTrajectory
        The outputs recorded before the interrupt (later rows NaN), ``success`` False,
        ``status`` ``FlowStatus.INTERRUPTED``, a message saying where; its ``weights`` are
        those at the last recorded output (``t_last``).  The step counters of an
        interrupted loop are not kept (0).
    """

    def __init__(self, message, trajectory):
        super().__init__(message)
        self.trajectory = trajectory


def _outside_stacklevel():
    """The ``stacklevel`` that names the first frame outside the package."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def report_failure(result, failure, raise_on_failure, what="gradient flow"):
    """``result``; with a ``failure`` message, warn (:class:`FlowWarning`) or raise first."""
    if failure is None:
        return result
    msg = f"{what} failed: {failure}"
    if raise_on_failure:
        raise FlowError(msg, result)
    warnings.warn(f"{msg} (the outputs reached are kept, later ones are NaN; "
                  f"raise_on_failure=True raises instead)", FlowWarning,
                  stacklevel=_outside_stacklevel())
    return result


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Result of :func:`gradient_flow` (immutable; every array is owned and read-only).

    A failed run (``success`` False) has NaN rows after the last output reached; optional
    fields are None unless recorded (``record=``, ``probe=``, ``biases=``).

    Attributes
    ----------
    t, loss : ndarray, shape (T,)
        The output times since initialisation; the training loss of the model and loss in
        use, ``L = (1/(alpha^2 P)) sum_mu l(F(x_mu), y_mu)`` (``l`` of ``loss=``: ``1/2 |y -
        F|^2`` for mse), the quantity gradient flow descends and ``stop=("loss", v)`` reads:
        ``(1/2P) |Y - X W(t)^T|_F^2`` for the default linear network, ``(1/(2 alpha^2 P))
        |Y - F|^2`` for any network on mse (so a centred net starts at ``|Y|^2 / (2 alpha^2
        P)``).
    end_to_end : ndarray, shape (T, C, D)
        ``W_L(t) ... W_1(t)`` (linear activations without biases only).
    weights, biases, t_last : tuple of ndarray, tuple of ndarray (N_l,), float
        Final ``(W_1, ..., W_L)`` and hidden biases ``(b_1, ..., b_{L-1})``, at ``t_last``
        (``t[-1]`` on success); ``weights0``, ``biases0``: the same at t = 0.
    nfev, nsteps, nrejected : int
        Right-hand-side evaluations, accepted steps, rejected steps.
    success, status, message : bool, FlowStatus, str
        ``status.code`` (0 = success); the message says where a failed run stopped.
    method, backend, dense : str, str, bool
        The method and concrete backend that ran; whether outputs were interpolated.
    weights_t, biases_t : tuple of ndarray (T, N_l, N_{l-1}), tuple of ndarray (T, N_l)
        The path of the parameters (record ``"weights"``).
    modes, mode_s, mode_u, mode_v : ndarray (T, r), (r,), (C, r), (D, r)
        ``c_alpha(t) = u_alpha^T W(t) v_alpha`` along the SVD ``Syx = sum s_alpha u_alpha
        v_alpha^T``, ``r = min(C, D)`` (record ``"modes"``).
    conservation : ndarray, shape (T,)
        ``max_l |W_{l+1}^T W_{l+1} - W_l W_l^T - (same at t = 0)|_F``, zero for the exact
        flow: an accuracy diagnostic (record ``"conservation"``; zeros for L = 1).
    ntk, ntk_norm, ntk_alignment : ndarray (T, Q, Q) or (T, Q, Q, C, C), (T,), (T,)
        Empirical NTK on the probe inputs, its Frobenius norm, and the alignment ``y^T K y /
        (|K|_F |y|^2)`` with the probe targets (sample-major for C > 1; None without them).
    outputs : ndarray, shape (T, Q, C)
        ``F`` on the probe inputs (the training inputs without a probe; record ``"outputs"``).
    t_stop : float or None
        Where the stop rule fired (later outputs are the stopped state).
    kinks, sliding_time, fallback_steps : int, float, int
        ReLU-type networks: switches of training pre-activations crossed by accepted
        steps, the time spent sliding along kinks, the steps of the low-order pair there.
    steps, sharpness : ndarray (T,) of int, ndarray (T, k)
        :func:`linearnets.gradient_descent`: the step counts of the outputs (``t = steps *
        lr``); the k largest Hessian eigenvalues of the training loss (record
        ``"sharpness"``; :func:`linearnets.sharpness`).
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
    steps: Optional[np.ndarray] = None
    sharpness: Optional[np.ndarray] = None

    def __post_init__(self):
        for value in vars(self).values():
            if type(value) is tuple:
                for a in value:
                    if type(a) is np.ndarray:
                        a.setflags(write=False)
            elif type(value) is np.ndarray:
                value.setflags(write=False)


#: The loop's Result of an interrupted run (its counters are lost with the loop's frames).
_INTERRUPTED = Result(n_done=0, t_last=0.0, y_last=None, nfev=0, nsteps=0, nrejected=0,
                      status=FlowStatus.INTERRUPTED, message=FlowStatus.INTERRUPTED.message)


def check_t_eval(t_eval):
    """``t_eval`` as a float64 (T,) array, strictly increasing and ``>= 0`` (``ValueError``)."""
    t = as_float_array(t_eval, "t_eval", ndim=(0, 1)).reshape(-1)
    if t.size == 0:
        raise ValueError("t_eval must contain at least one time")
    if t.size > 1 and not np.all(np.diff(t) > 0):
        raise ValueError("t_eval must be strictly increasing")
    start = t[0]
    if start < 0:
        raise ValueError(f"t_eval: times are measured from initialisation (the weights are the "
                         f"state at t = 0) and must be >= 0, got {start!r}")
    return np.ascontiguousarray(t)


def check_horizon(t_end, y0, f0, max_steps):
    """``ValueError`` naming ``t_eval`` where ``t_end`` exceeds ``max_steps / eps`` initial time
    scales ``|y0| / |f0|`` of the flow (``y0``, ``f0``: (n,), numpy or CuPy)."""
    with np.errstate(all="ignore"):       # in floats (inf / inf is NaN)
        ny, nf = math.sqrt(float(y0 @ y0)), math.sqrt(float(f0 @ f0))
    rate = nf / ny if ny > 0 else 0.0
    if math.isfinite(rate) and t_end * rate > max_steps / _EPS:
        raise ValueError(
            f"t_eval ends at {t_end:.6g}, {t_end * rate:.3g} initial time scales of the flow "
            f"(|y0| / |dy/dt| = {1.0 / rate:.3g}, set by the weights, X, Y, eta, alpha and "
            f"the rates): beyond max_steps / eps = {max_steps / _EPS:.3g}, which no run of "
            f"max_steps = {max_steps} steps reaches in float64")


def check_data(X, Y, shapes, loss="mse"):
    """``X`` (P, D) and ``Y`` (P, C) as float64, P >= 1, D and C those of ``shapes``; for
    ``loss`` ``"cross_entropy"`` integer class labels ``Y`` (P,) become one-hot rows."""
    X = check_matrix(X, "X")
    if X.shape[0] < 1:
        raise ValueError("X must hold at least one sample (P >= 1 rows), got P = 0")
    Y = as_float_array(Y, "Y", ndim=(1, 2))
    D, *_, C = widths_of(shapes)
    name = loss[0] if isinstance(loss, tuple) and loss else loss
    if name == "cross_entropy" and Y.ndim == 1 and C >= 2:     # class labels: one-hot rows
        if not np.all(Y == np.floor(Y)) or Y.size and not (Y.min() >= 0 and Y.max() < C):
            raise ValueError(f"Y: loss='cross_entropy' takes class labels as integers in [0, "
                             f"{C}) (shape (P,)) or rows of C = {C} probabilities (shape (P, {C}))")
        Y = np.eye(C)[Y.astype(np.int64)]
    Y = np.ascontiguousarray(Y.reshape(-1, 1) if Y.ndim == 1 else Y)
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


def check_tolerances(rtol, atol):
    """``(rtol, atol)`` as floats, ``MIN_RTOL <= rtol < MAX_RTOL``, ``0 < atol < MAX_ATOL``."""
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


def check_record(record, allowed=RECORDABLE):
    """``record`` as a frozenset of names from ``allowed`` (``ValueError`` naming record)."""
    record = () if record is None else (record,) if isinstance(record, str) else record
    try:
        rec = frozenset(record)
    except TypeError as exc:
        raise ValueError(f"record must be a collection of names from {allowed}") from exc
    bad = next((r for r in rec if r not in allowed), None)
    if bad is not None:
        raise ValueError(f"record: unknown quantity {bad!r}; choose from {allowed}")
    return rec


class Probe(NamedTuple):
    """The inputs ``(Q, D)`` on which ``"outputs"`` and the NTK are recorded, and their
    targets ``(Q, C)`` (the NTK's alignment) or None."""

    inputs: np.ndarray
    targets: Optional[np.ndarray]


def check_probe(probe, D, C):
    """A :class:`Probe` from inputs ``Xp`` (Q, D) or a pair (inputs, targets ``Yp``)."""
    if isinstance(probe, tuple) and len(probe) != 2:
        raise ValueError("probe must be inputs Xp (Q, D) or a pair (Xp, Yp)")
    Xp, Yp = probe if isinstance(probe, tuple) else (probe, None)
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
    return Probe(Xp, Yp)


def check_labels(options, Y):
    """Whether the labels ``Y`` of ``options.loss`` are hard (+-1, or one-hot rows), once
    checked (``ValueError`` naming ``Y`` or ``loss``)."""
    loss, C = options.loss, Y.shape[1]
    if loss in ("soft_hinge", "logistic"):
        if C != 1:
            raise ValueError(f"loss={loss!r} needs one output (C = 1), got C = {C}")
        if not np.all(np.abs(Y) == 1.0):
            raise ValueError(f"Y: loss={loss!r} needs labels +1 or -1")
        return True
    if loss == "cross_entropy":
        if C < 2:
            raise ValueError(f"loss='cross_entropy' needs C >= 2 outputs, got C = {C} (one "
                             f"output with labels +-1: loss='logistic')")
        if np.any(Y < 0) or np.any(np.abs(Y.sum(axis=1) - 1.0) > 1e-12 * C):
            raise ValueError("Y: loss='cross_entropy' needs rows of non-negative entries "
                             "summing to 1 (one-hot for hard labels) or integer class labels "
                             "(P,)")
        return bool(np.all((Y == 0.0) | (Y == 1.0)))
    return False


class StopRule(NamedTuple):
    """A validated stop rule (a pair, as the user gave it): ``kind`` ``"margin"``, ``"loss"``
    or ``"relative_loss"``, and its ``value``."""

    kind: str
    value: float


def check_stop(stop, options, Y):
    """``stop`` as a :class:`StopRule` or None (``"margin"``: ``("margin", 1.0)``), the labels
    checked first (:func:`check_labels`)."""
    hard = check_labels(options, Y)
    if stop is None:
        return None
    if isinstance(stop, str) and stop == "margin":
        stop = ("margin", 1.0)
    kind, value = stop if isinstance(stop, tuple) and len(stop) == 2 else (None, None)
    number = (isinstance(value, numbers.Real) and not isinstance(value, bool)
              and bool(np.isfinite(value)))
    if kind == "relative_loss":
        if not (number and 0.0 < value < 1.0):
            raise ValueError(f"stop: ('relative_loss', r) needs 0 < r < 1 (stop once the loss "
                             f"is r times its value at t = 0), got {stop!r}")
        return StopRule(kind, float(value))
    if kind in ("loss", "margin") and number and (value >= 0 or kind == "margin"):
        if kind == "margin" and not hard:
            raise ValueError(f"stop='margin' needs a classification loss with hard labels "
                             f"(soft_hinge, logistic; cross_entropy with one-hot rows), got "
                             f"loss={options.loss!r}")
        return StopRule(kind, float(value))
    raise ValueError(f"stop must be None, 'margin', ('margin', m), ('loss', value >= 0) or "
                     f"('relative_loss', r) with 0 < r < 1, got {stop!r}")


def shapes_of(layers):
    """Weight shapes from layer sizes ``(D, N_1, ..., C)`` or from the shapes themselves."""
    shapes = tuple(layers) if isinstance(layers, (tuple, list)) else ()
    if not shapes or not all(isinstance(s, tuple) for s in shapes):
        sizes = check_layer_sizes(layers, "layers")
        return tuple(zip(sizes[1:], sizes[:-1]))
    shapes = tuple((check_int(r, "layers", 1), check_int(c, "layers", 1)) for r, c in shapes)
    for a, b in zip(shapes, shapes[1:]):
        (rows, _), (_, cols) = a, b
        if cols != rows:
            raise ValueError(f"layers: shape {b} does not follow {a}")
    return shapes


class SolverOptions(NamedTuple):
    """How a run integrates (the fields of :class:`~.methods.base.StepperOptions`, the method,
    dense output, the backend), as a front end's keywords give them; :func:`check_solver`
    validates them and sets ``kink_rtol_late``."""

    rtol: float = 1e-8
    atol: float = 1e-12
    max_steps: int = DEFAULT_MAX_STEPS
    first_step: Optional[float] = None
    kink_rtol: Optional[float] = None
    method: str = DEFAULT_METHOD
    dense: bool = False
    backend: str = "auto"
    kink_rtol_late: Optional[float] = None


class Recording(NamedTuple):
    """What a run records and where (diffrax's ``SaveAt``): the output times, the quantities
    (of :data:`RECORDABLE`), the probe and the stop rule, as :func:`_prepare` validates them."""

    t_eval: np.ndarray
    record: frozenset
    probe: Optional[Probe]
    stop: Optional[StopRule]


#: The network keywords of the front ends (:func:`~.models.parse_options`).
NETWORK_KEYWORDS = ("eta", "activation", "multipliers", "alpha", "centered", "loss", "lr_scales")


def check_solver(solver):
    """``solver`` (:class:`SolverOptions`) validated (``ValueError`` naming the argument; method
    None: :data:`DEFAULT_METHOD`)."""
    rtol, atol = check_tolerances(solver.rtol, solver.atol)
    kink_rtol, first_step = solver.kink_rtol, solver.first_step
    if kink_rtol is None:
        kink_rtol, late = max(rtol, KINK_RTOL), max(rtol, KINK_RTOL_LATE)
    else:
        kink_rtol = late = float(check_positive(kink_rtol, "kink_rtol", ndim=0))
    method, dense = DEFAULT_METHOD if solver.method is None else solver.method, solver.dense
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(dense, (bool, np.bool_)):
        raise ValueError(f"dense must be True or False, got {dense!r}")
    if dense and method not in DENSE_METHODS:
        raise ValueError(f"dense=True needs a method with a continuous extension "
                         f"{DENSE_METHODS}, got method={method!r} (which steps onto every "
                         f"output time: pass dense=False)")
    max_steps = check_int(solver.max_steps, "max_steps", minimum=1)
    if first_step is not None:
        first_step = float(check_positive(first_step, "first_step", ndim=0))
    _backend.check_backend(solver.backend)
    return SolverOptions(rtol=rtol, atol=atol, max_steps=max_steps, first_step=first_step,
                         kink_rtol=kink_rtol, method=method, dense=bool(dense),
                         backend=solver.backend, kink_rtol_late=late)


class _Recorder:
    """The outputs of one run of ``flow`` (a :class:`PreparedFlow`), filled at the output
    times by the loops (:meth:`observe`, :meth:`observe_many`): NaN where not reached;
    ``n_done`` the outputs recorded in full and ``y_done`` (a copy) the state of the last:
    what an interrupted run keeps, and a run whose loss rose (the breakdown guard,
    ``flow.breakdown_rise``; None: no guard), whose first such output is ``broken``."""

    def __init__(self, flow, net, ws, bs):
        rec, xp, T, C = flow.record, flow.xp, flow.t_eval.size, flow.Y.shape[1]
        nan = np.nan
        self.net, self.Xo = net, flow.Xo
        self.to_np = _backend.to_numpy if xp is not np else np.asarray
        self.loss, self.size = np.full(T, nan), np.full(T, nan)
        self.e2e = np.full((T, C, flow.X.shape[1]), nan) if net.linear else None
        self.wt = tuple(np.full((T,) + s, nan) for s in flow.shapes) if "weights" in rec else None
        self.bt = (tuple(np.full((T, r), nan) for r, _ in flow.shapes[:-1])
                   if self.wt is not None and bs is not None else None)
        self.outs = np.full((T, flow.Xo.shape[0], C), nan) if "outputs" in rec else None
        self.cons = np.full(T, nan) if "conservation" in rec else None
        self.ntk = self.ntk_norm = self.ntk_align = None
        if "ntk" in rec:
            Xp, Yp = flow.recording.probe
            Q = Xp.shape[0]
            self.ntk = np.full((T, Q, Q) if C == 1 else (T, Q, Q, C, C), nan)
            self.ntk_norm = np.full(T, nan)
            self.ntk_align = np.full(T, nan) if Yp is not None else None
            self.yflat = Yp.reshape(-1) if Yp is not None else None
            self.kernel = net.probe_ntk(xp.asarray(Xp))
        self.Xo_dev = xp.asarray(flow.Xo) if self.outs is not None and not net.linear else None
        self.sharp = None
        if "sharpness" in rec:        # exact products on the numpy MLP model (sharpness())
            self.sharp = np.full((T, flow.sharpness_k), nan)
            self.products = HessianProducts(get_model("mlp")(ws, bs, flow.options).prepare(
                flow.X, flow.Y))
        # a linear model's loss from its maps: cheap terms for the guard at every output,
        # the exact loss of all maps at the end
        self.terms = terms = net.loss_terms
        self.rise, self.loss0 = flow.breakdown_rise, None  # (loss0: at the first output at 0)
        if flow.t_eval[0] != 0.0 and self.rise is not None:
            self.loss0 = float(terms(self.to_np(net.end_to_end(net.y0)))[0] if terms is not None
                               else net.loss(net.y0))
        self.broken = self.loss_bad = None
        self.n_done, self.y_done = 0, net.y0
        # "many" reads the maps alone: only where nothing else reads the states
        self.maps_only = terms is not None and all(
            a is None for a in (self.wt, self.outs, self.cons, self.ntk, self.sharp))

    def _losses(self, k, m, y):
        if self.terms is not None:
            self.loss[k:k + m], self.size[k:k + m] = self.terms(self.e2e[k:k + m])
        else:
            self.loss[k] = self.size[k] = self.net.loss(y)

    def _rose(self, k, states):
        """True if the loss of one of the outputs ``k, k + 1, ...`` (the ``states``) rose
        (``broken`` set, the outputs before it kept)."""
        if self.rise is None:
            return False
        m = len(states)
        loss, size = self.loss[k:k + m], self.size[k:k + m]
        if self.loss0 is None:
            self.loss0 = float(loss[0])
        allowed = max((self.rise - 1.0) * self.loss0, 0.0)
        if m == 1:                        # one output: in floats
            rise = float(loss[0]) - self.loss0
            calm = rise <= allowed or rise <= BREAKDOWN_ROUNDING * float(size[0])
        else:
            with np.errstate(invalid="ignore"):
                bad = ~((loss - self.loss0 <= allowed)
                        | (loss - self.loss0 <= BREAKDOWN_ROUNDING * size))
            calm = not bad.any()
        if calm or not math.isfinite(self.loss0):
            return False
        i = 0 if m == 1 else int(np.argmax(bad))
        self.broken, self.loss_bad = k + i, float(loss[i])
        if i > 0:
            self._done(k + i, states[i - 1])
        return True

    def _done(self, n, y):
        self.n_done, self.y_done = n, np.array(self.to_np(y), dtype=np.float64, copy=True)

    def observe(self, k, y):
        """Record output ``k``, the state ``y``."""
        net, e2e, to_np = self.net, self.e2e, self.to_np
        if self.broken is not None:
            return  # nothing is recorded once step control has broken down
        if e2e is not None:
            e2e[k] = to_np(net.end_to_end(y))
        self._losses(k, 1, y)
        if self._rose(k, y[None]):
            return
        if self.wt is not None:
            for a, w in zip(self.wt + (self.bt or ()),
                            [*net.weights_of(y), *(net.biases_of(y) or ())]):
                a[k] = to_np(w)
        if self.outs is not None:
            self.outs[k] = (self.Xo @ e2e[k].T if e2e is not None
                            else to_np(net.outputs(y, self.Xo_dev)))
        if self.cons is not None:
            self.cons[k] = net.conservation(y, k == 0)
        if self.ntk is not None:
            self.ntk[k] = K = to_np(self.kernel(y))
            self.ntk_norm[k] = norm = np.linalg.norm(K)
            if self.ntk_align is not None:
                yflat = self.yflat          # (Q C,): sample-major
                Kmat = K if K.ndim == 2 else K.transpose(0, 2, 1, 3).reshape(yflat.size, -1)
                denom = norm * (yflat @ yflat)
                self.ntk_align[k] = (yflat @ Kmat @ yflat) / denom if denom > 0 else np.nan
        if self.sharp is not None:
            self.sharp[k] = top_eigenvalues(self.products, to_np(y), self.sharp.shape[1])
        self._done(k + 1, y)

    def observe_many(self, k, states):
        """Record the outputs ``k, k + 1, ...`` of one step (dense output): the maps in one
        call where nothing else reads the states."""
        if not self.maps_only:
            for i, y in enumerate(states):
                self.observe(k + i, y)
            return
        if self.broken is not None:
            return
        m = states.shape[0]
        self.e2e[k:k + m] = self.net.end_to_end_many(states)
        self._losses(k, m, None)
        if not self._rose(k, states):
            self._done(k + m, states[-1])

    def unrecorded(self, n):
        """Outputs ``n, n + 1, ...`` back to NaN."""
        for a in (self.loss, self.e2e, self.outs, self.cons, self.ntk, self.ntk_norm,
                  self.ntk_align, self.sharp) + (self.wt or ()) + (self.bt or ()):
            if a is not None:
                a[n:] = np.nan


class _QuickRecorder:
    """The outputs of a quick run (:class:`_Quick`): the maps at the output times, as
    :class:`_Recorder` keeps them where nothing else is recorded (its attributes that
    ``PreparedFlow._finish`` reads); the breakdown guard reads the exact losses after the
    run (:meth:`rose`)."""

    wt = bt = outs = cons = ntk = ntk_norm = ntk_align = sharp = broken = None
    to_np = staticmethod(np.asarray)

    def __init__(self, net, T, y0):
        self.net, self.terms = net, True
        self.e2e = np.full((T,) + net.problem.Syx.shape, np.nan)
        self.loss = np.full(T, np.nan)
        self.n_done, self.y_done, self.y0 = 0, y0, y0

    def observe(self, k, y):
        self.e2e[k] = self.net.end_to_end(y)
        self.n_done, self.y_done = k + 1, y.copy()

    def unrecorded(self, n):
        self.loss[n:] = self.e2e[n:] = np.nan

    def rose(self, loss, t_eval):
        """Whether a loss rose from the first output's (or t = 0's) above the guard's
        :data:`BREAKDOWN_RISE` or is not finite: the general path, whose guard reads each
        output as the run reaches it, decides such a run."""
        loss0 = float(loss[0] if t_eval[0] == 0.0 else self.net.loss_of_map(
            self.net.end_to_end(self.y0)))
        top = float(loss.max())             # (NaN where one is NaN)
        return not top - loss0 <= max((BREAKDOWN_RISE - 1.0) * loss0, 0.0)


class _Quick:
    """The quick run of a :class:`PreparedFlow`: a small deep linear network's run in the
    compiled loop with the Python work around it cut to a few calls (docs/simulator.md,
    "The quick run"); one per flow and thread.

    It takes a flow on the numba backend of the ``linear`` model (no biases, not
    centered) that records the maps and losses alone (no ``record``, ``probe``, ``stop``,
    ``dense``, ``gd_lr``) with an explicit pair or ``"auto"``, of at most
    :data:`QUICK_MAX_SIZE` parameters.  The model, its compiled ops (the stage store) and
    the first stretch's pair and control are formed once; a run is the same loop as the
    general path's (``methods.compiled.erk``, ``"auto"`` going on from where its pair's
    stretch ended when it turns stiff): the same arithmetic, the same results.  A failed
    run and one whose loss rose are run again by the general path, which reports them."""

    def __init__(self, flow):
        self.net = flow._net([np.zeros(s) for s in flow.shapes], None)
        self.tab, c = first_stretch(flow.method, flow.solver.rtol)
        self.control, self.auto = c, flow.method == "auto"
        self.ops = self.net.compiled_ops("erk", self.tab)[1]
        # (as the loop sets them up at each run: here for the horizon's first evaluation)
        self.ops.prepare(self.tab, None, flow.solver, predictive=c.predictive,
                         cap_safety=c.cap_safety, stiff_steps=c.stiff_steps,
                         stiff_held=c.stiff_held)

    @staticmethod
    def takes(flow):
        """Whether the quick run takes ``flow``."""
        return (type(flow) is PreparedFlow and flow.backend == "numba"
                and flow.model.name == "linear" and not flow.has_biases
                and flow.gd_lr is None and not flow.record and flow.stop is None
                and flow.recording.probe is None and not flow.solver.dense
                and not flow.options.centered and flow._layout.size <= QUICK_MAX_SIZE
                and (flow.method == "auto" or _METHOD_KINDS[flow.method][0] == "erk"))

    def integrate(self, y0, f0, t_eval, solver, observe):
        """The loop's Result from ``y0`` at t = 0 (``f0 = ops.first(y0)``, evaluated) onto
        ``t_eval`` (``solver``: the flow's SolverOptions), as ``methods.run`` returns it."""
        from .methods import compiled, driver
        res = compiled.erk(self.ops, y0, t_eval, self.tab, solver, observe, self.control,
                           t0=0.0, f0=f0)
        if self.auto and res.stiff:
            res = driver.auto(self.net, y0, t_eval, solver, observe,
                              driver.RunSettings("numba"), first=res)
        return res


class PreparedFlow:
    """Gradient flow of one network on one data set, ready to run from many initialisations.

    Built by :func:`prepare_flow` (``_prepare``) from the weight ``shapes``, the checked data,
    the ``model`` class that runs, the validated network ``options``, :class:`SolverOptions`
    and :class:`Recording`, the concrete ``backend``; ``gd_lr``: the step of gradient
    descent whose modified flow runs instead.  :meth:`run` takes the parameters at t = 0:
    ``gradient_flow(weights, ...)`` is ``prepare_flow(...).run(weights)``.
    """

    #: What runs (in failure messages); the breakdown guard's rise (None: no guard); whether
    #: a run first tests its horizon (:func:`check_horizon`).
    what, breakdown_rise, horizon_test = "gradient flow", BREAKDOWN_RISE, True
    #: How many eigenvalues ``record=("sharpness",)`` keeps; the step counts of the outputs
    #: (gradient descent's, ``Trajectory.steps``).
    sharpness_k, steps = 1, None

    def __init__(self, shapes, X, Y, model, options, solver, recording, *, backend="numpy",
                 has_biases=False, raise_on_failure=False, gd_lr=None):
        self.shapes, self.X, self.Y, self.model, self.options = shapes, X, Y, model, options
        self.solver, self.recording, self.has_biases = solver, recording, has_biases
        self.raise_on_failure, self.gd_lr = raise_on_failure, gd_lr
        self.method, self.backend = solver.method, backend
        self.xp = xp = _backend.get_cupy() if backend == "cupy" else np
        self.t_eval, self.record, self.stop = recording.t_eval, recording.record, recording.stop
        self.Xo = X if recording.probe is None else recording.probe.inputs
        self._shared = model.shared(shapes, X, Y, options, xp)
        self._data = (X, Y) if xp is np else (xp.asarray(X), xp.asarray(Y))
        self._layout = Layout(list(shapes) + (bias_shapes(shapes) if has_biases else []))
        # rhs's model, its parameters at t = 0 (copies) and the last arguments validated
        self._rhs_net = self._rhs_params = self._rhs_args = None
        if "modes" in self.record:
            U, s, Vt = np.linalg.svd(Y.T @ X / X.shape[0], full_matrices=False)
            self._modes = (U, s, Vt.T.copy())
        # the largest product of an evaluation: rows (samples, or the widest layer on
        # sufficient statistics; the probe's for "ntk") times a layer's size
        rows = max(widths_of(shapes)) if model.linear else max(X.shape[0], self.Xo.shape[0])
        self._work = rows * largest_layer(shapes)
        # the quick run's model and ops, one set per thread (the members of an ensemble)
        self._quick = threading.local() if _Quick.takes(self) else None

    def refill(self, X, Y, t_eval, same):
        """This flow on copies of new data ``X`` (P, D), ``Y`` (P, C) of the prepared shapes,
        float64 and checked, and output times ``t_eval`` (checked), in place: the
        statistics formed again into the same arrays (data equal to those it holds: the
        times alone; ``same``: :meth:`holds`).  For a flow of the quick run's cache only
        (:func:`gradient_flow`), which no caller holds, and which holds no caller's data."""
        self.t_eval, self.recording = t_eval, self.recording._replace(t_eval=t_eval)
        if same:
            # the loss of a few maps from the thin-QR summary (formed once for these data)
            self._shared.loss_summary()
            return self
        X, Y = X.copy(), Y.copy()
        self.X, self.Y, self.Xo, self._data = X, Y, X, (X, Y)
        self._shared.refill(X, Y)
        self._rhs_net = self._rhs_params = self._rhs_args = None
        q = getattr(self._quick, "run", None)
        if q is not None and not q.net.refilled():
            self._quick.run = None          # (the data's whiteness changed: formed anew)
        return self

    def holds(self, X, Y):
        """Whether this flow is on data equal to ``X`` (P, D), ``Y`` (P, C)."""
        return np.array_equal(X, self.X) and np.array_equal(Y, self.Y)

    def _quick_run(self, ws, tick):
        """The run from ``ws`` by the quick run (:class:`_Quick`), or None where the general
        path must run it: a failed run, or one whose loss rose (the breakdown guard)."""
        q = getattr(self._quick, "run", None)
        if q is None:
            q = self._quick.run = _Quick(self)
        net, t_eval = q.net, self.t_eval
        y0 = net.layout.pack(ws)
        f0 = q.ops.first(y0)
        if t_eval[-1] > 0.0:
            check_horizon(float(t_eval[-1]), y0, f0, self.solver.max_steps)
        out = _QuickRecorder(net, t_eval.size, y0)
        try:
            raw, interrupt = q.integrate(y0, f0, t_eval, self.solver,
                                         Observer(out.observe, None, tick)), None
        except KeyboardInterrupt as exc:
            raw, interrupt = _INTERRUPTED, exc
        if interrupt is None and not raw.status.success:
            return None
        traj = self._finish(net, ws, None, out, raw, interrupt)
        return None if out.rose(traj.loss, t_eval) else traj

    def _check(self, arrays, shapes, name):
        if len(arrays) != len(shapes):
            raise ValueError(f"{name} must have {len(shapes)} layers, got {len(arrays)}")
        out = []
        for i, (a, s) in enumerate(zip(arrays, shapes)):
            # a copy: the Trajectory's weights0 (read-only) are never the caller's arrays
            a = np.array(a, dtype=np.float64, order="C", copy=True)
            if a.shape != s:
                raise ValueError(f"{name}[{i}] must have shape {s}, got {a.shape}")
            if not np.isfinite(a).all():
                raise ValueError(f"{name}[{i}] has non-finite entries")
            out.append(a)
        return out

    def _parameters(self, weights0, biases0):
        ws = self._check(weights0, self.shapes, "weights0")
        if (biases0 is not None) != self.has_biases:
            raise ValueError("biases: pass them to run() exactly when the flow was prepared "
                             "with biases")
        bs = self._check(biases0, bias_shapes(self.shapes), "biases0") \
            if self.has_biases else None
        return ws, bs

    def _net(self, ws, bs):
        net = self.model(ws, bs, self.options, xp=self.xp)
        if self._shared is not None:
            net.prepare(*self._data, self._shared)
        else:
            net.prepare(*self._data)
        return net if self.gd_lr is None else ModifiedFlow(net, self.gd_lr)

    def rhs(self, y, weights0=None, biases0=None):
        """``dy/dt = -eta R grad L(y)`` (``R`` the rates ``lr_scales``), the vector field that
        :meth:`run` integrates, for a baseline integrator.

        Parameters
        ----------
        y : array_like, shape (n,)
            The state: ``W_1, ..., W_L`` row-major, then ``b_1, ..., b_{L-1}``.
        weights0, biases0 : list of ndarray, optional
            The parameters at t = 0 (a centered network's ``f_0``; default: those of ``y``).
            The model is built at the first call, and again where a centered network's
            parameters at t = 0 change (compared by value).

        Returns
        -------
        ndarray, shape (n,)
        """
        layout, L, centered = self._layout, len(self.shapes), self.options.centered
        y = as_float_array(y, "y", ndim=(1,))
        if y.shape != (layout.size,):
            raise ValueError(f"y must have shape ({layout.size},), got {y.shape}")
        if weights0 is None and (centered or self._rhs_net is None):
            parts = layout.unpack(y)
            weights0, biases0 = parts[:L], parts[L:] or None
        last = self._rhs_args
        if weights0 is not None and (centered or last is None or any(
                a is not b for a, b in zip((weights0, biases0), last))):
            ws, bs = self._parameters(weights0, biases0)
            params = ws + (bs or [])
            if self._rhs_net is None or (centered and not all(
                    np.array_equal(a, b) for a, b in zip(params, self._rhs_params))):
                self._rhs_net = self._net(ws, bs)
                self._rhs_params = [a.copy() for a in params]
            self._rhs_args = (weights0, biases0)
        xp = self.xp
        return _backend.to_numpy(self._rhs_net.rhs(xp.asarray(y), xp.empty(layout.size)))

    def run(self, weights0, biases0=None, *, report=True, progress=None):
        """Integrate from ``weights0`` (and ``biases0``), the state at t = 0.

        Parameters
        ----------
        weights0, biases0 : list of ndarray (N_l, N_{l-1}), list of ndarray (N_l,) or None
            ``[W_1, ..., W_L]`` with the prepared shapes, and ``[b_1, ..., b_{L-1}]`` where
            the flow was prepared with biases; never modified.
        report : bool
            Whether a failed run warns or raises here (False: the caller reports it).
        progress : None, True or False
            As for :func:`linearnets.gradient_flow`.

        Returns
        -------
        Trajectory
            As :func:`linearnets.gradient_flow` returns it.

        Raises
        ------
        FlowInterrupted
            On Ctrl-C, with the outputs recorded so far.
        """
        bar = self._bar(progress)
        try:
            traj = self._run(weights0, biases0, None if bar is None else bar.update)
            if bar is not None and traj.success:
                bar.update_all(bar.end)
        finally:
            if bar is not None:
                bar.close()
        return report_failure(traj, None if traj.success or not report else traj.message,
                              self.raise_on_failure, self.what)

    def _bar(self, progress):
        # the progress bar over flow time (None: none shows)
        return progress_for(progress, self.t_eval)

    def _run(self, weights0, biases0, tick=None):
        # run() less the report and the bar; tick(t): the loops' progress hook
        ws, bs = self._parameters(weights0, biases0)
        with _threads.limited(self._work):    # BLAS threads for this size (docs/methods.md)
            if self._quick is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    traj = self._quick_run(ws, tick)
                if traj is not None:
                    return traj
            net = self._net(ws, bs)
            if self.t_eval[-1] > 0.0 and self.horizon_test:
                with np.errstate(all="ignore"):   # (an overflowing start: the run's to report)
                    f0 = net.rhs(net.y0)
                check_horizon(float(self.t_eval[-1]), net.y0, f0, self.solver.max_steps)
            with np.errstate(over="ignore", invalid="ignore"):
                # a state that overflows is reported through the status, not through warnings
                return self._trajectory(net, ws, bs, tick)

    def _trajectory(self, net, ws, bs, tick=None):
        out = _Recorder(self, net, ws, bs)
        observer = Observer(out.observe, out.observe_many, tick)
        try:
            raw, interrupt = self._integrate(net, ws, bs, observer), None
        except KeyboardInterrupt as exc:
            raw, interrupt = _INTERRUPTED, exc
        return self._finish(net, ws, bs, out, raw, interrupt)

    def _finish(self, net, ws, bs, out, raw, interrupt):
        """The Trajectory of a run of ``net`` from ``ws``, ``bs``: its outputs ``out`` (a
        :class:`_Recorder`), the loop's Result ``raw``; ``interrupt`` the KeyboardInterrupt
        that ended it (raised again as :class:`FlowInterrupted`) or None."""
        t_eval = self.t_eval
        n, status, message = raw.n_done, raw.status, raw.message
        t_last = float(t_eval[-1]) if status.success else float(raw.t_last)
        if interrupt is not None or out.broken is not None:
            # the outputs recorded in full are kept (a row being written is not), the state
            # the last of them
            n, y_last = out.n_done, out.y_done
            t_last = float(t_eval[n - 1]) if n > 0 else 0.0
            if interrupt is not None:
                message += (f": the outputs up to t = {t_last:.6g} ({n} of {t_eval.size}) are "
                            f"kept, later ones are NaN")
            else:
                status = FlowStatus.BREAKDOWN
                message = (f"{status.message}: the loss rose from {out.loss0:.6g} at t=0 to "
                           f"{out.loss_bad:.6g} at t={t_eval[n]:.6g}; the outputs from there "
                           f"on are not recorded (a tighter rtol or atol keeps control)")
            out.unrecorded(n)
        else:
            y_last = out.to_np(raw.y_last)
        if out.terms is not None:
            out.loss[:n] = net.loss_of_map(out.e2e[:n])
        if out.sharp is not None:         # rows of outputs not reached are NaN
            out.sharp[np.isnan(out.loss)] = np.nan
        message = self._hints(raw, status, message)
        host = net.layout.unpack(np.array(y_last, dtype=np.float64, copy=True))
        L, e2e = len(self.shapes), out.e2e
        U, s_modes, V = self._modes if "modes" in self.record else (None, None, None)
        modes = np.einsum("ca,tcd,da->ta", U, e2e, V) if "modes" in self.record else None
        traj = Trajectory(
            t=t_eval.copy(), loss=out.loss, end_to_end=e2e, weights=tuple(host[:L]),
            t_last=t_last, nfev=int(raw.nfev), nsteps=int(raw.nsteps),
            nrejected=int(raw.nrejected), success=status.success, status=status,
            message=message, method=self.method, backend=self.backend, weights_t=out.wt,
            modes=modes, mode_s=s_modes, mode_u=U, mode_v=V, conservation=out.cons,
            ntk=out.ntk, ntk_norm=out.ntk_norm, ntk_alignment=out.ntk_align,
            dense=self.solver.dense and net.smooth,
            biases=tuple(host[L:]) if bs is not None else None, biases_t=out.bt,
            outputs=out.outs, t_stop=raw.t_stop, kinks=int(raw.kinks),
            sliding_time=float(raw.sliding_time), fallback_steps=int(raw.fallback_steps),
            weights0=tuple(ws), biases0=tuple(bs) if bs is not None else None,
            steps=None if self.steps is None else self.steps.copy(), sharpness=out.sharp)
        if interrupt is not None:
            # (the frames below, inside the loops, say nothing to the user)
            raise FlowInterrupted(f"{self.what} {message}", traj) from None
        return traj

    def _hints(self, raw, status, message):
        """``message``, with the budget, and where the stability cap held the steps the hint
        of ``method='auto'``."""
        tab = TABLEAUX.get(self.method)
        if status is FlowStatus.MAX_STEPS:
            message = message.replace(
                status.message, f"{status.message} ({self.solver.max_steps} attempted steps)", 1)
            h, rho = raw.h_next, raw.rho
            # the cap sets h rho = STABILITY_SAFETY boundary exactly (up to rounding)
            if tab is not None and rho > 0.0 and h * rho >= 0.999 * STABILITY_SAFETY * \
                    tab.stability_boundary:
                message += (f"; the step (h={h:.3g}) was held at the stability limit of "
                            f"converged modes (stiffness {rho:.3g}): {_AUTO_HINT}")
        ncapped = raw.ncapped
        if (status.success and tab is not None and ncapped >= CAPPED_HINT_STEPS
                and ncapped >= CAPPED_HINT_SHARE * raw.nsteps):
            # converged modes, not accuracy, set the steps
            message += (f"; {ncapped} of {raw.nsteps} steps were held at the stability limit "
                        f"of converged modes: {_AUTO_HINT}")
        return message

    def _integrate(self, net, ws, bs, observe):
        xp, rule = self.xp, self.stop
        if rule is not None and rule.kind == "relative_loss":
            # once, from the loss at t = 0: the loss stop of the same units
            rule = StopRule("loss", rule.value * net.loss(net.y0))
        if rule is None:
            stop = None
        elif rule.kind == "margin":
            stop = StopEvent(lambda y: rule.value - float(xp.min(net.margins(y))), rule)
        else:
            stop = StopEvent(lambda y: net.loss(y) - rule.value, rule)
        return run_method(self.method, net, net.y0, self.t_eval, self.solver, observe,
                          backend=self.backend, xp=xp, dense=self.solver.dense, stop=stop)


def prepare_flow(X, Y, layers, t_eval, eta=1.0, rtol=1e-8, atol=1e-12, backend="auto", *,
                 method=None, max_steps=DEFAULT_MAX_STEPS, first_step=None,
                 dense=False, lr_scales=None, activation="linear", biases=False,
                 multipliers=None, alpha=1.0, centered=False, loss="mse", stop=None,
                 kink_rtol=None, record=(), probe=None, model=None, raise_on_failure=False,
                 gd_lr=None):
    """Validate and summarise the data once, for many gradient-flow runs of one network.

    The flow of :func:`gradient_flow` (for a linear network ``dW_l/dt = eta (W_L...W_{l+1})^T
    (Syx - W Sxx) (W_{l-1}...W_1)^T``, Saxe, McClelland & Ganguli 2014), with ``Sxx = X^T X /
    P`` and ``Syx = Y^T X / P`` formed here once.

    Parameters
    ----------
    X, Y, t_eval
        As for :func:`gradient_flow`: (P, D), (P, C) or (P,), (T,).
    layers : sequence of int, or sequence of (N_l, N_{l-1}) tuples
        Layer sizes ``(D, N_1, ..., C)`` or the weight shapes.
    biases : bool
        Whether the network has trained hidden biases (their values go to :meth:`run`).
    eta, rtol, atol, backend, method, ..., raise_on_failure, gd_lr
        As for :func:`gradient_flow` (``method=None``: its default).

    Returns
    -------
    PreparedFlow
        ``prepared.run(weights0)`` is ``gradient_flow(weights0, X, Y, t_eval, ...)``.
    """
    shapes = shapes_of(layers)
    X, Y = check_data(X, Y, shapes, loss)
    return _prepare(shapes, X, Y, locals())


def _prepare(shapes, X, Y, given, prepared=PreparedFlow):
    """A ``prepared`` (:class:`PreparedFlow` or a subclass) on weight ``shapes`` and data
    already checked (:func:`check_data`), from a front end's keywords ``given`` (its
    ``locals()``; one it lacks takes its default)."""
    def pick(names):
        return {name: given[name] for name in names if name in given}
    network, model, gd_lr = pick(NETWORK_KEYWORDS), given["model"], given.get("gd_lr")
    t_eval = check_t_eval(given["t_eval"])
    network["eta"] = float(check_positive(network.get("eta", 1.0), "eta", ndim=0))
    options = parse_options(len(shapes), **network)
    has_biases = given["biases"] is not None and given["biases"] is not False
    stop = check_stop(given.get("stop"), options, Y)
    solver = check_solver(SolverOptions(**pick(SolverOptions._fields[:-1])))
    rec = check_record(given["record"])
    cls = select_model(options, has_biases) if model is None else get_model(model)
    if "sharpness" in rec and cls.name not in ("mlp", "linear"):
        raise ValueError(f"record: 'sharpness' exists for the networks of the 'mlp' and "
                         f"'linear' models, got model={cls.name!r}")
    if gd_lr is not None:
        gd_lr = float(check_positive(gd_lr, "gd_lr", ndim=0))
        if cls.jvp is None and cls.linearize is None:
            raise ValueError(f"gd_lr: the {cls.name!r} model has no exact Jacobian-vector "
                             f"product for the modified flow")
    if (rec & {"modes", "conservation"}) and not (cls.linear and options.activation == "linear"
                                                  and not has_biases):
        bad = "modes" if "modes" in rec else "conservation"
        raise ValueError(f"record: {bad!r} exists only for a linear network (activation="
                         f"'linear', no biases), got activation={options.activation!r}")
    probe = given["probe"]
    if probe is not None or "ntk" in rec:
        probe = check_probe(probe if probe is not None else (X, Y), X.shape[1], Y.shape[1])
        rec = rec | {"ntk"}
    concrete = _backend.resolve_backend(solver.backend, max(max(s) for s in shapes),
                                        _backend.BACKENDS)
    if concrete == "numba":
        # a model's compiled twin; a model without one, and the modified flow (the numpy
        # model's exact products), run the numpy reference
        cls, concrete = (cls.numba_model, "numba") if cls.numba_model is not None \
            and gd_lr is None else (cls, "numpy")
    return prepared(shapes, X, Y, cls, options, solver, Recording(t_eval, rec, probe, stop),
                    backend=concrete, has_biases=has_biases,
                    raise_on_failure=bool(given["raise_on_failure"]), gd_lr=gd_lr)


def gradient_flow(weights, X, Y, t_eval, eta=1.0, rtol=1e-8, atol=1e-12, backend="auto", *,
                  method=DEFAULT_METHOD, record=(), probe=None, max_steps=DEFAULT_MAX_STEPS,
                  first_step=None, dense=False, activation="linear", biases=None,
                  multipliers=None, alpha=1.0, centered=False, loss="mse", lr_scales=None,
                  stop=None, kink_rtol=None, raise_on_failure=False, model=None, gd_lr=None,
                  progress=None):
    """Integrate gradient flow of a network from ``weights``, the state at t = 0.

    A deep linear network on the squared loss by default, ``dW_l/dt = eta (W_L...W_{l+1})^T
    (Syx - W Sxx) (W_{l-1}...W_1)^T`` (Saxe, McClelland & Ganguli 2014); any other through
    the network keywords, ``dtheta_l/dt = -eta lr_scales[l-1] dL/dtheta_l`` with ``L =
    (1/(alpha^2 P)) sum_mu l(F(x_mu), y_mu)`` (docs/conventions.md, "Beyond linear
    networks"), by an adaptive, error-controlled method (docs/simulator.md, "The front end").

    Parameters
    ----------
    weights : list of ndarray (N_l, N_{l-1})
        ``[W_1, ..., W_L]`` at t = 0; never modified.
    X, Y : array_like, shape (P, D), and (P, C) or (P,)
        Inputs (need not be whitened) and targets (1-D: C = 1).
    t_eval : array_like, shape (T,)
        Strictly increasing output times since initialisation, all ``>= 0``.
    eta, rtol, atol : float
        Learning rate ``> 0``; local error tolerances, ``100 eps <= rtol < 1``, ``0 < atol < 1``.
    backend : {"auto", "numpy", "numba", "cupy"}
        Where the run goes; results are numpy float64 arrays in any case.
    method : str
        One of :data:`METHODS` (docs/methods.md): ``"auto"`` (the explicit pair, SSPRK104 or
        the L-stable ROS34PW2, whichever costs least per unit time: docs/simulator.md, "The
        auto rule"), ``"DOP853"``, ``"RK45"``, ``"Tsit5"``, ``"SSPRK104"``, ``"ROS34PW2"``,
        ``"BS32"``, ``"HE21"``.
    record, probe : collection of str; ndarray (Q, D) or tuple (Xp (Q, D), Yp (Q, C) or (Q,))
        Any of :data:`RECORDABLE` (``"sharpness"``: ``Trajectory.sharpness`` (T, 1), the
        largest eigenvalue of the loss's Hessian, :func:`linearnets.sharpness`, with the
        ``lr_scales``); the inputs (and targets) of the recorded NTK (implies
        ``"ntk"``; default: the training data).
    max_steps, first_step : int, float or None
        The budget of attempted steps; the initial step (None: chosen automatically).
    dense : bool
        True (``DENSE_METHODS`` only): output times inside a step are the continuous
        extension ``y(t + theta h) = y + h sum_j B_j(theta) K_j``; False: each ends a step.
    activation : str or tuple
        ``"linear"``, ``"relu"``, ``"leaky_relu"`` (``("leaky_relu", a)``, a = 0.01),
        ``"softplus"`` (``("softplus", beta)``, beta = 1), ``"tanh"``: ``h_l = phi(m_l W_l
        h_{l-1} + b_l)``, ``f = m_L W_L h_{L-1}``.
    biases : list of ndarray (N_l,), optional
        ``[b_1, ..., b_{L-1}]``: trained hidden biases at t = 0.
    multipliers, lr_scales : sequence of L floats > 0, optional
        Forward multipliers ``m_l``; per-layer rates (``W_l``, ``b_l`` move with ``eta
        lr_scales[l-1]``). All 1 by default.
    alpha, centered : float > 0, bool
        Output scale, ``F = alpha f``; centered, ``F = alpha (f - f_0)`` with ``f_0`` the
        network at t = 0 (fixed).
    loss : str or tuple
        ``"mse"``, ``("soft_hinge", beta_h)`` (``"soft_hinge"``: beta_h = 20; C = 1, labels
        +-1), ``"logistic"`` (``log(1 + e^{-y F})``; C = 1, labels +-1) or ``"cross_entropy"``
        (``-sum_c y_c log softmax(F)_c``; C >= 2, ``Y`` rows of probabilities or integer
        labels (P,)): docs/descent.md, "Losses".
    stop : None, "margin", ("margin", m), ("loss", value) or ("relative_loss", r)
        Stop once every margin reaches ``m`` (1 for ``"margin"``; ``y F`` on one output, ``F_y
        - max_{c != y} F_c`` for hard labels of the cross entropy), once the loss reaches
        ``value`` (the units of ``Trajectory.loss``: ``(1/(alpha^2 P)) sum_mu l(F(x_mu),
        y_mu)``), or once it reaches ``r`` times its value at t = 0 (``0 < r < 1``), located
        inside the step (``Trajectory.t_stop``).
    kink_rtol : float, optional
        rtol of the BS32 pair across and along kinks of ReLU-type nets, throughout the run.
        Default: ``max(rtol, KINK_RTOL)`` (3e-4) for its first ``KINK_EARLY_STEPS`` (300)
        accepted steps, then ``max(rtol, KINK_RTOL_LATE)`` (1e-3): outputs to about 1e-3
        from the lazy to the rich regime (docs/methods.md, "What kink_rtol trades").
    raise_on_failure : bool
        A failed run raises :class:`FlowError` instead of warning (:class:`FlowWarning`).
    model : str, optional
        A registered model (``linearnets.sim.models``) instead of the first taking the options.
    gd_lr : float, optional
        Integrate the modified flow that gradient descent with step ``gd_lr`` follows to
        second order (Barrett & Dherin 2021; docs/descent.md): ``dtheta/dt = -eta Lambda grad
        L - (eta gd_lr / 2) Lambda H Lambda grad L`` (``Lambda`` the ``lr_scales``, ``H`` the
        loss's Hessian, exact Hessian-vector products), which GD with step ``gd_lr / eta``
        after k steps matches at ``t = k gd_lr / eta`` to ``O(gd_lr^2)``.  Runs on numpy.
    progress : None, True or False
        A tqdm bar over the flow time, from 0 to ``t_eval[-1]`` (its position on a log scale
        of time where the positive output times span 3 decades or more), on stderr. None
        (automatic): shown once the run has lasted 2 s, where stderr is a terminal; True:
        always; False: never.

    Returns
    -------
    Trajectory
        ``success`` False, with a message, for a failed run: the outputs reached are kept,
        later rows are NaN.

    Raises
    ------
    FlowInterrupted
        On Ctrl-C (a ``KeyboardInterrupt``): its ``trajectory`` holds the outputs recorded
        so far, ``success`` False.

    Examples
    --------
    >>> from linearnets.data import scalar_teacher
    >>> from linearnets.network import init_network
    >>> X, y, beta = scalar_teacher(20, 3, 1.0)
    >>> ws = init_network((3, 4, 1), 0.1)
    >>> traj = gradient_flow(ws, X, y, [0.0, 50.0], backend="numpy")
    >>> bool(traj.success and traj.loss[-1] < 1e-10)
    True
    """
    key = _quick_key(weights, X, Y, locals())
    flow = _quick_flow(key, X, Y, t_eval)
    if flow is not None:            # a flow of the quick run's cache, on these data
        try:
            return flow.run(weights, progress=check_progress(progress))
        except ValueError:
            pass                    # (bad input: the checks below name the argument)
    ws = check_weights(weights)
    shapes = tuple(w.shape for w in ws)
    X, Y = check_data(X, Y, shapes, loss)     # the data are named before the layer sizes
    bs = check_biases(biases, shapes)
    if method is None:                # (prepare_flow's None is its default; here a name)
        raise ValueError(f"method must be one of {METHODS}, got None")
    check_progress(progress)
    if key is not None:                 # (a kept flow holds no caller's data)
        X, Y = X.copy(), Y.copy()
    flow = _prepare(shapes, X, Y, locals())
    if key is not None and flow._quick is not None:
        _keep_quick(key, flow)
    return flow.run(ws, bs, progress=progress)


_quick_flows = threading.local()        # .flows: key -> PreparedFlow, oldest first


def _quick_key(weights, X, Y, given):
    """The key of :func:`gradient_flow`'s cache of quick-run flows (:class:`_Quick`) for a
    call with these ``weights``, data and keywords ``given``, or None where the call is not
    one the quick run takes with plain arrays: every network and recording keyword at its
    default (``eta`` and ``alpha`` aside), ``X`` and ``Y`` C-contiguous float64 of at most
    :data:`QUICK_MAX_DATA` entries, the weights arrays, every keyword hashable."""
    g = given
    if (type(g["record"]) is not tuple or g["record"] or g["probe"] is not None
            or g["stop"] is not None or g["biases"] is not None or g["dense"] is not False
            or g["gd_lr"] is not None or g["model"] is not None or g["lr_scales"] is not None
            or g["multipliers"] is not None or g["centered"] is not False
            or type(g["activation"]) is not str or g["activation"] != "linear"
            or type(g["loss"]) is not str or g["loss"] != "mse"):
        return None
    for a in (X, Y):
        if not (type(a) is np.ndarray and a.dtype == np.float64 and a.flags.c_contiguous):
            return None
    if X.ndim != 2 or Y.ndim not in (1, 2) or X.size + Y.size > QUICK_MAX_DATA:
        return None
    try:
        key = (tuple(w.shape for w in weights), X.shape, Y.shape[:1] + (Y.shape[1:] or (1,)),
               *(g[name] for name in _QUICK_KEYWORDS))
        hash(key)
    except (TypeError, AttributeError):
        return None
    return key


#: The keywords that tell the flows of :func:`gradient_flow`'s quick-run cache apart.
_QUICK_KEYWORDS = ("eta", "rtol", "atol", "backend", "method", "max_steps", "first_step",
                   "kink_rtol", "raise_on_failure", "alpha")


def _quick_flow(key, X, Y, t_eval):
    """The cached flow of ``key`` (:func:`_quick_key`) refilled with these data and output
    times, or None: no such flow, or data or times that fail their checks (the general
    path's checks then name the argument, in their order)."""
    flows = getattr(_quick_flows, "flows", None)
    flow = None if key is None or flows is None else flows.get(key)
    if flow is None:
        return None
    try:
        t_eval = check_t_eval(t_eval)
        Y2 = Y.reshape(Y.shape[0], -1)
        same = flow.holds(X, Y2)
        if not same:
            X, Y2 = check_data(X, Y, flow.shapes)
    except ValueError:
        return None
    flows.move_to_end(key)
    return flow.refill(X, Y2, t_eval, same)


def _keep_quick(key, flow):
    """Keep ``flow`` (prepared on copies of the caller's data) in this thread's cache (the
    :data:`QUICK_CACHE` most recent)."""
    flows = getattr(_quick_flows, "flows", None)
    if flows is None:
        flows = _quick_flows.flows = collections.OrderedDict()
    flows[key] = flow
    while len(flows) > QUICK_CACHE:
        flows.popitem(last=False)
