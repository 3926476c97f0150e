"""The Rosenbrock-W integrator, its Jacobian-vector product and the stiffness switch."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import solve_ivp

from linearnets import backend as _backend
from linearnets.data import scalar_teacher, teacher_task
from linearnets.sim.models import linear as _rhs
from linearnets.sim.flow import gradient_flow
from linearnets.sim.methods import driver
from linearnets.sim.methods.rosw import FAILED_SOLVE_ERR, ROS34PW2 as ROSW
from linearnets.sim.methods.tableaux import DOP853, ROS34PW2
from linearnets.sim.models.linear import worth_factoring
from linearnets.network import init_network
from sim_helpers import fake_cupy, linear_net, options, phase, solve

#: Runs that fail on purpose here warn (FlowWarning); the tests read their status.
pytestmark = pytest.mark.filterwarnings("ignore::linearnets.sim.flow.FlowWarning")


def _problem(sizes, sigma, svals, seed=0, whiten=True, eta=1.0, lr_scale=None, P=40):
    X, Y = teacher_task(P, sizes[0], svals, seed=seed, whiten=whiten)
    ws = init_network(sizes, sigma, seed=seed + 1)
    prob = _rhs.make_problem([w.shape for w in ws], X, Y, eta, lr_scale)
    return ws, X, Y, prob


# --- the right-hand side and its Jacobian-vector product --------------------------------------
@settings(max_examples=25)
@given(depth=st.integers(1, 4), width=st.integers(1, 6), C=st.integers(1, 3),
       whiten=st.booleans(), seed=st.integers(0, 10**6))
def test_rhs_matches_reference(depth, width, C, whiten, seed):
    D = 4
    sizes = (D,) + (width,) * (depth - 1) + (C,)
    ws, X, Y, prob = _problem(sizes, 0.7, np.linspace(2.0, 1.0, C), seed, whiten, eta=1.3,
                              lr_scale=np.linspace(0.5, 1.5, depth))
    y = _rhs.pack(ws)
    got = linear_net(prob, y).rhs(y, np.empty_like(y))
    want = _rhs.rhs(y, prob)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.abs(want).max())


def _state_and_direction(depth, width, C, whiten, seed):
    """``(problem, y, v)``: a random network on D = 4 inputs with per-layer rates, and a
    random direction in its parameters."""
    sizes = (4,) + (width,) * (depth - 1) + (C,)
    ws, X, Y, prob = _problem(sizes, 0.8, np.linspace(2.0, 1.0, C), seed, whiten, eta=0.7,
                              lr_scale=np.linspace(1.5, 0.5, depth))
    y = _rhs.pack(ws)
    return prob, y, np.random.default_rng(seed).standard_normal(y.size)


@settings(max_examples=25)
@given(depth=st.integers(1, 4), width=st.integers(1, 6), C=st.integers(1, 3),
       whiten=st.booleans(), seed=st.integers(0, 10**6))
def test_jvp_matches_finite_differences(depth, width, C, whiten, seed):
    prob, y, v = _state_and_direction(depth, width, C, whiten, seed)
    net = linear_net(prob, y)
    net.rhs(y, np.empty_like(y))
    Jv, fresh = net.linearize(y)
    jv = Jv(v)
    assert not fresh                     # the products of the latest rhs, kept
    # central differences: truncation O(eps^2 |f'''|), rounding O(1e-16 |f| / eps)
    eps = 1e-5
    fd = (_rhs.rhs(y + eps * v, prob) - _rhs.rhs(y - eps * v, prob)) / (2 * eps)
    scale = max(np.abs(fd).max(), np.abs(_rhs.rhs(y, prob)).max(), 1e-300)
    assert np.abs(jv - fd).max() <= 1e-7 * scale


@pytest.mark.skipif(not _backend.numba_available(), reason="numba not installed")
@settings(max_examples=25, deadline=None)
@given(depth=st.integers(1, 4), width=st.integers(1, 6), C=st.integers(1, 3),
       whiten=st.booleans(), seed=st.integers(0, 10**6))
def test_compiled_flow_matches_flow(depth, width, C, whiten, seed):
    """The compiled right-hand side and Jacobian-vector product of numba's "auto" agree
    with the numpy Flow to rounding, and evaluating other states between the kept one
    and its Jacobian-vector products does not disturb them."""
    from linearnets.sim.models.linear import RosenbrockOps
    prob, y, v = _state_and_direction(depth, width, C, whiten, seed)
    ref, got = linear_net(prob, y), RosenbrockOps(prob)
    f_ref = ref.rhs(y, np.empty_like(y))
    f_got = got.rhs(y, np.empty_like(y), keep=True)
    got.rhs(y + v, np.empty_like(y))
    j_ref = ref.linearize(y)[0](v).copy()
    j_got = got.jvp(v, np.empty_like(v))
    # a few products of O(1) entries in either order: rounding of a few eps
    for a, b in ((f_got, f_ref), (j_got, j_ref)):
        assert np.abs(a - b).max() <= 1e-13 * max(np.abs(b).max(), 1e-300)
    assert (got.nfev, got.njev) == (2, 1)


def test_jvp_is_symmetric():
    """J = -eta Hessian of the loss: <u, J v> = <J u, v> (the premise of conjugate gradients)."""
    ws, X, Y, prob = _problem((5, 4, 3, 2), 0.9, [1.5, 0.5], whiten=False)
    y = _rhs.pack(ws)
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal((2, y.size))
    Jv = linear_net(prob, y).linearize(y)[0]
    a = u @ Jv(v)
    b = v @ Jv(u)
    assert abs(a - b) <= 1e-12 * (abs(a) + abs(b))


# --- the tableau --------------------------------------------------------------------------------
def test_ros34pw2_order_conditions():
    """Rosenbrock order-3 conditions (Hairer-Wanner IV.7, Table 7.1) and the W-conditions."""
    tab = ROS34PW2
    g = tab.gamma
    alpha = tab.alpha.sum(1)
    beta = tab.alpha + tab.gamma_ij
    beta1 = beta.sum(1)
    for b, order in ((tab.b, 3), (tab.bhat, 2)):
        assert b.sum() == pytest.approx(1.0, abs=1e-14)
        assert b @ beta1 == pytest.approx(0.5 - g, abs=1e-14)
        if order == 3:
            assert b @ alpha ** 2 == pytest.approx(1 / 3, abs=1e-14)
            assert b @ beta @ beta1 == pytest.approx(1 / 6 - g + g * g, abs=1e-14)
            # W-method: order 3 whatever the Jacobian (b.alpha = 1/2, b.A.alpha = 1/6)
            assert b @ alpha == pytest.approx(0.5, abs=1e-14)
            assert b @ tab.alpha @ alpha == pytest.approx(1 / 6, abs=1e-14)
    assert abs(tab.bhat @ alpha ** 2 - 1 / 3) > 1e-2  # the embedded solution really is order 2


def test_ros34pw2_linear_stability_l_stable():
    """R(z) = 1 + z b^T (I - z B)^-1 1 with B = alpha + gamma_ij + gamma I: |R| <= 1, R(-inf) = 0."""
    tab = ROS34PW2
    B = tab.alpha + tab.gamma_ij + tab.gamma * np.eye(4)
    one = np.ones(4)

    def R(z):
        return 1 + z * tab.b @ np.linalg.solve(np.eye(4) - z * B, one)

    zs = -np.logspace(-3, 8, 200)
    assert np.all(np.abs([R(z) for z in zs]) <= 1 + 1e-12)
    assert abs(R(-1e10)) < 1e-8
    assert np.all(np.abs([R(1j * w) for w in np.logspace(-2, 4, 50)]) <= 1 + 1e-12)


# --- accuracy against scipy ----------------------------------------------------------------------
def _reference(ws, prob, t_eval):
    y0 = _rhs.pack(ws)
    sol = solve_ivp(lambda t, y: _rhs.rhs(y, prob), (t_eval[0], t_eval[-1]), y0,
                    method="Radau", t_eval=t_eval, rtol=1e-12, atol=1e-14,
                    jac=lambda t, y: _jacobian(y, prob))
    assert sol.success
    return np.array([_rhs.end_to_end_flat(y, prob.shapes) for y in sol.y.T])


def _jacobian(y, prob):
    Jv = linear_net(prob, y).linearize(y)[0]
    return np.column_stack([Jv(e).copy() for e in np.eye(y.size)])


@pytest.mark.parametrize("method", ["ROS34PW2", "auto"])
@pytest.mark.parametrize("case", ["nonstiff", "stiff"])
def test_against_radau(method, case):
    if case == "nonstiff":
        sizes, svals, sigma, t_eval = (3, 4, 2), [1.0, 0.6], 0.3, np.linspace(0, 12, 7)
    else:  # a strong mode converged long before a weak one escapes its plateau
        sizes, svals, sigma, t_eval = (3, 4, 2), [3.0, 0.02], 0.05, np.array([0, 5, 50, 200, 400])
    ws, X, Y, prob = _problem(sizes, sigma, svals, seed=2)
    ref = _reference(ws, prob, t_eval)
    for rtol in (1e-5, 1e-7):
        tr = gradient_flow(ws, X, Y, t_eval, rtol=rtol, atol=rtol * 1e-3, backend="numpy",
                           method=method)
        assert tr.success
        err = np.abs(tr.end_to_end - ref).max() / np.abs(ref).max()
        # global error in units of the tolerance: a few tol per decade of dynamics
        assert err <= 30 * rtol, (rtol, err)


def test_third_order_convergence_with_fixed_steps():
    """Fixed steps halve -> error / 8 (order 3), with tight inner solves."""
    ws, X, Y, prob = _problem((3, 4, 2), 0.5, [1.0, 0.5], seed=4)
    y0 = _rhs.pack(ws)
    T = 2.0
    ref = solve_ivp(lambda t, y: _rhs.rhs(y, prob), (0, T), y0, method="DOP853", rtol=1e-13,
                    atol=1e-15).y[:, -1]
    errs = []
    net = linear_net(prob, y0)
    cls = ROSW.bind(linearize=net.linearize, JVP_COST=2.0)
    for nstep in (8, 16, 32):
        y = y0.copy()
        for _ in range(nstep):
            st = cls(None, y.size, 1e-3, 1e-3, fun=net.rhs)
            st.krylov_tol = 1e-10
            y, _, err = st.attempt(0.0, y, st.evaluate(0.0, y), T / nstep)
            assert err != FAILED_SOLVE_ERR
        errs.append(np.abs(y - ref).max())
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(rates > 2.7), rates


# --- the stiffness switch -------------------------------------------------------------------------
@pytest.mark.parametrize("rtol", [1e-5, 1e-6, 3e-7])
def test_stiffness_switch_triggers_and_pays(rtol):
    sizes, svals, sigma = (3, 4, 2), [3.0, 0.02], 0.05
    ws, X, Y, prob = _problem(sizes, sigma, svals, seed=2)
    t_eval = np.array([0.0, 400.0])
    # (at rtol 1e-6 the last Rosenbrock phase, from t ~ 104, compares its cost per unit
    # time with DOP853's capped one within 2-10 % for its first 15 steps: without the
    # margin SWITCH_BACK_MARGIN the switch back -- and whether auto pays -- turned on
    # rounding, 141 or 360 steps from two roundings of the same algorithm against
    # DOP853's 385; with it, 66, 141 and 164 steps at these rtols on both backends and
    # under two OpenBLAS kernels)
    kw = dict(rtol=rtol, atol=rtol * 1e-3, backend="numpy")
    auto = gradient_flow(ws, X, Y, t_eval, method="auto", **kw)
    dop = gradient_flow(ws, X, Y, t_eval, method="DOP853", **kw)
    assert auto.success and "switched" in auto.message
    # after the switch the step is no longer capped by the converged mode, and the
    # work (right-hand sides + 2 per Jacobian-vector product) drops with it
    assert auto.nsteps < dop.nsteps / 2
    assert auto.nfev < 0.8 * dop.nfev
    np.testing.assert_allclose(auto.end_to_end, dop.end_to_end, atol=1e-4)


def test_no_switch_when_not_stiff():
    ws, X, Y, prob = _problem((3, 4, 2), 0.3, [1.0, 0.6], seed=2)
    tr = gradient_flow(ws, X, Y, [0.0, 12.0], rtol=1e-8, atol=1e-11, backend="numpy",
                       method="auto")
    dop = gradient_flow(ws, X, Y, [0.0, 12.0], rtol=1e-8, atol=1e-11, backend="numpy",
                        method="DOP853")
    assert tr.success and "switched" not in tr.message
    # the explicit phase is a DOP853 stepper of its own (other rounding): about the same
    # steps as the reference stepper, both within the tolerance of the flow
    assert abs(tr.nsteps - dop.nsteps) <= 0.1 * dop.nsteps + 5
    ref = _reference(ws, prob, np.array([0.0, 12.0]))
    scale = np.abs(ref).max()
    for run in (tr, dop):
        assert np.abs(run.end_to_end - ref).max() <= 10 * 1e-8 * scale


def test_stiffness_test_fires_at_a_converged_state():
    """At an equilibrium the error is tiny, the explicit step grows until h*|lambda_max|
    reaches the stability boundary, and the cap on Hairer's estimate h*rho must bind."""
    ws, X, Y, prob = _problem((3, 4, 2), 0.3, [2.0, 1.0], seed=5)
    done = gradient_flow(ws, X, Y, [0.0, 60.0], rtol=1e-10, atol=1e-13, backend="numpy")
    y = _rhs.pack(done.weights)
    lam_max = np.abs(np.linalg.eigvalsh(_jacobian(y, prob))).max()
    t_end = 50 * DOP853.stability_boundary / lam_max
    res = phase("DOP853", "numpy", prob, y, 0.0, 1, [0.0, t_end],
                options(1e-6, 1e-9, 10_000, 0.1 / lam_max), stiff_steps=driver.STIFF_STEPS)
    assert res.stiff and res.t_last < t_end
    # steps are capped near the stability boundary, not by accuracy
    assert res.nsteps < 50 + driver.STIFF_STEPS + 40


