"""The default tolerance at kinks: ``KINK_RTOL`` for the fallback's first ``KINK_EARLY_STEPS``
accepted steps, ``KINK_RTOL_LATE`` after them (docs/methods.md, "What kink_rtol trades")."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.sim import flow
from linearnets.sim.methods import _loop_state as S
from linearnets.sim.methods import base
from linearnets.sim.methods.erk import ExplicitRK
from linearnets.sim.methods.tableaux import TABLEAUX


def _rich_relu(alpha_sqrt_h=0.05, h=32):
    """A centred 5-h-1 ReLU net in the NTK parameterisation at small alpha sqrt(h): its flow
    to 1 % of the loss takes ~1,700 steps of the fallback at kink_rtol 1e-3 and ~5,500 at
    3e-4 (measured)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 5))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1]
    p = ln.init_parameterised((5, h, 1), "ntk", 1.0, seed=1)
    kw = p.flow_kwargs(activation="relu", alpha=alpha_sqrt_h / np.sqrt(h), centered=True)
    return p.weights, X, y, dict(kw, stop=("relative_loss", 0.01), max_steps=10 ** 6)


def test_kink_tolerances_default_and_given():
    opts = flow.check_solver(flow.SolverOptions(rtol=1e-8))
    assert base.kink_tolerances(opts) == (flow.KINK_RTOL, flow.KINK_RTOL_LATE)
    opts = flow.check_solver(flow.SolverOptions(rtol=1e-8, kink_rtol=1e-2))
    assert base.kink_tolerances(opts) == (1e-2, 1e-2)         # given: held throughout
    opts = flow.check_solver(flow.SolverOptions(rtol=3e-3))
    assert base.kink_tolerances(opts) == (3e-3, 3e-3)         # never below rtol
    assert base.kink_tolerances(base.StepperOptions(rtol=1e-8, kink_rtol=1e-5)) == (1e-5, 1e-5)


def test_controller_turns_to_the_late_tolerance():
    """The numpy loop's fallback keeps its rtol for KINK_EARLY_STEPS accepted steps."""
    tab = TABLEAUX["BS32"]
    main = ExplicitRK(lambda t, y: -y, 1, 1e-8, 1e-12, tableau=TABLEAUX["DOP853"])
    low = ExplicitRK(lambda t, y: -y, 1, 3e-4, 1e-12, tableau=tab)
    ctl = base.Controller(base.StepControl(fallback=ExplicitRK), main, low, late=1e-3)
    ctl.active = low
    for i in range(base.KINK_EARLY_STEPS):
        assert low.rtol == 3e-4, i
        ctl.active = low
        ctl.accept(1e-3, 1e-3, 0.5, False, crossed=1, t_new=1e-3 * (i + 1),
                   y_new=np.ones(1))
    assert ctl.stats[S.FALLBACK_STEPS] == base.KINK_EARLY_STEPS and low.rtol == 1e-3


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_a_rich_run_turns_to_the_late_tolerance(backend):
    """Past KINK_EARLY_STEPS steps at kinks the default costs about kink_rtol 1e-3's
    evaluations (measured: 8.3-8.4k against 7.7k), not 3e-4's (24k)."""
    ws, X, y, kw = _rich_relu()
    tr = ln.gradient_flow(ws, X, y, [1e7], backend=backend, **kw)
    tight = ln.gradient_flow(ws, X, y, [1e7], backend="numba", kink_rtol=flow.KINK_RTOL, **kw)
    assert tr.success and tight.success, (tr.message, tight.message)
    assert tr.fallback_steps > base.KINK_EARLY_STEPS
    assert tr.nfev < 0.6 * tight.nfev, (tr.nfev, tight.nfev)
    # both stop where the tight reference does, to the late tolerance's accuracy
    assert abs(tr.t_stop - tight.t_stop) <= 10 * flow.KINK_RTOL_LATE * tight.t_stop


def test_a_lazy_run_keeps_the_early_tolerance():
    """Under KINK_EARLY_STEPS steps at kinks the default is kink_rtol = KINK_RTOL (the
    same loop, the same arithmetic)."""
    ws, X, y, kw = _rich_relu(alpha_sqrt_h=100.0)
    tr = ln.gradient_flow(ws, X, y, [1e7], backend="numba", **kw)
    fixed = ln.gradient_flow(ws, X, y, [1e7], backend="numba", kink_rtol=flow.KINK_RTOL, **kw)
    assert tr.success and 0 < tr.fallback_steps < base.KINK_EARLY_STEPS, tr.fallback_steps
    assert tr.nfev == fixed.nfev
    for a, b in zip(tr.weights, fixed.weights):
        np.testing.assert_array_equal(a, b)
