"""Numba kernels of the linear network (compiled with ``cache=True``; nothing else lives here).

* :func:`chains` / :func:`rhs_flat` -- the partial products of the gradient and the
  gradient-flow right-hand side on the flat state, the same narrow-side product
  order as the numpy references ``_rhs.chains`` / ``_rhs.rhs``;
* :func:`jvp_flat` -- the Jacobian-vector product of ``_stiff.Flow.jvp`` on the flat
  state, from the products :func:`rhs_flat` left (``_stiff.CompiledFlow``);
* :func:`end_to_end`, :func:`balance_drift`, :func:`probe_ntk` -- the end-to-end
  map, the conservation diagnostic and the empirical NTK of the flat state, for the
  observations of a numba run (``flow.gradient_flow``).

The stepping loops that call them live apart from the network: the adaptive
embedded Runge-Kutta loop and its step control in ``methods/_erk_kernels.py``, the
Rosenbrock-W loop in ``methods/_rosw_kernels.py``, and the linear model's cached
entry points into them in ``models/_linear_kernels.py``.  The step-control helpers
are re-exported here for the linear model's factored fast paths
(``_lowrank_kernels``, ``_lowstorage_kernels``).

Every argument is a C-contiguous float64 (or int64) array or a scalar of fixed
type, so each kernel compiles to exactly one signature.  Products go through
``np.dot`` (BLAS) on contiguous views reshaped from the flat buffers.
"""
from __future__ import annotations

import numpy as np

from .._numba_cache import njit
from ._rhs import TRANSPOSED_PRODUCT_MAX_BYTES
# the step control of the compiled loops, for the factored fast paths that import it here
from .methods._erk_kernels import (ACCEPTED, NONFINITE_TRIAL, PENDING, REJECTED, STIFF,  # noqa: F401
                                   accept_step, capped_step, count_stiff, error_norm, exchange,
                                   hold_step, judge_step, predictive_step, stability_cap,
                                   stage_state, stage_states, step_after_accept, step_guard,
                                   stiffness_estimate, sumsq, trial_step)

__all__ = ["times_transpose", "chains", "rhs_flat", "jvp_flat", "end_to_end", "balance_drift",
           "probe_ntk", "end_to_end_many"]


@njit(cache=True)
def times_transpose(G, W, out, tbuf):
    """``out = G W^T`` (C x r) for ``G`` (C x c), ``W`` (r x c): ``_rhs.times_transpose``,
    the same branch and the same BLAS calls (``tbuf``: scratch of ``(r + c) C`` doubles)."""
    C, c = G.shape
    r = W.shape[0]
    if 8 * r * c <= TRANSPOSED_PRODUCT_MAX_BYTES:
        GT = tbuf[:c * C].reshape((c, C))
        for a in range(C):
            for i in range(c):
                GT[i, a] = G[a, i]
        OT = tbuf[c * C:(c + r) * C].reshape((r, C))
        np.dot(W, GT, OT)
        for a in range(C):
            for i in range(r):
                out[a, i] = OT[i, a]
    else:
        np.dot(G, W.T, out)


