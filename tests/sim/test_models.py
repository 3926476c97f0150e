"""The model interface: the MLP's gradient and NTK against finite differences for every
option, the linear model's mapping against the MLP with a linear activation, bad input."""
import itertools

import numpy as np
import pytest

import linearnets as ln
from linearnets.sim.models import Layout, get_model, model_names, parse_options, register_model
from linearnets.sim.models.base import Model
from linearnets.network import init_network

ACTS = ["linear", "relu", ("leaky_relu", 0.1), ("softplus", 2.0), "tanh"]


def _problem(C=1, seed=0, P=7, sizes=(3, 5, 4)):
    rng = np.random.default_rng(seed)
    ws = init_network(tuple(sizes) + (C,), 1.0, seed=seed + 1)
    X = rng.standard_normal((P, sizes[0]))
    Y = rng.standard_normal((P, C))
    bs = [0.3 * rng.standard_normal(n) for n in sizes[1:]]
    return ws, bs, X, Y, rng


def _away_from_kinks(net, rng, margin=1e-3):
    """A state near ``net.y0`` whose training pre-activations are all at least ``margin``
    from 0: finite differences of step 1e-5 then never straddle a kink of ReLU-type
    activations, where the loss has no derivative."""
    while True:
        y = net.y0 + 0.2 * rng.standard_normal(net.y0.size)
        _, Z, _ = net.forward(y, net.X, keep=True)
        if all(np.min(np.abs(z)) >= margin for z in Z):
            return y


def _fd_grad(f, y, eps=1e-5):
    g = np.empty_like(y)
    for i in range(y.size):
        e = np.zeros_like(y)
        e[i] = eps
        g[i] = (f(y + e) - f(y - e)) / (2 * eps)
    return g


def test_registry():
    assert {"mlp", "linear"} <= set(model_names())
    with pytest.raises(ValueError, match="model"):
        get_model("no such model")
    with pytest.raises(ValueError):
        register_model("bad", int)
    lay = Layout([(2, 3), (3,)])
    y = lay.pack([np.ones((2, 3)), np.arange(3.0)])
    assert lay.size == 9 and np.all(lay.unpack(y)[1] == np.arange(3.0))
    assert issubclass(get_model("mlp"), Model)


@pytest.mark.parametrize("act,with_b,alpha,centered,loss,mult,lrs", list(itertools.product(
    ACTS, (False, True), (1e-2, 1.0, 1e2), (False, True), ("mse", ("soft_hinge", 5.0)),
    (None, (0.5, 2.0, 1.5)), (None, (1.0, 3.0, 0.5)))))
def test_gradient_matches_finite_differences(act, with_b, alpha, centered, loss, mult, lrs):
    C = 1 if loss != "mse" else 2
    ws, bs, X, Y, rng = _problem(C=C)
    if loss != "mse":
        Y = np.sign(Y)
    opts = parse_options(3, activation=act, multipliers=mult, alpha=alpha, centered=centered,
                         loss=loss, lr_scales=lrs, eta=0.7)
    net = get_model("mlp")(ws, bs if with_b else None, opts).prepare(X, Y)
    y = _away_from_kinks(net, rng)
    g = net.gradient(y)
    fd = _fd_grad(net.loss, y)
    # central differences: truncation eps^2 |L'''| / 6, rounding eps_mach |L| / eps
    scale = np.max(np.abs(g)) + np.max(np.abs(fd))
    assert np.max(np.abs(g - fd)) <= 1e-6 * scale + 1e-10 * (1 + abs(net.loss(y)))
    # rhs = -eta lr_scales[l] dL/dtheta_l, layer l's bias with its weights
    r = net.rhs(y)
    s = np.ones(3) if lrs is None else np.array(lrs)
    rates = list(0.7 * s) + (list(0.7 * s[:-1]) if with_b else [])
    for gi, ri, rate in zip(net.layout.unpack(g), net.layout.unpack(r), rates):
        np.testing.assert_allclose(ri, -rate * gi, rtol=1e-14, atol=0)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("C", [1, 2])
