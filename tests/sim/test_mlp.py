"""The MLP on the general simulator: trajectories against solve_ivp on the same right-hand
side, stop rules, recordings, the lazy limit, kinks of ReLU networks, the CuPy path."""
import types

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import linearnets as ln
from linearnets import backend as B
from linearnets.sim.methods import driver
from linearnets.sim.models import get_model, parse_options
from linearnets.network import init_network

ACTS = ["linear", "relu", ("leaky_relu", 0.1), "softplus", "tanh"]
OPTS = [dict(), dict(biases=True, alpha=1e-2, centered=True),
        dict(biases=True, alpha=1e2, centered=True, loss=("soft_hinge", 5.0)),
        dict(alpha=1e2, loss="soft_hinge", multipliers=(0.5, 2.0, 1.0), lr_scales=(1, 2, 0.5))]


def _data(P=15, D=3, N=6, C=1, seed=0, sigma=1.0):
    rng = np.random.default_rng(seed)
    ws = init_network((D, N, N, C), sigma, seed=seed + 1)
    X = rng.standard_normal((P, D))
    Y = rng.standard_normal((P, C))
    bs = [0.3 * rng.standard_normal(N), 0.3 * rng.standard_normal(N)]
    return ws, bs, X, Y


def _flat(traj, k):
    parts = [w[k].ravel() for w in traj.weights_t]
    parts += [b[k].ravel() for b in traj.biases_t or ()]
    return np.concatenate(parts)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("opt", range(len(OPTS)))
def test_trajectory_matches_solve_ivp(act, opt):
    """gradient_flow at rtol 1e-9 against scipy's DOP853 at rtol 1e-12 on the flattened
    parameters with the model's own right-hand side (the naive-gradient witness is in
    test_mlp_reference): the global error is a few tens of rtol of the state."""
    if opt and act in ("relu", ("leaky_relu", 0.1)):
        # these slide along a kink almost at once, where no method meets rtol 1e-12 (scipy's
        # DOP853 stalls): test_relu_random_data_reaches_kinks_and_finishes covers them
        pytest.skip("slides along a kink at once")
    kw = dict(OPTS[opt])
    ws, bs, X, Y = _data()
    if kw.pop("biases", False):
        kw["biases"] = bs
    if "loss" in kw:
        Y = np.sign(Y)
    # the rates scale as 1/alpha for alpha < 1 (dL/dtheta ~ (1/alpha) df/dtheta)
    # (ReLU-type: short, before sliding starts)
    horizon = [0.0, 0.1, 0.3] if act in ("relu", ("leaky_relu", 0.1)) else [0.0, 1.0, 5.0]
    te = np.array(horizon) * min(kw.get("alpha", 1.0), 1.0)
    rtol = 1e-9
    # kink_rtol = rtol: the few kinks crossed here (no sliding yet) at the same tolerance
    tr = ln.gradient_flow(ws, X, Y, te, rtol=rtol, atol=1e-14, backend="numpy", activation=act,
                          record=("weights",), kink_rtol=rtol, **kw)
    assert tr.success, tr.message
    opts = parse_options(3, activation=act, **{k: v for k, v in kw.items() if k != "biases"})
    net = get_model("mlp")(ws, kw.get("biases"), opts).prepare(X, Y)
    ref = solve_ivp(lambda t, y: net.rhs(y), (0, te[-1]), net.y0, t_eval=te, method="DOP853",
                    rtol=1e-12, atol=1e-14)
    assert ref.success
    size = np.max(np.abs(ref.y))
    for k in range(te.size):
        err = np.max(np.abs(_flat(tr, k) - ref.y[:, k]))
        assert err <= 50 * rtol * size, (k, err / (rtol * size), tr.kinks)
    # final parameters, biases and the initial state kept
    assert np.array_equal(tr.weights[0], tr.weights_t[0][-1])
    if tr.weights0 is not None:      # (None on the plain linear path: the caller has them)
        assert all(np.array_equal(a, b) for a, b in zip(tr.weights0, ws))
    if "biases" in kw:
        assert np.array_equal(tr.biases[1], tr.biases_t[1][-1])
        assert all(np.array_equal(a, b) for a, b in zip(tr.biases0, bs))


