"""How close the MLP model's numpy gradient is to the cost of its matrix products alone.

For the three problems of the MLP benchmark (issue sizes) this times one right-hand side
evaluation of ``linearnets.sim.models.mlp.MLP`` (forward pass kept, backpropagation, the
elementwise activation work and the per-layer scalings) against the same GEMMs alone on
arrays of the same shapes, in the same run, and prints the ratio and the GEMM rate.  A
ratio near 1 leaves nothing for a compiled kernel to win on the products; what is left
is the elementwise and Python overhead, which the ratio measures.

    python benchmarks/study_mlp_rhs.py [--quick]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from linearnets.sim.models import get_model, parse_options
from linearnets.sim.network import init_network

PROBLEMS = {
    "small": ((10, 64, 64, 1), 200, "relu", "mse"),
    "medium": ((64, 256, 256, 256, 1), 1000, "softplus", "soft_hinge"),
    "large": ((64, 1024, 1024, 1), 2000, "relu", "mse"),
}


def best_time(fn, budget=0.3, min_reps=3, max_reps=200):
    times = []
    t_start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - t_start < budget
                                    and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(quick=False):
    rng = np.random.default_rng(0)
    print(f"{'problem':8s} {'rhs ms':>9s} {'GEMMs ms':>9s} {'ratio':>6s} {'GFLOP/s':>8s}")
    for name, (sizes, P, act, loss) in PROBLEMS.items():
        if quick and name == "large":
            continue
        ws = init_network(sizes, 1.0, seed=0)
        X = rng.standard_normal((P, sizes[0]))
        Y = np.sign(rng.standard_normal((P, 1)))
        L = len(ws)
        net = get_model("mlp")(ws, None, parse_options(L, activation=act, loss=loss)).prepare(X, Y)
        y = net.y0.copy()
        out = np.empty_like(y)
        t_rhs = best_time(lambda: net.rhs(y, out))
        # the products alone: forward H W^T, backward G^T H and G W, per layer
        Hs = [rng.standard_normal((P, n)) for n in sizes[:-1]]
        Gs = [rng.standard_normal((P, n)) for n in sizes[1:]]
        flops = 0
        for l in range(L):
            flops += 2 * P * sizes[l] * sizes[l + 1] * (3 if l > 0 else 2)

        def gemms():
            for l in range(L):
                Hs[l] @ ws[l].T
                Gs[l].T @ Hs[l]
                if l > 0:
                    Gs[l] @ ws[l]
        t_gemm = best_time(gemms)
        print(f"{name:8s} {1e3 * t_rhs:9.3f} {1e3 * t_gemm:9.3f} {t_rhs / t_gemm:6.2f} "
              f"{flops / t_gemm / 1e9:8.1f}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
