"""The multilayer perceptron on raw samples (docs/conventions.md, "Beyond linear networks"):
backpropagation on the P samples at once, the NTK from the backpropagated vectors and the
R-op (docs/simulator.md, "The MLP").  :class:`MLP` is the reference on any array namespace
``xp`` (numpy, CuPy); :class:`MLPNumba` its compiled twin (:mod:`._mlp_kernels`).
"""
from __future__ import annotations

import functools

import numpy as np

from .base import CLASSIFICATION_LOSSES, Layout, Model, inverse_rates, register_model

__all__ = ["MLP", "MLPNumba", "activation_functions"]


def activation_functions(name, param, xp=np):
    """``(phi, phi', phi'')`` of an activation, elementwise (``relu'(0) = 0``); ``phi''(z, d)``
    takes ``d = phi'(z)``, None for the piecewise-linear ones (their pattern is frozen)."""
    if name == "linear":
        return (lambda z: z), (lambda z: xp.ones_like(z)), None
    if name == "relu":
        return (lambda z: xp.maximum(z, 0.0)), (lambda z: (z > 0).astype(xp.float64)), None
    if name == "leaky_relu":
        a = float(param)
        return (lambda z: xp.where(z > 0, z, a * z)), (lambda z: xp.where(z > 0, 1.0, a)), None
    if name == "softplus":
        b = float(param)
        # log(1 + e^{bz})/b = max(z, 0) + log1p(e^{-b|z|})/b, without overflow
        return ((lambda z: xp.maximum(z, 0.0) + xp.log1p(xp.exp(-b * xp.abs(z))) / b),
                (lambda z: 0.5 * (1.0 + xp.tanh(0.5 * b * z))), (lambda z, d: b * d * (1.0 - d)))
    if name == "tanh":
        return xp.tanh, (lambda z: 1.0 - xp.tanh(z) ** 2), (lambda z, d: -2.0 * xp.tanh(z) * d)
    raise ValueError(f"activation: unknown {name!r}")


