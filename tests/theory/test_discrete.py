"""The closed forms of the discrete step against independent computations: hand-written
gradient descent on explicit matrices (the mode map, the catapult map), direct matrix
powers (lazy GD), a second solver and the KKT conditions (the max-margin direction)."""
import warnings

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings, strategies as st

import linearnets as ln
from linearnets.theory.discrete import _max_margin

EPS = np.finfo(float).eps


@pytest.fixture(autouse=True)
def _numpy_warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with np.errstate(over="warn", divide="warn", invalid="warn"):
            yield


def _orthonormal(rng, n, k):
    return np.linalg.qr(rng.standard_normal((n, k)))[0]


# ------------------------------------------------------------------------------ the mode map

def _gd_balanced_deep(s, c0, L, lr, steps, seed=0, D=5, N=6, C=3, P=40):
    """GD on explicit (N_l, N_{l-1}) matrices, whitened data y = s u v^T x: the mode strength
    u^T W_L ... W_1 v at each step (the gradient from the P samples themselves)."""
    rng = np.random.default_rng(seed)
    X = ln.whitened_inputs(P, D, seed=seed)
    sizes = [D] + [N] * (L - 1) + [C]
    r = [_orthonormal(rng, n, 1)[:, 0] for n in sizes]
    u, v = r[-1], r[0]
    Y = s * np.outer(X @ v, u)
    a = c0 ** (1.0 / L)
    W = [a * np.outer(r[l + 1], r[l]) for l in range(L)]
    out = []
    for k in range(steps + 1):
        E2E = np.eye(D)
        for Wl in W:
            E2E = Wl @ E2E
        out.append(u @ E2E @ v)
        if k == steps:
            break
        R = X @ E2E.T - Y                        # residual (P, C); loss (1/2P) sum |R|^2
        G = R.T @ X / len(X)                     # dL/d(end-to-end)
        grads = []
        for l in range(L):
            left = np.eye(C)
            for Wj in W[l + 1:][::-1]:
                left = left @ Wj
            right = np.eye(D)
            for Wj in W[:l]:
                right = Wj @ right
            grads.append(left.T @ G @ right.T)
        W = [Wl - lr * g for Wl, g in zip(W, grads)]
    return np.array(out)


@pytest.mark.parametrize("L, lr", [(1, 0.3), (2, 0.1), (2, 0.9), (3, 0.2), (4, 0.35)])
def test_mode_map_against_gd_on_balanced_aligned_matrices(L, lr):
    s, c0, K = 1.5, 0.05, 40
    ref = _gd_balanced_deep(s, c0, L, lr, K, seed=L)
    got = ln.gd_mode_strength(np.arange(K + 1), s, c0, depth=L, lr=lr)
    # rounding of the matrix products, amplified at most by the map's derivative per step
    np.testing.assert_allclose(got, ref, rtol=1e-12 * K, atol=1e-14)


def test_mode_map_broadcasts_and_tends_to_the_flow():
    k = np.array([0, 3, 7])[:, None]
    s = np.array([1.0, 2.0])
    c = ln.gd_mode_strength(k, s, 0.1, depth=3, lr=0.05)
    assert c.shape == (3, 2)
    for j in range(2):
        np.testing.assert_allclose(c[:, j], ln.gd_mode_strength(k[:, 0], s[j], 0.1, 3, 0.05), rtol=0)
    assert np.all(c[0] == 0.1)                   # c_0 = c0 exactly
    # lr -> 0 at k lr = t: GD is Euler on the mode ODE, error O(lr)
    t = 2.0
    errs = []
    for lr in (1e-2, 1e-3):
        errs.append(abs(ln.gd_mode_strength(round(t / lr), 1.0, 0.1, 2, lr) - ln.mode_strength(t, 1.0, 0.1, 2)))
    assert 7 < errs[0] / errs[1] < 13


