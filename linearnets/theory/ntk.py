r"""Final neural tangent kernel of deep linear networks trained from small initialisation.

Convention (docs/conventions.md): f(x) = W_L ⋯ W_1 x, and the NTK is
K_ij(x, x′) = Σ_l ⟨∂f_i(x)/∂W_l, ∂f_j(x′)/∂W_l⟩_F — no 1/P, no η.

Gradient flow from small initialisation σ conserves W_{l+1}ᵀW_{l+1} − W_l W_lᵀ,
which starts at O(σ²), so the converged network is balanced; a balanced network
with end-to-end map W* = U S Vᵀ (thin SVD, k = rank) has

    W_l = R_{l+1} S^{1/L} R_lᵀ,     R_1 = V,  R_{L+1} = U,

with R_l (N_{l−1} × k) orthonormal columns for 2 ≤ l ≤ L.  On whitened data
(Σxx = I) the network converges to W* = Σyx.  The NTK of that configuration is
independent of the hidden R_l and of the widths (N_l ≥ k):

    K(x, x′) = Σ_{l=1}^{L} A_l ⊗ x ᵀB_l x′,
    A_l = U S^{2(L−l)/L} Uᵀ (l < L),  A_L = I_C,
    B_l = V S^{2(l−1)/L} Vᵀ (l > 1),  B_1 = I_D,

because the partial products W_L⋯W_{l+1} and W_{l−1}⋯W_1 are empty — identities —
for the last and the first layer.  One output (C = 1, Σyx = s βᵀ):

    K(x, x′) = s^{2−2/L} [x·x′ + (L − 1)(β·x)(β·x′)].

The paper (Atanasov, Bordelon & Pehlevan 2022, Sec. 4.1, App. E.2) prints the
prefactor as s^{2L−2}; the balanced solution gives s^{2−2/L} (the product of the
L − 1 factors s^{2/L} from the other layers).  Derivation and sympy check:
``theory/final_ntk.md``, ``theory/final_alignment.md``.
"""
from __future__ import annotations

import numpy as np

from .._validation import (as_float_array, check_depth, check_int_array, check_matrix,
                           check_positive, check_unit_vector, ldexp_safe, pow2_normalise, pow2_power)
from .multimode import task_modes

__all__ = ['final_ntk', 'final_ntk_multi', 'final_alignment']


def _check_pair(X1, X2):
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2")
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(f"X1 and X2 must have the same number of columns (input dimension), "
                         f"got X1 {X1.shape} and X2 {X2.shape}")
    return X1, X2


def final_ntk(X1, X2, beta, s, depth):
    r"""Final NTK of a depth-L linear network with one output, trained to s β·x.

    .. math::

        K(x, x') = s^{2-2/L}\,\big[\,x\cdot x' + (L-1)\,(\beta\cdot x)(\beta\cdot x')\,\big].

    Exact for the balanced, aligned network W_l = r_{l+1} s^{1/L} r_lᵀ
    (r_1 = β, r_{L+1} = 1, unit r_l), which gradient flow from small initialisation
    σ reaches on whitened data (Σxx = I, P >= D) up to O(σ²).

    If P < D, whitened means Σxx = XᵀX/P is the orthogonal projector onto the data
    span.  Then s and β must be taken from the SVD of Σyx (Σyx = s βᵀ, β in the
    span: the normalised projection of the teacher, and s the teacher strength times
    the norm of that projection), not from the teacher.  The formula holds to O(σ²)
    for x, x′ in the data span, but only to O(σ) off it: the off-span part of W_1
    never receives a gradient and keeps its random initial value.

    Parameters
    ----------
    X1 : (P1, D) array_like
        First set of inputs (rows are samples).
    X2 : (P2, D) array_like
        Second set of inputs.
    beta : (D,) array_like
        Unit teacher direction; ‖β‖ must be 1 within 1e-6, the package's one rule
        for unit vectors (float32 unit vectors pass and are renormalised in
        float64; a non-unit β raises rather than being silently normalised, since
        s β would be a likely mix-up).
    s : float, s > 0
        Teacher strength (the singular value of Σyx).
    depth : int >= 1
        Number of layers L.

    Returns
    -------
    K : (P1, P2) ndarray of float64

    Raises
    ------
    ValueError
        For non-2-D or non-finite X1, X2, mismatched dimensions, ‖β‖ ≠ 1, s <= 0 or
        not a scalar, or depth not an integer >= 1.

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), Sec. 4.1 and App. E.2, where the
    prefactor is misprinted as s^{2L−2}.  Derivation: ``theory/final_ntk.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> X = np.eye(2)
    >>> ln.final_ntk(X, X, beta=[1.0, 0.0], s=4.0, depth=2)
    array([[8., 0.],
           [0., 4.]])
    """
    X1, X2 = _check_pair(X1, X2)
    beta = as_float_array(beta, "beta", ndim=1)
    if beta.shape[0] != X1.shape[1]:
        raise ValueError(f"beta must have length D = {X1.shape[1]} (columns of X1), "
                         f"got {beta.shape[0]}")
    try:
        beta = check_unit_vector(beta, "beta")
    except ValueError as exc:
        raise ValueError(f"{exc} (the teacher direction); put the teacher's scale into s") from None
    s = check_positive(s, "s")
    if s.ndim != 0:
        raise ValueError(f"s must be a scalar, got shape {s.shape}")
    L = check_depth(depth)
    # exact power-of-two scalings of s, X1 and X2 (the kernel is homogeneous in each), so
    # that the result is exact where representable and +-inf beyond, never NaN
    (sn, es), (X1, e1), (X2, e2) = pow2_normalise(s), pow2_normalise(X1), pow2_normalise(X2)
    mant, ep = pow2_power(es, 2.0 - 2.0 / L)
    prefactor = mant * np.exp((2.0 - 2.0 / L) * np.log(sn))
    z1, z2 = X1 @ beta, X2 @ beta
    K = prefactor * (X1 @ X2.T + (L - 1) * np.outer(z1, z2))
    return np.ascontiguousarray(ldexp_safe(K, ep + e1 + e2), dtype=np.float64)


