"""Dense output (``gradient_flow(..., dense=True)``): RK45's continuous extension."""
import types

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.linalg import expm

from linearnets import backend as B
from linearnets.data import scalar_teacher, teacher_task
from linearnets.sim import _cupy, _rhs
from linearnets.sim._explicit import STABILITY_SAFETY
from linearnets.sim._tableaux import RK45, TABLEAUX
from linearnets.sim.flow import DENSE_METHODS, gradient_flow
from linearnets.sim.network import init_balanced, init_network

from test_flow import saxe

numba_only = pytest.mark.skipif(not B.numba_available(), reason="numba not installed")

THETAS = np.linspace(0.0, 1.0, 11)


def _extended(tab):
    """The stages plus ``K_s = f(y_new)`` as one tableau: (A (s+1, s+1), c (s+1,))."""
    s = tab.n_stages
    A = np.zeros((s + 1, s + 1))
    A[:s, :s] = tab.A
    A[s, :s] = tab.b
    return A, A.sum(axis=1)


def test_dense_methods():
    assert DENSE_METHODS == ("RK45",)
    for name, tab in TABLEAUX.items():
        assert (tab.dense_P is not None) == (name in DENSE_METHODS)
        if tab.dense_P is None:
            with pytest.raises(ValueError, match="no continuous extension"):
                tab.dense_weights(0.5)


def test_continuous_extension_end_points():
    # theta = 0 is the step's start, theta = 1 its end y + h sum b_j K_j
    assert np.array_equal(RK45.dense_weights(0.0), np.zeros(RK45.n_stages + 1))
    assert np.abs(RK45.dense_weights(1.0) - np.append(RK45.b, 0.0)).max() <= 4 * np.finfo(float).eps


@pytest.mark.parametrize("theta", THETAS)
def test_continuous_extension_order_conditions(theta):
    # order 4 at every theta: sum_j B_j(theta) Phi_j(tree) = theta^rho / gamma for the
    # eight trees of order <= 4 (Hairer-Norsett-Wanner I, II.6)
    A, c = _extended(RK45)
    Bw = RK45.dense_weights(theta)
    conds = [(Bw.sum(), theta), (Bw @ c, theta ** 2 / 2), (Bw @ c ** 2, theta ** 3 / 3),
             (Bw @ A @ c, theta ** 3 / 6), (Bw @ c ** 3, theta ** 4 / 4),
             ((Bw * c) @ A @ c, theta ** 4 / 8), (Bw @ A @ c ** 2, theta ** 4 / 12),
             (Bw @ A @ A @ c, theta ** 4 / 24)]
    for got, want in conds:
        assert abs(got - want) <= 1e-14
    # and not order 5 (the tall tree's condition fails for 0 < theta < 1)
    if 0.0 < theta < 1.0:
        assert abs(Bw @ c ** 4 - theta ** 5 / 5) > 1e-6


def test_continuous_extension_bounded_where_steps_go():
    # y' = lam y: the interpolant's factor R_theta(z) = 1 + z B(theta)^T (I - z A)^-1 1
    # stays within [-1, 1] wherever the stability cap lets a step go (h lam up to
    # STABILITY_SAFETY times the boundary), so converged modes stay damped between steps;
    # beyond, it exceeds 1 (1.083 at the boundary itself)
    A, _ = _extended(RK45)
    n = A.shape[0]
    worst = {}
    for z in np.linspace(-RK45.stability_boundary, 0.0, 121):
        stages = np.linalg.solve(np.eye(n) - z * A, np.ones(n))
        r = max(abs(1.0 + z * RK45.dense_weights(theta) @ stages)
                for theta in np.linspace(0.0, 1.0, 101))
        worst[z >= -STABILITY_SAFETY * RK45.stability_boundary] = max(
            r, worst.get(z >= -STABILITY_SAFETY * RK45.stability_boundary, 0.0))
    assert worst[True] <= 1.0 + 1e-12
    assert 1.0 < worst[False] < 1.1


def _saxe_problem():
    X, y, beta = scalar_teacher(10, 3, 1.5, seed=0)
    c0 = 0.05
    ws = init_balanced((3, 2, 1), np.sqrt(c0), left=np.ones((1, 1)), right=beta[:, None])
    return ws, X, y, c0


def _one_step_interpolation_error(h, theta):
    """One RK45 step of size h from the balanced Saxe state at t = 1: the continuous
    extension at theta against the exact rescaling sqrt(c(t)/c0) y0."""
    ws, X, y, c0 = _saxe_problem()
    prob = _rhs.make_problem([w.shape for w in ws], X, y[:, None])
    y0 = _rhs.pack(ws)
    t0 = 1.0
    ys = np.sqrt(saxe(t0, 1.5, c0) / c0) * y0
    s = RK45.n_stages
    K = np.empty((s + 1, y0.size))
    _rhs.rhs(ys, prob, K[0])
    for i in range(1, s + 1):
        w = RK45.b if i == s else RK45.A[i, :i]
        _rhs.rhs(ys + h * (w @ K[:i]), prob, K[i])
    got = ys + h * (RK45.dense_weights(theta) @ K)
    return np.linalg.norm(got - np.sqrt(saxe(t0 + theta * h, 1.5, c0) / c0) * y0)


