"""SSPRK104 in two-register form (``methods/ssp.py`` on the linear model's factored slots,
``models/linear.FactoredSlots``) against its tableau, scipy and its compiled twin."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from linearnets.data import teacher_task
from linearnets.sim.models import linear as _rhs
from linearnets.sim.flow import gradient_flow
from linearnets.sim.methods import FlowStatus
from linearnets.sim.methods import base as mbase
from linearnets.sim.methods.tableaux import SSPRK104
from linearnets.sim.models import linear as _lowstorage
from linearnets.network import init_network
from sim_helpers import erk, options, ssp

# (layer sizes, teacher singular values, whitened inputs, sigma, per-layer learning rates)
PROBLEMS = {
    "depth1-C2": ((8, 2), [2.0, 1.0], False, 1.0, None),
    "scalar-deep": ((12, 16, 16, 12, 1), [1.0], True, 1.0, None),
    "mixed-C3": ((12, 60, 50, 3), [3.0, 1.5, 0.5], False, 1.0, [1.0, 0.5, 2.0]),
    "narrow-top-C4": ((10, 3, 20, 4), [2.0, 1.5, 1.0, 0.5], False, 1.0, None),
}


def _problem(name, seed=0):
    sizes, sv, white, sigma, lr = PROBLEMS[name]
    X, Y = teacher_task(4 * sizes[0], sizes[0], sv, seed=seed, whiten=white)
    ws = init_network(sizes, sigma, seed=seed)
    return ws, _rhs.make_problem(tuple(w.shape for w in ws), X, Y, lr_scale=lr)


def _run(run, problem, y0, t_eval, **opts):
    obs = []
    raw = run(problem, y0, t_eval, options(**opts), lambda k, y: obs.append(y.copy()))
    return raw, np.array(obs)


def _tableau(problem, y0, t_eval, opts, observe):
    # the explicit stepper on the Butcher tableau of the same method, dense stages
    return erk(problem, y0, t_eval, SSPRK104, opts, observe)


def _numpy(problem, y0, t_eval, opts, observe):
    return ssp(problem, y0, t_eval, opts, observe)


def _numba(problem, y0, t_eval, opts, observe):
    return ssp(problem, y0, t_eval, opts, observe, backend="numba")


def test_low_storage_form_is_the_tableau():
    """Ketcheson's two-register recursion, run on a linear ODE y' = M y with exact
    arithmetic in the coefficients, is the tableau's step: the same polynomial in hM."""
    rng = np.random.default_rng(0)
    M = rng.standard_normal((5, 5)) / 3
    y, h = rng.standard_normal(5), 0.4
    f = lambda v: M @ v  # noqa: E731
    q1, q2 = y.copy(), y.copy()
    K = []
    for _ in range(5):
        K.append(f(q1))
        q1 = q1 + h / 6 * K[-1]
    q2 = q2 / 25 + 9 * q1 / 25
    q1 = 15 * q2 - 5 * q1
    for _ in range(4):
        K.append(f(q1))
        q1 = q1 + h / 6 * K[-1]
    K.append(f(q1))
    y_ls = q2 + 3 / 5 * q1 + h / 10 * K[-1]
    Kt = np.zeros((10, 5))
    for i in range(10):
        Kt[i] = f(y + h * SSPRK104.A[i, :i] @ Kt[:i])
    np.testing.assert_allclose(np.array(K), Kt, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(y_ls, y + h * SSPRK104.b @ Kt, rtol=1e-13, atol=1e-14)
    # the error estimate y_new - y - h S is h (b - bhat) . K with bhat on slots 1, 4, 5, 9
    S = sum(w * Kt[k] for k, w in zip(_lowstorage.ERROR_SLOTS, _lowstorage.ERROR_WEIGHTS))
    np.testing.assert_allclose(y_ls - y - h * S, h * SSPRK104.e[:10] @ Kt, atol=1e-14)


def test_gemm_acc_adds_the_product_in_place():
    pytest.importorskip("numba")
    from linearnets.sim.models import _linear_kernels as kern
    rng = np.random.default_rng(1)
    for r, k, c in ((7, 3, 5), (1, 4, 9), (30, 1, 1), (64, 10, 48)):
        Q0, At = rng.standard_normal((r, c)), rng.standard_normal((r, k))
        G = rng.standard_normal((k, c))
        a, b = Q0.copy(), Q0.copy()
        _lowstorage.gemm_acc(a, -0.7, At, G)
        kern.gemm_acc(b, -0.7, At, G, (kern.DGEMM, np.zeros(8, dtype=np.int32), np.zeros(2)))
        exact = Q0 - 0.7 * At @ G
        assert np.abs(a - exact).max() <= 8 * k * np.finfo(float).eps * (1 + np.abs(exact).max())
        assert np.array_equal(a, b)


def _reference(problem, y0, t):
    """The flow at ``t`` from scipy's DOP853 at rtol 1e-13 on the flat state."""
    return solve_ivp(lambda _, y: problem.rhs(y), (0.0, t[-1]), y0, method="DOP853", t_eval=t,
                     rtol=1e-13, atol=1e-15).y.T


def _units(ys, ref, rtol, atol):
    """Global error in units of the requested (norm-wise) tolerance, as in test_flow."""
    return (np.abs(ys - ref).max(axis=1) / (atol + rtol * np.abs(ref).max(axis=1))).max()


def _similar_steps(a, b):
    # two forms of one method that round differently take other steps only where
    # rounding decides (an error norm at 1, a stiffness estimate at the cap): a few in a
    # hundred; 10 % plus 5 still catches other step control
    return abs(a.nsteps - b.nsteps) <= 0.1 * max(a.nsteps, b.nsteps) + 5


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_follows_the_tableau(name):
    """Up to t = 3 (learning; accuracy sets the steps) the low-storage stepper and the
    generic stepper on the tableau are within the tolerance of the flow, with about the
    same steps."""
    ws, problem = _problem(name)
    y0 = _rhs.pack(ws)
    t = np.array([0.0, 0.5, 3.0])
    rtol, atol = 1e-8, 1e-12
    ref = _reference(problem, y0, t)
    a, ya = _run(_tableau, problem, y0, t, rtol=rtol, atol=atol)
    b, yb = _run(_numpy, problem, y0, t, rtol=rtol, atol=atol)
    assert a.status.success and b.status.success and _similar_steps(a, b)
    assert _units(ya, ref, rtol, atol) < 10 and _units(yb, ref, rtol, atol) < 10


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_matches_solve_ivp(name):
    ws, problem = _problem(name, seed=2)
    y0 = _rhs.pack(ws)
    t = np.array([0.0, 2.0, 8.0, 30.0])
    rtol, atol = 1e-8, 1e-10
    raw, ys = _run(_numpy, problem, y0, t, rtol=rtol, atol=atol)
    ref = solve_ivp(lambda _, y: problem.rhs(y), (0.0, t[-1]), y0, method="DOP853", t_eval=t,
                    rtol=1e-13, atol=1e-15).y.T
    # global error in units of the requested (norm-wise) tolerance, as in test_flow
    units = np.abs(ys - ref).max(axis=1) / (atol + rtol * np.abs(ref).max(axis=1))
    assert raw.status.success and units.max() < 10


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_numba_twin_follows_numpy(name):
    pytest.importorskip("numba")
    ws, problem = _problem(name, seed=1)
    y0 = _rhs.pack(ws)
    # to t = 30: learning, then converged modes that cap the step (stiffness estimate)
    t = np.concatenate(([0.0], np.logspace(-2, 1.5, 12)))
    rtol, atol = 1e-9, 1e-13
    ref = _reference(problem, y0, t)
    a, ya = _run(_numpy, problem, y0, t, rtol=rtol, atol=atol)
    b, yb = _run(_numba, problem, y0, t, rtol=rtol, atol=atol)
    assert a.status.success and b.status.success and _similar_steps(a, b)
    assert _units(ya, ref, rtol, atol) < 10 and _units(yb, ref, rtol, atol) < 10


def test_registered_for_ssprk104_and_used_by_gradient_flow():
    ws, problem = _problem("narrow-top-C4")
    assert not _lowstorage.factored_is_faster(problem)
    t = np.array([0.0, 4.0])
    sizes, sv, white, _, _ = PROBLEMS["narrow-top-C4"]
    X, Y = teacher_task(4 * sizes[0], sizes[0], sv, seed=0, whiten=white)
    tr = gradient_flow(ws, X, Y, t, backend="numpy", method="SSPRK104", rtol=1e-7, atol=1e-10)
    raw, ys = _run(_numpy, problem, _rhs.pack(ws), t, rtol=1e-7, atol=1e-10)
    assert np.array_equal(_rhs.pack(tr.weights), ys[-1])
    assert tr.nfev == raw.nfev


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_large_states_run_as_factored_stages(backend, monkeypatch):
    """Above LOWSTORAGE_MAX_BYTES, where the layers are worth factoring, SSPRK104 runs
    as factored Butcher stages (``_lowrank``), bit for bit; below, in low-storage form;
    and never factored where the layers are not worth it."""
    if backend == "numba":
        pytest.importorskip("numba")
    _lowrank = _lowstorage
    ws, problem = _problem("mixed-C3")
    assert _lowrank.worth_factoring(problem, SSPRK104.n_stages)
    assert 8 * problem.size <= _lowstorage.LOWSTORAGE_MAX_BYTES
    sizes, sv, white, _, _ = PROBLEMS["mixed-C3"]
    X, Y = teacher_task(4 * sizes[0], sizes[0], sv, seed=0, whiten=white)
    t = np.array([0.0, 1.0, 3.0])
    kw = dict(rtol=1e-7, atol=1e-10, backend=backend, method="SSPRK104",
              lr_scales=PROBLEMS["mixed-C3"][4], record=("weights",))

    def run(f):
        obs = []
        raw = f(problem, _rhs.pack(ws), t, options(1e-7, 1e-10),
                lambda k, y: obs.append(y.copy()))
        return raw.nfev, np.array(obs)

    def flow():
        tr = gradient_flow(ws, X, Y, t, **kw)
        return tr.nfev, np.concatenate([w.reshape(t.size, -1) for w in tr.weights_t], axis=1)
    low = _numpy if backend == "numpy" else _numba

    def fac(*a):
        return erk(*a[:3], SSPRK104, *a[3:], stages="factored", backend=backend)
    small, as_low = flow(), run(low)
    assert small[0] == as_low[0] and np.array_equal(small[1], as_low[1])
    monkeypatch.setattr(_lowstorage, "LOWSTORAGE_MAX_BYTES", 8 * problem.size - 1)
    assert _lowstorage.factored_is_faster(problem)
    large, as_fac = flow(), run(fac)
    assert large[0] == as_fac[0] and np.array_equal(large[1], as_fac[1])
    ws, narrow = _problem("narrow-top-C4")
    assert not _lowrank.worth_factoring(narrow, SSPRK104.n_stages)
    monkeypatch.setattr(_lowstorage, "LOWSTORAGE_MAX_BYTES", 0)
    assert not _lowstorage.factored_is_faster(narrow)


@pytest.mark.parametrize("name", ["depth1-C2", "narrow-top-C4"])
def test_caps_the_step_once_modes_have_converged(name, monkeypatch):
    """Long past convergence the step is held inside the stability interval: without
    the cap the controller lets it grow past 13.9 / rho and has it rejected, over and
    over (measured: 29 of 126 steps on depth1-C2, 403 of 893 on narrow-top-C4).  On
    narrow-top-C4 the 3-wide bottleneck leaves a residual the network cannot fit, so
    the stage factors are large while the gradient vanishes: the estimate must not
    drown in their rounding (a Gram-matrix form of |K_10 - K_9| did, and the steps
    collapsed)."""
    ws, problem = _problem(name)
    y0 = _rhs.pack(ws)
    t = np.array([0.0, 400.0])
    capped, _ = _run(_numpy, problem, y0, t, rtol=1e-6, atol=1e-9)
    monkeypatch.setattr(mbase, "STABILITY_SAFETY", np.inf)
    free, _ = _run(_numpy, problem, y0, t, rtol=1e-6, atol=1e-9)
    assert capped.status.success and free.status.success
    assert free.nrejected >= 0.2 * free.nsteps
    assert capped.nrejected <= max(3, 0.02 * capped.nsteps)
    assert capped.nsteps <= free.nsteps
    # and never longer than the stability interval allows: rho = top eigenvalue of
    # Sxx times eta for depth 1
    if name == "depth1-C2":
        rho = np.linalg.eigvalsh(problem.Sxx).max()
        assert capped.nsteps >= 400.0 * rho / SSPRK104.stability_boundary


@pytest.mark.parametrize("solver", [_numpy, _numba])
def test_failure_is_reported(solver):
    if solver is _numba:
        pytest.importorskip("numba")
    ws, problem = _problem("scalar-deep")
    raw, ys = _run(solver, problem, _rhs.pack(ws), np.array([0.0, 1.0, 50.0]), rtol=1e-8,
                   atol=1e-12, max_steps=5)
    assert raw.status is FlowStatus.MAX_STEPS and not raw.status.success
    assert raw.nsteps + raw.nrejected == 5 and len(ys) == raw.n_done


@pytest.mark.parametrize("name, t_end, gram_ok", [("mixed-C3", 2.0, True),
                                                  ("narrow-top-C4", 400.0, False)])
def test_gram_stiffness_sums_only_where_reliable(name, t_end, gram_ok, monkeypatch):
    """While the full-rank task is being learned the Gram form of |K_10 - K_9|^2 is
    accepted and agrees with the multiplied-out sums; long after the 3-wide bottleneck
    has fitted what it can, the remaining residual makes the Gram form cancel and it is
    refused."""
    ws, problem = _problem(name)
    st = _lowstorage.FactoredSlots(problem)
    ssp(problem, _rhs.pack(ws), np.array([0.0, t_end]), options(1e-6, 1e-9), lambda k, y: None,
        store=st)
    # the slots hold the last step's K_9 and K_10 (f(y_new) was moved to slot 0 too);
    # layer 0 has G_0 = E, the residual itself
    i = 0
    args = (st.A(10, i), st.G(10, i), st.A(9, i), st.G(9, i), problem.eta_l[i])
    gram = _lowstorage._gram_sums(*args)
    assert (gram is not None) == gram_ok
    monkeypatch.setattr(_lowstorage, "GRAM_MIN_REL", np.inf)    # always multiply out
    dense = st.stiffness_sums(10, 9)
    monkeypatch.undo()
    mixed = st.stiffness_sums(10, 9)
    # accepted Gram sums are at least GRAM_MIN_REL of their terms, and rounded by about
    # (N_l + N_{l-1} + C) eps of those; the multiplied-out sums are eps-relative
    width = max(r + c for r, c in problem.shapes) + problem.Syx.shape[0]
    bound = 4 * width * np.finfo(float).eps / _lowstorage.GRAM_MIN_REL
    np.testing.assert_allclose(mixed, dense, rtol=bound)
