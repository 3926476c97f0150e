"""Many outputs: aligned NTK along the path, mode dynamics, learning times, vs simulation."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy.integrate import solve_ivp

import linearnets as ln
from linearnets.data import teacher_task
from linearnets.theory.multimode import (
    aligned_ntk,
    mode_learning_times,
    multimode_dynamics,
    path_ntk,
    task_modes,
)

try:
    ln.mode_strength(0.0, 1.0, 0.1)
    HAVE_DYNAMICS = True
except NotImplementedError:
    HAVE_DYNAMICS = False
needs_dynamics = pytest.mark.skipif(not HAVE_DYNAMICS, reason="mode_strength not available yet")


def _orth(rng, n, k):
    return np.linalg.qr(rng.standard_normal((n, k)))[0]


def _balanced_weights(U, V, c, depth, width, rng):
    """W_l = R_l diag(c^{1/L}) R_{l-1}ᵀ with R_0 = V, R_L = U, random hidden frames."""
    r = len(c)
    R = [V] + [_orth(rng, width, r) for _ in range(depth - 1)] + [U]
    return [(R[l + 1] * c ** (1.0 / depth)) @ R[l].T for l in range(depth)]


def _task(seed, C=3, D=5, s=(2.5, 1.0)):
    rng = np.random.default_rng(seed)
    U, V = _orth(rng, C, len(s)), _orth(rng, D, len(s))
    return rng, (U * np.array(s)) @ V.T


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_aligned_ntk_matches_empirical_ntk_of_balanced_weights(depth):
    rng, Syx = _task(depth)                 # C = 3 > r = 2: an unused output direction
    s, U, V = task_modes(Syx)
    c = np.array([0.7, 0.05])
    ws = _balanced_weights(U, V, c, depth, 6, rng)
    X1, X2 = rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    K = aligned_ntk(X1, X2, Syx, c, depth)
    Ke = ln.empirical_ntk(ws, X1, X2)
    assert K.shape == (4, 3, 3, 3)
    np.testing.assert_allclose(K, Ke, atol=1e-12 * np.max(np.abs(Ke)))


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_aligned_ntk_at_target_is_final_ntk_multi(depth):
    rng, Syx = _task(10 + depth)
    s, _, _ = task_modes(Syx)
    X1, X2 = rng.standard_normal((4, 5)), rng.standard_normal((6, 5))
    np.testing.assert_allclose(aligned_ntk(X1, X2, Syx, s, depth),
                               ln.final_ntk_multi(X1, X2, Syx, depth), rtol=1e-12, atol=1e-12)


def test_aligned_ntk_vectorised_over_time():
    rng, Syx = _task(20)
    X = rng.standard_normal((3, 5))
    c = np.array([[0.1, 0.2], [1.0, 0.5], [2.5, 1.0]])
    K = aligned_ntk(X, X, Syx, c, 3)
    for k in range(3):
        np.testing.assert_allclose(K[k], aligned_ntk(X, X, Syx, c[k], 3), rtol=1e-14)


@needs_dynamics
def test_t0_and_t_infinity():
    rng, Syx = _task(30)
    X = rng.standard_normal((4, 5))
    c0 = np.array([1e-3, 2e-4])
    res = multimode_dynamics([0.0, 1e4], Syx, c0, depth=3)
    np.testing.assert_array_equal(res.c[0], c0)
    np.testing.assert_allclose(res.c[-1], res.s, rtol=1e-12)
    np.testing.assert_allclose(res.loss, [0.5 * np.sum((res.s - c0) ** 2), 0.0], atol=1e-20)
    np.testing.assert_allclose(res.end_to_end[-1], Syx, atol=1e-12)
    K = path_ntk([0.0, 1e4], X, X, Syx, c0, depth=3)
    np.testing.assert_allclose(K[0], aligned_ntk(X, X, Syx, c0, 3), rtol=1e-14)
    np.testing.assert_allclose(K[-1], ln.final_ntk_multi(X, X, Syx, 3), rtol=1e-10, atol=1e-12)


@needs_dynamics
@pytest.mark.parametrize("depth", [2, 3, 4])
def test_modes_match_solve_ivp(depth):
    s = np.array([3.0, 1.2, 0.4])
    c0 = np.array([1e-2, 3e-3, 1e-2])
    Syx = np.zeros((3, 4))
    Syx[[0, 1, 2], [0, 1, 2]] = s
    eta = 0.7
    t = np.linspace(0, 30, 31)
    sol = solve_ivp(lambda _, c: eta * depth * c ** (2 - 2 / depth) * (s - c), (0, 30), c0,
                    t_eval=t, method="DOP853", rtol=1e-12, atol=1e-14)
    res = multimode_dynamics(t, Syx, c0, depth, eta)
    np.testing.assert_allclose(res.c, sol.y.T, rtol=1e-8, atol=1e-12)


@needs_dynamics
def test_learning_times_and_order():
    s = np.array([0.5, 3.0, 1.5])
    mt = mode_learning_times(s, 1e-6, depth=3, eta=1.0)
    np.testing.assert_array_equal(mt.order, [1, 2, 0])
    # exact: c(t_α) = s_α/2
    np.testing.assert_allclose(ln.mode_strength(mt.times, s, 1e-6, depth=3), s / 2, rtol=1e-10)
    # t_α ∝ 1/s_α at a common c0 (depth >= 3), up to the O(c0^{(L-2)/L}) correction
    np.testing.assert_allclose(mt.times * s, (mt.times * s)[0], rtol=0.05)
    np.testing.assert_allclose(mt.plateau, 1e-6 ** (-1 / 3) / s, rtol=1e-12)
    m2 = mode_learning_times(s, 1e-8, depth=2, fraction=0.9)
    np.testing.assert_allclose(ln.mode_strength(m2.times, s, 1e-8), 0.9 * s, rtol=1e-10)


@needs_dynamics
@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=5), st.integers(2, 5),
       st.floats(1e-8, 1e-2))
def test_common_c0_learns_stronger_modes_first(s, depth, c0):
    s = np.array(s)
    mt = mode_learning_times(s, c0 * np.min(s), depth=depth)
    assert np.all(np.diff(s[mt.order]) <= 0)
    assert np.all(mt.times > 0) and np.all(np.isfinite(mt.times))


@needs_dynamics
@given(st.integers(1, 4), st.floats(1e-6, 0.5), st.floats(0.0, 50.0))
def test_path_ntk_properties(depth, c0, t):
    rng, Syx = _task(40)
    X = rng.standard_normal((4, 5))
    K = path_ntk(t, X, X, Syx, c0, depth=depth)
    flat = K.transpose(0, 2, 1, 3).reshape(12, 12)
    np.testing.assert_allclose(flat, flat.T, atol=1e-12 * np.max(np.abs(flat)))
    assert np.min(np.linalg.eigvalsh(flat)) >= -1e-10 * np.max(np.abs(flat))
    # the kernel only grows along the path (each c_α rises monotonically)
    K2 = path_ntk(t + 1.0, X, X, Syx, c0, depth=depth)
    d = (K2 - K).transpose(0, 2, 1, 3).reshape(12, 12)
    assert np.min(np.linalg.eigvalsh(d)) >= -1e-9 * np.max(np.abs(K2))


@needs_dynamics
@pytest.mark.parametrize("depth", [2, 3])
def test_balanced_aligned_simulation_follows_modes_and_path_ntk(depth):
    """Exactly balanced, aligned init: theory and gradient flow agree to integrator accuracy."""
    P, D = 30, 5
    s_true = np.array([2.0, 1.0, 0.5])
    X, Y = teacher_task(P, D, s_true, seed=3)
    Syx = Y.T @ X / P
    s, U, V = task_modes(Syx)
    c0 = np.array([1e-3, 5e-3, 2e-2])
    ws = _balanced_weights(U, V, c0, depth, 7, np.random.default_rng(0))
    t = np.linspace(0, 12, 13) if depth == 2 else np.linspace(0, 40, 11)
    Xp = np.random.default_rng(1).standard_normal((3, D))
    tr = ln.gradient_flow(ws, X, Y, t, rtol=1e-10, atol=1e-14, probe=Xp)
    assert tr.success
    c_sim = np.einsum("ia,tij,ja->ta", U, tr.end_to_end, V)
    res = multimode_dynamics(t, Syx, c0, depth)
    np.testing.assert_allclose(c_sim, res.c, rtol=1e-6, atol=1e-12)
    K = path_ntk(t, Xp, Xp, Syx, c0, depth)
    np.testing.assert_allclose(tr.ntk, K, rtol=1e-6, atol=1e-6 * np.max(np.abs(K)))
    np.testing.assert_allclose(tr.loss, res.loss, rtol=1e-6, atol=1e-12)


def _sim_half_times(X, Y, s, depth, sigma, T):
    ws = ln.init_network((X.shape[1],) + (20,) * (depth - 1) + (Y.shape[1],), sigma, seed=4)
    t = np.linspace(0, T, 4001)
    tr = ln.gradient_flow(ws, X, Y, t, rtol=1e-9, atol=1e-14)
    _, U, V = task_modes(Y.T @ X / X.shape[0])
    c = np.abs(np.einsum("ia,tij,ja->ta", U, tr.end_to_end, V))
    out = []
    for a in range(len(s)):
        k = np.flatnonzero(c[:, a] >= s[a] / 2)[0]
        out.append(t[k - 1] + (s[a] / 2 - c[k - 1, a]) * (t[k] - t[k - 1]) / (c[k, a] - c[k - 1, a]))
    return np.array(out)


@needs_dynamics
def test_random_small_init_two_layers_log_law():
    """L = 2: halving σ divides c0 by 4, delaying every mode by log(4)/(2ηs_α) = ln2/s_α."""
    s = np.array([3.0, 1.5, 0.7])
    X, Y = teacher_task(40, 6, s, seed=2)
    sig = [0.05, 0.025, 0.0125]
    h = [_sim_half_times(X, Y, s, 2, sg, 40 / s[-1]) for sg in sig]
    # the theory's delay, from the exact mode_time at tiny c0 (any c0 -> same limit)
    pred = (mode_learning_times(s, 1e-12 / 4).times - mode_learning_times(s, 1e-12).times)
    np.testing.assert_allclose(pred, np.log(2) / s, rtol=1e-10)
    dev1 = np.abs((h[1] - h[0]) / pred - 1)
    dev2 = np.abs((h[2] - h[1]) / pred - 1)
    assert np.all(dev1 < 0.02) and np.all(dev2 < dev1)
    assert np.all(np.argsort(h[-1]) == [0, 1, 2])           # strongest mode first


@needs_dynamics
def test_random_small_init_three_layers_power_law():
    """L = 3: t_α ∝ σ^{2-L} = 1/σ, so halving σ doubles t_α, up to O(σ^{L-2}) corrections."""
    s = np.array([3.0, 1.5, 0.7])
    X, Y = teacher_task(40, 6, s, seed=2)
    sig = [0.05, 0.025, 0.0125]
    h = [_sim_half_times(X, Y, s, 3, sg, 40 / s[-1] / sg) for sg in sig]
    for k in (1, 2):
        assert np.all(np.abs(h[k] / h[k - 1] - 2) < 3 * sig[k])
    assert np.all(np.argsort(h[-1]) == [0, 1, 2])


@pytest.mark.parametrize("call, match", [
    (lambda: aligned_ntk(np.eye(2), np.eye(2), [[1.0, 0.0]], [0.0], 2), "c must"),
    (lambda: aligned_ntk(np.eye(2), np.eye(2), [[1.0, 0.0]], [1.0, 1.0], 2), "last axis"),
    (lambda: aligned_ntk(np.eye(3), np.eye(3), [[1.0, 0.0]], [1.0], 2), "columns"),
    (lambda: aligned_ntk(np.eye(2), np.eye(2), [[0.0, 0.0]], [1.0], 2), "non-zero"),
    (lambda: aligned_ntk(np.eye(2), np.eye(2), [[1.0, 0.0]], [1.0], 0), "depth"),
    (lambda: task_modes([1.0, 2.0]), "dimension"),
])
def test_domain_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@needs_dynamics
@pytest.mark.parametrize("call, match", [
    (lambda: mode_learning_times([1.0, 2.0], [0.1, 0.2, 0.3]), "c0 must"),
    (lambda: mode_learning_times([1.0, 2.0], 0.6), "fraction"),
    (lambda: mode_learning_times([1.0], 0.1, fraction=1.0), "fraction must"),
    (lambda: mode_learning_times([[1.0]], 0.1), "1-D"),
    (lambda: multimode_dynamics(-1.0, [[1.0]], 0.1), "t must"),
    (lambda: multimode_dynamics(1.0, [[1.0]], -0.1), "c0 must"),
])
def test_dynamics_domain_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_finite_sigma_final_ntk_improves_on_sigma_to_zero_by_one_power():
    """Two layers, whitened: final_ntk errs by O(σ²), the corrected kernel by O(σ³)."""
    from linearnets.data import scalar_teacher
    from linearnets.theory.multimode import final_kernel_matrix_finite_sigma, final_ntk_finite_sigma
    P, D, N, s = 40, 6, 10, 1.5
    X, y, beta = scalar_teacher(P, D, s, seed=1)
    Xp = np.random.default_rng(0).standard_normal((5, D))
    e0, e1 = [], []
    sigmas = (0.1, 0.05, 0.025)
    for sigma in sigmas:
        ws = ln.init_network((D, N, 1), sigma, seed=3)
        tr = ln.gradient_flow(ws, X, y, [0.0, 200.0 / s], rtol=1e-11, atol=1e-16)
        assert tr.success and tr.loss[-1] < 1e-20
        K_sim = ln.empirical_ntk(list(tr.weights), Xp, Xp)
        K0 = ln.final_ntk(Xp, Xp, beta, s, 2)
        K1 = final_ntk_finite_sigma(Xp, Xp, ws[0], ws[1], beta, s)
        norm = np.linalg.norm(K0)
        e0.append(np.linalg.norm(K_sim - K0) / norm)
        e1.append(np.linalg.norm(K_sim - K1) / norm)
        M1 = final_kernel_matrix_finite_sigma(ws[0], ws[1], beta, s)
        np.testing.assert_allclose(K1, Xp @ M1 @ Xp.T, rtol=1e-13)
    e0, e1 = np.array(e0), np.array(e1)
    r0, r1 = e0[:-1] / e0[1:], e1[:-1] / e1[1:]
    assert np.all((r0 > 3.5) & (r0 < 4.5)), r0          # σ²
    assert np.all((r1 > 7.0) & (r1 < 9.0)), r1          # σ³
    assert np.all(e1 < 2.0 * np.array(sigmas) ** 3)


@given(st.integers(0, 2 ** 31 - 1), st.floats(1e-3, 0.5), st.floats(0.1, 10.0))
def test_finite_sigma_balance_equation(seed, sigma, s):
    """|a_∞|² = u² solves u² − s²/u² = δ, and the kernel tends to s(ββᵀ + I) as σ -> 0."""
    from linearnets.theory.multimode import final_kernel_matrix_finite_sigma
    rng = np.random.default_rng(seed)
    N, D = 5, 4
    W0, a0 = sigma * rng.standard_normal((N, D)) / 2, sigma * rng.standard_normal(N) / np.sqrt(N)
    beta = rng.standard_normal(D)
    beta /= np.linalg.norm(beta)
    M = final_kernel_matrix_finite_sigma(W0, a0, beta, s)
    v = a0 + W0 @ beta
    ah = v / np.linalg.norm(v)
    delta = ah @ (np.outer(a0, a0) - W0 @ W0.T) @ ah
    perp = np.linalg.qr(np.column_stack([beta, rng.standard_normal((D, D - 1))]))[0][:, 1:]
    np.testing.assert_allclose(M, M.T, atol=1e-14 * s)
    lo = np.linalg.eigvalsh(perp.T @ M @ perp)[0]
    assert lo >= 0
    bb = beta @ M @ beta            # = s²/u² + u²
    u2 = 0.5 * (delta + np.sqrt(delta ** 2 + 4 * s ** 2))
    np.testing.assert_allclose(bb, s ** 2 / u2 + u2, rtol=1e-12)
    np.testing.assert_allclose(u2 - s ** 2 / u2, delta, atol=1e-12 * s)
    assert np.linalg.norm(M - s * (np.eye(D) + np.outer(beta, beta))) <= 10 * sigma ** 2 * (1 + s)


def test_finite_sigma_domain_errors():
    from linearnets.theory.multimode import final_kernel_matrix_finite_sigma
    with pytest.raises(ValueError, match="unit"):
        final_kernel_matrix_finite_sigma(np.ones((2, 2)), [1.0, 0.0], [1.0, 1.0], 1.0)
    with pytest.raises(ValueError, match="w2"):
        final_kernel_matrix_finite_sigma(np.ones((2, 2)), [1.0, 0.0, 0.0], [1.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="nonzero"):
        final_kernel_matrix_finite_sigma(np.zeros((2, 2)), [0.0, 0.0], [1.0, 0.0], 1.0)
    with pytest.raises(ValueError, match="s must"):
        final_kernel_matrix_finite_sigma(np.ones((2, 2)), [1.0, 0.0], [1.0, 0.0], 0.0)
