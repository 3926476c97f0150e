"""The infinite-width kernels against finite networks: ``ntk_at_init`` and ``infinite_width_lazy``.

``ntk_at_init``: the empirical NTK of "ntk"-parameterised networks approaches
``infinite_width_kernels`` with slope −1/2 in the width. ``infinite_width_lazy``: a wide
ReLU network trained by gradient flow under mse follows ``lazy_prediction`` with the
infinite-width NTK; its end-of-training distance falls as m^(−1/2). Both tolerances are
``Z_SCORE`` standard errors of a fitted slope over independent networks plus the first
neglected order, an O(1/m) correction to an O(m^(−1/2)) quantity, which moves a slope
fitted from ``m_min`` by about ``m_min^(−1/2)/2`` (``theory/infinite_width.md``).
"""
from __future__ import annotations

import math

import numpy as np

from ..sim.flow import gradient_flow
from ..network import empirical_ntk
from ..parameterisations import init_parameterised
from ..theory.infinite_width import infinite_width_kernels
from ..theory.lazy import lazy_prediction
from .common import Z_SCORE, _check_args, _loglog_slope, _seeded
from .plotting import THEORY, figure
from .registry import Comparison

__all__ = ["compare_ntk_at_init", "compare_infinite_width_lazy", "zhou_infinite_width_ntk", "zhou_lazy_distance"]

#: Standard deviation over seeds 0-9 of the lazy row's fitted slope at its defaults (measured:
#: slopes -0.40 to -0.55, mean -0.481, sd 0.046): the dataset drawn from the seed (its
#: smallest kernel eigenvalue) sets the size of the O(1/m) correction, which the spread of
#: one dataset's networks does not see, so the tolerance takes the larger of the two.
LAZY_SEED_SPREAD = 0.046
#: Integrator tolerance of the lazy row (its distances are >= 1e-3; rtol 1e-7 is 1e-4 of them).
LAZY_RTOL = 1e-7


def _slope_tolerance(per_rep, m_min, floor=0.0):
    """Z_SCORE standard errors (at least ``floor``) of the mean of the per-network slopes + the
    O(1/m) correction m_min^(-1/2)/2."""
    per_rep = np.asarray(per_rep, float)
    se = float(per_rep.std(ddof=1) / math.sqrt(per_rep.size))
    return Z_SCORE * max(se, floor) + 0.5 / math.sqrt(m_min), se


#: The ntk_at_init row's hidden biases: trained, drawn N(0, NTK_BIAS_STD^2).
NTK_BIAS_STD = 0.5


@_seeded
def compare_ntk_at_init(widths=(64, 256, 1024, 4096), depth=3, P=6, D=5, reps=4, activation="relu",
                        biases=True, sigma=1.0, seed=0):
    """``empirical_ntk`` of ``init_parameterised(..., "ntk")`` networks against ``infinite_width_kernels``.

    Error e(m) = ‖K_m − K_∞‖_F / ‖K_∞‖_F, averaged over ``reps`` independent networks per
    width (hidden biases, when ``biases``, drawn N(0, ``NTK_BIAS_STD``²)).  Theory: the finite-width NTK is a mean over O(m) weakly dependent unit terms, so
    e(m) ~ m^(−1/2) (central limit; ``theory/infinite_width.md``).  Headline: the slope of
    log mean e on log m, theory −1/2; tolerance ``Z_SCORE`` standard errors of the per-network
    slopes plus ``m_min^(−1/2)/2`` (the O(1/m) bias of a deep network's kernel).
    """
    _check_args({k: v for k, v in locals().items() if k != "activation"}, reps=("count", 2))
    bias_std = NTK_BIAS_STD
    infinite_width_kernels(np.ones((1, 1)), np.ones((1, 1)), depth, activation)   # names a bad activation
    if not isinstance(biases, (bool, np.bool_)):
        raise ValueError(f"biases must be True or False, got {biases!r}")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    _, Kinf = infinite_width_kernels(X, X, depth, activation, sigma=sigma, biases=biases, bias_std=bias_std)
    widths = np.asarray(widths, dtype=int)
    errs = np.empty((reps, widths.size))
    for k, m in enumerate(widths):
        for r in range(reps):
            p = init_parameterised((D,) + (int(m),) * (depth - 1) + (1,), "ntk", sigma, seed=rng,
                                       biases=biases, bias_std=bias_std)
            K = empirical_ntk(p.weights, X, X, activation=activation, **p.ntk_kwargs())
            errs[r, k] = np.linalg.norm(K - Kinf) / np.linalg.norm(Kinf)
    mean = errs.mean(axis=0)
    slope = _loglog_slope(widths, mean)
    per_rep = [_loglog_slope(widths, e) for e in errs]
    tol, se = _slope_tolerance(per_rep, widths[0])
    err = abs(slope + 0.5)
    return Comparison(
        name="ntk_at_init", title=f"empirical NTK of 'ntk' networks -> infinite_width_kernels ({activation}, depth {depth})",
        quantity="slope of log ||K_m - K_inf||_F/||K_inf||_F vs log m",
        theory=-0.5, simulation=slope, error=err, tolerance=tol, passed=err <= tol,
        arrays={"widths": widths.astype(float), "error": mean, "errors": errs},
        params=dict(widths=tuple(int(m) for m in widths), depth=depth, P=P, D=D, reps=reps,
                    activation=activation, biases=biases, bias_std=bias_std, sigma=sigma, seed=seed),
        notes=f"mean errors {np.array2string(mean, precision=3)}; per-network slopes "
              f"{np.array2string(np.asarray(per_rep), precision=2)} (se {se:.3f}); tolerance "
              f"{Z_SCORE:g} se + m_min^-1/2 / 2",
        kind="ntk_at_init")


