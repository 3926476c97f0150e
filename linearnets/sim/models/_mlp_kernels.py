"""Compiled right-hand side of the MLP (``backend="numba"``): forward, backward, loss.

The same maths as :class:`linearnets.sim.models.mlp.MLP` (its module docstring has
the equations; the model is that of docs/conventions.md, "Beyond linear networks",
after Geiger et al. 2019 and Zhou et al. 2022): for hidden layers ``l < L``

    Z_l = m_l H_{l-1} W_l^T + b_l,   H_l = phi(Z_l),   f = m_L H_{L-1} W_L^T,
    F = alpha (f - f_0),   G_L = l'(F, Y) / (alpha P),
    dL/dW_l = m_l G_l^T H_{l-1},   G_{l-1} = m_l (G_l W_l) * phi'(Z_{l-1}),
    dL/db_l = sum_mu G_l,

on the P training samples at once (rows are samples).  Every product is one
``np.dot`` on C-contiguous float64 arrays (views of flat buffers; a transposed
operand is an F-contiguous view), so it is one BLAS GEMM; the elementwise work is
fused into one loop per layer: the forward loop scales, adds the bias and writes
both ``phi(z)`` and ``phi'(z)`` (the backward pass needs only ``phi'``; softplus
shares one ``exp`` between them), the backward loop multiplies by ``m_l phi'`` and
sums the bias gradient.  One evaluation is therefore the 3 GEMMs per hidden layer
of the numpy reference (2 for the input layer) plus O(P N) passes.

The data tuple
--------------
:func:`mlp_rhs` has the ``rhs(y, out, data)`` form of a compiled stepping loop; the
model (``mlp.MLPNumba``) builds ``data`` once in ``prepare``:

``(X, Y, f0, lay, m, scales, iopt, fopt, H, Dv, hoffs, G1, G2, F)``

* ``X`` (P, D), ``Y`` (P, C), ``f0`` (P, C) (zeros unless centered): C-contiguous;
* ``lay`` int64 (L, 4): per layer the state offset of ``W_l``, its rows ``N_l``,
  columns ``N_{l-1}`` and the state offset of ``b_l`` (-1 without biases);
* ``m`` (L,) multipliers; ``scales`` (L,): ``out_l = scales[l] * dL/dtheta_l``
  (``-eta lr_scales[l]`` for the flow, 1 for the gradient);
* ``iopt`` int64 ``[activation code, loss code, has_biases]``, ``fopt`` float64
  ``[activation parameter, loss parameter, alpha]`` (codes: :data:`ACT_CODES`,
  :data:`LOSS_CODES`);
* buffers: ``H``, ``Dv`` flat (P sum_{l<L} N_l) with ``hoffs`` (L,) the offsets of
  each hidden layer's (P, N_l) block (``H_l`` and ``phi'(Z_l)`` of the latest
  :func:`mlp_rhs`); ``G1``, ``G2`` (P max N_l) for the backward pass (and the
  forward pass of :func:`mlp_loss`, which leaves ``H``/``Dv`` alone); ``F`` (P, C).

ReLU-type switch pattern: ``phi'(z) == 1`` exactly where ``z > 0`` (relu writes 1 or
0, leaky_relu 1 or its slope ``a < 1``), so ``Dv == 1`` is the pattern ``z > 0`` of the
training pre-activations at the latest evaluation, in the reference's order.
"""
from __future__ import annotations

import math

import numpy as np

from ..._numba_cache import njit

__all__ = ["ACT_CODES", "LOSS_CODES", "activate", "mlp_forward", "mlp_rhs", "mlp_loss",
           "mlp_outputs"]

#: Activation name -> integer code of the kernels.
ACT_CODES = {"linear": 0, "relu": 1, "leaky_relu": 2, "softplus": 3, "tanh": 4}
#: Loss name -> integer code.
LOSS_CODES = {"mse": 0, "soft_hinge": 1}


