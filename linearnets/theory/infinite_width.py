r"""The width → ∞ kernels (NNGP and NTK) of a network in the package's "ntk" parameterisation.

The network (``init_parameterised(sizes, "ntk", sigma, biases=biases, bias_std=bias_std)``,
L = ``depth`` layers): ``z_1 = W_1 x/√D + b_1``, ``z_l = W_l φ(z_{l−1})/√N_{l−1} + b_l``
(1 < l < L), ``f = W_L φ(z_{L−1})/√N_{L−1}``, ``F = α f``, every weight ~ N(0, σ²), the
hidden biases ~ N(0, bias_std²) and trained when ``biases``.  With every hidden width → ∞
the pre-activations of a unit at x, x′ become Gaussian, (u, v) ~ N(0, Λ_l), and
(Jacot et al. 2018; Lee et al. 2018; Arora et al. 2019, in this parameterisation)

.. math::

    Q_0 = x\cdot x'/D, \quad \Theta_0 = 0, \qquad \text{for } l = 1, \dots, L-1:\\
    \Lambda_l = \sigma^2 Q_{l-1} + b^2, \quad
    \Theta_l = \sigma^2 \dot Q_{l-1} \Theta_{l-1} + Q_{l-1} + [\text{biases}], \quad
    Q_l = E_{\Lambda_l}[\phi(u)\phi(v)], \quad \dot Q_l = E_{\Lambda_l}[\phi'(u)\phi'(v)],\\
    \text{NNGP} = \alpha^2 \sigma^2 Q_{L-1}, \qquad
    \text{NTK} = \alpha^2 (\sigma^2 \dot Q_{L-1} \Theta_{L-1} + Q_{L-1}),

with b = ``bias_std`` when ``biases`` (else 0) and [biases] = 1 or 0 (the derivation:
``theory/infinite_width.md``).

The Gaussian expectations
-------------------------
*ReLU, leaky ReLU (slope s) and linear* (s = 1): with Λ = [[a, λ], [λ, c]] and
λ = √(ac) cos θ, ``φ = (1 − s) relu + s·id`` gives the arc-cosine forms (Cho & Saul 2009)

    E[φφ] = √(ac) [(1 − s)² J(θ)/(2π) + s cos θ],  J(θ) = sin θ + (π − θ) cos θ,
    E[φ′φ′] = (1 − s)² (π − θ)/(2π) + s.

The angle θ is carried from layer to layer, never recomputed as arccos of a rounded
cosine: θ_{l+1} = atan2(√det Λ_{l+1}, λ_{l+1}) with det Λ_{l+1} written as a sum of
non-negative terms in 1 − cos-like quantities (series near θ = 0), and θ_1 of nearly
(anti)parallel inputs from the differences of the normalised inputs
(θ = 2 atan2(‖û − v̂‖, ‖û + v̂‖)), so identical inputs give θ = 0 exactly and every
kernel is exact to rounding there too.

*tanh and softplus (β)*: the 2-D Gaussian integral in normal coordinates,
u = √a z₁, v = √c (ρ z₁ + √(1 − ρ²) z₂), is expanded in Hermite polynomials (Mehler's
formula): E[g(u) g(v)] = Σ_n ρⁿ c_n(a) c_n(c), c_n(a) = E[g(√a z) He_n(z)]/√n!.  The
coefficients of each sample are one 1-D quadrature (composite Gauss–Legendre on
[−12, 12], 48 panels × 20 nodes, exact to rounding for these integrands); each pair costs
one Horner sum.  The series is cut at the first order N at which every sample's
Parseval remainder E[g²] − Σ_{n<N} c_n² is below ``TAIL_RTOL`` E[g²]; by Cauchy–Schwarz
the error of every pair is then ≤ TAIL_RTOL √(E[g(u)²] E[g(v)²]) (at ρ = 1 included), a
bound computed, not assumed.  At pre-activation variances O(1) this takes N ≈ 60–250.
"""
from __future__ import annotations

import functools
import math
import numbers
import warnings

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.special import expit

from .._validation import as_float_array, check_depth, check_nonnegative, check_positive
from .ntk import _check_pair

__all__ = ["infinite_width_kernels", "infinite_width_layer_kernels", "ACTIVATIONS"]

