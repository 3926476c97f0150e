"""``python -m linearnets warmup``: compile every numba kernel of the package once.

The kernels are compiled on first use and cached (:mod:`linearnets._numba_cache`);
a first run therefore spends most of its time compiling.  :func:`warmup` does
that ahead of time: tiny runs of every method of the numba backend, in each of
the simulator's code paths (dense-stage and factored steppers, the low-storage
and the factored SSPRK104 forms, dense output, every observation) and the
compiled closed forms, with a progress bar.  Each task compiles only what is not
in the cache yet, so a second warmup takes seconds.
"""
from __future__ import annotations

import sys
import time
import warnings

import numpy as np

__all__ = ["TASKS", "warmup", "kernel_dispatchers"]


def _problem(sizes, seed=0):
    from .data import scalar_teacher, teacher_task
    from .network import init_network

    D, C = sizes[0], sizes[-1]
    P = max(2 * D, 8)
    if C == 1:
        X, y, _ = scalar_teacher(P, D, 1.0, seed=seed)
    else:
        X, y = teacher_task(P, D, np.linspace(1.0, 2.0, C), seed=seed)[:2]
    return init_network(sizes, 0.5, seed=seed), X, y


def _flow(sizes, method, t_end=0.5, outputs=3, **kw):
    def task():
        from .sim.flow import gradient_flow

        weights, X, y = _problem(sizes)
        t_eval = np.linspace(0.0, t_end, outputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gradient_flow(weights, X, y, t_eval, backend="numba", method=method,
                          rtol=1e-5, atol=1e-8, **kw)
    return task


def _theory():
    from .theory.dynamics import mode_strength, mode_time

    t = np.array([0.0, 1.0, 10.0, 1e3])
    for depth in (2, 3, 4):
        c = mode_strength(t, 1.0, 1e-3, depth=depth)
        mode_time(np.clip(c[1:], 2e-3, 0.9), 1.0, 1e-3, depth=depth)


def _infinite_width():
    """The Mehler sums and the scale-mixture rule of the tanh / softplus infinite-width kernels
    (theory/_infinite_width_kernels.py): an O(1) scale takes the first, sigma = 8 the second."""
    from .theory.infinite_width import infinite_width_kernels

    X = np.random.default_rng(0).standard_normal((3, 2))
    infinite_width_kernels(X, X, 2, activation="tanh")
    # pre-activation variances past MEHLER_MAX_SCALE: the scale mixture, diagonal and pairs
    infinite_width_kernels(10.0 * X, 10.0 * X, 2, activation="tanh", sigma=8.0)


def _ensemble():
    from .sim.ensemble import warm

    warm()


def _mlp():
    """The compiled MLP (``sim/models/_mlp_kernels.py``): every kernel, through a ReLU run
    (kinks: the switch pattern), a soft-hinge run with biases and a margin stop, the
    gradient, and two ensembles (members on threads, smooth and with kinks)."""
    from .sim.flow import gradient_flow
    from .options import parse_options
    from .sim.models.mlp import MLPNumba

    weights, X, y = _problem((4, 6, 5, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gradient_flow(weights, X, y, [0.0, 0.2], backend="numba", activation="relu",
                      rtol=1e-5, atol=1e-8)
        labels = np.where(y >= np.median(y), 1.0, -1.0).reshape(-1, 1)
        biases = [np.zeros(6), np.zeros(5)]
        gradient_flow(weights, X, labels, [0.0, 0.2], backend="numba", activation="tanh",
                      biases=biases, loss="soft_hinge", stop="margin", centered=True,
                      rtol=1e-5, atol=1e-8)
    net = MLPNumba(weights, None, parse_options(3, activation="softplus")).prepare(
        X, y.reshape(-1, 1))
    net.gradient(net.y0)
    hinge = MLPNumba(weights, None, parse_options(3, activation="tanh", loss="soft_hinge"))
    hinge.prepare(X, labels)
    hinge.margins(hinge.y0)         # the training outputs alone (mlp_outputs)
    # an ensemble (its members on threads), with and without kinks
    from .sim.ensemble import gradient_flow_ensemble
    nets = [weights, _problem((4, 6, 5, 1), seed=1)[0]]
    for act in ("relu", "tanh"):
        gradient_flow_ensemble(nets, X, y, [0.1, 0.2], activation=act, backend="numba")


def _descent():
    """Gradient descent (``methods/_descent_kernels.py`` through the models' entry points): a
    linear network's and an MLP's full-batch loop, the MLP's mini-batch loop."""
    from .sim.descent import gradient_descent

    weights, X, y = _problem((4, 6, 5, 1))
    gradient_descent(weights, X, y, [0, 3], 0.01, backend="numba")
    gradient_descent(weights, X, y, [0, 3], 0.01, backend="numba", activation="tanh")
    gradient_descent(weights, X, y, [0, 3], 0.01, backend="numba", activation="tanh",
                     batch_size=4)


_SMALL = (4, 5, 5, 2)         # every layer narrower than (stages + 1) C: dense stages
_WIDE = (4, 64, 64, 1)        # wider than 14 C: the factored (rank-C) stage updates
_LARGE = (8, 600, 600, 1)     # a state over 4 MiB: SSPRK104 as factored Butcher stages
_RECORD = ("weights", "modes", "conservation", "ntk")

#: (label, callable) pairs run by :func:`warmup`, in order.
TASKS = (
    ("closed forms", _theory),
    ("infinite width", _infinite_width),
    ("RK45", _flow(_SMALL, "RK45")),
    ("DOP853", _flow(_SMALL, "DOP853")),
    ("SSPRK104", _flow(_SMALL, "SSPRK104")),
    ("ROS34PW2", _flow(_SMALL, "ROS34PW2")),
    ("auto", _flow(_SMALL, "auto", t_end=1e4)),
    ("RK45 factored", _flow(_WIDE, "RK45")),
    ("DOP853 factored", _flow(_WIDE, "DOP853")),
    ("SSPRK104 factored", _flow(_LARGE, "SSPRK104", t_end=1e-3, outputs=2)),
    ("auto factored", _flow(_WIDE, "auto", t_end=1e4)),
    ("RK45 dense output", _flow(_SMALL, "RK45", outputs=9, dense=True)),
    ("SSPRK104 dense output", _flow(_SMALL, "SSPRK104", outputs=9, dense=True)),
    ("RK45 factored dense output", _flow(_WIDE, "RK45", outputs=9, dense=True)),
    ("observations", _flow(_SMALL, "DOP853", record=_RECORD)),
    ("observations, dense output", _flow(_SMALL, "RK45", outputs=9, dense=True, record=_RECORD)),
    ("observations, factored", _flow(_WIDE, "DOP853", record=_RECORD)),
    ("observations, SSPRK104", _flow(_SMALL, "SSPRK104", record=_RECORD)),
    ("observations, auto", _flow(_SMALL, "auto", t_end=1e4, record=_RECORD)),
    ("ensemble", _ensemble),
    ("MLP", _mlp),
    ("gradient descent", _descent),
)


def kernel_dispatchers():
    """Every numba dispatcher defined in the package's kernel modules (those that use
    :func:`linearnets._numba_cache.njit`).

    Returns
    -------
    dict
        ``"module.name" -> dispatcher``.
    """
    import importlib

    from numba.core.registry import CPUDispatcher

    from . import _numba_cache

    found = {}
    for rel in _numba_cache.kernel_modules():
        mod = importlib.import_module(f"{__package__}.{rel}")
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and getattr(obj.py_func, "__module__", None) == mod.__name__:
                found[f"{rel}.{name}"] = obj
    return found


def warmup(progress=True, file=None):
    """Compile (or load from the cache) every numba kernel of the package.

    Parameters
    ----------
    progress : bool
        Show a tqdm progress bar (on ``file``).
    file : file-like, optional
        Where the bar and the summary go (default ``sys.stderr``).

    Returns
    -------
    dict
        ``seconds`` (float), ``compiled`` (kernels compiled in this call, not
        loaded from the cache), ``loaded`` (kernels loaded from the cache in this
        process), ``kernels`` (number of dispatchers in the kernel modules), ``unused`` (names of those no task touched; a warm cache leaves
        callees that are only inlined into their callers untouched too), and
        ``cache_dir``.
    """
    from tqdm.auto import tqdm

    from . import _jit, _numba_cache

    file = sys.stderr if file is None else file
    old = _numba_cache.set_compile_notice(False)
    start_count = _numba_cache.compile_count()
    t0 = time.perf_counter()
    try:
        bar = tqdm(TASKS, desc="compiling kernels", unit="task", file=file, disable=not progress)
        with _jit.warming():      # (the tasks' backend="auto" calls compile, not numpy)
            for label, task in bar:
                bar.set_postfix_str(label)
                task()
    finally:
        _numba_cache.set_compile_notice(old)
    seconds = time.perf_counter() - t0
    kernels = kernel_dispatchers()
    # (an ``inline="always"`` kernel is compiled into its callers, never on its own)
    unused = sorted(n for n, d in kernels.items()
                    if not d.signatures and d.targetoptions.get("inline") != "always")
    loaded = sum(sum(d.stats.cache_hits.values()) for d in kernels.values())
    return {"seconds": seconds, "compiled": _numba_cache.compile_count() - start_count,
            "loaded": loaded, "kernels": len(kernels), "unused": unused, "cache_dir": _numba_cache.cache_dir()}
