"""Ensemble throughput: B = 16 initialisations in one ``gradient_flow_ensemble`` call against serial calls.

Two small networks, as in ``bench_sweep.py``:

- linear 10-16-1, P = 40 whitened samples of a scalar teacher, sigma = 0.01,
  20 output times up to 400 (convergence), rtol 1e-6, atol 1e-9;
- ReLU 5-32-1 (trained hidden biases), P = 50 Gaussian inputs, y = tanh(x_1),
  sigma = 1, 10 output times up to 5, rtol 1e-6, atol 1e-9;
- ReLU 10-16-1 (no biases) on the linear network's data, sigma = 0.5, 20 output times
  up to 40 (``bench_sweep.relu_point``): members take 350 to 6,900 steps, the longest
  sliding along kinks.

ReLU rows: serial ``ln.gradient_flow(backend="numba")`` calls (the compiled MLP; the
baseline), the ensemble's batched loop (``backend="numpy"``) and its default (member by
member on the compiled MLP), interleaved over ``--relu-rounds`` rounds, the fastest kept.

Rows, all measured in this run: serial ``ln.gradient_flow`` calls (the baseline; for the
linear network also with ``method="DOP853"``, the batched loop's method), serial
``prepare_flow(...).run`` (linear only, default method and DOP853), and the ensemble
path (B = 16 members per call): for the linear network member by member through
``prepare_flow``, with its default method ``"auto"`` and with DOP853.  Ratios against serial calls in
wall time and in CPU time of this process (the machine may be shared; the linear
timings are the faster of two interleaved rounds).  Accuracy is equal by construction
(the ensemble controls each member's error as a run of it alone does, at the same
rtol); the table prints the largest difference of the final losses, relative to the
initial loss.

The floor of the linear paths: per member, the wall time spent inside the compiled
loops (every call from Python into the package's numba kernels timed) against the
whole run; the compiled work of a member is what no ensemble that takes each
member's own steps can save, so ``serial call / compiled work`` bounds its speed-up.
Then microseconds per gradient evaluation of one member (wall time / total
evaluations; DOP853 runs), and for the MLP the cost of one batched right-hand side for B
members against B serial evaluations.

Target (issue 26): the ensemble path >= 5x serial calls for B = 16 small networks.

Run: ``python benchmarks/bench_ensemble.py [--groups 4] [--relu-groups 1] [--relu-members 16]
[--relu-rounds 2] [--skip-linear]``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

B = 16
LIN_SIZES = (10, 16, 1)
LIN_T = np.geomspace(1.0, 400.0, 20)
RELU_SIZES = (5, 32, 1)
RELU_T = np.geomspace(0.05, 5.0, 10)
RELU2_SIZES = (10, 16, 1)
RELU2_T = np.geomspace(0.1, 40.0, 20)
TOL = dict(rtol=1e-6, atol=1e-9)


def _timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def linear_case():
    import linearnets as ln
    X, y, _ = ln.scalar_teacher(40, LIN_SIZES[0], 1.0, seed=0)
    return X, y


def relu_case():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, RELU_SIZES[0]))
    return X, np.tanh(X[:, 0])


def relu_cases(n):
    """``(label, X, y, t_eval, inits)`` of the two ReLU networks, ``n`` members each:
    5-32-1 with trained hidden biases (``relu_case``), and 10-16-1 without biases, sigma 0.5,
    on the linear network's data, 20 output times up to 40 (``bench_sweep.relu_point``),
    where a member can slide along kinks for thousands of steps."""
    import linearnets as ln
    X, y = relu_case()
    X2, y2 = linear_case()
    return [("ReLU 5-32-1", X, y, RELU_T, [relu_init(s) for s in range(n)]),
            ("ReLU 10-16-1", X2, y2, RELU2_T,
             [(ln.init_network(RELU2_SIZES, 0.5, seed=s), None) for s in range(n)])]


def relu_init(seed):
    import linearnets as ln
    w = ln.init_network(RELU_SIZES, 1.0, seed=seed)
    b = [0.1 * np.random.default_rng(1000 + seed).standard_normal(RELU_SIZES[1])]
    return w, b


#: Modules whose compiled (numba) entry points the floor measurement times.
COMPILED_MODULES = ("linearnets.sim._kernels", "linearnets.sim.models._linear_kernels",
                    "linearnets.sim.methods._rosw_kernels", "linearnets.sim.methods._erk_kernels",
                    "linearnets.sim._lowrank_kernels")


def _in_compiled(f):
    """``(wall, cpu, compiled, out)``: ``f()``'s wall and CPU seconds, and the wall seconds spent
    inside calls from Python into the package's numba kernels (every dispatcher of
    ``COMPILED_MODULES`` wrapped with a timer for the call; kernels called from compiled code
    are not wrapped, so the total is the time inside the compiled loops)."""
    import importlib
    from numba.core.registry import CPUDispatcher
    acc = [0.0]
    saved = []
    for name in COMPILED_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for attr, fn in list(vars(mod).items()):
            if isinstance(fn, CPUDispatcher):
                def timed(*a, _fn=fn):
                    t = time.perf_counter()
                    try:
                        return _fn(*a)
                    finally:
                        acc[0] += time.perf_counter() - t
                setattr(mod, attr, timed)
                saved.append((mod, attr, fn))
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        out = f()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        for mod, attr, fn in saved:
            setattr(mod, attr, fn)
    return wall, cpu, acc[0], out


def _nfev(out):
    return sum(int(np.sum(o.nfev)) for o in out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--groups", type=int, default=4, help="ensembles of 16 (linear)")
    ap.add_argument("--relu-groups", type=int, default=1, help="ensembles per ReLU network")
    ap.add_argument("--relu-members", type=int, default=B, help="B of the ReLU ensembles")
    ap.add_argument("--relu-rounds", type=int, default=1,
                    help="interleaved rounds of the ReLU paths (the fastest is kept)")
    ap.add_argument("--skip-linear", action="store_true", help="the ReLU rows only")
    args = ap.parse_args(argv)
    import linearnets as ln
    from linearnets.sim import ensemble as ens_mod
    from linearnets.sim.ensemble import _BatchedMLP
    from linearnets.sim.models import parse_options
    from linearnets.sim.prepared import prepare_flow, warm

    warm()
    ens_mod.warm()
    rows = []
    floors = []

    # -- linear -------------------------------------------------------------------------
    if not args.skip_linear:
        X, y = linear_case()
        n = args.groups * B
        inits = [ln.init_network(LIN_SIZES, 0.01, seed=s) for s in range(n)]
        groups = [inits[g * B:(g + 1) * B] for g in range(args.groups)]
        pf = prepare_flow(X, y, LIN_SIZES, LIN_T, **TOL)
        pfd = prepare_flow(X, y, LIN_SIZES, LIN_T, method="DOP853", **TOL)

        paths = [
            ("serial gradient_flow", lambda: [ln.gradient_flow(w, X, y, LIN_T, **TOL) for w in inits]),
            ("serial, method='DOP853'", lambda: [ln.gradient_flow(w, X, y, LIN_T, method="DOP853", **TOL)
                                                 for w in inits]),
            ("serial prepare_flow.run", lambda: [pf.run(w) for w in inits]),
            ("serial prepare_flow.run, DOP853", lambda: [pfd.run(w) for w in inits]),
            (f"ensemble (B = {B}), DOP853", lambda: [ln.gradient_flow_ensemble(
                g, X, y, LIN_T, method="DOP853", **TOL) for g in groups]),
            (f"ensemble (B = {B}), default", lambda: [ln.gradient_flow_ensemble(g, X, y, LIN_T, **TOL)
                                                     for g in groups]),
        ]
        for _, f in paths:          # warm every path once
            f()
        meas = {}
        for rep in range(2):        # the faster of two rounds, interleaved (a shared machine)
            for name, f in paths:
                m = _in_compiled(f)
                if name not in meas or m[0] < meas[name][0]:
                    meas[name] = m
        base_w, base_c = meas["serial gradient_flow"][:2]
        ref_loss = np.array([r.loss[-1] for r in meas["serial gradient_flow"][3]])
        label = "linear 10-16-1"
        for name, _ in paths:
            wall, cpu, comp, out = meas[name]
            note = ""
            if name.startswith("ensemble"):
                loss = np.concatenate([e.loss[:, -1] for e in out])
                note = (f"{out[0].method}/{out[0].backend}; final loss vs serial "
                        f"{float(np.max(np.abs(loss - ref_loss)) / out[0].loss[0, 0]):.1e} of loss(0)")
            rows.append((label, name, wall, n, base_w / wall, f"cpu {base_c / cpu:.2f}x  {note}"))
        print(f"\nfloor of the linear paths, per member (10-16-1, {n} members; wall ms, CPU ms, the "
              f"wall ms inside the compiled loops, evaluations):")
        for name, _ in paths:
            wall, cpu, comp, out = meas[name]
            print(f"  {name:36s} wall {wall / n * 1e3:7.3f}  cpu {cpu / n * 1e3:7.3f}  compiled "
                  f"{comp / n * 1e3:7.3f} ({100 * comp / wall:3.0f}% of wall)  nfev {_nfev(out) / n:6.0f}")
        serial_per = base_w / n
        for name in ("serial prepare_flow.run", "serial prepare_flow.run, DOP853"):
            comp = meas[name][2] / n
            print(f"  compiled work per member on {name.split(', ')[-1] if ',' in name else 'auto'}: "
                  f"{comp * 1e3:.3f} ms = {comp / serial_per:.2f} of a serial call: an ensemble taking "
                  f"each member's own steps is at most {serial_per / comp:.1f}x serial calls "
                  f"(target 5x{' ruled out' if comp > serial_per / 5 else ' reachable'})")
        nfev_s = _nfev(meas["serial, method='DOP853'"][3])
        nfev_e = _nfev(meas[f"ensemble (B = {B}), DOP853"][3])
        dop_t = meas["serial, method='DOP853'"][0]
        prep_t = meas["serial prepare_flow.run, DOP853"][0]
        ens_t = meas[f"ensemble (B = {B}), DOP853"][0]
        floors.append((label, dop_t / nfev_s, prep_t / nfev_s, ens_t / nfev_e, None))

    # -- ReLU ---------------------------------------------------------------------------
    nb = args.relu_members
    kw = dict(activation="relu", **TOL)
    for label, X, y, t_eval, inits in relu_cases(args.relu_groups * nb):
        n = len(inits)
        groups = [inits[g * nb:(g + 1) * nb] for g in range(args.relu_groups)]

        def serial(_inits=inits, X=X, y=y, t_eval=t_eval):
            return [ln.gradient_flow(w, X, y, t_eval, biases=b, backend="numba", **kw)
                    for w, b in _inits]

        def ensemble(backend, _groups=groups, X=X, y=y, t_eval=t_eval):
            return [ln.gradient_flow_ensemble(
                [w for w, _ in g], X, y, t_eval, backend=backend,
                biases_list=None if g[0][1] is None else [b for _, b in g], **kw)
                for g in _groups]

        paths = [("serial gradient_flow (numba)", serial),
                 (f"ensemble (B = {nb}), batched numpy", lambda: ensemble("numpy")),
                 (f"ensemble (B = {nb}), default", lambda: ensemble("auto"))]
        w0, b0 = inits[0]
        ln.gradient_flow(w0, X, y, t_eval[:2], biases=b0, backend="numba", **kw)   # compile
        meas = {}
        for rep in range(args.relu_rounds):      # the faster of the rounds, interleaved
            for name, f in paths:
                m = _in_compiled(f)
                if name not in meas or m[0] < meas[name][0]:
                    meas[name] = m
        base_w, base_c, _, serial_out = meas[paths[0][0]]
        loss_s = np.array([r.loss[-1] for r in serial_out])
        steps = np.array([r.nsteps for r in serial_out])
        for name, _ in paths:
            wall, cpu, _, out = meas[name]
            note = f"cpu {base_c / cpu:.2f}x"
            if name.startswith("ensemble"):
                loss_e = np.concatenate([e.loss[:, -1] for e in out])
                dev = float(np.max(np.abs(loss_e - loss_s)) / serial_out[0].loss[0])
                note += (f"  {out[0].method}/{out[0].backend}; final loss vs serial "
                         f"{dev:.1e} of loss(0)")
            else:
                note += f"  steps per member {steps.min()}-{steps.max()}"
            rows.append((label, name, wall, n, base_w / wall, note))

    X, y = relu_case()
    inits = [relu_init(s) for s in range(B)]
    Y0 = np.stack([np.concatenate([w.ravel() for w in inits[b][0]] + [inits[b][1][0]])
                   for b in range(B)])
    net = _BatchedMLP(((32, 5), (1, 32)), True, parse_options(2, activation="relu"),
                      np.ones(B), X, y.reshape(-1, 1), Y0)
    reps = 500
    rhs_t, _ = _timed(lambda: [net.rhs(Y0, slice(None)) for _ in range(reps)])
    serial_out = [ln.gradient_flow(w, X, y, RELU_T, biases=b, backend="numba", **kw)
                  for w, b in inits]
    serial_t, _ = _timed(lambda: [ln.gradient_flow(w, X, y, RELU_T, biases=b, backend="numba",
                                                   **kw) for w, b in inits])
    floors.append(("ReLU 5-32-1", serial_t / sum(r.nfev for r in serial_out), None, None,
                   rhs_t / reps))

    print(f"\nB = {B} members per ensemble call")
    print(f"{'network':16s} {'path':36s} {'points':>6s} {'wall s':>8s} {'points/s':>9s} "
          f"{'vs serial':>9s}")
    for label, path, dt, npts, ratio, note in rows:
        print(f"{label:16s} {path:36s} {npts:6d} {dt:8.3f} {npts / dt:9.1f} {ratio:8.2f}x  {note}")
    print("\nfloor: us per gradient evaluation of one member (wall / evaluations), and one batched "
          f"rhs of {B} members")
    print(f"{'network':16s} {'serial':>9s} {'prepared':>9s} {'ensemble':>9s} "
          f"{'batched rhs':>12s} {'per member':>11s}")
    for label, s, p, e, r in floors:
        ps = f"{p * 1e6:9.2f}" if p is not None else f"{'-':>9s}"
        es = f"{e * 1e6:9.2f}" if e is not None else f"{'-':>9s}"
        rs = f"{r * 1e6:12.1f} {r / B * 1e6:11.2f}" if r is not None else f"{'-':>12s} {'-':>11s}"
        print(f"{label:16s} {s * 1e6:9.2f} {ps} {es} {rs}")


if __name__ == "__main__":
    main()
