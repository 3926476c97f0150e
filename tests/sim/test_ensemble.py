"""The ensemble axis: each member of ``gradient_flow_ensemble`` against a tight separate run.

Tolerances are in units of the ensemble's ``rtol`` (``kink_rtol`` for ReLU, whose
accuracy near kinks is that of the low-order pair), against ``gradient_flow`` of the
same member at rtol 1e-11 (each member is the run ``gradient_flow`` makes of it, on
numba and on numpy: the reference is that path at a 1000x tighter tolerance).  Step
counts are compared only between runs of one compiled loop in one process.
"""
import numpy as np
import pytest

import linearnets as ln
from linearnets.sim.ensemble import EnsembleTrajectory, gradient_flow_ensemble

RTOL = 1e-8
ATOL = 1e-12
REF = dict(rtol=1e-11, atol=1e-15)
#: global error of a run at ``rtol`` in units of ``rtol`` (times the size of the quantity)
K_GLOBAL = 100.0


def _linear_data():
    X, y, _ = ln.scalar_teacher(30, 6, 1.0, seed=1)
    return X, y


def _mlp_data(P=24, D=4, labels=False):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((P, D))
    y = np.tanh(X[:, 0] - 0.5 * X[:, 1])
    if labels:
        y = np.where(y >= 0, 1.0, -1.0)
    return X, y


def _route(backend):
    """The backend an MLP ensemble reports: the compiled MLP where numba is installed (and
    not ``backend="numpy"``), else the numpy MLP."""
    return "numba" if backend != "numpy" and ln.backend.numba_available() else "numpy"


def _close(a, b, tol, what):
    scale = max(1.0, float(np.max(np.abs(b))))
    err = float(np.max(np.abs(a - b)))
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol:.3g} x {scale:.3g}"


@pytest.mark.parametrize("centered,backend,method,record", [
    (False, "numpy", "DOP853", ()), (True, "numpy", "DOP853", ()),     # numpy
    (True, "auto", "DOP853", ("weights",)),                             # compiled
    (False, "auto", "auto", ()), (True, "auto", "auto", ()),
    (True, "auto", "DOP853", ())])
def test_linear_members_match_separate_runs(centered, backend, method, record):
    X, y = _linear_data()
    t = np.geomspace(0.5, 60.0, 7)          # from t = 0, which is not an output time
    nets = [ln.init_network((6, 8, 5, 1), 0.3, seed=s) for s in range(4)]
    alpha = np.array([1.0, 0.5, 2.0, 1.3])
    kw = dict(multipliers=[1.0, 0.8, 1.1], centered=centered, lr_scales=[1.0, 2.0, 0.5])
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=RTOL, atol=ATOL, alpha=alpha,
                                 backend=backend, method=method, record=record, **kw)
    assert isinstance(ens, EnsembleTrajectory) and ens.model == "linear"
    assert ens.method == method
    if backend == "numpy":
        assert ens.backend == "numpy"
    if record:
        assert ens.weights_t[0].shape == (4, t.size, 8, 6)
        np.testing.assert_array_equal(ens.weights_t[-1][:, -1], ens.weights[-1])
    assert ens.all_success and ens.loss.shape == (4, t.size)
    assert ens.end_to_end.shape == (4, t.size, 1, 6)
    for b in range(4):
        ref = ln.gradient_flow(nets[b], X, y, t, alpha=float(alpha[b]), **kw, **REF)
        _close(ens.end_to_end[b], ref.end_to_end, K_GLOBAL * RTOL, f"end_to_end[{b}]")
        _close(ens.loss[b], ref.loss, K_GLOBAL * RTOL * ref.loss[0], f"loss[{b}]")
        for w, wr in zip(ens.weights, ref.weights):
            _close(w[b], wr, K_GLOBAL * RTOL, f"weights[{b}]")
    # the loss decreases and the members differ (the data are shared, the inits are not)
    assert np.all(np.diff(ens.loss, axis=1) <= 1e-12)
    assert np.ptp(ens.loss[:, 0]) > 0


