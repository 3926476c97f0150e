"""The MLP model of DESIGN.md against an independent witness (tests/sim/reference_mlp.py).

1. The reference itself: its loop gradient equals central finite differences of
   its loss, its vectorised gradient equals the loop one, its Jacobian equals
   finite differences of its forward pass, for every option.
2. ``ln.gradient_flow`` with the network keywords against ``reference_flow``
   (solve_ivp DOP853, rtol 1e-12) at three times, in units of the package's rtol.
3. ``ln.empirical_ntk`` with the keywords against the per-parameter Jacobian NTK.

ReLU-type problems here keep clear of kinks on purpose (inputs drawn so that every
hidden pre-activation starts at |z| >= 0.2, horizons short enough that the reference
sees min |z| > 0.02 over a 2001-point grid): the flow is smooth there and the
comparison is at rtol.  Flows that cross kinks are tested where they are handled.
"""
import inspect
import itertools

import numpy as np
import pytest

import linearnets as ln

from reference_mlp import RefMLP, fd_grad, kink_free_inputs, reference_flow

ACTIVATIONS = ["linear", "relu", ("leaky_relu", 0.1), ("softplus", 2.0), "tanh"]
KINKED = ("relu", "leaky_relu")
M3 = (0.8, 1.3, 0.7)
LR3 = (1.0, 0.5, 2.0)
RTOL = 1e-8
# Error bound in units of rtol.  DOP853 holds each step's local error below rtol |y|
# (atol 1e-12 is below rtol |y| for every state here); over these horizons (at most
# two relaxation times of the linearised flow, contracting) the global error is a
# sum of O(100) local errors that does not grow, and the reference (rtol 1e-12) adds
# 1e-4 rtol.  Measured: at most 0.8 rtol on every case below.  K = 50 leaves that
# margin and still fails an O(h) error of a wrong right-hand side by decades.
K = 50


def _name(act):
    return act[0] if isinstance(act, tuple) else act


def _flow_keywords():
    return set(inspect.signature(ln.gradient_flow).parameters)


_NEEDED = {"activation", "biases", "multipliers", "alpha", "centered", "loss", "lr_scales"}
_MISSING = sorted(_NEEDED - _flow_keywords())
needs_keywords = pytest.mark.xfail(bool(_MISSING), strict=False,
                                   reason=f"gradient_flow lacks keywords {_MISSING}")
_NTK_MISSING = sorted({"activation", "biases", "multipliers", "alpha"}
                      - set(inspect.signature(ln.empirical_ntk).parameters))
needs_ntk_keywords = pytest.mark.xfail(bool(_NTK_MISSING), strict=False,
                                       reason=f"empirical_ntk lacks keywords {_NTK_MISSING}")


def make_problem(act, biases, alpha, centered, loss, lr_scales, multipliers, seed=0, P=8, D=3,
                 widths=(6, 5)):
    """A small network and data; for ReLU-type activations inputs with |z| >= 0.2 at t = 0.
    Returns (weights, biases, X, Y, tau, model) with tau = P / lambda_max of the
    lr-weighted NTK of f, the linearised flow's fastest time."""
    rng = np.random.default_rng(seed)
    C = 2 if loss == "mse" else 1
    sizes = (D,) + tuple(widths) + (C,)
    ws = ln.init_network(sizes, 1.0, seed=rng)
    bs = [0.3 * rng.standard_normal(n) for n in widths] if biases else None
    probe = RefMLP(ws, bs, activation=act, multipliers=multipliers)
    X = (kink_free_inputs(probe, P, D, rng, 0.2) if _name(act) in KINKED
         else rng.standard_normal((P, D)))
    Y = rng.standard_normal((P, C)) if loss == "mse" else np.sign(rng.standard_normal((P, 1)))
    model = RefMLP(ws, bs, activation=act, multipliers=multipliers, alpha=alpha,
                   centered=centered, loss=loss, lr_scales=lr_scales)
    J = model.jacobian(model.theta0, X).reshape(P * C, -1) / alpha
    tau = P / np.linalg.eigvalsh((J * model.layer_scale_vector()) @ J.T)[-1]
    return ws, bs, X, Y, tau, model


# ------------------------------------------------------------------ 1. the reference itself
REF_CASES = [(act, b, a, c, loss)
             for act in ACTIVATIONS
             for (b, c) in [(False, False), (True, True)]
             for a in [1e-2, 1.0, 1e2]
             for loss in ["mse", ("soft_hinge", 10.0)]
             if (b, c, a) in {(False, False, 1e-2), (True, True, 1.0), (False, False, 1e2),
                              (True, True, 1e2)}]


