"""Prepare once, run many: the fixed cost of :func:`gradient_flow` taken out of the per-run path.

A phase diagram runs thousands of small networks of one architecture on one
data set. For a 10-16-1 linear network a one-step ``gradient_flow`` call spends
most of its time before and after the integration: argument validation, the
sufficient statistics and layout of ``make_problem``, the observation set-up,
the loss at the output times (``benchmarks/bench_sweep.py --profile`` prints
the breakdown). :func:`prepare_flow` does the data-dependent part once;
:meth:`PreparedFlow.run` then only packs the weights, integrates, and forms
the outputs, through the very functions ``gradient_flow`` calls, so its
results are those of ``gradient_flow`` with the same arguments.

Scope: linear networks on the squared loss (the sufficient-statistics path),
without recordings; other options go through :func:`gradient_flow`.
"""
from __future__ import annotations

import numpy as np

from .. import backend as _backend
from .._validation import check_int, check_positive
from . import _rhs
from ._solvers import SolverOptions, backends_for, get_solver
from .flow import (DEFAULT_MAX_STEPS, DENSE_METHODS, Trajectory, _check_data, _check_max_steps,
                   _check_t_eval, _check_tolerances, _end_to_end_of)

__all__ = ["prepare_flow", "PreparedFlow", "warm"]


def _shapes_of(layers):
    try:
        layers = tuple(layers)
    except TypeError:
        raise ValueError(f"layers must be layer sizes (D, N_1, ..., C) or weight shapes, got {layers!r}") from None
    if layers and all(isinstance(s, tuple) for s in layers):
        shapes = tuple((check_int(r, "layers", 1), check_int(c, "layers", 1)) for r, c in layers)
    else:
        sizes = tuple(check_int(n, "layers", 1) for n in layers)
        if len(sizes) < 2:
            raise ValueError(f"layers must be layer sizes (D, N_1, ..., C) with at least 2 entries, got {layers!r}")
        shapes = tuple((sizes[i + 1], sizes[i]) for i in range(len(sizes) - 1))
    if any(r < 1 or c < 1 for r, c in shapes):
        raise ValueError(f"layers must have positive sizes, got {layers!r}")
    for i in range(len(shapes) - 1):
        if shapes[i + 1][1] != shapes[i][0]:
            raise ValueError(f"layers: shape {shapes[i + 1]} does not follow {shapes[i]}")
    return shapes


class PreparedFlow:
    """Gradient flow of one architecture on one data set, ready to run from many initialisations.

    Built by :func:`prepare_flow`; call :meth:`run` with the weights at t = 0.
    """

    def __init__(self, shapes, problem, solver, options, t_eval, method, backend):
        self.shapes = shapes
        self.problem = problem
        self._solver = solver
        self._options = options
        self.t_eval = t_eval
        self.method = method
        self.backend = backend
        self._e2e, self._e2e_many = _end_to_end_of(problem, backend)
        C, D = problem.Syx.shape
        self._CD = (C, D)
        self._skip = int(t_eval[0] > 0)
        self._t_solve = np.concatenate(([0.0], t_eval)) if self._skip else t_eval

    def run(self, weights0):
        """Integrate from ``weights0`` (the state at t = 0) over the prepared output times.

        Parameters
        ----------
        weights0 : list of ndarray
            ``[W_1, ..., W_L]`` with the prepared shapes; never modified.

        Returns
        -------
        Trajectory
            As :func:`linearnets.gradient_flow` returns it without recordings:
            ``t`` (T,), ``loss`` (T,), ``end_to_end`` (T, C, D), final ``weights``.
        """
        shapes = self.shapes
        if len(weights0) != len(shapes):
            raise ValueError(f"weights0 must have {len(shapes)} layers, got {len(weights0)}")
        for i, (w, s) in enumerate(zip(weights0, shapes)):
            if getattr(w, "shape", None) != s:
                raise ValueError(f"weights0[{i}] must have shape {s}, got {getattr(w, 'shape', None)}")
        ws = [np.asarray(w, dtype=np.float64) for w in weights0]
        for i, w in enumerate(ws):
            if not np.isfinite(w).all():
                raise ValueError(f"weights0[{i}] has non-finite entries")
        T = self.t_eval.size
        skip = self._skip
        C, D = self._CD
        # solver outputs: t = 0 first where t_eval starts later (the weights are the state at t = 0)
        e2e_all = np.full((T + skip, C, D), np.nan)
        end_to_end, end_to_end_many = self._e2e, self._e2e_many

        def observe(k, y):
            end_to_end(y, e2e_all[k])

        def observe_many(k, states):
            end_to_end_many(states, e2e_all[k:k + states.shape[0]])

        observe.many = observe_many
        y0 = _rhs.pack(ws)
        with np.errstate(over="ignore", invalid="ignore"):
            raw = self._solver(self.problem, y0, self._t_solve, self._options, observe)
            e2e = e2e_all[skip:]
            loss = np.full(T, np.nan)
            n = max(raw.n_done - skip, 0)
            loss[:n] = _rhs.loss_from_end_to_end(e2e[:n], self.problem)
        final = tuple(np.array(w, copy=True) for w in _rhs.unpack(_backend.to_numpy(raw.y_last), shapes))
        return Trajectory(
            t=self.t_eval.copy(), loss=loss, end_to_end=e2e, weights=final, t_last=float(raw.t_last),
            nfev=int(raw.nfev), nsteps=int(raw.nsteps), nrejected=int(raw.nrejected),
            success=raw.status.success, status=raw.status, message=raw.message, method=self.method,
            backend=self.backend, weights_t=None, modes=None, mode_s=None, mode_u=None, mode_v=None,
            conservation=None, ntk=None, ntk_norm=None, ntk_alignment=None, dense=bool(self._options.dense))


