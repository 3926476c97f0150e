r"""Implicit bias of diagonal linear networks (Woodworth et al. 2020).

The model f(x) = βᵀx with β = w₊² − w₋² (elementwise), both layers initialised at
w₊(0) = w₋(0) = α (Woodworth, Gunasekar, Lee, Moroshko, Savarese, Golan, Soudry &
Srebro 2020, "Kernel and rich regimes in overparametrized models", Sec. 4; their α
is this initial weight, so β(0) = 0 and the NTK at t = 0 is 8α² xᵀx′).  Gradient flow
on L = (1/2P)‖y − Xβ‖² gives ẇ± = ±2η w± ⊙ Xᵀr/P (r = y − Xβ), hence
w±(t) = α exp(±2η Xᵀ∫r/P) and

.. math::  \beta(t) = 2\alpha^2 \sinh(X^\top \nu(t)), \qquad \nu(t) = \frac{4\eta}{P}\int_0^t r .

If the flow interpolates, its limit β∞ = 2α² sinh(Xᵀν∞) with Xβ∞ = y: the KKT
conditions of

.. math::  \min_\beta\; Q_\alpha(\beta) = \sum_i \alpha^2 q(\beta_i/\alpha^2)
           \quad \text{s.t.}\quad X\beta = y, \qquad
           q(z) = 2 - \sqrt{4 + z^2} + z\,\mathrm{asinh}(z/2),

since q'(z) = asinh(z/2) and ∇Q_α(β) = asinh(β/(2α²)) = Xᵀν (Woodworth et al. 2020,
Thm 1).  Q_α → ‖β‖²/(4α²) as α → ∞ (ℓ², the kernel regime) and
Q_α ≈ ‖β‖₁ log(1/α²) as α → 0 (ℓ¹, the rich regime).

The problem is solved through its smooth, unconstrained, strictly convex dual
(X of full row rank):

.. math::  \min_\nu\; \Phi(\nu) = 2\alpha^2 \sum_i \cosh((X^\top\nu)_i) - y^\top\nu, \qquad
           \nabla\Phi = X\beta(\nu) - y, \quad \nabla^2\Phi = X\,\mathrm{diag}(2\alpha^2\cosh(X^\top\nu))\,X^\top,

by Newton's method with a backtracking line search, to a residual
‖Xβ − y‖ ≤ ``tol``·‖y‖.  Derivation and sympy checks: ``theory/diagonal_net.md``.
"""
from __future__ import annotations

import numpy as np

from .._validation import as_float_array, check_matrix, check_positive

__all__ = ["diagonal_q", "diagonal_potential", "diagonal_implicit_bias"]

#: Newton iterations before giving up.
MAX_NEWTON = 500
#: Backtracking halvings per Newton iteration before giving up.
MAX_HALVINGS = 200


def diagonal_q(z):
    r"""Woodworth's q(z) = 2 − √(4 + z²) + z·asinh(z/2) (≥ 0, q(0) = 0, q'(z) = asinh(z/2)).

    Parameters
    ----------
    z : array_like

    Returns
    -------
    q : ndarray, same shape
        Computed as z asinh(z/2) − z²/(2 + √(4 + z²)) (no cancellation at small z).
    """
    z = as_float_array(z, "z")
    a = np.abs(z)
    # z²/(2 + √(4 + z²)) as |z| (|z| / (2 + hypot(2, z))): no z² to overflow; +inf only
    # where q itself exceeds the float range (|z| ≳ 1e305)
    with np.errstate(over="ignore"):
        return z * np.arcsinh(0.5 * z) - a * (a / (2.0 + np.hypot(2.0, z)))


def diagonal_potential(beta, alpha):
    r"""Q_α(β) = Σ_i α_i² q(β_i / α_i²), the implicit regulariser of the diagonal network.

    Parameters
    ----------
    beta : (D,) array_like
    alpha : float or (D,) array_like, > 0
        Initial weight w₊(0) = w₋(0) = α (Woodworth et al. 2020).

    Returns
    -------
    float
    """
    beta = as_float_array(beta, "beta", ndim=1)
    alpha = check_positive(alpha, "alpha", ndim=(0, 1))
    # α² q(β/α²) = β asinh(β/(2α²)) − |β| (|β| / (2α² + hypot(2α², β))), written so that
    # neither α² nor β² is needed as a finite number: asinh of an overflowing argument
    # is log(|β|/α²) = log|β| − 2 log α to rounding (the next term is O(α⁴/β²))
    b = np.abs(beta)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        a2 = alpha * alpha
        x = b / (2.0 * a2)
        ash = np.where(np.isfinite(x), np.arcsinh(x), np.log(b) - 2.0 * np.log(alpha))
        terms = np.where(b == 0, 0.0, b * ash - b * (b / (2.0 * a2 + np.hypot(2.0 * a2, b))))
        return float(np.sum(terms))


