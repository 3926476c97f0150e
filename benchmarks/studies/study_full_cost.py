"""The cost of an experiment's ``--full`` grid on this machine, measured on a sample of its
points and projected to the whole grid, locally and on a Dask cluster.

Each timed point runs in a fresh process with one BLAS / OpenMP / numba thread (as a sweep
worker runs), after the spec's warm-up and, with ``--warm``, one untimed call of the same
point with those parameters overridden (so that the compiled kernels are loaded); the point
function alone is timed, by the process's CPU time (``--clock cpu``, the default: what the
point takes from one worker, whatever else the machine runs) or its wall time. The load
average is printed beside each figure. A point that runs past ``--budget`` seconds is
stopped (a CPU-time limit in the child) and recorded as over it.

Two ways to sample:

* Without ``--alphas-axis``: ``--per-width`` points of each width (``--axis``), spread evenly
  over the other axes; the projection is the mean at each width times its number of points.
* With ``--alphas-axis NAME``: at each width, ``--per-alpha`` values of that axis (its two
  ends, its middle and evenly spaced ones between; the first value of every other axis), at
  the full size and at the smaller sizes ``--sizes PARAM=v1,v2`` (a fixed parameter of the
  spec, e.g. ``n_train=200,400``); ``--alpha-values v1,v2`` times the grid's values nearest
  to those instead (e.g. more where the cost turns). The cost at each sampled (width, alpha)
  is

  1. the time at full size, where it was timed;
  2. otherwise extrapolated in the size parameter from the largest size ``s`` timed there, as
     ``size^k``: ``k`` is the slope of log time over log size over the same interval, ``s``
     to the full size, at the nearest width where both were timed at that alpha (a cost made
     of parts that grow at different powers of the size steepens or flattens with it, so the
     slope below ``s`` can mislead); without such a width, the slope between the two largest
     sizes timed at that (width, alpha); with one size timed there, the mean of those slopes
     at that alpha over the other widths;
  3. otherwise extrapolated in the width from the two widest widths with a figure at that
     alpha, as ``width^k``;

  and no less than the budget where the point ran past it (at a smaller size: the budget
  extrapolated as in 2). Between the sampled
  values the cost is interpolated piecewise linearly in log time over log alpha (constant
  beyond the sampled ends), and summed over every point of the grid. Every figure that is
  not a full-size timing is printed as extrapolated, with its exponent and its points, and
  the rule is checked on the full-size timings: each left out in turn and extrapolated from
  the others; the interpolation is checked likewise, each inner sampled value left out and
  interpolated from its neighbours.

On N workers the projection is ``max(total / N, the longest point)``: points are independent
and the sweep engine spreads them over workers. ``--record FILE`` keeps the timings (a JSON
list, appended to; a point already there is not timed again unless it ran past a smaller
budget than this run's), and ``--project-only`` prints the projection from the record
without timing anything. ``--skip-predicted`` does not time a point whose cost, projected
from the timings so far, exceeds the budget (the sizes and widths are timed cheapest first).

Usage::

    python benchmarks/studies/study_full_cost.py experiments/zhou_three_layer/spec.toml
        [--axis m] [--per-width 3] [--budget 600] [--workers 8,32,128]
    nice -n 5 python benchmarks/studies/study_full_cost.py \\
        experiments/geiger_feature_lazy/spec.toml --axis h --alphas-axis alpha_sqrt_h \\
        --per-alpha 5 --sizes n_train=200,400 --warm n_train=20,n_test=20 --budget 300 \\
        --skip-predicted --record experiments/geiger_feature_lazy/full_cost.json
    python benchmarks/studies/study_full_cost.py experiments/geiger_feature_lazy/spec.toml \\
        --axis h --alphas-axis alpha_sqrt_h --sizes n_train=200,400 \\
        --record experiments/geiger_feature_lazy/full_cost.json --project-only
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys

import numpy as np

from linearnets.sweep._worker import THREAD_VARS   # what a sweep worker pins to one thread
from linearnets.sweep.spec import load_spec

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, {folder!r})
from linearnets.sweep.spec import load_spec, resolve_function
spec = load_spec({path!r}, full=True)
if spec.warmup:
    resolve_function(spec.warmup)()
fn = resolve_function(spec.function)
params = json.loads({params!r})
warm = json.loads({warm!r})
if warm:
    fn(**dict(params, **warm))
used = time.process_time()
resource.setrlimit(resource.RLIMIT_CPU, (int(used + {budget!r}) + 2, resource.RLIM_INFINITY))
load0 = os.getloadavg()[0]
c0, t0 = time.process_time(), time.perf_counter()
fn(**params)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print("RESULT " + json.dumps(dict(wall=wall, cpu=cpu, load=(load0 + os.getloadavg()[0]) / 2)))
"""


