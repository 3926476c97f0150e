"""The classification losses (logistic, cross entropy) of the MLP, numpy and numba: values
against an independent formula, gradients and Hessian-vector products against finite
differences, flows on both backends, the margin stop, label validation."""
import numpy as np
import pytest
from scipy.special import log_softmax

import linearnets as ln
from linearnets.sim.models import get_model, parse_options
from linearnets.network import init_network

LOSSES = ["logistic", "cross_entropy", ("soft_hinge", 3.0), "mse"]


def _problem(loss, P=12, D=3, N=5, seed=0, soft=False):
    rng = np.random.default_rng(seed)
    C = 3 if loss == "cross_entropy" else 1
    ws = init_network((D, N, N, C), 1.0, seed=seed + 1)
    bs = [0.3 * rng.standard_normal(N), 0.3 * rng.standard_normal(N)]
    X = rng.standard_normal((P, D))
    if loss == "cross_entropy":
        Y = rng.dirichlet(np.ones(C), P) if soft else np.eye(C)[rng.integers(0, C, P)]
    elif loss == "mse":
        Y = rng.standard_normal((P, 1))
    else:
        Y = np.sign(rng.standard_normal((P, 1)))
    return ws, bs, X, Y


def _reference_loss(loss, F, Y, alpha):
    # independent: log-softmax from scipy, logaddexp for the logistic
    P = F.shape[0]
    if loss == "cross_entropy":
        terms = -np.sum(Y * log_softmax(F, axis=1))
    elif loss == "logistic":
        terms = np.sum(np.logaddexp(0.0, -Y * F))
    elif loss == "mse":
        terms = 0.5 * np.sum((Y - F) ** 2)
    else:
        b = loss[1]
        terms = np.sum(np.logaddexp(0.0, b * (1 - Y * F))) / b
    return terms / (alpha ** 2 * P)


def _model(loss, backend, ws, bs, X, Y, act="tanh", alpha=2.0, centered=True):
    opts = parse_options(3, activation=act, loss=loss, alpha=alpha, centered=centered,
                         multipliers=(1.0, 0.7, 1.3))
    cls = get_model("mlp")
    cls = cls.numba_model if backend == "numba" else cls
    return cls(ws, bs, opts).prepare(X, Y)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("loss", LOSSES)
def test_loss_and_gradient_against_finite_differences(loss, backend):
    """The loss equals an independent formula (1e-13 relative); the gradient equals central
    differences of the loss (step 1e-5: truncation ~1e-10 of the gradient's scale)."""
    for soft in ((False, True) if loss == "cross_entropy" else (False,)):
        ws, bs, X, Y = _problem(loss, soft=soft)
        net = _model(loss, backend, ws, bs, X, Y)
        ref_net = _model(loss, "numpy", ws, bs, X, Y)
        rng = np.random.default_rng(5)
        y = net.y0 + 0.2 * rng.standard_normal(net.y0.size)
        F = ref_net.outputs(y, X)
        ref = _reference_loss(loss, F, Y, 2.0)
        assert abs(net.loss(y) - ref) <= 1e-13 * abs(ref)
        g = net.gradient(y)
        eps = 1e-5
        fd = np.empty_like(g)
        for i in range(y.size):
            e = np.zeros_like(y)
            e[i] = eps
            fd[i] = (net.loss(y + e) - net.loss(y - e)) / (2 * eps)
        scale = np.max(np.abs(g))
        assert np.max(np.abs(g - fd)) <= 1e-8 * scale, np.max(np.abs(g - fd)) / scale


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("act", ["tanh", ("softplus", 2.0), "linear"])
def test_jvp_against_finite_differences_of_the_gradient(loss, act):
    """The R-op (``jvp``, the Hessian of the loss along v for eta = 1) against central
    differences of the exact gradient: O(eps^2) relative, eps = 1e-5."""
    ws, bs, X, Y = _problem(loss, soft=True)
    net = _model(loss, "numpy", ws, bs, X, Y, act=act)
    rng = np.random.default_rng(2)
    y = net.y0 + 0.2 * rng.standard_normal(net.y0.size)
    v = rng.standard_normal(y.size)
    eps = 1e-5
    fd = (net.rhs(y + eps * v) - net.rhs(y - eps * v)) / (2 * eps)
    jv = net.jvp(y, v)
    assert np.max(np.abs(jv - fd)) <= 1e-8 * np.max(np.abs(jv))


