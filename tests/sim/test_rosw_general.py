"""ROS34PW2 on the general simulator (``sim/methods/rosw.py``): the stepper on its own, and
``gradient_flow(..., method="ROS34PW2")`` on nonlinear networks against solve_ivp."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

import linearnets as ln
from linearnets.backend import numba_available
from linearnets.sim import methods
from linearnets.sim.methods import StepControl, StepperOptions, integrate
from linearnets.sim.methods.rosw import (FAILED_SOLVE_ERR, ROS34PW2, ROSENBROCK,
                                         RosenbrockWStepper)
from linearnets.sim.models import get_model, parse_options
from linearnets.network import check_biases


# ------------------------------------------------------------------ the stepper alone
def _linear_problem(n=12, seed=0, lam_max=1e3, uniform=False):
    """``y' = -R H y`` with H SPD (eigenvalues 1 .. lam_max) and R a positive diagonal."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    H = (Q * np.geomspace(1.0, lam_max, n)) @ Q.T
    R = np.ones(n) if uniform else rng.uniform(0.2, 2.0, n)
    J = -(R[:, None] * H)
    return J, R, rng.standard_normal(n)


def _run(J, y0, T, cls, rtol, atol=1e-12, max_steps=100_000):
    calls = [0]

    def rhs(t, y):
        calls[0] += 1
        return J @ y
    out = {}
    res = integrate(rhs, y0, np.array([T]), cls, StepperOptions(rtol=rtol, atol=atol,
                                                                max_steps=max_steps),
                    lambda k, y: out.__setitem__(k, y.copy()))
    return res, out.get(0), calls[0]


@pytest.mark.parametrize("uniform", [True, False])
def test_linear_ode_against_expm_and_honest_nfev(uniform):
    """Non-symmetric J = -R H solved by CG in the R^-1 metric: error in units of rtol, and
    ``nfev`` equal to the right-hand-side calls (finite-difference products included)."""
    J, R, y0 = _linear_problem(uniform=uniform, lam_max=1e5)
    T = 2.0
    exact = expm(J * T) @ y0
    cls = ROS34PW2.bind(metric=None if uniform else 1.0 / R)
    steps = {}
    for rtol in (1e-5, 1e-7):
        res, y, calls = _run(J, y0, T, cls, rtol)
        assert res.status.success
        err = np.abs(y - exact).max() / np.abs(y0).max()
        assert err < 30 * rtol
        assert res.nfev == calls
        steps[rtol] = res.nsteps
    # |lambda|_max T >= 4e4: an explicit method needs >= 4e4 / boundary (~6) steps
    lam = np.abs(np.linalg.eigvals(J)).max()
    assert steps[1e-5] < lam * T / 6.4 / 20, (steps, lam)


def test_exact_jvp_counts_products():
    J, R, y0 = _linear_problem(uniform=False)
    nj = [0]

    def jvp(y, v):
        nj[0] += 1
        return J @ v
    cls = ROS34PW2.bind(jvp=jvp, metric=1.0 / R)
    res, y, calls = _run(J, y0, 2.0, cls, 1e-6)
    assert res.status.success
    assert res.nfev == calls + nj[0]
    assert np.abs(y - expm(2.0 * J) @ y0).max() < 30e-6 * np.abs(y0).max()


def test_failed_krylov_solve_rejects_and_shrinks():
    """A solve that cannot converge returns a finite error norm: the loop shrinks the step
    (the run still succeeds on small steps) and never reports a non-finite state."""
    J, R, y0 = _linear_problem(uniform=True, lam_max=1e4)
    Starved = type("Starved", (ROS34PW2.bind(),), dict(max_krylov=2))
    st = Starved(lambda t, y: J @ y, y0.size, 1e-6, 1e-12)
    f = J @ y0
    _, _, err = st.attempt(0.0, y0, f, 1.0)
    assert err == FAILED_SOLVE_ERR and st.n_failed == 1
    res, y, _ = _run(J, y0, 0.05, Starved, 1e-6)
    assert res.status.success and res.nrejected >= 1
    assert np.abs(y - expm(0.05 * J) @ y0).max() < 30e-6 * np.abs(y0).max()


