"""Shared helpers of the simulator's tests: the linear model on a given problem, a method
run on it through ``methods.run`` (the loop of a backend), and a numpy stand-in for CuPy."""
import types
from dataclasses import replace

import numpy as np

from linearnets.sim.models import linear as _rhs
from linearnets.sim.methods import StepControl, StepperOptions
from linearnets.sim.methods import driver
from linearnets.sim.models import parse_options
from linearnets.sim.models.linear import LinearNet, LinearNetNumba


def linear_net(problem, y0=None, backend="numpy", xp=np):
    """The linear model whose run integrates exactly ``problem`` (its Sxx, Syx, eta_l)."""
    cls = LinearNetNumba if backend == "numba" else LinearNet
    y0 = np.zeros(problem.size) if y0 is None else y0
    ws = [np.array(w) for w in _rhs.unpack(np.asarray(y0, dtype=np.float64), problem.shapes)]
    opts = parse_options(len(problem.shapes), lr_scales=problem.eta_l)
    return cls(ws, None, opts, xp=xp).prepare(problem.X, problem.Y, shared=problem)


def options(rtol=1e-8, atol=1e-12, max_steps=1_000_000, first_step=None):
    return StepperOptions(rtol=rtol, atol=atol, max_steps=max_steps, first_step=first_step)


def solve(method, backend, problem, y0, t_eval, opts, observe, dense=False, xp=np, t0=0.0):
    """``method`` on the linear ``problem`` from ``y0`` at ``t0`` (a ``methods`` Result)."""
    net = linear_net(problem, y0, backend, xp)
    return driver.run(method, net, xp.asarray(y0), np.asarray(t_eval, dtype=np.float64), opts,
                      observe, backend=backend, xp=xp, dense=dense, t0=t0)


def phase(method, backend, problem, y, t0, k0, t_eval, opts, observe=lambda k, v: None,
          **kw):
    """One stretch of ``method`` from ``(t0, y)`` (``driver._phase``): ``stiff_steps``,
    ``switch_back`` as there."""
    net = linear_net(problem, y, backend)
    run = driver.RunSettings(backend, np, kw.pop("dense", False), None)
    return driver._phase(method, net, np.array(y), t0, k0, np.asarray(t_eval, dtype=float),
                         opts, observe, run, StepControl(**kw))


def numpy_standin():
    """A module with numpy's API and CuPy's ``asnumpy``, standing in for CuPy."""
    shim = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("_")})
    shim.asnumpy = lambda a: np.array(a, dtype=np.float64, copy=True)
    return shim


def fake_cupy(monkeypatch):
    """Make ``backend="cupy"`` run with :func:`numpy_standin` (no GPU needed)."""
    from linearnets import backend as B
    shim = numpy_standin()
    monkeypatch.setattr(B, "get_cupy", lambda: shim)
    return shim


def erk(problem, y0, t_eval, tab, opts, observe, stages="dense", backend="numpy", dense=False,
        t0=0.0, stiff_steps=0):
    """Tableau ``tab`` on the linear ``problem`` with its stages as asked: ``"dense"`` (every
    stage a vector) or ``"factored"`` (rank-C layer factors), in the numpy loop or the
    compiled one (``backend="numba"``), with the controls ``gradient_flow`` uses."""
    from linearnets.sim.methods import base, compiled, integrate
    from linearnets.sim.methods.erk import ExplicitRK
    from linearnets.sim.models import linear as ls
    t_eval = np.asarray(t_eval, dtype=np.float64)
    if backend == "numba":
        from linearnets.sim.models import linear as lo
        control = replace(compiled.ERK_CONTROL, dense=dense, stiff_steps=stiff_steps)
        return compiled.erk(lo.erk_ops(problem, tab, factored=stages == "factored"), y0, t_eval,
                            tab, opts, observe, control, t0=t0)
    net = linear_net(problem, y0)
    store = (ls.FactoredStages(problem, ls.StageLayout(problem, tab.n_stages + 1))
             if stages == "factored" else None)

    def make(rhs, n, rtol, atol, xp):
        return ExplicitRK(rhs, n, rtol, atol, xp, fun=net.rhs, tableau=tab, store=store)
    return integrate(None, np.asarray(y0, dtype=np.float64), t_eval, make, opts, observe,
                     t0=t0, control=base.StepControl(
                         predictive=True, cap_safety=base.STABILITY_SAFETY, dense=dense,
                         stiff_steps=stiff_steps))


def ssp(problem, y0, t_eval, opts, observe, backend="numpy", store=None, dense=False):
    """SSPRK104 in two-register form on the linear ``problem``: the numpy loop with the
    slot store ``store`` (the model's factored slots by default), or the compiled loop
    (``backend="numba"``)."""
    from linearnets.sim.methods import base, compiled, integrate
    from linearnets.sim.methods.ssp import LowStorageRK
    from linearnets.sim.methods.tableaux import SSPRK104
    from linearnets.sim.models import linear as ls
    t_eval = np.asarray(t_eval, dtype=np.float64)
    if backend == "numba":
        from linearnets.sim.models import linear as lo
        return compiled.erk(lo.LowStorageStages(problem), y0, t_eval, SSPRK104, opts, observe,
                            replace(compiled.ERK_CONTROL, dense=dense), t0=0.0)
    net = linear_net(problem, y0)
    store = ls.FactoredSlots(problem) if store is None else store

    def make(rhs, n, rtol, atol, xp):
        return LowStorageRK(rhs, n, rtol, atol, xp, fun=net.rhs, store=store)
    make.tableau = SSPRK104
    return integrate(None, np.asarray(y0, dtype=np.float64), t_eval, make, opts, observe,
                     control=base.StepControl(predictive=True, cap_safety=base.STABILITY_SAFETY,
                                              dense=dense))


class Interrupt:
    """A progress hook that raises KeyboardInterrupt at its ``at``-th call."""

    def __init__(self, at):
        self.at, self.calls = at, 0

    def __call__(self, t):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
