"""The multilayer perceptron on raw samples (docs/conventions.md, "Beyond linear networks").

Model
-----
For an activation ``phi`` (identity for ``"linear"``), multipliers ``m_l``, output
scale ``alpha`` and optional hidden biases ``b_l``::

    h_0 = x,   z_l = m_l W_l h_{l-1} + b_l,   h_l = phi(z_l)    (l < L),
    f(x) = m_L W_L h_{L-1},   F(x) = alpha f(x)  or  alpha (f(x) - f_0(x))  (centered),

``f_0`` the network at t = 0 (fixed).  Loss
``L = (1/(alpha^2 P)) sum_mu l(F(x_mu), y_mu)`` with ``l_mse = |y - F|^2 / 2`` or
``l_soft_hinge = log(1 + exp(beta_h (1 - y F))) / beta_h`` (C = 1, labels +-1), and
gradient flow ``d theta_l/dt = -eta lr_scales[l-1] dL/d theta_l``.

Gradient (backpropagation on the P samples at once; rows are samples)
----------------------------------------------------------------------
``G_L = dL/df = (1/(alpha P)) l'(F, Y)`` (P, C), with ``l'_mse = F - Y`` and
``l'_soft_hinge = -Y sigmoid(beta_h (1 - Y F))``; then, downwards,

    dL/dW_L = m_L G_L^T H_{L-1},   D_{L-1} = m_L G_L W_L,
    G_l = D_l * phi'(Z_l),   dL/dW_l = m_l G_l^T H_{l-1},   dL/db_l = sum_mu G_l,
    D_{l-1} = m_l G_l W_l,

with the forward activations ``H_l`` and pre-activations ``Z_l`` (P, N_l) kept from
the forward pass: one evaluation is 3 (P x N) by (N x N) GEMMs per hidden layer,
O(P N^2).

NTK (analytic, from backpropagated vectors)
-------------------------------------------
With ``delta_l^(i)(x) = df_i/dz_l`` (``delta_{L-1}^(i) = m_L W_L[i] * phi'(z_{L-1})``,
``delta_{l-1} = m_l (delta_l W_l) * phi'(z_{l-1})``),

    K_ij(x, x') = alpha^2 [ m_L^2 delta_ij h_{L-1}.h'_{L-1}
                           + sum_{l<L} (delta_l^(i) . delta'^(j)_l) (m_l^2 h_{l-1}.h'_{l-1} + 1_bias) ],

never a per-parameter Jacobian.

Arrays go through the namespace ``xp`` (numpy, or CuPy for ``backend="cupy"``):
this module is the reference for every backend.  :class:`MLPNumba` (``backend="numba"``)
is the same model with its right-hand side, loss and switch pattern compiled
(:mod:`._mlp_kernels`); its observations (outputs on a probe, NTK) are the reference's.
"""
from __future__ import annotations

import numpy as np

from .base import Layout, Model, inverse_rates, register_model

__all__ = ["MLP", "MLPNumba", "activation_functions", "check_biases"]


def activation_functions(name, param, xp=np):
    """``(phi, dphi)`` of an activation: elementwise functions of ``z`` (``relu'(0) = 0``)."""
    if name == "linear":
        return (lambda z: z), (lambda z: xp.ones_like(z))
    if name == "relu":
        return (lambda z: xp.maximum(z, 0.0)), (lambda z: (z > 0).astype(xp.float64))
    if name == "leaky_relu":
        a = float(param)
        return ((lambda z: xp.where(z > 0, z, a * z)),
                (lambda z: xp.where(z > 0, 1.0, a)))
    if name == "softplus":
        beta = float(param)
        # log(1 + e^{bz})/b = max(z, 0) + log1p(e^{-b|z|})/b, without overflow
        return ((lambda z: xp.maximum(z, 0.0) + xp.log1p(xp.exp(-beta * xp.abs(z))) / beta),
                (lambda z: 0.5 * (1.0 + xp.tanh(0.5 * beta * z))))
    if name == "tanh":
        return xp.tanh, (lambda z: 1.0 - xp.tanh(z) ** 2)
    raise ValueError(f"activation: unknown {name!r}")


