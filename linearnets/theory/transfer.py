"""Transfer generalisation of the learned kernel K(x, x') = xᵀ(A ββᵀ + I)x'.

A network trained on the task β has a kernel spiked along β.  Reusing that kernel
(kernel regression / a linear probe) on a new task y = w·x with
w = α β + sqrt(1 − α²) w_⊥ and P samples x ~ N(0, I_D) has an expected
generalisation error given by the spectral theory of kernel regression
(Bordelon, Canatar & Pehlevan 2020; Canatar, Bordelon & Pehlevan 2021).
Derivation: ``theory/transfer.md``.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

from .._validation import (as_float_array, broadcast_args, check_depth, check_nonnegative,
                           check_positive)

__all__ = ["transfer_kappa", "transfer_error", "trained_ntk_spike", "transfer_error_trained"]

#: Absolute tolerance on log κ of the root finder (relative precision on κ).
KAPPA_XTOL = 1e-14


def _check_common(P, D, A, ridge):
    P = check_positive(P, "P")
    D = as_float_array(D, "D")
    if np.any(~(D >= 1)):
        raise ValueError(f"D must be >= 1, got min {np.min(D)!r}")
    A = as_float_array(A, "A")
    if np.any(~(A > -1)):
        raise ValueError(f"A must be > -1 (positive-definite kernel), got min {np.min(A)!r}")
    ridge = check_nonnegative(ridge, "ridge")
    return broadcast_args(P=P, D=D, A=A, ridge=ridge)


def _kappa_scalar(P, D, A, ridge):
    lam1 = 1.0 + A
    if ridge == 0.0 and P >= D:
        return 0.0          # more samples than nonzero eigenvalues: interpolation is exact
    total = lam1 + (D - 1.0)                       # Σλ, the scale of κ − ridge
    if ridge >= total:
        return _kappa_ridge(P, D, lam1, ridge)
    # g(κ) = 1 − Σ λ/(Pλ + κ) − ridge/κ, increasing in κ, with the first two terms
    # over a common denominator: 1 − λ1/(Pλ1 + κ) − (D − 1)/(P + κ) = N(κ)/((Pλ1 + κ)(P + κ)),
    # N(κ) = κ² + bκ + c, b = λ1(P − 1) + P − D + 1, c = Pλ1(P − D): no cancellation of
    # ~1 − 1 as κ -> 0 (P = D with a tiny ridge: κ ~ sqrt(ridge)).
    # everything in units of S = 2^e ~ Σλ (exact): k² and c = O(D²) never overflow,
    # for D up to the float range
    S = float(np.ldexp(1.0, int(np.frexp(total)[1])))
    bS = (lam1 * (P - 1.0) + (P - D + 1.0)) / S
    cS = (P * lam1 / S) * ((P - D) / S)
    pl, pS, rS = P * lam1 / S, P / S, ridge / S

    def g(k):
        x = k / S
        return (x * x + bS * x + cS) / ((pl + x) * (pS + x)) - rS / x

    # Bracket: κ >= ridge, and κ >= (D − P) λ_min (each λ/(Pλ + κ) >= (1/P) Pλ_min/(Pλ_min + κ));
    # g(hi) > 0 at hi = ridge + Σλ.  Solve in log κ: κ may be tiny (ridge -> 0, P > D).
    lo = max(ridge, (D - P) * min(1.0, lam1))
    hi = ridge + total
    ulo, uhi = np.log(lo), np.log(hi)
    if g(np.exp(ulo)) >= 0.0:
        return float(np.exp(ulo))       # the bound is the root (A = 0) up to rounding
    if g(np.exp(uhi)) <= 0.0:
        return float(np.exp(uhi))       # the bracket is below rounding (D >> P, e.g. D = 1e150)
    u = brentq(lambda v: g(np.exp(v)), ulo, uhi, xtol=KAPPA_XTOL,
               rtol=4 * np.finfo(float).eps, maxiter=500)
    return float(np.exp(u))


def _kappa_ridge(P, D, lam1, ridge):
    """κ for ridge >= Σλ, solved for δ = κ − ridge (well conditioned for any ridge up to 1e308).

    κ = ridge + m(κ) with m(κ) = κ Σ λ/(Pλ + κ), so δ = m(ridge + δ); m is
    increasing and bounded by Σλ, hence δ ∈ [m(ridge), Σλ], and
    h(δ) = δ − m(ridge + δ) = κ g(κ) changes sign once there.  Its slope
    1 − γ(κ) >= 3/4 for κ >= Σλ (γ = Σ Pλ²/(Pλ + κ)² <= Σλ/(4κ)), and with
    λ/(Pλ + κ) = 1/(P + κ/λ) no term cancels against ridge: in the κ variable
    ``1 − ridge/κ`` rounds to 0 once ridge ≳ 1e10 and the bracket loses its sign change.
    """
    def m(k):
        return k / (P + k / lam1) + (D - 1.0) * (k / (P + k))

    def h(v):
        d = np.exp(v)
        return d - m(ridge + d)

    lo, hi = m(ridge), lam1 + (D - 1.0)
    ulo, uhi = np.log(lo), np.log(hi)
    if h(ulo) >= 0.0:
        return float(ridge + lo)
    if h(uhi) <= 0.0:
        return float(ridge + hi)
    u = brentq(h, ulo, uhi, xtol=KAPPA_XTOL, rtol=4 * np.finfo(float).eps, maxiter=500)
    return float(ridge + np.exp(u))


def transfer_kappa(P, D, A, ridge=0.0):
    """Self-consistent κ of kernel regression with spectrum {1 + A, 1 (×(D − 1))}.

    κ > 0 solves  κ = λ_ridge + κ [ (1+A)/(P(1+A) + κ) + (D − 1)/(P + κ) ];
    for ridge = 0 and P >= D, κ = 0.

    Parameters
    ----------
    P : float or array_like
        Number of training samples, > 0 (treated as a continuous parameter).
    D : float or array_like
        Input dimension, >= 1.
    A : float or array_like
        Spike strength, > −1.
    ridge : float or array_like, optional
        Ridge λ >= 0 of f = k(x)ᵀ(K + λI)⁻¹y.

    Returns
    -------
    ndarray, the broadcast shape of the arguments

    Notes
    -----
    Source: Canatar, Bordelon & Pehlevan (2021), eq. for κ; Atanasov, Bordelon &
    Pehlevan (2022), app. F (spectrum of the spiked linear kernel).  Solved with
    :func:`scipy.optimize.brentq` on a bracket that always contains the unique root:
    in log κ for ridge < Σλ (with the κ-independent parts over a common
    denominator, so that P = D with a tiny ridge keeps full precision), and for
    ridge >= Σλ in the excess δ = κ − ridge, which lies in [m(ridge), Σλ] with
    m(κ) = κ Σ λ/(Pλ + κ) — a variable relative to ridge that stays well
    conditioned for any finite ridge (1e10 … 1e300 included).

    Examples
    --------
    >>> round(float(transfer_kappa(50, 100, 0.0)), 10)       # isotropic: κ = D − P
    50.0
    """
    P, D, A, ridge = _check_common(P, D, A, ridge)
    out = np.vectorize(_kappa_scalar, otypes=[np.float64])(P, D, A, ridge)
    return np.asarray(out, dtype=np.float64)


def _error_scalar(P, D, A, alpha, ridge, noise):
    k = _kappa_scalar(P, D, A, ridge)
    lam1 = 1.0 + A
    if ridge == 0.0 and P >= D:
        if noise == 0.0:
            return 0.0
        return np.inf if P == D else noise * D / (P - D)
    d1, d2 = P * lam1 + k, P + k
    # in the ratios r = κ/(Pλ + κ) <= 1, so that nothing overflows for κ up to 1e308
    r1, r2 = k / d1, k / d2
    # γ κ = Σ Pλ² κ/(Pλ + κ)²
    gamma_k = lam1 * ((P * lam1) / d1) * r1 + (D - 1.0) * (P / d2) * r2   # no λ² to overflow
    # κ(1 − γ) = ridge + κ² Σ λ/(Pλ + κ)² by the κ equation: no cancellation as γ -> 1
    k_one_minus_gamma = ridge + lam1 * r1 ** 2 + (D - 1.0) * r2 ** 2
    k_bias = k * (alpha ** 2 * r1 ** 2 + (1.0 - alpha ** 2) * r2 ** 2)
    return (k_bias + noise * gamma_k) / k_one_minus_gamma


def transfer_error(P, D, A, alpha, ridge=0.0, noise=0.0):
    """Expected generalisation error of kernel regression with K = xᵀ(Aββᵀ + I)x' on a new task.

    Target y = w·x (+ label noise of variance ``noise``), w = α β + sqrt(1 − α²) w_⊥,
    ‖w‖ = 1, x ~ N(0, I_D).  With κ from :func:`transfer_kappa`,
    λ_1 = 1 + A and λ_k = 1 (k = 2..D)::

        γ   = P λ_1²/(Pλ_1 + κ)² + (D − 1) P/(P + κ)²
        E_g = [κ² α²/(Pλ_1 + κ)² + κ² (1 − α²)/(P + κ)² + noise γ] / (1 − γ)

    E_g = E_x (f(x) − w·x)², averaged over training sets.  Exact as P, D → ∞ at
    fixed P/D (finite-D corrections are O(1/D)).

    Parameters
    ----------
    P, D, A, ridge : as in :func:`transfer_kappa`
    alpha : float or array_like
        Overlap of the new task with β, −1 <= α <= 1.
    noise : float or array_like, optional
        Label-noise variance >= 0.

    Returns
    -------
    ndarray, the broadcast shape of the arguments

    Notes
    -----
    Source: Canatar, Bordelon & Pehlevan (2021); Atanasov, Bordelon & Pehlevan
    (2022), app. F.  Larger A lowers E_g at α = ±1 and raises it at α = 0.
    Ridgeless with P >= D the noiseless error is 0 (the noisy one diverges at P = D).
    Noiseless, E_g falls with P at α = ±1 and for A = 0, but not for a target off the spike:
    the first samples fit the spiked direction, the target's part off it acts as noise, and
    E_g rises above the null predictor's 1 before it falls (D = 2, A = 4, α = 0: from 1 at
    P → 0 to 1.19 near P = 0.7; one sample, ridgeless: √5/2, as a Monte Carlo gives).

    Examples
    --------
    >>> round(float(transfer_error(50, 100, 0.0, 1.0)), 12)  # isotropic: 1 − P/D
    0.5
    >>> bool(transfer_error(50, 100, 5.0, 1.0) < 0.5 < transfer_error(50, 100, 5.0, 0.0))
    True
    """
    P, D, A, ridge = _check_common(P, D, A, ridge)
    alpha = as_float_array(alpha, "alpha")
    if np.any(np.abs(alpha) > 1):
        raise ValueError("alpha must lie in [-1, 1]")
    noise = check_nonnegative(noise, "noise")
    P, D, A, alpha, ridge, noise = broadcast_args(P=P, D=D, A=A, alpha=alpha, ridge=ridge,
                                                  noise=noise)
    out = np.vectorize(_error_scalar, otypes=[np.float64])(P, D, A, alpha, ridge, noise)
    return np.asarray(out, dtype=np.float64)


def trained_ntk_spike(depth, s=1.0):
    """Spike strength A and scale of the final NTK of a depth-L network trained on y = s β·x.

    The final NTK (whitened data, small init) is
    s^{2−2/L} [x·x' + (L − 1)(β·x)(β·x')] = scale · xᵀ(A ββᵀ + I)x' with

        A = L − 1 (for every s > 0),    scale = s^{2 − 2/L}.

    Kernel regression with scale·K and ridge λ equals regression with K and ridge
    λ/scale, so s only rescales the ridge.

    Parameters
    ----------
    depth : int
        L >= 1.
    s : float or array_like, optional
        Teacher strength > 0.

    Returns
    -------
    A : float
    scale : ndarray, shape of s

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), sec. 4 / app. E.2, app. F.

    Examples
    --------
    >>> trained_ntk_spike(3, s=8.0)
    (2.0, array(16.))
    """
    L = check_depth(depth)
    s = check_positive(s, "s")
    with np.errstate(over="ignore"):   # +inf where s^(2-2/L) exceeds the float range
        return float(L - 1), np.asarray(s ** (2.0 - 2.0 / L), dtype=np.float64)


def transfer_error_trained(P, D, depth, alpha, s=1.0, ridge=0.0, noise=0.0):
    """Transfer error of the final NTK of a depth-L network trained on y = s β·x.

    ``transfer_error(P, D, L − 1, alpha, ridge / s^{2−2/L}, noise)``, see
    :func:`trained_ntk_spike`.  Source: Atanasov, Bordelon & Pehlevan (2022), app. F.

    Parameters
    ----------
    P, D, alpha, ridge, noise : as in :func:`transfer_error`
    depth : int
        L >= 1.
    s : float or array_like, optional
        Strength of the original task, > 0.

    Returns
    -------
    ndarray

    Examples
    --------
    >>> round(float(transfer_error_trained(50, 100, 1, 1.0)), 12)   # depth 1: isotropic
    0.5
    """
    A, scale = trained_ntk_spike(depth, s)
    ridge = check_nonnegative(ridge, "ridge")
    # the ridge relative to the kernel's scale: 0 stays 0 (also where the scale underflows to
    # 0 or overflows to inf), and a quotient beyond the float range is the largest float, at
    # which the regression predicts 0 to rounding, as at an infinite ridge
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        eff = np.where(ridge == 0.0, 0.0, ridge / scale)
    eff = np.minimum(eff, np.finfo(np.float64).max)
    return transfer_error(P, D, A, alpha, eff, noise)
