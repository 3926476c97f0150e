"""The stability cap of the explicit steppers: stability boundaries, the stiffness
estimate, and what the cap saves where steps are limited by stability."""
import numpy as np
import pytest

from linearnets.sim.methods import compiled
from linearnets.data import scalar_teacher, teacher_task
from linearnets.sim.methods import base as _explicit
from linearnets.sim.methods import base as mbase
from linearnets.sim.methods.tableaux import TABLEAUX
from linearnets.sim.flow import gradient_flow
from linearnets.network import init_network

#: Runs that fail on purpose here warn (FlowWarning); the tests read their status.
pytestmark = pytest.mark.filterwarnings("ignore::linearnets.sim.flow.FlowWarning")


def _stability_function(tab, z):
    s = tab.n_stages
    return 1.0 + z * tab.b @ np.linalg.solve(np.eye(s) - z * tab.A, np.ones(s))


@pytest.mark.parametrize("name", list(TABLEAUX))
def test_stability_boundary_is_the_real_axis_interval(name):
    tab = TABLEAUX[name]
    beta = tab.stability_boundary
    inside = [abs(_stability_function(tab, -x)) for x in np.linspace(0.0, beta, 2001)]
    assert max(inside) <= 1.0 + 1e-12
    # stored rounded down by less than 1e-3: just beyond it the method is unstable
    assert abs(_stability_function(tab, -(beta + 1e-3))) > 1.0


def _one_step(tab, J, y, h):
    """Stages of one step of ``y' = J y``: (K (s+1, n), last stage state, y_new)."""
    s = tab.n_stages
    K = np.empty((s + 1, y.size))
    K[0] = J @ y
    for i in range(1, s):
        Yi = y + h * tab.A[i, :i] @ K[:i]
        K[i] = J @ Yi
    y_new = y + h * tab.b @ K[:s]
    K[s] = J @ y_new
    return K, Yi, y_new


@pytest.mark.parametrize("name", [n for n, t in TABLEAUX.items() if t.c[-1] == 1.0])
def test_stiffness_estimate_on_a_linear_problem(name):
    tab = TABLEAUX[name]
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((5, 5)))[0]
    lam = np.array([40.0, 5.0, 1.0, 0.3, 0.1])
    J = -(Q * lam) @ Q.T                      # symmetric, real spectrum as for gradient flow
    h = 0.5 * tab.stability_boundary / lam[0]
    K, Ylast, y_new = _one_step(tab, J, rng.standard_normal(5), h)
    wd = tab.stiffness_weights
    # the weights give the distance between the new state and the last stage
    np.testing.assert_allclose(y_new - Ylast, h * wd @ K[:-1], rtol=0, atol=1e-13)
    num = np.sum((K[-1] - K[-2]) ** 2)
    dd = np.sum((wd @ K[:-1]) ** 2)
    rho = _explicit.stiffness_estimate(num, dd, np.sum(K[0] ** 2), np.abs(wd).sum(), h,
                                       np.sum(y_new ** 2))
    # a Rayleigh-type quotient of the symmetric J: inside its spectrum, near the top
    # (the stiff component dominates the difference of two states at t + h)
    assert lam[-1] <= rho <= lam[0] * (1 + 1e-12)
    assert rho > 0.5 * lam[0]
    # one dimension: exact (half-way to the boundary, where the estimate matters)
    h = 0.5 * tab.stability_boundary / 7.0
    K, _, y_new = _one_step(tab, np.array([[-7.0]]), np.ones(1), h)
    rho1 = _explicit.stiffness_estimate(np.sum((K[-1] - K[-2]) ** 2), np.sum((wd @ K[:-1]) ** 2),
                                        np.sum(K[0] ** 2), np.abs(wd).sum(), h, y_new[0] ** 2)
    assert rho1 == pytest.approx(7.0, rel=1e-10)