def _classification(P=24, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, 3))
    Y = np.sign(X @ np.array([1.0, -0.5, 0.3]))[:, None]
    return X, Y, init_network((3, 8, 1), 1.0, seed=seed)


def test_stop_at_margin():
    X, Y, ws = _classification()
    te = np.linspace(0, 400, 9)
    tr = ln.gradient_flow(ws, X, Y, te, backend="numpy", activation="tanh", loss="soft_hinge",
                          stop="margin", record=("outputs",), rtol=1e-9)
    assert tr.success and tr.t_stop is not None and 0 < tr.t_stop < te[-1], tr.message
    margins = (Y[None, :, 0] * tr.outputs[:, :, 0]).min(axis=1)
    after = te >= tr.t_stop
    assert np.all(margins[~after] < 1.0)
    # located inside its step: the smallest margin is 1 to the bisection's precision
    assert np.all(np.abs(margins[after] - 1.0) <= 1e-9)
    assert np.all(tr.outputs[after] == tr.outputs[after][0])
    assert np.all(tr.loss[after] == tr.loss[after][0]) and "stopped" in tr.message


def test_stop_at_loss_value():
    ws, bs, X, Y = _data(seed=2)
    tr = ln.gradient_flow(ws, X, Y, [0.0, 1.0, 1e3], backend="numpy", activation="softplus",
                          biases=bs, stop=("loss", 0.05), rtol=1e-9)
    assert tr.success and tr.t_stop is not None and 1.0 < tr.t_stop < 1e3
    assert tr.loss[1] > 0.05 and abs(tr.loss[2] - 0.05) <= 1e-9
    # the same on the linear network: the 'linear' model through the general loop
    lin = ln.gradient_flow(ws, X, Y, [0.0, 1e3], backend="numpy", stop=("loss", 1.0))
    assert lin.t_stop is not None and abs(lin.loss[-1] - 1.0) <= 1e-9
    assert lin.end_to_end is not None and lin.backend == "numpy"


def test_recordings():
    ws, bs, X, Y = _data(C=2, seed=5)
    Xp = np.random.default_rng(9).standard_normal((4, 3))
    Yp = np.ones((4, 2))
    kw = dict(activation="softplus", biases=bs, multipliers=(1.0, 0.5, 2.0), alpha=2.0)
    tr = ln.gradient_flow(ws, X, Y, [0.0, 0.5, 2.0], backend="numpy",
                          record=("weights", "outputs", "ntk"), probe=(Xp, Yp), **kw)
    assert tr.outputs.shape == (3, 4, 2) and tr.ntk.shape == (3, 4, 4, 2, 2)
    assert tr.biases_t[0].shape == (3, 6) and tr.end_to_end is None
    opts = parse_options(3, activation="softplus", multipliers=(1.0, 0.5, 2.0), alpha=2.0)
    for k in range(3):
        wk = [w[k] for w in tr.weights_t]
        bk = [b[k] for b in tr.biases_t]
        net = get_model("mlp")(wk, bk, opts)
        np.testing.assert_allclose(tr.outputs[k], net.outputs(net.y0, Xp), rtol=1e-13,
                                   atol=1e-14)
        np.testing.assert_allclose(tr.ntk[k], ln.empirical_ntk(wk, Xp, Xp, **{
            "activation": "softplus", "biases": bk, "multipliers": (1.0, 0.5, 2.0),
            "alpha": 2.0}), rtol=1e-13, atol=1e-14)
        assert tr.ntk_norm[k] == pytest.approx(np.linalg.norm(tr.ntk[k]))
    # without a probe, the outputs are on the training inputs
    tr2 = ln.gradient_flow(ws, X, Y, [0.0, 0.5], backend="numpy", record=("outputs",), **kw)
    assert tr2.outputs.shape == (2, X.shape[0], 2)
    assert np.all(np.isfinite(tr2.loss)) and tr2.loss[1] < tr2.loss[0]


