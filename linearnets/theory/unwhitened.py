"""Phase I of a two-layer linear network on unwhitened inputs (closed form).

Network f(x) = aᵀ W x with W = W_1 of shape (N, D) and a = W_2ᵀ of shape (N,)
(the second-layer weight vector).  Scalar teacher y = s β·x with ‖β‖ = 1 and
input covariance Σ = Σxx, so Σyx = s βᵀΣ.  Early in training the network output
is O(σ²) and the gradient flow linearises (dropping O(σ³) terms) to

    dW/dt = η s a gᵀ,        da/dt = η s W g,        g = Σβ.

Six quadratic weight statistics close under this flow (derivation:
``theory/unwhitened.md``); the NTK matrix M(t) = WᵀW + |a|² I grows along
g = Σβ, not along β.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import (as_float_array, check_int, check_matrix, check_positive,
                           check_unit_vector, ldexp_safe, pow2_normalise)

__all__ = [
    "STAT_NAMES",
    "Phase1Result",
    "unwhitened_phase1",
    "unwhitened_init_stats",
    "unwhitened_init_stats_expected",
    "unwhitened_linear_weights",
    "unwhitened_kernel_matrix",
    "unwhitened_system_matrix",
]

#: Order of the six statistics in every ``init_stats`` / ``stats`` array.
STAT_NAMES = ("a_sq", "r0", "r1", "h00", "h01", "h11")

# Tolerance on ‖β‖ = 1: UNIT_TOL, the package-wide rule of ``linearnets._validation``.
#: Relative tolerance on the symmetry of Σ.
SYM_TOL = 1e-10
#: exp() of anything above this overflows float64.
MAX_LOG = 700.0
#: Below this (relative to b) the vectors β and Σβ count as parallel.
PARALLEL_TOL = 1e-12


def _check_sigma_beta(Sigma, beta):
    Sigma = check_matrix(Sigma, "Sigma")
    D = Sigma.shape[0]
    if Sigma.shape != (D, D):
        raise ValueError(f"Sigma must be square, got shape {Sigma.shape}")
    scale = max(np.max(np.abs(Sigma)), 1e-300)
    if np.max(np.abs(Sigma - Sigma.T)) > SYM_TOL * scale:
        raise ValueError("Sigma must be symmetric")
    Sigma = 0.5 * (Sigma + Sigma.T)
    if np.min(np.linalg.eigvalsh(Sigma)) < -1e-10 * scale:
        raise ValueError("Sigma must be positive semi-definite (a covariance)")
    beta = as_float_array(beta, "beta", ndim=1)
    if beta.shape != (D,):
        raise ValueError(f"beta must have shape ({D},) to match Sigma, got {beta.shape}")
    beta = check_unit_vector(beta, "beta")
    g = Sigma @ beta
    m1 = float(beta @ g)
    with np.errstate(over="ignore"):
        b = float(g @ g)
    if not np.isfinite(b):
        raise ValueError("Sigma overflows: |Sigma beta|^2 exceeds the float64 range (rescale "
                         "the inputs)")
    if not b > 0:
        raise ValueError("Sigma @ beta must be nonzero (the teacher must be visible in the data)")
    return Sigma, beta, g, m1, b


def _check_weights(W1, w2, D):
    W1 = check_matrix(W1, "W1")
    if W1.shape[1] != D:
        raise ValueError(f"W1 must have {D} columns to match Sigma, got shape {W1.shape}")
    w2 = as_float_array(w2, "w2", ndim=(1, 2))
    if w2.ndim == 2:
        if w2.shape[0] != 1:
            raise ValueError(f"w2 must be (N,) or (1, N) (one output), got shape {w2.shape}")
        w2 = w2[0]
    if w2.shape != (W1.shape[0],):
        raise ValueError(f"w2 must have {W1.shape[0]} entries to match W1, got {w2.shape}")
    return W1, np.ascontiguousarray(w2)


def _check_time(t):
    t = as_float_array(t, "t", ndim=(0, 1))
    if np.any(t < 0):
        raise ValueError("t must be >= 0")
    return t


def unwhitened_system_matrix(Sigma, beta, s, eta=1.0):
    """Generator A of the closed linear system dx/dt = A x of the six phase-I statistics.

    x = (|a|², aᵀWβ, aᵀWΣβ, βᵀWᵀWβ, βᵀWᵀWΣβ, βᵀΣWᵀWΣβ) and, with m1 = βᵀΣβ,
    b = βᵀΣ²β::

        A = η s [[0,  0,  2,  0,  0,  0],
                 [m1, 0,  0,  0,  1,  0],
                 [b,  0,  0,  0,  0,  1],
                 [0, 2m1, 0,  0,  0,  0],
                 [0,  b, m1,  0,  0,  0],
                 [0,  0, 2b,  0,  0,  0]]

    Eigenvalues η s {0, 0, ±√b, ±2√b}.  Domain: Σ symmetric PSD, ‖β‖ = 1,
    Σβ ≠ 0, s > 0, η > 0.  Source: Atanasov, Bordelon & Pehlevan (2022), app. C.3
    (their five-variable system omits βᵀWᵀWβ, which closes with one more zero mode).

    Parameters
    ----------
    Sigma : (D, D) array_like
    beta : (D,) array_like
    s, eta : float

    Returns
    -------
    (6, 6) ndarray

    Examples
    --------
    >>> import numpy as np
    >>> A = unwhitened_system_matrix(np.diag([4.0, 1.0]), [1.0, 0.0], 1.0)
    >>> np.round(np.sort(np.linalg.eigvals(A).real), 6)
    array([-8., -4.,  0.,  0.,  4.,  8.])
    """
    _, _, _, m1, b = _check_sigma_beta(Sigma, beta)
    s = float(check_positive(s, "s", ndim=0))
    eta = float(check_positive(eta, "eta", ndim=0))
    A = np.zeros((6, 6))
    A[0, 2] = 2.0
    A[1, 0], A[1, 4] = m1, 1.0
    A[2, 0], A[2, 5] = b, 1.0
    A[3, 1] = 2.0 * m1
    A[4, 1], A[4, 2] = b, m1
    A[5, 2] = 2.0 * b
    with np.errstate(over="ignore", invalid="ignore"):   # +inf beyond the float range; 0 stays
        return np.where(A != 0, (eta * s) * A, 0.0)


def _phi(theta):
    """(1 − e^{−θ})/θ, equal to 1 at θ = 0; bounded and accurate for every θ >= 0."""
    safe = np.where(theta > 0, theta, 1.0)
    return np.where(theta > 0, -np.expm1(-safe) / safe, 1.0)


@dataclass(frozen=True)
class Phase1Result:
    """Closed-form phase-I statistics of a two-layer network on unwhitened data.

    Attributes
    ----------
    t : (T,) or () ndarray
        Times.
    scaled_stats : (T, 6) or (6,) ndarray
        The statistics (order :data:`STAT_NAMES`) times e^{−2θ(t)}, θ = η s √b t:
        finite for every t, converging as t → ∞.
    log_scale : (T,) or () ndarray
        2θ(t) = 2 η s √b t, so that stats = scaled_stats · exp(log_scale).
    rates : (6,) ndarray
        Eigenvalues η s (0, 0, −√b, √b, −2√b, 2√b) of the linear system.
    m1, b : float
        βᵀΣβ and βᵀΣ²β.
    direction : (T, D) or (D,) ndarray
        Top eigenvector of M(t) = WᵀW + |a|² I restricted to span{β, Σβ}
        (sign: positive overlap with Σβ).
    limit_direction : (D,) ndarray
        Σβ/‖Σβ‖, the t → ∞ limit of ``direction`` (the predicted top kernel direction).
    """

    t: np.ndarray
    scaled_stats: np.ndarray
    log_scale: np.ndarray
    rates: np.ndarray
    m1: float
    b: float
    direction: np.ndarray
    limit_direction: np.ndarray

    def __post_init__(self):
        for name in ("t", "scaled_stats", "log_scale", "rates", "direction", "limit_direction"):
            getattr(self, name).setflags(write=False)

    @property
    def stats(self):
        """The statistics themselves, (T, 6); ValueError where they exceed float64."""
        if np.any(self.log_scale > MAX_LOG):
            raise ValueError("statistics overflow float64 at these times (2 eta s sqrt(b) t > "
                             f"{MAX_LOG}); use scaled_stats and log_scale")
        return self.scaled_stats * np.exp(self.log_scale)[..., None]

    @property
    def overlap(self):
        """|direction · Σβ/‖Σβ‖|: 1 when the kernel's top direction is Σβ."""
        return np.abs(self.direction @ self.limit_direction)


