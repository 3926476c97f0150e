"""Elementary special functions behind the exact deep-linear mode dynamics.

The implicit solution t(c) of dc/dt = eta L c^(2-2/L) (s - c) needs the integrals

    Phi_m(v) = int_0^v x^m / (1 - x^L) dx,      0 <= v < 1,

which for 0 <= m < L are finite sums of logarithms (partial fractions over the L-th
roots of unity omega_k = exp(2 pi i k / L)):

    Phi_m(v) = -(1/L) sum_k Re[omega_k^(m+1) log(1 - v conj(omega_k))].

The k = 0 term, -(1/L) log(1 - v), carries the logarithmic singularity at v = 1; it is
evaluated by the callers from the logit w = log(v / (1 - v)) as softplus(w) / L, which
keeps 1 - v accurate to full relative precision however close v is to 1.  The other
terms come in conjugate pairs (k, L - k) whose sum is twice a real part, and are smooth
on [0, 1]; :func:`phi_rest` returns their sum.

``scipy.special.hyp2f1`` is deliberately not used: near z = 1 it is inaccurate by
several per cent for some of the parameters needed here.
"""
from __future__ import annotations

import numpy as np

__all__ = ["softplus", "phi_rest", "phi_rest_at_one", "series_tail", "trig_tables", "SERIES_SWITCH",
           "SERIES_TERMS", "NOISE_FACTOR", "STEP_RTOL", "MAX_ITER", "PLATEAU_SWITCH"]

#: Use the power series of Phi_{2L-3} when v**L is at most this; its terms then
#: shrink at least geometrically by this factor.
SERIES_SWITCH = 0.5
#: Number of series terms: SERIES_SWITCH**SERIES_TERMS < 1e-17.
SERIES_TERMS = 57

_EPS = float(np.finfo(np.float64).eps)
#: The Newton iteration for c(t) stops once |residual| is below NOISE_FACTOR * eps
#: times the magnitude of the terms that make it up (its rounding-error level) ...
NOISE_FACTOR = 16.0
#: ... or once the Newton step is below STEP_RTOL relative to the iterate.
STEP_RTOL = 4.0 * _EPS
#: Upper bound on Newton iterations (the typical count is 2 to 6).
MAX_ITER = 100
#: Use the small-y (plateau) starting point when it predicts y at most this.
PLATEAU_SWITCH = 0.5


def trig_tables(m, depth):
    """cos/sin of theta_k and of (m+1) theta_k for the conjugate pairs k < L/2, and the
    sign (-1)^(m+1) of the k = L/2 term: the data :func:`phi_rest` loops over."""
    L = depth
    th = 2.0 * np.pi * np.arange(1, (L + 1) // 2) / L
    return (np.cos(th), np.sin(th), np.cos((m + 1) * th), np.sin((m + 1) * th),
            -1.0 if (m + 1) % 2 else 1.0)


def softplus(w):
    """log(1 + e^w) without overflow, accurate for both signs of w."""
    return np.logaddexp(0.0, w)


def phi_rest(v, m, depth):
    """Sum of the k != 0 partial-fraction terms of Phi_m(v) for 0 <= v <= 1, 0 <= m < depth.

    Returns -(1/L) sum_{k=1}^{L-1} Re[omega_k^(m+1) log(1 - v conj(omega_k))], a
    smooth function of v on [0, 1] (its argument never vanishes there).
    """
    L = depth
    v = np.asarray(v, dtype=np.float64)
    out = np.zeros_like(v)
    for k in range(1, (L + 1) // 2):
        # conjugate pair k, L - k: 2 Re[omega^(m+1) log(1 - v e^{-i theta})]
        th = 2.0 * np.pi * k / L
        # |1 - v e^{-i th}|^2 = 1 + v (v - 2 cos th) >= 4 v sin^2(th/2) > 0 on (0, 1]
        re_log = 0.5 * np.log1p(v * (v - 2.0 * np.cos(th)))
        im_log = np.arctan2(v * np.sin(th), 1.0 - v * np.cos(th))
        out -= (2.0 / L) * (np.cos((m + 1) * th) * re_log - np.sin((m + 1) * th) * im_log)
    if L % 2 == 0:
        # k = L/2, omega = -1
        sign = -1.0 if (m + 1) % 2 else 1.0
        out -= (sign / L) * np.log1p(v)
    return out


def phi_rest_at_one(m, depth):
    """phi_rest(1, m, depth): the constant the late-time asymptotics need."""
    return float(phi_rest(np.float64(1.0), m, depth))


def series_tail(v, depth):
    """Phi_{2L-3}(v) = sum_{j>=0} v^(2L-2+jL) / (2L-2+jL) for v**L <= SERIES_SWITCH.

    Evaluated as v^(2L-2) times a polynomial in q = v^L by Horner's rule, so the
    relative accuracy is that of the leading power even where Phi_{2L-3} is tiny.
    """
    L = depth
    v = np.asarray(v, dtype=np.float64)
    q = v ** L
    acc = np.zeros_like(v)
    for j in range(SERIES_TERMS - 1, -1, -1):
        acc = acc * q + 1.0 / (2 * L - 2 + j * L)
    return v ** (2 * L - 2) * acc
