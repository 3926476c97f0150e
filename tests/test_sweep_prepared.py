"""The prepared path (linearnets.sim.prepared): the same trajectory as gradient_flow, validation once."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.data import scalar_teacher, teacher_task
from linearnets.sim.prepared import prepare_flow


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_prepared_equals_gradient_flow(backend):
    X, y, _ = scalar_teacher(30, 6, 1.0, seed=0)
    t = np.array([0.5, 5.0, 40.0])
    pf = prepare_flow(X, y, (6, 8, 8, 1), t, backend=backend, rtol=1e-7, atol=1e-10)
    for seed in (1, 2):
        w0 = ln.init_network((6, 8, 8, 1), 0.3, seed=seed)
        a = ln.gradient_flow(w0, X, y, t, backend=backend, rtol=1e-7, atol=1e-10)
        b = pf.run(w0)
        assert b.success and b.nsteps == a.nsteps  # the same code path: the same steps
        # the same functions in the same order; allow a few ulps for a changed summation order
        np.testing.assert_allclose(b.loss, a.loss, rtol=1e-13, atol=0)
        np.testing.assert_allclose(b.end_to_end, a.end_to_end, rtol=1e-12, atol=1e-15)
        for wa, wb in zip(a.weights, b.weights):
            np.testing.assert_allclose(wb, wa, rtol=1e-12, atol=1e-15)
        assert b.loss[-1] < 1e-3 * b.loss[0]


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
