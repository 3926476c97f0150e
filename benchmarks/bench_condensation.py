"""Speed and memory of ``ln.condensation``'s orientation count against complete linkage.

The baseline is the count ``ln.condensation`` used before: the (n, n) cosine matrix
and scipy's complete-linkage clustering at cosine distance eps (O(n^2) memory,
O(n^2 log n) time).  Both run here, in the same process, on the same units:

* ``circle``: 1-d inputs with a bias, u_k = (w_k, b_k) in R^2 (the Luo and Zhou
  experiments): "condensed" = 3 directions with 0.01 rad spread (with or without 5 %
  of the units spread uniformly), "spread" = uniform directions;
* ``sphere``: u_k in R^3, condensed into 5 directions (the cap count).

It prints best-of-N times (interleaved: other jobs on the machine slow both alike),
their ratio, the peak traced memory of each (numpy reports its buffers to
tracemalloc) and both counts (equal for separated groups; on spread units the new
count is the fewest groups with every pair within the tolerance, complete linkage
finds more); then the new count alone at the sizes the baseline
cannot reach (n = 32,000: its cosine and distance matrices need ~20 GB).

Run:  PYTHONPATH=. python benchmarks/bench_condensation.py [--n 3000] [--big 32000] [--repeat 3]
"""
import argparse
import pathlib
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import linearnets as ln  # noqa: E402


def complete_linkage_count(U, eps):
    """The former count: complete-linkage clusters of the cosine matrix at distance eps."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    U = U / np.linalg.norm(U, axis=1)[:, None]
    dist = np.clip(1.0 - U @ U.T, 0.0, 2.0)
    dist = 0.5 * (dist + dist.T)
    np.fill_diagonal(dist, 0.0)
    labels = fcluster(linkage(squareform(dist, checks=False), method="complete"), t=eps,
                      criterion="distance")
    return int(np.unique(labels).size)


def new_count(U, eps):
    return ln.condensation(U[:, :-1], b=U[:, -1], eps=eps, cosines=False)[1]


def units(kind, n, rng):
    if kind.startswith("circle, condensed"):
        th = rng.choice([0.4, 2.1, 4.0], n) + 0.01 * rng.standard_normal(n)
        if kind.endswith("spread"):
            spread = rng.random(n) < 0.05
            th[spread] = rng.uniform(0, 2 * np.pi, spread.sum())
        return np.column_stack([np.cos(th), np.sin(th)]) * rng.uniform(0.5, 2.0, (n, 1))
    if kind == "circle, spread":
        th = rng.uniform(0, 2 * np.pi, n)
        return np.column_stack([np.cos(th), np.sin(th)])
    C = rng.standard_normal((5, 3))
    return C[rng.integers(0, 5, n)] + 0.01 * rng.standard_normal((n, 3))


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def peak_mb(fn, *args):
    tracemalloc.start()
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2 ** 20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000, help="size for the comparison (baseline O(n^2))")
    ap.add_argument("--big", type=int, default=32000, help="size for the new count alone")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--eps", type=float, default=ln.regimes.CONDENSE_EPS)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    kinds = ("circle, condensed", "circle, condensed + 5 % spread", "circle, spread", "sphere, condensed")
    print(f"ln.condensation count against complete linkage, n = {args.n}, eps = {args.eps}, "
          f"best of {args.repeat} interleaved (same run, same units)")
    print(f"{'units':31s} {'linkage s':>10s} {'new s':>9s} {'ratio':>8s} {'linkage MB':>11s} {'new MB':>8s}"
          f" {'counts':>10s}")
    for kind in kinds:
        U = units(kind, args.n, rng)
        t_old = t_new = np.inf
        for _ in range(args.repeat):
            t, n_old = timed(complete_linkage_count, U, args.eps)
            t_old = min(t_old, t)
            t, n_new = timed(new_count, U, args.eps)
            t_new = min(t_new, t)
        m_old, m_new = peak_mb(complete_linkage_count, U, args.eps), peak_mb(new_count, U, args.eps)
        print(f"{kind:31s} {t_old:10.3f} {t_new:9.5f} {t_old / t_new:8.0f} {m_old:11.1f} {m_new:8.2f}"
              f" {n_old:4d} {n_new:4d}")
    print(f"\nnew count alone, n = {args.big} (the baseline would need {3 * 8 * args.big ** 2 / 2 ** 30:.0f} GB)")
    for kind in kinds:
        U = units(kind, args.big, rng)
        t_new = np.inf
        for _ in range(args.repeat):
            t, n_new = timed(new_count, U, args.eps)
            t_new = min(t_new, t)
        print(f"{kind:31s} {t_new:9.4f} s  {peak_mb(new_count, U, args.eps):7.2f} MB  count {n_new}")


if __name__ == "__main__":
    main()
