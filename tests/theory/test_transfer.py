"""Transfer generalisation: spectral theory vs exact limits and Monte Carlo kernel regression."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import linearnets as ln
from linearnets.theory.transfer import (
    trained_ntk_spike,
    transfer_error,
    transfer_error_trained,
    transfer_kappa,
)

#: Finite-size relative error of the (P, D -> infinity) theory, measured at
#: D = 25..200 to be below ~3/D (see theory/transfer.md); we allow 4/D.
FINITE_SIZE = 4.0


def _monte_carlo(P, D, A, alpha, ridge, n_draw, seed):
    """Mean and standard error of ‖ŵ − w‖² for kernel regression with xᵀ(Aββᵀ + I)x'."""
    rng = np.random.default_rng(seed)
    w = np.zeros(D)
    w[0], w[1] = alpha, np.sqrt(1 - alpha ** 2)          # β = e_1, w_⊥ = e_2
    err = np.empty(n_draw)
    Mdiag = np.ones(D)
    Mdiag[0] += A                                         # M = I + Aββᵀ is diagonal here
    for k in range(n_draw):
        X = rng.standard_normal((P, D))
        y = X @ w
        if P <= D:      # dual form ŵ = M Xᵀ (X M Xᵀ + λI)⁻¹ y
            w_hat = Mdiag * (X.T @ np.linalg.solve((X * Mdiag) @ X.T + ridge * np.eye(P), y))
        else:           # primal form (push-through identity) ŵ = (M XᵀX + λI)⁻¹ M Xᵀ y
            w_hat = np.linalg.solve(Mdiag[:, None] * (X.T @ X) + ridge * np.eye(D),
                                    Mdiag * (X.T @ y))
        err[k] = np.sum((w_hat - w) ** 2)
    return err.mean(), err.std(ddof=1) / np.sqrt(n_draw)


MC_CASES = [(30, 100, 4.0, 1.0, 0.0), (30, 100, 4.0, 0.0, 0.0), (70, 100, 4.0, 1.0, 0.0),
            (40, 100, 2.0, 0.8, 10.0), (60, 40, 4.0, 1.0, 4.0)]
MC_CASES_SLOW = [(70, 100, 9.0, 0.5, 0.0), (150, 100, 4.0, 0.0, 10.0),
                 (150, 100, 4.0, 1.0, 10.0), (20, 100, 1.0, 0.3, 0.0)]


@pytest.mark.parametrize("P, D, A, alpha, ridge", MC_CASES + [
    pytest.param(*c, marks=pytest.mark.slow) for c in MC_CASES_SLOW])
def test_matches_monte_carlo(P, D, A, alpha, ridge):
    n_draw = 300
    mean, se = _monte_carlo(P, D, A, alpha, ridge, n_draw, seed=P + int(10 * A))
    th = transfer_error(P, D, A, alpha, ridge)
    assert abs(mean - th) <= 4 * se + FINITE_SIZE * th / D, (mean, se, th)


def test_larger_A_helps_aligned_task_and_hurts_orthogonal_one_in_simulation():
    D, P, n = 100, 40, 300
    e1_small, se1 = _monte_carlo(P, D, 0.0, 1.0, 0.0, n, seed=1)
    e1_large, se2 = _monte_carlo(P, D, 9.0, 1.0, 0.0, n, seed=1)
    assert e1_large < e1_small - 4 * np.hypot(se1, se2)
    e0_small, se3 = _monte_carlo(P, D, 0.0, 0.0, 0.0, n, seed=2)
    e0_large, se4 = _monte_carlo(P, D, 9.0, 0.0, 0.0, n, seed=2)
    # same draws: the difference is measured much more precisely than each mean
    assert e0_large > e0_small
    assert transfer_error(P, D, 9.0, 0.0) > transfer_error(P, D, 0.0, 0.0)