@pytest.mark.parametrize("act,biases,alpha,centered,loss", REF_CASES)
def test_reference_gradient_is_loss_derivative(act, biases, alpha, centered, loss):
    ws, bs, X, Y, _, model = make_problem(act, biases, alpha, centered, loss, LR3, M3, seed=1,
                                          P=5, widths=(4, 3))
    th = model.theta0 + 0.05 * np.random.default_rng(2).standard_normal(model.size)
    if _name(act) in KINKED:   # differences of width 1e-6 must not straddle a kink
        assert model.min_abs_preactivation(th, X) > 1e-3
    g = model.grad(th, X, Y)
    # central differences, h = 1e-6: truncation h^2 |L'''| / 6 and rounding eps |L| / h,
    # together < 1e-9 (|g| + |L|) here; 1e-7 leaves two decades
    gf = fd_grad(model, th, X, Y)
    scale = np.abs(g).max() + abs(model.loss_value(th, X, Y))
    np.testing.assert_allclose(g, gf, rtol=0, atol=1e-7 * scale)
    # the whole-batch version is the same sums in another order
    np.testing.assert_allclose(model.grad_vec(th, X, Y), g, rtol=0,
                               atol=1e-13 * np.abs(g).max())
    # lr_scales enter as per-layer rates
    rhs = model.rhs(th, X, Y)
    np.testing.assert_allclose(rhs, -model.layer_scale_vector() * g, rtol=1e-12,
                               atol=1e-14 * np.abs(g).max())


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("biases", [False, True])
def test_reference_jacobian_is_finite_difference(act, biases):
    ws, bs, X, Y, _, model = make_problem(act, biases, 3.0, False, "mse", None, M3, seed=3,
                                          P=4, widths=(4, 3))
    J = model.jacobian(model.theta0, X)
    Jf = model.jacobian_fd(model.theta0, X)
    np.testing.assert_allclose(J, Jf, rtol=0, atol=1e-7 * np.abs(J).max())
    K = model.ntk(model.theta0, X, X)
    assert K.shape == (4, 4, 2, 2)
    Kf = K.transpose(0, 2, 1, 3).reshape(8, 8)
    np.testing.assert_allclose(Kf, Kf.T, rtol=0, atol=1e-13 * np.abs(Kf).max())
    assert np.linalg.eigvalsh(Kf)[0] > -1e-12 * np.abs(Kf).max()


def test_reference_linear_defaults_match_linear_path():
    """With every option at its default the reference is the linear network; the package's
    sufficient-statistics path (in place before the nonlinear model) agrees."""
    rng = np.random.default_rng(0)
    ws = ln.init_network((4, 6, 5, 2), 0.6, seed=rng)
    X, Y = rng.standard_normal((12, 4)), rng.standard_normal((12, 2))
    t = [0.5, 2.0, 6.0]
    ref = reference_flow(ws, X, Y, t)
    traj = ln.gradient_flow(ws, X, Y, t, rtol=RTOL, backend="numpy", record=("weights",))
    e2e = np.array([ref.weights_t[2][k] @ ref.weights_t[1][k] @ ref.weights_t[0][k]
                    for k in range(3)])
    np.testing.assert_allclose(traj.end_to_end, e2e, rtol=0, atol=K * RTOL * np.abs(e2e).max())
    np.testing.assert_allclose(traj.loss, ref.loss, rtol=K * RTOL)


# ------------------------------------------------------------------ 2. trajectories
def compare_flow(case, c, rtol=RTOL, seed=0, record_weights=True, require_motion=True,
                 backend="numpy"):
    act, biases, alpha, centered, loss, lr, mult = case
    ws, bs, X, Y, tau, _ = make_problem(*case, seed=seed)
    kw = dict(activation=act, biases=bs, multipliers=mult, alpha=alpha, centered=centered,
              loss=loss, lr_scales=lr)
    for _ in range(4):
        t = c * tau * np.array([0.25, 0.5, 1.0])
        ref = reference_flow(ws, X, Y, t, **kw)
        if _name(act) not in KINKED or ref.min_abs_z > 0.02:
            break
        c /= 4                       # keep the comparison on the smooth part of the flow
    else:
        raise AssertionError("no kink-free horizon found")
    traj = ln.gradient_flow(ws, X, Y, t, rtol=rtol, atol=1e-12, backend=backend,
                            record=("outputs", "weights") if record_weights else ("outputs",),
                            **kw)
    assert traj.success, traj.message
    assert traj.backend == backend
    np.testing.assert_array_equal(traj.t, t)
    scale = np.abs(ref.outputs).max()
    err_out = np.abs(traj.outputs - ref.outputs).max() / scale
    assert err_out <= K * rtol, (err_out / rtol, case)
    for w, wr in zip(traj.weights, ref.weights_t):
        assert np.abs(w - wr[-1]).max() <= K * rtol * np.abs(wr).max()
    if record_weights:
        for w, wr in zip(traj.weights_t, ref.weights_t):
            assert np.abs(w - wr).max() <= K * rtol * np.abs(wr).max()
    if biases:
        for b, br in zip(traj.biases, ref.biases_t):
            assert np.abs(b - br[-1]).max() <= K * rtol * max(np.abs(br).max(), 1.0)
        if record_weights:
            for b, br in zip(traj.biases_t, ref.biases_t):
                assert np.abs(b - br).max() <= K * rtol * max(np.abs(br).max(), 1.0)
    np.testing.assert_allclose(traj.loss, ref.loss, rtol=K * rtol)
    if _name(act) in KINKED:
        assert getattr(traj, "kinks", 0) == 0      # the reference saw none either
    # the run did something: the outputs moved by a visible fraction of their scale
    moved = np.abs(ref.outputs[-1] - ref.model.F(ref.model.theta0, X)).max() / scale
    assert moved > 0.05 or not require_motion
    return err_out


