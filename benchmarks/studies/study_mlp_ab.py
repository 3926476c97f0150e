"""The compiled MLP loop on two source trees, alternating fresh processes, same run.

Each tree given on the command line (a directory holding ``linearnets/``, e.g. a ``git
worktree`` of another commit) runs ``gradient_flow`` on a 20-64-64-1 network, P = 200,
to t = 30 at rtol 1e-6 on ``backend="numba"``, smooth (tanh) and with kinks (ReLU), best
of ``--repeats`` calls after one that compiles or loads the kernels; the trees alternate
over ``--rounds``.  The evaluations and kinks crossed print beside the time: equal counts
mean both trees took the same steps.  BLAS runs on one thread.

Run: ``python benchmarks/studies/study_mlp_ab.py TREE [TREE ...] [--rounds 3] [--repeats 5]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r'''
import json, sys, time
import numpy as np
import linearnets as ln
act, reps = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.standard_normal((200, 20))
Y = np.tanh(X[:, :1] * 1.5)
ws = ln.init_network((20, 64, 64, 1), 1.0, seed=1)
t = np.array([0.0, 30.0])
kw = dict(activation=act, rtol=1e-6, atol=1e-9, backend="numba")
tr = ln.gradient_flow(ws, X, Y, t, **kw)
best = np.inf
for _ in range(reps):
    t0 = time.perf_counter()
    tr = ln.gradient_flow(ws, X, Y, t, **kw)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"best": best, "nfev": int(tr.nfev), "kinks": int(tr.kinks),
                  "success": bool(tr.success)}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for r in range(a.rounds):
        for act in ("tanh", "relu"):
            for tree in map(os.path.abspath, a.trees):
                done = subprocess.run([sys.executable, "-c", CHILD, act, str(a.repeats)],
                                      cwd=tree, env=dict(env, PYTHONPATH=tree),
                                      capture_output=True, text=True, check=True)
                res = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"round {r + 1} {act:5s} {tree}: {res['best'] * 1e3:9.2f} ms, "
                      f"nfev {res['nfev']}, kinks {res['kinks']}", flush=True)


if __name__ == "__main__":
    main()