def unwhitened_phase1(t, Sigma, beta, s, init_stats, eta=1.0):
    """Exact solution of the linearised phase-I dynamics of the six weight statistics.

    With θ = η s √b t, C = cosh θ, S = sinh θ, the vectors a, Wg (g = Σβ) and Wβ
    evolve as (``theory/unwhitened.md``)::

        a(t)  = C a0 + (S/√b) (Wg)0
        Wg(t) = √b S a0 + C (Wg)0
        Wβ(t) = (Wβ)0 + m1 [(S/√b) a0 + ((C − 1)/b) (Wg)0]

    so every statistic is a quadratic form of the initial Gram matrix of
    (a0, (Wg)0, (Wβ)0), i.e. of ``init_stats``.  This equals expm(A t) x0 for
    :func:`unwhitened_system_matrix` A (eigenvalues η s {0, 0, ±√b, ±2√b}),
    evaluated in a scaled form that stays finite for huge t.  Valid while the
    network output is small: t ≪ log(1/σ²)/(2 η s √b).

    Parameters
    ----------
    t : float or (T,) array_like
        Times, t >= 0.
    Sigma : (D, D) array_like
        Input covariance Σxx (symmetric PSD, Σβ ≠ 0).
    beta : (D,) array_like
        Unit teacher vector; the target is y = s β·x.
    s : float
        Teacher strength, s > 0.
    init_stats : (6,) array_like
        Statistics at t = 0 in the order :data:`STAT_NAMES`:
        (|a|², aᵀWβ, aᵀWΣβ, βᵀWᵀWβ, βᵀWᵀWΣβ, βᵀΣWᵀWΣβ), with a = W_2ᵀ the
        second-layer weight vector and W = W_1.  Get them from weights with
        :func:`unwhitened_init_stats` or as expectations under the random
        initialisation with :func:`unwhitened_init_stats_expected` (the system is
        linear, so expectations evolve by the same formula).
    eta : float, optional
        Learning rate, > 0.

    Returns
    -------
    Phase1Result

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), app. C.3 and sec. 4 (r_1 aligns
    with Σβ).  Their rates carry no η s and their a = βᵀΣβ clashes with the
    weight vector; here m1 = βᵀΣβ, b = βᵀΣ²β.

    Examples
    --------
    >>> import numpy as np
    >>> Sigma, beta = np.diag([2.0, 1.0]), np.array([0.6, 0.8])
    >>> x0 = unwhitened_init_stats_expected(100, 0.01, Sigma, beta)
    >>> res = unwhitened_phase1([0.0, 5.0], Sigma, beta, 1.0, x0)
    >>> np.round(res.direction[-1], 6)          # Σβ/‖Σβ‖, not β
    array([0.83205, 0.5547 ])
    >>> bool(res.log_scale[-1] > 10)
    True
    """
    t = _check_time(t)
    Sigma, beta, g, m1, b = _check_sigma_beta(Sigma, beta)
    s = float(check_positive(s, "s", ndim=0))
    eta = float(check_positive(eta, "eta", ndim=0))
    x0 = as_float_array(init_stats, "init_stats", ndim=1)
    if x0.shape != (6,):
        raise ValueError(f"init_stats must have shape (6,), got {x0.shape}")
    a_sq, r0, r1, h00, h01, h11 = x0
    G = np.array([[a_sq, r1, r0], [r1, h11, h01], [r0, h01, h00]])

    sb = np.sqrt(b)
    tau = eta * s * t
    theta = tau * sb
    E1, E2 = np.exp(-theta), np.exp(-2.0 * theta)
    ch = 0.5 * (1.0 + E2)                        # cosh θ e^{−θ}
    sh_b = tau * _phi(2.0 * theta)               # sinh θ e^{−θ} / √b
    cm_b = 0.5 * (tau * _phi(theta)) ** 2        # (cosh θ − 1) e^{−θ} / b
    zero = np.zeros_like(t)
    # coefficient vectors in the basis (a0, (Wg)0, (Wβ)0), all times e^{−θ}
    ca = np.stack([ch, sh_b, zero], axis=-1)
    cg = np.stack([b * sh_b, ch, zero], axis=-1)
    cb = np.stack([m1 * sh_b, m1 * cm_b, E1], axis=-1)

    def form(u, v):
        return np.einsum("...i,ij,...j->...", u, G, v)

    scaled = np.stack([form(ca, ca), form(ca, cb), form(ca, cg),
                       form(cb, cb), form(cb, cg), form(cg, cg)], axis=-1)

    ghat = g / sb
    direction = _top_direction(scaled, beta, g, m1, b)
    rates = eta * s * np.array([0.0, 0.0, -sb, sb, -2 * sb, 2 * sb])
    return Phase1Result(t=t.copy(), scaled_stats=scaled,
                        log_scale=np.array(2.0 * theta, dtype=np.float64), rates=rates,
                        m1=m1, b=b, direction=direction, limit_direction=ghat)


