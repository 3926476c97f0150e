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

*tanh and softplus (β)*: two independent rules, chosen per sample by the pre-activation
scale.

- **Mehler** (O(1) scales, the fast path): in normal coordinates u = √a z₁,
  v = √c (ρ z₁ + √(1 − ρ²) z₂), E[g(u) g(v)] = Σ_n ρⁿ c_n(a) c_n(c),
  c_n(a) = E[g(√a z) He_n(z)]/√n!.  The coefficients of each sample are one 1-D quadrature
  (composite Gauss–Legendre on [−12, 12], 48 panels × 20 nodes); each pair costs one Horner
  sum.  The series is cut at the first order N at which every such sample's Parseval
  remainder E[g²] − Σ_{n<N} c_n² is below ``TAIL_RTOL`` E[g²]; by Cauchy–Schwarz the error
  of every pair is then ≤ TAIL_RTOL √(E[g(u)²] E[g(v)²]) (at ρ = 1 included), a bound
  computed, not assumed.  The order grows linearly with the scale (E[tanh′ tanh′]: N ≈ 120 a),
  so a sample whose remainder is not below the bound by order ``N_MAX`` (or whose
  β²a exceeds ``MEHLER_MAX_SCALE``) goes to the second rule.
- **Gaussian scale mixture** (every scale): the logistic distribution is a Gaussian scale
  mixture with a Kolmogorov-distributed standard deviation K (Andrews & Mallows 1974;
  Stefanski 1991), so with K₁, K₂ iid and t = K² (tanh) or t = (2K/β)² (softplus),
  det′ = (a + t₁)(c + t₂) − λ² and θ′ = atan2(√det′, λ),

      E[tanh u tanh v] = E_K[(2/π) atan2(λ, √det′)],    E[tanh′u tanh′v] = E_K[2/(π √det′)],
      E[sp u sp v] = E_K[(√det′ + (π − θ′) λ)/(2π)],   E[sp′u sp′v] = E_K[(π − θ′)/(2π)]

  (tanh u = E[erf(u/(√2 K))], tanh′ u = 2 E[N(u; 0, K²)], sp_β u = E[relu(u − K′z)],
  sp′_β u = E[1(u > K′z)]; the inner Gaussian expectations are arcsine and arc-cosine
  kernels of the covariance Λ + diag(t₁, t₂)).  The mixing integrand is smooth at every
  (a, c, ρ), so a ``MIX_NODES``-point Gauss rule in 1/K for the Kolmogorov law reaches
  rounding (≤ 3e-15 measured over scales 1e-3..1e4 and ρ up to 1).  det Λ of the first
  layer comes from its angle (below); every quantity is scaled by max(a, 1), so any
  finite variance is in range.

A pre-activation variance beyond the float range (huge X, σ or bias_std) is a
``ValueError`` for these two; the arc-cosine family carries every per-sample scale as a
power of two and is exact (±inf only where the kernel itself overflows).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.special import expit

from .._validation import check_int, check_nonnegative, check_positive, ldexp_safe
from ..options import ACTIVATIONS, named_choice
from .ntk import _check_pair

__all__ = ["infinite_width_kernels", "infinite_width_layer_kernels", "ACTIVATIONS"]

#: Mehler series: cut where every sample's Parseval remainder is below this fraction of E[g²].
TAIL_RTOL = 1e-12
#: First and largest truncation order of the Mehler series (doubling in between).
N_START = 128
N_MAX = 2048
#: Samples with (β²) a above this go to the scale mixture without trying the Mehler series
#: (E[tanh′ tanh′] needs N ≈ 120 a: order N_MAX is reached near a = 17).
MEHLER_MAX_SCALE = 24.0
#: The 1-D rule for the Hermite coefficients: composite Gauss-Legendre on [-Z_MAX, Z_MAX].
Z_MAX = 12.0
PANELS = 48
PANEL_NODES = 20
#: Nodes of the Gauss rule for the Kolmogorov mixing law (in the variable 1/K), per side.
MIX_NODES = 24
#: Pairs with sin²θ below this get θ from the differences of the normalised inputs.
REFINE_SIN2 = 1e-2
#: The deepest network accepted (the recursion runs layer by layer; beyond this a ValueError).
MAX_DEPTH = 100_000
#: Pairs per block (bounds the memory of the pair arrays).
BLOCK_PAIRS = 1 << 20
#: Below this angle sin θ − θ cos θ comes from its series.
_SERIES_THETA = 0.1
#: Exponent of a zero in the (mantissa, exponent) per-sample scales.
_ZERO_EXP = -(1 << 30)
#: Exponent differences are clipped to this before ldexp (far beyond the float range).
_EXP_CLIP = 1 << 20