def test_switch_backoff_delays_the_next_switch():
    """``stiff_steps`` capped steps in a row declare stiffness: asking for four times
    as many (the backoff after one switch back) stops correspondingly later."""
    ws, X, Y, prob = _problem((3, 4, 2), 0.3, [2.0, 1.0], seed=5)
    done = gradient_flow(ws, X, Y, [0.0, 60.0], rtol=1e-10, atol=1e-13, backend="numpy")
    y = _rhs.pack(done.weights)
    lam_max = np.abs(np.linalg.eigvalsh(_jacobian(y, prob))).max()
    t_end = 200 * DOP853.stability_boundary / lam_max
    steps = {}
    for n in (driver.STIFF_STEPS, driver.SWITCH_BACKOFF * driver.STIFF_STEPS):
        res = phase("DOP853", "numpy", prob, y, 0.0, 1, [0.0, t_end],
                    options(1e-6, 1e-9, 10_000, 0.1 / lam_max), stiff_steps=n)
        assert res.stiff and res.t_last < t_end
        steps[n] = res.nsteps
    first, later = steps.values()
    # the first steps are not capped (the step grows from 0.1 / lam_max); after that
    # every step is, so the extra capped steps asked for are exactly the extra steps
    assert later - first == (driver.SWITCH_BACKOFF - 1) * driver.STIFF_STEPS