@_seeded
def compare_infinite_width_lazy(widths=(128, 512, 2048, 8192), P=6, Q=6, D=8, reps=6, sigma=1.0,
                                lam_time=3.0, seed=0, backend="auto"):
    """A wide "ntk" ReLU network under gradient flow (mse) against ``lazy_prediction`` with K_∞.

    Two layers of width m, ``init_parameterised((D, m, 1), "ntk", sigma)``, centered
    (F = f − f_0, so that both start at 0), trained to T = ``lam_time`` P/λ_min(K_∞) (the
    slowest mode of the limit kernel relaxed ``lam_time`` times).  Distance
    d(m) = ‖F_T − F_T^lazy‖ / ‖Y‖ over P training and Q test inputs, with F^lazy =
    ``lazy_prediction(T, K_∞, ...)``.  Theory (``theory/infinite_width.md``): the kernel's
    finite-width fluctuation and its drift during training are both O(m^(−1/2)), so
    d(m) ~ m^(−1/2).  Headline: the slope of log mean d on log m over ``reps`` networks per
    width (measured over seeds 0–9: −0.40 to −0.55, mean −0.481); tolerance ``Z_SCORE``
    standard errors of the per-network slopes, at least ``Z_SCORE`` × ``LAZY_SEED_SPREAD``
    (the spread over datasets), plus ``m_min^(−1/2)/2``.
    """
    _check_args(locals(), reps=("count", 2), lam_time="positive")
    rng = np.random.default_rng(seed)
    X, Xq = rng.standard_normal((P, D)), rng.standard_normal((Q, D))
    Xall = np.vstack([X, Xq])
    Y = rng.standard_normal((P, 1))
    _, Kall = infinite_width_kernels(Xall, Xall, 2, "relu", sigma=sigma)
    K, Kq = Kall[:P, :P], Kall[:, :P]
    lam_min = float(np.linalg.eigvalsh(K)[0])
    T = lam_time * P / lam_min
    t = np.array([0.0, T])
    _, Flazy = lazy_prediction(t, K, Kq, Y)
    widths = np.asarray(widths, dtype=int)
    dist = np.empty((reps, widths.size))
    for k, m in enumerate(widths):
        for r in range(reps):
            p = init_parameterised((D, int(m), 1), "ntk", sigma, seed=rng)
            kw = p.flow_kwargs()
            kw["centered"] = True
            tr = gradient_flow(p.weights, X, Y, t, activation="relu", record=("outputs",), probe=Xall,
                                   rtol=LAZY_RTOL, atol=1e-12, backend=backend, raise_on_failure=True, **kw)
            dist[r, k] = np.linalg.norm(tr.outputs[-1] - Flazy[-1]) / np.linalg.norm(Y)
    mean = dist.mean(axis=0)
    slope = _loglog_slope(widths, mean)
    per_rep = [_loglog_slope(widths, d) for d in dist]
    tol, se = _slope_tolerance(per_rep, widths[0], LAZY_SEED_SPREAD)
    err = abs(slope + 0.5)
    return Comparison(
        name="infinite_width_lazy",
        title="wide 'ntk' ReLU network under gradient flow -> lazy_prediction with the infinite-width NTK",
        quantity="slope of log ||F_T - F_T^lazy(K_inf)|| / ||Y|| vs log m (train + test inputs)",
        theory=-0.5, simulation=slope, error=err, tolerance=tol, passed=err <= tol,
        arrays={"widths": widths.astype(float), "distance": mean, "distances": dist},
        params=dict(widths=tuple(int(m) for m in widths), P=P, Q=Q, D=D, reps=reps, sigma=sigma,
                    T=T, seed=seed),
        notes=f"mean distances {np.array2string(mean, precision=3)} at T = {T:.3g}; per-network slopes "
              f"{np.array2string(np.asarray(per_rep), precision=2)} (se {se:.3f}); tolerance "
              f"{Z_SCORE:g} max(se, {LAZY_SEED_SPREAD:g} = the sd over seeds 0-9) + m_min^-1/2 / 2",
        kind="infinite_width_lazy")


