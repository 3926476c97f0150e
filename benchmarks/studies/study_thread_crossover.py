"""Where a matrix product starts to gain from BLAS's thread pool, idle and with one core busy.

For each product shape (m, k) @ (k, n) it times the product on one BLAS thread and on the
libraries' own pool (threadpoolctl, both OpenBLAS builds that numpy and scipy load), best of
``--repeats`` within alternating rounds, and prints the ratio pool/one (below 1: the pool is
faster).  ``--busy`` starts one unrelated process spinning on a core for the whole run, as a
user's other work would.  The crossover that ``linearnets._threads.CROSSOVER`` encodes is the
smallest m·k·n at which the pool wins idle; docs/methods.md ("Threads") has the table.

Usage::

    python benchmarks/studies/study_thread_crossover.py [--busy] [--rounds 3] [--repeats 20]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np
from threadpoolctl import ThreadpoolController

SHAPES = [(m, k, k) for m in (100, 1000) for k in (32, 64, 128, 256, 512, 1024)]


def mean_time(a, b, out, repeats):
    """Mean time of one product among ``repeats`` back to back, each followed by a little
    work of the calling thread (as an integrator's step does between its products)."""
    t0 = time.perf_counter()
    for _ in range(repeats):
        np.dot(a, b, out=out)
        np.tanh(out[:1], out=out[:1])
    return (time.perf_counter() - t0) / repeats


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", action="store_true", help="one core busy with another process")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args(argv)
    spinner = None
    if args.busy:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.5)
    try:
        blas = ThreadpoolController().select(user_api="blas")
        pool = max(info["num_threads"] for info in blas.info())
        print(f"{os.cpu_count()} cores, pool {pool} threads, busy core: {args.busy}, "
              f"load average {os.getloadavg()[0]:.2f}")
        rng = np.random.default_rng(0)
        print(f"{'m':>5} {'k=n':>5} {'m*k*n':>11} {'one (us)':>10} {'pool (us)':>10} "
              f"{'pool/one':>8}")
        for m, k, n in SHAPES:
            a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
            out = np.empty((m, n))
            one = many = np.inf
            for _ in range(args.rounds):
                with blas.limit(limits=1):
                    one = min(one, mean_time(a, b, out, args.repeats))
                many = min(many, mean_time(a, b, out, args.repeats))
            print(f"{m:5d} {k:5d} {m * k * n:11.3g} {one * 1e6:10.1f} {many * 1e6:10.1f} "
                  f"{many / one:8.2f}")
    finally:
        if spinner is not None:
            spinner.kill()


if __name__ == "__main__":
    main()