def test_registry():
    assert ROSENBROCK["ROS34PW2"] is ROS34PW2
    assert issubclass(ROS34PW2, RosenbrockWStepper)
    assert "ROS34PW2" in ln.sim.flow.METHODS


# ------------------------------------------------------------------ networks vs solve_ivp
def _net_problem(act, biases, P=24, sizes=(4, 10, 10, 1), seed=3, hinge=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, sizes[0]))
    if hinge:
        Y = np.sign(X[:, :1] + 0.3 * X[:, 1:2] + 1e-3)
    else:
        Y = np.tanh(X[:, :1] - 0.5 * X[:, 1:2])
    ws = ln.init_network(sizes, 1.2, seed=seed)
    bs = [0.1 * rng.standard_normal(s) for s in sizes[1:-1]] if biases else None
    return ws, bs, X, Y


def _reference(ws, bs, X, Y, t_eval, kw, rtol=1e-12):
    """solve_ivp DOP853 on the flattened parameters with the model's numpy rhs."""
    opts = parse_options(len(ws), **{k: v for k, v in kw.items()
                                     if k in ("activation", "alpha", "centered", "loss",
                                              "lr_scales", "multipliers")})
    net = get_model("mlp")(ws, check_biases(bs, tuple(w.shape for w in ws)), opts)
    net.prepare(X, Y)
    sol = solve_ivp(lambda t, y: net.rhs(y), (0.0, t_eval[-1]), net.y0, method="DOP853",
                    t_eval=t_eval, rtol=rtol, atol=1e-14)
    assert sol.success
    return np.stack([net.outputs(y, X) for y in sol.y.T]), net


CASES = [
    ("tanh", False, None), ("tanh", True, (1.0, 3.0, 0.5)),
    (("softplus", 2.0), False, (0.5, 1.0, 4.0)), (("softplus", 2.0), True, None),
    ("relu", False, None), ("relu", True, (2.0, 0.5, 1.0)),
]


@pytest.mark.parametrize("act,biases,lr", CASES)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("jvp", ["finite_differences", "model"])
def test_trajectory_against_solve_ivp(act, biases, lr, backend, jvp, monkeypatch):
    monkeypatch.setattr(methods.driver, "ROSENBROCK_JVP", jvp)
    if backend == "numba" and not numba_available():
        pytest.skip("numba not installed")
    kinked = act == "relu"
    # ReLU: random data that reaches kinks (and slides along them for most of the run)
    ws, bs, X, Y = (_net_problem(act, biases, seed=4, P=16) if kinked
                    else _net_problem(act, biases))
    t_eval = np.array([0.0, 0.5, 1.0]) if kinked else np.array([0.0, 0.5, 2.0])
    kw = dict(activation=act, lr_scales=lr)
    Fref, _ = _reference(ws, bs, X, Y, t_eval, kw, rtol=1e-10 if kinked else 1e-12)
    rtol, kink_rtol = 1e-7, 1e-5
    tr = ln.gradient_flow(ws, X, Y, t_eval, rtol=rtol, atol=1e-12, kink_rtol=kink_rtol,
                          method="ROS34PW2", biases=bs, record=("outputs",),
                          backend=backend, **kw)
    assert tr.success and tr.method == "ROS34PW2"
    assert tr.backend == backend
    err = np.abs(tr.outputs - Fref).max() / np.abs(Fref).max()
    if kinked:
        # accuracy O(kink_rtol) near kinks (methods/base.py); measured <= 4.3 kink_rtol
        assert tr.kinks > 0 and tr.sliding_time > 0
        assert err < 20 * kink_rtol, err
    else:
        # global error a few rtol over the run; measured below 10 rtol
        assert err < 100 * rtol, err


def test_soft_hinge_margin_stop_against_solve_ivp():
    ws, _, X, Y = _net_problem("tanh", False, hinge=True)
    kw = dict(activation="tanh", loss=("soft_hinge", 5.0), alpha=1.0)
    rtol = 1e-7
    tr = ln.gradient_flow(ws, X, Y, [0.0, 50.0], rtol=rtol, atol=1e-12, method="ROS34PW2",
                          record=("outputs",), stop="margin", **kw)
    assert tr.success and tr.t_stop is not None and 0 < tr.t_stop < 50
    margins = (Y * tr.outputs[-1]).ravel()
    assert margins.min() == pytest.approx(1.0, abs=1e-6)
    Fref, _ = _reference(ws, None, X, Y, np.array([0.0, tr.t_stop]), kw)
    err = np.abs(tr.outputs[-1] - Fref[-1]).max() / np.abs(Fref[-1]).max()
    assert err < 100 * rtol, err


