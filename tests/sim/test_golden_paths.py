"""Golden trajectories of the simulator's other paths: networks, options, front ends.

``tests/sim/test_golden.py`` holds the plain linear network's trajectories (RK45, DOP853,
``auto``, ROS34PW2).  This module records the rest of what the simulator does, so that
a rewrite of the loops, the front end or the models keeps it: the MLP on every
activation with biases, ``alpha``, centring, multipliers, per-layer rates, the soft
hinge and the stop rules; ReLU flows across kinks; the linear network's options and
recordings (modes, conservation, NTK, outputs); SSPRK104; dense output; ``"auto"`` on
both paths (with a run that switches to ROS34PW2 and back); ``prepare_flow``; the
ensemble (member by member, linear and MLP; the case names ending in ``_batched``
record the ensembles once run on a batched loop); the diagonal model.

Each recorded quantity is compared with its recording at ``GOLDEN_RTOLS`` times the
case's tolerance (``rtol``, or ``kink_rtol`` where the flow crosses kinks, whose
accuracy is ``O(kink_rtol)``), relative to the largest recorded entry: not bit for bit
and not step for step, since another CPU, BLAS kernel or rounding of the same algorithm
may flip one accept/reject decision, which moves the solution by the order of the
local error the controller allows.  ``python tests/sim/test_golden_paths.py --record``
rewrites the files (from a checkout whose trajectories are the reference);
without arguments it prints each case's difference in units of its tolerance.
"""
import os
import sys

import numpy as np
import pytest

import linearnets as ln
from linearnets.backend import numba_available
from linearnets.data import scalar_teacher, teacher_task
from linearnets.sim.models.diagonal import diagonal_flow

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_paths")

#: Allowed difference from a recording, in units of the case's tolerance (times the
#: largest recorded entry), as in ``test_golden.py``.
GOLDEN_RTOLS = 20.0

#: name -> (function of the backend returning {field: array}, tolerance, backends)
CASES = {}


def case(name, tol, backends=("numpy", "numba")):
    def register(fn):
        for backend in backends:
            CASES[f"{name}-{backend}"] = (fn, tol, backend)
        return fn
    return register


