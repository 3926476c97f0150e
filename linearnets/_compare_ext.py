"""Theory against simulation for the extended closed forms.

The checks of :mod:`linearnets.compare` cover the core theory; this module adds
the extensions — unwhitened phase I, many outputs along the whole path, the
kernels of intermediate layers, transfer with the learned kernel and the
finite-sigma final NTK — with the same conventions: the closed forms are
evaluated with initial conditions read off the *simulated* initial weights, the
tolerance is the error the theory predicts (times :data:`~linearnets.compare.SAFETY`),
and every routine returns a frozen :class:`~linearnets.compare.Comparison`.
Importing the module registers the checks ``unwhitened_phase1``, ``path_ntk``,
``intermediate_kernels``, ``transfer`` and ``finite_sigma_ntk`` in
:data:`~linearnets.compare.CHECKS` and their figures.
"""
from __future__ import annotations

import math

import numpy as np

import linearnets as _ln

from . import _plotting
from ._validation import check_depth, check_positive
from .compare import (
    ATOL,
    N_TIMES,
    RTOL,
    SAFETY,
    Z_SCORE,
    _C0_GUESS,
    Comparison,
    _balanced_aligned_init,
    _check_sigmas,
    _crossing_time,
    _data,
    _half_time_or_zero,
    _loglog_slope,
    _mode_projection,
    _check_args,
    _register,
    _require,
    _train_to_convergence,
)

__all__ = [
    "compare_unwhitened_phase1",
    "compare_path_ntk",
    "compare_intermediate_kernels",
    "compare_transfer",
    "compare_finite_sigma_ntk",
]

#: Finite-size allowance of the (P, D -> infinity) transfer theory: Monte Carlo at
#: D = 25..200 deviates by at most ~3 E_g / D (theory/transfer.md); we allow this / D.
FINITE_SIZE = 4.0
#: Smallest tolerance on a fitted log-log slope (the fit itself is not exact).
MIN_SLOPE_TOL = 0.25


# =============================================================================
# helpers
# =============================================================================
def _flow(weights, X, Y, t, eta, backend, record=None, probe=None):
    # a failure raises FlowError (a RuntimeError, "gradient flow failed: ..."), not a warning
    kw = dict(eta=eta, rtol=RTOL, atol=ATOL, backend=backend, raise_on_failure=True)
    if record:
        kw["record"] = tuple(record)
    if probe is not None:
        kw["probe"] = probe
    traj = _ln.gradient_flow(weights, X, Y, t, **kw)
    if not traj.success:
        raise RuntimeError(f"gradient flow failed: {traj.message}")
    return traj


def _sizes(D, N, C, depth):
    return (D,) + (N,) * (depth - 1) + (C,)


def _top_eigvec(M):
    return np.linalg.eigh(M)[1][..., -1]


def _fmt(a, digits=2):
    """Compact text for a small array in the notes (significant digits, any magnitude)."""
    return np.array2string(np.asarray(a), separator=", ", max_line_width=10_000,
                           formatter={"float_kind": lambda x: f"{x:.{digits}g}"}).replace("\n", "")


def _slope_or(sig, err, default):
    return _loglog_slope(sig, err) if len(sig) > 1 else default


# =============================================================================
# 1. unwhitened phase I (App. C.3, Sec. 4)
# =============================================================================
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
    w_big = _ln.init_network((D, N, 1), sigmas[0], seed=seed + 1)
    x_big = np.asarray(_ln.unwhitened_init_stats(w_big[0], w_big[1], Sigma, beta))
    theta_fine = np.linspace(0.0, 0.5 * math.log(s / x_big[0]) + 3.0, 2000)
    pre = _ln.unwhitened_phase1(theta_fine / (eta * s * sb), Sigma, beta, s, x_big, eta=eta)
    log_a2 = np.log(np.asarray(pre.scaled_stats)[:, 0]) + np.asarray(pre.log_scale)
    reached = np.nonzero(log_a2 >= 0.5 * math.log(x_big[0] * s))[0]
    k_end = int(reached[0]) if reached.size else len(theta_fine) - 1
    theta = np.linspace(0.0, theta_fine[k_end], n_times)
    t = theta / (eta * s * sb)
    stats_sim, stats_th, errs, tols, a2_end = [], [], [], [], []
    ov_g, ov_b, ov_th, ov_th_g, ov_th_b = [], [], [], [], []
    for sig in sigmas:
        w0 = _ln.init_network((D, N, 1), sig, seed=seed + 1)
        x0 = np.asarray(_ln.unwhitened_init_stats(w0[0], w0[1], Sigma, beta))
        traj = _flow(w0, X, y, t, eta, backend, record=("weights",))
        W_t, a_t = np.asarray(traj.weights_t[0]), np.asarray(traj.weights_t[1])[:, 0, :]
        sim = np.array([_ln.unwhitened_init_stats(W_t[k], a_t[k], Sigma, beta) for k in range(len(t))])
        th = np.asarray(_ln.unwhitened_phase1(t, Sigma, beta, s, x0, eta=eta).stats)
        err = np.max(np.abs(sim - th), axis=1) / np.max(np.abs(th), axis=1)
        tol = SAFETY * th[:, 0] / s
        # kernel matrices M = W^T W + |a|^2 I along the path: simulated and linearised theory
        M_sim = np.swapaxes(W_t, 1, 2) @ W_t + np.sum(a_t * a_t, axis=1)[:, None, None] * np.eye(D)
        M_th = np.asarray(_ln.unwhitened_kernel_matrix(t, w0[0], w0[1], Sigma, beta, s, eta=eta))
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
        notes=(f"per-sigma max error/tolerance {_fmt(np.max(errs / tols, axis=1), 2)}; "
               f"top kernel eigenvector at theta={theta[-1]:.2f}: overlap with Sigma beta "
               f"{_fmt(ov_g[:, -1], 4)}, with beta {_fmt(ov_b[:, -1], 4)} "
               f"(|beta.Sigma beta|/|Sigma beta| = {abs(beta @ ghat):.3f}); 1 - overlap with the theory's "
               f"eigenvector {_fmt(dir_err)} <= {_fmt(dir_tol)}"))