def test_numba_and_numpy_agree():
    if not numba_available():
        pytest.skip("numba not installed")
    ws, bs, X, Y = _net_problem(("softplus", 2.0), True)
    outs = {}
    rtol = 1e-8
    for be in ("numpy", "numba"):
        tr = ln.gradient_flow(ws, X, Y, [0.0, 1.0, 3.0], rtol=rtol, method="ROS34PW2",
                              biases=bs, activation=("softplus", 2.0), backend=be,
                              lr_scales=(1.0, 2.0, 0.5), record=("outputs",))
        assert tr.success and tr.backend == be
        outs[be] = tr.outputs
    assert np.abs(outs["numpy"] - outs["numba"]).max() < 10 * rtol * np.abs(outs["numpy"]).max()


# ------------------------------------------------------------------ stiffness
def _lambda_max(net, y, iterations=60, seed=0):
    """Largest |eigenvalue| of J = d rhs / dy at y (power iteration on FD products)."""
    v = np.random.default_rng(seed).standard_normal(y.size)
    f = net.rhs(y).copy()
    lam = 0.0
    for _ in range(iterations):
        v /= np.linalg.norm(v)
        eps = 1e-7 * (1 + np.linalg.norm(y))
        w = (net.rhs(y + eps * v) - f) / eps
        lam = np.linalg.norm(w)
        v = w
    return lam


def test_stiff_problem_far_fewer_evaluations():
    """A fast last layer (lr_scales 1, 1e4) makes a smooth net stiff (|lambda| ~ 2.4e4, the
    last layer's rate times its feature Gram's top eigenvalue): explicit steps are held to
    ``boundary / |lambda|``; ROS34PW2's are not (measured ~9x fewer evaluations than the
    floor)."""
    ws, bs, X, Y = _net_problem("tanh", False, P=30, sizes=(3, 12, 1), seed=5)
    kw = dict(activation="tanh", lr_scales=(1.0, 1e4))
    T, rtol = 1.0, 1e-5
    _, net = _reference(ws, None, X, Y, np.array([0.0, 1e-3]), kw, rtol=1e-6)
    runs = {m: ln.gradient_flow(ws, X, Y, [T], rtol=rtol, method=m, backend="numpy",
                                record=("weights",), **kw) for m in ("DOP853", "ROS34PW2")}
    assert all(r.success for r in runs.values())
    lam = min(_lambda_max(net, net.y0),
              _lambda_max(net, net.layout.pack(list(runs["DOP853"].weights))))
    # DOP853: stability boundary 6.39, 12 evaluations a step
    floor = 12 * lam * T / 6.4
    assert lam * T > 1000
    assert runs["DOP853"].nfev > 0.5 * floor
    assert runs["ROS34PW2"].nfev < floor / 4, (runs["ROS34PW2"].nfev, floor)
    w_d, w_r = runs["DOP853"].weights, runs["ROS34PW2"].weights
    scale = max(np.abs(w).max() for w in w_d)
    assert max(np.abs(a - b).max() for a, b in zip(w_d, w_r)) < 100 * rtol * scale


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("bad", ["ROS34PW3", "ros34pw2", 3, None])
def test_bad_method(bad):
    ws, _, X, Y = _net_problem("tanh", False)
    with pytest.raises(ValueError, match="method"):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], method=bad, activation="tanh")


# ------------------------------------------------------------------ the MLP's exact jvp
JVP_CASES = [(act, b, a, c, loss)
             for act in ("linear", "relu", ("leaky_relu", 0.1), ("softplus", 2.0), "tanh")
             for b in (False, True) for a in (1e-2, 1.0, 1e2) for c in (False, True)
             for loss in ("mse", ("soft_hinge", 5.0))]


