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


def _kink_estimate_ratios(tab, thetas):
    """Per jump of the field at ``t + theta h`` inside a step: the pair's error estimate over
    the step's true error, ``|sum_{c_j > theta} e_j| / |(1 - theta) - sum_{c_j > theta} b_j|``
    (docs/simulator.md, "The auto rule"; the last stage ``f(y_new)`` sits at c = 1)."""
    c, b = np.append(tab.c, 1.0), np.append(tab.b, 0.0)
    out = []
    for th in thetas:
        later = c > th
        err = abs((1.0 - th) - b[later].sum())
        if err > 0.0:
            out.append(abs(tab.e[later].sum()) / err)
    return np.array(out)


def test_which_pairs_see_a_kink_inside_a_step():
    # why "auto" takes SSPRK104, not RK45, on a model with kinks: RK45's estimate and
    # Tsit5's are a few hundredths of the error they should report (medians 0.028 and
    # 0.037 over theta), SSPRK104's overstates it (1.59), BS32's is half of it (0.58)
    from linearnets.sim.methods.tableaux import TABLEAUX
    thetas = np.linspace(0.001, 0.999, 999)
    med = {name: float(np.median(_kink_estimate_ratios(TABLEAUX[name], thetas)))
           for name in ("RK45", "Tsit5", "BS32", "SSPRK104")}
    assert med["RK45"] < 0.05 and med["Tsit5"] < 0.05
    assert 0.5 < med["BS32"] < 1.0
    assert med["SSPRK104"] > 1.0