def test_budget_failure_keeps_outputs():
    ws, bs, X, Y = _data()
    with pytest.warns(ln.FlowWarning, match="max_steps"):
        tr = ln.gradient_flow(ws, X, Y, [0.0, 1e-3, 50.0], backend="numpy", activation="tanh",
                              max_steps=20, first_step=1e-3, record=("outputs",))
    assert not tr.success and "max_steps" in tr.message
    assert np.all(np.isfinite(tr.outputs[:2])) and np.all(np.isnan(tr.outputs[2]))
    assert np.isnan(tr.loss[2])


def test_centered_large_alpha_approaches_the_linearised_model():
    """Centered, F = alpha (f - f_0): as alpha grows the flow approaches the linearised model
    dF/dt = -(eta/P) K_f (F - Y), K_f the NTK of f at t = 0 (so F_t = (I - e^{-eta K_f t/P})
    Y), with an error O(1/alpha) (Chizat et al.; Geiger et al.): the fitted slope of log
    error against log alpha over alpha = 10, 100, 1000 is -1."""
    ws, bs, X, Y = _data(P=12, N=10, seed=7)
    te = np.array([0.0, 2.0, 10.0])
    K = ln.empirical_ntk(ws, X, X, activation="softplus", biases=bs)
    lam, V = np.linalg.eigh(K)
    P = X.shape[0]
    lin = np.stack([V @ ((1 - np.exp(-lam * t / P)) * (V.T @ Y[:, 0])) for t in te])
    errs = []
    alphas = np.array([10.0, 100.0, 1000.0])
    for a in alphas:
        tr = ln.gradient_flow(ws, X, Y, te, backend="numpy", activation="softplus", biases=bs,
                              alpha=a, centered=True, record=("outputs",), rtol=1e-11)
        assert tr.success
        errs.append(np.max(np.abs(tr.outputs[:, :, 0] - lin)))
    slope = np.polyfit(np.log(alphas), np.log(errs), 1)[0]
    assert -1.15 <= slope <= -0.85, (slope, errs)


def _relu_problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 4))
    Y = rng.standard_normal((20, 1))
    return init_network((4, 8, 8, 1), 1.0, seed=3), X, Y


def test_relu_random_data_reaches_kinks_and_finishes():
    """Random data drive a ReLU network onto kinks, where it slides for most of the run.
    With kink_rtol 1e-3 it finishes in a few dozen steps, and agrees with a run at kink_rtol
    1e-5 (error ~kink_rtol there) within 10 kink_rtol of the outputs' size: the per-step
    chatter of kink_rtol times the state, over a sliding stretch of ~3 time units."""
    ws, X, Y = _relu_problem()
    te = np.array([0.0, 0.5, 1.0, 3.0])
    kw = dict(backend="numpy", activation="relu", record=("outputs",), rtol=1e-8)
    tr = ln.gradient_flow(ws, X, Y, te, kink_rtol=1e-3, max_steps=2000, **kw)
    assert tr.success, tr.message
    assert tr.kinks > 10 and tr.sliding_time > 1.0 and tr.fallback_steps > 0
    assert "kink" in tr.message
    ref = ln.gradient_flow(ws, X, Y, te, kink_rtol=1e-5, max_steps=20000, **kw)
    assert ref.success
    size = np.max(np.abs(ref.outputs))
    assert np.max(np.abs(tr.outputs - ref.outputs)) <= 10 * 1e-3 * size
    assert np.all(np.diff(tr.loss) < 0)