# =============================================================================
# 2. many outputs: modes and NTK along the path; learning order and times
# =============================================================================
def _half_times(w0, X, Y, U, S, Vt, L, eta, backend, t_guess, n=200, n_fine=100, max_doublings=8):
    """Simulated times at which every c_alpha first reaches s_alpha / 2.

    A coarse pass (horizon doubled until every mode has crossed) brackets each
    crossing; a second pass resolves every bracket with ``n_fine`` output times,
    so the accuracy does not depend on the horizon guess.
    """
    t_end = t_guess
    for _ in range(max_doublings):
        t = np.linspace(0.0, t_end, n)
        c = _mode_projection(_flow(w0, X, Y, t, eta, backend).end_to_end, U, S, Vt)
        k = [np.nonzero(c[:, a] >= 0.5 * S[a])[0] for a in range(len(S))]
        if all(kk.size and kk[0] > 0 for kk in k):
            break
        t_end *= 2.0
    else:
        raise RuntimeError("a mode was not learned within the horizon")
    fine = np.unique(np.concatenate([[0.0]] + [np.linspace(t[kk[0] - 1], t[kk[0]], n_fine) for kk in k]))
    c = _mode_projection(_flow(w0, X, Y, fine, eta, backend).end_to_end, U, S, Vt)
    return np.array([_crossing_time(fine, c[:, a], 0.5 * S[a]) for a in range(len(S))])