def test_monte_carlo_estimator_agrees_with_kernel_regression():
    """The closed-form ŵ used in the Monte Carlo is ln.kernel_regression with this kernel."""
    rng = np.random.default_rng(7)
    P, D, A, ridge = 15, 20, 3.0, 0.5
    M = np.eye(D)
    M[0, 0] += A
    X, Xt = rng.standard_normal((P, D)), rng.standard_normal((6, D))
    w = rng.standard_normal(D)
    f = ln.kernel_regression(X @ M @ X.T, Xt @ M @ X.T, X @ w, ridge=ridge)
    w_hat = np.diag(M) * (X.T @ np.linalg.solve(X @ M @ X.T + ridge * np.eye(P), X @ w))
    np.testing.assert_allclose(f, Xt @ w_hat, rtol=1e-10)


def test_isotropic_exact():
    """A = 0, ridgeless: E_g = 1 − P/D (+ noise P/(D − P)), exact at every D."""
    P = np.array([1.0, 10.0, 50.0, 99.0])
    np.testing.assert_allclose(transfer_kappa(P, 100, 0.0), 100 - P, rtol=1e-12)
    np.testing.assert_allclose(transfer_error(P, 100, 0.0, 0.3), 1 - P / 100, rtol=1e-12)
    np.testing.assert_allclose(transfer_error(P, 100, 0.0, 0.3, noise=0.2),
                               1 - P / 100 + 0.2 * P / (100 - P), rtol=1e-11)


def test_limits_in_P():
    """P -> 0: nothing learned (E_g = ‖w‖² = 1); P -> ∞ or P >= D ridgeless: E_g = 0."""
    np.testing.assert_allclose(transfer_error(1e-9, 50, 3.0, [0.0, 0.6, 1.0]), 1.0, rtol=1e-6)
    assert transfer_error(1e9, 50, 3.0, 0.6, ridge=1.0) < 1e-12
    np.testing.assert_array_equal(transfer_error([50, 80], 50, 3.0, 0.6), 0.0)
    assert transfer_error(80, 50, 3.0, 0.6, noise=0.1) == pytest.approx(0.1 * 50 / 30)
    assert np.isinf(transfer_error(50, 50, 3.0, 0.6, noise=0.1))


@given(st.floats(0.5, 500), st.integers(2, 400), st.floats(0, 50), st.floats(0, 10))
def test_kappa_solves_its_equation(P, D, A, ridge):
    k = float(transfer_kappa(P, D, A, ridge))
    lam1 = 1 + A
    if ridge == 0 and P >= D:
        assert k == 0
        return
    rhs = ridge + k * (lam1 / (P * lam1 + k) + (D - 1) / (P + k))
    assert k > 0 and abs(k - rhs) <= 1e-12 * (k + ridge + 1)


@given(st.floats(0.5, 300), st.integers(2, 300), st.floats(0, 20), st.floats(0, 20),
       st.floats(0, 5))
def test_monotone_in_A_with_sign_set_by_alpha(P, D, A1, A2, ridge):
    lo, hi = min(A1, A2), max(A1, A2)
    if P >= D and ridge == 0:
        return
    assert transfer_error(P, D, hi, 1.0, ridge) <= transfer_error(P, D, lo, 1.0, ridge) * (1 + 1e-12)
    assert transfer_error(P, D, hi, 0.0, ridge) >= transfer_error(P, D, lo, 0.0, ridge) * (1 - 1e-12)


@given(st.floats(0.5, 300), st.integers(2, 300), st.floats(0, 20), st.floats(-1, 1),
       st.floats(0, 5))
