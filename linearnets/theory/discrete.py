r"""Closed forms of the discrete step: gradient descent where its answer is exact.

Gradient descent θ_{k+1} = θ_k − lr ∂L/∂θ(θ_k) on the package's loss
L = (1/(α²P)) Σ_μ ½‖y_μ − F(x_μ)‖² (docs/conventions.md) has exact answers in four
places, each derived in ``theory/`` with a sympy check:

* :func:`gd_mode_strength`, :func:`gd_stability_threshold` -- one mode of a balanced,
  aligned deep linear network on whitened data follows the one-dimensional map
  a ← a + lr (s − a^L) a^{L−1}, c = a^L, whose minimum a = s^{1/L} is stable iff
  lr < 2/(L s^{2−2/L}) (``theory/gd_mode_map.md``);
* :func:`catapult_map` -- a two-layer linear network on one sample: its output f and
  NTK λ follow a closed two-dimensional map at every width (Lewkowycz et al. 2020;
  ``theory/catapult.md``);
* :func:`lazy_prediction_gd` -- the linearised model under discrete steps,
  F_k = Y + (I − lr K/(α²P))^k (F_0 − Y) (``theory/lazy_gd.md``);
* :func:`max_margin_direction` -- the direction that gradient descent on the logistic
  loss approaches on separable data (Soudry et al. 2018; ``theory/max_margin.md``).

Imports nothing from :mod:`linearnets.sim`.
"""
from __future__ import annotations

import numpy as np
import scipy.optimize

from .._validation import (
    as_float_array,
    broadcast_args,
    check_depth,
    check_int_array,
    check_positive,
    ldexp_safe,
    pow2_normalise,
)
from .lazy import _eigen_setup, _test_setup

__all__ = ["gd_mode_strength", "gd_stability_threshold", "catapult_map", "lazy_prediction_gd",
           "max_margin_direction"]

#: ``catapult_map`` accepts ntk0 ≥ 2√x_sq |f0| (1 − DOMAIN_RTOL): the NTK of a two-layer
#: net is |u|² + x_sq |v|² ≥ 2√x_sq |u·v|, equal for u = √x_sq v (rounding of a given net).
DOMAIN_RTOL = 1e-12
#: ``max_margin_direction``: the separator must reach y_μ w·x_μ ≥ 1 − FEASIBILITY_RTOL
#: (in units of the margin's scale) or the data are not separable through the origin.
FEASIBILITY_RTOL = 1e-8


def _steps(k, name):
    """Step counts: ints ≥ 0 (any shape), as an int64 array."""
    return check_int_array(k, name).astype(np.int64)


# ------------------------------------------------------------------------------ the mode map

