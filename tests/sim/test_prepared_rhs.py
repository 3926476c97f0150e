"""``PreparedFlow.rhs`` against an independent numpy gradient and finite differences of the
loss (tests/sim/reference_mlp.py), centered and not, and its argument checks."""
import numpy as np
import pytest

from linearnets.sim.flow import prepare_flow
from linearnets.network import init_network
from reference_mlp import RefMLP, fd_grad

CASES = [
    dict(activation="tanh", biases=True, multipliers=(1.0, 0.7, 1.3), lr_scales=(1.0, 0.5, 2.0)),
    dict(activation=("softplus", 2.0), biases=True, centered=True, alpha=2.0, eta=0.7),
    dict(centered=True, alpha=0.5, lr_scales=(2.0, 1.0, 0.5)),    # the linear model
]


def _setup(kw, backend):
    if backend == "numba":
        pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    sizes = (3, 5, 4, 2)
    X, Y = rng.standard_normal((9, 3)), rng.standard_normal((9, 2))
    prep = prepare_flow(X, Y, sizes, [0.0, 1.0], backend=backend, **kw)
    assert prep.backend == backend

    def params(seed):
        ws = init_network(sizes, 1.0, seed=seed)
        bs = [0.2 * np.random.default_rng(seed).standard_normal(n) for n in sizes[1:-1]]
        return ws, (bs if kw.get("biases") else None)

    def ref(ws, bs):
        opts = {k: v for k, v in kw.items() if k != "biases"}
        return RefMLP(ws, bs, **opts)
    return X, Y, prep, params, ref


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("kw", CASES)
def test_prepared_rhs_is_minus_eta_rates_times_the_gradient(kw, backend):
    """At a state away from t = 0: the reference's gradient (a tight tolerance: rounding
    only) and central differences of its loss (h = 1e-6: 1e-6 of the largest entry)."""
    X, Y, prep, params, ref = _setup(kw, backend)
    ws0, bs0 = params(1)
    r = ref(ws0, bs0)
    y = r.flatten(*params(2)) if kw.get("biases") else r.flatten(params(2)[0], None)
    got = prep.rhs(y, ws0, bs0)
    want = r.rhs(y, X, Y)
    scale = np.max(np.abs(want))
    assert got.shape == y.shape and np.max(np.abs(got - want)) <= 1e-10 * scale
    fd = -kw.get("eta", 1.0) * r.layer_scale_vector() * fd_grad(r, y, X, Y)
    assert np.max(np.abs(got - fd)) <= 1e-6 * scale
    # the model kept from the call before gives the same field
    assert np.max(np.abs(prep.rhs(y, ws0, bs0) - want)) <= 1e-10 * scale


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("kw", CASES[1:])
def test_prepared_rhs_follows_a_centered_networks_parameters(kw, backend):
    """New parameters at t = 0, the same ones changed in place, and none (those of y): each
    call is the gradient of the network centered there."""
    X, Y, prep, params, ref = _setup(kw, backend)
    ws0, bs0 = params(1)
    ws1, bs1 = params(3)
    y = ref(ws0, bs0).flatten(*params(2)) if bs0 else ref(ws0, None).flatten(params(2)[0], None)
    for ws, bs in ((ws0, bs0), (ws1, bs1), (ws0, bs0)):
        want = ref(ws, bs).rhs(y, X, Y)
        assert np.max(np.abs(prep.rhs(y, ws, bs) - want)) <= 1e-10 * np.max(np.abs(want))
    ws0[1] *= 1.5                         # in place: the same objects, other values
    want = ref(ws0, bs0).rhs(y, X, Y)
    assert np.max(np.abs(prep.rhs(y, ws0, bs0) - want)) <= 1e-10 * np.max(np.abs(want))
    r = ref(ws0, bs0)
    own = r.unflatten(y)
    want = ref(own[0], own[1] if bs0 else None).rhs(y, X, Y)
    assert np.max(np.abs(prep.rhs(y) - want)) <= 1e-10 * np.max(np.abs(want))


def test_prepared_rhs_rejects_bad_arguments():
    X, Y, prep, params, ref = _setup(CASES[0], "numpy")
    ws, bs = params(1)
    y = ref(ws, bs).flatten(ws, bs)
    for bad in (y[:-1], np.append(y, 0.0), y.reshape(1, -1), y[None, :2]):
        with pytest.raises(ValueError, match="y must"):
            prep.rhs(bad, ws, bs)
    with pytest.raises(ValueError, match="y must be finite"):
        prep.rhs(np.where(np.arange(y.size) == 3, np.nan, y), ws, bs)
    with pytest.raises(ValueError, match=r"weights0\[1\] must have shape"):
        prep.rhs(y, [ws[0], ws[1].T, ws[2]], bs)
    with pytest.raises(ValueError, match="biases"):
        prep.rhs(y, ws, None)
