"""Transfer with the learned kernel against Monte Carlo kernel regression and trained networks.

Check ``transfer`` (Atanasov, Bordelon & Pehlevan 2022, App. F).
"""
from __future__ import annotations

import math

import numpy as np

from .._validation import check_depth
from ..data import scalar_teacher
from ..network import empirical_ntk, init_network
from ..theory.dynamics import half_time
from ..theory.kernels import kernel_regression
from ..theory.transfer import trained_ntk_spike, transfer_error
from .common import (
    _seeded,
    SAFETY,
    Z_SCORE,
    _C0_GUESS,
    _check_args,
    _check_plateau,
    _fmt_array,
    _require,
    _sizes,
    _small_init,
    _train_to_convergence,
)
from .plotting import THEORY, figure
from .registry import Comparison

__all__ = ["compare_transfer"]

#: Finite-size allowance of the (P, D -> infinity) transfer theory: Monte Carlo at
#: D = 25..200 deviates by at most ~3 E_g / D (theory/transfer.md); we allow this / D.
FINITE_SIZE = 4.0


# =============================================================================
# transfer with the learned kernel (App. F)
# =============================================================================
def _transfer_monte_carlo(P, D, As, alphas, ridge, n_draw, seed):
    """Errors ||w_hat - w||^2 = E_x (f - w.x)^2 of kernel regression with x^T(A bb^T + I)x'.

    Shape (n_draw, len(As), len(alphas)); the same draws for every (A, alpha)
    (common random numbers: differences are measured more precisely than means).
    beta = e_1 and w = alpha e_1 + sqrt(1 - alpha^2) e_2 (the theory is rotation
    invariant). The predictor is :func:`linearnets.kernel_regression` evaluated on
    the unit vectors, so f(e_i) = w_hat_i.
    """
    rng = np.random.default_rng(seed)
    out = np.empty((n_draw, len(As), len(alphas)))
    W = np.zeros((D, len(alphas)))
    W[0], W[1] = alphas, np.sqrt(1.0 - np.asarray(alphas) ** 2)
    for k in range(n_draw):
        Xk = rng.standard_normal((P, D))
        Yk = Xk @ W
        for i, A in enumerate(As):
            m = np.ones(D)
            m[0] += A
            K = (Xk * m) @ Xk.T
            Kx = m[:, None] * Xk.T
            w_hat = np.asarray(kernel_regression(K, Kx, Yk, ridge=ridge))
            out[k, i] = np.sum((w_hat - W) ** 2, axis=0)
    return out


def _spike_of(M, beta):
    """(A, scale) of a kernel matrix M ~ scale (A beta beta^T + I): bulk = mean eigenvalue on beta-perp."""
    D = len(beta)
    Pp = np.eye(D) - np.outer(beta, beta)
    scale = np.trace(Pp @ M @ Pp) / (D - 1)
    return float(beta @ M @ beta / scale - 1.0), float(scale)


