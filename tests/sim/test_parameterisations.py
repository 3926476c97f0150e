"""Named parameterisations: the statistics of the drawn weights, and that the model
with the returned keywords computes each paper's formula (checked with the
independent reference forward pass of tests/sim/reference_mlp.py)."""
import math

import numpy as np
import pytest
from scipy import integrate

import linearnets as ln
from linearnets.parameterisations import (
    activation_normalisation,
    geiger_parameterisation,
    init_parameterised,
    zhou_normalised,
    zhou_parameterisation,
)

from reference_mlp import RefMLP, kink_free_inputs, parse_activation, phi, reference_flow

SIZES = (40, 90, 70, 3)


def _moments_ok(w, std):
    """Sample mean, variance and fourth moment of i.i.d. N(0, std^2) entries, within 5
    standard errors: sd(mean) = s/sqrt(n), sd(var)/s^2 = sqrt(2/n), sd(m4)/s^4 = sqrt(96/n)."""
    z = np.asarray(w).ravel() / std
    n = z.size
    assert abs(z.mean()) <= 5 / math.sqrt(n)
    assert abs(np.mean(z ** 2) - 1) <= 5 * math.sqrt(2 / n)
    assert abs(np.mean(z ** 4) - 3) <= 5 * math.sqrt(96 / n)


@pytest.mark.parametrize("name", ["standard", "ntk", "mean_field"])
@pytest.mark.parametrize("sigma", [0.3, 2.0])
def test_weight_moments(name, sigma):
    p = init_parameterised(SIZES, name, sigma=sigma, seed=3)
    assert len(p.weights) == len(p.multipliers) == 3
    for l, (w, n_in) in enumerate(zip(p.weights, SIZES[:-1])):
        assert w.shape == (SIZES[l + 1], n_in) and w.dtype == np.float64
        std = sigma / math.sqrt(n_in) if name == "standard" else sigma
        _moments_ok(w, std)
    # a wrong scale is caught: the same draws judged at 1.2x the std fail
    with pytest.raises(AssertionError):
        _moments_ok(p.weights[0], 1.2 * (sigma / math.sqrt(SIZES[0]) if name == "standard"
                                         else sigma))


def test_biases_drawn_and_zero():
    p = init_parameterised(SIZES, "ntk", seed=1, biases=True, bias_std=0.5)
    assert [b.shape for b in p.biases] == [(90,), (70,)]
    _moments_ok(np.concatenate(p.biases), 0.5)
    q = init_parameterised(SIZES, "ntk", seed=1, biases=True)
    assert all(np.all(b == 0) for b in q.biases)
    assert init_parameterised(SIZES, "ntk", seed=1).biases is None


def test_standard_is_init_network():
    p = init_parameterised(SIZES, "standard", sigma=0.7, seed=5)
    for a, b in zip(p.weights, ln.init_network(SIZES, 0.7, seed=5)):
        np.testing.assert_array_equal(a, b)
    assert p.multipliers == (1.0, 1.0, 1.0) and p.alpha == 1.0


def _paper_forward(name, ws, X, act, bs=None):
    """The sources' formulas written out: standard f = W3 phi(W2 phi(W1 x)); NTK (Jacot et
    al. 2018) f = W3/sqrt(n2) phi(W2/sqrt(n1) phi(W1/sqrt(n0) x)); mean field: output 1/n2."""
    h = X
    for l, w in enumerate(ws[:-1]):
        s = 1.0 if name == "standard" else 1 / math.sqrt(w.shape[1])
        h = phi(s * h @ w.T + (0.0 if bs is None else bs[l]), act)
    out = {"standard": 1.0, "ntk": 1 / math.sqrt(ws[-1].shape[1]),
           "mean_field": 1 / ws[-1].shape[1]}[name]
    return out * h @ ws[-1].T


@pytest.mark.parametrize("name", ["standard", "ntk", "mean_field"])
@pytest.mark.parametrize("activation", ["relu", ("softplus", 2.0), "tanh"])
def test_forward_equals_paper_formula(name, activation):
    rng = np.random.default_rng(0)
    sizes = (5, 8, 7, 2)
    p = init_parameterised(sizes, name, sigma=1.3, seed=2, biases=True, bias_std=0.4)
    X = rng.standard_normal((9, 5))
    act = parse_activation(activation)
    model = RefMLP(p.weights, p.biases, activation=activation, **{
        k: v for k, v in p.flow_kwargs().items() if k in ("multipliers", "alpha", "centered")})
    got = model.F(model.theta0, X)
    want = _paper_forward(name, p.weights, X, act, p.biases)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14 * np.abs(want).max())
    # the same draws: ntk and mean-field are the standard network at t = 0 (output / sqrt(n))
    std = _paper_forward("standard", init_parameterised(sizes, "standard", 1.3, seed=2).weights,
                         X, act, p.biases)
    factor = {"standard": 1.0, "ntk": 1.0, "mean_field": 1 / math.sqrt(7)}[name]
    np.testing.assert_allclose(got, factor * std, rtol=1e-12, atol=1e-14 * np.abs(std).max())