@pytest.mark.parametrize("compiled", [False, True])
def test_mlp_jvp_against_finite_differences(compiled):
    """``MLP.jvp`` (R-op) against central differences of ``rhs`` for every option: error
    O(eps^2) + O(u / eps) relative, eps = 1e-6, well under 1e-5; ReLU-type points checked
    to lie off kinks (same pattern at y +- eps v)."""
    if compiled and not numba_available():
        pytest.skip("numba not installed")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((15, 4))
    sizes = (4, 7, 6, 1)
    ws = ln.init_network(sizes, 1.0, seed=1)
    cls = get_model("mlp")
    cls = cls.numba_model if compiled else cls
    for act, b, alpha, centered, loss in JVP_CASES:
        Y = np.sign(X[:, :1] + 1e-3) if loss != "mse" else np.tanh(X[:, :1])
        bs = [0.1 * rng.standard_normal(s) for s in sizes[1:-1]] if b else None
        opts = parse_options(3, activation=act, alpha=alpha, centered=centered, loss=loss,
                             lr_scales=(1.0, 2.0, 0.5), multipliers=(1.0, 0.7, 1.3))
        net = cls(ws, check_biases(bs, tuple(w.shape for w in ws)), opts).prepare(X, Y)
        y = net.y0 + 0.01 * rng.standard_normal(net.y0.size)
        v = rng.standard_normal(y.size)
        Jv = net.jvp(y, v).copy()
        assert np.array_equal(net.jvp(y, v), Jv)           # the kept base pass
        eps = 1e-6
        fp = net.rhs(y + eps * v).copy()
        pat = None if net.smooth else np.array(net.switches(), copy=True)
        fm = net.rhs(y - eps * v).copy()
        if pat is not None:
            assert np.array_equal(pat, net.switches())
        fd = (fp - fm) / (2 * eps)
        err = np.abs(Jv - fd).max() / np.abs(fd).max()
        assert err < 1e-5, (act, b, alpha, centered, loss, err)
        # a new base point is not served from the kept pass
        y2 = y + 0.05 * v
        f2 = (net.rhs(y2 + eps * v) - net.rhs(y2 - eps * v)) / (2 * eps)
        assert np.abs(net.jvp(y2, v) - f2).max() < 1e-5 * np.abs(f2).max()


def test_general_path_binds_metric_and_jvp(monkeypatch):
    ws, bs, X, Y = _net_problem("tanh", True)
    opts = parse_options(3, activation="tanh", lr_scales=(1.0, 3.0, 0.5))
    net = get_model("mlp")(ws, check_biases(bs, tuple(w.shape for w in ws)), opts)
    n = net.y0.size

    def made(name, net):
        primary, low = methods.stepper_for(name, net)
        return primary(None, n, 1e-6, 1e-12, np), low and low(None, n, 1e-4, 1e-12, np)
    primary, low = made("ROS34PW2", net)
    assert primary.jvp is None and low is None             # finite differences by default
    monkeypatch.setattr(methods.driver, "ROSENBROCK_JVP", "model")
    primary, low = made("ROS34PW2", net)
    assert primary.jvp is not None
    R = 1.0 / primary.metric
    assert np.allclose(np.unique(R), [0.5, 1.0, 3.0])
    opts = parse_options(3, activation="relu")
    net_relu = get_model("mlp")(ws, None, opts)
    primary, low = made("ROS34PW2", net_relu)
    assert primary.metric is None and low.name == methods.ROSENBROCK_FALLBACK


# ------------------------------------------------------------------ the switch-back test
@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize("lam_max", [1e2, 1e5])
def test_rayleigh_quotient_bounds_the_spectral_radius(uniform, lam_max):
    """``rho`` of an attempt is a Rayleigh quotient of ``-J`` in the metric in which ``J``
    is self-adjoint, so it never exceeds the spectral radius; the Krylov directions are
    the stiff ones, so it is near it (measured 0.72 - 0.99 of it over these cases)."""
    J, R, y0 = _linear_problem(lam_max=lam_max, uniform=uniform)
    cls = ROS34PW2.bind(jvp=lambda y, v: J @ v, metric=None if uniform else 1.0 / R)
    lam = np.abs(np.linalg.eigvals(J)).max()
    for h in (1e-4, 1e-2, 1.0):
        st = cls(lambda t, y: J @ y, y0.size, 1e-6, 1e-12)
        st.attempt(0.0, y0, J @ y0, h)
        assert 0.5 * lam <= st.rho <= lam * (1 + 1e-9), (h, st.rho / lam)
        st.accept(None)
        assert st.rho == 0.0


