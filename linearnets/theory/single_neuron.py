r"""The single hidden neuron f(x) = a wᵀx with layer-wise learning rates (Kunin et al. 2024).

Kunin, Raventós, Dominé, Chen, Klindt, Saxe & Ganguli (2024), "Get rich quick: exact
solutions reveal how unbalanced initializations promote rapid feature learning",
Sec. 3.  Gradient flow on L = (1/2P) Σ_μ (y_μ − a wᵀx_μ)² with rates η_a, η_w:

.. math::  \dot a = \eta_a\, w^\top(\Sigma_{xy} - \Sigma_{xx} a w), \qquad
           \dot w = \eta_w\, a\,(\Sigma_{xy} - \Sigma_{xx} a w),

conserves δ = η_w a² − η_a‖w‖² (any data).  On whitened data (Σxx = I, Σxy = β,
s = ‖β‖), u = η_a ν with ν = wᵀβ / a obeys the constant-coefficient Riccati equation

.. math::  \dot u = \eta_a\eta_w s^2 - \delta u - u^2 ,

whose solution, with roots u± = (−δ ± Δ)/2, Δ = √(δ² + 4η_aη_w s²), is

.. math::  u(t) = u_+ + \frac{\Delta\, z_0 e^{-\Delta t}}{1 - z_0 e^{-\Delta t}}, \qquad
           z_0 = \frac{u_0 - u_+}{u_0 - u_-},

= ½[−δ + Δ tanh(Δt/2 + artanh((δ + 2u₀)/Δ))] when u₀ lies between the roots (the
paper's tanh formula, written for η_a = η_w = 1).  The Möbius form above
is finite for all t in that case and also covers u₀ < u₋, where ν passes through
±∞ (a crosses zero) once.

Implicit bias for P < D (the paper's Thm 3.1, derived here for this model): w moves
only along the row space of X, so Π⊥w = Π⊥w₀ (Π⊥ the projector on the null space of
X) is conserved with δ.  An interpolating limit a∞w∞ = β∞ therefore has
row-space part X⁺y (the minimum-norm interpolant β*) and null-space part a∞Π⊥w₀,
with a∞² fixed by δ:

.. math::  \eta_w a^4 - (\delta + \eta_a \|\Pi_\perp w_0\|^2)\, a^2 - \eta_a \|\beta^*\|^2 = 0 .

The distance to the minimum-norm interpolant is |a∞|·‖Π⊥w₀‖: a large c = δ + η_a‖Π⊥w₀‖²
(η_w a₀² dominant, the upstream-heavy side) keeps a large multiple of the initial
null-space part; c → 0⁺ gives a∞² → √(η_a/η_w)‖β*‖.  Derivations and sympy
checks: ``theory/single_neuron.md``.
"""
from __future__ import annotations

import math

import numpy as np

from .._validation import as_float_array, check_matrix, check_nonnegative, check_positive, ldexp_safe

__all__ = ["single_neuron_delta", "single_neuron_nu", "single_neuron_implicit_bias"]

#: |a0| below this times ‖w0‖ (or exactly 0): ν = wᵀβ/a is undefined.
_A0_TINY = 1e-300


def single_neuron_delta(a, w, eta_a=1.0, eta_w=1.0):
    r"""The conserved quantity δ = η_w a² − η_a‖w‖² of the single neuron (Kunin et al. 2024).

    Parameters
    ----------
    a : float or (...,) array_like
        Output weight(s).
    w : (D,) or (..., D) array_like
        Input weights.
    eta_a, eta_w : float > 0
        Learning rates of a and w.

    Returns
    -------
    delta : float or (...,) ndarray
    """
    a = as_float_array(a, "a")
    w = as_float_array(w, "w")
    if w.ndim < 1 or w.shape[:-1] != a.shape:
        raise ValueError(f"w must have shape a.shape + (D,), got a {a.shape}, w {w.shape}")
    eta_a = float(check_positive(eta_a, "eta_a", ndim=0))
    eta_w = float(check_positive(eta_w, "eta_w", ndim=0))
    # quadratic in (a, w): each neuron at unit scale (an exact power of two 2^e), and 2^(2e)
    # back on at the end, so that delta is exact where representable and +-inf beyond
    e = np.frexp(np.maximum(np.abs(a), np.max(np.abs(w), axis=-1, initial=0.0)))[1]
    a, w = np.ldexp(a, -e), np.ldexp(w, -e[..., None])
    with np.errstate(over="ignore"):
        return ldexp_safe(eta_w * a * a - eta_a * np.sum(w * w, axis=-1), 2 * e)