def test_linear_member_route_matches_gradient_flow_and_probe():
    """Member by member (method 'auto'): each member against gradient_flow's own default run
    at a tight rtol, F on a probe = X_p end_to_end^T, and the failure of one member kept to it."""
    X, y = _linear_data()
    t = np.array([0.0, 2.0, 30.0, 400.0])    # t = 0 an output time; past convergence (stiff)
    nets = [ln.init_network((6, 10, 1), 0.2, seed=s) for s in range(3)]
    alpha = [0.5, 0.5, 2.0]                  # two preparations, one shared
    Xp = X[:4] * 1.5
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=RTOL, atol=ATOL, alpha=alpha, probe=Xp)
    assert ens.method == "auto" and ens.all_success and ens.outputs.shape == (3, 4, 4, 1)
    for b in range(3):
        ref = ln.gradient_flow(nets[b], X, y, t, alpha=alpha[b], **REF)
        _close(ens.end_to_end[b], ref.end_to_end, K_GLOBAL * RTOL, f"end_to_end[{b}]")
        _close(ens.loss[b], ref.loss, K_GLOBAL * RTOL * ref.loss[0], f"loss[{b}]")
        _close(ens.outputs[b], np.einsum("qd,tcd->tqc", Xp, ref.end_to_end),
               K_GLOBAL * RTOL, f"outputs[{b}]")
        m = ens.member(b)
        assert m.nfev == ens.nfev[b] > 0 and m.status is ln.FlowStatus.SUCCESS
    np.testing.assert_allclose(ens.end_to_end[:, 0], np.stack(
        [a * (n[1] @ n[0]) for a, n in zip(alpha, nets)]), rtol=1e-13, atol=0)  # t = 0: W(0)
    budget = int(ens.nsteps[0] + ens.nrejected[0])
    with pytest.warns(ln.FlowWarning, match="members"):
        short = gradient_flow_ensemble(nets, X, y, t, rtol=RTOL, atol=ATOL, alpha=alpha,
                                       max_steps=max(budget // 3, 1))
    assert not short.success[0] and short.status[0] is ln.FlowStatus.MAX_STEPS
    assert np.isnan(short.loss[0, -1]) and short.t_last[0] < t[-1]


def test_linear_batched_statistics_agree_with_raw_samples():
    """The sufficient-statistics ensemble against the raw-sample ensemble (model='mlp')."""
    X, y = _linear_data()
    t = [1.0, 5.0, 20.0]
    nets = [ln.init_network((6, 8, 1), 0.5, seed=s) for s in range(3)]
    alpha = [0.7, 1.0, 1.6]
    a = gradient_flow_ensemble(nets, X, y, t, rtol=1e-11, atol=1e-15, alpha=alpha,
                               centered=True)
    b = gradient_flow_ensemble(nets, X, y, t, rtol=1e-11, atol=1e-15, alpha=alpha,
                               centered=True, model="mlp")
    assert a.model == "linear" and b.model == "mlp"
    _close(a.end_to_end, b.end_to_end, 1e-8, "end_to_end")
    _close(a.loss, b.loss, 1e-8 * float(a.loss[0, 0]), "loss")


@pytest.mark.parametrize("backend", ["auto", "numpy"])
@pytest.mark.parametrize("activation", ["tanh", "softplus", ("leaky_relu", 0.1)])
def test_smooth_mlp_members_match_separate_runs(activation, backend):
    X, y = _mlp_data()
    t = np.array([0.25, 1.0, 3.0])
    B = 3
    nets = [ln.init_network((4, 12, 1), 1.0, seed=s) for s in range(B)]
    biases = [[0.1 * np.random.default_rng(10 + s).standard_normal(12)] for s in range(B)]
    alpha = np.array([1.0, 0.6, 1.8])
    # leaky_relu is piecewise smooth: accuracy kink_rtol near kinks
    rtol = 1e-6 if activation[0] == "leaky_relu" else RTOL
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=RTOL, atol=ATOL, activation=activation,
                                 biases_list=biases, alpha=alpha, centered=True,
                                 record=("outputs", "weights"), kink_rtol=rtol, backend=backend)
    assert ens.all_success and ens.model == "mlp" and ens.end_to_end is None
    assert ens.backend == _route(backend)
    assert ens.outputs.shape == (B, t.size, X.shape[0], 1)
    assert ens.weights_t[0].shape == (B, t.size, 12, 4) and ens.biases_t[0].shape == (B, t.size, 12)
    for b in range(B):
        ref = ln.gradient_flow(nets[b], X, y, t, activation=activation, biases=biases[b],
                               alpha=float(alpha[b]), centered=True, record=("outputs",),
                               kink_rtol=1e-9 if rtol > RTOL else None, **REF)
        _close(ens.outputs[b], ref.outputs, K_GLOBAL * rtol, f"outputs[{b}]")
        _close(ens.loss[b], ref.loss, K_GLOBAL * rtol * ref.loss[0], f"loss[{b}]")
        _close(ens.weights[0][b], ref.weights[0], K_GLOBAL * rtol, f"W1[{b}]")
        _close(ens.biases[0][b], ref.biases[0], K_GLOBAL * rtol, f"b1[{b}]")


@pytest.mark.parametrize("backend", ["auto", "numpy"])
def test_relu_members_match_separate_runs(backend):
    X, y = _mlp_data(P=16, D=3)
    t = np.array([0.5, 1.0])             # crossings, and some sliding along a kink
    B = 3
    nets = [ln.init_network((3, 10, 1), 1.0, seed=s) for s in range(B)]
    alpha = np.array([1.0, 0.8, 1.5])
    kink_rtol = 1e-6
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=RTOL, atol=ATOL, activation="relu",
                                 alpha=alpha, kink_rtol=kink_rtol, record=("outputs",),
                                 backend=backend)
    assert ens.all_success and ens.backend == _route(backend)
    assert np.sum(ens.kinks) > 0            # the test crosses kinks
    for b in range(B):
        ref = ln.gradient_flow(nets[b], X, y, t, activation="relu", alpha=float(alpha[b]),
                               record=("outputs",), kink_rtol=1e-9, **REF)
        _close(ens.outputs[b], ref.outputs, K_GLOBAL * kink_rtol, f"outputs[{b}]")
        _close(ens.weights[1][b], ref.weights[1], K_GLOBAL * kink_rtol, f"W2[{b}]")


