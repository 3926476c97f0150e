"""The cost of an experiment's ``--full`` grid on this machine, measured on a sample of its
points at each width and projected to the whole grid, locally and on a Dask cluster.

For each value of the width axis (``--axis``) it runs ``--per-width`` points of the full
grid, spread evenly over the other axes, each in a fresh process after the spec's warm-up
(compiled kernels loaded, untimed), and times the point function alone; a point that runs
past ``--budget`` seconds is stopped and counted as over it.  The projection is the mean
time at each width times the number of grid points there; a width whose sampled points all
ran over the budget is extrapolated from the two widest measured ones by a power law in the
width (marked so).  On N workers the projection is ``max(total / N, the longest point)``:
points are independent and the sweep engine spreads them over workers.

Usage::

    python benchmarks/studies/study_full_cost.py experiments/zhou_three_layer/spec.toml
        [--axis m] [--per-width 3] [--budget 600] [--workers 8,32,128]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from linearnets.sweep.spec import load_spec

CHILD = r"""
import json, sys, time
sys.path.insert(0, {folder!r})
from linearnets.sweep.spec import load_spec, resolve_function
spec = load_spec({path!r}, full=True)
if spec.warmup:
    resolve_function(spec.warmup)()
fn = resolve_function(spec.function)
t0 = time.perf_counter()
fn(**json.loads({params!r}))
print("SECONDS", time.perf_counter() - t0)
"""


def time_point(path, params, budget):
    code = CHILD.format(folder=os.path.dirname(os.path.abspath(path)), path=path,
                        params=json.dumps(params))
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=budget + 120)       # (the warm-up is not in the budget)
    except subprocess.TimeoutExpired:
        return np.inf
    for line in out.stdout.splitlines():
        if line.startswith("SECONDS"):
            sec = float(line.split()[1])
            return sec if sec <= budget else np.inf
    raise RuntimeError(f"point {params} failed:\n{out.stderr[-2000:]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--axis", default="m")
    ap.add_argument("--per-width", type=int, default=3)
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--workers", default="8,32,128")
    ap.add_argument("--widths", default="", help="only these widths (comma-separated)")
    args = ap.parse_args(argv)
    spec = load_spec(args.spec, full=True)
    points = [p for _, p in spec.points()]
    widths = sorted({p[args.axis] for p in points})
    if args.widths:
        widths = [w for w in widths if str(w) in args.widths.split(",")]
    print(f"{spec.name} --full: {len(points)} points; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores", flush=True)
    print(f"| {args.axis} | grid points | sampled | seconds per point (each) | mean |")
    print("|---|---|---|---|---|")
    means, longest = {}, 0.0
    for w in widths:
        group = [p for p in points if p[args.axis] == w]
        pick = [group[i] for i in np.unique(np.linspace(0, len(group) - 1, args.per_width)
                                            .round().astype(int))]
        secs = [time_point(args.spec, p, args.budget) for p in pick]
        done = [s for s in secs if np.isfinite(s)]
        means[w] = (np.mean(done) if len(done) == len(secs) else np.inf, len(group))
        longest = max([longest] + done)
        each = ", ".join("> budget" if not np.isfinite(s) else f"{s:.2f}" for s in secs)
        print(f"| {w} | {len(group)} | {len(pick)} | {each} | {means[w][0]:.2f} |", flush=True)
    measured = [w for w in widths if np.isfinite(means[w][0])]
    total, notes = 0.0, []
    for w in widths:
        mean, n = means[w]
        if not np.isfinite(mean):
            if len(measured) < 2:
                notes.append(f"{args.axis}={w}: over budget, not projected")
                continue
            a, b = measured[-2], measured[-1]
            k = np.log(means[b][0] / means[a][0]) / np.log(b / a)
            mean = means[b][0] * (w / b) ** k
            longest = max(longest, mean)
            notes.append(f"{args.axis}={w}: extrapolated as width^{k:.2f} from {a}, {b}: "
                         f"{mean:.0f} s a point")
        total += mean * n
    print(f"\nprojected total: {total / 3600:.2f} CPU-hours on one worker of this machine "
          f"({total / 3600 / 2:.2f} h on its 2 cores)")
    for n in map(int, args.workers.split(",")):
        print(f"  on {n} Dask workers: {max(total / n, longest) / 3600:.2f} h "
              f"(python -m linearnets sweep run {args.spec} --full --scheduler tcp://HOST:8786)")
    for line in notes:
        print("  " + line)


if __name__ == "__main__":
    main()