def test_ntk_matches_finite_difference_jacobian(act, C):
    ws, bs, X, Y, rng = _problem(C=C, seed=3)
    opts = parse_options(3, activation=act, multipliers=(0.5, 2.0, 1.5), alpha=3.0,
                         centered=True)
    net = get_model("mlp")(ws, bs, opts).prepare(X, Y)
    y = _away_from_kinks(net, rng)
    X1, X2 = X[:4], X[2:]
    eps = 1e-6
    J = {}
    for nm, Xq in (("1", X1), ("2", X2)):
        J[nm] = np.array([(net.outputs(y + eps * e, Xq) - net.outputs(y - eps * e, Xq)) / (2 * eps)
                          for e in np.eye(y.size)])          # (n, Q, C)
    Kfd = np.einsum("nqi,npj->qpij", J["1"], J["2"])
    K = net.ntk(y, X1, X2)
    if C == 1:
        Kfd = Kfd[:, :, 0, 0]
    assert K.shape == Kfd.shape
    assert np.max(np.abs(K - Kfd)) <= 1e-6 * np.max(np.abs(Kfd))
    # the public function at the weights themselves, with and without biases
    for b in (None, bs):
        net0 = get_model("mlp")(ws, b, parse_options(3, activation=act, alpha=3.0)).prepare(X, Y)
        np.testing.assert_allclose(ln.empirical_ntk(ws, X1, X2, activation=act, biases=b,
                                                    alpha=3.0),
                                   net0.ntk(net0.y0, X1, X2), rtol=1e-13, atol=0)


def test_empirical_ntk_defaults_unchanged():
    ws, _, X, _, _ = _problem(C=2)
    a = ln.empirical_ntk(ws, X, X)
    b = ln.empirical_ntk(ws, X, X, activation="linear", biases=None, multipliers=None,
                         alpha=1.0)
    assert np.array_equal(a, b)
    # the MLP model with a linear activation is an independent path to the same kernel
    net = get_model("mlp")(ws, None, parse_options(3)).prepare(X, X[:, :2])
    np.testing.assert_allclose(net.ntk(net.y0, X, X), a, rtol=1e-12, atol=1e-14)


OPTION_SETS = [dict(alpha=2.0, multipliers=(0.5, 2.0, 1.5), lr_scales=(1.0, 2.0, 0.5)),
               dict(alpha=0.3, centered=True, lr_scales=(1.0, 0.5, 2.0)),
               dict(multipliers=(1.2, 0.8, 1.1), centered=True)]


@pytest.mark.parametrize("opts", OPTION_SETS)
def test_linear_mapping_matches_mlp_with_linear_activation(opts):
    """The sufficient-statistics fast path (targets Y/(alpha M) + X W_0^T, rates eta M^2 s_l)
    against the MLP on raw samples with activation='linear' (an independent right-hand
    side), both at rtol; the difference is a few rtol of the outputs' size."""
    ws, _, X, Y, _ = _problem(C=2, P=30, sizes=(4, 6, 5))
    ws = [0.5 * w for w in ws]
    te = [0.0, 0.5, 3.0, 20.0]
    rtol = 1e-10
    fast = ln.gradient_flow(ws, X, Y, te, rtol=rtol, backend="numpy", eta=0.8,
                            record=("outputs", "ntk", "weights"), **opts)
    ref = ln.gradient_flow(ws, X, Y, te, rtol=rtol, backend="numpy", eta=0.8,
                           record=("outputs", "ntk", "weights"), model="mlp", **opts)
    assert fast.success and ref.success and fast.kinks == 0
    assert ref.method == "auto" and ref.nfev > 0
    size = np.max(np.abs(ref.outputs))
    assert np.max(np.abs(fast.outputs - ref.outputs)) <= 1e3 * rtol * size
    assert np.max(np.abs(fast.end_to_end - ref.end_to_end)) <= 1e3 * rtol * size
    np.testing.assert_allclose(fast.loss, ref.loss, rtol=1e3 * rtol, atol=1e3 * rtol * ref.loss[0])
    np.testing.assert_allclose(fast.ntk, ref.ntk, rtol=0, atol=1e3 * rtol * np.max(np.abs(ref.ntk)))
    for a, b in zip(fast.weights_t, ref.weights_t):
        assert np.max(np.abs(a - b)) <= 1e3 * rtol * np.max(np.abs(b))
    # outputs = F on the training inputs = X end_to_end^T
    np.testing.assert_allclose(fast.outputs, np.einsum("qd,tcd->tqc", X, fast.end_to_end),
                               rtol=1e-12, atol=1e-14)
    # and the 'linear' model through the raw loop (what a stop rule runs: one that never
    # fires) agrees too
    lin = ln.gradient_flow(ws, X, Y, te, rtol=rtol, backend="numpy", eta=0.8,
                           record=("outputs", "modes"), model="linear", stop=("loss", 0.0),
                           **opts)
    assert np.max(np.abs(lin.outputs - ref.outputs)) <= 1e3 * rtol * size
    fm = ln.gradient_flow(ws, X, Y, te, rtol=rtol, backend="numpy", eta=0.8, record=("modes",),
                          **opts)
    assert np.max(np.abs(fm.modes - lin.modes)) <= 1e3 * rtol * size