def _default_method():
    """``gradient_flow``'s own default method, so that both paths integrate alike."""
    import inspect

    from .flow import gradient_flow
    return inspect.signature(gradient_flow).parameters["method"].default


def prepare_flow(X, Y, layers, t_eval, eta=1.0, rtol=1e-8, atol=1e-12, backend="auto", *,
                 method=None, max_steps=DEFAULT_MAX_STEPS, first_step=None, dense=False, lr_scales=None):
    """Validate and summarise the data once, for many gradient-flow runs of one linear architecture.

    The flow is that of :func:`linearnets.gradient_flow`,
    ``dW_l/dt = eta (W_L...W_{l+1})^T (Syx - W Sxx) (W_{l-1}...W_1)^T`` (Saxe,
    McClelland & Ganguli 2014; the package's conventions), with ``Sxx = X^T X / P``
    and ``Syx = Y^T X / P`` formed here once.

    Parameters
    ----------
    X : array_like, shape (P, D)
    Y : array_like, shape (P, C) or (P,)
    layers : sequence of int, or sequence of (N_l, N_{l-1}) tuples
        Layer sizes ``(D, N_1, ..., C)`` or the weight shapes.
    t_eval : array_like, shape (T,)
        Output times since initialisation (strictly increasing, >= 0).
    eta, rtol, atol, backend, method, max_steps, first_step, dense, lr_scales
        As for :func:`linearnets.gradient_flow` (``method=None``: its default).

    Returns
    -------
    PreparedFlow
        ``prepared.run(weights0)`` returns the :class:`Trajectory` that
        ``gradient_flow(weights0, X, Y, t_eval, ...)`` returns.
    """
    if method is None:
        method = _default_method()
    shapes = _shapes_of(layers)
    X, Y = _check_data(X, Y, shapes)
    D, C = shapes[0][1], shapes[-1][0]
    t_eval = _check_t_eval(t_eval)
    eta = float(check_positive(eta, "eta", ndim=0))
    rtol, atol = _check_tolerances(rtol, atol)
    max_steps = _check_max_steps(max_steps)
    if first_step is not None:
        first_step = float(check_positive(first_step, "first_step", ndim=0))
    if dense and method not in DENSE_METHODS:
        raise ValueError(f"dense=True needs one of {DENSE_METHODS}, got method={method!r}")
    if not isinstance(method, str):
        raise ValueError(f"method must be a string, got {method!r}")
    _backend.check_backend(backend)
    if lr_scales is not None:
        lr_scales = np.asarray(check_positive(lr_scales, "lr_scales", ndim=1), dtype=np.float64)
        if lr_scales.size != len(shapes):
            raise ValueError(f"lr_scales must have {len(shapes)} entries, got {lr_scales.size}")
    problem = _rhs.make_problem(shapes, X, Y, eta, lr_scale=lr_scales)
    concrete = _backend.resolve_backend(backend, problem.max_width, backends_for(method))
    solver = get_solver(method, concrete)
    options = SolverOptions(rtol=rtol, atol=atol, max_steps=int(max_steps), first_step=first_step,
                            dense=bool(dense))
    return PreparedFlow(shapes, problem, solver, options, t_eval, method, concrete)


def warm():
    """Load (or compile, the first time) the kernels of a small linear run: a sweep's worker warm-up.

    ``[sweep] warmup = "linearnets.sim.prepared:warm"`` in a spec runs it once per
    worker, so the first point of each worker does not pay for loading the
    compiled kernels.
    """
    from ..data import scalar_teacher
    from .network import init_network
    from .flow import gradient_flow

    X, y, _ = scalar_teacher(8, 3, 1.0, seed=0)
    w = init_network((3, 4, 1), 0.3, seed=0)
    t = np.array([0.5, 1.0])
    gradient_flow(w, X, y, t, record=("ntk",))
    prepare_flow(X, y, (3, 4, 1), t).run(w)
