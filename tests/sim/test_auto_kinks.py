"""method="auto" on a ReLU flow that slides along kinks (docs/simulator.md, "The auto rule")."""
import numpy as np

import linearnets as ln
from linearnets.sim.methods import driver


def _sliding_relu():
    """benchmarks/bench_mlp.py's small problem: 10-64-64-1 ReLU (He init), P = 200, a ReLU
    teacher; the flow slides along kinks from t = 0."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 10))
    teacher = ln.init_network((10, 8, 1), np.sqrt(2.0), seed=rng)
    y = np.maximum(X @ teacher[0].T, 0) @ teacher[1].T
    return ln.init_network((10, 64, 64, 1), np.sqrt(2.0), seed=rng), X, y / y.std()


def test_auto_pair_on_a_model_with_kinks():
    assert driver.auto_pair(1e-4) == "RK45"
    assert driver.auto_pair(1e-4, smooth=False) == "SSPRK104"
    assert driver.auto_pair(1e-8, smooth=False) == "DOP853"


def test_auto_on_a_sliding_relu_flow_meets_its_tolerance():
    """At rtol = kink_rtol = 3e-5 the outputs are within 4 rtol of max |F_ref| of a tight
    DOP853 reference (rtol 1e-8, kink_rtol 1e-6).  Measured: "auto" 1.3-1.4 rtol; with RK45,
    whose error estimate misses a kink inside a step, 7-8 rtol."""
    ws, X, Y = _sliding_relu()
    t = [0.3, 0.6]
    kw = dict(activation="relu", record=("outputs",), backend="auto", max_steps=10 ** 6)
    ref = ln.gradient_flow(ws, X, Y, t, rtol=1e-8, atol=1e-12, kink_rtol=1e-6,
                           method="DOP853", **kw)
    rtol = 3e-5
    tr = ln.gradient_flow(ws, X, Y, t, rtol=rtol, kink_rtol=rtol, method="auto", **kw)
    assert ref.success and tr.success, (ref.message, tr.message)
    assert tr.kinks > 100 and tr.sliding_time > 0.5
    err = np.abs(tr.outputs - ref.outputs).max(axis=(1, 2)) / np.abs(ref.outputs).max()
    assert np.all(err <= 4 * rtol), err / rtol
