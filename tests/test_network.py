"""Tests of network initialisation, forward and end-to-end maps."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.network import check_weights, end_to_end, forward, init_balanced, init_network


def test_init_shapes_and_reproducibility():
    ws = init_network((7, 11, 5, 3), 0.4, seed=3)
    assert [w.shape for w in ws] == [(11, 7), (5, 11), (3, 5)]
    again = init_network((7, 11, 5, 3), 0.4, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(ws, again))
    other = init_network((7, 11, 5, 3), 0.4, seed=4)
    assert not np.array_equal(ws[0], other[0])
    assert all(w.dtype == np.float64 and w.flags.c_contiguous for w in ws)
    assert ln.init_network is init_network


def test_init_variance():
    # entries i.i.d. N(0, sigma^2/N_in): the sample variance of n entries has relative
    # standard deviation sqrt(2/n); allow 5 of them
    sigma = 0.7
    ws = init_network((200, 300, 100), sigma, seed=0)
    for w in ws:
        n = w.size
        var = np.mean(w ** 2) * w.shape[1] / sigma ** 2
        assert abs(var - 1) < 5 * np.sqrt(2 / n)
        assert abs(np.mean(w)) < 5 * sigma / np.sqrt(w.shape[1] * n)


def test_init_balanced():
    sizes = (6, 8, 4, 5, 3)
    sigma = 0.3
    ws = init_balanced(sizes, sigma, seed=1)
    for a, b in zip(ws[:-1], ws[1:]):
        assert np.allclose(b.T @ b, a @ a.T, atol=1e-14)
    sv = np.linalg.svd(end_to_end(ws), compute_uv=False)
    r = min(sizes)
    assert np.allclose(sv[:r], sigma ** 4) and np.allclose(sv[r:], 0, atol=1e-16)
    u = np.array([[0.6], [0.8], [0.0]])
    v = np.zeros((6, 1))
    v[2] = 1.0
    ws = init_balanced(sizes, sigma, seed=1, left=u, right=v)
    assert np.allclose(end_to_end(ws), sigma ** 4 * u @ v.T, atol=1e-16)
    with pytest.raises(ValueError):
        init_balanced(sizes, sigma, rank=5)
    with pytest.raises(ValueError):
        init_balanced(sizes, sigma, left=2 * u, right=v)


def test_forward_end_to_end():
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((4, 3)), rng.standard_normal((2, 4))]
    X = rng.standard_normal((5, 3))
    assert np.allclose(end_to_end(ws), ws[1] @ ws[0])
    assert np.allclose(forward(ws, X), X @ ws[0].T @ ws[1].T)
    assert np.array_equal(end_to_end([ws[0]]), ws[0])
    with pytest.raises(ValueError):
        forward(ws, X[:, :2])


@pytest.mark.parametrize("sizes,sigma", [((3,), 1.0), ((3, 0, 1), 1.0), ((3, 2.5), 1.0),
                                         ((3, 2), 0.0), ((3, 2), -1.0), ((3, 2), np.nan),
                                         (3, 1.0), ((3, True), 1.0)])
def test_init_bad_input(sizes, sigma):
    with pytest.raises(ValueError):
        init_network(sizes, sigma)


def test_check_weights():
    ws = [np.ones((2, 3)), np.ones((4, 2))]
    out = check_weights(ws)
    assert not any(np.shares_memory(a, b) for a, b in zip(out, ws))
    for bad in [[], [np.ones((2, 3)), np.ones((4, 3))], [np.ones(3)], [np.full((2, 2), np.inf)],
                None]:
        with pytest.raises(ValueError):
            check_weights(bad)