class MLP(Model):
    """The MLP on raw samples, any activation, loss and scale (docs/simulator.md, "The MLP").

    Parameters
    ----------
    weights : list of ndarray
        ``[W_1, ..., W_L]``, ``W_l`` (N_l, N_{l-1}), validated; the state at t = 0.
    biases : list of ndarray or None
        ``[b_1, ..., b_{L-1}]`` (validated by :func:`check_biases`), or None for none.
    options : ModelOptions
    xp : module
        The array namespace (numpy, or CuPy).
    """

    name = "mlp"
    _jvp_cache = None

    @classmethod
    def handles(cls, options, has_biases):
        return 1     # any network of the contract, on raw samples

    def __init__(self, weights, biases, options, xp=np):
        self.xp, self.options = xp, options
        self.shapes = tuple(w.shape for w in weights)
        self.L = len(weights)
        self.has_biases = biases is not None
        self.layout = Layout(list(self.shapes) + [(r,) for r, _ in self.shapes[:-1]
                                                  if self.has_biases])
        self.y0 = self.layout.pack(list(weights) + list(biases or []), xp=xp)
        self.linear = options.activation == "linear" and not self.has_biases
        self.smooth = options.activation not in ("relu", "leaky_relu")
        self.phi, self.dphi, self.d2phi = activation_functions(options.activation,
                                                               options.activation_param, xp)
        self.m = [float(v) for v in options.multipliers]
        self.alpha = options.alpha
        # the rate of each array of the state: layer l's weights and bias move together
        rates = [options.eta * float(s) for s in options.lr_scales]
        self._rates = rates + (rates[:-1] if self.has_biases else [])
        self.metric = inverse_rates(self.layout, self._rates, xp)
        self._pattern = None
        self.X = self.Y = None

    # -- parameters ------------------------------------------------------------------
    def weights_of(self, y):
        return self.layout.unpack(y)[:self.L]

    def biases_of(self, y):
        return self.layout.unpack(y)[self.L:] if self.has_biases else None

    # -- forward / backward ------------------------------------------------------------
    def forward(self, y, X, keep=False):
        """``f(X)`` (Q, C) of state ``y``; with ``keep`` also the lists ``Z`` and ``H``."""
        parts = self.layout.unpack(y)
        Ws, bs = parts[:self.L], parts[self.L:]
        Z, H = [], [X]
        for l in range(self.L - 1):
            z = (H[-1] @ Ws[l].T) * self.m[l]
            Z.append(z + bs[l] if bs else z)
            H.append(self.phi(Z[-1]))
        f = (H[-1] @ Ws[-1].T) * self.m[-1]
        return (f, Z, H) if keep else f

    def outputs(self, y, Xp):
        Xp = self.xp.asarray(Xp, dtype=self.xp.float64)
        F = self.forward(y, Xp)
        return self.alpha * (F - self.forward(self.y0, Xp) if self.options.centered else F)

    def prepare(self, X, Y):
        xp = self.xp
        self.X = xp.ascontiguousarray(xp.asarray(X, dtype=xp.float64))
        self.Y = xp.ascontiguousarray(xp.asarray(Y, dtype=xp.float64))
        self.P = int(self.X.shape[0])
        self.f0 = self.forward(self.y0, self.X) if self.options.centered else None
        return self

    def _F_of_f(self, f):
        return self.alpha * (f - self.f0 if self.f0 is not None else f)

    def _train_outputs(self, y):
        """``F`` (P, C) on the training inputs at ``y``."""
        return self._F_of_f(self.forward(y, self.X))

    def _dloss(self, F, order=1, dF=None):
        """The loss term of the outputs ``F`` (P, C): ``sum_mu l(F, Y)`` (``order`` 0), ``dl/dF``
        (1) or its derivative along ``dF`` (P, C) (2) (docs/descent.md, "Losses"; labels +-1
        on the hinge and the logistic)."""
        xp, Y, loss = self.xp, self.Y, self.options.loss
        if loss == "mse":
            if order == 0:
                return 0.5 * xp.sum((Y - F) ** 2)
            return F - Y if order == 1 else dF
        if loss == "cross_entropy":   # -sum_c y_c log softmax(F)_c, by the log-sum-exp
            top = xp.max(F, axis=1, keepdims=True)
            e = xp.exp(F - top)
            s = xp.sum(e, axis=1, keepdims=True)
            if order == 0:
                return xp.sum(Y * ((top + xp.log(s)) - F))
            p, ys = e / s, xp.sum(Y, axis=1, keepdims=True)
            if order == 1:
                return ys * p - Y
            pd = p * dF               # (sum_c y_c) (diag(p) - p p^T) dF per sample
            return ys * (pd - p * xp.sum(pd, axis=1, keepdims=True))
        beta = self.options.loss_param if loss == "soft_hinge" else 1.0
        u = beta * (1.0 - Y * F) if loss == "soft_hinge" else -Y * F
        if order == 0:        # log(1 + e^u) = max(u, 0) + log1p(e^{-|u|})
            return xp.sum(xp.maximum(u, 0.0) + xp.log1p(xp.exp(-xp.abs(u)))) / beta
        sig = 0.5 * (1.0 + xp.tanh(0.5 * u))
        return -Y * sig if order == 1 else (beta * Y * Y) * sig * (1.0 - sig) * dF

    def loss(self, y):
        return float(self._dloss(self._train_outputs(y), 0)) / (self.alpha ** 2 * self.P)

    def margins(self, y):
        """The margins (P,) at ``y``: ``y F`` (one output, labels +-1), or ``F_y - max_{c !=
        y} F_c`` for the hard labels ``y`` of the cross entropy."""
        loss = self.options.loss
        if loss not in CLASSIFICATION_LOSSES:
            raise ValueError(f"stop='margin' needs a classification loss, got loss={loss!r}")
        F = self._train_outputs(y)
        if loss != "cross_entropy":
            return (self.Y * F).reshape(-1)
        xp = self.xp
        hot = self.Y > 0.5
        Fy = xp.sum(xp.where(hot, F, 0.0), axis=1)
        return Fy - xp.max(xp.where(hot, -xp.inf, F), axis=1)

    def _backprop(self, y):
        """``(F, Z, H, Gs)`` at ``y``: the forward pass and ``Gs[l] = dL/dZ_l`` (``dL/df`` at
        the top), (P, N_l) each."""
        f, Z, H = self.forward(y, self.X, keep=True)
        F = self._F_of_f(f)
        Ws = self.weights_of(y)
        Gs = [None] * self.L
        G = self._dloss(F) * (1.0 / (self.alpha * self.P))
        for l in range(self.L - 1, -1, -1):
            Gs[l] = G
            if l > 0:
                G = ((G @ Ws[l]) * self.m[l]) * self.dphi(Z[l - 1])
        return F, Z, H, Gs

    def _weight_grads(self, Gs, H, out, dGs=None, dH=None):
        """``out`` (n,) <- ``dL/dW_l = m_l A_l^T H_{l-1}`` and ``dL/db_l = sum_mu A_l`` for
        ``A = Gs`` (the R-op's: ``A = dGs``, plus ``m_l Gs[l]^T dH[l]``); returns the views."""
        gs = self.layout.unpack(out)
        top = Gs if dGs is None else dGs
        for l in range(self.L):
            self.xp.matmul(top[l].T, H[l], out=gs[l])
            if dH is not None and dH[l] is not None:
                gs[l] += Gs[l].T @ dH[l]
            gs[l] *= self.m[l]
            if self.has_biases and l < self.L - 1:
                gs[self.L + l][...] = top[l].sum(axis=0)
        return gs

    def gradient(self, y, out=None):
        """``dL/dtheta`` (n,) at ``y`` (backpropagation)."""
        out = self.xp.empty(self.layout.size) if out is None else out
        F, Z, H, Gs = self._backprop(y)
        if not self.smooth:
            self._pattern = self.xp.concatenate([(z > 0).reshape(-1) for z in Z]) if Z else None
        self._weight_grads(Gs, H, out)
        return out

    def rhs(self, y, out=None):
        return self._scale(self.gradient(y, out))

    def _scale(self, out):
        for g, r in zip(self.layout.unpack(out), self._rates):
            g *= -r
        return out

    def switches(self):
        return self._pattern

    # -- observations ----------------------------------------------------------------
    def _backprop_vectors(self, y, X):
        """``(deltas, H)``: ``deltas[l]`` = df_i/dz_l (Q, C, N_l) for l < L - 1 (0-based), and
        the forward activations ``H`` (l = 0..L-1)."""
        _, Z, H = self.forward(y, X, keep=True)
        Ws = self.weights_of(y)
        deltas = [None] * (self.L - 1)
        d = self.xp.eye(Ws[-1].shape[0])        # df/df (C, C), broadcast over the inputs
        for l in range(self.L - 1, 0, -1):
            d = ((d @ Ws[l]) * self.m[l]) * self.dphi(Z[l - 1])[:, None, :]
            deltas[l - 1] = d
        return deltas, H

    def ntk(self, y, X1, X2):
        """The empirical NTK of F, (P1, P2) for C = 1, (P1, P2, C, C) otherwise."""
        xp = self.xp
        d1, H1 = self._backprop_vectors(y, xp.asarray(X1, dtype=xp.float64))
        d2, H2 = self._backprop_vectors(y, xp.asarray(X2, dtype=xp.float64))
        C = self.shapes[-1][0]
        top = (self.m[-1] ** 2) * (H1[-1] @ H2[-1].T)
        K = top[:, :, None, None] * xp.eye(C)[None, None, :, :]
        for l in range(self.L - 1):
            feat = (self.m[l] ** 2) * (H1[l] @ H2[l].T) + float(self.has_biases)
            K = K + xp.einsum("pin,qjn->pqij", d1[l], d2[l]) * feat[:, :, None, None]
        K = K * self.alpha ** 2
        return K[:, :, 0, 0] if C == 1 else K

    def end_to_end(self, y):
        """``x -> F(x)`` as a (C, D) matrix: ``alpha M (W - W_0)`` (centered) or ``alpha M W``,
        ``M = prod m_l``, ``W = W_L ... W_1``; linear activation without biases only."""
        if not self.linear:
            raise ValueError("end_to_end exists only for activation='linear' without biases")

        def prod(state):
            return functools.reduce(lambda W, w: w @ W, self.weights_of(state))
        W = prod(y) - prod(self.y0) if self.options.centered else prod(y)
        return self.alpha * float(np.prod(self.m)) * W

    # -- Jacobian-vector product (R-op) ------------------------------------------------
    def jvp(self, y, v, out=None):
        """``J(y) v`` (n,), the directional derivative of :meth:`rhs` along ``v`` (n,): the R-op
        of the backpropagation (Pearlmutter 1994; docs/simulator.md, "The MLP")."""
        xp = self.xp
        out = xp.empty(self.layout.size) if out is None else out
        y_kept, base, dphis = self._jvp_cache or (None,) * 3   # a Rosenbrock step's y
        if y_kept is None or not bool(xp.array_equal(y_kept, y)):
            _, Z, _, _ = base = self._backprop(y)
            dphis = [self.dphi(z) for z in Z]
            self._jvp_cache = (xp.array(y, copy=True), base, dphis)
        F, Z, H, Gs = base
        Ws = self.weights_of(y)
        Vs = self.layout.unpack(v)
        dWs, dbs = Vs[:self.L], Vs[self.L:]
        L = self.L
        dH, dZ = [None] * L, []
        for l in range(L):
            dz = (H[l] @ dWs[l].T) * self.m[l]
            if dH[l] is not None:
                dz = dz + (dH[l] @ Ws[l].T) * self.m[l]
            if l == L - 1:
                break
            dZ.append(dz + dbs[l] if dbs else dz)
            dH[l + 1] = dphis[l] * dZ[-1]
        dG = self._dloss(F, 2, self.alpha * dz) * (1.0 / (self.alpha * self.P))
        dGs = [None] * L
        for l in range(L - 1, -1, -1):
            dGs[l] = dG
            if l > 0:
                G = Gs[l]
                dG = (((dG @ Ws[l]) + (G @ dWs[l])) * self.m[l]) * dphis[l - 1]
                if self.d2phi is not None:
                    dG = dG + (((G @ Ws[l]) * self.m[l]) * self.d2phi(Z[l - 1], dphis[l - 1])
                               * dZ[l - 1])
        self._weight_grads(Gs, H, out, dGs, dH)
        return self._scale(out)


