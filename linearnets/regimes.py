r"""Diagnostics of the lazy / rich regime of a trajectory (any network, linear or not).

* :func:`kernel_drift` — ‖K − K0‖_F / ‖K0‖_F (Geiger et al. 2019; along a recorded NTK
  path, ``traj.ntk``, with a leading time axis).
* :func:`relative_change` — per layer ‖θ_l − θ_l(0)‖_F / ‖θ_l(0)‖_F, a layer's input
  weights together with its bias (the RD of Luo et al. 2021 and Zhou et al. 2022).
* :func:`rd_slope` — slope of log RD against log width with its standard error over
  seeds, and the regime label (linear / critical / condensed).
* :func:`condensation` — cosine similarities of hidden units' input weights and the
  number of distinct orientations.
* :func:`output_variance` — Var F across an ensemble of seeds (against width: the
  fluctuations of Geiger et al. 2019 that a centered network removes);
  :func:`variance_slope` fits its slope against log width with a standard error.
* :func:`laziness_ratio` — (|d∇f/dt|/|∇f|)·(L/|dL/dt|) of the silent-alignment paper's
  App. I (Atanasov, Bordelon & Pehlevan 2022), predicted O(σ^{−L}) at small σ.
* :func:`crossing_time` — the first time a sampled curve reaches a level (half-times,
  alignment and loss times, the time the kernel drift reaches 1), interpolated.
* :func:`phase_coordinates` — the two-layer (γ, γ′) of Luo et al. (2021) with its regime,
  and the three-layer coordinates of Zhou et al. (2022), from scaling exponents;
  :func:`scaling_exponent` fits an exponent from values at several widths.

Nothing here integrates anything: the functions read arrays (trajectories, kernels,
weights) produced by :func:`linearnets.gradient_flow` or any other simulator.
"""
from __future__ import annotations

import math

import numpy as np

from ._validation import as_float_array, check_nonempty, check_positive, ldexp_safe, pow2_normalise

__all__ = ["kernel_drift", "relative_change", "rd_slope", "condensation", "output_variance", "variance_slope",
           "laziness_ratio", "phase_coordinates", "scaling_exponent", "RD_Z", "CONDENSE_EPS",
           "CAP_CENTRE_STEPS", "crossing_time"]

#: A slope within RD_Z standard errors of 0 is "critical".
RD_Z = 2.0
#: Two units share an orientation when their cosine similarity exceeds 1 − CONDENSE_EPS.
CONDENSE_EPS = 0.02
#: Mean-shift steps that centre each cap of :func:`condensation`'s cap count (off the circle).
CAP_CENTRE_STEPS = 3


def kernel_drift(K0, K):
    r"""Relative kernel change ‖K − K0‖_F / ‖K0‖_F (Geiger et al. 2019, Sec. 3).

    Parameters
    ----------
    K0 : array_like
        The kernel at t = 0, e.g. (P, P) or (P, P, C, C).
    K : array_like
        One kernel of the shape of K0, or a path with extra leading axes ``(T, *K0.shape)``
        (``traj.ntk``).

    Returns
    -------
    float or ndarray of the leading shape of K
    """
    K0 = as_float_array(K0, "K0")
    K = as_float_array(K, "K")
    if K0.ndim == 0 or K.shape[K.ndim - K0.ndim:] != K0.shape:
        raise ValueError(f"K0 and K: K must have shape (..., {', '.join(map(str, K0.shape))}) "
                         f"of K0, got {K.shape}")
    d = _relative_distance(K0, K, "K0")
    return float(d) if np.ndim(d) == 0 else d


def _relative_distance(a0, a, name):
    """``||a - a0|| / ||a0||`` over a0's axes (the trailing axes of a), with both norms
    taken at unit scale (exact powers of two), so that neither overflows nor underflows:
    +inf only where the ratio itself exceeds the float range."""
    a0s, e0 = pow2_normalise(a0)
    n0 = np.linalg.norm(a0s)
    if not n0 > 0:
        raise ValueError(f"{name} must be nonzero")
    e = max(e0, pow2_normalise(a)[1])
    axes = tuple(range(a.ndim - a0.ndim, a.ndim))
    diff = np.ldexp(a, -e) - np.ldexp(a0, -e)
    return ldexp_safe(np.sqrt(np.sum(diff ** 2, axis=axes)) / n0, e - e0)


