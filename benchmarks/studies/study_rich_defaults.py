"""What ``gradient_flow``'s defaults cost on a kinked flow from the lazy to the rich end, and
what each setting of method, ``rtol`` and ``kink_rtol`` reaches on what a researcher reads.

Problem: a centred two-layer ReLU net 64-h-1 in the NTK parameterisation
(``init_parameterised(..., "ntk", sigma=1)``, ``F = alpha (f - f_0)``), on the bundled digits
(classes 3 against 8, labels -1/+1, inputs standardised), P training and P held-out points,
the mse loss, run until the loss is 1 % of its start (``stop=("relative_loss", 0.01)``),
at each ``alpha sqrt(h)`` of ``--scales``.  Read off each run, against a tight reference
(``--ref-rtol``, ``--ref-kink-rtol``, method DOP853; kept in ``--ref-cache``):

* ``out``: held-out outputs at the stop, ``max |F - F_ref| / max |F_ref|``;
* ``drift``: the kernel drift ``|K_T - K_0|_F / |K_0|_F`` of the empirical NTK on the
  held-out points, its relative error;
* ``stop``: the stop time, its relative error;

with the evaluations and the wall time (median of ``--rounds``).  A row reaches the target
where all three are ``<= --target`` (1e-3).  The last column is the time over the fastest
row that reaches it, in the same run.

Usage::

    python benchmarks/studies/study_rich_defaults.py [--scales 0.1,1,10,100,1000] [--h 200]
        [--P 100] [--ref-cache DIR] [--rounds 3]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import time

import numpy as np

import linearnets as ln

#: (label, keywords) of the settings timed beside the default.
SETTINGS = [("default", {})] + [
    (f"{m} rtol {r:g} kink {k:g}", dict(method=m, rtol=r, kink_rtol=k))
    for m in ("auto", "SSPRK104", "DOP853", "RK45")
    for r in (1e-4, 1e-6, 1e-8)
    for k in (1e-2, 3e-3, 1e-3, 3e-4)]


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


def run(p, X, y, kw, settings, t_max):
    t0 = time.perf_counter()
    traj = ln.gradient_flow(p.weights, X, y, [t_max], stop=("relative_loss", 0.01),
                            max_steps=10 ** 7, **kw, **settings)
    return traj, time.perf_counter() - t0


def reference(p, X, y, Xte, kw, t_max, ref, cache, key):
    path = None
    if cache:
        os.makedirs(cache, exist_ok=True)
        path = os.path.join(cache, f"rich_{hashlib.sha1(key.encode()).hexdigest()[:16]}.npz")
        if os.path.exists(path):
            z = np.load(path)
            return z["F"], float(z["drift"]), float(z["t_stop"]), int(z["nfev"]), float(z["sec"])
    traj, sec = run(p, X, y, kw, dict(method="DOP853", rtol=ref[0], kink_rtol=ref[1]), t_max)
    F, drift, t_stop = readout(p, traj, Xte, kw)
    if path:
        np.savez(path, F=F, drift=drift, t_stop=t_stop, nfev=traj.nfev, sec=sec)
    return F, drift, t_stop, traj.nfev, sec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", default="0.1,1,10,100,1000")
    ap.add_argument("--h", type=int, default=200)
    ap.add_argument("--P", type=int, default=100)
    ap.add_argument("--ref-rtol", type=float, default=1e-9)
    ap.add_argument("--ref-kink-rtol", type=float, default=1e-5)
    ap.add_argument("--ref-cache", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", type=float, default=1e-3)
    ap.add_argument("--only", default="", help="only settings whose label contains this")
    args = ap.parse_args(argv)
    settings = [s for s in SETTINGS if args.only in s[0] or s[0] == "default"]
    print(f"load average {os.getloadavg()[0]:.2f}; h {args.h}, P {args.P}; reference DOP853 "
          f"rtol {args.ref_rtol:g} kink_rtol {args.ref_kink_rtol:g}", flush=True)
    for scale in map(float, args.scales.split(",")):
        p, X, y, Xte, kw = problem(scale, args.h, args.P)
        t_max = 1e6 * max(1.0, 1.0 / scale ** 2)
        key = f"{scale}-{args.h}-{args.P}-{args.ref_rtol}-{args.ref_kink_rtol}"
        F_ref, d_ref, s_ref, n_ref, sec_ref = reference(p, X, y, Xte, kw, t_max,
                                                        (args.ref_rtol, args.ref_kink_rtol),
                                                        args.ref_cache, key)
        print(f"\nalpha sqrt(h) = {scale:g}: reference nfev {n_ref}, {sec_ref:.1f} s, drift "
              f"{d_ref:.4g}, stop time {s_ref:.5g}", flush=True)
        rows = []
        for label, st in settings:
            run(p, X, y, kw, st, t_max)                           # compile or load
            secs = []
            for _ in range(args.rounds):
                traj, sec = run(p, X, y, kw, st, t_max)
                secs.append(sec)
            F, drift, t_stop = readout(p, traj, Xte, kw)
            errs = (float(np.max(np.abs(F - F_ref)) / np.max(np.abs(F_ref))),
                    abs(drift - d_ref) / d_ref,
                    np.inf if t_stop is None else abs(t_stop - s_ref) / s_ref)
            rows.append((label, traj.nfev, float(np.median(secs)), errs))
        ok = [r for r in rows if max(r[3]) <= args.target]
        best = min(r[2] for r in ok) if ok else np.nan
        print("| setting | evaluations | time (s) | out | drift | stop | reaches | / fastest |")
        print("|---|---|---|---|---|---|---|---|")
        for label, nfev, sec, errs in rows:
            reach = "yes" if max(errs) <= args.target else "no"
            print(f"| {label} | {nfev} | {sec:.3f} | {errs[0]:.1e} | {errs[1]:.1e} | "
                  f"{errs[2]:.1e} | {reach} | {sec / best:.2f} |", flush=True)


if __name__ == "__main__":
    main()