def test_bad_input():
    with pytest.raises(ValueError, match="parameterisation"):
        init_parameterised(SIZES, "mup")
    with pytest.raises(ValueError, match="sigma"):
        init_parameterised(SIZES, "ntk", sigma=0.0)
    with pytest.raises(ValueError, match="bias_std"):
        init_parameterised(SIZES, "ntk", biases=True, bias_std=-1.0)
    with pytest.raises(ValueError, match="biases"):
        init_parameterised(SIZES, "ntk", biases=1)
    with pytest.raises(ValueError, match="betas"):
        zhou_parameterisation((3, 5, 5, 1), [1.0, 1.0], 1.0)
    with pytest.raises(ValueError, match="betas"):
        zhou_parameterisation((3, 5, 5, 1), [1.0, -1.0, 1.0], 1.0)
    with pytest.raises(ValueError, match="alpha"):
        zhou_parameterisation((3, 5, 5, 1), [1.0, 1.0, 1.0], 0.0)
    with pytest.raises(ValueError, match="layer_sizes"):
        zhou_parameterisation((3, 5, 5, 2), [1.0, 1.0, 1.0], 1.0)
    with pytest.raises(ValueError, match="form"):
        zhou_parameterisation((3, 5, 5, 1), [1.0, 1.0, 1.0], 1.0, form="other")
    with pytest.raises(ValueError, match="biases"):
        zhou_parameterisation((3, 5, 5, 1), [1.0, 1.0, 1.0], 1.0, form="init_network",
                              biases=True)
    with pytest.raises(ValueError, match="alpha"):
        geiger_parameterisation((3, 5, 1), -1.0)
    with pytest.raises(ValueError, match="clock"):
        geiger_parameterisation((3, 5, 1), 1.0, clock="wall")
    with pytest.raises(ValueError, match="activation"):
        activation_normalisation("swish")


# ----------------------------------------------------------------- Zhou et al. 2022
BETAS = (0.8, 0.3, 0.5)
ALPHA_Z = 4.0


def test_zhou_moments():
    p = zhou_parameterisation((30, 80, 80, 1), BETAS, ALPHA_Z, seed=4, biases=True)
    for w, b in zip(p.weights, BETAS):
        _moments_ok(w, b)
    _moments_ok(p.biases[0], BETAS[0])       # n = 80: loose but still a check
    assert p.alpha == 1 / ALPHA_Z and p.eta == 1 / ALPHA_Z ** 2


def _zhou_f(ws, X, bs=None):
    """f_theta(x) = (1/alpha) a^T sigma(W2 sigma(W1 x)) (Zhou et al. 2022, section 3)."""
    W1, W2, a = ws
    b1, b2 = (0.0, 0.0) if bs is None else bs
    return (np.maximum(np.maximum(X @ W1.T + b1, 0) @ W2.T + b2, 0) @ a.T) / ALPHA_Z


@pytest.mark.parametrize("form", ["direct", "init_network"])
def test_zhou_forward_and_forms(form):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((10, 4))
    p = zhou_parameterisation((4, 9, 8, 1), BETAS, ALPHA_Z, seed=7, form=form)
    model = RefMLP(p.weights, activation=p.activation, multipliers=p.multipliers, alpha=p.alpha)
    direct = zhou_parameterisation((4, 9, 8, 1), BETAS, ALPHA_Z, seed=7)
    want = _zhou_f(direct.weights, X)
    np.testing.assert_allclose(model.F(model.theta0, X), want, rtol=1e-12,
                               atol=1e-14 * np.abs(want).max())


