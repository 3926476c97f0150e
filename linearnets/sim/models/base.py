"""The model interface of the simulator and the registry of models (docs/simulator.md,
"Models"): a :class:`Model` subclass on a flat float64 state plus one :func:`register_model`.

Adding a model
--------------
1. A module in ``sim/models/`` with a :class:`Model` subclass: set ``name``, ``linear``,
   ``smooth``; in ``__init__(weights, biases, options, xp)`` set ``layout`` (:class:`Layout`)
   and ``y0``; implement the abstract methods (``prepare``, ``rhs``, ``loss``, ``outputs``,
   ``ntk``, ``weights_of``) and ``handles`` (its rank for the options it runs).
2. Override only the optional hooks it has: the defaults on :class:`Model` mean "not
   there" (no ``jvp``/``linearize``, no stage ``stores``, no ``compiled_ops``, ...), and
   the method driver (``methods.driver``) and the front end read them, never probe.
3. A compiled twin, if any: a subclass with ``compiled_ops`` (its kernels in a ``_*_kernels``
   module beside it, entry points ``@njit(cache=True)``), set as ``numba_model``.
4. One line: ``register_model("name", cls)``, and the module's name in ``_load_builtin``.
5. Tests: the reference right-hand side against finite differences of ``loss``, and a run
   through ``gradient_flow(..., model="name")`` on each backend (``tests/sim/test_models.py``
   has a toy model that does both in 40 lines).
"""
from __future__ import annotations

import abc
import math
from itertools import accumulate

import numpy as np

from ...options import (ACTIVATIONS, CLASSIFICATION_LOSSES, LOSSES, ModelOptions,  # noqa: F401
                        parse_options)

__all__ = ["Layout", "Model", "ModelOptions", "parse_options", "register_model", "get_model",
           "model_names", "select_model", "ACTIVATIONS", "LOSSES", "CLASSIFICATION_LOSSES",
           "inverse_rates"]


class Layout:
    """Flat state <-> parameter arrays, packed one after the other row-major.

    Parameters
    ----------
    shapes : sequence of tuple of int
        The shape of each array, in state order.
    """

    def __init__(self, shapes):
        self.shapes = tuple(tuple(int(s) for s in shp) for shp in shapes)
        sizes = accumulate((math.prod(s) for s in self.shapes), initial=0)
        self.offsets = np.array(list(sizes), dtype=np.int64)

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def pack(self, arrays, xp=np):
        """A new flat float64 state (n,) from ``arrays`` (in layout order)."""
        if len(arrays) != len(self.shapes):
            raise ValueError(f"Layout.pack: expected {len(self.shapes)} arrays, got {len(arrays)}")
        if not arrays:
            return xp.zeros(0)
        return xp.ascontiguousarray(xp.concatenate(
            [xp.asarray(a, dtype=xp.float64).reshape(-1) for a in arrays]))

    def unpack(self, y):
        """Views of the arrays into ``y`` (n,) (writes go through)."""
        o = self.offsets
        return [y[o[i]:o[i + 1]].reshape(self.shapes[i]) for i in range(len(self.shapes))]


def inverse_rates(layout, rates, xp=np):
    """``R^{-1}`` (n,) from one rate per array of ``layout``, or None when all are equal."""
    rates = [float(r) for r in rates]
    if len(set(rates)) <= 1:
        return None
    return xp.asarray(np.repeat(1.0 / np.array(rates), np.diff(layout.offsets)))


