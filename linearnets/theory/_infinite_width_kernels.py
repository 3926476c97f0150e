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
