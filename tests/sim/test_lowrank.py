"""The linear model's factored stage store (``models/linear.FactoredStages``) in the
explicit stepper, against dense stages and scipy, on numpy and compiled."""
import functools

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from linearnets.data import scalar_teacher, teacher_task
from linearnets.sim.models import linear as _rhs
from linearnets.sim.flow import gradient_flow
from linearnets.sim.methods import FlowStatus
from linearnets.sim.methods.tableaux import TABLEAUX
from linearnets.sim.models import linear as _lowrank
from linearnets.network import init_network
from sim_helpers import erk, options, phase

#: Runs that fail on purpose here warn (FlowWarning); the tests read their status.
pytestmark = pytest.mark.filterwarnings("ignore::linearnets.sim.flow.FlowWarning")

# (layer sizes, teacher singular values, whitened inputs, sigma, per-layer learning rates)
PROBLEMS = {
    # DOP853 (13 slots, C = 3): layer 1 (50 x 60) factored, layer 0 (60 x 12) and the top dense
    "mixed-C3": ((12, 60, 50, 3), [3.0, 1.5, 0.5], False, 1.0, [1.0, 0.5, 2.0]),
    "deep-scalar": ((20, 32, 32, 24, 1), [1.0], True, 1.0, None),
    "depth2-C2": ((40, 48, 2), [2.0, 1.0], False, 1.0, None),
}


def _problem(name, seed=0):
    sizes, sv, white, sigma, lr = PROBLEMS[name]
    X, Y = teacher_task(4 * sizes[0], sizes[0], sv, seed=seed, whiten=white)
    ws = init_network(sizes, sigma, seed=seed)
    problem = _rhs.make_problem(tuple(w.shape for w in ws), X, Y, lr_scale=lr)
    return ws, X, Y, problem


def _run(stages, backend, problem, y0, t_eval, tab, **opts):
    obs = []
    raw = erk(problem, y0, t_eval, tab, options(**opts), lambda k, y: obs.append(y.copy()),
              stages=stages, backend=backend)
    return raw, np.array(obs)


def _reference(problem, y0, t):
    """The flow at ``t`` from scipy's DOP853 at rtol 1e-13 on the flat state."""
    return solve_ivp(lambda _, y: problem.rhs(y), (0.0, t[-1]), y0, method="DOP853", t_eval=t,
                     rtol=1e-13, atol=1e-15).y.T


def _units(ys, ref, rtol, atol):
    """Global error in units of the requested (norm-wise) tolerance, as in test_flow."""
    return (np.abs(ys - ref).max(axis=1) / (atol + rtol * np.abs(ref).max(axis=1))).max()


def _similar_steps(a, b):
    # steppers that round differently take other steps where rounding decides (a
    # stiffness estimate at the cap, an error norm at 1): measured up to 1 % apart
    # (743 against 751); 10 % plus 5 still catches a stepper with other step control
    return abs(a.nsteps - b.nsteps) <= 0.1 * max(a.nsteps, b.nsteps) + 5


@pytest.mark.parametrize("method", ["RK45", "DOP853", "SSPRK104"])
@pytest.mark.parametrize("name", list(PROBLEMS))
def test_factored_stages_follow_the_dense_stepper(name, method):
    # through learning (to t = 3, accuracy sets the steps) and convergence (to t = 25,
    # the stability cap sets them) both steppers are within the tolerance of the flow
    # and take about as many steps
    ws, X, Y, problem = _problem(name)
    tab = TABLEAUX[method]
    assert _lowrank.worth_factoring(problem, tab.n_stages)
    y0 = _rhs.pack(ws)
    rtol, atol = 1e-8, 1e-12
    t = np.array([0.0, 0.5, 3.0, 10.0, 25.0])
    ref = _reference(problem, y0, t)
    a, ya = _run("dense", "numpy", problem, y0, t, tab, rtol=rtol, atol=atol)
    b, yb = _run("factored", "numpy", problem, y0, t, tab, rtol=rtol, atol=atol)
    assert a.status.success and b.status.success
    assert _similar_steps(a, b), (a.nsteps, b.nsteps)
    assert _units(ya, ref, rtol, atol) < 10 and _units(yb, ref, rtol, atol) < 10


@pytest.mark.parametrize("method", ["RK45", "DOP853", "SSPRK104"])
def test_factored_matches_solve_ivp(method):
    ws, X, Y, problem = _problem("mixed-C3", seed=2)
    tab = TABLEAUX[method]
    y0 = _rhs.pack(ws)
    t = np.array([0.0, 2.0, 8.0, 20.0])
    rtol, atol = 1e-8, 1e-10
    raw, ys = _run("factored", "numpy", problem, y0, t, tab, rtol=rtol, atol=atol)
    ref = solve_ivp(lambda _, y: problem.rhs(y), (0.0, t[-1]), y0, method="DOP853", t_eval=t,
                    rtol=1e-13, atol=1e-15).y.T
    # global error in units of the requested (norm-wise) tolerance, as in test_flow
    units = np.abs(ys - ref).max(axis=1) / (atol + rtol * np.abs(ref).max(axis=1))
    assert raw.status.success and units.max() < 10


@pytest.mark.parametrize("method", ["RK45", "DOP853", "SSPRK104"])
@pytest.mark.parametrize("name", list(PROBLEMS))
def test_numba_factored_stepper_matches_numpy(name, method):
    pytest.importorskip("numba")
    ws, X, Y, problem = _problem(name, seed=1)
    tab = TABLEAUX[method]
    y0 = _rhs.pack(ws)
    t = np.concatenate(([0.0], np.logspace(-2, 1.5, 12)))
    rtol, atol = 1e-9, 1e-13
    ref = _reference(problem, y0, t)
    a, ya = _run("factored", "numpy", problem, y0, t, tab, rtol=rtol, atol=atol)
    b, yb = _run("factored", "numba", problem, y0, t, tab, rtol=rtol, atol=atol)
    assert a.status.success and b.status.success and _similar_steps(a, b)
    assert _units(ya, ref, rtol, atol) < 10 and _units(yb, ref, rtol, atol) < 10


