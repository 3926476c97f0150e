"""Mode dynamics against simulation: learning curves, mode strengths, half times, many outputs.

Checks ``learning_curve``, ``mode_strengths``, ``half_time_scaling`` and ``path_ntk``
(the figures of Saxe et al. 2014 and Atanasov et al. 2022: Figs. 3, C.2, App. H).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .._validation import check_depth, check_positive
from ..data import scalar_teacher, sufficient_statistics, teacher_task
from ..regimes import crossing_time
from ..network import end_to_end, init_network
from ..theory.dynamics import half_time, loss_curve, mode_strength
from ..theory.multimode import mode_learning_times, multimode_dynamics, path_ntk, task_modes
from .common import (
    _seeded,
    N_TIMES,
    RTOL,
    SAFETY,
    _C0_GUESS,
    _balanced_aligned_init,
    _check_args,
    _check_plateau,
    _check_sigmas,
    _flow,
    _fmt_array,
    _half_time_or_zero,
    _loglog_slope,
    _mode_projection,
    _require,
    _sizes,
    _small_init,
    _two_layer_qr,
)
from .plotting import THEORY, colors, figure, value_ticks
from .registry import Comparison

__all__ = ["compare_learning_curves", "compare_mode_strengths", "compare_half_time_scaling", "compare_path_ntk"]


# =============================================================================
# two-layer learning curves vs the Saxe sigmoid (Fig. C.2)
# =============================================================================
@_seeded
def compare_learning_curves(sigmas=(0.1, 0.03, 0.01, 0.003), D=20, N=20, P=40, s=1.0, eta=1.0,
                            seed=0, backend="auto"):
    """Two-layer learning curves against the Saxe sigmoid, for several sigma (Fig. C.2).

    The theory is ``loss_curve(t, s, c0)`` with the matched initial condition
    ``c0 = (q0 + r0)/2`` (appendix C.5) read off the simulated initial weights.
    Its neglected terms are the O(sigma^2) non-aligned parts of the initial
    weights, so the maximal loss error, in units of the initial loss ``s^2/2``,
    scales as sigma^2: the headline numbers are the fitted log-log slope of the
    error against sigma (theory: 2) and the error at every sigma must stay below
    ``SAFETY * q0 / s`` (q0, the initial kernel scale, is the O(sigma^2) quantity).
    The error may carry the plateau's factor ``ln(s/q0)`` (see
    :func:`compare_phase_one`), which lowers the slope by at most
    ``2/ln(s/q0_max)``; the next correction adds ``2 SAFETY q0_max/s``. Their sum
    is the slope tolerance.

    Range: P >= D; every sigma a small initialisation, ``c0 = (q0 + r0)/2 < s/2`` (the
    sigmoid describes the escape from it); anything else is a ValueError naming it.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    sigmas = _check_sigmas(sigmas)
    s = float(check_positive(s, "s", ndim=0))
    X, y, beta = scalar_teacher(P, D, s, seed=seed)
    for sig in sigmas:          # up front: every sigma a small initialisation
        q0, r0 = _two_layer_qr(init_network((D, N, 1), sig, seed=seed + 1), beta)
        _small_init(0.5 * (q0 + r0), s, f"sigmas (sigma = {sig:g})")
    ts, sims, ths, errs, tols, q0s = [], [], [], [], [], []
    for sig in sigmas:
        w0 = init_network((D, N, 1), sig, seed=seed + 1)
        q0, r0 = _two_layer_qr(w0, beta)
        c0 = 0.5 * (q0 + r0)
        t_half = float(half_time(s, c0, depth=2, eta=eta))
        t = np.linspace(0.0, 2.0 * t_half + 4.0 / (eta * s), N_TIMES)
        traj = _flow(w0, X, y, t, eta, backend)
        theory = np.asarray(loss_curve(t, np.array([s]), np.array([c0]), depth=2, eta=eta))
        err = np.max(np.abs(traj.loss - theory)) / (0.5 * s * s)
        ts.append(t); sims.append(np.asarray(traj.loss)); ths.append(theory)
        errs.append(err); q0s.append(q0); tols.append(SAFETY * q0 / s)
    errs, tols, q0s = map(np.asarray, (errs, tols, q0s))
    slope = _loglog_slope(sigmas, errs) if len(sigmas) > 1 else 2.0
    # the O(q0) growth-rate corrections act over the plateau (phase_one): the error
    # may carry a factor ln(s/q0), which lowers the slope by at most 2/ln(s/q0_max)
    slope_tol = (2.0 / math.log(s / q0s.max()) + 2.0 * SAFETY * q0s.max() / s) if len(sigmas) > 1 else np.inf
    passed = bool(np.all(errs <= tols) and abs(slope - 2.0) <= slope_tol)
    return Comparison(
        name="learning_curve", title="two-layer loss vs Saxe sigmoid (Fig. C.2)",
        quantity="slope of log(max loss error) vs log(sigma)",
        theory=2.0, simulation=slope, error=abs(slope - 2.0), tolerance=slope_tol, passed=passed,
        arrays=dict(sigmas=sigmas, t=ts, loss_sim=sims, loss_theory=ths, errors=errs,
                    tolerances=tols, q0=q0s),
        params=dict(D=D, N=N, P=P, s=s, eta=eta, seed=seed),
        notes=("c0 = (q0+r0)/2 from the simulated initial weights; per-sigma error "
               "max|L_sim - L_th|/(s^2/2) <= SAFETY*q0/s; max per-sigma error/tolerance = "
               f"{np.max(errs / tols):.3g}"))


