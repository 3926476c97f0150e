"""Compiled right-hand side and stepping loops of the MLP (``backend="numba"``): the maths of
:mod:`.mlp` with every product one BLAS GEMM and the elementwise work one fused loop per
layer, on the data tuple that ``mlp.MLPNumba`` builds (docs/simulator.md, "The MLP")."""
from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import intrinsic

from ..._numba_cache import njit
from ..methods._descent_kernels import make_gd_advance, make_sgd_advance
from ..methods._erk_kernels import make_erk_advance

__all__ = ["ACT_CODES", "LOSS_CODES", "STOP_CODES", "activate", "mlp_forward", "mlp_rhs",
           "mlp_loss", "mlp_outputs", "loss_gradient", "crossings", "keep_pattern", "stop_value",
           "erk_advance_smooth", "erk_advance_kinks", "gd_advance",
           "load_batch", "sgd_advance"]

#: Activation name -> integer code of the kernels.
ACT_CODES = {"linear": 0, "relu": 1, "leaky_relu": 2, "softplus": 3, "tanh": 4}
#: Loss name -> integer code.
LOSS_CODES = {"mse": 0, "soft_hinge": 1, "logistic": 2, "cross_entropy": 3}
#: Stop rule -> integer code (``iopt[STOP]``; its value in ``fopt[STOP_VALUE]``).
STOP_CODES = {None: 0, "margin": 1, "loss": 2}
#: Slots of the data tuple's ``iopt`` (int64: the activation's and the loss' codes, biases
#: 0/1, the stop rule's code) and ``fopt`` (float64: their parameters, alpha, the stop value).
ACT, LOSS, BIASES, STOP = range(4)
ACT_PARAM, LOSS_PARAM, ALPHA, STOP_VALUE = range(4)


# elementary functions that vectorise (no libm call in the loop: LLVM keeps SIMD lanes)
_LN2_HI = 6.93147180369123816490e-01      # ln 2 split so that k * _LN2_HI is exact (fdlibm)
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00
_SQRT2M1 = 0.41421356237309504880


@intrinsic
def _double_of_bits(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits`` (a register bitcast)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return sig, codegen


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _exp_split(x):
    """``(s, q)`` with ``e^x = s (1 + q)``, ``s = 2^k``, ``q = e^r - 1`` (``-708 <= x <= 709``;
    Cody-Waite reduction, Taylor polynomial of degree 13)."""
    kf = float(np.int64(x * _INV_LN2 + (0.5 if x >= 0.0 else -0.5)))
    r = (x - kf * _LN2_HI) - kf * _LN2_LO
    q = r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (
        1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (
            1.0 / 3628800 + r * (1.0 / 39916800 + r * (1.0 / 479001600 + r * (
                1.0 / 6227020800)))))))))))))
    return _double_of_bits((np.int64(kf) + 1023) << 52), q


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def vtanh(x):
    """``tanh(x)`` to a few ulps, as ``sign(x) (e^{2|x|} - 1) / (e^{2|x|} + 1)``."""
    a = min(abs(x), 20.0)
    s, q = _exp_split(2.0 * a)
    em1 = s * q + (s - 1.0)
    t = em1 / (em1 + 2.0)
    return t if x >= 0.0 else -t


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def vexp_neg(x):
    """``e^x`` for ``x <= 0`` to a few ulps (0 below -708, where it is below 1e-307)."""
    xc = max(x, -708.0)
    s, q = _exp_split(xc)
    return (s + s * q) if x >= -708.0 else 0.0


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def vlog1p(u):
    """``log(1 + u)`` for ``0 <= u <= 1`` to a few ulps, as ``2 atanh(f / (2 + f))``."""
    big = u > _SQRT2M1
    f = 0.5 * (u - 1.0) if big else u
    sv = f / (2.0 + f)
    z = sv * sv
    series = 2.0 * sv * (1.0 + z * (1.0 / 3 + z * (1.0 / 5 + z * (1.0 / 7 + z * (1.0 / 9 + z * (
        1.0 / 11 + z * (1.0 / 13 + z * (1.0 / 15 + z * (1.0 / 17 + z * (1.0 / 19 + z * (
            1.0 / 21)))))))))))
    return (series + _LN2_LO) + _LN2_HI if big else series


