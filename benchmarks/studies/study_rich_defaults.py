"""What ``gradient_flow``'s defaults cost on a kinked flow from the lazy to the rich end, and
what each setting of method, ``rtol`` and ``kink_rtol`` reaches on what a researcher reads.

Problem: a centred two-layer ReLU net 64-h-1 in the NTK parameterisation
(``init_parameterised(..., "ntk", sigma=1)``, ``F = alpha (f - f_0)``), on the bundled digits
(classes 3 against 8, labels -1/+1, inputs standardised), P training and P held-out points,
the mse loss, run until the loss is 1 % of its start (``stop=("relative_loss", 0.01)``),
at each ``alpha sqrt(h)`` of ``--scales``.  A *draw* (``--seeds``) is one seed of both the
network's initialisation and the split of the data into training and held-out points.
Read off each run, against a tight reference of the same draw (``--ref-rtol``,
``--ref-kink-rtol``, method DOP853; kept in ``--ref-cache``, where a tighter reference of
the same draw already there is used instead):

* ``out``: held-out outputs at the stop, ``max |F - F_ref| / max |F_ref|``;
* ``drift``: the kernel drift ``|K_T - K_0|_F / |K_0|_F`` of the empirical NTK on the
  held-out points, its relative error;
* ``stop``: the stop time, its relative error;

with the evaluations, the steps of the low-order pair at kinks (``kink steps``, a share of
all accepted steps) and the wall time (median of ``--rounds`` runs after a warm-up;
``--rounds 0``: one run, timed as it comes).
A setting *reaches* the target at a scale where all three errors are ``<= --target`` (1e-3)
on every draw; the *robust fastest* is the setting that reaches it with the fewest
evaluations summed over the draws (a setting that reaches it on one draw only does not
count: one lucky path would set the target).  Per scale the table gives each setting's
evaluations (summed over the draws), the draws it reaches, its largest error over the draws
and its evaluations and time over the robust fastest's; a summary then gives each rule of
:data:`RULES` (a setting per scale) against the robust fastest.

Usage::

    python benchmarks/studies/study_rich_defaults.py [--scales 0.1,1,10,100,1000] [--h 200]
        [--P 100] [--seeds 0,1,2] [--ref-cache DIR] [--rounds 1] [--refs-only]
        [--kinks 1e-2,...] [--backend numpy] [--save FILE] [--load FILE,...]

``--backend numpy`` runs the settings on the numpy loop, whose arithmetic differs from the
compiled loop's (the references stay those of the default backend): whether a setting
reaches the target at a scale can change with it.

``--save`` appends each run's figures to a file (one JSON line a run), ``--load`` prints
the tables from such files without running (the last line of each scale, draw and
setting), so that draws run in separate processes make one table.  Measured figures and
the reading: docs/methods.md, "What ``kink_rtol`` trades on a ReLU flow".
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

import numpy as np

import linearnets as ln

KINKS = (1e-2, 3e-3, 1e-3, 5e-4, 3e-4)

#: (label, keywords) of the settings run beside the default.  ``"auto"`` on a ReLU net is
#: DOP853 at rtol < 1e-6 and SSPRK104 at rtol >= 1e-6 (docs/methods.md).
def settings_of(kinks):
    """The default and each method and rtol of the grid at each ``kink_rtol`` of ``kinks``."""
    return [("default", {})] + [
        (f"{m} rtol {r:g} kink {k:g}", dict(method=m, rtol=r, kink_rtol=k))
        for m, rtols in (("auto", (1e-8, 1e-6, 1e-4)), ("DOP853", (1e-6, 1e-4)),
                         ("SSPRK104", (1e-8,)))
        for r in rtols for k in kinks]


SETTINGS = settings_of(KINKS)

#: Candidate default rules: name -> function of alpha sqrt(h) giving a label of SETTINGS.
#: The rule on alpha sqrt(h) is an oracle (the front end does not know the regime); the
#: last stands for a rule on the share of steps at kinks measured during the run (tight
#: where kink steps are rare, looser where the flow slides along many): here it is read
#: off the measured share of the kink_rtol 1e-3 run (``share``), not decided online.
RULES = {
    "the default: kink_rtol 3e-4 for 300 kink steps, then 1e-3": lambda s, share: "default",
    "kink_rtol 1e-3": lambda s, share: "auto rtol 1e-08 kink 0.001",
    "kink_rtol 5e-4": lambda s, share: "auto rtol 1e-08 kink 0.0005",
    "kink_rtol 3e-4": lambda s, share: "auto rtol 1e-08 kink 0.0003",
    "SSPRK104 (auto at rtol 1e-6), kink_rtol 5e-4":
        lambda s, share: "auto rtol 1e-06 kink 0.0005",
    "SSPRK104 (auto at rtol 1e-6), kink_rtol 3e-4":
        lambda s, share: "auto rtol 1e-06 kink 0.0003",
    "by alpha sqrt(h): 3e-4 at >= 100, 1e-3 below":
        lambda s, share: "auto rtol 1e-08 kink " + ("0.0003" if s >= 100 else "0.001"),
    "by share of kink steps: 3e-4 below 10 %, 1e-3 above":
        lambda s, share: "auto rtol 1e-08 kink " + ("0.0003" if share < 0.1 else "0.001"),
}


def problem(scale, h, P, seed=0):
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    X, y = X[keep], np.where(y[keep] == 3, -1.0, 1.0)
    X = (X - X.mean(0)) / (X.std(0) + 1e-12)
    X = X / np.sqrt((X ** 2).sum(1).mean())        # |x|^2 = 1 on average
    idx = np.random.default_rng(seed).permutation(len(y))
    tr, te = idx[:P], idx[P:2 * P]
    p = ln.init_parameterised((64, h, 1), "ntk", 1.0, seed=seed)
    kw = p.flow_kwargs(activation="relu", alpha=scale / np.sqrt(h), centered=True)
    return p, X[tr], y[tr], X[te], kw


def readout(p, traj, Xte, kw):
    ws = list(traj.weights)
    F = ln.forward(ws, Xte, activation="relu", multipliers=kw.get("multipliers"),
                   alpha=kw["alpha"], centered=True, weights0=p.weights)
    nk = dict(activation="relu", multipliers=kw.get("multipliers"), alpha=kw["alpha"])
    K0 = ln.empirical_ntk(p.weights, Xte, Xte, **nk)
    K = ln.empirical_ntk(ws, Xte, Xte, **nk)
    return F, float(ln.kernel_drift(K0, K)), traj.t_stop


def run(p, X, y, kw, settings, t_max, backend="auto"):
    t0 = time.perf_counter()
    traj = ln.gradient_flow(p.weights, X, y, [t_max], stop=("relative_loss", 0.01),
                            max_steps=10 ** 7, backend=backend, **kw, **settings)
    return traj, time.perf_counter() - t0


def _key(scale, h, P, rtol, kink, seed):
    # seed 0 keeps the key of the references cached before draws existed
    key = f"{scale}-{h}-{P}-{rtol}-{kink}" + (f"-s{seed}" if seed else "")
    return f"rich_{hashlib.sha1(key.encode()).hexdigest()[:16]}.npz"


def reference(p, X, y, Xte, kw, t_max, ref, cache, scale, h, P, seed):
    """The reference of one draw: a cached one at ``ref`` or tighter, else computed."""
    path = None
    if cache:
        os.makedirs(cache, exist_ok=True)
        path = os.path.join(cache, _key(scale, h, P, *ref, seed))
        tighter = [os.path.join(cache, _key(scale, h, P, r, k, seed))
                   for r in (1e-9, 1e-10) for k in (1e-5, 3e-6, 1e-6)
                   if r <= ref[0] and k <= ref[1]]
        for f in tighter + [path]:
            if os.path.exists(f):
                z = np.load(f)
                return (z["F"], float(z["drift"]), float(z["t_stop"]), int(z["nfev"]),
                        float(z["sec"]))
    traj, sec = run(p, X, y, kw, dict(method="DOP853", rtol=ref[0], kink_rtol=ref[1]), t_max)
    F, drift, t_stop = readout(p, traj, Xte, kw)
    if path:
        np.savez(path, F=F, drift=drift, t_stop=t_stop, nfev=traj.nfev, sec=sec)
    return F, drift, t_stop, traj.nfev, sec


def measure(scale, seeds, settings, args):
    """Per setting label: a list over draws of (nfev, sec, errs, kink share)."""
    out = {label: [] for label, _ in settings}
    for seed in seeds:
        p, X, y, Xte, kw = problem(scale, args.h, args.P, seed)
        t_max = 1e6 * max(1.0, 1.0 / scale ** 2)
        F_ref, d_ref, s_ref, n_ref, sec_ref = reference(
            p, X, y, Xte, kw, t_max, (args.ref_rtol, args.ref_kink_rtol), args.ref_cache,
            scale, args.h, args.P, seed)
        print(f"alpha sqrt(h) = {scale:g}, draw {seed}: reference nfev {n_ref}, "
              f"{sec_ref:.1f} s, drift {d_ref:.4g}, stop time {s_ref:.5g}", flush=True)
        if args.refs_only:
            continue
        for label, st in settings:
            traj, sec = run(p, X, y, kw, st, t_max, args.backend)   # compile or load
            secs = [sec] if args.rounds == 0 else []
            for _ in range(args.rounds):
                traj, sec = run(p, X, y, kw, st, t_max, args.backend)
                secs.append(sec)
            F, drift, t_stop = readout(p, traj, Xte, kw)
            errs = (float(np.max(np.abs(F - F_ref)) / np.max(np.abs(F_ref))),
                    abs(drift - d_ref) / d_ref,
                    np.inf if t_stop is None else abs(t_stop - s_ref) / s_ref)
            share = traj.fallback_steps / max(traj.nsteps, 1)
            out[label].append((traj.nfev, float(np.median(secs)), errs, share))
            if args.save:
                with open(args.save, "a") as f:
                    f.write(json.dumps(dict(scale=scale, seed=seed, label=label,
                                            backend=args.backend,
                                            nfev=traj.nfev, sec=float(np.median(secs)),
                                            errs=errs, share=share, kinks=traj.kinks,
                                            nsteps=traj.nsteps,
                                            fallback_steps=traj.fallback_steps,
                                            sliding=traj.sliding_time / traj.t_last))
                        + "\n")
            if args.verbose:
                print(f"  {label}: {traj.nfev} evaluations, errors "
                      f"{' '.join(f'{e:.1e}' for e in errs)}", flush=True)
    return out


def load(files, scale, seeds):
    """The results of ``--save`` runs (the last line of each scale, draw and setting)."""
    last = {}
    for path in files.split(","):
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r["scale"] == scale and r["seed"] in seeds:
                    last[r["label"], r["seed"]] = (r["nfev"], r["sec"], tuple(r["errs"]),
                                                   r["share"])
    out = {}
    for (label, _seed), v in sorted(last.items(), key=lambda kv: kv[0][1]):
        out.setdefault(label, []).append(v)
    return out


def table(scale, res, target):
    """Print the table of one scale; return the robust fastest's label and the rows."""
    rows = {}
    for label, draws in res.items():
        if not draws:
            continue
        nfev = sum(d[0] for d in draws)
        sec = sum(d[1] for d in draws)
        worst = max(max(d[2]) for d in draws)
        reached = sum(max(d[2]) <= target for d in draws)
        share = float(np.mean([d[3] for d in draws]))
        # the same without the drift (its O(1/h) floor: docs/methods.md)
        worst2 = max(max(d[2][0], d[2][2]) for d in draws)
        reached2 = sum(max(d[2][0], d[2][2]) <= target for d in draws)
        rows[label] = (nfev, sec, worst, reached, len(draws), share, worst2, reached2)
    n_draws = max(r[4] for r in rows.values())

    def fastest(i):
        robust = [lab for lab, r in rows.items() if r[i] == r[4] == n_draws > 1]
        return min(robust, key=lambda lab: rows[lab][0]) if robust else None
    best, best2 = fastest(3), fastest(7)
    bn, bs = (rows[best][0], rows[best][1]) if best else (np.nan, np.nan)
    print(f"\nalpha sqrt(h) = {scale:g}, {n_draws} draws: robust fastest {best} ({bn} "
          f"evaluations over the draws); on out and stop alone {best2} "
          f"({rows[best2][0] if best2 else np.nan})")
    print("| setting | evaluations | kink steps | largest error | draws reached | "
          "/ fastest (evaluations) | / fastest (time) | out, stop alone: largest, reached |")
    print("|---|---|---|---|---|---|---|---|")
    for label, r in sorted(rows.items(), key=lambda kv: kv[1][0]):
        nfev, sec, worst, reached, n, share, worst2, reached2 = r
        print(f"| {label} | {nfev} | {share:.0%} | {worst:.1e} | {reached}/{n} | "
              f"{nfev / bn:.2f} | {sec / bs:.2f} | {worst2:.1e}, {reached2}/{n} |", flush=True)
    return best, best2, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="0.1,1,10,100,1000")
    ap.add_argument("--h", type=int, default=200)
    ap.add_argument("--P", type=int, default=100)
    ap.add_argument("--seeds", default="0,1,2", help="the draws (init and data split)")
    ap.add_argument("--ref-rtol", type=float, default=1e-9)
    ap.add_argument("--ref-kink-rtol", type=float, default=1e-5)
    ap.add_argument("--ref-cache", default=None)
    ap.add_argument("--refs-only", action="store_true", help="compute the references only")
    ap.add_argument("--rounds", type=int, default=1,
                    help="timed runs after a warm-up (0: the one run, its time as it comes)")
    ap.add_argument("--target", type=float, default=1e-3)
    ap.add_argument("--only", default="", help="only settings whose label contains this")
    ap.add_argument("--kinks", default=",".join(f"{k:g}" for k in KINKS),
                    help="the kink_rtol values of the grid")
    ap.add_argument("--backend", default="auto",
                    help="the runs' backend (the references keep theirs: numpy runs the "
                         "same settings in other arithmetic)")
    ap.add_argument("--no-default", action="store_true", help="leave the default row out")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--save", default=None, help="append each run's figures to this file")
    ap.add_argument("--load", default=None,
                    help="tables from --save files (comma-separated) instead of running")
    args = ap.parse_args(argv)
    settings = [s for s in settings_of([float(k) for k in args.kinks.split(",")])
                if (args.only in s[0] and s[0] != "default")
                or (s[0] == "default" and not args.no_default)]
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"load average {os.getloadavg()[0]:.2f}; backend {args.backend}; h {args.h}, "
          f"P {args.P}, draws {seeds}; "
          f"reference DOP853 rtol {args.ref_rtol:g} kink_rtol {args.ref_kink_rtol:g} "
          f"(or tighter, cached)", flush=True)
    summary = []
    for scale in map(float, args.scales.split(",")):
        res = load(args.load, scale, seeds) if args.load else measure(scale, seeds, settings,
                                                                       args)
        if args.refs_only:
            continue
        best, best2, rows = table(scale, res, args.target)
        summary.append((scale, best, best2, rows))
    if not summary:
        return
    print("\nEach rule: its evaluations over the robust fastest's (where the drift's floor "
          "leaves none, against the fastest on out and stop alone, marked *), and the draws "
          "on which it reaches the target")
    print("\n| rule | " + " | ".join(f"alpha sqrt(h) = {s[0]:g}" for s in summary) + " |")
    print("|---|" + "---|" * len(summary))
    for name, rule in RULES.items():
        cells = []
        for scale, best, best2, rows in summary:
            share = rows.get("auto rtol 1e-08 kink 0.001", (0,) * 8)[5]
            r = rows.get(rule(scale, share))
            ref, mark = (best, "") if best else (best2, "*")
            if r is None or ref is None:
                cells.append("n/a")
                continue
            ok = (f"{r[3]}/{r[4]}" + (f" ({r[2]:.1e})" if r[3] < r[4] else "")
                  + (f"; out, stop {r[7]}/{r[4]}" if mark else ""))
            cells.append(f"{r[0] / rows[ref][0]:.2f}x{mark}, {ok}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