def test_zhou_clock_is_their_risk():
    """eta * grad of the model's loss is the gradient of R_S = 1/(2n) sum (f - y)^2."""
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((7, 4)), rng.standard_normal((7, 1))
    p = zhou_parameterisation((4, 6, 5, 1), BETAS, ALPHA_Z, seed=3, biases=True)
    model = RefMLP(p.weights, p.biases, activation="relu", alpha=p.alpha, eta=p.eta)
    th = model.theta0
    for z in model.preactivations(th, X):      # central differences must not straddle a kink
        assert np.min(np.abs(z)) > 1e-4

    def risk(t):
        ws, bs = model.unflatten(t)
        return 0.5 * np.mean((_zhou_f(ws, X, bs) - y) ** 2)

    h = 1e-6
    g = np.array([(risk(th + h * e) - risk(th - h * e)) / (2 * h) for e in np.eye(th.size)])
    # central differences: error ~ eps |R| / h + h^2 |R'''|, far below 1e-7 |g|
    np.testing.assert_allclose(-model.rhs(th, X, y), g, rtol=0, atol=1e-7 * np.abs(g).max())


def test_zhou_forms_have_one_flow():
    """init_network weights with m_l = beta_l sqrt(N_{l-1}) and lr_scales 1/m_l^2 follow the
    direct form's flow: F and m_l W_l agree along the reference trajectory to the
    integrator's tolerance (rtol 1e-12; 1e-9 relative leaves three decades)."""
    rng = np.random.default_rng(10)
    p0 = zhou_parameterisation((3, 6, 6, 1), (1.0, 0.7, 0.9), 2.0, seed=1)
    X = kink_free_inputs(RefMLP(p0.weights, activation="relu"), 8, 3, rng, 0.2)
    y = rng.standard_normal((8, 1))
    t = [0.05, 0.1]
    runs = []
    for form in ("direct", "init_network"):
        p = zhou_parameterisation((3, 6, 6, 1), (1.0, 0.7, 0.9), 2.0, seed=1, form=form)
        kw = p.flow_kwargs()
        kw.pop("biases")
        runs.append((p, reference_flow(p.weights, X, y, t, **kw)))
    (pa, ra), (pb, rb) = runs
    assert ra.min_abs_z > 1e-3, "the problem must keep clear of ReLU kinks"
    scale = np.abs(ra.outputs).max()
    np.testing.assert_allclose(rb.outputs, ra.outputs, rtol=0, atol=1e-9 * scale)
    for l in range(3):
        wa = pa.multipliers[l] * ra.weights_t[l]
        wb = pb.multipliers[l] * rb.weights_t[l]
        np.testing.assert_allclose(wb, wa, rtol=0, atol=1e-9 * np.abs(wa).max())
    assert np.abs(ra.outputs[-1] - ra.model.F(ra.model.theta0, X)).max() > 0.02 * scale  # it moved


def test_zhou_normalised():
    d = zhou_normalised(BETAS, ALPHA_Z)
    assert d["kappa"] == pytest.approx(0.8 * 0.3 * 0.5 / 4.0, rel=1e-15)
    np.testing.assert_allclose(d["rates"], d["kappa"] / np.array(BETAS) ** 2, rtol=1e-15)
    # homogeneity: the normalised network times kappa is the network
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 3))
    p = zhou_parameterisation((3, 6, 6, 1), BETAS, ALPHA_Z, seed=2)
    wt = [w / b for w, b in zip(p.weights, BETAS)]
    f_tilde = np.maximum(np.maximum(X @ wt[0].T, 0) @ wt[1].T, 0) @ wt[2].T
    np.testing.assert_allclose(_zhou_f(p.weights, X), d["kappa"] * f_tilde, rtol=1e-12)


# ----------------------------------------------------------------- Geiger et al. 2019
@pytest.mark.parametrize("activation", ["relu", ("softplus", 5.0), "tanh", ("leaky_relu", 0.2)])
def test_activation_normalisation(activation):
    act = parse_activation(activation)
    c = activation_normalisation(activation)
    second = integrate.quad(lambda z: phi(np.array([z]), act)[0] ** 2
                            * math.exp(-z * z / 2) / math.sqrt(2 * math.pi), -40, 0, limit=200)[0]
    second += integrate.quad(lambda z: phi(np.array([z]), act)[0] ** 2
                             * math.exp(-z * z / 2) / math.sqrt(2 * math.pi), 0, 40, limit=200)[0]
    assert c * c * second == pytest.approx(1.0, rel=1e-10)