def test_stiffness_estimate_ignores_differences_at_rounding_level():
    ref = 1.0
    rel2 = _explicit.STIFFNESS_MIN_REL ** 2
    assert _explicit.stiffness_estimate(1e-3, 0.0, ref, 20.0, 0.1, 1.0) == 0.0
    assert _explicit.stiffness_estimate(0.5 * rel2, 1e-3, ref, 20.0, 0.1, 1.0) == 0.0
    assert _explicit.stiffness_estimate(1e-3, 0.5 * rel2 * 400.0, ref, 20.0, 0.1, 1.0) == 0.0
    assert _explicit.stiffness_estimate(4e-2, 1e-2, ref, 20.0, 0.1, 1.0) == pytest.approx(20.0)


def test_stiffness_estimate_floors_the_state_difference_at_its_resolution():
    """Two states closer than eps |y| are one point in floating point: a derivative
    difference over them is rounding, and the estimate divides by eps |y| at least."""
    eps = np.finfo(np.float64).eps
    yy, h = 25.0, 0.1                       # |y_new| = 5
    res = _explicit.STIFFNESS_STATE_ULPS * eps * 5.0
    # |y_new - Y| = h sqrt(dd) = 1e-19 (far below res ~ 1e-15), |dK| = 5e-16 -- the
    # case of a gradient at rounding level, which without the floor read rho = 5000
    dd, num, ref = (1e-19 / h) ** 2, (5e-16) ** 2, (5e-16) ** 2
    rho = _explicit.stiffness_estimate(num, dd, ref, 1.0, h, yy)
    assert rho == pytest.approx(5e-16 / res, rel=1e-12)
    # differences well above the resolution are untouched
    dd = (1e-6 / h) ** 2
    assert _explicit.stiffness_estimate(num * 1e20, dd, ref, 1.0, h, yy) == pytest.approx(
        5e-6 / 1e-6, rel=1e-12)
    # no estimate: no cap; an estimate caps at STABILITY_SAFETY * boundary / rho
    assert _explicit.stability_cap(3.0, 0.0, 3.3) == 3.0
    assert _explicit.stability_cap(3.0, 2.0, 3.3) == pytest.approx(_explicit.STABILITY_SAFETY
                                                                   * 3.3 / 2.0)
    assert _explicit.stability_cap(0.1, 2.0, 3.3) == 0.1
    assert _explicit.stability_cap(3.0, 2.0, 0.0) == 3.0     # a tableau without a boundary