def test_cupy_path_with_numpy_standin(monkeypatch):
    """backend='cupy' runs the numpy reference on the device's namespace: with numpy standing
    in for CuPy it gives what numpy gives."""
    shim = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("_")})
    shim.asnumpy = lambda a: np.array(a, dtype=np.float64, copy=True)
    monkeypatch.setattr(B, "get_cupy", lambda: shim)
    ws, bs, X, Y = _data(seed=1)
    kw = dict(activation="tanh", biases=bs, record=("outputs", "ntk", "weights"), rtol=1e-9)
    a = ln.gradient_flow(ws, X, Y, [0.0, 0.5, 2.0], backend="cupy", **kw)
    b = ln.gradient_flow(ws, X, Y, [0.0, 0.5, 2.0], backend="numpy", **kw)
    assert a.backend == "cupy" and a.success
    np.testing.assert_allclose(a.outputs, b.outputs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.ntk, b.ntk, rtol=1e-12, atol=0)


def test_cupy_unavailable_is_a_clear_valueerror():
    if B.gpu_available():
        pytest.skip("a GPU is present")
    ws, bs, X, Y = _data()
    with pytest.raises(ValueError, match="(?i)cupy|gpu"):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], backend="cupy", activation="relu")


def test_methods_on_the_general_path():
    ws, bs, X, Y = _data(seed=3)
    outs = {}
    for m in ("DOP853", "RK45", "BS32", "SSPRK104", "auto", "ROS34PW2"):
        tr = ln.gradient_flow(ws, X, Y, [0.0, 1.0], backend="numpy", activation="tanh",
                              method=m, record=("outputs",), rtol=1e-9)
        assert tr.success
        outs[m] = tr.outputs[-1]
    for m, o in outs.items():
        assert np.max(np.abs(o - outs["DOP853"])) <= 100 * 1e-9 * np.max(np.abs(o)), m
    with pytest.raises(ValueError, match="method"):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], backend="numpy", activation="tanh",
                         method="ROS34PW3")
    with pytest.raises(ValueError, match="dense"):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], backend="numpy", activation="tanh", dense=True,
                         method="DOP853")
    # dense output interpolates RK45's steps (order 4): within a few rtol of stepping onto
    # every output
    grid = np.linspace(0.0, 1.0, 41)
    dense = ln.gradient_flow(ws, X, Y, grid, backend="numpy", activation="tanh", dense=True,
                             method="RK45", record=("outputs",), rtol=1e-9)
    step = ln.gradient_flow(ws, X, Y, grid, backend="numpy", activation="tanh",
                            method="RK45", record=("outputs",), rtol=1e-9)
    assert dense.dense and dense.nfev < step.nfev
    size = np.max(np.abs(step.outputs))
    assert np.max(np.abs(dense.outputs - step.outputs)) <= 100 * 1e-9 * size


# ------------------------------------------------------------------ the compiled model
NB_ACTS = ["linear", "relu", ("leaky_relu", 0.1), ("softplus", 2.0), "tanh"]
NB_CASES = [(act, b, a, c, loss) for act in NB_ACTS for b in (False, True)
            for a in (1e-2, 1.0, 1e2) for c in (False, True)
            for loss in ("mse", ("soft_hinge", 5.0))]


def _nb_problem(act, biases, alpha, centered, loss, seed=0, C=None):
    rng = np.random.default_rng(seed)
    C = (2 if loss == "mse" else 1) if C is None else C
    ws = init_network((3, 7, 5, C), 1.0, seed=seed + 1)
    bs = [0.3 * rng.standard_normal(7), 0.3 * rng.standard_normal(5)] if biases else None
    X = rng.standard_normal((11, 3))
    Y = rng.standard_normal((11, C)) if loss == "mse" else np.sign(rng.standard_normal((11, 1)))
    opts = parse_options(3, activation=act, alpha=alpha, centered=centered, loss=loss,
                         multipliers=(0.8, 1.3, 0.7), lr_scales=(1.0, 0.5, 2.0), eta=0.7)
    return ws, bs, X, Y, opts