def final_ntk_multi(X1, X2, Syx, depth, *, rcond=None):
    r"""Final NTK of a depth-L linear network with C outputs, shape (P1, P2, C, C).

    With the thin SVD Σyx = U S Vᵀ restricted to its k non-zero singular values:

    .. math::

        K_{ij}(x, x') = \sum_{l=1}^{L} [A_l]_{ij}\; x^\top B_l\, x', \quad
        A_l = U S^{2(L-l)/L} U^\top\ (l<L),\ A_L = I_C, \quad
        B_l = V S^{2(l-1)/L} V^\top\ (l>1),\ B_1 = I_D.

    Exact for the balanced, aligned network W_l = R_{l+1} S^{1/L} R_lᵀ (R_1 = V,
    R_{L+1} = U, any hidden widths N_l >= k), which gradient flow from small
    initialisation reaches on whitened data up to O(σ²).  The identities A_L and
    B_1 come from the last and the first layer, where a partial product is empty;
    they are what makes the kernel non-degenerate when C > k (output directions the
    task never uses still receive the gradient of W_L) and off the span of V.
    The rank k is numerical: singular values ``s_α <= rcond · s_max`` are zero,
    with ``rcond = max(C, D) · eps`` by default (the rounding level of the SVD; a
    singular value that is exactly zero comes out at ~eps·s_max and would
    otherwise enter as s^{2/L}, which is not small for large L). The same rule is
    used wherever a fractional power of Σyx is taken (:func:`linearnets.task_modes`).

    The same caveats as :func:`final_ntk` apply for P < D (formula valid to O(σ²)
    on the data span, O(σ) off it).  Since balancing does not depend on the data,
    the formula also gives the final NTK on unwhitened data if Syx is replaced by
    the learned end-to-end map Σyx Σxx⁺ (though the network is then not the kernel
    regressor with this kernel).

    Parameters
    ----------
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
    Syx : (C, D) array_like
        Input–output covariance Σyx = YᵀX/P (the learned end-to-end map).
    depth : int >= 1
    rcond : float in [0, 1), optional
        Relative numerical-rank tolerance (default ``max(C, D) · eps``).

    Returns
    -------
    K : (P1, P2, C, C) ndarray of float64
        K[μ, ν, i, j] = K_ij(x1_μ, x2_ν); symmetric under (μ, i) ↔ (ν, j) for X1 = X2.

    Raises
    ------
    ValueError
        For non-2-D or non-finite inputs, mismatched dimensions, Syx = 0, or depth
        not an integer >= 1.

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), App. H (and E.2 for C = 1).
    Derivation: ``theory/final_ntk.md``.  For C = 1 it equals :func:`final_ntk`.

    Examples
    --------
    >>> import linearnets as ln
    >>> K = ln.final_ntk_multi(np.eye(2), np.eye(2), Syx=[[4.0, 0.0]], depth=2)
    >>> K.shape, K[:, :, 0, 0]
    ((2, 2, 1, 1), array([[8., 0.],
           [0., 4.]]))
    """
    X1, X2 = _check_pair(X1, X2)
    Syx = check_matrix(Syx, "Syx")
    C, D = Syx.shape
    if D != X1.shape[1]:
        raise ValueError(f"Syx must have D = {X1.shape[1]} columns (like X1), got shape {Syx.shape}")
    L = check_depth(depth)
    if not np.any(Syx != 0):
        raise ValueError("Syx must be non-zero (the network learns nothing from a zero task)")
    S, U, V = task_modes(Syx, rcond=rcond)
    # K is homogeneous of degree 2 - 2/L in the singular values and bilinear in (X1, X2):
    # scale all three exactly by powers of two, and the scale back on at the end (exact
    # where representable, +-inf beyond, never NaN)
    (S, es), (X1, e1), (X2, e2) = pow2_normalise(S), pow2_normalise(X1), pow2_normalise(X2)
    mant, ep = pow2_power(es, 2.0 - 2.0 / L)
    logS = np.log(S)

    def spow(e):      # S ** e for e >= 0, via logs (no overflow for large/small s)
        return np.exp(e * logS)

    P1, P2 = X1.shape[0], X2.shape[0]
    G = X1 @ X2.T                             # (P1, P2)
    Z1, Z2 = X1 @ V, X2 @ V                   # (P, k): coordinates along the task modes
    K = np.zeros((P1, P2, C, C))
    if L == 1:
        K += G[:, :, None, None] * np.eye(C)
        return ldexp_safe(K, e1 + e2)
    # l = 1: A_1 = U S^{2−2/L} Uᵀ, B_1 = I
    A1 = (U * spow(2.0 - 2.0 / L)) @ U.T
    K += G[:, :, None, None] * A1
    # l = L: A_L = I, B_L = V S^{2−2/L} Vᵀ
    BL = (Z1 * spow(2.0 - 2.0 / L)) @ Z2.T
    K += BL[:, :, None, None] * np.eye(C)
    # 1 < l < L: Σ_{α,γ} c_{αγ} u_α u_αᵀ ⊗ (z1_γ z2_γᵀ), c_{αγ} = Σ_l s_α^{2(L−l)/L} s_γ^{2(l−1)/L}
    if L > 2:
        ls = np.arange(2, L)
        c = np.einsum("la,lg->ag", np.exp(np.outer(2.0 * (L - ls) / L, logS)),
                      np.exp(np.outer(2.0 * (ls - 1) / L, logS)))
        k = S.size
        # H[μ, ν, α] = Σ_γ z1_μγ c_αγ z2_νγ and then Σ_α H[μ, ν, α] u_iα u_jα, both as BLAS products
        H = np.matmul(Z1[:, None, :] * c[None, :, :], Z2.T).transpose(0, 2, 1)   # (P1, P2, k)
        UU = (U.T[:, :, None] * U.T[:, None, :]).reshape(k, C * C)             # rows u_α u_αᵀ
        K += (H.reshape(P1 * P2, k) @ UU).reshape(P1, P2, C, C)
    return np.ascontiguousarray(ldexp_safe(mant * K, ep + e1 + e2))


