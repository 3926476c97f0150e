"""Intermediate-layer kernels: closed form vs balanced weights, training-set identity, simulation."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import linearnets as ln
from linearnets.theory.intermediate import (
    intermediate_alignment,
    intermediate_feature_matrix,
    intermediate_kernel,
)


def _orth(rng, n, k):
    return np.linalg.qr(rng.standard_normal((n, k)))[0]


def _whitened(rng, P, D):
    X = rng.standard_normal((P, D))
    Q, _ = np.linalg.qr(X)
    return np.sqrt(P) * Q            # XᵀX = P I exactly


def _task(rng, C, D, s):
    U, V = _orth(rng, C, len(s)), _orth(rng, D, len(s))
    return U, V, (U * s) @ V.T


def test_layer_zero_and_last_layer():
    rng = np.random.default_rng(0)
    X1, X2 = rng.standard_normal((5, 4)), rng.standard_normal((3, 4))
    _, _, B = _task(rng, 2, 4, np.array([2.0, 0.5]))
    np.testing.assert_allclose(intermediate_kernel(X1, X2, B, 3, 0), X1 @ X2.T, rtol=1e-14)
    # the last layer is the learned function: K_L(x, x') = f(x)·f(x') with f = B x
    np.testing.assert_allclose(intermediate_kernel(X1, X2, B, 3, 3), (X1 @ B.T) @ (X2 @ B.T).T,
                               rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_matches_product_of_balanced_aligned_weights(depth):
    rng = np.random.default_rng(depth)
    D, C, N = 6, 3, 7
    s = np.array([3.0, 1.2, 0.4])
    U, V, B = _task(rng, C, D, s)
    R = [V] + [_orth(rng, N, 3) for _ in range(depth - 1)] + [U]
    Ws = [(R[l + 1] * s ** (1.0 / depth)) @ R[l].T for l in range(depth)]
    X1, X2 = rng.standard_normal((4, D)), rng.standard_normal((5, D))
    H = np.eye(D)
    for l in range(1, depth + 1):
        H = Ws[l - 1] @ H
        K = intermediate_kernel(X1, X2, B, depth, l)
        np.testing.assert_allclose(K, (X1 @ H.T) @ (X2 @ H.T).T, rtol=1e-11, atol=1e-12)


def test_training_set_identity_with_paper_form():
    """On XᵀX = P I: K_l(X, X) = P^{1−l/L} (Y Yᵀ)^{l/L} (the paper's (yyᵀ)^{l/L} up to scale)."""
    rng = np.random.default_rng(3)
    P, D, L = 12, 5, 4
    X = _whitened(rng, P, D)
    _, _, B = _task(rng, 2, D, np.array([1.5, 0.7]))
    Y = X @ B.T
    for l in range(1, L + 1):
        ev, Q = np.linalg.eigh(Y @ Y.T)
        ev = np.where(ev > 1e-9 * ev[-1], ev, 0.0)     # PSD power of a rank-2 matrix
        ref = P ** (1 - l / L) * (Q * ev ** (l / L)) @ Q.T
        K = intermediate_kernel(X, X, B, L, l)
        np.testing.assert_allclose(K, ref, atol=1e-9 * np.max(np.abs(ref)))


@pytest.mark.parametrize("L", [2, 3, 6])
def test_alignment_formula_matches_direct_computation(L):
    rng = np.random.default_rng(L)
    P, D, C = 15, 6, 3
    s = np.array([2.0, 1.0, 0.3])
    X = _whitened(rng, P, D)
    _, _, B = _task(rng, C, D, s)
    Y = X @ B.T
    YY = Y @ Y.T
    for l in range(L + 1):
        K = intermediate_kernel(X, X, B, L, l)
        direct = np.sum(K * YY) / (np.linalg.norm(K) * np.linalg.norm(YY))
        np.testing.assert_allclose(intermediate_alignment(s, L, l, n=D), direct, rtol=1e-10)


def test_scalar_output_alignment_is_one():
    np.testing.assert_allclose(intermediate_alignment([0.7], 5, np.arange(1, 6)), 1.0)


@given(st.lists(st.floats(1e-3, 1e3), min_size=1, max_size=6), st.integers(1, 8),
       st.floats(1e-3, 1e3))
def test_alignment_properties(s, L, c):
    s = np.array(s)
    a = intermediate_alignment(s, L, np.arange(1, L + 1))
    assert np.all((a > 0) & (a <= 1))
    assert np.all(np.diff(a) >= -1e-12)          # deeper layers align better
    assert abs(a[-1] - 1) < 1e-12
    np.testing.assert_allclose(intermediate_alignment(c * s, L, np.arange(1, L + 1)), a, rtol=1e-10)
    # depends on (l, L) only through l/L
    np.testing.assert_allclose(intermediate_alignment(s, 2 * L, 2 * np.arange(1, L + 1)), a,
                               rtol=1e-12)
    assert intermediate_alignment(s, L, 0, n=len(s) + 3) <= a[0] + 1e-12


@pytest.mark.parametrize("call, match", [
    (lambda: intermediate_alignment([1.0, 0.0], 2, 1), "singular_values"),
    (lambda: intermediate_alignment([1.0], 0, 1), "depth"),
    (lambda: intermediate_alignment([1.0], 2, 3), "layer"),
    (lambda: intermediate_alignment([1.0], 2, 1.5), "layer"),
    (lambda: intermediate_alignment([1.0, 2.0], 2, 0), "n "),
    (lambda: intermediate_alignment([1.0, 2.0], 2, 0, n=1), "n must"),
    (lambda: intermediate_kernel(np.ones((2, 3)), np.ones((2, 3)), np.ones((1, 4)), 2, 1), "columns"),
    (lambda: intermediate_kernel(np.ones((2, 3)), np.ones((2, 3)), [np.nan, 1, 1], 2, 1), "finite"),
    (lambda: intermediate_feature_matrix(np.ones((1, 3)), 2, [1, 2]), "single"),
])
def test_domain_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_matches_trained_network_with_sigma_squared_error():
    """Deep network trained to convergence from small init: K_l errors O(σ²) (÷4 per halving)."""
    from linearnets.data import teacher_task
    P, D, C, L = 30, 5, 3, 3
    X, Y = teacher_task(P, D, [3.0, 1.5, 0.8], seed=2)
    B = Y.T @ X / P
    errs = []
    for sigma in (0.1, 0.05):
        ws = ln.init_network((D, 8, 8, C), sigma, seed=4)
        tr = ln.gradient_flow(ws, X, Y, [0.0, 2000.0], rtol=1e-10, atol=1e-14)
        assert tr.success and tr.loss[-1] < 1e-18
        H, e = np.eye(D), []
        for l in range(1, L + 1):
            H = tr.weights[l - 1] @ H
            Kt = intermediate_kernel(X, X, B, L, l)
            e.append(np.max(np.abs((X @ H.T) @ (X @ H.T).T - Kt)) / np.max(np.abs(Kt)))
        errs.append(e)
    errs = np.array(errs)
    assert np.all(errs[:, :-1] < 1.0 * np.array([[0.1], [0.05]]) ** 2)
    ratio = errs[0, :-1] / errs[1, :-1]
    assert np.all((ratio > 3.0) & (ratio < 5.0)), ratio
    assert np.all(errs[:, -1] < 1e-8)        # the last layer is the converged function itself