class Model(abc.ABC):
    """Base class of a model, constructed as ``cls(weights, biases, options, xp=numpy)``.

    Subclasses set ``layout`` (:class:`Layout`) and ``y0`` (n,) (the parameters at t = 0) and
    implement the abstract methods; the optional hooks below default to "not there"
    (docs/simulator.md, "Models").
    """

    name = "model"
    linear = False
    smooth = True
    #: The twin of this class that ``backend="numba"`` runs (compiled operations), or None.
    numba_model = None

    # -- optional hooks (the defaults: the model has none) -------------------------------
    #: ``jvp(y, v, out=None) -> J(y) v`` (n,), exact, or None.
    jvp = None
    #: ``linearize(y) -> (jv, fresh)``: products of ``y`` kept for many ``J v``, or None.
    linearize = None
    #: Right-hand sides one product of ``linearize`` costs (a Rosenbrock step's work).
    jvp_cost = 1.0
    #: Positive weights ``M`` (n,) with ``M J`` symmetric (Rosenbrock's CG), or None.
    metric = None
    #: ``loss_terms(F) -> (loss, size)`` of end-to-end maps ``F`` (..., C, D) (a linear
    #: model's cheap loss at every output), or None: ``loss(y)`` at every output.
    loss_terms = None
    #: ``compiled_ops`` also takes kinks and stop rules (``stop=``), not only smooth runs.
    compiled_events = False
    #: ``descent_ops()`` -> ``(advance, data)``: a compiled gradient-descent loop
    #: (``methods._descent_kernels.make_gd_advance``) on this model, or None (a Python loop).
    descent_ops = None
    #: ``batch_ops(X, Y)`` -> ``(advance, data, full)``: a compiled mini-batch loop
    #: (``make_sgd_advance``) on this model prepared on a batch, drawing from the full data,
    #: or None (a Python loop).
    batch_ops = None

    def stores(self, kind, tab):
        """``(family, store)``: a stage store of method family ``kind`` with tableau ``tab``
        for the numpy loop (``methods.erk``/``methods.ssp``), or ``(kind, None)``."""
        return kind, None

    def compiled_ops(self, kind, tab, stop=None):
        """``(family, ops)``: the compiled loop's operations on this model (``ops`` None: the
        numpy loop runs); ``stop`` a stop rule, only where :attr:`compiled_events`."""
        return kind, None

    def end_to_end_many(self, Ys):
        """:meth:`end_to_end` of each row of ``Ys`` (m, n)."""
        return np.stack([self.end_to_end(y) for y in Ys])

    def loss_of_map(self, F):
        """The loss of end-to-end maps ``F`` (..., C, D) (with :attr:`loss_terms`)."""
        raise ValueError(f"loss_of_map: the {self.name!r} model is not linear in its inputs")

    # -- required --------------------------------------------------------------------------
    @abc.abstractmethod
    def prepare(self, X, Y):
        """Take the training data (P, D), (P, C); returns self."""

    @abc.abstractmethod
    def rhs(self, y, out=None):
        """``-eta lr_scale dL/dtheta`` (n,) at ``y`` (into ``out`` where given)."""

    @abc.abstractmethod
    def loss(self, y):
        """The training loss at ``y`` (a float)."""

    @abc.abstractmethod
    def outputs(self, y, Xp):
        """``F`` on the inputs ``Xp`` (Q, D): (Q, C)."""

    @abc.abstractmethod
    def ntk(self, y, X1, X2):
        """The empirical NTK of ``F`` at ``y``: (P1, P2) or (P1, P2, C, C)."""

    @abc.abstractmethod
    def weights_of(self, y):
        """The weight matrices ``[W_1, ..., W_L]`` of ``y`` (views)."""

    @classmethod
    def handles(cls, options, has_biases):
        """0 if this model does not run these options (then only by name), else a rank: the
        front end picks the registered model of the highest (:func:`select_model`)."""
        return 0

    @classmethod
    def shared(cls, shapes, X, Y, options, xp=np):
        """What :meth:`prepare` computes from the data alone, once per prepared flow, or None."""
        return None

    def end_to_end(self, y):
        raise ValueError(f"end_to_end: the {self.name!r} model is not linear in its inputs")

    def switches(self):
        return None

    def margins(self, y):
        raise ValueError(f"stop='margin': the {self.name!r} model has no margins")

    def biases_of(self, y):
        """The trained biases ``[b_1, ..., b_{L-1}]`` of ``y`` (views), or None."""
        return None

    def conservation(self, y, first):
        """``max_l |W_{l+1}^T W_{l+1} - W_l W_l^T - (same at the first call)|_F`` at ``y``:
        conserved by the exact flow of a linear network (0 at the first call)."""
        W = [np.asarray(w) for w in self.weights_of(y)]
        grams = [W[i + 1].T @ W[i + 1] - W[i] @ W[i].T for i in range(len(W) - 1)]
        if first:
            self._gram0 = grams
        return max((float(np.linalg.norm(g - g0)) for g, g0 in zip(grams, self._gram0)),
                   default=0.0)

    def probe_ntk(self, Xp):
        """``f(y)``: the NTK on the probe inputs ``Xp`` (on this model's array namespace)."""
        return lambda y: self.ntk(y, Xp, Xp)


_REGISTRY: dict = {}


def register_model(name, cls):
    """Register the model class ``cls`` under ``name`` (a new model's one registry line)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_model: name must be a non-empty string, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Model)):
        raise ValueError(f"register_model: cls must be a subclass of linearnets.Model, "
                         f"got {cls!r}")
    _REGISTRY[name] = cls
    return cls


def _load_builtin():
    import importlib            # by name: the model modules import this one
    for mod in ("linear", "mlp", "diagonal"):
        importlib.import_module(f"{__package__}.{mod}")


def get_model(name):
    """The model class registered as ``name`` (ValueError for an unknown name)."""
    if name not in _REGISTRY:
        _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"model must be one of {model_names()}, got {name!r}")
    return _REGISTRY[name]


def select_model(options, has_biases):
    """The registered model class that :meth:`~Model.handles` these options best."""
    _load_builtin()
    rank, cls = max(((c.handles(options, has_biases), i, c) for i, c in
                     enumerate(_REGISTRY.values())), key=lambda r: r[:2])[0::2]
    if rank > 0:
        return cls
    raise ValueError(f"no registered model takes activation={options.activation!r}, "
                     f"loss={options.loss!r}")


def model_names():
    """Names of the registered models."""
    _load_builtin()
    return tuple(sorted(_REGISTRY))
