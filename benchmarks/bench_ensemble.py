"""Ensemble throughput: B = 16 initialisations in one ``gradient_flow_ensemble`` call against
16 serial ``gradient_flow`` calls, on numba and on numpy.

Networks (the sweep's point of ``problems.py``, and a ReLU net with biases):

- ``linear``: 10-16-1, scalar teacher (P = 40), sigma = 0.01, 20 output times up to 400;
- ``relu``: ReLU 10-16-1 on the same data, sigma = 0.5, 20 output times up to 40 (members
  take 350 to 6,900 steps, the longest sliding along kinks);
- ``relu_biases``: ReLU 5-32-1 with trained hidden biases, P = 50 Gaussian inputs,
  y = tanh(x_1), sigma = 1, 10 output times up to 5;

all at rtol 1e-6, atol 1e-9, through the public API only.  Each row: the wall time and
the CPU time (of all threads) of 16 serial calls (the baseline) and of one ensemble call,
interleaved over ``--rounds`` rounds in this process, the fastest kept (on a shared machine
only the ratios mean anything, and of those the CPU ratio, which other processes' load
leaves alone; threads gain wall time only on idle cores), and the largest difference of a
member's final loss from its serial run, in units of ``rtol * loss(0)``.

``--floor`` splits the CPU time of one serial call on numba into its compiled loops (the
``*advance*`` entry points of ``linearnets/sim/models/_*_kernels.py``, thread CPU time) and
the Python around them: an ensemble whose members each take their own steps in those loops
costs at least the loops, so 1 / (loop share) bounds its speed-up on one core, and the
number of cores times that on idle cores.

``--against DIR`` also times the ensemble of another checkout of the package (its
``linearnets`` on ``PYTHONPATH=DIR``, e.g. ``git archive 415f85f | tar -x -C DIR``)
against this tree's, each in a fresh subprocess, the two interleaved over ``--rounds``
rounds (best of ``--reps`` calls inside each), the fastest kept.

Run: ``python benchmarks/bench_ensemble.py [--cases linear relu relu_biases]
[--backends numba numpy] [--rounds 2] [--against DIR [--reps 2]] [--floor]``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

B = 16
TOL = dict(rtol=1e-6, atol=1e-9)
CASES = ("linear", "relu", "relu_biases")


def case(name):
    """``(X, y, t_eval, inits, kw)``: the network's data, output times, B initialisations
    ``(weights, biases or None)`` and keywords of ``gradient_flow``."""
    import linearnets as ln
    import problems as pb
    if name == "relu_biases":
        rng = np.random.default_rng(0)
        X = rng.standard_normal((50, 5))
        inits = [(ln.init_network((5, 32, 1), 1.0, seed=s),
                  [0.1 * np.random.default_rng(1000 + s).standard_normal(32)]) for s in range(B)]
        return X, np.tanh(X[:, 0]), np.geomspace(0.05, 5.0, 10), inits, dict(activation="relu")
    X, y = pb.sweep_data()
    relu = name == "relu"
    sigma, t = (pb.RELU_SIGMA, pb.RELU_T) if relu else (pb.LINEAR_SIGMA, pb.LINEAR_T)
    inits = [(ln.init_network(pb.SWEEP_SIZES, sigma, seed=s), None) for s in range(B)]
    return X, y, t, inits, dict(activation="relu") if relu else {}


def paths(name, backend):
    """``(serial, ensemble)``: callables returning the B final losses, and loss(0)."""
    import linearnets as ln
    X, y, t, inits, kw = case(name)
    bias = inits[0][1] is not None

    def serial():
        return np.array([ln.gradient_flow(w, X, y, t, biases=b, backend=backend, **kw, **TOL)
                         .loss[-1] for w, b in inits])

    def ensemble():
        ens = ln.gradient_flow_ensemble([w for w, _ in inits], X, y, t, backend=backend,
                                        biases_list=[b for _, b in inits] if bias else None,
                                        **kw, **TOL)
        return np.array(ens.loss[:, -1])
    w, b = inits[0]
    loss0 = float(ln.gradient_flow(w, X, y, [0.0], biases=b, backend="numpy", **kw).loss[0])
    return serial, ensemble, loss0


def _timed(f):
    """``(wall s, CPU s of the process, f())``."""
    t, c = time.perf_counter(), time.process_time()
    out = f()
    return time.perf_counter() - t, time.process_time() - c, out


def _loop_clock():
    """Wrap the compiled loops' entry points (``*advance*`` of the models' kernel modules) to
    add their thread CPU time to the returned dict's ``"loop"``."""
    import importlib
    import pkgutil

    import linearnets.sim.models as models
    acc = {"loop": 0.0}

    def clocked(f):
        def g(*a):
            t = time.thread_time()
            try:
                return f(*a)
            finally:
                acc["loop"] += time.thread_time() - t
        return g
    for m in pkgutil.iter_modules(models.__path__):
        if m.name.startswith("_") and m.name.endswith("_kernels"):
            mod = importlib.import_module(f"{models.__name__}.{m.name}")
            for name in dir(mod):
                if "advance" in name and hasattr(getattr(mod, name), "py_func"):
                    setattr(mod, name, clocked(getattr(mod, name)))
    return acc