def gd_mode_strength(k, s, c0, depth=2, lr=0.1):
    r"""Strength c_k of one mode of a deep linear network after k steps of gradient descent.

    A balanced, aligned start (every layer's singular value a_0 = c_0^{1/L} on the mode,
    as ``init_balanced`` with the task's directions) on whitened data (Σxx = I) stays
    balanced under gradient descent on the loss (1/2P) Σ‖y − f‖², and the mode follows
    the one-dimensional map

    .. math::  a_{k+1} = a_k + \mathrm{lr}\,(s - a_k^L)\,a_k^{L-1}, \qquad c_k = a_k^L,

    iterated here exactly (no approximation: the result is GD's to rounding).  For
    lr → 0 with k·lr = t it tends to ``mode_strength(t, s, c0, depth, eta=1)``.  The
    minimum c = s is stable iff lr < :func:`gd_stability_threshold` (s, depth); above it the
    map oscillates (period doubling, then chaos) and eventually diverges.

    Parameters
    ----------
    k : int or array_like of int
        Step counts, ≥ 0.
    s : array_like
        Singular value of the mode, > 0.
    c0 : array_like
        Initial strength, > 0 (a_0 = c0^{1/L} > 0).
    depth : int, optional
        Number of layers L ≥ 1.
    lr : array_like, optional
        Learning rate, > 0.

    Returns
    -------
    c : ndarray of float64, the broadcast shape of (k, s, c0, lr)
        c_k = a_k^L (negative for odd L once a step overshoots through 0).  A run whose
        a_k overflows has diverged: from there c is ±inf (a alternates in sign, as
        a_{k+1} ≈ −lr a_k^{2L−1} does), without numpy warnings.

    Notes
    -----
    Derivation: ``theory/gd_mode_map.md`` (the balanced map from the layer updates, its
    fixed point and the derivative 1 − lr L s^{2−2/L} there); the continuous limit is
    Saxe, McClelland & Ganguli (2014).  Cost: max(k) vectorised steps.

    Examples
    --------
    >>> import linearnets as ln
    >>> float(ln.gd_mode_strength(0, s=2.0, c0=0.01))
    0.01
    >>> ln.gd_mode_strength([1, 100], s=1.0, c0=0.25, depth=2, lr=0.1).round(6)
    array([0.288906, 1.      ])
    """
    L = check_depth(depth)
    k = _steps(k, "k")
    s = check_positive(s, "s")
    c0 = check_positive(c0, "c0")
    lr = check_positive(lr, "lr")
    shape = broadcast_args(k=k, s=s, c0=c0, lr=lr)[0].shape
    ps, pc, pl = broadcast_args(s=s, c0=c0, lr=lr)
    pshape = ps.shape
    a = pc ** (1.0 / L) if L > 1 else pc.copy()
    a = np.array(a, dtype=np.float64)
    kb = np.broadcast_to(k, shape)
    out = np.empty(shape)
    kmax = int(kb.max()) if kb.size else 0
    wanted = np.zeros(kmax + 1, dtype=bool)
    wanted[np.unique(kb)] = True
    div = np.zeros(pshape, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for n in range(kmax + 1):
            if wanted[n]:
                c = np.broadcast_to(pc if n == 0 else a ** L, shape)     # c_0 = c0 exactly
                sel = kb == n
                out[sel] = c[sel]
            if n == kmax:
                break
            pw = a ** (L - 1) if L > 1 else np.ones_like(a)
            new = a + pl * (ps - pw * a) * pw
            bad = ~np.isfinite(new) & ~div
            # an overflow: |a| beyond the range; a_{k+1} ~ -lr a^{2L-1} has the sign of -a
            new = np.where(bad, np.copysign(np.inf, -a), new)
            new = np.where(div, -a, new)
            div |= bad
            a = new
    return out


def gd_stability_threshold(s, depth=2):
    r"""The largest learning rate at which gradient descent keeps a mode at its minimum c = s.

    .. math::  \mathrm{lr}^* = \frac{2}{L\, s^{2-2/L}}

    The balanced mode map a ↦ a + lr (s − a^L) a^{L−1} (:func:`gd_mode_strength`) has the
    derivative 1 − lr L s^{2−2/L} at its fixed point a = s^{1/L}: the minimum is stable for
    lr < lr* and unstable above (at lr* the derivative is −1, the onset of period
    doubling).  L s^{2−2/L} is the sharpness (the Hessian's top eigenvalue in the layer
    scalars) of the balanced minimum, so lr* = 2/sharpness, the stability limit of
    gradient descent on a quadratic (Cohen et al. 2021).

    Parameters
    ----------
    s : array_like
        Singular value of the mode, > 0.
    depth : int, optional
        Number of layers L ≥ 1 (L = 1: lr* = 2 for every s).

    Returns
    -------
    ndarray of float64, the shape of ``s``
        lr*; +inf or 0 (no warning) only where the exact value leaves the float range.

    Notes
    -----
    Derivation: ``theory/gd_mode_map.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> float(ln.gd_stability_threshold(1.0, depth=2))
    1.0
    >>> float(ln.gd_stability_threshold(4.0, depth=2))
    0.25
    """
    L = check_depth(depth)
    s = check_positive(s, "s")
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        # (1/s)^p, not 1/s^p: s^p underflows to a subnormal (and loses digits) first
        return (2.0 / L) * (1.0 / s) ** (2.0 - 2.0 / L)


# ------------------------------------------------------------------------------ the catapult

def catapult_map(steps, f0, ntk0, y, lr, x_sq=1.0):
    r"""Output and NTK of a two-layer linear network on one sample under gradient descent.

    The network f = W_2 W_1 x (W_1 of shape (m, D), W_2 of shape (1, m), ‖x‖² = x_sq) is
    trained on one sample with the loss ½(f − y)² (the package's loss with P = 1, α = 1)
    by gradient descent with step lr.  With r = f − y and λ = NTK(x, x) =
    ‖W_1 x‖² + x_sq ‖W_2‖², every width m gives the same exact map

    .. math::

        f_{k+1} = f_k - \mathrm{lr}\,\lambda_k r_k + \mathrm{lr}^2 r_k^2\, x_{sq}\, f_k, \qquad
        \lambda_{k+1} = \lambda_k + \mathrm{lr}\, x_{sq}\, r_k\,(\mathrm{lr}\,\lambda_k r_k - 4 f_k)

    (Lewkowycz et al. 2020, with y = 0, x = 1 and their 1/√n; here in the package's
    conventions, ``theory/catapult.md``).

    **Phases.**  The width enters only through the initial condition: at fixed lr λ_0,
    the map's nonlinear terms are of relative size ε = lr² x_sq × (f, y)², which is
    their 1/n (their net is this one with x_sq = 1/n).  As ε → 0 (m → ∞ with
    λ_0 = O(1/lr)), with η = lr λ_0:

    * η < 2, **lazy**: r_{k+1} ≈ (1 − η) r_k decays geometrically, λ moves by O(ε) in
      all, f → y with λ_∞ = λ_0: the linearised (NTK) dynamics;
    * 2 < η < 4, **catapult**: |1 − η| > 1, so r grows geometrically for O(log 1/ε)
      steps until lr² x_sq r² = O(1); there f ≈ r and the λ update is
      ≈ lr x_sq r² (lr λ − 4) < 0, so λ falls until lr λ < 2, after which r decays:
      training converges with a final NTK λ_∞ < 2/lr (a flatter minimum);
    * η > 4, **divergence**: once r is large the same update is > 0; λ and r grow
      without bound.

    The thresholds 2/λ_0 and 4/λ_0 involve λ_0 only (x_sq is inside λ_0); y enters only
    through r = f − y and drops out once |r| ≫ |y|.  At finite ε the edges move by O(ε).
    Any (f, λ) with f = y is a fixed point, stable iff lr λ < 2.

    Parameters
    ----------
    steps : int or (K,) array_like of int
        Step counts, ≥ 0 (any order; a scalar is K = 1).
    f0 : array_like
        Initial output W_2 W_1 x.
    ntk0 : array_like
        Initial NTK λ_0 = ‖W_1 x‖² + x_sq ‖W_2‖², with λ_0 ≥ 2√x_sq |f0| (every two-layer
        net has it; the map preserves it).
    y : array_like
        Target.
    lr : array_like
        Learning rate, > 0.
    x_sq : array_like, optional
        ‖x‖², > 0.

    Returns
    -------
    f : ndarray of float64, shape (K,) + the broadcast shape of (f0, ntk0, y, lr, x_sq)
        f_k at the given step counts.
    ntk : ndarray of float64, the same shape
        λ_k at the given step counts.  A run that overflows has diverged: from there
        f = ±inf (the sign of its last finite value) and ntk = +inf, without warnings.

    Raises
    ------
    ValueError
        Negative or fractional steps, lr or x_sq ≤ 0, ntk0 < 2√x_sq |f0|, non-finite input.

    Examples
    --------
    >>> import linearnets as ln
    >>> f, ntk = ln.catapult_map([0, 1, 2], f0=0.5, ntk0=2.0, y=0.0, lr=0.1, x_sq=0.01)
    >>> f.round(8), ntk.round(8)
    (array([0.5      , 0.4000125, 0.3200544]), array([2.        , 1.99905   , 1.99844195]))
    """
    steps = _steps(steps, "steps")
    if steps.ndim > 1:
        raise ValueError(f"steps must be an int or a 1-D array of ints, got shape {steps.shape}")
    steps = np.atleast_1d(steps)
    f0 = as_float_array(f0, "f0")
    ntk0 = as_float_array(ntk0, "ntk0")
    y = as_float_array(y, "y")
    lr = check_positive(lr, "lr")
    x_sq = check_positive(x_sq, "x_sq")
    f, lam, y, lr, x_sq = (np.array(a, dtype=np.float64) for a in
                           broadcast_args(f0=f0, ntk0=ntk0, y=y, lr=lr, x_sq=x_sq))
    with np.errstate(over="ignore"):
        lower = 2.0 * np.sqrt(x_sq) * np.abs(f)
    if np.any(lam < lower * (1.0 - DOMAIN_RTOL)):
        raise ValueError("ntk0 must be >= 2 sqrt(x_sq) |f0| (the NTK |W1 x|^2 + x_sq |W2|^2 of a "
                         "two-layer net with output f0 = W2 W1 x), got ntk0 "
                         f"{np.min(lam - lower):.3g} below it")
    K = len(steps)
    F = np.empty((K,) + f.shape)
    N = np.empty((K,) + f.shape)
    kmax = int(steps.max()) if K else 0
    order = np.argsort(steps, kind="stable")
    div = np.zeros(f.shape, dtype=bool)
    j = 0
    with np.errstate(over="ignore", invalid="ignore"):
        for n in range(kmax + 1):
            while j < K and steps[order[j]] == n:
                F[order[j]], N[order[j]] = f, lam
                j += 1
            if n == kmax:
                break
            r = f - y
            f_new = f - lr * lam * r + lr * lr * r * r * x_sq * f
            lam_new = lam + lr * x_sq * r * (lr * lam * r - 4.0 * f)
            bad = ~(np.isfinite(f_new) & np.isfinite(lam_new)) & ~div
            f = np.where(div, f, np.where(bad, np.copysign(np.inf, np.where(np.isnan(f_new), f, f_new)),
                                          f_new))
            lam = np.where(div | bad, np.inf, lam_new)
            div |= bad
    return F, N


# ------------------------------------------------------------------------------ lazy GD

def _row_powers(q, k):
    """``q_j^{k_t}`` (T, n) as ``(mant, E)`` with the value ``mant * 2^E[:, None]``: E = 0 for
    rows that stay in range (``mant`` the power itself), else the row's largest exponent,
    so that no row holds an inf (from which a product would make inf − inf)."""
    kk = k[:, None].astype(np.float64)
    with np.errstate(over="ignore", under="ignore"):
        mant = np.power(q[None, :], kk)
    E = np.zeros(len(k), dtype=np.int64)
    big = ~np.isfinite(mant).all(axis=1)
    if big.any():
        with np.errstate(divide="ignore", under="ignore", over="ignore", invalid="ignore"):
            g = kk[big] * np.log2(np.abs(q))[None, :]                      # log2 |q^k|, -inf at q = 0
            Eb = np.ceil(np.max(g, axis=1)).astype(np.int64)
            sign = np.where((q[None, :] < 0) & (k[big, None] % 2 == 1), -1.0, 1.0)
            mant[big] = np.where(kk[big] == 0, 1.0, sign * np.exp2(g - Eb[:, None]))
        E[big] = Eb
    return mant, E


def lazy_prediction_gd(steps, K_train, K_test_train, Y, F0_train=None, F0_test=None, lr=0.1, alpha=1.0):
    r"""Outputs of the linearised (lazy-limit) model along gradient descent, on training and test points.

    With the NTK K of F frozen at k = 0 and c = lr/(α²P), a gradient-descent step on
    L = (1/(α²P)) Σ ½‖y − F‖² moves the outputs by F_{k+1}(x) = F_k(x) + c K(x, X)(Y − F_k(X)),
    so that

    .. math::

        F_k(X) = Y + (I - cK)^k (F_0(X) - Y), \qquad
        F_k(x) = F_0(x) + K(x, X)\, K^{-1}\big(I - (I - cK)^k\big)(Y - F_0(X)).

    On K's eigenbasis (λ, V) the second operator is V diag((1 − (1 − cλ)^k)/λ) Vᵀ,
    and c k on its null space (where the training residual does not move and the test
    outputs move linearly in k): one eigendecomposition serves every step, and a
    singular K gives finite outputs.  As lr → 0 with k·lr = t this tends to
    ``lazy_prediction(t, ..., eta=1)`` (e^{−Kτ} = lim (I − cK)^k).  The eigen-mode λ
    converges iff 0 < cλ < 2, i.e. lr < 2α²P/λ_max for all modes (Lee et al. 2019,
    their critical rate 2/λ_max of K/P).

    Parameters
    ----------
    steps : int or (K,) array_like of int
        Step counts, ≥ 0 (a scalar is K = 1).
    K_train, K_test_train, Y, F0_train, F0_test
        As in :func:`linearnets.lazy_prediction`: the NTK of F on the training inputs
        ((P, P) or (P, P, C, C), symmetric positive semidefinite), between test and
        training inputs (or None), the targets and F at k = 0 (default 0).
    lr : float > 0
        Learning rate.
    alpha : float > 0
        Output scale α of the loss normalisation 1/(α²P).

    Returns
    -------
    F_train : (K, P, C) ndarray of float64
    F_test : (K, Q, C) ndarray of float64 or None
        None when ``K_test_train`` is None.  Where lr is beyond a mode's stability limit
        the outputs grow like |1 − cλ|^k; beyond the float range they are ±inf (no
        NaN, no warning).

    Notes
    -----
    Derivation and sympy check: ``theory/lazy_gd.md``.  Source: Lee et al. (2019),
    "Wide neural networks of any depth evolve as linear models under gradient
    descent" (their discrete-time linearised dynamics, with our 1/(α²P)).

    Examples
    --------
    >>> import numpy as np, linearnets as ln
    >>> K = np.array([[2.0, 0.0], [0.0, 1.0]])
    >>> tr, _ = ln.lazy_prediction_gd([0, 1, 2], K, None, [1.0, 1.0], lr=0.5)
    >>> tr[:, :, 0]
    array([[0.    , 0.    ],
           [0.5   , 0.25  ],
           [0.75  , 0.4375]])
    """
    steps = _steps(steps, "steps")
    if steps.ndim > 1:
        raise ValueError(f"steps must be an int or a 1-D array of ints, got shape {steps.shape}")
    steps = np.atleast_1d(steps)
    lr = float(check_positive(lr, "lr", ndim=0))
    alpha = float(check_positive(alpha, "alpha", ndim=0))
    lam, V, ek, Y2, F0, P, C = _eigen_setup(K_train, Y, F0_train)
    c = lr / (alpha ** 2 * P)
    with np.errstate(over="ignore"):
        cl = ldexp_safe(c * lam, ek)                          # c λ, exactly scaled; inf beyond range
    q = 1.0 - cl                                             # the factor of each eigen-mode
    r0 = V.T @ (Y2 - F0).reshape(-1)
    mant, E = _row_powers(q, steps)
    # where 0 < q < 1, q^k = exp(k log1p(-c λ)) and 1 - q^k = -expm1(k log1p(-cλ)): no
    # cancellation near q = 1 (the small steps of a slow mode)
    small = (cl > 0) & (cl < 1)
    kk = steps[:, None].astype(np.float64)
    with np.errstate(under="ignore"):
        lg = kk * np.log1p(-np.where(small, cl, 0.0))[None, :]
    mant = np.where(small[None, :] & (E[:, None] == 0), np.exp(lg), mant)
    with np.errstate(invalid="ignore"):
        M = np.where(r0[None, :] == 0, 0.0, mant * r0[None, :])
    Ftr = Y2.reshape(-1)[None, :] - ldexp_safe(M @ V.T, E[:, None])
    Ftr = Ftr.reshape(len(steps), P, C)
    if K_test_train is None:
        return Ftr, None
    Kq, F0q, Q = _test_setup(K_test_train, F0_test, P, C)
    # test: K(x,X) V diag(g) V^T (Y - F0) with g = (1 - q^k)/λ (c k on the null space), in
    # units of 2^-ek (λ is lam 2^ek) and of 2^E per row
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        one = ldexp_safe(1.0, -E)[:, None]
        num = np.where(small[None, :] & (E[:, None] == 0), -np.expm1(lg), one - mant)
        g = np.where(lam[None, :] > 0, num / np.where(lam > 0, lam, 1.0)[None, :],
                     ldexp_safe(c * kk, ek - E[:, None]))
        coeff = np.where(r0[None, :] == 0, 0.0, g * r0[None, :])
    (Kq, eq), (coeff, ec) = pow2_normalise(Kq), pow2_normalise(coeff)
    Fte = F0q.reshape(-1)[None, :] + ldexp_safe((coeff @ V.T) @ Kq.T, eq + ec - ek + E[:, None])
    return Ftr, Fte.reshape(len(steps), Q, C)


# ------------------------------------------------------------------------------ max margin

def _max_margin(X, y):
    """The hard-margin separator through the origin: (w, alpha) with w = Σ α_μ y_μ x_μ,
    α ≥ 0, min |w|² subject to y_μ w·x_μ ≥ 1 (the un-normalised SVM solution and its dual).

    Lawson & Hanson's least-distance programming (Solving Least Squares Problems, 1974):
    with Z = diag(y) X, the problem min |w| s.t. Z w ≥ 1 is solved by the NNLS min_{u ≥ 0} |E u − f|,
    E = [Zᵀ; 1ᵀ], f = e_{D+1}: with the residual ρ = E u − f, w = −ρ_{1:D}/ρ_{D+1} and
    α = −u/ρ_{D+1}; ρ = 0 means no w satisfies the constraints.
    """
    X = as_float_array(X, "X", ndim=2)
    P, D = X.shape
    if P == 0 or D == 0:
        raise ValueError(f"X must have at least one sample and one feature, got shape {X.shape}")
    y = as_float_array(y, "y", ndim=(1, 2))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (P,):
        raise ValueError(f"y must have shape ({P},) (one label per row of X), got {np.shape(y)}")
    if not np.all(np.abs(y) == 1.0):
        raise ValueError("y must hold labels +1 and -1 only")
    Xs, ex = pow2_normalise(X)                  # the direction does not depend on X's scale
    Z = y[:, None] * Xs
    E = np.vstack([Z.T, np.ones((1, P))])
    f = np.zeros(D + 1)
    f[-1] = 1.0
    u, _ = scipy.optimize.nnls(E, f, maxiter=50 * (P + D + 1))
    rho = E @ u - f
    den = -rho[-1]                             # = 1 - Σu, in (0, 1] for separable data
    scale = max(1.0, float(np.sum(u)))
    if not den > 64 * np.finfo(float).eps * scale:
        raise ValueError("X, y are not linearly separable through the origin (no w with "
                         "y_mu w.x_mu > 0 for every sample)")
    w = Z.T @ (u / den)
    alpha = u / den
    if np.min(Z @ w) < 1.0 - FEASIBILITY_RTOL:
        raise ValueError("X, y are not linearly separable through the origin (the separator "
                         f"reaches margin {np.min(Z @ w):.3g} < 1)")
    return ldexp_safe(w, -ex), ldexp_safe(alpha, -2 * ex)


def max_margin_direction(X, y):
    r"""Unit direction of the hard-margin separator through the origin.

    .. math::

        \hat w = \frac{w^*}{\|w^*\|}, \qquad
        w^* = \arg\min_w \|w\|^2 \ \text{subject to}\ y_\mu\, w\cdot x_\mu \ge 1,

    equivalently the maximiser of min_μ y_μ w·x_μ / ‖w‖.  A linear model trained by
    gradient descent (small enough step) or gradient flow on the logistic loss
    Σ log(1 + e^{−y_μ w·x_μ}) of separable data has w(t)/‖w(t)‖ → ŵ, at the rate
    1/log t (Soudry et al. 2018); the end-to-end map of a deep linear net
    converges to the same direction (Ji & Telgarsky 2019).

    Solved exactly (finite active-set steps, accurate to rounding) as Lawson & Hanson's
    least-distance program: with Z = diag(y) X the NNLS min_{u≥0} ‖[Zᵀ; 1ᵀ]u − e_{D+1}‖
    gives w* = Zᵀu/(1 − Σu) and the support vectors (u > 0).

    Parameters
    ----------
    X : (P, D) array_like
        Inputs, one sample a row.
    y : (P,) array_like
        Labels, each +1 or −1.

    Returns
    -------
    (D,) ndarray of float64
        ŵ, unit norm.

    Raises
    ------
    ValueError
        Labels other than ±1, mismatched shapes, non-finite input, or data that no
        hyperplane through the origin separates (a zero sample included).

    Notes
    -----
    Derivation: ``theory/max_margin.md``.

    Examples
    --------
    >>> import numpy as np, linearnets as ln
    >>> X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 0.5]])
    >>> ln.max_margin_direction(X, [1, 1, -1]).round(6)
    array([1., 0.])
    """
    w, _ = _max_margin(X, y)
    ws, _ = pow2_normalise(w)
    return ws / np.linalg.norm(ws)
