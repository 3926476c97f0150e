"""The infinite-width kernels: quadrature convergence and the time of a (2000, 2000) kernel.

1. E[tanh(u) tanh(v)] and E[tanh'(u) tanh'(v)] at O(1) scales by 2-D Gauss-Hermite (n nodes a
   side), by 2-D composite Gauss-Legendre on [-9, 9] (panels x 16 nodes a side), and by the
   package's Mehler series (its order and computed bound), against a composite GL
   reference with twice the panels.
2. ``infinite_width_kernels`` on a (2000, 2000) problem at depth 4 (relu, tanh, softplus;
   best of 3) against the direct 2-D composite GL rule (the one that reaches rounding)
   timed per pair on 300 pairs in the same run and scaled to the 2,001,000 pairs and 3
   layers: the ratio is the speed-up (times here are shared-machine wall clock: only the
   ratio means anything).

Run: ``PYTHONPATH=$PWD python benchmarks/study_infinite_width.py [--quick]``
"""
import argparse
import math
import time

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from numpy.polynomial.legendre import leggauss

import linearnets as ln
from linearnets.theory import infinite_width as iw


def gh_rule(n):
    z, w = hermegauss(n)
    return z, w / math.sqrt(2 * math.pi)


def gl_rule(panels, nodes=16, zmax=9.0):
    x, w = leggauss(nodes)
    e = np.linspace(-zmax, zmax, panels + 1)
    h, m = np.diff(e) / 2, (e[1:] + e[:-1]) / 2
    z = (m[:, None] + h[:, None] * x).ravel()
    return z, (h[:, None] * w).ravel() * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def expect(g, a, c, rho, rule):
    z, w = rule
    u = math.sqrt(a) * z
    v = math.sqrt(c) * (rho * z[:, None] + math.sqrt(1 - rho * rho) * z[None, :])
    return float(w @ (g(u)[:, None] * g(v)) @ w)


def convergence():
    fns = {"tanh": np.tanh, "tanh'": lambda u: 1 - np.tanh(u) ** 2}
    cases = [(1.0, 1.0, 0.7), (2.0, 1.0, 0.999), (0.5, 2.0, -0.3)]
    print("1. 2-D rules for E[g(u) g(v)], error relative to sqrt(E[g(u)^2] E[g(v)^2])")
    print(f"{'g':6s} {'a':>4s} {'c':>4s} {'rho':>6s} | " + " ".join(f"GH{n:<4d}" for n in (20, 40, 80, 160))
          + " | " + " ".join(f"GL{p:<2d}x16" for p in (6, 12, 24, 36)) + " | Mehler N, bound, error")
    for name, g in fns.items():
        for a, c, rho in cases:
            ref = expect(g, a, c, rho, gl_rule(72, 20, 10.0))
            scale = math.sqrt(expect(g, a, a, 1 - 1e-300, gl_rule(72, 20, 10.0)) * expect(g, c, c, 1 - 1e-300, gl_rule(72, 20, 10.0)))
            gh = [abs(expect(g, a, c, rho, gh_rule(n)) - ref) / scale for n in (20, 40, 80, 160)]
            gl = [abs(expect(g, a, c, rho, gl_rule(p)) - ref) / scale for p in (6, 12, 24, 36)]
            (Ca, Cc), _, bound = iw._mehler_tables([np.array([a]), np.array([c])], g)
            n = Ca.shape[1]
            mehler = float(np.sum(rho ** np.arange(n) * Ca[0] * Cc[0]))
            print(f"{name:6s} {a:4.1f} {c:4.1f} {rho:6.3f} | " + " ".join(f"{e:6.0e}" for e in gh) + " | "
                  + " ".join(f"{e:8.0e}" for e in gl) + f" | {n:4d} {bound:6.0e} {abs(mehler - ref) / scale:6.0e}")


def best(fn, n=3):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def timing(P):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((P, 10))
    pairs = P * (P + 1) // 2
    print(f"\n2. ({P}, {P}) kernel at depth 4 ({pairs:,} pairs x 3 layers), best of 3")
    g = np.tanh
    rule = gl_rule(36)
    k = 300
    idx = rng.integers(0, P, (k, 2))
    t0 = time.perf_counter()
    for i, j in idx:
        # one layer's two expectations (phi phi, phi' phi') of a pair by the direct 2-D rule
        expect(g, 1.0, 1.2, 0.5, rule)
        expect(g, 1.0, 1.2, 0.5, rule)
    per_pair = (time.perf_counter() - t0) / k
    direct = per_pair * pairs * 3
    print(f"   baseline: direct 2-D composite GL (576^2 nodes) {per_pair * 1e3:.2f} ms per pair and layer"
          f" -> {direct:,.0f} s for the kernel")
    for act in ("relu", "tanh", "softplus"):
        for bias in (False, True):
            ln.infinite_width_kernels(X[:4], X[:4], 4, act, biases=bias, bias_std=1.0)   # compile
            t = best(lambda: ln.infinite_width_kernels(X, X, 4, act, biases=bias, bias_std=1.0))
            print(f"   {act:8s} biases={bias!s:5s} {t:6.2f} s   ratio to the direct rule {direct / t:8.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="P = 500 instead of 2000")
    args = ap.parse_args()
    convergence()
    timing(500 if args.quick else 2000)
