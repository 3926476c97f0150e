"""Many outputs: per-mode learning, learning order and times, and the NTK along the path.

On whitened data with Σyx = U S Vᵀ, a balanced network aligned with the task modes,
W_l = R_l diag(c^{1/L}) R_{l−1}ᵀ (R_0 = V, R_L = U, orthonormal hidden R_l),
stays of that form under gradient flow, every mode following its own sigmoid
dc_α/dt = η L c_α^{2−2/L}(s_α − c_α) from its own c_α(0) (Saxe et al. 2014;
Atanasov, Bordelon & Pehlevan 2022, app. H).  Its NTK at every time is the
final-NTK formula with s_α replaced by c_α(t).  Derivation: ``theory/multimode.md``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import (as_float_array, check_depth, check_matrix, check_positive, check_unit_vector,
                           ldexp_safe, pow2_normalise, pow2_power)
from .dynamics import loss_curve, mode_strength, mode_time, plateau_time

__all__ = ["MultimodeResult", "ModeTimes", "task_modes", "multimode_dynamics",
           "mode_learning_times", "aligned_ntk", "path_ntk",
           "final_kernel_matrix_finite_sigma", "final_ntk_finite_sigma"]


def _check_rcond(rcond, C, D):
    """The relative rank tolerance: ``max(C, D) * eps`` by default, else a float in [0, 1)."""
    if rcond is None:
        return max(C, D) * np.finfo(np.float64).eps
    r = float(as_float_array(rcond, "rcond", ndim=0))
    if not 0.0 <= r < 1.0:
        raise ValueError(f"rcond must lie in [0, 1), got {rcond!r}")
    return r


def task_modes(Syx, *, rcond=None):
    """Thin SVD of Σyx restricted to its numerically nonzero singular values.

    The numerical rank is the number of singular values with
    ``s_α > rcond · s_max``; the default ``rcond = max(C, D) · eps`` is the
    rounding level of a computed SVD (the LAPACK/``numpy.linalg.matrix_rank``
    rule): a singular value that is exactly zero in exact arithmetic comes out of
    ``svd`` at ~eps·s_max and would otherwise enter every fractional power
    ``s^{2l/L}`` taken of it (``final_ntk_multi``, ``aligned_ntk``, ``path_ntk``,
    ``intermediate_kernel`` all use this rule), an error ~ eps^{2/L} that is
    not small at large depth.

    Parameters
    ----------
    Syx : (C, D) array_like
    rcond : float in [0, 1), optional
        Relative tolerance; ``None`` (default) means ``max(C, D) · eps``.

    Returns
    -------
    s : (r,) ndarray, descending
    U : (C, r) ndarray
    V : (D, r) ndarray

    Raises
    ------
    ValueError
        If Syx is not a finite 2-D array, is zero, or rcond is outside [0, 1).

    Examples
    --------
    >>> s, U, V = task_modes([[0.0, 2.0], [1.0, 0.0]])
    >>> s
    array([2., 1.])
    """
    Syx = check_matrix(Syx, "Syx")
    C, D = Syx.shape
    tol = _check_rcond(rcond, C, D)
    if C == 0 or D == 0:
        raise ValueError(f"Syx must be non-empty, got shape {Syx.shape}")
    U, S, Vt = np.linalg.svd(Syx, full_matrices=False)
    if S.size == 0 or not S[0] > 0:
        raise ValueError("Syx must be non-zero")
    keep = S > tol * S[0]
    return S[keep], np.ascontiguousarray(U[:, keep]), np.ascontiguousarray(Vt[keep].T)


def _check_c0(c0, r):
    c0 = check_positive(c0, "c0")
    if c0.ndim > 1 or (c0.ndim == 1 and c0.shape != (r,)):
        raise ValueError(f"c0 must be a scalar or have shape ({r},) (one per task mode), "
                         f"got {c0.shape}")
    return np.broadcast_to(c0, (r,)).copy()


@dataclass(frozen=True)
class MultimodeResult:
    """Mode strengths of a balanced, aligned network on a multi-output task.

    Attributes
    ----------
    t : (T,) ndarray
    s : (r,) ndarray
        Singular values of Σyx (descending).
    U : (C, r) ndarray
    V : (D, r) ndarray
    c : (T, r) ndarray
        c_α(t) = u_αᵀ W(t) v_α.
    loss : (T,) ndarray
        ½ Σ_α (s_α − c_α(t))²: the loss above its least-squares minimum.
    """

    t: np.ndarray
    s: np.ndarray
    U: np.ndarray
    V: np.ndarray
    c: np.ndarray
    loss: np.ndarray

    def __post_init__(self):
        for name in ("t", "s", "U", "V", "c", "loss"):
            getattr(self, name).setflags(write=False)

    @property
    def end_to_end(self):
        """W(t) = U diag(c(t)) Vᵀ, shape (T, C, D)."""
        return np.einsum("ia,ta,ja->tij", self.U, self.c, self.V)


def multimode_dynamics(t, Syx, c0, depth=2, eta=1.0, *, rcond=None):
    """Per-mode strengths and loss of a balanced, aligned depth-L network on whitened data.

    c_α(t) = mode_strength(t, s_α, c0_α, L, η): each mode its own sigmoid,
    dc_α/dt = η L c_α^{2−2/L}(s_α − c_α), and the loss ½ Σ_α (s_α − c_α)².

    Parameters
    ----------
    t : float or (T,) array_like
        Times >= 0.
    Syx : (C, D) array_like
        Σyx of whitened data (Σxx = I).
    c0 : float or (r,) array_like
        Initial strengths c_α(0) > 0, one per nonzero singular value (descending order).
    depth : int, optional
        L >= 1.
    eta : float, optional
        Learning rate > 0.
    rcond : float in [0, 1), optional
        Numerical-rank tolerance of Σyx (see :func:`task_modes`; default
        ``max(C, D) · eps``): singular values ``<= rcond · s_max`` are zero.

    Returns
    -------
    MultimodeResult

    Notes
    -----
    Exact for balanced aligned initial weights (Saxe et al. 2014); from small random
    initialisation it holds after the alignment phase with effective c_α(0).
    Source: Atanasov, Bordelon & Pehlevan (2022), app. H; ``theory/multimode.md``.

    Examples
    --------
    >>> res = multimode_dynamics([0.0, 100.0], [[3.0, 0.0], [0.0, 1.0]], 1e-3)
    >>> res.c[0], res.c[-1].round(9)
    (array([0.001, 0.001]), array([3., 1.]))
    """
    t = as_float_array(t, "t", ndim=(0, 1))
    s, U, V = task_modes(Syx, rcond=rcond)
    c0 = _check_c0(c0, s.size)
    L = check_depth(depth)
    eta = float(check_positive(eta, "eta", ndim=0))
    c = mode_strength(t[..., None], s, c0, depth=L, eta=eta)
    loss = loss_curve(t, s, c0, depth=L, eta=eta)
    return MultimodeResult(t=t.copy(), s=s, U=U, V=V, c=np.array(c), loss=np.array(loss))


@dataclass(frozen=True)
class ModeTimes:
    """When each task mode is learned.

    Attributes
    ----------
    times : (r,) ndarray
        Exact time at which c_α reaches ``fraction`` · s_α.
    order : (r,) ndarray of int
        Mode indices sorted by ``times`` (first learned first).
    plateau : (r,) ndarray
        Small-c0 asymptote of the half time: log(s/c0)/(2ηs) for L = 2,
        c0^{−(L−2)/L}/(η s (L−2)) for L >= 3, i.e. ∝ s_α^{−1} σ^{2−L} when c0 = σ^L.
    """

    times: np.ndarray
    order: np.ndarray
    plateau: np.ndarray

    def __post_init__(self):
        for name in ("times", "order", "plateau"):
            getattr(self, name).setflags(write=False)


def mode_learning_times(s, c0, depth=2, eta=1.0, fraction=0.5):
    """Times and order in which the modes of a multi-output task are learned.

    t_α solves c_α(t_α) = fraction · s_α for dc/dt = η L c^{2−2/L}(s − c)
    (:func:`linearnets.mode_time`).  With a common c0 the stronger modes are learned
    first; for L >= 3 and c0 = σ^L, t_α ≈ σ^{2−L}/(η s_α (L − 2)), for L = 2
    t_α ≈ log(s_α/c0)/(2 η s_α).

    Parameters
    ----------
    s : (r,) array_like
        Singular values s_α > 0.
    c0 : float or (r,) array_like
        Initial strengths, 0 < c0_α < fraction · s_α.
    depth : int, optional
        L >= 1.
    eta : float, optional
        > 0.
    fraction : float, optional
        0 < fraction < 1 (default ½: the half time).

    Returns
    -------
    ModeTimes

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), app. E.1 and H (their t_α carry an
    extra factor L, from the factor L their mode equation drops).

    Examples
    --------
    >>> mt = mode_learning_times([1.0, 3.0, 2.0], 1e-6, depth=3)
    >>> mt.order
    array([1, 2, 0])
    """
    s = check_positive(s, "s")
    if s.ndim != 1:
        raise ValueError(f"s must be 1-D (one value per mode), got shape {s.shape}")
    c0 = _check_c0(c0, s.size)
    L = check_depth(depth)
    eta = float(check_positive(eta, "eta", ndim=0))
    fraction = float(as_float_array(fraction, "fraction", ndim=0))
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction!r}")
    if np.any(c0 >= fraction * s):
        raise ValueError("c0 must be < fraction * s for every mode (else it is learned at t = 0)")
    times = mode_time(fraction * s, s, c0, depth=L, eta=eta)
    plateau = plateau_time(s, c0, depth=L, eta=eta)
    return ModeTimes(times=np.array(times), order=np.argsort(times, kind="stable"),
                     plateau=np.array(plateau))


def aligned_ntk(X1, X2, Syx, c, depth, *, rcond=None):
    """NTK of the balanced network aligned with the modes of Σyx, with mode strengths c.

    W_l = R_l diag(c^{1/L}) R_{l−1}ᵀ (R_0 = V, R_L = U from Σyx = U S Vᵀ) has::

        K(x, x') = Σ_{l=1}^{L} A_l ⊗ xᵀ B_l x',
        A_l = U diag(c^{2(L−l)/L}) Uᵀ (l < L),  A_L = I_C,
        B_l = V diag(c^{2(l−1)/L}) Vᵀ (l > 1),  B_1 = I_D,

    independent of the hidden frames and widths.  At c = s it is
    :func:`linearnets.final_ntk_multi`.

    Parameters
    ----------
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
    Syx : (C, D) array_like
        Fixes the mode directions U, V (its r nonzero singular values).
    c : (r,) or (T, r) array_like
        Mode strengths > 0 (any leading shape).
    depth : int
        L >= 1.
    rcond : float in [0, 1), optional
        Numerical-rank tolerance of Σyx (see :func:`task_modes`; default
        ``max(C, D) · eps``): singular values ``<= rcond · s_max`` are zero.

    Returns
    -------
    (..., P1, P2, C, C) ndarray
        K[..., μ, ν, i, j] = K_ij(x1_μ, x2_ν).

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), app. E, H; ``theory/multimode.md``.

    Examples
    --------
    >>> import numpy as np
    >>> K = aligned_ntk(np.eye(2), np.eye(2), [[4.0, 0.0]], [1.0], depth=2)
    >>> K[:, :, 0, 0]
    array([[2., 0.],
           [0., 1.]])
    """
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2")
    s, U, V = task_modes(Syx, rcond=rcond)
    C, D = U.shape[0], V.shape[0]
    if X1.shape[1] != D or X2.shape[1] != D:
        raise ValueError(f"X1 and X2 must have {D} columns to match Syx, got {X1.shape}, {X2.shape}")
    c = check_positive(c, "c")
    if c.ndim == 0 or c.shape[-1] != s.size:
        raise ValueError(f"c must have last axis of length {s.size} (one per task mode), "
                         f"got shape {c.shape}")
    L = check_depth(depth)
    lead = c.shape[:-1]
    # K is bilinear in (X1, X2) and homogeneous of degree 2 - 2/L in c (at each leading
    # index): exact power-of-two scalings of all three, and the scale back on at the end
    # (exact where representable, +-inf beyond, never NaN)
    (X1, e1), (X2, e2) = pow2_normalise(X1), pow2_normalise(X2)
    ec = np.frexp(np.max(c, axis=-1))[1]                                # (...)
    c = np.ldexp(c, -ec[..., None])
    logc = np.log(c)
    G = X1 @ X2.T
    Z1, Z2 = X1 @ V, X2 @ V
    eyeC = np.eye(C)
    K = np.broadcast_to(G[:, :, None, None] * eyeC, lead + G.shape + (C, C)).copy()
    if L == 1:
        return ldexp_safe(K, e1 + e2)
    e = 2.0 - 2.0 / L
    mant, ep = pow2_power(ec, e)
    back = (...,) + (None,) * 4
    cp = np.exp(e * logc)                                               # (..., r)
    A1 = np.einsum("ia,...a,ja->...ij", U, cp, U)
    BL = np.einsum("ma,...a,na->...mn", Z1, cp, Z2)
    K = (G[:, :, None, None] * A1[..., None, None, :, :]
         + BL[..., None, None] * eyeC)
    if L > 2:
        ls = np.arange(2, L)
        left = np.exp(np.multiply.outer(logc, 2.0 * (L - ls) / L))     # (..., r, L−2)
        right = np.exp(np.multiply.outer(logc, 2.0 * (ls - 1) / L))    # (..., r, L−2)
        m = np.einsum("...al,...gl->...ag", left, right)               # (..., r, r)
        H = np.einsum("mg,ng,...ag->...mna", Z1, Z2, m)
        K = K + np.einsum("...mna,ia,ja->...mnij", H, U, U)
    return np.ascontiguousarray(ldexp_safe(np.asarray(mant)[back] * K, np.asarray(ep)[back] + e1 + e2))


def path_ntk(t, X1, X2, Syx, c0, depth=2, eta=1.0, *, rcond=None):
    """NTK along the whole training path of a balanced, aligned network on whitened data.

    K(t) = aligned_ntk(X1, X2, Σyx, c(t), L) with c_α(t) from
    :func:`multimode_dynamics`.  K(0) is the aligned kernel at c0 and K(t) →
    final_ntk_multi(X1, X2, Σyx, L) as t → ∞.

    Parameters
    ----------
    t : float or (T,) array_like
        Times >= 0.
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
    Syx : (C, D) array_like
    c0 : float or (r,) array_like
        Initial mode strengths > 0.
    depth : int, optional
    eta : float, optional
    rcond : float in [0, 1), optional
        Numerical-rank tolerance of Σyx (see :func:`task_modes`; default
        ``max(C, D) · eps``): singular values ``<= rcond · s_max`` are zero.

    Returns
    -------
    (T, P1, P2, C, C) or (P1, P2, C, C) ndarray

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), sec. 4, app. H (final kernel only);
    the path form is derived in ``theory/multimode.md``.

    Examples
    --------
    >>> import numpy as np
    >>> K = path_ntk([0.0, 1e3], np.eye(2), np.eye(2), [[4.0, 0.0]], 1e-4, depth=2)
    >>> K[-1, :, :, 0, 0].round(9)
    array([[8., 0.],
           [0., 4.]])
    """
    res = multimode_dynamics(t, Syx, c0, depth, eta, rcond=rcond)
    return aligned_ntk(X1, X2, Syx, res.c, depth, rcond=rcond)


def final_kernel_matrix_finite_sigma(W1, w2, beta, s):
    """Final NTK matrix of a two-layer scalar network, with its leading finite-σ correction.

    Two layers f(x) = aᵀ W x (W = W1, a = w2ᵀ), whitened data, target y = s β·x,
    gradient flow to convergence from the given small initial weights (W0, a0).
    With p = a0, q = W0β, â = (p + q)/‖p + q‖ (the phase-I growth direction of a),
    δ = âᵀ(a0a0ᵀ − W0W0ᵀ)â (the conserved imbalance along â), u² = |a_∞|² =
    (δ + sqrt(δ² + 4s²))/2, P⊥ = I − ββᵀ::

        M_∞ = (s²/u²) ββᵀ + P⊥ W0ᵀ (I − ââᵀ) W0 P⊥ + u² I  + O(σ³),

    so that K_∞(x, x') = xᵀ M_∞ x'.  At σ → 0 it is s(ββᵀ + I), the depth-2
    :func:`linearnets.final_ntk`, whose error is O(σ²); to first order
    M_∞ = (s − δ/2) ββᵀ + (s + δ/2) I + P⊥W0ᵀ(I − ââᵀ)W0P⊥.

    Parameters
    ----------
    W1 : (N, D) array_like
        Initial first-layer weights.
    w2 : (N,) or (1, N) array_like
        Initial second-layer weights.
    beta : (D,) array_like
        Unit teacher direction.
    s : float
        Teacher strength > 0.

    Returns
    -------
    (D, D) ndarray

    Notes
    -----
    Domain: whitened inputs (Σxx = I, P >= D), depth 2, one output, small σ
    (the error is O(σ³) relative to s).  Source: Atanasov, Bordelon & Pehlevan
    (2022), app. H.2 (whose equations are missing from our copy); derivation in
    ``theory/multimode.md``.

    Examples
    --------
    >>> import numpy as np
    >>> M = final_kernel_matrix_finite_sigma(np.zeros((2, 2)), [0.1, 0.0], [1.0, 0.0], 1.0)
    >>> M.round(4)          # δ = 0.01: the isotropic part grows to s + δ/2
    array([[2.   , 0.   ],
           [0.   , 1.005]])
    """
    W0 = check_matrix(W1, "W1")
    a0 = as_float_array(w2, "w2", ndim=(1, 2))
    if a0.ndim == 2:
        if a0.shape[0] != 1:
            raise ValueError(f"w2 must be (N,) or (1, N) (one output), got shape {a0.shape}")
        a0 = a0[0]
    N, D = W0.shape
    if a0.shape != (N,):
        raise ValueError(f"w2 must have {N} entries to match W1, got {a0.shape}")
    beta = as_float_array(beta, "beta", ndim=1)
    if beta.shape != (D,):
        raise ValueError(f"beta must have shape ({D},), got {beta.shape}")
    beta = check_unit_vector(beta, "beta")
    s = float(check_positive(s, "s", ndim=0))
    with np.errstate(over="ignore", invalid="ignore"):
        v = a0 + W0 @ beta
        vmax = np.max(np.abs(v))
        nv = vmax * np.linalg.norm(v / vmax) if vmax > 0 else 0.0   # no under/overflow
        if not np.isfinite(nv):
            raise ValueError("W1, w2: w2 + W1 @ beta overflows float64")
        if not nv > 0:
            raise ValueError("w2 + W1 @ beta must be nonzero (phase I has no growing direction)")
        ah = v / nv
        wa = W0.T @ ah
        delta = (a0 @ ah) ** 2 - wa @ wa
        # u² = (δ + sqrt(δ² + 4s²))/2 and q = s²/u² = (sqrt(δ² + 4s²) − δ)/2, each written
        # without cancellation and without forming s² (no overflow or underflow for any s)
        root = np.hypot(delta, 2.0 * s)
        if delta >= 0:
            u2, q = 0.5 * (delta + root), 2.0 * s * (s / (delta + root))
        else:
            u2, q = 2.0 * s * (s / (root - delta)), 0.5 * (root - delta)
        Pp = np.eye(D) - np.outer(beta, beta)
        Z = (W0 - np.outer(ah, wa)) @ Pp                  # (I − ââᵀ) W0 P⊥
        M = q * np.outer(beta, beta) + Z.T @ Z + u2 * np.eye(D)
    if not np.all(np.isfinite(M)):
        raise ValueError("W1, w2, s: the final kernel matrix overflows float64 (phase-I weights "
                         "this large are far outside the small-initialisation theory)")
    return M


def final_ntk_finite_sigma(X1, X2, W1, w2, beta, s):
    """Final NTK x1ᵀ M_∞ x2 of a two-layer scalar network, correct to O(σ²) (error O(σ³)).

    See :func:`final_kernel_matrix_finite_sigma` for M_∞, the domain and the source.

    Parameters
    ----------
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
    W1, w2, beta, s : as in :func:`final_kernel_matrix_finite_sigma`

    Returns
    -------
    (P1, P2) ndarray

    Examples
    --------
    >>> import numpy as np
    >>> final_ntk_finite_sigma(np.eye(2), np.eye(2), np.zeros((2, 2)), [0.1, 0.0],
    ...                        [1.0, 0.0], 1.0).round(4)
    array([[2.   , 0.   ],
           [0.   , 1.005]])
    """
    M = final_kernel_matrix_finite_sigma(W1, w2, beta, s)
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2")
    D = M.shape[0]
    if X1.shape[1] != D or X2.shape[1] != D:
        raise ValueError(f"X1 and X2 must have {D} columns, got {X1.shape}, {X2.shape}")
    return X1 @ M @ X2.T
