"""A method on a model: the numpy/CuPy loop or the compiled loop of the backend, and ``"auto"``.

Every method is a name in :data:`METHODS` with its family (``"erk"``, ``"ssp"``, ``"rosw"``,
``"auto"``) and tableau; :func:`run` runs one on a model, over the model's stage stores
(``Model.stores``) or compiled operations (``Model.compiled_ops``); docs/simulator.md, "Methods".

Adding a method
---------------
1. Its coefficients in ``tableaux.py`` (a :class:`~.tableaux.Tableau` in ``TABLEAUX`` is an
   explicit pair: nothing else to write; its stability boundary and continuous extension
   are checked by ``tests/sim/test_methods.py``).
2. A new family only: a :class:`~.base.Stepper` subclass (``attempt``, optionally
   ``stiffness``/``interpolate``) for the numpy loop ``base.integrate``, its name in
   :data:`METHODS`, and where it runs compiled a loop built like ``_erk_kernels``'s (its
   return codes and state layout in ``_loop_state``) with a runner in ``compiled``.
3. ``flow.gradient_flow``'s docstring and docs/methods.md name it; a golden trajectory in
   ``tests/sim/golden`` pins it.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import NamedTuple

import numpy as np

from . import base as _base
from .base import StepControl, integrate
from .erk import ExplicitRK
from .rosw import ROS34PW2 as ROS34PW2_STEPPER
from .ssp import LowStorageRK
from .tableaux import ROS34PW2, SSPRK104, TABLEAUX

__all__ = ["METHODS", "FALLBACK", "ROSENBROCK_FALLBACK", "ROSENBROCK_JVP", "AUTO_PAIR_RTOL",
           "auto_pair", "first_stretch", "PAIR_HELD", "STIFF_STEPS", "ROSENBROCK_HELD",
           "ROSENBROCK_STEPS", "SWITCH_BACKOFF", "HANDBACK_STEPS", "run", "auto", "stepper_for"]

#: Method name -> (family, tableau).
METHODS = {name: ("ssp" if name == "SSPRK104" else "erk", tab) for name, tab in TABLEAUX.items()}
METHODS["ROS34PW2"] = ("rosw", ROS34PW2)
METHODS["auto"] = ("auto", None)

#: The low-order pair used at kinks by the explicit methods.
FALLBACK = "BS32"

#: The stepper used at kinks by a Rosenbrock-W primary ("same": the primary itself at
#: ``kink_rtol``; None: no switch; or a method name; docs/benchmarks_mlp.md).
ROSENBROCK_FALLBACK = "BS32"

#: The Jacobian-vector product of a Rosenbrock primary where the model has no
#: ``linearize``: ``"finite_differences"`` (one gradient a product) or ``"model"`` (the
#: model's exact ``jvp``; docs/benchmarks_mlp.md).
ROSENBROCK_JVP = "finite_differences"

#: The rule of ``"auto"`` (:func:`auto`; the measurements behind each constant:
#: docs/simulator.md, "The auto rule").
AUTO_PAIR_RTOL = 1e-6
PAIR_HELD = 2.0
STIFF_STEPS = 15
ROSENBROCK_HELD = 8.0
ROSENBROCK_STEPS = 15
SWITCH_BACKOFF = 4
HANDBACK_STEPS = 15


def _explicit(tab, net, kind="erk"):
    # SSPRK104's two registers only on a model's slot store, else the pair on its tableau
    kind, store = net.stores(kind, tab)
    fun = net.rhs if net.smooth else None
    if kind == "ssp" and store is not None:
        return partial(LowStorageRK, fun=fun, store=store)
    return partial(ExplicitRK, fun=fun, tableau=tab, store=store)


def stepper_for(method, net):
    """``(primary, fallback)`` stepper factories of ``method`` on model ``net`` for
    ``base.integrate`` (the fallback only for a model with kinks)."""
    kind, tab = METHODS[method]
    if kind == "rosw":
        lin = net.linearize
        cls = ROS34PW2_STEPPER.bind(
            jvp=net.jvp if ROSENBROCK_JVP == "model" else None,
            linearize=lin, metric=net.metric, EVALUATE_REJECTED=not net.smooth,
            JVP_COST=net.jvp_cost if lin is not None else 1.0)
        primary = partial(cls, fun=net.rhs if net.smooth else None)
        low = (primary if ROSENBROCK_FALLBACK == "same" else None if ROSENBROCK_FALLBACK is None
               else _explicit(TABLEAUX[ROSENBROCK_FALLBACK], net))
    else:
        primary, low = _explicit(tab, net, kind), _explicit(TABLEAUX[FALLBACK], net)
    return primary, (None if net.smooth else low)


class RunSettings(NamedTuple):
    """What the stretches of one run share: the backend, its array namespace, dense output
    and the stop rule (``stop.rule``: its spec, for a model that compiles it)."""

    backend: str = "numpy"
    xp: object = np
    dense: bool = False
    stop: object = None


_NO_TESTS, _NUMPY_RUN = StepControl(), RunSettings()


def _phase(method, net, y, t0, k0, t_eval, opts, observe, run, tests=_NO_TESTS, start=False):
    """One stretch of ``method`` from ``(t0, y)``, outputs ``k >= k0``: the loop of the backend
    (``start``: a run of its own, else the continuation of one with ``opts.first_step``);
    ``tests`` the stiffness test (``stiff_steps``, ``stiff_held``) or the switch-back test
    (``switch_back``) that may end it."""
    kind, tab = METHODS[method]
    switch_back, smooth, stop = tests.switch_back, net.smooth, run.stop
    # the compiled loop where the model's ops have the kinks and the stop rule (``stop.rule``)
    rule, ops = None if stop is None else stop.rule, None
    if run.backend == "numba" and (stop is None and smooth or net.compiled_events
                                   and (stop is None or rule is not None)):
        kind, ops = net.compiled_ops(kind, tab, stop=rule)
    control = _control(tests, kind, smooth, run.dense)
    if ops is None:
        primary, low = stepper_for(method, net)
        return integrate(lambda t, v: net.rhs(v), y, t_eval, primary, opts, observe,
                         control=replace(control, fallback=low),
                         switches=None if smooth else net.switches, stop=stop, t0=t0,
                         xp=run.xp, k0=k0)
    from . import compiled
    if kind == "rosw":
        return compiled.rosw(ops, y, t_eval, ROS34PW2, opts, observe, t0=t0, k0=k0,
                             start=start, switch_back=switch_back,
                             switch_steps=control.switch_steps)
    # one runner for the explicit and low-storage loops
    control = replace(control, fallback=None if smooth else TABLEAUX[FALLBACK])
    return compiled.erk(ops, y, t_eval, tab, opts, observe, control, t0=t0, k0=k0)


def _control(tests, kind, smooth, dense):
    # a stretch's StepControl: its tests, the predictive controller and the stability cap
    # on a smooth model (not on the Rosenbrock loop), the hand-back's steps after a switch
    return replace(tests, predictive=smooth, dense=dense,
                   cap_safety=_base.STABILITY_SAFETY if kind != "rosw" and smooth else 0.0,
                   switch_steps=HANDBACK_STEPS if tests.switch_back is not None else 0)


def _tests(method, tries=0):
    # the test that ends a stretch of ``method`` inside "auto" (after ``tries`` hand-backs)
    if method == "ROS34PW2":
        return StepControl(switch_back=SSPRK104)
    if method == "SSPRK104":
        return StepControl(stiff_steps=ROSENBROCK_STEPS * SWITCH_BACKOFF ** tries,
                           stiff_held=ROSENBROCK_HELD)
    return StepControl(stiff_steps=STIFF_STEPS, stiff_held=PAIR_HELD)


def first_stretch(method, rtol):
    """``(pair, control)``: the Tableau and StepControl of the first stretch of ``method`` (an
    explicit pair, or ``"auto"``: its pair with the stiffness test) on a smooth model, as
    :func:`_phase` runs it; for :func:`auto`'s ``first``."""
    pair = auto_pair(rtol) if method == "auto" else method
    tests = _tests(pair) if method == "auto" else _NO_TESTS
    return TABLEAUX[pair], _control(tests, METHODS[pair][0], True, False)


