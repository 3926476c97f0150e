"""The prepared path (linearnets.sim.prepared): the same trajectory as gradient_flow, validation once."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.data import scalar_teacher, teacher_task
from linearnets.sim.prepared import prepare_flow


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_prepared_equals_gradient_flow(backend):
    X, y, _ = scalar_teacher(30, 6, 1.0, seed=0)
    t = np.array([0.0, 0.5, 5.0, 40.0])
    pf = prepare_flow(X, y, (6, 8, 8, 1), t, backend=backend, rtol=1e-7, atol=1e-10)
    for seed in (1, 2):
        w0 = ln.init_network((6, 8, 8, 1), 0.3, seed=seed)
        a = ln.gradient_flow(w0, X, y, t, backend=backend, rtol=1e-7, atol=1e-10)
        b = pf.run(w0)
        assert a.success and b.success
        # both integrate from t = 0 with error control at rtol: they agree within a few rtol of
        # the loss scale whether or not they take the same steps
        loss0 = float(pf_loss0(X, y, w0))
        np.testing.assert_allclose(b.loss, a.loss, rtol=0, atol=50 * 1e-7 * loss0)
        np.testing.assert_allclose(b.end_to_end, a.end_to_end, rtol=0, atol=50 * 1e-7)
        assert b.loss[-1] < 1e-3 * loss0


def pf_loss0(X, y, w0):
    f = X @ ln.end_to_end(w0)[0]
    return 0.5 * np.mean((y - f) ** 2)


def test_prepared_time_origin_against_solve_ivp():
    """t_eval need not start at 0: the weights are the state at t = 0 (checked against DOP853 of scipy)."""
    from scipy.integrate import solve_ivp

    X, y, _ = scalar_teacher(20, 3, 1.0, seed=4)
    w0 = ln.init_network((3, 4, 1), 0.5, seed=0)
    Sxx, Syx = X.T @ X / 20, (y[:, None].T @ X) / 20

    def rhs(t, z):
        W1, W2 = z[:12].reshape(4, 3), z[12:].reshape(1, 4)
        E = Syx - W2 @ W1 @ Sxx
        return np.concatenate(((W2.T @ E).ravel(), (E @ W1.T).ravel()))

    t = np.array([0.5, 2.0, 6.0])
    ref = solve_ivp(rhs, (0.0, 6.0), np.concatenate([w.ravel() for w in w0]), method="DOP853",
                    t_eval=t, rtol=1e-12, atol=1e-14)
    rtol = 1e-8
    tr = prepare_flow(X, y, (3, 4, 1), t, rtol=rtol, atol=1e-12, backend="numpy").run(w0)
    e2e_ref = np.array([(z[12:].reshape(1, 4) @ z[:12].reshape(4, 3)) for z in ref.y.T])
    err = np.max(np.abs(tr.end_to_end - e2e_ref))
    assert err < 100 * rtol, err


def test_prepared_many_outputs_and_shapes():
    X, Y = teacher_task(40, 5, np.array([2.0, 1.0]), seed=3)[:2]
    shapes = ((7, 5), (2, 7))
    pf = prepare_flow(X, Y, shapes, np.linspace(0.0, 10.0, 6), backend="numpy")
    w0 = ln.init_network((5, 7, 2), 0.2, seed=0)
    tr = pf.run(w0)
    assert tr.end_to_end.shape == (6, 2, 5) and tr.loss.shape == (6,)
    with pytest.raises(ValueError, match=r"weights0\[1\] must have shape \(2, 7\)"):
        pf.run([w0[0], w0[1].T])
    with pytest.raises(ValueError, match="layers"):
        pf.run(w0[:1])
    with pytest.raises(ValueError, match="non-finite"):
        pf.run([w0[0] * np.nan, w0[1]])
    with pytest.raises(ValueError, match="X has 5 columns"):
        prepare_flow(X, Y, (4, 7, 2), [1.0])
    with pytest.raises(ValueError, match="t_eval"):
        prepare_flow(X, Y, (5, 7, 2), [-1.0])
    with pytest.raises(ValueError, match="eta"):
        prepare_flow(X, Y, (5, 7, 2), [1.0], eta=0.0)
