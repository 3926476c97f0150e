"""Where an evaluation of the small linear problem goes, and what the kernels' own loops save.

``bench_flow.py``'s small problem (20-32-32-1, P = 200, whitened scalar teacher) runs by
default as RK45 on factored Butcher stages (``_linear_kernels.factored_advance``).  Its
call costs a fixed part (validation, set-up, the first step, the outputs) and a few
microseconds per evaluation in the compiled loop; on a network this narrow an evaluation
is some twenty products of a few hundred to a thousand multiply-adds each, and the cost
of a BLAS call, not its arithmetic, sets the time.  This script times, in compiled loops
(no Python between calls), what one evaluation is made of:

* ``stage k``: ``_linear_kernels.stage`` with ``k`` earlier slots (1..6: RK45's six);
* ``step end``: ``step_end`` (``y_new`` and the error sums from the gathered factors);
* ``stiffness``: ``stage_stiffness_sums`` (once per accepted step);
* ``attempt``: ``_store_attempt``, a whole step (its six stages, the step end, the norm),
  per evaluation (divided by six);
* ``rhs_flat``: the dense gradient, what the dense-stage loop (``erk_advance``) evaluates;

and the whole runs at bench_flow's accuracy (rtol 3e-5, atol 3e-8; its ``t_end``):
``compiled.erk`` on factored and on dense stages (time per evaluation, the loop's
start included), and ``gradient_flow`` with the default method and threads, split as
bench_flow splits it (a one-step call's time is the fixed cost; the rest per further
evaluation).

With ``--base REV`` each round runs twice, in two processes: once on this tree and once
on ``REV`` (exported with ``git archive`` to a cache directory), alternating, and the
table gives the best of the rounds of each and their ratio (base / this tree): a same-run
A/B of the kernels, since a kernel's compiled constants (``SMALL_PRODUCT_MAX``) cannot
change inside one process.

What it shows on this machine (``--base`` the revision before the kernels' small-width
loops, three rounds, docs/simulator.md, "Small widths"): the stage 1.8-2.5 against 2.9-3.3
us, the step end 4.2 against 5.7 us, a whole attempt 2.9 against 4.3 us per evaluation, the
compiled run 4.1 against 5.6 us per evaluation, ``gradient_flow`` 1.26 against 1.55 ms (3.7
against 5.2 us per evaluation beyond its fixed cost, 0.6 ms).  ``--crossover``: one-row
``x B`` in loops wins up to 1,024 multiply-adds, dot products up to 256.

Usage::

    python benchmarks/studies/study_small_linear.py [--base REV] [--rounds 3] [--problem medium]
    python benchmarks/studies/study_small_linear.py --crossover
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

#: bench_flow's small problem: its t_end (the loss at 7e-7 of its start), rtol and atol.
T_END, RTOL, ATOL = 1122.4, 3e-5, 3e-8
#: Calls per timed loop of a component, and timed loops (the best counts).
CALLS, LOOPS = 2_000, 40
#: Timed whole runs (the best counts).
RUNS = 60


def _best(f, n, loops=LOOPS, clock=time.thread_time):
    """Best time per call of ``f(n)`` (n calls) over ``loops`` loops, on this thread's CPU
    time, which a busy machine's other processes do not add to (the calls here run on one
    thread: BLAS runs products this small on the calling thread)."""
    best = np.inf
    for _ in range(loops):
        t0 = clock()
        f(n)
        best = min(best, (clock() - t0) / n)
    return best


def worker(name):
    """Time this tree's kernels on bench_flow's problem ``name``; one JSON line of
    microseconds (and counts).  The whole runs on the small problem only."""
    import linearnets as ln         # this tree's (PYTHONPATH), before bench_flow puts its own
    tree = os.environ.get("STUDY_TREE")
    if tree and not os.path.abspath(ln.__file__).startswith(os.path.abspath(tree)):
        raise RuntimeError(f"linearnets from {ln.__file__}, not from {tree}")
    sys.path.insert(0, os.path.join(HERE, ".."))            # bench_flow
    from numba import njit

    import bench_flow as bf
    from linearnets.sim.methods import compiled
    from linearnets.sim.methods.base import StepperOptions
    from linearnets.sim.methods.tableaux import RK45
    from linearnets.sim.models import _linear_kernels as lk, linear as lin

    ws, X, Y, _ = bf.make(name)
    problem = lin.make_problem(tuple(w.shape for w in ws), X, Y)
    y0 = lin.pack(ws)
    tab = RK45
    ops = lin.erk_ops(problem, tab, factored=True)
    Sxx, Syx, eta_l, white, ints, bufs, pbuf, block, wtmp = ops.data
    ops.first(y0)
    h = 10.0
    ws_ = [h * tab.A[i, :i].copy() for i in range(1, tab.n_stages)] + [h * tab.b.copy()]
    for i, w in enumerate(ws_, start=1):
        lk.stage(y0, w, i, i, Sxx, Syx, eta_l, white, ints, bufs)
    pair = compiled.tableau_args(tab, RTOL, ops.e3)
    y_new = np.empty_like(y0)

    # no cache: the harness must call this tree's kernels, not a cached copy of another's
    @njit
    def loop_stage(n, y, w, k, data):
        Sxx, Syx, eta_l, white, ints, bufs, pbuf, block, wtmp = data
        for _ in range(n):
            lk.stage(y, w, k, k, Sxx, Syx, eta_l, white, ints, bufs)

    @njit
    def loop_end(n, y, y_new, wb, we, data):
        Sxx, Syx, eta_l, white, ints, bufs, pbuf, block, wtmp = data
        acc = 0.0
        for _ in range(n):
            e5, e3 = lk.step_end(y, y_new, (wb, we, we, False, 1.0 / 10.0), RTOL, ATOL, block,
                                 Syx.shape[0], ints, bufs, pbuf)
            acc += e5
        return acc

    @njit
    def loop_stiff(n, s, wd, data):
        acc = 0.0
        for _ in range(n):
            acc += lk.stage_stiffness_sums(s, wd, data)[0]
        return acc

    @njit
    def loop_attempt(n, y, y_new, h, pair, data):
        acc = 0.0
        for _ in range(n):
            acc += lk._store_attempt(y, y_new, h, pair, ATOL, data)
        return acc

    @njit
    def loop_rhs(n, y, out, data):
        for _ in range(n):
            lk.rhs(y, out, data)

    out = {}
    s = tab.n_stages
    calls = max(20, CALLS * 1696 // y0.size)
    loops = LOOPS if name == "small" else 7
    for k in range(1, s + 1):
        w = ws_[k - 1]
        loop_stage(1, y0, w, k, ops.data)
        out[f"stage k={k}"] = _best(lambda n: loop_stage(n, y0, w, k, ops.data), calls, loops)
    wb, we = h * tab.b, h * tab.e
    loop_end(1, y0, y_new, wb, we, ops.data)
    out["step end"] = _best(lambda n: loop_end(n, y0, y_new, wb, we, ops.data), calls, loops)
    wd = compiled.stiffness_args(tab)[0]
    loop_stiff(1, s, wd, ops.data)
    out["stiffness"] = _best(lambda n: loop_stiff(n, s, wd, ops.data), calls, loops)
    loop_attempt(1, y0, y_new, h, pair, ops.data)
    out["attempt / 6"] = _best(lambda n: loop_attempt(n, y0, y_new, h, pair, ops.data),
                               max(3, calls // 6), loops) / s
    args = lin.numba_rhs_args(problem)
    f = np.empty_like(y0)
    loop_rhs(1, y0, f, args)
    out["rhs_flat"] = _best(lambda n: loop_rhs(n, y0, f, args), calls, loops)
    out = {k: v * 1e6 for k, v in out.items()}
    if name != "small":
        print(json.dumps(out))
        return

    # whole runs
    t_eval = np.array([0.0, T_END])
    opts = StepperOptions(rtol=RTOL, atol=ATOL, max_steps=100_000, first_step=None)
    for name, factored in (("factored", True), ("dense", False)):
        def run(_):
            o = lin.erk_ops(problem, tab, factored=factored)
            return compiled.erk(o, y0, t_eval, tab, opts, lambda k, y: None)
        res = run(0)
        best = _best(run, 1, RUNS)
        out[f"run {name}"] = best * 1e6 / res.nfev
        out[f"run {name} nfev"] = res.nfev
    kw = dict(rtol=RTOL, atol=ATOL)
    full = ln.gradient_flow(ws, X, Y, t_eval, **kw)
    short = ln.gradient_flow(ws, X, Y, [0.0, 1e-9 * T_END], **kw)
    t_full = _best(lambda _: ln.gradient_flow(ws, X, Y, t_eval, **kw), 1, RUNS)
    t_short = _best(lambda _: ln.gradient_flow(ws, X, Y, [0.0, 1e-9 * T_END], **kw), 1, RUNS)
    out["gradient_flow (ms)"] = t_full * 1e3
    out["gradient_flow nfev"] = full.nfev
    out["fixed cost (ms)"] = t_short * 1e3
    out["per evaluation"] = (t_full - t_short) * 1e6 / (full.nfev - short.nfev)
    print(json.dumps(out))


def crossover():
    """Time one-row products ``x B`` and ``x B^T`` (1 x k x n) in the loops of
    ``_linear_kernels.mul`` and ``mul_t`` (``row_times``, ``row_dots``, at every size) and through
    ``np.dot`` on views of flat buffers, as the kernels call it; print both and the ratio
    (BLAS / loops): where it falls below 1 is the crossover (``SMALL_PRODUCT_MAX``,
    ``SMALL_DOT_MAX``)."""
    sys.path.insert(0, ROOT)
    from numba import njit

    from linearnets.sim.models import _linear_kernels as lk

    @njit
    def loops_mul(calls, x, b, k, n, out):
        for _ in range(calls):
            lk.row_times(x, b, 0, k, n, out, 0)

    @njit
    def loops_dot(calls, x, b, k, n, out):
        for _ in range(calls):
            lk.row_dots(x, b, 0, k, n, out, 0)

    @njit
    def blas_mul(calls, x, b, k, n, out):
        for _ in range(calls):
            np.dot(x[:k].reshape((1, k)), b[:k * n].reshape((k, n)), out[:n].reshape((1, n)))

    @njit
    def blas_dot(calls, x, b, k, n, out):
        for _ in range(calls):
            np.dot(x[:k].reshape((1, k)), b[:k * n].reshape((n, k)).T, out[:n].reshape((1, n)))

    print(f"{'1 x k x n':>12s} {'madds':>7s} {'x B loops':>10s} {'BLAS':>7s} {'ratio':>7s} "
          f"{'x B^T loops':>12s} {'BLAS':>7s} {'ratio':>7s}   (us)")
    for k, n in ((7, 32), (32, 7), (16, 16), (20, 32), (32, 20), (32, 32), (48, 48), (64, 64),
                 (128, 128)):
        x, b, out = np.random.rand(k), np.random.rand(k * n), np.empty(n)
        calls = max(200, 200_000 // (k * n))
        row = []
        for loops, blas in ((loops_mul, blas_mul), (loops_dot, blas_dot)):
            loops(1, x, b, k, n, out)
            blas(1, x, b, k, n, out)
            tl = _best(lambda c: loops(c, x, b, k, n, out), calls)
            tb = _best(lambda c: blas(c, x, b, k, n, out), calls)
            row += [tl * 1e6, tb * 1e6, tb / tl]
        print(f"{'1 x %d x %d' % (k, n):>12s} {k * n:7d} {row[0]:10.3f} {row[1]:7.3f} "
              f"{row[2]:6.2f}x {row[3]:12.3f} {row[4]:7.3f} {row[5]:6.2f}x", flush=True)


def _tree(rev):
    """``rev`` exported to a cache directory (once): the path to put on PYTHONPATH."""
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    path = os.path.join(os.path.expanduser("~"), ".cache", "linearnets-study", sha[:12])
    if not os.path.isdir(path):
        os.makedirs(path)
        archive = subprocess.run(["git", "-C", ROOT, "archive", sha], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", path], input=archive, check=True)
    return path


def _round(tree, name):
    # compiled in the process (not on numpy beside a background compile) on a first run
    env = dict(os.environ, PYTHONPATH=tree, STUDY_TREE=tree, LINEARNETS_JIT="eager")
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--problem",
                          name], env=env,
                         capture_output=True, text=True, cwd=tree)
    if res.returncode:
        raise RuntimeError(res.stderr)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="a git revision to time beside this tree (same run)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--problem", default="small", choices=("small", "medium"),
                    help="bench_flow's problem (medium: the components only)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--crossover", action="store_true",
                    help="the loops against BLAS over product shapes")
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a.problem)
    if a.crossover:
        return crossover()
    trees = {"this tree": ROOT}
    if a.base:
        trees = {f"base {a.base}": _tree(a.base), **trees}
    best = {name: {} for name in trees}
    for r in range(a.rounds):
        for name, tree in trees.items():
            for k, v in _round(tree, a.problem).items():
                best[name][k] = min(best[name].get(k, np.inf), v)
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr, flush=True)
    names = list(trees)
    print(f"{'us (best of ' + str(a.rounds) + ' rounds)':28s}"
          + "".join(f"{n[:18]:>20s}" for n in names)
          + (f"{'base / this':>13s}" if a.base else ""))
    for k in best[names[-1]]:
        vals = [best[n][k] for n in names]
        line = f"{k:28s}" + "".join(f"{v:20.3f}" for v in vals)
        if a.base:
            line += f"{vals[0] / vals[1]:12.2f}x"
        print(line)


if __name__ == "__main__":
    main()