def test_geiger_forward_and_clock():
    """F = alpha (f - f_0), f = W3 c phi(W2 c phi(W1 x / sqrt d) / sqrt h) / sqrt h, and eta
    maps the model's loss onto the paper's (1/alpha^2) and the code's (1/alpha)."""
    rng = np.random.default_rng(4)
    D, h, alpha = 4, 7, 0.3
    X = rng.standard_normal((6, D))
    y = np.sign(rng.standard_normal((6, 1)))
    act = ("softplus", 5.0)
    pa = geiger_parameterisation((D, h, h, 1), alpha, act, seed=1)
    c = activation_normalisation(act)
    pact = parse_activation(act)

    def f_paper(ws):
        z = c * phi(X @ ws[0].T / math.sqrt(D), pact)
        z = c * phi(z @ ws[1].T / math.sqrt(h), pact)
        return z @ ws[2].T / math.sqrt(h)

    kw = pa.flow_kwargs()
    assert kw["centered"] and kw["alpha"] == alpha and kw["loss"] == ("soft_hinge", 20.0)
    model = RefMLP(pa.weights, activation=act, multipliers=pa.multipliers, alpha=alpha,
                   centered=True, loss=kw["loss"], eta=kw["eta"])
    th = model.theta0 + 0.05 * rng.standard_normal(model.size)
    ws, _ = model.unflatten(th)
    want = alpha * (f_paper(ws) - f_paper(pa.weights))
    np.testing.assert_allclose(model.F(th, X), want, rtol=1e-12, atol=1e-14)

    def code_loss(t):      # feature_lazy main.py: softplus(1 - alpha f y, beta)/alpha, mean
        wt, _ = model.unflatten(t)
        fy = (f_paper(wt) - f_paper(pa.weights)) * y
        return np.mean(np.logaddexp(0, 20 * (1 - alpha * fy)) / 20 / alpha)

    eps = 1e-6
    g = np.array([(code_loss(th + eps * e) - code_loss(th - eps * e)) / (2 * eps)
                  for e in np.eye(th.size)])
    pc = geiger_parameterisation((D, h, h, 1), alpha, act, seed=1, clock="code")
    assert pc.eta == alpha and pa.eta == 1.0
    code_model = RefMLP(pa.weights, activation=act, multipliers=pc.multipliers, alpha=alpha,
                        centered=True, loss=kw["loss"], eta=pc.eta)
    np.testing.assert_allclose(-code_model.rhs(th, X, y), g, rtol=0, atol=1e-7 * np.abs(g).max())


@pytest.mark.parametrize("name", ["standard", "ntk", "mean_field"])
def test_parameterised_forward_is_the_paper_formula(name):
    """p.forward(X, activation=...) is the sources' formula (the same draws as above)."""
    rng = np.random.default_rng(0)
    p = init_parameterised((5, 8, 7, 2), name, sigma=1.3, seed=2, biases=True, bias_std=0.4)
    X = rng.standard_normal((9, 5))
    want = _paper_forward(name, p.weights, X, parse_activation("tanh"), p.biases)
    np.testing.assert_allclose(p.forward(X, activation="tanh"), want, rtol=1e-13,
                               atol=1e-14 * np.abs(want).max())
    np.testing.assert_allclose(p.forward(X, activation="tanh", alpha=3.0), 3.0 * want,
                               rtol=1e-13, atol=1e-14 * np.abs(want).max())


def test_kwargs_overrides_merge_without_clash():
    """flow_kwargs(**overrides) / ntk_kwargs(**overrides): the overrides win, the rest is the
    parameterisation's; no call passes a keyword twice."""
    p = geiger_parameterisation((3, 6, 1), 2.0)
    kw = p.flow_kwargs(alpha=10.0, rtol=1e-6)
    assert kw["alpha"] == 10.0 and kw["rtol"] == 1e-6 and kw["centered"] is True
    assert kw["multipliers"] == p.multipliers and kw["loss"] == p.loss and kw["eta"] == p.eta
    assert p.flow_kwargs() == {k: v for k, v in kw.items() if k != "rtol"} | {"alpha": 2.0}
    nk = p.ntk_kwargs(alpha=10.0)
    assert nk["alpha"] == 10.0 and "centered" not in nk and "eta" not in nk
    q = init_parameterised((3, 6, 1), "ntk", seed=0)
    assert "activation" not in q.flow_kwargs() and "loss" not in q.flow_kwargs()
    assert q.flow_kwargs(activation="relu")["activation"] == "relu"
    # used as the keywords of a call that also names alpha: the merged dict, once
    X = np.random.default_rng(1).standard_normal((5, 3))
    y = np.sign(X[:, 0])
    tr = ln.gradient_flow(p.weights, X, y, [0.0, 0.1], backend="numpy", record=("outputs",),
                          **p.flow_kwargs(alpha=10.0))
    assert tr.success
    F = p.forward(X, weights=tr.weights, alpha=10.0)
    np.testing.assert_allclose(F, tr.outputs[-1], rtol=1e-10, atol=1e-12)
    assert np.array_equal(p.forward(X, alpha=10.0), np.zeros((5, 1)))   # centred, at t = 0