def compare_path_ntk(depths=(2, 3), spectrum=(2.0, 1.0, 0.5), c0=(1e-3, 5e-3, 2e-2), D=5, N=7, P=30,
                     n_probe=3, n_times=100, random_depths=(2, 3), sigmas=(0.02, 0.01, 0.005), random_width=10,
                     eta=1.0, seed=0, backend="auto"):
    """Per-mode strengths and the NTK along the path vs ``multimode_dynamics`` / ``path_ntk``.

    (a) Balanced, task-aligned start (every layer carries ``c0_alpha^(1/L)``
    along random orthonormal hidden frames; ``c0`` read back from the simulated
    end-to-end map): the theory is exact, so ``max |c_sim - c_th| / s_alpha`` and
    the relative Frobenius error of the empirical NTK on ``n_probe`` random probe
    inputs (recorded by the integrator) are bounded by the integrator's error
    control, ``SAFETY * N_TIMES * RTOL * (s/c0)^(1-2/L)`` (as
    :func:`~linearnets.compare.compare_mode_strengths`), times ``2 - 2/L`` for the
    kernel (its largest power of c).

    (b) Small random start (``init_network``, the same seed at every sigma):
    the modes are learned in the order ``mode_learning_times(...).order`` and
    the half times scale as the theory says: for L = 2 the delay between two
    sigmas, ``t(sigma_2) - t(sigma_1)``, must match the ``mode_learning_times``
    delay with ``c0 = sigma^2`` (the log law ``ln(sigma_1/sigma_2)/(eta s)``), for
    L >= 3 the ratio ``t(sigma_2)/t(sigma_1)`` the ratio predicted with
    ``c0 = sigma^L`` (the power law ``(sigma_1/sigma_2)^(L-2)``), both to a relative
    ``SAFETY * sigma_1``: the theory describes one decoupled mode from an aligned
    start, and the random start's mode coupling and alignment phase shift the
    escape by a relative O(sigma) (for L = 2 the measured deviation halves with
    sigma; for L >= 3 the theory's own correction ``c0^((L-2)/L)`` is of the same or
    smaller order). The headline is the worst path-NTK error.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    _require(len(spectrum) <= min(D, N, random_width),
             f"spectrum must have at most min(D, N, random_width) = {min(D, N, random_width)} modes, "
             f"got {len(spectrum)}")
    _require(np.size(c0) in (1, len(spectrum)),
             f"c0 must be a scalar or have one entry per mode of spectrum ({len(spectrum)}), got {c0!r}")
    depths = [check_depth(L) for L in depths]
    random_depths = [check_depth(L) for L in random_depths]
    spectrum = np.sort(check_positive(spectrum, "spectrum"))[::-1]
    C = len(spectrum)
    c0 = np.broadcast_to(check_positive(c0, "c0"), (C,))
    X, Y = _data().teacher_task(P, D, spectrum, seed=seed)
    _, Syx = _data().sufficient_statistics(X, Y)
    S, U, V = (np.asarray(v) for v in _ln.task_modes(Syx))
    Vt = V.T
    Xp = np.random.default_rng(seed + 17).standard_normal((n_probe, D))
    # (a) balanced, aligned start
    part_a = []
    for L in depths:
        w0 = _balanced_aligned_init(_sizes(D, N, C, L), U, V, c0, seed + L)
        c0_sim = _mode_projection(_ln.end_to_end(w0)[None], U, S, Vt)[0]
        rising = c0_sim < 0.5 * S
        t_half = float(np.max(_ln.half_time(S[rising], c0_sim[rising], depth=L, eta=eta))) if rising.any() else 0.0
        t = np.linspace(0.0, 1.5 * t_half + 6.0 / (eta * S.min()), n_times)
        traj = _flow(w0, X, Y, t, eta, backend, probe=Xp)
        c_sim = _mode_projection(traj.end_to_end, U, S, Vt)
        c_th = np.asarray(_ln.multimode_dynamics(t, Syx, c0_sim, depth=L, eta=eta).c)
        K_sim = np.asarray(traj.ntk)
        K_th = np.asarray(_ln.path_ntk(t, Xp, Xp, Syx, c0_sim, depth=L, eta=eta))
        k_err = (np.linalg.norm((K_sim - K_th).reshape(len(t), -1), axis=1)
                 / np.linalg.norm(K_th.reshape(len(t), -1), axis=1))
        c_err = float(np.max(np.abs(c_sim - c_th) / S))
        tol_c = SAFETY * N_TIMES * RTOL * float(np.max((S / c0_sim) ** (1.0 - 2.0 / L)))
        part_a.append(dict(L=L, t=t, c_sim=c_sim, c_th=c_th, k_err=k_err, c_err=c_err, tol_c=tol_c,
                           tol_k=max(2.0 - 2.0 / L, 1.0) * tol_c,
                           k_norm_sim=np.linalg.norm(K_sim.reshape(len(t), -1), axis=1),
                           k_norm_th=np.linalg.norm(K_th.reshape(len(t), -1), axis=1)))
    # (b) small random start: learning order and the sigma scaling of the half times
    sg = _check_sigmas(sigmas)
    part_b = []
    for L in random_depths:
        sizes = _sizes(D, random_width, C, L)
        h_sim, h_th = [], []
        for sig in sg:
            w0 = _ln.init_network(sizes, sig, seed=seed + 1)
            mt = _ln.mode_learning_times(S, sig ** L, depth=L, eta=eta)
            t_guess = 2.0 * _half_time_or_zero(S.min(), _C0_GUESS * sig ** L, L, eta) + 6.0 / (eta * S.min())
            h_sim.append(_half_times(w0, X, Y, U, S, Vt, L, eta, backend, t_guess))
            h_th.append(np.asarray(mt.times))
        h_sim, h_th = np.asarray(h_sim), np.asarray(h_th)
        order_th = np.asarray(_ln.mode_learning_times(S, sg[-1] ** L, depth=L, eta=eta).order)
        order_ok = all(np.array_equal(np.argsort(h, kind="stable"), order_th) for h in h_sim)
        if L == 2:
            law_sim, law_th = np.diff(h_sim, axis=0), np.diff(h_th, axis=0)
        else:
            law_sim, law_th = h_sim[1:] / h_sim[:-1], h_th[1:] / h_th[:-1]
        dev = np.abs(law_sim / law_th - 1.0)
        tol = SAFETY * sg[:-1, None] * np.ones_like(dev)
        part_b.append(dict(L=L, h_sim=h_sim, h_th=h_th, law_sim=law_sim, law_th=law_th, dev=dev, tol=tol,
                           order_ok=order_ok, order_th=order_th))
    k_errs = np.array([p["k_err"].max() for p in part_a])
    k_tols = np.array([p["tol_k"] for p in part_a])
    ok_a = all(p["k_err"].max() <= p["tol_k"] and p["c_err"] <= p["tol_c"] for p in part_a)
    ok_b = all(p["order_ok"] and np.all(p["dev"] <= p["tol"]) for p in part_b)
    w = int(np.argmax(k_errs / k_tols))
    arrays = dict(depths=np.array(depths), spectrum=S, t=[p["t"] for p in part_a],
                  c_sim=[p["c_sim"] for p in part_a], c_theory=[p["c_th"] for p in part_a],
                  ntk_error=[p["k_err"] for p in part_a], ntk_norm_sim=[p["k_norm_sim"] for p in part_a],
                  ntk_norm_theory=[p["k_norm_th"] for p in part_a], ntk_tolerance=k_tols,
                  mode_error=np.array([p["c_err"] for p in part_a]),
                  random_depths=np.array(random_depths), sigmas=sg,
                  half_sim=[p["h_sim"] for p in part_b], half_theory=[p["h_th"] for p in part_b],
                  law_deviation=[p["dev"] for p in part_b], law_tolerance=[p["tol"] for p in part_b])
    return Comparison(
        name="path_ntk", title="many outputs: modes and NTK along the path; learning order and times (App. H)",
        quantity=f"max relative NTK error along the path, balanced aligned start, L={depths[w]}",
        theory=0.0, simulation=float(k_errs[w]), error=float(k_errs[w]), tolerance=float(k_tols[w]),
        passed=bool(ok_a and ok_b), arrays=arrays,
        params=dict(D=D, N=N, P=P, n_probe=n_probe, eta=eta, seed=seed, random_width=random_width),
        notes=("balanced start, per depth (mode error / tol, NTK error / tol): " + "; ".join(
            f"L={p['L']}: {p['c_err']:.2g}/{p['tol_c']:.2g}, {p['k_err'].max():.2g}/{p['tol_k']:.2g}"
            for p in part_a)
            + ". Random start, per depth (learning order ok; relative deviation of the "
            + "delay (L=2) / ratio (L>=3) of half times from mode_learning_times, tol): " + "; ".join(
                f"L={p['L']}: {p['order_ok']}, {_fmt(p['dev'].ravel(), 2)}, "
                f"{_fmt(p['tol'][:, 0], 2)}" for p in part_b)))


# =============================================================================
# 3. intermediate-layer kernels (App. E.3)
# =============================================================================
def compare_intermediate_kernels(depth=3, sigmas=(0.1, 0.05, 0.025), spectrum=(3.0, 1.5, 0.8), D=5, N=8, P=30,
                                 eta=1.0, seed=0, backend="auto"):
    """Kernels ``h_l(x).h_l(x')`` of every layer of a trained deep net vs ``intermediate_kernel``.

    A depth-L network with C = len(spectrum) outputs is trained from
    ``init_network`` to convergence on a whitened teacher task; the kernel of
    layer l on the training inputs is compared with ``x^T (Syx^T Syx)^(l/L) x'``
    and its kernel-target alignment with ``intermediate_alignment``. The
    non-aligned initial weights survive training at O(sigma^2), so for
    ``0 < l < L`` the relative error (max entry) must stay below
    ``SAFETY * sigma^2`` with a log-log slope of 2 within ``max(0.25, 2 SAFETY
    sigma_max^2)``; the alignment error must stay below ``SAFETY * sigma^2``.
    Layer 0 (the inputs) is exact, layer L is the learned function: its error is
    the training residual, ``<= SAFETY * sqrt(loss_end / loss_0)`` (plus the
    integrator's ``sqrt(RTOL)``). The headline is the worst slope.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    _require(len(spectrum) <= min(D, N),
             f"spectrum must have at most min(D, N) = {min(D, N)} modes, got {len(spectrum)}")
    L = check_depth(depth)
    if L < 2:
        raise ValueError(f"depth must be >= 2 for an intermediate layer, got {depth!r}")
    sigmas = _check_sigmas(sigmas)
    spectrum = np.sort(check_positive(spectrum, "spectrum"))[::-1]
    C = len(spectrum)
    X, Y = _data().teacher_task(P, D, spectrum, seed=seed)
    _, Syx = _data().sufficient_statistics(X, Y)
    S = np.linalg.svd(Syx, compute_uv=False)
    layers = np.arange(L + 1)
    A_th = np.asarray(_ln.intermediate_alignment(S, L, layers, n=min(P, D)))
    K_err = np.zeros((len(sigmas), L + 1))
    A_sim = np.zeros_like(K_err)
    res_tol = np.zeros(len(sigmas))
    K_pairs = []
    for i, sig in enumerate(sigmas):
        w0 = _ln.init_network(_sizes(D, N, C, L), sig, seed=seed + 1)
        t_guess = 2.0 * float(_ln.half_time(S.min(), _C0_GUESS * sig ** L, depth=L, eta=eta)) + 20.0 / (eta * S.min())
        traj = _train_to_convergence(w0, X, Y, eta, backend, t_guess, n=20)
        res_tol[i] = SAFETY * (math.sqrt(max(traj.loss[-1], 0.0) / traj.loss[0]) + math.sqrt(RTOL))
        H = np.eye(D)
        pairs = []
        for l in layers:
            if l > 0:
                H = np.asarray(traj.weights[l - 1]) @ H
            F = X @ H.T
            K = F @ F.T
            Kt = np.asarray(_ln.intermediate_kernel(X, X, Syx, L, int(l)))
            K_err[i, l] = np.max(np.abs(K - Kt)) / np.max(np.abs(Kt))
            A_sim[i, l] = float(_ln.kernel_alignment(K, Y))
            pairs.append((K, Kt))
        K_pairs.append(pairs)
    mid = slice(1, L)
    tol = SAFETY * sigmas ** 2
    slopes = np.array([_slope_or(sigmas, K_err[:, l], 2.0) for l in range(1, L)])
    slope_tol = max(MIN_SLOPE_TOL, 2.0 * SAFETY * sigmas.max() ** 2) if len(sigmas) > 1 else np.inf
    A_err = np.abs(A_sim - A_th[None])
    ok = (np.all(K_err[:, mid] <= tol[:, None]) and np.all(A_err[:, mid] <= tol[:, None])
          and np.all(K_err[:, 0] <= res_tol) and np.all(K_err[:, L] <= res_tol)
          and np.all(A_err[:, [0, L]] <= res_tol[:, None]) and np.all(np.abs(slopes - 2.0) <= slope_tol))
    w = int(np.argmax(np.abs(slopes - 2.0)))
    return Comparison(
        name="intermediate_kernels", title=f"layer kernels of a trained depth-{L} network (App. E.3)",
        quantity=f"slope of log(kernel error) vs log(sigma), layer {w + 1} of {L}",
        theory=2.0, simulation=float(slopes[w]), error=float(abs(slopes[w] - 2.0)), tolerance=slope_tol,
        passed=bool(ok),
        arrays=dict(sigmas=sigmas, layers=layers, kernel_error=K_err, alignment_sim=A_sim,
                    alignment_theory=A_th, tolerances=tol, residual_tolerance=res_tol, slopes=slopes,
                    kernel_sim=[p[0] for p in K_pairs[-1]], kernel_theory=[p[1] for p in K_pairs[-1]],
                    spectrum=S),
        params=dict(depth=L, D=D, N=N, P=P, eta=eta, seed=seed),
        notes=("relative kernel errors (rows: sigma, cols: layer 0..L) "
               + _fmt(K_err) + "; alignment errors max "
               f"{A_err[:, mid].max():.2g} (tol {tol.min():.2g} at the smallest sigma); slopes "
               f"{_fmt(slopes, 2)}"))


# =============================================================================
# 4. transfer with the learned kernel (App. F)
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
            w_hat = np.asarray(_ln.kernel_regression(K, Kx, Yk, ridge=ridge))
            out[k, i] = np.sum((w_hat - W) ** 2, axis=0)
    return out


def _spike_of(M, beta):
    """(A, scale) of a kernel matrix M ~ scale (A beta beta^T + I): bulk = mean eigenvalue on beta-perp."""
    D = len(beta)
    Pp = np.eye(D) - np.outer(beta, beta)
    scale = np.trace(Pp @ M @ Pp) / (D - 1)
    return float(beta @ M @ beta / scale - 1.0), float(scale)


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
    """
    _check_args(locals())
    _require(net_P >= net_D, f"net_P must be >= net_D (whitened inputs), got net_P={net_P}, net_D={net_D}")
    As = np.asarray(As, float).reshape(-1)
    if As.size < 2 or not np.all(np.isfinite(As)) or np.any(As <= -1):
        raise ValueError("As must hold at least two finite spike strengths > -1")
    alphas = np.asarray(alphas, float)
    if np.any(np.abs(alphas) > 1):
        raise ValueError("alphas must lie in [-1, 1]")
    err = _transfer_monte_carlo(P, D, As, alphas, ridge, n_draw, seed + 23)
    mean = err.mean(axis=0)
    se = err.std(axis=0, ddof=1) / math.sqrt(n_draw)
    th = np.asarray(_ln.transfer_error(P, D, As[:, None], alphas[None, :], ridge))
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
    Xn, yn, beta = _data().scalar_teacher(net_P, net_D, s, seed=seed)
    spikes = []
    for L in depths:
        L = check_depth(L)
        w0 = _ln.init_network(_sizes(net_D, net_N, 1, L), sigma, seed=seed + 1)
        t_guess = 2.0 * float(_ln.half_time(s, _C0_GUESS * sigma ** L, depth=L, eta=eta)) + 20.0 / (eta * s)
        traj = _train_to_convergence(w0, Xn, yn, eta, backend, t_guess, n=20)
        M = np.asarray(_ln.empirical_ntk(traj.weights, np.eye(net_D), np.eye(net_D)))
        A_meas, scale_meas = _spike_of(M, beta)
        A_th, scale_th = _ln.trained_ntk_spike(L, s)
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
               + _fmt((mean - th) / tol)
               + f"; E_g(A={As[i_hi]:g}) - E_g(A={As[i_lo]:g}) per alpha: sim "
               + _fmt(dif_mean, 3) + " +- " + _fmt(dif_se, 3)
               + ", theory " + _fmt(dif_th, 3)
               + "; trained spike (L, A measured, A theory, bulk measured, bulk theory): "
               + "; ".join(f"({int(r[0])}, {r[1]:.4f}, {r[2]:g}, {r[3]:.4f}, {r[4]:.4g})" for r in spikes)))


# =============================================================================
# 5. the final NTK at finite sigma (App. H.2)
# =============================================================================
def compare_finite_sigma_ntk(sigmas=(0.05, 0.025, 0.0125), D=6, N=10, P=40, s=1.5, n_probe=5, eta=1.0,
                             seed=0, backend="auto"):
    """Final NTK of a trained two-layer network vs ``final_ntk_finite_sigma`` and ``final_ntk``.

    A two-layer scalar network is trained to convergence from
    ``init_network(sigma)`` (same seed at every sigma, so the initial weights are
    exactly proportional to sigma); its empirical NTK on random probe inputs is
    compared with the finite-sigma formula (initial weights from the simulation)
    and with the sigma -> 0 formula ``final_ntk``. Relative Frobenius errors:
    ``e_0 = O(sigma^2)`` and ``e_1 = O(sigma^3)``. The headline is the log-log
    slope of ``e_1`` (theory 3); ``e_0``'s slope must be 2. The next correction is
    one power of sigma smaller, so both slopes carry a tolerance
    ``max(0.25, SAFETY * sigma_max)``; in addition ``e_1 <= SAFETY * sigma^3`` and
    ``e_1 < e_0`` at every sigma.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    sigmas = _check_sigmas(sigmas)
    s = float(check_positive(s, "s", ndim=0))
    X, y, beta = _data().scalar_teacher(P, D, s, seed=seed)
    Xp = np.random.default_rng(seed + 29).standard_normal((n_probe, D))
    K0 = np.asarray(_ln.final_ntk(Xp, Xp, beta, s, 2))
    nrm = np.linalg.norm(K0)
    e0, e1, res = [], [], []
    for sig in sigmas:
        w0 = _ln.init_network((D, N, 1), sig, seed=seed + 1)
        t_guess = 2.0 * float(_ln.half_time(s, _C0_GUESS * sig ** 2, depth=2, eta=eta)) + 30.0 / (eta * s)
        traj = _train_to_convergence(w0, X, y, eta, backend, t_guess, n=20)
        K = np.asarray(_ln.empirical_ntk(traj.weights, Xp, Xp))
        K1 = np.asarray(_ln.final_ntk_finite_sigma(Xp, Xp, w0[0], w0[1], beta, s))
        e0.append(np.linalg.norm(K - K0) / nrm)
        e1.append(np.linalg.norm(K - K1) / nrm)
        res.append(math.sqrt(max(traj.loss[-1], 0.0) / traj.loss[0]))
    e0, e1, res = map(np.asarray, (e0, e1, res))
    p0, p1 = _slope_or(sigmas, e0, 2.0), _slope_or(sigmas, e1, 3.0)
    slope_tol = max(MIN_SLOPE_TOL, SAFETY * sigmas.max()) if len(sigmas) > 1 else np.inf
    tol1 = SAFETY * sigmas ** 3
    passed = bool(abs(p1 - 3.0) <= slope_tol and abs(p0 - 2.0) <= slope_tol and np.all(e1 <= tol1)
                  and np.all(e1 < e0))
    return Comparison(
        name="finite_sigma_ntk", title="final NTK at finite sigma: O(sigma^3) vs O(sigma^2) (App. H.2)",
        quantity="slope of log(error of final_ntk_finite_sigma) vs log(sigma)",
        theory=3.0, simulation=p1, error=abs(p1 - 3.0), tolerance=slope_tol, passed=passed,
        arrays=dict(sigmas=sigmas, error_sigma0=e0, error_finite=e1, tolerance_finite=tol1,
                    slopes=np.array([p0, p1]), residual=res),
        params=dict(D=D, N=N, P=P, s=s, n_probe=n_probe, eta=eta, seed=seed),
        notes=(f"relative Frobenius errors: final_ntk {_fmt(e0, 3)} (slope {p0:.3f}, "
               f"theory 2), finite sigma {_fmt(e1, 3)} (slope {p1:.3f}, theory 3), "
               f"tolerance SAFETY sigma^3 = {_fmt(tol1, 2)}; slope tolerance "
               f"{slope_tol:.2g}"))


# =============================================================================
# figures
# =============================================================================
_THEORY = _plotting._THEORY
_STAT_LABELS = (r"$|a|^2$", r"$a^TW\beta$", r"$a^TW\Sigma\beta$", r"$|W\beta|^2$",
                r"$\beta^TW^TW\Sigma\beta$", r"$|W\Sigma\beta|^2$")


def _sigma_ticks(ax, sig):
    """Label a logarithmic sigma axis at the simulated sigmas only (no crowded minor labels)."""
    from matplotlib.ticker import FixedLocator, NullLocator
    ax.xaxis.set_major_locator(FixedLocator(np.asarray(sig, float)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{x:g}" for x in sig])


def _plot_unwhitened(res):
    a = res.arrays
    fig, axes = _plotting._figure(3, width=3.9, height=3.5)
    theta = a["theta"]
    k = len(a["sigmas"]) - 1          # smallest sigma: the longest clean phase I
    for i, col in enumerate(_plotting._colors(6)):
        axes[0].semilogy(theta, np.abs(a["stats_sim"][k][:, i]), color=col, lw=2.5, alpha=0.7,
                         label=_STAT_LABELS[i])
        axes[0].semilogy(theta, np.abs(a["stats_theory"][k][:, i]), **_THEORY)
    axes[0].set(xlabel=r"$\theta=\eta s\|\Sigma\beta\|t$", ylabel="|statistic|",
                title=fr"six statistics, $\sigma$={a['sigmas'][k]:g} (dashed: theory)")
    axes[0].legend(fontsize=6, ncol=2)
    for col, sig, e, tl in zip(_plotting._colors(len(a["sigmas"])), a["sigmas"], a["errors"], a["tolerances"]):
        axes[1].semilogy(theta[1:], e[1:], color=col, lw=2, label=fr"$\sigma$={sig:g}")
        axes[1].semilogy(theta[1:], tl[1:], color=col, ls=":", lw=1, label=fr"tolerance, $\sigma$={sig:g}")
    axes[1].set(xlabel=r"$\theta$", ylabel="max relative error",
                title=f"error ~ $\\sigma^2$ (slope {res.simulation:.2f})")
    axes[1].legend(fontsize=7)
    axes[2].plot(theta, a["overlap_sigma_beta"][k], color="C0", lw=2.5, alpha=0.7,
                 label=r"sim: top eigvec $\cdot\,\Sigma\beta/\|\Sigma\beta\|$")
    axes[2].plot(theta, a["overlap_beta"][k], color="C3", lw=2.5, alpha=0.7, label=r"sim: top eigvec $\cdot\,\beta$")
    axes[2].plot(theta, a["overlap_theory_sigma_beta"][k], **_THEORY, label="theory")
    axes[2].plot(theta, a["overlap_theory_beta"][k], **_THEORY)
    axes[2].set(xlabel=r"$\theta$", ylabel="|overlap|", ylim=(0, 1.02),
                title=r"kernel $W^TW+|a|^2I$ grows along $\Sigma\beta$")
    axes[2].legend(fontsize=7, loc="lower right")
    return fig


def _plot_path_ntk(res):
    from matplotlib.figure import Figure
    a = res.arrays
    nd = len(a["depths"])
    ncol = max(nd, 3)
    fig = Figure(figsize=(3.8 * ncol, 6.6), layout="constrained")
    axes = fig.subplots(2, ncol)
    for ax, L, t, cs, ct in zip(axes[0], a["depths"], a["t"], a["c_sim"], a["c_theory"]):
        for k, col in enumerate(_plotting._colors(cs.shape[1])):
            ax.plot(t, cs[:, k], color=col, lw=3, alpha=0.6, label=fr"$c_{k + 1}$, $s$={a['spectrum'][k]:g}")
            ax.plot(t, ct[:, k], **_THEORY)
        ax.set(xlabel="t", title=f"balanced aligned start, L = {L}")
    if nd < ncol:
        ax = axes[0, nd]
        for L, t, kn, kt, col in zip(a["depths"], a["t"], a["ntk_norm_sim"], a["ntk_norm_theory"],
                                     _plotting._colors(nd)):
            ax.semilogy(t, kn, color=col, lw=3, alpha=0.6, label=f"L={L} (empirical)")
            ax.semilogy(t, kt, **_THEORY)
        ax.plot([], [], **_THEORY, label="path_ntk")
        ax.set(xlabel="t", ylabel=r"$\|K(t)\|_F$ on the probe inputs", title="the NTK grows along the path")
        ax.legend(fontsize=7)
    for ax in axes[0, nd + 1:]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel(r"$c_\alpha(t)$ (dashed: multimode_dynamics)")
    axes[0, 0].legend(fontsize=7, loc="center right")
    ax = axes[1, 0]
    for L, t, ke, tl, col in zip(a["depths"], a["t"], a["ntk_error"], a["ntk_tolerance"], _plotting._colors(nd)):
        ax.semilogy(t[1:], np.maximum(ke[1:], 1e-17), color=col, lw=1.5, label=f"L={L}")
        ax.axhline(tl, color=col, ls=":", lw=1, label=f"tolerance, L={L}")
    ax.set(xlabel="t", ylabel=r"$\|K_{emp}-K_{path}\|_F/\|K_{path}\|_F$",
           title="NTK on probe inputs vs path_ntk")
    ax.legend(fontsize=7)
    sg = a["sigmas"]
    law_axes = {2: axes[1, 1], 3: axes[1, 2]}
    for L, hs, ht in zip(a["random_depths"], a["half_sim"], a["half_theory"]):
        ax = law_axes.get(int(L), axes[1, 2])
        for k, col in enumerate(_plotting._colors(hs.shape[1])):
            # the theory's sigma dependence, anchored at the smallest sigma
            anchored = ht[:, k] - ht[-1, k] + hs[-1, k] if L == 2 else ht[:, k] * hs[-1, k] / ht[-1, k]
            ax.plot(sg, hs[:, k], "o", color=col, ms=7, alpha=0.8, label=fr"mode {k + 1} (sim)")
            ax.plot(sg, anchored, **_THEORY)
        ax.set_xscale("log")
        _sigma_ticks(ax, sg)
        if L == 2:
            ax.set(xlabel=r"$\sigma$", ylabel=r"half time $t_\alpha$",
                   title=r"random start, L=2: $t_\alpha\simeq\ln(1/\sigma)/(\eta s_\alpha)$")
        else:
            ax.set_yscale("log")
            ax.set(xlabel=r"$\sigma$", ylabel=r"half time $t_\alpha$",
                   title=fr"random start, L={L}: $t_\alpha\propto\sigma^{{{2 - int(L)}}}/s_\alpha$")
        ax.legend(fontsize=7)
    for ax in axes[1, 3:]:
        ax.set_axis_off()
    return fig


def _plot_intermediate(res):
    a = res.arrays
    fig, axes = _plotting._figure(3, width=3.8, height=3.5)
    L = len(a["layers"]) - 1
    ax = axes[0]
    ax.plot(a["layers"], a["alignment_theory"], **_THEORY, marker="x", label="intermediate_alignment")
    for col, sig, As in zip(_plotting._colors(len(a["sigmas"])), a["sigmas"], a["alignment_sim"]):
        ax.plot(a["layers"], As, "o", color=col, ms=7, alpha=0.7, label=fr"sim $\sigma$={sig:g}")
    ax.set(xlabel="layer l", ylabel="kernel-target alignment", title=f"alignment by layer (L={L})",
           xticks=a["layers"])
    ax.legend(fontsize=7)
    ax = axes[1]
    sig = a["sigmas"]
    for l, col in zip(range(1, L), _plotting._colors(max(L - 1, 1))):
        ax.loglog(sig, a["kernel_error"][:, l], "o-", color=col, label=f"layer {l}")
    ax.loglog(sig, a["tolerances"], ":", color="gray", label="tolerance")
    ref = a["kernel_error"][-1, 1:L].max()
    ax.loglog(sig, ref * (sig / sig[-1]) ** 2, **_THEORY, label=r"$\propto\sigma^2$")
    _sigma_ticks(ax, sig)
    ax.set(xlabel=r"$\sigma$", ylabel="relative kernel error", title="error ~ $\\sigma^2$")
    ax.legend(fontsize=7)
    ax = axes[2]
    for j, (col, sg) in enumerate(zip(_plotting._colors(len(sig)), sig)):
        ax.plot(np.arange(1, L), a["kernel_error"][j, 1:L] / sg ** 2, "o-", color=col, ms=7, alpha=0.8,
                label=fr"$\sigma$={sg:g}")
    ax.set(xlabel="layer l", ylabel=r"relative kernel error / $\sigma^2$", xticks=np.arange(1, L),
           title=r"collapse: error / $\sigma^2$ independent of $\sigma$")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return fig


def _plot_transfer(res):
    a = res.arrays
    p = res.params
    fig, axes = _plotting._figure(2, width=4.6, height=3.6)
    ax = axes[0]
    A_fine = np.linspace(0.0, max(a["As"].max(), 1.0) * 1.05, 120)
    for j, (alpha, col) in enumerate(zip(a["alphas"], ("C0", "C1", "C2", "C4"))):
        ax.plot(A_fine, _ln.transfer_error(p["P"], p["D"], A_fine, alpha, p["ridge"]), **_THEORY)
        ax.errorbar(a["As"], a["mc_mean"][:, j], yerr=2 * a["mc_se"][:, j],
                    fmt="o", color=col, ms=6, capsize=3, label=fr"Monte Carlo $\alpha$={alpha:g}")
    for L, A in zip(a["spike_depths"], a["spike_measured"]):
        ax.axvline(A, color="gray", ls=":", lw=1)
        ax.text(A, ax.get_ylim()[1], f" L={int(L)}", fontsize=7, va="top", color="gray")
    ax.plot([], [], **_THEORY, label="transfer_error")
    ax.set(xlabel="spike A", ylabel=r"$E_g$", title=f"kernel regression, P={p['P']}, D={p['D']} (bars: 2 SE)")
    ax.legend(fontsize=7)
    ax = axes[1]
    d = a["spike_depths"]
    dd = np.arange(1, d.max() + 1)
    ax.plot(dd, dd - 1.0, **_THEORY, label="trained_ntk_spike: A = L - 1")
    ax.errorbar(d, a["spike_measured"], yerr=a["spike_tolerance"], fmt="o", ms=7, capsize=3,
                label=fr"empirical NTK after training, $\sigma$={p['sigma']:g}")
    ax.set(xlabel="depth L", ylabel="spike A", title="spike of the trained NTK (bars: tolerance)",
           xticks=dd)
    ax.legend(fontsize=7)
    return fig


def _plot_finite_sigma(res):
    a = res.arrays
    fig, (ax, ax2) = _plotting._figure(2, width=4.6, height=3.8)
    sig = a["sigmas"]
    e0, e1 = a["error_sigma0"], a["error_finite"]
    ax.loglog(sig, e0, "o-", color="C0", label=r"final_ntk ($\sigma\to0$)")
    ax.loglog(sig, e1, "s-", color="C1", label="final_ntk_finite_sigma")
    ax.loglog(sig, e0[-1] * (sig / sig[-1]) ** 2, **_THEORY, label=r"$\propto\sigma^2$, $\sigma^3$")
    ax.loglog(sig, e1[-1] * (sig / sig[-1]) ** 3, **_THEORY)
    ax.loglog(sig, a["tolerance_finite"], ":", color="gray", label=r"tolerance SAFETY$\,\sigma^3$")
    p0, p1 = a["slopes"]
    ax.set(xlabel=r"$\sigma$", ylabel=r"$\|K-K_{th}\|_F/\|K_{th}\|_F$",
           title=f"trained two-layer NTK: slopes {p0:.2f}, {p1:.2f}")
    ax.legend(fontsize=7)
    ax2.semilogx(sig, e0 / sig ** 2, "o-", color="C0", label=r"final_ntk error / $\sigma^2$")
    ax2.semilogx(sig, e1 / sig ** 3, "s-", color="C1", label=r"finite-$\sigma$ error / $\sigma^3$")
    ax2.set_ylim(bottom=0)
    _sigma_ticks(ax, sig)
    _sigma_ticks(ax2, sig)
    ax2.set(xlabel=r"$\sigma$", ylabel="compensated error", title="flat = the predicted power")
    ax2.legend(fontsize=7)
    return fig


_plotting._PLOTTERS.update({
    "unwhitened_phase1": _plot_unwhitened,
    "path_ntk": _plot_path_ntk,
    "intermediate_kernels": _plot_intermediate,
    "transfer": _plot_transfer,
    "finite_sigma_ntk": _plot_finite_sigma,
})


# =============================================================================
# registry
# =============================================================================
@_register("unwhitened_phase1", "unwhitened phase I: six statistics ~ sigma^2, kernel along Sigma beta (App. C.3)")
def _check_unwhitened(full=False, seed=0, backend="auto"):
    if full:
        return compare_unwhitened_phase1(sigmas=np.geomspace(0.01, 0.00125, 4), D=20, N=50, P=2000,
                                         n_times=200, seed=seed, backend=backend)
    return compare_unwhitened_phase1(seed=seed, backend=backend)


@_register("path_ntk", "many outputs: modes and NTK along the path, learning order and times (App. H)")
def _check_path_ntk(full=False, seed=0, backend="auto"):
    if full:
        return compare_path_ntk(depths=(2, 3, 4), spectrum=(4.0, 3.0, 2.0, 1.0), c0=(1e-3, 3e-3, 1e-2, 2e-2),
                                D=30, N=50, P=60, n_probe=6, n_times=100, random_depths=(2, 3),
                                sigmas=(0.02, 0.01, 0.005, 0.0025), random_width=50, seed=seed, backend=backend)
    return compare_path_ntk(seed=seed, backend=backend)


@_register("intermediate_kernels", "layer-l kernels of a trained deep network, error ~ sigma^2 (App. E.3)")
def _check_intermediate(full=False, seed=0, backend="auto"):
    if full:
        return compare_intermediate_kernels(depth=4, sigmas=(0.1, 0.05, 0.025, 0.0125), spectrum=(4.0, 3.0, 2.0, 1.0),
                                            D=30, N=50, P=60, seed=seed, backend=backend)
    return compare_intermediate_kernels(seed=seed, backend=backend)


@_register("transfer", "transfer error vs Monte Carlo kernel regression; trained-NTK spike A = L - 1 (App. F)")
def _check_transfer(full=False, seed=0, backend="auto"):
    if full:
        return compare_transfer(P=70, D=200, As=(0.0, 0.5, 1.0, 2.0, 4.0, 9.0), n_draw=1000,
                                depths=(2, 3, 4), sigma=0.03, net_D=30, net_N=50, net_P=60,
                                seed=seed, backend=backend)
    return compare_transfer(seed=seed, backend=backend)


@_register("finite_sigma_ntk", "final NTK at finite sigma: error sigma^3 vs sigma^2 (App. H.2)")
def _check_finite_sigma(full=False, seed=0, backend="auto"):
    if full:
        return compare_finite_sigma_ntk(sigmas=np.geomspace(0.04, 0.005, 4), D=30, N=50, P=60, n_probe=20,
                                        seed=seed, backend=backend)
    return compare_finite_sigma_ntk(seed=seed, backend=backend)