@pytest.mark.parametrize("L, s", [(1, 0.7), (2, 1.0), (2, 3.0), (3, 0.5), (5, 2.0)])
def test_threshold_is_the_fixed_point_derivative_and_brackets_convergence(L, s):
    thr = ln.gd_stability_threshold(s, depth=L)
    np.testing.assert_allclose(thr, 2.0 / (L * s ** (2 - 2.0 / L)), rtol=1e-15)
    # the derivative of the map at a* = s^(1/L), by central differences: -1 at lr*
    a = s ** (1.0 / L)
    h = 1e-6 * a

    def step(x):
        return x + thr * (s - x ** L) * x ** (L - 1)
    assert abs((step(a + h) - step(a - h)) / (2 * h) + 1.0) < 1e-6
    # from near the minimum: converges just below, oscillates just above
    c0 = s * (1 + 1e-3)
    below = ln.gd_mode_strength(20000, s, c0, depth=L, lr=0.98 * thr)
    above = ln.gd_mode_strength([20000, 20001], s, c0, depth=L, lr=1.02 * thr)
    assert abs(below - s) < 1e-10 * s
    assert np.all(np.abs(above - s) > 1e-3 * s)


def test_mode_map_divergence_is_inf_without_warnings():
    c = ln.gd_mode_strength([0, 5, 50, 51], 1.0, 4.0, depth=3, lr=5.0)
    assert c[0] == 4.0 and np.all(np.isinf(c[2:]))
    assert np.sign(c[2]) == -np.sign(c[3])        # odd L: a alternates in sign once it overflows
    c2 = ln.gd_mode_strength(60, 1.0, 4.0, depth=2, lr=5.0)
    assert c2 == np.inf
    assert ln.gd_stability_threshold(1e-300, 3) == np.inf
    assert ln.gd_stability_threshold(1e300, 3) == 0.0
    assert ln.gd_stability_threshold(1e300, 1) == 2.0


@pytest.mark.parametrize("kw, name", [(dict(k=-1), "k"), (dict(k=1.5), "k"), (dict(s=0.0), "s"),
                                      (dict(c0=-1.0), "c0"), (dict(lr=0.0), "lr"), (dict(depth=0), "depth"),
                                      (dict(s=np.nan), "s"), (dict(k=True), "k")])
def test_mode_map_bad_input(kw, name):
    args = dict(k=3, s=1.0, c0=0.1, depth=2, lr=0.1)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        ln.gd_mode_strength(**args)


# ------------------------------------------------------------------------------ the catapult

def _gd_two_layer(W1, W2, x, y, lr, steps):
    """GD on f = W2 W1 x, loss (f - y)^2 / 2, on the explicit matrices: f and the NTK
    |W1 x|^2 + |x|^2 |W2|^2 at every step."""
    fs, ntks = [], []
    for _k in range(steps + 1):
        h = W1 @ x
        f = (W2 @ h)[0]
        fs.append(f)
        ntks.append(h @ h + (x @ x) * (W2 @ W2.T)[0, 0])
        r = f - y
        W1, W2 = W1 - lr * r * np.outer(W2[0], x), W2 - lr * r * h[None, :]
    return np.array(fs), np.array(ntks)


@pytest.mark.parametrize("m, eta", [(1, 0.3), (1, 0.7)]                 # width 1 diverges above
                         + [(m, eta) for m in (3, 50, 2000) for eta in (0.7, 1.5, 2.6, 3.5)])
def test_catapult_map_is_gd_at_every_width(m, eta):
    rng = np.random.default_rng(m)
    D = 4
    x = rng.standard_normal(D)
    W1 = rng.standard_normal((m, D)) / np.sqrt(D)
    W2 = rng.standard_normal((1, m)) / np.sqrt(m)
    y = 0.3
    h = W1 @ x
    f0, ntk0 = (W2 @ h)[0], h @ h + (x @ x) * (W2 @ W2.T)[0, 0]
    lr = eta / ntk0
    K = 25
    f_ref, n_ref = _gd_two_layer(W1, W2, x, y, lr, K)
    f, ntk = ln.catapult_map(np.arange(K + 1), f0, ntk0, y, lr, x_sq=x @ x)
    # 1e-12 relative to the run's scale (f passes through 0; measured <= 4e-14 here)
    scale_f = np.abs(f_ref).max() + abs(y)
    assert np.all(np.isfinite(f_ref))
    np.testing.assert_allclose(f, f_ref, rtol=0, atol=1e-12 * scale_f)
    np.testing.assert_allclose(ntk, n_ref, rtol=1e-12)