def _layer_params(weights, biases, name):
    try:
        weights = list(weights)
    except TypeError:
        raise ValueError(f"{name} must be a list of layers [W_1, ..., W_L]") from None
    check_nonempty(weights, name, "layer")
    ws = [as_float_array(w, f"{name}[{i}]") for i, w in enumerate(weights)]
    if biases is None:
        return ws
    bs = list(biases)
    if len(bs) > len(ws):
        raise ValueError(f"more biases ({len(bs)}) than layers ({len(ws)})")
    out = []
    for i, w in enumerate(ws):
        if i < len(bs) and bs[i] is not None:
            b = as_float_array(bs[i], f"biases[{i}]")
            if b.shape != w.shape[:-1]:
                raise ValueError(f"bias {i} must have shape {w.shape[:-1]}, got {b.shape}")
            w = np.concatenate([w, b[..., None]], axis=-1)
        out.append(w)
    return out


def relative_change(theta0, theta, biases0=None, biases=None):
    r"""Per-layer relative distance from initialisation, RD_l = ‖θ_l − θ_l(0)‖_F / ‖θ_l(0)‖_F.

    θ_l = (W_l, b_l): a layer's input weights with its bias, as in the RD of Luo et
    al. (2021) and Zhou et al. (2022) (the bias is the extra input weight of a hidden
    neuron on the constant input).

    Parameters
    ----------
    theta0 : list of (N_l, N_{l-1}) arrays
        Weights at t = 0.
    theta : list of arrays
        Weights at t, each (N_l, N_{l-1}) or a path (T, N_l, N_{l-1}) (``traj.weights_t``).
    biases0, biases : list of (N_l,) arrays (or (T, N_l) paths), optional
        Hidden biases b_1 … b_{L−1}; the output layer has none.

    Returns
    -------
    rd : (L,) or (T, L) ndarray
    """
    p0 = _layer_params(theta0, biases0, "theta0")
    p = _layer_params(theta, biases, "theta")
    if len(p0) != len(p):
        raise ValueError(f"theta0 and theta have {len(p0)} and {len(p)} layers")
    out = []
    for l, (a0, a) in enumerate(zip(p0, p)):
        if a.shape[a.ndim - a0.ndim:] != a0.shape:
            raise ValueError(f"theta0 and theta: layer {l + 1} of theta has shape {a.shape}, which "
                             f"does not end with theta0's {a0.shape}")
        if not np.any(a0 != 0):
            raise ValueError(f"layer {l + 1} is zero at initialisation (RD undefined)")
        out.append(_relative_distance(a0, a, f"layer {l + 1} at initialisation"))
    return np.stack(out, axis=-1)


