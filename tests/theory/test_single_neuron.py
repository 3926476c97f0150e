"""Single neuron f = a w.x (Kunin et al. 2024): delta, the exact nu(t), the implicit bias for P < D."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import linearnets as ln

RTOL = 1e-11


def _flow(a0, w0, Sxx, Sxy, t, eta_a, eta_w):
    def rhs(_, z):
        a, w = z[0], z[1:]
        g = Sxy - Sxx @ (a * w)
        return np.concatenate([[eta_a * w @ g], eta_w * a * g])
    sol = solve_ivp(rhs, (0, t[-1]), np.concatenate([[a0], w0]), method="DOP853", t_eval=t,
                    rtol=RTOL, atol=1e-14)
    return sol.y[0], sol.y[1:].T


@pytest.mark.parametrize("a0,scale_w,eta_a,eta_w", [(0.05, 1.0, 1.0, 1.0), (1.5, 0.01, 0.3, 2.0),
                                                    (0.01, 0.8, 4.0, 0.5), (-0.4, 0.3, 1.0, 3.0)])
def test_nu_matches_the_flow_and_delta_is_conserved(a0, scale_w, eta_a, eta_w):
    rng = np.random.default_rng(0)
    D = 5
    beta = rng.standard_normal(D)
    w0 = scale_w * rng.standard_normal(D) / np.sqrt(D)
    t = np.linspace(0, 12, 40)
    a, w = _flow(a0, w0, np.eye(D), beta, t, eta_a, eta_w)
    nu_sim = (w @ beta) / a
    nu = ln.single_neuron_nu(t, a0, w0, beta, eta_a=eta_a, eta_w=eta_w)
    np.testing.assert_allclose(nu, nu_sim, rtol=0, atol=1e3 * RTOL * np.abs(nu_sim).max())
    d = ln.single_neuron_delta(a, w, eta_a, eta_w)
    np.testing.assert_allclose(d, d[0], atol=1e3 * RTOL * (eta_w * a0 ** 2 + eta_a * w0 @ w0))


def test_nu_tanh_form_and_large_t():
    rng = np.random.default_rng(1)
    beta = rng.standard_normal(3)
    a0, w0 = 0.7, 0.1 * rng.standard_normal(3)
    t = np.array([0.0, 0.5, 3.0, 1e6])
    nu = ln.single_neuron_nu(t, a0, w0, beta)
    s2 = beta @ beta
    delta = a0 ** 2 - w0 @ w0
    Dl = np.sqrt(4 * s2 + delta ** 2)
    nu0 = w0 @ beta / a0
    ref = 0.5 * (-delta + Dl * np.tanh(0.5 * t * Dl + np.arctanh((delta + 2 * nu0) / Dl)))
    np.testing.assert_allclose(nu, ref, rtol=1e-12)
    # the limit: the larger root; then a w = beta (nu = |beta|^2 / a^2 ...)
    np.testing.assert_allclose(nu[-1], 0.5 * (-delta + Dl), rtol=1e-14)


def test_implicit_bias_underdetermined():
    rng = np.random.default_rng(2)
    P, D = 3, 7
    X = rng.standard_normal((P, D))
    y = rng.standard_normal(P)
    Sxx, Sxy = X.T @ X / P, X.T @ y / P
    w0 = rng.standard_normal(D) / np.sqrt(D)
    perp = w0 - np.linalg.pinv(X) @ (X @ w0)
    for a0, eta_a, eta_w in [(1.3, 1.0, 1.0), (1.5, 1.0, 0.7), (0.6, 0.3, 3.0)]:   # delta < 0, < 0, > 0
        delta = eta_w * a0 ** 2 - eta_a * w0 @ w0
        assert delta + eta_a * perp @ perp > 0
        beta_inf, a_inf = ln.single_neuron_implicit_bias(X, y, a0, w0, eta_a, eta_w)
        np.testing.assert_allclose(X @ beta_inf, y, atol=1e-12)
        a, w = _flow(a0, w0, Sxx, Sxy, np.array([0.0, 1000.0]), eta_a, eta_w)
        np.testing.assert_allclose(a[-1] * w[-1], beta_inf, atol=1e-7)
        np.testing.assert_allclose(a[-1], a_inf, atol=1e-7)
    # the two ends: a dominant a (delta >> 0) keeps the null-space part; delta << 0 approaches X^+ y
    bstar = np.linalg.pinv(X) @ y
    b_big_a, a_big = ln.single_neuron_implicit_bias(X, y, 30.0, w0, 1.0, 1.0)
    np.testing.assert_allclose(b_big_a - bstar, a_big * perp, atol=1e-12)
    assert np.linalg.norm(b_big_a - bstar) > 10 * np.linalg.norm(perp)


def test_errors():
    with pytest.raises(ValueError, match="a0"):
        ln.single_neuron_nu([1.0], 0.0, np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="beta"):
        ln.single_neuron_nu([1.0], 1.0, np.ones(2), np.zeros(2))
    with pytest.raises(ValueError, match="eta_w"):
        ln.single_neuron_nu([1.0], 1.0, np.ones(2), np.ones(2), eta_w=0.0)
    with pytest.raises(ValueError, match="t"):
        ln.single_neuron_nu([-1.0], 1.0, np.ones(2), np.ones(2))
    X = np.eye(2, 4)
    with pytest.raises(ValueError, match="delta"):
        ln.single_neuron_implicit_bias(X, np.ones(2), 0.01, np.ones(4))
    with pytest.raises(ValueError, match="full row rank"):
        ln.single_neuron_implicit_bias(np.ones((2, 4)), np.ones(2), 1.0, np.zeros(4))
