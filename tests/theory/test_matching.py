"""matched_initial_conditions: (q0, r0, c0) per mode read off two-layer weights."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.theory.matching import matched_initial_conditions


def _aligned(a, w, u, v, N=6, seed=0):
    """Two-layer weights in the modes' rank-one subspaces: W_1 = Σ w_α h_α v_αᵀ, W_2 = Σ a_α u_α h_αᵀ."""
    H = np.linalg.qr(np.random.default_rng(seed).standard_normal((N, len(a))))[0]
    W1 = sum(w[k] * np.outer(H[:, k], v[:, k]) for k in range(len(a)))
    W2 = sum(a[k] * np.outer(u[:, k], H[:, k]) for k in range(len(a)))
    return [W1, W2]


def test_aligned_weights_give_the_exact_q_r_and_c0():
    X, Y = ln.teacher_task(30, 5, [3.0, 1.0], seed=2)
    _, Syx = ln.sufficient_statistics(X, Y)
    s, U, V = ln.task_modes(Syx)
    a, w = np.array([0.03, -0.02]), np.array([0.01, 0.05])
    m = matched_initial_conditions(_aligned(a, w, U, V), Syx)
    np.testing.assert_allclose(m["s"], [3.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(m["q0"], 0.5 * (a**2 + w**2), rtol=1e-12)
    np.testing.assert_allclose(m["r0"], a * w, rtol=1e-12)
    np.testing.assert_allclose(m["c0"], 0.5 * (0.5 * (a**2 + w**2) + a * w), rtol=1e-12)
    assert m["u"].shape == (2, 2) and m["v"].shape == (5, 2)


def test_aligned_start_follows_qr_full_path_to_integrator_accuracy():
    X, y, beta = ln.scalar_teacher(P=30, D=5, s=2.0, seed=0)
    _, Syx = ln.sufficient_statistics(X, y)
    s, U, V = ln.task_modes(Syx)
    weights = _aligned(np.array([0.02]), np.array([-0.005]), U, V)  # r0 < 0
    m = matched_initial_conditions(weights, Syx)
    assert m["r0"][0] < 0 < m["c0"][0]
    t = np.linspace(0.0, 8.0, 33)
    rtol = 1e-10
    traj = ln.gradient_flow(weights, X, y, t, record=("modes",), rtol=rtol, atol=1e-14)
    q, r = ln.qr_full_path(t, 2.0, m["q0"][0], m["r0"][0])
    # exact within the aligned subspace: the error is the integrator's, a few hundred rtol of s
    assert np.max(np.abs(traj.modes[:, 0] - r)) < 1e3 * rtol * 2.0


def _random_start_errors(sigma):
    X, y, _ = ln.scalar_teacher(P=40, D=8, s=2.0, seed=1)
    _, Syx = ln.sufficient_statistics(X, y)
    weights = ln.init_network((8, 30, 1), sigma, seed=3)
    m = matched_initial_conditions(weights, Syx)
    q0, r0, c0 = m["q0"][0], m["r0"][0], m["c0"][0]
    t = np.linspace(0.0, 2.0 * np.log(2.0 / q0), 41)   # through the escape, to convergence
    traj = ln.gradient_flow(weights, X, y, t, record=("modes", "weights"), rtol=1e-10, atol=1e-14)
    W1t, W2t = traj.weights_t
    u, v = m["u"][:, 0], m["v"][:, 0]
    q_sim = 0.5 * ((np.einsum("tcn,c->tn", W2t, u) ** 2).sum(1) + (np.einsum("tnd,d->tn", W1t, v) ** 2).sum(1))
    r_sim = traj.modes[:, 0]
    q, r = ln.qr_full_path(t, 2.0, q0, r0)
    err_qr = max(np.max(np.abs(r_sim - r)), np.max(np.abs(q_sim - q))) / 2.0
    err_c = np.max(np.abs(0.5 * (q_sim + r_sim) - ln.mode_strength(t, 2.0, c0, depth=2))) / 2.0
    return q0, err_qr, err_c


def test_random_start_matches_the_closed_forms_to_order_sigma_squared():
    q0a, qr_a, c_a = _random_start_errors(0.03)
    q0b, qr_b, c_b = _random_start_errors(0.01)
    # O(σ²) relative corrections, times the log(s/q0) length of phase I
    for q0, e_qr, e_c in ((q0a, qr_a, c_a), (q0b, qr_b, c_b)):
        bound = 0.15 * q0 * np.log(2.0 / q0)
        assert e_qr < bound and e_c < bound
    # and they shrink like σ² (σ ratio 3: factor 9 up to the log)
    assert qr_a / qr_b > 5.0 and c_a / c_b > 5.0


@pytest.mark.parametrize("bad, match", [
    ([np.ones((3, 2))], "two-layer"),
    ([np.ones((3, 2)), np.ones((1, 4))], "chain"),
    ([np.ones((3, 2)), np.ones((1, 3)) * np.nan], r"weights\[1\]"),
])
def test_bad_weights_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        matched_initial_conditions(bad, np.ones((1, 2)))


def test_bad_syx_raises():
    weights = [np.ones((3, 2)), np.ones((1, 3))]
    with pytest.raises(ValueError, match="Syx"):
        matched_initial_conditions(weights, np.ones((2, 2)))
    with pytest.raises(ValueError, match="Syx"):
        matched_initial_conditions(weights, np.zeros((1, 2)))


def test_exported():
    assert ln.matched_initial_conditions is matched_initial_conditions