def floor(args):
    """The compiled loops' share of a serial call's CPU time on numba (``--floor``)."""
    acc = _loop_clock()
    print(f"numba: CPU time of one serial gradient_flow call (mean over the {B} members) and "
          f"of its compiled loops, best of {args.rounds} rounds")
    print(f"{'network':12s} {'call ms':>8s} {'loops ms':>9s} {'loop share':>11s} "
          f"{'bound, 1 core':>14s} {'2 cores':>8s}")
    for name in args.cases:
        serial, _, _ = paths(name, "numba")
        serial()
        best = None
        for _ in range(args.rounds):
            acc["loop"] = 0.0
            _, cpu, _ = _timed(serial)
            if best is None or cpu < best[0]:
                best = (cpu, acc["loop"])
        cpu, loop = best[0] / B, best[1] / B
        print(f"{name:12s} {cpu * 1e3:8.3f} {loop * 1e3:9.3f} {loop / cpu:11.2f} "
              f"{cpu / loop:13.2f}x {2 * cpu / loop:7.2f}x")


def one(name, backend, reps):
    """Best wall time of ``reps`` ensemble calls (after one to warm up), for ``--against``."""
    _, ensemble, _ = paths(name, backend)
    ensemble()
    print(min(_timed(ensemble)[0] for _ in range(reps)))


def against(args):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [("this tree", here), (f"{args.against}", os.path.abspath(args.against))]
    print(f"ensemble (B = {B}) of this tree against {args.against}: best of {args.rounds} "
          f"interleaved subprocess rounds (each the best of {args.reps} calls)")
    for name in args.cases:
        for backend in args.backends:
            best = {}
            for _ in range(args.rounds):
                for label, tree in trees:
                    env = dict(os.environ, PYTHONPATH=tree)
                    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one",
                                          name, backend, "--reps", str(args.reps)], env=env,
                                         capture_output=True, text=True, check=True)
                    sec = float(out.stdout.split()[-1])
                    best[label] = min(best.get(label, np.inf), sec)
            new, old = best[trees[0][0]], best[trees[1][0]]
            print(f"  {name:12s} {backend:6s} this tree {new:8.3f} s   other {old:8.3f} s   "
                  f"this / other {new / old:5.2f}   speed-up {old / new:5.2f}x")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--backends", nargs="+", default=["numba", "numpy"],
                    choices=["numba", "numpy"])
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (fastest kept)")
    ap.add_argument("--against", metavar="DIR", help="another checkout to time against")
    ap.add_argument("--reps", type=int, default=2, help="calls per subprocess (--against)")
    ap.add_argument("--floor", action="store_true",
                    help="the compiled loops' share of a serial call (numba)")
    ap.add_argument("--one", nargs=2, metavar=("CASE", "BACKEND"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        return one(*args.one, args.reps)
    if args.against:
        return against(args)
    if args.floor:
        return floor(args)
    print(f"B = {B}: one ensemble call against {B} serial gradient_flow calls, best of "
          f"{args.rounds} interleaved rounds")
    print(f"{'network':12s} {'backend':7s} {'serial s':>9s} {'ensemble s':>10s} {'speed-up':>9s} "
          f"{'serial cpu s':>12s} {'ensemble cpu s':>14s} {'cpu ratio':>9s} "
          f"{'max |dloss| / (rtol loss0)':>27s}")
    for name in args.cases:
        for backend in args.backends:
            serial, ensemble, loss0 = paths(name, backend)
            serial()
            ensemble()                       # warm (compile or load the kernels)
            ts = te = cs = ce = np.inf
            for _ in range(args.rounds):
                t1, c1, ls = _timed(serial)
                t2, c2, le = _timed(ensemble)
                ts, te, cs, ce = min(ts, t1), min(te, t2), min(cs, c1), min(ce, c2)
            dev = float(np.max(np.abs(le - ls))) / (TOL["rtol"] * loss0)
            print(f"{name:12s} {backend:7s} {ts:9.3f} {te:10.3f} {ts / te:8.2f}x {cs:12.3f} "
                  f"{ce:14.3f} {cs / ce:8.2f}x {dev:27.2g}")


if __name__ == "__main__":
    main()