@pytest.mark.parametrize("act,biases,alpha,centered,loss", NB_CASES)
def test_numba_model_equals_reference(act, biases, alpha, centered, loss):
    """MLPNumba's rhs, gradient, loss, margins and switch pattern against the numpy MLP at a
    perturbed state, for every activation x biases x alpha x centered x loss (multipliers
    and lr_scales on): the same sums in another order (BLAS vs numpy, a fused softplus),
    so a few ulps of the largest entry; a wrong term would be O(1) off."""
    pytest.importorskip("numba")
    from linearnets.sim.models.mlp import MLP, MLPNumba
    ws, bs, X, Y, opts = _nb_problem(act, biases, alpha, centered, loss)
    ref = MLP(ws, bs, opts).prepare(X, Y)
    nb = MLPNumba(ws, bs, opts).prepare(X, Y)
    y = ref.y0 + 0.2 * np.random.default_rng(3).standard_normal(ref.y0.size)
    tol = 1e-13
    for a, b in ((ref.rhs(y), nb.rhs(y)), (ref.gradient(y), nb.gradient(y))):
        assert np.max(np.abs(a - b)) <= tol * np.max(np.abs(a))
    # the pattern of the latest gradient call (the same state for both)
    if ref.smooth:
        assert nb.switches() is None
    else:
        assert np.array_equal(nb.switches(), ref.switches())
    assert nb.loss(y) == pytest.approx(ref.loss(y), rel=tol)
    if loss != "mse":
        np.testing.assert_allclose(nb.margins(y), ref.margins(y), rtol=0,
                                   atol=tol * np.max(np.abs(ref.margins(y))))
    # centered: F = alpha (f - f_0) vanishes at t = 0 on both
    if centered:
        assert nb.loss(nb.y0) == pytest.approx(ref.loss(ref.y0), rel=tol)
    # rhs into a caller's buffer
    out = np.empty_like(y)
    assert nb.rhs(y, out) is out and np.max(np.abs(out - ref.rhs(y))) <= tol * np.max(np.abs(out))


NB_FLOW = [("tanh", False, 1.0, False, "mse"), (("softplus", 2.0), True, 1e-2, True, "mse"),
           ("linear", True, 1e2, True, ("soft_hinge", 5.0)),
           (("softplus", 2.0), False, 1e2, False, ("soft_hinge", 5.0)),
           ("relu", True, 1.0, False, "mse"), (("leaky_relu", 0.1), False, 1e2, True, "mse")]


@pytest.mark.parametrize("case", NB_FLOW, ids=[str(i) for i in range(len(NB_FLOW))])
def test_numba_trajectory_equals_reference(case):
    """gradient_flow on backend 'numba' against 'numpy' (rtol 1e-9): the same vector field to
    rounding, so the two runs differ by at most the sum of their global errors, each within
    50 rtol of the state (test_trajectory_matches_solve_ivp): 100 rtol.  ReLU-type: a
    horizon before sliding, kinks at kink_rtol = rtol.  Every recording agrees."""
    pytest.importorskip("numba")
    act, biases, alpha, centered, loss = case
    ws, bs, X, Y, opts = _nb_problem(act, biases, alpha, centered, loss, seed=2)
    kinked = act in ("relu", ("leaky_relu", 0.1))
    te = np.array([0.0, 0.1, 0.3] if kinked else [0.0, 1.0, 4.0]) * min(alpha, 1.0)
    rtol = 1e-9
    kw = dict(activation=act, biases=bs, alpha=alpha, centered=centered, loss=loss,
              multipliers=(0.8, 1.3, 0.7), lr_scales=(1.0, 0.5, 2.0), eta=0.7, rtol=rtol,
              atol=1e-14, kink_rtol=rtol, record=("weights", "outputs", "ntk"))
    a = ln.gradient_flow(ws, X, Y, te, backend="numpy", **kw)
    b = ln.gradient_flow(ws, X, Y, te, backend="numba", **kw)
    assert a.success and b.success, (a.message, b.message)
    assert a.backend == "numpy" and b.backend == "numba"
    bound = 100 * rtol
    for wa, wb in zip(a.weights_t, b.weights_t):
        assert np.max(np.abs(wa - wb)) <= bound * np.max(np.abs(wa))
    for ba, bb in zip(a.biases_t or (), b.biases_t or ()):
        assert np.max(np.abs(ba - bb)) <= bound * max(np.max(np.abs(ba)), 1.0)
    scale = np.max(np.abs(a.outputs[1:]))
    assert np.max(np.abs(a.outputs - b.outputs)) <= bound * scale
    assert np.max(np.abs(a.ntk - b.ntk)) <= bound * np.max(np.abs(a.ntk))
    np.testing.assert_allclose(b.loss, a.loss, rtol=bound)
    # the run moved: a wrong right-hand side would be seen
    assert np.max(np.abs(a.outputs[-1] - a.outputs[0])) > 0.05 * scale


