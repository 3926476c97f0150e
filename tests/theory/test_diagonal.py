"""Diagonal linear networks: Woodworth's implicit bias against the simulated flow and the l2 / l1 limits."""
import numpy as np
import pytest
from scipy.optimize import linprog, minimize

import linearnets as ln
from linearnets.sim.models import get_model
from linearnets.sim.models.diagonal import DiagonalNet, diagonal_flow


def _task(P=5, D=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    b = np.zeros(D)
    b[:2] = [2.0, -1.5]
    return X, X @ b


def test_q_is_the_antiderivative_of_asinh():
    z = np.array([-30.0, -1.0, -1e-6, 0.0, 1e-9, 0.5, 4.0, 200.0])
    q = ln.diagonal_q(z)
    ref = 2 - np.sqrt(4 + z ** 2) + z * np.arcsinh(z / 2)
    np.testing.assert_allclose(q, ref, rtol=1e-12, atol=1e-15)
    assert q[3] == 0.0 and np.all(q >= 0)
    h = 1e-5
    np.testing.assert_allclose((ln.diagonal_q(z + h) - ln.diagonal_q(z - h)) / (2 * h), np.arcsinh(z / 2),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ln.diagonal_q(1e-4), 1e-8 / 4, rtol=1e-6)     # q ~ z^2/4 near 0


def test_implicit_bias_is_the_constrained_minimiser():
    X, y = _task()
    for alpha in (2.0, 0.3, 0.05):
        b = ln.diagonal_implicit_bias(X, y, alpha)
        np.testing.assert_allclose(X @ b, y, atol=1e-12)
        # KKT: grad Q = asinh(b / (2 alpha^2)) lies in the row space of X
        g = np.arcsinh(b / (2 * alpha ** 2))
        resid = g - np.linalg.pinv(X) @ (X @ g)
        assert np.linalg.norm(resid) < 1e-9 * np.linalg.norm(g)
        # an independent primal solve (SLSQP on the constrained problem) finds no lower value
        res = minimize(lambda v: ln.diagonal_potential(v, alpha), np.linalg.pinv(X) @ y, method="SLSQP",
                       constraints=[{"type": "eq", "fun": lambda v: X @ v - y}],
                       options={"ftol": 1e-14, "maxiter": 500})
        assert ln.diagonal_potential(b, alpha) <= ln.diagonal_potential(res.x, alpha) + 1e-9


def test_limits_l2_and_l1():
    X, y = _task()
    b2 = np.linalg.pinv(X) @ y
    b_big = ln.diagonal_implicit_bias(X, y, 100.0)
    # Q ~ |b|^2 / (4 alpha^2) + O(|b|^4 / alpha^6): relative distance to the min-norm O(|b|^2 / alpha^4)
    assert np.linalg.norm(b_big - b2) < 10 * np.linalg.norm(b2) ** 3 / 100.0 ** 4
    D = X.shape[1]
    lp = linprog(np.ones(2 * D), A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None))
    b1 = lp.x[:D] - lp.x[D:]
    l1 = [np.abs(ln.diagonal_implicit_bias(X, y, a)).sum() for a in (1.0, 1e-2, 1e-4, 1e-8)]
    assert np.all(np.diff(l1) < 0)                  # the l1 norm falls towards its minimum ...
    # ... with a relative gap of O(1/log(1/alpha^2)) (the 'rich' limit; Woodworth et al. 2020, Thm 2)
    l1_min = np.abs(b1).sum()
    assert 0 < (l1[-1] - l1_min) / l1_min < 1.0 / np.log(1e16)
    assert (l1[-2] - l1_min) / l1_min < 1.0 / np.log(1e8)


def test_flow_converges_to_the_implicit_bias_over_alpha():
    X, y = _task()
    L0 = 0.5 * y @ y / len(y)
    stop = 1e-16 * L0                               # residual 1e-8 of |y|: the limit to ~1e-7
    for alpha in (3.0, 0.3, 0.01):
        tr = diagonal_flow(X, y, [0.0, 1e4], alpha=alpha, stop_loss=stop, rtol=1e-10, max_steps=100000)
        assert tr.success, tr.message
        b = ln.diagonal_implicit_bias(X, y, alpha)
        assert np.abs(tr.end_to_end[-1, 0] - b).max() < 1e-6 * np.abs(b).max(), (alpha, np.abs(tr.end_to_end[-1, 0] - b).max())


def test_model_interface():
    X, y = _task(P=4, D=6)
    assert get_model("diagonal") is DiagonalNet
    from linearnets.sim.models import parse_options
    rng = np.random.default_rng(1)
    wp, wm = rng.random(6), rng.random(6)
    net = DiagonalNet([wp, wm], None, parse_options(2, eta=0.7)).prepare(X, y)
    state = net.y0.copy()
    # rhs is -eta dL/dtheta (central differences of the loss)
    h = 1e-6
    grad = np.array([(net.loss(state + h * e) - net.loss(state - h * e)) / (2 * h) for e in np.eye(12)])
    np.testing.assert_allclose(net.rhs(state), -0.7 * grad, rtol=1e-6, atol=1e-9)
    K = net.ntk(state, X, X)
    J = np.hstack([2 * X * wp, -2 * X * wm])        # d f / d (w+, w-)
    np.testing.assert_allclose(K, J @ J.T, rtol=1e-12)
    with pytest.raises(ValueError, match="alpha"):
        DiagonalNet([wp, wm], None, parse_options(2, alpha=2.0))
    with pytest.raises(ValueError, match="alpha and weights"):
        diagonal_flow(X, y, [1.0])
