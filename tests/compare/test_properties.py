"""Property-based tests: the theory's predictions hold on randomly drawn simulations.

Every tolerance is a theory-predicted error times :data:`linearnets.compare.SAFETY`:
the integrator's error control where the theory is exact (balanced, task-aligned
initialisation), and the O(sigma^2) scale of the initial weights where it is
an asymptotic statement (random small initialisation).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import linearnets as ln
from linearnets.compare.common import RTOL, SAFETY, _balanced_aligned_init, _mode_projection

RTOL_SIM = 1e-10


def _sizes(D, widths, C):
    return (D,) + tuple(widths) + (C,)


@st.composite
def balanced_problems(draw, max_depth=5):
    L = draw(st.integers(1, max_depth))
    D = draw(st.integers(2, 6))
    C = draw(st.integers(1, min(3, D)))
    P = draw(st.integers(D, 2 * D))
    widths = [draw(st.integers(C, 7)) for _ in range(L - 1)]
    gaps = draw(st.lists(st.floats(0.3, 1.5), min_size=C, max_size=C))
    spectrum = np.cumsum(gaps)[::-1] + 0.2  # distinct, decreasing, >= 0.5
    sigma = draw(st.floats(0.2, 0.5))
    eta = draw(st.floats(0.5, 2.0))
    seed = draw(st.integers(0, 2 ** 16))
    return L, D, C, P, widths, spectrum, sigma, eta, seed


@settings(max_examples=12)
@given(balanced_problems())
def test_mode_strengths_and_loss_curve_exact_from_balanced_init(problem):
    """Balanced, task-aligned start: c_alpha(t) = mode_strength and loss = loss_curve exactly."""
    L, D, C, P, widths, spectrum, sigma, eta, seed = problem
    X, Y = ln.teacher_task(P, D, spectrum, seed=seed)
    _, Syx = ln.sufficient_statistics(X, Y)
    U, S, Vt = np.linalg.svd(Syx, full_matrices=False)
    c0 = np.full(C, sigma ** L)
    w0 = _balanced_aligned_init(_sizes(D, widths, C), U, Vt.T, c0, seed)
    c0 = _mode_projection(ln.end_to_end(w0)[None], U, S, Vt)[0]  # read back from the weights
    t = np.linspace(0.0, 1.5 * max(float(np.max(ln.half_time(S, np.minimum(c0, 0.49 * S), depth=L,
                                                                   eta=eta))), 0.0)
                    + 6.0 / (eta * S.min()), 60)
    traj = ln.gradient_flow(w0, X, Y, t, eta=eta, rtol=RTOL_SIM, atol=1e-14)
    c_sim = _mode_projection(traj.end_to_end, U, S, Vt)
    c_th = np.stack([ln.mode_strength(t, S[a], c0[a], depth=L, eta=eta) for a in range(C)], axis=1)
    # a local error RTOL_SIM is amplified at most by (s/c0)^{1-2/L} over the plateau
    amp = float(np.max((S / c0) ** max(0.0, 1.0 - 2.0 / L)))
    tol = SAFETY * len(t) * RTOL_SIM * amp * 100
    assert np.max(np.abs(c_sim - c_th) / S) <= tol
    loss_th = ln.loss_curve(t, S, c0, depth=L, eta=eta)
    assert np.max(np.abs(traj.loss - loss_th)) <= tol * float(np.sum(S ** 2))


@st.composite
def random_problems(draw, max_depth=5):
    L = draw(st.integers(1, max_depth))
    D = draw(st.integers(2, 6))
    C = draw(st.integers(1, 3))
    P = draw(st.integers(2, 12))
    widths = [draw(st.integers(1, 8)) for _ in range(L - 1)]
    sigma = draw(st.floats(0.05, 1.0))
    eta = draw(st.floats(0.2, 3.0))
    seed = draw(st.integers(0, 2 ** 16))
    return L, D, C, P, widths, sigma, eta, seed


@settings(max_examples=15)
@given(random_problems())
def test_conservation_laws_and_loss_decrease(problem):
    """W_{l+1}^T W_{l+1} - W_l W_l^T is conserved along any flow; the loss never increases."""
    L, D, C, P, widths, sigma, eta, seed = problem
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    Y = rng.standard_normal((P, C))
    w0 = ln.init_network(_sizes(D, widths, C), sigma, seed=seed)
    t = np.linspace(0.0, 5.0, 11)
    traj = ln.gradient_flow(w0, X, Y, t, eta=eta, rtol=RTOL_SIM, atol=1e-14, record=("weights",))
    assert np.all(np.diff(traj.loss) <= 1e-9 * traj.loss[0])
    for l in range(L - 1):
        G0 = w0[l + 1].T @ w0[l + 1] - w0[l] @ w0[l].T
        Wa, Wb = traj.weights_t[l], traj.weights_t[l + 1]
        scale = max(1.0, max(np.linalg.norm(Wa[k]) ** 2 + np.linalg.norm(Wb[k]) ** 2 for k in range(len(t))))
        for k in range(len(t)):
            Gk = Wb[k].T @ Wb[k] - Wa[k] @ Wa[k].T
            assert np.linalg.norm(Gk - G0) <= SAFETY * 1e3 * RTOL_SIM * scale


@st.composite
def small_init_problems(draw, max_depth=4):
    L = draw(st.integers(2, max_depth))
    D = draw(st.integers(2, 6))
    P = draw(st.integers(D, 2 * D))
    N = draw(st.integers(D, 10))
    s = draw(st.floats(0.5, 2.0))
    sigma = draw(st.floats(0.05, 0.12))
    eta = draw(st.floats(0.5, 2.0))
    seed = draw(st.integers(0, 2 ** 16))
    return L, D, P, N, s, sigma, eta, seed


def _train(w0, X, Y, eta, t_end):
    for _ in range(10):
        traj = ln.gradient_flow(w0, X, Y, np.linspace(0.0, t_end, 5), eta=eta, rtol=RTOL, atol=1e-14)
        if traj.loss[-1] <= 1e-14 * traj.loss[0]:
            return traj
        t_end *= 2.0
    raise AssertionError("did not converge")


@settings(max_examples=25)
@given(small_init_problems(max_depth=5))
def test_final_ntk_and_alignment_from_small_random_init(problem):
    """After training from small random init: final_ntk and final_alignment up to O(sigma^2)."""
    L, D, P, N, s, sigma, eta, seed = problem
    X, y, beta = ln.scalar_teacher(P, D, s, seed=seed)
    w0 = ln.init_network(_sizes(D, [N] * (L - 1), 1), sigma, seed=seed + 1)
    # the O(sigma^2) scale: initial squared operator norm against the learned s^{2/L}
    eps = max(np.linalg.norm(w, 2) ** 2 for w in w0) / s ** (2.0 / L)
    traj = _train(w0, X, y, eta, float(ln.half_time(s, 0.25 * sigma ** L, depth=L, eta=eta)) + 20.0 / (eta * s))
    K = ln.empirical_ntk(traj.weights, X, X)
    Kt = ln.final_ntk(X, X, beta, s, L)
    assert np.linalg.norm(K - Kt) / np.linalg.norm(Kt) <= SAFETY * eps
    assert abs(ln.kernel_alignment(K, y) - ln.final_alignment(L, min(P, D))) <= SAFETY * eps


@settings(max_examples=12)
@given(small_init_problems(max_depth=4), st.integers(2, 3))
def test_final_ntk_multi_from_small_random_init(problem, C):
    L, D, P, N, s, sigma, eta, seed = problem
    C = min(C, D)
    spectrum = s * np.linspace(1.0, 0.5, C) + np.arange(C)[::-1] * 0.3
    X, Y = ln.teacher_task(P, D, spectrum, seed=seed)
    _, Syx = ln.sufficient_statistics(X, Y)
    w0 = ln.init_network(_sizes(D, [N] * (L - 1), C), sigma, seed=seed + 1)
    eps = max(np.linalg.norm(w, 2) ** 2 for w in w0) / spectrum.min() ** (2.0 / L)
    t_end = float(ln.half_time(spectrum.min(), 0.25 * sigma ** L, depth=L, eta=eta)) + 20.0 / (eta * spectrum.min())
    traj = _train(w0, X, Y, eta, t_end)
    K = ln.empirical_ntk(traj.weights, X, X)
    Kt = ln.final_ntk_multi(X, X, Syx, L)
    assert np.linalg.norm(K - Kt) / np.linalg.norm(Kt) <= SAFETY * eps


@pytest.mark.slow
@settings(max_examples=60)
@given(small_init_problems(max_depth=5))
def test_final_ntk_larger_sample(problem):
    test_final_ntk_and_alignment_from_small_random_init.hypothesis.inner_test(problem)
