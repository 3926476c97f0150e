"""What a ``gradient_flow`` call costs besides its steps, on two source trees in one run.

On ``bench_flow.py``'s small problem (20-32-32-1, P = 200, t_end = 1122.4), its medium one
(128-256-256-256-10, P = 2000, t_end = 1125.1) and its large one (512-1024-1024-10, P = 4000,
t_end = 400; the medium one's methods and rtol), each tree given on the command line is timed
in its own fresh process (``PYTHONPATH=<tree>``), the trees alternating over ``--rounds``:

* ``run``: ``gradient_flow`` to t_end at bench_flow's winning tolerance (small: RK45 and auto
  at rtol 3e-5; medium: SSPRK104 and auto at rtol 3e-3; atol = 1e-3 rtol; numba), best of
  ``--repeats``, with ``--outputs`` T output times evenly spaced from 0 to t_end (2: the
  start and the end, as bench_flow);
* ``fixed``: the same call to ``1e-9 t_end`` (one step), the fixed cost of a call: validation,
  set-up, the first step and the outputs.

BLAS runs on one thread.  What it showed on this machine (three rounds, small, idle): the
issue's baseline commit be02454 took 1.51-1.56 ms for the RK45 run with a fixed cost of
0.47-0.49 ms; main at 5bd25ad took 1.88-1.95 ms and 0.75-0.78 ms, the loop itself
1.04-1.07 against 1.10-1.17 ms for the same 188 evaluations: the gap is the fixed cost.
With the data checked once and the kernels' index arrays formed once per problem (caf2acf),
on a slower day, quietest of three rounds: be02454 0.74 ms fixed, 2.30 ms RK45 run; 87a3576
1.23 and 2.95 ms; caf2acf 0.88 and 2.56 ms.  With one output's guard in floats, the exact
loss of a few maps in one product and the FSAL copy as loops (503b80f), on an idle day, eight
rounds, min (median): be02454 RK45 run 1.44 (1.51) ms, fixed 0.46 (0.47); 503b80f auto 1.54
(1.62), RK45 1.48 (1.58), fixed 0.49 (0.52); with ``--outputs 201`` (1,322 evaluations, six
rounds) be02454 12.4 (12.5) ms against 12.9 (12.9) ms, from 14.8 ms at 705d19c.

Run: ``python benchmarks/studies/study_call_cost.py TREE [TREE ...] [--problem small|medium|large]
[--rounds 3] [--outputs 2] [--methods auto]``; the last lines give each
tree's run time over the first tree's, round by round (median and range)
(a tree is a directory holding ``linearnets/``, e.g. a ``git worktree`` of another commit).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

CHILD = r"""
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
import linearnets as ln
from linearnets.data import scalar_teacher, teacher_task
problem, repeats, outputs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
only = sys.argv[4].split(",") if sys.argv[4] else None
if problem == "small":
    X, y, _ = scalar_teacher(200, 20, 1.0, seed=0)
    Y = y[:, None]
    ws = ln.init_network((20, 32, 32, 1), 1e-3, seed=1)
    t_end, runs = 1122.4, [("RK45", 3e-5), ("auto", 3e-5)]
elif problem == "medium":
    X, Y = teacher_task(2000, 128, tuple(np.linspace(1.0, 0.5, 10)), seed=0)
    ws = ln.init_network((128, 256, 256, 256, 10), 0.03, seed=1)
    t_end, runs = 1125.1, [("SSPRK104", 3e-3), ("auto", 3e-3)]
else:
    X, Y = teacher_task(4000, 512, tuple(np.linspace(1.0, 0.5, 10)), seed=0)
    ws = ln.init_network((512, 1024, 1024, 10), 0.03, seed=1)
    t_end, runs = 400.0, [("SSPRK104", 3e-3), ("auto", 3e-3)]


def best(f):
    f()
    b = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        b = min(b, time.perf_counter() - t0)
    return b


out = {}
with threadpool_limits(1):
    for m, r in [(m, r) for m, r in runs if only is None or m in only]:
        call = lambda t, T=2: ln.gradient_flow(ws, X, Y, np.linspace(0.0, t, T), rtol=r,
                                               atol=1e-3 * r, backend="numba", method=m)
        nfev = int(call(t_end, outputs).nfev)
        out[m] = dict(run=best(lambda: call(t_end, outputs)),
                      fixed=best(lambda: call(1e-9 * t_end)),
                      nfev=nfev)
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--problem", default="small", choices=("small", "medium", "large"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--methods", default="",
                    help="comma-separated methods of the problem to time (default: both)")
    ap.add_argument("--outputs", type=int, default=2,
                    help="output times of the run, evenly spaced from 0 to t_end")
    a = ap.parse_args()
    repeats = a.repeats or (60 if a.problem == "small" else 3)
    for tree in a.trees:       # a first process per tree compiles (or loads) its kernels
        _child(tree, a.problem, 1, a.outputs, a.methods)
    runs = {tree: [] for tree in a.trees}
    for k in range(a.rounds):
        for tree in a.trees:
            res = _child(tree, a.problem, repeats, a.outputs, a.methods)
            runs[tree].append(res)
            cells = "  ".join(f"{m} run {v['run'] * 1e3:8.3f} ms, fixed {v['fixed'] * 1e3:7.3f} ms,"
                              f" loop {(v['run'] - v['fixed']) * 1e3:8.3f} ms ({v['nfev']} evals)"
                              for m, v in res.items())
            print(f"round {k + 1}  {tree}: {cells}", flush=True)
    first = a.trees[0]
    for tree in a.trees[1:]:      # each round's pair: the trees ran minutes apart at most
        for m in runs[first][0]:
            r = np.array([b[m]["run"] / f[m]["run"] for f, b in zip(runs[first], runs[tree])])
            print(f"{tree} / {first}, {m} run: median {np.median(r):.3f}, "
                  f"range {r.min():.3f}-{r.max():.3f} over {r.size} rounds")


def _child(tree, problem, repeats, outputs, methods=""):
    tree = os.path.abspath(tree)      # the child runs in it: ``-c`` puts the cwd first
    done = subprocess.run([sys.executable, "-c", CHILD, problem, str(repeats), str(outputs),
                           methods],
                          cwd=tree, env=dict(os.environ, PYTHONPATH=tree),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