# =============================================================================
# deep mode strengths, several modes learned in order
# =============================================================================
@_seeded
def compare_mode_strengths(depths=(2, 3, 4, 5, 6), spectrum=(3.0, 2.0, 1.0), D=6, N=8, P=12,
                           sigma=0.3, eta=1.0, seed=0, backend="auto"):
    """Mode strengths c_alpha(t) of deep multi-output networks vs ``mode_strength``.

    The network starts from a balanced, task-aligned initialisation (every layer
    carries the singular values ``sigma`` along random orthonormal hidden
    frames), the initial condition under which the mode dynamics
    ``dc/dt = eta L c^{2-2/L}(s - c)`` are exact at every depth; ``c0_alpha`` is
    read from the simulated initial end-to-end map. The modes are learned in the
    order of their strengths. The theory is exact, so the tolerance is the
    integrator's: a local relative error ``RTOL`` in c during the plateau is
    amplified by at most ``(s/c0)^{1-2/L}`` (the linearised flow of log c), and
    ``error = max |c_sim - c_th| / s_alpha <= SAFETY * n_steps * RTOL * (s/c0)^{1-2/L}``
    with ``n_steps = N_TIMES`` as the number of accumulated steps' scale.

    From a *random* small initialisation the single-mode two-layer case is
    covered by :func:`compare_learning_curves` and :func:`compare_phase_one`.
    With several modes the per-mode matched ``c0 = (q0 + r0)/2`` is not exact:
    the growing hidden vectors of different modes overlap at O(1/sqrt(N)) and
    a learned mode suppresses that overlap in the later ones, an error that does
    not vanish with sigma; hence the balanced start here.

    Range: any sigma > 0 (the mode dynamics are exact from a balanced start; a mode above
    s/2 decays to s), depths 1 to ``MAX_DEPTH``, a plateau of the rising modes within
    ``MAX_PLATEAU`` / (eta s); P >= D; at most min(D, N) modes.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    _require(len(spectrum) <= min(D, N),
             f"spectrum must have at most min(D, N) = {min(D, N)} modes, got {len(spectrum)}")
    depths = [check_depth(L) for L in depths]
    spectrum = np.sort(check_positive(spectrum, "spectrum"))[::-1]
    C = len(spectrum)
    X, Y = teacher_task(P, D, spectrum, seed=seed)
    Sxx, Syx = sufficient_statistics(X, Y)
    U, S, Vt = np.linalg.svd(Syx, full_matrices=False)
    for L in depths:            # up front: the plateau of every rising mode
        for s_a in S[sigma ** L < 0.5 * S]:
            _check_plateau(s_a, sigma ** L, L, eta, f"sigma={sigma:g} at depth {L} (depths={tuple(depths)})")
    out_t, out_sim, out_th, errs, tols = [], [], [], [], []
    for L in depths:
        sizes = (D,) + (N,) * (L - 1) + (C,)
        w0 = _balanced_aligned_init(sizes, U, Vt.T, np.full(C, sigma ** L), seed + L)
        c0 = _mode_projection(end_to_end(w0)[None], U, S, Vt)[0]
        rising = c0 < 0.5 * S  # half_time is defined for modes that still have to pass s/2
        t_half = float(np.max(half_time(S[rising], c0[rising], depth=L, eta=eta))) if rising.any() else 0.0
        t_end = 1.5 * t_half + 6.0 / (eta * S.min())
        t = np.linspace(0.0, t_end, N_TIMES)
        traj = _flow(w0, X, Y, t, eta, backend)
        c_sim = _mode_projection(traj.end_to_end, U, S, Vt)
        c_th = np.stack([np.asarray(mode_strength(t, S[a], c0[a], depth=L, eta=eta))
                         for a in range(C)], axis=1)
        errs.append(float(np.max(np.abs(c_sim - c_th) / S)))
        amp = float(np.max((S / c0) ** (1.0 - 2.0 / L)))
        tols.append(SAFETY * N_TIMES * RTOL * amp)
        out_t.append(t); out_sim.append(c_sim); out_th.append(c_th)
    errs, tols = np.asarray(errs), np.asarray(tols)
    worst = int(np.argmax(errs / tols))
    return Comparison(
        name="mode_strengths", title="deep mode strengths c_a(t) vs mode_strength (L = %s)"
        % ",".join(map(str, depths)),
        quantity=f"final c_1 (= s_1) at depth {depths[worst]}",
        theory=float(out_th[worst][-1, 0]), simulation=float(out_sim[worst][-1, 0]),
        error=float(errs[worst]), tolerance=float(tols[worst]), passed=bool(np.all(errs <= tols)),
        arrays=dict(depths=np.array(depths), spectrum=S, t=out_t, c_sim=out_sim, c_theory=out_th,
                    errors=errs, tolerances=tols),
        params=dict(D=D, N=N, P=P, sigma=sigma, eta=eta, seed=seed),
        notes="worst depth shown; per-depth errors " + ", ".join(
            f"L={L}: {e:.2g}/{tl:.2g}" for L, e, tl in zip(depths, errs, tols)))


# =============================================================================
# half-time scaling with sigma (Fig. 3)
# =============================================================================
def _fit_power_offset(sig, t, p_min=-8.0):
    """Fit t = A sigma^p + B (least squares in A, B for each p; p by bounded 1-D search in [p_min, 0])."""
    from scipy.optimize import minimize_scalar

    def resid(p):
        M = np.stack([sig ** p, np.ones_like(sig)], axis=1)
        coef, *_ = np.linalg.lstsq(M, t, rcond=None)
        return float(np.sum((M @ coef - t) ** 2) / np.sum(t ** 2)), coef

    res = minimize_scalar(lambda p: resid(p)[0], bounds=(p_min, 0.0), method="bounded",
                          options=dict(xatol=1e-8))
    return float(res.x), resid(res.x)[1]


#: default sigma ranges per depth (geometric, 5 points)
_HALF_TIME_SIGMAS = {1: (0.01, 0.1), 2: (0.01, 0.1), 3: (0.03, 0.15), 4: (0.06, 0.2), 5: (0.1, 0.25)}


def _half_time_sigmas(sigmas, L):
    """The sigmas of depth L: ``sigmas[L]`` for a mapping, else ``sigmas``, else the default range."""
    if isinstance(sigmas, Mapping):
        return _check_sigmas(sigmas[L])
    return _check_sigmas(sigmas if sigmas is not None else np.geomspace(*_HALF_TIME_SIGMAS[min(L, 5)], 5))


@_seeded
def compare_half_time_scaling(depths=(2, 3, 4, 5), sigmas=None, D=8, N=16, P=16, s=1.0, eta=1.0,
                              seed=0, backend="auto"):
    """Half-time t_1/2 (c reaches s/2) against sigma from random initialisation (Fig. 3).

    Theory: t_1/2 = ln(1/sigma)/(eta s) + O(1) for L = 2, and
    t_1/2 = A sigma^{2-L} + B + ... for L >= 3 (``plateau_time``; the same seed is
    used at every sigma, so the initial weights are exactly proportional to
    sigma and the plateau is self-similar). For L = 2 the fitted slope of t_1/2
    against ln sigma is compared with ``-1/(eta s)``; for L >= 3 the exponent of
    the fit ``A sigma^p + B`` with ``2 - L``. Rescaling ``W = sigma W_hat``,
    ``tau = sigma^{L-2} t`` makes the plateau exactly self-similar up to the
    network output (relative O(sigma^L)) and the escape depends on sigma only
    through the O(sigma^2) non-aligned weights, so the fitted slope / exponent
    deviates from the theory by O(sigma_max^2): tolerance ``SAFETY * sigma_max^2``
    (times ``1/(eta s)`` for the L = 2 slope). Default sigma ranges shrink with L
    only to keep the plateaus (~ sigma^{2-L}) affordable; ``sigmas`` is one sequence
    for every depth, or a mapping ``{depth: sigmas}`` (the paper's Fig. 3 uses a
    different range per depth).
    The headline row is the worst depth.

    Range: depths 2 to ``MAX_DEPTH`` (depth 1 has no plateau), sigmas a small
    initialisation (``sigma^L < s/2``) whose longest plateau (from ``1e-3 sigma^L``, the
    horizon's slowest case) is within ``MAX_PLATEAU`` / (eta s); P >= D.
    """
    _check_args(locals())
    _require(P >= D, f"P must be >= D (whitened inputs), got P={P}, D={D}")
    depths = [check_depth(L) for L in depths]
    _require(min(depths) >= 2, f"depths must be >= 2 (at depth 1 there is no plateau to time), got {depths!r}")
    if isinstance(sigmas, Mapping):
        missing = [L for L in depths if L not in sigmas]
        _require(not missing, f"sigmas (a mapping depth -> sigmas) has no entry for depth(s) {missing}")
    for L in depths:            # up front: a small start and an affordable plateau at every (depth, sigma)
        for sig in _half_time_sigmas(sigmas, L):
            _small_init(sig ** L, s, f"sigmas (sigma = {sig:g} at depth {L})")
            _check_plateau(s, 1e-3 * sig ** L, L, eta, f"depths={tuple(depths)} with sigmas (depth {L}, sigma {sig:g})")
    s = float(check_positive(s, "s", ndim=0))
    X, y, beta = scalar_teacher(P, D, s, seed=seed)
    rows = []
    for L in depths:
        sg = _half_time_sigmas(sigmas, L)
        th = []
        for sig in sg:
            w0 = init_network((D,) + (N,) * (L - 1) + (1,), sig, seed=seed + 1)
            c_scale = sig ** L
            # long enough for the slowest case (effective c0 down to 1e-3 sigma^L)
            t_end = 2.0 * float(half_time(s, 1e-3 * c_scale, depth=L, eta=eta)) + 10.0 / (eta * s)
            t = np.linspace(0.0, t_end, 4 * N_TIMES)
            traj = _flow(w0, X, y, t, eta, backend)
            c = np.asarray(traj.end_to_end)[:, 0, :] @ beta
            th.append(crossing_time(t, c, 0.5 * s))
        th = np.asarray(th)
        if L == 2:
            slope = float(np.polyfit(np.log(sg), th, 1)[0])
            theory = -1.0 / (eta * s)
            tol = SAFETY * sg.max() ** 2 / (eta * s)
            rows.append((L, sg, th, theory, slope, tol, None))
        else:
            p, coef = _fit_power_offset(sg, th, p_min=min(-8.0, -L - 2.0))   # room below 2 - L
            theory = 2.0 - L
            tol = SAFETY * sg.max() ** 2
            rows.append((L, sg, th, theory, p, tol, coef))
    errs = np.array([abs(r[4] - r[3]) for r in rows])
    tols = np.array([r[5] for r in rows])
    worst = int(np.argmax(errs / tols))
    L, sg, th, theory, fit, tol, _ = rows[worst]
    return Comparison(
        name="half_time_scaling", title="t_1/2 vs sigma: log for L=2, sigma^(2-L) for L>=3 (Fig. 3)",
        quantity=f"L={L}: " + ("d t_1/2 / d ln sigma" if L == 2 else "fitted exponent p in A sigma^p + B"),
        theory=theory, simulation=fit, error=float(errs[worst]), tolerance=float(tols[worst]),
        passed=bool(np.all(errs <= tols)),
        arrays=dict(depths=np.array([r[0] for r in rows]), sigmas=[r[1] for r in rows],
                    half_times=[r[2] for r in rows], theory_exponent=np.array([r[3] for r in rows]),
                    fitted=np.array([r[4] for r in rows]), errors=errs, tolerances=tols,
                    coef=[np.asarray(r[6]) if r[6] is not None else np.full(2, np.nan) for r in rows]),
        params=dict(D=D, N=N, P=P, s=s, eta=eta, seed=seed),
        notes="per depth (theory/fit/tol): " + "; ".join(
            f"L={r[0]}: {r[3]:.3g}/{r[4]:.3g}/{r[5]:.2g}" for r in rows))


# =============================================================================
# many outputs: modes and NTK along the path; learning order and times (App. H)
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
    return np.array([crossing_time(fine, c[:, a], 0.5 * S[a]) for a in range(len(S))])


@_seeded
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

    Range: depths and random_depths 1 to ``MAX_DEPTH``; the balanced start's rising modes
    and the random start (``sigma^L < s_min/2``, a small initialisation) with plateaus within
    ``MAX_PLATEAU`` / (eta s); P >= D; at most min(D, N, random_width) modes.
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
    X, Y = teacher_task(P, D, spectrum, seed=seed)
    _, Syx = sufficient_statistics(X, Y)
    S, U, V = (np.asarray(v) for v in task_modes(Syx))
    Vt = V.T
    Xp = np.random.default_rng(seed + 17).standard_normal((n_probe, D))
    sg = _check_sigmas(sigmas)
    for L in depths:            # up front: the plateaus of both starts
        for s_a, c_a in zip(S, c0):
            if c_a < 0.5 * s_a:
                _check_plateau(s_a, c_a, L, eta, f"c0 at depth {L} (depths={tuple(depths)})")
    for L in random_depths:
        for sig in sg:
            _small_init(sig ** L, S.min(), f"sigmas (sigma = {sig:g} at depth {L})")
            _check_plateau(S.min(), _C0_GUESS * sig ** L, L, eta,
                           f"random_depths={tuple(random_depths)} with sigmas (depth {L}, sigma {sig:g})")
    # (a) balanced, aligned start
    part_a = []
    for L in depths:
        w0 = _balanced_aligned_init(_sizes(D, N, C, L), U, V, c0, seed + L)
        c0_sim = _mode_projection(end_to_end(w0)[None], U, S, Vt)[0]
        rising = c0_sim < 0.5 * S
        t_half = float(np.max(half_time(S[rising], c0_sim[rising], depth=L, eta=eta))) if rising.any() else 0.0
        t = np.linspace(0.0, 1.5 * t_half + 6.0 / (eta * S.min()), n_times)
        traj = _flow(w0, X, Y, t, eta, backend, probe=Xp)
        c_sim = _mode_projection(traj.end_to_end, U, S, Vt)
        c_th = np.asarray(multimode_dynamics(t, Syx, c0_sim, depth=L, eta=eta).c)
        K_sim = np.asarray(traj.ntk)
        K_th = np.asarray(path_ntk(t, Xp, Xp, Syx, c0_sim, depth=L, eta=eta))
        k_err = (np.linalg.norm((K_sim - K_th).reshape(len(t), -1), axis=1)
                 / np.linalg.norm(K_th.reshape(len(t), -1), axis=1))
        c_err = float(np.max(np.abs(c_sim - c_th) / S))
        tol_c = SAFETY * N_TIMES * RTOL * float(np.max((S / c0_sim) ** (1.0 - 2.0 / L)))
        part_a.append(dict(L=L, t=t, c_sim=c_sim, c_th=c_th, k_err=k_err, c_err=c_err, tol_c=tol_c,
                           tol_k=max(2.0 - 2.0 / L, 1.0) * tol_c,
                           k_norm_sim=np.linalg.norm(K_sim.reshape(len(t), -1), axis=1),
                           k_norm_th=np.linalg.norm(K_th.reshape(len(t), -1), axis=1)))
    # (b) small random start: learning order and the sigma scaling of the half times
    part_b = []
    for L in random_depths:
        sizes = _sizes(D, random_width, C, L)
        h_sim, h_th = [], []
        for sig in sg:
            w0 = init_network(sizes, sig, seed=seed + 1)
            mt = mode_learning_times(S, sig ** L, depth=L, eta=eta)
            t_guess = 2.0 * _half_time_or_zero(S.min(), _C0_GUESS * sig ** L, L, eta) + 6.0 / (eta * S.min())
            h_sim.append(_half_times(w0, X, Y, U, S, Vt, L, eta, backend, t_guess))
            h_th.append(np.asarray(mt.times))
        h_sim, h_th = np.asarray(h_sim), np.asarray(h_th)
        order_th = np.asarray(mode_learning_times(S, sg[-1] ** L, depth=L, eta=eta).order)
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
                f"L={p['L']}: {p['order_ok']}, {_fmt_array(p['dev'].ravel(), 2)}, "
                f"{_fmt_array(p['tol'][:, 0], 2)}" for p in part_b)))


# =============================================================================
# figures
# =============================================================================


def plot_learning_curve(res):
    """Loss curves against the sigmoid, and the error against sigma."""
    a = res.arrays
    fig, (ax, ax2) = figure(2)
    for col, sig, t, ls, lt in zip(colors(len(a["sigmas"])), a["sigmas"], a["t"], a["loss_sim"],
                                   a["loss_theory"]):
        ax.plot(t, ls, color=col, lw=2.5, alpha=0.8, label=fr"$\sigma$={sig:g}")
        ax.plot(t, lt, **THEORY)
    ax.plot([], [], **THEORY, label="theory")
    ax.set(xlabel="t", ylabel="loss", title="two-layer learning curves")
    ax.legend(fontsize=8)
    sig, err = a["sigmas"], a["errors"]
    ax2.loglog(sig, err, "o-", label="max |loss error| / (s²/2)")
    ax2.loglog(sig, a["tolerances"], "s:", color="gray", label="tolerance")
    ax2.loglog(sig, err[-1] * (sig / sig[-1]) ** 2, **THEORY, label=r"$\propto\sigma^2$")
    ax2.set(xlabel=r"$\sigma$", ylabel="error", title=f"slope {res.simulation:.2f} (theory 2)")
    ax2.legend(fontsize=8)
    return fig


def plot_mode_strengths(res):
    """c_alpha(t) against mode_strength, one panel per depth."""
    a = res.arrays
    depths = a["depths"]
    fig, axes = figure(len(depths), width=3.2, height=3.2)
    for ax, L, t, cs, ct in zip(axes, depths, a["t"], a["c_sim"], a["c_theory"]):
        for k, col in enumerate(colors(cs.shape[1])):
            ax.plot(t, cs[:, k], color=col, lw=3, alpha=0.6, label=fr"$s_{k + 1}$={a['spectrum'][k]:g}")
            ax.plot(t, ct[:, k], **THEORY)
        ax.set(xlabel="t", title=f"L = {L}")
    axes[0].set_ylabel(r"$c_\alpha(t)$")
    axes[0].legend(fontsize=7)
    return fig


def plot_half_time_scaling(res):
    """Half times against sigma: the power law for L >= 3, the log law for L = 2."""
    a = res.arrays
    fig, (ax, ax2) = figure(2)
    for col, L, sg, th, p, _coef in zip(colors(len(a["depths"])), a["depths"], a["sigmas"], a["half_times"],
                                        a["theory_exponent"], a["coef"]):
        if L == 2:
            ax2.semilogx(sg, th, "o", color=col, label="L=2 (sim)")
            # theory slope -1/(eta s) in ln sigma, intercept by least squares
            ax2.semilogx(sg, p * np.log(sg) + np.mean(th - p * np.log(sg)), **THEORY,
                         label=r"theory: slope $-1/(\eta s)$ in $\ln\sigma$")
        else:
            ax.loglog(sg, th, "o", color=col, label=f"L={L} (sim)")
            # theory exponent, amplitude and offset refitted with the exponent fixed
            M = np.stack([sg ** p, np.ones_like(sg)], axis=1)
            c, *_ = np.linalg.lstsq(M, th, rcond=None)
            ss = np.geomspace(sg.min(), sg.max(), 50)
            ax.loglog(ss, c[0] * ss ** p + c[1], color=col, ls="--",
                      label=fr"$A\sigma^{{{p:g}}}+B$")
    # both panels on a sigma axis: the exponents in the legend are those of sigma;
    # ticks on the 1-2-5 sequence only (the default minor labels overlap)
    for a_ in (ax, ax2):
        lo, hi = (min(np.min(x) for x in a["sigmas"]), max(np.max(x) for x in a["sigmas"]))
        k = np.arange(np.floor(np.log10(lo)) - 1, np.ceil(np.log10(hi)) + 1)
        nice = np.sort(np.outer([1.0, 2.0, 5.0], 10.0 ** k).ravel())
        value_ticks(a_, nice[(nice >= lo * 0.999) & (nice <= hi * 1.001)], "x", "{:g}")
    ax.set(xlabel=r"$\sigma$", ylabel=r"$t_{1/2}$", title=r"$L\geq 3$: $t_{1/2}\sim\sigma^{2-L}$")
    ax2.set(xlabel=r"$\sigma$", ylabel=r"$t_{1/2}$", title=r"$L=2$: $t_{1/2}\sim\ln(1/\sigma)/s$")
    for a_ in (ax, ax2):
        if a_.get_legend_handles_labels()[0]:
            a_.legend(fontsize=7)
        else:
            a_.set_axis_off()
    return fig


def plot_path_ntk(res):
    """Modes and NTK along the path (balanced start); half-time laws (random start)."""
    from matplotlib.figure import Figure
    a = res.arrays
    nd = len(a["depths"])
    ncol = max(nd, 3)
    fig = Figure(figsize=(3.8 * ncol, 6.6), layout="constrained")
    axes = fig.subplots(2, ncol)
    for ax, L, t, cs, ct in zip(axes[0], a["depths"], a["t"], a["c_sim"], a["c_theory"]):
        for k, col in enumerate(colors(cs.shape[1])):
            ax.plot(t, cs[:, k], color=col, lw=3, alpha=0.6, label=fr"$c_{k + 1}$, $s$={a['spectrum'][k]:g}")
            ax.plot(t, ct[:, k], **THEORY)
        ax.set(xlabel="t", title=f"balanced aligned start, L = {L}")
    if nd < ncol:
        ax = axes[0, nd]
        for L, t, kn, kt, col in zip(a["depths"], a["t"], a["ntk_norm_sim"], a["ntk_norm_theory"],
                                     colors(nd)):
            ax.semilogy(t, kn, color=col, lw=3, alpha=0.6, label=f"L={L} (empirical)")
            ax.semilogy(t, kt, **THEORY)
        ax.plot([], [], **THEORY, label="path_ntk")
        ax.set(xlabel="t", ylabel=r"$\|K(t)\|_F$ on the probe inputs", title="the NTK grows along the path")
        ax.legend(fontsize=7)
    for ax in axes[0, nd + 1:]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel(r"$c_\alpha(t)$ (dashed: multimode_dynamics)")
    axes[0, 0].legend(fontsize=7, loc="center right")
    ax = axes[1, 0]
    for L, t, ke, tl, col in zip(a["depths"], a["t"], a["ntk_error"], a["ntk_tolerance"], colors(nd)):
        ax.semilogy(t[1:], np.maximum(ke[1:], 1e-17), color=col, lw=1.5, label=f"L={L}")
        ax.axhline(tl, color=col, ls=":", lw=1, label=f"tolerance, L={L}")
    ax.set(xlabel="t", ylabel=r"$\|K_{emp}-K_{path}\|_F/\|K_{path}\|_F$",
           title="NTK on probe inputs vs path_ntk")
    ax.legend(fontsize=7)
    sg = a["sigmas"]
    law_axes = {2: axes[1, 1], 3: axes[1, 2]}
    for L, hs, ht in zip(a["random_depths"], a["half_sim"], a["half_theory"]):
        ax = law_axes.get(int(L), axes[1, 2])
        for k, col in enumerate(colors(hs.shape[1])):
            # the theory's sigma dependence, anchored at the smallest sigma
            anchored = ht[:, k] - ht[-1, k] + hs[-1, k] if L == 2 else ht[:, k] * hs[-1, k] / ht[-1, k]
            ax.plot(sg, hs[:, k], "o", color=col, ms=7, alpha=0.8, label=fr"mode {k + 1} (sim)")
            ax.plot(sg, anchored, **THEORY)
        ax.set_xscale("log")
        value_ticks(ax, sg)
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