@njit(cache=True)
def chains(y, Sxx, Syx, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf):
    """The partial products of the gradient at ``y`` (n,), as ``_rhs.chains``.

    ``rows[i], cols[i]`` are the shape of layer i (0-based), ``offs`` its offsets
    in ``y``; writes the transposed top products ``A_i^T`` (rows[i] x C) into
    ``abuf`` at offsets ``aoff`` (``i < L - 1``) and the bottom products ``G_i``
    (C x cols[i]) into ``gbuf`` at ``goff`` (``G_0 = E``); ``WT`` and ``SW`` are
    (D, C) scratch, ``tbuf`` scratch of ``2 C max(rows, cols)`` doubles for
    :func:`times_transpose`.
    """
    L = rows.shape[0]
    C = Syx.shape[0]
    D = Sxx.shape[0]
    # transposed top products A_i^T = (W_{L-1} ... W_{i+1})^T, A_{L-1} = I never formed
    if L > 1:
        At = abuf[aoff[L - 2]:aoff[L - 2] + C * rows[L - 2]].reshape((rows[L - 2], C))
        Wtop = y[offs[L - 1]:offs[L]].reshape((rows[L - 1], cols[L - 1]))
        At[:, :] = Wtop.T
        for i in range(L - 3, -1, -1):
            Ai = abuf[aoff[i]:aoff[i] + C * rows[i]].reshape((rows[i], C))
            Ap = abuf[aoff[i + 1]:aoff[i + 1] + C * rows[i + 1]].reshape((rows[i + 1], C))
            Wp = y[offs[i + 1]:offs[i + 2]].reshape((rows[i + 1], cols[i + 1]))
            np.dot(Wp.T, Ap, Ai)
        A0 = abuf[aoff[0]:aoff[0] + C * rows[0]].reshape((rows[0], C))
        W0 = y[offs[0]:offs[1]].reshape((rows[0], cols[0]))
        np.dot(W0.T, A0, WT)
    else:
        WT[:, :] = y[offs[0]:offs[1]].reshape((C, D)).T
    # E = Syx - (Sxx W^T)^T, stored as G_0
    np.dot(Sxx, WT, SW)
    E = gbuf[goff[0]:goff[0] + C * D].reshape((C, D))
    for a in range(C):
        for d in range(D):
            E[a, d] = Syx[a, d] - SW[d, a]
    # bottom products G_i = E W_0^T ... W_{i-1}^T
    for i in range(1, L):
        Gi = gbuf[goff[i]:goff[i] + C * cols[i]].reshape((C, cols[i]))
        Gp = gbuf[goff[i - 1]:goff[i - 1] + C * cols[i - 1]].reshape((C, cols[i - 1]))
        Wm = y[offs[i - 1]:offs[i]].reshape((rows[i - 1], cols[i - 1]))
        times_transpose(Gp, Wm, Gi, tbuf)


@njit(cache=True)
def rhs_flat(y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf):
    """Write ``dy/dt`` at ``y`` (n,) into ``out`` (n,): :func:`chains`, then
    ``dW_i = eta_i A_i^T G_i`` (``_rhs.rhs``)."""
    L = rows.shape[0]
    C = Syx.shape[0]
    chains(y, Sxx, Syx, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf)
    for i in range(L):
        Gi = gbuf[goff[i]:goff[i] + C * cols[i]].reshape((C, cols[i]))
        dW = out[offs[i]:offs[i + 1]].reshape((rows[i], cols[i]))
        eta = eta_l[i]
        if i == L - 1:
            for a in range(rows[i]):
                for d in range(cols[i]):
                    dW[a, d] = Gi[a, d] * eta
        else:
            Ai = abuf[aoff[i]:aoff[i] + C * rows[i]].reshape((rows[i], C))
            np.dot(Ai, Gi, dW)
            for m in range(offs[i], offs[i + 1]):
                out[m] *= eta


@njit(cache=True)
def _layer(x, offs, rows, cols, i):
    """Layer ``i`` of the flat state ``x`` as a (rows[i], cols[i]) view."""
    return x[offs[i]:offs[i + 1]].reshape((rows[i], cols[i]))


@njit(cache=True)
def _top(buf, aoff, rows, i, C):
    """``A_i^T`` (rows[i] x C) in a buffer laid out as :func:`chains`' ``abuf``."""
    return buf[aoff[i]:aoff[i] + C * rows[i]].reshape((rows[i], C))


@njit(cache=True)
def _bottom(buf, goff, cols, i, C):
    """``G_i`` (C x cols[i]) in a buffer laid out as :func:`chains`' ``gbuf``."""
    return buf[goff[i]:goff[i] + C * cols[i]].reshape((C, cols[i]))


@njit(cache=True)
def _add_into(out, P):
    """``out += P`` (2-D, same shape)."""
    for a in range(out.shape[0]):
        for b in range(out.shape[1]):
            out[a, b] += P[a, b]