#: The activations of ``gradient_flow`` and the default of their parameter.
ACTIVATIONS = {"linear": None, "relu": None, "leaky_relu": 0.01, "softplus": 1.0, "tanh": None}
#: Mehler series: cut where every sample's Parseval remainder is below this fraction of E[g²].
TAIL_RTOL = 1e-12
#: First and largest truncation order of the Mehler series (doubling in between).
N_START = 128
N_MAX = 2048
#: The 1-D rule for the Hermite coefficients: composite Gauss-Legendre on [-Z_MAX, Z_MAX].
Z_MAX = 12.0
PANELS = 48
PANEL_NODES = 20
#: Pairs with sin²θ below this get θ from the differences of the normalised inputs.
REFINE_SIN2 = 1e-2
#: Pairs per block (bounds the memory of the pair arrays).
BLOCK_PAIRS = 1 << 20
#: Below this angle sin θ − θ cos θ comes from its series.
_SERIES_THETA = 0.1


def _parse_activation(activation):
    if isinstance(activation, str):
        name, par = activation, None
    elif (isinstance(activation, (tuple, list)) and len(activation) == 2
          and isinstance(activation[0], str)):
        name, par = activation
    else:
        raise ValueError(f"activation must be a name from {tuple(ACTIVATIONS)} or a pair "
                         f"(name, parameter), got {activation!r}")
    if name not in ACTIVATIONS:
        raise ValueError(f"activation: unknown {name!r}; choose from {tuple(ACTIVATIONS)}")
    if par is None:
        return name, ACTIVATIONS[name]
    if ACTIVATIONS[name] is None:
        raise ValueError(f"activation: {name!r} takes no parameter, got {par!r}")
    if isinstance(par, bool) or not isinstance(par, numbers.Real) or not math.isfinite(par):
        raise ValueError(f"activation: the parameter of {name!r} must be a finite number, "
                         f"got {par!r}")
    par = float(par)
    if name == "softplus" and not par > 0:
        raise ValueError(f"activation: the beta of 'softplus' must be > 0, got {par!r}")
    if name == "leaky_relu" and not 0 <= par < 1:
        raise ValueError(f"activation: the slope of 'leaky_relu' must be in [0, 1), got {par!r}")
    return name, par


# ---------------------------------------------------------------------------------------
# the 1-D rule and the Hermite functions (built once)
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _rule():
    """Nodes z (n,), Gaussian weights w (n,) and HW (N_MAX, n) with HW[k] · g = E[g He_k]/√k!."""
    x, w = leggauss(PANEL_NODES)
    edges = np.linspace(-Z_MAX, Z_MAX, PANELS + 1)
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    z = (mid[:, None] + half[:, None] * x[None, :]).ravel()
    wgl = (half[:, None] * w[None, :]).ravel()
    g4 = np.exp(-0.25 * z * z)
    wz = wgl * g4 * g4 / math.sqrt(2.0 * math.pi)
    # Hermite functions psi_k = He_k / sqrt(k!) e^{-z^2/4} (bounded), by their recurrence
    psi = np.empty((N_MAX, z.size))
    psi[0] = g4
    psi[1] = z * g4
    for k in range(1, N_MAX - 1):
        psi[k + 1] = (z * psi[k] - math.sqrt(k) * psi[k - 1]) / math.sqrt(k + 1)
    HW = psi * (wgl * g4 / math.sqrt(2.0 * math.pi))[None, :]
    return z, wz, HW


def _smooth(name, par):
    """(g, g', parity of g, parity of g'): parity 1 odd, 0 even, None neither."""
    if name == "tanh":
        return np.tanh, (lambda u: 1.0 - np.tanh(u) ** 2), 1, 0
    b = par
    return (lambda u: np.logaddexp(0.0, b * u) / b), (lambda u: expit(b * u)), None, None


