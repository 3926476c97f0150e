"""Sweep throughput: points per second for serial calls, the prepared path, the ensemble, the local pool and Dask.

A 1,000-point sweep (``--points``) of a small network: a 10-16-1 linear network
(P = 40 whitened samples, a scalar teacher, sigma = 0.01) trained by
``gradient_flow`` over 20 output times up to convergence, one initialisation seed
per point; and the same with ``activation="relu"`` when the simulator has it.
Rows, all measured in this run on this machine:

- ``serial calls``: ``point(seed)`` in a Python loop (the baseline);
- ``prepared``: one ``prepare_flow`` for all points, ``.run(weights0)`` per point;
- ``engine, in process``: ``ln.sweep(..., jobs=0)`` (store and dispatch, no workers);
- ``local pool (2)``: ``ln.sweep(..., jobs=2)``; wall time with the pool's start-up,
  and the rate once started (start-up measured on a 2-point sweep, subtracted);
- ``LocalCluster (2)``: a loopback 2-worker Dask cluster (processes, 1 thread each),
  the cluster's start excluded;
- ``ensemble path``: the same points through ``gradient_flow_ensemble``, ``B_ENS`` = 16
  initialisations per call, in this process (for the linear network its default:
  members one after another through ``prepare_flow``'s compiled loops).

Then the engine's own cost per point with a trivial function, in process: the
store's commit (SQLite WAL, synchronous=FULL, one transaction per point: an
fsync of the WAL each) timed alone, and the rest (keys, dispatch, bookkeeping).
``--profile`` prints the fixed cost of one ``gradient_flow`` call broken down
by stage. Targets (issue 26): pool >= 1.7x serial on 2 cores; overhead <= 5 ms
per point.

Run: ``python benchmarks/bench_sweep.py [--points 1000] [--no-dask] [--profile]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from problems import LINEAR_SIGMA, LINEAR_T, RELU_SIGMA, RELU_T, SWEEP_SIZES as SIZES, sweep_data  # noqa: E402


def trivial(**params):
    """Returns ``{"ok": 1.0}`` at once: measures the engine's own cost per point."""
    return {"ok": 1.0}


def linear_point(seed, sigma=LINEAR_SIGMA):
    """One point: train the 10-16-1 linear network from init ``seed``; loss at the end, steps."""
    import linearnets as ln
    X, y = sweep_data()
    w0 = ln.init_network(SIZES, sigma, seed=seed)
    tr = ln.gradient_flow(w0, X, y, LINEAR_T, rtol=1e-6, atol=1e-9)
    return {"loss": float(tr.loss[-1]), "nsteps": float(tr.nsteps)}


def relu_point(seed, sigma=RELU_SIGMA):
    """The same point for a ReLU network (raw-sample path of the simulator)."""
    import linearnets as ln
    X, y = sweep_data()
    w0 = ln.init_network(SIZES, sigma, seed=seed)
    tr = ln.gradient_flow(w0, X, y, RELU_T, rtol=1e-6, atol=1e-9, activation="relu")
    return {"loss": float(tr.loss[-1]), "nsteps": float(tr.nsteps)}


#: Members per ``gradient_flow_ensemble`` call on the ensemble path.
B_ENS = 16


def ensemble_points(seeds, relu=False):
    """The points of ``seeds`` through ``gradient_flow_ensemble``, B_ENS initialisations per
    call (in this process): the ensemble path's equivalent of ``linear_point`` / ``relu_point``."""
    import linearnets as ln
    X, y = sweep_data()
    seeds = list(seeds)
    out = []
    for i in range(0, len(seeds), B_ENS):
        chunk = seeds[i:i + B_ENS]
        if relu:
            nets = [ln.init_network(SIZES, RELU_SIGMA, seed=s) for s in chunk]
            ens = ln.gradient_flow_ensemble(nets, X, y, RELU_T, rtol=1e-6,
                                            atol=1e-9, activation="relu")
        else:
            nets = [ln.init_network(SIZES, LINEAR_SIGMA, seed=s) for s in chunk]
            ens = ln.gradient_flow_ensemble(nets, X, y, LINEAR_T, rtol=1e-6, atol=1e-9)
        out += [{"loss": float(ens.loss[b, -1]), "nsteps": float(ens.nsteps[b])}
                for b in range(len(chunk))]
    return out


_PREPARED = {}


