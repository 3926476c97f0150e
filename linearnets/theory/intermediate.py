"""Intermediate-layer kernels of a deep linear network trained from small initialisation.

The representation after layer l is h_l(x) = W_l ⋯ W_1 x and its kernel is
K_l(x, x') = h_l(x)·h_l(x').  At convergence from small initialisation on whitened
data the network is balanced and aligned, W_l = R_l S^{1/L} R_{l−1}ᵀ with
R_0 = V and R_L = U from Σyx = U S Vᵀ, so that

    K_l(x, x') = xᵀ V S^{2l/L} Vᵀ x' = xᵀ (Σyxᵀ Σyx)^{l/L} x'     (1 <= l <= L),

and K_0(x, x') = x·x'.  Derivation: ``theory/intermediate.md``.
"""
from __future__ import annotations

import numpy as np

from .._validation import (as_float_array, check_depth, check_int, check_matrix, ldexp_safe,
                           pow2_normalise, pow2_power)
from .multimode import task_modes

__all__ = ["intermediate_kernel", "intermediate_feature_matrix", "intermediate_alignment"]


def _check_syx(Syx):
    Syx = as_float_array(Syx, "Syx", ndim=(1, 2))
    if Syx.ndim == 1:
        Syx = Syx[None, :]
    if Syx.shape[0] < 1 or Syx.shape[1] < 1:
        raise ValueError(f"Syx must be non-empty, got shape {Syx.shape}")
    return np.ascontiguousarray(Syx)


def _check_layer(layer, depth):
    layer_arr = np.asarray(layer)
    if layer_arr.dtype == bool or not np.issubdtype(layer_arr.dtype, np.number):
        raise ValueError(f"layer must be an integer in [0, depth], got {layer!r}")
    lf = as_float_array(layer_arr, "layer")
    if np.any(lf != np.round(lf)) or np.any(lf < 0) or np.any(lf > depth):
        raise ValueError(f"layer must be an integer in [0, {depth}], got {layer!r}")
    return lf


def intermediate_feature_matrix(Syx, depth, layer, *, rcond=None):
    """D×D matrix F_l with K_l(x, x') = xᵀ F_l x': F_l = V S^{2l/L} Vᵀ, F_0 = I.

    Parameters
    ----------
    Syx : (C, D) or (D,) array_like
        Input-output covariance of whitened data, Σyx = U S Vᵀ (the learned map).
    depth : int
        Network depth L >= 1.
    layer : int
        Layer index 0 <= l <= L (0 is the input).
    rcond : float in [0, 1), optional
        Numerical-rank tolerance of Σyx: singular values ``<= rcond · s_max``
        are zero (default ``max(C, D) · eps``, the rule of
        :func:`linearnets.task_modes`); otherwise a rounding-level singular value
        would enter as s^{2l/L}.

    Returns
    -------
    (D, D) ndarray

    Notes
    -----
    Domain: whitened inputs (Σxx = I), σ → 0, t → ∞.  Source: Atanasov, Bordelon &
    Pehlevan (2022), app. E.3 (stated there on the training set only, as
    (y yᵀ)^{l/L}).

    Examples
    --------
    >>> intermediate_feature_matrix([[2.0, 0.0]], depth=2, layer=1)
    array([[2., 0.],
           [0., 0.]])
    """
    F, e = _feature_scaled(Syx, depth, layer, rcond)
    return ldexp_safe(F, e)


def _feature_scaled(Syx, depth, layer, rcond):
    """``(F, e)`` with the feature matrix ``F 2**e``: ``V S^{2l/L} V^T`` with the scale of
    S taken out exactly (``S = S~ 2^k``, ``S^p = S~^p 2^{kp}``), so that neither this nor a
    kernel built on it overflows on the way (docs/conventions.md, "Bad input and overflow")."""
    Syx = _check_syx(Syx)
    L = check_depth(depth)
    lf = _check_layer(layer, L)
    if lf.ndim != 0:
        raise ValueError("layer must be a single integer here")
    D = Syx.shape[1]
    if lf == 0:
        return np.eye(D), 0
    if not np.any(Syx != 0):
        return np.zeros((D, D)), 0
    S, _, V = task_modes(Syx, rcond=rcond)
    S, k = pow2_normalise(S)
    mant, e = pow2_power(k, 2.0 * float(lf) / L)
    # S~^{2l/L} via logs: no underflow of S~**2 for widely spread singular values
    return (V * (mant * np.exp((2.0 * lf / L) * np.log(S)))) @ V.T, int(e)


