"""An independent reference for the mode dynamics' time t(c): mpmath quadrature to 30 digits.

Used by ``tests/theory/test_dynamics.py`` and ``benchmarks/bench_closed_forms.py`` (its
``--accuracy`` table); it lives beside the derivations (theory/mode_dynamics.md), which the
tests and the benchmarks both read.
"""
import mpmath as mp

__all__ = ["t_ref"]


def t_ref(c, s, c0, L, eta=1.0):
    """t(c) by mpmath quadrature (30 digits), split so that every piece has a smooth integrand.

    Rising: y = (c/s)^(1/L), dt = dy / (eta s^(2-2/L) y^(L-1) (1 - y^L)); integrated in
    log y below y = 1/2 and in -log(1 - y) above.  Decaying: the same in z = 1/y, where
    dt = z^(2L-3) dz / (eta s^(2-2/L) (1 - z^L)).
    """
    with mp.workdps(30):
        return _t_ref(c, s, c0, L, eta)


def _t_ref(c, s, c0, L, eta):
    c, s, c0 = mp.mpf(c), mp.mpf(s), mp.mpf(c0)
    L = int(L)
    if c0 < s:
        v0, v1 = (c0 / s) ** (mp.mpf(1) / L), (c / s) ** (mp.mpf(1) / L)
        dens = lambda v: v ** (1 - L) / (1 - v ** L)        # noqa: E731
    else:
        v0, v1 = (s / c0) ** (mp.mpf(1) / L), (s / c) ** (mp.mpf(1) / L)
        dens = lambda v: v ** (2 * L - 3) / (1 - v ** L)    # noqa: E731
    half = mp.mpf(1) / 2
    total = mp.mpf(0)
    a, b = v0, min(v1, half)
    if a < b:   # in u = log v
        ua, ub = mp.log(a), mp.log(b)
        n = int(abs(ub - ua) / 2) + 2
        total += mp.quad(lambda u: dens(mp.e ** u) * mp.e ** u, mp.linspace(ua, ub, n))
    a, b = max(v0, half), v1
    if a < b:   # in q = -log(1 - v)
        qa, qb = -mp.log(1 - a), -mp.log(1 - b)
        n = int(abs(qb - qa) / 2) + 2
        total += mp.quad(lambda q: dens(1 - mp.e ** (-q)) * mp.e ** (-q), mp.linspace(qa, qb, n))
    return total / (mp.mpf(eta) * s ** (2 - mp.mpf(2) / L))