@njit(cache=True, nogil=True)
def activate(Z, Dv, y, boff, m, act, a):
    """In place: ``z = m Z + b`` (``b = y[boff:boff + N]``, none if ``boff < 0``), then
    ``Z <- phi(z)`` and ``Dv <- phi'(z)`` (``Dv`` may be a 0-row array: not written).

    One loop per activation (the branch outside the loop); softplus
    ``log(1 + e^{a z})/a = max(z, 0) + log1p(e)/a`` and its derivative
    ``sigmoid(a z) = 1/(1 + e)`` (z >= 0) or ``e/(1 + e)`` share ``e = exp(-a |z|)``.
    """
    P, N = Z.shape
    keep = Dv.shape[0] == P
    hb = boff >= 0
    ia = 1.0 / a if act == 3 else 0.0
    for p in range(P):
        if act == 1:                          # relu (relu'(0) = 0)
            for j in range(N):
                z = m * Z[p, j] + (y[boff + j] if hb else 0.0)
                pos = z > 0.0
                Z[p, j] = z if pos else 0.0
                if keep:
                    Dv[p, j] = 1.0 if pos else 0.0
        elif act == 2:                        # leaky relu, slope a in [0, 1)
            for j in range(N):
                z = m * Z[p, j] + (y[boff + j] if hb else 0.0)
                pos = z > 0.0
                Z[p, j] = z if pos else a * z
                if keep:
                    Dv[p, j] = 1.0 if pos else a
        elif act == 3:                        # softplus, beta a
            for j in range(N):
                z = m * Z[p, j] + (y[boff + j] if hb else 0.0)
                e = math.exp(-a * abs(z))
                Z[p, j] = max(z, 0.0) + math.log1p(e) * ia
                if keep:
                    Dv[p, j] = 1.0 / (1.0 + e) if z >= 0.0 else e / (1.0 + e)
        elif act == 4:                        # tanh
            for j in range(N):
                v = math.tanh(m * Z[p, j] + (y[boff + j] if hb else 0.0))
                Z[p, j] = v
                if keep:
                    Dv[p, j] = 1.0 - v * v
        else:                                 # linear
            for j in range(N):
                Z[p, j] = m * Z[p, j] + (y[boff + j] if hb else 0.0)
                if keep:
                    Dv[p, j] = 1.0


@njit(cache=True, nogil=True)
def mlp_forward(y, X, data, keep):
    """``f(X)`` into ``data``'s ``F`` (P, C) for the training inputs ``X``; with ``keep`` the
    hidden activations into ``H`` and ``phi'`` into ``Dv``, otherwise through ``G1``/``G2``."""
    lay, m, iopt, fopt = data[3], data[4], data[6], data[7]
    H, Dv, hoffs, G1, G2, F = data[8], data[9], data[10], data[11], data[12], data[13]
    act, a = iopt[0], fopt[0]
    L = lay.shape[0]
    P = X.shape[0]
    nodv = Dv[:0].reshape((0, 1))
    h = X
    for l in range(L - 1):
        o, r, c = lay[l, 0], lay[l, 1], lay[l, 2]
        W = y[o:o + r * c].reshape((r, c))
        if keep:
            Z = H[hoffs[l]:hoffs[l] + P * r].reshape((P, r))
            D = Dv[hoffs[l]:hoffs[l] + P * r].reshape((P, r))
        else:
            buf = G1 if l % 2 == 0 else G2
            Z = buf[:P * r].reshape((P, r))
            D = nodv
        np.dot(h, W.T, Z)
        activate(Z, D, y, lay[l, 3], m[l], act, a)
        h = Z
    o, r, c = lay[L - 1, 0], lay[L - 1, 1], lay[L - 1, 2]
    W = y[o:o + r * c].reshape((r, c))
    np.dot(h, W.T, F)
    mL = m[L - 1]
    for p in range(P):
        for j in range(r):
            F[p, j] *= mL


@njit(cache=True, nogil=True)
def _F_of_f(F, f0, alpha):
    """In place ``F <- alpha (F - f0)`` (``f0`` zeros unless centered)."""
    P, C = F.shape
    for p in range(P):
        for i in range(C):
            F[p, i] = alpha * (F[p, i] - f0[p, i])