@pytest.mark.parametrize("method", ["RK45", "DOP853", "SSPRK104", "ROS34PW2", "auto"])
def test_cupy_path_with_numpy_standin(method, monkeypatch):
    """``backend="cupy"`` runs the one loop on the array module of CuPy; with numpy
    standing in, every method matches the numpy backend (the same algorithm)."""
    fake_cupy(monkeypatch)
    ws, X, Y, prob = _problem((3, 5, 2), 0.3, [1.0, 0.5], seed=7)
    t_eval = np.array([0.0, 3.0, 10.0])
    kw = dict(rtol=1e-8, atol=1e-11, method=method)
    got = gradient_flow(ws, X, Y, t_eval, backend="cupy", **kw)
    want = gradient_flow(ws, X, Y, t_eval, backend="numpy", **kw)
    assert got.success and want.success and got.backend == "cupy"
    assert type(got.end_to_end) is np.ndarray
    np.testing.assert_allclose(got.end_to_end, want.end_to_end, rtol=1e-10, atol=1e-13)


# --- "auto" on the numba backend: compiled DOP853 phases, ROS34PW2 on compiled products ---------
numba_only = pytest.mark.skipif(not _backend.numba_available(), reason="numba not installed")


#: The loss is formed from terms of the size of the initial loss: it is known to a few
#: rounding units of that, and below that a converged run's loss is rounding noise.
_LOSS_ROUNDING = 8 * np.finfo(np.float64).eps