def test_switch_back_fires_after_switch_steps_where_the_pair_is_cheaper():
    """The test's arithmetic: a stepper whose products cost 100 right-hand sides is dearer
    per unit time than DOP853 at any step the stability cap allows on a mild spectrum
    (|lambda| <= 10), so the run hands back after exactly ``switch_steps`` accepted steps;
    at no cost per product it never does (4 right-hand sides a step against DOP853's
    12 x SWITCH_BACK_MARGIN at a step at most as long)."""
    from linearnets.sim.methods.tableaux import DOP853

    J, R, y0 = _linear_problem(lam_max=10.0, uniform=True)
    for cost, fires in ((100.0, True), (0.0, False)):
        cls = type("Costed", (ROS34PW2.bind(jvp=lambda y, v: J @ v),), {"JVP_COST": cost})
        res = integrate(lambda t, y: J @ y, y0, np.array([1e3]), cls,
                        StepperOptions(rtol=1e-6, atol=1e-12), lambda k, y: None,
                        control=StepControl(predictive=True, switch_back=DOP853,
                                            switch_steps=7))
        assert res.status.success and res.nonstiff == fires
        if fires:
            assert res.nsteps == 7 and res.n_done == 0 and 0.0 < res.t_last < 1e3
        else:
            assert res.n_done == 1 and res.t_last == 1e3


def test_switch_back_needs_a_cost_estimate():
    from linearnets.sim.methods.tableaux import DOP853
    from linearnets.sim.methods.erk import ExplicitRK

    class DOP(ExplicitRK):
        tableau = DOP853
    with pytest.raises(ValueError, match="switch_back"):
        integrate(lambda t, y: -y, np.ones(3), np.array([1.0]), DOP, StepperOptions(),
                  lambda k, y: None, control=StepControl(switch_back=DOP853, switch_steps=3))


def test_sliding_relu_net_runs_on_the_fallback():
    """A random-data ReLU net with biases that slides along kinks for most of t in [0, 2]:
    the low-order pair does the sliding for ROS34PW2 as for DOP853 (the primary pair
    resumes only after CALM_STEPS steps none of whose stages crossed a switch), so the
    two take comparable work (measured 27,137 and 27,104 evaluations; 897,193 and 39,542
    when a step whose stages crossed counted as calm), and both are within
    20 kink_rtol of a run 10x tighter in both tolerances (measured <= 0.41)."""
    rng = np.random.default_rng(0)
    ws = ln.init_network((3, 6, 6, 1), 1.0, seed=1)
    X, Y = rng.standard_normal((15, 3)), rng.standard_normal((15, 1))
    bs = [0.3 * rng.standard_normal(6), 0.3 * rng.standard_normal(6)]
    backend = "numba" if numba_available() else "numpy"
    kw = dict(activation="relu", biases=bs, backend=backend, record=("outputs",))
    t_eval = [0.0, 0.5, 2.0]
    ref = ln.gradient_flow(ws, X, Y, t_eval, method="DOP853", rtol=1e-9, atol=1e-12,
                           kink_rtol=1e-6, max_steps=10 ** 6, **kw)
    assert ref.success
    size = np.abs(ref.outputs).max()
    runs = {}
    for method in ("DOP853", "ROS34PW2"):
        tr = ln.gradient_flow(ws, X, Y, t_eval, method=method, rtol=1e-8, atol=1e-11,
                              kink_rtol=1e-5, **kw)
        assert tr.success and tr.sliding_time > 1.5
        assert tr.fallback_steps > 0.8 * tr.nsteps
        assert np.abs(tr.outputs - ref.outputs).max() <= 20 * 1e-5 * size
        runs[method] = tr.nfev
    assert runs["ROS34PW2"] <= 2 * runs["DOP853"], runs
