"""Which explicit pair ``method="auto"`` should start with on a smooth model: RK45 (today) or
Tsit5, counted in evaluations at the benchmarks' accuracy targets.

``auto`` runs its pair while accuracy sets the step (``driver.auto_pair``: RK45 at rtol >=
1e-6 on a smooth model).  This script runs ``auto`` as it is and with Tsit5 in RK45's place
(``driver.auto_pair`` replaced in this process only), on numba, over each problem's
tolerances, and prints per run the evaluations and the error against the benchmark's own
reference; the scan's pick is bench_flow's rule (the loosest rtol reaching the target
whose next tighter one reaches it too):

* bench_flow's ``small`` and ``medium`` linear problems (target 1e-4 on ``W(t_end)``);
* bench_mlp's ``smooth`` tanh net 10-64-64-1 (target 1e-4 on the outputs, reference at
  rtol 1e-8; ``--mlp-ref-cache`` keeps it).

Evaluations do not depend on the machine's load, so the script may run beside other work.

Usage::

    python benchmarks/studies/study_auto_pair.py [--problems small,medium,smooth]

What it showed (docs/benchmarks.md), the scan's pick with Tsit5 against RK45: small 158
evaluations against 188, smooth 2,191 against 2,253, medium 2,607 against 2,429 (Tsit5
misses the target at rtol 3e-3, where RK45 reaches it); so RK45 stays ``auto``'s pair.
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import linearnets as ln  # noqa: E402
from linearnets.sim.methods import driver  # noqa: E402

PAIRS = ("RK45", "Tsit5")
_AUTO_PAIR = driver.auto_pair


def with_pair(pair):
    """``driver.auto_pair`` with ``pair`` where it would return RK45."""
    def auto_pair(rtol, smooth=True):
        chosen = _AUTO_PAIR(rtol, smooth)
        return pair if chosen == "RK45" else chosen
    driver.auto_pair = auto_pair


def scan_pick(rows, target):
    """bench_flow's rule on ``rows`` of (rtol, nfev, err), loosest first: the first that
    reaches ``target`` with the next tighter reaching it too (None: none)."""
    for i, (rtol, nfev, err) in enumerate(rows):
        if err <= target and (i + 1 == len(rows) or rows[i + 1][2] <= target):
            return rtol, nfev
    return None


def flow_problem(name):
    import bench_flow as bf
    ws, X, Y, tmax = bf.make(name)
    t_end, Wref, _ = bf.reference(ws, X, Y, tmax, "numba")
    rtols = (1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5)

    def run(rtol):
        tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * bf.ATOL_RATIO,
                              backend="numba")
        return tr.nfev, bf.rel_err(tr.end_to_end[-1], Wref)
    return run, rtols, bf.TARGET


def mlp_problem(name, cache):
    import bench_mlp as bm
    pb = bm.make(name, quick=False)
    Fref = bm.reference(pb, 1e-8, 1e-6, cache)[0]

    def run(rtol):
        tr = bm.package_run(pb, rtol, "numba", 10 ** 6)[1]
        return tr.nfev, bm.err_of(tr.outputs[-1], Fref)
    return run, bm.RTOLS[:6], bm.TARGET


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="small,medium,smooth")
    ap.add_argument("--mlp-ref-cache", default=None)
    a = ap.parse_args(argv)
    for name in a.problems.split(","):
        run, rtols, target = (mlp_problem(name, a.mlp_ref_cache) if name == "smooth"
                              else flow_problem(name))
        picks = {}
        for pair in PAIRS:
            with_pair(pair)
            rows = []
            for rtol in rtols:
                nfev, err = run(rtol)
                rows.append((rtol, nfev, err))
                print(f"{name:7s} auto with {pair:6s} rtol {rtol:7.0e}  {nfev:7d} evaluations"
                      f"  error {err:.2e}{'' if err <= target else '  (misses)'}", flush=True)
            picks[pair] = scan_pick(rows, target)
        summary = ", ".join(f"{p}: " + (f"{v[1]} evaluations at rtol {v[0]:.0e}" if v else
                                        "never") for p, v in picks.items())
        print(f"{name}: the scan's pick (target {target:g}): {summary}\n", flush=True)
    driver.auto_pair = _AUTO_PAIR


if __name__ == "__main__":
    main()
