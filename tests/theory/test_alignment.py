"""Phase-I q/r alignment: closed forms against ODE solutions, network simulations and Monte Carlo."""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy.integrate import solve_ivp

import linearnets as ln
from linearnets.theory.alignment import qr_full_path, qr_initial_moments, qr_trajectory


# --- helpers -------------------------------------------------------------------------

def mode_system_ivp(t, s, q0, r0, eta=1.0):
    """Independent numerical solution of dq/dt = 2η r(s − r), dr/dt = 2η q(s − r)."""
    def rhs(_, z):
        q, r = z
        return [2 * eta * r * (s - r), 2 * eta * q * (s - r)]
    sol = solve_ivp(rhs, (0.0, float(np.max(t))), [q0, r0], t_eval=t, method="DOP853",
                    rtol=1e-12, atol=1e-15 * q0)
    assert sol.success
    return sol.y


def two_layer_flow(sigma, N, D, s, t_eval, seed, eta=1.0, truncate=False):
    """Gradient flow of f = aᵀW x on whitened data with Σyx = s βᵀ (plain numpy + solve_ivp).

    Returns q(t), r(t), q0, r0 for β = e_1 (the init is rotation invariant)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(0.0, sigma / np.sqrt(D), (N, D))
    a = rng.normal(0.0, sigma / np.sqrt(N), N)
    beta = np.zeros(D)
    beta[0] = 1.0

    def rhs(_, z):
        W, a = z[:N * D].reshape(N, D), z[N * D:]
        E = s * beta if truncate else s * beta - W.T @ a     # E = Σyx − W_2 W_1 (as a vector)
        return eta * np.concatenate([np.outer(a, E).ravel(), W @ E])

    sol = solve_ivp(rhs, (0.0, t_eval[-1]), np.concatenate([W.ravel(), a]), t_eval=t_eval,
                    method="DOP853", rtol=1e-11, atol=1e-14)
    assert sol.success
    Ws, As = sol.y[:N * D].reshape(N, D, -1), sol.y[N * D:]
    Wb = Ws[:, 0, :]
    q = 0.5 * (np.sum(As ** 2, 0) + np.sum(Wb ** 2, 0))
    r = np.sum(As * Wb, 0)
    return q, r, q[0], r[0]


# --- qr_trajectory -----------------------------------------------------------------------

def test_trajectory_t0_returns_initial_values():
    q, r = qr_trajectory(0.0, 1.7, 2e-3, -5e-4, eta=0.3)
    assert q == 2e-3 and r == -5e-4
    assert isinstance(q, np.ndarray) and q.shape == () and q.dtype == np.float64


def test_trajectory_large_t_growth_and_overflow():
    s, q0, r0 = 1.3, 1e-3, 2e-4
    t = np.array([10.0, 100.0, 250.0])
    q, r = qr_trajectory(t, s, q0, r0)
    tau = 2 * s * t
    # t → ∞: q e^{−2st} → (q0 + r0)/2 and r/q → 1
    np.testing.assert_allclose(q * np.exp(-tau), (q0 + r0) / 2, rtol=1e-12)
    np.testing.assert_allclose(r / q, 1.0, rtol=1e-12)
    # beyond the float range the growth is +inf, silently; tiny q0 stays finite
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q, r = qr_trajectory([1e3, 1e300], s, q0, r0)
        assert np.all(np.isinf(q)) and np.all(np.isinf(r))
        q, r = qr_trajectory(300.0, 1.0, 1e-300, 0.0)
    np.testing.assert_allclose(q, 0.5e-300 * np.exp(600.0), rtol=1e-12)


def test_trajectory_matches_formula_and_ode():
    t = np.linspace(0.0, 3.0, 31)
    s, q0, r0, eta = 0.8, 1e-2, -3e-3, 1.5
    q, r = qr_trajectory(t, s, q0, r0, eta)
    tau = 2 * eta * s * t
    np.testing.assert_allclose(q, q0 * np.cosh(tau) + r0 * np.sinh(tau), rtol=1e-13)
    np.testing.assert_allclose(r, r0 * np.cosh(tau) + q0 * np.sinh(tau), rtol=1e-12, atol=1e-17)
    # derivative check: dq/dt = 2ηs r, dr/dt = 2ηs q
    h = 1e-6
    qp, rp = qr_trajectory(t + h, s, q0, r0, eta)
    qm, rm = qr_trajectory(t + 2 * h, s, q0, r0, eta)
    dq = (-3 * q + 4 * qp - qm) / (2 * h)
    dr = (-3 * r + 4 * rp - rm) / (2 * h)
    np.testing.assert_allclose(dq, 2 * eta * s * r, rtol=1e-6, atol=1e-10 * q0)
    np.testing.assert_allclose(dr, 2 * eta * s * q, rtol=1e-6)


def test_trajectory_is_exact_for_the_truncated_network_flow():
    """Dropping the cubic terms of the gradient flow, the q/r system is closed and exact."""
    t = np.linspace(0.0, 2.0, 21)
    q, r, q0, r0 = two_layer_flow(0.3, N=12, D=7, s=1.1, t_eval=t, seed=3, eta=0.7, truncate=True)
    qt, rt = qr_trajectory(t, 1.1, q0, r0, eta=0.7)
    np.testing.assert_allclose(qt, q, rtol=1e-8)
    np.testing.assert_allclose(rt, r, rtol=1e-8, atol=1e-8 * q0)


@pytest.mark.parametrize("sigma", [0.1, 0.03, 0.01])
def test_trajectory_describes_the_full_network_while_q_is_small(sigma):
    """Error of the linearisation, relative to q, is O(q/s) (neglected terms O(σ⁴e^{4st}))."""
    s = 1.0
    t = np.linspace(0.0, 3.0, 61)
    q, r, q0, r0 = two_layer_flow(sigma, N=30, D=10, s=s, t_eval=t, seed=0)
    keep = q < 0.05 * s
    assert keep.sum() > 10
    qt, rt = qr_trajectory(t[keep], s, q0, r0)
    err = max(np.max(np.abs(qt - q[keep]) / q[keep]), np.max(np.abs(rt - r[keep]) / q[keep]))
    assert err < 2.0 * np.max(q[keep]) / s


# --- qr_initial_moments --------------------------------------------------------------------

def test_initial_moments_formula():
    q0, r0s = qr_initial_moments(100, 50, 0.1)
    assert np.isclose(q0, 0.01 * 3.0 / 2, rtol=1e-14) and np.isclose(r0s, 0.01 / np.sqrt(50))
    q0, r0s = qr_initial_moments(np.array([1, 4]), np.array([[1], [16]]), 2.0)
    assert q0.shape == (2, 2) and r0s.shape == (2, 2)
    np.testing.assert_allclose(q0, [[4.0, 10.0], [2.0 * (1 + 1 / 16), 2.0 * (1 + 4 / 16)]])
    np.testing.assert_allclose(r0s, [[4.0, 4.0], [1.0, 1.0]])


@pytest.mark.parametrize("N, D, sigma", [(8, 5, 0.3), (3, 20, 1.7), (40, 4, 0.05)])
def test_initial_moments_monte_carlo(N, D, sigma):
    """Draw W_1 ~ N(0, σ²/D), W_2 ~ N(0, σ²/N) directly and compare with the closed form."""
    M = 40000
    rng = np.random.default_rng(1234 + N)
    beta = rng.normal(size=D)
    beta /= np.linalg.norm(beta)
    W = rng.normal(0.0, sigma / np.sqrt(D), (M, N, D))
    a = rng.normal(0.0, sigma / np.sqrt(N), (M, N))
    Wb = W @ beta
    q0 = 0.5 * (np.sum(a ** 2, 1) + np.sum(Wb ** 2, 1))
    r0 = np.sum(a * Wb, 1)
    q0_mean, r0_std = qr_initial_moments(N, D, sigma)
    # 5 standard errors; the variance of q0 is σ⁴(1/N + N/D²)/2 (checked too)
    q0_var = sigma ** 4 * (1 / N + N / D ** 2) / 2
    assert abs(q0.mean() - q0_mean) < 5 * np.sqrt(q0_var / M)
    assert abs(q0.var() / q0_var - 1) < 5 * np.sqrt(2 / M) * 3
    assert abs(r0.mean()) < 5 * r0_std / np.sqrt(M)
    r2 = r0 ** 2
    assert abs(r2.mean() - r0_std ** 2) < 5 * r2.std() / np.sqrt(M)


# --- qr_full_path ----------------------------------------------------------------------------

def test_full_path_t0_and_infinity():
    s, q0, r0 = 2.5, 3e-3, 1e-3
    q, r = qr_full_path(0.0, s, q0, r0)
    assert np.isclose(q, q0, rtol=1e-14) and np.isclose(r, r0, rtol=1e-12)
    delta2 = q0 ** 2 - r0 ** 2
    for t in (50.0, 1e6, 1e300):
        q, r = qr_full_path(t, s, q0, r0)
        assert np.isclose(q, np.sqrt(s ** 2 + delta2), rtol=1e-14)
        assert np.isclose(r, s, rtol=1e-14)
    # defaults r0 = 0, eta = 1
    q, r = qr_full_path([0.0, 1e3], s, q0)
    np.testing.assert_allclose(q, [q0, np.hypot(s, q0)], rtol=1e-14)
    np.testing.assert_allclose(r, [0.0, s], rtol=1e-14, atol=1e-18)


@pytest.mark.parametrize("s, q0, r0, eta", [
    (1.0, 1e-3, 0.0, 1.0), (2.0, 1e-2, 5e-3, 0.5), (0.5, 1e-4, -9e-5, 2.0),
    (1.0, 0.3, 0.1, 1.0), (1.0, 3.0, -1.0, 1.0), (3.0, 1e-2, 1e-2, 1.0), (1.0, 1e-2, -1e-2, 1.0),
])
def test_full_path_solves_the_mode_system(s, q0, r0, eta):
    t = np.linspace(0.0, (np.log(s / q0 + 2) + 8) / (eta * s), 200)
    q, r = qr_full_path(t, s, q0, r0, eta)
    qi, ri = mode_system_ivp(t, s, q0, r0, eta)
    scale = np.maximum(np.abs(qi), q0)
    assert np.max(np.abs(q - qi) / scale) < 1e-8
    assert np.max(np.abs(r - ri) / scale) < 1e-8


def test_full_path_reduces_to_phase_one_for_small_q0():
    s = 1.0
    for q0 in (1e-4, 1e-6):
        t = np.linspace(0.0, np.log(s / q0) / (4 * s), 50)      # e^{2st} <= √(s/q0)
        q, r = qr_full_path(t, s, q0, 0.3 * q0)
        qt, rt = qr_trajectory(t, s, q0, 0.3 * q0)
        # relative deviation O(q/s) <= O(√(q0/s))
        assert np.max(np.abs(q - qt) / qt) < 2 * np.sqrt(q0 / s)
        assert np.max(np.abs(r - rt) / qt) < 2 * np.sqrt(q0 / s)


def test_full_path_agrees_with_paper_formula_to_order_q0():
    """App. C.5: q = 2s cosh(2st)/(e^{2st} − 1 + 2s/q0), same sigmoid in q + r; r0 = 0."""
    s = 1.5
    errs = []
    for q0 in (1e-3, 1e-4):
        t = np.linspace(0.0, 3 * np.log(s / q0) / s, 400)
        tau = 2 * s * t
        den = np.expm1(tau) + 2 * s / q0
        q, r = qr_full_path(t, s, q0)
        errs.append(max(np.max(np.abs(q - 2 * s * np.cosh(tau) / den)),
                        np.max(np.abs(r - 2 * s * np.sinh(tau) / den))) / s)
        assert errs[-1] < q0 / s
    assert 5 < errs[0] / errs[1] < 20          # the difference is O(q0)


@pytest.mark.parametrize("sigma", [0.1, 0.03, 0.01])
def test_full_path_describes_the_network(sigma):
    """Whole training path of a wide two-layer network: error O(σ² log(1/σ²)), relative to s."""
    s, N, D = 1.0, 30, 10
    q_init, _ = qr_initial_moments(N, D, sigma)
    t = np.linspace(0.0, 1.5 * np.log(s / q_init) / s + 5.0, 300)
    q, r, q0, r0 = two_layer_flow(sigma, N=N, D=D, s=s, t_eval=t, seed=0)
    qf, rf = qr_full_path(t, s, q0, r0)
    err = max(np.max(np.abs(qf - q)), np.max(np.abs(rf - r))) / s
    assert err < 0.5 * sigma ** 2 * np.log(1 / sigma ** 2)
    # the network does end at r = s
    assert abs(r[-1] - s) < 1e-6


def test_full_path_extreme_arguments_stay_finite():
    t = np.array([0.0, 1e-10, 1.0, 1e3, 1e300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for s in (1e-6, 1.0, 1e6):
            for q0 in (1e-300, 1e-12, 1e-3):
                for r0 in (0.0, 0.5 * q0, q0, -q0):
                    q, r = qr_full_path(t, s, q0, r0)
                    assert np.all(np.isfinite(q)) and np.all(np.isfinite(r))
                    assert np.all(q >= 0) and np.all(q >= np.abs(r) * (1 - 1e-12))
                    if r0 > -q0:
                        assert np.isclose(r[-1], s, rtol=1e-12)
    # tiny q0 in phase I: exact exponential growth, no underflow
    q, r = qr_full_path(100.0, 1.0, 1e-300, 0.0)
    np.testing.assert_allclose(q, 0.5e-300 * np.exp(200.0), rtol=1e-12)
    np.testing.assert_allclose(r, q, rtol=1e-12)


@given(s=st.floats(1e-3, 1e3), log_q0=st.floats(-12, 0), frac=st.floats(-1, 1),
       t=st.floats(0, 1e4), eta=st.floats(0.1, 10))
def test_full_path_properties(s, log_q0, frac, t, eta):
    q0 = 10.0 ** log_q0 * s
    r0 = frac * q0
    q, r = qr_full_path(t, s, q0, r0, eta)
    assert np.isfinite(q) and np.isfinite(r)
    assert q >= abs(r) * (1 - 1e-12)
    # conservation of q² − r² (= (q0² − r0²)), relative to q²
    assert abs((q - r) * (q + r) - (q0 - r0) * (q0 + r0)) <= 1e-9 * q ** 2 + 1e-300
    # r never overshoots s when r0 <= s, and is non-decreasing in t
    assert r <= s * (1 + 1e-12)
    q2, r2 = qr_full_path(t * 1.1 + 1e-3, s, q0, r0, eta)
    assert r2 >= r - 1e-12 * max(q, s)


@given(s=st.floats(1e-3, 1e3), log_q0=st.floats(-12, 0), t=st.floats(0, 10))
def test_trajectory_properties(s, log_q0, t):
    q0 = 10.0 ** log_q0
    q, r = qr_trajectory(t / s, s, q0, 0.0)
    assert q >= abs(r)
    assert abs((q - r) * (q + r) - q0 ** 2) <= 1e-12 * q ** 2


def test_broadcasting_and_public_names():
    assert ln.qr_trajectory is qr_trajectory and ln.qr_full_path is qr_full_path
    assert ln.qr_initial_moments is qr_initial_moments
    t = np.linspace(0, 1, 5)[:, None]
    s = np.array([1.0, 2.0, 3.0])
    for f in (qr_trajectory, qr_full_path):
        q, r = f(t, s, 1e-2, 0.0)
        assert q.shape == r.shape == (5, 3) and q.dtype == np.float64
        q, r = f(0.5, 1.0, 1e-2, 0.0)
        assert q.shape == () and r.shape == ()


# --- invalid input -------------------------------------------------------------------

@pytest.mark.parametrize("f", [qr_trajectory, qr_full_path])
@pytest.mark.parametrize("kwargs, name", [
    (dict(t=-1.0), "t"), (dict(s=0.0), "s"), (dict(s=-2.0), "s"), (dict(q0=0.0), "q0"),
    (dict(q0=-1e-3), "q0"), (dict(r0=2e-2), "r0"), (dict(r0=-2e-2), "r0"), (dict(eta=0.0), "eta"),
    (dict(t=np.nan), "t"), (dict(s=np.inf), "s"), (dict(q0=np.nan), "q0"), (dict(r0=np.nan), "r0"),
    (dict(t="x"), "t"), (dict(eta=-1.0), "eta"),
])
def test_qr_invalid_input(f, kwargs, name):
    args = dict(t=1.0, s=1.0, q0=1e-2, r0=0.0, eta=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        f(**args)


@pytest.mark.parametrize("kwargs, name", [
    (dict(width=0), "width"), (dict(width=2.5), "width"), (dict(width=True), "width"),
    (dict(input_dim=-3), "input_dim"), (dict(input_dim=np.nan), "input_dim"),
    (dict(input_dim=[1, 0]), "input_dim"), (dict(sigma=0.0), "sigma"), (dict(sigma=-1.0), "sigma"),
    (dict(sigma=np.inf), "sigma"),
])
def test_moments_invalid_input(kwargs, name):
    args = dict(width=10, input_dim=5, sigma=0.1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        qr_initial_moments(**args)


@pytest.mark.parametrize("f", [qr_trajectory, qr_full_path])
def test_qr_mismatched_shapes(f):
    with pytest.raises(ValueError, match="broadcast.*t \\(3,\\).*s \\(2,\\)"):
        f(np.ones(3), np.ones(2), 1e-2, 0.0)
    with pytest.raises(ValueError, match="q0.*r0"):
        f(1.0, 1.0, np.full(3, 1e-2), np.zeros(2))
    with pytest.raises(ValueError, match="width"):
        qr_initial_moments(np.array([2, 3]), np.array([4, 5, 6]), 0.1)


def test_docstring_examples():
    import doctest
    import linearnets.theory.alignment as mod
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0