def prepared_point(seed, sigma=LINEAR_SIGMA):
    """``linear_point`` through one PreparedFlow per process."""
    import linearnets as ln
    pf = _PREPARED.get("linear")
    if pf is None:
        X, y = sweep_data()
        pf = _PREPARED["linear"] = ln.prepare_flow(X, y, SIZES, LINEAR_T, rtol=1e-6, atol=1e-9)
    tr = pf.run(ln.init_network(SIZES, sigma, seed=seed))
    return {"loss": float(tr.loss[-1]), "nsteps": float(tr.nsteps)}


def _timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def _sweep_rate(fn, n, tmp, tag, **kw):
    import linearnets as ln
    store = os.path.join(tmp, f"{tag}.sqlite")
    dt, df = _timed(lambda: ln.sweep(fn, {"seed": range(n)}, store=store, progress=False, **kw))
    bad = int((df["status"] != "done").sum())
    if bad:
        print(f"  note: {bad} points of {tag} failed: {df['error'][df['status'] != 'done'].iloc[0]}")
    return dt


def engine_overhead(tmp, n=500):
    """Per-point cost of the engine in process with a trivial function; the commit timed alone."""
    import json
    import linearnets as ln
    from linearnets.sweep.store import Store
    dt = _timed(lambda: ln.sweep("bench_sweep:trivial", {"x": range(n)},
                                 store=os.path.join(tmp, "trivial.sqlite"), jobs=0, progress=False))[0]
    with Store(os.path.join(tmp, "commits.sqlite")) as st:
        t = time.perf_counter()
        for i in range(n):
            st.put(f"k{i}", "f", "1", json.dumps({"x": i}), "done", result={"ok": 1.0}, provenance={"pid": 1})
        commit = (time.perf_counter() - t) / n
    return dt / n, commit


def profile_fixed_cost(n=2000, method=None):
    """Fixed cost of a one-step 10-16-1 gradient_flow call (warm), by stage (cProfile, cumulative)."""
    import cProfile
    import pstats
    import linearnets as ln
    X, y = sweep_data()
    w0 = ln.init_network(SIZES, 0.1, seed=1)
    t1 = np.array([1e-3])
    kw = {} if method is None else {"method": method}
    for _ in range(20):
        ln.gradient_flow(w0, X, y, t1, **kw)
    gf = _timed(lambda: [ln.gradient_flow(w0, X, y, t1, **kw) for _ in range(n)])[0] / n
    pf = ln.prepare_flow(X, y, SIZES, t1, **kw)
    pr = _timed(lambda: [pf.run(w0) for _ in range(n)])[0] / n
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        ln.gradient_flow(w0, X, y, t1, **kw)
    prof.disable()
    st = pstats.Stats(prof)
    total = sum(v[3] for k, v in st.stats.items() if k[2] == "gradient_flow")
    # every function called directly by gradient_flow, by the time spent under it
    direct = []
    for k, v in st.stats.items():
        t = sum(c[3] for ck, c in v[4].items() if ck[2] == "gradient_flow")
        if t > 0:
            direct.append((t, f"{os.path.basename(k[0])}:{k[2]}"))
    direct.sort(reverse=True)
    own = total - sum(t for t, _ in direct)
    print(f"\nfixed cost of a one-step 10-16-1 run (warm, default backend, method "
          f"{method or 'default'}): gradient_flow {gf * 1e6:.0f} us, "
          f"prepared.run {pr * 1e6:.0f} us ({gf / pr:.2f}x)")
    print(f"breakdown under cProfile (total {total / n * 1e6:.0f} us/call, profiler overhead included): "
          "the calls gradient_flow makes, cumulative")
    for t, name in direct[:12]:
        print(f"  {name:46s} {t / n * 1e6:7.0f} us  ({100 * t / total:4.1f}%)")
    print(f"  {'(gradient_flow itself)':46s} {own / n * 1e6:7.0f} us  ({100 * own / total:4.1f}%)")


