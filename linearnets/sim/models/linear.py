"""The deep linear network on sufficient statistics.

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
targets ``Y'``: ``Syx' = Syx / (alpha M) (+ W_0 Sxx)``.  Observations map back:
``F = alpha M (W - W_0) x``, the loss is that of ``F`` on the samples, the NTK of F is
``alpha^2 M^2`` times that of ``W x``.  (Checked in ``tests/sim/test_models.py`` against
:class:`~.mlp.MLP` with ``activation="linear"``, an independent path on raw samples.)

The data enter once per prepared flow (:meth:`LinearNet.shared`: ``Sxx``, ``Syx``, the
samples for the loss); a run maps them to its own ``Syx'`` and rates in ``O(C D^2)``.
The NTK of ``W x`` (:func:`linear_ntk`) carries the features ``X B_l^T`` upwards and
``A_l = W_L ... W_{l+1}`` downwards: ``K_ij(x, x') = sum_l [A_l A_l^T]_ij (B_l x)^T (B_l x')``.

:class:`LinearNetNumba` is the same model whose observations (end-to-end maps, the
conservation drift, the NTK on a probe) are compiled: on numba the loop's BLAS threads
may still spin when an output is observed, and numpy's BLAS, another library with
threads of its own, would contend with them for the cores.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ... import backend as _backend
from .. import _rhs
from ._linear_stages import (FactoredSlots, FactoredStages, Layout as _StageLayout,
                             factored_is_faster, numba_rhs_args, worth_factoring)
from .base import Layout, Model, inverse_rates, register_model

__all__ = ["LinearNet", "LinearNetNumba", "linear_ntk", "expressible"]


def expressible(options, has_biases):
    """Whether the sufficient-statistics problem expresses a network with these options:
    linear activation, no biases, the squared loss (any alpha, m_l, centered, lr_scales)."""
    return options.activation == "linear" and not has_biases and options.loss == "mse"


def linear_ntk(ws, X1, X2):
    """The empirical NTK of ``x -> W_L ... W_1 x``: (P1, P2) for one output, else
    (P1, P2, C, C) (module docstring)."""
    L, C = len(ws), ws[-1].shape[0]
    tops = [None] * L
    A = np.eye(C)
    for l in range(L - 1, -1, -1):
        tops[l] = A
        A = A @ ws[l]
    K = np.zeros((X1.shape[0], X2.shape[0], C, C))
    H1, H2 = X1, X2
    for l in range(L):
        if l > 0:
            H1, H2 = H1 @ ws[l - 1].T, H2 @ ws[l - 1].T
        K += np.multiply.outer(H1 @ H2.T, tops[l] @ tops[l].T)
    return K[:, :, 0, 0].copy() if C == 1 else K


class LinearNet(Model):
    """A deep linear network (mse, any alpha, multipliers, centered, lr_scales) whose
    gradient depends on the data through ``Sxx`` and ``Syx'`` only (module docstring).

    ``problem`` (after :meth:`prepare`) is the run's :class:`~.._rhs.FlowProblem`.  Its
    right-hand side keeps the partial products of the latest state it was evaluated at,
    which :meth:`linearize` differentiates there (the exact Jacobian-vector product of a
    Rosenbrock step, about two gradients each: :attr:`jvp_cost`)."""

    name = "linear"
    linear = True
    smooth = True
    jvp_cost = 2.0

    @classmethod
    def handles(cls, options, has_biases):
        return 2 if expressible(options, has_biases) else 0

    @classmethod
    def shared(cls, shapes, X, Y, options, xp=np):
        return _rhs.make_problem(shapes, X, Y)

    def __init__(self, weights, biases, options, xp=np):
        if biases is not None:
            raise ValueError("biases: the 'linear' model has no biases (the 'mlp' model has)")
        if not expressible(options, False):
            raise ValueError(f"the 'linear' model is linear with the squared loss, got "
                             f"activation={options.activation!r}, loss={options.loss!r}")
        self.xp = xp
        self.options = options
        self.shapes = tuple(w.shape for w in weights)
        self.L = len(weights)
        self.layout = Layout(self.shapes, [f"W{l + 1}" for l in range(self.L)])
        self.y0 = self.layout.pack(weights, xp=xp)
        # layer l moves at eta M^2 lr_scales[l-1] (module docstring): R^-1 up to a factor
        self.metric = inverse_rates(self.layout, options.lr_scales, xp)
        M = float(np.prod(options.multipliers))
        self.scale = options.alpha * M
        self.rates = options.eta * M * M * np.asarray(options.lr_scales, dtype=np.float64)
        self._W0 = (_rhs.end_to_end_flat(self.layout.pack(weights), self.shapes)
                    if options.centered else None)
        self._kept = None

    def weights_of(self, y):
        return self.layout.unpack(y)

    def prepare(self, X, Y, shared=None):
        base = self.shared(self.shapes, X, Y, self.options) if shared is None else shared
        Syx = base.Syx / self.scale
        if self._W0 is not None:
            Syx = Syx + self._W0 @ base.Sxx
        self.base = base
        self._syy = 0.5 * float(np.sum(base.Y * base.Y)) / base.P
        self.problem = dataclasses.replace(base, Syx=np.ascontiguousarray(Syx),
                                           eta_l=np.ascontiguousarray(self.rates))
        xp = self.xp
        self._Sxx, self._Syx = xp.asarray(self.problem.Sxx), xp.asarray(self.problem.Syx)
        self._eta = [float(e) for e in self.rates]
        return self

    def rhs(self, y, out=None):
        """``dy/dt`` at ``y`` (``_rhs.chain_products`` and ``_rhs.velocity`` on ``xp``),
        written into ``out``; its products are kept for :meth:`linearize`."""
        out = self.xp.empty_like(y) if out is None else out
        Ws = self.weights_of(y)
        At, G = _rhs.chain_products(Ws, self._Sxx, self._Syx, self.problem.white)
        _rhs.velocity(At, G, self._eta, self.layout.unpack(out), self.xp)
        self._kept = (y, Ws, At, G)
        return out

    def linearize(self, y):
        """``(v -> J(y) v, fresh)``: the exact Jacobian-vector product at ``y`` from the
        gradient's partial products there, those kept by the latest :meth:`rhs` when it was
        evaluated at this very array (``fresh`` False), else formed now.  With ``A_l =
        W_L...W_{l+1}``, ``R_l = E W_1^T...W_{l-1}^T``, ``dW_l/dt = eta_l A_l^T R_l``::

            d(dW_l/dt) = eta_l (dA_l^T R_l + A_l^T dR_l),
            dA_{l-1} = dA_l W_l + A_l V_l  (dA_L = 0),  dW = dA_0,
            dE = -dW Sxx,  dR_1 = dE,  dR_{l+1} = dR_l W_l^T + R_l V_l^T,

        O(L) narrow (C-row) products, carried as transposes as the gradient's.  ``y``
        must stay unchanged while the product is used."""
        xp, kept = self.xp, self._kept
        fresh = kept is None or kept[0] is not y
        if fresh:
            Ws = self.weights_of(y)
            At, G = _rhs.chain_products(Ws, self._Sxx, self._Syx, self.problem.white)
        else:
            _, Ws, At, G = kept
        L, eta, white, Sxx = self.L, self._eta, self.problem.white, self._Sxx
        out = xp.empty(self.layout.size)

        def jv(v):
            V, dWs = self.layout.unpack(v), self.layout.unpack(out)
            # dAt[i] = d(At[i]) = d(W_L ... W_{i+2})^T, dW^T = d(W_L ... W_1)^T
            dAt = [None] * L
            if L > 1:
                dAt[L - 2] = V[L - 1].T
                for i in range(L - 3, -1, -1):
                    dAt[i] = Ws[i + 1].T @ dAt[i + 1] + V[i + 1].T @ At[i + 1]
                dWT = Ws[0].T @ dAt[0] + V[0].T @ At[0]
            else:
                dWT = V[0].T
            dG = -(dWT.T if white else (Sxx @ dWT).T)
            for i in range(L):
                if i > 0:
                    dG = _rhs.times_transpose(dG, Ws[i - 1]) + G[i - 1] @ V[i - 1].T
                if i == L - 1:
                    xp.multiply(dG, eta[i], out=dWs[i])
                else:
                    # one product with inner dimension 2C: [dAt, At] [G; dG]
                    right = xp.concatenate((G[i], dG), axis=0)
                    if eta[i] != 1.0:
                        right *= eta[i]
                    xp.matmul(xp.concatenate((dAt[i], At[i]), axis=1), right, out=dWs[i])
            return out
        return jv, fresh

    def stores(self, kind, tab):
        """``(family, store)``: the stage store of a method family on numpy (module
        docstring of ``_linear_stages``): factored Butcher stages where a layer's stages
        are worth factoring, SSPRK104's two registers as factors, except on states over
        ``LOWSTORAGE_MAX_BYTES`` worth factoring, which run it as factored Butcher stages."""
        p = self.problem
        if self.xp is not np:
            return kind, None
        if kind == "ssp" and not factored_is_faster(p):
            return "ssp", FactoredSlots(p)
        if kind in ("ssp", "erk") and worth_factoring(p, tab.n_stages):
            return "erk", FactoredStages(p, _StageLayout(p, tab.n_stages + 1))
        return kind, None

    def _chain(self, y):
        return _rhs.end_to_end_flat(_backend.to_numpy(y), self.shapes, self.layout.offsets)

    def _mapped(self, W):
        # W (..., C, D) of the weights -> the map of F
        return self.scale * (W - self._W0 if self._W0 is not None else W)

    def end_to_end(self, y):
        return self._mapped(self._chain(y))

    def end_to_end_many(self, Ys):
        """:meth:`end_to_end` of each row of ``Ys`` (m, n): (m, C, D)."""
        return np.stack([self.end_to_end(y) for y in Ys])

    def loss_of_map(self, F):
        """The loss of the maps of F ``F`` (..., C, D): ``(1/(2 alpha^2 P)) |Y - X F^T|^2``,
        without cancellation (``_rhs.loss_from_end_to_end``)."""
        return _rhs.loss_from_end_to_end(F, self.base) / self.options.alpha ** 2

    def loss_terms(self, F):
        """``(loss, size)`` (...) of maps ``F`` (..., C, D) from the sufficient statistics,
        ``(1/alpha^2) (1/2 tr F Sxx F^T - tr F Syx^T + 1/2 tr Syy)`` and the sum of the
        moduli of its terms: ``O(C D^2)`` a map, for the breakdown guard of every output
        (the cancellation is far below the rise it looks for)."""
        b = self.base
        quad = 0.5 * np.sum((F @ b.Sxx) * F, axis=(-2, -1))
        lin = np.sum(F * b.Syx, axis=(-2, -1))
        a2 = self.options.alpha ** 2
        return (quad - lin + self._syy) / a2, (np.abs(quad) + np.abs(lin) + self._syy) / a2

    def loss(self, y):
        return float(self.loss_of_map(self.end_to_end(y)))

    def outputs(self, y, Xp):
        return np.asarray(Xp, dtype=np.float64) @ self.end_to_end(y).T

    def ntk(self, y, X1, X2):
        ws = [_backend.to_numpy(w) for w in self.weights_of(y)]
        return self.scale ** 2 * linear_ntk(ws, _backend.to_numpy(X1), _backend.to_numpy(X2))


class LinearNetNumba(LinearNet):
    """:class:`LinearNet` with its right-hand side (``_kernels.rhs_flat``, for the raw loop
    of a stop rule) and observations compiled (``_kernels.end_to_end``, ``end_to_end_many``,
    ``balance_drift``, ``probe_ntk``; module docstring)."""

    backend = "numba"

    def prepare(self, X, Y, shared=None):
        super().prepare(X, Y, shared)
        from .. import _kernels
        self._K = _kernels
        self._rhs_args = None        # the compiled rhs's data, formed on its first call
        C = self.shapes[-1][0]
        self._rows = np.array([r for r, _ in self.shapes], dtype=np.int64)
        self._cols = np.array([c for _, c in self.shapes], dtype=np.int64)
        self._offs = np.ascontiguousarray(self.layout.offsets, dtype=np.int64)
        self._buf = np.empty(2 * C * int(self._cols.max()))
        return self

    def rhs(self, y, out=None):
        out = np.empty(self.layout.size) if out is None else out
        if self._rhs_args is None:
            self._rhs_args = numba_rhs_args(self.problem)
        self._K.rhs_flat(np.ascontiguousarray(y, dtype=np.float64), out, *self._rhs_args)
        return out

    def velocity(self, y):
        # the numpy gradient: the compiled one's data (formed on its first call, ~1 ms on
        # bench_flow's small network) are needed by no compiled loop
        return LinearNet.rhs(self, y)

    def compiled_ops(self, kind, tab):
        """``(family, ops)``: the compiled loop of a method family and this model's
        operations on it (``_linear_ops``; the choice of stages as :meth:`stores`)."""
        from . import _linear_ops as lo
        p = self.problem
        if kind == "rosw":
            return "rosw", lo.CompiledFlow(p)
        if kind == "ssp" and not factored_is_faster(p):
            return "ssp", lo.LowStorageStages(p)
        return "erk", lo.erk_ops(p, tab)

    def _lay(self):
        return self._rows, self._cols, self._offs

    def end_to_end(self, y):
        out = np.empty(self.problem.Syx.shape)
        self._K.end_to_end(np.ascontiguousarray(y, dtype=np.float64), *self._lay(), out,
                           self._buf)
        return self._mapped(out)

    def end_to_end_many(self, Ys):
        out = np.empty((Ys.shape[0],) + self.problem.Syx.shape)
        self._K.end_to_end_many(np.ascontiguousarray(Ys, dtype=np.float64), *self._lay(), out,
                                self._buf)
        return self._mapped(out)

    def conservation(self, y, first):
        if first:
            sq = [int(r) * int(r) for r in self._rows[:-1]]
            self._goffs = np.concatenate(([0], np.cumsum(sq))).astype(np.int64)
            self._gram = (np.empty(self._goffs[-1]), np.empty(self._goffs[-1]),
                          np.empty(max(sq, default=0)))
        g, g0, tmp = self._gram
        return float(self._K.balance_drift(np.ascontiguousarray(y, dtype=np.float64),
                                           *self._lay(), g, g0, self._goffs, first, tmp))

    def probe_ntk(self, Xp):
        C, Q = self.shapes[-1][0], Xp.shape[0]
        Xc = np.ascontiguousarray(Xp, dtype=np.float64)
        width = int(self._cols.max())
        out = np.empty((Q, Q, C, C))
        abuf, hbuf = np.empty(2 * C * width), np.empty(2 * Q * width)
        tt, hh = np.empty((self.L, C, C)), np.empty((Q, Q))

        def kernel(y):
            self._K.probe_ntk(np.ascontiguousarray(y, dtype=np.float64), *self._lay(), Xc,
                              out, abuf, tt, hbuf, hh)
            return self.scale ** 2 * (out[:, :, 0, 0] if C == 1 else out)
        return kernel


LinearNet.numba_model = LinearNetNumba

register_model("linear", LinearNet)