class MLPNumba(MLP):
    """:class:`MLP` with its right-hand side, gradient, loss, margins, switch pattern and
    stepping loops compiled (:mod:`._mlp_kernels`); the outputs on a probe, the NTK and
    ``end_to_end`` are the reference's.  Same constructor (numpy arrays only)."""

    backend = "numba"
    #: The compiled loops of this model take its kinks and stop rules (``methods.driver``).
    compiled_events = True

    def __init__(self, weights, biases, options, xp=np):
        if xp is not np:
            raise ValueError("MLPNumba runs on numpy arrays (backend='numba')")
        super().__init__(weights, biases, options, np)
        from . import _mlp_kernels as K
        self._K = K
        self._fresh = False

    def prepare(self, X, Y):
        """The data, into the kernels' data tuple (docs/simulator.md, "The MLP")."""
        super().prepare(X, Y)
        K, L, o, opt, X, P = self._K, self.L, self.layout.offsets, self.options, self.X, self.P
        lay = np.array([(o[l], r, c, o[L + l] if self.has_biases and l < L - 1 else -1)
                        for l, (r, c) in enumerate(self.shapes)], dtype=np.int64)
        rows = [r for r, _ in self.shapes]
        hoffs = np.concatenate(([0], np.cumsum([P * r for r in rows[:-1]]))).astype(np.int64)
        iopt = np.array([K.ACT_CODES[opt.activation], K.LOSS_CODES[opt.loss],
                         int(self.has_biases), 0], dtype=np.int64)
        fopt = np.array([opt.activation_param or 0.0, opt.loss_param or 0.0, self.alpha, 0.0])
        n_h, n_g, FC = int(hoffs[-1]), P * max(rows), (P, self.Y.shape[1])
        f0 = np.zeros(FC) if self.f0 is None else np.ascontiguousarray(self.f0)
        d = self._data = (X, self.Y, f0, lay, np.array(self.m),
                          -np.array(self._rates[:L]), iopt, fopt, np.empty(n_h), np.empty(n_h),
                          hoffs[:-1].copy(), np.empty(n_g), np.empty(n_g), np.empty(FC))
        self._grad_data = d[:5] + (np.ones(L),) + d[6:]
        self._pat = np.empty(n_h, dtype=bool)
        self._fresh = False
        return self

    def _eval(self, y, out, data):
        plain = (out is not None and out.dtype == np.float64 and out.ndim == 1
                 and out.flags.c_contiguous)
        buf = out if plain else np.empty(self.layout.size)       # the kernel's one signature
        self._K.mlp_rhs(np.ascontiguousarray(y, dtype=np.float64), buf, data)
        if out is not None and not plain:
            out[...] = buf
        self._fresh = True
        return buf if out is None else out

    def gradient(self, y, out=None):
        """``dL/dtheta`` (n,) at ``y`` (compiled)."""
        return self._eval(y, out, self._grad_data)

    def rhs(self, y, out=None):
        return self._eval(y, out, self._data)

    def loss(self, y):
        return float(self._K.mlp_loss(np.ascontiguousarray(y, dtype=np.float64), self._data))

    def _train_outputs(self, y):
        return self._K.mlp_outputs(np.ascontiguousarray(y, dtype=np.float64), self._data)

    def switches(self):
        """``z > 0`` of the training pre-activations at the latest ``rhs``/``gradient`` (a
        reused buffer: copy it to keep it), read off ``phi' == 1``; None if smooth."""
        if self.smooth or not self._fresh:
            return None
        np.equal(self._data[9], 1.0, out=self._pat)
        return self._pat

    def descent_ops(self):
        """``(advance, data)``: the compiled gradient-descent loop on this model's right-hand
        side and its data tuple (after :meth:`prepare`; ``_descent_kernels``)."""
        return self._K.gd_advance, self._data

    def batch_ops(self, X, Y):
        """``(advance, data, full)``: the compiled mini-batch loop on this model, prepared on
        a batch's number of samples, and the full data ``(X, Y, f0)`` it draws the batches
        from (``f0`` the network at t = 0 on ``X`` when centered, else zeros;
        ``_descent_kernels``)."""
        f0 = (self.forward(self.y0, X) if self.options.centered
              else np.zeros((X.shape[0], self.Y.shape[1])))
        return self._K.sgd_advance, self._data, (X, Y, np.ascontiguousarray(f0))

    def compiled_ops(self, kind, tab, stop=None):
        """``(family, ops)`` for ``methods.compiled.erk`` (after :meth:`prepare`): this model's
        loop with the stop event of ``stop`` (None, ``("margin", 1.0)`` or ``("loss", value)``);
        ``kind="rosw"`` gives ``(kind, None)`` (the numpy loop on the compiled rhs)."""
        if kind == "rosw":
            return kind, None
        from ..methods.compiled import DenseStageOps
        K = self._K
        kind_, value = (None, 0.0) if stop is None else stop
        self._data[6][K.STOP], self._data[7][K.STOP_VALUE] = K.STOP_CODES[kind_], float(value)
        ops = DenseStageOps(K.erk_advance_smooth if self.smooth else K.erk_advance_kinks,
                            K.mlp_rhs, self._data, self.layout.size,
                            switches=None if self.smooth else (K.crossings, K.keep_pattern),
                            n_switches=self._pat.size, stop=K.stop_value)
        # an evaluation works on the P samples: the chunks of the compiled loop (and the
        # delay of a Ctrl-C) scale with it (methods.compiled.advance_in_chunks)
        ops.eval_work = self.P * self.layout.size
        return "erk", ops


#: The compiled twin that ``backend="numba"`` (and ``"auto"``) runs.
MLP.numba_model = MLPNumba

register_model("mlp", MLP)
