"""Step-size control of the explicit steppers: Gustafsson's predictive step.

Where the local error grows from one step to the next -- a solution that
accelerates, like a flow escaping a saddle -- the standard controller proposes a
step that the next attempt rejects.  The predictive step extrapolates the growth
of the error from the last two accepted steps; it only changes which steps are
tried, never the acceptance test, so the global error stays that of the tolerance.
"""
import numba
import numpy as np
import pytest

from linearnets.data import scalar_teacher
from linearnets.sim.methods import base as _explicit
from linearnets.sim.methods import base as mbase
from linearnets.sim.methods import StepControl, StepperOptions, integrate
from linearnets.sim.methods.erk import ExplicitRK
from linearnets.sim.methods.tableaux import TABLEAUX
from linearnets.sim.flow import gradient_flow
from linearnets.network import init_network

EXPONENT = -1.0 / 5.0  # RK45: error estimate of order 4


@numba.njit
def _compiled(h_next, h_try, err, exponent, h_prev, err_prev):
    return mbase.predictive_step(h_next, h_try, err, exponent, h_prev, err_prev)


def _both(*args):
    """The rule in Python and compiled (as the numba loops call it) on the same arguments."""
    a = _explicit.predictive_step(*args)
    b = _compiled(*args)
    assert a == b
    return a


def test_predictive_step_rules():
    # no previous accepted step, or a zero error: the standard proposal is kept
    assert _both(3.0, 1.0, 0.5, EXPONENT, 0.0, 0.0) == 3.0
    assert _both(3.0, 1.0, 0.0, EXPONENT, 2.0, 0.5) == 3.0
    # equal errors on a shrinking step sequence: the next step shrinks by the same ratio
    h = _both(10.0, 0.5, 0.4, EXPONENT, 1.0, 0.4)
    expected = _explicit.SAFETY * 0.5 * 0.5 * (0.4 / 0.4 / 0.4) ** 0.2
    assert h == pytest.approx(expected, rel=1e-15) and h < 0.5
    # never longer than the standard proposal (growing steps, tiny error)
    assert _both(7.0, 1.0, 1e-8, EXPONENT, 0.1, 0.01) == 7.0
    # never below MIN_FACTOR of the step just taken
    assert _both(1.0, 1.0, 0.99, EXPONENT, 1e6, 0.01) == _explicit.MIN_FACTOR
    # a tiny error squared does not divide by zero (the error may be far below 1e-154)
    assert _both(2.0, 1.0, 1e-200, EXPONENT, 1.0, 0.01) == 2.0


def _blowup_run(tab, rtol):
    """``y' = y^2`` from ``y(0) = (1, 1/2)`` to ``t = 1 - 1e-3``
    (exact: ``y_i(0) / (1 - y_i(0) t)``)."""
    y0 = np.array([1.0, 0.5])
    T = 1.0 - 1e-3
    out = {}
    def make(rhs, n, rtol, atol, xp):
        return ExplicitRK(rhs, n, rtol, atol, xp, fun=lambda y, o: np.multiply(y, y, out=o),
                          tableau=TABLEAUX[tab])
    raw = integrate(None, y0, np.array([0.0, T]), make, StepperOptions(rtol=rtol, atol=1e-12),
                    lambda k, y: out.__setitem__(k, y.copy()),
                    control=StepControl(predictive=True, cap_safety=_explicit.STABILITY_SAFETY))
    exact = y0 / (1.0 - y0 * T)
    assert raw.status.success
    return raw, np.max(np.abs(out[1] - exact) / exact)


@pytest.mark.parametrize("tab", ["RK45", "DOP853", "SSPRK104"])
def test_predictive_step_stops_rejections_on_a_blow_up(tab, monkeypatch):
    pred, err_pred = _blowup_run(tab, 1e-6)
    monkeypatch.setattr(mbase, "predictive_step", lambda h, *args: h)  # standard control
    std, err_std = _blowup_run(tab, 1e-6)
    # the standard controller rejects about every second attempt (41 of 85 for
    # RK45); the predictive step almost none, at a fraction of the evaluations
    assert std.nrejected >= 0.4 * std.nsteps
    assert pred.nrejected <= max(2, 0.1 * pred.nsteps)
    assert pred.nfev <= 0.6 * std.nfev
    # the same acceptance test on every step: the global error stays in the same class
    # (amplified ~ y(T) = 1e3 times rtol by the blow-up itself, for both controllers)
    assert err_pred <= 2.0 * err_std


def test_predictive_step_on_a_saddle_escape(monkeypatch):
    """Depth 3 from sigma = 1e-3: a long plateau, then an escape that accelerates as
    ``s' ~ s^(4/3)`` until it saturates (the small network of ``benchmarks/bench_flow.py``)."""
    X, y, _ = scalar_teacher(200, 20, 1.0, seed=0)
    ws = init_network((20, 32, 32, 1), 1e-3, seed=1)
    t = [0.0, 1122.0]
    kw = dict(rtol=1e-5, atol=1e-8, method="RK45")
    ref = gradient_flow(ws, X, y, t, rtol=1e-10, atol=1e-14, backend="numpy")
    pred = gradient_flow(ws, X, y, t, backend="numpy", **kw)
    # the compiled loop applies the same rule (on other rounding): as few rejections
    fast = gradient_flow(ws, X, y, t, backend="numba", **kw)
    assert fast.success and fast.nrejected <= max(3, 0.1 * fast.nsteps)
    monkeypatch.setattr(mbase, "predictive_step", lambda h, *args: h)
    std = gradient_flow(ws, X, y, t, backend="numpy", **kw)
    assert pred.success and std.success
    # standard control: about every second step of the escape rejected (22 of 55 attempts)
    assert std.nrejected >= 0.25 * (std.nsteps + std.nrejected)
    assert pred.nrejected <= max(3, 0.1 * pred.nsteps)
    assert pred.nfev <= 0.8 * std.nfev
    # the same acceptance test: the escape amplifies the local errors of both alike
    scale = np.abs(ref.end_to_end[-1]).max()
    err = np.abs(pred.end_to_end[-1] - ref.end_to_end[-1]).max() / scale
    err_std = np.abs(std.end_to_end[-1] - ref.end_to_end[-1]).max() / scale
    err_fast = np.abs(fast.end_to_end[-1] - ref.end_to_end[-1]).max() / scale
    assert err <= 2.0 * err_std and err_fast <= 2.0 * err_std
