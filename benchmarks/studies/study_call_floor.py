"""The least a ``gradient_flow`` call of bench_flow's small problem could cost, against diffrax.

``bench_flow.py --problems small`` asks the default call (``auto`` at its winning rtol, 3e-5)
to run 1.5x faster than diffrax's fastest row (Tsit5, PI 0.3/0.3 at rtol 1e-3: a jit-compiled
solve on the sufficient statistics, nothing else inside its time).  A call is its loop (the
steps) and a fixed cost (checks, set-up, the first step, the outputs, the result).  This
script measures, in one process with default threads, the parts of that sum that any design
of the call must pay, to say whether a leaner call (one compiled whole-call path, say)
could reach 1.5x:

* ``diffrax``: each diffrax row of bench_flow at the rtol given (``--diffrax-rtol``, 1e-3, where
  bench_flow's scan stops for Tsit5 PI), best of ``--repeats``;
* ``call``: ``gradient_flow`` as bench_flow's default row calls it, and the same call to
  ``1e-9 t_end`` (one step, ``nfev1`` evaluations); ``loop`` = their difference over the
  further evaluations, times the call's evaluations: what the steps alone cost, the least
  a call of today's loop can take;
* the fixed cost split into ``prepare_flow`` (validation, statistics, set-up), the
  prepared flow's ``run`` of one step and the rest (since the quick run, negative:
  ``gradient_flow`` keeps its prepared flow and refills it, where ``prepare_flow`` forms
  one; before it ``gradient_flow``'s checks, and the two
  run back to back rather than each in a loop of its own), and of the
  run, today's set-up of its per-run objects (the model's net on the prepared statistics,
  its compiled ops, their settings and the first evaluation), what a leaner call that kept
  them would still pay;
* the least each part of the fixed cost can be, timed alone as bare numpy or one compiled
  call, none of it the package's code path:

  - ``checks``: each array as contiguous float64, its shape and ``isfinite().all()`` (the
    weights, X, Y, t_eval);
  - ``statistics``: ``Sxx = X^T X / P``, ``Syx = Y^T X / P``;
  - ``dispatch``: one call of the compiled loop (``ops.advance`` of the factored RK45 stages)
    that returns at once (its budget of steps spent), the price of entering compiled code
    with the loop's arguments;
  - ``outputs``: the end-to-end map and the loss at the two output times;
  - ``result``: building the ``Trajectory`` of a run from its arrays.

``floor`` = loop + those parts; the ratio diffrax / floor is the most any design of the call
on today's loop reaches, and ``budget`` = diffrax / 1.5 - loop what a 1.5x call may spend
beside its steps.  ``--busy``: the same with one core kept busy by another process.

What it shows on this machine (a quiet window, four idle and three busy runs): diffrax Tsit5 PI
1.15-1.31 ms idle, 1.12 ms busy; the call 1.30-1.35 ms (fixed cost 0.61-0.64 ms), its loop
0.72-0.75 ms (3.83-3.99 us per evaluation); the least parts 56 us (checks 11, statistics 9,
dispatch 5, outputs 16, result 15 us).  The loop alone is 1.58-1.74x diffrax idle and
1.49-1.55x busy, the floor 1.47-1.62x and 1.39-1.44x; busy, a 1.5x call may spend -3 to 24 us
beside its steps, less than the checks, statistics and dispatch alone (docs/benchmarks.md).
With ``--method Tsit5 --rtol 1e-4`` (158 evaluations), three idle and three busy runs: the
loop alone 1.82-1.88x idle and 1.72-1.78x busy, the floor 1.68-1.72x and 1.58-1.63x; a 1.5x
call may spend 138-157 us idle and 94-117 us busy beside its steps.  With the quick run
(docs/simulator.md), two idle and two busy runs each: the default call 1.26x idle and
1.15-1.18x busy (fixed cost 0.26 ms), Tsit5 1.39-1.40x and 1.34-1.35x.

Usage::

    python benchmarks/studies/study_call_floor.py [--repeats 200] [--busy] [--diffrax-rtol 1e-3]
        [--method Tsit5 --rtol 1e-4]

``--method Tsit5 --rtol 1e-4`` measures the same for a call whose pair were Tsit5 (the
pair of diffrax's row, 158 evaluations at bench_flow's target against RK45's 188).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import linearnets as ln  # noqa: E402
from linearnets.sim.methods import _loop_state as S  # noqa: E402
from linearnets.sim.methods.base import loop_state  # noqa: E402
from linearnets.sim.methods.tableaux import RK45  # noqa: E402

import bench_flow as bf  # noqa: E402
from problems import best_of as best, busy_core, diffrax_available  # noqa: E402

#: bench_flow's winning tolerance of the default call on the small problem.
RTOL = 3e-5


def parts(ws, X, Y, t_end, repeats):
    """The least of each part of a call's fixed cost (module docstring), in seconds."""
    t_eval = np.array([0.0, t_end])

    def check(a, shape=None):
        a = np.ascontiguousarray(a, dtype=np.float64)
        if (shape is not None and a.shape != shape) or not np.isfinite(a).all():
            raise ValueError("bad input")
        return a

    def checks():
        for w in ws:
            check(w, w.shape)
        check(X, X.shape), check(Y, Y.shape), check(t_eval, (2,))

    P = X.shape[0]
    Sxx, Syx = X.T @ X / P, Y.T @ X / P

    def statistics():
        return X.T @ X / P, Y.T @ X / P

    def outputs():
        for _ in range(2):
            W = ws[2] @ ws[1] @ ws[0]
            0.5 * np.sum((W @ Sxx) * W) - np.sum(Syx * W)

    # the compiled loop's entry with its real arguments, returning before its first step
    opts = dict(rtol=RTOL, atol=RTOL * bf.ATOL_RATIO, method="RK45", backend="numba")
    flow = ln.prepare_flow(X, Y, [w.shape for w in ws], t_eval, **opts)
    net = flow._net(list(ws), None)
    _, ops = net.compiled_ops("erk", RK45)
    ops.prepare(RK45, None, flow.solver, predictive=True, cap_safety=None)
    y = np.array(net.y0, dtype=np.float64)
    ops.first(y)
    y_new = np.empty_like(y)
    th, stats = loop_state(0.0, 1e-3, 1)
    th[S.T_TARGET] = t_end

    def dispatch():
        stats[S.BUDGET] = 0
        ops.advance(y, y_new, th, stats)

    traj = ln.gradient_flow(ws, X, Y, t_eval, **opts)

    def result():
        dataclasses.replace(traj)

    def setup():
        # today's per-run objects, as PreparedFlow.run builds them before its first step: the
        # model's net on the prepared statistics, its compiled ops, their settings, f(y0)
        n = flow._net(list(ws), None)
        o = n.compiled_ops("erk", RK45)[1]
        o.prepare(RK45, None, flow.solver, predictive=True, cap_safety=None)
        o.first(np.array(n.y0, dtype=np.float64))
    least = {name: best(f, repeats, warm=True) for name, f in (
        ("checks", checks), ("statistics", statistics), ("dispatch", dispatch),
        ("outputs", outputs), ("result", result))}
    return least, best(setup, repeats, warm=True)


