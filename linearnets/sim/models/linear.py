"""The deep linear network with sufficient statistics, as a model of the general simulator.

The options map exactly onto the standard problem
----------------------------------------------------
With ``W = W_L ... W_1`` and ``M = prod_l m_l``, a linear network's output is
``F(x) = alpha M W x``, or ``alpha M (W - W_0) x`` when centered (``W_0`` the map at
t = 0).  Its loss is

    L(theta) = (1/(2 alpha^2 P)) sum_mu |y_mu - alpha M (W - W_0) x_mu|^2
             = M^2 (1/(2P)) sum_mu |y'_mu - W x_mu|^2 = M^2 L_std(theta; Y'),

    y'_mu = y_mu / (alpha M) + W_0 x_mu   (the W_0 term only when centered),

since ``y - alpha M (W - W_0) x = alpha M (y/(alpha M) + W_0 x - W x)``.  ``L`` depends on
each ``W_l`` only through ``W``, with the same weights as variables, so
``dL/dW_l = M^2 dL_std/dW_l`` and the flow
``dW_l/dt = -eta lr_scales[l-1] dL/dW_l`` is the standard linear flow with the
per-layer rates ``eta_l = eta M^2 lr_scales[l-1]`` (``FlowProblem.eta_l``) on the
targets ``Y'``.  Observations map back: ``F = alpha M (W - W_0) x``, the loss is
``M^2`` times the standard loss, the NTK of F is ``alpha^2 M^2`` times that of
``W x``.  (Checked in ``tests/test_models.py`` against :class:`~.mlp.MLP` with
``activation="linear"``, an independent path on raw samples.)

:func:`linear_mapping` gives ``(Y', eta_l)`` for the compiled sufficient-statistics
steppers (``flow.gradient_flow``'s fast path); :class:`LinearNet` is the same
problem behind the model interface, for the general stepping loop (stop rules).
"""
from __future__ import annotations

import numpy as np

from .. import _rhs
from ..ntk import _ntk
from .base import Layout, Model, inverse_rates, register_model

__all__ = ["LinearNet", "linear_mapping", "expressible"]


def expressible(options, biases):
    """Whether the sufficient-statistics problem expresses a network with these options:
    linear activation, no biases, the squared loss (any alpha, m_l, centered, lr_scales)."""
    return options.activation == "linear" and biases is None and options.loss == "mse"


def linear_mapping(weights, X, Y, options):
    """``(Y', eta_l, scale)`` of the module docstring: the standard problem's targets (P, C),
    per-layer rates (L,) and ``scale = alpha M`` (``F = scale (W - W_0 if centered) x``)."""
    M = float(np.prod(options.multipliers))
    scale = options.alpha * M
    Yp = Y / scale
    if options.centered:
        W0 = _rhs.end_to_end_flat(_rhs.pack(weights), tuple(w.shape for w in weights))
        Yp = Yp + X @ W0.T
    eta_l = options.eta * M * M * np.asarray(options.lr_scales, dtype=np.float64)
    return np.ascontiguousarray(Yp), np.ascontiguousarray(eta_l), scale


class LinearNet(Model):
    """A deep linear network (mse, any alpha, multipliers, centered, lr_scales) whose
    gradient depends on the data through ``Sxx`` and ``Syx'`` only (module docstring)."""

    name = "linear"
    linear = True
    smooth = True

    def __init__(self, weights, biases, options, xp=np):
        if biases is not None:
            raise ValueError("biases: the 'linear' model has no biases (the 'mlp' model has)")
        if options.activation != "linear":
            raise ValueError(f"activation: the 'linear' model is linear, got "
                             f"{options.activation!r}")
        if options.loss != "mse":
            raise ValueError(f"loss: the 'linear' model has the squared loss only, got "
                             f"{options.loss!r}")
        self.xp = np
        self.options = options
        self.weights0 = [np.array(w, dtype=np.float64) for w in weights]
        self.shapes = tuple(w.shape for w in weights)
        self.L = len(weights)
        self.layout = Layout(self.shapes, [f"W{l + 1}" for l in range(self.L)])
        self.y0 = self.layout.pack(self.weights0)
        # layer l moves at eta M^2 lr_scales[l-1] (module docstring): R^-1 up to a factor
        self.metric = inverse_rates(self.layout, options.lr_scales)
        self.scale = options.alpha * float(np.prod(options.multipliers))
        self._W0 = _rhs.end_to_end_flat(self.y0, self.shapes) if options.centered else None

    def weights_of(self, y):
        return self.layout.unpack(y)

    def prepare(self, X, Y):
        Yp, eta_l, _ = linear_mapping(self.weights0, X, Y, self.options)
        self.problem = _rhs.make_problem(self.shapes, X, Yp, 1.0, lr_scale=eta_l)
        self._M2 = float(np.prod(self.options.multipliers)) ** 2
        return self

    def rhs(self, y, out=None):
        return _rhs.rhs(y, self.problem, out)

    def loss(self, y):
        W = _rhs.end_to_end_flat(y, self.shapes, self.layout.offsets)
        return self._M2 * float(_rhs.loss_from_end_to_end(W, self.problem))

    def end_to_end(self, y):
        W = _rhs.end_to_end_flat(y, self.shapes, self.layout.offsets)
        if self._W0 is not None:
            W = W - self._W0
        return self.scale * W

    def outputs(self, y, Xp):
        return np.asarray(Xp, dtype=np.float64) @ self.end_to_end(y).T

    def ntk(self, y, X1, X2):
        return self.scale ** 2 * _ntk(self.weights_of(y), np.asarray(X1, dtype=np.float64),
                                      np.asarray(X2, dtype=np.float64))


register_model("linear", LinearNet)