@pytest.mark.parametrize("theta", [0.3, 0.5, 0.8])
def test_interpolation_error_is_fifth_power_of_the_step(theta):
    # order 4: the error at a fixed theta inside one step scales as h^5
    hs = np.array([0.1, 0.05, 0.025])
    errs = np.array([_one_step_interpolation_error(h, theta) for h in hs])
    slopes = np.diff(np.log(errs)) / np.diff(np.log(hs))
    assert np.all(np.abs(slopes - RK45.dense_order - 1) < 0.3), slopes


def test_depth_one_exact_solution_at_many_outputs():
    # the linear flow of a single layer against expm, 60 outputs, in units of the tolerance
    rng = np.random.default_rng(1)
    X = rng.standard_normal((12, 5))
    Y = rng.standard_normal((12, 2))
    W0 = rng.standard_normal((2, 5))
    P = X.shape[0]
    Sxx, Syx = X.T @ X / P, Y.T @ X / P
    M = np.zeros((7, 7))
    M[:5, :5] = -Sxx
    M[:5, 5:] = Syx.T
    t = np.concatenate(([0.0], np.geomspace(1e-3, 30.0, 59)))
    rtol, atol = 1e-9, 1e-13
    tr = gradient_flow([W0], X, Y, t, rtol=rtol, atol=atol, method="RK45", backend="numpy",
                       dense=True)
    stepped = gradient_flow([W0], X, Y, t, rtol=rtol, atol=atol, method="RK45",
                            backend="numpy")
    assert tr.success
    # outputs no longer end steps (here the accuracy sets most steps: 185 against 221)
    assert tr.nsteps < stepped.nsteps
    for k, tk in enumerate(t):
        exact = (expm(tk * M) @ np.vstack([W0.T, np.eye(2)]))[:5].T
        err = np.abs(tr.end_to_end[k] - exact).max() / (atol + rtol * np.abs(exact).max())
        assert err < 5.0


def test_two_outputs_are_the_stepped_run():
    # with only the end point as output, dense and stepped runs take the same steps
    X, Y = teacher_task(60, 6, [1.0, 0.5], seed=2)
    ws = init_network((6, 8, 8, 2), 0.1, seed=2)
    a = gradient_flow(ws, X, Y, [0.0, 40.0], method="RK45", backend="numpy", rtol=1e-7)
    b = gradient_flow(ws, X, Y, [0.0, 40.0], method="RK45", backend="numpy", rtol=1e-7,
                      dense=True)
    assert (a.nsteps, a.nrejected, a.nfev) == (b.nsteps, b.nrejected, b.nfev)
    assert np.array_equal(a.end_to_end, b.end_to_end)


def _network(kind):
    if kind == "generic":      # no layer worth factoring: the generic stepper
        X, Y = teacher_task(100, 6, (1.0, 0.6), seed=0)
        return init_network((6, 8, 8, 2), 1e-2, seed=1), X, Y, 300.0
    X, y, _ = scalar_teacher(200, 20, 1.0, seed=0)  # factored stages
    return init_network((20, 32, 32, 1), 1e-3, seed=1), X, y, 1300.0


@numba_only
@pytest.mark.parametrize("kind", ["generic", "factored"])
def test_numba_matches_numpy_bit_for_bit(kind):
    ws, X, Y, t_end = _network(kind)
    t = np.concatenate(([0.0], np.geomspace(1e-2, t_end, 150)))
    kw = dict(method="RK45", rtol=1e-7, atol=1e-10, dense=True, record=("weights",))
    a = gradient_flow(ws, X, Y, t, backend="numpy", **kw)
    b = gradient_flow(ws, X, Y, t, backend="numba", **kw)
    assert a.success and b.success
    assert (a.nsteps, a.nrejected, a.nfev) == (b.nsteps, b.nrejected, b.nfev)
    assert np.array_equal(a.end_to_end, b.end_to_end)
    for wa, wb in zip(a.weights_t, b.weights_t):
        assert np.array_equal(wa, wb)


@pytest.mark.parametrize("kind", ["generic", "factored"])
def test_accuracy_through_a_saddle_escape(kind):
    # inside the steps of the escape the extension stays at the tolerance's scale
    # (measured: at most 1.13 rtol; the stepped runs' own errors reach 2.3 rtol)
    ws, X, Y, t_end = _network(kind)
    t = np.concatenate(([0.0], np.geomspace(1e-2, t_end, 150)))
    ref = gradient_flow(ws, X, Y, t, backend="numpy", rtol=1e-12, atol=1e-16)
    scale = np.abs(ref.end_to_end).max()
    for rtol in (1e-5, 1e-8):
        tr = gradient_flow(ws, X, Y, t, backend="numpy", method="RK45", rtol=rtol,
                           atol=rtol * 1e-3, dense=True)
        assert tr.success
        assert np.abs(tr.end_to_end - ref.end_to_end).max() <= 5 * rtol * scale


