"""The ensemble's batched-evaluation design, measured before it is built: one compiled kernel
that evaluates the gradient of all B members of a small two-layer ReLU ensemble at once (the
member axis innermost, so that the compiler vectorises across members), against B calls of
the package's own compiled gradient (``_mlp_kernels.mlp_rhs``, what each member's loop calls
at every stage), both from compiled loops (no Python per evaluation), one thread.

Printed per problem: microseconds per member-evaluation of each, their ratio (the most a
batched integrator could gain per evaluation over B serial loops; its own step control adds
to the batched side), and the FLOP bound (multiply-adds of one member's gradient at this
machine's float64 GEMM rate from ``benchmarks/problems.gemm_rate``).  The two gradients are
checked against each other first (relative difference printed).

Problems: 10-16-1 and 5-32-1 ReLU, P = 40 (the sweep's point of ``bench_ensemble.py``), B = 16.

Usage::

    python benchmarks/studies/study_batched_eval.py [--B 16] [--repeats 2000] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from problems import gemm_rate  # noqa: E402

import linearnets as ln  # noqa: E402
from linearnets.sim.models import get_model, parse_options  # noqa: E402
from linearnets.sim.models._mlp_kernels import mlp_rhs  # noqa: E402


@njit(cache=False, nogil=True)
def serial(ys, out, data, repeats):
    """B calls of the package's compiled gradient, ``repeats`` times."""
    for _ in range(repeats):
        for b in range(ys.shape[0]):
            mlp_rhs(ys[b], out[b], data)


@njit(cache=False, nogil=True, fastmath=True, error_model="numpy")
def batched_grad(W1, W2, X, Y, H, G, gW1, gW2):
    """All members at once, members innermost: W1 (N, D, B), W2 (N, B), X (P, D), Y (P,);
    scratch H (N, B), G (P, B); out gW1 (N, D, B), gW2 (N, B) = -dL/dW, L = (1/2P) sum r^2.
    Each innermost loop runs over the B members of one contiguous row (SIMD across members)."""
    N, D, B = W1.shape
    P = X.shape[0]
    gW1[...] = 0.0
    gW2[...] = 0.0
    for p in range(P):                            # one sample at a time: H (N, B) stays in L1
        g = G[p]
        g[:] = 0.0
        for i in range(N):
            h = H[i]
            h[:] = 0.0
            for d in range(D):
                x = X[p, d]
                w = W1[i, d]
                for b in range(B):
                    h[b] += x * w[b]
            w2 = W2[i]
            for b in range(B):
                v = max(h[b], 0.0)
                h[b] = v
                g[b] += w2[b] * v
        inv = 1.0 / P
        for b in range(B):
            g[b] = (Y[p] - g[b]) * inv            # -dL/dF
        for i in range(N):
            h = H[i]
            w2 = W2[i]
            gw2 = gW2[i]
            for b in range(B):
                gw2[b] += g[b] * h[b]
                # the ReLU's pattern: the unit is on where its rectified activation is > 0
                h[b] = g[b] * w2[b] if h[b] > 0.0 else 0.0
            for d in range(D):
                x = X[p, d]
                gw1 = gW1[i, d]
                for b in range(B):
                    gw1[b] += h[b] * x


@njit(cache=False, nogil=True)
def batched(W1, W2, X, Y, H, G, gW1, gW2, repeats):
    for _ in range(repeats):
        batched_grad(W1, W2, X, Y, H, G, gW1, gW2)


def one(sizes, B, repeats, rounds, rate):
    D, N, _ = sizes
    X, y, _ = ln.scalar_teacher(40, D, 1.0, seed=0)
    nets = [ln.init_network(sizes, 0.5, seed=s) for s in range(B)]
    options = parse_options(2, activation="relu")
    model = get_model("mlp").numba_model(nets[0], None, options).prepare(X, y)
    data = model.descent_ops()[1]
    ys = np.stack([np.concatenate([w.ravel() for w in net]) for net in nets])
    out = np.empty_like(ys)
    W1 = np.ascontiguousarray(np.stack([n[0] for n in nets], axis=-1))      # (N, D, B)
    W2 = np.ascontiguousarray(np.stack([n[1][0] for n in nets], axis=-1))   # (N, B)
    H, G = np.empty((N, B)), np.empty((40, B))
    gW1, gW2 = np.empty_like(W1), np.empty_like(W2)
    serial(ys, out, data, 1)
    batched(W1, W2, X, y, H, G, gW1, gW2, 1)
    ref = np.concatenate([gW1.transpose(2, 0, 1).reshape(B, -1), gW2.T], axis=1)
    diff = np.max(np.abs(ref - out)) / np.max(np.abs(out))
    ts, tb = np.inf, np.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        serial(ys, out, data, repeats)
        ts = min(ts, (time.perf_counter() - t0) / (repeats * B))
        t0 = time.perf_counter()
        batched(W1, W2, X, y, H, G, gW1, gW2, repeats)
        tb = min(tb, (time.perf_counter() - t0) / (repeats * B))
    macs = 40 * N * D * 3 + 40 * N * 3            # forward, both weight gradients, the deltas
    print(f"| {'-'.join(map(str, sizes))} | {ts * 1e6:.2f} | {tb * 1e6:.2f} | {ts / tb:.2f}x | "
          f"{2 * macs / rate * 1e6:.2f} | {diff:.1e} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    with threadpool_limits(1):
        rate = gemm_rate()
        print(f"load average {os.getloadavg()[0]:.2f}; B = {args.B}, P = 40, one thread; "
              f"GEMM {rate / 1e9:.1f} GFLOP/s")
        print("| net | serial gradient (us/member) | batched (us/member) | serial / batched | "
              "FLOP bound (us) | max rel. diff |")
        print("|---|---|---|---|---|---|")
        for sizes in ((10, 16, 1), (5, 32, 1)):
            one(sizes, args.B, args.repeats, args.rounds, rate)


if __name__ == "__main__":
    main()