def _mlp_data(P=16, D=3, C=1, seed=0, labels=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    W = rng.standard_normal((C, D))
    Y = np.tanh(X @ W.T) + 0.1 * rng.standard_normal((P, C))
    if labels:
        Y = np.where(Y >= 0, 1.0, -1.0)
    return X, Y


def _biases(sizes, scale, seed):
    rng = np.random.default_rng(seed)
    return [scale * rng.standard_normal(n) for n in sizes[1:-1]]


def fields(tr):
    """The recorded quantities of a ``Trajectory`` or ``EnsembleTrajectory``."""
    out = {"loss": tr.loss, "weights": np.concatenate([np.ravel(w) for w in tr.weights])}
    for name in ("end_to_end", "outputs", "modes", "conservation", "ntk", "ntk_alignment"):
        a = getattr(tr, name, None)
        if a is not None:
            out[name] = np.asarray(a)
    if getattr(tr, "biases", None) is not None:
        out["biases"] = np.concatenate([np.ravel(b) for b in tr.biases])
    if getattr(tr, "weights_t", None) is not None:
        out["weights_t"] = np.concatenate([np.reshape(w, (-1,)) for w in tr.weights_t])
    if getattr(tr, "t_stop", None) is not None:
        out["t_stop"] = np.array(tr.t_stop)
    out["nfev"] = np.asarray(tr.nfev)      # kept for the report, never compared
    return out


def _check(tr):
    ok = tr.all_success if hasattr(tr, "all_success") else tr.success
    assert ok, tr.message
    return fields(tr)


# --------------------------------------------------------------------------------------
# the MLP (raw samples) on every activation and option
# --------------------------------------------------------------------------------------
@case("mlp_tanh_biases_alpha", 1e-7)
def _(backend):
    X, Y = _mlp_data()
    sizes = (3, 8, 8, 1)
    ws = ln.init_network(sizes, 1.0, seed=1)
    return _check(ln.gradient_flow(ws, X, Y, np.linspace(0.5, 20.0, 6), rtol=1e-7, atol=1e-10,
                                   backend=backend, method="DOP853", activation="tanh",
                                   biases=_biases(sizes, 0.3, 2), alpha=2.0,
                                   record=("weights", "outputs")))


@case("mlp_softplus_centered_rates", 1e-7)
def _(backend):
    X, Y = _mlp_data(C=2)
    ws = ln.init_network((3, 10, 2), 1.0, seed=3)
    return _check(ln.gradient_flow(ws, X, Y, np.logspace(-1, 1.5, 5), rtol=1e-7, atol=1e-10,
                                   backend=backend, method="RK45",
                                   activation=("softplus", 2.0), alpha=0.5, centered=True,
                                   multipliers=[1.5, 0.7], lr_scales=[2.0, 0.5]))


@case("mlp_leaky_ssp", 1e-5)
def _(backend):
    X, Y = _mlp_data(C=2, seed=4)
    ws = ln.init_network((3, 8, 2), 1.0, seed=5)
    return _check(ln.gradient_flow(ws, X, Y, [1.0, 5.0, 10.0], rtol=1e-7, atol=1e-10,
                                   backend=backend, method="SSPRK104",
                                   activation=("leaky_relu", 0.1), kink_rtol=1e-5))


@case("mlp_relu_kinks", 1e-5)
def _(backend):
    X, Y = _mlp_data(P=12, seed=6)
    sizes = (3, 10, 10, 1)
    ws = ln.init_network(sizes, 1.2, seed=7)
    tr = ln.gradient_flow(ws, X, Y, [0.5, 2.0, 5.0], rtol=1e-8, atol=1e-11, backend=backend,
                          method="DOP853", activation="relu", biases=_biases(sizes, 0.2, 8),
                          kink_rtol=1e-5)
    assert tr.kinks > 0
    return _check(tr)


@case("mlp_relu_rosw", 1e-5)
def _(backend):
    X, Y = _mlp_data(P=12, seed=6)
    ws = ln.init_network((3, 10, 1), 1.2, seed=9)
    tr = ln.gradient_flow(ws, X, Y, [0.5, 3.0], rtol=1e-7, atol=1e-10, backend=backend,
                          method="ROS34PW2", activation="relu", kink_rtol=1e-5)
    return _check(tr)


@case("mlp_tanh_rosw_ntk", 1e-7)
def _(backend):
    X, Y = _mlp_data(P=10)
    ws = ln.init_network((3, 6, 6, 1), 1.0, seed=10)
    return _check(ln.gradient_flow(ws, X, Y, [0.5, 2.0, 8.0], rtol=1e-7, atol=1e-10,
                                   backend=backend, method="ROS34PW2", activation="tanh",
                                   biases=_biases((3, 6, 6, 1), 0.2, 11),
                                   probe=(X[:5], Y[:5])))


@case("mlp_auto_tanh", 1e-7)
def _(backend):
    X, Y = _mlp_data()
    ws = ln.init_network((3, 8, 1), 1.0, seed=12)
    return _check(ln.gradient_flow(ws, X, Y, [1.0, 10.0, 40.0], rtol=1e-7, atol=1e-10,
                                   backend=backend, activation="tanh"))


@case("mlp_soft_hinge_margin", 1e-7)
def _(backend):
    X, Y = _mlp_data(P=14, labels=True, seed=13)
    ws = ln.init_network((3, 8, 1), 1.0, seed=14)
    tr = ln.gradient_flow(ws, X, Y, [1.0, 1e3], rtol=1e-7, atol=1e-10, backend=backend,
                          method="DOP853", activation="softplus", loss=("soft_hinge", 10.0),
                          stop="margin")
    assert tr.t_stop is not None
    return _check(tr)


@case("mlp_linear_biases_loss_stop", 1e-7)
def _(backend):
    X, Y = _mlp_data(C=2, seed=15)
    sizes = (3, 6, 2)
    ws = ln.init_network(sizes, 0.5, seed=16)
    tr = ln.gradient_flow(ws, X, Y, [1.0, 100.0], rtol=1e-7, atol=1e-10, backend=backend,
                          method="RK45", biases=_biases(sizes, 0.1, 17), stop=("loss", 0.06),
                          record=("outputs",))
    assert tr.t_stop is not None
    return _check(tr)


# --------------------------------------------------------------------------------------
# the linear network: options, recordings, SSPRK104, dense output, auto
# --------------------------------------------------------------------------------------
def _linear(sizes, sigma=0.3, seed=1, svals=None, P=None):
    D, C = sizes[0], sizes[-1]
    svals = np.linspace(1.0, 0.5, C) if svals is None else svals
    X, Y = teacher_task(P or 3 * D, D, svals, seed=0)
    return X, Y, ln.init_network(sizes, sigma, seed=seed)


@case("linear_options_recordings", 1e-7)
def _(backend):
    X, Y, ws = _linear((4, 6, 6, 2))
    return _check(ln.gradient_flow(ws, X, Y, np.logspace(-1, 2, 7), rtol=1e-7, atol=1e-10,
                                   backend=backend, method="DOP853", alpha=3.0,
                                   multipliers=[1.2, 0.8, 1.1], centered=True,
                                   lr_scales=[1.0, 2.0, 0.5],
                                   record=("modes", "outputs", "weights")))


@case("linear_observers", 1e-7)
def _(backend):
    X, Y, ws = _linear((5, 7, 7, 2))
    return _check(ln.gradient_flow(ws, X, Y, np.logspace(-1, 2.5, 6), rtol=1e-7, atol=1e-10,
                                   backend=backend,
                                   record=("weights", "modes", "conservation", "ntk"),
                                   probe=(X[:4], Y[:4])))


@case("linear_ssp_narrow", 1e-6)
def _(backend):
    X, Y, ws = _linear((5, 7, 7, 2))
    return _check(ln.gradient_flow(ws, X, Y, np.logspace(-1, 3, 9), rtol=1e-6, atol=1e-9,
                                   backend=backend, method="SSPRK104"))


@case("linear_ssp_wide", 1e-6)
def _(backend):
    X, Y, ws = _linear((16, 40, 40, 1), sigma=0.2)
    return _check(ln.gradient_flow(ws, X, Y, np.logspace(-1, 2.5, 8), rtol=1e-6, atol=1e-9,
                                   backend=backend, method="SSPRK104"))


@case("linear_dense_rk45", 1e-6)
def _(backend):
    X, Y, ws = _linear((5, 7, 7, 2))
    return _check(ln.gradient_flow(ws, X, Y, np.linspace(0.0, 60.0, 101), rtol=1e-6,
                                   atol=1e-9, backend=backend, method="RK45", dense=True))


@case("linear_dense_ssp_wide", 1e-6)
def _(backend):
    X, Y, ws = _linear((16, 40, 40, 1), sigma=0.2)
    return _check(ln.gradient_flow(ws, X, Y, np.linspace(1.0, 100.0, 60), rtol=1e-6,
                                   atol=1e-9, backend=backend, method="SSPRK104", dense=True))


@case("linear_dense_rk45_wide", 1e-6)
def _(backend):
    X, Y, ws = _linear((16, 40, 40, 1), sigma=0.2)
    return _check(ln.gradient_flow(ws, X, Y, np.linspace(1.0, 100.0, 60), rtol=1e-6,
                                   atol=1e-9, backend=backend, method="RK45", dense=True))


@case("linear_auto_switching", 1e-6)
def _(backend):
    # converged modes hold DOP853 at its stability limit long before t = 1e5: "auto"
    # switches to ROS34PW2 (and may switch back)
    X, y, _ = scalar_teacher(40, 10, 2.0, seed=0)
    ws = ln.init_network((10, 20, 20, 1), 0.3, seed=1)
    tr = ln.gradient_flow(ws, X, y, np.logspace(-1, 5, 13), rtol=1e-6, atol=1e-9,
                          backend=backend)
    assert "switched" in tr.message
    return _check(tr)


@case("linear_auto_wide", 1e-6)
def _(backend):
    X, Y, ws = _linear((16, 40, 40, 1), sigma=0.2)
    tr = ln.gradient_flow(ws, X, Y, np.logspace(-1, 4, 11), rtol=1e-6, atol=1e-9,
                          backend=backend)
    return _check(tr)


@case("linear_stop_loss", 1e-7)
def _(backend):
    # a stop rule takes a linear network onto the raw-sample loop ("linear" model)
    X, Y, ws = _linear((4, 6, 2))
    tr = ln.gradient_flow(ws, X, Y, [1.0, 1e3], rtol=1e-7, atol=1e-10, backend=backend,
                          method="DOP853", stop=("loss", 1e-4))
    assert tr.t_stop is not None
    return _check(tr)


@case("prepared_default", 1e-7)
def _(backend):
    X, Y, ws = _linear((5, 7, 7, 2))
    pf = ln.prepare_flow(X, Y, (5, 7, 7, 2), np.logspace(-1, 3, 9), rtol=1e-7, atol=1e-10,
                         backend=backend)
    return _check(pf.run(ws))


@case("prepared_rates_rk45", 1e-7)
def _(backend):
    X, Y, ws = _linear((5, 7, 2))
    pf = ln.prepare_flow(X, Y, (5, 7, 2), [0.0, 1.0, 10.0, 100.0], rtol=1e-7, atol=1e-10,
                         backend=backend, method="RK45", lr_scales=[0.5, 2.0])
    return _check(pf.run(ws))


# --------------------------------------------------------------------------------------
# the ensemble
# --------------------------------------------------------------------------------------
def _members(sizes, B, sigma, seed0=20):
    return [ln.init_network(sizes, sigma, seed=seed0 + b) for b in range(B)]


@case("ensemble_linear_auto_alpha", 1e-7)
def _(backend):
    X, Y, _ = _linear((4, 6, 2))
    nets = _members((4, 6, 2), 3, 0.3)
    return _check(ln.gradient_flow_ensemble(nets, X, Y, np.logspace(-1, 2.5, 6), rtol=1e-7,
                                            atol=1e-10, backend=backend,
                                            alpha=[0.5, 1.0, 2.0], centered=True,
                                            record=("outputs",)))


@case("ensemble_linear_batched", 1e-7)
def _(backend):
    X, Y, _ = _linear((4, 6, 2))
    nets = _members((4, 6, 2), 3, 0.3)
    return _check(ln.gradient_flow_ensemble(nets, X, Y, np.logspace(-1, 2, 5), rtol=1e-7,
                                            atol=1e-10, backend=backend, method="DOP853",
                                            record=("weights",)))


@case("ensemble_relu_biases", 1e-5)
def _(backend):
    X, Y = _mlp_data(P=12, seed=6)
    sizes = (3, 8, 1)
    nets = _members(sizes, 3, 1.0)
    bs = [_biases(sizes, 0.2, 30 + b) for b in range(3)]
    return _check(ln.gradient_flow_ensemble(nets, X, Y, [0.5, 2.0, 4.0], rtol=1e-7,
                                            atol=1e-10, backend=backend, activation="relu",
                                            biases_list=bs, kink_rtol=1e-5,
                                            record=("outputs",)))


@case("ensemble_tanh_alpha", 1e-7)
def _(backend):
    X, Y = _mlp_data()
    nets = _members((3, 8, 1), 3, 1.0)
    return _check(ln.gradient_flow_ensemble(nets, X, Y, [1.0, 5.0, 20.0], rtol=1e-7,
                                            atol=1e-10, backend=backend, activation="tanh",
                                            alpha=[0.5, 1.0, 4.0], method="RK45"))


# --------------------------------------------------------------------------------------
# the diagonal model
# --------------------------------------------------------------------------------------
@case("diagonal", 1e-9, backends=("numpy",))
def _(backend):
    rng = np.random.default_rng(40)
    X = rng.standard_normal((10, 12))
    beta = np.zeros(12)
    beta[:2] = [1.0, -0.5]
    tr = diagonal_flow(X, X @ beta, np.logspace(-1, 3, 9), alpha=0.1, rtol=1e-9, atol=1e-13)
    stopped = diagonal_flow(X, X @ beta, [1.0, 1e4], alpha=0.1, rtol=1e-9, atol=1e-13,
                            stop_loss=1e-6, lr_scales=[1.0, 2.0])
    assert tr.success and stopped.success
    return {"beta": tr.end_to_end[:, 0], "loss": tr.loss, "w_plus": tr.weights[0],
            "w_minus": tr.weights[1], "stopped_beta": stopped.end_to_end[:, 0],
            "nfev": np.array(tr.nfev)}


# --------------------------------------------------------------------------------------
def _path(name):
    return os.path.join(GOLDEN_DIR, f"{name}.npz")


#: Quantities compared in absolute terms: the conservation drift is itself an error of
#: the integration, of the order of rtol times the (here O(1)) weights squared.
ABSOLUTE = ("conservation",)


def rel_difference(a, b, absolute=False):
    """``max |a - b| / max |b|`` (``max |a - b|`` with ``absolute``, or for all-zero b)."""
    if not b.size:
        return 0.0
    diff = float(np.max(np.abs(a - b)))
    scale = 1.0 if absolute else float(np.max(np.abs(b)))
    return diff / scale if scale > 0 else diff


def differences(name):
    """``{field: difference in units of the case's tolerance}`` against the recording."""
    fn, tol, backend = CASES[name]
    got = fn(backend)
    gold = np.load(_path(name))
    assert set(got) == set(gold.files), (sorted(got), sorted(gold.files))
    out = {}
    for field in gold.files:
        if field == "nfev":
            continue
        assert got[field].shape == gold[field].shape, field
        out[field] = rel_difference(got[field], gold[field], field in ABSOLUTE) / tol
    return out, int(np.sum(got["nfev"])), int(np.sum(gold["nfev"]))


@pytest.mark.parametrize("name", sorted(CASES))
def test_path_matches_its_recording(name):
    if CASES[name][2] == "numba" and not numba_available():
        pytest.skip("numba not installed")
    diffs, _, _ = differences(name)
    bad = {f: d for f, d in diffs.items() if not d <= GOLDEN_RTOLS}
    assert not bad, bad


def test_recordings_see_a_looser_tolerance():
    """The comparison sees runs at a much looser tolerance (as a changed algorithm would
    move them): RK45 on the raw-sample loop at 1000x the rtol (the adaptive pairs meet
    their tolerance with a wide margin: 100x moves this one by 8 tolerances), and a kink
    flow at 100x the rtol and kink_rtol."""
    X, Y = _mlp_data(C=2)
    ws = ln.init_network((3, 10, 2), 1.0, seed=3)
    loose = ln.gradient_flow(ws, X, Y, np.logspace(-1, 1.5, 5), rtol=1e-4, atol=1e-7,
                             backend="numpy", method="RK45", activation=("softplus", 2.0),
                             alpha=0.5, centered=True, multipliers=[1.5, 0.7],
                             lr_scales=[2.0, 0.5])
    gold = np.load(_path("mlp_softplus_centered_rates-numpy"))
    assert rel_difference(fields(loose)["weights"], gold["weights"]) > GOLDEN_RTOLS * 1e-7
    X, Y = _mlp_data(P=12, seed=6)
    sizes = (3, 10, 10, 1)
    ws = ln.init_network(sizes, 1.2, seed=7)
    loose = ln.gradient_flow(ws, X, Y, [0.5, 2.0, 5.0], rtol=1e-6, atol=1e-9,
                             backend="numpy", method="DOP853", activation="relu",
                             biases=_biases(sizes, 0.2, 8), kink_rtol=1e-3)
    gold = np.load(_path("mlp_relu_kinks-numpy"))
    assert rel_difference(fields(loose)["weights"], gold["weights"]) > GOLDEN_RTOLS * 1e-5


def record(names=None):
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    for name in names or sorted(CASES):
        fn, _, backend = CASES[name]
        np.savez(_path(name), **fn(backend))
        print("recorded", name)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--record"]:
        record(sys.argv[2:])
    else:
        for name in sorted(CASES):
            diffs, nfev, nfev0 = differences(name)
            worst = max(diffs.values())
            print(f"{name:40s} max diff {worst:8.2e} tol   nfev {nfev:7d} (recorded {nfev0})")