def check_biases(biases, shapes, name="biases"):
    """Validate ``[b_1, ..., b_{L-1}]`` (``b_l`` shape (N_l,)) against the weight shapes.

    Returns float64 copies, or None for ``biases=None``; ``ValueError`` naming
    ``biases`` for a wrong length, shape or a non-finite entry.
    """
    if biases is None:
        return None
    if isinstance(biases, np.ndarray) and biases.ndim == 1:
        biases = [biases]
    try:
        bs = list(biases)
    except TypeError as exc:
        raise ValueError(f"{name} must be a list [b_1, ..., b_(L-1)] of 1-D arrays") from exc
    L = len(shapes)
    if len(bs) != L - 1:
        raise ValueError(f"{name} must have L - 1 = {L - 1} entries (one per hidden layer), "
                         f"got {len(bs)}")
    out = []
    for i, b in enumerate(bs):
        arr = np.array(b, dtype=np.float64, copy=True)
        if arr.shape != (shapes[i][0],):
            raise ValueError(f"{name}[{i}] must have shape ({shapes[i][0]},), got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name}[{i}] must be finite")
        out.append(np.ascontiguousarray(arr))
    return out


class MLP(Model):
    """The MLP of the module docstring on raw samples (any activation, loss and scale).

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

    @classmethod
    def handles(cls, options, has_biases):
        return 1     # any network of the contract, on raw samples

    def __init__(self, weights, biases, options, xp=np):
        self.xp = xp
        self.options = options
        self.shapes = tuple(w.shape for w in weights)
        self.L = len(weights)
        self.has_biases = biases is not None
        shapes = list(self.shapes)
        names = [f"W{l + 1}" for l in range(self.L)]
        if self.has_biases:
            shapes += [(s[0],) for s in self.shapes[:-1]]
            names += [f"b{l + 1}" for l in range(self.L - 1)]
        self.layout = Layout(shapes, names)
        self.y0 = self.layout.pack(list(weights) + list(biases or []), xp=xp)
        self.linear = options.activation == "linear" and not self.has_biases
        self.smooth = options.activation not in ("relu", "leaky_relu")
        self.phi, self.dphi = activation_functions(options.activation, options.activation_param,
                                                   xp)
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
        xp = self.xp
        Ws = self.weights_of(y)
        bs = self.biases_of(y)
        H = [X]
        Z = []
        h = X
        for l in range(self.L - 1):
            z = (h @ Ws[l].T) * self.m[l]
            if bs is not None:
                z = z + bs[l]
            Z.append(z)
            h = self.phi(z)
            H.append(h)
        f = (h @ Ws[-1].T) * self.m[-1]
        return (f, Z, H) if keep else f

    def outputs(self, y, Xp):
        xp = self.xp
        Xp = xp.asarray(Xp, dtype=xp.float64)
        F = self.forward(y, Xp)
        if self.options.centered:
            F = F - self.forward(self.y0, Xp)
        return self.alpha * F

    def prepare(self, X, Y):
        xp = self.xp
        self.X = xp.ascontiguousarray(xp.asarray(X, dtype=xp.float64))
        self.Y = xp.ascontiguousarray(xp.asarray(Y, dtype=xp.float64))
        self.P = int(self.X.shape[0])
        self.f0 = self.forward(self.y0, self.X) if self.options.centered else None
        return self

    def _F_of_f(self, f):
        return self.alpha * (f - self.f0 if self.f0 is not None else f)

    def _loss_terms(self, F):
        xp = self.xp
        if self.options.loss == "mse":
            return 0.5 * xp.sum((self.Y - F) ** 2)
        beta = self.options.loss_param
        u = beta * (1.0 - self.Y * F)
        # log(1 + e^u) = max(u, 0) + log1p(e^{-|u|})
        return xp.sum(xp.maximum(u, 0.0) + xp.log1p(xp.exp(-xp.abs(u)))) / beta

    def _dloss(self, F):
        """``l'(F, Y)`` (P, C)."""
        xp = self.xp
        if self.options.loss == "mse":
            return F - self.Y
        beta = self.options.loss_param
        return -self.Y * (0.5 * (1.0 + xp.tanh(0.5 * beta * (1.0 - self.Y * F))))

    def loss(self, y):
        F = self._F_of_f(self.forward(y, self.X))
        return float(self._loss_terms(F)) / (self.alpha ** 2 * self.P)

    def margins(self, y):
        if self.options.loss != "soft_hinge":
            raise ValueError("stop='margin' needs loss='soft_hinge'")
        F = self._F_of_f(self.forward(y, self.X))
        return (self.Y * F).reshape(-1)

    def gradient(self, y, out=None):
        """``dL/dtheta`` (n,) at ``y`` (the module docstring's backpropagation)."""
        xp = self.xp
        if out is None:
            out = xp.empty(self.layout.size)
        f, Z, H = self.forward(y, self.X, keep=True)
        if not self.smooth:
            self._pattern = xp.concatenate([(z > 0).reshape(-1) for z in Z]) if Z else None
        Ws = self.weights_of(y)
        gs = self.layout.unpack(out)
        G = self._dloss(self._F_of_f(f)) * (1.0 / (self.alpha * self.P))
        L = self.L
        for l in range(L - 1, -1, -1):
            # G: dL/dz_l (dL/df at the top), (P, N_l)
            xp.matmul(G.T, H[l], out=gs[l])
            gs[l] *= self.m[l]
            if self.has_biases and l < L - 1:
                gs[L + l][...] = G.sum(axis=0)
            if l > 0:
                G = ((G @ Ws[l]) * self.m[l]) * self.dphi(Z[l - 1])
        return out

    def rhs(self, y, out=None):
        out = self.gradient(y, out)
        for g, r in zip(self.layout.unpack(out), self._rates):
            g *= -r
        return out

    def switches(self):
        return self._pattern

    # -- observations ----------------------------------------------------------------
    def _backprop_vectors(self, y, X):
        """``(deltas, H)``: ``deltas[l]`` = df_i/dz_l (Q, C, N_l) for l < L - 1 (0-based), and
        the forward activations ``H`` (l = 0..L-1)."""
        xp = self.xp
        _, Z, H = self.forward(y, X, keep=True)
        Ws = self.weights_of(y)
        L = self.L
        deltas = [None] * (L - 1)
        if L > 1:
            d = (Ws[-1] * self.m[-1])[None, :, :] * self.dphi(Z[-1])[:, None, :]
            deltas[L - 2] = d
            for l in range(L - 2, 0, -1):
                d = ((d @ Ws[l]) * self.m[l]) * self.dphi(Z[l - 1])[:, None, :]
                deltas[l - 1] = d
        return deltas, H

    def ntk(self, y, X1, X2):
        """The empirical NTK of F, (P1, P2) for C = 1, (P1, P2, C, C) otherwise."""
        xp = self.xp
        X1 = xp.asarray(X1, dtype=xp.float64)
        X2 = xp.asarray(X2, dtype=xp.float64)
        d1, H1 = self._backprop_vectors(y, X1)
        d2, H2 = self._backprop_vectors(y, X2)
        C = self.shapes[-1][0]
        L = self.L
        top = (self.m[-1] ** 2) * (H1[L - 1] @ H2[L - 1].T)
        K = top[:, :, None, None] * xp.eye(C)[None, None, :, :]
        for l in range(L - 1):
            feat = (self.m[l] ** 2) * (H1[l] @ H2[l].T)
            if self.has_biases:
                feat = feat + 1.0
            dd = xp.einsum("pin,qjn->pqij", d1[l], d2[l])
            K = K + dd * feat[:, :, None, None]
        K = K * self.alpha ** 2
        return K[:, :, 0, 0] if C == 1 else K

    def end_to_end(self, y):
        """``x -> F(x)`` as a (C, D) matrix: ``alpha M (W - W_0)`` (centered) or ``alpha M W``,
        ``M = prod m_l``, ``W = W_L ... W_1``; linear activation without biases only."""
        if not self.linear:
            raise ValueError("end_to_end exists only for activation='linear' without biases")
        xp = self.xp

        def prod(state):
            Ws = self.weights_of(state)
            W = Ws[0]
            for w in Ws[1:]:
                W = w @ W
            return W
        M = float(np.prod(self.m))
        W = prod(y)
        if self.options.centered:
            W = W - prod(self.y0)
        return self.alpha * M * W

    # -- Jacobian-vector product (R-op) ------------------------------------------------
    def _d2phi(self, z):
        """``phi''(z)`` (0 for the piecewise-linear activations: their pattern is frozen)."""
        xp = self.xp
        act = self.options.activation
        if act == "softplus":
            beta = float(self.options.activation_param)
            s = 0.5 * (1.0 + xp.tanh(0.5 * beta * z))
            return beta * s * (1.0 - s)
        if act == "tanh":
            th = xp.tanh(z)
            return -2.0 * th * (1.0 - th * th)
        return None

    def _d2loss(self, F):
        """``l''(F, Y)`` (P, C): 1 for mse, ``beta_h s (1 - s)`` for the soft hinge (Y = +-1)."""
        if self.options.loss == "mse":
            return None
        xp = self.xp
        beta = self.options.loss_param
        s = 0.5 * (1.0 + xp.tanh(0.5 * beta * (1.0 - self.Y * F)))
        return beta * s * (1.0 - s)

    def _jvp_base(self, y):
        """Forward and backward pass at ``y``, kept while the same point is asked again (a
        Rosenbrock step's products share their base point)."""
        xp = self.xp
        c = getattr(self, "_jvp_cache", None)
        if c is not None and c[0].shape == y.shape and bool(xp.array_equal(c[0], y)):
            return c[1]
        f, Z, H = self.forward(y, self.X, keep=True)
        F = self._F_of_f(f)
        Ws = self.weights_of(y)
        Gs = [None] * self.L                          # Gs[l] = dL/d(input of layer l's GEMM)
        G = self._dloss(F) * (1.0 / (self.alpha * self.P))
        for l in range(self.L - 1, -1, -1):
            Gs[l] = G
            if l > 0:
                G = ((G @ Ws[l]) * self.m[l]) * self.dphi(Z[l - 1])
        base = (F, Z, H, Gs, [self.dphi(z) for z in Z])
        self._jvp_cache = (xp.array(y, copy=True), base)
        return base

    def jvp(self, y, v, out=None):
        """``J(y) v``, the directional derivative of :meth:`rhs` along ``v`` (n,).

        Forward-mode differentiation of the backpropagation (the R-op of Pearlmutter,
        Neural Comput. 6 (1994) 147-160), rows are samples, ``dX = 0``::

            dz_l = m_l (dh_{l-1} W_l^T + h_{l-1} dW_l^T) + db_l,  dh_l = phi'(z_l) dz_l,
            dF = alpha m_L (dh_{L-1} W_L^T + h_{L-1} dW_L^T),
            dG_L = l''(F) dF / (alpha P),
            d(dL/dW_l) = m_l (dG_l^T h_{l-1} + G_l^T dh_{l-1}),  d(dL/db_l) = sum_mu dG_l,
            dG_{l-1} = m_l (dG_l W_l + G_l dW_l) phi'(z_{l-1})
                       + m_l (G_l W_l) phi''(z_{l-1}) dz_{l-1},

        and ``J v = -eta lr_scales * d(dL/dtheta)``.  For ReLU-type activations
        ``phi'' = 0``: the derivative on the current side of every kink (the frozen
        pattern). About twice the GEMMs of one gradient; the forward and backward pass at
        ``y`` are kept between products at the same ``y``.
        """
        xp = self.xp
        if out is None:
            out = xp.empty(self.layout.size)
        F, Z, H, Gs, dphis = self._jvp_base(y)
        Ws = self.weights_of(y)
        Vs = self.layout.unpack(v)
        dWs = Vs[:self.L]
        dbs = Vs[self.L:] if self.has_biases else None
        L = self.L
        dH = [None] * L
        dZ = [None] * (L - 1)
        for l in range(L - 1):
            dz = (H[l] @ dWs[l].T) * self.m[l]
            if dH[l] is not None:
                dz = dz + (dH[l] @ Ws[l].T) * self.m[l]
            if dbs is not None:
                dz = dz + dbs[l]
            dZ[l] = dz
            dH[l + 1] = dphis[l] * dz
        df = (H[L - 1] @ dWs[L - 1].T) * self.m[L - 1]
        if dH[L - 1] is not None:
            df = df + (dH[L - 1] @ Ws[L - 1].T) * self.m[L - 1]
        dF = self.alpha * df
        d2 = self._d2loss(F)
        dG = (dF if d2 is None else d2 * dF) * (1.0 / (self.alpha * self.P))
        gs = self.layout.unpack(out)
        for l in range(L - 1, -1, -1):
            G = Gs[l]
            xp.matmul(dG.T, H[l], out=gs[l])
            if dH[l] is not None:
                gs[l] += G.T @ dH[l]
            gs[l] *= self.m[l]
            if self.has_biases and l < L - 1:
                gs[L + l][...] = dG.sum(axis=0)
            if l > 0:
                dD = ((dG @ Ws[l]) + (G @ dWs[l])) * self.m[l]
                dG_new = dD * dphis[l - 1]
                d2p = self._d2phi(Z[l - 1])
                if d2p is not None:
                    dG_new = dG_new + ((G @ Ws[l]) * self.m[l]) * d2p * dZ[l - 1]
                dG = dG_new
        for g, r in zip(gs, self._rates):
            g *= -r
        return out


