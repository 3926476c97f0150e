r"""Exact gradient flow of a two-layer linear network from λ-balanced initial weights.

Two layers f(x) = W2 W1 x, W1 (N, D), W2 (C, N), on whitened data (Σxx = I) with the
loss (1/2P) Σ‖y − f‖² and dW_l/dt = −η ∂L/∂W_l.  The matrix W2ᵀW2 − W1W1ᵀ (N × N) is
conserved; the initial weights are *λ-balanced* when it equals λ I_N.  Then
Q = [W1ᵀ; W2] ((D + C) × N) obeys

.. math::  \dot Q = \eta\,(F Q - \tfrac12 Q Q^\top Q), \qquad
           F = \begin{pmatrix} -\tfrac{\lambda}{2} I_D & \Sigma_{yx}^\top \\
                               \Sigma_{yx} & \tfrac{\lambda}{2} I_C \end{pmatrix},

so M = QQᵀ obeys the matrix Riccati equation Ṁ = η(FM + MF − M²), solved by

.. math::  M(t) = e^{\eta F t} Q_0 \,[I + Q_0^\top G(t) Q_0]^{-1} Q_0^\top e^{\eta F t},
           \qquad G(t) = \int_0^{t} \eta\, e^{2\eta F s}\, ds
                       = \tfrac12 F^{-1}(e^{2\eta F t} - I)

(Dominé, Anguita, Proca, Braun, Kunin, Mediano & Saxe 2024, "From lazy to rich:
exact learning dynamics in deep linear networks"; the form
e^{Ft}F⁻¹e^{Ft} − F⁻¹ is 2G).  Derivation and sympy checks:
``theory/lambda_balanced.md``.  M holds W1ᵀW1 (top left, D × D), W2W1 (bottom
left, C × D) and W2W2ᵀ (bottom right, C × C).

Numerics: F is symmetric, F = V diag(f) Vᵀ; G = V diag(η g(f, t)) Vᵀ with
g = expm1(2ηft)/(2ηf), = t at f = 0, so a singular F needs no F⁻¹.  The growing
exponentials are kept bounded by composing the exact flow map over sub-intervals
h with η f_max h ≤ :data:`MAX_EXPONENT` (the map only depends on M, which it carries
as a factor Z = VᵀQ updated by Z ← diag(e^{ηfh}) Z L⁻ᵀ with LLᵀ = I + Zᵀ diag(g) Z,
a Cholesky factor): every step is well conditioned and the result is exact to
rounding for any t.  Once M stops changing (relative change below
:data:`STATIONARY_RTOL` for :data:`STATIONARY_STEPS` sub-steps) it is the fixed point
and serves every later time.
"""
from __future__ import annotations

import math

import numpy as np

from .._validation import (as_float_array, check_layer_sizes, check_matrix, check_nonnegative,
                           check_positive, ldexp_safe, pow2_normalise, rng_from_seed)

__all__ = ["lambda_balanced_flow", "lambda_balanced_ntk", "init_lambda_balanced", "balance_lambda"]

#: W2ᵀW2 − W1W1ᵀ − λI (λ its mean diagonal) above BALANCE_RTOL·(‖W2ᵀW2‖_F + ‖W1W1ᵀ‖_F + |λ|√N)
#: in Frobenius norm: the weights are not λ-balanced.  (Balanced weights drawn in float64
#: sit at ~1e-15; the closed form's error grows linearly with the imbalance.)
BALANCE_RTOL = 1e-9
#: Largest η·f_max·h of one sub-step (e^{2·2} ≈ 55: the condition of its Cholesky factor).
MAX_EXPONENT = 2.0
#: Relative Frobenius change of M per sub-step below which M is stationary ...
STATIONARY_RTOL = 64 * np.finfo(np.float64).eps
#: ... for this many consecutive sub-steps.
STATIONARY_STEPS = 3
#: Budget of sub-steps before stationarity (t·η·f_max/MAX_EXPONENT of them).
MAX_SUBSTEPS = 1_000_000
_SERIES_Z = 1e-4


