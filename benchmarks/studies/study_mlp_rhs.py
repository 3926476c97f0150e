"""How close the MLP model's gradient is to the cost of its matrix products alone.

For the three problems of the MLP benchmark (issue sizes) this times one right-hand side
evaluation of ``linearnets.sim.models.mlp.MLP`` (numpy reference) and of ``MLPNumba``
(the compiled kernels of ``_mlp_kernels``: fused activation/derivative loops around the
same GEMMs) against the same GEMMs alone on arrays of the same shapes, in the same run,
and prints the ratios, the FLOP rate of one evaluation and its fraction of this
machine's float64 GEMM rate (``problems.gemm_rate``, 1024^2 and 2048^2 products,
measured in the same run); ``nb/bound`` is the compiled evaluation against its FLOP bound,
its FLOPs (forward, weight gradients, back-propagation) at that rate, as
``bench_flow.py`` bounds the linear gradient.  A ratio to the GEMMs near 1 leaves nothing
to win on the products; what is left is the elementwise and Python overhead, which the
ratio measures.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/studies/study_mlp_rhs.py [--quick]

With ``--lambda`` it estimates instead the largest eigenvalue of the flow's Jacobian at
t = 0 on bench_mlp's large problem (power iteration on finite differences of the compiled
right-hand side) and the evaluations that stability alone then asks of each explicit
method over its horizon (``|lambda| t_end / boundary`` steps).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # bench_flow

from problems import gemm_rate  # noqa: E402
from linearnets.sim.models import parse_options  # noqa: E402
from linearnets.sim.models.mlp import MLP, MLPNumba  # noqa: E402
from linearnets.network import init_network  # noqa: E402

PROBLEMS = {
    "small": ((10, 64, 64, 1), 200, "relu", "mse"),
    "smooth": ((10, 64, 64, 1), 200, "tanh", "mse"),
    "medium": ((64, 256, 256, 256, 1), 1000, ("softplus", 5.0), "soft_hinge"),
    "tanh256": ((64, 256, 256, 256, 1), 1000, "tanh", "mse"),
    "relu512": ((64, 512, 512, 1), 1000, "relu", "mse"),
    "large": ((64, 1024, 1024, 1), 2000, "relu", "mse"),
}


def best_time(fn, budget=1.0, min_reps=5, max_reps=200):
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
    rate = gemm_rate()
    print(f"float64 GEMM rate (1024^2/2048^2 products): {rate / 1e9:.1f} GFLOP/s")
    print(f"{'problem':8s} {'numpy ms':>9s} {'numba ms':>9s} {'np/nb':>6s} {'GEMMs ms':>9s} "
          f"{'nb/GEMMs':>8s} {'nb GFLOP/s':>10s} {'of GEMM':>8s} {'bound ms':>9s} "
          f"{'nb/bound':>8s}")
    for name, (sizes, P, act, loss) in PROBLEMS.items():
        if quick and name in ("large", "relu512"):
            continue
        ws = init_network(sizes, 1.0, seed=0)
        X = rng.standard_normal((P, sizes[0]))
        Y = np.sign(rng.standard_normal((P, 1)))
        L = len(ws)
        opts = parse_options(L, activation=act, loss=loss)
        net = MLP(ws, None, opts).prepare(X, Y)
        nb = MLPNumba(ws, None, opts).prepare(X, Y)
        y = net.y0.copy()
        out = np.empty_like(y)
        t_rhs = best_time(lambda: net.rhs(y, out))
        nb.rhs(y, out)                             # compile (or load from the cache)
        t_nb = best_time(lambda: nb.rhs(y, out))
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
        bound = flops / rate      # the FLOP bound, as bench_flow.py measures the linear one
        print(f"{name:8s} {1e3 * t_rhs:9.3f} {1e3 * t_nb:9.3f} {t_rhs / t_nb:6.2f} "
              f"{1e3 * t_gemm:9.3f} {t_nb / t_gemm:8.2f} {flops / t_nb / 1e9:10.1f} "
              f"{flops / t_nb / rate:8.0%} {1e3 * bound:9.3f} {t_nb / bound:8.2f}", flush=True)


def stability_floor(name="large", iterations=14):
    """Power iteration for the Jacobian's largest eigenvalue at t = 0 on a bench_mlp problem."""
    import bench_mlp
    from linearnets.sim import methods
    from linearnets.sim.models import get_model

    pb = bench_mlp.make(name, False)
    kw = pb["kw"]
    opts = parse_options(len(pb["ws"]), **{k: v for k, v in kw.items() if k in (
        "activation", "multipliers", "alpha", "centered", "loss", "lr_scales")})
    net = get_model("mlp").numba_model(pb["ws"], None, opts).prepare(pb["X"], pb["Y"])
    y = net.y0.copy()
    f0 = net.rhs(y).copy()
    v = np.random.default_rng(0).standard_normal(y.size)
    v /= np.linalg.norm(v)
    eps = 1e-6 * np.linalg.norm(y)
    for it in range(iterations):
        Jv = (net.rhs(y + eps * v) - f0) / eps
        ray, norm = float(v @ Jv), float(np.linalg.norm(Jv))
        print(f"iteration {it}: Rayleigh quotient {ray:.4e}, |Jv| {norm:.4e}", flush=True)
        v = Jv / norm
    t_end = pb["t_end"]
    print(f"{name}: |lambda_max| ~ {norm:.4g} at t = 0, |lambda| t_end = {norm * t_end:.4g}")
    for m in ("DOP853", "RK45", "SSPRK104"):
        tab = methods.STEPPERS[m].tableau
        steps = norm * t_end / tab.stability_boundary
        print(f"  {m}: boundary {tab.stability_boundary:.4g}, >= {steps:.0f} steps = "
              f"{steps * tab.n_stages:.0f} evaluations")
    print(f"  GD: dt <= 2/|lambda| = {2 / norm:.3g}, >= {norm * t_end / 2:.0f} steps")


if __name__ == "__main__":
    if "--lambda" in sys.argv:
        stability_floor()
    else:
        main(quick="--quick" in sys.argv)
