"""The network-agnostic steppers and their one adaptive loop (linearnets.sim.methods)."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from linearnets.sim.methods import FlowStatus
from linearnets.sim.methods import STEPPERS, StepControl, StepperOptions, integrate
from linearnets.sim.methods import base as mbase

A = np.array([[-1.0, 2.0], [-2.0, -0.5]])


def _rhs(t, y):
    return A @ y + np.array([np.sin(y[0]), 0.0])


def _run(rhs, y0, te, cls, **kw):
    out = np.full((len(te), len(y0)), np.nan)

    def obs(k, y):
        out[k] = y
    stop = kw.pop("stop", None)
    switches = kw.pop("switches", None)
    fallback = kw.pop("fallback", None)
    r = integrate(rhs, np.asarray(y0, float), np.asarray(te, float), cls, StepperOptions(**kw),
                  obs, stop=stop, switches=switches, control=StepControl(fallback=fallback))
    return r, out


@pytest.mark.parametrize("name", sorted(STEPPERS))
def test_steppers_match_solve_ivp(name):
    rtol = 1e-6 if name == "HE21" else 1e-8
    te = [0.0, 0.5, 1.0, 3.0, 10.0]
    r, out = _run(_rhs, [1.0, 0.5], te, STEPPERS[name], rtol=rtol, atol=1e-12)
    ref = solve_ivp(_rhs, (0, 10), [1.0, 0.5], t_eval=te, method="DOP853", rtol=1e-13,
                    atol=1e-15).y.T
    assert r.status is FlowStatus.SUCCESS and r.n_done == len(te)
    assert np.array_equal(out[0], [1.0, 0.5])
    # global error of a few local tolerances over ~10 decay times
    assert np.max(np.abs(out - ref)) <= 50 * rtol


def test_step_factor_rules():
    s = STEPPERS["DOP853"](_rhs, 2, 1e-8, 1e-12)
    assert s.factor(0.0) == mbase.MAX_FACTOR
    assert s.factor(1e-30) == mbase.MAX_FACTOR and s.factor(1e30) == mbase.MIN_FACTOR
    assert s.factor(1e-30, after_rejection=True) == 1.0
    assert s.factor(2.0) == pytest.approx(mbase.SAFETY * 2.0 ** (-1 / 8))
    h = s.initial_step(0.0, np.array([1.0, 0.5]), _rhs(0, np.array([1.0, 0.5])), 10.0)
    assert 0 < h <= 10.0


def test_budget_keeps_outputs_reached():
    te = [0.0, 1e-3, 10.0]
    r, out = _run(_rhs, [1.0, 0.5], te, STEPPERS["RK45"], rtol=1e-10, max_steps=5,
                  first_step=1e-3)
    assert r.status is FlowStatus.MAX_STEPS and r.n_done == 2
    assert np.all(np.isfinite(out[:2])) and np.all(np.isnan(out[2]))
    assert "t = " in r.message


def test_blow_up_fails_cleanly():
    te = [0.5, 2.0]
    r, out = _run(lambda t, y: y * y, [1.0], te, STEPPERS["DOP853"], rtol=1e-8)
    assert not r.status.success and r.n_done == 1
    assert out[0, 0] == pytest.approx(2.0, rel=1e-6)          # 1/(1 - t)
    assert np.isnan(out[1, 0]) and r.t_last < 1.0 + 1e-6      # the pole at t = 1


def test_stop_rule_located_inside_a_step():
    te = [0.0, 0.3, 5.0, 10.0]
    r, out = _run(lambda t, y: -y, [1.0], te, STEPPERS["DOP853"], rtol=1e-10,
                  stop=lambda y: float(y[0]) - 0.5)
    assert r.status.success and r.n_done == 4
    assert abs(r.t_stop - np.log(2.0)) <= 1e-8
    assert out[1, 0] == pytest.approx(np.exp(-0.3), rel=1e-9)
    assert np.all(out[2:, 0] == out[2, 0]) and abs(out[2, 0] - 0.5) <= 1e-8


def test_stop_reached_only_at_the_end_of_a_step():
    """A stop level that only the step's end reaches (a loss at its rounding floor, say):
    no shorter step falls below it, and the stopped state is the step's end."""
    opts = StepperOptions(rtol=1e-10, atol=1e-14, first_step=0.125)
    first = []
    integrate(lambda t, y: -y, np.array([1.0]), np.array([0.0, 0.125]), STEPPERS["DOP853"], opts,
              lambda k, y: first.append(float(y[0])))
    level = first[-1]                      # y at the end of the first step, bit for bit
    out = []
    r = integrate(lambda t, y: -y, np.array([1.0]), np.array([0.0, 1.0]), STEPPERS["DOP853"], opts,
                  lambda k, y: out.append(float(y[0])), stop=lambda y: float(y[0]) - level)
    assert r.status.success and r.t_stop == 0.125 and out == [1.0, level]


