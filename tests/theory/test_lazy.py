"""lazy_prediction: the linearised model against expm / solve_ivp, and a centered wide network."""
import numpy as np
import pytest
import scipy.linalg
from scipy.integrate import solve_ivp

import linearnets as ln

RTOL = 1e-11


def _psd(rng, n, rank=None):
    A = rng.standard_normal((n, rank or n))
    return A @ A.T


def test_against_expm_one_output_and_test_points():
    rng = np.random.default_rng(0)
    P, Q = 7, 4
    A = rng.standard_normal((P + Q, 5))
    Kall = A @ A.T                                   # rank 5 < P: singular K_train
    K, Kq = Kall[:P, :P], Kall[P:, :P]
    Y, F0, F0q = rng.standard_normal(P), rng.standard_normal(P), rng.standard_normal(Q)
    t = np.array([0.0, 0.3, 2.0, 40.0])
    eta, alpha = 0.7, 1.9
    Ftr, Fte = ln.lazy_prediction(t, K, Kq, Y, F0, F0q, eta=eta, alpha=alpha)
    assert Ftr.shape == (4, P, 1) and Fte.shape == (4, Q, 1)
    c = eta / (alpha ** 2 * P)
    for k, tk in enumerate(t):
        ref = Y + scipy.linalg.expm(-c * K * tk) @ (F0 - Y)
        np.testing.assert_allclose(Ftr[k, :, 0], ref, atol=1e-10 * np.abs(Y - F0).max())
    # test points: integrate dF(x)/dt = c K(x, X)(Y - F(X)) with solve_ivp DOP853 (independent)
    def rhs(_, z):
        return np.concatenate([c * K @ (Y - z[:P]), c * Kq @ (Y - z[:P])])
    sol = solve_ivp(rhs, (0, t[-1]), np.concatenate([F0, F0q]), method="DOP853", t_eval=t,
                    rtol=RTOL, atol=1e-13)
    scale = np.abs(sol.y).max()
    np.testing.assert_allclose(Fte[:, :, 0], sol.y[P:].T, atol=100 * RTOL * scale)
    np.testing.assert_allclose(Ftr[:, :, 0], sol.y[:P].T, atol=100 * RTOL * scale)