def run(method, net, y0, t_eval, opts, observe, *, backend="numpy", xp=np, dense=False,
        stop=None, t0=0.0):
    """Integrate model ``net`` from ``y0`` at ``t0`` onto ``t_eval`` with ``method``: a
    :class:`~.base.Result` (``opts``: :class:`~.base.StepperOptions`, or a named tuple with
    its fields such as :class:`~linearnets.sim.flow.SolverOptions`)."""
    settings = RunSettings(backend, xp, dense, stop)
    if method == "auto":
        return auto(net, y0, t_eval, opts, observe, settings, t0=t0)
    return _phase(method, net, y0, t0, 0, t_eval, opts, observe, settings, start=True)


def auto_pair(rtol, smooth=True):
    """The explicit pair that ``"auto"`` starts with at ``rtol`` (:data:`AUTO_PAIR_RTOL`):
    DOP853 below it, else RK45, or SSPRK104 on a model with kinks (not ``smooth``), whose
    error estimate sees a kink inside a step where RK45's does not (docs/simulator.md)."""
    if rtol < AUTO_PAIR_RTOL:
        return "DOP853"
    return "RK45" if smooth else "SSPRK104"


def auto(net, y0, t_eval, opts, observe, run=_NUMPY_RUN, t0=0.0, first=None):
    """``"auto"``: the explicit pair (:func:`auto_pair`) until the stability cap has held its
    step below ``1 / PAIR_HELD`` of its accuracy step for ``STIFF_STEPS`` steps in a row,
    then SSPRK104 until its cap has held it below ``1 / ROSENBROCK_HELD`` for
    ``ROSENBROCK_STEPS SWITCH_BACKOFF^tries`` steps, then ROS34PW2
    until SSPRK104 would be cheaper per unit time for ``HANDBACK_STEPS`` steps, and back;
    the Result sums the stretches (docs/simulator.md, "The auto rule").  ``first``: the
    Result of the pair's stretch, run already (with the test above) from ``y0`` at ``t0``
    (the quick run's, ``sim.flow``); the rule goes on from where it ended."""
    T = t_eval.size
    pair = auto_pair(opts.rtol, net.smooth)
    y, t, k, h = y0, float(t0), 0, opts.first_step
    nfev = nsteps = nrej = ncapped = switches = tries = 0
    method, path, stiff_at = pair, [pair], None
    while True:
        o = opts._replace(max_steps=opts.max_steps - nsteps - nrej, first_step=h)
        res, first = (_phase(method, net, y, t, k, t_eval, o, observe, run,
                             _tests(method, tries))
                      if first is None else first), None
        nfev, nsteps, nrej = nfev + res.nfev, nsteps + res.nsteps, nrej + res.nrejected
        ncapped += res.ncapped
        y, t, k, h = res.y_last, res.t_last, res.n_done, res.h_next
        if not (res.stiff or res.nonstiff) or not res.status.success or k >= T:
            break
        stiff_at = t if stiff_at is None else stiff_at
        tries, switches = tries + res.nonstiff, switches + 1
        method = "ROS34PW2" if method == "SSPRK104" else "SSPRK104"
        if method not in path:
            path.append(method)
    msg = res.message
    if stiff_at is not None:
        msg += (f" (stiff from t={stiff_at:.6g}: switched {' -> '.join(path)}; "
                f"{switches} switch(es) in all)")
    return replace(res, nfev=nfev, nsteps=nsteps, nrejected=nrej, ncapped=ncapped,
                    message=msg, stiff=False, nonstiff=False)