def _stiff_at(message):
    return float(message.split("stiff from t=")[1].split(":")[0])


@numba_only
def test_compiled_stiffness_test_counts_like_erk_run():
    """At a converged state every step after the first few is capped: the compiled loop's
    test stops after exactly as many steps as the xp stepper's, for either threshold."""
    ws, X, Y, prob = _problem((3, 4, 2), 0.3, [2.0, 1.0], seed=5)
    done = gradient_flow(ws, X, Y, [0.0, 60.0], rtol=1e-10, atol=1e-13, backend="numpy")
    y = _rhs.pack(done.weights)
    lam_max = np.abs(np.linalg.eigvalsh(_jacobian(y, prob))).max()
    t_eval = np.array([0.0, 200 * DOP853.stability_boundary / lam_max])
    steps = {}
    for n in (driver.STIFF_STEPS, driver.SWITCH_BACKOFF * driver.STIFF_STEPS):
        opts = options(1e-6, 1e-9, 10_000, 0.1 / lam_max)
        raw = phase("DOP853", "numba", prob, y, 0.0, 1, t_eval, opts, stiff_steps=n)
        assert raw.status.success and raw.stiff and raw.n_done == 1
        assert raw.t_last < t_eval[-1] and raw.h_next > 0
        ref = phase("DOP853", "numpy", prob, y, 0.0, 1, t_eval, opts, stiff_steps=n)
        assert ref.stiff
        # the first few steps grow from 0.1 / lam_max and are not capped; where the cap
        # starts to bind may move by a step or two with rounding
        assert abs(raw.nsteps - ref.nsteps) <= 3
        steps[n] = raw.nsteps
    first, later = steps.values()
    # within one run every step after those is capped, so the extra capped steps asked
    # for are exactly the extra steps
    assert later - first == (driver.SWITCH_BACKOFF - 1) * driver.STIFF_STEPS
    # without the test the same run goes to the end
    raw = phase("DOP853", "numba", prob, y, 0.0, 1, t_eval,
                options(1e-6, 1e-9, first_step=0.1 / lam_max))
    assert raw.status.success and not raw.stiff and raw.n_done == 2


