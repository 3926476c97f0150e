r"""The lazy (linearised) limit of a network trained by gradient flow on the mse loss.

A model F(x; θ) trained on L(θ) = (1/(α² P)) Σ_μ ½‖y_μ − F(x_μ; θ)‖² with
dθ/dt = −η ∂L/∂θ moves its outputs by

.. math::  \frac{dF(x)}{dt} = \frac{\eta}{\alpha^2 P} \sum_\mu K(x, x_\mu)\,(y_\mu - F(x_\mu)),

with K the NTK of F (no 1/P, no η; docs/conventions.md).  Freezing K at its value at t = 0
(the lazy limit: Jacot et al. 2018; Lee et al. 2019; Chizat, Oyallon & Bach 2019)
makes this linear, with the exact solution, τ = η t / (α² P),

.. math::

    F_t(X) = Y + e^{-K\tau}(F_0(X) - Y), \qquad
    F_t(x) = F_0(x) + K(x, X)\, K^{-1}(I - e^{-K\tau})\,(Y - F_0(X)).

On the eigenbasis K = V diag(λ) Vᵀ the operator K⁻¹(I − e^{−Kτ}) is
V diag(τ φ(λτ)) Vᵀ with φ(z) = −expm1(−z)/z, φ(0) = 1: finite for a singular K
(on its null space the test outputs move linearly in τ, the exact solution of the
linear ODE) and for any finite t.  Derivation and sympy checks:
``theory/lazy_prediction.md``.
"""
from __future__ import annotations

import numpy as np

from .. import _threads
from .._validation import as_float_array, check_nonnegative, check_positive, ldexp_safe, pow2_normalise

__all__ = ["lazy_prediction"]

#: ‖K − Kᵀ‖_F above SYMMETRY_RTOL·‖K‖_F: K_train is not symmetric.
SYMMETRY_RTOL = 1e-10
#: An eigenvalue below −PSD_RTOL·max|λ|: K_train is not positive semidefinite.
PSD_RTOL = 1e-8
#: Eigenvalues with |λ| ≤ NULL_FACTOR·n·eps·max|λ| (n the matrix size) are the null
#: space of K (the rank tolerance of ``numpy.linalg.matrix_rank``): there the factor is τ.
NULL_FACTOR = 1.0

def _flatten_kernel(K, name, P1=None):
    """(P1, P2) or (P1, P2, C, C) -> (P1 C, P2 C) sample-major, and C."""
    K = as_float_array(K, name, ndim=(2, 4))
    if K.ndim == 2:
        return K, 1
    P1_, P2_, C1, C2 = K.shape
    if C1 != C2:
        raise ValueError(f"{name} must have shape (P1, P2, C, C), got {K.shape}")
    return K.transpose(0, 2, 1, 3).reshape(P1_ * C1, P2_ * C1), C1


def _f0(F0, n, C, name):
    """F at the start on n points: (n, C), zeros when None."""
    if F0 is None:
        return np.zeros((n, C))
    F0 = as_float_array(F0, name, ndim=(1, 2))
    F0 = F0.reshape(len(F0), -1)
    if F0.shape != (n, C):
        raise ValueError(f"{name} must have shape ({n},) or ({n}, {C}), got {F0.shape}")
    return F0


def _eigen_setup(K_train, Y, F0_train):
    """The checked training inputs of a linearised model and K's eigendecomposition.

    Returns ``(lam, V, ek, Y2, F0, P, C)``: the eigenvalues of K_train 2^-ek (0 on its
    null space, >= 0), its eigenvectors, the exact power-of-two scale ek, the targets
    and starting outputs as (P, C), P and C (also for :mod:`.discrete`).
    """
    Kf, C = _flatten_kernel(K_train, "K_train")
    P = Kf.shape[0] // C
    if Kf.shape != (P * C, P * C):
        raise ValueError(f"K_train must be square, got shape {np.shape(K_train)}")
    Y = as_float_array(Y, "Y", ndim=(1, 2))
    Y2 = Y.reshape(len(Y), -1) if len(Y) == P else Y
    if Y2.shape != (P, C):
        raise ValueError(f"Y must have shape ({P},) or ({P}, {C}) to match K_train, got {Y.shape}")
    F0 = _f0(F0_train, P, C, "F0_train")
    # K_train enters through K tau (or lr K) only: take its scale 2^ek out exactly (and put it on
    # tau in the products below), so that no norm or product overflows on the way
    Kf, ek = pow2_normalise(Kf)
    norm = np.linalg.norm(Kf)
    if np.linalg.norm(Kf - Kf.T) > SYMMETRY_RTOL * norm:
        raise ValueError("K_train must be symmetric")
    Kf = 0.5 * (Kf + Kf.T)
    with _threads.limited(Kf.shape[0] ** 3):     # BLAS threads for this size
        lam, V = np.linalg.eigh(Kf)
    lmax = float(np.max(np.abs(lam))) if lam.size else 0.0
    if lam.size and lam[0] < -PSD_RTOL * lmax:
        raise ValueError(f"K_train must be positive semidefinite (smallest eigenvalue {lam[0]:.3g})")
    lam = np.where(np.abs(lam) <= NULL_FACTOR * Kf.shape[0] * np.finfo(float).eps * lmax, 0.0, lam)
    lam = np.maximum(lam, 0.0)
    return lam, V, ek, Y2, F0, P, C


