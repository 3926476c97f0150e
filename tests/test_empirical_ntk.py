"""Tests of the empirical NTK."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from linearnets import empirical_ntk
from linearnets.network import init_network


def fd_ntk(ws, X1, X2, h=1e-6):
    """NTK from central finite-difference Jacobians of the outputs w.r.t. every parameter."""
    def f(params, X):
        Ws, o = [], 0
        for w in ws:
            Ws.append(params[o:o + w.size].reshape(w.shape))
            o += w.size
        W = Ws[-1]
        for w in Ws[-2::-1]:
            W = W @ w
        return (X @ W.T).ravel()  # sample-major: index p*C + i

    p0 = np.concatenate([w.ravel() for w in ws])

    def jac(X):
        J = np.empty((X.shape[0] * ws[-1].shape[0], p0.size))
        for k in range(p0.size):
            e = np.zeros_like(p0)
            e[k] = h
            J[:, k] = (f(p0 + e, X) - f(p0 - e, X)) / (2 * h)
        return J

    C = ws[-1].shape[0]
    K = jac(X1) @ jac(X2).T
    return K.reshape(X1.shape[0], C, X2.shape[0], C).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("sizes", [(3, 1), (3, 4, 1), (3, 4, 2, 2), (2, 3, 3, 3, 3)])
def test_matches_finite_differences(sizes):
    ws = init_network(sizes, 1.0, seed=1)
    rng = np.random.default_rng(2)
    X1, X2 = rng.standard_normal((4, sizes[0])), rng.standard_normal((3, sizes[0]))
    K = empirical_ntk(ws, X1, X2)
    ref = fd_ntk(ws, X1, X2)
    if sizes[-1] == 1:
        assert K.shape == (4, 3)
        ref = ref[:, :, 0, 0]
    else:
        assert K.shape == (4, 3, sizes[-1], sizes[-1])
    # central differences: O(h^2) truncation + O(eps/h) rounding ~ 1e-9
    assert np.allclose(K, ref, atol=1e-7 * np.abs(ref).max())


@given(st.integers(1, 4), st.integers(1, 3), st.integers(0, 1000))
def test_symmetric_psd(depth, C, seed):
    rng = np.random.default_rng(seed)
    sizes = (3,) + tuple(rng.integers(1, 5, depth - 1)) + (C,)
    ws = init_network(sizes, 1.0, seed=seed)
    X = rng.standard_normal((5, 3))
    K = empirical_ntk(ws, X, X)
    M = K if C == 1 else K.transpose(0, 2, 1, 3).reshape(5 * C, 5 * C)
    assert np.allclose(M, M.T, atol=1e-12 * np.abs(M).max())
    assert np.linalg.eigvalsh(M).min() >= -1e-10 * np.abs(M).max()


def test_depth_one_is_gram_and_cross_consistency():
    rng = np.random.default_rng(0)
    X1, X2 = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))
    assert np.allclose(empirical_ntk([rng.standard_normal((1, 3))], X1, X2), X1 @ X2.T)
    ws = init_network((3, 5, 2), 1.0)
    Kfull = empirical_ntk(ws, np.vstack([X1, X2]), np.vstack([X1, X2]))
    assert np.allclose(empirical_ntk(ws, X1, X2), Kfull[:4, 4:])


def test_bad_input():
    ws = init_network((3, 4, 1), 1.0)
    X = np.ones((2, 3))
    with pytest.raises(ValueError):
        empirical_ntk(ws, X[:, :2], X)
    with pytest.raises(ValueError):
        empirical_ntk(ws, X, np.full((2, 3), np.nan))
    with pytest.raises(ValueError):
        empirical_ntk([], X, X)