@numba_only
@pytest.mark.parametrize("case", ["generic", "factored"])
def test_auto_numba_follows_numpy_auto(case):
    """Both backends switch where the converged mode caps the step (up to the rounding of
    the test's comparisons) and agree to their tolerance."""
    if case == "generic":  # a strong mode converged long before a weak one escapes
        ws, X, Y, prob = _problem((3, 4, 2), 0.05, [3.0, 0.02], seed=2)
        t_eval = np.array([0.0, 5.0, 50.0, 200.0, 400.0])
    else:  # wide enough that DOP853 keeps its stages factored (_linear_kernels.factored_advance)
        ws, X, Y, prob = _problem((40, 64, 64, 3), 0.1, [1.0, 0.75, 0.5], seed=1, whiten=False,
                                  P=300)
        t_eval = np.array([0.0, 10.0, 100.0, 1e3, 1e4])
    assert worth_factoring(prob, DOP853.n_stages) == (case == "factored")
    rtol = 1e-7
    kw = dict(rtol=rtol, atol=rtol * 1e-3, method="auto")
    a = gradient_flow(ws, X, Y, t_eval, backend="numpy", **kw)
    b = gradient_flow(ws, X, Y, t_eval, backend="numba", **kw)
    assert a.success and b.success
    assert "switched" in a.message and "switched" in b.message
    assert abs(_stiff_at(a.message) - _stiff_at(b.message)) <= 0.05 * _stiff_at(a.message)
    assert abs(b.nfev - a.nfev) <= 0.2 * a.nfev
    # each is within a few tolerances per decade of the exact flow (test_against_radau)
    scale = np.abs(a.end_to_end).max()
    assert np.abs(a.end_to_end - b.end_to_end).max() <= 60 * rtol * scale
    assert np.all(np.diff(b.loss) <= _LOSS_ROUNDING * b.loss[0])


