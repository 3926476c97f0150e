"""Unwhitened phase I: closed form vs expm, vs solve_ivp, vs Monte Carlo, vs simulation."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy.integrate import solve_ivp
from scipy.linalg import expm

import linearnets as ln
from linearnets.theory.unwhitened import (
    unwhitened_init_stats,
    unwhitened_init_stats_expected,
    unwhitened_kernel_matrix,
    unwhitened_linear_weights,
    unwhitened_phase1,
    unwhitened_system_matrix,
)


def _problem(seed, D=5, N=7, cond=4.0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((D, D)))
    ev = np.geomspace(1.0, cond, D)
    Sigma = (Q * ev) @ Q.T
    beta = rng.standard_normal(D)
    beta /= np.linalg.norm(beta)
    W = rng.standard_normal((N, D)) / np.sqrt(D)
    a = rng.standard_normal(N) / np.sqrt(N)
    return Sigma, beta, W, a


def test_t0_returns_initial_statistics():
    Sigma, beta, W, a = _problem(0)
    x0 = unwhitened_init_stats(W, a, Sigma, beta)
    res = unwhitened_phase1(0.0, Sigma, beta, 1.7, x0, eta=0.3)
    np.testing.assert_array_equal(res.stats, x0)
    assert res.stats.dtype == np.float64 and res.log_scale == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_closed_form_matches_expm_of_generator(seed):
    Sigma, beta, W, a = _problem(seed)
    x0 = unwhitened_init_stats(W, a, Sigma, beta)
    s, eta = 1.3, 0.7
    A = unwhitened_system_matrix(Sigma, beta, s, eta)
    t = np.array([0.0, 0.01, 0.3, 1.0, 3.0])
    res = unwhitened_phase1(t, Sigma, beta, s, x0, eta)
    ref = np.array([expm(A * ti) @ x0 for ti in t])
    scale = np.max(np.abs(ref), axis=1, keepdims=True)
    assert np.max(np.abs(res.stats - ref) / scale) < 1e-11


def test_generator_eigenvalues():
    Sigma, beta, _, _ = _problem(3)
    s, eta = 0.8, 1.4
    A = unwhitened_system_matrix(Sigma, beta, s, eta)
    b = beta @ Sigma @ Sigma @ beta
    ev = np.sort(np.linalg.eigvals(A).real)
    expect = eta * s * np.sqrt(b) * np.array([-2, -1, 0, 0, 1, 2])
    np.testing.assert_allclose(ev, expect, atol=1e-10 * eta * s * np.sqrt(b))
    res = unwhitened_phase1(1.0, Sigma, beta, s, np.ones(6), eta)
    np.testing.assert_allclose(np.sort(res.rates), expect)


@pytest.mark.parametrize("seed", [4, 5])
def test_matches_solve_ivp_of_linearised_weight_flow(seed):
    """Integrate dW = ηs a gᵀ, da = ηs W g numerically and form the statistics."""
    Sigma, beta, W, a = _problem(seed)
    s, eta = 1.1, 0.9
    N, D = W.shape
    g = Sigma @ beta

    def rhs(_, z):
        Wm, av = z[:N * D].reshape(N, D), z[N * D:]
        return np.concatenate([(eta * s * np.outer(av, g)).ravel(), eta * s * Wm @ g])

    t = np.array([0.0, 0.5, 1.5, 2.5])
    sol = solve_ivp(rhs, (0, t[-1]), np.concatenate([W.ravel(), a]), t_eval=t,
                    method="DOP853", rtol=1e-12, atol=1e-14)
    ref = np.array([unwhitened_init_stats(z[:N * D].reshape(N, D), z[N * D:], Sigma, beta)
                    for z in sol.y.T])
    res = unwhitened_phase1(t, Sigma, beta, s, unwhitened_init_stats(W, a, Sigma, beta), eta)
    scale = np.max(np.abs(ref), axis=1, keepdims=True)
    assert np.max(np.abs(res.stats - ref) / scale) < 1e-9
    Wt, at = unwhitened_linear_weights(t, W, a, Sigma, beta, s, eta)
    zt = sol.y.T
    assert np.max(np.abs(Wt.reshape(len(t), -1) - zt[:, :N * D])) < 1e-9 * np.max(np.abs(zt))
    assert np.max(np.abs(at - zt[:, N * D:])) < 1e-9 * np.max(np.abs(zt))


def test_kernel_grows_along_sigma_beta_not_beta():
    Sigma, beta, W, a = _problem(6, cond=10.0)
    s = 1.0
    g = Sigma @ beta
    ghat = g / np.linalg.norm(g)
    t = np.array([0.0, 2.0, 6.0, 12.0])
    M = unwhitened_kernel_matrix(t, 1e-3 * W, 1e-3 * a, Sigma, beta, s)
    top = np.linalg.eigh(M)[1][..., -1]
    overlap_g = np.abs(top @ ghat)
    # the non-aligned part decays like e^{-θ} relative to the aligned one
    theta = s * np.linalg.norm(g) * t
    assert np.all(1 - overlap_g[2:] < 50 * np.exp(-theta[2:]) + 1e-12)
    assert abs(top[-1] @ beta) < 1 - 1e-3       # β itself is not the direction
    # M(t) ≈ |a|² (I + ĝĝᵀ) at late times
    asq = np.trace(M[-1]) / (len(beta) + 1)
    np.testing.assert_allclose(M[-1] / asq, np.eye(len(beta)) + np.outer(ghat, ghat),
                               atol=1e-6)
    # the stats-based direction agrees with the eigenvector of the full matrix
    res = unwhitened_phase1(t, Sigma, beta, s, unwhitened_init_stats(1e-3 * W, 1e-3 * a, Sigma, beta))
    assert abs(abs(res.direction[-1] @ top[-1]) - 1) < 1e-8


def test_t_to_infinity_is_finite_and_converges():
    Sigma, beta, W, a = _problem(7)
    x0 = unwhitened_init_stats(W, a, Sigma, beta)
    b = beta @ Sigma @ Sigma @ beta
    m1 = beta @ Sigma @ beta
    res = unwhitened_phase1([1e3, 1e6, 1e300], Sigma, beta, 1.0, x0)
    assert np.all(np.isfinite(res.scaled_stats)) and np.all(np.isfinite(res.direction))
    np.testing.assert_allclose(res.direction[-1], Sigma @ beta / np.sqrt(b), atol=1e-12)
    np.testing.assert_allclose(res.scaled_stats[0], res.scaled_stats[-1], rtol=1e-12)
    # the limit: a(t) e^{-θ} -> v := (a0 + Wg0/√b)/2, Wg -> √b v, Wβ -> (m1/√b) v
    wg = W @ Sigma @ beta
    v = 0.5 * (a + wg / np.sqrt(b))
    vv = v @ v
    expect = vv * np.array([1, m1 / np.sqrt(b), np.sqrt(b), m1 ** 2 / b, m1, b])
    np.testing.assert_allclose(res.scaled_stats[-1], expect, rtol=1e-10)
    with pytest.raises(ValueError, match="overflow"):
        res.stats  # noqa: B018  (the property raises)


def test_whitened_reduces_to_qr_cosh_sinh():
    """Σ = I: q = ½(|a|² + βᵀWᵀWβ) and r = aᵀWβ follow cosh/sinh(2ηst)."""
    _, beta, W, a = _problem(8)
    D = len(beta)
    s, eta = 0.6, 1.5
    x0 = unwhitened_init_stats(W, a, np.eye(D), beta)
    q0, r0 = 0.5 * (x0[0] + x0[3]), x0[1]
    t = np.linspace(0, 3, 7)
    res = unwhitened_phase1(t, np.eye(D), beta, s, x0, eta)
    q, r = 0.5 * (res.stats[:, 0] + res.stats[:, 3]), res.stats[:, 1]
    x = 2 * eta * s * t
    np.testing.assert_allclose(q, q0 * np.cosh(x) + r0 * np.sinh(x), rtol=1e-12)
    np.testing.assert_allclose(r, r0 * np.cosh(x) + q0 * np.sinh(x), rtol=1e-12)
    q_ln, r_ln = ln.qr_trajectory(t, s, q0, r0, eta)
    np.testing.assert_allclose(q, q_ln, rtol=1e-12)
    np.testing.assert_allclose(r, r_ln, rtol=1e-12)


def test_expected_statistics_match_monte_carlo():
    """The system is linear: the mean over random inits evolves by the same closed form."""
    D, N, sigma, n_draw = 6, 10, 0.3, 4000
    Sigma, beta, _, _ = _problem(9, D=D)
    rng = np.random.default_rng(123)
    t = 1.5
    x_t = np.empty((n_draw, 6))
    for k in range(n_draw):
        W = rng.standard_normal((N, D)) * sigma / np.sqrt(D)
        a = rng.standard_normal(N) * sigma / np.sqrt(N)
        x_t[k] = unwhitened_phase1(t, Sigma, beta, 1.0, unwhitened_init_stats(W, a, Sigma, beta)).stats
    mean, se = x_t.mean(0), x_t.std(0) / np.sqrt(n_draw)
    pred = unwhitened_phase1(t, Sigma, beta, 1.0,
                             unwhitened_init_stats_expected(N, sigma, Sigma, beta)).stats
    assert np.all(np.abs(mean - pred) < 4.5 * se)


@st.composite
def _problems(draw):
    seed = draw(st.integers(0, 2 ** 31 - 1))
    D = draw(st.integers(2, 6))
    cond = draw(st.floats(1.0, 100.0))
    return _problem(seed, D=D, N=draw(st.integers(1, 6)), cond=cond)


@given(_problems(), st.floats(0.01, 3.0), st.floats(0.0, 30.0))
def test_invariants(prob, s, t):
    """b|a|² − βᵀΣWᵀWΣβ is conserved, the Gram matrix stays PSD, direction is a unit vector."""
    Sigma, beta, W, a = prob
    x0 = unwhitened_init_stats(W, a, Sigma, beta)
    b = beta @ Sigma @ Sigma @ beta
    res = unwhitened_phase1(t, Sigma, beta, s, x0)
    y = res.scaled_stats
    scale = np.exp(-res.log_scale)
    inv0 = b * x0[0] - x0[5]
    assert abs((b * y[0] - y[5]) - inv0 * scale) <= 1e-9 * (b * y[0] + y[5] + abs(inv0) * scale)
    G = np.array([[y[0], y[2], y[1]], [y[2], y[5], y[4]], [y[1], y[4], y[3]]])
    assert np.min(np.linalg.eigvalsh(G)) >= -1e-9 * np.trace(G)
    assert abs(np.linalg.norm(res.direction) - 1) < 1e-12


@pytest.mark.parametrize("bad, match", [
    (dict(Sigma=[[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
    (dict(Sigma=[[1.0, 0.0], [0.0, -1.0]]), "semi-definite"),
    (dict(beta=[1.0, 1.0]), "unit"),
    (dict(beta=[0.0, 1.0], Sigma=[[1.0, 0.0], [0.0, 0.0]]), "nonzero"),
    (dict(s=0.0), "s must"),
    (dict(eta=-1.0), "eta must"),
    (dict(t=-1.0), "t must"),
    (dict(t=np.nan), "finite"),
    (dict(init_stats=np.ones(5)), "init_stats"),
])
def test_domain_errors(bad, match):
    kw = dict(t=1.0, Sigma=np.eye(2), beta=[1.0, 0.0], s=1.0, init_stats=np.ones(6), eta=1.0)
    kw.update(bad)
    with pytest.raises(ValueError, match=match):
        unwhitened_phase1(**kw)


def test_weight_domain_errors():
    with pytest.raises(ValueError, match="w2"):
        unwhitened_init_stats(np.ones((3, 2)), np.ones(2), np.eye(2), [1.0, 0.0])
    with pytest.raises(ValueError, match="W1"):
        unwhitened_init_stats(np.ones((3, 4)), np.ones(3), np.eye(2), [1.0, 0.0])
    with pytest.raises(ValueError, match="overflow"):
        unwhitened_linear_weights(1e4, np.ones((3, 2)), np.ones(3), np.eye(2), [1.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="width"):
        unwhitened_init_stats_expected(2.5, 0.1, np.eye(2), [1.0, 0.0])


def _anisotropic_task(P=300, D=4, s=1.0, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D)) * np.array([2.0, 1.0, 0.6, 0.3])
    beta = rng.standard_normal(D)
    beta /= np.linalg.norm(beta)
    return X, s * X @ beta, beta, X.T @ X / P


def test_matches_gradient_flow_with_sigma_squared_error():
    """Against the full flow at small σ: relative error O(σ² e^{2θ}), so ÷4 when σ halves."""
    X, y, beta, Sigma = _anisotropic_task()
    s = 1.0
    b = beta @ Sigma @ Sigma @ beta
    t = np.array([0.0, 0.5, 1.0, 1.5]) / (s * np.sqrt(b))     # θ = 0 … 1.5
    errs = []
    for sigma in (0.02, 0.01):
        ws = ln.init_network((4, 6, 1), sigma, seed=3)
        tr = ln.gradient_flow(ws, X, y, t, rtol=1e-11, atol=1e-16, record=("weights",),
                              backend="numpy")
        assert tr.success
        sim = np.array([unwhitened_init_stats(tr.weights_t[0][k], tr.weights_t[1][k], Sigma, beta)
                        for k in range(len(t))])
        th = unwhitened_phase1(t, Sigma, beta, s, unwhitened_init_stats(ws[0], ws[1], Sigma, beta))
        err = np.max(np.abs(sim - th.stats), axis=1) / np.max(np.abs(th.stats), axis=1)
        assert err[0] == 0
        assert np.all(err[1:] < 2.0 * sigma ** 2 * np.exp(th.log_scale[1:]) / s)
        errs.append(err[1:])
    ratio = errs[0] / errs[1]
    assert np.all((ratio > 3.5) & (ratio < 4.5)), ratio


def test_simulated_kernel_turns_towards_sigma_beta():
    """In the full flow the top NTK direction approaches Σβ/‖Σβ‖ as phase I proceeds."""
    X, y, beta, Sigma = _anisotropic_task(seed=12)
    g = Sigma @ beta
    ghat = g / np.linalg.norm(g)
    t = np.array([0.0, 2.0, 4.0]) / np.linalg.norm(g)
    ws = ln.init_network((4, 50, 1), 1e-3, seed=5)
    tr = ln.gradient_flow(ws, X, y, t, rtol=1e-10, atol=1e-18, record=("weights",),
                          backend="numpy")
    W, a = tr.weights_t[0], tr.weights_t[1][:, 0, :]
    M = np.swapaxes(W, 1, 2) @ W + np.sum(a * a, axis=1)[:, None, None] * np.eye(4)
    top = np.linalg.eigh(M)[1][:, :, -1]
    ov_g = np.abs(top @ ghat)
    assert ov_g[-1] > 1 - 1e-3 and ov_g[-1] > ov_g[0]
    assert np.abs(top[-1] @ beta) < ov_g[-1] - 0.05      # Σβ, not β
    pred = unwhitened_kernel_matrix(t, ws[0], ws[1], Sigma, beta, 1.0)
    rel = np.linalg.norm(M - pred, axis=(1, 2)) / np.linalg.norm(pred, axis=(1, 2))
    assert np.all(rel < 10 * 1e-6 * np.exp(2 * np.linalg.norm(g) * t))


def test_result_is_immutable_and_leaves_input_writable():
    t = np.array([0.0, 1.0])
    res = unwhitened_phase1(t, np.eye(2), [1.0, 0.0], 1.0, np.ones(6))
    with pytest.raises(ValueError):
        res.scaled_stats[0, 0] = 1.0
    t[0] = 0.5                     # the caller's array is not frozen


def test_one_unit_vector_rule_float32_accepted_everywhere():
    """final_ntk rejected float32 unit vectors (1e-8) while unwhitened_* accepted them (1e-6): one rule."""
    from linearnets._validation import UNIT_TOL
    rng = np.random.default_rng(0)
    D, N = 7, 5
    b32 = rng.normal(size=D).astype(np.float32)
    b32 /= np.linalg.norm(b32)                         # normalised in float32: |norm - 1| ~ 1e-7
    b64 = b32.astype(np.float64) / np.linalg.norm(b32.astype(np.float64))
    assert 0 < abs(np.linalg.norm(b32.astype(np.float64)) - 1.0) <= UNIT_TOL
    X = rng.normal(size=(4, D))
    W1, w2 = rng.normal(size=(N, D)) * 0.1, rng.normal(size=N) * 0.1
    A = rng.normal(size=(D, D))
    Sigma = A @ A.T / D + np.eye(D)
    calls = [
        lambda b: ln.final_ntk(X, X, b, 2.0, 3),
        lambda b: ln.final_ntk_finite_sigma(X, X, W1, w2, b, 1.5),
        lambda b: ln.unwhitened_init_stats(W1, w2, Sigma, b),
        lambda b: ln.unwhitened_system_matrix(Sigma, b, 1.0),
    ]
    for f in calls:
        # accepted, and renormalised: the float32 input gives the float64 unit vector's result
        np.testing.assert_allclose(np.asarray(f(b32)), np.asarray(f(b64)), rtol=1e-12, atol=1e-14)
        for bad in (b64 * (1 + 10 * UNIT_TOL), 2.0 * b64):
            with pytest.raises(ValueError, match="beta must be a unit vector"):
                f(bad)