@pytest.mark.parametrize("backend", ["auto", "numpy"])
def test_soft_hinge_members_match_separate_runs(backend):
    X, y = _mlp_data(labels=True)
    t = np.array([0.5, 2.0])
    nets = [ln.init_network((4, 10, 1), 1.0, seed=s) for s in range(3)]
    alpha = [1.0, 3.0, 10.0]
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=RTOL, atol=ATOL, activation="softplus",
                                 loss="soft_hinge", alpha=alpha, centered=True,
                                 record=("outputs",), backend=backend)
    assert ens.all_success and ens.backend == _route(backend)
    for b in range(3):
        ref = ln.gradient_flow(nets[b], X, y, t, activation="softplus", loss="soft_hinge",
                               alpha=alpha[b], centered=True, record=("outputs",), **REF)
        _close(ens.outputs[b], ref.outputs, K_GLOBAL * RTOL, f"outputs[{b}]")
        _close(ens.loss[b], ref.loss, K_GLOBAL * RTOL * ref.loss[0], f"loss[{b}]")


NEEDS_NUMBA = pytest.mark.skipif(not ln.backend.numba_available(), reason="needs numba")


@NEEDS_NUMBA
@pytest.mark.parametrize("case", ["relu_biases", "soft_hinge_probe"])
def test_mlp_member_route_is_gradient_flow_on_numba(case):
    # method "auto" on an MLP runs each member through gradient_flow's compiled MLP: the
    # same run (up to rounding), with every field the numpy route fills
    if case == "relu_biases":
        X, y = _mlp_data(P=16, D=3)
        t = np.array([0.25, 0.5, 1.0])
        kw = dict(activation="relu", kink_rtol=1e-6)
        shapes = (3, 10, 1)
        probe = None
    else:
        X, y = _mlp_data(labels=True)
        t = np.array([0.5, 2.0])
        kw = dict(activation="softplus", loss=("soft_hinge", 10.0), centered=True)
        shapes = (4, 10, 1)
        probe = 1.5 * X[:4]
    B = 3
    nets = [ln.init_network(shapes, 1.0, seed=s) for s in range(B)]
    biases = [[0.2 * np.random.default_rng(20 + s).standard_normal(10)] for s in range(B)]
    alpha = np.array([1.0, 0.7, 2.0])
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=1e-7, atol=1e-10, biases_list=biases,
                                 alpha=alpha, record=("weights", "outputs"), probe=probe, **kw)
    bat = gradient_flow_ensemble(nets, X, y, t, rtol=1e-7, atol=1e-10, biases_list=biases,
                                 alpha=alpha, record=("weights", "outputs"), probe=probe,
                                 backend="numpy", **kw)
    assert ens.backend == "numba" and bat.backend == "numpy" and ens.all_success
    assert ens.method == bat.method == "auto" and ens.model == bat.model == "mlp"
    for name in ("end_to_end", "biases", "weights_t", "biases_t", "outputs", "kinks",
                 "sliding_time", "fallback_steps", "weights0", "biases0"):
        assert (getattr(ens, name) is None) == (getattr(bat, name) is None), name
    assert ens.outputs.shape == bat.outputs.shape
    if case == "relu_biases":
        assert np.all(ens.kinks > 0) and np.any(ens.fallback_steps > 0)   # reaches kinks
    for b in range(B):
        ref = ln.gradient_flow(nets[b], X, y, t, rtol=1e-7, atol=1e-10, backend="numba",
                               biases=biases[b], alpha=float(alpha[b]), probe=probe,
                               record=("weights", "outputs"), **kw)
        m = ens.member(b)
        assert m.backend == ref.backend == "numba" and m.status is ref.status
        assert m.kinks == ref.kinks and m.fallback_steps == ref.fallback_steps
        # the same computation: agreement far inside one rtol of the run
        tol = 1e-7
        _close(m.loss, ref.loss, tol * ref.loss[0], f"loss[{b}]")
        _close(m.outputs, ref.outputs, tol, f"outputs[{b}]")
        _close(m.weights_t[0], ref.weights_t[0], tol, f"W1(t)[{b}]")
        _close(m.biases[0], ref.biases[0], tol, f"b1[{b}]")
        assert abs(m.sliding_time - ref.sliding_time) <= 1e-12 + 1e-9 * ref.sliding_time
        np.testing.assert_array_equal(m.weights0[0], nets[b][0])
        # and both routes meet the tolerance against each other (global error ~ K rtol)
        glob = K_GLOBAL * (1e-6 if case == "relu_biases" else 1e-7)
        _close(ens.outputs[b], bat.outputs[b], glob, f"routes, outputs[{b}]")