@_seeded
def compare_transfer(P=40, D=100, As=(0.0, 1.0, 2.0, 4.0, 9.0), alphas=(0.0, 1.0), ridge=0.0, n_draw=300,
                     depths=(2, 3), sigma=0.05, net_D=8, net_N=16, net_P=16, s=1.0, eta=1.0, seed=0,
                     backend="auto"):
    """``transfer_error`` vs Monte Carlo kernel regression; the spike of a trained network's NTK.

    (a) For every A and alpha, kernel regression with ``x^T(A beta beta^T + I)x'``
    on P Gaussian samples of the task ``w = alpha beta + sqrt(1 - alpha^2) w_perp``
    is repeated over ``n_draw`` draws; the mean error must match
    ``transfer_error`` within ``Z_SCORE`` standard errors plus the documented
    finite-size allowance ``FINITE_SIZE * E_g / D`` (the theory is exact only as
    P, D -> infinity). With the same draws for every A, the paired differences
    between the largest and the smallest A must show, beyond ``Z_SCORE``
    standard errors, that larger A lowers the error at alpha = 1 and raises it at
    alpha = 0, the signs the theory predicts.

    (b) Networks of the given depths are trained by gradient flow from
    ``init_network(sigma)`` on a whitened scalar teacher; their empirical NTK on
    the unit vectors is the kernel matrix M (``K(x, x') = x^T M x'``), whose spike
    ``A = beta^T M beta / bulk - 1`` (bulk: mean eigenvalue on beta-perp) and
    bulk must match ``trained_ntk_spike`` (``A = L - 1``, bulk ``s^(2-2/L)``) within
    the O(sigma^2) of the non-aligned initial weights: ``SAFETY * L * sigma^2``
    (absolute on A, relative on the bulk). The headline is the Monte Carlo case
    with the largest error relative to its tolerance.

    Range: net_P >= net_D; depths 1 to ``MAX_DEPTH``; sigma a small initialisation
    (``sigma^L < s/2``) with a plateau within ``MAX_PLATEAU`` / (eta s) at every depth. Else a
    ValueError naming the argument.
    """
    _check_args(locals())
    _require(net_P >= net_D, f"net_P must be >= net_D (whitened inputs), got net_P={net_P}, net_D={net_D}")
    for L in depths:            # up front: small starts, affordable plateaus
        _small_init(sigma ** L, s, f"sigma={sigma!r} at depth {L}")
        _check_plateau(s, _C0_GUESS * sigma ** L, L, eta, f"depths={tuple(depths)} with sigma={sigma!r}")
    As = np.asarray(As, float).reshape(-1)
    if As.size < 2 or not np.all(np.isfinite(As)) or np.any(As <= -1):
        raise ValueError("As must hold at least two finite spike strengths > -1")
    alphas = np.asarray(alphas, float)
    if np.any(np.abs(alphas) > 1):
        raise ValueError("alphas must lie in [-1, 1]")
    err = _transfer_monte_carlo(P, D, As, alphas, ridge, n_draw, seed + 23)
    mean = err.mean(axis=0)
    se = err.std(axis=0, ddof=1) / math.sqrt(n_draw)
    th = np.asarray(transfer_error(P, D, As[:, None], alphas[None, :], ridge))
    tol = Z_SCORE * se + FINITE_SIZE * th / D
    dev = np.abs(mean - th)
    # paired differences largest A minus smallest A
    i_lo, i_hi = int(np.argmin(As)), int(np.argmax(As))
    dif = err[:, i_hi] - err[:, i_lo]
    dif_mean = dif.mean(axis=0)
    dif_se = dif.std(axis=0, ddof=1) / math.sqrt(n_draw)
    dif_th = th[i_hi] - th[i_lo]
    # the theory's sign, and simulation significantly of that sign
    sign_ok = bool(np.all(np.sign(dif_th) * dif_mean > Z_SCORE * dif_se))
    expected_sign = bool(np.all(np.sign(dif_th[alphas == 1.0]) < 0) and np.all(np.sign(dif_th[alphas == 0.0]) > 0))
    # (b) the spike of trained networks
    Xn, yn, beta = scalar_teacher(net_P, net_D, s, seed=seed)
    spikes = []
    for L in depths:
        L = check_depth(L)
        w0 = init_network(_sizes(net_D, net_N, 1, L), sigma, seed=seed + 1)
        t_guess = 2.0 * float(half_time(s, _C0_GUESS * sigma ** L, depth=L, eta=eta)) + 20.0 / (eta * s)
        traj = _train_to_convergence(w0, Xn, yn, eta, backend, t_guess, n=20)
        M = np.asarray(empirical_ntk(traj.weights, np.eye(net_D), np.eye(net_D)))
        A_meas, scale_meas = _spike_of(M, beta)
        A_th, scale_th = trained_ntk_spike(L, s)
        spikes.append((L, A_meas, float(A_th), scale_meas, float(scale_th), SAFETY * L * sigma ** 2))
    sp = np.array(spikes)
    spike_ok = bool(np.all(np.abs(sp[:, 1] - sp[:, 2]) <= sp[:, 5])
                    and np.all(np.abs(sp[:, 3] / sp[:, 4] - 1.0) <= sp[:, 5]))
    i, j = np.unravel_index(np.argmax(dev / tol), dev.shape)
    return Comparison(
        name="transfer", title="transfer error of the spiked kernel vs Monte Carlo; trained-NTK spike (App. F)",
        quantity=f"E_g at A={As[i]:g}, alpha={alphas[j]:g} (P={P}, D={D}): theory vs Monte Carlo mean",
        theory=float(th[i, j]), simulation=float(mean[i, j]), error=float(dev[i, j]), tolerance=float(tol[i, j]),
        passed=bool(np.all(dev <= tol) and sign_ok and expected_sign and spike_ok),
        arrays=dict(As=As, alphas=alphas, mc_mean=mean, mc_se=se, theory=th, tolerances=tol,
                    diff_mean=dif_mean, diff_se=dif_se, diff_theory=dif_th, spike_depths=sp[:, 0],
                    spike_measured=sp[:, 1], spike_theory=sp[:, 2], bulk_measured=sp[:, 3],
                    bulk_theory=sp[:, 4], spike_tolerance=sp[:, 5]),
        params=dict(P=P, D=D, ridge=ridge, n_draw=n_draw, sigma=sigma, net_D=net_D, net_N=net_N,
                    net_P=net_P, s=s, eta=eta, seed=seed),
        notes=("Monte Carlo - theory in units of the tolerance: "
               + _fmt_array((mean - th) / tol)
               + f"; E_g(A={As[i_hi]:g}) - E_g(A={As[i_lo]:g}) per alpha: sim "
               + _fmt_array(dif_mean, 3) + " +- " + _fmt_array(dif_se, 3)
               + ", theory " + _fmt_array(dif_th, 3)
               + "; trained spike (L, A measured, A theory, bulk measured, bulk theory): "
               + "; ".join(f"({int(r[0])}, {r[1]:.4f}, {r[2]:g}, {r[3]:.4f}, {r[4]:.4g})" for r in spikes)))