def test_gradient_flow_uses_factored_stages_on_wide_networks():
    ws, X, Y, problem = _problem("depth2-C2")
    t = np.array([0.0, 5.0, 20.0])
    tr = gradient_flow(ws, X, Y, t, backend="numpy", method="DOP853")
    raw, ys = _run("factored", "numpy", problem, _rhs.pack(ws), t, TABLEAUX["DOP853"],
                   rtol=1e-8, atol=1e-12)
    assert np.array_equal(_rhs.pack(tr.weights), ys[-1])
    assert tr.nfev == raw.nfev


def test_worth_factoring_needs_layers_wider_than_the_stage_rank():
    X, y, _ = scalar_teacher(30, 6, 1.0, seed=0)
    narrow = _rhs.make_problem(((8, 6), (8, 8), (1, 8)), X, y[:, None])
    assert not _lowrank.worth_factoring(narrow, 12)   # 13 slots x 1 output >= 8
    assert _lowrank.worth_factoring(narrow, 6)        # RK45: 7 < 8 for the middle layer
    lay = _lowrank.StageLayout(narrow, 7)
    assert list(lay.factored) == [0, 1, 0]            # the top layer is always dense


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_factored_failures_are_reported(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    X, Y = teacher_task(120, 30, [2.0, 1.0], seed=0)
    ws = init_network((30, 40, 40, 2), 0.3, seed=0)
    problem = _rhs.make_problem(tuple(w.shape for w in ws), X, Y)
    assert _lowrank.worth_factoring(problem, TABLEAUX["DOP853"].n_stages)
    t = np.linspace(0.0, 50.0, 11)
    tr = gradient_flow(ws, X, Y, t, backend=backend, max_steps=7)
    assert not tr.success and tr.status is FlowStatus.MAX_STEPS and "max_steps" in tr.message
    assert tr.nsteps + tr.nrejected == 7
    n = int(np.isfinite(tr.loss).sum())
    assert 1 <= n < t.size and np.all(np.isnan(tr.end_to_end[n:]))
    # one ulp of t = 1e17 is 16: far above any step this problem allows (the solver
    # itself, started there; gradient_flow always starts at t = 0)
    raw = phase("DOP853", backend, problem, _rhs.pack(ws), 1e17, 0, [1e17, 1e17 + 1e4],
                options())
    assert raw.status is FlowStatus.STEP_UNDERFLOW and "1e+17" in raw.message
    # an overflowing right-hand side at the initial state
    tr = gradient_flow([1e120 * w for w in ws], X, Y, [0.0, 1.0], backend=backend)
    assert tr.status is FlowStatus.NONFINITE and "non-finite" in tr.message


@functools.lru_cache(maxsize=1)
def _bottleneck_reference():
    """The flow of the bottleneck problem below at t = 0, 10, 100 (flat states): a compiled
    DOP853 run 1e4 times tighter than the runs it checks (scipy's takes minutes here)."""
    X, Y = teacher_task(240, 60, [2.0, 1.5, 1.0, 0.5], seed=0, whiten=False)
    ws = init_network((60, 200, 3, 4), 1.0, seed=0)
    t = np.array([0.0, 10.0, 100.0])
    tight = gradient_flow(ws, X, Y, t, rtol=1e-10, atol=1e-13, backend="numba",
                          method="DOP853", record=("weights",))
    assert tight.success
    return np.concatenate([w.reshape(t.size, -1) for w in tight.weights_t], axis=1)


@pytest.mark.parametrize("method", ["RK45", "SSPRK104"])
def test_numba_floors_the_gram_sums_where_numpy_does(method, monkeypatch):
    """Behind a 3-wide bottleneck under a rank-4 task the Gram form of the stiffness
    denominator cancels and is floored at its rounding on many steps; the compiled
    stepper floors it on the same steps and takes the same steps."""
    pytest.importorskip("numba")
    X, Y = teacher_task(240, 60, [2.0, 1.5, 1.0, 0.5], seed=0, whiten=False)
    ws = init_network((60, 200, 3, 4), 1.0, seed=0)
    problem = _rhs.make_problem(tuple(w.shape for w in ws), X, Y)
    tab = TABLEAUX[method]
    floored = []
    rounding = _lowrank._gram_rounding

    def spy(GU, GV, wd, s, C, width):
        dd_min = rounding(GU, GV, wd, s, C, width)
        wr = np.repeat(wd, C)
        floored.append(np.sum(np.outer(wr, wr) * GU * GV) < dd_min)
        return dd_min
    monkeypatch.setattr(_lowrank, "_gram_rounding", spy)
    y0 = _rhs.pack(ws)
    t = np.array([0.0, 10.0, 100.0])
    a, ya = _run("factored", "numpy", problem, y0, t, tab, rtol=1e-6, atol=1e-9)
    b, yb = _run("factored", "numba", problem, y0, t, tab, rtol=1e-6, atol=1e-9)
    assert np.mean(floored) > 0.25       # measured: 49 % (SSPRK104) and more (RK45)
    # a compiled stepper that did not floor them would take many times the steps (80,254
    # against 1,952 for RK45: test_stability_cap); both within the tolerance of the flow
    assert a.status.success and b.status.success and _similar_steps(a, b)
    ref = _bottleneck_reference()
    assert _units(ya, ref, 1e-6, 1e-9) < 10 and _units(yb, ref, 1e-6, 1e-9) < 10