@NEEDS_NUMBA
@pytest.mark.parametrize("rtol", [1e-5, 1e-8])
def test_mlp_members_take_their_serial_steps(rtol):
    """'auto' at kinks: each member runs the explicit pair its serial run starts (and, its
    steps never capped, keeps): SSPRK104 at rtol >= AUTO_PAIR_RTOL, DOP853 below; the same
    compiled loop in one process, so the same steps, kinks and evaluations."""
    X, y = _mlp_data(P=16, D=3)
    t = np.array([0.25, 0.5, 1.0])
    nets = [ln.init_network((3, 10, 1), 1.0, seed=s) for s in range(3)]
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=rtol, atol=1e-10, activation="relu")
    assert ens.backend == "numba" and ens.all_success
    for b in range(3):
        ref = ln.gradient_flow(nets[b], X, y, t, rtol=rtol, atol=1e-10, activation="relu",
                               backend="numba")
        assert (ens.nfev[b], ens.nsteps[b], ens.kinks[b]) == (ref.nfev, ref.nsteps, ref.kinks)
        _close(ens.loss[b], ref.loss, 1e-12 * ref.loss[0], f"loss[{b}]")


@pytest.mark.parametrize("backend", ["auto", "numpy"])
def test_a_failing_mlp_member_leaves_the_others(backend):
    X, y = _mlp_data(P=16, D=3)
    t = [0.5, 1.0]
    nets = [ln.init_network((3, 10, 1), 1.0, seed=s) for s in range(3)]
    kw = dict(activation="relu", backend=backend)
    ok = gradient_flow_ensemble(nets, X, y, t, **kw)
    work = ok.nsteps + ok.nrejected
    assert ok.all_success and work.min() < work.max()
    with pytest.warns(ln.FlowWarning, match="2 of 3 members"):
        ens = gradient_flow_ensemble(nets, X, y, t, max_steps=int(work.min()), **kw)
    fast = work == work.min()
    assert list(ens.success) == list(fast) and not ens.all_success
    for b in np.flatnonzero(~fast):
        assert ens.status[b] is ln.FlowStatus.MAX_STEPS and np.isnan(ens.loss[b, -1])
        assert ens.t_last[b] < 1.0
    np.testing.assert_allclose(ens.loss[fast], ok.loss[fast], rtol=1e-10)