def _top_direction(stats, beta, g, m1, b):
    """Top eigenvector of M restricted to span{β, g} from the statistics (any positive scale)."""
    a_sq, h00, h01, h11 = stats[..., 0], stats[..., 3], stats[..., 4], stats[..., 5]
    perp2 = b - m1 ** 2
    if perp2 <= PARALLEL_TOL * b:
        # β is an eigenvector of Σ: the span is one-dimensional
        d = np.sign(m1) * beta if m1 != 0 else beta
        return np.broadcast_to(d, stats.shape[:-1] + beta.shape).copy()
    n = np.sqrt(perp2)
    e2 = (g - m1 * beta) / n
    Mbb = h00 + a_sq
    Mbg = h01 + m1 * a_sq
    Mgg = h11 + b * a_sq
    M11 = Mbb
    M12 = (Mbg - m1 * Mbb) / n
    M22 = (Mgg - 2 * m1 * Mbg + m1 ** 2 * Mbb) / n ** 2
    # top eigenvector of [[M11, M12], [M12, M22]] via the half-angle form (no branch cut)
    ang = 0.5 * np.arctan2(2 * M12, M11 - M22)
    d = np.cos(ang)[..., None] * beta + np.sin(ang)[..., None] * e2
    sgn = np.where(d @ g < 0, -1.0, 1.0)
    return d * sgn[..., None]