def time_point(path, params, budget, warm=None, clock="cpu"):
    """``dict(wall, cpu, load, seconds)`` of one point in a fresh process; ``seconds`` (the
    chosen clock) is ``inf`` where the point ran past ``budget`` seconds of it."""
    code = CHILD.format(folder=os.path.dirname(os.path.abspath(path)), path=path,
                        params=json.dumps(params), warm=json.dumps(warm or {}), budget=budget)
    env = dict(os.environ, LINEARNETS_JIT="eager", **{v: "1" for v in THREAD_VARS})
    load = os.getloadavg()[0]
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, timeout=4 * budget + 300)   # (a wall-clock safety net)
    except subprocess.TimeoutExpired:
        return dict(wall=np.inf, cpu=np.inf, load=load, seconds=np.inf)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            r = json.loads(line.split(None, 1)[1])
            r["seconds"] = r[clock] if r[clock] <= budget else np.inf
            return r
    if out.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return dict(wall=np.inf, cpu=np.inf, load=load, seconds=np.inf)
    raise RuntimeError(f"point {params} failed:\n{out.stderr[-2000:]}")


def spread(n, k):
    """Indices of ``k`` of ``n`` values: both ends, the middle and evenly spaced between."""
    return [int(i) for i in np.unique(np.linspace(0, n - 1, k).round().astype(int))]


def loglog_slope(x0, y0, x1, y1):
    return float(np.log(y1 / y0) / np.log(x1 / x0))


def full_size_costs(times, widths, alphas, sizes, full, budget=None):
    """Full-size cost of each (width, alpha) from timings at several sizes and widths.

    Parameters
    ----------
    times : dict
        ``{(width, alpha, size): seconds}``; ``inf`` marks a point that ran past ``budget``.
    widths, alphas : sequences
        The widths and the sampled alpha values to give a cost for.
    sizes : sequence
        The smaller sizes (of the size parameter) that may have been timed.
    full : float
        The full size.
    budget : float or dict, optional
        The budget, or ``{(width, alpha, size): budget}`` of the points that ran past theirs:
        the cost at full size is at least that budget, times ``(full / size)^k`` where the
        figure is extrapolated in the size with exponent ``k > 0``.

    Returns
    -------
    dict
        ``{(width, alpha): (seconds, how)}``, ``how`` "timed" or a sentence saying how it was
        extrapolated (exponent and points); pairs with no way to a figure are left out.
    """
    ladder = sorted(set(sizes) | {full})
    out, exps = {}, {}

    def timed_sizes(w, a):
        return [s for s in ladder if np.isfinite(times.get((w, a, s), np.nan))]

    slopes = {}
    for w in widths:
        for a in alphas:
            got = timed_sizes(w, a)
            if len(got) >= 2:
                s0, s1 = got[-2], got[-1]
                slopes[w, a] = (loglog_slope(s0, times[w, a, s0], s1, times[w, a, s1]), s0, s1)
    for w in widths:
        for a in alphas:
            got = timed_sizes(w, a)
            if full in got:
                out[w, a] = (times[w, a, full], "timed")
                continue
            if not got:
                continue
            s1 = got[-1]
            cands = []
            if (w, a) in slopes:
                k, s0, _ = slopes[w, a]
                cands.append((k, f"its own over sizes {s0:g}..{s1:g}"))
            same = [ww for ww in widths if np.isfinite(times.get((ww, a, s1), np.nan))
                    and np.isfinite(times.get((ww, a, full), np.nan))]
            if same:
                ww = min(same, key=lambda v: abs(np.log(v / w)))
                k = loglog_slope(s1, times[ww, a, s1], full, times[ww, a, full])
                cands.append((k, f"over sizes {s1:g}..{full:g} at width {ww:g}"))
            if not cands:
                others = [(v[0], ww) for (ww, aa), v in slopes.items() if aa == a]
                if not others:
                    continue
                cands.append((float(np.mean([o[0] for o in others])),
                              "the mean over widths " + ", ".join(f"{o[1]:g}" for o in others)))
            k, src = cands[-1]
            how = f"size^{k:.2f} from size {s1:g} (the exponent {src}"
            if len(cands) > 1:
                how += f"; {cands[0][1]}: {cands[0][0]:.2f}"
            how += ")"
            out[w, a] = (times[w, a, s1] * (full / s1) ** k, "extrapolated: " + how)
            exps[w, a] = k
    for a in alphas:
        for w in widths:
            if (w, a) in out:
                continue
            known = [ww for ww in widths if (ww, a) in out and ww < w]
            if len(known) < 2:
                continue
            w0, w1 = known[-2], known[-1]
            k = loglog_slope(w0, out[w0, a][0], w1, out[w1, a][0])
            out[w, a] = (out[w1, a][0] * (w / w1) ** k,
                         f"extrapolated: width^{k:.2f} from widths {w0:g}, {w1:g}")
    if budget is not None:      # a point over its budget at some size: a lower bound
        for (w, a), (sec, how) in list(out.items()):
            for so in ladder:
                if times.get((w, a, so)) != np.inf:
                    continue
                b = budget[w, a, so] if isinstance(budget, dict) else budget
                bound = b * (full / so) ** max(exps.get((w, a), 0.0), 0.0)
                if sec < bound:
                    sec = bound
                    how += f" (floored: over {b:g} s at size {so:g}, so at least {bound:.0f} s)"
                    out[w, a] = (sec, how)
    return out


