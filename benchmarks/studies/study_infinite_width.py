"""The infinite-width kernels: quadrature convergence, accuracy over scales, time of a (2000, 2000) kernel.

1. E[tanh(u) tanh(v)] and E[tanh'(u) tanh'(v)] at O(1) scales by 2-D Gauss-Hermite (n nodes a
   side), by 2-D composite Gauss-Legendre on [-9, 9] (panels x 16 nodes a side), by the
   package's Mehler series (its order and computed bound) and by its Gaussian scale-mixture
   rule, against a composite GL reference with twice the panels; 1b. the scale-mixture rule's
   convergence in its node count against the graded 2-D rule over scales 1e-3..1e2.
2. Accuracy over pre-activation scales: ``infinite_width_kernels`` at depth 2 (NNGP =
   E[phi phi], NTK = E[phi' phi'] x.x'/D + E[phi phi]) for standard deviations 1e-3..1e2 and
   correlations -1..1 against the kink-graded 2-D rule of ``theory/_reference_gaussian.py``:
   the largest error relative to sqrt(K_ii K_jj), and which rule the package used.
3. ``infinite_width_kernels`` on a (2000, 2000) problem at depth 4 (relu, tanh, softplus;
   best of 3), and on (400, 400) at large scale (sigma = 4: every sample beyond the Mehler
   series, Geiger et al.'s softplus beta = 5), against the direct 2-D composite GL rule
   timed per pair on 300 pairs in the same run and scaled to the pairs and 3 layers: the
   ratio is the speed-up (times here are shared-machine wall clock: only the ratio means
   anything).

Run: ``PYTHONPATH=$PWD python benchmarks/studies/study_infinite_width.py [--quick]``
"""
import argparse
import math
import pathlib
import sys
import time

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from numpy.polynomial.legendre import leggauss

import linearnets as ln
from linearnets.theory import _infinite_width_kernels as _k
from linearnets.theory import infinite_width as iw

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "theory"))
from _reference_gaussian import expect_graded  # noqa: E402


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
    g_, dg_, pf, pd, kind, t, w, _ = iw._smooth("tanh", None)
    print("1. 2-D rules for E[g(u) g(v)], error relative to sqrt(E[g(u)^2] E[g(v)^2])")
    print(f"{'g':6s} {'a':>4s} {'c':>4s} {'rho':>6s} | " + " ".join(f"GH{n:<4d}" for n in (20, 40, 80, 160))
          + " | " + " ".join(f"GL{p:<2d}x16" for p in (6, 12, 24, 36)) + " | Mehler N, bound, error | mixture")
    for k, (name, g) in enumerate(fns.items()):
        for a, c, rho in cases:
            ref = expect(g, a, c, rho, gl_rule(72, 20, 10.0))
            scale = math.sqrt(expect(g, a, a, 1 - 1e-300, gl_rule(72, 20, 10.0)) * expect(g, c, c, 1 - 1e-300, gl_rule(72, 20, 10.0)))
            gh = [abs(expect(g, a, c, rho, gh_rule(n)) - ref) / scale for n in (20, 40, 80, 160)]
            gl = [abs(expect(g, a, c, rho, gl_rule(p)) - ref) / scale for p in (6, 12, 24, 36)]
            C, tot, good = iw._mehler_tables(np.array([a, c]), g, np.ones(2, dtype=bool))
            n = C.shape[1]
            bound = float(np.max((tot - np.sum(C * C, axis=1)) / tot))
            mehler = float(np.sum(rho ** np.arange(n) * C[0] * C[1]))
            mix = _k._mix_one(kind, a, c, rho, (1 - rho) * (1 + rho), t, w)[k]
            print(f"{name:6s} {a:4.1f} {c:4.1f} {rho:6.3f} | " + " ".join(f"{e:6.0e}" for e in gh) + " | "
                  + " ".join(f"{e:8.0e}" for e in gl) + f" | {n:4d} {bound:6.0e} {abs(mehler - ref) / scale:6.0e}"
                  + f"   | {abs(mix - ref) / scale:6.0e}")


