"""The CuPy backend: every integration method with its state and products on a GPU.

The steppers of :mod:`linearnets.sim._stiff` are written against an array module
``xp``; here they run with ``xp = cupy``.  The flat state, the Runge-Kutta
stages, the Krylov vectors and the C-row product chains all stay on the device
between steps; per step only a few scalars cross to the host (the error norm,
the stiffness estimate, the conjugate-gradient coefficients), and the state is
copied to the host only at output times (``observe``) and at the end, so every
result is a numpy float64 array.

CuPy is optional: this module never imports it at import time.  The solvers
call :func:`linearnets.backend.get_cupy` when they run, which raises a readable
``ValueError`` if CuPy is missing or sees no GPU.  (``backend="cupy"`` is
rejected even earlier, in :func:`linearnets.backend.resolve_backend`.)

Methods: ``"RK45"``, ``"DOP853"`` (explicit, the generic stepper
``_stiff.erk_run``), ``"ROS34PW2"`` and ``"auto"`` (see :mod:`linearnets.sim._stiff`).
"""
from __future__ import annotations

from .. import backend as _backend
from . import _stiff
from ._solvers import register_solver

__all__ = ["METHODS", "make_solver"]

#: Methods this backend implements.
METHODS = ("RK45", "DOP853", "SSPRK104", "ROS34PW2", "auto")


def make_solver(method, get_module=_backend.get_cupy):
    """Build the solver of ``method`` on the array module returned by ``get_module()``.

    ``get_module`` is called when the solver runs (lazy import); it must return a
    module with CuPy's array API and an ``asnumpy`` function.  Tests pass a numpy
    stand-in to exercise this exact code path without a GPU.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")

    def solver(problem, y0, t_eval, options, observe):
        xp = get_module()
        return _stiff.solve(problem, y0, t_eval, options, observe, method=method, xp=xp,
                            to_host=xp.asnumpy)

    solver.__doc__ = f"{method} on the cupy backend (state and products on the GPU)."
    return solver


for _method in METHODS:
    register_solver(_method, "cupy", make_solver(_method))