def _mehler_tables(variances, fn):
    """Hermite coefficients of ``fn(√a z)`` for every sample, cut at the order the tail allows.

    ``variances`` is a list of (n_i,) arrays; returns (list of C (n_i, N)), list of E[g²]
    (n_i,), and the bound max remainder / E[g²] reached.
    """
    z, wz, HW = _rule()
    Phis = [fn(np.sqrt(a)[:, None] * z[None, :]) for a in variances]
    tots = [(P * P) @ wz for P in Phis]
    N = N_START
    while True:
        Cs = [P @ HW[:N].T for P in Phis]
        rems = [(t[:, None] - np.cumsum(C * C, axis=1)) for t, C in zip(tots, Cs)]
        rel = np.max([np.max(r / np.where(t > 0, t, 1.0)[:, None], axis=0)
                      for r, t in zip(rems, tots) if r.size], axis=0) \
            if any(r.size for r in rems) else np.zeros(N)
        ok = np.nonzero(rel <= TAIL_RTOL)[0]
        if ok.size or N >= N_MAX:
            n_cut = int(ok[0]) + 1 if ok.size else N
            if not ok.size:
                warnings.warn(f"infinite_width_kernels: the Hermite series reached only "
                              f"{float(rel[-1]):.1e} of E[phi^2] at order {N_MAX} (pre-activation "
                              f"variance up to {max(float(np.max(a, initial=0)) for a in variances):.3g});"
                              f" the tanh/softplus kernels are accurate to about that, relative",
                              RuntimeWarning, stacklevel=3)
            return [C[:, :n_cut] for C in Cs], tots, float(rel[n_cut - 1])
        N = min(2 * N, N_MAX)


def _mehler_pairs(rho, C1, C2, parity, jstart):
    """Σ_n ρⁿ C1[i, n] C2[j, n] for every pair of the block (only the orders of ``parity``)."""
    from . import _infinite_width_kernels as _k

    if parity is None:
        offset, step, sl = 0, 1, slice(None)
    else:
        offset, step, sl = parity, 2, slice(parity, None, 2)
    A = np.ascontiguousarray(C1[:, sl])
    BT = np.ascontiguousarray(C2[:, sl].T)
    out = np.zeros(rho.shape)
    if A.shape[1] == 0:
        return out
    return _k.mehler_sums(np.ascontiguousarray(rho), A, BT, offset, step, jstart, out)


# ---------------------------------------------------------------------------------------
# the arc-cosine family (relu, leaky_relu, linear)
# ---------------------------------------------------------------------------------------
def _one_minus_j_over_pi(theta):
    """g(θ) = 1 − J(θ)/π = [2π sin²(θ/2) − (sin θ − θ cos θ)]/π, without cancellation."""
    small = theta < _SERIES_THETA
    t2 = theta * theta
    s = np.where(small, theta * t2 * (1 / 3 - t2 * (1 / 30 - t2 * (1 / 840 - t2 * (1 / 45360 - t2 / 3991680)))),
                 np.sin(theta) - theta * np.cos(theta))
    return (2.0 * math.pi * np.sin(0.5 * theta) ** 2 - s) / math.pi


