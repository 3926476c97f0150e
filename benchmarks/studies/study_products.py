"""The two orientations of the bottom-chain product ``G W^T``, timed in the same run.

``_rhs.times_transpose`` forms ``G W^T`` (G: C x N_{l-1}, W: N_l x N_{l-1}) as
``(W G^T)^T`` for layers up to ``_rhs.TRANSPOSED_PRODUCT_MAX_BYTES`` and directly
above.  This script times both orientations from compiled code (numba ``np.dot``,
the calls the kernels make) on the layer shapes of ``bench_flow.py`` and prints
their ratio, so the threshold can be checked on a new machine.

``--rates`` instead prints, per layer shape, the FLOP rate of the three C-row
products a gradient makes with that layer (the top chain's ``W^T A^T``, the bottom
chain's ``G W^T`` in the orientation used, the update's ``A^T G``), each repeated on
the same operands (the best case: in cache where they fit), against this machine's
square float64 GEMM rate measured in the same run.  The FLOP bound of
``bench_flow.py`` assumes the GEMM rate; where these shapes reach only a fraction of
it, a gradient cannot come within less than the inverse of that fraction of the bound.
Beside them it times the top chain's product in a compiled loop written out for the
given C (:func:`blocked_top`), to show how far such loops get past BLAS on these
shapes (not used by the package: the code is generated per C and not cached, and it
rounds apart from the numpy reference).

Usage::

    python benchmarks/studies/study_products.py [--outputs C] [--rates]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow

from linearnets.sim.models import linear as _rhs  # noqa: E402

#: (N_l, N_{l-1}) of the layers of the small, medium and large benchmark networks.
SHAPES = ((32, 20), (32, 32), (256, 128), (256, 256), (512, 256), (512, 512), (1024, 256),
          (1024, 512), (1024, 1024))
#: Products per timing, and timings per shape (the best counts).
INNER, REPEATS = 50, 7
#: Rows of W per pass of :func:`blocked_top` (of 2, 4, 8 and 16 rows, 4 and 8 were
#: fastest for C = 10 on a 1024 x 1024 layer: 0.42-0.44 ms against 0.59 ms and 1.2 ms).
ROW_BLOCK = 4


def blocked_top(C):
    """``loop(n, AT, W, out)``: ``n`` times ``out = A W`` (``AT`` = A^T, r x C; W: r x c)
    as a compiled loop written out for these C outputs (numba ``parallel=True``).

    Each pass takes ``ROW_BLOCK`` rows of W, reads each of their entries once and adds
    its products with the C coefficients into a per-thread partial sum (two threads,
    one half of W's rows each), so that the C partial rows are loaded and stored once
    per ``ROW_BLOCK`` rows rather than once per row.  The loop is generated for the
    given C (the C updates per entry are unrolled; a loop over C instead runs no faster
    than BLAS); it is compiled anew in every run (generated code is not cached).
    """
    from numba import njit, prange
    B = ROW_BLOCK
    lines = ["def kernel(AT, W, out):",
             "    r, c = W.shape",
             f"    part = np.zeros((2, {C}, c))",
             "    for t in prange(2):",
             "        p0, p1 = t * r // 2, (t + 1) * r // 2",
             "        P = part[t]",
             f"        main = p0 + (p1 - p0) // {B} * {B}",
             f"        for pb in range(p0, main, {B}):"]
    lines += [f"            w{j} = W[pb + {j}]" for j in range(B)]
    lines += [f"            s{a}_{j} = AT[pb + {j}, {a}]" for a in range(C) for j in range(B)]
    lines += ["            for q in range(c):"]
    lines += [f"                x{j} = w{j}[q]" for j in range(B)]
    lines += [f"                P[{a}, q] += " + " + ".join(f"s{a}_{j} * x{j}" for j in range(B))
              for a in range(C)]
    lines += ["        for p in range(main, p1):",
              f"            for a in range({C}):",
              "                s = AT[p, a]",
              "                for q in range(c):",
              "                    P[a, q] += s * W[p, q]",
              "    for a in range(out.shape[0]):",
              "        for q in range(out.shape[1]):",
              "            out[a, q] = part[0, a, q] + part[1, a, q]",
              "",
              "def loop(n, AT, W, out):",
              "    for _ in range(n):",
              "        kernel(AT, W, out)"]
    scope = {"np": np, "prange": prange}
    exec("\n".join(lines), scope)  # noqa: S102 - code generated above, for this C
    kernel = njit(parallel=True)(scope["kernel"])
    scope["kernel"] = kernel
    return njit(scope["loop"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--outputs", type=int, default=10, help="rows C of G (default 10)")
    ap.add_argument("--rates", action="store_true",
                    help="FLOP rates of a gradient's product shapes against square GEMM")
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
    if args.rates:
        rates(C, rng, best, direct, transposed)
        return
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


def rates(C, rng, best, direct, transposed):
    """Per layer shape: GFLOP/s of the gradient's three C-row products, and the best of
    them as a fraction of the square GEMM rate; then, for each network of
    ``bench_flow.py``, its gradient's products summed at these rates (with its own C)
    against the FLOP bound."""
    from numba import njit

    import bench_flow as bf

    @njit
    def plain(n, a, b, out):
        for _ in range(n):
            np.dot(a, b, out)

    loops = {}

    def blocked(r, c, C):
        """Seconds of ``A W`` by :func:`blocked_top` (checked against numpy's product)."""
        if C not in loops:
            loops[C] = blocked_top(C)
        W = rng.standard_normal((r, c))
        AT = rng.standard_normal((r, C))
        out = np.empty((C, c))
        loops[C](1, AT, W, out)
        ref = AT.T @ W
        if not np.abs(out - ref).max() <= 1e-12 * np.abs(ref).max():
            raise RuntimeError(f"the blocked loop's product is wrong on {r} x {c}")
        return best(loops[C], AT, W, out)

    def three(r, c, C):
        """Seconds of ``W^T A^T``, ``G W^T`` (the orientation used) and ``A^T G``."""
        W = rng.standard_normal((r, c))
        G = rng.standard_normal((C, c))
        t_top = best(plain, W.T, rng.standard_normal((r, C)), np.empty((c, C)))
        if 8 * W.size <= _rhs.TRANSPOSED_PRODUCT_MAX_BYTES:
            t_bottom = best(transposed, np.ascontiguousarray(G.T), W, np.empty((r, C)))
        else:
            t_bottom = best(direct, G, W, np.empty((C, r)))
        t_outer = best(plain, rng.standard_normal((r, C)), G, np.empty((r, c)))
        return t_top, t_bottom, t_outer

    gemm = bf.gemm_rate()
    print(f"C = {C}; square float64 GEMM {gemm / 1e9:.0f} GFLOP/s (numpy, same run)")
    print(f"  {'layer':>11s} {'W^T A^T':>9s} {'G W^T':>9s} {'A^T G':>9s}   GFLOP/s; "
          f"{'best':>5s} of GEMM;  A W in blocked loops: GFLOP/s, of GEMM")
    for r, c in SHAPES:
        got = [2.0 * C * r * c / t / 1e9 for t in three(r, c, C)]
        mine = 2.0 * C * r * c / blocked(r, c, C) / 1e9
        print(f"  {r:5d} x {c:<5d} {got[0]:9.1f} {got[1]:9.1f} {got[2]:9.1f}   "
              f"{max(got) * 1e9 / gemm:16.0%}   {mine:19.1f} {mine * 1e9 / gemm:7.0%}",
              flush=True)
    print("  a gradient's products (every layer below the top), each at its rate above:")
    for name, (sizes, *_rest) in bf.PROBLEMS.items():
        shapes = tuple(zip(sizes[1:], sizes[:-1]))
        Cn = sizes[-1]
        times = [(three(r, c, Cn), blocked(r, c, Cn)) for r, c in shapes[:-1]]
        total = sum(sum(t) for t, _ in times)
        mixed = sum(min(t[0], tb) + t[1] + t[2] for t, tb in times)
        bound = bf.gradient_flops(shapes, True) / gemm
        print(f"  {name:7s} C = {Cn:2d}: {total * 1e6:9.1f} us against a FLOP bound of "
              f"{bound * 1e6:8.2f} us: {total / bound:5.1f}x; with the top chain's products "
              f"in blocked loops where faster {mixed / bound:5.1f}x", flush=True)

if __name__ == "__main__":
    main()