def rd_slope(widths, rd, z=RD_Z):
    r"""Slope of log RD against log width, its standard error over seeds, and the regime.

    For each seed the least-squares slope of log RD(m) on log m; the reported slope is
    their mean and the standard error their standard deviation / √n_seeds (a single
    seed: the standard error of the regression slope).  The label (Luo et al. 2021;
    Zhou et al. 2022) is ``"linear"`` if slope < −z·se (RD → 0 as m → ∞),
    ``"condensed"`` if slope > z·se (RD → ∞), else ``"critical"`` (RD = O(1)).

    Parameters
    ----------
    widths : (n_widths,) array_like, > 0
    rd : (n_widths,) or (n_widths, n_seeds) array_like, > 0
    z : float > 0
        Standard errors a slope must clear to differ from 0 (default :data:`RD_Z`).

    Returns
    -------
    dict with ``slope``, ``stderr``, ``label`` and ``per_seed`` (n_seeds,)
    """
    m = check_positive(widths, "widths", ndim=1)
    rd = check_positive(rd, "rd", ndim=(1, 2))
    if rd.ndim == 1:
        rd = rd[:, None]
    if rd.shape[0] != m.size or m.size < 2:
        raise ValueError(f"rd must have one row per width (>= 2 widths), got widths {m.shape}, rd {rd.shape}")
    z = float(check_positive(z, "z", ndim=0))
    x = np.log(m)
    xc = x - x.mean()
    Y = np.log(rd)
    slopes = (xc @ (Y - Y.mean(axis=0))) / (xc @ xc)
    n = slopes.size
    if n > 1:
        slope, se = float(slopes.mean()), float(slopes.std(ddof=1) / math.sqrt(n))
    else:
        slope = float(slopes[0])
        resid = Y[:, 0] - Y[:, 0].mean() - slope * xc
        se = float(math.sqrt(resid @ resid / max(m.size - 2, 1) / (xc @ xc))) if m.size > 2 else float("nan")
    if not np.isfinite(se):
        label = "linear" if slope < 0 else "condensed" if slope > 0 else "critical"
    else:
        label = "linear" if slope < -z * se else "condensed" if slope > z * se else "critical"
    return {"slope": slope, "stderr": se, "label": label, "per_seed": slopes}


def condensation(W, b=None, eps=CONDENSE_EPS, *, cosines=True):
    r"""Cosine similarities of hidden units' input weights and the number of distinct orientations.

    Unit k's input weight is u_k = (w_k, b_k) (the bias as the weight of a constant
    input, Luo et al. 2021), its direction û_k = u_k/‖u_k‖ and C_kl = û_k·û_l.  The
    count is a number of groups in each of which **every** pair has C_kl ≥ 1 − ε, i.e.
    lies within the angle θ = arccos(1 − ε) (0.2003 rad at the default ε = 0.02).  Why:
    condensation means the units gather at a few isolated directions (Luo et al. 2021;
    Zhou et al. 2022, Sec. 5), so within a group every pair is nearly parallel and
    groups are far apart; the count needs no number of groups chosen in advance, and
    opposite directions (C ≈ −1) stay distinct, as they are different features for a
    ReLU unit.  Every pair, not a chain of near neighbours: in low dimension many
    spread-out units are chained into one component, which would read as total
    condensation.

    - On the circle (û_k ∈ R², e.g. 1-d inputs with a bias): the **least** number of
      such groups, exactly.  A group with every pair within θ < π/2 is an arc of
      length ≤ θ, so the count is the fewest arcs of length θ that cover the sorted
      angles: greedy covering from each start that can begin an optimal cover (the
      point after the widest gap; when that gap is narrower than θ, also the points
      within θ before it).  Spread-out units approach ⌈2π/θ⌉ = 32 from below as their
      number grows (29 for 400 uniform directions), against a few for condensed
      units.  O(n log n) time.
    - Otherwise (û_k on the sphere S^{d−1}, d ≠ 2): a greedy cap count.  Each group is
      the not yet counted units within θ/2 of a centre (so every pair is within θ),
      the centre started at the first such unit and moved to their mean direction by
      up to :data:`CAP_CENTRE_STEPS` steps while that does not cover fewer units.
      Exact for groups that lie within θ/2 of their mean direction and are more than
      θ/2 from each other; random (uncondensed) units in d ≥ 3 are almost never that
      close, so the count is then ≈ the width.  O(n·k·d) time for k groups.

    Both use O(n) memory with ``cosines=False``.  Units with zero input weight are left
    out.  (Complete-linkage clustering of the cosine matrix at distance ε gives the
    same counts for separated groups, in O(n²) memory.)

    Parameters
    ----------
    W : (N, D) array_like
        Input weights of the N hidden units.
    b : (N,) array_like, optional
        Their biases.
    eps : float in (0, 1)
        Cosine tolerance ε (default :data:`CONDENSE_EPS`).
    cosines : bool, optional
        Return the (N, N) cosine matrix (default True).  False returns None in its
        place and never forms an N × N array.

    Returns
    -------
    cos : (N, N) ndarray or None
        C_kl (NaN rows/columns for zero units); None when ``cosines`` is False.
    n_orientations : int
    """
    W = as_float_array(W, "W", ndim=2)
    if b is not None:
        b = as_float_array(b, "b", ndim=1)
        if b.shape != (W.shape[0],):
            raise ValueError(f"b must have shape ({W.shape[0]},), got {b.shape}")
        W = np.concatenate([W, b[:, None]], axis=1)
    eps = float(check_positive(eps, "eps", ndim=0))
    if eps >= 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    # each row at unit scale before its norm: a tiny row (1e-300) must not underflow to "dead"
    mx = np.max(np.abs(W), axis=1, initial=0.0)
    live = mx > 0
    rows = W[live] / mx[live, None]
    U = rows / np.linalg.norm(rows, axis=1)[:, None]
    cos = None
    if cosines:
        full = np.full_like(W, np.nan)
        full[live] = U
        cos = full @ full.T
    theta = math.acos(1.0 - eps)
    if U.shape[0] <= 1:
        n = U.shape[0]
    elif U.shape[1] == 2:
        n = _arc_cover_count(np.arctan2(U[:, 1], U[:, 0]), theta)
    else:
        n = _cap_count(U, theta)
    return cos, int(n)


