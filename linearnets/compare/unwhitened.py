"""Phase I on non-whitened inputs against simulation.

Check ``unwhitened_phase1`` (Atanasov, Bordelon & Pehlevan 2022, App. C.3 and Sec. 4).
"""
from __future__ import annotations

import math

import numpy as np

from .._validation import check_positive
from ..network import init_network
from ..theory.unwhitened import unwhitened_init_stats, unwhitened_kernel_matrix, unwhitened_phase1
from .common import (
    _seeded,
    MIN_SLOPE_TOL,
    SAFETY,
    _check_args,
    _check_sigmas,
    _flow,
    _fmt_array,
    _require,
    _slope_or,
    _small_init,
)
from .plotting import THEORY, colors, figure
from .registry import Comparison

__all__ = ["compare_unwhitened_phase1"]


def _top_eigvec(M):
    """Eigenvector of the largest eigenvalue of each symmetric matrix in ``M`` (..., D, D)."""
    return np.linalg.eigh(M)[1][..., -1]


# =============================================================================
# unwhitened phase I (App. C.3, Sec. 4)
# =============================================================================
@_seeded
def compare_unwhitened_phase1(sigmas=(0.02, 0.01, 0.005), D=4, N=6, P=300, s=1.0, scales=None,
                              eta=1.0, n_times=60, seed=0, backend="auto"):
    """Six phase-I statistics of a two-layer net on non-whitened inputs vs ``unwhitened_phase1``.

    Inputs ``x`` have covariance ``Sigma = X^T X / P`` (columns scaled by
    ``scales``, default geometric from 2 to 0.3), target ``y = s beta.x``. The
    statistics ``(|a|^2, a.W beta, a.W Sigma beta, |W beta|^2, ...)`` are
    measured along the simulated flow and predicted by the closed form with
    ``init_stats`` from the simulated initial weights. The linearisation drops
    the network output against the target, a relative correction of the size
    ``|a(t)|^2 / s``, so at each time ``max_i |x_sim - x_th| / max_i |x_th| <=
    SAFETY |a_th(t)|^2 / s``; the error scales as sigma^2 (same seed at every
    sigma, so the initial weights are exactly proportional to sigma): the headline
    is the fitted log-log slope of the worst error against sigma, theory 2 within
    ``max(0.25, 2 SAFETY |a_th|^2/s)`` at the window end (the relative size of the
    next correction). The window is phase I of the largest sigma, up to where
    ``|a_th|^2`` reaches ``sqrt(|a_0|^2 s)``.

    The top eigenvector of the simulated kernel matrix ``M = W^T W + |a|^2 I``
    (``K(x, x') = x^T M x'``) is compared with the one of
    ``unwhitened_kernel_matrix`` (an O(eps) error of M, eps = ``|a_th|^2 / s``, turns
    the top eigenvector by O(eps), so ``1 - |overlap| <= (SAFETY eps)^2``), and its
    overlaps with ``Sigma beta / |Sigma beta|`` and with ``beta`` are reported: the
    kernel must grow along ``Sigma beta``, not ``beta`` (the first overlap larger).

    Range: sigmas a small initialisation, ``|a(0)|^2 < s/2`` at the largest (phase I is
    the growth out of it); ``scales`` of length D. Else a ValueError naming the argument.
    """
    _check_args(locals())
    _require(scales is None or len(scales) == D, f"scales must have D = {D} entries, got {scales!r}")
    sigmas = _check_sigmas(sigmas)
    s = float(check_positive(s, "s", ndim=0))
    rng = np.random.default_rng(seed + 13)
    scales = np.geomspace(2.0, 0.3, D) if scales is None else check_positive(scales, "scales")
    X = rng.standard_normal((P, D)) * scales
    beta = rng.standard_normal(D)
    beta /= np.linalg.norm(beta)
    y = s * X @ beta
    Sigma = X.T @ X / P
    g = Sigma @ beta
    sb = float(np.linalg.norm(g))
    ghat = g / sb
    # the window: phase I of the largest sigma (theta = eta s sqrt(b) t)
    w_big = init_network((D, N, 1), sigmas[0], seed=seed + 1)
    x_big = np.asarray(unwhitened_init_stats(w_big[0], w_big[1], Sigma, beta))
    _small_init(x_big[0], s, f"sigmas (sigma = {sigmas[0]:g}: |a(0)|^2)")
    theta_fine = np.linspace(0.0, 0.5 * math.log(s / x_big[0]) + 3.0, 2000)
    pre = unwhitened_phase1(theta_fine / (eta * s * sb), Sigma, beta, s, x_big, eta=eta)
    log_a2 = np.log(np.asarray(pre.scaled_stats)[:, 0]) + np.asarray(pre.log_scale)
    reached = np.nonzero(log_a2 >= 0.5 * math.log(x_big[0] * s))[0]
    k_end = int(reached[0]) if reached.size else len(theta_fine) - 1
    theta = np.linspace(0.0, theta_fine[k_end], n_times)
    t = theta / (eta * s * sb)
    stats_sim, stats_th, errs, tols, a2_end = [], [], [], [], []
    ov_g, ov_b, ov_th, ov_th_g, ov_th_b = [], [], [], [], []
    for sig in sigmas:
        w0 = init_network((D, N, 1), sig, seed=seed + 1)
        x0 = np.asarray(unwhitened_init_stats(w0[0], w0[1], Sigma, beta))
        traj = _flow(w0, X, y, t, eta, backend, record=("weights",))
        W_t, a_t = np.asarray(traj.weights_t[0]), np.asarray(traj.weights_t[1])[:, 0, :]
        sim = np.array([unwhitened_init_stats(W_t[k], a_t[k], Sigma, beta) for k in range(len(t))])
        th = np.asarray(unwhitened_phase1(t, Sigma, beta, s, x0, eta=eta).stats)
        err = np.max(np.abs(sim - th), axis=1) / np.max(np.abs(th), axis=1)
        tol = SAFETY * th[:, 0] / s
        # kernel matrices M = W^T W + |a|^2 I along the path: simulated and linearised theory
        M_sim = np.swapaxes(W_t, 1, 2) @ W_t + np.sum(a_t * a_t, axis=1)[:, None, None] * np.eye(D)
        M_th = np.asarray(unwhitened_kernel_matrix(t, w0[0], w0[1], Sigma, beta, s, eta=eta))
        e_sim, e_th = _top_eigvec(M_sim), _top_eigvec(M_th)
        stats_sim.append(sim); stats_th.append(th); errs.append(err); tols.append(tol)
        a2_end.append(th[-1, 0])
        ov_g.append(np.abs(e_sim @ ghat)); ov_b.append(np.abs(e_sim @ beta))
        ov_th.append(np.abs(np.sum(e_sim * e_th, axis=1)))
        ov_th_g.append(np.abs(e_th @ ghat)); ov_th_b.append(np.abs(e_th @ beta))
    errs, tols = np.asarray(errs), np.asarray(tols)
    worst = errs.max(axis=1)
    slope = _slope_or(sigmas, worst, 2.0)
    slope_tol = max(MIN_SLOPE_TOL, 2.0 * SAFETY * a2_end[0] / s) if len(sigmas) > 1 else np.inf
    ov_g, ov_b, ov_th = np.asarray(ov_g), np.asarray(ov_b), np.asarray(ov_th)
    dir_err = 1.0 - ov_th[:, -1]
    # an O(eps) error of M turns its top eigenvector by O(eps) (gap ~ |a|^2 ~ |M|): 1 - cos = O(eps^2)
    dir_tol = (SAFETY * np.asarray(a2_end) / s) ** 2
    ok_stats = bool(np.all(errs <= tols))
    ok_dir = bool(np.all(dir_err <= dir_tol) and np.all(ov_g[:, -1] > ov_b[:, -1]))
    passed = ok_stats and ok_dir and abs(slope - 2.0) <= slope_tol
    return Comparison(
        name="unwhitened_phase1", title="unwhitened phase I: six statistics and the kernel direction (App. C.3)",
        quantity="slope of log(max relative statistics error) vs log(sigma)",
        theory=2.0, simulation=slope, error=abs(slope - 2.0), tolerance=slope_tol, passed=passed,
        arrays=dict(sigmas=sigmas, t=t, theta=theta, stats_sim=stats_sim, stats_theory=stats_th,
                    errors=errs, tolerances=tols, overlap_sigma_beta=ov_g, overlap_beta=ov_b,
                    overlap_theory=ov_th, overlap_theory_sigma_beta=np.asarray(ov_th_g),
                    overlap_theory_beta=np.asarray(ov_th_b), scales=np.asarray(scales)),
        params=dict(D=D, N=N, P=P, s=s, eta=eta, seed=seed, beta_dot_ghat=float(abs(beta @ ghat))),
        notes=(f"per-sigma max error/tolerance {_fmt_array(np.max(errs / tols, axis=1), 2)}; "
               f"top kernel eigenvector at theta={theta[-1]:.2f}: overlap with Sigma beta "
               f"{_fmt_array(ov_g[:, -1], 4)}, with beta {_fmt_array(ov_b[:, -1], 4)} "
               f"(|beta.Sigma beta|/|Sigma beta| = {abs(beta @ ghat):.3f}); 1 - overlap with the theory's "
               f"eigenvector {_fmt_array(dir_err)} <= {_fmt_array(dir_tol)}"))


