r"""Kernel regression and kernel–target alignment.

Kernel regression with the final NTK is what a network trained from small
initialisation on whitened data computes (the silent-alignment effect,
Atanasov, Bordelon & Pehlevan 2022, Sec. 2 and App. B, G); the kernel–target
alignment measures how much of the kernel points along the task.  Derivation and
sympy checks: ``theory/kernel_regression.md``.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg

from .. import _threads
from .._validation import as_float_array, check_matrix, check_nonnegative, ldexp_safe, pow2_normalise

__all__ = ['kernel_regression', 'kernel_alignment']

# ‖K − Kᵀ‖_F above SYMMETRY_RTOL·‖K‖_F: K_train is not symmetric.
SYMMETRY_RTOL = 1e-10
# an eigenvalue below −PSD_RTOL·max|λ|: K_train is not positive semidefinite.
PSD_RTOL = 1e-8
# smallest eigenvalue of K + ridge·I at or below SINGULAR_FACTOR·P·eps·max λ: singular
# (the rank tolerance of numpy.linalg.matrix_rank).
SINGULAR_FACTOR = 1.0


def kernel_regression(K_train, K_test_train, Y, ridge=0.0):
    r"""Kernel (ridge) regression predictions f = K_test_train (K_train + ridge·I)⁻¹ Y.

    .. math::

        f(x) = \sum_{\mu\nu} K(x, x^\mu)\,[(K + \lambda I)^{-1}]_{\mu\nu}\, y^\nu ,

    computed by a Cholesky solve, never by forming the inverse.  With ridge = 0 it
    is the kernel interpolant (minimum-RKHS-norm interpolator); as ridge → 0⁺ it
    tends to K_test_train K_train⁺ Y for a singular K_train, but a singular system
    without a ridge is an error rather than a silent pseudo-inverse.

    Parameters
    ----------
    K_train : (P, P) array_like
        Kernel on the training inputs; symmetric (relative Frobenius asymmetry
        <= 1e-10, then symmetrised) and positive semidefinite (eigenvalues
        >= −1e-8·max|λ|).
    K_test_train : (Q, P) array_like
        Kernel between test and training inputs.
    Y : (P,) or (P, C) array_like
        Training targets.
    ridge : float >= 0, optional
        Ridge λ added to the diagonal of K_train.

    Returns
    -------
    f : (Q,) or (Q, C) ndarray of float64
        Predictions at the test inputs (same trailing shape as Y).

    Raises
    ------
    ValueError
        For mismatched shapes, non-finite entries, a non-symmetric or indefinite
        K_train, ridge < 0, or a K_train + ridge·I that is singular to working
        precision (smallest eigenvalue <= P·eps·largest).

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), Eq. (2), App. B and G.
    Derivation: ``theory/kernel_regression.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]]); y = np.array([2.0, -1.0])
    >>> ln.kernel_regression(X @ X.T, np.array([[3.0, 1.0]]) @ X.T, y)
    array([5.])
    """
    K = check_matrix(K_train, "K_train")
    Kt = check_matrix(K_test_train, "K_test_train")
    Y = as_float_array(Y, "Y", ndim=(1, 2))
    ridge = check_nonnegative(ridge, "ridge")
    if ridge.ndim != 0:
        raise ValueError(f"ridge must be a scalar, got shape {ridge.shape}")
    P = K.shape[0]
    if K.shape != (P, P) or P == 0:
        raise ValueError(f"K_train must be a non-empty square (P, P) matrix, got shape {K.shape}")
    if Kt.shape[1] != P:
        raise ValueError(f"K_test_train must have P = {P} columns (one per training point), "
                         f"got shape {Kt.shape}")
    if Y.shape[0] != P:
        raise ValueError(f"Y must have P = {P} rows (one per training point), got shape {Y.shape}")
    # f is homogeneous of degree 1 in K_test_train and Y and -1 in (K_train, ridge): solve at
    # unit scale (exact powers of two) and put the scale back on at the end, so that nothing
    # overflows on the way (docs/conventions.md, "Bad input and overflow")
    (K, ek), (Kt, et), (Y, ey) = pow2_normalise(K), pow2_normalise(Kt), pow2_normalise(Y)
    ridge = ldexp_safe(ridge, -ek)
    if not np.isfinite(ridge):
        raise ValueError("ridge overflows relative to K_train (ridge / max|K_train| exceeds "
                         "the float64 range)")
    norm = np.linalg.norm(K)
    if np.linalg.norm(K - K.T) > SYMMETRY_RTOL * norm:
        raise ValueError("K_train must be symmetric")
    K = 0.5 * (K + K.T)
    with _threads.limited(P ** 3):     # BLAS threads for this size (eigvalsh, Cholesky)
        eig = np.linalg.eigvalsh(K)
    scale = max(np.max(np.abs(eig)), float(ridge))
    if eig[0] < -PSD_RTOL * scale:
        raise ValueError(f"K_train must be positive semidefinite, smallest eigenvalue "
                         f"{float(ldexp_safe(eig[0], ek))!r}")
    shifted = eig + float(ridge)
    if not shifted[0] > SINGULAR_FACTOR * P * np.finfo(np.float64).eps * shifted[-1]:
        if ridge > 0:
            msg = "K_train + ridge*I is singular to working precision; increase ridge"
        else:
            msg = "K_train is singular to working precision; pass ridge > 0"
        raise ValueError(msg)
    A = K + float(ridge) * np.eye(P)
    try:
        with _threads.limited(P ** 3):
            factor = scipy.linalg.cho_factor(A, lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:   # eigenvalues passed but pivots broke down
        raise ValueError("K_train + ridge*I is numerically singular; increase ridge") from exc
    alpha = scipy.linalg.cho_solve(factor, Y, check_finite=False)
    alpha, ea = pow2_normalise(alpha)
    return np.ascontiguousarray(ldexp_safe(Kt @ alpha, et + ey + ea - ek), dtype=np.float64)


def kernel_alignment(K, y):
    r"""Kernel–target alignment ⟨K, yyᵀ⟩_F / (‖K‖_F ‖yyᵀ‖_F) = yᵀKy / (‖K‖_F ‖y‖²).

    Generalisations (all reduce to the scalar formula for one output):

    * Y of shape (P, C) with K (P, P): ⟨K, YYᵀ⟩_F / (‖K‖_F ‖YYᵀ‖_F), i.e. yyᵀ → YYᵀ
      (the alignment of a kernel shared by all outputs with the target Gram matrix).
    * Y of shape (P, C) with a multi-output K (P, P, C, C), as returned by
      :func:`~linearnets.final_ntk_multi`: Σ K[μ,ν,i,j] Y[μ,i] Y[ν,j] /
      (‖K‖_F ‖Y‖_F²), the alignment with the rank-one target y yᵀ of the flattened
      (P·C) problem.

    By Cauchy–Schwarz the value lies in [−1, 1], and in [0, 1] for a positive
    semidefinite K.  It is invariant under K → aK and y → by (a, b > 0) also in
    floating point: K and y are divided by their largest entries first, so that
    any finite non-zero scale works (1e160·I and 1e-170·I give the value of I).

    Parameters
    ----------
    K : (P, P) or (P, P, C, C) array_like
        Kernel Gram matrix on the inputs.
    y : (P,) or (P, C) array_like
        Targets.

    Returns
    -------
    A : 0-d ndarray of float64

    Raises
    ------
    ValueError
        For mismatched shapes, non-finite entries, K = 0 or y = 0 (undefined).

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), Sec. 4.1, App. E.2 (kernel
    alignment of the final NTK); definition of Cristianini et al. (2001).

    Examples
    --------
    >>> import linearnets as ln
    >>> float(ln.kernel_alignment(np.eye(4), np.ones(4)))
    0.5
    """
    K = as_float_array(K, "K", ndim=(2, 4))
    y = as_float_array(y, "y", ndim=(1, 2))
    P = y.shape[0]
    # scale-free: normalise K and y by their largest entries first, so that neither the
    # squares nor the products overflow or underflow (1e160 I and 1e-170 I give I's value)
    kmax = np.max(np.abs(K)) if K.size else 0.0
    ymax = np.max(np.abs(y)) if y.size else 0.0
    if not kmax > 0:
        raise ValueError("K must be non-zero (alignment is undefined)")
    if not ymax > 0:
        raise ValueError("y must be non-zero (alignment is undefined)")
    K = K / kmax
    y = y / ymax
    if K.ndim == 4:
        if y.ndim == 1:
            y = y[:, None]
        C = y.shape[1]
        if K.shape != (P, P, C, C):
            raise ValueError(f"a multi-output K must have shape (P, P, C, C) = {(P, P, C, C)} "
                             f"for y of shape {y.shape}, got {K.shape}")
        num = np.einsum("mnij,mi,nj->", K, y, y)
        ynorm2 = np.sum(y * y)
        denom_y = ynorm2
    else:
        if K.shape != (P, P):
            raise ValueError(f"K must have shape (P, P) = {(P, P)} for y of shape {y.shape}, "
                             f"got {K.shape}")
        Y = y[:, None] if y.ndim == 1 else y
        G = Y @ Y.T
        num = np.sum(K * G)
        ynorm2 = np.sum(Y * Y)
        denom_y = np.linalg.norm(G)
    knorm = np.linalg.norm(K)
    if not knorm > 0:
        raise ValueError("K must be non-zero (alignment is undefined)")
    if not ynorm2 > 0:
        raise ValueError("y must be non-zero (alignment is undefined)")
    return np.array(num / knorm / denom_y, dtype=np.float64)