def _arc_cover_count(angles, theta):
    """Fewest closed arcs of length ``theta`` (< π) covering ``angles`` (radians) on the circle."""
    a = np.sort(np.mod(angles, 2 * np.pi))
    n = a.size
    gaps = np.diff(a, append=a[0] + 2 * np.pi)          # gaps[i]: from point i to point i + 1
    s0 = (int(np.argmax(gaps)) + 1) % n
    a = np.concatenate([a[s0:], a[:s0] + 2 * np.pi]) - a[s0]    # start after the widest gap, in [0, 2π)
    a2 = np.concatenate([a, a + 2 * np.pi])
    nxt = np.searchsorted(a2, a2 + theta, side="right")        # first point past the arc starting at i
    # Some optimal cover has an arc through point 0 whose first point lies within theta
    # before it; greedy covering from that first point is then optimal.
    starts = np.concatenate([[0], np.nonzero(a >= 2 * np.pi - theta)[0]])
    pos, count = starts.copy(), np.zeros(starts.size, dtype=np.int64)
    active = pos < starts + n
    while active.any():
        pos[active] = nxt[pos[active]]
        count += active
        active = pos < starts + n
    return int(count.min())


def _cap_count(U, theta):
    """Greedy count of caps of angular radius theta/2 covering the unit rows of ``U`` (see condensation)."""
    c_half = math.cos(0.5 * theta)
    free = U
    count = 0
    while free.shape[0]:
        inside = free @ free[0] >= c_half
        inside[0] = True     # its own cap even where theta is below rounding (eps ~ 1e-16)
        for _ in range(CAP_CENTRE_STEPS):
            m = free[inside].sum(axis=0)
            moved = free @ (m / np.linalg.norm(m)) >= c_half
            if moved.sum() < inside.sum() or np.array_equal(moved, inside):
                break
            inside = moved
        free = free[~inside]
        count += 1
    return count


def output_variance(F):
    r"""Mean over inputs (and outputs) of the variance of F across an ensemble of seeds.

    Geiger et al. (2019): at initialisation Var F ∝ α²/h^0 (it does not fall with width
    h in their normalisation, with 1/√h output weights) and the fluctuations of the
    trained function fall like 1/h in the lazy regime; a centered network has none at
    t = 0.  Compare values at several widths with :func:`scaling_exponent`.

    Parameters
    ----------
    F : (n_seeds, ...) array_like
        Outputs of n_seeds ≥ 2 independently initialised networks on the same inputs.

    Returns
    -------
    float
        mean over the trailing axes of Var_seed F (ddof = 1).
    """
    F = as_float_array(F, "F")
    if F.ndim < 1 or F.shape[0] < 2:
        raise ValueError(f"F needs a leading axis of at least 2 seeds, got shape {F.shape}")
    # quadratic in F: at unit scale (an exact power of two), the scale back on at the end
    F, e = pow2_normalise(F)
    return float(ldexp_safe(np.mean(np.var(F, axis=0, ddof=1)), 2 * e))