def test_stacked_input_member_view_and_probe():
    X, y = _mlp_data()
    t = [0.5, 1.0]
    nets = [ln.init_network((4, 6, 1), 1.0, seed=s) for s in range(3)]
    stacked = [np.stack([n[i] for n in nets]) for i in range(2)]
    a = gradient_flow_ensemble(nets, X, y, t, activation="tanh")
    b = gradient_flow_ensemble(stacked, X, y, t, activation="tanh")
    np.testing.assert_allclose(b.loss, a.loss, rtol=1e-12, atol=0)
    m = a.member(1)
    assert isinstance(m, ln.Trajectory) and m.loss.shape == (2,)
    np.testing.assert_array_equal(m.weights[0], a.weights[0][1])
    np.testing.assert_array_equal(a.weights0[0][2], nets[2][0])
    Xp = X[:5] * 2.0
    p = gradient_flow_ensemble(nets, X, y, t, activation="tanh", probe=Xp)
    assert p.outputs.shape == (3, 2, 5, 1)
    ref = ln.gradient_flow(nets[0], X, y, t, activation="tanh", probe=Xp, record=("outputs",),
                           **REF)
    _close(p.outputs[0], ref.outputs, K_GLOBAL * 1e-8, "probe outputs")


def test_a_failing_member_leaves_the_others():
    X, y = _linear_data()
    t = [1.0, 50.0]
    nets = [ln.init_network((6, 8, 1), 0.3, seed=s) for s in range(3)]
    nets[1] = [w * 3.0 for w in nets[1]]        # large weights: a stiffer flow, more steps
    ok = gradient_flow_ensemble(nets, X, y, t, rtol=1e-6, atol=1e-9)
    assert ok.all_success
    budget = int(np.max(ok.nsteps[[0, 2]] + ok.nrejected[[0, 2]]))
    assert ok.nsteps[1] + ok.nrejected[1] > budget
    with pytest.warns(ln.FlowWarning, match="1 of 3 members"):
        ens = gradient_flow_ensemble(nets, X, y, t, rtol=1e-6, atol=1e-9, max_steps=budget)
    with pytest.raises(ln.FlowError) as err:
        gradient_flow_ensemble(nets, X, y, t, rtol=1e-6, atol=1e-9, max_steps=budget,
                               raise_on_failure=True)
    assert err.value.trajectory.success.tolist() == ens.success.tolist()
    assert list(ens.success) == [True, False, True] and not ens.all_success
    assert ens.status[1] is ln.FlowStatus.MAX_STEPS and "max_steps" in ens.message[1]
    assert np.isnan(ens.loss[1, -1]) and ens.t_last[1] < 50.0
    np.testing.assert_allclose(ens.loss[[0, 2]], ok.loss[[0, 2]], rtol=1e-10)