def interpolate_alpha(alphas, costs, grid):
    """Costs at ``grid``: piecewise linear in log cost over log alpha between the sampled
    ``alphas`` (increasing, positive), constant beyond their ends."""
    return np.exp(np.interp(np.log(np.asarray(grid, dtype=float)),
                            np.log(np.asarray(alphas, dtype=float)), np.log(costs)))


def grid_total(costs, points, axis, alpha_axis):
    """The sum over the grid ``points`` (dicts) of the interpolated cost, per width.

    ``costs`` is ``{(width, alpha): seconds}``; a width with fewer than one sampled alpha is
    left out of the sums and listed in the third value. Returns ``(per_width, longest,
    missing)`` with ``per_width = {width: (seconds, n_points)}``.
    """
    per_width, longest, missing = {}, 0.0, []
    for w in sorted({p[axis] for p in points}):
        a = sorted(aa for ww, aa in costs if ww == w)
        if not a:
            missing.append(w)
            continue
        c = [costs[w, aa] for aa in a]
        group = [p[alpha_axis] for p in points if p[axis] == w]
        per_width[w] = (float(np.sum(interpolate_alpha(a, c, group))), len(group))
        longest = max(longest, max(c))
    return per_width, longest, missing


def _key(v):
    return float(v)


def _load_record(path):
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return []


def _save_record(path, rec):
    if path:
        with open(path, "w") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")


def _fmt(s):
    return "> budget" if not np.isfinite(s) else f"{s:.1f}"


def _summary(total, longest, workers, spec_path):
    print(f"\nprojected total: {total / 3600:.2f} CPU-hours on one worker of this machine "
          f"({total / 3600 / 2:.2f} h on its 2 cores); the longest point {longest:.0f} s")
    for n in workers:
        print(f"  on {n} Dask workers: {max(total / n, longest) / 3600:.2f} h "
              f"(python -m linearnets sweep run {spec_path} --full --scheduler tcp://HOST:8786)")