def single_neuron_nu(t, a0, w0, beta, eta_a=1.0, eta_w=1.0):
    r"""Exact ν(t) = w(t)ᵀβ / a(t) of the single neuron on whitened data (Kunin et al. 2024, Sec. 3).

    With u = η_a ν, δ = η_w a₀² − η_a‖w₀‖² (conserved), s = ‖β‖,
    Δ = √(δ² + 4η_aη_w s²), u± = (−δ ± Δ)/2 and z₀ = (u₀ − u₊)/(u₀ − u₋),

    .. math::  u(t) = u_+ + \frac{\Delta\, z_0 e^{-\Delta t}}{1 - z_0 e^{-\Delta t}}

    (= ½[−δ + Δ tanh(Δt/2 + artanh((δ + 2u₀)/Δ))] for u₋ < u₀ < u₊), the solution of
    u̇ = η_aη_w s² − δu − u² that gradient flow with rates η_a, η_w on
    L = (1/2P)Σ(y − a wᵀx)², Σxx = I, Σxy = β reduces to.  t here is the time of
    the flow with these rates (no extra η).

    Parameters
    ----------
    t : float or (T,) array_like
        Times since initialisation, ≥ 0.
    a0 : float
        a(0), nonzero.
    w0 : (D,) array_like
        w(0).
    beta : (D,) array_like
        Σxy = XᵀY/P of whitened data (the teacher, y = βᵀx), nonzero.
    eta_a, eta_w : float > 0

    Returns
    -------
    nu : (T,) ndarray
        ν(t); ±inf (or huge) only at the one instant where a(t) crosses zero, which
        happens only when u₀ < u₋.
    """
    t = np.atleast_1d(check_nonnegative(t, "t", ndim=(0, 1)))
    a0 = float(as_float_array(a0, "a0", ndim=0))
    w0 = as_float_array(w0, "w0", ndim=1)
    beta = as_float_array(beta, "beta", ndim=1)
    if beta.shape != w0.shape:
        raise ValueError(f"beta must have the shape of w0 {w0.shape}, got {beta.shape}")
    eta_a = float(check_positive(eta_a, "eta_a", ndim=0))
    eta_w = float(check_positive(eta_w, "eta_w", ndim=0))
    if not abs(a0) > _A0_TINY:
        raise ValueError("a0 must be nonzero (nu = w.beta / a is undefined at a = 0)")
    with np.errstate(over="ignore"):
        s2 = float(beta @ beta)
        delta = float(single_neuron_delta(a0, w0, eta_a, eta_w))
        Delta = float(np.hypot(delta, 2.0 * np.sqrt(eta_a * eta_w * s2)))
        u0 = eta_a * float(w0 @ beta) / a0
    if not s2 > 0:
        raise ValueError("beta must be nonzero")
    if not (np.isfinite(Delta) and np.isfinite(u0)):
        raise ValueError("a0, w0, beta: the Riccati coefficients (delta = eta_w a0^2 - eta_a "
                         "|w0|^2, |beta|^2, w0.beta / a0) overflow float64")
    # the roots without cancellation: the larger one directly, the other from u+ u- = -eta_a eta_w s^2
    if delta < 0:
        up = 0.5 * (Delta - delta)
        um = -eta_a * eta_w * s2 / up
    else:
        um = -0.5 * (Delta + delta)
        up = -eta_a * eta_w * s2 / um
    if u0 == um:
        return np.full(len(t), um / eta_a)
    z0 = (u0 - up) / (u0 - um)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ez = z0 * np.exp(-Delta * t)
        u = up + Delta * ez / (1.0 - ez)
    return u / eta_a