def test_catapult_phases_at_large_width():
    # x_sq plays 1/n: eps = lr^2 x_sq f^2 -> 0
    lam0, f0, y = 1.0, 0.5, 0.0
    res = {}
    for eta in (1.5, 2.5, 3.5, 4.5):
        f, ntk = ln.catapult_map([0, 4000], f0, lam0, y, eta / lam0, x_sq=1e-6)
        res[eta] = (f[-1], ntk[-1])
    assert abs(res[1.5][0]) < 1e-12 and abs(res[1.5][1] - lam0) < 1e-5      # lazy: NTK unchanged
    for eta in (2.5, 3.5):                                                   # catapult: NTK < 2/lr
        assert abs(res[eta][0]) < 1e-10 and res[eta][1] < 2.0 / (eta / lam0)
    assert res[4.5][1] == np.inf                                             # divergence


def test_catapult_map_keeps_the_domain_and_broadcasts():
    f, ntk = ln.catapult_map(np.array([5, 0, 2]), [0.2, -0.4], 1.5, 0.1, 0.5, x_sq=2.0)
    assert f.shape == ntk.shape == (3, 2)
    assert np.all(f[1] == [0.2, -0.4]) and np.all(ntk[1] == 1.5)
    assert np.all(ntk >= 2 * np.sqrt(2.0) * np.abs(f) * (1 - 1e-12))
    with pytest.raises(ValueError, match="ntk0"):
        ln.catapult_map(3, 1.0, 1.0, 0.0, 0.1, x_sq=1.0)                   # 1 < 2 sqrt(1) |1|
    for kw, name in [(dict(lr=0.0), "lr"), (dict(x_sq=-1.0), "x_sq"), (dict(steps=-2), "steps"),
                     (dict(f0=np.inf), "f0"), (dict(steps=[[1]]), "steps")]:
        args = dict(steps=3, f0=0.1, ntk0=1.0, y=0.0, lr=0.1, x_sq=1.0)
        args.update(kw)
        with pytest.raises(ValueError, match=name):
            ln.catapult_map(**args)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.05, 3.9), st.floats(-2, 2), st.floats(1e-4, 2), st.floats(-1, 1))
def test_catapult_map_preserves_the_two_layer_bound(eta, f0, x_sq, y):
    lam0 = 2 * np.sqrt(x_sq) * abs(f0) + 0.5
    f, ntk = ln.catapult_map(np.arange(60), f0, lam0, y, eta / lam0, x_sq=x_sq)
    ok = np.isfinite(f) & np.isfinite(ntk)
    assert np.all(ntk[ok] >= 2 * np.sqrt(x_sq) * np.abs(f[ok]) - 1e-9 * (ntk[ok] + 1))
    assert not np.any(np.isnan(f)) and not np.any(np.isnan(ntk))


# ------------------------------------------------------------------------------ lazy GD

def _kernels(rng, P, Q, rank):
    A = rng.standard_normal((P + Q, rank))
    Kall = A @ A.T
    return Kall[:P, :P], Kall[P:, :P]