@pytest.mark.parametrize("backend,kind", [("numpy", "generic"), ("numpy", "factored"),
                                          pytest.param("numba", "generic", marks=numba_only),
                                          pytest.param("numba", "factored", marks=numba_only)])
def test_failure_keeps_the_outputs_reached(backend, kind):
    ws, X, Y, t_end = _network(kind)
    t = np.linspace(0.0, t_end, 81)
    full = gradient_flow(ws, X, Y, t, method="RK45", backend=backend, rtol=1e-7, dense=True)
    tr = gradient_flow(ws, X, Y, t, method="RK45", backend=backend, rtol=1e-7, dense=True,
                       max_steps=full.nsteps // 2)
    assert not tr.success and "max_steps" in tr.message
    reached = np.isfinite(tr.loss)
    n = int(reached.sum())
    assert 1 < n < t.size and reached[:n].all()
    assert t[n - 1] <= tr.t_last < t[n]
    assert np.array_equal(tr.end_to_end[:n], full.end_to_end[:n])


def test_bad_dense_arguments():
    X, Y = teacher_task(30, 3, [1.0], seed=0)
    ws = init_network((3, 4, 1), 0.1, seed=0)
    with pytest.raises(ValueError, match="dense must be True or False"):
        gradient_flow(ws, X, Y, [0.0, 1.0], method="RK45", dense="yes")
    for method in ("DOP853", "SSPRK104", "ROS34PW2", "auto"):
        with pytest.raises(ValueError, match="continuous extension"):
            gradient_flow(ws, X, Y, [0.0, 1.0], method=method, dense=True)


def test_cupy_path_with_numpy_standin(monkeypatch):
    # the cupy backend's generic stepper interpolates too (numpy standing in for CuPy):
    # it rounds differently from numpy's stepper, so both are held to the exact flow
    from linearnets.sim import _solvers

    shim = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("_")})
    shim.asnumpy = lambda a: np.array(a, dtype=np.float64, copy=True)
    monkeypatch.setattr(B, "get_cupy", lambda: shim)
    _solvers.backends_for("RK45")
    monkeypatch.setitem(_solvers._REGISTRY["RK45"], "cupy", _cupy.make_solver("RK45", lambda: shim))
    ws, X, Y, t_end = _network("generic")
    t = np.concatenate(([0.0], np.geomspace(1e-2, t_end, 150)))
    ref = gradient_flow(ws, X, Y, t, backend="numpy", rtol=1e-12, atol=1e-16)
    rtol = 1e-8
    gpu = gradient_flow(ws, X, Y, t, backend="cupy", method="RK45", rtol=rtol, atol=rtol * 1e-3,
                        dense=True)
    cpu = gradient_flow(ws, X, Y, t, backend="numpy", method="RK45", rtol=rtol, atol=rtol * 1e-3,
                        dense=True)
    assert gpu.success and gpu.backend == "cupy"
    assert abs(gpu.nsteps - cpu.nsteps) <= 2
    scale = np.abs(ref.end_to_end).max()
    assert np.abs(gpu.end_to_end - ref.end_to_end).max() <= 5 * rtol * scale


@settings(max_examples=8, deadline=None)
@given(widths=st.lists(st.integers(2, 9), min_size=1, max_size=3),
       C=st.integers(1, 3), seed=st.integers(0, 10 ** 6),
       n_out=st.integers(3, 40))
def test_property_dense_outputs_match_the_flow(widths, C, seed, n_out):
    """Random widths, outputs and grids: every interpolated output within a few rtol
    of a tight reference, with no more steps than the stepped run."""
    rng = np.random.default_rng(seed)
    D = 5
    X, Y = teacher_task(40, D, list(np.linspace(1.5, 0.5, C)), seed=seed)
    ws = init_network((D, *widths, C), 0.3, seed=seed)
    t = np.concatenate(([0.0], np.sort(rng.uniform(0.0, 30.0, n_out))))
    t = np.unique(t)
    rtol = 1e-7
    ref = gradient_flow(ws, X, Y, t, backend="numpy", rtol=1e-12, atol=1e-16)
    tr = gradient_flow(ws, X, Y, t, backend="numpy", method="RK45", rtol=rtol,
                       atol=rtol * 1e-3, dense=True)
    stepped = gradient_flow(ws, X, Y, t, backend="numpy", method="RK45", rtol=rtol,
                            atol=rtol * 1e-3)
    assert tr.success and tr.nsteps <= stepped.nsteps
    scale = np.abs(ref.end_to_end).max()
    assert np.abs(tr.end_to_end - ref.end_to_end).max() <= 10 * rtol * scale