def _test_setup(K_test_train, F0_test, P, C):
    """The checked test kernel, flattened (Q C, P C), F at the start on the test points
    (Q, C) and Q."""
    Kq, Cq = _flatten_kernel(K_test_train, "K_test_train")
    if Cq != C or Kq.shape[1] != P * C:
        raise ValueError(f"K_test_train must have shape (Q, {P})" + ("" if C == 1 else f" + ({C}, {C})")
                         + f" to match K_train, got {np.shape(K_test_train)}")
    Q = Kq.shape[0] // C
    return Kq, _f0(F0_test, Q, C, "F0_test"), Q


def lazy_prediction(t, K_train, K_test_train, Y, F0_train=None, F0_test=None, eta=1.0, alpha=1.0):
    r"""Outputs of the linearised (lazy-limit) model along gradient flow, on training and test points.

    With τ = η t / (α² P) and K the NTK of F at t = 0,

    .. math::

        F_t(X) = Y + e^{-K\tau}(F_0(X) - Y), \qquad
        F_t(x) = F_0(x) + K(x, X) K^{-1}(I - e^{-K\tau})(Y - F_0(X)),

    the exact solution of dF/dt = (η/(α²P)) K (Y − F) for the package's loss
    L = (1/(α²P)) Σ ½‖y − F‖² (Lee et al. 2019, eq. 9 with their 1/P-normalised
    loss; Chizat, Oyallon & Bach 2019).  One eigendecomposition of K serves every
    time.  On K's null space K⁻¹(I − e^{−Kτ}) → τ (the t-linear solution), so a
    singular K and any finite t give finite outputs.  Derivation:
    ``theory/lazy_prediction.md``.

    Parameters
    ----------
    t : float or (T,) array_like
        Times since initialisation, ≥ 0 (a scalar is T = 1).
    K_train : (P, P) or (P, P, C, C) array_like
        NTK of F on the training inputs (``ln.empirical_ntk`` layout); C outputs are
        flattened sample-major (row μ·C + i).  Symmetric (relative Frobenius
        asymmetry ≤ 1e-10, then symmetrised), positive semidefinite (eigenvalues
        ≥ −1e-8·max|λ|; eigenvalues within P·C·eps·max|λ| of 0 are its null space).
    K_test_train : (Q, P) or (Q, P, C, C) array_like or None
        NTK between test and training inputs.  None: no test outputs (the second
        returned value is None).
    Y : (P,) or (P, C) array_like
        Training targets.
    F0_train : (P,) or (P, C) array_like, optional
        F at t = 0 on the training inputs (default 0: a centered network).
    F0_test : (Q,) or (Q, C) array_like, optional
        F at t = 0 on the test inputs (default 0).
    eta : float > 0
        Learning rate.
    alpha : float > 0
        Output scale α of the loss normalisation 1/(α²P).

    Returns
    -------
    F_train : (T, P, C) ndarray of float64
        Training outputs (C = 1 for one output).
    F_test : (T, Q, C) ndarray of float64 or None
        Test outputs; None when ``K_test_train`` is None.

    Raises
    ------
    ValueError
        Negative or non-finite times, mismatched shapes, a non-symmetric or
        indefinite ``K_train``, ``eta`` or ``alpha`` ≤ 0.
    """
    t = check_nonnegative(t, "t", ndim=(0, 1))
    t = np.atleast_1d(t)
    eta = float(check_positive(eta, "eta", ndim=0))
    alpha = float(check_positive(alpha, "alpha", ndim=0))
    lam, V, ek, Y2, F0, P, C = _eigen_setup(K_train, Y, F0_train)
    with np.errstate(over="ignore"):
        tau = eta * t / (alpha ** 2 * P)                   # (T,), +inf beyond the range
    with np.errstate(invalid="ignore"):
        z = np.where(lam[None, :] > 0, ldexp_safe(tau[:, None] * lam[None, :], ek), 0.0)   # (T, n)
    r0 = V.T @ (Y2 - F0).reshape(-1)                       # residual Y - F0 in the eigenbasis
    # training: F_t = Y - V e^{-lam tau} V^T (Y - F0)
    Ftr = Y2.reshape(-1)[None, :] - (np.exp(-z) * r0[None, :]) @ V.T
    Ftr = Ftr.reshape(len(t), P, C)
    if K_test_train is None:
        return Ftr, None
    Kq, F0q, Q = _test_setup(K_test_train, F0_test, P, C)
    # test: F_t(x) = F0(x) + K(x,X) V diag(tau phi(lam tau)) V^T (Y - F0), where
    # tau phi(lam tau) = (1 - e^{-z}) / lam (tau where lam = 0: the t-linear null space);
    # K(x, X) and the coefficients at unit scale, their scales back on at the end
    with np.errstate(over="ignore", invalid="ignore"):
        coeff = np.where(lam[None, :] > 0, -np.expm1(-z) / np.where(lam > 0, lam, 1.0)[None, :],
                         ldexp_safe(tau[:, None], ek)) * r0[None, :]              # (T, n) x 2^-ek
        coeff = np.where(r0[None, :] == 0, 0.0, coeff)                           # inf * 0
    (Kq, eq), (coeff, ec) = pow2_normalise(Kq), pow2_normalise(coeff)
    Fte = F0q.reshape(-1)[None, :] + ldexp_safe((coeff @ V.T) @ Kq.T, eq + ec - ek)
    return Ftr, Fte.reshape(len(t), Q, C)