@pytest.mark.parametrize("C", [1, 2])
def test_lazy_gd_against_matrix_powers_and_the_step_loop(C):
    rng = np.random.default_rng(C)
    P, Q = 6, 3
    K, Kq = _kernels(rng, P, Q, rank=4)                   # singular K_train
    if C == 2:
        B = np.array([[1.0, 0.3], [0.3, 0.5]])           # (P, P, C, C) kernels K(x, x') B
        K4, Kq4 = np.einsum("ij,ab->ijab", K, B), np.einsum("ij,ab->ijab", Kq, B)
        Kf = np.kron(K, B)
        Kqf = np.kron(Kq, B)
    else:
        K4, Kq4, Kf, Kqf = K, Kq, K, Kq
    Y, F0, F0q = rng.standard_normal((P, C)), rng.standard_normal((P, C)), rng.standard_normal((Q, C))
    lr, alpha = 0.8, 1.3
    c = lr / (alpha ** 2 * P)
    steps = np.array([0, 1, 4, 30, 200])
    Ftr, Fte = ln.lazy_prediction_gd(steps, K4, Kq4, Y, F0, F0q, lr=lr, alpha=alpha)
    assert Ftr.shape == (5, P, C) and Fte.shape == (5, Q, C)
    I = np.eye(P * C)
    for i, k in enumerate(steps):
        ref = Y.ravel() + np.linalg.matrix_power(I - c * Kf, k) @ (F0 - Y).ravel()
        np.testing.assert_allclose(Ftr[i].ravel(), ref, rtol=0, atol=1e-12 * max(k, 1) * np.abs(F0 - Y).max())
    # the step loop itself, on training and test points together
    ftr, fte = F0.ravel().copy(), F0q.ravel().copy()
    for k in range(steps[-1] + 1):
        if k in steps:
            i = list(steps).index(k)
            scale = np.abs(fte).max() + np.abs(Y).max()
            np.testing.assert_allclose(Fte[i].ravel(), fte, rtol=0, atol=1e-12 * max(k, 1) * scale)
        resid = Y.ravel() - ftr
        ftr, fte = ftr + c * Kf @ resid, fte + c * Kqf @ resid


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 5.0), st.integers(20, 400))
def test_lazy_gd_tends_to_the_flow(seed, t, k):
    # |e^{-kx} - (1 - x)^k| <= k x^2 / 2 on 0 <= x <= 1, mode by mode
    rng = np.random.default_rng(seed)
    P = 5
    K, Kq = _kernels(rng, P, 2, rank=5)
    Y, F0 = rng.standard_normal(P), rng.standard_normal(P)
    lam_max = np.linalg.eigvalsh(K)[-1]
    lr = t / k
    c = lr / P
    if c * lam_max > 1:
        return
    gd, _ = ln.lazy_prediction_gd(k, K, Kq, Y, F0, lr=lr)
    flow, _ = ln.lazy_prediction(t, K, Kq, Y, F0, eta=1.0)
    bound = k * (c * lam_max) ** 2 / 2 * np.linalg.norm(Y - F0)
    assert np.linalg.norm(gd[0, :, 0] - flow[0, :, 0]) <= bound * (1 + 1e-9) + 1e-12


def test_lazy_gd_beyond_the_stability_limit_is_inf_not_nan():
    rng = np.random.default_rng(3)
    K, Kq = _kernels(rng, 4, 2, rank=4)
    lam_max = np.linalg.eigvalsh(K)[-1]
    lr = 2.5 * 2 * 4 / lam_max                             # c lam_max = 5: |1 - c lam| = 4
    Ftr, Fte = ln.lazy_prediction_gd([10, 2000], K, Kq, rng.standard_normal(4), lr=lr)
    assert np.all(np.isfinite(Ftr[0])) and np.all(np.isfinite(Fte[0]))
    assert np.all(np.isinf(Ftr[1])) and np.all(np.isinf(Fte[1]))
    # at the limit c lam = 2 the top mode flips sign each step and neither grows nor decays
    lr = 2 * 4 / lam_max
    Ftr, _ = ln.lazy_prediction_gd([1000, 1001], K, None, np.zeros(4), F0_train=np.ones(4), lr=lr)
    assert np.all(np.isfinite(Ftr))


def test_lazy_gd_bad_input():
    K = np.eye(3)
    with pytest.raises(ValueError, match="steps"):
        ln.lazy_prediction_gd(-1, K, None, np.ones(3))
    with pytest.raises(ValueError, match="lr"):
        ln.lazy_prediction_gd(1, K, None, np.ones(3), lr=0.0)
    with pytest.raises(ValueError, match="K_train"):
        ln.lazy_prediction_gd(1, -K, None, np.ones(3))
    with pytest.raises(ValueError, match="K_test_train"):
        ln.lazy_prediction_gd(1, K, np.ones((2, 4)), np.ones(3))