def test_sliding_surface_does_not_stall():
    """x' = 0.5 - sign(x - 1), t' = 1 from x = 2: the flow hits x = 1 at t = 2 and slides
    there (x' = -0.5 above, +1.5 below), the Filippov solution x = 1.  The loop switches to
    BS32 at the kink, chatters across it within about kink_rtol of the state, and finishes.
    (The surface is away from x = 0: a componentwise relative tolerance means nothing for a
    component sliding along 0.)"""
    state = {}

    def rhs(t, y):
        state["p"] = np.array([y[0] > 1.0])
        return np.array([0.5 - (1.0 if y[0] > 1.0 else -1.0), 1.0])
    te = [0.0, 1.0, 3.0, 10.0]
    kink_rtol = 1e-3
    r, out = _run(rhs, [2.0, 0.0], te, STEPPERS["DOP853"], rtol=1e-8, kink_rtol=kink_rtol,
                  max_steps=20000, switches=lambda: state["p"], fallback=STEPPERS["BS32"])
    assert r.status.success, r.message
    assert out[1, 0] == pytest.approx(1.5, abs=1e-7)
    # the chatter: local errors of kink_rtol times the state (|y| <= 10)
    assert np.max(np.abs(out[2:, 0] - 1.0)) <= 10 * kink_rtol * 10.0
    np.testing.assert_allclose(out[:, 1], te, rtol=1e-7)
    assert r.kinks > 10 and r.sliding_time > 0.5 * 8 and r.fallback_steps > 0
    assert r.nsteps + r.nrejected < 20000
    assert "kink" in r.message


def _linear(lams):
    lam = np.asarray(lams, float)
    return (lambda t, y: -lam * y), lam


def test_dense_output_and_a_resumed_run_match_solve_ivp():
    """``dense=True``: only the last output ends a step, the others come from the
    continuous extension (order 4 for RK45), at the same tolerance as stepped outputs;
    ``t0``/``k0``/``f0`` resume a run inside ``t_eval``."""
    te = np.linspace(0.0, 10.0, 201)
    rtol, atol = 1e-8, 1e-12
    ref = solve_ivp(_rhs, (0, 10), [1.0, 0.5], t_eval=te, method="DOP853", rtol=1e-13,
                    atol=1e-15).y.T
    out = np.full((te.size, 2), np.nan)
    opts = StepperOptions(rtol=rtol, atol=atol)
    obs = lambda k, y: out.__setitem__(k, y)  # noqa: E731
    stepped = integrate(_rhs, np.array([1.0, 0.5]), te, STEPPERS["RK45"], opts, obs)
    assert np.max(np.abs(out - ref)) <= 50 * rtol
    out[:] = np.nan
    dense = integrate(_rhs, np.array([1.0, 0.5]), te, STEPPERS["RK45"], opts, obs,
                      control=StepControl(dense=True))
    assert dense.status.success and dense.n_done == te.size
    # the 200 outputs no longer each end a step (measured: 246 steps against 402)
    assert dense.nsteps < 0.7 * stepped.nsteps
    assert np.max(np.abs(out - ref)) <= 50 * rtol
    # resumed at output 100 from the state there
    out[:] = np.nan
    y100 = ref[100].copy()
    part = integrate(_rhs, y100, te, STEPPERS["DOP853"], opts, obs, t0=te[100], k0=101)
    assert part.status.success and part.n_done == te.size
    assert np.all(np.isnan(out[:101])) and np.max(np.abs(out[101:] - ref[101:])) <= 50 * rtol
    # f(y0) and the initial step's one evaluation, then 12 a step
    assert part.nfev == 2 + 12 * (part.nsteps + part.nrejected)


