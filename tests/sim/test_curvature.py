"""sharpness against a dense Hessian from finite differences of the exact gradient, its
record along gradient descent, and the modified flow of gradient descent (gd_lr)."""
import warnings

import numpy as np
import pytest

import linearnets as ln
from linearnets import curvature
from linearnets.sim.models import get_model, parse_options
from linearnets.network import init_network

ACTS = ["linear", "tanh", ("softplus", 2.0), "relu", ("leaky_relu", 0.1)]
LOSSES = ["mse", "logistic", "cross_entropy", "soft_hinge"]


def _problem(loss, sizes, P=10, seed=0, biases=True):
    rng = np.random.default_rng(seed)
    C = sizes[-1]
    X = rng.standard_normal((P, sizes[0]))
    if loss == "cross_entropy":
        Y = rng.integers(0, C, P)
    elif loss == "mse":
        Y = rng.standard_normal((P, C))
    else:
        Y = np.sign(rng.standard_normal(P))
    ws = init_network(sizes, 1.0, seed=seed + 1)
    bs = [0.3 * rng.standard_normal(n) for n in sizes[1:-1]] if biases else None
    return ws, bs, X, Y


def _dense_fd_hessian(ws, bs, X, Y, **kw):
    """Central differences (step 1e-6) of the exact (backpropagated) gradient, symmetrised:
    truncation ~1e-12 and rounding ~1e-10 of the Hessian's scale."""
    sizes = len(ws)
    Y2 = np.eye(ws[-1].shape[0])[Y] if kw.get("loss") == "cross_entropy" else Y
    net = get_model("mlp")(ws, bs, parse_options(sizes, **kw)).prepare(X, np.reshape(
        Y2, (X.shape[0], -1)))
    y0, n, eps = net.y0, net.y0.size, 1e-6
    H = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        H[:, i] = (net.gradient(y0 + e) - net.gradient(y0 - e)) / (2 * eps)
    return 0.5 * (H + H.T)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("loss", LOSSES)
def test_sharpness_against_dense_hessian(act, loss):
    """The 3 largest eigenvalues (dense path, n <= DENSE_MAX) against those of the
    finite-difference Hessian: 1e-9 of the spectrum's scale."""
    sizes = (3, 4, 3 if loss == "cross_entropy" else 1)
    ws, bs, X, Y = _problem(loss, sizes)
    kw = dict(activation=act, loss=loss, alpha=1.5)
    got = ln.sharpness(ws, X, Y, k=3, biases=bs, **kw)
    ref = np.linalg.eigvalsh(_dense_fd_hessian(ws, bs, X, Y, **kw))[::-1]
    scale = np.max(np.abs(ref))
    assert got.shape == (3,) and np.all(np.diff(got) <= 0)
    assert np.max(np.abs(got - ref[:3])) <= 1e-9 * scale, (got, ref[:3])


@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_lanczos_against_dense_hessian(act):
    """Above DENSE_MAX parameters (Lanczos on exact products): the 4 largest eigenvalues,
    1e-9 of the scale; with lr_scales those of Lambda H (an independent eigvals)."""
    sizes = (5, 8, 6, 2)
    ws, bs, X, Y = _problem("mse", sizes, P=20)
    n = sum(a * b for a, b in zip(sizes[1:], sizes[:-1])) + 14
    assert n > curvature.DENSE_MAX
    H = _dense_fd_hessian(ws, bs, X, Y, activation=act)
    ref = np.linalg.eigvalsh(H)[::-1]
    got = ln.sharpness(ws, X, Y, k=4, biases=bs, activation=act)
    assert np.max(np.abs(got - ref[:4])) <= 1e-9 * np.max(np.abs(ref))
    scales = (1.0, 0.5, 2.0)
    lam = np.concatenate([np.full(a * b, s) for a, b, s in zip(sizes[1:], sizes[:-1], scales)]
                         + [np.full(m, s) for m, s in zip(sizes[1:-1], scales)])
    ref = np.sort(np.linalg.eigvals(lam[:, None] * H).real)[::-1]
    got = ln.sharpness(ws, X, Y, k=2, biases=bs, activation=act, lr_scales=scales)
    assert np.max(np.abs(got - ref[:2])) <= 1e-9 * np.max(np.abs(ref))


