"""Data helpers: whitened inputs, teacher tasks, partial whitening, sufficient statistics.

Conventions (docs/conventions.md): ``X`` (P, D) with samples as rows, ``Y`` (P, C) or (P,);
``Sxx = X^T X / P`` (D, D), ``Syx = Y^T X / P`` (C, D).  All draws use a
``numpy.random.Generator`` seeded by ``seed``, so results are reproducible.
"""
from __future__ import annotations

import numpy as np

from ._validation import (as_float_array, check_int, check_matrix, check_nonnegative, ldexp_safe,
                          pow2_normalise, rng_from_seed)

__all__ = [
    "whitened_inputs",
    "teacher_task",
    "scalar_teacher",
    "partially_whitened",
    "sufficient_statistics",
]


def _count(x, name, minimum=1):
    return check_int(x, name, minimum=minimum)


def _orthonormal_columns(rng, n, k):
    """An (n, k) matrix with orthonormal columns, Haar-distributed (QR with sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((n, k)))
    return q * np.sign(np.where(np.diag(r) == 0, 1.0, np.diag(r)))


def whitened_inputs(P, D, seed=0):
    """Inputs whose empirical covariance is exactly the identity.

    Parameters
    ----------
    P, D : int
        Number of samples and input dimension, ``P >= D``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)

    Returns
    -------
    X : ndarray, shape (P, D)
        ``X^T X / P = I_D`` to rounding: ``X = sqrt(P) Q`` with Q the orthonormal
        factor of a Gaussian (P, D) matrix.

    Examples
    --------
    >>> X = whitened_inputs(50, 5)
    >>> bool(np.allclose(X.T @ X / 50, np.eye(5)))
    True
    """
    P = _count(P, "P")
    D = _count(D, "D")
    if P < D:
        raise ValueError(f"whitened inputs need P >= D, got P={P}, D={D}")
    rng = rng_from_seed(seed)
    return np.sqrt(P) * _orthonormal_columns(rng, P, D)


def _inputs(rng, P, D, whiten):
    if whiten:
        if P < D:
            raise ValueError(f"whitened inputs need P >= D, got P={P}, D={D}")
        return np.sqrt(P) * _orthonormal_columns(rng, P, D)
    return rng.standard_normal((P, D))


def teacher_task(P, D, singular_values, seed=0, whiten=True):
    """A linear teacher ``Y = X B^T`` with prescribed singular values.

    Parameters
    ----------
    P, D : int
    singular_values : array_like, shape (C,)
        Nonnegative; ``C = len(singular_values) <= D``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    whiten : bool
        If True, ``X`` is exactly whitened (``Syx = B``); otherwise i.i.d. N(0, 1).

    Returns
    -------
    X : ndarray, shape (P, D)
    Y : ndarray, shape (P, C)
        ``B = U diag(s) V^T`` with U (C, C) orthogonal and V (D, C) orthonormal
        columns, both random.

    Examples
    --------
    >>> X, Y = teacher_task(100, 4, [3.0, 1.0])
    >>> np.round(np.linalg.svd(Y.T @ X / 100, compute_uv=False), 12)
    array([3., 1.])
    """
    P = _count(P, "P")
    D = _count(D, "D")
    s = check_nonnegative(singular_values, "singular_values")
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty 1-D array, got shape {s.shape}")
    C = s.size
    if C > D:
        raise ValueError(f"need len(singular_values) <= D, got {C} > {D}")
    rng = rng_from_seed(seed)
    X = _inputs(rng, P, D, whiten)
    U = _orthonormal_columns(rng, C, C)
    V = _orthonormal_columns(rng, D, C)
    B = (U * s) @ V.T
    return X, X @ B.T


def scalar_teacher(P, D, s, seed=0, whiten=True):
    """Scalar-output teacher ``y = s X beta`` with a random unit vector beta.

    Parameters
    ----------
    P, D : int
    s : float
        Teacher strength, ``s >= 0``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    whiten : bool

    Returns
    -------
    X : ndarray, shape (P, D)
    y : ndarray, shape (P,)
    beta : ndarray, shape (D,)
        ``|beta| = 1``; for whitened X, ``Syx = s beta^T``.

    Examples
    --------
    >>> X, y, beta = scalar_teacher(20, 3, 2.0)
    >>> bool(np.allclose(y @ X / 20, 2.0 * beta))
    True
    """
    P = _count(P, "P")
    D = _count(D, "D")
    s = float(check_nonnegative(s, "s", ndim=0))
    rng = rng_from_seed(seed)
    X = _inputs(rng, P, D, whiten)
    beta = rng.standard_normal(D)
    beta /= np.linalg.norm(beta)
    return X, s * (X @ beta), beta


def partially_whitened(X, gamma):
    """Partially whitened inputs ``X_gamma = U S^gamma V^T`` from the thin SVD ``X = U S V^T``.

    Parameters
    ----------
    X : array_like, shape (P, D)
    gamma : float
        ``gamma >= 0``; 0 gives ``U V^T`` (whitened up to the scale 1/P:
        ``X_0^T X_0 = I`` when P >= D), 1 gives X itself.  Singular values below
        ``max(P, D) eps s_max`` count as zero and stay zero for every gamma.

    Returns
    -------
    ndarray, shape (P, D)

    Examples
    --------
    >>> X = np.random.default_rng(0).standard_normal((10, 3))
    >>> bool(np.allclose(partially_whitened(X, 1.0), X))
    True
    """
    X = check_matrix(X, "X")
    gamma = float(check_nonnegative(gamma, "gamma", ndim=0))
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    # singular values at rounding level (below max(P, D) eps s_max, the rank rule of
    # task_modes) are zero and stay zero: 1e-15**0 would turn them into 1
    keep = S > (max(X.shape) * np.finfo(np.float64).eps * (S[0] if S.size else 0.0))
    with np.errstate(over="ignore", invalid="ignore"):
        Sg = np.where(keep, S, 1.0) ** gamma * keep
        out = (U * Sg) @ Vt
    if np.all(np.isfinite(out)):
        return out
    # S^gamma overflowed: S^gamma = s_max^gamma (S / s_max)^gamma with the scale
    # s_max^gamma = mant 2^n put on last, so the result is +-inf where it exceeds the float
    # range and exact elsewhere, never NaN (docs/conventions.md, "Bad input and overflow")
    Sg = np.where(keep, np.where(keep, S, 1.0) / S[0], 0.0) ** gamma
    with np.errstate(over="ignore"):
        ep = min(gamma * np.log2(S[0]), 2.0 ** 40)
    n = np.floor(ep)
    return ldexp_safe(np.exp2(ep - n) * ((U * Sg) @ Vt), int(n))


def sufficient_statistics(X, Y):
    """``(Sxx, Syx) = (X^T X / P, Y^T X / P)``.

    Parameters
    ----------
    X : array_like, shape (P, D)
        At least one sample (P >= 1; P = 0 is a ``ValueError`` naming X).
    Y : array_like, shape (P, C) or (P,)

    Returns
    -------
    Sxx : ndarray, shape (D, D)
    Syx : ndarray, shape (C, D)
        C = 1 when Y is 1-D.

    Examples
    --------
    >>> Sxx, Syx = sufficient_statistics(np.eye(2), np.array([1.0, 2.0]))
    >>> Syx
    array([[0.5, 1. ]])
    """
    X = check_matrix(X, "X")
    if X.shape[0] < 1:
        raise ValueError("X must hold at least one sample (P >= 1 rows), got P = 0")
    Y = as_float_array(Y, "Y", ndim=(1, 2))
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got {X.shape[0]} and "
                         f"{Y.shape[0]}")
    P = X.shape[0]
    # exact power-of-two scalings of X and Y, back on at the end: exact where
    # representable, +-inf beyond (docs/conventions.md, "Bad input and overflow")
    (Xs, ex), (Ys, ey) = pow2_normalise(X), pow2_normalise(Y)
    return ldexp_safe(Xs.T @ Xs / P, 2 * ex), ldexp_safe(Ys.T @ Xs / P, ex + ey)