def test_properties(P, D, A, alpha, ridge):
    e = transfer_error(P, D, A, alpha, ridge)
    assert e >= 0 and e.dtype == np.float64
    assert transfer_error(P, D, A, -alpha, ridge) == e
    # the easiest task for A >= 0 is alpha = ±1 (Canatar et al.)
    assert transfer_error(P, D, A, 1.0, ridge) <= e * (1 + 1e-12) + 1e-300
    # more data never hurts (noiseless) a target along the spike, or an isotropic kernel;
    # off the spike the first samples can hurt (test_one_sample_off_the_spike_hurts)
    for a, spike in ((1.0, A), (alpha, 0.0)):
        assert (transfer_error(P * 1.5, D, spike, a, ridge)
                <= transfer_error(P, D, spike, a, ridge) * (1 + 1e-12) + 1e-300)


def test_one_sample_off_the_spike_hurts():
    """Noiseless, a target orthogonal to the spike (alpha = 0): the first samples fit the
    spiked direction, which the target lacks, and the error rises above the null predictor's
    1 before it falls (the target's part off the learned modes acts as noise, Canatar,
    Bordelon & Pehlevan 2021).  One sample at D = 2, A = 4, ridgeless: f(x) = y_1 K(x, x_1) /
    K(x_1, x_1), whose error E_w |M x_1 (x_1 . w) / (x_1^T M x_1) - w|^2 the theory gives
    as sqrt(5)/2 = 1.118 (a Monte Carlo of 200,000 draws: 1.119)."""
    P = np.linspace(0.05, 2.0, 40)
    e = transfer_error(P, 2, 4.0, 0.0, 0.0)
    assert abs(float(transfer_error(1.0, 2, 4.0, 0.0)) - np.sqrt(5) / 2) <= 1e-9
    peak = int(np.argmax(e))
    assert e[peak] > 1.0 and 0 < peak < P.size - 1
    assert np.all(np.diff(e[:peak + 1]) > 0) and np.all(np.diff(e[peak:]) <= 1e-15)
    rng = np.random.default_rng(0)
    M = 4.0 * np.diag([1.0, 0.0]) + np.eye(2)
    x = rng.standard_normal((20000, 2))
    coef = (x @ M) * (x[:, 1] / np.einsum("pi,ij,pj->p", x, M, x))[:, None]
    mc = np.sum((coef - [0.0, 1.0]) ** 2, axis=1)
    # the Monte Carlo mean within 4 standard errors of the theory
    assert abs(mc.mean() - np.sqrt(5) / 2) <= 4 * mc.std() / np.sqrt(mc.size)


def test_broadcasting():
    e = transfer_error(np.array([10.0, 20.0])[:, None], 50, np.array([0.0, 1.0, 4.0]), 1.0)
    assert e.shape == (2, 3)
    assert e[1, 2] == transfer_error(20.0, 50, 4.0, 1.0)


def test_trained_network_spike():
    for L in range(1, 6):
        A, scale = trained_ntk_spike(L, s=2.5)
        assert A == L - 1
        assert scale == pytest.approx(2.5 ** (2 - 2 / L))
    # depth helps the aligned task and hurts the orthogonal one
    errs1 = [float(transfer_error_trained(40, 100, L, 1.0)) for L in (1, 2, 4)]
    errs0 = [float(transfer_error_trained(40, 100, L, 0.0)) for L in (1, 2, 4)]
    assert errs1[0] > errs1[1] > errs1[2] and errs0[0] < errs0[1] < errs0[2]
    # s only rescales the ridge
    assert transfer_error_trained(40, 100, 3, 0.7, s=4.0, ridge=2.0) == pytest.approx(
        float(transfer_error(40, 100, 2.0, 0.7, ridge=2.0 / 4.0 ** (4 / 3))), rel=1e-12)