def unwhitened_init_stats(W1, w2, Sigma, beta):
    """The six phase-I statistics of given weights (order :data:`STAT_NAMES`).

    (|a|², aᵀWβ, aᵀWΣβ, βᵀWᵀWβ, βᵀWᵀWΣβ, βᵀΣWᵀWΣβ) with W = W1 (N, D) and a the
    second-layer weight vector (w2 of shape (N,) or (1, N)).  Source: app. C.3.

    Parameters
    ----------
    W1 : (N, D) array_like
    w2 : (N,) or (1, N) array_like
    Sigma : (D, D) array_like
    beta : (D,) array_like

    Returns
    -------
    (6,) ndarray

    Examples
    --------
    >>> import numpy as np
    >>> unwhitened_init_stats(np.eye(2), [1.0, 0.0], np.eye(2), [1.0, 0.0])
    array([1., 1., 1., 1., 1., 1.])
    """
    Sigma, beta, g, _, _ = _check_sigma_beta(Sigma, beta)
    W1, a = _check_weights(W1, w2, Sigma.shape[0])
    # bilinear in (a, W1) and of degree 0, 1, 2 in g: exact power-of-two scalings, and the
    # scales back on at the end (exact where representable, +-inf beyond, never NaN)
    (a, ea), (W1, ew), (g, eg) = pow2_normalise(a), pow2_normalise(W1), pow2_normalise(g)
    wb, wg = W1 @ beta, W1 @ g
    stats = np.array([a @ a, a @ wb, a @ wg, wb @ wb, wb @ wg, wg @ wg])
    return ldexp_safe(stats, np.array([2 * ea, ea + ew, ea + ew + eg, 2 * ew, 2 * ew + eg,
                                       2 * ew + 2 * eg]))


def unwhitened_init_stats_expected(width, sigma, Sigma, beta):
    """Expected phase-I statistics under ``init_network((D, width, 1), sigma)``.

    W1 entries N(0, σ²/D), a entries N(0, σ²/N)::

        E x0 = (σ², 0, 0, Nσ²/D, Nσ² m1/D, Nσ² b/D),  m1 = βᵀΣβ, b = βᵀΣ²β.

    Because the phase-I system is linear, ``unwhitened_phase1(t, ..., E x0)`` is the
    exact mean of the linearised statistics over initialisations.  Source: app. C.1, C.3.

    Parameters
    ----------
    width : int
        Hidden width N >= 1.
    sigma : float
        Initialisation scale, > 0.
    Sigma : (D, D) array_like
    beta : (D,) array_like

    Returns
    -------
    (6,) ndarray

    Examples
    --------
    >>> unwhitened_init_stats_expected(4, 0.1, [[2.0, 0.0], [0.0, 1.0]], [1.0, 0.0])
    array([0.01, 0.  , 0.  , 0.02, 0.04, 0.08])
    """
    Sigma, beta, _, m1, b = _check_sigma_beta(Sigma, beta)
    N = float(check_int(width, "width", minimum=1))
    sigma = check_positive(sigma, "sigma", ndim=0)
    D = Sigma.shape[0]
    with np.errstate(over="ignore"):   # +inf where sigma^2 exceeds the float range
        v = N * sigma ** 2 / D
        return np.array([sigma ** 2, 0.0, 0.0, v, v * m1, v * b])


