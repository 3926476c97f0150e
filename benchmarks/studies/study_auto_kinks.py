"""``method="auto"`` against fixed methods on sliding ReLU flows (docs/simulator.md).

Two problems, every method at the same tolerances (numba, compiled loops loaded untimed
first); only ratios within a row mean anything on a shared machine:

- ``small``: ``benchmarks/bench_mlp.py``'s small problem (10-64-64-1 ReLU, P = 200, sliding
  along kinks from t = 0) at rtol = kink_rtol = each of ``--rtols``, to ``--t-end``, best
  of ``--rounds`` timed runs; ``err`` is ``max |F - F_ref| / max |F_ref|`` of the outputs
  against ``bench_mlp.reference`` at ``--ref-rtol``, ``--ref-kink-rtol`` (kept in
  ``--ref-cache`` where given), so that equal accuracy can be read off;
- ``luo``: ``experiments/luo_two_layer``'s ``point`` at m = ``--width``, seed 0, over
  gamma in {0.2, 1, 1.8} and gamma' in {-0.8, 0, 0.8} (the experiment's tolerances);
  ``drd`` is the relative error of ``rd_w`` against the point at rtol 1e-7, kink_rtol 1e-5.

Run: ``python benchmarks/studies/study_auto_kinks.py [--only small,luo] [--methods auto,SSPRK104]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "experiments", "luo_two_layer"))

import linearnets as ln  # noqa: E402


def small(methods, rtols, t_end, rounds, ref):
    import bench_mlp
    pb = bench_mlp.make("small", quick=False)
    pb["t_end"] = t_end
    F_ref, agree, _, info = bench_mlp.reference(pb, *ref)
    print(f"small reference rtol {ref[0]:g} kink_rtol {ref[1]:g}: nfev {info['nfev']}, "
          f"agreement with 10x looser {agree:.1e}", flush=True)

    def run(m, tol):
        return ln.gradient_flow(pb["ws"], pb["X"], pb["Y"], [t_end], rtol=tol, kink_rtol=tol,
                                backend="numba", record=("outputs",), method=m,
                                max_steps=10 ** 7, **pb["kw"])
    for m in methods:
        run(m, 1e-3)
    for rtol in rtols:
        base = None
        for m in methods:
            best, tr = np.inf, None
            for _ in range(rounds):
                t0 = time.perf_counter()
                tr = run(m, rtol)
                best = min(best, time.perf_counter() - t0)
            base = best if base is None else base
            print(f"small rtol {rtol:g} {m:9s} {best:8.3f} s ({best / base:5.2f}x "
                  f"{methods[0]})  nfev {tr.nfev:8d}  steps {tr.nsteps:6d}  by BS32 "
                  f"{tr.fallback_steps:6d}  err {bench_mlp.err_of(tr.outputs[-1], F_ref):.2e}",
                  flush=True)


def luo(methods, width):
    import luo as experiment
    orig = ln.gradient_flow
    try:
        for g in (0.2, 1.0, 1.8):
            for gp in (-0.8, 0.0, 0.8):
                ref = experiment.point(g, gp, width, 0, rtol=1e-7, kink_rtol=1e-5,
                                       max_steps=10 ** 7)["rd_w"]
                row = []
                for m in methods:
                    seen = {}

                    def gf(*a, m=m, seen=seen, **k):
                        k["method"] = m
                        seen["tr"] = orig(*a, **k)
                        return seen["tr"]
                    ln.gradient_flow = gf
                    t0 = time.perf_counter()
                    r = experiment.point(g, gp, width, 0)
                    dt = time.perf_counter() - t0
                    row.append(f"{m}: {dt:6.2f} s nfev {seen['tr'].nfev:7d} rd_w {r['rd_w']:.5f}"
                               f" drd {abs(r['rd_w'] - ref) / max(abs(ref), 1e-300):.1e}")
                print(f"luo gamma {g} gamma' {gp} m {width} | " + " | ".join(row), flush=True)
    finally:
        ln.gradient_flow = orig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="small,luo")
    ap.add_argument("--methods", default="auto,SSPRK104")
    ap.add_argument("--rtols", default="3e-4,1e-4,3e-5")
    ap.add_argument("--t-end", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ref-rtol", type=float, default=1e-8)
    ap.add_argument("--ref-kink-rtol", type=float, default=1e-6)
    ap.add_argument("--ref-cache", default=None, help="folder keeping the reference (.npz)")
    ap.add_argument("--width", type=int, default=1000)
    args = ap.parse_args(argv)
    methods = args.methods.split(",")
    only = args.only.split(",")
    if "small" in only:
        small(methods, [float(r) for r in args.rtols.split(",")], args.t_end, args.rounds,
              (args.ref_rtol, args.ref_kink_rtol, args.ref_cache))
    if "luo" in only:
        luo(methods, args.width)


if __name__ == "__main__":
    main()
