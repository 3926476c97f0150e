"""Reproduce the paper's verification figures at paper-sized settings.

Usage::

    python benchmarks/verify_paper.py [--out DIR] [--only NAME ...] [--backend auto] [--seed 0]

Runs the comparisons of :mod:`linearnets.compare` at the sizes of Atanasov,
Bordelon & Pehlevan (2022) — e.g. Fig. 3: L = 3, D = 30, N = 50, sigma^2 from
1e-5 to 1e-1 — prints the reproduced table (theory, simulation, error,
predicted tolerance) and saves the figures and a Markdown report.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import linearnets as ln  # noqa: E402
from linearnets.cli import format_table, write_report  # noqa: E402


def fig3(seed, backend):
    """Fig. 3: t_1/2 against sigma^2 in [1e-5, 1e-1] for L = 2, and L = 3 (D = 30, N = 50)."""
    rows = [ln.compare_half_time_scaling(depths=(2,), sigmas=np.sqrt(np.geomspace(1e-5, 1e-1, 9)),
                                         D=30, N=50, P=60, seed=seed, backend=backend),
            ln.compare_half_time_scaling(depths=(3,), sigmas=np.sqrt(np.geomspace(1e-4, 1e-2, 7)),
                                         D=30, N=50, P=60, seed=seed, backend=backend),
            ln.compare_half_time_scaling(depths=(4, 5), sigmas=np.sqrt(np.geomspace(1e-2, 6e-2, 5)),
                                         D=30, N=50, P=60, seed=seed, backend=backend)]
    return [_renamed(r, f"fig3_{tag}") for r, tag in zip(rows, ("L2", "L3", "L45"))]


def _renamed(res, name):
    import dataclasses
    return dataclasses.replace(res, name=name, kind=res.kind)


EXPERIMENTS = {
    "figC2": lambda seed, backend: [_renamed(ln.compare_learning_curves(
        sigmas=np.geomspace(0.1, 0.001, 5), D=50, N=50, P=100, seed=seed, backend=backend), "figC2_learning_curves")],
    "figC3": lambda seed, backend: [_renamed(ln.compare_phase_one(D=25, N=10, P=50, sigma=0.01, seed=seed,
                                                                  backend=backend), "figC3_phase_one"),
                                    ln.compare_initial_moments(width=10, input_dim=25, sigma=0.1,
                                                               n_samples=20000, seed=seed)],
    "fig3": fig3,
    "modes": lambda seed, backend: [ln.compare_mode_strengths(depths=(2, 3, 4, 5, 6), spectrum=(4.0, 3.0, 2.0, 1.0),
                                                              D=30, N=50, P=60, sigma=0.2, seed=seed,
                                                              backend=backend)],
    "figE1_E3": lambda seed, backend: [_renamed(ln.compare_final_ntk(
        depths=(2, 3, 4, 5, 6), sigmas=(0.2, 0.1, 0.05), D=30, N=50, P=60, seed=seed, backend=backend),
        "figE1_E3_final_ntk")],
    "fig2": lambda seed, backend: [_renamed(ln.compare_silent_alignment(D=50, N=50, P=100, sigma=1e-3, seed=seed,
                                                                        backend=backend), "fig2_silent_alignment"),
                                   ln.compare_kernel_gap(gammas=np.linspace(0, 1, 5), Ps=(50, 25), D=50, N=50,
                                                         seed=seed, backend=backend)],
    "appG": lambda seed, backend: [ln.compare_kernel_path(D=50, N=50, P=25, n_probe=16, seed=seed,
                                                          backend=backend)],
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="benchmarks/verify_paper_out")
    p.add_argument("--only", nargs="*", choices=sorted(EXPERIMENTS))
    p.add_argument("--backend", default="auto")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    results = []
    t0 = time.perf_counter()
    for name in args.only or EXPERIMENTS:
        t1 = time.perf_counter()
        rows = EXPERIMENTS[name](args.seed, args.backend)
        results.extend(rows)
        print(f"[{name}: {time.perf_counter() - t1:.1f} s]", flush=True)
    elapsed = time.perf_counter() - t0
    print(format_table(results))
    for r in results:
        print(f"- {r.name}: {r.notes}")
    path = write_report(results, args.out, settings=f"paper-sized, seed={args.seed}, backend={args.backend}",
                        elapsed=elapsed)
    print(f"report: {path}; {sum(r.passed for r in results)}/{len(results)} passed in {elapsed:.1f} s")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