def unwhitened_linear_weights(t, W1, w2, Sigma, beta, s, eta=1.0):
    """Weights of the linearised phase-I flow dW/dt = η s a gᵀ, da/dt = η s W g (g = Σβ).

    a(t) = cosh θ a0 + (sinh θ/√b) W0 g,  W(t) = W0 + [(sinh θ/√b) a0 + ((cosh θ − 1)/b) W0 g] gᵀ,
    θ = η s √b t.  Domain as :func:`unwhitened_phase1`; ValueError if the weights
    would overflow float64.  Source: app. C.3.

    Parameters
    ----------
    t : float or (T,) array_like
    W1 : (N, D) array_like
    w2 : (N,) or (1, N) array_like
    Sigma, beta, s, eta : as in :func:`unwhitened_phase1`

    Returns
    -------
    W : (T, N, D) or (N, D) ndarray
    a : (T, N) or (N,) ndarray

    Examples
    --------
    >>> import numpy as np
    >>> W, a = unwhitened_linear_weights(0.0, np.eye(2), [1.0, 0.0], np.eye(2), [1.0, 0.0], 1.0)
    >>> bool(np.allclose(W, np.eye(2)) and np.allclose(a, [1.0, 0.0]))
    True
    """
    t = _check_time(t)
    Sigma, beta, g, _, b = _check_sigma_beta(Sigma, beta)
    W0, a0 = _check_weights(W1, w2, Sigma.shape[0])
    s = float(check_positive(s, "s", ndim=0))
    eta = float(check_positive(eta, "eta", ndim=0))
    sb = np.sqrt(b)
    with np.errstate(over="ignore"):
        theta = eta * s * sb * t
    if np.any(theta > MAX_LOG / 2):
        raise ValueError("t (with s, eta, Sigma): the weights overflow float64 at these times "
                         f"(eta s |Sigma beta| t > {MAX_LOG / 2}); the linearisation is long "
                         "invalid there")
    tau = eta * s * t
    C = np.cosh(theta)
    S_b = tau * np.where(theta > 0, np.sinh(theta) / np.where(theta > 0, theta, 1.0), 1.0)
    Cm_b = 0.5 * tau ** 2 * np.where(theta > 0, (np.sinh(0.5 * theta)
                                                / np.where(theta > 0, 0.5 * theta, 1.0)), 1.0) ** 2
    with np.errstate(over="ignore", invalid="ignore"):
        wg = W0 @ g
        a = C[..., None] * a0 + S_b[..., None] * wg
        c = S_b[..., None] * a0 + Cm_b[..., None] * wg
        W = W0 + c[..., :, None] * g
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(a))):
        raise ValueError("W1, w2 (with Sigma): the weights overflow float64")
    return W, a


def unwhitened_kernel_matrix(t, W1, w2, Sigma, beta, s, eta=1.0):
    """Phase-I NTK matrix M(t) = W(t)ᵀW(t) + |a(t)|² I, so that K(x, x') = xᵀ M x'.

    W(t), a(t) from :func:`unwhitened_linear_weights`.  As t grows,
    M(t) ≈ |a(t)|² (I + ĝĝᵀ) with ĝ = Σβ/‖Σβ‖: the kernel grows along Σβ, not β.
    Source: app. C.3 (the kernel form), sec. 4 (r_1 aligns with Σβ).

    Parameters
    ----------
    t, W1, w2, Sigma, beta, s, eta : as in :func:`unwhitened_linear_weights`

    Returns
    -------
    (T, D, D) or (D, D) ndarray

    Examples
    --------
    >>> import numpy as np
    >>> M = unwhitened_kernel_matrix(0.0, np.eye(2), [1.0, 0.0], np.eye(2), [1.0, 0.0], 1.0)
    >>> M
    array([[2., 0.],
           [0., 2.]])
    """
    W, a = unwhitened_linear_weights(t, W1, w2, Sigma, beta, s, eta)
    D = W.shape[-1]
    # quadratic in (W, a): one exact power-of-two scale for both, back on at the end
    # (exact where representable, +-inf beyond, never NaN)
    e = pow2_normalise(np.concatenate([W.ravel(), a.ravel()]))[1]
    W, a = np.ldexp(W, -e), np.ldexp(a, -e)
    M = np.swapaxes(W, -1, -2) @ W + np.einsum("...n,...n->...", a, a)[..., None, None] * np.eye(D)
    return ldexp_safe(M, 2 * e)
