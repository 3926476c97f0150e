"""Ensemble throughput: B = 16 initialisations in one ``gradient_flow_ensemble`` call against serial calls.

Two small networks, as in ``bench_sweep.py``:

- linear 10-16-1, P = 40 whitened samples of a scalar teacher, sigma = 0.01,
  20 output times up to 400 (convergence), rtol 1e-6, atol 1e-9;
- ReLU 5-32-1 (trained hidden biases), P = 50 Gaussian inputs, y = tanh(x_1),
  sigma = 1, 10 output times up to 5, rtol 1e-6, atol 1e-9.

Rows, all measured in this run: serial ``ln.gradient_flow`` calls (the baseline; for the
linear network also with ``method="DOP853"``, the ensemble's method),
serial ``prepare_flow(...).run`` (linear only), and the ensemble path (B = 16
members per call).  Accuracy is equal by construction (the ensemble controls each
member's error as a run of it alone does, at the same rtol); the table prints the
largest difference of the final losses between the two, relative to the initial
loss.  Then the floor of each path: microseconds per gradient evaluation of one
member (wall time / total evaluations; the linear serial and prepared columns are the
DOP853 runs), and the cost of one batched right-hand
side for B members against B serial evaluations.

Target (issue 26): the ensemble path >= 5x serial calls for B = 16 small networks.

Run: ``python benchmarks/bench_ensemble.py [--groups 4] [--relu-groups 1]``.
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


def relu_init(seed):
    import linearnets as ln
    w = ln.init_network(RELU_SIZES, 1.0, seed=seed)
    b = [0.1 * np.random.default_rng(1000 + seed).standard_normal(RELU_SIZES[1])]
    return w, b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--groups", type=int, default=4, help="ensembles of 16 (linear)")
    ap.add_argument("--relu-groups", type=int, default=1, help="ensembles of 16 (ReLU)")
    args = ap.parse_args(argv)
    import linearnets as ln
    from linearnets.sim.ensemble import _BatchedLinear, _BatchedMLP
    from linearnets.sim.models import parse_options
    from linearnets.sim.prepared import prepare_flow, warm

    warm()
    rows = []
    floors = []

    # -- linear -------------------------------------------------------------------------
    X, y = linear_case()
    n = args.groups * B
    inits = [ln.init_network(LIN_SIZES, 0.01, seed=s) for s in range(n)]
    ln.gradient_flow(inits[0], X, y, LIN_T, **TOL)
    ln.gradient_flow_ensemble(inits[:B], X, y, LIN_T, **TOL)
    serial_t, serial = _timed(lambda: [ln.gradient_flow(w, X, y, LIN_T, **TOL) for w in inits])
    # the same explicit method as the ensemble (the default "auto" switches to the L-stable
    # ROS34PW2 once converged modes make the flow stiff, here from t ~ 47 on)
    dop_t, dop = _timed(lambda: [ln.gradient_flow(w, X, y, LIN_T, method="DOP853", **TOL)
                                 for w in inits])
    pf = prepare_flow(X, y, LIN_SIZES, LIN_T, **TOL)
    prep_t, _ = _timed(lambda: [pf.run(w) for w in inits])
    ln.gradient_flow_ensemble(inits[:B], X, y, LIN_T, backend="numpy", **TOL)
    ensnp_t, _ = _timed(lambda: [ln.gradient_flow_ensemble(
        inits[g * B:(g + 1) * B], X, y, LIN_T, backend="numpy", **TOL)
        for g in range(args.groups)])
    ens_t, ens = _timed(lambda: [ln.gradient_flow_ensemble(inits[g * B:(g + 1) * B], X, y, LIN_T,
                                                           **TOL) for g in range(args.groups)])
    loss_e = np.concatenate([e.loss[:, -1] for e in ens])
    loss_s = np.array([r.loss[-1] for r in serial])
    dev = float(np.max(np.abs(loss_e - loss_s)) / serial[0].loss[0])
    label = "linear 10-16-1"
    rows += [(label, "serial gradient_flow", serial_t, n, 1.0, ""),
             (label, "serial, method='DOP853'", dop_t, n, serial_t / dop_t, ""),
             (label, "serial prepare_flow.run", prep_t, n, serial_t / prep_t, ""),
             (label, f"ensemble (B = {B}), numpy", ensnp_t, n, serial_t / ensnp_t,
              f"vs DOP853 serial {dop_t / ensnp_t:.2f}x"),
             (label, f"ensemble (B = {B}), {ens[0].backend}", ens_t, n, serial_t / ens_t,
              f"final loss vs serial: {dev:.1e} of loss(0); "
              f"{serial_t / ens_t * dop_t / serial_t:.2f}x... see below"[:60])]
    rows[-1] = rows[-1][:5] + (f"final loss vs serial: {dev:.1e} of loss(0); vs DOP853 serial "
                               f"{dop_t / ens_t:.2f}x",)
    nfev_s = sum(r.nfev for r in dop)
    nfev_e = sum(int(e.nfev.sum()) for e in ens)
    serial_t = dop_t
    # one batched rhs of B members against the compiled serial loop's cost per evaluation
    Y0 = np.stack([np.concatenate([w.ravel() for w in inits[b]]) for b in range(B)])
    net = _BatchedLinear(tuple((LIN_SIZES[i + 1], LIN_SIZES[i]) for i in range(2)),
                         parse_options(2), np.ones(B), X, y.reshape(-1, 1), Y0)
    reps = 2000
    rhs_t, _ = _timed(lambda: [net.rhs(Y0, slice(None)) for _ in range(reps)])
    floors.append((label, serial_t / nfev_s, prep_t / nfev_s, ens_t / nfev_e, rhs_t / reps))

    # -- ReLU ---------------------------------------------------------------------------
    X, y = relu_case()
    n = args.relu_groups * B
    inits = [relu_init(s) for s in range(n)]
    kw = dict(activation="relu", **TOL)
    ln.gradient_flow(inits[0][0], X, y, RELU_T[:2], biases=inits[0][1], **kw)
    serial_t, serial = _timed(lambda: [ln.gradient_flow(w, X, y, RELU_T, biases=b, **kw)
                                       for w, b in inits])
    ens_t, ens = _timed(lambda: [ln.gradient_flow_ensemble(
        [w for w, _ in inits[g * B:(g + 1) * B]], X, y, RELU_T,
        biases_list=[b for _, b in inits[g * B:(g + 1) * B]], **kw)
        for g in range(args.relu_groups)])
    loss_e = np.concatenate([e.loss[:, -1] for e in ens])
    loss_s = np.array([r.loss[-1] for r in serial])
    dev = float(np.max(np.abs(loss_e - loss_s)) / serial[0].loss[0])
    label = "ReLU 5-32-1"
    rows += [(label, "serial gradient_flow", serial_t, n, 1.0, ""),
             (label, f"ensemble (B = {B}), {ens[0].backend}", ens_t, n, serial_t / ens_t,
              f"final loss vs serial: {dev:.1e} of loss(0)")]
    nfev_s = sum(r.nfev for r in serial)
    nfev_e = sum(int(e.nfev.sum()) for e in ens)
    Y0 = np.stack([np.concatenate([w.ravel() for w in inits[b][0]] + [inits[b][1][0]])
                   for b in range(B)])
    net = _BatchedMLP(((32, 5), (1, 32)), True, parse_options(2, activation="relu"),
                      np.ones(B), X, y.reshape(-1, 1), Y0)
    reps = 500
    rhs_t, _ = _timed(lambda: [net.rhs(Y0, slice(None)) for _ in range(reps)])
    floors.append((label, serial_t / nfev_s, None, ens_t / nfev_e, rhs_t / reps))

    print(f"\nB = {B} members per ensemble call")
    print(f"{'network':16s} {'path':30s} {'points':>6s} {'wall s':>8s} {'points/s':>9s} "
          f"{'vs serial':>9s}")
    for label, path, dt, npts, ratio, note in rows:
        print(f"{label:16s} {path:30s} {npts:6d} {dt:8.3f} {npts / dt:9.1f} {ratio:8.2f}x  {note}")
    print("\nfloor: us per gradient evaluation of one member (wall / evaluations), and one batched "
          f"rhs of {B} members")
    print(f"{'network':16s} {'serial':>9s} {'prepared':>9s} {'ensemble':>9s} "
          f"{'batched rhs':>12s} {'per member':>11s}")
    for label, s, p, e, r in floors:
        ps = f"{p * 1e6:9.2f}" if p is not None else f"{'-':>9s}"
        print(f"{label:16s} {s * 1e6:9.2f} {ps} {e * 1e6:9.2f} {r * 1e6:12.1f} "
              f"{r / B * 1e6:11.2f}")


if __name__ == "__main__":
    main()