def test_numba_backend_stop_rules_and_auto():
    """The stop rules on the compiled model (margin located to 1e-9; the loss threshold),
    'auto' picking it, a ReLU run that slides agreeing with numpy within the kink
    tolerance, and the 'linear' model (no compiled twin) saying numpy."""
    pytest.importorskip("numba")
    X, Y, ws = _classification()
    te = np.linspace(0, 400, 9)
    tr = ln.gradient_flow(ws, X, Y, te, backend="numba", activation="tanh", loss="soft_hinge",
                          stop="margin", record=("outputs",), rtol=1e-9)
    assert tr.success and tr.backend == "numba" and 0 < tr.t_stop < te[-1], tr.message
    margins = (Y[None, :, 0] * tr.outputs[:, :, 0]).min(axis=1)
    after = te >= tr.t_stop
    assert np.all(margins[~after] < 1.0) and np.all(np.abs(margins[after] - 1.0) <= 1e-9)
    ref = ln.gradient_flow(ws, X, Y, te, backend="numpy", activation="tanh",
                           loss="soft_hinge", stop="margin", record=("outputs",), rtol=1e-9)
    # the stop time is a root of a smooth function of the state: within the state's error
    assert abs(tr.t_stop - ref.t_stop) <= 1e-6 * ref.t_stop

    ws2, bs, X2, Y2 = _data(seed=2)
    lo = ln.gradient_flow(ws2, X2, Y2, [0.0, 1.0, 1e3], backend="auto", activation="softplus",
                          biases=bs, stop=("loss", 0.05), rtol=1e-9)
    assert lo.backend == "numba" and lo.t_stop is not None and abs(lo.loss[2] - 0.05) <= 1e-9

    wr, Xr, Yr = _relu_problem()
    kw = dict(activation="relu", record=("outputs",), rtol=1e-8, kink_rtol=1e-3, max_steps=2000)
    te = np.array([0.0, 0.5, 1.0, 3.0])
    a = ln.gradient_flow(wr, Xr, Yr, te, backend="numpy", **kw)
    b = ln.gradient_flow(wr, Xr, Yr, te, backend="numba", **kw)
    assert a.success and b.success and b.kinks > 10 and b.sliding_time > 1.0
    # each within ~kink_rtol per step of the Filippov solution over ~3 sliding time units
    # (test_relu_random_data_reaches_kinks_and_finishes): 10 kink_rtol of the outputs
    size = np.max(np.abs(a.outputs))
    assert np.max(np.abs(a.outputs - b.outputs)) <= 10 * 1e-3 * size

    lin = ln.gradient_flow(ws2, X2, Y2, [0.0, 1.0], backend="numba", stop=("loss", 1e-9))
    assert lin.backend == "numba"


CL_ACTS = ["linear", "relu", ("leaky_relu", 0.1), "softplus", "tanh"]
#: (biases, alpha, centered, loss, stop, horizon) of the compiled-loop agreement test
CL_OPTS = [(True, 1.0, False, "mse", None, 2.0),
           (False, 0.1, True, "mse", None, 0.2),
           (True, 10.0, True, "mse", ("loss", 1e-3), 2.0),
           (False, 1.0, False, ("soft_hinge", 5.0), "margin", 60.0)]