def _expm1_ratio(z):
    """expm1(z)/z with value 1 at 0 (series for small |z|)."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    small = np.abs(z) < _SERIES_Z
    zs = z[small]
    out[small] = 1.0 + zs / 2.0 + zs * zs / 6.0 + zs ** 3 / 24.0
    out[~small] = np.expm1(z[~small]) / z[~small]
    return out


def balance_lambda(W1, W2):
    r"""The λ of λ-balanced two-layer weights, W2ᵀW2 − W1W1ᵀ = λ I_N.

    Parameters
    ----------
    W1 : (N, D) array_like
    W2 : (C, N) array_like

    Returns
    -------
    lam : float
        tr(W2ᵀW2 − W1W1ᵀ)/N.

    Raises
    ------
    ValueError
        If the shapes do not chain, or ‖W2ᵀW2 − W1W1ᵀ − λI‖_F exceeds
        :data:`BALANCE_RTOL` (‖W2ᵀW2‖_F + ‖W1W1ᵀ‖_F + |λ|√N): the weights are not
        λ-balanced for any λ.
    """
    W1 = check_matrix(W1, "W1")
    W2 = check_matrix(W2, "W2")
    if W2.shape[1] != W1.shape[0]:
        raise ValueError(f"W1 {W1.shape} and W2 {W2.shape} do not chain (W2 W1 needs W2.shape[1] == W1.shape[0])")
    N = W1.shape[0]
    # quadratic in the weights: check at unit scale (one exact power of two 2^e for both
    # layers), so that no norm overflows or underflows, and put 2^(2e) back on lambda
    e = pow2_normalise(np.concatenate([W1.ravel(), W2.ravel()]))[1]
    W1, W2 = np.ldexp(W1, -e), np.ldexp(W2, -e)
    A, B = W2.T @ W2, W1 @ W1.T
    Dm = A - B
    lam = float(np.trace(Dm) / N)
    off = np.linalg.norm(Dm - lam * np.eye(N))
    scale = np.linalg.norm(A) + np.linalg.norm(B) + abs(lam) * math.sqrt(N)
    if off > BALANCE_RTOL * scale:
        raise ValueError(f"W1, W2 are not lambda-balanced: ||W2^T W2 - W1 W1^T - lambda I||_F = "
                         f"{off:.3g} > {BALANCE_RTOL:g} x {scale:.3g} at unit scale (lambda = "
                         f"{float(ldexp_safe(lam, 2 * e)):.6g})")
    lam = float(ldexp_safe(lam, 2 * e))
    if not np.isfinite(lam):
        raise ValueError("W1, W2 overflow: W2^T W2 - W1 W1^T exceeds the float64 range")
    return lam


def _check_syx(Syx, C, D):
    Syx = as_float_array(Syx, "Syx", ndim=(1, 2))
    if Syx.ndim == 1:
        Syx = Syx[None, :]
    if Syx.shape != (C, D):
        raise ValueError(f"Syx must have shape ({C}, {D}) to match W1, W2, got {Syx.shape}")
    return Syx


def _riccati_path(t, Q0, Fm, eta):
    """M(t) = Q(t)Q(t)^T for each t (any order), (T, n, n)."""
    f, V = np.linalg.eigh(Fm)
    f = eta * f
    fmax = max(float(f.max()), 0.0)
    order = np.argsort(t, kind="stable")
    Z = V.T @ Q0
    M_prev = Z @ Z.T
    out = np.empty((len(t), Fm.shape[0], Fm.shape[0]))
    now, stationary, steps = 0.0, 0, 0
    I = np.eye(Q0.shape[1])
    for k in order:
        target = float(t[k])
        if stationary < STATIONARY_STEPS and target > now:
            span = target - now
            n_sub = max(1, math.ceil(fmax * span / MAX_EXPONENT)) if fmax > 0 else 1
            h = span / n_sub
            e = np.exp(f * h)
            g = eta * h * _expm1_ratio(2.0 * f * h)    # int_0^h eta e^{2 eta F s} ds, eigenvalue by eigenvalue
            for _ in range(n_sub):
                S = I + (Z.T * g) @ Z
                Lc = np.linalg.cholesky(S)             # S = Lc Lc^T; Z <- E Z Lc^{-T}
                Z = np.linalg.solve(Lc, (e[:, None] * Z).T).T
                M = Z @ Z.T
                steps += 1
                # relative Frobenius change, on M scaled by its largest entry: the norm of a
                # tiny M (weights ~1e-100) would underflow to 0 and look stationary
                scale = np.max(np.abs(M))
                scale = scale if scale > 0 else 1.0
                dm = np.linalg.norm((M - M_prev) / scale)
                stationary = stationary + 1 if dm <= STATIONARY_RTOL * np.linalg.norm(M / scale) else 0
                M_prev = M
                if stationary >= STATIONARY_STEPS:
                    break
                if steps > MAX_SUBSTEPS:
                    raise ValueError(f"t = {target:.3g} needs more than {MAX_SUBSTEPS} sub-steps of the exact "
                                     "flow map before it becomes stationary")
            now = target
        out[k] = V @ M_prev @ V.T
    return out


def lambda_balanced_flow(t, W1, W2, Syx, eta=1.0):
    r"""Exact two-layer gradient flow from λ-balanced weights on whitened data (Dominé et al. 2024).

    With Q = [W1ᵀ; W2] and F = [[−(λ/2) I_D, Σyxᵀ], [Σyx, (λ/2) I_C]],

    .. math::  Q Q^\top(t) = e^{\eta F t} Q_0\,[I + Q_0^\top G(t) Q_0]^{-1} Q_0^\top e^{\eta F t},
               \quad G(t) = \tfrac12 F^{-1}(e^{2\eta F t} - I),

    the solution of the Riccati equation d(QQᵀ)/dt = η(F QQᵀ + QQᵀ F − (QQᵀ)²) that
    gradient flow on L = (1/2P)Σ‖y − W2W1x‖² (Σxx = I) reduces to when
    W2ᵀW2 − W1W1ᵀ = λ I (any real λ; conserved).  Computed without F⁻¹ (eigenbasis of
    F, expm1-type factors; a singular F is fine) and with bounded exponentials by
    composing the exact flow map (module docstring), so finite and exact to rounding
    for every t ≥ 0.  Derivation: ``theory/lambda_balanced.md``.

    Parameters
    ----------
    t : float or (T,) array_like
        Times since initialisation, ≥ 0 (any order; a scalar is T = 1).
    W1 : (N, D) array_like
        First-layer weights at t = 0.
    W2 : (C, N) array_like
        Second-layer weights at t = 0; W2ᵀW2 − W1W1ᵀ = λ I_N within
        :data:`BALANCE_RTOL` (see :func:`balance_lambda`).
    Syx : (C, D) or (D,) array_like
        Σyx = YᵀX/P of whitened data.
    eta : float > 0
        Learning rate.

    Returns
    -------
    W : (T, C, D) ndarray
        W2W1(t), the network's end-to-end map.
    A : (T, D, D) ndarray
        W1ᵀW1(t) (the first layer's contribution to the NTK, the input-side kernel).
    B : (T, C, C) ndarray
        W2W2ᵀ(t).

    Raises
    ------
    ValueError
        Weights not λ-balanced (naming W1, W2), shapes that do not chain, Syx of the
        wrong shape, negative or non-finite t, eta ≤ 0.
    """
    t = np.atleast_1d(check_nonnegative(t, "t", ndim=(0, 1)))
    eta = float(check_positive(eta, "eta", ndim=0))
    lam = balance_lambda(W1, W2)
    W1 = np.asarray(W1, dtype=np.float64)
    W2 = np.asarray(W2, dtype=np.float64)
    N, D = W1.shape
    C = W2.shape[0]
    Syx = _check_syx(Syx, C, D)
    Fm = np.block([[-0.5 * lam * np.eye(D), Syx.T], [Syx, 0.5 * lam * np.eye(C)]])
    Q0 = np.vstack([W1.T, W2])
    # The flow is invariant under (F, QQ^T, eta) -> (F 2^-e, QQ^T 2^-e, eta 2^e): run it at
    # unit scale (exact power-of-two scalings), so that no product overflows on the way, and
    # put the scale back on at the end (docs/conventions.md, "Bad input and overflow").
    e = max(int(np.frexp(np.max(np.abs(Fm)))[1]), 2 * int(np.frexp(np.max(np.abs(Q0)))[1]))
    e += e % 2
    with np.errstate(over="ignore"):
        eta_s = float(np.ldexp(eta, e))
    if not np.isfinite(eta_s):
        raise ValueError("eta (with Syx, W1, W2): eta times the scale of Syx or of the weights "
                         "overflows float64")
    M = _riccati_path(t, np.ldexp(Q0, -e // 2), np.ldexp(Fm, -e), eta_s)
    M = ldexp_safe(M, e)
    return M[:, D:, :D].copy(), M[:, :D, :D].copy(), M[:, D:, D:].copy()


def lambda_balanced_ntk(t, W1, W2, Syx, X1, X2=None, eta=1.0):
    r"""The NTK of the λ-balanced two-layer network along its exact path.

    .. math::  K_{ij}(x, x') = \delta_{ij}\, x^\top W_1^\top W_1 x' + (W_2 W_2^\top)_{ij}\, x^\top x' ,

    i.e. K = I_C ⊗ X1 W1ᵀW1 X2ᵀ + W2W2ᵀ ⊗ X1X2ᵀ, with W1ᵀW1(t), W2W2ᵀ(t) from
    :func:`lambda_balanced_flow` (the same layout as ``ln.empirical_ntk``; no 1/P, no η).

    Parameters
    ----------
    t, W1, W2, Syx, eta
        As in :func:`lambda_balanced_flow`.
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like, optional
        Default X1.

    Returns
    -------
    K : (T, P1, P2) ndarray for C = 1, else (T, P1, P2, C, C)
    """
    X1 = check_matrix(X1, "X1")
    X2 = X1 if X2 is None else check_matrix(X2, "X2")
    _, A, B = lambda_balanced_flow(t, W1, W2, Syx, eta=eta)
    D = A.shape[1]
    if X1.shape[1] != D or X2.shape[1] != D:
        raise ValueError(f"X1 and X2 must have {D} columns, got {X1.shape} and {X2.shape}")
    first = np.einsum("pd,tde,qe->tpq", X1, A, X2)
    lin = X1 @ X2.T
    C = B.shape[1]
    if C == 1:
        return first + B[:, 0, 0][:, None, None] * lin[None]
    return (first[:, :, :, None, None] * np.eye(C)[None, None, None]
            + lin[None, :, :, None, None] * B[:, None, None, :, :])


def init_lambda_balanced(layer_sizes, lam, sigma, seed=0):
    r"""Draw two-layer weights with W2ᵀW2 − W1W1ᵀ = λ I_N exactly (to rounding).

    Construction: W1 = O Σ1 V1ᵀ, W2 = U1 Σ2 Oᵀ with O (N × N), V1 (D × ·), U1 (C × ·)
    Haar-random orthonormal and rectangular-diagonal Σ1 (N × D), Σ2 (C × N) whose
    entries obey s2_i² − s1_i² = λ and s1_i s2_i = p_i for every i < N, i.e.
    s1² = (√(λ² + 4p²) − λ)/2, s2² = (√(λ² + 4p²) + λ)/2.  The p_i, the singular values
    of the end-to-end map W2W1, are the squared singular values of an (N, D) matrix with
    i.i.d. N(0, σ²/D) entries (the ``init_network`` scale of one layer, so at λ = 0 each
    layer looks like an ``init_network`` draw and W2W1 ~ σ²), zero beyond min(N, C, D).
    The initial function is then the same for every λ (same seed): λ only moves
    weight between the layers.

    Which shapes admit which λ: W2ᵀW2 has rank ≤ min(C, N) and W1W1ᵀ rank ≤ min(D, N).
    λ > 0 makes W2ᵀW2 = W1W1ᵀ + λI full rank, so it needs N ≤ C; λ < 0 makes W1W1ᵀ
    full rank, so it needs N ≤ D; λ = 0 is possible for every shape (then the
    N − min(N, C, D) extra directions carry zero weights).

    Parameters
    ----------
    layer_sizes : (D, N, C) sequence of int
    lam : float
        λ (any real number the shape admits).
    sigma : float > 0
        Scale of the base singular values.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)

    Returns
    -------
    [W1 (N, D), W2 (C, N)] : list of ndarray
    """
    D, N, C = check_layer_sizes(layer_sizes, length=3)
    lam = float(as_float_array(lam, "lam", ndim=0))
    sigma = float(check_positive(sigma, "sigma", ndim=0))
    if lam > 0 and N > C:
        raise ValueError(f"lam = {lam:g} > 0 needs the hidden width N = {N} <= C = {C} (W2^T W2 = W1 W1^T + lam I "
                         "must have full rank N)")
    if lam < 0 and N > D:
        raise ValueError(f"lam = {lam:g} < 0 needs the hidden width N = {N} <= D = {D} (W1 W1^T = W2^T W2 - lam I "
                         "must have full rank N)")
    rng = rng_from_seed(seed)
    r = min(N, C, D)
    sv = np.zeros(N)                         # sqrt of the singular values of W2 W1 (0 beyond min(N, C, D))
    sv[:r] = np.linalg.svd(rng.standard_normal((N, D)) * sigma / math.sqrt(D), compute_uv=False)[:r]
    # s1, s2 scale like sv and sqrt|lam|: solve at unit scale (an exact power of two 2^k),
    # so that no square overflows for sigma or lam up to the float range
    k = max(int(np.frexp(np.max(sv))[1]), (int(np.frexp(abs(lam))[1]) + 1) // 2 if lam else -1074)
    sv, lam_n = np.ldexp(sv, -k), float(ldexp_safe(lam, -2 * k))
    prod = sv * sv
    root = np.hypot(lam_n, 2.0 * prod)
    big = 0.5 * (root + abs(lam_n))          # s2^2 - s1^2 = lam, s1 s2 = prod, without cancellation
    small = np.divide(prod * prod, big, out=np.zeros(N), where=big > 0)
    s1, s2 = (np.sqrt(small), np.sqrt(big)) if lam >= 0 else (np.sqrt(big), np.sqrt(small))
    s1, s2 = ldexp_safe(s1, k), ldexp_safe(s2, k)

    def haar(n, k):
        q, rr = np.linalg.qr(rng.standard_normal((n, max(k, 1))))
        return (q * np.sign(np.diag(rr)))[:, :k]

    O = haar(N, N)
    k1 = min(N, D)
    k2 = min(N, C)
    V1 = haar(D, k1)
    U1 = haar(C, k2)
    W1 = (O[:, :k1] * s1[:k1]) @ V1.T
    W2 = (U1 * s2[:k2]) @ O[:, :k2].T
    return [W1, W2]
