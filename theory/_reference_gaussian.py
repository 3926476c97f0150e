"""An independent reference for the Gaussian expectations of the infinite-width kernels.

``expect_graded(g, a, c, rho)``: E[g(u) g(v)] for (u, v) ~ N(0, [[a, rho sqrt(ac)], [., c]])
by a tensor composite Gauss-Legendre rule in normal coordinates whose panels are graded
geometrically towards the kinks of g (no Hermite series, no scale mixture), accurate to
rounding (~1e-15 relative) at pre-activation scales 1e-3 to 1e2 and every correlation
(``tests/theory/test_infinite_width.py`` checks it against itself with finer panels).  Used by the
tests and by ``benchmarks/studies/study_infinite_width.py``; it lives beside the derivations, which
the tests and the benchmarks both read (no benchmark imports tests/).
"""
from __future__ import annotations

import math

import numpy as np
from numpy.polynomial.legendre import leggauss

__all__ = ["graded_nodes", "expect_graded"]


def graded_nodes(centre, width, zmax, x, w):
    """Composite GL nodes and weights (R, n) on [-zmax, zmax] per row: unit panels plus panels
    graded geometrically (width 2^k) towards each row's ``centre`` (R,)."""
    centre = np.atleast_1d(np.asarray(centre, dtype=float))
    levels = int(math.ceil(math.log2(2 * zmax / width))) + 1
    g = width * 2.0 ** np.arange(levels)
    base = np.linspace(-zmax, zmax, int(round(2 * zmax)) + 1)
    e = np.concatenate([np.broadcast_to(base, (centre.size, base.size)),
                        centre[:, None] + np.concatenate([-g[::-1], [0.0], g])[None, :]], axis=1)
    e = np.sort(np.clip(e, -zmax, zmax), axis=1)
    h, m = np.diff(e, axis=1) / 2, (e[:, 1:] + e[:, :-1]) / 2
    z = (m[..., None] + h[..., None] * x).reshape(len(e), -1)
    return z, (h[..., None] * w).reshape(len(e), -1) * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def expect_graded(g, a, c, rho, nodes=16, zmax=9.0):
    """E[g(u) g(v)], (u, v) ~ N(0, [[a, rho sqrt(ac)], [., c]]), in normal coordinates
    u = sqrt(a) z1, v = sqrt(c)(rho z1 + s z2), s = sqrt(1 - rho^2): composite Gauss-Legendre
    graded towards the kinks of g at z1 = 0 (width 1/sqrt(a)) and, for each z1, at
    z2 = -rho z1/s (width 1/(sqrt(c) s)), to 1e-3 of the narrower feature. No series, no mixture."""
    x, w = leggauss(nodes)
    s = math.sqrt(max(0.0, (1.0 - rho) * (1.0 + rho)))
    ra, rc = math.sqrt(a), math.sqrt(c)
    w1 = 1e-3 * min(1.0, 1.0 / max(ra, 1e-300), (s + 1.0 / max(rc, 1e-300)) / max(abs(rho), 1e-300))
    z1, v1 = graded_nodes(0.0, w1, zmax, x, w)
    z1, v1 = z1[0], v1[0]
    if s == 0.0:
        return float(v1 @ (g(ra * z1) * g(rc * rho * z1)))
    z2, v2 = graded_nodes(-rho * z1 / s, 1e-3 * min(1.0, 1.0 / max(rc * s, 1e-300)), zmax, x, w)
    inner = np.sum(v2 * g(rc * (rho * z1[:, None] + s * z2)), axis=1)
    return float(v1 @ (g(ra * z1) * inner))
