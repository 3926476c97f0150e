"""lambda_balanced_flow: the exact Riccati solution against gradient flow, its NTK, the initialiser."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.theory import balanced

RTOL = 1e-10


def _whitened_task(D, C, P, seed, rank=None):
    X = ln.whitened_inputs(P, D, seed=seed)
    rng = np.random.default_rng(seed + 1)
    Wt = rng.standard_normal((C, D))
    if rank is not None:
        U, s, Vt = np.linalg.svd(Wt)
        s[rank:] = 0.0
        Wt = (U[:, :len(s)] * s) @ Vt[:len(s)]
    Y = X @ Wt.T
    return X, Y


@pytest.mark.parametrize("lam,sizes", [(-2.0, (4, 3, 3)), (0.0, (4, 5, 3)), (2.0, (4, 3, 3)),
                                       (0.0, (3, 2, 1))])
def test_matches_gradient_flow(lam, sizes):
    D, N, C = sizes
    X, Y = _whitened_task(D, C, 20, seed=0)
    Syx = Y.T @ X / len(X)
    W1, W2 = ln.init_lambda_balanced(sizes, lam, 0.3, seed=2)
    assert abs(balanced.balance_lambda(W1, W2) - lam) < 1e-12
    t = np.concatenate([[0.0], np.geomspace(0.01, 60.0, 25)])
    W, A, B = ln.lambda_balanced_flow(t, W1, W2, Syx, eta=0.8)
    traj = ln.gradient_flow([W1, W2], X, Y, t, eta=0.8, rtol=RTOL, atol=1e-13, record=("weights",))
    W1t, W2t = traj.weights_t
    scale = max(1.0, np.abs(traj.end_to_end).max())
    # the integrator's global error is a modest multiple of rtol on this short, non-stiff run
    np.testing.assert_allclose(W, traj.end_to_end, atol=1e3 * RTOL * scale, rtol=0)
    np.testing.assert_allclose(A, np.einsum("tnd,tne->tde", W1t, W1t), atol=1e3 * RTOL * scale, rtol=0)
    np.testing.assert_allclose(B, np.einsum("tcn,tdn->tcd", W2t, W2t), atol=1e3 * RTOL * scale, rtol=0)
    # learning: the distance to Syx has fallen a hundredfold by the end
    assert np.linalg.norm(W[-1] - Syx) < 1e-2 * np.linalg.norm(W[0] - Syx)


def test_singular_F_and_large_t():
    # lambda = 0 with a rank-1 task on D = 3, C = 2: F has zero eigenvalues, and M keeps a
    # component on them that decays only like 1/t (no F^{-1} is formed)
    D, N, C = 3, 3, 2
    X, Y = _whitened_task(D, C, 12, seed=3, rank=1)
    Syx = Y.T @ X / len(X)
    W1, W2 = ln.init_lambda_balanced((D, N, C), 0.0, 0.2, seed=1)
    F = np.block([[np.zeros((D, D)), Syx.T], [Syx, np.zeros((C, C))]])
    assert np.min(np.abs(np.linalg.eigvalsh(F))) < 1e-12
    t = np.array([0.0, 0.5, 5.0, 50.0, 2e3])
    W, A, B = ln.lambda_balanced_flow(t, W1, W2, Syx)
    assert np.all(np.isfinite(W)) and np.all(np.isfinite(A)) and np.all(np.isfinite(B))
    traj = ln.gradient_flow([W1, W2], X, Y, t, rtol=RTOL, atol=1e-13)   # t_eval starts at 0
    np.testing.assert_allclose(W, traj.end_to_end, atol=1e3 * RTOL)
    # the null-space directions still relax (like 1/t): not yet at Syx, but close
    assert 1e-8 < np.abs(W[-1] - Syx).max() < 1e-2


def test_huge_t_is_stationary_and_finite():
    D, N, C = 4, 3, 3
    X, Y = _whitened_task(D, C, 12, seed=9)
    Syx = Y.T @ X / len(X)
    for lam in (-1.0, 0.0, 1.0):
        W1, W2 = ln.init_lambda_balanced((D, N, C), lam, 0.3, seed=1)
        W, A, B = ln.lambda_balanced_flow([1e3, 1e300], W1, W2, Syx)
        assert np.all(np.isfinite(W)) and np.all(np.isfinite(A)) and np.all(np.isfinite(B))
        np.testing.assert_allclose(W[1], W[0], atol=1e-12)
        np.testing.assert_allclose(W[1], Syx, atol=1e-10)       # full-rank task, N = C: learned


def test_ntk_matches_empirical_ntk():
    D, N, C = 4, 3, 3
    X, Y = _whitened_task(D, C, 16, seed=4)
    Syx = Y.T @ X / len(X)
    W1, W2 = ln.init_lambda_balanced((D, N, C), 1.0, 0.5, seed=5)
    t = np.array([0.0, 1.0, 4.0])                  # t_eval starts at 0
    K = ln.lambda_balanced_ntk(t, W1, W2, Syx, X[:5], X[5:9])
    traj = ln.gradient_flow([W1, W2], X, Y, t, rtol=RTOL, atol=1e-13, record=("weights",))
    for k in range(3):
        Ke = ln.empirical_ntk([w[k] for w in traj.weights_t], X[:5], X[5:9])
        np.testing.assert_allclose(K[k], Ke, atol=1e-7 * np.abs(Ke).max())
    # one output
    W1, W2 = ln.init_lambda_balanced((D, 1, 1), 0.5, 0.5, seed=6)
    K1 = ln.lambda_balanced_ntk([0.0], W1, W2, Syx[:1], X[:4])
    np.testing.assert_allclose(K1[0], ln.empirical_ntk([W1, W2], X[:4], X[:4]), atol=1e-12)


def test_ntk_drift_falls_as_one_over_lambda():
    # same initial function for every lambda; W1^T W1 ~ W^T W / lambda and W2 W2^T ~ lambda + W W^T / lambda,
    # so the kernel moves by O(1/lambda) while its size grows like lambda: relative drift O(1/lambda^2)
    D, N, C = 3, 3, 3
    X, Y = _whitened_task(D, C, 12, seed=7)
    Syx = Y.T @ X / len(X)
    lams = np.array([16.0, 32.0, 64.0, 128.0])      # corrections O(|Syx|^2 / lambda^2) to both slopes
    absolute, relative = [], []
    for lam in lams:
        W1, W2 = ln.init_lambda_balanced((D, N, C), lam, 0.3, seed=8)
        K = ln.lambda_balanced_ntk([0.0, 1e3], W1, W2, Syx, X)
        absolute.append(np.linalg.norm(K[1] - K[0]))
        relative.append(np.linalg.norm(K[1] - K[0]) / np.linalg.norm(K[0]))
    slope = np.polyfit(np.log(lams), np.log(absolute), 1)[0]
    assert abs(slope + 1.0) < 0.05, (absolute, slope)
    slope = np.polyfit(np.log(lams), np.log(relative), 1)[0]
    assert abs(slope + 2.0) < 0.05, (relative, slope)


def test_init_shapes_and_errors():
    for sizes, lam in [((5, 3, 4), 1.5), ((5, 3, 2), -1.0), ((2, 6, 3), 0.0), ((4, 4, 4), -0.5)]:
        W1, W2 = ln.init_lambda_balanced(sizes, lam, 0.4, seed=0)
        N = sizes[1]
        np.testing.assert_allclose(W2.T @ W2 - W1 @ W1.T, lam * np.eye(N), atol=1e-13)
    with pytest.raises(ValueError, match="N = 3 <= C = 2"):
        ln.init_lambda_balanced((5, 3, 2), 1.0, 0.1)
    with pytest.raises(ValueError, match="N = 3 <= D = 2"):
        ln.init_lambda_balanced((2, 3, 5), -1.0, 0.1)
    W1, W2 = ln.init_network((4, 3, 2), 0.5, seed=0)
    with pytest.raises(ValueError, match="W1, W2 are not lambda-balanced"):
        ln.lambda_balanced_flow([1.0], W1, W2, np.ones((2, 4)))
    W1, W2 = ln.init_lambda_balanced((4, 3, 3), 1.0, 0.5)
    with pytest.raises(ValueError, match="Syx"):
        ln.lambda_balanced_flow([1.0], W1, W2, np.ones((2, 4)))
    with pytest.raises(ValueError, match="t"):
        ln.lambda_balanced_flow([-1.0], W1, W2, np.ones((3, 4)))
