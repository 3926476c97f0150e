"""What a run of ``bench_flow.py``'s large problem costs per evaluation, with BLAS on one
thread and with the libraries' own thread pools, at a loose and at a tight tolerance.

For each round and each setting (both OpenBLAS builds that numpy and scipy load limited to
one thread through threadpoolctl, then unlimited) it prints, in one process: one gradient
(the compiled kernel, best of ``time_call``), ``gradient_flow`` to ``t_end`` at rtol 1e-2,
and the first 50 steps of the run at rtol 1e-8 (``max_steps=50``: about as many
evaluations), each as wall and CPU milliseconds per evaluation.  Where the per-evaluation
cost follows the thread setting and the load of the moment, not the tolerance, the
integrator is not what makes a loose run dear.

Usage::

    python benchmarks/studies/study_blas_threads.py [--backend numba] [--method RK45]
        [--rounds 1] [--t-end 72.59]

``--t-end``: bench_flow's t_end of the large problem (72.59: its reference, the first time
the loss falls below 1e-6 of its start).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow

import bench_flow as bf  # noqa: E402
import linearnets as ln  # noqa: E402
from linearnets.sim.models import _linear_kernels as kern  # noqa: E402
from linearnets.sim.models import linear as lin  # noqa: E402

#: (rtol, max_steps): the loose run to t_end, the tight one's first steps.
RUNS = ((1e-2, 10 ** 6), (1e-8, 50))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="numba")
    ap.add_argument("--method", default="RK45")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--t-end", type=float, default=72.59)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")        # the tight run stops at max_steps on purpose
    ws, X, Y, _ = bf.make("large")
    problem = lin.make_problem(tuple(w.shape for w in ws), X, Y)
    rhs_args = lin.numba_rhs_args(problem)
    y0 = lin.pack(ws)
    out = np.empty_like(y0)
    m, b = args.method, args.backend
    ln.gradient_flow(ws, X, Y, [0.0, 1e-3], backend=b, method=m)   # compile or load
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for _ in range(args.rounds):
        for limit in (1, None):
            with threadpool_limits(limit):
                g = bf.time_call(lambda: kern.rhs_flat(y0, out, *rhs_args), 0.3)
                res = []
                for rtol, steps in RUNS:
                    t0, c0 = time.perf_counter(), time.process_time()
                    tr = ln.gradient_flow(ws, X, Y, [0.0, args.t_end], rtol=rtol,
                                          atol=rtol * bf.ATOL_RATIO, backend=b, method=m,
                                          max_steps=steps)
                    w, c = time.perf_counter() - t0, time.process_time() - c0
                    res.append(f"rtol {rtol:.0e}: {w / tr.nfev * 1e3:.2f} ms/eval wall, "
                               f"{c / tr.nfev * 1e3:.2f} cpu ({tr.nfev} evals)")
            print(f"{m} on {b}, BLAS threads {limit or 'own'}: gradient {g * 1e3:.2f} ms | "
                  + " | ".join(res), flush=True)


if __name__ == "__main__":
    main()