@njit(cache=True, nogil=True, error_model="numpy")
def activate(Z, Dv, y, boff, m, act, a):
    """In place, (P, N) each: ``z = m Z + b`` (``b = y[boff:boff + N]``, none if ``boff < 0``),
    ``Z <- phi(z)``, ``Dv <- phi'(z)``; one loop per activation, so that each vectorises."""
    P, N = Z.shape
    ia = 1.0 / a if act == 3 else 0.0
    b = y[boff:boff + N] if boff >= 0 else np.zeros(N)
    for p in range(P):
        zr, dr = Z[p], Dv[p]
        if act == 1:                          # relu (relu'(0) = 0)
            for j in range(N):
                z = m * zr[j] + b[j]
                pos = z > 0.0
                zr[j] = z if pos else 0.0
                dr[j] = 1.0 if pos else 0.0
        elif act == 2:                        # leaky relu, slope a in [0, 1)
            for j in range(N):
                z = m * zr[j] + b[j]
                pos = z > 0.0
                zr[j] = z if pos else a * z
                dr[j] = 1.0 if pos else a
        elif act == 3:                        # softplus, beta a
            for j in range(N):
                z = m * zr[j] + b[j]
                e = vexp_neg(-a * abs(z))
                zr[j] = max(z, 0.0) + vlog1p(e) * ia
                dr[j] = (1.0 if z >= 0.0 else e) / (1.0 + e)
        elif act == 4:                        # tanh
            for j in range(N):
                v = vtanh(m * zr[j] + b[j])
                zr[j] = v
                dr[j] = 1.0 - v * v
        else:                                 # linear
            for j in range(N):
                zr[j] = m * zr[j] + b[j]
                dr[j] = 1.0


@njit(cache=True, nogil=True)
def mlp_forward(y, data, keep):
    """``f(X)`` of ``data``'s ``X`` into its ``F`` (P, C); with ``keep`` ``H_l`` into ``H`` and
    ``phi'`` into ``Dv``, otherwise through ``G1``/``G2``."""
    X, _, _, lay, m, _, iopt, fopt, H, Dv, hoffs, G1, G2, F = data
    L = lay.shape[0]
    P = X.shape[0]
    h = X
    for l in range(L - 1):
        o, r, c = lay[l, 0], lay[l, 1], lay[l, 2]
        W = y[o:o + r * c].reshape((r, c))
        if keep:
            Z = H[hoffs[l]:hoffs[l] + P * r].reshape((P, r))
            D = Dv[hoffs[l]:hoffs[l] + P * r].reshape((P, r))
        else:                        # phi' into the buffer of h, free after the product
            Z = (G1 if l % 2 == 0 else G2)[:P * r].reshape((P, r))
            D = (G2 if l % 2 == 0 else G1)[:P * r].reshape((P, r))
        np.dot(h, W.T, Z)
        activate(Z, D, y, lay[l, 3], m[l], iopt[ACT], fopt[ACT_PARAM])
        h = Z
    o, r, c = lay[L - 1, 0], lay[L - 1, 1], lay[L - 1, 2]
    np.dot(h, y[o:o + r * c].reshape((r, c)).T, F)
    F *= m[L - 1]


@njit(cache=True, nogil=True)
def mlp_outputs(y, data):
    """``F = alpha (f - f0)`` (P, C) on the training inputs at ``y`` (``data``'s ``F``)."""
    _, _, f0, _, _, _, _, fopt, _, _, _, _, _, F = data
    mlp_forward(y, data, False)
    F -= f0
    F *= fopt[ALPHA]
    return F


@njit(cache=True, nogil=True)
def mlp_loss(y, data):
    """The training loss ``(1/(alpha^2 P)) sum_mu l(F(x_mu), y_mu)`` at ``y``."""
    mlp_forward(y, data, False)
    return _loss_of(data)


@njit(cache=True, nogil=True)
def _log_sum_exp(F, f0, p, alpha):
    """``(top, s)``: ``log sum_c e^{F_c} = top + log s`` for ``F = alpha (f[p] - f0[p])``."""
    C = F.shape[1]
    top = -np.inf
    for i in range(C):
        top = max(top, alpha * (F[p, i] - f0[p, i]))
    s = 0.0
    for i in range(C):
        s += math.exp(alpha * (F[p, i] - f0[p, i]) - top)
    return top, s


