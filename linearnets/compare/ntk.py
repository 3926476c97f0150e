"""The NTK and its kernels against simulation: the final NTK, at finite sigma, of every layer,
and kernel regression with it.

Checks ``final_ntk``, ``finite_sigma_ntk``, ``intermediate_kernels``, ``kernel_gap`` and
``kernel_path`` (Atanasov, Bordelon & Pehlevan 2022: Figs. E.1, E.3, App. E.3, G, H.2).
"""
from __future__ import annotations

import math

import numpy as np

from .._validation import check_depth, check_positive
from ..data import partially_whitened, scalar_teacher, sufficient_statistics, teacher_task
from ..network import empirical_ntk, end_to_end, init_network
from ..theory.dynamics import half_time
from ..theory.intermediate import intermediate_alignment, intermediate_kernel
from ..theory.kernels import kernel_alignment, kernel_regression
from ..theory.multimode import final_ntk_finite_sigma
from ..theory.ntk import final_alignment, final_ntk, final_ntk_multi
from .common import (
    _seeded,
    MIN_SLOPE_TOL,
    RTOL,
    SAFETY,
    _C0_GUESS,
    _check_args,
    _check_plateau,
    _check_sigmas,
    _flow,
    _fmt_array,
    _loglog_slope,
    _require,
    _sizes,
    _slope_or,
    _small_init,
    _train_to_convergence,
    _weights_at,
)
from .plotting import THEORY, colors, figure, value_ticks
from .registry import Comparison

__all__ = ["compare_final_ntk", "compare_finite_sigma_ntk", "compare_intermediate_kernels", "compare_kernel_gap",
           "compare_kernel_path"]

#: Largest condition number of the raw inputs of :func:`compare_kernel_gap`
#: (lambda_min/lambda_max of Sxx >= 1e-4 at gamma = 1: horizons <= ~3e5).
KERNEL_GAP_MAX_COND = 100.0