def _first_angle(Xr, Xc, Lam, a, c, sigma2, b2, D):
    """θ_1 of every pair: atan2(√det, λ), and from the normalised inputs' differences where
    sin²θ < REFINE_SIN2 (nearly parallel or antiparallel)."""
    det = np.maximum(a[:, None] * c[None, :] - Lam * Lam, 0.0)
    theta = np.arctan2(np.sqrt(det), Lam)
    ii, jj = np.nonzero((det <= REFINE_SIN2 * a[:, None] * c[None, :])
                        & (a[:, None] > 0) & (c[None, :] > 0))
    if ii.size:
        sa, sc = np.sqrt(a), np.sqrt(c)
        step = max(1, BLOCK_PAIRS // max(1, Xr.shape[1]))
        for k0 in range(0, ii.size, step):
            i, j = ii[k0:k0 + step], jj[k0:k0 + step]
            du = Xr[i] / sa[i, None] - Xc[j] / sc[j, None]
            su = Xr[i] / sa[i, None] + Xc[j] / sc[j, None]
            dn = sigma2 / D * np.einsum("kd,kd->k", du, du)
            sn = sigma2 / D * np.einsum("kd,kd->k", su, su)
            if b2 > 0:
                db = 1.0 / sa[i] - 1.0 / sc[j]
                sb = 1.0 / sa[i] + 1.0 / sc[j]
                dn = dn + b2 * db * db
                sn = sn + b2 * sb * sb
            theta[i, j] = 2.0 * np.arctan2(np.sqrt(dn), np.sqrt(sn))
    return theta


def _arccos_layer(theta, a, c, s):
    """E[φφ] / √(ac) and E[φ′φ′] for φ = (1 − s) relu + s id, and g(θ)."""
    g = _one_minus_j_over_pi(theta)
    kappa = (1 - s) ** 2 * 0.5 * (1.0 - g) + s * np.cos(theta)
    dot = (1 - s) ** 2 * (math.pi - theta) / (2 * math.pi) + s
    # a unit whose pre-activation is identically 0 has phi'(0) = s (relu: 0)
    za, zc = a[:, None] == 0, c[None, :] == 0
    if np.any(za) or np.any(zc):
        m1 = lambda v: np.where(v > 0, 0.5 * (1 - s) + s, s)  # noqa: E731  E[phi'(u)]
        dot = np.where(za | zc, s * np.where(za, m1(c)[None, :], m1(a)[:, None]), dot)
    return kappa, dot, g


def _next_angle(theta, g, a, c, s, sigma2, b2, Lam_next):
    """θ of the next layer from det Λ' = r²(1 − j)(1 + j) + b²((√p − √q)² + 2r(1 − j))."""
    ns = 0.5 * (1 + s * s)
    p, q = sigma2 * ns * a, sigma2 * ns * c
    r = np.sqrt(p[:, None] * q[None, :])
    omj = ((1 - s) ** 2 * 0.5 * g + 2 * s * np.sin(0.5 * theta) ** 2) / ns
    opj = ((1 - s) ** 2 * 0.5 * (2.0 - g) + 2 * s * np.cos(0.5 * theta) ** 2) / ns
    dq = (np.sqrt(p)[:, None] - np.sqrt(q)[None, :]) ** 2
    det = r * r * omj * opj + b2 * (dq + 2.0 * r * omj)
    return np.arctan2(np.sqrt(np.maximum(det, 0.0)), Lam_next)


# ---------------------------------------------------------------------------------------
# the public function
# ---------------------------------------------------------------------------------------
def infinite_width_kernels(X1, X2, depth, activation="relu", *, sigma=1.0, biases=False,
                           bias_std=0.0, alpha=1.0):
    r"""NNGP and NTK of the infinitely wide "ntk"-parameterised network (the module's equations).

    .. math::

        \Lambda_l = \sigma^2 Q_{l-1} + b^2,\quad
        \Theta_l = \sigma^2 \dot Q_{l-1}\Theta_{l-1} + Q_{l-1} + [\mathrm{biases}],\quad
        \mathrm{NNGP} = \alpha^2\sigma^2 Q_{L-1},\quad
        \mathrm{NTK} = \alpha^2(\sigma^2\dot Q_{L-1}\Theta_{L-1} + Q_{L-1}),

    Q_0 = x·x′/D, Θ_0 = 0, Q_l and Q̇_l the Gaussian expectations of φφ and φ′φ′ over
    Λ_l (Jacot, Gabriel & Hongler 2018, Thm. 1; Lee et al. 2018, eq. 4; Arora et al. 2019,
    eqs. 4–6, in this package's parameterisation: derivation and checks in
    ``theory/infinite_width.md``).  ``nngp`` is the covariance of F(x), F(x′) at t = 0 of
    ``init_parameterised(sizes, "ntk", sigma, biases=biases, bias_std=bias_std)`` with
    ``F = alpha f``, every hidden width → ∞; ``ntk`` the limit of ``empirical_ntk`` with
    the same keywords, per output (C outputs: K ⊗ I_C).  Depth 1: α²σ² x·x′/D and α² x·x′/D.

    ReLU, leaky ReLU and linear: closed arc-cosine forms, exact to rounding (identical
    inputs included).  tanh and softplus: Mehler's expansion of the 2-D Gaussian integral,
    error ≤ ``TAIL_RTOL`` · √(E[φ(u)²] E[φ(v)²]) per layer (a computed bound; a
    ``RuntimeWarning`` gives the bound reached if order ``N_MAX`` does not attain it, at
    pre-activation variances far above 1).

    Parameters
    ----------
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
        The inputs; when X2 equals X1 the kernels are computed once per pair and are
        exactly symmetric.
    depth : int
        L ≥ 1, the number of weight layers.
    activation : str or tuple
        "linear", "relu", "leaky_relu" (or ("leaky_relu", s), 0 ≤ s < 1, default 0.01),
        "softplus" (or ("softplus", β), β > 0, default 1), "tanh".
    sigma : float
        Weight standard deviation σ > 0.
    biases : bool
        Hidden biases present and trained.
    bias_std : float
        Their standard deviation at t = 0, ≥ 0 (ignored without ``biases``).
    alpha : float
        Output scale α > 0 of F = α f.

    Returns
    -------
    nngp : (P1, P2) ndarray
    ntk : (P1, P2) ndarray

    Raises
    ------
    ValueError
        Naming the argument: depth not an integer ≥ 1, σ ≤ 0 or not finite, bias_std < 0,
        α ≤ 0, an unknown activation or bad parameter, X1 and X2 not 2-D, not finite, with
        different D, or D = 0.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> nngp, ntk = infinite_width_kernels(X, X, 2, "relu")
    >>> bool(np.allclose(nngp, [[0.25, 0.25 / np.pi], [0.25 / np.pi, 0.25]]))
    True
    """
    X1, X2 = _check_pair(X1, X2)
    L = check_depth(depth, "depth")
    name, par = _parse_activation(activation)
    sigma = float(check_positive(sigma, "sigma", ndim=0))
    if not isinstance(biases, (bool, np.bool_)):
        raise ValueError(f"biases must be True or False, got {biases!r}")
    bias_std = float(check_nonnegative(bias_std, "bias_std", ndim=0))
    alpha = float(check_positive(alpha, "alpha", ndim=0))
    b2 = bias_std ** 2 if biases else 0.0
    nngp, ntk = _compute(X1, X2, L, name, par, np.full(L, sigma * sigma), np.full(L - 1, b2),
                         1.0 if biases else 0.0, parts=False)
    return alpha ** 2 * nngp, alpha ** 2 * ntk


def infinite_width_layer_kernels(X1, X2, depth, activation="relu", *, sigmas, bias_stds=None):
    r"""The infinite-width NTK layer by layer, with a weight scale per layer.

    The network of :func:`infinite_width_kernels` with W_l ~ N(0, σ_l²) (multiplier
    1/√N_{l−1}) and hidden biases b_l ~ N(0, b_l²); α = 1.  Returns the NNGP and the NTK
    of each layer's weights and of each hidden layer's biases, so that a model whose layer-l
    weights move at rate r_l and biases at ρ_l has the NTK Σ_l r_l W_l + Σ_l ρ_l B_l
    (``infinite_width_kernels`` is all rates 1, biases counted when trained).  In the
    recursion of the module docstring layer l's weights enter as Q_{l−1} and its bias as 1,
    and every later layer k multiplies what came before by σ_k² Q̇_{k−1}.  A network
    written with multiplier 1 and W_l ~ N(0, β_l²) (Zhou et al.'s, Luo et al.'s) is this one
    with σ_l = β_l √N_{l−1} and weight rates N_{l−1} (its gradients lack the 1/√N_{l−1}).

    Parameters
    ----------
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
    depth : int
        L ≥ 1.
    activation : str or tuple
        As for :func:`infinite_width_kernels`.
    sigmas : (L,) array_like
        σ_l > 0.
    bias_stds : (L − 1,) array_like, optional
        b_l ≥ 0 (default zeros: biases drawn 0, their NTK still returned).

    Returns
    -------
    nngp : (P1, P2) ndarray
    weights : (L, P1, P2) ndarray
        ``weights[l]``: the NTK of the parameters of W_{l+1}.
    biases : (L − 1, P1, P2) ndarray
        ``biases[l]``: the NTK of b_{l+1}.
    """
    X1, X2 = _check_pair(X1, X2)
    L = check_depth(depth, "depth")
    name, par = _parse_activation(activation)
    s = check_positive(sigmas, "sigmas", ndim=1)
    if s.size != L:
        raise ValueError(f"sigmas must have depth = {L} entries, got {s.size}")
    b = np.zeros(L - 1) if bias_stds is None else check_nonnegative(bias_stds, "bias_stds", ndim=1)
    if b.size != L - 1:
        raise ValueError(f"bias_stds must have depth - 1 = {L - 1} entries, got {b.size}")
    return _compute(X1, X2, L, name, par, s * s, b * b, 0.0, parts=True)


def _compute(X1, X2, L, name, par, s2, b2, tb, parts):
    """The recursion on validated inputs: σ_l² = ``s2[l-1]``, b_l² = ``b2[l-1]``; returns
    (NNGP, NTK with the biases counted ``tb`` times) or, with ``parts``, (NNGP, weight parts,
    bias parts)."""
    D = X1.shape[1]
    if D == 0:
        raise ValueError("X1 and X2 must have at least one column (D >= 1)")
    sym = X1.shape == X2.shape and np.array_equal(X1, X2)
    if sym:
        X2 = X1
    P1, P2 = X1.shape[0], X2.shape[0]

    # --- the per-sample chain: variances a_l (l = 1..L-1), E[phi^2], E[phi'^2] -----------
    q1 = np.einsum("pd,pd->p", X1, X1) / D
    q2 = q1 if sym else np.einsum("pd,pd->p", X2, X2) / D
    sets = [q1] if sym else [q1, q2]
    var, tabs = [], []          # var[l][k]: variances of set k at layer l+1
    smooth = name in ("tanh", "softplus")
    if smooth:
        fn, dfn, par_f, par_d = _smooth(name, par)
    slope = {"linear": 1.0, "relu": 0.0}.get(name, par)
    for l in range(L - 1):
        a = [s2[l] * q + b2[l] for q in sets]
        var.append(a)
        if smooth:
            Cf, tf, _ = _mehler_tables(a, fn)
            Cd, td, _ = _mehler_tables(a, dfn)
            tabs.append((Cf, tf, Cd, td))
            sets = tf
        else:
            sets = [0.5 * (1 + slope * slope) * v for v in a]

    nngp = np.empty((P1, P2))
    outs = [nngp]
    if parts:
        Wp, Bp = np.empty((L, P1, P2)), np.empty((L - 1, P1, P2))
        outs += list(Wp) + list(Bp)
    else:
        ntk = np.empty((P1, P2))
        outs.append(ntk)
    B = max(1, BLOCK_PAIRS // max(1, P2))
    for r0 in range(0, P1, B):
        r1 = min(P1, r0 + B)
        c0 = r0 if sym else 0
        rows, cols = slice(r0, r1), slice(c0, P2)
        nb = r1 - r0
        diag = (np.arange(nb), np.arange(nb)) if sym else None
        jstart = np.arange(nb, dtype=np.int64) if sym else np.zeros(nb, dtype=np.int64)
        Q = X1[rows] @ X2[cols].T / D
        if sym:
            Q[diag] = q1[rows]
        Th = np.zeros_like(Q)
        wparts, bparts = [], []
        dQ = None
        theta = None
        for l in range(L - 1):
            Lam = s2[l] * Q + b2[l]
            if dQ is not None:
                back = s2[l] * dQ
                Th = back * Th
                wparts = [back * w for w in wparts]
                bparts = [back * v for v in bparts]
            Th = Th + Q + tb
            if parts:
                wparts.append(Q)
                bparts.append(np.ones_like(Q))
            k2 = 0 if sym else 1
            a, c = var[l][0][rows], var[l][k2][cols]
            if name == "linear":
                Q, dQ = Lam, np.ones_like(Lam)
            elif not smooth:
                if theta is None:
                    theta = _first_angle(X1[rows], X2[cols], Lam, a, c, s2[0], b2[0], D)
                kappa, dQ, g = _arccos_layer(theta, a, c, slope)
                Q = np.sqrt(a[:, None] * c[None, :]) * kappa
                if l < L - 2:
                    theta = _next_angle(theta, g, a, c, slope, s2[l + 1], b2[l + 1], s2[l + 1] * Q + b2[l + 1])
            else:
                Cf, tf, Cd, td = tabs[l]
                den = np.sqrt(a[:, None] * c[None, :])
                rho = np.clip(np.divide(Lam, den, out=np.zeros_like(Lam), where=den > 0), -1.0, 1.0)
                Q = _mehler_pairs(rho, Cf[0][rows], Cf[k2][cols], par_f, jstart)
                dQ = _mehler_pairs(rho, Cd[0][rows], Cd[k2][cols], par_d, jstart)
                if sym:
                    Q[diag] = tf[0][rows]
                    dQ[diag] = td[0][rows]
        sL = s2[L - 1]
        if parts:
            if dQ is not None:
                wparts = [sL * dQ * w for w in wparts]
                bparts = [sL * dQ * v for v in bparts]
            blocks = [sL * Q] + wparts + [Q] + bparts
        else:
            blocks = [sL * Q, (sL * dQ * Th if dQ is not None else 0.0) + Q]
        for out, blk in zip(outs, blocks):
            if sym:
                sq = blk[:, :nb]
                out[rows, rows] = np.triu(sq) + np.triu(sq, 1).T
                out[rows, r1:] = blk[:, nb:]
                out[r1:, rows] = blk[:, nb:].T
            else:
                out[rows] = blk
    if parts:
        return nngp, Wp, Bp
    return nngp, ntk