def test_stability_cap_and_stiffness_test():
    """y' = -diag(1000, 1) y past the fast mode's decay: the accuracy controller keeps
    growing the step past RK45's stability interval (3.3 / 1000) and has it rejected;
    the cap ``cap_safety * boundary / rho`` from Hairer's estimate holds it inside, and
    the stiffness test ends the run once the cap has set the step 15 times in a row."""
    rhs, lam = _linear([1000.0, 1.0])
    te = np.array([0.0, 5.0])
    opts = StepperOptions(rtol=1e-6, atol=1e-9, max_steps=100000)

    def run(**kw):
        out = {}
        r = integrate(rhs, np.array([1.0, 1.0]), te, STEPPERS["RK45"], opts,
                      lambda k, y: out.__setitem__(k, y.copy()), control=StepControl(**kw))
        return r, out
    free, yf = run()
    capped, yc = run(cap_safety=mbase.STABILITY_SAFETY)
    assert free.status.success and capped.status.success
    assert free.nrejected >= 0.1 * free.nsteps          # measured: 245 of 1,554
    # (measured: 89 rejections; once the fast mode has decayed to 1e-6 of the slow one
    # the estimate sees nothing, the remembered one decays, and a step past the limit
    # re-excites the mode until it is seen again)
    assert capped.nrejected <= free.nrejected / 2 and capped.ncapped > 0
    assert capped.nsteps + capped.nrejected < free.nsteps + free.nrejected
    # the estimate is a lower bound on the spectral radius 1000 (the fast mode dominates
    # the stage differences) and the held step sits at the cap
    assert 0.5 * 1000 <= capped.rho <= 1000 * (1 + 1e-6)
    assert capped.h_next == pytest.approx(mbase.STABILITY_SAFETY * 3.3 / capped.rho, rel=0.2)
    exact = np.exp(-lam * te[-1])
    for y in (yf[1], yc[1]):
        assert np.max(np.abs(y - exact)) <= 50 * (1e-9 + 1e-6 * exact.max())
    stiff, ys = run(cap_safety=mbase.STABILITY_SAFETY, stiff_steps=15)
    assert stiff.status.success and stiff.stiff and stiff.n_done == 1 and 1 not in ys
    assert 0.0 < stiff.t_last < te[-1]       # measured: t = 1.25
    assert stiff.ncapped >= 15


def test_predictive_controller_on_a_blow_up():
    """y' = y^2 towards its pole: the error grows from step to step, the standard
    controller has about every second attempt rejected, the predictive one almost none."""
    te = np.array([0.0, 1.0 - 1e-3])
    opts = StepperOptions(rtol=1e-6, atol=1e-12)
    rs = [integrate(lambda t, y: y * y, np.array([1.0]), te, STEPPERS["RK45"], opts,
                    lambda k, y: None, control=StepControl(predictive=p)) for p in (False, True)]
    std, pred = rs
    assert std.status.success and pred.status.success
    assert std.nrejected >= 0.4 * std.nsteps and pred.nrejected <= max(2, 0.1 * pred.nsteps)
    assert pred.nfev <= 0.6 * std.nfev