@njit(cache=True, nogil=True)
def _loss_of(data):
    """The training loss of ``F = alpha (f - f0)``, ``f`` in ``data``'s ``F`` (P, C)."""
    _, Y, f0, _, _, _, iopt, fopt, _, _, _, _, _, f = data
    P, C = f.shape
    alpha, beta, code = fopt[ALPHA], fopt[LOSS_PARAM], iopt[LOSS]
    s = 0.0
    for p in range(P):
        if code == 3:                     # -sum_c y_c log softmax(F)_c
            top, se = _log_sum_exp(f, f0, p, alpha)
            lse = top + math.log(se)
            for i in range(C):
                s += Y[p, i] * (lse - alpha * (f[p, i] - f0[p, i]))
            continue
        for i in range(C):
            F = alpha * (f[p, i] - f0[p, i])
            if code == 0:
                s += 0.5 * (Y[p, i] - F) ** 2
            else:                         # log(1 + e^u), u = beta (1 - y F) or -y F
                u = beta * (1.0 - Y[p, i] * F) if code == 1 else -Y[p, i] * F
                s += max(u, 0.0) + math.log1p(math.exp(-abs(u)))
    return (s / beta if code == 1 else s) / (alpha * alpha * P)


@njit(cache=True, nogil=True, inline="always")
def _sigmoid(u):
    """``1 / (1 + e^{-u})`` without overflow."""
    if u >= 0.0:
        return 1.0 / (1.0 + math.exp(-u))
    e = math.exp(u)
    return e / (1.0 + e)


@njit(cache=True, nogil=True)
def loss_gradient(F, f0, Y, G, iopt, fopt):
    """``G = l'(F, Y) / (alpha P)`` (P, C) for ``F = alpha (f - f0)``, ``f`` the network's
    outputs in ``F`` (the top of the backpropagation)."""
    P, C = F.shape
    alpha, beta, code = fopt[ALPHA], fopt[LOSS_PARAM], iopt[LOSS]
    g = 1.0 / (alpha * P)
    for p in range(P):
        if code == 3:                     # (sum_c y_c) softmax(F) - y
            top, se = _log_sum_exp(F, f0, p, alpha)
            ys = 0.0
            for i in range(C):
                ys += Y[p, i]
            for i in range(C):
                sm = math.exp(alpha * (F[p, i] - f0[p, i]) - top) / se
                G[p, i] = g * (ys * sm - Y[p, i])
            continue
        for i in range(C):
            Fv = alpha * (F[p, i] - f0[p, i])
            if code == 0:
                G[p, i] = g * (Fv - Y[p, i])
            elif code == 1:
                G[p, i] = -g * Y[p, i] * _sigmoid(beta * (1.0 - Y[p, i] * Fv))
            else:
                G[p, i] = -g * Y[p, i] * _sigmoid(-Y[p, i] * Fv)


@njit(cache=True, nogil=True)
def mlp_rhs(y, out, data):
    """``out_l = scales[l] dL/dtheta_l`` at ``y`` (n,) (``scales = -eta lr_scales``: the flow's
    velocity); leaves ``H``, ``Dv`` (the switch pattern ``Dv == 1``) and ``F`` of ``y``."""
    X, Y, f0, lay, m, scales, iopt, fopt, H, Dv, hoffs, G1, G2, F = data
    L = lay.shape[0]
    P, C = F.shape
    mlp_forward(y, data, True)
    G = G1[:P * C].reshape((P, C))         # G_L = l'(F, Y) / (alpha P), F = alpha (f - f0)
    loss_gradient(F, f0, Y, G, iopt, fopt)
    for l in range(L - 1, -1, -1):
        o, r, c = lay[l, 0], lay[l, 1], lay[l, 2]
        hin = H[hoffs[l - 1]:hoffs[l - 1] + P * c].reshape((P, c)) if l > 0 else X
        gW = out[o:o + r * c].reshape((r, c))
        np.dot(G.T, hin, gW)
        gW *= scales[l] * m[l]
        if l > 0:
            Gn = (G2 if l % 2 == (L - 1) % 2 else G1)[:P * c].reshape((P, c))
            np.dot(G, y[o:o + r * c].reshape((r, c)), Gn)
            D = Dv[hoffs[l - 1]:hoffs[l - 1] + P * c].reshape((P, c))
            ml = m[l]
            for p in range(P):
                for j in range(c):
                    Gn[p, j] = ml * Gn[p, j] * D[p, j]
            bo = lay[l - 1, 3]
            if bo >= 0:                   # dL/db_{l-1} = sum_mu G_{l-1}
                gb = out[bo:bo + c]
                gb[:] = 0.0
                for p in range(P):
                    for j in range(c):
                        gb[j] += Gn[p, j]
                gb *= scales[l - 1]
            G = Gn


