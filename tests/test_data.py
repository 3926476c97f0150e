"""Tests of the data helpers."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import linearnets as ln

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


# ------------------------------------------------------------------------------ digits

def _parity_by_hand(n_train, n_test, pca, split_seed):
    """The experiments' hand-written preparation (geiger.py before ln.load_digits): parity
    labels, a seeded permutation, per-pixel standardisation on the training set, PCA."""
    from sklearn.datasets import load_digits
    d = load_digits()
    X = d.data.astype(np.float64)
    y = np.where(d.target % 2 == 0, 1.0, -1.0)
    perm = np.random.default_rng(split_seed).permutation(len(y))
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    sd[sd == 0] = 1.0
    Xs = (X - mu) / sd
    _, _, Vt = np.linalg.svd(Xs[tr], full_matrices=False)
    Xs = Xs @ Vt[:pca].T
    Xs /= np.sqrt((Xs[tr] ** 2).sum(1).mean())
    Xs *= np.sqrt(pca)
    return Xs[tr], y[tr], Xs[te], y[te]


def test_load_digits_is_the_experiments_preparation():
    pytest.importorskip("sklearn")
    got = ln.load_digits(((0, 2, 4, 6, 8), (1, 3, 5, 7, 9)), 300, 200, pca=10, seed=3)
    # the same operations in the same order: the same bits (experiments' results unchanged)
    for a, b in zip(got, _parity_by_hand(300, 200, 10, 3)):
        np.testing.assert_array_equal(a, b)


def test_load_digits_two_classes_labels_split_and_standardisation():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits
    d = load_digits()
    raw = {tuple(x): t for x, t in zip(d.data, d.target)}
    Xtr, ytr, Xte, yte = ln.load_digits((3, 8), n_train=120, n_test=80, standardize=False, seed=1)
    assert Xtr.shape == (120, 64) and Xte.shape == (80, 64) and ytr.shape == (120,)
    # +1 is classes[0]; every image is one of those two digits; the sets are disjoint
    for X, y in ((Xtr, ytr), (Xte, yte)):
        assert [raw[tuple(x)] for x in X] == [3 if v == 1 else 8 for v in y]
    assert not {tuple(x) for x in Xtr} & {tuple(x) for x in Xte}
    Str, _, Ste, _ = ln.load_digits((3, 8), n_train=120, n_test=80, seed=1)
    # standardised with the training set's statistics: mean 0, std 1 (or 0 for a pixel that
    # is constant on it), to rounding of sums of 120 numbers of order 1
    assert np.abs(Str.mean(0)).max() <= 1e-13
    sd = Str.std(0)
    assert np.all((np.abs(sd - 1) <= 1e-13) | (sd == 0))
    mu, s = Xtr.mean(0), Xtr.std(0)
    np.testing.assert_allclose(Ste, (Xte - mu) / np.where(s == 0, 1, s), rtol=1e-15, atol=1e-14)
    C, _, _, _ = ln.load_digits((3, 8), n_train=120, n_test=80, standardize="center", seed=1)
    np.testing.assert_allclose(C, Xtr - mu, rtol=0, atol=1e-13)
    # the seed decides the split
    again = ln.load_digits((3, 8), n_train=120, n_test=80, standardize=False, seed=1)
    np.testing.assert_array_equal(again[0], Xtr)
    other = ln.load_digits((3, 8), n_train=120, n_test=80, standardize=False, seed=2)
    assert not np.array_equal(other[0], Xtr)
    fresh = ln.load_digits((3, 8), n_train=120, n_test=80, seed=None)
    assert fresh[0].shape == (120, 64)


def test_load_digits_sizes_labels_and_pca():
    pytest.importorskip("sklearn")
    Xtr, ytr, Xte, yte = ln.load_digits((0, 1, 2))                  # a fifth test
    n = len(ytr) + len(yte)
    assert len(yte) == n // 5 and set(ytr) == {0, 1, 2} and ytr.dtype == np.int64
    _, ytr, _, _ = ln.load_digits((0, 1, 2), n_train=50, labels="onehot")
    assert ytr.shape == (50, 3) and np.all(ytr.sum(1) == 1)
    Xtr, _, Xte, _ = ln.load_digits(None, n_train=1000, n_test=797, pca=7)
    assert Xtr.shape == (1000, 7) and Xte.shape == (797, 7)
    assert abs((Xtr ** 2).sum(1).mean() - 7) <= 1e-12 * 7
    _, _, Xte, _ = ln.load_digits((0, 1), n_train=300)              # the rest test
    assert Xte.shape[0] == 360 - 300


@pytest.mark.parametrize("kw, arg", [
    (dict(classes=(3, 3)), "classes"), (dict(classes="abc"), "classes"),
    (dict(classes=(1, 11)), "classes"), (dict(classes=(1,)), "classes"),
    (dict(classes=((1, 2), (2, 3))), "classes"), (dict(classes=None, labels="pm1"), "labels"),
    (dict(n_train=400), "n_train"), (dict(n_train=300, n_test=100), "n_train"),
    (dict(n_train=0), "n_train"), (dict(n_test=-1), "n_test"), (dict(pca=0), "pca"),
    (dict(pca=65), "pca"), (dict(standardize="yes"), "standardize"),
    (dict(labels="bogus"), "labels"), (dict(source="mnist"), "source"),
    (dict(seed=-1), "seed")])
def test_load_digits_bad_input_names_the_argument(kw, arg):
    pytest.importorskip("sklearn")
    with pytest.raises(ValueError, match=rf"^{arg}"):
        ln.load_digits(**kw)


def test_load_digits_mnist1d():
    try:
        import mnist1d  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"pip install .linearnets\[mnist1d\]."):
            ln.load_digits(source="mnist1d")
        return
    state = np.random.get_state()[1].copy()
    Xtr, ytr, Xte, yte = ln.load_digits((0, 1), n_train=200, n_test=100, source="mnist1d")
    assert Xtr.shape == (200, 40) and set(ytr) == {-1.0, 1.0}
    np.testing.assert_array_equal(np.random.get_state()[1], state)   # global state untouched