def by_alpha(args, spec, points, widths):
    """The sampling along ``--alphas-axis`` at several sizes, and its projection."""
    size_name, sizes = args.sizes.split("=") if args.sizes else (None, "")
    sizes = [float(s) for s in sizes.split(",") if s]
    full = float(spec.fixed[size_name]) if size_name else None
    ax, aax = args.axis, args.alphas_axis
    all_alphas = sorted({p[aax] for p in points})
    alphas = [all_alphas[i] for i in spread(len(all_alphas), args.per_alpha)]
    if args.alpha_values:       # these values of the grid instead (the nearest to each given)
        alphas = sorted({min(all_alphas, key=lambda v: abs(np.log(v / float(x))))
                         for x in args.alpha_values.split(",")})
    first = {k: v for k, v in points[0].items() if k not in (ax, aax)}
    warm = {}
    for item in filter(None, args.warm.split(",")):
        k, v = item.split("=")
        warm[k] = type(spec.fixed.get(k, 0.0))(float(v)) if k in spec.fixed else float(v)
    rec = _load_record(args.record)
    ladder = sorted(set(sizes) | ({full} if full else set()))

    def times():
        t = {}
        for r in rec:
            k = (_key(r["width"]), _key(r["alpha"]), _key(r["size"]))
            t.setdefault(k, []).append(np.inf if r[args.clock] is None else r[args.clock])
        # a timing supersedes a run past a (smaller) budget
        return {k: (float(np.mean(f)) if (f := [x for x in v if np.isfinite(x)]) else np.inf)
                for k, v in t.items()}

    def over_budget(key):
        """Budgets the point at ``key`` ran past (none if it was timed)."""
        rs = [r for r in rec if (_key(r["width"]), _key(r["alpha"]), _key(r["size"])) == key]
        if any(r[args.clock] is not None for r in rs):
            return []
        return [r.get("budget", args.budget) for r in rs]

    ws = sorted({_key(p[ax]) for p in points})          # all widths, for the projection
    if not args.project_only:
        print(f"{spec.name} --full: {len(points)} points; load average {os.getloadavg()[0]:.2f} "
              f"on {os.cpu_count()} cores; timing {aax} = "
              f"{', '.join(f'{a:g}' for a in alphas)} at {size_name} = "
              f"{', '.join(f'{s:g}' for s in ladder)}", flush=True)
        for s in ladder:
            for w in widths:
                for a in alphas:
                    key = (_key(w), _key(a), s)
                    t = times()
                    if key in t and not (over_budget(key)
                                         and max(over_budget(key)) < args.budget):
                        continue            # (timed, or over a budget as large as this one)
                    if args.skip_predicted:
                        pred = full_size_costs(t, ws, [_key(a)], [x for x in ladder if x < s], s)
                        # the cost at this size, as projected to it from what is timed
                        if (key[0], key[1]) in pred and pred[key[0], key[1]][0] > args.budget:
                            print(f"  skip {ax}={w} {aax}={a:g} {size_name}={s:g}: projected "
                                  f"{pred[key[0], key[1]][0]:.0f} s", flush=True)
                            continue
                    params = dict(first, **{ax: w, aax: a})
                    if size_name:
                        params[size_name] = type(spec.fixed[size_name])(s)
                    r = time_point(args.spec, params, args.budget, warm, args.clock)
                    rec.append(dict(width=w, alpha=a, size=s,
                                    **{c: (None if not np.isfinite(r[c]) else r[c])
                                       for c in ("wall", "cpu")},
                                    load=r["load"], budget=args.budget))
                    if not np.isfinite(r["seconds"]):
                        rec[-1][args.clock] = None
                    _save_record(args.record, rec)
                    print(f"  {ax}={w} {aax}={a:g} {size_name}={s:g}: cpu {_fmt(r['cpu'])} s, "
                          f"wall {_fmt(r['wall'])} s, load {r['load']:.2f}", flush=True)
    t = times()
    print(f"\ntimed points ({args.clock} time, threads pinned to 1):\n")
    print(f"| {ax} | {aax} | {size_name} | cpu s | wall s | load |")
    print("|---|---|---|---|---|---|")
    for r in sorted(rec, key=lambda r: (r["width"], r["alpha"], r["size"])):
        over = f"> {r.get('budget', args.budget):g}"
        print(f"| {r['width']:g} | {r['alpha']:g} | {r['size']:g} | "
              f"{over if r['cpu'] is None else _fmt(r['cpu'])} | "
              f"{over if r['wall'] is None else _fmt(r['wall'])} | {r['load']:.2f} |")
    sampled = sorted({k[1] for k in t})
    bounds = {k: max(over_budget(k)) for k, v in t.items() if v == np.inf}
    costs = full_size_costs(t, ws, sampled, sizes, full if full else 1.0, bounds)
    print(f"\nfull-size cost ({size_name} = {full:g}) at each sampled point:\n")
    print(f"| {ax} | {aax} | seconds | how |")
    print("|---|---|---|---|")
    for (w, a), (sec, how) in sorted(costs.items()):
        print(f"| {w:g} | {a:g} | {sec:.0f} | {how} |")
    check = []
    for (w, a, s), sec in sorted(t.items()):
        if s == full and np.isfinite(sec):
            rest = {k: v for k, v in t.items() if k != (w, a, s)}
            got = full_size_costs(rest, ws, [a], sizes, full).get((w, a))
            if got:
                check.append(f"| {w:g} | {a:g} | {sec:.0f} | {got[0]:.0f} "
                             f"({got[0] / sec - 1:+.0%}) | {got[1]} |")
    if check:
        print("\nthe rule checked: each full-size timing left out and extrapolated from the "
              "others\n")
        print(f"| {ax} | {aax} | timed s | extrapolated s | how |")
        print("|---|---|---|---|---|")
        print("\n".join(check))
    errs = []
    for w, s in sorted({(k[0], k[2]) for k in t}):
        a = sorted(k[1] for k in t if k[0] == w and k[2] == s and np.isfinite(t[k]))
        for i in range(1, len(a) - 1):
            got = interpolate_alpha([a[i - 1], a[i + 1]], [t[w, a[i - 1], s], t[w, a[i + 1], s]],
                                    [a[i]])[0]
            errs.append((got / t[w, a[i], s] - 1, w, a[i], s))
    if errs:
        lo, hi = min(errs), max(errs)
        print(f"\nthe interpolation over {aax} checked: each inner sampled value left out and "
              f"interpolated from its two neighbours (twice the spacing) at {len(errs)} points: "
              f"{lo[0]:+.0%} ({ax}={lo[1]:g}, {aax}={lo[2]:g}, {size_name}={lo[3]:g}) to "
              f"{hi[0]:+.0%} ({ax}={hi[1]:g}, {aax}={hi[2]:g}, {size_name}={hi[3]:g})")
    pts = [{ax: _key(p[ax]), aax: _key(p[aax])} for p in points]
    per_width, longest, missing = grid_total({k: v[0] for k, v in costs.items()}, pts, ax, aax)
    print(f"\n| {ax} | grid points | projected s (interpolated over {aax}) |")
    print("|---|---|---|")
    for w, (sec, n) in per_width.items():
        print(f"| {w:g} | {n} | {sec:.0f} |")
    _summary(sum(v[0] for v in per_width.values()), longest, args.workers, args.spec)
    for w in missing:
        print(f"  {ax}={w:g}: no figure, not in the total")