def test_record_sharpness_along_descent():
    """record=("sharpness",): (T, k), each row the sharpness at the recorded weights."""
    ws, bs, X, Y = _problem("mse", (3, 5, 1), biases=False)
    tr = ln.gradient_descent(ws, X, Y, [0, 5, 30], 0.05, activation="tanh",
                             record=("sharpness", "weights"), sharpness_k=2)
    assert tr.sharpness.shape == (3, 2)
    for k in range(3):
        w = [a[k] for a in tr.weights_t]
        np.testing.assert_allclose(tr.sharpness[k], ln.sharpness(w, X, Y, k=2,
                                                                  activation="tanh"),
                                   rtol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_record_sharpness_along_the_flow(backend):
    """gradient_flow's record=("sharpness",): (T, 1), the top eigenvalue at each output (with
    lr_scales: of Lambda^(1/2) H Lambda^(1/2)), linear net and tanh MLP."""
    ws, bs, X, Y = _problem("mse", (3, 4, 4, 1), biases=False)
    for kw in (dict(), dict(activation="tanh", lr_scales=(1.0, 2.0, 0.5))):
        tr = ln.gradient_flow(ws, X, Y, [0.0, 0.5, 2.0], record=("sharpness", "weights"),
                              backend=backend, **kw)
        assert tr.success and tr.sharpness.shape == (3, 1)
        for k in range(3):
            w = [a[k] for a in tr.weights_t]
            np.testing.assert_allclose(tr.sharpness[k], ln.sharpness(w, X, Y, **kw),
                                       rtol=1e-12)


def test_sharpness_bad_input():
    ws, bs, X, Y = _problem("mse", (3, 2, 1), biases=False)
    with pytest.raises(ValueError, match="k"):
        ln.sharpness(ws, X, Y, k=0)
    with pytest.raises(ValueError, match="k"):
        ln.sharpness(ws, X, Y, k=100)
    with pytest.raises(ValueError, match="Y"):
        ln.sharpness(ws, X, Y, loss="logistic")


@pytest.mark.parametrize("case", ["tanh", "linear"])
def test_modified_flow_is_second_order(case):
    """|theta_GD(k) - theta_GF(k h)| = O(h) and |theta_GD(k) - theta_mod(k h)| = O(h^2)
    (Barrett & Dherin 2021) over 1.5 decades of h: slopes within 0.1 of 1 and 2 (a tanh
    MLP with a bias and per-layer rates; a deep linear net, the statistics model)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 3))
    Y = rng.standard_normal((16, 1))
    if case == "tanh":
        ws = init_network((3, 6, 1), 1.0, seed=1)
        kw = dict(activation="tanh", biases=[0.2 * rng.standard_normal(6)],
                  lr_scales=(1.0, 0.5))
    else:
        ws = init_network((3, 4, 4, 1), 0.8, seed=1)
        kw = dict(lr_scales=(1.0, 0.5, 2.0))
    T, hs = 1.0, np.array([0.04, 0.01, 0.0025, 0.00125])
    flow = dict(rtol=1e-12, atol=1e-14, record=("weights",), backend="numpy", **kw)

    def flat(tr):
        return np.concatenate([w[-1].ravel() for w in tr.weights_t] + list(tr.biases or ()))
    gf = flat(ln.gradient_flow(ws, X, Y, [0.0, T], **flow))
    e_gf, e_mod = [], []
    for h in hs:
        gd = flat(ln.gradient_descent(ws, X, Y, [round(T / h)], h, record=("weights",), **kw))
        mod = ln.gradient_flow(ws, X, Y, [0.0, T], gd_lr=h, **flow)
        assert mod.success
        e_gf.append(np.linalg.norm(gd - gf))
        e_mod.append(np.linalg.norm(gd - flat(mod)))
    s_gf = np.diff(np.log(e_gf)) / np.diff(np.log(hs))
    s_mod = np.diff(np.log(e_mod)) / np.diff(np.log(hs))
    assert np.all(np.abs(s_gf - 1.0) < 0.1), s_gf
    assert np.all(np.abs(s_mod - 2.0) < 0.1), s_mod


def test_gd_lr_bad_input():
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="gd_lr"):
        ln.gradient_flow(init_network((2, 2, 1), 0.5), X, np.ones(3), [0, 1], gd_lr=-0.1)


@pytest.mark.parametrize("width", [3, 40])        # the dense and the Lanczos path
def test_sharpness_beyond_the_float_range_is_inf(width):
    """Far out on a diverging run the Hessian's products overflow: +inf, no warning."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((6, 3)), rng.standard_normal(6)
    ws = [1e160 * rng.standard_normal((width, 3)), 1e160 * rng.standard_normal((1, width))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vals = ln.sharpness(ws, X, Y, k=2, activation="relu")
    assert vals.shape == (2,) and np.all(vals == np.inf)