def _stiff_phase_run(method, cap, monkeypatch):
    # a three-layer network long after convergence: steps limited by stability
    X, y, _ = scalar_teacher(60, 8, 1.0, seed=0)
    ws = init_network((8, 10, 10, 1), 0.05, seed=0)
    t = np.concatenate(([0.0], np.logspace(-1, 2.5, 30)))
    with monkeypatch.context() as m:
        if not cap:
            m.setattr(mbase, "stability_cap", lambda h, *args: h)
        return gradient_flow(ws, X, y, t, backend="numpy", method=method, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("method", ["RK45", "DOP853", "SSPRK104"])
def test_cap_saves_rejections_where_stability_limits_the_step(method, monkeypatch):
    X, y, _ = scalar_teacher(60, 8, 1.0, seed=0)
    ws = init_network((8, 10, 10, 1), 0.05, seed=0)
    t = np.concatenate(([0.0], np.logspace(-1, 2.5, 30)))
    ref = gradient_flow(ws, X, y, t, backend="numpy", rtol=1e-12, atol=1e-15)
    capped = _stiff_phase_run(method, True, monkeypatch)
    plain = _stiff_phase_run(method, False, monkeypatch)
    assert capped.success and plain.success
    # the plain controller keeps probing past the boundary; the cap stops most of it
    assert capped.nrejected <= plain.nrejected / 2
    assert capped.nfev <= plain.nfev
    # and costs no accuracy: both within a few tolerances of the reference
    scale = np.abs(ref.end_to_end).max()
    for run in (capped, plain):
        assert np.abs(run.end_to_end - ref.end_to_end).max() <= 10 * 1e-6 * scale


def test_longer_stability_interval_pays_where_stability_limits_the_step():
    """SSPRK104 spends 10 evaluations on an interval of 13.9, RK45 6 on 3.3: where the
    cap sets the step it needs 6 * 13.9 / (10 * 3.3) = 2.5 times fewer.  Here a strong
    mode (s = 2) converges early while a weak one (s = 0.1) is still on its plateau:
    most of the run is capped, the start is not."""
    X, Y = teacher_task(60, 6, [2.0, 0.1], seed=0, whiten=False)
    ws = init_network((6, 10, 10, 2), 0.05, seed=0)
    t = np.array([0.0, 400.0])
    ref = gradient_flow(ws, X, Y, t, backend="numpy", rtol=1e-12, atol=1e-15)
    assert ref.loss[-1] < 1e-8 * ref.loss[0]          # the weak mode has been learned too
    runs = {m: gradient_flow(ws, X, Y, t, backend="numpy", method=m, rtol=1e-6, atol=1e-9)
            for m in ("RK45", "SSPRK104")}
    assert runs["SSPRK104"].nfev < runs["RK45"].nfev / 1.5
    scale = np.abs(ref.end_to_end).max()
    for run in runs.values():
        assert run.success
        assert np.abs(run.end_to_end - ref.end_to_end).max() <= 10 * 1e-6 * scale


@pytest.mark.parametrize("method", ["RK45", "SSPRK104"])
@pytest.mark.parametrize("stepper", ["dense-numpy", "dense-numba", "factored-numpy",
                                     "factored-numba"])
def test_cap_holds_once_the_gradient_is_at_rounding_level(method, stepper, monkeypatch):
    """A 3-wide bottleneck under a rank-4 task leaves a residual it cannot fit: the
    gradient falls to rounding level while its factors ``A_l``, ``G_l = E ...`` stay of
    order one.  Two roundings then read as stiffness and held the steps far below the
    stability limit:

    * dense stages (10-3-20-4, t = 400): stage derivatives differing in their last bits
      over stage states 1e-19 apart gave rho ~ 600 (measured: RK45 8,129 steps against
      2,848 uncapped, the SSPRK104 tableau 7,883 against 887) -- the state difference
      is now floored at eps |y|;
    * factored stages (60-200-3-4, t = 100, the first layer factored): the Gram form of
      ``dd = |sum_j w_j K_j|^2`` cancelled to near zero (measured: RK45 80,254 steps
      against 1,952 uncapped) -- it is now floored at its rounding.

    The capped run must attempt fewer steps than the uncapped one and reject almost none.
    """
    if stepper.endswith("numba"):
        pytest.importorskip("numba")
    from linearnets.sim.models import linear as _rhs
    from linearnets.sim.models import linear as _lowrank
    from sim_helpers import erk, options
    dense = stepper.startswith("dense")
    sizes, t_end = ((10, 3, 20, 4), 400.0) if dense else ((60, 200, 3, 4), 100.0)
    X, Y = teacher_task(4 * sizes[0], sizes[0], [2.0, 1.5, 1.0, 0.5], seed=0, whiten=False)
    ws = init_network(sizes, 1.0, seed=0)
    problem = _rhs.make_problem(tuple(w.shape for w in ws), X, Y)
    tab = TABLEAUX[method]
    # the model picks dense stages exactly where the layers are not worth factoring
    assert _lowrank.worth_factoring(problem, tab.n_stages) != dense

    def run():
        return erk(problem, _rhs.pack(ws), np.array([0.0, t_end]), tab, options(1e-6, 1e-9),
                   lambda k, y: None, stages="dense" if dense else "factored",
                   backend="numba" if stepper.endswith("numba") else "numpy")
    capped = run()
    monkeypatch.setattr(_explicit, "STABILITY_SAFETY", np.inf)
    monkeypatch.setattr(compiled, "STABILITY_SAFETY", np.inf)   # the compiled loops' runner
    free = run()
    assert capped.status.success and free.status.success
    assert free.nrejected >= 0.15 * free.nsteps           # stability limits the steps
    assert capped.nrejected <= max(3, 0.02 * capped.nsteps)
    assert capped.nsteps + capped.nrejected <= free.nsteps + free.nrejected


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("method", ["RK45", "DOP853", "SSPRK104"])
def test_exhausted_budget_on_capped_steps_points_to_auto(backend, method):
    """A run far past convergence spends its budget on steps held at the stability
    limit; the failure message says so and names the method that is not held there."""
    X, Y = teacher_task(100, 6, [1.0, 0.5], seed=0, whiten=False)
    ws0 = init_network((6, 12, 12, 2), 0.3, seed=1)
    # start at the converged state: after the first few steps every step is held at the
    # stability limit, so a budget of tens of steps runs out on capped steps (the run
    # to 1e5 would need ~1e5 steps)
    ws = list(gradient_flow(ws0, X, Y, [0.0, 100.0], rtol=1e-10, atol=1e-14,
                            backend="numpy").weights)
    kw = dict(rtol=1e-8, atol=1e-12, backend=backend, method=method, max_steps=BUDGET)
    tr = gradient_flow(ws, X, Y, [0.0, 1e5], **kw)
    assert not tr.success and tr.status.name == "MAX_STEPS"
    assert "stability limit" in tr.message and "method='auto'" in tr.message
    # the converged modes relax at rate eta L s^(2 - 2/L) ~ 3 for s ~ 1, L = 3: the message
    # reports the estimate, and the held step is STABILITY_SAFETY * boundary of it
    rho = float(tr.message.split("stiffness ")[1].split(")")[0])
    assert 1.0 < rho < 10.0
    # a budget exhausted while accuracy sets the step gets no such hint
    early = gradient_flow(ws0, X, Y, [0.0, 1e5], **dict(kw, max_steps=5))
    assert not early.success and "stability limit" not in early.message
    # and the advice holds: auto reaches the end within the same budget
    auto = gradient_flow(ws, X, Y, [0.0, 1e5], rtol=1e-8, atol=1e-12, method="auto",
                         max_steps=BUDGET)
    assert auto.success, auto.message


#: A budget that must run out wherever the tests run: tens of steps.
BUDGET = 60


@pytest.mark.parametrize("method", ["DOP853", "SSPRK104"])
def test_success_message_names_auto_when_the_cap_set_the_steps(method):
    """A run far past convergence succeeds on steps held at the stability limit: its
    message counts them (on either backend) and names the method that is not held there; a run to convergence does not."""
    from linearnets.sim.flow import CAPPED_HINT_STEPS

    X, y, _ = scalar_teacher(50, 5, 1.0, seed=0)
    ws = init_network((5, 8, 1), 1e-3, seed=0)
    runs = {b: gradient_flow(ws, X, y, [0.0, 1e4], rtol=1e-6, atol=1e-10, backend=b,
                             method=method) for b in ("numpy", "numba")}
    for tr in runs.values():
        assert tr.success and "method='auto'" in tr.message
        held, of = (int(v) for v in tr.message.split("; ")[1].split(" steps")[0].split(" of "))
        assert of == tr.nsteps and CAPPED_HINT_STEPS <= held <= of
    short = gradient_flow(ws, X, y, [0.0, 100.0], rtol=1e-6, atol=1e-10, method=method)
    assert short.success and short.message == "reached the last t_eval"
    auto = gradient_flow(ws, X, y, [0.0, 1e4], rtol=1e-6, atol=1e-10, method="auto")
    assert auto.success and "held at the stability limit" not in auto.message