# =============================================================================
# figures
# =============================================================================


def plot_transfer(res):
    """E_g against the spike A (Monte Carlo and theory), and the trained NTK's spike per depth."""
    a = res.arrays
    p = res.params
    fig, axes = figure(2, width=4.6, height=3.6)
    ax = axes[0]
    A_fine = np.linspace(0.0, max(a["As"].max(), 1.0) * 1.05, 120)
    for j, (alpha, col) in enumerate(zip(a["alphas"], ("C0", "C1", "C2", "C4"))):
        ax.plot(A_fine, transfer_error(p["P"], p["D"], A_fine, alpha, p["ridge"]), **THEORY)
        ax.errorbar(a["As"], a["mc_mean"][:, j], yerr=2 * a["mc_se"][:, j],
                    fmt="o", color=col, ms=6, capsize=3, label=fr"Monte Carlo $\alpha$={alpha:g}")
    for L, A in zip(a["spike_depths"], a["spike_measured"]):
        ax.axvline(A, color="gray", ls=":", lw=1)
        ax.text(A, ax.get_ylim()[1], f" L={int(L)}", fontsize=7, va="top", color="gray")
    ax.plot([], [], **THEORY, label="transfer_error")
    ax.set(xlabel="spike A", ylabel=r"$E_g$", title=f"kernel regression, P={p['P']}, D={p['D']} (bars: 2 SE)")
    ax.legend(fontsize=7)
    ax = axes[1]
    d = a["spike_depths"]
    dd = np.arange(1, d.max() + 1)
    ax.plot(dd, dd - 1.0, **THEORY, label="trained_ntk_spike: A = L - 1")
    ax.errorbar(d, a["spike_measured"], yerr=a["spike_tolerance"], fmt="o", ms=7, capsize=3,
                label=fr"empirical NTK after training, $\sigma$={p['sigma']:g}")
    ax.set(xlabel="depth L", ylabel="spike A", title="spike of the trained NTK (bars: tolerance)",
           xticks=dd)
    ax.legend(fontsize=7)
    return fig
