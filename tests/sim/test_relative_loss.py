"""stop=("relative_loss", r): the loss stop at r times the loss at t = 0, for the linear
network and the MLP, numpy and numba, and each member of the ensemble."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.network import init_network

CASES = [("linear", {}), ("linear", dict(alpha=0.1, centered=True, multipliers=(2.0, 0.5))),
         ("relu", dict(biases=True)), ("tanh", dict(alpha=0.1, centered=True)),
         ("softplus", dict(loss="logistic"))]


def _data(seed=0, P=12, D=3, N=5):
    rng = np.random.default_rng(seed)
    ws = init_network((D, N, 1), 1.0, seed=seed + 1)
    X = rng.standard_normal((P, D))
    return ws, X, X @ rng.standard_normal((D, 1)), 0.3 * rng.standard_normal(N)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_relative_loss_is_the_loss_stop_of_r_times_the_start(case, backend):
    act, kw = CASES[case]
    kw = dict(kw)
    ws, X, Y, b = _data(case)
    if kw.pop("biases", False):
        kw["biases"] = [b]
    if kw.get("loss") == "logistic":
        Y = np.sign(Y)
    t = [0.0, 1e-3, 1e4]
    r = 0.05
    tr = ln.gradient_flow(ws, X, Y, t, backend=backend, activation=act, rtol=1e-9,
                          stop=("relative_loss", r), **kw)
    assert tr.success and tr.t_stop is not None and t[1] < tr.t_stop < t[2], tr.message
    assert tr.backend == backend or act == "linear"
    # located inside its step: the loss there is r times the start, to the root's precision
    assert abs(tr.loss[-1] - r * tr.loss[0]) <= 1e-9 * tr.loss[0]
    assert tr.loss[1] > r * tr.loss[0]
    # the same run as the absolute stop converted by hand, in the units of Trajectory.loss
    ref = ln.gradient_flow(ws, X, Y, t, backend=backend, activation=act, rtol=1e-9,
                           stop=("loss", r * tr.loss[0]), **kw)
    assert abs(ref.t_stop - tr.t_stop) <= 1e-12 * ref.t_stop


def test_relative_loss_per_member_of_the_ensemble():
    """Each member stops at r times its own start (the alphas differ: starts 1/alpha^2 apart)."""
    ws, X, Y, _ = _data(3)
    nets = [init_network((3, 5, 1), 1.0, seed=s) for s in range(3)]
    alpha = np.array([0.1, 1.0, 3.0])
    ens = ln.gradient_flow_ensemble(nets, X, Y, [0.0, 1e4], activation="tanh", alpha=alpha,
                                    centered=True, stop=("relative_loss", 0.1), rtol=1e-9)
    assert ens.all_success
    np.testing.assert_allclose(ens.loss[:, -1], 0.1 * ens.loss[:, 0], rtol=1e-8)
    assert np.ptp(np.log(ens.loss[:, 0])) > 4       # the starts differ: r is relative


@pytest.mark.parametrize("r", [0.0, 1.0, 1.5, -0.1, np.nan, np.inf, True, "0.1", None])
def test_relative_loss_bad_ratio_names_stop(r):
    ws, X, Y, _ = _data()
    with pytest.raises(ValueError, match="stop"):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], stop=("relative_loss", r))