def per_width(args, spec, points, widths):
    """The original sampling: ``--per-width`` points of each width, mean x count."""
    print(f"{spec.name} --full: {len(points)} points; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores", flush=True)
    print(f"| {args.axis} | grid points | sampled | seconds per point (each) | mean | load |")
    print("|---|---|---|---|---|---|")
    means, longest = {}, 0.0
    for w in widths:
        group = [p for p in points if p[args.axis] == w]
        pick = [group[i] for i in spread(len(group), args.per_width)]
        runs = [time_point(args.spec, p, args.budget, clock=args.clock) for p in pick]
        secs = [r["seconds"] for r in runs]
        done = [s for s in secs if np.isfinite(s)]
        means[w] = (np.mean(done) if len(done) == len(secs) else np.inf, len(group))
        longest = max([longest] + done)
        print(f"| {w} | {len(group)} | {len(pick)} | {', '.join(_fmt(s) for s in secs)} | "
              f"{means[w][0]:.2f} | {np.mean([r['load'] for r in runs]):.2f} |", flush=True)
    measured = [w for w in widths if np.isfinite(means[w][0])]
    total, notes = 0.0, []
    for w in widths:
        mean, n = means[w]
        if not np.isfinite(mean):
            if len(measured) < 2:
                notes.append(f"{args.axis}={w}: over budget, not projected")
                continue
            a, b = measured[-2], measured[-1]
            k = loglog_slope(a, means[a][0], b, means[b][0])
            mean = means[b][0] * (w / b) ** k
            longest = max(longest, mean)
            notes.append(f"{args.axis}={w}: extrapolated as width^{k:.2f} from {a}, {b}: "
                         f"{mean:.0f} s a point")
        total += mean * n
    _summary(total, longest, args.workers, args.spec)
    for line in notes:
        print("  " + line)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--axis", default="m", help="the width axis")
    ap.add_argument("--per-width", type=int, default=3)
    ap.add_argument("--budget", type=float, default=600.0, help="seconds a point, at most")
    ap.add_argument("--workers", default="8,32,128")
    ap.add_argument("--widths", default="", help="only these widths (comma-separated)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--alphas-axis", default="", help="the axis to resolve the cost along")
    ap.add_argument("--per-alpha", type=int, default=5)
    ap.add_argument("--alpha-values", default="", help="v1,v2,...: time these values instead")
    ap.add_argument("--sizes", default="", help="PARAM=v1,v2: smaller sizes of a fixed parameter")
    ap.add_argument("--warm", default="", help="PARAM=v,...: an untimed call so overridden first")
    ap.add_argument("--record", default="", help="a JSON file of the timings (appended to)")
    ap.add_argument("--project-only", action="store_true")
    ap.add_argument("--skip-predicted", action="store_true")
    args = ap.parse_args(argv)
    args.workers = [int(n) for n in args.workers.split(",")]
    spec = load_spec(args.spec, full=True)
    points = [p for _, p in spec.points()]
    widths = sorted({p[args.axis] for p in points})
    if args.widths:
        widths = [w for w in widths if str(w) in args.widths.split(",")]
    (by_alpha if args.alphas_axis else per_width)(args, spec, points, widths)


if __name__ == "__main__":
    main()