def test_bad_input_names_the_argument():
    X, y = _linear_data()
    t = [1.0]
    nets = [ln.init_network((6, 8, 1), 0.3, seed=s) for s in range(3)]
    ragged = list(nets)
    ragged[2] = ln.init_network((6, 9, 1), 0.3, seed=2)
    with pytest.raises(ValueError, match=r"weights_list\[2\]"):
        gradient_flow_ensemble(ragged, X, y, t)
    with pytest.raises(ValueError, match=r"weights_list\[1\]"):
        gradient_flow_ensemble([nets[0], [nets[1][0]], nets[2]], X, y, t)
    with pytest.raises(ValueError, match="alpha"):
        gradient_flow_ensemble(nets, X, y, t, alpha=[1.0, 2.0])
    with pytest.raises(ValueError, match="alpha"):
        gradient_flow_ensemble(nets, X, y, t, alpha=[1.0, -2.0, 1.0])
    with pytest.raises(ValueError, match="alpha"):
        gradient_flow_ensemble(nets, X, y, t, alpha=np.ones((3, 1)))
    with pytest.raises(ValueError, match="weights_list"):
        gradient_flow_ensemble([], X, y, t)
    stacked = [np.stack([n[0] for n in nets]), np.stack([n[1] for n in nets[:2]])]
    with pytest.raises(ValueError, match=r"weights_list\[1\]"):
        gradient_flow_ensemble(stacked, X, y, t)
    with pytest.raises(ValueError, match="biases_list"):
        gradient_flow_ensemble(nets, X, y, t, activation="tanh", biases_list=[[np.zeros(8)]] * 2)
    with pytest.raises(ValueError, match=r"biases_list\[1\]"):
        gradient_flow_ensemble(nets, X, y, t, activation="tanh",
                               biases_list=[[np.zeros(8)], [np.zeros(7)], [np.zeros(8)]])
    with pytest.raises(ValueError, match=r"biases_list\[0\] must have shape \(3, 8\)"):
        gradient_flow_ensemble(nets, X, y, t, activation="tanh", biases_list=[np.zeros((3, 7))])
    with pytest.raises(ValueError, match=r"weights_list\[0\]\[1\] has shape"):
        gradient_flow_ensemble([stacked[0], np.zeros((3, 1, 7))], X, y, t)
    with pytest.raises(ValueError, match="record"):
        gradient_flow_ensemble(nets, X, y, t, record=("kernel",))
    with pytest.raises(ValueError, match="t_eval"):
        gradient_flow_ensemble(nets, X, y, [-1.0, 1.0])
    with pytest.raises(ValueError, match="rtol"):
        gradient_flow_ensemble(nets, X, y, t, rtol=0.0)
    with pytest.raises(ValueError, match="activation"):
        gradient_flow_ensemble(nets, X, y, t, activation="sigmoid")
    with pytest.raises(ValueError, match="X"):
        gradient_flow_ensemble(nets, X[:, :5], y, t)
    with pytest.raises(ValueError, match="backend"):
        gradient_flow_ensemble(nets, X, y, t, backend="cupy")
    with pytest.raises(ValueError, match="b must"):
        gradient_flow_ensemble(nets, X, y, t).member(3)


def test_sliding_relu_members_run_on_the_fallback():
    """The numpy route's kink fallback (``methods.base.integrate``'s): a member whose flow
    slides along kinks for most of t in [0, 2] (``test_rosw_general``'s sliding net) stays
    on the low-order pair while its steps' stages cross a switch, and each member is
    within 20 kink_rtol of a separate run 10x tighter in both tolerances."""
    rng = np.random.default_rng(0)
    ws = ln.init_network((3, 6, 6, 1), 1.0, seed=1)
    X, Y = rng.standard_normal((15, 3)), rng.standard_normal(15)
    bs = [0.3 * rng.standard_normal(6), 0.3 * rng.standard_normal(6)]
    t = np.array([0.5, 2.0])
    alpha = np.array([1.0, 1.2])
    kink_rtol = 1e-5
    ens = gradient_flow_ensemble([ws, ws], X, Y, t, rtol=1e-8, atol=1e-11, activation="relu",
                                 biases_list=[bs, bs], alpha=alpha, kink_rtol=kink_rtol,
                                 record=("outputs",), backend="numpy")
    assert ens.all_success and ens.backend == "numpy"
    for b in range(2):
        assert ens.sliding_time[b] > 1.5
        assert ens.fallback_steps[b] > 0.8 * ens.nsteps[b]
        ref = ln.gradient_flow(ws, X, Y, t, activation="relu", biases=bs, alpha=float(alpha[b]),
                               rtol=1e-9, atol=1e-12, kink_rtol=kink_rtol / 10,
                               max_steps=10 ** 6, record=("outputs",))
        assert ref.success
        _close(ens.outputs[b], ref.outputs, 20 * kink_rtol, f"outputs[{b}]")


