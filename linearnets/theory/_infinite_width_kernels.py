"""Compiled (numba) pair loop of the infinite-width kernels: Mehler sums by Horner's rule.

For every pair (i, j) of a block, ``out[i, j] = rho_ij^offset sum_k (rho_ij^step)^k
C1[i, k] C2T[k, j]``, the truncated Mehler expansion of ``E[g(u) g(v)]``
(:mod:`linearnets.theory.infinite_width`).  Columns ``j < jstart[i]`` are left as they
are (the lower triangle of a symmetric block).  The inner loop runs over the columns,
so that it vectorises; Horner's recurrence runs over k.
"""
from __future__ import annotations

import numpy as np

from .._numba_cache import njit


@njit(cache=True, error_model="numpy")
def mehler_sums(rho, C1, C2T, offset, step, jstart, out):
    P1, P2 = rho.shape
    K = C1.shape[1]
    acc = np.empty(P2)
    rs = np.empty(P2)
    for i in range(P1):
        j0 = jstart[i]
        for j in range(j0, P2):
            r = rho[i, j]
            rs[j] = r * r if step == 2 else r
            acc[j] = C1[i, K - 1] * C2T[K - 1, j]
        for k in range(K - 2, -1, -1):
            c = C1[i, k]
            for j in range(j0, P2):
                acc[j] = acc[j] * rs[j] + c * C2T[k, j]
        if offset == 1:
            for j in range(j0, P2):
                out[i, j] = acc[j] * rho[i, j]
        else:
            for j in range(j0, P2):
                out[i, j] = acc[j]
    return out


# ---------------------------------------------------------------------------------------
# the Gaussian scale mixture: E[g(u) g(v)] as a 2-D sum over the mixing variances of
# closed forms (tanh: arcsine and 1/sqrt(det); softplus: arc-cosine of degree 1 and 0)
# ---------------------------------------------------------------------------------------
_TWO_OVER_PI = 0.6366197723675814
_INV_TWO_PI = 0.15915494309189535
#: Below this angle sin(psi) - psi cos(psi) comes from its series (psi^3/3 - psi^5/30 + ...).
_PSI_SERIES = 0.5


@njit(cache=True, error_model="numpy", inline="always")
def _s_series(psi):
    """sin psi - psi cos psi = sum_k (-1)^(k+1) 2k psi^(2k+1)/(2k+1)!, k = 1..7."""
    p2 = psi * psi
    s = 14.0 / 1307674368000.0
    s = 12.0 / 6227020800.0 - p2 * s
    s = 10.0 / 39916800.0 - p2 * s
    s = 8.0 / 362880.0 - p2 * s
    s = 6.0 / 5040.0 - p2 * s
    s = 4.0 / 120.0 - p2 * s
    s = 2.0 / 6.0 - p2 * s
    return s * p2 * psi


@njit(cache=True, error_model="numpy")
def _mix_one(kind, a, c, rho, s2, t, w):
    """(E[g(u) g(v)], E[g'(u) g'(v)]) for (u, v) ~ N(0, [[a, lam], [lam, c]]), lam = rho sqrt(ac),
    s2 = 1 - rho^2 (given, not recomputed: near rho = 1 it comes from the angle), over the
    mixing variances t (n,) with weights w (n,); kind 0 tanh, 1 softplus (t = (2K/beta)^2).

    Everything is scaled by A = max(a, 1), C = max(c, 1), so nothing overflows below the
    float range: dn = det'/(AC), det' = ac s2 + a t2 + c t1 + t1 t2 > 0."""
    A = a if a > 1.0 else 1.0
    C = c if c > 1.0 else 1.0
    sA = np.sqrt(A)
    sC = np.sqrt(C)
    at = a / A
    ct = c / C
    lt = rho * np.sqrt(at * ct)
    dt = s2 * at * ct
    n = t.shape[0]
    f = 0.0
    d = 0.0
    for k in range(n):
        u1 = t[k] / A
        base = dt + ct * u1
        fk = 0.0
        dk = 0.0
        for m in range(n):
            u2 = t[m] / C
            dn = base + (at + u1) * u2
            sd = np.sqrt(dn)
            if kind == 0:
                fk += w[m] * np.arctan2(lt, sd)
                dk += w[m] / sd
            else:
                psi = np.arctan2(sd, -lt)
                if psi < _PSI_SERIES:
                    fk += w[m] * np.sqrt(dn + lt * lt) * _s_series(psi)
                else:
                    fk += w[m] * (sd + psi * lt)
                dk += w[m] * psi
        f += w[k] * fk
        d += w[k] * dk
    if kind == 0:
        return _TWO_OVER_PI * f, _TWO_OVER_PI * d / (sA * sC)
    return _INV_TWO_PI * sA * sC * f, _INV_TWO_PI * d


@njit(cache=True, error_model="numpy")
def mixture_pairs(kind, a, c, rho, s2, rowbad, colbad, jstart, t, w, outf, outd):
    """``_mix_one`` for every pair (i, j >= jstart[i]) of the block with rowbad[i] or colbad[j];
    the other entries of ``outf``, ``outd`` are left as they are."""
    P1, P2 = rho.shape
    for i in range(P1):
        for j in range(jstart[i], P2):
            if rowbad[i] or colbad[j]:
                f, d = _mix_one(kind, a[i], c[j], rho[i, j], s2[i, j], t, w)
                outf[i, j] = f
                outd[i, j] = d
    return outf, outd


@njit(cache=True, error_model="numpy")
def mixture_diag(kind, a, t, w):
    """(E[g(u)^2], E[g'(u)^2]) (n,) for u ~ N(0, a_i)."""
    n = a.shape[0]
    f = np.empty(n)
    d = np.empty(n)
    for i in range(n):
        f[i], d[i] = _mix_one(kind, a[i], a[i], 1.0, 0.0, t, w)
    return f, d