def mixture_nodes():
    """The scale-mixture rule's convergence in its node count n (per side): the largest error
    over pre-activation scales 1e-3..1e2 and rho in [-1, 1) against the graded 2-D rule."""
    nodes = (8, 12, 16, 20, 24)
    print("\n1b. scale-mixture rule against the graded 2-D rule: the largest error over std in "
          "{1e-3, 0.1, 1, 4, 100} (c = a, a/4) and rho in {-0.9, 0, 0.7, 0.999}, relative to "
          "sqrt(E[g(u)^2] E[g(v)^2]); " + f"n = {nodes} nodes a side (the package: {iw.MIX_NODES})")
    print(f"{'g':20s} " + " ".join(f"{'n=' + str(n):>8s}" for n in nodes))
    for act in ("tanh", ("softplus", 1.0), ("softplus", 5.0)):
        g, dg, _ = _phi(act)
        name, par = (act, None) if act == "tanh" else act
        kind = 0 if name == "tanh" else 1
        refs = []
        for sd in (1e-3, 0.1, 1.0, 4.0, 100.0):
            for a, c in ((sd * sd, sd * sd), (sd * sd, sd * sd / 4)):
                sa = (expect_graded(g, a, a, 1.0) * expect_graded(g, c, c, 1.0)) ** 0.5
                sd_ = (expect_graded(dg, a, a, 1.0) * expect_graded(dg, c, c, 1.0)) ** 0.5
                for rho in (-0.9, 0.0, 0.7, 0.999):
                    refs.append((a, c, rho, expect_graded(g, a, c, rho) / sa, expect_graded(dg, a, c, rho) / sd_,
                                 sa, sd_))
        for which, label in ((0, "g"), (1, "g'")):
            errs = []
            for n in nodes:
                K, wK = iw._kolmogorov_rule(name == "tanh", n)
                t = K * K if name == "tanh" else (2.0 * K / par) ** 2
                worst = 0.0
                for a, c, rho, rf, rd, sa, sd_ in refs:
                    got = _k._mix_one(kind, a, c, rho, (1 - rho) * (1 + rho), t, wK)
                    worst = max(worst, abs(got[which] / (sa, sd_)[which] - (rf, rd)[which]))
                errs.append(worst)
            print(f"{str(act) + ' ' + label:20s} " + " ".join(f"{e:8.0e}" for e in errs), flush=True)


def _phi(act):
    if act == "tanh":
        return np.tanh, (lambda u: 1 - np.tanh(u) ** 2), 1.0
    b = act[1]
    return (lambda u: np.logaddexp(0, b * u) / b), (lambda u: 0.5 * (1 + np.tanh(0.5 * b * u))), b * b


def scales():
    stds = (1e-3, 1e-2, 0.1, 1.0, 2.0, 4.0, 10.0, 100.0)
    rhos = (-1.0, -0.5, 0.0, 0.7, 0.999, 1 - 1e-9, 1.0)
    print("\n2. infinite_width_kernels at depth 2 against the graded 2-D rule: the largest error over "
          f"rho in {rhos} and c = a, a/4, relative to sqrt(K_ii K_jj) (M: Mehler, X: scale mixture)")
    acts = ("tanh", ("softplus", 1.0), ("softplus", 5.0))
    print(f"{'std':>7s} " + " ".join(f"{str(a):>22s}" for a in acts))
    for sd in stds:
        cells = []
        for act in acts:
            g, dg, s2 = _phi(act)
            worst = 0.0
            for sc in (sd, sd / 2):
                for rho in rhos:
                    th = math.acos(rho)
                    X = math.sqrt(2.0) * np.array([[sd, 0.0], [sc * math.cos(th), sc * math.sin(th)]])
                    nngp, ntk = ln.infinite_width_kernels(X, X, 2, act)
                    ef, ed = expect_graded(g, sd * sd, sc * sc, rho), expect_graded(dg, sd * sd, sc * sc, rho)
                    for K, ref in ((nngp, ef), (ntk, ed * (X[0] @ X[1] / 2) + ef)):
                        worst = max(worst, abs(K[0, 1] - ref) / math.sqrt(K[0, 0] * K[1, 1]))
            rule = "M" if sd * sd * s2 <= iw.MEHLER_MAX_SCALE else "X"
            cells.append(f"{worst:20.1e} {rule}")
        print(f"{sd:7g} " + " ".join(cells), flush=True)


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
    print(f"\n3. ({P}, {P}) kernel at depth 4 ({pairs:,} pairs x 3 layers), best of 3")
    g = np.tanh
    rule = gl_rule(36)
    k = 300
    t0 = time.perf_counter()
    for _ in range(k):
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
    Pl = min(P, 400)
    pairs_l = Pl * (Pl + 1) // 2
    print(f"   ({Pl}, {Pl}) at sigma = 4 (pre-activation variances ~16-250: every sample by the scale mixture)")
    for act in ("tanh", ("softplus", 5.0)):
        t = best(lambda: ln.infinite_width_kernels(X[:Pl], X[:Pl], 4, act, sigma=4.0))
        print(f"   {str(act):16s} {t:6.2f} s   ratio to the direct rule {per_pair * pairs_l * 3 / t:8.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="P = 500 instead of 2000")
    args = ap.parse_args()
    convergence()
    mixture_nodes()
    scales()
    timing(500 if args.quick else 2000)