class MLPNumba(MLP):
    """:class:`MLP` with its right-hand side, gradient, loss, margins and switch pattern
    compiled (:mod:`._mlp_kernels`; numba, ``cache=True``, ``nogil=True``).

    Same constructor and interface as :class:`MLP` (numpy arrays only); the outputs on
    a probe, the NTK and ``end_to_end`` are the reference's.  The products are the
    reference's GEMMs; what is compiled is the elementwise work around them (fused
    activation and derivative, bias sums, loss) and the Python between them.  Agrees
    with :class:`MLP` to rounding (different summation order, not bit for bit).
    """

    backend = "numba"

    def __init__(self, weights, biases, options, xp=np):
        if xp is not np:
            raise ValueError("MLPNumba runs on numpy arrays (backend='numba')")
        super().__init__(weights, biases, options, np)
        from . import _mlp_kernels as K
        self._K = K
        L = self.L
        off = self.layout.offsets
        lay = np.full((L, 4), -1, dtype=np.int64)
        for l, (r, c) in enumerate(self.shapes):
            lay[l, :3] = (off[l], r, c)
            if self.has_biases and l < L - 1:
                lay[l, 3] = off[L + l]
        self._lay = lay
        self._m = np.array(self.m, dtype=np.float64)
        self._rhs_scales = -np.array([options.eta * float(s) for s in options.lr_scales])
        self._grad_scales = np.ones(L)
        a = options.activation_param
        self._iopt = np.array([K.ACT_CODES[options.activation], K.LOSS_CODES[options.loss],
                               int(self.has_biases), 0], dtype=np.int64)
        self._fopt = np.array([0.0 if a is None else float(a),
                               0.0 if options.loss_param is None else float(options.loss_param),
                               float(self.alpha), 0.0])
        self._data = self._grad_data = None
        self._fresh = False

    def prepare(self, X, Y):
        self.X = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
        self.P = P = int(self.X.shape[0])
        self.Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).reshape(P, -1))
        C = self.shapes[-1][0]
        hidden = [r for r, _ in self.shapes[:-1]]
        hoffs = np.concatenate(([0], np.cumsum([P * r for r in hidden]))).astype(np.int64)
        widest = max([r for r, _ in self.shapes] + [1])
        H = np.empty(int(hoffs[-1]))
        Dv = np.empty(int(hoffs[-1]))
        G1, G2 = np.empty(P * widest), np.empty(P * widest)
        F = np.empty((P, C))
        zeros = np.zeros((P, C))

        def data(scales, f0):
            return (self.X, self.Y, f0, self._lay, self._m, scales, self._iopt, self._fopt, H,
                    Dv, hoffs[:-1].copy(), G1, G2, F)
        if self.options.centered:
            d0 = data(self._rhs_scales, zeros)
            self._K.mlp_forward(self.y0, self.X, d0, False)
            self.f0 = F.copy()
        else:
            self.f0 = None
        f0 = self.f0 if self.f0 is not None else zeros
        self._data = data(self._rhs_scales, f0)
        self._grad_data = data(self._grad_scales, f0)
        self._Dv = Dv
        self._pat = np.empty(Dv.size, dtype=bool)
        self._fresh = False
        return self

    @staticmethod
    def _flat(y):
        return np.ascontiguousarray(y, dtype=np.float64)

    def _eval(self, y, out, data):
        y = self._flat(y)
        if out is None:
            out = np.empty(self.layout.size)
        if out.dtype != np.float64 or not out.flags.c_contiguous or out.ndim != 1:
            tmp = np.empty(self.layout.size)       # the kernel's one signature
            self._K.mlp_rhs(y, tmp, data)
            out[...] = tmp
        else:
            self._K.mlp_rhs(y, out, data)
        self._fresh = True
        return out

    def gradient(self, y, out=None):
        """``dL/dtheta`` (n,) at ``y`` (compiled)."""
        return self._eval(y, out, self._grad_data)

    def rhs(self, y, out=None):
        return self._eval(y, out, self._data)

    def loss(self, y):
        return float(self._K.mlp_loss(self._flat(y), self._data))

    def margins(self, y):
        if self.options.loss != "soft_hinge":
            raise ValueError("stop='margin' needs loss='soft_hinge'")
        F = self._K.mlp_outputs(self._flat(y), self._data)
        return (self.Y * F).reshape(-1)

    def switches(self):
        """``z > 0`` of the training pre-activations at the latest ``rhs``/``gradient`` (a
        reused buffer: copy it to keep it), read off ``phi' == 1``; None if smooth."""
        if self.smooth or not self._fresh:
            return None
        np.equal(self._Dv, 1.0, out=self._pat)
        return self._pat

    #: The compiled loops of this model take its kinks and stop rules (``methods.driver``).
    compiled_events = True

    def compiled_ops(self, kind, tab, stop=None):
        """``(family, ops)``: the compiled loop of a method family and this model's operations
        on it (after :meth:`prepare`), for ``methods.compiled.erk``: the cached loop
        ``_mlp_kernels.erk_advance_kinks`` with the switch pattern of the training
        pre-activations for ReLU-type activations, ``erk_advance_smooth`` otherwise, both
        with the stop event of ``stop`` (None, ``("margin", 1.0)`` or ``("loss", value)``,
        as ``flow.check_stop`` returns).  SSPRK104 runs as its Butcher tableau there; the
        Rosenbrock-W family has no compiled loop on this model (``(kind, None)``: the numpy
        loop with the compiled right-hand side)."""
        if kind == "rosw":
            return kind, None
        from ..methods.compiled import DenseStages
        K = self._K
        kind_, value = (None, 0.0) if stop is None else stop
        self._iopt[3] = K.STOP_CODES[kind_]
        self._fopt[3] = float(value)
        kinks = not self.smooth
        return "erk", DenseStages(K.erk_advance_kinks if kinks else K.erk_advance_smooth,
                                  K.mlp_rhs, self._data, self.layout.size,
                                  switches=(K.crossings, K.keep_pattern) if kinks else None,
                                  n_switches=self._Dv.size, stop=K.stop_value)

    def batch_ops(self, Y0, alphas, stop=None):
        """The operations of ``methods.compiled.erk_batch`` on B members of this model
        (after :meth:`prepare`): member b starts at ``Y0[b]`` (n,) (its ``f_0`` when
        centered) with output scale ``alphas[b]``; ``stop`` as for :meth:`compiled_ops`.
        Each member runs the model's own loop (``_mlp_kernels.erk_advance_kinks`` /
        ``erk_advance_smooth``) on its data tuple (views of the batch's arrays)."""
        from ..methods.compiled import BatchStages
        K = self._K
        Y0 = np.ascontiguousarray(Y0, dtype=np.float64)
        B = Y0.shape[0]
        d = self._data
        X, Yt, lay, m, scales, iopt, hoffs = d[0], d[1], d[3], d[4], d[5], d[6], d[10]
        kind, value = (None, 0.0) if stop is None else stop
        iopt = iopt.copy()
        iopt[3] = K.STOP_CODES[kind]
        fopt = np.repeat(self._fopt[None, :], B, axis=0)
        fopt[:, 2] = np.asarray(alphas, dtype=np.float64)
        fopt[:, 3] = float(value)
        P, C = d[13].shape
        f0 = np.zeros((B, P, C))
        H, Dv = np.empty((B, d[8].size)), np.empty((B, d[9].size))
        G1, G2 = np.empty((B, d[11].size)), np.empty((B, d[12].size))
        F = np.empty((B, P, C))

        def member(b):
            return (X, Yt, f0[b], lay, m, scales, iopt, fopt[b], H[b], Dv[b], hoffs, G1[b],
                    G2[b], F[b])
        if self.options.centered:
            for b in range(B):
                K.mlp_forward(Y0[b], X, member(b), False)
                f0[b] = F[b]
        kinks = not self.smooth
        return BatchStages(K.erk_advance_kinks if kinks else K.erk_advance_smooth, K.mlp_rhs,
                           member, B, self.layout.size,
                           switches=(K.crossings, K.keep_pattern) if kinks else None,
                           n_switches=self._Dv.size, stop=K.stop_value)


#: The compiled twin that ``backend="numba"`` (and ``"auto"``) runs.
MLP.numba_model = MLPNumba

register_model("mlp", MLP)