@njit(cache=True)
def jvp_flat(v, out, y, Sxx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, dabuf, dgbuf,
             dWT, dSW, tbuf, pbuf):
    """Write ``J(y) v`` into ``out`` (n,): ``_stiff.Flow.jvp`` on the flat state, with
    ``abuf``/``gbuf`` the partial products of ``y`` (``chains(y, ...)``, as
    :func:`rhs_flat` leaves them).  In the transposed layout of :func:`chains`:

        dA_i^T = W_{i+1}^T dA_{i+1}^T + V_{i+1}^T A_{i+1}^T,  dA_{L-2}^T = V_{L-1}^T,
        dW^T = W_0^T dA_0^T + V_0^T A_0^T,  dG_0 = -(Sxx dW^T)^T,
        dG_i = dG_{i-1} W_{i-1}^T + G_{i-1} V_{i-1}^T,
        d(dW_i) = eta_i (dA_i^T G_i + A_i^T dG_i)   (eta_i dG_i at the top),

    ``dabuf``/``dgbuf`` laid out as ``abuf``/``gbuf``, ``dWT``/``dSW`` (D, C) and
    ``pbuf`` (the largest layer) scratch, ``tbuf`` that of :func:`times_transpose`.
    """
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    D = Sxx.shape[0]
    if L > 1:
        _top(dabuf, aoff, rows, L - 2, C)[:, :] = _layer(v, offs, rows, cols, L - 1).T
        for i in range(L - 3, -1, -1):
            dAi = _top(dabuf, aoff, rows, i, C)
            np.dot(_layer(y, offs, rows, cols, i + 1).T, _top(dabuf, aoff, rows, i + 1, C), dAi)
            P = pbuf[:rows[i] * C].reshape((rows[i], C))
            np.dot(_layer(v, offs, rows, cols, i + 1).T, _top(abuf, aoff, rows, i + 1, C), P)
            _add_into(dAi, P)
        np.dot(_layer(y, offs, rows, cols, 0).T, _top(dabuf, aoff, rows, 0, C), dWT)
        P = pbuf[:D * C].reshape((D, C))
        np.dot(_layer(v, offs, rows, cols, 0).T, _top(abuf, aoff, rows, 0, C), P)
        _add_into(dWT, P)
    else:
        dWT[:, :] = _layer(v, offs, rows, cols, 0).T
    np.dot(Sxx, dWT, dSW)
    dE = _bottom(dgbuf, goff, cols, 0, C)
    for a in range(C):
        for d in range(D):
            dE[a, d] = -dSW[d, a]
    for i in range(1, L):
        dGi = _bottom(dgbuf, goff, cols, i, C)
        times_transpose(_bottom(dgbuf, goff, cols, i - 1, C), _layer(y, offs, rows, cols, i - 1),
                        dGi, tbuf)
        P = pbuf[:C * cols[i]].reshape((C, cols[i]))
        times_transpose(_bottom(gbuf, goff, cols, i - 1, C), _layer(v, offs, rows, cols, i - 1),
                        P, tbuf)
        _add_into(dGi, P)
    for i in range(L):
        dW = _layer(out, offs, rows, cols, i)
        dGi = _bottom(dgbuf, goff, cols, i, C)
        if i == L - 1:
            dW[:, :] = dGi
        else:
            np.dot(_top(dabuf, aoff, rows, i, C), _bottom(gbuf, goff, cols, i, C), dW)
            P = pbuf[:rows[i] * cols[i]].reshape((rows[i], cols[i]))
            np.dot(_top(abuf, aoff, rows, i, C), dGi, P)
            _add_into(dW, P)
        dW *= eta_l[i]


@njit(cache=True)
def end_to_end(y, rows, cols, offs, out, buf):
    """``out = W_L ... W_1`` (C x D) of the flat state ``y``, multiplied from the top in
    the order of ``_rhs.end_to_end_flat``; ``buf``: scratch of ``2 C max(cols)`` doubles.

    The observations of a numba run form the end-to-end map here rather than in numpy:
    numpy's BLAS is another library with its own threads, which contend with the
    loop's (still spinning after a compiled call) for the cores -- on the large
    benchmark network a 1 ms product took 18 to 65 ms that way.
    """
    L = rows.shape[0]
    if L == 1:
        out[:, :] = _layer(y, offs, rows, cols, 0)
        return
    C = rows[L - 1]
    half = buf.shape[0] // 2
    cur = _layer(y, offs, rows, cols, L - 1)
    slot = 0
    for i in range(L - 2, 0, -1):
        nxt = buf[slot * half:slot * half + C * cols[i]].reshape((C, cols[i]))
        np.dot(cur, _layer(y, offs, rows, cols, i), nxt)
        cur = nxt
        slot = 1 - slot
    np.dot(cur, _layer(y, offs, rows, cols, 0), out)