# ------------------------------------------------------------------------------ max margin

def _separable(rng, P, D, margin=0.2):
    w = rng.standard_normal(D)
    w /= np.linalg.norm(w)
    X = rng.standard_normal((P, D))
    y = np.sign(X @ w)
    X += (margin * y)[:, None] * w[None, :]
    return X, y


@pytest.mark.parametrize("seed, P, D", [(0, 10, 2), (1, 30, 5), (2, 8, 10), (3, 200, 3)])
def test_max_margin_kkt_and_a_second_solver(seed, P, D):
    rng = np.random.default_rng(seed)
    X, y = _separable(rng, P, D)
    w_hat = ln.max_margin_direction(X, y)
    assert abs(np.linalg.norm(w_hat) - 1) < 1e-15 * 4
    w, alpha = _max_margin(X, y)
    Z = y[:, None] * X
    m = Z @ w
    scale = np.abs(X).max() * np.linalg.norm(w)
    # KKT: feasibility, stationarity w = Z^T alpha, alpha >= 0, complementary slackness
    assert m.min() > 1 - 1e-10 * scale
    np.testing.assert_allclose(w, Z.T @ alpha, atol=1e-10 * np.linalg.norm(w))
    assert np.all(alpha >= 0)
    assert np.all(np.abs(alpha * (m - 1)) <= 1e-10 * scale * max(alpha.max(), 1))
    np.testing.assert_allclose(w_hat, w / np.linalg.norm(w), rtol=0, atol=1e-14)
    # a second solver: SLSQP on the primal min |w|^2 / 2 s.t. Z w >= 1
    res = scipy.optimize.minimize(lambda v: 0.5 * v @ v, w_hat * 3, jac=lambda v: v, method="SLSQP",
                                  constraints=[dict(type="ineq", fun=lambda v: Z @ v - 1, jac=lambda v: Z)],
                                  options=dict(ftol=1e-15, maxiter=500))
    np.testing.assert_allclose(res.x / np.linalg.norm(res.x), w_hat, atol=1e-7)


def test_max_margin_brute_force_in_the_plane():
    rng = np.random.default_rng(11)
    X, y = _separable(rng, 15, 2, margin=0.3)
    w_hat = ln.max_margin_direction(X, y)
    Z = y[:, None] * X

    def neg_margin(th):
        return -np.min(Z @ np.array([np.cos(th), np.sin(th)]))
    th = np.linspace(-np.pi, np.pi, 20001)
    best = th[np.argmin([neg_margin(t) for t in th])]
    res = scipy.optimize.minimize_scalar(neg_margin, bounds=(best - 1e-3, best + 1e-3), method="bounded",
                                         options=dict(xatol=1e-12))
    np.testing.assert_allclose(w_hat, [np.cos(res.x), np.sin(res.x)], atol=1e-8)
    assert np.min(Z @ w_hat) >= -neg_margin(res.x) - 1e-12


def test_max_margin_scale_invariance_and_bad_input():
    X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 0.5]])
    y = np.array([1.0, 1.0, -1.0])
    np.testing.assert_allclose(ln.max_margin_direction(X, y), [1.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(ln.max_margin_direction(X * 2.0 ** 600, y), [1.0, 0.0], atol=1e-15)
    with pytest.raises(ValueError, match="separable"):
        ln.max_margin_direction(np.array([[1.0, 0.0], [2.0, 0.0]]), [1, -1])
    with pytest.raises(ValueError, match="separable"):                      # XOR
        ln.max_margin_direction(np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]]), [1, 1, -1, -1])
    with pytest.raises(ValueError, match="separable"):                      # a zero sample
        ln.max_margin_direction(np.array([[1.0, 0.0], [0.0, 0.0]]), [1, 1])
    with pytest.raises(ValueError, match="y"):
        ln.max_margin_direction(X, [1, 0, -1])
    with pytest.raises(ValueError, match="y"):
        ln.max_margin_direction(X, [1, 1])
    with pytest.raises(ValueError, match="X"):
        ln.max_margin_direction(np.ones(3), [1, 1, 1])
