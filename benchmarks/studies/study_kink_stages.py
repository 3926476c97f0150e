"""Random-data ReLU flows that slide along kinks: evaluations of ROS34PW2 and DOP853.

The 4-10-10-1 ReLU problems of ``tests/sim/test_rosw_general.py`` (``_net_problem``: P = 24
Gaussian inputs, targets ``tanh(x_1 - x_2 / 2)``, ``init_network(sizes, 1.2, seed)``)
reach kinks and slide along them for most of t in [0, 2].  This prints, for each seed
and method, success, evaluations, steps, rejections, kinks crossed, time sliding and
fallback steps (rtol 1e-6, kink_rtol 1e-4, numba backend).

Run: ``python benchmarks/studies/study_kink_stages.py [--seeds 4,5]``.
"""
import argparse
import time

import numpy as np

import linearnets as ln


def problem(seed, P=24, sizes=(4, 10, 10, 1)):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, sizes[0]))
    Y = np.tanh(X[:, :1] - 0.5 * X[:, 1:2])
    return ln.init_network(sizes, 1.2, seed=seed), X, Y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="4,5")
    args = ap.parse_args()
    print(f"{'seed':>4} {'method':>9} {'ok':>5} {'nfev':>8} {'steps':>6} {'rej':>6} "
          f"{'kinks':>6} {'sliding':>8} {'fallback':>8} {'time':>7}")
    for seed in (int(s) for s in args.seeds.split(",")):
        ws, X, Y = problem(seed)
        for m in ("ROS34PW2", "DOP853"):
            t0 = time.perf_counter()
            tr = ln.gradient_flow(ws, X, Y, np.array([0.0, 2.0]), rtol=1e-6, kink_rtol=1e-4,
                                  activation="relu", method=m, backend="numba",
                                  max_steps=20000)
            print(f"{seed:>4} {m:>9} {str(tr.success):>5} {tr.nfev:>8} {tr.nsteps:>6} "
                  f"{tr.nrejected:>6} {tr.kinks:>6} {tr.sliding_time:>8.3f} "
                  f"{tr.fallback_steps:>8} {time.perf_counter() - t0:>6.1f}s", flush=True)


if __name__ == "__main__":
    main()