@njit(cache=True)
def end_to_end_many(Ys, rows, cols, offs, out, buf):
    """:func:`end_to_end` of each row of ``Ys`` (m, n) into ``out[i]`` (C x D): the outputs
    of a step's continuous extension observed in one call."""
    for i in range(Ys.shape[0]):
        end_to_end(Ys[i], rows, cols, offs, out[i], buf)


@njit(cache=True)
def balance_drift(y, rows, cols, offs, gram, gram0, goffs, first, tmp):
    """``max_i |G_i - G_i(t_0)|_F`` over the balance Gram matrices
    ``G_i = W_{i+1}^T W_{i+1} - W_i W_i^T`` (N_i x N_i, i < L - 1) of the flat state ``y``:
    the conservation diagnostic of ``flow.gradient_flow``, for a numba run's observations
    (see :func:`end_to_end`).  ``gram``/``gram0`` hold the G_i at offsets ``goffs``; with
    ``first`` the G_i are stored in ``gram0`` (and 0 returned); ``tmp`` is scratch of the
    largest N_i^2.
    """
    L = rows.shape[0]
    drift = 0.0
    for i in range(L - 1):
        N = rows[i]
        G = gram[goffs[i]:goffs[i + 1]].reshape((N, N))
        Wi = _layer(y, offs, rows, cols, i)
        Wn = _layer(y, offs, rows, cols, i + 1)
        np.dot(Wn.T, Wn, G)
        T = tmp[:N * N].reshape((N, N))
        np.dot(Wi, Wi.T, T)
        acc = 0.0
        for m in range(goffs[i], goffs[i + 1]):
            g = gram[m] - tmp[m - goffs[i]]
            gram[m] = g
            if first:
                gram0[m] = g
            else:
                d = g - gram0[m]
                acc += d * d
        drift = max(drift, np.sqrt(acc))
    return drift


@njit(cache=True)
def probe_ntk(y, rows, cols, offs, Xp, out, abuf, tt, hbuf, hh):
    """``out`` (Q, Q, C, C) = the empirical NTK of the flat state ``y`` on the probe
    inputs ``Xp`` (Q, D), ``sum_l (H_l H_l^T) (x) (A_l A_l^T)`` with ``A_l = W_L ... W_{l+1}``
    and ``H_l = Xp W_1^T ... W_{l-1}^T``: ``ntk._ntk_blocks(ws, Xp, Xp)``, the same products
    in the same order, for a numba run's observations (see :func:`end_to_end`).
    Scratch: ``abuf`` of ``2 C max(cols)``, ``tt`` (L, C, C), ``hbuf`` of ``2 Q max(cols)``
    and ``hh`` (Q, Q).
    """
    L = rows.shape[0]
    C = rows[L - 1]
    Q = Xp.shape[0]
    for i in range(C):
        for j in range(C):
            tt[L - 1, i, j] = 1.0 if i == j else 0.0
    if L > 1:
        half = abuf.shape[0] // 2
        A = _layer(y, offs, rows, cols, L - 1)  # A_{L-2} (C x rows[L-2])
        slot = 0
        for i in range(L - 2, -1, -1):
            np.dot(A, A.T, tt[i])
            if i > 0:
                nxt = abuf[slot * half:slot * half + C * cols[i]].reshape((C, cols[i]))
                np.dot(A, _layer(y, offs, rows, cols, i), nxt)
                A = nxt
                slot = 1 - slot
    out[...] = 0.0
    half = hbuf.shape[0] // 2
    H = Xp
    slot = 0
    for i in range(L):
        if i > 0:
            nxt = hbuf[slot * half:slot * half + Q * cols[i]].reshape((Q, cols[i]))
            np.dot(H, _layer(y, offs, rows, cols, i - 1).T, nxt)
            H = nxt
            slot = 1 - slot
        np.dot(H, H.T, hh)
        for p in range(Q):
            for q in range(Q):
                v = hh[p, q]
                for a in range(C):
                    for b in range(C):
                        out[p, q, a, b] += v * tt[i, a, b]
