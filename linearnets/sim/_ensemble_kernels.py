"""Compiled step of the linear ensemble: every stage of an embedded RK attempt of m members.

:func:`linear_attempt` does, member by member, what ``ensemble._BatchedERK.attempt``
does with the batched numpy right-hand side of ``ensemble._BatchedLinear``: the
stages ``K_i = f(y + h sum_j A_ij K_j)``, ``y_new = y + h sum_j b_j K_j``,
``K_s = f(y_new)`` and the scaled error norm (DOP853's with its third-order
companion, or the RMS norm).  The gradient of a member is the sufficient-statistics
formula of :mod:`linearnets.sim._rhs` with its product order through the narrow
side: ``A_{i-1}^T = W_i^T A_i^T``, ``E = Syx'_b - (Sxx W^T)^T``, ``G_{i+1} = G_i W_i^T``,
``dW_i = eta_i A_i^T G_i``.  Small networks only pay off here (the products are
plain loops); ``nogil=True`` and ``cache=True`` like every kernel of the package.
"""
from __future__ import annotations

import numpy as np

from .._numba_cache import njit


@njit(cache=True, nogil=True)
def _linear_rhs(yv, Sxx, Syx, rates, rows, cols, offs, out, At, Wt, G, G2):
    L = rows.size
    C = rows[L - 1]
    D = cols[0]
    for r in range(C):
        for c in range(C):
            At[L - 1, r, c] = 1.0 if r == c else 0.0
    for i in range(L - 1, 0, -1):
        o, nr, nc = offs[i], rows[i], cols[i]
        for p in range(nc):
            for c in range(C):
                At[i - 1, p, c] = 0.0
        for q in range(nr):
            for p in range(nc):
                w = yv[o + q * nc + p]
                for c in range(C):
                    At[i - 1, p, c] += w * At[i, q, c]
    o, nr = offs[0], rows[0]
    for p in range(D):
        for c in range(C):
            Wt[p, c] = 0.0
    for q in range(nr):
        for p in range(D):
            w = yv[o + q * D + p]
            for c in range(C):
                Wt[p, c] += w * At[0, q, c]
    for c in range(C):
        for d in range(D):
            s = 0.0
            for e in range(D):
                s += Sxx[d, e] * Wt[e, c]
            G[c, d] = Syx[c, d] - s
    for i in range(L):
        o, nr, nc = offs[i], rows[i], cols[i]
        rate = rates[i]
        for r in range(nr):
            for col in range(nc):
                s = 0.0
                for c in range(C):
                    s += At[i, r, c] * G[c, col]
                out[o + r * nc + col] = rate * s
        if i < L - 1:
            for c in range(C):
                for r in range(nr):
                    s = 0.0
                    for col in range(nc):
                        s += G[c, col] * yv[o + r * nc + col]
                    G2[c, r] = s
            for c in range(C):
                for r in range(nr):
                    G[c, r] = G2[c, r]


@njit(cache=True, nogil=True)
def linear_attempt(y, f, h, Sxx, Syx, rates, rows, cols, offs, A, b, e, e3, use_e3, rtol,
                   atol, y_new, f_new, err):
    """One attempt for each row of ``y`` (m, n) with steps ``h`` (m,), ``f = rhs(y)``;
    writes ``y_new``, ``f_new`` (m, n) and ``err`` (m,) (inf where not finite)."""
    m, n = y.shape
    s = b.size
    L = rows.size
    C = rows[L - 1]
    W = max(rows.max(), cols.max())
    At = np.empty((L, W, C))
    Wt = np.empty((cols[0], C))
    G = np.empty((C, W))
    G2 = np.empty((C, W))
    K = np.empty((s + 1, n))
    yt = np.empty(n)
    for i in range(m):
        hi = h[i]
        for j in range(n):
            K[0, j] = f[i, j]
        for st in range(1, s):
            for j in range(n):
                acc = 0.0
                for l in range(st):
                    acc += A[st, l] * K[l, j]
                yt[j] = y[i, j] + hi * acc
            _linear_rhs(yt, Sxx, Syx[i], rates, rows, cols, offs, K[st], At, Wt, G, G2)
        for j in range(n):
            acc = 0.0
            for l in range(s):
                acc += b[l] * K[l, j]
            y_new[i, j] = y[i, j] + hi * acc
        _linear_rhs(y_new[i], Sxx, Syx[i], rates, rows, cols, offs, K[s], At, Wt, G, G2)
        n5 = 0.0
        n3 = 0.0
        finite = True
        for j in range(n):
            f_new[i, j] = K[s, j]
            if not (np.isfinite(y_new[i, j]) and np.isfinite(K[s, j])):
                finite = False
            sc = atol + rtol * max(abs(y[i, j]), abs(y_new[i, j]))
            a5 = 0.0
            a3 = 0.0
            for l in range(s + 1):
                a5 += e[l] * K[l, j]
                a3 += e3[l] * K[l, j]
            a5 /= sc
            a3 /= sc
            n5 += a5 * a5
            n3 += a3 * a3
        if not finite:
            err[i] = np.inf
        elif use_e3:
            err[i] = 0.0 if n5 == 0.0 else abs(hi) * n5 / np.sqrt((n5 + 0.01 * n3) * n)
        else:
            err[i] = abs(hi) * np.sqrt(n5 / n)
