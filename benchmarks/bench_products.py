"""The two orientations of the bottom-chain product ``G W^T``, timed in the same run.

``_rhs.times_transpose`` forms ``G W^T`` (G: C x N_{l-1}, W: N_l x N_{l-1}) as
``(W G^T)^T`` for layers up to ``_rhs.TRANSPOSED_PRODUCT_MAX_BYTES`` and directly
above.  This script times both orientations from compiled code (numba ``np.dot``,
the calls the kernels make) on the layer shapes of ``bench_flow.py`` and prints
their ratio, so the threshold can be checked on a new machine.

Usage::

    python benchmarks/bench_products.py [--outputs C]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from linearnets.sim import _rhs  # noqa: E402

#: (N_l, N_{l-1}) of the layers of the small, medium and large benchmark networks.
SHAPES = ((32, 20), (32, 32), (256, 128), (256, 256), (512, 256), (512, 512), (1024, 256),
          (1024, 512), (1024, 1024))
#: Products per timing, and timings per shape (the best counts).
INNER, REPEATS = 50, 7


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--outputs", type=int, default=10, help="rows C of G (default 10)")
    args = ap.parse_args(argv)
    from numba import njit

    @njit
    def direct(n, G, W, out):
        for _ in range(n):
            np.dot(G, W.T, out)

    @njit
    def transposed(n, GT, W, outT):
        for _ in range(n):
            np.dot(W, GT, outT)

    def best(f, *a):
        f(1, *a)
        t = np.inf
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            f(INNER, *a)
            t = min(t, (time.perf_counter() - t0) / INNER)
        return t

    C = args.outputs
    rng = np.random.default_rng(0)
    print(f"C = {C}; threshold TRANSPOSED_PRODUCT_MAX_BYTES = "
          f"{_rhs.TRANSPOSED_PRODUCT_MAX_BYTES / 2**20:.3g} MiB")
    print(f"  {'layer':>11s} {'MiB':>6s} {'G W^T (us)':>11s} {'(W G^T)^T (us)':>15s} "
          f"{'ratio':>6s}  used")
    for r, c in SHAPES:
        W = rng.standard_normal((r, c))
        G = rng.standard_normal((C, c))
        t1 = best(direct, G, W, np.empty((C, r)))
        t2 = best(transposed, np.ascontiguousarray(G.T), W, np.empty((r, C)))
        used = "(W G^T)^T" if 8 * W.size <= _rhs.TRANSPOSED_PRODUCT_MAX_BYTES else "G W^T"
        print(f"  {r:5d} x {c:<5d} {8 * W.size / 2**20:6.2f} {t1 * 1e6:11.1f} {t2 * 1e6:15.1f} "
              f"{t1 / t2:5.2f}x  {used}", flush=True)


if __name__ == "__main__":
    main()
