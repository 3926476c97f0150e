"""The solver interface and the registry of integration methods.

A *solver* integrates one :class:`~linearnets.sim._rhs.FlowProblem` on one
backend.  Every solver has the same signature::

    solver(problem, y0, t_eval, options, observe) -> RawResult

* ``problem`` -- :class:`~linearnets.sim._rhs.FlowProblem` (shapes, Sxx, Syx, eta_l);
* ``y0`` -- flat initial state (n,), numpy float64, C-contiguous; never modified;
* ``t_eval`` -- strictly increasing float64 times (T,), ``t_eval[0]`` the start time;
* ``options`` -- :class:`SolverOptions` (rtol, atol, max_steps, first_step, dense);
* ``observe(k, y)`` -- called once for every reached output time, in order
  ``k = 0, 1, ...``, with the state at ``t_eval[k]`` (reached by a step, or with
  ``options.dense`` the continuous extension of the step across it) as a numpy float64
  (n,) array.  The buffer may be reused afterwards: the observer copies what it keeps.
  Device backends convert to numpy before calling it.

It returns a :class:`RawResult`.  Failure (step-size underflow, a non-finite
right-hand side, an exhausted step budget) is never raised: the solver stops,
reports the :class:`FlowStatus` and how many outputs it reached.

Methods are registered per backend with :func:`register_solver`; modules
``linearnets.sim._stiff`` and ``linearnets.sim._cupy``, when present, are
imported on first lookup and register themselves (they must not import CuPy at
module import time).
"""
from __future__ import annotations

import enum
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

__all__ = [
    "FlowStatus",
    "SolverOptions",
    "RawResult",
    "register_solver",
    "get_solver",
    "method_names",
    "backends_for",
]


class FlowStatus(enum.Enum):
    """Outcome of an integration; ``.code`` (int, 0 = success) and ``.message`` (str)."""

    SUCCESS = (0, "reached the last t_eval")
    STEP_UNDERFLOW = (-1, "step size fell below the floating-point resolution of t")
    NONFINITE = (-2, "the right-hand side or the state became non-finite (NaN or inf)")
    MAX_STEPS = (-3, "step budget max_steps exhausted")
    BREAKDOWN = (-4, "step control broke down")

    def __init__(self, code, message):
        self.code = code
        self.message = message

    @property
    def success(self) -> bool:
        return self is FlowStatus.SUCCESS

    def __str__(self):
        return f"{self.name}: {self.message}"


@dataclass(frozen=True)
class SolverOptions:
    """Accuracy and budget settings shared by all solvers.

    Attributes
    ----------
    rtol, atol : float
        Local error per step is kept below ``atol + rtol * |y|`` (componentwise, RMS norm).
    max_steps : int
        Budget of attempted steps (accepted + rejected) for the whole run.
    first_step : float or None
        Initial step; None selects it automatically (Hairer-Norsett-Wanner II.4).
    dense : bool
        Step past the output times and evaluate them with the method's continuous
        extension (``Tableau.dense_P``); only the last output time ends a step.
        Methods without one step onto every output time regardless.
    stiff_steps : int
        0 (default): no stiffness test.  k > 0: an explicit solver that has the test
        (DOP853 on the numba backend, for ``"auto"``) stops once the stability cap has
        shortened k accepted steps in a row, and returns with ``RawResult.stiff``.
    """

    rtol: float = 1e-8
    atol: float = 1e-12
    max_steps: int = 1_000_000
    first_step: Optional[float] = None
    dense: bool = False
    stiff_steps: int = 0


@dataclass(frozen=True)
class RawResult:
    """What a solver hands back.

    Attributes
    ----------
    n_done : int
        Number of output times reached (``observe`` was called for ``k < n_done``).
    t_last : float
        Time of the last accepted state.
    y_last : ndarray, shape (n,)
        The last accepted state (numpy, owned by the result).
    nfev : int
        Right-hand-side evaluations (including those of the initial-step selection).
    nsteps : int
        Accepted steps.
    nrejected : int
        Rejected step attempts.
    status : FlowStatus
    message : str
        Human-readable, with the time where the run stopped on failure.
    stiff : bool
        The run stopped early (status SUCCESS, ``n_done`` < T) because the stiffness
        test of ``SolverOptions.stiff_steps`` fired at ``t_last``.
    h_next : float
        The step the solver would have tried next (0 where it does not say).
    ncapped : int
        Accepted steps after which an explicit method's stability cap shortened the
        next step (converged modes, not accuracy, set it); 0 for other methods.
    """

    n_done: int
    t_last: float
    y_last: np.ndarray
    nfev: int
    nsteps: int
    nrejected: int
    status: FlowStatus
    message: str
    stiff: bool = False
    h_next: float = 0.0
    ncapped: int = 0


Solver = Callable[..., RawResult]

_REGISTRY: dict = {}
# (order matters: _lowstorage replaces _explicit's generic SSPRK104 on numpy and numba)
_PLUGINS = ("linearnets.sim._explicit", "linearnets.sim._lowstorage", "linearnets.sim._stiff",
            "linearnets.sim._cupy")
_plugins_loaded = False


def register_solver(method: str, backend: str, solver: Solver) -> None:
    """Register ``solver`` as the implementation of ``method`` on ``backend``."""
    _REGISTRY.setdefault(method, {})[backend] = solver


def _load_plugins():
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for mod in _PLUGINS:
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod)


def method_names():
    """Names of all registered methods."""
    _load_plugins()
    return tuple(sorted(_REGISTRY))


def backends_for(method: str):
    """Backends on which ``method`` is implemented (raises ``ValueError`` for unknown methods)."""
    _load_plugins()
    if method not in _REGISTRY:
        raise ValueError(f"method must be one of {method_names()}, got {method!r}")
    return tuple(_REGISTRY[method])


def get_solver(method: str, backend: str) -> Solver:
    """The solver implementing ``method`` on the concrete ``backend``."""
    available = backends_for(method)
    if backend not in available:
        raise ValueError(f"method {method!r} has no {backend!r} implementation "
                         f"(available: {available})")
    return _REGISTRY[method][backend]
