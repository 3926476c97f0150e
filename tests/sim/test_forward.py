"""ln.forward with the network keywords against the simulator's own outputs
(record=("outputs",)), at t = 0 and at the end of a flow, to rounding."""
import math

import numpy as np
import pytest

import linearnets as ln
from linearnets.network import init_network

ACTS = ["linear", "relu", ("leaky_relu", 0.1), ("softplus", 2.0), "tanh"]
#: keyword sets: plain; biases; multipliers and alpha; centred with biases; all of them
OPTS = [dict(), dict(biases=True), dict(multipliers=(0.5, 2.0, 1.5), alpha=3.0),
        dict(biases=True, centered=True, alpha=0.2),
        dict(biases=True, multipliers=(2.0, 0.5, 0.7), alpha=10.0, centered=True)]
EPS = np.finfo(np.float64).eps


def _bound(ws, bs, X, act, mult, alpha):
    """An elementwise bound on the terms summed by the forward pass: ``alpha m_L |W_L| h``
    with ``h = m_l |W_l| h + |b_l| (+ phi(0))`` from ``|X|`` (|phi(z)| <= |z| + phi(0) for
    every activation here, all 1-Lipschitz)."""
    h = np.abs(X)
    shift = math.log(2.0) / act[1] if isinstance(act, tuple) and act[0] == "softplus" else 0.0
    for l, w in enumerate(ws[:-1]):
        h = mult[l] * h @ np.abs(w).T + (np.abs(bs[l]) if bs is not None else 0.0) + shift
    return alpha * mult[-1] * h @ np.abs(ws[-1]).T


def _tol(ws, bs, ws0, bs0, X, act, kw):
    mult = kw.get("multipliers", (1.0,) * len(ws))
    alpha = kw.get("alpha", 1.0)
    b = _bound(ws, bs, X, act, mult, alpha)
    if kw.get("centered"):
        b = b + _bound(ws0, bs0, X, act, mult, alpha)
    # each of the L products sums at most max fan-in terms, each rounded once
    k = sum(w.shape[1] for w in ws) + 4 * len(ws)
    return 4 * k * EPS * b


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("opt", range(len(OPTS)))
@pytest.mark.parametrize("probe", [False, True])
def test_forward_matches_recorded_outputs(act, opt, probe):
    rng = np.random.default_rng(opt)
    D, N, C, P = 3, 5, 2, 7
    ws = init_network((D, N, N, C), 1.0, seed=opt + 10)
    X, Y = rng.standard_normal((P, D)), rng.standard_normal((P, C))
    Xp = rng.standard_normal((4, D))
    kw = dict(OPTS[opt])
    if kw.pop("biases", False):
        kw["biases"] = [0.3 * rng.standard_normal(N) for _ in range(2)]
    # a short flow (the rates grow as 1/alpha^2 below alpha = 1), before ReLU nets slide
    t_end = 0.2 * min(kw.get("alpha", 1.0), 1.0) ** 2
    tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], backend="numpy", activation=act,
                          record=("outputs",), probe=Xp if probe else None, max_steps=20000,
                          **kw)
    assert tr.success, tr.message
    Xo = Xp if probe else X
    fkw = {k: v for k, v in kw.items() if k != "biases"}
    bs0 = None if tr.biases0 is None else list(tr.biases0)
    for k, (w, b) in enumerate([(tr.weights0, tr.biases0), (tr.weights, tr.biases)]):
        w, b = list(w), None if b is None else list(b)
        if kw.get("centered"):
            fkw.update(weights0=list(tr.weights0), biases0=bs0)
        F = ln.forward(w, Xo, activation=act, biases=b, **fkw)
        assert F.shape == tr.outputs[k].shape
        tol = _tol(w, b, list(tr.weights0), bs0, Xo, act, kw)
        assert np.all(np.abs(F - tr.outputs[k]) <= tol), (k, np.max(np.abs(F - tr.outputs[k])))
    # the flow moved the outputs by much more than the tolerance: the comparison is not void
    assert np.max(np.abs(tr.outputs[1] - tr.outputs[0])) > 1e3 * np.max(tol)


def test_forward_linear_default_unchanged():
    """The defaults are the linear network W_L ... W_1 x; a centred net at its own start is 0."""
    rng = np.random.default_rng(1)
    ws = [rng.standard_normal((4, 3)), rng.standard_normal((2, 4))]
    X = rng.standard_normal((5, 3))
    want = X @ ws[0].T @ ws[1].T
    assert np.allclose(ln.forward(ws, X), want, rtol=1e-14, atol=1e-14)
    assert np.allclose(ln.forward(ws, X, alpha=2.0, multipliers=(1.0, 3.0)), 6.0 * want,
                       rtol=1e-14, atol=1e-13)
    assert np.array_equal(ln.forward(ws, X, centered=True, weights0=ws), np.zeros((5, 2)))


@pytest.mark.parametrize("kw,name", [
    (dict(centered=True), "weights0"),
    (dict(weights0="W0"), "weights0"),
    (dict(centered=True, weights0="W0", biases0="b0"), "biases0"),
    (dict(activation="sigmoid"), "activation"),
    (dict(alpha=0.0), "alpha"),
    (dict(multipliers=(1.0,)), "multipliers"),
    (dict(biases=[np.zeros(3)]), "biases"),
])
def test_forward_bad_input_names_argument(kw, name):
    rng = np.random.default_rng(2)
    ws = [rng.standard_normal((4, 3)), rng.standard_normal((2, 4))]
    kw = {k: (ws if v == "W0" else [np.zeros(4)] if v == "b0" else v) for k, v in kw.items()}
    with pytest.raises(ValueError, match=name):
        ln.forward(ws, rng.standard_normal((5, 3)), **kw)