def single_neuron_implicit_bias(X, y, a0, w0, eta_a=1.0, eta_w=1.0):
    r"""The interpolating limit of gradient flow for f = a wᵀx on underdetermined data (P < D).

    .. math::  \beta_\infty = a_\infty w_\infty = X^+ y + a_\infty \Pi_\perp w_0, \qquad
               a_\infty^2 = \frac{c + \sqrt{c^2 + 4\eta_w\eta_a\|X^+y\|^2}}{2\eta_w},\quad
               c = \delta + \eta_a\|\Pi_\perp w_0\|^2 ,

    with δ = η_w a₀² − η_a‖w₀‖² and Π⊥ the projector on the null space of X: w moves
    only in the row space of X, so Π⊥w is conserved, and δ fixes |a∞| (Kunin et al.
    2024, Thm 3.1, for this model; derivation in ``theory/single_neuron.md``).  The
    sign of a∞ is that of a₀: a(t)² ≥ (δ + η_a‖Π⊥w₀‖²)/η_w = c/η_w > 0, so a cannot
    cross zero when c > 0 (required here).

    Parameters
    ----------
    X : (P, D) array_like
        Inputs, any covariance (full row rank P ≤ D).
    y : (P,) array_like
        Targets.
    a0 : float
    w0 : (D,) array_like
    eta_a, eta_w : float > 0

    Returns
    -------
    beta_inf : (D,) ndarray
        The learned linear map a∞w∞.
    a_inf : float

    Raises
    ------
    ValueError
        If X does not have full row rank, or c = δ + η_a‖Π⊥w₀‖² ≤ 0 (then a may pass
        through zero and the limit's sign is not fixed by the conserved quantities).
    """
    X = check_matrix(X, "X")
    P, D = X.shape
    if P < 1:
        raise ValueError("X must hold at least one sample (P >= 1 rows), got P = 0")
    y = as_float_array(y, "y", ndim=1)
    if y.shape != (P,):
        raise ValueError(f"y must have shape ({P},), got {y.shape}")
    a0 = float(as_float_array(a0, "a0", ndim=0))
    w0 = as_float_array(w0, "w0", ndim=1)
    if w0.shape != (D,):
        raise ValueError(f"w0 must have shape ({D},), got {w0.shape}")
    eta_a = float(check_positive(eta_a, "eta_a", ndim=0))
    eta_w = float(check_positive(eta_w, "eta_w", ndim=0))
    U, sv, Vt = np.linalg.svd(X, full_matrices=False)
    if sv.size == 0 or sv[-1] <= max(P, D) * np.finfo(float).eps * sv[0]:
        raise ValueError("X must have full row rank (P <= D, rows independent)")
    with np.errstate(over="ignore", invalid="ignore"):
        beta_star = Vt.T @ ((U.T @ y) / sv)
        w_perp = w0 - Vt.T @ (Vt @ w0)
        delta = float(single_neuron_delta(a0, w0, eta_a, eta_w))
        c = delta + eta_a * float(w_perp @ w_perp)
        b2 = float(beta_star @ beta_star)
        a2 = 0.5 * (c + float(np.hypot(c, 2.0 * np.sqrt(eta_w * eta_a * b2)))) / eta_w
        a_inf = math.copysign(math.sqrt(a2), a0)
        out = beta_star + a_inf * w_perp
    if not (np.all(np.isfinite(out)) and np.isfinite(a_inf)):
        raise ValueError("X, y, a0, w0: the limit overflows float64 (X^+ y, delta = eta_w a0^2 - "
                         "eta_a |w0|^2 or a_inf beyond the float range)")
    if not c > 0:
        raise ValueError(f"delta + eta_a |P_perp w0|^2 = {c:.3g} <= 0: a can cross zero and the sign of the "
                         "limit is not fixed by a0 (choose a0, w0 with a larger eta_w a0^2)")
    return out, a_inf