# =============================================================================
# final NTK and final alignment (Figs. E.1, E.3)
# =============================================================================
@_seeded
def compare_final_ntk(depths=(2, 3, 4, 5, 6), sigmas=(0.2, 0.1), D=8, N=16, P=16, s=1.0, eta=1.0,
                      multi_spectrum=(2.0, 1.0), seed=0, backend="auto"):
    """Empirical NTK of the trained network vs ``final_ntk`` and the final alignment (Figs. E.1, E.3).

    For every depth and sigma a random small initialisation is trained on a
    whitened scalar teacher to convergence; the relative Frobenius error
    ``||K_emp - K_th||/||K_th||`` on the training inputs is O(sigma^2) (the
    non-aligned initial weights that gradient flow never removes), so must stay
    below ``SAFETY * sigma^2`` and its log-log slope in sigma must be 2 within
    ``max(0.25, 2 SAFETY sigma_max^2)``. The kernel-target alignment of the
    empirical kernel is compared with ``final_alignment(L, min(P, D))``
    (same O(sigma^2) tolerance). A multi-output row (``final_ntk_multi``) is
    included at depth 3. The headline is the worst alignment.

    Range: depths 2 to ``MAX_DEPTH`` (at depth 1 the NTK X X^T does not move: nothing to
    compare); sigmas a small initialisation (``sigma^L < s/2``) with a plateau within
    ``MAX_PLATEAU`` / (eta s); P >= D; at most min(D, N) modes in multi_spectrum. Else a
    ValueError naming the argument.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    _require(len(multi_spectrum) <= min(D, N),
             f"multi_spectrum must have at most min(D, N) = {min(D, N)} modes, got {len(multi_spectrum)}")
    depths = [check_depth(L) for L in depths]
    _require(min(depths) >= 2, f"depths must be >= 2 (at depth 1 the NTK X X^T does not move), got {depths!r}")
    sigmas = _check_sigmas(sigmas)
    spec = np.sort(np.asarray(multi_spectrum, float))[::-1]
    for L, s_L in [(L, s) for L in depths] + [(3, spec.min())]:   # up front: small starts, affordable plateaus
        for sig in sigmas:
            _small_init(sig ** L, s_L, f"sigmas (sigma = {sig:g} at depth {L})")
            _check_plateau(s_L, _C0_GUESS * sig ** L, L, eta, f"depths={tuple(depths)} with sigmas (depth {L}, "
                                                              f"sigma {sig:g})")
    X, y, beta = scalar_teacher(P, D, s, seed=seed)
    n = min(P, D)
    K_err = np.zeros((len(depths), len(sigmas)))
    A_sim = np.zeros_like(K_err)
    A_th = np.array([float(final_alignment(L, n)) for L in depths])
    for i, L in enumerate(depths):
        for j, sig in enumerate(sigmas):
            w0 = init_network((D,) + (N,) * (L - 1) + (1,), sig, seed=seed + 1)
            t_guess = 2.0 * float(half_time(s, _C0_GUESS * sig ** L, depth=L, eta=eta)) + 20.0 / (eta * s)
            traj = _train_to_convergence(w0, X, y, eta, backend, t_guess, n=50)
            K = np.asarray(empirical_ntk(traj.weights, X, X))
            Kt = np.asarray(final_ntk(X, X, beta, s, L))
            K_err[i, j] = np.linalg.norm(K - Kt) / np.linalg.norm(Kt)
            A_sim[i, j] = float(kernel_alignment(K, y))
    tol = SAFETY * sigmas ** 2
    # multi-output, depth 3
    Xm, Ym = teacher_task(P, D, spec, seed=seed)
    _, Syx = sufficient_statistics(Xm, Ym)
    multi_err = []
    for sig in sigmas:
        w0 = init_network((D, N, N, len(spec)), sig, seed=seed + 1)
        t_guess = 2.0 * float(half_time(spec.min(), _C0_GUESS * sig ** 3, depth=3, eta=eta)) + 20.0 / (eta * spec.min())
        traj = _train_to_convergence(w0, Xm, Ym, eta, backend, t_guess, n=50)
        Km = np.asarray(empirical_ntk(traj.weights, Xm, Xm))
        Kmt = np.asarray(final_ntk_multi(Xm, Xm, Syx, 3))
        multi_err.append(np.linalg.norm(Km - Kmt) / np.linalg.norm(Kmt))
    multi_err = np.asarray(multi_err)
    slopes = np.array([_loglog_slope(sigmas, K_err[i]) for i in range(len(depths))]) \
        if len(sigmas) > 1 else np.full(len(depths), 2.0)
    slope_tol = max(0.25, 2.0 * SAFETY * sigmas.max() ** 2)
    A_err = np.abs(A_sim - A_th[:, None])
    ok = (np.all(K_err <= tol[None]) and np.all(A_err <= tol[None]) and np.all(multi_err <= tol)
          and np.all(np.abs(slopes - 2.0) <= slope_tol))
    wi, wj = np.unravel_index(np.argmax(A_err / tol[None]), A_err.shape)
    return Comparison(
        name="final_ntk", title="final NTK and kernel alignment vs depth (Figs. E.1, E.3)",
        quantity=f"final alignment L/sqrt(L^2+n-1), L={depths[wi]}, sigma={sigmas[wj]:g}",
        theory=float(A_th[wi]), simulation=float(A_sim[wi, wj]), error=float(A_err[wi, wj]),
        tolerance=float(tol[wj]), passed=bool(ok),
        arrays=dict(depths=np.array(depths), sigmas=sigmas, kernel_error=K_err, alignment_sim=A_sim,
                    alignment_theory=A_th, tolerances=tol, slopes=slopes, multi_error=multi_err),
        params=dict(D=D, N=N, P=P, s=s, eta=eta, seed=seed, n=n),
        notes=("relative Frobenius kernel errors (rows: depth, cols: sigma) max "
               f"{K_err.max():.2g}; slopes vs sigma {np.array2string(slopes, precision=2)} (theory 2 "
               f"+- {slope_tol:.2g}); multi-output (L=3) errors {np.array2string(multi_err, precision=2)}"))


# =============================================================================
# the final NTK at finite sigma (App. H.2)
# =============================================================================
@_seeded
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

    Range: P >= D; sigmas a small initialisation (``sigma^2 < s/2``: the expansion is in
    sigma). Else a ValueError naming the argument.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    sigmas = _check_sigmas(sigmas)
    s = float(check_positive(s, "s", ndim=0))
    for sig in sigmas:
        _small_init(sig ** 2, s, f"sigmas (sigma = {sig:g})")
    X, y, beta = scalar_teacher(P, D, s, seed=seed)
    Xp = np.random.default_rng(seed + 29).standard_normal((n_probe, D))
    K0 = np.asarray(final_ntk(Xp, Xp, beta, s, 2))
    nrm = np.linalg.norm(K0)
    e0, e1, res = [], [], []
    for sig in sigmas:
        w0 = init_network((D, N, 1), sig, seed=seed + 1)
        t_guess = 2.0 * float(half_time(s, _C0_GUESS * sig ** 2, depth=2, eta=eta)) + 30.0 / (eta * s)
        traj = _train_to_convergence(w0, X, y, eta, backend, t_guess, n=20)
        K = np.asarray(empirical_ntk(traj.weights, Xp, Xp))
        K1 = np.asarray(final_ntk_finite_sigma(Xp, Xp, w0[0], w0[1], beta, s))
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
        notes=(f"relative Frobenius errors: final_ntk {_fmt_array(e0, 3)} (slope {p0:.3f}, "
               f"theory 2), finite sigma {_fmt_array(e1, 3)} (slope {p1:.3f}, theory 3), "
               f"tolerance SAFETY sigma^3 = {_fmt_array(tol1, 2)}; slope tolerance "
               f"{slope_tol:.2g}"))


# =============================================================================
# intermediate-layer kernels (App. E.3)
# =============================================================================
@_seeded
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

    Range: depth 2 to ``MAX_DEPTH``; sigmas a small initialisation (``sigma^L < s_min/2``)
    with a plateau within ``MAX_PLATEAU`` / (eta s_min); P >= D; at most min(D, N) modes.
    Else a ValueError naming the argument.
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
    X, Y = teacher_task(P, D, spectrum, seed=seed)
    _, Syx = sufficient_statistics(X, Y)
    S = np.linalg.svd(Syx, compute_uv=False)
    for sig in sigmas:          # up front: small starts, affordable plateaus
        _small_init(sig ** L, S.min(), f"sigmas (sigma = {sig:g})")
        _check_plateau(S.min(), _C0_GUESS * sig ** L, L, eta, f"depth={L} with sigmas (sigma {sig:g})")
    layers = np.arange(L + 1)
    A_th = np.asarray(intermediate_alignment(S, L, layers, n=min(P, D)))
    K_err = np.zeros((len(sigmas), L + 1))
    A_sim = np.zeros_like(K_err)
    res_tol = np.zeros(len(sigmas))
    K_pairs = []
    for i, sig in enumerate(sigmas):
        w0 = init_network(_sizes(D, N, C, L), sig, seed=seed + 1)
        t_guess = 2.0 * float(half_time(S.min(), _C0_GUESS * sig ** L, depth=L, eta=eta)) + 20.0 / (eta * S.min())
        traj = _train_to_convergence(w0, X, Y, eta, backend, t_guess, n=20)
        res_tol[i] = SAFETY * (math.sqrt(max(traj.loss[-1], 0.0) / traj.loss[0]) + math.sqrt(RTOL))
        H = np.eye(D)
        pairs = []
        for l in layers:
            if l > 0:
                H = np.asarray(traj.weights[l - 1]) @ H
            F = X @ H.T
            K = F @ F.T
            Kt = np.asarray(intermediate_kernel(X, X, Syx, L, int(l)))
            K_err[i, l] = np.max(np.abs(K - Kt)) / np.max(np.abs(Kt))
            A_sim[i, l] = float(kernel_alignment(K, Y))
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
               + _fmt_array(K_err) + "; alignment errors max "
               f"{A_err[:, mid].max():.2g} (tol {tol.min():.2g} at the smallest sigma); slopes "
               f"{_fmt_array(slopes, 2)}"))


# =============================================================================
# the trained network against kernel regression with its final NTK
# =============================================================================
@_seeded
def compare_kernel_gap(gammas=(0.0, 0.5, 1.0), Ps=(20, 10), D=20, N=20, s=1.0, sigma=0.01, depth=2,
                       eta=1.0, n_test=50, seed=0, backend="auto"):
    """Test-set gap between the trained network and kernel regression with its final NTK.

    Inputs are partially whitened, ``X_gamma = U S^gamma V^T`` (gamma = 0:
    whitened, 1: raw Gaussian). For a linear network both predictors
    interpolate the training set within the row span of X (appendix G), so:
    for P = D the interpolant is unique and the gap is set by the residual
    training error only (tolerance ``SAFETY * sqrt(loss_end / loss_0)``, tiny);
    for P < D the network keeps the null-space part of its initial first layer,
    an O(sigma) component, whatever gamma: tolerance ``SAFETY * sigma``.
    The kernel regression with the *initial* NTK is recorded for contrast.
    The raw inputs are a Gaussian draw, redrawn until their condition number is
    at most :data:`KERNEL_GAP_MAX_COND` (training to convergence takes a time
    ~ 1/lambda_min(Sxx), which a nearly singular draw makes unaffordable; the
    statement holds for every X).
    (For P > D the linear kernel is singular and :func:`kernel_regression`
    asks for a ridge; P = D is the non-trivial well-posed case.)
    The headline is the worst gap relative to its tolerance.

    Range: Ps <= D; depth 1 to ``MAX_DEPTH``; sigma a small initialisation (``sigma^L <
    s/2``) with a plateau within ``MAX_PLATEAU`` / (eta s). Else a ValueError naming it.
    """
    _check_args(locals())
    _require(all(int(p) <= D for p in Ps),
             f"Ps must be <= D = {D} (for P > D the linear kernel is singular), got {Ps!r}")
    L = check_depth(depth)
    _small_init(sigma ** L, s, f"sigma={sigma!r}")
    _check_plateau(s, _C0_GUESS * sigma ** L, L, eta, f"depth={L} with sigma={sigma!r}")
    rng = np.random.default_rng(seed + 7)
    rows = []
    for P in Ps:
        X0 = rng.standard_normal((P, D))
        for _ in range(100):
            # a square Gaussian draw can be nearly singular (seed 1: lambda_min/lambda_max
            # ~ 1e-10, a horizon ~ 1/lambda_min of 1e11); nothing here depends on the
            # conditioning, so redraw until cond(X0) <= KERNEL_GAP_MAX_COND
            sv = np.linalg.svd(X0, compute_uv=False)
            if sv[0] <= KERNEL_GAP_MAX_COND * sv[-1]:
                break
            X0 = rng.standard_normal((P, D))
        Xt0 = rng.standard_normal((n_test, D))
        beta = rng.standard_normal(D)
        beta /= np.linalg.norm(beta)
        for g in gammas:
            Xg = np.asarray(partially_whitened(X0, g))
            # normalise the input scale so that the top singular value of Sxx is 1
            scale = np.linalg.norm(Xg, 2) / math.sqrt(P)
            Xg = Xg / scale
            Xt = Xt0 / math.sqrt(D) * math.sqrt(np.trace(Xg.T @ Xg) / P)
            y = s * Xg @ beta
            w0 = init_network((D,) + (N,) * (L - 1) + (1,), sigma, seed=seed + 1)
            lam_min = np.linalg.svd(Xg, compute_uv=False)[min(P, D) - 1] ** 2 / P
            t_guess = 2.0 * float(half_time(s, _C0_GUESS * sigma ** L, depth=L, eta=eta)) + 30.0 / (eta * lam_min * s)
            traj = _train_to_convergence(w0, Xg, y, eta, backend, t_guess, n=20)
            wf = traj.weights
            f_nn = Xt @ end_to_end(wf)[0]
            K = np.asarray(empirical_ntk(wf, Xg, Xg))
            Kx = np.asarray(empirical_ntk(wf, Xt, Xg))
            f_kr = np.asarray(kernel_regression(K, Kx, y))
            K0 = np.asarray(empirical_ntk(w0, Xg, Xg))
            K0x = np.asarray(empirical_ntk(w0, Xt, Xg))
            f_k0 = np.asarray(kernel_regression(K0, K0x, y))
            gap = np.linalg.norm(f_nn - f_kr) / np.linalg.norm(f_kr)
            gap0 = np.linalg.norm(f_nn - f_k0) / np.linalg.norm(f_kr)
            if P >= D:
                tol = SAFETY * math.sqrt(max(traj.loss[-1], 0.0) / traj.loss[0]) + SAFETY * math.sqrt(RTOL)
            else:
                tol = SAFETY * sigma
            rows.append((P, g, gap, gap0, tol))
    arr = np.array(rows)
    worst = int(np.argmax(arr[:, 2] / arr[:, 4]))
    P, g, gap, gap0, tol = rows[worst]
    return Comparison(
        name="kernel_gap", title="trained network vs kernel regression with the final NTK, X_gamma",
        quantity=f"relative test gap (P={P}, gamma={g:g}); theory: 0 up to O(sigma) for P<D",
        theory=0.0, simulation=gap, error=gap, tolerance=tol, passed=bool(np.all(arr[:, 2] <= arr[:, 4])),
        arrays=dict(P=arr[:, 0], gamma=arr[:, 1], gap_final=arr[:, 2], gap_initial=arr[:, 3],
                    tolerance=arr[:, 4]),
        params=dict(D=D, N=N, s=s, sigma=sigma, depth=L, eta=eta, n_test=n_test, seed=seed),
        notes=("gap does not grow with anisotropy gamma for a linear network (that growth is a "
               "nonlinear-network effect); rows (P, gamma, gap final NTK, gap initial NTK, tol): "
               + "; ".join(f"({r[0]}, {r[1]:g}, {r[2]:.2g}, {r[3]:.2g}, {r[4]:.2g})" for r in rows)))


# =============================================================================
# appendix G: kernel regression with the NTK at any time gives the same function
# =============================================================================
@_seeded
def compare_kernel_path(D=20, N=20, P=10, s=1.0, sigma=0.01, eta=1.0, n_test=50, n_probe=8, seed=0,
                        backend="auto"):
    """Kernel regression with the empirical NTK K(t) at any time reproduces the pseudo-inverse function.

    Appendix G: for kernels ``x^T [A beta beta^T + I] x'`` (beta in the row span)
    every kernel interpolant is the pseudo-inverse solution. Along the
    two-layer flow ``K(t) = X M(t) X^T`` with ``M = W^T W + |a|^2 I``; its
    departure from that form, ``eps(t) = ||M(t) - M_G(t)||_op / |a(t)|^2`` with
    ``M_G = |a|^2 I + (b^T W^T W b) b b^T`` (b: the teacher projected on the row
    span), is O(1) at t = 0 (random O(sigma^2) kernel) and O(sigma/sqrt(s)) at
    the end (the initial null-space part of W, which gradient flow never sees), so
    ``||f_t - f_pinv|| / ||f_pinv|| <= SAFETY * eps(t)`` at each probed time
    (P < D, so the statement is not trivial). The idealised kernel family is
    checked exactly (machine precision) for several A.

    Range: P <= D; sigma a small initialisation (``sigma^2 < s_eff/2``, s_eff the task
    mode of the drawn data). Else a ValueError naming it.
    """
    _check_args(locals())
    _require(P <= D, f"P must be <= D (for P > D the linear kernel is singular), got P={P}, D={D}")
    rng = np.random.default_rng(seed + 11)
    X = rng.standard_normal((P, D))
    beta = rng.standard_normal(D)
    beta /= np.linalg.norm(beta)
    y = s * X @ beta
    Xt = rng.standard_normal((n_test, D))
    f_pinv = Xt @ (np.linalg.pinv(X) @ y)
    w0 = init_network((D, N, 1), sigma, seed=seed + 1)
    # time scale: the single task mode of Syx = y^T X / P and the slowest data direction
    s_eff = float(np.linalg.norm(y @ X) / P)
    lam_min = float(np.linalg.svd(X, compute_uv=False)[min(P, D) - 1] ** 2 / P)
    _small_init(sigma ** 2, s_eff, f"sigma={sigma!r}")
    t_end = 2.0 * float(half_time(s_eff, sigma ** 2, depth=2, eta=eta)) + 10.0 / (eta * s_eff * lam_min)
    # probe times: t = 0, then geometric through phase I (~1/s) and the escape
    t = np.concatenate([[0.0], np.geomspace(0.1 / (eta * s_eff), t_end, n_probe - 1)])
    traj = _flow(w0, X, y, t, eta, backend, record=("weights",))
    # beta_hat: the normalised projection of the teacher onto the row span of X
    bproj = np.linalg.pinv(X) @ (X @ beta)
    bproj /= np.linalg.norm(bproj)
    gaps, eps = np.empty(len(t)), np.empty(len(t))
    for k in range(len(t)):
        wk = _weights_at(traj, k)
        K = np.asarray(empirical_ntk(wk, X, X))
        Kx = np.asarray(empirical_ntk(wk, Xt, X))
        f = np.asarray(kernel_regression(K, Kx, y))
        gaps[k] = np.linalg.norm(f - f_pinv) / np.linalg.norm(f_pinv)
        # distance of M(t) = W^T W + |a|^2 I from the appendix-G family |a|^2 [I + A bb^T]
        W, a = np.asarray(wk[0]), np.asarray(wk[1])[0]
        M = W.T @ W + (a @ a) * np.eye(D)
        M_ideal = (a @ a) * np.eye(D) + (bproj @ W.T @ W @ bproj) * np.outer(bproj, bproj)
        eps[k] = np.linalg.norm(M - M_ideal, 2) / (a @ a)
    tols = SAFETY * eps
    # idealised kernels: exact for every A
    ideal = []
    for A in (0.0, 1.0, 10.0, 1e3):
        M = A * np.outer(bproj, bproj) + np.eye(D)
        f = np.asarray(kernel_regression(X @ M @ X.T, Xt @ M @ X.T, y))
        ideal.append(np.linalg.norm(f - f_pinv) / np.linalg.norm(f_pinv))
    ideal = np.asarray(ideal)
    ideal_tol = 1e6 * np.finfo(float).eps
    k = int(np.argmax(gaps / tols))
    return Comparison(
        name="kernel_path", title="kernel regression with K(t) along the flow = pseudo-inverse (App. G)",
        quantity="relative gap to the pseudo-inverse function at the worst probed time",
        theory=0.0, simulation=gaps[k], error=gaps[k], tolerance=tols[k],
        passed=bool(np.all(gaps <= tols) and np.all(ideal <= ideal_tol)),
        arrays=dict(t=t, gaps=gaps, tolerances=tols, ideal_gaps=ideal),
        params=dict(D=D, N=N, P=P, s=s, sigma=sigma, eta=eta, seed=seed),
        notes=(f"idealised kernels x^T[A bb^T + I]x': max gap {ideal.max():.2g} (<= {ideal_tol:.1g}); "
               f"empirical K(t) gaps {np.array2string(gaps, precision=2)}"))


# =============================================================================
# figures
# =============================================================================


def plot_final_ntk(res):
    """Final alignment against L/sqrt(L^2+n-1), and the final-NTK error per depth."""
    a = res.arrays
    fig, (ax, ax2) = figure(2)
    d = a["depths"]
    for j, (col, sig) in enumerate(zip(colors(len(a["sigmas"])), a["sigmas"])):
        ax.plot(d, a["alignment_sim"][:, j], "o", color=col, ms=7, label=fr"sim $\sigma$={sig:g}")
        ax2.semilogy(d, a["kernel_error"][:, j], "o-", color=col, label=fr"$\sigma$={sig:g}")
        ax2.axhline(a["tolerances"][j], color=col, ls=":", lw=1,
                    label=fr"tolerance SAFETY$\,\sigma^2$, $\sigma$={sig:g}")
    dd = np.arange(1, d.max() + 1)
    n = res.params["n"]
    ax.plot(dd, dd / np.sqrt(dd ** 2 + n - 1.0), **THEORY, label=r"$L/\sqrt{L^2+n-1}$")
    ax.set(xlabel="depth L", ylabel="final kernel-target alignment", title=f"final alignment (n={n})")
    ax.legend(fontsize=8)
    ax2.set(xlabel="depth L", ylabel=r"$\|K-K_{th}\|_F/\|K_{th}\|_F$", title="final NTK error")
    ax2.legend(fontsize=7)
    for a_ in (ax, ax2):
        value_ticks(a_, np.arange(1, d.max() + 1) if a_ is ax else d, "x", "{:.0f}")
    return fig


def plot_finite_sigma_ntk(res):
    """Final-NTK errors against sigma: sigma^2 for final_ntk, sigma^3 at finite sigma."""
    a = res.arrays
    fig, (ax, ax2) = figure(2, width=4.6, height=3.8)
    sig = a["sigmas"]
    e0, e1 = a["error_sigma0"], a["error_finite"]
    ax.loglog(sig, e0, "o-", color="C0", label=r"final_ntk ($\sigma\to0$)")
    ax.loglog(sig, e1, "s-", color="C1", label="final_ntk_finite_sigma")
    ax.loglog(sig, e0[-1] * (sig / sig[-1]) ** 2, **THEORY, label=r"$\propto\sigma^2$, $\sigma^3$")
    ax.loglog(sig, e1[-1] * (sig / sig[-1]) ** 3, **THEORY)
    ax.loglog(sig, a["tolerance_finite"], ":", color="gray", label=r"tolerance SAFETY$\,\sigma^3$")
    p0, p1 = a["slopes"]
    ax.set(xlabel=r"$\sigma$", ylabel=r"$\|K-K_{th}\|_F/\|K_{th}\|_F$",
           title=f"trained two-layer NTK: slopes {p0:.2f}, {p1:.2f}")
    ax.legend(fontsize=7)
    ax2.semilogx(sig, e0 / sig ** 2, "o-", color="C0", label=r"final_ntk error / $\sigma^2$")
    ax2.semilogx(sig, e1 / sig ** 3, "s-", color="C1", label=r"finite-$\sigma$ error / $\sigma^3$")
    ax2.set_ylim(bottom=0)
    value_ticks(ax, sig)
    value_ticks(ax2, sig)
    ax2.set(xlabel=r"$\sigma$", ylabel="compensated error", title="flat = the predicted power")
    ax2.legend(fontsize=7)
    return fig


def plot_intermediate_kernels(res):
    """Alignment per layer, kernel error against sigma, and its collapse."""
    a = res.arrays
    fig, axes = figure(3, width=3.8, height=3.5)
    L = len(a["layers"]) - 1
    ax = axes[0]
    ax.plot(a["layers"], a["alignment_theory"], **THEORY, marker="x", label="intermediate_alignment")
    for col, sig, As in zip(colors(len(a["sigmas"])), a["sigmas"], a["alignment_sim"]):
        ax.plot(a["layers"], As, "o", color=col, ms=7, alpha=0.7, label=fr"sim $\sigma$={sig:g}")
    ax.set(xlabel="layer l", ylabel="kernel-target alignment", title=f"alignment by layer (L={L})",
           xticks=a["layers"])
    ax.legend(fontsize=7)
    ax = axes[1]
    sig = a["sigmas"]
    for l, col in zip(range(1, L), colors(max(L - 1, 1))):
        ax.loglog(sig, a["kernel_error"][:, l], "o-", color=col, label=f"layer {l}")
    ax.loglog(sig, a["tolerances"], ":", color="gray", label="tolerance")
    ref = a["kernel_error"][-1, 1:L].max()
    ax.loglog(sig, ref * (sig / sig[-1]) ** 2, **THEORY, label=r"$\propto\sigma^2$")
    value_ticks(ax, sig)
    ax.set(xlabel=r"$\sigma$", ylabel="relative kernel error", title="error ~ $\\sigma^2$")
    ax.legend(fontsize=7)
    ax = axes[2]
    for j, (col, sg) in enumerate(zip(colors(len(sig)), sig)):
        ax.plot(np.arange(1, L), a["kernel_error"][j, 1:L] / sg ** 2, "o-", color=col, ms=7, alpha=0.8,
                label=fr"$\sigma$={sg:g}")
    ax.set(xlabel="layer l", ylabel=r"relative kernel error / $\sigma^2$", xticks=np.arange(1, L),
           title=r"collapse: error / $\sigma^2$ independent of $\sigma$")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return fig


def plot_kernel_gap(res):
    """Test gap network vs kernel regression against the anisotropy gamma."""
    a = res.arrays
    fig, (ax,) = figure(1, width=6.0)
    for P, col in zip(np.unique(a["P"]), ("C0", "C1", "C2")):
        m = a["P"] == P
        ax.semilogy(a["gamma"][m], np.maximum(a["gap_final"][m], 1e-16), "o-", color=col,
                    label=f"final NTK, P={int(P)}")
        ax.semilogy(a["gamma"][m], np.maximum(a["gap_initial"][m], 1e-16), "s:", color=col,
                    label=f"initial NTK, P={int(P)}")
        ax.semilogy(a["gamma"][m], a["tolerance"][m], color=col, ls="--", lw=0.8,
                    label=f"tolerance, P={int(P)}")
    ax.set(xlabel=r"anisotropy $\gamma$ ($X_\gamma=US^\gamma V^T$)", ylabel="relative test gap to NN",
           title=f"NN vs kernel regression (D={res.params['D']})")
    ax.legend(fontsize=7)
    return fig


def plot_kernel_path(res):
    """Gap of kernel regression with K(t) to the pseudo-inverse along the flow."""
    a = res.arrays
    fig, (ax,) = figure(1, width=5.2)
    ax.semilogy(a["t"], np.maximum(a["gaps"], 1e-16), "o-", label="kernel regression with K(t)")
    ax.semilogy(a["t"], a["tolerances"], **THEORY, label="tolerance: SAFETY x eps(t)")
    lin = float(a["t"][1])
    ax.set_xscale("symlog", linthresh=lin)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    # t = 0 and the decades above the linear part only (the default symlog
    # locator puts a decade label on top of the label of 0)
    k0 = int(np.ceil(np.log10(lin) + 0.5))
    k1 = int(np.floor(np.log10(float(a["t"][-1]))))
    ax.xaxis.set_major_locator(FixedLocator([0.0] + [10.0 ** k for k in range(k0, k1 + 1)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: "0" if x == 0 else f"$10^{{{int(round(np.log10(x)))}}}$"))
    ax.set(xlabel="t", ylabel="relative gap to pseudo-inverse", title="App. G: same function along the flow")
    ax.legend(fontsize=8)
    return fig