# switches and stop event of the compiled stepping loop
@njit(cache=True, nogil=True)
def crossings(data, pat, first_only):
    """How many training pre-activations' signs ``z > 0`` at the latest :func:`mlp_rhs` (``Dv
    == 1``) differ from the pattern ``pat``; with ``first_only`` 1 at the first."""
    _, _, _, _, _, _, _, _, _, Dv, _, _, _, _ = data
    count = 0
    for m in range(Dv.shape[0]):
        if (Dv[m] == 1.0) != pat[m]:
            count += 1
            if first_only:
                return 1
    return count


@njit(cache=True, nogil=True)
def keep_pattern(data, pat):
    """``pat <- (z > 0)`` of the training pre-activations at the latest :func:`mlp_rhs`."""
    _, _, _, _, _, _, _, _, _, Dv, _, _, _, _ = data
    for m in range(Dv.shape[0]):
        pat[m] = Dv[m] == 1.0


@njit(cache=True, nogil=True)
def stop_value(y, data):
    """The stop function off the latest :func:`mlp_rhs` (at ``y``): ``value - min_mu
    margin_mu`` (stop code 1, ``"margin"``: ``y F``, or ``F_y - max_{c != y} F_c`` on the cross
    entropy), ``loss - value`` (2, ``"loss"``) or 1 (0, no stop)."""
    _, Y, f0, _, _, _, iopt, fopt, _, _, _, _, _, F = data
    if iopt[STOP] == 0:
        return 1.0
    if iopt[STOP] == 2:
        return _loss_of(data) - fopt[STOP_VALUE]
    low = np.inf
    alpha = fopt[ALPHA]
    for p in range(F.shape[0]):
        if iopt[LOSS] != 3:
            for i in range(F.shape[1]):
                low = min(low, Y[p, i] * alpha * (F[p, i] - f0[p, i]))
            continue
        fy, other = 0.0, -np.inf              # F_y - max_{c != y} F_c, one-hot labels
        for i in range(F.shape[1]):
            v = alpha * (F[p, i] - f0[p, i])
            if Y[p, i] > 0.5:
                fy = v
            else:
                other = max(other, v)
        low = min(low, fy - other)
    return fopt[STOP_VALUE] - low


_smooth_loop = make_erk_advance(mlp_rhs, stop=stop_value)
_kink_loop = make_erk_advance(mlp_rhs, switches=(crossings, keep_pattern), stop=stop_value)
_gd_loop = make_gd_advance(mlp_rhs)


@njit(cache=True, nogil=True)
def load_batch(data, full, idx):
    """The samples ``idx`` (b,) of the full data ``full = (X, Y, f0)`` into a batch-sized
    ``data``'s ``X``, ``Y`` and ``f0`` (rows in the order of ``idx``)."""
    X, Y, f0 = data[:3]
    Xf, Yf, f0f = full
    for i in range(idx.shape[0]):
        j = idx[i]
        X[i, :] = Xf[j, :]
        Y[i, :] = Yf[j, :]
        f0[i, :] = f0f[j, :]


_sgd_loop = make_sgd_advance(mlp_rhs, load_batch)


@njit(cache=True, nogil=True)
def sgd_advance(y, g, batches, lr, data, full):
    """A mini-batch step of the MLP on each row of ``batches`` (``_descent_kernels.
    make_sgd_advance``; ``data`` of a model prepared on ``b`` samples, ``full`` the full data's
    ``(X, Y, f0)``)."""
    return _sgd_loop(y, g, batches, lr, data, full)


@njit(cache=True, nogil=True)
def gd_advance(y, g, n, lr, data):
    """Up to ``n`` steps of gradient descent on the MLP (``_descent_kernels.make_gd_advance``;
    ``data`` as for :func:`mlp_rhs`)."""
    return _gd_loop(y, g, n, lr, data)


@njit(cache=True, nogil=True)
def erk_advance_smooth(y, K, y_new, th, stats, pairs, control, pat, ybuf, data):
    """The embedded Runge-Kutta loop on a smooth MLP (arguments: ``make_erk_advance``)."""
    return _smooth_loop(y, K, y_new, th, stats, pairs, control, pat, ybuf, data)


@njit(cache=True, nogil=True)
def erk_advance_kinks(y, K, y_new, th, stats, pairs, control, pat, ybuf, data):
    """The loop on a ReLU-type MLP, with the low-order pair at kinks (``make_erk_advance``)."""
    return _kink_loop(y, K, y_new, th, stats, pairs, control, pat, ybuf, data)