def variance_slope(widths, outputs):
    r"""Slope of log Var F against log width, with its standard error over seeds.

    ``V(h) = output_variance(outputs[i])`` at each width h; the slope is the least-squares
    slope p of log V(h) = p log h + c (Geiger et al. 2019: p = −1 for the trained
    network, "Var F ∼ 1/h in both regimes").  Standard error: the widths are independent
    ensembles, so Var p̂ = Σ_i c_i² Var(log V_i) with the regression weights
    c_i = (x_i − x̄)/Σ(x_j − x̄)², x = log h, and Var(log V_i) the delete-one-seed
    jackknife estimate at width i (no assumption on the distribution of F).

    Parameters
    ----------
    widths : (n_widths,) array_like, > 0, n_widths ≥ 2
    outputs : sequence of n_widths arrays, each (n_seeds_i, ...), n_seeds_i ≥ 3
        The outputs of independently initialised networks at each width, on the same
        inputs (the seed counts may differ between widths).

    Returns
    -------
    dict with ``slope``, ``stderr``, ``variance`` (n_widths,) and ``log_stderr``
    (n_widths,), the jackknife standard error of each log V(h)
    """
    h = check_positive(widths, "widths", ndim=1)
    if h.size < 2 or len(outputs) != h.size:
        raise ValueError(f"outputs must hold one ensemble per width (>= 2 widths), got {len(outputs)} "
                         f"ensembles for widths of shape {h.shape}")
    if np.unique(h).size < 2:
        raise ValueError("widths must contain at least two different values")
    V, se_log = [], []
    for i, F in enumerate(outputs):
        F = as_float_array(F, f"outputs[{i}]")
        n = F.shape[0] if F.ndim else 0
        if F.ndim < 1 or n < 3:
            raise ValueError(f"outputs[{i}] needs a leading axis of at least 3 seeds, got shape {F.shape}")
        v = output_variance(F)
        if not v > 0:
            raise ValueError(f"outputs[{i}] has no variance across seeds (Var F = {v})")
        loo = np.log([output_variance(np.delete(F, j, axis=0)) for j in range(n)])
        V.append(v)
        se_log.append(math.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))
    x = np.log(h)
    xc = x - x.mean()
    c = xc / (xc @ xc)
    logV = np.log(V)
    slope = float(c @ (logV - logV.mean()))
    se = float(math.sqrt(np.sum((c * np.array(se_log)) ** 2)))
    return {"slope": slope, "stderr": se, "variance": np.array(V), "log_stderr": np.array(se_log)}


def crossing_time(t, y, level, *, log=False):
    r"""First time a sampled curve reaches ``level``, interpolated between the bracketing samples.

    k is the first index with y_k ≥ ``level``; the crossing lies in (t_{k−1}, t_k] and is
    interpolated linearly in (t, y), or with ``log=True`` linearly in (log t, log y)
    (a power law between the samples; linearly where a bracketing t or y is ≤ 0).  For a
    decreasing quantity pass its negative (the time the loss falls below 0.9 L(0):
    ``crossing_time(t, -loss, -0.9 * loss[0])``).

    Parameters
    ----------
    t : (T,) array_like
        Sample times, increasing.
    y : (T,) array_like
        The curve at those times.
    level : float
    log : bool, optional
        Interpolate log y against log t (default False: y against t).

    Returns
    -------
    float
        The crossing time; NaN if y never reaches ``level``, or already does at the
        first sample (the crossing is not bracketed).
    """
    t = as_float_array(t, "t", ndim=1)
    y = as_float_array(y, "y", ndim=1)
    if y.shape != t.shape:
        raise ValueError(f"t and y must have the same length, got {t.size} and {y.size}")
    level = float(as_float_array(level, "level", ndim=0))
    above = np.flatnonzero(y >= level)
    if above.size == 0 or above[0] == 0:
        return math.nan
    k = int(above[0])
    t0, t1, y0, y1 = t[k - 1], t[k], y[k - 1], y[k]
    if log and min(t0, y0, level) > 0:
        x0, x1 = math.log(t0), math.log(t1)
        return float(math.exp(x0 + (math.log(level) - math.log(y0)) * (x1 - x0) / (math.log(y1) - math.log(y0))))
    return float(t0 + (level - y0) * (t1 - t0) / (y1 - y0))