FLOW_CASES = [  # (activation, biases, alpha, centered, loss, lr_scales, multipliers), c
    (("tanh", False, 1.0, False, "mse", None, None), 2.0),
    ((("softplus", 2.0), True, 1e-2, True, "mse", LR3, M3), 0.2),
    (("linear", True, 1e2, False, "mse", None, M3), 2.0),
    (("tanh", True, 1e2, True, ("soft_hinge", 10.0), LR3, None), 2.0),
    ((("softplus", 1.0), False, 1.0, False, "soft_hinge", None, M3), 2.0),
    (("relu", False, 1.0, False, "mse", None, None), 0.2),
    ((("leaky_relu", 0.1), True, 1e2, True, "mse", LR3, M3), 0.2),
    (("relu", True, 1e-2, False, "soft_hinge", None, M3), 0.002),
]


@needs_keywords
@pytest.mark.parametrize("case,c", FLOW_CASES, ids=[str(i) for i in range(len(FLOW_CASES))])
def test_flow_matches_reference(case, c):
    compare_flow(case, c)


@needs_keywords
@pytest.mark.parametrize("case,c", FLOW_CASES, ids=[str(i) for i in range(len(FLOW_CASES))])
def test_flow_matches_reference_numba(case, c):
    """The compiled MLP (backend 'numba') against the same independent witness."""
    pytest.importorskip("numba")
    compare_flow(case, c, backend="numba")


def _sweep():
    for act, biases, alpha, centered, loss in itertools.product(
            ACTIVATIONS, [False, True], [1e-2, 1.0, 1e2], [False, True],
            ["mse", ("soft_hinge", 20.0)]):
        lr, mult = (LR3, M3) if biases else (None, None)
        c = 2.0 if _name(act) not in KINKED else 0.2 * min(1.0, alpha)
        if alpha < 1 and _name(act) not in KINKED:
            c = 0.5
        yield (act, biases, alpha, centered, loss, lr, mult), c


@pytest.mark.slow
@needs_keywords
@pytest.mark.parametrize("case,c", list(_sweep()))
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_flow_matches_reference_sweep(case, c, backend):
    # (some corners barely move: uncentred alpha = 100 with the soft hinge starts fitted)
    if backend == "numba":
        pytest.importorskip("numba")
    compare_flow(case, c, seed=5, record_weights=False, require_motion=False, backend=backend)


# ------------------------------------------------------------------ 3. the NTK
NTK_CASES = [(act, b, a) for act in ACTIVATIONS for b in (False, True) for a in (1e-2, 1.0, 1e2)
             if (a == 1.0) or b]


@needs_ntk_keywords
@pytest.mark.parametrize("act,biases,alpha", NTK_CASES)
@pytest.mark.parametrize("C", [1, 2])
def test_empirical_ntk_matches_jacobian(act, biases, alpha, C):
    loss = "mse" if C == 2 else "soft_hinge"
    ws, bs, X, Y, _, model = make_problem(act, biases, alpha, False, loss, None, M3, seed=4,
                                          P=6, widths=(5, 4))
    X2 = np.random.default_rng(9).standard_normal((3, X.shape[1]))
    if _name(act) in KINKED:      # relu'(0) = 0 is a convention; keep X2 off kinks too
        X2 = kink_free_inputs(model, 3, X.shape[1], np.random.default_rng(9), 0.05)
    want = model.ntk(model.theta0, X, X2)
    got = ln.empirical_ntk(ws, X, X2, activation=act, biases=bs, multipliers=M3, alpha=alpha)
    assert got.shape == want.shape == ((6, 3) if C == 1 else (6, 3, C, C))
    # the same sums of products in another order: rounding ~1e-15 of the largest entry
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())