def _row(rows, label, path, dt, ratio, n):
    rows.append((label, path, dt, ratio, n))
    if dt is None:
        print(f"{label:16s} {path:32s} {n:6d} {'-':>8s} {'-':>9s} {'-':>9s}   (not in this script)", flush=True)
    else:
        print(f"{label:16s} {path:32s} {n:6d} {dt:8.2f} {n / dt:9.1f} {ratio:8.2f}x", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--relu-points", type=int, default=10,
                    help="points of the ReLU sweeps (each is ~100x a linear point)")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also print the fixed-cost breakdown")
    args = ap.parse_args(argv)
    n = args.points
    import linearnets as ln  # noqa: F401
    from linearnets.sim.prepared import warm
    warm()
    tmp = tempfile.mkdtemp(prefix="bench_sweep_")
    rows = []
    try:
        nets = [("linear 10-16-1", "bench_sweep:linear_point", linear_point, "bench_sweep:prepared_point", n)]
        try:
            relu_point(0)
            nets.append(("ReLU 10-16-1", "bench_sweep:relu_point", relu_point, None, min(n, args.relu_points)))
        except (TypeError, ValueError) as exc:
            print(f"note: ReLU row skipped, gradient_flow(activation='relu') is not available here ({exc})")
        start = _sweep_rate("bench_sweep:trivial", 2, tmp, "startup", jobs=2)
        cluster = None
        if not args.no_dask:
            try:
                from distributed import LocalCluster
                cluster = LocalCluster(host="127.0.0.1", dashboard_address=None, n_workers=2,
                                       threads_per_worker=1, processes=True, silence_logs=40)
                _sweep_rate("bench_sweep:trivial", 4, tmp, "dask-warm", scheduler=cluster.scheduler_address)
            except ImportError:
                print("note: Dask rows skipped (pip install 'linearnets[dist]')")
        print(f"{'network':16s} {'path':32s} {'points':>6s} {'wall s':>8s} {'points/s':>9s} {'vs serial':>9s}",
              flush=True)
        for label, ref, f, pref, n in nets:
            for s in range(3):
                f(s)
            serial = _timed(lambda: [f(s) for s in range(n)])[0]
            _row(rows, label, "serial calls", serial, 1.0, n)
            if pref is not None:
                prepared_point(0)
                prep = _timed(lambda: [prepared_point(s) for s in range(n)])[0]
                _row(rows, label, "prepared path", prep, serial / prep, n)
            eng = _sweep_rate(ref, n, tmp, f"{label}-jobs0", jobs=0)
            _row(rows, label, "engine, in process (jobs=0)", eng, serial / eng, n)
            pool = _sweep_rate(ref, n, tmp, f"{label}-jobs2", jobs=2)
            _row(rows, label, "local pool (2), with start-up", pool, serial / pool, n)
            _row(rows, label, "local pool (2), once started", pool - start, serial / (pool - start), n)
            if cluster is not None:
                dk = _sweep_rate(ref, n, tmp, f"{label}-dask", scheduler=cluster.scheduler_address)
                _row(rows, label, "LocalCluster (2)", dk, serial / dk, n)
            relu = label.startswith("ReLU")
            ensemble_points(range(2), relu=relu)
            ens, got = _timed(lambda: ensemble_points(range(n), relu=relu))
            want = [f(s)["loss"] for s in range(min(n, 4))]
            dev = max(abs(g["loss"] - w) for g, w in zip(got, want))
            _row(rows, label, f"ensemble path (B = {B_ENS})", ens, serial / ens, n)
            print(f"{'':16s}   (final loss vs serial calls, first points: {dev:.1e})", flush=True)
        if cluster is not None:
            cluster.close()
        per_point, commit = engine_overhead(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nsweeps over seeds, {os.cpu_count()} CPUs (pool start-up: {start:.2f} s)")
    print(f"{'network':16s} {'path':32s} {'points':>6s} {'wall s':>8s} {'points/s':>9s} {'vs serial':>9s}")
    for label, path, dt, ratio, n in rows:
        if dt is None:
            print(f"{label:16s} {path:32s} {n:6d} {'-':>8s} {'-':>9s} {'-':>9s}   (not in this script)")
        else:
            print(f"{label:16s} {path:32s} {n:6d} {dt:8.2f} {n / dt:9.1f} {ratio:8.2f}x")
    print(f"\nengine overhead per point (trivial fn, in process): {per_point * 1e3:.2f} ms "
          f"(target <= 5 ms); of which the store's commit alone: {commit * 1e3:.2f} ms "
          f"(fsync of the WAL, synchronous=FULL), the rest {max(per_point - commit, 0) * 1e3:.2f} ms")
    if args.profile:
        profile_fixed_cost()
        profile_fixed_cost(method="DOP853")


if __name__ == "__main__":
    main()