def test_defaults_take_the_old_path_unchanged():
    ws, _, X, Y, _ = _problem(C=2, P=20)
    te = [0.0, 1.0, 10.0]
    a = ln.gradient_flow(ws, X, Y, te, backend="numpy", record=("weights", "modes"))
    b = ln.gradient_flow(ws, X, Y, te, backend="numpy", record=("weights", "modes"),
                         activation="linear", biases=None, multipliers=None, alpha=1.0,
                         centered=False, loss="mse", lr_scales=None, stop=None)
    c = ln.gradient_flow(ws, X, Y, te, backend="numpy", record=("weights", "modes"),
                         lr_scales=[1.0, 1.0, 1.0])
    for t in (b, c):
        assert np.array_equal(a.end_to_end, t.end_to_end) and np.array_equal(a.loss, t.loss)
        assert np.array_equal(a.modes, t.modes) and a.nfev == t.nfev
        assert t.biases is None and t.outputs is None and t.kinks == 0


def test_lr_scales_on_the_linear_path():
    """Per-layer rates on the sufficient-statistics loops: a layer with rate 0 is frozen in
    the limit, here a rate 1e-9 moves it by at most ~1e-9 x its rate-1 motion."""
    ws, _, X, Y, _ = _problem(C=2, P=20)
    tr = ln.gradient_flow(ws, X, Y, [0.0, 5.0], backend="numpy", record=("weights",),
                          lr_scales=[1.0, 1e-9, 1.0])
    move = [np.max(np.abs(w[-1] - w[0])) for w in tr.weights_t]
    assert move[1] <= 1e-7 * max(move[0], move[2])
    assert move[0] > 1e-3


def test_bad_input_names_the_argument():
    ws, bs, X, Y, _ = _problem(C=2)
    te = [0.0, 1.0]
    cases = [(dict(biases=bs[:1]), "biases"), (dict(biases=[bs[0], bs[0]]), "biases"),
             (dict(biases=[bs[0][:, None], bs[1]]), "biases"), (dict(alpha=0.0), "alpha"),
             (dict(alpha=-1.0), "alpha"), (dict(multipliers=[1.0, 0.0, 1.0]), "multipliers"),
             (dict(multipliers=[1.0, 1.0]), "multipliers"),
             (dict(lr_scales=[1.0, -1.0, 1.0]), "lr_scales"),
             (dict(activation="swish"), "activation"),
             (dict(activation=("softplus", -1.0)), "activation"),
             (dict(loss="soft_hinge"), "C = 1|soft_hinge"),
             (dict(activation="relu", record=("modes",)), "modes"),
             (dict(activation="tanh", record=("conservation",)), "conservation"),
             (dict(stop="margin"), "stop"), (dict(stop=("loss", -1.0)), "stop"),
             (dict(centered=1), "centered")]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            ln.gradient_flow(ws, X, Y, te, backend="numpy", **kw)
    w1 = [ws[0], ws[1], ws[2][:1]]
    with pytest.raises(ValueError, match="Y"):
        ln.gradient_flow(w1, X, Y[:, :1], te, loss="soft_hinge", backend="numpy")
    net = get_model("mlp")(ws, None, parse_options(3, activation="relu")).prepare(X, Y)
    with pytest.raises(ValueError, match="end_to_end"):
        net.end_to_end(net.y0)
    tr = ln.gradient_flow(ws, X, Y, te, backend="numpy", activation="relu")
    assert tr.end_to_end is None
    with pytest.raises(ValueError, match="biases"):
        ln.empirical_ntk(ws, X, X, activation="relu", biases=bs[:1])
    with pytest.raises(ValueError, match="alpha"):
        ln.empirical_ntk(ws, X, X, alpha=-2.0)