def test_multi_output_layout_is_sample_major():
    rng = np.random.default_rng(1)
    P, Q, C = 5, 3, 2
    A = rng.standard_normal(((P + Q) * C, 6))
    Kf = A @ A.T
    K4 = Kf.reshape(P + Q, C, P + Q, C).transpose(0, 2, 1, 3)   # (P, P, C, C)
    Y = rng.standard_normal((P, C))
    t = np.linspace(0, 5, 6)
    Ftr, Fte = ln.lazy_prediction(t, K4[:P, :P], K4[P:, :P], Y)
    c = 1.0 / P
    Ktr, Kq = Kf[:P * C, :P * C], Kf[P * C:, :P * C]
    def rhs(_, z):
        return np.concatenate([c * Ktr @ (Y.ravel() - z[:P * C]), c * Kq @ (Y.ravel() - z[:P * C])])
    sol = solve_ivp(rhs, (0, 5), np.zeros((P + Q) * C), method="DOP853", t_eval=t, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(Ftr.reshape(6, -1), sol.y[:P * C].T, atol=1e-8)
    np.testing.assert_allclose(Fte.reshape(6, -1), sol.y[P * C:].T, atol=1e-8)


def test_finite_for_huge_t_and_null_space_is_t_linear():
    rng = np.random.default_rng(2)
    P = 6
    K = _psd(rng, P, rank=3)
    Kq = rng.standard_normal((2, 3)) @ np.linalg.qr(rng.standard_normal((P, 3)))[0].T  # arbitrary, partly off range
    Y = rng.standard_normal(P)
    Ftr, Fte = ln.lazy_prediction([1e300], K, Kq, Y)
    assert np.all(np.isfinite(Ftr)) and np.all(np.isfinite(Fte))
    # K = 0: nothing moves on the training set, test outputs grow linearly in tau
    t = np.array([1.0, 1e6])
    Ftr, Fte = ln.lazy_prediction(t, np.zeros((P, P)), Kq[:, :P] if Kq.shape[1] == P else np.ones((2, P)), Y)
    np.testing.assert_array_equal(Ftr[:, :, 0], 0.0)
    np.testing.assert_allclose(Fte[1] / Fte[0], 1e6, rtol=1e-12)
    # the tiny-eigenvalue branch: K = eps I, tau eps ~ 1e-12 uses the series, matches t/P * eps * K
    Ftr, Fte = ln.lazy_prediction([1.0], 1e-12 * np.eye(P), np.ones((1, P)), Y)
    np.testing.assert_allclose(Fte[0, 0, 0], np.sum(Y) / P, rtol=1e-10)


def test_bad_input():
    K = np.eye(3)
    Y = np.ones(3)
    with pytest.raises(ValueError, match="t"):
        ln.lazy_prediction([-1.0], K, None, Y)
    with pytest.raises(ValueError, match="symmetric"):
        ln.lazy_prediction([1.0], np.triu(np.ones((3, 3))), None, Y)
    with pytest.raises(ValueError, match="semidefinite"):
        ln.lazy_prediction([1.0], -K, None, Y)
    with pytest.raises(ValueError, match="Y"):
        ln.lazy_prediction([1.0], K, None, np.ones(4))
    with pytest.raises(ValueError, match="K_test_train"):
        ln.lazy_prediction([1.0], K, np.ones((2, 4)), Y)
    with pytest.raises(ValueError, match="alpha"):
        ln.lazy_prediction([1.0], K, None, Y, alpha=0.0)
    assert ln.lazy_prediction([1.0], K, None, Y)[1] is None


def _centered_linear_flow(W1, W2, X, Y, t, alpha, Xq, eta=1.0):
    """F = alpha (f - f0) for f = W2 W1 x, loss (1/(alpha^2 P)) sum 1/2 |y - F|^2, by solve_ivp;
    returns F on the training and on the test inputs."""
    P = len(X)
    W0 = W2 @ W1
    n1 = W1.size

    def rhs(_, z):
        A, B = z[:n1].reshape(W1.shape), z[n1:].reshape(W2.shape)
        F = alpha * X @ (B @ A - W0).T
        G = (Y - F).T @ X / (alpha * P)             # -dL/dW for W = B A  (C, D)
        return np.concatenate([(eta * B.T @ G).ravel(), (eta * G @ A.T).ravel()])
    sol = solve_ivp(rhs, (0, t[-1]), np.concatenate([W1.ravel(), W2.ravel()]), method="DOP853",
                    t_eval=t, rtol=1e-11, atol=1e-13)
    dW = [alpha * (z[n1:].reshape(W2.shape) @ z[:n1].reshape(W1.shape) - W0) for z in sol.y.T]
    return np.array([X @ d.T for d in dW]), np.array([Xq @ d.T for d in dW])


def test_centered_wide_network_approaches_lazy_prediction_as_one_over_alpha():
    # P < D: the test outputs of the network and of its linearisation differ at every time,
    # by O(1/alpha) (the alpha dB dA x term of F = alpha (B A - B0 A0) x, with dA, dB ~ 1/alpha)
    rng = np.random.default_rng(3)
    P, Q, D, N, C = 4, 3, 6, 30, 1
    X, Xq = rng.standard_normal((P, D)), rng.standard_normal((Q, D))
    Y = rng.standard_normal((P, C))
    W1, W2 = ln.init_network((D, N, C), 1.0, seed=4)
    K, Kq = ln.empirical_ntk([W1, W2], X, X), ln.empirical_ntk([W1, W2], Xq, X)  # NTK of f; F's is alpha^2 K
    t = np.geomspace(0.1, 30.0, 6)
    dists = []
    alphas = np.array([4.0, 8.0, 16.0])
    for a in alphas:
        Ftr, Fte = ln.lazy_prediction(t, a ** 2 * K, a ** 2 * Kq, Y, alpha=a)
        Gtr, Gte = _centered_linear_flow(W1, W2, X, Y, t, a, Xq)
        dists.append(max(np.abs(Gtr - Ftr).max(), np.abs(Gte - Fte).max()) / np.abs(Y).max())
    dists = np.array(dists)
    slope = np.polyfit(np.log(alphas), np.log(dists), 1)[0]
    assert abs(slope + 1.0) < 0.1, (dists, slope)
    assert dists[0] < 1.0 / alphas[0]