@pytest.mark.parametrize("loss", ["logistic", "cross_entropy"])
def test_flow_numpy_and_numba_agree(loss):
    """A tanh MLP with biases on each backend at rtol 1e-10: within 1e-7 of the state's
    scale (the global error of two error-controlled runs of the same field)."""
    ws, bs, X, Y = _problem(loss)
    te = [0.0, 1.0, 4.0]
    kw = dict(activation="tanh", biases=bs, loss=loss, rtol=1e-10, atol=1e-13, alpha=1.5,
              record=("weights", "outputs"))
    a = ln.gradient_flow(ws, X, Y, te, backend="numpy", **kw)
    b = ln.gradient_flow(ws, X, Y, te, backend="numba", **kw)
    assert a.success and b.success
    assert np.all(np.diff(a.loss) < 0)
    np.testing.assert_allclose(b.loss, a.loss, rtol=1e-7)
    for wa, wb in zip(a.weights_t, b.weights_t):
        assert np.max(np.abs(wa - wb)) <= 1e-7 * np.max(np.abs(wa))


def test_integer_labels_are_one_hot():
    ws, bs, X, Y = _problem("cross_entropy")
    labels = np.argmax(Y, axis=1)
    kw = dict(activation="tanh", loss="cross_entropy", backend="numpy")
    a = ln.gradient_flow(ws, X, Y, [0.0, 1.0], **kw)
    b = ln.gradient_flow(ws, X, labels, [0.0, 1.0], **kw)
    np.testing.assert_array_equal(a.loss, b.loss)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("loss", ["logistic", "cross_entropy"])
def test_margin_and_loss_stops(loss, backend):
    """Separable data: the run stops where the smallest margin reaches m (within the stop's
    tolerance), and where the loss reaches its value."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((20, 3))
    w = np.array([[1.0, -2.0, 0.5], [-1.0, 0.3, 1.0], [0.2, 1.0, -1.0]])
    if loss == "logistic":
        Y = np.sign(X @ w[0])
        ws = init_network((3, 6, 1), 0.5, seed=1)
    else:
        Y = np.argmax(X @ w.T, axis=1)
        ws = init_network((3, 6, 3), 0.5, seed=1)
    kw = dict(activation="tanh", loss=loss, backend=backend, record=("outputs",))
    tr = ln.gradient_flow(ws, X, Y, [0.0, 1e4], stop=("margin", 0.5), **kw)
    assert tr.success and tr.t_stop is not None
    F = tr.outputs[-1]
    if loss == "logistic":
        margins = Y * F[:, 0]
    else:
        Fy = F[np.arange(20), Y]
        Fo = np.where(np.eye(3)[Y] > 0, -np.inf, F).max(axis=1)
        margins = Fy - Fo
    assert abs(margins.min() - 0.5) <= 1e-6
    tr = ln.gradient_flow(ws, X, Y, [0.0, 1e4], stop=("loss", 0.05), **kw)
    assert tr.success and abs(tr.loss[-1] - 0.05) <= 1e-6


def test_linear_net_with_a_classification_loss_runs_on_samples():
    """activation 'linear' with the logistic loss: the MLP model (raw samples), the
    end-to-end map recorded; numpy and numba agree."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((15, 3))
    Y = np.sign(X[:, 0] + 0.1)
    ws = init_network((3, 4, 1), 0.3, seed=2)
    a = ln.gradient_flow(ws, X, Y, [0.0, 2.0], loss="logistic", backend="numpy")
    b = ln.gradient_flow(ws, X, Y, [0.0, 2.0], loss="logistic", backend="numba")
    assert a.success and b.success and a.end_to_end is not None
    np.testing.assert_allclose(b.end_to_end, a.end_to_end, rtol=1e-6)
    F = X @ a.end_to_end[-1].T
    assert abs(a.loss[-1] - np.mean(np.logaddexp(0, -Y * F[:, 0]))) <= 1e-12


@pytest.mark.parametrize("Y, loss, match", [
    (np.array([1.0, 2.0, -1.0]), "logistic", "Y"),
    (np.ones((3, 2)), "logistic", "loss"),
    (np.array([0, 1, 3]), "cross_entropy", "Y"),
    (np.array([0.5, 1, 2]), "cross_entropy", "Y"),
    (np.array([[0.5, 0.6, 0.0]] * 3), "cross_entropy", "Y"),
    (np.array([[-0.5, 1.5, 0.0]] * 3), "cross_entropy", "Y"),
    (np.array([[1.0, 0.0, 0.0]] * 3), "cross_entropy_c1", "loss"),
])
def test_bad_labels_raise(Y, loss, match):
    X = np.ones((3, 2))
    C = 1 if loss in ("logistic", "cross_entropy_c1") else 3
    if loss == "cross_entropy_c1":
        loss, Y = "cross_entropy", np.ones(3)
    ws = init_network((2, 3, C), 0.5)
    if loss == "logistic" and Y.ndim == 2:
        ws = init_network((2, 3, 2), 0.5)
    with pytest.raises(ValueError, match=match):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], loss=loss, activation="tanh")


def test_margin_stop_needs_hard_labels():
    ws, bs, X, Y = _problem("cross_entropy", soft=True)
    with pytest.raises(ValueError, match="hard labels"):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], loss="cross_entropy", stop="margin")