def measure(repeats, diffrax_rtol, method=None, rtol=RTOL):
    ws, X, Y, _ = bf.make("small")
    t_end = bf.reference(ws, X, Y, 4000.0, "numba")[0]
    rows = {}
    if diffrax_available():
        problem = bf.lin.make_problem(tuple(w.shape for w in ws), X, Y)
        for label, run in bf.diffrax_runs(problem, ws, t_end):
            rows[label] = best(lambda: run(diffrax_rtol), repeats, warm=True)
    kw = dict(rtol=rtol, atol=rtol * bf.ATOL_RATIO)      # default method, backend, threads
    if method:
        kw["method"] = method
    nfev = ln.gradient_flow(ws, X, Y, [0.0, t_end], **kw).nfev
    nfev1 = ln.gradient_flow(ws, X, Y, [0.0, 1e-9 * t_end], **kw).nfev
    call = best(lambda: ln.gradient_flow(ws, X, Y, [0.0, t_end], **kw), repeats, warm=True)
    fixed = best(lambda: ln.gradient_flow(ws, X, Y, [0.0, 1e-9 * t_end], **kw), repeats,
                 warm=True)
    loop = (call - fixed) / (nfev - nfev1) * nfev
    # the one-step call's fixed cost split: prepare_flow, then PreparedFlow.run
    one = [0.0, 1e-9 * t_end]
    shapes = [w.shape for w in ws]
    flow = ln.prepare_flow(X, Y, shapes, one, **kw)
    split = {"prepare_flow": best(lambda: ln.prepare_flow(X, Y, shapes, one, **kw), repeats,
                                  warm=True),
             "PreparedFlow.run": best(lambda: flow.run(ws), repeats, warm=True)}
    # the rest: gradient_flow's checks (check_weights and check_data: 25 us alone) and the
    # two parts run back to back rather than each in a loop of its own
    split["the rest"] = fixed - split["prepare_flow"] - split["PreparedFlow.run"]
    least, setup = parts(ws, X, Y, t_end, repeats)
    split["of the run: today's set-up of the net and its compiled ops"] = setup
    return rows, call, fixed, loop, nfev, least, split


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--busy", action="store_true", help="one core busy with another process")
    ap.add_argument("--diffrax-rtol", type=float, default=1e-3)
    ap.add_argument("--method", default=None,
                    help="this method instead of the default (Tsit5: the pair that would "
                         "shorten the loop)")
    ap.add_argument("--rtol", type=float, default=RTOL,
                    help="the call's rtol (bench_flow's scan: 3e-5 for the default, 1e-4 "
                         "for Tsit5)")
    a = ap.parse_args()
    with busy_core(a.busy):
        rows, call, fixed, loop, nfev, least, split = measure(a.repeats, a.diffrax_rtol,
                                                              a.method, a.rtol)
    print(f"one core busy: {'yes' if a.busy else 'no'}; load average "
          f"{os.getloadavg()[0]:.2f}; best of {a.repeats}")
    for label, dt in rows.items():
        print(f"  {label:28s} rtol {a.diffrax_rtol:.0e}  {dt * 1e3:7.3f} ms")
    print(f"  gradient_flow ({a.method or 'default'})      rtol {a.rtol:.0e}  {call * 1e3:7.3f} ms, "
          f"{nfev} evaluations;"
          f" fixed cost {fixed * 1e3:.3f} ms; loop {loop * 1e3:.3f} ms "
          f"({loop / nfev * 1e6:.2f} us per evaluation)")
    print("    the fixed cost: " + ", ".join(f"{name} {dt * 1e6:.0f} us"
                                             for name, dt in split.items()))
    for name, dt in least.items():
        print(f"    least {name:12s} {dt * 1e6:8.1f} us")
    floor = loop + sum(least.values())
    print(f"  floor (loop + least parts) {floor * 1e3:.3f} ms")
    if rows:
        label, d = min(rows.items(), key=lambda kv: kv[1])
        print(f"  against {label}: today's call {d / call:.2f}x, the loop alone {d / loop:.2f}x,"
              f" the floor {d / floor:.2f}x; a 1.5x call may spend "
              f"{(d / 1.5 - loop) * 1e6:.0f} us beside its steps, the least parts take "
              f"{sum(least.values()) * 1e6:.0f} us")


if __name__ == "__main__":
    main()
