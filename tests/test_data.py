"""Tests of the data helpers."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from linearnets.data import (partially_whitened, scalar_teacher, sufficient_statistics,
                             teacher_task, whitened_inputs)


@given(st.integers(1, 12), st.integers(0, 30), st.integers(0, 2**31 - 1))
def test_whitened_exact(D, extra, seed):
    P = D + extra
    X = whitened_inputs(P, D, seed=seed)
    assert X.shape == (P, D)
    assert np.allclose(X.T @ X / P, np.eye(D), atol=1e-13)


def test_whitened_reproducible_and_bad_input():
    assert np.array_equal(whitened_inputs(9, 3, seed=5), whitened_inputs(9, 3, seed=5))
    for args in [(2, 3), (0, 1), (5, 0), (5.5, 2), (-1, 1)]:
        with pytest.raises(ValueError):
            whitened_inputs(*args)


@pytest.mark.parametrize("whiten", [True, False])
def test_teacher_task(whiten):
    s = np.array([3.0, 1.0, 0.5])
    X, Y = teacher_task(40, 6, s, seed=1, whiten=whiten)
    assert X.shape == (40, 6) and Y.shape == (40, 3)
    Sxx, Syx = sufficient_statistics(X, Y)
    # Y = X B^T exactly, so Syx = B Sxx; B has the requested singular values
    B = np.linalg.lstsq(X, Y, rcond=None)[0].T
    assert np.allclose(Y, X @ B.T)
    assert np.allclose(np.linalg.svd(B, compute_uv=False), s)
    if whiten:
        assert np.allclose(Syx, B, atol=1e-13)
        assert np.allclose(np.linalg.svd(Syx, compute_uv=False), s)
    else:
        assert not np.allclose(Sxx, np.eye(6), atol=0.05)


def test_teacher_task_bad_input():
    for args in [(10, 2, [1.0, 1.0, 1.0]), (10, 3, [-1.0]), (10, 3, []), (10, 3, [np.nan]),
                 (2, 3, [1.0])]:
        with pytest.raises(ValueError):
            teacher_task(*args)


def test_scalar_teacher():
    X, y, beta = scalar_teacher(30, 4, 2.5, seed=2)
    assert y.shape == (30,) and beta.shape == (4,)
    assert np.isclose(np.linalg.norm(beta), 1.0)
    Sxx, Syx = sufficient_statistics(X, y)
    assert np.allclose(Syx, 2.5 * beta[None, :])
    Xr, yr, br = scalar_teacher(30, 4, 2.5, seed=2, whiten=False)
    assert np.allclose(yr, 2.5 * Xr @ br)
    with pytest.raises(ValueError):
        scalar_teacher(30, 4, -1.0)


@given(st.floats(0.0, 3.0), st.integers(0, 1000))
def test_partially_whitened(gamma, seed):
    X = np.random.default_rng(seed).standard_normal((12, 4)) * [1.0, 3.0, 0.2, 5.0]
    Xg = partially_whitened(X, gamma)
    S = np.linalg.svd(X, compute_uv=False)
    assert np.allclose(np.linalg.svd(Xg, compute_uv=False), np.sort(S ** gamma)[::-1])
    # same singular vectors: X_gamma^T X_gamma commutes with X^T X
    A, B = Xg.T @ Xg, X.T @ X
    assert np.allclose(A @ B, B @ A, atol=1e-9 * np.abs(A).max() * np.abs(B).max())


def test_partially_whitened_ends():
    X = np.random.default_rng(0).standard_normal((10, 3))
    assert np.allclose(partially_whitened(X, 1.0), X)
    X0 = partially_whitened(X, 0.0)
    assert np.allclose(X0.T @ X0, np.eye(3))
    with pytest.raises(ValueError):
        partially_whitened(X, -0.5)
    with pytest.raises(ValueError):
        partially_whitened(X[0], 1.0)


def test_sufficient_statistics():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((7, 3)), rng.standard_normal((7, 2))
    Sxx, Syx = sufficient_statistics(X, Y)
    assert np.allclose(Sxx, X.T @ X / 7) and np.allclose(Syx, Y.T @ X / 7)
    assert sufficient_statistics(X, Y[:, 0])[1].shape == (1, 3)
    with pytest.raises(ValueError):
        sufficient_statistics(X, Y[:5])
    with pytest.raises(ValueError):
        sufficient_statistics(X, np.full((7, 2), np.nan))


def test_partially_whitened_keeps_rounding_level_directions_at_zero():
    # a rank-2 matrix in 5 columns: its SVD has 3 singular values at rounding level,
    # which gamma = 0 must not lift to 1
    rng = np.random.default_rng(3)
    X = rng.standard_normal((8, 2)) @ rng.standard_normal((2, 5))
    X0 = partially_whitened(X, 0.0)
    s = np.linalg.svd(X0, compute_uv=False)
    assert np.allclose(s[:2], 1.0, atol=1e-12)
    assert np.all(s[2:] < 1e-12)
    # its rows span the same space as X's
    assert np.allclose(X0 @ np.linalg.pinv(X) @ X, X0, atol=1e-12)