def _plot_loglog(res, key, label):
    a = res.arrays
    fig, axes = figure(1)
    ax = axes[0]
    w, v = a["widths"], a[key]
    for row in a[key + "s"]:
        ax.loglog(w, row, "-", color="0.75", lw=0.8)
    ax.loglog(w, v, "o-", label=label + " (mean)")
    ax.loglog(w, v[0] * (w / w[0]) ** -0.5, **THEORY, label=r"$\propto m^{-1/2}$")
    ax.set(xlabel="width m")
    ax.legend(fontsize=8)
    return fig


def plot_ntk_at_init(res):
    """Relative distance of the empirical NTK from the limit against the width (grey: each network)."""
    return _plot_loglog(res, "error", r"$\|K_m - K_\infty\|_F / \|K_\infty\|_F$")


def plot_infinite_width_lazy(res):
    """End-of-training distance from the infinite-width lazy prediction against the width."""
    return _plot_loglog(res, "distance", r"$\|F_T - F^{lazy}_T(K_\infty)\| / \|Y\|$")


def zhou_lazy_distance(p, betas, weights, biases, t, X, Y, X_test):
    """Distance of a trained ``zhou_parameterisation`` ReLU network from its infinite-width lazy prediction.

    The network (multiplier 1, W_l ~ N(0, β_l²), biases b_l ~ N(0, β_l²) trained with their
    layer, F = α f) is the "ntk" one of :func:`~linearnets.theory.infinite_width.infinite_width_layer_kernels`
    with σ_1 = β_1 √(D + 1) on the inputs (x, 1) (b_1 as the weight of the constant input),
    σ_l = β_l √m, hidden biases b_l (l ≥ 2) of std β_l, and weight rates N_{l−1} (its gradients
    lack the 1/√N_{l−1}), so its infinite-width NTK at width m is
    K = α² [Σ_l N_{l−1} W_l + Σ_{l≥2} B_l].  The prediction is ``lazy_prediction(t, K, ...)``
    from the network's own outputs at t = 0, with its ``eta`` and ``alpha``.

    Parameters
    ----------
    p : Parameterised
        The network at t = 0 (``zhou_parameterisation(..., form="direct")``).
    betas : sequence of L floats
    weights, biases : lists of ndarray
        The trained parameters at time ``t`` (``biases`` None without biases).
    t : float
        Training time.
    X, Y : (P, d), (P,) or (P, 1) arrays
        Training inputs and targets.
    X_test : (Q, d) array
        Where the two functions are compared.

    Returns
    -------
    float
        ‖F_t(X_test) − F_t^lazy(X_test)‖ / ‖Y‖ · √(P/Q) (root-mean-square over the test
        inputs, in units of the targets' root-mean-square).
    """
    from ..options import parse_options
    from ..sim.models.mlp import MLP

    X, X_test = np.asarray(X, float), np.asarray(X_test, float)
    Y = np.asarray(Y, float).reshape(len(X), -1)
    L = len(p.weights)
    P, Q = len(X), len(X_test)
    Xall = np.vstack([X, X_test])
    K = zhou_infinite_width_ntk(betas, p.weights[0].shape[0], Xall, biases=p.biases is not None, alpha=p.alpha)
    opts = parse_options(L, activation="relu", multipliers=p.multipliers, alpha=p.alpha)
    F0 = MLP(p.weights, p.biases, opts).outputs(MLP(p.weights, p.biases, opts).y0, Xall)
    net = MLP(list(weights), None if biases is None else list(biases), opts)
    Ft = net.outputs(net.y0, X_test)
    _, Fl = lazy_prediction([t], K[:P, :P], K[P:, :P], Y, F0[:P], F0[P:], eta=p.eta, alpha=p.alpha)
    return float(np.linalg.norm(Ft - Fl[-1]) / np.linalg.norm(Y) * math.sqrt(P / Q))


def zhou_infinite_width_ntk(betas, m, X, biases=True, alpha=1.0):
    """The infinite-width NTK at width m of ``zhou_parameterisation`` ReLU networks (see
    :func:`zhou_lazy_distance`): α² [Σ_l N_{l−1} W_l + Σ_{l≥2} B_l] on the inputs (x, 1).

    Parameters
    ----------
    betas : sequence of L floats
    m : int
        The hidden width.
    X : (P, d) array
    biases : bool
    alpha : float
        The model's output scale (``1/alpha_Z``).

    Returns
    -------
    (P, P) ndarray
    """
    from ..theory.infinite_width import infinite_width_layer_kernels

    X = np.asarray(X, float)
    Xa = np.hstack([X, np.ones((len(X), 1))]) if biases else X
    D = Xa.shape[1]
    betas = np.asarray(betas, float)
    L = betas.size
    sig = np.array([betas[0] * math.sqrt(D)] + [b * math.sqrt(m) for b in betas[1:]])
    bstd = np.array([0.0] + list(betas[1:-1])) if biases else np.zeros(L - 1)
    _, Wp, Bp = infinite_width_layer_kernels(Xa, Xa, L, "relu", sigmas=sig, bias_stds=bstd)
    K = D * Wp[0] + m * Wp[1:].sum(axis=0)
    if biases and L > 2:
        K = K + Bp[1:].sum(axis=0)
    return alpha ** 2 * K