def test_members_on_threads_share_the_loss_summary(monkeypatch):
    # the members of one preparation share its problem: two threads that both find its
    # summary missing both compute it, and it stays one (R, Z, res0)
    import threading
    import time

    from linearnets.sim.models import linear
    X, y = _linear_data()
    problem = linear.make_problem(((8, 6), (1, 8)), X, y.reshape(-1, 1))
    qr = linear.qr

    def slow_qr(*a, **kw):
        time.sleep(0.05)
        return qr(*a, **kw)
    monkeypatch.setattr(linear, "qr", slow_qr)
    out = []
    threads = [threading.Thread(target=lambda: out.append(problem.loss_summary()))
               for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert [len(s) for s in out] == [3, 3] and len(problem.loss_summary()) == 3


def test_compiled_loops_release_the_gil():
    # the members of a numba ensemble run on threads: every compiled loop's entry point
    # (``*advance*`` of the models' kernel modules) must be nogil
    if not ln.backend.numba_available():
        pytest.skip("numba is not installed")
    import importlib
    import pkgutil

    import linearnets.sim.models as models
    found = {}
    for m in pkgutil.iter_modules(models.__path__):
        if m.name.startswith("_") and m.name.endswith("_kernels"):
            mod = importlib.import_module(f"{models.__name__}.{m.name}")
            found.update({f"{m.name}.{name}": getattr(mod, name).targetoptions.get("nogil")
                          for name in dir(mod) if "advance" in name
                          and hasattr(getattr(mod, name), "targetoptions")})
    assert len(found) >= 4 and all(found.values()), found


@pytest.mark.parametrize("kw", [
    dict(record=("ntk", "modes", "conservation")),
    dict(stop=("relative_loss", 0.01), probe="Q"),
    dict(activation="relu", probe="Q", stop=("loss", 1e-3)),
    dict(dense=True, method="RK45"),
    dict(gd_lr=0.05, backend="numpy")])
def test_every_option_of_gradient_flow_member_by_member(kw):
    """What gradient_flow records of a member with ``record``, ``probe`` (outputs and NTK),
    ``stop``, ``dense`` and ``gd_lr``, the ensemble records of it: at the serial call's
    accuracy (same method and rtol: within K_GLOBAL rtol of the quantity's size)."""
    X, y = _linear_data()
    nets = [ln.init_network((6, 5, 1), 0.5, seed=s) for s in range(3)]
    if kw.get("probe") == "Q":
        kw = dict(kw, probe=np.random.default_rng(1).standard_normal((4, 6)))
    t = [0.5, 5.0, 50.0]
    ens = gradient_flow_ensemble(nets, X, y, t, rtol=RTOL, atol=ATOL, **kw)
    serial = dict(kw, method=kw.get("method", "auto"))
    if "probe" in kw:                      # the ensemble's probe records the outputs too
        serial["record"] = tuple(kw.get("record", ())) + ("outputs",)
    for b in range(3):
        tr = ln.gradient_flow(nets[b], X, y, t, rtol=RTOL, atol=ATOL, **serial)
        m = ens.member(b)
        assert m.success == tr.success
        for name in ("loss", "ntk", "ntk_norm", "outputs", "modes", "conservation", "t_stop"):
            a, c = getattr(m, name), getattr(tr, name)
            assert (a is None) == (c is None), name
            if a is not None:
                scale = np.nanmax(np.abs(c)) if np.ndim(c) else abs(c)
                np.testing.assert_allclose(a, c, rtol=0, atol=K_GLOBAL * RTOL * scale,
                                           equal_nan=True, err_msg=name)
    if "stop" in kw:
        assert ens.t_stop.shape == (3,) and np.all(ens.t_stop < t[-1])
    else:
        assert ens.t_stop is None