@numba_only
def test_auto_numba_without_stiffness_is_compiled_dop853():
    """Until the test fires "auto" is the compiled DOP853 run itself, bit for bit."""
    ws, X, Y, prob = _problem((3, 4, 2), 0.3, [1.0, 0.6], seed=2)
    kw = dict(rtol=1e-8, atol=1e-11, backend="numba")
    t_eval = np.linspace(0.0, 12.0, 7)
    auto = gradient_flow(ws, X, Y, t_eval, method="auto", **kw)
    dop = gradient_flow(ws, X, Y, t_eval, method="DOP853", **kw)
    assert auto.success and "switched" not in auto.message
    assert (auto.nfev, auto.nsteps, auto.nrejected) == (dop.nfev, dop.nsteps, dop.nrejected)
    np.testing.assert_array_equal(auto.end_to_end, dop.end_to_end)


@numba_only
def test_auto_numba_far_past_convergence():
    """Outputs over 10 decades, most after convergence: the compiled DOP853 phase hands
    over once and the Rosenbrock phase's long steps make the horizon nearly free (DOP853
    alone needs about 4 evaluations per unit time there: 404,582 to t = 1e5)."""
    X, y, _ = scalar_teacher(50, 5, 1.0, seed=0)
    ws = init_network((5, 8, 1), 1e-3, seed=0)
    kw = dict(rtol=1e-6, atol=1e-10, backend="numba", method="auto")
    runs = {T: gradient_flow(ws, X, y, np.r_[0.0, np.logspace(-3, np.log10(T), 60)], **kw)
            for T in (1e3, 1e7)}
    for tr in runs.values():
        assert tr.success and "switched" in tr.message
        # non-increasing up to the rounding of the loss itself, a difference of O(loss0) terms
        assert np.all(np.isfinite(tr.loss))
        assert np.all(np.diff(tr.loss) <= _LOSS_ROUNDING * tr.loss[0])
        # converged to the tolerance: each of the n weights within ~atol of a minimum
        n = sum(w.size for w in ws)
        assert tr.loss[-1] <= 10 * n * kw["atol"] ** 2
    assert runs[1e7].nfev <= runs[1e3].nfev + 500


@numba_only
def test_auto_numba_budget_spans_phases():
    """``max_steps`` counts the steps of every phase; a run that exhausts it says so with
    the whole budget and keeps the outputs it reached, as the full run has them."""
    ws, X, Y, prob = _problem((3, 4, 2), 0.05, [3.0, 0.02], seed=2)
    t_eval = np.linspace(0.0, 400.0, 41)
    kw = dict(rtol=1e-6, atol=1e-9, backend="numba", method="auto")
    full = gradient_flow(ws, X, Y, t_eval, **kw)
    assert full.success and "switched" in full.message
    budget = full.nsteps + full.nrejected - 3
    cut = gradient_flow(ws, X, Y, t_eval, max_steps=budget, **kw)
    assert not cut.success and cut.status.name == "MAX_STEPS"
    assert f"({budget} attempted steps)" in cut.message
    assert cut.nsteps + cut.nrejected == budget
    reached = np.isfinite(cut.loss)
    assert 1 < reached.sum() < t_eval.size and np.all(reached[:reached.sum()])
    np.testing.assert_array_equal(cut.end_to_end[reached], full.end_to_end[reached])


@numba_only
def test_auto_numba_switch_on_an_output_time(monkeypatch):
    """On a grid fine enough that steps end on output times, the test fires after a step
    that ended on one: the compiled loop returns there and the driver hands over after
    observing it (``methods.compiled.stiff_fired``); the outputs still follow numpy's auto."""
    from linearnets.sim.methods import compiled

    fired = []
    real = compiled.stiff_fired

    def spy(stiff_steps, th):
        hit = real(stiff_steps, th)
        fired.append(hit)
        return hit

    monkeypatch.setattr(compiled, "stiff_fired", spy)
    ws, X, Y, prob = _problem((3, 4, 2), 0.05, [3.0, 0.02], seed=2)
    t_eval = np.linspace(0.0, 400.0, 401)
    rtol = 1e-6
    kw = dict(rtol=rtol, atol=rtol * 1e-3, method="auto")
    a = gradient_flow(ws, X, Y, t_eval, backend="numpy", **kw)
    b = gradient_flow(ws, X, Y, t_eval, backend="numba", **kw)
    assert any(fired)
    assert a.success and b.success and "switched" in b.message
    assert _stiff_at(b.message) in t_eval
    assert np.all(np.isfinite(b.end_to_end))
    assert np.abs(a.end_to_end - b.end_to_end).max() <= 60 * rtol * np.abs(a.end_to_end).max()