def diagonal_implicit_bias(X, y, alpha, tol=1e-13):
    r"""The limit of gradient flow of a diagonal linear network: argmin Q_α(β) s.t. Xβ = y.

    .. math::  \beta_\infty = 2\alpha^2 \sinh(X^\top\nu^*), \qquad
               \nu^* = \arg\min_\nu\; 2\alpha^2 \textstyle\sum_i \cosh((X^\top\nu)_i) - y^\top\nu ,

    with Q_α(β) = Σ α² q(β_i/α²), q(z) = 2 − √(4+z²) + z asinh(z/2) (Woodworth et
    al. 2020, Thm 1; init w₊(0) = w₋(0) = α).  Large α: the minimum-ℓ² interpolant;
    small α: the minimum-ℓ¹ one.

    Parameters
    ----------
    X : (P, D) array_like
        Inputs, full row rank (P ≤ D, the interpolation regime).
    y : (P,) array_like
        Targets.
    alpha : float or (D,) array_like, > 0
        Initial weight of both layers (per coordinate if an array).
    tol : float > 0
        Relative residual ‖Xβ − y‖ / ‖y‖ at which Newton stops.

    Returns
    -------
    beta : (D,) ndarray

    Raises
    ------
    ValueError
        X without full row rank, shapes that do not match, alpha ≤ 0, or no
        convergence (the message says how far it got).
    """
    X = check_matrix(X, "X")
    P, D = X.shape
    if P < 1:
        raise ValueError("X must hold at least one sample (P >= 1 rows), got P = 0")
    y = as_float_array(y, "y", ndim=1)
    if y.shape != (P,):
        raise ValueError(f"y must have shape ({P},), got {y.shape}")
    a2 = check_positive(alpha, "alpha", ndim=(0, 1)) ** 2
    if a2.ndim == 1 and a2.shape != (D,):
        raise ValueError(f"alpha must be a scalar or have shape ({D},), got {a2.shape}")
    a2 = np.broadcast_to(a2, (D,))
    tol = float(check_positive(tol, "tol", ndim=0))
    sv = np.linalg.svd(X, compute_uv=False)
    if P > D or sv[-1] <= max(P, D) * np.finfo(float).eps * sv[0]:
        raise ValueError("X must have full row rank (P <= D, rows independent)")
    ymax = float(np.max(np.abs(y)))
    if ymax == 0:
        return np.zeros(D)
    with np.errstate(over="ignore"):
        ynorm = ymax * float(np.linalg.norm(y / ymax))   # +inf only beyond the float range
    if not np.isfinite(ynorm):
        raise ValueError("y overflows: its norm exceeds the float64 range")

    def phi(nu):
        z = X.T @ nu
        with np.errstate(over="ignore"):
            return 2.0 * np.sum(a2 * np.cosh(z)) - y @ nu

    with np.errstate(over="ignore", invalid="ignore"):
        try:
            return _newton(X, y, a2, tol, ynorm, phi)
        except np.linalg.LinAlgError:
            raise ValueError("X, y, alpha: the Newton system of the implicit bias is singular in "
                             "float64 (alpha or X too small for its Hessian 2 alpha^2 X cosh X^T)") from None


def _newton(X, y, a2, tol, ynorm, phi):
    P = X.shape[0]
    nu = np.zeros(P)
    f = phi(nu)
    for _ in range(MAX_NEWTON):
        z = X.T @ nu
        beta = 2.0 * a2 * np.sinh(z)
        g = X @ beta - y
        if np.linalg.norm(g) <= tol * ynorm:
            return beta
        H = (X * (2.0 * a2 * np.cosh(z))) @ X.T
        step = np.linalg.solve(H, g)
        dec = g @ step                     # the Newton decrement squared (> 0)
        gnorm = float(np.linalg.norm(g))
        s = 1.0
        for _h in range(MAX_HALVINGS):
            trial = nu - s * step
            f_new = phi(trial)
            if np.isfinite(f_new) and f_new <= f - 0.25 * s * dec:
                break
            # near the optimum the decrease of Phi drowns in its rounding (|Phi| eps):
            # accept a step that reduces the residual instead
            with np.errstate(over="ignore", invalid="ignore"):
                g_new = X @ (2.0 * a2 * np.sinh(X.T @ trial)) - y
            if np.all(np.isfinite(g_new)) and np.linalg.norm(g_new) <= (1.0 - 0.25 * s) * gnorm:
                break
            s *= 0.5
        else:
            break
        nu = trial
        f = f_new
    beta = 2.0 * a2 * np.sinh(X.T @ nu)
    res = np.linalg.norm(X @ beta - y) / ynorm
    if res <= 1e3 * tol:
        return beta
    raise ValueError(f"diagonal_implicit_bias (X, y, alpha): Newton did not converge (relative residual "
                     f"{res:.3g}); alpha may be too small or y too large for float64 (|X^T nu| ~ "
                     "log(|beta|/alpha^2) must stay below ~700)")