# the soft-hinge runs of the ReLU-type nets slide along kinks most of their horizon: slow
CL_CASES = [pytest.param(act, opt, marks=pytest.mark.slow)
            if act in ("relu", ("leaky_relu", 0.1)) and CL_OPTS[opt][4] == "margin"
            else (act, opt) for opt in range(len(CL_OPTS)) for act in CL_ACTS]


@pytest.mark.parametrize("act,opt", CL_CASES)
def test_compiled_loop_agrees_with_numpy(act, opt, monkeypatch):
    """The compiled stepping loop of the MLP (numba: ``_mlp_kernels.erk_advance_smooth`` /
    ``erk_advance_kinks``, no Python per step) against the numpy model in ``integrate``,
    every activation x biases, alpha and centring, the soft hinge, both stop rules.

    The same algorithm on the same vector field, rounded otherwise: smooth runs (rtol 1e-9)
    differ by at most the sum of their global errors, 100 rtol as in
    test_numba_trajectory_equals_reference (measured: below 1e-3 rtol).  Across kinks each
    crossing or chattering step is accurate to ~kink_rtol (1e-6) and the two runs' steps
    part at the first rounding-decided crossing: 50 kink_rtol (measured: at most 13, on a
    soft-hinge ReLU run crossing ~150 switches; 0-5 elsewhere).  The kink counts and the
    fallback's steps agree within 15 % + 3, stops within 1e-7 of their time (the bound
    above where kinks were crossed).  The soft-hinge runs of the ReLU-type nets slide
    along kinks for most of their horizon (numpy: up to 2 minutes): slow tests.
    """
    pytest.importorskip("numba")
    biases, alpha, centered, loss, stop, horizon = CL_OPTS[opt]
    kinked = act in ("relu", ("leaky_relu", 0.1))
    rng = np.random.default_rng(3)
    ws = init_network((3, 9, 7, 1), 1.0, seed=4)
    bs = [0.3 * rng.standard_normal(9), 0.3 * rng.standard_normal(7)] if biases else None
    X = rng.standard_normal((16, 3))
    beta = np.array([1.0, -0.5, 0.3])
    Y = (np.tanh(X @ beta) if loss == "mse" else np.sign(X @ beta))[:, None]
    rtol = 1e-9
    kink_rtol = 1e-6 if kinked else None
    te = np.array([0.0, 0.25, 1.0]) * horizon
    kw = dict(activation=act, biases=bs, alpha=alpha, centered=centered, loss=loss, stop=stop,
              rtol=rtol, atol=1e-13, kink_rtol=kink_rtol, record=("outputs", "weights"))
    a = ln.gradient_flow(ws, X, Y, te, backend="numpy", **kw)

    def no_python_loop(*args, **kwargs):
        raise AssertionError("the numba MLP stepped in the Python loop")
    monkeypatch.setattr(driver, "integrate", no_python_loop)
    b = ln.gradient_flow(ws, X, Y, te, backend="numba", **kw)
    assert a.success and b.success, (a.message, b.message)
    assert b.backend == "numba"
    bound = 50 * kink_rtol if kinked else 100 * rtol
    scale = np.max(np.abs(a.outputs))
    assert np.max(np.abs(a.outputs - b.outputs)) <= bound * scale
    for wa, wb in zip(a.weights_t, b.weights_t):
        assert np.max(np.abs(wa - wb)) <= bound * np.max(np.abs(wa))
    np.testing.assert_allclose(b.loss, a.loss, rtol=bound, atol=bound * a.loss[0])
    assert abs(a.kinks - b.kinks) <= 0.15 * a.kinks + 3
    assert abs(a.fallback_steps - b.fallback_steps) <= 0.15 * a.fallback_steps + 3
    assert (a.kinks > 0) == kinked and (b.fallback_steps > 0) == kinked
    assert (a.t_stop is None) == (b.t_stop is None) == (stop is None)
    if stop is not None:
        assert abs(a.t_stop - b.t_stop) <= (bound if kinked else 1e-7) * a.t_stop
        assert "stopped at t" in b.message
    if kinked:
        assert "kink crossings" in b.message