@numba_only
@pytest.mark.parametrize("case", ["no switch", "generic", "factored"])
def test_auto_numba_agrees_with_numpy_to_1e10(case):
    """The backends' contract, agreement to 1e-10 relative, at rtol 1e-10 (where each run
    is within a few 1e-11 of the exact flow, so the runs agree whatever their rounding
    decides): the problems of test_cupy's agreement test, and one that switches four
    times (measured: 2.4e-14, 1.1e-11, 6.3e-12)."""
    if case == "generic":
        X, Y = teacher_task(40, 3, [3.0, 0.02], seed=2)
        ws = init_network((3, 4, 2), 0.05, seed=3)
        t_eval = np.array([0.0, 5.0, 50.0, 200.0, 400.0])
    else:
        sizes, svals, sigma, whiten = (
            ((6, 8, 8, 2), [1.0, 0.5], 0.1, True) if case == "no switch"
            else ((20, 64, 64, 3), [1.0, 0.7, 0.4], 0.05, False))
        X, Y = teacher_task(200, sizes[0], svals, seed=3, whiten=whiten)
        ws = init_network(sizes, sigma, seed=4)
        t_eval = np.array([0.0, 1.0, 20.0, 80.0])
    kw = dict(rtol=1e-10, atol=1e-13, method="auto", record=("weights",))
    a = gradient_flow(ws, X, Y, t_eval, backend="numpy", **kw)
    b = gradient_flow(ws, X, Y, t_eval, backend="numba", **kw)
    assert a.success and b.success
    if case == "generic":
        assert "switched" in b.message
    scale = np.abs(a.end_to_end).max()
    assert np.abs(a.end_to_end - b.end_to_end).max() <= 1e-10 * scale
    for wa, wb in zip(a.weights, b.weights):
        assert np.abs(wa - wb).max() <= 1e-10 * np.abs(wa).max()


# --- ROS34PW2 with its stepping compiled (_linear_kernels.rosw_advance) -------------------------
@numba_only
@pytest.mark.parametrize("switch", [False, True])
@pytest.mark.parametrize("rtol", [1e-4, 1e-6, 1e-8])
def test_compiled_rosenbrock_steps_like_rosw_run(switch, rtol):
    """The compiled Rosenbrock-W loop (``methods.compiled.rosw``) is the numpy stepper's
    algorithm (``methods.rosw`` in ``base.integrate``) with its loop compiled: they differ
    only in the rounding of their products and Krylov inner products, which at most moves a
    solve's stopping iteration (its residual is held below ``KRYLOV_TOL`` of the step's
    error norm): about the same steps, the same hand-back to the explicit pair, outputs
    within the tolerance."""
    if switch:  # a plateau, not stiff: the explicit pair is cheaper from the start
        ws, X, Y, prob = _problem((3, 4, 2), 0.3, [1.0, 0.6], seed=2)
        t_eval = np.linspace(0.0, 12.0, 7)
    else:  # a strong mode converged long before a weak one escapes its plateau
        ws, X, Y, prob = _problem((3, 4, 2), 0.05, [3.0, 0.02], seed=2)
        t_eval = np.array([0.0, 5.0, 50.0, 200.0, 400.0])
    y0 = _rhs.pack(ws)
    opts = options(rtol, rtol * 1e-3, first_step=1e-3)
    runs = []
    for backend in ("numpy", "numba"):
        seen = {}
        res = phase("ROS34PW2", backend, prob, y0.copy(), 0.0, 1, t_eval, opts,
                    lambda k, v, seen=seen: seen.__setitem__(k, v.copy()),
                    switch_back=DOP853 if switch else None)
        runs.append((res, seen))
    (a, oa), (b, ob) = runs
    assert a.status.success and b.status.success
    assert a.n_done == b.n_done and a.nonstiff == b.nonstiff == switch
    # a rounding difference can flip a step whose error norm sits at 1 into a rejection
    # and move the steps after it: 10 % plus 5 steps, and the work to 10 %
    assert abs(a.nsteps - b.nsteps) <= 0.1 * a.nsteps + 5
    assert abs(a.nrejected - b.nrejected) <= 0.1 * a.nsteps + 5
    assert abs(a.nfev - b.nfev) <= 0.1 * a.nfev + 10
    if switch:
        # handed back before the first output, after at least STIFF_STEPS accepted steps
        assert a.n_done == 1 and a.t_last == pytest.approx(b.t_last, rel=1e-6)
        assert a.t_last < t_eval[1] and a.nsteps >= driver.STIFF_STEPS
    assert sorted(oa) == sorted(ob) == list(range(1, a.n_done))
    for k in oa:
        assert np.abs(oa[k] - ob[k]).max() <= rtol * np.abs(oa[k]).max()
    assert np.abs(a.y_last - b.y_last).max() <= rtol * np.abs(a.y_last).max()