def intermediate_kernel(X1, X2, Syx, depth, layer, *, rcond=None):
    """Kernel of layer l of a trained deep linear network, K_l(x, x') = xᵀ V S^{2l/L} Vᵀ x'.

    For 1 <= l <= L,  K_l(x, x') = xᵀ (Σyxᵀ Σyx)^{l/L} x'; K_0(x, x') = x·x'.
    On a whitened training set (XᵀX = P I) this is
    K_l(X, X) = P^{1−l/L} (Y Yᵀ)^{l/L}: the paper's (y yᵀ)^{l/L} up to the
    factor P^{1−l/L}.  K_L(x, x') = f(x)·f(x') for the learned f.

    Parameters
    ----------
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
    Syx : (C, D) or (D,) array_like
        Σyx of whitened training data (C outputs).
    depth : int
        Depth L >= 1.
    layer : int
        0 <= layer <= depth.
    rcond : float in [0, 1), optional
        Numerical-rank tolerance (see :func:`intermediate_feature_matrix`).

    Returns
    -------
    (P1, P2) ndarray

    Notes
    -----
    Domain: whitened training inputs, small initialisation σ → 0, converged
    (t → ∞); corrections are O(σ²).  Source: Atanasov, Bordelon & Pehlevan
    (2022), app. E.3; derivation ``theory/intermediate.md``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(2)
    >>> intermediate_kernel(X, X, [[4.0, 0.0]], depth=2, layer=1)
    array([[4., 0.],
           [0., 0.]])
    """
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2")
    F, e = _feature_scaled(Syx, depth, layer, rcond)
    D = F.shape[0]
    if X1.shape[1] != D or X2.shape[1] != D:
        raise ValueError(f"X1 and X2 must have {D} columns to match Syx, got {X1.shape}, {X2.shape}")
    (X1, e1), (X2, e2) = pow2_normalise(X1), pow2_normalise(X2)
    return ldexp_safe(X1 @ F @ X2.T, e + e1 + e2)


def intermediate_alignment(singular_values, depth, layer, n=None):
    """Kernel–target alignment of layer l's kernel on a whitened training set.

    With A(K, Y) = ⟨K, Y Yᵀ⟩_F / (‖K‖_F ‖Y Yᵀ‖_F) (for one output
    yᵀKy / (‖K‖_F ‖y‖²)) and p = l/L::

        A_l = Σ_α s_α^{2+2p} / sqrt(Σ_α s_α^{4p} · Σ_α s_α^4),   1 <= l <= L,
        A_0 = Σ_α s_α² / sqrt(n Σ_α s_α^4),                      n = rank X = min(P, D).

    It depends on l and L only through l/L, is non-decreasing in l and equals 1 at
    l = L; with one output (or equal s_α) A_l = 1 for every l >= 1.

    Parameters
    ----------
    singular_values : (r,) array_like
        The nonzero singular values s_α of Σyx (all > 0).
    depth : int
        Depth L >= 1.
    layer : int or array_like of int
        0 <= layer <= depth; broadcasts.
    n : int, optional
        Rank of the training inputs, needed only for layer 0 (n >= r).

    Returns
    -------
    ndarray, shape of ``layer``

    Notes
    -----
    Domain as :func:`intermediate_kernel`.  Source: Atanasov, Bordelon & Pehlevan
    (2022), app. E.3 (kernels); the alignment formula is derived in
    ``theory/intermediate.md``.

    Examples
    --------
    >>> import numpy as np
    >>> np.round(intermediate_alignment([1.0, 2.0], depth=4, layer=[1, 2, 4]), 6)
    array([0.932146, 0.976187, 1.      ])
    """
    s = as_float_array(singular_values, "singular_values", ndim=1)
    if s.size == 0 or np.any(~(s > 0)):
        raise ValueError("singular_values must be a non-empty array of values > 0")
    L = check_depth(depth)
    lf = _check_layer(layer, L)
    if n is not None:
        n = check_int(n, "n", minimum=s.size)   # at least len(singular_values)
    # normalise by s_max: the alignment is scale-free and this avoids overflow
    s = s / np.max(s)
    p = (lf / L)[..., None]
    num = np.sum(s ** (2.0 + 2.0 * p), axis=-1)
    den = np.sqrt(np.sum(s ** (4.0 * p), axis=-1) * np.sum(s ** 4))
    out = num / den
    if np.any(lf == 0):
        if n is None:
            raise ValueError("n (the rank of the training inputs) is required for layer 0")
        a0 = np.sum(s ** 2) / np.sqrt(float(n) * np.sum(s ** 4))
        out = np.where(lf == 0, a0, out)
    return np.asarray(np.minimum(out, 1.0), dtype=np.float64)