def test_kernel_regression_with_scaled_kernel_matches_rescaled_ridge():
    """The claim behind transfer_error_trained, checked on one draw."""
    rng = np.random.default_rng(0)
    P, D, A, c, lam = 20, 30, 2.0, 3.7, 0.9
    X, Xt = rng.standard_normal((P, D)), rng.standard_normal((5, D))
    M = np.eye(D) + A * np.outer(np.eye(D)[0], np.eye(D)[0])
    y = rng.standard_normal(P)
    f1 = c * Xt @ M @ X.T @ np.linalg.solve(c * X @ M @ X.T + lam * np.eye(P), y)
    f2 = Xt @ M @ X.T @ np.linalg.solve(X @ M @ X.T + lam / c * np.eye(P), y)
    np.testing.assert_allclose(f1, f2, rtol=1e-10)


@pytest.mark.parametrize("kw, match", [
    (dict(P=0.0), "P must"), (dict(D=0.5), "D must"), (dict(A=-1.0), "A must"),
    (dict(alpha=1.5), "alpha"), (dict(ridge=-1.0), "ridge"), (dict(noise=-0.1), "noise"),
    (dict(P=np.nan), "finite"),
])
def test_domain_errors(kw, match):
    args = dict(P=10.0, D=20, A=1.0, alpha=0.5, ridge=0.0, noise=0.0)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        transfer_error(**args)
    with pytest.raises(ValueError, match="depth"):
        trained_ntk_spike(0)


# --- huge (and tiny) ridge: a log-spaced sweep against a 60-digit solve ---------------------------

def _kappa_mp(P, D, A, ridge):
    """κ = ridge + κ [λ1/(Pλ1 + κ) + (D − 1)/(P + κ)] by bisection at 60 digits (independent)."""
    import mpmath
    with mpmath.workdps(60):
        P_, D_, lam1, r = (mpmath.mpf(P), mpmath.mpf(D), 1 + mpmath.mpf(A), mpmath.mpf(ridge))

        def f(k):
            return k - r - k * (lam1 / (P_ * lam1 + k) + (D_ - 1) / (P_ + k))
        lo, hi = r, r + lam1 + D_ - 1       # f(lo) <= 0 <= f(hi)
        for _ in range(400):
            mid = (lo + hi) / 2
            if f(mid) > 0:
                hi = mid
            else:
                lo = mid
        k = (lo + hi) / 2
        d1, d2 = P_ * lam1 + k, P_ + k
        gamma = P_ * lam1 ** 2 / d1 ** 2 + (D_ - 1) * P_ / d2 ** 2
        return k, gamma, d1, d2


@pytest.mark.parametrize("P, D, A", [(40, 100, 3.0), (200, 100, 0.5), (100, 100, 9.0)])
def test_kappa_and_error_over_a_log_spaced_ridge_sweep(P, D, A):
    import mpmath
    alpha = 0.6
    for ridge in np.logspace(-12, 300, 40):
        k_mp, gamma, d1, d2 = _kappa_mp(P, D, A, ridge)
        k = float(transfer_kappa(P, D, A, ridge))
        assert abs(k - float(k_mp)) <= 1e-12 * float(k_mp), ridge
        with mpmath.workdps(60):
            E_mp = (k_mp ** 2 * (alpha ** 2 / d1 ** 2 + (1 - alpha ** 2) / d2 ** 2)) / (1 - gamma)
        E = float(transfer_error(P, D, A, alpha, ridge))
        assert np.isfinite(E) and abs(E - float(E_mp)) <= 1e-11 * float(E_mp), ridge


def test_transfer_error_trained_with_enormous_ridge_is_the_null_predictor():
    # ridge -> infinity: f -> 0, so E_g -> ||w||^2 = 1; at 1e300 the deviation is ~ Σλ P / ridge
    for L in (1, 2, 3):
        E = float(ln.transfer_error_trained(40, 100, L, 0.3, s=2.0, ridge=1e300))
        assert abs(E - 1.0) <= 1e-12
    for r in (1e10, 1e12, 1e15):
        # κ = ridge + δ with 0 < δ < Σλ = 103
        assert 0.0 < float(transfer_kappa(40, 100, 3.0, r)) - r <= 103.0 * (1 + 1e-12) + 4e-16 * r