def laziness_ratio(t, grads, loss):
    r"""The laziness ratio (|d∇f/dt| / |∇f|)·(L / |dL/dt|) along a trajectory.

    Atanasov, Bordelon & Pehlevan (2022), App. I: for an L-homogeneous network at
    initialisation scale σ, f ~ σ^L, ∇f ~ σ^{L−1}, ∇²f ~ σ^{L−2}, so the ratio is
    O(σ^{−L}): the features (and the NTK) move much faster than the loss.  Time
    derivatives are central differences on the recorded grid (second order on a
    non-uniform grid), so the grid must resolve the motion.

    Parameters
    ----------
    t : (T,) array_like, strictly increasing, T ≥ 3
    grads : (T, ...) array_like
        ∇_θ f along the path (e.g. the Jacobian of the outputs on the training set with
        respect to all parameters, flattened), any trailing shape.
    loss : (T,) array_like

    Returns
    -------
    ratio : (T − 2,) ndarray
        At the interior times t[1:-1].
    """
    t = as_float_array(t, "t", ndim=1)
    if t.size < 3 or np.any(np.diff(t) <= 0):
        raise ValueError("t must be strictly increasing with at least 3 entries")
    G = as_float_array(grads, "grads")
    if G.shape[0] != t.size:
        raise ValueError(f"grads must have {t.size} rows, got {G.shape}")
    G = G.reshape(t.size, -1)
    Lv = as_float_array(loss, "loss", ndim=1)
    if Lv.size != t.size:
        raise ValueError(f"loss must have {t.size} entries, got {Lv.size}")
    h0, h1 = np.diff(t)[:-1], np.diff(t)[1:]

    def deriv(y):
        ym, y0, yp = y[:-2], y[1:-1], y[2:]
        w_m = -h1 / (h0 * (h0 + h1))
        w_0 = (h1 - h0) / (h0 * h1)
        w_p = h0 / (h1 * (h0 + h1))
        sh = (-1,) + (1,) * (y.ndim - 1)
        return w_m.reshape(sh) * ym + w_0.reshape(sh) * y0 + w_p.reshape(sh) * yp

    dG = np.linalg.norm(deriv(G), axis=1) / np.linalg.norm(G[1:-1], axis=1)
    dL = np.abs(deriv(Lv))
    with np.errstate(divide="ignore"):
        return dG * Lv[1:-1] / dL


def scaling_exponent(widths, values):
    r"""Least-squares exponent p of values ∝ widths^p (slope of log value on log width).

    Parameters
    ----------
    widths, values : (n,) array_like, > 0, n ≥ 2

    Returns
    -------
    float
    """
    m = check_positive(widths, "widths", ndim=1)
    v = check_positive(values, "values", ndim=1)
    if m.size != v.size or m.size < 2:
        raise ValueError("widths and values must have the same length >= 2")
    return float(np.polyfit(np.log(m), np.log(v), 1)[0])