@njit(cache=True, nogil=True)
def mlp_outputs(y, data):
    """``F`` (P, C) on the training inputs at ``y`` (in ``data``'s ``F`` buffer, returned)."""
    mlp_forward(y, data[0], data, False)
    F = data[13]
    _F_of_f(F, data[2], data[7][2])
    return F


@njit(cache=True, nogil=True)
def mlp_loss(y, data):
    """The training loss ``(1/(alpha^2 P)) sum_mu l(F(x_mu), y_mu)`` at ``y``."""
    F = mlp_outputs(y, data)
    Y, iopt, fopt = data[1], data[6], data[7]
    P, C = F.shape
    alpha = fopt[2]
    s = 0.0
    if iopt[1] == 0:
        for p in range(P):
            for i in range(C):
                d = Y[p, i] - F[p, i]
                s += 0.5 * d * d
    else:
        beta = fopt[1]
        for p in range(P):
            for i in range(C):
                u = beta * (1.0 - Y[p, i] * F[p, i])
                s += max(u, 0.0) + math.log1p(math.exp(-abs(u)))
        s /= beta
    return s / (alpha * alpha * P)


@njit(cache=True, nogil=True)
def mlp_rhs(y, out, data):
    """``out_l = scales[l] dL/dtheta_l`` at ``y`` (n,) (the flow's velocity for ``scales =
    -eta lr_scales``); leaves ``H``, ``Dv`` (and the switch pattern ``Dv == 1``) of ``y``."""
    X, Y, f0, lay, m, scales, iopt, fopt = (data[0], data[1], data[2], data[3], data[4],
                                            data[5], data[6], data[7])
    H, Dv, hoffs, G1, G2, F = data[8], data[9], data[10], data[11], data[12], data[13]
    L = lay.shape[0]
    P, C = F.shape
    alpha = fopt[2]
    mlp_forward(y, X, data, True)
    # G_L = dL/df = l'(F, Y) / (alpha P), F = alpha (f - f0)
    G = G1[:P * C].reshape((P, C))
    g = 1.0 / (alpha * P)
    beta = fopt[1]
    for p in range(P):
        for i in range(C):
            Fv = alpha * (F[p, i] - f0[p, i])
            if iopt[1] == 0:
                G[p, i] = g * (Fv - Y[p, i])
            else:
                u = beta * (1.0 - Y[p, i] * Fv)
                sig = 1.0 / (1.0 + math.exp(-u)) if u >= 0.0 else (
                    math.exp(u) / (1.0 + math.exp(u)))
                G[p, i] = -g * Y[p, i] * sig
    cur = 1
    for l in range(L - 1, -1, -1):
        o, r, c = lay[l, 0], lay[l, 1], lay[l, 2]
        if l > 0:
            hin = H[hoffs[l - 1]:hoffs[l - 1] + P * c].reshape((P, c))
        else:
            hin = X
        gW = out[o:o + r * c].reshape((r, c))
        np.dot(G.T, hin, gW)
        sw = scales[l] * m[l]
        for i in range(r):
            for j in range(c):
                gW[i, j] *= sw
        if l > 0:
            W = y[o:o + r * c].reshape((r, c))
            buf = G2 if cur == 1 else G1
            cur = 3 - cur
            Gn = buf[:P * c].reshape((P, c))
            np.dot(G, W, Gn)
            D = Dv[hoffs[l - 1]:hoffs[l - 1] + P * c].reshape((P, c))
            ml = m[l]
            bo = lay[l - 1, 3]
            if bo >= 0:
                gb = out[bo:bo + c]
                for j in range(c):
                    gb[j] = 0.0
                for p in range(P):
                    for j in range(c):
                        v = ml * Gn[p, j] * D[p, j]
                        Gn[p, j] = v
                        gb[j] += v
                sb = scales[l - 1]
                for j in range(c):
                    gb[j] *= sb
            else:
                for p in range(P):
                    for j in range(c):
                        Gn[p, j] = ml * Gn[p, j] * D[p, j]
            G = Gn