# ---------------------------------------------------------------------------------------
# per-sample scales as (mantissa, exponent): exact powers of two, no overflow
# ---------------------------------------------------------------------------------------
def _xnorm(m, e):
    """(m, e) renormalised to a mantissa in [0.5, 1) (zero: (0, _ZERO_EXP))."""
    m2, de = np.frexp(np.asarray(m, dtype=np.float64))
    e = np.asarray(e, dtype=np.int64) + de
    return m2, np.where(m2 == 0, _ZERO_EXP, np.maximum(e, _ZERO_EXP))


def _xfloat(v):
    return _xnorm(v, 0)


def _xmul(A, B):
    return _xnorm(A[0] * B[0], A[1] + B[1])


def _xadd(A, B):
    """A + B for non-negative A, B."""
    E = np.maximum(A[1], B[1])
    return _xnorm(_shift(A[0], A[1] - E) + _shift(B[0], B[1] - E), E)


def _xsqrt(A):
    odd = (A[1] % 2).astype(bool)
    return _xnorm(np.sqrt(np.where(odd, 2.0 * A[0], A[0])), (A[1] - odd) // 2)


def _xratio(A, B):
    """A / B as a float (0 where B is 0)."""
    return np.where(B[0] > 0, _shift(A[0] / np.where(B[0] > 0, B[0], 1.0), A[1] - B[1]), 0.0)


def _shift(x, e):
    """x 2**e (exact; 0 below the range, ±inf above it, no warning)."""
    return ldexp_safe(x, np.clip(e, -_EXP_CLIP, _EXP_CLIP))


def _xexp(A):
    """The exponent of a per-sample scale, 0 for a zero (the row of a zero is exactly 0)."""
    return np.where(A[0] > 0, A[1], 0)


# ---------------------------------------------------------------------------------------
# the 1-D rule and the Hermite functions; the Kolmogorov rule (built once)
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


def _kolmogorov_pdf(k):
    """Density of the Kolmogorov distribution, P(K ≤ k) = 1 − 2 Σ (−1)^{j−1} e^{−2j²k²}: that
    series' derivative for k ≥ 1, the theta-transformed one, √(2π)/k Σ e^{−(2j−1)²π²/(8k²)},
    below (both converge to rounding in a few terms there)."""
    k = np.asarray(k, dtype=np.float64)
    out = np.zeros_like(k)
    lo = (k > 0) & (k < 1.0)
    kl = k[lo]
    for j in range(1, 6):
        q = (2 * j - 1) ** 2 * math.pi ** 2 / 8
        out[lo] += math.sqrt(2 * math.pi) * np.exp(-q / kl ** 2) * (2 * q / kl ** 4 - 1 / kl ** 2)
    hi = k >= 1.0
    kh = k[hi]
    for j in range(1, 12):
        out[hi] += 8 * kh * (-1) ** (j - 1) * j * j * np.exp(-2 * j * j * kh * kh)
    return out


@functools.lru_cache(maxsize=8)
def _kolmogorov_rule(inverse, n=MIX_NODES):
    """The ``n``-point (default ``MIX_NODES``) Gauss rule of the Kolmogorov law in the variable y = 1/K
    (``inverse``) or y = K: nodes K (n,) and weights (n,), E[h(K)] ≈ Σ w h(K).  By the
    Lanczos process (full reorthogonalisation) on a composite Gauss-Legendre discretisation
    of the density (400 panels × 20 nodes on (0, 8]; the mass outside is below 1e-50).
    The tanh integrands tend to polynomials in 1/K at small scales (2λ/(π K₁K₂)), the
    softplus ones to polynomials in K (K₁K₂/(2π)): each takes the variable that makes its
    small-scale limit exact."""
    x, w = leggauss(20)
    e = np.linspace(0.0, 8.0, 401)
    half, mid = 0.5 * np.diff(e), 0.5 * (e[1:] + e[:-1])
    k = (mid[:, None] + half[:, None] * x).ravel()
    with np.errstate(under="ignore"):
        wk = (half[:, None] * w).ravel() * _kolmogorov_pdf(k)
    keep = wk > 0
    y, wk = (1.0 / k[keep] if inverse else k[keep]), wk[keep]
    Qv = np.zeros((n + 1, y.size))
    Qv[0] = np.sqrt(wk / wk.sum())
    al, be = np.zeros(n), np.zeros(n)
    for i in range(n):
        v = y * Qv[i]
        if i:
            v -= be[i - 1] * Qv[i - 1]
        al[i] = Qv[i] @ v
        v -= al[i] * Qv[i]
        v -= Qv[:i + 1].T @ (Qv[:i + 1] @ v)
        be[i] = np.linalg.norm(v)
        Qv[i + 1] = v / be[i]
    ev, V = np.linalg.eigh(np.diag(al) + np.diag(be[:-1], 1) + np.diag(be[:-1], -1))
    return (1.0 / ev if inverse else ev), wk.sum() * V[0] ** 2


def _smooth(name, par):
    """(g, g', parity of g, parity of g', kind for the mixture, mixing variances t (n,),
    weights (n,), scale² of the argument): parity 1 odd, 0 even, None neither."""
    if name == "tanh":
        K, wK = _kolmogorov_rule(True)
        return np.tanh, (lambda u: 1.0 - np.tanh(u) ** 2), 1, 0, 0, K * K, wK, 1.0
    K, wK = _kolmogorov_rule(False)
    b = par
    return ((lambda u: np.logaddexp(0.0, b * u) / b), (lambda u: expit(b * u)), None, None,
            1, (2.0 * K / b) ** 2, wK, b * b)


def _mehler_tables(a, fn, ok):
    """Hermite coefficients of ``fn(√a z)`` for the samples ``ok`` of ``a`` (n,), cut at the
    order their Parseval remainders allow.

    Returns C (n, N) (rows outside ``ok`` zero), E[g²] (n,) (NaN outside ``ok``) and the
    samples of ``ok`` whose remainder is below ``TAIL_RTOL`` E[g²] by order ``N_MAX``.
    """
    z, wz, HW = _rule()
    idx = np.flatnonzero(ok)
    Phi = fn(np.sqrt(a[idx])[:, None] * z[None, :])
    tot = (Phi * Phi) @ wz
    scale = np.where(tot > 0, tot, 1.0)
    N = N_START
    while True:
        C = Phi @ HW[:N].T
        rel = (tot[:, None] - np.cumsum(C * C, axis=1)) / scale[:, None]
        met = rel <= TAIL_RTOL
        reached = met.any(axis=1)
        if reached.all() or N >= N_MAX:
            break
        N = min(2 * N, N_MAX)
    order = np.where(reached, np.argmax(met, axis=1) + 1, N_MAX + 1)
    good = np.zeros(a.shape, dtype=bool)
    good[idx[reached]] = True
    cut = int(order[reached].max()) if reached.any() else 1
    Cfull = np.zeros((a.size, cut))
    Cfull[idx[reached]] = C[reached, :cut]
    tfull = np.full(a.shape, np.nan)
    tfull[idx] = tot
    return Cfull, tfull, good


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
# inputs: per-sample scales and unit vectors
# ---------------------------------------------------------------------------------------
def _inputs(X, sigma, b):
    """Per sample: ‖x‖/√D as (mantissa, exponent), the unit vectors x̂ (P, D) (0 for x = 0),
    the first layer's variance a = σ²‖x‖²/D + b² as (mantissa, exponent), and the augmented
    unit vectors û = (√π x̂, √β) (P, D + 1), π = σ²‖x‖²/(D a), β = b²/a (0 for a = 0)."""
    D = X.shape[1]
    mx = np.max(np.abs(X), axis=1) if D else np.zeros(X.shape[0])
    ex = np.where(mx > 0, np.frexp(mx)[1], 0).astype(np.int64)
    Xs = ldexp_safe(X, -ex[:, None])
    nrm = np.sqrt(np.einsum("pd,pd->p", Xs, Xs))
    xhat = Xs / np.where(nrm > 0, nrm, 1.0)[:, None]
    r = _xnorm(nrm / math.sqrt(D), ex)
    sig, bb = _xfloat(sigma), _xfloat(b)
    p = _xmul(_xmul(sig, sig), _xmul(r, r))
    b2 = _xmul(bb, bb)
    a = _xadd(p, b2)
    pi, beta = _xratio(p, a), _xratio(b2, a)
    U = np.hstack([np.sqrt(pi)[:, None] * xhat, np.sqrt(beta)[:, None]])
    return r, xhat, a, U


def _first_angle(U1, U2, sym):
    """θ_1 of every pair from the augmented unit vectors: atan2(√(1 − cos²), cos), and
    2 atan2(‖û − v̂‖, ‖û + v̂‖) where sin²θ < REFINE_SIN2 (nearly parallel or antiparallel;
    exactly 0 for identical inputs).  Returns (θ, cos θ)."""
    cos = np.clip(U1 @ U2.T, -1.0, 1.0)
    sin2 = np.maximum((1.0 - cos) * (1.0 + cos), 0.0)
    theta = np.arctan2(np.sqrt(sin2), cos)
    n1 = np.einsum("pd,pd->p", U1, U1) > 0
    n2 = np.einsum("pd,pd->p", U2, U2) > 0
    ii, jj = np.nonzero((sin2 < REFINE_SIN2) & n1[:, None] & n2[None, :])
    if ii.size:
        step = max(1, BLOCK_PAIRS // max(1, U1.shape[1]))
        for k0 in range(0, ii.size, step):
            i, j = ii[k0:k0 + step], jj[k0:k0 + step]
            du, su = U1[i] - U2[j], U1[i] + U2[j]
            dn = np.sqrt(np.einsum("kd,kd->k", du, du))
            sn = np.sqrt(np.einsum("kd,kd->k", su, su))
            theta[i, j] = 2.0 * np.arctan2(dn, sn)
            cos[i, j] = (sn - dn) * (sn + dn) / 4.0
    return theta, cos


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


def _arccos_layer(theta, cos, za, zc, s):
    """E[φφ] / √(ac), E[φ′φ′] for φ = (1 − s) relu + s id, and g(θ); ``za``, ``zc``: the
    samples whose pre-activation is identically 0 (then φ′(0) = s, relu: 0)."""
    g = _one_minus_j_over_pi(theta)
    kappa = (1 - s) ** 2 * 0.5 * (1.0 - g) + s * cos
    dot = (1 - s) ** 2 * (math.pi - theta) / (2 * math.pi) + s
    if np.any(za) or np.any(zc):
        m1 = lambda z: np.where(z, s, 0.5 * (1 - s) + s)  # noqa: E731  E[phi'(u)]
        dot = np.where(za[:, None] | zc[None, :],
                       s * np.where(za[:, None], m1(zc)[None, :], m1(za)[:, None]), dot)
    return kappa, dot, g


def _next_angle(theta, g, kappa, s, pr, br, pc, bc):
    """θ′ and cos θ′ of the next layer from the fractions π = σ²n_s a/a′, β = b²/a′ of each
    sample's next variance a′ (rows ``pr``, ``br``; columns ``pc``, ``bc``):

        det Λ′/(a′c′) = π π′ (1 − j)(1 + j) + (√(π β′) − √(π′ β))² + 2 √(π π′ β β′) (1 − j),
        cos θ′ = √(π π′) j + √(β β′),   j = κ/n_s."""
    ns = 0.5 * (1 + s * s)
    omj = ((1 - s) ** 2 * 0.5 * g + 2 * s * np.sin(0.5 * theta) ** 2) / ns
    opj = ((1 - s) ** 2 * 0.5 * (2.0 - g) + 2 * s * np.cos(0.5 * theta) ** 2) / ns
    spp = np.sqrt(pr[:, None] * pc[None, :])
    sbb = np.sqrt(br[:, None] * bc[None, :])
    cross = np.sqrt(pr)[:, None] * np.sqrt(bc)[None, :] - np.sqrt(br)[:, None] * np.sqrt(pc)[None, :]
    det = spp * spp * omj * opj + cross * cross + 2.0 * spp * sbb * omj
    cos = spp * (kappa / ns) + sbb
    return np.arctan2(np.sqrt(np.maximum(det, 0.0)), cos), np.clip(cos, -1.0, 1.0)


def _outer(er, ec):
    return er[:, None] + ec[None, :]


def _arccos_chain(X, sig, bst, tb, s):
    """The per-sample quantities of the arc-cosine recursion for one set of inputs, every
    scale as (mantissa, exponent): layer l (0-based) has variance a_l = σ_l² q_l + b_l²
    (q_0 = ‖x‖²/D, q_{l+1} = n_s a_l), fractions π_l, β_l, √a_l, and Θ's diagonal
    θ_l (θ_0 = q_0 + [biases], θ_{l+1} = σ_{l+1}² d_l θ_l + q_{l+1} + [biases], d_l = n_s or
    s² for a unit identically 0)."""
    L = sig.size
    ns = 0.5 * (1 + s * s)
    r, xhat, a0, U = _inputs(X, sig[0], bst[0] if L > 1 else 0.0)
    q = _xmul(r, r)
    tbx = _xfloat(np.full(X.shape[0], float(tb)))
    th = [_xadd(q, tbx)]
    layers = []
    for l in range(L - 1):
        sg, bb = _xfloat(sig[l]), _xfloat(bst[l])
        p = _xmul(_xmul(sg, sg), q)
        a = _xadd(p, _xmul(bb, bb))
        zero = a[0] == 0
        layers.append(dict(sa=_xsqrt(a), pi=_xratio(p, a), beta=_xratio(_xmul(bb, bb), a), zero=zero))
        q = _xmul(_xfloat(ns), a)
        if l < L - 2:
            sn = _xfloat(sig[l + 1])
            d = _xfloat(np.where(zero, s * s, ns))
            th.append(_xadd(_xadd(_xmul(_xmul(sn, sn), _xmul(d, th[-1])), q), tbx))
    return dict(r=r, xhat=xhat, U=U, layers=layers, th=th)


def _arccos_block(c1, c2, rows, cols, L, s, sig, alpha, tb, parts):
    """The kernels of the pairs rows × cols (each the samples' per-set indices) as full
    float arrays: (NNGP, NTK) or, with ``parts``, (NNGP, weight parts, bias parts)."""
    linear = s == 1.0
    al = _xfloat(alpha)
    sL = _xfloat(sig[L - 1])
    m2 = lambda v: v[0] * v[0]  # noqa: E731
    r1 = (c1["r"][0][rows], c1["r"][1][rows])
    r2 = (c2["r"][0][cols], c2["r"][1][cols])
    cosx = c1["xhat"][rows] @ c2["xhat"][cols].T
    if L == 1:
        base = cosx * r1[0][:, None] * r2[0][None, :] * m2(al)
        e = _outer(r1[1], r2[1]) + 2 * al[1]
        nngp, ntk = _shift(base * m2(sL), e + 2 * sL[1]), _shift(base, e)
        return (nngp, [ntk], []) if parts else (nngp, ntk)
    theta, cos = _first_angle(c1["U"][rows], c2["U"][cols], False)
    # Θ_0 = x·x'/D + [biases], normalised by 2^(T_i + T_j), T the exponents of √θ_0
    T1 = _xexp(_xsqrt((c1["th"][0][0][rows], c1["th"][0][1][rows])))
    T2 = _xexp(_xsqrt((c2["th"][0][0][cols], c2["th"][0][1][cols])))
    Th = (_shift(cosx * r1[0][:, None] * r2[0][None, :], _outer(r1[1] - T1, r2[1] - T2))
          + _shift(float(tb), -_outer(T1, T2)))
    wparts, bparts = [], []     # each [array, row exponents, column exponents]
    if parts:
        wparts.append([cosx * r1[0][:, None] * r2[0][None, :], r1[1].copy(), r2[1].copy()])
        bparts.append([np.ones_like(cosx), np.zeros(len(r1[1]), np.int64), np.zeros(len(r2[1]), np.int64)])
    for l in range(L - 1):
        L1, L2 = c1["layers"][l], c2["layers"][l]
        sa1 = (L1["sa"][0][rows], L1["sa"][1][rows])
        sa2 = (L2["sa"][0][cols], L2["sa"][1][cols])
        if linear:
            kappa, dot, g = cos, np.ones_like(cos), None
        else:
            kappa, dot, g = _arccos_layer(theta, cos, L1["zero"][rows], L2["zero"][cols], s)
        Qm = kappa * sa1[0][:, None] * sa2[0][None, :]       # Q_{l+1} = Qm 2^(Ea_i + Ea_j)
        if l == L - 2:
            break
        n1, n2 = c1["layers"][l + 1], c2["layers"][l + 1]
        if linear:
            theta, cos = None, np.clip(np.sqrt(n1["pi"][rows])[:, None] * np.sqrt(n2["pi"][cols])[None, :] * cos
                                       + np.sqrt(n1["beta"][rows])[:, None] * np.sqrt(n2["beta"][cols])[None, :],
                                       -1.0, 1.0)
        else:
            theta, cos = _next_angle(theta, g, kappa, s, n1["pi"][rows], n1["beta"][rows],
                                     n2["pi"][cols], n2["beta"][cols])
        sn = _xfloat(sig[l + 1])
        if parts:
            for P in wparts + bparts:
                P[0] = m2(sn) * dot * P[0]
                P[1] = P[1] + sn[1]
                P[2] = P[2] + sn[1]
            wparts.append([Qm, sa1[1].copy(), sa2[1].copy()])
            bparts.append([np.ones_like(Qm), np.zeros(len(sa1[1]), np.int64), np.zeros(len(sa2[1]), np.int64)])
            continue
        U1 = _xexp(_xsqrt((c1["th"][l + 1][0][rows], c1["th"][l + 1][1][rows])))
        U2 = _xexp(_xsqrt((c2["th"][l + 1][0][cols], c2["th"][l + 1][1][cols])))
        Th = (_shift(m2(sn) * dot * Th, _outer(T1 + sn[1] - U1, T2 + sn[1] - U2))
              + _shift(Qm, _outer(sa1[1] - U1, sa2[1] - U2)) + _shift(float(tb), -_outer(U1, U2)))
        T1, T2 = U1, U2
    ea = _outer(sa1[1], sa2[1])
    nngp = _shift(Qm * m2(sL) * m2(al), ea + 2 * (sL[1] + al[1]))
    if parts:
        W = [_shift(m2(sL) * dot * P[0] * m2(al), _outer(P[1], P[2]) + 2 * (sL[1] + al[1])) for P in wparts]
        W.append(_shift(Qm * m2(al), ea + 2 * al[1]))
        B = [_shift(m2(sL) * dot * P[0] * m2(al), _outer(P[1], P[2]) + 2 * (sL[1] + al[1])) for P in bparts]
        return nngp, W, B
    N1, N2 = np.maximum(T1 + sL[1], sa1[1]), np.maximum(T2 + sL[1], sa2[1])
    nt = (_shift(m2(sL) * dot * Th, _outer(T1 + sL[1] - N1, T2 + sL[1] - N2))
          + _shift(Qm, _outer(sa1[1] - N1, sa2[1] - N2)))
    return nngp, _shift(nt * m2(al), _outer(N1, N2) + 2 * al[1])


# ---------------------------------------------------------------------------------------
# tanh and softplus
# ---------------------------------------------------------------------------------------
def _overflow(what, names):
    return ValueError(f"{names}: {what} overflows the float64 range (the tanh and softplus kernels "
                      f"are computed where every pre-activation variance and the kernel are finite)")


def _smooth_tables(a, name, par, l, names):
    """Per sample of one set at one layer: Mehler coefficients of φ and φ′ (rows of the
    samples that go to the mixture zero), E[φ²], E[φ′²], and the mask of the Mehler samples."""
    from . import _infinite_width_kernels as _k

    g, dg, _, _, kind, t, w, scale2 = _smooth(name, par)
    if not np.all(np.isfinite(a)):
        raise _overflow(f"the pre-activation variance of hidden layer {l + 1}", names)
    ok = a * scale2 <= MEHLER_MAX_SCALE
    Cf, tf, gf = _mehler_tables(a, g, ok)
    Cd, td, gd = _mehler_tables(a, dg, ok)
    good = gf & gd
    Cf[~good] = 0.0
    Cd[~good] = 0.0
    if not good.all():
        tf[~good], td[~good] = _k.mixture_diag(kind, np.ascontiguousarray(a[~good]), t, w)
    return dict(a=a, Cf=Cf, tf=tf, Cd=Cd, td=td, good=good)


def _smooth_chains(sets, L, name, par, sig, bst, names):
    """The per-sample tables of every hidden layer, both sets at once (one truncation order
    per layer for every sample, so that any two samples' series pair up)."""
    chains = [dict(zip(("r", "xhat", "a0", "U"), _inputs(X, sig[0], bst[0] if L > 1 else 0.0)), tabs=[])
              for X in sets]
    q = np.concatenate([_shift(c["r"][0] ** 2, 2 * c["r"][1]) for c in chains])
    if not np.all(np.isfinite(q)):
        raise _overflow("x.x/D", names)
    split = np.cumsum([len(X) for X in sets])[:-1]
    for l in range(L - 1):
        a = (np.concatenate([_shift(*c["a0"]) for c in chains]) if l == 0
             else sig[l] * (sig[l] * q) + bst[l] * bst[l])
        tab = _smooth_tables(a, name, par, l, names)
        for k, c in enumerate(chains):
            c["tabs"].append({key: np.split(v, split)[k] for key, v in tab.items()})
        q = tab["tf"]
    return chains


def _smooth_block(s1, s2, rows, cols, jstart, sym, L, name, par, sig, bst, tb, parts, names):
    from . import _infinite_width_kernels as _k

    _, _, par_f, par_d, kind, t, w, _ = _smooth(name, par)
    r1 = (s1["r"][0][rows], s1["r"][1][rows])
    r2 = (s2["r"][0][cols], s2["r"][1][cols])
    cosx = s1["xhat"][rows] @ s2["xhat"][cols].T
    Q = _shift(cosx * r1[0][:, None] * r2[0][None, :], _outer(r1[1], r2[1]))
    theta1, cos1 = _first_angle(s1["U"][rows], s2["U"][cols], False) if L > 1 else (None, None)
    Th = np.zeros_like(Q)
    wparts, bparts = [], []
    dQ = None
    nb = len(jstart)
    diag = (np.arange(nb), np.arange(nb)) if sym else None
    for l in range(L - 1):
        T1, T2 = s1["tabs"][l], s2["tabs"][l]
        a, c = T1["a"][rows], T2["a"][cols]
        Lam = sig[l] * (sig[l] * Q) + bst[l] * bst[l]
        den = np.sqrt(a)[:, None] * np.sqrt(c)[None, :]
        if l == 0:
            rho, sin2 = cos1, np.sin(theta1) ** 2
        else:
            rho = np.clip(np.divide(Lam, den, out=np.zeros_like(Lam), where=den > 0), -1.0, 1.0)
            sin2 = (1.0 - rho) * (1.0 + rho)
        if dQ is not None:
            back = sig[l] * (sig[l] * dQ)
            Th = back * Th
            wparts = [back * v for v in wparts]
            bparts = [back * v for v in bparts]
        Th = Th + Q + tb
        if parts:
            wparts.append(Q)
            bparts.append(np.ones_like(Q))
        g1, g2 = T1["good"][rows], T2["good"][cols]
        Q, dQ = np.zeros_like(Lam), np.zeros_like(Lam)
        if g1.any() and g2.any():
            Q = _mehler_pairs(rho, T1["Cf"][rows], T2["Cf"][cols], par_f, jstart)
            dQ = _mehler_pairs(rho, T1["Cd"][rows], T2["Cd"][cols], par_d, jstart)
        if not (g1.all() and g2.all()):
            _k.mixture_pairs(kind, np.ascontiguousarray(a), np.ascontiguousarray(c), np.ascontiguousarray(rho),
                             np.ascontiguousarray(sin2), ~g1, ~g2, jstart, t, w, Q, dQ)
        if sym:
            Q[diag] = T1["tf"][rows]
            dQ[diag] = T1["td"][rows]
    sL = sig[L - 1]
    if parts:
        if dQ is not None:
            wparts = [sL * (sL * dQ) * v for v in wparts]
            bparts = [sL * (sL * dQ) * v for v in bparts]
        out = [sL * (sL * Q)], wparts + [Q], bparts
        flat = [out[0][0]] + out[1] + out[2]
    else:
        out = (sL * (sL * Q), (sL * (sL * (dQ * Th)) if dQ is not None else 0.0) + Q)
        flat = list(out)
    if not all(np.all(np.isfinite(v)) for v in flat):
        raise _overflow("the kernel before the output scale", names)
    if parts:
        return out[0][0], out[1], out[2]
    return out


# ---------------------------------------------------------------------------------------
# the public functions
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
    inputs included) at every scale: the per-sample scales are carried as powers of two, so
    a kernel beyond the float range is ±inf (no warning) and any other is computed.  tanh
    and softplus: Mehler's expansion (error ≤ ``TAIL_RTOL`` · √(E[φ(u)²] E[φ(v)²]) per layer,
    a computed bound) at O(1) pre-activation scales, and the Gaussian scale-mixture rule
    (rounding, ≤ 1e-14) for the samples beyond them; a pre-activation variance beyond the
    float range is a ``ValueError``.

    Parameters
    ----------
    X1 : (P1, D) array_like
    X2 : (P2, D) array_like
        The inputs; when X2 equals X1 the kernels are computed once per pair and are
        exactly symmetric.
    depth : int
        L ≥ 1, the number of weight layers (at most ``MAX_DEPTH``).
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
        Naming the argument: depth not an integer in [1, ``MAX_DEPTH``], σ ≤ 0 or not finite
        (or a Python int beyond float64), bias_std < 0,
        α ≤ 0, an unknown activation or bad parameter, X1 and X2 not 2-D, not finite, with
        different D, or D = 0; for tanh and softplus, a pre-activation variance (or the
        kernel before α) beyond the float range.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> nngp, ntk = infinite_width_kernels(X, X, 2, "relu")
    >>> bool(np.allclose(nngp, [[0.25, 0.25 / np.pi], [0.25 / np.pi, 0.25]]))
    True
    """
    X1, X2 = _check_pair(X1, X2)
    L = check_int(depth, "depth", minimum=1, maximum=MAX_DEPTH)
    name, par = named_choice(activation, ACTIVATIONS, "activation")
    sigma = float(check_positive(sigma, "sigma", ndim=0))
    if not isinstance(biases, (bool, np.bool_)):
        raise ValueError(f"biases must be True or False, got {biases!r}")
    bias_std = float(check_nonnegative(bias_std, "bias_std", ndim=0))
    alpha = float(check_positive(alpha, "alpha", ndim=0))
    b = bias_std if biases else 0.0
    names = "X1, X2, sigma" + (" or bias_std" if biases else "")
    return _compute(X1, X2, L, name, par, np.full(L, sigma), np.full(L - 1, b),
                    1.0 if biases else 0.0, alpha, parts=False, names=names)


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
    L = check_int(depth, "depth", minimum=1, maximum=MAX_DEPTH)
    name, par = named_choice(activation, ACTIVATIONS, "activation")
    s = check_positive(sigmas, "sigmas", ndim=1)
    if s.size != L:
        raise ValueError(f"sigmas must have depth = {L} entries, got {s.size}")
    b = np.zeros(L - 1) if bias_stds is None else check_nonnegative(bias_stds, "bias_stds", ndim=1)
    if b.size != L - 1:
        raise ValueError(f"bias_stds must have depth - 1 = {L - 1} entries, got {b.size}")
    return _compute(X1, X2, L, name, par, s, b, 0.0, 1.0, parts=True, names="X1, X2, sigmas or bias_stds")


def _compute(X1, X2, L, name, par, sig, bst, tb, alpha, parts, names):
    """The recursion on validated inputs: σ_l = ``sig[l-1]``, b_l = ``bst[l-1]``; returns
    (NNGP, NTK with the biases counted ``tb`` times) or, with ``parts``, (NNGP, weight parts,
    bias parts)."""
    D = X1.shape[1]
    if D == 0:
        raise ValueError("X1 and X2 must have at least one column (D >= 1)")
    sym = X1.shape == X2.shape and np.array_equal(X1, X2)
    if sym:
        X2 = X1
    P1, P2 = X1.shape[0], X2.shape[0]
    smooth = name in ("tanh", "softplus")
    sets = [X1] if sym else [X1, X2]
    if smooth:
        with np.errstate(over="ignore"):
            chains = _smooth_chains(sets, L, name, par, sig, bst, names)
    else:
        slope = {"linear": 1.0, "relu": 0.0}.get(name, par)
        chains = [_arccos_chain(X, sig, bst, tb, slope) for X in sets]
    c1, c2 = chains[0], chains[-1]
    c1, c2 = chains[0], chains[-1]

    nngp = np.empty((P1, P2))
    outs = [nngp]
    if parts:
        Wp, Bp = np.empty((L, P1, P2)), np.empty((L - 1, P1, P2))
        outs += list(Wp) + list(Bp)
    else:
        ntk = np.empty((P1, P2))
        outs.append(ntk)
    B = max(1, BLOCK_PAIRS // max(1, P2))
    with np.errstate(over="ignore", under="ignore"):
        for r0 in range(0, P1, B):
            r1 = min(P1, r0 + B)
            c0 = r0 if sym else 0
            rows, cols = np.arange(r0, r1), np.arange(c0, P2)
            nb = r1 - r0
            jstart = np.arange(nb, dtype=np.int64) if sym else np.zeros(nb, dtype=np.int64)
            if smooth:
                res = _smooth_block(c1, c2, rows, cols, jstart, sym, L, name, par, sig, bst, tb, parts, names)
                if not parts:
                    res = tuple(alpha * (alpha * v) for v in res)
            else:
                res = _arccos_block(c1, c2, rows, cols, L, slope, sig, alpha, tb, parts)
            blocks = [res[0]] + list(res[1]) + list(res[2]) if parts else list(res)
            for out, blk in zip(outs, blocks):
                if sym:
                    sq = blk[:, :nb]
                    out[r0:r1, r0:r1] = np.triu(sq) + np.triu(sq, 1).T
                    out[r0:r1, r1:] = blk[:, nb:]
                    out[r1:, r0:r1] = blk[:, nb:].T
                else:
                    out[r0:r1] = blk
    if parts:
        return nngp, Wp, Bp
    return nngp, ntk