def final_alignment(depth, n):
    r"""Kernel–target alignment of the final NTK on whitened data: L/√(L² + n − 1).

    For one output, y = s Xβ and K = final_ntk(X, X, β, s, L) on whitened data,

    .. math::

        A = \frac{y^\top K y}{\|K\|_F\,\|y\|^2} = \frac{L}{\sqrt{L^2 + n - 1}},
        \qquad n = \min(P, D),

    because K/s^{2−2/L} = X(I + (L−1)ββᵀ)Xᵀ has the eigenvalue P·L along Xβ and P
    on the n − 1 other directions of the data span (XᵀX = P·I for P >= D; for
    P < D the rows of X are orthogonal with norm √P and β lies in their span).
    It increases with depth, from 1/√n for L = 1 to 1 as L → ∞.

    Parameters
    ----------
    depth : int >= 1
        Number of layers L.
    n : array_like of positive integers
        min(P, D), the dimension of the data span.

    Returns
    -------
    A : ndarray of float64, shape of n (0-d for scalar n)

    Raises
    ------
    ValueError
        If depth is not an integer >= 1 or n is not a positive integer.

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), Sec. 4.1 (alignment grows with
    depth, Fig. E.3); the closed form is derived in ``theory/final_alignment.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> float(ln.final_alignment(depth=2, n=6))
    0.6666666666666666
    """
    L = check_depth(depth)
    n = check_int_array(n, "n", minimum=1)   # min(P, D)
    return np.array(L / np.sqrt(float(L) ** 2 + n - 1.0), dtype=np.float64)