# =============================================================================
# figures
# =============================================================================

_STAT_LABELS = (r"$|a|^2$", r"$a^TW\beta$", r"$a^TW\Sigma\beta$", r"$|W\beta|^2$",
                r"$\beta^TW^TW\Sigma\beta$", r"$|W\Sigma\beta|^2$")


def plot_unwhitened_phase1(res):
    """The six statistics against theory, their error against sigma, and the kernel's top direction."""
    a = res.arrays
    fig, axes = figure(3, width=3.9, height=3.5)
    theta = a["theta"]
    k = len(a["sigmas"]) - 1          # smallest sigma: the longest clean phase I
    for i, col in enumerate(colors(6)):
        axes[0].semilogy(theta, np.abs(a["stats_sim"][k][:, i]), color=col, lw=2.5, alpha=0.7,
                         label=_STAT_LABELS[i])
        axes[0].semilogy(theta, np.abs(a["stats_theory"][k][:, i]), **THEORY)
    axes[0].set(xlabel=r"$\theta=\eta s\|\Sigma\beta\|t$", ylabel="|statistic|",
                title=fr"six statistics, $\sigma$={a['sigmas'][k]:g} (dashed: theory)")
    axes[0].legend(fontsize=6, ncol=2)
    for col, sig, e, tl in zip(colors(len(a["sigmas"])), a["sigmas"], a["errors"], a["tolerances"]):
        axes[1].semilogy(theta[1:], e[1:], color=col, lw=2, label=fr"$\sigma$={sig:g}")
        axes[1].semilogy(theta[1:], tl[1:], color=col, ls=":", lw=1, label=fr"tolerance, $\sigma$={sig:g}")
    axes[1].set(xlabel=r"$\theta$", ylabel="max relative error",
                title=f"error ~ $\\sigma^2$ (slope {res.simulation:.2f})")
    axes[1].legend(fontsize=7)
    axes[2].plot(theta, a["overlap_sigma_beta"][k], color="C0", lw=2.5, alpha=0.7,
                 label=r"sim: top eigvec $\cdot\,\Sigma\beta/\|\Sigma\beta\|$")
    axes[2].plot(theta, a["overlap_beta"][k], color="C3", lw=2.5, alpha=0.7, label=r"sim: top eigvec $\cdot\,\beta$")
    axes[2].plot(theta, a["overlap_theory_sigma_beta"][k], **THEORY, label="theory")
    axes[2].plot(theta, a["overlap_theory_beta"][k], **THEORY)
    axes[2].set(xlabel=r"$\theta$", ylabel="|overlap|", ylim=(0, 1.02),
                title=r"kernel $W^TW+|a|^2I$ grows along $\Sigma\beta$")
    axes[2].legend(fontsize=7, loc="lower right")
    return fig