def phase_coordinates(alpha_exponent, beta_exponents):
    r"""Phase-diagram coordinates from the width-scaling exponents of α and the β_l.

    Conventions of the papers, which order the β differently:

    - two layers (Luo et al. 2021): f(x) = (1/α) Σ_k a_k σ(w_kᵀx) with the **output**
      weights a_k ~ N(0, β₁²) and the **input** weights w_k ~ N(0, β₂² I), so
      ``beta_exponents = (output, input)``;
    - three layers (Zhou et al. 2022): f(x) = (1/α) aᵀσ(W²σ(W¹x)) with W¹ ~ N(0, β₁²),
      W² ~ N(0, β₂²), a ~ N(0, β₃²), so ``beta_exponents = (input, hidden, output)``;

    i.i.d. entries, α ~ m^{alpha_exponent}, β_l ~ m^{beta_exponents[l]} at width m.  **Their α divides the output**; this
    package's α multiplies it (F = α f), so α_paper = 1/α_package (negate the exponent).

    Two layers (Luo et al. 2021, Sec. 3):
    γ = lim −log(β₁β₂/α)/log m = a − b₁ − b₂ and γ′ = lim −log(β₁/β₂)/log m = b₂ − b₁.
    Regimes as the paper states them: linear when γ < 1 or γ′ > γ − 1; condensed when
    γ > 1 and γ′ < γ − 1; critical on the boundary (γ = 1 with γ′ ≤ 0, or γ′ = γ − 1
    with γ ≥ 1).  Examples: NTK (α = √m, β = 1) (1/2, 0) linear; mean field (α = m)
    and Xavier (β ~ m^{−1/2}) (1, 0) critical.

    Three layers (Zhou et al. 2022, Sec. 3): under their assumption β₂ = Bβ₃ (so
    γ₁ = lim −log(β₂/β₃)/log m = 0) the normalised flow depends on two combinations;
    the available text does not give their defining equations, so the coordinates here
    are a **reconstruction** from the rescaling argument of Sec. 3 (normalised
    parameters ā = a/β₃, W̄^l = W^l/β_l; output amplitude β₁β₂β₃/α; relative rate of
    the input layer (β₃/β₁)²): γ₂ = lim −log(β₁/β₃)/log m = b₃ − b₁ and
    γ₃ = lim −log(β₁β₂β₃/α)/log m = a − b₁ − b₂ − b₃.  No regime is returned for three
    layers (the boundaries are drawn empirically in the paper, per layer).

    Parameters
    ----------
    alpha_exponent : float
        Exponent of the papers' α (the output divisor).
    beta_exponents : (2,) or (3,) sequence of float
        Exponents of β₁, β₂(, β₃): (output, input) for two layers, (input, hidden,
        output) for three, in each paper's order (above).  Example: input weights
        ~ m^−1.1 and output weights ~ m^−0.3 at α = 1 are ``(0.0, [-0.3, -1.1])``:
        γ = 1.4, γ′ = −0.8, condensed (small input weights condense).

    Returns
    -------
    dict
        Two layers: ``gamma``, ``gamma_prime``, ``regime`` ("linear" | "critical" |
        "condensed"). Three layers: ``gamma1``, ``gamma2``, ``gamma3``,
        ``reconstruction`` (True).
    """
    a = float(as_float_array(alpha_exponent, "alpha_exponent", ndim=0))
    b = as_float_array(beta_exponents, "beta_exponents", ndim=1)
    if b.size == 2:
        g = a - b[0] - b[1]
        gp = b[1] - b[0]
        tol = 1e-12
        if g < 1 - tol or gp > g - 1 + tol:
            regime = "linear"
        elif g > 1 + tol and gp < g - 1 - tol:
            regime = "condensed"
        else:
            regime = "critical"
        return {"gamma": float(g), "gamma_prime": float(gp), "regime": regime}
    if b.size == 3:
        return {"gamma1": float(b[2] - b[1]), "gamma2": float(b[2] - b[0]),
                "gamma3": float(a - b[0] - b[1] - b[2]), "reconstruction": True}
    raise ValueError(f"beta_exponents must have 2 (two layers) or 3 (three layers) entries, got {b.size}")