@numba_only
def test_ros34pw2_numba_against_radau_and_numpy():
    """ROS34PW2 on numba: as accurate as numpy's against Radau (test_against_radau), and
    at rtol 1e-10 (each run then within a few 1e-11 of the exact flow) within the
    backends' 1e-10 of it."""
    cases = {"nonstiff": ([1.0, 0.6], 0.3, np.linspace(0, 12, 7)),
             "stiff": ([3.0, 0.02], 0.05, np.array([0, 5, 50, 200, 400]))}
    for svals, sigma, t_eval in cases.values():
        ws, X, Y, prob = _problem((3, 4, 2), sigma, svals, seed=2)
        ref = _reference(ws, prob, t_eval)
        for rtol in (1e-5, 1e-7):
            tr = gradient_flow(ws, X, Y, t_eval, rtol=rtol, atol=rtol * 1e-3, backend="numba",
                               method="ROS34PW2")
            assert tr.success
            assert np.abs(tr.end_to_end - ref).max() <= 30 * rtol * np.abs(ref).max()
    # the stiff case at rtol 1e-10 (6,743 steps each; measured 1.2e-12)
    kw = dict(rtol=1e-10, atol=1e-13, method="ROS34PW2", record=("weights",))
    a = gradient_flow(ws, X, Y, t_eval, backend="numpy", **kw)
    b = gradient_flow(ws, X, Y, t_eval, backend="numba", **kw)
    assert a.success and b.success and abs(a.nsteps - b.nsteps) <= 0.1 * a.nsteps + 5
    assert np.abs(a.end_to_end - b.end_to_end).max() <= 1e-10 * np.abs(a.end_to_end).max()
    for wa, wb in zip(a.weights, b.weights):
        assert np.abs(wa - wb).max() <= 1e-10 * np.abs(wa).max()


@numba_only
@settings(max_examples=15, deadline=None)
@given(depth=st.integers(1, 4), width=st.integers(1, 5), C=st.integers(1, 3),
       whiten=st.booleans(), eta=st.sampled_from([0.5, 1.0, 3.0]),
       scaled=st.booleans(), seed=st.integers(0, 10**6))
def test_compiled_ros34pw2_follows_numpy(depth, width, C, whiten, eta, scaled, seed):
    """Any depth, width, output count, data whitening, learning rate and per-layer rates:
    the compiled ROS34PW2 follows numpy's.  Each run is within a few rtol per decade of
    the exact flow (test_against_radau), so they agree to 60 rtol whatever their Krylov
    solves' rounding decides."""
    sizes = (3,) + (width,) * (depth - 1) + (C,)
    lr_scale = np.linspace(0.5, 2.0, depth) if scaled else None
    ws, X, Y, prob = _problem(sizes, 0.4, [1.5, 0.8, 0.3][:C], seed=seed % 1000,
                              whiten=whiten, eta=eta, lr_scale=lr_scale, P=30)
    t_eval = np.array([0.0, 0.5, 2.0, 6.0])
    rtol = 1e-6
    out = {}
    for backend in ("numpy", "numba"):
        W = np.full((t_eval.size,) + prob.Syx.shape, np.nan)

        def observe(k, y, W=W):
            W[k] = _rhs.end_to_end_flat(y, prob.shapes)
        raw = solve("ROS34PW2", backend, prob, _rhs.pack(ws), t_eval,
                    options(rtol, rtol * 1e-3), observe)
        assert raw.status.success and raw.n_done == t_eval.size
        out[backend] = W
    a, b = out["numpy"], out["numba"]
    assert np.abs(a - b).max() <= 60 * rtol * np.abs(a).max()
